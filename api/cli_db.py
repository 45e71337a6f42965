"""`pontual db ...`: the local PostGIS cluster, or the server named by ``DATABASE_URL``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from api.settings import Settings


def get_settings() -> Settings:
    """Return :func:`api.settings.get_settings` (imported here: ``--help`` stays light)."""
    from api.settings import get_settings as settings

    return settings()


app = typer.Typer(
    help="Banco de dados PostGIS (start, stop, status, upgrade, partitions, retention). "
    "Sem DATABASE_URL, o pontual gerencia um servidor PostGIS local no diretório de dados "
    "do usuário.",
    no_args_is_help=True,
)


def database_url(settings: Settings | None = None, *, migrate: bool = True) -> str:
    """Return the URL of a ready database, starting the local cluster on demand.

    Every command that needs the database calls this.

    Parameters
    ----------
    settings : Settings, optional
        Defaults to :func:`api.settings.get_settings`.
    migrate : bool
        Run the migrations to head.

    Returns
    -------
    str
        A ``postgresql+psycopg://`` URL.
    """
    from db.cluster import ensure_database

    settings = settings or get_settings()
    return ensure_database(
        database_url=settings.database_url,
        data_dir=settings.data_dir,
        port=settings.db_port,
        bindir=settings.pg_bindir,
        migrate=migrate,
    )


@contextlib.contextmanager
def cli_session() -> Iterator[Session]:
    """Yield a session on the ready database for one CLI command (commit on success)."""
    from db.engine import make_engine, session_scope

    engine = make_engine(database_url())
    try:
        with session_scope(engine) as session:
            yield session
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    from sqlalchemy.exc import SQLAlchemyError

    from db.migrate import current

    with contextlib.suppress(SQLAlchemyError):  # status must not fail on a half-made database
        return current(url)
    return None


@app.command()
def start() -> None:
    """Inicia o banco local (cria o cluster na primeira vez) e aplica as migrações."""
    from db.engine import describe_url

    settings = get_settings()
    url = database_url(settings)
    if settings.database_url:
        typer.echo(f"Usando o servidor de DATABASE_URL em {describe_url(url)}; esquema atualizado.")
        return
    from db.cluster import pgdata_path
    from db.engine import parse_url

    port = parse_url(url).port
    typer.echo(f"Banco local PostGIS em execução em 127.0.0.1:{port}.")
    typer.echo(f"Dados em {pgdata_path(settings.data_dir)}")


@app.command()
def stop() -> None:
    """Para o banco local."""
    settings = get_settings()
    if settings.database_url:
        typer.echo("DATABASE_URL definido: o servidor externo não é gerenciado pelo pontual.")
        return
    from db.cluster import pgdata_path, stop_cluster

    pgdata = pgdata_path(settings.data_dir)
    if not (pgdata / "PG_VERSION").is_file():
        typer.echo(f"O banco local não está inicializado ({pgdata}); nada a parar.")
    elif stop_cluster(data_dir=settings.data_dir, bindir=settings.pg_bindir):
        typer.echo("Banco local parado.")
    else:
        typer.echo("O banco local não estava em execução.")


@app.command()
def status() -> None:
    """Mostra o servidor (versão, se está em execução, porta), o PostGIS e onde ficam os dados."""
    settings = get_settings()
    if settings.database_url:
        from db.engine import describe_url, normalize_url, probe_server

        url = normalize_url(settings.database_url)
        info = probe_server(url)
        postgis = info.postgis_version or (
            f"não instalado no banco (disponível: {info.postgis_available})"
            if info.postgis_available
            else "não disponível no servidor"
        )
        revision = _revision(url)
        typer.echo("Banco: servidor externo (DATABASE_URL)")
        typer.echo(f"Servidor: PostgreSQL {info.server_version} em {describe_url(url)}")
        typer.echo(f"PostGIS: {postgis}")
        typer.echo(f"Esquema: {revision or 'sem migrações aplicadas'}")
        return

    from db.cluster import DATABASE, cluster_status, cluster_url

    state = cluster_status(
        data_dir=settings.data_dir, port=settings.db_port, bindir=settings.pg_bindir
    )
    if not state.initialised:
        server = f"não inicializado (porta configurada {state.port}); rode: pontual db start"
    elif state.running:
        server = f"em execução em 127.0.0.1:{state.port}"
    else:
        server = f"parado (porta configurada {state.port}); rode: pontual db start"
    if state.postgis_version:
        postgis = f"{state.postgis_version} (banco {DATABASE})"
    elif state.initialised and not state.running:
        postgis = (
            f"{state.postgis_available} instalado no sistema; a extensão e os dados do banco "
            "só são lidos com o servidor em execução (pontual db start)"
        )
    elif state.initialised:
        postgis = f"{state.postgis_available} disponível (extensão ainda não criada)"
    else:
        postgis = f"{state.postgis_available} instalado no sistema"
    typer.echo("Banco: local, gerenciado pelo pontual")
    typer.echo(f"Servidor: PostgreSQL {state.server_version} — {server}")
    typer.echo(f"PostGIS: {postgis}")
    if state.running and state.port is not None:
        url = cluster_url(data_dir=settings.data_dir, port=state.port)
        typer.echo(f"Esquema: {_revision(url) or 'sem migrações aplicadas'}")
    elif state.initialised:
        typer.echo("Esquema: não verificado (servidor parado)")
    typer.echo(f"Dados em: {state.pgdata}")
    typer.echo(f"Binários: {state.bindir}")


@app.command()
def upgrade() -> None:
    """Aplica as migrações até a versão mais recente (inicia o banco local se preciso)."""
    from db.engine import describe_url

    url = database_url()
    typer.echo(
        f"Esquema de {describe_url(url)} na revisão {_revision(url) or '?'} (a mais recente)."
    )


@app.command()
def partitions(
    ahead_days: Annotated[
        int, typer.Option("--ahead-days", min=0, help="Dias UTC à frente de hoje a preparar.")
    ] = 7,
) -> None:
    """Cria as partições diárias de fixes (hoje e os próximos dias, UTC) e indexa os dias fechados.

    Rode uma vez por dia: o índice por lugar (célula H3 × hora) de cada dia já fechado é criado
    aqui, fora da gravação (que fica mais rápida sem ele), e os embarques de cada dia fechado são
    guardados para a demanda do planejamento (os dos últimos dias, que ainda recebem posições
    atrasadas, de novo).
    """
    import datetime as dt
    import math

    from db.engine import make_engine
    from db.tracking.pickups import build_closed_days
    from db.tracking.store import ensure_fix_partitions, index_closed_days

    today = dt.datetime.now(dt.UTC).date()
    with cli_session() as session:
        created = ensure_fix_partitions(
            session.connection(), today, today + dt.timedelta(days=ahead_days)
        )
    last = today + dt.timedelta(days=ahead_days)
    if created:
        typer.echo(f"{len(created)} partição(ões) criada(s): {', '.join(created)}")
    else:
        typer.echo(f"Partições de {today} a {last} já existiam.")
    engine = make_engine(database_url())
    try:
        indexed = index_closed_days(
            engine,
            before=today,
            progress=lambda name: typer.echo(f"Indexando por lugar {name}…"),
        )
        typer.echo(
            f"Índice por lugar criado em {len(indexed)} dia(s) fechado(s)."
            if indexed
            else "Todos os dias fechados já têm o índice por lugar."
        )
        built = build_closed_days(
            engine,
            before=today,
            recheck_days=math.ceil(get_settings().ingest_max_age_days),
            progress=lambda day: typer.echo(f"Embarques de {day}…"),
        )
    finally:
        engine.dispose()
    typer.echo(f"Embarques (demanda do planejamento) guardados de {len(built)} dia(s) fechado(s).")


@app.command()
def retention(
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            min=1,
            help="Dias UTC completos mantidos (padrão: PONTUAL_RETENTION_DAYS, 365).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Só conta o que seria apagado; não apaga.")
    ] = False,
    actor: Annotated[
        str, typer.Option("--actor", help="Quem executa (matrícula), para a auditoria.")
    ] = "sistema",
) -> None:
    """Apaga os fixes brutos mais antigos que o período de retenção (LGPD), exceto evidências.

    Fixes citados nos detalhes de achados e o trajeto das propostas de autuação são mantidos.
    A execução (mesmo simulada) fica no registro de auditoria.
    """
    import datetime as dt

    from db.enforcement.models import AuditEntry
    from db.tracking.retention import apply_retention

    days = keep_days or get_settings().retention_days
    today = dt.datetime.now(dt.UTC).date()
    with cli_session() as session:
        report = apply_retention(session.connection(), keep_days=days, today=today, dry_run=dry_run)
        session.add(
            AuditEntry(
                actor=actor,
                action="fix_retention_dry_run" if dry_run else "fix_retention",
                entity="fixes",
                entity_id=None,
                details=report.as_dict(),
            )
        )
    if report.unreadable_evidence:
        named = ", ".join(sorted({e["finding_id"] for e in report.unreadable_evidence}))
        typer.echo(
            f"Atenção: {len(report.unreadable_evidence)} evidência(s) com instante ou posição "
            f"ilegível nos achados {named}; partições mantidas inteiras: "
            f"{', '.join(report.partitions_refused) or 'nenhuma'} (registrado na auditoria).",
            err=True,
        )
    verb = "seriam apagados" if dry_run else "apagados"
    typer.echo(
        f"Retenção de {days} dias (antes de {report.cutoff}): {report.rows_deleted} fixes {verb}, "
        f"{report.rows_kept} mantidos como evidência ({report.evidence_refs} referências); "
        f"partições removidas: {len(report.partitions_dropped)}, "
        f"aparadas: {len(report.partitions_trimmed)}."
    )
