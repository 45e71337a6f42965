"""Pydantic schemas shared by the routes: the error body and the documented error responses."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
)

from fleet.dates import check_document_validity, check_query_date, check_registry_date
from fleet.ids import REGISTRY_ID_MAX_CHARS, REGISTRY_ID_PATTERN, display_text_problem


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
    "float_parsing": "esperado um número",
    "int_parsing_size": "número inteiro grande demais",
    "list_type": "esperada uma lista (array JSON)",
    "tuple_type": "esperada uma lista (array JSON)",
    "set_type": "esperada uma lista (array JSON)",
    "frozen_set_type": "esperada uma lista (array JSON)",
    "iterable_type": "esperada uma lista (array JSON)",
    "model_type": "esperado um objeto JSON",
    "mapping_type": "esperado um objeto JSON",
    "dataclass_type": "esperado um objeto JSON",
    "json_type": "esperado um texto JSON",
    "none_required": "esperado null",
    "string_unicode": "texto inválido (não é UTF-8)",
    "string_not_ascii": "esperado um texto só com caracteres ASCII",
    "too_short": "no mínimo {min_length} itens",
    "too_long": "no máximo {max_length} itens",
    "multiple_of": "deve ser múltiplo de {multiple_of}",
    "enum": "esperado um de: {expected}",
    "bytes_type": "esperado um texto",
    "bytes_too_short": "no mínimo {min_length} bytes",
    "bytes_too_long": "no máximo {max_length} bytes",
    "date_from_datetime_inexact": "esperada uma data sem hora (AAAA-MM-DD)",
    "date_past": "a data deve estar no passado",
    "date_future": "a data deve estar no futuro",
    "time_type": "hora inválida; esperado HH:MM[:SS]",
    "time_parsing": "hora inválida; esperado HH:MM[:SS]",
    "datetime_type": "data e hora inválidas; esperado ISO 8601 (AAAA-MM-DDTHH:MM:SS±HH:MM)",
    "datetime_parsing": "data e hora inválidas; esperado ISO 8601 (AAAA-MM-DDTHH:MM:SS±HH:MM)",
    "datetime_from_date_parsing": (
        "data e hora inválidas; esperado ISO 8601 (AAAA-MM-DDTHH:MM:SS±HH:MM)"
    ),
    "datetime_object_invalid": "data e hora inválidas",
    "datetime_past": "a data e hora devem estar no passado",
    "datetime_future": "a data e hora devem estar no futuro",
    "timezone_naive": "esperada data e hora sem fuso horário",
    "timezone_aware": "esperada data e hora com fuso horário (ex.: Z ou -03:00)",
    "timezone_offset": "fuso horário diferente do esperado",
    "time_delta_type": "duração inválida",
    "time_delta_parsing": "duração inválida",
    "uuid_type": "UUID inválido",
    "uuid_parsing": "UUID inválido",
    "uuid_version": "versão de UUID diferente da esperada",
    "url_type": "URL inválida",
    "url_parsing": "URL inválida",
    "url_syntax_violation": "URL inválida",
    "url_too_long": "URL com mais de {max_length} caracteres",
    "url_scheme": "esquema de URL não aceito; esperado {expected_schemes}",
    "decimal_type": "esperado um número decimal",
    "decimal_parsing": "esperado um número decimal",
    "decimal_max_digits": "no máximo {max_digits} dígitos",
    "decimal_max_places": "no máximo {decimal_places} casas decimais",
    "decimal_whole_digits": "no máximo {whole_digits} dígitos antes da vírgula",
    "union_tag_invalid": "tipo {tag!r} desconhecido; esperado um de: {expected_tags}",
    "union_tag_not_found": "falta o campo {discriminator}",
    "no_such_attribute": "campo não permitido",
    "invalid_key": "nome de campo inválido",
    "frozen_field": "campo não pode ser alterado",
    "frozen_instance": "objeto não pode ser alterado",
    "recursion_loop": "estrutura aninhada demais",
    "recursion_depth_exceeded": "estrutura aninhada demais",
}
"""pt-BR messages of pydantic's error types; any other type is :data:`_FALLBACK_MESSAGE`."""
_FALLBACK_MESSAGE = "valor inválido"
_BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


_PATTERNS = {
    r"^\d{7}$": "esperado o código IBGE do município, de 7 dígitos",
    REGISTRY_ID_PATTERN: 'sem espaços nem os caracteres / ? # % , ; "',
}
"""The patterns of the schemas, said in words (instead of the regular expression)."""


def _non_finite(value: Any) -> bool:
    """Whether ``value`` (a number or its text as sent) is NaN or infinite."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    try:
        return not math.isfinite(float(value))
    except (ValueError, OverflowError):
        return False


def _one_of(expected: str) -> str:
    """Say pydantic's list of allowed values in Portuguese: ``'a', 'b' or 'c'`` → ``… ou 'c'``."""
    head, sep, last = expected.rpartition(" or ")
    return f"{head} ou {last}" if sep else expected


def pt_message(err: dict[str, Any]) -> str:
    """Return one pydantic error (an item of ``errors()``) as a pt-BR message."""
    kind = str(err.get("type", ""))
    ctx = dict(err.get("ctx") or {})
    if kind == "value_error":
        return str(ctx.get("error") or err.get("msg", "")) or _FALLBACK_MESSAGE
    if kind in _BOUNDS and _non_finite(err.get("input")):  # lat=nan: not "at most 90"
        return _MESSAGES["finite_number"]
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERNS:
        return _PATTERNS[ctx["pattern"]]
    if kind == "string_too_short" and ctx.get("min_length", 1) > 1:  # not "empty" for 5 chars
        return f"no mínimo {ctx['min_length']} caracteres"
    if kind in ("literal_error", "enum") and isinstance(ctx.get("expected"), str):
        ctx["expected"] = _one_of(ctx["expected"])
    try:
        return _MESSAGES[kind].format(**ctx) if kind in _MESSAGES else _FALLBACK_MESSAGE
    except (KeyError, IndexError):
        return _FALLBACK_MESSAGE


