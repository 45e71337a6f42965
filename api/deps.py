"""``Annotated`` dependencies of the routes: settings, database session, callers and roles.

:func:`single_values` (on every route, :func:`api.main.create_app`) refuses a query or form
parameter sent more than once where the route declares one value, and a query parameter an API
route does not declare: 422, nothing run.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from ipaddress import IPv4Network, IPv6Network, ip_address
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from fastapi import Depends, Request, params
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, OAuth2PasswordBearer
from pydantic import BaseModel
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.requests import HTTPConnection

from api import accounts
from api._errors import (
    ForbiddenError,
    NotAuthenticatedError,
    RateLimitedError,
    ServiceUnavailableError,
)
from api.accounts import DevicePrincipal, Principal
from api.errors import nul_in_address
from api.ratelimit import RateLimiter, TtlCache
from api.security import token_digest
from api.settings import Settings

TOKEN_URL = "/api/v1/auth/token"

_oauth2 = OAuth2PasswordBearer(tokenUrl=TOKEN_URL, auto_error=False)
_device_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="DeviceToken",
    description="Token do dispositivo (impresso uma vez por `pontual devices add`)",
)


async def get_settings(request: Request) -> Settings:
    """Return the settings the app was created with (async: no thread hop)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_engine(request: Request) -> Engine:
    """Return the app's engine (async: no thread hop)."""
    engine: Engine = request.app.state.engine
    return engine


