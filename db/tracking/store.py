"""Store validated pings in PostGIS: daily partitions, binary COPY, rejected rows.

The hot path builds PostgreSQL's binary COPY payload with numpy, no Python loop per row: rows are
grouped by the byte lengths of their variable-width fields (``vehicle_id``, ``driver_id``), so each
group is one fixed-size numpy structured array written as raw bytes. The payload goes into a
temporary staging table, then ``INSERT … ON CONFLICT (vehicle_id, ts) DO NOTHING`` moves it into
``fixes``: importing the same pings twice adds nothing the second time.

Nothing is dropped unsaid: :func:`store_fixes` keeps one fix per (vehicle, microsecond), the
table's key, by :func:`tracking.validate.merge_microseconds`, and compares a fix whose key is
already stored with the stored one (:data:`tracking.validate.FIX_VALUES`): the same, it was
there; other values, ``conflicting_duplicate``, for the caller to quarantine with
:func:`copy_rejected` (each text cut to :data:`MAX_RAW_CHARS`), as the live ingest does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd
import psycopg
from numpy.typing import NDArray
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from db import pgcopy as pcp
from db.tracking.models import FIXES_DEFAULT_PARTITION, FIXES_TABLE
from db.upsert import stage_rows
from geo.h3 import latlng_to_cells
from tracking import frames
from tracking._errors import (
    InvalidParameterError,
    MissingColumnsError,
    PartitionStateError,
    PingFrameError,
)
from tracking.validate import FIX_VALUES, merge_microseconds

H3_RESOLUTION = 9
"""Resolution of the cell stored with each fix (column ``h3_r9``)."""

MAX_RAW_CHARS = 1000
"""Longest text kept of a quarantined value (``rejected_fixes.raw``): a cell, a name, a body."""

CONFLICTING_DUPLICATE = "conflicting_duplicate"

_US_PER_DAY = 86_400_000_000
_SRID = 4326
_STAGE = "_fixes_stage"
_PARTITION_LOCK_KEY = 7_294_310_001  # pg_advisory_xact_lock key serialising partition DDL
_CHUNK_ROWS = 65_536  # rows encoded at a time: the server gets its first block early
_PREFETCH_BLOCKS = 4  # encoded blocks (one per chunk, ~11 MB) waiting for the server, at most
_EPOCH = dt.date(1970, 1, 1)
_FIX_COLUMNS = (
    "vehicle_id",
    "ts",
    "lat",
    "lon",
    "geom",
    "speed_kmh",
    "heading_deg",
    "accuracy_m",
    "meter",
    "tariff",
    "driver_id",
    "h3_r9",
    "speed_flag",
    "source",  # last: a new day's COPY leaves it to the column's default
)
_COLUMN_LIST = ", ".join(_FIX_COLUMNS)
_CHECK = "_fixes_check"
_CHECK_COLUMNS = ("vehicle_id", "ts", *FIX_VALUES)  # what a stored fix is compared on


_PARTITION_NAME = re.compile(rf"^{FIXES_TABLE}_p(\d{{8}})$")


def partition_name(day: dt.date) -> str:
    """Return the name of the daily partition of ``fixes`` holding UTC day ``day``."""
    return f"{FIXES_TABLE}_p{day:%Y%m%d}"


def daily_partitions(conn: Connection) -> list[tuple[str, dt.date]]:
    """Return the daily partitions of ``fixes`` (name, UTC day), by day; DEFAULT is not one."""
    out = []
    for name in _existing_partitions(conn):
        match = _PARTITION_NAME.match(name)
        if match:
            out.append((name, dt.datetime.strptime(match.group(1), "%Y%m%d").date()))
    return sorted(out, key=lambda x: x[1])


def place_index_name(partition: str) -> str:
    """Return the name of a daily partition's place index, btree ``(h3_r9, ts)``."""
    return f"{partition}_h3_r9_ts"


def index_closed_days(
    engine: Engine, *, before: dt.date, progress: Callable[[str], None] | None = None
) -> list[str]:
    """Build the place index ``(h3_r9, ts)`` of every daily partition of a day before ``before``.

    Partitions are written without it (new days by COPY, today's by the live ingest: each index
    kept up costs every write) and read by place once their day is closed; this builds it for the
    closed days lacking one (the daily ``pontual db partitions``). ``CREATE INDEX CONCURRENTLY``:
    fixes arriving late for those days are not blocked. An index left invalid by an interrupted
    build is dropped and built again.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        Engine of the database (each index is built outside any transaction).
    before : datetime.date
        First UTC day not indexed (today's, as a rule).
    progress : callable, optional
        Called with each partition's name before its index is built.

    Returns
    -------
    list of str
        Names of the indexes built (empty when every closed day had its own).
    """
    built = []
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for partition, day in daily_partitions(conn):
            if day >= before:
                continue
            name = place_index_name(partition)
            valid = conn.execute(
                text("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(:name)"),
                {"name": name},
            ).scalar()
            if valid:
                continue
            if progress is not None:
                progress(partition)
            if valid is not None:
                conn.execute(text(f"DROP INDEX CONCURRENTLY {name}"))
            conn.execute(text(f"CREATE INDEX CONCURRENTLY {name} ON {partition} (h3_r9, ts)"))
            built.append(name)
    return built


