"""Frame contracts of the tracking room: column names and the columns each frame kind requires.

Pings (validated fixes, in memory) are sorted by (vehicle_id, timestamp) with a RangeIndex:
``vehicle_id`` str, ``timestamp`` datetime64[ns, UTC], ``lat``/``lon`` float64 (WGS84),
``speed_kmh``/``heading_deg``/``accuracy_m`` float64 (NaN when absent), ``meter`` str
(``free``/``occupied``/``off`` or None), ``tariff`` Int8 (1/2 or <NA>), ``driver_id`` str or None,
``row`` int64 (1-based data row of the source file), ``speed_flag`` bool (implied speed from the
previous fix of the vehicle above the limit: kept, flagged). Optional ``trip_ref`` str: the source
trip record of trip-record datasets (Porto ECML/PKDD); a change of ``trip_ref`` is a meter cycle
(the passenger left, the meter went free) even though no free fix was observed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module is read by commands that import neither
    import numpy as np
    import pandas as pd
    from numpy.typing import NDArray

VEHICLE_ID = "vehicle_id"
TIMESTAMP = "timestamp"
LAT = "lat"
LON = "lon"
SPEED_KMH = "speed_kmh"
HEADING_DEG = "heading_deg"
ACCURACY_M = "accuracy_m"
METER = "meter"
TARIFF = "tariff"
DRIVER_ID = "driver_id"
ROW = "row"
SPEED_FLAG = "speed_flag"
STAND_ID = "stand_id"
REASON = "reason"
TRIP_REF = "trip_ref"

METER_VALUES = ("free", "occupied", "off")
OUT_OF_SERVICE = "off"


def in_service(meter: pd.Series) -> NDArray[np.bool_]:
    """Tell which fixes are operation: the meter not ``off`` (``free``, ``occupied``, unknown).

    Driving or waiting Livre for a passenger is operating; ``off`` is out of service (private
    use). One rule for presence, habitual absence and inactivity.
    """
    return meter.ne(OUT_OF_SERVICE).to_numpy(dtype=bool)


TARIFF_VALUES = (1, 2)

PING_REQUIRED = (VEHICLE_ID, TIMESTAMP, LAT, LON)
PING_OPTIONAL = (SPEED_KMH, HEADING_DEG, ACCURACY_M, METER, TARIFF, DRIVER_ID)
PING_COLUMNS = (*PING_REQUIRED, *PING_OPTIONAL, ROW, SPEED_FLAG)

VISIT_COLUMNS = (
    "vehicle_id",
    "stand_id",
    "arrived_at",
    "departed_at",
    "dwell_s",
    "queue_position",
    "boarded",
    "licensed",
)
TRIP_COLUMNS = (
    "vehicle_id",
    "trip_id",
    "started_at",
    "ended_at",
    "pickup_lat",
    "pickup_lon",
    "dropoff_lat",
    "dropoff_lon",
    "distance_m",
    "pickup_stand_id",
)
STOP_COLUMNS = (
    "vehicle_id",
    "stop_id",
    "started_at",
    "ended_at",
    "duration_s",
    "lat",
    "lon",
    "n_fixes",
)
