"""flag2_misuse on real Porto trips: rides out of the municipality and Ash Wednesday.

Bandeira 2 used "indevidamente" is a grave infraction in Pinto Bandeira (art. 25 V); the law
leaves the tariffs to a decree (art. 16). Two rides a tariff decree commonly allows look like
misuse to a calendar alone: a ride to another municipality (Bandeira 2 beyond the municipal
limit at any hour) and a ride on the morning of Ash Wednesday (a nationwide ponto facultativo
until 14:00). Every real trip of ``data/porto/derived/trips_combined.csv`` (its own fixes, 15 s
apart, and GPS errors) is charged with Bandeira 2 from its first fix to its last and placed:

- **weekday**: on Monday 4 March 2024, starting between 08:00 and 17:00 (local time of
  ``America/Sao_Paulo``), when the default calendar forbids Bandeira 2. The truth is read from
  the ride's ends, as a decree reads a ride's destination, not from its fixes as the detector
  does: a ride whose pickup or drop-off lies outside the limit is *intermunicipal* (allowed);
  one with both ends inside is *misuse*. The limit is the Porto district's
  (``data/porto/network/porto_boundary.geojson``, the only one the Porto data has), standing in
  for a municipality's; few real trips leave it, so
- **moved**: the same weekday rides moved whole (a translation), each drop-off at a random point
  within 3 km of the limit's bounding box, many ending outside or crossing it;
- **Ash Wednesday**: on 14 February 2024, the ride ending before 14:00 (allowed) or starting
  from 14:30 (misuse when both ends are inside).

Each scenario is judged by ``detect_flag2_misuse`` with the boundary, then by Pinto Bandeira's
rulebook (``propose_all``). *Before* is the detector without the boundary and without the
Ash Wednesday morning, every finding proposed (the rule then had no case).

Usage::

    .venv/bin/python bench/bench_flag2.py [--seed 3]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gps_days import real_trips  # noqa: E402
from bench_outside_gps import BOUNDARY  # noqa: E402

from enforcement.proposals import propose_all  # noqa: E402
from enforcement.rulebook import bundled_rulebooks  # noqa: E402
from tracking.detectors.flag2_misuse import DEFAULT_FLAG2_CALENDAR, detect_flag2_misuse  # noqa: E402

TZ = "America/Sao_Paulo"
PB = bundled_rulebooks()[("4314548", "taxi")]
WEEKDAY = pd.Timestamp("2024-03-04", tz=TZ)
OLD_CALENDAR = replace(DEFAULT_FLAG2_CALENDAR, national_holidays=False)
FLOOR = 0.5  # enforcement.rulebook.DEFAULT_CONFIDENCE_FLOOR, Pinto Bandeira's
ASH = pd.Timestamp("2024-02-14", tz=TZ)


def placed(trips: list[pd.DataFrame], starts: list[pd.Timestamp]) -> pd.DataFrame:
    """Each trip under its own vehicle, from ``starts[k]``, Bandeira 2 throughout."""
    parts = []
    for k, (trip, at) in enumerate(zip(trips, starts, strict=True)):
        part = trip[["lat", "lon", "speed_flag"]].copy()
        part["vehicle_id"] = f"T{k:04d}"
        part["timestamp"] = (trip["timestamp"] - trip["timestamp"].iloc[0] + at).dt.tz_convert(
            "UTC"
        )
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["meter"], out["tariff"] = "occupied", 2
    out["row"] = np.arange(1, len(out) + 1)
    return out


def judged(pings: pd.DataFrame, boundary: shapely.Geometry) -> pd.DataFrame:
    """Per vehicle: a finding, a proposal (Pinto Bandeira's rulebook), a proposal before."""
    now = detect_flag2_misuse(pings, timezone=TZ, boundary=boundary)
    proposed = {p["vehicle_id"] for p in propose_all(now, {"taxi": PB}, timezone=TZ).proposals}
    # Before: no boundary, no Ash Wednesday (no other national day falls on these dates), and
    # every finding at or above the rulebook's floor proposed.
    old = detect_flag2_misuse(pings, timezone=TZ, calendar=OLD_CALENDAR)
    before = set(old.loc[old["confidence"] >= FLOOR, "vehicle_id"])
    vehicles = pd.unique(pings["vehicle_id"])
    return pd.DataFrame(
        {
            "found": np.isin(vehicles, now["vehicle_id"].to_numpy()),
            "proposed": np.isin(vehicles, list(proposed)),
            "before": np.isin(vehicles, list(before)),
        },
        index=vehicles,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    boundary = gpd.read_file(BOUNDARY).to_crs(4326).geometry.union_all()
    trips = [t for t in real_trips() if len(t) >= 9]  # two minutes or more
    ends = np.array([(t["lon"].iloc[i], t["lat"].iloc[i]) for t in trips for i in (0, -1)])
    inside = shapely.contains_xy(boundary, ends[:, 0], ends[:, 1]).reshape(-1, 2).all(axis=1)
    hours = np.array([(t["timestamp"].iloc[-1] - t["timestamp"].iloc[0]).seconds for t in trips])
    hours = hours / 3600
    morning = hours < 7.5  # can end between 06:00 and 14:00
    # The same trips moved whole (a translation) so that each drop-off lands at a random point
    # within about 3 km of the limit's bounding box: many cross the limit or end beside it.
    minx, miny, maxx, maxy = boundary.bounds
    to = np.column_stack(
        (
            rng.uniform(minx - 0.03, maxx + 0.03, len(trips)),
            rng.uniform(miny - 0.03, maxy + 0.03, len(trips)),
        )
    )
    moved = [
        t.assign(
            lon=t["lon"] + (to[k, 0] - t["lon"].iloc[-1]),
            lat=t["lat"] + (to[k, 1] - t["lat"].iloc[-1]),
        )
        for k, t in enumerate(trips)
    ]
    ends = np.array([(t["lon"].iloc[i], t["lat"].iloc[i]) for t in moved for i in (0, -1)])
    moved_inside = shapely.contains_xy(boundary, ends[:, 0], ends[:, 1]).reshape(-1, 2).all(axis=1)
    print("| placed | truth | rides | finding | proposed | proposed before |")
    print("|---|---|---:|---:|---:|---:|")
    scenarios = (
        ("weekday, 08:00–17:00", trips, WEEKDAY, rng.uniform(8, 17, len(trips)), ~inside),
        (
            "Ash Wednesday, ending before 14:00",
            trips,
            ASH,
            np.where(morning, rng.uniform(6, 14 - np.minimum(hours, 7.5)), np.nan),
            np.ones(len(trips), dtype=bool),
        ),
        ("Ash Wednesday, from 14:30", trips, ASH, rng.uniform(14.5, 17, len(trips)), ~inside),
        (
            "weekday, moved: drop-off within 3 km of the limit's box",
            moved,
            WEEKDAY,
            rng.uniform(8, 17, len(trips)),
            ~moved_inside,
        ),
    )
    for name, source, day, start_h, allowed in scenarios:
        idx = np.flatnonzero(~np.isnan(start_h))
        starts = [day + pd.Timedelta(hours=float(start_h[i])) for i in idx]
        verdict = judged(placed([source[i] for i in idx], starts), boundary)
        for label, mask in (("misuse", ~allowed[idx]), ("allowed by the decree", allowed[idx])):
            if mask.any():
                v = verdict[mask]
                counts = (int(mask.sum()), *(int(v[c].sum()) for c in v.columns))
                print(f"| {name} | {label} | " + " | ".join(f"{c:,}" for c in counts) + " |")


if __name__ == "__main__":
    main()
