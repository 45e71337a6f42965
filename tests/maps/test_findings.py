"""The enforcement map renders offline in headless Chromium: kinds, areas, detours, replay."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from map_factories import (
    T0,
    click_row,
    make_findings,
    make_pings,
    make_stands,
    only_tiles_failed,
    open_offline,
    overlay_labels,
)

from maps._errors import MapInputError
from maps.findings import findings_map

pytestmark = pytest.mark.browser

DRIVEN = [[-51.2250, -30.0250], [-51.2230, -30.0290], [-51.2150, -30.0320]]
REFERENCE = [[-51.2250, -30.0250], [-51.2150, -30.0320]]


def _findings():
    return make_findings(
        [
            {
                "kind": "unlicensed_stand_use",
                "finding_id": "F-unl-1",
                "stand_id": "1",
                "minute": 0,
                "geometry": shapely.Point(-51.2287, -30.0277),
            },
            {
                "kind": "unlicensed_stand_use",
                "finding_id": "F-unl-2",
                "stand_id": "2",
                "minute": 30,
                "geometry": shapely.Point(-51.2200, -30.0300),
            },
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "minute": 10,
                "details": {"n_vehicles": 4, "n_days": 3, "n_stops": 9},
                "geometry": shapely.Point(-51.2150, -30.0250).buffer(0.001),
            },
            {
                "kind": "longer_route",
                "finding_id": "F-route",
                "minute": 20,
                "details": {
                    "driven_m": 5000.0,
                    "reference_m": 3000.0,
                    "ratio": 1.6667,
                    "driven_line": DRIVEN,
                    "reference_line": REFERENCE,
                },
                "geometry": shapely.LineString(DRIVEN),
            },
        ]
    )


def _fixes():
    return make_pings(
        [("V1", m, -30.0277 + m * 1e-4, -51.2287, "free") for m in range(0, 40, 2)]
        + [("V2", 5, -30.0300, -51.2200, "occupied")]
    )


class TestFindingsMap:
    def test_offline_layers_counts_and_popups(self, open_map, tmp_path):
        """No CDN, no console error, only tiles fail; a layer per kind with its count, the
        illegal-stand area as a polygon, the detour's two lines; clicks open popups."""
        fmap = findings_map(make_stands(), _findings(), fixes=_fixes())
        html = tmp_path / "enforcement.html"
        page, errors, failed = open_offline(open_map, fmap, html)
        text = html.read_text(encoding="utf-8")
        assert "cdn" not in text and "<script src=" not in text
        assert errors == []
        assert only_tiles_failed(failed)
        labels = overlay_labels(page)
        assert labels[:6] == [
            "Pontos de táxi (3)",
            "Formação de ponto irregular (1)",
            "Percurso mais longo (1)",
            "Embarque em ponto sem licença (2)",
            "Evidência de desvio: trajeto × rota de referência (1)",
            "Posições GPS recentes",
        ]
        counts = page.evaluate(
            "['stands','kind:unlicensed_stand_use','kind:illegal_stand_formation',"
            "'kind:longer_route','detours'].map(id => PontualMaps.count(id))"
        )
        assert counts == [3, 2, 1, 1, 2]  # the detour: driven + reference lines
        spec = page.evaluate("PontualMaps.maps.map.layers['kind:illegal_stand_formation'].spec")
        assert spec["shapes"][0]["type"] == "Polygon"
        assert "Rodoviária" in click_row(page, "stands", 2)  # findings lie over stands 1 and 2

    def test_finding_popup_shows_evidence(self, open_map, tmp_path):
        """A longer-route finding's popup names the kind, the id and the measured lengths."""
        fmap = findings_map(make_stands(), _findings(), tiles=None)
        page, errors, failed = open_offline(open_map, fmap, tmp_path / "map.html")
        page.evaluate("PontualMaps.maps.map.layers['stands'].group.remove()")
        popup = click_row(page, "kind:longer_route", 0)
        assert "Percurso mais longo" in popup
        assert "F-route" in popup
        assert "percorrido 5,00 km × referência 3,00 km (razão 1,67)" in popup
        assert errors == [] and failed == []

    def test_time_slider_replays(self, open_map, tmp_path):
        """Moving the slider shows the findings started by then and the fixes of the trail."""
        fmap = findings_map(make_stands(), _findings(), fixes=_fixes(), tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "map.html")
        at = int((T0 + pd.Timedelta(minutes=15)).timestamp())
        page.locator(".pontual-range").fill(str(at))
        visible = page.evaluate(
            "['kind:unlicensed_stand_use','kind:illegal_stand_formation','kind:longer_route',"
            "'fixes'].map(id => PontualMaps.count(id))"
        )
        # findings from 0 and 10 min; the 10-min trail keeps V1's fixes at 6..14 min, not
        # V2's at 5 min (exactly 10 min old)
        assert visible == [1, 1, 0, 5]
        assert "04/03/2024" in page.inner_text(".pontual-time")
        page.locator(".pontual-range").fill(str(int((T0 + pd.Timedelta(hours=1)).timestamp())))
        assert page.evaluate("PontualMaps.count('kind:unlicensed_stand_use')") == 2
        assert errors == []

    def test_text_with_template_marks_shown_as_written(self, open_map, tmp_path):
        """A cell holding Jinja marks reaches the page as written: the page is not a template
        (``{% if`` without its end once failed the render)."""
        findings = _findings()
        findings.loc[0, "vehicle_id"] = "{{ placa }}{% if x %}"
        fmap = findings_map(make_stands(), findings, tiles=None)
        page, errors, failed = open_offline(open_map, fmap, tmp_path / "map.html")
        page.evaluate("PontualMaps.maps.map.layers['stands'].group.remove()")
        assert "{{ placa }}{% if x %}" in click_row(page, "kind:unlicensed_stand_use", 0)
        assert errors == [] and failed == []

    def test_stands_only(self, open_map, tmp_path):
        """With no findings the map shows the stands, without slider or error."""
        findings = _findings().iloc[0:0]
        page, errors, failed = open_offline(
            open_map, findings_map(make_stands(), findings, tiles=None), tmp_path / "map.html"
        )
        assert overlay_labels(page) == ["Pontos de táxi (3)"]
        assert page.locator(".pontual-range").count() == 0
        assert errors == [] and failed == []

    def test_rejects_bad_frames(self):
        """Projected stands and naive finding times are refused with a named error."""
        with pytest.raises(MapInputError, match="EPSG:4326"):
            findings_map(make_stands().to_crs(31982), _findings())
        naive = _findings()
        naive["started_at"] = naive["started_at"].dt.tz_localize(None)
        with pytest.raises(MapInputError, match="sem fuso"):
            findings_map(make_stands(), naive)


