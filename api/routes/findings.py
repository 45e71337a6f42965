"""Findings (facts found in the tracks) as GeoJSON, for enforcement agents and admins."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from api import queries
from api._errors import InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.deps import SessionDep, require_roles
from api.routes.stands import Feature
from api.schemas import MAX_OFFSET, QueryInstant, error_responses
from tracking.detectors.findings import KINDS

router = APIRouter(prefix="/api/v1/findings", tags=["achados"])

Reviewer = Annotated[Principal, Depends(require_roles("agent", "admin"))]
_ERRORS = error_responses(401, 403, 404, 422, 503)
Kind = Literal[KINDS]  # type: ignore[valid-type]  # the run-time tuple: an enum in OpenAPI


class FindingsPublic(BaseModel):
    """A GeoJSON FeatureCollection of findings, with the total count of the filter."""

    type: Literal["FeatureCollection"] = "FeatureCollection"
    features: list[Feature]
    count: int


@router.get("", response_model=FindingsPublic, responses=_ERRORS)
def list_findings(
    user: Reviewer,
    session: SessionDep,
    kind: Kind | None = None,
    vehicle_id: str | None = None,
    since: QueryInstant | None = None,
    until: QueryInstant | None = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    """Achados filtrados por tipo, veículo e período (sobreposição), mais recentes primeiro."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            msg = f"'{name}' sem fuso horário; use ISO 8601 com offset (ex.: 2024-03-04T00:00Z)"
            raise InvalidRequestError(msg)
    if since is not None and until is not None and until < since:
        msg = f"período invertido: since {since.isoformat()} depois de until {until.isoformat()}"
        raise InvalidRequestError(msg)
    features, count = queries.finding_features(
        session=session,
        kind=kind,
        vehicle_id=vehicle_id,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )
    return {"type": "FeatureCollection", "features": features, "count": count}


@router.get("/{finding_id}", response_model=Feature, responses=_ERRORS)
def get_finding(finding_id: str, user: Reviewer, session: SessionDep) -> Any:
    """Um achado com a sua evidência (`details`)."""
    features, _ = queries.finding_features(session=session, finding_id=finding_id, limit=1)
    if not features:
        msg = f"achado '{finding_id}' não encontrado"
        raise NotFoundError(msg)
    return features[0]
