"""Maps as self-contained HTML (offline Leaflet): overview, findings, stands, planner, citizen."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from api.accounts import Principal
from api.deps import SessionDep, SettingsDep, public_rate_limit, require_roles
from api.schemas import error_responses

router = APIRouter(prefix="/api/v1/maps", tags=["mapas"])

Viewer = Annotated[Principal, Depends(require_roles("admin", "planner", "agent"))]
Reviewer = Annotated[Principal, Depends(require_roles("admin", "agent"))]
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


@router.get("/overview", **_DOC)
def overview_map(user: Viewer, session: SessionDep) -> HTMLResponse:
    """Mapa geral: pontos coloridos pelo número de prefixos licenciados."""
    import pandas as pd
    from sqlalchemy import text

    from maps.overview import stands_trips_map

    stands = _stands(session)
    counts = session.execute(
        text("SELECT stand_id, count(DISTINCT vehicle_id) FROM parking_licences GROUP BY 1")
    ).all()
    values = pd.Series({r[0]: int(r[1]) for r in counts}, dtype="int64")
    fmap = stands_trips_map(stands, values=values, value_label="Prefixos licenciados")
    return HTMLResponse(fmap.get_root().render())


@router.get("/findings", **_DOC)
def findings_map_html(user: Reviewer, session: SessionDep) -> HTMLResponse:
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
    fmap = findings_map(_stands(session), findings)
    return HTMLResponse(fmap.get_root().render())


# Issue #8 maps: stand (supervisors, planners), planner, citizen (public, rate-limited).
StandViewer = Annotated[Principal, Depends(require_roles("admin", "planner", "supervisor"))]
Planner = Annotated[Principal, Depends(require_roles("admin", "planner"))]
Hours = Annotated[int, Query(ge=1, le=168, description="Janela de análise em horas")]
Days = Annotated[int, Query(ge=1, le=365, description="Janela de análise em dias")]


@router.get("/stands", **_DOC)
def stand_map_html(
    user: StandViewer, session: SessionDep, settings: SettingsDep, hours: Hours = 24
) -> HTMLResponse:
    """Mapa dos pontos: ocupação agora × capacidade, fila, intrusos e presença dos licenciados.

    O supervisor vê só os seus pontos.
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
    )
    return HTMLResponse(fmap.get_root().render())


@router.get("/planner", **_DOC)
def planner_map_html(user: Planner, session: SessionDep, days: Days = 30) -> HTMLResponse:
    """Mapa do planejamento: demanda (embarques por célula H3), cobertura e locais candidatos."""
    import datetime as dt

    from api.map_data import findings_frame, pickups_frame, stands_frame
    from maps.planner import planner_map
    from planning.demand import candidate_sites, demand_vs_capacity, stand_coverage

    now = dt.datetime.now(dt.UTC)
    stands = stands_frame(session)
    areas = demand_vs_capacity(
        pickups_frame(session, since=now - dt.timedelta(days=days), now=now), stands
    )
    formations = findings_frame(session, kinds=("illegal_stand_formation",), limit=5000)
    fmap = planner_map(
        areas=areas,
        coverage=stand_coverage(stands),
        candidates=candidate_sites(formations, stands=stands, areas=areas),
        stands=stands,
    )
    return HTMLResponse(fmap.get_root().render())


@router.get(
    "/citizen",
    dependencies=[Depends(public_rate_limit)],
    response_class=HTMLResponse,
    responses={
        200: {"content": {"text/html": {}}, "description": "Mapa HTML"},
        **error_responses(429, 503),
    },
)
def citizen_map_html(session: SessionDep, settings: SettingsDep) -> HTMLResponse:
    """Mapa do cidadão: táxis acessíveis livres agora e pontos com oferta acessível (público)."""
    import datetime as dt

    from api.map_data import citizen_frames, stands_frame
    from maps.citizen import citizen_map

    now = dt.datetime.now(dt.UTC)
    pings, fleet = citizen_frames(
        session, since=now - dt.timedelta(seconds=settings.public_recent_fix_s), now=now
    )
    fmap = citizen_map(
        stands_frame(session),
        pings,
        fleet,
        at=now,
        recent_s=settings.public_recent_fix_s,
        timezone=settings.timezone,
    )
    return HTMLResponse(fmap.get_root().render())
