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
finding
    A maximal run of consecutive anomalous steps of one vehicle (fixes ``f0 … fm``), one
    finding. ``pattern = "outlier"`` when the run has at least two steps and the track returns:
    the step ``f0 → fm`` is not anomalous, so the inner fixes are outliers (``A → B → A'``
    reports ``B``, in ``outlier_fixes``). Otherwise ``pattern = "jump"``: the position moved
    impossibly and did not come back (or the data ends).
confidence
    ``0.5 + 0.25·(1 − max_speed_kmh/peak_speed_kmh) + 0.2·(1 − min_jump_m/peak_distance_m)``
    over the run's steps (peaks of speed and of distance), at most 0.95: it grows with how far
    past both thresholds the worst step is.

Geometry: the LineString through the run's fixes; ``started_at``/``ended_at``: times of ``f0``
and ``fm``.

Live: :func:`update_gps_anomaly` keeps the vehicle's last fix and the open run; a run becomes
certain, and is emitted, when a non-anomalous step closes it. :func:`close_gps_anomaly` emits an
open run at the end of a stream (the batch detector closes runs at the end of the data).
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
from tracking.validate import speed_flags

KIND = "gps_anomaly"
DEFAULT_MAX_SPEED_KMH = 250.0
"""Implied speed above which a step is impossible (km/h); POA art. 59 VI / 58 IX. Same default
as the ingest ``speed_flag``."""
DEFAULT_MIN_JUMP_M = 500.0
"""Shortest anomalous step (m), so that jitter between fixes close in time does not accuse."""
MAX_CONFIDENCE = 0.95


