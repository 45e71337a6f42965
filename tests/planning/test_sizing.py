"""Tests of planning.sizing: allowed fleet and accessible vehicles, rounding for compliance."""

from __future__ import annotations

from decimal import Decimal

import pytest

from planning._errors import PlanningError
from planning.sizing import accessible_required, allowed_fleet, gap


class TestAllowedFleet:
    def test_porto_velho_census_2022(self) -> None:
        """460,413 inhabitants at 500–700 per taxi: 658 (657.7 up) to 920 (920.8 down)."""
        assert allowed_fleet(
            460_413, inhabitants_per_taxi_min=500, inhabitants_per_taxi_max=700
        ) == (658, 920)

    def test_porto_velho_estimate_2024(self) -> None:
        """514,873 inhabitants: 736 (735.5 up) to 1029 (1029.7 down)."""
        assert allowed_fleet(
            514_873, inhabitants_per_taxi_min=500, inhabitants_per_taxi_max=700
        ) == (736, 1029)

    @pytest.mark.parametrize(
        ("population", "expected"),
        [(2723, (4, 4)), (2784, (4, 4)), (2400, (4, 4)), (2399, (3, 3)), (599, (0, 0))],
    )
    def test_fixed_proportion_floors_both(self, population: int, expected: tuple) -> None:
        """One per 600: every permit has its 600 inhabitants (floor), exact multiples included."""
        assert allowed_fleet(population, inhabitants_per_taxi=600) == expected

    @pytest.mark.parametrize(
        ("population", "expected"),
        [
            (7000, (10, 14)),  # exact multiples stay exact
            (7001, (11, 14)),  # one inhabitant more needs one more taxi for the 700 maximum
            (6999, (10, 13)),  # one fewer drops a taxi from the 500 minimum
            (400, (1, 0)),  # too small for any whole fleet
            (0, (0, 0)),
        ],
    )
    def test_range_edges(self, population: int, expected: tuple) -> None:
        """ceil for the minimum, floor for the maximum: both bounds keep the ratio."""
        got = allowed_fleet(population, inhabitants_per_taxi_min=500, inhabitants_per_taxi_max=700)
        assert got == expected
        low, high = got
        if low:
            assert population / low <= 700
        if high:
            assert population / high >= 500

    def test_one_sided_rule(self) -> None:
        """A rule with only a minimum of inhabitants per taxi gives only a maximum fleet."""
        assert allowed_fleet(1000, inhabitants_per_taxi_min=300) == (None, 3)

    def test_both_forms_refused(self) -> None:
        """A fixed proportion and a range together are refused."""
        with pytest.raises(PlanningError, match="não ambos"):
            allowed_fleet(1000, inhabitants_per_taxi=600, inhabitants_per_taxi_min=500)

    def test_negative_population_refused(self) -> None:
        """A negative population names the argument."""
        with pytest.raises(PlanningError, match="'population' era -1"):
            allowed_fleet(-1, inhabitants_per_taxi=600)


class TestAccessibleRequired:
    @pytest.mark.parametrize(
        ("fleet", "expected"), [(920, 19), (658, 14), (50, 1), (51, 2), (0, 0), (100, 2)]
    )
    def test_share_rounds_up_exactly(self, fleet: int, expected: int) -> None:
        """2 % rounded up, with exact decimal arithmetic (2 % of 100 is 2, not 3)."""
        assert accessible_required(fleet, share_min=Decimal("0.02")) == expected

    def test_float_share_has_no_float_error(self) -> None:
        """7 % of 100 is 7 (0.07 × 100 in floating point is 7.000000000000001)."""
        assert accessible_required(100, share_min=0.07) == 7

    @pytest.mark.parametrize(("fleet", "expected"), [(1, 1), (10, 1), (11, 2), (20, 2), (0, 0)])
    def test_one_in_ten(self, fleet: int, expected: int) -> None:
        """Fretamento: one accessible in every 10 used, at least one when there is a vehicle."""
        assert accessible_required(fleet, one_in=10) == expected

    def test_no_rule_is_none(self) -> None:
        """Without a rule nothing is required (None, not 0)."""
        assert accessible_required(10) is None

    def test_both_rules_refused(self) -> None:
        """A share and a one-in rule together are refused."""
        with pytest.raises(PlanningError, match="não ambos"):
            accessible_required(10, share_min="0.02", one_in=10)


class TestGap:
    @pytest.mark.parametrize(
        ("current", "status", "missing", "excess"),
        [(600, "below", 58, 0), (658, "within", 0, 0), (920, "within", 0, 0), (925, "above", 0, 5)],
    )
    def test_against_range(self, current: int, status: str, missing: int, excess: int) -> None:
        """Below, within (bounds inclusive) or above the allowed range, with the difference."""
        got = gap(current, minimum=658, maximum=920)
        assert (got["status"], got["missing"], got["excess"]) == (status, missing, excess)

    def test_unknown_fleet(self) -> None:
        """Without a fleet the gap says it is unknown and how to give it."""
        got = gap(None, minimum=658, maximum=920)
        assert got["status"] == "unknown" and "--fleet" in got["message"]

    def test_infeasible(self) -> None:
        """A minimum above the maximum is reported as infeasible."""
        assert gap(3, minimum=1, maximum=0)["status"] == "infeasible"
