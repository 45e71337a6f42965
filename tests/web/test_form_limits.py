"""A form over a limit is 413, as a JSON body is: the console's pt-BR page for a browser, the
JSON error elsewhere.

Before: a form field over the parser's 1 MiB (a body under ``max_body_bytes``), or more than
1000 fields, was a 400 "requisição malformada"; a console form over ``max_body_bytes`` was the
API's JSON 413, even for a browser.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine
from web_helpers import WEB_USERS, ServeProcess

from api.web.auth import SESSION_COOKIE

with warnings.catch_warnings():  # httpx, not httpx2, under the test client (as tests/api)
    from starlette.exceptions import StarletteDeprecationWarning

    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
FIELD_OVER = "a" * (1536 * 1024)
"""A text field of 1.5 MiB: over the parser's 1 MiB per field, the body under 2 MiB."""
BODY_OVER = 3 * 1024 * 1024
PAGE_TITLE = "Envio grande demais"


@pytest.fixture(scope="module")
def client(web_engine: Engine) -> Iterator[TestClient]:
    """The app in process on the console's database (default limits)."""
    from web_helpers import SECRET_KEY

    from api.main import create_app
    from api.settings import Settings

    app = create_app(engine=web_engine, settings=Settings(secret_key=SECRET_KEY, live_worker=False))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _is_page(answer: httpx.Response) -> bool:
    return answer.headers["content-type"].startswith("text/html") and PAGE_TITLE in answer.text


def _is_json_413(answer: httpx.Response) -> bool:
    return answer.status_code == 413 and answer.json()["error"]["code"] == "payload_too_large"


class TestConsoleForms:
    def test_field_over_the_part_limit_is_the_413_page(self, client: TestClient) -> None:
        """Login form with a 1.5 MiB field from a browser: 413 and the pt-BR page."""
        answer = client.post("/entrar", data={"username": FIELD_OVER}, headers=BROWSER)
        assert answer.status_code == 413
        assert _is_page(answer)
        assert "Reduza" in answer.text

    def test_too_many_fields_is_the_413_page(self, client: TestClient) -> None:
        """1001 fields (the parser takes 1000): 413 and the page."""
        answer = client.post(
            "/entrar",
            content="&".join(f"c{k}=1" for k in range(1001)),
            headers=BROWSER | {"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert answer.status_code == 413
        assert _is_page(answer)

    def test_multipart_field_over_the_part_limit_is_the_413_page(self, client: TestClient) -> None:
        """The same field in a multipart form (the import page's kind): 413 and the page."""
        answer = client.post(
            "/entrar",
            data={"username": FIELD_OVER},
            files={"arquivo": ("a.csv", b"x")},
            headers=BROWSER,
        )
        assert answer.status_code == 413
        assert _is_page(answer)

    def test_declared_body_over_the_limit_is_the_413_page(self, client: TestClient) -> None:
        """A 3 MiB form with its length: refused unread, with the page for a browser."""
        answer = client.post("/entrar", data={"username": "a" * BODY_OVER}, headers=BROWSER)
        assert answer.status_code == 413
        assert _is_page(answer)
        assert answer.headers["connection"] == "close"

    def test_chunked_body_over_the_limit_is_the_413_page(self, client: TestClient) -> None:
        """A 3 MiB form without a length: cut at the limit, the page for a browser."""

        def chunks() -> Iterator[bytes]:
            yield b"username="
            for _ in range(3):
                yield b"a" * (1024 * 1024)

        answer = client.post(
            "/entrar",
            content=chunks(),
            headers=BROWSER | {"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert answer.status_code == 413
        assert _is_page(answer)

    def test_form_read_by_the_csrf_check_is_413_too(
        self, client: TestClient, web_engine: Engine
    ) -> None:
        """A session's form read by the CSRF check (logout: no form fields of its own)."""
        from api import accounts
        from db.accounts.models import User
        from db.engine import session_scope

        with session_scope(web_engine) as session:
            user = session.query(User).filter_by(username=WEB_USERS["agent"]).one()
            token, _ = accounts.issue_token(session=session, user=user, ttl_s=600)
        client.cookies.set(SESSION_COOKIE, token)
        try:
            answer = client.post("/sair", data={"csrf_token": FIELD_OVER}, headers=BROWSER)
        finally:
            client.cookies.clear()
        assert answer.status_code == 413
        assert _is_page(answer)

    def test_without_a_browser_it_is_the_json_413(self, client: TestClient) -> None:
        """The same form from a script (no text/html in Accept): the API's JSON 413."""
        assert _is_json_413(client.post("/entrar", data={"username": FIELD_OVER}))


class TestApiForms:
    @pytest.mark.parametrize("path", ["/api/v1/auth/token", "/osmand"])
    def test_field_over_the_part_limit_is_json_413(self, client: TestClient, path: str) -> None:
        """A form field of 1.5 MiB on the API's form routes: the JSON 413, naming the limits."""
        answer = client.post(path, data={"username": FIELD_OVER, "id": "x"}, headers=BROWSER)
        assert _is_json_413(answer)
        assert "campo" in answer.json()["error"]["message"]

    def test_malformed_multipart_stays_400(self, client: TestClient) -> None:
        """A multipart body without its boundary is malformed (400), not too large."""
        answer = client.post(
            "/api/v1/auth/token", content=b"x", headers={"Content-Type": "multipart/form-data"}
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "bad_request"


def test_real_server_answers_the_page(web_server: ServeProcess) -> None:
    """Through ``pontual serve``: the login form with a 1.5 MiB field is the 413 page."""
    answer = httpx.post(
        f"{web_server.url}/entrar", data={"username": FIELD_OVER}, headers=BROWSER, timeout=30
    )
    assert answer.status_code == 413
    assert _is_page(answer)
