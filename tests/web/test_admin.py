"""The Administração pages against a real ``pontual serve``: stands drawn in Chromium, licences,
devices with their one-time token and QR code, users, the import preview, the audit log.

Screenshots go to ``test-artifacts/``; with ``PONTUAL_UPDATE_SCREENSHOTS=1`` also to
``docs/screenshots/``.
"""

from __future__ import annotations

import datetime as dt
import html
import itertools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, func, select, text
from web_helpers import (
    WEB_PASSWORD,
    WEB_USERS,
    assert_accessible,
    csrf_from,
    http_login,
    save_screenshot,
)

from api import accounts
from api.web.admin_devices import qr_svg
from db.accounts.models import Device, User
from db.enforcement.models import AuditEntry
from db.engine import session_scope
from db.fleet.models import Municipality, Vehicle
from db.stands.models import ParkingLicence, Stand
from db.stands.registry import create_stand

ROOT = Path(__file__).resolve().parents[2]
_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """Return an id no other test of the session uses."""
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def add_vehicle(engine: Engine, vehicle_id: str) -> None:
    """Register a prefixo in the fleet."""
    with session_scope(engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))


def count(engine: Engine, model: Any, *where: Any) -> int:
    """Count the rows of a table (matching ``where``)."""
    with session_scope(engine) as session:
        return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def changes(engine: Engine) -> int:
    """Count the audit entries that record a change (reads of personal data left out)."""
    return count(engine, AuditEntry, AuditEntry.action != "read_personal_data")


def post_form(client: httpx.Client, page_url: str, action: str, data: dict[str, str]) -> Any:
    """Post a console form with the CSRF token of the page it is on."""
    token = csrf_from(client.get(page_url).text)
    return client.post(action, data={"csrf_token": token, **data})


def bearer(base_url: str, username: str) -> dict[str, str]:
    """Return the Authorization header of an API token of ``username``."""
    answer = httpx.post(
        base_url + "/api/v1/auth/token",
        data={"username": username, "password": WEB_PASSWORD},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


# --- the acceptance journey ----------------------------------------------------------------------


@pytest.mark.browser
def test_admin_draws_a_stand_and_grants_a_licence(
    page: Any, login: Callable, web_server: Any, web_engine: Engine
) -> None:
    """An admin draws a polygon with the mouse, saves it, finds it in the list and in the
    stands API, grants a licence to a prefixo; the registry and the audit log have both."""
    stand_id, vehicle_id = unique("DESENHO"), unique("PFX")
    add_vehicle(web_engine, vehicle_id)
    login(page, "admin")
    page.goto("/admin/pontos/novo")
    page.wait_for_selector("#mapa[data-loaded]")
    page.get_by_role("button", name="Desenhar Polígonos").click()
    box = page.locator("#mapa").bounding_box()
    corners = [(-320, 90), (-140, 90), (-140, 260), (-320, 260)]
    points = [(box["x"] + box["width"] + dx, box["y"] + dy) for dx, dy in corners]
    for x, y in points:
        page.mouse.click(x, y)
    page.mouse.click(*points[0])  # back on the first vertex closes the polygon
    page.wait_for_selector("#mapa[data-drawn=polygon]")
    typed = page.get_by_label("Vértices do polígono").input_value().splitlines()
    assert len(typed) == 4
    page.get_by_label("Identificador (stand_id)").fill(stand_id)
    page.get_by_label("Nome").fill("Ponto desenhado")
    page.get_by_label("Vagas").fill("4")
    page.get_by_label("Tipo").select_option("fixo")
    save_screenshot(page, "web-admin-ponto-novo.png")
    page.get_by_role("button", name="Salvar ponto").click()
    page.wait_for_url(f"**/admin/pontos/{stand_id}?aviso=criado")
    assert page.get_by_role("status").inner_text() == "Ponto criado."
    assert (
        page.get_by_role("heading", level=1).inner_text() == f"Ponto {stand_id} — Ponto desenhado"
    )

    page.goto(f"/admin/pontos?q={stand_id}")
    assert page.get_by_role("link", name=stand_id, exact=True).count() == 1
    page.wait_for_selector("#mapa[data-loaded]")  # the stand is a shape on the map, no tab stop
    assert page.locator("#mapa path.leaflet-interactive").count() >= 1
    page.locator("#mapa").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.tagName") != "path"
    api = httpx.get(
        f"{web_server.url}/api/v1/stands/{stand_id}",
        headers=bearer(web_server.url, WEB_USERS["admin"]),
        timeout=30,
    )
    assert api.status_code == 200
    feature = api.json()
    assert feature["properties"]["capacity"] == 4 and feature["properties"]["kind"] == "fixo"
    ring = feature["geometry"]["coordinates"][0][0]
    drawn = [tuple(float(v) for v in line.split(", ")) for line in typed]
    assert len(ring) == 5 and ring[0] == ring[-1]
    for (lat, lon), (x, y) in zip(drawn, ring[:-1], strict=True):
        assert abs(lat - y) < 1e-6 and abs(lon - x) < 1e-6

    page.goto(f"/admin/pontos/{stand_id}")
    page.get_by_label("Prefixo (vehicle_id)").first.fill(vehicle_id)
    page.get_by_role("button", name="Conceder licença").click()
    page.wait_for_url("**aviso=licenca")
    assert page.get_by_role("status").inner_text() == "Licença concedida."
    row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name=vehicle_id))
    assert "sem término" in row.inner_text()
    save_screenshot(page, "web-admin-ponto.png")

    with session_scope(web_engine) as session:
        licences = session.scalars(
            select(ParkingLicence).where(ParkingLicence.stand_id == stand_id)
        ).all()
        assert [(lic.vehicle_id, lic.valid_until) for lic in licences] == [(vehicle_id, None)]
        entries = session.scalars(
            select(AuditEntry).where(AuditEntry.actor == "user:web_admin")
        ).all()
        mine = [
            (e.action, e.entity)
            for e in entries
            if e.entity_id == stand_id or (e.details or {}).get("stand_id") == stand_id
        ]
        assert ("create", "stand") in mine and ("grant", "parking_licence") in mine
    page.goto(f"/admin/auditoria?texto={stand_id}")
    table = page.get_by_role("table").inner_text()
    assert "concessão" in table and "criação" in table and stand_id in table
    assert "licença de ponto" in table and "web_admin" in table and "user:" not in table


