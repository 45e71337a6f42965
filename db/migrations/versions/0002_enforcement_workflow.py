"""Enforcement workflow: proposal review columns, alerts and webhooks, no deletions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from geoalchemy2 import Geometry
from sqlalchemy.dialects import postgresql

STATUSES = (
    "proposta",
    "confirmada",
    "descartada",
    "notificada",
    "em_defesa",
    "defesa_deferida",
    "defesa_indeferida",
    "arquivada",
)
NO_DELETE_TABLES = ("findings", "proposals", "proposal_findings", "alerts")

NO_DELETE_SQL = """
CREATE FUNCTION refuse_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% em % não é permitido: constatações e propostas nunca são apagadas',
        TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
"""

# revision identifiers, used by Alembic.
revision: str = '0002'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW_PROPOSAL_COLUMNS = (
    sa.Column('service', sa.Text(), server_default=sa.text("'taxi'"), nullable=False),
    sa.Column('rule_key', sa.Text(), nullable=False),
    sa.Column('committed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('committed_until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('confidence', sa.Float(precision=53), nullable=False),
    sa.Column('document', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('auto_number', sa.Text(), nullable=True),
    sa.Column('agent_id', sa.Text(), nullable=True),
    sa.Column('confirmed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('dismissed_reason', sa.Text(), nullable=True),
    sa.Column('notified_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('defence_filed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
)


def upgrade() -> None:
    # No proposal was ever written before this revision: the NOT NULL columns need no backfill.
    op.execute("DELETE FROM proposal_findings")
    op.execute("DELETE FROM proposals")
    for column in _NEW_PROPOSAL_COLUMNS:
        op.add_column('proposals', column)
    op.alter_column('proposals', 'status', server_default=sa.text("'proposta'"))
    op.create_check_constraint(
        op.f('ck_proposals_status'), 'proposals',
        "status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")",
    )
    op.create_check_constraint(
        op.f('ck_proposals_committed_order'), 'proposals', 'committed_until >= committed_at'
    )
    op.create_unique_constraint(op.f('uq_proposals_auto_number'), 'proposals', ['auto_number'])
    op.create_index(op.f('ix_proposals_status'), 'proposals', ['status'], unique=False)
    op.create_index('ix_proposals_reincidence', 'proposals', ['vehicle_id', 'municipality_code', 'rule_key'], unique=False)

    op.create_table('alerts',
    sa.Column('alert_id', sa.Text(), nullable=False),
    sa.Column('finding_id', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=True),
    sa.Column('stand_id', sa.Text(), nullable=True),
    sa.Column('throttle_key', sa.Text(), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('geometry', Geometry(srid=4326, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['finding_id'], ['findings.finding_id'], name=op.f('fk_alerts_finding_id_findings')),
    sa.PrimaryKeyConstraint('alert_id', name=op.f('pk_alerts'))
    )
    op.create_index(op.f('ix_alerts_finding_id'), 'alerts', ['finding_id'], unique=False)
    op.create_index(op.f('ix_alerts_throttle_key'), 'alerts', ['throttle_key'], unique=False)
    op.create_table('webhooks',
    sa.Column('webhook_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('secret', sa.Text(), nullable=False),
    sa.Column('filters', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('active', sa.Boolean(), server_default=sa.text('true'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('webhook_id', name=op.f('pk_webhooks'))
    )
    op.create_table('webhook_deliveries',
    sa.Column('webhook_id', sa.BigInteger(), nullable=False),
    sa.Column('alert_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('pending', 'delivered', 'failed')", name=op.f('ck_webhook_deliveries_status')),
    sa.ForeignKeyConstraint(['alert_id'], ['alerts.alert_id'], name=op.f('fk_webhook_deliveries_alert_id_alerts')),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.webhook_id'], name=op.f('fk_webhook_deliveries_webhook_id_webhooks')),
    sa.PrimaryKeyConstraint('webhook_id', 'alert_id', name=op.f('pk_webhook_deliveries'))
    )

    op.execute(NO_DELETE_SQL)
    for table in NO_DELETE_TABLES:
        op.execute(
            f"CREATE TRIGGER trg_{table}_no_delete BEFORE DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
        )
        op.execute(
            f"CREATE TRIGGER trg_{table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete()"
        )


def downgrade() -> None:
    for table in NO_DELETE_TABLES:
        op.execute(f"DROP TRIGGER trg_{table}_no_delete ON {table}")
        op.execute(f"DROP TRIGGER trg_{table}_no_truncate ON {table}")
    op.execute("DROP FUNCTION refuse_delete()")
    op.drop_table('webhook_deliveries')
    op.drop_table('webhooks')
    op.drop_index(op.f('ix_alerts_throttle_key'), table_name='alerts')
    op.drop_index(op.f('ix_alerts_finding_id'), table_name='alerts')
    op.drop_table('alerts')
    op.drop_index('ix_proposals_reincidence', table_name='proposals')
    op.drop_index(op.f('ix_proposals_status'), table_name='proposals')
    op.drop_constraint(op.f('uq_proposals_auto_number'), 'proposals', type_='unique')
    op.drop_constraint(op.f('ck_proposals_committed_order'), 'proposals', type_='check')
    op.drop_constraint(op.f('ck_proposals_status'), 'proposals', type_='check')
    op.alter_column('proposals', 'status', server_default=sa.text("'pending'"))
    for column in reversed(_NEW_PROPOSAL_COLUMNS):
        op.drop_column('proposals', column.name)
