"""PostgreSQL binary COPY payloads built with numpy, without a Python loop per row.

A binary COPY row is: field count (int16), then per field its byte length (int32, -1 for NULL)
and its bytes, all big-endian. A block of rows is first laid out as one numpy structured array
where every field has its widest width in the block (strings padded, NULLs holding filler); the
bytes that a row does not use (the padding, the filler) are then dropped with a single boolean
mask over the block. Rows keep their order, so a payload sorted by a table's key reaches the
server sorted (cheaper index maintenance and index builds, rows of one key together on disk).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)
PG_EPOCH_US = 946_684_800_000_000
"""2000-01-01T00:00:00Z (PostgreSQL's timestamp epoch) in Unix microseconds."""

_EWKB_POINT_SRID = 0x20000001  # wkbPoint with the EWKB SRID flag
EWKB_POINT_DTYPE = np.dtype(
    [("byte_order", "u1"), ("type", "<u4"), ("srid", "<u4"), ("x", "<f8"), ("y", "<f8")]
)
"""An EWKB 2-D point with SRID, little-endian: 25 bytes."""


@dataclass(frozen=True)
class FixedColumn:
    """A fixed-width column: values already in their wire dtype (big-endian), optional NULL mask."""

    values: NDArray[Any]
    null: NDArray[np.bool_] | None = None

    def take(self, idx: NDArray[np.int64]) -> FixedColumn:
        """Return the rows ``idx``."""
        return FixedColumn(self.values[idx], None if self.null is None else self.null[idx])

    def lengths(self) -> NDArray[np.int64]:
        """Per-row byte length, -1 where NULL."""
        width = self.values.dtype.itemsize
        if self.null is None:
            return np.full(len(self.values), width, dtype=np.int64)
        return np.where(self.null, -1, width).astype(np.int64)


@dataclass(frozen=True)
class BytesColumn:
    """A variable-width column as one byte buffer with per-row starts and lengths (-1: NULL)."""

    data: NDArray[np.uint8]
    starts: NDArray[np.int64]
    byte_lengths: NDArray[np.int64]

    def lengths(self) -> NDArray[np.int64]:
        """Per-row byte length, -1 where NULL."""
        return self.byte_lengths

    def take(self, idx: NDArray[np.int64]) -> BytesColumn:
        """Return the rows ``idx`` (sharing the byte buffer)."""
        return BytesColumn(self.data, self.starts[idx], self.byte_lengths[idx])

    def gather(self, idx: NDArray[np.int64], length: int) -> NDArray[Any]:
        """Return rows ``idx`` as an ``S<length>`` array of their first ``length`` bytes.

        Rows shorter than ``length`` (or NULL) are padded with arbitrary bytes.
        """
        if length <= 0 or self.data.size == 0:
            return np.zeros(len(idx), dtype=f"S{max(length, 1)}")
        pos = self.starts[idx][:, None] + np.arange(length, dtype=np.int64)
        np.minimum(pos, self.data.size - 1, out=pos)
        return np.ascontiguousarray(self.data[pos]).view(f"S{length}").ravel()


Column = FixedColumn | BytesColumn
Block = bytes | memoryview
"""A piece of a COPY payload: anything psycopg's ``Copy.write`` sends as is."""


def text_column(values: pd.Series) -> BytesColumn:
    """Encode a string column (None/NaN are NULL) as UTF-8 through Arrow, without a Python loop.

    Non-string values are converted with ``astype("string")`` first.
    """
    arr = _arrow_strings(values)
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, lengths)
    return BytesColumn(data=data, starts=offsets[:-1].astype(np.int64), byte_lengths=lengths)


def null_column(n: int) -> BytesColumn:
    """Return a column that is NULL in all ``n`` rows (any type)."""
    return BytesColumn(
        data=np.zeros(0, np.uint8),
        starts=np.zeros(n, dtype=np.int64),
        byte_lengths=np.full(n, -1, dtype=np.int64),
    )


def constant_text_column(value: str, n: int) -> BytesColumn:
    """Return a column holding the same string in all ``n`` rows."""
    raw = np.frombuffer(value.encode("utf-8"), dtype=np.uint8)
    return BytesColumn(
        data=raw,
        starts=np.zeros(n, dtype=np.int64),
        byte_lengths=np.full(n, raw.size, dtype=np.int64),
    )


