"""Pages of the Administração area (``/admin``): open to the roles of :data:`ROLES`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from api.web.auth import WebSession, require_web_roles
from api.web.templating import render

router = APIRouter(include_in_schema=False)

ROLES = ("admin",)
"""Who may open this area (as in the API's authorisation)."""
AdminUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]


@router.get("/admin", name="web_admin_home")
def home(request: Request, web: AdminUser) -> Response:
    """Landing page of the area."""
    return render(request, "admin/inicio.html", web=web, title="Administração")
