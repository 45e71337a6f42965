"""Stand occupancy over time buckets, and who is at each stand at an instant.

A visit (``stands/visits.py``) is present at instant t when ``arrived_at <= t <= departed_at``
(closed interval: the vehicle was observed inside at both ends), the same rule that gives
``queue_position``.

``occupancy.csv`` has one row per stand and bucket [bucket_start, bucket_start + bucket):

stand_id
    Every stand of the stands frame, plus any stand that only appears in the visits.
bucket_start
    Start of the bucket, tz-aware UTC (written as ISO 8601 UTC). Buckets are aligned on the Unix
    epoch, so "15min" buckets start at :00, :15, :30, :45 in UTC and in whole-hour zones.
vehicles_present
    Maximum number of visits of the stand in progress at the same instant within the bucket.
capacity
    Spaces of the stand (``capacity``), <NA> when unknown.
utilisation
    ``vehicles_present / capacity``; null when capacity is unknown or 0.
overflow
    ``vehicles_present > capacity``; False when capacity is unknown.
intruders
    Maximum number of visits *without* a parking licence (``licensed`` False) in progress at the
    same instant within the bucket — so ``intruders <= vehicles_present``. Visits whose licence is
    unknown are not counted; <NA> when no visit has licence data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from stands._errors import (
    DuplicateStandIdError,
    MissingColumnError,
    NaiveTimestampError,
    StandsError,
    ThresholdError,
)
from stands.frames import CAPACITY, STAND_ID
from stands.visits import dense_rank
from tracking.arrays import epoch_ns
from tracking.frames import VEHICLE_ID

ARRIVED_AT = "arrived_at"
DEPARTED_AT = "departed_at"
LICENSED = "licensed"
QUEUE_POSITION = "queue_position"
BUCKET_START = "bucket_start"
VEHICLES_PRESENT = "vehicles_present"
UTILISATION = "utilisation"
OVERFLOW = "overflow"
INTRUDERS = "intruders"
OCCUPANCY_COLUMNS = (
    STAND_ID,
    BUCKET_START,
    VEHICLES_PRESENT,
    CAPACITY,
    UTILISATION,
    OVERFLOW,
    INTRUDERS,
)
POSITION = "position"
WAITED_S = "waited_s"
PRESENT_COLUMNS = (
    STAND_ID,
    POSITION,
    VEHICLE_ID,
    ARRIVED_AT,
    DEPARTED_AT,
    WAITED_S,
    QUEUE_POSITION,
    LICENSED,
)

_VISIT_REQUIRED = (VEHICLE_ID, STAND_ID, ARRIVED_AT, DEPARTED_AT)
_UTC_NS = pd.DatetimeTZDtype("ns", "UTC")


def _instants_ns(values: pd.Series, *, name: str) -> npt.NDArray[np.int64]:
    if not isinstance(values.dtype, pd.DatetimeTZDtype):
        msg = f"'{name}' é {values.dtype} sem fuso horário; esperados instantes com fuso (UTC)"
        raise NaiveTimestampError(msg)
    if values.isna().any():
        msg = f"'{name}' tem {int(values.isna().sum())} instantes nulos"
        raise NaiveTimestampError(msg)
    return epoch_ns(values)


def _instant_ns(value: Any, *, name: str) -> int:
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        msg = f"'{name}' foi {value!r}; esperado um instante ISO 8601 com fuso"
        raise NaiveTimestampError(msg) from exc
    if pd.isna(ts) or ts.tzinfo is None:
        msg = f"'{name}' foi {value!r} sem fuso horário; esperado um instante com fuso (UTC)"
        raise NaiveTimestampError(msg)
    return int(ts.tz_convert("UTC").as_unit("ns").value)


def _visit_arrays(
    visits: pd.DataFrame,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    missing = [c for c in _VISIT_REQUIRED if c not in visits.columns]
    if missing:
        msg = (
            f"as visitas não têm as colunas {', '.join(missing)}; "
            f"esperado {', '.join(_VISIT_REQUIRED)}"
        )
        raise MissingColumnError(msg)
    arrived = _instants_ns(visits[ARRIVED_AT], name=ARRIVED_AT)
    departed = _instants_ns(visits[DEPARTED_AT], name=DEPARTED_AT)
    if np.any(departed < arrived):
        msg = "visitas com departed_at antes de arrived_at"
        raise StandsError(msg)
    return arrived, departed


def _bucket_ns(bucket: str) -> int:
    try:
        step = pd.Timedelta(bucket)
    except (ValueError, TypeError) as exc:
        msg = f"'bucket' foi {bucket!r}; esperado um intervalo como '15min' ou '1h'"
        raise ThresholdError(msg) from exc
    if pd.isna(step) or step <= pd.Timedelta(0):
        msg = f"'bucket' foi {bucket!r}; esperado um intervalo positivo como '15min'"
        raise ThresholdError(msg)
    return int(step.as_unit("ns").value)


def empty_occupancy() -> pd.DataFrame:
    """Return an empty, correctly typed occupancy frame.

    Returns
    -------
    pandas.DataFrame
        Columns ``OCCUPANCY_COLUMNS``, zero rows.
    """
    return pd.DataFrame(
        {
            STAND_ID: pd.Series([], dtype="str"),
            BUCKET_START: pd.Series([], dtype=_UTC_NS),
            VEHICLES_PRESENT: pd.Series([], dtype="int64"),
            CAPACITY: pd.Series([], dtype="Int64"),
            UTILISATION: pd.Series([], dtype="float64"),
            OVERFLOW: pd.Series([], dtype="bool"),
            INTRUDERS: pd.Series([], dtype="Int64"),
        }
    )


def _occupied_cells(
    *,
    stand: npt.NDArray[np.int64],
    arrived: npt.NDArray[np.int64],
    departed: npt.NDArray[np.int64],
    origin: int,
    step: int,
    n_buckets: int,
) -> npt.NDArray[np.int64]:
    """Sorted unique cell keys ``stand * n_buckets + bucket`` of the buckets each visit overlaps."""
    first = np.clip((arrived - origin) // step, 0, None)
    last = np.clip((departed - origin) // step, None, n_buckets - 1)
    spans = np.clip(last - first + 1, 0, None)
    owner = np.repeat(np.arange(len(stand)), spans)
    offset = np.arange(int(spans.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(spans) - spans, spans
    )
    keys = np.sort(stand[owner] * np.int64(n_buckets) + first[owner] + offset)
    return keys[np.append(True, keys[1:] != keys[:-1])] if len(keys) else keys


def _max_present(
    *,
    cells: npt.NDArray[np.int64],
    stand: npt.NDArray[np.int64],
    arrived: npt.NDArray[np.int64],
    departed: npt.NDArray[np.int64],
    origin: int,
    step: int,
    n_buckets: int,
) -> npt.NDArray[np.int64]:
    """Max simultaneous visits in each cell (sorted keys ``stand * n_buckets + bucket``).

    The count at t is #{arrived <= t} - #{departed < t}; it only rises at arrivals, so its
    maximum over a bucket is at the bucket start or at an arrival inside the bucket. Every
    arrival inside the window must fall in one of ``cells``.
    """
    result = np.zeros(len(cells), dtype=np.int64)
    if len(stand) == 0 or len(cells) == 0:
        return result
    inside = (arrived >= origin) & (arrived < origin + step * n_buckets)
    cand_cell = np.concatenate(
        [
            np.arange(len(cells), dtype=np.int64),
            np.searchsorted(cells, stand[inside] * n_buckets + (arrived[inside] - origin) // step),
        ]
    )
    cand_stand = cells[cand_cell] // n_buckets
    cand_time = np.concatenate([origin + step * (cells % n_buckets), arrived[inside]])
    # Dense ranks let (stand, instant) pack into one sortable int64.
    inverse, n_distinct = dense_rank(np.concatenate([arrived, departed, cand_time]))
    span = np.int64(n_distinct + 1)
    m = len(stand)
    arr_keys = np.sort(stand * span + inverse[:m])
    dep_keys = np.sort(stand * span + inverse[m : 2 * m])
    cand_keys = cand_stand * span + inverse[2 * m :]
    # The stand offsets of both searches are equal (same visits per stand) and cancel out.
    count = np.searchsorted(arr_keys, cand_keys, side="right") - np.searchsorted(
        dep_keys, cand_keys, side="left"
    )
    np.maximum.at(result, cand_cell, count)
    return result


def occupancy(
    visits: pd.DataFrame,
    stands: pd.DataFrame,
    *,
    bucket: str = "15min",
    start: Any = None,
    end: Any = None,
    include_idle: bool = True,
    licence_known: bool | None = None,
) -> pd.DataFrame:
    """Occupancy of every stand per time bucket (definitions in the module docstring).

    Parameters
    ----------
    visits : pandas.DataFrame
        Visits from ``stands.visits.detect_visits``: ``vehicle_id``, ``stand_id``,
        ``arrived_at``, ``departed_at`` (tz-aware), optional ``licensed`` (boolean/<NA>).
    stands : pandas.DataFrame
        Stands (``stands/frames.py``): ``stand_id`` (unique), optional ``capacity``.
    bucket : str, default "15min"
        Bucket length, a pandas timedelta string.
    start, end : str or pandas.Timestamp, optional
        Tz-aware bounds: buckets from the one containing ``start`` up to the last one starting
        before ``end`` (exclusive). Default: from the first arrival to the last departure.
    include_idle : bool, default True
        True: every (stand, bucket) of the window, zeros included (a dense grid of
        n_stands x n_buckets rows). False: only buckets where at least one vehicle was present
        (idle buckets are then implied zeros).
    licence_known : bool, optional
        Whether ``intruders`` is counted (else <NA>); default: when any visit has licence
        data. An engine giving the visits of some stands at a time passes the whole run's.

    Returns
    -------
    pandas.DataFrame
        Columns ``OCCUPANCY_COLUMNS``, one row per (stand, bucket), sorted by
        (stand_id, bucket_start). Empty when there are no visits and no bounds.

    Raises
    ------
    MissingColumnError
        If visits or stands lack required columns.
    NaiveTimestampError
        If visit times or bounds are naive or null.
    ThresholdError
        If ``bucket`` is not a positive interval or ``end`` is not after ``start``.
    DuplicateStandIdError
        If stand ids repeat.
    StandsError
        If a visit departs before it arrives.
    """
    step = _bucket_ns(bucket)
    arrived, departed = _visit_arrays(visits)
    if STAND_ID not in stands.columns:
        msg = "os pontos não têm a coluna stand_id"
        raise MissingColumnError(msg)
    if stands[STAND_ID].duplicated().any():
        dup = stands[STAND_ID][stands[STAND_ID].duplicated()].iloc[0]
        msg = f"stand_id repetido nos pontos: {dup!r}"
        raise DuplicateStandIdError(msg)

    if start is None and len(arrived) == 0:
        return empty_occupancy()
    lo = _instant_ns(start, name="start") if start is not None else int(arrived.min())
    if end is not None:
        hi = _instant_ns(end, name="end")
    elif len(departed):
        hi = int(departed.max()) // step * step + step
    else:
        hi = lo // step * step + step
    if hi <= lo:
        msg = "'end' deve ser posterior a 'start'"
        raise ThresholdError(msg)
    origin = lo // step * step
    n_buckets = -(-(hi - origin) // step)

    stand_ids = np.unique(
        np.concatenate(
            [
                stands[STAND_ID].astype("str").to_numpy(dtype=object),
                visits[STAND_ID].astype("str").to_numpy(dtype=object),
            ]
        )
    )
    stand_code = np.searchsorted(stand_ids, visits[STAND_ID].astype("str").to_numpy(dtype=object))
    n_stands = len(stand_ids)
    if n_stands == 0:
        return empty_occupancy()
    window = dict(origin=origin, step=step, n_buckets=n_buckets)
    if include_idle:
        cells = np.arange(n_stands * n_buckets, dtype=np.int64)
    else:
        cells = _occupied_cells(stand=stand_code, arrived=arrived, departed=departed, **window)
    present = _max_present(
        cells=cells, stand=stand_code, arrived=arrived, departed=departed, **window
    )

    if licence_known is None:
        licence_known = bool(LICENSED in visits.columns and visits[LICENSED].notna().any())
    if licence_known:
        unlicensed = (
            (~visits[LICENSED].astype("boolean")).fillna(False).to_numpy(dtype=bool)
            if LICENSED in visits.columns
            else np.zeros(len(visits), dtype=bool)
        )
        intruders = pd.array(
            _max_present(
                cells=cells,
                stand=stand_code[unlicensed],
                arrived=arrived[unlicensed],
                departed=departed[unlicensed],
                **window,
            ),
            dtype="Int64",
        )
    else:
        intruders = pd.array([pd.NA] * len(cells), dtype="Int64")

    capacity_by_stand = pd.Series(pd.NA, index=stand_ids, dtype="Int64")
    if CAPACITY in stands.columns:
        known = pd.Series(
            pd.array(stands[CAPACITY].to_numpy(), dtype="Int64"),
            index=stands[STAND_ID].astype("str").to_numpy(dtype=object),
        )
        capacity_by_stand.loc[known.index] = known
    cell_stand = cells // n_buckets
    capacity = pd.Series(capacity_by_stand.array[cell_stand], dtype="Int64")
    vehicles = pd.Series(present, dtype="int64")
    usable = capacity.notna() & (capacity > 0)
    utilisation = (vehicles / capacity.astype("Float64")).where(usable).astype("float64")
    overflow = (vehicles > capacity).fillna(False).astype("bool")
    bucket_starts = origin + step * (cells % n_buckets)
    return pd.DataFrame(
        {
            STAND_ID: pd.Series(stand_ids[cell_stand], dtype="str"),
            BUCKET_START: pd.Series(pd.to_datetime(bucket_starts, unit="ns", utc=True)).astype(
                _UTC_NS
            ),
            VEHICLES_PRESENT: vehicles,
            CAPACITY: capacity,
            UTILISATION: utilisation,
            OVERFLOW: overflow,
            INTRUDERS: pd.Series(intruders, dtype="Int64"),
        }
    )


def present_at(visits: pd.DataFrame, at: Any) -> pd.DataFrame:
    """Who is at each stand at instant ``at``, in queue order.

    A visit is present when ``arrived_at <= at <= departed_at``. ``position`` is the place in
    the queue at ``at``: 1 for the vehicle that arrived first among those present (same instant:
    smaller ``vehicle_id`` first). ``queue_position`` is the position at the vehicle's arrival.

    Parameters
    ----------
    visits : pandas.DataFrame
        Visits from ``stands.visits.detect_visits``.
    at : str or pandas.Timestamp
        Tz-aware instant.

    Returns
    -------
    pandas.DataFrame
        Columns ``PRESENT_COLUMNS``, sorted by (stand_id, position); ``waited_s`` is
        ``at - arrived_at`` in seconds; ``queue_position``/``licensed`` are <NA> when the
        visits do not carry them.

    Raises
    ------
    MissingColumnError
        If visits lack required columns.
    NaiveTimestampError
        If ``at`` or visit times are naive or null.
    StandsError
        If a visit departs before it arrives.
    """
    arrived, departed = _visit_arrays(visits)
    t = _instant_ns(at, name="at")
    here = np.flatnonzero((arrived <= t) & (t <= departed))
    sub = visits.iloc[here]
    n = len(here)
    frame = pd.DataFrame(
        {
            STAND_ID: pd.Series(sub[STAND_ID].to_numpy(dtype=object), dtype="str"),
            POSITION: pd.Series(np.zeros(n, dtype=np.int64)),
            VEHICLE_ID: pd.Series(sub[VEHICLE_ID].to_numpy(dtype=object), dtype="str"),
            ARRIVED_AT: pd.Series(pd.to_datetime(arrived[here], unit="ns", utc=True)).astype(
                _UTC_NS
            ),
            DEPARTED_AT: pd.Series(pd.to_datetime(departed[here], unit="ns", utc=True)).astype(
                _UTC_NS
            ),
            WAITED_S: pd.Series((t - arrived[here]) / 1e9, dtype="float64"),
            QUEUE_POSITION: pd.Series(
                pd.array(sub[QUEUE_POSITION].to_numpy(), dtype="Int64")
                if QUEUE_POSITION in sub.columns
                else pd.array([pd.NA] * n, dtype="Int64")
            ),
            LICENSED: pd.Series(
                pd.array(sub[LICENSED].to_numpy(), dtype="boolean")
                if LICENSED in sub.columns
                else pd.array([pd.NA] * n, dtype="boolean")
            ),
        }
    )
    frame = frame.sort_values([STAND_ID, ARRIVED_AT, VEHICLE_ID], ignore_index=True, kind="stable")
    frame[POSITION] = frame.groupby(STAND_ID, sort=False).cumcount().astype("int64") + 1
    return frame
