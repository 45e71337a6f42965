from __future__ import annotations

import h3
import numpy as np
import pytest
import shapely

from geo._errors import CoordinateArrayError, InvalidResolutionError
from geo.h3 import (
    NO_DISKS,
    cell_disks,
    cell_polygons,
    cells_to_latlng,
    cells_to_parent,
    cells_to_strings,
    check_resolution,
    edge_length_m,
    grid_disk,
    latlng_to_cells,
    latlng_to_parent_cells,
    polygons_to_cells,
)

POA = (-30.0277, -51.2287)


def _random_points(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-30.16, -29.97, n), rng.uniform(-51.26, -51.09, n)


def _reference(lat: np.ndarray, lon: np.ndarray, res: int) -> np.ndarray:
    return np.array(
        [h3.str_to_int(h3.latlng_to_cell(a, o, res)) for a, o in zip(lat, lon, strict=True)],
        dtype=np.uint64,
    )


class TestCheckResolution:
    @pytest.mark.parametrize("res", [-1, 16, 12.0, True, "12", None])
    def test_rejects(self, res: object) -> None:
        """Anything but an integer 0–15 is refused with a pt-BR message."""
        with pytest.raises(InvalidResolutionError, match="resolução H3"):
            check_resolution(res)  # type: ignore[arg-type]

    def test_custom_bounds(self) -> None:
        """A caller's tighter range is enforced and named."""
        with pytest.raises(InvalidResolutionError, match="entre 7 e 15"):
            check_resolution(6, low=7)

    def test_accepts_numpy_integer(self) -> None:
        """numpy integers are accepted and returned as int."""
        assert check_resolution(np.int64(12)) == 12


class TestLatlngToCells:
    @pytest.mark.parametrize("res", [0, 7, 9, 12, 15])
    def test_equals_h3_py(self, res: int) -> None:
        """Vectorised cells equal h3-py's latlng_to_cell point by point."""
        lat, lon = _random_points(2000, seed=res)
        out = latlng_to_cells(lat, lon, resolution=res)
        assert out.dtype == np.uint64
        np.testing.assert_array_equal(out, _reference(lat, lon, res))

    def test_invalid_coordinates_give_zero(self) -> None:
        """NaN, infinite and out-of-range coordinates give cell 0; valid ones are indexed."""
        lat = np.array([POA[0], np.nan, 91.0, POA[0], POA[0], -90.5])
        lon = np.array([POA[1], POA[1], 0.0, np.inf, 180.5, 0.0])
        out = latlng_to_cells(lat, lon, resolution=12)
        assert out[0] == h3.str_to_int(h3.latlng_to_cell(*POA, 12))
        np.testing.assert_array_equal(out[1:], 0)

    def test_keeps_shape(self) -> None:
        """A 2-D input gives a 2-D output of the same shape."""
        lat, lon = _random_points(6)
        out = latlng_to_cells(lat.reshape(2, 3), lon.reshape(2, 3), resolution=10)
        assert out.shape == (2, 3)
        np.testing.assert_array_equal(out.ravel(), _reference(lat, lon, 10))

    def test_empty(self) -> None:
        """No coordinates give an empty uint64 array."""
        out = latlng_to_cells(np.empty(0), np.empty(0), resolution=12)
        assert out.shape == (0,) and out.dtype == np.uint64

    def test_accepts_lists(self) -> None:
        """Plain Python sequences work like arrays."""
        out = latlng_to_cells([POA[0]], [POA[1]], resolution=9)
        assert out.tolist() == [h3.str_to_int(h3.latlng_to_cell(*POA, 9))]

    def test_shape_mismatch(self) -> None:
        """lat and lon of different shapes are refused, naming both shapes."""
        with pytest.raises(CoordinateArrayError, match=r"lat tem \(2,\), lon tem \(3,\)"):
            latlng_to_cells(np.zeros(2), np.zeros(3), resolution=12)

    def test_non_numeric(self) -> None:
        """Non-numeric coordinates are refused."""
        with pytest.raises(CoordinateArrayError, match="devem ser números"):
            latlng_to_cells(["a"], ["b"], resolution=12)

    def test_bad_resolution(self) -> None:
        """Resolution 16 is refused."""
        with pytest.raises(InvalidResolutionError, match="era 16"):
            latlng_to_cells([0.0], [0.0], resolution=16)


