"""Maps as self-contained HTML (offline Leaflet): the overview, and findings for enforcement."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from api.accounts import Principal
from api.deps import SessionDep, require_roles
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
    """Mapa dos achados por tipo (agentes e administradores), os 5.000 mais recentes."""
    import geopandas as gpd

    from maps.findings import findings_map

    findings = gpd.read_postgis(
        "SELECT finding_id, kind, vehicle_id, stand_id, started_at, ended_at, confidence, "
        "geometry FROM findings ORDER BY started_at DESC LIMIT 5000",
        session.connection(),
        geom_col="geometry",
    )
    findings["started_at"] = findings["started_at"].dt.tz_convert("UTC")
    fmap = findings_map(_stands(session), findings)
    return HTMLResponse(fmap.get_root().render())
