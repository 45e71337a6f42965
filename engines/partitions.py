"""Analysis by partitions of whole vehicles: the per-partition stage and the gather.

Both engines that do not hold every fix at once share this: the Dask engine
(:mod:`engines.distributed`, partitions on workers) and the file engine
(:mod:`engines.buckets`, partitions spilled to disk and run one or two at a time).

per partition (:func:`vehicle_stage`)
    A partition is a set of whole vehicles (every fix of each, all days). On it: stand matching
    (:func:`geo.cover.match_stands`), :func:`stands.visits.detect_visits`,
    :func:`tracking.stops.detect_stops`, :func:`tracking.trips.detect_trips`,
    :func:`engines.pipeline.pickup_stands`, and :func:`tracking.detectors.detect.run_detectors`
    with the kinds whose facts are one vehicle's (:data:`VEHICLE_KINDS`: gaps, GPS anomalies,
    Bandeira 2, operating while barred, outside the municipality) and illegal stand formation's
    waiting stops (:func:`tracking.detectors.illegal_stand_formation.waiting_stops`: long,
    mostly free stops, with their first and last fix). Each partition also returns its
    *evidence fixes*: the fixes inside its visits and meter trips, with one fix of margin on each
    side (the previous fix of a boarding, the neighbours of a pickup or drop-off).
gathered (:func:`gather`, over small frames)
    The partitions' visits, trips, stops and evidence fixes are concatenated and put in vehicle
    order (the order the local engine gives). Queue positions are recomputed over all vehicles of
    each stand with the kernel of ``detect_visits``; then occupancy
    (:func:`stands.occupancy.occupancy`) and ``run_detectors`` with the kinds that compare
    vehicles or need every day at once (:data:`CROSS_KINDS`: queue_jump, unlicensed_stand_use —
    its evidence names the queue position —, illegal_stand_formation — the waiting stops of
    several vehicles on several days, clustered into places —, habitual_absence — presence
    over the days —, inactivity — the whole fleet —, longer_route — past trips of other
    vehicles between the same cells). Each key's rules are one function (:func:`stand_kinds`,
    :func:`vehicle_kinds`, :func:`place_kinds`, :func:`route_kinds`), run here on the whole
    (with several jobs, route_kinds by groups of cell pairs, shared by forked processes);
    the Dask engine runs them by groups of their key on the workers (:func:`split_by_stand`,
    :func:`stand_group`, :func:`split_by_route`, :func:`route_group`, :func:`vehicle_group`,
    :func:`place_group`).

Why vehicle partitions and not vehicle × day: a trip, a stop, a visit, a silence or a GPS
excursion that crosses midnight belongs to two days, and every per-vehicle kernel (trip and stop
segmentation, visit hysteresis, gap and anomaly runs, Bandeira 2 runs) would need an overlap
window and a stitching rule of its own, each a new way to differ from the local engine. A
vehicle's whole history is small — a year at one fix per 15 s is 2.1 M fixes, about 150 MB —, so
a partition of whole vehicles is exact by construction; the parallelism comes from the fleet
(3,375 taxis in Porto Alegre).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engines.pipeline import (
    AnalysisParams,
    AnalysisResult,
    Progress,
    count_distinct,
    merge_ping_stats,
    no_progress,
    pickup_stands,
    ping_stats,
    summarize,
)
from geo.cover import build_stand_cover, match_stands
from geo.h3 import latlng_to_cells
from geo.roads import RoadGraph
from runtime import forked_share
from stands.licences import licence_frame_from_fleet, mark_unplaced_licences, unknown_licences
from stands.near import near_dwells
from stands.occupancy import empty_occupancy, occupancy
from stands.presence import OPERATION_COLUMNS, operation_fixes
from stands.visits import detect_visits as detect_visits_
from stands.visits import queue_positions
from tracking import frames as fr
from tracking.arrays import epoch_ns, vehicle_codes
from tracking.detectors.detect import DetectorInputs, Thresholds, run_detectors
from tracking.detectors.findings import KINDS, empty_findings
from tracking.detectors.illegal_stand_formation import waiting_stops
from tracking.detectors.inactivity import ActivitySpan, activity_span, last_fixes
from tracking.detectors.longer_route import DEFAULT_H3_RESOLUTION as LONGER_ROUTE_H3_RESOLUTION
from tracking.stops import detect_stops
from tracking.trips import detect_trips

T = TypeVar("T")

VEHICLE_KINDS = (
    "tracking_gap",
    "gps_anomaly",
    "flag2_misuse",
    "operating_while_barred",
    "outside_municipality",
    "driver_not_allowed",
)
"""Kinds judged per vehicle, on the workers."""

CROSS_KINDS = tuple(k for k in KINDS if k not in VEHICLE_KINDS)
"""Kinds judged on the gathered frames (across vehicles or days)."""

STAND_KINDS = ("queue_jump", "unlicensed_stand_use")
"""Cross kinds judged by stand (:func:`stand_kinds`): the visits of every vehicle at a stand."""
VEHICLE_GROUP_KINDS = ("habitual_absence", "inactivity")
"""Cross kinds judged by vehicle over every day (:func:`vehicle_kinds`); inactivity with the
whole run's activity span."""
PLACE_KINDS = ("illegal_stand_formation",)
"""Cross kinds judged on the run's waiting stops (:func:`place_kinds`)."""
ROUTE_KINDS = ("longer_route",)
"""Cross kinds judged by pickup and drop-off cell pair (:func:`route_kinds`)."""

FORKED_CROSS_KINDS = (*PLACE_KINDS, *ROUTE_KINDS, *VEHICLE_GROUP_KINDS)
"""Cross kinds :func:`gather` runs in forked processes when it has two jobs or more, beside the
stand kinds, which stay in the main process: they find the most (the 50,000 queue and stand
findings of a 10M-fix day would take about a second to pickle back), the others few."""
ROUTE_GROUPS_PER_JOB = 8
"""Cell-pair groups of :func:`route_kinds` per job in :func:`gather`: small enough that the
processes end together (on 10M fixes, route_kinds takes longer than the stand kinds)."""


POSITIONS = ("first_ping", "last_ping", "boarding_ping")
"""Columns of visits, trips and stops that are positions into the pings frame."""


def vehicle_partitions(
    vehicle_ids: pd.Series, *, partition_fixes: int, min_partitions: int = 1
) -> list[tuple[int, int]]:
    """Cut pings sorted by vehicle into ``[start, stop)`` row ranges of whole vehicles.

    Parameters
    ----------
    vehicle_ids : pandas.Series
        ``vehicle_id`` of the pings, each vehicle's rows contiguous.
    partition_fixes : int
        Target fixes per partition (a vehicle with more makes a partition alone).
    min_partitions : int, default 1
        Cut finer when needed to give at least this many (vehicles permitting).

    Returns
    -------
    list of tuple of int
        Row ranges covering every row once, in row order.
    """
    n = len(vehicle_ids)
    if n == 0:
        return []
    values = vehicle_ids.astype("str").to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    bounds = np.r_[starts, n]
    target = max(1, min(partition_fixes, math.ceil(n / max(1, min_partitions))))
    out: list[tuple[int, int]] = []
    begin = 0
    for stop in bounds[1:].tolist():
        if stop - begin >= target:
            out.append((begin, stop))
            begin = stop
    if begin < n:
        out.append((begin, n))
    return out


