"""Queue jump: leaving a stand with a passenger ahead of a waiting vehicle (PB art. 24 II).

Pinto Bandeira's Lei 169/2015 forbids, as a *média* infraction, to "desobedecer a fila no ponto
de táxi" (art. 24 II). Built on ``stands/visits.py`` (visits encode presence: a vehicle away for
longer than the visit's exit grace, or silent, has ended its visit). Definitions (each is shown
in the evidence):

boarding instant
    ``boarded_at`` of our boarded visit: the fix where the meter started (PRODUCT.md: the
    boarding's time is the departure from the stand with the passenger). The visit boarded
    only if the meter came on inside the stand or within ``boarding_grace_m`` of its edge, at
    most ``boarding_grace_s`` after the last fix inside (:func:`stands.visits.detect_visits`);
    the evidence shows ``boarding_lag_s``, ``boarding_distance_m`` and both thresholds.
vehicle ahead
    Another vehicle's visit to the same stand that

    - has been waiting since more than ``tolerance_s`` before our arrival, which came after
      the fix before our first fix inside (GPS sampling cannot tell closer arrivals apart).
      It waits since its arrival or, when its meter was not free (Livre) at a fix of the
      visit before our boarding, since its next fix: a driver back from a break (meter off)
      or who dropped a passenger there rejoins the queue then,
    - is still in progress ``tolerance_s`` after our boarding instant (last fix inside at or
      after it),
    - had not boarded by then (no boarding, or one whose meter came on — after the fix before
      its boarding fix — more than ``tolerance_s`` after ours: two passengers taking two
      taxis at once is no jump),
    - had waited (since then) at least ``min_wait_ahead_s`` before our boarding instant,
    - may queue there: its visit is not ``licensed`` False (an intruder without the stand's
      licence, or a Táxi Acessível that may board or drop a PcD there but not wait — Porto
      Alegre art. 46 § único — holds no place in its queue; a licence unknown, <NA>, or no
      ``licensed`` column at all, is judged), and
    - showed the meter ``free`` (Livre) at its last fix at or before our boarding instant and
      at each of its fixes up to ``tolerance_s`` after it: a vehicle ``off`` (Desligado),
      ``occupied`` or of unknown meter is not waiting for a passenger, and the fixes show the
      meter only at their instants (a driver going on a break, seen off at the next fix, may
      have switched off before our boarding).
arrival known
    A boarding is judged only when its vehicle's arrival was seen:

    - it came to the stand from away: its previous visit to the stand, if any, boarded before
      this arrival or ended more than ``min_away_s`` before it (GPS noise of 15-30 m splits
      a long wait at a small stand into several visits; the last one's arrival is not when
      the vehicle joined the queue), and
    - it was seen driving in: the fix before its first fix inside (the visit's approach,
      :mod:`stands.visits`) lay more than ``min_approach_m`` from the stand, or reported at
      least ``MOVING_KMH`` (10 km/h); a vehicle already waiting beside the stand, its fixes
      kept just outside by noise, arrived before its first fix inside.
excused boardings
    A Táxi Acessível (fleet ``accessible`` True) may be chosen out of order by a person with
    disability (priority, Porto Alegre art. 28; Pinto Bandeira art. 23 II): its boardings are
    not judged. Nor are those of a vehicle the fleet does not say is not one (no fleet, a
    vehicle it lacks — a prefixo the tracker writes otherwise, ``000123`` for ``123`` — or
    ``accessible`` blank): a missed jump rather than a priority boarding accused. Nor is a
    boarding at a stand the vehicle holds no licence for whose meter start also marks a visit
    of a stand it holds (the two overlap): it left its own queue, not this one.
finding
    One per boarding that left at least one vehicle ahead; ``started_at`` our arrival,
    ``ended_at`` our departure with the passenger (the later of the last fix inside and the
    meter start); geometry the boarding fix; ``details.ahead`` lists each vehicle passed and
    ``own_wait_s`` the accused's time from its arrival to its boarding (a stop of seconds may be
    a pickup the passenger booked, which the fixes cannot tell: the rulebooks say to check).
confidence
    ``0.55 + 0.1 min(n_ahead - 1, 3) + 0.25 min(1, (wait_s - min_wait_ahead_s) / (2
    max(min_wait_ahead_s, 60)))`` with ``wait_s`` the longest wait among the vehicles passed,
    clipped to [0.05, 0.95].
Live
    :func:`advance_queue_jump` runs :func:`detect_queue_jump` on the visits
    :func:`stands.visits.advance_visits` releases (in arrival order per stand, once every
    visit that could be ahead is released): a stand's state is its released visits still
    present at its latest arrival — the queue — with the fixes the rule reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from stands.visits import (
    DEFAULT_BOARDING_GRACE_M,
    DEFAULT_BOARDING_GRACE_S,
    DEFAULT_EXIT_GRACE_M,
    visit_records,
    visits_from_records,
)
from tracking.arrays import NS, iso_utc, iso_utc_many
from tracking.detectors._errors import DetectorInputError
from tracking.detectors._evidence import (
    approach,
    check_threshold,
    clip_confidence,
    fix_records,
    last_at_or_before,
    meter_at,
    metres_or_none,
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
DEFAULT_TOLERANCE_S = 60.0
"""Arrivals closer than this are not ordered: each is seen up to one fix late (15-30 s), and
GPS noise at a small stand's edge moves the first fix inside by as much again."""
DEFAULT_MIN_AWAY_S = 900.0
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
    "boarding_distance_m",
    "approach_m",
    "approach_kmh",
)


