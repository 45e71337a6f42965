"""Benchmark: storing fixes by binary COPY (tracking.store.copy_fixes) vs GeoAlchemy2 ORM inserts.

Runs against a real PostGIS: a throwaway database ``pontual_bench_<hex>`` is created on the server
of ``--url`` (else ``PONTUAL_DATABASE_URL``/``DATABASE_URL``, else the local cluster that
``pontual db start`` manages), migrated to head, and dropped at the end.

    .venv/bin/python bench/bench_copy.py              # 1,000,000 COPY rows, 20,000 ORM rows
    .venv/bin/python bench/bench_copy.py -n 200000 --orm-n 5000

Scenarios (each into empty daily partitions except the re-import):
- ``copy_fixes`` new fixes: the direct COPY path (validation, encoding, H3 r9/r12, COPY);
- ``copy_fixes`` same fixes again: the conflict-safe staging path, inserts nothing;
- ``encode only``: the client-side part (checks, H3, numpy payload), no database;
- ORM ``session.add_all`` of ``Fix`` objects with EWKT geometries, one commit.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.engine import create_database, drop_database, make_engine, parse_url  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from tracking.models import Fix  # noqa: E402
from tracking.store import _encode, copy_fixes, ensure_fix_partitions  # noqa: E402


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


def _truncate(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE fixes"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="fixes stored by COPY")
    parser.add_argument("--orm-n", type=int, default=20_000, help="fixes stored by the ORM")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL")
    args = parser.parse_args()

    server = parse_url(_server_url(args.url))
    url = server.set(database=f"pontual_bench_{secrets.token_hex(4)}").render_as_string(
        hide_password=False
    )
    create_database(url)
    results: list[tuple[str, int, float]] = []
    engine = make_engine(url)
    try:
        upgrade(url)
        pings = synthetic_pings(args.n)
        days = pings["timestamp"].dt.floor("D")

        t0 = time.perf_counter()
        for _ in _encode(pings, source="bench").payload():
            pass
        results.append(("encode only (client, no DB)", args.n, time.perf_counter() - t0))

        with engine.begin() as conn:
            ensure_fix_partitions(conn, days.min().date(), days.max().date())
        t0 = time.perf_counter()
        with engine.begin() as conn:
            inserted = copy_fixes(conn, pings, source="bench")
        results.append(("copy_fixes, new fixes (direct COPY)", inserted, time.perf_counter() - t0))

        t0 = time.perf_counter()
        with engine.begin() as conn:
            again = copy_fixes(conn, pings, source="bench")
        if again != 0:
            raise RuntimeError(f"re-import inserted {again} rows")
        results.append(
            ("copy_fixes, same fixes again (staging)", len(pings), time.perf_counter() - t0)
        )

        _truncate(engine)
        t0 = time.perf_counter()
        with engine.begin() as conn:
            inserted = copy_fixes(conn, pings, source="bench")
        results.append(("copy_fixes, new fixes (2nd run)", inserted, time.perf_counter() - t0))

        _truncate(engine)
        small = pings.head(args.orm_n)
        t0 = time.perf_counter()
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
        results.append(("GeoAlchemy2 ORM add_all + commit", len(small), time.perf_counter() - t0))
    finally:
        engine.dispose()
        drop_database(url)

    print(f"\n{'method':<42} {'rows':>10} {'seconds':>9} {'rows/s':>12}")
    for name, rows, secs in results:
        print(f"{name:<42} {rows:>10,} {secs:>9.2f} {rows / secs:>12,.0f}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average: {load} (cores: {os.cpu_count()})")


if __name__ == "__main__":
    main()
