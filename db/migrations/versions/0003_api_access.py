"""API access: user accounts with roles, supervisors' stands, access tokens, GPS devices.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('users',
    sa.Column('user_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('username', sa.Text(), nullable=False),
    sa.Column('full_name', sa.Text(), nullable=True),
    sa.Column('role', sa.Text(), nullable=False),
    sa.Column('password_hash', sa.Text(), nullable=False, comment='argon2id'),
    sa.Column('disabled_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("role IN ('admin', 'planner', 'agent', 'supervisor')", name=op.f('ck_users_role')),
    sa.PrimaryKeyConstraint('user_id', name=op.f('pk_users')),
    sa.UniqueConstraint('username', name=op.f('uq_users_username'))
    )
    op.create_table('user_stands',
    sa.Column('user_id', sa.BigInteger(), nullable=False),
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['stand_id'], ['stands.stand_id'], name=op.f('fk_user_stands_stand_id_stands'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.user_id'], name=op.f('fk_user_stands_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('user_id', 'stand_id', name=op.f('pk_user_stands'))
    )
    op.create_index(op.f('ix_user_stands_stand_id'), 'user_stands', ['stand_id'], unique=False)
    op.create_table('access_tokens',
    sa.Column('token_hash', sa.Text(), nullable=False, comment='sha256 hex'),
    sa.Column('user_id', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.user_id'], name=op.f('fk_access_tokens_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_access_tokens'))
    )
    op.create_index(op.f('ix_access_tokens_user_id'), 'access_tokens', ['user_id'], unique=False)
    op.create_table('devices',
    sa.Column('device_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('token_hash', sa.Text(), nullable=False, comment='sha256 hex'),
    sa.Column('label', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('device_id', name=op.f('pk_devices')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_devices_token_hash'))
    )
    op.create_index(op.f('ix_devices_vehicle_id'), 'devices', ['vehicle_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_devices_vehicle_id'), table_name='devices')
    op.drop_table('devices')
    op.drop_index(op.f('ix_access_tokens_user_id'), table_name='access_tokens')
    op.drop_table('access_tokens')
    op.drop_index(op.f('ix_user_stands_stand_id'), table_name='user_stands')
    op.drop_table('user_stands')
    op.drop_table('users')
