"""Registry readers: municipalities, IBGE population, the fleet (contract CSV or POA's file).

Readers turn files into frames (pure, no database: ``pontual analyze`` reads a fleet without
importing SQLAlchemy); :mod:`db.fleet.store` writes them to the database. Dates in the registry are
local calendar dates, inclusive; a null start means "not known" (a registry snapshot), never
"today".
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import io
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from fleet._errors import FleetFileError
from fleet.dates import DATE_FORMS, RegistryDateError, check_field_date, read_day
from fleet.ids import id_form, registry_id_problem, two_spellings
from fleet.vocabulary import (
    SERVICE_CATEGORIES,
    VEHICLE_STATUS_ALIASES,
    VEHICLE_STATUS_LABELS,
    VEHICLE_STATUSES,
)
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
LICENCES_UNTOLD = "licences_untold"
"""Fleet frame column (bool) that :func:`read_fleet` adds when the file has no ``stands``
column: the file does not say the vehicles' parking licences (an empty cell says "none"). Their
licences are unknown (:func:`stands.licences.unknown_licences`: no boarding of theirs is
unlicensed), and importing the file leaves the registry's licences as they are."""
VEHICLE_DOCUMENT_DATES = (
    "first_registered_on", "last_inspection_on", "alvara_first_issued_on",
    "substitution_since", "termo_recolhido_since", "termo_recolhido_until",
)  # fmt: skip
"""Optional dates of the contract fleet about the vehicle and its documents."""
FLEET_FILE_COLUMNS = (
    *(c for c in FLEET_REGISTRY_COLUMNS if c != "stand_names"),
    "data_extracao",
)
"""Columns of a contract fleet file (:func:`read_fleet`): another is refused, never ignored.
``data_extracao`` is the date the file describes (``pontual import fleet``'s ``--as-of``)."""
TRUE_WORDS = frozenset({"true", "t", "1", "yes", "y", "sim", "s", "verdadeiro"})
FALSE_WORDS = frozenset({"false", "f", "0", "no", "n", "nao", "não", "falso"})
"""How a registry file may write yes and no (lower case): pt-BR, English, 1/0."""
_CODE = re.compile(r"^\d{7}$")
HEADER_ROWS = 1
"""Rows above the data in a registry CSV: the header."""


def sheet_row(index: int) -> int:
    """Return the row a spreadsheet shows for data row ``index`` (0-based): header is row 1.

    Every error of a registry file (fleet, drivers, links) names its rows so, in the CLI and
    in the console's import preview alike: the first data row is row 2.
    """
    return index + HEADER_ROWS + 1


class FleetRowsError(FleetFileError):
    """Rows of a registry file with invalid values, with every problem of each row.

    Attributes
    ----------
    problems : dict of int to list of str
        By data row (0-based index, in file order), its problems: pt-BR sentences naming the
        file, the row (:func:`sheet_row`) and the column.

    The message is the first problem, with a count of the others.
    """

    def __init__(self, problems: Mapping[int, list[str]]) -> None:
        self.problems = {i: list(problems[i]) for i in sorted(problems)}
        every = [p for found in self.problems.values() for p in found]
        message = every[0]
        if len(every) > 1:
            more = len(every) - 1
            rows = len(self.problems)
            message += (
                f" (e mais {more} problema{'s' if more > 1 else ''} no arquivo, "
                f"em {rows} linha{'s' if rows > 1 else ''})"
                if rows > 1
                else f" (e mais {more} problema{'s' if more > 1 else ''} nesta linha)"
            )
        super().__init__(message)


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


_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}")
"""A UTF-8 encoded accented letter or symbol: in a pt-BR Windows-1252 text, such pairs ("Ã£")
are mojibake, not words."""


def decoded_text(content: bytes, *, source: str) -> str:
    """Return a file's text: UTF-8 (with or without BOM), else Windows-1252 (Excel in pt-BR).

    Raises
    ------
    FleetFileError
        If it is neither (pt-BR, naming ``source``), or if it mixes them: UTF-8 text with a
        byte that is not (read as Windows-1252, every accent of the UTF-8 part would change).
    """
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if _UTF8_SEQUENCE.search(content):
            line = content.count(b"\n", 0, exc.start) + 1
            msg = (
                f"{source}, linha {line}: um caractere não está em UTF-8, como o resto do "
                "arquivo (textos de duas origens?): salve o arquivo todo como CSV UTF-8"
            )
            raise FleetFileError(msg) from None
    try:
        return content.decode("cp1252")
    except UnicodeDecodeError:
        msg = f"{source}: o arquivo não está em UTF-8 nem em Windows-1252: salve-o como CSV UTF-8"
        raise FleetFileError(msg) from None


