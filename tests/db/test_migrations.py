"""Migrations: up from empty, down to base and up again; no drift between models and schema."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from db.migrate import current, downgrade, head, include_object, target_metadata, upgrade
from db.tracking.store import ensure_fix_partitions, index_closed_days

POSTGIS_TABLES = {"spatial_ref_sys"}


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _drift(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": include_object, "compare_type": True}
        )
        return list(compare_metadata(context, target_metadata()))


def _schema(url: str) -> dict[str, set[tuple[str, ...]]]:
    """The public schema's tables, indexes (with their definitions), constraints and triggers."""
    queries = {
        "tables": "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
        "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
        "constraints": (
            "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
            "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE n.nspname = 'public'"
        ),
        "triggers": (
            "SELECT tgrelid::regclass::text, tgname FROM pg_trigger t "
            "JOIN pg_class r ON r.oid = t.tgrelid JOIN pg_namespace n ON n.oid = r.relnamespace "
            "WHERE n.nspname = 'public' AND NOT t.tgisinternal"
        ),
    }
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return {
                name: {tuple(row) for row in conn.execute(text(sql))}
                for name, sql in queries.items()
            }
    finally:
        engine.dispose()


class TestUpgradeDowngrade:
    def test_empty_database_up_down_up(self, empty_database_url: str) -> None:
        """Head creates the models' tables and indexes; base drops all; head restores the same."""
        url = empty_database_url
        assert current(url) is None
        metadata = target_metadata()
        model_tables = set(metadata.tables)
        model_indexes = {ix.name for t in metadata.tables.values() for ix in t.indexes}
        assert model_tables and model_indexes

        upgrade(url)
        assert current(url) == head()
        first = _schema(url)
        tables = {name for (name,) in first["tables"]}
        assert model_tables <= tables and "fixes_default" in tables
        assert model_indexes <= {name for name, _ in first["indexes"]}
        assert ("audit_log", "trg_audit_log_no_change") in first["triggers"]

        downgrade(url, "base")
        assert current(url) is None
        assert _tables(url) - POSTGIS_TABLES == {"alembic_version"}
        left = _schema(url)
        assert {name for name, _ in left["indexes"]} <= {
            "alembic_version_pkc",
            "spatial_ref_sys_pkey",
        }
        assert left["triggers"] == set()

        upgrade(url)
        assert current(url) == head()
        assert _schema(url) == first
        engine = create_engine(url, poolclass=NullPool)
        try:
            assert _drift(engine) == []
        finally:
            engine.dispose()

    def test_device_tokens_in_the_quarantine_are_masked(self, empty_database_url: str) -> None:
        """0026 masks the device tokens an OsmAnd request quarantined whole had kept (a query's
        id, a JSON body's device_id); the rest of the row stays."""
        url = empty_database_url
        upgrade(url, "0025")
        token = "pd" + "0123456789abcdef" * 2
        raw = {"id": token, "lat": "-30.05", "body": f'{{"device_id": "{token}"}}'}
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO rejected_fixes (source, row, reason, raw) "
                        "VALUES ('osmand:device:1', 1, 'malformed_request', CAST(:r AS jsonb))"
                    ),
                    {"r": json.dumps(raw)},
                )
            upgrade(url)
            with engine.connect() as conn:
                kept = conn.execute(text("SELECT raw FROM rejected_fixes")).scalar_one()
        finally:
            engine.dispose()
        assert kept == {"id": "***", "lat": "-30.05", "body": '{"device_id": "***"}'}

    def test_fixes_is_partitioned_by_range_of_ts(self, db_session: Session) -> None:
        """The fixes parent is a RANGE-partitioned table with a DEFAULT partition."""
        key = db_session.execute(text("SELECT pg_get_partkeydef('fixes'::regclass)")).scalar_one()
        assert key == "RANGE (ts)"
        default = db_session.execute(
            text(
                "SELECT pg_get_expr(relpartbound, oid) FROM pg_class "
                "WHERE relname = 'fixes_default'"
            )
        ).scalar_one()
        assert default == "DEFAULT"


class TestNoDrift:
    def test_models_match_migrated_schema(self, db_engine: Engine) -> None:
        """Autogenerate finds nothing to change between the models and the head schema."""
        assert _drift(db_engine) == []

    def test_partitions_are_ignored(self, db_engine: Engine) -> None:
        """Daily partitions made at run time do not count as drift."""
        with db_engine.begin() as conn:
            ensure_fix_partitions(conn, dt.date(2031, 1, 1), dt.date(2031, 1, 2))
        try:
            assert _drift(db_engine) == []
        finally:
            with db_engine.begin() as conn:
                conn.execute(text("DROP TABLE fixes_p20310101, fixes_p20310102"))

    def test_an_unknown_table_is_drift(self, db_engine: Engine) -> None:
        """The comparison does see a table that no model declares (so the check can fail)."""
        with db_engine.begin() as conn:
            conn.execute(text("CREATE TABLE drift_probe (n int)"))
        try:
            diffs = _drift(db_engine)
        finally:
            with db_engine.begin() as conn:
                conn.execute(text("DROP TABLE drift_probe"))
        assert [d[0] for d in diffs] == ["remove_table"]  # type: ignore[index]


