"""A NUL character in a console address: the pt-BR page for a browser, the JSON 422 elsewhere.

Before: ``/fiscal/propostas/P-%00`` and the like answered a logged-in browser with the API's raw
JSON 422 (the database's NUL error was always answered in JSON).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from web_helpers import SECRET_KEY, WEB_USERS

from api.errors import NUL_MESSAGE
from api.web.auth import SESSION_COOKIE

with warnings.catch_warnings():  # httpx, not httpx2, under the test client (as tests/api)
    from starlette.exceptions import StarletteDeprecationWarning

    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
PAGES = (
    "/fiscal/propostas/P-%00",
    "/fiscal/achados/%00",
    "/admin/condutores/%00",
    "/planejamento?municipio=%00",
    "/planejamento?busca=%00",  # echoed into the page before
    "/planejamento/1100205/%00.csv",
    "/supervisao/pontos/SV1?ate=%00",
)


@pytest.fixture(scope="module")
def client(web_engine: Engine) -> Iterator[TestClient]:
    """The app in process on the console's database, logged in as the seeded admin."""
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
        yield test_client


class TestBrowser:
    @pytest.mark.parametrize("path", PAGES)
    def test_nul_in_address_is_the_page(self, client: TestClient, path: str) -> None:
        """A NUL in a console address from a logged-in browser: 422, the pt-BR error page with
        the console's menu, the NUL named; no JSON."""
        answer = client.get(path, headers=BROWSER)
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith("text/html")
        assert "Dados não aceitos" in answer.text and "caractere nulo" in answer.text
        assert "Sair" in answer.text  # the logged-in user keeps the console's header
        assert '"error"' not in answer.text


class TestNotABrowser:
    @pytest.mark.parametrize("path", PAGES[:2])
    def test_json_client_gets_the_json_422(self, client: TestClient, path: str) -> None:
        """Asked without HTML (``Accept: application/json``), the same address is the JSON 422."""
        answer = client.get(path, headers={"Accept": "application/json"})
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and NUL_MESSAGE in error["message"]

    def test_api_path_stays_json(self, client: TestClient) -> None:
        """Under the API's paths a browser's NUL is still the JSON 422."""
        token = client.cookies[SESSION_COOKIE]
        answer = client.get(
            "/api/v1/findings/%00", headers=BROWSER | {"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 422
        assert NUL_MESSAGE in answer.json()["error"]["message"]
