"""Drivers: CNH number and category, a demo flag, and the CNH / ICTP status history.

``driver_document_periods`` keeps each status of a driver's CNH or ICTP (Registro de Condutor)
over inclusive local dates (``regular``, ``suspensa``, ``cassada``); two periods of the same
document never overlap. ``drivers.synthetic`` marks demo drivers (not real people). The findings'
kind check admits ``driver_not_allowed``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

_KINDS_BEFORE = (
    'unlicensed_stand_use', 'habitual_absence', 'illegal_stand_formation', 'longer_route',
    'tracking_gap', 'gps_anomaly', 'operating_while_barred', 'inactivity', 'outside_municipality',
    'queue_jump', 'flag2_misuse',
)
_KINDS_AFTER = (*_KINDS_BEFORE, 'driver_not_allowed')


def _kind_check(kinds: tuple[str, ...]) -> None:
    op.drop_constraint(op.f('ck_findings_kind'), 'findings', type_='check')
    quoted = ', '.join(f"'{k}'" for k in kinds)
    op.create_check_constraint(op.f('ck_findings_kind'), 'findings', f'kind IN ({quoted})')


# revision identifiers, used by Alembic.
revision: str = '0012'
down_revision: str | Sequence[str] | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('drivers', sa.Column('cnh_number', sa.Text(), nullable=True))
    op.add_column('drivers', sa.Column('cnh_category', sa.Text(), nullable=True))
    op.add_column(
        'drivers',
        sa.Column(
            'synthetic',
            sa.Boolean(),
            server_default=sa.text('false'),
            nullable=False,
            comment='demo data: not a real person',
        ),
    )
    op.alter_column(
        'drivers',
        'credential_valid_until',
        existing_type=sa.Date(),
        comment='ICTP / Registro de Condutor, inclusive',
        existing_nullable=True,
    )
    op.create_table('driver_document_periods',
    sa.Column('period_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('driver_id', sa.Text(), nullable=False),
    sa.Column('document', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('valid_from', sa.Date(), nullable=True, comment='inclusive; null: unknown'),
    sa.Column('valid_until', sa.Date(), nullable=True, comment='inclusive; null: open'),
    postgresql.ExcludeConstraint((sa.column('driver_id'), '='), (sa.column('document'), '='), (sa.text("daterange(valid_from, valid_until, '[]')"), '&&'), using='gist', name='ex_driver_document_periods_overlap'),
    sa.CheckConstraint("document IN ('cnh', 'ictp')", name=op.f('ck_driver_document_periods_document')),
    sa.CheckConstraint("status IN ('regular', 'suspensa', 'cassada')", name=op.f('ck_driver_document_periods_status')),
    sa.CheckConstraint('valid_until IS NULL OR valid_until >= valid_from', name=op.f('ck_driver_document_periods_period_order')),
    sa.ForeignKeyConstraint(['driver_id'], ['drivers.driver_id'], name=op.f('fk_driver_document_periods_driver_id_drivers'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('period_id', name=op.f('pk_driver_document_periods'))
    )
    op.create_index(op.f('ix_driver_document_periods_driver_id'), 'driver_document_periods', ['driver_id'], unique=False)
    _kind_check(_KINDS_AFTER)


def downgrade() -> None:
    op.execute("DELETE FROM findings WHERE kind = 'driver_not_allowed'")
    _kind_check(_KINDS_BEFORE)
    op.drop_index(op.f('ix_driver_document_periods_driver_id'), table_name='driver_document_periods')
    op.drop_table('driver_document_periods')
    op.alter_column(
        'drivers',
        'credential_valid_until',
        existing_type=sa.Date(),
        comment=None,
        existing_nullable=True,
    )
    op.drop_column('drivers', 'synthetic')
    op.drop_column('drivers', 'cnh_category')
    op.drop_column('drivers', 'cnh_number')