def _existing_partitions(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE p.relname = :parent AND p.relnamespace = to_regnamespace(current_schema())::oid"
        ),
        {"parent": FIXES_TABLE},
    )
    return {str(r[0]) for r in rows}


def ensure_fix_partitions(conn: Connection, start: dt.date, end: dt.date) -> list[str]:
    """Create the daily partitions of ``fixes`` for the UTC days ``start`` to ``end``, inclusive.

    Fixes already sitting in the DEFAULT partition for a new day are moved into it, so the
    partition can be added at any time. Safe to call concurrently (serialised by an advisory lock).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection inside the caller's transaction.
    start, end : datetime.date
        First and last UTC day (inclusive).

    Returns
    -------
    list of str
        Names of the partitions created (empty when all existed).

    Raises
    ------
    InvalidParameterError
        If ``end`` is before ``start``.
    """
    if end < start:
        msg = f"intervalo de partições invertido: início {start} depois do fim {end}"
        raise InvalidParameterError(msg)
    days = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    return _ensure_days(conn, days)


def _ensure_days(conn: Connection, days: list[dt.date]) -> list[str]:
    existing = _existing_partitions(conn)
    missing = [d for d in days if partition_name(d) not in existing]
    if not missing:
        return []
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PARTITION_LOCK_KEY})
    existing = _existing_partitions(conn)
    created = []
    for day in missing:
        name = partition_name(day)
        if name in existing:
            continue
        if conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None:
            msg = (
                f"a tabela {name} existe mas não é partição de {FIXES_TABLE} (desanexada?): "
                f"os fixes de {day} não foram gravados; reanexe-a com ALTER TABLE {FIXES_TABLE} "
                f"ATTACH PARTITION {name} … ou renomeie-a"
            )
            raise PartitionStateError(msg)
        lo = f"{day.isoformat()} 00:00:00+00"
        hi = f"{(day + dt.timedelta(days=1)).isoformat()} 00:00:00+00"
        bounds = {"lo": lo, "hi": hi}
        stranded = conn.execute(
            text(
                f"SELECT EXISTS (SELECT 1 FROM {FIXES_DEFAULT_PARTITION} "
                "WHERE ts >= CAST(:lo AS timestamptz) AND ts < CAST(:hi AS timestamptz))"
            ),
            bounds,
        ).scalar()
        if stranded:
            # Move that day's fixes out of DEFAULT before attaching the new partition.
            conn.execute(
                text(
                    f"CREATE TABLE {name} "
                    f"(LIKE {FIXES_TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
                )
            )
            conn.execute(
                text(
                    f"WITH moved AS (DELETE FROM {FIXES_DEFAULT_PARTITION} "
                    "WHERE ts >= CAST(:lo AS timestamptz) AND ts < CAST(:hi AS timestamptz) "
                    f"RETURNING *) INSERT INTO {name} SELECT * FROM moved"
                ),
                bounds,
            )
            conn.execute(
                text(
                    f"ALTER TABLE {FIXES_TABLE} ATTACH PARTITION {name} "
                    f"FOR VALUES FROM ('{lo}') TO ('{hi}')"
                )
            )
        else:
            conn.execute(
                text(
                    f"CREATE TABLE {name} PARTITION OF {FIXES_TABLE} "
                    f"FOR VALUES FROM ('{lo}') TO ('{hi}')"
                )
            )
        created.append(name)
    return created


def _timestamps_us(values: pd.Series) -> NDArray[np.int64]:
    if not isinstance(values.dtype, pd.DatetimeTZDtype):
        msg = (
            f"coluna '{frames.TIMESTAMP}' sem fuso horário (tipo {values.dtype}); "
            "esperado datetime64 com fuso (UTC)"
        )
        raise PingFrameError(msg)
    if values.isna().any():
        msg = f"coluna '{frames.TIMESTAMP}' tem {int(values.isna().sum())} valores nulos"
        raise PingFrameError(msg)
    return np.asarray(pd.DatetimeIndex(values).tz_convert("UTC").as_unit("us").asi8, dtype=np.int64)


def _float_column(pings: pd.DataFrame, name: str) -> NDArray[np.float64]:
    if name not in pings.columns:
        return np.full(len(pings), np.nan)
    try:
        return np.asarray(pd.to_numeric(pings[name]).to_numpy(dtype=np.float64, na_value=np.nan))
    except (TypeError, ValueError):
        msg = f"coluna '{name}' não numérica (tipo {pings[name].dtype})"
        raise PingFrameError(msg) from None


def _meter_column(pings: pd.DataFrame) -> pcp.BytesColumn:
    """Encode ``meter``, checking only its distinct values (it is dictionary-encoded anyway)."""
    if frames.METER not in pings.columns:
        return pcp.null_column(len(pings))
    column = pcp.text_column(pings[frames.METER])
    distinct = [bytes(v).decode("utf-8") for v in column.values.tolist()]
    bad = [v for v in distinct if v not in frames.METER_VALUES]
    if bad:
        msg = (
            f"'{frames.METER}' era {bad[0]!r}; "
            f"esperado um de {', '.join(frames.METER_VALUES)} ou vazio"
        )
        raise PingFrameError(msg)
    return column


