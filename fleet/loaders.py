"""Registry readers: municipalities, IBGE population, the fleet (contract CSV or POA's file).

Readers turn files into frames (pure, no database: ``pontual analyze`` reads a fleet without
importing SQLAlchemy); :mod:`db.fleet.store` writes them to the database. Dates in the registry are
local calendar dates, inclusive; a null start means "not known" (a registry snapshot), never
"today".
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from fleet._errors import FleetFileError
from fleet.dates import RegistryDateError, check_field_date
from fleet.ids import check_registry_id
from fleet.vocabulary import SERVICE_CATEGORIES, VEHICLE_STATUSES
from geo.calendar import TIMEZONE_EXCEPTIONS, UF_TIMEZONES

PORTO_ALEGRE = "4314902"


CENSUS_2022 = "IBGE, Censo Demográfico 2022 (pop_total, 1ª divulgação)"
ESTIMATE_2024 = "IBGE, Estimativas da população residente, 1º jul. 2024 (DOU)"

FLEET_REGISTRY_COLUMNS = (
    "vehicle_id", "prefixo", "plate", "make", "model", "year", "fuel", "first_registered_on",
    "accessible", "status", "status_since", "status_until", "alvara_valid_until",
    "inspection_valid_until", "municipality", "stands", "stand_names",
    "last_inspection_on", "alvara_first_issued_on", "substitution_since", "substituted_plate",
    "termo_recolhido_since", "termo_recolhido_until", "service_category",
)  # fmt: skip
VEHICLE_DOCUMENT_DATES = (
    "first_registered_on", "last_inspection_on", "alvara_first_issued_on",
    "substitution_since", "termo_recolhido_since", "termo_recolhido_until",
)  # fmt: skip
"""Optional dates of the contract fleet about the vehicle and its documents."""
_TRUE = {"true", "t", "1", "yes", "y", "sim", "s", "verdadeiro"}
_FALSE = {"false", "f", "0", "no", "n", "nao", "não", "falso"}
_CODE = re.compile(r"^\d{7}$")


def normalize_name(name: str) -> str:
    """Upper-case and collapse whitespace: how POA's fleet file names its stands."""
    return re.sub(r"\s+", " ", str(name).strip().upper())


# --------------------------------------------------------------------------- municipalities


