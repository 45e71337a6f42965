"""Stand capacity against demand by area, and candidate sites for new stands.

Demand is the pickups of ``trips.csv`` (``pontual analyze``) per H3 cell (resolution 8 or 9;
every h3 call goes through ``geo.h3``). Capacity is the spaces of the stands within walking
distance of the cell's centre: distance from the centre to the stand's area, measured in the
local SIRGAS 2000 / UTM CRS (``geo.crs``). A stand without a ``capacity`` counts as
``unknown_capacity_spaces`` (default 1: at least one taxi can wait there). The areas that most
lack stands rank by ``lack_score = pickups / (spaces + 1)``: pickups per space, with one extra
space so that an area with no stand at all ranks by its demand instead of dividing by zero.

Candidate sites are the places of recurring ``illegal_stand_formation`` findings: free taxis
already wait there, so demand and drivers' choice agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from geo import h3 as gh3
from geo.crs import WGS84, require_geographic, utm_crs_for_frame
from planning._errors import PlanningInputError

PLANNING_RESOLUTIONS = (8, 9)
"""H3 resolutions of the demand grid: 8 (~0.7 km² cells) or 9 (~0.1 km²)."""
DEFAULT_RESOLUTION = 9
DEFAULT_WALK_M = 400.0
DEFAULT_MIN_DAYS = 3

AREA_COLUMNS = (
    "cell",
    "pickups",
    "lat",
    "lon",
    "stands_nearby",
    "spaces",
    "stand_ids",
    "lack_score",
    "geometry",
)
CANDIDATE_COLUMNS = (
    "place_id",
    "lat",
    "lon",
    "n_findings",
    "n_days",
    "n_vehicles",
    "first_seen",
    "last_seen",
    "pickups_in_cell",
    "nearest_stand_m",
    "geometry",
)
_PICKUP_COLUMNS = ("pickup_lat", "pickup_lon")


def _require(frame: pd.DataFrame, columns: Sequence[str], *, what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"{what}: faltam as colunas {', '.join(missing)}"
        raise PlanningInputError(msg)


def _check_walk(walk_m: float) -> float:
    if not (np.isfinite(walk_m) and walk_m > 0):
        msg = f"'walk_m' era {walk_m!r}; esperado um número > 0 (metros)"
        raise PlanningInputError(msg)
    return float(walk_m)


def pickups_by_cell(trips: pd.DataFrame, *, resolution: int) -> pd.DataFrame:
    """Count pickups per H3 cell.

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips with ``pickup_lat`` and ``pickup_lon`` (WGS84); rows without a valid position are
        not counted (the caller can report ``len(trips) - pickups.sum()``).
    resolution : int
        8 or 9.

    Returns
    -------
    pandas.DataFrame
        ``cell`` (H3 hex string), ``pickups`` (int64), ``lat``, ``lon`` (cell centre), sorted by
        pickups (descending) then cell.

    Raises
    ------
    PlanningInputError
        If a pickup column is missing.
    InvalidResolutionError
        If the resolution is not 8 or 9.
    """
    _require(trips, _PICKUP_COLUMNS, what="viagens")
    res = gh3.check_resolution(
        resolution, low=PLANNING_RESOLUTIONS[0], high=PLANNING_RESOLUTIONS[-1]
    )
    lat = pd.to_numeric(trips["pickup_lat"], errors="coerce").to_numpy(dtype=np.float64)
    lon = pd.to_numeric(trips["pickup_lon"], errors="coerce").to_numpy(dtype=np.float64)
    cells = gh3.latlng_to_cells(lat, lon, resolution=res)
    cells = cells[cells != gh3.NULL_CELL]
    uniq, counts = np.unique(cells, return_counts=True)
    c_lat, c_lon = gh3.cells_to_latlng(uniq)
    out = pd.DataFrame(
        {
            "cell": pd.Series(gh3.cells_to_strings(uniq), dtype=object),
            "pickups": counts.astype(np.int64),
            "lat": c_lat,
            "lon": c_lon,
        }
    )
    return out.sort_values(["pickups", "cell"], ascending=[False, True], ignore_index=True)


def stand_coverage(stands: gpd.GeoDataFrame, *, walk_m: float = DEFAULT_WALK_M) -> gpd.GeoDataFrame:
    """Return each stand's walking catchment: its area buffered by ``walk_m``, in EPSG:4326.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (``stands.layers.read_stands``), geographic CRS.
    walk_m : float
        Walking distance in metres.

    Returns
    -------
    geopandas.GeoDataFrame
        ``stand_id``, ``name``, ``capacity``, geometry (the catchment) in EPSG:4326.
    """
    walk = _check_walk(walk_m)
    cols = [c for c in ("stand_id", "name", "capacity") if c in stands.columns]
    if len(stands) == 0:
        return gpd.GeoDataFrame(stands[cols].copy(), geometry=[], crs=WGS84)
    require_geographic(stands, what="pontos de táxi")
    utm = utm_crs_for_frame(stands)
    buffered = stands.to_crs(utm).geometry.buffer(walk, quad_segs=16).to_crs(WGS84)
    return gpd.GeoDataFrame(stands[cols].copy(), geometry=buffered.to_numpy(), crs=WGS84)


def demand_vs_capacity(
    trips: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    resolution: int = DEFAULT_RESOLUTION,
    walk_m: float = DEFAULT_WALK_M,
    unknown_capacity_spaces: int = 1,
) -> gpd.GeoDataFrame:
    """Set the pickups of each H3 cell against the stand spaces within walking distance.

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips with ``pickup_lat``, ``pickup_lon``.
    stands : geopandas.GeoDataFrame
        Stands frame with ``stand_id`` and ``capacity`` (may be empty).
    resolution : int
        H3 resolution, 8 or 9.
    walk_m : float
        Walking distance from the cell's centre to a stand's area, metres.
    unknown_capacity_spaces : int
        Spaces counted for a stand whose capacity is missing.

    Returns
    -------
    geopandas.GeoDataFrame
        ``AREA_COLUMNS`` in EPSG:4326 (geometry: the cell's hexagon), one row per cell with
        pickups, ranked by ``lack_score`` (descending), then pickups, then cell.

    Raises
    ------
    PlanningInputError
        If a column is missing or ``walk_m``/``unknown_capacity_spaces`` is out of range.
    """
    walk = _check_walk(walk_m)
    if unknown_capacity_spaces < 0:
        msg = f"'unknown_capacity_spaces' era {unknown_capacity_spaces}; esperado >= 0"
        raise PlanningInputError(msg)
    _require(stands, ("stand_id",), what="pontos de táxi")
    cells = pickups_by_cell(trips, resolution=resolution)
    n = len(cells)
    stands_nearby = np.zeros(n, dtype=np.int64)
    spaces = np.zeros(n, dtype=np.int64)
    stand_ids: list[tuple[str, ...]] = [() for _ in range(n)]
    if n and len(stands):
        require_geographic(stands, what="pontos de táxi")
        centres = gpd.GeoDataFrame(
            geometry=shapely.points(cells["lon"].to_numpy(), cells["lat"].to_numpy()), crs=WGS84
        )
        utm = utm_crs_for_frame(stands)
        stands_utm = stands.to_crs(utm)
        capacity = (
            pd.to_numeric(stands["capacity"], errors="coerce")
            if "capacity" in stands.columns
            else pd.Series(np.nan, index=stands.index)
        )
        cap = capacity.fillna(unknown_capacity_spaces).to_numpy(dtype=np.int64)
        tree = shapely.STRtree(stands_utm.geometry.to_numpy())
        pts = centres.to_crs(utm).geometry.to_numpy()
        left, right = tree.query(pts, predicate="dwithin", distance=walk)
        ids = stands["stand_id"].astype(str).to_numpy()
        np.add.at(stands_nearby, left, 1)
        np.add.at(spaces, left, cap[right])
        for i, j in zip(left.tolist(), right.tolist(), strict=True):
            stand_ids[i] = (*stand_ids[i], str(ids[j]))
    out = cells.copy()
    out["stands_nearby"] = stands_nearby
    out["spaces"] = spaces
    out["stand_ids"] = pd.Series([tuple(sorted(s)) for s in stand_ids], dtype=object)
    out["lack_score"] = out["pickups"] / (out["spaces"] + 1.0)
    out = out.sort_values(
        ["lack_score", "pickups", "cell"], ascending=[False, False, True], ignore_index=True
    )
    cell_ids = np.asarray([int(c, 16) for c in out["cell"]], dtype=np.uint64)
    return gpd.GeoDataFrame(out, geometry=gh3.cell_polygons(cell_ids), crs=WGS84)[
        list(AREA_COLUMNS)
    ]


def _details(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def candidate_sites(
    findings: gpd.GeoDataFrame,
    *,
    stands: gpd.GeoDataFrame | None = None,
    areas: pd.DataFrame | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    min_days: int = DEFAULT_MIN_DAYS,
) -> gpd.GeoDataFrame:
    """Return candidate stand sites: places of recurring illegal stand formation.

    Findings of kind ``illegal_stand_formation`` are grouped by place (``details.place_id``, else
    the H3 cell of the area's representative point); a place is a candidate when its distinct
    local days (``details.dates``) reach ``min_days``.

    Parameters
    ----------
    findings : geopandas.GeoDataFrame
        Findings frame (``read_findings_geojson``); other kinds are ignored.
    stands : geopandas.GeoDataFrame, optional
        Stands, for each candidate's distance to the nearest stand.
    areas : pandas.DataFrame, optional
        :func:`demand_vs_capacity` output, for the pickups in the candidate's cell.
    resolution : int
        H3 resolution of ``areas`` (8 or 9).
    min_days : int
        Fewest distinct days of waiting at a place.

    Returns
    -------
    geopandas.GeoDataFrame
        ``CANDIDATE_COLUMNS`` (geometry: Point, EPSG:4326), ranked by days, then vehicles.
    """
    if min_days < 1:
        msg = f"'min_days' era {min_days}; esperado um inteiro >= 1"
        raise PlanningInputError(msg)
    _require(findings, ("kind", "details", "geometry"), what="achados")
    isf = findings[findings["kind"] == "illegal_stand_formation"]
    isf = isf[isf.geometry.notna() & ~isf.geometry.is_empty]
    groups: dict[str, dict[str, Any]] = {}
    if len(isf):
        points = isf.geometry.to_crs(WGS84).representative_point()
        fallback = gh3.cells_to_strings(
            gh3.latlng_to_cells(points.y.to_numpy(), points.x.to_numpy(), resolution=resolution)
        )
        for (_, row), point, cell in zip(isf.iterrows(), points, fallback, strict=True):
            details = _details(row["details"])
            place = str(details.get("place_id") or cell)
            g = groups.setdefault(
                place,
                {"points": [], "dates": set(), "vehicles": set(), "n": 0, "start": [], "end": []},
            )
            g["points"].append(point)
            g["dates"].update(str(d) for d in details.get("dates", []))
            g["vehicles"].update(str(v) for v in details.get("vehicles", []))
            g["n"] += 1
            for key, col in (("start", "started_at"), ("end", "ended_at")):
                if col in row and pd.notna(row[col]):
                    g[key].append(pd.Timestamp(row[col]))
    rows = []
    for place, g in groups.items():
        if len(g["dates"]) < min_days:
            continue
        centre = shapely.MultiPoint(g["points"]).centroid
        rows.append(
            {
                "place_id": place,
                "lat": float(centre.y),
                "lon": float(centre.x),
                "n_findings": g["n"],
                "n_days": len(g["dates"]),
                "n_vehicles": len(g["vehicles"]),
                "first_seen": min(g["start"]).isoformat() if g["start"] else None,
                "last_seen": max(g["end"]).isoformat() if g["end"] else None,
                "geometry": centre,
            }
        )
    out = gpd.GeoDataFrame(
        pd.DataFrame(
            rows,
            columns=[
                c for c in CANDIDATE_COLUMNS if c not in ("pickups_in_cell", "nearest_stand_m")
            ],
        ),
        geometry="geometry",
        crs=WGS84,
    )
    out["pickups_in_cell"] = pd.array([pd.NA] * len(out), dtype="Int64")
    out["nearest_stand_m"] = np.full(len(out), np.nan)
    if len(out) and areas is not None and len(areas):
        cells = gh3.cells_to_strings(
            gh3.latlng_to_cells(out["lat"].to_numpy(), out["lon"].to_numpy(), resolution=resolution)
        )
        lookup = dict(zip(areas["cell"], areas["pickups"], strict=True))
        out["pickups_in_cell"] = pd.array([lookup.get(c, 0) for c in cells], dtype="Int64")
    if len(out) and stands is not None and len(stands):
        utm = utm_crs_for_frame(stands)
        tree = shapely.STRtree(stands.to_crs(utm).geometry.to_numpy())
        pts = out.to_crs(utm).geometry.to_numpy()
        idx = tree.nearest(pts)
        geoms = tree.geometries.take(idx)
        out["nearest_stand_m"] = np.round(shapely.distance(pts, geoms), 1)
    out = out.sort_values(
        ["n_days", "n_vehicles", "place_id"], ascending=[False, False, True], ignore_index=True
    )
    return out[list(CANDIDATE_COLUMNS)]
