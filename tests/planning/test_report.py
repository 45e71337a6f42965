"""Tests of planning.report: the plan's figures, and its table, JSON and HTML renderings."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from planning.population import bundled_population_table, population_for
from planning.report import build_plan, chart_svg, render_html, render_json, render_table
from planning.rules import RULES_FLAG_HINT, bundled_planning_rule

AS_OF = dt.date(2025, 6, 1)
KEYS = {
    "municipality",
    "population",
    "population_source",
    "rule",
    "fleet_min",
    "fleet_max",
    "fleet_current",
    "accessible_min",
    "accessible_current",
}


def _plan(code: str, *, year: int = 2022, service: str = "taxi", fleet=None) -> dict:
    rule, source = bundled_planning_rule(code, service=service)
    return build_plan(
        population=population_for(bundled_population_table(), municipality=code, year=year),
        service=service,
        rule=rule,
        rule_source=source,
        no_rule_message=None if rule else "nenhuma regra de planejamento configurada",
        fleet=fleet,
        fleet_source="frota.csv" if fleet is not None else None,
        as_of=AS_OF,
    )


def _fleet(n: int, *, accessible: int, years: list[int] | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "vehicle_id": [f"V{i}" for i in range(n)],
            "accessible": [i < accessible for i in range(n)],
            "year": pd.array(years or [2024] * n, dtype="Int64"),
        }
    )


class TestBuildPlan:
    def test_porto_velho_without_fleet(self) -> None:
        """658–920 taxis; accessible on the largest allowed fleet (2 % of 920 → 19); no fleet."""
        plan = _plan("1100205")
        assert set(plan) >= KEYS
        assert (plan["population"], plan["fleet_min"], plan["fleet_max"]) == (460_413, 658, 920)
        assert plan["fleet_current"] is None and plan["fleet_gap"]["status"] == "unknown"
        assert (plan["accessible_min"], plan["accessible_basis"]) == (19, "frota máxima permitida")
        assert plan["rule"]["rounding"].startswith("frota_min = ceil(população / 700)")
        assert [p["provision"] for p in plan["provisions"]] == ["art. 5º, § 4º", "art. 18"]

    def test_a_fleet_that_does_not_say_which_are_accessible(self) -> None:
        """600 taxis, two flagged accessible and the rest unknown: the fleet is counted, the
        accessible ones are unknown (no shortfall claimed), and the message says why."""
        fleet = _fleet(600, accessible=2).astype({"accessible": "object"})
        fleet.loc[2:, "accessible"] = None
        plan = _plan("1100205", fleet=fleet)
        assert (plan["fleet_current"], plan["accessible_current"]) == (600, None)
        gap = plan["accessible_gap"]
        assert (gap["status"], gap["missing"]) == ("unknown", None)
        assert gap["message"] == (
            "acessíveis desconhecidos: a frota não diz quais veículos são acessíveis"
        )

    def test_porto_velho_small_fleet_gap(self) -> None:
        """A 600-taxi fleet with 10 accessible: 58 short of 658, 2 short of 12 (2 % of 600)."""
        plan = _plan("1100205", fleet=_fleet(600, accessible=10))
        assert plan["fleet_current"] == 600
        assert (plan["fleet_gap"]["status"], plan["fleet_gap"]["missing"]) == ("below", 58)
        assert (plan["accessible_min"], plan["accessible_current"]) == (12, 10)
        assert plan["accessible_gap"]["missing"] == 2

    def test_estimate_with_census_rule_is_noted(self) -> None:
        """Porto Velho's law wants the census: with the 2024 estimate the plan says so, in
        words (no command-line flag: the console shows the notes)."""
        plan = _plan("1100205", year=2024)
        assert (plan["fleet_min"], plan["fleet_max"]) == (736, 1029)
        (note,) = [n for n in plan["notes"] if "censo" in n]
        assert note.endswith("apenas referência; use a população do censo de 2022")
        assert "--" not in note

    def test_pinto_bandeira_age(self) -> None:
        """4 permits for 2,723 inhabitants; a 2019 car is over 5 years in 2025."""
        plan = _plan("4314548", fleet=_fleet(5, accessible=0, years=[2019, 2020, 2021, 2022, 2023]))
        assert (plan["fleet_min"], plan["fleet_max"], plan["fleet_current"]) == (4, 4, 5)
        assert plan["fleet_gap"]["excess"] == 1
        assert plan["accessible_min"] is None
        assert [v["vehicle_id"] for v in plan["vehicles"]["over_age"]] == ["V0"]

    @pytest.mark.parametrize(("n", "required"), [(9, 1), (10, 1), (11, 2), (25, 3)])
    def test_fretamento_one_in_ten(self, n: int, required: int) -> None:
        """The fretamento needs one accessible vehicle in every 10 used (rounded up)."""
        plan = _plan("4314902", service="fretamento", fleet=_fleet(n, accessible=1))
        assert plan["fleet_min"] is None and plan["fleet_max"] is None
        assert (plan["accessible_min"], plan["accessible_basis"]) == (required, "frota atual")

    def test_no_rule(self) -> None:
        """Porto Alegre's taxi: population given, no rule, no figures, the message."""
        plan = _plan("4314902")
        assert plan["population"] == 1_332_570
        assert plan["rule"] is None and plan["fleet_min"] is None
        assert "nenhuma regra" in plan["rule_message"]

    def test_no_rule_still_checks_the_seals_not_the_age(self) -> None:
        """Without a rule (Porto Alegre's taxi) a seal past its date is still expired (no band
        needed) and the age is said to be unchecked, not "0 acima da idade máxima"."""
        fleet = _fleet(3, accessible=0, years=[1990, 2020, 2024])
        fleet["inspection_valid_until"] = [
            AS_OF - dt.timedelta(days=1),
            AS_OF + dt.timedelta(days=90),
            None,
        ]
        plan = _plan("4314902", fleet=fleet)
        assert plan["vehicles"]["checked"] == 3 and plan["vehicles"]["max_age_years"] is None
        assert [v["vehicle_id"] for v in plan["vehicles"]["inspection"]] == ["V0"]
        assert plan["vehicles"]["over_age"] == []
        text = render_table(plan)
        assert "idade não verificada" in text and "acima da idade máxima" not in text
        assert "idade não verificada" in render_html(plan)

    def test_json_serialisable(self) -> None:
        """The plan is plain JSON."""
        plan = _plan("1100205", fleet=_fleet(700, accessible=14))
        assert json.loads(render_json(plan))["fleet_current"] == 700


