"""The citizen's page (``/acessivel``): no login, nothing personal."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.web.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/acessivel", name="web_citizen_home")
def home(request: Request) -> Response:
    """Find accessible taxis and stands near a point (public)."""
    return render(
        request,
        "acessivel/inicio.html",
        web=None,
        title="Táxi acessível perto de você",
        home_path="/acessivel",
    )