@pytest.mark.browser
def test_stand_area_typed_with_the_keyboard(page: Any, login: Callable, web_engine: Engine) -> None:
    """Without the mouse: point and radius typed in the fields draw the circle and save it."""
    stand_id = unique("TECLADO")
    login(page, "admin")
    page.goto("/admin/pontos/novo")
    page.get_by_label("Identificador (stand_id)").fill(stand_id)
    page.get_by_label("Nome").fill("Ponto pelo teclado")
    page.get_by_label("Ponto e raio").check()
    page.get_by_label("Latitude do centro").fill("-30,0300")
    page.get_by_label("Longitude do centro").fill("-51.2300")
    page.get_by_label("Raio (metros)").fill("25")
    page.get_by_label("Raio (metros)").press("Tab")
    page.wait_for_selector("#mapa[data-drawn=circle]")
    page.get_by_label("Raio (metros)").focus()
    page.keyboard.press("Enter")  # submits the form
    page.wait_for_url(f"**/admin/pontos/{stand_id}?aviso=criado")
    with session_scope(web_engine) as session:
        stand = session.get(Stand, stand_id)
        assert stand is not None and stand.radius_m == 25.0


# --- a bad stand ---------------------------------------------------------------------------------


BAD_STANDS = {
    "no name": (
        {"mode": "ponto", "lat": "-30.03", "lon": "-51.23", "radius_m": "20"},
        "ponto-nome",
        "informe o nome do ponto",
    ),
    "empty geometry": (
        {"name": "Ponto ruim", "mode": "poligono", "vertices": ""},
        "ponto-area",
        "polígono vazio",
    ),
    "tiny radius": (
        {"name": "Ponto ruim", "mode": "ponto", "lat": "-30.03", "lon": "-51.23"}
        | {"radius_m": "5e-324"},
        "ponto-area",
        "raio de 5e-324 m (radius_m) fora do intervalo aceito: de 1 a 1000 metros",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_STANDS))
def test_bad_stand_is_refused_in_portuguese(
    case: str, web_client: Callable, web_engine: Engine
) -> None:
    """No name, an empty polygon, or a radius of 5e-324 m: 422, the pt-BR message next to the
    field, and nothing written."""
    client = web_client("admin")
    data, field, message = BAD_STANDS[case]
    before = (count(web_engine, Stand), changes(web_engine))
    answer = post_form(
        client, "/admin/pontos/novo", "/admin/pontos", {"stand_id": unique("RUIM"), **data}
    )
    assert answer.status_code == 422
    error = re.search(rf'<p class="field-error" id="{field}-erro"[^>]*>([^<]*)</p>', answer.text)
    assert error is not None and message in html.unescape(error.group(1))
    assert (count(web_engine, Stand), changes(web_engine)) == before


@pytest.mark.parametrize(
    ("action", "data"),
    [
        ("licencas", {"vehicle_id": "X", "valid_from": "0202-12-01"}),
        ("desativar", {"on": "0202-12-01"}),
    ],
)
def test_date_in_year_0202_is_refused(
    action: str, data: dict[str, str], web_client: Callable, web_engine: Engine
) -> None:
    """A registry date typed as 0202-12-01: the pt-BR range message, nothing written."""
    client = web_client("admin")
    before = (count(web_engine, ParkingLicence), changes(web_engine))
    answer = post_form(client, "/admin/pontos/S1", f"/admin/pontos/S1/{action}", data)
    assert answer.status_code == 422
    text = html.unescape(answer.text)
    assert "era 0202-12-01; esperado uma data entre 1990-01-01 e" in text
    assert (count(web_engine, ParkingLicence), changes(web_engine)) == before
    with session_scope(web_engine) as session:
        assert session.get(Stand, "S1").retired_at is None  # type: ignore[union-attr]


# --- devices -------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r'id="device-token">([^<]+)<')
_LINK_RE = re.compile(r'id="qr-payload">([^<]+)<')
_URL_RE = re.compile(r'id="server-url">([^<]+)<')
_SVG_RE = re.compile(r"<svg .*?</svg>", re.S)