class TestRenderTable:
    def test_figures_in_portuguese(self) -> None:
        """The table gives the population with pt-BR digits and the allowed range."""
        text = render_table(_plan("1100205"))
        assert "460.413" in text and "mínimo 658, máximo 920" in text
        assert "--rules" not in text and "--year" not in text  # a rule, and the census

    def test_rounding_in_words(self) -> None:
        """The rounding is told with the plan's own figures, as on the console's page, not as
        a formula (the JSON keeps the formula)."""
        for page in (render_table(_plan("1100205")), render_html(_plan("1100205"))):
            assert "ceil(" not in page and "floor(" not in page
            assert (
                "Frota mínima: 658 táxis, pois 460.413 habitantes divididos por 700 (o máximo de "
                "habitantes por táxi) dão 657,7, arredondado para cima." in page
            )

    def test_cli_options_for_what_is_lacking(self) -> None:
        """Without a rule the table says how ``pontual plan`` takes one (--rules); with an
        estimate where the law wants the census, --year; the plan itself names neither."""
        no_rule = _plan("4314902")
        assert RULES_FLAG_HINT in render_table(no_rule)
        assert "--rules" not in json.dumps(no_rule)
        estimate = _plan("1100205", year=2024)
        assert "Com a população do censo: --year 2022." in render_table(estimate)
        assert "--year" not in json.dumps(estimate)


class TestChartSvg:
    def test_range_and_current(self) -> None:
        """The allowed range is a rect, the current fleet a line; out of range in red."""
        svg = chart_svg(_plan("1100205", fleet=_fleet(600, accessible=10)))
        assert svg.startswith("<svg") and 'class="allowed"' in svg
        assert 'class="current"' in svg and "#c62828" in svg
        assert 'class="required"' in svg and 'class="present"' in svg

    def test_numbers_in_portuguese(self) -> None:
        """The chart writes its figures as the table does: 1.200, not 1200."""
        svg = chart_svg(_plan("1100205", fleet=_fleet(1200, accessible=10)))
        assert ">atual 1.200</text>" in svg and "<title>atual: 1.200</title>" in svg

    def test_each_panel_has_its_own_labelled_axis(self) -> None:
        """2 accessible taxis of 74 required draw a short bar on an axis ending at 100, not one
        as long as a fleet of thousands on the fleet's axis; the chart scales to a phone."""
        import re

        plan = {
            "fleet_min": 2100,
            "fleet_max": 2800,
            "fleet_current": 3696,
            "accessible_min": 74,
            "accessible_current": 2,
        }
        svg = chart_svg(plan)
        assert 'viewBox="0 0 640 ' in svg and 'width="100%"' in svg
        ends = re.findall(r'text-anchor="end">([\d.]+)</text>', svg)
        assert ends == ["5.000", "100"]

        def width(cls: str) -> float:
            found = re.search(rf'class="{cls}" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)
            assert found is not None, cls
            return float(found.group(1))

        assert width("present") / width("required") == pytest.approx(2 / 74, abs=0.01)


class TestRenderHtml:
    def test_chart_and_map(self) -> None:
        """The report embeds the SVG chart and the map document (iframe srcdoc)."""
        page = render_html(_plan("1100205"), map_html="<html><body>MAPA</body></html>")
        assert '<svg xmlns="http://www.w3.org/2000/svg" id="plan-chart"' in page
        assert "id='planner-map'" in page and "MAPA" in page
        assert "500 habitantes por táxi" in page

    def test_no_rule_message_shown(self) -> None:
        """Without a rule the report says so, and how ``pontual plan`` takes one."""
        page = render_html(_plan("4314902"))
        assert "id='no-rule'" in page and "--rules ARQUIVO.toml" in page
