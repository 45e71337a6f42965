"""The citizen map: accessible taxis free now, stands with accessible supply; no personal data.

The rules of the public API (``/api/v1/public/…``, README "Public endpoints"):

- a taxi shows when it is accessible (fleet ``accessible``), its latest fix at ``at`` is at most
  ``recent_s`` old and its meter is ``free``;
- no vehicle id, prefixo, plate or driver reaches the page, and no exact position: each taxi
  is replaced by its H3 cell of resolution :data:`CELL_RESOLUTION` (≈ 120 m across) before
  anything else is computed, then counted in the area (H3 cell of :data:`TAXI_RESOLUTION`,
  ≈ 920 m across) of that cell's centre; an area is shown at its centre as a count with the
  age of its freshest fix rounded down to :data:`AGE_STEP_MIN` minutes, so that two
  successive maps do not show where a taxi picked up or dropped off a passenger;
- stands (public places) are drawn where they are, with the number of such taxis whose
  ≈ 120 m cell overlaps the stand and whose area's centre is within ``nearby_m``: counts that
  depend on the cells only, as in the API.
"""

from __future__ import annotations

from typing import Any

import folium
import geopandas as gpd
import numpy as np
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from geo.h3 import cell_polygons, snap_to_cell_centres
from maps._errors import MapInputError
from maps._layers import bounds_of, check_columns, check_wgs84, layer_spec, render_layers
from maps.offline import base_map
from maps.tiles import OSM_ATTRIBUTION, OSM_TILES

CELL_RESOLUTION = 10
"""H3 resolution the taxis are snapped to first (the public API's grid, ≈ 120 m across)."""
TAXI_RESOLUTION = 8
"""H3 resolution of the areas taxis are counted in (as the API, ≈ 920 m across)."""
AGE_STEP_MIN = 5
"""Ages are rounded down to this many minutes (as the API)."""
POSITION_DECIMALS = 6
"""Decimals of the cell centres drawn (as the API)."""
NEARBY_M = 500.0
"""A taxi whose cell centre is this close to a stand counts in its nearby supply (as the API)."""
RECENT_S = 600.0
"""Default age limit of a taxi's latest fix (the API's ``public_recent_fix_s``)."""
TAXI_COLOUR = "#2166ac"
SUPPLY_COLOUR = "#1a9850"
NO_SUPPLY_COLOUR = "#bdbdbd"
PING_REQUIRED = ("vehicle_id", "timestamp", "lat", "lon", "meter")


def free_accessible_now(
    pings: pd.DataFrame, fleet: pd.DataFrame, *, at: pd.Timestamp, recent_s: float
) -> pd.DataFrame:
    """Latest fix of each accessible taxi, when recent and free at ``at`` (exact positions).

    Returns
    -------
    pandas.DataFrame
        ``lat``, ``lon``, ``age_s`` (no vehicle id), one row per taxi.
    """
    check_columns(pings, PING_REQUIRED, what="as posições")
    check_columns(fleet, ("vehicle_id", "accessible"), what="a frota")
    accessible = fleet.loc[fleet["accessible"].astype("boolean").fillna(False), "vehicle_id"]
    ts = pings["timestamp"]
    window = pings.loc[
        pings["vehicle_id"].astype(str).isin(set(accessible.astype(str)))
        & (ts <= at)
        & (ts >= at - pd.Timedelta(seconds=recent_s))
    ]
    latest = window.sort_values("timestamp", kind="stable").groupby("vehicle_id").tail(1)
    free = latest.loc[latest["meter"].astype(object) == "free"]
    return pd.DataFrame(
        {
            "lat": free["lat"].to_numpy(dtype=float),
            "lon": free["lon"].to_numpy(dtype=float),
            "age_s": (at - free["timestamp"]).dt.total_seconds().to_numpy(dtype=float),
        }
    )


def taxi_cells(taxis: pd.DataFrame, *, resolution: int = CELL_RESOLUTION) -> pd.DataFrame:
    """Replace each taxi's position by its H3 cell: ``cell`` (uint64), ``lat``/``lon`` (centre).

    Parameters
    ----------
    taxis : pandas.DataFrame
        ``lat``, ``lon`` and any other columns (kept).
    resolution : int
        H3 resolution of the grid.
    """
    cells, lat, lon = snap_to_cell_centres(
        taxis["lat"].to_numpy(dtype=float),
        taxis["lon"].to_numpy(dtype=float),
        resolution=resolution,
    )
    return taxis.assign(cell=cells, lat=lat, lon=lon)


