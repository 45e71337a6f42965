"""`pontual plan` through the installed console script: figures, clear errors, the reports."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-63.9004, -8.7612]},
            "properties": {"stand_id": "P1", "name": "Praça", "radius_m": 20, "capacity": 4},
        }
    ],
}
FINDINGS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-63.8800, -8.7500]},
            "properties": {
                "finding_id": "F1",
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "stand_id": None,
                "started_at": "2025-05-01T12:00:00Z",
                "ended_at": "2025-05-04T13:00:00Z",
                "confidence": 0.8,
                "details": {
                    "place_id": "x1",
                    "dates": ["2025-05-01", "2025-05-02", "2025-05-04"],
                    "vehicles": ["A", "B"],
                },
            },
        }
    ],
}
TRIPS = (
    "vehicle_id,trip_id,started_at,ended_at,pickup_lat,pickup_lon,dropoff_lat,dropoff_lon,"
    "distance_m,pickup_stand_id\n"
    + "A,A-1,2025-05-01T12:00:00Z,2025-05-01T12:10:00Z,-8.7612,-63.9004,-8.75,-63.88,2000,P1\n" * 3
    + "B,B-1,2025-05-01T12:00:00Z,2025-05-01T12:10:00Z,-8.7500,-63.8800,-8.76,-63.90,2000,\n" * 5
)


def _json(result) -> dict:  # noqa: ANN001 - CompletedProcess
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class TestPlanCommand:
    def test_porto_velho_census(self, run_pontual) -> None:
        """Porto Velho, Censo 2022: 460,413 inhabitants → 658–920 taxis, no database needed."""
        plan = _json(run_pontual("plan", "--municipality", "1100205", "--format", "json"))
        assert (plan["population"], plan["fleet_min"], plan["fleet_max"]) == (460_413, 658, 920)
        assert plan["population_source"].startswith("IBGE, Censo Demográfico 2022")
        assert plan["fleet_current"] is None and plan["accessible_min"] == 19
        assert plan["inhabitants_per_taxi"] is None

    def test_pinto_bandeira_estimate(self, run_pontual) -> None:
        """Pinto Bandeira with the 2024 estimate (2,784): 4 permits."""
        args = ("plan", "--municipality", "4314548", "--year", "2024", "--format", "json")
        plan = _json(run_pontual(*args))
        assert (plan["population"], plan["fleet_min"], plan["fleet_max"]) == (2784, 4, 4)

    @pytest.mark.parametrize("code", ["9999999", "12ab"])
    def test_unknown_code_exits_1(self, run_pontual, code: str) -> None:
        """An unknown municipality code is a pt-BR message on stderr and exit status 1."""
        result = run_pontual("plan", "--municipality", code)
        assert result.returncode == 1
        assert "erro:" in result.stderr and code in result.stderr
        assert "Traceback" not in result.stderr

    def test_no_rule_exits_0_with_message(self, run_pontual) -> None:
        """Porto Alegre's taxi decree has no sizing rule: exit 0, saying none is configured."""
        result = run_pontual("plan", "--municipality", "4314902")
        assert result.returncode == 0
        assert "nenhuma regra de planejamento configurada" in result.stdout
        assert "1.332.570" in result.stdout

    def test_rules_file_for_another_municipality(self, run_pontual, tmp_path: Path) -> None:
        """--rules configures any other municipality (São Paulo, 450–1,000 per taxi)."""
        rules = tmp_path / "sp.toml"
        rules.write_text(
            "[planning]\ninhabitants_per_taxi_min = 450\ninhabitants_per_taxi_max = 1000\n",
            encoding="utf-8",
        )
        args = ("plan", "--municipality", "3550308", "--rules", str(rules), "--format", "json")
        plan = _json(run_pontual(*args))
        pop = plan["population"]
        assert plan["fleet_min"] == -(-pop // 1000) and plan["fleet_max"] == pop // 450
        assert plan["rule"]["source"]["file"] == "sp.toml"

    def test_fleet_gap(self, run_pontual, tmp_path: Path) -> None:
        """A small fleet CSV: active vehicles of the municipality counted, gap and ages reported."""
        fleet = tmp_path / "frota.csv"
        fleet.write_text(
            "vehicle_id,accessible,status,municipality,year\n"
            "PB1,true,active,4314548,2023\n"
            "PB2,false,active,4314548,2018\n"
            "PB3,false,suspended,4314548,2024\n"
            "PV1,false,active,1100205,2024\n",
            encoding="utf-8",
        )
        args = ("plan", "--municipality", "4314548", "--fleet", str(fleet), "--format", "json")
        plan = _json(run_pontual(*args, "--as-of", "2025-06-01"))
        assert plan["fleet_current"] == 2 and plan["accessible_current"] == 1
        assert plan["inhabitants_per_taxi"] == round(plan["population"] / 2)
        assert (plan["fleet_gap"]["status"], plan["fleet_gap"]["missing"]) == ("below", 2)
        assert [v["vehicle_id"] for v in plan["vehicles"]["over_age"]] == ["PB2"]

    def test_html_report(self, run_pontual, tmp_path: Path) -> None:
        """The HTML report has the SVG chart and the map with the demand, stands and candidates."""
        (tmp_path / "stands.geojson").write_text(json.dumps(STANDS), encoding="utf-8")
        (tmp_path / "findings.geojson").write_text(json.dumps(FINDINGS), encoding="utf-8")
        (tmp_path / "trips.csv").write_text(TRIPS, encoding="utf-8")
        out = tmp_path / "plano.html"
        result = run_pontual(
            "plan", "--municipality", "1100205", "--format", "html", "--out", str(out),
            "--trips", str(tmp_path / "trips.csv"), "--stands", str(tmp_path / "stands.geojson"),
            "--findings", str(tmp_path / "findings.geojson"), "--h3-resolution", "8",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        page = out.read_text(encoding="utf-8")
        assert 'id="plan-chart"' in page and "id='planner-map'" in page
        inner = html.unescape(page)  # the map document is the iframe's srcdoc
        assert "Embarques por célula H3 (2)" in inner and "Locais candidatos (1)" in inner
        assert "cdn." not in page
