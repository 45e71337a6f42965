"""Reading GPS fixes from files in the public ping format of ``pontual analyze``.

The format (PRODUCT.md): CSV or Parquet, one fix a row, with ``vehicle_id``, ``timestamp``
(ISO 8601 with a UTC offset, or Unix seconds UTC), ``lat``, ``lon`` (WGS84) and the optional
``speed_kmh``, ``heading_deg``, ``accuracy_m``, ``meter``, ``tariff``, ``driver_id``. Other
columns are allowed and travel with rejected rows only.

Cells are read as text, exactly as written (CSV: no NA guessing; Parquet: numbers and datetimes
stay numbers and datetimes, other columns become text), then checked by
:func:`tracking.validate.validate_pings`. A CSV record with the wrong number of fields is rejected
as ``malformed_row`` with its fields kept in order (extra fields joined into the last column with
``,``), without stopping the read.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from tracking import frames as fr
from tracking._errors import (
    EmptyFileError,
    MalformedFileError,
    MissingColumnsError,
    ReservedColumnError,
    UnsupportedFormatError,
)
from tracking.validate import make_rejected, validate_pings

CSV_SUFFIXES = (".csv", ".csv.gz")
_ID_COLUMNS = (fr.VEHICLE_ID, fr.DRIVER_ID)
PARQUET_SUFFIXES = (".parquet", ".pq")


def read_pings(
    path: str | Path,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = 250.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a pings file and validate it.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.csv`` (optionally ``.csv.gz``) or ``.parquet`` file in the ping format.
    now : pandas.Timestamp, optional
        Reference instant for future timestamps (tz-aware); defaults to the current time.
    max_speed_kmh : float, default 250.0
        Implied speed above which a fix is flagged (``speed_flag``), never dropped.

    Returns
    -------
    pings : pandas.DataFrame
        Valid fixes per :mod:`tracking.frames`, sorted by (vehicle_id, timestamp).
    rejected : pandas.DataFrame
        ``row`` (1-based data row, header excluded), ``reason`` and the original cells as text.

    Raises
    ------
    UnsupportedFormatError
        If the extension is not a supported one.
    EmptyFileError
        If the file has no content at all.
    MalformedFileError
        If the file cannot be parsed as CSV/Parquet.
    MissingColumnsError
        If a required column is absent (the message names them).
    ReservedColumnError
        If the file has a ``row`` or ``reason`` column.
    FileNotFoundError
        If the file does not exist.
    """
    raw, malformed = read_raw_pings(path)
    pings, rejected = validate_pings(raw, now=now, max_speed_kmh=max_speed_kmh)
    if len(malformed):
        rejected = pd.concat([malformed, rejected], ignore_index=True)
        rejected = rejected.sort_values(fr.ROW, kind="stable", ignore_index=True)
    return pings, rejected


