"""Benchmark: which indexes on ``fixes`` pay for themselves (ingest rate against query times).

Runs against a real PostGIS like ``bench_copy.py``: a throwaway database ``pontual_bench_<hex>`` on
the server of ``--url`` (else ``PONTUAL_DATABASE_URL``/``DATABASE_URL``, else the embedded
cluster), migrated to head, dropped at the end. For each index set, every index of ``fixes``
except the primary key is dropped, the set is created on the parent (partitioned indexes, so each
daily partition gets its own), and then:

- ingest: ``copy_fixes`` of ``-n`` fixes into new days (partitions created, loaded, indexed,
  attached) and of ``--live-n`` fixes of other vehicles into the existing partitions (the live
  ingest's path: indexes maintained row by row);
- queries, each ``--repeat`` times with random parameters after one warm-up, median and p90 ms:
  vehicle × 2 h (a vehicle's track), H3 r9 cell × 6 h (who passed a place), 5 min of the whole fleet
  (a snapshot), and a whole UTC day's count (what a partition-wide job reads).

    .venv/bin/python bench/bench_fix_indexes.py                 # 2,000,000 fixes, 200 taxis
    .venv/bin/python bench/bench_fix_indexes.py -n 500000 --repeat 10

Index sets: ``none`` (the primary key (vehicle_id, ts) only: it is the btree on vehicle × time),
``brin_ts`` (BRIN on ts), ``h3_ts`` (btree (h3_r9, ts)), ``brin_ts+h3_ts``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_copy import _drop_daily_partitions, _server_url, synthetic_pings  # noqa: E402

from db.engine import create_database, drop_database, make_engine, parse_url  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.tracking.store import copy_fixes  # noqa: E402

INDEX_SETS: dict[str, tuple[str, ...]] = {
    "none": (),
    "brin_ts": ("CREATE INDEX bench_brin_ts ON fixes USING brin (ts)",),
    "h3_ts": ("CREATE INDEX bench_h3_ts ON fixes (h3_r9, ts)",),
    "brin_ts+h3_ts": (
        "CREATE INDEX bench_brin_ts ON fixes USING brin (ts)",
        "CREATE INDEX bench_h3_ts ON fixes (h3_r9, ts)",
    ),
}

QUERIES = {
    "vehicle x 2 h": (
        "SELECT ts, lat, lon, meter FROM fixes WHERE vehicle_id = :v "
        "AND ts >= :t AND ts < :t + interval '2 hours'"
    ),
    "h3 r9 cell x 6 h": (
        "SELECT vehicle_id, ts FROM fixes WHERE h3_r9 = :c "
        "AND ts >= :t AND ts < :t + interval '6 hours'"
    ),
    "fleet x 5 min": (
        "SELECT vehicle_id, ts, lat, lon FROM fixes WHERE ts >= :t "
        "AND ts < :t + interval '5 minutes'"
    ),
    "one day, count": (
        "SELECT count(*) FROM fixes WHERE ts >= :t0 AND ts < :t0 + interval '1 day'"
    ),
}


def _drop_extra_indexes(engine: Engine) -> None:
    with engine.begin() as conn:
        names = conn.execute(
            text(
                "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                "WHERE x.indrelid = 'fixes'::regclass AND NOT x.indisprimary"
            )
        ).scalars()
        for name in list(names):
            conn.execute(text(f"DROP INDEX {name}"))


def _ingest(engine: Engine, pings: pd.DataFrame) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    with engine.begin() as conn:
        got = copy_fixes(conn, pings, source="bench")
    if got != len(pings):
        raise RuntimeError(f"expected {len(pings)} rows, got {got}")
    return time.perf_counter() - t0, time.process_time() - c0


def _params(name: str, rng: np.random.Generator, pings: pd.DataFrame, cells: np.ndarray) -> dict:
    lo = pings["timestamp"].min().value // 1_000_000_000
    hi = pings["timestamp"].max().value // 1_000_000_000
    t = pd.Timestamp(int(rng.integers(lo, hi - 3600)), unit="s", tz="UTC").to_pydatetime()
    if name.startswith("vehicle"):
        return {"v": str(rng.choice(pings["vehicle_id"].unique())), "t": t}
    if name.startswith("h3"):
        return {"c": int(rng.choice(cells)), "t": t}
    if name.startswith("one day"):
        return {"t0": pd.Timestamp(t).floor("D").to_pydatetime()}
    return {"t": t}


def _query_times(
    engine: Engine, pings: pd.DataFrame, *, repeat: int, seed: int
) -> dict[str, tuple[float, float, float]]:
    with engine.connect() as conn:
        cells = np.asarray(
            conn.execute(text("SELECT h3_r9 FROM fixes GROUP BY h3_r9 HAVING count(*) > 100"))
            .scalars()
            .all()
        )
    out: dict[str, tuple[float, float, float]] = {}
    for name, sql in QUERIES.items():
        rng = np.random.default_rng(seed)
        times, rows = [], []
        with engine.connect() as conn:
            conn.execute(text(sql), _params(name, rng, pings, cells)).fetchall()  # warm-up
            for _ in range(repeat):
                p = _params(name, rng, pings, cells)
                t0 = time.perf_counter()
                got = conn.execute(text(sql), p).fetchall()
                times.append((time.perf_counter() - t0) * 1000)
                rows.append(len(got) if not name.startswith("one day") else int(got[0][0]))
        times.sort()
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        out[name] = (statistics.median(times), p90, statistics.median(rows))
    return out


def _size_mb(engine: Engine) -> float:
    with engine.connect() as conn:
        size = conn.execute(
            text(
                "SELECT sum(pg_indexes_size(c.oid)) FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'fixes'::regclass"
            )
        ).scalar()
    return float(size or 0) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2_000_000, help="fixes stored into new days")
    parser.add_argument("--live-n", type=int, default=200_000, help="fixes into existing days")
    parser.add_argument("--vehicles", type=int, default=200, help="taxis of the -n fixes")
    parser.add_argument("--repeat", type=int, default=30, help="runs of each query")
    parser.add_argument("--sets", default=",".join(INDEX_SETS), help="index sets to measure")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL")
    args = parser.parse_args()

    server = parse_url(_server_url(args.url))
    url = server.set(database=f"pontual_bench_{secrets.token_hex(4)}").render_as_string(
        hide_password=False
    )
    pings = synthetic_pings(args.n, vehicles=args.vehicles)
    live = synthetic_pings(args.live_n, vehicles=args.vehicles, seed=1)
    live["vehicle_id"] = ("L" + live["vehicle_id"].astype(str)).astype("str")
    span = pings["timestamp"].max() - pings["timestamp"].min()
    print(f"{len(pings):,} fixes, {args.vehicles} taxis, {span}; live {len(live):,} fixes")
    create_database(url)
    engine = make_engine(url)
    rows = []
    try:
        upgrade(url)
        for name in args.sets.split(","):
            _drop_daily_partitions(engine)
            with engine.begin() as conn:
                conn.execute(text("TRUNCATE fixes"))
            _drop_extra_indexes(engine)
            with engine.begin() as conn:
                for ddl in INDEX_SETS[name]:
                    conn.execute(text(ddl))
            load = os.getloadavg()[0]
            wall, _ = _ingest(engine, pings)
            live_wall, _ = _ingest(engine, live)
            with engine.begin() as conn:
                conn.execute(text("ANALYZE fixes"))
            times = _query_times(engine, pings, repeat=args.repeat, seed=7)
            rows.append((name, wall, live_wall, _size_mb(engine), times, load))
            print(f"  {name}: done (load {load:.1f})", flush=True)
    finally:
        engine.dispose()
        drop_database(url)

    header = "| index set | new days k/s | existing days k/s | index MB |"
    header += "".join(f" {q} ms (median / p90) |" for q in QUERIES) + " load |"
    print("\n" + header)
    print("|" + "---|" * (5 + len(QUERIES)))
    for name, wall, live_wall, size, times, load in rows:
        cells = "".join(f" {t[0]:.1f} / {t[1]:.1f} |" for t in times.values())
        print(
            f"| {name} | {len(pings) / wall / 1000:.0f} | {len(live) / live_wall / 1000:.0f} "
            f"| {size:.0f} |{cells} {load:.1f} |"
        )
    print("rows returned (median): " + ", ".join(f"{q} {t[2]:.0f}" for q, t in times.items()))


if __name__ == "__main__":
    main()
