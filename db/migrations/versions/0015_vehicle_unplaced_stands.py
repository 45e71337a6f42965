"""Vehicles: the stands a fleet import named for a licence but could not place.

A licence for a stand the registry does not know (another code, a name that matches no stand)
is not stored; the vehicle's licences are then not known, and its boardings are not judged as
without a licence (``tracking.detectors.unlicensed_stand_use``, ``unplaced_stands``).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = '0015'
down_revision: str | Sequence[str] | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('vehicles', sa.Column('unplaced_stands', postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'"), nullable=False, comment='stands the latest fleet import named for a licence but could not place'))


def downgrade() -> None:
    op.drop_column('vehicles', 'unplaced_stands')
