"""Registry loaders on the real bundled files: municipalities, population, Porto Alegre's fleet."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import geopandas as gpd
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from db.fleet.store import load_fleet, load_municipalities, load_populations
from db.stands.store import load_stands
from fleet._errors import FleetFileError, UnknownMunicipalityError
from fleet.loaders import (
    PORTO_ALEGRE,
    normalize_name,
    read_fleet,
    read_municipalities,
    read_populations,
)
from stands.loaders import read_poa_stands

DATA = Path(__file__).resolve().parents[2] / "data" / "brazil"
CENSUS = DATA / "population" / "censo2022_populacao_municipios.csv"
ESTIMATE = DATA / "population" / "estimativa_populacao_municipios_2024.csv"
BOUNDARIES = DATA / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"
POA_FLEET = DATA / "taxi_fleet" / "frota_taxi_poa_2020-03-12.csv"
POA_STANDS = DATA / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
SNAPSHOT = dt.date(2020, 3, 12)


@pytest.fixture(scope="module")
def municipalities() -> gpd.GeoDataFrame:
    return read_municipalities(CENSUS, boundaries_path=BOUNDARIES)


@pytest.fixture
def conn(db_session: Session) -> Connection:
    return db_session.connection()


@pytest.fixture
def poa_registry(conn: Connection, municipalities: gpd.GeoDataFrame) -> Connection:
    """Municipalities and Porto Alegre's stands stored (the fleet names stands)."""
    load_municipalities(conn=conn, municipalities=municipalities)
    load_stands(conn=conn, stands=read_poa_stands(POA_STANDS))
    return conn


def _scalar(conn: Connection, sql: str) -> object:
    return conn.execute(text(sql)).scalar_one()


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fleet.csv"
    path.write_text(body, encoding="utf-8")
    return path


class TestReadMunicipalities:
    def test_every_ibge_municipality(self, municipalities: gpd.GeoDataFrame) -> None:
        """All 5,570 municipalities, unique 7-digit codes."""
        assert len(municipalities) == 5570
        assert municipalities["code"].is_unique

    @pytest.mark.parametrize(
        ("code", "timezone"),
        [
            ("4314902", "America/Sao_Paulo"),  # Porto Alegre
            ("1100205", "America/Porto_Velho"),
            ("4314548", "America/Sao_Paulo"),  # Pinto Bandeira
            ("2605459", "America/Noronha"),  # Fernando de Noronha, PE
            ("1302603", None),  # Manaus: Amazonas has two zones, left unknown
        ],
    )
    def test_timezones(self, municipalities: gpd.GeoDataFrame, code: str, timezone: str) -> None:
        """Each municipality gets its state's legal zone, with the known exceptions."""
        row = municipalities.set_index("code").loc[code]
        assert row["timezone"] == timezone

    def test_boundaries_of_the_three_cities(self, municipalities: gpd.GeoDataFrame) -> None:
        """Only the bundled three have a polygon, stored as MultiPolygon."""
        with_geom = municipalities[municipalities.geometry.notna()]
        assert sorted(with_geom["code"]) == ["1100205", "4314548", "4314902"]
        assert set(with_geom.geom_type) == {"MultiPolygon"}

    def test_bad_code_raises(self, tmp_path: Path) -> None:
        """A code that is not 7 digits is refused, naming it."""
        path = tmp_path / "c.csv"
        path.write_text("cod_ibge,uf,nome\n123,RS,X\n", encoding="utf-8")
        with pytest.raises(FleetFileError, match="'123'"):
            read_municipalities(path)


class TestReadPopulations:
    def test_census_and_estimate(self) -> None:
        """Porto Alegre: 1,332,570 (Censo 2022) and 1,389,322 (estimate 2024)."""
        pop = read_populations(CENSUS, ESTIMATE)
        assert len(pop) == 2 * 5570
        poa = pop[pop["municipality_code"] == PORTO_ALEGRE].set_index("kind")["population"]
        assert poa.to_dict() == {"census": 1_332_570, "estimate": 1_389_322}

    def test_negative_population_raises(self, tmp_path: Path) -> None:
        """A negative count is refused."""
        path = tmp_path / "p.csv"
        path.write_text("cod_ibge,pop_total\n4314902,-5\n", encoding="utf-8")
        with pytest.raises(FleetFileError, match="inválida"):
            read_populations(path)


