"""Road networks: reading line layers, a directed graph, snapping and shortest paths.

Reading
    :func:`read_roads` reads a line layer (GeoJSON, GeoPackage, GeoParquet) or an OSM XML
    extract (``.osm``) into the *roads frame*: one row per road line in EPSG:4326 with
    ``oneway`` (bool: the line may only be driven from its first to its last vertex) and
    ``maxspeed_kmh`` (float, NaN when unknown). :func:`read_libcity_roads` reads the LibCity
    export of Porto bundled in ``data/porto/network`` (one row per *directed* segment, so every
    row is one-way; see that folder's provenance).

Graph
    :func:`build_road_graph` turns a roads frame into a :class:`RoadGraph`. Vertices are
    identified by their coordinates rounded to ``node_decimals`` (7: about 1 cm), so lines that
    share a vertex are connected there. A line and its exact reverse (a two-way street exported as
    two one-way rows) become one *link* drivable both ways. Links are split at every vertex they
    share with another link and at their ends: the pieces are the graph's edges, with
    ``nodes = their end vertices``. An edge's weight is its length in metres: the layer's
    ``length_m`` when given (prorated over the pieces), else the sum of great-circle steps.
    Parallel edges keep the shortest.

Snapping and shortest paths
    :func:`shortest_path_lengths` snaps each origin and destination to the nearest point of the
    nearest edge (an STRtree in the network's UTM CRS) and runs Dijkstra
    (:func:`scipy.sparse.csgraph.dijkstra`, batched over the unique nodes where origins enter
    the graph). The snap distances are added to the length, so it is the length of
    ``origin → network → destination``. A snap farther than ``max_snap_m`` means the position is
    outside the network: no length. Paths may start along the origin's edge in either direction
    it can be driven and end the same way on the destination's edge (or run directly along one
    edge when both are on it). With ``with_geometry=True`` the path is returned as a LineString
    (from the predecessors), for evidence.

Measured on the Porto network (5 213 intersections; ``bench/bench_longer_route.py``):
see ``bench/README.md`` or the benchmark's output.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely
import shapely.ops
from numpy.typing import ArrayLike, NDArray

from geo._errors import CRSError, RoadFileError, RoadGraphError, RoadLayerError
from geo.crs import WGS84, haversine_m, utm_crs_for

if TYPE_CHECKING:
    from scipy.sparse import csr_array  # imported where used: runs without roads skip SciPy

ONEWAY = "oneway"
MAXSPEED_KMH = "maxspeed_kmh"
LENGTH_M = "length_m"
ROAD_COLUMNS = (ONEWAY, MAXSPEED_KMH)
"""Columns every roads frame has (besides ``geometry``)."""

DEFAULT_MAX_SNAP_M = 150.0
"""A position farther than this from every road is outside the network."""

DEFAULT_NODE_DECIMALS = 7

DRIVABLE_HIGHWAYS = frozenset(
    {
        "motorway",
        "trunk",
        "primary",
        "secondary",
        "tertiary",
        "motorway_link",
        "trunk_link",
        "primary_link",
        "secondary_link",
        "tertiary_link",
        "unclassified",
        "residential",
        "living_street",
        "road",
        "service",
    }
)
"""OSM ``highway`` values kept from an OSM XML extract (cars may drive them)."""

DEFAULT_SPEEDS_KMH = {
    "motorway": 80.0,
    "trunk": 60.0,
    "primary": 30.0,
    "secondary": 25.0,
    "tertiary": 20.0,
    "motorway_link": 45.0,
    "trunk_link": 35.0,
    "primary_link": 25.0,
    "secondary_link": 20.0,
    "tertiary_link": 20.0,
    "unclassified": 15.0,
    "residential": 15.0,
    "living_street": 10.0,
    "road": 20.0,
    "service": 10.0,
}
"""Typical urban travel speed per OSM ``highway`` class (not the limit: signals and traffic
included), used for travel times where ``maxspeed_kmh`` is unknown. The spread between classes is
what matters for choosing the fastest path; it is close to the median speed of the Porto taxi
fixes per class (motorway 70, trunk 79, primary 25, secondary 17, tertiary 14, residential 11
km/h; ``LIBCITY_HIGHWAY_CODES``)."""

DEFAULT_SPEED_KMH = 20.0
"""Speed of a road with neither ``maxspeed_kmh`` nor a known ``highway`` class."""

LIBCITY_HIGHWAY_CODES = {
    0: "motorway",
    1: "trunk",
    2: "primary",
    3: "secondary",
    4: "tertiary",
    5: "living_street",
    6: "residential",
    7: "motorway_link",
    8: "trunk_link",
    9: "primary_link",
    10: "secondary_link",
    11: "tertiary_link",
    12: "unclassified",
}
"""OSM class of the LibCity Porto ``highway`` codes. 3 and 6 are verified against another export
(``data/porto/PROVENANCE.md`` §4); the others are inferred: the codes follow the OSM road
hierarchy (motorway … tertiary, then the links), which the mean lane count (3.1, 2.5, 1.7, 1.3,
0.6 for codes 0–4) and the median speed of the Porto fixes on them agree with (70, 79, 25, 17,
14 km/h for 0–4; 52 for 7). 5 and 12 (both slow, few lanes) may be swapped."""

_VECTOR_SUFFIXES = {".geojson", ".json", ".gpkg", ".shp", ".fgb"}
_PARQUET_SUFFIXES = {".parquet", ".geoparquet"}
_TRUE = {"yes", "true", "1", "t", "y"}
_REVERSE = {"-1", "reverse"}
_MPH = 1.609344
_AT_NODE_M = 1.0
_CHUNK_BYTES = 64 * 2**20  # distance matrix rows per Dijkstra batch, as bytes


# --- reading -------------------------------------------------------------------------------


def read_roads(path: str | Path, *, layer: str | None = None) -> gpd.GeoDataFrame:
    """Read a road line layer or an OSM XML extract as a roads frame.

    Parameters
    ----------
    path : str or pathlib.Path
        ``.geojson``/``.json``, ``.gpkg``, ``.shp``, ``.fgb`` (via pyogrio), ``.parquet``/
        ``.geoparquet`` (GeoParquet), or ``.osm`` (OSM XML: ways tagged with one of
        :data:`DRIVABLE_HIGHWAYS`). ``.pbf`` is not read: convert it first (see Raises).
    layer : str, optional
        Layer of a multi-layer file (GeoPackage).

    Returns
    -------
    geopandas.GeoDataFrame
        EPSG:4326, one LineString per row (MultiLineStrings exploded), the source's columns plus
        ``oneway`` (bool; a line with ``oneway`` ``-1`` is reversed and made one-way; absent:
        False) and ``maxspeed_kmh`` (float; from ``maxspeed_kmh`` or an OSM-style ``maxspeed``
        text such as ``"50"`` or ``"30 mph"``; NaN when unknown). A ``length_m`` column, if
        present, is kept and used as the edge length by :func:`build_road_graph`.

    Raises
    ------
    RoadFileError
        If the format is not supported (``.pbf``: convert with ``osmium cat roads.osm.pbf -o
        roads.osm`` or to a GeoPackage with ``ogr2ogr``), or the file cannot be parsed.
    RoadLayerError
        If the layer has no line geometry, or geometries that are not lines.
    CRSError
        If the layer has no CRS.
    FileNotFoundError
        If ``path`` does not exist.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".pbf" or path.name.lower().endswith(".osm.pbf"):
        msg = (
            f"{path.name}: arquivos OSM PBF não são lidos diretamente (nenhuma biblioteca PBF "
            "instalada); converta para OSM XML (osmium cat malha.osm.pbf -o malha.osm) ou para "
            "GeoPackage (ogr2ogr malha.gpkg malha.osm.pbf lines)"
        )
        raise RoadFileError(msg)
    if not path.exists():
        msg = f"arquivo de malha viária não encontrado: {path}"
        raise FileNotFoundError(msg)
    if suffix == ".osm":
        return _read_osm_xml(path)
    if suffix in _PARQUET_SUFFIXES:
        try:
            frame = gpd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types; report one
            msg = f"{path.name}: não é um GeoParquet legível ({exc})"
            raise RoadFileError(msg) from exc
    elif suffix in _VECTOR_SUFFIXES:
        try:
            frame = gpd.read_file(path, layer=layer)
        except Exception as exc:  # pyogrio's DataSourceError and friends
            msg = f"{path.name}: não é uma camada vetorial legível ({exc})"
            raise RoadFileError(msg) from exc
    else:
        msg = (
            f"formato de malha viária não suportado: {suffix or path.name!r}; esperado um de "
            ".geojson, .json, .gpkg, .shp, .fgb, .parquet, .geoparquet, .osm"
        )
        raise RoadFileError(msg)
    return roads_frame(frame, what=path.name)


