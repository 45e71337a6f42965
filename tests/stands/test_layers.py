from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from stands._errors import (
    DuplicateStandIdError,
    InvalidAttributeError,
    InvalidGeometryError,
    InvalidRadiusError,
    MissingColumnError,
    MissingRadiusError,
    MissingStandIdError,
    NullGeometryError,
    StandGeometryRepairedWarning,
    StandsCRSError,
    StandsError,
    StandsFormatError,
    UnsupportedGeometryError,
)
from stands.frames import NAME, STAND_COLUMNS
from stands.layers import (
    read_any_stands,
    read_porto_stands,
    read_stands,
    stand_file_format,
    validate_stands,
)

DATA = Path(__file__).resolve().parents[2] / "data"
POA = (-51.2287, -30.0277)
SQUARE = [[[-51.2290, -30.0280], [-51.2285, -30.0280], [-51.2285, -30.0275], [-51.2290, -30.0280]]]
BOWTIE = [
    [
        [-51.2290, -30.0280],
        [-51.2285, -30.0275],
        [-51.2285, -30.0280],
        [-51.2290, -30.0275],
        [-51.2290, -30.0280],
    ]
]


def _feature(props: dict[str, Any], geometry: dict[str, Any] | None) -> dict[str, Any]:
    return {"type": "Feature", "properties": props, "geometry": geometry}


def _point(lon: float = POA[0], lat: float = POA[1]) -> dict[str, Any]:
    return {"type": "Point", "coordinates": [lon, lat]}


def _polygon(coords: list[Any] = SQUARE) -> dict[str, Any]:
    return {"type": "Polygon", "coordinates": coords}