def test_device_token_is_shown_once_with_its_qr_code(
    web_client: Callable, web_server: Any, web_engine: Engine
) -> None:
    """A new device: its token once (not on a reload), the OsmAnd URL, and a QR code that
    encodes exactly the Traccar Client link the page prints; the token sends fixes until the
    device is revoked."""
    vehicle_id = unique("GPS")
    client = web_client("admin")
    asked = post_form(
        client, "/admin/dispositivos", "/admin/dispositivos", {"vehicle_id": vehicle_id}
    )  # a prefixo the fleet lacks: a typo? nothing is registered until the form says so
    assert asked.status_code == 422
    assert f"O veículo {vehicle_id} não está no cadastro da frota" in html.unescape(asked.text)
    with session_scope(web_engine) as session:
        assert session.scalar(select(Device).where(Device.vehicle_id == vehicle_id)) is None
    created = post_form(
        client,
        "/admin/dispositivos",
        "/admin/dispositivos",
        {"vehicle_id": vehicle_id, "fora_da_frota": "1"},
    )
    assert created.status_code == 303
    assert created.headers["location"] == "/admin/dispositivos/novo-token"
    shown = client.get("/admin/dispositivos/novo-token")
    token = _TOKEN_RE.search(shown.text).group(1)  # type: ignore[union-attr]
    link = html.unescape(_LINK_RE.search(shown.text).group(1))  # type: ignore[union-attr]
    url = _URL_RE.search(shown.text).group(1)  # type: ignore[union-attr]
    assert url == f"{web_server.url}/osmand"
    assert link.startswith(f"{url}?id={token}&")
    settings = dict(p.split("=") for p in link.split("?", 1)[1].split("&")[1:])
    assert settings["interval"] == "15" and settings["stopDetection"] == "false"  # not 300 s
    svg = _SVG_RE.search(shown.text).group(0)  # type: ignore[union-attr]
    assert svg == qr_svg(link, title="QR code de configuração do Traccar Client")
    assert "ainda não está no cadastro da frota" in shown.text

    again = client.get("/admin/dispositivos/novo-token")
    assert again.status_code == 200
    assert token not in again.text and "Nenhum token a mostrar" in again.text
    assert token not in client.get("/admin/dispositivos").text

    fix = {
        "id": token,
        "lat": "-30.03",
        "lon": "-51.23",
        "timestamp": str(int(dt.datetime.now(dt.UTC).timestamp())),
    }
    assert httpx.post(url, params=fix, timeout=30).status_code == 200
    device_id = re.search(
        rf"<th scope=\"row\">(\d+)</th>\s*<td>{vehicle_id}</td>",
        client.get("/admin/dispositivos").text,
    ).group(1)  # type: ignore[union-attr]
    # a fix the server refuses is on the admin's page of the device, with what was sent
    bad = fix | {"lat": "abc", "timestamp": str(int(fix["timestamp"]) + 1)}
    refused = httpx.post(url, params=bad, timeout=30)
    assert refused.headers["X-Pontual-Rejected"] == "invalid_coordinates"
    listed = client.get("/admin/dispositivos").text
    assert f'href="/admin/dispositivos/{device_id}/rejeitadas">1<' in listed
    page = html.unescape(client.get(f"/admin/dispositivos/{device_id}/rejeitadas").text)
    assert "1 posição rejeitada, por motivo" in page
    assert "<code>invalid_coordinates</code>" in page and "<code>lat</code>=“abc”" in page
    assert "latitude ou longitude não é um número <code>invalid_coordinates</code>" in page
    assert token not in page  # the OsmAnd id is the token: never shown again
    revoked = post_form(
        client, "/admin/dispositivos", f"/admin/dispositivos/{device_id}/revogar", {}
    )
    assert revoked.status_code == 303
    assert httpx.post(url, params=fix, timeout=30).status_code == 401
    again = post_form(client, "/admin/dispositivos", f"/admin/dispositivos/{device_id}/revogar", {})
    assert again.headers["location"].endswith("aviso=ja-revogado")  # a stale tab: not audited
    assert "já estava revogado" in html.unescape(client.get(again.headers["location"]).text)
    with session_scope(web_engine) as session:
        actions = session.scalars(
            select(AuditEntry.action).where(
                AuditEntry.entity == "device", AuditEntry.entity_id == device_id
            )
        ).all()
        assert sorted(actions) == ["create", "revoke"]


@pytest.mark.browser
def test_device_token_page_in_the_browser(page: Any, login: Callable) -> None:
    """In Chromium: the token page shows the QR code and the token; a reload does not."""
    login(page, "admin")
    page.goto("/admin/dispositivos")
    page.get_by_label("Veículo (prefixo)").fill(unique("CEL"))
    page.get_by_label("Descrição (modelo, telefone…)").fill("Celular Android")
    page.get_by_role("button", name="Registrar e gerar token").click()
    page.get_by_label(re.compile("Registrar assim mesmo")).check()  # not in the fleet yet
    assert page.get_by_label("Descrição (modelo, telefone…)").input_value() == "Celular Android"
    page.get_by_role("button", name="Registrar e gerar token").click()
    page.wait_for_url("**/admin/dispositivos/novo-token")
    token = page.locator("#device-token").inner_text()
    assert re.fullmatch(r"pd[0-9a-f]{32}", token)
    assert page.get_by_role("img", name="QR code de configuração do Traccar Client").count() == 1
    save_screenshot(page, "web-admin-dispositivo-token.png")
    page.reload()
    assert page.locator("#device-token").count() == 0
    assert token not in page.content()


@pytest.mark.browser
def test_a_devices_rejected_fixes_in_the_browser(
    page: Any, login: Callable, web_client: Callable, web_server: Any
) -> None:
    """In Chromium: the devices' list links a device's rejected fixes to its page, which
    counts them by reason and lists what was sent (accessible, saved as a screenshot)."""
    vehicle_id = unique("REJ")
    client = web_client("admin")
    form = {"vehicle_id": vehicle_id, "label": "Rastreador", "fora_da_frota": "1"}
    post_form(client, "/admin/dispositivos", "/admin/dispositivos", form)
    token = _TOKEN_RE.search(client.get("/admin/dispositivos/novo-token").text).group(1)  # type: ignore[union-attr]
    now = int(dt.datetime.now(dt.UTC).timestamp())
    for k, cells in enumerate(({"lat": "abc"}, {"lat": "0", "lon": "0"}, {"lat": "95"})):
        fix = {"id": token, "lat": "-30.03", "lon": "-51.23", "timestamp": str(now + k)} | cells
        httpx.post(f"{web_server.url}/osmand", params=fix, timeout=30)
    login(page, "admin")
    page.goto("/admin/dispositivos")
    row = page.locator("tr", has=page.get_by_text(vehicle_id, exact=True))
    row.get_by_role("link", name=re.compile("posições rejeitadas")).click()
    page.wait_for_url("**/rejeitadas")
    expect(page.locator("#motivos caption")).to_have_text("3 posições rejeitadas, por motivo")
    assert page.locator("#rejeitadas tbody tr").count() == 3
    assert_accessible(page)
    save_screenshot(page, "web-admin-dispositivo-rejeitadas.png")


# --- users ---------------------------------------------------------------------------------------


def test_every_rejection_reason_is_named_in_pt_br() -> None:
    """The device's rejected page names each reason a fix can be refused for, in words."""
    from api import ingest
    from api.routes.osmand import MALFORMED
    from api.web.admin_devices import REASON_NAMES
    from tracking.validate import REJECTION_REASONS

    device = {ingest.VEHICLE_NOT_ALLOWED, ingest.BEFORE_DEVICE, ingest.NOT_AN_OBJECT}
    device |= {ingest.UNKNOWN_FIELD, ingest.CONFLICTING_DUPLICATE, MALFORMED}
    assert set(REJECTION_REASONS) | device <= set(REASON_NAMES)


