from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stands._errors import LicenceFrameError, MissingColumnError, NaiveTimestampError
from stands.licences import (
    LICENCE_COLUMNS,
    empty_licence_frame,
    is_licensed,
    licence_frame_from_fleet,
    licence_status,
    mark_unplaced_licences,
    unknown_licences,
    validate_licences,
)


class TestLicenceFrameFromFleet:
    def test_explodes_stands(self) -> None:
        """Each (vehicle, stand) in the fleet's stands becomes one licence row, open-ended."""
        fleet = pd.DataFrame(
            {
                "vehicle_id": ["2", "1", "3", "4"],
                "stands": [("S", "T"), "U; S", None, ()],
            }
        )
        lic = licence_frame_from_fleet(fleet)
        assert tuple(lic.columns) == LICENCE_COLUMNS
        pairs = list(zip(lic["vehicle_id"], lic["stand_id"], strict=True))
        assert pairs == [("1", "S"), ("1", "U"), ("2", "S"), ("2", "T")]
        assert lic["valid_from"].isna().all() and lic["valid_until"].isna().all()

    def test_empty_fleet(self) -> None:
        """An empty fleet gives an empty, correctly typed licence frame."""
        lic = licence_frame_from_fleet(pd.DataFrame({"vehicle_id": [], "stands": []}))
        assert lic.empty
        pd.testing.assert_series_equal(lic.dtypes, empty_licence_frame().dtypes)

    def test_missing_stands_column_raises(self) -> None:
        """A fleet without the stands column is refused by name."""
        with pytest.raises(MissingColumnError, match="stands"):
            licence_frame_from_fleet(pd.DataFrame({"vehicle_id": ["1"]}))


def test_licences_for_stands_not_analysed_are_left_out() -> None:
    """A licence of the row's unplaced_stands is no licence the analysis can place."""
    fleet = pd.DataFrame({"vehicle_id": ["1", "2"], "stands": [("S", "P01"), ("P01",)]})
    marked, _ = mark_unplaced_licences(fleet, ["S"])
    frame = licence_frame_from_fleet(marked)
    assert frame[["vehicle_id", "stand_id"]].values.tolist() == [["1", "S"]]
    assert len(licence_frame_from_fleet(fleet)) == 3


class TestUnknownLicences:
    def test_names_not_resolved_and_stands_not_analysed(self) -> None:
        """Unknown: a stand named but not resolved to an id (2), a stand the analysed stands
        lack (4); known: ids (1), no licence at all (3)."""
        fleet = pd.DataFrame(
            {
                "vehicle_id": ["1", "2", "3", "4"],
                "stands": [("S",), (), (), ("S",)],
                "stand_names": [(), ("Praça XV",), (), ()],
                "unplaced_stands": [(), (), (), ("P01",)],
            }
        )
        assert unknown_licences(fleet) == {"2", "4"}
        assert unknown_licences(fleet[["vehicle_id", "stands"]]) == frozenset()

    def test_status_is_na_only_where_not_licensed(self) -> None:
        """Licensed stays True; not licensed becomes <NA> for an unknown vehicle only; a scalar
        vehicle is broadcast over the instants."""
        licences = pd.DataFrame({"vehicle_id": ["A"], "stand_id": ["S"]})
        at = pd.Timestamp("2024-03-04T12:00Z")
        status = licence_status(
            licences, ["A", "A", "B", "C"], ["S", "T", "S", "S"], at, unknown={"A", "B"}
        )
        assert status.tolist() == [True, pd.NA, pd.NA, False]
        both = licence_status(licences, "A", ["S", "T"], at, unknown=["A"])
        assert both.tolist() == [True, pd.NA]


class TestMarkUnplacedLicences:
    def test_stands_the_stands_file_lacks(self) -> None:
        """Each vehicle's licences for stands not analysed are marked and listed; the input is
        not modified."""
        fleet = pd.DataFrame(
            {"vehicle_id": ["1", "2", "3", "4"], "stands": [("S", "P01"), "S; T", None, ("X",)]}
        )
        marked, unplaced = mark_unplaced_licences(fleet, ["S", "T"])
        assert marked["unplaced_stands"].tolist() == [("P01",), (), (), ("X",)]
        assert unplaced == {"1": ("P01",), "4": ("X",)}
        assert "unplaced_stands" not in fleet.columns

    def test_no_stands_column(self) -> None:
        marked, unplaced = mark_unplaced_licences(pd.DataFrame({"vehicle_id": ["1"]}), ["S"])
        assert marked["unplaced_stands"].tolist() == [()] and unplaced == {}


