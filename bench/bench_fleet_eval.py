"""Independent evaluation of every finding kind on the simulated Porto Alegre fleet.

Generates the data with ``fleet/simulation.py`` (real stands, prefixos and boundary; injected
violations and look-alikes with ground truth), runs the real CLI as a black box::

    pontual analyze --pings P --stands S --fleet F --boundary B --municipality 4314902
        --as-of LAST_DAY --thresholds T --drivers D --driver-links L --tiles none --jobs J
        --out DIR

and scores ``findings.geojson`` against ``truth.csv``, kind by kind.

Matching (a finding and a truth row are the same event when):

- vehicle kinds: same ``vehicle_id``; for ``unlicensed_stand_use``, ``queue_jump`` and
  ``habitual_absence`` also the same ``stand_id``; and the intervals overlap, the truth's widened
  by :data:`TOLERANCE_S` of the kind on each side (sampling: the first fix inside a stand, the
  last fix before a silence, a finding's start at the arrival rather than at the meter start);
- ``illegal_stand_formation``: the finding's area comes within the truth place's radius
  (150 m; 120 m for a stand's overflow places) of the place, and the intervals overlap.
- ``driver_not_allowed``: same vehicle, the intervals overlap (the truth row is the driver's
  stint of that local day: the whole day, or the part before or after the handover at lunch),
  and, for a positive, the finding's ``details.reason`` is the truth's reason (``lookalike``).

``operating_while_barred`` and ``driver_not_allowed`` are also scored reason by reason
(:func:`by_reason`). The simulated registry (synthetic drivers, links, vehicle documents) is
passed with ``--drivers``, ``--driver-links`` and, in ``--thresholds``, the simulation's
``max_inspection_age_days``.

A finding matching a positive is a true positive (TP); else, matching an *ambiguous* row (a case
near a threshold, by design rare) it is not counted; else it is a false positive (FP), named by
the look-alike it hit (``lookalike``) or ``unlabelled``. Recall counts the positives matched by
at least one finding. ROC AUC uses the confidence as the score over the labelled cases: every
positive and every look-alike, with the confidence of its best matching finding (0 when none),
plus every unlabelled FP (negative); the second AUC is over the findings alone (TP against FP).
The reliability table bins the findings by confidence and gives the observed precision.

Usage::

    .venv/bin/python bench/bench_fleet_eval.py [--seed 7] [--days 64] [--prefixos 50]
        [--jobs 2] [--keep DIR] [--report FILE.md]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import shapely
from pyproj import Transformer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet import simulation as fleet_sim  # noqa: E402
from tracking.detectors.findings import KINDS as FINDING_KINDS  # noqa: E402

KINDS = list(FINDING_KINDS)
TOLERANCE_S = {
    "unlicensed_stand_use": 120,
    "queue_jump": 120,
    "longer_route": 60,
    "tracking_gap": 120,
    "gps_anomaly": 60,
    "flag2_misuse": 120,
    "outside_municipality": 120,
    "illegal_stand_formation": 0,
    "operating_while_barred": 0,
    "inactivity": 0,
    "habitual_absence": 0,
    "driver_not_allowed": 120,
}
WITH_REASON = {"driver_not_allowed"}
"""Kinds whose finding must also give the truth's reason (``details.reason`` = ``lookalike``)
to match a positive."""
REASON_KINDS = ("operating_while_barred", "driver_not_allowed")
"""Kinds scored reason by reason too (a positive's reasons: its ``lookalike`` split on +)."""
WITH_STAND = {"unlicensed_stand_use", "queue_jump", "habitual_absence"}
BINS = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001]


def run_analyze(paths: dict[str, Path], meta: dict[str, Any], out: Path, *, jobs: int) -> float:
    """Run the real CLI on the simulated files; return the wall time in seconds."""
    exe = Path(sys.executable).with_name("pontual")
    cmd = [
        str(exe),
        "analyze",
        "--pings",
        str(paths["pings"]),
        "--stands",
        str(paths["stands"]),
        "--fleet",
        str(paths["fleet"]),
        "--boundary",
        str(paths["boundary"]),
        "--municipality",
        fleet_sim.MUNICIPALITY,
        "--as-of",
        meta["as_of"],
        "--tiles",
        "none",
        "--jobs",
        str(jobs),
        "--out",
        str(out),
    ]
    if "thresholds" in paths:
        cmd += ["--thresholds", str(paths["thresholds"])]
    if "drivers" in paths and "driver_links" in paths:
        cmd += ["--drivers", str(paths["drivers"]), "--driver-links", str(paths["driver_links"])]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        msg = f"pontual analyze failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        raise RuntimeError(msg)
    return time.perf_counter() - t0


