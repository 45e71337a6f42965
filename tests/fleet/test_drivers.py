"""The at-most-two-auxiliaries rule (PV art. 43 §1; PB art. 14) in Python and in the database."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.fleet.store import add_driver_assignment, check_auxiliary_limit
from fleet._errors import AuxiliaryDriverLimitError, FleetFileError

D = dt.date


def _assignments(rows: list[tuple[str, str, dt.date, dt.date | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["vehicle_id", "role", "valid_from", "valid_until"])


class TestCheckAuxiliaryLimit:
    def test_two_at_once_is_allowed(self) -> None:
        """Two auxiliaries plus the holder driving is within the limit."""
        check_auxiliary_limit(
            _assignments(
                [
                    ("P1", "auxiliar", D(2024, 1, 1), None),
                    ("P1", "auxiliar", D(2024, 2, 1), None),
                    ("P1", "autorizatario_condutor", D(2024, 1, 1), None),
                ]
            )
        )

    def test_three_at_once_raises(self) -> None:
        """A third overlapping auxiliary is refused, naming the prefixo and the date."""
        with pytest.raises(AuxiliaryDriverLimitError, match="P1 teria 3 .* em 2024-03-01"):
            check_auxiliary_limit(
                _assignments(
                    [
                        ("P1", "auxiliar", D(2024, 1, 1), None),
                        ("P1", "auxiliar", D(2024, 2, 1), D(2024, 12, 31)),
                        ("P1", "auxiliar", D(2024, 3, 1), D(2024, 3, 31)),
                    ]
                )
            )

    @pytest.mark.parametrize(
        "third",
        [
            ("P1", "auxiliar", D(2024, 2, 1), None),  # after the first one ended
            ("P2", "auxiliar", D(2024, 1, 15), None),  # another prefixo
        ],
    )
    def test_three_not_at_once_is_allowed(self, third: tuple[str, str, dt.date, None]) -> None:
        """Three auxiliaries over time, or on different prefixos, are fine."""
        check_auxiliary_limit(
            _assignments(
                [
                    ("P1", "auxiliar", D(2024, 1, 1), D(2024, 1, 31)),
                    ("P1", "auxiliar", D(2024, 1, 10), None),
                    third,
                ]
            )
        )

    def test_unknown_role_raises(self) -> None:
        """Roles other than the two legal ones are refused."""
        with pytest.raises(FleetFileError, match="'motorista'"):
            check_auxiliary_limit(_assignments([("P1", "motorista", D(2024, 1, 1), None)]))


@pytest.fixture
def prefixo(db_session: Session) -> str:
    """One vehicle and three drivers stored."""
    db_session.execute(text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('P1', 'P1')"))
    db_session.execute(
        text("INSERT INTO drivers (driver_id, name) VALUES ('A', 'a'), ('B', 'b'), ('C', 'c')")
    )
    return "P1"


def _insert(session: Session, driver: str, start: str, end: str | None = None) -> None:
    session.execute(
        text(
            "INSERT INTO driver_assignments (driver_id, vehicle_id, role, valid_from, valid_until) "
            "VALUES (:d, 'P1', 'auxiliar', :s, :e)"
        ),
        {"d": driver, "s": D.fromisoformat(start), "e": end and D.fromisoformat(end)},
    )


class TestAuxiliaryTrigger:
    def test_third_overlapping_auxiliary_is_refused(
        self, db_session: Session, prefixo: str
    ) -> None:
        """The database raises a clear error for a third auxiliary at the same time."""
        _insert(db_session, "A", "2024-01-01")
        _insert(db_session, "B", "2024-01-05")
        with pytest.raises(IntegrityError, match="mais de 2 condutores auxiliares"):
            _insert(db_session, "C", "2024-02-01", "2024-02-10")

    def test_sequential_auxiliaries_are_accepted(self, db_session: Session, prefixo: str) -> None:
        """A third auxiliary after another's period ended is accepted."""
        _insert(db_session, "A", "2024-01-01", "2024-01-31")
        _insert(db_session, "B", "2024-01-05")
        _insert(db_session, "C", "2024-02-01")
        count = db_session.execute(text("SELECT count(*) FROM driver_assignments")).scalar_one()
        assert count == 3

    def test_add_driver_assignment_checks_first(self, db_session: Session, prefixo: str) -> None:
        """The Python path refuses before touching the table, with the named error."""
        add_driver_assignment(
            session=db_session,
            driver_id="A",
            vehicle_id="P1",
            role="auxiliar",
            valid_from=D(2024, 1, 1),
        )
        add_driver_assignment(
            session=db_session,
            driver_id="B",
            vehicle_id="P1",
            role="auxiliar",
            valid_from=D(2024, 1, 1),
        )
        with pytest.raises(AuxiliaryDriverLimitError, match="limite é 2"):
            add_driver_assignment(
                session=db_session,
                driver_id="C",
                vehicle_id="P1",
                role="auxiliar",
                valid_from=D(2024, 6, 1),
            )


class TestStatusPeriodsDoNotOverlap:
    def test_overlapping_status_periods_are_refused(
        self, db_session: Session, prefixo: str
    ) -> None:
        """Two status periods of one vehicle cannot cover the same day."""
        db_session.execute(
            text(
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('P1', 'active', '2024-01-01', '2024-01-31')"
            )
        )
        with pytest.raises(IntegrityError, match="ex_vehicle_status_periods_overlap"):
            db_session.execute(
                text(
                    "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from) "
                    "VALUES ('P1', 'suspended', '2024-01-31')"
                )
            )

    def test_unknown_status_is_refused(self, db_session: Session, prefixo: str) -> None:
        """Only the five statuses of the contract are accepted."""
        with pytest.raises(IntegrityError, match="ck_vehicle_status_periods_status"):
            db_session.execute(
                text(
                    "INSERT INTO vehicle_status_periods (vehicle_id, status) "
                    "VALUES ('P1', 'parked')"
                )
            )
