"""The stand-suspensions file (POA art. 45 § único): strict reading, every bad row named."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from stands._errors import StandSuspensionFileError
from stands.suspensions import check_suspension, read_stand_suspensions

HEADER = "stand_id,prefixo,driver_id,starts_on,ends_on,kind,reason,process_ref\n"


def _file(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "suspensoes.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


class TestRead:
    def test_reads_prefixo_and_driver_rows(self, tmp_path: Path) -> None:
        """A prefixo's suspension and an open-ended barring of a driver; ``prefixo`` read as id."""
        path = _file(
            tmp_path,
            "S1,P7,,2024-03-01,2024-03-20,suspension,desacato,EPTC 1/2024\n"
            "S1,,AUX9,2024-03-02,,BARRED,agressão física,EPTC 2/2024\n",
        )
        frame = read_stand_suspensions(path)
        assert frame["vehicle_id"].tolist() == ["P7", None]
        assert frame["driver_id"].tolist() == [None, "AUX9"]
        assert frame["kind"].tolist() == ["suspension", "barred"]
        assert frame["ends_on"].tolist() == [dt.date(2024, 3, 20), None]
        assert frame["days"].tolist() == [20, None]

    def test_a_short_suspension_is_kept_as_decided(self, tmp_path: Path) -> None:
        """Ten days recorded as a suspension: read as given (the registry does not invent dates)."""
        path = _file(tmp_path, "S1,P7,,2024-03-01,2024-03-10,suspension,,\n")
        assert read_stand_suspensions(path)["days"].tolist() == [10]

    def test_every_bad_row_is_named(self, tmp_path: Path) -> None:
        """Four bad rows give one error naming each row and column; nothing is returned."""
        path = _file(
            tmp_path,
            "S1,P7,AUX9,2024-03-01,2024-03-20,suspension,,\n"  # both subjects
            "S1,P7,,2024-03-20,2024-03-01,suspension,,\n"  # end before start
            "S1,P7,,2024-03-01,,suspension,,\n"  # suspension without end
            "S1,P7,,01/03/2024,2024-03-20,multa,,\n"  # bad date and kind
            "S1,P8,,2024-03-01,2024-03-20,suspension,,\n",  # fine
        )
        with pytest.raises(StandSuspensionFileError) as err:
            read_stand_suspensions(path)
        text = str(err.value)
        assert "5 erro(s); nada foi importado" in text
        assert "linha 1, coluna 'vehicle_id'/'driver_id'" in text
        assert "linha 2, coluna 'ends_on': 2024-03-01 antes" in text
        assert "linha 3, coluna 'ends_on': vazio" in text
        assert "linha 4, coluna 'starts_on': era '01/03/2024'" in text
        assert "linha 4, coluna 'kind': era 'multa'" in text
        assert "linha 5" not in text

    def test_repeated_row_and_unknown_column_are_refused(self, tmp_path: Path) -> None:
        """The same decision twice is named; an unknown column refuses the file."""
        row = "S1,P7,,2024-03-01,2024-03-20,suspension,,\n"
        with pytest.raises(StandSuspensionFileError, match="linha 2: repete a linha 1"):
            read_stand_suspensions(_file(tmp_path, row + row))
        with pytest.raises(StandSuspensionFileError, match="coluna desconhecida 'placa'"):
            read_stand_suspensions(_file(tmp_path, "S1,X\n", header="stand_id,placa\n"))


class TestCheck:
    def test_barred_may_be_open_suspension_may_not(self) -> None:
        """Only ``barred`` (art. 45 § único II a) may have no end."""
        d = dt.date(2024, 3, 1)
        assert (
            check_suspension(
                vehicle_id=None, driver_id="A", starts_on=d, ends_on=None, kind="barred"
            )
            == []
        )
        assert check_suspension(
            vehicle_id="P", driver_id=None, starts_on=d, ends_on=None, kind="suspension"
        )
