"""Planning figures of a municipality: allowed fleet, accessible share, vehicle constraints.

The same plan as ``pontual plan --from-db`` (bundled IBGE population and rulebook, the registry's
active fleet), for planners and admins. No personal data: vehicles are named by their id only.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict

from api._errors import InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.deps import SessionDep, require_roles
from api.schemas import QueryDate, error_responses
from geo.calendar import DEFAULT_TIMEZONE

router = APIRouter(prefix="/api/v1/planning", tags=["planejamento"])

Planner = Annotated[Principal, Depends(require_roles("planner", "admin"))]
_ERRORS = error_responses(401, 403, 404, 422, 503)


class PlanPublic(BaseModel):
    """The plan of a municipality (see ``pontual plan --format json`` for every key)."""

    model_config = ConfigDict(extra="allow")

    municipality: str
    municipality_name: str
    service: str
    year: int
    population: int
    population_source: str
    rule: dict[str, Any] | None
    rule_message: str | None
    fleet_min: int | None
    fleet_max: int | None
    fleet_current: int | None
    inhabitants_per_taxi: int | None
    accessible_min: int | None
    accessible_current: int | None


@router.get("/{municipality}", response_model=PlanPublic, responses=_ERRORS)
def get_plan(
    user: Planner,
    session: SessionDep,
    municipality: Annotated[str, Path(description="Código IBGE (7 dígitos)")],
    year: Annotated[int, Query(description="2022 (Censo) ou 2024 (estimativa)")] = 2022,
    service: Literal["taxi", "fretamento"] = "taxi",
    as_of: Annotated[QueryDate | None, Query(description="Data de referência")] = None,
) -> Any:
    """Frota permitida pela população, acessíveis exigidos e presentes, veículos irregulares."""
    from db.fleet.store import active_fleet_from_db
    from planning._errors import PlanningError, UnknownMunicipalityError
    from planning.compose import compose_plan

    reference = as_of or dt.datetime.now(ZoneInfo(DEFAULT_TIMEZONE)).date()
    try:
        fleet = active_fleet_from_db(
            conn=session.connection(), municipality=municipality, as_of=reference, service=service
        )
        known = fleet is not None and len(fleet) > 0
        plan, _ = compose_plan(
            municipality=municipality,
            year=year,
            service=service,
            as_of=reference,
            fleet=fleet if known else None,
            fleet_source="cadastro" if known else None,
            fleet_is_active=True,
        )
    except UnknownMunicipalityError as exc:
        raise NotFoundError(str(exc)) from None
    except PlanningError as exc:
        raise InvalidRequestError(str(exc)) from None
    return plan
