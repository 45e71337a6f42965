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
    Neither ISO 8601 nor Unix seconds in [0, 1e10) (milliseconds are refused here, not
    misread as a date in the year 45000).
``naive_timestamp``
    ISO 8601 without a UTC offset (``Z`` or ``±HH[:MM]``), or a naive datetime column.
``future_timestamp``
    After ``now`` plus :data:`FUTURE_TOLERANCE_S`.
``unknown_meter``
    ``meter`` not empty and not one of ``free``, ``occupied``, ``off`` (case and surrounding
    blanks are ignored).
``unknown_tariff``
    ``tariff`` not empty and not 1 or 2. A tariff given while the meter is not ``occupied`` is
    kept as given: it is not a malformed fix, and detectors decide what it means.
``invalid_speed`` / ``invalid_heading`` / ``invalid_accuracy``
    Optional numeric column not empty and not a finite number in range (speed and accuracy
    >= 0, heading in [0, 360]).
``duplicate``
    Identical, across all original columns, to an earlier row of the input.
``conflicting_duplicate``
    Same vehicle and same instant as an earlier kept row, with other values (the database is
    unique on (vehicle, timestamp)). The earlier row wins.

"Earlier" means earlier in the order of the raw frame (the file order). Fixes implying an
impossible speed are *kept* and flagged (``speed_flag``), never rejected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError
from tracking._geodesy import EARTH_RADIUS_M, haversine_m

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
    "unknown_meter",
    "unknown_tariff",
    "invalid_speed",
    "invalid_heading",
    "invalid_accuracy",
    "duplicate",
    "conflicting_duplicate",
)
"""Rejection codes, in the order of precedence used when a row has several problems."""

FUTURE_TOLERANCE_S = 300.0
"""Clock skew allowed between a device and ``now`` before a fix counts as from the future."""

MAX_UNIX_S = 1e10
"""Upper bound (exclusive) of a Unix-seconds timestamp; larger values are likely milliseconds."""

REJECTED_LEAD = (fr.ROW, fr.REASON)

_CODE = {reason: i + 1 for i, reason in enumerate(REJECTION_REASONS)}
_NUMERIC_RE = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"
# An offset must follow a time of day, so a bare date such as "2024-01-01" is not "-01".
_OFFSET_RE = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:z|[+-]\d{2}(?::?\d{2})?)$"