def detect_gps_anomaly(
    pings: pd.DataFrame,
    *,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
) -> gpd.GeoDataFrame:
    """Find impossible jumps of reported positions, one finding per run of anomalous steps.

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated fixes (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``; optional ``meter``, ``row``, ``speed_flag``. Sorted here if needed.
    max_speed_kmh : float, default 250
        Implied speed above which a step is impossible (POA art. 59 VI, art. 58 IX).
    min_jump_m : float, default 500
        A step must also be longer than this to be anomalous.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings of kind ``gps_anomaly`` (see the module docstring).

    Raises
    ------
    DetectorInputError
        If the pings break their contract (missing columns, naive times, unknown meter).
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
    track = track_arrays(pings)
    anomalous = _anomalous_steps(track, max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
    steps = np.flatnonzero(anomalous)
    if not len(steps):
        return findings_from_records([])
    # Runs of consecutive anomalous steps (steps of one vehicle only: others are never anomalous).
    new_run = np.ones(len(steps), dtype=bool)
    new_run[1:] = steps[1:] != steps[:-1] + 1
    first_step = steps[new_run]
    last_step = steps[np.append(np.flatnonzero(new_run)[1:] - 1, len(steps) - 1)]
    records = []
    for s, e in zip(first_step.tolist(), last_step.tolist(), strict=True):
        run = _take(track, np.arange(s, e + 2, dtype=np.int64))
        records.append(_run_record(run, max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m))
    return findings_from_records(records)


def update_gps_anomaly(
    state: Mapping[str, Any] | None,
    ping: Mapping[str, Any],
    *,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Live step for one vehicle: the new state and the anomaly the ping closes, if any.

    Parameters
    ----------
    state : mapping or None
        This vehicle's state from the previous call (plain data: its last fix and the fixes of
        the open run of anomalous steps), None at first.
    ping : mapping
        One fix with the pings-frame keys (``vehicle_id``, ``timestamp`` tz-aware, ``lat``,
        ``lon``; optional ``meter``, ``row``, ``speed_flag``).
    max_speed_kmh, min_jump_m : float
        As in :func:`detect_gps_anomaly`.

    Returns
    -------
    tuple
        ``(state, finding)``: the new state (a new dict) and a finding record (the
        findings-frame columns as a dict, ``finding_id`` included) or None. A fix not later than
        the state's last fix is ignored (state unchanged, no finding).

    Raises
    ------
    DetectorInputError
        If the ping lacks a key or has a naive time, or belongs to another vehicle.
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
    fix = live_fix(ping)
    if state is None:
        return {"last": fix, "run": []}, None
    last = state["last"]
    if last["vehicle_id"] != fix["vehicle_id"]:
        msg = (
            f"estado do veículo {last['vehicle_id']!r} recebeu um ping de {fix['vehicle_id']!r}; "
            "mantenha um estado por veículo"
        )
        raise DetectorInputError(msg)
    if fix["ts_ns"] <= last["ts_ns"]:
        return {"last": last, "run": list(state["run"])}, None
    pair = fix_arrays([last, fix])
    step_anomalous = bool(
        _anomalous_steps(pair, max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)[0]
    )
    run = list(state["run"])
    if step_anomalous:
        return {"last": fix, "run": [*(run or [last]), fix]}, None
    finding = (
        _run_record(fix_arrays(run), max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
        if run
        else None
    )
    return {"last": fix, "run": []}, finding


def close_gps_anomaly(
    state: Mapping[str, Any] | None,
    *,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """End of a vehicle's stream: emit its open run of anomalous steps, if any.

    Parameters
    ----------
    state : mapping or None
        The vehicle's state.
    max_speed_kmh, min_jump_m : float
        As in :func:`detect_gps_anomaly`.

    Returns
    -------
    tuple
        ``(state, finding)``: the state with no open run, and the finding record or None.
    """
    check_positive(max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
    if state is None:
        return None, None
    run = list(state["run"])
    finding = (
        _run_record(fix_arrays(run), max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)
        if run
        else None
    )
    return {"last": state["last"], "run": []}, finding


# --- kernel ----------------------------------------------------------------------------------


def _anomalous_steps(
    track: TrackArrays, *, max_speed_kmh: float, min_jump_m: float
) -> NDArray[np.bool_]:
    """Boolean per step ``k`` (fix ``k`` → ``k + 1``): too fast and longer than ``min_jump_m``."""
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


def _step(track: TrackArrays, i: int, j: int) -> dict[str, Any]:
    dist = float(haversine_m(track.lat[i], track.lon[i], track.lat[j], track.lon[j]))
    dt_s = float(track.ts_ns[j] - track.ts_ns[i]) / NS
    return {
        "from_row": None if track.row[i] < 0 else int(track.row[i]),
        "to_row": None if track.row[j] < 0 else int(track.row[j]),
        "distance_m": round(dist, 1),
        "dt_s": dt_s,
        "implied_speed_kmh": round(dist / dt_s * 3.6, 1),
        "_distance_m": dist,
        "_speed_kmh": dist / dt_s * 3.6,
    }


def _run_record(run: TrackArrays, *, max_speed_kmh: float, min_jump_m: float) -> dict[str, Any]:
    """Build the finding of one run of anomalous steps (fixes ``f0 … fm`` of one vehicle)."""
    m = len(run.ts_ns) - 1
    steps = [_step(run, k, k + 1) for k in range(m)]
    peak_speed = max(s["_speed_kmh"] for s in steps)
    peak_dist = max(s["_distance_m"] for s in steps)
    peak = max(steps, key=lambda s: s["_speed_kmh"])
    returns = False
    back: dict[str, Any] | None = None
    if m >= 2:
        ends = _take(run, np.asarray([0, m], dtype=np.int64))
        returns = not bool(
            _anomalous_steps(ends, max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m)[0]
        )
        back = _step(run, 0, m)
    for s in [*steps, *([back] if back else [])]:
        s.pop("_distance_m")
        s.pop("_speed_kmh")
    conf = 0.5 + 0.25 * (1.0 - max_speed_kmh / peak_speed) + 0.2 * (1.0 - min_jump_m / peak_dist)
    fixes = [fix_evidence(run, k) for k in range(m + 1)]
    details: dict[str, Any] = {
        "pattern": "outlier" if returns else "jump",
        "outlier_fixes": fixes[1:m] if returns else [],
        "distance_m": peak["distance_m"],
        "dt_s": peak["dt_s"],
        "implied_speed_kmh": peak["implied_speed_kmh"],
        "n_steps": m,
        "steps": steps,
        "return_step": back,
        "fixes": fixes,
        "thresholds": {"max_speed_kmh": float(max_speed_kmh), "min_jump_m": float(min_jump_m)},
    }
    geometry = shapely.LineString(np.column_stack([run.lon, run.lat]))
    return finding_record(
        kind=KIND,
        vehicle_id=str(run.vehicles[0]),
        stand_id=None,
        started_ns=int(run.ts_ns[0]),
        ended_ns=int(run.ts_ns[m]),
        confidence=float(min(MAX_CONFIDENCE, max(0.0, conf))),
        details=details,
        geometry=geometry,
    )
