"""The fleet file's errors as an admin reads them: the spreadsheet's row, every problem, pt-BR."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet._errors import FleetFileError
from fleet.drivers import read_driver_links
from fleet.loaders import FleetRowsError, read_fleet, sheet_row
from fleet.vocabulary import VEHICLE_STATUSES


def _write(tmp_path: Path, body: str, name: str = "frota.csv") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


class TestSpreadsheetRows:
    def test_the_header_is_row_one(self) -> None:
        """The first data row (index 0) is the spreadsheet's row 2."""
        assert [sheet_row(i) for i in range(3)] == [2, 3, 4]

    def test_fleet_error_names_the_row_a_spreadsheet_shows(self, tmp_path: Path) -> None:
        """The second data row is row 3 in the spreadsheet: the message says 'linha 3'."""
        path = _write(tmp_path, "vehicle_id,year\nT1,2019\nT2,dois mil\n")
        with pytest.raises(FleetFileError) as caught:
            read_fleet(path)
        assert str(caught.value).startswith("frota.csv, linha 3, coluna year: 'dois mil'")

    def test_a_repeated_id_names_both_rows(self, tmp_path: Path) -> None:
        """The later row is refused and names the earlier one, both as the spreadsheet shows."""
        path = _write(tmp_path, "vehicle_id\nT1\nT2\nT1\n")
        with pytest.raises(FleetRowsError) as caught:
            read_fleet(path)
        assert caught.value.problems == {
            2: ["frota.csv, linha 4, coluna vehicle_id: 'T1' repete o veículo da linha 2"]
        }

    def test_one_prefixo_written_two_ways_names_both_rows(self, tmp_path: Path) -> None:
        """'0123' and '123' are one prefixo to the detectors: neither row is taken."""
        path = _write(tmp_path, "vehicle_id\n0123\nT2\n123\n")
        with pytest.raises(FleetRowsError) as caught:
            read_fleet(path)
        why = "o mesmo identificador escrito de outro modo"
        assert sorted(caught.value.problems) == [0, 2]
        assert f"'123' e '0123' (linha 2): {why}" in caught.value.problems[2][0]
        assert f"'0123' e '123' (linha 4): {why}" in caught.value.problems[0][0]

    def test_driver_links_use_the_same_rows(self, tmp_path: Path) -> None:
        """The drivers' readers share the numbering (the first data row is row 2)."""
        path = _write(
            tmp_path, "vehicle_id,driver_id,role,valid_from\nP1,d1,dono,2024-01-01\n", "l.csv"
        )
        with pytest.raises(FleetFileError, match=r"^l\.csv, linha 2, coluna role: era 'dono'"):
            read_driver_links(path)


class TestEveryProblem:
    def test_every_problem_of_a_row_is_reported(self, tmp_path: Path) -> None:
        """A row with two bad values reports both, in the file's column order."""
        path = _write(tmp_path, "vehicle_id,year,accessible\nT1,2019,sim\nT2,dois mil,talvez\n")
        with pytest.raises(FleetRowsError) as caught:
            read_fleet(path)
        assert list(caught.value.problems) == [1]
        year, accessible = caught.value.problems[1]
        assert year.startswith("frota.csv, linha 3, coluna year: 'dois mil' não é um ano")
        assert accessible.startswith(
            "frota.csv, linha 3, coluna accessible: 'talvez' não é sim nem não"
        )
        assert str(caught.value) == f"{year} (e mais 1 problema nesta linha)"

    def test_problems_of_every_row_are_reported(self, tmp_path: Path) -> None:
        """Rows 2 and 4 are both named; the message counts the others."""
        path = _write(
            tmp_path,
            "vehicle_id,status,municipality\nT 1,ativo,4314902\nT2,active,\nT3,parado,43\n",
        )
        with pytest.raises(FleetRowsError) as caught:
            read_fleet(path)
        problems = caught.value.problems
        assert sorted(problems) == [0, 2]
        assert problems[0][0].startswith("frota.csv, linha 2, coluna vehicle_id: 'T 1' não é")
        assert [p.split(":")[0] for p in problems[2]] == [
            "frota.csv, linha 4, coluna status",
            "frota.csv, linha 4, coluna municipality",
        ]
        assert str(caught.value).endswith("(e mais 2 problemas no arquivo, em 2 linhas)")


class TestPortugueseWords:
    @pytest.mark.parametrize(
        ("written", "code"),
        [
            ("ativo", "active"),
            ("Ativo", "active"),
            ("suspenso", "suspended"),
            ("fora de operação", "out_of_operation"),
            ("Fora de Operacao", "out_of_operation"),
            ("fora_de_operacao", "out_of_operation"),
            ("reservado", "reserved"),
            ("cassado", "revoked"),
            ("revogado", "revoked"),
            ("revoked", "revoked"),
        ],
    )
    def test_status_in_portuguese_reads_as_its_code(
        self, tmp_path: Path, written: str, code: str
    ) -> None:
        """Users write the status in pt-BR; the registry keeps the code."""
        fleet = read_fleet(_write(tmp_path, f"vehicle_id,status\nT1,{written}\n"))
        assert fleet["status"].tolist() == [code]

    def test_unknown_status_lists_the_portuguese_words_with_codes(self, tmp_path: Path) -> None:
        """The refusal lists what people write, with the code each stands for."""
        with pytest.raises(FleetFileError) as caught:
            read_fleet(_write(tmp_path, "vehicle_id,status\nT1,parado\n"))
        message = str(caught.value)
        assert message == (
            "frota.csv, linha 2, coluna status: 'parado' não é uma situação conhecida; use "
            "ativo (active), suspenso (suspended), fora de operação (out_of_operation), "
            "reservado (reserved) ou cassado (revoked)"
        )
        assert all(f"({code})" in message for code in VEHICLE_STATUSES)

    @pytest.mark.parametrize(("written", "value"), [("sim", True), ("Não", False), ("nao", False)])
    def test_accessible_in_portuguese(self, tmp_path: Path, written: str, value: bool) -> None:
        """``accessible`` takes sim/não as well as true/false."""
        fleet = read_fleet(_write(tmp_path, f"vehicle_id,accessible\nT1,{written}\n"))
        assert fleet["accessible"].tolist() == [value]

    def test_category_with_accent(self, tmp_path: Path) -> None:
        """``acessível`` written with its accent is the category ``acessivel``."""
        fleet = read_fleet(_write(tmp_path, "vehicle_id,service_category\nT1,Acessível\n"))
        assert fleet["service_category"].tolist() == ["acessivel"]


class TestColumnNames:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            ("vehicle_id,plate\n,X\n", "frota.csv, linha 2, coluna vehicle_id: está vazia"),
            (
                "vehicle_id,status_since,status_until\nT1,2024-02-01,2024-01-01\n",
                "frota.csv, linha 2, coluna status_until: 2024-01-01 é anterior a status_since "
                "(2024-02-01)",
            ),
            (
                "vehicle_id,status_since\nT1,0202-12-01\n",
                "frota.csv, linha 2, coluna status_since: a data 0202-12-01 está fora do "
                "intervalo aceito; use uma data entre 1990-01-01 e ",
            ),
        ],
    )
    def test_messages_name_the_column_as_the_file_has_it(
        self, tmp_path: Path, body: str, expected: str
    ) -> None:
        """'coluna vehicle_id', not a quoted key: a sentence in pt-BR."""
        with pytest.raises(FleetFileError) as caught:
            read_fleet(_write(tmp_path, body))
        assert str(caught.value).startswith(expected)
        assert "'vehicle_id'" not in str(caught.value)
        assert "'status_since'" not in str(caught.value)