def read_raw_pings(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a pings file as raw cells, without validating values.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.csv``/``.csv.gz`` or ``.parquet`` file.

    Returns
    -------
    raw : pandas.DataFrame
        The cells (text; Parquet numbers and datetimes kept) plus ``row``, in file order.
    malformed : pandas.DataFrame
        CSV records with the wrong number of fields, as a rejected frame (reason
        ``malformed_row``); empty for Parquet.

    Raises
    ------
    UnsupportedFormatError, EmptyFileError, MalformedFileError, MissingColumnsError,
    ReservedColumnError, FileNotFoundError
        See :func:`read_pings`.
    """
    p = Path(path)
    name = p.name.lower()
    if name.endswith(CSV_SUFFIXES):
        raw, malformed = read_csv_cells(p, required=fr.PING_REQUIRED)
    elif name.endswith(PARQUET_SUFFIXES):
        if not p.is_file():
            raise FileNotFoundError(f"arquivo de pings não encontrado: {p}")
        raw = _read_parquet(p)
        malformed = make_rejected(raw.iloc[:0], [])
    else:
        allowed = ", ".join((*CSV_SUFFIXES, *PARQUET_SUFFIXES))
        msg = f"formato de arquivo de pings não suportado: {p.name}; esperado um de {allowed}"
        raise UnsupportedFormatError(msg)
    return raw, malformed


def check_ping_columns(columns: list[str], *, source: str) -> None:
    """Raise if required ping columns are missing or a reserved name is used.

    Parameters
    ----------
    columns : list of str
        Column names of the input.
    source : str
        Name of the input, for the message.

    Raises
    ------
    MissingColumnsError
        Naming every missing required column.
    ReservedColumnError
        If ``row`` or ``reason`` is among the columns.
    """
    _check_columns(columns, required=fr.PING_REQUIRED, source=source)


def _check_columns(columns: list[str], *, required: tuple[str, ...], source: str) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        found = ", ".join(columns) if columns else "nenhuma"
        msg = (
            f"{source}: falta(m) a(s) coluna(s) obrigatória(s) {', '.join(missing)} "
            f"(colunas encontradas: {found}; obrigatórias: {', '.join(required)})"
        )
        raise MissingColumnsError(msg)
    reserved = [c for c in (fr.ROW, fr.REASON) if c in columns]
    if reserved:
        msg = (
            f"{source}: a(s) coluna(s) {', '.join(reserved)} é(são) reservada(s) para o arquivo "
            "de rejeitados; renomeie-a(s)"
        )
        raise ReservedColumnError(msg)


def write_rejected(rejected: pd.DataFrame, path: str | Path) -> None:
    """Write rejected rows as ``rejected.csv``: ``row, reason, <original columns>``.

    Parameters
    ----------
    rejected : pandas.DataFrame
        A rejected frame from :func:`read_pings` or :func:`tracking.validate.validate_pings`.
    path : str or pathlib.Path
        Destination CSV file (UTF-8, header, no index).

    Raises
    ------
    MissingColumnsError
        If ``rejected`` lacks ``row`` or ``reason``.
    """
    missing = [c for c in (fr.ROW, fr.REASON) if c not in rejected.columns]
    if missing:
        msg = f"quadro de rejeitados sem a(s) coluna(s) {', '.join(missing)}"
        raise MissingColumnsError(msg)
    rest = [c for c in rejected.columns if c not in (fr.ROW, fr.REASON)]
    rejected[[fr.ROW, fr.REASON, *rest]].to_csv(path, index=False, lineterminator="\n")


# --- CSV -----------------------------------------------------------------------------------


def read_csv_cells(
    path: str | Path, *, required: tuple[str, ...], what: str = "pings"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a CSV file as text cells, exactly as written, with a 1-based ``row`` column.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.csv`` or ``.csv.gz`` file with a header row (UTF-8).
    required : tuple of str
        Columns that must be present.
    what : str, default "pings"
        What the file holds, for messages (pt-BR).

    Returns
    -------
    raw : pandas.DataFrame
        One ``str`` column per header name plus ``row`` (data rows, header excluded, blank lines
        skipped).
    malformed : pandas.DataFrame
        Records with the wrong number of fields, as a rejected frame (``malformed_row``).

    Raises
    ------
    EmptyFileError, MalformedFileError, MissingColumnsError, ReservedColumnError,
    FileNotFoundError
        See :func:`read_pings`.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"arquivo de {what} não encontrado: {p}")
    names = _read_header(p)
    _check_columns(names, required=required, source=p.name)
    return _read_csv(p, names)


def _open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115


def _read_header(path: Path) -> list[str]:
    try:
        with _open_binary(path) as fh:
            line = fh.readline().decode("utf-8-sig")
        header = next(csv.reader([line]), None)
    except (UnicodeDecodeError, OSError, csv.Error) as exc:
        raise MalformedFileError(
            f"{path.name}: não foi possível ler o cabeçalho CSV ({exc})"
        ) from exc
    if header is None or not any(h.strip() for h in header):
        raise EmptyFileError(f"{path.name}: arquivo vazio (sem cabeçalho nem linhas de dados)")
    names = [h.strip() for h in header]
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        msg = f"{path.name}: coluna(s) repetida(s) no cabeçalho: {', '.join(dupes)}"
        raise MalformedFileError(msg)
    return names


def _read_table(
    path: Path, names: list[str], *, threads: bool
) -> tuple[pa.Table, list[tuple[int | None, str]]]:
    bad: list[tuple[int | None, str]] = []

    def on_invalid(row: pcsv.InvalidRow) -> str:
        bad.append((row.number, row.text))
        return "skip"

    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, use_threads=threads),
            parse_options=pcsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as exc:
        raise MalformedFileError(f"{path.name}: CSV inválido ({exc})") from exc
    return table, bad


def _read_csv(path: Path, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    table, bad = _read_table(path, names, threads=True)
    if bad and any(number is None for number, _ in bad):
        # Row numbers are only known when parsing serially.
        table, bad = _read_table(path, names, threads=False)
    raw = pd.DataFrame(
        {name: table.column(name).to_pandas().astype("str") for name in names}
        if table.num_rows
        else {name: pd.Series([], dtype="str") for name in names}
    )
    n_total = table.num_rows + len(bad)
    bad_rows = np.array([number - 1 for number, _ in bad if number is not None], dtype=np.int64)
    rows = np.setdiff1d(np.arange(1, n_total + 1, dtype=np.int64), bad_rows, assume_unique=True)
    raw[fr.ROW] = rows
    malformed = make_rejected(
        _malformed_frame(bad_rows, [text for _, text in bad], names),
        ["malformed_row"] * len(bad_rows),
    )
    return raw, malformed


def _malformed_frame(rows: np.ndarray, texts: list[str], names: list[str]) -> pd.DataFrame:
    cells: list[list[str]] = []
    for fields in _split_records(texts):
        if len(fields) > len(names):
            fields = [*fields[: len(names) - 1], ",".join(fields[len(names) - 1 :])]
        cells.append(fields + [""] * (len(names) - len(fields)))
    frame = (
        pd.DataFrame(cells, columns=names, dtype="str")
        if cells
        else pd.DataFrame({n: pd.Series([], dtype="str") for n in names})
    )
    frame.insert(0, fr.ROW, rows)
    return frame


def _split_records(texts: list[str]) -> Iterator[list[str]]:
    for text in texts:
        yield next(csv.reader([text]), [])


# --- Parquet -------------------------------------------------------------------------------


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        if path.stat().st_size == 0:
            raise EmptyFileError(f"{path.name}: arquivo vazio") from exc
        raise MalformedFileError(f"{path.name}: Parquet inválido ({exc})") from exc
    check_ping_columns([n.strip() for n in table.column_names], source=path.name)
    out: dict[str, pd.Series] = {}
    for name in table.column_names:
        key = name.strip()
        series = _parquet_column(table.column(name), is_time=key == fr.TIMESTAMP)
        if key in _ID_COLUMNS and pd.api.types.is_float_dtype(series.dtype):
            series = _integral_float_ids(series)
        out[key] = series
    raw = pd.DataFrame(out)
    raw[fr.ROW] = np.arange(1, len(raw) + 1, dtype=np.int64)
    return raw


def _parquet_column(col: pa.ChunkedArray, *, is_time: bool) -> pd.Series:
    """Raw form of a Parquet column: numbers and (timestamp) datetimes kept, the rest as text."""
    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = col.type
    if is_time and (pa.types.is_timestamp(typ) or pa.types.is_date(typ)):
        series = pd.Series(col.to_pandas())
        return pd.to_datetime(series) if pa.types.is_date(typ) else series
    if pa.types.is_integer(typ):
        return pd.Series(col.to_pandas(types_mapper=_nullable_int)).astype("Int64")
    if pa.types.is_floating(typ):
        return pd.Series(col.to_numpy(), dtype=np.float64)
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        col = col.cast(pa.string())
    return pd.Series(col.to_pandas()).astype("str").fillna("")


def _nullable_int(typ: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    return pd.Int64Dtype() if pa.types.is_integer(typ) else None


def _integral_float_ids(series: pd.Series) -> pd.Series:
    """Turn identifiers stored as floats (an int column with nulls) back to ints: 12.0 -> 12."""
    values = series.to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    if np.all(values[finite] == np.round(values[finite])) and np.all(
        np.abs(values[finite]) < 2**53
    ):
        return pd.Series(
            pd.array(np.where(finite, values, 0).astype(np.int64), dtype="Int64")
        ).mask(~finite)
    return series
