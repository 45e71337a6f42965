"""Inputs of a plan read from files or the registry: trips, boundaries, the active fleet."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import geopandas as gpd
import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection

from fleet.loaders import read_boundaries
from planning._errors import PlanningInputError

BOUNDARIES_PATH = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "brazil"
    / "boundaries"
    / "municipios_poa_pvh_pintobandeira.geojson"
)


def read_trips(path: str | Path) -> pd.DataFrame:
    """Read a ``trips.csv`` written by ``pontual analyze`` (pickup columns are what planning uses).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    PlanningInputError
        If ``pickup_lat`` or ``pickup_lon`` is missing.
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de viagens não encontrado: {p}"
        raise FileNotFoundError(msg)
    trips = pd.read_csv(p, dtype={"vehicle_id": str, "trip_id": str, "pickup_stand_id": str})
    missing = [c for c in ("pickup_lat", "pickup_lon") if c not in trips.columns]
    if missing:
        msg = f"{p.name}: faltam as colunas {', '.join(missing)} (trips.csv do pontual analyze)"
        raise PlanningInputError(msg)
    return trips


def bundled_boundary(municipality: str) -> gpd.GeoDataFrame | None:
    """Return the bundled boundary of a municipality (Porto Alegre, Porto Velho, Pinto Bandeira)."""
    if not BOUNDARIES_PATH.is_file():
        return None
    bounds = read_boundaries(BOUNDARIES_PATH)
    found = bounds[bounds["code"] == municipality]
    return found.reset_index(drop=True) if len(found) else None


_ACTIVE_SQL = """
SELECT v.vehicle_id, v.prefixo, v.year, v.first_registered_on, v.accessible,
       v.inspection_valid_until, v.alvara_valid_until, v.municipality_code AS municipality,
       'active' AS status
FROM vehicles v
WHERE v.municipality_code = :m
  AND EXISTS (SELECT 1 FROM vehicle_status_periods s WHERE s.vehicle_id = v.vehicle_id
              AND s.status = 'active'
              AND (s.valid_from IS NULL OR s.valid_from <= :d)
              AND (s.valid_until IS NULL OR s.valid_until >= :d))
ORDER BY v.vehicle_id
"""


def active_fleet_from_db(*, conn: Connection, municipality: str, as_of: dt.date) -> pd.DataFrame:
    """Return the registry's vehicles of a municipality whose status is active on ``as_of``.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection to the registry.
    municipality : str
        IBGE code.
    as_of : datetime.date
        Local date (status periods are inclusive).

    Returns
    -------
    pandas.DataFrame
        ``vehicle_id``, ``prefixo``, ``year`` (Int64), ``first_registered_on``, ``accessible``,
        ``inspection_valid_until``, ``alvara_valid_until``, ``municipality``, ``status``.
    """
    rows = conn.execute(text(_ACTIVE_SQL), {"m": municipality, "d": as_of}).mappings().all()
    columns = [
        "vehicle_id", "prefixo", "year", "first_registered_on", "accessible",
        "inspection_valid_until", "alvara_valid_until", "municipality", "status",
    ]  # fmt: skip
    frame = pd.DataFrame([dict(r) for r in rows], columns=columns)
    frame["year"] = frame["year"].astype("Int64")
    return frame
