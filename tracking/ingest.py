"""Reading GPS fixes from files in the public ping format of ``pontual analyze``.

The format (PRODUCT.md): CSV or Parquet, one fix a row, with ``vehicle_id``, ``timestamp``
(ISO 8601 with a UTC offset, or Unix seconds UTC), ``lat``, ``lon`` (WGS84) and the optional
``speed_kmh``, ``heading_deg``, ``accuracy_m``, ``meter``, ``tariff``, ``driver_id``. Other
columns are allowed and travel with rejected rows only.

Cells are read as text, exactly as written (CSV: no NA guessing; Parquet: numbers and datetimes
stay numbers and datetimes, other columns become text), then checked by
:func:`tracking.validate.validate_pings`. A CSV is separated by ``,``, ``;`` or tab (the most
frequent in the header line: a file as Excel in pt-BR saves it reads as the contract's). Each line
is one record: a quoted field closes on its line (an escaped quote ``""`` inside), so a stray
quote never joins lines. A line with the wrong number of fields, or with a quote it does not
close, is rejected as ``malformed_row`` with its fields kept in order (extra fields joined into
the last column with the separator; from an unclosed quote on, the fields are split at each
separator, the quote kept), without stopping the read.

:func:`read_pings` streams the file in chunks of ``chunk_rows`` rows (Arrow's streaming CSV
reader, Parquet record batches) through :func:`tracking.validate.validate_ping_chunks`, so only
the valid fixes, in compact arrays, and the rejected rows stay in memory: the peak is about the
size of the resulting pings frame plus one chunk, whatever the file's size.
"""

from __future__ import annotations

import codecs
import csv
import functools
import gzip
import io
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from tracking import frames as fr
from tracking._errors import (
    EmptyFileError,
    InvalidParameterError,
    MalformedFileError,
    MissingColumnsError,
    ReservedColumnError,
    UnsupportedFormatError,
)
from tracking.parquet import (
    DICTIONARY_COLUMNS,
    PARQUET_SUFFIXES,
    EarlyRead,
    open_parquet,
    record_batches,
)
from tracking.validate import MAX_SPEED_KMH, make_rejected, validate_ping_chunks

CSV_SUFFIXES = (".csv", ".csv.gz")
_ID_COLUMNS = (fr.VEHICLE_ID, fr.DRIVER_ID)
DEFAULT_CHUNK_ROWS = 1_000_000
"""Rows read and validated at a time by :func:`read_pings`."""
_CSV_BLOCK_BYTES = 1 << 20  # larger blocks make Arrow hold much more per row
_SCAN_BLOCK = 16 << 20
_DELIMITERS = (",", ";", "\t")
RANGE_MIN_BYTES = 64 << 20
"""Smallest CSV :meth:`RawPings.ranges` cuts (under it, starting processes costs more)."""
RANGE_MIN_ROWS = 600_000
"""Smallest Parquet :meth:`RawPings.ranges` cuts (about :data:`RANGE_MIN_BYTES` of CSV)."""
_DICTIONARY_TEXT = pa.dictionary(pa.int32(), pa.large_string())


