"""Initial schema: registry, stands, partitioned fixes, legal layer, triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from geoalchemy2 import Geometry
from sqlalchemy.dialects import postgresql

# The auxiliary-driver rule (PV art. 43 §1; PB art. 14): at no date may a prefixo have more than
# two auxiliary drivers. Checked at each date where an overlapping assignment starts.
AUXILIARY_LIMIT_SQL = """
CREATE FUNCTION check_auxiliary_driver_limit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    new_range daterange := daterange(NEW.valid_from, NEW.valid_until, '[]');
    peak integer;
BEGIN
    IF NEW.role <> 'auxiliar' THEN
        RETURN NEW;
    END IF;
    -- serialise concurrent assignments to the same prefixo
    PERFORM 1 FROM vehicles WHERE vehicle_id = NEW.vehicle_id FOR UPDATE;
    WITH others AS (
        SELECT daterange(a.valid_from, a.valid_until, '[]') AS r
        FROM driver_assignments a
        WHERE a.vehicle_id = NEW.vehicle_id
          AND a.role = 'auxiliar'
          AND a.assignment_id IS DISTINCT FROM NEW.assignment_id
          AND daterange(a.valid_from, a.valid_until, '[]') && new_range
    ), instants AS (
        SELECT NEW.valid_from AS d
        UNION
        SELECT lower(r) FROM others WHERE new_range @> lower(r)
    )
    SELECT coalesce(max((SELECT count(*) FROM others o WHERE o.r @> i.d)), 0) INTO peak
    FROM instants i;
    IF peak >= 2 THEN
        RAISE EXCEPTION
            'o prefixo % teria mais de 2 condutores auxiliares ao mesmo tempo (a partir de %); '
            'limite do art. 43 §1 (Porto Velho) e art. 14 (Pinto Bandeira)',
            NEW.vehicle_id, NEW.valid_from
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER trg_driver_assignments_auxiliary_limit
    BEFORE INSERT OR UPDATE ON driver_assignments
    FOR EACH ROW EXECUTE FUNCTION check_auxiliary_driver_limit();
