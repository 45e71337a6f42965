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
import pyarrow.compute as pc
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
    """A variable-width column, dictionary-encoded: its distinct values and one code per row.

    ``values`` holds the distinct values as ``S<w>`` items (``w`` the longest; shorter ones
    padded with zero bytes), ``value_lengths`` their byte lengths; ``codes`` index ``values``,
    -1 for NULL.
    Encoding a block then takes one 1-D fancy index per column, whatever the strings.
    """

    values: NDArray[Any]
    value_lengths: NDArray[np.int64]
    codes: NDArray[np.int64]

    @property
    def width(self) -> int:
        """Bytes of the longest value (0 if there is none)."""
        return int(self.value_lengths.max()) if len(self.value_lengths) else 0

    def lengths(self) -> NDArray[np.int64]:
        """Per-row byte length, -1 where NULL."""
        return np.append(self.value_lengths, -1)[self.codes]

    def take(self, idx: NDArray[np.int64]) -> BytesColumn:
        """Return the rows ``idx`` (sharing the distinct values)."""
        return BytesColumn(self.values, self.value_lengths, self.codes[idx])

    def gather(self) -> NDArray[Any]:
        """Return each row's value as an ``S<width>`` item (NULL rows: zero bytes)."""
        padded = np.append(self.values, np.zeros(1, dtype=self.values.dtype))
        return padded[self.codes]


Column = FixedColumn | BytesColumn
Block = bytes | memoryview
"""A piece of a COPY payload: anything psycopg's ``Copy.write`` sends as is."""


def text_column(values: pd.Series) -> BytesColumn:
    """Encode a string column (None/NaN are NULL) as UTF-8 through Arrow, without a Python loop.

    Non-string values are converted with ``astype("string")`` first.
    """
    encoded = pc.dictionary_encode(_arrow_strings(values))
    dictionary = encoded.dictionary
    n_values = len(dictionary)
    offsets = np.frombuffer(dictionary.buffers()[1], dtype=np.int64)[
        dictionary.offset : dictionary.offset + n_values + 1
    ]
    buf = dictionary.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    value_lengths = np.diff(offsets).astype(np.int64)
    width = int(value_lengths.max()) if n_values else 0
    if width == 0 or data.size == 0:
        strings = np.zeros(n_values, dtype=f"S{max(width, 1)}")
    else:
        pos = offsets[:-1, None] + np.arange(width, dtype=np.int64)
        np.minimum(pos, data.size - 1, out=pos)
        raw = data[pos]
        raw[np.arange(width) >= value_lengths[:, None]] = 0  # zero padding
        strings = np.ascontiguousarray(raw).view(f"S{width}").ravel()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return BytesColumn(values=strings, value_lengths=value_lengths, codes=codes)


def null_column(n: int) -> BytesColumn:
    """Return a column that is NULL in all ``n`` rows (any type)."""
    return BytesColumn(
        values=np.zeros(0, dtype="S1"),
        value_lengths=np.zeros(0, dtype=np.int64),
        codes=np.full(n, -1, dtype=np.int64),
    )


def constant_text_column(value: str, n: int) -> BytesColumn:
    """Return a column holding the same string in all ``n`` rows."""
    raw = value.encode("utf-8")
    return BytesColumn(
        values=np.array([raw], dtype=f"S{max(len(raw), 1)}"),
        value_lengths=np.array([len(raw)], dtype=np.int64),
        codes=np.zeros(n, dtype=np.int64),
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


def _field_offset(dtype: np.dtype[Any], name: str) -> int:
    fields = dtype.fields
    if fields is None:  # pragma: no cover - block dtypes are structured
        msg = "dtype sem campos"
        raise TypeError(msg)
    return int(fields[name][1])


def _fill_block(
    out: NDArray[Any], columns: Sequence[Column], widths: list[int]
) -> list[tuple[int, int, NDArray[np.bool_]]]:
    """Fill ``out``'s fields; return (offset, width, bytes used) of fields some rows leave short."""
    short: list[tuple[int, int, NDArray[np.bool_]]] = []
    for i, (col, width) in enumerate(zip(columns, widths, strict=True)):
        if isinstance(col, FixedColumn):
            if col.null is None or not col.null.any():
                out[f"l{i}"] = width
                out[f"v{i}"] = col.values
                continue
            out[f"l{i}"] = np.where(col.null, -1, width)
            out[f"v{i}"] = col.values
            used = ~col.null[:, None]
        else:
            lengths = col.lengths()
            low, high = int(lengths.min()), int(lengths.max())
            if low == high:
                out[f"l{i}"] = low
            else:
                out[f"l{i}"] = lengths
            if width == 0:
                continue
            out[f"v{i}"] = col.gather()
            if low == width:
                continue
            used = np.arange(width) < lengths[:, None]
        short.append((_field_offset(out.dtype, f"v{i}"), width, used))
    return short


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
    sizes = {len(c.values) if isinstance(c, FixedColumn) else len(c.codes) for c in columns}
    if len(sizes) > 1:
        msg = "colunas do COPY com números de linhas diferentes"
        raise ValueError(msg)
    n = sizes.pop() if sizes else 0
    for lo in range(0, n, chunk_rows):
        block = np.arange(lo, min(lo + chunk_rows, n), dtype=np.int64)
        cols = [c.take(block) if n > len(block) else c for c in columns]
        widths = [
            c.values.dtype.itemsize
            if isinstance(c, FixedColumn)
            else (c.width if (c.codes >= 0).any() else 0)
            for c in cols
        ]
        dtype = _block_dtype(cols, widths)
        out = np.empty(len(block), dtype=dtype)
        out["n_fields"] = len(cols)
        short = _fill_block(out, cols, widths)
        raw = out.view(np.uint8).reshape(len(block), dtype.itemsize)
        if short:
            keep = np.ones(raw.shape, dtype=bool)
            for offset, width, used in short:
                keep[:, offset : offset + width] = used
            raw = raw[keep]
        yield raw.reshape(-1).data  # a memoryview, no copy; psycopg sends any buffer


def copy_payload(columns: Sequence[Column], *, chunk_rows: int = 250_000) -> Iterator[Block]:
    """Yield a complete binary COPY stream (header, rows, trailer) for ``columns``.

    See :func:`copy_rows` for the parameters.
    """
    yield COPY_HEADER
    yield from copy_rows(columns, chunk_rows=chunk_rows)
    yield COPY_TRAILER
