"""Stand suspensions into PostGIS: the import (all or nothing, audited) and the rule's frame."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.stands.registry import create_suspension, list_suspensions
from db.stands.store import load_stand_suspensions, suspensions_frame
from stands._errors import InvalidAttributeError, StandSuspensionFileError, UnknownDriverError
from stands.suspensions import read_stand_suspensions

CSV = """stand_id,vehicle_id,driver_id,starts_on,ends_on,kind,reason,process_ref
SUS1,SUSCAR,,2024-03-01,2024-03-20,suspension,desacato,EPTC 1/2024
SUS1,,SUSDRV,2024-03-02,,barred,agressão física,EPTC 2/2024
SUS1,SUSCAR,,2024-05-01,2024-05-10,suspension,,
"""


@pytest.fixture
def registry(db_session: Session) -> Session:
    """A stand, a vehicle and a (synthetic) driver."""
    db_session.execute(text("INSERT INTO stands (stand_id, name) VALUES ('SUS1', 'Ponto S')"))
    db_session.execute(text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('SUSCAR', 'X')"))
    db_session.execute(
        text("INSERT INTO drivers (driver_id, name, synthetic) VALUES ('SUSDRV', 'Fictício', true)")
    )
    return db_session


def _load(session: Session, path: Path, actor: str = "t-1"):
    frame = read_stand_suspensions(path)
    return load_stand_suspensions(
        conn=session.connection(), suspensions=frame, actor=actor, source=path.name
    )


class TestImport:
    def test_rows_stored_audited_and_reimport_unchanged(
        self, registry: Session, tmp_path: Path
    ) -> None:
        """Three rows stored; a second import changes nothing; the short one is noted; audited."""
        path = tmp_path / "s.csv"
        path.write_text(CSV, encoding="utf-8")
        report = _load(registry, path)
        assert (report.created, report.updated, report.unchanged) == (3, 0, 0)
        assert len(report.notes) == 1 and "10 dias" in report.notes[0]
        again = _load(registry, path)
        assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
        path.write_text(CSV.replace("2024-05-10", "2024-05-20"), encoding="utf-8")
        assert _load(registry, path).updated == 1
        audits = registry.execute(
            text("SELECT count(*) FROM audit_log WHERE entity = 'stand_suspensions'")
        ).scalar_one()
        assert audits == 3
        frame = suspensions_frame(conn=registry, stand_ids=["SUS1"])
        assert frame["kind"].tolist() == ["suspension", "barred", "suspension"]
        assert frame["ends_on"].isna().tolist() == [False, True, False]

    def test_unknown_ids_name_every_row_and_write_nothing(
        self, registry: Session, tmp_path: Path
    ) -> None:
        """Unknown stand, prefixo and driver: one error naming each row; nothing stored."""
        path = tmp_path / "s.csv"
        path.write_text(
            CSV
            + "NOPE,SUSCAR,,2024-03-01,2024-03-20,suspension,,\n"
            + "SUS1,GHOST,,2024-03-01,2024-03-20,suspension,,\n"
            + "SUS1,,NOBODY,2024-03-01,,barred,,\n",
            encoding="utf-8",
        )
        with pytest.raises(StandSuspensionFileError) as err:
            _load(registry, path)
        text_ = str(err.value)
        assert "linha 4, coluna 'stand_id': 'NOPE'" in text_
        assert "linha 5, coluna 'vehicle_id': 'GHOST'" in text_
        assert "linha 6, coluna 'driver_id': 'NOBODY'" in text_
        stored = registry.execute(text("SELECT count(*) FROM stand_suspensions")).scalar_one()
        assert stored == 0

    def test_empty_actor_is_refused(self, registry: Session, tmp_path: Path) -> None:
        """An import without an actor is refused (the audit log needs one)."""
        path = tmp_path / "s.csv"
        path.write_text(CSV, encoding="utf-8")
        with pytest.raises(StandSuspensionFileError, match="actor"):
            _load(registry, path, actor=" ")


class TestRegistry:
    def test_create_and_list(self, registry: Session) -> None:
        """A barring of a driver is recorded, listed and audited."""
        row = create_suspension(
            session=registry,
            stand_id="SUS1",
            driver_id="SUSDRV",
            starts_on=dt.date(2024, 3, 2),
            kind="barred",
            actor="t-1",
        )
        assert [r.suspension_id for r in list_suspensions(session=registry, stand_id="SUS1")] == [
            row.suspension_id
        ]
        audit = registry.execute(
            text("SELECT action FROM audit_log WHERE entity = 'stand_suspension'")
        ).scalar_one()
        assert audit == "create"

    def test_bad_input_is_named(self, registry: Session) -> None:
        """Neither subject is refused; an unknown driver is named."""
        with pytest.raises(InvalidAttributeError, match="exatamente um"):
            create_suspension(
                session=registry,
                stand_id="SUS1",
                starts_on=dt.date(2024, 3, 2),
                kind="barred",
                actor="t-1",
            )
        with pytest.raises(UnknownDriverError, match="NOBODY"):
            create_suspension(
                session=registry,
                stand_id="SUS1",
                driver_id="NOBODY",
                starts_on=dt.date(2024, 3, 2),
                kind="barred",
                actor="t-1",
            )
