"""Small helpers shared by the fleet/stand detectors: input checks, evidence records, local days.

Private to ``tracking.detectors``: timestamps travel as int64 epoch nanoseconds (UTC), local
calendar days as int64 days since 1970-01-01 (``datetime64[D]``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tracking.arrays import NS, epoch_ns, in_track_order, iso_utc, iso_utc_many, vehicle_codes
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError, FleetFrameError

DAY_NS = 86_400 * NS
MOVING_KMH = 10.0
"""A fix reporting this speed or more is driving, not standing (waiting, a drop-off)."""
NO_DAY_LOW = np.iinfo(np.int64).min // 2  # "unbounded" lower date (days)
NO_DAY_HIGH = np.iinfo(np.int64).max // 2  # "unbounded" upper date (days)
_EPOCH = dt.date(1970, 1, 1)


def approach(
    visits: pd.DataFrame, *, min_approach_m: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """How each visit began, from its approach (:mod:`stands.visits`): ``(drove_in, beside)``.

    ``drove_in``: seen driving in, the fix before its first fix inside lay more than
    ``min_approach_m`` from the stand or reported at least :data:`MOVING_KMH`. ``beside``:
    seen standing beside the stand, that fix within ``min_approach_m`` and reporting less: a
    vehicle waiting there, its fixes kept just outside by GPS noise, was there before its
    first fix inside. Neither when unknown (no such fix, no geometry, no speed, no column).
    """
    n = len(visits)
    metres, kmh = (
        pd.to_numeric(visits[c]).to_numpy(dtype=np.float64)
        if c in visits.columns
        else np.full(n, np.nan)
        for c in ("approach_m", "approach_kmh")
    )
    drove_in = (metres > min_approach_m) | (kmh >= MOVING_KMH)
    beside = (metres <= min_approach_m) & (kmh < MOVING_KMH)
    return drove_in, beside


def require_columns(frame: pd.DataFrame, columns: Iterable[str], *, what: str) -> None:
    """Raise :class:`DetectorInputError` naming the columns of ``frame`` that are missing."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"{what} sem a(s) coluna(s) {', '.join(missing)}"
        raise DetectorInputError(msg)


def utc_ns(
    values: pd.Series, *, column: str, what: str, allow_null: bool = False
) -> NDArray[np.int64]:
    """Epoch nanoseconds of a tz-aware column; naive or (unless allowed) null values raise.

    Null values become ``NO_DAY_LOW`` (a huge negative number) when ``allow_null``. Without
    nulls, a read-only view of the column's own nanoseconds (no copy of millions of fixes).
    """
    if not isinstance(values.dtype, pd.DatetimeTZDtype):
        if len(values) == 0:
            return np.zeros(0, dtype=np.int64)
        msg = f"'{column}' de {what} é {values.dtype} sem fuso horário; esperados instantes UTC"
        raise DetectorInputError(msg)
    null = values.isna().to_numpy()
    if null.any() and not allow_null:
        msg = f"'{column}' de {what} tem {int(null.sum())} instante(s) nulo(s)"
        raise DetectorInputError(msg)
    ns = epoch_ns(values)
    if null.any():
        ns = ns.copy()
        ns[null] = NO_DAY_LOW
    return ns


def check_threshold(name: str, value: float, *, positive: bool = False, unit: str = "") -> None:
    """Raise :class:`DetectorThresholdError` unless ``value`` is a finite number >= 0 (> 0)."""
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )
    if not ok:
        bound = "> 0" if positive else ">= 0"
        suffix = f" ({unit})" if unit else ""
        msg = f"'{name}' foi {value!r}; esperado um número finito {bound}{suffix}"
        raise DetectorThresholdError(msg)


def zone(timezone: str) -> ZoneInfo:
    """Return the IANA zone ``timezone`` or raise :class:`DetectorThresholdError`."""
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        msg = (
            f"fuso horário desconhecido: {timezone!r}; esperado um nome IANA como America/Sao_Paulo"
        )
        raise DetectorThresholdError(msg) from exc


def local_days(ns: NDArray[np.int64], timezone: str) -> NDArray[np.int64]:
    """Local calendar day (days since 1970-01-01) of each UTC instant, in ``timezone``."""
    if len(ns) == 0:
        return np.zeros(0, dtype=np.int64)
    local = pd.DatetimeIndex(ns.astype("datetime64[ns]"), tz="UTC").tz_convert(zone(timezone))
    wall = local.tz_localize(None).asi8
    return np.floor_divide(wall, DAY_NS).astype(np.int64)


def local_day(ns: int, timezone: str) -> int:
    """Scalar :func:`local_days` (same arithmetic)."""
    return int(local_days(np.array([ns], dtype=np.int64), timezone)[0])


def day_iso(day: int) -> str:
    """ISO date ``YYYY-MM-DD`` of a day number."""
    return (_EPOCH + dt.timedelta(days=int(day))).isoformat()


