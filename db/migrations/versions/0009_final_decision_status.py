"""Proposals: the review state ``definitiva`` (decisão definitiva, no administrative appeal left).

Porto Alegre's fretamento decree counts for reincidence only the infractions "que sejam objeto
de decisão definitiva, de modo que não caiba mais a apresentação de recurso administrativo"
(art. 19, § 5º): the workflow records that moment (``db.enforcement.workflow.finalize``), so the
status check admits it. Downgrading refuses while a proposal is ``definitiva``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: str | Sequence[str] | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = (
    "proposta",
    "confirmada",
    "descartada",
    "notificada",
    "em_defesa",
    "defesa_deferida",
    "defesa_indeferida",
    "arquivada",
)
AFTER = (*BEFORE[:7], "definitiva", BEFORE[7])


def _check(statuses: tuple[str, ...]) -> None:
    op.drop_constraint(op.f('ck_proposals_status'), 'proposals', type_='check')
    op.create_check_constraint(
        op.f('ck_proposals_status'),
        'proposals',
        "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")",
    )


def upgrade() -> None:
    _check(AFTER)


def downgrade() -> None:
    _check(BEFORE)
