"""Quarantine: device tokens removed from the requests kept whole.

An OsmAnd request quarantined whole (a parameter given two values, a JSON body without
``location``) kept its parameters, the device token among them (``id``, ``consulta.id``, a
body's ``device_id``), and the console's quarantine page showed it: a credential for whoever read
the page or a backup. The route now drops them (:func:`api.routes.osmand._without_tokens`);
this masks those already stored (a device token is ``pd`` and 32 hexadecimal digits).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07

"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "UPDATE rejected_fixes "
        "SET raw = regexp_replace(raw::text, 'pd[0-9a-f]{32}', '***', 'g')::jsonb "
        "WHERE raw::text ~ 'pd[0-9a-f]{32}'"
    )


def downgrade() -> None:
    """The tokens masked are not restored."""
