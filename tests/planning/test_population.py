"""Tests of planning.population: bundled IBGE figures by municipality and year."""

from __future__ import annotations

import pytest

from planning._errors import PlanningError, UnknownMunicipalityError
from planning.population import bundled_population_table, population_for


class TestPopulationFor:
    @pytest.mark.parametrize(
        ("code", "year", "population", "kind"),
        [
            ("1100205", 2022, 460_413, "census"),
            ("1100205", 2024, 514_873, "estimate"),
            ("4314548", 2022, 2_723, "census"),
            ("4314548", 2024, 2_784, "estimate"),
            ("4314902", 2022, 1_332_570, "census"),
        ],
    )
    def test_bundled_figures(self, code: str, year: int, population: int, kind: str) -> None:
        """The figures of data/brazil/PROVENANCE.md, with their kind and source."""
        got = population_for(bundled_population_table(), municipality=code, year=year)
        assert (got["population"], got["kind"]) == (population, kind)
        assert got["source"].startswith("IBGE")

    def test_every_municipality(self) -> None:
        """All 5,570 municipalities, two figures each."""
        table = bundled_population_table()
        assert table["municipality_code"].nunique() == 5570
        assert len(table) == 2 * 5570

    @pytest.mark.parametrize(("code", "match"), [("9999999", "não encontrado"), ("12", "inválido")])
    def test_unknown_code(self, code: str, match: str) -> None:
        """A code that is malformed or not IBGE's is a clear pt-BR error."""
        with pytest.raises(UnknownMunicipalityError, match=match):
            population_for(bundled_population_table(), municipality=code, year=2022)

    def test_unavailable_year(self) -> None:
        """A year without a figure names the years available."""
        with pytest.raises(PlanningError, match="2022, 2024"):
            population_for(bundled_population_table(), municipality="1100205", year=2010)
