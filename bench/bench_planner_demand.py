"""Benchmark: the planner's demand (the pickups of the last 7 and 30 days) on stored fixes.

On the database of ``bench_supervisor.py --keep NAME`` (seeded there when new: 310 taxis, 30
days, 35M fixes, 300 of them with a ride every 30 min), :func:`api.map_data.pickups_frame` (what
the planner's page and map read) over 7 and 30 days ending the day after the last one, at noon
UTC (its first hours of fixes are "today"): first with no day's pickups kept (every fix of the
window read), then after :func:`db.tracking.pickups.build_closed_days` (the daily ``pontual db
partitions``), timed too. Median and worst of ``--repeat`` runs after a warm-up, s.

    .venv/bin/python bench/bench_planner_demand.py --keep NAME [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_supervisor import END, _kept, _seed  # noqa: E402


def _timed(engine: Any, days: int, repeat: int) -> tuple[float, float, int]:
    """Median and worst seconds of ``pickups_frame`` over ``days``, and the pickups found."""
    from sqlalchemy.orm import Session

    from api.map_data import pickups_frame

    now = dt.datetime.combine(END + dt.timedelta(days=1), dt.time(12), tzinfo=dt.UTC)
    runs, found = [], 0
    for k in range(repeat + 1):
        with Session(engine) as session:
            t0 = time.perf_counter()
            found = len(pickups_frame(session, since=now - dt.timedelta(days=days), now=now))
            if k:
                runs.append(time.perf_counter() - t0)
    return statistics.median(runs), max(runs), found


def main() -> None:
    """Time the demand without and with the kept pickups; print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: DATABASE_URL, local)")
    parser.add_argument("--keep", metavar="NAME", required=True, help="the database to use")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from sqlalchemy import text

    from db.engine import make_engine
    from db.tracking.pickups import build_closed_days

    engine = make_engine(_kept(args.url, args.keep))
    try:
        with engine.connect() as conn:
            if not conn.execute(text("SELECT count(*) FROM stands")).scalar_one():
                _seed(engine, 10, 8.0, 300)
            fixes = conn.execute(text("SELECT count(*) FROM fixes")).scalar_one()
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM pickup_days"))
            conn.execute(text("DELETE FROM pickups"))
        before = {days: _timed(engine, days, args.repeat) for days in (7, 30)}
        t0 = time.perf_counter()
        built = build_closed_days(engine, before=END + dt.timedelta(days=1), recheck_days=0)
        build_s = time.perf_counter() - t0
        after = {days: _timed(engine, days, args.repeat) for days in (7, 30)}
        print(f"\n{fixes:,} fixes; median / worst of {args.repeat} runs, s\n")
        print("| window | pickups | days kept | nothing kept |\n|---|---:|---:|---:|")
        for days in (7, 30):
            assert before[days][2] == after[days][2], (before, after)
            print(
                f"| {days} days | {after[days][2]:,} | **{after[days][0]:.2f}** / "
                f"{after[days][1]:.2f} | {before[days][0]:.2f} / {before[days][1]:.2f} |"
            )
        print(f"\nbuild_closed_days: {len(built)} days in {build_s:.1f} s")
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
