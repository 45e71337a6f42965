"""Benchmark: vectorised H3 indexing alternatives, one core, same points, same cells.

h3-py has no vectorised call; this compares h3ronpy (what ``geo.h3.latlng_to_cells`` uses),
polars-h3 (optional: measured only if installed), and h3-py 4 in a Python loop and through
``np.vectorize`` (run on a 10 % subset, then scaled to points/s).

Usage: ``python bench/bench_h3_indexing.py [--points 2000000] [--resolution 12]``.
"""

from __future__ import annotations

import os

for _var in ("RAYON_NUM_THREADS", "POLARS_MAX_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import h3  # noqa: E402
import numpy as np  # noqa: E402

from geo.h3 import latlng_to_cells  # noqa: E402


def best_of(repeat: int, fn: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    best, out = float("inf"), np.empty(0, dtype=np.uint64)
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--resolution", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, res = args.points, args.resolution
    rng = np.random.default_rng(0)
    lat = rng.uniform(-30.16, -29.97, n)  # Porto Alegre's bounding box
    lon = rng.uniform(-51.26, -51.09, n)
    m = max(n // 10, 1)

    rows: list[tuple[str, int, float, bool]] = []
    sec, ref = best_of(args.repeat, lambda: latlng_to_cells(lat, lon, resolution=res))
    rows.append(("h3ronpy 0.22 (geo.h3.latlng_to_cells)", n, sec, True))
    try:
        import polars as pl
        import polars_h3 as plh3

        def run_polars() -> np.ndarray:
            frame = pl.DataFrame({"lat": lat, "lon": lon})
            expr = plh3.latlng_to_cell("lat", "lon", res, return_dtype=pl.UInt64)
            return frame.select(expr).to_series().to_numpy()

        sec, out = best_of(args.repeat, run_polars)
        rows.append(("polars-h3 (frame built inside)", n, sec, bool(np.array_equal(out, ref))))
    except ImportError:
        print("polars-h3 not installed: skipped")
    one = h3.api.basic_int.latlng_to_cell
    sub_lat, sub_lon = lat[:m].tolist(), lon[:m].tolist()

    def run_loop() -> np.ndarray:
        cells = (one(a, o, res) for a, o in zip(sub_lat, sub_lon, strict=True))
        return np.fromiter(cells, dtype=np.uint64, count=m)

    sec, out = best_of(1, run_loop)
    rows.append((f"h3-py {h3.__version__} Python loop", m, sec, bool(np.array_equal(out, ref[:m]))))
    vec = np.vectorize(one, otypes=[np.uint64])
    sec, out = best_of(1, lambda: vec(lat[:m], lon[:m], res))
    rows.append(("h3-py np.vectorize", m, sec, bool(np.array_equal(out, ref[:m]))))

    print(f"# H3 indexing, resolution {res}, one core\n")
    print("| method | points | seconds | points/s | same cells |")
    print("|---|---:|---:|---:|---|")
    for name, count, sec, same in rows:
        ok = "yes" if same else "NO"
        print(f"| {name} | {count:,} | {sec:.3f} | {count / sec / 1e6:.2f} M | {ok} |")
    print(f"\nload average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