def _write(tmp_path: Path, features: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp_path / "pontos.geojson"
    path.write_text(
        json.dumps({"type": "FeatureCollection", "features": features, **extra}), encoding="utf-8"
    )
    return path


def _metric_area(gdf: gpd.GeoDataFrame) -> np.ndarray:
    return gdf.to_crs(31982).area.to_numpy()


class TestReadStands:
    def test_geojson_contract(self, tmp_path: Path) -> None:
        """Polygons and Points with radius_m become the stands frame, in file order, typed."""
        path = _write(
            tmp_path,
            [
                _feature(
                    {
                        "stand_id": "A1",
                        "name": "Rodoviária",
                        "capacity": 12,
                        "municipality": "4314902",
                    },
                    _polygon(),
                ),
                _feature(
                    {"stand_id": 7, "radius_m": 25, "capacity": "3", "municipality": 4314902},
                    _point(),
                ),
                _feature({"stand_id": "B", "radius_m": None}, _point(POA[0] + 0.01)),
            ],
        )
        out = read_stands(path, default_radius_m=10.0)
        assert list(out.columns) == list(STAND_COLUMNS)
        assert out["stand_id"].tolist() == ["A1", "7", "B"]
        assert out["name"].iloc[0] == "Rodoviária" and pd.isna(out["name"].iloc[1])
        assert out["capacity"].dtype == "Int64" and out["capacity"].tolist()[:2] == [12, 3]
        assert out["municipality"].tolist()[:2] == ["4314902", "4314902"]
        assert pd.isna(out["municipality"].iloc[2])
        assert out.crs.to_epsg() == 4326 and isinstance(out.index, pd.RangeIndex)
        assert out.geom_type.tolist() == ["Polygon", "Polygon", "Polygon"]
        areas = _metric_area(out)
        assert areas[1] == pytest.approx(math.pi * 25**2, rel=5e-3)
        assert areas[2] == pytest.approx(math.pi * 10**2, rel=5e-3)
        assert out.geometry.iloc[1].centroid.distance(shapely.Point(POA)) < 1e-7

    def test_multipolygon_and_crs84(self, tmp_path: Path) -> None:
        """MultiPolygons are kept; the CRS84 member of older GeoJSON is accepted."""
        multi = {
            "type": "MultiPolygon",
            "coordinates": [
                SQUARE,
                [
                    [
                        [-51.2280, -30.0280],
                        [-51.2275, -30.0280],
                        [-51.2275, -30.0275],
                        [-51.2280, -30.0280],
                    ]
                ],
            ],
        }
        crs = {"type": "name", "properties": {"name": "urn:ogc:def:crs:OGC:1.3:CRS84"}}
        out = read_stands(_write(tmp_path, [_feature({"stand_id": "m"}, multi)], crs=crs))
        assert out.geom_type.tolist() == ["MultiPolygon"]

    def test_three_dimensional_coordinates_dropped(self, tmp_path: Path) -> None:
        """Z values are dropped."""
        poly = _polygon([[[*c, 10.0] for c in SQUARE[0]]])
        out = read_stands(_write(tmp_path, [_feature({"stand_id": "z"}, poly)]))
        assert not out.geometry.iloc[0].has_z

    def test_empty_collection(self, tmp_path: Path) -> None:
        """A FeatureCollection without features gives an empty, typed stands frame."""
        out = read_stands(_write(tmp_path, []))
        assert len(out) == 0 and list(out.columns) == list(STAND_COLUMNS)
        assert out.crs.to_epsg() == 4326 and out["capacity"].dtype == "Int64"

    def test_csv_header_only(self, tmp_path: Path) -> None:
        """A CSV with only its header gives an empty stands frame."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon\n", encoding="utf-8")
        assert len(read_stands(path)) == 0

    def test_real_poa_file_lacks_stand_id(self) -> None:
        """The raw POA open-data file (codigo, nome) is not in the contract: stand_id is named."""
        with pytest.raises(MissingColumnError, match="'stand_id' ausente.*codigo"):
            read_stands(DATA / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson")

    @pytest.mark.parametrize("value", [None, "", "  "])
    def test_missing_stand_id(self, tmp_path: Path, value: object) -> None:
        """A feature without stand_id is refused, naming the feature number."""
        path = _write(
            tmp_path,
            [_feature({"stand_id": "a"}, _polygon()), _feature({"stand_id": value}, _polygon())],
        )
        with pytest.raises(MissingStandIdError, match="stand_id ausente .*feição 2"):
            read_stands(path)

    def test_duplicate_stand_id(self, tmp_path: Path) -> None:
        """Repeated stand_ids (also 7 vs "7") are refused, naming the id and the features."""
        feats = [_feature({"stand_id": s}, _polygon()) for s in ("7", "a", 7)]
        with pytest.raises(DuplicateStandIdError, match=r"'7' \(feições 1, 3\)"):
            read_stands(_write(tmp_path, feats))

    def test_point_without_radius(self, tmp_path: Path) -> None:
        """A Point without radius_m and no default is refused, naming the stand."""
        path = _write(tmp_path, [_feature({"stand_id": "p"}, _point())])
        with pytest.raises(MissingRadiusError, match="'p' \\(feição 1.*radius_m"):
            read_stands(path)

    @pytest.mark.parametrize("radius", [0, -3, "largo", True, 0.5, 1000.5, 5000])
    def test_bad_radius(self, tmp_path: Path, radius: object) -> None:
        """radius_m that is not a number from 1 to 1,000 m (the registry's bounds) is refused:
        a 5 km "stand" would count boardings all over a city as boardings at it."""
        path = _write(tmp_path, [_feature({"stand_id": "p", "radius_m": radius}, _point())])
        with pytest.raises(
            InvalidRadiusError, match="'radius_m' do ponto de táxi 'p'.*de 1 a 1.000 \\(metros\\)"
        ):
            read_stands(path)

    @pytest.mark.parametrize("radius", [1, 1000])
    def test_radius_bounds_are_accepted(self, tmp_path: Path, radius: int) -> None:
        path = _write(tmp_path, [_feature({"stand_id": "p", "radius_m": radius}, _point())])
        assert len(read_stands(path)) == 1

    @pytest.mark.parametrize("default", [0.0, -1.0, math.nan, 1500.0])
    def test_bad_default_radius(self, tmp_path: Path, default: float) -> None:
        """A default radius outside 1–1,000 m is refused."""
        path = _write(tmp_path, [_feature({"stand_id": "p"}, _point())])
        with pytest.raises(InvalidRadiusError, match="raio padrão era"):
            read_stands(path, default_radius_m=default)

    def test_null_geometry(self, tmp_path: Path) -> None:
        """A feature without geometry is refused, naming it."""
        path = _write(
            tmp_path, [_feature({"stand_id": "a"}, _polygon()), _feature({"stand_id": "n"}, None)]
        )
        with pytest.raises(NullGeometryError, match="feição 2 \\(stand_id 'n'\\)"):
            read_stands(path)

    def test_empty_geometry(self, tmp_path: Path) -> None:
        """An empty polygon counts as no geometry."""
        path = _write(
            tmp_path, [_feature({"stand_id": "e"}, {"type": "Polygon", "coordinates": []})]
        )
        with pytest.raises(NullGeometryError, match="stand_id 'e'"):
            read_stands(path)

    def test_line_geometry(self, tmp_path: Path) -> None:
        """A LineString stand is refused, listing the accepted types."""
        line = {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}
        with pytest.raises(
            UnsupportedGeometryError, match="LineString .*Polygon, MultiPolygon ou Point"
        ):
            read_stands(_write(tmp_path, [_feature({"stand_id": "l"}, line)]))

    def test_invalid_polygon_rejected(self, tmp_path: Path) -> None:
        """A self-intersecting polygon is rejected by default, with GEOS's reason and the fix."""
        path = _write(tmp_path, [_feature({"stand_id": "x"}, _polygon(BOWTIE))])
        with pytest.raises(InvalidGeometryError, match=r"'x'.*auto-interseção.*QGIS\)$"):
            read_stands(path)

    def test_invalid_polygon_repaired(self, tmp_path: Path) -> None:
        """repair=True turns the bowtie into its two triangles, warning with the stand's id."""
        path = _write(tmp_path, [_feature({"stand_id": "x"}, _polygon(BOWTIE))])
        with pytest.warns(StandGeometryRepairedWarning, match="reparado.*'x'"):
            out = read_stands(path, repair=True)
        geom = out.geometry.iloc[0]
        assert geom.is_valid and geom.geom_type == "MultiPolygon" and len(geom.geoms) == 2

    @pytest.mark.parametrize(
        ("props", "match"),
        [
            ({"capacity": -1}, "'capacity'.*inteiro >= 0"),
            ({"capacity": 2.5}, "'capacity'.*inteiro >= 0"),
            ({"capacity": "muitas"}, "'capacity'.*inteiro >= 0"),
            ({"municipality": "431490"}, "'municipality'.*7 dígitos"),
            ({"municipality": "Porto Alegre"}, "'municipality'.*7 dígitos"),
        ],
    )
    def test_bad_attributes(self, tmp_path: Path, props: dict[str, Any], match: str) -> None:
        """Bad capacity or municipality values are refused, naming the stand and the column."""
        path = _write(tmp_path, [_feature({"stand_id": "s", **props}, _polygon())])
        with pytest.raises(InvalidAttributeError, match=match):
            read_stands(path)

    def test_not_a_feature_collection(self, tmp_path: Path) -> None:
        """A bare geometry is not a stands layer."""
        path = tmp_path / "x.geojson"
        path.write_text(json.dumps(_polygon()), encoding="utf-8")
        with pytest.raises(StandsFormatError, match="FeatureCollection"):
            read_stands(path)

    def test_a_point_of_one_coordinate_is_said_in_pt_br(self, tmp_path: Path) -> None:
        """A geometry shapely cannot read: its feature, type and coordinates, and what was
        expected, in pt-BR (shapely's English message was shown to the admin)."""
        path = tmp_path / "x.geojson"
        feature = {"type": "Feature", "properties": {"stand_id": "P1"},
                   "geometry": {"type": "Point", "coordinates": [-51.2]}}  # fmt: skip
        path.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}), "utf-8")
        with pytest.raises(StandsFormatError) as caught:
            read_stands(path)
        assert str(caught.value) == (
            "feição 1 de 'x.geojson': geometria ilegível (tipo 'Point', coordenadas [-51.2]); "
            "esperado um Point [longitude, latitude] ou um Polygon/MultiPolygon de anéis de "
            "tais pontos"
        )

    def test_bad_json(self, tmp_path: Path) -> None:
        """Broken JSON is refused as not GeoJSON."""
        path = tmp_path / "x.geojson"
        path.write_text("{", encoding="utf-8")
        with pytest.raises(StandsFormatError, match="não é um GeoJSON válido"):
            read_stands(path)

    def test_foreign_crs_member(self, tmp_path: Path) -> None:
        """A GeoJSON declaring a projected CRS is refused (GeoJSON is lon/lat)."""
        crs = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::31982"}}
        with pytest.raises(StandsCRSError, match="31982"):
            read_stands(_write(tmp_path, [_feature({"stand_id": "a"}, _polygon())], crs=crs))

    def test_unknown_extension(self, tmp_path: Path) -> None:
        """Unsupported extensions are refused, listing the supported ones."""
        path = tmp_path / "pontos.shp"
        path.write_text("", encoding="utf-8")
        with pytest.raises(StandsFormatError, match=".geojson, .json, .gpkg ou .csv"):
            read_stands(path)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file raises FileNotFoundError in pt-BR."""
        with pytest.raises(FileNotFoundError, match="não encontrado"):
            read_stands(tmp_path / "nada.geojson")

    def test_geopackage_reprojected(self, tmp_path: Path) -> None:
        """A GeoPackage in SIRGAS 2000 / UTM 22S comes back in EPSG:4326 with its stands."""
        src = gpd.GeoDataFrame(
            {
                "stand_id": ["g1", "g2"],
                "name": ["Um", "Dois"],
                "capacity": [4, 6],
                "radius_m": [np.nan, 20.0],
            },
            geometry=[
                shapely.box(480_000, 6_678_000, 480_020, 6_678_015),
                shapely.Point(480_100, 6_678_100),
            ],
            crs=31982,
        )
        path = tmp_path / "pontos.gpkg"
        src.to_file(path, layer="pontos")
        out = read_stands(path)
        assert out.crs.to_epsg() == 4326 and out["stand_id"].tolist() == ["g1", "g2"]
        np.testing.assert_allclose(_metric_area(out), [300.0, math.pi * 400], rtol=5e-3)
        assert out["capacity"].tolist() == [4, 6]

    def test_geopackage_layers(self, tmp_path: Path) -> None:
        """With several layers the layer must be named; an unknown one is refused."""
        path = tmp_path / "pontos.gpkg"
        frame = gpd.GeoDataFrame(
            {"stand_id": ["a"]}, geometry=[shapely.Polygon(SQUARE[0])], crs=4326
        )
        frame.to_file(path, layer="um")
        frame.to_file(path, layer="dois")
        with pytest.raises(StandsFormatError, match="indique qual com 'layer'"):
            read_stands(path)
        with pytest.raises(StandsFormatError, match="camada 'tres' não existe"):
            read_stands(path, layer="tres")
        assert read_stands(path, layer="dois")["stand_id"].tolist() == ["a"]

    def test_csv(self, tmp_path: Path) -> None:
        """A CSV of lat/lon with radius_m (or the default) becomes circles."""
        path = tmp_path / "pontos.csv"
        path.write_text(
            "stand_id,name,lat,lon,radius_m,capacity\n"
            f"1,Centro,{POA[1]},{POA[0]},40,5\n"
            f"2,Bairro,{POA[1] + 0.01},{POA[0]},,\n",
            encoding="utf-8",
        )
        out = read_stands(path, default_radius_m=15)
        assert out["stand_id"].tolist() == ["1", "2"] and out["capacity"].tolist()[0] == 5
        np.testing.assert_allclose(
            _metric_area(out), math.pi * np.array([1600.0, 225.0]), rtol=5e-3
        )

    def test_csv_semicolon_decimal_comma(self, tmp_path: Path) -> None:
        """A ';'-separated CSV with decimal commas (spreadsheet pt-BR) is read."""
        path = tmp_path / "pontos.csv"
        lat, lon = str(POA[1]).replace(".", ","), str(POA[0]).replace(".", ",")
        path.write_text(f"stand_id;lat;lon;radius_m\nA;{lat};{lon};12,5\n", encoding="utf-8")
        out = read_stands(path)
        assert _metric_area(out)[0] == pytest.approx(math.pi * 12.5**2, rel=5e-3)

    def test_csv_saved_by_excel_in_windows_1252(self, tmp_path: Path) -> None:
        """A stands CSV saved in Windows-1252 (Excel in pt-BR) is read with its accents, as the
        fleet's is; a file in neither encoding is a pt-BR error naming it."""
        path = tmp_path / "pontos.csv"
        row = f"stand_id;name;lat;lon;radius_m\nA;Praça Açorianos;{POA[1]};{POA[0]};30\n"
        path.write_bytes(row.replace(";", ",").encode("cp1252"))
        assert read_stands(path)[NAME].tolist() == ["Praça Açorianos"]
        path.write_bytes(b"stand_id,lat,lon\nA,\x81,\x8d\n")
        with pytest.raises(StandsFormatError, match="pontos.csv: o arquivo não está em UTF-8"):
            read_stands(path, default_radius_m=10)

    def test_csv_missing_columns(self, tmp_path: Path) -> None:
        """A CSV without lat/lon is refused, naming what is missing and what is there."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,latitude,longitude\n1,-30,-51\n", encoding="utf-8")
        with pytest.raises(MissingColumnError, match="'lat', 'lon' ausente.*latitude"):
            read_stands(path, default_radius_m=10)

    def test_csv_bad_number(self, tmp_path: Path) -> None:
        """A non-numeric coordinate is refused, naming the column and the row a spreadsheet
        shows (the header is row 1)."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon\n1,-30,-51\n2,norte,-51\n", encoding="utf-8")
        with pytest.raises(InvalidAttributeError, match="'lat'.*linha 3.*'norte'"):
            read_stands(path, default_radius_m=10)

    def test_csv_missing_coordinate(self, tmp_path: Path) -> None:
        """A row without coordinates has no geometry: refused, naming the row."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon\n1,-30,-51\n2,,-51\n", encoding="utf-8")
        with pytest.raises(NullGeometryError, match="linha 3 \\(stand_id '2'\\)"):
            read_stands(path, default_radius_m=10)

    def test_csv_blank_line_keeps_the_rows_numbers(self, tmp_path: Path) -> None:
        """A blank line is an empty row (refused, named): the rows after it keep the numbers a
        spreadsheet shows."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon\n1,-30,-51\n\n2,norte,-51\n", encoding="utf-8")
        with pytest.raises(InvalidAttributeError, match="'lat'.*linha 4.*'norte'"):
            read_stands(path, default_radius_m=10)
        path.write_text("stand_id,lat,lon\n1,-30,-51\n\n2,-30,-51\n", encoding="utf-8")
        with pytest.raises(MissingStandIdError, match="linha 3"):
            read_stands(path, default_radius_m=10)


