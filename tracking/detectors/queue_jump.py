"""Queue jump: leaving a stand with a passenger ahead of a waiting vehicle (PB art. 24 II).

Pinto Bandeira's Lei 169/2015 forbids, as a *média* infraction, to "desobedecer a fila no ponto
de táxi" (art. 24 II). Built on ``stands/visits.py`` (visits encode presence: a vehicle away for
longer than the visit's exit grace, or silent, has ended its visit). Definitions (each is shown
in the evidence):

boarding instant
    ``boarded_at`` of our boarded visit: the fix where the meter started (PRODUCT.md: the
    boarding's time is the departure from the stand with the passenger).
vehicle ahead
    Another vehicle's visit to the same stand that

    - arrived more than ``tolerance_s`` before ours (GPS sampling cannot tell closer arrivals
      apart),
    - is still in progress ``tolerance_s`` after our boarding instant (last fix inside at or
      after it),
    - had not boarded by then (no boarding, or one more than ``tolerance_s`` after ours: two
      passengers taking two taxis at once is no jump),
    - had waited at least ``min_wait_ahead_s`` before our boarding instant, and
    - showed the meter ``free`` (Livre) at its last fix at or before our boarding instant: a
      vehicle ``off`` (Desligado), ``occupied`` or of unknown meter is not waiting for a
      passenger.
excused boardings
    A Táxi Acessível (fleet ``accessible`` True) may be chosen out of order by a person with
    disability (priority, Porto Alegre art. 28; Pinto Bandeira art. 23 II): its boardings are
    not judged.
finding
    One per boarding that left at least one vehicle ahead; ``started_at`` our arrival,
    ``ended_at`` our departure with the passenger (the later of the last fix inside and the
    meter start); geometry the boarding fix; ``details.ahead`` lists each vehicle passed.
confidence
    ``0.55 + 0.1 min(n_ahead - 1, 3) + 0.25 min(1, (wait_s - min_wait_ahead_s) / (2
    max(min_wait_ahead_s, 60)))`` with ``wait_s`` the longest wait among the vehicles passed,
    clipped to [0.05, 0.95].
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from tracking.detectors._errors import DetectorInputError
from tracking.detectors._evidence import (
    NS,
    check_threshold,
    clip_confidence,
    fix_record,
    iso_utc,
    last_at_or_before,
    ping_rows,
    require_columns,
    sorted_positions,
    sorted_view,
    utc_ns,
)
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.unlicensed_stand_use import fleet_facts

KIND = "queue_jump"
DEFAULT_MIN_WAIT_AHEAD_S = 120.0
DEFAULT_TOLERANCE_S = 30.0
BUCKET_S = 3600  # interval-stabbing buckets (any value works; this keeps pairs few)
_VISIT_NEEDED = (
    "vehicle_id",
    "stand_id",
    "arrived_at",
    "departed_at",
    "queue_position",
    "boarded",
    "first_ping",
    "last_ping",
    "boarded_at",
    "boarding_ping",
)


def detect_queue_jump(
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    min_wait_ahead_s: float = DEFAULT_MIN_WAIT_AHEAD_S,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> gpd.GeoDataFrame:
    """Find boardings that left ahead of a vehicle waiting longer at the same stand.

    Serves Pinto Bandeira art. 24 II (média); see the module docstring for the definitions and
    the confidence.

    Parameters
    ----------
    visits : pandas.DataFrame
        From :func:`stands.visits.detect_visits` with its helper columns.
    pings : pandas.DataFrame
        The pings the visits came from (positions ``first_ping``/``last_ping``/
        ``boarding_ping`` refer to it), with ``meter``; without ``meter`` nothing is found.
    fleet : pandas.DataFrame, optional
        Fleet frame; Táxis Acessíveis (``accessible`` True) are not judged.
    min_wait_ahead_s : float, default 120
        Shortest wait of the vehicle passed, from its arrival to our boarding.
    tolerance_s : float, default 30
        GPS sampling tolerance on arrivals, presence and the other vehicle's boarding.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``queue_jump``.

    Raises
    ------
    DetectorInputError
        If visits or pings lack columns or positions point outside the pings.
    DetectorThresholdError
        If a threshold is negative.
    """
    check_threshold("min_wait_ahead_s", min_wait_ahead_s, unit="segundos")
    check_threshold("tolerance_s", tolerance_s, unit="segundos")
    require_columns(visits, _VISIT_NEEDED, what="as visitas (stands.visits.detect_visits)")
    require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
    facts = fleet_facts(fleet)
    if len(visits) == 0 or "meter" not in pings.columns:
        return empty_findings()
    n = len(pings)
    first = visits["first_ping"].to_numpy(dtype=np.int64)
    last = visits["last_ping"].to_numpy(dtype=np.int64)
    bping = pd.to_numeric(visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64)
    if first.min() < 0 or max(first.max(), last.max(), bping.max()) >= n:
        msg = "as visitas apontam para pings inexistentes; passe os pings de onde vieram"
        raise DetectorInputError(msg)
    boarded = visits["boarded"].astype("boolean").fillna(False).to_numpy(dtype=bool) & (bping >= 0)
    if not boarded.any():
        return empty_findings()

    vehicle = visits["vehicle_id"].astype("str").to_numpy(dtype=object)
    stand_code, stand_ids = pd.factorize(visits["stand_id"].astype("str"))
    stand_code = stand_code.astype(np.int64)
    arrived = utc_ns(visits["arrived_at"], column="arrived_at", what="as visitas")
    departed = utc_ns(visits["departed_at"], column="departed_at", what="as visitas")
    b_ns = utc_ns(visits["boarded_at"], column="boarded_at", what="as visitas", allow_null=True)
    tol = round(tolerance_s * NS)

    # Queries: boarded visits (not accessible), stabbing at the boarding instant.
    q = np.flatnonzero(boarded)
    if facts:
        q = q[np.array([facts.get(v, {}).get("accessible") is not True for v in vehicle[q]])]
    if not len(q):
        return empty_findings()
    bucket_ns = BUCKET_S * NS
    q_key = stand_code[q] * np.int64(1 << 40) + b_ns[q] // bucket_ns
    # Intervals: every visit, replicated over the buckets it spans.
    b0, b1 = arrived // bucket_ns, departed // bucket_ns
    reps = (b1 - b0 + 1).astype(np.int64)
    j = np.repeat(np.arange(len(arrived), dtype=np.int64), reps)
    offset = np.arange(len(j), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    j_key = stand_code[j] * np.int64(1 << 40) + b0[j] + offset
    pairs = pd.DataFrame({"key": q_key, "i": q}).merge(
        pd.DataFrame({"key": j_key, "j": j}), on="key"
    )
    i = pairs["i"].to_numpy(dtype=np.int64)
    j = pairs["j"].to_numpy(dtype=np.int64)
    b = b_ns[i]
    ok = (
        (vehicle[i] != vehicle[j])
        & (arrived[j] + tol < arrived[i])
        & (departed[j] >= b + tol)
        & (~boarded[j] | (b_ns[j] > b + tol))
        & (b - arrived[j] >= round(min_wait_ahead_s * NS))
    )
    i, j, b = i[ok], j[ok], b[ok]
    if not len(i):
        return empty_findings()

    # Meter of the vehicle ahead at its last fix at or before our boarding instant.
    order, _, ns_sorted = sorted_view(pings)
    lo = sorted_positions(order, first[j])
    hi = sorted_positions(order, last[j])
    at_sorted = last_at_or_before(ns_sorted, lo, hi, b)
    at = np.where(
        at_sorted >= 0, at_sorted if order is None else order[np.maximum(at_sorted, 0)], -1
    )
    meter = pings["meter"].to_numpy(dtype=object)
    free = (at >= 0) & (pd.Series(meter[np.maximum(at, 0)]).to_numpy(dtype=object) == "free")
    i, j, at = i[free], j[free], at[free]
    if not len(i):
        return empty_findings()

    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    lat = pings["lat"].to_numpy(dtype=np.float64)
    lon = pings["lon"].to_numpy(dtype=np.float64)
    rows = ping_rows(pings)
    queue = visits["queue_position"].to_numpy(dtype=np.int64)
    by = np.lexsort((arrived[j], i))
    i, j, at = i[by], j[by], at[by]
    starts = np.flatnonzero(np.concatenate(([True], i[1:] != i[:-1])))
    ends = np.append(starts[1:], len(i))
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        me = int(i[s])
        bp = int(bping[me])
        b_me = int(b_ns[me])
        ahead = []
        fixes = [
            fix_record(int(ns[first[me]]), lat[first[me]], lon[first[me]], int(rows[first[me]])),
            fix_record(int(ns[bp]), lat[bp], lon[bp], int(rows[bp])),
        ]
        waits = []
        for k in range(s, e):
            other, p = int(j[k]), int(at[k])
            wait_s = (b_me - int(arrived[other])) / NS
            waits.append(wait_s)
            fix = fix_record(int(ns[p]), lat[p], lon[p], int(rows[p]))
            fixes.append(fix)
            ahead.append(
                {
                    "vehicle_id": vehicle[other],
                    "arrived_at": iso_utc(arrived[other]),
                    "departed_at": iso_utc(departed[other]),
                    "boarded_at": iso_utc(b_ns[other]) if boarded[other] else None,
                    "queue_position": int(queue[other]),
                    "wait_s": float(wait_s),
                    "meter_at_our_boarding": "free",
                    "fix_at_our_boarding": fix,
                }
            )
        unique: dict[tuple[Any, ...], dict[str, Any]] = {}
        for fx in fixes:
            unique.setdefault((fx["timestamp"], fx["row"], fx["lat"], fx["lon"]), fx)
        fixes = list(unique.values())
        excess = (max(waits) - min_wait_ahead_s) / (2.0 * max(min_wait_ahead_s, 60.0))
        conf = 0.55 + 0.1 * min(len(ahead) - 1, 3) + 0.25 * min(1.0, excess)
        details = {
            "fixes": fixes,
            "arrived_at": iso_utc(arrived[me]),
            "departed_at": iso_utc(departed[me]),
            "boarded_at": iso_utc(b_me),
            "queue_position": int(queue[me]),
            "n_ahead": len(ahead),
            "max_wait_ahead_s": float(max(waits)),
            "ahead": ahead,
            "thresholds": {
                "min_wait_ahead_s": float(min_wait_ahead_s),
                "tolerance_s": float(tolerance_s),
            },
        }
        out.append(
            {
                "kind": KIND,
                "vehicle_id": vehicle[me],
                "stand_id": str(stand_ids[stand_code[me]]),
                "started_at": pd.Timestamp(int(arrived[me]), unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(max(int(departed[me]), b_me), unit="ns", tz="UTC"),
                "confidence": clip_confidence(conf),
                "details": details,
            }
        )
        geoms.append(shapely.Point(lon[bp], lat[bp]))
    return make_findings(pd.DataFrame(out), geoms)
