"""The file engine's reading policy, importable before pandas and the engines load.

``pontual analyze`` calls :func:`start_early_read` before its heavy imports: a Parquet file of
at most :data:`HELD_ROWS` rows, which :func:`engines.buckets.analyze_file` reads whole anyway,
is then read in a thread while they load. Imports only Arrow.
"""

from __future__ import annotations

from pathlib import Path

from tracking.parquet import EarlyRead

SPILL_CHUNK_ROWS = 250_000
"""Rows read at a time while spilling (the spill's peak is a few times a chunk's cells)."""

HELD_ROWS = 4_000_000
"""A Parquet file of at most this many rows is read whole, not spilled
(:class:`engines.buckets.Held`; its decoded columns, Arrow dictionaries for the text, take ~60
bytes a row)."""


def start_early_read(path: str | Path) -> EarlyRead | None:
    """Start reading ``path`` in a thread if the file engine would read it whole, else None."""
    return EarlyRead.start(Path(path), batch_rows=SPILL_CHUNK_ROWS, max_rows=HELD_ROWS)
