"""One place that turns every error into a JSON body ``{"error": {"code", "message", ...}}``.

Errors raised on purpose (:class:`api._errors.ApiError`) keep their status; request validation
errors are 422; an unreachable database is 503; a ``ValueError`` raised by one of our rooms (bad
input reaching a library function) is 422. Anything else is a bug: 500, logged.

Database errors are mapped the same whether SQLAlchemy wrapped them or the code used the psycopg
connection directly (COPY, raw cursors): an operational error (connection lost, server shutting
down, disk full…) is 503 with ``Retry-After``, its code naming the cause when PostgreSQL's SQLSTATE
says it (:data:`SQLSTATE_503`); a data error is 422 (a NUL character, which no PostgreSQL text
holds, named as such). A database error pandas wrapped (``pandas.errors.DatabaseError``, raised
by ``read_sql``/``read_postgis`` from the driver's error) is answered as the error it wraps.

Validation messages are pt-BR, in the message and in each item of ``errors``
(:func:`api.schemas.pt_message`, which the console's forms use too).

A request whose fields fail their types or limits is the console's pt-BR page for a browser
outside the API (``validation_page``, :func:`api.web.pages.validation_page`), as a body over the
limit is (:mod:`api.limits`) and a NUL character the database refused (named by the path or query
parameter holding it); the JSON 422 elsewhere.

A client that leaves before its body has arrived (``ClientDisconnect``) is one INFO line, no
traceback: nothing was stored and nobody reads the answer. A body that stops arriving is a 408
(:class:`api.limits.BodyTimeoutMiddleware`); a form over the parser's limits is a 413, like any
body over the limit (:func:`api.limits.form_limit`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pandas.errors import DatabaseError as PandasDatabaseError
from psycopg import DataError as PgDataError
from psycopg import Error as PgError
from psycopg import OperationalError as PgOperationalError
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, HTTPConnection

from api._errors import ApiError, is_ours
from api.limits import form_limit
from api.schemas import pt_message
from db._errors import DatabaseUnreachableError
from tracking._errors import PartitionStateError

log = logging.getLogger(__name__)

ValidationPage = Callable[[Request, RequestValidationError], Response | None]
"""Return the page answering a request's validation errors, or None for the JSON 422."""
ServerErrorPage = Callable[[Request, Response], Response | None]
"""Return the page answering a request the server failed (the JSON 5xx given), or None."""

_STATUS_CODES = {
    400: ("bad_request", "requisição malformada"),
    401: ("not_authenticated", "autenticação necessária"),
    403: ("forbidden", "acesso negado"),
    404: ("not_found", "recurso não encontrado"),
    405: ("method_not_allowed", "método não permitido nesta rota"),
    406: ("not_acceptable", "formato de resposta não disponível"),
    408: (
        "request_timeout",
        "o corpo da requisição parou de chegar antes do fim; nada foi gravado, envie de novo",
    ),
    413: ("payload_too_large", "requisição grande demais"),
    415: ("unsupported_media_type", "tipo de conteúdo não suportado"),
    429: ("rate_limited", "muitas requisições; tente mais tarde"),
}


SQLSTATE_503 = {
    "53100": (
        "database_disk_full",
        "banco de dados sem espaço em disco; este pedido não foi concluído. Avise o "
        "administrador e tente novamente mais tarde",
    ),
    "53200": ("database_out_of_memory", "banco de dados sem memória; tente novamente em instantes"),
    "53300": ("database_busy", "banco de dados sem conexões livres; tente novamente em instantes"),
    "57014": (
        "database_timeout",
        "a consulta passou do tempo máximo do servidor e foi cancelada; tente um período menor "
        "ou avise o administrador",
    ),
}
"""503 codes and messages of PostgreSQL's "insufficient resources" errors, by SQLSTATE."""
_UNAVAILABLE = ("database_unavailable", "banco de dados indisponível; tente novamente em instantes")
NUL_MESSAGE = "caractere nulo (\\0) num campo de texto; remova-o e envie de novo"
"""422 message of a NUL character, which PostgreSQL text cannot hold."""
_NUL_SIGNS = ("NUL (", "0x00", "\\u0000", "\x00")
"""How psycopg (``cannot contain NUL (0x00) bytes``) and PostgreSQL (``\\u0000 cannot be
converted to text``, ``invalid byte sequence … 0x00``) name a NUL character."""


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
            "msg": pt_message(dict(err)),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]
    first = exc.errors()[0] if exc.errors() else {}
    where = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    field = f"'{'.'.join(where)}': " if where else ""
    message = f"requisição inválida: {field}{pt_message(dict(first))}; veja 'errors'"
    return error_response(422, "invalid_request", message, errors=errors)


def _http_error(_: Request, exc: Exception) -> JSONResponse:
    exc = cast(StarletteHTTPException, exc)
    reason = form_limit(exc)
    if reason is not None:  # the form parser's 400 for a form over its limits
        message = f"formulário acima do limite do servidor: {reason}"
        return error_response(413, "payload_too_large", message)
    status = exc.status_code if 400 <= exc.status_code < 600 else 400
    code, message = _STATUS_CODES.get(status, ("http_error", "erro na requisição"))
    return error_response(status, code, message, headers=getattr(exc, "headers", None))


def _is_nul(exc: Exception) -> bool:
    """Whether a database error is about a NUL character in a text."""
    driver_error = exc.orig if isinstance(exc, DBAPIError) else exc
    diag = getattr(driver_error, "diag", None)
    text = f"{driver_error} {getattr(diag, 'message_detail', None) or ''}"
    return any(sign in text for sign in _NUL_SIGNS)


