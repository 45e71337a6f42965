"""Overview map of stands coloured by a count (boardings, licensed prefixos), with trips.

Drawn with the canvas layers of ``maps._layers``: stands as circles coloured by classes of the
count (the legend gives each class's range), trips as thin lines, popups on click.
"""

from __future__ import annotations

from typing import Any

import folium
import geopandas as gpd
import numpy as np
import pandas as pd

from maps._layers import bounds_of, check_columns, check_wgs84, layer_spec, render_layers
from maps.offline import base_map
from maps.tiles import OSM_ATTRIBUTION, OSM_TILES

_NO_VALUE = "#7f8c8d"
_SCALE = ("#fde0c5", "#facba6", "#f8b58b", "#f59e72", "#f2855d", "#ef6a4c", "#eb4a40")
_TRACK = "#2c7fb8"


def _class(count: int, top: int) -> int:
    """Class of a count: -1 for none, else 1..len(_SCALE)-1 (equal steps up to ``top``)."""
    if count <= 0 or top <= 0:
        return -1
    return -(-count * (len(_SCALE) - 1) // top)  # ceil, in integers


def _ranges(top: int) -> list[tuple[str, int, int]]:
    """(colour, lowest, highest count) of each class a count in 1..top can fall in."""
    steps = len(_SCALE) - 1
    out = []
    for k in range(1, steps + 1):
        low, high = (k - 1) * top // steps + 1, k * top // steps
        if low <= high:
            out.append((_SCALE[k], low, high))
    return out


def stands_trips_map(
    stands: gpd.GeoDataFrame,
    *,
    values: pd.Series | None = None,
    value_label: str = "Embarques",
    tracks: gpd.GeoDataFrame | None = None,
    title: str = "Pontos de táxi — Pontual",
    note: str | None = None,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
) -> folium.Map:
    """Map the stands coloured by a count (boardings, licensed prefixos…), with optional tracks.

    Parameters
    ----------
    stands
        Stands frame (EPSG:4326) with ``stand_id`` and ``name``; rows without geometry are
        not drawn (say why in ``note``).
    values
        Count per ``stand_id`` (index); stands absent from it count 0.
    value_label
        pt-BR name of the count, shown in the legend and the popups.
    tracks
        LineStrings (EPSG:4326), one per trip, with ``vehicle_id`` and ``trip_id``.
    title
        The page's title.
    note
        A line for the legend (e.g. which stands could not be drawn and why).
    tiles, attribution
        Tile source; None maps on a plain background.

    Raises
    ------
    MapInputError
        If a frame is not in EPSG:4326 or lacks a column.
    """
    check_wgs84(stands, what="os pontos")
    check_columns(stands, ("stand_id", "geometry"), what="os pontos")
    drawn = stands.loc[stands.geometry.notna() & ~stands.geometry.is_empty]
    ids = drawn["stand_id"].astype(str)
    counts = (
        values.rename(index=str).reindex(ids).fillna(0).astype(int).to_numpy()
        if values is not None
        else np.zeros(len(drawn), dtype=int)
    )
    top = int(counts.max()) if len(counts) else 0
    classes = [_class(int(c), top) for c in counts]
    names = drawn["name"] if "name" in drawn.columns else drawn["stand_id"]
    layers: list[dict[str, Any]] = []
    items: list[list[Any]] = []
    if tracks is not None and len(tracks):
        check_wgs84(tracks, what="as viagens")
        check_columns(tracks, ("vehicle_id", "trip_id", "geometry"), what="as viagens")
        layers.append(
            layer_spec(
                layer_id="tracks",
                label=f"Viagens ({len(tracks)})",
                geometry=tracks.geometry,
                props={
                    "vehicle_id": [str(v) for v in tracks["vehicle_id"]],
                    "trip_id": [str(v) for v in tracks["trip_id"]],
                },
                style={"color": _TRACK, "weight": 1.5, "opacity": 0.35},
                markers=False,
                popup={
                    "type": "fields",
                    "title": "trip_id",
                    "fields": [["vehicle_id", "Veículo", "text"]],
                },
                z=-1,
            )
        )
        items.append([_TRACK, "Viagem (trajeto GPS de um táxi)", "tracks", "line"])
    layers.append(
        layer_spec(
            layer_id="stands",
            label=f"Pontos de táxi ({len(drawn)})",
            geometry=drawn.geometry,
            props={
                "stand_id": ids.tolist(),
                "name": [
                    str(v) if isinstance(v, str) and v else s
                    for v, s in zip(names, ids, strict=True)
                ],
                "value": [int(c) for c in counts],
                "colour": [_NO_VALUE if k < 0 else _SCALE[k] for k in classes],
            },
            style={"radius": 6, "color": "#333333", "weight": 1, "fillOpacity": 0.9},
            shape_style={"fillOpacity": 0.6},
            style_by={"fillColor": "colour"},
            popup={
                "type": "fields",
                "title": "name",
                "fields": [["stand_id", "Ponto nº", "text"], ["value", value_label, "num"]],
            },
        )
    )
    items.append([None, f"Pontos de táxi, pela cor: {value_label.lower()}", "stands"])
    for colour, low, high in _ranges(top):
        text = f"{low}" if low == high else f"{low} a {high}"
        items.append([colour, text, "stands", "dot"])
    items.append([_NO_VALUE, "nenhum", "stands", "dot"])
    bounds = bounds_of(drawn)
    centre = (
        ((bounds[0][0] + bounds[1][0]) / 2, (bounds[0][1] + bounds[1][1]) / 2)
        if bounds
        else (0.0, 0.0)
    )
    fmap = base_map(location=centre, tiles=tiles, attribution=attribution, title=title)
    legend = {"title": title.split(" — ")[0], "items": items, "note": note}
    return render_layers(fmap, layers=layers, timezone="UTC", bounds=bounds, legend=legend)
