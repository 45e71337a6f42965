"""Login, logout and the end of a session, against a real ``pontual serve`` (HTTP level).

The session is an ordinary user token in an HttpOnly cookie: whatever ends an API token (logout,
disabled account, password or role change by an admin) ends the web session at its next request.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import Engine, text
from web_helpers import WEB_PASSWORD, WEB_USERS, ServeProcess, csrf_from, http_login

from api.security import token_digest
from api.web.auth import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for, safe_next
from api.web.nav import LANDING
from api.web.pages import BAD_CREDENTIALS, EMPTY_LOGIN

ERROR_RE = re.compile(r'<p class="notice notice--error" id="erro-login" role="alert">([^<]*)</p>')


def _post_login(client: httpx.Client, username: str, password: str, **extra: str) -> httpx.Response:
    form = client.get("/entrar")
    data = {"username": username, "password": password, "csrf_token": csrf_from(form.text)}
    return client.post("/entrar", data=data | extra)


def _set_cookie(response: httpx.Response, name: str) -> str | None:
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{name}="):
            return header
    return None


def _with_cookie(base_url: str, token: str) -> httpx.Client:
    """A fresh client presenting only the given session cookie (as a stolen or kept copy)."""
    return httpx.Client(
        base_url=base_url, cookies={SESSION_COOKIE: token}, follow_redirects=False, timeout=30
    )


def _session_token(client: httpx.Client) -> str:
    token = client.cookies.get(SESSION_COOKIE)
    assert token, "no session cookie"
    return token


class TestLogin:
    @pytest.mark.parametrize("role", sorted(WEB_USERS))
    def test_each_role_lands_on_its_page(self, anon_client: httpx.Client, role: str) -> None:
        """A good login answers 303 to the role's page and sets an HttpOnly, SameSite=Lax,
        Path=/ session cookie (not Secure over plain HTTP); the page greets the user."""
        response = _post_login(anon_client, WEB_USERS[role], WEB_PASSWORD)
        assert response.status_code == 303
        assert response.headers["location"] == LANDING[role]
        cookie = _set_cookie(response, SESSION_COOKIE)
        assert cookie is not None
        attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"httponly", "path=/", "samesite=lax"} <= attributes
        assert "secure" not in attributes
        page = anon_client.get(LANDING[role])
        assert page.status_code == 200
        assert WEB_USERS[role] in page.text

    def test_session_token_is_stored_hashed_like_api_tokens(
        self, anon_client: httpx.Client, web_engine: Engine
    ) -> None:
        """The cookie's token is not in the database; its SHA-256 is an access token row."""
        _post_login(anon_client, WEB_USERS["planner"], WEB_PASSWORD)
        token = _session_token(anon_client)
        with web_engine.connect() as conn:
            hashes = set(conn.execute(text("SELECT token_hash FROM access_tokens")).scalars())
        assert token_digest(token) in hashes
        assert token not in hashes

    def test_wrong_password_and_unknown_user_get_the_same_answer(
        self, web_server: ServeProcess
    ) -> None:
        """Wrong password and unknown user: same status, same pt-BR message, no session."""
        answers = []
        for username, password in ((WEB_USERS["agent"], "errada-123456"), ("ninguem", "x" * 12)):
            with httpx.Client(base_url=web_server.url, follow_redirects=False) as client:
                response = _post_login(client, username, password)
                assert _set_cookie(response, SESSION_COOKIE) is None
                assert client.cookies.get(SESSION_COOKIE) is None
                answers.append((response.status_code, ERROR_RE.findall(response.text)))
        assert answers[0] == answers[1] == (422, [BAD_CREDENTIALS])

    @pytest.mark.parametrize(("username", "password"), [("", ""), ("alguem", ""), (" ", "x")])
    def test_an_empty_field_is_asked_for(
        self, anon_client: httpx.Client, username: str, password: str
    ) -> None:
        """A field left empty (the browser's check bypassed) asks for it, not "wrong
        password"."""
        response = _post_login(anon_client, username, password)
        assert response.status_code == 422
        assert ERROR_RE.findall(response.text) == [EMPTY_LOGIN]

    def test_disabled_account_cannot_log_in(
        self, anon_client: httpx.Client, make_user: Callable[..., str], web_engine: Engine
    ) -> None:
        """A disabled account with the right password gets the same refusal and no session."""
        from api import accounts
        from db.engine import session_scope

        username = make_user("agent")
        with session_scope(web_engine) as session:
            accounts.disable_user(session=session, username=username)
        response = _post_login(anon_client, username, WEB_PASSWORD)
        assert response.status_code == 422
        assert ERROR_RE.findall(response.text) == [BAD_CREDENTIALS]
        assert _set_cookie(response, SESSION_COOKIE) is None

    def test_login_form_without_csrf_token_is_refused(self, anon_client: httpx.Client) -> None:
        """A login POST without or with a wrong CSRF token: 403 pt-BR page, no session."""
        anon_client.get("/entrar")  # the pre-session cookie is there: only the token is missing
        assert anon_client.cookies.get(CSRF_COOKIE)
        credentials = {"username": WEB_USERS["agent"], "password": WEB_PASSWORD}
        for extra in ({}, {"csrf_token": "0" * 64}, {"csrf_token": csrf_token_for("other")}):
            response = anon_client.post("/entrar", data=credentials | extra)
            assert response.status_code == 403
            assert "Formulário recusado" in response.text
            assert _set_cookie(response, SESSION_COOKIE) is None

    def test_login_from_another_site_without_the_pre_session_cookie_is_refused(
        self, web_server: ServeProcess
    ) -> None:
        """A token copied from someone else's login page does not work without their cookie."""
        with httpx.Client(base_url=web_server.url) as victim:
            token = csrf_from(victim.get("/entrar").text)
        with httpx.Client(base_url=web_server.url, follow_redirects=False) as attacker:
            data = {"username": WEB_USERS["agent"], "password": WEB_PASSWORD, "csrf_token": token}
            assert attacker.post("/entrar", data=data).status_code == 403

    def test_a_new_login_revokes_the_previous_session_of_the_browser(
        self, anon_client: httpx.Client, web_server: ServeProcess
    ) -> None:
        """A login form left open, sent while the browser already has a session (another
        tab): the new session replaces the old one, whose token is revoked."""
        token = csrf_from(anon_client.get("/entrar").text)
        data = {"username": WEB_USERS["agent"], "password": WEB_PASSWORD, "csrf_token": token}
        assert anon_client.post("/entrar", data=data).status_code == 303
        first = _session_token(anon_client)
        assert anon_client.post("/entrar", data=data).status_code == 303
        assert _session_token(anon_client) != first
        assert anon_client.get("/fiscal").status_code == 200
        with _with_cookie(web_server.url, first) as old:
            assert old.get("/fiscal").status_code == 303

    def test_logged_in_user_visiting_the_login_goes_to_their_page(
        self, web_client: Callable[..., httpx.Client]
    ) -> None:
        """GET /entrar, / and /painel with a session: 303 to the role's page."""
        client = web_client("supervisor")
        for path in ("/entrar", "/", "/painel"):
            response = client.get(path)
            assert (response.status_code, response.headers["location"]) == (303, "/supervisao")

    def test_anonymous_root_and_panel_go_to_the_login(self, anon_client: httpx.Client) -> None:
        """/ and /painel without a session: 303 to /entrar."""
        for path in ("/", "/painel"):
            response = anon_client.get(path)
            assert (response.status_code, response.headers["location"]) == (303, "/entrar")