def _checked_tariff(pings: pd.DataFrame) -> pcp.FixedColumn:
    if frames.TARIFF not in pings.columns:
        return pcp.FixedColumn(np.zeros(len(pings), ">i2"), np.ones(len(pings), dtype=bool))
    try:
        values = pd.to_numeric(pings[frames.TARIFF]).to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        msg = (
            f"'{frames.TARIFF}' não numérica (tipo {pings[frames.TARIFF].dtype}); "
            "esperado 1, 2 ou vazio"
        )
        raise PingFrameError(msg) from None
    null = np.isnan(values)
    bad = ~null & ~np.isin(values, frames.TARIFF_VALUES)
    if bad.any():
        first = float(values[bad][0])
        shown = int(first) if first.is_integer() else first
        msg = f"'{frames.TARIFF}' era {shown!r}; esperado 1, 2 ou vazio"
        raise PingFrameError(msg)
    return pcp.FixedColumn(np.where(null, 0, values).astype(">i2"), null)


def _h3_column(cells: NDArray[np.uint64]) -> pcp.FixedColumn:
    null = cells == 0  # H3's null index: coordinate that could not be indexed
    return pcp.FixedColumn(cells.view(np.int64).astype(">i8"), null if null.any() else None)


def _dbapi(conn: Connection) -> psycopg.Connection[Any]:
    dbapi = conn.connection.driver_connection
    if dbapi is None:  # pragma: no cover - a live connection always has one
        msg = "conexão sem driver psycopg ativo"
        raise RuntimeError(msg)
    return cast("psycopg.Connection[Any]", dbapi)


def _write_copy(
    conn: Connection,
    table: str,
    payload: Iterable[pcp.Block],
    *,
    freeze: bool = False,
    columns: tuple[str, ...] = _FIX_COLUMNS,
) -> None:
    options = "FORMAT BINARY, FREEZE" if freeze else "FORMAT BINARY"
    with (
        _dbapi(conn).cursor() as cur,
        cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN ({options})") as copy,
    ):
        for block in payload:
            copy.write(block)


