"""The planner map renders offline in headless Chromium, alone and inside the HTML report."""

from __future__ import annotations

import datetime as dt

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from map_factories import only_tiles_failed, open_offline, overlay_labels

from maps.planner import planner_map
from planning.demand import demand_vs_capacity, stand_coverage
from planning.population import bundled_population_table, population_for
from planning.report import build_plan, render_html
from planning.rules import bundled_planning_rule

pytestmark = pytest.mark.browser

CENTRE = (-8.7612, -63.9004)  # Porto Velho


def _frames() -> dict:
    lat, lon = CENTRE
    trips = pd.DataFrame(
        {
            "pickup_lat": [lat] * 4 + [lat + 0.02] * 2,
            "pickup_lon": [lon] * 4 + [lon + 0.02] * 2,
        }
    )
    stands = gpd.GeoDataFrame(
        {"stand_id": ["P1"], "name": ["Praça"], "capacity": pd.array([3], dtype="Int64")},
        geometry=[shapely.Point(lon, lat).buffer(0.0002)],
        crs=4326,
    )
    candidates = gpd.GeoDataFrame(
        {"place_id": ["x1"], "n_days": [4], "n_vehicles": [3]},
        geometry=[shapely.Point(lon + 0.02, lat + 0.02)],
        crs=4326,
    )
    return {
        "areas": demand_vs_capacity(trips, stands, resolution=9, walk_m=400),
        "coverage": stand_coverage(stands, walk_m=400),
        "candidates": candidates,
        "stands": stands,
    }


class TestPlannerMap:
    def test_offline_layers(self, open_map, tmp_path) -> None:
        """No CDN, no console error, only tiles fail; cells, coverage, stand and candidate drawn."""
        fmap = planner_map(**_frames(), walk_m=400)
        path = tmp_path / "planner.html"
        page, errors, failed = open_offline(open_map, fmap, path)
        assert "cdn." not in path.read_text(encoding="utf-8")
        assert errors == []
        assert only_tiles_failed(failed)
        counts = page.evaluate(
            "['coverage', 'cells', 'stands', 'candidates'].map(id => PontualMaps.count(id))"
        )
        assert counts == [1, 2, 1, 1]
        assert overlay_labels(page) == [
            "Cobertura a pé dos pontos a 400 m",
            "Embarques por célula H3 (2)",
            "Pontos de táxi (1)",
            "Locais candidatos (1)",
        ]

    def test_click_and_colour_scale(self, open_map, tmp_path) -> None:
        """A cell's popup gives its pickups and spaces; the legend gives the classes' ranges."""
        fmap = planner_map(**_frames(), walk_m=400, tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "planner.html")
        page.evaluate(
            "['stands', 'coverage', 'candidates'].forEach("
            "id => PontualMaps.maps.map.layers[id].group.remove())"
        )
        cells = page.evaluate("PontualMaps.maps.map.layers['cells'].spec")
        row = cells["props"]["pickups"].index(4)
        lat, lon = CENTRE
        point = page.evaluate(
            f"(() => {{ var m = PontualMaps.maps.map.map; var p = m.latLngToContainerPoint("
            f"[{lat}, {lon}]); var b = m.getContainer().getBoundingClientRect();"
            f" return {{x: b.left + p.x, y: b.top + p.y}}; }})()"
        )
        page.mouse.click(point["x"], point["y"])
        popup = page.wait_for_selector(".leaflet-popup-content").inner_text()
        assert cells["props"]["cell"][row] in popup
        assert "Embarques\t4" in popup and "Vagas a 400 m a pé\t3" in popup
        legend = page.inner_text(".pontual-legend")
        assert "Embarques por célula H3" in legend and "3 a 4" in legend
        assert errors == []

    def test_empty_map(self, open_map, tmp_path) -> None:
        """Without any layer the map still opens (Brazil), without errors."""
        path = tmp_path / "empty.html"
        planner_map(tiles=None).save(str(path))
        page, errors, _ = open_map(path)
        page.wait_for_selector(".leaflet-container")
        assert errors == []

    def test_inside_the_report(self, open_map, tmp_path) -> None:
        """The HTML report shows the SVG chart and the map in its iframe, without errors."""
        rule, source = bundled_planning_rule("1100205")
        plan = build_plan(
            population=population_for(
                bundled_population_table(), municipality="1100205", year=2022
            ),
            rule=rule,
            rule_source=source,
            as_of=dt.date(2025, 6, 1),
        )
        fmap = planner_map(**_frames(), walk_m=400)
        path = tmp_path / "plano.html"
        path.write_text(render_html(plan, map_html=fmap.get_root().render()), encoding="utf-8")
        page, errors, _ = open_map(path)
        assert page.locator("svg#plan-chart rect.allowed").count() == 1
        frame = page.frame_locator("iframe#planner-map")
        frame.locator(".pontual-legend").wait_for()
        assert "Embarques por célula H3" in frame.locator(".pontual-legend").inner_text()
        assert frame.locator(".leaflet-control-layers-overlays label").count() == 4
        assert errors == []
