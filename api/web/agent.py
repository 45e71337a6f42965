"""Pages of the Fiscalização area (``/fiscal``): open to the roles of :data:`ROLES`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.web.auth import WebSession, require_web_roles
from api.web.templating import render

router = APIRouter(include_in_schema=False)

ROLES = ("admin", "agent")
"""Who may open this area (as in the API's authorisation)."""
AgentUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]


@router.get("/fiscal", name="web_agent_home")
def home(request: Request, web: AgentUser) -> Response:
    """Landing page of the area."""
    return render(request, "fiscal/inicio.html", web=web, title="Fiscalização")
