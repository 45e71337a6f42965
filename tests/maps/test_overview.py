"""The overview map renders offline in headless Chromium, with its layers and popups."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from map_factories import click_row, only_tiles_failed, open_offline, overlay_labels

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
        page, errors, failed = open_offline(open_map, fmap, html)
        assert "cdn." not in html.read_text(encoding="utf-8")
        assert errors == []
        assert only_tiles_failed(failed)
        assert page.evaluate("['tracks', 'stands'].map(id => PontualMaps.count(id))") == [2, 3]
        assert overlay_labels(page) == ["Viagens (2)", "Pontos de táxi (3)"]
        popup = click_row(page, "stands", 0)
        assert "Praça da Matriz" in popup and "Embarques" in popup and "12" in popup

    def test_legend_gives_the_classes(self, open_map, tmp_path):
        """The legend names the tracks and gives each colour class's range of the count."""
        fmap = stands_trips_map(
            _stands(),
            values=pd.Series({"1": 12, "3": 1}),
            tracks=_tracks(),
            note="3 pontos de teste.",
            tiles=None,
        )
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "map.html")
        legend = page.inner_text(".pontual-legend")
        assert "Viagem (trajeto GPS de um táxi)" in legend
        assert "Pontos de táxi, pela cor: embarques" in legend
        assert "1 a 2" in legend and "11 a 12" in legend and "nenhum" in legend
        assert "3 pontos de teste." in legend and errors == []

    def test_no_tiles_mode(self, open_map, tmp_path):
        """With tiles=None the map makes no request at all beyond the file."""
        fmap = stands_trips_map(_stands(), tiles=None)
        page, errors, failed = open_offline(open_map, fmap, tmp_path / "map.html")
        assert errors == [] and failed == []
        assert page.evaluate("PontualMaps.count('stands')") == 3

    def test_stands_without_geometry_are_left_out(self):
        """A stand without a location is not drawn (the note says why), not an error."""
        stands = _stands()
        stands.loc[1, "geometry"] = None
        fmap = stands_trips_map(stands, tiles=None, note="1 ponto sem coordenada.")
        html = fmap.get_root().render()
        assert "Pontos de táxi (2)" in html and "1 ponto sem coordenada." in html

    def test_rejects_projected_stands(self):
        """Stands not in EPSG:4326 are refused with a clear message."""
        with pytest.raises(ValueError, match="EPSG:4326"):
            stands_trips_map(_stands().to_crs(31982))
