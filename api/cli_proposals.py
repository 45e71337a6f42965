"""`pontual proposals ...`: infraction proposals and their review, on the database."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli_db import cli_session
from api.inputs import checked_municipality

app = typer.Typer(
    help="Propostas de autuação: gerar a partir dos achados, revisar (confirmar, descartar, "
    "notificar, defesa, decisão, notificação da decisão, decisão definitiva), prazos. Cada "
    "passo fica no registro de auditoria.",
    no_args_is_help=True,
)

Agent = Annotated[str, typer.Option("--agent", help="Identificação do agente (matrícula).")]
At = Annotated[
    str | None,
    typer.Option("--at", help="Data/hora do passo (ISO 8601 com fuso); padrão: agora."),
]


def _at(value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    try:
        at = dt.datetime.fromisoformat(value)
    except ValueError:
        msg = f"--at '{value}' não é uma data/hora ISO 8601 (ex.: 2025-03-04T10:00:00-03:00)"
        raise typer.BadParameter(msg) from None
    if at.tzinfo is None:
        raise typer.BadParameter(f"--at '{value}' precisa de fuso horário (ex.: -03:00)")
    return at


def _day(value: str | None, *, flag: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{flag} '{value}' não é uma data AAAA-MM-DD") from None


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


@app.command()
def generate(
    municipality: Annotated[
        str, typer.Option(help="Código IBGE do município.", callback=checked_municipality)
    ],
    findings: Annotated[
        Path | None,
        typer.Option(help="findings.geojson de um `pontual analyze` a carregar antes."),
    ] = None,
    timezone: Annotated[str | None, typer.Option(help="Fuso dos dias locais.")] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Quem gera (matrícula), para a auditoria; padrão: o usuário do sistema."
        ),
    ] = None,
    thresholds: Annotated[
        Path | None,
        typer.Option(
            help="TOML de limiares; sua tabela \\[confidence_floor] muda o piso de confiança."
        ),
    ] = None,
) -> None:
    """Gera propostas para os achados ainda sem proposta no município.

    Achados abaixo do piso de confiança, ou que a regra só aceita repetidos, ficam para revisão
    (listados por id) e não viram proposta.
    """
    import getpass

    from api.cli_analyze import read_thresholds
    from api.inputs import require_file
    from api.settings import get_settings
    from db.enforcement.workflow import (
        count_of_other_municipalities,
        generate_report,
        refresh_findings,
    )
    from enforcement.rulebook import rulebooks_for
    from tracking.detectors.findings import read_findings_geojson

    rulebooks_for(municipality)  # fail early on a code without rulebook
    floor = read_thresholds(thresholds)[1] if thresholds else None
    frame = None
    if findings:
        frame = read_findings_geojson(require_file(findings, flag="--findings"))
    with cli_session() as session:
        new, updated, judged = (
            refresh_findings(session, frame) if frame is not None else (set(), set(), set())
        )
        created, done = generate_report(
            session,
            municipality=municipality,
            timezone=timezone or get_settings().timezone,
            actor=agent or f"os:{getpass.getuser()}",
            confidence_floor=floor,
        )
        elsewhere = count_of_other_municipalities(session, municipality=municipality)
    if frame is not None:
        typer.echo(f"{len(new)} achado(s) novos de {len(frame)} em {findings}.")
        if updated:
            typer.echo(
                f"{len(updated)} achado(s) já gravados com outra evidência (a da detecção ao "
                "vivo, de antes): atualizados com a do arquivo."
            )
        if judged:
            typer.echo(
                f"{len(judged)} achado(s) já julgados em proposta com outra evidência: mantida "
                f"a gravada ({', '.join(sorted(judged))})."
            )
    typer.echo(f"{created} proposta(s) criada(s) para o município {municipality}.")
    if elsewhere:
        typer.echo(
            f"{elsewhere} achado(s) de prefixos do cadastro de outro município: não julgados "
            "por este regulamento."
        )
    if done.for_review:
        typer.echo(f"{len(done.for_review)} achado(s) para revisão, sem proposta:")
    for r in done.for_review:
        typer.echo(
            f"  {r['finding_id']}  {r['vehicle_id'] or '-'}  {r['provision']}: {r['reason']}"
        )


@app.command("list")
def list_(
    status: Annotated[str | None, typer.Option(help="Situação (ex.: proposta).")] = None,
    municipality: Annotated[
        str | None, typer.Option(help="Código IBGE.", callback=checked_municipality)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Saída em JSON.")] = False,
) -> None:
    """Lista as propostas, as mais recentes primeiro."""
    from zoneinfo import ZoneInfo

    from sqlalchemy import select

    from api.settings import get_settings
    from api.web.formats import zone_label
    from db.enforcement.models import Proposal
    from db.enforcement.workflow import as_record
    from tracking.detectors.findings import kind_name

    query = select(Proposal).order_by(Proposal.committed_at.desc(), Proposal.proposal_id)
    if status:
        query = query.where(Proposal.status == status)
    if municipality:
        query = query.where(Proposal.municipality_code == municipality)
    with cli_session() as session:
        records = [as_record(p) for p in session.execute(query).scalars()]
    if as_json:
        _echo_json(records)
        return
    zone = get_settings().timezone
    if records:  # the instants as the agent reads the law's hours: local, the zone said once
        typer.echo(f"Cometida em: {zone_label(zone)}.")
    for r in records:
        when = dt.datetime.fromisoformat(r["committed_at"]).astimezone(ZoneInfo(zone))
        typer.echo(
            f"{r['proposal_id']}  {r['status']:<18} {when:%d/%m/%Y %H:%M}  "
            f"{r['vehicle_id'] or '-':<10} {r['provision']:<28} {kind_name(r['kind'])}"
        )
    typer.echo(f"{len(records)} proposta(s).")


@app.command()
def show(proposal_id: Annotated[str, typer.Argument(help="Id da proposta.")]) -> None:
    """Mostra uma proposta com seus achados e o histórico de revisão (JSON)."""
    from db.enforcement.workflow import as_record, finding_ids_of, get_proposal, proposal_history

    with cli_session() as session:
        p = get_proposal(session, proposal_id)
        record = as_record(p, finding_ids_of(session, proposal_id))
        record["history"] = proposal_history(session, proposal_id)
    _echo_json(record)


@app.command()
def confirm(
    proposal_id: str,
    agent: Agent,
    at: At = None,
    exception_answer: Annotated[
        str | None,
        typer.Option(
            "--exception-answer",
            help="Resposta à exceção do dispositivo ('salvo com autorização do usuário'): por "
            "que ela não se aplica. Obrigatória quando a regra tem exceção.",
        ),
    ] = None,
    pontuacao: Annotated[
        str | None,
        typer.Option(
            help="Pontuação escolhida quando o dispositivo a deixa ao caso (POA art. 57, XI): "
            "condutor ou autorizatário."
        ),
    ] = None,
) -> None:
    """Confirma a proposta: lavra o auto de infração (numerado)."""
    from db.enforcement.workflow import confirm as run

    with cli_session() as session:
        p = run(
            session,
            proposal_id,
            agent_id=agent,
            at=_at(at),
            exception_answer=exception_answer,
            pontuacao=pontuacao,
        )
        number, due = p.auto_number, (p.deadlines.get("notification") or {}).get("due")
        priors = (p.document or {}).get("reincidence_priors") or []
    typer.echo(f"Auto de infração {number} lavrado.")
    for x in priors:
        typer.echo(f"Reincidência: auto {x['auto_number'] or '-'} ({x['committed_at'][:10]}).")
    if due:
        typer.echo(f"Notificar até {due[:10]}.")


@app.command()
def dismiss(
    proposal_id: str,
    agent: Agent,
    reason: Annotated[str, typer.Option(help="Motivo do descarte.")],
    at: At = None,
) -> None:
    """Descarta a proposta, com o motivo."""
    from db.enforcement.workflow import dismiss as run

    with cli_session() as session:
        run(session, proposal_id, agent_id=agent, reason=reason, at=_at(at))
    typer.echo(f"Proposta {proposal_id} descartada.")


@app.command()
def notify(proposal_id: str, agent: Agent, at: At = None) -> None:
    """Registra a entrega da notificação de penalidade (começa o prazo de defesa)."""
    from db.enforcement.workflow import notify as run

    with cli_session() as session:
        p = run(session, proposal_id, actor=agent, at=_at(at))
        due = (p.deadlines.get("defence") or {}).get("due")
    typer.echo(f"Proposta {proposal_id} notificada." + (f" Defesa até {due[:10]}." if due else ""))


@app.command()
def defence(proposal_id: str, agent: Agent, at: At = None) -> None:
    """Registra a defesa apresentada no prazo."""
    from db.enforcement.workflow import file_defence

    with cli_session() as session:
        file_defence(session, proposal_id, actor=agent, at=_at(at))
    typer.echo(f"Defesa registrada na proposta {proposal_id}.")


@app.command()
def decide(
    proposal_id: str,
    agent: Agent,
    reason: Annotated[str, typer.Option(help="Fundamentação da decisão.")],
    accepted: Annotated[
        bool, typer.Option("--accepted/--rejected", help="Defesa deferida ou indeferida.")
    ],
    at: At = None,
) -> None:
    """Decide a defesa (deferida: o auto cai; indeferida: a penalidade se mantém)."""
    from db.enforcement.workflow import decide_defence

    with cli_session() as session:
        p = decide_defence(
            session, proposal_id, agent_id=agent, accepted=accepted, reason=reason, at=_at(at)
        )
        status = p.status
    typer.echo(f"Proposta {proposal_id}: {status}.")


@app.command("notify-decision")
def notify_decision(proposal_id: str, agent: Agent, at: At = None) -> None:
    """Registra a entrega da decisão (a penalidade aplicada) ao autuado.

    Após a defesa indeferida, ou sem defesa depois do fim do seu prazo.

    Onde a lei conta dela o prazo de recurso (e o de pagamento), ele começa nessa data
    (fretamento de Porto Alegre, art. 33; Porto Velho, art. 32).
    """
    from db.enforcement.workflow import notify_decision as run

    with cli_session() as session:
        p = run(session, proposal_id, actor=agent, at=_at(at))
        due = (p.deadlines.get("appeal") or {}).get("due")
        counts = (p.deadlines.get("appeal") or {}).get("from") == "decision_notification"
    typer.echo(
        f"Notificação da decisão registrada na proposta {proposal_id}."
        + (f" Recurso até {due[:10]}." if due and counts else "")
    )


@app.command()
def finalize(
    proposal_id: str,
    agent: Agent,
    reason: Annotated[
        str, typer.Option(help="Fundamentação (ex.: sem recurso no prazo; recurso indeferido).")
    ],
    period_ended_on: Annotated[
        str | None,
        typer.Option(
            "--period-ended-on",
            help=(
                "Dia (AAAA-MM-DD) em que o prazo de defesa ou de recurso terminou, pela lei do "
                "município: obrigatório quando o regulamento não fixa o prazo."
            ),
        ),
    ] = None,
    at: At = None,
) -> None:
    """Registra a decisão definitiva (sem recurso administrativo cabível).

    Só então a infração conta para a reincidência onde a lei o exige (fretamento de Porto
    Alegre, art. 19, § 5º).
    """
    from db.enforcement.workflow import finalize as run

    with cli_session() as session:
        run(
            session,
            proposal_id,
            agent_id=agent,
            reason=reason,
            period_ended_on=_day(period_ended_on, flag="--period-ended-on"),
            at=_at(at),
        )
    typer.echo(f"Proposta {proposal_id}: decisão definitiva registrada.")


@app.command()
def deadlines(
    within_days: Annotated[int, typer.Option(help="Horizonte em dias.")] = 5,
    archive: Annotated[
        bool, typer.Option(help="Arquiva os autos com prazo de notificação vencido.")
    ] = False,
) -> None:
    """Prazos a vencer (e vencidos); com --archive, arquiva os autos não notificados a tempo."""
    from db.enforcement.workflow import archive_lapsed, deadline_warnings

    with cli_session() as session:
        archived = archive_lapsed(session) if archive else []
        warnings = deadline_warnings(session, within_days=within_days)
    for pid in archived:
        typer.echo(f"arquivada: {pid} (prazo de notificação vencido)")
    for w in warnings:
        flag = "VENCIDO" if w["overdue"] else "vence"
        typer.echo(
            f"{w['proposal_id']}  {w['auto_number'] or '-'}  {w['deadline']}: {flag} em "
            f"{w['due'][:10]} ({w['provision']})"
        )
    typer.echo(f"{len(warnings)} prazo(s) em até {within_days} dia(s).")


@app.command()
def document(
    proposal_id: str,
    out: Annotated[Path, typer.Option(help="Arquivo de saída (.pdf ou .html).")],
    kind: Annotated[
        str,
        typer.Option(help="auto (auto de infração) ou notificacao (notificação de penalidade)."),
    ] = "auto",
) -> None:
    """Gera o auto de infração ou a notificação de penalidade (PDF ou HTML, com mapa da prova)."""
    from db.enforcement.evidence import document_for
    from enforcement.documents import DOCUMENT_KINDS, render_html, render_pdf

    if kind not in DOCUMENT_KINDS:
        raise typer.BadParameter(f"--kind '{kind}': use auto ou notificacao")
    suffix = out.suffix.lower()
    if suffix not in (".pdf", ".html"):
        raise typer.BadParameter(f"--out '{out}': a extensão deve ser .pdf ou .html")
    with cli_session() as session:
        doc = document_for(session, proposal_id)
    if suffix == ".pdf":
        out.write_bytes(render_pdf(doc, kind=kind))
    else:
        out.write_text(render_html(doc, kind=kind), encoding="utf-8")
    typer.echo(f"{out} gravado.")


@app.command()
def examples(
    out: Annotated[Path, typer.Option(help="Pasta de saída.")] = Path("docs/examples"),
) -> None:
    """Gera os exemplos de auto de infração e de notificação de penalidade (HTML e PDF).

    Roda o fluxo real de revisão (propostas, confirmação com resposta à exceção, notificação,
    prazos, reincidência) sobre dados fictícios de Pinto Bandeira, num banco temporário criado
    no mesmo servidor e apagado ao fim.
    """
    import secrets

    from sqlalchemy.orm import Session

    from api.cli_db import database_url
    from db.enforcement.examples import write_examples
    from db.engine import create_database, drop_database, make_engine, parse_url
    from db.migrate import upgrade

    server = database_url(migrate=False)
    name = f"pontual_examples_{secrets.token_hex(4)}"
    scratch = parse_url(server).set(database=name).render_as_string(hide_password=False)
    create_database(scratch)
    try:
        upgrade(scratch)
        engine = make_engine(scratch)
        try:
            with Session(engine) as session:
                paths = write_examples(session, out)
                session.rollback()
        finally:
            engine.dispose()
    finally:
        drop_database(scratch)
    for path in paths:
        typer.echo(f"{path} gravado.")
