"""longer_route on real Porto trips with injected detours: ROC, AUC and speed.

Run: ``.venv/bin/python bench/bench_longer_route.py [--n 400] [--seed 7] [--png roc.png]``.

Measured (2 shared cores, n=400, seed 7): AUC of the ratio score 0.958 (ratio >= 1.4 alone:
recall 0.978, FPR 0.083), of the guarded ratio (ratio, at most 1 on a reasonable route) 0.962;
the detector at its defaults: recall 0.935, FPR 0.040 (16/400; whole pool 33/860 = 3.8 %);
560–900 trips/s on real trips (with evidence), 110–180 trips/s when most trips are findings;
batched shortest paths ~2 000–2 600 pairs/s against networkx single pairs ~140–210 pairs/s.

Positives: the detours of ``tests/tracking/detectors/detours.py`` (ratio 1.4–2.0 targets; those
of measured ratio >= 1.4 count); negatives: the same trips unmodified. Score: the ratio driven /
reference (``route_ratios``), the guarded ratio, and the detector's decision at its defaults.
Also times the detector (trips/s), Dijkstra batches and single pairs (scipy) against networkx.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests" / "tracking" / "detectors"))

import detours  # noqa: E402

from geo.roads import shortest_path_lengths  # noqa: E402
from tracking.detectors.longer_route import detect_longer_route, route_ratios  # noqa: E402
from tracking.trips import detect_trips  # noqa: E402


def roc(scores_pos: np.ndarray, scores_neg: np.ndarray) -> pd.DataFrame:
    thresholds = np.unique(np.concatenate((scores_pos, scores_neg, [np.inf])))[::-1]
    tpr = [(scores_pos >= t).mean() for t in thresholds]
    fpr = [(scores_neg >= t).mean() for t in thresholds]
    return pd.DataFrame({"threshold": thresholds, "tpr": tpr, "fpr": fpr})


def auc(curve: pd.DataFrame) -> float:
    x = np.concatenate(([0.0], curve["fpr"].to_numpy(), [1.0]))
    y = np.concatenate(([0.0], curve["tpr"].to_numpy(), [1.0]))
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()

    t0 = time.perf_counter()
    graph = detours.porto_graph()
    t_graph = time.perf_counter() - t0
    pings, pool = detours.porto_pool(graph)
    sample = detours.sample_trips(pool, n=args.n, seed=args.seed)
    neg_pings = detours.trip_pings(pings, sample)
    pos_pings, labels = detours.make_detours(graph, pings, sample, seed=args.seed)
    print(f"graph: {graph.n_nodes} nodes, {graph.n_edges} edges, built in {t_graph:.2f} s")
    print(f"pool {len(pool)} trips; sample {len(sample)}; detours made {len(labels)}")

    neg_trips = detect_trips(neg_pings, max_gap_s=60)
    pos_trips = detect_trips(pos_pings, max_gap_s=60)
    r_neg = route_ratios(neg_trips, neg_pings, roads=graph)
    r_pos = route_ratios(pos_trips, pos_pings, roads=graph).merge(
        labels[["vehicle_id", "ratio"]].rename(columns={"ratio": "label_ratio"}), on="vehicle_id"
    )
    r_pos = r_pos.loc[r_pos["label_ratio"] >= 1.4]
    curves = {}
    for score in ("ratio", "guarded_ratio"):
        s_pos = r_pos[score].fillna(0).to_numpy()
        s_neg = r_neg[score].fillna(0).to_numpy()
        curves[score] = curve = roc(s_pos, s_neg)
        print(f"\nROC of the {score} score: positives {len(s_pos)}, negatives {len(s_neg)}")
        print(f"AUC = {auc(curve):.4f}")
        rows = []
        for t in (1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0):
            rows.append((t, (s_pos >= t).mean(), (s_neg >= t).mean()))
        print(pd.DataFrame(rows, columns=[f"{score} >=", "recall", "FPR"]).to_string(index=False))

    t1 = time.perf_counter()
    f_neg = detect_longer_route(neg_trips, neg_pings, roads=graph)
    t_neg = time.perf_counter() - t1
    t1 = time.perf_counter()
    f_pos = detect_longer_route(pos_trips, pos_pings, roads=graph)
    t_pos = time.perf_counter() - t1
    recall = r_pos["vehicle_id"].isin(set(f_pos["vehicle_id"])).mean()
    fpr = len(f_neg) / len(neg_trips)
    print("\ndetector at its defaults (min_ratio 1.4, min_excess_m 1000, guards on):")
    print(
        f"recall {recall:.3f} on {len(r_pos)} detours of ratio >= 1.4; FPR {fpr:.3f} "
        f"({len(f_neg)}/{len(neg_trips)})"
    )
    print(
        f"speed: {len(neg_trips) / t_neg:.0f} trips/s on real trips, "
        f"{len(pos_trips) / t_pos:.0f} trips/s on detoured ones (with evidence)"
    )

    # Dijkstra: one batch of all pairs vs networkx single pairs
    od = sample[["pickup_lon", "pickup_lat"]].to_numpy(), sample[["dropoff_lon", "dropoff_lat"]]
    t1 = time.perf_counter()
    shortest_path_lengths(graph, od[0], od[1].to_numpy())
    t_batch = time.perf_counter() - t1
    print(
        f"\nshortest_path_lengths: {len(sample)} pairs in {t_batch:.3f} s "
        f"({len(sample) / t_batch:.0f} pairs/s, scipy batched)"
    )
    try:
        import networkx as nx
    except ImportError:
        print("networkx not installed: single-pair comparison skipped")
    else:
        g = nx.DiGraph()
        rows_idx = np.repeat(np.arange(graph.n_nodes), np.diff(graph.matrix.indptr))
        for a, b, w in zip(rows_idx, graph.matrix.indices, graph.matrix.data, strict=True):
            g.add_edge(int(a), int(b), w=float(w))
        rng = np.random.default_rng(1)
        pairs = rng.choice(graph.n_nodes, size=(200, 2))
        t1 = time.perf_counter()
        for a, b in pairs:
            with contextlib.suppress(nx.NetworkXNoPath):
                nx.shortest_path_length(g, int(a), int(b), weight="w")
        t_nx = time.perf_counter() - t1
        print(f"networkx single pairs: {200 / t_nx:.0f} pairs/s")

    if args.png is not None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed: no plot")
            return
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        for score, curve in curves.items():
            ax.plot(curve["fpr"], curve["tpr"], label=f"{score} (AUC {auc(curve):.3f})")
        ax.scatter([fpr], [recall], color="red", zorder=3, label="detector defaults")
        ax.plot([0, 1], [0, 1], color="grey", lw=0.5)
        ax.set_xlabel("false-positive rate (real trips)")
        ax.set_ylabel("recall (injected detours, ratio >= 1.4)")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"ROC plot: {args.png}")


if __name__ == "__main__":
    main()
