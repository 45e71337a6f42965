"""Web console sessions: the cookie, the CSRF token, who may open which page.

Session
    Logging in issues an ordinary user token (:func:`api.accounts.issue_token`): the same store,
    expiry (``PONTUAL_TOKEN_TTL_S``) and revocation as the API's bearer tokens. The browser keeps
    it in the :data:`SESSION_COOKIE` cookie (HttpOnly, SameSite=Lax, Secure over HTTPS, Path=/);
    the database keeps only its SHA-256. Every request looks the token up
    (:func:`api.accounts.principal_for_token`), so a logout, a disabled account, a password or
    a role change end the web session at its next request; the NOTIFY those send
    (:data:`api.accounts.SESSIONS_CHANNEL`) closes its live streams when they subscribe with
    :attr:`WebSession.token_digest` and the user id.
CSRF
    A synchronizer token derived from the session: HMAC-SHA256 of a fixed label keyed with the
    session token (the login form, before any session, with a random pre-session cookie,
    :data:`CSRF_COOKIE`). It changes with every session and cannot be computed without the
    HttpOnly cookie. One function checks it, :func:`check_csrf` (form field ``csrf_token`` or
    header ``X-CSRF-Token``): :func:`require_web_roles` runs it on every method but GET, HEAD
    and OPTIONS, so no state-changing page route can forget it; :func:`verify_csrf` (a session
    form without a role) and :func:`verify_login_csrf` (the login form) are the same check as
    dependencies.
Pages
    :func:`require_web_roles` lets the listed roles through; an anonymous visitor is sent to the
    login with ``next`` (kept only when it is a path of this site, :func:`safe_next`), a
    logged-in user of another role gets a 403 page.
Error pages
    :func:`remember_viewer` puts who is asking (:data:`VIEWER_STATE`) and the page they came
    from (:data:`BACK_STATE`) on ``request.state`` for a page rendered without the session
    (the 422 page, :func:`back_path`): ``erro.html`` then offers the way back, not the login.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.routing import Match

from api import accounts
from api.accounts import Principal
from api.deps import SessionDep, _trusted
from api.security import token_digest
from api.web._errors import (
    CsrfError,
    LoginRequiredError,
    PasswordChangeRequiredError,
    WebForbiddenError,
)
from db.accounts.models import ROLES

SESSION_COOKIE = "pontual_sessao"
"""Cookie of the web session: an opaque user token (stored hashed, like the API's)."""
CSRF_COOKIE = "pontual_csrf"
"""Pre-session cookie: the seed of the login form's CSRF token (random, HttpOnly)."""
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
LOGIN_PATH = "/entrar"
PASSWORD_PATH = "/conta/senha"
"""Where a user sets their own password (required after a temporary one)."""
LOGOUT_PATH = "/sair"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_NEXT_LENGTH = 2000
VIEWER_STATE = "web_viewer"
"""``request.state`` attribute: the request's valid :class:`WebSession`, or None."""
BACK_STATE = "web_back"
"""``request.state`` attribute: the page a refused request came from (:func:`back_path`)."""
_CSRF_LABEL = b"pontual-web-csrf-v1"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def csrf_token_for(seed: str) -> str:
    """Return the CSRF token of a session token or pre-session seed (hex HMAC-SHA256)."""
    return hmac.new(seed.encode("utf-8", "surrogatepass"), _CSRF_LABEL, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class WebSession:
    """A logged-in browser: who it is, and its session token (never shown, never logged)."""

    principal: Principal
    token: str = field(repr=False)

    @property
    def csrf_token(self) -> str:
        """The token every state-changing form of this session must send."""
        return csrf_token_for(self.token)

    @property
    def token_digest(self) -> str:
        """Digest of the session token (``AlertHub.subscribe(token_digest=…)``)."""
        return token_digest(self.token)


def web_session(request: Request, session: SessionDep) -> WebSession | None:
    """Return the session of the request's cookie if it is valid, else None."""
    token = request.cookies.get(SESSION_COOKIE)
    web = None
    if token:
        principal = accounts.principal_for_token(session=session, token=token)
        web = None if principal is None else WebSession(principal=principal, token=token)
    setattr(request.state, VIEWER_STATE, web)
    return web


OptionalWebSession = Annotated[WebSession | None, Depends(web_session)]


async def check_csrf(request: Request, *, seed: str | None, web: WebSession | None) -> None:
    """Raise :class:`CsrfError` unless the request carries the CSRF token of ``seed``."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(_FORM_TYPES):
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not seed or not sent:
        raise CsrfError(web=web)
    expected = csrf_token_for(seed).encode()
    if not hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), expected):
        raise CsrfError(web=web)


async def verify_csrf(request: Request, web: OptionalWebSession) -> None:
    """Require the session's CSRF token (403 page without a session or a matching token).

    :func:`require_web_roles` already runs this check on unsafe methods; use it alone on a
    form route that does not need a role.
    """
    await check_csrf(request, seed=web.token if web is not None else None, web=web)


async def verify_login_csrf(request: Request) -> None:
    """Require the login form's CSRF token (of the pre-session cookie; 403 page otherwise)."""
    await check_csrf(request, seed=request.cookies.get(CSRF_COOKIE), web=None)


class WebRoles:
    """Dependency letting only ``roles`` through (see :func:`require_web_roles`)."""

    def __init__(self, roles: frozenset[str], *, temporary_password: bool = False) -> None:
        unknown = sorted(roles - set(ROLES))
        if unknown or not roles:
            msg = f"papéis desconhecidos: {unknown}; esperado algum de {', '.join(ROLES)}"
            raise ValueError(msg)
        self.roles = roles
        self.temporary_password = temporary_password

    async def __call__(self, request: Request, web: OptionalWebSession) -> WebSession:
        """Return the session, or raise: login needed, forbidden role, or bad CSRF token."""
        if web is None:
            raise login_required(request)
        if web.principal.password_temporary and not self.temporary_password:
            raise PasswordChangeRequiredError
        if web.principal.role not in self.roles:
            raise WebForbiddenError(web=web, allowed=self.roles)
        if request.method not in SAFE_METHODS:
            await check_csrf(request, seed=web.token, web=web)
        return web


OwnAccount = Annotated[WebSession, Depends(WebRoles(frozenset(ROLES), temporary_password=True))]
"""Any logged-in user, a temporary password included: the page where they set their own."""


def login_required(request: Request) -> LoginRequiredError:
    """Return the error that sends a visitor without a session to the login, the page kept."""
    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return LoginRequiredError(
        next_path=safe_next(wanted) if request.method == "GET" else None,
        ended=SESSION_COOKIE in request.cookies,
    )


def require_web_roles(*roles: str) -> WebRoles:
    """Return the dependency of a page open to ``roles``.

    Anonymous: 303 to the login, the page kept in ``next``. Another role: 403 page. Any method
    but GET/HEAD/OPTIONS: the session's CSRF token is required too (403 page without it).
    Use it as ``web: Annotated[WebSession, Depends(require_web_roles("admin", "agent"))]``.
    """
    return WebRoles(frozenset(roles))


def safe_next(value: str | None) -> str | None:
    """Return ``value`` if it is a local path to go to after login, else None.

    Only an absolute path of this site: no scheme, no host, no ``//`` or backslash (which
    browsers read as another host), no control character, not the login or logout itself.
    """
    if not value or len(value) > MAX_NEXT_LENGTH:
        return None
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or parts.path in (LOGIN_PATH, LOGOUT_PATH):
        return None
    return value


_ANY_SEGMENT = "~"
"""A path segment no page is named by: a GET route matching it takes any value there."""


def _has_page(request: Request, path: str) -> bool:
    """Tell whether a GET of ``path`` reaches a route of the app."""
    scope = {
        "type": "http",
        "path": path,
        "method": "GET",
        "root_path": request.scope.get("root_path", ""),
        "query_string": b"",
        "headers": [],
    }
    return any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes)


def back_path(request: Request) -> str | None:
    """Return the page a refused request came from, by its path, or None.

    The browser sends no ``Referer`` (``Referrer-Policy: no-referrer``), so: for a GET, its
    page without the query (a GET of a form's step, ``…/confirmar``, the nearest page above
    it); for a form, the page of its own path (a list's create form) or, when that path is a
    step (``…/descartar``) or names a record, the nearest page above it.
    """
    path = request.url.path.rstrip("/") or "/"
    if request.method in SAFE_METHODS and _has_page(request, path):
        return path
    parent, _, last = path.rpartition("/")
    if request.method in SAFE_METHODS:
        last = ""  # no page at the path itself: only above it
    if last and not _has_page(request, f"{parent}/{_ANY_SEGMENT}") and _has_page(request, path):
        return path
    while parent:
        if _has_page(request, parent):
            return parent
        parent = parent.rpartition("/")[0]
    return None


def remember_viewer(request: Request) -> WebSession | None:
    """Put the request's session and its way back on ``request.state``; return the session.

    The session as :func:`web_session` found it, else looked up (a request refused before its
    route's dependencies ran). For a page rendered without ``web`` (``erro.html``).
    """
    if not hasattr(request.state, VIEWER_STATE):
        engine: Engine = request.app.state.engine
        with Session(engine) as session:
            web_session(request, session)
    setattr(request.state, BACK_STATE, back_path(request))
    web: WebSession | None = getattr(request.state, VIEWER_STATE)
    return web


def is_https(request: Request) -> bool:
    """Tell whether the browser reached us over HTTPS (directly or via a trusted proxy)."""
    if request.url.scheme == "https":
        return True
    networks = request.app.state.trusted_proxies
    peer = request.client.host if request.client else ""
    if not networks or not _trusted(peer, networks):
        return False
    proto = request.headers.get("x-forwarded-proto", "")
    return proto.split(",")[-1].strip().lower() == "https"


def set_session_cookie(response: Response, request: Request, token: str, *, max_age_s: int) -> None:
    """Give the browser its session cookie."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max_age_s,
        path="/",
        secure=is_https(request),
        httponly=True,
        samesite="lax",
    )


def clear_cookie(response: Response, request: Request, name: str) -> None:
    """Delete a cookie of the console (same attributes as when it was set)."""
    response.delete_cookie(name, path="/", secure=is_https(request), httponly=True, samesite="lax")


def pre_session_seed(request: Request) -> tuple[str, bool]:
    """Return the pre-session CSRF seed of the browser, and whether it is new (to be set)."""
    seed = request.cookies.get(CSRF_COOKIE)
    if seed and 20 <= len(seed) <= 100:
        return seed, False
    return secrets.token_urlsafe(32), True


def set_pre_session_cookie(response: Response, request: Request, seed: str) -> None:
    """Give the browser its pre-session CSRF seed (ends with the browser session)."""
    response.set_cookie(
        CSRF_COOKIE, seed, path="/", secure=is_https(request), httponly=True, samesite="lax"
    )
