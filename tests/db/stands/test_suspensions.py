"""Stand suspensions and closures into PostGIS: the import (all or nothing, audited), the
registry, the table's checks and migration 0017, and the rule's frame."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from factories import migrated_database
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from db.migrate import downgrade, upgrade
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
        assert "linha 5, coluna 'stand_id': 'NOPE'" in text_
        assert "linha 6, coluna 'vehicle_id': 'GHOST'" in text_
        assert "linha 7, coluna 'driver_id': 'NOBODY'" in text_
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


# ------------------------------------------------------------ closures of the whole stand

CLOSURES_CSV = """stand_id,vehicle_id,driver_id,starts_on,ends_on,kind,reason,process_ref
SUS1,,,2024-03-01,2024-03-15,closed,obras na via,SMMU 7/2024
SUS1,,,2024-04-01,,closed,evento,
SUS1,SUSCAR,,2024-03-01,2024-03-20,suspension,desacato,EPTC 1/2024
"""


class TestClosures:
    def test_registry_records_a_closure_loaded_without_subject(self, registry: Session) -> None:
        """An open closure is recorded, audited and read back with no prefixo nor driver."""
        row = create_suspension(
            session=registry,
            stand_id="SUS1",
            starts_on=dt.date(2024, 3, 4),
            kind="closed",
            reason="obras na via",
            actor="t-1",
        )
        assert (row.vehicle_id, row.driver_id, row.ends_on) == (None, None, None)
        frame = suspensions_frame(conn=registry, stand_ids=["SUS1"])
        assert frame["suspension_id"].tolist() == [row.suspension_id]
        closure = frame.iloc[0]
        assert closure["kind"] == "closed"
        assert closure["vehicle_id"] is None and closure["driver_id"] is None
        assert closure["starts_on"] == pd.Timestamp("2024-03-04") and pd.isna(closure["ends_on"])
        audit = registry.execute(
            text(
                "SELECT details->>'kind' FROM audit_log WHERE entity = 'stand_suspension' "
                "AND entity_id = :i"
            ),
            {"i": str(row.suspension_id)},
        ).scalar_one()
        assert audit == "closed"

    @pytest.mark.parametrize(("vehicle", "driver"), [("SUSCAR", None), (None, "SUSDRV")])
    def test_registry_refuses_a_closure_naming_someone(
        self, registry: Session, vehicle: str | None, driver: str | None
    ) -> None:
        """A closure with a prefixo or a driver is refused, nothing stored."""
        with pytest.raises(InvalidAttributeError, match="interdição do ponto"):
            create_suspension(
                session=registry,
                stand_id="SUS1",
                vehicle_id=vehicle,
                driver_id=driver,
                starts_on=dt.date(2024, 3, 4),
                kind="closed",
                actor="t-1",
            )
        assert list_suspensions(session=registry, stand_id="SUS1") == []

    def test_import_stores_closures_and_reimport_is_unchanged(
        self, registry: Session, tmp_path: Path
    ) -> None:
        """Two closures and a suspension stored; the same file again changes nothing; a new end
        updates the open closure."""
        path = tmp_path / "s.csv"
        path.write_text(CLOSURES_CSV, encoding="utf-8")
        report = _load(registry, path)
        assert (report.created, report.updated, report.unchanged) == (3, 0, 0)
        assert report.notes == ()
        again = _load(registry, path)
        assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
        path.write_text(CLOSURES_CSV.replace("2024-04-01,,", "2024-04-01,2024-04-02,"), "utf-8")
        assert _load(registry, path).updated == 1
        frame = suspensions_frame(conn=registry, stand_ids=["SUS1"])
        assert frame["kind"].tolist() == ["closed", "closed", "suspension"]
        assert frame["vehicle_id"].tolist() == [None, None, "SUSCAR"]
        assert frame["driver_id"].tolist() == [None, None, None]
        assert (
            frame["ends_on"].tolist()
            == pd.to_datetime(["2024-03-15", "2024-04-02", "2024-03-20"]).tolist()
        )

    @pytest.mark.parametrize(
        ("vehicle", "driver", "kind", "ends_on", "ok"),
        [
            (None, None, "closed", None, True),
            ("SUSCAR", None, "closed", "2024-03-09", False),
            (None, "SUSDRV", "closed", None, False),
            (None, None, "barred", None, False),
            (None, None, "suspension", "2024-03-09", False),
            ("SUSCAR", None, "suspension", None, False),
            (None, "SUSDRV", "barred", None, True),
        ],
    )
    def test_database_checks(
        self,
        registry: Session,
        vehicle: str | None,
        driver: str | None,
        kind: str,
        ends_on: str | None,
        ok: bool,
    ) -> None:
        """The table itself holds the rules: closed ⇒ no subject, else exactly one; only
        barred and closed open-ended."""
        insert = text(
            "INSERT INTO stand_suspensions (stand_id, vehicle_id, driver_id, starts_on, "
            "ends_on, kind) VALUES ('SUS1', :v, :d, '2024-03-01', :e, :k)"
        )
        values = {"v": vehicle, "d": driver, "e": ends_on, "k": kind}
        if ok:
            registry.execute(insert, values)
        else:
            with (
                pytest.raises(IntegrityError, match="ck_stand_suspensions"),
                registry.begin_nested(),
            ):
                registry.execute(insert, values)


@pytest.fixture
def empty_database_url(database_url: str) -> Iterator[str]:
    """A new database (PostGIS enabled, nothing migrated) on the suite's server."""
    with migrated_database(database_url, prefix="pontual_closed", migrate=False) as url:
        yield url


