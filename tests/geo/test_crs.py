from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import pyproj
import pytest
import shapely

from geo._errors import CRSError, NotGeographicCRSError, NotMetricCRSError
from geo.crs import (
    buffer_points_m,
    distance_to_geometries_m,
    haversine_m,
    require_geographic,
    require_metric,
    utm_crs_for,
    utm_crs_for_frame,
)

GEOD = pyproj.Geod(ellps="WGS84")


def _points(coords: list[tuple[float, float]], crs: object = 4326) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"k": range(len(coords))}, geometry=[shapely.Point(c) for c in coords], crs=crs
    )


class TestUtmCrsFor:
    @pytest.mark.parametrize(
        ("lon", "lat", "epsg"),
        [
            (-51.2287, -30.0277, 31982),  # Porto Alegre: SIRGAS 2000 / UTM 22S
            (-63.9004, -8.7612, 31980),  # Porto Velho: 20S
            (-51.45, -29.19, 31982),  # Pinto Bandeira
            (-72.68, -7.63, 31978),  # Cruzeiro do Sul (AC): 18S
            (-32.42, -3.85, 31985),  # Fernando de Noronha: 25S
            (-60.67, 2.82, 31974),  # Boa Vista: 20N
            (-8.61, 41.15, 32629),  # Porto, Portugal: WGS 84 / UTM 29N
            (13.40, 52.52, 32633),  # Berlin
            (151.2, -33.87, 32756),  # Sydney
            (180.0, 0.0, 32660),  # antimeridian: zone 60
        ],
    )
    def test_zone(self, lon: float, lat: float, epsg: int) -> None:
        """SIRGAS 2000 / UTM inside Brazil, WGS 84 / UTM elsewhere, with the right zone."""
        assert utm_crs_for(lon, lat).to_epsg() == epsg

    @pytest.mark.parametrize(
        ("lon", "lat"), [(0.0, 85.0), (0.0, -81.0), (181.0, 0.0), (math.nan, 0.0)]
    )
    def test_out_of_range(self, lon: float, lat: float) -> None:
        """Positions outside UTM's range are refused."""
        with pytest.raises(ValueError, match="fora da faixa UTM"):
            utm_crs_for(lon, lat)


class TestHaversineM:
    def test_one_degree_of_latitude(self) -> None:
        """One degree of latitude is ~111.195 km on the mean sphere."""
        assert haversine_m(0.0, 0.0, 1.0, 0.0) == pytest.approx(111_195.08, abs=0.1)

    def test_against_geodesic(self) -> None:
        """Within 0.5 % of the WGS84 ellipsoid distance on city-scale pairs."""
        rng = np.random.default_rng(3)
        lat1, lon1 = rng.uniform(-30.2, -29.9, 200), rng.uniform(-51.3, -51.0, 200)
        lat2, lon2 = rng.uniform(-30.2, -29.9, 200), rng.uniform(-51.3, -51.0, 200)
        _, _, ref = GEOD.inv(lon1, lat1, lon2, lat2)
        np.testing.assert_allclose(haversine_m(lat1, lon1, lat2, lon2), ref, rtol=5e-3)

    def test_broadcast_zero_and_symmetry(self) -> None:
        """Scalars broadcast against arrays; distance to itself is 0; order does not matter."""
        lat = np.array([-30.0, -30.001, -29.9])
        lon = np.array([-51.2, -51.2, -51.0])
        d = haversine_m(-30.0, -51.2, lat, lon)
        assert d.shape == (3,) and d[0] == 0.0
        np.testing.assert_allclose(d, haversine_m(lat, lon, -30.0, -51.2))

    def test_nan(self) -> None:
        """A NaN input gives a NaN distance."""
        assert np.isnan(haversine_m(np.nan, 0.0, 0.0, 0.0))


