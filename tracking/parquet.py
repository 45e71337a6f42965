"""Reading a Parquet pings file's record batches, importing only Arrow.

:mod:`tracking.ingest` reads Parquet through :func:`record_batches`; :class:`EarlyRead` runs it in
a thread, so that ``pontual analyze`` can read a small file while pandas, geopandas and the
engines load (Arrow decodes without Python's lock; the imports hold it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracking import frames as fr
from tracking._errors import EmptyFileError, MalformedFileError

PARQUET_SUFFIXES = (".parquet", ".pq")
DICTIONARY_COLUMNS = (
    fr.VEHICLE_ID,
    fr.TIMESTAMP,
    fr.SPEED_KMH,
    fr.HEADING_DEG,
    fr.ACCURACY_M,
    fr.METER,
    fr.TARIFF,
    fr.DRIVER_ID,
)
"""Ping columns whose text cells are read as Arrow dictionaries (CSV; Parquet text columns).

A fleet repeats them: a vehicle's id on each of its fixes, the same second for every vehicle
reporting in it, a few meter states and speeds. Reordered, spilled and validated as indices into
their distinct cells (:mod:`tracking.validate` checks each distinct cell once); raw frames hold
them as Arrow dictionaries (:func:`tracking.ingest.text_series`), the cells unchanged.
"""


def open_parquet(path: Path, *, read_dictionary: list[str] | None = None) -> pq.ParquetFile:
    """Open a Parquet file, or raise :class:`EmptyFileError` / :class:`MalformedFileError`."""
    try:
        return pq.ParquetFile(path, read_dictionary=read_dictionary)
    except (pa.ArrowInvalid, OSError) as exc:
        if path.stat().st_size == 0:
            raise EmptyFileError(f"{path.name}: arquivo vazio") from exc
        raise MalformedFileError(f"{path.name}: Parquet inválido ({exc})") from exc


def record_batches(
    path: Path, *, batch_rows: int, row_groups: Iterable[int] | None = None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Return the schema a file's batches have and the batches, as stored.

    Text columns of :data:`DICTIONARY_COLUMNS` come as dictionaries, straight from the file's
    dictionary pages. Text and binary columns come as valid UTF-8 text (:func:`_utf8_batch`).
    ``row_groups``: only these. Raises :class:`MalformedFileError` on a batch that cannot be
    decoded.
    """
    pf = open_parquet(path)
    _check_flat(pf.schema_arrow, path)
    text = [
        name
        for name, typ in zip(pf.schema_arrow.names, pf.schema_arrow.types, strict=True)
        if name.strip() in DICTIONARY_COLUMNS
        and (pa.types.is_string(typ) or pa.types.is_large_string(typ))
    ]
    if text:
        pf = open_parquet(path, read_dictionary=text)
    groups = None if row_groups is None else list(row_groups)

    def batches() -> Iterator[pa.RecordBatch]:
        it = iter(pf.iter_batches(batch_size=batch_rows, row_groups=groups))
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError) as exc:
                raise MalformedFileError(f"{path.name}: Parquet inválido ({exc})") from exc
            yield _utf8_batch(batch, schema)

    schema = pa.schema([f.with_type(_text_type(f.type)) for f in pf.schema_arrow])
    return schema, batches()


def _check_flat(schema: pa.Schema, path: Path) -> None:
    """Refuse a column of lists, structs or maps: a pings cell is a text, a number or a date."""
    for field in schema:
        typ = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if pa.types.is_nested(typ):
            msg = (
                f"{path.name}: a coluna {field.name!r} é do tipo {typ}, que não é lido; "
                "cada célula deve ser um texto, um número ou uma data/hora"
            )
            raise MalformedFileError(msg)


def _utf8_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Return ``batch`` with its text as ``schema`` says (:func:`_text_type`), valid UTF-8.

    A Parquet writer may store text as binary (no UTF-8 annotation) or write bytes that are not
    UTF-8 into a text column; such a byte becomes U+FFFD, as in a CSV (:mod:`tracking.ingest`),
    so that only its row is rejected (``invalid_text`` in an identifier, else by the cell's own
    rule) and no later step fails on decoding it.
    """
    columns = batch.columns
    fixed = [_utf8_array(a) for a in columns]
    if all(f is None for f in fixed):
        return batch
    arrays = [a if f is None else f for a, f in zip(columns, fixed, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _text_type(typ: pa.DataType) -> pa.DataType:
    """Binary as text (``large_binary`` as ``large_string``), also as a dictionary's values."""
    if pa.types.is_dictionary(typ):
        return pa.dictionary(typ.index_type, _text_type(typ.value_type), typ.ordered)
    if pa.types.is_binary(typ):
        return pa.string()
    if pa.types.is_large_binary(typ):
        return pa.large_string()
    return typ


def _utf8_array(arr: pa.Array) -> pa.Array | None:
    """Return the valid text ``arr`` should be; None when it is that already or holds no text."""
    typ = arr.type
    if pa.types.is_dictionary(typ):
        values = _utf8_array(arr.dictionary)
        return None if values is None else pa.DictionaryArray.from_arrays(arr.indices, values)
    text = _text_type(typ)
    if not (pa.types.is_string(text) or pa.types.is_large_string(text)):
        return None
    try:
        if text == typ:
            arr.validate(full=True)  # UTF-8 checked in Arrow
            return None
        return arr.cast(text)
    except pa.ArrowInvalid:
        raw = arr.view(pa.large_binary() if pa.types.is_large_string(text) else pa.binary())
        cells = [None if b is None else b.decode("utf-8", "replace") for b in raw.to_pylist()]
        return pa.array(cells, type=text)


class EarlyRead:
    """A whole Parquet file's record batches, read in a thread started at construction.

    :meth:`batches` waits for the thread and gives what :func:`record_batches` gives (or
    raises its error); it is meant to be taken once (the batches are released to the caller).
    """

    def __init__(self, path: Path, *, batch_rows: int) -> None:
        self.path = path
        self.batch_rows = batch_rows
        self._schema: pa.Schema | None = None
        self._batches: list[pa.RecordBatch] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="pontual-early-read")
        self._thread.start()

    @classmethod
    def start(cls, path: Path, *, batch_rows: int, max_rows: int) -> EarlyRead | None:
        """Start reading ``path`` if it is a Parquet file of at most ``max_rows`` rows.

        Otherwise (another format, a missing, empty or unreadable file) return None: the
        normal reading reports what is wrong.
        """
        if not path.name.lower().endswith(PARQUET_SUFFIXES) or not path.is_file():
            return None
        try:
            rows = open_parquet(path).metadata.num_rows
        except (EmptyFileError, MalformedFileError):
            return None
        return cls(path, batch_rows=batch_rows) if rows <= max_rows else None

    def _read(self) -> None:
        try:
            self._schema, batches = record_batches(self.path, batch_rows=self.batch_rows)
            self._batches = list(batches)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of batches()
            self._error = exc

    def batches(self) -> tuple[pa.Schema, list[pa.RecordBatch]]:
        """Wait for the read; return the schema and the batches, or raise the read's error."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._schema is not None
        batches, self._batches = self._batches, []
        return self._schema, batches
