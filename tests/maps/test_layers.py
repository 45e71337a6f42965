"""Where a map opens (``maps._layers.bounds_of``) and the page it is written in."""

from __future__ import annotations

import geopandas as gpd
import shapely

from maps._layers import bounds_of
from maps.offline import base_map


def _points(*lonlat: tuple[float, float]) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(geometry=[shapely.Point(x, y) for x, y in lonlat], crs=4326)


class TestBoundsOf:
    def test_frames_every_feature_of_one_city(self) -> None:
        """Stands across Porto Alegre (35 km apart): all framed."""
        frame = _points((-51.23, -30.03), (-51.10, -30.25), (-51.20, -29.96))
        assert bounds_of(frame) == [[-30.25, -51.23], [-29.96, -51.10]]

    def test_a_far_city_stays_off_the_first_view(self) -> None:
        """Porto Alegre's stands with a minority in Porto (Portugal) in the same registry: the
        map opens on Porto Alegre, not on the Atlantic."""
        poa = [(-51.23, -30.03), (-51.10, -30.25), (-51.20, -29.96)]
        porto = [(-8.61, 41.15), (-8.60, 41.16)]
        assert bounds_of(_points(*poa, *porto)) == [[-30.25, -51.23], [-29.96, -51.10]]

    def test_no_majority_frames_all(self) -> None:
        """Two cities with as many stands each: the median lies between them, near neither;
        every feature is framed."""
        frame = _points((-51.23, -30.03), (-8.61, 41.15))
        assert bounds_of(frame) == [[-30.03, -51.23], [41.15, -8.61]]

    def test_empty_frames_are_skipped(self) -> None:
        assert bounds_of(None, _points()) is None


def test_page_language_is_pt_br() -> None:
    """Every map page says its language (screen readers read it in Portuguese)."""
    page = base_map(location=(-30.03, -51.23), tiles=None).get_root().render()
    assert page.startswith('<!DOCTYPE html>\n<html lang="pt-BR">')


def test_page_can_be_zoomed() -> None:
    """The viewport lets people zoom the page on a phone (folium's forbids it; WCAG 1.4.4)."""
    page = base_map(location=(-30.03, -51.23), tiles=None).get_root().render()
    assert '<meta name="viewport"' in page
    assert "user-scalable=no" not in page and "maximum-scale" not in page
