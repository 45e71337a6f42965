"""gps_anomaly's repetition rule (POA art. 58, IX) on whole days of real Porto trips.

A proposal under art. 58, IX needs the anomalies to be repeated (``min_findings`` of the vehicle
within ``window_hours``) or persistent (one of ``min_duration_s``). This measures what that rule
does to receivers that work, on GPS as it really is, and to receivers that fail:

- **healthy days** (negatives): a taxi's day of tracking made of real trips of
  ``data/porto/derived/trips_combined.csv`` drawn at random, their fixes and their own GPS errors
  as recorded, laid end to end under one id (3–20 min between two trips, and at least the time
  to drive from one to the next at 40 km/h) until the day holds ``--hours`` tracked hours;
- **failing receivers** (positives): the same days with stretches of 2–10 fixes thrown 3–12 km
  away and back (the failing receiver of ``bench_gps_two_tracks.py``), started at random fixes,
  ``r`` per tracked hour on average (Poisson), for several ``r``.

Each day goes through :func:`detect_gps_anomaly` and :func:`propose_all` under the bundled Porto
Alegre rulebook and under the same rulebook with other repetition rules. Reported: the days
with a proposal (healthy ones are false accusations), and the ROC of the day's score — the most
anomalies within a window — against the healthy days, by failure rate.

Usage::

    .venv/bin/python bench/bench_gps_days.py [--days 2000] [--hours 16] [--seed 3] [--png PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gps_two_tracks import DATA, M_PER_DEG, POA, START, TZ, _case  # noqa: E402
from bench_longer_route_eval import roc_auc, roc_curve  # noqa: E402

from enforcement.proposals import propose_all  # noqa: E402
from enforcement.rulebook import Rulebook  # noqa: E402
from geo.crs import haversine_m  # noqa: E402
from tracking.detectors import gps_anomaly  # noqa: E402
from tracking.porto import read_porto_trips  # noqa: E402

RATES = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Failing receivers: stretches thrown away per tracked hour."""
RULES = ((3, 24.0), (3, 1.0), (4, 1.0), (5, 1.0), (3, 0.5), (3, 0.25), (4, 0.25))
"""Repetition rules compared with the bundled one: (min_findings, window_hours)."""
WINDOWS_H = (24.0, 1.0, 0.25)
"""Windows of the day's score in the ROC."""
BUNDLED = next(r.repetition for r in POA.rules if r.repetition is not None)


def real_trips() -> list[pd.DataFrame]:
    """Every real Porto trip of two fixes or more, as recorded (its GPS errors kept)."""
    pings, _, _ = read_porto_trips(DATA, now=pd.Timestamp("2030-01-01", tz="UTC"))
    trips = pings.groupby("row", sort=True)
    return [t.sort_values("timestamp").reset_index(drop=True) for _, t in trips if len(t) >= 2]


def healthy_day(
    trips: list[pd.DataFrame], rng: np.random.Generator, vehicle: str, hours: float
) -> pd.DataFrame:
    """Real trips drawn at random, one after another under ``vehicle``, ``hours`` tracked."""
    parts: list[pd.DataFrame] = []
    tracked_s, at = 0.0, START
    while tracked_s < hours * 3600:
        trip = trips[int(rng.integers(len(trips)))]
        if parts:
            last = parts[-1].iloc[-1]
            drive_m = haversine_m(
                last["lat"], last["lon"], trip["lat"].iloc[0], trip["lon"].iloc[0]
            )
            at = last["timestamp"] + pd.Timedelta(
                seconds=max(rng.uniform(180, 1200), float(drive_m) / (40 / 3.6))
            )
        part = trip[["lat", "lon", "meter"]].copy()
        part["vehicle_id"] = vehicle
        part["timestamp"] = trip["timestamp"] + (at - trip["timestamp"].iloc[0])
        parts.append(part)
        tracked_s += (trip["timestamp"].iloc[-1] - trip["timestamp"].iloc[0]).total_seconds() + 15
    return _case(parts)


def failing_day(
    trips: list[pd.DataFrame], rng: np.random.Generator, vehicle: str, hours: float, rate: float
) -> pd.DataFrame:
    """A healthy day with about ``rate`` stretches per tracked hour thrown 3–12 km away."""
    return thrown(healthy_day(trips, rng, vehicle, hours), rng, hours, rate)


