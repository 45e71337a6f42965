"""Tracking gaps: silences of the tracker while the vehicle was in service.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 58 IX (grave): "deixar
disponibilizar de forma plena, sem intervenção proposital humana, o Subsistema de Rastreamento
da Frota de Táxi"; and art. 59 VI (gravíssima): "desligar ou por qualquer forma intervir no
Sistema de Monitoramento em Tempo Real da Frota de Táxi". The detector states the facts (how long,
how far, the meter on each side); the rulebook chooses the provision.

Definitions (each one appears in the finding's ``details``):

gap
    Two consecutive fixes of one vehicle more than ``max_gap_s`` apart (strictly) beyond the
    tracker's own cadence: ``gap_s − cadence_s > max_gap_s``, where ``cadence_s`` is the
    shortest of the :data:`CADENCE_STEPS` steps before the gap's first fix (at most
    ``max_gap_s``, which a vehicle's first fix, of unknown cadence, is given). A tracker set to
    report every 300 s (Traccar Client's default) or every 60 s is silent between reports by
    design: its 352 s between two reports is one late report, not 5 minutes without tracking.
    Live, those fixes before the gap are kept as context.
displacement_m
    Great-circle distance between the fix before and the fix after the gap;
    ``implied_speed_kmh = displacement_m / gap_s · 3.6``.
in service
    The meter was ``occupied`` at the fix before the gap and either (a) ``occupied`` at the fix
    after it (``rule = "occupied_both_sides"``), or (b) the displacement is at least
    ``parked_radius_m`` (``rule = "occupied_before_and_moved"``: the passenger was aboard when
    the tracker fell silent and the vehicle moved while silent). Only gaps in service are
    findings. In particular a gap while parked and free (meter ``free`` on both sides,
    displacement below ``parked_radius_m``) is not a finding, nor any gap whose fix before has
    the meter ``free``, ``off`` or unknown: without the meter a silence cannot be told from the
    end of a shift.
still
    ``implied_speed_kmh`` below ``still_speed_kmh``: the car covered, in a straight line, less
    than a walk across the silence, so it stood most of it. An underground car park at a
    drop-off, a wait with the meter running (art. 26), a tracker that reports only when it moves
    (a distance filter) and a ride's end followed by a night parked all look like this; none of
    them shows the tracking hiding a ride. The finding is kept with ``still = true`` for the
    rulebook to list for review.
after the ride
    The meter is not ``occupied`` after a silence longer than ``max_ride_s``: the passenger
    aboard at its start left at an unknown moment, most likely long before its end, and the
    silence is the shift's end and the car's night (``after_ride = true``, for review too,
    however far the car went).
trip records
    When the pings carry ``trip_ref`` (trip-record datasets such as Porto's, where every fix is
    ``occupied``), two fixes of different records are two meter cycles — the passenger left
    during the silence — so the silence between them is not a gap. A fix with no ``trip_ref``
    does not break the rule's other conditions.
confidence
    ``0.5 + 0.3·(1 − max_gap_s/gap_s) + 0.15·min(1, displacement_m / (10·parked_radius_m))``,
    times 0.75 when either fix is speed-flagged at ingest (its position is doubtful). It grows
    with the length of the gap and with the displacement (moving while silent is stronger
    evidence); at most 0.95. A ``still`` or ``after_ride`` finding's is halved
    (:data:`REVIEW_CONFIDENCE_FACTOR`): a long night is no stronger evidence, and under 0.5 no
    rulebook proposes it even without a rule of its own for the sub-case.

Geometry: the LineString from the fix before to the fix after (a Point when both are at the
same position). ``started_at``/``ended_at`` are the times of those two fixes.

Live (:data:`KERNEL`): the vehicle's last fix is kept; a gap becomes certain, and is emitted,
when the fix after it arrives.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.crs import haversine_m
from tracking import frames as fr
from tracking.detectors._evidence import REVIEW_CONFIDENCE_FACTOR
from tracking.detectors._track_kernels import (
    METER_NAMES,
    METER_OCCUPIED,
    NS,
    TrackArrays,
    check_positive,
    finding_record,
    findings_from_records,
    fix_evidence,
    track_arrays,
)
from tracking.detectors.kernel import TrackKernel

KIND = "tracking_gap"
DEFAULT_MAX_GAP_S = 300.0
"""Longest silence between two fixes in service (s); POA art. 58 IX / 59 VI."""
DEFAULT_PARKED_RADIUS_M = 100.0
"""Displacement across a gap below which the vehicle did not move (m)."""
DEFAULT_STILL_SPEED_KMH = 5.0
"""Straight-line speed across a gap below which the car stood most of it (km/h): a walk."""
DEFAULT_MAX_RIDE_S = 7200.0
"""Longest ride a silence ending with the meter not occupied is read as part of (s)."""
CADENCE_STEPS = 3
"""Steps before a gap whose shortest is the tracker's cadence (one step before may be a pause)."""
FLAGGED_FACTOR = 0.75
MAX_CONFIDENCE = 0.95