class TestNext:
    def test_anonymous_visit_keeps_the_page_for_after_login(
        self, anon_client: httpx.Client
    ) -> None:
        """/fiscal?ordem=data → login with next → after login, back to /fiscal?ordem=data."""
        response = anon_client.get("/fiscal?ordem=data")
        assert response.status_code == 303
        target = urlsplit(response.headers["location"])
        assert target.path == "/entrar"
        assert parse_qs(target.query) == {"next": ["/fiscal?ordem=data"]}
        form = anon_client.get(response.headers["location"])
        assert 'name="next" value="/fiscal?ordem=data"' in form.text
        done = anon_client.post(
            "/entrar",
            data={
                "username": WEB_USERS["agent"],
                "password": WEB_PASSWORD,
                "csrf_token": csrf_from(form.text),
                "next": "/fiscal?ordem=data",
            },
        )
        assert (done.status_code, done.headers["location"]) == (303, "/fiscal?ordem=data")

    @pytest.mark.parametrize(
        "evil",
        [
            "https://evil.example",
            "https://evil.example/fiscal",
            "//evil.example",
            "//evil.example/fiscal",
            "/\\evil.example",
            "\\\\evil.example",
            "/\t/evil.example",
            "javascript:alert(1)",
            "http:evil.example",
            "fiscal",
            "/entrar",
            "/sair",
        ],
    )
    def test_next_outside_the_site_is_ignored(self, anon_client: httpx.Client, evil: str) -> None:
        """A next that is not a local path is neither put in the form nor followed."""
        form = anon_client.get("/entrar", params={"next": evil})
        assert 'name="next" value=""' in form.text
        done = anon_client.post(
            "/entrar",
            data={
                "username": WEB_USERS["planner"],
                "password": WEB_PASSWORD,
                "csrf_token": csrf_from(form.text),
                "next": evil,
            },
        )
        assert (done.status_code, done.headers["location"]) == (303, "/planejamento")

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("/fiscal", "/fiscal"),
            (
                "/fiscal/propostas?kind=queue_jump&page=2",
                "/fiscal/propostas?kind=queue_jump&page=2",
            ),
            ("/%2F%2Fevil.example", "/%2F%2Fevil.example"),  # a path of this site
            ("", None),
            (None, None),
            ("https://evil.example", None),
            ("//evil.example", None),
            ("/\\evil.example", None),
            ("/x\r\nSet-Cookie: a=b", None),
            ("/" + "a" * 3000, None),
        ],
    )
    def test_safe_next(self, value: str | None, expected: str | None) -> None:
        """safe_next keeps local paths only."""
        assert safe_next(value) == expected


