"""`pontual alerts failed|retry`: live detection's dead letters (``api.live_worker``).

A vehicle whose live detection failed keeps its fixes in the live queue, held, and gets a dead
letter with the error; ``failed`` lists them, ``retry`` runs them again now (after the registry
row or the bug is fixed). A retry that fails again keeps them, with the new error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Alertas ao vivo: veículos cuja detecção falhou (posições retidas, nunca descartadas) "
    "e nova tentativa.",
    no_args_is_help=True,
)

_OPEN_SQL = """
SELECT d.dead_letter_id, d.vehicle_id, d.error, d.first_ts, d.last_ts, d.n_fixes, d.attempts,
       d.failed_at, d.last_failed_at, d.next_retry_at, d.resolved_at,
       (SELECT count(*) FROM live_queue q WHERE q.vehicle_id = d.vehicle_id) AS held
FROM live_dead_letters d
WHERE (:all OR d.resolved_at IS NULL)
ORDER BY d.resolved_at NULLS FIRST, d.failed_at, d.dead_letter_id
"""


def dead_letters(session: Any, *, include_resolved: bool = False) -> list[dict[str, Any]]:
    """Return the dead letters (open ones first), with the fixes each vehicle has held."""
    from sqlalchemy import text

    rows = session.execute(text(_OPEN_SQL), {"all": include_resolved}).mappings().all()
    return [dict(r) for r in rows]


@app.command()
def failed(
    include_resolved: Annotated[
        bool, typer.Option("--all", help="Incluir as já resolvidas (histórico).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Saída em JSON.")] = False,
) -> None:
    """Lista os veículos cuja detecção ao vivo falhou: erro, posições retidas, próxima tentativa."""
    from api.cli_db import cli_session

    with cli_session() as session:
        rows = dead_letters(session, include_resolved=include_resolved)
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2, default=str))
        return
    if not rows:
        typer.echo("Nenhuma falha de detecção ao vivo pendente.")
        return
    for r in rows:
        state = (
            f"resolvida em {r['resolved_at']:%Y-%m-%d %H:%M:%S%z}"
            if r["resolved_at"]
            else f"próxima tentativa {r['next_retry_at']:%Y-%m-%d %H:%M:%S%z}"
        )
        typer.echo(
            f"#{r['dead_letter_id']} veículo {r['vehicle_id']}: {r['n_fixes']} posições de "
            f"{r['first_ts']:%Y-%m-%d %H:%M:%S%z} a {r['last_ts']:%Y-%m-%d %H:%M:%S%z} "
            f"({r['held']} retidas na fila); {r['attempts']} tentativa(s), {state}\n"
            f"    erro: {r['error']}"
        )


@app.command()
def retry(
    dead_letter_ids: Annotated[
        list[int] | None, typer.Argument(help="Números das falhas (de `failed`); padrão: todas.")
    ] = None,
    vehicle: Annotated[
        list[str] | None, typer.Option("--vehicle", help="Só este veículo (repetível).")
    ] = None,
) -> None:
    """Tenta de novo agora a detecção dos veículos com falha (depois de corrigir a causa)."""
    from sqlalchemy import text

    from api.cli_db import database_url
    from api.live_worker import process_queue
    from api.settings import get_settings
    from db.engine import make_engine

    settings = get_settings()
    engine = make_engine(database_url(settings))
    try:
        with engine.begin() as conn:
            marked = conn.execute(
                text(
                    "UPDATE live_dead_letters SET next_retry_at = now() "
                    "WHERE resolved_at IS NULL "
                    "AND (CAST(:ids AS bigint[]) IS NULL OR dead_letter_id = ANY(:ids)) "
                    "AND (CAST(:vs AS text[]) IS NULL OR vehicle_id = ANY(:vs)) "
                    "RETURNING vehicle_id, now()"
                ),
                {"ids": dead_letter_ids or None, "vs": vehicle or None},
            ).all()
        chosen = [str(v) for v, _ in marked]
        if not chosen:
            typer.echo("Nenhuma falha pendente corresponde; nada a tentar.")
            return
        while process_queue(engine, settings=settings, vehicle_ids=chosen):
            with engine.connect() as conn:  # stop once every chosen vehicle is held or drained
                waiting = conn.execute(
                    text(
                        "SELECT count(*) FROM live_queue q WHERE q.vehicle_id = ANY(:vs) "
                        "AND NOT EXISTS (SELECT 1 FROM live_dead_letters d "
                        "WHERE d.vehicle_id = q.vehicle_id AND d.resolved_at IS NULL "
                        "AND d.next_retry_at > now())"
                    ),
                    {"vs": chosen},
                ).scalar_one()
            if not waiting:
                break
        with engine.connect() as conn:
            open_rows = conn.execute(
                text(
                    "SELECT vehicle_id, error, last_failed_at >= :t FROM live_dead_letters "
                    "WHERE resolved_at IS NULL AND vehicle_id = ANY(:vs)"
                ),
                {"vs": chosen, "t": marked[0][1]},
            ).all()
    finally:
        engine.dispose()
    again = {str(v): str(e) for v, e, failed_now in open_rows if failed_now}
    waiting = sorted(str(v) for v, _, failed_now in open_rows if not failed_now)
    ok = sorted(set(chosen) - again.keys() - set(waiting))
    if ok:
        typer.echo(f"Detecção concluída: {', '.join(ok)}.")
    if waiting:
        typer.echo(f"Em processamento pelo servidor: {', '.join(waiting)}.")
    for v, error in sorted(again.items()):
        typer.echo(f"Falhou de novo: {v}: {error}", err=True)
    if again:
        raise typer.Exit(1)
