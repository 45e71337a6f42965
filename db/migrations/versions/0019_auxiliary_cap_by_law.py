"""The cap on auxiliares is each municipality's law, checked by the registry's writers.

The trigger of 0001 refused a third auxiliar on every prefixo; Porto Alegre's decree sets no
cap, so it refused links the law allows. ``db.fleet.store.check_link_limits`` now applies
the cap of the prefixo's municipality (the rulebooks' ``[auxiliaries]``), with the prefixo's
row locked (``auxiliary_caps``) as the trigger did.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05

"""

import importlib
from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0019'
down_revision: str | Sequence[str] | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "DROP TRIGGER IF EXISTS trg_driver_assignments_auxiliary_limit ON driver_assignments"
    )
    op.execute("DROP FUNCTION IF EXISTS check_auxiliary_driver_limit()")


def downgrade() -> None:
    initial = importlib.import_module("db.migrations.versions.0001_initial_schema")
    op.execute(initial.AUXILIARY_LIMIT_SQL)
