"""`pontual import ...`: load registry files and GPS fixes into the database."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.inputs import checked_municipality, read_input, require_file

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.engine import Connection

    from db.upsert import ImportReport

app = typer.Typer(
    help=(
        "Importa arquivos para o banco (municipalities, stands, fleet, drivers, driver-links, "
        "stand-suspensions, allowed-places, pings, porto)."
    ),
    no_args_is_help=True,
)

# Bundled real data (source checkout); every path can be given explicitly instead.
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "brazil"
BOUNDARIES = DATA_DIR / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"
CENSUS = DATA_DIR / "population" / "censo2022_populacao_municipios.csv"
ESTIMATE = DATA_DIR / "population" / "estimativa_populacao_municipios_2024.csv"


@contextmanager
def _transaction() -> Iterator[Connection]:
    from api.cli_db import database_url
    from db.engine import make_engine

    engine = make_engine(database_url())
    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


def _echo_report(what: str, report: ImportReport, *, retired: bool = False) -> None:
    line = (
        f"{what}: {report.created} criados, {report.updated} atualizados, "
        f"{report.unchanged} inalterados"
    )
    if retired:
        line += f", {report.retired} desativados"
    typer.echo(line + ".")
    for note in report.notes:
        typer.echo(f"  aviso: {note}")


FILE = "FILE"
"""How errors name the positional file argument of ``pontual import <kind> FILE``."""


@app.command()
def municipalities(
    boundaries: Annotated[
        Path,
        typer.Option(
            help="GeoJSON de limites municipais (propriedade cod_ibge).",
            show_default="o incluído em data/brazil",
        ),
    ] = BOUNDARIES,
    census: Annotated[
        Path,
        typer.Option(
            help="CSV do Censo 2022 (cod_ibge, uf, nome, pop_total).",
            show_default="o incluído em data/brazil",
        ),
    ] = CENSUS,
    estimate: Annotated[
        Path,
        typer.Option(
            help="CSV da estimativa 2024 (cod_ibge, pop_estimada_2024_07_01).",
            show_default="o incluído em data/brazil",
        ),
    ] = ESTIMATE,
) -> None:
    """Importa os 5.570 municípios do IBGE, a população (Censo 2022, estimativa 2024) e limites."""
    from db.fleet.store import load_municipalities, load_populations
    from fleet.loaders import read_municipalities, read_populations

    require_file(boundaries, flag="--boundaries")
    require_file(estimate, flag="--estimate")
    frame = read_input(
        census, lambda p: read_municipalities(p, boundaries_path=boundaries), flag="--census"
    )
    populations = read_input(estimate, lambda p: read_populations(census, p), flag="--estimate")
    with _transaction() as conn:
        _echo_report("Municípios", load_municipalities(conn=conn, municipalities=frame))
        _echo_report("População", load_populations(conn=conn, populations=populations))
    with_boundary = int(frame.geometry.notna().sum())
    typer.echo(f"Limites municipais: {with_boundary} municípios com polígono.")


@app.command()
def stands(
    file: Annotated[
        Path,
        typer.Argument(
            help="Pontos de táxi: GeoJSON/GeoPackage/CSV do contrato, CSV do Porto ou GeoJSON "
            "de Porto Alegre (docs/formatos.md)."
        ),
    ],
    municipality: Annotated[
        str | None,
        typer.Option(
            help="Código IBGE dos pontos que o arquivo não localiza (POA: 4314902).",
            callback=checked_municipality,
        ),
    ] = None,
    radius_m: Annotated[
        float,
        typer.Option(
            "--stand-radius-m",
            help="Raio (m) dos pontos dados só como coordenada (Porto, Porto Alegre).",
        ),
    ] = 30.0,
    retire_missing: Annotated[
        bool,
        typer.Option(help="Desativa pontos do mesmo município que não estão no arquivo."),
    ] = True,
    id_prefix: Annotated[
        str, typer.Option(help="Prefixo dos stand_id (ex.: PT- para o Porto, cujos ids colidem).")
    ] = "",
) -> None:
    """Importa pontos de táxi (atualiza os existentes) e informa o que mudou."""
    from api._errors import InputFileError
    from db.stands.store import load_stands
    from stands.loaders import read_stands_registry, with_id_prefix

    if not math.isfinite(radius_m) or radius_m <= 0:
        msg = f"--stand-radius-m era {radius_m!r}; esperado um número de metros > 0 (ex.: 30)"
        raise InputFileError(msg)
    frame = read_input(
        file,
        lambda p: read_stands_registry(p, municipality=municipality, point_radius_m=radius_m),
        flag=FILE,
    )
    frame = with_id_prefix(frame, id_prefix)
    with _transaction() as conn:
        report = load_stands(conn=conn, stands=frame, retire_missing=retire_missing)
    _echo_report("Pontos de táxi", report, retired=True)
    usable = int(frame.geometry.notna().sum())
    typer.echo(f"Com geometria utilizável: {usable} de {len(frame)}.")


@app.command()
def fleet(
    file: Annotated[Path, typer.Argument(help="CSV da frota (contrato ou frota de POA).")],
    municipality: Annotated[
        str | None,
        typer.Option(
            help="Código IBGE dos veículos que o arquivo não localiza.",
            callback=checked_municipality,
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            help="Data (AAAA-MM-DD) que o arquivo descreve; padrão: a do arquivo ou hoje."
        ),
    ] = None,
) -> None:
    """Importa a frota: prefixos/veículos, situação e licenças de estacionamento."""
    from db.fleet.store import load_fleet
    from fleet.loaders import LICENCES_UNTOLD, read_fleet

    frame = read_input(file, lambda p: read_fleet(p, municipality=municipality), flag=FILE)
    date = file_as_of(as_of, file)
    with _transaction() as conn:
        report = load_fleet(conn=conn, fleet=frame, as_of=date)
    _echo_report("Veículos", report.vehicles)
    typer.echo(
        f"Situações: {report.statuses_created} registradas, {report.statuses_closed} encerradas."
    )
    typer.echo(
        f"Licenças de estacionamento: {report.licences_created} criadas, "
        f"{report.licences_unchanged} inalteradas, {report.licences_ended} encerradas."
    )
    with_stand = int(
        frame["stands"].map(len).gt(0).sum() + frame["stand_names"].map(len).gt(0).sum()
    )
    typer.echo(f"Veículos com ponto no arquivo: {with_stand}; data de referência {date}.")
    if LICENCES_UNTOLD in frame.columns:
        typer.echo(
            "  aviso: o arquivo não tem a coluna stands; as licenças de ponto ficam como estão"
        )
    if report.unmatched_stands:
        shown = "; ".join(report.unmatched_lines()[:10])
        typer.echo(f"  aviso: {len(report.unmatched_stands)} pontos não encontrados: {shown}")
    for line in report.excluded_lines():
        typer.echo(f"  aviso: {line}")


def file_as_of(value: str | None, file: Path) -> dt.date:
    """Return the date a fleet file describes: --as-of, else its data_extracao, else today.

    Today in the regulator's zone: on a server in UTC, an import at 22:00 in Brasília is of
    that day, not of the next (a status without start would begin a day late).
    """
    if value:
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            msg = f"--as-of era {value!r}; esperado uma data AAAA-MM-DD"
            raise typer.BadParameter(msg) from None
    from fleet.dates import DATE_FORMS
    from fleet.loaders import extraction_date

    stated = extraction_date(file.read_bytes())
    if stated is None:
        from api.settings import get_settings
        from geo.calendar import local_today

        return local_today(get_settings().timezone)
    try:
        return dt.date.fromisoformat(stated)
    except ValueError:
        msg = f"{file.name}: data_extracao era {stated!r}; esperada uma data {DATE_FORMS}"
        raise typer.BadParameter(msg) from None


def _store_pings(
    file: Path,
    pings: pd.DataFrame,
    rejected: pd.DataFrame,
    *,
    cells: Callable[[pd.DataFrame], pd.DataFrame],
) -> None:
    """Store the valid pings and quarantine the rest, in one transaction.

    Pings the database refuses (a microsecond taken, by another ping of the file or by a
    stored fix with other values: :func:`db.tracking.store.store_fixes`) join the rejected rows,
    their cells given by ``cells``.
    """
    import pandas as pd

    from db.tracking.store import copy_rejected, store_fixes

    with _transaction() as conn:
        done = store_fixes(conn, pings, source=file.name)
        if len(done.refused):
            more = cells(done.refused)
            rejected = pd.concat([rejected, more], ignore_index=True).sort_values(
                "row", kind="stable", ignore_index=True
            )
        kept = copy_rejected(conn, rejected, source=file.name)
    typer.echo(
        f"Pings válidos: {len(pings) - len(done.refused)}; gravados: {done.inserted}; "
        f"já existentes: {done.existing}; rejeitados: {len(rejected)} ({kept} novos na "
        "quarentena)."
    )
    today = pd.Timestamp.now(tz="UTC").normalize()
    if done.inserted and pings["timestamp"].min() < today:
        typer.echo(
            "Consultas por lugar (célula H3 × hora) dos dias já fechados ficam rápidas quando "
            "`pontual db partitions` (diário) criar o índice por lugar deles."
        )


def _fix_cells(refused: pd.DataFrame) -> pd.DataFrame:
    """Return refused fixes as rejected rows, their values as text (a file not read again)."""
    from tracking import frames as fr
    from tracking.validate import make_rejected

    out = refused.drop(columns=[fr.REASON, fr.SPEED_FLAG], errors="ignore").copy()
    out[fr.TIMESTAMP] = out[fr.TIMESTAMP].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    values = out.drop(columns=[fr.ROW]).astype(object)
    text = values.where(values.notna(), "").map(str)
    text[fr.ROW] = out[fr.ROW].to_numpy()
    return make_rejected(text, refused[fr.REASON].astype(str).to_numpy())


@app.command()
def pings(
    file: Annotated[Path, typer.Argument(help="CSV ou Parquet de pings (formato do contrato).")],
) -> None:
    """Valida e grava pings GPS; reimportar o mesmo arquivo não duplica nada."""
    from tracking.ingest import read_pings, reread_rejected

    valid, rejected = read_input(file, read_pings, flag=FILE)
    _store_pings(file, valid, rejected, cells=lambda refused: reread_rejected(file, refused))


@app.command()
def porto(
    file: Annotated[Path, typer.Argument(help="CSV de viagens do Porto (ECML/PKDD 2015).")],
) -> None:
    """Importa viagens do Porto como pings (um a cada 15 s) e os grava."""
    from tracking.porto import read_porto_trips

    valid, rejected, labels = read_input(file, read_porto_trips, flag=FILE)
    _store_pings(file, valid, rejected, cells=_fix_cells)
    typer.echo(f"Viagens lidas: {len(labels)}.")


_ACTOR_HELP = "Quem faz a importação (matrícula), para a auditoria."


@app.command()
def drivers(
    file: Annotated[
        Path,
        typer.Argument(help="CSV de condutores: CNH, ICTP e seus históricos (docs/formatos.md)."),
    ],
    actor: Annotated[str, typer.Option("--actor", help=_ACTOR_HELP)],
    municipality: Annotated[
        str | None,
        typer.Option(
            help="Código IBGE do município dos condutores.", callback=checked_municipality
        ),
    ] = None,
) -> None:
    """Importa condutores (CNH, ICTP / Registro de Condutor e o histórico de situação)."""
    from db.fleet.store import load_drivers
    from fleet.drivers import read_drivers

    frame = read_input(file, read_drivers, flag=FILE)
    with _transaction() as conn:
        report = load_drivers(
            conn=conn, drivers=frame, actor=actor, source=file.name, municipality=municipality
        )
    _echo_report("Condutores", report.drivers)
    typer.echo(
        f"Períodos de situação (CNH/ICTP): {report.periods_created} gravados, "
        f"{report.periods_replaced} substituídos."
    )


@app.command("driver-links")
def driver_links(
    file: Annotated[
        Path,
        typer.Argument(help="CSV de vínculos condutor ↔ prefixo (titular/auxiliar, datas)."),
    ],
    actor: Annotated[str, typer.Option("--actor", help=_ACTOR_HELP)],
) -> None:
    """Importa os vínculos dos condutores aos prefixos (titular ou auxiliar, com datas)."""
    from db.fleet.store import load_driver_links
    from fleet.drivers import read_driver_links

    frame = read_input(file, read_driver_links, flag=FILE)
    with _transaction() as conn:
        report = load_driver_links(conn=conn, links=frame, actor=actor, source=file.name)
    typer.echo(
        f"Vínculos: {report.created} criados, {report.updated} atualizados, "
        f"{report.unchanged} inalterados."
    )


@app.command("stand-suspensions")
def stand_suspensions(
    file: Annotated[
        Path,
        typer.Argument(
            help=(
                "CSV de suspensões e interdições de ponto (prefixo, condutor ou o ponto "
                "inteiro, datas, tipo; docs/formatos.md)."
            )
        ),
    ],
    actor: Annotated[str, typer.Option("--actor", help=_ACTOR_HELP)],
) -> None:
    """Importa suspensões e proibições de uso de ponto fixo (POA art. 45) e interdições do ponto."""
    from db.stands.store import load_stand_suspensions
    from stands.suspensions import read_stand_suspensions

    frame = read_input(file, read_stand_suspensions, flag=FILE)
    with _transaction() as conn:
        report = load_stand_suspensions(conn=conn, suspensions=frame, actor=actor, source=file.name)
    _echo_report("Suspensões de ponto", report)


@app.command("allowed-places")
def allowed_places(
    file: Annotated[
        Path,
        typer.Argument(
            help="Áreas onde esperar é permitido, no formato dos pontos (docs/formatos.md)."
        ),
    ],
    actor: Annotated[str, typer.Option("--actor", help=_ACTOR_HELP)],
    radius_m: Annotated[
        float | None,
        typer.Option("--stand-radius-m", help="Raio (m) das áreas dadas só como coordenada."),
    ] = None,
) -> None:
    """Importa a lista vigente de áreas de espera permitida (as que o arquivo omite saem)."""
    from api.inputs import read_stands_file
    from db.stands.store import load_allowed_places

    frame = read_stands_file(file, radius_m=radius_m, flag=FILE)
    with _transaction() as conn:
        report = load_allowed_places(conn=conn, places=frame, actor=actor, source=file.name)
    _echo_report("Áreas de espera permitida", report, retired=True)
