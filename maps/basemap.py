"""The offline basemap: bundled municipal boundaries and road networks, clipped to a box.

The web console's maps draw it thin and grey beneath their data when no tile server is
configured, so a map still shows where it is without the internet. The sources are the files
the repository ships (``data/README.md``): the IBGE boundaries of Porto Alegre, Porto Velho and
Pinto Bandeira, and Porto's district boundary and OSM road network (central Porto only; a
municipality without a bundled network gets its boundary alone).

:func:`bundled_basemap` reads the files once per process; :func:`basemap_features` answers
one box: what crosses it, clipped to it, simplified to the box's scale, coordinates rounded to
about a metre. Small roads are left out of a wide box, every road out of a very wide one, so
the work and the answer stay small at any scale.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from numpy.typing import NDArray

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
IBGE_BOUNDARIES = DATA_DIR / "brazil" / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"
PORTO_BOUNDARY = DATA_DIR / "porto" / "network" / "porto_boundary.geojson"
PORTO_ROADS = DATA_DIR / "porto" / "network" / "porto_roads_libcity.csv"
MAJOR_CLASSES = frozenset(
    {"motorway", "trunk", "primary", "secondary", "tertiary"}
    | {"motorway_link", "trunk_link", "primary_link", "secondary_link", "tertiary_link"}
)
"""OSM classes drawn as main roads (``principal``); the others are ``local``."""
ALL_ROADS_MAX_DEG = 0.08
"""Boxes up to this width or height (degrees, ~8 km) get every road; wider, main roads only."""
MAIN_ROADS_MAX_DEG = 0.6
"""Boxes wider than this get no road at all (the boundary only)."""
MIN_BOX_DEG = 1e-5
"""Smallest width or height of a box (degrees, ≈ 1 m: the coordinates' rounding)."""
PIXELS_PER_BOX = 1000
"""Simplification: a box is drawn on at most this many pixels across."""
ATTRIBUTION_IBGE = "limites: IBGE"
ATTRIBUTION_OSM = "vias: © colaboradores do OpenStreetMap"


class BasemapBoxError(ValueError):
    """A box that is not ``min_lon,min_lat,max_lon,max_lat`` within the limits (pt-BR)."""


@dataclass(frozen=True)
class Basemap:
    """The bundled geometries, in EPSG:4326."""

    area_names: tuple[str, ...]
    areas: NDArray[np.object_]
    """(Multi)polygons of the municipalities and districts."""
    roads: NDArray[np.object_]
    """Road lines, one per undirected street segment."""
    major: NDArray[np.bool_]
    """Whether each road is a main road (:data:`MAJOR_CLASSES`)."""
    tree: shapely.STRtree
    """Index of :attr:`roads`."""


def _ibge_areas(path: Path) -> list[tuple[str, Any]]:
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        (
            str(f["properties"].get("nome") or f["properties"].get("cod_ibge")),
            shapely.from_geojson(json.dumps(f["geometry"])),
        )
        for f in data["features"]
    ]


def _porto_area(path: Path) -> list[tuple[str, Any]]:
    if not path.is_file():
        return []
    geometry = shapely.from_geojson(path.read_text(encoding="utf-8"))
    polygons = [
        g for g in shapely.get_parts(geometry) if g.geom_type in ("Polygon", "MultiPolygon")
    ]
    return [("Distrito do Porto", shapely.union_all(polygons))] if polygons else []


def _porto_roads(path: Path) -> tuple[NDArray[np.object_], NDArray[np.bool_]]:
    if not path.is_file():
        return np.empty(0, dtype=object), np.empty(0, dtype=bool)
    from geo.roads import read_libcity_roads

    roads = read_libcity_roads(path)
    lines = shapely.normalize(roads.geometry.to_numpy())  # a two-way street's two rows alike
    _, first = np.unique(shapely.to_wkb(lines), return_index=True)
    first.sort()
    classes = roads["highway"].astype("string").fillna("") if "highway" in roads else None
    major = (
        classes.isin(MAJOR_CLASSES).to_numpy(dtype=bool)
        if classes is not None
        else np.zeros(len(roads), dtype=bool)
    )
    return lines[first], major[first]


@functools.cache
def bundled_basemap() -> Basemap:
    """Read the bundled boundaries and road networks (once per process)."""
    areas = _ibge_areas(IBGE_BOUNDARIES) + _porto_area(PORTO_BOUNDARY)
    roads, major = _porto_roads(PORTO_ROADS)
    return Basemap(
        area_names=tuple(name for name, _ in areas),
        areas=np.array([g for _, g in areas] or [], dtype=object),
        roads=roads,
        major=major,
        tree=shapely.STRtree(roads),
    )


