"""GPS anomalies: impossible jumps of a vehicle's reported position.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 59 VI (gravíssima: "desligar
ou por qualquer forma intervir no Sistema de Monitoramento em Tempo Real da Frota de Táxi") and
art. 58 IX (grave: tracking not fully available). The detector states the facts; whether a jump
is a receiver fault or interference is for a person (and the rulebook) to decide.

Definitions (each one appears in the finding's ``details``):

step
    From one fix of a vehicle to its next fix: ``distance_m`` (great circle), ``dt_s`` and
    ``implied_speed_kmh = distance_m / dt_s · 3.6``.
anomalous step
    A step whose implied speed exceeds ``max_speed_kmh`` **and** whose distance exceeds
    ``min_jump_m``. The speed test is :func:`tracking.validate.speed_flags` itself, the function
    that sets the pings' ``speed_flag`` at ingest (flag on the later fix of a step, from the
    previous kept fix of the vehicle), so with the same limit every anomalous step ends at a
    speed-flagged fix; the distance test keeps GPS jitter between fixes a second apart from
    accusing anyone. Each fix's ingest ``speed_flag`` is shown in the evidence.
run
    A maximal run of consecutive anomalous steps of one vehicle, over fixes ``f0 … fm``. A run
    *returns* when it has at least two steps and the step ``f0 → fm`` is not anomalous
    (``A → B → A'``: ``B`` is a single outlier fix).
finding
    One per event, the runs of each vehicle taken in time order:

    - a run that returns is one finding, ``pattern = "outlier"``, its inner fixes in
      ``outlier_fixes``;
    - otherwise, when the vehicle's next run ends at most ``max_excursion_s`` after this run's
      ``f0`` and the step from this run's ``f0`` to that run's last fix is not anomalous, the
      track jumped away and came back: the two runs and the fixes between them are one finding,
      ``pattern = "outlier"``, every fix between the two ends being an outlier (a displaced
      stretch, e.g. multipath for a minute; in the Porto data most jumps come in such pairs);
    - otherwise the run alone, ``pattern = "jump"``: the position moved impossibly and did not
      come back (or the data ends).

    ``steps`` lists every step of the finding with its ``anomalous`` flag; ``distance_m``,
    ``dt_s`` and ``implied_speed_kmh`` are those of the fastest anomalous step;
    ``return_step`` is the step ``f0 → fm`` of an outlier finding.
confidence
    ``0.5 + 0.25·(1 − max_speed_kmh/peak_speed_kmh) + 0.2·(1 − min_jump_m/peak_distance_m)``
    over the finding's anomalous steps (peaks of speed and of distance), at most 0.95: it grows
    with how far past both thresholds the worst step is.

Geometry: the LineString through the finding's fixes; ``started_at``/``ended_at``: times of its
first and last fix.

Live: :func:`update_gps_anomaly` keeps, as plain data, the vehicle's last fix, the open run, a
run waiting for a possible return (``pending``, with the fixes after it, at most
``max_excursion_s`` long) and the findings already certain but not yet returned (``ready``: the
update returns one finding per call; two findings can become certain on the same fix, and the
second is then returned by the next call). :func:`close_gps_anomaly` ends a vehicle's stream and
returns everything left, as the batch detector does at the end of the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.crs import haversine_m
from tracking.detectors._errors import DetectorInputError
from tracking.detectors._track_kernels import (
    NS,
    TrackArrays,
    check_positive,
    finding_record,
    findings_from_records,
    fix_arrays,
    fix_evidence,
    live_fix,
    track_arrays,
)
from tracking.validate import MAX_SPEED_KMH, speed_flags

KIND = "gps_anomaly"
"""Implied speed above which a step is impossible (km/h); POA art. 59 VI / 58 IX. Same default
as the ingest ``speed_flag``."""
DEFAULT_MIN_JUMP_M = 500.0
"""Shortest anomalous step (m), so that jitter between fixes close in time does not accuse."""
DEFAULT_MAX_EXCURSION_S = 300.0
"""Longest displaced stretch (jump away and back) reported as one outlier finding (s)."""
MAX_CONFIDENCE = 0.95

Thresholds = tuple[float, float, float]


def detect_gps_anomaly(
    pings: pd.DataFrame,
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
    max_excursion_s: float = DEFAULT_MAX_EXCURSION_S,
) -> gpd.GeoDataFrame:
    """Find impossible jumps of reported positions (see the module docstring).

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated fixes (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``; optional ``meter``, ``row``, ``speed_flag``. Sorted here if needed.
    max_speed_kmh : float, default 250
        Implied speed above which a step is impossible (POA art. 59 VI, art. 58 IX).
    min_jump_m : float, default 500
        A step must also be longer than this to be anomalous.
    max_excursion_s : float, default 300
        A jump away and a jump back within this time make one outlier finding.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings of kind ``gps_anomaly``.

    Raises
    ------
    DetectorInputError
        If the pings break their contract (missing columns, naive times, unknown meter).
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(
        max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m, max_excursion_s=max_excursion_s
    )
    th = (max_speed_kmh, min_jump_m, max_excursion_s)
    track = track_arrays(pings)
    steps = np.flatnonzero(_anomalous_steps(track, th))
    if not len(steps):
        return findings_from_records([])
    # Runs of consecutive anomalous steps (a step never joins two vehicles), as fix spans.
    new_run = np.ones(len(steps), dtype=bool)
    new_run[1:] = steps[1:] != steps[:-1] + 1
    first = steps[new_run]
    last = steps[np.append(np.flatnonzero(new_run)[1:] - 1, len(steps) - 1)] + 1
    records = []
    i, n_runs = 0, len(first)
    while i < n_runs:  # a loop over runs (events), not over fixes
        s, e = int(first[i]), int(last[i])
        span = (s, e)
        i += 1
        if not _returns(track, s, e, th) and i < n_runs:
            e2 = int(last[i])
            if track.codes[e2] == track.codes[s] and _pairs(track, s, e2, th):
                span = (s, e2)
                i += 1
        idx = np.arange(span[0], span[1] + 1, dtype=np.int64)
        records.append(_record(_take(track, idx), th))
    return findings_from_records(records)


def update_gps_anomaly(
    state: Mapping[str, Any] | None,
    ping: Mapping[str, Any],
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
    max_excursion_s: float = DEFAULT_MAX_EXCURSION_S,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Live step for one vehicle: the new state and a finding that became certain, if any.

    Parameters
    ----------
    state : mapping or None
        This vehicle's state from the previous call (plain data, see the module docstring),
        None at first.
    ping : mapping
        One fix with the pings-frame keys (``vehicle_id``, ``timestamp`` tz-aware, ``lat``,
        ``lon``; optional ``meter``, ``row``, ``speed_flag``).
    max_speed_kmh, min_jump_m, max_excursion_s : float
        As in :func:`detect_gps_anomaly`.

    Returns
    -------
    tuple
        ``(state, finding)``: the new state (a new dict; the input is not modified) and a
        finding record (the findings-frame columns as a dict, ``finding_id`` included) or None.
        A fix not later than the state's last fix is ignored.

    Raises
    ------
    DetectorInputError
        If the ping lacks a key or has a naive time, or belongs to another vehicle.
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(
        max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m, max_excursion_s=max_excursion_s
    )
    th = (max_speed_kmh, min_jump_m, max_excursion_s)
    fix = live_fix(ping)
    if state is None:
        return {"last": fix, "run": [], "pending": None, "ready": []}, None
    last = state["last"]
    if last["vehicle_id"] != fix["vehicle_id"]:
        msg = (
            f"estado do veículo {last['vehicle_id']!r} recebeu um ping de {fix['vehicle_id']!r}; "
            "mantenha um estado por veículo"
        )
        raise DetectorInputError(msg)
    new = _copy_state(state)
    if fix["ts_ns"] <= last["ts_ns"]:
        return _pop_ready(new, th)
    if bool(_anomalous_steps(fix_arrays([last, fix]), th)[0]):
        new["run"] = [*(new["run"] or [last]), fix]
    elif new["run"]:
        closed, new["run"] = new["run"], []
        _close_run(new, closed, th)
    pending = new["pending"]
    if pending is not None:
        if fix["ts_ns"] - pending["run"][0]["ts_ns"] > round(max_excursion_s * NS):
            new["ready"].append(pending["run"])  # no later run can come back in time
            new["pending"] = None
        else:
            pending["tail"].append(fix)
    new["last"] = fix
    return _pop_ready(new, th)


def close_gps_anomaly(
    state: Mapping[str, Any] | None,
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
    max_excursion_s: float = DEFAULT_MAX_EXCURSION_S,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """End of a vehicle's stream: every finding still held in its state.

    Parameters
    ----------
    state : mapping or None
        The vehicle's state.
    max_speed_kmh, min_jump_m, max_excursion_s : float
        As in :func:`detect_gps_anomaly`.

    Returns
    -------
    tuple
        ``(state, findings)``: the emptied state (None for None) and the finding records, in
        time order.
    """
    check_positive(
        max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m, max_excursion_s=max_excursion_s
    )
    th = (max_speed_kmh, min_jump_m, max_excursion_s)
    if state is None:
        return None, []
    new = _copy_state(state)
    if new["run"]:
        closed, new["run"] = new["run"], []
        _close_run(new, closed, th)
    if new["pending"] is not None:
        new["ready"].append(new["pending"]["run"])
        new["pending"] = None
    findings = [_record(fix_arrays(fixes), th) for fixes in new["ready"]]
    new["ready"] = []
    return new, findings


# --- kernel ----------------------------------------------------------------------------------


def _anomalous_steps(track: TrackArrays, th: Thresholds) -> NDArray[np.bool_]:
    """Boolean per step ``k`` (fix ``k`` → ``k + 1``): too fast and longer than ``min_jump_m``."""
    max_speed_kmh, min_jump_m, _ = th
    n = len(track.ts_ns)
    out = np.zeros(max(n - 1, 0), dtype=bool)
    if n < 2:
        return out
    fast = np.flatnonzero(
        speed_flags(track.codes, track.ts_ns, track.lat, track.lon, max_speed_kmh=max_speed_kmh)[1:]
    )
    if len(fast):
        dist = haversine_m(
            track.lat[fast], track.lon[fast], track.lat[fast + 1], track.lon[fast + 1]
        )
        out[fast[dist > min_jump_m]] = True
    return out


def _pair_anomalous(track: TrackArrays, i: int, j: int, th: Thresholds) -> bool:
    """Whether the step from fix ``i`` straight to fix ``j`` (same vehicle) is anomalous."""
    return bool(_anomalous_steps(_take(track, np.asarray([i, j], dtype=np.int64)), th)[0])


def _returns(track: TrackArrays, s: int, e: int, th: Thresholds) -> bool:
    """Tell whether fixes ``s … e`` return: two steps or more and ``s → e`` plausible."""
    return e - s >= 2 and not _pair_anomalous(track, s, e, th)


def _pairs(track: TrackArrays, s: int, e2: int, th: Thresholds) -> bool:
    """Tell whether a jump at ``s`` and a later run ending at ``e2`` are one excursion."""
    in_time = int(track.ts_ns[e2] - track.ts_ns[s]) <= round(th[2] * NS)
    return in_time and not _pair_anomalous(track, s, e2, th)


def _copy_state(state: Mapping[str, Any]) -> dict[str, Any]:
    pending = state.get("pending")
    return {
        "last": state["last"],
        "run": list(state.get("run") or []),
        "pending": (
            None
            if pending is None
            else {"run": list(pending["run"]), "tail": list(pending["tail"])}
        ),
        "ready": [list(f) for f in state.get("ready") or []],
    }


def _close_run(state: dict[str, Any], run: list[dict[str, Any]], th: Thresholds) -> None:
    """Settle a run that just ended (at ``state['last']``) and the pending run."""
    pending = state["pending"]
    if pending is not None:
        # The tail holds every fix after the pending run up to this run's last fix.
        group = [*pending["run"], *pending["tail"]]
        track = fix_arrays(group)
        if _pairs(track, 0, len(group) - 1, th):
            state["ready"].append(group)
            state["pending"] = None
            return
        state["ready"].append(pending["run"])
        state["pending"] = None
    track = fix_arrays(run)
    if _returns(track, 0, len(run) - 1, th):
        state["ready"].append(run)
    else:
        state["pending"] = {"run": run, "tail": []}


def _pop_ready(
    state: dict[str, Any], th: Thresholds
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if not state["ready"]:
        return state, None
    fixes = state["ready"].pop(0)
    return state, _record(fix_arrays(fixes), th)


def _take(track: TrackArrays, idx: NDArray[np.int64]) -> TrackArrays:
    """Return the fixes ``idx`` (all of one vehicle) as a one-vehicle track."""
    return TrackArrays(
        vehicles=np.asarray([track.vehicles[track.codes[idx[0]]]], dtype=object),
        codes=np.zeros(len(idx), dtype=np.int64),
        ts_ns=track.ts_ns[idx],
        lat=track.lat[idx],
        lon=track.lon[idx],
        meter=track.meter[idx],
        row=track.row[idx],
        speed_flag=track.speed_flag[idx],
    )


def _step(track: TrackArrays, i: int, j: int) -> tuple[dict[str, Any], float, float]:
    dist = float(haversine_m(track.lat[i], track.lon[i], track.lat[j], track.lon[j]))
    dt_s = float(track.ts_ns[j] - track.ts_ns[i]) / NS
    speed = dist / dt_s * 3.6
    step = {
        "from_row": None if track.row[i] < 0 else int(track.row[i]),
        "to_row": None if track.row[j] < 0 else int(track.row[j]),
        "distance_m": round(dist, 1),
        "dt_s": dt_s,
        "implied_speed_kmh": round(speed, 1),
    }
    return step, dist, speed


def _record(group: TrackArrays, th: Thresholds) -> dict[str, Any]:
    """Build the finding of one event: fixes ``f0 … fm`` of one vehicle."""
    max_speed_kmh, min_jump_m, max_excursion_s = th
    m = len(group.ts_ns) - 1
    anomalous = _anomalous_steps(group, th)
    steps, speeds, dists = [], [], []
    for k in range(m):
        step, dist, speed = _step(group, k, k + 1)
        step["anomalous"] = bool(anomalous[k])
        steps.append(step)
        speeds.append(speed)
        dists.append(dist)
    counted = [k for k in range(m) if anomalous[k]] or list(range(m))
    top = max(counted, key=lambda k: speeds[k])
    peak, peak_speed = steps[top], speeds[top]
    peak_dist = max(dists[k] for k in counted)
    returns = _returns(group, 0, m, th)
    back = _step(group, 0, m)[0] if returns else None
    conf = 0.5 + 0.25 * (1.0 - max_speed_kmh / peak_speed) + 0.2 * (1.0 - min_jump_m / peak_dist)
    fixes = [fix_evidence(group, k) for k in range(m + 1)]
    details: dict[str, Any] = {
        "pattern": "outlier" if returns else "jump",
        "outlier_fixes": fixes[1:m] if returns else [],
        "distance_m": peak["distance_m"],
        "dt_s": peak["dt_s"],
        "implied_speed_kmh": peak["implied_speed_kmh"],
        "n_steps": m,
        "n_anomalous_steps": int(anomalous.sum()),
        "steps": steps,
        "return_step": back,
        "fixes": fixes,
        "thresholds": {
            "max_speed_kmh": float(max_speed_kmh),
            "min_jump_m": float(min_jump_m),
            "max_excursion_s": float(max_excursion_s),
        },
    }
    return finding_record(
        kind=KIND,
        vehicle_id=str(group.vehicles[0]),
        stand_id=None,
        started_ns=int(group.ts_ns[0]),
        ended_ns=int(group.ts_ns[m]),
        confidence=float(min(MAX_CONFIDENCE, max(0.0, conf))),
        details=details,
        geometry=shapely.LineString(np.column_stack([group.lon, group.lat])),
    )
