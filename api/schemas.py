"""Pydantic schemas shared by the routes: the error body and the documented error responses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ErrorDetail(BaseModel):
    """What went wrong: a stable machine code and a pt-BR message (plus optional details)."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Body of every error response."""

    error: ErrorDetail


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """Return the OpenAPI ``responses`` entries of the given error statuses."""
    descriptions = {
        401: "Sem credenciais válidas",
        403: "Papel sem acesso",
        404: "Não encontrado",
        409: "Conflito com dados existentes",
        422: "Requisição inválida",
        429: "Limite de requisições excedido",
        503: "Banco de dados indisponível",
    }
    return {c: {"model": ErrorBody, "description": descriptions.get(c, "Erro")} for c in codes}


MAX_OFFSET = 2**31 - 1
"""Largest page offset accepted (the database counts rows in bigint; far beyond any table)."""

AUTH_ERRORS = error_responses(401, 403, 422, 503)
"""Errors of a route behind a login."""
