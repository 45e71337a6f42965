"""The overview map renders offline in headless Chromium, with its layers and popups."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
import pytest
import shapely

from maps.overview import stands_trips_map

pytestmark = pytest.mark.browser


def _stands() -> gpd.GeoDataFrame:
    centres = [(-51.2287, -30.0277), (-51.2200, -30.0300), (-51.2100, -30.0350)]
    return gpd.GeoDataFrame(
        {
            "stand_id": ["1", "2", "3"],
            "name": ["Praça da Matriz", "Mercado", "Rodoviária"],
            "geometry": [shapely.Point(x, y).buffer(0.0006) for x, y in centres],
        },
        crs=4326,
    )


def _tracks() -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {
            "vehicle_id": ["A", "B"],
            "trip_id": ["A-1", "B-1"],
            "geometry": [
                shapely.LineString([(-51.2287, -30.0277), (-51.2100, -30.0350)]),
                shapely.LineString([(-51.2200, -30.0300), (-51.2300, -30.0200)]),
            ],
        },
        crs=4326,
    )


class TestStandsTripsMap:
    def test_offline_layers_and_popup(self, open_map, tmp_path):
        """No CDN, no console error, only tiles fail; 3 stands + 2 tracks drawn; a click opens
        the stand's popup with its count."""
        fmap = stands_trips_map(_stands(), values=pd.Series({"1": 12, "3": 1}), tracks=_tracks())
        html = tmp_path / "map.html"
        fmap.save(str(html))
        assert "cdn." not in html.read_text(encoding="utf-8")
        page, errors, failed = open_map(html)
        page.wait_for_selector("path.leaflet-interactive")
        assert errors == []
        assert failed and all("tile.openstreetmap.org" in url for url in failed)
        # 2 tracks, then per stand its polygon and its marker
        assert page.locator("path.leaflet-interactive").count() == 2 + 3 + 3
        labels = page.locator(".leaflet-control-layers-overlays label").all_inner_texts()
        assert any("Pontos de táxi (3)" in t for t in labels)
        assert any("Viagens (2)" in t for t in labels)
        page.locator("path.leaflet-interactive").nth(5).click()  # the first stand's marker
        popup = page.wait_for_selector(".leaflet-popup-content")
        assert "Praça da Matriz" in popup.inner_text()
        assert "12" in popup.inner_text()

    def test_no_tiles_mode(self, open_map, tmp_path):
        """With tiles=None the map makes no request at all beyond the file."""
        fmap = stands_trips_map(_stands(), tiles=None)
        html = tmp_path / "map.html"
        fmap.save(str(html))
        page, errors, failed = open_map(html)
        page.wait_for_selector("path.leaflet-interactive")
        assert errors == [] and failed == []
        assert page.locator("path.leaflet-interactive").count() == 3 + 3

    def test_rejects_projected_stands(self):
        """Stands not in EPSG:4326 are refused with a clear message."""
        with pytest.raises(ValueError, match="EPSG:4326"):
            stands_trips_map(_stands().to_crs(31982))
