"""Road networks: readers, graph building, snapping and shortest/fastest paths."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from geo._errors import CRSError, RoadFileError, RoadGraphError, RoadLayerError
from geo.crs import haversine_m
from geo.roads import (
    build_road_graph,
    read_libcity_roads,
    read_roads,
    shortest_path_lengths,
    snap_to_roads,
)

ROADS_CSV = (
    Path(__file__).resolve().parents[2] / "data" / "porto" / "network" / "porto_roads_libcity.csv"
)
LON0, LAT0 = -8.60, 41.15
DEG_PER_M = 1 / 111_195.0  # latitude degrees per metre (sphere)


def _pt(north_m: float, east_m: float) -> tuple[float, float]:
    """(lon, lat) of a point north/east of (LON0, LAT0)."""
    return (
        LON0 + east_m * DEG_PER_M / np.cos(np.radians(LAT0)),
        LAT0 + north_m * DEG_PER_M,
    )


def _frame(lines, oneway, **cols) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"oneway": oneway, **cols},
        geometry=[shapely.LineString([_pt(*p) for p in line]) for line in lines],
        crs=4326,
    )


# A square block 1 km a side: west side two-way, the rest one-way clockwise (north, east, south).
BLOCK = [
    [(0, 0), (1000, 0)],  # west side, drawn north
    [(1000, 0), (1000, 1000)],  # north side, drawn east
    [(1000, 1000), (0, 1000)],  # east side, drawn south
    [(0, 1000), (0, 0)],  # south side, drawn west
]


class TestReadRoads:
    def test_geojson_with_oneway_and_maxspeed(self, tmp_path):
        """A GeoJSON line layer keeps oneway (yes/-1/no) and maxspeed text as km/h."""
        frame = _frame(
            [[(0, 0), (0, 100)], [(0, 100), (0, 200)], [(0, 200), (0, 300)]],
            ["yes", "-1", "no"],
            maxspeed=["50", "30 mph", "PT:urban"],
        )
        path = tmp_path / "roads.geojson"
        frame.to_file(path, driver="GeoJSON")
        roads = read_roads(path)
        assert roads["oneway"].tolist() == [True, True, False]
        assert roads["maxspeed_kmh"].iloc[0] == 50.0
        assert roads["maxspeed_kmh"].iloc[1] == pytest.approx(48.28, abs=0.01)
        assert np.isnan(roads["maxspeed_kmh"].iloc[2])
        # oneway=-1 is reversed so that the drawing direction is the driving direction
        start = shapely.get_coordinates(roads.geometry.iloc[1])[0]
        assert tuple(start) == pytest.approx(_pt(0, 200))

    def test_geoparquet_and_gpkg(self, tmp_path):
        """GeoParquet and GeoPackage read the same rows."""
        frame = _frame(BLOCK, [False, True, True, True])
        frame.to_parquet(tmp_path / "r.parquet")
        frame.to_file(tmp_path / "r.gpkg", driver="GPKG")
        for name in ("r.parquet", "r.gpkg"):
            roads = read_roads(tmp_path / name)
            assert roads["oneway"].tolist() == [False, True, True, True]
            assert roads.crs.to_epsg() == 4326

    def test_osm_xml(self, tmp_path):
        """OSM XML ways with a drivable highway tag, implied one-way roundabouts, no footways."""
        nodes = "".join(
            f'<node id="{i}" lat="{LAT0 + i * 0.001}" lon="{LON0}"/>' for i in range(1, 5)
        )
        xml = (
            f'<osm version="0.6">{nodes}'
            '<way id="10"><nd ref="1"/><nd ref="2"/><tag k="highway" v="residential"/>'
            '<tag k="maxspeed" v="30"/></way>'
            '<way id="11"><nd ref="2"/><nd ref="3"/><tag k="highway" v="primary"/>'
            '<tag k="junction" v="roundabout"/></way>'
            '<way id="12"><nd ref="3"/><nd ref="4"/><tag k="highway" v="footway"/></way>'
            "</osm>"
        )
        path = tmp_path / "x.osm"
        path.write_text(xml)
        roads = read_roads(path)
        assert roads["osm_id"].tolist() == ["10", "11"]
        assert roads["oneway"].tolist() == [False, True]
        assert roads["maxspeed_kmh"].iloc[0] == 30.0

    @pytest.mark.parametrize(
        ("name", "error", "match"),
        [
            ("roads.osm.pbf", RoadFileError, "converta"),
            ("roads.csv", RoadFileError, "não suportado"),
        ],
    )
    def test_unsupported(self, tmp_path, name, error, match):
        """PBF asks to convert; unknown extensions are refused."""
        path = tmp_path / name
        path.write_bytes(b"x")
        with pytest.raises(error, match=match):
            read_roads(path)

    def test_points_are_not_roads(self, tmp_path):
        """A point layer is not a road layer."""
        path = tmp_path / "p.geojson"
        gpd.GeoDataFrame(geometry=[shapely.Point(_pt(0, 0))], crs=4326).to_file(path)
        with pytest.raises(RoadLayerError, match="Point"):
            read_roads(path)

    def test_no_crs(self):
        """A frame without CRS cannot be built into a graph."""
        frame = _frame(BLOCK, [False] * 4).set_crs(None, allow_override=True)
        with pytest.raises(CRSError, match="CRS"):
            build_road_graph(frame)


class TestReadLibcityRoads:
    def test_porto_network(self):
        """The bundled Porto network: 11 095 directed rows, all one-way, 930.5 km in total."""
        roads = read_libcity_roads(ROADS_CSV)
        assert len(roads) == 11095
        assert roads["oneway"].all()
        assert roads["length_m"].sum() / 1000 == pytest.approx(930.5, abs=0.1)
        assert roads.loc[roads["highway_code"] == 6, "highway"].iloc[0] == "residential"

    def test_bad_coordinates(self, tmp_path):
        """A coordinates cell that is not a JSON list of pairs names its row."""
        path = tmp_path / "r.csv"
        path.write_text('geo_id,coordinates,length\n0,"[[1, 2]]",5\n')
        with pytest.raises(RoadFileError, match="linha 1"):
            read_libcity_roads(path)


class TestBuildRoadGraph:
    def test_porto_nodes_and_two_way_merge(self):
        """Porto: 5 213 intersections; twin rows of two-way streets become one two-way piece."""
        graph = build_road_graph(read_libcity_roads(ROADS_CSV))
        assert graph.n_nodes == 5213
        both = graph.piece_forward & graph.piece_backward
        assert both.sum() > 3000
        assert graph.n_edges == 10928  # 11 095 rows less the parallel ones collapsed
        assert graph.time_matrix.nnz == graph.matrix.nnz == graph.n_edges

    def test_lines_split_at_shared_vertices(self):
        """Two lines crossing at a shared vertex are connected there (4 pieces, 5 nodes)."""
        frame = _frame([[(0, -500), (0, 0), (0, 500)], [(-500, 0), (0, 0), (500, 0)]], [False] * 2)
        graph = build_road_graph(frame)
        assert graph.n_nodes == 5 and len(graph.piece_u) == 4

    @pytest.mark.parametrize("decimals", [2, 10, 7.0])
    def test_bad_decimals(self, decimals):
        """node_decimals must be an integer in 3..9."""
        with pytest.raises(RoadGraphError, match="node_decimals"):
            build_road_graph(_frame(BLOCK, [False] * 4), node_decimals=decimals)


class TestShortestPathLengths:
    @pytest.fixture(scope="class")
    def block(self):
        return build_road_graph(_frame(BLOCK, [False, True, True, True]))

    def test_one_way_block(self, block):
        """North along the two-way side is 1 km; back south must go round the block (3 km)."""
        a, b = _pt(0, 0), _pt(1000, 0)
        out = shortest_path_lengths(block, [a, b], [b, a])
        assert out["status"].tolist() == ["ok", "ok"]
        assert out["length_m"].tolist() == pytest.approx([1000, 1000], rel=0.01)

    def test_one_way_forces_detour(self, block):
        """From the south side's middle going east is against the one-way: 2.5 km round."""
        a, b = _pt(0, 500), _pt(0, 900)
        out = shortest_path_lengths(block, [a], [b])
        # south side runs west: from 500 east go west to the corner, north, east, south: 3.6 km
        assert out["length_m"].iloc[0] == pytest.approx(500 + 1000 + 1000 + 1000 + 100, rel=0.01)

    def test_snap_distance_added_and_outside(self, block):
        """Snap legs count; a point 300 m off the roads is outside the network."""
        out = shortest_path_lengths(
            block, [_pt(-50, 0), _pt(-300, 0)], [_pt(1000, 40), _pt(1000, 0)]
        )
        assert out["length_m"].iloc[0] == pytest.approx(50 + 1000 + 40, rel=0.01)
        assert out["status"].iloc[1] == "origin_outside" and np.isnan(out["length_m"].iloc[1])

    def test_same_piece_direct(self, block):
        """Both ends on the two-way side: the path runs along it."""
        out = shortest_path_lengths(block, [_pt(800, 0)], [_pt(200, 0)])
        assert out["length_m"].iloc[0] == pytest.approx(600, rel=0.01)

    def test_geometry_matches_length(self, block):
        """The returned path's geodesic length equals the reported length."""
        out = shortest_path_lengths(block, [_pt(0, 500)], [_pt(0, 900)], with_geometry=True)
        coords = shapely.get_coordinates(out["geometry"].iloc[0])
        geodesic = haversine_m(coords[:-1, 1], coords[:-1, 0], coords[1:, 1], coords[1:, 0]).sum()
        assert geodesic == pytest.approx(out["length_m"].iloc[0], rel=0.005)

    def test_bound_stops_the_search(self, block):
        """A bound below the path gives no length and says why."""
        out = shortest_path_lengths(block, [_pt(0, 500)], [_pt(0, 900)], max_length_m=2000)
        assert out["status"].iloc[0] == "beyond_max_length"

    def test_fastest_prefers_the_fast_road(self):
        """A motorway twice as long but 4x faster wins on time; its length is reported."""
        frame = _frame(
            [[(0, 0), (0, 1000)], [(0, 0), (500, 0), (500, 1000), (0, 1000)]],
            [False, False],
            highway=["residential", "motorway"],
        )
        graph = build_road_graph(frame)
        short = shortest_path_lengths(graph, [_pt(0, 0)], [_pt(0, 1000)])
        fast = shortest_path_lengths(graph, [_pt(0, 0)], [_pt(0, 1000)], weight="time")
        assert short["length_m"].iloc[0] == pytest.approx(1000, rel=0.01)
        assert fast["length_m"].iloc[0] == pytest.approx(2000, rel=0.01)
        assert fast["duration_s"].iloc[0] == pytest.approx(2000 / (80 / 3.6), rel=0.01)

    def test_porto_matches_networkx(self):
        """On the Porto network, node-to-node lengths equal networkx's Dijkstra."""
        nx = pytest.importorskip("networkx")
        graph = build_road_graph(read_libcity_roads(ROADS_CSV))
        g = nx.DiGraph()
        rows = np.repeat(np.arange(graph.n_nodes), np.diff(graph.matrix.indptr))
        for a, b, w in zip(rows, graph.matrix.indices, graph.matrix.data, strict=True):
            g.add_edge(int(a), int(b), w=float(w))
        rng = np.random.default_rng(3)
        src, dst = rng.choice(graph.n_nodes, size=(2, 20))
        pts = np.column_stack((graph.node_lon, graph.node_lat))
        out = shortest_path_lengths(graph, pts[src], pts[dst])
        for k, (a, b) in enumerate(zip(src, dst, strict=True)):
            try:
                want = nx.shortest_path_length(g, int(a), int(b), weight="w")
            except nx.NetworkXNoPath:
                assert out["status"].iloc[k] == "unreachable"
                continue
            assert out["length_m"].iloc[k] == pytest.approx(want, abs=0.5)

    @pytest.mark.parametrize(
        ("origins", "destinations", "match"),
        [
            ([[0, 0, 0]], [[0, 0, 0]], "forma"),
            ([[0, 0]], [[0, 0], [1, 1]], "destino"),
            ([[0, 95]], [[0, 0]], "fora"),
        ],
    )
    def test_bad_positions(self, block, origins, destinations, match):
        """Malformed or mismatched positions raise a named error."""
        with pytest.raises(RoadGraphError, match=match):
            shortest_path_lengths(block, origins, destinations)


class TestSnapToRoads:
    def test_fraction_and_distance(self):
        """A point 30 m east of the west side's middle snaps there at fraction 0.5."""
        graph = build_road_graph(_frame(BLOCK, [False] * 4))
        out = snap_to_roads(graph, [_pt(500, 30)])
        assert out["snap_m"].iloc[0] == pytest.approx(30, rel=0.02)
        assert out["fraction"].iloc[0] == pytest.approx(0.5, abs=0.01)
        assert isinstance(out, pd.DataFrame)