def roads_frame(frame: gpd.GeoDataFrame, *, what: str = "malha viária") -> gpd.GeoDataFrame:
    """Normalise a line GeoDataFrame into a roads frame (see :func:`read_roads`).

    Parameters
    ----------
    frame : geopandas.GeoDataFrame
        Lines with optional ``oneway`` and ``maxspeed_kmh``/``maxspeed`` columns.
    what : str
        Name of the layer for messages (pt-BR).

    Returns
    -------
    geopandas.GeoDataFrame
        A roads frame (copy).

    Raises
    ------
    RoadLayerError
        If there is no line, or geometries that are not lines.
    CRSError
        If the frame has no CRS.
    """
    if frame.crs is None:
        msg = f"{what} sem sistema de referência (CRS); esperado ex. EPSG:4326"
        raise CRSError(msg)
    out = frame.to_crs(WGS84) if not pyproj.CRS(frame.crs).equals(WGS84) else frame.copy()
    geoms = out.geometry
    keep = geoms.notna() & ~geoms.is_empty
    out = out.loc[keep.to_numpy()]
    kinds = set(out.geom_type.unique())
    bad = kinds - {"LineString", "MultiLineString"}
    if bad:
        n_bad = int((~out.geom_type.isin(["LineString", "MultiLineString"])).sum())
        msg = (
            f"{what}: {n_bad} geometria(s) do tipo {sorted(bad)[0]}; "
            "esperadas linhas (LineString/MultiLineString)"
        )
        raise RoadLayerError(msg)
    if out.empty:
        msg = f"{what}: nenhuma linha de via"
        raise RoadLayerError(msg)
    out = out.explode(index_parts=False, ignore_index=True)
    oneway = (
        _oneway_values(out[ONEWAY]) if ONEWAY in out.columns else np.zeros(len(out), dtype=np.int8)
    )
    reverse = oneway < 0
    if reverse.any():
        out.loc[reverse, out.geometry.name] = shapely.reverse(out.geometry.to_numpy()[reverse])
    out[ONEWAY] = oneway != 0
    if MAXSPEED_KMH in out.columns:
        out[MAXSPEED_KMH] = pd.to_numeric(out[MAXSPEED_KMH], errors="coerce").astype("float64")
    elif "maxspeed" in out.columns:
        out[MAXSPEED_KMH] = [_parse_maxspeed(v) for v in out["maxspeed"]]
    else:
        out[MAXSPEED_KMH] = np.nan
    if LENGTH_M in out.columns:
        out[LENGTH_M] = pd.to_numeric(out[LENGTH_M], errors="coerce").astype("float64")
    return gpd.GeoDataFrame(out, geometry=out.geometry.name, crs=WGS84)


def read_libcity_roads(path: str | Path) -> gpd.GeoDataFrame:
    """Read a LibCity road CSV (``geo_id,type,coordinates,highway,lanes,length,maxspeed``).

    Every row is one *directed* segment (a two-way street is two rows, one per direction), so
    every row is ``oneway``. ``coordinates`` is a JSON ``[[lon, lat], ...]``; ``length`` metres.
    ``highway``, ``lanes`` and ``maxspeed`` are integer codes whose meaning is not published
    (``data/porto/PROVENANCE.md`` §4): they are kept as ``highway_code``, ``lanes_code`` and
    ``maxspeed_code``; ``maxspeed_kmh`` is NaN; ``highway`` is the OSM class of the code per
    :data:`LIBCITY_HIGHWAY_CODES` (partly inferred), used for travel-time speeds.

    Parameters
    ----------
    path : str or pathlib.Path
        The CSV (``data/porto/network/porto_roads_libcity.csv``).

    Returns
    -------
    geopandas.GeoDataFrame
        A roads frame with ``road_id`` (the ``geo_id``), ``length_m`` and the codes.

    Raises
    ------
    RoadFileError
        If a required column is missing or a ``coordinates`` cell is not a list of pairs.
    FileNotFoundError
        If ``path`` does not exist.
    """
    path = Path(path)
    raw = pd.read_csv(path, dtype={"coordinates": "str"})
    needed = [c for c in ("geo_id", "coordinates", "length") if c not in raw.columns]
    if needed:
        msg = f"{path.name}: faltam coluna(s) {', '.join(needed)} do formato LibCity"
        raise RoadFileError(msg)
    lines = []
    for i, text in enumerate(raw["coordinates"].tolist()):
        try:
            coords = np.asarray(json.loads(text), dtype=np.float64)
        except (ValueError, TypeError) as exc:
            msg = f"{path.name}: linha {i + 1}: 'coordinates' não é uma lista JSON de pares"
            raise RoadFileError(msg) from exc
        if coords.ndim != 2 or coords.shape[1] != 2 or len(coords) < 2:
            msg = f"{path.name}: linha {i + 1}: 'coordinates' precisa de 2+ pares [lon, lat]"
            raise RoadFileError(msg)
        lines.append(shapely.linestrings(coords))
    frame = pd.DataFrame(
        {
            "road_id": raw["geo_id"].astype("str"),
            ONEWAY: np.ones(len(raw), dtype=bool),
            MAXSPEED_KMH: np.full(len(raw), np.nan),
            LENGTH_M: pd.to_numeric(raw["length"], errors="coerce").astype("float64"),
        }
    )
    if "highway" in raw.columns:
        codes = pd.to_numeric(raw["highway"], errors="coerce")
        frame["highway"] = codes.map(LIBCITY_HIGHWAY_CODES).astype("object")
    for src, dst in (
        ("highway", "highway_code"),
        ("lanes", "lanes_code"),
        ("maxspeed", "maxspeed_code"),
    ):
        if src in raw.columns:
            frame[dst] = pd.to_numeric(raw[src], errors="coerce").astype("Int64")
    return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(lines, crs=WGS84), crs=WGS84)