class TestEndOfSession:
    def test_logout_ends_the_session(
        self, web_server: ServeProcess, make_user: Callable[..., str], web_engine: Engine
    ) -> None:
        """POST /sair with the token: 303 to the login, cookie deleted, the token revoked: a
        kept copy of the cookie no longer opens any page."""
        username = make_user("agent")
        with closing(http_login(web_server.url, username)) as client:
            token = _session_token(client)
            response = client.post("/sair", data={"csrf_token": csrf_token_for(token)})
            assert (response.status_code, response.headers["location"]) == (
                303,
                "/entrar?aviso=saiu",
            )
            deleted = _set_cookie(response, SESSION_COOKIE)
            assert deleted is not None and "max-age=0" in deleted.lower()
            assert "Você saiu" in client.get("/entrar?aviso=saiu").text
        with web_engine.connect() as conn:
            revoked = conn.execute(
                text("SELECT revoked_at FROM access_tokens WHERE token_hash = :h"),
                {"h": token_digest(token)},
            ).scalar_one()
        assert isinstance(revoked, dt.datetime)
        with _with_cookie(web_server.url, token) as kept:
            response = kept.get("/fiscal")
            assert response.status_code == 303
            assert parse_qs(urlsplit(response.headers["location"]).query)["aviso"] == ["expirou"]

    def test_logout_without_csrf_token_is_refused(
        self, web_server: ServeProcess, make_user: Callable[..., str]
    ) -> None:
        """POST /sair without or with a wrong token: 403 page, and the session still works."""
        with closing(http_login(web_server.url, make_user("planner"))) as client:
            for data in ({}, {"csrf_token": "f" * 64}, {"csrf_token": csrf_token_for("pu_x")}):
                response = client.post("/sair", data=data)
                assert response.status_code == 403
                assert "Formulário recusado" in response.text
            assert client.get("/planejamento").status_code == 200

    @pytest.mark.parametrize("change", ["disable", "role", "password"])
    def test_admin_changes_end_the_session(
        self,
        web_server: ServeProcess,
        make_user: Callable[..., str],
        web_engine: Engine,
        change: str,
    ) -> None:
        """Disabling the account, changing its role or its password (the functions the admin
        commands use) ends the web session: the next request goes to the login."""
        from api import accounts
        from db.engine import session_scope

        username = make_user("agent")
        with closing(http_login(web_server.url, username)) as client:
            assert client.get("/fiscal").status_code == 200
            with session_scope(web_engine) as session:
                if change == "disable":
                    accounts.disable_user(session=session, username=username)
                elif change == "role":
                    accounts.set_role(session=session, username=username, role="planner")
                else:
                    accounts.set_password(
                        session=session, username=username, password="nova-senha-987"
                    )
            for path in ("/fiscal", "/planejamento"):
                response = client.get(path)
                assert response.status_code == 303, path
                assert response.headers["location"].startswith("/entrar?")
            assert client.cookies.get(SESSION_COOKIE) is None  # the stale cookie is deleted


