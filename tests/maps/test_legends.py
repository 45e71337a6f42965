"""Every map of the demo explains itself: a title, and a legend entry for each visible layer.

The six pages ``pontual demo`` writes, built here without the database from the bundled real
data (the first 300 Porto trips against the 63 Porto stands, and Porto Alegre's stands), and
opened offline in headless Chromium.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import geopandas as gpd
import pytest

from api.cli_demo import DATA_DIR, _paths, _poa_map, _tracks
from api.demo_maps import demo_maps
from engines.pipeline import AnalysisParams, analyze_pings
from maps.overview import stands_trips_map
from stands.layers import read_porto_stands
from tracking.porto import read_porto_trips

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
MAPS = ("pontos (supervisor)", "fiscalização", "planejamento", "cidadão", "embarques", "poa")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's six map pages, from real data (a Porto sample; Porto Alegre's stands)."""
    out = tmp_path_factory.mktemp("demo_maps")
    paths = _paths(DATA_DIR)
    pings, rejected, _ = read_porto_trips(paths["porto_trips"])
    first = pings["vehicle_id"].drop_duplicates().iloc[:60]
    pings = pings.loc[pings["vehicle_id"].isin(first)].reset_index(drop=True)
    stands = read_porto_stands(paths["porto_stands"], radius_m=100.0)
    boundary = gpd.read_file(paths["porto_boundary"]).geometry.union_all()
    result = analyze_pings(
        pings, rejected, stands, boundary=boundary, params=AnalysisParams(timezone="Europe/Lisbon")
    )
    found = demo_maps(result, out, timezone="Europe/Lisbon", tiles=None)
    from maps.findings import findings_map

    (out / "porto").mkdir(exist_ok=True)
    findings_map(
        result.stands, result.findings, fixes=result.pings, timezone="Europe/Lisbon", tiles=None
    ).save(str(found["fiscalização"]))
    boardings = out / "porto_map.html"
    stands_trips_map(
        result.stands,
        values=result.trips["pickup_stand_id"].dropna().value_counts(),
        tracks=gpd.GeoDataFrame(_tracks(result.pings), crs=4326),
        title="Porto: embarques por ponto e viagens — Pontual",
        tiles=None,
    ).save(str(boardings))
    return {**found, "embarques": boardings, "poa": _poa_map(paths, out, None)}


def _open(open_map: Callable, path: Path):
    page, errors, failed = open_map(path)
    page.wait_for_function("window.PontualMaps && PontualMaps.ready")
    return page, errors, failed


VISIBLE = """() => {
  const s = PontualMaps.maps.map;
  return Object.keys(s.layers).map(id => [id, s.map.hasLayer(s.layers[id].group),
                                          s.layers[id].spec.label]);
}"""


class TestEveryMapExplainsItself:
    @pytest.mark.parametrize("name", MAPS)
    def test_title_and_a_legend_entry_per_visible_layer(self, pages, open_map, name):
        """The page has a pt-BR title; each visible layer has a legend entry, not dimmed."""
        page, errors, failed = _open(open_map, pages[name])
        assert errors == [] and failed == []
        title = page.title()
        assert title.endswith("— Pontual") and len(title) > len("— Pontual") + 5
        layers = page.evaluate(VISIBLE)
        assert [label for _, on, label in layers if on], "no visible layer"
        for layer_id, on, label in layers:
            rows = page.locator(f".pontual-legend [data-layer='{layer_id}']")
            assert rows.count() >= 1, f"{name}: no legend entry for {label!r}"
            state = rows.first.get_attribute("class") or ""
            assert ("pontual-off" in state) == (not on), f"{name}: {label!r} on={on}"
            assert rows.first.inner_text().strip()

    @pytest.mark.parametrize("name", MAPS)
    def test_leaflet_controls_speak_portuguese(self, pages, open_map, name):
        """Zoom buttons, the layer control's button and the credit's link are named in pt-BR
        (they were "Zoom in", "Layers", "A JavaScript library for interactive maps")."""
        page, _, _ = _open(open_map, pages[name])
        assert page.get_attribute(".leaflet-control-zoom-in", "title") == "Aproximar"
        assert page.get_attribute(".leaflet-control-zoom-out", "title") == "Afastar"
        toggle = page.locator(".leaflet-control-layers-toggle")
        if toggle.count():
            assert toggle.first.get_attribute("aria-label") == "Camadas"
        credit = page.inner_html(".leaflet-control-attribution")
        assert "interactive maps" not in credit and "Biblioteca JavaScript" in credit

    def test_gps_jumps_start_hidden(self, pages, open_map):
        """On the enforcement map the GPS jumps are off at first, their legend entry says so."""
        page, _, _ = _open(open_map, pages["fiscalização"])
        layers = {layer_id: on for layer_id, on, _ in page.evaluate(VISIBLE)}
        assert layers.get("kind:gps_anomaly") is False
        legend = page.inner_text(".pontual-legend")
        assert "Salto de GPS impossível (camada desligada: ligue-a no controle)" in legend
        page.locator(".leaflet-control-layers-overlays label", has_text="Salto de GPS").click()
        row = page.locator(".pontual-legend [data-layer='kind:gps_anomaly']")
        assert "pontual-off" not in (row.get_attribute("class") or "")

    def test_fixes_layer_named_for_people(self, pages, open_map):
        """No internal counters in layer names; the legend says how fixes were sampled."""
        page, _, _ = _open(open_map, pages["fiscalização"])
        labels = [label for _, _, label in page.evaluate(VISIBLE)]
        assert "Posições GPS recentes" in labels
        assert not [label for label in labels if "1 a cada" in label or "replay;" in label]
        assert "Posições: as dos 10 min antes do instante escolhido no replay" in page.inner_text(
            ".pontual-legend"
        )

    def test_poa_stands_note(self, pages, open_map):
        """Porto Alegre's map draws 363 of 379 stands and says why the 16 others are missing."""
        page, _, _ = _open(open_map, pages["poa"])
        assert page.evaluate("PontualMaps.count('stands')") == 363
        legend = page.inner_text(".pontual-legend")
        assert "16 dos 379 pontos do arquivo não aparecem no mapa" in legend
        assert "ponto extinto segundo o nome no arquivo de origem (484)" in legend
        assert "coordenada ausente ou inválida no arquivo de origem (441, 468)" in legend
        assert "Pontos de táxi, pela cor: prefixos licenciados" in legend


def test_on_a_phone_the_controls_start_folded(pages, browser):
    """At 390 px the layer control is a button and the legend its title: the map shows; a tap
    on the title opens the legend, a tap on the button the layers."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        context.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file://") else route.abort()
            ),
        )
        page = context.new_page()
        page.goto(pages["fiscalização"].as_uri())
        page.wait_for_function("window.PontualMaps && PontualMaps.ready")
        layers = page.locator(".leaflet-control-layers")
        assert "leaflet-control-layers-expanded" not in (layers.get_attribute("class") or "")
        legend = page.locator(".pontual-legend details")
        assert legend.get_attribute("open") is None
        assert not page.locator(".pontual-legend [data-layer]").first.is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "map-phone-folded.png"))
        page.locator(".pontual-legend summary").click()
        assert page.locator(".pontual-legend [data-layer]").first.is_visible()
        page.screenshot(path=str(ARTIFACTS / "map-phone-legend-open.png"))
        box = page.locator(".pontual-legend").bounding_box()
        assert box is not None and box["width"] < 0.8 * 390  # the map shows beside it
    finally:
        context.close()
