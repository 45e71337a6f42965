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
        If ``pickup_lat`` or ``pickup_lon`` is missing, or a ``started_at`` / ``ended_at`` cell
        is not an ISO 8601 instant (the first such row is named). Those columns, when present,
        come back as UTC instants.
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
    for column in ("started_at", "ended_at"):
        if column in trips.columns:
            trips[column] = _instants(trips[column], column, p.name)
    return trips


def _instants(cells: pd.Series, column: str, name: str) -> pd.Series:
    """Parse a column of ISO 8601 instants to UTC.

    An empty cell is NaT; any other cell that does not parse is an error naming its line (the
    header is line 1).
    """
    parsed = pd.to_datetime(cells, format="ISO8601", utc=True, errors="coerce")
    bad = (parsed.isna() & cells.notna()).to_numpy()
    if bad.any():
        at = int(bad.argmax())
        msg = (
            f"{name}: linha {at + 2}: {column} {str(cells.iloc[at])!r} não é data e hora "
            "ISO 8601 (trips.csv do pontual analyze)"
        )
        raise PlanningInputError(msg)
    return parsed


def bundled_boundary(municipality: str) -> gpd.GeoDataFrame | None:
    """Return the bundled boundary of a municipality (Porto Alegre, Porto Velho, Pinto Bandeira)."""
    if not BOUNDARIES_PATH.is_file():
        return None
    bounds = read_boundaries(BOUNDARIES_PATH)
    found = bounds[bounds["code"] == municipality]
    return found.reset_index(drop=True) if len(found) else None