def get_session(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Session]:
    """Yield a session; handlers commit what they write, the rest is rolled back on close."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SessionDep = Annotated[Session, Depends(get_session)]


BearerToken = Annotated[str | None, Depends(_oauth2)]
"""The raw bearer token of the request, if any."""


PASSWORD_TEMPORARY = (
    "a senha desta conta é temporária (gerada pela administração): entre no console "
    "(/entrar) e defina a sua antes de usar a API"
)


def _unauthenticated(message: str) -> NotAuthenticatedError:
    return NotAuthenticatedError(message, headers={"WWW-Authenticate": "Bearer"})


def current_user(session: SessionDep, token: Annotated[str | None, Depends(_oauth2)]) -> Principal:
    """Return the logged-in caller, or raise 401."""
    if not token:
        raise _unauthenticated("autenticação necessária: envie 'Authorization: Bearer <token>'")
    principal = accounts.principal_for_token(session=session, token=token)
    if principal is None:
        raise _unauthenticated("token inválido, expirado ou revogado; faça login novamente")
    if principal.password_temporary:
        raise ForbiddenError(PASSWORD_TEMPORARY, code="password_change_required")
    return principal


CurrentUser = Annotated[Principal, Depends(current_user)]


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """Return a dependency that lets only ``roles`` through (403 for the others)."""
    allowed = frozenset(roles)

    def dependency(user: CurrentUser) -> Principal:
        if user.role not in allowed:
            msg = (
                f"o papel '{user.role}' não tem acesso a este recurso "
                f"(permitido: {', '.join(sorted(allowed))})"
            )
            raise ForbiddenError(msg)
        return user

    return dependency


async def current_device(
    request: Request,
    engine: EngineDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_device_bearer)],
) -> DevicePrincipal:
    """Return the device owning the bearer token, or raise 401.

    A valid token is remembered for ``device_token_cache_s`` (a device sends every few seconds;
    a revoked token is refused within that delay); an invalid one is asked every time. Async:
    a remembered token costs no thread hop; the database is asked from the thread pool.
    """
    if credentials is None or not credentials.credentials:
        raise _unauthenticated("token do dispositivo ausente: 'Authorization: Bearer <token>'")
    cache: TtlCache[DevicePrincipal] = request.app.state.device_tokens
    key = token_digest(credentials.credentials)
    device = cache.get(key)
    if device is None:
        device = await run_in_threadpool(_device_for_token, engine, credentials.credentials)
        if device is None:
            raise _unauthenticated("token de dispositivo inválido ou revogado")
        cache.put(key, device)
    return device


def _device_for_token(engine: Engine, token: str) -> DevicePrincipal | None:
    with Session(engine) as session:
        return accounts.device_for_token(session=session, token=token)


CurrentDevice = Annotated[DevicePrincipal, Depends(current_device)]


def _trusted(address: str, networks: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_key(request: Request) -> str:
    """Return the key a client is rate-limited by: its IP address.

    ``X-Forwarded-For`` counts only when the peer is one of ``trusted_proxies``: the client
    is then the rightmost address of the header that is not a trusted proxy (what a client
    writes to the left of its proxy's entry cannot choose its bucket).
    """
    peer = request.client.host if request.client else "unknown"
    networks = request.app.state.trusted_proxies
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [h.strip() for v in request.headers.getlist("x-forwarded-for") for h in v.split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _trusted(hop, networks):
            return hop
    return peer


def public_rate_limit(request: Request) -> None:
    """Count a public request against the client's quota; 429 with Retry-After when over."""
    _rate_limit(request, request.app.state.public_limiter)


async def public_rate_limit_async(request: Request) -> None:
    """:func:`public_rate_limit` as a route dependency: on the event loop, no thread hop."""
    _rate_limit(request, request.app.state.public_limiter)


def login_rate_limit(request: Request) -> None:
    """Count a login against the client's login quota (a bucket apart from the public one)."""
    wait_s = request.app.state.login_limiter.hit(client_key(request))
    if wait_s is not None:
        raise _login_limited(wait_s)


def account_key(username: str) -> str:
    """Return the key failed logins of a name count under: its trimmed, case-folded hash.

    Hashed, so the limiter keeps no names and a long name costs no more memory.
    """
    name = username.strip().casefold().encode("utf-8", "surrogatepass")
    return hashlib.sha256(name).hexdigest()


def login_attempt(request: Request, username: str) -> str:
    """Count a login of ``username`` as a failure in advance; 429 when its quota is spent.

    Counting before the password is checked means concurrent guesses cannot overrun the quota.
    Call :func:`login_succeeded` with the returned key when the login succeeds: a good login
    gives back its own count (it is not a failure) and leaves the others' failures counted.
    Answers the same for a name with or without an account.

    From an address the account logged in from before (within ``login_familiar_days``), the
    quota is the account's at that address alone: guesses from elsewhere, which spend the
    account's quota, cannot lock its owner out of their usual address.
    """
    key = account_key(username)
    familiar = f"{key}|{client_key(request)}"
    if request.app.state.login_familiar.get(familiar):
        key = familiar
    wait_s = request.app.state.login_failures.hit(key)
    if wait_s is not None:
        raise _login_limited(wait_s)
    return key


def login_succeeded(request: Request, key: str) -> None:
    """Give back the count :func:`login_attempt` took for a login that succeeded.

    The address becomes familiar to the account (:func:`login_attempt`).
    """
    request.app.state.login_failures.undo(key)
    account = key.split("|", 1)[0]
    request.app.state.login_familiar.put(f"{account}|{client_key(request)}", True)


def _login_limited(wait_s: float) -> RateLimitedError:
    """Return the 429 of a login, by address or by account alike (neither is told apart)."""
    retry = RateLimiter.retry_after(wait_s)
    msg = f"muitas tentativas de entrada; tente novamente em {retry} s"
    return RateLimitedError(msg, headers={"Retry-After": retry})


def _rate_limit(request: Request, limiter: RateLimiter) -> None:
    wait_s = limiter.hit(client_key(request))
    if wait_s is not None:
        retry = RateLimiter.retry_after(wait_s)
        msg = (
            f"limite de {limiter.limit} requisições por minuto excedido; "
            f"tente novamente em {retry} s"
        )
        raise RateLimitedError(msg, headers={"Retry-After": retry})


def supervisor_scope(user: Principal, stand_id: str) -> None:
    """Raise 403 when a supervisor asks for a stand outside their scope."""
    if user.role == "supervisor" and stand_id not in user.stand_ids:
        msg = f"o ponto '{stand_id}' não está entre os pontos deste supervisor"
        raise ForbiddenError(msg)


class DbGate:
    """At most ``slots`` requests of one kind using the database at once (public traffic).

    A request waits at most ``wait_s`` for a slot, behind at most ``queue`` others; otherwise
    it is refused at once (:meth:`slot` raises a 503 with ``Retry-After``), so a burst of
    public requests can never hold more than ``slots`` of the pool's connections and of the
    thread pool's threads, nor queue for the pool's timeout. Event-loop only (not
    thread-safe); a waiter's future is made in the running loop, so one gate serves
    successive loops (test clients).
    """

    def __init__(self, slots: int, *, wait_s: float, queue: int) -> None:
        if slots < 1 or wait_s < 0 or queue < 0:
            msg = f"slots ({slots}) >= 1, wait_s ({wait_s}) e queue ({queue}) >= 0"
            raise ValueError(msg)
        self.slots, self.wait_s, self.queue = slots, wait_s, queue
        self.in_use = 0
        self.refused = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def _acquire(self) -> bool:
        if self.in_use < self.slots and not self._waiters:
            self.in_use += 1
            return True
        if len(self._waiters) >= self.queue:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait_s)
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return True  # handed a slot at the deadline
            self._forget(waiter)
            return False
        except BaseException:  # cancelled (the client left): give back a slot handed over
            if waiter.done() and not waiter.cancelled():
                self._release()
            else:
                self._forget(waiter)
            raise
        return True  # the slot was handed over by _release

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        waiter.cancel()
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # hand the slot over: in_use unchanged
                return
        self.in_use -= 1

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the block; raise :class:`ServiceUnavailableError` (503) if none."""
        if not await self._acquire():
            self.refused += 1
            raise ServiceUnavailableError(
                "muitas consultas públicas ao mesmo tempo; tente novamente em 1 s",
                code="server_busy",
                headers={"Retry-After": "1"},
            )
        try:
            yield
        finally:
            self._release()


_T = TypeVar("_T")


def _in_session(engine: Engine, query: Callable[..., _T], *args: object) -> _T:
    with Session(engine, expire_on_commit=False) as session:
        return query(session, *args)


async def public_query(request: Request, query: Callable[..., _T], *args: object) -> _T:
    """Run ``query(session, *args)`` for a public request, within the public gate.

    The session is opened and closed in one thread-pool call, so the connection goes back to
    the pool as soon as the query is done (a ``yield`` dependency would keep it until the
    answer is sent). Raises 503 (``server_busy``) when the gate is full.
    """
    gate: DbGate = request.app.state.public_db
    engine: Engine = request.app.state.engine
    async with gate.slot():
        return await run_in_threadpool(_in_session, engine, query, *args)


# --- parameters sent more than once ----------------------------------------------------------

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _is_list(annotation: Any) -> bool:
    """Whether a parameter's type takes several values (``list[str] | None``, ``set[int]``…)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_list(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return any(_is_list(a) for a in get_args(annotation))
    kind = origin or annotation
    if not isinstance(kind, type) or issubclass(kind, str | bytes):
        return False
    return issubclass(kind, Sequence | AbstractSet)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """Return the model of a parameter declared as one (``Annotated[Model, Query()]``), or None."""
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _names(fields: Sequence[Any], *, lists: bool = False) -> set[str]:
    """Names (aliases) of the declared fields of one value (``lists``: all), models expanded."""
    names: set[str] = set()
    for field in fields:
        info = field.field_info
        model = _model_of(info.annotation)
        if model is not None:
            names |= {
                f.alias or name
                for name, f in model.model_fields.items()
                if lists or not _is_list(f.annotation)
            }
        elif lists or not _is_list(info.annotation):
            names.add(field.alias)
    return names