def _oneway_values(col: pd.Series) -> NDArray[np.int8]:
    """1 for one-way, -1 for one-way against the drawing direction, 0 for two-way/unknown."""
    if col.dtype == bool:
        return col.to_numpy(dtype=bool).astype(np.int8)
    text = col.astype("object").map(lambda v: "" if v is None or v is pd.NA else str(v))
    text = text.str.strip().str.lower()
    out = np.zeros(len(col), dtype=np.int8)
    out[text.isin(_TRUE).to_numpy()] = 1
    out[text.isin(_REVERSE).to_numpy()] = -1
    return out


def _parse_maxspeed(value: Any) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    text = str(value).strip().lower()
    factor = _MPH if text.endswith("mph") else 1.0
    number = text.removesuffix("mph").removesuffix("km/h").strip()
    try:
        speed = float(number.split(";")[0])
    except ValueError:
        return math.nan  # "PT:urban", "signals", ...
    return speed * factor if speed > 0 else math.nan


def _read_osm_xml(path: Path) -> gpd.GeoDataFrame:
    """Ways with a drivable ``highway`` tag of an OSM XML file, one row per way."""
    nodes: dict[str, tuple[float, float]] = {}
    ways: list[dict[str, Any]] = []
    try:
        for _, elem in ET.iterparse(path, events=("end",)):
            if elem.tag == "node":
                lat, lon = elem.get("lat"), elem.get("lon")
                if lat is not None and lon is not None:
                    nodes[elem.get("id", "")] = (float(lon), float(lat))
                elem.clear()
            elif elem.tag == "way":
                tags = {t.get("k", ""): t.get("v", "") for t in elem.iter("tag")}
                if tags.get("highway") in DRIVABLE_HIGHWAYS and tags.get("area") != "yes":
                    refs = [nd.get("ref", "") for nd in elem.iter("nd")]
                    ways.append({"osm_id": elem.get("id", ""), "refs": refs, "tags": tags})
                elem.clear()
    except ET.ParseError as exc:
        msg = f"{path.name}: OSM XML inválido ({exc})"
        raise RoadFileError(msg) from exc
    records = []
    geoms = []
    for way in ways:
        coords = [nodes[r] for r in way["refs"] if r in nodes]
        if len(coords) < 2:
            continue
        tags = way["tags"]
        oneway = tags.get("oneway", "")
        if not oneway and (
            tags.get("junction") in {"roundabout", "circular"} or tags.get("highway") == "motorway"
        ):
            oneway = "yes"  # OSM's implied one-way
        records.append(
            {
                "osm_id": way["osm_id"],
                "highway": tags.get("highway"),
                "name": tags.get("name"),
                ONEWAY: oneway,
                "maxspeed": tags.get("maxspeed"),
            }
        )
        geoms.append(shapely.linestrings(coords))
    if not records:
        msg = f"{path.name}: nenhuma via trafegável (tag highway) no arquivo OSM"
        raise RoadLayerError(msg)
    frame = gpd.GeoDataFrame(
        pd.DataFrame(records), geometry=gpd.GeoSeries(geoms, crs=WGS84), crs=WGS84
    )
    out = roads_frame(frame, what=path.name)
    return out.drop(columns=["maxspeed"])


# --- graph ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RoadGraph:
    """A directed road graph as plain arrays (built by :func:`build_road_graph`).

    ``matrix`` is the CSR adjacency (``n_nodes × n_nodes``, weights in metres), ``time_matrix``
    the same edges weighted by travel time in seconds. Edges are *pieces* of road between
    nodes: ``piece_u``/``piece_v`` (node ids at the drawn start/end), ``piece_length_m``,
    ``piece_time_s``, ``piece_forward``/``piece_backward`` (drivable u→v / v→u),
    ``piece_lonlat`` (LineStrings in EPSG:4326) and ``piece_xy`` (the same in ``crs``, for
    snapping through ``tree``). ``edge_piece``/``edge_forward`` give, for each stored CSR entry,
    its piece and whether it runs along the piece's drawing direction; ``time_edge_*`` the same
    for ``time_matrix`` (of parallel edges, each matrix keeps its cheapest).
    """

    matrix: csr_array
    node_lon: NDArray[np.float64]
    node_lat: NDArray[np.float64]
    piece_u: NDArray[np.int64]
    piece_v: NDArray[np.int64]
    piece_length_m: NDArray[np.float64]
    piece_time_s: NDArray[np.float64]
    time_matrix: csr_array
    piece_forward: NDArray[np.bool_]
    piece_backward: NDArray[np.bool_]
    piece_lonlat: NDArray[np.object_]
    piece_xy: NDArray[np.object_]
    edge_piece: NDArray[np.int64]
    edge_forward: NDArray[np.bool_]
    time_edge_piece: NDArray[np.int64]
    time_edge_forward: NDArray[np.bool_]
    crs: pyproj.CRS
    tree: shapely.STRtree

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.node_lon)

    @property
    def n_edges(self) -> int:
        """Number of directed edges (after keeping the shortest of parallel edges)."""
        return len(self.edge_piece)