def _require(df: pd.DataFrame, columns: Sequence[str], *, source: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        msg = f"{source}: faltam as colunas {', '.join(missing)}"
        raise FleetFileError(msg)


def read_municipalities(
    census_path: str | Path, *, boundaries_path: str | Path | None = None
) -> gpd.GeoDataFrame:
    """Read every municipality of the IBGE census file, with boundaries where a file gives them.

    Parameters
    ----------
    census_path : str or pathlib.Path
        CSV with ``cod_ibge, uf, nome`` (e.g. ``data/brazil/population/censo2022_…csv``).
    boundaries_path : str or pathlib.Path, optional
        GeoJSON of municipal polygons with property ``cod_ibge``.

    Returns
    -------
    geopandas.GeoDataFrame
        ``code``, ``name``, ``uf``, ``timezone`` (IANA, None for Amazonas), geometry
        MultiPolygon in EPSG:4326 or None; one row per code.

    Raises
    ------
    FleetFileError
        If a column is missing or a code is not 7 digits.
    """
    census = pd.read_csv(census_path, dtype=str, encoding="utf-8-sig")
    source = Path(census_path).name
    _require(census, ("cod_ibge", "uf", "nome"), source=source)
    codes = census["cod_ibge"].str.strip()
    _check_codes(codes, source=source)
    uf = census["uf"].str.strip().str.upper()
    tz = uf.map(UF_TIMEZONES).astype(object)
    tz = tz.where(~codes.isin(TIMEZONE_EXCEPTIONS), codes.map(TIMEZONE_EXCEPTIONS))
    out = gpd.GeoDataFrame(
        {
            "code": codes,
            "name": census["nome"].str.strip(),
            "uf": uf,
            "timezone": tz.where(tz.notna(), None),
        },
        geometry=gpd.GeoSeries([None] * len(census), crs="EPSG:4326"),
        crs="EPSG:4326",
    )
    if boundaries_path is not None:
        bounds = read_boundaries(boundaries_path)
        geom_by_code = dict(zip(bounds["code"], bounds.geometry, strict=True))
        out["geometry"] = gpd.GeoSeries([geom_by_code.get(c) for c in out["code"]], crs="EPSG:4326")
        extra = bounds[~bounds["code"].isin(out["code"])]
        if len(extra):
            name = Path(boundaries_path).name
            msg = f"{name}: códigos sem linha no censo: {', '.join(extra['code'])}"
            raise FleetFileError(msg)
    return out


def _check_codes(codes: pd.Series, *, source: str) -> None:
    bad = ~codes.fillna("").str.match(_CODE)
    if bad.any():
        msg = f"{source}: código IBGE {codes[bad].iloc[0]!r} inválido; esperado 7 dígitos"
        raise FleetFileError(msg)


def read_boundaries(path: str | Path) -> gpd.GeoDataFrame:
    """Read municipal boundaries (GeoJSON with ``cod_ibge``) as MultiPolygons in EPSG:4326.

    Parameters
    ----------
    path : str or pathlib.Path
        E.g. ``data/brazil/boundaries/municipios_poa_pvh_pintobandeira.geojson``.

    Returns
    -------
    geopandas.GeoDataFrame
        ``code`` and MultiPolygon geometry.

    Raises
    ------
    FleetFileError
        If ``cod_ibge`` is missing or a geometry is not polygonal.
    """
    gdf = gpd.read_file(path)
    _require(gdf, ("cod_ibge",), source=Path(path).name)
    gdf = gdf.to_crs("EPSG:4326") if gdf.crs is not None else gdf.set_crs("EPSG:4326")
    geoms = gdf.geometry.to_numpy()
    kinds = shapely.get_type_id(geoms)
    if not np.isin(kinds, (3, 6)).all():  # Polygon, MultiPolygon
        msg = f"{Path(path).name}: limite municipal não poligonal"
        raise FleetFileError(msg)
    multi = [shapely.MultiPolygon([g]) if shapely.get_type_id(g) == 3 else g for g in geoms]
    codes = gdf["cod_ibge"].astype(str).str.strip()
    _check_codes(codes, source=Path(path).name)
    return gpd.GeoDataFrame({"code": codes}, geometry=multi, crs="EPSG:4326")


def read_populations(
    census_path: str | Path, estimate_path: str | Path | None = None
) -> pd.DataFrame:
    """Read IBGE population: Censo 2022 ``pop_total`` and, optionally, the 2024 estimate.

    Parameters
    ----------
    census_path : str or pathlib.Path
        CSV with ``cod_ibge, pop_total``.
    estimate_path : str or pathlib.Path, optional
        CSV with ``cod_ibge, pop_estimada_2024_07_01``.

    Returns
    -------
    pandas.DataFrame
        ``municipality_code``, ``year``, ``kind`` (census/estimate), ``population``, ``source``.

    Raises
    ------
    FleetFileError
        If a column is missing or a population is not a non-negative integer.
    """
    frames = [_population(census_path, "pop_total", year=2022, kind="census", source=CENSUS_2022)]
    if estimate_path is not None:
        frames.append(
            _population(
                estimate_path,
                "pop_estimada_2024_07_01",
                year=2024,
                kind="estimate",
                source=ESTIMATE_2024,
            )
        )
    return pd.concat(frames, ignore_index=True)


def _population(
    path: str | Path, column: str, *, year: int, kind: str, source: str
) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, encoding="utf-8-sig")
    name = Path(path).name
    _require(df, ("cod_ibge", column), source=name)
    codes = df["cod_ibge"].str.strip()
    _check_codes(codes, source=name)
    pop = pd.to_numeric(df[column].str.strip(), errors="coerce")
    bad = pop.isna() | (pop < 0) | (pop % 1 != 0)
    if bad.any():
        msg = f"{name}: população {df[column][bad].iloc[0]!r} inválida na coluna '{column}'"
        raise FleetFileError(msg)
    return pd.DataFrame(
        {
            "municipality_code": codes,
            "year": year,
            "kind": kind,
            "population": pop.astype("int64"),
            "source": source,
        }
    )


def decoded_text(content: bytes, *, source: str) -> str:
    """Return a file's text: UTF-8 (with or without BOM), else Windows-1252 (Excel in pt-BR).

    Raises
    ------
    FleetFileError
        If it is neither (pt-BR, naming ``source``).
    """
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return content.decode(encoding)
        except UnicodeDecodeError:
            continue
    msg = f"{source}: o arquivo não está em UTF-8 nem em Windows-1252: salve-o como CSV UTF-8"
    raise FleetFileError(msg)


