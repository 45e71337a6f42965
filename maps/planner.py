"""The planner's map: an H3 heatmap of pickups, stands' walking coverage, candidate sites.

Built from frames only (``planning.demand``); offline like every map (``maps.offline``). Drawn
with the canvas layers of ``maps._layers``: every layer has a popup on click and a legend entry,
the heatmap its colour classes with their ranges of pickups.
"""

from __future__ import annotations

from typing import Any

import folium
import geopandas as gpd
import numpy as np

from maps._layers import layer_spec, render_layers
from maps.offline import base_map
from maps.tiles import OSM_ATTRIBUTION, OSM_TILES

_HEAT = ("#fff5eb", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#8c2d04")
_COVERAGE = "#1f78b4"
_CANDIDATE = "#6a3d9a"
_STAND = "#0b3d91"
_BOUNDARY = "#555555"
_BRAZIL = (-15.8, -47.9)


def _heat_class(count: int, top: int) -> int:
    """Class 0 (no pickups) to 6 of a cell: the smallest k with count ≤ top·(k/6)² (sqrt scale)."""
    steps = len(_HEAT) - 1
    if top <= 0 or count <= 0:
        return 0
    return next(k for k in range(1, steps + 1) if steps * steps * count <= top * k * k)


def _heat_ranges(top: int) -> list[tuple[str, int, int]]:
    """(colour, lowest, highest pickups) of each class a count in 1..top can fall in."""
    steps = len(_HEAT) - 1
    out = []
    for k in range(1, steps + 1):
        low = top * (k - 1) ** 2 // (steps * steps) + 1
        high = top * k * k // (steps * steps)
        if low <= high:
            out.append((_HEAT[k], low, high))
    return out


def _check_wgs84(frame: gpd.GeoDataFrame | None, what: str) -> None:
    if frame is not None and len(frame) and (frame.crs is None or frame.crs.to_epsg() != 4326):
        msg = f"{what} deve estar em EPSG:4326; recebido {frame.crs}"
        raise ValueError(msg)


def planner_map(
    *,
    areas: gpd.GeoDataFrame | None = None,
    coverage: gpd.GeoDataFrame | None = None,
    candidates: gpd.GeoDataFrame | None = None,
    stands: gpd.GeoDataFrame | None = None,
    boundary: gpd.GeoDataFrame | None = None,
    walk_m: float | None = None,
    title: str = "Planejamento: embarques e cobertura dos pontos — Pontual",
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
) -> folium.Map:
    """Map demand against stand coverage, with candidate sites for new stands.

    Parameters
    ----------
    areas
        ``planning.demand.demand_vs_capacity`` output (cell hexagons, EPSG:4326).
    coverage
        ``planning.demand.stand_coverage`` output (walking catchments, EPSG:4326).
    candidates
        ``planning.demand.candidate_sites`` output (points, EPSG:4326).
    stands
        Stands frame (EPSG:4326) with ``stand_id`` and ``name``.
    boundary
        Municipal boundary (EPSG:4326).
    walk_m
        Walking distance of ``coverage``, for its layer name.
    title
        The page's title.
    tiles, attribution
        Tile source; None maps on a plain background.

    Returns
    -------
    folium.Map
        Layers (pt-BR) with a layer control, popups on click and a legend; fitted to the
        stands, coverage, candidates and boundary (the demand cells only when there is nothing
        else).
    """
    frames = {
        "células": areas,
        "cobertura": coverage,
        "candidatos": candidates,
        "pontos": stands,
        "limite": boundary,
    }
    for what, frame in frames.items():
        _check_wgs84(frame, what)
    # Frame the stands, their coverage, candidates and the boundary; stray pickups far away
    # (GPS errors, trips out of town) would otherwise zoom the map out to nothing.
    focus = [f for k, f in frames.items() if k != "células" and f is not None and len(f)]
    present = [f for f in (focus or [areas]) if f is not None and len(f)]
    bounds = None
    if present:
        box = np.array([f.total_bounds for f in present])
        minx, miny = float(box[:, 0].min()), float(box[:, 1].min())
        maxx, maxy = float(box[:, 2].max()), float(box[:, 3].max())
        bounds = [[miny, minx], [maxy, maxx]]
    if bounds:
        centre = ((bounds[0][0] + bounds[1][0]) / 2, (bounds[0][1] + bounds[1][1]) / 2)
        fmap = base_map(location=centre, tiles=tiles, attribution=attribution, title=title)
    else:
        fmap = base_map(
            location=_BRAZIL, zoom_start=4, tiles=tiles, attribution=attribution, title=title
        )
    layers: list[dict[str, Any]] = []
    items: list[list[Any]] = []
    walk = f" a {walk_m:g} m" if walk_m else ""

    if boundary is not None and len(boundary):
        layers.append(
            layer_spec(
                layer_id="boundary",
                label="Limite municipal",
                geometry=boundary.geometry.boundary,
                props={"what": ["Limite municipal"] * len(boundary)},
                style={"color": _BOUNDARY, "weight": 2, "fill": False},
                markers=False,
                popup={"type": "fields", "title": "what", "fields": []},
                z=-3,
            )
        )
        items.append([_BOUNDARY, "Limite municipal", "boundary", "line"])

    if coverage is not None and len(coverage):
        label = f"Cobertura a pé dos pontos{walk}"
        layers.append(
            layer_spec(
                layer_id="coverage",
                label=label,
                geometry=coverage.geometry,
                props={"what": [f"Até{walk} a pé de um ponto de táxi"] * len(coverage)},
                style={"color": _COVERAGE, "weight": 1, "fillColor": _COVERAGE},
                shape_style={"fillOpacity": 0.12},
                markers=False,
                popup={"type": "fields", "title": "what", "fields": []},
                z=-2,
            )
        )
        items.append(["rgba(31, 120, 180, 0.25)", f"Área{walk} a pé de um ponto", "coverage"])

    if areas is not None and len(areas):
        top = int(areas["pickups"].max())
        layers.append(
            layer_spec(
                layer_id="cells",
                label=f"Embarques por célula H3 ({len(areas)})",
                geometry=areas.geometry,
                props={
                    "cell": [str(v) for v in areas["cell"]],
                    "pickups": [int(v) for v in areas["pickups"]],
                    "spaces": [float(v) for v in areas["spaces"]],
                    "stands_nearby": [int(v) for v in areas["stands_nearby"]],
                    "lack_score": [round(float(v), 1) for v in areas["lack_score"]],
                    "colour": [_HEAT[_heat_class(int(c), top)] for c in areas["pickups"]],
                },
                style={"color": "#7f2704", "weight": 0.5},
                shape_style={"fillOpacity": 0.6},
                style_by={"fillColor": "colour"},
                markers=False,
                popup={
                    "type": "fields",
                    "title": "cell",
                    "fields": [
                        ["pickups", "Embarques", "num"],
                        ["spaces", f"Vagas{walk} a pé", "num"],
                        ["stands_nearby", f"Pontos{walk} a pé", "num"],
                        ["lack_score", "Falta de pontos: embarques/(vagas+1)", "num"],
                    ],
                },
                z=-1,
            )
        )
        items.append([None, "Embarques por célula H3", "cells"])
        for colour, low, high in _heat_ranges(top):
            text = f"{low}" if low == high else f"{low} a {high}"
            items.append([colour, text, "cells"])

    if stands is not None and len(stands):
        names = stands["name"] if "name" in stands.columns else stands["stand_id"]
        layers.append(
            layer_spec(
                layer_id="stands",
                label=f"Pontos de táxi ({len(stands)})",
                geometry=stands.geometry,
                props={
                    "stand_id": [str(v) for v in stands["stand_id"]],
                    "name": [
                        str(n) if isinstance(n, str) and n else str(s)
                        for n, s in zip(names, stands["stand_id"], strict=True)
                    ],
                },
                style={"radius": 5, "color": _STAND, "weight": 2, "fillColor": _STAND},
                shape_style={"fillOpacity": 0.7},
                popup={
                    "type": "fields",
                    "title": "name",
                    "fields": [["stand_id", "Ponto nº", "text"]],
                },
            )
        )
        items.append([_STAND, "Ponto de táxi", "stands", "dot"])

    if candidates is not None and len(candidates):
        layers.append(
            layer_spec(
                layer_id="candidates",
                label=f"Locais candidatos ({len(candidates)})",
                geometry=candidates.geometry,
                props={
                    "place_id": [str(v) for v in candidates["place_id"]],
                    "n_days": [int(v) for v in candidates["n_days"]],
                    "n_vehicles": [int(v) for v in candidates["n_vehicles"]],
                },
                style={"radius": 8, "color": _CANDIDATE, "weight": 2, "fillColor": _CANDIDATE},
                popup={
                    "type": "fields",
                    "title_text": "Local candidato a novo ponto",
                    "fields": [
                        ["n_days", "Dias com formação irregular", "num"],
                        ["n_vehicles", "Veículos", "num"],
                    ],
                },
                z=1,
            )
        )
        items.append([_CANDIDATE, "Local candidato a novo ponto", "candidates", "dot"])

    if not layers:
        return fmap
    legend = {"title": "Planejamento", "items": items}
    return render_layers(fmap, layers=layers, timezone="UTC", bounds=bounds, legend=legend)
