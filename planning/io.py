"""Inputs of a plan read from files: trips and the bundled boundaries."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pandas as pd

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