class TestLoadMunicipalities:
    def test_load_then_reload_is_unchanged(
        self, conn: Connection, municipalities: gpd.GeoDataFrame
    ) -> None:
        """First load creates 5,570; a second load changes nothing."""
        first = load_municipalities(conn=conn, municipalities=municipalities)
        assert (first.created, first.updated) == (5570, 0)
        second = load_municipalities(conn=conn, municipalities=municipalities)
        assert (second.created, second.updated, second.unchanged) == (0, 0, 5570)

    def test_missing_boundary_does_not_erase(
        self, conn: Connection, municipalities: gpd.GeoDataFrame
    ) -> None:
        """Reloading without boundaries keeps the stored polygons."""
        load_municipalities(conn=conn, municipalities=municipalities)
        load_municipalities(conn=conn, municipalities=read_municipalities(CENSUS))
        assert _scalar(conn, "SELECT count(boundary) FROM municipalities") == 3

    def test_populations_need_their_municipality(self, conn: Connection) -> None:
        """Population of an unknown municipality is refused with a hint."""
        pop = read_populations(CENSUS).head(1)
        with pytest.raises(UnknownMunicipalityError, match="pontual import municipalities"):
            load_populations(conn=conn, populations=pop)


class TestReadFleet:
    def test_poa_file(self) -> None:
        """3,677 prefixos, 2,520 naming a stand; vehicle_id is the prefixo; all in Porto Alegre."""
        fleet = read_fleet(POA_FLEET)
        assert len(fleet) == 3677
        assert int(fleet["stand_names"].map(len).gt(0).sum()) == 2520
        assert (fleet["vehicle_id"] == fleet["prefixo"]).all()
        assert set(fleet["municipality"]) == {PORTO_ALEGRE}
        row = fleet.set_index("vehicle_id").loc["3247"]
        assert row["stand_names"] == ("HOSPITAL PRONTO SOCORRO (HPS)",)
        assert (row["plate"], row["make"], row["year"]) == ("IYO1026", "VW", 2018)
        assert row["first_registered_on"] == dt.date(2018, 5, 28)

    def test_poa_registrations_that_cannot_be_are_unknown(self) -> None:
        """The file's empty registrations (1899-12-30, the spreadsheet's day zero), those in
        the future (2502-02-03) and those years before manufacture are unknown, not a 127-year
        old car; the others are kept (earliest 1995, latest before the extraction)."""
        fleet = read_fleet(POA_FLEET).set_index("vehicle_id")
        first = fleet["first_registered_on"]
        assert first.isna().sum() == 104  # 99 day zero, 2 in the future, 3 before manufacture
        for prefixo in ("1031", "5007", "3601", "3566"):
            assert first.loc[prefixo] is None, prefixo
        known = [d for d in first if d is not None]
        assert (min(known), max(known)) == (dt.date(1995, 9, 27), dt.date(2020, 3, 2))

    def test_contract_file(self, tmp_path: Path) -> None:
        """Contract columns are parsed: booleans, inclusive dates, ';'-separated stands."""
        path = _write(
            tmp_path,
            "vehicle_id,plate,accessible,stands,status,status_since,status_until,"
            "alvara_valid_until,inspection_valid_until,municipality\n"
            "T1,ABC1D23,true,S1;S2,suspended,2024-01-10,2024-01-20,2025-12-31,,4314902\n"
            "T2,,false,,active,,,,,\n",
        )
        fleet = read_fleet(path, municipality="4314548").set_index("vehicle_id")
        assert fleet.loc["T1", "stands"] == ("S1", "S2")
        assert fleet.loc["T1", "accessible"]
        assert not fleet.loc["T2", "accessible"]
        assert fleet.loc["T1", "status_since"] == dt.date(2024, 1, 10)
        assert fleet.loc["T1", "inspection_valid_until"] is None
        assert fleet.loc["T2", "municipality"] == "4314548"
        assert fleet.loc["T2", "stands"] == ()

    def test_excel_pt_br_file(self, tmp_path: Path) -> None:
        """A fleet file as Excel in pt-BR saves it (';', Windows-1252) reads as the contract's."""
        path = tmp_path / "frota.csv"
        path.write_bytes("vehicle_id;make\nT1;Citroën\nT2;Peugeot\n".encode("cp1252"))
        fleet = read_fleet(path)
        assert fleet["vehicle_id"].tolist() == ["T1", "T2"]
        assert fleet["make"].tolist() == ["Citroën", "Peugeot"]

    def test_spreadsheet_trailing_separators(self, tmp_path: Path) -> None:
        """Trailing empty fields (header included) are no columns: a row's values stay in
        their columns (pandas took the first field as an index and shifted the rest)."""
        body = "vehicle_id,status,\nT1,active,\nT2,parked,\n"
        with pytest.raises(FleetFileError, match="linha 3, coluna status: 'parked'"):
            read_fleet(_write(tmp_path, body))
        fleet = read_fleet(_write(tmp_path, body.replace("parked", "suspended")))
        assert fleet["vehicle_id"].tolist() == ["T1", "T2"]
        assert fleet["status"].tolist() == ["active", "suspended"]

    def test_utf8_with_one_windows_1252_byte_is_refused(self, tmp_path: Path) -> None:
        """One Latin-1 byte in a UTF-8 file: read as Windows-1252 every accent of the file
        would change ("Sedã" stored as "SedÃ£"); the line of the byte is named."""
        path = tmp_path / "mixed.csv"
        path.write_bytes("vehicle_id,model\nT1,Sedã\n".encode() + "T2,Ônix\n".encode("cp1252"))
        with pytest.raises(FleetFileError, match="mixed.csv, linha 3: um caractere não está"):
            read_fleet(path)

    def test_a_pt_br_sheet_s_dates_are_read(self, tmp_path: Path) -> None:
        """DD/MM/AAAA, as a pt-BR spreadsheet saves a date, is the date typed (was refused)."""
        body = (
            "vehicle_id,status,status_since,alvara_valid_until\nT1,active,10/01/2024,31/12/2026\n"
        )
        fleet = read_fleet(_write(tmp_path, body))
        row = fleet.iloc[0]
        assert row["status_since"] == dt.date(2024, 1, 10)
        assert row["alvara_valid_until"] == dt.date(2026, 12, 31)

    def test_contract_year_is_optional(self, tmp_path: Path) -> None:
        """The optional ``year`` (of manufacture) column is read as Int64; blank is missing."""
        fleet = read_fleet(_write(tmp_path, "vehicle_id,year\nT1,2019\nT2,\n"))
        assert str(fleet["year"].dtype) == "Int64"
        assert fleet["year"].iloc[0] == 2019
        assert fleet["year"].isna().iloc[1]
        without = read_fleet(_write(tmp_path, "vehicle_id\nT1\n"))
        assert without["year"].isna().all()

    @pytest.mark.parametrize(
        ("body", "match"),
        [
            (
                "vehicle_id,status\nT1,parked\n",
                "linha 2, coluna status: 'parked' não é uma situação",
            ),
            ("vehicle_id,status_since\nT1,2024/01/10\n", "não é uma data; use AAAA-MM-DD ou"),
            ("vehicle_id,status_since\nT1,31/02/2024\n", "não é uma data; use AAAA-MM-DD ou"),
            ("vehicle_id,status_since\nT1,2024-03-015\n", "não é uma data; use AAAA-MM-DD ou"),
            ("vehicle_id,accessible\nT1,talvez\n", "use sim ou não"),
            ("vehicle_id,year\nT1,19\n", "linha 2, coluna year: '19' não é um ano"),
            (
                "vehicle_id\nT1\nT1\n",
                "linha 3, coluna vehicle_id: 'T1' repete o veículo da linha 2",
            ),
            (  # a quote opened in the wrong place would swallow the next row into one "id"
                'vehicle_id,plate\n"QA-V3,AAA1A11\nQA-V4",BBB2B22\n',
                "linha 2: CSV malformado \\(uma aspa sem fechar\\).* junta as linhas 2 a 3",
            ),
            (  # ... or into another column's text, where no identifier rule would see it
                'vehicle_id,plate,model,status\nQA-31,QAA1A31,"Sedan,ativo\nQA-32,QAA1A32,Hatch,'
                "ativo\n",
                "linha 2: CSV malformado \\(uma aspa sem fechar\\)",
            ),
            ('vehicle_id,plate\n"QA-V3,AAA1A11\n', "CSV malformado \\(uma aspa sem fechar"),
            ("vehicle_id,plate\nT1,A\x00B\n", "linha 2: a linha contém o caractere nulo"),
            (  # an extra field would shift the columns (pandas took the first as an index)
                "vehicle_id,plate,status\nT1,AAA1A11,active\nT2,BBB2B22,active,x\n",
                "linha 3: 4 campos, o cabeçalho tem 3",
            ),
            ("", "o arquivo está vazio"),
            ("vehicle_id\nT 1\n", "linha 2, coluna vehicle_id: 'T 1' não é um identificador"),
            ("placa,marca\nX,Y\n", "não reconhecido"),
            ("vehicle_id|plate\nA1|X\n", "lido como .vehicle_id.plate. .separadores aceitos"),
            (
                "vehicle_id,status_since,status_until\nT1,2024-02-01,2024-01-01\n",
                "coluna status_until: 2024-01-01 é anterior a status_since",
            ),
            (
                "vehicle_id,service_category\nT1,executivo\n",
                "use comum, aeroporto, distrito ou acessivel",
            ),
            (
                "vehicle_id,last_inspection_on\nT1,2024-13-01\n",
                "coluna last_inspection_on: '2024-13-01' não é uma data",
            ),
            (
                "vehicle_id,substituted_plate\nT1,ABC1D23\n",
                "substituted_plate: preenchida sem substitution_since",
            ),
            (
                "vehicle_id,termo_recolhido_until\nT1,2024-01-01\n",
                "preenchida sem termo_recolhido_since",
            ),
            (
                "vehicle_id,termo_recolhido_since,termo_recolhido_until\nT1,2024-02-01,2024-01-01\n",
                "2024-01-01 é anterior a termo_recolhido_since",
            ),
        ],
    )
    def test_bad_contract_values_raise(self, tmp_path: Path, body: str, match: str) -> None:
        """Invalid values are refused with the spreadsheet's row, the column and what is allowed."""
        with pytest.raises(FleetFileError, match=match):
            read_fleet(_write(tmp_path, body))

    def test_vehicle_document_columns(self, tmp_path: Path) -> None:
        """The optional vehicle and document columns are read as dates, text and category."""
        fleet = read_fleet(
            _write(
                tmp_path,
                "vehicle_id,year,first_registered_on,last_inspection_on,alvara_first_issued_on,"
                "substitution_since,substituted_plate,termo_recolhido_since,"
                "termo_recolhido_until,service_category\n"
                "T1,2019,2019-12-30,2024-03-01,2020-01-15,2024-03-02,ABC1D23,2024-04-01,,"
                "Aeroporto\nT2,,,,,,,,,\n",
            )
        ).set_index("vehicle_id")
        t1, t2 = fleet.loc["T1"], fleet.loc["T2"]
        assert t1["first_registered_on"] == dt.date(2019, 12, 30)
        assert t1["last_inspection_on"] == dt.date(2024, 3, 1)
        assert t1["alvara_first_issued_on"] == dt.date(2020, 1, 15)
        assert (t1["substitution_since"], t1["substituted_plate"]) == (
            dt.date(2024, 3, 2),
            "ABC1D23",
        )
        assert (t1["termo_recolhido_since"], t1["termo_recolhido_until"]) == (
            dt.date(2024, 4, 1),
            None,
        )
        assert t1["service_category"] == "aeroporto"
        assert t2[["last_inspection_on", "substituted_plate", "service_category"]].isna().all()

    def test_normalize_name(self) -> None:
        """Stand names compare upper-cased with whitespace collapsed."""
        assert normalize_name("  Av.  Ipiranga x  Rua A ") == "AV. IPIRANGA X RUA A"