def build_road_graph(
    roads: gpd.GeoDataFrame, *, node_decimals: int = DEFAULT_NODE_DECIMALS
) -> RoadGraph:
    """Build the directed graph of a roads frame (see the module docstring).

    Parameters
    ----------
    roads : geopandas.GeoDataFrame
        A roads frame (:func:`read_roads`, :func:`read_libcity_roads`, or any line frame with a
        CRS; ``oneway`` False and geodesic lengths when absent).
    node_decimals : int, default 7
        Decimals of lon/lat that identify a vertex (7 ≈ 1 cm).

    Returns
    -------
    RoadGraph

    Raises
    ------
    RoadLayerError, CRSError
        As :func:`roads_frame`.
    RoadGraphError
        If ``node_decimals`` is not an integer in 3..9, or no edge of positive length remains.
    """
    if isinstance(node_decimals, bool) or not isinstance(node_decimals, int):
        msg = f"'node_decimals' era {node_decimals!r}; esperado um inteiro entre 3 e 9"
        raise RoadGraphError(msg)
    if not 3 <= node_decimals <= 9:
        msg = f"'node_decimals' era {node_decimals}; esperado um inteiro entre 3 e 9"
        raise RoadGraphError(msg)
    frame = roads_frame(roads) if _needs_normalising(roads) else roads
    geoms = frame.geometry.to_numpy()
    oneway = frame[ONEWAY].to_numpy(dtype=bool)
    lengths = (
        frame[LENGTH_M].to_numpy(dtype=np.float64)
        if LENGTH_M in frame.columns
        else np.full(len(frame), np.nan)
    )
    speeds = _speeds_kmh(frame)
    link_geom, fwd, bwd, link_len, link_speed = _links(
        geoms, oneway, lengths, speeds, node_decimals
    )
    pieces = _split_links(link_geom, fwd, bwd, link_len, link_speed, node_decimals=node_decimals)
    return _graph_from_pieces(*pieces)


def _speeds_kmh(frame: gpd.GeoDataFrame) -> NDArray[np.float64]:
    """Speed of each road: ``maxspeed_kmh`` if known, else its class default, else 20 km/h."""
    speed = np.full(len(frame), DEFAULT_SPEED_KMH)
    if "highway" in frame.columns:
        by_class = frame["highway"].map(DEFAULT_SPEEDS_KMH).to_numpy(dtype=np.float64)
        speed = np.where(np.isfinite(by_class), by_class, speed)
    if MAXSPEED_KMH in frame.columns:
        given = frame[MAXSPEED_KMH].to_numpy(dtype=np.float64)
        speed = np.where(np.isfinite(given) & (given > 0), given, speed)
    return speed


def _needs_normalising(roads: gpd.GeoDataFrame) -> bool:
    if roads.crs is None or not pyproj.CRS(roads.crs).equals(WGS84):
        return True
    if ONEWAY not in roads.columns or roads[ONEWAY].dtype != bool:
        return True
    return bool((roads.geom_type != "LineString").any())


def _links(
    geoms: NDArray[np.object_],
    oneway: NDArray[np.bool_],
    lengths: NDArray[np.float64],
    speeds: NDArray[np.float64],
    decimals: int,
) -> tuple[
    NDArray[np.object_],
    NDArray[np.bool_],
    NDArray[np.bool_],
    NDArray[np.float64],
    NDArray[np.float64],
]:
    """Merge each line with its exact reverse: (geometry, forward, backward, length, speed)."""
    index: dict[bytes, int] = {}
    out_geom: list[Any] = []
    fwd: list[bool] = []
    bwd: list[bool] = []
    out_len: list[float] = []
    out_speed: list[float] = []
    scale = 10.0**decimals
    for geom, one, length, speed in zip(
        geoms, oneway.tolist(), lengths.tolist(), speeds.tolist(), strict=True
    ):
        coords = np.rint(shapely.get_coordinates(geom) * scale).astype(np.int64)
        key_f = coords.tobytes()
        key_r = coords[::-1].tobytes()
        drawn = key_f <= key_r
        key = key_f if drawn else key_r
        k = index.get(key)
        if k is None:
            index[key] = len(out_geom)
            out_geom.append(geom if drawn else shapely.reverse(geom))
            fwd.append(drawn or not one)
            bwd.append((not drawn) or not one)
            out_len.append(length)
            out_speed.append(speed)
        else:
            fwd[k] = fwd[k] or drawn or not one
            bwd[k] = bwd[k] or (not drawn) or not one
            if math.isnan(out_len[k]) or (not math.isnan(length) and length < out_len[k]):
                out_len[k] = length
    return (
        np.asarray(out_geom, dtype=object),
        np.asarray(fwd, dtype=bool),
        np.asarray(bwd, dtype=bool),
        np.asarray(out_len, dtype=np.float64),
        np.asarray(out_speed, dtype=np.float64),
    )


def _split_links(
    geoms: NDArray[np.object_],
    fwd: NDArray[np.bool_],
    bwd: NDArray[np.bool_],
    link_len: NDArray[np.float64],
    link_speed: NDArray[np.float64],
    *,
    node_decimals: int,
) -> tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.float64],
    NDArray[np.bool_],
    NDArray[np.bool_],
    NDArray[np.object_],
    NDArray[np.float64],
]:
    """Split links at shared vertices; returns node lon/lat and the pieces (with speeds)."""
    coords, line = shapely.get_coordinates(geoms, return_index=True)
    scale = 10.0**node_decimals
    rounded = np.rint(coords * scale)
    vid, uniq = pd.factorize(
        pd.MultiIndex.from_arrays([rounded[:, 0].astype(np.int64), rounded[:, 1].astype(np.int64)])
    )
    vid = vid.astype(np.int64)
    n = len(coords)
    is_first = np.ones(n, dtype=bool)
    is_first[1:] = line[1:] != line[:-1]
    is_last = np.ones(n, dtype=bool)
    is_last[:-1] = line[1:] != line[:-1]
    occurrences = np.bincount(vid)
    is_node = is_first | is_last | (occurrences[vid] > 1)
    # Great-circle length along each line (cumulative; differences within a line only).
    step = np.zeros(n)
    step[1:] = haversine_m(coords[:-1, 1], coords[:-1, 0], coords[1:, 1], coords[1:, 0])
    step[is_first] = 0.0
    cum = np.cumsum(step)
    node_pos = np.flatnonzero(is_node)
    same_line = line[node_pos[1:]] == line[node_pos[:-1]]
    start = node_pos[:-1][same_line]
    end = node_pos[1:][same_line]
    geo_len = cum[end] - cum[start]
    link = line[start]
    line_first = np.flatnonzero(is_first)
    line_last = np.flatnonzero(is_last)
    link_geo = cum[line_last] - cum[line_first]
    given = link_len[link]
    scale_len = np.where(
        np.isfinite(given) & (link_geo[link] > 0), given / np.maximum(link_geo[link], 1e-9), 1.0
    )
    length = geo_len * scale_len
    keep = (vid[start] != vid[end]) & (geo_len > 0)
    start, end, length, link = start[keep], end[keep], length[keep], link[keep]
    # Piece geometries: vertices start..end inclusive.
    counts = end - start + 1
    piece_of = np.repeat(np.arange(len(start)), counts)
    pos = np.arange(len(piece_of)) - (np.cumsum(counts) - counts)[piece_of] + start[piece_of]
    piece_geom = shapely.linestrings(coords[pos], indices=piece_of)
    # Renumber nodes: only vertices that are piece ends.
    ends = np.concatenate((vid[start], vid[end]))
    node_ids, node_vid = pd.factorize(pd.Index(ends))
    node_ids = node_ids.astype(np.int64)
    u = node_ids[: len(start)]
    v = node_ids[len(start) :]
    node_lon = np.asarray(node_vid.map(lambda i: uniq[i][0]), dtype=np.float64) / scale
    node_lat = np.asarray(node_vid.map(lambda i: uniq[i][1]), dtype=np.float64) / scale
    return (
        node_lon,
        node_lat,
        u,
        v,
        length.astype(np.float64),
        fwd[link],
        bwd[link],
        np.asarray(piece_geom, dtype=object),
        link_speed[link],
    )