@pytest.fixture(scope="module")
def proxied_server(
    web_database_url: str, web_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    """A second server behind a "proxy" (127.0.0.1 trusted) with 2 logins per minute and IP."""
    folder = tmp_path_factory.mktemp("web-proxied")
    server = ServeProcess(
        database_url=web_database_url,
        data_dir=folder,
        log_path=folder / "serve.log",
        env={"PONTUAL_LOGIN_RATE_LIMIT_PER_MIN": "2", "PONTUAL_TRUSTED_PROXIES": "127.0.0.1"},
    )
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


class TestBehindAProxy:
    def test_cookies_are_secure_over_https(self, proxied_server: ServeProcess) -> None:
        """X-Forwarded-Proto: https from a trusted proxy: session and pre-session cookies are
        Secure."""
        headers = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
        with httpx.Client(
            base_url=proxied_server.url, headers=headers, follow_redirects=False
        ) as client:
            form = client.get("/entrar")
            pre = _set_cookie(form, CSRF_COOKIE)
            assert pre is not None and "; secure" in pre.lower()
            seed = pre.split(";")[0].split("=", 1)[1]
            data = {
                "username": WEB_USERS["agent"],
                "password": WEB_PASSWORD,
                "csrf_token": csrf_from(form.text),
            }
            # httpx keeps Secure cookies for https: send the seed as the browser would
            response = client.post(
                "/entrar", data=data, headers={"Cookie": f"{CSRF_COOKIE}={seed}"}
            )
            assert response.status_code == 303
            cookie = _set_cookie(response, SESSION_COOKIE)
            assert cookie is not None and "; secure" in cookie.lower()

    def test_login_shares_the_api_login_bucket(self, proxied_server: ServeProcess) -> None:
        """With 2 logins a minute per IP: an API login and a web login pass, the next web login
        is refused with the pt-BR 429 page and Retry-After, and no session."""
        headers = {"X-Forwarded-For": "203.0.113.9"}
        with httpx.Client(
            base_url=proxied_server.url, headers=headers, follow_redirects=False
        ) as client:
            api = client.post(
                "/api/v1/auth/token",
                data={"username": WEB_USERS["agent"], "password": WEB_PASSWORD},
            )
            assert api.status_code == 200
            assert _post_login(client, WEB_USERS["agent"], WEB_PASSWORD).status_code == 303
            client.cookies.clear()
            refused = _post_login(client, WEB_USERS["agent"], WEB_PASSWORD)
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert "Muitas tentativas de entrada" in refused.text
            assert _set_cookie(refused, SESSION_COOKIE) is None


@pytest.fixture(scope="module")
def throttled_server(
    web_database_url: str, web_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    """A server behind a "proxy" (127.0.0.1 trusted) with 3 failed logins per account."""
    folder = tmp_path_factory.mktemp("web-throttled")
    server = ServeProcess(
        database_url=web_database_url,
        data_dir=folder,
        log_path=folder / "serve.log",
        env={"PONTUAL_LOGIN_FAILURES_PER_ACCOUNT": "3", "PONTUAL_TRUSTED_PROXIES": "127.0.0.1"},
    )
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


class TestAccountThrottle:
    def test_failures_from_many_addresses_lock_the_account_for_a_while(
        self, throttled_server: ServeProcess, make_user: Callable[..., str]
    ) -> None:
        """3 wrong passwords from 3 addresses: the right one, from a 4th, gets the pt-BR 429
        login page with Retry-After and no session; the API login of that account too. Another
        account logs in."""
        username = make_user("agent")

        def client(address: str) -> httpx.Client:
            return httpx.Client(
                base_url=throttled_server.url,
                headers={"X-Forwarded-For": address},
                follow_redirects=False,
            )

        for k in range(3):
            with client(f"198.51.100.{k + 1}") as guesser:
                wrong = _post_login(guesser, username, f"chute-{k}-errado")
                assert wrong.status_code == 422
                assert ERROR_RE.findall(wrong.text) == [BAD_CREDENTIALS]
        with client("203.0.113.50") as owner:
            refused = _post_login(owner, username, WEB_PASSWORD)
            assert refused.status_code == 429
            assert 1 <= int(refused.headers["retry-after"]) <= 900
            (message,) = ERROR_RE.findall(refused.text)
            assert message.startswith("Muitas tentativas de entrada. Tente novamente em")
            assert _set_cookie(refused, SESSION_COOKIE) is None
            api = owner.post(
                "/api/v1/auth/token", data={"username": username, "password": WEB_PASSWORD}
            )
            assert api.status_code == 429
            assert api.json()["error"]["code"] == "rate_limited"
            other = _post_login(owner, make_user("planner"), WEB_PASSWORD)
            assert (other.status_code, other.headers["location"]) == (303, "/planejamento")


def test_session_cookie_never_reaches_the_log(
    web_server: ServeProcess, make_user: Callable[..., str], tmp_path: Path
) -> None:
    """After logins, pages, a logout and a refused form, no session token, CSRF seed or CSRF
    token of those requests is in the server's log (which has their access lines)."""
    secrets_seen = []
    for role in ("agent", "admin"):
        with closing(http_login(web_server.url, make_user(role))) as client:
            token = _session_token(client)
            secrets_seen += [token, token[3:], csrf_token_for(token)]
            client.get(LANDING[role] + f"?csrf_token={csrf_token_for(token)}")
            client.get("/admin")
            client.post("/sair", data={})
            client.post("/sair", data={"csrf_token": csrf_token_for(token)})
    with httpx.Client(base_url=web_server.url) as anon:
        anon.get("/entrar")
        seed = anon.cookies.get(CSRF_COOKIE)
        assert seed
        secrets_seen += [seed, csrf_token_for(seed)]
    log = web_server.log()
    assert '"POST /sair HTTP/1.1" 303' in log and "/entrar" in log
    assert "csrf_token=***" in log
    for secret in secrets_seen:
        assert secret not in log