def csv_delimiter(text: str) -> str:
    """Return a CSV's separator: the most frequent in its first line of ``,``, ``;``, tab."""
    header = text.split("\n", 1)[0]
    return max((",", ";", "\t"), key=header.count)


def extraction_date(content: bytes) -> str | None:
    """Return the ``data_extracao`` of a fleet file's first row, as ``AAAA-MM-DD``.

    The date the file describes, read as the file's other dates (:func:`fleet.dates.read_day`;
    a cell no date reads is returned as written, for the caller to name); None without such a
    column, a row or readable text.
    """
    try:
        text = decoded_text(content, source="")
        first = next(csv.DictReader(io.StringIO(text), delimiter=csv_delimiter(text)))
    except (FleetFileError, csv.Error, StopIteration):
        return None
    written = (first.get("data_extracao") or "").strip()
    if not written:
        return None
    try:
        return read_day(written).isoformat()
    except ValueError:
        return written


def read_registry_csv(path: str | Path, *, what: str) -> tuple[pd.DataFrame, str]:
    """Read a registry CSV (fleet, drivers, links) as text cells; return it and the file's name.

    UTF-8 or Windows-1252 (:func:`decoded_text`), separated by ``,``, ``;`` or tab
    (:func:`csv_delimiter`): a file as Excel in pt-BR saves it reads as the contract's.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    FleetFileError
        If it cannot be read or its header names a column twice (pt-BR, naming the file).
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de {what} não encontrado: {p}"
        raise FileNotFoundError(msg)
    text = decoded_text(p.read_bytes(), source=p.name)
    header, records, sep = registry_records(text, source=p.name)
    if repeated := repeated_columns(text, sep=sep):
        raise FleetFileError(repeated_columns_message(repeated, source=p.name))
    raw = pd.DataFrame(records, columns=[c.strip() for c in header], dtype=str)
    return raw, p.name


_CSV_PROBLEMS = {
    "field larger than field limit": "um campo passa do limite de {limit} caracteres",
    "new-line character seen in unquoted field": "quebra de linha num campo sem aspas",
}
"""pt-BR of the csv module's errors (their English reaches no user)."""


def registry_records(text: str, *, source: str) -> tuple[list[str], list[list[str]], str]:
    """Return a registry CSV's header, its data records and its separator.

    One record per line (docs/formatos.md); a record's fields past the header's that are all
    empty (the trailing separators a spreadsheet may write) are dropped, and a short record is
    filled with empty fields. A blank line between records is a record of empty fields, as a
    spreadsheet's empty row (so that every record keeps its line, :func:`sheet_row`, and the
    row is said, not skipped); blank lines before the header or after the last record are
    skipped.

    Raises
    ------
    FleetFileError
        Naming ``source`` and the line: an empty file; a NUL character; a quoted field that
        does not close on its line (it would swallow the lines after it); more filled fields
        than the header names; what the csv module cannot read.
    """
    if not text.strip():
        msg = f"{source}: o arquivo está vazio"
        raise FleetFileError(msg)
    sep = csv_delimiter(text)
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    header: list[str] = []
    records: list[list[str]] = []
    blank = 0  # blank lines since the last record
    line = 0
    try:
        for record in reader:
            first, line = line + 1, reader.line_num
            where = f"{source}, linha {first}"
            if any("\x00" in cell for cell in record):
                msg = f"{where}: a linha contém o caractere nulo (\\0); retire-o"
                raise FleetFileError(msg)
            if line > first or any("\n" in cell or "\r" in cell for cell in record):
                msg = (
                    f"{where}: CSV malformado (uma aspa sem fechar): um campo entre aspas não "
                    f"fecha na sua linha e junta as linhas {first} a {line}; feche a aspa ou "
                    "retire-a"
                )
                raise FleetFileError(msg)
            if not record:
                blank += 1
                continue
            if not header:
                header = _without_trailing_empty(record)
                blank = 0
                continue
            records.extend([""] * len(header) for _ in range(blank))
            blank = 0
            if len(record) > len(header):
                if any(cell.strip() for cell in record[len(header) :]):
                    msg = (
                        f"{where}: {len(record)} campos, o cabeçalho tem {len(header)} "
                        f"(um separador '{sep}' a mais, ou um campo com '{sep}' sem aspas?)"
                    )
                    raise FleetFileError(msg)
                record = record[: len(header)]
            records.append(record + [""] * (len(header) - len(record)))
    except csv.Error as exc:
        said = next(
            (v for k, v in _CSV_PROBLEMS.items() if str(exc).startswith(k)), "CSV malformado"
        )
        limit = f"{csv.field_size_limit():,}".replace(",", ".")
        msg = f"{source}, linha {reader.line_num}: {said.format(limit=limit)}"
        raise FleetFileError(msg) from None
    return header, records, sep


