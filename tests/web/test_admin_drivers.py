"""The Condutores pages against a real ``pontual serve``: find, create and edit a driver in
Chromium, their CNH / ICTP periods and links ended or corrected, every change audited.

Screenshots go to ``test-artifacts/``; with ``PONTUAL_UPDATE_SCREENSHOTS=1`` also to
``docs/screenshots/``.
"""

from __future__ import annotations

import html
import itertools
import os
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, text
from web_helpers import assert_accessible, csrf_from, save_screenshot

from db.engine import session_scope
from db.fleet.models import Vehicle

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """Return an id no other test of the session uses."""
    return f"{prefix}-c{os.getpid()}-{next(_ids)}"  # "c": apart from test_admin.py's ids


def _audit(engine: Engine, driver_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The driver's audit rows (action, entity, details), oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT action, entity, details FROM audit_log WHERE entity_id = :d "
                "OR details->'ids' ? :d ORDER BY entry_id"
            ),
            {"d": driver_id},
        ).all()
    return [(a, e, d) for a, e, d in rows]


def _post(client: Any, page_url: str, action: str, data: dict[str, str]) -> Any:
    token = csrf_from(client.get(page_url).text)
    return client.post(action, data={"csrf_token": token, **data})


@pytest.mark.browser
def test_admin_finds_creates_and_edits_a_driver(
    page: Any, login: Callable, web_engine: Engine
) -> None:
    """From the admin home: create a synthetic driver, record a CNH suspension and end it, link
    the driver to a prefixo; a period ending before it starts is refused on its row, in pt-BR;
    the pages pass axe; each change is one audit row with before and after."""
    driver_id, vehicle_id = unique("CND"), unique("PFX")
    with session_scope(web_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))
    login(page, "admin")
    page.get_by_role("link", name="Condutores").click()
    page.wait_for_url("**/admin/condutores")
    assert_accessible(page)
    new = page.locator("form[method=post][action='/admin/condutores']")
    new.get_by_label("Identificador (matrícula municipal)").fill(driver_id)
    new.get_by_label("Nome").fill("Condutora Fictícia da Silva")
    new.get_by_label("Categoria da CNH").select_option("B")
    new.get_by_label("CNH válida até").fill("2027-05-31")
    new.get_by_label("Dados fictícios").check()
    with page.expect_navigation():
        new.get_by_role("button", name="Cadastrar condutor").click()
    assert page.get_by_role("heading", level=1).inner_text() == f"Condutor {driver_id}"
    assert "Condutor cadastrado." in page.locator(".notice--info").first.inner_text()
    assert "não é uma pessoa real" in page.content()

    form = page.locator("form[action$='/periodos']")
    form.get_by_label("Documento").select_option("cnh")
    form.get_by_label("Situação").select_option("suspensa")
    form.get_by_label("Desde (vazio: desconhecido)").fill("2025-03-01")
    with page.expect_navigation():
        form.get_by_role("button", name="Registrar período").click()
    rows = page.locator("table").first.locator("tbody tr")
    assert rows.count() == 1 and "sem término" in rows.first.inner_text()

    row_form = rows.first.locator("form")
    row_form.get_by_label("Até (último dia)").fill("2025-02-01")
    with page.expect_navigation():
        row_form.get_by_role("button", name="Salvar").click()
    error = page.locator("table").first.locator(".field-error")
    assert "antes de 'valid_from'" in error.inner_text()
    row_form = page.locator("table").first.locator("tbody tr form")
    row_form.get_by_label("Até (último dia)").fill("2025-03-20")
    row_form.get_by_label("Motivo").fill("suspensão cumprida")
    with page.expect_navigation():
        row_form.get_by_role("button", name="Salvar").click()
    assert "20/03/2025" in page.locator("table").first.inner_text()

    link = page.locator("form[action$='/vinculos']")
    link.get_by_label("Prefixo (vehicle_id)").fill(vehicle_id)
    link.get_by_label("Papel").select_option("auxiliar")
    link.get_by_label("Desde (obrigatório)").fill("2025-01-01")
    with page.expect_navigation():
        link.get_by_role("button", name="Vincular").click()
    assert vehicle_id in page.locator("table").nth(1).inner_text()
    assert_accessible(page)
    save_screenshot(page, "web-admin-condutor.png")

    changes = [(a, e, d) for a, e, d in _audit(web_engine, driver_id) if a != "read_personal_data"]
    assert [(a, e) for a, e, _ in changes] == [
        ("create", "drivers"),
        ("create", "driver_document_periods"),
        ("update", "driver_document_periods"),
        ("create", "driver_assignments"),
    ]
    update = changes[2][2]
    assert update["before"] == {"valid_until": None}
    assert update["after"] == {"valid_until": "2025-03-20"}
    assert update["reason"] == "suspensão cumprida"

    page.goto(f"/admin/condutores?q={driver_id}")
    assert page.locator("tbody tr").count() == 1
    assert "(dados fictícios)" in page.locator("tbody tr").inner_text()
    save_screenshot(page, "web-admin-condutores.png")