_DESCRIPTIONS = {
    400: "Requisição malformada (corpo ilegível)",
    401: "Sem credenciais válidas",
    403: "Papel sem acesso",
    404: "Não encontrado",
    408: "O corpo da requisição parou de chegar antes do fim; nada foi gravado",
    409: "Conflito com dados existentes",
    413: "Corpo da requisição acima do limite do servidor",
    422: "Requisição inválida",
    429: "Limite de requisições excedido",
    503: "Banco de dados indisponível",
}
BODY_ERRORS = (408, 413)
"""What any request with a body may get: a body that stops arriving (408,
:class:`api.limits.BodyTimeoutMiddleware`) or over the limit (413, :mod:`api.limits`)."""


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """Return the OpenAPI ``responses`` entries of the given error statuses."""
    return {c: {"model": ErrorBody, "description": _DESCRIPTIONS.get(c, "Erro")} for c in codes}


def add_body_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Document :data:`BODY_ERRORS` on every operation of an OpenAPI ``schema`` with a body.

    The one place they are declared (``app.openapi``, :func:`api.main.create_app`): an
    operation takes a body when it documents a ``requestBody``. ``ErrorBody`` is among the
    schema's components (every route lists 400 and 413). Idempotent; returns ``schema``.
    """
    body = {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
    entry = {"content": {"application/json": body}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            responses = operation.setdefault("responses", {})
            for code in BODY_ERRORS:
                responses.setdefault(str(code), {"description": _DESCRIPTIONS[code], **entry})
    return schema


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
        msg = (
            "esperada uma data AAAA-MM-DD"
            if value is None
            else (f"esperada uma data AAAA-MM-DD em texto, não {type(value).__name__}")
        )
        raise ValueError(msg)  # noqa: TRY004 - pydantic wants ValueError
    return value


def _registry_date(value: dt.date) -> dt.date:
    return check_registry_date(value, name="data")


def _document_date(value: dt.date) -> dt.date:
    return check_document_validity(value, name="data")


def _query_date(value: dt.date) -> dt.date:
    return check_query_date(value, name="data")


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _query_day_text(value: Any) -> Any:
    """Let a query's day through only as ``AAAA-MM-DD`` (pydantic reads "1700000000" as Unix)."""
    if isinstance(value, str) and not _ISO_DAY.fullmatch(value.strip()):
        msg = f"esperada uma data AAAA-MM-DD, não {value!r}"
        raise ValueError(msg)
    return value


def _query_instant_text(value: Any) -> Any:
    """Let a query's instant through only as ISO 8601 text (not a number read as Unix time)."""
    if isinstance(value, str) and not _ISO_DAY.match(value.strip()):
        msg = f"esperado um instante ISO 8601 (ex.: 2024-03-04T00:00Z), não {value!r}"
        raise ValueError(msg)
    return value


QueryDate = Annotated[dt.date, BeforeValidator(_query_day_text), AfterValidator(_query_date)]
"""A day a query looks at (``AAAA-MM-DD``), from 1678-01-01 to 2261-12-31."""
QueryInstant = Annotated[dt.datetime, BeforeValidator(_query_instant_text)]
"""An instant a query looks at: ISO 8601 text (``AAAA-MM-DDTHH:MM…``), never a bare number."""
Float = Annotated[float, Strict()]
"""A JSON number (an integer is fine; a boolean or a string is not); finite in a StrictBody."""
Int = Annotated[int, Strict()]
"""A JSON integer (no boolean, no 1.0, no string)."""
RegistryDate = Annotated[dt.date, BeforeValidator(_date_text), AfterValidator(_registry_date)]
"""A registry date (``AAAA-MM-DD`` text) in the range of :mod:`fleet.dates` (1990-01-01 to
today + 1 year)."""
DocumentDate = Annotated[dt.date, BeforeValidator(_date_text), AfterValidator(_document_date)]
"""A CNH / ICTP validity (``AAAA-MM-DD`` text): 1990-01-01 to today + 10 years
(:func:`fleet.dates.check_document_validity`)."""


def display_text(value: str) -> str | None:
    """Return a name shown to people (stripped before, by its type), None when blank.

    Raises
    ------
    ValueError
        A control character or a bidirectional override (:func:`fleet.ids.display_text_problem`).
    """
    problem = display_text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value or None


RegistryId = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        min_length=1,
        max_length=REGISTRY_ID_MAX_CHARS,
        pattern=REGISTRY_ID_PATTERN,
    ),
]
"""A registry id (a stand's ``stand_id``…) as :mod:`fleet.ids` allows it, surrounding blanks
stripped: no blank or control character inside, none of ``/ ? # % , ; "``."""


class PresentVehicle(BaseModel):
    """A vehicle at the stand now, in queue order (``api.queries.queue_now``)."""

    position: int
    vehicle_id: str
    arrived_at: dt.datetime
    waited_s: float
    licensed: bool | None = Field(
        description="licença para o ponto hoje; null: não se sabe (a licença do prefixo cita "
        "um ponto que o cadastro não localizou)"
    )