def run_straight_fleet(stands: Path, root: Path, *, seed: int, jobs: int = 1) -> dict[str, Any]:
    """Issue 18's acceptance case: a fleet of straight trips only; ``longer_route`` findings."""
    pings, trips = fleet_sim.straight_trip_fleet(
        seed=seed, n_vehicles=30, trips_per_vehicle=60, waypoint_share=0.1, address_share=0.3
    )
    root.mkdir(parents=True, exist_ok=True)
    pings.drop(columns=["t"]).to_csv(root / "pings.csv", index=False)
    exe = Path(sys.executable).with_name("pontual")
    cmd = [
        str(exe),
        "analyze",
        "--pings",
        str(root / "pings.csv"),
        "--stands",
        str(stands),
        "--kinds",
        "longer_route",
        "--tiles",
        "none",
        "--jobs",
        str(jobs),
        "--out",
        str(root / "out"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        msg = f"pontual analyze failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        raise RuntimeError(msg)
    findings = read_findings(root / "out" / "findings.geojson")
    return {
        "trips": len(trips),
        "waypoint_trips": int((trips["kind"] == "waypoint").sum()),
        "max_straight_ratio": float(
            (trips["driven_m"] / trips["straight_m"])[trips["kind"] == "straight"].max()
        ),
        "findings": len(findings),
        "finding_ids": list(findings["finding_id"]),
    }


def read_findings(path: Path) -> pd.DataFrame:
    """The findings' properties, with times as UTC timestamps and the geometry as shapely."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for f in data["features"]:
        p = dict(f["properties"])
        p["geometry"] = shapely.geometry.shape(f["geometry"]) if f.get("geometry") else None
        rows.append(p)
    df = pd.DataFrame(
        rows,
        columns=[
            "finding_id",
            "kind",
            "vehicle_id",
            "stand_id",
            "started_at",
            "ended_at",
            "confidence",
            "details",
            "geometry",
        ],
    )
    for c in ("started_at", "ended_at"):
        df[c] = pd.to_datetime(df[c], utc=True)
    for c in ("vehicle_id", "stand_id"):
        df[c] = (
            df[c]
            .astype(object)
            .where(df[c].notna(), None)
            .map(lambda x: None if x is None else str(x))
        )
    return df


def read_truth(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"vehicle_id": str, "stand_id": str})
    for c in ("start", "end"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df


def _to_xy() -> Transformer:
    return Transformer.from_crs(4326, 31982, always_xy=True)


def match(findings: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """One row per finding: the truth row it hits (positive first) and the verdict."""
    tr = _to_xy()
    out = []
    for kind, fk in findings.groupby("kind"):
        tk = truth[truth["kind"] == kind]
        tol = pd.Timedelta(seconds=TOLERANCE_S.get(str(kind), 0))
        by_vehicle = {v: g for v, g in tk.groupby("vehicle_id")}
        places = tk[tk["place_lat"].notna()]
        if len(places):
            px, py = tr.transform(places["place_lon"].to_numpy(), places["place_lat"].to_numpy())
        for f in fk.itertuples():
            if kind == "illegal_stand_formation":
                cand = places
                if len(cand) and f.geometry is not None:
                    g = shapely.transform(
                        f.geometry, lambda c: np.column_stack(tr.transform(c[:, 0], c[:, 1]))
                    )
                    d = shapely.distance(g, shapely.points(px, py))
                    cand = cand[d <= cand["place_radius_m"].to_numpy()]
            else:
                cand = by_vehicle.get(f.vehicle_id, tk.iloc[:0])
                if kind in WITH_STAND and f.stand_id is not None:
                    cand = cand[cand["stand_id"] == f.stand_id]
            cand = cand[(cand["start"] - tol <= f.ended_at) & (cand["end"] + tol >= f.started_at)]
            hit = None
            for label in ("positive", "ambiguous", "negative"):
                c = cand[cand["label"] == label]
                if label == "positive" and kind in WITH_REASON:
                    c = c[c["lookalike"] == _reason(f.details)]
                if len(c):
                    ov = np.minimum(c["end"], f.ended_at) - np.maximum(c["start"], f.started_at)
                    hit = c.loc[ov.idxmax()]
                    break
            verdict = {"positive": "TP", "ambiguous": "ambiguous", "negative": "FP"}.get(
                None if hit is None else hit["label"], "FP"
            )
            out.append(
                {
                    "finding_id": f.finding_id,
                    "kind": kind,
                    "vehicle_id": f.vehicle_id,
                    "stand_id": f.stand_id,
                    "started_at": f.started_at,
                    "ended_at": f.ended_at,
                    "confidence": float(f.confidence),
                    "verdict": verdict,
                    "truth_index": None if hit is None else int(hit.name),
                    "lookalike": "unlabelled" if hit is None else hit["lookalike"],
                    "details": f.details,
                }
            )
    return pd.DataFrame(
        out,
        columns=[
            "finding_id",
            "kind",
            "vehicle_id",
            "stand_id",
            "started_at",
            "ended_at",
            "confidence",
            "verdict",
            "truth_index",
            "lookalike",
            "details",
        ],
    )


def _reason(details: Any) -> str | None:
    """A finding's ``details.reason`` (details as a dict or its JSON)."""
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return None
    return details.get("reason") if isinstance(details, dict) else None


def by_reason(matched: pd.DataFrame, truth: pd.DataFrame) -> list[dict[str, Any]]:
    """Per kind of :data:`REASON_KINDS` and reason: positives, found, findings, TP, FP.

    A positive counts for each reason of its ``lookalike`` (``a+b``); a finding for its
    ``details.reason`` (the most serious one).
    """
    rows = []
    for kind in REASON_KINDS:
        mk = matched[matched["kind"] == kind]
        pos = truth[(truth["kind"] == kind) & (truth["label"] == "positive")]
        found = set(mk.loc[mk["verdict"] == "TP", "truth_index"].dropna().astype(int))
        reasons_of = {i: str(look).split("+") for i, look in pos["lookalike"].items()}
        f_reason = mk["details"].map(_reason)
        names = sorted({r for rs in reasons_of.values() for r in rs} | set(f_reason.dropna()))
        for reason in names:
            mine = [i for i, rs in reasons_of.items() if reason in rs]
            fr = mk[f_reason == reason]
            tp = int((fr["verdict"] == "TP").sum())
            fp = int((fr["verdict"] == "FP").sum())
            rows.append(
                {
                    "kind": kind,
                    "reason": reason,
                    "positives": len(mine),
                    "found": sum(1 for i in mine if i in found),
                    "findings": len(fr),
                    "tp": tp,
                    "fp": fp,
                    "precision": tp / (tp + fp) if tp + fp else float("nan"),
                    "recall": (
                        sum(1 for i in mine if i in found) / len(mine) if mine else float("nan")
                    ),
                }
            )
    return rows


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Mann–Whitney ROC AUC (ties count one half); NaN without both classes."""
    if not len(pos) or not len(neg):
        return float("nan")
    allv = np.concatenate([pos, neg])
    ranks = pd.Series(allv).rank(method="average").to_numpy()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def score(findings: pd.DataFrame, truth: pd.DataFrame) -> dict[str, Any]:
    """Per-kind counts, precision, recall, AUCs, reliability bins and the false positives."""
    m = match(findings, truth)
    kinds: dict[str, Any] = {}
    for kind in KINDS:
        mk = m[m["kind"] == kind]
        tk = truth[truth["kind"] == kind]
        pos = tk[tk["label"] == "positive"]
        neg = tk[tk["label"] == "negative"]
        best = mk.dropna(subset=["truth_index"]).groupby("truth_index")["confidence"].max()
        found = set(mk.loc[mk["verdict"] == "TP", "truth_index"].astype(int))
        tp_f = int((mk["verdict"] == "TP").sum())
        fp = mk[mk["verdict"] == "FP"]
        n_fp = len(fp)
        prec = tp_f / (tp_f + n_fp) if tp_f + n_fp else float("nan")
        rec = len(found) / len(pos) if len(pos) else float("nan")
        s_pos = np.array([best.get(i, 0.0) for i in pos.index])
        s_neg = np.concatenate(
            [
                np.array([best.get(i, 0.0) for i in neg.index]),
                fp.loc[fp["lookalike"] == "unlabelled", "confidence"].to_numpy(),
            ]
        )
        rel = []
        for lo, hi in itertools_pairs(BINS):
            b = mk[
                (mk["confidence"] >= lo) & (mk["confidence"] < hi) & (mk["verdict"] != "ambiguous")
            ]
            if len(b):
                rel.append(
                    {
                        "bin": f"{lo:.1f}–{min(hi, 1.0):.1f}",
                        "n": len(b),
                        "mean_confidence": float(b["confidence"].mean()),
                        "precision": float((b["verdict"] == "TP").mean()),
                    }
                )
        neg_counts = neg["lookalike"].value_counts().to_dict()
        kinds[kind] = {
            "findings": len(mk),
            "tp_findings": tp_f,
            "fp": n_fp,
            "ambiguous_findings": int((mk["verdict"] == "ambiguous").sum()),
            "positives": len(pos),
            "found": len(found),
            "fn": len(pos) - len(found),
            "negatives": len(neg),
            "precision": prec,
            "recall": rec,
            "auc_labelled": auc(s_pos, s_neg),
            "auc_findings": auc(
                mk.loc[mk["verdict"] == "TP", "confidence"].to_numpy(), fp["confidence"].to_numpy()
            ),
            "reliability": rel,
            "negatives_by_type": neg_counts,
            "fp_by_type": fp["lookalike"].value_counts().to_dict(),
            "fp_list": fp.sort_values("started_at").to_dict("records"),
            "fn_list": pos[~pos.index.isin(list(found))].to_dict("records"),
        }
    return {"kinds": kinds, "matched": m, "by_reason": by_reason(m, truth)}


def itertools_pairs(values: list[float]) -> list[tuple[float, float]]:
    return list(zip(values[:-1], values[1:], strict=True))


def _fmt(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _detail_summary(details: Any) -> str:
    """A few scalar metrics of a finding's details, for the FP list."""
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return details[:80]
    if not isinstance(details, dict):
        return ""
    keys = (
        "ratio",
        "driven_m",
        "reference_m",
        "method",
        "n_peers",
        "gap_s",
        "rule",
        "displacement_m",
        "pattern",
        "reason",
        "distance_m",
        "implied_speed_kmh",
        "lag_s",
        "dwell_s",
        "subtype",
        "share",
        "days_operating",
        "idle_days",
        "duration_s",
        "wait_s",
        "n_ahead",
        "vehicles",
        "days",
    )
    parts = []
    for k in keys:
        v = details.get(k)
        if v is None or isinstance(v, dict | list):
            if isinstance(v, list):
                parts.append(f"{k}={len(v)}")
            continue
        parts.append(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts[:7])


def markdown(
    result: dict[str, Any],
    *,
    meta: dict[str, Any],
    timings: dict[str, float],
    command: str,
    straight: dict[str, Any] | None = None,
    max_fp_rows: int = 12,
) -> str:
    k = result["kinds"]
    lines = [
        f"Run: seed {meta['seed']}, {meta['days']} days from {meta['first_day']}, "
        f"{meta['prefixos']} prefixos, {meta['pings']:,} fixes, {meta['rides']:,} rides; "
        f"simulation {timings.get('simulate_s', 0):.0f} s, `pontual analyze` "
        f"{timings.get('analyze_s', 0):.0f} s.",
        "",
        f"Command: `{command}`",
        "",
        "| kind | positives | look-alikes | findings | TP | FP | FN | precision | recall "
        "| AUC (labelled) | AUC (findings) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in KINDS:
        r = k[kind]
        lines.append(
            f"| `{kind}` | {r['positives']} | {r['negatives']} | {r['findings']} | "
            f"{r['tp_findings']} | {r['fp']} | {r['fn']} | {_fmt(r['precision'])} | "
            f"{_fmt(r['recall'])} | {_fmt(r['auc_labelled'])} | {_fmt(r['auc_findings'])} |"
        )
    lines += [
        "",
        "By reason (`details.reason` of the findings; a positive counts for each of its reasons):",
        "",
        "| kind | reason | positives | found | findings | TP | FP | precision | recall |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.get("by_reason", []):
        lines.append(
            f"| `{r['kind']}` | {r['reason']} | {r['positives']} | {r['found']} | "
            f"{r['findings']} | {r['tp']} | {r['fp']} | {_fmt(r['precision'])} | "
            f"{_fmt(r['recall'])} |"
        )
    lines += [
        "",
        "False positives by look-alike (the case the finding accuses):",
        "",
        "| kind | look-alike | FP | of cases | example finding |",
        "|---|---|---:|---:|---|",
    ]
    for kind in KINDS:
        r = k[kind]
        for look, n in sorted(r["fp_by_type"].items(), key=lambda x: -x[1]):
            ex = next(f for f in r["fp_list"] if f["lookalike"] == look)
            of = r["negatives_by_type"].get(look, "–")
            lines.append(f"| `{kind}` | {look} | {n} | {of} | `{ex['finding_id']}` |")
    lines += [
        "",
        "Reliability of `confidence` (findings binned by confidence; observed precision):",
        "",
        "| kind | bin | findings | mean confidence | precision |",
        "|---|---|---:|---:|---:|",
    ]
    for kind in KINDS:
        for b in k[kind]["reliability"]:
            lines.append(
                f"| `{kind}` | {b['bin']} | {b['n']} | {b['mean_confidence']:.2f} | "
                f"{b['precision']:.2f} |"
            )
    lines += ["", "False positives (first rows per kind):", ""]
    for kind in KINDS:
        fps = k[kind]["fp_list"]
        if not fps:
            continue
        lines += [
            f"`{kind}` ({len(fps)}):",
            "",
            "| finding | vehicle | stand | start (UTC) | conf. | look-alike | details |",
            "|---|---|---|---|---:|---|---|",
        ]
        for f in fps[:max_fp_rows]:
            lines.append(
                f"| `{f['finding_id']}` | {f['vehicle_id']} | {f['stand_id'] or ''} | "
                f"{f['started_at']:%Y-%m-%d %H:%M:%S} | {f['confidence']:.2f} | "
                f"{f['lookalike']} | {_detail_summary(f['details'])} |"
            )
        lines.append("")
    if straight is not None:
        lines += [
            f"Straight trips only (`fleet_sim.straight_trip_fleet`, `--kinds longer_route`, "
            f"no road network): {straight['trips']:,} trips ({straight['waypoint_trips']} with "
            f"a passenger's stop on the way), the others at most "
            f"{straight['max_straight_ratio']:.3f}× their straight line: "
            f"**{straight['findings']} `longer_route` findings**"
            + (f" ({', '.join(straight['finding_ids'][:5])})" if straight["findings"] else "")
            + ".",
            "",
        ]
    fn_rows = [(kind, f) for kind in KINDS for f in k[kind]["fn_list"]]
    if fn_rows:
        lines += [
            "False negatives (missed positives, by subtype):",
            "",
            "| kind | subtype | missed | of |",
            "|---|---|---:|---:|",
        ]
        for kind in KINDS:
            fns = pd.DataFrame(k[kind]["fn_list"])
            if fns.empty:
                continue
            for look, n in fns["lookalike"].value_counts().items():
                lines.append(f"| `{kind}` | {look} | {n} | {k[kind]['positives']} |")
    return "\n".join(lines) + "\n"


def pad_stand_codes(fleet: Path) -> None:
    """Rewrite the fleet file's ``stands`` with a leading zero on each code ('02' for '2')."""
    frame = pd.read_csv(fleet, dtype=str, keep_default_na=False)
    frame["stands"] = [";".join(f"0{s}" for s in c.split(";") if s) for c in frame["stands"]]
    frame.to_csv(fleet, index=False)


def _read_pings(pings: Path) -> pd.DataFrame:
    """The simulated pings file (Parquet, or CSV as text)."""
    return pd.read_parquet(pings) if pings.suffix == ".parquet" else pd.read_csv(pings, dtype=str)


def _write_pings(frame: pd.DataFrame, pings: Path) -> None:
    """Write ``frame`` over the pings file, in its format."""
    if pings.suffix == ".parquet":
        frame.to_parquet(pings, index=False)
    else:
        frame.to_csv(pings, index=False)


def rewrite_prefixes(pings: Path, every: int) -> dict[str, str]:
    """Rewrite every ``every``-th vehicle's prefixo in the pings with leading zeros ('000123'
    for '123'), as a tracker configured apart from the registry might write it; return the
    written ids to the registry's."""
    frame = _read_pings(pings)
    ids = frame["vehicle_id"].astype(str)
    chosen = sorted(ids.unique())[::every]
    written = {v: v.zfill(6) if v.zfill(6) != v else f"0{v}" for v in chosen}
    frame["vehicle_id"] = ids.map(lambda v: written.get(v, v))
    _write_pings(frame, pings)
    return {w: v for v, w in written.items()}


def thin_fixes(pings: Path, every: int) -> None:
    """Keep every ``every``-th fix of each vehicle, in time order (a tracker reporting less
    often)."""
    frame = _read_pings(pings)
    when = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    order = np.lexsort((when.to_numpy(), frame["vehicle_id"].astype(str).to_numpy()))
    frame = frame.iloc[order]
    frame = frame[frame.groupby("vehicle_id", sort=False).cumcount().to_numpy() % every == 0]
    _write_pings(frame, pings)


def drop_speeds(pings: Path) -> None:
    """Remove the fixes' ``speed_kmh`` (a tracker that reports no speed)."""
    frame = _read_pings(pings)
    frame = frame.drop(columns=["speed_kmh"])
    _write_pings(frame, pings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=fleet_sim.DEFAULT_DAYS)
    parser.add_argument("--prefixos", type=int, default=fleet_sim.DEFAULT_PREFIXOS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--format", choices=["csv", "parquet"], default="parquet")
    parser.add_argument(
        "--gps-noise-m",
        type=float,
        nargs=2,
        default=list(fleet_sim.GPS_NOISE_M),
        metavar=("LO", "HI"),
        help="radial RMS GPS error per vehicle-day, metres",
    )
    parser.add_argument(
        "--padded-stand-codes",
        action="store_true",
        help="the fleet file writes each licence's stand code with a leading zero ('02' for "
        "'2'), as another system's file might: no licence matches the stands file",
    )
    parser.add_argument(
        "--prefixes-written-otherwise",
        type=int,
        metavar="K",
        help="the pings write every K-th vehicle's prefixo with leading zeros ('000123' for "
        "'123'), as a tracker configured apart from the registry might; findings are scored "
        "under the registry's prefixo",
    )
    parser.add_argument(
        "--keep-every",
        type=int,
        metavar="K",
        help="keep every K-th fix of each vehicle (a fix every K x 15 s, as a tracker "
        "configured to report less often)",
    )
    parser.add_argument(
        "--no-speed",
        action="store_true",
        help="drop the fixes' speed_kmh, as a tracker that reports no speed",
    )
    parser.add_argument("--keep", type=Path, help="folder for the data and outputs (kept)")
    parser.add_argument("--report", type=Path, help="also write the markdown here")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet_eval_") as tmp:
        root = a.keep or Path(tmp)
        t0 = time.perf_counter()
        sim = fleet_sim.simulate(
            seed=a.seed, days=a.days, n_prefixos=a.prefixos, gps_noise_m=tuple(a.gps_noise_m)
        )
        paths = fleet_sim.write_files(sim, root / "in", fmt=a.format)
        if a.padded_stand_codes:
            pad_stand_codes(paths["fleet"])
        if a.keep_every and a.keep_every > 1:
            thin_fixes(paths["pings"], a.keep_every)
        if a.no_speed:
            drop_speeds(paths["pings"])
        written: dict[str, str] = {}
        if a.prefixes_written_otherwise:
            written = rewrite_prefixes(paths["pings"], a.prefixes_written_otherwise)
        t_sim = time.perf_counter() - t0
        meta = json.loads(paths["meta"].read_text(encoding="utf-8"))
        t_an = run_analyze(paths, meta, root / "out", jobs=a.jobs)
        findings = read_findings(root / "out" / "findings.geojson")
        findings["vehicle_id"] = findings["vehicle_id"].map(lambda v: written.get(v, v))
        result = score(findings, read_truth(paths["truth"]))
        straight = run_straight_fleet(paths["stands"], root / "straight", seed=a.seed, jobs=a.jobs)
        command = (
            f".venv/bin/python bench/bench_fleet_eval.py --seed {a.seed} --days {a.days} "
            f"--prefixos {a.prefixos} --jobs {a.jobs}"
            + (
                f" --gps-noise-m {a.gps_noise_m[0]:g} {a.gps_noise_m[1]:g}"
                if tuple(a.gps_noise_m) != fleet_sim.GPS_NOISE_M
                else ""
            )
            + (" --padded-stand-codes" if a.padded_stand_codes else "")
            + (f" --keep-every {a.keep_every}" if a.keep_every and a.keep_every > 1 else "")
            + (" --no-speed" if a.no_speed else "")
            + (
                f" --prefixes-written-otherwise {a.prefixes_written_otherwise}"
                if a.prefixes_written_otherwise
                else ""
            )
        )
        md = markdown(
            result,
            meta=meta,
            timings={"simulate_s": t_sim, "analyze_s": t_an},
            command=command,
            straight=straight,
        )
        if a.keep:
            result["matched"].to_csv(root / "matched.csv", index=False)
    print(md)
    if a.report:
        a.report.write_text(md, encoding="utf-8")


if __name__ == "__main__":
    main()
