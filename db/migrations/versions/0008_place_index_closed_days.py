"""Fixes: the place index ``(h3_r9, ts)`` only on closed days, built off the write path.

Migration 0005 put it on every daily partition through a partitioned index, so every new day
built it inside its COPY import (40 % of the import's time) and the live ingest kept it up row
by row on today's partition. Place-by-time reads are of past days; partitions are now written
with their primary key only, and ``db.tracking.store.index_closed_days`` (run daily by ``pontual db
partitions``) builds each closed day's index concurrently. Here the partitioned index goes, with
every partition's (PostgreSQL cannot detach an index from its parent): the upgrade is a catalog
change only, and the next ``pontual db partitions`` rebuilds the closed days' indexes one by one
without blocking writes (until then a place query scans the day).

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
_PARTITIONS = (  # DEFAULT included: the partitioned index is valid once every partition has one
    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
    "WHERE i.inhparent = 'fixes'::regclass ORDER BY 1"
)


def upgrade() -> None:
    op.execute(f"DROP INDEX {INDEX}")  # the partitions' indexes go with it


def downgrade() -> None:
    op.execute(f"CREATE INDEX {INDEX} ON ONLY fixes (h3_r9, ts)")
    for name in op.get_bind().execute(sa.text(_PARTITIONS)).scalars():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name}_h3_r9_ts ON {name} (h3_r9, ts)")
        op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}_h3_r9_ts")
