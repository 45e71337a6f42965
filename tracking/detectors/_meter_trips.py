"""Meter trips of fixes, for the kernels of the rules judged on trips.

A rule judged on trips (``outside_municipality``, ``operating_while_barred``) runs as a kernel
over fixes (:mod:`tracking.detectors.kernel`): its ``detect`` cuts the fixes into trips with
:func:`tracking.trips.detect_trips` and passes them to the batch function. Only meter trips: a
trip inferred from stops needs stops that later fixes can still change. The kernel's
``max_gap_s`` is the trips' gap (the pipeline's ``trip_max_gap_s``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracking import frames as fr
from tracking.stops import empty_stops
from tracking.trips import MIN_STOP_MOVE_M, SPREAD_M, detect_trips

DEFAULT_TRIP_MAX_GAP_S = 300.0
"""The trips' gap (the pipeline's ``trip_max_gap_s`` default)."""


def meter_trips(pings: pd.DataFrame, *, max_gap_s: float = DEFAULT_TRIP_MAX_GAP_S) -> pd.DataFrame:
    """Return the meter trips of ``pings`` (:func:`tracking.trips.detect_trips`, no stops)."""
    return detect_trips(pings, stops=empty_stops(), max_gap_s=max_gap_s)


def service_trips(trips: pd.DataFrame, *, min_duration_s: float) -> np.ndarray:
    """Return which trips are service.

    Lasting ``min_duration_s`` at least (shorter: a meter blip) and moving: fixes spread by
    :data:`~tracking.trips.MIN_STOP_MOVE_M` at least around their mean (``spread_m``,
    :data:`tracking.trips.SPREAD_M`; without the column, the duration alone). A meter left
    on in a parked car carried no one anywhere: an independent check had one proposed as
    operating while suspended (art. 60 V), its noisy fixes 13 m apart adding 280 m of driven
    length.
    """
    start = trips["started_at"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    end = trips["ended_at"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    keep: np.ndarray = end - start >= round(min_duration_s * 1e9)
    if SPREAD_M in trips.columns:
        keep &= trips[SPREAD_M].to_numpy(dtype=np.float64, na_value=np.nan) >= MIN_STOP_MOVE_M
    return keep


def open_trips(pings: pd.DataFrame, trips: pd.DataFrame) -> dict[str, tuple[int, int | None]]:
    """Return, per vehicle, the ns of its last fix and the start of the trip open at that fix.

    A trip is open when it ends at the vehicle's last fix (a later fix may extend it); the
    start is None when no trip is open.
    """
    last = pings.groupby(fr.VEHICLE_ID, sort=False)[fr.TIMESTAMP].max()
    last_ns = last.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    out: dict[str, tuple[int, int | None]] = {
        str(v): (int(t), None) for v, t in zip(last.index, last_ns, strict=True)
    }
    if not len(trips):
        return out
    final = trips.groupby(fr.VEHICLE_ID, sort=False).agg(
        start=("started_at", "max"), end=("ended_at", "max")
    )
    start_ns = final["start"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    end_ns = final["end"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    for vehicle, start, end in zip(map(str, final.index), start_ns, end_ns, strict=True):
        if out[vehicle][0] == int(end):
            out[vehicle] = (int(end), int(start))
    return out