class TestIsLicensed:
    LICENCES = pd.DataFrame(
        {
            "vehicle_id": ["A", "A", "B"],
            "stand_id": ["S", "T", "S"],
            "valid_from": [None, "2024-03-01", None],
            "valid_until": [None, "2024-03-31", "2024-02-29"],
        }
    )

    @pytest.mark.parametrize(
        ("vehicle", "stand", "at", "expected"),
        [
            ("A", "S", "2024-01-01T12:00:00Z", True),
            ("A", "U", "2024-03-10T12:00:00Z", False),
            ("Z", "S", "2024-03-10T12:00:00Z", False),
            ("A", "T", "2024-03-01T03:00:00Z", True),
            ("A", "T", "2024-03-01T02:59:59Z", False),
            ("A", "T", "2024-04-01T02:59:59Z", True),
            ("A", "T", "2024-04-01T03:00:00Z", False),
            ("B", "S", "2024-03-01T02:00:00Z", True),
        ],
        ids=[
            "open-ended",
            "other-stand",
            "unknown-vehicle",
            "first-local-day",
            "day-before-locally",
            "last-local-day",
            "day-after-locally",
            "until-inclusive-local",
        ],
    )
    def test_validity_in_local_dates(
        self, vehicle: str, stand: str, at: str, expected: bool
    ) -> None:
        """Validity bounds are inclusive local calendar dates (America/Sao_Paulo)."""
        got = is_licensed(self.LICENCES, [vehicle], [stand], pd.to_datetime([at]))
        assert got.tolist() == [expected]

    def test_vectorised_and_broadcast(self) -> None:
        """Aligned arrays give one answer each; a scalar instant is broadcast."""
        got = is_licensed(
            self.LICENCES, ["A", "B", "A"], ["S", "S", "U"], pd.Timestamp("2024-01-05T12:00Z")
        )
        assert got.dtype == np.bool_
        assert got.tolist() == [True, True, False]

    def test_empty_licences(self) -> None:
        """With no licence rows nobody is licensed."""
        got = is_licensed(empty_licence_frame(), ["A"], ["S"], pd.Timestamp("2024-01-05T12:00Z"))
        assert got.tolist() == [False]

    def test_naive_instant_raises(self) -> None:
        """Naive instants are refused."""
        with pytest.raises(NaiveTimestampError, match="'at'"):
            is_licensed(self.LICENCES, ["A"], ["S"], pd.Timestamp("2024-01-05T12:00"))

    def test_mismatched_lengths_raise(self) -> None:
        """Query arrays of different lengths are refused."""
        at = pd.to_datetime(["2024-01-05T12:00Z"] * 3)
        with pytest.raises(LicenceFrameError, match="tamanhos diferentes"):
            is_licensed(self.LICENCES, ["A", "B"], ["S", "S", "T"], at)


class TestValidateLicences:
    def test_inverted_dates_raise(self) -> None:
        """valid_from after valid_until is refused."""
        frame = pd.DataFrame(
            {
                "vehicle_id": ["A"],
                "stand_id": ["S"],
                "valid_from": ["2024-03-02"],
                "valid_until": ["2024-03-01"],
            }
        )
        with pytest.raises(LicenceFrameError, match="depois de valid_until"):
            validate_licences(frame)

    def test_bad_date_raises(self) -> None:
        """A validity value that is not a date is refused by column name."""
        frame = pd.DataFrame({"vehicle_id": ["A"], "stand_id": ["S"], "valid_from": ["soon"]})
        with pytest.raises(LicenceFrameError, match="valid_from"):
            validate_licences(frame)

    def test_tz_aware_bounds_become_local_dates(self) -> None:
        """A tz-aware bound is converted to its calendar date in the timezone."""
        frame = pd.DataFrame(
            {
                "vehicle_id": ["A"],
                "stand_id": ["S"],
                "valid_until": pd.to_datetime(["2024-03-02T01:00:00Z"]),
            }
        )
        out = validate_licences(frame, timezone="America/Sao_Paulo")
        assert out.loc[0, "valid_until"] == pd.Timestamp("2024-03-01")

    def test_unknown_timezone_raises(self) -> None:
        """An unknown timezone is refused."""
        frame = pd.DataFrame({"vehicle_id": ["A"], "stand_id": ["S"]})
        with pytest.raises(LicenceFrameError, match="fuso horário desconhecido"):
            validate_licences(frame, timezone="Nowhere/Land")