def day_of(value: Any, *, column: str, what: str) -> int | None:
    """Day number of a date-like cell (``datetime.date``, Timestamp, ISO text); None if empty."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, str) and not value.strip():
        return None
    try:
        if isinstance(value, dt.datetime | pd.Timestamp):
            date = value.date()
        elif isinstance(value, dt.date):
            date = value
        else:
            date = dt.date.fromisoformat(str(value).strip()[:10])
    except (ValueError, TypeError) as exc:
        msg = f"'{column}' de {what} era {value!r}; esperado data AAAA-MM-DD"
        raise FleetFrameError(msg) from exc
    return (date - _EPOCH).days


def day_array(values: Iterable[Any], *, column: str, what: str, missing: int) -> NDArray[np.int64]:
    """Day numbers of a column of date-like cells; empty cells become ``missing``."""
    out = [day_of(v, column=column, what=what) for v in values]
    return np.array([missing if d is None else d for d in out], dtype=np.int64)


def fix_records(
    ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    row: NDArray[np.int64],
) -> list[dict[str, Any]]:
    """:func:`fix_record` of each fix, computed at once."""
    return [
        {"timestamp": t, "lat": y, "lon": x, "row": None if r < 0 else r}
        for t, y, x, r in zip(
            iso_utc_many(ns),
            np.asarray(lat, dtype=np.float64).tolist(),
            np.asarray(lon, dtype=np.float64).tolist(),
            np.asarray(row, dtype=np.int64).tolist(),
            strict=True,
        )
    ]


def fix_record(ns: int, lat: float, lon: float, row: int | None) -> dict[str, Any]:
    """One evidence fix: ``{timestamp, lat, lon, row}`` (JSON-ready; row None if unknown)."""
    return {
        "timestamp": iso_utc(ns),
        "lat": float(lat),
        "lon": float(lon),
        "row": None if row is None or row < 0 else int(row),
    }


def ping_rows(pings: pd.DataFrame) -> NDArray[np.int64]:
    """Source rows of the pings (``row``), -1 where unknown."""
    if "row" not in pings.columns:
        return np.full(len(pings), -1, dtype=np.int64)
    return pd.to_numeric(pings["row"]).fillna(-1).to_numpy(dtype=np.int64)


def meter_at(pings: pd.DataFrame, positions: NDArray[np.int64]) -> NDArray[np.object_]:
    """``meter`` of the pings at ``positions`` (None everywhere without the column).

    Only those cells become Python objects: the whole column as objects would cost seconds and
    hundreds of MB on millions of fixes.
    """
    if "meter" not in pings.columns:
        return np.full(len(positions), None, dtype=object)
    return np.asarray(pings["meter"].take(positions).to_numpy(dtype=object), dtype=object)


def metres_or_none(value: Any) -> float | None:
    """Return a distance for the evidence, in metres to the centimetre; None when unknown."""
    if value is None or pd.isna(value):
        return None
    return round(float(value), 2)


REVIEW_CONFIDENCE_FACTOR = 0.5
"""Confidence factor of a finding whose details flag a sub-case that accuses no one by itself
(e.g. a silence that hides no ride, Bandeira 2 on a ride out of the municipality): under 0.5
no rulebook proposes it, even one without a review case for it."""


def clip_confidence(value: float, *, high: float = 0.95, low: float = 0.05) -> float:
    """Confidence clipped to ``[low, high]`` (never 1.0) and rounded to 4 decimals."""
    return round(min(high, max(low, float(value))), 4)


def sorted_view(
    pings: pd.DataFrame,
) -> tuple[NDArray[np.int64] | None, NDArray[np.int64], NDArray[np.int64]]:
    """Pings in (vehicle, time) order: ``(order, codes, ns)``.

    ``order`` is None when the frame already honours its contract (sorted), else the positions
    that sort it; ``codes`` (vehicle codes) and ``ns`` (UTC nanoseconds) are in sorted order.
    """
    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    codes = vehicle_codes(pings["vehicle_id"])[0]
    if in_track_order(codes, ns):
        return None, codes, ns
    order = np.lexsort((ns, codes)).astype(np.int64)
    return order, codes[order], ns[order]


def sorted_positions(
    order: NDArray[np.int64] | None, positions: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Map positions of the given frame to positions in its sorted view (identity if sorted)."""
    if order is None:
        return positions
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return rank[positions]


def last_at_or_before(
    ns: NDArray[np.int64], lo: NDArray[np.int64], hi: NDArray[np.int64], x: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Largest position p in ``[lo, hi]`` with ``ns[p] <= x`` (ns increasing there), else -1.

    A vectorised binary search over many independent ranges at once.
    """
    left, right = lo.copy(), hi + 1  # search in [left, right)
    while True:
        active = left < right
        if not active.any():
            break
        mid = (left + right) // 2
        go_right = active & (ns[np.minimum(mid, len(ns) - 1)] <= x)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)
    return np.where(left - 1 >= lo, left - 1, -1)
