"""Schemathesis against a real ``pontual serve`` on 127.0.0.1 (own database, admin token).

Every operation of the live OpenAPI schema gets a bounded number of generated requests, valid
ones and invalid ones (the device routes with the device's token, the others as an admin): no
answer may be a 5xx, carry a status its operation does not document, or break its documented
schema. Operations whose path names seeded records (S1, V1, F1...) run once more with those ids.
Logout runs last, with a token of its own. Left out: the endless alert stream (SSE).

``PONTUAL_FUZZ_EXAMPLES`` raises the examples per operation for a longer run (default 10)::

    PONTUAL_FUZZ_EXAMPLES=200 .venv/bin/pytest tests/api/test_openapi_live.py -q
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from api_factories import DEVICE_SINCE, LiveServer, bearer
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import Engine

MAX_EXAMPLES = int(os.environ.get("PONTUAL_FUZZ_EXAMPLES", "10"))
EXCLUDED = ("/api/v1/alerts/stream",)
DEVICE_PATHS = ("/api/v1/pings", "/osmand")
LOGOUT = "/api/v1/auth/logout"


def _seed(engine: Engine) -> dict[str, Any]:
    """Stands S1, S2, vehicles V1–V3 (V1 licensed at S1, with a device), a finding, users."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from api import accounts
    from db.enforcement.models import Finding
    from db.engine import session_scope
    from db.fleet.models import Vehicle
    from db.stands.models import ParkingLicence, Stand, StandSupervisor

    def square(lat: float, lon: float) -> Any:
        poly = Point(lon, lat).buffer(0.0004, cap_style="square")
        return from_shape(MultiPolygon([poly]), srid=4326)

    with session_scope(engine) as session:
        session.add_all(
            [
                Stand(
                    stand_id="S1", name="Matriz", capacity=3, geometry=square(-30.0277, -51.2287)
                ),
                Stand(
                    stand_id="S2", name="Rodoviária", capacity=5, geometry=square(-30.02, -51.22)
                ),
            ]
        )
        session.add_all(
            [
                Vehicle(vehicle_id=v, prefixo=v, plate=f"ABC{k}D23")
                for k, v in enumerate(("V1", "V2", "V3"))
            ]
        )
        session.flush()
        session.add(ParkingLicence(vehicle_id="V1", stand_id="S1"))
        supervisor = StandSupervisor(
            stand_id="S1", person_name="Fulano", elected_on=dt.date(2024, 1, 2), minutes_ref="1"
        )
        session.add(supervisor)
        session.flush()
        supervisor_id = supervisor.supervisor_id
        now = dt.datetime.now(dt.UTC)
        session.add(
            Finding(
                finding_id="F1", kind="tracking_gap", vehicle_id="V1", stand_id=None,
                started_at=now - dt.timedelta(hours=2), ended_at=now - dt.timedelta(hours=1),
                confidence=0.9, details={"gap_s": 3600},
                geometry=from_shape(Point(-51.2287, -30.0277), srid=4326),
            )
        )  # fmt: skip
        admin = accounts.create_user(
            session=session, username="fuzz", password="senha-de-teste-123", role="admin"
        )
        token, _ = accounts.issue_token(session=session, user=admin, ttl_s=3600)
        leaving, _ = accounts.issue_token(session=session, user=admin, ttl_s=3600)
        _, device = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id="V1"
        )
    known = {
        "stand_id": "S1",
        "vehicle_id": "V1",
        "finding_id": "F1",
        "municipality": "4314902",
        "supervisor_id": supervisor_id,
    }
    return {"admin": token, "logout": leaving, "device": device, "known": known}


@pytest.fixture
def live(own_engine: Engine, tmp_path: Path) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    """A seeded database of the test's own and ``pontual serve`` on it."""
    tokens = _seed(own_engine)
    url = own_engine.url.render_as_string(hide_password=False)
    with LiveServer(url, tmp_path / "serve.log", PONTUAL_PUBLIC_RATE_LIMIT_PER_MIN="100000") as s:
        yield s, tokens


def _run(
    operation: Any,
    headers: dict[str, str],
    failures: list[str],
    *,
    mode: GenerationMode,
    device_id: str | None = None,
    path_parameters: dict[str, Any] | None = None,
) -> None:
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: schemathesis.Case) -> None:
        if device_id is not None:  # OsmAnd: the token is the 'id' parameter
            case.query = {**(case.query or {}), "id": device_id}
        case.call_and_validate(
            headers=headers,
            checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
            timeout=60,
        )

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (no parameter, no body): nothing to test
        pass
    except Exception as exc:  # noqa: BLE001 - collect every operation's failure, then report
        failures.append(f"{operation.label} ({mode.value}): {exc}"[:3000])


def test_live_server_fuzz(live: tuple[LiveServer, dict[str, Any]]) -> None:
    """No 5xx, no undocumented status, no response outside its schema, on every operation."""
    server, tokens = live
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json").exclude(
        path=list(EXCLUDED)
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30
    failures: list[str] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        for operation in operations:
            if operation.path == LOGOUT:
                continue
            token = tokens["device"] if operation.path in DEVICE_PATHS else tokens["admin"]
            device_id = tokens["device"] if operation.path == "/osmand" else None
            _run(operation, bearer(token), failures, mode=mode, device_id=device_id)
    # Once more with the path's ids of seeded records, so that the checks reach past the 404s.
    for operation in operations:
        names = {p.name for p in operation.path_parameters}
        if operation.path != LOGOUT and names and names <= tokens["known"].keys():
            pinned = {name: tokens["known"][name] for name in names}
            mode = GenerationMode.POSITIVE
            _run(operation, bearer(tokens["admin"]), failures, mode=mode, path_parameters=pinned)
    for operation in (op for op in operations if op.path == LOGOUT):
        _run(operation, bearer(tokens["logout"]), failures, mode=GenerationMode.POSITIVE)
    assert not failures, "\n\n".join(failures)
    assert "Traceback" not in server.log_path.read_text(errors="replace")
