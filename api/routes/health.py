"""Liveness (``/health``) and readiness (``/ready``: database reachable and migrated).

``/health`` is answered on the event loop (no thread, no database): a saturated thread or
connection pool cannot make a liveness probe restart a healthy process.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from api.deps import get_engine
from api.errors import error_response
from api.schemas import error_responses

router = APIRouter(tags=["saúde"])


@functools.cache
def _head() -> str:
    from db.migrate import head

    return head()


class Health(BaseModel):
    """The process is up."""

    status: str


class Ready(BaseModel):
    """The database answers and its schema is at the newest revision."""

    status: str
    revision: str


@router.get("/health", response_model=Health)
async def health() -> Health:
    """Processo no ar (não consulta o banco; responde sem passar pelo pool de threads)."""
    return Health(status="ok")


@router.get("/ready", response_model=Ready, responses=error_responses(503))
def ready(engine: Annotated[Engine, Depends(get_engine)]) -> Any:
    """Pronto para atender: banco acessível e esquema na revisão mais recente; 503 se não."""
    expected = _head()
    try:
        with engine.connect() as conn:
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        return error_response(
            503,
            "database_unavailable",
            "banco de dados indisponível ou sem esquema",
            headers={"Retry-After": "5"},
        )
    if revision != expected:
        return error_response(
            503,
            "database_not_migrated",
            f"esquema do banco na revisão {revision}; esperada {expected} "
            "(rode: pontual db upgrade)",
            revision=revision,
            expected=expected,
        )
    return Ready(status="ready", revision=str(revision))
