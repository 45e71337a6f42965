"""The drivers and driver-links CSV readers: values, and errors naming file, row and column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fleet._errors import FleetFileError
from fleet.drivers import DRIVER_FILE_COLUMNS, read_driver_links, read_drivers

D = dt.date
DRIVERS = """driver_id,name,synthetic,cnh_number,cnh_category,cnh_valid_until,ictp_valid_until,cnh_status,cnh_status_since,cnh_status_until,ictp_status,ictp_status_since,ictp_status_until
d1,Condutor Fictício 1,true,123,b,2026-05-01,2025-12-31,regular,2020-01-01,2024-02-29,,,
d1,,,,,,,suspensa,2024-03-01,2024-03-10,suspensa,2024-03-01,
d2,Condutora Fictícia 2,true,,,,,,,,,,
"""  # noqa: E501
LINKS = """prefixo,driver_id,role,valid_from,valid_until
P1,d1,Titular,2024-01-01,
P1,d2,auxiliar,2024-03-06,2024-12-31
"""


def write(tmp_path: Path, text: str, name: str = "f.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestReadDrivers:
    def test_rows_and_identity(self, tmp_path: Path) -> None:
        """One row per period; identity filled on every row of a driver; values typed."""
        frame = read_drivers(write(tmp_path, DRIVERS))
        assert list(frame.columns) == list(DRIVER_FILE_COLUMNS)
        assert frame["driver_id"].tolist() == ["d1", "d1", "d2"]
        assert frame["name"].tolist()[:2] == ["Condutor Fictício 1"] * 2
        assert frame["synthetic"].tolist() == [True, True, True]
        assert frame["cnh_category"].iloc[1] == "B"
        assert frame["cnh_valid_until"].iloc[1] == D(2026, 5, 1)
        assert frame["ictp_status"].iloc[1] == "suspensa"
        assert frame["ictp_status_until"].iloc[1] is None

    @pytest.mark.parametrize(
        ("row", "match"),
        [
            (",x,,,,,,,,,,,", r"f\.csv, linha 2, coluna driver_id: vazio"),
            ("d1,x,,,,,,vencida,,,,,", r"linha 2, coluna cnh_status: era 'vencida'.*regular"),
            ("d1,x,,,,2024-13-01,,,,,,,", r"linha 2, coluna cnh_valid_until.*AAAA-MM-DD"),
            ("d1,x,,,,0202-12-01,,,,,,,", r"linha 2, coluna cnh_valid_until.*1990-01-01"),
            ("d1,x,,,Z,,,,,,,,", r"linha 2, coluna cnh_category: era 'Z'"),
            ("d1,x,talvez,,,,,,,,,,", r"linha 2, coluna synthetic.*sim ou não"),
            ("d 1,x,,,,,,,,,,,", r"linha 2, coluna driver_id: 'd 1' não é um identificador"),
            ("d1,x,,,,,,,2024-01-01,,,,", r"linha 2, coluna cnh_status: vazio"),
            (
                "d1,x,,,,,,,,,cassada,2024-03-05,2024-03-01",
                r"linha 2, coluna ictp_status_until: 2024-03-01 antes",
            ),
        ],
    )
    def test_bad_value_names_file_row_and_column(
        self, tmp_path: Path, row: str, match: str
    ) -> None:
        """Each bad value is refused with the file, the spreadsheet's row and the column."""
        header = ",".join(DRIVER_FILE_COLUMNS)
        with pytest.raises(FleetFileError, match=match):
            read_drivers(write(tmp_path, f"{header}\n{row}\n"))

    def test_overlapping_periods_are_refused(self, tmp_path: Path) -> None:
        """Two periods of the same document of a driver may not share a day."""
        header = ",".join(DRIVER_FILE_COLUMNS)
        rows = "d1,x,,,,,,suspensa,2024-03-01,2024-03-10,,,\nd1,,,,,,,cassada,2024-03-10,,,,\n"
        with pytest.raises(FleetFileError, match="linha 3.*sobrepõe ao da linha 2"):
            read_drivers(write(tmp_path, f"{header}\n{rows}"))

    def test_differing_identity_is_refused(self, tmp_path: Path) -> None:
        """Rows of one driver may leave identity blank but not contradict it."""
        header = ",".join(DRIVER_FILE_COLUMNS)
        rows = "d1,x,,,,2025-01-01,,,,,,,\nd1,x,,,,2026-01-01,,,,,,,\n"
        with pytest.raises(FleetFileError, match="linha 3, coluna cnh_valid_until.*linha 2"):
            read_drivers(write(tmp_path, f"{header}\n{rows}"))

    def test_one_driver_written_two_ways_is_refused(self, tmp_path: Path) -> None:
        """'d-01' and 'D1' are one driver to the detectors: the file must write one of them."""
        header = ",".join(DRIVER_FILE_COLUMNS)
        rows = "D1,x,,,,,,,,,,,\nd-01,x,,,,,,,,,,,\n"
        with pytest.raises(FleetFileError, match="linha 3, coluna driver_id: 'd-01' e 'D1' "):
            read_drivers(write(tmp_path, f"{header}\n{rows}"))

    def test_unknown_column_and_missing_id_column(self, tmp_path: Path) -> None:
        """An unknown column or no driver_id column is named."""
        with pytest.raises(FleetFileError, match="coluna desconhecida 'cpf'"):
            read_drivers(write(tmp_path, "driver_id,cpf\nd1,1\n"))
        with pytest.raises(FleetFileError, match="faltam as colunas driver_id"):
            read_drivers(write(tmp_path, "name\nx\n"))


