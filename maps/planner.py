"""The planner's map: an H3 heatmap of pickups, stands' walking coverage, candidate sites.

Built from frames only (``planning.demand``); offline like every map (``maps.offline``).
"""

from __future__ import annotations

import folium
import geopandas as gpd
import numpy as np

from maps.offline import OSM_ATTRIBUTION, OSM_TILES, base_map

_HEAT = ("#fff5eb", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#8c2d04")
_COVERAGE = "#1f78b4"
_CANDIDATE = "#6a3d9a"
_BRAZIL = (-15.8, -47.9)


def _heat(count: int, top: int) -> str:
    if top <= 0 or count <= 0:
        return _HEAT[0]
    step = int(np.ceil(np.sqrt(count / top) * (len(_HEAT) - 1)))
    return _HEAT[min(step, len(_HEAT) - 1)]


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
    tiles, attribution
        Tile source; None maps on a plain background.

    Returns
    -------
    folium.Map
        Layers (pt-BR) with a layer control; fitted to the stands, coverage, candidates and
        boundary (the demand cells only when there is nothing else).
    """
    layers = {
        "células": areas,
        "cobertura": coverage,
        "candidatos": candidates,
        "pontos": stands,
        "limite": boundary,
    }
    for what, frame in layers.items():
        _check_wgs84(frame, what)
    present = [f for f in layers.values() if f is not None and len(f)]
    # Frame the stands, their coverage, candidates and the boundary; stray pickups far away
    # (GPS errors, trips out of town) would otherwise zoom the map out to nothing.
    focus = [f for k, f in layers.items() if k != "células" and f is not None and len(f)]
    if present:
        bounds = np.array([f.total_bounds for f in (focus or present)])
        minx, miny = bounds[:, 0].min(), bounds[:, 1].min()
        maxx, maxy = bounds[:, 2].max(), bounds[:, 3].max()
        fmap = base_map(
            location=((miny + maxy) / 2, (minx + maxx) / 2), tiles=tiles, attribution=attribution
        )
    else:
        fmap = base_map(location=_BRAZIL, zoom_start=4, tiles=tiles, attribution=attribution)

    if boundary is not None and len(boundary):
        layer = folium.FeatureGroup(name="Limite municipal", show=True)
        folium.GeoJson(
            boundary[["geometry"]].to_json(),
            style_function=lambda _: {"color": "#555555", "weight": 2, "fill": False},
        ).add_to(layer)
        layer.add_to(fmap)

    if coverage is not None and len(coverage):
        label = f" a {walk_m:g} m" if walk_m else ""
        layer = folium.FeatureGroup(name=f"Cobertura a pé dos pontos{label}", show=True)
        folium.GeoJson(
            coverage[["geometry"]].to_json(),
            style_function=lambda _: {
                "color": _COVERAGE,
                "weight": 1,
                "fillColor": _COVERAGE,
                "fillOpacity": 0.12,
            },
        ).add_to(layer)
        layer.add_to(fmap)

    if areas is not None and len(areas):
        top = int(areas["pickups"].max())
        frame = areas[["cell", "pickups", "spaces", "stands_nearby", "geometry"]].copy()
        frame["lack_score"] = areas["lack_score"].round(1)
        frame["colour"] = [_heat(int(c), top) for c in frame["pickups"]]
        layer = folium.FeatureGroup(name=f"Embarques por célula H3 ({len(frame)})", show=True)
        folium.GeoJson(
            frame.to_json(),
            style_function=lambda f: {
                "color": "#7f2704",
                "weight": 0.5,
                "fillColor": f["properties"]["colour"],
                "fillOpacity": 0.6,
            },
            tooltip=folium.GeoJsonTooltip(
                ["pickups", "spaces", "lack_score"],
                aliases=["Embarques", "Vagas a pé", "Embarques/(vagas+1)"],
            ),
        ).add_to(layer)
        layer.add_to(fmap)

    if stands is not None and len(stands):
        cols = [c for c in ("stand_id", "name") if c in stands.columns]
        frame = stands[[*cols, "geometry"]].copy()
        frame["name"] = frame["name"].fillna("") if "name" in frame.columns else ""
        layer = folium.FeatureGroup(name=f"Pontos de táxi ({len(frame)})", show=True)
        folium.GeoJson(
            frame[["stand_id", "name", "geometry"]].to_json(),
            style_function=lambda _: {
                "color": "#0b3d91",
                "weight": 2,
                "fillColor": "#0b3d91",
                "fillOpacity": 0.7,
            },
            tooltip=folium.GeoJsonTooltip(["stand_id", "name"], aliases=["Ponto nº", "Nome"]),
        ).add_to(layer)
        layer.add_to(fmap)

    if candidates is not None and len(candidates):
        frame = candidates[["place_id", "n_days", "n_vehicles", "geometry"]].copy()
        layer = folium.FeatureGroup(name=f"Locais candidatos ({len(frame)})", show=True)
        folium.GeoJson(
            frame.to_json(),
            marker=folium.CircleMarker(radius=8, weight=2, fill=True),
            style_function=lambda _: {
                "color": _CANDIDATE,
                "fillColor": _CANDIDATE,
                "fillOpacity": 0.8,
            },
            tooltip=folium.GeoJsonTooltip(
                ["n_days", "n_vehicles"], aliases=["Dias com formação", "Veículos"]
            ),
        ).add_to(layer)
        layer.add_to(fmap)

    folium.LayerControl(collapsed=False).add_to(fmap)
    if present:
        fmap.fit_bounds([[miny, minx], [maxy, maxx]])
    return fmap
