"""Proposals: the date the accused was notified of the decision on the defence.

Porto Alegre's fretamento decree counts the appeal from "a notificação do indeferimento da
defesa" (art. 33) and the fine's payment from "a Notificação por Aplicação de Penalidade" (art.
32, parágrafo único); Porto Velho's law counts the appeal from "a data do recebimento da
notificação válida" (art. 32). The workflow records that delivery
(``db.enforcement.workflow.notify_decision``) and counts those periods from it. The step is
also in the audit log (``notify_decision``, its ``step_at``), which the downgrade keeps.

Proposals still open (not final, dismissed nor archived) of those two rulebooks get the new
starts in their stored deadlines, their due dates cleared (set again when the delivery is
recorded): fretamento's appeal and payment from the delivery, Porto Velho's appeal from it and
its payment from the end of the appeal (no computed date). Their documents then never print
the earlier dates counted from the decision.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_OPEN = "status IN ('proposta', 'confirmada', 'notificada', 'em_defesa', 'defesa_indeferida')"
_FRETAMENTO = "municipality_code = '4314902' AND service = 'fretamento'"
_PORTO_VELHO = "municipality_code = '1100205' AND service = 'taxi'"
_STARTS = (
    ("appeal", "decision_notification", _FRETAMENTO),
    ("payment", "decision_notification", _FRETAMENTO),
    ("appeal", "decision_notification", _PORTO_VELHO),
    ("payment", "appeal_end", _PORTO_VELHO),
)
"""(deadline, its new start, the rulebook's proposals) of the laws counted from the delivery."""


def _restart(deadline: str, old: str, new: str, which: str) -> None:
    op.execute(
        sa.text(
            "UPDATE proposals SET deadlines = jsonb_set(jsonb_set(deadlines, "  # noqa: S608
            f"'{{{deadline},from}}', to_jsonb(CAST(:new AS text))), '{{{deadline},due}}', "
            f"'null'::jsonb) WHERE deadlines->'{deadline}'->>'from' = :old AND {_OPEN} "
            f"AND {which}"
        ).bindparams(new=new, old=old)
    )


def upgrade() -> None:
    op.add_column(
        "proposals", sa.Column("decision_notified_at", sa.DateTime(timezone=True), nullable=True)
    )
    for deadline, start, which in _STARTS:
        _restart(deadline, "decision", start, which)


def downgrade() -> None:
    for deadline, start, which in _STARTS:
        _restart(deadline, start, "decision", which)
    op.drop_column("proposals", "decision_notified_at")
