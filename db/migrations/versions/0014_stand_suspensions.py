"""Stand suspensions: a prefixo or a driver kept from a stand (POA art. 45 § único I–II).

``kind`` ``suspension`` (the 20-day "suspensão das atividades no ponto fixo", with its dates) or
``barred`` (the auxiliar's "impossibilidade de utilizar a área do ponto fixo", open-ended
allowed); exactly one of ``vehicle_id`` and ``driver_id``; inclusive local dates.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0014'
down_revision: str | Sequence[str] | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('stand_suspensions',
    sa.Column('suspension_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=True),
    sa.Column('driver_id', sa.Text(), nullable=True),
    sa.Column('starts_on', sa.Date(), nullable=False, comment='inclusive'),
    sa.Column('ends_on', sa.Date(), nullable=True, comment='inclusive; null: open'),
    sa.Column('kind', sa.Text(), nullable=False, comment='suspension | barred'),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('process_ref', sa.Text(), nullable=True, comment='processo administrativo'),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("kind IN ('suspension', 'barred')", name=op.f('ck_stand_suspensions_kind')),
    sa.CheckConstraint('(vehicle_id IS NULL) <> (driver_id IS NULL)', name=op.f('ck_stand_suspensions_one_subject')),
    sa.CheckConstraint('ends_on IS NULL OR ends_on >= starts_on', name=op.f('ck_stand_suspensions_period_order')),
    sa.CheckConstraint("kind = 'barred' OR ends_on IS NOT NULL", name=op.f('ck_stand_suspensions_suspension_ends')),
    sa.ForeignKeyConstraint(['driver_id'], ['drivers.driver_id'], name=op.f('fk_stand_suspensions_driver_id_drivers'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['stand_id'], ['stands.stand_id'], name=op.f('fk_stand_suspensions_stand_id_stands'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['vehicle_id'], ['vehicles.vehicle_id'], name=op.f('fk_stand_suspensions_vehicle_id_vehicles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('suspension_id', name=op.f('pk_stand_suspensions'))
    )
    op.create_index(op.f('ix_stand_suspensions_driver_id'), 'stand_suspensions', ['driver_id'], unique=False)
    op.create_index(op.f('ix_stand_suspensions_stand_id'), 'stand_suspensions', ['stand_id'], unique=False)
    op.create_index(op.f('ix_stand_suspensions_vehicle_id'), 'stand_suspensions', ['vehicle_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_stand_suspensions_vehicle_id'), table_name='stand_suspensions')
    op.drop_index(op.f('ix_stand_suspensions_stand_id'), table_name='stand_suspensions')
    op.drop_index(op.f('ix_stand_suspensions_driver_id'), table_name='stand_suspensions')
    op.drop_table('stand_suspensions')