class TestClosuresMigration:
    def test_0017_upgrade_and_downgrade(self, empty_database_url: str) -> None:
        """0016 refuses a closure; 0017 takes it; back to 0016 it is deleted (the old checks
        return, the other rows stay); 0017 again takes a closure."""
        url = empty_database_url
        upgrade(url, "0016")
        engine = create_engine(url, poolclass=NullPool)
        closure = text(
            "INSERT INTO stand_suspensions (stand_id, starts_on, kind) "
            "VALUES ('SUS1', '2024-03-01', 'closed')"
        )

        def kinds() -> list[str]:
            with engine.connect() as conn:
                query = "SELECT kind FROM stand_suspensions ORDER BY suspension_id"
                return list(conn.execute(text(query)).scalars())

        def comment() -> str:
            with engine.connect() as conn:
                query = (
                    "SELECT col_description(attrelid, attnum) FROM pg_attribute "
                    "WHERE attrelid = 'stand_suspensions'::regclass AND attname = 'kind'"
                )
                return str(conn.execute(text(query)).scalar_one())

        try:
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO stands (stand_id) VALUES ('SUS1')"))
                conn.execute(text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('C', 'X')"))
                conn.execute(
                    text(
                        "INSERT INTO stand_suspensions (stand_id, vehicle_id, starts_on, "
                        "ends_on, kind) VALUES ('SUS1', 'C', '2024-03-01', '2024-03-20', "
                        "'suspension')"
                    )
                )
            with (
                pytest.raises(IntegrityError, match="ck_stand_suspensions_kind"),
                engine.begin() as conn,
            ):
                conn.execute(closure)
            upgrade(url, "0017")
            assert comment() == "suspension | barred | closed"
            with engine.begin() as conn:
                conn.execute(closure)
            assert kinds() == ["suspension", "closed"]
            downgrade(url, "0016")
            assert kinds() == ["suspension"]
            assert comment() == "suspension | barred"
            with (
                pytest.raises(IntegrityError, match="ck_stand_suspensions_kind"),
                engine.begin() as conn,
            ):
                conn.execute(closure)
            upgrade(url, "0017")
            with engine.begin() as conn:
                conn.execute(closure)
            assert kinds() == ["suspension", "closed"]
        finally:
            engine.dispose()