class TestRequireGeographic:
    def test_ok(self) -> None:
        """EPSG:4326 passes and is returned."""
        assert require_geographic(_points([(0, 0)])).to_epsg() == 4326

    def test_projected(self) -> None:
        """A projected frame is refused, naming its CRS."""
        with pytest.raises(NotGeographicCRSError, match="EPSG:31982"):
            require_geographic(_points([(0, 0)], crs=31982))

    def test_missing(self) -> None:
        """A frame without CRS is refused."""
        with pytest.raises(NotGeographicCRSError, match="sem sistema de referência"):
            require_geographic(_points([(0, 0)], crs=None), what="pings")


class TestRequireMetric:
    def test_ok(self) -> None:
        """SIRGAS 2000 / UTM 22S passes."""
        assert require_metric(_points([(0, 0)], crs=31982)).to_epsg() == 31982

    @pytest.mark.parametrize("crs", [4326, None, 2263])
    def test_refused(self, crs: object) -> None:
        """Geographic, missing, and feet-based CRSs are refused."""
        with pytest.raises(NotMetricCRSError, match="metros"):
            require_metric(_points([(0, 0)], crs=crs))


class TestUtmCrsForFrame:
    def test_centre_of_bounds(self) -> None:
        """The zone comes from the centre of the frame's bounds."""
        frame = _points([(-51.3, -30.2), (-51.0, -29.9)])
        assert utm_crs_for_frame(frame).to_epsg() == 31982

    def test_empty(self) -> None:
        """An empty frame has no position: refused."""
        with pytest.raises(CRSError, match="camada vazia"):
            utm_crs_for_frame(_points([]))


class TestBufferPointsM:
    def test_area_and_crs(self) -> None:
        """A 30 m buffer has area π·30² within 0.5 % and comes back in EPSG:4326."""
        out = buffer_points_m(_points([(-51.2287, -30.0277), (-8.61, 41.15)]), 30.0)
        assert out.crs.to_epsg() == 4326
        assert list(out["k"]) == [0, 1]
        for geom, epsg in zip(out.geometry, (31982, 32629), strict=True):
            area = gpd.GeoSeries([geom], crs=4326).to_crs(epsg).area.iloc[0]
            assert area == pytest.approx(math.pi * 900, rel=5e-3)

    def test_radius_per_row(self) -> None:
        """One radius per row is honoured."""
        out = buffer_points_m(_points([(-51.20, -30.0), (-51.21, -30.0)]), [10.0, 100.0])
        areas = out.to_crs(31982).area.to_numpy()
        np.testing.assert_allclose(areas, math.pi * np.array([100.0, 10_000.0]), rtol=5e-3)

    def test_does_not_modify_input(self) -> None:
        """The input frame keeps its points."""
        frame = _points([(-51.2, -30.0)])
        buffer_points_m(frame, 10.0)
        assert frame.geometry.iloc[0].geom_type == "Point"

    def test_geographic_other_than_wgs84(self) -> None:
        """A SIRGAS 2000 geographic frame (EPSG:4674) is accepted and returned in EPSG:4326."""
        out = buffer_points_m(_points([(-51.2, -30.0)], crs=4674), 10.0)
        assert out.crs.to_epsg() == 4326

    def test_empty(self) -> None:
        """An empty frame gives an empty frame in EPSG:4326."""
        out = buffer_points_m(_points([]), 10.0)
        assert len(out) == 0 and out.crs.to_epsg() == 4326

    def test_projected_input(self) -> None:
        """A projected frame is refused: radius_m would be ambiguous."""
        with pytest.raises(NotGeographicCRSError, match="esperado um CRS geográfico"):
            buffer_points_m(_points([(0, 0)], crs=31982), 10.0)

    @pytest.mark.parametrize("radius", [0.0, -5.0, math.nan, math.inf])
    def test_bad_radius(self, radius: float) -> None:
        """Radii that are not finite and > 0 are refused."""
        with pytest.raises(ValueError, match="'radius_m' deve ser"):
            buffer_points_m(_points([(-51.2, -30.0)]), radius)

    def test_rows_in_different_zones(self) -> None:
        """Rows far apart are each buffered in their own UTM zone, so both stay exact."""
        out = buffer_points_m(_points([(-51.2287, -30.0277), (-63.90, -8.76)]), 30.0)
        for geom, epsg in zip(out.geometry, (31982, 31980), strict=True):
            area = gpd.GeoSeries([geom], crs=4326).to_crs(epsg).area.iloc[0]
            assert area == pytest.approx(math.pi * 900, rel=5e-3)

    def test_null_geometry_kept(self) -> None:
        """A row without geometry stays without geometry; the others are buffered."""
        frame = gpd.GeoDataFrame(
            {"k": [0, 1]}, geometry=[None, shapely.Point(-51.2, -30.0)], crs=4326
        )
        out = buffer_points_m(frame, 10.0)
        assert out.geometry.iloc[0] is None and out.geometry.iloc[1].geom_type == "Polygon"

    def test_position_outside_utm(self) -> None:
        """A point beyond UTM's latitudes is refused, naming it."""
        with pytest.raises(ValueError, match="fora da faixa UTM"):
            buffer_points_m(_points([(0.0, 89.0)]), 10.0)

    def test_radius_count_mismatch(self) -> None:
        """Per-row radii must match the number of rows."""
        with pytest.raises(ValueError, match="2 valores para 1 linhas"):
            buffer_points_m(_points([(-51.2, -30.0)]), [1.0, 2.0])


