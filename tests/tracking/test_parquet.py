"""Reading Parquet pings in a thread (``EarlyRead``): the same batches, the same errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engines.early import HELD_ROWS, SPILL_CHUNK_ROWS, start_early_read
from tracking._errors import MalformedFileError
from tracking.ingest import RawPings
from tracking.parquet import EarlyRead, record_batches


def _pings(path: Path, n: int = 1_000, *, groups: int = 3) -> Path:
    frame = pd.DataFrame(
        {
            "vehicle_id": [f"T{i % 7}" for i in range(n)],
            "timestamp": pd.date_range("2024-03-04", periods=n, freq="15s", tz="UTC"),
            "lat": -30.03 + pd.Series(range(n)) * 1e-6,
            "lon": -51.22 + pd.Series(range(n)) * 1e-6,
            "meter": ["free", "occupied"] * (n // 2),
        }
    )
    frame.to_parquet(path, index=False, row_group_size=n // groups)
    return path


def _corrupt_pages(path: Path) -> Path:
    """The file with bytes of its data pages overwritten, its footer (the metadata) intact."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for i in range(8, len(data) - footer, 3):
        data[i] = 0xFF
    bad = path.with_name("corrupt.parquet")
    bad.write_bytes(bytes(data))
    return bad


def test_same_batches_as_the_read(tmp_path: Path) -> None:
    """The thread's batches equal the reader's, dictionaries and chunking included."""
    path = _pings(tmp_path / "p.parquet")
    schema, want = record_batches(path, batch_rows=256)
    got_schema, got = EarlyRead(path, batch_rows=256).batches()
    want_list = list(want)
    assert got_schema == schema and len(got) == len(want_list) > 3
    assert pa.types.is_dictionary(schema.field("vehicle_id").type)
    assert all(a.equals(b) for a, b in zip(got, want_list, strict=True))


def test_raw_chunks_same_with_early_read(tmp_path: Path) -> None:
    """``RawPings.tables`` from an early read = from the file (rows numbered alike)."""
    path = _pings(tmp_path / "p.parquet")
    source = RawPings.open(path, chunk_rows=300)
    want = list(source.tables())
    got = list(source.tables(early=EarlyRead(path, batch_rows=300)))
    assert len(got) == len(want) == 4
    assert all(a.equals(b) for a, b in zip(got, want, strict=True))


def test_started_only_for_small_parquet(tmp_path: Path) -> None:
    """Not started for CSV, a missing, empty or unreadable file, nor one over the limit: the
    normal read reports what is wrong."""
    path = _pings(tmp_path / "p.parquet")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all" * 10)
    csv = tmp_path / "p.csv"
    csv.write_text("vehicle_id,timestamp,lat,lon\n", encoding="utf-8")
    for other in (csv, tmp_path / "missing.parquet", empty, junk, tmp_path):
        assert EarlyRead.start(other, batch_rows=100, max_rows=10**6) is None
    assert EarlyRead.start(path, batch_rows=100, max_rows=999) is None
    early = EarlyRead.start(path, batch_rows=100, max_rows=1_000)
    assert early is not None and sum(b.num_rows for b in early.batches()[1]) == 1_000
    started = start_early_read(str(path))
    assert started is not None and started.batch_rows == SPILL_CHUNK_ROWS
    assert HELD_ROWS >= 1_000


def test_corrupt_pages_raise_as_the_read_does(tmp_path: Path) -> None:
    """A file whose metadata reads but whose pages do not: the read's error, from the thread."""
    bad = _corrupt_pages(_pings(tmp_path / "p.parquet"))
    assert pq.ParquetFile(bad).metadata.num_rows == 1_000
    source = RawPings.open(bad, chunk_rows=300)
    with pytest.raises(MalformedFileError) as want:
        list(source.tables())
    early = EarlyRead.start(bad, batch_rows=300, max_rows=10**6)
    assert early is not None
    with pytest.raises(MalformedFileError) as got:
        list(source.tables(early=early))
    assert str(got.value) == str(want.value)
