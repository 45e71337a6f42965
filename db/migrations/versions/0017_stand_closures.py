"""Stand suspensions: kind ``closed``, the whole stand closed by the municipality.

"Interdição do ponto" (road works, an event): no prefixo nor driver, ``ends_on`` optional (open
closure). ``suspension`` and ``barred`` keep their rules: exactly one of ``vehicle_id`` and
``driver_id``; only ``barred`` (now also ``closed``) may be open-ended. The downgrade deletes the
closures (the old constraints cannot hold them).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0017'
down_revision: str | Sequence[str] | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = 'stand_suspensions'
CHECKS = ('kind', 'one_subject', 'suspension_ends')
NEW = {
    'kind': "kind IN ('suspension', 'barred', 'closed')",
    'one_subject': (
        "CASE WHEN kind = 'closed' THEN vehicle_id IS NULL AND driver_id IS NULL "
        "ELSE (vehicle_id IS NULL) <> (driver_id IS NULL) END"
    ),
    'suspension_ends': "kind IN ('barred', 'closed') OR ends_on IS NOT NULL",
}
OLD = {
    'kind': "kind IN ('suspension', 'barred')",
    'one_subject': '(vehicle_id IS NULL) <> (driver_id IS NULL)',
    'suspension_ends': "kind = 'barred' OR ends_on IS NOT NULL",
}


def _replace_checks(checks: dict[str, str]) -> None:
    for name in CHECKS:
        op.drop_constraint(op.f(f'ck_{TABLE}_{name}'), TABLE, type_='check')
        op.create_check_constraint(op.f(f'ck_{TABLE}_{name}'), TABLE, checks[name])


def upgrade() -> None:
    _replace_checks(NEW)
    op.alter_column(TABLE, 'kind', existing_type=sa.Text(), existing_nullable=False,
                    comment='suspension | barred | closed',
                    existing_comment='suspension | barred')


def downgrade() -> None:
    op.execute(sa.text(f"DELETE FROM {TABLE} WHERE kind = 'closed'"))
    _replace_checks(OLD)
    op.alter_column(TABLE, 'kind', existing_type=sa.Text(), existing_nullable=False,
                    comment='suspension | barred',
                    existing_comment='suspension | barred | closed')
