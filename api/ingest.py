"""Live ingest of GPS fixes sent by a device: the file ingest's validation, per-row answers.

One call validates a batch with :func:`tracking.validate.validate_pings` (the same rules and
reason codes as ``pontual import pings``), stores the good fixes with
:func:`tracking.store.copy_fixes` and the bad rows with :func:`tracking.store.copy_rejected`, and
says what happened to each row:

``accepted``
    Stored now.
``duplicate``
    Already stored (same vehicle and timestamp; the stored fix is kept), or identical to an
    earlier row of the batch. Safe to resend: ingest is idempotent on (vehicle, timestamp).
``rejected``
    Not stored; ``reason`` is a validation code (``null_island``, ``naive_timestamp``…) or
    ``vehicle_not_allowed`` (a device may only send fixes of its own vehicle).

The caller commits; answers are sent only after the commit, so an acknowledged fix is durable.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection

from api.alerts import detect_on_ingest
from tracking import frames as fr
from tracking.store import copy_fixes, copy_rejected
from tracking.validate import validate_pings

ACCEPTED = "accepted"
DUPLICATE = "duplicate"
REJECTED = "rejected"
VEHICLE_NOT_ALLOWED = "vehicle_not_allowed"
RAW_COLUMNS = (*fr.PING_REQUIRED, *fr.PING_OPTIONAL)


@dataclass(frozen=True)
class RowResult:
    """What happened to one row of a batch (``row`` is 1-based)."""

    row: int
    status: str
    reason: str | None = None


def _cell(value: Any) -> str:
    """Return a JSON scalar as the text a CSV cell would hold (missing = empty)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "nan"
    return str(value)


def raw_frame(rows: Sequence[Mapping[str, Any]], *, default_vehicle_id: str) -> pd.DataFrame:
    """Build the raw (text cells) frame :func:`validate_pings` takes from JSON rows.

    A row without ``vehicle_id`` is for ``default_vehicle_id`` (the device's vehicle).
    """
    data: dict[str, pd.Series] = {fr.ROW: pd.Series(np.arange(1, len(rows) + 1, dtype=np.int64))}
    for column in RAW_COLUMNS:
        cells = [_cell(r.get(column)) for r in rows]
        if column == fr.VEHICLE_ID:
            cells = [c or default_vehicle_id for c in cells]
        data[column] = pd.Series(cells, dtype="str")
    return pd.DataFrame(data)


def _stored_timestamps(conn: Connection, vehicle_id: str, ts: pd.Series) -> set[pd.Timestamp]:
    if ts.empty:
        return set()
    found = conn.execute(
        text(
            "SELECT ts FROM fixes WHERE vehicle_id = :v AND ts BETWEEN :lo AND :hi "
            "AND ts = ANY(:ts)"
        ),
        {
            "v": vehicle_id,
            "lo": ts.min().to_pydatetime(),
            "hi": ts.max().to_pydatetime(),
            "ts": [t.to_pydatetime() for t in ts],
        },
    )
    return {pd.Timestamp(r[0]).tz_convert("UTC") for r in found}


def ingest_batch(
    *,
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    vehicle_id: str,
    source: str,
    now: dt.datetime | None = None,
) -> list[RowResult]:
    """Validate and store a device's batch; return one result per row, in row order.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3) inside the caller's transaction; nothing is committed here.
    rows : sequence of mappings
        JSON rows with the pings contract's fields (``vehicle_id`` optional: the device's).
    vehicle_id : str
        The only vehicle the sender may report.
    source : str
        Stored with each fix and rejected row (e.g. ``api:device:7``).
    now : datetime.datetime, optional
        Reference for ``future_timestamp`` (tz-aware); default the current time.

    Returns
    -------
    list of RowResult
        ``accepted``, ``duplicate`` or ``rejected`` with a reason, one per row.
    """
    if not rows:
        return []
    results: dict[int, RowResult] = {}
    raw = raw_frame(rows, default_vehicle_id=vehicle_id)
    foreign = raw[fr.VEHICLE_ID].str.strip().to_numpy() != vehicle_id
    refused = raw.loc[foreign].assign(**{fr.REASON: VEHICLE_NOT_ALLOWED})
    for row in refused[fr.ROW].tolist():
        results[row] = RowResult(row, REJECTED, VEHICLE_NOT_ALLOWED)
    mine = raw.loc[~foreign].reset_index(drop=True)
    pings, rejected = validate_pings(mine, now=None if now is None else pd.Timestamp(now))
    for row, reason in zip(rejected[fr.ROW].tolist(), rejected[fr.REASON].tolist(), strict=True):
        if reason == "duplicate":
            results[int(row)] = RowResult(int(row), DUPLICATE)
        else:
            results[int(row)] = RowResult(int(row), REJECTED, str(reason))
    stored = _stored_timestamps(conn, vehicle_id, pings[fr.TIMESTAMP])
    is_stored = np.fromiter(
        (t in stored for t in pings[fr.TIMESTAMP]), dtype=bool, count=len(pings)
    )
    for row in pings.loc[is_stored, fr.ROW].tolist():
        results[int(row)] = RowResult(int(row), DUPLICATE)
    for row in pings.loc[~is_stored, fr.ROW].tolist():
        results[int(row)] = RowResult(int(row), ACCEPTED)
    fresh = pings.loc[~is_stored].reset_index(drop=True)
    if len(fresh):
        copy_fixes(conn, fresh, source=source)
        detect_on_ingest(conn, fresh)  # live detectors → findings, alerts (savepoint)
    bad = pd.concat([refused, rejected.loc[rejected[fr.REASON] != "duplicate"]], ignore_index=True)
    if len(bad):
        copy_rejected(conn, bad, source=source)
    return [results[i] for i in range(1, len(rows) + 1)]
