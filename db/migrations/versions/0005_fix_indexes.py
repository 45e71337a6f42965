"""Fixes: btree (h3_r9, ts) on every daily partition, chosen by bench/bench_fix_indexes.py.

H3 cell x time ("who passed this place") goes from a scan of the day's partition to an index
range (2M fixes: 133 -> 3.5 ms median); vehicle x time is already served by the primary key
(vehicle_id, ts); BRIN on ts does not pay (COPY writes a day vehicle by vehicle, so ts is not
correlated with the physical order) and neither does GiST (spatial queries go through H3 cells).
The index is created per partition and attached to a partitioned index, so partitions made later
(ensure_fix_partitions, COPY into new days) get theirs at CREATE/ATTACH.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = 'ix_fixes_h3_r9_ts'


def upgrade() -> None:
    op.execute(f"CREATE INDEX {INDEX} ON ONLY fixes (h3_r9, ts)")
    partitions = op.get_bind().execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'fixes'::regclass ORDER BY 1"
        )
    ).scalars().all()
    for name in partitions:
        op.execute(f"CREATE INDEX {name}_h3_r9_ts ON {name} (h3_r9, ts)")
        op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {name}_h3_r9_ts")


def downgrade() -> None:
    op.execute(f"DROP INDEX {INDEX}")  # the partitions' indexes go with it
