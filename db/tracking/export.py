"""Read stored fixes out of PostGIS as Arrow tables, a bounded number of rows at a time.

:func:`stream_fixes` runs one ``COPY (SELECT …) TO STDOUT (FORMAT csv)`` over a time range and
parses the stream with Arrow's incremental CSV reader: memory stays bounded by the block size
whatever the range holds. Timestamps travel as integer microseconds (exact), floats with
PostgreSQL's shortest exact text (``extra_float_digits`` 1, the default), NULL as an unquoted
empty field and an empty text as ``""`` (kept apart).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.tracking.models import FIXES_TABLE
from db.tracking.store import _dbapi
from tracking import frames

EXPORT_SCHEMA = pa.schema(
    [
        (frames.VEHICLE_ID, pa.string()),
        (frames.TIMESTAMP, pa.timestamp("us", tz="UTC")),
        (frames.LAT, pa.float64()),
        (frames.LON, pa.float64()),
        (frames.SPEED_KMH, pa.float64()),
        (frames.HEADING_DEG, pa.float64()),
        (frames.ACCURACY_M, pa.float64()),
        (frames.METER, pa.string()),
        (frames.TARIFF, pa.int16()),
        (frames.DRIVER_ID, pa.string()),
    ]
)
"""Columns of the exported fixes: the public pings columns the ``fixes`` table keeps."""

_SELECT = (
    "vehicle_id, (extract(epoch FROM ts) * 1000000)::int8, lat, lon, speed_kmh, heading_deg, "
    "accuracy_m, meter, tariff, driver_id"
)
_BLOCK_BYTES = 1 << 20


def _filter(
    start: dt.datetime | None, end: dt.datetime | None, municipality: str | None
) -> sql.Composable:
    """``WHERE`` clause of a time range and, with a municipality, its vehicles (see below)."""
    parts: list[sql.Composable] = [sql.SQL("TRUE")]
    if start is not None:
        parts.append(sql.SQL("f.ts >= {}").format(sql.Literal(start)))
    if end is not None:
        parts.append(sql.SQL("f.ts < {}").format(sql.Literal(end)))
    if municipality is not None:
        parts.append(
            sql.SQL(
                "NOT EXISTS (SELECT 1 FROM vehicles v WHERE v.vehicle_id = f.vehicle_id "
                "AND v.municipality_code IS DISTINCT FROM {})"
            ).format(sql.Literal(municipality))
        )
    return sql.SQL(" AND ").join(parts)


def fixes_by_day(
    conn: Connection,
    *,
    timezone: str,
    start: dt.datetime | None,
    end: dt.datetime | None,
    municipality: str | None = None,
) -> dict[dt.date, int]:
    """Return how many stored fixes each local day (``timezone``) of ``[start, end)`` holds.

    Days without a fix are absent. ``municipality`` keeps the fixes of vehicles not registered
    in another municipality: a vehicle of the registry counts only in its own; one the registry
    lacks, in every one (the unlicensed are judged on them).
    """
    where = _filter(start, end, municipality).as_string(_dbapi(conn))
    rows = conn.execute(
        text(
            f"SELECT (f.ts AT TIME ZONE :tz)::date AS day, count(*) "  # noqa: S608
            f"FROM {FIXES_TABLE} f WHERE {where} GROUP BY 1 ORDER BY 1"
        ),
        {"tz": timezone},
    )
    return {day: int(n) for day, n in rows}


def stream_fixes(
    conn: Connection,
    *,
    start: dt.datetime,
    end: dt.datetime,
    municipality: str | None = None,
    block_bytes: int = _BLOCK_BYTES,
) -> Iterator[pa.Table]:
    """Yield the stored fixes of ``[start, end)`` in ``(vehicle_id, ts)`` order, a block at a time.

    ``vehicle_id`` is ordered bytewise (its collation "C"), so the order is the primary key's and
    does not depend on the server's locale. ``municipality`` filters as in :func:`fixes_by_day`.
    Each table has the columns of :data:`EXPORT_SCHEMA`.
    """
    query = sql.SQL(
        "COPY (SELECT {cols} FROM {table} f WHERE {where} ORDER BY f.vehicle_id, f.ts) "
        "TO STDOUT (FORMAT csv)"
    ).format(
        cols=sql.SQL(_SELECT),
        table=sql.Identifier(FIXES_TABLE),
        where=_filter(start, end, municipality),
    )
    names = EXPORT_SCHEMA.names
    types: dict[str, pa.DataType] = {f.name: f.type for f in EXPORT_SCHEMA}
    types[frames.TIMESTAMP] = pa.int64()
    with _dbapi(conn).cursor() as cur, cur.copy(query) as copy:
        reader = pacsv.open_csv(
            _CopyStream(iter(copy)),
            read_options=pacsv.ReadOptions(column_names=names, block_size=block_bytes),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        for batch in reader:
            if batch.num_rows == 0:
                continue
            micros = batch.column(names.index(frames.TIMESTAMP))
            columns = list(batch.columns)
            columns[names.index(frames.TIMESTAMP)] = micros.cast(pa.timestamp("us", tz="UTC"))
            yield pa.Table.from_arrays(columns, schema=EXPORT_SCHEMA)


class _CopyStream(io.RawIOBase):
    """A readable file over the blocks of a ``COPY … TO STDOUT``."""

    def __init__(self, blocks: Iterator[Any]) -> None:
        self._blocks = blocks
        self._pending = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` whole unless the stream ends.

        A COPY block is one row: Arrow's reader would make a batch of each short read. Rows are
        appended to one buffer at once (holding each row's block costs more than the copy).
        """
        view = memoryview(buffer).cast("B")
        need = len(view)
        pending = self._pending
        if len(pending) < need:
            for block in self._blocks:
                pending += block
                if len(pending) >= need:
                    break
        n = min(need, len(pending))
        view[:n] = pending[:n]
        del pending[:n]
        return n
