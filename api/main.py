"""The FastAPI application: mounts one router per area, the error handlers and the rate limiter.

Mounting another area is one line in :data:`ROUTERS`. Every route refuses a parameter it
takes as one value sent more than once (:func:`api.deps.single_values`).
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import Engine
from starlette.responses import Response

from api import redact
from api.accounts import DevicePrincipal
from api.deps import DbGate, single_values
from api.errors import install_error_handlers
from api.headers import SecurityHeaders
from api.limits import BodyLimitMiddleware, BodyTimeoutMiddleware
from api.ratelimit import RateLimiter, TtlCache
from api.routes.maps import PageCache
from api.schemas import add_body_errors, error_responses
from api.settings import Settings, get_settings, proxy_networks
from api.web.auth import SESSION_COOKIE, remember_viewer
from api.web.pages import install as install_web
from api.web.pages import refusal_page, server_error_page, validation_page

ROUTERS = (
    "api.routes.health",
    "api.routes.docs",
    "api.routes.auth",
    "api.routes.pings",
    "api.routes.osmand",
    "api.routes.stands",
    "api.routes.fleet",
    "api.routes.drivers",
    "api.routes.findings",
    "api.routes.maps",
    "api.routes.public",
    "api.routes.proposals",
    "api.routes.alerts",
    "api.routes.planning",
    "api.routes.supervision",
    # the web console (api/web): login and error pages, then one module per area
    "api.web.pages",
    "api.web.admin",
    "api.web.agent",
    "api.web.supervisor",
    "api.web.planner",
    "api.web.citizen",
    "api.web.basemap",
)
"""Modules whose ``router`` is mounted, in this order."""

POOL_SIZE = 10
POOL_OVERFLOW = 30
PUBLIC_DB_SLOTS = 4
"""Public (unauthenticated) requests using the database at once: the rest of the pool and of
the thread pool stays free for device ingest, the console and the workers."""
PUBLIC_DB_WAIT_S = 2.0
"""Longest wait of a public request for a slot before a 503 (far below the pool's timeout)."""
PUBLIC_DB_QUEUE = 256
"""Public requests waiting for a slot at most; more are refused at once."""
CITIZEN_MAP_TTL_S = 30.0
"""The public citizen map is rendered at most once per this delay (and cached as long)."""

DESCRIPTION = """\
API do Pontual: pontos de táxi e licenças, frota, ocupação, achados, mapas; ingestão de posições
GPS (lote JSON e protocolo OsmAnd); consultas públicas para cidadãos (táxis acessíveis e pontos
próximos, sem dados pessoais). Erros: corpo `{"error": {"code", "message", ...}}`.
"""


def _validation_page(request: Request, exc: RequestValidationError) -> Response | None:
    """Return the console's 422 page (:func:`api.web.pages.validation_page`), or None.

    The session and the way back are put on ``request.state`` first (a request may be refused
    before its route looked the session up): the page offers a logged-in user the way back,
    the login only to a visitor.
    """
    if request.cookies.get(SESSION_COOKIE):
        remember_viewer(request)
    return validation_page(request, exc)


def _engine_for(settings: Settings, database_url: str | None) -> Engine:
    from sqlalchemy import create_engine

    from db.engine import parse_url

    url = database_url or settings.database_url
    if url is None:
        from api.cli_db import database_url as ready_url

        url = ready_url(settings, migrate=False)
    # Sync handlers run in a thread pool (40 threads): let as many hold a connection.
    return create_engine(
        parse_url(url),
        pool_size=POOL_SIZE,
        max_overflow=POOL_OVERFLOW,
        pool_pre_ping=True,
        pool_timeout=10,
        connect_args={
            "connect_timeout": 5,
            "options": f"-c statement_timeout={max(1, round(settings.statement_timeout_s * 1000))}",
        },
    )


def create_app(
    *,
    database_url: str | None = None,
    engine: Engine | None = None,
    settings: Settings | None = None,
) -> FastAPI:
    """Build the application.

    Parameters
    ----------
    database_url : str, optional
        Database to serve; default ``settings.database_url``, else the local embedded cluster.
        Migrations are not run here (``pontual serve`` runs them before starting).
    engine : sqlalchemy.Engine, optional
        Engine to use instead of creating one (not disposed by the app).
    settings : Settings, optional
        Defaults to :func:`api.settings.get_settings`.

    Returns
    -------
    fastapi.FastAPI
        The app, OpenAPI docs at ``/docs`` and ``/openapi.json``.
    """
    settings = settings or get_settings()
    own_engine = engine is None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if own_engine:
            app.state.engine.dispose()

    app = FastAPI(
        title="Pontual",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by api.routes.docs with vendored Swagger UI (no CDN)
        redoc_url=None,
        dependencies=[Depends(single_values)],  # ?a=1&a=2 on a single-valued `a`: 422
    )
    app.state.settings = settings
    app.state.engine = engine if engine is not None else _engine_for(settings, database_url)
    app.state.public_limiter = RateLimiter(limit=settings.public_rate_limit_per_min)
    app.state.login_limiter = RateLimiter(limit=settings.login_rate_limit_per_min)
    app.state.login_failures = RateLimiter(
        limit=settings.login_failures_per_account, window_s=settings.login_failure_window_s
    )
    app.state.login_familiar = TtlCache[bool](ttl_s=settings.login_familiar_days * 86_400)
    app.state.trusted_proxies = proxy_networks(settings.trusted_proxies)
    app.state.device_tokens = TtlCache[DevicePrincipal](ttl_s=settings.device_token_cache_s)
    app.state.public_db = DbGate(PUBLIC_DB_SLOTS, wait_s=PUBLIC_DB_WAIT_S, queue=PUBLIC_DB_QUEUE)
    app.state.citizen_map = PageCache(ttl_s=CITIZEN_MAP_TTL_S)
    install_web(app)  # static files, the console's error pages
    install_error_handlers(
        app, validation_page=_validation_page, server_error_page=server_error_page
    )
    app.add_middleware(BodyTimeoutMiddleware, read_timeout_s=settings.body_read_timeout_s)
    app.add_middleware(
        BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes, page=refusal_page
    )
    app.add_middleware(SecurityHeaders)  # outermost: a 413 carries the headers too
    redact.install()
    # Any request may be unreadable (400: e.g. a body that is not UTF-8) or too large (413: a
    # declared length is checked before any route); one with a body may also stall (408).
    for name in ROUTERS:
        app.include_router(
            importlib.import_module(name).router, responses=error_responses(400, 413)
        )
    openapi = app.openapi
    app.openapi = lambda: add_body_errors(openapi())  # type: ignore[method-assign]
    return app


def app_from_environment() -> FastAPI:
    """Build the app from the environment (``uvicorn --factory``, several workers)."""
    app = create_app()
    gc.freeze()  # a server process: what the imports built needs no more collection passes
    return app