class TestAuditLogAppendOnly:
    def _entry(self, session: Session) -> int:
        return int(
            session.execute(
                text(
                    "INSERT INTO audit_log (actor, action, entity, entity_id) "
                    "VALUES ('agente', 'confirm', 'proposal', 'P1') RETURNING entry_id"
                )
            ).scalar_one()
        )

    def test_insert_is_allowed(self, db_session: Session) -> None:
        """New entries are accepted, stamped by the database with the inserting transaction's
        time (aware)."""
        entry_id = self._entry(db_session)
        at, now = db_session.execute(
            text("SELECT at, now() FROM audit_log WHERE entry_id = :i"), {"i": entry_id}
        ).one()
        assert at.tzinfo is not None
        assert at == now

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE audit_log SET actor = 'outro'",
            "DELETE FROM audit_log",
            "TRUNCATE audit_log",
        ],
    )
    def test_changes_are_refused(self, db_session: Session, statement: str) -> None:
        """UPDATE, DELETE and TRUNCATE raise: the log only grows."""
        self._entry(db_session)
        with pytest.raises(DBAPIError, match="só aceita inclusões"), db_session.begin_nested():
            db_session.execute(text(statement))


class TestFindingKinds:
    @pytest.mark.parametrize(("kind", "ok"), [("tracking_gap", True), ("speeding", False)])
    def test_only_contract_kinds(self, db_session: Session, kind: str, ok: bool) -> None:
        """findings.kind accepts the eleven kinds of the contract and nothing else."""
        insert = text(
            "INSERT INTO findings (finding_id, kind, started_at, ended_at, confidence) "
            "VALUES ('F1', :kind, now(), now(), 0.5)"
        )
        if ok:
            db_session.execute(insert, {"kind": kind})
        else:
            with pytest.raises(DBAPIError, match="ck_findings_kind"):
                db_session.execute(insert, {"kind": kind})


class TestFixIndexes:
    def test_0008_moves_the_place_index_off_the_partitions(self, empty_database_url: str) -> None:
        """0008 drops 0005's index from every partition (a catalog change); the closed days get
        theirs from index_closed_days, today's none; the downgrade restores 0005's, valid."""
        url = empty_database_url
        upgrade(url, "0007")
        engine = create_engine(url, poolclass=NullPool)
        today = dt.datetime.now(dt.UTC).date()
        closed, open_ = "fixes_p20240301", f"fixes_p{today:%Y%m%d}"

        def indexed() -> set[str]:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT tablename FROM pg_indexes "
                        "WHERE tablename LIKE 'fixes%' AND indexdef LIKE '%(h3_r9, ts)%'"
                    )
                ).scalars()
                return set(rows)

        try:
            with engine.begin() as conn:
                ensure_fix_partitions(conn, dt.date(2024, 3, 1), dt.date(2024, 3, 1))
                ensure_fix_partitions(conn, today, today)
            assert indexed() == {"fixes", "fixes_default", closed, open_}  # 0005: all
            upgrade(url, "0008")
            assert indexed() == set()
            assert index_closed_days(engine, before=today) == [f"{closed}_h3_r9_ts"]
            assert indexed() == {closed}
            downgrade(url, "0007")
            assert indexed() == {"fixes", "fixes_default", closed, open_}
            with engine.connect() as conn:
                valid = conn.execute(
                    text(
                        "SELECT indisvalid FROM pg_index "
                        "WHERE indexrelid = 'ix_fixes_h3_r9_ts'::regclass"
                    )
                ).scalar_one()
            assert valid
        finally:
            engine.dispose()


class TestUsernameCase:
    def test_0020_renames_names_that_differ_only_in_case(self, empty_database_url: str) -> None:
        """0020 keeps the oldest of each group of names that differ only in case, renames each
        other one ``<name>.<id>``, disables it and says so in the audit log (nothing merged or
        deleted); the unique index on lower(username) then refuses a case variant; the
        downgrade drops it."""
        url = empty_database_url
        upgrade(url, "0019")
        engine = create_engine(url, poolclass=NullPool)
        add = text(
            "INSERT INTO users (username, role, password_hash) VALUES (:name, 'planner', 'x')"
        )
        try:
            with engine.begin() as conn:
                for name in ("demo_admin", "DEMO_ADMIN", "Tst_Case", "tst_case", "ana"):
                    conn.execute(add, {"name": name})
            upgrade(url, "0020")
            with engine.connect() as conn:
                users = conn.execute(
                    text("SELECT user_id, username, disabled_at IS NOT NULL FROM users")
                ).all()
                audit = (
                    conn.execute(
                        text("SELECT details FROM audit_log WHERE action = 'rename' ORDER BY 1")
                    )
                    .scalars()
                    .all()
                )
            by_id = {i: (name, off) for i, name, off in users}
            ids = sorted(by_id)
            assert [by_id[i] for i in ids] == [
                ("demo_admin", False),
                (f"DEMO_ADMIN.{ids[1]}", True),
                ("Tst_Case", False),
                (f"tst_case.{ids[3]}", True),
                ("ana", False),
            ]
            assert sorted(d["before"] for d in audit) == ["DEMO_ADMIN", "tst_case"]
            with pytest.raises(DBAPIError, match="uq_users_username_lower"), engine.begin() as conn:
                conn.execute(add, {"name": "ANA"})
            downgrade(url, "0019")
            with engine.begin() as conn:
                conn.execute(add, {"name": "ANA"})
        finally:
            engine.dispose()