def _arrow_strings(values: pd.Series) -> pa.Array:
    if not (pd.api.types.is_string_dtype(values.dtype) or values.dtype == object):
        values = values.astype("string")
    try:
        arr = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array(values.astype("string"), from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pa.array(values.astype("string"), from_pandas=True)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
    return arr.cast(pa.large_string())


def float8_column(values: NDArray[np.float64]) -> FixedColumn:
    """Return a float8 column; NaN is NULL."""
    v = np.asarray(values, dtype=np.float64)
    nan = np.isnan(v)
    return FixedColumn(v.astype(">f8"), nan if nan.any() else None)


def timestamptz_column(unix_us: NDArray[np.int64]) -> FixedColumn:
    """Return a timestamptz column from Unix microseconds (UTC)."""
    return FixedColumn((np.asarray(unix_us, dtype=np.int64) - PG_EPOCH_US).astype(">i8"))


def ewkb_point_column(
    lon: NDArray[np.float64], lat: NDArray[np.float64], *, srid: int
) -> FixedColumn:
    """Return a geometry column of EWKB points (PostGIS reads EWKB through its binary input)."""
    out = np.empty(len(lon), dtype=EWKB_POINT_DTYPE)
    out["byte_order"] = 1
    out["type"] = _EWKB_POINT_SRID
    out["srid"] = srid
    out["x"] = lon
    out["y"] = lat
    return FixedColumn(out)


def _block_dtype(columns: Sequence[Column], widths: list[int]) -> np.dtype[Any]:
    fields: list[tuple[str, Any]] = [("n_fields", ">i2")]
    for i, (col, width) in enumerate(zip(columns, widths, strict=True)):
        fields.append((f"l{i}", ">i4"))
        if width > 0:
            dtype = col.values.dtype if isinstance(col, FixedColumn) else np.dtype(f"S{width}")
            fields.append((f"v{i}", dtype))
    return np.dtype(fields)


def copy_rows(columns: Sequence[Column], *, chunk_rows: int = 250_000) -> Iterator[Block]:
    """Yield the binary COPY rows of ``columns`` (no header, no trailer), a block at a time.

    Parameters
    ----------
    columns : sequence of FixedColumn or BytesColumn
        The fields of each row in table order, all with the same number of rows.
    chunk_rows : int
        Rows encoded per yielded block (bounds the memory used).

    Yields
    ------
    bytes or memoryview
        Encoded rows, in the order given.

    Raises
    ------
    ValueError
        If the columns differ in length.
    """
    lengths = [c.lengths() for c in columns]
    n = len(lengths[0]) if lengths else 0
    if any(len(x) != n for x in lengths):
        msg = "colunas do COPY com números de linhas diferentes"
        raise ValueError(msg)
    for lo in range(0, n, chunk_rows):
        hi = min(lo + chunk_rows, n)
        block_lengths = [x[lo:hi] for x in lengths]
        widths = [
            col.values.dtype.itemsize if isinstance(col, FixedColumn) else max(int(x.max()), 0)
            for col, x in zip(columns, block_lengths, strict=True)
        ]
        dtype = _block_dtype(columns, widths)
        out = np.empty(hi - lo, dtype=dtype)
        out["n_fields"] = len(columns)
        rows = np.arange(lo, hi, dtype=np.int64)
        short: list[tuple[int, int, NDArray[np.int64]]] = []  # (offset, width, lengths)
        for i, (col, width, col_lengths) in enumerate(
            zip(columns, widths, block_lengths, strict=True)
        ):
            out[f"l{i}"] = col_lengths
            if width == 0:
                continue
            if isinstance(col, FixedColumn):
                out[f"v{i}"] = col.values[lo:hi]
            else:
                out[f"v{i}"] = col.gather(rows, width)
            if int(col_lengths.min()) < width:
                short.append((dtype.fields[f"v{i}"][1], width, col_lengths))
        raw = out.view(np.uint8).reshape(hi - lo, dtype.itemsize)
        if short:
            keep = np.ones(raw.shape, dtype=bool)
            for offset, width, col_lengths in short:
                keep[:, offset : offset + width] = np.arange(width) < col_lengths[:, None]
            raw = raw[keep]
        yield memoryview(raw.reshape(-1))  # no copy; psycopg sends any buffer


def copy_payload(columns: Sequence[Column], *, chunk_rows: int = 250_000) -> Iterator[Block]:
    """Yield a complete binary COPY stream (header, rows, trailer) for ``columns``.

    See :func:`copy_rows` for the parameters.
    """
    yield COPY_HEADER
    yield from copy_rows(columns, chunk_rows=chunk_rows)
    yield COPY_TRAILER
