"""Trips: when a vehicle carried a passenger, from where to where, and how far it drove.

Definitions (each one appears in the evidence of the findings built on trips):

trip, from the meter
    A maximal run of consecutive ``occupied`` fixes of one vehicle, split wherever the silence
    between two consecutive fixes exceeds ``max_gap_s``. The pickup is the first fix of the run
    (where the meter went to ``occupied``, or where tracking resumed after a silence), the
    drop-off the last one. A fix with an unknown meter (None) inside a run ends it, since the
    passenger is not known to be aboard. A single occupied fix is a trip of one fix (distance 0),
    so that every meter start is a trip start, as ``stands/visits.py`` expects.
trip, inferred from stops
    Used for a vehicle with no meter data at all (every ``meter`` None or no ``meter`` column).
    The movement between two consecutive stops of the vehicle (:mod:`tracking.stops`) is a trip:
    from the last fix of the first stop (the departure) to the first fix of the next stop (the
    arrival), split at silences longer than ``max_gap_s``; pieces of a single fix are dropped.
    Movement before the first stop or after the last one is not a trip (its ends are unknown),
    nor a movement whose ``distance_m`` stays under :data:`MIN_STOP_MOVE_M` (a stop's extent):
    a parked vehicle whose GPS threw a stretch away and back had one stop cut in two, and did
    not move. These trips say that the vehicle moved, not that it carried anyone.
distance_m
    The length driven, in metres: the sum of great-circle steps between consecutive fixes of the
    trip after two filters against GPS jumps, both driven by the implied speed of a step
    (distance / time between the fixes) compared with ``max_speed_kmh``:

    1. *jump fixes are dropped*: the fixes of a displaced stretch (reached by a too-fast step
       and left by one back to the track, :func:`tracking.validate.displaced_fixes`), an inner
       fix whose steps from the previous and to the next remaining fix are both too fast, and
       an end fix whose only step is too fast while its neighbour's other step is not (the
       neighbour agrees with the rest of the track). This is repeated until no fix is dropped;
       the count is ``n_dropped_fixes``.
    2. *too-fast steps are skipped*: a step between remaining fixes that is still too fast (two
       consistent stretches of track joined by an impossible jump) adds nothing; the count is
       ``n_skipped_steps``.

    Pickup and drop-off stay the first and last fix of the trip, jump or not: they are what the
    meter and the tracker reported.
trip_id
    ``"<vehicle_id>-<started_at as YYYYmmddTHHMMSSZ>"``: stable across runs and readable; unique
    because a vehicle has one fix per instant and trips do not overlap.
meter blip
    An ``occupied`` fix after at most :data:`METER_BLIP_MAX_FIXES` fixes not ``occupied``, which
    follow an ``occupied`` fix of the same stretch at most :data:`METER_BLIP_MAX_S` before it
    (:func:`meter_blip_ends`): the meter read wrong once or twice, not a passenger leaving and
    another boarding. Visits (``stands/visits.py``) and ``outside_municipality`` take no
    boarding from it.
pickup_stand_id
    Taken from ``stand_of_ping`` (the stand each fix is in, from the stands room) at the pickup
    fix when given, else None; the stands room may fill it from visits instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from geo.crs import haversine_m
from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError, PingFrameError
from tracking.stops import detect_stops, prepared_pings
from tracking.validate import MAX_SPEED_KMH, displaced_fixes

TRIP_ID = "trip_id"
N_FIXES = "n_fixes"
FIRST_PING = "first_ping"  # position in the sorted pings of the pickup fix
LAST_PING = "last_ping"
FIRST_ROW = "first_row"  # source data row of the pickup fix (pings ``row``), <NA> if unknown
SOURCE = "source"  # "meter" or "stops"
MIN_STOP_MOVE_M = 50.0
"""A movement between two stops that drove less (jumps filtered) is no trip: the extent of a stop
(:func:`tracking.stops.detect_stops`' ``max_diameter_m``)."""
N_DROPPED_FIXES = "n_dropped_fixes"
N_SKIPPED_STEPS = "n_skipped_steps"
SPREAD_M = "spread_m"  # how far the trip's fixes spread around their mean (radius of gyration)
HELPER_COLUMNS = (
    N_FIXES,
    FIRST_PING,
    LAST_PING,
    FIRST_ROW,
    SOURCE,
    N_DROPPED_FIXES,
    N_SKIPPED_STEPS,
    SPREAD_M,
)

OCCUPIED = "occupied"
METER_BLIP_MAX_FIXES = 2
"""Most fixes not ``occupied`` between two ``occupied`` ones read as a meter blip."""
METER_BLIP_MAX_S = 120.0
"""Longest time from the last ``occupied`` fix before a blip to the ``occupied`` fix after it."""
_NS = 1_000_000_000
_M_PER_DEG = 111_320.0  # metres per degree of latitude (and of longitude at the equator)
_MAX_JUMP_ROUNDS = 20


def detect_trips(
    pings: pd.DataFrame,
    *,
    stops: pd.DataFrame | None = None,
    max_gap_s: float = 300.0,
    max_speed_kmh: float = MAX_SPEED_KMH,
    stand_of_ping: Sequence[str | None] | pd.Series | NDArray[np.object_] | None = None,
) -> pd.DataFrame:
    """Detect the trips of every vehicle, from its meter or, without meter data, its stops.

    Parameters
    ----------
    pings : pandas.DataFrame
        Valid fixes (:mod:`tracking.frames`); ``meter`` optional. An unsorted frame is sorted
        on a copy.
    stops : pandas.DataFrame, optional
        Stops (``vehicle_id``, ``started_at``, ``ended_at``) for the vehicles without meter data;
        detected with :func:`tracking.stops.detect_stops` defaults when not given and needed.
    max_gap_s : float, default 300.0
        A silence longer than this between consecutive fixes splits a trip.
    max_speed_kmh : float, default 250.0
        Implied speed above which a step is a GPS jump (see ``distance_m``).
    stand_of_ping : array-like of str or None, optional
        The stand each fix of ``pings`` (in its given order) is in, None outside stands.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`tracking.frames.TRIP_COLUMNS` then :data:`HELPER_COLUMNS`, sorted by
        (vehicle_id, started_at).

    Raises
    ------
    MissingColumnsError
        If a required column of ``pings`` or ``stops`` is missing.
    PingFrameError
        If timestamps are naive or ``stand_of_ping`` has the wrong length.
    InvalidParameterError
        If a threshold is not positive.
    """
    for name, value in (("max_gap_s", max_gap_s), ("max_speed_kmh", max_speed_kmh)):
        if not value > 0:
            msg = f"'{name}' era {value}; esperado um número positivo"
            raise InvalidParameterError(msg)
    stands = _stand_array(stand_of_ping, len(pings))
    sorted_, codes, vehicles, ts_ns, order = prepared_pings(pings)
    if stands is not None and order is not None:
        stands = stands[order]
    n = len(sorted_)
    if n == 0:
        return empty_trips()
    gap_ns = round(max_gap_s * _NS)
    new_segment = np.ones(n, dtype=bool)
    new_segment[1:] = (codes[1:] != codes[:-1]) | (np.diff(ts_ns) > gap_ns)
    if fr.TRIP_REF in sorted_.columns:  # trip-record datasets: each record is its own trip
        ref = sorted_[fr.TRIP_REF].to_numpy(dtype=object)
        new_segment[1:] |= ref[1:] != ref[:-1]

    if fr.METER in sorted_.columns:
        meter = sorted_[fr.METER]
        known = meter.notna().to_numpy(dtype=bool)
        occupied = (meter == OCCUPIED).fillna(False).to_numpy(dtype=bool)
    else:
        known = np.zeros(n, dtype=bool)
        occupied = np.zeros(n, dtype=bool)
    has_meter = np.bincount(codes, weights=known, minlength=len(vehicles)) > 0

    m_first, m_last = _meter_runs(occupied & has_meter[codes], new_segment)
    s_first, s_last = _stop_moves(
        sorted_, codes, ts_ns, new_segment, ~has_meter, stops, vehicles=vehicles
    )
    first = np.concatenate((m_first, s_first))
    last = np.concatenate((m_last, s_last))
    source = np.concatenate(
        (np.full(len(m_first), "meter", dtype=object), np.full(len(s_first), "stops", dtype=object))
    )
    by_start = np.argsort(first, kind="stable")
    first, last, source = first[by_start], last[by_start], source[by_start]

    lat = sorted_[fr.LAT].to_numpy(dtype=np.float64)
    lon = sorted_[fr.LON].to_numpy(dtype=np.float64)
    track = _TripTrack.of(ts_ns, lat, lon, first, last, max_speed_kmh=max_speed_kmh)
    distance, dropped, skipped = track.driven()
    spread = track.spreads()
    moved = (source != "stops") | (distance >= MIN_STOP_MOVE_M) if len(s_first) else None
    if moved is not None and not moved.all():
        first, last, source = first[moved], last[moved], source[moved]
        distance, dropped, skipped = distance[moved], dropped[moved], skipped[moved]
        spread = spread[moved]
    rows = (
        sorted_[fr.ROW].to_numpy(dtype=np.int64)[first]
        if fr.ROW in sorted_.columns
        else np.full(len(first), -1, dtype=np.int64)
    )
    return _trips_frame(
        vehicles=vehicles,
        codes=codes,
        ts_ns=ts_ns,
        lat=lat,
        lon=lon,
        first=first,
        last=last,
        distance=distance,
        dropped=dropped,
        skipped=skipped,
        spread=spread,
        source=source,
        rows=rows,
        has_rows=fr.ROW in sorted_.columns,
        stands=stands,
    )


@dataclass(frozen=True)
class _TripTrack:
    """The fixes of the trips ``first[k]..last[k]``, laid end to end, with their displaced ones."""

    n_trips: int
    trip: NDArray[np.int64]  # the trip of each fix
    t: NDArray[np.float64]  # epoch seconds
    la: NDArray[np.float64]
    lo: NDArray[np.float64]
    displaced: NDArray[np.bool_]  # tracking.validate.displaced_fixes, within each trip
    max_speed_kmh: float  # implied speed above which a step is a jump

    @classmethod
    def of(
        cls,
        ts_ns: NDArray[np.int64],
        lat: NDArray[np.float64],
        lon: NDArray[np.float64],
        first: NDArray[np.int64],
        last: NDArray[np.int64],
        *,
        max_speed_kmh: float,
    ) -> _TripTrack:
        lengths = last - first + 1
        trip = np.repeat(np.arange(len(first)), lengths)
        pos = np.arange(len(trip)) - (np.cumsum(lengths) - lengths)[trip] + first[trip]
        la, lo = lat[pos], lon[pos]
        displaced = displaced_fixes(trip, ts_ns[pos], la, lo, max_speed_kmh=max_speed_kmh)
        t = ts_ns[pos].astype(np.float64) / _NS
        return cls(len(first), trip, t, la, lo, displaced, max_speed_kmh)

    def spreads(self) -> NDArray[np.float64]:
        """How far each trip's fixes spread around their mean: the radius of gyration, in metres.

        Displaced stretches are left out. Unlike the driven length, which GPS noise inflates
        step by step (a parked car's fixes 5 m apart every 15 s add 360 m in 10 minutes), the
        spread of a parked car stays at the noise (about 1.4 times its sigma per axis), while a
        ride of L metres spreads by about 0.29 L. NaN for a trip with no fix left.
        """
        k = self.n_trips
        keep = ~self.displaced
        tr, la, lo = self.trip[keep], self.la[keep], self.lo[keep]
        n = np.bincount(tr, minlength=k).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_la = np.bincount(tr, weights=la, minlength=k) / n
            mean_lo = np.bincount(tr, weights=lo, minlength=k) / n
            dy = (la - mean_la[tr]) * _M_PER_DEG
            dx = (lo - mean_lo[tr]) * _M_PER_DEG * np.cos(np.radians(mean_la[tr]))
            spread: NDArray[np.float64] = np.sqrt(
                np.bincount(tr, weights=dx * dx + dy * dy, minlength=k) / n
            )
        return spread

    def driven(self) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
        """Driven length, jump fixes dropped and too-fast steps skipped: see trip_distances."""
        k, trip, t, la, lo = self.n_trips, self.trip, self.t, self.la, self.lo
        reach_m_per_s = self.max_speed_kmh / 3.6

        def steps(
            idx: NDArray[np.intp], d: NDArray[np.float64] | None = None
        ) -> tuple[NDArray[Any], ...]:
            tr = trip[idx]
            same = tr[1:] == tr[:-1]
            if d is None:
                d = haversine_m(la[idx[:-1]], lo[idx[:-1]], la[idx[1:]], lo[idx[1:]])
            fast = same & (d > reach_m_per_s * (t[idx[1:]] - t[idx[:-1]]))
            return tr, same, d, fast

        # Displaced stretches first; then jump fixes, round by round.
        idx = np.flatnonzero(~self.displaced)
        tr, same, d, fast = steps(idx)
        for _ in range(_MAX_JUMP_ROUNDS):
            if not fast.any():
                break
            m = len(idx)
            has_in = np.concatenate(([False], same))
            has_out = np.concatenate((same, [False]))
            in_fast = np.concatenate(([False], fast))
            out_fast = np.concatenate((fast, [False]))
            # The step on the far side of the neighbour: does the neighbour agree with the track?
            next_out_fast = np.concatenate((out_fast[1:], [False]))
            next_has_out = np.concatenate((has_out[1:], [False]))
            prev_in_fast = np.concatenate(([False], in_fast[:-1]))
            prev_has_in = np.concatenate(([False], has_in[:-1]))
            inner = has_in & has_out & in_fast & out_fast
            head = ~has_in & has_out & out_fast & next_has_out & ~next_out_fast
            tail = has_in & ~has_out & in_fast & prev_has_in & ~prev_in_fast
            jump = inner | head | tail
            if not jump.any():
                break
            # Drop the jumps; a step between two fixes that stay neighbours keeps its length.
            kept = np.flatnonzero(~jump[:m])
            idx = idx[kept]
            again = kept[1:] != kept[:-1] + 1
            d = d[kept[:-1]]
            new = np.flatnonzero(again)
            d[new] = haversine_m(la[idx[new]], lo[idx[new]], la[idx[new + 1]], lo[idx[new + 1]])
            tr, same, d, fast = steps(idx, d)

        alive = np.zeros(len(trip), dtype=bool)
        alive[idx] = True
        counted = same & ~fast
        distance = np.bincount(tr[1:][counted], weights=d[counted], minlength=k)
        skipped = np.bincount(tr[1:][fast], minlength=k).astype(np.int64)
        dropped = np.bincount(trip[~alive], minlength=k).astype(np.int64)
        return distance.astype(np.float64), dropped, skipped


def meter_blip_ends(
    occupied: NDArray[np.bool_],
    stretch: NDArray[np.int64],
    t_ns: NDArray[np.int64],
    starts: NDArray[np.integer[Any]],
) -> NDArray[np.bool_]:
    """Say which of ``starts`` end a meter blip (the module's definition).

    Parameters
    ----------
    occupied : numpy.ndarray of bool
        Per fix, sorted by vehicle and time: the meter reads ``occupied``.
    stretch : numpy.ndarray of int64
        Per fix: a number shared by consecutive fixes of one vehicle with no silence between
        them (the vehicle's code, where silences do not split).
    t_ns : numpy.ndarray of int64
        Per fix: its instant (epoch nanoseconds).
    starts : numpy.ndarray of int
        Positions of ``occupied`` fixes after one that is not (meter starts).

    Returns
    -------
    numpy.ndarray of bool
        One per start: True when it ends a blip.
    """
    starts = np.asarray(starts, dtype=np.int64)
    out = np.zeros(len(starts), dtype=bool)
    between = np.ones(len(starts), dtype=bool)  # every fix since the candidate not occupied
    for k in range(1, METER_BLIP_MAX_FIXES + 1):
        gap = np.maximum(starts - k, 0)
        between &= (starts - k >= 0) & ~occupied[gap] & (stretch[gap] == stretch[starts])
        before = np.maximum(starts - k - 1, 0)
        out |= (
            between
            & (starts - k - 1 >= 0)
            & occupied[before]
            & (stretch[before] == stretch[starts])
            & (t_ns[starts] - t_ns[before] <= round(METER_BLIP_MAX_S * _NS))
        )
    return out


def trip_distances(
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    first: NDArray[np.int64],
    last: NDArray[np.int64],
    *,
    max_speed_kmh: float,
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """Driven length of each trip ``first[k]..last[k]`` with GPS jumps filtered out.

    Parameters
    ----------
    ts_ns : numpy.ndarray
        Epoch nanoseconds, increasing within each trip.
    lat, lon : numpy.ndarray
        Degrees.
    first, last : numpy.ndarray
        Positions of the first and last fix of each trip (disjoint ranges).
    max_speed_kmh : float
        Implied speed above which a step is a jump.

    Returns
    -------
    distance_m : numpy.ndarray
        Metres per trip (see the module docstring for the filters).
    n_dropped_fixes, n_skipped_steps : numpy.ndarray
        Per trip, the jump fixes dropped and the too-fast steps skipped.
    """
    if len(first) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    track = _TripTrack.of(ts_ns, lat, lon, first, last, max_speed_kmh=max_speed_kmh)
    return track.driven()


def assign_trip_ids(pings: pd.DataFrame, trips: pd.DataFrame) -> pd.Series:
    """Return the trip each fix belongs to, by vehicle and time.

    A fix belongs to a trip of its vehicle when ``started_at <= timestamp <= ended_at``; the
    fix that starts a trip is the one whose timestamp equals the trip's ``started_at``.

    Parameters
    ----------
    pings : pandas.DataFrame
        Fixes with ``vehicle_id`` and tz-aware ``timestamp``, in any order.
    trips : pandas.DataFrame
        Trips with ``vehicle_id``, ``trip_id``, ``started_at``, ``ended_at`` (non-overlapping per
        vehicle, as :func:`detect_trips` makes them).

    Returns
    -------
    pandas.Series
        ``trip_id`` (pandas ``str``, missing outside trips), aligned with ``pings.index``.

    Raises
    ------
    MissingColumnsError
        If a required column is missing.
    PingFrameError
        If timestamps are naive.
    """
    needed = [c for c in (fr.VEHICLE_ID, fr.TIMESTAMP) if c not in pings.columns]
    needed += [c for c in (fr.VEHICLE_ID, TRIP_ID, "started_at", "ended_at") if c not in trips]
    if needed:
        msg = f"faltam coluna(s) para atribuir viagens: {', '.join(dict.fromkeys(needed))}"
        raise MissingColumnsError(msg)
    p_ts = _ns(pings[fr.TIMESTAMP], "timestamp")
    if not len(trips):
        return pd.Series(
            np.full(len(pings), None, dtype=object), index=pings.index, dtype="str", name=TRIP_ID
        )
    t_start = _ns(trips["started_at"], "started_at")
    t_end = _ns(trips["ended_at"], "ended_at")
    both = pd.concat(
        [pings[fr.VEHICLE_ID].astype("str"), trips[fr.VEHICLE_ID].astype("str")],
        ignore_index=True,
    )
    codes = pd.factorize(both)[0].astype(np.int64)
    p_code, t_code = codes[: len(pings)], codes[len(pings) :]
    # Merge trip starts and fixes in (vehicle, time) order; a start sorts before a fix at the
    # same instant, so that fix belongs to the trip.
    all_code = np.concatenate((t_code, p_code))
    all_ts = np.concatenate((t_start, p_ts))
    kind = np.concatenate((np.zeros(len(trips), np.int8), np.ones(len(pings), np.int8)))
    order = np.lexsort((kind, all_ts, all_code))
    is_start = kind[order] == 0
    rank = np.where(is_start, np.arange(len(order)), -1)
    last_start = np.maximum.accumulate(rank)  # merged rank of the latest trip start so far
    fix = ~is_start
    ping_pos = order[fix] - len(trips)
    cand = last_start[fix]
    valid = cand >= 0
    safe = np.where(valid, order[np.maximum(cand, 0)], 0)  # index into trips
    valid &= (t_code[safe] == p_code[ping_pos]) & (p_ts[ping_pos] <= t_end[safe])
    out = np.full(len(pings), None, dtype=object)
    ids = trips[TRIP_ID].astype("str").to_numpy(dtype=object)
    out[ping_pos[valid]] = ids[safe[valid]]
    return pd.Series(out, index=pings.index, dtype="str", name=TRIP_ID)


def empty_trips() -> pd.DataFrame:
    """Return an empty, correctly typed trips frame.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`tracking.frames.TRIP_COLUMNS` then :data:`HELPER_COLUMNS`.
    """
    none = np.zeros(0, dtype=np.int64)
    return _trips_frame(
        vehicles=pd.Index([], dtype="str"),
        codes=none,
        ts_ns=none,
        lat=np.zeros(0),
        lon=np.zeros(0),
        first=none,
        last=none,
        distance=np.zeros(0),
        dropped=none,
        skipped=none,
        spread=np.zeros(0),
        source=np.zeros(0, dtype=object),
        rows=none,
        has_rows=False,
        stands=None,
    )


# --- private -------------------------------------------------------------------------------


def _stand_array(
    stand_of_ping: Sequence[str | None] | pd.Series | NDArray[np.object_] | None, n: int
) -> NDArray[np.object_] | None:
    if stand_of_ping is None:
        return None
    values = (
        stand_of_ping.to_numpy(dtype=object)
        if isinstance(stand_of_ping, pd.Series)
        else np.asarray(stand_of_ping, dtype=object)
    )
    if values.shape != (n,):
        msg = f"'stand_of_ping' tem {values.size} valores; esperado um por ping ({n})"
        raise PingFrameError(msg)
    values = values.copy()
    values[pd.isna(values)] = None
    return values


def _meter_runs(
    occupied: NDArray[np.bool_], new_segment: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """First and last position of each run of occupied fixes not crossing a segment break."""
    prev_occ = np.concatenate(([False], occupied[:-1]))
    next_occ = np.concatenate((occupied[1:], [False]))
    next_new = np.concatenate((new_segment[1:], [True]))
    start = occupied & (new_segment | ~prev_occ)
    end = occupied & (next_new | ~next_occ)
    return np.flatnonzero(start).astype(np.int64), np.flatnonzero(end).astype(np.int64)


def _stop_moves(
    pings: pd.DataFrame,
    codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    new_segment: NDArray[np.bool_],
    vehicle_mask: NDArray[np.bool_],
    stops: pd.DataFrame | None,
    *,
    vehicles: pd.Index,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Movements between consecutive stops of the vehicles in ``vehicle_mask``, split at gaps."""
    none = np.zeros(0, dtype=np.int64)
    in_scope = vehicle_mask[codes]
    if not in_scope.any():
        return none, none
    if stops is None:
        stops = detect_stops(pings.loc[in_scope])
    missing = [c for c in (fr.VEHICLE_ID, "started_at", "ended_at") if c not in stops.columns]
    if missing:
        msg = f"faltam coluna(s) nas paradas: {', '.join(missing)}"
        raise MissingColumnsError(msg)
    if not len(stops):
        return none, none
    s_code = vehicles.get_indexer(pd.Index(stops[fr.VEHICLE_ID].astype("str")))
    s_start = _ns(stops["started_at"], "started_at")
    s_end = _ns(stops["ended_at"], "ended_at")
    keep = s_code >= 0
    keep[keep] = vehicle_mask[s_code[keep]]
    s_code, s_start, s_end = s_code[keep], s_start[keep], s_end[keep]
    order = np.lexsort((s_start, s_code))
    s_code, s_start, s_end = s_code[order], s_start[order], s_end[order]
    if len(s_code) < 2:
        return none, none
    consecutive = s_code[1:] == s_code[:-1]
    # Departure = last fix at or before the stop's end; arrival = first fix at or after the
    # next stop's start.
    depart = _fix_at(codes, ts_ns, s_code[:-1], s_end[:-1], before=True)
    arrive = _fix_at(codes, ts_ns, s_code[1:], s_start[1:], before=False)
    ok = consecutive & (depart >= 0) & (arrive >= 0) & (arrive > depart)
    depart, arrive = depart[ok], arrive[ok]
    if not len(depart):
        return none, none
    # Split each movement at silences: pieces are runs between segment breaks.
    lengths = arrive - depart + 1
    move = np.repeat(np.arange(len(depart)), lengths)
    pos = np.arange(len(move)) - (np.cumsum(lengths) - lengths)[move] + depart[move]
    piece_start = np.ones(len(pos), dtype=bool)
    piece_start[1:] = (move[1:] != move[:-1]) | new_segment[pos[1:]]
    starts = np.flatnonzero(piece_start)
    ends = np.concatenate((starts[1:] - 1, [len(pos) - 1]))
    multi = ends > starts
    return pos[starts[multi]].astype(np.int64), pos[ends[multi]].astype(np.int64)


def _fix_at(
    codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    q_code: NDArray[np.int64],
    q_ts: NDArray[np.int64],
    *,
    before: bool,
) -> NDArray[np.int64]:
    """Position of the vehicle's last fix at or before (first at or after) each query; -1 if none.

    Fixes are sorted by (code, time); queries and fixes are merged in one (code, time) order.
    """
    n, q = len(ts_ns), len(q_ts)
    # At equal instants the fix sorts on the side where it counts as "at".
    kind = np.concatenate(
        (np.full(n, 0 if before else 1, np.int8), np.full(q, 1 if before else 0, np.int8))
    )
    all_code = np.concatenate((codes, q_code))
    order = np.lexsort((kind, np.concatenate((ts_ns, q_ts)), all_code))
    is_fix = order < n
    rank = np.arange(len(order))
    if before:
        seen = np.maximum.accumulate(np.where(is_fix, rank, -1))
    else:
        seen = np.minimum.accumulate(np.where(is_fix, rank, len(order))[::-1])[::-1]
    at_query = seen[~is_fix]
    query = order[~is_fix] - n
    out = np.full(q, -1, dtype=np.int64)
    found = (at_query >= 0) & (at_query < len(order))
    fix_pos = order[np.clip(at_query, 0, len(order) - 1)]
    found &= all_code[fix_pos] == q_code[query]
    out[query[found]] = fix_pos[found]
    return out


def _ns(col: pd.Series, name: str) -> NDArray[np.int64]:
    if not isinstance(col.dtype, pd.DatetimeTZDtype):
        msg = f"'{name}' é {col.dtype}; esperado data/hora com fuso (UTC)"
        raise PingFrameError(msg)
    utc = col.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    return np.asarray(utc.to_numpy(dtype="datetime64[ns]").view(np.int64))


def _trips_frame(
    *,
    vehicles: pd.Index,
    codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    first: NDArray[np.int64],
    last: NDArray[np.int64],
    distance: NDArray[np.float64],
    dropped: NDArray[np.int64],
    skipped: NDArray[np.int64],
    spread: NDArray[np.float64],
    source: NDArray[np.object_],
    rows: NDArray[np.int64],
    has_rows: bool,
    stands: NDArray[np.object_] | None,
) -> pd.DataFrame:
    vehicle = pd.Series(vehicles.take(codes[first]), dtype="str")
    started = pd.Series(ts_ns[first].view("datetime64[ns]")).dt.tz_localize("UTC")
    ended = pd.Series(ts_ns[last].view("datetime64[ns]")).dt.tz_localize("UTC")
    trip_id = vehicle + "-" + started.dt.strftime("%Y%m%dT%H%M%SZ").astype("str")
    pickup_stand = stands[first] if stands is not None else np.full(len(first), None, dtype=object)
    first_row = pd.array(rows, dtype="Int64")
    if not has_rows:
        first_row = pd.array(np.full(len(first), pd.NA), dtype="Int64")
    return pd.DataFrame(
        {
            fr.VEHICLE_ID: vehicle,
            TRIP_ID: trip_id.astype("str"),
            "started_at": started,
            "ended_at": ended,
            "pickup_lat": lat[first],
            "pickup_lon": lon[first],
            "dropoff_lat": lat[last],
            "dropoff_lon": lon[last],
            "distance_m": distance,
            "pickup_stand_id": pd.Series(pickup_stand, dtype="object"),
            N_FIXES: (last - first + 1).astype(np.int64),
            FIRST_PING: first.astype(np.int64),
            LAST_PING: last.astype(np.int64),
            FIRST_ROW: first_row,
            SOURCE: pd.Series(source, dtype="str"),
            N_DROPPED_FIXES: dropped.astype(np.int64),
            N_SKIPPED_STEPS: skipped.astype(np.int64),
            SPREAD_M: spread.astype(np.float64),
        }
    )