class _Prefetcher:
    """Encode COPY payloads in a background thread, a bounded number of blocks ahead.

    While the server ingests one block (or builds an index between two payloads), the next
    blocks are encoded: numpy and H3 release the GIL, so client and server use a core each.
    Payloads are taken in the order given, each with :meth:`next_payload`; blocks left over
    from a payload whose COPY failed are skipped.
    """

    _END = object()

    def __init__(self, payloads: Iterable[Iterable[pcp.Block]], *, depth: int) -> None:
        self._queue: queue.Queue[tuple[int, object]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._taken = -1
        self._thread = threading.Thread(
            target=self._run, args=(payloads,), name="copy-encoder", daemon=True
        )

    def __enter__(self) -> _Prefetcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():  # unblock a producer waiting on a full queue
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _put(self, item: tuple[int, object]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
            except queue.Full:
                continue
            return True
        return False

    def _run(self, payloads: Iterable[Iterable[pcp.Block]]) -> None:
        i = -1
        try:
            for i, payload in enumerate(payloads):
                for block in payload:
                    if not self._put((i, block)):
                        return
                if not self._put((i, self._END)):
                    return
        except BaseException as exc:  # handed to the consuming thread
            self._put((i, exc))

    def next_payload(self) -> Iterator[pcp.Block]:
        """Yield the blocks of the next payload."""
        self._taken += 1
        while True:
            i, item = self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if i < self._taken:
                continue  # left over from an earlier payload
            if item is self._END:
                return
            yield cast(pcp.Block, item)


@dataclass(frozen=True)
class _Encoded:
    """Pings checked and encoded for COPY: full-length columns plus the rows to store, in order."""

    rows: NDArray[np.int64]  # input rows to store, deduplicated, by (UTC day, vehicle, ts)
    ts_us: NDArray[np.int64]  # of ``rows``
    vehicle_codes: NDArray[np.int64]  # of ``rows``, into ``vehicle_ids``
    vehicle_ids: list[str]  # sorted
    vehicle_id: pcp.BytesColumn
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    speed_kmh: NDArray[np.float64]
    heading_deg: NDArray[np.float64]
    accuracy_m: NDArray[np.float64]
    meter: pcp.BytesColumn
    tariff: pcp.FixedColumn
    driver_id: pcp.BytesColumn
    speed_flag: NDArray[np.bool_]
    source: str

    def payload(
        self,
        positions: NDArray[np.int64] | None = None,
        *,
        source: bool = True,
        chunk_rows: int = _CHUNK_ROWS,
    ) -> Iterator[pcp.Block]:
        """Yield the binary COPY stream of the stored rows at ``positions`` (default: all).

        H3 cells are computed a chunk at a time. Without ``source`` the last column of
        ``_FIX_COLUMNS`` is left out (the table's default gives it).
        """
        if positions is None:
            positions = np.arange(len(self.rows), dtype=np.int64)
        yield pcp.COPY_HEADER
        for lo in range(0, len(positions), chunk_rows):
            pos = positions[lo : lo + chunk_rows]
            idx = self.rows[pos]
            lat, lon = self.lat[idx], self.lon[idx]
            columns: list[pcp.Column] = [
                self.vehicle_id.take(idx),
                pcp.timestamptz_column(self.ts_us[pos]),
                pcp.float8_column(lat),
                pcp.float8_column(lon),
                pcp.ewkb_point_column(lon, lat, srid=_SRID),
                pcp.float8_column(self.speed_kmh[idx]),
                pcp.float8_column(self.heading_deg[idx]),
                pcp.float8_column(self.accuracy_m[idx]),
                self.meter.take(idx),
                self.tariff.take(idx),
                self.driver_id.take(idx),
                _h3_column(latlng_to_cells(lat, lon, resolution=H3_RESOLUTION)),
                pcp.FixedColumn(self.speed_flag[idx].astype("u1")),
            ]
            if source:
                columns.append(pcp.constant_text_column(self.source, len(idx)))
            yield from pcp.copy_rows(columns, chunk_rows=chunk_rows)
        yield pcp.COPY_TRAILER

    def values_payload(
        self, positions: NDArray[np.int64], *, chunk_rows: int = _CHUNK_ROWS
    ) -> Iterator[pcp.Block]:
        """Yield the binary COPY stream of ``_CHECK_COLUMNS`` of the rows at ``positions``."""
        yield pcp.COPY_HEADER
        for lo in range(0, len(positions), chunk_rows):
            pos = positions[lo : lo + chunk_rows]
            idx = self.rows[pos]
            columns: list[pcp.Column] = [
                self.vehicle_id.take(idx),
                pcp.timestamptz_column(self.ts_us[pos]),
                pcp.float8_column(self.lat[idx]),
                pcp.float8_column(self.lon[idx]),
                pcp.float8_column(self.speed_kmh[idx]),
                pcp.float8_column(self.heading_deg[idx]),
                pcp.float8_column(self.accuracy_m[idx]),
                self.meter.take(idx),
                self.tariff.take(idx),
                self.driver_id.take(idx),
            ]
            yield from pcp.copy_rows(columns, chunk_rows=chunk_rows)
        yield pcp.COPY_TRAILER


def _composite_keys(
    ts_us: NDArray[np.int64], codes: NDArray[np.int64], *, first_day: int, n_codes: int
) -> NDArray[np.int64]:
    """One int64 per (vehicle code, ts), increasing with (UTC day, vehicle code, ts)."""
    day = np.floor_divide(ts_us, _US_PER_DAY)
    keys = ((day - first_day) * n_codes + codes) * _US_PER_DAY + (ts_us - day * _US_PER_DAY)
    return np.asarray(keys, dtype=np.int64)


def _keys_fit(span_days: int, n_codes: int) -> bool:
    """Whether :func:`_composite_keys` fits in int64 for this many days and vehicle codes."""
    return span_days * max(n_codes, 1) < (1 << 63) // _US_PER_DAY


def _day_vehicle_ts_order(
    ts_us: NDArray[np.int64], codes: NDArray[np.int64], n_codes: int
) -> NDArray[np.int64]:
    """Return the stable order of rows by (UTC day, vehicle code, ts)."""
    if len(ts_us) == 0:
        return np.zeros(0, dtype=np.int64)
    day = np.floor_divide(ts_us, _US_PER_DAY)
    first = int(day.min())
    if _keys_fit(int(day.max()) - first + 1, n_codes):
        # One int64 key: sorting it is several times faster than a three-key lexsort.
        keys = _composite_keys(ts_us, codes, first_day=first, n_codes=n_codes)
        return np.argsort(keys, kind="stable")
    return np.lexsort((ts_us, codes, day))


def _encode(pings: pd.DataFrame, *, source: str) -> _Encoded:
    """Check the pings and encode their columns; no row is copied or reordered in pandas."""
    missing = [c for c in frames.PING_REQUIRED if c not in pings.columns]
    if missing:
        msg = f"pings sem as colunas obrigatórias: {', '.join(missing)}"
        raise MissingColumnsError(msg)
    ts_us = _timestamps_us(pings[frames.TIMESTAMP])
    lat = _float_column(pings, frames.LAT)
    lon = _float_column(pings, frames.LON)
    bad = ~(np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180))
    if bad.any():
        msg = (
            f"{int(bad.sum())} pings com '{frames.LAT}'/'{frames.LON}' vazios ou fora de "
            "[-90, 90] × [-180, 180]; valide os pings antes de gravar"
        )
        raise PingFrameError(msg)
    vids = pings[frames.VEHICLE_ID]
    if vids.isna().any():
        msg = f"coluna '{frames.VEHICLE_ID}' tem {int(vids.isna().sum())} valores nulos"
        raise PingFrameError(msg)
    n = len(pings)
    meter = _meter_column(pings)
    tariff = _checked_tariff(pings)

    # Keep the first of rows sharing (vehicle_id, ts); order by (UTC day, vehicle, ts) so each
    # daily partition and its primary key receive long sorted runs.
    codes, uniques = pd.factorize(vids.astype("string"), sort=True)
    order = _day_vehicle_ts_order(ts_us, codes, len(uniques))
    c_sorted, t_sorted = codes[order], ts_us[order]
    keep = np.ones(len(order), dtype=bool)  # lexsort is stable: the earliest row comes first
    keep[1:] = (c_sorted[1:] != c_sorted[:-1]) | (t_sorted[1:] != t_sorted[:-1])
    rows = order[keep]
    speed_flag = (
        pings[frames.SPEED_FLAG].fillna(False).to_numpy(dtype=bool)
        if frames.SPEED_FLAG in pings.columns
        else np.zeros(n, dtype=bool)
    )
    return _Encoded(
        rows=rows,
        ts_us=ts_us[rows],
        vehicle_codes=codes[rows].astype(np.int64),
        vehicle_ids=[str(v) for v in uniques],
        vehicle_id=pcp.text_column(vids),
        lat=lat,
        lon=lon,
        speed_kmh=_float_column(pings, frames.SPEED_KMH),
        heading_deg=_float_column(pings, frames.HEADING_DEG),
        accuracy_m=_float_column(pings, frames.ACCURACY_M),
        meter=meter,
        tariff=tariff,
        driver_id=(
            pcp.text_column(pings[frames.DRIVER_ID])
            if frames.DRIVER_ID in pings.columns
            else pcp.null_column(n)
        ),
        speed_flag=speed_flag,
        source=source,
    )


def _any_stored(conn: Connection, vehicle_ids: list[str], ts_us: NDArray[np.int64]) -> bool:
    lo = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(ts_us.min()))
    hi = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(ts_us.max()))
    found = conn.execute(
        text(
            f"SELECT EXISTS (SELECT 1 FROM {FIXES_TABLE} WHERE vehicle_id = ANY(:vids) "
            "AND ts BETWEEN :lo AND :hi)"
        ),
        {"vids": vehicle_ids, "lo": lo, "hi": hi},
    ).scalar()
    return bool(found)