class TestStandIdsAndNames:
    @pytest.mark.parametrize("bad", ["a/b", "a?b", "a#b", "a%b", "a b", "a\tb", "a;b", "x" * 65])
    def test_id_unreachable_by_url_is_refused(self, tmp_path: Path, bad: str) -> None:
        """A stand_id the registry cannot hold (fleet.ids) is refused, naming the feature."""
        path = _write(tmp_path, [_feature({"stand_id": bad}, _polygon())])
        with pytest.raises(InvalidAttributeError, match="stand_id inválido .*feição 1"):
            read_stands(path)

    def test_id_in_csv_is_checked_too(self, tmp_path: Path) -> None:
        """A CSV row with a slash in its stand_id is refused, naming the row."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon,radius_m\nP1,-30.02,-51.22,20\nP/2,-30.03,-51.22,20\n")
        with pytest.raises(InvalidAttributeError, match="linha 3"):
            read_stands(path)

    @pytest.mark.parametrize("name", ["Praça\u202eXV", "Praça\u2066XV", "Praça\nXV", "a\x00b"])
    def test_name_with_control_or_bidi_characters_is_refused(
        self, tmp_path: Path, name: str
    ) -> None:
        """A name with a control character or a bidirectional override is refused."""
        path = _write(tmp_path, [_feature({"stand_id": "P1", "name": name}, _polygon())])
        with pytest.raises(InvalidAttributeError, match="nome de ponto inválido .*'P1'"):
            read_stands(path)

    def test_blanks_around_id_and_name_are_stripped(self, tmp_path: Path) -> None:
        """Surrounding blanks are not part of the id nor of the name."""
        props = {"stand_id": "  P1 ", "name": "  Praça XV  "}
        out = read_stands(_write(tmp_path, [_feature(props, _polygon())]))
        assert (out["stand_id"].iloc[0], out["name"].iloc[0]) == ("P1", "Praça XV")

    def test_porto_csv_with_bad_id_is_refused(self, tmp_path: Path) -> None:
        """Porto's CSV goes through the same rule."""
        path = tmp_path / "porto.csv"
        path.write_text("ID,Descricao,Latitude,Longitude\n1 2,Agra,41.1,-8.6\n", encoding="utf-8")
        with pytest.raises(InvalidAttributeError, match="stand_id inválido"):
            read_porto_stands(path, radius_m=50)

    @pytest.mark.parametrize(
        "path",
        [
            DATA / "porto" / "derived" / "taxi_stands.csv",
            DATA / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson",
        ],
        ids=["porto", "porto_alegre"],
    )
    def test_real_stand_files_pass(self, path: Path) -> None:
        """The bundled Porto and Porto Alegre stands all have valid ids and names."""
        assert len(read_any_stands(path, default_radius_m=30)) > 60


