"""Benchmark: CPU of the file engine's spill, bucket reads and validation, stage by stage.

    .venv/bin/python bench/bench_spill.py PINGS [PINGS ...] [--jobs 2] [--repeat 3]

Runs what ``pontual analyze`` does before the detectors, in this one process and one task at a
time, so that ``time.process_time`` sees all of it: :func:`engines.buckets.spill` of the file
into the buckets ``--jobs`` gives (its ranges read in turn, not in forked processes), then for
each bucket :func:`engines.buckets.read_spilled` and the raw frame (*read*) and
:func:`tracking.validate.validate_pings` (*validate*). Prints the CPU seconds of each stage,
best of ``--repeat`` runs, with the load average (1 min) before and after, since the machine may
be shared; and the rows kept and rejected, as a check.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from engines.buckets import (
    DEFAULT_BUCKET_FIXES,
    bucket_count,
    estimate_rows,
    read_spilled,
    spill,
)
from engines.early import SPILL_CHUNK_ROWS
from tracking.ingest import RawPings
from tracking.validate import validate_pings

NOW = pd.Timestamp("2030-01-01", tz="UTC")


def _serial(func: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
    return map(func, items)


def run(path: Path, *, jobs: int) -> dict[str, float]:
    """Return the CPU seconds of each stage (and the rows kept and rejected) for one file."""
    source = RawPings.open(path, chunk_rows=SPILL_CHUNK_ROWS)
    n_buckets = bucket_count(estimate_rows(source), bucket_fixes=DEFAULT_BUCKET_FIXES, jobs=jobs)
    out = {"spill": 0.0, "read": 0.0, "validate": 0.0, "kept": 0, "rejected": 0}
    with tempfile.TemporaryDirectory(prefix="bench-spill-") as tmp:
        start = time.process_time()
        _, buckets = spill(source, Path(tmp), n_buckets, jobs=jobs, mapper=_serial)
        out["spill"] = time.process_time() - start
        for bucket in buckets.values():
            start = time.process_time()
            raw = source.frame(read_spilled(source, bucket))
            read = time.process_time()
            pings, rejected = validate_pings(raw, now=NOW)
            out["read"] += read - start
            out["validate"] += time.process_time() - read
            out["kept"] += len(pings)
            out["rejected"] += len(rejected)
    return out


def main() -> None:
    """Run the stages on each file ``--repeat`` times; print the best CPU of each stage."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pings", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    print("| file | spill CPU s | read CPU s | validate CPU s | sum | kept | rejected |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in args.pings:
        runs = [run(path, jobs=args.jobs) for _ in range(args.repeat)]
        best = {k: min(r[k] for r in runs) for k in ("spill", "read", "validate")}
        total = min(r["spill"] + r["read"] + r["validate"] for r in runs)
        print(
            f"| {path.name} | {best['spill']:.2f} | {best['read']:.2f} | "
            f"{best['validate']:.2f} | {total:.2f} | {runs[0]['kept']:,} | "
            f"{runs[0]['rejected']:,} |"
        )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
