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

    def test_a_word_in_a_records_address_is_not_found(self, client: TestClient) -> None:
        """``/admin/usuarios/abc``: no such record, the 404 page (not "user_id: esperado um
        número inteiro", a field the admin never saw)."""
        for path in ("/admin/usuarios/abc", "/admin/usuarios/²"):
            answer = client.get(path, headers=BROWSER)
            assert answer.status_code == 404, path
            assert "Página não encontrada" in answer.text and "user_id" not in answer.text

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


# --- the Fiscalização forms -------------------------------------------------------------------


@pytest.fixture(scope="module")
def proposal(web_engine: Engine) -> str:
    """A proposal to review (a tracking gap of a vehicle of its own)."""
    import datetime as dt

    from web_fiscal import store_and_propose, tracking_gap_finding

    finding = tracking_gap_finding(
        vehicle_id=unique("VALF"), started_at=dt.datetime(2026, 9, 1, 15, tzinfo=dt.UTC)
    )
    return store_and_propose(web_engine, [finding])[finding["finding_id"]]


def proposal_state(engine: Engine, proposal_id: str) -> tuple[Any, ...]:
    """What a step would change: the status, the auto, the reason, the document, the audit."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT status, auto_number, dismissed_reason, document::text FROM proposals "
                "WHERE proposal_id = :p"
            ),
            {"p": proposal_id},
        ).one()
        audit = conn.execute(text("SELECT count(*) FROM audit_log")).scalar_one()
        proposals = conn.execute(text("SELECT count(*) FROM proposals")).scalar_one()
    return (*row, audit, proposals)


AGENT_FORMS = {
    "resposta_excecao": ("confirmar", "Resposta à exceção", 2000),
    "pontuacao": ("confirmar", "Pontuação", 40),
    "motivo": ("descartar", "Motivo", 2000),
    "decisao": ("decidir", "Decisão", 40),
    "fundamentacao": ("decidir", "Fundamentação", 2000),
    "fundamentacao ": ("finalizar", "Fundamentação", 2000),
    "municipio": ("gerar", "Município", 7),
    "volta": ("gerar", "Retorno", 2000),
}
"""Each field of the agent's forms without a limit before: its form, label and limit."""


class TestAgentForms:
    @pytest.mark.parametrize("field", list(AGENT_FORMS))
    def test_over_long_field_is_the_page_and_nothing_stored(
        self, client: TestClient, web_engine: Engine, proposal: str, field: str
    ) -> None:
        """A 5,000-character field of an agent's form: 422, the page naming it and its limit;
        the proposal, the audit and the queue as they were."""
        form, label, limit = AGENT_FORMS[field]
        path = (
            "/fiscal/propostas/gerar" if form == "gerar" else f"/fiscal/propostas/{proposal}/{form}"
        )
        before = proposal_state(web_engine, proposal)
        answer = _post(client, path, {field.strip(): LONG})
        assert answer.status_code == 422
        assert PAGE_TITLE in answer.text and "nada foi gravado" in answer.text
        line = f"{label}: no máximo {limit} caracteres (foram enviados 5.000)."
        assert f"<li>{line}</li>" in answer.text
        assert proposal_state(web_engine, proposal) == before

    def test_at_the_limit_the_form_answers_itself(
        self, client: TestClient, web_engine: Engine, proposal: str
    ) -> None:
        """A 2,000-character reason (the limit) reaches the form: not the 422 page (the step
        runs, or the proposal page says why not)."""
        before = proposal_state(web_engine, proposal)
        answer = _post(
            client, f"/fiscal/propostas/{proposal}/decidir", {"fundamentacao": "a" * 2000}
        )
        assert PAGE_TITLE not in answer.text
        assert answer.status_code in (409, 422)  # a proposal to review has no defence to decide
        assert proposal_state(web_engine, proposal) == before


