"""Proposals: where the appeal counts from when no defence was filed.

Porto Alegre's fretamento decree counts the appeal "da notificação do indeferimento da defesa
ou, caso não apresentada, do término do prazo desta" (art. 33); Porto Velho's law counts it from
the receipt of the notification of the penalty imposed (art. 32), with or without a defence.
The rulebook's appeal says so in ``without_defence_from = "defence_end"`` (fretamento), which
proposals copy into their stored deadlines; this adds it to the stored appeal of open
fretamento proposals, so their final decision without a defence keeps counting from the
defence period's end. Porto Velho's need nothing: without the key, the workflow waits for the
delivery of the penalty (``db.enforcement.workflow.notify_decision``).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_OPEN = "status IN ('proposta', 'confirmada', 'notificada', 'em_defesa', 'defesa_indeferida')"
_FRETAMENTO = "municipality_code = '4314902' AND service = 'fretamento'"


def upgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE proposals SET deadlines = jsonb_set(deadlines, "  # noqa: S608
            "'{appeal,without_defence_from}', '\"defence_end\"'::jsonb) "
            f"WHERE deadlines ? 'appeal' AND {_OPEN} AND {_FRETAMENTO}"
        )
    )


def downgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE proposals SET deadlines = deadlines #- '{appeal,without_defence_from}' "
            f"WHERE {_FRETAMENTO}"
        )
    )