def _finding_row(
    *,
    vehicle_id: str,
    stand_id: str,
    arrived_ns: int,
    departed_ns: int,
    boarded_ns: int,
    queue_position: int,
    first_fix: dict[str, Any],
    boarding_fix: dict[str, Any],
    ahead: list[dict[str, Any]],
    boarding_distance_m: float | None,
    min_wait_ahead_s: float,
    tolerance_s: float,
    min_away_s: float,
    min_approach_m: float,
    boarding_grace_s: float,
    boarding_grace_m: float,
) -> tuple[dict[str, Any], Any]:
    """One finding from a boarding and the vehicles it passed, in arrival order (batch, live).

    Each vehicle passed: its ``vehicle_id``, ``arrived_ns``, ``arrived_at``, ``since_ns``,
    ``waiting_since``, ``departed_at``,
    ``boarded_at`` (:func:`iso_utc` texts, ``boarded_at`` None when it did not board),
    ``queue_position`` and ``fix`` (at our boarding).

    Returns the row (instants as epoch nanoseconds) and the boarding's ``(lon, lat)``, as
    :func:`tracking.detectors.findings.make_findings` takes them.
    """
    fixes = [first_fix, boarding_fix]
    waits = []
    passed = []
    for other in ahead:
        wait_s = (boarded_ns - other["since_ns"]) / NS
        waits.append(wait_s)
        fixes.append(other["fix"])
        passed.append(
            {
                "vehicle_id": other["vehicle_id"],
                "arrived_at": other["arrived_at"],
                "waiting_since": other["waiting_since"],
                "departed_at": other["departed_at"],
                "boarded_at": other["boarded_at"],
                "queue_position": other["queue_position"],
                "wait_s": float(wait_s),
                "meter_at_our_boarding": "free",
                "fix_at_our_boarding": other["fix"],
            }
        )
    unique: dict[tuple[Any, ...], dict[str, Any]] = {}
    for fx in fixes:
        unique.setdefault((fx["timestamp"], fx["row"], fx["lat"], fx["lon"]), fx)
    excess = (max(waits) - min_wait_ahead_s) / (2.0 * max(min_wait_ahead_s, 60.0))
    conf = 0.55 + 0.1 * min(len(passed) - 1, 3) + 0.25 * min(1.0, excess)
    details = {
        "fixes": list(unique.values()),
        "arrived_at": iso_utc(arrived_ns),
        "departed_at": iso_utc(departed_ns),
        "boarded_at": iso_utc(boarded_ns),
        "boarding_lag_s": float((boarded_ns - departed_ns) / NS),
        "own_wait_s": float((boarded_ns - arrived_ns) / NS),
        "boarding_distance_m": metres_or_none(boarding_distance_m),
        "queue_position": queue_position,
        "n_ahead": len(passed),
        "max_wait_ahead_s": float(max(waits)),
        "ahead": passed,
        "thresholds": {
            "min_wait_ahead_s": float(min_wait_ahead_s),
            "tolerance_s": float(tolerance_s),
            "min_away_s": float(min_away_s),
            "min_approach_m": float(min_approach_m),
            "boarding_grace_s": float(boarding_grace_s),
            "boarding_grace_m": float(boarding_grace_m),
        },
    }
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": arrived_ns,
        "ended_at": max(departed_ns, boarded_ns),
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, (boarding_fix["lon"], boarding_fix["lat"])


