"""Alerts: the revision announced of a provisional alert.

A provisional alert (a barred taxi announced while it drives) is announced again when its day
closes: settled with the closing finding, or withdrawn when the closed day does not confirm it.
``revision`` counts those announcements (0: the first); webhooks and streams carry it, so a
receiver that deduplicates by alert id tells a revision from a repeated delivery.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "alerts",
        sa.Column(
            "revision",
            sa.Integer(),
            server_default=sa.text("0"),
            nullable=False,
            comment="announcements after the first (settled or withdrawn)",
        ),
    )


def downgrade() -> None:
    op.drop_column("alerts", "revision")
