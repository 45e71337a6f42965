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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pandas as pd
from sqlalchemy import Engine, text

from api.alerts import detect_on_ingest, wait_event
from api.settings import Settings
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
    "  SELECT vehicle_id FROM live_queue GROUP BY vehicle_id ORDER BY min(queue_id) LIMIT :n"
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


def _pings(rows: list[Any]) -> pd.DataFrame:
    """Return the claimed fixes as a pings frame (the columns the live detectors read)."""
    data = dict(zip(_COLUMNS, zip(*(r[1:] for r in rows), strict=True), strict=True))
    frame = pd.DataFrame({c: list(v) for c, v in data.items()})
    frame[fr.TIMESTAMP] = pd.to_datetime(frame[fr.TIMESTAMP], utc=True)
    frame[fr.TARIFF] = pd.array(frame[fr.TARIFF].tolist(), dtype="Int8")
    frame[fr.ROW] = range(1, len(frame) + 1)
    return frame


def process_queue(
    engine: Engine,
    *,
    settings: Settings,
    max_vehicles: int = CLAIM_VEHICLES,
    max_fixes: int = CLAIM_FIXES,
) -> int:
    """Run the live detectors on the queued fixes of up to ``max_vehicles`` free vehicles.

    Parameters
    ----------
    engine : sqlalchemy.Engine
        The database.
    settings : Settings
        Throttle window and time zone of the detectors.
    max_vehicles : int, default CLAIM_VEHICLES
        Vehicles claimed at most (the oldest queued first).
    max_fixes : int, default CLAIM_FIXES
        Fixes taken at most, each vehicle's oldest first.

    Returns
    -------
    int
        Fixes taken off the queue (0: nothing queued, or every queued vehicle is being
        processed by another worker).
    """
    with engine.connect() as conn, conn.begin():
        rows = conn.execute(
            _CLAIM, {"n": max_vehicles, "m": max_fixes, "c": _QUEUE_LOCK_CLASS}
        ).all()
        if not rows:
            return 0
        # a failure is logged and rolled back to its savepoint: the fixes leave the queue
        detect_on_ingest(conn, _pings(rows), settings=settings)
        conn.execute(
            text("DELETE FROM live_queue WHERE queue_id = ANY(:ids)"),
            {"ids": [r[0] for r in rows]},
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