def _sorted_unique(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Return the distinct values, ascending: ``np.unique`` by sorting.

    NumPy 2.3+ ``np.unique`` (no ``return_*``) hashes, then sorts: on many distinct int64
    (a month of timestamps, ~400k distinct in a partition) about ten times slower than a sort.
    """
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def evidence_mask(
    part: pd.DataFrame, visits: pd.DataFrame, trips: pd.DataFrame
) -> npt.NDArray[np.bool_]:
    """Mark the fixes inside visits and meter trips, and one neighbour on each side."""
    n = len(part)
    if n == 0:
        return np.zeros(0, dtype=bool)
    delta = np.zeros(n + 1, dtype=np.int64)
    if len(visits):
        first = visits["first_ping"].to_numpy(dtype=np.int64)
        last = visits["last_ping"].to_numpy(dtype=np.int64)
        board = pd.to_numeric(visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64)
        np.add.at(delta, first, 1)
        np.add.at(delta, np.maximum(last, board) + 1, -1)
    codes, lo, hi = _trip_spans(part, trips)
    np.add.at(delta, lo, 1)
    np.add.at(delta, hi, -1)
    return _grown(np.cumsum(delta[:n]) > 0, codes)


def _grown(mask: npt.NDArray[np.bool_], codes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``mask`` and, within each vehicle (``codes``), the neighbours of its marked fixes."""
    grown = mask.copy()
    same_prev = np.r_[False, codes[1:] == codes[:-1]]
    grown[:-1] |= mask[1:] & same_prev[1:]
    grown[1:] |= mask[:-1] & same_prev[1:]
    return grown


def _trip_spans(
    part: pd.DataFrame, trips: pd.DataFrame
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Return the vehicle codes of ``part`` and each meter trip's fixes ``[lo, hi)`` in it.

    ``part`` is sorted by (vehicle, time); the trips' fixes are the vehicle's from its first at
    or after ``started_at`` to its last at or before ``ended_at``.
    """
    ts = epoch_ns(part[fr.TIMESTAMP])
    codes, uniques = vehicle_codes(part[fr.VEHICLE_ID])  # part: sorted by (vehicle, time)
    none = np.zeros(0, dtype=np.int64)
    if not len(trips) or not len(part):
        return codes, none, none
    if "source" in trips.columns:
        trips = trips.loc[(trips["source"].astype("str") == "meter").to_numpy()]
    if not len(trips):
        return codes, none, none
    vid = pd.Index(trips[fr.VEHICLE_ID].astype("str"))
    code = pd.Index(uniques).get_indexer(vid).astype(np.int64)
    t0 = epoch_ns(trips["started_at"])
    t1 = epoch_ns(trips["ended_at"]) + 1  # at or before t1: before t1 + 1 ns
    # (vehicle, instant) as one increasing key: the vehicle's code, then the instant; a fix
    # before (code, t) in it is the vehicle's before t, or an earlier vehicle's
    first, span = int(ts.min()), int(ts.max()) - int(ts.min()) + 2
    if len(uniques) * span < 2**62:  # the instant itself, from the first (no sort)
        key = codes * span + (ts - first)
        at0 = code * span + np.clip(t0 - first, 0, span - 1)
        at1 = code * span + np.clip(t1 - first, 0, span - 1)
    else:  # the instant's rank among the partition's distinct instants
        instants = _sorted_unique(ts)
        width = np.int64(len(instants) + 1)
        key = codes * width + np.searchsorted(instants, ts)
        at0 = code * width + np.searchsorted(instants, t0)
        at1 = code * width + np.searchsorted(instants, t1)
    # the vehicle's first fix at or after t0, and the one after its last fix at or before t1
    lo, hi = np.searchsorted(key, at0), np.searchsorted(key, at1)
    return codes, lo.astype(np.int64), hi.astype(np.int64)


def stage_context(
    stands: gpd.GeoDataFrame,
    *,
    fleet: pd.DataFrame | None,
    boundary: Any,
    roads: RoadGraph | None,
    as_of: dt.date | None,
    thresholds: Thresholds | None,
    kinds: tuple[str, ...],
    params: AnalysisParams,
    drivers: pd.DataFrame | None = None,
    driver_links: pd.DataFrame | None = None,
    stand_suspensions: pd.DataFrame | None = None,
    allowed_places: gpd.GeoDataFrame | None = None,
) -> dict[str, Any]:
    """Return the inputs every partition shares, with the stand cover and licences built once.

    The fleet's licences for stands not in ``stands`` are marked (``mark_unplaced_licences``).
    """
    if fleet is not None:
        fleet, _ = mark_unplaced_licences(fleet, stands["stand_id"])
    return {
        "drivers": drivers,
        "driver_links": driver_links,
        "stand_suspensions": stand_suspensions,
        "allowed_places": allowed_places,
        "params": params,
        "stands": stands,
        "cover": build_stand_cover(stands, resolution=params.h3_resolution),
        "fleet": fleet,
        "licences": licence_frame_from_fleet(fleet) if fleet is not None else None,
        "unknown_licences": unknown_licences(fleet) if fleet is not None else frozenset(),
        "boundary": boundary,
        "roads": roads,
        "as_of": as_of,
        "thresholds": thresholds,
        "kinds": kinds,
    }


def vehicle_stage(part: pd.DataFrame, context: dict[str, Any]) -> dict[str, Any]:
    """Run the local pipeline's functions on a partition of whole vehicles.

    ``context`` is :func:`stage_context`'s. Returns the partition's frames (positions into
    ``part``), its findings of :data:`VEHICLE_KINDS`, its evidence fixes and counts, for
    :func:`gather`.
    """
    params: AnalysisParams = context["params"]
    stands: gpd.GeoDataFrame = context["stands"]
    part = part.reset_index(drop=True)
    fleet: pd.DataFrame | None = context["fleet"]
    if fleet is not None:  # the per-vehicle kinds read only the partition's own registry
        own = fleet[fr.VEHICLE_ID].isin(pd.unique(part[fr.VEHICLE_ID]))
        fleet = fleet.loc[own.to_numpy()]
    cover = context["cover"]
    ping_idx, stand_idx = match_stands(part[fr.LAT].to_numpy(), part[fr.LON].to_numpy(), cover)
    memberships = pd.DataFrame(
        {"ping_index": ping_idx, "stand_id": stands["stand_id"].to_numpy()[stand_idx]}
    )
    visits = detect_visits_(
        part,
        memberships,
        stands=stands,
        licences=context["licences"],
        unknown_licences=context["unknown_licences"],
        exit_grace_s=params.visit_exit_grace_s,
        exit_grace_m=params.visit_exit_grace_m,
        near_exit_grace_s=params.visit_near_exit_grace_s,
        min_dwell_s=params.visit_min_dwell_s,
        boarding_grace_s=params.boarding_grace_s,
        boarding_grace_m=params.boarding_grace_m,
        max_gap_s=params.trip_max_gap_s,
        timezone=params.timezone,
    )
    stops = detect_stops(
        part, max_diameter_m=params.stop_max_diameter_m, min_duration_s=params.stop_min_duration_s
    )
    trips = detect_trips(
        part, stops=stops, max_gap_s=params.trip_max_gap_s, max_speed_kmh=params.max_speed_kmh
    )
    trips["pickup_stand_id"] = pickup_stands(trips, visits, stands)
    findings, skipped = _detect(
        context,
        VEHICLE_KINDS,
        pings=part,
        visits=visits,
        trips=trips,
        stops=stops,
        fleet=fleet,
        as_of=context["as_of"],
    )
    wanted = set(context["kinds"])
    waiting: list[dict[str, Any]] = []
    if "illegal_stand_formation" in wanted:  # its per-vehicle half: no stop fixes gathered
        limits = (context["thresholds"] or {}).get("illegal_stand_formation", {})
        waiting = waiting_stops(
            stops, part, **{k: limits[k] for k in ("min_wait_s", "min_free_share") if k in limits}
        )
    mask = evidence_mask(
        part,
        visits if wanted & _VISIT_EVIDENCE else visits.iloc[:0],
        trips if "longer_route" in wanted else trips.iloc[:0],
    )
    return {
        "n_pings": len(part),
        "stats": ping_stats(part, fleet=context["fleet"], drivers=context["drivers"]),
        "visits": visits,
        "trips": trips,
        "stops": stops,
        "findings": findings,
        "skipped": skipped,
        "evidence": _evidence_frame(
            part, mask, drivers=context.get("stand_suspensions") is not None
        ),
        "evidence_visits": _through(visits, np.cumsum(mask) - 1),  # positions into evidence
        "waiting": waiting,
        "n_matched": count_distinct(ping_idx, len(part)),
        "vehicles": pd.unique(part[fr.VEHICLE_ID].astype("str")).tolist(),
        "sightings": last_fixes(  # inactivity: whole vehicles, the last fix is theirs
            part, as_of=context["as_of"], timezone=params.timezone
        ),
        "near": _near_dwells(part, context),
        "operation": _operation(part, context),
    }


def _operation(part: pd.DataFrame, context: dict[str, Any]) -> pd.DataFrame | None:
    """habitual_absence's days of operation of the partition's licensees."""
    if "habitual_absence" not in context["kinds"] or context["licences"] is None:
        return None
    mine = part[fr.VEHICLE_ID].astype("str").isin(context["licences"][fr.VEHICLE_ID].astype("str"))
    columns = [c for c in OPERATION_COLUMNS if c in part.columns]
    own = part[columns] if mine.all() else part.loc[mine.to_numpy(dtype=bool), columns]
    return operation_fixes(own, timezone=context["params"].timezone)


def _near_dwells(part: pd.DataFrame, context: dict[str, Any]) -> pd.DataFrame | None:
    """habitual_absence's near and silent dwells of the partition's whole tracks."""
    if "habitual_absence" not in context["kinds"] or context["licences"] is None:
        return None
    limits = (context["thresholds"] or {}).get("habitual_absence", {})
    names = ("reach_m", "silent_reach_m", "min_silence_s", "min_presence_s")
    return near_dwells(
        part, context["licences"], context["stands"], **{k: limits[k] for k in names if k in limits}
    )


def _detect(
    context: dict[str, Any],
    among: tuple[str, ...],
    *,
    pings: pd.DataFrame,
    visits: pd.DataFrame,
    trips: pd.DataFrame,
    stops: pd.DataFrame,
    fleet: pd.DataFrame | None,
    as_of: dt.date | None,
    waiting_stops: list[dict[str, Any]] | None = None,
    licences: pd.DataFrame | None = None,
    activity_span: ActivitySpan | None = None,
    sightings: pd.DataFrame | None = None,
    near_dwells: pd.DataFrame | None = None,
    operation: pd.DataFrame | None = None,
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run the run's kinds that are ``among`` these, with the run's other inputs.

    ``licences`` None: the run's (``context``).
    """
    return run_detectors(
        DetectorInputs(
            pings=pings,
            visits=visits,
            trips=trips,
            stops=stops,
            stands=context["stands"],
            fleet=fleet,
            licences=context["licences"] if licences is None else licences,
            activity_span=activity_span,
            boundary=context["boundary"],
            roads=context["roads"],
            as_of=as_of,
            timezone=context["params"].timezone,
            waiting_stops=waiting_stops,
            boarding_grace_s=context["params"].boarding_grace_s,
            boarding_grace_m=context["params"].boarding_grace_m,
            drivers=context.get("drivers"),
            driver_links=context.get("driver_links"),
            stand_suspensions=context.get("stand_suspensions"),
            allowed_places=context.get("allowed_places"),
            off_fleet=context.get("off_fleet", frozenset()),
            sightings=sightings,
            near_dwells=near_dwells,
            operation=operation,
        ),
        thresholds=context["thresholds"],
        kinds=tuple(k for k in context["kinds"] if k in among),
    )


_VISIT_EVIDENCE = {"queue_jump", "unlicensed_stand_use"}
_EVIDENCE_COLUMNS = (
    *fr.PING_REQUIRED,
    fr.METER,
    fr.ROW,
    fr.SPEED_FLAG,
    fr.TRIP_REF,
    fr.SPEED_KMH,  # longer_route: a stop at each end of an unseen stretch
)


def _evidence_frame(
    part: pd.DataFrame, mask: npt.NDArray[np.bool_], *, drivers: bool = False
) -> pd.DataFrame:
    """Keep the masked fixes' columns the cross-vehicle kinds read; ``meter`` one byte a fix.

    ``drivers``: keep ``driver_id`` too (a driver's stand suspension reads it).

    ``meter`` becomes a categorical of :data:`tracking.frames.METER_VALUES` (another value, as
    ``pd.Categorical`` would make it, a null), coded by Arrow.
    """
    wanted = (*_EVIDENCE_COLUMNS, fr.DRIVER_ID) if drivers else _EVIDENCE_COLUMNS
    out = part.loc[mask, [c for c in wanted if c in part.columns]]
    out = out.reset_index(drop=True)
    if fr.METER in out.columns:
        meter = pa.array(out[fr.METER], from_pandas=True)
        if pa.types.is_null(meter.type):  # no meter at all
            meter = meter.cast(pa.string())
        values = pa.array(fr.METER_VALUES, type=meter.type)
        codes = pc.fill_null(pc.index_in(meter, value_set=values), -1).to_numpy()
        out[fr.METER] = pd.Categorical.from_codes(
            codes, dtype=pd.CategoricalDtype(list(fr.METER_VALUES))
        )
    return out


def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    kept = [f for f in frames if len(f)]
    if not kept:
        return frames[0]
    return pd.concat(kept, ignore_index=True)


def _shift_positions(
    frame: pd.DataFrame,
    offsets: npt.NDArray[np.int64],
    *,
    columns: tuple[str, ...] = POSITIONS,
) -> pd.DataFrame:
    """Move each partition's (``_part``) positions by its offset."""
    visits = frame
    out = visits.drop(columns="_part")
    part = visits["_part"].to_numpy(dtype=np.int64)
    for col in columns:
        values = visits[col].astype("Int64")
        missing = values.isna().to_numpy(dtype=bool)
        raw = values.fillna(0).to_numpy(dtype=np.int64)
        moved = raw.copy()
        for k in np.unique(part).tolist():
            sel = part == k
            moved[sel] = offsets[k] + raw[sel]
        shifted = pd.Series(pd.arrays.IntegerArray(moved, missing), index=out.index)
        out[col] = shifted.astype(visits[col].dtype)
    return out


def requeue(visits: pd.DataFrame) -> pd.DataFrame:
    """Recompute ``queue_position`` over every vehicle of each stand (the kernel of detect_visits).

    Parameters
    ----------
    visits : pandas.DataFrame
        Visits of all vehicles (``stands.visits`` frame).

    Returns
    -------
    pandas.DataFrame
        A copy with the fleet-wide queue positions.
    """
    out = visits.copy()
    if not len(out):
        return out
    stand = pd.factorize(out["stand_id"].astype("str"))[0].astype(np.int64)
    vehicle = pd.factorize(out["vehicle_id"].astype("str"), sort=True)[0].astype(np.int64)
    arrived = epoch_ns(out["arrived_at"])
    departed = epoch_ns(out["departed_at"])
    queue = queue_positions(stand, vehicle, arrived, departed)
    out["queue_position"] = pd.Series(queue, index=out.index).astype(out["queue_position"].dtype)
    return out


def _by_vehicle(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in vehicle order, each vehicle's rows in the order they came (a stable sort)."""
    if len(frame) < 2:
        return frame.reset_index(drop=True)
    return frame.sort_values(fr.VEHICLE_ID, kind="stable", ignore_index=True)


def _vehicle_order(pieces: Sequence[pd.DataFrame]) -> list[tuple[int, int, int]] | None:
    """Return the blocks ``(piece, start, stop)`` putting ``pieces`` in vehicle order.

    Each piece is sorted and the pieces' vehicles disjoint: one block per vehicle. None when the
    concatenation already is in order. Vehicles are compared as UTF-8 bytes, as the pings sort
    does.
    """
    blocks: list[tuple[str, int, int, int]] = []
    for k, piece in enumerate(pieces):
        n = len(piece)
        if n:
            ids = pa.array(piece[fr.VEHICLE_ID].astype("str"), type=pa.large_string())
            change = pc.not_equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.r_[True, change])
            names = ids.take(pa.array(starts)).to_pylist()
            ends = np.r_[starts[1:], n]
            blocks += zip(names, [k] * len(names), starts.tolist(), ends.tolist(), strict=True)
    ordered = sorted(blocks, key=lambda b: b[0].encode("utf-8"))
    if ordered == blocks:
        return None
    return [(k, a, b) for _, k, a, b in ordered]


def _stack(pieces: Sequence[pd.DataFrame], blocks: list[tuple[int, int, int]]) -> pd.DataFrame:
    """Stack the rows ``pieces[k][a:b]`` of each block, in order, each column copied once.

    What ``pd.concat(pieces).take(order)`` gives, by slices instead of row by row.
    """
    columns: dict[str, Any] = {}
    for name in pieces[0].columns:
        arrays = [piece[name].array for piece in pieces]
        parts = [arrays[k][a:b] for k, a, b in blocks]
        first = parts[0]
        if isinstance(first, pd.arrays.ArrowExtensionArray | pd.arrays.ArrowStringArray):
            whole = pa.concat_arrays([pa.array(part) for part in parts])
            columns[name] = pd.array(whole, dtype=first.dtype)
        else:
            columns[name] = type(first)._concat_same_type(parts)
    return pd.DataFrame(columns, copy=False)  # the columns are fresh: no second copy


def _block_moves(
    blocks: list[tuple[int, int, int]], offsets: npt.NDArray[np.int64]
) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]:
    """Map positions in the pieces' concatenation to positions in :func:`_stack`'s frame."""
    piece, start, stop = (np.array(c, dtype=np.int64) for c in zip(*blocks, strict=True))
    old = offsets[piece] + start
    new = np.cumsum(stop - start) - (stop - start)
    by_old = np.argsort(old)
    old, new = old[by_old], new[by_old]

    def move(positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        block = np.searchsorted(old, positions, side="right") - 1
        return np.asarray(new[block] + (positions - old[block]), dtype=np.int64)

    return move


def _through(
    frame: pd.DataFrame,
    rank: npt.NDArray[np.int64] | Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]],
) -> pd.DataFrame:
    """Map the position columns of ``frame`` through ``rank`` (old position -> new).

    ``rank`` is an array indexed by old position, or a function of the old positions.
    """
    out = frame.copy()
    for col in (c for c in POSITIONS if c in out.columns):
        values = out[col].astype("Int64")
        missing = values.isna().to_numpy(dtype=bool)
        raw: npt.NDArray[np.int64] = np.asarray(values.fillna(0).to_numpy(), dtype=np.int64)
        mapped = rank(raw) if callable(rank) else rank[raw]
        moved = pd.arrays.IntegerArray(np.where(missing, 0, mapped), missing)
        out[col] = pd.Series(moved, index=out.index).astype(frame[col].dtype)
    return out