def detect_queue_jump(
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    min_wait_ahead_s: float = DEFAULT_MIN_WAIT_AHEAD_S,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    min_away_s: float = DEFAULT_MIN_AWAY_S,
    min_approach_m: float = DEFAULT_EXIT_GRACE_M,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
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
        Fleet frame; only its vehicles with ``accessible`` False are judged (None: nothing
        is).
    min_wait_ahead_s : float, default 120
        Shortest wait of the vehicle passed, from its arrival to our boarding.
    tolerance_s : float, default 60
        GPS sampling tolerance on arrivals, presence and the other vehicle's boarding.
    min_away_s : float, default 900
        Shortest time since the vehicle's previous visit to the stand (not boarded) for its
        arrival to be known.
    min_approach_m : float, default 30
        Shortest distance from the stand of the fix before the arrival, unless it reports
        ``MOVING_KMH``, for the vehicle to be seen driving in.
    boarding_grace_s, boarding_grace_m : float, default 120 and 30
        The thresholds the visits' boardings were decided with
        (:func:`stands.visits.detect_visits`), shown in the evidence.

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
    check_threshold("min_away_s", min_away_s, unit="segundos")
    check_threshold("min_approach_m", min_approach_m, unit="metros")
    check_threshold("boarding_grace_s", boarding_grace_s, unit="segundos")
    check_threshold("boarding_grace_m", boarding_grace_m, unit="metros")
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
    may_queue = (
        visits["licensed"].astype("boolean").fillna(True).to_numpy(dtype=bool)
        if "licensed" in visits.columns
        else np.ones(len(visits), dtype=bool)
    )

    vehicle = visits["vehicle_id"].astype("str").to_numpy(dtype=object)
    stand_code, stand_index = pd.factorize(visits["stand_id"].astype("str"))
    stand_ids = np.asarray(stand_index, dtype=object)  # plain str: cheap to index one by one
    stand_code = stand_code.astype(np.int64)
    arrived = utc_ns(visits["arrived_at"], column="arrived_at", what="as visitas")
    departed = utc_ns(visits["departed_at"], column="departed_at", what="as visitas")
    b_ns = utc_ns(visits["boarded_at"], column="boarded_at", what="as visitas", allow_null=True)
    tol = round(tolerance_s * NS)

    # Queries: boarded visits (not accessible), stabbing at the boarding instant.
    q = np.flatnonzero(boarded)
    q = q[np.array([facts.get(v, {}).get("accessible") is False for v in vehicle[q]])]
    q = q[~_boarded_in_own_queue(visits, vehicle, b_ns, boarded)[q]]
    left = np.where(boarded, b_ns, departed + round(min_away_s * NS) + 1)
    q = q[_came_from_away(vehicle, stand_code, arrived, left)[q]]
    q = q[approach(visits, min_approach_m=min_approach_m)[0][q]]
    if not len(q):
        return empty_findings()
    # Instants are known between two fixes: our arrival after the fix before it, the other
    # vehicle's boarding after the fix before its meter came on.
    order, codes_sorted, ns_sorted = sorted_view(pings)
    seen_from = _fix_before_ns(codes_sorted, ns_sorted, sorted_positions(order, first), arrived)
    b_from = _fix_before_ns(
        codes_sorted, ns_sorted, sorted_positions(order, np.maximum(bping, 0)), b_ns
    )
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
        & (arrived[j] + tol < seen_from[i])
        & (departed[j] >= b + tol)
        & (~boarded[j] | (b_from[j] > b + tol))
        & (b - arrived[j] >= round(min_wait_ahead_s * NS))
        & may_queue[j]
    )
    i, j, b = i[ok], j[ok], b[ok]
    if not len(i):
        return empty_findings()

    # Meter of the vehicle ahead, read once over its fixes up to tolerance_s after our boarding:
    # free from its last fix at or before our boarding on (a switch seen at the next fix may
    # have come before our boarding); waiting since its meter last turned free within the
    # visit (after a break or a drop-off).
    lo = sorted_positions(order, first[j])
    hi = sorted_positions(order, last[j])
    at_sorted = last_at_or_before(ns_sorted, lo, hi, b)
    until = np.maximum(last_at_or_before(ns_sorted, lo, hi, b + tol), at_sorted)
    counts = np.where(at_sorted >= 0, until - lo + 1, 0)
    pair = np.repeat(np.arange(len(i)), counts)
    pos = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(len(pair))
    busy = meter_at(pings, pos if order is None else order[pos]) != "free"
    late = busy & (pos >= at_sorted[pair])
    last_busy = np.full(len(i), -1, dtype=np.int64)
    np.maximum.at(last_busy, pair[busy & ~late], pos[busy & ~late])
    free = (at_sorted >= 0) & (np.bincount(pair[late], minlength=len(i)) == 0)
    since = np.where(last_busy >= 0, ns_sorted[last_busy + 1], arrived[j])
    i, j, b, since, at_sorted = i[free], j[free], b[free], since[free], at_sorted[free]
    ok = (since + tol < seen_from[i]) & (b - since >= round(min_wait_ahead_s * NS))
    i, j, since, at_sorted = i[ok], j[ok], since[ok], at_sorted[ok]
    at = at_sorted if order is None else order[at_sorted]
    if not len(i):
        return empty_findings()

    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    lat = pings["lat"].to_numpy(dtype=np.float64)
    lon = pings["lon"].to_numpy(dtype=np.float64)
    rows = ping_rows(pings)
    queue = visits["queue_position"].to_numpy(dtype=np.int64)
    distance_m = pd.to_numeric(visits["boarding_distance_m"]).to_numpy(dtype=np.float64)
    by = np.lexsort((arrived[j], i))
    i, j, at, since = i[by], j[by], at[by], since[by]
    starts = np.flatnonzero(np.concatenate(([True], i[1:] != i[:-1])))
    ends = np.append(starts[1:], len(i))
    # Plain values made at once: numpy scalars taken one by one cost most of the loop.
    b_text = iso_utc_many(b_ns[j])
    ahead_all = [
        {
            "vehicle_id": v,
            "arrived_ns": a,
            "arrived_at": a_text,
            "since_ns": w,
            "waiting_since": w_text,
            "departed_at": d_text,
            "boarded_at": bt if was_boarded else None,
            "queue_position": qp,
            "fix": fx,
        }
        for v, a, a_text, w, w_text, d_text, bt, was_boarded, qp, fx in zip(
            vehicle[j].tolist(),
            arrived[j].tolist(),
            iso_utc_many(arrived[j]),
            since.tolist(),
            iso_utc_many(since),
            iso_utc_many(departed[j]),
            b_text,
            boarded[j].tolist(),
            queue[j].tolist(),
            fix_records(ns[at], lat[at], lon[at], rows[at]),
            strict=True,
        )
    ]
    me = i[starts]
    bp = bping[me]
    first_fixes = fix_records(ns[first[me]], lat[first[me]], lon[first[me]], rows[first[me]])
    boarding_fixes = fix_records(ns[bp], lat[bp], lon[bp], rows[bp])
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for k, (s, e, m) in enumerate(zip(starts.tolist(), ends.tolist(), me.tolist(), strict=True)):
        row, geom = _finding_row(
            vehicle_id=vehicle[m],
            stand_id=str(stand_ids[stand_code[m]]),
            arrived_ns=int(arrived[m]),
            departed_ns=int(departed[m]),
            boarded_ns=int(b_ns[m]),
            queue_position=int(queue[m]),
            first_fix=first_fixes[k],
            boarding_fix=boarding_fixes[k],
            ahead=ahead_all[s:e],
            boarding_distance_m=float(distance_m[m]),
            min_wait_ahead_s=min_wait_ahead_s,
            tolerance_s=tolerance_s,
            min_away_s=min_away_s,
            min_approach_m=min_approach_m,
            boarding_grace_s=boarding_grace_s,
            boarding_grace_m=boarding_grace_m,
        )
        out.append(row)
        geoms.append(geom)
    return make_findings(pd.DataFrame(out), geoms)


