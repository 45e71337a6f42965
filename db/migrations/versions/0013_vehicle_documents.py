"""Vehicle documents of the registry: inspection, first alvará, substitution, Termo, category.

The ``operating_while_barred`` rule reads them live as in ``pontual analyze`` (the fleet CSV's
optional columns, ``docs/formatos.md``): the latest vistoria (Pinto Bandeira art. 32 VII; Porto
Alegre art. 57 XIV), the first alvará's issue date (Porto Velho art. 15), a provisional
substitution and the plate it replaces (fretamento art. 13), the Termo de Autorização
recolhido (fretamento art. 25 IV) and the service category (Porto Velho art. 44: airport and
district taxis are exempt from the taxímetro).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0013'
down_revision: str | Sequence[str] | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DATES = (
    ('last_inspection_on', 'latest vistoria done'),
    ('alvara_first_issued_on', 'first alvará de tráfego issued: start of the authorisation'),
    ('substitution_since', 'provisional substitute since (inclusive)'),
    ('termo_recolhido_since', 'Termo de Autorização recolhido from (inclusive)'),
    ('termo_recolhido_until', 'inclusive; null: still recolhido'),
)


def upgrade() -> None:
    for name, comment in _DATES:
        op.add_column('vehicles', sa.Column(name, sa.Date(), nullable=True, comment=comment))
    op.add_column(
        'vehicles',
        sa.Column(
            'substituted_plate', sa.Text(), nullable=True, comment='plate of the vehicle it substitutes'
        ),
    )
    op.add_column(
        'vehicles',
        sa.Column(
            'service_category',
            sa.Text(),
            nullable=True,
            comment='comum, aeroporto, distrito, acessivel',
        ),
    )
    op.create_check_constraint(
        op.f('ck_vehicles_service_category'),
        'vehicles',
        "service_category IN ('comum', 'aeroporto', 'distrito', 'acessivel')",
    )
    op.create_check_constraint(
        op.f('ck_vehicles_termo_recolhido_order'),
        'vehicles',
        'termo_recolhido_until IS NULL OR termo_recolhido_until >= termo_recolhido_since',
    )
    op.create_check_constraint(
        op.f('ck_vehicles_substituted_plate_with_since'),
        'vehicles',
        'substituted_plate IS NULL OR substitution_since IS NOT NULL',
    )


def downgrade() -> None:
    for name in (
        'ck_vehicles_substituted_plate_with_since',
        'ck_vehicles_termo_recolhido_order',
        'ck_vehicles_service_category',
    ):
        op.drop_constraint(op.f(name), 'vehicles', type_='check')
    op.drop_column('vehicles', 'service_category')
    op.drop_column('vehicles', 'substituted_plate')
    for name, _ in reversed(_DATES):
        op.drop_column('vehicles', name)
