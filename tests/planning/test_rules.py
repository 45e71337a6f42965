"""Tests of planning.rules: bundled planning rules, --rules files, the no-rule message."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from enforcement.rulebook import Planning
from planning._errors import PlanningRulesError
from planning.rules import bundled_planning_rule, no_rule_message, read_planning_rules


class TestBundledPlanningRule:
    def test_porto_velho(self) -> None:
        """500–700 inhabitants per taxi (art. 5 § 4), census only, 2 % accessible (art. 18)."""
        rule, source = bundled_planning_rule("1100205")
        assert rule is not None and source is not None
        assert (rule.inhabitants_per_taxi_min, rule.inhabitants_per_taxi_max) == (500, 700)
        assert rule.population == "census"
        assert rule.accessible_share_min == Decimal("0.02")
        assert "500 habitantes por táxi" in (rule.excerpt or "")

    def test_pinto_bandeira(self) -> None:
        """One per 600 inhabitants (art. 6), 5 years from manufacture (art. 10), no accessible."""
        rule, _ = bundled_planning_rule("4314548")
        assert rule is not None
        assert rule.inhabitants_per_taxi == 600
        assert (rule.max_vehicle_age_years, rule.age_counted_from) == (5, "manufacture")
        assert rule.accessible_share_min is None and rule.accessible_one_in is None

    def test_fretamento(self) -> None:
        """1 accessible in 10, 15 years from first registration, art. 14's five bands."""
        rule, _ = bundled_planning_rule("4314902", service="fretamento")
        assert rule is not None and not rule.has_sizing
        assert rule.accessible_one_in == 10
        assert (rule.max_vehicle_age_years, rule.age_counted_from) == (15, "first_registration")
        bands = [(b.age_min_years, b.age_max_years, b.interval_days) for b in rule.inspection_bands]
        assert bands == [(0, 3, 120), (4, 7, 90), (8, 9, 60), (10, 11, 45), (12, 15, 30)]

    def test_porto_alegre_taxi_has_no_planning(self) -> None:
        """Porto Alegre's taxi decree has no sizing rule: the rulebook exists, planning is None."""
        rule, source = bundled_planning_rule("4314902")
        assert rule is None and source is not None and "2019" in source["law"]

    def test_no_rulebook(self) -> None:
        """A municipality without a rulebook has neither rule nor source."""
        assert bundled_planning_rule("3550308") == (None, None)


class TestReadPlanningRules:
    def test_reads_a_range(self, tmp_path: Path) -> None:
        """A [planning] table with a range and a share is read and validated."""
        path = tmp_path / "sp.toml"
        path.write_text(
            "[planning]\ninhabitants_per_taxi_min = 400\ninhabitants_per_taxi_max = 900\n"
            "accessible_share_min = 0.05\n",
            encoding="utf-8",
        )
        rule = read_planning_rules(path)
        assert isinstance(rule, Planning) and rule.has_sizing
        assert rule.accessible_share_min == Decimal("0.05")

    @pytest.mark.parametrize(
        ("body", "match"),
        [
            ("x = [", "TOML inválido"),
            ("[other]\na = 1\n", "falta a tabela \\[planning\\]"),
            ("[planning]\ninhabitants_per_taxi = 0\n", "planning.inhabitants_per_taxi"),
            ("[planning]\ninhabitants_per_taxi_x = 5\n", "planning.inhabitants_per_taxi_x"),
            (
                "[planning]\ninhabitants_per_taxi_min = 700\ninhabitants_per_taxi_max = 500\n",
                "_max 500 < inhabitants_per_taxi_min 700",
            ),
            ("[planning]\ninhabitants_per_taxi = 600\ninhabitants_per_taxi_min = 5\n", "not both"),
        ],
    )
    def test_bad_files(self, tmp_path: Path, body: str, match: str) -> None:
        """Invalid files name the file and the field."""
        path = tmp_path / "bad.toml"
        path.write_text(body, encoding="utf-8")
        with pytest.raises(PlanningRulesError, match=match):
            read_planning_rules(path)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is a FileNotFoundError naming it."""
        with pytest.raises(FileNotFoundError, match="regras"):
            read_planning_rules(tmp_path / "none.toml")


class TestNoRuleMessage:
    def test_names_municipality_and_remedy(self) -> None:
        """The message names the municipality, says no rule is configured and who configures
        it, in words: no command-line flag (the console's planners read it)."""
        msg = no_rule_message("3550308", "São Paulo", service="taxi")
        assert "nenhuma regra de planejamento configurada" in msg
        assert "São Paulo (3550308)" in msg
        assert "o administrador do sistema configura a regra da lei municipal" in msg
        assert "--" not in msg and "[planning]" not in msg