def _fix_before_ns(
    codes: NDArray[np.integer],
    ns: NDArray[np.int64],
    at: NDArray[np.int64],
    default: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Time of the fix before each sorted position ``at``, of the same vehicle, or ``default``."""
    before = np.maximum(at - 1, 0)
    same = (at > 0) & (codes[before] == codes[at])
    return np.where(same, ns[before], default)


def _boarded_in_own_queue(
    visits: pd.DataFrame,
    vehicle: NDArray[np.object_],
    b_ns: NDArray[np.int64],
    boarded: NDArray[np.bool_],
) -> NDArray[np.bool_]:
    """Flag boardings at a stand not licensed that also mark a visit of a stand licensed.

    Two stands that overlap: the vehicle left its own queue, not this one's (an independent
    check had taxis of one stand accused at the overlapping neighbour, for the taxis waiting
    there).
    """
    if "licensed" not in visits.columns:
        return np.zeros(len(visits), dtype=bool)
    licensed = visits["licensed"].astype("boolean")
    own = boarded & licensed.fillna(False).to_numpy(dtype=bool)
    foreign = boarded & (~licensed).fillna(False).to_numpy(dtype=bool)
    held = set(zip(vehicle[own].tolist(), b_ns[own].tolist(), strict=True))
    out = np.zeros(len(visits), dtype=bool)
    for k in np.flatnonzero(foreign).tolist():
        out[k] = (vehicle[k], int(b_ns[k])) in held
    return out


def _came_from_away(
    vehicle: NDArray[np.object_],
    stand_code: NDArray[np.int64],
    arrived: NDArray[np.int64],
    left: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """Per visit: whether its vehicle's previous visit to its stand was left before it.

    ``left``: per visit, when the vehicle counts as gone from it.
    """
    codes = pd.factorize(vehicle)[0]
    order = np.lexsort((arrived, stand_code, codes))
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (codes[order][1:] == codes[order][:-1]) & (
        stand_code[order][1:] == stand_code[order][:-1]
    )
    prev = np.r_[0, order[:-1]]
    out = np.empty(len(order), dtype=bool)
    out[order] = ~same | (left[prev] < arrived[order])
    return out


# ----------------------------------------------------------------------------- the kernel


def advance_queue_jump(
    states: Mapping[str, Mapping[str, Any] | None],
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    min_wait_ahead_s: float = DEFAULT_MIN_WAIT_AHEAD_S,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    min_away_s: float = DEFAULT_MIN_AWAY_S,
    min_approach_m: float = DEFAULT_EXIT_GRACE_M,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
) -> tuple[dict[str, dict[str, Any]], gpd.GeoDataFrame]:
    """Run :func:`detect_queue_jump` on newly released visits after their stands' states.

    The visits come from :func:`stands.visits.advance_visits`, which releases a stand's visits
    in arrival order once final: when a boarded visit is released, every visit that could be
    ahead of it is released, so its finding is final at once. A stand's state is its released
    visits (with the fixes the rule reads) that a later boarding may still pass — those that
    departed at or after the stand's latest arrival, the queue at that instant — and those
    that ended less than ``min_away_s`` before it (a vehicle's previous visit).

    Parameters
    ----------
    states : mapping
        ``stand_id → state`` (``{"visits": [...]}`` plain data) of the stands of ``visits``
        (missing or None: nothing kept).
    visits, pings : pandas.DataFrame
        Visits released by one call of :func:`stands.visits.advance_visits` and the fixes
        their positions refer to.
    fleet, min_wait_ahead_s, tolerance_s, min_away_s, min_approach_m, boarding_grace_s,
    boarding_grace_m
        As in :func:`detect_queue_jump`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame)
        The new state of each stand of ``visits`` and the findings of the new boardings.
    """
    if not len(visits):
        return {}, empty_findings()
    new = visit_records(visits, pings)
    touched = sorted({str(r["visit"]["stand_id"]) for r in new})
    held = [r for sid in touched for r in (states.get(sid) or {}).get("visits", [])]
    frame, fixes = visits_from_records(held + new)
    found = detect_queue_jump(
        frame,
        fixes,
        fleet=fleet,
        min_wait_ahead_s=min_wait_ahead_s,
        tolerance_s=tolerance_s,
        min_away_s=min_away_s,
        min_approach_m=min_approach_m,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
    )
    if len(found):
        fresh = {(str(r["visit"]["vehicle_id"]), int(r["visit"]["arrived_at"])) for r in new}
        started = utc_ns(found["started_at"], column="started_at", what="os achados")
        mine = [
            (str(v), int(a)) in fresh
            for v, a in zip(found["vehicle_id"], started.tolist(), strict=True)
        ]
        found = found[np.asarray(mine, dtype=bool)].reset_index(drop=True)
    out: dict[str, dict[str, Any]] = {}
    for sid in touched:
        mine_ = [r for r in held + new if str(r["visit"]["stand_id"]) == sid]
        latest = max(int(r["visit"]["arrived_at"]) for r in mine_)
        since = latest - round(min_away_s * NS)
        out[sid] = {"visits": [r for r in mine_ if int(r["visit"]["departed_at"]) >= since]}
    return out, found
