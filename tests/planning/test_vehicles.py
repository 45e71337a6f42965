"""Tests of planning.vehicles: active fleet, accessible count, age and inspection constraints."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from enforcement.rulebook import InspectionBand
from planning._errors import PlanningInputError
from planning.rules import bundled_planning_rule
from planning.vehicles import active_fleet, count_accessible, vehicle_constraints

AS_OF = dt.date(2025, 6, 1)


def _fleet(**columns: list) -> pd.DataFrame:
    return pd.DataFrame(columns)


class TestActiveFleet:
    def test_status_dates_and_municipality(self) -> None:
        """Active on the date (inclusive), of the municipality or none; missing status counts."""
        fleet = _fleet(
            vehicle_id=["A", "B", "C", "D", "E", "F"],
            status=["active", "suspended", None, "active", "active", "active"],
            status_since=[None, None, None, dt.date(2025, 6, 2), None, dt.date(2025, 6, 1)],
            status_until=[None, None, None, None, dt.date(2025, 5, 31), None],
            municipality=["1100205", "1100205", None, "1100205", "1100205", "4314548"],
        )
        got = active_fleet(fleet, as_of=AS_OF, municipality="1100205")
        assert got["vehicle_id"].tolist() == ["A", "C"]
        assert active_fleet(fleet, as_of=AS_OF)["vehicle_id"].tolist() == ["A", "C", "F"]

    def test_service_column(self) -> None:
        """With a service column only the requested service's vehicles count (taxi default)."""
        fleet = _fleet(vehicle_id=["A", "B", "C"], service=["taxi", "fretamento", None])
        assert active_fleet(fleet, as_of=AS_OF)["vehicle_id"].tolist() == ["A", "C"]
        got = active_fleet(fleet, as_of=AS_OF, service="fretamento")
        assert got["vehicle_id"].tolist() == ["B"]

    def test_requires_vehicle_id(self) -> None:
        """A frame without vehicle_id is refused, naming it."""
        with pytest.raises(PlanningInputError, match="vehicle_id"):
            active_fleet(_fleet(plate=["X"]), as_of=AS_OF)


class TestCountAccessible:
    def test_counts_flags(self) -> None:
        """True flags count when every row says."""
        assert (
            count_accessible(_fleet(vehicle_id=["A", "B", "C"], accessible=[True, True, False]))
            == 2
        )

    def test_unknown_when_a_row_does_not_say(self) -> None:
        """Two flagged among vehicles nobody knows about: unknown (None), not the fleet's 1."""
        assert (
            count_accessible(_fleet(vehicle_id=["A", "B", "C"], accessible=[True, None, False]))
            is None
        )

    def test_unknown_when_no_flag(self) -> None:
        """A fleet that never says is unknown (None), not zero."""
        assert count_accessible(_fleet(vehicle_id=["A"], accessible=[None])) is None
        assert count_accessible(_fleet(vehicle_id=["A"])) is None


class TestVehicleConstraints:
    def test_pinto_bandeira_five_years_from_manufacture(self) -> None:
        """In 2025 a 2020 car is 5 (allowed), a 2019 car 6 (over); unknown year is not flagged."""
        fleet = _fleet(vehicle_id=["A", "B", "C"], year=pd.array([2020, 2019, None], dtype="Int64"))
        got = vehicle_constraints(fleet, as_of=AS_OF, max_age_years=5)
        assert got["age_years"].tolist()[:2] == [5, 6]
        assert got["over_age"].tolist() == [False, True, False]
        assert got.loc[1, "issues"] == ["idade 6 anos acima do máximo de 5"]
        assert pd.isna(got.loc[2, "age_years"])

    @pytest.mark.parametrize(
        ("year", "interval"),
        [(2025, 120), (2022, 120), (2021, 90), (2018, 90), (2017, 60), (2016, 60), (2015, 45),
         (2014, 45), (2013, 30), (2010, 30), (2009, None)],
    )  # fmt: skip
    def test_fretamento_bands(self, year: int, interval: int | None) -> None:
        """Art. 14 bands by age from the first registration: 0–3, 4–7, 8–9, 10–11, 12–15."""
        rule, _ = bundled_planning_rule("4314902", service="fretamento")
        assert rule is not None
        fleet = _fleet(vehicle_id=["A"], first_registered_on=[dt.date(year, 12, 31)], year=[None])
        got = vehicle_constraints(
            fleet,
            as_of=AS_OF,
            max_age_years=rule.max_vehicle_age_years,
            age_counted_from=rule.age_counted_from,
            inspection_bands=rule.inspection_bands,
        )
        value = got.loc[0, "inspection_interval_days"]
        assert (None if pd.isna(value) else int(value)) == interval
        assert bool(got.loc[0, "over_age"]) == (AS_OF.year - year > 15)

    def test_first_registration_falls_back_to_manufacture(self) -> None:
        """Without a first-registration date the year of manufacture is used, and said."""
        fleet = _fleet(vehicle_id=["A"], year=pd.array([2009], dtype="Int64"))
        got = vehicle_constraints(
            fleet, as_of=AS_OF, max_age_years=15, age_counted_from="first_registration"
        )
        assert got.loc[0, "age_years"] == 16 and got.loc[0, "over_age"]
        assert "sem data do primeiro emplacamento" in got.loc[0, "age_basis"]

    def test_inspection_status(self) -> None:
        """Expired, due within 30 days, valid past the band's interval, in order, or no date."""
        bands = (
            InspectionBand(age_min_years=0, age_max_years=15, interval_days=30, provision="x"),
        )
        valid = [
            dt.date(2025, 5, 31),
            dt.date(2025, 6, 20),
            dt.date(2025, 9, 1),
            None,
        ]
        fleet = _fleet(
            vehicle_id=["A", "B", "C", "D"],
            year=pd.array([2020] * 4, dtype="Int64"),
            inspection_valid_until=valid,
        )
        got = vehicle_constraints(fleet, as_of=AS_OF, inspection_bands=bands, due_within_days=30)
        assert got["inspection_status"].tolist() == [
            "vencida",
            "a vencer",
            "além do intervalo",
            "sem data",
        ]
        bands60 = (InspectionBand(age_min_years=0, age_max_years=15, interval_days=120),)
        ok = vehicle_constraints(fleet.iloc[[2]], as_of=AS_OF, inspection_bands=bands60)
        assert ok["inspection_status"].tolist() == ["em dia"] and ok.loc[0, "issues"] == []
