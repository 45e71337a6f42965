"""Benchmark: ping → stand matching on Porto Alegre-sized data, one core.

Stands: the real Porto Alegre stands with ``coord_quality == ok`` (364 of 379) buffered 30 m.
Pings: N (default 2M) over the city's bounding box, 40 % of them within 50 m of a stand, so that
~15 % fall inside one. All methods run in this one process on the same pings and must return the
same (ping, stand) pairs:

- ``h3 index``: ``geo.h3.latlng_to_cells`` alone;
- ``ours``: ``geo.cover.match_stands`` (H3 indexing + cover lookup + exact test of boundary cells);
- ``geopandas sjoin``: ``points_from_xy`` + ``sjoin(predicate="within")``;
- ``shapely STRtree``: ``shapely.points`` + ``STRtree.query(points, predicate="within")``.

Then a resolution sweep of ``ours`` (POA 30 m stands with 15 % and with 90 % of pings inside, and
Porto's stands at 50/100/150 m, which overlap), and peak memory of each method on 10M pings, each
in its own subprocess (peak RSS from ``/proc/self/status`` VmHWM, reset after generating the
pings).

Usage: ``python bench/bench_matching.py [--pings 2000000] [--memory-pings 10000000]``.
"""

from __future__ import annotations

import os

for _var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "POLARS_MAX_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import geopandas as gpd  # noqa: E402
import numpy as np  # noqa: E402
import shapely  # noqa: E402

from geo.cover import DEFAULT_RESOLUTION, build_stand_cover, match_stands  # noqa: E402
from geo.crs import buffer_points_m  # noqa: E402
from geo.h3 import latlng_to_cells  # noqa: E402
from stands.layers import read_porto_stands  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POA_STANDS = ROOT / "data" / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
PORTO_STANDS = ROOT / "data" / "porto" / "derived" / "taxi_stands.csv"
M_LAT = 1 / 111_320.0

Pairs = tuple[np.ndarray, np.ndarray]


def poa_stands(radius_m: float = 30.0) -> gpd.GeoDataFrame:
    raw = gpd.read_file(POA_STANDS)
    raw = raw[raw["coord_quality"] == "ok"].reset_index(drop=True)
    pts = gpd.GeoDataFrame(
        {"stand_id": raw["codigo"].astype(str)}, geometry=raw.geometry.values, crs=4326
    )
    return buffer_points_m(pts, radius_m)


def porto_stands() -> gpd.GeoDataFrame:
    parts = []
    for radius in (50, 100, 150):
        frame = read_porto_stands(PORTO_STANDS, radius_m=radius)
        frame["stand_id"] = f"{radius}-" + frame["stand_id"]
        parts.append(frame)
    return gpd.GeoDataFrame(
        np.concatenate([p[["stand_id", "geometry"]].to_numpy() for p in parts]),
        columns=["stand_id", "geometry"],
        geometry="geometry",
        crs=4326,
    )


