"""`pontual stands|licences|supervisors ...`: the stand registry on the database.

Each change goes through ``db/stands/registry.py`` and is written to the audit log with ``--actor``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli_db import cli_session
from api.inputs import checked_municipality

stands_app = typer.Typer(
    help="Pontos de táxi: criar, alterar, desativar, listar, detalhar.", no_args_is_help=True
)
licences_app = typer.Typer(
    help="Licenças de estacionamento (prefixo × ponto): conceder, encerrar, excluir (art. 50), "
    "listar.",
    no_args_is_help=True,
)
supervisors_app = typer.Typer(
    help="Supervisores de ponto fixo: eleição (art. 42), homologação, fim do mandato, histórico "
    "e pontos sem supervisor há mais de 90 dias (art. 50, III).",
    no_args_is_help=True,
)

Actor = Annotated[
    str, typer.Option("--actor", help="Quem faz a alteração (matrícula), para a auditoria.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Saída em JSON.")]
Name = Annotated[str | None, typer.Option(help="Nome do ponto.")]
Capacity = Annotated[int | None, typer.Option(help="Vagas.")]
OrderNumber = Annotated[int | None, typer.Option("--order-number", help="Número de ordem.")]
Kind = Annotated[str | None, typer.Option(help="Tipo: fixo ou livre.")]
Address = Annotated[str | None, typer.Option(help="Endereço.")]
Municipality = Annotated[
    str | None,
    typer.Option(help="Código IBGE do município (7 dígitos).", callback=checked_municipality),
]
Geometry = Annotated[
    str | None,
    typer.Option(
        help="Área do ponto: arquivo GeoJSON (Polygon/MultiPolygon, Feature ou coleção de uma "
        "feição) ou o próprio GeoJSON."
    ),
]
Lat = Annotated[float | None, typer.Option(help="Latitude do centro (com --lon e --radius-m).")]
Lon = Annotated[float | None, typer.Option(help="Longitude do centro.")]
Radius = Annotated[float | None, typer.Option("--radius-m", help="Raio do ponto, em metros.")]


def _date(value: str | None, option: str) -> dt.date | None:
    from stands._errors import InvalidAttributeError

    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        msg = f"{option} '{value}' não é uma data AAAA-MM-DD"
        raise InvalidAttributeError(msg) from None


def _required_date(value: str, option: str) -> dt.date:
    day = _date(value, option)
    assert day is not None  # noqa: S101 - value is not None
    return day


def _today() -> dt.date:
    from api.settings import get_settings
    from geo.calendar import local_today

    return local_today(get_settings().timezone)


def _area(value: str | None) -> dict[str, Any] | None:
    from stands._errors import InvalidGeometryError

    if value is None:
        return None
    text = value if value.lstrip().startswith("{") else None
    if text is None:
        path = Path(value)
        if not path.is_file():
            msg = f"arquivo de geometria não encontrado: {path}"
            raise FileNotFoundError(msg)
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"--geometry não é JSON válido: {exc}"
        raise InvalidGeometryError(msg) from None
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        features = data.get("features") or []
        if len(features) != 1:
            msg = f"a coleção tem {len(features)} feições; esperada exatamente uma"
            raise InvalidGeometryError(msg)
        data = features[0]
    if isinstance(data, dict) and data.get("type") == "Feature":
        data = data.get("geometry")
    if not isinstance(data, dict):
        msg = "--geometry deve ser uma geometria GeoJSON"
        raise InvalidGeometryError(msg)
    return data


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def _records(frame: Any) -> list[dict[str, Any]]:
    import pandas as pd

    out = []
    for row in frame.to_dict(orient="records"):
        clean: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, tuple):
                clean[key] = list(value)
            elif isinstance(value, pd.Timestamp):
                clean[key] = value.date().isoformat() if value.tz is None else value.isoformat()
            elif value is None or (not isinstance(value, list | dict) and pd.isna(value)):
                clean[key] = None
            else:
                clean[key] = value.item() if hasattr(value, "item") else value
        out.append(clean)
    return out


# --- stands ------------------------------------------------------------------------------------


@stands_app.command()
def create(
    stand_id: Annotated[str, typer.Argument(help="Identificador do ponto.")],
    actor: Actor,
    geometry: Geometry = None,
    lat: Lat = None,
    lon: Lon = None,
    radius_m: Radius = None,
    name: Name = None,
    capacity: Capacity = None,
    order_number: OrderNumber = None,
    kind: Kind = None,
    address: Address = None,
    municipality: Municipality = None,
) -> None:
    """Cria um ponto: polígono (--geometry) ou centro e raio (--lat --lon --radius-m)."""
    from db.stands.registry import create_stand

    with cli_session() as session:
        stand = create_stand(
            session=session, stand_id=stand_id, actor=actor, area=_area(geometry), lat=lat,
            lon=lon, radius_m=radius_m, name=name, capacity=capacity, order_number=order_number,
            kind=kind, address=address, municipality_code=municipality,
        )  # fmt: skip
        created = stand.stand_id
    typer.echo(f"Ponto {created} criado.")


@stands_app.command()
def edit(
    stand_id: Annotated[str, typer.Argument(help="Identificador do ponto.")],
    actor: Actor,
    geometry: Geometry = None,
    lat: Lat = None,
    lon: Lon = None,
    radius_m: Radius = None,
    name: Name = None,
    capacity: Capacity = None,
    order_number: OrderNumber = None,
    kind: Kind = None,
    address: Address = None,
    municipality: Municipality = None,
    clear: Annotated[
        list[str] | None,
        typer.Option(
            help="Campo a apagar (repetível): name, address, capacity, order_number, kind, "
            "municipality_code."
        ),
    ] = None,
) -> None:
    """Altera atributos ou a área de um ponto (o que não for informado fica como está)."""
    from db.stands.registry import edit_stand

    with cli_session() as session:
        edit_stand(
            session=session, stand_id=stand_id, actor=actor, area=_area(geometry), lat=lat,
            lon=lon, radius_m=radius_m, name=name, capacity=capacity, order_number=order_number,
            kind=kind, address=address, municipality_code=municipality, clear=clear or (),
        )  # fmt: skip
    typer.echo(f"Ponto {stand_id} alterado.")


@stands_app.command()
def retire(
    stand_id: Annotated[str, typer.Argument(help="Identificador do ponto.")],
    actor: Actor,
    on: Annotated[
        str | None,
        typer.Option("--on", help="Primeiro dia sem o ponto (AAAA-MM-DD); padrão: hoje."),
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Motivo.")] = None,
) -> None:
    """Desativa um ponto; as licenças vigentes terminam na véspera. O histórico permanece."""
    from api.settings import get_settings
    from db.stands.registry import retire_stand

    day = _date(on, "--on") or _today()
    with cli_session() as session:
        ended = retire_stand(
            session=session, stand_id=stand_id, actor=actor, on=day, reason=reason,
            timezone=get_settings().timezone,
        )  # fmt: skip
    typer.echo(
        f"Ponto {stand_id} desativado a partir de {day}; {len(ended)} licença(s) encerrada(s)."
    )


@stands_app.command("list")
def list_(
    municipality: Municipality = None,
    include_retired: Annotated[
        bool, typer.Option("--include-retired", help="Incluir pontos desativados.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Lista os pontos (id, nome, tipo, vagas, licenciados, endereço), em ordem de id."""
    from sqlalchemy import text

    from db.stands.queries import stands_frame

    today = _today()
    with cli_session() as session:
        frame = stands_frame(
            session=session, municipality=municipality, include_retired=include_retired
        )
        licensed: dict[str, int] = dict(
            session.execute(
                text(
                    "SELECT stand_id, count(DISTINCT vehicle_id) FROM parking_licences "
                    "WHERE (valid_from IS NULL OR valid_from <= :d) "
                    "AND (valid_until IS NULL OR valid_until >= :d) GROUP BY stand_id"
                ),
                {"d": today},
            ).all()
        )
    cols = ["stand_id", "name", "kind", "capacity", "order_number", "address", "municipality"]
    cols += ["radius_m", "location_note", "retired_at"]
    rows = sorted(_records(frame[cols]), key=lambda r: id_order(r["stand_id"]))
    for r in rows:
        r["licensed_vehicles"] = int(licensed.get(r["stand_id"], 0))
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        typer.echo("\t".join(stand_line(r)))
    typer.echo(f"{len(rows)} ponto(s).")