def _nul_error(exc: Exception) -> bool:
    """Whether ``exc`` is the database refusing a NUL character in a text."""
    return isinstance(exc, DataError | PgDataError) and _is_nul(exc)


def nul_in_address(conn: HTTPConnection) -> RequestValidationError | None:
    """Return the validation error of the first path or query parameter holding a NUL, if any.

    No page, API answer or database takes a NUL: refused at the edge, it is never echoed into a
    page, a file name or a query.
    """
    places = (("path", conn.path_params), ("query", conn.query_params))
    loc = next(
        (
            (place, name)
            for place, params in places
            for name, value in params.items()
            if isinstance(value, str) and "\x00" in value
        ),
        None,
    )
    return None if loc is None else _nul_error_at(loc)


def _nul_error_at(loc: tuple[str, ...]) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": loc, "msg": NUL_MESSAGE, "ctx": {"error": NUL_MESSAGE}}]
    )


def _nul_validation_error(request: Request) -> RequestValidationError:
    """Return a NUL the database refused as a validation error of the parameter holding it.

    The first path or query parameter with a NUL, else the body (a form's field).
    """
    return nul_in_address(request) or _nul_error_at(("body",))


def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if _nul_error(exc):
        return error_response(422, "invalid_request", NUL_MESSAGE)
    if isinstance(exc, DataError | PgDataError):  # a value the database cannot take (range…)
        return error_response(
            422, "invalid_request", "valor fora do intervalo aceito (número grande demais?)"
        )
    if isinstance(exc, DBAPIError) and not (
        isinstance(exc, OperationalError) or exc.connection_invalidated
    ):
        return _unexpected(request, exc)
    if isinstance(exc, PgError) and not isinstance(exc, PgOperationalError):
        return _unexpected(request, exc)
    driver_error = exc.orig if isinstance(exc, DBAPIError) else exc
    sqlstate = getattr(driver_error, "sqlstate", None)
    code, message = SQLSTATE_503.get(sqlstate or "", _UNAVAILABLE)
    log.warning("database unavailable: %s (SQLSTATE %s)", type(driver_error).__name__, sqlstate)
    return error_response(503, code, message, headers={"Retry-After": "5"})


_DB_ERRORS = (OperationalError, DBAPIError, PoolTimeoutError, DatabaseUnreachableError, PgError)
"""What :func:`_database_error` answers."""


def _database_cause(exc: BaseException) -> Exception | None:
    """Return the database error behind ``exc`` (its ``__cause__``/``__context__`` chain)."""
    seen: set[int] = set()
    current = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen:
        if isinstance(current, _DB_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _value_error(request: Request, exc: Exception) -> JSONResponse:
    if not is_ours(exc):
        return _unexpected(request, exc)
    return error_response(422, "invalid_request", str(exc))


def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    """Storage in a state the server cannot fix by itself: 503 naming it, nothing acknowledged."""
    log.error("storage error on %s %s: %s", request.method, request.url.path, exc)
    return error_response(503, "storage_error", str(exc), headers={"Retry-After": "60"})


def _client_disconnect(request: Request, _: Exception) -> Response:
    """Log a client gone mid-request in one line, no traceback; the answer goes nowhere."""
    log.info("client disconnected during %s %s", request.method, request.url.path)
    return Response(status_code=400)


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "erro interno; o incidente foi registrado")


def install_error_handlers(
    app: FastAPI,
    *,
    validation_page: ValidationPage | None = None,
    server_error_page: ServerErrorPage | None = None,
) -> None:
    """Register the handlers on ``app``.

    ``validation_page(request, exc)``: the answer to a validation error instead of the JSON
    422 (a browser's page), or None; a NUL character the database refused is asked as one.
    ``server_error_page(request, response)``: the answer instead of a JSON 5xx (a browser's
    page), or None.
    """

    def validation_error(request: Request, exc: Exception) -> Response:
        exc = cast(RequestValidationError, exc)
        page = validation_page(request, exc) if validation_page is not None else None
        return page if page is not None else _validation_error(request, exc)

    def database_error(request: Request, exc: Exception) -> Response:
        # a NUL is bad input like any other: the same page for a browser outside the API
        if _nul_error(exc) and validation_page is not None:
            page = validation_page(request, _nul_validation_error(request))
            if page is not None:
                return page
        return _database_error(request, exc)

    def wrapped_database_error(request: Request, exc: Exception) -> Response:
        """Answer a database error pandas wrapped (``read_sql``, ``read_postgis``) as the bare one.

        A NUL in a path id is then the same 422 as anywhere else, an outage the same 503; no
        cause found is a bug.
        """
        cause = _database_cause(exc)
        return _unexpected(request, exc) if cause is None else database_error(request, cause)

    def paged(handler: Callable[[Request, Exception], Response]) -> Any:
        """Wrap ``handler``: its 5xx answered with ``server_error_page`` where it gives one."""

        def answer(request: Request, exc: Exception) -> Response:
            response = handler(request, exc)
            if response.status_code < 500 or server_error_page is None:
                return response
            page = server_error_page(request, response)
            return page if page is not None else response

        return answer

    app.add_exception_handler(ApiError, paged(_api_error))
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for db_error in _DB_ERRORS:
        app.add_exception_handler(db_error, paged(database_error))
    app.add_exception_handler(PandasDatabaseError, paged(wrapped_database_error))
    app.add_exception_handler(ValueError, paged(_value_error))
    app.add_exception_handler(PartitionStateError, paged(_storage_error))
    app.add_exception_handler(ClientDisconnect, _client_disconnect)
    app.add_exception_handler(Exception, paged(_unexpected))