def test_a_form_error_names_the_field_by_its_label(web_client: Callable) -> None:
    """The error summary names the field as the form does ("Repita a senha"), not its code."""
    admin = web_client("admin")
    form = {"username": unique("dupla").lower(), "full_name": "Fulana de Tal", "role": "agent"}
    form |= {"password_mode": "set", "password": "Senha-Longa-123", "password_repeat": "outra"}
    answer = post_form(admin, "/admin/usuarios", "/admin/usuarios", form)
    assert answer.status_code == 422
    text = html.unescape(answer.text)
    assert "Repita a senha</span>: as duas senhas não são iguais" in text
    assert "password_repeat" not in text.split('id="erros-')[1].split("</div>")[0]


def test_user_created_with_a_temporary_password_shown_once(
    web_client: Callable, web_server: Any, web_engine: Engine
) -> None:
    """A new agent gets a temporary password shown once; it logs in only to set its own (every
    page and the API ask for it until then); a role change ends that session; disabling
    refuses the next login; each change is audited, the agent's own by the agent."""
    admin = web_client("admin")
    username = unique("pessoa").lower()
    created = post_form(
        admin,
        "/admin/usuarios",
        "/admin/usuarios",
        {"username": username, "full_name": "Fulana de Tal", "role": "agent"},
    )
    assert created.status_code == 303
    page_url = created.headers["location"].split("?")[0]
    shown = admin.get(created.headers["location"])
    password = re.search(r'id="senha-valor">([^<]+)<', shown.text).group(1)  # type: ignore[union-attr]
    assert len(password) >= 16
    assert password not in admin.get(page_url).text  # once
    temporary = html.unescape(password)
    person = http_login(web_server.url, username, temporary)
    asked = person.get("/fiscal")
    assert (asked.status_code, asked.headers["location"]) == (303, "/conta/senha")
    api = httpx.post(
        f"{web_server.url}/api/v1/auth/token",
        data={"username": username, "password": temporary},
        timeout=30,
    )
    assert (api.status_code, api.json()["error"]["code"]) == (403, "password_change_required")
    own = "Minha-Senha-Nova-42"
    form = {"current": temporary, "new": own, "repeat": own}
    refused = post_form(person, "/conta/senha", "/conta/senha", form | {"current": "errada"})
    assert refused.status_code == 422 and "A senha atual não confere" in refused.text
    same = post_form(person, "/conta/senha", "/conta/senha", form | {"new": temporary})
    assert same.status_code == 422
    done = post_form(person, "/conta/senha", "/conta/senha", form)
    assert (done.status_code, done.headers["location"]) == (303, "/fiscal")
    assert person.get("/fiscal").status_code == 200
    assert (
        httpx.post(
            f"{web_server.url}/api/v1/auth/token",
            data={"username": username, "password": own},
            timeout=30,
        ).status_code
        == 200
    )

    changed = post_form(admin, page_url, page_url + "/papel", {"role": "planner"})
    assert changed.status_code == 303
    assert person.get("/fiscal").status_code == 303  # the session ended
    disabled = post_form(admin, page_url, page_url + "/desativar", {})
    assert disabled.status_code == 303
    with pytest.raises(AssertionError, match="refused"):
        http_login(web_server.url, username, own)
    person.close()
    # a disabled account's page offers no change (nothing reactivates it), and a stale form of
    # it is refused with the reason
    shown = admin.get(page_url).text
    assert 'id="conta-desativada"' in shown
    assert "Redefinir senha" not in shown and "Salvar papel" not in shown
    stale = post_form(admin, page_url, page_url + "/senha", {"password_mode": "temporary"})
    assert stale.status_code == 422 and "está desativada" in stale.text
    stale = post_form(admin, page_url, page_url + "/papel", {"role": "agent"})
    assert stale.status_code == 422 and "está desativada" in stale.text
    with session_scope(web_engine) as session:
        actions = session.scalars(
            select(AuditEntry.action)
            .where(AuditEntry.entity == "user", AuditEntry.entity_id == username)
            .order_by(AuditEntry.entry_id)
        ).all()
        assert actions == ["create", "set_password", "set_role", "disable"]
        actor = session.scalar(
            select(AuditEntry.actor).where(
                AuditEntry.entity_id == username, AuditEntry.action == "set_password"
            )
        )
        assert username in str(actor)  # the agent's own change, not the admin's
        details = session.scalars(
            select(AuditEntry.details).where(AuditEntry.entity_id == username)
        ).all()
        assert all(password not in str(d) and own not in str(d) for d in details)


def test_fields_carry_the_servers_length_limits(web_client: Callable) -> None:
    """The browser stops typing at the server's limit (a longer value was answered with a
    JSON error page, and the typed form was lost)."""
    page = web_client("admin").get("/admin/usuarios").text
    assert re.search(r'<input id="novo-username" name="username"[^>]* maxlength="100"', page)
    assert re.search(r'<input id="novo-nome" name="full_name"[^>]* maxlength="200"', page)


def test_refused_account_shows_the_reason(web_client: Callable) -> None:
    """A supervisor without stands is refused with the accounts rule, in pt-BR."""
    admin = web_client("admin")
    answer = post_form(
        admin,
        "/admin/usuarios",
        "/admin/usuarios",
        {"username": unique("sup"), "role": "supervisor", "stands": ""},
    )
    assert answer.status_code == 422
    assert "um supervisor precisa de pelo menos um ponto" in html.unescape(answer.text)