def make_pings(
    stands: gpd.GeoDataFrame, n: int, *, near_share: float, near_m: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``near_share`` of the pings within ``near_m`` of a stand centre, the rest over the bbox."""
    rng = np.random.default_rng(seed)
    centres = shapely.centroid(stands.geometry.to_numpy())
    cx, cy = shapely.get_x(centres), shapely.get_y(centres)
    minx, miny, maxx, maxy = stands.total_bounds
    pad = 0.01
    k = int(n * near_share)
    pick = rng.integers(0, cx.size, k)
    ang = rng.uniform(0, 2 * np.pi, k)
    r = near_m * np.sqrt(rng.uniform(0, 1, k))
    lat = np.empty(n)
    lon = np.empty(n)
    lat[:k] = cy[pick] + r * np.sin(ang) * M_LAT
    lon[:k] = cx[pick] + r * np.cos(ang) * M_LAT / np.cos(np.radians(cy[pick]))
    lat[k:] = rng.uniform(miny - pad, maxy + pad, n - k)
    lon[k:] = rng.uniform(minx - pad, maxx + pad, n - k)
    order = rng.permutation(n)
    return lat[order], lon[order]


# --- the methods ---------------------------------------------------------------------------


def run_index(stands: gpd.GeoDataFrame, lat: np.ndarray, lon: np.ndarray, res: int) -> None:
    latlng_to_cells(lat, lon, resolution=res)


def run_ours(stands: gpd.GeoDataFrame, lat: np.ndarray, lon: np.ndarray, res: int) -> Pairs:
    cover = build_stand_cover(stands, resolution=res)
    return match_stands(lat, lon, cover)


def run_sjoin(stands: gpd.GeoDataFrame, lat: np.ndarray, lon: np.ndarray, res: int) -> Pairs:
    points = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    joined = gpd.sjoin(points, stands[["geometry"]].reset_index(drop=True), predicate="within")
    return sorted_pairs(joined.index.to_numpy(), joined["index_right"].to_numpy())


def run_strtree(stands: gpd.GeoDataFrame, lat: np.ndarray, lon: np.ndarray, res: int) -> Pairs:
    tree = shapely.STRtree(stands.geometry.to_numpy())
    ping, stand = tree.query(shapely.points(lon, lat), predicate="within")
    return sorted_pairs(ping, stand)


METHODS: dict[str, Callable[..., object]] = {
    "index": run_index,
    "ours": run_ours,
    "sjoin": run_sjoin,
    "strtree": run_strtree,
}


def sorted_pairs(ping: np.ndarray, stand: np.ndarray) -> Pairs:
    order = np.lexsort((stand, ping))
    return ping[order].astype(np.int64), stand[order].astype(np.int64)


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


# --- memory (child processes) --------------------------------------------------------------


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def child(method: str, n: int, res: int) -> None:
    stands = poa_stands()
    lat, lon = make_pings(stands, n, near_share=0.4, near_m=50.0)
    before = _status_kb("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to now
        reset = True
    except OSError:
        reset = False
    t0 = time.perf_counter()
    METHODS[method](stands, lat, lon, res)
    seconds = time.perf_counter() - t0
    out = {"rss_before_mb": before / 1024, "peak_mb": _status_kb("VmHWM") / 1024}
    print(json.dumps({**out, "seconds": seconds, "peak_reset": reset}))


def measure_memory(method: str, n: int, res: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", method, "--pings", str(n), "--resolution", str(res)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pings", type=int, default=2_000_000)
    parser.add_argument("--resolution", type=int, default=DEFAULT_RESOLUTION)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-pings", type=int, default=10_000_000, help="0 to skip")
    parser.add_argument("--sweep", type=int, nargs="*", default=[10, 11, 12, 13, 14])
    parser.add_argument("--child", choices=sorted(METHODS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pings, args.resolution)
        return

    n, res = args.pings, args.resolution
    load0 = os.getloadavg()
    stands = poa_stands()
    lat, lon = make_pings(stands, n, near_share=0.4, near_m=50.0)
    print(f"# Matching benchmark — {n:,} pings, {len(stands)} POA stands (30 m), res {res}\n")
    print(
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, single-threaded (RAYON/OMP/POLARS threads = 1)\n"
    )

    t_build, cover = best_of(args.repeat, lambda: build_stand_cover(stands, resolution=res))
    results: dict[str, tuple[float, object]] = {}
    for name in ("index", "ours", "strtree", "sjoin"):
        fn = METHODS[name]
        if name == "ours":
            results[name] = best_of(args.repeat, lambda: match_stands(lat, lon, cover))  # noqa: B023
        else:
            results[name] = best_of(args.repeat, lambda fn=fn: fn(stands, lat, lon, res))

    ours = results["ours"][1]
    assert isinstance(ours, tuple)
    inside = np.unique(ours[0]).size
    same = all(
        np.array_equal(ours[0], other[0]) and np.array_equal(ours[1], other[1])
        for other in (results["sjoin"][1], results["strtree"][1])
        if isinstance(other, tuple)
    )
    print(f"pings inside a stand: {inside:,} ({inside / n:.1%}); pairs: {ours[0].size:,}; ")
    print(f"identical pairs (ours = sjoin = STRtree): {'yes' if same else 'NO'}\n")

    base = n / results["sjoin"][0]
    labels = {
        "index": "H3 indexing alone (h3ronpy)",
        "ours": "ours: H3 index + exact match",
        "strtree": "shapely STRtree query (within)",
        "sjoin": "geopandas points_from_xy + sjoin",
    }
    print("| method | seconds | pings/s | vs sjoin |")
    print("|---|---:|---:|---:|")
    for name in ("index", "ours", "strtree", "sjoin"):
        sec = results[name][0]
        print(f"| {labels[name]} | {sec:.3f} | {n / sec / 1e6:.2f} M | {n / sec / base:.1f}× |")
    print(f"\ncover build (once per stand set): {t_build:.3f} s, {cover.cells.size:,} cells\n")

    if args.sweep:
        porto = porto_stands()
        plat, plon = make_pings(porto, n, near_share=0.4, near_m=200.0, seed=1)
        dlat, dlon = make_pings(stands, n, near_share=0.9, near_m=30.0, seed=2)
        print("## Resolution sweep (ours)\n")
        print("| stands | res | cover cells | interior entries | build s | pings/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, frame, la, lo in (
            ("POA 30 m, 15 % inside", stands, lat, lon),
            ("POA 30 m, 90 % inside", stands, dlat, dlon),
            ("Porto 50/100/150 m, ~20 % inside", porto, plat, plon),
        ):
            for r in args.sweep:
                tb, cov = best_of(
                    1, lambda r=r, frame=frame: build_stand_cover(frame, resolution=r)
                )
                sec, _ = best_of(
                    args.repeat, lambda cov=cov, la=la, lo=lo: match_stands(la, lo, cov)
                )
                share = float(cov.entry_interior.mean()) if cov.entry_interior.size else 0.0
                print(
                    f"| {label} | {r} | {cov.cells.size:,} | {share:.0%} | {tb:.2f} | "
                    f"{n / sec / 1e6:.2f} M |"
                )
        print()

    if args.memory_pings:
        m = args.memory_pings
        print(f"## Peak memory, {m:,} pings (own subprocess each; ping arrays included)\n")
        print("| method | seconds | RSS before (pings in memory) | peak RSS | peak − before |")
        print("|---|---:|---:|---:|---:|")
        for name in ("index", "ours", "strtree", "sjoin"):
            r = measure_memory(name, m, res)
            print(
                f"| {labels[name]} | {r['seconds']:.1f} | {r['rss_before_mb']:.0f} MB | "
                f"{r['peak_mb']:.0f} MB | {r['peak_mb'] - r['rss_before_mb']:.0f} MB |"
            )
        print()
    load1 = os.getloadavg()
    print(
        f"load average (1 min) at start {load0[0]:.2f}, at end {load1[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
