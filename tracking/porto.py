"""Reader of the Porto taxi trips of the ECML/PKDD 2015 challenge, as validated pings.

Input: the upstream ``train.csv``/``test.csv`` format (``TRIP_ID, CALL_TYPE, ORIGIN_CALL,
ORIGIN_STAND, TAXI_ID, TIMESTAMP, DAY_TYPE, MISSING_DATA, POLYLINE``) or the project's
``data/porto/derived/trips_combined.csv`` (the same columns plus provenance ones). ``POLYLINE`` is a
JSON list of ``[lon, lat]`` pairs (longitude first), one every 15 s from ``TIMESTAMP`` (Unix
seconds, UTC). Each point becomes one raw fix and goes through
:func:`tracking.validate.validate_pings`, so bad points are rejected with a reason like any ping.

Meter semantics: the dataset holds only passenger trips (every polyline starts when a passenger
boarded and ends when they left), so every fix gets ``meter = "occupied"``. The first fix of a
trip is therefore where the meter went from ``free`` to ``occupied`` (the boarding), and the
silence between two trips of a taxi is time without a passenger, of unknown meter state.

Rows: ``row`` is the 1-based CSV data row of the *trip*; ``point_index`` (0-based) is the point's
position in its polyline. A trip whose polyline is not a well-formed list of pairs is rejected as
one row with reason ``invalid_polyline``; a trip whose ``TIMESTAMP`` is not Unix seconds as
``unparseable_timestamp`` (``point_index`` empty in both cases). Empty polylines (``[]``) are
valid trips with no fixes.

Overlapping trips of the same taxi produce two fixes of one vehicle at the same instant when
their 15-s grids coincide: after validation the later trip's fix is ``conflicting_duplicate``.
The derived sample has two overlapping pairs (taxis 20000305 and 20000320), but their grids are
offset (start times differ by a number of seconds that is not a multiple of 15), so no fix
conflicts: the sample validates with no rejection at all. Fixes of the two trips of a pair
interleave in time, and are merged into one meter run by :func:`tracking.trips.detect_trips`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from tracking import frames as fr
from tracking._errors import InvalidParameterError
from tracking.ingest import read_csv_cells
from tracking.validate import MAX_SPEED_KMH, make_rejected, validate_pings

POINT_INTERVAL_S = 15
"""Sampling period of the Porto polylines (seconds)."""

TRIP_REF = fr.TRIP_REF
POINT_INDEX = "point_index"
PORTO_REQUIRED = ("TRIP_ID", "CALL_TYPE", "ORIGIN_STAND", "TAXI_ID", "TIMESTAMP", "POLYLINE")
LABEL_COLUMNS = (TRIP_REF, fr.VEHICLE_ID, "call_type", "origin_stand", "started_at", "n_points")

_NUM = r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*"
_PAIR = rf"\s*\[{_NUM},{_NUM}\]\s*"
_POLYLINE_RE = rf"^\s*\[(?:{_PAIR}(?:,{_PAIR})*)?\]\s*$"


def read_porto_trips(
    path: str | Path,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = MAX_SPEED_KMH,
    point_interval_s: int = POINT_INTERVAL_S,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Read Porto ECML/PKDD trips as validated pings, rejected rows and trip labels.

    Parameters
    ----------
    path : str or pathlib.Path
        CSV in the upstream format (extra columns are ignored).
    now : pandas.Timestamp, optional
        Reference instant for future timestamps (tz-aware); defaults to the current time.
    max_speed_kmh : float, default 250.0
        Implied speed above which a fix is flagged (kept).
    point_interval_s : int, default 15
        Seconds between consecutive polyline points.

    Returns
    -------
    pings : pandas.DataFrame
        Valid fixes per :mod:`tracking.frames`, all with ``meter = "occupied"``; ``row`` is the
        trip's CSV data row.
    rejected : pandas.DataFrame
        ``row``, ``reason`` and the expanded point as text: ``vehicle_id``, ``timestamp`` (Unix
        seconds), ``lat``, ``lon``, ``meter``, ``trip_ref``, ``point_index``.
    labels : pandas.DataFrame
        One row per trip of the file, in file order: ``trip_ref`` (TRIP_ID), ``vehicle_id``,
        ``call_type`` (A/B/C), ``origin_stand`` (str, None unless hailed at a stand),
        ``started_at`` (UTC), ``n_points`` (points in the polyline, before validation).

    Raises
    ------
    MissingColumnsError
        If a required upstream column is absent.
    InvalidParameterError
        If ``point_interval_s`` is not a positive integer.
    EmptyFileError, MalformedFileError, FileNotFoundError
        If the file cannot be read.
    """
    if int(point_interval_s) != point_interval_s or point_interval_s <= 0:
        msg = f"'point_interval_s' era {point_interval_s}; esperado um inteiro positivo"
        raise InvalidParameterError(msg)
    cells, malformed = read_csv_cells(path, required=PORTO_REQUIRED, what="viagens do Porto")
    n_trips = len(cells)
    trip_row = cells[fr.ROW].to_numpy(dtype=np.int64)
    trip_ref = cells["TRIP_ID"].str.strip()
    vehicle = cells["TAXI_ID"].str.strip()

    start_s, start_ok = _unix_seconds(cells["TIMESTAMP"])
    polyline = pa.chunked_array([pa.array(cells["POLYLINE"])])
    poly_ok = np.asarray(pc.match_substring_regex(polyline, _POLYLINE_RE).to_numpy(), dtype=bool)
    lon, lat, counts = _parse_polylines(polyline, poly_ok & start_ok)

    trip_of_point = np.repeat(np.arange(n_trips), counts)
    first_point = np.cumsum(counts) - counts
    point_index = np.arange(len(trip_of_point), dtype=np.int64) - first_point[trip_of_point]
    raw = pd.DataFrame(
        {
            fr.VEHICLE_ID: vehicle.iloc[trip_of_point].reset_index(drop=True),
            fr.TIMESTAMP: pd.array(
                start_s[trip_of_point] + point_interval_s * point_index, dtype="Int64"
            ),
            fr.LAT: lat,
            fr.LON: lon,
            fr.METER: pd.Series(np.full(len(lat), "occupied", dtype=object), dtype="str"),
            TRIP_REF: trip_ref.iloc[trip_of_point].reset_index(drop=True),
            POINT_INDEX: pd.array(point_index, dtype="Int64"),
            fr.ROW: trip_row[trip_of_point],
        }
    )
    pings, rejected = validate_pings(raw, now=now, max_speed_kmh=max_speed_kmh)
    # Each record is one passenger trip: keep it, so a new record is a new meter cycle.
    ref_of_row = pd.Series(trip_ref.to_numpy(dtype=object), index=trip_row)
    pings[fr.TRIP_REF] = ref_of_row.reindex(pings[fr.ROW].to_numpy()).to_numpy(dtype=object)

    trip_level = _trip_rejections(cells, start_ok, poly_ok, malformed)
    if len(trip_level):
        rejected = pd.concat([trip_level, rejected], ignore_index=True)
        point = pd.to_numeric(rejected[POINT_INDEX].replace("", "-1"))
        order = np.lexsort((point.to_numpy(), rejected[fr.ROW].to_numpy()))
        rejected = rejected.iloc[order].reset_index(drop=True)

    labels = pd.DataFrame(
        {
            TRIP_REF: trip_ref.reset_index(drop=True),
            fr.VEHICLE_ID: vehicle.reset_index(drop=True),
            "call_type": cells["CALL_TYPE"].str.strip().reset_index(drop=True),
            "origin_stand": _stand_ids(cells["ORIGIN_STAND"]),
            "started_at": pd.Series(
                np.where(start_ok, start_s, 0).astype("datetime64[s]").astype("datetime64[ns]")
            )
            .dt.tz_localize("UTC")
            .mask(pd.Series(~start_ok)),
            "n_points": counts.astype(np.int64),
        }
    )
    return pings, rejected, labels