class TestReadPortoStands:
    def test_real_file(self) -> None:
        """Porto's 63 stands become 63 circles with string ids and names."""
        out = read_porto_stands(DATA / "porto" / "derived" / "taxi_stands.csv", radius_m=50)
        assert len(out) == 63 and list(out.columns) == list(STAND_COLUMNS)
        assert out["stand_id"].iloc[0] == "1" and out["name"].iloc[0] == "Agra"
        assert out["capacity"].isna().all() and out["municipality"].isna().all()
        area = out.iloc[[0]].to_crs(32629).area.iloc[0]
        assert area == pytest.approx(math.pi * 2500, rel=5e-3)

    def test_missing_column(self, tmp_path: Path) -> None:
        """A file without Latitude is refused, naming it."""
        path = tmp_path / "porto.csv"
        path.write_text("ID,Descricao,Lat,Longitude\n1,Agra,41.1,-8.6\n", encoding="utf-8")
        with pytest.raises(MissingColumnError, match="'Latitude'"):
            read_porto_stands(path, radius_m=50)

    def test_bad_radius(self) -> None:
        """A radius that is not > 0 is refused."""
        with pytest.raises(InvalidRadiusError, match="'radius_m'"):
            read_porto_stands(DATA / "porto" / "derived" / "taxi_stands.csv", radius_m=0)


