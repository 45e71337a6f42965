"""Jinja2 templates and static files of the web console; :func:`render` answers a page.

Templates live in ``api/web/templates`` (one folder per area: ``admin/``, ``fiscal/``,
``supervisao/``, ``planejamento/``, ``acessivel/``), every page extends ``base.html``.
Static files are served under ``/static/`` from ``api/web/static`` and, after it, the maps'
vendored assets (``maps/assets``: ``/static/leaflet/leaflet.js``,
``/static/pontual/pontual-maps.js``); :func:`static_url` adds a content hash (``?v=``) so a
versioned file can be cached for a year.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

import maps
from api.headers import WEB_CSP, web_csp
from api.web import formats
from api.web.auth import WebSession
from api.web.basemap import basemap_config
from api.web.formats import field_label
from api.web.nav import LANDING, NAV, ROLE_LABELS

WEB_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = WEB_DIR / "templates"
STATIC_DIR = WEB_DIR / "static"
MAPS_ASSETS_DIR = Path(maps.__file__).resolve().parent / "assets"
STATIC_DIRS = (STATIC_DIR, MAPS_ASSETS_DIR)
"""Where ``/static/<path>`` is looked up, in order."""
STATIC_PREFIX = "/static"
CACHE_VERSIONED = "public, max-age=31536000, immutable"
CACHE_UNVERSIONED = "public, max-age=3600"
SITE_NAME = "Pontual"


class CachedStaticFiles(StaticFiles):
    """Static files with ``Cache-Control``: a year for a ``?v=`` URL, an hour otherwise."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        """Answer the file (or 304) with its cache lifetime."""
        response = await super().get_response(path, scope)
        if response.status_code in (200, 304):
            versioned = b"v=" in scope.get("query_string", b"")
            response.headers["Cache-Control"] = CACHE_VERSIONED if versioned else CACHE_UNVERSIONED
        return response


def static_files() -> CachedStaticFiles:
    """Return the ASGI app serving :data:`STATIC_DIRS` (mounted at :data:`STATIC_PREFIX`)."""
    return CachedStaticFiles(directory=STATIC_DIR, packages=[("maps", "assets")])


@functools.cache
def static_url(path: str) -> str:
    """Return the URL of a static file with its content hash, e.g. ``/static/css/x.css?v=…``.

    Raises
    ------
    FileNotFoundError
        If no static folder has ``path`` (a template naming a missing file fails loudly).
    """
    for folder in STATIC_DIRS:
        candidate = (folder / path).resolve()
        if candidate.is_file() and candidate.is_relative_to(folder):
            digest = hashlib.sha256(candidate.read_bytes()).hexdigest()[:12]
            return f"{STATIC_PREFIX}/{path}?v={digest}"
    msg = f"arquivo estático '{path}' não existe em {', '.join(str(d) for d in STATIC_DIRS)}"
    raise FileNotFoundError(msg)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=jinja2.select_autoescape(("html",), default_for_string=True),
        undefined=jinja2.StrictUndefined,  # a misspelt variable fails the page (and its test)
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["static_url"] = static_url
    env.globals["site_name"] = SITE_NAME
    env.globals["field_label"] = field_label
    # numbers and counted nouns in pt-BR on every page: fmt.integer(n), fmt.plural(n, one, many)
    env.globals["fmt"] = formats
    return env


templates = Jinja2Templates(env=_environment())


def _simulated_data(request: Request) -> bool:
    settings = getattr(request.app.state, "settings", None)
    return bool(getattr(settings, "simulated_data", False))


def render(
    request: Request,
    template: str,
    *,
    web: WebSession | None,
    title: str,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    csp: str = WEB_CSP,
    **context: Any,
) -> Response:
    """Render a page of the console.

    Parameters
    ----------
    request : fastapi.Request
    template : str
        Path under ``api/web/templates`` (e.g. ``"fiscal/inicio.html"``).
    web : WebSession or None
        The logged-in user (header, nav, CSRF token of the forms), or None (public page).
    title : str
        The page's title (pt-BR); the ``<title>`` is ``"<title> — Pontual"``.
    status_code : int
    headers : mapping, optional
        Extra headers of the answer.
    csp : str
        Content-Security-Policy (:data:`api.headers.WEB_CSP`); with tiles configured
        (``PONTUAL_TILES_URL``) the default one also allows the tile server in ``img-src``.
    **context
        Variables of the template (they override the common ones).
    """
    role = web.principal.role if web is not None else None
    basemap = basemap_config(request.app.state.settings)
    if csp == WEB_CSP and basemap.origin is not None:
        csp = web_csp(img_src=(basemap.origin,))
    common: dict[str, Any] = {
        "web": web,
        "user": web.principal if web is not None else None,
        "role_label": ROLE_LABELS.get(role or "", ""),
        "nav": NAV.get(role or "", ()),
        "home_path": LANDING.get(role or "", "/"),
        "csrf_token": web.csrf_token if web is not None else None,
        "title": title,
        "current_path": request.url.path,
        "basemap": basemap,
        "simulated_data": _simulated_data(request),
    }
    response = templates.TemplateResponse(
        request, template, common | context, status_code=status_code, headers=headers
    )
    response.headers["Content-Security-Policy"] = csp
    return response
