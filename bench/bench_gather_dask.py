"""Benchmark: the Dask engine's gathered stage, on the client against on the workers.

The data is ``bench_analyze.py``'s (its ``write_data``: the Porto Alegre stands, a contract
fleet, simulated fixes; ``--days`` > 1 gives its month-like shape: few taxis, many days,
Parquet). The fixes are read and validated once; a ``LocalCluster`` of ``--workers`` worker
processes runs :func:`engines.partitions.vehicle_stage` on the partitions (results kept on the
workers), then, ``--repeat`` times each, alternately:

client
    ``client.gather`` of every partition's result, then :func:`engines.partitions.gather` on
    the client (the engine before the gathered stage moved to the workers);
workers
    :func:`engines.distributed.gather_on_workers`: split by stand and cell-pair groups on the
    workers, shuffled worker to worker, one task per group; the client gathers the findings
    and the output frames.

Reported: wall time of the gathered stage (from the partitions' results on the workers to the
``AnalysisResult``), the CPU seconds of the client process and of the workers (summed; on a
machine shared with other jobs the wall time mostly says how busy it was), bytes the client
receives (pickled size of everything ``client.gather`` returns to it), and that both give the
same ``findings.geojson`` (bytes) and equal visits, trips, stops and occupancy.
``BENCH_STEPS=1`` prints the stages and the workers' task stream by function.

Usage::

    .venv/bin/python bench/bench_gather_dask.py [--n 1000000] [--vehicles 235] [--days 64]
        [--workers 2] [--groups N] [--repeat 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import POA, STAND_RADIUS_M, write_data  # noqa: E402

from engines.distributed import dask_client, gather_on_workers  # noqa: E402
from engines.partitions import gather, stage_context, vehicle_partitions, vehicle_stage  # noqa: E402
from engines.pipeline import AnalysisParams  # noqa: E402
from fleet.loaders import read_fleet  # noqa: E402
from runtime import keep_freed_heap  # noqa: E402
from stands.layers import read_any_stands  # noqa: E402
from tracking import frames as fr  # noqa: E402
from tracking.detectors.detect import last_local_day  # noqa: E402
from tracking.detectors.findings import KINDS, write_findings_geojson  # noqa: E402
from tracking.ingest import read_pings  # noqa: E402


class Counting:
    """Wrap a client: count the pickled bytes ``gather`` returns (its time not counted)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.bytes = 0
        self.spent_s = 0.0  # wall and CPU of the counting itself, taken off the timings

    def gather(self, futures: Any) -> Any:
        out = self.client.gather(futures)
        t = time.perf_counter()
        self.bytes += len(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
        self.spent_s += time.perf_counter() - t
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--vehicles", type=int, default=235)
    parser.add_argument("--days", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--groups", type=int, help="groups of each key (default: 2 per worker)")
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    keep_freed_heap()  # as `pontual analyze` does in its process
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_gather_"))
    folder.mkdir(parents=True, exist_ok=True)
    fmt = "parquet" if args.days > 1 else "csv"
    pings_path, stands_path, fleet_path = write_data(
        folder, n=args.n, vehicles=args.vehicles, days=args.days, fmt=fmt
    )
    params = AnalysisParams()
    pings, rejected = read_pings(pings_path, max_speed_kmh=params.max_speed_kmh)
    pings = pings.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable", ignore_index=True)
    stands = read_any_stands(stands_path, default_radius_m=STAND_RADIUS_M)
    fleet = read_fleet(fleet_path, municipality=POA)
    context = stage_context(
        stands,
        fleet=fleet,
        boundary=None,
        roads=None,
        as_of=last_local_day(pings, params.timezone),
        thresholds=None,
        kinds=KINDS,
        params=params,
    )
    with dask_client(workers=args.workers) as client:
        ranges = vehicle_partitions(
            pings[fr.VEHICLE_ID], partition_fixes=1_000_000, min_partitions=2 * args.workers
        )
        [ctx] = client.scatter([context], broadcast=True)
        parts = client.scatter([pings.iloc[a:b] for a, b in ranges])
        t = time.perf_counter()
        futures = client.map(vehicle_stage, parts, context=ctx, pure=False)
        client.gather(client.map(len, futures))
        stage_s = time.perf_counter() - t
        print(
            f"load {os.getloadavg()[0]:.1f}; {len(pings):,} fixes, {len(ranges)} partitions, "
            f"{args.workers} workers; vehicle stage {stage_s:.1f} s\n"
        )
        rows = []
        results = {}
        for _ in range(args.repeat):
            for way in ("client", "workers"):
                counting = Counting(client)
                cpu0 = time.process_time()
                workers0 = sum(client.run(time.process_time).values())
                t = time.perf_counter()
                if way == "client":
                    got = gather(counting.gather(futures), rejected, context, pings=pings)
                else:
                    t0 = time.perf_counter()

                    def said(label: str, t0: float = t0) -> None:
                        if os.environ.get("BENCH_STEPS"):
                            print(f"  {time.perf_counter() - t0:5.2f} s {label}")

                    from distributed import get_task_stream

                    with get_task_stream(client) as stream:
                        got = gather_on_workers(
                            counting,
                            futures,
                            rejected,
                            context,
                            pings=pings,
                            groups=args.groups,
                            progress=said,
                        )
                    if os.environ.get("BENCH_STEPS"):
                        print_stream(stream.data)
                wall = time.perf_counter() - t - counting.spent_s
                cpu = time.process_time() - cpu0 - counting.spent_s
                workers = sum(client.run(time.process_time).values()) - workers0
                rows.append((way, wall, counting.bytes, cpu, workers))
                results[way] = got
    a, b = results["client"], results["workers"]
    write_findings_geojson(a.findings, folder / "findings_client.geojson")
    write_findings_geojson(b.findings, folder / "findings_workers.geojson")
    same = (folder / "findings_client.geojson").read_bytes() == (
        folder / "findings_workers.geojson"
    ).read_bytes()
    for name in ("visits", "trips", "stops", "occupancy"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    print(
        f"findings.geojson byte-identical ({len(a.findings):,} findings): {same}; visits, trips, "
        f"stops, occupancy equal; load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| gathered stage | wall s | client CPU s | workers' CPU s (summed) "
        "| MB the client receives |"
    )
    print("|---|---:|---:|---:|---:|")
    for way in ("client", "workers"):
        mine = [r for r in rows if r[0] == way]
        cols = [" / ".join(f"{r[k]:.1f}" for r in mine) for k in (1, 3, 4)]
        print(f"| on the {way} | {' | '.join(cols)} | {mine[-1][2] / 1e6:,.1f} |")


def print_stream(data: list[dict[str, Any]]) -> None:
    """Print the tasks' compute and transfer seconds by function (``BENCH_STEPS``)."""
    spent: dict[tuple[str, str], float] = {}
    for task in data:
        name = str(task["key"]).split("-")[0].strip("('")
        for part in task["startstops"]:
            key = (name, part["action"])
            spent[key] = spent.get(key, 0.0) + part["stop"] - part["start"]
    for (name, action), secs in sorted(spent.items(), key=lambda kv: -kv[1])[:14]:
        print(f"    {name:28s} {action:10s} {secs:6.2f} s")


if __name__ == "__main__":
    main()
