"""Read stand layers (GeoJSON, GeoPackage, CSV) into the stands frame of ``stands/frames.py``.

The frame: EPSG:4326, RangeIndex, columns ``stand_id`` (str, unique), ``name`` (str, missing is
NA), ``capacity`` (Int64), ``municipality`` (7-digit IBGE code as str, missing is NA) and
``geometry`` (one valid Polygon/MultiPolygon per stand, 2-D). Points with ``radius_m`` become
circles buffered in metres in the local UTM CRS (``geo.crs.buffer_points_m``).

Invalid polygons (self-intersections, ...) are **rejected** by default, naming the stand and
GEOS's reason: a stand's area is a legal fact, and guessing it silently could turn a driver's
presence into an infraction. ``repair=True`` repairs them with ``shapely.make_valid`` instead
(keeping the polygonal parts) and says so with a :class:`StandGeometryRepairedWarning`.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
import warnings
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pyproj
import shapely
from numpy.typing import NDArray
from shapely.geometry import shape

from fleet._errors import FleetFileError
from fleet.ids import display_text_problem, registry_id_problem
from fleet.loaders import (
    csv_delimiter,
    decoded_text,
    registry_records,
    repeated_columns,
    repeated_columns_message,
    sheet_row,
    unknown_columns_message,
)
from geo.crs import WGS84, buffer_points_m
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
from stands.frames import CAPACITY, MUNICIPALITY, NAME, RADIUS_M, STAND_COLUMNS, STAND_ID

_GEOJSON_CRS_NAMES = {
    "urn:ogc:def:crs:OGC:1.3:CRS84",
    "urn:ogc:def:crs:OGC::CRS84",
    "urn:ogc:def:crs:EPSG::4326",
    "EPSG:4326",
}
_POLYGONAL = ("Polygon", "MultiPolygon")
_IBGE_CODE = re.compile(r"^\d{7}$")
_MAX_LISTED = 5
CSV_COLUMNS = (STAND_ID, "lat", "lon", NAME, CAPACITY, MUNICIPALITY, RADIUS_M)
"""Columns of a stands CSV of the contract: another is refused, never ignored."""
_PLURAL = {"feição": "feições", "linha": "linhas", "registro": "registros"}


def _number(unit: str, i: int | np.integer) -> int:
    """Return the number a person reads for the data row (feature, record) of index ``i``.

    A CSV's line is the spreadsheet's (:func:`fleet.loaders.sheet_row`: the header is row 1);
    features and a frame's records count from 1.
    """
    return sheet_row(int(i)) if unit == "linha" else int(i) + 1


def _at(unit: str, i: int | np.integer) -> str:
    """Name the data row of index ``i``: ``"linha 3"`` (a CSV's second), ``"feição 2"``."""
    return f"{unit} {_number(unit, i)}"


# GEOS validity reasons (shapely.is_valid_reason) in pt-BR; the location follows as "em (x y)".
_INVALID_REASONS = {
    "Self-intersection": "auto-interseção (o contorno cruza a si mesmo)",
    "Ring Self-intersection": "auto-interseção de um anel",
    "Too few points in geometry component": "anel com pontos insuficientes",
    "Hole lies outside shell": "buraco fora do contorno externo",
    "Nested holes": "buracos um dentro do outro",
    "Nested shells": "polígonos um dentro do outro",
    "Interior is disconnected": "interior desconexo",
    "Duplicate Rings": "anéis repetidos",
    "Invalid Coordinate": "coordenada inválida",
    "Ring is not closed": "anel não fechado",
}
_REASON = re.compile(r"^(?P<name>[^\[]+?)\s*(\[(?P<where>[^\]]*)\])?$")


def invalid_reason(geom: Any) -> str:
    """Return why a geometry is invalid, in pt-BR, with the place GEOS names (lon lat).

    Parameters
    ----------
    geom : shapely geometry
        An invalid geometry.
    """
    reason = str(shapely.is_valid_reason(geom))
    match = _REASON.match(reason)
    if match is None:
        return reason
    name = match.group("name").strip()
    text = _INVALID_REASONS.get(name, name)
    where = match.group("where")
    return f"{text} em ({where})" if where else text


def read_stands(
    path: str | Path,
    *,
    default_radius_m: float | None = None,
    layer: str | None = None,
    repair: bool = False,
) -> gpd.GeoDataFrame:
    """Read a stands layer into the stands frame.

    Parameters
    ----------
    path : str or pathlib.Path
        ``.geojson``/``.json`` (FeatureCollection, RFC 7946 lon/lat), ``.gpkg`` (any CRS, converted
        to EPSG:4326) or ``.csv`` (columns ``stand_id``, ``lat``, ``lon``, optional ``radius_m``;
        separator ``,`` ``;`` or tab). Properties/columns: ``stand_id`` (required), ``name``,
        ``capacity``, ``municipality``; Point stands need ``radius_m``.
    default_radius_m : float, optional
        Radius for Point stands without ``radius_m``.
    layer : str, optional
        GeoPackage layer; required when the file has more than one.
    repair : bool
        Repair invalid polygons with ``make_valid`` (warning) instead of rejecting them.

    Returns
    -------
    geopandas.GeoDataFrame
        The stands frame (see the module docstring), in file order.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    StandsFormatError
        If the extension is not supported or the file cannot be parsed: a CSV that names a
        column twice or a column outside :data:`CSV_COLUMNS`, a GeoJSON that gives a key twice
        in one object (:func:`parse_geojson`).
    MissingColumnError, MissingStandIdError, DuplicateStandIdError, NullGeometryError,
    UnsupportedGeometryError, MissingRadiusError, InvalidRadiusError, InvalidGeometryError,
    InvalidAttributeError, StandsCRSError
        On bad content; the message names the feature (1-based) or CSV data row and the stand.
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de pontos de táxi não encontrado: {p}"
        raise FileNotFoundError(msg)
    suffix = p.suffix.lower()
    if suffix in (".geojson", ".json"):
        raw, unit = _read_geojson(p), "feição"
    elif suffix == ".gpkg":
        raw, unit = _read_gpkg(p, layer=layer), "feição"
    elif suffix == ".csv":
        raw, unit = _read_csv(p), "linha"
    else:
        msg = f"formato de '{p.name}' não suportado; esperado .geojson, .json, .gpkg ou .csv"
        raise StandsFormatError(msg)
    return _to_stands_frame(
        raw, source=p.name, unit=unit, default_radius_m=default_radius_m, repair=repair
    )


def read_porto_stands(path: str | Path, *, radius_m: float) -> gpd.GeoDataFrame:
    """Read Porto's taxi stands CSV (``ID, Descricao, Latitude, Longitude``) into the stands frame.

    Parameters
    ----------
    path : str or pathlib.Path
        E.g. ``data/porto/derived/taxi_stands.csv``.
    radius_m : float
        Radius of the circle drawn around each stand point, in metres.

    Returns
    -------
    geopandas.GeoDataFrame
        The stands frame: ``stand_id`` = ``str(ID)``, ``name`` = ``Descricao``, ``capacity`` NA,
        ``municipality`` NA (Porto has no IBGE code).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    MissingColumnError
        If one of the four columns is absent.
    InvalidRadiusError, NullGeometryError, DuplicateStandIdError, MissingStandIdError
        On bad content.
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de pontos de táxi não encontrado: {p}"
        raise FileNotFoundError(msg)
    text = _csv_text(p)
    if repeated := repeated_columns(text, sep=","):
        raise StandsFormatError(repeated_columns_message(repeated, source=p.name))
    df = pd.read_csv(io.StringIO(text), dtype=str)
    _require_columns(df.columns, ("ID", "Descricao", "Latitude", "Longitude"), source=p.name)
    lat = _numbers(df["Latitude"], column="Latitude", source=p.name, unit="linha")
    lon = _numbers(df["Longitude"], column="Longitude", source=p.name, unit="linha")
    raw = gpd.GeoDataFrame(
        {STAND_ID: df["ID"], NAME: df["Descricao"], RADIUS_M: float(radius_m)},
        geometry=_points(lon, lat),
        crs=WGS84,
    )
    return _to_stands_frame(raw, source=p.name, unit="linha", default_radius_m=None, repair=False)


MIN_RADIUS_M = 1.0
"""Smallest radius of a stand given as a point (a smaller one draws no area)."""
MAX_RADIUS_M = 1000.0
"""Largest radius of a stand given as a point: a larger one is a typo, not a stand, and would
count boardings far from it as boardings at the stand."""

STAND_FILE_FORMATS = ("contract", "porto", "porto_alegre")
"""Stand files recognised by :func:`read_any_stands` (see :func:`stand_file_format`)."""
PORTO_ALEGRE = "4314902"
_PORTO_COLUMNS = ("ID", "Descricao", "Latitude", "Longitude")


def stand_file_format(path: str | Path) -> str:
    """Recognise a stands file by its columns.

    Returns
    -------
    str
        ``"porto"`` for Porto's CSV (``ID, Descricao, Latitude, Longitude``), ``"porto_alegre"``
        for Porto Alegre's open-data GeoJSON (properties ``codigo`` and ``nome``, no
        ``stand_id``), else ``"contract"``.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv" and p.is_file():
        with p.open(encoding="utf-8-sig") as fh:
            header = {c.strip() for c in fh.readline().strip().split(",")}
        if set(_PORTO_COLUMNS) <= header and STAND_ID not in header:
            return "porto"
    elif suffix in (".geojson", ".json") and p.is_file():
        try:
            doc = parse_geojson(p.read_text(encoding="utf-8-sig"))
        except (StandsFormatError, UnicodeDecodeError):
            return "contract"  # read_stands says what is wrong
        features = doc.get("features") if isinstance(doc, dict) else None
        first = features[0] if isinstance(features, list) and features else None
        props = first.get("properties") if isinstance(first, dict) else None
        if isinstance(props, dict) and {"codigo", "nome"} <= set(props) and STAND_ID not in props:
            return "porto_alegre"
    return "contract"


def read_any_stands(path: str | Path, *, default_radius_m: float | None = None) -> gpd.GeoDataFrame:
    """Read a stands file of any recognised format (:func:`stand_file_format`).

    The contract's layers go through :func:`read_stands`. Porto's CSV and Porto Alegre's GeoJSON
    are points without a radius: ``default_radius_m`` is required for them. Porto Alegre's
    stands whose coordinate is missing or a placeholder (``coord_quality`` not ``ok``) cannot be
    drawn: they are left out and listed in ``attrs["notes"]``.

    Returns
    -------
    geopandas.GeoDataFrame
        The stands frame; ``attrs["format"]`` is the recognised format and ``attrs["notes"]``
        lists, in pt-BR, what was left out.

    Raises
    ------
    MissingRadiusError
        A format of points without radius and no ``default_radius_m``.
    StandsError
        As :func:`read_stands` and :func:`read_porto_stands`.
    """
    fmt = stand_file_format(path)
    notes: list[str] = []
    if fmt == "contract":
        frame = read_stands(path, default_radius_m=default_radius_m)
    else:
        if default_radius_m is None:
            what = "do Porto" if fmt == "porto" else "de Porto Alegre (dados abertos)"
            msg = (
                f"os pontos {what} em '{Path(path).name}' são coordenadas sem raio; "
                "informe um raio padrão"
            )
            raise MissingRadiusError(msg)
        if fmt == "porto":
            frame = read_porto_stands(path, radius_m=default_radius_m)
        else:
            frame, notes = _read_porto_alegre(Path(path), radius_m=default_radius_m)
    frame.attrs["format"] = fmt
    frame.attrs["notes"] = notes
    return frame


def _read_porto_alegre(path: Path, *, radius_m: float) -> tuple[gpd.GeoDataFrame, list[str]]:
    """Porto Alegre's stands GeoJSON (``codigo``, ``nome``, ``coord_quality``) as stands."""
    raw = _read_geojson(path)
    _require_columns(raw.columns, ("codigo", "nome"), source=path.name)
    ids = np.array([_as_text(v) for v in raw["codigo"].to_numpy(dtype=object)], dtype=object)
    quality = (
        raw["coord_quality"].to_numpy(dtype=object)
        if "coord_quality" in raw.columns
        else np.full(len(raw), "ok", dtype=object)
    )
    geoms = np.asarray(raw.geometry.values, dtype=object)
    null = np.asarray(shapely.is_missing(geoms), dtype=bool)
    null[~null] = shapely.is_empty(geoms[~null])
    placeholder = ~null & np.array([q not in (None, "ok") for q in quality], dtype=bool)
    extinct = ~null & ~placeholder & extinct_names(raw["nome"].to_numpy(dtype=object))
    usable = ~null & ~placeholder & ~extinct
    notes = []
    for mask, why in (
        (null, "sem coordenada no arquivo"),
        (placeholder, "com coordenada provisória (a mesma de outros pontos)"),
        (extinct, "extinto(s) segundo o nome no arquivo"),
    ):
        if mask.any():
            shown = ", ".join(sorted((str(v) for v in ids[mask]), key=lambda s: (len(s), s)))
            notes.append(f"{int(mask.sum())} ponto(s) {why}, fora da análise: {shown}")
    kept = raw.loc[usable]
    stands = gpd.GeoDataFrame(
        {
            STAND_ID: ids[usable],
            NAME: kept["nome"].to_numpy(dtype=object),
            MUNICIPALITY: PORTO_ALEGRE,
            RADIUS_M: float(radius_m),
        },
        geometry=geoms[usable],
        crs=WGS84,
    )
    frame = _to_stands_frame(
        stands, source=path.name, unit="feição", default_radius_m=None, repair=False
    )
    return frame, notes


EXTINCT_NAME = re.compile(r"\s*extint[oa]\b", re.IGNORECASE)
"""How Porto Alegre's open data marks a stand that no longer exists: its name, "Extinto: …"."""


def extinct_names(names: Sequence[Any]) -> NDArray[np.bool_]:
    """Return which stand names say the stand is extinct (:data:`EXTINCT_NAME`)."""
    return np.array([isinstance(n, str) and bool(EXTINCT_NAME.match(n)) for n in names], bool)


def validate_stands(gdf: gpd.GeoDataFrame) -> None:
    """Check that a frame honours the stands contract, or raise a named error.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        Frame to check.

    Raises
    ------
    StandsError
        If ``gdf`` is not a GeoDataFrame or ``stand_id`` holds non-text values.
    MissingColumnError
        If a contract column is absent.
    StandsCRSError
        If the CRS is not EPSG:4326.
    MissingStandIdError, DuplicateStandIdError
        On missing or repeated ``stand_id``.
    NullGeometryError, UnsupportedGeometryError, InvalidGeometryError
        On a null/empty, non-polygonal or invalid geometry.
    InvalidAttributeError
        If ``capacity`` is not an integer column.
    """
    if not isinstance(gdf, gpd.GeoDataFrame):
        msg = f"pontos de táxi devem ser um GeoDataFrame; recebido {type(gdf).__name__}"
        raise StandsError(msg)
    _require_columns(gdf.columns, STAND_COLUMNS, source="quadro de pontos de táxi")
    if gdf.crs is None or not pyproj.CRS(gdf.crs).equals(WGS84):
        got = "nenhum" if gdf.crs is None else gdf.crs.to_string()
        msg = f"CRS dos pontos de táxi era {got}; esperado EPSG:4326"
        raise StandsCRSError(msg)
    ids = gdf[STAND_ID].to_numpy(dtype=object)
    positions = np.arange(len(gdf))
    missing = pd.isna(gdf[STAND_ID]).to_numpy()
    if missing.any():
        raise MissingStandIdError(_listing("stand_id ausente", positions[missing], unit="registro"))
    not_text = np.array([not isinstance(v, str) or not v.strip() for v in ids], dtype=bool)
    if not_text.any():
        shown = ", ".join(repr(v) for v in ids[not_text][:_MAX_LISTED])
        msg = f"stand_id deve ser texto não vazio; valores recebidos: {shown}"
        raise StandsError(msg)
    _check_unique(ids, source="quadro de pontos de táxi", unit="registro")
    geoms = np.asarray(gdf.geometry.values, dtype=object)
    null = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if null.any():
        raise NullGeometryError(
            _listing("sem geometria", positions[null], unit="registro", ids=ids)
        )
    kinds = shapely.get_type_id(geoms)
    bad_kind = ~np.isin(kinds, (3, 6))
    if bad_kind.any():
        i = int(np.flatnonzero(bad_kind)[0])
        msg = (
            f"geometria {geoms[i].geom_type} no ponto de táxi {ids[i]!r} (registro {i + 1}); "
            "esperado Polygon ou MultiPolygon"
        )
        raise UnsupportedGeometryError(msg)
    invalid = ~shapely.is_valid(geoms)
    if invalid.any():
        i = int(np.flatnonzero(invalid)[0])
        msg = (
            f"polígono inválido no ponto de táxi {ids[i]!r} (registro {i + 1}): "
            f"{invalid_reason(geoms[i])}"
        )
        raise InvalidGeometryError(msg)
    if not pd.api.types.is_integer_dtype(gdf[CAPACITY].dtype) and not gdf[CAPACITY].isna().all():
        msg = f"coluna 'capacity' deve ser inteira (Int64); tipo recebido {gdf[CAPACITY].dtype}"
        raise InvalidAttributeError(msg)


# --- readers -------------------------------------------------------------------------------


class _RepeatedKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKeyError(key)
        out[key] = value
    return out


def parse_geojson(text: str, *, source: str | None = None) -> Any:
    """Parse a GeoJSON's text strictly, as the device ingest parses its JSON.

    A key given twice in one object (``"stand_id"`` twice in a feature's properties) is
    refused, never resolved by keeping one of the values.

    Parameters
    ----------
    text : str
        The file's text.
    source : str, optional
        The file's name, for the message.

    Raises
    ------
    StandsFormatError
        pt-BR ("GeoJSON inválido", or "'<source>' não é um GeoJSON válido"): malformed (line
        and column), a key repeated in one object, nested too deep, or an integer of more
        digits than Python converts.
    """
    lead = "GeoJSON inválido" if source is None else f"'{source}' não é um GeoJSON válido"
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKeyError as exc:
        msg = (
            f"{lead}: chave {exc.key[:80]!r} repetida num mesmo objeto; cada chave deve "
            "aparecer uma vez"
        )
    except json.JSONDecodeError as exc:
        msg = f"{lead} (linha {exc.lineno}, coluna {exc.colno})"
    except ValueError:  # int(): digits beyond sys.get_int_max_str_digits()
        msg = f"{lead}: número com mais de {sys.get_int_max_str_digits()} dígitos"
    except RecursionError:
        msg = f"{lead}: JSON aninhado demais"
    raise StandsFormatError(msg)


def _read_geojson(path: Path) -> gpd.GeoDataFrame:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        msg = f"'{path.name}' não é um GeoJSON válido: não está em UTF-8 (byte {exc.start})"
        raise StandsFormatError(msg) from None
    doc = parse_geojson(text, source=path.name)
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        msg = f"'{path.name}' deve ser um GeoJSON FeatureCollection"
        raise StandsFormatError(msg)
    crs_name = ((doc.get("crs") or {}).get("properties") or {}).get("name")
    if crs_name is not None and crs_name not in _GEOJSON_CRS_NAMES:
        msg = (
            f"CRS de '{path.name}' era {crs_name}; GeoJSON deve estar em WGS84 lon/lat (EPSG:4326)"
        )
        raise StandsCRSError(msg)
    features = doc.get("features")
    if not isinstance(features, list):
        msg = f"'{path.name}' não tem a lista 'features'"
        raise StandsFormatError(msg)
    records: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for i, feature in enumerate(features, start=1):
        if not isinstance(feature, dict):
            msg = f"feição {i} de '{path.name}' não é um objeto GeoJSON Feature"
            raise StandsFormatError(msg)
        props = feature.get("properties") or {}
        records.append(dict(props) if isinstance(props, dict) else {})
        geometry = feature.get("geometry")
        try:
            geoms.append(shape(geometry) if geometry else None)
        except (
            ValueError,
            TypeError,
            AttributeError,
            KeyError,
            IndexError,
            shapely.errors.ShapelyError,  # GEOS and unknown geometry types
        ) as exc:
            raise StandsFormatError(_unreadable(i, path.name, geometry)) from exc
    frame = pd.DataFrame.from_records(records, index=pd.RangeIndex(len(records)))
    if not records:  # an empty collection is an empty stands layer
        frame = pd.DataFrame({STAND_ID: pd.Series([], dtype=object)})
    frame = frame.astype(object) if len(frame.columns) else frame
    return gpd.GeoDataFrame(frame, geometry=np.asarray(geoms, dtype=object), crs=WGS84)


def _unreadable(i: int, name: str, geometry: Any) -> str:
    """Say in pt-BR which feature's geometry could not be read, and what was expected."""
    kind = geometry.get("type") if isinstance(geometry, dict) else None
    coords = geometry.get("coordinates") if isinstance(geometry, dict) else geometry
    shown = json.dumps(coords, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return (
        f"feição {i} de '{name}': geometria ilegível (tipo {kind!r}, coordenadas {shown}); "
        "esperado um Point [longitude, latitude] ou um Polygon/MultiPolygon de anéis de tais "
        "pontos"
    )


def _read_gpkg(path: Path, *, layer: str | None) -> gpd.GeoDataFrame:
    try:
        layers = [str(name) for name, _ in pyogrio.list_layers(path)]
    except pyogrio.errors.DataSourceError as exc:
        msg = f"'{path.name}' não é um GeoPackage legível: {exc}"
        raise StandsFormatError(msg) from exc
    if layer is None:
        if len(layers) != 1:
            msg = f"'{path.name}' tem as camadas {layers}; indique qual com 'layer'"
            raise StandsFormatError(msg)
        layer = layers[0]
    elif layer not in layers:
        msg = f"camada {layer!r} não existe em '{path.name}'; camadas: {layers}"
        raise StandsFormatError(msg)
    gdf = gpd.read_file(path, layer=layer)
    if gdf.crs is None:
        msg = f"camada {layer!r} de '{path.name}' sem sistema de referência (CRS)"
        raise StandsCRSError(msg)
    return gdf.to_crs(WGS84)


def _csv_text(path: Path) -> str:
    """Return a stands CSV's text: UTF-8, else Windows-1252 (Excel in pt-BR), as the fleet's."""
    try:
        return decoded_text(path.read_bytes(), source=path.name)
    except FleetFileError as exc:
        raise StandsFormatError(str(exc)) from None


def _read_csv(path: Path) -> gpd.GeoDataFrame:
    """Read a stands CSV as the registry's files are read (:func:`fleet.loaders.registry_records`).

    A blank line is an empty row, so every row keeps the number a spreadsheet shows; empty
    cells are missing values.
    """
    text = _csv_text(path)
    sep = csv_delimiter(text)
    if repeated := repeated_columns(text, sep=sep):
        raise StandsFormatError(repeated_columns_message(repeated, source=path.name))
    try:
        header, records, sep = registry_records(text, source=path.name)
    except FleetFileError as exc:
        raise StandsFormatError(str(exc)) from None
    df = pd.DataFrame(records, columns=[c.strip() for c in header], dtype=object)
    df = df.where(df != "", np.nan)
    _require_columns(df.columns, (STAND_ID, "lat", "lon"), source=path.name)
    if (unknown := unknown_columns_message(df, known=CSV_COLUMNS, source=path.name)) is not None:
        raise StandsFormatError(unknown)
    lat = _numbers(df["lat"], column="lat", source=path.name, unit="linha", comma=sep != ",")
    lon = _numbers(df["lon"], column="lon", source=path.name, unit="linha", comma=sep != ",")
    attrs = df.drop(columns=["lat", "lon"]).astype(object)
    if RADIUS_M in attrs.columns and sep != ",":
        attrs[RADIUS_M] = attrs[RADIUS_M].str.replace(",", ".", regex=False)
    return gpd.GeoDataFrame(attrs, geometry=_points(lon, lat), crs=WGS84)


def _points(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    ok = np.isfinite(lon) & np.isfinite(lat)
    geoms = np.full(lon.shape[0], None, dtype=object)
    geoms[ok] = shapely.points(lon[ok], lat[ok])
    return geoms


def _numbers(
    values: pd.Series, *, column: str, source: str, unit: str, comma: bool = False
) -> np.ndarray:
    text = values.astype(object).where(values.notna(), None)
    if comma:
        text = text.map(lambda v: v.replace(",", ".") if isinstance(v, str) else v)
    nums = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(nums) & text.notna().to_numpy() & (text.astype(str).str.strip() != "").to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (
            f"coluna '{column}' de '{source}', {_at(unit, i)}: valor não numérico {text.iloc[i]!r}"
        )
        raise InvalidAttributeError(msg)
    return nums


# --- normalisation -------------------------------------------------------------------------


def _to_stands_frame(
    raw: gpd.GeoDataFrame,
    *,
    source: str,
    unit: str,
    default_radius_m: float | None,
    repair: bool,
) -> gpd.GeoDataFrame:
    if default_radius_m is not None and not radius_ok(default_radius_m):
        msg = f"o raio padrão era {default_radius_m!r}; esperado {_RADII}"
        raise InvalidRadiusError(msg)
    _require_columns(raw.columns, (STAND_ID,), source=source)
    n = len(raw)
    ids = np.array([_as_text(v) for v in raw[STAND_ID].to_numpy(dtype=object)], dtype=object)
    missing = np.array([v is None for v in ids], dtype=bool)
    if missing.any():
        where = np.flatnonzero(missing)
        raise MissingStandIdError(_listing(f"stand_id ausente em '{source}'", where, unit=unit))
    _check_ids(ids, source=source, unit=unit)
    _check_unique(ids, source=source, unit=unit)
    names = _optional_column(raw, NAME, _as_text, n)
    check_names(names, ids=ids, source=source, unit=unit)

    geoms = shapely.force_2d(np.asarray(raw.geometry.values, dtype=object))
    null = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if null.any():
        where = np.flatnonzero(null)
        raise NullGeometryError(_listing(f"sem geometria em '{source}'", where, unit=unit, ids=ids))
    kinds = np.array([g.geom_type for g in geoms], dtype=object)
    bad_kind = ~np.isin(kinds, (*_POLYGONAL, "Point"))
    if bad_kind.any():
        i = int(np.flatnonzero(bad_kind)[0])
        msg = (
            f"geometria {kinds[i]} no ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}'); "
            "esperado Polygon, MultiPolygon ou Point com radius_m"
        )
        raise UnsupportedGeometryError(msg)

    is_point = kinds == "Point"
    if is_point.any():
        radius = _radii(raw, is_point, ids=ids, source=source, unit=unit, default=default_radius_m)
        pts = gpd.GeoDataFrame(geometry=geoms[is_point], crs=WGS84)
        geoms[is_point] = buffer_points_m(pts, radius[is_point]).geometry.to_numpy()
    geoms = _checked_polygons(geoms, ~is_point, ids=ids, source=source, unit=unit, repair=repair)

    frame = gpd.GeoDataFrame(
        {
            STAND_ID: pd.Series(ids, dtype="str"),
            NAME: pd.Series(names, dtype="str"),
            CAPACITY: pd.Series(
                _optional_column(raw, CAPACITY, _capacity_checker(ids, source, unit), n),
                dtype="Int64",
            ),
            MUNICIPALITY: pd.Series(
                _optional_column(raw, MUNICIPALITY, _municipality_checker(ids, source, unit), n),
                dtype="str",
            ),
        },
        geometry=geoms,
        crs=WGS84,
    )[list(STAND_COLUMNS)]
    validate_stands(frame)
    return frame


def _radii(
    raw: gpd.GeoDataFrame,
    is_point: np.ndarray,
    *,
    ids: np.ndarray,
    source: str,
    unit: str,
    default: float | None,
) -> np.ndarray:
    given = raw[RADIUS_M].to_numpy(dtype=object) if RADIUS_M in raw.columns else [None] * len(raw)
    radius = np.full(len(raw), np.nan)
    for i in np.flatnonzero(is_point):
        value = given[i]
        if _is_blank(value):
            if default is None:
                msg = (
                    f"ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}') é um Point sem "
                    "'radius_m' e não há raio padrão; informe 'radius_m' no arquivo ou um raio "
                    "padrão"
                )
                raise MissingRadiusError(msg)
            radius[i] = default
            continue
        number = _as_float(value)
        if number is None or not radius_ok(number):
            msg = (
                f"'radius_m' do ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}') era "
                f"{value!r}; esperado {_RADII}"
            )
            raise InvalidRadiusError(msg)
        radius[i] = number
    return radius


def _checked_polygons(
    geoms: np.ndarray,
    check: np.ndarray,
    *,
    ids: np.ndarray,
    source: str,
    unit: str,
    repair: bool,
) -> np.ndarray:
    invalid = check & ~shapely.is_valid(geoms)
    if not invalid.any():
        return geoms
    where = np.flatnonzero(invalid)
    if not repair:
        i = int(where[0])
        msg = (
            f"polígono inválido no ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}'): "
            f"{invalid_reason(geoms[i])}; corrija a geometria (ex.: 'Corrigir geometrias' "
            "no QGIS)"
        )
        if where.size > 1:
            msg += f" ({where.size} polígonos inválidos no total)"
        raise InvalidGeometryError(msg)
    out = geoms.copy()
    for j in where.tolist():
        parts = shapely.get_parts(shapely.make_valid(geoms[j]))
        polys = [
            p for p in shapely.get_parts(parts) if p.geom_type in _POLYGONAL and not p.is_empty
        ]
        fixed = shapely.union_all(polys) if polys else None
        if fixed is None or fixed.is_empty or fixed.geom_type not in _POLYGONAL:
            msg = (
                f"polígono inválido no ponto de táxi {ids[j]!r} ({_at(unit, j)} de '{source}') "
                f"sem área após o reparo: {invalid_reason(geoms[j])}"
            )
            raise InvalidGeometryError(msg)
        out[j] = fixed
    shown = ", ".join(repr(ids[i]) for i in where[:_MAX_LISTED])
    warnings.warn(
        f"{where.size} polígono(s) inválido(s) reparado(s) com make_valid em '{source}': {shown}",
        StandGeometryRepairedWarning,
        stacklevel=4,
    )
    return out


def _capacity_checker(ids: np.ndarray, source: str, unit: str) -> Any:
    def check(value: Any, i: int) -> int | None:
        if _is_blank(value):
            return None
        number = _as_float(value)
        if number is None or not number.is_integer() or number < 0:
            msg = (
                f"'capacity' do ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}') era "
                f"{value!r}; esperado um inteiro >= 0 (vagas)"
            )
            raise InvalidAttributeError(msg)
        return int(number)

    return check


def _municipality_checker(ids: np.ndarray, source: str, unit: str) -> Any:
    def check(value: Any, i: int) -> str | None:
        text = _as_text(value)
        if text is None:
            return None
        if not _IBGE_CODE.match(text):
            msg = (
                f"'municipality' do ponto de táxi {ids[i]!r} ({_at(unit, i)} de '{source}') era "
                f"{value!r}; esperado o código IBGE de 7 dígitos (ex.: 4314902)"
            )
            raise InvalidAttributeError(msg)
        return text

    return check


def _optional_column(raw: pd.DataFrame, column: str, convert: Any, n: int) -> list[Any]:
    if column not in raw.columns:
        return [None] * n
    values = raw[column].to_numpy(dtype=object)
    if convert is _as_text:
        return [_as_text(v) for v in values]
    return [convert(v, i) for i, v in enumerate(values)]


# --- small helpers -------------------------------------------------------------------------


def _require_columns(
    columns: Sequence[Hashable] | pd.Index, required: Sequence[str], *, source: str
) -> None:
    present = [str(c) for c in columns]
    absent = [c for c in required if c not in present]
    if absent:
        listed = ", ".join(f"'{c}'" for c in absent)
        msg = (
            f"coluna(s) obrigatória(s) {listed} ausente(s) em '{source}'; "
            f"colunas presentes: {present}"
        )
        raise MissingColumnError(msg)


def _check_ids(ids: np.ndarray, *, source: str, unit: str) -> None:
    """Refuse ids the registry cannot hold (:func:`fleet.ids.registry_id_problem`)."""
    bad = [(i, p) for i, v in enumerate(ids) if (p := registry_id_problem(str(v))) is not None]
    if not bad:
        return
    shown = "; ".join(f"{_at(unit, i)}: {problem}" for i, problem in bad[:_MAX_LISTED])
    more = f"; e mais {len(bad) - _MAX_LISTED}" if len(bad) > _MAX_LISTED else ""
    msg = f"stand_id inválido em '{source}' ({shown}{more})"
    raise InvalidAttributeError(msg)


def check_names(
    names: Sequence[str | None], *, ids: Sequence[Any] | np.ndarray, source: str, unit: str
) -> None:
    """Refuse stand names with a control character or a bidirectional override.

    Raises
    ------
    InvalidAttributeError
        Naming the first few rows (:func:`fleet.ids.display_text_problem`).
    """
    bad = [
        (i, problem)
        for i, name in enumerate(names)
        if name is not None and (problem := display_text_problem(name)) is not None
    ]
    if not bad:
        return
    shown = "; ".join(
        f"{_at(unit, i)} (stand_id {ids[i]!r}): {problem}" for i, problem in bad[:_MAX_LISTED]
    )
    more = f"; e mais {len(bad) - _MAX_LISTED}" if len(bad) > _MAX_LISTED else ""
    msg = f"nome de ponto inválido em '{source}' ({shown}{more})"
    raise InvalidAttributeError(msg)


def _check_unique(ids: np.ndarray, *, source: str, unit: str) -> None:
    series = pd.Series(ids, dtype=object)
    dup = series.duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    groups: dict[str, list[int]] = {}
    for i in np.flatnonzero(dup):
        groups.setdefault(str(ids[i]), []).append(_number(unit, i))
    plural = _PLURAL.get(unit, unit)
    parts = [
        f"{k!r} ({plural} {', '.join(map(str, v))})" for k, v in list(groups.items())[:_MAX_LISTED]
    ]
    more = f" e mais {len(groups) - _MAX_LISTED}" if len(groups) > _MAX_LISTED else ""
    msg = f"stand_id duplicado em '{source}': {'; '.join(parts)}{more}"
    raise DuplicateStandIdError(msg)


def _listing(what: str, where: np.ndarray, *, unit: str, ids: np.ndarray | None = None) -> str:
    def label(i: int) -> str:
        return _at(unit, i) + (f" (stand_id {ids[i]!r})" if ids is not None else "")

    shown = ", ".join(label(int(i)) for i in where[:_MAX_LISTED])
    more = f" e mais {where.size - _MAX_LISTED}" if where.size > _MAX_LISTED else ""
    return f"{what}: {shown}{more}"


def _is_blank(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _as_text(value: Any) -> str | None:
    """Return a trimmed string, integral numbers without a decimal part, or None when blank."""
    if _is_blank(value):
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return (
            float(str(value).strip().replace(",", ".")) if isinstance(value, str) else float(value)
        )
    except (TypeError, ValueError):
        return None


def radius_ok(value: float) -> bool:
    """Whether ``value`` is a stand's radius: a number in [MIN_RADIUS_M, MAX_RADIUS_M] metres."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and MIN_RADIUS_M <= number <= MAX_RADIUS_M


_RADII = f"um número de {MIN_RADIUS_M:g} a {MAX_RADIUS_M:,.0f} (metros)".replace(",", ".")
