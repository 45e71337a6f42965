"""Drivers and their links into PostGIS (`pontual import drivers`, `driver-links`), audited, and
read back as the frames ``driver_not_allowed`` judges with; the live engine runs the rule."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from factories import make_pings, offset_m
from kernel_checks import geojson_bytes
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.fleet.store import (
    driver_registry_frames,
    load_driver_links,
    load_drivers,
    load_fleet,
)
from engines.live import process_fixes
from fleet._errors import AuxiliaryDriverLimitError, FleetFileError
from fleet.drivers import read_driver_links, read_drivers
from fleet.loaders import read_fleet
from tracking.detectors.driver_not_allowed import detect_driver_not_allowed

D = dt.date
DRIVERS = """driver_id,name,synthetic,cnh_valid_until,ictp_valid_until,ictp_status,ictp_status_since,ictp_status_until
DRV1,Condutor Fictício 1,true,2030-01-01,2030-01-01,,,
DRV2,Condutora Fictícia 2,true,2030-01-01,2024-03-04,,,
DRV3,Condutor Fictício 3,true,2030-01-01,2030-01-01,suspensa,2024-03-01,2024-03-10
"""  # noqa: E501
LINKS = """vehicle_id,driver_id,role,valid_from,valid_until
DRVCAR,DRV1,titular,2024-01-01,
DRVCAR,DRV2,auxiliar,2024-01-01,
DRVCAR,DRV3,auxiliar,2024-01-01,
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "condutores.csv").write_text(DRIVERS, encoding="utf-8")
    (tmp_path / "vinculos.csv").write_text(LINKS, encoding="utf-8")
    return tmp_path / "condutores.csv", tmp_path / "vinculos.csv"


