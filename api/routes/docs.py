"""The OpenAPI docs page with Swagger UI served by the app itself (no CDN: works offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

from api._errors import NotFoundError

router = APIRouter(include_in_schema=False)

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


@router.get("/docs")
def docs(request: Request) -> HTMLResponse:
    """Swagger UI over ``/openapi.json``."""
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title} — documentação da API",
        oauth2_redirect_url="/docs/oauth2-redirect",
        swagger_js_url="/docs/assets/swagger-ui-bundle.js",
        swagger_css_url="/docs/assets/swagger-ui.css",
        swagger_favicon_url="/docs/assets/favicon-32x32.png",
    )


@router.get("/docs/oauth2-redirect")
def oauth2_redirect() -> HTMLResponse:
    """OAuth2 redirect page of Swagger UI's "Authorize"."""
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/docs/assets/{name}")
def asset(name: str) -> FileResponse:
    """One vendored Swagger UI file (from the ``swagger-ui-bundle`` package)."""
    if name not in ASSETS:
        raise NotFoundError(f"arquivo '{name}' não existe")
    return FileResponse(Path(swagger_ui_path) / name, media_type=ASSETS[name])
