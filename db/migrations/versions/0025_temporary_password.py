"""Users: a temporary password must be changed at the next login.

An account created or reset in the console with a temporary password kept it for good: the
admin who read it out could still log in as that person, and their audit entries could not be
told apart. ``password_temporary`` is set when the console draws the password and cleared when
the user sets their own (``/conta/senha``); until then the console asks for it and the API
refuses the account's tokens.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "users",
        sa.Column(
            "password_temporary",
            sa.Boolean(),
            server_default=sa.false(),
            nullable=False,
            comment="drawn by the console: the user must set their own at the next login",
        ),
    )


def downgrade() -> None:
    op.drop_column("users", "password_temporary")
