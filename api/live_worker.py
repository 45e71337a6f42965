"""Live detection off the request path: a worker per server process drains ``live_queue``.

The HTTP ingest writes each inserted fix to ``live_queue`` in the fix's own transaction
(:mod:`api.ingest`), so the request is answered after the COMMIT without waiting for the
detectors. A worker in each process (:func:`live_lifespan`) repeatedly claims the queued fixes
of some vehicles, runs :func:`api.alerts.detect_on_ingest` on them (the live detectors in a
savepoint: states, findings, alerts and their ``NOTIFY``) and deletes them, all in one
transaction: a committed fix is detected on exactly once, even across a crash.

Ordering
    A worker claims a vehicle only if it gets that vehicle's queue lock
    (``pg_try_advisory_xact_lock``, never waiting), and then takes its queued fixes in time
    order, up to :data:`CLAIM_FIXES` in all (the last vehicle's latest fixes wait for the next
    claim): two workers never hold fixes of the same vehicle, and a vehicle's fixes reach the
    detectors in time order, batch after batch.
Latency
    The process that stored a batch wakes its worker at once; the others poll every
    :data:`IDLE_POLL_S` seconds while idle. Under sustained load the queue absorbs the bursts
    the detectors cannot follow (see bench/README.md).
Failures: late, never lost
    The claimed vehicles run together in one savepoint; if the detectors raise, each vehicle
    runs again alone in its own savepoint, so one vehicle's bad data or a detector bug on its
    fixes never stops the others. A vehicle that fails — or whose registry holds a date the
    detectors cannot read (:func:`engines.live.unreadable_registry_rows`), which is checked
    first — gets a dead letter (``live_dead_letters``: the error, the range and number of its
    claimed fixes, attempts) and its fixes stay in the queue, held: the vehicle is not claimed
    again before ``next_retry_at`` (``live_retry_s``, doubled after each failure up to
    ``live_retry_max_s``), so its later fixes wait behind them and reach the detectors in time
    order. The first claim of the vehicle that succeeds resolves its dead letter. ``pontual
    alerts failed`` lists the open dead letters; ``pontual alerts retry`` retries at once. A
    database failure (connection lost, server restart) is not a dead letter: the whole claim
    rolls back and is taken again after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from api.alerts import detect_on_ingest, wait_event
from api.settings import Settings
from engines.live import unreadable_registry_rows
from tracking import frames as fr

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.1
"""Seconds between looks at the queue while it is empty."""
CLAIM_VEHICLES = 32
"""Vehicles claimed at most per transaction."""
CLAIM_FIXES = 20_000
"""Fixes claimed at most per transaction: a backlog (after an overload or an outage) is drained
in bounded transactions, each committing its alerts, not in one holding every queued fix."""
_QUEUE_LOCK_CLASS = 72_944  # first key of pg_advisory_xact_lock(int, int): live queue claims
_ERROR_PAUSE_S = 1.0
_STOP_WAIT_S = 10.0

_CLAIM = text(
    "WITH candidates AS MATERIALIZED ("
    "  SELECT q.vehicle_id FROM live_queue q"
    "  WHERE (CAST(:only AS text[]) IS NULL OR q.vehicle_id = ANY(CAST(:only AS text[])))"
    "  GROUP BY q.vehicle_id HAVING NOT EXISTS (SELECT 1 FROM live_dead_letters d"
    "    WHERE d.vehicle_id = q.vehicle_id AND d.resolved_at IS NULL AND d.next_retry_at > now())"
    "  ORDER BY min(q.queue_id) LIMIT :n"
    "), mine AS MATERIALIZED ("
    "  SELECT vehicle_id FROM candidates WHERE pg_try_advisory_xact_lock(:c, hashtext(vehicle_id))"
    ") "
    "SELECT q.queue_id, q.vehicle_id, q.ts, q.lat, q.lon, q.speed_kmh, q.heading_deg, "
    "q.accuracy_m, q.meter, q.tariff, q.driver_id, q.speed_flag "
    "FROM live_queue q WHERE q.vehicle_id IN (SELECT vehicle_id FROM mine) "
    "ORDER BY q.vehicle_id, q.ts, q.queue_id LIMIT :m"
)
_COLUMNS = (
    fr.VEHICLE_ID,
    fr.TIMESTAMP,
    fr.LAT,
    fr.LON,
    fr.SPEED_KMH,
    fr.HEADING_DEG,
    fr.ACCURACY_M,
    fr.METER,
    fr.TARIFF,
    fr.DRIVER_ID,
    fr.SPEED_FLAG,
)


_DEAD_LETTER = text(
    "INSERT INTO live_dead_letters AS d (vehicle_id, error, first_ts, last_ts, n_fixes, "
    "  next_retry_at) "
    "VALUES (:v, :e, :first, :last, :n, now() + make_interval(secs => CAST(:retry_s AS float8))) "
    "ON CONFLICT (vehicle_id) WHERE resolved_at IS NULL DO UPDATE SET error = EXCLUDED.error, "
    "  first_ts = EXCLUDED.first_ts, last_ts = EXCLUDED.last_ts, n_fixes = EXCLUDED.n_fixes, "
    "  attempts = d.attempts + 1, last_failed_at = now(), "
    "  next_retry_at = now() + make_interval(secs => least(CAST(:max_s AS float8), "
    "    CAST(:retry_s AS float8) * power(2.0, d.attempts)))"
)
_RESOLVE = text(
    "UPDATE live_dead_letters SET resolved_at = now() "
    "WHERE vehicle_id = ANY(:vs) AND resolved_at IS NULL"
)
_MAX_ERROR_CHARS = 4000


def _pings(rows: list[Any]) -> pd.DataFrame:
    """Return the claimed fixes as a pings frame (the columns the live detectors read)."""
    data = dict(zip(_COLUMNS, zip(*(r[1:] for r in rows), strict=True), strict=True))
    frame = pd.DataFrame({c: list(v) for c, v in data.items()})
    frame[fr.TIMESTAMP] = pd.to_datetime(frame[fr.TIMESTAMP], utc=True).dt.as_unit("ns")
    frame[fr.TARIFF] = pd.array(frame[fr.TARIFF].tolist(), dtype="Int8")
    frame[fr.ROW] = range(1, len(frame) + 1)
    return frame


def _error_text(exc: BaseException) -> str:
    text_ = f"{type(exc).__name__}: {exc}"
    return text_ if len(text_) <= _MAX_ERROR_CHARS else text_[: _MAX_ERROR_CHARS - 1] + "…"


def _database_failure(exc: BaseException) -> bool:
    """Tell whether an error is the database's (connection, server), not the vehicle's data."""
    return isinstance(exc, OperationalError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def _detect_vehicles(
    conn: Connection, claimed: dict[str, list[Any]], *, settings: Settings
) -> dict[str, str]:
    """Run the detectors on the claimed vehicles; return the failed ones and their errors.

    All together first (one frame, one savepoint); after a failure, each vehicle alone, with a
    frame and a savepoint of its own.
    """
    failed = unreadable_registry_rows(conn, sorted(claimed))
    vehicles = [v for v in claimed if v not in failed]
    if not vehicles:
        return failed
    try:
        detect_on_ingest(conn, _pings([r for v in vehicles for r in claimed[v]]), settings=settings)
    except Exception as exc:
        if _database_failure(exc):
            raise
        log.warning("detecção ao vivo falhou em %d veículos juntos; um a um agora", len(vehicles))
    else:
        return failed
    for vehicle in vehicles:
        try:
            detect_on_ingest(conn, _pings(claimed[vehicle]), settings=settings)
        except Exception as exc:
            if _database_failure(exc):
                raise
            log.exception("detecção ao vivo falhou no veículo %s; posições retidas", vehicle)
            failed[vehicle] = _error_text(exc)
    return failed


def process_queue(
    engine: Engine,
    *,
    settings: Settings,
    max_vehicles: int = CLAIM_VEHICLES,
    max_fixes: int = CLAIM_FIXES,
    vehicle_ids: Sequence[str] | None = None,
) -> int:
    """Run the live detectors on the queued fixes of up to ``max_vehicles`` free vehicles.

    Parameters
    ----------
    engine : sqlalchemy.Engine
        The database.
    settings : Settings
        Throttle window and time zone of the detectors, retry delays of dead letters.
    max_vehicles : int, default CLAIM_VEHICLES
        Vehicles claimed at most (the oldest queued first).
    max_fixes : int, default CLAIM_FIXES
        Fixes taken at most, each vehicle's oldest first.
    vehicle_ids : sequence of str, optional
        Claim only these vehicles.

    Returns
    -------
    int
        Fixes claimed: taken off the queue once detected, or held with their vehicle's dead
        letter (0: nothing queued, or every queued vehicle is held or being processed by
        another worker).
    """
    params = {
        "n": max_vehicles,
        "m": max_fixes,
        "c": _QUEUE_LOCK_CLASS,
        "only": None if vehicle_ids is None else list(vehicle_ids),
    }
    with engine.connect() as conn, conn.begin():
        rows = conn.execute(_CLAIM, params).all()
        if not rows:
            return 0
        claimed: dict[str, list[Any]] = {}
        for row in rows:
            claimed.setdefault(str(row[1]), []).append(row)
        failed = _detect_vehicles(conn, claimed, settings=settings)
        done = [v for v in claimed if v not in failed]
        if done:
            conn.execute(
                text("DELETE FROM live_queue WHERE queue_id = ANY(:ids)"),
                {"ids": [r[0] for v in done for r in claimed[v]]},
            )
            conn.execute(_RESOLVE, {"vs": done})
        for vehicle, error in failed.items():
            times = [r[2] for r in claimed[vehicle]]
            conn.execute(
                _DEAD_LETTER,
                {
                    "v": vehicle,
                    "e": error,
                    "first": min(times),
                    "last": max(times),
                    "n": len(times),
                    "retry_s": settings.live_retry_s,
                    "max_s": settings.live_retry_max_s,
                },
            )
        if failed:
            log.warning(
                "detecção ao vivo: %d veículo(s) com falha, posições retidas "
                "(pontual alerts failed): %s",
                len(failed),
                ", ".join(sorted(failed)),
            )
    return len(rows)


async def live_worker(
    engine: Engine, settings: Settings, wake: asyncio.Event, stop: asyncio.Event | None = None
) -> None:
    """Drain the live queue until ``stop`` is set (or cancelled): at once when woken."""
    stop = stop or asyncio.Event()
    while not stop.is_set():
        wake.clear()
        try:
            done = await asyncio.to_thread(process_queue, engine, settings=settings)
        except Exception:  # the database may be away: try again shortly
            log.exception("fila de detecção ao vivo: falha ao processar; nova tentativa")
            await wait_event(stop, _ERROR_PAUSE_S)
            continue
        if not done:
            await wait_event(wake, IDLE_POLL_S)


@contextlib.asynccontextmanager
async def live_lifespan(app: Any) -> AsyncIterator[None]:
    """Start this process's live worker; ``app.state.live_wake()`` wakes it from any thread."""
    settings: Settings = app.state.settings
    if not settings.live_worker:  # detection runs in a process of its own (main below)
        yield
        return
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def wake_worker() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: shutting down
            loop.call_soon_threadsafe(wake.set)

    app.state.live_wake = wake_worker
    stop = asyncio.Event()
    task = asyncio.create_task(
        live_worker(app.state.engine, app.state.settings, wake, stop), name="pontual-live-worker"
    )
    try:
        yield
    finally:
        stop.set()  # ends the loop after the claim in progress (committed or rolled back)
        wake.set()
        await asyncio.wait({task}, timeout=_STOP_WAIT_S)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def wake_live_worker(app: Any) -> None:
    """Wake the process's live worker, if it runs (the app's lifespan started it)."""
    wake: Callable[[], None] | None = getattr(app.state, "live_wake", None)
    if wake is not None:
        wake()


def main() -> None:
    """Run a live worker alone: ``python -m api.live_worker [--nice N] [--idle]``.

    The database is ``DATABASE_URL``'s (else the embedded cluster's).

    For servers started with ``PONTUAL_LIVE_WORKER=false``: detection then runs in its own
    process, at a lower CPU priority than the ingest (``--nice``, default 10) on a busy host;
    ``--idle`` (Linux ``SCHED_IDLE``) gives it only the CPU nothing else wants, so that under
    overload the ingest keeps every core and detection catches up afterwards (its queue is
    durable).
    """
    import argparse
    import os

    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import make_engine

    parser = argparse.ArgumentParser(
        description=main.__doc__.splitlines()[0] if main.__doc__ else ""
    )
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--idle", action="store_true", help="SCHED_IDLE (Linux)")
    args = parser.parse_args()
    os.nice(args.nice)
    if args.idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    settings = get_settings()
    engine = make_engine(settings.database_url or database_url(settings, migrate=False))

    async def run() -> None:
        await live_worker(engine, settings, asyncio.Event())

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
