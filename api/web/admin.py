"""Pages of the Administração area (``/admin``): open to the roles of :data:`ROLES`.

The area's pages live in modules of their own, mounted here: users and roles
(``admin_users.py``), GPS devices (``admin_devices.py``), stands on the map with their licences
and exclusions (``admin_stands.py``), drivers with their CNH / ICTP history and links to
prefixos (``admin_drivers.py``), file import with a preview (``admin_imports.py``) and the
audit log (``admin_audit.py``); what they share is in ``admin_base.py``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import func, select
from starlette.responses import Response

from api.deps import SessionDep
from api.web import (
    admin_audit,
    admin_devices,
    admin_drivers,
    admin_imports,
    admin_stands,
    admin_users,
)
from api.web.admin_base import ROLES, AdminUser
from api.web.templating import render
from db.accounts.models import Device, User
from db.enforcement.models import AuditEntry
from db.fleet.models import Driver
from db.stands.models import Stand

__all__ = ["ROLES", "AdminUser", "router"]

router = APIRouter(include_in_schema=False)


@router.get("/admin", name="web_admin_home")
def home(request: Request, web: AdminUser, session: SessionDep) -> Response:
    """Landing page of the area: what it holds, with counts."""
    counts = {
        "users": session.scalar(
            select(func.count()).select_from(User).where(User.disabled_at.is_(None))
        ),
        "devices": session.scalar(
            select(func.count()).select_from(Device).where(Device.revoked_at.is_(None))
        ),
        "stands": session.scalar(
            select(func.count()).select_from(Stand).where(Stand.retired_at.is_(None))
        ),
        "audit": session.scalar(select(func.count()).select_from(AuditEntry)),
        "drivers": session.scalar(select(func.count()).select_from(Driver)),
    }
    return render(request, "admin/inicio.html", web=web, title="Administração", counts=counts)


for _module in (
    admin_users,
    admin_devices,
    admin_stands,
    admin_drivers,
    admin_imports,
    admin_audit,
):
    router.include_router(_module.router)