class TestReadDriverLinks:
    def test_values(self, tmp_path: Path) -> None:
        """``prefixo`` reads as vehicle_id; role lower-case; dates; open end None."""
        frame = read_driver_links(write(tmp_path, LINKS))
        assert frame["vehicle_id"].tolist() == ["P1", "P1"]
        assert frame["role"].tolist() == ["titular", "auxiliar"]
        assert frame["valid_from"].tolist() == [D(2024, 1, 1), D(2024, 3, 6)]
        assert frame["valid_until"].tolist() == [None, D(2024, 12, 31)]

    @pytest.mark.parametrize(
        ("row", "match"),
        [
            ("P1,d1,motorista,2024-01-01,", r"linha 2, coluna role: era 'motorista'"),
            ("P1,d1,auxiliar,,", r"linha 2, coluna valid_from: vazio"),
            (",d1,auxiliar,2024-01-01,", r"linha 2, coluna vehicle_id: vazio"),
            ("P/1,d1,auxiliar,2024-01-01,", r"linha 2, coluna vehicle_id: 'P/1' não é um"),
            ("P1,d1,auxiliar,2024-01-05,2024-01-01", r"linha 2, coluna valid_until.*antes"),
            ("P1,d1,auxiliar,3024-01-05,", r"linha 2, coluna valid_from.*1990-01-01"),
        ],
    )
    def test_bad_value_names_file_row_and_column(
        self, tmp_path: Path, row: str, match: str
    ) -> None:
        """Each bad value is refused with the file, the spreadsheet's row and the column."""
        text = f"vehicle_id,driver_id,role,valid_from,valid_until\n{row}\n"
        with pytest.raises(FleetFileError, match=r"l\.csv, " + match):
            read_driver_links(write(tmp_path, text, "l.csv"))

    def test_same_link_twice_on_overlapping_dates(self, tmp_path: Path) -> None:
        """The same driver linked twice to a prefixo on shared days is refused."""
        text = (
            "vehicle_id,driver_id,role,valid_from,valid_until\n"
            "P1,d1,auxiliar,2024-01-01,\nP1,d1,auxiliar,2024-06-01,\n"
        )
        with pytest.raises(FleetFileError, match="linha 3.*já está vinculado.*linha 2"):
            read_driver_links(write(tmp_path, text))


class TestDriverFieldChecks:
    def test_validity_up_to_ten_years_ahead(self) -> None:
        """A CNH validity 10 years ahead passes; one day past the bound is refused."""
        from fleet.dates import RegistryDateError, check_document_validity

        today = dt.date(2026, 3, 15)
        assert check_document_validity(dt.date(2036, 3, 15), name="x", today=today)
        with pytest.raises(RegistryDateError, match="'cnh_valid_until' era 2036-03-16"):
            check_document_validity(dt.date(2036, 3, 16), name="cnh_valid_until", today=today)
        with pytest.raises(RegistryDateError, match="esperado uma data AAAA-MM-DD"):
            check_document_validity(dt.datetime(2030, 1, 1), name="x", today=today)  # type: ignore[arg-type]

    def test_cnh_category_upper_cased_or_refused(self) -> None:
        """'ab' is read as AB; 'Z' is refused naming the categories."""
        from fleet.drivers import check_cnh_category

        assert check_cnh_category(" ab ") == "AB"
        with pytest.raises(FleetFileError, match="'cnh_category' era 'Z'; esperado uma de A, B"):
            check_cnh_category("Z")