def csv_delimiter(text: str) -> str:
    """Return a CSV's separator: the most frequent in its first line of ``,``, ``;``, tab."""
    header = text.split("\n", 1)[0]
    return max((",", ";", "\t"), key=header.count)


def read_registry_csv(path: str | Path, *, what: str) -> tuple[pd.DataFrame, str]:
    """Read a registry CSV (fleet, drivers, links) as text cells; return it and the file's name.

    UTF-8 or Windows-1252 (:func:`decoded_text`), separated by ``,``, ``;`` or tab
    (:func:`csv_delimiter`): a file as Excel in pt-BR saves it reads as the contract's.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    FleetFileError
        If it cannot be read (pt-BR, naming the file).
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de {what} não encontrado: {p}"
        raise FileNotFoundError(msg)
    text = decoded_text(p.read_bytes(), source=p.name)
    try:
        raw = pd.read_csv(
            io.StringIO(text), sep=csv_delimiter(text), dtype=str, keep_default_na=False
        )
    except pd.errors.EmptyDataError:
        msg = f"{p.name}: o arquivo está vazio"
        raise FleetFileError(msg) from None
    except pd.errors.ParserError as exc:
        msg = f"{p.name}: CSV malformado (uma aspa sem fechar?): {exc}"
        raise FleetFileError(msg) from None
    raw.columns = [c.strip() for c in raw.columns]
    return raw, p.name


def read_fleet(path: str | Path, *, municipality: str | None = None) -> pd.DataFrame:
    """Read a fleet file: the contract CSV, or Porto Alegre's open-data fleet file.

    The format is recognised by its columns: ``vehicle_id`` (contract) or ``prefixo`` and
    ``ponto`` (DataPoa ``frota_taxi``, whose ``ponto`` names the stand).

    Parameters
    ----------
    path : str or pathlib.Path
        CSV file.
    municipality : str, optional
        IBGE code for rows that do not give one (Porto Alegre's file defaults to 4314902).

    Returns
    -------
    pandas.DataFrame
        Columns ``FLEET_REGISTRY_COLUMNS``: dates as ``datetime.date`` or None, ``accessible``
        bool or None (unknown), ``stands`` and ``stand_names`` tuples of str.

    Raises
    ------
    FleetFileError
        If the format is not recognised or a value is invalid (the message names the data row).
    """
    raw, name = read_registry_csv(path, what="frota")
    if "vehicle_id" in raw.columns:
        out = _contract_fleet(raw, source=name, municipality=municipality)
    elif {"prefixo", "ponto"} <= set(raw.columns):
        out = _poa_fleet(raw, source=name, municipality=municipality or PORTO_ALEGRE)
    else:
        msg = (
            f"{name}: formato de frota não reconhecido; esperado a coluna 'vehicle_id' "
            "(contrato) ou 'prefixo' e 'ponto' (frota de Porto Alegre)"
        )
        raise FleetFileError(msg)
    dup = out["vehicle_id"].duplicated()
    if dup.any():
        msg = f"{name}: vehicle_id repetido: {out['vehicle_id'][dup].iloc[0]!r}"
        raise FleetFileError(msg)
    return out


def _blank_to_none(values: pd.Series) -> pd.Series:
    """Return stripped text as an object Series; blank and missing cells become None."""
    out = [None if pd.isna(v) or str(v).strip() == "" else str(v).strip() for v in values]
    return pd.Series(out, index=values.index, dtype=object)


def _dates(
    values: pd.Series, *, column: str, source: str, registry: bool = False
) -> list[dt.date | None]:
    """Read dates; ``registry`` ones (validity, status) must lie in ``fleet.dates``' range."""
    out: list[dt.date | None] = []
    for i, v in enumerate(values):
        if v is None or str(v).strip() == "":
            out.append(None)
            continue
        try:
            day = dt.date.fromisoformat(str(v).strip()[:10])
        except ValueError:
            msg = f"{source}, linha {i + 1}: '{column}' era {v!r}; esperado data AAAA-MM-DD"
            raise FleetFileError(msg) from None
        try:
            out.append(check_field_date(day, name=column) if registry else day)
        except RegistryDateError as exc:
            msg = f"{source}, linha {i + 1}: {exc}"
            raise FleetFileError(msg) from None
    return out


def _booleans(values: pd.Series, *, column: str, source: str) -> list[bool | None]:
    out: list[bool | None] = []
    for i, v in enumerate(values):
        s = str(v).strip().lower()
        if s == "":
            out.append(None)
        elif s in _TRUE:
            out.append(True)
        elif s in _FALSE:
            out.append(False)
        else:
            msg = f"{source}, linha {i + 1}: '{column}' era {v!r}; esperado true ou false"
            raise FleetFileError(msg)
    return out


_MIN_YEAR, _MAX_YEAR = 1900, 2100


def _years(values: pd.Series, *, source: str) -> pd.Series:
    """Parse the optional ``year`` (of manufacture) column: 4-digit years, blank is missing."""
    out: list[int | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        s = str(v).strip()
        if not (s.isdigit() and _MIN_YEAR <= int(s) <= _MAX_YEAR):
            msg = f"{source}, linha {i + 1}: 'year' era {v!r}; esperado um ano como 2019"
            raise FleetFileError(msg)
        out.append(int(s))
    return pd.Series(out, dtype="Int64")


VEHICLE_YEAR_MIN, VEHICLE_YEAR_MAX = _MIN_YEAR, _MAX_YEAR
"""Range of a vehicle's ``year`` of manufacture (file and API)."""


def check_vehicle_documents(values: Mapping[str, object]) -> None:
    """Check a vehicle's document fields against each other (one row of the fleet file).

    The file reader and the API's edit of a vehicle apply the same rules: the Termo's
    ``termo_recolhido_until`` not before ``termo_recolhido_since`` and never without it, and a
    ``substituted_plate`` only with ``substitution_since``. A key absent is taken as empty.

    Raises
    ------
    FleetFileError
        Naming the fields (pt-BR).
    """
    since, until = values.get("termo_recolhido_since"), values.get("termo_recolhido_until")
    if isinstance(since, dt.date) and isinstance(until, dt.date) and until < since:
        msg = f"'termo_recolhido_until' ({until}) antes de 'termo_recolhido_since' ({since})"
        raise FleetFileError(msg)
    if until is not None and since is None:
        msg = "'termo_recolhido_until' sem 'termo_recolhido_since'"
        raise FleetFileError(msg)
    if values.get("substituted_plate") is not None and values.get("substitution_since") is None:
        msg = "'substituted_plate' sem 'substitution_since'"
        raise FleetFileError(msg)


def _contract_fleet(raw: pd.DataFrame, *, source: str, municipality: str | None) -> pd.DataFrame:
    n = len(raw)

    def col(name: str) -> pd.Series:
        return _blank_to_none(raw[name]) if name in raw.columns else pd.Series([None] * n)

    vid = col("vehicle_id")
    if vid.isna().any():
        msg = f"{source}, linha {int(np.flatnonzero(vid.isna())[0]) + 1}: 'vehicle_id' vazio"
        raise FleetFileError(msg)
    for i, value in enumerate(vid):
        check_registry_id(value, where=f"{source}, linha {i + 1}: 'vehicle_id'")
    status = col("status").str.lower()
    bad = status.notna() & ~status.isin(VEHICLE_STATUSES)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (
            f"{source}, linha {i + 1}: 'status' era {raw['status'].iloc[i]!r}; "
            f"esperado um de {', '.join(VEHICLE_STATUSES)}"
        )
        raise FleetFileError(msg)
    mun = col("municipality")
    if municipality is not None:
        mun = mun.where(mun.notna(), municipality)
    bad_mun = mun.notna() & ~mun.fillna("").str.match(_CODE)
    if bad_mun.any():
        i = int(np.flatnonzero(bad_mun)[0])
        msg = f"{source}, linha {i + 1}: 'municipality' era {mun.iloc[i]!r}; esperado 7 dígitos"
        raise FleetFileError(msg)
    stands = [
        tuple(s.strip() for s in str(v).split(";") if s.strip()) if v is not None else ()
        for v in col("stands")
    ]
    dates = {
        c: _dates(col(c), column=c, source=source, registry=True)
        for c in ("status_since", "status_until", "alvara_valid_until", "inspection_valid_until")
    }
    dates |= {
        c: _dates(col(c), column=c, source=source, registry=True) for c in VEHICLE_DOCUMENT_DATES
    }
    for i, (since, until) in enumerate(
        zip(dates["status_since"], dates["status_until"], strict=True)
    ):
        if since is not None and until is not None and until < since:
            msg = (
                f"{source}, linha {i + 1}: 'status_until' ({until}) antes de "
                f"'status_since' ({since})"
            )
            raise FleetFileError(msg)
    plate = col("substituted_plate")
    for i in range(n):
        try:
            check_vehicle_documents(
                {
                    "termo_recolhido_since": dates["termo_recolhido_since"][i],
                    "termo_recolhido_until": dates["termo_recolhido_until"][i],
                    "substitution_since": dates["substitution_since"][i],
                    "substituted_plate": plate.iloc[i],
                }
            )
        except FleetFileError as exc:
            msg = f"{source}, linha {i + 1}: {exc}"
            raise FleetFileError(msg) from None
    category = col("service_category").str.lower()
    bad = category.notna() & ~category.isin(SERVICE_CATEGORIES)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (
            f"{source}, linha {i + 1}: 'service_category' era "
            f"{raw['service_category'].iloc[i]!r}; esperado um de {', '.join(SERVICE_CATEGORIES)}"
        )
        raise FleetFileError(msg)
    return pd.DataFrame(
        {
            "vehicle_id": vid,
            "prefixo": col("prefixo").where(col("prefixo").notna(), vid),
            "plate": col("plate"),
            "make": col("make"),
            "model": col("model"),
            "year": _years(col("year"), source=source),
            "fuel": [None] * n,
            "first_registered_on": dates["first_registered_on"],
            "accessible": _booleans(
                col("accessible").fillna(""), column="accessible", source=source
            ),
            "status": status,
            "status_since": dates["status_since"],
            "status_until": dates["status_until"],
            "alvara_valid_until": dates["alvara_valid_until"],
            "inspection_valid_until": dates["inspection_valid_until"],
            "municipality": mun,
            "stands": stands,
            "stand_names": [()] * n,
            "last_inspection_on": dates["last_inspection_on"],
            "alvara_first_issued_on": dates["alvara_first_issued_on"],
            "substitution_since": dates["substitution_since"],
            "substituted_plate": plate,
            "termo_recolhido_since": dates["termo_recolhido_since"],
            "termo_recolhido_until": dates["termo_recolhido_until"],
            "service_category": category,
        },
        columns=list(FLEET_REGISTRY_COLUMNS),
    )


def _poa_fleet(raw: pd.DataFrame, *, source: str, municipality: str) -> pd.DataFrame:
    _require(raw, ("prefixo", "ponto", "placa", "marca", "modelo", "ano_fabricacao"), source=source)
    n = len(raw)
    prefixo = _blank_to_none(raw["prefixo"])
    if prefixo.isna().any():
        msg = f"{source}, linha {int(np.flatnonzero(prefixo.isna())[0]) + 1}: 'prefixo' vazio"
        raise FleetFileError(msg)
    for i, value in enumerate(prefixo):
        check_registry_id(value, where=f"{source}, linha {i + 1}: 'prefixo'")
    year = pd.to_numeric(_blank_to_none(raw["ano_fabricacao"]), errors="coerce")
    first = (
        _dates(
            _blank_to_none(raw["data_primeiro_emplac"]),
            column="data_primeiro_emplac",
            source=source,
        )
        if "data_primeiro_emplac" in raw.columns
        else [None] * n
    )
    ponto = _blank_to_none(raw["ponto"])
    return pd.DataFrame(
        {
            "vehicle_id": prefixo,
            "prefixo": prefixo,
            "plate": _blank_to_none(raw["placa"]),
            "make": _blank_to_none(raw["marca"]),
            "model": _blank_to_none(raw["modelo"]),
            "year": year.astype("Int64"),
            "fuel": _blank_to_none(raw["combustivel"]) if "combustivel" in raw.columns else None,
            "first_registered_on": first,
            "accessible": [None] * n,  # the file has no accessibility flag
            "status": ["active"] * n,  # listed in the city's fleet of that date
            "status_since": [None] * n,
            "status_until": [None] * n,
            "alvara_valid_until": [None] * n,
            "inspection_valid_until": [None] * n,
            "municipality": [municipality] * n,
            "stands": [()] * n,
            "stand_names": [(normalize_name(p),) if p is not None else () for p in ponto],
            **{c: [None] * n for c in VEHICLE_DOCUMENT_DATES if c != "first_registered_on"},
            "substituted_plate": [None] * n,
            "service_category": [None] * n,
        },
        columns=list(FLEET_REGISTRY_COLUMNS),
    )
