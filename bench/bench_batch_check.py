"""Benchmark: one device batch checked by the record reader or by ``validate_pings``, in process.

``api.ingest.check_batch`` reads a batch of plain JSON cells in Python and judges it by the rule
table of :mod:`tracking.validate` (``row_codes``); a batch with any other cell goes through
``validate_pings`` (pandas, Arrow). Both paths are timed here on the same batches of 1, 10 and
100 fixes (as ``bench_http_ingest.py`` sends them: ISO instants with an offset, lat/lon, speed,
meter), interleaved, each timing the mean of ``--repeat`` calls; the minimum and the median of
``--rounds`` timings are printed. No database.

    .venv/bin/python bench/bench_batch_check.py
    .venv/bin/python bench/bench_batch_check.py --rounds 5 --repeat 100
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from api import ingest


def _rows(n: int, start: pd.Timestamp) -> list[dict[str, Any]]:
    return [
        {
            "timestamp": (start + pd.Timedelta(seconds=i)).isoformat(),
            "lat": -30.03 + 0.0001 * (i % 100),
            "lon": -51.23,
            "speed_kmh": 20.0,
            "meter": "free",
        }
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=200, help="calls per timing (record reader)")
    args = parser.parse_args()
    now = pd.Timestamp.now(tz="UTC")
    not_before = now - pd.Timedelta(days=7)
    paths: dict[str, tuple[Callable[..., ingest.CheckedBatch], int]] = {
        "record reader": (ingest._fast_check, args.repeat),
        "validate_pings": (ingest._slow_check, max(1, args.repeat // 10)),
    }
    print("rows  path              min ms   median ms")
    for n in (1, 10, 100):
        rows = _rows(n, now - pd.Timedelta(hours=1))
        timings: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, (check, repeat) in paths.items():
                t0 = time.perf_counter()
                for _ in range(repeat):
                    check(rows, vehicle_id="B000", now=now, not_before=not_before)
                timings[name].append((time.perf_counter() - t0) / repeat * 1e3)
        for name, ms in timings.items():
            print(f"{n:4d}  {name:16s}{min(ms):8.3f}  {statistics.median(ms):10.3f}")


if __name__ == "__main__":
    main()