def detect_tracking_gap(
    pings: pd.DataFrame,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    parked_radius_m: float = DEFAULT_PARKED_RADIUS_M,
    still_speed_kmh: float = DEFAULT_STILL_SPEED_KMH,
    max_ride_s: float = DEFAULT_MAX_RIDE_S,
) -> gpd.GeoDataFrame:
    """Find silences of the tracker while the vehicle was in service.

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated fixes (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``, ``meter``; optional ``row``, ``speed_flag``. Sorted here if needed.
    max_gap_s : float, default 300
        A silence longer than this (strictly) is a gap (POA art. 58 IX, art. 59 VI).
    parked_radius_m : float, default 100
        Displacement across the gap from which the vehicle moved (see the module docstring).
    still_speed_kmh : float, default 5
        Straight-line speed across the gap below which the finding is ``still``.
    max_ride_s : float, default 7200
        Silence ending with the meter not occupied beyond which the finding is ``after_ride``.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings (``tracking.detectors.findings``) of kind ``tracking_gap``, one per gap.

    Raises
    ------
    DetectorInputError
        If the pings break their contract (missing columns, naive times, unknown meter).
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(
        max_gap_s=max_gap_s,
        parked_radius_m=parked_radius_m,
        still_speed_kmh=still_speed_kmh,
        max_ride_s=max_ride_s,
    )
    track = track_arrays(pings)
    n = len(track.ts_ns)
    if n < 2:
        return findings_from_records([])
    same = track.codes[1:] == track.codes[:-1]
    dt_ns = np.diff(track.ts_ns)
    cand = np.flatnonzero(same & (dt_ns > round(max_gap_s * NS)))  # the cadence: _gap_kernel
    cand = cand[track.meter[cand] == METER_OCCUPIED]
    if not len(cand):
        return findings_from_records([])
    found, _, _, _ = _gap_kernel(track, cand, max_gap_s=max_gap_s, parked_radius_m=parked_radius_m)
    thresholds = {
        "max_gap_s": float(max_gap_s),
        "parked_radius_m": float(parked_radius_m),
        "still_speed_kmh": float(still_speed_kmh),
        "max_ride_s": float(max_ride_s),
    }
    records = [_gap_record(track, int(i), thresholds) for i in cand[found]]
    return findings_from_records(records)


def open_from(pings: pd.DataFrame, **_: Any) -> dict[str, int]:
    """Each vehicle's last fix: a later fix can still end a gap that starts there."""
    last = pings.groupby(fr.VEHICLE_ID, sort=False)[fr.TIMESTAMP].max()
    ns = last.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return dict(zip(map(str, last.index), map(int, ns), strict=True))


KERNEL = TrackKernel(KIND, detect_tracking_gap, open_from, context_fixes=CADENCE_STEPS)
"""The rule as a kernel: batch and live (``tracking.detectors.kernel.advance``)."""


# --- kernel ----------------------------------------------------------------------------------


def _cadence_s(track: TrackArrays, i: NDArray[np.int64], max_gap_s: float) -> NDArray[np.float64]:
    """Return the tracker's cadence before fix ``i`` (s), at most ``max_gap_s``.

    The shortest of its last :data:`CADENCE_STEPS` steps; ``max_gap_s`` without a step before
    (a cadence unknown is given the most a cadence may be).
    """
    out: NDArray[np.float64] = np.full(len(i), np.inf)
    for k in range(1, CADENCE_STEPS + 1):
        a = np.maximum(i - k, 0)
        known = (i - k >= 0) & (track.codes[a] == track.codes[i])
        step = (track.ts_ns[a + 1] - track.ts_ns[a]).astype(np.float64) / NS
        out = np.where(known, np.minimum(out, step), out)
    return np.asarray(np.minimum(out, max_gap_s), dtype=np.float64)


