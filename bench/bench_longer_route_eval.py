"""longer_route on two evaluation sets: ROC, recall at the defaults and at FPR <= 0.05, by band.

Run::

    .venv/bin/python bench/bench_longer_route_eval.py --set both --n 400 --seed 7 \\
        --png-dir bench/figures

Sets (``--set sim``, ``detours`` or ``both``):

- ``sim``: ``tests/tracking/detectors/routes_sim.py``, whole taxi trips simulated on the Porto road
  network (``--n`` legitimate trips and ``--n`` detours; sampling 5–30 s, noise 5–20 m, trips of
  1–15 km; waypoint, U-turn and loop detours; shortest, fastest and mildly alternative routes).
- ``detours``: ``tests/tracking/detectors/detours.py``, ``--n`` real Porto trips inside the network
  (negatives) and a detour injected into each (positives: those of measured ratio >= 1.4), as
  ``bench/bench_longer_route.py`` uses them.
- ``peers`` (not in ``both``): ``routes_sim`` trips between :data:`PLACE_PAIRS` pairs of places
  (districts of 400 m radius; ``--n`` legitimate trips, ``--n // 4`` detours), judged without the
  network: the reference a city without a bundled road network gets (past trips of other vehicles
  between the same H3 cells), on real street geometry.
- ``porto-peers`` (not in ``both``): the real Porto trips
  (``data/porto/derived/trips_combined.csv``) judged without the network, by one another as peers.
  The trips the peers judge (at least ``min_peer_trips`` earlier peers) are labelled by the *road
  network's* verdict, a reference built another way (map matching, shortest and fastest paths):
  negatives where the network judges the trip and finds no detour, positives where it finds one;
  trips it cannot judge are left out. More positives: a detour injected (``detours.py``, ratio
  1.4–2.5 of the network's shortest path) into each negative, kept when its measured ratio reaches
  1.4 and its excess 1 km (below, no rule accuses by design); each detoured copy is judged among all
  the real trips, in parts where no two copies share a pair of cells (they are never each other's
  peers).

Pipeline per set: ``validate_pings`` (``sim``; the ``detours`` fixes are already valid) →
``detect_trips`` (``sim``: the product's defaults; ``detours``: ``max_gap_s=60`` as its bench) →
the score function (default ``route_ratios``: scores ``ratio`` and ``guarded_ratio``) and the
decision function (default ``detect_longer_route`` at its defaults), both called as
``f(trips, pings, roads=graph)``. Each labelled trip gets the highest score of the detected trips
overlapping it in time (0 when none was detected or scored) and is flagged when a finding
overlaps it.

Several detectors side by side: repeat ``--detector NAME=MODULE[:SCORE_FN[,DECISION_FN]]``, e.g.
``--detector current=tracking.detectors.longer_route`` ``--detector
matched=tracking.detectors.longer_route_mm:route_ratios,detect_longer_route``. The score function
returns a frame with ``vehicle_id``, ``trip_id`` and numeric score columns (``--score-columns``);
the decision function returns findings with ``vehicle_id``, ``started_at`` and ``ended_at``.
Other thresholds: a small module whose functions call the detector with them.

Figures of the current detector: ``bench/README.md`` ("longer_route: two evaluation sets").
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests" / "tracking" / "detectors"))

import detours  # noqa: E402
import routes_sim  # noqa: E402

from geo.h3 import latlng_to_cells  # noqa: E402
from geo.roads import RoadGraph, build_road_graph, read_libcity_roads  # noqa: E402
from tracking import frames as fr  # noqa: E402
from tracking.detectors.longer_route import detect_longer_route, route_ratios  # noqa: E402
from tracking.porto import read_porto_trips  # noqa: E402
from tracking.trips import detect_trips  # noqa: E402
from tracking.validate import validate_pings  # noqa: E402

DEFAULT_DETECTOR = "current=tracking.detectors.longer_route:route_ratios,detect_longer_route"
DEFAULT_SCORES = ("ratio", "guarded_ratio")
MAX_FPR = 0.05
MIN_RATIO = 1.4  # detect_longer_route's default min_ratio, for the table of misses
RATIO_BANDS = ((1.4, 1.6), (1.6, 2.0), (2.0, 3.0), (3.0, math.inf))
SAMPLING_BANDS = ((5.0, 10.0), (10.0, 20.0), (20.0, 30.0))
NOISE_BANDS = ((5.0, 10.0), (10.0, 15.0), (15.0, 20.0))
LENGTH_BANDS_M = ((1000.0, 3000.0), (3000.0, 7000.0), (7000.0, 15000.0))
PLACE_PAIRS = 8  # --set peers: pairs of places the trips run between


@dataclass
class EvalSet:
    """Fixes (in parts run separately), labels (one row per labelled trip), trip options.

    ``labels`` has ``label_id``, ``vehicle_id``, ``window_start``/``window_end`` (the labelled
    trip's time span; NaT: every trip of the vehicle), ``is_detour``, ``true_ratio``, ``case``,
    ``shortest_m``, ``excess_m``, ``sampling_s`` and ``noise_m`` (NaN when unknown).
    """

    name: str
    title: str
    parts: list[pd.DataFrame]
    labels: pd.DataFrame
    trip_kwargs: dict[str, Any] = field(default_factory=dict)
    roads: bool = True  # False: judged without the network (the peer-trips reference)


@dataclass
class Detector:
    """A scoring function and a decision function with the signature of ``route_ratios``."""

    name: str
    score: Callable[..., pd.DataFrame]
    decide: Callable[..., pd.DataFrame]


# --- sets ------------------------------------------------------------------------------------


def sim_set(*, n: int, seed: int, peers: bool = False) -> EvalSet:
    """``n`` legitimate trips and ``n`` detours of ``routes_sim`` (validated like a file).

    ``peers``: ``n`` legitimate trips and ``n // 4`` detours between :data:`PLACE_PAIRS` pairs of
    places, judged without the network (by past trips of other vehicles between the same cells).
    """
    raw, labels, _ = routes_sim.simulate_trips(
        n_negative=n,
        n_positive=n // 4 if peers else n,
        seed=seed,
        place_pairs=PLACE_PAIRS if peers else None,
    )
    raw = raw.assign(row=np.arange(1, len(raw) + 1))
    pings, rejected = validate_pings(raw, now=pd.Timestamp("2030-01-01", tz="UTC"))
    if len(rejected):
        print(f"sim: {len(rejected)} fixes rejected by validation: {rejected['reason'].unique()}")
    out = labels.assign(
        label_id=labels["trip_key"], window_start=labels["meter_on"], window_end=labels["meter_off"]
    )
    if peers:
        name, title = "peers", "routes_sim between pairs of places, judged by peers (no network)"
    else:
        name, title = "sim", "routes_sim (simulated trips on the Porto network)"
    return EvalSet(name=name, title=title, parts=[pings], labels=out, roads=not peers)


def detours_set(graph: RoadGraph, *, n: int, seed: int) -> EvalSet:
    """``n`` real Porto trips and their injected detours (``detours.py``, as its bench)."""
    pings, pool = detours.porto_pool(graph)
    sample = detours.sample_trips(pool, n=n, seed=seed)
    neg_pings = detours.trip_pings(pings, sample)
    pos_pings, made = detours.make_detours(graph, pings, sample, seed=seed)
    neg = pd.DataFrame(
        {
            "label_id": sample["trip_id"].astype(str),
            "vehicle_id": sample["vehicle_id"].astype(str),
            "window_start": sample["started_at"],
            "window_end": sample["ended_at"],
            "is_detour": False,
            "true_ratio": np.nan,
            "case": "real",
            "shortest_m": sample["shortest_m"].to_numpy(),
        }
    )
    pos = _injected(made.loc[made["ratio"] >= routes_sim.MIN_DETOUR_RATIO])
    labels = _real_trip_labels([neg, pos])
    return EvalSet(
        name="detours",
        title="detours.py (detours injected into real Porto trips)",
        parts=[neg_pings, pos_pings],
        labels=labels,
        trip_kwargs={"max_gap_s": 60},
    )


def porto_peers_set(graph: RoadGraph, *, seed: int) -> EvalSet:
    """The real Porto trips judged by their peers, labelled by the road network (module doc)."""
    pings, _, _ = read_porto_trips(detours.TRIPS_CSV)
    trips = detect_trips(pings)
    by_peers = route_ratios(trips, pings, roads=None)
    by_network = route_ratios(trips, pings, roads=graph)
    flagged = detect_longer_route(trips, pings, roads=graph)
    flagged_ids = set(
        trips.merge(flagged[["vehicle_id", "started_at"]], on=["vehicle_id", "started_at"])[
            "trip_id"
        ]
    )
    peer_judged = set(by_peers.loc[by_peers["method"] == "peer_trips", "trip_id"])
    net = by_network.set_index("trip_id")
    judged = peer_judged & set(net.index[net["method"] == "road_network"])
    print(
        f"porto-peers: {len(trips)} trips, {len(peer_judged)} judged by peers, "
        f"{len(judged)} of them by the network too ({len(judged & flagged_ids)} detours)"
    )
    real = trips.loc[trips["trip_id"].isin(judged)].reset_index(drop=True)
    real["shortest_m"] = net.loc[real["trip_id"], "reference_m"].to_numpy()
    real_labels = pd.DataFrame(
        {
            "label_id": real["trip_id"].astype(str),
            "vehicle_id": real["vehicle_id"].astype(str),
            "window_start": real["started_at"],
            "window_end": real["ended_at"],
            "is_detour": real["trip_id"].isin(flagged_ids).to_numpy(),
            "true_ratio": net.loc[real["trip_id"], "ratio"].to_numpy(),
            "case": np.where(real["trip_id"].isin(flagged_ids), "real, network: detour", "real"),
            "shortest_m": real["shortest_m"].to_numpy(),
        }
    )
    base = real.loc[~real["trip_id"].isin(flagged_ids)].reset_index(drop=True)
    made_pings, made = detours.make_detours(graph, pings, base, seed=seed, ratio_range=(1.4, 2.5))
    made["excess_m"] = (made["ratio"] - 1.0) * made["shortest_m"]
    made = made.loc[(made["ratio"] >= routes_sim.MIN_DETOUR_RATIO) & (made["excess_m"] >= 1000.0)]
    print(f"porto-peers: {len(made)} of {len(base)} injected detours reach ratio 1.4 and 1 km")
    src = base.set_index("trip_id").loc[made["source_trip_id"]]
    pairs = [
        f"{o}-{d}"
        for o, d in zip(
            latlng_to_cells(src["pickup_lat"], src["pickup_lon"], resolution=8).tolist(),
            latlng_to_cells(src["dropoff_lat"], src["dropoff_lon"], resolution=8).tolist(),
            strict=True,
        )
    ]
    batches: list[set[str]] = []  # vehicles of the copies, no two of a cell pair in one part
    batch_pairs: list[set[str]] = []
    for vehicle, pair in zip(made["vehicle_id"], pairs, strict=True):
        k = next((i for i, b in enumerate(batch_pairs) if pair not in b), len(batches))
        if k == len(batches):
            batches.append(set())
            batch_pairs.append(set())
        batches[k].add(vehicle)
        batch_pairs[k].add(pair)
    made_pings = made_pings.assign(trip_ref=made_pings[fr.VEHICLE_ID])  # one ride each
    copies = [made_pings.loc[made_pings[fr.VEHICLE_ID].isin(b)] for b in batches]
    parts = [pings] + [
        pd.concat([pings, c], ignore_index=True).sort_values(
            [fr.VEHICLE_ID, fr.TIMESTAMP], ignore_index=True
        )
        for c in copies
    ]
    labels = _real_trip_labels([real_labels, _injected(made)])
    return EvalSet(
        name="porto-peers",
        title="real Porto trips judged by peers (no network), labelled by the road network",
        parts=parts,
        labels=labels,
        roads=False,
    )


def _injected(made: pd.DataFrame) -> pd.DataFrame:
    """Labels of detoured copies (``detours.make_detours``' labels): one vehicle each."""
    return pd.DataFrame(
        {
            "label_id": made["vehicle_id"].astype(str),
            "vehicle_id": made["vehicle_id"].astype(str),
            "window_start": pd.NaT,
            "window_end": pd.NaT,
            "is_detour": True,
            "true_ratio": made["ratio"].to_numpy(),
            "case": "injected",
            "shortest_m": made["shortest_m"].to_numpy(),
        }
    )


def _real_trip_labels(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Labels of real Porto trips and their copies: windows in UTC, excess, 15 s fixes."""
    labels = pd.concat(parts, ignore_index=True)
    labels["window_start"] = pd.to_datetime(labels["window_start"], utc=True)
    labels["window_end"] = pd.to_datetime(labels["window_end"], utc=True)
    labels["excess_m"] = (labels["true_ratio"] - 1.0) * labels["shortest_m"]
    labels["sampling_s"] = 15.0
    labels["noise_m"] = np.nan
    return labels


# --- detectors -------------------------------------------------------------------------------


def parse_detector(spec: str) -> Detector:
    """``NAME=MODULE[:SCORE_FN[,DECISION_FN]]`` → :class:`Detector`."""
    name, _, target = spec.partition("=")
    if not target:  # no name: the module's last component
        target = spec
        name = spec.partition(":")[0].rsplit(".", 1)[-1]
    module_name, _, fns = target.partition(":")
    score_name, _, decide_name = fns.partition(",")
    module = importlib.import_module(module_name)
    return Detector(
        name=name,
        score=getattr(module, score_name or "route_ratios"),
        decide=getattr(module, decide_name or "detect_longer_route"),
    )


# --- evaluation -------------------------------------------------------------------------------


def _label_of(rows: pd.DataFrame, labels: pd.DataFrame) -> pd.Series:
    """Label id of each row (``vehicle_id``, ``started_at``, ``ended_at``) by time overlap."""
    left = rows[["vehicle_id", "started_at", "ended_at"]].reset_index(names="_row")
    both = left.merge(
        labels[["label_id", "vehicle_id", "window_start", "window_end"]], on="vehicle_id"
    )
    whole = both["window_start"].isna()
    lo = both[["started_at", "window_start"]].max(axis=1)
    hi = both[["ended_at", "window_end"]].min(axis=1)
    overlap = (hi - lo).dt.total_seconds()
    both = both.assign(overlap=np.where(whole, np.inf, overlap))
    both = both.loc[whole | (overlap >= 0)]
    best = both.sort_values("overlap", ascending=False).drop_duplicates("_row")
    out: pd.Series = best.set_index("_row")["label_id"].reindex(range(len(rows)))
    return out


def run_detector(
    eval_set: EvalSet, detector: Detector, graph: RoadGraph, score_columns: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Scores and decision per label: (labels + score columns + ``flagged``, timings)."""
    t_trips = t_score = t_decide = 0.0
    all_trips, all_scores, all_findings = [], [], []
    for pings in eval_set.parts:  # vehicles of different parts are distinct
        t0 = time.perf_counter()
        trips = detect_trips(pings, **eval_set.trip_kwargs)
        t1 = time.perf_counter()
        roads = graph if eval_set.roads else None
        all_scores.append(detector.score(trips, pings, roads=roads))
        t2 = time.perf_counter()
        all_findings.append(detector.decide(trips, pings, roads=roads))
        t3 = time.perf_counter()
        all_trips.append(trips)
        t_trips, t_score, t_decide = t_trips + t1 - t0, t_score + t2 - t1, t_decide + t3 - t2
    trips = pd.concat(all_trips, ignore_index=True)
    scores = pd.concat(all_scores, ignore_index=True)
    findings = pd.concat(all_findings, ignore_index=True)
    cols = [c for c in score_columns if c in scores.columns]
    scored = trips[["vehicle_id", "trip_id", "started_at", "ended_at"]].merge(
        scores[["vehicle_id", "trip_id", *cols]], on=["vehicle_id", "trip_id"], how="left"
    )
    scored["label_id"] = _label_of(scored, eval_set.labels).to_numpy()
    per_label = scored.groupby("label_id")[cols].max()
    n_trips = scored.groupby("label_id").size().rename("n_trips")
    out = eval_set.labels.set_index("label_id").join(per_label).join(n_trips)
    out["n_trips"] = out["n_trips"].fillna(0).astype(int)
    out["scored"] = out[cols].notna().any(axis=1) if cols else False
    out[cols] = out[cols].fillna(0.0)
    out["confidence"] = np.nan
    if len(findings):
        f = pd.DataFrame(
            {
                "vehicle_id": findings["vehicle_id"].astype(str).to_numpy(),
                "started_at": pd.to_datetime(findings["started_at"], utc=True).to_numpy(),
                "ended_at": pd.to_datetime(findings["ended_at"], utc=True).to_numpy(),
                "confidence": pd.to_numeric(findings.get("confidence", np.nan)),
            }
        )
        f["label_id"] = _label_of(f, eval_set.labels).to_numpy()
        best = f.dropna(subset=["label_id"]).groupby("label_id")["confidence"].max()
        out.loc[best.index, "confidence"] = best.to_numpy()
    out["flagged"] = out["confidence"].notna()
    times = {"trips_s": t_trips, "score_s": t_score, "decide_s": t_decide, "n_trips": len(trips)}
    return out.reset_index(), times


def roc_curve(pos: np.ndarray, neg: np.ndarray) -> pd.DataFrame:
    """Recall and FPR of ``score >= t`` for every distinct score ``t`` (descending)."""
    thresholds = np.unique(np.concatenate((pos, neg)))[::-1]
    pos_sorted, neg_sorted = np.sort(pos), np.sort(neg)
    tpr = 1.0 - np.searchsorted(pos_sorted, thresholds, side="left") / max(len(pos), 1)
    fpr = 1.0 - np.searchsorted(neg_sorted, thresholds, side="left") / max(len(neg), 1)
    return pd.DataFrame({"threshold": thresholds, "tpr": tpr, "fpr": fpr})


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + half the ties (Mann–Whitney)."""
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    ranks = pd.Series(np.concatenate((pos, neg))).rank(method="average").to_numpy()
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


def recall_at_fpr(pos: np.ndarray, neg: np.ndarray, max_fpr: float) -> tuple[float, float]:
    """Best recall of a threshold whose FPR is at most ``max_fpr``, and that threshold."""
    curve = roc_curve(pos, neg)
    ok = curve.loc[curve["fpr"] <= max_fpr + 1e-12]
    if ok.empty:
        return 0.0, math.inf
    best = ok.sort_values(["tpr", "threshold"], ascending=[False, False]).iloc[0]
    return float(best["tpr"]), float(best["threshold"])


def summary(result: pd.DataFrame, score_columns: Sequence[str]) -> dict[str, Any]:
    """Headline figures of one detector on one set."""
    pos = result.loc[result["is_detour"]]
    neg = result.loc[~result["is_detour"]]
    out: dict[str, Any] = {
        "n_pos": len(pos),
        "n_neg": len(neg),
        "n_unscored": int((~result["scored"]).sum()),
        "recall_default": float(pos["flagged"].mean()) if len(pos) else math.nan,
        "fpr_default": float(neg["flagged"].mean()) if len(neg) else math.nan,
        "fp_default": int(neg["flagged"].sum()),
        "scores": {},
    }
    for col in score_columns:
        if col not in result.columns:
            continue
        p, n = pos[col].to_numpy(float), neg[col].to_numpy(float)
        rec, thr = recall_at_fpr(p, n, MAX_FPR)
        out["scores"][col] = {"auc": roc_auc(p, n), "recall_at_fpr": rec, "threshold": thr}
    return out


CONFIDENCE_BINS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def reliability(result: pd.DataFrame) -> pd.DataFrame:
    """Findings binned by confidence: how many, their mean confidence, the share on detours."""
    found = result.loc[result["flagged"]]
    bins = pd.cut(found["confidence"], CONFIDENCE_BINS, include_lowest=True)
    table = found.groupby(bins, observed=True).agg(
        findings=("is_detour", "size"),
        mean_confidence=("confidence", "mean"),
        precision=("is_detour", "mean"),
    )
    table.index = table.index.astype(str)
    return table.rename_axis("confidence").reset_index().round(3)


def misses(result: pd.DataFrame) -> dict[str, int] | None:
    """Why detours were missed at the defaults, from ``ratio`` and ``guarded_ratio`` if given."""
    if not {"ratio", "guarded_ratio"} <= set(result.columns):
        return None
    miss = result.loc[result["is_detour"] & ~result["flagged"]]
    low = miss["ratio"] < MIN_RATIO
    guard = ~low & (miss["guarded_ratio"] < MIN_RATIO)
    return {
        "missed": len(miss),
        "ratio below min_ratio": int(low.sum()),
        "excused by the route guard": int(guard.sum()),
        "other rule (e.g. excess < 1 km)": int((~low & ~guard).sum()),
    }


def _band_name(lo: float, hi: float, unit: str = "") -> str:
    def fmt(v: float) -> str:
        return f"{v / 1000:g} km" if unit == "m" else f"{v:g}{unit}"

    return f"> {fmt(lo)}" if math.isinf(hi) else f"{fmt(lo)}–{fmt(hi)}"


def breakdown(result: pd.DataFrame) -> pd.DataFrame:
    """Decision at the defaults per group: recall on positives, FPR on negatives."""
    groups: list[tuple[str, str, pd.Series]] = []
    pos_mask = result["is_detour"]
    for lo, hi in RATIO_BANDS:
        m = pos_mask & (result["true_ratio"] >= lo) & (result["true_ratio"] < hi)
        groups.append(("true ratio", _band_name(lo, hi), m))
    legit_long = ~pos_mask & (result["true_ratio"] >= MIN_RATIO)
    groups.append(("true ratio", f"legitimate, >= {MIN_RATIO:g}", legit_long))
    for case in sorted(result["case"].unique()):
        groups.append(("case", str(case), result["case"] == case))
    for name, col, bands, unit in (
        ("sampling", "sampling_s", SAMPLING_BANDS, " s"),
        ("noise", "noise_m", NOISE_BANDS, " m"),
        ("shortest path", "shortest_m", LENGTH_BANDS_M, "m"),
    ):
        if result[col].notna().any():
            for i, (lo, hi) in enumerate(bands):
                upper = result[col] <= hi if i == len(bands) - 1 else result[col] < hi
                groups.append((name, _band_name(lo, hi, unit), (result[col] >= lo) & upper))
    groups.append(("excess", "< 1 km", pos_mask & (result["excess_m"] < 1000)))
    groups.append(("excess", ">= 1 km", pos_mask & (result["excess_m"] >= 1000)))
    rows = []
    for group, band, mask in groups:
        sub = result.loc[mask.to_numpy()]
        p, n = sub.loc[sub["is_detour"]], sub.loc[~sub["is_detour"]]
        rows.append(
            {
                "group": group,
                "band": band,
                "n_pos": len(p),
                "recall": p["flagged"].mean() if len(p) else math.nan,
                "n_neg": len(n),
                "fpr": n["flagged"].mean() if len(n) else math.nan,
            }
        )
    return pd.DataFrame(rows)


# --- output ----------------------------------------------------------------------------------


def _md(frame: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "–" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    head = "| " + " | ".join(frame.columns) + " |"
    sep = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, sep, *body])


def headline_table(summaries: dict[str, dict[str, Any]], score_columns: Sequence[str]) -> str:
    rows = []
    for name, s in summaries.items():
        row: dict[str, Any] = {
            "detector": name,
            "positives": s["n_pos"],
            "negatives": s["n_neg"],
            "recall (defaults)": s["recall_default"],
            "FPR (defaults)": s["fpr_default"],
        }
        for col in score_columns:
            if col in s["scores"]:
                sc = s["scores"][col]
                row[f"AUC {col}"] = sc["auc"]
                row[f"recall @ FPR<={MAX_FPR:g} ({col} >= t)"] = (
                    f"{sc['recall_at_fpr']:.3f} (t={sc['threshold']:.2f})"
                )
        rows.append(row)
    return _md(pd.DataFrame(rows))


def breakdown_table(breakdowns: dict[str, pd.DataFrame]) -> str:
    names = list(breakdowns)
    base = breakdowns[names[0]][["group", "band", "n_pos", "n_neg"]].copy()
    for name in names:
        b = breakdowns[name]
        suffix = f" {name}" if len(names) > 1 else ""
        base[f"recall{suffix}"] = b["recall"].to_numpy()
        base[f"FPR{suffix}"] = b["fpr"].to_numpy()
    keep = (base["n_pos"] > 0) | (base["n_neg"] > 0)
    return _md(base.loc[keep])


def plot(
    eval_set: EvalSet,
    results: dict[str, pd.DataFrame],
    summaries: dict[str, dict[str, Any]],
    score_columns: Sequence[str],
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(10, 4.6))
    for k, (name, result) in enumerate(results.items()):
        pos = result.loc[result["is_detour"]]
        neg = result.loc[~result["is_detour"]]
        for j, col in enumerate(c for c in score_columns if c in result.columns):
            curve = roc_curve(pos[col].to_numpy(float), neg[col].to_numpy(float))
            x = np.concatenate(([0.0], curve["fpr"], [1.0]))
            y = np.concatenate(([0.0], curve["tpr"], [1.0]))
            auc = summaries[name]["scores"][col]["auc"]
            label = (
                f"{name}: {col} (AUC {auc:.3f})" if len(results) > 1 else f"{col} (AUC {auc:.3f})"
            )
            style = ("-", "--", ":", "-.")[j % 4]
            for a in (ax, zoom):
                a.plot(x, y, ls=style, color=f"C{k}", label=label)
        s = summaries[name]
        for a in (ax, zoom):
            a.scatter(
                [s["fpr_default"]],
                [s["recall_default"]],
                marker="o",
                color=f"C{k}",
                edgecolor="black",
                zorder=3,
                label=f"{name}: decision at defaults"
                if len(results) > 1
                else "decision at defaults",
            )
    for a in (ax, zoom):
        a.axvline(MAX_FPR, color="grey", lw=0.6, ls=":")
        a.set_xlabel("false-positive rate (legitimate trips)")
        a.set_ylabel("recall (detours, ratio >= 1.4)")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.5)
    zoom.set_xlim(0, 0.2)
    zoom.set_ylim(0.5, 1.0)
    zoom.set_title("zoom: FPR <= 0.2", fontsize=9)
    ax.set_title("ROC", fontsize=9)
    fig.suptitle(eval_set.title, fontsize=10)
    zoom.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sets = ("sim", "detours", "both", "peers", "porto-peers")
    ap.add_argument("--set", choices=sets, default="both")
    ap.add_argument("--n", type=int, default=400, help="legitimate trips per set (and detours)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--detector", action="append", default=None, metavar="SPEC")
    ap.add_argument("--score-columns", default=",".join(DEFAULT_SCORES))
    ap.add_argument("--png-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    ap.add_argument("--save-dir", type=Path, default=None, help="write each set's frames")
    args = ap.parse_args(argv)
    detectors = [parse_detector(s) for s in (args.detector or [DEFAULT_DETECTOR])]
    score_columns = [c for c in args.score_columns.split(",") if c]

    t0 = time.perf_counter()
    graph = build_road_graph(read_libcity_roads(routes_sim.NETWORK_CSV))
    print(f"graph: {graph.n_nodes} nodes, {graph.n_edges} edges ({time.perf_counter() - t0:.1f} s)")
    names = ("sim", "detours") if args.set == "both" else (args.set,)
    report: dict[str, Any] = {"n": args.n, "seed": args.seed, "sets": {}}
    for set_name in names:
        t1 = time.perf_counter()
        if set_name in ("sim", "peers"):
            eval_set = sim_set(n=args.n, seed=args.seed, peers=set_name == "peers")
        elif set_name == "porto-peers":
            eval_set = porto_peers_set(graph, seed=args.seed)
        else:
            eval_set = detours_set(graph, n=args.n, seed=args.seed)
        t_make = time.perf_counter() - t1
        print(f"\n## {eval_set.title}")
        n_fixes = sum(len(p) for p in eval_set.parts)
        print(f"set built in {t_make:.1f} s: {n_fixes} fixes, {len(eval_set.labels)} trips")
        if args.save_dir is not None:
            args.save_dir.mkdir(parents=True, exist_ok=True)
            pd.concat(eval_set.parts, ignore_index=True).to_parquet(
                args.save_dir / f"{set_name}_pings.parquet"
            )
            eval_set.labels.to_parquet(args.save_dir / f"{set_name}_labels.parquet")
        results: dict[str, pd.DataFrame] = {}
        summaries: dict[str, dict[str, Any]] = {}
        breakdowns: dict[str, pd.DataFrame] = {}
        for det in detectors:
            result, times = run_detector(eval_set, det, graph, score_columns)
            results[det.name] = result
            summaries[det.name] = summary(result, score_columns)
            summaries[det.name]["times"] = times
            breakdowns[det.name] = breakdown(result)
            summaries[det.name]["misses"] = misses(result)
            print(
                f"{det.name}: {times['n_trips']} trips detected in {times['trips_s']:.1f} s; "
                f"scores {times['score_s']:.1f} s; decision {times['decide_s']:.1f} s; "
                f"{summaries[det.name]['n_unscored']} labelled trips without a score"
            )
        print()
        print(headline_table(summaries, score_columns))
        print()
        print(breakdown_table(breakdowns))
        for name, result in results.items():
            print(f"\nReliability of the confidence ({name}; precision at this set's mix):\n")
            print(_md(reliability(result)))
        why = {k: v["misses"] for k, v in summaries.items() if v.get("misses")}
        if why:
            print()
            print(
                _md(pd.DataFrame(why).rename_axis("missed detours at the defaults").reset_index())
            )
        if args.png_dir is not None:
            args.png_dir.mkdir(parents=True, exist_ok=True)
            png = args.png_dir / f"longer_route_roc_{set_name}.png"
            plot(eval_set, results, summaries, score_columns, png)
            print(f"\nROC plot: {png}")
        report["sets"][set_name] = {
            "summaries": summaries,
            "breakdowns": {k: v.to_dict(orient="records") for k, v in breakdowns.items()},
        }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, default=float))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