def test_reads_are_audited(web_client: Callable, web_engine: Engine) -> None:
    """The list and a driver's page each write a read of personal data naming the driver."""
    admin = web_client("admin")
    before = len(_audit(web_engine, "D1"))
    assert admin.get("/admin/condutores", params={"q": "D1"}).status_code == 200
    assert admin.get("/admin/condutores/D1").status_code == 200
    reads = [d for a, _, d in _audit(web_engine, "D1")[before:] if a == "read_personal_data"]
    assert [r["route"] for r in reads] == ["/admin/condutores", "/admin/condutores/D1"]


def test_edit_keeps_what_is_not_changed_and_refuses_bad_values(
    web_client: Callable, web_engine: Engine
) -> None:
    """A form sent with one field changed writes that field only; a bad category, a
    validity 20 years ahead and an empty name are refused on the form (422), nothing stored."""
    admin = web_client("admin")
    driver_id = unique("EDT")
    made = _post(
        admin,
        "/admin/condutores",
        "/admin/condutores",
        {"driver_id": driver_id, "name": "Condutor Fictício", "cnh_number": "123"},
    )
    assert made.status_code == 303, html.unescape(made.text)[-600:]
    url = f"/admin/condutores/{driver_id}"
    base = {"name": "Condutor Fictício", "cnh_number": "123", "cnh_category": ""}
    done = _post(admin, url, url, base | {"cnh_category": "D"})
    assert done.status_code == 303
    (update,) = [d for a, _, d in _audit(web_engine, driver_id) if a == "update"]
    assert update["after"] == {"cnh_category": "D"}
    for change, message in (
        ({"cnh_category": "Z"}, "esperado um de"),
        ({"cnh_valid_until": "2099-01-01"}, "hoje + 10 anos"),
        ({"name": ""}, "campo obrigatório"),
    ):
        refused = _post(admin, url, url, base | change)
        assert refused.status_code == 422, change
        assert message in html.unescape(refused.text), change
    assert len([a for a, _, _ in _audit(web_engine, driver_id) if a == "update"]) == 1


def test_a_driver_written_otherwise_is_refused(web_client: Callable, web_engine: Engine) -> None:
    """An id the registry holds in other case or with separators ('cnd-…' for 'CND-…') is the
    same driver to the detectors: the form refuses a second record and names the first."""
    admin = web_client("admin")
    driver_id = unique("CND")
    made = _post(
        admin, "/admin/condutores", "/admin/condutores", {"driver_id": driver_id, "name": "X"}
    )
    assert made.status_code == 303
    for other in (driver_id.lower(), driver_id.replace("-", "")):
        refused = _post(
            admin, "/admin/condutores", "/admin/condutores", {"driver_id": other, "name": "Y"}
        )
        assert refused.status_code == 422
        assert f"o cadastro já tem '{driver_id}'" in html.unescape(refused.text)
        assert _audit(web_engine, other) == []


def test_a_third_auxiliary_is_refused_on_the_form(web_client: Callable, web_engine: Engine) -> None:
    """Linking a third auxiliar at once to a Pinto Bandeira prefixo is refused with its law's
    limit (art. 14); the form says which laws cap the auxiliares."""
    admin = web_client("admin")
    vehicle_id = unique("AUX")
    with session_scope(web_engine) as session:
        session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf) "
                "VALUES ('4314548', 'Pinto Bandeira', 'RS') ON CONFLICT DO NOTHING"
            )
        )
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id, municipality_code="4314548"))
    link = {"vehicle_id": vehicle_id, "role": "auxiliar", "valid_from": "2025-01-01"}
    for n in range(3):
        driver_id = unique("AUX")
        _post(
            admin, "/admin/condutores", "/admin/condutores", {"driver_id": driver_id, "name": "X"}
        )
        url = f"/admin/condutores/{driver_id}"
        response = _post(admin, url, f"{url}/vinculos", link)
        assert response.status_code == (303 if n < 2 else 422)
    page = html.unescape(response.text)
    assert "o limite é 2 (art. 14 da lei de Pinto Bandeira)" in page
    assert "sem limite em Porto Alegre" in page


def test_unknown_driver_or_period_is_404(web_client: Callable) -> None:
    """A driver, period or link that does not exist is the 404 page."""
    admin = web_client("admin")
    assert admin.get("/admin/condutores/NAO-EXISTE").status_code == 404
    page = "/admin/condutores/D1"
    response = _post(admin, page, f"{page}/periodos/999999", {"status": "regular"})
    assert response.status_code == 404
