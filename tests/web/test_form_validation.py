"""A console form whose field is over its length or of the wrong type: the pt-BR page naming the
field and its limit for a browser, nothing stored; the JSON 422 elsewhere.

Before: a 5,000-character name in a console form (or ``?pagina=abc``) was the API's JSON 422,
even for a browser.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text
from web_helpers import WEB_USERS

from api.web.auth import SESSION_COOKIE, csrf_token_for

with warnings.catch_warnings():  # httpx, not httpx2, under the test client (as tests/api)
    from starlette.exceptions import StarletteDeprecationWarning

    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
LONG = "a" * 5000
PAGE_TITLE = "Dados não aceitos"
TABLES = ("stands", "users", "drivers", "devices", "audit_log")
"""What a console form may write: each row count stays the same when a form is refused."""
_counter = itertools.count(1)


def unique(prefix: str) -> str:
    """A fresh identifier (the console's database is shared by the session's tests)."""
    return f"{prefix}{os.getpid()}{next(_counter)}"


def counts(engine: Engine) -> dict[str, int]:
    """Rows of each table a console form writes."""
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


@pytest.fixture(scope="module")
def client(web_engine: Engine) -> Iterator[TestClient]:
    """The app in process on the console's database, logged in as the seeded admin."""
    from web_helpers import SECRET_KEY

    from api import accounts
    from api.main import create_app
    from api.settings import Settings
    from db.accounts.models import User
    from db.engine import session_scope

    app = create_app(engine=web_engine, settings=Settings(secret_key=SECRET_KEY, live_worker=False))
    with session_scope(web_engine) as session:
        user = session.query(User).filter_by(username=WEB_USERS["admin"]).one()
        token, _ = accounts.issue_token(session=session, user=user, ttl_s=3600)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        test_client.cookies.set(SESSION_COOKIE, token)
        test_client.headers["X-Test-Csrf"] = csrf_token_for(token)
        yield test_client


def _post(client: TestClient, path: str, data: dict[str, str], **headers: str) -> httpx.Response:
    form = data | {"csrf_token": client.headers["X-Test-Csrf"]}
    return client.post(path, data=form, headers=BROWSER | headers)


FORMS = {
    "stand": (
        "/admin/pontos",
        {"stand_id": unique("VAL"), "name": LONG, "mode": "ponto", "lat": "-30.03",
         "lon": "-51.23", "radius_m": "25"},
        "Nome: no máximo 400 caracteres (foram enviados 5.000).",
    ),
    "user": (
        "/admin/usuarios",
        {"username": unique("val_user"), "full_name": LONG, "role": "agent"},
        "Nome completo: no máximo 200 caracteres (foram enviados 5.000).",
    ),
    "driver": (
        "/admin/condutores",
        {"driver_id": unique("VALD"), "name": LONG},
        "Nome: no máximo 400 caracteres (foram enviados 5.000).",
    ),
    "device": (
        "/admin/dispositivos",
        {"vehicle_id": unique("VALV"), "label": LONG},
        "Descrição: no máximo 200 caracteres (foram enviados 5.000).",
    ),
}  # fmt: skip


class TestBrowser:
    @pytest.mark.parametrize("form", list(FORMS))
    def test_over_long_field_is_the_page_and_nothing_stored(
        self, client: TestClient, web_engine: Engine, form: str
    ) -> None:
        """A 5,000-character field from a browser: 422, the pt-BR page naming the field, its
        limit and what was sent; no row written, no audit entry."""
        path, data, line = FORMS[form]
        before = counts(web_engine)
        answer = _post(client, path, data)
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith("text/html")
        assert PAGE_TITLE in answer.text and "nada foi gravado" in answer.text
        assert f"<li>{line}</li>" in answer.text
        assert LONG not in answer.text  # the value is not echoed back
        assert counts(web_engine) == before

    def test_several_fields_are_each_named(self, client: TestClient, web_engine: Engine) -> None:
        """Two fields over their limits: both named on the page."""
        before = counts(web_engine)
        data = {"driver_id": "D" * 201, "name": LONG}
        answer = _post(client, "/admin/condutores", data)
        assert answer.status_code == 422
        assert "Identificador do condutor: no máximo 200 caracteres" in answer.text
        assert "Nome: no máximo 400 caracteres" in answer.text
        assert counts(web_engine) == before

    def test_a_word_in_a_number_field_is_the_page(self, client: TestClient) -> None:
        """``?pagina=abc`` on the drivers' search (an integer): the page, naming 'Página'."""
        answer = client.get("/admin/condutores", params={"pagina": "abc"}, headers=BROWSER)
        assert answer.status_code == 422
        assert PAGE_TITLE in answer.text
        assert "<li>Página: esperado um número inteiro.</li>" in answer.text

    def test_a_number_out_of_its_range_is_the_page(self, client: TestClient) -> None:
        """``?pagina=0`` (at least 1): the page, naming the bound."""
        answer = client.get("/admin/pontos", params={"pagina": "0"}, headers=BROWSER)
        assert answer.status_code == 422
        assert "<li>Página: deve ser no mínimo 1.</li>" in answer.text


class TestNotABrowser:
    def test_a_script_gets_the_json_422(self, client: TestClient, web_engine: Engine) -> None:
        """The same console form asking for JSON: the API's 422, naming the field."""
        path, data, _ = FORMS["driver"]
        before = counts(web_engine)
        answer = _post(client, path, data, Accept="application/json")
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and "'name'" in error["message"]
        assert counts(web_engine) == before

    def test_the_api_stays_json_for_a_browser(self, client: TestClient) -> None:
        """An API route asked by a browser keeps its JSON 422."""
        answer = client.get("/api/v1/public/stands", params={"lat": "abc"}, headers=BROWSER)
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "invalid_request"


def _no_maxlength(page: Any, selector: str) -> None:
    page.eval_on_selector(selector, "e => e.removeAttribute('maxlength')")


@pytest.mark.browser
def test_over_long_name_through_the_real_form(
    page: Any, login: Any, web_engine: Engine, web_server: Any
) -> None:
    """In Chromium, through ``pontual serve``: the new driver's name with 5,000 characters (the
    input's maxlength removed) is the pt-BR page naming 'Nome' and its limit; nothing stored."""
    driver_id = unique("PWVAL")
    login(page, "admin")
    page.goto("/admin/condutores")
    _no_maxlength(page, "#novo-nome")
    page.locator("#novo-id").fill(driver_id)
    page.locator("#novo-nome").fill(LONG)
    assert len(page.locator("#novo-nome").input_value()) == len(LONG)
    before = counts(web_engine)
    with page.expect_navigation():
        page.get_by_role("button", name="Cadastrar condutor").click()
    assert page.title().startswith(PAGE_TITLE)
    body = page.locator("main").inner_text()
    assert "nada foi gravado" in body
    assert "Nome: no máximo 400 caracteres (foram enviados 5.000)." in body
    assert counts(web_engine) == before
    with web_engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM drivers WHERE driver_id = :d"), {"d": driver_id}
        ).scalar_one()
    assert found == 0