def parse_box(text: str) -> tuple[float, float, float, float]:
    """Parse ``"min_lon,min_lat,max_lon,max_lat"``.

    Raises
    ------
    BasemapBoxError
        If it is not four numbers in range, in that order, or is smaller than
        :data:`MIN_BOX_DEG` both ways. Any larger size is answered (a world view gets the
        boundaries alone, simplified to its scale).
    """
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        msg = "bbox: use quatro números 'lon_min,lat_min,lon_max,lat_max' (graus, WGS 84)"
        raise BasemapBoxError(msg)
    west, south, east, north = values
    if not (-180 <= west < east <= 180 and -90 <= south < north <= 90):
        msg = "bbox: longitudes entre -180 e 180, latitudes entre -90 e 90, mínimo antes do máximo"
        raise BasemapBoxError(msg)
    if max(east - west, north - south) < MIN_BOX_DEG:
        msg = f"bbox: caixa pequena demais; largura ou altura de ao menos {MIN_BOX_DEG:g} grau"
        raise BasemapBoxError(msg)
    return west, south, east, north


def snap_box(box: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """Widen ``box`` to a grid whose step is a power of two (an eighth of the box's size).

    Nearby views then ask for the same box, answered from the cache.
    """
    west, south, east, north = box
    size = max(east - west, north - south, MIN_BOX_DEG)  # no zero step for a degenerate box
    step = 2.0 ** math.floor(math.log2(size)) / 8
    return (
        max(-180.0, math.floor(west / step) * step),
        max(-90.0, math.floor(south / step) * step),
        min(180.0, math.ceil(east / step) * step),
        min(90.0, math.ceil(north / step) * step),
    )


def _rounded(geometry: Any) -> dict[str, Any]:
    shape: dict[str, Any] = json.loads(shapely.to_geojson(shapely.set_precision(geometry, 1e-5)))
    return shape


def basemap_features(basemap: Basemap, box: tuple[float, float, float, float]) -> dict[str, Any]:
    """Return the GeoJSON FeatureCollection of the basemap inside ``box``.

    Features (``properties.layer``): ``area`` (a municipality's or district's surface,
    ``name``), ``limit`` (its boundary line, ``name``), ``road`` (one MultiLineString per
    ``class``: ``principal`` or ``local``). ``attribution`` names the sources drawn.
    """
    west, south, east, north = box
    size = max(east - west, north - south)
    tolerance = size / PIXELS_PER_BOX
    rect = shapely.box(west, south, east, north)
    features: list[dict[str, Any]] = []
    sources: list[str] = []
    for name, area in zip(basemap.area_names, basemap.areas, strict=True):
        if not shapely.intersects(area, rect):
            continue
        simple = shapely.simplify(area, tolerance)
        surface = shapely.clip_by_rect(simple, west, south, east, north)
        limit = shapely.clip_by_rect(shapely.boundary(simple), west, south, east, north)
        for layer, geometry in (("area", surface), ("limit", limit)):
            if not shapely.is_empty(geometry):
                features.append(
                    {
                        "type": "Feature",
                        "properties": {"layer": layer, "name": name},
                        "geometry": _rounded(geometry),
                    }
                )
        if ATTRIBUTION_IBGE not in sources and name != "Distrito do Porto":
            sources.append(ATTRIBUTION_IBGE)
        if name == "Distrito do Porto" and ATTRIBUTION_OSM not in sources:
            sources.append(ATTRIBUTION_OSM)
    if size <= MAIN_ROADS_MAX_DEG and len(basemap.roads):
        hits = basemap.tree.query(rect)
        if size > ALL_ROADS_MAX_DEG:
            hits = hits[basemap.major[hits]]
        for road_class, wanted in (("local", False), ("principal", True)):
            chosen = hits[basemap.major[hits] == wanted]
            if not len(chosen):
                continue
            merged = shapely.line_merge(shapely.multilinestrings(basemap.roads[chosen]))
            clipped = shapely.clip_by_rect(
                shapely.simplify(merged, tolerance), west, south, east, north
            )
            if shapely.is_empty(clipped):
                continue
            features.append(
                {
                    "type": "Feature",
                    "properties": {"layer": "road", "class": road_class},
                    "geometry": _rounded(clipped),
                }
            )
            if ATTRIBUTION_OSM not in sources:
                sources.append(ATTRIBUTION_OSM)
    return {
        "type": "FeatureCollection",
        "bbox": [west, south, east, north],
        "attribution": " · ".join(sources),
        "features": features,
    }


@functools.lru_cache(maxsize=256)
def basemap_json(box: tuple[float, float, float, float]) -> str:
    """Return :func:`basemap_features` of the bundled basemap as JSON text.

    Cached per box: pass a :func:`snap_box` box.
    """
    return json.dumps(
        basemap_features(bundled_basemap(), box), ensure_ascii=False, separators=(",", ":")
    )