def _day_bounds(day: dt.date) -> tuple[str, str]:
    return (
        f"{day.isoformat()} 00:00:00+00",
        f"{(day + dt.timedelta(days=1)).isoformat()} 00:00:00+00",
    )


def _stranded_days(conn: Connection, days: list[dt.date]) -> set[dt.date]:
    """Return the days among ``days`` that have fixes in the DEFAULT partition."""
    lo, _ = _day_bounds(min(days))
    _, hi = _day_bounds(max(days))
    found = conn.execute(
        text(
            f"SELECT DISTINCT CAST(ts AT TIME ZONE 'UTC' AS date) FROM {FIXES_DEFAULT_PARTITION} "
            "WHERE ts >= CAST(:lo AS timestamptz) AND ts < CAST(:hi AS timestamptz)"
        ),
        {"lo": lo, "hi": hi},
    )
    return {r[0] for r in found} & set(days)


def _claim_new_days(conn: Connection, days: list[dt.date]) -> list[dt.date]:
    """Return the days whose partition this transaction will create and load itself.

    Days without a partition and without fixes in DEFAULT qualify; for days with fixes stranded
    in DEFAULT the partition is created now (moving them). Holds the partition lock until the
    end of the transaction, so a concurrent import waits and then sees the new partitions.
    """
    existing = _existing_partitions(conn)
    missing = [d for d in days if partition_name(d) not in existing]
    if not missing:
        return []
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PARTITION_LOCK_KEY})
    existing = _existing_partitions(conn)
    missing = [d for d in missing if partition_name(d) not in existing]
    if not missing:
        return []
    stranded = _stranded_days(conn, missing)
    if stranded:
        _ensure_days(conn, sorted(stranded))
    return [d for d in missing if d not in stranded]


def _load_new_partition(
    conn: Connection, day: dt.date, payload: Iterable[pcp.Block], *, source: str
) -> None:
    """Create ``day``'s partition as a plain table, COPY into it, then build its primary key.

    A table created in the same transaction takes ``COPY … FREEZE`` (rows written frozen, no
    later vacuum rewrite) and, with ``wal_level=minimal``, skips WAL (fsynced at commit); one
    sorted index build is cheaper than a million index insertions. The CHECK on the day's
    bounds lets :func:`_attach_partition` skip the validation scan. ``source``, one value for
    the whole load, is the column's default during the COPY (``payload`` leaves it out): a
    constant instead of a text received per row.
    """
    name = partition_name(day)
    lo, hi = _day_bounds(day)
    conn.execute(
        text(
            f"CREATE TABLE {name} (LIKE {FIXES_TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
            f"CONSTRAINT {name}_day CHECK (ts >= '{lo}' AND ts < '{hi}'))"
        )
    )
    with _dbapi(conn).cursor() as cur:
        cur.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN source SET DEFAULT {}").format(
                sql.Identifier(name), sql.Literal(source)
            )
        )
    _write_copy(conn, name, payload, freeze=True, columns=_FIX_COLUMNS[:-1])
    conn.execute(text(f"ALTER TABLE {name} ALTER COLUMN source DROP DEFAULT"))
    conn.execute(
        text(f"ALTER TABLE {name} ADD CONSTRAINT {name}_pkey PRIMARY KEY (vehicle_id, ts)")
    )


def _attach_partition(conn: Connection, day: dt.date) -> None:
    name = partition_name(day)
    lo, hi = _day_bounds(day)
    conn.execute(
        text(
            f"ALTER TABLE {FIXES_TABLE} ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{lo}') TO ('{hi}')"
        )
    )
    conn.execute(text(f"ALTER TABLE {name} DROP CONSTRAINT {name}_day"))