def _graph_from_pieces(
    node_lon: NDArray[np.float64],
    node_lat: NDArray[np.float64],
    u: NDArray[np.int64],
    v: NDArray[np.int64],
    length: NDArray[np.float64],
    fwd: NDArray[np.bool_],
    bwd: NDArray[np.bool_],
    geoms: NDArray[np.object_],
    speed_kmh: NDArray[np.float64],
) -> RoadGraph:
    if len(u) == 0:
        msg = "malha viária sem nenhum trecho de comprimento positivo"
        raise RoadGraphError(msg)
    n_nodes = len(node_lon)
    piece_time = length / (speed_kmh / 3.6)
    matrix, edge_piece, edge_forward = _csr(u, v, fwd, bwd, length, n_nodes)
    time_matrix, time_piece, time_forward = _csr(u, v, fwd, bwd, piece_time, n_nodes)
    crs = utm_crs_for(float(np.mean(node_lon)), float(np.mean(node_lat)))
    to_xy = pyproj.Transformer.from_crs(WGS84, crs, always_xy=True)
    xy = shapely.transform(geoms, lambda c: np.column_stack(to_xy.transform(c[:, 0], c[:, 1])))
    return RoadGraph(
        matrix=matrix,
        node_lon=node_lon,
        node_lat=node_lat,
        piece_u=u,
        piece_v=v,
        piece_length_m=length,
        piece_time_s=piece_time,
        time_matrix=time_matrix,
        piece_forward=fwd,
        piece_backward=bwd,
        piece_lonlat=geoms,
        piece_xy=np.asarray(xy, dtype=object),
        edge_piece=edge_piece,
        edge_forward=edge_forward,
        time_edge_piece=time_piece,
        time_edge_forward=time_forward,
        crs=crs,
        tree=shapely.STRtree(xy),
    )


# --- snapping and shortest paths -------------------------------------------------------------


def _csr(
    u: NDArray[np.int64],
    v: NDArray[np.int64],
    fwd: NDArray[np.bool_],
    bwd: NDArray[np.bool_],
    cost: NDArray[np.float64],
    n_nodes: int,
) -> tuple[csr_array, NDArray[np.int64], NDArray[np.bool_]]:
    """CSR adjacency weighted by ``cost`` (cheapest of parallel edges), with piece and direction."""
    from scipy.sparse import csr_array

    pieces = np.arange(len(u), dtype=np.int64)
    src = np.concatenate((u[fwd], v[bwd]))
    dst = np.concatenate((v[fwd], u[bwd]))
    weight = np.concatenate((cost[fwd], cost[bwd]))
    piece = np.concatenate((pieces[fwd], pieces[bwd]))
    forward = np.concatenate((np.ones(int(fwd.sum()), bool), np.zeros(int(bwd.sum()), bool)))
    order = np.lexsort((weight, dst, src))
    src, dst, weight, piece, forward = (
        src[order],
        dst[order],
        weight[order],
        piece[order],
        forward[order],
    )
    first = np.ones(len(src), dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    src, dst, weight, piece, forward = (
        src[first],
        dst[first],
        weight[first],
        piece[first],
        forward[first],
    )
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_nodes), out=indptr[1:])
    # Zero weights would read as "no edge" in some csgraph paths: keep a tiny positive cost.
    matrix = csr_array(
        (np.maximum(weight, 1e-4), dst.astype(np.int32), indptr), shape=(n_nodes, n_nodes)
    )
    return matrix, piece, forward


def snap_to_roads(
    graph: RoadGraph, points: ArrayLike, *, max_snap_m: float = DEFAULT_MAX_SNAP_M
) -> pd.DataFrame:
    """Snap positions to the nearest point of the nearest road piece.

    Parameters
    ----------
    graph : RoadGraph
        The network.
    points : array_like
        ``(n, 2)`` positions as ``[lon, lat]`` (GeoJSON order) in degrees.
    max_snap_m : float, default 150.0
        Positions farther than this from every road are not snapped.

    Returns
    -------
    pandas.DataFrame
        One row per position: ``piece`` (int, -1 if not snapped), ``fraction`` (0..1 along the
        piece's drawing direction), ``snap_m`` (distance to the road; NaN if not snapped).

    Raises
    ------
    RoadGraphError
        If ``points`` is not an ``(n, 2)`` array of finite numbers or ``max_snap_m`` <= 0.
    """
    pts = _lonlat_array(points, "points")
    if not (isinstance(max_snap_m, int | float) and math.isfinite(max_snap_m) and max_snap_m > 0):
        msg = f"'max_snap_m' era {max_snap_m!r}; esperado um número finito > 0 (metros)"
        raise RoadGraphError(msg)
    n = len(pts)
    piece = np.full(n, -1, dtype=np.int64)
    fraction = np.full(n, np.nan)
    snap = np.full(n, np.nan)
    if n:
        to_xy = pyproj.Transformer.from_crs(WGS84, graph.crs, always_xy=True)
        x, y = to_xy.transform(pts[:, 0], pts[:, 1])
        geoms = shapely.points(np.asarray(x), np.asarray(y))
        (inp, hit), dist = graph.tree.query_nearest(
            geoms, max_distance=max_snap_m, return_distance=True, all_matches=False
        )
        piece[inp] = hit
        snap[inp] = dist
        fraction[inp] = shapely.line_locate_point(graph.piece_xy[hit], geoms[inp], normalized=True)
    return pd.DataFrame({"piece": piece, "fraction": fraction, "snap_m": snap})


