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
    outside a small stand for minutes is still waiting there); nor when both its first fix and
    the fix back inside are reached by impossible steps (the ingest's ``speed_flag`` test,
    :func:`tracking.validate.speed_flags`) and it lasts at most ``near_exit_grace_s``: a
    displaced stretch of GPS (multipath), as ``gps_anomaly`` reports it, is not a departure. A
    silence (two consecutive fixes of the vehicle more than ``max_gap_s`` apart) anywhere in
    the run ends the visit.
arrived_at, departed_at
    The first and the last fix *inside* the stand (not the first fix outside: we only assert
    what was observed). ``dwell_s = departed_at - arrived_at``; a one-fix visit has dwell 0.
trip start
    As in ``tracking/trips.py``: a fix with meter ``occupied`` whose previous fix of the vehicle
    is not ``occupied`` (``free``, ``off`` or unknown), or is more than ``max_gap_s`` earlier,
    or does not exist, or belongs to another trip record (``trip_ref``, trip-record datasets
    such as Porto's, where every fix is occupied and each record is one passenger trip). Not
    the end of a meter blip (:func:`tracking.trips.meter_blip_ends`: one or two fixes not
    ``occupied`` within a ride read wrong): a taxi with a passenger aboard driving through a
    stand, one fix there read ``free``, boarded no one there.
boarding
    Where the meter comes on, in time *and* in space. The candidate is the first trip start of
    the vehicle at or after the visit's arrival. The visit is ``boarded`` when that fix

    - lies within the visit (between its first and last inside fix), or comes after the last
      inside fix by at most ``boarding_grace_s`` (default 120 s) with no silence in between —
      the meter switched on while pulling out of the stand; and
    - lies inside the stand's polygon, or within ``boarding_grace_m`` (default 30 m) of its
      edge: ``boarding_distance_m``, measured from the fix to the stand's geometry in the
      fix's UTM zone (:func:`geo.crs.distance_to_geometries_m`; 0 inside). Those metres
      absorb GPS jitter at the edge and a meter switched on in the street beside the stand;
      and
    - the vehicle's fix before it (no silence between) lies there too: the meter came on
      somewhere between the two fixes, and a tracker reporting once a minute sees a taxi
      hailed in the street switch on its meter at its next fix, which may fall in a stand it
      is driving through. A trip record's first fix (``trip_ref``) is where its meter came
      on, and needs no fix before.

    A taxi that drops its passenger at the stand and switches the meter on again 600 m away a
    minute later did not board at the stand: a drop-off at a stand is not a boarding. If the
    candidate fails a test the visit is not boarded (a later trip start does not count).
    Without the stands' geometries (``stands`` not given) the distance of a fix outside the
    stand is unknown and only trip starts inside it count. A vehicle whose meter is unknown
    (None) never boards. One trip start may mark visits of several stands (overlapping
    stands, or stands within ``boarding_grace_m`` of each other); ``boarding_ping`` identifies
    the start so that consumers can tell. ``boarded_at`` is the time of that fix: "a
    boarding's time is the departure from the stand with the passenger" (PRODUCT.md);
    ``boarding_lag_s = boarded_at - departed_at`` (<= 0 when the meter came on within the
    visit).
approach
    The fix before the arrival, when no silence lies between: ``approach_m``, its distance to
    the stand's geometry (without the geometries, NaN), and ``approach_kmh``, the speed it
    reports — whether the vehicle was seen driving in or was already waiting beside the stand
    (both NaN without such a fix).
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
    (``stands/licences.py``); <NA> when no licence data is given, and where the vehicle's
    licences are not known and none the data gives is for the stand (``unknown_licences``).

Live
    :func:`advance_visits` is the kernel: :func:`detect_visits` run on each vehicle's kept
    fixes plus the new ones, a visit released once no later fix can change it and every visit
    that could be ahead of it in its stand's queue is released. A vehicle keeps its fixes from
    the one before its earliest visit still open (a run a later fix could extend: at most
    ``max(exit_grace_s, near_exit_grace_s)`` past its last fix inside, or ``max_gap_s`` of
    silence; or awaiting its boarding: ``boarding_grace_s``) or held behind an open visit of
    another vehicle at the same stand; otherwise only its latest fix. So a tail spans the
    vehicle's open visit plus those graces, or, when held, the open visit ahead of it at the
    stand (a vehicle that stops reporting inside a stand holds it until it reports again,
    unless a watermark ``now`` is given). A stand keeps the released visits still present at
    its latest arrival (its queue).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyproj
import shapely

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
from stands.licences import check_timezone, licence_status
from tracking import tails
from tracking.arrays import epoch_ns, vehicle_codes
from tracking.frames import (
    ACCURACY_M,
    LAT,
    LON,
    METER,
    METER_VALUES,
    ROW,
    SPEED_KMH,
    TIMESTAMP,
    TRIP_REF,
    VEHICLE_ID,
    VISIT_COLUMNS,
)
from tracking.trips import METER_BLIP_MAX_FIXES, meter_blip_ends
from tracking.validate import impossible_steps

PING_INDEX = "ping_index"
MEMBERSHIP_COLUMNS = (PING_INDEX, STAND_ID)
OCCUPIED = "occupied"

# Helper columns that explain a visit (kept in memory; the CSV writer selects VISIT_COLUMNS).
N_FIXES = "n_fixes"
N_FIXES_SURE = "n_fixes_sure"  # inside fixes deep enough for their accuracy_m (if any)
FIRST_PING = "first_ping"  # positional index into ``pings`` of the first inside fix
LAST_PING = "last_ping"
FIRST_ROW = "first_row"  # 1-based data row of the source file (pings ``row``), <NA> if unknown
LAST_ROW = "last_row"
BOARDED_AT = "boarded_at"
BOARDING_PING = "boarding_ping"
BOARDING_ROW = "boarding_row"
BOARDING_LAG_S = "boarding_lag_s"  # boarded_at - departed_at; <= 0 when the meter started inside
BOARDING_DISTANCE_M = "boarding_distance_m"  # boarding fix to the stand's geometry; 0 inside
APPROACH_M = "approach_m"  # the fix before the arrival to the stand's geometry; NaN unknown
APPROACH_KMH = "approach_kmh"  # that fix's reported speed; NaN unknown
HELPER_COLUMNS = (
    N_FIXES,
    N_FIXES_SURE,
    FIRST_PING,
    LAST_PING,
    FIRST_ROW,
    LAST_ROW,
    BOARDED_AT,
    BOARDING_PING,
    BOARDING_ROW,
    BOARDING_LAG_S,
    BOARDING_DISTANCE_M,
    APPROACH_M,
    APPROACH_KMH,
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
SURE_DEPTH_PER_ACCURACY = 0.5
"""A fix reporting ``accuracy_m`` is surely in a stand when it lies at least this share of its
accuracy inside the edge (``n_fixes_sure``). Of 320 cars parked 5–15 m beside a stand whose GPS
drifts 5–20 m for 3–10 min (``bench/bench_stand_lookalikes.py``), 2 are proposed (26 without
the rule; 3 at 35 % of the accuracy, 8 at a quarter). The simulated fleet's unlicensed boardings
are found 29 of 31 times with receivers reporting 5–15 m (30 without the rule or at 35 %, 23 at
the whole accuracy), and 7 of 31 with receivers reporting 15–30 m (10 at 35 %): a receiver that
says it may be 20 m off cannot place a car in a 30 m stand."""
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
        n_fixes_sure=np.array([], dtype=np.int64),
        first_ping=np.array([], dtype=np.int64),
        last_ping=np.array([], dtype=np.int64),
        rows=None,
        boarding_ping=np.array([], dtype=np.int64),
        boarded_ns=np.array([], dtype=np.int64),
        boarding_m=np.array([], dtype=np.float64),
        approach_m=np.array([], dtype=np.float64),
        approach_kmh=np.array([], dtype=np.float64),
    )


def _visit_frame(
    *,
    vehicle_id: npt.NDArray[np.object_],
    stand_id: npt.NDArray[np.object_],
    arrived_ns: npt.NDArray[np.int64],
    departed_ns: npt.NDArray[np.int64],
    queue_position: npt.NDArray[np.int64],
    boarded: npt.NDArray[np.bool_],
    licensed: pd.arrays.BooleanArray | None,
    n_fixes: npt.NDArray[np.int64],
    n_fixes_sure: npt.NDArray[np.int64],
    first_ping: npt.NDArray[np.int64],
    last_ping: npt.NDArray[np.int64],
    rows: pd.arrays.IntegerArray | None,
    boarding_ping: npt.NDArray[np.int64],
    boarded_ns: npt.NDArray[np.int64],
    boarding_m: npt.NDArray[np.float64],
    approach_m: npt.NDArray[np.float64],
    approach_kmh: npt.NDArray[np.float64],
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
            N_FIXES_SURE: pd.Series(n_fixes_sure, dtype="int64"),
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
            APPROACH_M: pd.Series(approach_m, dtype="float64"),
            APPROACH_KMH: pd.Series(approach_kmh, dtype="float64"),
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


def _sorted_column(
    pings: pd.DataFrame, name: str, order: npt.NDArray[np.int64] | None
) -> npt.NDArray[np.float64]:
    values = pings[name].to_numpy(dtype=np.float64)
    return values if order is None else values[order]


def _is_visit(
    dwell_ns: npt.NDArray[np.int64], boarded: npt.NDArray[np.bool_], *, min_dwell_s: float
) -> npt.NDArray[np.bool_]:
    """Which runs are visits: long enough, or boarded (the minimum dwell of the definitions)."""
    return np.asarray((dwell_ns >= min_dwell_s * _NS) | boarded, dtype=bool)


def _unsure_fixes(
    pings: pd.DataFrame,
    original: npt.NDArray[np.int64],
    stand: npt.NDArray[np.int64],
    new_run: npt.NDArray[np.bool_],
    geometries: npt.NDArray[np.object_] | None,
) -> npt.NDArray[np.int64]:
    """Per run, its inside fixes too near the edge for their ``accuracy_m`` to be sure.

    Nearer than :data:`SURE_DEPTH_PER_ACCURACY` of it. ``original`` and ``stand`` are the runs'
    memberships (pings positions and stand codes, run by run), ``new_run`` marks each run's
    first. A receiver that says it may be 20 m off does not place the taxi in the stand with a
    fix 5 m inside its edge: a taxi parked beside a stand whose GPS drifts into it for minutes
    (correlated error, which no share of fixes averages out). Fixes without an accuracy are
    taken as they are.
    """
    run = np.cumsum(new_run) - 1
    out = np.zeros(int(new_run.sum()), dtype=np.int64)
    if geometries is None or ACCURACY_M not in pings.columns or not len(original):
        return out
    acc = pings[ACCURACY_M].to_numpy(dtype=np.float64, na_value=np.nan)[original]
    told = np.flatnonzero(acc > 0)  # NaN compares False
    if not len(told):
        return out
    used, which = np.unique(stand[told], return_inverse=True)
    depth = distance_to_geometries_m(
        pings[LAT].to_numpy(dtype=np.float64)[original[told]],
        pings[LON].to_numpy(dtype=np.float64)[original[told]],
        shapely.boundary(geometries[used]),
        which=which,
    )
    unsure = ~(depth >= SURE_DEPTH_PER_ACCURACY * acc[told])  # NaN (unmeasurable) is unsure
    return np.bincount(run[told], weights=unsure, minlength=len(out)).astype(np.int64)


def detect_visits(
    pings: pd.DataFrame,
    memberships: pd.DataFrame,
    *,
    stands: gpd.GeoDataFrame | None = None,
    licences: pd.DataFrame | None = None,
    unknown_licences: Collection[str] = (),
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
    unknown_licences : collection of str, default ()
        Vehicles whose licences are not known (``stands.licences.unknown_licences``): <NA>
        where the frame gives them no licence.
    exit_grace_s : float, default 60
        Longest excursion outside a stand (first fix outside to first fix back inside) that
        does not split a visit.
    exit_grace_m, near_exit_grace_s : float, default 30 and 900
        With ``stands``: an excursion whose fixes all stay within ``exit_grace_m`` of the stand
        does not split the visit if it lasts at most ``near_exit_grace_s``; with ``lat`` and
        ``lon``, neither does one reached and left by impossible steps (a displaced stretch).
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
        new_record[0] = True  # the first fix starts a record too
        new_record[1:] = ref[1:] != ref[:-1]
    trip_start = np.flatnonzero(occupied & (silence | ~occupied_prev | new_record))
    # A meter read wrong once or twice inside a ride starts no trip (tracking.trips).
    stretch = silences.astype(np.int64, copy=False)
    blip = meter_blip_ends(occupied, stretch, t, trip_start) & ~new_record[trip_start]
    trip_start = trip_start[~blip]

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
    if {LAT, LON} <= set(pings.columns):
        # Displaced stretches: an impossible step out and an impossible step back.
        far = np.flatnonzero(excursion & same_run & ~silent & (away_ns <= near_exit_grace_s * _NS))
        if len(far):
            lat, lon = _sorted_column(pings, LAT, order), _sorted_column(pings, LON, order)
            out = impossible_steps(t, lat, lon, a[far] + 1)
            back = impossible_steps(t, lat, lon, b[far])
            excursion[far[out & back]] = False
    new_run = np.ones(len(pos), dtype=bool)
    new_run[1:] = ~same_run | silent | excursion
    run_first = np.flatnonzero(new_run)
    run_last = np.append(run_first[1:] - 1, len(pos) - 1)
    first, last = pos[run_first], pos[run_last]
    visit_stand, visit_vehicle = stand[run_first], vcode[first]
    n_fixes = (run_last - run_first + 1).astype(np.int64)
    n_fixes_sure = n_fixes - _unsure_fixes(
        pings, pos if order is None else order[pos], stand, new_run, geometries
    )

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

        def to_stand_m(
            fix: npt.NDArray[np.int64], at: npt.NDArray[np.intp]
        ) -> npt.NDArray[np.float64]:
            """Fix to its visit's stand: 0 inside, else to the edge (NaN without geometries)."""
            key = visit_stand[at] * np.int64(n) + fix
            member = keys[np.minimum(np.searchsorted(keys, key), len(keys) - 1)] == key
            out = np.where(member, 0.0, np.nan)
            far = np.flatnonzero(~member)
            if len(far) and geometries is not None:
                used, which = np.unique(visit_stand[at[far]], return_inverse=True)
                p = fix[far] if order is None else order[fix[far]]
                out[far] = distance_to_geometries_m(
                    pings[LAT].to_numpy(dtype=np.float64)[p],
                    pings[LON].to_numpy(dtype=np.float64)[p],
                    geometries[used],
                    which=which,
                )
            return out

        judged = np.flatnonzero(ok)
        boarding_m[judged] = to_stand_m(cand[judged], judged)
        ok &= boarding_m <= boarding_grace_m  # NaN (unknown distance) is not a boarding
        # The meter came on between the fix before the start and the start: that fix must be
        # at the stand too (a trip record's first fix is where its meter came on).
        judged = np.flatnonzero(ok & ~new_record[cand])
        seen = ~silence[cand[judged]]
        before_m = np.full(len(judged), np.nan)
        before_m[seen] = to_stand_m(cand[judged][seen] - 1, judged[seen])
        ok[judged] = before_m <= boarding_grace_m
        boarding = np.where(ok, cand, -1)
    boarded = boarding >= 0

    keep = _is_visit(t[last] - t[first], boarded, min_dwell_s=min_dwell_s)
    first, last, boarding = first[keep], last[keep], boarding[keep]
    visit_stand, visit_vehicle, n_fixes = visit_stand[keep], visit_vehicle[keep], n_fixes[keep]
    n_fixes_sure = n_fixes_sure[keep]
    boarded, boarding_m = boarded[keep], boarding_m[keep]
    arrived, departed = t[first], t[last]
    boarded_ns = np.where(boarded, t[np.maximum(boarding, 0)], -1)
    queue = queue_positions(visit_stand, visit_vehicle, arrived, departed)

    out_order = np.lexsort((visit_stand, arrived, visit_vehicle))
    first, last, boarding = first[out_order], last[out_order], boarding[out_order]
    visit_stand, visit_vehicle = visit_stand[out_order], visit_vehicle[out_order]
    n_fixes, boarded, queue = n_fixes[out_order], boarded[out_order], queue[out_order]
    n_fixes_sure = n_fixes_sure[out_order]
    boarding_m = boarding_m[out_order]
    arrived, departed, boarded_ns = arrived[out_order], departed[out_order], boarded_ns[out_order]

    def original(p: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return p if order is None else order[p]

    first_ping, last_ping = original(first), original(last)
    boarding_ping = np.where(boarded, original(np.maximum(boarding, 0)), -1)
    # The fix before each arrival (no silence between): where the vehicle came from.
    approach_m = np.full(len(first), np.nan)
    approach_kmh = np.full(len(first), np.nan)
    came = np.flatnonzero(first > 0)
    came = came[silences[first[came] - 1] == silences[first[came]]]
    if len(came):
        p = original(first[came] - 1)
        if geometries is not None:
            used, which = np.unique(visit_stand[came], return_inverse=True)
            approach_m[came] = distance_to_geometries_m(
                pings[LAT].to_numpy(dtype=np.float64)[p],
                pings[LON].to_numpy(dtype=np.float64)[p],
                geometries[used],
                which=which,
            )
        if SPEED_KMH in pings.columns:
            approach_kmh[came] = pings[SPEED_KMH].to_numpy(dtype=np.float64, na_value=np.nan)[p]
    vehicle_out = vehicle_ids[visit_vehicle]
    stand_out = stand_ids[visit_stand]
    licensed = None
    if licences is not None:
        licensed = licence_status(
            licences,
            vehicle_out,
            stand_out,
            pd.to_datetime(arrived, unit="ns", utc=True),
            unknown=unknown_licences,
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
        n_fixes_sure=n_fixes_sure,
        first_ping=first_ping,
        last_ping=last_ping,
        rows=rows,
        boarding_ping=boarding_ping,
        boarded_ns=boarded_ns,
        boarding_m=boarding_m,
        approach_m=approach_m,
        approach_kmh=approach_kmh,
    )


# ----------------------------------------------------------------------------- the kernel
#
# Live, the fixes come in pieces. :func:`advance_visits` runs :func:`detect_visits` (the one
# implementation) over each vehicle's kept fixes plus the new ones and releases the visits no
# later fix can change, with their queue position, once every visit of the stand that could be
# ahead of them is released too.

_FAR = int(np.iinfo(np.int64).max)


def new_visits_state() -> dict[str, Any]:
    """Return the empty state of :func:`advance_visits` (plain data, one for the whole fleet).

    ``vehicles``: per vehicle its kept fixes and the instant of its latest (``seen``, ``tail``:
    :mod:`tracking.tails`) and ``from``, the instant before which every visit of the vehicle
    was released; ``stands``: per stand the released visits a later arrival may still queue
    behind, ``[vehicle_id, arrived_ns, departed_ns]``.
    """
    return {"vehicles": {}, "stands": {}}


def _timestamp_ns(value: Any, name: str) -> int | None:
    if value is None:
        return None
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is None:
        msg = f"'{name}' era {value!r}; esperado um instante com fuso"
        raise NaiveTimestampError(msg)
    return int(stamp.tz_convert("UTC").as_unit("ns").value)


def _pending(vehicle: Mapping[str, Any]) -> bool:
    """Whether a vehicle's kept fixes may still hold a visit (more than the context fix)."""
    tail = vehicle.get("tail") or {}
    return any(int(t) >= int(vehicle.get("from", -_FAR)) for t in tail.get(TIMESTAMP, []))


def advance_visits(
    state: Mapping[str, Any] | None,
    pings: pd.DataFrame,
    *,
    cover: StandCover,
    stands: gpd.GeoDataFrame | None = None,
    licences: pd.DataFrame | None = None,
    unknown_licences: Collection[str] = (),
    now: Any = None,
    final: bool = False,
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S,
    exit_grace_m: float = DEFAULT_EXIT_GRACE_M,
    near_exit_grace_s: float = DEFAULT_NEAR_EXIT_GRACE_S,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """Run :func:`detect_visits` on new fixes after the fleet's state; release the final visits.

    Each vehicle keeps its fixes from the one before its earliest visit a later fix could still
    change (a run a later fix inside could extend — no silence after it, and its first fix
    outside less than ``max(exit_grace_s, near_exit_grace_s)`` before the next possible fix —,
    or not boarded while a trip start could still come within ``boarding_grace_s``); the fix
    before it, and the :data:`~tracking.trips.METER_BLIP_MAX_FIXES` before that one, give the
    next fix its trip start (a meter blip), as in the batch. A final visit is released
    once every visit of its stand that could be ahead of it in the queue is released: its
    ``queue_position`` is :func:`queue_positions` over the stand's released visits still
    present at its arrival. Concatenated and sorted by (vehicle_id, arrived_at, stand_id), the
    released visits are :func:`detect_visits`' on all the fixes (``VISIT_COLUMNS`` equal)
    when the fleet's fixes come in time order (a vehicle never seen is assumed to arrive
    later). Fixes not later than their vehicle's latest are ignored.

    Parameters
    ----------
    state : mapping or None
        From :func:`new_visits_state` or the previous call (plain data).
    pings : pandas.DataFrame
        New fixes (pings contract), any vehicles, any order.
    cover : geo.cover.StandCover
        The stands' cover (the memberships are :func:`geo.cover.match_stands`').
    stands, licences, unknown_licences, exit_grace_s, exit_grace_m, near_exit_grace_s,
    min_dwell_s, boarding_grace_s, boarding_grace_m, max_gap_s, timezone
        As in :func:`detect_visits`.
    now : timestamp, optional
        A watermark: every fix still to come is at or after it (the fleet's fixes in time
        order). Without it a vehicle's own latest fix is its only clock, and a vehicle that
        stops reporting inside a stand holds back that stand's queue until its next fix.
    final : bool, default False
        End of the input: every visit is released and the state emptied.

    Returns
    -------
    tuple of (dict, pandas.DataFrame, pandas.DataFrame)
        The new state; the released visits (``VISIT_FRAME_COLUMNS``, sorted by vehicle_id,
        arrived_at, stand_id) and the fixes their ``first_ping``/``last_ping``/
        ``boarding_ping`` positions refer to.
    """
    _check_thresholds(
        exit_grace_s=exit_grace_s,
        near_exit_grace_s=near_exit_grace_s,
        boarding_grace_s=boarding_grace_s,
        max_gap_s=max_gap_s,
    )
    old = state or new_visits_state()
    vehicles: dict[str, dict[str, Any]] = {
        str(v): dict(s) for v, s in old.get("vehicles", {}).items()
    }
    kept: dict[str, list[list[Any]]] = {
        str(k): [list(e) for e in v] for k, v in old.get("stands", {}).items()
    }
    watermark = _timestamp_ns(now, "now")
    fresh = tails.after_seen(pings, vehicles, error=PingFrameError)
    new_ids = set(fresh[VEHICLE_ID].astype("str")) if len(fresh) else set()
    active = sorted(v for v, s in vehicles.items() if v in new_ids or _pending(s))
    frame = tails.concat([tails.tails_frame({v: vehicles[v] for v in active}), fresh])
    if not len(frame):
        after = new_visits_state() if final else {"vehicles": vehicles, "stands": kept}
        return after, empty_visits(), frame
    ping_idx, stand_idx = match_stands(
        frame[LAT].to_numpy(dtype=np.float64), frame[LON].to_numpy(dtype=np.float64), cover
    )
    memberships = pd.DataFrame(
        {
            PING_INDEX: ping_idx,
            STAND_ID: pd.Series(cover.stand_ids[stand_idx], dtype="str"),
        }
    )
    runs = detect_visits(
        frame,
        memberships,
        stands=stands,
        licences=licences,
        unknown_licences=unknown_licences,
        exit_grace_s=exit_grace_s,
        exit_grace_m=exit_grace_m,
        near_exit_grace_s=near_exit_grace_s,
        min_dwell_s=0.0,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
        max_gap_s=max_gap_s,
        timezone=timezone,
    )
    t = frame[TIMESTAMP].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    vid = frame[VEHICLE_ID].to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, vid[1:] != vid[:-1]])
    ends = np.r_[starts[1:], len(frame)]
    first_of = {str(vid[a]): int(a) for a in starts}
    last_of = {str(vid[a]): int(b) - 1 for a, b in zip(starts, ends, strict=True)}
    since = {v: int(vehicles.get(v, {}).get("from", -_FAR)) for v in first_of}

    run_vid = runs[VEHICLE_ID].to_numpy(dtype=object)
    run_sid = runs[STAND_ID].to_numpy(dtype=object)
    arrived = runs["arrived_at"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    departed = runs["departed_at"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    boarded = runs["boarded"].to_numpy(dtype=bool)
    last_ping = runs[LAST_PING].to_numpy(dtype=np.int64)
    mine = np.array([a >= since[str(v)] for v, a in zip(run_vid, arrived, strict=True)], bool)
    visit = mine & _is_visit(departed - arrived, boarded, min_dwell_s=min_dwell_s)

    # Runs a later fix could still change (none at the end of the input).
    open_run = np.zeros(len(runs), dtype=bool)
    if not final and len(runs):
        silent_next = np.r_[(np.diff(t) > max_gap_s * _NS) & (vid[1:] == vid[:-1]), False]
        silences = np.r_[0, np.cumsum(silent_next)]
        end = np.array([last_of[str(v)] for v in run_vid], dtype=np.int64)
        seen = t[end]
        future = np.maximum(seen + 1, -_FAR if watermark is None else watermark)
        silent = (silences[end] - silences[last_ping] > 0) | (future - seen > max_gap_s * _NS)
        away = future - t[np.minimum(last_ping + 1, end)]  # from its first fix outside
        gone = (last_ping < end) & (away > exit_grace_s * _NS)
        latest = pd.Series(arrived).groupby([run_vid, run_sid]).transform("max").to_numpy()
        if stands is not None:
            # A near excursion (every fix within exit_grace_m) may last near_exit_grace_s.
            near = gone & (arrived == latest) & ~silent & (away <= near_exit_grace_s * _NS)
            near_k = np.flatnonzero(near)
            if len(near_k):
                used, which = np.unique(run_sid[near_k].astype(str), return_inverse=True)
                geoms = stand_geometries(stands, used.astype(object))
                lat = frame[LAT].to_numpy(dtype=np.float64)
                lon = frame[LON].to_numpy(dtype=np.float64)
            for w, k in enumerate(near_k.tolist()):
                lo, hi = int(last_ping[k]) + 1, int(end[k]) + 1
                metres = distance_to_geometries_m(
                    lat[lo:hi], lon[lo:hi], geoms, which=np.full(hi - lo, which[w])
                )
                gone[k] = bool((~(metres <= exit_grace_m)).any())
        # An impossible step out may be a displaced stretch that comes back impossibly.
        far = np.flatnonzero(
            gone & (arrived == latest) & ~silent & (away <= near_exit_grace_s * _NS)
        )
        if len(far):
            lat = frame[LAT].to_numpy(dtype=np.float64)
            lon = frame[LON].to_numpy(dtype=np.float64)
            gone[far] = ~impossible_steps(t, lat, lon, last_ping[far] + 1)
        extendable = (arrived == latest) & ~silent & ~gone
        may_board = ~boarded & ~silent & (future - departed <= boarding_grace_s * _NS)
        open_run = mine & (extendable | may_board)

    # Hold each vehicle from its first open run, each stand behind its first held visit.
    bound = {v: _FAR for v in first_of}
    for k in np.flatnonzero(open_run).tolist():
        bound[str(run_vid[k])] = min(bound[str(run_vid[k])], int(arrived[k]))
    candidates = np.flatnonzero(visit).tolist()
    while True:
        block: dict[str, tuple[int, str]] = {}
        for k in np.flatnonzero(open_run).tolist() + candidates:
            v, a = str(run_vid[k]), int(arrived[k])
            if open_run[k] or a >= bound[v]:
                block[str(run_sid[k])] = min(block.get(str(run_sid[k]), (_FAR, "")), (a, v))
        released = [
            k
            for k in candidates
            if int(arrived[k]) < bound[str(run_vid[k])]
            and (int(arrived[k]), str(run_vid[k])) < block.get(str(run_sid[k]), (_FAR, ""))
        ]
        done = set(released)
        changed = False
        for k in candidates:
            v = str(run_vid[k])
            if k not in done and int(arrived[k]) < bound[v]:
                bound[v], changed = int(arrived[k]), True
        # A run across a vehicle's bound is kept whole (cut, its rest would be a new run).
        for k in np.flatnonzero(mine).tolist():
            v = str(run_vid[k])
            if int(arrived[k]) < bound[v] <= int(departed[k]):
                bound[v], changed = int(arrived[k]), True
        if not changed:
            break

    # Queue positions over the stand's visits still present at each arrival.
    out = runs.iloc[released].reset_index(drop=True)
    if len(out):
        q_vid = [str(v) for v in out[VEHICLE_ID]]
        q_sid = [str(s) for s in out[STAND_ID]]
        q_arr = arrived[released].tolist()
        q_dep = departed[released].tolist()
        for sid in sorted(set(q_sid)):
            for v, a, d in kept.pop(sid, []):
                q_vid.append(str(v))
                q_sid.append(sid)
                q_arr.append(int(a))
                q_dep.append(int(d))
        scode, stand_names = pd.factorize(pd.Series(q_sid, dtype="str"), sort=True)
        vcode, _ = pd.factorize(pd.Series(q_vid, dtype="str"), sort=True)
        arr = np.asarray(q_arr, dtype=np.int64)
        dep = np.asarray(q_dep, dtype=np.int64)
        queue = queue_positions(scode.astype(np.int64), vcode.astype(np.int64), arr, dep)
        out["queue_position"] = pd.Series(queue[: len(out)], dtype="int64")
        for code, sid in enumerate(stand_names):
            at = scode == code
            latest_arrival = int(arr[at].max())
            kept[str(sid)] = [
                [q_vid[i], int(arr[i]), int(dep[i])]
                for i in np.flatnonzero(at & (dep >= latest_arrival)).tolist()
            ]
    if final:
        return new_visits_state(), out, frame

    # Each active vehicle keeps its fixes from the one before its first unreleased visit, and
    # the METER_BLIP_MAX_FIXES before that one: a trip start is judged by them (a meter blip).
    cut: dict[str, int] = {}
    for v, lo in first_of.items():
        hi = last_of[v]
        if bound[v] == _FAR:
            cut[v] = int(t[max(hi - METER_BLIP_MAX_FIXES, lo)])
            continue
        at = lo + int(np.searchsorted(t[lo : hi + 1], bound[v]))
        cut[v] = int(t[max(at - 1 - METER_BLIP_MAX_FIXES, lo)])
    nexts = tails.next_states(frame, {v: vehicles.get(v) for v in first_of}, cut)
    for v, s in nexts.items():
        s["from"] = bound[v] if bound[v] != _FAR else int(t[last_of[v]]) + 1
        vehicles[v] = s
    return {"vehicles": vehicles, "stands": kept}, out, frame


def unreleased_arrivals(state: Mapping[str, Any] | None) -> dict[str, int]:
    """Per vehicle, the instant (epoch ns) before which all its visits were released.

    A visit of the vehicle not yet released (open, awaiting its boarding or its queue position)
    arrived at or after it; a consumer that must see all of a vehicle's visits up to an
    instant (overlapping stands, a local day) waits until it is later than that instant.
    Vehicles with nothing pending are absent: their next visit arrives after their latest fix.

    Parameters
    ----------
    state : mapping or None
        The state of :func:`advance_visits`.
    """
    if not state:
        return {}
    return {str(v): int(s["from"]) for v, s in state.get("vehicles", {}).items() if _pending(s)}


def visit_records(visits: pd.DataFrame, pings: pd.DataFrame) -> list[dict[str, Any]]:
    """Visits as plain data, each with the fixes the detectors read of it.

    The fixes: the vehicle's from the one before the arrival (the meter before a boarding at
    the first fix) to the later of the departure and the boarding. :func:`visits_from_records`
    turns them back into a visits frame and its pings.
    """
    if not len(visits):
        return []
    vid = pings[VEHICLE_ID].astype("str").to_numpy(dtype=object)
    first = visits[FIRST_PING].to_numpy(dtype=np.int64)
    last = visits[LAST_PING].to_numpy(dtype=np.int64)
    board = pd.to_numeric(visits[BOARDING_PING]).fillna(-1).to_numpy(dtype=np.int64)
    cols = [c for c in tails.CARRIED if c in pings.columns]
    ns = pings[TIMESTAMP].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    out = []
    for k, row in enumerate(visits.to_dict("records")):
        lo = int(first[k])
        if lo > 0 and vid[lo - 1] == vid[lo]:
            lo -= 1
        hi = max(int(last[k]), int(board[k])) + 1
        part = pings.iloc[lo:hi]
        fixes = {c: [tails.plain(x) for x in part[c].tolist()] for c in cols if c != TIMESTAMP}
        fixes[TIMESTAMP] = [int(x) for x in ns[lo:hi]]
        plain_row = {}
        for col in (
            *VISIT_COLUMNS,
            N_FIXES,
            N_FIXES_SURE,
            BOARDED_AT,
            BOARDING_DISTANCE_M,
            APPROACH_M,
            APPROACH_KMH,
        ):
            value = row[col]
            if isinstance(value, pd.Timestamp):
                value = int(value.value)
            plain_row[col] = tails.plain(value)
        out.append({"visit": plain_row, "fixes": fixes})
    return out


def visits_from_records(records: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the visits frame and the pings its positions refer to (:func:`visit_records`)."""
    if not records:
        return empty_visits(), tails.concat([])
    kept = {str(k): {"tail": r["fixes"]} for k, r in enumerate(records)}
    pings = tails.concat([tails.tails_frame(kept)])
    pings = pings.drop_duplicates([VEHICLE_ID, TIMESTAMP], ignore_index=True)
    ns = pings[TIMESTAMP].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    where = {(v, int(t)): i for i, (v, t) in enumerate(zip(pings[VEHICLE_ID], ns, strict=True))}
    rows = [r["visit"] for r in records]

    def column(name: str, dtype: Any, missing: Any = None) -> Any:
        return np.asarray([missing if r.get(name) is None else r[name] for r in rows], dtype=dtype)

    vids = [str(r[VEHICLE_ID]) for r in rows]
    arrived_ns = column("arrived_at", np.int64)
    departed_ns = column("departed_at", np.int64)
    boarded_ns = column(BOARDED_AT, np.int64, -1)
    licensed = pd.array([r["licensed"] for r in rows], dtype="boolean")
    frame = _visit_frame(
        vehicle_id=np.asarray(vids, dtype=object),
        stand_id=np.asarray([str(r[STAND_ID]) for r in rows], dtype=object),
        arrived_ns=arrived_ns,
        departed_ns=departed_ns,
        queue_position=column("queue_position", np.int64),
        boarded=column("boarded", bool),
        licensed=licensed,
        n_fixes=column(N_FIXES, np.int64),
        # a visit kept before the column existed: every inside fix as it was
        n_fixes_sure=np.asarray([r.get(N_FIXES_SURE, r[N_FIXES]) for r in rows], dtype=np.int64),
        first_ping=np.asarray(
            [where[(v, a)] for v, a in zip(vids, arrived_ns.tolist(), strict=True)]
        ),
        last_ping=np.asarray(
            [where[(v, d)] for v, d in zip(vids, departed_ns.tolist(), strict=True)]
        ),
        rows=pd.array(pings[ROW].to_numpy(), dtype="Int64") if ROW in pings.columns else None,
        boarding_ping=np.asarray(
            [
                -1 if b < 0 else where[(v, b)]
                for v, b in zip(vids, boarded_ns.tolist(), strict=True)
            ],
            dtype=np.int64,
        ),
        boarded_ns=boarded_ns,
        boarding_m=column(BOARDING_DISTANCE_M, np.float64, np.nan),
        approach_m=column(APPROACH_M, np.float64, np.nan),
        approach_kmh=column(APPROACH_KMH, np.float64, np.nan),
    )
    return frame, pings
