"""The enforcement agent's journey in Chromium against a real ``pontual serve`` and PostGIS.

An agent logs in and keeps the inbox open; a device posts fixes to ``/api/v1/pings`` that
complete a tracking gap; the alert arrives live in the inbox; the agent opens it, generates the
proposals (as the workflow does), opens the proposal, confirms it and downloads the auto de
infração as PDF.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_factories import DEVICE_SINCE, suspend_until_today
from playwright.sync_api import expect
from pypdf import PdfReader
from sqlalchemy import Engine, text
from web_fiscal import register_vehicle
from web_helpers import WEB_USERS, ServeProcess, assert_accessible, save_screenshot

pytestmark = pytest.mark.browser

ALERT_WAIT_MS = 30_000
"""How long the test waits for the alert to arrive (the assertion is that it arrives)."""


def _device(engine: Engine, vehicle_id: str) -> str:
    """Register a device of ``vehicle_id``; return its token."""
    from api import accounts
    from db.engine import session_scope

    with session_scope(engine) as session:
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    return token


def _post_fix(
    server: ServeProcess,
    token: str,
    *,
    minutes_ago: float,
    lon: float = -51.2287,
    meter: str = "occupied",
) -> None:
    """POST one fix (occupied unless ``meter``) at the seeded stand (or ``lon``),
    ``minutes_ago`` old, as the device."""
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)
    fix = {"timestamp": at.isoformat(), "lat": -30.0277, "lon": lon, "meter": meter}
    response = httpx.post(
        server.url + "/api/v1/pings",
        json={"pings": [fix]},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1


def test_alert_arrives_live_then_confirm_and_download_the_pdf(
    page: Any, login: Callable, web_engine: Engine, web_server: ServeProcess
) -> None:
    """Fixes posted by a device make a tracking gap; its alert appears in the open inbox (new,
    announced, counted in the total; the inbox names its times' zone); the agent generates the
    proposal, confirms it (art. 58, IX: no exception to answer) and downloads the PDF, which
    names the auto number and the vehicle; the confirmation and the document's personal data
    are audited with the web user as actor."""
    vehicle = f"JR{secrets.token_hex(3).upper()}"
    register_vehicle(web_engine, vehicle, plate="IJK9L87", holder="Titular da Jornada")
    token = _device(web_engine, vehicle)
    _post_fix(web_server, token, minutes_ago=25)  # occupied: the next fix closes a 20-min gap

    login(page, "agent")
    alerts = page.locator("#alertas")
    expect(alerts).to_have_attribute("data-live", "on", timeout=15_000)
    total = int(page.locator("#alertas-total").inner_text())
    expect(page.locator("#alertas-fuso")).to_have_text("Horas locais (horário de Brasília).")
    _post_fix(web_server, token, minutes_ago=5, lon=-51.2287 + 0.0623)  # 6 km driven silent

    item = alerts.locator("li.alert", has_text=f"Veículo {vehicle}")
    expect(item).to_be_visible(timeout=ALERT_WAIT_MS)
    expect(item).to_have_class("alert alert--new")
    expect(item).to_contain_text("Falha de rastreamento")
    expect(page.locator("#alertas-estado")).to_contain_text(
        f"Novo alerta: Falha de rastreamento, veículo {vehicle}"
    )
    assert page.title().startswith("(1) ")
    expect(page.locator("#alertas-total")).to_have_text(str(total + 1))  # the count follows

    item.get_by_role("link", name="Ver a evidência e gerar a proposta").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Achado: Falha de rastreamento")
    page.get_by_label("Município (regulamento)").select_option("4314902")
    page.get_by_role("button", name="Gerar propostas").click()
    expect(page.get_by_role("status")).to_contain_text(re.compile(r"propostas? novas? geradas?\."))
    page.get_by_role("link", name="Abrir a proposta").first.click()

    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"Falha de rastreamento — veículo {vehicle}"
    )
    expect(page.get_by_role("list", name="Legenda do mapa")).to_contain_text(
        "Posições da constatação"
    )
    expect(page.locator("#mapa .leaflet-interactive").first).to_be_attached()
    expect(page.locator(".excerpt")).to_contain_text("Subsistema de Rastreamento da Frota")
    page.once("dialog", lambda dialog: dialog.accept())  # "Lavrar o auto …?"
    page.get_by_role("button", name="Confirmar e lavrar o auto").click()
    notice = page.get_by_role("status")
    expect(notice).to_contain_text("Proposta confirmada: auto de infração AI-4314902-")
    auto_number = notice.inner_text().split("auto de infração ", 1)[1].split(" ", 1)[0]

    with page.expect_download() as download:
        page.get_by_role("link", name="Auto de Infração em PDF").click()
    pdf = download.value
    assert pdf.suggested_filename == f"auto-{auto_number}.pdf"
    body = PdfReader(io.BytesIO(Path(pdf.path()).read_bytes()))
    words = " ".join(p.extract_text() for p in body.pages)
    for field in (auto_number, vehicle, "art. 58", WEB_USERS["agent"], "IJK9L87"):
        assert field in words, field

    proposal_id = page.url.rsplit("/", 1)[1].split("?", 1)[0]
    with web_engine.connect() as conn:
        confirm = conn.execute(
            text(
                "SELECT actor, details FROM audit_log WHERE entity = 'proposal' "
                "AND entity_id = :p AND action = 'confirm'"
            ),
            {"p": proposal_id},
        ).one()
        read = conn.execute(
            text(
                "SELECT actor, details FROM audit_log WHERE action = 'read_personal_data' "
                "AND entity = 'proposal_documents' AND entity_id = :p"
            ),
            {"p": proposal_id},
        ).all()
    assert confirm.actor == WEB_USERS["agent"]
    assert confirm.details["auto_number"] == auto_number
    assert [r.actor for r in read] == [f"user:{WEB_USERS['agent']}"]
    assert read[0].details["fields"] == ["plate", "holder_name"]


def test_a_withdrawn_alert_is_updated_in_the_open_inbox(
    page: Any, login: Callable, web_engine: Engine, web_server: ServeProcess
) -> None:
    """A suspended taxi's ride yesterday arrives in the open inbox marked provisório; the
    suspension is annulled and today's first fix closes the day: the same item is replaced,
    marked Atualizado and retirado, offers no proposal, and the status line says so."""
    from zoneinfo import ZoneInfo

    vehicle = f"JW{secrets.token_hex(3).upper()}"
    register_vehicle(web_engine, vehicle, plate="JKL1M23", holder="Titular Suspenso")
    today = suspend_until_today(web_engine, vehicle)
    zone = ZoneInfo("America/Sao_Paulo")
    token = _device(web_engine, vehicle)
    noon = dt.datetime.combine(today - dt.timedelta(days=1), dt.time(12), tzinfo=zone)
    now = dt.datetime.now(dt.UTC)

    login(page, "agent")
    alerts = page.locator("#alertas")
    expect(alerts).to_have_attribute("data-live", "on", timeout=15_000)
    for k in range(5):  # a ride of 3 minutes, yesterday at noon, then the meter free
        minutes = (now - noon).total_seconds() / 60 - k
        meter = "occupied" if k < 4 else "free"
        _post_fix(web_server, token, minutes_ago=minutes, lon=-51.2287 + 0.004 * k, meter=meter)
    item = alerts.locator("li.alert", has_text=f"Veículo {vehicle}")
    expect(item).to_be_visible(timeout=ALERT_WAIT_MS)
    expect(item).to_contain_text("provisório")
    expect(item.get_by_role("link")).to_have_text("Ver a evidência")

    with web_engine.begin() as conn:  # the suspension annulled that day
        conn.execute(
            text("DELETE FROM vehicle_status_periods WHERE vehicle_id = :v"), {"v": vehicle}
        )
    _post_fix(web_server, token, minutes_ago=1, meter="free")  # today: yesterday is closed
    expect(item).to_contain_text("retirado", timeout=ALERT_WAIT_MS)
    expect(item).to_contain_text("Atualizado")
    expect(item).not_to_contain_text("provisório")
    expect(alerts.locator("li.alert", has_text=f"Veículo {vehicle}")).to_have_count(1)
    expect(page.locator("#alertas-estado")).to_contain_text("Alerta retirado: ")
    expect(page.locator("#alertas-estado")).to_contain_text(f"veículo {vehicle}")
    assert_accessible(page)
    save_screenshot(page, "web-fiscal-alerta-retirado.png")