def shortest_path_lengths(
    graph: RoadGraph,
    origins: ArrayLike,
    destinations: ArrayLike,
    *,
    max_snap_m: float = DEFAULT_MAX_SNAP_M,
    max_length_m: ArrayLike | None = None,
    weight: Literal["length", "time"] = "length",
    with_geometry: bool = False,
) -> pd.DataFrame:
    """Shortest (or fastest) driving path from each origin to its destination on the network.

    Parameters
    ----------
    graph : RoadGraph
        The network (:func:`build_road_graph`).
    origins, destinations : array_like
        ``(n, 2)`` positions as ``[lon, lat]`` (GeoJSON order), paired row by row.
    max_snap_m : float, default 150.0
        A position farther than this from every road is outside the network (no path).
    max_length_m : float or array_like, optional
        With ``weight="length"``: upper bound per pair (or one for all); the search stops there
        and a pair with no path within it gets none (status ``"beyond_max_length"``). Makes
        batches much faster when only short-enough references matter. Ignored for ``"time"``.
    weight : {"length", "time"}, default "length"
        Minimise the length (the shortest path) or the free-flow travel time (the fastest
        path, ``RoadGraph.time_matrix``); ``length_m`` is the length of the chosen path.
    with_geometry : bool, default False
        Also return the path (``origin → snapped point → network → snapped point →
        destination``) as a LineString in EPSG:4326 (walks the predecessors per pair).

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``length_m`` (snap distances + length along the roads; NaN without a
        path), ``network_m`` (along the roads only), ``duration_s`` (free-flow time along the
        roads), ``origin_snap_m``, ``destination_snap_m``, ``status`` (``"ok"``,
        ``"origin_outside"``, ``"destination_outside"``, ``"unreachable"`` or
        ``"beyond_max_length"``), and ``geometry`` (LineString or None) when ``with_geometry``.

    Raises
    ------
    RoadGraphError
        If the arrays are malformed or of different lengths, a bound is not positive, or
        ``weight`` is unknown.
    """
    org = _lonlat_array(origins, "origins")
    dst = _lonlat_array(destinations, "destinations")
    if len(org) != len(dst):
        msg = f"{len(org)} origem(ns) para {len(dst)} destino(s); esperado um destino por origem"
        raise RoadGraphError(msg)
    so = snap_to_roads(graph, org, max_snap_m=max_snap_m)
    sd = snap_to_roads(graph, dst, max_snap_m=max_snap_m)
    return routes_between(
        graph,
        so,
        sd,
        max_length_m=max_length_m,
        weight=weight,
        with_geometry=with_geometry,
        origin_lonlat=org,
        destination_lonlat=dst,
    )


def routes_between(
    graph: RoadGraph,
    origins: pd.DataFrame,
    destinations: pd.DataFrame,
    *,
    max_length_m: ArrayLike | None = None,
    max_duration_s: ArrayLike | None = None,
    weight: Literal["length", "time"] = "length",
    with_geometry: bool = False,
    origin_lonlat: ArrayLike | None = None,
    destination_lonlat: ArrayLike | None = None,
    with_steps: bool = False,
) -> pd.DataFrame:
    """Shortest (or fastest) path between positions already on the network, pair by pair.

    Parameters
    ----------
    graph : RoadGraph
        The network.
    origins, destinations : pandas.DataFrame
        Positions on the network as :func:`snap_to_roads` gives them (``piece``, -1 when off
        the network; ``fraction``; ``snap_m``, added to the length), paired row by row; e.g.
        the positions a map matcher chose, with ``snap_m`` 0.
    max_length_m, weight, with_geometry
        As in :func:`shortest_path_lengths`.
    max_duration_s : float or array_like, optional
        With ``weight="time"``: upper bound of the free-flow time per pair (status
        ``"beyond_max_duration"`` past it).
    origin_lonlat, destination_lonlat : array_like, optional
        ``(n, 2)`` [lon, lat] the drawn path starts and ends at (default: the positions on
        the road).
    with_steps : bool, default False
        Also return each path as ``steps``: a list of ``(piece, from_fraction, to_fraction)``
        (empty without a path), as :func:`path_pieces_sum` and the map matcher use.

    Returns
    -------
    pandas.DataFrame
        As :func:`shortest_path_lengths`.

    Raises
    ------
    RoadGraphError
        If the frames differ in length, a bound is not positive, or ``weight`` is unknown.
    """
    if weight not in ("length", "time"):
        msg = f"'weight' era {weight!r}; esperado 'length' ou 'time'"
        raise RoadGraphError(msg)
    so = origins.reset_index(drop=True)
    sd = destinations.reset_index(drop=True)
    if len(so) != len(sd):
        msg = f"{len(so)} origem(ns) para {len(sd)} destino(s); esperado um destino por origem"
        raise RoadGraphError(msg)
    n = len(so)
    limit = max_length_m if weight == "length" else max_duration_s
    bounded = limit is not None
    bound = _bounds(limit, n, "max_length_m" if weight == "length" else "max_duration_s")
    status = np.full(n, "ok", dtype=object)
    status[sd["piece"].to_numpy() < 0] = "destination_outside"
    status[so["piece"].to_numpy() < 0] = "origin_outside"
    ok = status == "ok"
    snap_total = so["snap_m"].to_numpy() + sd["snap_m"].to_numpy()
    snap_cost = np.nan_to_num(snap_total) if weight == "length" else 0.0
    net_bound = np.where(np.isfinite(bound), bound - snap_cost, np.inf)
    need_paths = with_geometry or with_steps or weight == "time"
    cost, best = _route_costs(
        graph, so, sd, ok, net_bound, time=weight == "time", with_paths=need_paths
    )
    found = np.isfinite(cost)
    beyond = "beyond_max_length" if weight == "length" else "beyond_max_duration"
    status[ok & ~found] = beyond if bounded else "unreachable"
    if need_paths:
        steps = [
            _path_steps(graph, so, sd, i, choice, time=weight == "time") if found[i] else None
            for i, choice in enumerate(best)
        ]
        network_m = np.array(
            [_steps_sum(graph.piece_length_m, st) if st else np.nan for st in steps]
        )
        duration_s = np.array(
            [_steps_sum(graph.piece_time_s, st) if st else np.nan for st in steps]
        )
    else:
        steps = []
        network_m = np.where(found, cost, np.nan)
        duration_s = np.full(n, np.nan)
    out = pd.DataFrame(
        {
            "length_m": network_m + snap_total,
            "network_m": network_m,
            "duration_s": duration_s,
            "origin_snap_m": so["snap_m"].to_numpy(),
            "destination_snap_m": sd["snap_m"].to_numpy(),
            "status": pd.Series(status, dtype="str"),
        }
    )
    if with_geometry:
        org = position_lonlat(graph, so) if origin_lonlat is None else np.asarray(origin_lonlat)
        dst = (
            position_lonlat(graph, sd)
            if destination_lonlat is None
            else np.asarray(destination_lonlat)
        )
        out["geometry"] = pd.Series(
            [_steps_line(graph, org[i], dst[i], st) if st else None for i, st in enumerate(steps)],
            dtype=object,
        )
    if with_steps:
        out["steps"] = pd.Series(
            [st if st else [] for st in steps] if need_paths else [[] for _ in range(n)],
            dtype=object,
        )
    return out