def test_a_name_taken_in_another_case_is_refused(
    web_client: Callable, web_server: Any, web_engine: Engine
) -> None:
    """``TST_CASE`` beside ``Tst_Case`` is refused in pt-BR (one account per name whatever its
    case); the account logs in with its name typed in any case."""
    admin = web_client("admin")
    username = unique("Tst_Case")
    form = {
        "role": "agent",
        "password_mode": "set",
        "password": WEB_PASSWORD,
        "password_repeat": WEB_PASSWORD,
    }
    created = post_form(admin, "/admin/usuarios", "/admin/usuarios", form | {"username": username})
    assert created.status_code == 303
    other = "Outra-senha-longa"
    for variant in (username.upper(), username.lower()):
        answer = post_form(
            admin,
            "/admin/usuarios",
            "/admin/usuarios",
            form | {"username": variant, "password": other, "password_repeat": other},
        )
        assert answer.status_code == 422
        assert (
            f"o nome '{variant}' já é usado pela conta '{username}' (nomes de usuário não "
            "distinguem maiúsculas de minúsculas)"
        ) in html.unescape(answer.text)
    assert count(web_engine, User, func.lower(User.username) == username.lower()) == 1
    for typed in (username.upper(), username.lower()):
        person = http_login(web_server.url, typed, WEB_PASSWORD)
        assert person.get("/fiscal").status_code == 200
        person.close()


def test_an_admin_keeps_their_own_account(web_client: Callable, web_engine: Engine) -> None:
    """On their own page, an admin can neither change their role nor disable themselves: the
    page says why (another admin does it) and their session goes on."""
    admin = web_client("admin")
    with session_scope(web_engine) as session:
        me = session.scalar(select(User.user_id).where(User.username == WEB_USERS["admin"]))
    page_url = f"/admin/usuarios/{me}"
    demoted = post_form(admin, page_url, page_url + "/papel", {"role": "agent"})
    assert demoted.status_code == 422
    assert "você não pode mudar o papel da sua própria conta; peça a outro administrador" in (
        html.unescape(demoted.text)
    )
    disabled = post_form(admin, page_url, page_url + "/desativar", {})
    assert disabled.status_code == 422
    assert 'id="desativar-erro"' in disabled.text
    assert admin.get("/admin").status_code == 200  # still an admin, still logged in


# --- import --------------------------------------------------------------------------------------


def _fleet_csv(ids: list[str]) -> str:
    a, b, c, d = ids
    return (
        "vehicle_id,plate,accessible,status,status_since\n"
        f"{a},AAA1A11,true,active,\n"
        f"{b},BBB2B22,talvez,active,\n"
        f"{c},CCC3C33,false,ocupado,\n"
        f"{d},DDD4D44,false,active,\n"
        f"{a},AAA1A11,true,active,\n"  # the same row again: only the repeat is rejected
        f"{unique('IMP')},FFF6F66,false,active,0202-01-01\n"
    )


@pytest.mark.browser
def test_import_preview_writes_nothing_and_confirm_writes_the_good_rows(
    page: Any, login: Callable, web_engine: Engine, tmp_path: Path
) -> None:
    """The preview lists each bad row with the loader's reason and writes nothing; "Importar"
    writes exactly the good rows, and the import is audited."""
    ids = [unique("IMP") for _ in range(4)]
    source = tmp_path / "frota_teste.csv"
    source.write_text(_fleet_csv(ids), encoding="utf-8")
    before = count(web_engine, Vehicle)
    login(page, "admin")
    page.goto("/admin/importacao")
    page.get_by_label("O que importar").select_option("frota")
    page.locator("#importacao-arquivo").set_input_files(str(source))
    page.get_by_role("button", name="Enviar e ver a prévia").click()
    page.wait_for_url("**/admin/importacao?envio=*")
    assert count(web_engine, Vehicle) == before
    rows = page.get_by_role("table").get_by_role("row").all()[1:]
    found = {r.get_by_role("rowheader").inner_text(): r.inner_text() for r in rows}
    assert sorted(found) == ["3", "4", "6", "7"]  # as the spreadsheet shows them: header is 1
    assert "linha 3, coluna accessible: 'talvez' não é sim nem não; use sim ou não" in found["3"]
    assert "frota_teste.csv, linha 4, coluna status: 'ocupado' não é uma situação" in found["4"]
    assert f"linha 6, coluna vehicle_id: '{ids[0]}' repete o veículo da linha 2" in found["6"]
    assert (
        "linha 7, coluna status_since: a data 0202-01-01 está fora do intervalo aceito; use uma "
        "data entre 1990-01-01"
    ) in found["7"]
    assert "Veículos criados (se importar)\n2" in page.locator("dl.facts").inner_text()
    save_screenshot(page, "web-admin-importacao-previa.png")

    page.get_by_role("button", name="Importar").click()
    page.wait_for_selector("text=Importação concluída")
    assert count(web_engine, Vehicle) == before + 2
    with session_scope(web_engine) as session:
        stored = set(session.scalars(select(Vehicle.vehicle_id).where(Vehicle.vehicle_id.in_(ids))))
        assert stored == {ids[0], ids[3]}
        plate = session.get(Vehicle, ids[0]).plate  # type: ignore[union-attr]
        assert plate == "AAA1A11"  # the first of the two rows, not the repeated one
        entry = session.scalars(
            select(AuditEntry)
            .where(AuditEntry.action == "import")
            .order_by(AuditEntry.entry_id.desc())
        ).first()
        assert entry is not None and entry.details["rejected_rows"] == [3, 4, 6, 7]
        assert entry.details["imported"] == 2
    page.reload()  # the result stays; nothing is written twice
    assert count(web_engine, Vehicle) == before + 2


def test_import_confirm_trusts_only_the_stored_upload(web_client: Callable) -> None:
    """A confirmation naming an upload of another session, or none, writes nothing."""
    admin = web_client("admin")
    other = web_client("admin")
    token = csrf_from(admin.get("/admin/importacao").text)
    upload = admin.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "frota"},
        files={"file": ("f.csv", f"vehicle_id\n{unique('SO')}\n".encode(), "text/csv")},
    )
    assert upload.status_code == 303
    envio = upload.headers["location"].split("envio=")[1]
    stranger = post_form(
        other, "/admin/importacao", "/admin/importacao/confirmar", {"envio": envio}
    )
    assert stranger.status_code == 410
    forged = post_form(admin, "/admin/importacao", "/admin/importacao/confirmar", {"envio": "../x"})
    assert forged.status_code == 410


