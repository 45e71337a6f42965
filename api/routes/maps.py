"""Maps as self-contained HTML (offline Leaflet): overview, findings, stands, planner, citizen.

Every map's background is the console's (:func:`api.web.basemap.basemap_config`): the
configured tile server, else the offline basemap of this server (``/mapa-base.geojson``), never a
third-party tile server by default. The staff's maps take the API's bearer token or the
console's session (a browser opening the map from the console's menu; reading only).

The citizen map is public: it is rendered at most once per :class:`PageCache` delay (every
answer in between is the cached page, ``Cache-Control: public, max-age``), its data are read
within the public database gate (:class:`api.deps.DbGate`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from branca.element import MacroElement
from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from api.accounts import Principal
from api.deps import (
    BearerToken,
    SessionDep,
    SettingsDep,
    current_user,
    public_query,
    public_rate_limit_async,
    require_roles,
)
from api.headers import HTML_CSP
from api.routes.public import published_instant
from api.schemas import error_responses
from api.settings import Settings

router = APIRouter(prefix="/api/v1/maps", tags=["mapas"])


def _map_viewer(*roles: str) -> Callable[..., Principal]:
    """Return a dependency letting ``roles`` through by bearer token or console session.

    A bearer token, when sent, decides (401 if invalid); without one, the console's session
    cookie. A map page changes nothing, so the cookie needs no CSRF token here. A browser
    without either (a bookmark, a session ended) is sent to the login, the map kept in
    ``next``, as the console's pages are.
    """
    check = require_roles(*roles)

    def dependency(request: Request, session: SessionDep, token: BearerToken) -> Principal:
        from api.web.auth import login_required, web_session

        web = None if token else web_session(request, session)
        if web is None and not token and "text/html" in request.headers.get("accept", ""):
            raise login_required(request)
        return check(web.principal if web is not None else current_user(session, token))

    return dependency


Viewer = Annotated[Principal, Depends(_map_viewer("admin", "planner", "agent"))]
Reviewer = Annotated[Principal, Depends(_map_viewer("admin", "agent"))]
_DOC: dict[str, Any] = {
    "response_class": HTMLResponse,
    "responses": {200: {"content": {"text/html": {}}, "description": "Mapa HTML"}}
    | error_responses(401, 403, 503),
}


def _stands(session: Session) -> Any:
    import geopandas as gpd

    return gpd.read_postgis(
        "SELECT stand_id, coalesce(name, stand_id) AS name, geometry FROM stands "
        "WHERE retired_at IS NULL AND geometry IS NOT NULL ORDER BY stand_id",
        session.connection(),
        geom_col="geometry",
    )


def _background(settings: Settings) -> dict[str, Any]:
    """Return the ``tiles`` and ``attribution`` of a map function: the console's background."""
    from api.web.basemap import basemap_config

    background = basemap_config(settings)
    tiles = background.tiles_url
    return {
        "tiles": tiles or None,
        "attribution": background.attribution or f"mapa base: {urlsplit(tiles).netloc}",
    }


_BACK_LINK = (
    '<a class="pontual-back" href="{href}" style="position:fixed;top:10px;left:56px;'
    "z-index:1001;background:#fff;padding:6px 10px;border:2px solid rgba(0,0,0,.25);"
    "border-radius:4px;font:600 14px/1.3 system-ui,sans-serif;color:#0b3d91;"
    'text-decoration:underline">← Voltar ao Pontual</a>'
)
"""The way back to the user's console page, beside the zoom buttons (a map page has no menu)."""


def _page(fmap: Any, settings: Settings, user: Principal | None = None) -> str:
    """Render the map; beneath it, the offline basemap when no tile server is configured.

    With ``user``, a link back to the user's start page in the console.
    """
    from branca.element import Element

    from api.web.basemap import BASEMAP_PATH
    from api.web.nav import LANDING
    from api.web.templating import static_url

    if _background(settings)["tiles"] is None:
        fmap.add_child(_OfflineBasemap(BASEMAP_PATH))
    if user is not None and user.role in LANDING:
        back = _BACK_LINK.format(href=LANDING[user.role])
        fmap.get_root().html.add_child(Element(back), name="pontual_back")
    icon = f'<link rel="icon" href="{static_url("img/favicon.svg")}" type="image/svg+xml">'
    fmap.get_root().header.add_child(Element(icon), name="pontual_icon")  # no /favicon.ico 404
    return str(fmap.get_root().render())