class TestCellsToLatlng:
    def test_round_trip(self) -> None:
        """Indexing a cell's centre at its resolution gives the cell back."""
        cells = latlng_to_cells(*_random_points(500), resolution=11)
        lat, lon = cells_to_latlng(cells)
        np.testing.assert_array_equal(latlng_to_cells(lat, lon, resolution=11), cells)

    def test_empty(self) -> None:
        """No cells give two empty arrays."""
        lat, lon = cells_to_latlng(np.empty(0, dtype=np.uint64))
        assert lat.size == 0 and lon.size == 0


class TestCellPolygons:
    def test_matches_h3_py_boundary(self) -> None:
        """Polygons are h3-py's cell boundaries in lon/lat order, to 1e-9 degree."""
        cells = latlng_to_cells(*_random_points(50), resolution=12)
        polys = cell_polygons(cells)
        for cell, poly in zip(cells.tolist(), polys, strict=True):
            ref = shapely.Polygon([(o, a) for a, o in h3.cell_to_boundary(h3.int_to_str(cell))])
            assert poly.equals_exact(ref, tolerance=1e-9)

    def test_contains_centre(self) -> None:
        """Each polygon contains its cell's centre."""
        cells = latlng_to_cells(*_random_points(50), resolution=13)
        lat, lon = cells_to_latlng(cells)
        assert shapely.contains_xy(cell_polygons(cells), lon, lat).all()

    def test_empty(self) -> None:
        """No cells give an empty object array."""
        assert cell_polygons(np.empty(0, dtype=np.uint64)).shape == (0,)


class TestPolygonsToCells:
    def test_modes_nest(self) -> None:
        """full ⊆ center ⊆ overlap, and overlap cells are exactly those intersecting the polygon."""
        square = shapely.box(-51.2300, -30.0290, -51.2285, -30.0280)
        circle = shapely.Point(-51.21, -30.02).buffer(0.0004)
        sets = {}
        for mode in ("full", "center", "overlap"):
            idx, cells = polygons_to_cells([square, circle], resolution=12, containment=mode)
            sets[mode] = {(int(i), int(c)) for i, c in zip(idx, cells, strict=True)}
        assert sets["full"] < sets["center"] < sets["overlap"]
        for i, poly in enumerate((square, circle)):
            cells = np.array([c for j, c in sets["overlap"] if j == i], dtype=np.uint64)
            disk = grid_disk(cells, k=2)[1]
            touching = {int(c) for c in disk[shapely.intersects(cell_polygons(disk), poly)]}
            assert touching == {int(c) for c in cells}

    def test_groups_by_geometry(self) -> None:
        """The index column names the polygon each cell came from, in order."""
        polys = [shapely.Point(-51.2, -30.0).buffer(1e-4), shapely.Point(-51.1, -30.1).buffer(1e-4)]
        idx, cells = polygons_to_cells(polys, resolution=13)
        assert idx[0] == 0 and idx[-1] == 1 and np.all(np.diff(idx) >= 0)
        assert cells.dtype == np.uint64

    def test_empty(self) -> None:
        """No polygons give no pairs."""
        idx, cells = polygons_to_cells([], resolution=12)
        assert idx.size == 0 and cells.size == 0

    def test_bad_mode(self) -> None:
        """An unknown containment mode is refused, listing the allowed ones."""
        with pytest.raises(ValueError, match="center, full, overlap"):
            polygons_to_cells([shapely.box(0, 0, 1, 1)], resolution=5, containment="touch")  # type: ignore[arg-type]