"""

AUDIT_APPEND_ONLY_SQL = """
CREATE FUNCTION audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'o registro de auditoria só aceita inclusões: % não é permitido', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER trg_audit_log_no_change
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER trg_audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
"""

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS postgis")
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.create_table('audit_log',
    sa.Column('entry_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('actor', sa.Text(), nullable=False),
    sa.Column('action', sa.Text(), nullable=False),
    sa.Column('entity', sa.Text(), nullable=False),
    sa.Column('entity_id', sa.Text(), nullable=True),
    sa.Column('details', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.PrimaryKeyConstraint('entry_id', name=op.f('pk_audit_log'))
    )
    op.create_geospatial_table('findings',
    sa.Column('finding_id', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=True),
    sa.Column('stand_id', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('confidence', sa.Float(precision=53), nullable=False),
    sa.Column('details', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('geometry', Geometry(srid=4326, dimension=2, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("kind IN ('unlicensed_stand_use', 'habitual_absence', 'illegal_stand_formation', 'longer_route', 'tracking_gap', 'gps_anomaly', 'operating_while_barred', 'inactivity', 'outside_municipality', 'queue_jump', 'flag2_misuse')", name=op.f('ck_findings_kind')),
    sa.CheckConstraint('confidence BETWEEN 0 AND 1', name=op.f('ck_findings_confidence_range')),
    sa.CheckConstraint('ended_at >= started_at', name=op.f('ck_findings_interval_order')),
    sa.PrimaryKeyConstraint('finding_id', name=op.f('pk_findings'))
    )
    op.create_geospatial_index('idx_findings_geometry', 'findings', ['geometry'], unique=False, postgresql_using='gist', postgresql_ops={})
    op.create_index(op.f('ix_findings_kind'), 'findings', ['kind'], unique=False)
    op.create_index(op.f('ix_findings_vehicle_id'), 'findings', ['vehicle_id'], unique=False)
    op.create_geospatial_table('fixes',
    sa.Column('vehicle_id', sa.Text(collation='C'), nullable=False),
    sa.Column('ts', sa.DateTime(timezone=True), nullable=False),
    sa.Column('lat', sa.Float(precision=53), nullable=False),
    sa.Column('lon', sa.Float(precision=53), nullable=False),
    sa.Column('geom', Geometry(geometry_type='POINT', srid=4326, dimension=2, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry', nullable=False), nullable=False),
    sa.Column('speed_kmh', sa.Float(precision=53), nullable=True),
    sa.Column('heading_deg', sa.Float(precision=53), nullable=True),
    sa.Column('accuracy_m', sa.Float(precision=53), nullable=True),
    sa.Column('meter', sa.Text(), nullable=True),
    sa.Column('tariff', sa.SmallInteger(), nullable=True),
    sa.Column('driver_id', sa.Text(), nullable=True),
    sa.Column('h3_r9', sa.BigInteger(), nullable=True),
    sa.Column('h3_r12', sa.BigInteger(), nullable=True),
    sa.Column('speed_flag', sa.Boolean(), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.CheckConstraint("meter IN ('free', 'occupied', 'off')", name=op.f('ck_fixes_meter')),
    sa.CheckConstraint('lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180', name=op.f('ck_fixes_lat_lon')),
    sa.CheckConstraint('tariff IN (1, 2)', name=op.f('ck_fixes_tariff')),
    sa.PrimaryKeyConstraint('vehicle_id', 'ts', name=op.f('pk_fixes')),
    postgresql_partition_by='RANGE (ts)'
    )
    # Daily partitions (fixes_pYYYYMMDD) are added by db.tracking.store.ensure_fix_partitions;
    # whatever falls outside them lands here and is never lost.
    op.execute("CREATE TABLE fixes_default PARTITION OF fixes DEFAULT")
    op.create_geospatial_table('municipalities',
    sa.Column('code', sa.String(length=7), nullable=False, comment='IBGE code, 7 digits'),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('uf', sa.String(length=2), nullable=False),
    sa.Column('timezone', sa.Text(), nullable=True, comment='IANA zone; null when not known'),
    sa.Column('boundary', Geometry(geometry_type='MULTIPOLYGON', srid=4326, dimension=2, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry'), nullable=True),
    sa.CheckConstraint("code ~ '^[0-9]{7}$'", name=op.f('ck_municipalities_code_digits')),
    sa.PrimaryKeyConstraint('code', name=op.f('pk_municipalities'))
    )
    op.create_geospatial_index('idx_municipalities_boundary', 'municipalities', ['boundary'], unique=False, postgresql_using='gist', postgresql_ops={})
    op.create_table('rejected_fixes',
    sa.Column('rejected_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('row', sa.BigInteger(), nullable=True, comment='1-based data row of the source'),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('raw', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('rejected_id', name=op.f('pk_rejected_fixes'))
    )
    op.create_index(op.f('ix_rejected_fixes_source'), 'rejected_fixes', ['source'], unique=False)
    op.create_table('drivers',
    sa.Column('driver_id', sa.Text(), nullable=False, comment='municipal id'),
    sa.Column('municipality_code', sa.String(length=7), nullable=True),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('cpf', sa.String(length=11), nullable=True),
    sa.Column('cnh_valid_until', sa.Date(), nullable=True),
    sa.Column('credential_valid_until', sa.Date(), nullable=True),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_drivers_municipality_code_municipalities')),
    sa.PrimaryKeyConstraint('driver_id', name=op.f('pk_drivers'))
    )
    op.create_table('municipal_populations',
    sa.Column('municipality_code', sa.String(length=7), nullable=False),
    sa.Column('year', sa.SmallInteger(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('population', sa.Integer(), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.CheckConstraint("kind IN ('census', 'estimate')", name=op.f('ck_municipal_populations_kind')),
    sa.CheckConstraint('population >= 0', name=op.f('ck_municipal_populations_population_non_negative')),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_municipal_populations_municipality_code_municipalities'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('municipality_code', 'year', 'kind', name=op.f('pk_municipal_populations'))
    )
    op.create_table('permit_holders',
    sa.Column('holder_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('municipality_code', sa.String(length=7), nullable=True),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('cpf', sa.String(length=11), nullable=True),
    sa.Column('phone', sa.Text(), nullable=True),
    sa.Column('email', sa.Text(), nullable=True),
    sa.Column('address', sa.Text(), nullable=True),
    sa.CheckConstraint("cpf ~ '^[0-9]{11}$'", name=op.f('ck_permit_holders_cpf_digits')),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_permit_holders_municipality_code_municipalities')),
    sa.PrimaryKeyConstraint('holder_id', name=op.f('pk_permit_holders')),
    sa.UniqueConstraint('cpf', name=op.f('uq_permit_holders_cpf'))
    )
    op.create_table('proposals',
    sa.Column('proposal_id', sa.Text(), nullable=False),
    sa.Column('municipality_code', sa.String(length=7), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=True),
    sa.Column('article', sa.Text(), nullable=False),
    sa.Column('inciso', sa.Text(), nullable=True),
    sa.Column('paragraph', sa.Text(), nullable=True),
    sa.Column('provision', sa.Text(), nullable=False),
    sa.Column('excerpt', sa.Text(), nullable=False),
    sa.Column('gravity', sa.Text(), nullable=True),
    sa.Column('penalty', sa.Text(), nullable=True),
    sa.Column('measure', sa.Text(), nullable=True),
    sa.Column('pontuacao', sa.Text(), nullable=True),
    sa.Column('fine_amount', sa.Numeric(precision=14, scale=2), nullable=True),
    sa.Column('fine_unit', sa.Text(), nullable=True),
    sa.Column('reincidence_count', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('deadlines', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("fine_unit IN ('UFM', 'BRL', 'UPF')", name=op.f('ck_proposals_fine_unit')),
    sa.CheckConstraint('(fine_amount IS NULL) = (fine_unit IS NULL)', name=op.f('ck_proposals_fine_amount_with_unit')),
    sa.CheckConstraint('reincidence_count >= 0', name=op.f('ck_proposals_reincidence_non_negative')),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_proposals_municipality_code_municipalities')),
    sa.PrimaryKeyConstraint('proposal_id', name=op.f('pk_proposals'))
    )
    op.create_index(op.f('ix_proposals_vehicle_id'), 'proposals', ['vehicle_id'], unique=False)
    op.create_geospatial_table('stands',
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.Column('municipality_code', sa.String(length=7), nullable=True),
    sa.Column('name', sa.Text(), nullable=True),
    sa.Column('address', sa.Text(), nullable=True),
    sa.Column('phone', sa.Text(), nullable=True),
    sa.Column('order_number', sa.Integer(), nullable=True),
    sa.Column('kind', sa.Text(), nullable=True, comment='fixo | livre; null when unknown'),
    sa.Column('capacity', sa.Integer(), nullable=True, comment='spaces'),
    sa.Column('geometry', Geometry(geometry_type='MULTIPOLYGON', srid=4326, dimension=2, spatial_index=False, from_text='ST_GeomFromEWKT', name='geometry'), nullable=True),
    sa.Column('radius_m', sa.Float(), nullable=True, comment='radius the area was buffered with, when the source gave a point'),
    sa.Column('location_note', sa.Text(), nullable=True, comment='why the geometry is missing or approximate'),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("kind IN ('fixo', 'livre')", name=op.f('ck_stands_kind')),
    sa.CheckConstraint('capacity IS NULL OR capacity >= 0', name=op.f('ck_stands_capacity_non_negative')),
    sa.CheckConstraint('radius_m IS NULL OR radius_m > 0', name=op.f('ck_stands_radius_positive')),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_stands_municipality_code_municipalities')),
    sa.PrimaryKeyConstraint('stand_id', name=op.f('pk_stands'))
    )
    op.create_geospatial_index('idx_stands_geometry', 'stands', ['geometry'], unique=False, postgresql_using='gist', postgresql_ops={})
    op.create_index(op.f('ix_stands_municipality_code'), 'stands', ['municipality_code'], unique=False)
    op.create_table('proposal_findings',
    sa.Column('proposal_id', sa.Text(), nullable=False),
    sa.Column('finding_id', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['finding_id'], ['findings.finding_id'], name=op.f('fk_proposal_findings_finding_id_findings')),
    sa.ForeignKeyConstraint(['proposal_id'], ['proposals.proposal_id'], name=op.f('fk_proposal_findings_proposal_id_proposals'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('proposal_id', 'finding_id', name=op.f('pk_proposal_findings'))
    )
    op.create_index(op.f('ix_proposal_findings_finding_id'), 'proposal_findings', ['finding_id'], unique=False)
    op.create_table('stand_supervisors',
    sa.Column('supervisor_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.Column('person_name', sa.Text(), nullable=False),
    sa.Column('elected_on', sa.Date(), nullable=False),
    sa.Column('minutes_ref', sa.Text(), nullable=True, comment='ata of the election'),
    sa.Column('homologated_on', sa.Date(), nullable=True),
    sa.Column('until', sa.Date(), nullable=True, comment='inclusive'),
    sa.ForeignKeyConstraint(['stand_id'], ['stands.stand_id'], name=op.f('fk_stand_supervisors_stand_id_stands'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('supervisor_id', name=op.f('pk_stand_supervisors'))
    )
    op.create_index(op.f('ix_stand_supervisors_stand_id'), 'stand_supervisors', ['stand_id'], unique=False)
    op.create_table('vehicles',
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('prefixo', sa.Text(), nullable=False),
    sa.Column('municipality_code', sa.String(length=7), nullable=True),
    sa.Column('holder_id', sa.BigInteger(), nullable=True),
    sa.Column('plate', sa.Text(), nullable=True),
    sa.Column('make', sa.Text(), nullable=True),
    sa.Column('model', sa.Text(), nullable=True),
    sa.Column('year', sa.SmallInteger(), nullable=True, comment='year of manufacture'),
    sa.Column('fuel', sa.Text(), nullable=True),
    sa.Column('first_registered_on', sa.Date(), nullable=True),
    sa.Column('accessible', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('alvara_valid_until', sa.Date(), nullable=True),
    sa.Column('inspection_valid_until', sa.Date(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['holder_id'], ['permit_holders.holder_id'], name=op.f('fk_vehicles_holder_id_permit_holders')),
    sa.ForeignKeyConstraint(['municipality_code'], ['municipalities.code'], name=op.f('fk_vehicles_municipality_code_municipalities')),
    sa.PrimaryKeyConstraint('vehicle_id', name=op.f('pk_vehicles')),
    sa.UniqueConstraint('municipality_code', 'prefixo', name='uq_vehicles_municipality_prefixo')
    )
    op.create_table('driver_assignments',
    sa.Column('assignment_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('driver_id', sa.Text(), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('role', sa.Text(), nullable=False),
    sa.Column('valid_from', sa.Date(), nullable=False),
    sa.Column('valid_until', sa.Date(), nullable=True, comment='inclusive'),
    sa.CheckConstraint("role IN ('autorizatario_condutor', 'auxiliar')", name=op.f('ck_driver_assignments_role')),
    sa.CheckConstraint('valid_until IS NULL OR valid_until >= valid_from', name=op.f('ck_driver_assignments_period_order')),
    sa.ForeignKeyConstraint(['driver_id'], ['drivers.driver_id'], name=op.f('fk_driver_assignments_driver_id_drivers')),
    sa.ForeignKeyConstraint(['vehicle_id'], ['vehicles.vehicle_id'], name=op.f('fk_driver_assignments_vehicle_id_vehicles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('assignment_id', name=op.f('pk_driver_assignments'))
    )
    op.create_index(op.f('ix_driver_assignments_driver_id'), 'driver_assignments', ['driver_id'], unique=False)
    op.create_index(op.f('ix_driver_assignments_vehicle_id'), 'driver_assignments', ['vehicle_id'], unique=False)
    op.create_table('licence_exclusions',
    sa.Column('exclusion_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.Column('excluded_on', sa.Date(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['stand_id'], ['stands.stand_id'], name=op.f('fk_licence_exclusions_stand_id_stands')),
    sa.ForeignKeyConstraint(['vehicle_id'], ['vehicles.vehicle_id'], name=op.f('fk_licence_exclusions_vehicle_id_vehicles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('exclusion_id', name=op.f('pk_licence_exclusions'))
    )
    op.create_index(op.f('ix_licence_exclusions_stand_id'), 'licence_exclusions', ['stand_id'], unique=False)
    op.create_index(op.f('ix_licence_exclusions_vehicle_id'), 'licence_exclusions', ['vehicle_id'], unique=False)
    op.create_table('parking_licences',
    sa.Column('licence_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('stand_id', sa.Text(), nullable=False),
    sa.Column('valid_from', sa.Date(), nullable=True, comment='inclusive; null: unknown'),
    sa.Column('valid_until', sa.Date(), nullable=True, comment='inclusive; null: open'),
    postgresql.ExcludeConstraint((sa.column('vehicle_id'), '='), (sa.column('stand_id'), '='), (sa.text("daterange(valid_from, valid_until, '[]')"), '&&'), using='gist', name='ex_parking_licences_overlap'),
    sa.CheckConstraint('valid_until IS NULL OR valid_until >= valid_from', name=op.f('ck_parking_licences_period_order')),
    sa.ForeignKeyConstraint(['stand_id'], ['stands.stand_id'], name=op.f('fk_parking_licences_stand_id_stands')),
    sa.ForeignKeyConstraint(['vehicle_id'], ['vehicles.vehicle_id'], name=op.f('fk_parking_licences_vehicle_id_vehicles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('licence_id', name=op.f('pk_parking_licences'))
    )
    op.create_index(op.f('ix_parking_licences_stand_id'), 'parking_licences', ['stand_id'], unique=False)
    op.create_index(op.f('ix_parking_licences_vehicle_id'), 'parking_licences', ['vehicle_id'], unique=False)
    op.create_table('vehicle_status_periods',
    sa.Column('period_id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('vehicle_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('valid_from', sa.Date(), nullable=True, comment='inclusive; null: unknown'),
    sa.Column('valid_until', sa.Date(), nullable=True, comment='inclusive; null: open'),
    sa.Column('reason', sa.Text(), nullable=True),
    postgresql.ExcludeConstraint((sa.column('vehicle_id'), '='), (sa.text("daterange(valid_from, valid_until, '[]')"), '&&'), using='gist', name='ex_vehicle_status_periods_overlap'),
    sa.CheckConstraint("status IN ('active', 'suspended', 'out_of_operation', 'reserved', 'revoked')", name=op.f('ck_vehicle_status_periods_status')),
    sa.CheckConstraint('valid_until IS NULL OR valid_until >= valid_from', name=op.f('ck_vehicle_status_periods_period_order')),
    sa.ForeignKeyConstraint(['vehicle_id'], ['vehicles.vehicle_id'], name=op.f('fk_vehicle_status_periods_vehicle_id_vehicles'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('period_id', name=op.f('pk_vehicle_status_periods'))
    )
    op.create_index(op.f('ix_vehicle_status_periods_vehicle_id'), 'vehicle_status_periods', ['vehicle_id'], unique=False)
    op.execute(AUXILIARY_LIMIT_SQL)
    op.execute(AUDIT_APPEND_ONLY_SQL)


def downgrade() -> None:
    op.execute("DROP TRIGGER trg_driver_assignments_auxiliary_limit ON driver_assignments")
    op.execute("DROP FUNCTION check_auxiliary_driver_limit()")
    op.execute("DROP TRIGGER trg_audit_log_no_change ON audit_log")
    op.execute("DROP TRIGGER trg_audit_log_no_truncate ON audit_log")
    op.execute("DROP FUNCTION audit_log_append_only()")
    op.drop_index(op.f('ix_vehicle_status_periods_vehicle_id'), table_name='vehicle_status_periods')
    op.drop_table('vehicle_status_periods')
    op.drop_index(op.f('ix_parking_licences_vehicle_id'), table_name='parking_licences')
    op.drop_index(op.f('ix_parking_licences_stand_id'), table_name='parking_licences')
    op.drop_table('parking_licences')
    op.drop_index(op.f('ix_licence_exclusions_vehicle_id'), table_name='licence_exclusions')
    op.drop_index(op.f('ix_licence_exclusions_stand_id'), table_name='licence_exclusions')
    op.drop_table('licence_exclusions')
    op.drop_index(op.f('ix_driver_assignments_vehicle_id'), table_name='driver_assignments')
    op.drop_index(op.f('ix_driver_assignments_driver_id'), table_name='driver_assignments')
    op.drop_table('driver_assignments')
    op.drop_table('vehicles')
    op.drop_index(op.f('ix_stand_supervisors_stand_id'), table_name='stand_supervisors')
    op.drop_table('stand_supervisors')
    op.drop_index(op.f('ix_proposal_findings_finding_id'), table_name='proposal_findings')
    op.drop_table('proposal_findings')
    op.drop_index(op.f('ix_stands_municipality_code'), table_name='stands')
    op.drop_geospatial_index('idx_stands_geometry', table_name='stands', postgresql_using='gist', column_name='geometry')
    op.drop_geospatial_table('stands')
    op.drop_index(op.f('ix_proposals_vehicle_id'), table_name='proposals')
    op.drop_table('proposals')
    op.drop_table('permit_holders')
    op.drop_table('municipal_populations')
    op.drop_table('drivers')
    op.drop_index(op.f('ix_rejected_fixes_source'), table_name='rejected_fixes')
    op.drop_table('rejected_fixes')
    op.drop_geospatial_index('idx_municipalities_boundary', table_name='municipalities', postgresql_using='gist', column_name='boundary')
    op.drop_geospatial_table('municipalities')
    op.drop_geospatial_table('fixes')  # drops every partition with it
    op.drop_index(op.f('ix_findings_vehicle_id'), table_name='findings')
    op.drop_index(op.f('ix_findings_kind'), table_name='findings')
    op.drop_geospatial_index('idx_findings_geometry', table_name='findings', postgresql_using='gist', column_name='geometry')
    op.drop_geospatial_table('findings')
    op.drop_table('audit_log')
    # The postgis and btree_gist extensions are left in place: other schemas may use them.