def _without_trailing_empty(names: list[str]) -> list[str]:
    while names and not names[-1].strip():
        names = names[:-1]
    return names


def repeated_columns(text: str, *, sep: str) -> list[str]:
    """Return the header names a CSV gives more than once (stripped, in file order).

    pandas reads a repeated header as ``x`` and ``x.1``: a reader would take one of the two
    values and drop the other without a word. Blank names are not counted.
    """
    try:
        header = next((row for row in csv.reader(io.StringIO(text), delimiter=sep) if row), [])
    except csv.Error:
        return []  # pandas says what is wrong with the file
    names = [c.strip() for c in header]
    return [n for n in dict.fromkeys(names) if n and names.count(n) > 1]


def repeated_columns_message(names: Sequence[str], *, source: str) -> str:
    """Say (pt-BR) that the header of ``source`` repeats the columns ``names``."""
    listed = ", ".join(f"'{n}'" for n in names)
    what = f"coluna {listed} repetida" if len(names) == 1 else f"colunas {listed} repetidas"
    return f"{source}: {what} no cabeçalho; cada coluna deve aparecer uma vez"


def unknown_columns_message(raw: pd.DataFrame, *, known: Sequence[str], source: str) -> str | None:
    """Say (pt-BR) which columns of a file its reader does not know, or None.

    A column the reader does not know would be dropped without a word (a typo, ``acessivel``
    for ``accessible``): it is named, with the known name it is closest to. A column without a
    name (a separator at the end of the header) and without values is no column.
    """
    unknown = []
    for k, column in enumerate(raw.columns):
        name = str(column)
        if name in known:
            continue
        if name.startswith("Unnamed: ") or not name:  # pandas' name of a blank header
            cells = raw[column].astype(object)
            if all(pd.isna(v) or not str(v).strip() for v in cells):
                continue
            unknown.append(f"sem nome (a {k + 1}ª), com valores")
            continue
        close = difflib.get_close_matches(name, known, n=1)
        unknown.append(f"'{name}'" + (f" (quis dizer '{close[0]}'?)" if close else ""))
    if not unknown:
        return None
    what = "coluna desconhecida" if len(unknown) == 1 else "colunas desconhecidas"
    return (
        f"{source}: {what} {', '.join(unknown)}; corrija o nome ou remova a coluna "
        f"(nenhuma é ignorada); colunas aceitas: {', '.join(known)}"
    )


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
        bool or None (unknown), ``stands`` and ``stand_names`` tuples of str; ``status`` the
        code (a pt-BR word of :data:`~fleet.vocabulary.VEHICLE_STATUS_ALIASES` read as its code).

    Raises
    ------
    FleetRowsError
        If values are invalid: every problem of every row (the message is the first).
    FleetFileError
        If the format is not recognised, a required column is missing, a column is repeated
        or, in the contract, a column is not one of :data:`FLEET_FILE_COLUMNS`.
    """
    raw, name = read_registry_csv(path, what="frota")
    if "vehicle_id" in raw.columns:
        return _contract_fleet(raw, source=name, municipality=municipality)
    if {"prefixo", "ponto"} <= set(raw.columns):
        return _poa_fleet(raw, source=name, municipality=municipality or PORTO_ALEGRE)
    read = ", ".join(repr(c) for c in list(raw.columns)[:6])
    msg = (
        f"{name}: formato de frota não reconhecido; esperada a coluna vehicle_id (contrato) "
        f"ou as colunas prefixo e ponto (frota de Porto Alegre); o cabeçalho foi lido como "
        f"{read} (separadores aceitos: vírgula, ponto e vírgula ou tabulação)"
    )
    raise FleetFileError(msg)


class _Problems:
    """The problems of a file's rows, collected in reading order (see :class:`FleetRowsError`)."""

    def __init__(self, source: str, columns: Sequence[str]) -> None:
        self.source = source
        self.order = {c: k for k, c in enumerate(columns)}
        self.by_row: dict[int, list[tuple[str, str]]] = {}

    def add(self, i: int, column: str, text: str) -> None:
        """Record ``text`` (a pt-BR sentence) about column ``column`` of data row ``i``."""
        where = f"{self.source}, linha {sheet_row(i)}, coluna {column}"
        self.by_row.setdefault(i, []).append((column, f"{where}: {text}"))

    def raise_any(self) -> None:
        """Raise :class:`FleetRowsError` if a row has a problem (a row's in column order)."""
        if self.by_row:
            last = len(self.order)
            raise FleetRowsError(
                {
                    i: [text for _, text in sorted(found, key=lambda p: self.order.get(p[0], last))]
                    for i, found in self.by_row.items()
                }
            )


