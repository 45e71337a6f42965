"""Indexes of the enforcement agent's proposal queue (the web console's ``/fiscal/propostas``).

The queue lists proposals newest first under filters (kind, status, stand, vehicle, period,
confidence) and counts them per status and per kind. Without these, each of its three queries
read the whole table, whose rows are wide (the law's excerpt, the document JSON): with 50,000
proposals a page took up to 0.4 s. ``ix_proposals_queue_order`` gives the order (and the period
filter); ``ix_proposals_kind_committed`` and ``ix_proposals_stand_committed`` (on
``document ->> 'stand_id'``) the kind and stand filters in that order; ``ix_proposals_facets``
lets the counts scan a narrow index instead of the rows (``bench/bench_web_queue.py``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: str | Sequence[str] | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_proposals_queue_order', 'proposals', ['committed_at', 'proposal_id'])
    op.create_index('ix_proposals_kind_committed', 'proposals', ['kind', 'committed_at'])
    op.create_index(
        'ix_proposals_stand_committed',
        'proposals',
        [sa.text("(document ->> 'stand_id')"), 'committed_at'],
    )
    op.create_index(
        'ix_proposals_facets', 'proposals', ['status', 'kind', 'committed_at', 'confidence']
    )


def downgrade() -> None:
    op.drop_index('ix_proposals_facets', table_name='proposals')
    op.drop_index('ix_proposals_stand_committed', table_name='proposals')
    op.drop_index('ix_proposals_kind_committed', table_name='proposals')
    op.drop_index('ix_proposals_queue_order', table_name='proposals')
