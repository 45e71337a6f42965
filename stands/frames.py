"""Frame contracts of the stands room.

Stands: GeoDataFrame in EPSG:4326, one Polygon/MultiPolygon per stand (points with ``radius_m``
are buffered metrically into polygons on load), with ``stand_id`` str (unique), ``name`` str,
``capacity`` Int64, ``municipality`` str (IBGE code) or None.

Fleet: DataFrame with ``vehicle_id`` str (unique), ``plate``, ``accessible`` bool, ``stands``
(tuple of stand_ids with a parking licence), ``status``, ``status_since``, ``status_until``,
``alvara_valid_until``, ``inspection_valid_until``, ``municipality``.
"""

from __future__ import annotations

STAND_ID = "stand_id"
NAME = "name"
CAPACITY = "capacity"
MUNICIPALITY = "municipality"
RADIUS_M = "radius_m"
STAND_COLUMNS = (STAND_ID, NAME, CAPACITY, MUNICIPALITY, "geometry")

FLEET_COLUMNS = (
    "vehicle_id",
    "plate",
    "accessible",
    "stands",
    "status",
    "status_since",
    "status_until",
    "alvara_valid_until",
    "inspection_valid_until",
    "municipality",
)
VEHICLE_STATUSES = ("active", "suspended", "out_of_operation", "reserved", "revoked")