@router.get("/overview", **_DOC)
def overview_map(user: Viewer, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    """Mapa geral: pontos coloridos pelo número de prefixos licenciados."""
    import pandas as pd
    from sqlalchemy import text

    from maps.overview import stands_trips_map

    stands = _stands(session)
    counts = session.execute(
        text("SELECT stand_id, count(DISTINCT vehicle_id) FROM parking_licences GROUP BY 1")
    ).all()
    values = pd.Series({r[0]: int(r[1]) for r in counts}, dtype="int64")
    fmap = stands_trips_map(
        stands, values=values, value_label="Prefixos licenciados", **_background(settings)
    )
    return HTMLResponse(_page(fmap, settings, user))


@router.get("/findings", **_DOC)
def findings_map_html(user: Reviewer, session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    """Mapa de fiscalização: achados por tipo (agentes e administradores), 25.000 mais recentes."""
    import geopandas as gpd

    from maps.findings import findings_map
    from maps.sample import MAP_MAX_FINDINGS

    findings = gpd.read_postgis(
        "SELECT finding_id, kind, vehicle_id, stand_id, started_at, ended_at, confidence, "
        f"details, geometry FROM findings ORDER BY started_at DESC LIMIT {MAP_MAX_FINDINGS:d}",
        session.connection(),
        geom_col="geometry",
    )
    findings["started_at"] = findings["started_at"].dt.tz_convert("UTC")
    fmap = findings_map(_stands(session), findings, **_background(settings))
    return HTMLResponse(_page(fmap, settings, user))


# Issue #8 maps: stand (supervisors, planners), planner, citizen (public, rate-limited).
StandViewer = Annotated[Principal, Depends(_map_viewer("admin", "planner", "supervisor"))]
Planner = Annotated[Principal, Depends(_map_viewer("admin", "planner"))]
Hours = Annotated[int, Query(ge=1, le=168, description="Janela de análise em horas")]
Days = Annotated[int, Query(ge=1, le=365, description="Janela de análise em dias")]


@router.get("/stands", **_DOC)
def stand_map_html(
    user: StandViewer, session: SessionDep, settings: SettingsDep, hours: Hours = 24
) -> HTMLResponse:
    """Mapa dos pontos: ocupação agora × capacidade, fila, intrusos e presença dos licenciados.

    O supervisor vê só os seus pontos; o planejamento, só as contagens (sem prefixos).
    """
    import datetime as dt

    from api.map_data import stand_frames, stands_frame
    from maps.stand import stand_map

    ids = sorted(user.stand_ids) if user.role == "supervisor" else None
    stands = stands_frame(session, stand_ids=ids)
    now = dt.datetime.now(dt.UTC)
    frames = stand_frames(
        session,
        stands=stands,
        since=now - dt.timedelta(hours=hours),
        now=now,
        timezone=settings.timezone,
    )
    fmap = stand_map(
        stands,
        frames["visits"],
        at=now,
        occupancy=frames["occupancy"],
        presence=frames["presence"],
        timezone=settings.timezone,
        identities=user.role != "planner",
        **_background(settings),
    )
    return HTMLResponse(_page(fmap, settings, user))


@router.get("/planner", **_DOC)
def planner_map_html(
    user: Planner, session: SessionDep, settings: SettingsDep, days: Days = 30
) -> HTMLResponse:
    """Mapa do planejamento: demanda (embarques por célula H3), cobertura e locais candidatos."""
    import datetime as dt

    from api.map_data import findings_frame, pickups_frame, stands_frame
    from maps.planner import planner_map
    from planning.demand import candidate_sites, demand_vs_capacity, stand_coverage

    now = dt.datetime.now(dt.UTC)
    since = now - dt.timedelta(days=days)
    stands = stands_frame(session)
    areas = demand_vs_capacity(pickups_frame(session, since=since, now=now), stands)
    formations = findings_frame(
        session, kinds=("illegal_stand_formation",), limit=5000, window=(since, now)
    )
    fmap = planner_map(
        areas=areas,
        coverage=stand_coverage(stands),
        candidates=candidate_sites(formations, stands=stands, areas=areas),
        stands=stands,
        **_background(settings),
    )
    return HTMLResponse(_page(fmap, settings, user))


class PageCache:
    """Rendered pages kept ``ttl_s`` seconds, by key; one render at a time per key.

    Event-loop only. Requests arriving while a page renders wait for it instead of rendering
    it again; ``renders`` counts the renders (tests).
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.renders = 0
        self._pages: dict[Hashable, tuple[float, str]] = {}
        self._pending: dict[Hashable, asyncio.Future[None]] = {}

    def _fresh(self, key: Hashable) -> tuple[float, str] | None:
        hit = self._pages.get(key)
        return hit if hit is not None and hit[0] > time.monotonic() else None

    async def get(self, key: Hashable, render: Callable[[], Awaitable[str]]) -> tuple[str, int]:
        """Return the page of ``key`` and the seconds it stays fresh, rendering it if needed."""
        loop = asyncio.get_running_loop()
        while (hit := self._fresh(key)) is None:
            pending = self._pending.get(key)
            if pending is None or pending.done() or pending.get_loop() is not loop:
                break
            await asyncio.wait([pending])  # the render may fail: then look again
        if hit is None:
            done = loop.create_future()
            self._pending[key] = done
            try:
                self.renders += 1
                page = await render()
                hit = (time.monotonic() + self.ttl_s, page)
                self._pages = {k: v for k, v in self._pages.items() if v[0] > time.monotonic()}
                self._pages[key] = hit
            finally:
                done.set_result(None)
                if self._pending.get(key) is done:
                    del self._pending[key]
        expires, page = hit
        return page, max(1, math.ceil(expires - time.monotonic()))


@functools.cache
def _basemap_script() -> str:
    import api.web

    path = Path(api.web.__file__).resolve().parent / "static" / "js" / "mapa-base.js"
    return path.read_text(encoding="utf-8")


class _OfflineBasemap(MacroElement):
    """The console's offline basemap beneath a folium map (``mapa-base.js``, inlined)."""

    def __init__(self, data_url: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._name = "PontualMapaBase"
        self.data_url = data_url

    def render(self, **kwargs: Any) -> None:  # type: ignore[override]
        """Add the meta and the script to the page, and the call after the map is made."""
        from html import escape

        from maps.offline import RawElement, page_of

        figure, parent = page_of(self), self._parent
        assert parent is not None, "basemap added before its map"
        meta = f'<meta name="pontual-mapa-base" content="{escape(self.data_url)}">'
        figure.header.add_child(RawElement(meta), name="pontual_mapa_base_meta")
        figure.header.add_child(
            RawElement(f"<script>{_basemap_script()}</script>"), name="pontual_mapa_base_js"
        )
        figure.script.add_child(
            RawElement(f"PontualMapaBase.add({parent.get_name()});"), name=self.get_name()
        )


def citizen_csp(tiles_origin: str | None) -> str:
    """Return the citizen map's CSP: no image from any ``https:`` host but the tile server.

    :data:`api.headers.HTML_CSP` with ``img-src`` this server (and ``tiles_origin``) only.
    """
    allowed = "'self' data: blob:" + (f" {tiles_origin}" if tiles_origin else "")
    return HTML_CSP.replace("img-src 'self' data: blob: https:;", f"img-src {allowed};")


def _citizen_data(session: Session, settings: Settings, now: dt.datetime) -> tuple[Any, ...]:
    from api.map_data import citizen_frames, stands_frame

    pings, fleet = citizen_frames(
        session, since=now - dt.timedelta(seconds=settings.public_recent_fix_s), now=now
    )
    return stands_frame(session), pings, fleet


def _citizen_page(data: tuple[Any, ...], settings: Settings, now: dt.datetime) -> str:
    from maps.citizen import citizen_map

    stands, pings, fleet = data
    fmap = citizen_map(
        stands,
        pings,
        fleet,
        at=now,
        recent_s=settings.public_recent_fix_s,
        timezone=settings.timezone,
        **_background(settings),
    )
    return _page(fmap, settings)


@router.get(
    "/citizen",
    dependencies=[Depends(public_rate_limit_async)],
    response_class=HTMLResponse,
    responses={
        200: {"content": {"text/html": {}}, "description": "Mapa HTML"},
        **error_responses(429, 503),
    },
)
async def citizen_map_html(request: Request, settings: SettingsDep) -> HTMLResponse:
    """Mapa do cidadão: áreas com táxis acessíveis livres agora e pontos com oferta acessível.

    Público; a página é refeita no máximo a cada 30 s (`Cache-Control: public, max-age`).
    """
    from api.web.basemap import basemap_config

    background = basemap_config(settings)
    cache: PageCache = request.app.state.citizen_map

    async def render() -> str:
        now = published_instant()  # the public answers' instant (api.routes.public)
        data = await public_query(request, _citizen_data, settings, now)
        return await run_in_threadpool(_citizen_page, data, settings, now)

    key = (background.tiles_url, settings.public_recent_fix_s, settings.timezone)
    page, fresh_s = await cache.get(key, render)
    return HTMLResponse(
        page,
        headers={
            "Cache-Control": f"public, max-age={fresh_s}",
            "Content-Security-Policy": citizen_csp(background.origin),
        },
    )