def validate_pings(
    raw: pd.DataFrame,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = 250.0,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split raw GPS fixes into valid pings and rejected rows.

    Parameters
    ----------
    raw : pandas.DataFrame
        Rows as read, in input order, with a ``row`` column (1-based data row of the source) and
        at least ``vehicle_id``, ``timestamp``, ``lat``, ``lon``. Text columns hold the cells as
        written (missing = empty string); numeric columns (from Parquet) are accepted as they
        are, NaN meaning empty; ``timestamp`` may also be a datetime column (tz-aware, else every
        row is ``naive_timestamp``) or numeric Unix seconds. Other columns are carried into
        ``rejected`` only.
    now : pandas.Timestamp, optional
        Reference instant for ``future_timestamp`` (tz-aware); defaults to the current time.
    max_speed_kmh : float, default 250.0
        Implied speed from the previous kept fix of the vehicle above which a fix is flagged.
    future_tolerance_s : float, default 300.0
        Clock skew tolerated after ``now``.

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
    missing = [c for c in (fr.ROW, *fr.PING_REQUIRED) if c not in raw.columns]
    if missing:
        msg = f"faltam coluna(s) obrigatória(s) nos pings: {', '.join(missing)}"
        raise MissingColumnsError(msg)
    now_ts = _check_now(now)
    if not max_speed_kmh > 0:
        msg = f"'max_speed_kmh' era {max_speed_kmh}; esperado um número positivo"
        raise InvalidParameterError(msg)
    if not future_tolerance_s >= 0:
        msg = f"'future_tolerance_s' era {future_tolerance_s}; esperado um número >= 0"
        raise InvalidParameterError(msg)

    n = len(raw)
    code = np.zeros(n, dtype=np.int8)

    def flag(reason: str, bad: NDArray[np.bool_]) -> None:
        code[(code == 0) & bad] = _CODE[reason]

    vehicle = _arrow_text(raw[fr.VEHICLE_ID])
    flag("empty_vehicle_id", _np(pc.equal(vehicle, "")).astype(bool))

    lat, lat_missing, lat_invalid = _as_number(raw[fr.LAT])
    lon, lon_missing, lon_invalid = _as_number(raw[fr.LON])
    flag("missing_coordinates", lat_missing | lon_missing)
    flag("invalid_coordinates", lat_invalid | lon_invalid)
    with np.errstate(invalid="ignore"):
        flag("out_of_range_coordinates", (np.abs(lat) > 90.0) | (np.abs(lon) > 180.0))
        flag("null_island", (lat == 0.0) & (lon == 0.0))

    ts_ns, ts_missing, ts_unparseable, ts_naive = _parse_timestamps(raw[fr.TIMESTAMP])
    flag("missing_timestamp", ts_missing)
    flag("unparseable_timestamp", ts_unparseable)
    flag("naive_timestamp", ts_naive)
    limit_ns = now_ts.value + int(round(future_tolerance_s * 1e9))
    flag("future_timestamp", (code == 0) & (ts_ns > limit_ns))

    meter = pc.utf8_lower(_optional_text(raw, fr.METER, n))
    meter_given = _np(pc.not_equal(meter, "")).astype(bool)
    meter_known = _np(pc.is_in(meter, value_set=pa.array(fr.METER_VALUES))).astype(bool)
    flag("unknown_meter", meter_given & ~meter_known)

    tariff, _, tariff_invalid = _optional_number(raw, fr.TARIFF, n)
    with np.errstate(invalid="ignore"):
        bad_tariff = tariff_invalid | (~np.isnan(tariff) & ~np.isin(tariff, fr.TARIFF_VALUES))
    flag("unknown_tariff", bad_tariff)

    with np.errstate(invalid="ignore"):
        speed, _, bad = _optional_number(raw, fr.SPEED_KMH, n)
        flag("invalid_speed", bad | (speed < 0))
        heading, _, bad = _optional_number(raw, fr.HEADING_DEG, n)
        flag("invalid_heading", bad | (heading < 0) | (heading > 360))
        accuracy, _, bad = _optional_number(raw, fr.ACCURACY_M, n)
        flag("invalid_accuracy", bad | (accuracy < 0))

    uniques = pc.unique(vehicle)
    uniques = pc.take(uniques, pc.sort_indices(uniques))
    vehicle_codes = np.asarray(_np(pc.index_in(vehicle, value_set=uniques)), dtype=np.int64)
    ok_pos = np.flatnonzero(code == 0)
    order = ok_pos[_sort_order(vehicle_codes[ok_pos], ts_ns[ok_pos])]
    dup = _flag_duplicates(raw, code, vehicle_codes, ts_ns, order)
    if dup.any():
        order = order[~dup]
    ok = code == 0
    pings = _build_pings(
        order=order,
        vehicle_codes=vehicle_codes,
        vehicle_uniques=uniques,
        ts_ns=ts_ns,
        lat=lat,
        lon=lon,
        speed=speed,
        heading=heading,
        accuracy=accuracy,
        meter=meter,
        tariff=tariff,
        driver=_optional_text(raw, fr.DRIVER_ID, n),
        row=raw[fr.ROW].to_numpy(dtype=np.int64),
        max_speed_kmh=max_speed_kmh,
    )
    bad_pos = np.flatnonzero(~ok)
    reasons = pc.take(
        pa.array(REJECTION_REASONS, type=pa.large_string()), pa.array(code[bad_pos] - 1)
    )
    rejected = make_rejected(raw.take(bad_pos), reasons)
    return pings, rejected


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
    empty = np.zeros(0, dtype=np.int64)
    return _build_pings(
        order=empty,
        vehicle_codes=empty,
        vehicle_uniques=pa.array([], type=pa.string()),
        ts_ns=empty,
        lat=np.zeros(0),
        lon=np.zeros(0),
        speed=np.zeros(0),
        heading=np.zeros(0),
        accuracy=np.zeros(0),
        meter=pa.chunked_array([], type=pa.string()),
        tariff=np.zeros(0),
        driver=pa.chunked_array([], type=pa.string()),
        row=empty,
        max_speed_kmh=250.0,
    )


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
    if n < 2:
        return flags
    same = vehicle_codes[1:] == vehicle_codes[:-1]
    reach_m = max_speed_kmh / 3.6 * (np.diff(ts_ns).astype(np.float64) / 1e9)
    # Cheap upper bound of the great-circle distance first: R·(|Δφ| + |Δλ|).
    bound_m = (np.abs(np.diff(lat)) + np.abs(np.diff(lon))) * (np.pi / 180.0 * EARTH_RADIUS_M)
    maybe = np.flatnonzero(same & (bound_m > reach_m))
    if len(maybe):
        dist_m = haversine_m(lat[maybe], lon[maybe], lat[maybe + 1], lon[maybe + 1])
        flags[maybe[dist_m > reach_m[maybe]] + 1] = True
    return flags


# --- private helpers -------------------------------------------------------------------------


def _check_now(now: pd.Timestamp | None) -> pd.Timestamp:
    if now is None:
        return pd.Timestamp.now(tz="UTC")
    ts = pd.Timestamp(now)
    if ts.tzinfo is None:
        msg = f"'now' era {ts} sem fuso horário; informe um instante com fuso (por exemplo UTC)"
        raise InvalidParameterError(msg)
    return ts.tz_convert("UTC")


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


def _arrow_text(col: pd.Series, *, strip: bool = True) -> pa.ChunkedArray:
    """Return the column as an Arrow string array, empty string for missing values."""
    text = col if isinstance(col.dtype, pd.StringDtype) else _as_text(col)
    if getattr(text.dtype, "storage", None) == "pyarrow":
        arr = pa.chunked_array(pa.array(text))
    else:
        arr = pa.chunked_array([pa.array(text.to_numpy(dtype=object), type=pa.string())])
    arr = pc.fill_null(arr, "")
    return pc.utf8_trim_whitespace(arr) if strip else arr


def _np(arr: pa.ChunkedArray | pa.Array) -> NDArray[np.generic]:
    return np.asarray(
        arr.to_numpy(zero_copy_only=False) if isinstance(arr, pa.Array) else arr.to_numpy()
    )


def _as_number(col: pd.Series) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    """Values as float64 (NaN when not a number), and masks (missing, invalid)."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        invalid = np.isinf(values)
    else:
        text = _arrow_text(col, strip=False)
        empty = pc.equal(text, "")
        try:  # fast path: every non-empty cell is a number for Arrow, without blanks
            values = _np(pc.cast(pc.if_else(empty, "nan", text), pa.float64())).astype(np.float64)
            missing = _np(empty).astype(bool)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = pc.utf8_trim_whitespace(text)
            missing = _np(pc.equal(text, "")).astype(bool)
            numeric = _np(pc.match_substring_regex(text, _NUMERIC_RE)).astype(bool)
            values = _text_to_float(text, numeric)
        invalid = ~missing & ~np.isfinite(values)
    values = np.where(invalid, np.nan, values)
    return values, missing, invalid


def _text_to_float(text: pa.ChunkedArray, numeric: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Parse the cells flagged ``numeric``; NaN elsewhere."""
    masked = pc.if_else(pa.array(numeric), text, "nan")
    try:
        return np.asarray(_np(pc.cast(masked, pa.float64())), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = pd.to_numeric(pd.Series(_np(masked), dtype=object), errors="coerce")
        return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _optional_text(raw: pd.DataFrame, name: str, n: int) -> pa.ChunkedArray:
    if name in raw.columns:
        return _arrow_text(raw[name])
    return pa.chunked_array([pa.repeat(pa.scalar("", type=pa.large_string()), n)])


def _optional_number(
    raw: pd.DataFrame, name: str, n: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
    if name in raw.columns:
        return _as_number(raw[name])
    nan = np.full(n, np.nan)
    return nan, np.ones(n, dtype=bool), np.zeros(n, dtype=bool)


def _parse_timestamps(
    col: pd.Series,
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """Epoch nanoseconds (0 where invalid) and masks (missing, unparseable, naive)."""
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

    raw_text = _arrow_text(col, strip=False)
    try:  # fast path on the cells as written
        ts = pc.cast(raw_text, pa.timestamp("ns", tz="UTC"))
        return np.asarray(_np(pc.cast(ts, pa.int64())), dtype=np.int64), missing, unparseable, naive
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
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
        seconds = _text_to_float(text, numeric)
        ns, bad = _unix_seconds(seconds, numeric)
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
    ns = parsed.astype("datetime64[ns, UTC]").to_numpy(dtype="datetime64[ns]").view(np.int64)
    return np.where(bad, 0, ns), bad


def _unix_seconds(
    seconds: NDArray[np.float64], present: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    with np.errstate(invalid="ignore"):
        ok = present & np.isfinite(seconds) & (seconds >= 0) & (seconds < MAX_UNIX_S)
    ns = np.zeros(len(seconds), dtype=np.int64)
    ns[ok] = np.round(seconds[ok] * 1e9).astype(np.int64)
    return ns, present & ~ok


def _sort_order(codes: NDArray[np.int64], ts_ns: NDArray[np.int64]) -> NDArray[np.intp]:
    """Stable order by (vehicle, time): ties keep the input order."""
    if len(ts_ns) > 1 and bool(np.all(ts_ns[1:] >= ts_ns[:-1])):
        return np.argsort(codes, kind="stable")  # time-ordered input, the usual case
    by_time = np.argsort(ts_ns, kind="stable")
    return by_time[np.argsort(codes[by_time], kind="stable")]


def _flag_duplicates(
    raw: pd.DataFrame,
    code: NDArray[np.int8],
    vehicle_codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    order: NDArray[np.intp],
) -> NDArray[np.bool_]:
    """Mark ``duplicate``/``conflicting_duplicate`` in ``code``; return the mask over ``order``.

    ``order`` lists the rows that passed the row checks, sorted by (vehicle, time, input order).
    """
    dup = np.zeros(len(order), dtype=bool)
    if len(order) < 2:
        return dup
    same = (vehicle_codes[order[1:]] == vehicle_codes[order[:-1]]) & (
        ts_ns[order[1:]] == ts_ns[order[:-1]]
    )
    if not same.any():
        return dup
    in_group = np.zeros(len(order), dtype=bool)
    in_group[1:] |= same
    in_group[:-1] |= same
    candidates = np.sort(order[in_group])  # input order
    originals = [c for c in raw.columns if c != fr.ROW]
    sub = pd.DataFrame(
        {c: _as_text(raw[c].iloc[candidates]).to_numpy(dtype=object) for c in originals}
    )
    exact = sub.duplicated(keep="first").to_numpy(dtype=bool)
    code[candidates[exact]] = _CODE["duplicate"]
    rest = candidates[~exact]
    key = pd.DataFrame({"v": vehicle_codes[rest], "t": ts_ns[rest]})
    conflicting = key.duplicated(keep="first").to_numpy(dtype=bool)
    code[rest[conflicting]] = _CODE["conflicting_duplicate"]
    dup[in_group] = code[order[in_group]] != 0
    return dup


def _build_pings(
    *,
    order: NDArray[np.int64],
    vehicle_codes: NDArray[np.integer],
    vehicle_uniques: pa.Array,
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    speed: NDArray[np.float64],
    heading: NDArray[np.float64],
    accuracy: NDArray[np.float64],
    meter: pa.ChunkedArray,
    tariff: NDArray[np.float64],
    driver: pa.ChunkedArray,
    row: NDArray[np.int64],
    max_speed_kmh: float,
) -> pd.DataFrame:
    codes = vehicle_codes[order]
    t = ts_ns[order]
    la = lat[order]
    lo = lon[order]
    take = pa.array(order, type=pa.int64())
    tariff_out = tariff[order]
    tariff_na = np.isnan(tariff_out)
    frame = pd.DataFrame(
        {
            fr.VEHICLE_ID: _str_series(pc.take(vehicle_uniques, pa.array(codes, type=pa.int64()))),
            fr.TIMESTAMP: pd.Series(t.view("datetime64[ns]")).dt.tz_localize("UTC"),
            fr.LAT: la,
            fr.LON: lo,
            fr.SPEED_KMH: speed[order],
            fr.HEADING_DEG: heading[order],
            fr.ACCURACY_M: accuracy[order],
            fr.METER: _take_text(meter, take),
            fr.TARIFF: pd.arrays.IntegerArray(
                np.where(tariff_na, 0, tariff_out).astype(np.int8), tariff_na
            ),
            fr.DRIVER_ID: _take_text(driver, take),
            fr.ROW: row[order],
            fr.SPEED_FLAG: speed_flags(codes, t, la, lo, max_speed_kmh=max_speed_kmh),
        }
    )
    return frame


def _take_text(arr: pa.ChunkedArray, indices: pa.Array) -> pd.Series:
    """Return ``arr[indices]`` as pandas ``str``, empty strings as missing (via a dictionary)."""
    encoded = pc.dictionary_encode(arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0))
    dictionary = encoded.dictionary
    dictionary = pc.if_else(
        pc.equal(dictionary, ""), pa.scalar(None, type=dictionary.type), dictionary
    )
    codes = pc.take(encoded.indices, indices)
    return _str_series(pc.take(dictionary, codes))


def _str_series(arr: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(pd.array(arr, dtype="str"))