def _unix_seconds(text: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    arr = pc.utf8_trim_whitespace(pa.chunked_array([pa.array(text)]))
    ok = np.asarray(pc.match_substring_regex(arr, r"^\d{1,10}$").to_numpy(), dtype=bool)
    cleaned = pc.if_else(pa.array(ok), arr, "0")
    return np.asarray(pc.cast(cleaned, pa.int64()).to_numpy(), dtype=np.int64), ok


def _parse_polylines(
    polyline: pa.ChunkedArray, use: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """Longitudes, latitudes and per-trip point counts (0 for trips not in ``use``)."""
    chosen = pc.if_else(pa.array(use), polyline, "[]")
    numbers = pc.replace_substring_regex(chosen, r"[\[\]\s]", "")
    parts = pc.split_pattern(numbers, ",")
    lengths = np.asarray(pc.list_value_length(parts).to_numpy(), dtype=np.int64)
    values = pc.list_flatten(parts)
    values = pc.filter(values, pc.not_equal(values, ""))  # "[]" splits into one empty string
    flat = np.asarray(pc.cast(values, pa.float64()).to_numpy(), dtype=np.float64)
    empty = np.asarray(pc.equal(numbers, "").to_numpy(), dtype=bool)
    counts = np.where(empty, 0, lengths // 2)
    return flat[0::2], flat[1::2], counts


def _stand_ids(col: pd.Series) -> pd.Series:
    """ORIGIN_STAND as text ids: "15.0" -> "15"; empty/NA -> None."""
    text = col.str.strip()
    text = text.str.replace(r"\.0+$", "", regex=True)
    missing = text.isin(["", "NA", "NaN", "nan", "None"])
    return pd.Series(text.mask(missing).to_numpy(dtype=object), dtype="object").where(
        ~missing.to_numpy(), None
    )


def _trip_rejections(
    cells: pd.DataFrame,
    start_ok: NDArray[np.bool_],
    poly_ok: NDArray[np.bool_],
    malformed: pd.DataFrame,
) -> pd.DataFrame:
    """Whole-trip rejections, in the columns of the point rejections."""
    bad_time = ~start_ok
    bad_poly = start_ok & ~poly_ok
    bad = bad_time | bad_poly
    pos = np.flatnonzero(bad)
    rows = pd.DataFrame(
        {
            fr.VEHICLE_ID: cells["TAXI_ID"].iloc[pos].to_numpy(dtype=object),
            fr.TIMESTAMP: cells["TIMESTAMP"].iloc[pos].to_numpy(dtype=object),
            fr.LAT: "",
            fr.LON: "",
            fr.METER: "occupied",
            TRIP_REF: cells["TRIP_ID"].iloc[pos].to_numpy(dtype=object),
            POINT_INDEX: "",
            fr.ROW: cells[fr.ROW].iloc[pos].to_numpy(dtype=np.int64),
        },
        index=pd.RangeIndex(len(pos)),
    )
    reasons = np.where(bad_time[pos], "unparseable_timestamp", "invalid_polyline").astype(object)
    out = make_rejected(rows, reasons)
    if len(malformed):
        extra = malformed.rename(columns={"TAXI_ID": fr.VEHICLE_ID, "TIMESTAMP": fr.TIMESTAMP})
        extra = extra.rename(columns={"TRIP_ID": TRIP_REF})
        keep = [c for c in out.columns if c in extra.columns]
        out = pd.concat([out, extra[keep]], ignore_index=True).fillna("")
    return out