class TestGridDisk:
    def test_k1(self) -> None:
        """k=1 gives the origin and its 6 neighbours for each input cell."""
        cells = latlng_to_cells([POA[0], -30.1], [POA[1], -51.1], resolution=12)
        idx, disk = grid_disk(cells, k=1)
        assert np.bincount(idx).tolist() == [7, 7]
        for i, cell in enumerate(cells.tolist()):
            ref = {h3.str_to_int(c) for c in h3.grid_disk(h3.int_to_str(cell), 1)}
            assert set(disk[idx == i].tolist()) == ref

    def test_k0(self) -> None:
        """k=0 gives the cell itself."""
        cells = latlng_to_cells([POA[0]], [POA[1]], resolution=12)
        assert grid_disk(cells, k=0)[1].tolist() == cells.tolist()

    def test_negative_k(self) -> None:
        """A negative k is refused."""
        with pytest.raises(ValueError, match="'k' era -1"):
            grid_disk(np.array([0], dtype=np.uint64), k=-1)


class TestEdgeLengthM:
    @pytest.mark.parametrize(("res", "low", "high"), [(9, 150, 220), (12, 9, 12), (13, 3, 5)])
    def test_values(self, res: int, low: float, high: float) -> None:
        """Average edge lengths are H3's published values, in metres."""
        assert low < edge_length_m(res) < high


class TestCellsToStrings:
    def test_hex(self) -> None:
        """Strings are H3's lower-case hexadecimal form."""
        cells = latlng_to_cells(*_random_points(5), resolution=12)
        assert cells_to_strings(cells).tolist() == [h3.int_to_str(int(c)) for c in cells]


def _city_points(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return POA[0] + rng.normal(0, 0.03, n), POA[1] + rng.normal(0, 0.03, n)


class TestCellsToParent:
    @pytest.mark.parametrize("res", [0, 5, 9, 11, 12])
    def test_equals_h3_py(self, res: int) -> None:
        """Parents are h3-py's cell_to_parent, bit for bit."""
        cells = latlng_to_cells(*_random_points(300), resolution=12)
        expected = [h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(c)), res)) for c in cells]
        assert cells_to_parent(cells, resolution=res).tolist() == expected

    def test_null_and_shape_kept(self) -> None:
        """The null cell stays 0 and the input shape is kept."""
        cells = latlng_to_cells(
            np.array([[POA[0], 95.0]]), np.array([[POA[1], 0.0]]), resolution=12
        )
        parents = cells_to_parent(cells, resolution=9)
        assert parents.shape == (1, 2)
        assert parents[0, 1] == 0
        assert parents[0, 0] == latlng_to_cells([POA[0]], [POA[1]], resolution=9)[0]

    def test_finer_resolution_raises(self) -> None:
        """A parent finer than the cells is refused."""
        cells = latlng_to_cells(*_random_points(3), resolution=9)
        with pytest.raises(InvalidResolutionError, match="mais fina"):
            cells_to_parent(cells, resolution=10)


