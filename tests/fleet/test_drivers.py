"""The cap on auxiliares by the prefixo's law (PV art. 43 § 1º, PB art. 14; none in POA)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from db.fleet.store import AuxiliaryCaps, add_driver_assignment, check_link_limits
from enforcement.rulebook import auxiliary_cap
from fleet._errors import AuxiliaryDriverLimitError, FleetFileError

D = dt.date


def auxiliary_caps_of(municipality: str) -> AuxiliaryCaps:
    found = auxiliary_cap(municipality)
    assert found is not None
    return found


def _assignments(rows: list[tuple[str, str, dt.date, dt.date | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["vehicle_id", "role", "valid_from", "valid_until"])


PV_CAP = auxiliary_caps_of("1100205")


class TestCheckAuxiliaryLimit:
    def test_two_at_once_is_allowed(self) -> None:
        """Two auxiliaries plus the holder driving is within the limit."""
        check_link_limits(
            _assignments(
                [
                    ("P1", "auxiliar", D(2024, 1, 1), None),
                    ("P1", "auxiliar", D(2024, 2, 1), None),
                    ("P1", "autorizatario_condutor", D(2024, 1, 1), None),
                ]
            ),
            caps={"P1": PV_CAP},
        )

    def test_three_at_once_raises_under_a_law_with_a_cap(self) -> None:
        """A third overlapping auxiliary is refused, naming the prefixo, the date and the law;
        a prefixo whose law sets no cap (absent from ``caps``) holds all three."""
        three = _assignments(
            [
                ("P1", "auxiliar", D(2024, 1, 1), None),
                ("P1", "auxiliar", D(2024, 2, 1), D(2024, 12, 31)),
                ("P1", "auxiliar", D(2024, 3, 1), D(2024, 3, 31)),
            ]
        )
        with pytest.raises(
            AuxiliaryDriverLimitError,
            match=r"P1 teria 3 .* em 2024-03-01; o limite é 2 \(art. 43, § 1º da lei de Porto Velho",  # noqa: E501
        ):
            check_link_limits(three, caps={"P1": PV_CAP})
        check_link_limits(three, caps={})

    @pytest.mark.parametrize(
        "third",
        [
            ("P1", "auxiliar", D(2024, 2, 1), None),  # after the first one ended
            ("P2", "auxiliar", D(2024, 1, 15), None),  # another prefixo
        ],
    )
    def test_three_not_at_once_is_allowed(self, third: tuple[str, str, dt.date, None]) -> None:
        """Three auxiliaries over time, or on different prefixos, are fine."""
        check_link_limits(
            _assignments(
                [
                    ("P1", "auxiliar", D(2024, 1, 1), D(2024, 1, 31)),
                    ("P1", "auxiliar", D(2024, 1, 10), None),
                    third,
                ]
            ),
            caps={"P1": PV_CAP, "P2": PV_CAP},
        )

    def test_two_titulares_at_once_raise_in_any_municipality(self) -> None:
        """A prefixo has one titular (autorizatário) at a time, cap on auxiliares or not; a
        transfer (the first ends the day before the second starts) is fine."""
        from fleet._errors import DriverRecordError

        first = ("P1", "autorizatario_condutor", D(2020, 1, 1), None)
        second = ("P1", "autorizatario_condutor", D(2024, 5, 1), None)
        with pytest.raises(DriverRecordError, match="P1 teria 2 titulares em 2024-05-01"):
            check_link_limits(_assignments([first, second]), caps={})
        ended = ("P1", "autorizatario_condutor", D(2020, 1, 1), D(2024, 4, 30))
        check_link_limits(_assignments([ended, second]), caps={})

    def test_unknown_role_raises(self) -> None:
        """Roles other than the two legal ones are refused."""
        with pytest.raises(FleetFileError, match="'motorista'"):
            check_link_limits(_assignments([("P1", "motorista", D(2024, 1, 1), None)]), caps={})


def _prefixo_of(session: Session, municipality: str | None) -> str:
    """Store prefixo P1 of ``municipality`` and drivers A, B, C."""
    if municipality is not None:
        session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf) VALUES (:m, 'M', 'RS') "
                "ON CONFLICT DO NOTHING"
            ),
            {"m": municipality},
        )
    session.execute(
        text(
            "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) VALUES ('P1', 'P1', :m)"
        ),
        {"m": municipality},
    )
    session.execute(
        text("INSERT INTO drivers (driver_id, name) VALUES ('A', 'a'), ('B', 'b'), ('C', 'c')")
    )
    return "P1"


@pytest.fixture
def prefixo(db_session: Session) -> str:
    """One vehicle without a municipality and three drivers stored."""
    return _prefixo_of(db_session, None)


def _add(session: Session, driver: str, start: str, role: str = "auxiliar") -> None:
    add_driver_assignment(
        session=session,
        driver_id=driver,
        vehicle_id="P1",
        role=role,
        valid_from=D.fromisoformat(start),
    )


class TestAuxiliaryCapByLaw:
    @pytest.mark.parametrize(
        ("municipality", "law"), [("1100205", "Porto Velho"), ("4314548", "Pinto Bandeira")]
    )
    def test_a_third_is_refused_where_the_law_caps_them(
        self, db_session: Session, municipality: str, law: str
    ) -> None:
        """Porto Velho (art. 43 § 1º) and Pinto Bandeira (art. 14): two auxiliares at once."""
        _prefixo_of(db_session, municipality)
        _add(db_session, "A", "2024-01-01")
        _add(db_session, "B", "2024-01-01")
        with pytest.raises(AuxiliaryDriverLimitError, match=f"limite é 2 .*lei de {law}"):
            _add(db_session, "C", "2024-06-01")

    @pytest.mark.parametrize("municipality", ["4314902", None])
    def test_a_third_is_held_where_the_law_sets_no_cap(
        self, db_session: Session, municipality: str | None
    ) -> None:
        """Porto Alegre's decree sets no cap (nor does an unknown municipality): three
        auxiliares at once are held, so none of them is later read as not linked."""
        _prefixo_of(db_session, municipality)
        for driver in "ABC":
            _add(db_session, driver, "2024-01-01")
        count = db_session.execute(text("SELECT count(*) FROM driver_assignments")).scalar_one()
        assert count == 3

    def test_a_second_titular_is_refused_when_linked(self, db_session: Session) -> None:
        """Linking a second titular while the first's link is open is refused by the writer."""
        from fleet._errors import DriverRecordError

        _prefixo_of(db_session, "4314902")
        _add(db_session, "A", "2020-01-01", role="autorizatario_condutor")
        with pytest.raises(DriverRecordError, match="um prefixo tem um autorizatário por vez"):
            _add(db_session, "B", "2024-05-01", role="autorizatario_condutor")

    def test_the_check_locks_the_prefixo(self, own_engine: Engine) -> None:
        """A link being written holds the prefixo's row, so a second writer waits for it and
        counts the first one's link (the check cannot pass twice on the same two links)."""
        with own_engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO municipalities (code, name, uf) VALUES ('1100205', 'PV', 'RO');"
                    "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) "
                    "VALUES ('P1', 'P1', '1100205');"
                    "INSERT INTO drivers (driver_id, name) VALUES ('A', 'a')"
                )
            )
        with Session(own_engine) as writer, own_engine.connect() as other:
            _add(writer, "A", "2024-01-01")
            with pytest.raises(OperationalError, match="could not obtain lock"):
                other.execute(
                    text("SELECT 1 FROM vehicles WHERE vehicle_id = 'P1' FOR UPDATE NOWAIT")
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
