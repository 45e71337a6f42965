"""Benchmark: reading and validating a pings CSV (tracking.ingest.read_pings).

Writes a synthetic file in the public ping format: N rows, 1,000 taxis reporting every 15 s and
wandering ~20 m per fix, rows in time order (as a fleet server exports them), ISO 8601 timestamps
with the -03:00 offset, all optional columns, and 1 % of rows broken in assorted ways (bad
coordinates, naive timestamps, unknown meter, exact duplicates). Times the whole ``read_pings``
(read + validate + sort + speed flags), best of ``--repeat``, with Arrow on one thread and on all
cores.

Usage::

    .venv/bin/python bench/bench_ingest.py [--n 1000000] [--repeat 3] [--parquet]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tracking.ingest import read_pings

START = pd.Timestamp("2024-03-04T09:00:00Z")


def synthetic_csv(path: Path, n: int, *, seed: int = 5, parquet: bool = False) -> None:
    """Write ``n`` rows of 1,000 taxis in time order, 1 % of them bad."""
    rng = np.random.default_rng(seed)
    n_vehicles = 1000
    vehicle = np.arange(n) % n_vehicles
    ts = (
        pd.Timestamp("2024-03-04T09:00:00Z").value // 1_000_000_000
        + (np.arange(n) // n_vehicles) * 15
    )
    stamp = (
        pd.to_datetime(ts, unit="s", utc=True)
        .tz_convert("America/Sao_Paulo")
        .strftime("%Y-%m-%dT%H:%M:%S%z")
        .str.replace(r"(\d\d)$", r":\1", regex=True)
    )
    # Each taxi wanders from its own start, up to ~20 m per axis every 15 s.
    steps = -(-n // n_vehicles)
    walk = rng.normal(0, 0.0001, (steps, n_vehicles, 2)).cumsum(axis=0).reshape(-1, 2)[:n]
    start = rng.normal(0, 0.03, (n_vehicles, 2))[vehicle]
    lat = np.round(-30.03 + start[:, 0] + walk[:, 0], 6).astype(str)
    lon = np.round(-51.22 + start[:, 1] + walk[:, 1], 6).astype(str)
    meter = rng.choice(["free", "occupied", "off"], n)
    tariff = np.where(meter == "occupied", rng.choice(["1", "2"], n), "")
    frame = pd.DataFrame(
        {
            "vehicle_id": np.char.add("POA-", vehicle.astype(str)),
            "timestamp": np.asarray(stamp, dtype=object),
            "lat": lat,
            "lon": lon,
            "speed_kmh": np.round(rng.uniform(0, 80, n), 1).astype(str),
            "heading_deg": rng.integers(0, 360, n).astype(str),
            "accuracy_m": rng.integers(3, 30, n).astype(str),
            "meter": meter,
            "tariff": tariff,
            "driver_id": np.char.add("D", (vehicle * 2 + rng.integers(0, 2, n)).astype(str)),
        }
    )
    bad = np.flatnonzero(rng.random(n) < 0.01)
    kinds = rng.integers(0, 5, len(bad))
    frame.loc[bad[kinds == 0], "lat"] = ""
    frame.loc[bad[kinds == 1], "lon"] = "abc"
    frame.loc[bad[kinds == 2], "timestamp"] = "2024-03-04 09:00:00"
    frame.loc[bad[kinds == 3], "meter"] = "busy"
    dup = bad[(kinds == 4) & (bad > 0)]
    frame.iloc[dup] = frame.iloc[dup - 1].to_numpy()
    if parquet:
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parquet", action="store_true", help="Parquet instead of CSV")
    args = parser.parse_args()
    now = START + pd.Timedelta(seconds=15 * (args.n // 1000 + 1))  # just after the last fix
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("pings.parquet" if args.parquet else "pings.csv")
        synthetic_csv(path, args.n, parquet=args.parquet)
        size_mb = path.stat().st_size / 1e6
        print(f"{path.suffix[1:]}: {args.n:,} rows, {size_mb:,.0f} MB\n")
        print("| Arrow threads | seconds | rows/s | pings | rejected |")
        print("|---:|---:|---:|---:|---:|")
        for threads in (1, pa.cpu_count()):
            previous = pa.cpu_count()
            pa.set_cpu_count(threads)
            best = float("inf")
            pings = rejected = pd.DataFrame()
            for _ in range(args.repeat):
                t = time.perf_counter()
                pings, rejected = read_pings(path, now=now)
                best = min(best, time.perf_counter() - t)
            pa.set_cpu_count(previous)
            rate = args.n / best
            print(f"| {threads} | {best:.2f} | {rate:,.0f} | {len(pings):,} | {len(rejected):,} |")
        print("\nrejected by reason:", rejected["reason"].value_counts().to_dict())


if __name__ == "__main__":
    main()