_NO_FRAME = pd.DataFrame()
"""An input a group's kinds do not read."""


def join_evidence(
    pieces: Sequence[pd.DataFrame], visit_pieces: Sequence[pd.DataFrame] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Stack evidence fixes of disjoint vehicles in vehicle order, and move visits' positions.

    Parameters
    ----------
    pieces : sequence of pandas.DataFrame
        Evidence fixes, each sorted by (vehicle, time), no vehicle in two pieces.
    visit_pieces : sequence of pandas.DataFrame, optional
        Visits whose positions point into the piece of the same index.

    Returns
    -------
    tuple
        The stacked evidence, and the visits (concatenated in piece order) pointing into it.
    """
    sizes = np.array([len(p) for p in pieces], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    blocks = _vehicle_order(pieces)
    evidence = _concat(pieces) if blocks is None else _stack(pieces, blocks)
    if visit_pieces is None:
        return evidence, None
    visits = _shift_positions(
        _concat([v.assign(_part=k) for k, v in enumerate(visit_pieces)]), offsets
    )
    if blocks is not None:
        visits = _through(visits, _block_moves(blocks, offsets))
    return evidence, visits


def stand_kinds(
    visits: pd.DataFrame,
    ev_visits: pd.DataFrame,
    evidence: pd.DataFrame,
    context: dict[str, Any],
    *,
    as_of: dt.date | None,
    licence_known: bool | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, gpd.GeoDataFrame, dict[str, str]]:
    """Return queue positions, occupancy and :data:`STAND_KINDS` findings of some stands.

    All the run's stands, or a group of them with every visit they had.

    Parameters
    ----------
    visits : pandas.DataFrame
        The stands' visits, every vehicle's, in piece order (positions into the run's pings).
    ev_visits : pandas.DataFrame
        The same visits, positions into ``evidence``.
    evidence : pandas.DataFrame
        The fixes the visits point to (:func:`join_evidence`).
    context : dict
        :func:`stage_context`'s.
    as_of : datetime.date or None
        The run's last day.
    licence_known : bool, optional
        Whether any visit of the run has licence data (occupancy's ``intruders``); default:
        of these visits.

    Returns
    -------
    tuple
        Visits in vehicle order with the queue positions, occupancy (occupied buckets only),
        findings and skipped kinds.
    """
    params: AnalysisParams = context["params"]
    visits = _by_vehicle(requeue(visits))
    ev_visits = _by_vehicle(requeue(ev_visits))
    occ = occupancy(
        visits,
        context["stands"],
        bucket=params.occupancy_bucket,
        include_idle=False,
        licence_known=licence_known,
    )
    found, skipped = _detect(
        context,
        STAND_KINDS,
        pings=evidence,
        visits=ev_visits,
        trips=_NO_FRAME,
        stops=_NO_FRAME,
        fleet=context["fleet"],
        as_of=as_of,
    )
    return visits, occ, found, skipped


def vehicle_kinds(
    visits: pd.DataFrame,
    trips: pd.DataFrame,
    context: dict[str, Any],
    *,
    fleet: pd.DataFrame | None,
    as_of: dt.date | None,
    licences: pd.DataFrame | None = None,
    activity_span: ActivitySpan | None = None,
    sightings: pd.DataFrame | None = None,
    near_dwells: pd.DataFrame | None = None,
    operation: pd.DataFrame | None = None,
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """:data:`VEHICLE_GROUP_KINDS` of some vehicles (every day of each).

    ``fleet`` and ``licences`` are those vehicles' (None: the run's licences); a group of the
    fleet gives the whole run's ``activity_span``
    (:func:`tracking.detectors.inactivity.activity_span`), None computes it from ``trips``;
    ``sightings`` are the vehicles' last fixes without meter data (``inactivity``);
    ``near_dwells`` their dwells near their stands and ``operation`` their days of operation
    (``habitual_absence``).
    """
    return _detect(
        context,
        VEHICLE_GROUP_KINDS,
        pings=_NO_FRAME,
        visits=visits,
        trips=trips,
        stops=_NO_FRAME,
        fleet=fleet,
        as_of=as_of,
        licences=licences,
        activity_span=activity_span,
        sightings=sightings,
        near_dwells=near_dwells,
        operation=operation,
    )


def place_kinds(
    waiting: Sequence[dict[str, Any]], context: dict[str, Any], *, as_of: dt.date | None
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """:data:`PLACE_KINDS` on the run's waiting stops (every vehicle's, in any order).

    Places are single-linkage groups of H3 cells of unbounded extent, and distances are
    measured in the UTM zone of the mean of every waiting stop: a partition by place cell
    would need the whole table anyway, so it is clustered at once (a small table: a few
    stops per vehicle and day).
    """
    ordered = sorted(  # the stops' order: by vehicle, then start
        waiting, key=lambda w: (w["vehicle_id"].encode("utf-8"), w["start_ns"])
    )
    return _detect(
        context,
        PLACE_KINDS,
        pings=_NO_FRAME,
        visits=_NO_FRAME,
        trips=_NO_FRAME,
        stops=_NO_FRAME,
        fleet=None,
        as_of=as_of,
        waiting_stops=ordered,
    )


def route_kinds(
    trips: pd.DataFrame, evidence: pd.DataFrame, context: dict[str, Any], *, as_of: dt.date | None
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run :data:`ROUTE_KINDS` on the trips of some pickup/drop-off cell pairs.

    ``trips``: every vehicle's trips between those cells, in vehicle order; ``evidence``: the
    fixes inside them (with one neighbour on each side).
    """
    return _detect(
        context,
        ROUTE_KINDS,
        pings=evidence,
        visits=_NO_FRAME,
        trips=trips,
        stops=_NO_FRAME,
        fleet=context["fleet"],
        as_of=as_of,
    )


def _found_frame(frames: Sequence[gpd.GeoDataFrame]) -> gpd.GeoDataFrame:
    """Return the findings of several groups as one frame, in the run's order."""
    found = [f for f in frames if len(f)]
    if not found:
        return empty_findings()
    out = gpd.GeoDataFrame(pd.concat(found, ignore_index=True), geometry="geometry", crs=4326)
    return out.sort_values(["kind", "started_at", "finding_id"]).reset_index(drop=True)


def _called(func: Callable[[], T]) -> T:
    return func()


def run_as_of(context: dict[str, Any], stats: dict[str, Any]) -> dt.date | None:
    """Return the run's last day: the context's, else the local day of the last fix."""
    as_of: dt.date | None = context["as_of"]
    if as_of is None and stats["last"] is not None:
        as_of = stats["last"].tz_convert(context["params"].timezone).date()
    return as_of


def with_run_ids(context: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Return the context with ``off_fleet``, the run's vehicle ids the fleet lacks.

    The cross kinds read it (:class:`tracking.detectors.detect.DetectorInputs`).
    """
    return context | {"off_fleet": stats["id_checks"].get("off_fleet", frozenset())}


def finish(
    results_meta: Sequence[dict[str, Any]],
    *,
    rejected: pd.DataFrame,
    context: dict[str, Any],
    pings: pd.DataFrame,
    visits: pd.DataFrame,
    trips: pd.DataFrame,
    stops: pd.DataFrame,
    occ: pd.DataFrame,
    found: Sequence[gpd.GeoDataFrame],
    skipped: Sequence[dict[str, str]],
    counts: dict[str, int] | None = None,
    kinds: dict[str, int] | None = None,
) -> AnalysisResult:
    """Assemble the result and its summary from the joined frames and the groups' findings.

    ``results_meta``: per partition ``stats``, ``n_matched`` and ``skipped``; ``counts``: the
    summary's counts of rows written as parts; ``kinds``: the findings by kind when ``found``
    does not hold them all (:func:`engines.pipeline.summarize`).
    """
    params: AnalysisParams = context["params"]
    stats = merge_ping_stats([r["stats"] for r in results_meta])
    skipped_all = results_meta[0]["skipped"] if results_meta else {}
    for more in skipped:
        skipped_all = skipped_all | more
    result = AnalysisResult(
        pings=pings,
        rejected=rejected,
        stands=context["stands"],
        visits=visits,
        trips=trips,
        stops=stops,
        occupancy=occ,
        findings=_found_frame(found),
        skipped_detectors={k: skipped_all[k] for k in context["kinds"] if k in skipped_all},
    )
    n_matched = sum(r["n_matched"] for r in results_meta)
    result.summary = summarize(
        result, params=params, n_matched=n_matched, stats=stats, counts=counts, kinds=kinds
    )
    result.id_checks = stats["id_checks"]
    return result


def gather(
    results: Sequence[dict[str, Any]],
    rejected: pd.DataFrame,
    context: dict[str, Any],
    *,
    pings: pd.DataFrame | None = None,
    jobs: int = 1,
    progress: Progress = no_progress,
) -> AnalysisResult:
    """Join the partitions' results (:func:`vehicle_stage`) and run the cross-vehicle steps.

    The cross kinds run as one group of each key (:func:`stand_kinds`, :func:`vehicle_kinds`,
    :func:`place_kinds`, :func:`route_kinds`), the groups the Dask engine runs by parts
    (:func:`engines.distributed.gather_on_workers`).

    Parameters
    ----------
    results : sequence of dict
        One per partition, in any order (each vehicle in one partition only).
    rejected : pandas.DataFrame
        The run's rejected rows.
    context : dict
        The inputs the partitions ran with (see :func:`vehicle_stage`); ``as_of`` None means
        the last local day with fixes.
    pings : pandas.DataFrame, optional
        Every valid fix, when the engine holds them (kept in the result).
    jobs : int, default 1
        With 2 or more, the :data:`FORKED_CROSS_KINDS` run in ``jobs - 1`` forked processes
        beside the stand kinds (:func:`runtime.forked_share`), :func:`route_kinds` by groups
        of cell pairs (:func:`route_spans`, :func:`route_piece`, :func:`route_group`,
        :data:`ROUTE_GROUPS_PER_JOB` per job); the main process takes the groups left when the
        stand kinds are done.
    progress : callable
        Called with a pt-BR stage label before each stage.

    Returns
    -------
    AnalysisResult
        Equal to :func:`engines.pipeline.analyze_pings` on the partitions' fixes; ``pings``
        is the given frame, or the evidence fixes when none is given.
    """
    stats = merge_ping_stats([r["stats"] for r in results])
    as_of = run_as_of(context, stats)
    context = with_run_ids(context, stats)

    progress("Juntando visitas, viagens e paradas; fila dos pontos")
    sizes = np.array([r["n_pings"] for r in results], dtype=np.int64)
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    all_visits = _shift_positions(
        _concat([r["visits"].assign(_part=k) for k, r in enumerate(results)]), starts
    )
    ends = ("first_ping", "last_ping")
    trips = _by_vehicle(
        _shift_positions(
            _concat([r["trips"].assign(_part=k) for k, r in enumerate(results)]),
            starts,
            columns=ends,
        )
    )
    stops = _by_vehicle(
        _shift_positions(
            _concat([r["stops"].assign(_part=k) for k, r in enumerate(results)]),
            starts,
            columns=ends,
        )
    )
    evidence, joined = join_evidence(
        [r.pop("evidence") for r in results], [r.pop("evidence_visits") for r in results]
    )
    ev_visits = joined if joined is not None else _NO_FRAME
    waiting = [w for r in results for w in r["waiting"]]
    bare_trips = trips.drop(columns=list(ends))

    progress("Rodando os detectores entre veículos e dias")
    fork = jobs if any(k in context["kinds"] for k in FORKED_CROSS_KINDS) else 1
    by_vehicle = [
        functools.partial(
            vehicle_kinds,
            all_visits,
            bare_trips,
            context,
            fleet=context["fleet"],
            as_of=as_of,
            sightings=_concat([r["sightings"] for r in results]),
            near_dwells=_concat(near)
            if (near := [r["near"] for r in results if r["near"] is not None])
            else None,
            operation=_concat(days)
            if (days := [r["operation"] for r in results if r["operation"] is not None])
            else None,
        ),
        functools.partial(place_kinds, waiting, context, as_of=as_of),
    ]
    with forked_share(_called, by_vehicle, jobs=fork) as rest:  # the cell pairs cut meanwhile
        resolution = route_resolution(context)
        by_route = [functools.partial(route_kinds, bare_trips, evidence, context, as_of=as_of)]
        if fork > 1 and resolution is not None:  # groups of cell pairs, heaviest first
            pair_group = group_keys(
                route_pairs(trips, resolution=resolution), n_groups=ROUTE_GROUPS_PER_JOB * jobs
            )
            spans = route_spans(
                {"trips": trips, "evidence": evidence},
                resolution=resolution,
                pair_group=pair_group,
            )

            def pairs(g: int) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
                return route_group([route_piece(spans, g)], context, as_of=as_of)  # cut there

            by_route = [
                functools.partial(pairs, g) for g in range(max(1, len(set(pair_group.values()))))
            ]
        done = rest()
    with forked_share(_called, by_route, jobs=fork) as rest:
        visits, occ, found, skipped = stand_kinds(
            all_visits, ev_visits, evidence, context, as_of=as_of
        )
        done += rest()
    skipped_away: dict[str, str] = {}
    for _, more in done:
        skipped_away |= more
    return finish(
        results,
        rejected=rejected,
        context=context,
        pings=pings if pings is not None else evidence,
        visits=visits,
        trips=trips,
        stops=stops,
        occ=occ,
        found=[*(r["findings"] for r in results), found, *(f for f, _ in done)],
        skipped=[skipped, skipped_away],
    )


# ---------------------------------------------------------- the groups of the gathered stage
# What the Dask engine runs on the workers (engines.distributed.gather_on_workers): each
# partition's result stays where it was made, is cut into the pieces of each group (a stand
# group, a cell-pair group), and each group's task joins its pieces and runs the same function
# gather runs on the whole.

_ENDS = ("first_ping", "last_ping")


def part_facts(
    result: dict[str, Any], *, as_of: dt.date | None = None, timezone: str | None = None
) -> dict[str, Any]:
    """Return the small facts of a partition's result the client receives.

    Its counts and statistics, its findings (:data:`VEHICLE_KINDS`), its number of vehicles,
    whether any visit has licence data, with ``as_of`` and ``timezone`` its activity span
    (:func:`part_activity_span`): a few numbers, whatever the partition's size. What the groups
    are planned from stays on the workers (:func:`plan_facts`).
    """
    visits: pd.DataFrame = result["visits"]
    span = None
    if as_of is not None and timezone is not None:
        span = part_activity_span(result, as_of=as_of, timezone=timezone)
    return {
        "activity_span": span,
        "n_pings": result["n_pings"],
        "stats": result["stats"],
        "n_matched": result["n_matched"],
        "skipped": result["skipped"],
        "findings": result["findings"],
        "n_vehicles": len(result["vehicles"]),
        "licence_known": bool("licensed" in visits.columns and visits["licensed"].notna().any()),
    }


def plan_facts(result: dict[str, Any], *, resolution: int | None = None) -> dict[str, Any]:
    """Return what a partition adds to the plan of the groups (:func:`plan_groups`).

    Its visits per stand, the stands linked through one vehicle (:func:`stand_links`), its
    vehicles, with ``resolution`` its meter trips per cell pair (:func:`route_cell_pairs`).
    These grow with the input (the cell pairs with the days): they are summed on the workers
    (:func:`merge_plan_facts`), never sent to the client.
    """
    visits: pd.DataFrame = result["visits"]
    counts = visits["stand_id"].astype("str").value_counts(sort=False)
    pairs = {} if resolution is None else route_pairs(result["trips"], resolution=resolution)
    return {
        "stand_visits": {str(k): int(v) for k, v in counts.items()},
        "stand_links": stand_links(visits),
        "route_pairs": pairs,
        "vehicles": list(result["vehicles"]),
    }


def merge_plan_facts(facts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sum several partitions' :func:`plan_facts`: counts added, links and vehicles joined."""
    stand_visits: dict[str, int] = {}
    pairs: dict[int, int] = {}
    links: set[tuple[str, ...]] = set()
    vehicles: list[str] = []
    for f in facts:
        for stand, n in f["stand_visits"].items():
            stand_visits[stand] = stand_visits.get(stand, 0) + n
        for key, n in f["route_pairs"].items():
            pairs[key] = pairs.get(key, 0) + n
        links.update(tuple(link) for link in f["stand_links"])
        vehicles += f["vehicles"]
    return {
        "stand_visits": stand_visits,
        "stand_links": sorted(links),
        "route_pairs": pairs,
        "vehicles": vehicles,
    }


def plan_groups(facts: Sequence[dict[str, Any]], *, n_groups: int) -> dict[str, Any]:
    """Return the plan of the gathered stage's groups from the partitions' :func:`plan_facts`.

    ``stand_of``: stand -> group (:func:`group_stands`), ``pair_group``: cell pair -> group
    (:func:`group_keys`), their numbers of groups (``n_stand_groups``, ``n_route_groups``), and
    ``vehicles``: the run's vehicles (a set). Made on a worker; the client receives only the
    numbers of groups (:func:`plan_sizes`).
    """
    merged = merge_plan_facts(facts)
    stand_of = group_stands(merged["stand_visits"], merged["stand_links"], n_groups=n_groups)
    pair_group = group_keys(merged["route_pairs"], n_groups=n_groups)
    return {
        "stand_of": stand_of,
        "n_stand_groups": max(1, len(set(stand_of.values()))),
        "pair_group": pair_group,
        "n_route_groups": max(1, len(set(pair_group.values()))),
        "vehicles": set(merged["vehicles"]),
    }


def plan_sizes(plan: dict[str, Any]) -> tuple[int, int]:
    """Return the numbers of stand groups and of cell-pair groups of a :func:`plan_groups`."""
    return int(plan["n_stand_groups"]), int(plan["n_route_groups"])


def stand_links(visits: pd.DataFrame) -> list[tuple[str, ...]]:
    """Stands the stand rules may judge together: one vehicle's visits that touch.

    ``unlicensed_stand_use`` compares a vehicle's visits to several stands when they overlap in
    time (a wait excused by a lawful stand) or share the boarding fix (overlapping stands);
    ``queue_jump`` and the queue positions compare visits of one stand. Returns the stand sets
    (two or more stands) of each run of a vehicle's overlapping visits (closed intervals) and of
    each shared boarding fix.
    """
    if len(visits) < 2:
        return []
    vehicle = pd.factorize(visits[fr.VEHICLE_ID].astype("str"))[0].astype(np.int64)
    stand, names = pd.factorize(visits["stand_id"].astype("str"))
    arrived = epoch_ns(visits["arrived_at"])
    departed = epoch_ns(visits["departed_at"])
    board = pd.to_numeric(visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64)
    order = np.lexsort((arrived, vehicle))
    v, a, d = vehicle[order], arrived[order], departed[order]
    first = np.r_[True, v[1:] != v[:-1]]
    # latest departure so far within the vehicle: a running max of (vehicle, departure rank)
    instants, rank = np.unique(d, return_inverse=True)
    width = np.int64(len(instants))
    latest = instants[np.maximum.accumulate(v * width + rank) - v * width]
    new_run = first | (a > np.r_[np.int64(0), latest[:-1]])
    run = np.empty(len(order), dtype=np.int64)
    run[order] = np.cumsum(new_run)
    sets: set[tuple[str, ...]] = set()
    boarded = board >= 0
    keyed = (
        (run, np.ones(len(run), dtype=bool)),
        (vehicle * np.int64(len(board) + 1) + board, boarded),
    )
    for key, keep in keyed:
        pairs = pd.DataFrame({"k": key[keep], "s": stand[keep]}).drop_duplicates()
        multi = pairs["k"].duplicated(keep=False).to_numpy()
        if not multi.any():
            continue
        for _, grp in pairs.loc[multi].groupby("k")["s"]:
            sets.add(tuple(sorted(str(names[c]) for c in grp.tolist())))
    return sorted(sets)


def group_stands(
    stand_visits: dict[str, int], links: Sequence[Sequence[str]], *, n_groups: int
) -> dict[str, int]:
    """Assign each stand with visits to one of ``n_groups`` groups, linked stands together.

    Linked stands (:func:`stand_links`, transitively) form a component; the components,
    heaviest (most visits) first, each go to the group with the fewest visits so far.
    """
    parent = {s: s for s in stand_visits}

    def root(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for linked in links:
        for other in linked[1:]:
            parent.setdefault(linked[0], linked[0])
            parent.setdefault(other, other)
            a, b = root(linked[0]), root(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    components: dict[str, list[str]] = {}
    for s in sorted(parent):
        components.setdefault(root(s), []).append(s)
    weighted = sorted(
        components.values(), key=lambda c: (-sum(stand_visits.get(s, 0) for s in c), c[0])
    )
    load = [0] * max(1, n_groups)
    out: dict[str, int] = {}
    for members in weighted:
        g = min(range(len(load)), key=lambda k: (load[k], k))
        load[g] += sum(stand_visits.get(s, 0) for s in members)
        out |= dict.fromkeys(members, g)
    return out


def _span_mask(
    n: int, first: npt.NDArray[np.int64], last: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Mark positions ``[first, last]`` of each span in ``range(n)``."""
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, np.clip(first, 0, n), 1)
    np.add.at(delta, np.clip(last + 1, 0, n), -1)
    return np.cumsum(delta[:n]) > 0


def split_by_stand(
    result: dict[str, Any], *, piece: int, offset: int, stand_group: dict[str, int], n_groups: int
) -> list[dict[str, pd.DataFrame]]:
    """Cut a partition's visits, and the evidence fixes they point to, by stand group.

    Parameters
    ----------
    result : dict
        :func:`vehicle_stage`'s (not modified).
    piece : int
        The partition's index (kept with each visit, ``_piece`` and ``_row``, to put the run's
        visits back in order).
    offset : int
        The partition's first position in the run's pings.
    stand_group : dict
        Stand id -> group (:func:`group_stands`).
    n_groups : int
        Number of groups.

    Returns
    -------
    list of dict
        Per group: ``visits`` (positions into the run's pings), ``ev_visits`` (positions into
        ``evidence``) and ``evidence``: each visit's fixes from the one before its first to the
        one after its last or boarding fix.
    """
    visits: pd.DataFrame = result["visits"]
    ev_visits: pd.DataFrame = result["evidence_visits"]
    evidence: pd.DataFrame = result["evidence"]
    moved = _shift_positions(visits.assign(_part=0), np.array([offset], dtype=np.int64))
    moved = moved.assign(_piece=piece, _row=np.arange(len(moved), dtype=np.int64))
    group = np.array(
        [stand_group.get(s, 0) for s in visits["stand_id"].astype("str").tolist()], dtype=np.int64
    )
    first = ev_visits["first_ping"].to_numpy(dtype=np.int64)
    last = np.maximum(
        ev_visits["last_ping"].to_numpy(dtype=np.int64),
        pd.to_numeric(ev_visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64),
    )
    out = []
    for g in range(n_groups):
        sel = np.flatnonzero(group == g)
        mask = _span_mask(len(evidence), first[sel] - 1, last[sel] + 1)
        rank = (np.cumsum(mask) - 1).astype(np.int64)
        picked = ev_visits.iloc[sel].reset_index(drop=True)
        out.append(
            {
                "visits": moved.iloc[sel].reset_index(drop=True),
                # no kind of the run reads the visits' fixes: their positions point nowhere
                "ev_visits": _through(picked, rank) if len(evidence) else picked,
                "evidence": evidence.iloc[np.flatnonzero(mask)].reset_index(drop=True),
            }
        )
    return out


def stand_group(
    pieces: Sequence[dict[str, pd.DataFrame]],
    context: dict[str, Any],
    *,
    as_of: dt.date | None,
    licence_known: bool,
) -> dict[str, Any]:
    """Join a stand group's pieces (:func:`split_by_stand`, partition order); run stand_kinds."""
    evidence, ev_visits = join_evidence(
        [p["evidence"] for p in pieces], [p["ev_visits"] for p in pieces]
    )
    visits, occ, found, skipped = stand_kinds(
        _concat([p["visits"] for p in pieces]),
        ev_visits if ev_visits is not None else _NO_FRAME,
        evidence,
        context,
        as_of=as_of,
        licence_known=licence_known,
    )
    return {"visits": visits, "occupancy": occ, "findings": found, "skipped": skipped}


def join_stand_groups(groups: Sequence[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the run's visits (vehicle order) and occupancy from the stand groups' results."""
    visits = _concat([g["visits"] for g in groups])
    visits = visits.sort_values(["_piece", "_row"], ignore_index=True)
    visits = _by_vehicle(visits).drop(columns=["_piece", "_row"])
    occs = [g["occupancy"] for g in groups if len(g["occupancy"])]
    if not occs:
        return visits, empty_occupancy()
    occ = pd.concat(occs, ignore_index=True)
    return visits, occ.sort_values("stand_id", kind="stable", ignore_index=True)


def route_cell_pairs(trips: pd.DataFrame, *, resolution: int) -> npt.NDArray[np.uint64]:
    """Return a key of each trip's pickup and drop-off cells (0 where an end is unknown)."""
    if not len(trips):
        return np.zeros(0, dtype=np.uint64)
    coords = [trips[c].to_numpy(dtype=np.float64) for c in _ROUTE_ENDS]
    ok = np.logical_and.reduce([np.isfinite(c) for c in coords])
    key = np.zeros(len(trips), dtype=np.uint64)
    if ok.any():
        o = latlng_to_cells(coords[0][ok], coords[1][ok], resolution=resolution)
        d = latlng_to_cells(coords[2][ok], coords[3][ok], resolution=resolution)
        key[ok] = (o * np.uint64(0x9E3779B97F4A7C15)) ^ d
    return key


def route_pairs(trips: pd.DataFrame, *, resolution: int) -> dict[int, int]:
    """Return the meter trips of each key of :func:`route_cell_pairs` (what groups them)."""
    keys, n = np.unique(
        route_cell_pairs(_meter_trips(trips), resolution=resolution), return_counts=True
    )
    return dict(zip(keys.tolist(), n.tolist(), strict=True))


_ROUTE_ENDS = ("pickup_lat", "pickup_lon", "dropoff_lat", "dropoff_lon")


def _meter_trips(trips: pd.DataFrame) -> pd.DataFrame:
    """Return the meter trips (all, without a ``source``), without their positions."""
    if "source" in trips.columns:
        trips = trips.loc[(trips["source"].astype("str") == "meter").to_numpy()]
    return trips.drop(columns=[c for c in _ENDS if c in trips.columns]).reset_index(drop=True)


def group_keys(counts: dict[int, int], *, n_groups: int) -> dict[int, int]:
    """Assign keys (cell pairs) to at most ``n_groups`` groups: heaviest first, to the lightest."""
    load = [0] * max(1, min(n_groups, len(counts)))
    out: dict[int, int] = {}
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        g = min(range(len(load)), key=lambda k: (load[k], k))
        load[g] += n
        out[key] = g
    return out


def route_resolution(context: dict[str, Any]) -> int | None:
    """Return the H3 resolution of the cell pairs :func:`route_kinds` judges by, None without it."""
    if ROUTE_KINDS[0] not in context["kinds"]:
        return None
    limits = (context["thresholds"] or {}).get(ROUTE_KINDS[0], {})
    return int(limits.get("h3_resolution", LONGER_ROUTE_H3_RESOLUTION))


def split_by_route(
    result: dict[str, Any], *, resolution: int, pair_group: dict[int, int], n_groups: int
) -> list[dict[str, pd.DataFrame]]:
    """Cut a partition's meter trips, and the evidence fixes inside them, by cell-pair group.

    ``pair_group`` maps the keys of :func:`route_cell_pairs` to groups (:func:`group_keys`).
    Returns per group ``trips`` (without their positions) and ``evidence`` (each trip's fixes
    with one neighbour on each side): :func:`route_piece` of :func:`route_spans`.
    """
    spans = route_spans(result, resolution=resolution, pair_group=pair_group)
    return [route_piece(spans, g) for g in range(n_groups)]


def route_spans(
    result: dict[str, Any], *, resolution: int, pair_group: dict[int, int]
) -> dict[str, Any]:
    """Return a partition's meter trips, their cell-pair groups and their fixes in its evidence.

    ``trips`` (without their positions), ``evidence``, and per trip ``group`` and the span
    ``[lo, hi)`` of its fixes, with the evidence's vehicle ``codes``: what :func:`route_piece`
    cuts, one group at a time.
    """
    trips = _meter_trips(result["trips"])
    evidence: pd.DataFrame = result["evidence"]
    keys = route_cell_pairs(trips, resolution=resolution).tolist()
    codes, lo, hi = _trip_spans(evidence, trips)
    return {
        "trips": trips,
        "evidence": evidence,
        "group": np.array([pair_group.get(k, 0) for k in keys], dtype=np.int64),
        "codes": codes,
        "lo": lo,
        "hi": hi,
    }


def route_piece(spans: dict[str, Any], group: int) -> dict[str, pd.DataFrame]:
    """Return one group's ``trips`` and ``evidence`` from :func:`route_spans`.

    The evidence: each trip's fixes, with one neighbour on each side (:func:`_grown_spans`).
    """
    sel = np.flatnonzero(spans["group"] == group)
    rows = _grown_spans(spans["codes"], spans["lo"][sel], spans["hi"][sel])
    return {
        "trips": spans["trips"].iloc[sel].reset_index(drop=True),
        "evidence": spans["evidence"].iloc[rows].reset_index(drop=True),
    }


def _grown_spans(
    codes: npt.NDArray[np.int64], lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Return the positions in the ``[lo, hi)`` spans, with one neighbour on each side.

    The neighbours of the vehicle (``codes``) only: :func:`_grown` of the spans' mask, found in
    time of the spans' fixes rather than of all fixes.
    """
    keep = hi > lo
    lo, hi, n = lo[keep], hi[keep], len(codes)
    lo = lo - ((lo > 0) & (codes[np.maximum(lo - 1, 0)] == codes[lo]))
    hi = hi + ((hi < n) & (codes[np.minimum(hi, n - 1)] == codes[hi - 1]))
    sizes = hi - lo
    starts = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
    return _sorted_unique(starts + np.arange(int(sizes.sum()), dtype=np.int64))


def route_group(
    pieces: Sequence[dict[str, pd.DataFrame]], context: dict[str, Any], *, as_of: dt.date | None
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Join a cell-pair group's pieces (:func:`split_by_route`); run :func:`route_kinds`."""
    evidence, _ = join_evidence([p["evidence"] for p in pieces])
    trips = _by_vehicle(_concat([p["trips"] for p in pieces]))
    return route_kinds(trips, evidence, context, as_of=as_of)


def vehicle_group(
    result: dict[str, Any],
    context: dict[str, Any],
    *,
    fleet: pd.DataFrame | None,
    as_of: dt.date | None,
    activity_span: ActivitySpan | None,
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run :func:`vehicle_kinds` on a partition's vehicles, ``fleet`` the rows to judge."""
    licences: pd.DataFrame | None = context["licences"]
    if licences is not None and fleet is not None:
        licences = licences.loc[licences[fr.VEHICLE_ID].isin(fleet[fr.VEHICLE_ID]).to_numpy()]
    return vehicle_kinds(
        result["visits"],
        result["trips"].drop(columns=list(_ENDS)),
        context,
        fleet=fleet,
        as_of=as_of,
        licences=licences,
        activity_span=activity_span,
        sightings=result["sightings"],
        near_dwells=result["near"],
        operation=result["operation"],
    )


def part_activity_span(
    result: dict[str, Any], *, as_of: dt.date, timezone: str
) -> ActivitySpan | None:
    """Return the activity span of a partition's trips (``inactivity.activity_span``)."""
    return activity_span(result["trips"], as_of=as_of, timezone=timezone)


def part_outputs(result: dict[str, Any], *, offset: int) -> dict[str, pd.DataFrame]:
    """Return a partition's trips and stops, positions into the run's pings."""
    at = np.array([offset], dtype=np.int64)
    return {
        name: _shift_positions(result[name].assign(_part=0), at, columns=_ENDS)
        for name in ("trips", "stops")
    }


def by_vehicle_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate the partitions' frames (in partition order) and put them in vehicle order."""
    return _by_vehicle(_concat(frames))


def place_group(
    waiting: Sequence[Sequence[dict[str, Any]]], context: dict[str, Any], *, as_of: dt.date | None
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run :func:`place_kinds` on the partitions' waiting stops."""
    return place_kinds([w for part in waiting for w in part], context, as_of=as_of)
