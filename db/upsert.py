"""Set-based upserts of registry rows through a COPY-loaded temporary staging table.

Rows are copied into ``pg_temp`` (text COPY, adapted by psycopg), then one ``UPDATE … FROM`` changes
rows whose values differ and one ``INSERT … WHERE NOT EXISTS`` adds new keys, so the counts of
created, updated and unchanged rows come from the database itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely
from sqlalchemy import text
from sqlalchemy.engine import Connection

from tracking.tails import plain


@dataclass(frozen=True)
class ImportReport:
    """What an import changed; ``notes``: pt-BR lines on rows stored otherwise than given."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total(self) -> int:
        """Rows of the input that were stored (created, updated or unchanged)."""
        return self.created + self.updated + self.unchanged


def audit_import(
    conn: Connection,
    *,
    actor: str,
    entity: str,
    source: str,
    details: dict[str, Any],
    action: str = "import",
) -> None:
    """Write one audit-log entry for a registry change (``audit_log`` is append-only)."""
    conn.execute(
        text(
            "INSERT INTO audit_log (actor, action, entity, entity_id, details) "
            "VALUES (:a, :action, :e, :s, CAST(:d AS jsonb))"
        ),
        {
            "a": actor,
            "action": action,
            "e": entity,
            "s": source,
            "d": json.dumps(details, default=str),
        },
    )


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        msg = f"identificador SQL inválido: {name!r}"
        raise ValueError(msg)
    return f'"{name}"'


def stage_rows(
    conn: Connection, *, like: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> str:
    """Copy rows into a new temporary table with the types of ``like``'s columns; return its name.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3 driver) in the caller's transaction.
    like : str
        Table whose columns (and defaults) the staging table copies.
    columns : sequence of str
        Columns given in each row, in order.
    rows : iterable of sequences
        Values; geometry as hex EWKB strings, dates as ``datetime.date``, NULL as None.

    Returns
    -------
    str
        Name of the staging table (dropped at commit).
    """
    stage = f"_stage_{like}"
    conn.execute(text(f"DROP TABLE IF EXISTS pg_temp.{_ident(stage)}"))
    col_list = ", ".join(_ident(c) for c in columns)
    # Same column types, no constraints: staged values may be NULL where the merge fills them.
    conn.execute(
        text(
            f"CREATE TEMP TABLE {_ident(stage)} ON COMMIT DROP AS "
            f"SELECT {col_list} FROM {_ident(like)} WITH NO DATA"
        )
    )
    dbapi = conn.connection.driver_connection
    if dbapi is None:  # pragma: no cover - a live connection always has one
        msg = "conexão sem driver psycopg ativo"
        raise RuntimeError(msg)
    with dbapi.cursor() as cur, cur.copy(f"COPY {_ident(stage)} ({col_list}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([plain(v) for v in row])
    return stage


def hex_ewkb(geoms: Sequence[Any] | np.ndarray, *, srid: int = 4326) -> list[str | None]:
    """Return geometries as hex EWKB with ``srid`` (what COPY text puts in a geometry column).

    Missing geometries give None.
    """
    arr = np.asarray(geoms, dtype=object)
    out: list[str | None] = [None] * len(arr)
    present = np.flatnonzero(~shapely.is_missing(arr))
    if len(present):
        with_srid = shapely.set_srid(arr[present], srid)
        for i, h in zip(
            present, shapely.to_wkb(with_srid, hex=True, include_srid=True), strict=True
        ):
            out[int(i)] = str(h)
    return out


def merge_staged(
    conn: Connection,
    *,
    stage: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[str],
    touch: dict[str, str] | None = None,
) -> ImportReport:
    """Apply staged rows to ``table``: update differing rows, insert new keys.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    stage : str
        Staging table from :func:`stage_rows`.
    table : str
        Target table.
    key : sequence of str
        Columns identifying a row.
    columns : sequence of str
        Non-key columns to compare and copy.
    touch : dict, optional
        Extra ``column: SQL expression`` assignments made on updated rows only
        (e.g. ``{"updated_at": "now()"}``).

    Returns
    -------
    ImportReport
        Created and updated counts; ``unchanged`` is the staged rows that were neither.
    """
    t, s = _ident(table), _ident(stage)
    on_key = " AND ".join(f"t.{_ident(k)} = s.{_ident(k)}" for k in key)
    staged = int(conn.execute(text(f"SELECT count(*) FROM {s}")).scalar_one())
    updated = 0
    if columns:
        sets = [f"{_ident(c)} = s.{_ident(c)}" for c in columns]
        sets += [f"{_ident(c)} = {expr}" for c, expr in (touch or {}).items()]
        target_row = ", ".join(f"t.{_ident(c)}" for c in columns)
        staged_row = ", ".join(f"s.{_ident(c)}" for c in columns)
        updated = conn.execute(
            text(
                f"UPDATE {t} AS t SET {', '.join(sets)} FROM {s} AS s WHERE {on_key} "
                f"AND ROW({target_row}) IS DISTINCT FROM ROW({staged_row})"
            )
        ).rowcount
    all_cols = ", ".join(_ident(c) for c in (*key, *columns))
    created = conn.execute(
        text(
            f"INSERT INTO {t} ({all_cols}) SELECT {all_cols} FROM {s} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {t} AS t WHERE {on_key})"
        )
    ).rowcount
    return ImportReport(created=created, updated=updated, unchanged=staged - created - updated)
