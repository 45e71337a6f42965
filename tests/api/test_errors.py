"""Tests of api.errors (database errors map to 503/422) and api.schemas' pt-BR messages."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Literal

import pandas as pd
import psycopg
import pytest
from fastapi import FastAPI
from psycopg import errors as pg
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.orm import Session
from starlette.exceptions import StarletteDeprecationWarning

from api.errors import NUL_MESSAGE, install_error_handlers
from api.schemas import pt_message
from fleet.ids import REGISTRY_ID_PATTERN

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient


def _wrapped(error: psycopg.Error) -> Exception:
    """Return ``error`` as SQLAlchemy raises it."""
    kind = OperationalError if isinstance(error, psycopg.OperationalError) else ProgrammingError
    return kind("INSERT …", {}, error)


def _answer(raise_it: Callable[[], None]) -> tuple[int, dict, dict[str, str]]:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise_it()

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    return response.status_code, response.json(), dict(response.headers)


def _raiser(error: Exception) -> Callable[[], None]:
    def raise_it() -> None:
        raise error

    return raise_it


class TestInstallErrorHandlers:
    @pytest.mark.parametrize("wrap", [False, True], ids=["raw_psycopg", "sqlalchemy"])
    @pytest.mark.parametrize(
        ("error", "code"),
        [
            (pg.DiskFull("could not extend file: No space left on device"), "database_disk_full"),
            (pg.AdminShutdown("terminating connection"), "database_unavailable"),
            (pg.TooManyConnections("too many clients"), "database_busy"),
            (pg.QueryCanceled("canceling statement due to statement timeout"), "database_timeout"),
            (psycopg.OperationalError("connection failed"), "database_unavailable"),
        ],
    )
    def test_operational_errors_are_503_naming_the_cause(
        self, error: psycopg.Error, code: str, wrap: bool
    ) -> None:
        """An operational database error is a 503 with Retry-After, its code from the SQLSTATE."""
        status, body, headers = _answer(_raiser(_wrapped(error) if wrap else error))
        assert status == 503
        assert body["error"]["code"] == code
        assert headers["retry-after"] == "5"

    def test_disk_full_message_says_so_in_portuguese(self) -> None:
        """The full-disk message names the problem."""
        _, body, _ = _answer(_raiser(pg.DiskFull("no space")))
        assert "sem espaço em disco" in body["error"]["message"]

    def test_raw_data_error_is_422(self) -> None:
        """A value the database cannot take, raised by psycopg directly, is a 422."""
        status, body, _ = _answer(_raiser(pg.NumericValueOutOfRange("integer out of range")))
        assert (status, body["error"]["code"]) == (422, "invalid_request")

    @pytest.mark.parametrize("wrap", [False, True], ids=["raw_psycopg", "sqlalchemy"])
    def test_other_database_errors_stay_500(self, wrap: bool) -> None:
        """A programming error (a bug, not an outage) is a 500 internal_error, not a 503."""
        error = pg.DuplicateTable('relation "fixes_p20240101" already exists')
        status, body, _ = _answer(_raiser(_wrapped(error) if wrap else error))
        assert (status, body["error"]["code"]) == (500, "internal_error")


class TestWrappedDatabaseErrors:
    def test_nul_in_read_postgis_is_the_nul_422(self, db_session: Session) -> None:
        """A NUL reaching PostgreSQL through pandas (read_postgis) is the API's NUL 422, not 500."""
        from db.enforcement import workflow

        with pytest.raises(pd.errors.DatabaseError) as caught:
            workflow.load_findings(db_session, ["x\x00"])
        status, body, _ = _answer(_raiser(caught.value))
        assert (status, body["error"]["message"]) == (422, NUL_MESSAGE)

    def test_wrapped_outage_is_503(self) -> None:
        """An operational error wrapped by pandas is the same 503 as the bare one."""
        wrapped = pd.errors.DatabaseError("Execution failed on sql")
        wrapped.__cause__ = _wrapped(pg.AdminShutdown("terminating connection"))
        status, body, _ = _answer(_raiser(wrapped))
        assert (status, body["error"]["code"]) == (503, "database_unavailable")

    def test_wrapped_without_database_cause_is_500(self) -> None:
        """A pandas DatabaseError with no database error behind it stays a bug (500)."""
        status, body, _ = _answer(_raiser(pd.errors.DatabaseError("no cause")))
        assert (status, body["error"]["code"]) == (500, "internal_error")


