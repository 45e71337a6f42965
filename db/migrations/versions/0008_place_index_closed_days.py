"""Fixes: the place index ``(h3_r9, ts)`` only on closed days, built off the write path.

Migration 0005 put it on every daily partition through a partitioned index, so every new day
built it inside its COPY import (40 % of the import's time) and the live ingest kept it up row
by row on today's partition. Place-by-time reads are of past days; partitions are now written
with their primary key only, and ``tracking.store.index_closed_days`` (run daily by ``pontual db
partitions``) builds each closed day's index concurrently. Here: the partitioned index goes
(with today's and later days' indexes); the closed days get their own at once.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: str | Sequence[str] | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = 'ix_fixes_h3_r9_ts'
_PARTITIONS = (
    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
    "WHERE i.inhparent = 'fixes'::regclass AND c.relname ~ '^fixes_p[0-9]{8}$' ORDER BY 1"
)


def _partitions(*, closed: bool) -> list[str]:
    query = _PARTITIONS
    if closed:  # the name's UTC day is before today's
        query = _PARTITIONS.replace(
            "ORDER BY 1",
            "AND to_date(substr(c.relname, 8), 'YYYYMMDD') < (now() AT TIME ZONE 'UTC')::date "
            "ORDER BY 1",
        )
    return list(op.get_bind().execute(sa.text(query)).scalars())


def upgrade() -> None:
    op.execute(f"DROP INDEX {INDEX}")  # the partitions' indexes go with it
    for name in _partitions(closed=True):
        op.execute(f"CREATE INDEX {name}_h3_r9_ts ON {name} (h3_r9, ts)")


def downgrade() -> None:
    op.execute(f"CREATE INDEX {INDEX} ON ONLY fixes (h3_r9, ts)")
    for name in _partitions(closed=False):
        op.execute(f"CREATE INDEX IF NOT EXISTS {name}_h3_r9_ts ON {name} (h3_r9, ts)")
        op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}_h3_r9_ts")
