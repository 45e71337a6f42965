"""Stand registries into the database: Porto Alegre's and Porto's real files, the contract layer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import geopandas as gpd
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from db.stands.store import load_stands
from stands._errors import DuplicateStandIdError, InvalidAttributeError
from stands.loaders import DEFAULT_POINT_RADIUS_M, read_poa_stands, read_stands_registry

DATA = Path(__file__).resolve().parents[2] / "data"
POA_STANDS = DATA / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
PORTO_STANDS = DATA / "porto" / "derived" / "taxi_stands.csv"
CIRCLE_M2 = math.pi * DEFAULT_POINT_RADIUS_M**2


@pytest.fixture(scope="module")
def poa() -> gpd.GeoDataFrame:
    return read_poa_stands(POA_STANDS)


@pytest.fixture
def conn(db_session: Session) -> Connection:
    db_session.execute(
        text("INSERT INTO municipalities (code, name, uf) VALUES ('4314902', 'Porto Alegre', 'RS')")
    )
    return db_session.connection()


def _contract(tmp_path: Path, features: list[dict[str, object]]) -> Path:
    path = tmp_path / "stands.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


def _feature(stand_id: str, geometry: dict[str, object], **props: object) -> dict[str, object]:
    return {
        "type": "Feature",
        "properties": {"stand_id": stand_id, **props},
        "geometry": geometry,
    }


SQUARE = {
    "type": "Polygon",
    "coordinates": [
        [[-51.2200, -30.0300], [-51.2195, -30.0300], [-51.2195, -30.0295], [-51.2200, -30.0300]]
    ],
}


class TestReadPoaStands:
    def test_all_379_stands_363_with_geometry(self, poa: gpd.GeoDataFrame) -> None:
        """Every stand is kept; the 363 with a good coordinate that exist get a circle, 16 get
        none (stand 484's name says "Extinto": no citizen is sent there, no one accused)."""
        assert len(poa) == 379
        assert int(poa.geometry.notna().sum()) == 363
        extinct = poa[poa["stand_id"] == "484"].iloc[0]
        assert extinct.geometry is None and "extinto" in extinct["location_note"]
        assert set(poa.geometry.dropna().geom_type) == {"MultiPolygon"}

    def test_unusable_locations_are_reported(self, poa: gpd.GeoDataFrame) -> None:
        """The 2 null and 13 placeholder coordinates are listed in the notes, by codigo."""
        notes = poa.attrs["notes"]
        assert notes[0].startswith("2 pontos sem coordenada") and "441, 468" in notes[0]
        assert notes[1].startswith("13 pontos com coordenada provisória") and "470" in notes[1]
        assert notes[2] == "1 ponto extinto (sem geometria): 484"
        no_geom = poa[poa.geometry.isna()]
        assert no_geom["location_note"].notna().all()

    def test_circles_buffered_in_sirgas_utm_22s(self, poa: gpd.GeoDataFrame) -> None:
        """Each circle has the 30 m radius's area measured in EPSG:31982."""
        areas = poa.dropna(subset=["geometry"]).to_crs(31982).area
        assert areas.between(CIRCLE_M2 * 0.99, CIRCLE_M2 * 1.001).all()

    def test_fields_from_the_file(self, poa: gpd.GeoDataFrame) -> None:
        """codigo → stand_id, nome → name, address from logradouro/numero, Porto Alegre's code."""
        row = poa.set_index("stand_id").loc["1"]
        assert (row["name"], row["address"], row["phone"]) == (
            "RODOVIÁRIA",
            "LG VESPASIANO JULIO VEPPO",
            "3221-9371",
        )
        assert row["municipality"] == "4314902"
        assert row["radius_m"] == DEFAULT_POINT_RADIUS_M


class TestReadStandsRegistry:
    def test_porto_csv(self) -> None:
        """Porto's 63 stands become circles buffered in WGS 84 / UTM 29N, no municipality."""
        porto = read_stands_registry(PORTO_STANDS)
        assert len(porto) == 63
        assert porto["municipality"].isna().all()
        areas = porto.to_crs(32629).area
        assert areas.between(CIRCLE_M2 * 0.99, CIRCLE_M2 * 1.001).all()

    def test_poa_geojson_is_recognised(self) -> None:
        """The POA file (codigo/nome properties) goes through the POA reader."""
        frame = read_stands_registry(POA_STANDS)
        assert len(frame) == 379 and int(frame.geometry.notna().sum()) == 363

    def test_contract_layer(self, tmp_path: Path) -> None:
        """Contract polygons and points with radius_m; the option fills missing municipalities."""
        path = _contract(
            tmp_path,
            [
                _feature("S1", SQUARE, name="Praça", capacity=4),
                _feature("S2", {"type": "Point", "coordinates": [-51.21, -30.03]}, radius_m=20),
            ],
        )
        frame = read_stands_registry(path, municipality="4314902").set_index("stand_id")
        assert frame.loc["S1", "capacity"] == 4
        assert math.isnan(frame.loc["S1", "radius_m"])
        assert frame.loc["S2", "radius_m"] == 20.0
        assert set(frame["municipality"]) == {"4314902"}
        assert set(frame.geometry.geom_type) == {"MultiPolygon"}


class TestLoadStands:
    def test_load_and_reload(self, conn: Connection, poa: gpd.GeoDataFrame) -> None:
        """379 created; the same file again leaves all 379 unchanged."""
        first = load_stands(conn=conn, stands=poa)
        assert (first.created, first.updated, first.retired) == (379, 0, 0)
        again = load_stands(conn=conn, stands=poa)
        assert (again.created, again.updated, again.unchanged, again.retired) == (0, 0, 379, 0)
        counts = conn.execute(text("SELECT count(*), count(geometry) FROM stands")).one()
        assert tuple(counts) == (379, 363)

    def test_changes_and_retirements(self, conn: Connection, poa: gpd.GeoDataFrame) -> None:
        """A renamed stand is updated, a missing one retired, and it returns un-retired."""
        load_stands(conn=conn, stands=poa)
        edited = poa[poa["stand_id"] != "2"].copy()
        edited.loc[edited["stand_id"] == "1", "name"] = "RODOVIÁRIA NOVA"
        report = load_stands(conn=conn, stands=edited)
        assert (report.created, report.updated, report.unchanged, report.retired) == (0, 1, 377, 1)
        retired = conn.execute(
            text("SELECT stand_id FROM stands WHERE retired_at IS NOT NULL")
        ).scalars()
        assert list(retired) == ["2"]
        back = load_stands(conn=conn, stands=poa)
        assert (back.updated, back.retired) == (2, 0)

    def test_no_retirement_when_asked(self, conn: Connection, poa: gpd.GeoDataFrame) -> None:
        """With retire_missing=False, stands absent from the file stay active."""
        load_stands(conn=conn, stands=poa)
        report = load_stands(conn=conn, stands=poa.head(10), retire_missing=False)
        assert report.retired == 0

    def test_geometry_round_trip(self, conn: Connection, poa: gpd.GeoDataFrame) -> None:
        """The stored polygon is the one read, in EPSG:4326."""
        load_stands(conn=conn, stands=poa)
        stored = gpd.read_postgis(
            text("SELECT stand_id, geometry FROM stands WHERE stand_id = '1'"),
            conn,
            geom_col="geometry",
        )
        assert stored.crs.to_epsg() == 4326
        original = poa.set_index("stand_id").loc["1", "geometry"]
        assert stored.geometry.iloc[0].equals_exact(original, 1e-12)

    def test_ids_of_another_municipality_raise(
        self, conn: Connection, poa: gpd.GeoDataFrame
    ) -> None:
        """Porto's ids 1–63 collide with Porto Alegre's: refused, with the way out."""
        load_stands(conn=conn, stands=poa)
        porto = read_stands_registry(PORTO_STANDS)
        with pytest.raises(DuplicateStandIdError, match="--id-prefix"):
            load_stands(conn=conn, stands=porto)


class TestStandIdsAndNamesOfImports:
    def test_contract_with_bad_id_is_refused(self, tmp_path: Path) -> None:
        """``pontual import stands`` and the console's import refuse an id with a slash."""
        path = _contract(tmp_path, [_feature("P/1", SQUARE)])
        with pytest.raises(InvalidAttributeError, match="stand_id inválido"):
            read_stands_registry(path)

    def test_porto_alegre_file_with_bidi_name_is_refused(self, tmp_path: Path) -> None:
        """A ``nome`` of Porto Alegre's file with a bidirectional override is refused."""
        doc = json.loads(POA_STANDS.read_text(encoding="utf-8"))
        doc["features"][0]["properties"]["nome"] = "RODOVI\u202eÁRIA"
        path = tmp_path / "pontos_poa.geojson"
        path.write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(InvalidAttributeError, match="nome de ponto inválido"):
            read_stands_registry(path)

    def test_real_files_pass(self) -> None:
        """The bundled Porto Alegre and Porto files still load whole."""
        assert len(read_stands_registry(POA_STANDS)) == 379
        assert len(read_stands_registry(PORTO_STANDS)) == 63


class TestWithIdPrefix:
    def test_prefixes_and_checks_every_id(self) -> None:
        """``PT-`` before each id (the import's ``--id-prefix``); a prefix the URLs cannot hold,
        or one that makes an id too long, is refused naming the id, for the CLI and the
        console alike."""
        import geopandas as gpd
        import shapely

        from stands._errors import InvalidAttributeError
        from stands.loaders import with_id_prefix

        frame = gpd.GeoDataFrame(
            {"stand_id": ["1", "22"]}, geometry=[shapely.Point(0, 0)] * 2, crs="EPSG:4326"
        )
        assert with_id_prefix(frame, "PT-")["stand_id"].tolist() == ["PT-1", "PT-22"]
        assert frame["stand_id"].tolist() == ["1", "22"]
        assert with_id_prefix(frame, "") is frame
        with pytest.raises(InvalidAttributeError, match="'PT/1'"):
            with_id_prefix(frame, "PT/")
        with pytest.raises(InvalidAttributeError, match="prefixo"):
            with_id_prefix(frame, "X" * 70)