def _declared(dependant: Dependant) -> tuple[list[Any], list[Any]]:
    """Return the query and the form fields of a route's dependency tree."""
    query: list[Any] = []
    form: list[Any] = []
    pending = [dependant]
    while pending:
        current = pending.pop()
        query.extend(current.query_params)
        form.extend(f for f in current.body_params if isinstance(f.field_info, params.Form))
        pending.extend(current.dependencies)
    return query, form


def single_value_params(dependant: Dependant) -> tuple[set[str], set[str]]:
    """Return the query and the form parameters a route's dependency tree declares as one value.

    List parameters (``list[str]``: ``?tipo=a&tipo=b``) are left out: they may repeat.
    """
    query, form = _declared(dependant)
    return _names(query), _names(form)


def repeated_values(items: Sequence[tuple[str, Any]]) -> dict[str, list[Any]]:
    """Return each name given more than once in ``items`` with all its values."""
    values: dict[str, list[Any]] = {}
    for key, value in items:
        values.setdefault(key, []).append(value)
    return {k: v for k, v in values.items() if len(v) > 1}


def _repeat_error(place: str, name: str, values: list[Any]) -> dict[str, Any]:
    noun = "parâmetro" if place == "query" else "campo"
    message = f"enviado {len(values)} vezes; este {noun} aceita um só valor"
    shown = [v if isinstance(v, str) else "(arquivo)" for v in values]
    return {
        "type": "value_error",
        "loc": (place, name),
        "msg": message,
        "input": shown,
        "ctx": {"error": message},
    }