class TestLoadStands:
    def test_a_stand_far_from_its_municipality_refuses_the_file(
        self, poa_registry: Connection
    ) -> None:
        """Porto Alegre's stands again, one with latitude and longitude swapped (the South
        Atlantic): the whole file is refused, naming it, as the console's form refuses one
        stand; the stored stands are as they were."""
        from shapely import affinity

        from stands._errors import InvalidGeometryError

        stands = read_poa_stands(POA_STANDS)
        stored = _scalar(poa_registry, "SELECT count(*) FROM stands WHERE retired_at IS NULL")
        first = stands.index[0]
        stands.loc[first, "geometry"] = affinity.affine_transform(
            stands.loc[first, "geometry"], [0, 1, 1, 0, 0, 0]
        )
        sid = stands.loc[first, "stand_id"]
        with pytest.raises(
            InvalidGeometryError, match=rf"fora do seu município .*: {sid} \(4314902\)"
        ):
            load_stands(conn=poa_registry, stands=stands)
        assert (
            _scalar(poa_registry, "SELECT count(*) FROM stands WHERE retired_at IS NULL") == stored
        )


class TestLoadFleet:
    def test_poa_fleet_with_stand_licences(self, poa_registry: Connection) -> None:
        """3,677 vehicles, each active, and 2,520 parking licences matched by stand name."""
        conn = poa_registry
        report = load_fleet(conn=conn, fleet=read_fleet(POA_FLEET), as_of=SNAPSHOT)
        assert report.vehicles.created == 3677
        assert report.statuses_created == 3677
        assert report.licences_created == 2520
        assert report.unmatched_stands == {}
        assert _scalar(conn, "SELECT count(*) FROM vehicles") == 3677
        assert _scalar(conn, "SELECT count(DISTINCT vehicle_id) FROM parking_licences") == 2520
        rodoviaria = _scalar(conn, "SELECT count(*) FROM parking_licences WHERE stand_id = '1'")
        assert rodoviaria == 366  # the file's n_taxis_frota_2020_03_12 for RODOVIÁRIA
        assert _scalar(conn, "SELECT count(valid_from) FROM parking_licences") == 0
        # the file has no accessibility flag: unknown, not "not accessible"
        assert _scalar(conn, "SELECT count(*) FROM vehicles WHERE accessible IS NULL") == 3677
        conn.execute(text("UPDATE vehicles SET accessible = true WHERE vehicle_id = '3247'"))
        load_fleet(conn=conn, fleet=read_fleet(POA_FLEET), as_of=SNAPSHOT)
        assert _scalar(conn, "SELECT accessible FROM vehicles WHERE vehicle_id = '3247'") is True

    def test_reload_changes_nothing(self, poa_registry: Connection) -> None:
        """The same snapshot twice: everything unchanged the second time."""
        fleet = read_fleet(POA_FLEET)
        load_fleet(conn=poa_registry, fleet=fleet, as_of=SNAPSHOT)
        again = load_fleet(conn=poa_registry, fleet=fleet, as_of=SNAPSHOT)
        assert again.vehicles.unchanged == 3677
        assert (again.statuses_created, again.licences_created, again.licences_ended) == (0, 0, 0)
        assert again.licences_unchanged == 2520

    def test_status_change_and_dropped_licence(
        self, poa_registry: Connection, tmp_path: Path
    ) -> None:
        """A new status closes the previous period; a stand no longer named ends its licence."""
        conn = poa_registry
        first = _write(tmp_path, "vehicle_id,stands,status,municipality\nT1,1;2,active,4314902\n")
        load_fleet(conn=conn, fleet=read_fleet(first), as_of=dt.date(2024, 1, 1))
        second = _write(
            tmp_path,
            "vehicle_id,stands,status,status_since,municipality\nT1,2,suspended,2024-03-01,4314902\n",
        )
        report = load_fleet(conn=conn, fleet=read_fleet(second), as_of=dt.date(2024, 3, 5))
        assert (report.statuses_created, report.statuses_closed) == (1, 1)
        assert (report.licences_ended, report.licences_unchanged) == (1, 1)
        periods = conn.execute(
            text(
                "SELECT status, valid_from, valid_until FROM vehicle_status_periods "
                "WHERE vehicle_id = 'T1' ORDER BY valid_from NULLS FIRST"
            )
        ).all()
        assert periods == [
            ("active", None, dt.date(2024, 2, 29)),
            ("suspended", dt.date(2024, 3, 1), None),
        ]
        licences = conn.execute(
            text("SELECT stand_id, valid_until FROM parking_licences ORDER BY stand_id")
        ).all()
        assert licences == [("1", dt.date(2024, 3, 4)), ("2", None)]

    def test_a_file_does_not_undo_an_exclusion(
        self, poa_registry: Connection, tmp_path: Path
    ) -> None:
        """T1 excluded from stand 1 (art. 50): the same file imported again still names the
        stand, and the licence is not granted again (it was, quietly), but said."""
        from sqlalchemy.orm import Session

        from db.stands.registry import exclude_prefixo

        conn = poa_registry
        body = "vehicle_id,stands,municipality\nT1,1;2,4314902\n"
        load_fleet(conn=conn, fleet=read_fleet(_write(tmp_path, body)), as_of=dt.date(2024, 1, 1))
        session = Session(bind=conn)
        exclude_prefixo(
            session=session, stand_id="1", vehicle_id="T1", on=dt.date(2024, 2, 1),
            ground="penalidade", actor="test",
        )  # fmt: skip
        session.flush()
        report = load_fleet(
            conn=conn, fleet=read_fleet(_write(tmp_path, body)), as_of=dt.date(2024, 3, 5)
        )
        assert report.licences_created == 0
        assert report.excluded == (("T1", "1", dt.date(2024, 2, 1)),)
        assert report.excluded_lines() == [
            "T1 no ponto 1: excluído em 01/02/2024 (art. 50); licença não criada"
        ]
        open_ones = conn.execute(
            text("SELECT stand_id FROM parking_licences WHERE valid_until IS NULL ORDER BY 1")
        ).scalars()
        assert list(open_ones) == ["2"]

    def test_a_file_without_the_stands_column_leaves_the_licences(
        self, poa_registry: Connection, tmp_path: Path
    ) -> None:
        """A fleet file that does not say the licences (no ``stands`` column) ends none of them;
        before, it ended every licence of every vehicle it listed."""
        conn = poa_registry
        first = _write(tmp_path, "vehicle_id,stands,municipality\nT1,1;2,4314902\nT2,,4314902\n")
        load_fleet(conn=conn, fleet=read_fleet(first), as_of=dt.date(2024, 1, 1))
        second = _write(tmp_path, "vehicle_id,status,municipality\nT1,active,4314902\n")
        report = load_fleet(conn=conn, fleet=read_fleet(second), as_of=dt.date(2024, 3, 5))
        assert (report.licences_ended, report.licences_created) == (0, 0)
        licences = conn.execute(
            text("SELECT stand_id, valid_until FROM parking_licences ORDER BY stand_id")
        ).all()
        assert licences == [("1", None), ("2", None)]
        # an empty cell does say "no licence"
        third = _write(tmp_path, "vehicle_id,stands,municipality\nT1,,4314902\n")
        assert (
            load_fleet(conn=conn, fleet=read_fleet(third), as_of=dt.date(2024, 3, 6)).licences_ended
            == 2
        )

    def test_unknown_stand_is_reported(self, poa_registry: Connection, tmp_path: Path) -> None:
        """A stand id the registry lacks is listed with the prefixos licensed to it, its
        licences skipped."""
        path = _write(
            tmp_path, "vehicle_id,stands,municipality\nT1,999;1,4314902\nT0,999,4314902\n"
        )
        report = load_fleet(conn=poa_registry, fleet=read_fleet(path), as_of=SNAPSHOT)
        assert report.unmatched_stands == {"999": ("T0", "T1")}
        assert report.unmatched_lines() == ["999 (prefixos T0, T1)"]
        assert report.unmatched_lines(most=1) == ["999 (prefixos T0 e mais 1)"]
        assert report.licences_created == 1
        unplaced = "SELECT unplaced_stands FROM vehicles WHERE vehicle_id = 'T1'"
        assert poa_registry.execute(text(unplaced)).scalar_one() == ["999"]
        # the next import places every licence: the vehicle's licences are known again
        path.write_text("vehicle_id,stands,municipality\nT1,1,4314902\n", encoding="utf-8")
        load_fleet(conn=poa_registry, fleet=read_fleet(path), as_of=SNAPSHOT)
        assert poa_registry.execute(text(unplaced)).scalar_one() == []

    def test_unknown_municipality_raises(self, conn: Connection, tmp_path: Path) -> None:
        """Vehicles of a municipality not in the registry are refused."""
        path = _write(tmp_path, "vehicle_id,municipality\nT1,4314902\n")
        with pytest.raises(UnknownMunicipalityError, match="4314902"):
            load_fleet(conn=conn, fleet=read_fleet(path), as_of=SNAPSHOT)

    def test_accessible_unknown_keeps_stored_value(
        self, poa_registry: Connection, tmp_path: Path
    ) -> None:
        """A file without accessibility does not reset a vehicle marked accessible."""
        conn = poa_registry
        path = _write(tmp_path, "vehicle_id,accessible,municipality\nT1,true,4314902\n")
        load_fleet(conn=conn, fleet=read_fleet(path), as_of=SNAPSHOT)
        blank = _write(tmp_path, "vehicle_id,plate,municipality\nT1,XYZ,4314902\n")
        load_fleet(conn=conn, fleet=read_fleet(blank), as_of=SNAPSHOT)
        row = conn.execute(text("SELECT accessible, plate FROM vehicles")).one()
        assert tuple(row) == (True, "XYZ")

    def test_vehicle_documents_are_stored(self, poa_registry: Connection, tmp_path: Path) -> None:
        """The vehicle and document columns reach the vehicles table as read."""
        conn = poa_registry
        path = _write(
            tmp_path,
            "vehicle_id,municipality,year,first_registered_on,last_inspection_on,"
            "alvara_first_issued_on,substitution_since,substituted_plate,"
            "termo_recolhido_since,termo_recolhido_until,service_category\n"
            "T1,4314902,2019,2019-06-01,2024-02-01,2019-07-01,2024-03-01,ABC1D23,"
            "2024-04-01,2024-04-10,distrito\n",
        )
        load_fleet(conn=conn, fleet=read_fleet(path), as_of=SNAPSHOT)
        row = conn.execute(
            text(
                "SELECT year, first_registered_on, last_inspection_on, alvara_first_issued_on, "
                "substitution_since, substituted_plate, termo_recolhido_since, "
                "termo_recolhido_until, service_category FROM vehicles"
            )
        ).one()
        assert tuple(row) == (
            2019,
            dt.date(2019, 6, 1),
            dt.date(2024, 2, 1),
            dt.date(2019, 7, 1),
            dt.date(2024, 3, 1),
            "ABC1D23",
            dt.date(2024, 4, 1),
            dt.date(2024, 4, 10),
            "distrito",
        )