def id_order(stand_id: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of stand ids: numbers by value (1, 2, 10; PT-2 before PT-10), text as text."""
    parts = re.split(r"(\d+)", str(stand_id))
    return tuple((0, int(p)) if p.isascii() and p.isdigit() else (1, p) for p in parts if p)


def stand_line(r: dict[str, Any]) -> list[str]:
    """One stand of ``stands list`` as its columns, for people.

    The kind is the registry's; a stand without one that has parking licences is a ponto fixo
    (licences are for pontos fixos: POA decree arts. 48-50), else the kind is not informed.
    Porto Alegre's open data has neither kinds nor spaces: they are said to be missing.
    """
    n = r.get("licensed_vehicles", 0)
    if r["kind"]:
        kind = f"ponto {r['kind']}"
    elif n:
        kind = "ponto fixo (tem licenças)"
    else:
        kind = "tipo não informado"
    spaces = f"{r['capacity']} vaga(s)" if r["capacity"] is not None else "vagas não informadas"
    where = r["address"] or "-"
    if r.get("location_note"):
        where += f" (sem localização: {r['location_note']})"
    retired = f"  [desativado {r['retired_at'][:10]}]" if r["retired_at"] else ""
    return [
        str(r["stand_id"]),
        r["name"] or "-",
        kind,
        spaces,
        f"{n} prefixo(s) licenciado(s)",
        where + retired,
    ]


@stands_app.command()
def show(
    stand_id: Annotated[str, typer.Argument(help="Identificador do ponto.")],
    as_json: AsJson = False,
) -> None:
    """Mostra um ponto com suas licenças, exclusões e supervisores."""
    from sqlalchemy import text

    from db.stands.queries import licence_frame, stands_frame, supervisors_frame
    from db.stands.registry import get_stand

    with cli_session() as session:
        get_stand(session=session, stand_id=stand_id)
        frame = stands_frame(session=session, stand_ids=[stand_id], include_retired=True)
        licences = licence_frame(session=session, stand_ids=[stand_id])
        supervisors = supervisors_frame(session=session, stand_ids=[stand_id])
        exclusions = session.execute(
            text(
                "SELECT vehicle_id, excluded_on, reason FROM licence_exclusions "
                "WHERE stand_id = :s ORDER BY excluded_on, vehicle_id"
            ),
            {"s": stand_id},
        ).all()
    (stand,) = _records(frame.drop(columns="geometry"))
    stand["licences"] = _records(licences)
    stand["supervisors"] = _records(supervisors)
    stand["exclusions"] = [
        {"vehicle_id": v, "excluded_on": d.isoformat(), "reason": r} for v, d, r in exclusions
    ]
    if as_json:
        _echo_json(stand)
        return
    for key in ("stand_id", "name", "kind", "capacity", "order_number", "address", "municipality",
                "radius_m", "retired_at"):  # fmt: skip
        typer.echo(f"{key}: {stand[key] if stand[key] is not None else '-'}")
    typer.echo(f"licenças ({len(stand['licences'])}):")
    for lic in stand["licences"]:
        typer.echo(
            f"  {lic['vehicle_id']}: {lic['valid_from'] or 'início desconhecido'} a "
            f"{lic['valid_until'] or 'sem término'}"
        )
    typer.echo(f"exclusões ({len(stand['exclusions'])}):")
    for exc in stand["exclusions"]:
        typer.echo(f"  {exc['vehicle_id']} em {exc['excluded_on']}: {exc['reason']}")
    typer.echo(f"supervisores ({len(stand['supervisors'])}):")
    for sup in stand["supervisors"]:
        typer.echo(f"  {_supervisor_line(sup)}")


# --- licences ------------------------------------------------------------------------------------


@licences_app.command()
def grant(
    stand_id: Annotated[str, typer.Argument(help="Ponto.")],
    prefixo: Annotated[str, typer.Argument(help="Prefixo (vehicle_id).")],
    valid_from: Annotated[str, typer.Option("--from", help="Primeiro dia (AAAA-MM-DD).")],
    actor: Actor,
    until: Annotated[
        str | None, typer.Option("--until", help="Último dia (AAAA-MM-DD); padrão: sem término.")
    ] = None,
) -> None:
    """Concede licença de estacionamento a um prefixo num ponto."""
    from db.stands.registry import grant_licence

    with cli_session() as session:
        lic = grant_licence(
            session=session, stand_id=stand_id, vehicle_id=prefixo,
            valid_from=_required_date(valid_from, "--from"), valid_until=_date(until, "--until"),
            actor=actor,
        )  # fmt: skip
        licence_id = lic.licence_id
    typer.echo(f"Licença {licence_id} concedida: prefixo {prefixo} no ponto {stand_id}.")


@licences_app.command()
def end(
    stand_id: Annotated[str, typer.Argument(help="Ponto.")],
    prefixo: Annotated[str, typer.Argument(help="Prefixo (vehicle_id).")],
    until: Annotated[str, typer.Option("--until", help="Último dia da licença (AAAA-MM-DD).")],
    actor: Actor,
    reason: Annotated[str | None, typer.Option(help="Motivo.")] = None,
) -> None:
    """Encerra a licença do prefixo vigente na data (--until passa a ser o último dia)."""
    from db.stands.registry import end_licence

    day = _required_date(until, "--until")
    with cli_session() as session:
        end_licence(
            session=session, stand_id=stand_id, vehicle_id=prefixo, until=day, actor=actor,
            reason=reason,
        )  # fmt: skip
    typer.echo(f"Licença do prefixo {prefixo} no ponto {stand_id} encerrada em {day}.")


@licences_app.command()
def exclude(
    stand_id: Annotated[str, typer.Argument(help="Ponto fixo.")],
    prefixo: Annotated[str, typer.Argument(help="Prefixo (vehicle_id).")],
    on: Annotated[str, typer.Option("--on", help="Primeiro dia sem a licença (AAAA-MM-DD).")],
    reason: Annotated[
        str,
        typer.Option(
            help="Fundamento (art. 50): solicitacao (I), penalidade (II), sem_supervisor (III)."
        ),
    ],
    actor: Actor,
    note: Annotated[str | None, typer.Option(help="Observação (nº do processo...).")] = None,
) -> None:
    """Exclui um prefixo do ponto fixo (art. 50) e registra o motivo."""
    from db.stands.registry import exclude_prefixo

    day = _required_date(on, "--on")
    with cli_session() as session:
        exc = exclude_prefixo(
            session=session, stand_id=stand_id, vehicle_id=prefixo, on=day, ground=reason,
            note=note, actor=actor,
        )  # fmt: skip
        text = exc.reason
    typer.echo(f"Prefixo {prefixo} excluído do ponto {stand_id} a partir de {day} ({text}).")


@licences_app.command("list")
def list_licences(
    stand: Annotated[str | None, typer.Option(help="Só este ponto.")] = None,
    prefixo: Annotated[str | None, typer.Option(help="Só este prefixo.")] = None,
    on: Annotated[str | None, typer.Option("--on", help="Só as vigentes nesta data.")] = None,
    as_json: AsJson = False,
    as_csv: Annotated[
        bool,
        typer.Option("--csv", help="Saída em CSV, no formato de pontual analyze --licences."),
    ] = False,
) -> None:
    """Lista as licenças de estacionamento."""
    import pandas as pd

    from db.stands.queries import licence_frame

    day = _date(on, "--on")
    with cli_session() as session:
        frame = licence_frame(
            session=session,
            stand_ids=None if stand is None else [stand],
            vehicle_ids=None if prefixo is None else [prefixo],
        )
    if day is not None:
        ts = pd.Timestamp(day)
        frame = frame[
            (frame["valid_from"].isna() | (frame["valid_from"] <= ts))
            & (frame["valid_until"].isna() | (frame["valid_until"] >= ts))
        ]
    rows = _records(frame)
    if as_json:
        _echo_json(rows)
        return
    if as_csv:
        import csv
        import io

        from stands.licences import LICENCE_FILE_COLUMNS

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(LICENCE_FILE_COLUMNS)
        writer.writerows([r[c] for c in LICENCE_FILE_COLUMNS] for r in rows)
        typer.echo(buffer.getvalue(), nl=False)
        return
    for r in rows:
        typer.echo(
            f"{r['licence_id']}\t{r['stand_id']}\t{r['vehicle_id']}\t"
            f"{r['valid_from'] or 'início desconhecido'} a {r['valid_until'] or 'sem término'}"
        )
    typer.echo(f"{len(rows)} licença(s).")


# --- supervisors ---------------------------------------------------------------------------------


def _supervisor_line(r: dict[str, Any]) -> str:
    state = f"homologado em {r['homologated_on']}" if r["homologated_on"] else "não homologado"
    until = f", até {r['until']}" if r["until"] else ""
    return (
        f"{r['supervisor_id']}\t{r['stand_id']}\t{r['person_name']}\teleito em "
        f"{r['elected_on']} ({r['minutes_ref'] or 'sem ata'}), {state}{until}"
    )


@supervisors_app.command()
def elect(
    stand_id: Annotated[str, typer.Argument(help="Ponto fixo.")],
    name: Annotated[str, typer.Option(help="Nome completo do supervisor eleito (art. 42, I).")],
    elected_on: Annotated[str, typer.Option("--elected-on", help="Data da eleição.")],
    ata: Annotated[str, typer.Option(help="Referência da ata da eleição (art. 42, II).")],
    actor: Actor,
) -> None:
    """Registra a eleição de um supervisor de ponto fixo (a homologar)."""
    from db.stands.registry import elect_supervisor

    with cli_session() as session:
        rec = elect_supervisor(
            session=session, stand_id=stand_id, person_name=name,
            elected_on=_required_date(elected_on, "--elected-on"), minutes_ref=ata, actor=actor,
        )  # fmt: skip
        supervisor_id = rec.supervisor_id
    typer.echo(f"Eleição registrada: supervisor {supervisor_id} do ponto {stand_id} (a homologar).")


@supervisors_app.command()
def homologate(
    supervisor_id: Annotated[int, typer.Argument(help="Registro do supervisor (de `elect`).")],
    on: Annotated[str, typer.Option("--on", help="Data da homologação (art. 42, § 2º).")],
    actor: Actor,
) -> None:
    """Homologa a eleição; o mandato do supervisor anterior termina na véspera."""
    from db.stands.registry import homologate_supervisor

    day = _required_date(on, "--on")
    with cli_session() as session:
        ended = homologate_supervisor(
            session=session, supervisor_id=supervisor_id, on=day, actor=actor
        )
    line = f"Supervisor {supervisor_id} homologado em {day}."
    if ended:
        line += f" Mandato(s) anterior(es) encerrado(s): {', '.join(map(str, ended))}."
    typer.echo(line)


@supervisors_app.command("end")
def end_term(
    supervisor_id: Annotated[int, typer.Argument(help="Registro do supervisor.")],
    until: Annotated[str, typer.Option("--until", help="Último dia do mandato.")],
    actor: Actor,
    reason: Annotated[str | None, typer.Option(help="Motivo (renúncia, destituição...).")] = None,
) -> None:
    """Encerra o mandato de um supervisor."""
    from db.stands.registry import end_supervisor_term

    day = _required_date(until, "--until")
    with cli_session() as session:
        end_supervisor_term(
            session=session, supervisor_id=supervisor_id, until=day, actor=actor, reason=reason
        )
    typer.echo(f"Mandato do supervisor {supervisor_id} encerrado em {day}.")


@supervisors_app.command("list")
def list_supervisors(
    stand: Annotated[str | None, typer.Option(help="Só este ponto.")] = None,
    as_json: AsJson = False,
) -> None:
    """Histórico dos supervisores (todos os mandatos)."""
    from db.stands.queries import supervisors_frame

    with cli_session() as session:
        frame = supervisors_frame(session=session, stand_ids=None if stand is None else [stand])
    rows = _records(frame)
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        typer.echo(_supervisor_line(r))
    typer.echo(f"{len(rows)} registro(s).")


@supervisors_app.command()
def overdue(
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Data da verificação; padrão: hoje.")
    ] = None,
    max_days: Annotated[int, typer.Option("--max-days", help="Prazo (art. 50, III: 90).")] = 90,
    municipality: Municipality = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Todos os pontos fixos sem supervisor, no prazo ou não.")
    ] = False,
    include_unrecorded: Annotated[
        bool,
        typer.Option(
            "--include-unrecorded", help="Incluir pontos fixos sem nenhum supervisor registrado."
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Pontos fixos sem supervisor há mais de 90 dias (art. 50, III) e prefixos em risco."""
    from db.stands.queries import overdue_stands

    day = _date(as_of, "--as-of") or _today()
    with cli_session() as session:
        frame = overdue_stands(
            session=session, as_of=day, max_days=max_days, municipality=municipality,
            only_overdue=not show_all, include_unrecorded=include_unrecorded,
        )  # fmt: skip
    rows = _records(frame)
    if as_json:
        _echo_json(rows)
        return
    for r in rows:
        if r["days_without"] is None:
            head = f"{r['stand_id']} ({r['name'] or '-'}): nenhum supervisor homologado registrado"
        else:
            late = "VENCIDO" if r["overdue"] else "no prazo"
            head = (
                f"{r['stand_id']} ({r['name'] or '-'}): sem supervisor desde "
                f"{r['last_supervised_on']} ({r['days_without']} dias, {late})"
            )
        if r["pending_elected_on"]:
            head += f"; eleição de {r['pending_elected_on']} aguarda homologação"
        typer.echo(head)
        prefixos = ", ".join(r["prefixos"]) or "nenhum"
        typer.echo(f"  prefixos que perderiam a licença ({r['provision']}): {prefixos}")
    n_overdue = sum(bool(r["overdue"]) for r in rows)
    typer.echo(
        f"{n_overdue} ponto(s) fixo(s) sem supervisor há mais de {max_days} dias em {day} "
        "(art. 50, III)."
    )