async def single_values(conn: HTTPConnection) -> None:
    """Refuse a parameter sent more than once that the route takes as one value, or unknown.

    Unknown: a query parameter an API route (``/api/…``) does not declare.

    FastAPI (as Starlette's ``get``) keeps the last of repeated values: ``?status=a&status=b``
    would be read as ``b``, and a form with two ``motivo`` fields would store the second
    unseen. Raises a :class:`RequestValidationError` naming each (the JSON 422, or the
    console's pt-BR page for a browser) before the route's other dependencies and handler run,
    so nothing is stored. Parameters declared as lists may repeat; an undeclared one is not
    read, so not checked. Cheap when nothing repeats: the route is inspected only then (and on
    an API path with a query, whose names must be declared: :func:`_unknown_query`).
    """
    if conn.url.path == "/osmand":  # its own rule: a fix quarantined with every value, 200
        return
    # a NUL is refused before any page can echo it; the citizen's search says so in its form
    if not conn.url.path.startswith("/acessivel") and (nul := nul_in_address(conn)) is not None:
        raise nul
    repeated = {"query": repeated_values(conn.query_params.multi_items())}
    content_type = conn.headers.get("content-type", "")
    route = conn.scope.get("route")
    dependant = getattr(route, "dependant", None)
    request = conn if isinstance(conn, Request) else None
    has_form = request is not None and content_type.startswith(FORM_TYPES)
    if not isinstance(dependant, Dependant):
        return
    # an API route answering a page (a map) is opened from links: a shared link's tracking tags
    # (?fbclid=, ?utm_source=) must not break it, as the console's pages forgive theirs
    page = getattr(route, "response_class", None) is HTMLResponse
    errors = [] if page else _unknown_query(conn, dependant)
    if repeated["query"] or has_form:
        single_query, single_form = single_value_params(dependant)
        if request is not None and has_form and single_form:
            form = await request.form()  # parsed already for the route's fields: the same object
            repeated["body"] = repeated_values(form.multi_items())
        errors += [
            _repeat_error(place, name, values)
            for place, names in (("query", single_query), ("body", single_form))
            for name, values in repeated.get(place, {}).items()
            if name in names
        ]
    if errors:
        raise RequestValidationError(errors)


def _unknown_query(conn: HTTPConnection, dependant: Dependant) -> list[dict[str, Any]]:
    """Return an error for each query parameter an API route does not declare.

    A misspelt filter (``?vehicle=`` for ``?vehicle_id=``) would be ignored and the answer come
    unfiltered, as if filtered. The console's pages keep their own forgiving links.
    """
    if not conn.query_params or not conn.url.path.startswith("/api/"):
        return []
    known = _names(_declared(dependant)[0], lists=True)
    message = "parâmetro desconhecido nesta rota; aceitos: " + (
        ", ".join(sorted(known)) or "nenhum"
    )
    return [
        {
            "type": "value_error",
            "loc": ("query", name),
            "msg": message,
            "input": conn.query_params[name],
            "ctx": {"error": message},
        }
        for name in sorted(set(conn.query_params) - known)
    ]
