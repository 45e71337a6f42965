"""Benchmark: storing fixes by binary COPY (db.tracking.store.copy_fixes) vs GeoAlchemy2 ORM.

Runs against a real PostGIS: a throwaway database ``pontual_bench_<hex>`` is created on the server
of ``--url`` (else ``PONTUAL_DATABASE_URL``/``DATABASE_URL``, else the local cluster that
``pontual db start`` manages), migrated to head, and dropped at the end. The server's settings
matter (the embedded cluster's are ``db.cluster.BULK_LOAD_SETTINGS``): they are printed.

    .venv/bin/python bench/bench_copy.py              # 1,000,000 COPY rows, 20,000 ORM rows
    .venv/bin/python bench/bench_copy.py -n 200000 --orm-n 5000 --repeat 1

Scenarios, each ``--repeat`` times (the machine may be shared: compare CPU seconds too):
- ``encode only``: the client-side part (checks, sort, H3 r9, numpy payload), no database;
- ``copy_fixes`` new days: no partition yet, so each day's partition is created, loaded with
  ``COPY … FREEZE``, given its primary key and attached in the importing transaction;
- ``copy_fixes`` same fixes again: stored keys fetched and matched, inserts nothing;
- ``copy_fixes`` existing empty partitions: direct COPY into ``fixes`` (primary key kept up per
  row);
- ORM ``session.add_all`` of ``Fix`` objects with EWKT geometries, one commit (once).

Columns: wall seconds, rows/s, client CPU seconds (this process, all threads), server CPU
seconds (the importing backend, read from /proc when the server is local and readable, else
blank; parallel index-build workers are not counted), load average (1 min) before and after.
A ``CHECKPOINT`` before each scenario keeps one from paying for the writes of the one before.

Measured (1M fixes, 3,000 taxis, one day; durable embedded cluster; 2 cores shared with other
jobs; each cell the range of 2-4 runs; "before" is the code and server settings this work started
from, run with this script):

    scenario                    load ~1.0-1.2                      load ~1.4-2.2
                                before         after               before         after
    encode only                 627k-735k/s    853k-1.01M/s        524k-741k/s    682k-1.05M/s
    new days                    288k-293k/s    424k-567k/s         228k-253k/s    436k-576k/s
      wall s / server CPU s     3.4 / 2.8      1.8 / 1.4           4.0-4.4/2.7-3.6  1.7-2.3/1.4-1.6
    same fixes again            240k-244k/s    2.1M-2.5M/s         173k-216k/s    1.2M-1.9M/s
    existing empty partitions   264k-286k/s    346k-365k/s         199k-270k/s    328k-362k/s
    ORM (20,000 rows)           8.6k/s         9.0k/s              8.0k-10.1k/s   8.2k-10.1k/s

10M fixes (load ~1.1-1.4): new days 17.3 s (577k/s), same again 9.1 s, existing partitions 27.5 s;
peak RSS 3.2 GB.

Migration 0005 then added a btree (h3_r9, ts) to every partition, built inside each new day's
import: new days fell to 309k-359k/s (1M) and 330k/s (10M). Since migrations 0007/0008 (no
``h3_r12``; the place index built for closed days by ``pontual db partitions``, off the write
path) and ``source`` as the new table's default during the COPY, run of 2026-11-30 (load ~1.0-1.2,
``--repeat 5`` and ``--repeat 3``): new days 446k-603k/s (median of the five: 594k/s; wall 1.66-2.24
s, server CPU 1.3-1.9 s), same fixes again 1.7M-2.6M/s, existing empty partitions 321k-418k/s (was
107k-118k/s), ORM 5.5k-8.7k/s. 10M: new days 16.1 s (622k/s), same again 5.6 s, existing
partitions 25.8 s (387k/s).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.engine import create_database, drop_database, make_engine, parse_url  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.tracking.models import Fix  # noqa: E402
from db.tracking.store import _encode, copy_fixes  # noqa: E402


def synthetic_pings(n: int, *, vehicles: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Fleet-like pings: ``vehicles`` taxis in Porto Alegre, one fix every 15 s over whole days."""
    rng = np.random.default_rng(seed)
    per_vehicle = -(-n // vehicles)
    vid = np.repeat(np.arange(vehicles), per_vehicle)[:n]
    step = np.tile(np.arange(per_vehicle), vehicles)[:n]
    start = pd.Timestamp("2024-03-01T00:00:00Z").value // 1000  # µs
    ts = start + step.astype(np.int64) * 15_000_000 + rng.integers(0, 1_000_000, n)
    meter = np.array(["free", "occupied", "off"], dtype=object)[rng.integers(0, 3, n)]
    return pd.DataFrame(
        {
            "vehicle_id": pd.array([f"{4000 + v}" for v in vid], dtype="str"),
            "timestamp": pd.to_datetime(ts, unit="us", utc=True),
            "lat": -30.03 + rng.normal(0, 0.03, n),
            "lon": -51.20 + rng.normal(0, 0.03, n),
            "speed_kmh": rng.uniform(0, 80, n),
            "heading_deg": rng.uniform(0, 360, n),
            "accuracy_m": np.where(rng.random(n) < 0.2, np.nan, rng.uniform(3, 15, n)),
            "meter": pd.array(meter, dtype="str"),
            "tariff": pd.array(np.where(meter == "occupied", 1, None), dtype="Int8"),
            "driver_id": pd.array([f"D{v}" for v in vid], dtype="str"),
            "row": np.arange(1, n + 1),
            "speed_flag": rng.random(n) < 0.001,
        }
    )


def _server_url(cli_url: str | None) -> str:
    url = cli_url or os.environ.get("PONTUAL_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        return url
    from api.cli_db import database_url

    return database_url(migrate=False)


def _drop_daily_partitions(engine: Engine) -> None:
    with engine.begin() as conn:
        names = conn.execute(
            text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'fixes'::regclass AND c.relname <> 'fixes_default'"
            )
        ).scalars()
        for name in list(names):
            conn.execute(text(f"DROP TABLE {name}"))


def _checkpoint(engine: Engine) -> None:
    """Flush dirty buffers now, so no scenario pays for the writes of the one before."""
    with engine.connect() as conn:
        try:
            conn.execute(text("CHECKPOINT"))
        except DBAPIError:  # needs superuser or pg_checkpoint; then the runs stay as they are
            conn.rollback()


def _backend_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    name: str
    rows: int
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float | None
    load_before: float
    load_after: float


def _timed(engine: Engine, name: str, rows: int, work: Callable[[Connection], int]) -> Result:
    """Run ``work`` in one transaction (committed, so the commit's fsync is timed too)."""
    _checkpoint(engine)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    with engine.begin() as conn:
        pid = int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())
        s0 = _backend_cpu_s(pid)
        got = work(conn)
    s1 = _backend_cpu_s(pid)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if got != rows:
        raise RuntimeError(f"{name}: expected {rows} rows, got {got}")
    server = s1 - s0 if s0 is not None and s1 is not None else None
    return Result(name, rows, wall, cpu, server, load0, os.getloadavg()[0])


