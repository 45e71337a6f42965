"""Personal data: every route × every caller; an answer carrying any is audited before it leaves.

The rule (README, "What each role sees"): plates and permit holders go to admins and agents
(the vehicle registry on request, the auto de infração and the notificação); a stand's
licensees' names, addresses and phones to admins and that stand's supervisor (POA art. 43,
parágrafo único); the stand supervisors' names to admins, agents and that stand's supervisor;
planners and citizens get none. Each such answer writes a ``read_personal_data`` row first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import BytesIO
from typing import Any

import pytest
from api_factories import ROLES, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.audit import READ_PERSONAL_DATA

POA = "4314902"
PERSONAL = (
    "ABC1D23",
    "XYZ9K87",
    "QWE4R56",
    "Maria da Silva",
    "12345678901",
    "99999-0000",
    "Rua das Flores",
    "Joana Supervisora",
    "Carlos Auxiliar",
)
"""Every personal value of the seeded registry (plates, holder, address, supervisor, driver)."""
SKIPPED = {"/api/v1/alerts/stream", "/docs/assets/{name}", "/docs/oauth2-redirect"}
"""Endless streams and static files."""
EXPECTED = {
    ("/api/v1/vehicles?include_personal=true", "admin"),
    ("/api/v1/vehicles?include_personal=true", "agent"),
    ("/api/v1/vehicles/V1?include_personal=true", "admin"),
    ("/api/v1/vehicles/V1?include_personal=true", "agent"),
    ("/api/v1/drivers", "admin"),
    ("/api/v1/drivers/PD-AUX", "admin"),
    ("/api/v1/stands/S1/supervisors", "admin"),
    ("/api/v1/stands/S1/supervisors", "agent"),
    ("/api/v1/stands/S1/supervisors", "supervisor"),
    ("/api/v1/supervision/stands/S1/licensees", "admin"),
    ("/api/v1/supervision/stands/S1/licensees", "supervisor"),
    *(
        (f"/api/v1/proposals/{{pid}}/documents/{kind}?format={fmt}", role)
        for kind in ("auto", "notificacao")
        for fmt in ("pdf", "html")
        for role in ("admin", "agent")
    ),
}
"""(url, caller) pairs whose answer carries personal data: the rule of the README."""


@pytest.fixture(scope="module")
def registry(
    client_module: TestClient, seeded: dict, api_engine: Engine
) -> Iterator[dict[str, str]]:
    """A POA proposal of V1, a supervisor of S1, an auxiliary driver and V1's holder address.

    The auxiliary's link to V1 is removed afterwards: other modules list V1's licensees.
    """
    import datetime as dt

    from sqlalchemy import select

    from db.engine import session_scope
    from db.fleet.models import Driver, DriverAssignment, Municipality
    from db.stands import registry as stand_registry

    with session_scope(api_engine) as s:
        if s.execute(select(Municipality).where(Municipality.code == POA)).first() is None:
            s.add(
                Municipality(code=POA, name="Porto Alegre", uf="RS", timezone="America/Sao_Paulo")
            )
        s.execute(text("UPDATE permit_holders SET address = 'Rua das Flores, 10'"))
        if s.get(Driver, "PD-AUX") is None:
            s.add(Driver(driver_id="PD-AUX", name="Carlos Auxiliar"))
            s.flush()
            s.add(
                DriverAssignment(
                    driver_id="PD-AUX",
                    vehicle_id="V1",
                    role="auxiliar",
                    valid_from=dt.date(2020, 1, 1),
                )
            )
            stand_registry.elect_supervisor(
                session=s,
                stand_id="S1",
                person_name="Joana Supervisora",
                elected_on=dt.date(2024, 1, 10),
                minutes_ref="ata 7/2024",
                actor="user:u_admin",
            )
    agent = bearer(seeded["tokens"]["agent"])
    generated = client_module.post(
        "/api/v1/proposals/generate", json={"municipality": POA}, headers=agent
    )
    assert generated.status_code == 200, generated.text
    listed = client_module.get(
        "/api/v1/proposals", params={"vehicle_id": "V1", "municipality": POA}, headers=agent
    ).json()
    gaps = [p for p in listed["data"] if p["kind"] == "tracking_gap"]
    yield {"pid": gaps[-1]["proposal_id"]}
    with session_scope(api_engine) as s:
        s.execute(text("DELETE FROM driver_assignments WHERE driver_id = 'PD-AUX'"))


@pytest.fixture(scope="module")
def client_module(app: Any) -> Any:
    """A test client for the module's fixtures."""
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _urls(app: Any, pid: str) -> list[str]:
    from fastapi.routing import iter_route_contexts

    ids = {
        "stand_id": "S1",
        "vehicle_id": "V1",
        "driver_id": "PD-AUX",
        "finding_id": "F1",
        "proposal_id": pid,
        "municipality": POA,
        # the console's pages (a cookie session: bearer callers are turned away)
        "user_id": "1",
        "device_id": "1",
        "table": "indicadores",
        "documento": "auto",
    }
    urls = []
    for route in iter_route_contexts(app.routes):
        if "GET" not in (route.methods or ()) or route.path in SKIPPED:
            continue
        if route.path.endswith("/documents/{kind}"):
            base = route.path.replace("{proposal_id}", pid)
            urls += [
                base.replace("{kind}", kind) + f"?format={fmt}"
                for kind in ("auto", "notificacao")
                for fmt in ("pdf", "html")
            ]
            continue
        url = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], route.path)
        if route.path.startswith("/api/v1/public/"):
            url += "?lat=-30.0277&lon=-51.2287&radius_m=2000"
        urls.append(url)
        if route.path.startswith("/api/v1/vehicles"):
            urls.append(url + "?include_personal=true")
    return sorted(set(urls))


def _text(response: Any) -> str:
    if response.headers.get("content-type", "").startswith("application/pdf"):
        from pypdf import PdfReader

        return " ".join(p.extract_text() for p in PdfReader(BytesIO(response.content)).pages)
    return response.text


def _last_entry(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT coalesce(max(entry_id), 0) FROM audit_log")).scalar())


def _audits_since(engine: Engine, entry_id: int, actor: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT details FROM audit_log WHERE entry_id > :e AND action = :a AND actor = :u"
            ),
            {"e": entry_id, "a": READ_PERSONAL_DATA, "u": actor},
        ).scalars()
        return list(rows)


def test_every_answer_with_personal_data_is_audited(
    app: Any, client: TestClient, seeded: dict, registry: dict[str, str], api_engine: Engine
) -> None:
    """Walk every GET route × caller: personal values in the answer ⇒ a read_personal_data row
    by that caller for that route, naming fields; and the carriers are exactly the README's."""
    pid = registry["pid"]
    carried = set()
    for url in _urls(app, pid):
        for caller in ("public", *ROLES):
            headers = bearer(seeded["tokens"][caller]) if caller != "public" else {}
            before = _last_entry(api_engine)
            response = client.get(url, headers=headers)
            assert response.status_code < 500, (url, caller, response.text[:300])
            if response.status_code != 200:
                continue
            found = [v for v in PERSONAL if v in _text(response)]
            if not found:
                continue
            carried.add((url.replace(pid, "{pid}"), caller))
            audits = _audits_since(api_engine, before, f"user:u_{caller}")
            path = url.split("?")[0]
            assert any(a["route"] == path and a["fields"] for a in audits), (url, caller, found)
            assert response.headers["Cache-Control"] == "no-store"
    assert carried == EXPECTED
