"""Overview map of stands, boardings and trips (the demo's map, and the base of later maps)."""

from __future__ import annotations

import folium
import geopandas as gpd
import numpy as np
import pandas as pd

from maps.offline import OSM_ATTRIBUTION, OSM_TILES, base_map

_NO_BOARDING = "#7f8c8d"
_SCALE = ("#fde0c5", "#facba6", "#f8b58b", "#f59e72", "#f2855d", "#ef6a4c", "#eb4a40")


def _colour(count: int, top: int) -> str:
    if count <= 0 or top <= 0:
        return _NO_BOARDING
    step = int(np.ceil(count / top * (len(_SCALE) - 1)))
    return _SCALE[min(step, len(_SCALE) - 1)]


def stands_trips_map(
    stands: gpd.GeoDataFrame,
    *,
    values: pd.Series | None = None,
    value_label: str = "Embarques",
    tracks: gpd.GeoDataFrame | None = None,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
) -> folium.Map:
    """Map the stands coloured by a count (boardings, licensed prefixos…), with optional tracks.

    Parameters
    ----------
    stands
        Stands frame (EPSG:4326) with ``stand_id`` and ``name``.
    values
        Count per ``stand_id`` (index); stands absent from it count 0.
    value_label
        pt-BR name of the count, shown in popups.
    tracks
        LineStrings (EPSG:4326), one per trip, with ``vehicle_id`` and ``trip_id``.
    tiles, attribution
        Tile source; None maps on a plain background.
    """
    if stands.crs is None or stands.crs.to_epsg() != 4326:
        msg = f"stands devem estar em EPSG:4326; recebido {stands.crs}"
        raise ValueError(msg)
    counts = (
        values.reindex(stands["stand_id"]).fillna(0).astype(int).to_numpy()
        if values is not None
        else np.zeros(len(stands), dtype=int)
    )
    top = int(counts.max()) if len(counts) else 0
    minx, miny, maxx, maxy = stands.total_bounds if len(stands) else (0, 0, 0, 0)
    fmap = base_map(
        location=((miny + maxy) / 2, (minx + maxx) / 2), tiles=tiles, attribution=attribution
    )

    if tracks is not None and len(tracks):
        layer = folium.FeatureGroup(name=f"Viagens ({len(tracks)})", show=True)
        folium.GeoJson(
            tracks[["vehicle_id", "trip_id", "geometry"]].to_json(),
            style_function=lambda _: {"color": "#2c7fb8", "weight": 1.5, "opacity": 0.35},
            tooltip=folium.GeoJsonTooltip(["vehicle_id", "trip_id"], aliases=["Veículo", "Viagem"]),
        ).add_to(layer)
        layer.add_to(fmap)

    frame = stands[["stand_id", "name", "geometry"]].copy()
    frame["value"] = counts
    frame["colour"] = [_colour(c, top) for c in counts]
    layer = folium.FeatureGroup(name=f"Pontos de táxi ({len(frame)})", show=True)
    folium.GeoJson(
        frame.to_json(),
        style_function=lambda f: {
            "color": "#333333",
            "weight": 1,
            "fillColor": f["properties"]["colour"],
            "fillOpacity": 0.8,
        },
        tooltip=folium.GeoJsonTooltip(["name"], aliases=["Ponto"]),
        popup=folium.GeoJsonPopup(
            ["stand_id", "name", "value"], aliases=["Ponto nº", "Nome", value_label]
        ),
    ).add_to(layer)
    # A marker per stand keeps small stands visible and clickable at city zoom.
    points = frame.copy()
    points["geometry"] = frame.geometry.representative_point()
    points["radius"] = 4 + np.sqrt(counts) * (10 / np.sqrt(top) if top else 0)
    folium.GeoJson(
        points.to_json(),
        marker=folium.CircleMarker(radius=5, weight=1, fill=True),
        style_function=lambda f: {
            "color": "#333333",
            "weight": 1,
            "fillColor": f["properties"]["colour"],
            "fillOpacity": 0.9,
            "radius": f["properties"]["radius"],
        },
        tooltip=folium.GeoJsonTooltip(["name"], aliases=["Ponto"]),
        popup=folium.GeoJsonPopup(
            ["stand_id", "name", "value"], aliases=["Ponto nº", "Nome", value_label]
        ),
    ).add_to(layer)
    layer.add_to(fmap)
    folium.LayerControl(collapsed=False).add_to(fmap)
    if len(stands):
        fmap.fit_bounds([[miny, minx], [maxy, maxx]])
    return fmap