class TestValidateStands:
    @pytest.fixture
    def good(self) -> gpd.GeoDataFrame:
        return gpd.GeoDataFrame(
            {
                "stand_id": pd.Series(["a", "b"], dtype="str"),
                "name": ["A", "B"],
                "capacity": pd.Series([1, None], dtype="Int64"),
                "municipality": ["4314902", None],
            },
            geometry=[shapely.Polygon(SQUARE[0]), shapely.box(-51.22, -30.02, -51.21, -30.01)],
            crs=4326,
        )

    def test_good(self, good: gpd.GeoDataFrame) -> None:
        """A frame honouring the contract passes."""
        validate_stands(good)

    def test_not_a_geodataframe(self) -> None:
        """A plain DataFrame is refused."""
        with pytest.raises(StandsError, match="GeoDataFrame"):
            validate_stands(pd.DataFrame({"stand_id": ["a"]}))  # type: ignore[arg-type]

    def test_missing_column(self, good: gpd.GeoDataFrame) -> None:
        """A frame without capacity is refused, naming it."""
        with pytest.raises(MissingColumnError, match="'capacity'"):
            validate_stands(good.drop(columns="capacity"))

    def test_wrong_crs(self, good: gpd.GeoDataFrame) -> None:
        """A frame in UTM is refused, naming its CRS."""
        with pytest.raises(StandsCRSError, match="EPSG:31982"):
            validate_stands(good.to_crs(31982))

    def test_duplicate(self, good: gpd.GeoDataFrame) -> None:
        """Duplicate ids are refused."""
        good["stand_id"] = ["a", "a"]
        with pytest.raises(DuplicateStandIdError, match="'a'"):
            validate_stands(good)

    def test_missing_id(self, good: gpd.GeoDataFrame) -> None:
        """A missing id is refused, naming the row."""
        good["stand_id"] = ["a", None]
        with pytest.raises(MissingStandIdError, match="registro 2"):
            validate_stands(good)

    def test_numeric_id(self, good: gpd.GeoDataFrame) -> None:
        """Numeric ids are refused: stand_id is text."""
        good["stand_id"] = pd.Series([1, 2], dtype=object)
        with pytest.raises(StandsError, match="stand_id deve ser texto"):
            validate_stands(good)

    def test_point_geometry(self, good: gpd.GeoDataFrame) -> None:
        """Points (not yet buffered) are refused."""
        good.loc[1, "geometry"] = shapely.Point(POA)
        with pytest.raises(UnsupportedGeometryError, match="Point no ponto de táxi 'b'"):
            validate_stands(good)

    def test_null_geometry(self, good: gpd.GeoDataFrame) -> None:
        """A null geometry is refused, naming the stand."""
        good.loc[0, "geometry"] = None
        with pytest.raises(NullGeometryError, match="stand_id 'a'"):
            validate_stands(good)

    def test_invalid_geometry(self, good: gpd.GeoDataFrame) -> None:
        """An invalid polygon is refused."""
        good.loc[0, "geometry"] = shapely.Polygon(BOWTIE[0])
        with pytest.raises(InvalidGeometryError, match="'a'"):
            validate_stands(good)

    def test_float_capacity(self, good: gpd.GeoDataFrame) -> None:
        """A float capacity column is refused."""
        good["capacity"] = [1.5, 2.0]
        with pytest.raises(InvalidAttributeError, match="'capacity'"):
            validate_stands(good)


