"""Validation of raw GPS fixes: every bad row is rejected with a reason, every good row is kept.

:func:`validate_pings` is the pure core behind every reader (:func:`tracking.ingest.read_pings`,
:func:`tracking.porto.read_porto_trips`). It takes the rows as read, before any conversion, so
nothing is lost or coerced silently, and returns the valid fixes in the frame contract of
:mod:`tracking.frames` plus the rejected rows with their reason and original values.

Reasons
-------
Each rejected row carries exactly one machine code: the first that applies in the order of
:data:`REJECTION_REASONS`, so a row with bad coordinates *and* a bad timestamp is reported as
coordinates. Row-level checks come first; the duplicate checks only look at rows that passed them.
The row-level checks are one table, :data:`ROW_RULES` (applied by :func:`row_codes` to the cells
as read, :class:`RowFields`): the frame reader here and the record reader of the HTTP ingest
(:func:`api.ingest.check_batch`) both judge by it, so a bound or a limit lives in one place.

``empty_vehicle_id``
    ``vehicle_id`` empty or blank.
``missing_coordinates``
    ``lat`` or ``lon`` empty (a null/NaN in a numeric column counts as empty).
``invalid_coordinates``
    ``lat`` or ``lon`` not a finite number (text, ``NaN``, ``inf`` written in the cell).
``out_of_range_coordinates``
    ``lat`` outside [-90, 90] or ``lon`` outside [-180, 180].
``null_island``
    ``lat == 0`` and ``lon == 0``, the classic fix of a receiver without a position.
``missing_timestamp``
    ``timestamp`` empty.
``unparseable_timestamp``
    Neither ISO 8601 within what a nanosecond ``pandas.Timestamp`` holds (1677-09-21 to
    2262-04-11) nor Unix seconds in [0, 9.2e9) (milliseconds are refused here, not misread as a
    date in the year 45000).
``naive_timestamp``
    ISO 8601 without a UTC offset (``Z`` or ``±HH[:MM]``), or a naive datetime column.
``future_timestamp``
    After ``now`` plus :data:`FUTURE_TOLERANCE_S`.
``too_old_timestamp``
    Before ``not_before``, when given (live ingest refuses fixes older than a few days; file
    imports give none and keep all history).
``unknown_meter``
    ``meter`` not empty and not one of ``free``, ``occupied``, ``off`` (case and surrounding
    blanks are ignored).
``unknown_tariff``
    ``tariff`` not empty and not 1 or 2. A tariff given while the meter is not ``occupied`` is
    kept as given: it is not a malformed fix, and detectors decide what it means.
``invalid_speed`` / ``invalid_heading`` / ``invalid_accuracy``
    Optional numeric column not empty and not a finite number in range (speed in
    [0, :data:`MAX_REPORTED_SPEED_KMH`], accuracy >= 0, heading in [0, 360]). A value out of
    range is a corrupt cell, as a bad heading is: the row is rejected with its cells kept, not
    stored with the value dropped (no optional cell is silently emptied). Exactly -1
    (:data:`UNKNOWN_SENTINEL`) is the trackers' "not measured" and reads as empty.
``invalid_text``
    ``vehicle_id`` or ``driver_id`` holds one of :data:`CORRUPT_CHARS` (NUL, which no
    PostgreSQL text can store; U+FFFD, what a CSV byte that is not UTF-8 is read as) or of
    :data:`UNSEEN_CHARS` (a control, zero-width or direction character, which no page shows),
    or is longer than :data:`MAX_ID_CHARS` characters: a corrupt cell, not an identifier.
``duplicate``
    Identical, across all original columns, to an earlier row of the input.
``conflicting_duplicate``
    Same vehicle and same instant as an earlier kept row, with other values (the database is
    unique on (vehicle, timestamp)). The earlier row wins.

"Earlier" means earlier in the order of the raw frame (the file order). Fixes implying an
impossible speed are *kept* and flagged (``speed_flag``), never rejected.

Unix seconds are read exactly: written as text (CSV, JSON strings, OsmAnd), their decimal digits
give the nanoseconds (``1700000000.010`` is 10 ms, never 9.999 ms as float arithmetic gives);
as binary floats (a Parquet float column), the float is rounded to the nearest microsecond,
which recovers every instant written with at most 6 decimals before 2106.
:func:`unix_seconds_ns` is the same reading for one value (the HTTP ingest's record reader).

Long inputs are validated chunk by chunk with :func:`validate_ping_chunks` (what
:func:`tracking.ingest.read_pings` does): the same rules, the same result, with only the valid
fixes kept between chunks in compact arrays.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from geo.crs import EARTH_RADIUS_M, haversine_m
from runtime import release_free_memory
from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError

REJECTION_REASONS: tuple[str, ...] = (
    "malformed_row",  # set by the CSV reader, never by validate_pings
    "empty_vehicle_id",
    "missing_coordinates",
    "invalid_coordinates",
    "out_of_range_coordinates",
    "null_island",
    "missing_timestamp",
    "unparseable_timestamp",
    "naive_timestamp",
    "future_timestamp",
    "too_old_timestamp",
    "unknown_meter",
    "unknown_tariff",
    "invalid_speed",
    "invalid_heading",
    "invalid_accuracy",
    "invalid_text",
    "duplicate",
    "conflicting_duplicate",
)
"""Rejection codes, in the order of precedence used when a row has several problems."""

MAX_SPEED_KMH = 250.0
"""Fastest credible step between two fixes of a taxi: faster steps are flagged as impossible
(validation, trips, the ``gps_anomaly`` detector)."""

MAX_REPORTED_SPEED_KMH = 400.0
"""Highest ``speed_kmh`` a fix may report: about the top speed of the fastest production cars,
over twice a taxi's; a larger value is a receiver's or a unit conversion's fault
(``invalid_speed``). Not :data:`MAX_SPEED_KMH`, which judges steps between fixes."""

MAX_EXCURSION_S = 300.0
"""Longest displaced stretch of GPS (a jump away and back) read as one excursion, not as driving
(:func:`displaced_fixes`; the ``gps_anomaly`` outlier span)."""

FUTURE_TOLERANCE_S = 300.0
"""Clock skew allowed between a device and ``now`` before a fix counts as from the future."""

MAX_UNIX_S = 9.2e9
"""Upper bound (exclusive) of a Unix-seconds timestamp (year 2261: nanoseconds fit in int64);
larger values are likely milliseconds."""

MAX_ID_CHARS = 64
"""Longest ``vehicle_id`` and ``driver_id`` accepted (characters, after trimming blanks)."""

CORRUPT_CHARS = ("\x00", "\ufffd")
"""Characters that make an identifier corrupt: NUL and the replacement character U+FFFD (a
byte that is not UTF-8, as :mod:`tracking.ingest` reads it, or a decoder's mark upstream)."""
UNSEEN_CHARS = (
    r"[\x01-\x1f\x7f-\x9f"  # control characters (NUL is in CORRUPT_CHARS)
    "\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
"""Characters an identifier cannot show (controls, zero-width and direction marks, soft hyphen):
"T\u200b1" looks like T1 on every page and matches no registry id. A pattern both Python's
``re`` and Arrow's RE2 read (the non-ASCII ones written as themselves)."""

REJECTED_LEAD = (fr.ROW, fr.REASON)

MAX_ABS_LAT_DEG = 90.0
MAX_ABS_LON_DEG = 180.0
MAX_HEADING_DEG = 360.0
METER_INDEX: dict[str, int] = {"": 0, **{m: i + 1 for i, m in enumerate(fr.METER_VALUES)}}
"""Code of each ``meter`` cell (lower case, trimmed): 0 empty, 1.. a known value; -1 otherwise."""


@dataclass(frozen=True, eq=False)
class RowFields:
    """The cells of n rows as the row rules read them: aligned numpy arrays of length n.

    Two readers build it: the frame reader of :func:`validate_pings` (Arrow, any cell) and the
    record reader of small JSON batches (:func:`api.ingest.check_batch`, plain cells only). The
    rules are applied to it by :func:`row_codes`, from the one table :data:`ROW_RULES`.
    Numbers are NaN where missing or invalid; ``ts_ns`` is 0 where not parsed.
    """

    vehicle_chars: NDArray[np.int64]
    driver_chars: NDArray[np.int64]
    text_corrupt: NDArray[np.bool_]
    lat: NDArray[np.float64]
    lat_missing: NDArray[np.bool_]
    lat_invalid: NDArray[np.bool_]
    lon: NDArray[np.float64]
    lon_missing: NDArray[np.bool_]
    lon_invalid: NDArray[np.bool_]
    ts_ns: NDArray[np.int64]
    ts_missing: NDArray[np.bool_]
    ts_unparseable: NDArray[np.bool_]
    ts_naive: NDArray[np.bool_]
    meter_code: NDArray[np.int8]
    tariff: NDArray[np.float64]
    tariff_invalid: NDArray[np.bool_]
    speed: NDArray[np.float64]
    speed_invalid: NDArray[np.bool_]
    heading: NDArray[np.float64]
    heading_invalid: NDArray[np.bool_]
    accuracy: NDArray[np.float64]
    accuracy_invalid: NDArray[np.bool_]


@dataclass(frozen=True)
class Window:
    """The instants a fix may have: ``floor_ns <= ts_ns <= limit_ns`` (epoch nanoseconds)."""

    limit_ns: int
    floor_ns: int


RowTest = Callable[[RowFields, Window], NDArray[np.bool_]]

ROW_RULES: tuple[tuple[str, RowTest], ...] = (
    ("empty_vehicle_id", lambda f, w: f.vehicle_chars == 0),
    ("missing_coordinates", lambda f, w: f.lat_missing | f.lon_missing),
    ("invalid_coordinates", lambda f, w: f.lat_invalid | f.lon_invalid),
    (
        "out_of_range_coordinates",
        lambda f, w: (np.abs(f.lat) > MAX_ABS_LAT_DEG) | (np.abs(f.lon) > MAX_ABS_LON_DEG),
    ),
    ("null_island", lambda f, w: (f.lat == 0.0) & (f.lon == 0.0)),
    ("missing_timestamp", lambda f, w: f.ts_missing),
    ("unparseable_timestamp", lambda f, w: f.ts_unparseable),
    ("naive_timestamp", lambda f, w: f.ts_naive),
    ("future_timestamp", lambda f, w: f.ts_ns > w.limit_ns),
    ("too_old_timestamp", lambda f, w: f.ts_ns < w.floor_ns),
    ("unknown_meter", lambda f, w: f.meter_code < 0),
    (
        "unknown_tariff",
        lambda f, w: (
            f.tariff_invalid | (~np.isnan(f.tariff) & ~_one_of(f.tariff, fr.TARIFF_VALUES))
        ),
    ),
    (
        "invalid_speed",
        lambda f, w: f.speed_invalid | (f.speed < 0) | (f.speed > MAX_REPORTED_SPEED_KMH),
    ),
    (
        "invalid_heading",
        lambda f, w: f.heading_invalid | (f.heading < 0) | (f.heading > MAX_HEADING_DEG),
    ),
    ("invalid_accuracy", lambda f, w: f.accuracy_invalid | (f.accuracy < 0)),
    (
        "invalid_text",
        lambda f, w: (
            f.text_corrupt | (f.vehicle_chars > MAX_ID_CHARS) | (f.driver_chars > MAX_ID_CHARS)
        ),
    ),
)
"""The row rules, in the order of :data:`REJECTION_REASONS`: (reason, test over the rows).

The one definition of every row-level bound and limit; both readers' rows go through it
(:func:`row_codes`). The duplicate reasons compare rows with each other, not one row's cells.
"""


def _one_of(values: NDArray[np.float64], allowed: Iterable[float]) -> NDArray[np.bool_]:
    """Whether each value is one of ``allowed`` (a few values: cheaper than ``numpy.isin``)."""
    found = np.zeros(len(values), dtype=bool)
    for value in allowed:
        found |= values == value
    return found


def row_codes(fields: RowFields, window: Window) -> NDArray[np.int8]:
    """Apply :data:`ROW_RULES`: per row, the code of the first failed rule, 0 when none fails.

    Parameters
    ----------
    fields : RowFields
        The rows' cells as read.
    window : Window
        Accepted instants.

    Returns
    -------
    numpy.ndarray
        int8 per row: 1 + the index in :data:`REJECTION_REASONS` of the reason, or 0.
    """
    code = np.zeros(len(fields.ts_ns), dtype=np.int8)
    with np.errstate(invalid="ignore"):
        for reason, test in ROW_RULES:
            code[(code == 0) & test(fields, window)] = _CODE[reason]
    return code


_CODE = {reason: i + 1 for i, reason in enumerate(REJECTION_REASONS)}
_NUMERIC_RE = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"
# An offset must follow a time of day, so a bare date such as "2024-01-01" is not "-01"; the
# time may be in ISO 8601's basic format ("20261207T060130Z").
_OFFSET_RE = r"\d{2}:?\d{2}(?::?\d{2}(?:[.,]\d+)?)?\s*(?:z|[+-]\d{2}(?::?\d{2})?)$"


ChunkSource = Callable[[], Iterable[pd.DataFrame]]
"""A zero-argument callable returning the raw chunks of one input, in input order, each time."""

KEPT_BYTES_PER_ROW = 78
"""Memory held per kept fix between chunks by :func:`validate_ping_chunks` (arrays + key index)."""

STORED_INSTANT_NS = 1_000
"""Precision of a stored instant, in nanoseconds: the database keeps microseconds, and its key is
(vehicle, microsecond). :func:`merge_microseconds` applies it to fixes bound for the database."""

FIX_VALUES: tuple[str, ...] = (
    fr.LAT,
    fr.LON,
    fr.SPEED_KMH,
    fr.HEADING_DEG,
    fr.ACCURACY_M,
    fr.METER,
    fr.TARIFF,
    fr.DRIVER_ID,
)
"""What makes two fixes of one vehicle and stored instant the same fix: equal values (missing
equals missing), ``duplicate``; any difference, ``conflicting_duplicate``. The HTTP ingest and
the file import (:func:`merge_microseconds`, :func:`db.tracking.store.store_fixes`) compare
these."""


def validate_pings(
    raw: pd.DataFrame,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = MAX_SPEED_KMH,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    not_before: pd.Timestamp | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split raw GPS fixes into valid pings and rejected rows.

    Parameters
    ----------
    raw : pandas.DataFrame
        Rows as read, in input order, with a ``row`` column (1-based data row of the source) and
        at least ``vehicle_id``, ``timestamp``, ``lat``, ``lon``. Text columns hold the cells as
        written (missing = empty string), as ``str`` or as a ``category`` or Arrow dictionary
        column of them (each distinct cell is then checked once; missing = empty); numeric
        columns (from Parquet) are accepted as they are, NaN meaning empty; ``timestamp`` may
        also be a datetime column (tz-aware, else every row is ``naive_timestamp``) or numeric
        Unix seconds. Other columns are carried into ``rejected`` only.
    now : pandas.Timestamp, optional
        Reference instant for ``future_timestamp`` (tz-aware); defaults to the current time.
    max_speed_kmh : float, default 250.0
        Implied speed from the previous kept fix of the vehicle above which a fix is flagged.
    future_tolerance_s : float, default 300.0
        Clock skew tolerated after ``now``.
    not_before : pandas.Timestamp, optional
        Earliest instant accepted (tz-aware); earlier fixes are ``too_old_timestamp``. None:
        any past instant.

    Returns
    -------
    pings : pandas.DataFrame
        Valid fixes, columns :data:`tracking.frames.PING_COLUMNS`, sorted by
        (vehicle_id, timestamp) with a RangeIndex.
    rejected : pandas.DataFrame
        ``row``, ``reason`` and every original column of ``raw`` as text, in input order.

    Raises
    ------
    MissingColumnsError
        If ``raw`` lacks ``row`` or a required ping column.
    InvalidParameterError
        If ``now`` is naive or a threshold is not positive.
    """
    return validate_ping_chunks(
        lambda: (raw,),
        now=now,
        max_speed_kmh=max_speed_kmh,
        future_tolerance_s=future_tolerance_s,
        not_before=not_before,
    )


def validate_ping_chunks(
    chunks: ChunkSource,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = MAX_SPEED_KMH,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    not_before: pd.Timestamp | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate raw fixes given in consecutive chunks, as :func:`validate_pings` on all of them.

    Each chunk is checked on its own and dropped; between chunks only the valid fixes are kept,
    in compact arrays (about :data:`KEPT_BYTES_PER_ROW` bytes a fix: vehicle and driver as codes
    into dictionaries, ``meter`` and ``tariff`` as small codes), plus the rejected rows with
    their cells. Duplicates across chunk boundaries follow the same rules as within one frame:
    a kept fix's (vehicle, instant) is found through a 64-bit hash, and every hash match is
    checked against the exact key. A later row with the key of a kept fix of an earlier chunk
    and the same parsed values (coordinates, speed, meter, ...) may still differ in how a cell
    is written, so ``duplicate`` versus ``conflicting_duplicate`` is settled by comparing the
    cells: ``chunks`` is called a second time, only then, to fetch the kept rows concerned.

    Parameters
    ----------
    chunks : callable
        Returns an iterable of raw frames (as :func:`validate_pings` takes them), in input
        order, with the same columns; ``row`` values identify rows across calls.
    now, max_speed_kmh, future_tolerance_s, not_before
        As in :func:`validate_pings`.

    Returns
    -------
    pings, rejected : pandas.DataFrame
        As :func:`validate_pings` returns them for the concatenation of the chunks.

    Raises
    ------
    MissingColumnsError
        If a chunk lacks ``row`` or a required ping column.
    InvalidParameterError
        If ``now`` is naive or a threshold is not positive.
    """
    now_ts = _check_now(now)
    if not max_speed_kmh > 0:
        msg = f"'max_speed_kmh' era {max_speed_kmh}; esperado um número positivo"
        raise InvalidParameterError(msg)
    if not future_tolerance_s >= 0:
        msg = f"'future_tolerance_s' era {future_tolerance_s}; esperado um número >= 0"
        raise InvalidParameterError(msg)
    limit_ns = now_ts.value + int(round(future_tolerance_s * 1e9))
    floor_ns = _NO_FLOOR if not_before is None else _check_now(not_before).value
    state = _State()
    for raw in chunks():
        _add_chunk(state, raw, limit_ns=limit_ns, floor_ns=floor_ns)
        rows = len(raw)
        del raw
        _release_free_memory(rows)
    if not state.rejected:
        return empty_pings(), empty_rejected([])
    rejected = (
        pd.concat(state.rejected, ignore_index=True)
        if len(state.rejected) > 1
        else (state.rejected[0])
    )
    state.rejected = []
    if state.pending_rejected:
        _settle_pending(state, rejected, chunks)
        _release_free_memory(state.n)
    return _finish(state, max_speed_kmh=max_speed_kmh), rejected


def make_rejected(
    rows: pd.DataFrame, reasons: Sequence[str] | NDArray[np.object_] | pa.Array | pa.ChunkedArray
) -> pd.DataFrame:
    """Build a rejected frame: ``row``, ``reason`` and the original columns as text.

    Parameters
    ----------
    rows : pandas.DataFrame
        The rejected raw rows, with their ``row`` column.
    reasons : sequence of str or Arrow string array
        One code of :data:`REJECTION_REASONS` per row.

    Returns
    -------
    pandas.DataFrame
        With a RangeIndex; empty cells are empty strings.
    """
    n = len(rows)
    reason = (
        _str_series(reasons)
        if isinstance(reasons, pa.Array | pa.ChunkedArray)
        else pd.Series(np.asarray(reasons, dtype=object).reshape(n), dtype="str")
    )
    out: dict[str, pd.Series] = {
        fr.ROW: pd.Series(rows[fr.ROW].to_numpy(dtype=np.int64)),
        fr.REASON: reason,
    }
    for col in rows.columns:
        if col in (fr.ROW, fr.REASON):
            continue
        out[col] = _as_text(rows[col]).astype("str").reset_index(drop=True)
    return pd.DataFrame(out)


def empty_rejected(columns: Sequence[str]) -> pd.DataFrame:
    """Return an empty rejected frame with ``row``, ``reason`` and ``columns``.

    Parameters
    ----------
    columns : sequence of str
        The original columns of the input.

    Returns
    -------
    pandas.DataFrame
        Zero rows, correctly typed.
    """
    cols = [c for c in columns if c not in (fr.ROW, fr.REASON)]
    return make_rejected(
        pd.DataFrame(
            {fr.ROW: np.zeros(0, np.int64), **{c: pd.Series([], dtype="str") for c in cols}}
        ),
        [],
    )


def empty_pings() -> pd.DataFrame:
    """Return an empty pings frame with the columns and dtypes of the contract.

    Returns
    -------
    pandas.DataFrame
        Zero rows, columns :data:`tracking.frames.PING_COLUMNS`.
    """
    return _finish(_State(), max_speed_kmh=MAX_SPEED_KMH)


def speed_flags(
    vehicle_codes: NDArray[np.integer],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    *,
    max_speed_kmh: float,
) -> NDArray[np.bool_]:
    """Flag fixes whose implied speed from the previous fix of the same vehicle is too high.

    Parameters
    ----------
    vehicle_codes : numpy.ndarray
        Vehicle of each fix, fixes sorted by (vehicle, time).
    ts_ns : numpy.ndarray
        Epoch nanoseconds, strictly increasing within a vehicle.
    lat, lon : numpy.ndarray
        Degrees.
    max_speed_kmh : float
        Limit; a step implying more is flagged on its later fix.

    Returns
    -------
    numpy.ndarray
        Boolean per fix; the first fix of each vehicle is never flagged.
    """
    n = len(ts_ns)
    flags = np.zeros(n, dtype=bool)
    # In blocks, so that the temporaries stay small on long inputs.
    for start in range(1, n, _FLAG_BLOCK):
        stop = min(n, start + _FLAG_BLOCK)
        part = slice(start - 1, stop)
        flags[start:stop] = _step_flags(
            vehicle_codes[part], ts_ns[part], lat[part], lon[part], max_speed_kmh=max_speed_kmh
        )
    return flags


def impossible_steps(
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    at: NDArray[np.integer],
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
) -> NDArray[np.bool_]:
    """Whether the step into each fix ``at`` from the fix before it is too fast.

    The test of :func:`speed_flags`; the fixes ``at - 1`` and ``at`` are taken as one
    vehicle's, ``at`` > 0.
    """
    ends = np.asarray(at, dtype=np.int64)
    pairs = np.stack([ends - 1, ends], axis=1).ravel()
    codes = np.repeat(np.arange(len(ends), dtype=np.int64), 2)
    flags = speed_flags(codes, ts_ns[pairs], lat[pairs], lon[pairs], max_speed_kmh=max_speed_kmh)
    return flags[1::2]


def displaced_fixes(
    vehicle_codes: NDArray[np.integer],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    max_excursion_s: float = MAX_EXCURSION_S,
) -> NDArray[np.bool_]:
    """Flag the fixes of displaced stretches of GPS (multipath): ``A | B … B' | A'``.

    A stretch is reached by an impossible step from a fix itself reached possibly (``A``) and
    left by the vehicle's next impossible step, to a fix ``A'`` that ``A`` could reach in the
    time between them, at most ``max_excursion_s`` after ``A``. Two such stretches sharing an
    impossible step (the track and the excursion are ambiguous) keep the shorter one, the
    earlier on a tie. Fixes sorted by (vehicle, time) as for :func:`speed_flags`.
    """
    n = len(ts_ns)
    displaced = np.zeros(n, dtype=bool)
    jumped = speed_flags(vehicle_codes, ts_ns, lat, lon, max_speed_kmh=max_speed_kmh)
    into = np.flatnonzero(jumped)
    if len(into) < 2:
        return displaced
    out, back = into[:-1], into[1:]
    before = out - 1  # never the vehicle's first fix: speed_flags never flags that one
    span_ns = ts_ns[back] - ts_ns[before]
    ok = (vehicle_codes[out] == vehicle_codes[back]) & ~jumped[before]
    ok &= span_ns <= round(max_excursion_s * 1e9)
    reach_m = max_speed_kmh / 3.6 * (span_ns / 1e9)
    ok &= haversine_m(lat[before], lon[before], lat[back], lon[back]) <= reach_m
    taken: list[int] = []
    for k in np.flatnonzero(ok).tolist():  # few: only where the GPS jumped
        if taken and taken[-1] == k - 1:  # shares the step out with the stretch before
            if span_ns[k] < span_ns[k - 1]:
                taken[-1] = k
            continue
        taken.append(k)
    for k in taken:
        displaced[out[k] : back[k]] = True
    return displaced


def _step_flags(
    vehicle_codes: NDArray[np.integer],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    *,
    max_speed_kmh: float,
) -> NDArray[np.bool_]:
    """Return the flags of fixes 1..n-1 of a block (fix 0 only gives the previous position)."""
    flags = np.zeros(len(ts_ns) - 1, dtype=bool)
    same = vehicle_codes[1:] == vehicle_codes[:-1]
    reach_m = max_speed_kmh / 3.6 * (np.diff(ts_ns).astype(np.float64) / 1e9)
    # Cheap upper bound of the great-circle distance first: R·(|Δφ| + |Δλ|).
    bound_m = (np.abs(np.diff(lat)) + np.abs(np.diff(lon))) * (np.pi / 180.0 * EARTH_RADIUS_M)
    maybe = np.flatnonzero(same & (bound_m > reach_m))
    if len(maybe):
        dist_m = haversine_m(lat[maybe], lon[maybe], lat[maybe + 1], lon[maybe + 1])
        flags[maybe[dist_m > reach_m[maybe]]] = True
    return flags


def fix_values(pings: pd.DataFrame, at: Sequence[int]) -> list[tuple[Any, ...]]:
    """Return the :data:`FIX_VALUES` of the fixes at positions ``at`` (missing as None).

    Floats as ``float``, ``tariff`` as ``int``, texts as ``str``: comparable with ``==`` to the
    values of another fix, or of a stored one.
    """
    columns: list[list[Any]] = []
    for name in FIX_VALUES:
        if name not in pings.columns:
            columns.append([None] * len(at))
            continue
        kind = float if name in _FLOAT_VALUES else int if name == fr.TARIFF else str
        cells = pings[name].iloc[list(at)].to_numpy(dtype=object)
        columns.append([None if pd.isna(v) else kind(v) for v in cells])
    return list(zip(*columns, strict=True)) if columns else []


def stored_instant_groups(
    vehicles: Sequence[Any] | NDArray[Any], ts_ns: NDArray[np.int64], rows: NDArray[np.int64]
) -> list[NDArray[np.int64]]:
    """Return the groups of fixes of one vehicle that share a stored instant (a microsecond).

    Each group holds positions, the earliest ``rows`` first (the fix the others are judged
    against); a fix alone in its microsecond is in no group. Instants are distinct to the
    nanosecond already (exact repeats were judged before), so only a sub-microsecond instant
    can share a microsecond with another: without one, no group, at the cost of one pass.
    """
    sub = ts_ns % STORED_INSTANT_NS != 0
    if not sub.any():
        return []
    us = ts_ns // STORED_INSTANT_NS
    near = np.flatnonzero(np.isin(us, us[sub]))  # only these can share a microsecond
    keys = pd.DataFrame({"v": np.asarray(vehicles, dtype=object)[near], "us": us[near], "at": near})
    keys = keys.loc[keys.duplicated(["v", "us"], keep=False)]
    groups = []
    for _, group in keys.groupby(["v", "us"], sort=False)["at"]:
        at = group.to_numpy(dtype=np.int64)
        groups.append(at[np.lexsort((at, rows[at]))])
    return groups


def merge_microseconds(
    pings: pd.DataFrame, *, max_speed_kmh: float = MAX_SPEED_KMH
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep one fix per (vehicle, microsecond), the key of the database.

    Fixes of one vehicle less than a microsecond apart (different nanoseconds, one stored
    instant: :data:`STORED_INSTANT_NS`) are judged against the one of the earliest ``row``: the
    same :data:`FIX_VALUES`, ``duplicate``; other values, ``conflicting_duplicate``. The
    ``speed_flag`` of a kept fix of such a group and of its vehicle's next fix are computed
    again from the fixes kept. :func:`validate_pings` compares instants to the nanosecond
    (``pontual analyze`` has no database); the live ingest applies the same rule to its batches.

    Parameters
    ----------
    pings : pandas.DataFrame
        Pings per :mod:`tracking.frames`, one fix per (vehicle, instant), as
        :func:`validate_pings` returns them; any order.
    max_speed_kmh : float, default 250.0
        Limit of the speed flags computed again.

    Returns
    -------
    kept : pandas.DataFrame
        The fixes kept, in their order, with a RangeIndex (``pings`` itself when none is dropped).
    refused : pandas.DataFrame
        The other fixes, with their columns and ``reason``, by ``row``.
    """
    ts = np.asarray(pd.DatetimeIndex(pings[fr.TIMESTAMP]).as_unit("ns").asi8, dtype=np.int64)
    rows = (
        pings[fr.ROW].to_numpy(dtype=np.int64)
        if fr.ROW in pings.columns
        else np.arange(1, len(pings) + 1, dtype=np.int64)
    )
    groups = stored_instant_groups(pings[fr.VEHICLE_ID].to_numpy(dtype=object), ts, rows)
    refused: list[int] = []
    reasons: list[str] = []
    heads: list[int] = []
    for at in groups:
        values = fix_values(pings, at.tolist())
        heads.append(int(at[0]))
        for i, other in zip(at[1:].tolist(), values[1:], strict=True):
            refused.append(i)
            reasons.append("duplicate" if other == values[0] else "conflicting_duplicate")
    if not refused:
        return pings, _no_refused(pings)
    keep = np.ones(len(pings), dtype=bool)
    keep[refused] = False
    out = pings.iloc[refused].assign(**{fr.REASON: pd.Series(reasons, dtype="str").to_numpy()})
    out = out.iloc[np.argsort(rows[refused], kind="stable")].reset_index(drop=True)
    kept = pings.iloc[np.flatnonzero(keep)].reset_index(drop=True)
    if fr.SPEED_FLAG in kept.columns:
        kept[fr.SPEED_FLAG] = _flags_after_merge(
            kept, ts[keep], np.cumsum(keep)[heads] - 1, max_speed_kmh=max_speed_kmh
        )
    return kept, out


def _no_refused(pings: pd.DataFrame) -> pd.DataFrame:
    return pings.iloc[:0].assign(**{fr.REASON: pd.Series([], dtype="str")})


def _flags_after_merge(
    kept: pd.DataFrame,
    ts_ns: NDArray[np.int64],
    heads: NDArray[np.int64],
    *,
    max_speed_kmh: float,
) -> NDArray[np.bool_]:
    """Return the speed flags of ``kept``, those of ``heads`` and the next fixes made anew."""
    flags = kept[fr.SPEED_FLAG].to_numpy(dtype=bool, na_value=False).copy()
    vehicles = kept[fr.VEHICLE_ID].to_numpy(dtype=object)
    mine = np.flatnonzero(np.isin(vehicles, vehicles[heads]))
    codes = pd.factorize(vehicles[mine])[0]
    order = mine[np.lexsort((ts_ns[mine], codes))]
    fresh = speed_flags(
        pd.factorize(vehicles[order])[0],
        ts_ns[order],
        kept[fr.LAT].to_numpy(dtype=np.float64)[order],
        kept[fr.LON].to_numpy(dtype=np.float64)[order],
        max_speed_kmh=max_speed_kmh,
    )
    at = np.flatnonzero(np.isin(order, heads))
    redo = np.unique(np.concatenate([at, at[at + 1 < len(order)] + 1]))
    flags[order[redo]] = fresh[redo]
    return flags


# --- private helpers -------------------------------------------------------------------------


def _check_now(now: pd.Timestamp | None) -> pd.Timestamp:
    if now is None:
        return pd.Timestamp.now(tz="UTC")
    ts = pd.Timestamp(now)
    if ts.tzinfo is None:
        msg = f"'now' era {ts} sem fuso horário; informe um instante com fuso (por exemplo UTC)"
        raise InvalidParameterError(msg)
    return ts.tz_convert("UTC").as_unit("ns")


_NO_FLOOR = np.iinfo(np.int64).min
_UNIX_DECIMAL_RE = r"^(?P<sign>[+-]?)(?P<whole>\d*)(?:\.(?P<frac>\d*))?$"
"""Unix seconds as plain decimal text (no exponent): sign, whole seconds, fraction."""
_UNIX_DECIMAL = re.compile(_UNIX_DECIMAL_RE.strip("^$"), re.ASCII)
_NUMERIC = re.compile(_NUMERIC_RE.strip("^$"), re.ASCII)
_MAX_UNIX_NS = int(MAX_UNIX_S) * 1_000_000_000


def unix_seconds_ns(value: str | float) -> int | None:
    """Read Unix seconds exactly: epoch nanoseconds, or None outside [0, :data:`MAX_UNIX_S`).

    Parameters
    ----------
    value : str or float
        Text as written (no surrounding blanks): plain decimal digits are read exactly to the
        nanosecond (a 10th decimal rounds half up); a number with an exponent is read as a
        float. A float is rounded to the nearest microsecond.

    Returns
    -------
    int or None
        None when the text is not a number, or the instant is out of range.
    """
    if isinstance(value, str):
        m = _UNIX_DECIMAL.fullmatch(value)
        if m is None or not (m.group(2) or m.group(3)):
            if not _NUMERIC.fullmatch(value):
                return None
            return unix_seconds_ns(float(value))
        sign, whole, frac = m.group(1), m.group(2).lstrip("0"), m.group(3) or ""
        if len(whole) > 11:  # noqa: PLR2004 - far beyond MAX_UNIX_S
            return None
        digits = (frac + "0" * 10)[:10]
        ns = int(whole or "0") * 1_000_000_000 + int(digits[:9]) + (digits[9] >= "5")
        if sign == "-" and ns:
            return None
        return ns if ns < _MAX_UNIX_NS else None
    if not (math.isfinite(value) and 0 <= value < MAX_UNIX_S):
        return None
    whole_s = math.floor(value)
    return whole_s * 1_000_000_000 + round((value - whole_s) * 1e6) * 1000


def _as_text(col: pd.Series) -> pd.Series:
    """Return the column as pandas ``str``, empty string for missing values."""
    if isinstance(col.dtype, pd.StringDtype):
        return col.fillna("")
    mask = col.isna().to_numpy(dtype=bool)
    if isinstance(col.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(col.dtype):
        text = pd.Series(
            ["" if m else ts.isoformat() for m, ts in zip(mask, col, strict=True)],
            index=col.index,
            dtype="str",
        )
    else:
        text = col.astype("str")
    if mask.any():
        text = text.mask(mask, "")
    return text


def arrow_text(col: pd.Series, *, strip: bool = True) -> pa.ChunkedArray:
    """Return the column as an Arrow string array, empty string for missing values."""
    if (distinct := _distinct(col)) is not None:
        cells, index = distinct
        return pc.take(arrow_text(cells, strip=strip), pa.array(index))
    text = col if isinstance(col.dtype, pd.StringDtype) else _as_text(col)
    if getattr(text.dtype, "storage", None) == "pyarrow":
        arr = pa.chunked_array(pa.array(text))
    else:
        arr = pa.chunked_array([pa.array(text.to_numpy(dtype=object), type=pa.string())])
    arr = pc.fill_null(arr, "")
    return pc.utf8_trim_whitespace(arr) if strip else arr


def _distinct(col: pd.Series) -> tuple[pd.Series, NDArray[np.intp]] | None:
    """Distinct cells of a ``category`` or Arrow dictionary column and each row's position.

    None for any other column.
    The cells are the categories followed by one missing cell (rows without a category point
    to it): a rule applied to them, then taken by the positions, judges every row as it would
    the rows themselves (every row rule is a function of the cell alone).
    """
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categories = col.cat.categories
        cells = pd.Series(categories).reindex(range(len(categories) + 1))
        index = col.cat.codes.to_numpy().astype(np.intp)
        index[index < 0] = len(categories)
        return cells, index
    if not (isinstance(dtype, pd.ArrowDtype) and pa.types.is_dictionary(dtype.pyarrow_dtype)):
        return None
    column = col.array.__arrow_array__()
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks != 1:  # one dictionary for all chunks
            column = pa.table({"c": column}).unify_dictionaries().column(0)
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    values = column.dictionary
    size = len(values)
    text = pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    cells = pd.Series(
        pd.array(values, dtype="str") if text else pd.arrays.ArrowExtensionArray(values)
    )
    index = pc.fill_null(column.indices.cast(pa.int64()), size).to_numpy(zero_copy_only=False)
    return cells.reindex(range(size + 1)), np.asarray(index, dtype=np.intp)


@dataclass(frozen=True, eq=False)
class _Text:
    """Trimmed text cells: one a row (``index`` None), or distinct ones and each row's position."""

    values: pa.ChunkedArray
    index: NDArray[np.intp] | None = None

    def rows(self, per_value: NDArray[Any]) -> NDArray[Any]:
        """Spread a result computed per value to the rows."""
        return per_value if self.index is None else per_value[self.index]


def _text_cells(col: pd.Series) -> _Text:
    if (distinct := _distinct(col)) is not None:
        cells, index = distinct
        return _Text(arrow_text(cells), index)
    return _Text(arrow_text(col))


def _np(arr: pa.ChunkedArray | pa.Array) -> NDArray[np.generic]:
    return np.asarray(
        arr.to_numpy(zero_copy_only=False) if isinstance(arr, pa.Array) else arr.to_numpy()
    )


def _as_number(col: pd.Series) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    """Values as float64 (NaN when not a number), and masks (missing, invalid)."""
    if (distinct := _distinct(col)) is not None:
        cells, index = distinct
        values, missing, invalid = _as_number(cells)
        return values[index], missing[index], invalid[index]
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        invalid = np.isinf(values)
    else:
        text = arrow_text(col, strip=False)
        empty = pc.equal(text, "")
        try:  # fast path: every non-empty cell is a number for Arrow, without blanks
            values = _np(pc.cast(_empty_as_null(text), pa.float64())).astype(np.float64)
            missing = _np(empty).astype(bool)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = pc.utf8_trim_whitespace(text)
            missing = _np(pc.equal(text, "")).astype(bool)
            numeric = _np(pc.match_substring_regex(text, _NUMERIC_RE)).astype(bool)
            values = _text_to_float(text, numeric)
        invalid = ~missing & ~np.isfinite(values)
    values = np.where(invalid, np.nan, values)
    return values, missing, invalid


def _empty_as_null(text: pa.ChunkedArray) -> pa.ChunkedArray:
    """Return the text with its empty cells null (same buffers, a validity bitmap added)."""
    chunks = []
    for chunk in text.chunks:
        given = pc.not_equal(chunk, "")
        if chunk.offset or chunk.null_count or given.offset:  # not a plain array: copy
            chunks.append(pc.if_else(given, chunk, pa.scalar(None, chunk.type)))
        else:
            buffers = [given.buffers()[1], *chunk.buffers()[1:]]
            chunks.append(pa.Array.from_buffers(chunk.type, len(chunk), buffers))
    return pa.chunked_array(chunks, type=text.type)


def _text_to_float(text: pa.ChunkedArray, numeric: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Parse the cells flagged ``numeric``; NaN elsewhere."""
    masked = pc.if_else(pa.array(numeric), text, "nan")
    try:
        return np.asarray(_np(pc.cast(masked, pa.float64())), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = pd.to_numeric(pd.Series(_np(masked), dtype=object), errors="coerce")
        return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _optional_text(raw: pd.DataFrame, name: str, n: int) -> _Text:
    if name in raw.columns:
        return _text_cells(raw[name])
    return _Text(pa.chunked_array([pa.array([""], pa.large_string())]), np.zeros(n, np.intp))


UNKNOWN_SENTINEL = -1.0
"""What Android's location API, OsmAnd and Traccar Client send for a speed, bearing or accuracy
the receiver did not measure: read as empty."""


def unknown_as_missing(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return ``values`` with :data:`UNKNOWN_SENTINEL` as NaN (an optional number not given)."""
    return np.where(values == UNKNOWN_SENTINEL, np.nan, values)


def _optional_number(
    raw: pd.DataFrame, name: str, n: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    if name in raw.columns:
        return _as_number(raw[name])
    nan = np.full(n, np.nan)
    return nan, np.ones(n, dtype=bool), np.zeros(n, dtype=bool)


def timestamps_ns(col: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Read raw timestamp cells as :func:`validate_pings` reads them.

    Returns the epoch nanoseconds (0 where not read) and which cells were read: not missing,
    parseable and with a UTC offset (the other rows :func:`validate_pings` rejects).
    """
    ts_ns, missing, unparseable, naive = _parse_timestamps(col)
    return ts_ns, ~(missing | unparseable | naive)


def _parse_timestamps(
    col: pd.Series,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """Epoch nanoseconds (0 where invalid) and masks (missing, unparseable, naive)."""
    if (distinct := _distinct(col)) is not None:
        cells, index = distinct
        return tuple(part[index] for part in _parse_timestamps(cells))  # type: ignore[return-value]
    n = len(col)
    ts_ns = np.zeros(n, dtype=np.int64)
    missing = np.zeros(n, dtype=bool)
    unparseable = np.zeros(n, dtype=bool)
    naive = np.zeros(n, dtype=bool)

    if isinstance(col.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(col.dtype):
        missing = col.isna().to_numpy(dtype=bool)
        if isinstance(col.dtype, pd.DatetimeTZDtype):
            utc = col.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
            ts_ns = np.where(missing, 0, utc.to_numpy(dtype="datetime64[ns]").view(np.int64))
        else:
            naive = ~missing
        return ts_ns, missing, unparseable, naive

    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        seconds = col.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(seconds)
        ts_ns, unparseable = _unix_seconds(seconds, ~missing)
        return ts_ns, missing, unparseable, naive

    raw_text = arrow_text(col, strip=False)
    try:  # fast path on the cells as written
        ts = pc.cast(raw_text, pa.timestamp("ns", tz="UTC"))
        return np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64), missing, unparseable, naive
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # A few odd cells (naive, blank, garbage) fail the cast of all: cast the cells of the most
    # common length (one writer's format) at once, the others by the detailed rules.
    lengths = _np(pc.binary_length(raw_text)).astype(np.int64)
    common = lengths == np.argmax(np.bincount(lengths)) if n else lengths.astype(bool)
    if common.any() and not common.all():
        try:
            ts = pc.cast(pc.filter(raw_text, pa.array(common)), pa.timestamp("ns", tz="UTC"))
            ts_ns[common] = np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _parse_text_timestamps(pc.utf8_trim_whitespace(raw_text))
        rest = ~common
        sub = _parse_text_timestamps(pc.utf8_trim_whitespace(pc.filter(raw_text, pa.array(rest))))
        for out, part in zip((ts_ns, missing, unparseable, naive), sub, strict=True):
            out[rest] = part
        return ts_ns, missing, unparseable, naive
    return _parse_text_timestamps(pc.utf8_trim_whitespace(raw_text))


def _parse_text_timestamps(
    text: pa.ChunkedArray,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """Parse stripped text cells; fast paths first, row-by-row rules only where they fail."""
    n = len(text)
    ts_ns = np.zeros(n, dtype=np.int64)
    missing = np.zeros(n, dtype=bool)
    unparseable = np.zeros(n, dtype=bool)
    naive = np.zeros(n, dtype=bool)
    try:  # fast path: all ISO 8601 with an offset, as Arrow's strict parser wants them
        ts = pc.cast(text, pa.timestamp("ns", tz="UTC"))
        return np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64), missing, unparseable, naive
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Split: cells that look like "date T time offset" to Arrow's lenient strptime are tried with
    # the strict cast as a block (a few bad rows elsewhere then cost little); the rest, and the
    # block if it fails, go through the detailed rules.
    looks_iso = _np(
        pc.is_valid(pc.strptime(text, format="%Y-%m-%dT%H:%M:%S%z", unit="ns", error_is_null=True))
    ).astype(bool)
    if looks_iso.any() and not looks_iso.all():
        block = pc.filter(text, pa.array(looks_iso))
        try:
            ts = pc.cast(block, pa.timestamp("ns", tz="UTC"))
            ts_ns[looks_iso] = np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64)
            rest = ~looks_iso
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            rest = np.ones(n, dtype=bool)
        sub = _detailed_timestamps(pc.filter(text, pa.array(rest)))
        for out, part in zip((ts_ns, missing, unparseable, naive), sub, strict=True):
            out[rest] = part
        return ts_ns, missing, unparseable, naive
    return _detailed_timestamps(text)


def _detailed_timestamps(
    text: pa.ChunkedArray,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """Row-by-row rules: empty, Unix seconds, ISO with offset, ISO without (naive), garbage."""
    n = len(text)
    ts_ns = np.zeros(n, dtype=np.int64)
    unparseable = np.zeros(n, dtype=bool)
    naive = np.zeros(n, dtype=bool)
    missing = _np(pc.equal(text, "")).astype(bool)
    numeric = _np(pc.match_substring_regex(text, _NUMERIC_RE)).astype(bool)
    if numeric.any():
        ns, bad = _unix_text(text, numeric)
        ts_ns[numeric] = ns[numeric]
        unparseable[numeric] = bad[numeric]
    iso = ~missing & ~numeric
    if iso.any():
        has_offset = _np(pc.match_substring_regex(text, _OFFSET_RE, ignore_case=True)).astype(bool)
        with_offset = iso & has_offset
        ns, bad = _parse_iso(pc.filter(text, pa.array(with_offset)))
        ts_ns[with_offset] = ns
        unparseable[with_offset] = bad
        without = iso & ~has_offset
        if without.any():
            # Only whether they parse matters: parseable ones are naive.
            _, bad = _parse_iso(pc.filter(text, pa.array(without)))
            unparseable[without] = bad
            naive[without] = ~bad
    return ts_ns, missing, unparseable, naive


def _parse_iso(text: pa.ChunkedArray) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Parse to epoch ns (0 where bad) and an unparseable mask; pandas backs up Arrow's parser."""
    try:
        ts = pc.cast(text, pa.timestamp("ns", tz="UTC"))
        ns = np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64)
        return ns, np.zeros(len(ns), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    parsed = pd.to_datetime(
        pd.Series(_np(text), dtype=object), format="ISO8601", utc=True, errors="coerce"
    )
    bad = parsed.isna().to_numpy(dtype=bool)
    # Beyond a nanosecond Timestamp's range (years 1677-2262) is unparseable, never an error.
    values = parsed.to_numpy(dtype="datetime64[us]", na_value=np.datetime64("NaT"))
    low, high = (
        np.datetime64(pd.Timestamp.min.ceil("us")),
        np.datetime64(pd.Timestamp.max.floor("us")),
    )
    bad = bad | ~((values >= low) & (values <= high))
    ok = ~bad
    ns = np.zeros(len(bad), dtype=np.int64)
    if ok.any():
        ns[ok] = (
            parsed[ok].astype("datetime64[ns, UTC]").to_numpy(dtype="datetime64[ns]").view(np.int64)
        )
    return ns, bad


def _unix_seconds(
    seconds: NDArray[np.float64], present: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Float Unix seconds to epoch ns, rounded to the microsecond (as :func:`unix_seconds_ns`)."""
    with np.errstate(invalid="ignore"):
        ok = present & np.isfinite(seconds) & (seconds >= 0) & (seconds < MAX_UNIX_S)
    ns = np.zeros(len(seconds), dtype=np.int64)
    whole = np.floor(seconds[ok])
    micros = np.round((seconds[ok] - whole) * 1e6).astype(np.int64)
    ns[ok] = whole.astype(np.int64) * 1_000_000_000 + micros * 1000
    return ns, present & ~ok


def _unix_text(
    text: pa.ChunkedArray, numeric: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Numeric text cells (``numeric``) to epoch ns exactly, as :func:`unix_seconds_ns`."""
    n = len(text)
    ns = np.zeros(n, dtype=np.int64)
    bad = numeric.copy()
    if not numeric.any():
        return ns, bad
    parts = pc.extract_regex(pc.if_else(pa.array(numeric), text, ""), _UNIX_DECIMAL_RE)
    exact = numeric & _np(pc.is_valid(parts)).astype(bool)
    exact &= _np(pc.not_equal(text, ".")).astype(bool)
    if exact.any():
        take = pa.array(np.flatnonzero(exact))
        sign = pc.take(pc.struct_field(parts, [0]), take)
        whole = pc.utf8_ltrim(pc.take(pc.struct_field(parts, [1]), take), characters="0")
        frac = pc.fill_null(pc.take(pc.struct_field(parts, [2]), take), "")
        fits = _np(pc.less_equal(pc.utf8_length(whole), 11)).astype(bool)
        whole = pc.if_else(pa.array(fits), whole, "")
        whole_s = np.asarray(
            _np(pc.cast(pc.if_else(pc.equal(whole, ""), "0", whole), pa.int64())), dtype=np.int64
        )
        digits = pc.utf8_slice_codeunits(pc.utf8_rpad(frac, width=10, padding="0"), 0, 10)
        nanos = np.asarray(
            _np(pc.cast(pc.utf8_slice_codeunits(digits, 0, 9), pa.int64())), dtype=np.int64
        )
        up = _np(pc.greater_equal(pc.utf8_slice_codeunits(digits, 9, 10), "5")).astype(bool)
        with np.errstate(over="ignore"):
            value = whole_s * 1_000_000_000 + nanos + up
        negative = _np(pc.equal(sign, "-")).astype(bool) & (value != 0)
        good = fits & ~negative & (value >= 0) & (value < _MAX_UNIX_NS)
        idx = np.flatnonzero(exact)
        ns[idx[good]] = value[good]
        bad[idx] = ~good
    rest = numeric & ~exact
    if rest.any():
        seconds = _text_to_float(text, rest)
        floats, float_bad = _unix_seconds(seconds, rest)
        ns[rest] = floats[rest]
        bad[rest] = float_bad[rest]
    return ns, bad


def _sort_order(codes: NDArray[np.integer], ts_ns: NDArray[np.int64]) -> NDArray[np.intp]:
    """Stable order by (vehicle, time): ties keep the input order."""
    if len(ts_ns) > 1 and bool(np.all(ts_ns[1:] >= ts_ns[:-1])):
        return np.argsort(codes, kind="stable")  # time-ordered input, the usual case
    by_time = np.argsort(ts_ns, kind="stable")
    return by_time[np.argsort(codes[by_time], kind="stable")]


# --- the chunked engine ------------------------------------------------------------------------

_FLAG_BLOCK = 1 << 20
_RELEASE_MIN_ROWS = 1_000_000
_N_BUCKETS = 256
_BUCKET_SHIFT = np.uint64(56)
_METER_CODES = pa.array(list(METER_INDEX), type=pa.string())
_FLOAT_PARTS = ("lat", "lon", "speed", "heading", "accuracy")
_FLOAT_VALUES = (fr.LAT, fr.LON, fr.SPEED_KMH, fr.HEADING_DEG, fr.ACCURACY_M)
_OPTIONAL_FLOATS = {"speed": fr.SPEED_KMH, "heading": fr.HEADING_DEG, "accuracy": fr.ACCURACY_M}
_PARTS = ("vcode", "ts", *_FLOAT_PARTS, "meter", "tariff", "driver", "row")
_KEY_V = "__vehicle_code"
_KEY_T = "__ts_ns"


@dataclass(eq=False)
class _Parsed:
    """Row checks of one chunk: a reason code per row and the values kept of good rows."""

    code: NDArray[np.int8]
    vehicle: _Text
    driver: _Text
    ts_ns: NDArray[np.int64]
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    floats: dict[str, NDArray[np.float64] | None]
    meter_code: NDArray[np.int8]
    tariff: NDArray[np.float64]


@dataclass(eq=False)
class _State:
    """What :func:`validate_ping_chunks` keeps between chunks (plain data).

    ``parts`` holds the kept fixes, one array per chunk and field (``None``: the column was
    absent, all NaN); a kept fix's index counts kept fixes in input order. The key index maps
    the 64-bit hash of (vehicle code, instant) of each kept fix to its index, in buckets by the
    hash's top byte, each sorted; it is only built (and looked up) for rows not later than the
    ``latest`` kept instant of their vehicle, so a file in time order never needs it.
    ``stored`` has the cells of the conflicting (and pending) rows, which a later identical row
    duplicates.
    """

    n: int = 0
    n_chunks: int = 0
    n_rejected: int = 0
    vehicles: dict[str, int] = field(default_factory=dict)
    drivers: dict[str, int] = field(default_factory=dict)
    parts: dict[str, list[NDArray[Any] | None]] = field(
        default_factory=lambda: {name: [] for name in _PARTS}
    )
    starts: list[int] = field(default_factory=list)
    index_hash: list[NDArray[np.uint64]] = field(
        default_factory=lambda: [np.zeros(0, np.uint64) for _ in range(_N_BUCKETS)]
    )
    index_kept: list[NDArray[np.integer]] = field(
        default_factory=lambda: [np.zeros(0, np.uint32) for _ in range(_N_BUCKETS)]
    )
    latest: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    unindexed: list[int] = field(default_factory=list)
    stored: list[pd.DataFrame] = field(default_factory=list)
    rejected: list[pd.DataFrame] = field(default_factory=list)
    pending_rejected: list[NDArray[np.int64]] = field(default_factory=list)
    pending_kept: list[NDArray[np.int64]] = field(default_factory=list)


def _row_checks(raw: pd.DataFrame, *, limit_ns: int, floor_ns: int = _NO_FLOOR) -> _Parsed:
    """Read one chunk's cells (Arrow) and apply :data:`ROW_RULES` to them."""
    n = len(raw)
    vehicle = _text_cells(raw[fr.VEHICLE_ID])
    driver = _optional_text(raw, fr.DRIVER_ID, n)
    corrupt = vehicle.rows(_corrupt(vehicle.values)) | driver.rows(_corrupt(driver.values))
    lat, lat_missing, lat_invalid = _as_number(raw[fr.LAT])
    lon, lon_missing, lon_invalid = _as_number(raw[fr.LON])
    ts_ns, ts_missing, ts_unparseable, ts_naive = _parse_timestamps(raw[fr.TIMESTAMP])
    meter = _optional_text(raw, fr.METER, n)
    meter_code = pc.fill_null(pc.index_in(pc.utf8_lower(meter.values), value_set=_METER_CODES), -1)
    tariff, _, tariff_invalid = _optional_number(raw, fr.TARIFF, n)
    speed, _, speed_invalid = _optional_number(raw, fr.SPEED_KMH, n)
    heading, _, heading_invalid = _optional_number(raw, fr.HEADING_DEG, n)
    accuracy, _, accuracy_invalid = _optional_number(raw, fr.ACCURACY_M, n)
    speed, heading, accuracy = (unknown_as_missing(a) for a in (speed, heading, accuracy))
    fields = RowFields(
        vehicle_chars=vehicle.rows(np.asarray(_np(pc.utf8_length(vehicle.values)), np.int64)),
        driver_chars=driver.rows(np.asarray(_np(pc.utf8_length(driver.values)), np.int64)),
        text_corrupt=corrupt,
        lat=lat,
        lat_missing=lat_missing,
        lat_invalid=lat_invalid,
        lon=lon,
        lon_missing=lon_missing,
        lon_invalid=lon_invalid,
        ts_ns=ts_ns,
        ts_missing=ts_missing,
        ts_unparseable=ts_unparseable,
        ts_naive=ts_naive,
        meter_code=meter.rows(np.asarray(_np(meter_code), dtype=np.int8)),
        tariff=tariff,
        tariff_invalid=tariff_invalid,
        speed=speed,
        speed_invalid=speed_invalid,
        heading=heading,
        heading_invalid=heading_invalid,
        accuracy=accuracy,
        accuracy_invalid=accuracy_invalid,
    )
    floats: dict[str, NDArray[np.float64] | None] = {
        name: values if _OPTIONAL_FLOATS[name] in raw.columns else None
        for name, values in (("speed", speed), ("heading", heading), ("accuracy", accuracy))
    }
    return _Parsed(
        code=row_codes(fields, Window(limit_ns=limit_ns, floor_ns=floor_ns)),
        vehicle=vehicle,
        driver=driver,
        ts_ns=ts_ns,
        lat=lat,
        lon=lon,
        floats=floats,
        meter_code=fields.meter_code,
        tariff=tariff,
    )


class _OkFields(dict[str, NDArray[Any] | None]):
    """Fields of a chunk's valid rows (:data:`_PARTS`), each computed when first asked for."""

    def __init__(
        self, make: Callable[[str], NDArray[Any] | None], **ready: NDArray[Any] | None
    ) -> None:
        super().__init__(ready)
        self._make = make

    def __missing__(self, name: str) -> NDArray[Any] | None:
        value = self[name] = self._make(name)
        return value


def _field(
    parsed: _Parsed, state: _State, numbers: NDArray[np.int64], name: str, *, rows: NDArray[np.intp]
) -> NDArray[Any] | None:
    """Field ``name`` of :data:`_PARTS` of the chunk's rows ``rows`` (None: column absent)."""
    if name == "vcode":
        return _encode_rows(state.vehicles, parsed.vehicle, rows)
    if name == "driver":
        return _encode_rows(state.drivers, parsed.driver, rows)
    if name in parsed.floats:
        values = parsed.floats[name]
        return None if values is None else values[rows]
    if name == "tariff":
        return np.nan_to_num(parsed.tariff[rows], nan=0.0).astype(np.int8)
    if name == "row":
        return numbers[rows]
    wholes: dict[str, NDArray[Any]] = {
        "ts": parsed.ts_ns,
        "lat": parsed.lat,
        "lon": parsed.lon,
        "meter": parsed.meter_code,
    }
    whole = wholes[name]
    return whole[rows]


def _corrupt(text: pa.ChunkedArray) -> NDArray[np.bool_]:
    """Whether each cell holds one of :data:`CORRUPT_CHARS` or :data:`UNSEEN_CHARS`."""
    found = _np(pc.fill_null(pc.match_substring_regex(text, UNSEEN_CHARS), False)).astype(bool)
    for char in CORRUPT_CHARS:
        found |= _np(pc.fill_null(pc.match_substring(text, char), False)).astype(bool)
    return found


def _add_chunk(state: _State, raw: pd.DataFrame, *, limit_ns: int, floor_ns: int) -> None:
    """Check one chunk, keep its new valid fixes, and record its rejected rows."""
    missing = [c for c in (fr.ROW, *fr.PING_REQUIRED) if c not in raw.columns]
    if missing:
        msg = f"faltam coluna(s) obrigatória(s) nos pings: {', '.join(missing)}"
        raise MissingColumnsError(msg)
    parsed = _row_checks(raw, limit_ns=limit_ns, floor_ns=floor_ns)
    code = parsed.code
    ok = np.flatnonzero(code == 0)
    numbers = raw[fr.ROW].to_numpy(dtype=np.int64)
    vg = _encode_rows(state.vehicles, parsed.vehicle, ok)
    t = parsed.ts_ns[ok]
    values = _OkFields(
        functools.partial(_field, parsed, state, numbers, rows=ok), vcode=vg, ts=t
    )  # the other fields only if a duplicate needs them
    match = np.full(len(ok), -1, dtype=np.int64)
    known = np.flatnonzero(vg < len(state.latest))
    maybe = known[t[known] <= state.latest[vg[known]]]  # may share a key with an earlier chunk
    if maybe.size:
        _flush_index(state)
        match[maybe] = _lookup(state, vg[maybe], t[maybe])
    later = np.zeros(len(ok), dtype=bool)
    in_group = np.zeros(len(ok), dtype=bool)
    small = len(state.vehicles) < 2**15  # int16 codes sort by radix
    order = _sort_order(vg.astype(np.int16) if small else vg, t)
    if len(ok) > 1:
        same = (vg[order[1:]] == vg[order[:-1]]) & (t[order[1:]] == t[order[:-1]])
        later[order[1:][same]] = True
        in_group[order[1:][same]] = True
        in_group[order[:-1][same]] = True
    seen = match >= 0
    pending_pos = pending_kept = np.zeros(0, dtype=np.int64)
    candidates = np.flatnonzero(in_group | seen)
    if candidates.size:
        pending_pos, pending_kept = _classify(
            state, raw, code, ok=ok, candidates=candidates, later=later, match=match, values=values
        )
    _update_latest(state, vg[order], t[order])
    keep = np.flatnonzero(~later & ~seen)
    rows = ok[keep] if keep.size < len(ok) else ok
    kept: dict[str, NDArray[Any] | None] = (
        {"vcode": vg[keep], "ts": t[keep]} if keep.size < len(ok) else {"vcode": vg, "ts": t}
    )
    for name in _PARTS[2:]:
        kept[name] = _field(parsed, state, numbers, name, rows=rows)
    del parsed, values
    _append_kept(state, kept)

    bad_pos = np.flatnonzero(code != 0)
    reasons = pc.take(
        pa.array(REJECTION_REASONS, type=pa.large_string()), pa.array(code[bad_pos] - 1)
    )
    piece = make_rejected(raw.take(bad_pos), reasons)
    if pending_pos.size:
        state.pending_rejected.append(state.n_rejected + np.searchsorted(bad_pos, pending_pos))
        state.pending_kept.append(pending_kept)
    if state.n_chunks == 0 or len(piece):
        state.rejected.append(piece)
    state.n_rejected += len(piece)
    state.n_chunks += 1


def _classify(
    state: _State,
    raw: pd.DataFrame,
    code: NDArray[np.int8],
    *,
    ok: NDArray[np.intp],
    candidates: NDArray[np.intp],
    later: NDArray[np.bool_],
    match: NDArray[np.int64],
    values: dict[str, NDArray[Any] | None],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Mark ``duplicate``/``conflicting_duplicate`` among rows sharing a key with another.

    ``candidates`` index ``ok`` (input order): rows of a (vehicle, instant) met twice in this
    chunk, or already kept from an earlier chunk (``match`` >= 0). Returns the chunk positions
    of the rows whose verdict waits for the cells of the kept fix of an earlier chunk, and the
    index of that fix.
    """
    pos = ok[candidates]
    originals = [c for c in raw.columns if c != fr.ROW]
    cells = pd.DataFrame({c: _as_text(raw[c].iloc[pos]).reset_index(drop=True) for c in originals})
    dup = cells.duplicated(keep="first").to_numpy(dtype=bool).copy()
    seen = match[candidates] >= 0
    vg = np.asarray(values["vcode"])[candidates]
    t = np.asarray(values["ts"])[candidates]
    ask = np.flatnonzero(seen & ~dup)
    if ask.size and state.stored:
        dup[ask] = _identical_to_stored(state, cells.iloc[ask], vg[ask], t[ask])
    rest = (later[candidates] | seen) & ~dup
    pend = np.flatnonzero(rest & seen)
    if pend.size:
        same = _same_values(state, values, candidates[pend], match[candidates[pend]])
        pend = pend[same]
    code[pos[dup]] = _CODE["duplicate"]
    code[pos[rest]] = _CODE["conflicting_duplicate"]
    if rest.any():
        stored = cells.loc[rest].reset_index(drop=True)
        stored.insert(0, _KEY_T, t[rest])
        stored.insert(0, _KEY_V, vg[rest])
        state.stored.append(stored)
    return pos[pend].astype(np.int64), match[candidates[pend]]


def _identical_to_stored(
    state: _State, cells: pd.DataFrame, vg: NDArray[np.int32], t: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Whether each row is identical, cell for cell, to a stored row of an earlier chunk."""
    if len(state.stored) > 1:
        state.stored = [pd.concat(state.stored, ignore_index=True)]
    stored = state.stored[0]
    query = cells.reset_index(drop=True)
    query.insert(0, _KEY_T, t)
    query.insert(0, _KEY_V, vg)
    query["__i"] = np.arange(len(query))
    pairs = query.merge(stored, on=[_KEY_V, _KEY_T], suffixes=("", "__s"))
    same = np.ones(len(pairs), dtype=bool)
    for col in cells.columns:
        same &= pairs[col].to_numpy(dtype=object) == pairs[f"{col}__s"].to_numpy(dtype=object)
    out = np.zeros(len(query), dtype=bool)
    out[pairs["__i"].to_numpy(dtype=np.int64)[same]] = True
    return out


def _same_values(
    state: _State,
    values: dict[str, NDArray[Any] | None],
    local: NDArray[np.intp],
    kept: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """Whether rows of this chunk parse to the same values as kept fixes (NaN equals NaN)."""
    same = np.ones(len(local), dtype=bool)
    for name in (*_FLOAT_PARTS, "meter", "tariff", "driver"):
        mine = values[name]
        theirs = _gather(state, name, kept)
        a = mine[local] if mine is not None else np.full(len(local), np.nan)
        if name in _FLOAT_PARTS:
            same &= (a == theirs) | (np.isnan(a) & np.isnan(theirs))
        else:
            same &= a == theirs
    return same


def _settle_pending(state: _State, rejected: pd.DataFrame, chunks: ChunkSource) -> None:
    """Compare pending rows with the cells of their kept fix, read again from ``chunks``."""
    at = np.concatenate(state.pending_rejected)
    kept_rows = _gather(state, "row", np.concatenate(state.pending_kept)).astype(np.int64)
    state.pending_rejected, state.pending_kept = [], []
    originals = [c for c in rejected.columns if c not in REJECTED_LEAD]
    wanted = np.unique(kept_rows)
    found: list[pd.DataFrame] = []
    n_found = 0
    for raw in chunks():
        hit = np.flatnonzero(np.isin(raw[fr.ROW].to_numpy(dtype=np.int64), wanted))
        if hit.size:
            part = pd.DataFrame(
                {c: _as_text(raw[c].iloc[hit]).reset_index(drop=True) for c in originals}
            )
            part.index = raw[fr.ROW].to_numpy(dtype=np.int64)[hit]
            found.append(part)
            n_found += hit.size
            if n_found >= wanted.size:
                break
    firsts = pd.concat(found).reindex(kept_rows)
    later = rejected.iloc[at]
    same = np.ones(len(at), dtype=bool)
    for col in originals:
        same &= firsts[col].to_numpy(dtype=object) == later[col].to_numpy(dtype=object)
    rejected.loc[rejected.index[at[same]], fr.REASON] = "duplicate"


def _release_free_memory(rows: int) -> None:
    """Give memory freed by a chunk back to the system (Arrow's pool, glibc's heap).

    Without it the allocators keep a chunk's worth of freed buffers (hundreds of MB for a
    million rows), which would add to the peak of the next step. Skipped under
    :data:`_RELEASE_MIN_ROWS` rows (a bucket of :mod:`engines.buckets` is about half that):
    there the next step reuses what was freed, and memory given back would be faulted in and
    zeroed again (10M pings by buckets: ~3 s of kernel time).
    """
    if rows < _RELEASE_MIN_ROWS:
        return
    release_free_memory()


def _encode_rows(
    dictionary: dict[str, int], text: _Text, rows: NDArray[np.intp]
) -> NDArray[np.int32]:
    """Codes of the text of ``rows`` in a dictionary shared by all chunks (new values appended)."""
    if text.index is None:
        return _encode(dictionary, pc.take(text.values, pa.array(rows, type=pa.int64())))
    index = text.index[rows]
    used = np.flatnonzero(np.bincount(index, minlength=len(text.values)))
    lut = np.zeros(len(text.values), dtype=np.int32)
    lut[used] = np.fromiter(
        (
            dictionary.setdefault(v, len(dictionary))
            for v in pc.take(text.values, pa.array(used, type=pa.int64())).to_pylist()
        ),
        dtype=np.int32,
        count=len(used),
    )
    return lut[index]


def _encode(dictionary: dict[str, int], text: pa.ChunkedArray) -> NDArray[np.int32]:
    """Codes of ``text`` in a dictionary shared by all chunks (new values appended)."""
    if len(text) == 0:
        return np.zeros(0, dtype=np.int32)
    encoded = pc.dictionary_encode(text.combine_chunks() if text.num_chunks != 1 else text.chunk(0))
    lut = np.fromiter(
        (dictionary.setdefault(v, len(dictionary)) for v in encoded.dictionary.to_pylist()),
        dtype=np.int32,
        count=len(encoded.dictionary),
    )
    return lut[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.intp)]


def _fmix(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finaliser (a bijection that mixes every bit)."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xFF51AFD7ED558CCD)
        h = h ^ (h >> np.uint64(33))
        h = h * np.uint64(0xC4CEB9FE1A85EC53)
        return h ^ (h >> np.uint64(33))


def _key_hash(vg: NDArray[np.int32], t: NDArray[np.int64]) -> NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        return _fmix(t.view(np.uint64) ^ (vg.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)))


def _update_latest(state: _State, vg: NDArray[np.int32], t: NDArray[np.int64]) -> None:
    """Raise each vehicle's latest instant (``vg``, ``t`` sorted by vehicle then time)."""
    if len(state.latest) < len(state.vehicles):
        grown = np.full(len(state.vehicles), np.iinfo(np.int64).min, dtype=np.int64)
        grown[: len(state.latest)] = state.latest
        state.latest = grown
    if len(vg):
        last = np.flatnonzero(np.append(vg[1:] != vg[:-1], True))
        state.latest[vg[last]] = np.maximum(state.latest[vg[last]], t[last])


def _append_kept(state: _State, kept: dict[str, NDArray[Any] | None]) -> None:
    k = len(kept["ts"])  # type: ignore[arg-type]
    if k == 0:
        return
    state.unindexed.append(len(state.starts))
    state.starts.append(state.n)
    for name in _PARTS:
        state.parts[name].append(kept[name])
    state.n += k


def _flush_index(state: _State) -> None:
    """Add the kept fixes not yet in the key index (built only when a lookup needs it)."""
    if not state.unindexed:
        return
    pieces, state.unindexed = state.unindexed, []
    dtype = np.uint32 if state.n < 2**32 else np.int64
    h = np.concatenate(
        [_key_hash(state.parts["vcode"][p], state.parts["ts"][p]) for p in pieces]  # type: ignore[arg-type]
    )
    idx = np.concatenate(
        [
            np.arange(state.starts[p], state.starts[p] + len(state.parts["ts"][p]), dtype=dtype)  # type: ignore[arg-type]
            for p in pieces
        ]
    )
    bucket = (h >> _BUCKET_SHIFT).astype(np.uint8)
    by_bucket = np.argsort(bucket, kind="stable")  # radix sort
    bounds = np.searchsorted(bucket[by_bucket], np.arange(_N_BUCKETS + 1))
    for b in range(_N_BUCKETS):
        part = by_bucket[bounds[b] : bounds[b + 1]]
        if part.size == 0:
            continue
        part = part[np.argsort(h[part])]
        at = np.searchsorted(state.index_hash[b], h[part])
        state.index_hash[b] = np.insert(state.index_hash[b], at, h[part])
        state.index_kept[b] = np.insert(state.index_kept[b].astype(dtype), at, idx[part])


def _lookup(state: _State, vg: NDArray[np.int32], t: NDArray[np.int64]) -> NDArray[np.int64]:
    """Index of the kept fix with the same (vehicle, instant) as each row, or -1."""
    match = np.full(len(vg), -1, dtype=np.int64)
    if state.n == 0 or len(vg) == 0:
        return match
    h = _key_hash(vg, t)
    bucket = (h >> _BUCKET_SHIFT).astype(np.uint8)
    order = np.argsort(bucket, kind="stable")  # radix sort
    bounds = np.searchsorted(bucket[order], np.arange(_N_BUCKETS + 1))
    hits: list[tuple[int, NDArray[np.intp], NDArray[np.intp]]] = []
    for b in range(_N_BUCKETS):
        sel = order[bounds[b] : bounds[b + 1]]
        hashes = state.index_hash[b]
        if sel.size == 0 or hashes.size == 0:
            continue
        q = h[sel]
        at = np.minimum(np.searchsorted(hashes, q), hashes.size - 1)
        hit = hashes[at] == q
        if hit.any():
            hits.append((b, sel[hit], at[hit]))
    if not hits:
        return match
    rows = np.concatenate([sel for _, sel, _ in hits])
    first = np.concatenate([state.index_kept[b][at].astype(np.int64) for b, _, at in hits])
    exact = (_gather(state, "vcode", first) == vg[rows]) & (_gather(state, "ts", first) == t[rows])
    match[rows[exact]] = first[exact]
    if not exact.all():
        # A hash shared by several kept fixes (a collision): check each against the exact key.
        where = {int(i): (b, int(a)) for b, sel, at in hits for i, a in zip(sel, at, strict=True)}
        for i in rows[~exact]:
            b, start = where[int(i)]
            hashes = state.index_hash[b]
            stop = start
            while stop < hashes.size and hashes[stop] == h[i]:
                stop += 1
            cand = state.index_kept[b][start:stop].astype(np.int64)
            same = (_gather(state, "vcode", cand) == vg[i]) & (_gather(state, "ts", cand) == t[i])
            if same.any():
                match[i] = cand[np.argmax(same)]
    return match


def _gather(state: _State, name: str, idx: NDArray[np.int64]) -> NDArray[Any]:
    """Values of field ``name`` of the kept fixes ``idx``."""
    pieces = state.parts[name]
    starts = np.asarray(state.starts, dtype=np.int64)
    which = np.searchsorted(starts, idx, side="right") - 1
    out = np.full(len(idx), np.nan) if name in _FLOAT_PARTS else np.zeros(len(idx), np.int64)
    for p in np.unique(which):
        piece = pieces[p]
        if piece is None:
            continue
        sel = which == p
        out[sel] = piece[idx[sel] - starts[p]]
    return out


def _take(state: _State, name: str, order: NDArray[np.intp]) -> NDArray[Any]:
    """Concatenate field ``name`` (dropping its pieces) and reorder it by ``order``."""
    pieces = state.parts[name]
    state.parts[name] = []
    if all(p is None for p in pieces):
        return np.full(len(order), np.nan)
    sizes = np.diff([*state.starts, state.n])
    filled = [
        p if p is not None else np.full(s, np.nan) for p, s in zip(pieces, sizes, strict=True)
    ]
    whole = filled[0] if len(filled) == 1 else np.concatenate(filled)
    del filled
    del pieces
    out = whole[order]
    del whole
    _release_free_memory(state.n)  # the pieces sat in the heap: give them back first
    return out


def _finish(state: _State, *, max_speed_kmh: float) -> pd.DataFrame:
    """Build the pings frame from the kept fixes, field by field to keep the peak low."""
    state.index_hash, state.index_kept, state.stored = [], [], []
    n = state.n
    vehicles = pa.array(list(state.vehicles), type=pa.string())
    by_name = np.asarray(_np(pc.sort_indices(vehicles)), dtype=np.int64)
    rank = np.empty(len(vehicles), dtype=np.int32)
    rank[by_name] = np.arange(len(vehicles), dtype=np.int32)
    ordered_vehicles = pc.take(vehicles, pa.array(by_name, type=pa.int64()))
    codes = rank[_take(state, "vcode", np.arange(n))] if n else np.zeros(0, np.int32)
    ts = _take(state, "ts", np.arange(n)).astype(np.int64) if n else np.zeros(0, np.int64)
    sort_codes = codes.astype(np.int16) if len(vehicles) < 2**15 else codes
    order = _sort_order(sort_codes, ts)
    del sort_codes
    codes = codes[order]
    stamp = pd.Series(pd.array(ts[order].view("datetime64[ns]"))).dt.tz_localize("UTC")
    del ts
    _release_free_memory(n)
    ts = pd.DatetimeIndex(stamp, copy=False).asi8  # a view of the column
    lat, lon = _take(state, "lat", order), _take(state, "lon", order)
    flags = speed_flags(codes, ts, lat, lon, max_speed_kmh=max_speed_kmh)
    del ts
    speed = _take(state, "speed", order)
    heading = _take(state, "heading", order)
    accuracy = _take(state, "accuracy", order)
    row = _take(state, "row", order).astype(np.int64, copy=False)
    meter = _take(state, "meter", order).astype(np.int8, copy=False)
    tariff = _take(state, "tariff", order).astype(np.int8, copy=False)
    driver = _take(state, "driver", order).astype(np.int32, copy=False)
    del order
    _release_free_memory(n)
    vehicle_col = _str_series(pc.take(ordered_vehicles, pa.array(codes)))
    del codes
    meter_col = _str_series(
        pc.take(pa.array([None, *fr.METER_VALUES], type=pa.string()), pa.array(meter))
    )
    del meter
    drivers = pa.array([v or None for v in state.drivers], type=pa.string())
    driver_col = _str_series(pc.take(drivers, pa.array(driver)))
    del driver
    _release_free_memory(n)
    return pd.DataFrame(
        {
            fr.VEHICLE_ID: vehicle_col,
            fr.TIMESTAMP: stamp,
            fr.LAT: lat,
            fr.LON: lon,
            fr.SPEED_KMH: speed,
            fr.HEADING_DEG: heading,
            fr.ACCURACY_M: accuracy,
            fr.METER: meter_col,
            fr.TARIFF: pd.arrays.IntegerArray(tariff, tariff == 0),
            fr.DRIVER_ID: driver_col,
            fr.ROW: row,
            fr.SPEED_FLAG: flags,
        },
        copy=False,
    )


def _str_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(pd.array(arr, dtype="str"))