class TestDistanceToGeometriesM:
    def _circle(self, lon: float, lat: float, radius_m: float) -> shapely.Geometry:
        return buffer_points_m(_points([(lon, lat)]), radius_m, quad_segs=64).geometry.iloc[0]

    @pytest.mark.parametrize(
        ("lon", "lat"), [(-51.2287, -30.0277), (-8.61, 41.15)], ids=["porto-alegre", "porto"]
    )
    def test_inside_is_zero_and_outside_is_metres_to_the_edge(self, lon: float, lat: float) -> None:
        """0 inside a 100 m circle; 20 m and 600 m beyond its edge (UTM metres: within 0.1 m)."""
        circle = self._circle(lon, lat, 100.0)
        north = [0.0, 50.0, 120.0, 700.0]  # metres north of the centre (geodesic)
        lons, lats, _ = GEOD.fwd([lon] * 4, [lat] * 4, [0.0] * 4, north)
        got = distance_to_geometries_m(lats, lons, [circle], which=[0, 0, 0, 0])
        assert got[:2].tolist() == [0.0, 0.0]
        assert got[2] == pytest.approx(20.0, abs=0.1)
        assert got[3] == pytest.approx(600.0, abs=0.5)

    def test_alone_equals_among_others(self) -> None:
        """A pair measured alone gives the same float as among many (live equals batch)."""
        rng = np.random.default_rng(3)
        circles = [self._circle(-51.2287, -30.0277, 30.0), self._circle(-51.22, -30.03, 50.0)]
        lat = -30.0277 + rng.normal(0, 0.0004, 50)
        lon = -51.2287 + rng.normal(0, 0.0004, 50)
        which = rng.integers(0, 2, 50)
        many = distance_to_geometries_m(lat, lon, circles, which=which)
        alone = [
            distance_to_geometries_m([a], [o], [circles[w]])[0]
            for a, o, w in zip(lat, lon, which, strict=True)
        ]
        assert many.tolist() == alone
        assert (many > 0).any() and (many == 0).any()

    def test_unknown_is_nan(self) -> None:
        """A NaN coordinate or a null geometry gives NaN, not an error."""
        circle = self._circle(-51.2287, -30.0277, 30.0)
        got = distance_to_geometries_m([np.nan, -30.0277], [-51.2287, -51.2287], [circle, None])
        assert np.isnan(got).all()

    def test_mismatched_lengths_raise(self) -> None:
        """Arrays of different lengths are refused."""
        with pytest.raises(ValueError, match="mesmo tamanho"):
            distance_to_geometries_m([0.0, 1.0], [0.0], [shapely.Point(0, 0)])