def test_fleet_frame_columns() -> None:
    """The registry frame carries the contract's fleet columns."""
    from stands.frames import FLEET_COLUMNS

    assert set(FLEET_COLUMNS) <= set(read_fleet(POA_FLEET).columns)


class TestCheckVehicleDocuments:
    @pytest.mark.parametrize(
        ("values", "message"),
        [
            ({"substituted_plate": "ABC1D23"}, "'substituted_plate' sem 'substitution_since'"),
            ({"termo_recolhido_until": dt.date(2024, 1, 1)}, "sem 'termo_recolhido_since'"),
            (
                {
                    "termo_recolhido_since": dt.date(2024, 2, 1),
                    "termo_recolhido_until": dt.date(2024, 1, 1),
                },
                "'termo_recolhido_until' \\(2024-01-01\\) antes de 'termo_recolhido_since'",
            ),
        ],
    )
    def test_each_rule_names_its_fields(self, values: dict, message: str) -> None:
        """The rule the fleet file and the API share refuses each inconsistent pair."""
        from fleet.loaders import check_vehicle_documents

        with pytest.raises(FleetFileError, match=message):
            check_vehicle_documents(values)

    def test_consistent_values_pass(self) -> None:
        """A substitution with its plate and a Termo with an end after its start pass."""
        from fleet.loaders import check_vehicle_documents

        check_vehicle_documents(
            {
                "substitution_since": dt.date(2024, 3, 1),
                "substituted_plate": "ABC1D23",
                "termo_recolhido_since": dt.date(2024, 2, 1),
                "termo_recolhido_until": dt.date(2024, 2, 1),
            }
        )