def _upload_preview(admin: Any, name: str, content: bytes) -> str:
    """Upload a fleet file and return its preview page's text."""
    token = csrf_from(admin.get("/admin/importacao").text)
    upload = admin.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "frota"},
        files={"file": (name, content, "text/csv")},
    )
    assert upload.status_code == 303
    return html.unescape(admin.get(upload.headers["location"]).text)


def test_import_reads_excel_files_and_refuses_broken_ids(
    web_client: Callable, web_engine: Engine
) -> None:
    """A fleet file as Excel in pt-BR saves it (';', Windows-1252) previews its rows; a quote
    left open, which would swallow the next rows into one "vehicle_id", refuses the file naming
    the line, no vehicle written; an empty file and a broken GeoJSON say so in Portuguese."""
    admin = web_client("admin")
    a, b = unique("XL"), unique("XL")
    excel = f"vehicle_id;plate;make\n{a};AAA1A11;Citroën\n{b};BBB2B22;Peugeot\n"
    preview = _upload_preview(admin, "frota.csv", excel.encode("cp1252"))
    assert "<dt>Linhas válidas</dt><dd>2</dd>" in preview
    assert "<dt>Linhas rejeitadas</dt><dd>0</dd>" in preview
    assert "não reconhecido" not in preview and "codec" not in preview
    before = count(web_engine, Vehicle)
    broken = f'vehicle_id,plate\n"{a}X,AAA1A11\n{b}X,BBB2B22\n'
    preview = _upload_preview(admin, "quebrado.csv", broken.encode())
    assert "arquivo ilegível: quebrado.csv, linha 2: CSV malformado (uma aspa sem fechar)" in (
        preview
    )
    assert count(web_engine, Vehicle) == before
    assert "o arquivo está vazio" in _upload_preview(admin, "vazio.csv", b"")
    token = csrf_from(admin.get("/admin/importacao").text)
    upload = admin.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "pontos", "radius_m": "30"},
        files={"file": ("p.geojson", b'{"type": "FeatureCollection", features: []}', "x")},
    )
    page = html.unescape(admin.get(upload.headers["location"]).text)
    assert "arquivo ilegível: GeoJSON inválido (linha 1, coluna 31)" in page
    assert "Expecting" not in page


def test_stands_import_preview_names_the_features(web_client: Callable, web_engine: Engine) -> None:
    """A GeoJSON of stands: a feature without geometry and one with a bad radius are listed
    with the reader's reasons and feature numbers; nothing is written before "Importar"."""
    good, empty, bad = unique("IMPS"), unique("IMPS"), unique("IMPS")
    square = [
        [
            [-51.21, -30.03],
            [-51.2095, -30.03],
            [-51.2095, -30.0295],
            [-51.21, -30.0295],
            [-51.21, -30.03],
        ]
    ]
    doc = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"stand_id": good},
                "geometry": {"type": "Polygon", "coordinates": square},
            },
            {"type": "Feature", "properties": {"stand_id": empty}, "geometry": None},
            {
                "type": "Feature",
                "properties": {"stand_id": bad, "radius_m": "-3"},
                "geometry": {"type": "Point", "coordinates": [-51.2, -30.0]},
            },
        ],
    }
    admin = web_client("admin")
    before = count(web_engine, Stand)
    token = csrf_from(admin.get("/admin/importacao").text)
    upload = admin.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "pontos", "radius_m": "30"},
        files={"file": ("pontos.geojson", json.dumps(doc).encode(), "application/geo+json")},
    )
    assert upload.status_code == 303
    preview = html.unescape(admin.get(upload.headers["location"]).text)
    assert count(web_engine, Stand) == before
    assert f"sem geometria em 'pontos.geojson': feição 2 (stand_id '{empty}')" in preview
    assert f"'radius_m' do ponto de táxi '{bad}' (feição 3 de 'pontos.geojson') era '-3'" in preview
    envio = upload.headers["location"].split("envio=")[1]
    done = post_form(admin, "/admin/importacao", "/admin/importacao/confirmar", {"envio": envio})
    assert done.status_code == 303
    assert count(web_engine, Stand) == before + 1
    with session_scope(web_engine) as session:
        assert session.get(Stand, good) is not None and session.get(Stand, bad) is None


# --- the audit log -------------------------------------------------------------------------------


def test_audit_log_filters_and_links(web_client: Callable, web_engine: Engine) -> None:
    """Filters by actor, action, entity, period and text; the stand's entry links to its page;
    a day out of the query range is refused in pt-BR."""
    admin = web_client("admin")
    stand_id = unique("AUD")
    created = post_form(
        admin,
        "/admin/pontos/novo",
        "/admin/pontos",
        {
            "stand_id": stand_id,
            "name": "Ponto da auditoria",
            "mode": "ponto",
            "lat": "-30.02",
            "lon": "-51.22",
            "radius_m": "20",
        },
    )
    assert created.status_code == 303
    today = dt.date.today()
    query = {
        "ator": "user:web_admin",
        "acao": "create",
        "entidade": "stand",
        "de": (today - dt.timedelta(days=1)).isoformat(),
        "ate": (today + dt.timedelta(days=1)).isoformat(),
        "texto": stand_id,
    }
    found = admin.get("/admin/auditoria", params=query)
    assert found.status_code == 200
    assert "<caption>1 registro</caption>" in found.text
    assert f'href="/admin/pontos/{stand_id}"' in found.text
    assert '<option value="create" selected>criação</option>' in found.text
    none = admin.get("/admin/auditoria", params=query | {"acao": "retire"})
    assert "<caption>0 registros</caption>" in none.text
    inverted = admin.get(
        "/admin/auditoria", params=query | {"ate": (today - dt.timedelta(days=2)).isoformat()}
    )
    assert inverted.status_code == 422
    assert "o último dia vem antes do primeiro" in html.unescape(inverted.text)
    past_the_end = admin.get("/admin/auditoria", params=query | {"pagina": "999"})
    assert past_the_end.status_code == 200 and "<caption>1 registro</caption>" in past_the_end.text
    assert f'href="/admin/pontos/{stand_id}"' in past_the_end.text  # the last page, shown
    bad = admin.get("/admin/auditoria", params={"de": "0202-01-01"})
    assert bad.status_code == 422
    assert "esperado uma data entre 1678-01-01 e 2261-12-31" in html.unescape(bad.text)


