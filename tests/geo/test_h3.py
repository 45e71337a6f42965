from __future__ import annotations

import h3
import numpy as np
import pytest
import shapely

from geo._errors import CoordinateArrayError, InvalidResolutionError
from geo.h3 import (
    cell_polygons,
    cells_to_latlng,
    cells_to_strings,
    check_resolution,
    edge_length_m,
    grid_disk,
    latlng_to_cells,
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


class TestSnapToCellCentres:
    def test_centre_names_the_same_cell(self) -> None:
        """Each position becomes its cell's centre, which lies in that same cell."""
        from geo.h3 import snap_to_cell_centres

        cells, lat, lon = snap_to_cell_centres(
            [-30.02771, -30.0280], [-51.22872, -51.2291], resolution=10
        )
        assert (latlng_to_cells(lat, lon, resolution=10) == cells).all()
        assert (
            cells == latlng_to_cells([-30.02771, -30.0280], [-51.22872, -51.2291], resolution=10)
        ).all()
        assert abs(lat[0] - -30.02771) > 0 or abs(lon[0] - -51.22872) > 0

    def test_out_of_range_is_refused(self) -> None:
        """A coordinate with no cell raises instead of snapping to nowhere."""
        from geo._errors import CoordinateArrayError
        from geo.h3 import snap_to_cell_centres

        with pytest.raises(CoordinateArrayError, match="célula H3"):
            snap_to_cell_centres([95.0], [0.0], resolution=10)
