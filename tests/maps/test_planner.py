"""The planner map renders offline in headless Chromium, alone and inside the HTML report."""

from __future__ import annotations

import datetime as dt

import geopandas as gpd
import pandas as pd
import pytest
import shapely

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
        fmap.save(str(path))
        assert "cdn." not in path.read_text(encoding="utf-8")
        page, errors, failed = open_map(path)
        page.wait_for_selector("path.leaflet-interactive")
        assert errors == []
        assert failed and all("tile.openstreetmap.org" in url for url in failed)
        # 2 cells + 1 coverage + 1 stand + 1 candidate marker
        assert page.locator("path.leaflet-interactive").count() == 5
        labels = page.locator(".leaflet-control-layers-overlays label").all_inner_texts()
        assert any("Embarques por célula H3 (2)" in t for t in labels)
        assert any("Cobertura a pé dos pontos a 400 m" in t for t in labels)
        assert any("Locais candidatos (1)" in t for t in labels)

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
        frame.locator("path.leaflet-interactive").first.wait_for()
        assert frame.locator("path.leaflet-interactive").count() == 5
        assert errors == []