class TestWayBack:
    def test_a_refused_step_leads_back_to_its_proposal(
        self, client: TestClient, proposal: str
    ) -> None:
        """A step's address opened by GET (405) and a step's form without its CSRF token (403,
        a tab left open past a new login) lead back to the proposal, not only home."""
        link = f'<a href="/fiscal/propostas/{proposal}">Voltar à página anterior</a>'
        opened = client.get(f"/fiscal/propostas/{proposal}/confirmar", headers=BROWSER)
        assert opened.status_code == 405 and link in opened.text
        stale = client.post(
            f"/fiscal/propostas/{proposal}/descartar",
            data={"motivo": "x", "csrf_token": "0" * 64},
            headers=BROWSER,
        )
        assert stale.status_code == 403 and "Formulário recusado" in stale.text
        assert link in stale.text and '">Voltar à sua página inicial</a>' in stale.text

    @pytest.mark.parametrize(
        ("path", "form", "back"),
        [
            ("/fiscal/propostas/{p}/descartar", {"motivo": LONG}, "/fiscal/propostas/{p}"),
            ("/fiscal/propostas/gerar", {"volta": LONG}, "/fiscal/propostas"),
            ("/admin/condutores", {"driver_id": "D" * 201}, "/admin/condutores"),
            ("/fiscal/propostas?situacao=a&situacao=b", None, "/fiscal/propostas"),
        ],
    )
    def test_logged_in_user_gets_the_way_back_not_the_login(
        self,
        client: TestClient,
        proposal: str,
        path: str,
        form: dict[str, str] | None,
        back: str,
    ) -> None:
        """The 422 page of a logged-in user: the console's menu, back to the form's page (a
        step's proposal, the queue of the generate form, the list of a create form, the page
        without its query) and to the start page; no link to the login."""
        url = path.format(p=proposal)
        answer = client.get(url, headers=BROWSER) if form is None else _post(client, url, form)
        assert answer.status_code == 422
        assert f'<a href="{back.format(p=proposal)}">Voltar e corrigir</a>' in answer.text
        assert '">Voltar à sua página inicial</a>' in answer.text
        assert 'aria-label="Navegação principal"' in answer.text  # the console's menu
        assert 'href="/entrar"' not in answer.text

    def test_a_visitor_gets_the_login(self, client: TestClient) -> None:
        """The same kind of page for a visitor without a session: the login link only."""
        token = client.cookies.get(SESSION_COOKIE)
        client.cookies.clear()
        try:
            answer = client.get("/acessivel?lat=-30.02&lat=-30.03", headers=BROWSER)
        finally:
            client.cookies.set(SESSION_COOKIE, token or "")
        assert answer.status_code == 422
        assert '<a href="/entrar">Ir para a página de entrada</a>' in answer.text
        assert "Voltar à sua página inicial" not in answer.text


class TestRepeatedFields:
    def test_two_reasons_are_refused_and_nothing_stored(
        self, client: TestClient, web_engine: Engine, proposal: str
    ) -> None:
        """A dismissal with two ``motivo`` fields (both valid): 422, the page naming 'Motivo';
        the proposal stays to review."""
        before = proposal_state(web_engine, proposal)
        reasons = ["Motivo um, longo o bastante.", "Motivo dois, longo o bastante."]
        answer = client.post(
            f"/fiscal/propostas/{proposal}/descartar",
            data={"motivo": reasons, "csrf_token": client.headers["X-Test-Csrf"]},
            headers=BROWSER,
        )
        assert answer.status_code == 422
        assert PAGE_TITLE in answer.text
        assert "<li>Motivo: enviado 2 vezes; este campo aceita um só valor.</li>" in answer.text
        assert proposal_state(web_engine, proposal) == before
        assert 'href="/entrar"' not in answer.text

    def test_one_reason_dismisses(self, client: TestClient, web_engine: Engine) -> None:
        """The control: the same form with one ``motivo`` dismisses (303)."""
        import datetime as dt

        from web_fiscal import store_and_propose, tracking_gap_finding

        finding = tracking_gap_finding(
            vehicle_id=unique("VALR"), started_at=dt.datetime(2026, 9, 2, 15, tzinfo=dt.UTC)
        )
        other = store_and_propose(web_engine, [finding])[finding["finding_id"]]
        answer = client.post(
            f"/fiscal/propostas/{other}/descartar",
            data={
                "motivo": "Motivo um, longo o bastante.",
                "csrf_token": client.headers["X-Test-Csrf"],
            },
            headers=BROWSER,
            follow_redirects=False,
        )
        assert answer.status_code == 303
        assert proposal_state(web_engine, other)[0] == "descartada"

    def test_repeated_queue_filter_is_the_page(self, client: TestClient) -> None:
        """``?situacao=proposta&situacao=confirmada`` on the queue: the 422 page naming it."""
        answer = client.get(
            "/fiscal/propostas?situacao=proposta&situacao=confirmada", headers=BROWSER
        )
        assert answer.status_code == 422
        assert PAGE_TITLE in answer.text
        assert "Situação: enviado 2 vezes; este parâmetro aceita um só valor." in answer.text

    def test_repeated_field_from_a_script_is_json(
        self, client: TestClient, web_engine: Engine, proposal: str
    ) -> None:
        """The same form from a script: the API's JSON 422 naming 'motivo'."""
        before = proposal_state(web_engine, proposal)
        answer = client.post(
            f"/fiscal/propostas/{proposal}/descartar",
            data={"motivo": ["a" * 20, "b" * 20], "csrf_token": client.headers["X-Test-Csrf"]},
            headers={"Accept": "application/json"},
        )
        assert answer.status_code == 422
        assert "'motivo': enviado 2 vezes" in answer.json()["error"]["message"]
        assert proposal_state(web_engine, proposal) == before