def position_lonlat(graph: RoadGraph, positions: pd.DataFrame) -> NDArray[np.float64]:
    """[lon, lat] of positions on the network (``piece``, ``fraction``); NaN when off it."""
    piece = positions["piece"].to_numpy(dtype=np.int64)
    frac = positions["fraction"].to_numpy(dtype=np.float64)
    out = np.full((len(piece), 2), np.nan)
    on = piece >= 0
    if on.any():
        pts = shapely.line_interpolate_point(graph.piece_xy[piece[on]], frac[on], normalized=True)
        xy = shapely.get_coordinates(pts)
        to_ll = pyproj.Transformer.from_crs(graph.crs, WGS84, always_xy=True)
        lon, lat = to_ll.transform(xy[:, 0], xy[:, 1])
        out[on, 0], out[on, 1] = lon, lat
    return out


def path_line(graph: RoadGraph, steps: list[tuple[int, float, float]]) -> Any:
    """LineString (EPSG:4326) of a path given as ``(piece, from, to)`` fractions; None if empty."""
    if not steps:
        return None
    ends = pd.DataFrame(
        {"piece": [steps[0][0], steps[-1][0]], "fraction": [steps[0][1], steps[-1][2]]}
    )
    lonlat = position_lonlat(graph, ends)
    return _steps_line(graph, lonlat[0], lonlat[1], steps)


def path_pieces_sum(
    graph: RoadGraph, steps: list[tuple[int, float, float]], *, weight: Literal["length", "time"]
) -> float:
    """Length (m) or free-flow time (s) of a path given as ``(piece, from, to)`` fractions."""
    return _steps_sum(graph.piece_time_s if weight == "time" else graph.piece_length_m, steps)


