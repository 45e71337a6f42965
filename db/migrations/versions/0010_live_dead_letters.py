"""Live detection's dead letters, and how a fix's instant was obtained.

``live_dead_letters``: one row per vehicle whose live detection failed (a detector exception, a
registry row the detectors cannot read), with the error, the range of the fixes that failed and
the retry schedule; the vehicle's fixes stay in ``live_queue``, held until a retry succeeds
(``api.live_worker``). At most one open row (``resolved_at IS NULL``) per vehicle.

``fixes.ts_origin``: NULL when the device sent the instant with its offset (or Unix time);
``naive_utc`` when an OsmAnd ``timestamp`` without offset was read as UTC (the protocol's rule);
``received`` when the device sent none and the server's receive time was used. A nullable column
without default: a catalog change on the partitioned table, no rewrite.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: str | Sequence[str] | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('live_dead_letters',
    sa.Column('dead_letter_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('first_ts', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_ts', sa.DateTime(timezone=True), nullable=True),
    sa.Column('n_fixes', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('failed_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_failed_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('next_retry_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('dead_letter_id', name=op.f('pk_live_dead_letters'))
    )
    op.create_index('ux_live_dead_letters_open', 'live_dead_letters', ['vehicle_id'], unique=True, postgresql_where=sa.text('resolved_at IS NULL'))
    op.execute("ALTER TABLE fixes ADD COLUMN ts_origin text")  # the partitions get it too


def downgrade() -> None:
    op.execute("ALTER TABLE fixes DROP COLUMN ts_origin")
    op.drop_index('ux_live_dead_letters_open', table_name='live_dead_letters', postgresql_where=sa.text('resolved_at IS NULL'))
    op.drop_table('live_dead_letters')