def _orm_insert(engine: Engine, small: pd.DataFrame) -> Result:
    _checkpoint(engine)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    with Session(engine) as session:
        session.add_all(
            Fix(
                vehicle_id=r.vehicle_id,
                ts=r.timestamp.to_pydatetime(),
                lat=r.lat,
                lon=r.lon,
                geom=f"SRID=4326;POINT({r.lon!r} {r.lat!r})",
                speed_kmh=r.speed_kmh,
                heading_deg=r.heading_deg,
                accuracy_m=None if np.isnan(r.accuracy_m) else r.accuracy_m,
                meter=r.meter,
                tariff=None if pd.isna(r.tariff) else int(r.tariff),
                driver_id=r.driver_id,
                speed_flag=bool(r.speed_flag),
                source="bench",
            )
            for r in small.itertuples(index=False)
        )
        session.commit()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    name = "GeoAlchemy2 ORM add_all + commit"
    return Result(name, len(small), wall, cpu, None, load0, os.getloadavg()[0])


def _server_settings(engine: Engine) -> str:
    names = ("wal_level", "max_wal_size", "wal_buffers", "shared_buffers", "maintenance_work_mem")
    with engine.connect() as conn:
        return ", ".join(f"{n}={conn.execute(text(f'SHOW {n}')).scalar_one()}" for n in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="fixes stored by COPY")
    parser.add_argument("--orm-n", type=int, default=20_000, help="fixes stored by the ORM")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each COPY scenario")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL")
    args = parser.parse_args()

    server = parse_url(_server_url(args.url))
    url = server.set(database=f"pontual_bench_{secrets.token_hex(4)}").render_as_string(
        hide_password=False
    )
    create_database(url)
    results: list[Result] = []
    engine = make_engine(url)
    try:
        upgrade(url)
        settings = _server_settings(engine)
        pings = synthetic_pings(args.n)
        n = len(pings)

        def encode_only(_: Connection) -> int:
            for _block in _encode(pings, source="bench").payload():
                pass
            return n

        def store(conn: Connection) -> int:
            return copy_fixes(conn, pings, source="bench")

        def store_again(conn: Connection) -> int:
            inserted = copy_fixes(conn, pings, source="bench")
            if inserted:
                raise RuntimeError(f"re-import inserted {inserted} rows")
            return n

        for _ in range(args.repeat):
            results.append(_timed(engine, "encode only (client, no DB)", n, encode_only))
            _drop_daily_partitions(engine)
            results.append(_timed(engine, "copy_fixes, new days (create+FREEZE)", n, store))
            results.append(_timed(engine, "copy_fixes, same fixes again", n, store_again))
            with engine.begin() as conn:
                conn.execute(text("TRUNCATE fixes"))
            results.append(_timed(engine, "copy_fixes, existing empty partitions", n, store))
        with engine.begin() as conn:
            conn.execute(text("TRUNCATE fixes"))
        results.append(_orm_insert(engine, pings.head(args.orm_n)))
    finally:
        engine.dispose()
        drop_database(url)

    print(f"\nserver: {settings}; cores: {os.cpu_count()}")
    header = f"{'method':<40} {'rows':>9} {'wall s':>7} {'rows/s':>9} {'cli cpu':>7} "
    print(header + f"{'srv cpu':>7} {'load':>11}")
    for r in results:
        srv = f"{r.server_cpu_s:7.2f}" if r.server_cpu_s is not None else " " * 7
        print(
            f"{r.name:<40} {r.rows:>9,} {r.wall_s:>7.2f} {r.rows / r.wall_s:>9,.0f} "
            f"{r.client_cpu_s:>7.2f} {srv} {r.load_before:>5.2f}-{r.load_after:<5.2f}"
        )


if __name__ == "__main__":
    main()
