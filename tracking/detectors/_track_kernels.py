"""Private helpers shared by the track detectors (gaps, GPS anomalies, illegal stands).

Pings become sorted numpy arrays once (:func:`track_arrays`); evidence fixes and findings are
built by :func:`fix_evidence`, :func:`finding_record` and :func:`findings_from_records`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracking import frames as fr
from tracking.arrays import epoch_ns, in_track_order, iso_utc, iso_utc_many, vehicle_codes
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import empty_findings, finding_id, make_findings

NS = 1_000_000_000
METER_UNKNOWN, METER_FREE, METER_OCCUPIED, METER_OFF = 0, 1, 2, 3
METER_NAMES: tuple[str | None, ...] = (None, "free", "occupied", "off")
_METER_CODE = {name: code for code, name in enumerate(METER_NAMES) if name is not None}


class TrackArrays(NamedTuple):
    """Fixes of every vehicle as arrays sorted by (vehicle, time)."""

    vehicles: NDArray[np.object_]  # vehicle id by code (sorted)
    codes: NDArray[np.int64]
    ts_ns: NDArray[np.int64]
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    meter: NDArray[np.int8]  # METER_* codes
    row: NDArray[np.int64]  # -1 when unknown
    speed_flag: NDArray[np.bool_]
    trip_ref: NDArray[np.object_] | None = None  # source trip record (None: column absent)
    accuracy_m: NDArray[np.float64] | None = None  # receiver's accuracy, NaN unknown (None: absent)


def check_positive(**values: float) -> None:
    """Raise :class:`DetectorThresholdError` unless every value is a finite number > 0."""
    for name, value in values.items():
        ok = (
            isinstance(value, int | float | np.integer | np.floating)
            and not isinstance(value, bool)
            and math.isfinite(float(value))
            and value > 0
        )
        if not ok:
            msg = f"'{name}' era {value!r}; esperado um número finito > 0"
            raise DetectorThresholdError(msg)


def check_columns(frame: pd.DataFrame, required: Sequence[str], *, what: str) -> None:
    """Raise :class:`DetectorInputError` naming the columns of ``required`` missing in ``frame``."""
    missing = [c for c in required if c not in frame.columns]
    if missing:
        msg = f"{what} sem a(s) coluna(s) obrigatória(s): {', '.join(missing)}"
        raise DetectorInputError(msg)


def utc_ns(col: pd.Series, *, name: str, what: str) -> NDArray[np.int64]:
    """Epoch nanoseconds of a tz-aware column; raise on naive or null instants."""
    if not isinstance(col.dtype, pd.DatetimeTZDtype):
        msg = f"'{name}' de {what} é {col.dtype}; esperado data/hora com fuso (UTC)"
        raise DetectorInputError(msg)
    if col.isna().any():
        msg = f"'{name}' de {what} tem {int(col.isna().sum())} instante(s) nulo(s)"
        raise DetectorInputError(msg)
    return epoch_ns(col)


def meter_codes(col: pd.Series | None, n: int) -> NDArray[np.int8]:
    """METER_* code of each fix; raise on a value other than free/occupied/off/null."""
    if col is None:
        return np.zeros(n, dtype=np.int8)
    if isinstance(col.dtype, pd.CategoricalDtype) and set(col.cat.categories) <= set(
        fr.METER_VALUES
    ):  # the evidence frames' one-byte meter: by its codes
        lut = np.array([_METER_CODE[c] for c in col.cat.categories] + [0], dtype=np.int8)
        return lut[col.cat.codes.to_numpy()]  # code -1 (null) takes the last: unknown
    arr = pa.array(col, from_pandas=True)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        try:
            arr = pa.array(col.astype(object).where(col.notna(), None).to_numpy(), type=pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            msg = f"'meter' tem valores que não são texto ({col.dtype}); esperado free/occupied/off"
            raise DetectorInputError(msg) from exc
    idx = pc.index_in(arr, value_set=pa.array(fr.METER_VALUES, type=arr.type))
    bad = pc.and_(pc.is_null(idx), pc.is_valid(arr))
    if pc.any(bad).as_py():
        first = pc.filter(arr, bad)[0].as_py()
        msg = f"'meter' era {first!r}; esperado um de {', '.join(fr.METER_VALUES)} ou vazio"
        raise DetectorInputError(msg)
    codes = np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    out = np.zeros(n, dtype=np.int8)
    for value_pos, name in enumerate(fr.METER_VALUES):
        out[codes == value_pos] = _METER_CODE[name]
    return out


def track_arrays(pings: pd.DataFrame) -> TrackArrays:
    """Validate a pings frame and return its fixes as arrays sorted by (vehicle, time).

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated fixes (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``; optional ``meter``, ``row``, ``speed_flag`` (absent: unknown, -1,
        False), ``trip_ref`` and ``accuracy_m`` (absent: None).

    Returns
    -------
    TrackArrays
        Sorted (stably) by vehicle id then time.

    Raises
    ------
    DetectorInputError
        If a required column is missing, timestamps are naive or null, vehicle ids are null, or
        a meter value is unknown.
    """
    check_columns(pings, fr.PING_REQUIRED, what="os pings")
    n = len(pings)
    ts = utc_ns(pings[fr.TIMESTAMP], name=fr.TIMESTAMP, what="os pings")
    vid = pings[fr.VEHICLE_ID]
    if vid.isna().any():
        msg = f"'vehicle_id' dos pings tem {int(vid.isna().sum())} valor(es) nulo(s)"
        raise DetectorInputError(msg)
    codes, uniques = vehicle_codes(vid)
    lat = pings[fr.LAT].to_numpy(dtype=np.float64)
    lon = pings[fr.LON].to_numpy(dtype=np.float64)
    meter = meter_codes(pings[fr.METER] if fr.METER in pings.columns else None, n)
    row = (
        pings[fr.ROW].fillna(-1).to_numpy(dtype=np.int64)
        if fr.ROW in pings.columns
        else np.full(n, -1, dtype=np.int64)
    )
    flag = (
        pings[fr.SPEED_FLAG].fillna(False).to_numpy(dtype=bool)
        if fr.SPEED_FLAG in pings.columns
        else np.zeros(n, dtype=bool)
    )
    ref = (
        np.asarray(
            pings[fr.TRIP_REF].astype(object).where(pings[fr.TRIP_REF].notna(), None),
            dtype=object,
        )
        if fr.TRIP_REF in pings.columns
        else None
    )
    acc = (
        pd.to_numeric(pings[fr.ACCURACY_M]).to_numpy(dtype=np.float64, na_value=np.nan)
        if fr.ACCURACY_M in pings.columns
        else None
    )
    if not in_track_order(codes, ts):
        order = np.lexsort((ts, codes))
        codes, ts, lat, lon = codes[order], ts[order], lat[order], lon[order]
        meter, row, flag = meter[order], row[order], flag[order]
        ref = None if ref is None else ref[order]
        acc = None if acc is None else acc[order]
    return TrackArrays(uniques, codes, ts, lat, lon, meter, row, flag, ref, acc)


def fix_evidence(track: TrackArrays, i: int) -> dict[str, Any]:
    """Return the evidence of fix ``i``: timestamp, lat, lon, row, meter, speed_flag."""
    row = int(track.row[i])
    return {
        "timestamp": iso_utc(int(track.ts_ns[i])),
        "lat": float(track.lat[i]),
        "lon": float(track.lon[i]),
        "row": None if row < 0 else row,
        "meter": METER_NAMES[int(track.meter[i])],
        "speed_flag": bool(track.speed_flag[i]),
    }


def fix_evidences(track: TrackArrays, positions: NDArray[np.int64]) -> list[dict[str, Any]]:
    """:func:`fix_evidence` of each fix at ``positions``, computed at once."""
    rows = track.row[positions].tolist()
    return [
        {
            "timestamp": t,
            "lat": y,
            "lon": x,
            "row": None if r < 0 else r,
            "meter": METER_NAMES[m],
            "speed_flag": f,
        }
        for t, y, x, r, m, f in zip(
            iso_utc_many(track.ts_ns[positions]),
            track.lat[positions].tolist(),
            track.lon[positions].tolist(),
            rows,
            track.meter[positions].tolist(),
            track.speed_flag[positions].tolist(),
            strict=True,
        )
    ]


def finding_record(
    *,
    kind: str,
    vehicle_id: str | None,
    stand_id: str | None,
    started_ns: int,
    ended_ns: int,
    confidence: float,
    details: dict[str, Any],
    geometry: Any,
) -> dict[str, Any]:
    """One finding as a plain dict with the columns of the findings frame (id included)."""
    started = pd.Timestamp(int(started_ns), unit="ns", tz="UTC")
    return {
        "finding_id": finding_id(kind, vehicle_id, stand_id, started),
        "kind": kind,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": started,
        "ended_at": pd.Timestamp(int(ended_ns), unit="ns", tz="UTC"),
        "confidence": float(confidence),
        "details": details,
        "geometry": geometry,
    }


def findings_from_records(records: Sequence[Mapping[str, Any]]) -> gpd.GeoDataFrame:
    """Build the validated findings frame of finding records (ids re-derived, must agree)."""
    if not records:
        return empty_findings()
    rows = pd.DataFrame(
        {
            key: [r[key] for r in records]
            for key in ("kind", "vehicle_id", "stand_id", "started_at", "ended_at", "confidence")
        }
    )
    rows["details"] = pd.Series([r["details"] for r in records], dtype=object)
    return make_findings(rows, [r["geometry"] for r in records])


def local_dates(ts_ns: NDArray[np.int64], timezone: str) -> NDArray[np.datetime64]:
    """Local calendar date (``datetime64[D]``) of each UTC instant in ``timezone``."""
    idx = pd.DatetimeIndex(ts_ns.view("datetime64[ns]"), tz="UTC").tz_convert(timezone)
    return np.asarray(idx.tz_localize(None).to_numpy().astype("datetime64[D]"))


def check_timezone(timezone: str) -> None:
    """Raise :class:`DetectorThresholdError` unless ``timezone`` is a known IANA zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        msg = f"fuso horário desconhecido: {timezone!r}; esperado um nome IANA (America/Sao_Paulo)"
        raise DetectorThresholdError(msg) from exc
