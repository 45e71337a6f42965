"""Usernames are unique whatever their case: ``DEMO_ADMIN`` is ``demo_admin``.

The unique constraint of 0003 is on the raw ``username``, so two accounts could differ only in
case, each with its own password, while the failed-login quota (case-folded) locked both. A
unique index on ``lower(username)`` now refuses the second spelling; login finds the account
whatever the case typed (:func:`api.accounts.authenticate`).

Accounts that already collide are not merged (each has its own password, role and audit
trail): the oldest of each group keeps its name; each other one is renamed ``<name>.<id>``,
disabled and its tokens revoked, with an audit entry (``rename``, by ``sistema``) saying why.
An administrator sees them in ``pontual users list``.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05

"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "uq_users_username_lower"


def upgrade() -> None:
    bind = op.get_bind()
    renamed = bind.execute(
        sa.text(
            "WITH ranked AS ("
            "  SELECT user_id, username, row_number() OVER ("
            "    PARTITION BY lower(username) ORDER BY created_at, user_id) AS k FROM users"
            ") UPDATE users u SET username = r.username || '.' || r.user_id, "
            "  disabled_at = coalesce(u.disabled_at, now()) "
            "FROM ranked r WHERE r.user_id = u.user_id AND r.k > 1 "
            "RETURNING u.user_id, r.username, u.username"
        )
    ).all()
    for user_id, before, after in renamed:
        bind.execute(
            sa.text(
                "UPDATE access_tokens SET revoked_at = now() "
                "WHERE user_id = :u AND revoked_at IS NULL"
            ),
            {"u": user_id},
        )
        bind.execute(
            sa.text(
                "INSERT INTO audit_log (actor, action, entity, entity_id, details) "
                "VALUES ('sistema', 'rename', 'users', :u, CAST(:d AS jsonb))"
            ),
            {
                "u": str(user_id),
                "d": json.dumps(
                    {
                        "before": before,
                        "after": after,
                        "reason": "nome igual ao de uma conta mais antiga, salvo maiúsculas e "
                        "minúsculas (migração 0020): conta desativada e renomeada",
                    },
                    ensure_ascii=False,
                ),
            },
        )
    op.create_index(INDEX, "users", [sa.text("lower(username)")], unique=True)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="users")