def _gap_kernel(
    track: TrackArrays, i: NDArray[np.int64], *, max_gap_s: float, parked_radius_m: float
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """For gaps from fix ``i`` to ``i + 1``: (in service, gap_s, displacement_m, confidence)."""
    j = i + 1
    dt_ns = track.ts_ns[j] - track.ts_ns[i]
    gap_s = dt_ns.astype(np.float64) / NS
    disp_m = haversine_m(track.lat[i], track.lon[i], track.lat[j], track.lon[j])
    occupied_before = track.meter[i] == METER_OCCUPIED
    occupied_after = track.meter[j] == METER_OCCUPIED
    moved = disp_m >= parked_radius_m
    beyond = gap_s - _cadence_s(track, i, max_gap_s) > max_gap_s
    found = (dt_ns > round(max_gap_s * NS)) & beyond & occupied_before & (occupied_after | moved)
    if track.trip_ref is not None:  # a new trip record is a new meter cycle: no gap
        a, b = track.trip_ref[i], track.trip_ref[j]
        known = np.asarray(pd.notna(a) & pd.notna(b), dtype=bool)
        found &= ~(known & np.asarray(a != b, dtype=bool))
    conf = (
        0.5
        + 0.3 * (1.0 - max_gap_s / gap_s)
        + 0.15 * np.minimum(1.0, disp_m / (10.0 * parked_radius_m))
    )
    flagged = track.speed_flag[i] | track.speed_flag[j]
    conf = np.where(flagged, conf * FLAGGED_FACTOR, conf)
    return found, gap_s, disp_m, np.clip(conf, 0.0, MAX_CONFIDENCE)


def _gap_record(track: TrackArrays, i: int, thresholds: dict[str, float]) -> dict[str, Any]:
    idx = np.asarray([i], dtype=np.int64)
    _, gap_s, disp_m, conf = _gap_kernel(
        track,
        idx,
        max_gap_s=thresholds["max_gap_s"],
        parked_radius_m=thresholds["parked_radius_m"],
    )
    j = i + 1
    meter_after = int(track.meter[j])
    gap = float(gap_s[0])
    disp = float(disp_m[0])
    speed_kmh = disp / gap * 3.6
    still = speed_kmh < thresholds["still_speed_kmh"]
    after_ride = meter_after != METER_OCCUPIED and gap > thresholds["max_ride_s"]
    confidence = float(conf[0]) * (REVIEW_CONFIDENCE_FACTOR if still or after_ride else 1.0)
    details: dict[str, Any] = {
        "gap_s": gap,
        "cadence_s": float(_cadence_s(track, idx, thresholds["max_gap_s"])[0]),
        "displacement_m": round(disp, 1),
        "implied_speed_kmh": round(speed_kmh, 1),
        "meter_before": METER_NAMES[int(track.meter[i])],
        "meter_after": METER_NAMES[meter_after],
        "moved": bool(disp >= thresholds["parked_radius_m"]),
        "still": bool(still),
        "after_ride": bool(after_ride),
        "rule": (
            "occupied_both_sides" if meter_after == METER_OCCUPIED else "occupied_before_and_moved"
        ),
        "fixes": [fix_evidence(track, i), fix_evidence(track, j)],
        "thresholds": dict(thresholds),
    }
    a = (float(track.lon[i]), float(track.lat[i]))
    b = (float(track.lon[j]), float(track.lat[j]))
    geometry = shapely.Point(a) if a == b else shapely.LineString([a, b])
    return finding_record(
        kind=KIND,
        vehicle_id=str(track.vehicles[track.codes[i]]),
        stand_id=None,
        started_ns=int(track.ts_ns[i]),
        ended_ns=int(track.ts_ns[j]),
        confidence=confidence,
        details=details,
        geometry=geometry,
    )
