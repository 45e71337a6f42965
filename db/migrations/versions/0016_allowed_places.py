"""Allowed places: areas outside the stands where a taxi may wait (PB art. 20 VII).

Waiting there is not ``illegal_stand_formation``; ``pontual import allowed-places`` keeps the
current list (areas the file omits are retired).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from geoalchemy2 import Geometry

# revision identifiers, used by Alembic.
revision: str = '0016'
down_revision: str | Sequence[str] | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_geospatial_table('allowed_places',
    sa.Column('place_id', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=True),
    sa.Column('geometry', Geometry(geometry_type='MULTIPOLYGON', srid=4326, dimension=2, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry', nullable=False), nullable=False),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('place_id', name=op.f('pk_allowed_places'))
    )
    op.create_geospatial_index('idx_allowed_places_geometry', 'allowed_places', ['geometry'], unique=False, postgresql_using='gist', postgresql_ops={})


def downgrade() -> None:
    op.drop_geospatial_index('idx_allowed_places_geometry', table_name='allowed_places', postgresql_using='gist', column_name='geometry')
    op.drop_geospatial_table('allowed_places')
