"""Live queue: fixes stored by the HTTP ingest, waiting for the live detectors.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: str | Sequence[str] | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('live_queue',
    sa.Column('queue_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('ts', sa.DateTime(timezone=True), nullable=False),
    sa.Column('lat', sa.Float(precision=53), nullable=False),
    sa.Column('lon', sa.Float(precision=53), nullable=False),
    sa.Column('speed_kmh', sa.Float(precision=53), nullable=True),
    sa.Column('heading_deg', sa.Float(precision=53), nullable=True),
    sa.Column('accuracy_m', sa.Float(precision=53), nullable=True),
    sa.Column('meter', sa.Text(), nullable=True),
    sa.Column('tariff', sa.SmallInteger(), nullable=True),
    sa.Column('driver_id', sa.Text(), nullable=True),
    sa.Column('speed_flag', sa.Boolean(), nullable=False),
    sa.Column('queued_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('queue_id', name=op.f('pk_live_queue'))
    )
    op.create_index('ix_live_queue_vehicle_id_ts', 'live_queue', ['vehicle_id', 'ts'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_live_queue_vehicle_id_ts', table_name='live_queue')
    op.drop_table('live_queue')
