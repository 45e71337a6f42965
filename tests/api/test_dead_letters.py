"""One bad registry row never stops live detection: views answer, the bad vehicle is held.

A licence with ``valid_from = 0202-12-01`` is refused at the edge (HTTP 422, CLI ``erro:``).
Forced into the database by SQL, it must not make the stand views answer 500, and the live
worker must go on detecting for the other vehicles while the bad vehicle's fixes are held with a
dead letter (``live_dead_letters``), listed by ``pontual alerts failed``, and detected after the
row is corrected and ``pontual alerts retry`` runs. A detector exception holds the fixes the
same way (never dropped), and a later automatic pass retries them.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable, Iterator
from subprocess import CompletedProcess
from typing import Any

import pytest
from api_factories import DEVICE_SINCE, bearer
from sqlalchemy import Engine, text
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

Run = Callable[..., CompletedProcess[str]]
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture
def world(own_engine: Engine) -> Iterator[dict[str, Any]]:
    """A fresh database with stand S1, vehicles GOOD and BAD (devices), an admin; a client."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from api import accounts
    from api.main import create_app
    from api.settings import Settings
    from db.engine import session_scope
    from db.fleet.models import Vehicle
    from db.stands.models import ParkingLicence, Stand

    with session_scope(own_engine) as session:
        poly = Point(-51.2287, -30.0277).buffer(0.0004, cap_style="square")
        session.add(
            Stand(
                stand_id="S1",
                name="Matriz",
                capacity=3,
                geometry=from_shape(MultiPolygon([poly]), srid=4326),
            )
        )
        session.add_all([Vehicle(vehicle_id=v, prefixo=v) for v in ("GOOD", "BAD")])
        session.flush()
        session.add(ParkingLicence(vehicle_id="GOOD", stand_id="S1"))
        admin = accounts.create_user(
            session=session, username="adm", password="senha-de-teste-123", role="admin"
        )
        token, _ = accounts.issue_token(session=session, user=admin, ttl_s=3600)
        devices = {
            v: accounts.create_device(session=session, registered_at=DEVICE_SINCE, vehicle_id=v)[1]
            for v in ("GOOD", "BAD")
        }
    settings = Settings(live_worker=False, live_retry_s=3600.0)
    app = create_app(engine=own_engine, settings=settings)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield {
            "client": client,
            "admin": bearer(token),
            "devices": devices,
            "settings": settings,
            "url": own_engine.url.render_as_string(hide_password=False),
        }


def _send_gap(client: TestClient, token: str, *, start: dt.datetime) -> None:
    """Two occupied fixes 20 min and ~1 km apart: a tracking_gap once detected."""
    pings = [
        {"timestamp": start.isoformat(), "lat": -30.0277, "lon": -51.2287, "meter": "occupied"},
        {
            "timestamp": (start + dt.timedelta(minutes=20)).isoformat(),
            "lat": -30.0367,
            "lon": -51.2287,
            "meter": "occupied",
        },
    ]
    answer = client.post("/api/v1/pings", json={"pings": pings}, headers=bearer(token))
    assert answer.status_code == 200 and answer.json()["accepted"] == 2, answer.text


def _gaps(engine: Engine, vehicle: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM findings WHERE kind = 'tracking_gap' AND vehicle_id = :v"
                ),
                {"v": vehicle},
            ).scalar_one()
        )


def _queued(engine: Engine, vehicle: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM live_queue WHERE vehicle_id = :v"), {"v": vehicle}
            ).scalar_one()
        )


def _open_letters(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT vehicle_id, error, n_fixes, first_ts, last_ts, attempts "
                "FROM live_dead_letters WHERE resolved_at IS NULL ORDER BY vehicle_id"
            )
        ).all()


