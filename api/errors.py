"""One place that turns every error into a JSON body ``{"error": {"code", "message", ...}}``.

Errors raised on purpose (:class:`api._errors.ApiError`) keep their status; request validation
errors are 422; an unreachable database is 503; a ``ValueError`` raised by one of our rooms (bad
input reaching a library function) is 422. Anything else is a bug: 500, logged.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api._errors import ApiError
from db._errors import DatabaseUnreachableError

log = logging.getLogger(__name__)

_ROOMS = ("geo", "stands", "tracking", "api", "maps", "fleet", "enforcement", "db")
_STATUS_CODES = {
    400: ("bad_request", "requisição malformada"),
    401: ("not_authenticated", "autenticação necessária"),
    403: ("forbidden", "acesso negado"),
    404: ("not_found", "recurso não encontrado"),
    405: ("method_not_allowed", "método não permitido nesta rota"),
    406: ("not_acceptable", "formato de resposta não disponível"),
    413: ("payload_too_large", "requisição grande demais"),
    415: ("unsupported_media_type", "tipo de conteúdo não suportado"),
    429: ("rate_limited", "muitas requisições; tente mais tarde"),
}


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    """Return the JSON error body."""
    return {"error": {"code": code, "message": message, **details}}


def error_response(
    status_code: int,
    code: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    **details: Any,
) -> JSONResponse:
    """Return a JSON error response."""
    return JSONResponse(
        error_body(code, message, **details), status_code=status_code, headers=headers
    )


def _api_error(_: Request, exc: Exception) -> JSONResponse:
    exc = cast(ApiError, exc)
    return error_response(
        exc.status_code, exc.code, exc.message, headers=exc.headers or None, **exc.details
    )


def _json_safe(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return str(value)


def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    exc = cast(RequestValidationError, exc)
    errors = [
        {
            "loc": [_json_safe(p) for p in err.get("loc", ())],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]
    return error_response(
        422, "invalid_request", "requisição inválida: veja 'errors'", errors=errors
    )


def _http_error(_: Request, exc: Exception) -> JSONResponse:
    exc = cast(StarletteHTTPException, exc)
    status = exc.status_code if 400 <= exc.status_code < 600 else 400
    code, message = _STATUS_CODES.get(status, ("http_error", "erro na requisição"))
    return error_response(status, code, message, headers=getattr(exc, "headers", None))


def _database_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, DataError):  # a value the database cannot take (out of range…)
        return error_response(
            422, "invalid_request", "valor fora do intervalo aceito (número grande demais?)"
        )
    if (
        isinstance(exc, DBAPIError)
        and not isinstance(exc, OperationalError)
        and not exc.connection_invalidated
    ):
        return _unexpected(_, exc)
    log.warning("database unavailable: %s", type(exc).__name__)
    return error_response(
        503,
        "database_unavailable",
        "banco de dados indisponível; tente novamente em instantes",
        headers={"Retry-After": "5"},
    )


def _value_error(request: Request, exc: Exception) -> JSONResponse:
    if type(exc).__module__.split(".")[0] not in _ROOMS:
        return _unexpected(request, exc)
    return error_response(422, "invalid_request", str(exc))


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "erro interno; o incidente foi registrado")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for db_error in (OperationalError, DBAPIError, PoolTimeoutError, DatabaseUnreachableError):
        app.add_exception_handler(db_error, _database_error)
    app.add_exception_handler(ValueError, _value_error)
    app.add_exception_handler(Exception, _unexpected)
