"""Occupancy of all 379 Porto Alegre stands over one simulated day of the whole real fleet.

    .venv/bin/python bench/bench_occupancy.py [--hours 24] [--bucket 15min]

The 3,677 prefixos of Porto Alegre's fleet file (2020 open data) each send a fix every 15 s for
``--hours`` hours (the synthetic day of ``bench_analyze.py``: waits at stands in queue places,
trips, cruising, GPS noise); the 379 stands are those of the open data, as points buffered 30 m
(the 15 without coordinates are placed at random inside the city, seeded). Timed, each with its
peak RSS (``VmHWM`` reset at the stage's start): stand cover + exact matching, visits (queue,
boardings, licences from the real fleet's stands), and occupancy of every stand in buckets.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import (  # noqa: E402
    LAT_RANGE,
    LON_RANGE,
    POA,
    POA_STANDS,
    STAND_RADIUS_M,
    _reset_peak,
    _status_mb,
    simulate,
)

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "data" / "brazil" / "taxi_fleet" / "frota_taxi_poa_2020-03-12.csv"


def all_stands(seed: int = 5) -> pd.DataFrame:
    """Every stand of the open data; the ones without coordinates at random in the city."""
    rng = np.random.default_rng(seed)
    rows = []
    for feat in json.loads(POA_STANDS.read_text(encoding="utf-8"))["features"]:
        props, geom = feat["properties"], feat["geometry"]
        if geom and props.get("coord_quality") == "ok":
            lon, lat = geom["coordinates"][:2]
        else:
            lat, lon = rng.uniform(*LAT_RANGE), rng.uniform(*LON_RANGE)
        rows.append((str(props["codigo"]), float(lat), float(lon)))
    return pd.DataFrame(rows, columns=["stand_id", "lat", "lon"])


def main() -> None:
    """Run the benchmark and print a Markdown table."""
    import geopandas as gpd

    from geo.cover import build_stand_cover, match_stands
    from stands.licences import licence_frame_from_fleet
    from stands.occupancy import occupancy
    from stands.visits import detect_visits
    from tracking.validate import validate_pings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--bucket", default="15min")
    args = parser.parse_args()

    fleet_ids = pd.read_csv(FLEET, usecols=["prefixo"])["prefixo"].astype(str).unique()
    stands = all_stands()
    n_vehicles = len(fleet_ids)
    n = int(n_vehicles * args.hours * 3600 / 15)
    t = time.perf_counter()
    table, vehicles, home = simulate(n, stands, n_vehicles=n_vehicles)
    raw = table.to_pandas()
    del table
    names = dict(zip(vehicles, fleet_ids, strict=True))
    raw["vehicle_id"] = raw["vehicle_id"].map(names)
    raw.insert(0, "row", np.arange(1, len(raw) + 1))
    pings, rejected = validate_pings(raw)
    del raw
    fleet = pd.DataFrame(
        {"vehicle_id": [names[v] for v in vehicles], "stands": [[h] for h in home]}
    )
    geoms = gpd.GeoSeries(gpd.points_from_xy(stands["lon"], stands["lat"]), crs=4326)
    buffered = geoms.to_crs(31982).buffer(STAND_RADIUS_M).to_crs(4326)
    stand_frame = gpd.GeoDataFrame(
        {"stand_id": stands["stand_id"], "capacity": 4, "municipality": POA},
        geometry=buffered,
        crs=4326,
    )
    print(
        f"load {os.getloadavg()[0]:.1f}; {len(pings):,} fixes of {n_vehicles:,} vehicles, "
        f"{args.hours:g} h, {len(stand_frame)} stands "
        f"(data made in {time.perf_counter() - t:.0f} s; "
        f"{len(rejected):,} rows rejected by validation)\n"
    )
    rows = []

    def stage(name: str, fn):  # type: ignore[no-untyped-def]
        _reset_peak()
        t0 = time.perf_counter()
        out = fn()
        rows.append((name, time.perf_counter() - t0, _status_mb("VmHWM")))
        return out

    cover = stage("stand cover (H3 res 12)", lambda: build_stand_cover(stand_frame, resolution=12))
    ping_idx, stand_idx = stage(
        "exact matching",
        lambda: match_stands(pings["lat"].to_numpy(), pings["lon"].to_numpy(), cover),
    )
    memberships = pd.DataFrame(
        {"ping_index": ping_idx, "stand_id": stand_frame["stand_id"].to_numpy()[stand_idx]}
    )
    licences = licence_frame_from_fleet(fleet)
    visits = stage(
        "visits, queue, boardings",
        lambda: detect_visits(pings, memberships, licences=licences, timezone="America/Sao_Paulo"),
    )
    occ = stage(
        f"occupancy, every stand, {args.bucket} buckets",
        lambda: occupancy(visits, stand_frame, bucket=args.bucket, include_idle=True),
    )
    total = sum(r[1] for r in rows)
    print("| stage | seconds | peak RSS (MB) |")
    print("|---|---:|---:|")
    for name, secs, peak in rows:
        print(f"| {name} | {secs:.2f} | {peak:,.0f} |")
    print(f"| **total** | **{total:.2f}** | **{max(r[2] for r in rows):,.0f}** |")
    print(
        f"\n{len(visits):,} visits ({int(visits['boarded'].fillna(False).sum()):,} boardings), "
        f"{len(occ):,} occupancy rows; stands with visits: {visits['stand_id'].nunique()}"
    )


if __name__ == "__main__":
    main()
