"""Pickups per closed day: the planner's demand reads them, not every fix of the window.

``pickups`` holds each ride's start (a fix with the meter on whose fix before was not) of the
closed UTC days listed in ``pickup_days``; ``pontual db partitions`` builds them
(``db.tracking.pickups``). Nothing to move on upgrade: the next run builds the closed days.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0018'
down_revision: str | Sequence[str] | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('pickups',
    sa.Column('vehicle_id', sa.Text(collation='C'), nullable=False),
    sa.Column('ts', sa.DateTime(timezone=True), nullable=False),
    sa.Column('lat', sa.Float(precision=53), nullable=False),
    sa.Column('lon', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('vehicle_id', 'ts', name=op.f('pk_pickups'))
    )
    op.create_index(op.f('ix_pickups_ts'), 'pickups', ['ts'], unique=False)
    op.create_table('pickup_days',
    sa.Column('day', sa.Date(), nullable=False, comment='UTC day'),
    sa.Column('built_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('day', name=op.f('pk_pickup_days'))
    )


def downgrade() -> None:
    op.drop_table('pickup_days')
    op.drop_index(op.f('ix_pickups_ts'), table_name='pickups')
    op.drop_table('pickups')
