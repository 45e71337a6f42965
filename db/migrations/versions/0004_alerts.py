"""Live alerts: detector states per vehicle, alert event time and throttled repeats.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: str | Sequence[str] | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('live_detector_states',
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('detector', sa.Text(), nullable=False),
    sa.Column('state', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('last_ts', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('vehicle_id', 'detector', name=op.f('pk_live_detector_states'))
    )
    op.create_index(op.f('ix_live_detector_states_detector'), 'live_detector_states', ['detector'], unique=False)
    op.add_column('alerts', sa.Column('event_at', sa.DateTime(timezone=True), nullable=True, comment='end of the alerted finding (event time)'))
    op.add_column('alerts', sa.Column('repeat_count', sa.Integer(), server_default=sa.text('0'), nullable=False, comment='throttled recurrences folded into this alert'))
    op.add_column('alerts', sa.Column('last_repeat_at', sa.DateTime(timezone=True), nullable=True))
    op.create_index(op.f('ix_alerts_created_at'), 'alerts', ['created_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_alerts_created_at'), table_name='alerts')
    op.drop_column('alerts', 'last_repeat_at')
    op.drop_column('alerts', 'repeat_count')
    op.drop_column('alerts', 'event_at')
    op.drop_index(op.f('ix_live_detector_states_detector'), table_name='live_detector_states')
    op.drop_table('live_detector_states')
