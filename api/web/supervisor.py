"""Pages of the Meus pontos area (``/supervisao``): open to the roles of :data:`ROLES`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.web.auth import WebSession, require_web_roles
from api.web.templating import render

router = APIRouter(include_in_schema=False)

ROLES = ("admin", "supervisor")
"""Who may open this area (as in the API's authorisation)."""
SupervisorUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]


@router.get("/supervisao", name="web_supervisor_home")
def home(request: Request, web: SupervisorUser) -> Response:
    """Landing page of the area."""
    return render(request, "supervisao/inicio.html", web=web, title="Meus pontos")
