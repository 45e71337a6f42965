"""Benchmark: the enforcement map with Porto Alegre's 379 stands and 25k–100k findings.

Findings are synthetic, spread over the city's stands' bounding box and a week: every kind, with
``illegal_stand_formation`` as polygons and ``longer_route`` carrying driven/reference lines.
Measured: the time to build and save the HTML (Python), the file size, and the time headless
Chromium (Debian ``chromium``, Playwright, no network, no tiles) takes from navigation start to
``PontualMaps.ready`` (layers built and two frames painted), best of ``--runs``, then a pan:
ten 200-pixel moves without animation, each until two frames are painted (the canvas redraws
every marker in view), mean per move. A click on a stand must then open its popup (checked on
every run). Every finding is drawn (``max_findings`` set to the count): the figures that chose
:data:`maps.sample.MAP_MAX_FINDINGS`.

Usage::

    .venv/bin/python bench/bench_maps.py [--findings 25000,50000,100000] [--routes 500] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from maps.findings import findings_map
from stands.loaders import read_stands_registry
from tracking.detectors.findings import KINDS

ROOT = Path(__file__).resolve().parents[1]
STANDS = ROOT / "data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson"
CHROMIUM = Path(os.environ.get("PONTUAL_CHROMIUM", "/usr/bin/chromium"))


def synthetic_findings(
    stands: gpd.GeoDataFrame, n: int, *, routes: int, seed: int
) -> gpd.GeoDataFrame:
    """``n`` findings over the stands' bounding box and a week (``routes`` with lines)."""
    rng = np.random.default_rng(seed)
    minx, miny, maxx, maxy = stands.total_bounds
    lon = rng.uniform(minx, maxx, n)
    lat = rng.uniform(miny, maxy, n)
    kinds = np.array(KINDS, dtype=object)[rng.integers(0, len(KINDS), n)]
    start = pd.Timestamp("2024-03-04T00:00:00Z") + pd.to_timedelta(
        rng.integers(0, 7 * 86400, n), unit="s"
    )
    geoms = list(gpd.points_from_xy(lon, lat))
    details: list[dict[str, object]] = [{} for _ in range(n)]
    areas = np.flatnonzero(kinds == "illegal_stand_formation")
    for i in areas:
        geoms[i] = shapely.Point(lon[i], lat[i]).buffer(0.0006, quad_segs=4)
        details[i] = {"n_vehicles": 4, "n_days": 3, "n_stops": 9}
    for i in np.flatnonzero(kinds == "longer_route")[:routes]:
        steps = np.cumsum(rng.normal(0, 0.0015, (40, 2)), axis=0) + [lon[i], lat[i]]
        details[i] = {
            "driven_m": 6200.0,
            "reference_m": 3900.0,
            "ratio": 1.59,
            "driven_line": np.round(steps, 6).tolist(),
            "reference_line": np.round(steps[[0, 10, 20, 39]], 6).tolist(),
        }
    return gpd.GeoDataFrame(
        {
            "finding_id": [f"{k[:3]}-{i:07d}" for i, k in enumerate(kinds)],
            "kind": kinds,
            "vehicle_id": [f"{v:04d}" for v in rng.integers(1, 3678, n)],
            "stand_id": [None] * n,
            "started_at": start,
            "ended_at": start + pd.to_timedelta(rng.integers(60, 3600, n), unit="s"),
            "confidence": rng.uniform(0.5, 0.95, n).round(3),
            "details": details,
        },
        geometry=gpd.GeoSeries(geoms, crs=4326),
        crs=4326,
    )


def with_all_placed(stands: gpd.GeoDataFrame, *, seed: int) -> gpd.GeoDataFrame:
    """All 379 stands: the 15 without coordinates in the open data get a random place."""
    rng = np.random.default_rng(seed)
    missing = stands.geometry.isna() | stands.geometry.is_empty
    minx, miny, maxx, maxy = stands.loc[~missing].total_bounds
    points = gpd.points_from_xy(
        rng.uniform(minx, maxx, int(missing.sum())), rng.uniform(miny, maxy, int(missing.sum()))
    )
    placed = gpd.GeoSeries(points, crs=4326).to_crs(31982).buffer(30.0).to_crs(4326)
    out = stands.copy()
    out.loc[missing, "geometry"] = placed.to_numpy()
    return out.reset_index(drop=True)


PAN = """async () => {
  const map = PontualMaps.maps.map.map;
  map.setZoom(map.getZoom() - 1, {animate: false});  // the whole city in view
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await frames();
  const t0 = performance.now();
  for (let k = 0; k < 10; k++) {
    map.panBy([k % 2 ? -200 : 200, 0], {animate: false});
    await frames();
  }
  return (performance.now() - t0) / 10;
}"""


def load_ms(html: Path, *, runs: int) -> tuple[list[float], list[list[float]], list[float]]:
    """Navigation start → ``PontualMaps.ready`` in headless Chromium, one fresh page per run.

    Also returns, per run, when the layers' build started and ended (ms from navigation), and
    the mean time of a pan step (:data:`PAN`).
    """
    from playwright.sync_api import sync_playwright

    times: list[float] = []
    phases: list[list[float]] = []
    pans: list[float] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        for _ in range(runs):
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            context.route(
                "**/*",
                lambda route: (
                    route.continue_() if route.request.url.startswith("file://") else route.abort()
                ),
            )
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(html.as_uri())
            page.wait_for_function("window.PontualMaps && PontualMaps.ready", timeout=120_000)
            times.append(float(page.evaluate("PontualMaps.readyAt")))
            phases.append(page.evaluate("[PontualMaps.t0, PontualMaps.t1]"))
            pans.append(float(page.evaluate(PAN)))
            point = page.evaluate("PontualMaps.pagePoint('stands', 0)")
            page.mouse.click(point["x"], point["y"])
            page.wait_for_selector(".leaflet-popup-content", timeout=5_000)
            if errors:
                sys.exit(f"page errors: {errors}")
            context.close()
        browser.close()
    return times, phases, pans


def main() -> None:
    """Build each map, save it, open it in Chromium and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", default="25000,50000,100000", help="counts, comma-separated")
    parser.add_argument("--routes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    stands = read_stands_registry(STANDS, municipality="4314902", point_radius_m=30.0)
    stands = with_all_placed(stands, seed=args.seed)
    print(
        "| findings | build + save (Python) | HTML | load to ready, best | of which parsed / "
        "layers / paint | pan step, mean |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(v) for v in args.findings.split(",")):
        findings = synthetic_findings(stands, n, routes=args.routes, seed=args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            html = Path(tmp) / "map.html"
            t0 = time.perf_counter()
            findings_map(stands, findings, max_findings=max(n, 1), tiles=None).save(str(html))
            build_s = time.perf_counter() - t0
            size_mb = html.stat().st_size / 1e6
            loads, phases, pans = load_ms(html, runs=args.runs)
        best = phases[loads.index(min(loads))]
        print(
            f"| {n:,} | {build_s:.2f} s | {size_mb:.1f} MB | {min(loads) / 1000:.2f} s "
            f"({', '.join(f'{ms / 1000:.2f}' for ms in loads)}) | {best[0] / 1000:.2f} / "
            f"{(best[1] - best[0]) / 1000:.2f} / {(min(loads) - best[1]) / 1000:.2f} s | "
            f"{min(pans):.0f} ms ({', '.join(f'{ms:.0f}' for ms in pans)}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
