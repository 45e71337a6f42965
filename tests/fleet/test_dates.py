"""Registry dates: one range for every stored date; readers clip what pandas cannot hold."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from fleet._errors import FleetFileError
from fleet.dates import (
    PANDAS_DATE_MAX,
    PANDAS_DATE_MIN,
    REGISTRY_DATE_MIN,
    RegistryDateError,
    check_field_date,
    check_registry_date,
    check_registry_instant,
    pandas_dates,
    registry_date_max,
    unreadable_date,
)
from fleet.loaders import read_fleet

TODAY = dt.date(2026, 12, 1)


class TestCheckRegistryDate:
    @pytest.mark.parametrize(
        "day", [REGISTRY_DATE_MIN, dt.date(2022, 12, 1), TODAY, dt.date(2027, 12, 1)]
    )
    def test_inside_the_range(self, day: dt.date) -> None:
        """1990-01-01 up to today + 1 year is accepted as is."""
        assert check_registry_date(day, name="valid_from", today=TODAY) == day

    @pytest.mark.parametrize(
        "day",
        [dt.date(202, 12, 1), dt.date(1989, 12, 31), dt.date(2027, 12, 2), dt.date(7743, 1, 1)],
    )
    def test_outside_the_range(self, day: dt.date) -> None:
        """A typo of a year is refused, naming the field and the range."""
        with pytest.raises(RegistryDateError, match=r"'valid_from' era .*1990-01-01 e 2027-12-01"):
            check_registry_date(day, name="valid_from", today=TODAY)

    def test_not_a_date(self) -> None:
        """A datetime (or anything else) is not a registry date."""
        with pytest.raises(RegistryDateError, match="AAAA-MM-DD"):
            check_registry_date(dt.datetime(2024, 1, 1), name="on", today=TODAY)  # type: ignore[arg-type]

    def test_leap_day(self) -> None:
        """29 February plus one year is 28 February."""
        assert registry_date_max(dt.date(2028, 2, 29)) == dt.date(2029, 2, 28)

    def test_instants_need_an_offset_and_the_range(self) -> None:
        """An instant is checked by its UTC date; a naive one is refused."""
        ok = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        assert check_registry_instant(ok, name="at", today=TODAY) == ok
        with pytest.raises(RegistryDateError):
            check_registry_instant(dt.datetime(2024, 1, 1), name="at", today=TODAY)
        with pytest.raises(RegistryDateError):
            check_registry_instant(dt.datetime(1, 1, 1, tzinfo=dt.UTC), name="at", today=TODAY)

    @pytest.mark.parametrize("value", ["0001-01-01T00:04:00+04:00", "9999-12-31T23:00:00-03:00"])
    def test_instants_beyond_what_utc_can_hold_are_refused(self, value: str) -> None:
        """An instant whose UTC time overflows datetime is out of range, not an OverflowError."""
        with pytest.raises(RegistryDateError, match="'at' era"):
            check_registry_instant(dt.datetime.fromisoformat(value), name="at", today=TODAY)


class TestReading:
    def test_pandas_dates_clip_and_keep_order(self) -> None:
        """Out-of-range stored dates become the nearest readable day; None is NaT."""
        out = pandas_dates([dt.date(202, 12, 1), None, dt.date(2024, 1, 2), dt.date(7743, 1, 1)])
        assert str(out.dtype) == "datetime64[ns]"
        assert out.tolist()[0] == pd.Timestamp(PANDAS_DATE_MIN)
        assert pd.isna(out.tolist()[1])
        assert out.tolist()[2:] == [pd.Timestamp("2024-01-02"), pd.Timestamp(PANDAS_DATE_MAX)]

    def test_unreadable(self) -> None:
        """Only dates beyond what pandas holds are unreadable."""
        assert unreadable_date(dt.date(202, 12, 1)) and unreadable_date(dt.date(7743, 1, 1))
        assert not unreadable_date(dt.date(1985, 1, 1)) and not unreadable_date(None)


class TestFleetFile:
    def test_out_of_range_status_date_names_the_line(self, tmp_path: Path) -> None:
        """A fleet CSV with ``status_since`` 0202-12-01 is refused at its line."""
        path = tmp_path / "frota.csv"
        path.write_text(
            "vehicle_id,status,status_since\nA1,active,2024-01-01\nA2,suspended,0202-12-01\n"
        )
        with pytest.raises(
            FleetFileError, match=r"linha 3, coluna status_since: a data 0202-12-01 está fora"
        ):
            read_fleet(path)

    def test_a_documents_validity_may_lie_years_ahead(self, tmp_path: Path) -> None:
        """An alvará or vistoria valid to the end of a later year is read (a document's validity:
        today + 10 years); a status three years ahead is still a typo."""
        ahead = dt.date.today().year + 3
        path = tmp_path / "frota.csv"
        path.write_text(
            "vehicle_id,status,alvara_valid_until,inspection_valid_until\n"
            f"A1,active,{ahead}-12-31,{ahead}-06-30\n"
        )
        fleet = read_fleet(path)
        assert fleet["alvara_valid_until"].iloc[0] == dt.date(ahead, 12, 31)
        path.write_text(f"vehicle_id,status,status_since\nA1,active,{ahead}-01-01\n")
        with pytest.raises(FleetFileError, match="status_since"):
            read_fleet(path)
        with pytest.raises(RegistryDateError, match="hoje \\+ 10 anos"):
            check_field_date(dt.date(2040, 1, 1), name="alvara_valid_until", today=TODAY)