# --- screenshots of the other pages --------------------------------------------------------------

SHOTS = (
    ("web-admin.png", "/admin"),
    ("web-admin-usuarios.png", "/admin/usuarios"),
    ("web-admin-usuario.png", "/admin/usuarios/1"),
    ("web-admin-dispositivos.png", "/admin/dispositivos"),
    ("web-admin-pontos.png", "/admin/pontos"),
    ("web-admin-importacao.png", "/admin/importacao"),
    ("web-admin-auditoria.png", "/admin/auditoria"),
)


@pytest.mark.browser
@pytest.mark.parametrize(("name", "path"), SHOTS, ids=[s[0] for s in SHOTS])
def test_admin_screenshots(page: Any, login: Callable, name: str, path: str) -> None:
    """Each Administração page renders (one h1) and is saved as a screenshot."""
    login(page, "admin")
    page.goto(path)
    if path == "/admin/pontos":
        page.wait_for_selector("#mapa[data-loaded]")
    assert page.locator("h1").count() == 1
    save_screenshot(page, name)


# --- editing, licences, exclusions, retirement --------------------------------------------------


def test_edit_end_exclude_and_retire(web_client: Callable, web_engine: Engine) -> None:
    """On a new stand: a name change and a cleared capacity are written alone (the area kept);
    a licence ends; a second prefixo is excluded under art. 50 I with the law's words; the
    stand is retired; each step is one audit entry."""
    admin = web_client("admin")
    stand_id, first, second = unique("EDIT"), unique("PFX"), unique("PFX")
    for vehicle in (first, second):
        add_vehicle(web_engine, vehicle)
    page = f"/admin/pontos/{stand_id}"
    made = post_form(
        admin,
        "/admin/pontos/novo",
        "/admin/pontos",
        {
            "stand_id": stand_id,
            "name": "Nome antigo",
            "capacity": "3",
            "mode": "ponto",
            "lat": "-30.01",
            "lon": "-51.21",
            "radius_m": "15",
        },
    )
    assert made.status_code == 303
    form = {k: v for k, v in _form_values(admin.get(page).text).items()}
    edited = post_form(admin, page, page, form | {"name": "Novo nome", "capacity": ""})
    assert edited.status_code == 303, html.unescape(edited.text)[-800:]
    with session_scope(web_engine) as session:
        stand = session.get(Stand, stand_id)
        assert stand is not None
        assert (stand.name, stand.capacity, stand.radius_m) == ("Novo nome", None, 15.0)
    unchanged = post_form(admin, page, page, _form_values(admin.get(page).text))
    assert unchanged.status_code == 422
    assert f"nada a alterar no ponto '{stand_id}'" in html.unescape(unchanged.text)

    start = "2024-01-01"
    for vehicle in (first, second):
        granted = post_form(
            admin, page, page + "/licencas", {"vehicle_id": vehicle, "valid_from": start}
        )
        assert granted.status_code == 303
    ended = post_form(
        admin, page, page + "/licencas/encerrar", {"vehicle_id": first, "until": "2024-06-30"}
    )
    assert ended.status_code == 303
    excluded = post_form(
        admin,
        page,
        page + "/exclusoes",
        {"vehicle_id": second, "on": "2024-07-01", "ground": "solicitacao", "note": "proc. 12"},
    )
    assert excluded.status_code == 303
    shown = html.unescape(admin.get(page).text)
    assert "art. 50, I: por solicitação do próprio autorizatário — proc. 12" in shown
    retired = post_form(admin, page, page + "/desativar", {"on": "2024-08-01"})
    assert retired.status_code == 303
    with session_scope(web_engine) as session:
        ends = dict(
            session.execute(
                select(ParkingLicence.vehicle_id, ParkingLicence.valid_until).where(
                    ParkingLicence.stand_id == stand_id
                )
            ).all()
        )
        assert ends == {first: dt.date(2024, 6, 30), second: dt.date(2024, 6, 30)}
        assert session.get(Stand, stand_id).retired_at is not None  # type: ignore[union-attr]
        actions = session.scalars(
            select(AuditEntry.action)
            .where(
                (AuditEntry.entity_id == stand_id)
                | (AuditEntry.details["stand_id"].astext == stand_id)
            )
            .order_by(AuditEntry.entry_id)
        ).all()
        assert actions == ["create", "update", "grant", "grant", "end", "exclude", "retire"]


_INPUT_RE = re.compile(r'<input id="ponto-[^"]*" name="(\w+)" type="text" value="([^"]*)"')
_AREA_RE = re.compile(r'<textarea id="ponto-vertices" name="vertices"[^>]*>([^<]*)</textarea>')


def _form_values(page_html: str) -> dict[str, str]:
    """The stand edit form's values as the page shows them (what a browser would post)."""
    values = {name: html.unescape(value) for name, value in _INPUT_RE.findall(page_html)}
    area = _AREA_RE.search(page_html)
    values["vertices"] = html.unescape(area.group(1)) if area else ""
    mode = re.search(
        r'id="ponto-modo-(\w+)" name="mode" value="\w+" data-area-mode checked', page_html
    )
    values["mode"] = mode.group(1) if mode else "poligono"
    kind = re.search(r'<option value="(\w*)" selected>', page_html)
    values["kind"] = kind.group(1) if kind else ""
    return values


FAR_MUNICIPALITY = "9990002"
"""A municipality of this test only, 2,500 km from the others' stands."""


