"""Vehicles: accessibility may be unknown.

Porto Alegre's open-data fleet file has no accessibility flag: imported, its vehicles were
stored as not accessible, and the planner counted the accessible vehicles of a fleet whose
accessibility nobody knew (2 of 3,696: the two simulated ones). ``accessible`` is now null when
unknown; a fleet import without the flag keeps what is stored and leaves a new vehicle unknown.
Values stored before cannot be told apart and stay as they are.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06

"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.alter_column("vehicles", "accessible", nullable=True, comment="null: unknown")


def downgrade() -> None:
    op.execute("UPDATE vehicles SET accessible = false WHERE accessible IS NULL")
    op.alter_column("vehicles", "accessible", nullable=False, comment=None)
