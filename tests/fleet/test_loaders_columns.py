"""Columns a registry file's reader would drop are refused by name: an unknown column of the
contract (fleet, stands CSV), a header given twice, a key given twice in a GeoJSON object."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet._errors import FleetFileError
from fleet.drivers import read_drivers
from fleet.loaders import read_fleet
from stands._errors import StandsFormatError
from stands.layers import read_stands

ROOT = Path(__file__).resolve().parents[2]
POA_FLEET = ROOT / "data" / "brazil" / "taxi_fleet" / "frota_taxi_poa_2020-03-12.csv"

Run = Callable[..., subprocess.CompletedProcess[str]]


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


class TestReadFleet:
    def test_unknown_columns_are_refused_with_the_closest_name(self, tmp_path: Path) -> None:
        """'acessivel' and 'municipality_code' would be dropped: refused, naming each one and
        the known name it is closest to."""
        path = _write(
            tmp_path,
            "f.csv",
            "vehicle_id,municipality_code,acessivel,placa_typo\nQA-V1,4314902,sim,ABC1234\n",
        )
        expected = (
            "f.csv: colunas desconhecidas 'municipality_code' (quis dizer 'municipality'?), "
            "'acessivel' (quis dizer 'accessible'?), 'placa_typo'; corrija o nome ou remova a "
            "coluna (nenhuma é ignorada); colunas aceitas: vehicle_id, prefixo, plate"
        )
        with pytest.raises(FleetFileError) as caught:
            read_fleet(path)
        assert str(caught.value).startswith(expected)

    @pytest.mark.parametrize(
        "body",
        [
            "vehicle_id,accessible,accessible\nQA-V1,true,false\n",
            "vehicle_id;accessible; accessible\nQA-V1;sim;não\n",
        ],
    )
    def test_a_repeated_header_is_refused(self, tmp_path: Path, body: str) -> None:
        """A column named twice ('accessible', also with a space) is refused by name."""
        path = _write(tmp_path, "f.csv", body)
        with pytest.raises(
            FleetFileError,
            match="^f.csv: coluna 'accessible' repetida no cabeçalho; cada coluna deve aparecer "
            "uma vez$",
        ):
            read_fleet(path)

    def test_every_contract_column_is_read(self, tmp_path: Path) -> None:
        """'data_extracao' (the date of the file) and 'fuel' are columns of the contract; the
        fuel is read; a separator at the end of the header (an empty column) is no column."""
        path = _write(tmp_path, "f.csv", "vehicle_id;fuel;data_extracao;\nQA-V1;GNV;2024-03-01;\n")
        fleet = read_fleet(path)
        assert fleet["fuel"].tolist() == ["GNV"]

    @pytest.mark.parametrize("sep", [",", ";"])
    def test_the_file_s_date_is_read_whatever_its_separator(self, tmp_path: Path, sep: str) -> None:
        """'data_extracao' of a ';' file (Excel pt-BR) is the date the CLI and the console
        import it as, not today's."""
        from api.cli_import import file_as_of
        from fleet.loaders import extraction_date

        body = f"vehicle_id{sep}data_extracao\nQA-V1{sep}2024-03-01\n"
        path = _write(tmp_path, "f.csv", body)
        assert extraction_date(path.read_bytes()) == "2024-03-01"
        assert str(file_as_of(None, path)) == "2024-03-01"

    def test_the_file_s_date_as_a_pt_br_sheet_writes_it(self, tmp_path: Path) -> None:
        """'data_extracao' written DD/MM/AAAA is the date of the file's other dates' rule."""
        from api.cli_import import file_as_of

        path = _write(tmp_path, "f.csv", "vehicle_id;data_extracao\nQA-V1;01/03/2024\n")
        assert str(file_as_of(None, path)) == "2024-03-01"

    def test_a_file_without_date_is_of_the_regulator_s_day(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without 'data_extracao', the date is today in Brasília, not on the server's clock
        (a server at UTC+14 is on the next day 17 hours of 24)."""
        import time

        from api.cli_import import file_as_of
        from geo.calendar import local_today

        monkeypatch.setenv("TZ", "Pacific/Kiritimati")
        time.tzset()
        try:
            path = _write(tmp_path, "f.csv", "vehicle_id\nQA-V1\n")
            assert file_as_of(None, path) == local_today("America/Sao_Paulo")
        finally:
            monkeypatch.undo()
            time.tzset()

    def test_a_nameless_column_with_values_is_refused(self, tmp_path: Path) -> None:
        """Values under a blank header would be dropped: refused, saying where."""
        path = _write(tmp_path, "f.csv", "vehicle_id,,plate\nQA-V1,sim,ABC1234\n")
        with pytest.raises(FleetFileError, match="coluna desconhecida sem nome \\(a 2ª\\)"):
            read_fleet(path)

    def test_porto_alegres_file_still_reads(self) -> None:
        """The city's open-data file has columns the Pontual does not use: its format is
        the city's, not the contract's, and it reads as before."""
        assert len(read_fleet(POA_FLEET)) == 3677

    def test_a_drivers_file_with_a_repeated_header_is_refused(self, tmp_path: Path) -> None:
        """The drivers' reader shares the registry CSV reader: a repeated header is refused."""
        path = _write(tmp_path, "condutores.csv", "driver_id,name,name\nD1,Ana,Bia\n")
        with pytest.raises(FleetFileError, match="coluna 'name' repetida no cabeçalho"):
            read_drivers(path)


class TestReadStands:
    def test_unknown_csv_column_is_refused(self, tmp_path: Path) -> None:
        """'nome' for 'name' would leave the stand unnamed: refused, suggesting 'name'."""
        path = _write(tmp_path, "p.csv", "stand_id,lat,lon,nome\nS1,-30.03,-51.22,Ponto\n")
        with pytest.raises(
            StandsFormatError, match="^p.csv: coluna desconhecida 'nome' \\(quis dizer 'name'\\?\\)"
        ):
            read_stands(path, default_radius_m=30)

    def test_repeated_csv_header_is_refused(self, tmp_path: Path) -> None:
        """Two 'lat' columns: one value would be dropped; refused by name."""
        path = _write(tmp_path, "p.csv", "stand_id;lat;lon;lat\nS1;-30,03;-51,22;-31\n")
        with pytest.raises(StandsFormatError, match="^p.csv: coluna 'lat' repetida no cabeçalho"):
            read_stands(path, default_radius_m=30)

    def test_a_key_given_twice_in_a_feature_is_refused(self, tmp_path: Path) -> None:
        """ "stand_id" twice in one feature's properties is refused, not one of them kept."""
        path = _write(
            tmp_path,
            "p.geojson",
            '{"type":"FeatureCollection","features":[{"type":"Feature","properties":'
            '{"stand_id":"S9","stand_id":"S8"},'
            '"geometry":{"type":"Point","coordinates":[-51.22,-30.03]}}]}',
        )
        with pytest.raises(
            StandsFormatError,
            match="^'p.geojson' não é um GeoJSON válido: chave 'stand_id' repetida num mesmo",
        ):
            read_stands(path, default_radius_m=30)

    def test_a_geojson_nested_too_deep_is_refused(self, tmp_path: Path) -> None:
        """5,000 nested lists: a pt-BR refusal, not a RecursionError."""
        path = tmp_path / "p.geojson"
        path.write_text(
            '{"type":"FeatureCollection","features":' + "[" * 5000 + "]" * 5000 + "}",
            encoding="utf-8",
        )
        with pytest.raises(StandsFormatError, match="JSON aninhado demais$"):
            read_stands(path, default_radius_m=30)

    def test_the_contract_columns_read(self, tmp_path: Path) -> None:
        """Every column of the contract's CSV is known (no refusal)."""
        body = (
            "stand_id,lat,lon,name,capacity,municipality,radius_m\n"
            "S1,-30.03,-51.22,P,2,4314902,25\n"
        )
        frame = read_stands(_write(tmp_path, "p.csv", body))
        assert frame["name"].tolist() == ["P"] and frame["capacity"].tolist() == [2]


class TestImportCommand:
    @pytest.mark.parametrize(
        ("kind", "name", "body", "said"),
        [
            (
                "fleet",
                "f.csv",
                "vehicle_id,acessivel\nQA-V1,sim\n",
                "erro: FILE: f.csv: coluna desconhecida 'acessivel' (quis dizer 'accessible'?)",
            ),
            (
                "stands",
                "p.csv",
                "stand_id,lat,lon,lat\nS1,-30.03,-51.22,-31\n",
                "erro: FILE: p.csv: coluna 'lat' repetida no cabeçalho",
            ),
        ],
    )
    def test_the_cli_refuses_before_writing(
        self, run_pontual: Run, tmp_path: Path, kind: str, name: str, body: str, said: str
    ) -> None:
        """``pontual import fleet|stands`` ends with the reader's pt-BR line, status 1."""
        path = _write(tmp_path, name, body)
        result = run_pontual("import", kind, str(path), PONTUAL_DATA_DIR=str(tmp_path))
        assert result.returncode == 1
        assert said in result.stderr
        assert "Traceback" not in result.stderr
