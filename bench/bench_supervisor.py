"""Benchmark: the supervisor's presence view of one stand over 30 days of stored fixes.

A throwaway database ``pontual_bench_supervisor_<hex>`` is created on the server of ``--url``
(else ``DATABASE_URL``, else the local cluster ``pontual db start`` manages), migrated, seeded,
and dropped at the end (``--keep NAME``: that database, seeded once and kept, so that two
versions of the code can be timed on the same fixes). One stand, ``--licensees`` licensees
waiting at it ``--hours`` a day for 30 days, a fix every 15 s (the heaviest a stand's view
reads: every fix near the stand), among ``--others`` taxis driving 16 h a day elsewhere in the
city, a ride every 30 min (some pass through the stand). Fixes are stored as the product
stores them (``copy_fixes``, with their place cell) and each closed day gets its place index
(``pontual db partitions``).
Timed, median and worst of ``--repeat`` runs after one warm-up, each on its own session:

- :func:`db.stands.queries.supervisor_presence`, what the stand page's presence table computes;
- its parts: :func:`~db.stands.queries.visits_from_fixes` (visits from the fixes near an inside
  one), :func:`~db.stands.queries.near_stand_fixes` (the fixes near the licensed stands, for the
  near and silent dwells) and :func:`~db.stands.queries.operation_sightings` (days operated);
- the stand map's frames (:func:`api.map_data.stand_frames`: visits, occupancy, presence) over
  its default 24 hours and its longest window, 7 days, ending on the last day at 17:00.

    .venv/bin/python bench/bench_supervisor.py [--licensees 10] [--hours 8] [--others 300]
        [--repeat 5] [--keep NAME]
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
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_web_queue import _database  # noqa: E402

END = dt.date(2024, 3, 30)
START = END - dt.timedelta(days=29)
LAT, LON = -30.0277, -51.2287
ZONE = ZoneInfo("America/Sao_Paulo")


def _day_frame(
    day: dt.date, vehicles: list[str], hours: float, place: Any, *, rides: bool = False
) -> pd.DataFrame:
    """Fixes every 15 s from 09:00 local for ``hours``; ``place(k, n)`` gives (lat, lon) arrays.

    The meter is free; with ``rides``, occupied one 10-minute block in three (a ride every 30
    min, each vehicle at its own phase).
    """
    n = int(hours * 240)
    start = pd.Timestamp(dt.datetime.combine(day, dt.time(9), tzinfo=ZONE))
    stamps = start + pd.to_timedelta(np.arange(n) * 15, unit="s")
    frames = []
    for k, vehicle in enumerate(vehicles):
        lat, lon = place(k, n)
        on = (np.arange(n) // 40 + k) % 3 == 0 if rides else np.zeros(n, dtype=bool)
        frames.append(
            pd.DataFrame(
                {
                    "vehicle_id": vehicle,
                    "timestamp": stamps.tz_convert("UTC"),
                    "lat": lat,
                    "lon": lon,
                    "meter": np.where(on, "occupied", "free"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _seed(engine: Any, licensees: int, hours: float, others: int) -> int:
    """Insert the stand, its licensees and their fixes, and ``others`` taxis' fixes elsewhere.

    Fixes are stored as the product stores them (``copy_fixes``: with their H3 cell), and each
    closed day gets its place index (``index_closed_days``, as ``pontual db partitions``). The
    other taxis drive 16 h a day in a box of 9 × 8 km south of the stand, reaching it, a ride
    every 30 min. Returns the fixes stored.
    """
    from shapely.geometry import Point, mapping
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from db.stands.registry import create_stand, grant_licence
    from db.tracking.store import copy_fixes, index_closed_days

    area = mapping(Point(LON, LAT).buffer(0.0003, cap_style="square"))
    vehicles = [f"B{k:03d}" for k in range(licensees)]
    with Session(engine) as s, s.begin():
        create_stand(session=s, stand_id="B1", actor="bench", area=area, kind="fixo", capacity=10)
        for vehicle in vehicles:
            s.execute(
                text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES (:v, :v)"), {"v": vehicle}
            )
            grant_licence(
                session=s, stand_id="B1", vehicle_id=vehicle, valid_from=START, actor="bench"
            )
    rng = np.random.default_rng(7)

    def waiting(k: int, n: int) -> tuple[Any, Any]:
        return LAT + (rng.random(n) - 0.5) * 0.0004, LON + (rng.random(n) - 0.5) * 0.0004

    def driving(k: int, n: int) -> tuple[Any, Any]:
        steps = rng.normal(0.0, 0.0002, (2, n)).cumsum(axis=1)
        lat = LAT - 0.08 + np.abs((steps[0] + rng.random() * 0.08) % 0.16 - 0.08)
        lon = LON - 0.04 + np.abs((steps[1] + rng.random() * 0.08) % 0.16 - 0.08)
        return lat, lon

    others_ids = [f"O{k:04d}" for k in range(others)]
    total = 0
    for i in range((END - START).days + 1):
        day = START + dt.timedelta(days=i)
        frame = _day_frame(day, vehicles, hours, waiting)
        if others:
            frame = pd.concat([frame, _day_frame(day, others_ids, 16.0, driving, rides=True)])
        with engine.begin() as conn:
            total += copy_fixes(conn, frame, source="bench")
        print(f"  seeded {day}: {total:,} fixes", file=sys.stderr, flush=True)
    index_closed_days(engine, before=END + dt.timedelta(days=2))
    with engine.begin() as conn:
        conn.execute(text("ANALYZE fixes"))
    return total


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
    parser.add_argument(
        "--others", type=int, default=300, help="other taxis driving elsewhere, 16 h a day"
    )
    parser.add_argument(
        "--keep",
        metavar="NAME",
        help="use and keep the database NAME on that server (seeded when it has no stand)",
    )
    args = parser.parse_args()

    from sqlalchemy import text

    from api.map_data import stand_frames
    from db.engine import drop_database, make_engine
    from db.stands.queries import (
        licence_frame,
        near_stand_fixes,
        operation_sightings,
        stands_frame,
        supervisor_presence,
        visits_from_fixes,
    )

    url = _kept(args.url, args.keep) if args.keep else _database(args.url)[1]
    engine = make_engine(url)
    lo = dt.datetime.combine(START, dt.time(), tzinfo=ZONE)
    hi = dt.datetime.combine(END + dt.timedelta(days=1), dt.time(), tzinfo=ZONE)
    ids = ["B1"]
    vehicles = [f"B{k:03d}" for k in range(args.licensees)]
    try:
        with engine.connect() as conn:
            seeded = conn.execute(text("SELECT count(*) FROM stands")).scalar_one()
        if not seeded:
            _seed(engine, args.licensees, args.hours, args.others)
        with engine.connect() as conn:
            fixes = conn.execute(text("SELECT count(*) FROM fixes")).scalar_one()
            taxis = conn.execute(text("SELECT count(DISTINCT vehicle_id) FROM fixes")).scalar_one()
        print(
            f"\n{args.licensees} licensees x 30 days x {args.hours:g} h at the stand, a fix every"
            f" 15 s, among {taxis:,} taxis: {fixes:,} fixes; median / worst of {args.repeat}"
            " runs, s\n"
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
        map_end = dt.datetime.combine(END, dt.time(17), tzinfo=ZONE)

        def map_frames(hours: int) -> Callable[[Any], Any]:
            return lambda s: stand_frames(
                s,
                stands=stands_frame(session=s, stand_ids=ids),
                since=map_end - dt.timedelta(hours=hours),
                now=map_end,
                timezone=str(ZONE),
            )

        for hours in (24, 168):
            calls.append((f"the stand map's frames, {hours} h (`stand_frames`)", map_frames(hours)))
        for name, call in calls:
            median, worst = _timed(engine, call, args.repeat)
            print(f"| {name} | {median:.2f} | {worst:.2f} |")
    finally:
        engine.dispose()
        if not args.keep:
            drop_database(url)


def _kept(base: str | None, name: str) -> str:
    """The URL of database ``name`` on the server of ``base``, created and migrated if new."""
    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import create_database, parse_url
    from db.migrate import upgrade

    url = parse_url(base or database_url(get_settings())).set(database=name)
    rendered = url.render_as_string(hide_password=False)
    create_database(rendered)
    upgrade(rendered)
    return rendered


if __name__ == "__main__":
    main()