class TestBadRegistryRow:
    def test_refused_at_the_edge(self, world: dict[str, Any], run_pontual: Run) -> None:
        """valid_from 0202-12-01 is a 422 over HTTP and an ``erro:`` line in the CLI."""
        answer = world["client"].post(
            "/api/v1/stands/S1/licences",
            json={"vehicle_id": "BAD", "valid_from": "0202-12-01"},
            headers=world["admin"],
        )
        assert answer.status_code == 422, answer.text
        assert "1990-01-01" in answer.text
        done = run_pontual(
            "licences", "grant", "S1", "BAD", "--from", "0202-12-01", "--actor", "fiscal",
            DATABASE_URL=world["url"],
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("erro: ") and "1990-01-01" in done.stderr

    def test_views_answer_and_live_detection_carries_on(
        self, world: dict[str, Any], own_engine: Engine, run_pontual: Run
    ) -> None:
        """Views stay 200; GOOD is detected, BAD is held with a dead letter until fixed."""
        from api.live_worker import process_queue

        client, admin = world["client"], world["admin"]
        with own_engine.begin() as conn:  # as an old import or a hand-written SQL would
            conn.execute(
                text(
                    "INSERT INTO parking_licences (vehicle_id, stand_id, valid_from) "
                    "VALUES ('BAD', 'S1', '0202-12-01')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from) "
                    "VALUES ('BAD', 'active', '0202-12-01')"
                )
            )
            conn.execute(
                text(
                    "UPDATE vehicles SET alvara_valid_until = '7743-01-01' WHERE vehicle_id = 'BAD'"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO stands (stand_id, name, retired_at) "
                    "VALUES ('S9', 'Velho', '0250-06-01T00:00:00Z')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO stand_supervisors (stand_id, person_name, elected_on) "
                    "VALUES ('S1', 'Fulano', '7743-01-01')"
                )
            )
        for path in (
            "/api/v1/stands?include_retired=true",
            "/api/v1/supervision/stands",
            "/api/v1/supervision/stands/S1/occupancy",
            "/api/v1/stands/S1/occupancy",
            "/api/v1/stands/S1/licences",
            "/api/v1/maps/stands",
            "/api/v1/vehicles",
            "/api/v1/vehicles/BAD",
        ):
            assert client.get(path, headers=admin).status_code == 200, path
        start = NOW - dt.timedelta(hours=2)
        _send_gap(client, world["devices"]["GOOD"], start=start)
        _send_gap(client, world["devices"]["BAD"], start=start)
        assert process_queue(own_engine, settings=world["settings"]) == 4
        assert _gaps(own_engine, "GOOD") == 1
        assert _queued(own_engine, "GOOD") == 0
        assert _gaps(own_engine, "BAD") == 0
        assert _queued(own_engine, "BAD") == 2  # held, never dropped
        (letter,) = _open_letters(own_engine)
        assert letter.vehicle_id == "BAD" and letter.n_fixes == 2
        assert "0202-12-01" in letter.error
        assert (letter.first_ts, letter.last_ts) == (start, start + dt.timedelta(minutes=20))
        assert process_queue(own_engine, settings=world["settings"]) == 0  # held until retry
        listed = run_pontual("alerts", "failed", DATABASE_URL=world["url"])
        assert listed.returncode == 0, listed.stderr
        assert "veículo BAD" in listed.stdout and "0202-12-01" in listed.stdout
        assert "7743-01-01" in letter.error and "situação" in letter.error
        with own_engine.begin() as conn:  # the admin corrects the rows
            conn.execute(
                text(
                    "UPDATE parking_licences SET valid_from = '2022-12-01' WHERE vehicle_id = 'BAD'"
                )
            )
            conn.execute(text("UPDATE vehicle_status_periods SET valid_from = '2022-12-01'"))
            conn.execute(text("UPDATE vehicles SET alvara_valid_until = '2027-01-01'"))
        retried = run_pontual("alerts", "retry", DATABASE_URL=world["url"])
        assert retried.returncode == 0, retried.stderr
        assert "Detecção concluída: BAD" in retried.stdout
        assert _gaps(own_engine, "BAD") == 1
        assert _queued(own_engine, "BAD") == 0
        assert _open_letters(own_engine) == []


class TestDetectorException:
    def test_fixes_held_and_retried_on_a_later_pass(
        self, world: dict[str, Any], own_engine: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A detector raising on one vehicle holds its fixes; the next due pass detects them."""
        from api.live_worker import process_queue
        from engines import live

        real = live.detect_live

        def broken(session: Any, pings: Any, **kwargs: Any) -> Any:
            if "BAD" in set(pings["vehicle_id"]):
                msg = "falha simulada do detector"
                raise RuntimeError(msg)
            return real(session, pings, **kwargs)

        monkeypatch.setattr(live, "detect_live", broken)
        start = NOW - dt.timedelta(hours=3)
        _send_gap(world["client"], world["devices"]["GOOD"], start=start)
        _send_gap(world["client"], world["devices"]["BAD"], start=start)
        settings = world["settings"].model_copy(update={"live_retry_s": 0.001})
        assert process_queue(own_engine, settings=settings) == 4
        assert (_gaps(own_engine, "GOOD"), _queued(own_engine, "GOOD")) == (1, 0)
        assert (_gaps(own_engine, "BAD"), _queued(own_engine, "BAD")) == (0, 2)
        (letter,) = _open_letters(own_engine)
        assert "falha simulada do detector" in letter.error and letter.attempts == 1
        assert process_queue(own_engine, settings=settings) == 2  # due again: fails again
        assert _open_letters(own_engine)[0].attempts == 2
        monkeypatch.setattr(live, "detect_live", real)  # the bug is fixed
        with own_engine.begin() as conn:
            conn.execute(text("UPDATE live_dead_letters SET next_retry_at = now()"))
        assert process_queue(own_engine, settings=settings) == 2
        assert (_gaps(own_engine, "BAD"), _queued(own_engine, "BAD")) == (1, 0)
        assert _open_letters(own_engine) == []