def _blank_to_none(values: pd.Series) -> pd.Series:
    """Return stripped text as an object Series; blank and missing cells become None."""
    out = [None if pd.isna(v) or str(v).strip() == "" else str(v).strip() for v in values]
    return pd.Series(out, index=values.index, dtype=object)


def _word(value: str) -> str:
    """Return a vocabulary word as the readers compare it: lower case, no accents, ``_``."""
    bare = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return re.sub(r"[\s_-]+", "_", bare.strip().lower())


def _choices(words: Sequence[str]) -> str:
    """Join words as a sentence lists them: ``["a", "b", "c"]`` → ``"a, b ou c"``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} ou {words[-1]}"


_STATUS_CHOICES = _choices([f"{VEHICLE_STATUS_LABELS[c]} ({c})" for c in VEHICLE_STATUSES])
_RANGE = re.compile(r"esperado (uma data entre .*)$")


def out_of_range(day: dt.date, error: RegistryDateError) -> str:
    """Say (pt-BR, for a file's column) that ``day`` lies outside the range ``error`` gives."""
    allowed = _RANGE.search(str(error))
    rule = f"use {allowed.group(1)}" if allowed else str(error)
    return f"a data {day.isoformat()} está fora do intervalo aceito; {rule}"


def _dates(
    values: pd.Series, *, column: str, problems: _Problems, registry: bool = False
) -> list[dt.date | None]:
    """Read dates; ``registry`` ones (validity, status) must lie in ``fleet.dates``' range."""
    out: list[dt.date | None] = []
    for i, v in enumerate(values):
        out.append(None)
        if v is None or str(v).strip() == "":
            continue
        try:
            day = read_day(str(v))
        except ValueError:
            problems.add(i, column, f"{v!r} não é uma data; use {DATE_FORMS} (ex.: 2024-03-01)")
            continue
        try:
            out[-1] = check_field_date(day, name=column) if registry else day
        except RegistryDateError as exc:
            problems.add(i, column, out_of_range(day, exc))
    return out


def _booleans(values: pd.Series, *, column: str, problems: _Problems) -> list[bool | None]:
    out: list[bool | None] = []
    for i, v in enumerate(values):
        s = str(v).strip().lower()
        out.append(True if s in TRUE_WORDS else False if s in FALSE_WORDS else None)
        if s and s not in TRUE_WORDS | FALSE_WORDS:
            problems.add(i, column, f"{v!r} não é sim nem não; use sim ou não (ou true/false, 1/0)")
    return out


_MIN_YEAR, _MAX_YEAR = 1900, 2100


def _years(values: pd.Series, *, problems: _Problems) -> pd.Series:
    """Parse the optional ``year`` (of manufacture) column: 4-digit years, blank is missing."""
    out: list[int | None] = []
    for i, v in enumerate(values):
        s = "" if v is None else str(v).strip()
        if s.isascii() and s.isdigit() and _MIN_YEAR <= int(s) <= _MAX_YEAR:
            out.append(int(s))
            continue
        out.append(None)
        if v is not None:
            problems.add(
                i,
                "year",
                f"{v!r} não é um ano; use o ano com 4 dígitos, de 1900 a 2100 (ex.: 2019)",
            )
    return pd.Series(out, dtype="Int64")


VEHICLE_YEAR_MIN, VEHICLE_YEAR_MAX = _MIN_YEAR, _MAX_YEAR
"""Range of a vehicle's ``year`` of manufacture (file and API)."""


def _document_rules(values: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """Return each broken document rule: (column, message for the API, sentence for a file)."""
    since, until = values.get("termo_recolhido_since"), values.get("termo_recolhido_until")
    out = []
    if isinstance(since, dt.date) and isinstance(until, dt.date) and until < since:
        out.append(
            (
                "termo_recolhido_until",
                f"'termo_recolhido_until' ({until}) antes de 'termo_recolhido_since' ({since})",
                f"{until} é anterior a termo_recolhido_since ({since})",
            )
        )
    if until is not None and since is None:
        out.append(
            (
                "termo_recolhido_until",
                "'termo_recolhido_until' sem 'termo_recolhido_since'",
                "preenchida sem termo_recolhido_since (o início do recolhimento)",
            )
        )
    if values.get("substituted_plate") is not None and values.get("substitution_since") is None:
        out.append(
            (
                "substituted_plate",
                "'substituted_plate' sem 'substitution_since'",
                "preenchida sem substitution_since (o início da substituição)",
            )
        )
    return out


def check_vehicle_documents(values: Mapping[str, object]) -> None:
    """Check a vehicle's document fields against each other (one row of the fleet file).

    The file reader and the API's edit of a vehicle apply the same rules: the Termo's
    ``termo_recolhido_until`` not before ``termo_recolhido_since`` and never without it, and a
    ``substituted_plate`` only with ``substitution_since``. A key absent is taken as empty.

    Raises
    ------
    FleetFileError
        Naming the fields (pt-BR): the first rule broken.
    """
    broken = _document_rules(values)
    if broken:
        raise FleetFileError(broken[0][1])


def _ids(values: pd.Series, *, column: str, problems: _Problems, raw: pd.DataFrame) -> None:
    """Check a file's ids: each present, a registry id, and not repeated.

    Two ids of one :func:`fleet.ids.id_form` written otherwise mark both rows, and so does a
    repeat with other values in ``raw`` (the file's cells): which is right, the file does not
    say.
    """
    first: dict[str, int] = {}
    for i, value in enumerate(values):
        if value is None:
            problems.add(i, column, "está vazia; cada linha precisa do prefixo do veículo")
        elif (problem := registry_id_problem(str(value))) is not None:
            problems.add(i, column, problem)
        elif (form := id_form(str(value))) in first:
            k = first[form]
            other = values.iloc[k]
            if other != value:
                problems.add(i, column, two_spellings(value, other, sheet_row(k)))
                problems.add(k, column, two_spellings(other, value, sheet_row(i)))
            elif raw.iloc[i].tolist() == raw.iloc[k].tolist():
                problems.add(i, column, f"{value!r} repete o veículo da linha {sheet_row(k)}")
            else:
                problems.add(
                    i,
                    column,
                    f"{value!r} repete o veículo da linha {sheet_row(k)} com outros valores",
                )
                problems.add(
                    k,
                    column,
                    f"{value!r} se repete na linha {sheet_row(i)} com outros valores; corrija "
                    "uma das duas",
                )
        else:
            first[form] = i


def _contract_fleet(raw: pd.DataFrame, *, source: str, municipality: str | None) -> pd.DataFrame:
    if (
        unknown := unknown_columns_message(raw, known=FLEET_FILE_COLUMNS, source=source)
    ) is not None:
        raise FleetFileError(unknown)
    n = len(raw)
    problems = _Problems(source, list(raw.columns))

    def col(name: str) -> pd.Series:
        return _blank_to_none(raw[name]) if name in raw.columns else pd.Series([None] * n)

    vid = col("vehicle_id")
    _ids(vid, column="vehicle_id", problems=problems, raw=raw)
    status = pd.Series(
        [
            None if v is None else VEHICLE_STATUS_ALIASES.get(_word(v), _word(v))
            for v in col("status")
        ],
        dtype=object,
    )
    for i in np.flatnonzero(status.notna() & ~status.isin(VEHICLE_STATUSES)).tolist():
        value = raw["status"].iloc[i]
        problems.add(i, "status", f"{value!r} não é uma situação conhecida; use {_STATUS_CHOICES}")
    mun = col("municipality")
    if municipality is not None:
        mun = mun.where(mun.notna(), municipality)
    for i in np.flatnonzero(mun.notna() & ~mun.fillna("").str.match(_CODE)).tolist():
        problems.add(
            i,
            "municipality",
            f"{mun.iloc[i]!r} não é um código IBGE; use os 7 dígitos do município (ex.: 4314902)",
        )
    stands = [
        tuple(s.strip() for s in str(v).split(";") if s.strip()) if v is not None else ()
        for v in col("stands")
    ]
    dates = {
        c: _dates(col(c), column=c, problems=problems, registry=True)
        for c in (
            "status_since",
            "status_until",
            "alvara_valid_until",
            "inspection_valid_until",
            *VEHICLE_DOCUMENT_DATES,
        )
    }
    for i, (since, until) in enumerate(
        zip(dates["status_since"], dates["status_until"], strict=True)
    ):
        if since is not None and until is not None and until < since:
            problems.add(i, "status_until", f"{until} é anterior a status_since ({since})")
    plate = col("substituted_plate")
    for i in range(n):
        rules = _document_rules(
            {
                "termo_recolhido_since": dates["termo_recolhido_since"][i],
                "termo_recolhido_until": dates["termo_recolhido_until"][i],
                "substitution_since": dates["substitution_since"][i],
                "substituted_plate": plate.iloc[i],
            }
        )
        for column, _, sentence in rules:
            problems.add(i, column, sentence)
    category = pd.Series(
        [None if v is None else _word(v) for v in col("service_category")], dtype=object
    )
    for i in np.flatnonzero(category.notna() & ~category.isin(SERVICE_CATEGORIES)).tolist():
        problems.add(
            i,
            "service_category",
            f"{raw['service_category'].iloc[i]!r} não é uma categoria de serviço; "
            f"use {_choices(SERVICE_CATEGORIES)}",
        )
    year = _years(col("year"), problems=problems)
    accessible = _booleans(col("accessible").fillna(""), column="accessible", problems=problems)
    problems.raise_any()
    frame = pd.DataFrame(
        {
            "vehicle_id": vid,
            "prefixo": col("prefixo").where(col("prefixo").notna(), vid),
            "plate": col("plate"),
            "make": col("make"),
            "model": col("model"),
            "year": year,
            "fuel": col("fuel"),
            "first_registered_on": dates["first_registered_on"],
            "accessible": accessible,
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
    if "stands" not in raw.columns:  # the file does not say the licences (an empty cell: none)
        frame[LICENCES_UNTOLD] = True
    return frame


def _day_or_none(value: object) -> dt.date | None:
    """Read a cell as :func:`fleet.dates.read_day` does; None when it holds no date."""
    try:
        return read_day(str(value)) if isinstance(value, str) and value.strip() else None
    except ValueError:
        return None


def _possible_registrations(
    first: Sequence[dt.date | None], year: pd.Series, extracted: pd.Series | None
) -> list[dt.date | None]:
    """Keep the first registrations a vehicle can have; the others are unknown (None).

    Porto Alegre's open-data file writes an empty ``data_primeiro_emplac`` as the spreadsheet's
    day zero, ``1899-12-30`` (99 rows of the 2020 file), and has typos in the future
    (``2502-02-03``). A registration more than a year before the year of manufacture, or after
    the file's ``data_extracao`` (today without one), cannot be: read as a date, it would make
    a 2011 car 127 years old.
    """
    made = pd.to_numeric(year, errors="coerce")
    today = dt.date.today()
    last = [_day_or_none(v) for v in extracted] if extracted is not None else [None] * len(first)
    out: list[dt.date | None] = []
    for i, day in enumerate(first):
        built = made.iloc[i]
        until = last[i] or today
        possible = day is not None and day <= until and (pd.isna(built) or day.year >= built - 1)
        out.append(day if possible else None)
    return out


def _poa_fleet(raw: pd.DataFrame, *, source: str, municipality: str) -> pd.DataFrame:
    _require(raw, ("prefixo", "ponto", "placa", "marca", "modelo", "ano_fabricacao"), source=source)
    n = len(raw)
    problems = _Problems(source, list(raw.columns))
    prefixo = _blank_to_none(raw["prefixo"])
    _ids(prefixo, column="prefixo", problems=problems, raw=raw)
    year = pd.to_numeric(_blank_to_none(raw["ano_fabricacao"]), errors="coerce")
    first = (
        _dates(
            _blank_to_none(raw["data_primeiro_emplac"]),
            column="data_primeiro_emplac",
            problems=problems,
        )
        if "data_primeiro_emplac" in raw.columns
        else [None] * n
    )
    problems.raise_any()
    first = _possible_registrations(first, year, raw.get("data_extracao"))
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