class TestMeasuredInPopups:
    @pytest.mark.parametrize(
        ("kind", "details", "expected"),
        [
            (
                "gps_anomaly",
                {
                    "distance_m": 2217.4,
                    "dt_s": 15.0,
                    "implied_speed_kmh": 532.2,
                    "thresholds": {"max_speed_kmh": 250.0},
                },
                "salto de 2,22 km em 15 s: 532 km/h (limite 250 km/h)",
            ),
            (
                "gps_anomaly",
                {
                    "pattern": "two_tracks",
                    "distance_m": 6000.0,
                    "dt_s": 7.5,
                    "implied_speed_kmh": 2880.0,
                    "n_anomalous_steps": 4319,
                    "tracks": [{"n_fixes": 2160}, {"n_fixes": 2160}],
                },
                "posições alternando entre dois trajetos (2160 e 2160 posições; 4319 trocas): "
                "dois rastreadores no mesmo prefixo",
            ),
            (
                "tracking_gap",
                {"gap_s": 1500.0, "thresholds": {"max_gap_s": 600.0}},
                "sem posições por 25,0 min (limite 10,0 min)",
            ),
            (
                "outside_municipality",
                {"distance_to_boundary_m": 854.29, "thresholds": {"boundary_tolerance_m": 200.0}},
                "embarque a 854 m fora do limite (tolerância 200 m)",
            ),
        ],
    )
    def test_summary_says_what_was_measured(self, kind, details, expected):
        """The popup line gives the measure and the threshold it was compared with."""
        from maps.findings import _summary

        assert _summary(kind, details) == expected

    def test_gps_jump_popup(self, open_map, tmp_path):
        """A GPS jump's popup shows speed and distance, and no empty 'Ponto —' row."""
        jump = make_findings(
            [
                {
                    "kind": "gps_anomaly",
                    "finding_id": "F-jump",
                    "details": {
                        "distance_m": 2217.4,
                        "dt_s": 15.0,
                        "implied_speed_kmh": 532.2,
                        "thresholds": {"max_speed_kmh": 250.0},
                    },
                    "geometry": shapely.Point(-51.2200, -30.0250),
                }
            ]
        )
        fmap = findings_map(make_stands(), jump, tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "map.html")
        page.evaluate("PontualMaps.maps.map.layers['stands'].group.remove()")
        page.evaluate(
            "PontualMaps.maps.map.layers['kind:gps_anomaly'].group.addTo(PontualMaps.maps.map.map)"
        )
        popup = click_row(page, "kind:gps_anomaly", 0)
        assert "532 km/h (limite 250 km/h)" in popup and "2,22 km" in popup
        assert "Ponto" not in popup and errors == []


