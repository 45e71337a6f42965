from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from geo._errors import (
    CoordinateArrayError,
    CRSError,
    InvalidResolutionError,
    NotGeographicCRSError,
    StandCoverError,
)
from geo.cover import (
    DEFAULT_RESOLUTION,
    MARGIN_DEG,
    StandCover,
    build_stand_cover,
    match_stands,
    nearest_containing_stand,
)
from geo.crs import buffer_points_m, haversine_m
from geo.h3 import cell_polygons, grid_disk, latlng_to_cells, polygons_to_cells
from stands.layers import read_porto_stands

DATA = Path(__file__).resolve().parents[2] / "data"
POA_STANDS = DATA / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
PORTO_STANDS = DATA / "porto" / "derived" / "taxi_stands.csv"
M_LAT = 1 / 111_320.0  # degrees of latitude per metre


def _frame(ids: list[str], geoms: list[object]) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame({"stand_id": ids}, geometry=geoms, crs=4326)


def _local(
    lon0: float, lat0: float, coords_m: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Metre offsets (east, north) around (lon0, lat0) to lon/lat."""
    m_lon = M_LAT / np.cos(np.radians(lat0))
    return [(lon0 + x * m_lon, lat0 + y * M_LAT) for x, y in coords_m]


def _hand_made() -> gpd.GeoDataFrame:
    """Small irregular polygons in central Porto Alegre (a few metres to 40 m across)."""
    lon0, lat0 = -51.2230, -30.0310
    el = shapely.Polygon(_local(lon0, lat0, [(0, 0), (20, 0), (20, 8), (8, 8), (8, 20), (0, 20)]))
    sliver = shapely.Polygon(_local(lon0 + 0.0006, lat0, [(0, 0), (40, 38), (41.5, 40), (1, 2.5)]))
    ring = shapely.Point(lon0 - 0.0008, lat0).buffer(20 * M_LAT)
    hole = shapely.Point(lon0 - 0.0008, lat0).buffer(8 * M_LAT)
    donut = shapely.Polygon(ring.exterior.coords, [hole.exterior.coords])
    squares = shapely.MultiPolygon(
        [
            shapely.Polygon(_local(lon0, lat0 + 0.0005, [(0, 0), (6, 0), (6, 6), (0, 6)])),
            shapely.Polygon(_local(lon0, lat0 + 0.0005, [(16, 0), (22, 0), (22, 6), (16, 6)])),
        ]
    )
    tri = shapely.Polygon(_local(lon0 + 0.0004, lat0 + 0.0004, [(0, 0), (5, 0), (2, 4)]))
    angles = np.linspace(0, 2 * np.pi, 21)[:-1]
    radii = np.where(np.arange(20) % 2 == 0, 25.0, 9.0)
    star = shapely.Polygon(
        _local(
            lon0 + 0.0010,
            lat0 - 0.0006,
            list(zip(radii * np.cos(angles), radii * np.sin(angles), strict=True)),
        )
    )
    geoms = [el, sliver, donut, squares, tri, star]
    assert all(g.is_valid for g in geoms)
    return _frame([f"h{i}" for i in range(len(geoms))], geoms)


@pytest.fixture(scope="module")
def stands() -> gpd.GeoDataFrame:
    """Porto stands at 50/100/150 m (overlapping), POA ok stands at 30 m, hand-made polygons."""
    parts = []
    for radius in (50, 100, 150):
        porto = read_porto_stands(PORTO_STANDS, radius_m=radius)
        porto["stand_id"] = f"porto{radius}-" + porto["stand_id"]
        parts.append(porto[["stand_id", "geometry"]])
    poa = gpd.read_file(POA_STANDS)
    poa = poa[poa["coord_quality"] == "ok"]
    poa = gpd.GeoDataFrame(
        {"stand_id": "poa-" + poa["codigo"].astype(str)}, geometry=poa.geometry.values, crs=4326
    )
    parts.append(buffer_points_m(poa, 30.0))
    parts.append(_hand_made())
    return gpd.GeoDataFrame(pd.concat(parts, ignore_index=True), crs=4326)


@pytest.fixture(scope="module")
def pings(stands: gpd.GeoDataFrame) -> tuple[np.ndarray, np.ndarray]:
    """≥ 1M pings in and around every stand, on stand edges and on H3 cell edges."""
    rng = np.random.default_rng(42)
    geoms = stands.geometry.to_numpy()
    minx, miny, maxx, maxy = shapely.bounds(geoms).T
    per = 1_900
    pad_x, pad_y = (maxx - minx) * 0.3, (maxy - miny) * 0.3
    lon = rng.uniform(np.repeat(minx - pad_x, per), np.repeat(maxx + pad_x, per))
    lat = rng.uniform(np.repeat(miny - pad_y, per), np.repeat(maxy + pad_y, per))
    # exactly on stand edges: every vertex
    verts = shapely.get_coordinates(shapely.boundary(geoms))
    # on H3 cell edges and corners near the stands (res 12 and 13)
    cell_pts = []
    for res in (12, 13):
        _, cells = polygons_to_cells(geoms, resolution=res, containment="overlap")
        cell_pts.append(shapely.get_coordinates(cell_polygons(np.unique(cells)[::3])))
    extra = np.vstack([verts, *cell_pts])
    lon = np.concatenate([lon, extra[:, 0], [np.nan, 0.0, np.inf]])
    lat = np.concatenate([lat, extra[:, 1], [0.0, np.nan, 0.0]])
    order = rng.permutation(lon.size)
    return lat[order], lon[order]


def _reference(
    lat: np.ndarray, lon: np.ndarray, geoms: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """All (ping, stand) pairs with shapely.contains_xy, candidates from an STRtree on bounds."""
    ok = np.flatnonzero(np.isfinite(lat) & np.isfinite(lon))
    tree = shapely.STRtree(geoms)
    p, g = tree.query(shapely.points(lon[ok], lat[ok]))
    p = ok[p]
    keep = shapely.contains_xy(geoms[g], lon[p], lat[p])
    p, g = p[keep], g[keep]
    order = np.lexsort((g, p))
    return p[order].astype(np.int64), g[order].astype(np.int64)


@pytest.fixture(scope="module")
def reference(
    stands: gpd.GeoDataFrame, pings: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    lat, lon = pings
    return _reference(lat, lon, stands.geometry.to_numpy())


class TestMatchStandsExact:
    def test_fixture_is_demanding(
        self, pings: tuple[np.ndarray, np.ndarray], reference: tuple[np.ndarray, np.ndarray]
    ) -> None:
        """≥ 1M pings, many inside, many in several stands at once, many outside."""
        lat, _ = pings
        ping, _ = reference
        assert lat.size >= 1_000_000
        assert 0.15 < np.unique(ping).size / lat.size < 0.7
        assert (np.bincount(ping) >= 2).sum() > 50_000

    @pytest.mark.parametrize("res", [9, 10, 11, 12, 13])
    def test_equals_contains_xy(
        self,
        res: int,
        stands: gpd.GeoDataFrame,
        pings: tuple[np.ndarray, np.ndarray],
        reference: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """At every resolution, the pairs equal shapely.contains_xy pair for pair, in order."""
        lat, lon = pings
        cover = build_stand_cover(stands, resolution=res)
        ping, stand = match_stands(lat, lon, cover)
        assert ping.dtype == np.int64 and stand.dtype == np.int64
        np.testing.assert_array_equal(ping, reference[0])
        np.testing.assert_array_equal(stand, reference[1])

    def test_centroid_fill_would_miss(
        self,
        stands: gpd.GeoDataFrame,
        pings: tuple[np.ndarray, np.ndarray],
        reference: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Matched pings lie in cells whose centre is outside their stand (so those cells count)."""
        lat, lon = pings
        idx, cells = polygons_to_cells(
            stands.geometry.to_numpy(), resolution=12, containment="center"
        )
        centre_pairs = set(zip(idx.tolist(), cells.tolist(), strict=True))
        ping, stand = reference
        ping_cells = latlng_to_cells(lat[ping], lon[ping], resolution=12)
        missed = sum(
            (s, c) not in centre_pairs
            for s, c in zip(stand.tolist(), ping_cells.tolist(), strict=True)
        )
        assert missed > 0.01 * ping.size

    def test_precomputed_cells(
        self,
        stands: gpd.GeoDataFrame,
        pings: tuple[np.ndarray, np.ndarray],
        reference: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Passing the pings' cells gives the same pairs as indexing inside."""
        lat, lon = pings
        cover = build_stand_cover(stands, resolution=12)
        cells = latlng_to_cells(lat, lon, resolution=12)
        ping, stand = match_stands(lat, lon, cover, cells=cells)
        np.testing.assert_array_equal(ping, reference[0])
        np.testing.assert_array_equal(stand, reference[1])


class TestMatchStandsEdges:
    @pytest.fixture
    def square_cover(self) -> StandCover:
        return build_stand_cover(
            _frame(["sq"], [shapely.box(-51.2301, -30.0301, -51.2299, -30.0299)])
        )

    def test_boundary_excluded(self, square_cover: StandCover) -> None:
        """Pings exactly on an edge or corner are outside (shapely contains); inside is in."""
        lon = np.array([-51.2301, -51.2299, -51.2300, -51.2300, -51.2301, -51.2300])
        lat = np.array([-30.0300, -30.0300, -30.0301, -30.0299, -30.0301, -30.0300])
        ping, stand = match_stands(lat, lon, square_cover)
        assert ping.tolist() == [5] and stand.tolist() == [0]
        geom = square_cover.geometries[0]
        assert shapely.contains_xy(geom, lon, lat).tolist() == [False] * 5 + [True]

    def test_stand_equal_to_cells(self) -> None:
        """Stands drawn exactly on H3 cells: pings on their edges (which H3 indexes into those very
        cells) are outside, as with shapely; needs the cover's inward margin."""
        rng = np.random.default_rng(5)
        centre = latlng_to_cells([-30.0300], [-51.2300], resolution=12)
        _, cells = grid_disk(centre, k=2)
        polys = cell_polygons(cells)
        cover = build_stand_cover(_frame([str(c) for c in cells], list(polys)), resolution=12)
        edges = shapely.get_coordinates(shapely.segmentize(shapely.boundary(polys), 1e-6))
        t = rng.uniform(0, 1, (5000, 1))
        a, b = edges[rng.integers(0, len(edges), 5000)], edges[rng.integers(0, len(edges), 5000)]
        pts = np.vstack([edges, a + t * (b - a)])
        lat, lon = pts[:, 1], pts[:, 0]
        ping, stand = match_stands(lat, lon, cover)
        ref = _reference(lat, lon, cover.geometries)
        in_cover = np.isin(latlng_to_cells(lat, lon, resolution=12), cover.cells)
        on_edge = in_cover & ~np.isin(np.arange(lat.size), ref[0])
        assert in_cover.mean() > 0.9 and on_edge.sum() > 1000
        np.testing.assert_array_equal(ping, ref[0])
        np.testing.assert_array_equal(stand, ref[1])

    def test_hole_excluded(self) -> None:
        """A ping in a polygon's hole is not in the stand; one in the ring is."""
        outer = shapely.box(-51.2310, -30.0310, -51.2290, -30.0290)
        inner = shapely.box(-51.2305, -30.0305, -51.2295, -30.0295)
        cover = build_stand_cover(
            _frame(["d"], [shapely.Polygon(outer.exterior.coords, [inner.exterior.coords])])
        )
        ping, _ = match_stands([-30.0300, -30.0307], [-51.2300, -51.2300], cover)
        assert ping.tolist() == [1]

    def test_empty_pings(self, square_cover: StandCover) -> None:
        """No pings give two empty int64 arrays."""
        ping, stand = match_stands(np.empty(0), np.empty(0), square_cover)
        assert ping.size == 0 and stand.size == 0 and ping.dtype == stand.dtype == np.int64

    def test_empty_stands(self) -> None:
        """An empty stands frame gives an empty cover that matches nothing."""
        cover = build_stand_cover(_frame([], []))
        assert cover.cells.size == 0 and cover.n_stands == 0
        ping, stand = match_stands([-30.03], [-51.23], cover)
        assert ping.size == 0 and stand.size == 0

    def test_invalid_coordinates_unmatched(self, square_cover: StandCover) -> None:
        """NaN or infinite pings match nothing and do not disturb the others."""
        ping, _ = match_stands([np.nan, -30.0300, -30.03], [-51.23, np.inf, -51.2300], square_cover)
        assert ping.tolist() == [2]

    def test_no_ping_in_cover(self, square_cover: StandCover) -> None:
        """Pings far from every stand give no pairs."""
        ping, _ = match_stands([-29.9, 41.1], [-51.1, -8.6], square_cover)
        assert ping.size == 0

    def test_shape_mismatch(self, square_cover: StandCover) -> None:
        """lat and lon of different lengths are refused."""
        with pytest.raises(CoordinateArrayError, match="mesmo formato"):
            match_stands(np.zeros(2), np.zeros(3), square_cover)

    def test_two_dimensional(self, square_cover: StandCover) -> None:
        """2-D coordinate arrays are refused."""
        with pytest.raises(CoordinateArrayError, match="1-D"):
            match_stands(np.zeros((2, 2)), np.zeros((2, 2)), square_cover)

    def test_cells_length(self, square_cover: StandCover) -> None:
        """Precomputed cells must be one per ping."""
        with pytest.raises(CoordinateArrayError, match="um por ping"):
            match_stands(np.zeros(2), np.zeros(2), square_cover, cells=np.zeros(3, dtype=np.uint64))

    def test_cells_resolution(self, square_cover: StandCover) -> None:
        """Precomputed cells at another resolution than the cover's are refused."""
        cells = latlng_to_cells([-30.03], [-51.23], resolution=11)
        with pytest.raises(
            InvalidResolutionError, match="resolução 11–11; a cobertura usa a resolução 12"
        ):
            match_stands([-30.03], [-51.23], square_cover, cells=cells)


class TestBuildStandCover:
    def test_structure(self) -> None:
        """Sorted unique cells, CSR offsets, ascending stands per cell, mixed interior/boundary."""
        big = shapely.Point(-51.2300, -30.0300).buffer(0.0006)
        small = shapely.Point(-51.2300, -30.0300).buffer(0.0001)
        cover = build_stand_cover(_frame(["big", "small"], [big, small]), resolution=13)
        assert cover.cells.size > 1 and np.all(cover.cells[1:] > cover.cells[:-1])
        assert cover.offsets[0] == 0 and cover.offsets[-1] == cover.entry_stand.size
        assert np.all(np.diff(cover.offsets) >= 1)
        per_cell = np.split(cover.entry_stand, cover.offsets[1:-1])
        assert all(np.all(np.diff(s) > 0) for s in per_cell)
        interior = np.split(cover.entry_interior, cover.offsets[1:-1])
        mixed = [
            (s.tolist(), f.tolist())
            for s, f in zip(per_cell, interior, strict=True)
            if s.tolist() == [0, 1]
        ]
        assert ([0, 1], [True, False]) in mixed
        assert cover.stand_ids.tolist() == ["big", "small"]
        assert cover.resolution == 13

    def test_interior_cells_are_inside(self, stands: gpd.GeoDataFrame) -> None:
        """Interior cells lie within their stand; every cell is within the margin of its stand."""
        cover = build_stand_cover(stands.iloc[::7].reset_index(drop=True), resolution=12)
        cells = np.repeat(cover.cells, np.diff(cover.offsets))
        polys = cell_polygons(cells)
        geoms = cover.geometries[cover.entry_stand]
        assert shapely.dwithin(geoms, polys, 1.01 * MARGIN_DEG).all()
        assert shapely.within(polys[cover.entry_interior], geoms[cover.entry_interior]).all()
        assert cover.entry_interior.any()

    def test_without_stand_id_and_custom_index(self) -> None:
        """Stand indexes are row positions, whatever the frame's index; ids default to positions."""
        frame = gpd.GeoDataFrame(
            geometry=[
                shapely.box(-51.2301, -30.0301, -51.2299, -30.0299),
                shapely.box(0, 0, 0.001, 0.001),
            ],
            index=[10, 20],
            crs=4326,
        )
        cover = build_stand_cover(frame)
        assert cover.stand_ids.tolist() == [0, 1]
        _, stand = match_stands([0.0005], [0.0005], cover)
        assert stand.tolist() == [1]

    def test_default_resolution(self) -> None:
        """The default resolution is the measured one."""
        assert build_stand_cover(_frame([], [])).resolution == DEFAULT_RESOLUTION

    @pytest.mark.parametrize("res", [6, 16])
    def test_bad_resolution(self, res: int) -> None:
        """Resolutions outside 7–15 are refused."""
        with pytest.raises(InvalidResolutionError, match="entre 7 e 15"):
            build_stand_cover(_frame([], []), resolution=res)

    def test_projected_crs(self) -> None:
        """A projected stands frame is refused."""
        frame = gpd.GeoDataFrame(
            {"stand_id": ["a"]}, geometry=[shapely.box(0, 0, 10, 10)], crs=31982
        )
        with pytest.raises(NotGeographicCRSError, match="EPSG:31982"):
            build_stand_cover(frame)

    def test_other_geographic_crs(self) -> None:
        """A geographic CRS other than EPSG:4326 is refused with the fix."""
        frame = gpd.GeoDataFrame(
            {"stand_id": ["a"]}, geometry=[shapely.box(0, 0, 1e-4, 1e-4)], crs=4674
        )
        with pytest.raises(CRSError, match="to_crs\\(4326\\)"):
            build_stand_cover(frame)

    @pytest.mark.parametrize(
        ("geom", "label"),
        [
            (None, "sem geometria"),
            (shapely.Polygon(), "geometria vazia"),
            (shapely.Point(0, 0), "não poligonal"),
            (shapely.Polygon([(0, 0), (1e-4, 1e-4), (1e-4, 0), (0, 1e-4)]), "polígono inválido"),
        ],
    )
    def test_bad_geometry(self, geom: object, label: str) -> None:
        """Null, empty, non-polygonal and invalid geometries are refused, naming the stand."""
        frame = _frame(["ok", "bad"], [shapely.box(0, 0, 1e-4, 1e-4), geom])
        with pytest.raises(StandCoverError, match=f"{label}.*'bad'"):
            build_stand_cover(frame)


class TestNearestContainingStand:
    def test_against_brute_force(
        self,
        stands: gpd.GeoDataFrame,
        pings: tuple[np.ndarray, np.ndarray],
        reference: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Each ping gets the containing stand with the nearest centroid; -1 when none."""
        lat, lon = pings
        cover = build_stand_cover(stands, resolution=12)
        out = nearest_containing_stand(lat, lon, cover, pairs=reference)
        assert out.shape == lat.shape and out.dtype == np.int64
        ping, stand = reference
        inside = np.zeros(lat.size, dtype=bool)
        inside[ping] = True
        assert np.all(out[~inside] == -1)
        centroids = shapely.centroid(stands.geometry.to_numpy())
        cx, cy = shapely.get_x(centroids), shapely.get_y(centroids)
        multi = np.unique(ping[np.flatnonzero(np.diff(ping) == 0)])[:3000]
        for p in multi.tolist():
            cands = stand[ping == p]
            d = haversine_m(lat[p], lon[p], cy[cands], cx[cands])
            assert out[p] == cands[np.lexsort((cands, d))[0]]
        single = np.setdiff1d(np.unique(ping), multi)[:1000]
        np.testing.assert_array_equal(out[single], stand[np.searchsorted(ping, single)])

    def test_computes_pairs_itself(self) -> None:
        """Without pairs it matches first; overlapping circles resolve to the nearer centre."""
        a = shapely.Point(-51.2300, -30.0300).buffer(0.0005)
        b = shapely.Point(-51.2294, -30.0300).buffer(0.0005)
        cover = build_stand_cover(_frame(["a", "b"], [a, b]))
        out = nearest_containing_stand(
            [-30.0300, -30.0300, -30.0300], [-51.2298, -51.2296, -51.2200], cover
        )
        assert out.tolist() == [0, 1, -1]

    def test_tie_goes_to_lowest_index(self) -> None:
        """Two stands with the same anchor: the earlier row wins."""
        poly = shapely.Point(-51.2300, -30.0300).buffer(0.0003)
        cover = build_stand_cover(_frame(["first", "second"], [poly, poly]))
        assert nearest_containing_stand([-30.0300], [-51.2301], cover).tolist() == [0]

    def test_empty(self) -> None:
        """No pings give an empty result."""
        cover = build_stand_cover(_frame(["a"], [shapely.box(0, 0, 1e-4, 1e-4)]))
        assert nearest_containing_stand(np.empty(0), np.empty(0), cover).shape == (0,)