class TestPtMessage:
    @pytest.mark.parametrize(
        ("err", "said"),
        [
            (
                {"type": "string_pattern_mismatch", "ctx": {"pattern": r"^\d{7}$"}},
                "esperado o código IBGE do município, de 7 dígitos",
            ),
            (
                {"type": "string_pattern_mismatch", "ctx": {"pattern": REGISTRY_ID_PATTERN}},
                'sem espaços nem os caracteres / ? # % , ; "',
            ),
            (
                {"type": "string_pattern_mismatch", "ctx": {"pattern": "^x$"}},
                "formato inválido (esperado o padrão ^x$)",
            ),
            ({"type": "string_too_short", "ctx": {"min_length": 1}}, "não pode ser vazio"),
            ({"type": "string_too_short", "ctx": {"min_length": 16}}, "no mínimo 16 caracteres"),
        ],
    )
    def test_patterns_in_words(self, err: dict, said: str) -> None:
        """A field's pattern is said in words where the schemas know it, not as a regex."""
        assert pt_message(err) == said

    @pytest.mark.parametrize(
        ("values", "said"),
        [
            (("fixo", "livre"), "esperado um de: 'fixo' ou 'livre'"),
            (("a", "b", "c"), "esperado um de: 'a', 'b' ou 'c'"),
            (("só",), "esperado um de: 'só'"),
        ],
    )
    def test_allowed_values_in_portuguese(self, values: tuple[str, ...], said: str) -> None:
        """The list of allowed values of a Literal is joined with "ou", not pydantic's "or"."""

        class Body(BaseModel):
            kind: Literal[values]  # type: ignore[valid-type]

        with pytest.raises(ValidationError) as caught:
            Body(kind="nope")
        assert pt_message(dict(caught.value.errors()[0])) == said


class TestServerErrorPage:
    @pytest.mark.parametrize(
        ("error", "status", "title"),
        [
            (RuntimeError("bug"), 500, "Erro interno"),
            (pg.AdminShutdown("terminating connection"), 503, "Serviço indisponível"),
        ],
        ids=["bug", "outage"],
    )
    def test_a_browser_gets_a_pt_br_page_the_api_its_json(
        self, api_engine, error: Exception, status: int, title: str
    ) -> None:
        """A console page that fails answers a browser with the console's pt-BR page (the
        outage's Retry-After kept), not the API's bare JSON; a JSON client still gets the JSON
        error, and so does the API's path even from a browser."""
        from api.main import create_app
        from api.settings import Settings

        app = create_app(engine=api_engine, settings=Settings(secret_key="x" * 40))

        @app.get("/fiscal/boom")
        @app.get("/api/v1/boom")
        def boom() -> None:
            raise error

        html = {"Accept": "text/html,application/xhtml+xml"}
        with TestClient(app, raise_server_exceptions=False) as client:
            page = client.get("/fiscal/boom", headers=html)
            data = client.get("/fiscal/boom", headers={"Accept": "application/json"})
            api = client.get("/api/v1/boom", headers=html)
        assert page.status_code == status and page.headers["content-type"].startswith("text/html")
        assert title in page.text
        said = "o incidente foi registrado" if status == 500 else "nada foi gravado"
        assert said in page.text
        assert page.headers.get("retry-after") == ("5" if status == 503 else None)
        for response in (data, api):
            assert response.status_code == status and "error" in response.json()
