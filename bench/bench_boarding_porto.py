"""Boarding at a stand on the real Porto trips: precision and recall against geometric truth.

The 2,104 real Porto taxi trips of ``data/porto/derived/trips_combined.csv`` (ECML/PKDD 2015, a
fix every 15 s, every fix occupied: each trip record is one passenger trip) go through the
stages of ``pontual analyze`` (:func:`engines.pipeline.analyze_pings`, read with
:func:`tracking.porto.read_porto_trips`) against Porto's 63 stands
(``data/porto/derived/taxi_stands.csv``) drawn as circles of 50, 100 (the demo's radius,
``api/cli_demo.py``) and 150 m. The ``boarded`` visits are then compared with two references:

geometric truth (written here from scratch: no H3, no visits, none of the detector's helpers)
    A boarding at stand S is the first fix of a trip record (where the meter came on) lying
    inside S's polygon or within ``--edge-m`` (30 m, the documented ``boarding_grace_m``) of
    its edge, taken at or after the vehicle's arrival at S: the first fix itself is inside S,
    or a fix of the same vehicle inside S precedes it by at most ``--grace-s`` (120 s, the
    documented ``boarding_grace_s``). Distances are shapely's, point to polygon, in WGS 84 /
    UTM 29N (EPSG:32629). A detected boarding is right when its (vehicle, stand, ``boarded_at``)
    is such an event; precision = right / detected, recall = events detected / events.
real labels
    Trips hailed at a stand (``CALL_TYPE`` B with ``ORIGIN_STAND``): the share detected as a
    boarding at the labelled stand at the trip's start (:func:`stands.porto_eval.
    boarding_recall`, the figures of ``pontual demo`` and of the README), and the geometric
    ceiling (first fix inside the labelled stand).

Rules compared: ``time + distance`` (the code: the meter on inside the stand or within
``boarding_grace_m`` of its edge, at most ``boarding_grace_s`` after the last fix inside) and
``time only`` (the rule before it, reproduced with an unbounded ``boarding_grace_m``). Run
against a checkout whose ``AnalysisParams`` has no ``boarding_grace_m`` (e.g.
``PYTHONPATH=<checkout of main>``), the script reports that checkout's own rule as ``checkout``.

Usage::

    .venv/bin/python bench/bench_boarding_porto.py [--radii 50,100,150] [--edge-m 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import geopandas as gpd  # noqa: E402
import pandas as pd  # noqa: E402
import shapely  # noqa: E402

from engines.pipeline import AnalysisParams, analyze_pings  # noqa: E402
from stands.layers import read_porto_stands  # noqa: E402
from stands.porto_eval import boarding_recall  # noqa: E402
from tracking.porto import read_porto_trips  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "porto" / "derived"
UTM_29N = 32629  # Porto's metric CRS
UNBOUNDED_M = 1e9  # a boarding_grace_m no trip start exceeds: the time-only rule


def truth_events(
    pings: pd.DataFrame, stands: gpd.GeoDataFrame, *, edge_m: float, grace_s: float
) -> pd.DataFrame:
    """Every (vehicle, stand, instant) where a trip record starts at a stand (module docstring).

    Parameters
    ----------
    pings : pandas.DataFrame
        The Porto pings (``vehicle_id``, ``timestamp``, ``lat``, ``lon``, ``trip_ref``).
    stands : geopandas.GeoDataFrame
        ``stand_id`` and polygons (EPSG:4326).
    edge_m : float
        Largest distance from the record's first fix to the stand's polygon.
    grace_s : float
        Longest time from a fix inside the stand to the record's first fix.

    Returns
    -------
    pandas.DataFrame
        ``vehicle_id``, ``stand_id``, ``t0`` (the record's first fix), ``distance_m``, one row
        per event.
    """
    fixes = pings[["vehicle_id", "timestamp", "lat", "lon", "trip_ref"]].copy()
    fixes = fixes.sort_values(["vehicle_id", "timestamp"], kind="stable").reset_index(drop=True)
    points = gpd.GeoSeries(
        shapely.points(fixes["lon"].to_numpy(), fixes["lat"].to_numpy()), crs=4326
    ).to_crs(UTM_29N)
    polys = stands.to_crs(UTM_29N).reset_index(drop=True)
    tree = shapely.STRtree(polys.geometry.to_numpy())

    # The first fix of each trip record: where the meter came on.
    starts = fixes.groupby(["vehicle_id", "trip_ref"], sort=False)["timestamp"].idxmin()
    s_idx = starts.to_numpy()
    near_p, near_s = tree.query(points.to_numpy()[s_idx], predicate="dwithin", distance=edge_m)
    start = s_idx[near_p]
    dist = shapely.distance(points.to_numpy()[start], polys.geometry.to_numpy()[near_s])
    cand = pd.DataFrame(
        {
            "fix": start,
            "vehicle_id": fixes["vehicle_id"].to_numpy()[start],
            "stand": near_s,
            "t0": fixes["timestamp"].to_numpy()[start],
            "distance_m": dist,
        }
    )
    # Fixes inside each stand, to tell whether the vehicle had arrived.
    in_p, in_s = tree.query(points.to_numpy(), predicate="within")
    inside = pd.DataFrame(
        {
            "vehicle_id": fixes["vehicle_id"].to_numpy()[in_p],
            "stand": in_s,
            "t_in": fixes["timestamp"].to_numpy()[in_p],
            "fix_in": in_p,
        }
    )
    pairs = cand.merge(inside, on=["vehicle_id", "stand"])
    lag_s = (pairs["t0"] - pairs["t_in"]).dt.total_seconds()
    arrived = (pairs["fix_in"] == pairs["fix"]) | ((lag_s >= 0) & (lag_s <= grace_s))
    hit = pairs.loc[arrived, ["fix", "stand"]].drop_duplicates()
    events = cand.merge(hit, on=["fix", "stand"])
    events["stand_id"] = polys["stand_id"].astype(str).to_numpy()[events["stand"].to_numpy()]
    # Of the stands one record start is at (overlapping circles), the one whose centre is nearest.
    centres = shapely.centroid(polys.geometry.to_numpy())[events["stand"].to_numpy()]
    centre_m = shapely.distance(points.to_numpy()[events["fix"].to_numpy()], centres)
    rank = pd.Series(centre_m).groupby(events["fix"].to_numpy()).rank(method="first")
    events["nearest"] = rank.to_numpy() == 1
    columns = ["vehicle_id", "stand_id", "t0", "distance_m", "nearest"]
    return events[columns].reset_index(drop=True)


def compare(visits: pd.DataFrame, events: pd.DataFrame) -> dict[str, Any]:
    """Precision and recall of the boarded visits against the truth events."""
    boarded = visits.loc[visits["boarded"].astype(bool), ["vehicle_id", "stand_id", "boarded_at"]]
    keys = ["vehicle_id", "stand_id", "t0"]
    det = boarded.rename(columns={"boarded_at": "t0"}).astype({"stand_id": str})
    det["t0"] = det["t0"].astype(events["t0"].dtype)
    right = det.merge(events[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    ok = right["_merge"].eq("both").to_numpy()
    found = events[keys].drop_duplicates().merge(det.drop_duplicates(), on=keys, how="inner")
    n_det, n_true = len(det), len(events[keys].drop_duplicates())
    nearest = events.loc[events["nearest"], keys].drop_duplicates()
    one = det.merge(nearest, on=keys, how="inner")
    return {
        "detected": n_det,
        "right": int(ok.sum()),
        "invented": int((~ok).sum()),
        "truth": n_true,
        "found": len(found),
        "precision": ok.sum() / n_det if n_det else float("nan"),
        "recall": len(found) / n_true if n_true else float("nan"),
        "overlap_extra": int(ok.sum()) - len(one),
        "precision_one": len(one) / n_det if n_det else float("nan"),
    }


def label_breakdown(visits: pd.DataFrame, labels: pd.DataFrame) -> dict[str, int]:
    """How the trips starting at the boarded visits are labelled (CALL_TYPE, ORIGIN_STAND)."""
    boarded = visits.loc[visits["boarded"].astype(bool), ["vehicle_id", "stand_id", "boarded_at"]]
    lab = labels[["vehicle_id", "started_at", "call_type", "origin_stand"]]
    m = boarded.merge(
        lab, left_on=["vehicle_id", "boarded_at"], right_on=["vehicle_id", "started_at"], how="left"
    )
    b = m["call_type"].eq("B")
    here = b & m["origin_stand"].eq(m["stand_id"])
    elsewhere = b & m["origin_stand"].notna() & ~here
    return {
        "B at this stand": int(here.sum()),
        "B at another stand": int(elsewhere.sum()),
        "B, no stand": int((b & m["origin_stand"].isna()).sum()),
        "A (dispatched)": int(m["call_type"].eq("A").sum()),
        "C (street)": int(m["call_type"].eq("C").sum()),
        "no record starts there": int(m["call_type"].isna().sum()),
    }


def _params(grace_m: float | None) -> tuple[str, AnalysisParams]:
    """The demo's thresholds, with ``grace_m`` when this checkout has the distance rule."""
    if "boarding_grace_m" not in {f.name for f in dataclasses.fields(AnalysisParams)}:
        return "checkout", AnalysisParams(timezone="Europe/Lisbon")
    label = "time only" if grace_m is None else "time + distance"
    chosen = UNBOUNDED_M if grace_m is None else grace_m
    return label, AnalysisParams(timezone="Europe/Lisbon", boarding_grace_m=chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trips", type=Path, default=DATA / "trips_combined.csv")
    parser.add_argument("--stands", type=Path, default=DATA / "taxi_stands.csv")
    parser.add_argument("--radii", default="50,100,150", help="stand radii, metres")
    parser.add_argument("--edge-m", type=float, default=30.0, help="truth: distance to the edge")
    parser.add_argument("--grace-s", type=float, default=120.0, help="truth: time after a fix in")
    args = parser.parse_args()

    pings, rejected, labels = read_porto_trips(args.trips)
    n_records = pings["trip_ref"].nunique()
    print(
        f"{len(pings):,} fixes of {n_records:,} trip records ({len(labels):,} trips in the file, "
        f"{pings['vehicle_id'].nunique()} taxis); truth: record start within {args.edge_m:g} m "
        f"of the stand, at most {args.grace_s:g} s after a fix inside"
    )
    rules = []
    for grace_m in (None, args.edge_m):
        label, params = _params(grace_m)
        if label not in [r[0] for r in rules]:
            rules.append((label, params))
    rows = []
    for radius in [float(r) for r in args.radii.split(",")]:
        stands = read_porto_stands(args.stands, radius_m=radius)
        events = truth_events(pings, stands, edge_m=args.edge_m, grace_s=args.grace_s)
        for label_, params in rules:
            t = time.perf_counter()
            result = analyze_pings(pings, rejected, stands, kinds=(), params=params)
            seconds = time.perf_counter() - t
            truth = compare(result.visits, events)
            labelled = boarding_recall(labels, pings, result.visits, result.trips, stands)
            label = {f"label_{k}": v for k, v in labelled.items()}
            kinds = label_breakdown(result.visits, labels)
            rows.append(
                {"radius_m": radius, "rule": label_, "s": seconds, **truth, **label, "kinds": kinds}
            )

    print()
    print(
        "| stand radius | rule | boarded visits | not boardings there | precision | truth events "
        "| found | recall | B labels | first fix inside | detected at the label | label recall |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['radius_m']:.0f} m | {r['rule']} | {r['detected']:,} | {r['invented']:,} "
            f"| {r['precision']:.3f} | {r['truth']:,} | {r['found']:,} | {r['recall']:.3f} "
            f"| {r['label_labelled']:,} | {r['label_first_fix_inside']:,} "
            f"| {r['label_detected']:,} | {r['label_recall']:.1%} |"
        )
    print()
    print("One stand per trip start (a start inside overlapping stands counts at the nearest):")
    print()
    print(
        "| stand radius | rule | boarded visits | right, nearest stand "
        "| right, another overlapping stand | precision |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['radius_m']:.0f} m | {r['rule']} | {r['detected']:,} "
            f"| {r['right'] - r['overlap_extra']:,} | {r['overlap_extra']:,} "
            f"| {r['precision_one']:.3f} |"
        )
    print()
    print("Labels of the trips starting at the boarded visits:")
    print()
    names = list(rows[0]["kinds"])
    print("| stand radius | rule | " + " | ".join(names) + " |")
    print("|---:|---|" + "---:|" * len(names))
    for r in rows:
        cells = " | ".join(f"{r['kinds'][k]:,}" for k in names)
        print(f"| {r['radius_m']:.0f} m | {r['rule']} | {cells} |")
    print()
    print("seconds per analysis: " + ", ".join(f"{r['s']:.1f}" for r in rows))


if __name__ == "__main__":
    main()