def _many() -> gpd.GeoDataFrame:
    """Ten findings: six boardings without licence, one barred operation, three GPS jumps."""
    rows = [
        {"kind": "unlicensed_stand_use", "finding_id": f"F-unl-{k}", "minute": k} for k in range(6)
    ]
    rows += [{"kind": "operating_while_barred", "finding_id": "F-barred", "minute": 7}]
    rows += [{"kind": "gps_anomaly", "finding_id": f"F-gps-{k}", "minute": 8 + k} for k in range(3)]
    for k, row in enumerate(rows):
        row["geometry"] = shapely.Point(-51.2287 + k * 2e-4, -30.0277)
    return make_findings(rows)


class TestSampledMap:
    def test_says_how_many_of_how_many(self, open_map, tmp_path):
        """Over ``max_findings``: labels and legend say 'N de M' per kind, a visible note says
        the map shows 4 of 10 and findings.geojson has all; the page holds the sample's ids."""
        from maps.sample import sample_findings

        findings = _many()
        fmap = findings_map(make_stands(), findings, max_findings=4, tiles=None)
        page, errors, failed = open_offline(open_map, fmap, tmp_path / "map.html")
        assert errors == [] and failed == []
        assert overlay_labels(page)[1:4] == [
            "Salto de GPS impossível (1 de 3)",
            "Operação irregular (situação/documentos) (1)",
            "Embarque em ponto sem licença (2 de 6)",
        ]
        note = page.locator(".pontual-note")
        assert note.is_visible()
        assert note.inner_text() == (
            "Achados: o mapa mostra 4 de 10, uma amostra fixa de cada tipo (quantos de cada "
            "tipo: na legenda e nas camadas); todos estão em findings.geojson."
        )
        legend = page.locator(".pontual-legend").inner_text()
        assert "Embarque em ponto sem licença: 2 de 6" in legend
        assert "Salto de GPS impossível: 1 de 3 (camada desligada" in legend
        ids = page.evaluate(
            "['kind:gps_anomaly','kind:operating_while_barred','kind:unlicensed_stand_use']"
            ".flatMap(id => PontualMaps.maps.map.layers[id].spec.props.finding_id)"
        )
        want = sample_findings(findings, cap=4)
        assert sorted(ids) == sorted(want["finding_id"]) and len(ids) == 4

    def test_at_the_cap_as_before(self, open_map, tmp_path):
        """With as many findings as the cap, every one is drawn, labels as before, no note."""
        fmap = findings_map(make_stands(), _many(), max_findings=10, tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "map.html")
        assert overlay_labels(page)[1:4] == [
            "Salto de GPS impossível (3)",
            "Operação irregular (situação/documentos) (1)",
            "Embarque em ponto sem licença (6)",
        ]
        assert page.locator(".pontual-note").count() == 0 and errors == []


class TestEveryKind:
    def test_every_kind_has_a_colour_and_a_pt_br_label(self):
        """Each kind the detectors write has its own colour (not the unknown's black) and its
        pt-BR name as label."""
        from maps.findings import KIND_LABELS, UNKNOWN_KIND_COLOUR
        from tracking.detectors.findings import KIND_NAMES, KINDS

        assert [k for k in KINDS if k not in KIND_LABELS] == []
        assert {k: KIND_LABELS[k][0] for k in KINDS} == {k: KIND_NAMES[k] for k in KINDS}
        colours = [KIND_LABELS[k][1] for k in KINDS]
        assert len(set(colours)) == len(KINDS) and UNKNOWN_KIND_COLOUR not in colours

    def test_legend_and_layers_name_every_kind_in_pt_br(self, open_map, tmp_path):
        """A finding of each kind: the legend and the layer control give pt-BR names with their
        colours, never a code; driver_not_allowed's markers are not black."""
        from tracking.detectors.findings import KIND_NAMES, KINDS

        rows = [
            {"kind": k, "geometry": shapely.Point(-51.2287 + 0.001 * i, -30.0277)}
            for i, k in enumerate(KINDS)
        ]
        fmap = findings_map(make_stands(), make_findings(rows), tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "map.html")
        assert errors == []
        legend = page.locator(".pontual-legend").inner_text()
        labels = " ".join(overlay_labels(page))
        for kind in KINDS:
            assert KIND_NAMES[kind] in legend and f"{KIND_NAMES[kind]} (1)" in labels
            assert kind not in legend and kind not in labels
        style = page.evaluate(
            "PontualMaps.maps.map.layers['kind:driver_not_allowed'].spec.style.color"
        )
        assert style.lower() not in ("#000000", "black")