def read_pings(
    path: str | Path,
    *,
    now: pd.Timestamp | None = None,
    max_speed_kmh: float = MAX_SPEED_KMH,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a pings file and validate it, chunk by chunk.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.csv`` (optionally ``.csv.gz``) or ``.parquet`` file in the ping format.
    now : pandas.Timestamp, optional
        Reference instant for future timestamps (tz-aware); defaults to the current time.
    max_speed_kmh : float, default 250.0
        Implied speed above which a fix is flagged (``speed_flag``), never dropped.
    chunk_rows : int, default 1,000,000
        Rows read and validated at a time; the result does not depend on it.

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
    InvalidParameterError
        If ``chunk_rows`` is not a positive integer.
    FileNotFoundError
        If the file does not exist.
    """
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        msg = f"'chunk_rows' era {chunk_rows!r}; esperado um inteiro positivo"
        raise InvalidParameterError(msg)
    source = RawPings.open(path, chunk_rows=chunk_rows)
    pings, rejected = validate_ping_chunks(source.chunks, now=now, max_speed_kmh=max_speed_kmh)
    if not source.malformed_count:
        return pings, rejected
    pings[fr.ROW] = source.data_rows(pings[fr.ROW].to_numpy(dtype=np.int64))
    rejected[fr.ROW] = source.data_rows(rejected[fr.ROW].to_numpy(dtype=np.int64))
    rejected = pd.concat([source.malformed(), rejected], ignore_index=True)
    return pings, rejected.sort_values(fr.ROW, kind="stable", ignore_index=True)


@dataclass(eq=False)
class RawPings:
    """The raw chunks of one pings file (CSV or Parquet), read as often as asked.

    CSV chunks number each well-formed record (``row`` is its ordinal); records with the wrong
    number of fields are skipped and remembered, so the file's data rows are only known once a
    first read has gone through the whole file: then :meth:`data_rows` maps ordinals to rows and
    :meth:`malformed` gives those records as rejected rows (``malformed_row``). Parquet has no
    malformed records: ``row`` is the data row. ``delimiter``: the CSV's separator.
    """

    path: Path
    chunk_rows: int
    names: list[str] = field(default_factory=list)
    delimiter: str = ","
    integral_ids: set[str] = field(default_factory=set)
    bad: list[tuple[int | None, str]] | None = None

    @classmethod
    def open(cls, path: str | Path, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> RawPings:
        """Check the file's format and columns (see :func:`read_pings` for the errors)."""
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            msg = f"'chunk_rows' era {chunk_rows!r}; esperado um inteiro positivo"
            raise InvalidParameterError(msg)
        p = Path(path)
        name = p.name.lower()
        if not name.endswith((*CSV_SUFFIXES, *PARQUET_SUFFIXES)):
            allowed = ", ".join((*CSV_SUFFIXES, *PARQUET_SUFFIXES))
            msg = f"formato de arquivo de pings não suportado: {p.name}; esperado um de {allowed}"
            raise UnsupportedFormatError(msg)
        if not p.is_file():
            raise FileNotFoundError(f"arquivo de pings não encontrado: {p}")
        if name.endswith(PARQUET_SUFFIXES):
            return cls(p, chunk_rows, integral_ids=_integral_id_columns(p), bad=[])
        names, delimiter = _read_header(p)
        _check_columns(names, required=fr.PING_REQUIRED, source=p.name)
        return cls(p, chunk_rows, names=names, delimiter=delimiter)

    @property
    def is_csv(self) -> bool:
        """Whether the file is CSV (else Parquet)."""
        return bool(self.names)

    def chunks(self) -> Iterator[pd.DataFrame]:
        """Yield the raw cells, ``chunk_rows`` rows at a time, with ``row``."""
        for table in self.tables():
            yield self.frame(table)

    def tables(self, *, early: EarlyRead | None = None) -> Iterator[pa.Table]:
        """Yield the chunks as read (Arrow), each with a ``row`` column; see :meth:`frame`.

        ``early``: a Parquet file's batches already being read in a thread (same file and
        ``chunk_rows``).
        """
        if not self.is_csv:
            yield from _iter_parquet_tables(self.path, chunk_rows=self.chunk_rows, early=early)
            return
        bad: list[tuple[int | None, str]] = []
        yield from _iter_csv_tables(
            self.path, self.names, self.delimiter, chunk_rows=self.chunk_rows, bad=bad
        )
        if self.bad is None:
            self._remember(bad)

    def _remember(self, bad: list[tuple[int | None, str]]) -> None:
        self.bad = sorted(bad, key=lambda item: item[0] or 0)
        if any(number is None for number, _ in bad):
            msg = f"{self.path.name}: não foi possível numerar as linhas malformadas do CSV"
            raise MalformedFileError(msg)

    def ranges(self, parts: int) -> list[tuple[int, int]]:
        """Cut the file into up to ``parts`` ranges of records in file order, to be read at once.

        A plain CSV: byte ranges cut after a line feed (a quoted field never holds one: see
        :class:`_LineRecords`). Parquet: ``[first, stop)`` runs of whole row groups of about
        equal rows (:meth:`_row_group_ranges`). Empty (read the file whole with
        :meth:`tables`) for a compressed CSV, a CSV under :data:`RANGE_MIN_BYTES`, or a Parquet
        file under :data:`RANGE_MIN_ROWS` or of one row group.
        """
        if parts < 2:
            return []
        if not self.is_csv:
            return self._row_group_ranges(parts)
        if not self.path.name.lower().endswith(".csv"):
            return []
        size = self.path.stat().st_size
        if size < RANGE_MIN_BYTES:
            return []
        with self.path.open("rb", buffering=0) as fh:
            scan = _LineScan(fh)
            head = fh.readline()
            start = len(head) if head.endswith(b"\n") else 0
            cuts = [start]
            for k in range(1, parts):
                cut = scan.line_end(max(cuts[-1], start + (size - start) * k // parts))
                if cut is None:
                    break  # no line end left
                cuts.append(cut)
        bounds = [*cuts, size] if start else []
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=False) if b > a]

    def range_tables(
        self, start: int, stop: int, bad: list[tuple[int | None, str]]
    ) -> Iterator[pa.Table]:
        """Yield the records of a byte range of :meth:`ranges`, as :meth:`tables` does.

        ``row`` counts the range's well-formed records from 1 and ``bad`` gets its malformed
        ones numbered within the range: :meth:`join_ranges` makes both file-wide. For Parquet,
        ``start`` and ``stop`` are row groups and ``bad`` stays empty.
        """
        if not self.is_csv:
            yield from _iter_parquet_tables(
                self.path, chunk_rows=self.chunk_rows, row_groups=range(start, stop)
            )
            return
        with _ByteRange(self.path, start, stop) as data:
            yield from _iter_csv_tables(
                self.path,
                self.names,
                self.delimiter,
                chunk_rows=self.chunk_rows,
                bad=bad,
                data=data,
            )

    def _row_group_ranges(self, parts: int) -> list[tuple[int, int]]:
        """Cut a Parquet file's row groups into up to ``parts`` runs of about equal rows."""
        meta = open_parquet(self.path).metadata
        if meta.num_rows < RANGE_MIN_ROWS or meta.num_row_groups < 2:
            return []
        ends = np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
        cuts = [0]
        for k in range(1, parts):  # after the group whose end is nearest k / parts of the rows
            at = int(np.argmin(np.abs(ends - ends[-1] * k / parts))) + 1
            if cuts[-1] < at < len(ends):
                cuts.append(at)
        bounds = [*cuts, len(ends)]
        return list(zip(bounds[:-1], bounds[1:], strict=False))

    def join_ranges(self, ranges: list[tuple[int, list[tuple[int | None, str]]]]) -> list[int]:
        """Take the ranges' well-formed counts and malformed records, in file order.

        Sets the file's malformed records (as a whole read would) and returns what to add to
        each range's ``row`` to make it the record's ordinal in the file.
        """
        offsets, bad = [], []
        good_before, rows_before = 0, 1  # Arrow counts the header as a row
        for good, range_bad in ranges:
            offsets.append(good_before)
            bad += [(None if n is None else n + rows_before, text) for n, text in range_bad]
            good_before += good
            rows_before += good + len(range_bad)
        self._remember(bad)
        return offsets

    def frame(self, table: pa.Table) -> pd.DataFrame:
        """Return the raw frame of a chunk of :meth:`tables` (as :meth:`chunks` yields it)."""
        if self.is_csv:
            return _cells_frame(table, self.names)
        return _parquet_frame(table, integral_ids=self.integral_ids)

    @property
    def malformed_count(self) -> int:
        """Malformed records met by the first whole read."""
        return len(self._bad())

    def data_rows(self, ordinals: np.ndarray) -> np.ndarray:
        """Map record ordinals (the ``row`` of the chunks) to the file's data rows."""
        bad = self._bad()
        if not bad:
            return ordinals
        return _data_rows(ordinals, np.array([(n or 0) - 1 for n, _ in bad], dtype=np.int64))

    def malformed(self) -> pd.DataFrame:
        """Return the malformed records as rejected rows, in file order."""
        bad = self._bad()
        rows = np.array([(n or 0) - 1 for n, _ in bad], dtype=np.int64)
        frame = _malformed_frame(rows, [text for _, text in bad], self.names, self.delimiter)
        return make_rejected(frame, ["malformed_row"] * len(rows))

    def rows(self, rows: np.ndarray) -> pd.DataFrame:
        """Return the raw frame of data rows ``rows`` (as :meth:`data_rows` gives them), read again.

        A CSV whose malformed records are not known yet is read once to learn them, and a
        second time only if it has some (data rows then differ from record ordinals).
        """
        wanted = np.unique(np.asarray(rows, dtype=np.int64))
        known = self.bad is not None
        found = self._pick(self._ordinals(wanted) if known else wanted, stop_early=known)
        if not known and self.malformed_count:
            found = self._pick(self._ordinals(wanted), stop_early=True)
        frame = pd.concat(found, ignore_index=True) if found else self.frame(self._empty())
        frame[fr.ROW] = self.data_rows(frame[fr.ROW].to_numpy(dtype=np.int64))
        return frame

    def _ordinals(self, rows: np.ndarray) -> np.ndarray:
        """Map data rows (none malformed) to record ordinals: the inverse of :meth:`data_rows`."""
        bad = np.array([(n or 0) - 1 for n, _ in self._bad()], dtype=np.int64)
        return rows - np.searchsorted(bad, rows)

    def _pick(self, ordinals: np.ndarray, *, stop_early: bool) -> list[pd.DataFrame]:
        found: list[pd.DataFrame] = []
        left = len(ordinals)
        for table in self.tables():
            hit = np.flatnonzero(np.isin(table.column(fr.ROW).to_numpy(), ordinals))
            if hit.size:
                found.append(self.frame(table.take(pa.array(hit))))
                left -= hit.size
            if stop_early and left <= 0:
                break
        return found

    def _empty(self) -> pa.Table:
        return next(iter(self.tables())).slice(0, 0)

    def _bad(self) -> list[tuple[int | None, str]]:
        if self.bad is None:
            msg = "as linhas malformadas só são conhecidas depois de uma leitura completa"
            raise RuntimeError(msg)
        return self.bad


def reread_rejected(
    path: str | Path, refused: pd.DataFrame, *, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> pd.DataFrame:
    """Return rows of a pings file refused after reading as rejected rows, their cells read again.

    For rows valid when read and refused later (by the database's key:
    :func:`db.tracking.store.store_fixes`), so they are quarantined with their original cells as
    :func:`read_pings`' rejected rows are.

    Parameters
    ----------
    path : str or pathlib.Path
        The file :func:`read_pings` read (unchanged since).
    refused : pandas.DataFrame
        ``row`` (data rows, as :func:`read_pings` numbers them; one reason each) and ``reason``.
    chunk_rows : int, default 1,000,000
        Rows read at a time.

    Returns
    -------
    pandas.DataFrame
        ``row``, ``reason`` and the original cells as text, by ``row``.

    Raises
    ------
    MalformedFileError
        If a row is no longer in the file.
    """
    reasons = pd.Series(
        refused[fr.REASON].astype(str).to_numpy(),
        index=refused[fr.ROW].to_numpy(dtype=np.int64),
    )
    source = RawPings.open(path, chunk_rows=chunk_rows)
    cells = source.rows(reasons.index.to_numpy())
    if len(cells) != reasons.index.nunique():
        msg = f"{Path(path).name}: o arquivo mudou durante a importação (linhas não encontradas)"
        raise MalformedFileError(msg)
    cells = cells.sort_values(fr.ROW, kind="stable", ignore_index=True)
    return make_rejected(cells, reasons.reindex(cells[fr.ROW].to_numpy()).to_numpy())


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
    rejected[rejected_order(rejected.columns)].to_csv(path, index=False, lineterminator="\n")


def rejected_order(columns: Iterable[str]) -> list[str]:
    """Return ``rejected.csv``'s column order: ``row``, ``reason``, then the others as given."""
    return [fr.ROW, fr.REASON, *(c for c in columns if c not in (fr.ROW, fr.REASON))]


# --- CSV -----------------------------------------------------------------------------------


def read_csv_cells(
    path: str | Path, *, required: tuple[str, ...], what: str = "pings"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a CSV file as text cells, exactly as written, with a 1-based ``row`` column.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.csv`` or ``.csv.gz`` file with a header row (UTF-8; ``,``, ``;`` or tab).
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
        Lines with the wrong number of fields or an unclosed quote, as a rejected frame
        (``malformed_row``).

    Raises
    ------
    EmptyFileError, MalformedFileError, MissingColumnsError, ReservedColumnError,
    FileNotFoundError
        See :func:`read_pings`.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"arquivo de {what} não encontrado: {p}")
    names, delimiter = _read_header(p)
    _check_columns(names, required=required, source=p.name)
    return _read_csv(p, names, delimiter)


def _open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115


def _read_header(path: Path) -> tuple[list[str], str]:
    """Return the header's column names (trimmed) and the file's separator."""
    try:
        with _open_binary(path) as fh:
            line = fh.readline().decode("utf-8-sig")
        delimiter = max(_DELIMITERS, key=line.count)  # the first of a tie: ","
        header = next(csv.reader([line], delimiter=delimiter), None)
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
    return names, delimiter


def _read_table(
    path: Path, names: list[str], delimiter: str, *, threads: bool
) -> tuple[pa.Table, list[tuple[int | None, str]]]:
    bad: list[tuple[int | None, str]] = []
    # a byte that is not UTF-8 rejects its record; a line with an unclosed quote is one record
    lines = _LineRecords(_Utf8(_open_binary(path)), delimiter=delimiter, fields=len(names))

    def on_invalid(row: pcsv.InvalidRow) -> str:
        bad.append((row.number, lines.original(row.text)))
        return "skip"

    try:
        with lines as text:
            table = pcsv.read_csv(
                text,
                read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, use_threads=threads),
                parse_options=pcsv.ParseOptions(
                    delimiter=delimiter, invalid_row_handler=on_invalid
                ),
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()),
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
    except pa.ArrowInvalid as exc:
        if _only_a_header(path):  # no line end after the header: Arrow cannot skip it
            return pa.table({n: pa.array([], pa.string()) for n in names}), bad
        raise MalformedFileError(f"{path.name}: CSV inválido ({exc})") from exc
    return table, bad


def _only_a_header(path: Path) -> bool:
    """Whether a CSV file holds one line and nothing after it (a header without line end)."""
    with path.open("rb") as handle:
        head = handle.read(1 << 16)
    return len(head) < 1 << 16 and b"\n" not in head.rstrip() and b"\r" not in head.rstrip()


def _read_csv(path: Path, names: list[str], delimiter: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    table, bad = _read_table(path, names, delimiter, threads=True)
    if bad and any(number is None for number, _ in bad):
        # Row numbers are only known when parsing serially.
        table, bad = _read_table(path, names, delimiter, threads=False)
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
        _malformed_frame(bad_rows, [text for _, text in bad], names, delimiter),
        ["malformed_row"] * len(bad_rows),
    )
    return raw, malformed


def _malformed_frame(
    rows: np.ndarray, texts: list[str], names: list[str], delimiter: str = ","
) -> pd.DataFrame:
    cells: list[list[str]] = []
    for text in texts:
        fields = _split_record(text, delimiter)
        if len(fields) > len(names):
            fields = [*fields[: len(names) - 1], delimiter.join(fields[len(names) - 1 :])]
        cells.append(fields + [""] * (len(names) - len(fields)))
    frame = (
        pd.DataFrame(cells, columns=names, dtype="str")
        if cells
        else pd.DataFrame({n: pd.Series([], dtype="str") for n in names})
    )
    frame.insert(0, fr.ROW, rows)
    return frame


def _split_record(text: str, delimiter: str) -> list[str]:
    """Split a malformed line into fields; from an unclosed quote on, at each separator."""
    opened = _grammar(delimiter).open_quote.fullmatch(text)
    if opened is None:
        return next(csv.reader([text], delimiter=delimiter), [])
    head, tail = opened.groups()
    closed = next(csv.reader([head], delimiter=delimiter))[:-1] if head else []
    return [*closed, *tail.split(delimiter)]


def _data_rows(ordinals: np.ndarray, bad_rows: np.ndarray) -> np.ndarray:
    """Map the ordinal of each parsed record (1-based) to its data row, skipping ``bad_rows``.

    The j-th parsed record is data row j + #{i : bad_rows[i] - i <= j} (``bad_rows`` sorted).
    """
    shifted = bad_rows - np.arange(len(bad_rows), dtype=np.int64)
    return ordinals + np.searchsorted(shifted, ordinals, side="right")


def _iter_csv_tables(
    path: Path,
    names: list[str],
    delimiter: str,
    *,
    chunk_rows: int,
    bad: list[tuple[int | None, str]],
    data: io.RawIOBase | None = None,
) -> Iterator[pa.Table]:
    """Yield the cells of a CSV file as text, ``chunk_rows`` records at a time.

    ``row`` is the ordinal of the record among the well-formed ones; malformed records go to
    ``bad`` as (line number counting the header, text), as Arrow's serial parser reports them
    (empty lines are not counted). With ``data`` (a byte range of the file's records, no
    header), its records instead, numbered from 1 within it. Bytes that are not UTF-8 are read
    as U+FFFD (:class:`_Utf8`); a line with an unclosed quote is one malformed record
    (:class:`_LineRecords`).
    """
    raw = _Utf8(_open_binary(path) if data is None else data)
    lines = _LineRecords(raw, delimiter=delimiter, fields=len(names))

    def on_invalid(row: pcsv.InvalidRow) -> str:
        bad.append((row.number, lines.original(row.text)))
        return "skip"

    with lines as text:
        try:
            reader = pcsv.open_csv(
                text,
                read_options=pcsv.ReadOptions(
                    column_names=names,
                    skip_rows=1 if data is None else 0,
                    use_threads=False,
                    block_size=_CSV_BLOCK_BYTES,
                ),
                parse_options=pcsv.ParseOptions(
                    delimiter=delimiter, invalid_row_handler=on_invalid
                ),
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.large_string()),
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except pa.ArrowInvalid as exc:
            if data is None and _only_a_header(path):  # a header without line end: no records
                yield _with_rows(_csv_schema(names).empty_table(), 1)
                return
            raise MalformedFileError(f"{path.name}: CSV inválido ({exc})") from exc
        done = 0
        for table in _rebatch(_csv_batches(reader, path), chunk_rows):
            n = table.num_rows
            yield _with_rows(_as_dictionaries(table), done + 1)
            del table  # not held while the next chunk is read
            done += n
    if done == 0:
        yield _with_rows(_csv_schema(names).empty_table(), 1)


class _Utf8(io.RawIOBase):
    """A byte stream made valid UTF-8: each byte that is not UTF-8 is read as U+FFFD.

    Arrow's CSV reader refuses a whole file for one such byte (and its invalid-row handler
    raises on a malformed record holding one); so read, only the record holding it is rejected
    (``invalid_text`` in an identifier, else by the cell's own rule, or ``malformed_row``).
    Blocks of ASCII, the usual case, pass as read.
    """

    def __init__(self, raw: io.RawIOBase | io.BufferedIOBase) -> None:
        super().__init__()
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._left = b""  # converted bytes not handed out yet
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        while not self._left:
            if self._ended:
                return 0
            n = self._raw.readinto(view) or 0
            if n and not self._decoder.getstate()[0] and _is_ascii(view[:n]):
                return n
            self._ended = n == 0
            self._left = self._decoder.decode(view[:n].tobytes(), final=self._ended).encode()
        k = min(len(view), len(self._left))
        view[:k] = self._left[:k]
        self._left = self._left[k:]
        return k

    def close(self) -> None:
        self._raw.close()
        super().close()


class _LineRecords(io.RawIOBase):
    """A CSV byte stream in which no quoted field spans lines (a stray quote joins none).

    Lines end at LF, CR or CRLF, as Arrow's parser ends records. In a line that leaves a quoted
    field open (Arrow's rule: a quote opens a field only as its first character; ``""`` inside
    is a quote; after the closing quote the field goes on unquoted), the open field is replaced
    by a marker holding more separators than the header's, so that Arrow's invalid-row handler
    gets the line: :meth:`original` gives back the line as written. Blocks without a quote pass
    as read; the others are checked by one RE2 pattern, and located by :func:`re` only if one
    of their lines is open.
    """

    def __init__(self, raw: io.RawIOBase, *, delimiter: str, fields: int) -> None:
        super().__init__()
        self._raw = raw
        self._grammar = _grammar(delimiter)
        self._prefix = f"\x00{secrets.token_hex(8)}:"
        self._fill = delimiter * fields
        self._texts: list[str] = []  # the open fields replaced, by marker number
        self._line = b""  # the last line not ended yet, from its start
        self._sent = 0  # of which handed out (no quote in it)
        self._left = memoryview(b"")  # checked bytes not handed out yet
        self._ended = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Return up to ``size`` bytes; each open field replaced (see the class)."""
        if size is None or size < 0:
            return self.readall()
        while not self._left and size:
            if self._ended:
                return b""
            held = len(self._line) - self._sent  # bytes of the last line not handed out
            block = self._raw.read(max(size - held, 1)) or b""
            self._ended = not block
            if block and block.find(b'"') < 0 and self._line.find(b'"', self._sent) < 0:
                data = self._line[self._sent :] + block if held else block
                cut = _after_last_line_end(block)
                self._line = block[cut:] if cut else self._line + block
                self._sent = len(self._line)
                if len(data) <= size:
                    return data  # as read: no quote in its lines
                self._left = memoryview(data)
                break
            data = self._line + block
            end = len(data) if self._ended else _after_last_line_end(data)
            if end:
                self._left = memoryview(self._checked(data, self._sent, end))
                self._line, self._sent = data[end:], 0
            else:
                self._line = data
        out, self._left = self._left[:size], self._left[size:]
        return bytes(out)

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def _checked(self, data: bytes, start: int, end: int) -> bytes:
        """Return ``data[start:end]`` with each open field replaced; ``data`` starts a line."""
        if data.find(b'"', 0, end) < 0:
            return data[start:end]
        whole = pa.Array.from_buffers(
            pa.large_string(),
            1,
            [None, pa.py_buffer(np.array([0, end], dtype=np.int64)), pa.py_buffer(data)],
        )
        if not pc.count_substring_regex(whole, self._grammar.open_re2)[0].as_py():
            return data[start:end]
        parts, pos, line = [], start, 0
        while (stop := _end(self._grammar.lines.match(data, line, end), line)) < end:
            field = _end(self._grammar.closed.match(data, stop, end), stop)  # the open quote
            cut = _end(self._grammar.line_end.search(data, field, end), end, start=True)
            parts += [data[pos:field], f"{self._prefix}{len(self._texts)}{self._fill}".encode()]
            self._texts.append(data[field:cut].decode())
            pos = line = cut
        parts.append(data[pos:end])
        return b"".join(parts)

    def original(self, text: str) -> str:
        """Return the line as written of an invalid record's text (``text`` unless a marker's)."""
        at = text.find(self._prefix)
        if at < 0:
            return text
        number = text[at + len(self._prefix) :].rstrip(self._fill[:1])
        return text[:at] + self._texts[int(number)]

    def close(self) -> None:
        self._raw.close()
        super().close()


def _after_last_line_end(data: bytes) -> int:
    """Return the offset after the last CR or LF of ``data`` (0: none)."""
    cut = data.rfind(b"\n") + 1
    return data.rfind(b"\r", cut) + 1 or cut


def _end(match: re.Match[bytes] | None, default: int, *, start: bool = False) -> int:
    if match is None:
        return default
    return match.start() if start else match.end()


@dataclass(frozen=True)
class _Grammar:
    lines: re.Pattern[bytes]
    """Whole lines, none leaving a quoted field open, from a line start."""
    closed: re.Pattern[bytes]
    """The closed fields of a line, with their separators, from its start."""
    line_end: re.Pattern[bytes]
    open_re2: str
    """RE2: a line that leaves a quoted field open (found anywhere)."""
    open_quote: re.Pattern[str]
    """A line that leaves a quoted field open: (its closed fields, with their separators; the
    rest, from the quote)."""


@functools.cache
def _grammar(delimiter: str) -> _Grammar:
    """Return the line patterns of a CSV with ``delimiter``, fields parsed as Arrow does.

    One parse per line: a quoted field closes at the first quote not followed by another
    (possessive quantifiers for :mod:`re`, which would otherwise backtrack).
    """
    d = {"\t": r"\t"}.get(delimiter, delimiter)

    def field(p: str) -> str:  # p: "+" (possessive) or "" (RE2)
        quoted = (
            rf'"[^"\r\n]*{p}(?:""[^"\r\n]*{p})*{p}"(?:[^"{d}\r\n][^{d}\r\n]*{p})?{p}'
            if p
            else rf'"(?:[^"\r\n]|"")*"(?:[^"{d}\r\n][^{d}\r\n]*)?'
        )
        return rf"(?:{quoted}|[^\"{d}\r\n][^{d}\r\n]*{p}|)"

    closed = rf"(?:{field('+')}{d})*+"
    return _Grammar(
        lines=re.compile(rf"(?:{closed}{field('+')}(?:\r\n|\n|\r|\Z))*+".encode()),
        closed=re.compile(closed.encode()),
        line_end=re.compile(rb"[\r\n]"),
        open_re2=rf'(?m)(?:^|\r)(?:{field("")}{d})*"(?:[^"\r\n]|"")*(?:\r|$)',
        open_quote=re.compile(rf'({closed})(".*)', re.DOTALL),
    )


def _is_ascii(data: memoryview) -> bool:
    return bool(np.frombuffer(data, dtype=np.uint8).max() < 0x80)


def _csv_schema(names: list[str]) -> pa.Schema:
    """Return the schema of the CSV chunks: text, :data:`DICTIONARY_COLUMNS` as dictionaries."""
    return pa.schema(
        [(n, _DICTIONARY_TEXT if n in DICTIONARY_COLUMNS else pa.large_string()) for n in names]
    )


def _as_dictionaries(table: pa.Table) -> pa.Table:
    """Return a CSV chunk with :data:`DICTIONARY_COLUMNS` dictionary-encoded, one dictionary each.

    Encoded here rather than by Arrow's CSV reader, whose dictionary conversion costs several
    times as much.
    """
    for i, name in enumerate(table.column_names):
        if name in DICTIONARY_COLUMNS:
            encoded = pc.dictionary_encode(table.column(i)).combine_chunks()  # one dictionary
            table = table.set_column(i, pa.field(name, _DICTIONARY_TEXT), encoded)
    return table


def _one_dictionary(table: pa.Table) -> pa.Table:
    """Return the table in one chunk, each dictionary column with one dictionary.

    Arrow gives each block (CSV) or batch (Parquet) its own dictionary; reordering a chunk
    (:func:`engines.buckets.spill`) would otherwise unify them row by row.
    """
    if not any(pa.types.is_dictionary(t) for t in table.schema.types):
        return table
    return table.unify_dictionaries().combine_chunks()


class _ByteRange(io.RawIOBase):
    """A file's bytes ``[start, stop)`` as a readable stream.

    Read, not mapped: a file cut short meanwhile gives an error, not a SIGBUS (as fast: the
    10M-ping file's spill took 3.3–3.8 s either way).
    """

    def __init__(self, path: Path, start: int, stop: int) -> None:
        super().__init__()
        self._file = path.open("rb", buffering=0)
        self._file.seek(start)
        self._left = stop - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer)[: self._left]
        n = self._file.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


class _LineScan:
    """Line ends of a file, read a block at a time into one buffer.

    Read, not mapped: a mapped file's pages count in the process's resident memory (the client
    of ``--engine dask`` cutting a 1 GB CSV peaked 0.5 GB higher).
    """

    def __init__(self, fh: io.RawIOBase) -> None:
        self._fh = fh
        self._buf = bytearray(_SCAN_BLOCK)

    def line_end(self, start: int) -> int | None:
        """Return the offset after the first line feed from ``start`` (None: none is left)."""
        self._fh.seek(start)
        at = start
        while n := self._fh.readinto(memoryview(self._buf)) or 0:
            end = self._buf.find(b"\n", 0, n)
            if end >= 0:
                return at + end + 1
            at += n
        return None


def _with_rows(table: pa.Table, first_row: int) -> pa.Table:
    rows = np.arange(first_row, first_row + table.num_rows, dtype=np.int64)
    return table.append_column(fr.ROW, pa.array(rows))


def _csv_batches(reader: pcsv.CSVStreamingReader, path: Path) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except pa.ArrowInvalid as exc:
            raise MalformedFileError(f"{path.name}: CSV inválido ({exc})") from exc
        yield batch


def _rebatch(batches: Iterable[pa.RecordBatch], chunk_rows: int) -> Iterator[pa.Table]:
    """Regroup record batches into tables of ``chunk_rows`` rows (the last one may be shorter)."""
    parts: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        start = 0
        while start < batch.num_rows:
            n = min(chunk_rows - size, batch.num_rows - start)
            parts.append(batch.slice(start, n))
            size += n
            start += n
            if size == chunk_rows:
                yield pa.Table.from_batches(parts)
                parts, size = [], 0
    if size:
        yield pa.Table.from_batches(parts)


def _cells_frame(table: pa.Table, names: list[str]) -> pd.DataFrame:
    raw = pd.DataFrame({name: text_series(table.column(name)) for name in names}, copy=False)
    raw[fr.ROW] = table.column(fr.ROW).to_numpy()
    return raw


def text_series(column: pa.ChunkedArray) -> pd.Series:
    """Return text cells as a raw frame holds them: ``str``, or the Arrow dictionary as is.

    A dictionary of text stays one (a ``pandas.ArrowDtype`` column, no copy): validation checks
    its distinct cells once (:mod:`tracking.validate`); an Arrow null is an empty cell.
    """
    typ = column.type
    if not pa.types.is_dictionary(typ):
        return pd.Series(pd.array(column, dtype="str"))
    if not (pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)):
        return text_series(column.cast(pa.large_string())).fillna("")
    return pd.Series(pd.arrays.ArrowExtensionArray(column))


# --- Parquet -------------------------------------------------------------------------------


def _integral_id_columns(path: Path) -> set[str]:
    """Return the float identifier columns whose values are all integral (int with nulls).

    Decided over the whole file, so that every chunk converts them alike.
    """
    pf = open_parquet(path)
    schema = pf.schema_arrow
    check_ping_columns([n.strip() for n in schema.names], source=path.name)
    out: set[str] = set()
    for name in schema.names:
        typ = schema.field(name).type
        if pa.types.is_dictionary(typ):
            typ = typ.value_type
        if name.strip() in _ID_COLUMNS and pa.types.is_floating(typ):
            try:
                column = pf.read(columns=[name]).column(0)
            except (pa.ArrowInvalid, OSError) as exc:
                raise MalformedFileError(f"{path.name}: Parquet inválido ({exc})") from exc
            values = np.asarray(column.cast(pa.float64()).to_numpy(), dtype=np.float64)
            if _all_integral(values):
                out.add(name)
    return out


def _iter_parquet_tables(
    path: Path,
    *,
    chunk_rows: int,
    row_groups: Iterable[int] | None = None,
    early: EarlyRead | None = None,
) -> Iterator[pa.Table]:
    """Yield a Parquet file's rows as stored, ``chunk_rows`` at a time, with ``row``.

    ``row_groups``: only these (``row`` then counts their rows from 1). ``early``: the whole
    file's batches, already being read (:class:`tracking.parquet.EarlyRead`).
    """
    if early is not None:
        if early.path != path or early.batch_rows != chunk_rows or row_groups is not None:
            msg = f"leitura antecipada de {early.path.name} não serve para {path.name}"
            raise InvalidParameterError(msg)
        schema, batches = early.batches()
        pending: Iterable[pa.RecordBatch] = _released(batches)
    else:
        schema, pending = record_batches(path, batch_rows=chunk_rows, row_groups=row_groups)
    done = 0
    for table in _rebatch(pending, chunk_rows):
        n = table.num_rows
        yield _with_rows(_one_dictionary(table), done + 1)
        del table  # not held while the next chunk is read
        done += n
    if done == 0:
        yield _with_rows(schema.empty_table(), 1)


def _released(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Yield the batches in order, each dropped from the list as it goes."""
    batches.reverse()
    while batches:
        yield batches.pop()


def _parquet_frame(table: pa.Table, *, integral_ids: set[str]) -> pd.DataFrame:
    out: dict[str, pd.Series] = {}
    for name in table.column_names:
        if name == fr.ROW:
            continue
        key = name.strip()
        series = _parquet_column(table.column(name), is_time=key == fr.TIMESTAMP)
        if name in integral_ids and pd.api.types.is_float_dtype(series.dtype):
            series = _float_ids_to_int(series)
        out[key] = series
    raw = pd.DataFrame(out, copy=False)
    raw[fr.ROW] = table.column(fr.ROW).to_numpy()
    return raw


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
        series = _parquet_column(
            table.column(name), is_time=key == fr.TIMESTAMP, dictionaries=False
        )
        if key in _ID_COLUMNS and pd.api.types.is_float_dtype(series.dtype):
            series = _integral_float_ids(series)
        out[key] = series
    raw = pd.DataFrame(out)
    raw[fr.ROW] = np.arange(1, len(raw) + 1, dtype=np.int64)
    return raw


def _parquet_column(col: pa.ChunkedArray, *, is_time: bool, dictionaries: bool = True) -> pd.Series:
    """Raw form of a Parquet column: numbers and (timestamp) datetimes kept, the rest as text.

    With ``dictionaries``, dictionary text stays an Arrow dictionary column (:func:`text_series`).
    """
    typ = col.type
    if pa.types.is_dictionary(typ):
        if dictionaries and (
            pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)
        ):
            return text_series(col)  # missing cells stay missing: read as empty
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
    # Straight from Arrow: no Python string objects (to_pandas would make one per cell).
    return pd.Series(pd.array(col, dtype="str")).fillna("")


def _nullable_int(typ: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    return pd.Int64Dtype() if pa.types.is_integer(typ) else None


def _integral_float_ids(series: pd.Series) -> pd.Series:
    """Turn identifiers stored as floats (an int column with nulls) back to ints: 12.0 -> 12."""
    if _all_integral(series.to_numpy(dtype=np.float64)):
        return _float_ids_to_int(series)
    return series


def _all_integral(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(np.all(finite == np.round(finite)) and np.all(np.abs(finite) < 2**53))


def _float_ids_to_int(series: pd.Series) -> pd.Series:
    values = series.to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    return pd.Series(pd.array(np.where(finite, values, 0).astype(np.int64), dtype="Int64")).mask(
        ~finite
    )