def _lonlat_array(points: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"'{name}' deve ser uma matriz (n, 2) de [lon, lat] numéricos"
        raise RoadGraphError(msg) from exc
    if arr.size == 0:
        return np.zeros((0, 2))
    if arr.ndim != 2 or arr.shape[1] != 2:
        msg = f"'{name}' tem forma {arr.shape}; esperado (n, 2) com [lon, lat]"
        raise RoadGraphError(msg)
    finite = np.isfinite(arr).all()
    if not finite or (np.abs(arr[:, 0]) > 180).any() or (np.abs(arr[:, 1]) > 90).any():
        msg = f"'{name}' tem posições não finitas ou fora de lon [-180, 180] / lat [-90, 90]"
        raise RoadGraphError(msg)
    return arr


def _bounds(limit: ArrayLike | None, n: int, name: str) -> NDArray[np.float64]:
    if limit is None:
        return np.full(n, np.inf)
    bound = np.broadcast_to(np.asarray(limit, dtype=np.float64), (n,)).copy()
    if (np.isnan(bound) | (bound <= 0)).any():
        msg = f"'{name}' deve ser > 0 em todos os pares"
        raise RoadGraphError(msg)
    return bound


def _ends(
    graph: RoadGraph,
    snapped: pd.DataFrame,
    ok: NDArray[np.bool_],
    piece_cost: NDArray[np.float64],
    *,
    leaving: bool,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """(pair, node, cost) of the ways to leave an origin / reach a destination along its piece."""
    pairs = np.flatnonzero(ok)
    p = snapped["piece"].to_numpy()[pairs]
    f = snapped["fraction"].to_numpy()[pairs]
    cost = piece_cost[p]
    fwd = graph.piece_forward[p]
    bwd = graph.piece_backward[p]
    # A position within a metre of a piece's end is at that node, whatever the direction.
    at_u = f * graph.piece_length_m[p] <= _AT_NODE_M
    at_v = (1.0 - f) * graph.piece_length_m[p] <= _AT_NODE_M
    if leaving:  # forward → reach v; backward → reach u
        parts = (
            (fwd | at_v, graph.piece_v[p], (1.0 - f) * cost),
            (bwd | at_u, graph.piece_u[p], f * cost),
        )
    else:  # forward → come from u; backward → come from v
        parts = (
            (fwd | at_u, graph.piece_u[p], f * cost),
            (bwd | at_v, graph.piece_v[p], (1.0 - f) * cost),
        )
    pair_out = np.concatenate([pairs[m] for m, _, _ in parts])
    node_out = np.concatenate([node[m] for m, node, _ in parts])
    cost_out = np.concatenate([c[m] for m, _, c in parts])
    return pair_out, node_out, cost_out


_Choice = tuple[int, int, "NDArray[np.int32] | None"]


def _route_costs(
    graph: RoadGraph,
    so: pd.DataFrame,
    sd: pd.DataFrame,
    ok: NDArray[np.bool_],
    bound: NDArray[np.float64],
    *,
    time: bool,
    with_paths: bool,
) -> tuple[NDArray[np.float64], list[_Choice | None]]:
    """Least cost per pair; with paths also the best (exit, entry, predecessor row).

    ``(-1, -1, None)`` marks a path along the single piece both ends are on.
    """
    from scipy.sparse.csgraph import dijkstra

    piece_cost = graph.piece_time_s if time else graph.piece_length_m
    matrix = graph.time_matrix if time else graph.matrix
    n = len(so)
    best_cost = np.full(n, np.inf)
    best: list[_Choice | None] = [None] * n
    po, pd_ = so["piece"].to_numpy(), sd["piece"].to_numpy()
    fo, fd = so["fraction"].to_numpy(), sd["fraction"].to_numpy()
    same = ok & (po == pd_)
    if same.any():
        idx = np.flatnonzero(same)
        cost = piece_cost[po[idx]]
        along = np.where(
            graph.piece_forward[po[idx]] & (fd[idx] >= fo[idx]), (fd[idx] - fo[idx]) * cost, np.inf
        )
        back = np.where(
            graph.piece_backward[po[idx]] & (fo[idx] >= fd[idx]),
            (fo[idx] - fd[idx]) * cost,
            np.inf,
        )
        direct = np.minimum(along, back)
        best_cost[idx] = direct
        for i in idx[np.isfinite(direct)]:
            best[int(i)] = (-1, -1, None)
    e_pair, e_node, e_cost = _ends(graph, so, ok, piece_cost, leaving=True)
    i_pair, i_node, i_cost = _ends(graph, sd, ok, piece_cost, leaving=False)
    if len(e_pair) == 0 or len(i_pair) == 0:
        return best_cost, best
    combos = pd.DataFrame({"pair": e_pair, "a": e_node, "ca": e_cost}).merge(
        pd.DataFrame({"pair": i_pair, "b": i_node, "cb": i_cost}), on="pair"
    )
    c_pair = combos["pair"].to_numpy(dtype=np.int64)
    c_a = combos["a"].to_numpy(dtype=np.int64)
    c_b = combos["b"].to_numpy(dtype=np.int64)
    c_fixed = combos["ca"].to_numpy() + combos["cb"].to_numpy()
    c_limit = bound[c_pair] - combos["ca"].to_numpy()
    # Sources sorted by their search radius, so each batch runs with a tight Dijkstra limit.
    sources = pd.DataFrame({"a": c_a, "r": c_limit}).groupby("a")["r"].max()
    sources = sources.sort_values(kind="stable")
    rows_per_chunk = max(1, _CHUNK_BYTES // ((12 if with_paths else 8) * max(graph.n_nodes, 1)))
    src_nodes = sources.index.to_numpy(dtype=np.int64)
    src_limit = sources.to_numpy(dtype=np.float64)
    row_of = np.full(graph.n_nodes, -1, dtype=np.int64)
    for lo in range(0, len(src_nodes), rows_per_chunk):
        chunk = src_nodes[lo : lo + rows_per_chunk]
        limit = float(src_limit[lo : lo + rows_per_chunk].max())
        if limit <= 0:
            continue
        if with_paths:
            dist, pred = dijkstra(
                matrix, directed=True, indices=chunk, return_predecessors=True, limit=limit
            )
        else:
            dist = dijkstra(matrix, directed=True, indices=chunk, limit=limit)
            pred = None
        row_of[chunk] = np.arange(len(chunk))
        sel = np.flatnonzero(np.isin(c_a, chunk))
        total = c_fixed[sel] + dist[row_of[c_a[sel]], c_b[sel]]
        total = np.where(total <= bound[c_pair[sel]] + 1e-9, total, np.inf)
        if pred is not None:
            for k, t in zip(sel.tolist(), total.tolist(), strict=True):
                p = int(c_pair[k])
                if t < best_cost[p]:
                    best_cost[p] = t
                    best[p] = (int(c_a[k]), int(c_b[k]), pred[row_of[c_a[k]]].copy())
        else:
            np.minimum.at(best_cost, c_pair[sel], total)
        row_of[chunk] = -1
    return best_cost, best


def _piece_between(graph: RoadGraph, a: int, b: int, *, time: bool) -> tuple[int, bool]:
    matrix = graph.time_matrix if time else graph.matrix
    start, stop = matrix.indptr[a], matrix.indptr[a + 1]
    k = start + int(np.searchsorted(matrix.indices[start:stop], b))
    if time:
        return int(graph.time_edge_piece[k]), bool(graph.time_edge_forward[k])
    return int(graph.edge_piece[k]), bool(graph.edge_forward[k])


_Step = tuple[int, float, float]  # piece, from fraction, to fraction (drawing direction 0→1)


def _path_steps(
    graph: RoadGraph,
    so: pd.DataFrame,
    sd: pd.DataFrame,
    i: int,
    choice: _Choice | None,
    *,
    time: bool,
) -> list[_Step]:
    """Return the pieces of pair ``i``'s path with the fractions driven from and to."""
    if choice is None:
        return []
    po, fo = int(so["piece"].to_numpy()[i]), float(so["fraction"].to_numpy()[i])
    pd_, fd = int(sd["piece"].to_numpy()[i]), float(sd["fraction"].to_numpy()[i])
    a, b, pred = choice
    if a < 0:
        return [(po, fo, fd)]
    exit_fwd = int(graph.piece_v[po]) == a
    steps: list[_Step] = [(po, fo, 1.0 if exit_fwd else 0.0)]
    if pred is None:
        msg = "caminho sem predecessores"
        raise RoadGraphError(msg)
    nodes = [b]
    while nodes[-1] != a:
        nodes.append(int(pred[nodes[-1]]))
    nodes.reverse()
    for x, y in zip(nodes[:-1], nodes[1:], strict=True):
        piece, forward = _piece_between(graph, x, y, time=time)
        steps.append((piece, 0.0, 1.0) if forward else (piece, 1.0, 0.0))
    entry_fwd = int(graph.piece_u[pd_]) == b
    steps.append((pd_, 0.0 if entry_fwd else 1.0, fd))
    return steps


def _steps_sum(piece_cost: NDArray[np.float64], steps: list[_Step]) -> float:
    return float(sum(abs(f1 - f0) * piece_cost[p] for p, f0, f1 in steps))


def _steps_line(
    graph: RoadGraph,
    origin: NDArray[np.float64],
    destination: NDArray[np.float64],
    steps: list[_Step],
) -> Any:
    to_ll = pyproj.Transformer.from_crs(graph.crs, WGS84, always_xy=True)
    parts: list[NDArray[np.float64]] = [origin[None, :]]
    for piece, f0, f1 in steps:
        if (f0, f1) in ((0.0, 1.0), (1.0, 0.0)):
            coords = shapely.get_coordinates(graph.piece_lonlat[piece])
            parts.append(coords if f1 > f0 else coords[::-1])
        elif f0 != f1:
            parts.append(_sub_lonlat(graph, to_ll, piece, f0, f1))
    parts.append(destination[None, :])
    coords = np.concatenate(parts)
    keep = np.ones(len(coords), dtype=bool)
    keep[1:] = np.any(np.diff(coords, axis=0) != 0, axis=1)
    coords = coords[keep]
    return shapely.linestrings(coords) if len(coords) >= 2 else None


def _sub_lonlat(
    graph: RoadGraph, to_ll: pyproj.Transformer, piece: int, f0: float, f1: float
) -> NDArray[np.float64]:
    """Coordinates of a piece from fraction ``f0`` to ``f1`` (reversed when ``f1 < f0``)."""
    lo, hi = min(f0, f1), max(f0, f1)
    sub = shapely.ops.substring(graph.piece_xy[piece], lo, hi, normalized=True)
    xy = shapely.get_coordinates(sub)
    lon, lat = to_ll.transform(xy[:, 0], xy[:, 1])
    coords = np.column_stack((np.asarray(lon), np.asarray(lat)))
    return coords if f1 >= f0 else coords[::-1]
