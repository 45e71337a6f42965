"""Pydantic schemas shared by the routes: the error body and the documented error responses."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict

from fleet.dates import check_query_date, check_registry_date
from fleet.drivers import check_document_validity


class ErrorDetail(BaseModel):
    """What went wrong: a stable machine code and a pt-BR message (plus optional details)."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Body of every error response."""

    error: ErrorDetail


_MESSAGES = {
    "missing": "campo obrigatório",
    "string_too_short": "não pode ser vazio",
    "string_too_long": "no máximo {max_length} caracteres",
    "greater_than": "deve ser maior que {gt}",
    "greater_than_equal": "deve ser no mínimo {ge}",
    "less_than": "deve ser menor que {lt}",
    "less_than_equal": "deve ser no máximo {le}",
    "literal_error": "esperado um de: {expected}",
    "string_pattern_mismatch": "formato inválido (esperado o padrão {pattern})",
    "finite_number": "esperado um número finito",
    "int_type": "esperado um número inteiro",
    "float_type": "esperado um número",
    "date_from_datetime_parsing": "data inválida; esperado AAAA-MM-DD",
    "date_parsing": "data inválida; esperado AAAA-MM-DD",
    "date_type": "data inválida; esperado AAAA-MM-DD",
    "extra_forbidden": "campo não permitido",
    "bool_type": "esperado true ou false",
    "bool_parsing": "esperado true ou false",
    "int_from_float": "esperado um número inteiro",
    "int_parsing": "esperado um número inteiro",
    "string_type": "esperado um texto",
    "json_invalid": "JSON inválido",
    "model_attributes_type": "esperado um objeto JSON",
    "dict_type": "esperado um objeto JSON",
}


def pt_message(err: dict[str, Any]) -> str:
    """Return one pydantic error (an item of ``errors()``) as a pt-BR message."""
    kind = str(err.get("type", ""))
    ctx = dict(err.get("ctx") or {})
    if kind == "value_error":
        return str(ctx.get("error") or err.get("msg", ""))
    if kind in _MESSAGES:
        try:
            return _MESSAGES[kind].format(**ctx)
        except (KeyError, IndexError):
            return str(err.get("msg", ""))
    return str(err.get("msg", ""))


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """Return the OpenAPI ``responses`` entries of the given error statuses."""
    descriptions = {
        400: "Requisição malformada (corpo ilegível)",
        401: "Sem credenciais válidas",
        403: "Papel sem acesso",
        404: "Não encontrado",
        409: "Conflito com dados existentes",
        413: "Corpo da requisição acima do limite do servidor",
        422: "Requisição inválida",
        429: "Limite de requisições excedido",
        503: "Banco de dados indisponível",
    }
    return {c: {"model": ErrorBody, "description": descriptions.get(c, "Erro")} for c in codes}


MAX_OFFSET = 2**31 - 1
"""Largest page offset accepted (the database counts rows in bigint; far beyond any table)."""

AUTH_ERRORS = error_responses(401, 403, 422, 503)
"""Errors of a route behind a login."""


class StrictBody(BaseModel):
    """Base of request bodies: finite numbers only, no unknown field.

    With the field types below (:data:`Float`, :data:`Int`, :data:`RegistryDate`...), a value
    must have its JSON type: no ``true`` for 1, no ``0.0`` for a date, no number in a string
    (422 naming the field).
    """

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")


def _date_text(value: Any) -> Any:
    """Let a date through only as ``AAAA-MM-DD`` text (or a date, from Python callers)."""
    if isinstance(value, dt.datetime) or not isinstance(value, str | dt.date):
        msg = f"esperada uma data AAAA-MM-DD em texto, não {type(value).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - pydantic wants ValueError
    return value


def _registry_date(value: dt.date) -> dt.date:
    return check_registry_date(value, name="data")


def _document_date(value: dt.date) -> dt.date:
    return check_document_validity(value, name="data")


def _query_date(value: dt.date) -> dt.date:
    return check_query_date(value, name="data")


QueryDate = Annotated[dt.date, AfterValidator(_query_date)]
"""A day a query looks at (``AAAA-MM-DD``), from 1678-01-01 to 2261-12-31."""
Float = Annotated[float, Strict()]
"""A JSON number (an integer is fine; a boolean or a string is not); finite in a StrictBody."""
Int = Annotated[int, Strict()]
"""A JSON integer (no boolean, no 1.0, no string)."""
RegistryDate = Annotated[dt.date, BeforeValidator(_date_text), AfterValidator(_registry_date)]
"""A registry date (``AAAA-MM-DD`` text) in the range of :mod:`fleet.dates` (1990-01-01 to
today + 1 year)."""
DocumentDate = Annotated[dt.date, BeforeValidator(_date_text), AfterValidator(_document_date)]
"""A CNH / ICTP validity (``AAAA-MM-DD`` text): 1990-01-01 to today + 10 years
(:func:`fleet.drivers.check_document_validity`)."""
