"""Fixes: drop ``h3_r12``, computed and stored with every fix and read by no query.

Stand matching covers stands with cells at its own resolution in memory; places over time use
``h3_r9`` (migration 0005). The column cost 12 bytes a row in COPY and HTTP ingest.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: str | Sequence[str] | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE fixes DROP COLUMN h3_r12")  # the partitions' columns go with it


def downgrade() -> None:
    op.execute("ALTER TABLE fixes ADD COLUMN h3_r12 bigint")  # values are not restored