class TestReadAnyStands:
    POA = DATA / "brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson"
    PORTO = DATA / "porto/derived/taxi_stands.csv"

    def test_formats_recognised(self, tmp_path: Path) -> None:
        """The bundled files are recognised by their columns; anything else is the contract."""
        contract = _write(tmp_path, [_feature({"stand_id": "A"}, _point())])
        assert stand_file_format(self.PORTO) == "porto"
        assert stand_file_format(self.POA) == "porto_alegre"
        assert stand_file_format(contract) == "contract"

    def test_porto_alegre_as_is(self) -> None:
        """363 of Porto Alegre's 379 stands have a usable point and exist; the 16 others are
        named (the file marks stand 484 extinct in its name only: "Extinto: Polônia x …")."""
        out = read_any_stands(self.POA, default_radius_m=30)
        assert len(out) == 363 and out.attrs["format"] == "porto_alegre"
        assert "484" not in set(out["stand_id"])
        assert (
            out.attrs["notes"][2]
            == "1 ponto(s) extinto(s) segundo o nome no arquivo, fora da análise: 484"
        )
        assert set(out["municipality"]) == {"4314902"}
        assert out.attrs["notes"][0].endswith("fora da análise: 441, 468")
        assert "470, 471" in out.attrs["notes"][1]
        validate_stands(out)

    def test_porto_as_is(self) -> None:
        """Porto's 63 stands become circles of the given radius."""
        out = read_any_stands(self.PORTO, default_radius_m=100)
        assert len(out) == 63 and out.attrs["format"] == "porto"
        area = out.to_crs(32629).area.to_numpy()  # WGS 84 / UTM 29N, Porto's zone
        np.testing.assert_allclose(area.mean(), math.pi * 100**2, rtol=5e-3)

    @pytest.mark.parametrize("which", ["POA", "PORTO"])
    def test_radius_needed(self, which: str) -> None:
        """Points without a radius need a default radius; the message does not name Python."""
        with pytest.raises(MissingRadiusError, match="informe um raio padrão$") as caught:
            read_any_stands(getattr(self, which))
        assert "default_radius_m" not in str(caught.value)