def _stored_mask(
    conn: Connection, enc: _Encoded, positions: NDArray[np.int64]
) -> NDArray[np.bool_] | None:
    """Return which rows at ``positions`` are already in ``fixes`` (None: too wide a span).

    The stored timestamps of the rows' vehicles in their time span come back packed, one
    ``bytea`` per vehicle, and are matched in numpy: far cheaper than staging every row for
    ``ON CONFLICT`` to skip it.
    """
    codes, ts_us = enc.vehicle_codes[positions], enc.ts_us[positions]
    first = int(ts_us.min()) // _US_PER_DAY
    span_us = (int(ts_us.max()) // _US_PER_DAY - first + 1) * _US_PER_DAY
    if not _keys_fit(span_us // _US_PER_DAY, len(enc.vehicle_ids)):
        return None
    origin = first * _US_PER_DAY
    vehicle_codes = np.unique(codes)
    query = (
        "SELECT vehicle_id, string_agg(timestamptz_send(ts), ''::bytea) "
        f"FROM {FIXES_TABLE} WHERE vehicle_id = ANY(%(vids)s) AND ts BETWEEN %(lo)s AND %(hi)s "
        "GROUP BY vehicle_id"
    )  # an index-only scan of the primary key (pages are all-visible after COPY FREEZE)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    params = {
        "vids": [enc.vehicle_ids[c] for c in vehicle_codes],
        "lo": epoch + dt.timedelta(microseconds=int(ts_us.min())),
        "hi": epoch + dt.timedelta(microseconds=int(ts_us.max())),
    }
    with _dbapi(conn).cursor(binary=True) as cur:
        found = cur.execute(query, params).fetchall()
    if not found:
        return np.zeros(len(positions), dtype=bool)
    code_of = {v: i for i, v in enumerate(enc.vehicle_ids)}
    found.sort(key=lambda row: code_of[row[0]])
    stored_ts = [np.frombuffer(packed, dtype=">i8") for _, packed in found]
    stored_codes = np.repeat(
        np.array([code_of[v] for v, _ in found], dtype=np.int64), [len(t) for t in stored_ts]
    )
    # (vehicle code, ts) as one int64; no division, and sorted already when each vehicle's
    # timestamps come in order (as the index scan gives them)
    stored_keys = stored_codes * span_us + (
        np.concatenate(stored_ts).astype(np.int64) + (pcp.PG_EPOCH_US - origin)
    )
    if len(stored_keys) > 1 and not (stored_keys[1:] > stored_keys[:-1]).all():
        stored_keys.sort()
    keys = codes * span_us + (ts_us - origin)
    at = np.minimum(np.searchsorted(stored_keys, keys), len(stored_keys) - 1)
    return np.asarray(stored_keys[at] == keys)


def _copy_existing(
    conn: Connection,
    enc: _Encoded,
    positions: NDArray[np.int64],
    payload: Iterable[pcp.Block],
    *,
    direct: bool,
) -> tuple[int, NDArray[np.int64]]:
    """Store rows bound for partitions that existed: direct COPY, or staged if it may clash.

    Returns the rows inserted and the positions whose key was stored with other values
    (found only when staged: a direct COPY's rows had no stored key).
    """
    if direct:
        try:
            with conn.begin_nested():
                _write_copy(conn, FIXES_TABLE, payload)
            return len(positions), np.zeros(0, dtype=np.int64)
        except psycopg.errors.UniqueViolation:
            payload = enc.payload(positions)  # a concurrent import stored some: stage them
    conn.execute(text(f"DROP TABLE IF EXISTS pg_temp.{_STAGE}"))
    conn.execute(
        text(f"CREATE TEMP TABLE {_STAGE} (LIKE {FIXES_TABLE} INCLUDING DEFAULTS) ON COMMIT DROP")
    )
    _write_copy(conn, _STAGE, payload)
    inserted = conn.execute(
        text(
            f"INSERT INTO {FIXES_TABLE} ({_COLUMN_LIST}) SELECT {_COLUMN_LIST} FROM {_STAGE} "
            "ON CONFLICT (vehicle_id, ts) DO NOTHING"
        )
    ).rowcount
    # Now every staged key is stored: a stored fix with other values is another's.
    clash = _differing(conn, enc, positions, table=_STAGE)
    conn.execute(text(f"DROP TABLE pg_temp.{_STAGE}"))
    return int(inserted), clash


def _check_stored(
    conn: Connection, enc: _Encoded, positions: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Return the positions among ``positions`` (keys already stored) whose values differ."""
    cols = ", ".join(_CHECK_COLUMNS)
    conn.execute(text(f"DROP TABLE IF EXISTS pg_temp.{_CHECK}"))
    conn.execute(
        text(
            f"CREATE TEMP TABLE {_CHECK} ON COMMIT DROP AS "
            f"SELECT {cols} FROM {FIXES_TABLE} WITH NO DATA"
        )
    )
    _write_copy(conn, _CHECK, enc.values_payload(positions), columns=_CHECK_COLUMNS)
    clash = _differing(conn, enc, positions, table=_CHECK)
    conn.execute(text(f"DROP TABLE pg_temp.{_CHECK}"))
    return clash


def _differing(
    conn: Connection, enc: _Encoded, positions: NDArray[np.int64], *, table: str
) -> NDArray[np.int64]:
    """Return the positions whose row in ``table`` differs from the stored fix of its key.

    Compared on :data:`tracking.validate.FIX_VALUES` (NULL equals NULL), in the database.
    """
    if len(positions) == 0:
        return np.zeros(0, dtype=np.int64)
    ts_us = enc.ts_us[positions]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    mine = ", ".join(f"c.{c}" for c in FIX_VALUES)
    stored = ", ".join(f"f.{c}" for c in FIX_VALUES)
    found = conn.execute(
        text(
            f"SELECT c.vehicle_id, (extract(epoch FROM c.ts) * 1000000)::int8 FROM {table} c "
            f"JOIN {FIXES_TABLE} f ON f.vehicle_id = c.vehicle_id AND f.ts = c.ts "
            f"WHERE f.ts BETWEEN :lo AND :hi AND ({mine}) IS DISTINCT FROM ({stored})"
        ),
        {
            "lo": epoch + dt.timedelta(microseconds=int(ts_us.min())),
            "hi": epoch + dt.timedelta(microseconds=int(ts_us.max())),
        },
    ).all()
    if not found:
        return np.zeros(0, dtype=np.int64)
    code_of = {v: i for i, v in enumerate(enc.vehicle_ids)}
    keys = pd.MultiIndex.from_arrays([enc.vehicle_codes[positions], ts_us])
    wanted = pd.MultiIndex.from_arrays(
        [
            np.array([code_of[str(v)] for v, _ in found], dtype=np.int64),
            np.array([int(us) for _, us in found], dtype=np.int64),
        ]
    )
    at = keys.get_indexer(wanted)
    return np.sort(positions[at[at >= 0]])


@dataclass(frozen=True)
class StoredFixes:
    """What :func:`store_fixes` did with each fix of a pings frame."""

    inserted: int
    """Fixes written now."""
    existing: int
    """Fixes whose (vehicle, microsecond) was stored before with the same values."""
    refused: pd.DataFrame
    """The other fixes, with their columns and ``reason`` (``duplicate``: of another fix of the
    frame in the same microsecond; ``conflicting_duplicate``: its microsecond taken, by another
    fix of the frame or a stored one, with other values), by ``row``: to be quarantined."""


def store_fixes(conn: Connection, pings: pd.DataFrame, *, source: str) -> StoredFixes:
    """Store validated pings in ``fixes``; say what became of each one.

    One fix per (vehicle, microsecond), the table's key
    (:func:`tracking.validate.merge_microseconds`); a fix whose key is stored already is compared
    with the stored one (:data:`tracking.validate.FIX_VALUES`): the same, it is ``existing``;
    other values, refused as ``conflicting_duplicate`` (the stored fix stays). Stored by
    :func:`copy_fixes`'s binary COPY; the comparison costs nothing when no key is taken.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3 driver) inside the caller's transaction; nothing is committed here.
    pings : pandas.DataFrame
        Pings per :mod:`tracking.frames`, one per (vehicle, instant) as validation gives them;
        see :func:`copy_fixes`.
    source : str
        Where the pings came from (file name, device feed), stored with each fix.

    Returns
    -------
    StoredFixes
        ``inserted + existing + len(refused) == len(pings)``.

    Raises
    ------
    MissingColumnsError, PingFrameError
        As :func:`copy_fixes`.
    """
    kept, refused = merge_microseconds(pings)
    enc = _encode(kept, source=source)
    inserted, clash = _store_encoded(conn, enc, source=source)
    if len(clash):
        taken = kept.iloc[enc.rows[clash]].assign(**{frames.REASON: CONFLICTING_DUPLICATE})
        refused = pd.concat([refused, taken], ignore_index=True)
        if frames.ROW in refused.columns:
            refused = refused.sort_values(frames.ROW, kind="stable", ignore_index=True)
    return StoredFixes(
        inserted=inserted, existing=len(kept) - inserted - len(clash), refused=refused
    )


def copy_fixes(conn: Connection, pings: pd.DataFrame, *, source: str) -> int:
    """Store validated pings in ``fixes`` by binary COPY; fixes already stored are skipped.

    Rows of a UTC day that has no partition yet go into a new table created in this transaction
    (``COPY … FREEZE``, then its primary key is built and it is attached as the day's
    partition): the fastest path, and WAL-free on a server with ``wal_level=minimal``. Rows of
    days whose partition exists are copied straight into ``fixes`` (inside a savepoint), less
    those already stored: when the rows' vehicles have stored fixes in the rows' time span, their
    stored timestamps are fetched and matched first. If a concurrent import wins a race (or the
    span is too wide to match keys in int64), the rows go through a temporary staging table and
    ``INSERT … ON CONFLICT (vehicle_id, ts) DO NOTHING``. Encoding runs in a background thread,
    overlapping the server's work; rows reach the server sorted by (vehicle_id, ts).

    This is :func:`store_fixes` for callers that need only the count: it tells which fixes were
    refused (same microsecond, stored with other values), to quarantine them.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3 driver) inside the caller's transaction; nothing is committed here.
    pings : pandas.DataFrame
        Pings per :mod:`tracking.frames`: ``vehicle_id``, tz-aware ``timestamp``, ``lat``, ``lon``
        required; optional columns absent or NaN/None are stored as NULL. Row order is free; of
        rows sharing ``(vehicle_id, timestamp)`` the first is stored, of rows sharing a
        microsecond the one of the earliest ``row``.
    source : str
        Where the pings came from (file name, device feed), stored with each fix.

    Returns
    -------
    int
        Rows inserted; a fix whose ``(vehicle_id, timestamp)`` is already stored is not counted.

    Raises
    ------
    MissingColumnsError
        If a required column is missing.
    PingFrameError
        If a timestamp is naive or null, a vehicle id is null, a coordinate is outside WGS84
        bounds, or ``meter``/``tariff`` hold unknown values.
    """
    return store_fixes(conn, pings, source=source).inserted


def _store_encoded(
    conn: Connection, enc: _Encoded, *, source: str
) -> tuple[int, NDArray[np.int64]]:
    """Store encoded fixes; return the rows inserted and the positions refused as conflicting."""
    if len(enc.rows) == 0:
        return 0, np.zeros(0, dtype=np.int64)
    # Stored rows are sorted by UTC day first: each day is one run of positions.
    day_numbers, starts = np.unique(np.floor_divide(enc.ts_us, _US_PER_DAY), return_index=True)
    ends = np.append(starts[1:], len(enc.rows))
    days = [_EPOCH + dt.timedelta(days=int(d)) for d in day_numbers]
    # the days' pickups (db.tracking.pickups) are read from the fixes until built again
    conn.execute(text("DELETE FROM pickup_days WHERE day = ANY(:days)"), {"days": days})
    fresh = set(_claim_new_days(conn, days))
    new_runs = [(d, s, e) for d, s, e in zip(days, starts, ends, strict=True) if d in fresh]
    rest = np.concatenate(
        [np.arange(s, e) for d, s, e in zip(days, starts, ends, strict=True) if d not in fresh]
        or [np.zeros(0, dtype=np.int64)]
    ).astype(np.int64)
    direct = True  # rows of existing partitions: COPY straight into fixes
    clashes = [np.zeros(0, dtype=np.int64)]
    if len(rest):
        vehicle_ids = [enc.vehicle_ids[c] for c in np.unique(enc.vehicle_codes[rest])]
        if _any_stored(conn, vehicle_ids, enc.ts_us[rest]):
            stored = _stored_mask(conn, enc, rest)
            if stored is None:
                direct = False  # let ON CONFLICT sort them out
            else:
                clashes.append(_check_stored(conn, enc, rest[stored]))
                rest = rest[~stored]
    payloads = [enc.payload(np.arange(s, e, dtype=np.int64), source=False) for _, s, e in new_runs]
    if len(rest):
        payloads.append(enc.payload(rest))
    inserted = 0
    with _Prefetcher(payloads, depth=_PREFETCH_BLOCKS) as prefetch:
        for day, s, e in new_runs:
            _load_new_partition(conn, day, prefetch.next_payload(), source=source)
            inserted += int(e - s)
        if len(rest):
            n, clash = _copy_existing(conn, enc, rest, prefetch.next_payload(), direct=direct)
            inserted += n
            clashes.append(clash)
    for day, _, _ in new_runs:  # last, so the lock on DEFAULT is held as briefly as possible
        _attach_partition(conn, day)
    return inserted, np.concatenate(clashes)


def _json_safe(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):  # PostgreSQL text cannot hold NUL
        return value[:MAX_RAW_CHARS].replace("\x00", "\ufffd")
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, pd.Timestamp | dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    return value


def copy_rejected(conn: Connection, rejected: pd.DataFrame, *, source: str) -> int:
    """Store rejected input rows with their reason and original values (as JSON).

    Each text (a value, a column's name) is cut to :data:`MAX_RAW_CHARS` characters: a
    megabyte cell does not go whole into the quarantine. A row already stored from the same
    source (same row number, reason and values) is not stored again, so re-importing a file
    does not grow the quarantine.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3 driver) inside the caller's transaction.
    rejected : pandas.DataFrame
        Rows refused by validation: ``row`` (1-based data row of the source), ``reason``, and
        the original values in the other columns.
    source : str
        Where the rows came from.

    Returns
    -------
    int
        Rows newly stored.

    Raises
    ------
    MissingColumnsError
        If the ``reason`` column is missing.
    """
    if frames.REASON not in rejected.columns:
        msg = f"rejeitados sem a coluna '{frames.REASON}'"
        raise MissingColumnsError(msg)
    if len(rejected) == 0:
        return 0
    raw_cols = [c for c in rejected.columns if c not in (frames.ROW, frames.REASON)]
    has_row = frames.ROW in rejected.columns
    rows = rejected[frames.ROW].tolist() if has_row else [None] * len(rejected)
    reasons = rejected[frames.REASON].astype(str).tolist()
    raw_records = rejected[raw_cols].astype(object).to_numpy()
    staged = (
        (
            source,
            _json_safe(row),
            reason,
            json.dumps(
                {_json_safe(str(c)): _json_safe(v) for c, v in zip(raw_cols, rec, strict=True)},
                ensure_ascii=False,
            ),
        )
        for row, reason, rec in zip(rows, reasons, raw_records, strict=True)
    )
    cols = ("source", "row", "reason", "raw")
    stage = stage_rows(conn, like="rejected_fixes", columns=cols, rows=staged)
    inserted = conn.execute(
        text(
            f"INSERT INTO rejected_fixes (source, row, reason, raw) "
            f"SELECT DISTINCT s.source, s.row, s.reason, s.raw FROM {stage} s "
            "WHERE NOT EXISTS (SELECT 1 FROM rejected_fixes r WHERE r.source = s.source "
            "AND r.row IS NOT DISTINCT FROM s.row AND r.reason = s.reason AND r.raw = s.raw)"
        )
    ).rowcount
    conn.execute(text(f"DROP TABLE pg_temp.{stage}"))
    return int(inserted)
