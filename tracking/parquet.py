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
    dictionary pages. ``row_groups``: only these. Raises :class:`MalformedFileError` on a
    batch that cannot be decoded.
    """
    pf = open_parquet(path)
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
            yield batch

    return pf.schema_arrow, batches()


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