@pytest.fixture
def stored(db_session: Session, files: tuple[Path, Path]) -> tuple[Path, Path]:
    """The vehicle, the drivers and the links imported."""
    db_session.execute(text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('DRVCAR', 'X')"))
    conn = db_session.connection()
    load_drivers(conn=conn, drivers=read_drivers(files[0]), actor="t-1", source="condutores.csv")
    load_driver_links(
        conn=conn, links=read_driver_links(files[1]), actor="t-1", source="vinculos.csv"
    )
    return files


def ride(vehicle: str, start: str, driver: str) -> list[dict[str, Any]]:
    t0 = pd.Timestamp(start)
    rows = []
    for k in range(-1, 22):
        lat, lon = offset_m(100.0 * k, 0.0)
        rows.append(
            {
                "vehicle_id": vehicle,
                "timestamp": t0 + pd.Timedelta(seconds=30 * k),
                "lat": lat,
                "lon": lon,
                "meter": "occupied" if 0 <= k <= 20 else "free",
                "driver_id": driver,
            }
        )
    return rows


class TestImport:
    def test_drivers_periods_links_and_audit(
        self, db_session: Session, stored: tuple[Path, Path]
    ) -> None:
        """Drivers, their status periods and links are stored; each import is audited."""
        rows = db_session.execute(
            text("SELECT driver_id, synthetic, credential_valid_until FROM drivers ORDER BY 1")
        ).all()
        assert rows[1] == ("DRV2", True, D(2024, 3, 4))
        periods = db_session.execute(
            text("SELECT driver_id, document, status FROM driver_document_periods")
        ).all()
        assert periods == [("DRV3", "ictp", "suspensa")]
        roles = db_session.execute(
            text("SELECT driver_id, role FROM driver_assignments ORDER BY 1")
        ).all()
        assert roles[0] == ("DRV1", "autorizatario_condutor")
        audit = db_session.execute(
            text("SELECT actor, action, entity, entity_id FROM audit_log ORDER BY entry_id")
        ).all()[-2:]
        assert audit == [
            ("t-1", "import", "drivers", "condutores.csv"),
            ("t-1", "import", "driver_assignments", "vinculos.csv"),
        ]

    def test_reimport_updates_and_replaces_history(
        self, db_session: Session, stored: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """Importing again changes nothing; a new end date updates the link."""
        conn = db_session.connection()
        report = load_drivers(
            conn=conn, drivers=read_drivers(stored[0]), actor="t-1", source="c.csv"
        )
        assert (report.drivers.created, report.drivers.unchanged) == (0, 3)
        assert (report.periods_replaced, report.periods_created) == (1, 1)
        path = tmp_path / "v2.csv"
        path.write_text(
            LINKS.replace("DRV3,auxiliar,2024-01-01,", "DRV3,auxiliar,2024-01-01,2024-06-30")
        )
        links = load_driver_links(
            conn=conn, links=read_driver_links(path), actor="t-1", source="v2.csv"
        )
        assert (links.created, links.updated, links.unchanged) == (0, 1, 2)

    def test_unknown_driver_and_third_auxiliary_are_refused(
        self, db_session: Session, stored: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """A link to a driver not imported names the row; a third auxiliar at once is refused
        where the prefixo's law caps them."""
        conn = db_session.connection()
        path = tmp_path / "v3.csv"
        path.write_text("vehicle_id,driver_id,role,valid_from\nDRVCAR,NOPE,auxiliar,2024-01-01\n")
        with pytest.raises(FleetFileError, match="v3.csv, linha 2, coluna driver_id"):
            load_driver_links(conn=conn, links=read_driver_links(path), actor="t", source="v3.csv")
        load_drivers(conn=conn, drivers=read_drivers(_one_driver(tmp_path)), actor="t", source="d4")
        conn.execute(  # Pinto Bandeira: two auxiliares at once (art. 14)
            text(
                "INSERT INTO municipalities (code, name, uf) VALUES ('4314548', 'PB', 'RS');"
                "UPDATE vehicles SET municipality_code = '4314548' WHERE vehicle_id = 'DRVCAR'"
            )
        )
        path.write_text("vehicle_id,driver_id,role,valid_from\nDRVCAR,DRV4,auxiliar,2024-02-01\n")
        with pytest.raises(AuxiliaryDriverLimitError, match="DRVCAR teria 3 condutores"):
            load_driver_links(conn=conn, links=read_driver_links(path), actor="t", source="v3.csv")

    def test_a_driver_or_prefixo_written_otherwise_is_refused(
        self, db_session: Session, stored: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """'drv1' and 'DRV-1' are the stored DRV1, 'drvcar' the stored DRVCAR: an import does
        not make them second records; the stored spelling is named."""
        conn = db_session.connection()
        for new in ("drv1", "DRV-01"):
            path = tmp_path / "d.csv"
            path.write_text(f"driver_id,name\n{new},x\n")
            with pytest.raises(FleetFileError, match=f"d.csv: condutor '{new}': .* 'DRV1'"):
                load_drivers(conn=conn, drivers=read_drivers(path), actor="t", source="d.csv")
        path = tmp_path / "f.csv"
        path.write_text("vehicle_id\ndrvcar\n")
        with pytest.raises(FleetFileError, match="veículo 'drvcar': o cadastro já tem 'DRVCAR'"):
            load_fleet(conn=conn, fleet=read_fleet(path), as_of=D(2024, 3, 1))
        count = "SELECT count(*) FROM drivers WHERE driver_id IN ('drv1', 'DRV-01')"
        assert conn.execute(text(count)).scalar() == 0

    def test_missing_name_or_actor(self, db_session: Session, tmp_path: Path) -> None:
        """The database keeps names: a driver without one is refused; so is an empty actor."""
        path = tmp_path / "d.csv"
        path.write_text("driver_id,name\nD9,\n")
        conn = db_session.connection()
        with pytest.raises(FleetFileError, match="d.csv, linha 2, coluna name"):
            load_drivers(conn=conn, drivers=read_drivers(path), actor="t", source="d.csv")
        with pytest.raises(FleetFileError, match="'actor' vazio"):
            load_drivers(
                conn=conn, drivers=read_drivers(_one_driver(tmp_path)), actor=" ", source="d"
            )


def _one_driver(tmp_path: Path) -> Path:
    path = tmp_path / "d4.csv"
    path.write_text("driver_id,name,synthetic\nDRV4,Condutor Fictício 4,true\n")
    return path


def _rides() -> pd.DataFrame:
    rows = (
        ride("DRVCAR", "2024-03-05T13:00:00Z", "DRV1")  # allowed
        + ride("DRVCAR", "2024-03-05T15:00:00Z", "DRV2")  # ICTP expired on 4 March
        + ride("DRVCAR", "2024-03-05T17:00:00Z", "DRV3")  # ICTP suspended
        + ride("DRVCAR", "2024-03-05T19:00:00Z", "XX9")  # not registered
        + ride("DRVCAR", "2024-03-06T15:00:00Z", "DRV1")  # closes 5 March
    )
    return make_pings(rows)


class TestRegistryFrames:
    def test_database_frames_judge_as_the_files(
        self, db_session: Session, stored: tuple[Path, Path]
    ) -> None:
        """The frames read back from the registry give the findings the files give."""
        pings = _rides()
        drivers, links = driver_registry_frames(
            conn=db_session, vehicle_ids=["DRVCAR"], driver_ids=["XX9", "DRV1"]
        )
        from_db = detect_driver_not_allowed(pings, drivers=drivers, driver_links=links)
        from_files = detect_driver_not_allowed(
            pings, drivers=read_drivers(stored[0]), driver_links=read_driver_links(stored[1])
        )
        assert sorted(d["reason"] for d in from_db["details"]) == [
            "ictp_expired",
            "ictp_suspended",
            "not_registered",
        ]
        assert geojson_bytes(from_db) == geojson_bytes(from_files)


class TestLive:
    def test_live_finds_the_drivers_once_the_day_is_over(
        self, db_session: Session, stored: tuple[Path, Path]
    ) -> None:
        """Fed in pieces, the live engine reads the registry and finds the three drivers, each
        announced provisional from its ride's end and settled once the day is over."""
        pings = _rides()
        found: list[dict[str, Any]] = []
        for start in range(0, len(pings), 9):
            found += process_fixes(
                db_session,
                pings.iloc[start : start + 9],
                kinds=("driver_not_allowed",),
                throttle_s=0,
            )
        settled = [f for f in found if not f["details"].get("provisional")]
        assert sorted((f["details"]["driver_id"], f["details"]["reason"]) for f in settled) == [
            ("DRV2", "ictp_expired"),
            ("DRV3", "ictp_suspended"),
            ("XX9", "not_registered"),
        ]
        assert {f["details"]["local_date"] for f in settled} == {"2024-03-05"}
        early = {f["finding_id"] for f in found if f["details"].get("provisional")}
        assert early and early <= {f["finding_id"] for f in settled}
