"""Backup and restore (README): pg_dump -Fc then pg_restore into a new database, round trip."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import shapely
from factories import make_pings
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from db.cluster import find_bindir
from db.enforcement.models import AuditEntry
from db.enforcement.workflow import generate_proposals, store_findings
from db.engine import create_database, drop_database, make_engine, parse_url
from db.fleet.models import Municipality
from db.migrate import upgrade
from db.tracking.store import copy_fixes
from tracking.detectors.findings import make_findings

PB = "4314548"
# Key tables and the order that makes their checksum deterministic.
TABLES = {
    "fixes": "vehicle_id, ts",
    "findings": "finding_id",
    "proposals": "proposal_id",
    "proposal_findings": "proposal_id, finding_id",
    "audit_log": "entry_id",
    "alembic_version": "version_num",
}


def _libpq(url: str) -> str:
    """The URL as libpq takes it (no SQLAlchemy driver suffix)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _url(server: str) -> str:
    name = f"pontual_test_{secrets.token_hex(4)}"
    return parse_url(server).set(database=name).render_as_string(hide_password=False)


@pytest.fixture
def databases(database_url: str) -> Iterator[tuple[str, str]]:
    """A migrated source database and an empty target name on the test server."""
    source, target = _url(database_url), _url(database_url)
    create_database(source)
    try:
        upgrade(source)
        yield source, target
    finally:
        drop_database(source)
        drop_database(target)


def _load(url: str) -> None:
    """A few fixes over two days, findings, proposals and audit entries (committed)."""
    engine = make_engine(url)
    try:
        with Session(engine) as session, session.begin():
            rows = [
                ("V1", f"2025-03-0{d}T10:{m:02d}:00.25Z", -29.1 + m * 1e-4, -51.45, "free")
                for d in (4, 5)
                for m in range(30)
            ]
            copy_fixes(session.connection(), make_pings(rows), source="t")
            session.add(Municipality(code=PB, name="Pinto Bandeira", uf="RS", timezone=None))
            session.flush()
            frame = pd.DataFrame(
                {
                    "kind": "queue_jump",
                    "vehicle_id": "V1",
                    "stand_id": "S1",
                    "started_at": ["2025-03-04T10:05Z", "2025-03-05T10:05Z"],
                    "ended_at": ["2025-03-04T10:07Z", "2025-03-05T10:07Z"],
                    "confidence": 0.8,
                    "details": [{"queue_position": 2, "nota": "ação"}] * 2,
                }
            )
            store_findings(session, make_findings(frame, [shapely.Point(-51.45, -29.1)] * 2))
            assert generate_proposals(session, municipality=PB, timezone="America/Sao_Paulo")
            for k in range(3):
                session.add(
                    AuditEntry(actor="ag1", action="test", entity="fixes", details={"k": k})
                )
    finally:
        engine.dispose()


def _fingerprint(url: str) -> dict[str, tuple[int, str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                table: tuple(
                    conn.execute(
                        text(
                            f"SELECT count(*), coalesce(md5(string_agg(t::text, '|' "
                            f"ORDER BY {order})), '') FROM {table} t"
                        )
                    ).one()
                )
                for table, order in TABLES.items()
            }
    finally:
        engine.dispose()


class TestBackupRestore:
    def test_round_trip(self, databases: tuple[str, str], tmp_path: Path) -> None:
        """pg_dump -Fc and pg_restore into a new database give the same rows in every key table."""
        source, target = databases
        _load(source)
        bindir = find_bindir()
        dump = tmp_path / "pontual.dump"
        subprocess.run(
            [str(bindir / "pg_dump"), "-Fc", "-f", str(dump), "--dbname", _libpq(source)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        create_database(target, postgis=False)
        subprocess.run(
            [str(bindir / "pg_restore"), "--no-owner", "--exit-on-error", "-d", _libpq(target)]
            + [str(dump)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        before, after = _fingerprint(source), _fingerprint(target)
        assert after == before
        assert before["fixes"][0] == 60 and before["proposals"][0] >= 1
        assert before["audit_log"][0] >= 3
        engine = make_engine(target)
        try:
            with engine.connect() as conn:
                parts = conn.execute(
                    text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'fixes'::regclass")
                ).scalar_one()
                day = conn.execute(text("SELECT count(*) FROM fixes_p20250305")).scalar_one()
        finally:
            engine.dispose()
        assert (parts, day) == (3, 30)  # two days and DEFAULT, rows in their partition