class TestLatlngToParentCells:
    def test_equals_indexing_in_a_city(self) -> None:
        """Chunk by chunk, reusing the disks, the cells equal direct indexing (12 -> 9)."""
        lat, lon = _city_points(200_000)
        fine = latlng_to_cells(lat, lon, resolution=12)
        disks = NO_DISKS
        for lo in range(0, len(lat), 50_000):
            part = slice(lo, lo + 50_000)
            got, disks = latlng_to_parent_cells(
                lat[part], lon[part], fine[part], resolution=9, disks=disks
            )
            np.testing.assert_array_equal(got, latlng_to_cells(lat[part], lon[part], resolution=9))
        assert (disks.radius2 > 0).mean() > 0.99
        assert (
            cells_to_parent(fine, resolution=9) != latlng_to_cells(lat, lon, resolution=9)
        ).any()

    @pytest.mark.parametrize(
        ("where", "fine", "coarse"),
        [("globe", 12, 9), ("pentagons", 15, 6), ("antimeridian", 15, 6), ("city", 12, 3)],
    )
    def test_equals_indexing_elsewhere(self, where: str, fine: int, coarse: int) -> None:
        """Scattered points, pentagons, the antimeridian and coarse parents also match exactly."""
        rng = np.random.default_rng(11)
        n = 60_000
        if where == "globe":
            lat, lon = np.degrees(np.arcsin(rng.uniform(-1, 1, n))), rng.uniform(-180, 180, n)
        elif where == "pentagons":
            centres = np.array([h3.cell_to_latlng(p) for p in h3.get_pentagons(6)])
            spot = rng.integers(0, len(centres), n)
            lat = np.clip(centres[spot, 0] + rng.normal(0, 0.2, n), -90, 90)
            lon = (centres[spot, 1] + rng.normal(0, 0.2, n) + 180) % 360 - 180
        elif where == "antimeridian":
            lat = rng.uniform(-60, 60, n)
            lon = np.where(rng.random(n) < 0.5, 180 - rng.exponential(0.05, n), -180 + 0.01)
        else:
            lat, lon = _city_points(n)
        cells = latlng_to_cells(lat, lon, resolution=fine)
        got, _ = latlng_to_parent_cells(lat, lon, cells, resolution=coarse)
        np.testing.assert_array_equal(got, latlng_to_cells(lat, lon, resolution=coarse))

    def test_points_without_cell_get_zero(self) -> None:
        """A point with the null cell gets 0, like latlng_to_cells."""
        lat, lon = np.array([POA[0], np.nan]), np.array([POA[1], 0.0])
        got, _ = latlng_to_parent_cells(
            lat, lon, latlng_to_cells(lat, lon, resolution=12), resolution=9
        )
        assert got[1] == 0
        assert got[0] == latlng_to_cells(lat[:1], lon[:1], resolution=9)[0]

    def test_disks_grow_only_with_new_parents(self) -> None:
        """Disks returned cover the parents seen; a second pass over them adds none."""
        lat, lon = _city_points(20_000, seed=2)
        cells = latlng_to_cells(lat, lon, resolution=12)
        _, disks = latlng_to_parent_cells(lat, lon, cells, resolution=9)
        assert set(np.unique(cells_to_parent(cells, resolution=9)).tolist()) == set(
            disks.cells.tolist()
        )
        _, again = latlng_to_parent_cells(lat, lon, cells, resolution=9, disks=disks)
        assert len(again.cells) == len(disks.cells)

    def test_shape_mismatch_raises(self) -> None:
        """Cells must match the coordinates' shape."""
        with pytest.raises(CoordinateArrayError, match="mesmo formato"):
            latlng_to_parent_cells([POA[0]], [POA[1]], np.zeros(2, np.uint64), resolution=9)


class TestCellDisks:
    def test_disk_inside_hexagon(self) -> None:
        """A city cell's disk is centred inside it and reaches none of its vertices."""
        cell = latlng_to_cells([POA[0]], [POA[1]], resolution=9)
        disks = cell_disks(cell)
        assert disks.radius2[0] > 0
        boundary = np.array(h3.cell_to_boundary(h3.int_to_str(int(cell[0]))))
        x = (boundary[:, 1] - disks.lon[0]) * disks.cos_lat[0]
        y = boundary[:, 0] - disks.lat[0]
        assert (x * x + y * y > disks.radius2[0]).all()

    @pytest.mark.parametrize("kind", ["pentagon", "coarse"])
    def test_no_disk_where_unsafe(self, kind: str) -> None:
        """Pentagons and cells coarser than resolution 6 get no disk."""
        if kind == "pentagon":
            cell = h3.str_to_int(sorted(h3.get_pentagons(9))[0])
        else:
            cell = int(latlng_to_cells([POA[0]], [POA[1]], resolution=5)[0])
        assert cell_disks(np.array([cell], np.uint64)).radius2[0] < 0
