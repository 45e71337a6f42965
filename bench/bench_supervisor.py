"""Benchmark: the supervisor's presence view of one stand over 30 days of stored fixes.

A throwaway database ``pontual_bench_supervisor_<hex>`` is created on the server of ``--url``
(else ``DATABASE_URL``, else the local cluster ``pontual db start`` manages), migrated, seeded,
and dropped at the end: one stand, ``--licensees`` licensees waiting at it ``--hours`` a day for
30 days, a fix every 15 s (the heaviest a stand's view reads: every fix near the stand). Timed,
median and worst of ``--repeat`` runs after one warm-up, each on its own session:

- :func:`db.stands.queries.supervisor_presence`, what the stand page's presence table computes;
- its parts: :func:`~db.stands.queries.visits_from_fixes` (visits from the fixes near an inside
  one), :func:`~db.stands.queries.near_stand_fixes` (the fixes near the licensed stands, for the
  near and silent dwells) and :func:`~db.stands.queries.operation_sightings` (days operated).

    .venv/bin/python bench/bench_supervisor.py [--licensees 10] [--hours 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_web_queue import _database  # noqa: E402

END = dt.date(2024, 3, 30)
START = END - dt.timedelta(days=29)
LAT, LON = -30.0277, -51.2287


def _seed(engine: Any, licensees: int, hours: float) -> int:
    """Insert the stand, its licensees and their fixes; return the number of fixes."""
    from shapely.geometry import Point, mapping
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from db.stands.registry import create_stand, grant_licence

    area = mapping(Point(LON, LAT).buffer(0.0003, cap_style="square"))
    with Session(engine) as s, s.begin():
        create_stand(session=s, stand_id="B1", actor="bench", area=area, kind="fixo", capacity=10)
        for k in range(licensees):
            vehicle = f"B{k:03d}"
            s.execute(
                text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES (:v, :v)"), {"v": vehicle}
            )
            grant_licence(
                session=s, stand_id="B1", vehicle_id=vehicle, valid_from=START, actor="bench"
            )
            s.execute(
                text(
                    "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, source)"
                    " SELECT :v, t, y, x, ST_Point(x, y, 4326), 'free', false, 'bench' FROM ("
                    "  SELECT d + time '09:00' + make_interval(secs => 15 * i) AS t,"
                    "   :lat + (random() - 0.5) * 0.0004 AS y,"
                    "   :lon + (random() - 0.5) * 0.0004 AS x"
                    "  FROM generate_series(:a ::date, :b ::date, interval '1 day') d,"
                    "   generate_series(0, :n - 1) i) q"
                ),
                {"v": vehicle, "lat": LAT, "lon": LON, "a": START, "b": END, "n": int(hours * 240)},
            )
        s.execute(text("ANALYZE fixes"))
        return int(s.execute(text("SELECT count(*) FROM fixes")).scalar_one())


def _timed(engine: Any, call: Callable[[Any], Any], repeat: int) -> tuple[float, float]:
    from sqlalchemy.orm import Session

    runs = []
    for k in range(repeat + 1):
        with Session(engine) as session:
            t0 = time.perf_counter()
            call(session)
            if k:  # the first run warms the caches
                runs.append(time.perf_counter() - t0)
    return statistics.median(runs), max(runs)


def main() -> None:
    """Seed, time the view and its parts, print a Markdown table, drop the database."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: DATABASE_URL, local)")
    parser.add_argument("--licensees", type=int, default=10)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from zoneinfo import ZoneInfo

    from db.engine import drop_database, make_engine
    from db.stands.queries import (
        licence_frame,
        near_stand_fixes,
        operation_sightings,
        stands_frame,
        supervisor_presence,
        visits_from_fixes,
    )

    _, url = _database(args.url)
    engine = make_engine(url)
    zone = ZoneInfo("America/Sao_Paulo")
    lo = dt.datetime.combine(START, dt.time(), tzinfo=zone)
    hi = dt.datetime.combine(END + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    ids = ["B1"]
    vehicles = [f"B{k:03d}" for k in range(args.licensees)]
    try:
        fixes = _seed(engine, args.licensees, args.hours)
        print(
            f"\n{args.licensees} licensees x 30 days x {args.hours:g} h at the stand, a fix every"
            f" 15 s: {fixes:,} fixes; median / worst of {args.repeat} runs, s\n"
        )
        print("| call | median s | worst s |\n|---|---:|---:|")
        calls: list[tuple[str, Callable[[Any], Any]]] = [
            (
                "`supervisor_presence` (the presence table)",
                lambda s: supervisor_presence(session=s, stand_ids=ids, start=START, end=END),
            ),
            (
                "↳ `visits_from_fixes`",
                lambda s: visits_from_fixes(session=s, stand_ids=ids, start=lo, end=hi),
            ),
            (
                "↳ `near_stand_fixes`",
                lambda s: near_stand_fixes(
                    session=s,
                    licences=licence_frame(session=s, stand_ids=ids),
                    stands=stands_frame(session=s, stand_ids=ids),
                    start=START,
                    end=END,
                ),
            ),
            (
                "↳ `operation_sightings`",
                lambda s: operation_sightings(
                    session=s, vehicle_ids=vehicles, start=START, end=END
                ),
            ),
        ]
        for name, call in calls:
            median, worst = _timed(engine, call, args.repeat)
            print(f"| {name} | {median:.2f} | {worst:.2f} |")
    finally:
        engine.dispose()
        drop_database(url)


if __name__ == "__main__":
    main()