def thrown(day: pd.DataFrame, rng: np.random.Generator, hours: float, rate: float) -> pd.DataFrame:
    """``day`` (``hours`` tracked) with about ``rate`` stretches per hour thrown 3–12 km away."""
    day = day.copy()
    n = len(day)
    k = min(int(rng.poisson(rate * hours)), (n - 14) // 13)
    lat0 = float(day["lat"].iloc[0])
    for at in np.sort(rng.choice(np.arange(2, n - 12), size=k, replace=False)):
        idx = day.index[at : at + int(rng.integers(2, 11))]
        away_m, angle = rng.uniform(3000, 12_000), rng.uniform(0, 2 * np.pi)
        day.loc[idx, "lat"] += away_m * np.sin(angle) / M_PER_DEG
        day.loc[idx, "lon"] += away_m * np.cos(angle) / (M_PER_DEG * np.cos(np.radians(lat0)))
    return _case([day[["lat", "lon", "meter", "vehicle_id", "timestamp"]]])


def with_rule(min_findings: int, window_hours: float) -> Rulebook:
    """The bundled rulebook with its gps_anomaly repetition rule changed."""
    rules = []
    for rule in POA.rules:
        if rule.repetition is not None:
            rep = rule.repetition.model_copy(
                update={"min_findings": min_findings, "window_hours": window_hours}
            )
            rule = rule.model_copy(update={"repetition": rep})
        rules.append(rule)
    return POA.model_copy(update={"rules": tuple(rules)})


def most_in_window(starts_ns: np.ndarray, window_h: float) -> int:
    """The most anomalies whose starts lie within one window of ``window_h`` hours."""
    if len(starts_ns) == 0:
        return 0
    s = np.sort(starts_ns)
    last = np.searchsorted(s, s + int(window_h * 3600e9), side="right")
    return int((last - np.arange(len(s))).max())


def judge(day: pd.DataFrame, books: dict[str, Rulebook]) -> dict[str, float]:
    """The day's anomalies, whether each rulebook proposes, and its scores by window."""
    found = gps_anomaly.detect_gps_anomaly(day)
    out: dict[str, float] = {"anomalies": float(len(found))}
    for name, book in books.items():
        proposed = bool(len(found)) and bool(
            propose_all(found, {"taxi": book}, timezone=TZ).proposals
        )
        out[name] = float(proposed)
    starts = found["started_at"].astype("int64").to_numpy() if len(found) else np.array([])
    for w in WINDOWS_H:
        out[f"most in {w:g} h"] = float(most_in_window(starts, w))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=2000, help="healthy days (and failing, per rate)")
    ap.add_argument("--failing-days", type=int, default=300, help="failing days per rate")
    ap.add_argument("--hours", type=float, default=16.0, help="tracked hours a day")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--png", type=Path, help="write the ROC figure here")
    a = ap.parse_args()
    trips = real_trips()
    books = {f"bundled ({BUNDLED.min_findings} in {BUNDLED.window_hours:g} h)": POA}
    books |= {
        f"{k} in {w:g} h": with_rule(k, w)
        for k, w in RULES
        if (k, w) != (BUNDLED.min_findings, BUNDLED.window_hours)
    }
    rng = np.random.default_rng(a.seed)
    healthy = pd.DataFrame(
        [judge(healthy_day(trips, rng, f"H{i}", a.hours), books) for i in range(a.days)]
    )
    failing = {
        rate: pd.DataFrame(
            [
                judge(failing_day(trips, rng, f"F{i}", a.hours, rate), books)
                for i in range(a.failing_days)
            ]
        )
        for rate in RATES
    }
    tracked_h = a.days * a.hours
    print(
        f"{len(trips)} real Porto trips; {a.days} healthy days of {a.hours:g} tracked hours: "
        f"{healthy['anomalies'].sum():.0f} anomalies "
        f"({healthy['anomalies'].sum() / tracked_h:.3f} per tracked hour); "
        f"{a.failing_days} failing days per rate\n"
    )
    print(
        "| rule | healthy days with a proposal | "
        + " | ".join(f"failing, {r:g}/h" for r in RATES)
        + " |"
    )
    print("|---|---:|" + "---:|" * len(RATES))
    for name in books:
        cells = [f"{int(f[name].sum())} ({f[name].mean():.2f})" for f in failing.values()]
        print(
            f"| {name} | {int(healthy[name].sum())} ({healthy[name].mean():.4f}) | "
            + " | ".join(cells)
            + " |"
        )
    print(
        "\nROC AUC of the day's score (most anomalies within a window), failing against healthy:\n"
    )
    print("| score | " + " | ".join(f"{r:g}/h" for r in RATES) + " |")
    print("|---|" + "---:|" * len(RATES))
    for w in WINDOWS_H:
        col = f"most in {w:g} h"
        aucs = [roc_auc(f[col].to_numpy(), healthy[col].to_numpy()) for f in failing.values()]
        print(f"| {col} | " + " | ".join(f"{x:.3f}" for x in aucs) + " |")
    if a.png is not None:
        plot(healthy, failing, a.png)
        print(f"\nROC figure: {a.png}")


def plot(healthy: pd.DataFrame, failing: dict[float, pd.DataFrame], path: Path) -> None:
    """ROC of each window's score, one panel per window, one curve per failure rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(WINDOWS_H), figsize=(4 * len(WINDOWS_H), 3.8), sharey=True)
    for ax, w in zip(axes, WINDOWS_H, strict=True):
        col = f"most in {w:g} h"
        neg = healthy[col].to_numpy()
        for k, (rate, f) in enumerate(failing.items()):
            curve = roc_curve(f[col].to_numpy(), neg)
            ax.step(
                np.r_[0, curve["fpr"]],
                np.r_[0, curve["tpr"]],
                where="post",
                color=f"C{k}",
                label=f"failing {rate:g}/h",
            )
        if w == BUNDLED.window_hours:
            rec = [f[f"most in {w:g} h"].ge(BUNDLED.min_findings).mean() for f in failing.values()]
            ax.scatter(
                [0] * len(rec),
                rec,
                color=[f"C{k}" for k in range(len(rec))],
                edgecolor="black",
                zorder=3,
                label=f"the rule ({BUNDLED.min_findings})",
            )
            ax.legend(loc="lower right", fontsize=7)
        ax.set_xscale("symlog", linthresh=1e-3)
        ax.set_xlim(0, 1)
        ax.set_title(f"score: most anomalies within {w:g} h", fontsize=9)
        ax.set_xlabel("healthy days proposed (FPR)")
    axes[0].set_ylabel("failing days proposed (recall)")
    fig.suptitle("gps_anomaly, POA art. 58, IX: days of real Porto trips", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
