"""Stand visits: when each vehicle was at each stand, its place in the queue, whether it boarded.

Definitions (every one is shown in the evidence of the findings built on visits):

visit
    A run of a vehicle's fixes inside one stand (``memberships`` say which fixes are inside which
    stands; stands may overlap, so a fix may belong to visits of several stands at once). The
    run tolerates GPS jitter with hysteresis: an *excursion* — fixes outside the stand followed
    by a fix back inside — does not split the visit when it lasts at most ``exit_grace_s``,
    measured from the first fix outside to the first fix back inside; nor, when the stands'
    geometries are given, when every fix of it stays within ``exit_grace_m`` of the stand and it
    lasts at most ``near_exit_grace_s`` (a taxi waiting in its place whose GPS drifts just
    outside a small stand for minutes is still waiting there). A silence (two consecutive fixes
    of the vehicle more than ``max_gap_s`` apart) anywhere in the run ends the visit.
arrived_at, departed_at
    The first and the last fix *inside* the stand (not the first fix outside: we only assert
    what was observed). ``dwell_s = departed_at - arrived_at``; a one-fix visit has dwell 0.
trip start
    As in ``tracking/trips.py``: a fix with meter ``occupied`` whose previous fix of the vehicle
    is not ``occupied`` (``free``, ``off`` or unknown), or is more than ``max_gap_s`` earlier,
    or does not exist, or belongs to another trip record (``trip_ref``, trip-record datasets
    such as Porto's, where every fix is occupied and each record is one passenger trip).
boarding
    Where the meter comes on, in time *and* in space. The candidate is the first trip start of
    the vehicle at or after the visit's arrival. The visit is ``boarded`` when that fix

    - lies within the visit (between its first and last inside fix), or comes after the last
      inside fix by at most ``boarding_grace_s`` (default 120 s) with no silence in between —
      the meter switched on while pulling out of the stand; and
    - lies inside the stand's polygon, or within ``boarding_grace_m`` (default 30 m) of its
      edge: ``boarding_distance_m``, measured from the fix to the stand's geometry in the
      fix's UTM zone (:func:`geo.crs.distance_to_geometries_m`; 0 inside). Those metres
      absorb GPS jitter at the edge and a meter switched on in the street beside the stand.

    A taxi that drops its passenger at the stand and switches the meter on again 600 m away a
    minute later did not board at the stand: a drop-off at a stand is not a boarding. If the
    candidate fails either test the visit is not boarded (a later trip start does not count).
    Without the stands' geometries (``stands`` not given) the distance of a fix outside the
    stand is unknown and only trip starts inside it count. A vehicle whose meter is unknown
    (None) never boards. One trip start may mark visits of several stands (overlapping
    stands, or stands within ``boarding_grace_m`` of each other); ``boarding_ping`` identifies
    the start so that consumers can tell. ``boarded_at`` is the time of that fix: "a
    boarding's time is the departure from the stand with the passenger" (PRODUCT.md);
    ``boarding_lag_s = boarded_at - departed_at`` (<= 0 when the meter came on within the
    visit).
minimum dwell
    Visits shorter than ``min_dwell_s`` are pass-throughs and are dropped, unless boarded (a
    boarding always makes a visit — in the Porto data all fixes are occupied, so the boarding
    visit is often a single fix).
queue_position
    At the arrival instant: 1 + the number of other vehicles whose (kept) visit to the same stand
    is in progress — arrived earlier (same instant: smaller ``vehicle_id`` first) and with
    ``departed_at >= arrived_at`` of this visit. Visits are closed intervals
    [arrived_at, departed_at] here and in ``stands/occupancy.py``.
licensed
    Whether the vehicle holds a parking licence for the stand on the local date of arrival
    (``stands/licences.py``); <NA> when no licence data is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyproj

from geo.calendar import DEFAULT_TIMEZONE
from geo.cover import StandCover, match_stands
from geo.crs import WGS84, distance_to_geometries_m, require_geographic
from stands._errors import (
    MembershipError,
    MissingColumnError,
    NaiveTimestampError,
    PingFrameError,
    ThresholdError,
)
from stands.frames import STAND_ID
from stands.licences import check_timezone, is_licensed
from tracking.arrays import epoch_ns, vehicle_codes
from tracking.frames import (
    LAT,
    LON,
    METER,
    METER_VALUES,
    ROW,
    TIMESTAMP,
    TRIP_REF,
    VEHICLE_ID,
    VISIT_COLUMNS,
)

PING_INDEX = "ping_index"
MEMBERSHIP_COLUMNS = (PING_INDEX, STAND_ID)
OCCUPIED = "occupied"

# Helper columns that explain a visit (kept in memory; the CSV writer selects VISIT_COLUMNS).
N_FIXES = "n_fixes"
FIRST_PING = "first_ping"  # positional index into ``pings`` of the first inside fix
LAST_PING = "last_ping"
FIRST_ROW = "first_row"  # 1-based data row of the source file (pings ``row``), <NA> if unknown
LAST_ROW = "last_row"
BOARDED_AT = "boarded_at"
BOARDING_PING = "boarding_ping"
BOARDING_ROW = "boarding_row"
BOARDING_LAG_S = "boarding_lag_s"  # boarded_at - departed_at; <= 0 when the meter started inside
BOARDING_DISTANCE_M = "boarding_distance_m"  # boarding fix to the stand's geometry; 0 inside
HELPER_COLUMNS = (
    N_FIXES,
    FIRST_PING,
    LAST_PING,
    FIRST_ROW,
    LAST_ROW,
    BOARDED_AT,
    BOARDING_PING,
    BOARDING_ROW,
    BOARDING_LAG_S,
    BOARDING_DISTANCE_M,
)
VISIT_FRAME_COLUMNS = (*VISIT_COLUMNS, *HELPER_COLUMNS)

_NS = 1_000_000_000
DEFAULT_EXIT_GRACE_S = 60.0
DEFAULT_EXIT_GRACE_M = 30.0
"""A taxi whose fixes stay this close to its stand has not left it (GPS drift at a small stand)."""
DEFAULT_NEAR_EXIT_GRACE_S = 900.0
"""Longest drift within ``DEFAULT_EXIT_GRACE_M`` of the stand that does not split a visit."""
DEFAULT_MIN_DWELL_S = 60.0
"""Shortest stay that is a visit."""
DEFAULT_BOARDING_GRACE_S = 120.0
DEFAULT_BOARDING_GRACE_M = 30.0
"""A meter switched on this soon after leaving, and this close to the stand, is a boarding there."""
DEFAULT_VISIT_MAX_GAP_S = 600.0
"""Longest silence inside a stand that does not end the visit."""
_UTC_NS = pd.DatetimeTZDtype("ns", "UTC")


def empty_visits() -> pd.DataFrame:
    """Return an empty, correctly typed visits frame.

    Returns
    -------
    pandas.DataFrame
        Columns ``VISIT_FRAME_COLUMNS``, zero rows.
    """
    return _visit_frame(
        vehicle_id=np.array([], dtype=object),
        stand_id=np.array([], dtype=object),
        arrived_ns=np.array([], dtype=np.int64),
        departed_ns=np.array([], dtype=np.int64),
        queue_position=np.array([], dtype=np.int64),
        boarded=np.array([], dtype=bool),
        licensed=None,
        n_fixes=np.array([], dtype=np.int64),
        first_ping=np.array([], dtype=np.int64),
        last_ping=np.array([], dtype=np.int64),
        rows=None,
        boarding_ping=np.array([], dtype=np.int64),
        boarded_ns=np.array([], dtype=np.int64),
        boarding_m=np.array([], dtype=np.float64),
    )


def _visit_frame(
    *,
    vehicle_id: npt.NDArray[np.object_],
    stand_id: npt.NDArray[np.object_],
    arrived_ns: npt.NDArray[np.int64],
    departed_ns: npt.NDArray[np.int64],
    queue_position: npt.NDArray[np.int64],
    boarded: npt.NDArray[np.bool_],
    licensed: npt.NDArray[np.bool_] | None,
    n_fixes: npt.NDArray[np.int64],
    first_ping: npt.NDArray[np.int64],
    last_ping: npt.NDArray[np.int64],
    rows: pd.arrays.IntegerArray | None,
    boarding_ping: npt.NDArray[np.int64],
    boarded_ns: npt.NDArray[np.int64],
    boarding_m: npt.NDArray[np.float64],
) -> pd.DataFrame:
    """Assemble the typed visits frame; ``boarding_ping``/``boarded_ns`` are -1 when unboarded."""
    n = len(vehicle_id)

    def utc(ns: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_] | None = None) -> pd.Series:
        values: pd.Series = pd.Series(pd.to_datetime(ns, unit="ns", utc=True)).astype(_UTC_NS)
        return values if mask is None else values.where(~mask)

    def nullable(values: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_]) -> pd.Series:
        return pd.Series(pd.arrays.IntegerArray(values.astype(np.int64), mask.copy()))

    unboarded = boarding_ping < 0
    if rows is None:
        first_row = nullable(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
        last_row = first_row.copy()
        boarding_row = first_row.copy()
    else:
        first_row = pd.Series(rows[first_ping], dtype="Int64")
        last_row = pd.Series(rows[last_ping], dtype="Int64")
        boarding_row = pd.Series(rows[np.where(unboarded, 0, boarding_ping)], dtype="Int64")
        boarding_row = boarding_row.mask(unboarded)
    lag_s = np.where(unboarded, np.nan, (boarded_ns - departed_ns) / _NS)
    return pd.DataFrame(
        {
            VEHICLE_ID: pd.Series(vehicle_id, dtype="str"),
            STAND_ID: pd.Series(stand_id, dtype="str"),
            "arrived_at": utc(arrived_ns),
            "departed_at": utc(departed_ns),
            "dwell_s": pd.Series((departed_ns - arrived_ns) / _NS, dtype="float64"),
            "queue_position": pd.Series(queue_position, dtype="int64"),
            "boarded": pd.Series(boarded, dtype="bool"),
            "licensed": pd.Series(
                pd.array([pd.NA] * n if licensed is None else licensed, dtype="boolean")
            ),
            N_FIXES: pd.Series(n_fixes, dtype="int64"),
            FIRST_PING: pd.Series(first_ping, dtype="int64"),
            LAST_PING: pd.Series(last_ping, dtype="int64"),
            FIRST_ROW: first_row,
            LAST_ROW: last_row,
            BOARDED_AT: utc(np.where(unboarded, 0, boarded_ns), unboarded),
            BOARDING_PING: nullable(np.where(unboarded, 0, boarding_ping), unboarded),
            BOARDING_ROW: boarding_row,
            BOARDING_LAG_S: pd.Series(lag_s, dtype="float64"),
            BOARDING_DISTANCE_M: pd.Series(
                np.where(unboarded, np.nan, boarding_m), dtype="float64"
            ),
        }
    )


def _check_thresholds(**values: float) -> None:
    for name, value in values.items():
        ok = isinstance(value, int | float) and math.isfinite(value) and value >= 0
        if name == "max_gap_s":
            ok = ok and value > 0
        if not ok:
            bound = "> 0" if name == "max_gap_s" else ">= 0"
            unit = "metros" if name.endswith("_m") else "segundos"
            msg = f"'{name}' foi {value!r}; esperado um número finito {bound} ({unit})"
            raise ThresholdError(msg)


def stand_geometries(stands: gpd.GeoDataFrame, stand_ids: npt.NDArray[np.object_]) -> Any:
    """Return the geometry (EPSG:4326) of each of ``stand_ids`` in ``stands`` (object array).

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (``stands/frames.py``): ``stand_id`` and a polygon geometry, EPSG:4326.
    stand_ids : numpy.ndarray of str
        The stands wanted.

    Raises
    ------
    MissingColumnError
        If ``stands`` has no ``stand_id``.
    MembershipError
        If a wanted stand is not in ``stands``, or the frame is not in EPSG:4326.
    """
    if STAND_ID not in stands.columns:
        msg = "os pontos não têm a coluna stand_id; esperado o quadro de pontos (stands/frames.py)"
        raise MissingColumnError(msg)
    crs = require_geographic(stands, what="pontos de táxi")
    if not pyproj.CRS(crs).equals(WGS84):
        msg = f"CRS dos pontos de táxi era {crs.to_string()}; esperado EPSG:4326"
        raise MembershipError(msg)
    by_id = pd.Series(stands.geometry.to_numpy(), index=stands[STAND_ID].astype("str").to_numpy())
    by_id = by_id[~by_id.index.duplicated()]
    missing = [str(s) for s in stand_ids if str(s) not in by_id.index]
    if missing:
        shown = ", ".join(repr(s) for s in missing[:5])
        msg = f"as pertinências citam pontos ausentes do quadro de pontos: {shown}"
        raise MembershipError(msg)
    return by_id.reindex([str(s) for s in stand_ids]).to_numpy(dtype=object)


def _ping_arrays(
    pings: pd.DataFrame,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_], npt.NDArray[np.int64]]:
    """Validate pings; return vehicle codes (sorted by id), vehicle ids and times in ns."""
    missing = [c for c in (VEHICLE_ID, TIMESTAMP) if c not in pings.columns]
    if missing:
        msg = f"os pings não têm as colunas {', '.join(missing)}; esperado vehicle_id e timestamp"
        raise MissingColumnError(msg)
    ts = pings[TIMESTAMP]
    if not isinstance(ts.dtype, pd.DatetimeTZDtype):
        msg = (
            f"'timestamp' dos pings é {ts.dtype} sem fuso horário; "
            "esperados instantes com fuso (UTC)"
        )
        raise NaiveTimestampError(msg)
    if ts.isna().any():
        msg = f"'timestamp' dos pings tem {int(ts.isna().sum())} instantes nulos"
        raise NaiveTimestampError(msg)
    if pings[VEHICLE_ID].isna().any():
        msg = f"'vehicle_id' dos pings tem {int(pings[VEHICLE_ID].isna().sum())} valores nulos"
        raise PingFrameError(msg)
    if METER in pings.columns:
        bad = pings[METER].notna() & ~pings[METER].isin(METER_VALUES)
        if bad.any():
            msg = (
                f"'meter' foi {pings[METER][bad].iloc[0]!r}; "
                f"esperado um de {', '.join(METER_VALUES)} ou vazio"
            )
            raise PingFrameError(msg)
    codes, uniques = vehicle_codes(pings[VEHICLE_ID])
    return codes, uniques, epoch_ns(ts)


def _membership_arrays(
    memberships: pd.DataFrame, n_pings: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """Validate memberships; return ping positions, stand codes (sorted by id), stand ids."""
    missing = [c for c in MEMBERSHIP_COLUMNS if c not in memberships.columns]
    if missing:
        msg = (
            f"as pertinências a pontos não têm as colunas {', '.join(missing)}; "
            f"esperado {', '.join(MEMBERSHIP_COLUMNS)}"
        )
        raise MissingColumnError(msg)
    idx = memberships[PING_INDEX]
    if len(idx) and not pd.api.types.is_integer_dtype(idx.dtype):
        msg = f"'ping_index' é {idx.dtype}; esperados inteiros (posição do ping no quadro)"
        raise MembershipError(msg)
    if memberships[STAND_ID].isna().any():
        msg = f"'stand_id' das pertinências tem {int(memberships[STAND_ID].isna().sum())} nulos"
        raise MembershipError(msg)
    ping_index = idx.to_numpy(dtype=np.int64)
    bad = (ping_index < 0) | (ping_index >= n_pings)
    if bad.any():
        msg = (
            f"'ping_index' {int(ping_index[bad][0])} fora do intervalo dos pings "
            f"(0 a {n_pings - 1}); {int(bad.sum())} pertinências inválidas"
        )
        raise MembershipError(msg)
    codes, uniques = pd.factorize(memberships[STAND_ID].astype("str"), sort=True)
    return ping_index, codes.astype(np.int64), np.asarray(uniques, dtype=object)


def dense_rank(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    """Dense 0-based ranks of ``values`` and the number of distinct values (sort-based).

    Parameters
    ----------
    values : numpy.ndarray of int64
        Values to rank.

    Returns
    -------
    tuple of (numpy.ndarray of int64, int)
        Rank of each value (equal values share a rank) and the number of distinct values.
    """
    if len(values) == 0:
        return np.array([], dtype=np.int64), 0
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    step = np.empty(len(values), dtype=np.int64)
    step[0] = 0
    step[1:] = ordered[1:] != ordered[:-1]
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.cumsum(step)
    return ranks, int(ranks[order[-1]]) + 1


def queue_positions(
    stand: npt.NDArray[np.int64],
    vehicle: npt.NDArray[np.int64],
    arrived: npt.NDArray[np.int64],
    departed: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """1 + visits of the same stand ahead in arrival order and not departed before arrival.

    Ahead: earlier ``arrived`` (ties: smaller vehicle code, codes being sorted by vehicle_id).
    Departed before i arrived: ``departed_j < arrived_i`` (which implies ahead). So the position
    is 1 + rank_in_stand - #{j in stand: departed_j < arrived_i}; a sweep with searchsorted.
    """
    m = len(stand)
    if m == 0:
        return np.array([], dtype=np.int64)
    order = np.lexsort((vehicle, arrived, stand))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m, dtype=np.int64)
    stand_start = np.searchsorted(stand[order], stand, side="left")
    ahead = rank - stand_start
    # Dense ranks of the instants, so that (stand, instant) packs into one sortable int64.
    inverse, n_distinct = dense_rank(np.concatenate([arrived, departed]))
    span = np.int64(n_distinct + 1)
    arr_key = stand * span + inverse[:m]
    dep_keys = np.sort(stand * span + inverse[m:])
    departed_before = np.searchsorted(dep_keys, arr_key, side="left") - np.searchsorted(
        dep_keys, stand * span, side="left"
    )
    return (1 + ahead - departed_before).astype(np.int64)


def detect_visits(
    pings: pd.DataFrame,
    memberships: pd.DataFrame,
    *,
    stands: gpd.GeoDataFrame | None = None,
    licences: pd.DataFrame | None = None,
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S,
    exit_grace_m: float = DEFAULT_EXIT_GRACE_M,
    near_exit_grace_s: float = DEFAULT_NEAR_EXIT_GRACE_S,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.DataFrame:
    """Detect stand visits with queue position, boarding and licence (see the module docstring).

    Vectorised over all vehicles and stands at once: memberships are sorted by
    (stand, vehicle, time) and cut into runs; no Python loop over vehicles or visits.

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated pings (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        optional ``meter`` and ``row``. Expected sorted by (vehicle_id, timestamp); sorted here
        otherwise. Positions (``iloc``) are what ``ping_index`` refers to.
    memberships : pandas.DataFrame
        Containment pairs ``ping_index`` (int, position in ``pings``), ``stand_id`` (str), e.g.
        from ``geo.cover.match_stands``. Duplicate pairs are ignored.
    stands : geopandas.GeoDataFrame, optional
        The stands the memberships refer to (``stand_id``, polygon geometry, EPSG:4326), for
        the distance of a trip start outside the stand (``boarding_grace_m``); the pings then
        need ``lat`` and ``lon``. Without it only trip starts inside the stand are boardings.
    licences : pandas.DataFrame, optional
        Licence frame (``stands.licences``); without it ``licensed`` is <NA>.
    exit_grace_s : float, default 60
        Longest excursion outside a stand (first fix outside to first fix back inside) that
        does not split a visit.
    exit_grace_m, near_exit_grace_s : float, default 30 and 900
        With ``stands``: an excursion whose fixes all stay within ``exit_grace_m`` of the stand
        does not split the visit if it lasts at most ``near_exit_grace_s``.
    min_dwell_s : float, default 60
        Visits with a shorter dwell are dropped unless boarded.
    boarding_grace_s : float, default 120
        Longest time from the last inside fix to a trip start counted as boarding at the stand.
    boarding_grace_m : float, default 30
        Longest distance from a trip start to the stand's edge counted as boarding at it.
    max_gap_s : float, default 600
        A silence longer than this between two fixes of a vehicle ends a visit and a trip.
    timezone : str, default "America/Sao_Paulo"
        Zone in which licence validity dates are calendar days.

    Returns
    -------
    pandas.DataFrame
        One row per visit, columns ``VISIT_FRAME_COLUMNS`` (``VISIT_COLUMNS`` then the helper
        columns), sorted by (vehicle_id, arrived_at, stand_id), RangeIndex.

    Raises
    ------
    MissingColumnError
        If pings or memberships lack required columns.
    NaiveTimestampError
        If ping timestamps are naive or null.
    PingFrameError
        If vehicle ids are null or meter values unknown.
    MembershipError
        If ``ping_index`` is not an integer within the pings, ``stand_id`` is null, or a
        stand of the memberships is not in ``stands``.
    ThresholdError
        If a threshold is negative or not finite (``max_gap_s`` must be > 0).
    LicenceFrameError
        If the licence frame or the timezone is invalid.
    """
    _check_thresholds(
        exit_grace_s=exit_grace_s,
        exit_grace_m=exit_grace_m,
        near_exit_grace_s=near_exit_grace_s,
        min_dwell_s=min_dwell_s,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
        max_gap_s=max_gap_s,
    )
    check_timezone(timezone)
    if stands is not None and not {LAT, LON} <= set(pings.columns):
        msg = "os pings não têm as colunas lat e lon; esperadas para medir o embarque ao ponto"
        raise MissingColumnError(msg)
    vcode0, vehicle_ids, t0 = _ping_arrays(pings)
    ping_index, scode, stand_ids = _membership_arrays(memberships, len(pings))
    geometries = None if stands is None else stand_geometries(stands, stand_ids)
    if len(ping_index) == 0:
        return empty_visits()
    n = len(pings)

    # Positions in (vehicle, time) order; identity when pings honour their contract.
    dv, dt = np.diff(vcode0), np.diff(t0)
    order: npt.NDArray[np.int64] | None = None
    if not np.all((dv > 0) | ((dv == 0) & (dt >= 0))):
        order = np.lexsort((t0, vcode0)).astype(np.int64)
        pos_of = np.empty(n, dtype=np.int64)
        pos_of[order] = np.arange(n, dtype=np.int64)
        vcode, t = vcode0[order], t0[order]
    else:
        vcode, t = vcode0, t0
    if METER in pings.columns:
        occupied = (pings[METER] == OCCUPIED).fillna(False).to_numpy(dtype=bool)
        if order is not None:
            occupied = occupied[order]
    else:
        occupied = np.zeros(n, dtype=bool)

    # Per fix: silence before it (or first fix of its vehicle), and trip starts.
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = vcode[1:] == vcode[:-1]
    gap_ns = np.zeros(n, dtype=np.int64)
    gap_ns[1:] = np.diff(t)
    silence = ~same_prev | (gap_ns > max_gap_s * _NS)
    silences = np.cumsum(silence)
    occupied_prev = np.zeros(n, dtype=bool)
    occupied_prev[1:] = occupied[:-1]
    new_record = np.zeros(n, dtype=bool)  # trip-record datasets: a new record is a new trip
    if TRIP_REF in pings.columns:
        ref = pings[TRIP_REF].to_numpy(dtype=object)
        ref = ref if order is None else ref[order]
        new_record[1:] = ref[1:] != ref[:-1]
    trip_start = np.flatnonzero(occupied & (silence | ~occupied_prev | new_record))

    # Memberships sorted by (stand, position) with duplicates removed: one packed key.
    positions = ping_index if order is None else pos_of[ping_index]
    keys = np.sort(scode * np.int64(n) + positions)
    keys = keys[np.append(True, keys[1:] != keys[:-1])]
    stand, pos = keys // n, keys % n

    # Runs of (stand, vehicle) cut by silences and by excursions longer than the grace.
    a, b = pos[:-1], pos[1:]
    same_run = (stand[1:] == stand[:-1]) & (vcode[b] == vcode[a])
    silent = silences[b] != silences[a]
    first_out = np.minimum(a + 1, n - 1)
    away_ns = t[b] - t[first_out]
    excursion = (b > a + 1) & (away_ns > exit_grace_s * _NS)
    if geometries is not None:
        # Near excursions: every fix within exit_grace_m of the stand, not too long.
        near = np.flatnonzero(excursion & same_run & ~silent & (away_ns <= near_exit_grace_s * _NS))
        if len(near):
            counts = b[near] - a[near] - 1
            gap = np.repeat(np.arange(len(near)), counts)
            at = np.arange(len(gap)) - np.repeat(np.cumsum(counts) - counts, counts)
            pos_gap = a[near][gap] + 1 + at
            p = pos_gap if order is None else order[pos_gap]
            used, which = np.unique(stand[1:][near][gap], return_inverse=True)
            metres = distance_to_geometries_m(
                pings[LAT].to_numpy(dtype=np.float64)[p],
                pings[LON].to_numpy(dtype=np.float64)[p],
                geometries[used],
                which=which,
            )
            away = np.bincount(gap, weights=~(metres <= exit_grace_m), minlength=len(near)) > 0
            excursion[near[~away]] = False
    new_run = np.ones(len(pos), dtype=bool)
    new_run[1:] = ~same_run | silent | excursion
    run_first = np.flatnonzero(new_run)
    run_last = np.append(run_first[1:] - 1, len(pos) - 1)
    first, last = pos[run_first], pos[run_last]
    visit_stand, visit_vehicle = stand[run_first], vcode[first]
    n_fixes = (run_last - run_first + 1).astype(np.int64)

    # Boarding: the first trip start at or after arrival, inside the visit or just after it,
    # inside the stand or within boarding_grace_m of its edge.
    boarding = np.full(len(first), -1, dtype=np.int64)
    boarding_m = np.full(len(first), np.nan, dtype=np.float64)
    if len(trip_start):
        j = np.searchsorted(trip_start, first, side="left")
        cand = trip_start[np.minimum(j, len(trip_start) - 1)]
        inside = cand <= last
        after = (
            (cand > last)
            & (t[cand] - t[last] <= boarding_grace_s * _NS)
            & (silences[cand] == silences[last])
        )
        ok = (j < len(trip_start)) & (vcode[cand] == visit_vehicle) & (inside | after)
        # A fix inside the stand (a membership) is at 0 m; others are measured to its edge.
        cand_key = visit_stand * np.int64(n) + cand
        at = np.minimum(np.searchsorted(keys, cand_key), len(keys) - 1)
        member = keys[at] == cand_key
        boarding_m = np.where(member, 0.0, np.nan)
        far = np.flatnonzero(ok & ~member)
        if len(far) and geometries is not None:
            used, which = np.unique(visit_stand[far], return_inverse=True)
            geoms = geometries[used]
            lat = pings[LAT].to_numpy(dtype=np.float64)
            lon = pings[LON].to_numpy(dtype=np.float64)
            p = cand[far] if order is None else order[cand[far]]
            boarding_m[far] = distance_to_geometries_m(lat[p], lon[p], geoms, which=which)
        ok &= boarding_m <= boarding_grace_m  # NaN (unknown distance) is not a boarding
        boarding = np.where(ok, cand, -1)
    boarded = boarding >= 0

    dwell_ns = t[last] - t[first]
    keep = (dwell_ns >= min_dwell_s * _NS) | boarded
    first, last, boarding = first[keep], last[keep], boarding[keep]
    visit_stand, visit_vehicle, n_fixes = visit_stand[keep], visit_vehicle[keep], n_fixes[keep]
    boarded, boarding_m = boarded[keep], boarding_m[keep]
    arrived, departed = t[first], t[last]
    boarded_ns = np.where(boarded, t[np.maximum(boarding, 0)], -1)
    queue = queue_positions(visit_stand, visit_vehicle, arrived, departed)

    out_order = np.lexsort((visit_stand, arrived, visit_vehicle))
    first, last, boarding = first[out_order], last[out_order], boarding[out_order]
    visit_stand, visit_vehicle = visit_stand[out_order], visit_vehicle[out_order]
    n_fixes, boarded, queue = n_fixes[out_order], boarded[out_order], queue[out_order]
    boarding_m = boarding_m[out_order]
    arrived, departed, boarded_ns = arrived[out_order], departed[out_order], boarded_ns[out_order]

    def original(p: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return p if order is None else order[p]

    first_ping, last_ping = original(first), original(last)
    boarding_ping = np.where(boarded, original(np.maximum(boarding, 0)), -1)
    vehicle_out = vehicle_ids[visit_vehicle]
    stand_out = stand_ids[visit_stand]
    licensed = None
    if licences is not None:
        licensed = is_licensed(
            licences,
            vehicle_out,
            stand_out,
            pd.to_datetime(arrived, unit="ns", utc=True),
            timezone=timezone,
        )
    rows = pd.array(pings[ROW].to_numpy(), dtype="Int64") if ROW in pings.columns else None
    return _visit_frame(
        vehicle_id=vehicle_out,
        stand_id=stand_out,
        arrived_ns=arrived,
        departed_ns=departed,
        queue_position=queue,
        boarded=boarded,
        licensed=licensed,
        n_fixes=n_fixes,
        first_ping=first_ping,
        last_ping=last_ping,
        rows=rows,
        boarding_ping=boarding_ping,
        boarded_ns=boarded_ns,
        boarding_m=boarding_m,
    )


# ------------------------------------------------------------------------------------- live


def new_visits_state() -> dict[str, Any]:
    """Return the initial live state of visits (plain data), one for the whole fleet.

    ``vehicles``: per vehicle its previous fix (``last``), its open runs per stand and its
    closed runs awaiting the boarding decision (``pending``); ``stands``: per stand the
    arrivals of the unfinished runs (``unfinished``, per vehicle), the finished visits awaiting
    their queue position (``ready``) and the released visits that may still be ahead of a later
    arrival (``kept``, ``[vehicle_id, arrived_ns, departed_ns]``).
    """
    return {"vehicles": {}, "stands": {}}


def _live_fix(ping: Mapping[str, Any], t: int) -> dict[str, Any]:
    def field(name: str) -> Any:
        value = ping.get(name)
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return None
        return value

    row, meter = field(ROW), field(METER)
    return {
        "ns": t,
        "lat": float(ping["lat"]),
        "lon": float(ping["lon"]),
        "row": None if row is None else int(row),
        "meter": None if meter is None else str(meter),
        "speed_flag": bool(field("speed_flag") or False),
    }


def _stand_state(st: dict[str, Any], stand_id: str) -> dict[str, Any]:
    stand: dict[str, Any] = st["stands"].setdefault(
        stand_id, {"unfinished": {}, "ready": [], "kept": []}
    )
    return stand


def _finish(
    st: dict[str, Any],
    vehicle_id: str,
    run: dict[str, Any],
    board: dict[str, Any] | None,
    *,
    min_dwell_s: float,
    licences: pd.DataFrame | None,
    timezone: str,
) -> None:
    """Drop a run whose boarding is decided, or queue it for its queue position."""
    stand = _stand_state(st, run["stand_id"])
    arrivals = stand["unfinished"].get(vehicle_id, [])
    arrivals.remove(run["first"]["ns"])
    if arrivals:
        stand["unfinished"][vehicle_id] = arrivals
    else:
        stand["unfinished"].pop(vehicle_id, None)
    dwell_ns = run["last"]["ns"] - run["first"]["ns"]
    if dwell_ns < min_dwell_s * _NS and board is None:
        return
    licensed = None
    if licences is not None:
        licensed = bool(
            is_licensed(
                licences,
                [vehicle_id],
                [run["stand_id"]],
                pd.to_datetime([run["first"]["ns"]], unit="ns", utc=True),
                timezone=timezone,
            )[0]
        )
    stand["ready"].append(
        {
            VEHICLE_ID: vehicle_id,
            STAND_ID: run["stand_id"],
            "arrived_ns": run["first"]["ns"],
            "departed_ns": run["last"]["ns"],
            "dwell_s": dwell_ns / _NS,
            "queue_position": None,
            "boarded": board is not None,
            "licensed": licensed,
            N_FIXES: run["n"],
            "first": run["first"],
            "last": run["last"],
            "boarding": board,
            "boarding_distance_m": run.get("board_m") if board is not None else None,
            "before_boarding": run["board_prev"] if board is not None else None,
            "track": [f for f in run["track"] if f["ns"] <= run["last"]["ns"]],
        }
    )


def _release(st: dict[str, Any], stand_id: str, out: list[dict[str, Any]]) -> None:
    """Give the finished visits of a stand their queue position, in arrival order."""
    stand = st["stands"][stand_id]
    blocking = [(a, v) for v, arrivals in stand["unfinished"].items() for a in arrivals]
    first_open = min(blocking) if blocking else None
    ready = sorted(stand["ready"], key=lambda v: (v["arrived_ns"], v[VEHICLE_ID]))
    kept = stand["kept"]
    while ready and (
        first_open is None or (ready[0]["arrived_ns"], ready[0][VEHICLE_ID]) < first_open
    ):
        visit = ready.pop(0)
        arrived = visit["arrived_ns"]
        ahead = sum(1 for v, a, d in kept if (a, v) < (arrived, visit[VEHICLE_ID]) and d >= arrived)
        visit["queue_position"] = 1 + ahead
        kept = [k for k in kept if k[2] >= arrived]
        kept.append([visit[VEHICLE_ID], arrived, visit["departed_ns"]])
        out.append(visit)
    stand["ready"] = ready
    stand["kept"] = kept
    if not ready and not stand["unfinished"] and not kept:
        del st["stands"][stand_id]


def _close_run(
    st: dict[str, Any],
    vid: str,
    vs: dict[str, Any],
    run: dict[str, Any],
    *,
    boarding_grace_s: float,
    **options: Any,
) -> None:
    """Close a run: finish it if its boarding is decided, else leave it pending."""
    if run["board"] is not None:
        _finish(st, vid, run, _judged(run, boarding_grace_s=boarding_grace_s), **options)
    else:
        vs["pending"].append(run)


def _judged(run: dict[str, Any], *, boarding_grace_s: float) -> dict[str, Any] | None:
    """Return the run's trip start if it boarded at the stand (time and distance), else None.

    The distance was judged when the trip start was seen (``board_near``, with the
    ``boarding_grace_m`` of :func:`update_visits`); the time is judged here, once the run's
    last inside fix is known.
    """
    board = run["board"]
    if board is None or not run.get("board_near", True):
        return None
    lag_ns = board["ns"] - run["last"]["ns"]
    return board if lag_ns <= 0 or lag_ns <= boarding_grace_s * _NS else None


def _left(run: dict[str, Any], t: int, exit_grace_s: float, near_exit_grace_s: float) -> bool:
    """Whether the run's excursion, still going or just ended at ``t``, ends the visit.

    The batch's rule: away longer than ``exit_grace_s`` with a fix farther than ``exit_grace_m``
    (``run["far"]``), or away longer than ``near_exit_grace_s``. Either way the run's last
    inside fix is final (a fix back inside then starts a new run).
    """
    if run["first_out"] is None:
        return False
    away = t - run["first_out"]
    return bool(away > exit_grace_s * _NS and (run["far"] or away > near_exit_grace_s * _NS))


def _distance_m(fix: Mapping[str, Any], stand_id: str, cover: StandCover) -> float:
    """Distance from a fix outside a stand to the stand's geometry (as the batch measures it)."""
    where = np.flatnonzero(cover.stand_ids.astype(str) == stand_id)
    geometry = cover.geometries[where[:1]]
    return float(distance_to_geometries_m([fix["lat"]], [fix["lon"]], geometry)[0])


def update_visits(
    state: dict[str, Any] | None,
    ping: Mapping[str, Any],
    *,
    cover: StandCover,
    licences: pd.DataFrame | None = None,
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S,
    exit_grace_m: float = DEFAULT_EXIT_GRACE_M,
    near_exit_grace_s: float = DEFAULT_NEAR_EXIT_GRACE_S,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Advance the fleet's visits by one fix; return the visits that became final.

    The same definitions as :func:`detect_visits`, fix by fix: the fix is matched to the stands
    with :func:`geo.cover.match_stands` (the batch matcher, so the assignment is the same),
    runs grow, split on excursions longer than ``exit_grace_s`` (a near excursion, within
    ``exit_grace_m`` of the stand, longer than ``near_exit_grace_s``) and on silences, and a closed
    run waits for its boarding decision (a trip start within ``boarding_grace_s``; the trip
    start's distance to the stand, 0 inside, is measured when it is seen and must be at most
    ``boarding_grace_m``). A visit is released once its queue position is certain: when no
    unfinished run of the stand arrived before it. Released visits are plain dicts:
    ``vehicle_id``, ``stand_id``, ``arrived_ns``, ``departed_ns``, ``dwell_s``,
    ``queue_position``, ``boarded``, ``licensed`` (None without licences), ``n_fixes``,
    ``boarding_distance_m`` (None when not boarded), and the fixes ``first``, ``last``,
    ``boarding`` and
    ``before_boarding`` (the vehicle's fix before the boarding fix), each ``{ns, lat, lon, row,
    meter, speed_flag}``, and ``track``: every fix of the vehicle from the first to the last
    inside fix (excursions included). Trip-record datasets (``trip_ref``) are not followed live.

    Parameters
    ----------
    state : dict or None
        From :func:`new_visits_state` or the previous call.
    ping : mapping
        ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``, optional ``meter``, ``row``,
        ``speed_flag``. A vehicle's fixes in time order; for the queue positions to be released
        early, the fleet's fixes in time order.
    cover : geo.cover.StandCover
        The stands' cover (``build_stand_cover``), with ``stand_ids`` and the geometries the
        boarding distance is measured to.
    licences, exit_grace_s, exit_grace_m, near_exit_grace_s, min_dwell_s, boarding_grace_s,
    boarding_grace_m, max_gap_s, timezone
        As in :func:`detect_visits`.

    Returns
    -------
    tuple of (dict, list of dict)
        The new state and the visits released by this fix (in arrival order per stand).

    Raises
    ------
    ThresholdError
        If a threshold is negative or not finite.
    PingFrameError
        If the fix is not later than the vehicle's previous one or its time is naive.
    """
    _check_thresholds(
        exit_grace_s=exit_grace_s,
        exit_grace_m=exit_grace_m,
        near_exit_grace_s=near_exit_grace_s,
        min_dwell_s=min_dwell_s,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
        max_gap_s=max_gap_s,
    )
    st = new_visits_state() if state is None else state
    stamp = pd.Timestamp(cast(Any, ping.get(TIMESTAMP)))
    if stamp.tzinfo is None:
        msg = f"'timestamp' do ping era {ping.get(TIMESTAMP)!r}; esperado um instante com fuso"
        raise NaiveTimestampError(msg)
    t = int(stamp.tz_convert("UTC").as_unit("ns").value)
    vid = str(ping[VEHICLE_ID])
    vs = st["vehicles"].setdefault(vid, {"last": None, "runs": {}, "pending": []})
    last = vs["last"]
    if last is not None and t <= last["ns"]:
        msg = f"ping fora de ordem do veículo {vid}: {stamp} não é posterior ao anterior"
        raise PingFrameError(msg)
    fix = _live_fix(ping, t)
    options: dict[str, Any] = {
        "min_dwell_s": min_dwell_s,
        "licences": licences,
        "timezone": timezone,
    }
    touched: set[str] = set()
    silence = last is None or (t - last["ns"]) > max_gap_s * _NS
    occupied = fix["meter"] == OCCUPIED
    trip_start = occupied and (silence or last is None or last["meter"] != OCCUPIED)

    def close(run: dict[str, Any]) -> None:
        touched.add(run["stand_id"])
        _close_run(st, vid, vs, run, boarding_grace_s=boarding_grace_s, **options)

    if silence:
        for run in vs["runs"].values():
            close(run)
        vs["runs"] = {}
        for run in vs["pending"]:
            _finish(st, vid, run, None, **options)
        vs["pending"] = []

    ping_idx, stand_idx = match_stands([fix["lat"]], [fix["lon"]], cover)
    inside_ids = {str(cover.stand_ids[s]) for s in stand_idx.tolist()}
    for sid, run in list(vs["runs"].items()):
        if sid not in inside_ids:
            if run["first_out"] is None:
                run["first_out"], run["far"] = t, False
            if not run["far"]:
                run["far"] = not _distance_m(fix, sid, cover) <= exit_grace_m
        if _left(run, t, exit_grace_s, near_exit_grace_s):
            close(vs["runs"].pop(sid))

    def board(run: dict[str, Any]) -> None:
        """Keep the run's first trip start with its distance to the stand."""
        sid = run["stand_id"]
        metres = 0.0 if sid in inside_ids else _distance_m(fix, sid, cover)
        run["board"], run["board_prev"], run["board_m"] = fix, last, metres
        run["board_near"] = metres <= boarding_grace_m  # NaN (unknown) is not near

    if trip_start:
        for run in vs["runs"].values():
            if run["board"] is None:
                board(run)
        for run in vs["pending"]:
            if t - run["last"]["ns"] <= boarding_grace_s * _NS:
                board(run)
    still = []
    for run in vs["pending"]:
        if run["board"] is not None:
            touched.add(run["stand_id"])
            _finish(st, vid, run, _judged(run, boarding_grace_s=boarding_grace_s), **options)
        elif t - run["last"]["ns"] > boarding_grace_s * _NS or trip_start:
            touched.add(run["stand_id"])
            _finish(st, vid, run, None, **options)
        else:
            still.append(run)
    vs["pending"] = still
    for sid in sorted(inside_ids):
        run = vs["runs"].get(sid)
        if run is None:
            vs["runs"][sid] = {
                "stand_id": sid,
                "first": fix,
                "last": fix,
                "n": 1,
                "first_out": None,
                "far": False,
                "board": fix if trip_start else None,
                "board_prev": last if trip_start else None,
                "board_m": 0.0 if trip_start else None,
                "board_near": True,
                "track": [fix],
            }
            stand = _stand_state(st, sid)
            stand["unfinished"].setdefault(vid, []).append(t)
        else:
            run["last"], run["n"], run["first_out"], run["far"] = fix, run["n"] + 1, None, False
    for run in vs["runs"].values():
        if run["track"][-1]["ns"] != t:
            run["track"].append(fix)  # excursion fixes belong to the visit's span
    vs["last"] = fix
    out: list[dict[str, Any]] = []
    for sid in sorted(touched):
        if sid in st["stands"]:
            _release(st, sid, out)
    return st, out


def flush_visits(
    state: dict[str, Any] | None,
    *,
    licences: pd.DataFrame | None = None,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """End the stream: close every run, decide every boarding, release every visit.

    Parameters
    ----------
    state : dict or None
        The live state.
    licences, min_dwell_s, boarding_grace_s, timezone
        As in :func:`update_visits`.

    Returns
    -------
    tuple of (dict, list of dict)
        The emptied state and the remaining visits.
    """
    st = new_visits_state() if state is None else state
    options: dict[str, Any] = {
        "min_dwell_s": min_dwell_s,
        "licences": licences,
        "timezone": timezone,
    }
    for vid, vs in st["vehicles"].items():
        for run in [*vs["runs"].values(), *vs["pending"]]:
            _finish(st, vid, run, _judged(run, boarding_grace_s=boarding_grace_s), **options)
        vs["runs"], vs["pending"] = {}, []
    out: list[dict[str, Any]] = []
    for sid in sorted(st["stands"]):
        _release(st, sid, out)
    st["stands"] = {}
    return st, out


def tick_visits(
    state: dict[str, Any] | None,
    *,
    now: pd.Timestamp,
    licences: pd.DataFrame | None = None,
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S,
    near_exit_grace_s: float = DEFAULT_NEAR_EXIT_GRACE_S,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Settle what the passing of time makes certain, and release the visits it frees.

    Every fix still to come is later than ``now`` (the caller's watermark: the time up to which
    the whole fleet's fixes are in). So a run whose vehicle has been outside the stand longer
    than ``exit_grace_s`` (with a fix farther than ``exit_grace_m``; else longer than
    ``near_exit_grace_s``), or silent longer than ``max_gap_s``, is over; a closed run more than
    ``boarding_grace_s`` past its last inside fix (or whose vehicle fell silent) did not board.
    Without ticks a vehicle that stops reporting holds back the queue of its stands until its
    next fix or :func:`flush_visits`.

    Parameters
    ----------
    state : dict or None
        The live state.
    now : pandas.Timestamp
        The watermark (tz-aware).
    licences, exit_grace_s, near_exit_grace_s, min_dwell_s, boarding_grace_s, max_gap_s,
    timezone
        As in :func:`update_visits`.

    Returns
    -------
    tuple of (dict, list of dict)
        The new state and the visits released.
    """
    st = new_visits_state() if state is None else state
    stamp = pd.Timestamp(now)
    if stamp.tzinfo is None:
        msg = f"'now' era {now!r}; esperado um instante com fuso"
        raise NaiveTimestampError(msg)
    t = int(stamp.tz_convert("UTC").as_unit("ns").value)
    options: dict[str, Any] = {
        "min_dwell_s": min_dwell_s,
        "licences": licences,
        "timezone": timezone,
    }
    touched: set[str] = set()
    for vid, vs in st["vehicles"].items():
        if vs["last"] is None:
            continue
        silent = t - vs["last"]["ns"] > max_gap_s * _NS
        for sid, run in list(vs["runs"].items()):
            if _left(run, t, exit_grace_s, near_exit_grace_s) or silent:
                touched.add(sid)
                _close_run(
                    st, vid, vs, vs["runs"].pop(sid), boarding_grace_s=boarding_grace_s, **options
                )
        still = []
        for run in vs["pending"]:
            if silent or t - run["last"]["ns"] > boarding_grace_s * _NS:
                touched.add(run["stand_id"])
                _finish(st, vid, run, None, **options)
            else:
                still.append(run)
        vs["pending"] = still
    out: list[dict[str, Any]] = []
    for sid in sorted(touched):
        if sid in st["stands"]:
            _release(st, sid, out)
    return st, out


def unreleased_arrivals(state: Mapping[str, Any] | None) -> dict[str, int]:
    """Per vehicle, the earliest arrival (epoch ns) among its visits not yet released.

    Open runs, runs awaiting their boarding decision and finished visits awaiting their queue
    position all count (a run that will turn out too short to be a visit counts until dropped).
    Every visit of a vehicle that arrived before this instant has been released; a consumer
    that must see all of a vehicle's visits up to an instant (overlapping stands, a local day)
    waits until it is later than that instant. Vehicles with nothing pending are absent.

    Parameters
    ----------
    state : mapping or None
        The live visits state (:func:`update_visits`).

    Returns
    -------
    dict of str to int
        ``vehicle_id`` -> earliest unreleased arrival, epoch nanoseconds (UTC).
    """
    out: dict[str, int] = {}
    if state is None:
        return out
    for stand in state["stands"].values():
        for vid, arrivals in stand["unfinished"].items():
            if arrivals:
                out[vid] = min(out.get(vid, arrivals[0]), *arrivals)
        for visit in stand["ready"]:
            vid = visit[VEHICLE_ID]
            out[vid] = min(out.get(vid, visit["arrived_ns"]), visit["arrived_ns"])
    return out