@pytest.mark.browser
def test_the_stands_map_opens_on_the_main_municipality(
    page: Any, login: Callable, web_engine: Engine
) -> None:
    """A stand of another municipality 2,500 km away does not make the map open on the whole
    continent: it fits the municipality with the most stands; the zoom buttons speak pt-BR."""
    far = "ZZ-LONGE-" + unique("PV")
    with session_scope(web_engine) as session:
        if session.get(Municipality, FAR_MUNICIPALITY) is None:
            session.add(Municipality(code=FAR_MUNICIPALITY, name="Município Distante", uf="RO"))
            session.flush()
        create_stand(
            session=session, stand_id=far, actor="test", lat=-8.7619, lon=-63.9039,
            radius_m=30.0, municipality_code=FAR_MUNICIPALITY,
        )  # fmt: skip
    try:
        login(page, "admin")
        page.goto("/admin/pontos")
        page.wait_for_selector("#mapa[data-loaded=true]")
        widths = [
            box["width"]
            for box in (p.bounding_box() for p in page.locator("#mapa path").all())
            if box is not None
        ]
        assert max(widths) > 4  # a 30 m stand is drawn at street scale, not as a dot
        assert page.locator('#mapa a[title="Aproximar"]').count() == 1
    finally:
        with session_scope(web_engine) as session:
            session.execute(text("DELETE FROM stands WHERE stand_id = :s"), {"s": far})


@pytest.mark.browser
def test_an_error_low_on_the_page_takes_the_focus(page: Any, login: Callable) -> None:
    """A licence refused at the foot of a stand's page: the page comes back with the focus,
    and the view, on the form's error summary, not at the top as if nothing happened."""
    login(page, "admin")
    page.goto("/admin/pontos/S1")
    page.locator("#licenca-prefixo").fill("X")
    page.locator("#licenca-inicio").fill("0202-12-01")
    with page.expect_navigation():
        page.get_by_role("button", name="Conceder licença").click()
    page.wait_for_function("document.activeElement && document.activeElement.id")
    assert page.evaluate("document.activeElement.id") == "erros-licenca"
    summary = page.locator("#erros-licenca")
    assert "esperado uma data entre 1990-01-01" in summary.inner_text()
    box = summary.bounding_box()
    assert box is not None and 0 <= box["y"] < page.viewport_size["height"]


def test_a_supervisors_stands_as_typed(web_client: Callable, web_engine: Engine) -> None:
    """The stands field is the supervisor's stands: emptied, refused on that field (not kept
    silently with "Papel alterado"); an unknown stand refused there with what was typed kept;
    the same role and stands change nothing (no session ended, no audit entry)."""
    admin = web_client("admin")
    username = unique("superv").lower()
    form = {"username": username, "full_name": "Supervisora de Teste", "role": "supervisor"}
    created = post_form(admin, "/admin/usuarios", "/admin/usuarios", form | {"stands": "S1"})
    assert created.status_code == 303, created.text
    page_url = created.headers["location"].split("?")[0]
    action = page_url + "/papel"
    for typed, said in (
        ("", "um(a) supervisor(a) precisa de pelo menos um ponto"),
        ("S1; XYZ-NAO", "pontos desconhecidos: XYZ-NAO"),
    ):
        answer = post_form(admin, page_url, action, {"role": "supervisor", "stands": typed})
        assert answer.status_code == 422
        text = html.unescape(answer.text)
        assert f'<p class="field-error" id="pontos-erro">{said}' in text  # under its own field
        assert f'name="stands" type="text" value="{typed}"' in text  # what was typed
    same = post_form(admin, page_url, action, {"role": "supervisor", "stands": " S1 "})
    assert same.headers["location"].endswith("?aviso=sem_mudanca")
    assert "nada mudou, as sessões continuam" in admin.get(same.headers["location"]).text
    with session_scope(web_engine) as session:
        actions = session.scalars(
            select(AuditEntry.action).where(
                AuditEntry.entity == "user", AuditEntry.entity_id == username
            )
        ).all()
    assert "set_role" not in actions
    # made agent, the stands the form still shows go with the old role (was refused with
    # "apenas supervisores são vinculados a pontos")
    agent = post_form(admin, page_url, action, {"role": "agent", "stands": "S1"})
    assert agent.status_code == 303, html.unescape(agent.text)
    with session_scope(web_engine) as session:
        user = session.scalar(select(User).where(User.username == username))
        assert user is not None and user.role == "agent"
        assert accounts.user_stands(session=session, user_id=user.user_id) == []
    assert post_form(admin, page_url, page_url + "/desativar", {}).status_code == 303
    assert re.search(r"desativada em \d\d/\d\d/\d{4} \d\d:\d\d \(horário de Brasília\)",
                     admin.get(page_url).text)  # fmt: skip


def test_a_device_for_a_prefixo_written_otherwise(web_client: Callable, web_engine: Engine) -> None:
    """'sim-7' for the fleet's 'SIM-7': refused naming the registered spelling (put in the
    field), with no offer to register it outside the fleet; an empty prefixo is asked for."""
    vehicle_id = unique("SIM")
    with session_scope(web_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))
    client = web_client("admin")
    sent = vehicle_id.lower()
    for outside in ({}, {"fora_da_frota": "1"}):  # even "to be imported": never a second one
        form = {"vehicle_id": sent} | outside
        asked = post_form(client, "/admin/dispositivos", "/admin/dispositivos", form)
        text = html.unescape(asked.text)
        assert asked.status_code == 422
        assert f"O veículo {sent} está no cadastro da frota como {vehicle_id}" in text
        assert f'value="{vehicle_id}"' in text and 'name="fora_da_frota"' not in text
    with session_scope(web_engine) as session:
        assert session.scalar(select(Device).where(Device.vehicle_id == sent)) is None
    empty = post_form(client, "/admin/dispositivos", "/admin/dispositivos", {"vehicle_id": " "})
    assert empty.status_code == 422
    assert "Informe o prefixo do veículo do dispositivo." in html.unescape(empty.text)