def _supply(
    stands: gpd.GeoDataFrame, taxis: pd.DataFrame, areas: pd.DataFrame, *, nearby_m: float
) -> tuple[np.ndarray, np.ndarray]:
    """Taxi cells overlapping each stand, and taxi areas' centres within ``nearby_m`` of it."""
    n = len(stands)
    if taxis.empty or n == 0:
        return np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    points = gpd.GeoSeries(gpd.points_from_xy(areas["lon"], areas["lat"]), crs=4326)
    polygons = gpd.GeoSeries(cell_polygons(taxis["cell"].to_numpy(dtype=np.uint64)), crs=4326)
    inside = polygons.sindex.query(stands.geometry, predicate="intersects")
    utm = stands.estimate_utm_crs()
    near = points.to_crs(utm).sindex.query(
        stands.geometry.to_crs(utm), predicate="dwithin", distance=nearby_m
    )
    return np.bincount(inside[0], minlength=n), np.bincount(near[0], minlength=n)


def citizen_map(
    stands: gpd.GeoDataFrame,
    pings: pd.DataFrame,
    fleet: pd.DataFrame,
    *,
    at: Any = None,
    recent_s: float = RECENT_S,
    nearby_m: float = NEARBY_M,
    note: str | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
    title: str = "Táxis acessíveis livres perto de você — Pontual",
) -> folium.Map:
    """Map the free accessible taxis at ``at`` (coarsened, no ids) and the stands' supply.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (EPSG:4326): ``stand_id``, optional ``name`` and ``capacity``.
    pings : pandas.DataFrame
        Fixes (pings frame): ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``,
        ``meter``.
    fleet : pandas.DataFrame
        Fleet frame: ``vehicle_id``, ``accessible`` (True/False/None; None is not accessible).
    at : str or pandas.Timestamp, optional
        Tz-aware "now"; default the latest fix.
    recent_s : float
        Oldest latest fix that still shows a taxi.
    nearby_m : float
        Radius of a stand's nearby supply.
    note : str, optional
        pt-BR line added to the legend (e.g. the source of the data).
    timezone : str
        Zone of the time shown.
    tiles, attribution
        Tile source; None maps on a plain background.

    Returns
    -------
    folium.Map
        Self-contained map with no vehicle id, plate or exact taxi position.

    Raises
    ------
    MapInputError
        If a frame lacks a column, stands are not in EPSG:4326, or ``at`` is naive.
    """
    check_wgs84(stands, what="os pontos")
    check_columns(stands, ("stand_id", "geometry"), what="os pontos")
    check_columns(pings, PING_REQUIRED, what="as posições")
    if recent_s <= 0 or nearby_m <= 0:
        msg = f"recent_s ({recent_s}) e nearby_m ({nearby_m}) devem ser positivos"
        raise MapInputError(msg)
    if at is None:
        at = pings["timestamp"].max() if len(pings) else pd.Timestamp.now(tz="UTC")
    at = pd.Timestamp(at)
    if at.tzinfo is None:
        msg = f"'at' foi {at!r} sem fuso horário; esperado um instante com fuso"
        raise MapInputError(msg)
    if len(pings) and not isinstance(pings["timestamp"].dtype, pd.DatetimeTZDtype):
        msg = "'timestamp' das posições sem fuso horário; esperados instantes com fuso (UTC)"
        raise MapInputError(msg)
    taxis = taxi_cells(free_accessible_now(pings, fleet, at=at, recent_s=recent_s))
    areas = taxi_cells(taxis[["lat", "lon", "age_s"]], resolution=TAXI_RESOLUTION)
    at_stand, nearby = _supply(stands, taxis, areas, nearby_m=nearby_m)

    minutes = (areas["age_s"] // 60).clip(lower=0).astype(int)
    cells = (
        pd.DataFrame(
            {
                "lat": areas["lat"].round(POSITION_DECIMALS),
                "lon": areas["lon"].round(POSITION_DECIMALS),
                "age_min": minutes - minutes % AGE_STEP_MIN,
            }
        )
        .groupby(["lat", "lon"], as_index=False)
        .agg(n=("age_min", "size"), age_min=("age_min", "min"))
    )
    taxi_layer = layer_spec(
        layer_id="taxis",
        label=f"Táxis acessíveis livres agora ({len(taxis)})",
        geometry=gpd.GeoSeries(gpd.points_from_xy(cells["lon"], cells["lat"]), crs=4326),
        props={
            "titulo": [
                "1 táxi acessível livre" if n == 1 else f"{n} táxis acessíveis livres"
                for n in cells["n"].tolist()
            ],
            "age_min": [
                "há menos de 5 min" if a < AGE_STEP_MIN else f"há cerca de {a} min"
                for a in cells["age_min"].tolist()
            ],
            "precisao": ["área de cerca de 1 km (sem a posição do táxi)"] * len(cells),
        },
        style={
            "radius": 8,
            "color": "#ffffff",
            "weight": 2,
            "fillColor": TAXI_COLOUR,
            "fillOpacity": 0.95,
        },
        popup={
            "type": "fields",
            "title": "titulo",
            "fields": [["age_min", "Visto", "text"], ["precisao", "Posição", "text"]],
        },
    )
    names = stands["name"] if "name" in stands.columns else stands["stand_id"]
    capacity = (
        pd.to_numeric(stands["capacity"], errors="coerce")
        if "capacity" in stands.columns
        else pd.Series(np.nan, index=stands.index)
    )
    layers = []
    for has_supply, layer_id, label, colour in (
        (True, "stands_supply", "Pontos com táxi acessível livre por perto", SUPPLY_COLOUR),
        (False, "stands_other", "Outros pontos de táxi", NO_SUPPLY_COLOUR),
    ):
        mask = (nearby > 0) == has_supply
        sub = stands.loc[mask]
        layers.append(
            layer_spec(
                layer_id=layer_id,
                label=f"{label} ({int(mask.sum())})",
                geometry=sub.geometry,
                props={
                    "name": [str(v) for v in names[mask]],
                    "stand_id": [str(v) for v in sub["stand_id"]],
                    "capacity": [None if pd.isna(v) else int(v) for v in capacity[mask]],
                    "at_stand": at_stand[mask].tolist(),
                    "nearby": nearby[mask].tolist(),
                },
                style={
                    "radius": 6,
                    "color": "#333333",
                    "weight": 1,
                    "fillColor": colour,
                    "fillOpacity": 0.9,
                },
                shape_style={"fillOpacity": 0.5},
                popup={
                    "type": "fields",
                    "title": "name",
                    "fields": [
                        ["stand_id", "Ponto nº", "text"],
                        ["capacity", "Vagas", "num"],
                        ["at_stand", "Táxis acessíveis livres no ponto", "num"],
                        ["nearby", f"Em até {nearby_m:.0f} m", "num"],
                    ],
                },
            )
        )
    layers.append(taxi_layer)
    bounds = bounds_of(stands)
    centre = (
        ((bounds[0][0] + bounds[1][0]) / 2, (bounds[0][1] + bounds[1][1]) / 2)
        if bounds
        else (0.0, 0.0)
    )
    fmap = base_map(location=centre, tiles=tiles, attribution=attribution, title=title)
    local = at.tz_convert(timezone).strftime("%d/%m/%Y %H:%M")
    legend = {
        "title": "Táxis acessíveis",
        "items": [
            [TAXI_COLOUR, "Táxis acessíveis livres na área (≈ 1 km)", "taxis", "dot"],
            [
                SUPPLY_COLOUR,
                f"Ponto com táxi acessível livre em até {nearby_m:.0f} m",
                "stands_supply",
                "dot",
            ],
            [NO_SUPPLY_COLOUR, "Outro ponto de táxi", "stands_other", "dot"],
        ],
        "note": f"Situação às {local}."
        + (f" {note}" if note else "")
        + " Sem dados pessoais: nenhum prefixo, placa ou condutor.",
    }
    return render_layers(fmap, layers=layers, timezone=timezone, bounds=bounds, legend=legend)
