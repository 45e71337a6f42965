"""Tests of api.main: the app, health and readiness, and the error body."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from factories import migrated_database
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings


@pytest.fixture
def fresh_database_url(database_url: str) -> Iterator[str]:
    """An empty PostGIS database with no migration applied."""
    with migrated_database(database_url, prefix="pontual_empty", migrate=False) as url:
        yield url


class TestCreateApp:
    def test_openapi_and_docs_are_served(self, client: TestClient) -> None:
        """The OpenAPI schema and the docs page are served."""
        schema = client.get("/openapi.json")
        assert schema.status_code == 200
        assert schema.json()["info"]["title"] == "Pontual"
        assert client.get("/docs").status_code == 200

    def test_health_answers_without_database(self) -> None:
        """/health is up even when the database is unreachable."""
        app = create_app(database_url="postgresql://u:p@127.0.0.1:1/none", settings=Settings())
        with TestClient(app, raise_server_exceptions=False) as c:
            assert c.get("/health").json() == {"status": "ok"}

    def test_ready_when_migrated(self, client: TestClient) -> None:
        """/ready is 200 with the head revision on a migrated database."""
        from db.migrate import head

        response = client.get("/ready")
        assert response.status_code == 200
        assert response.json() == {"status": "ready", "revision": head()}

    def test_ready_503_when_database_down(self) -> None:
        """/ready is 503 with a machine-readable body when the database does not answer."""
        app = create_app(database_url="postgresql://u:p@127.0.0.1:1/none", settings=Settings())
        with TestClient(app, raise_server_exceptions=False) as c:
            response = c.get("/ready")
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "database_unavailable"
        assert "p@" not in response.text

    def test_ready_503_when_not_migrated(self, fresh_database_url: str) -> None:
        """/ready is 503 'database_unavailable' on a database without our schema."""
        app = create_app(database_url=fresh_database_url, settings=Settings())
        with TestClient(app, raise_server_exceptions=False) as c:
            response = c.get("/ready")
            app.state.engine.dispose()
        assert response.status_code == 503
        assert response.json()["error"]["code"] in ("database_unavailable", "database_not_migrated")

    def test_the_servers_statements_have_a_time_limit(self, fresh_database_url: str) -> None:
        """A request's database statement past PONTUAL_STATEMENT_TIMEOUT_S is cancelled."""
        from sqlalchemy import text
        from sqlalchemy.exc import OperationalError

        app = create_app(
            database_url=fresh_database_url, settings=Settings(statement_timeout_s=0.2)
        )
        try:
            with app.state.engine.connect() as conn:
                assert conn.execute(text("SHOW statement_timeout")).scalar() == "200ms"
                with pytest.raises(OperationalError, match="statement timeout"):
                    conn.execute(text("SELECT pg_sleep(2)"))
        finally:
            app.state.engine.dispose()

    def test_unknown_route_is_a_json_404(self, client: TestClient) -> None:
        """An unknown path is a 404 with the error body."""
        response = client.get("/nao-existe")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"

    def test_wrong_method_is_a_json_405(self, client: TestClient) -> None:
        """A wrong method is a 405 with the error body."""
        response = client.post("/health")
        assert response.status_code == 405
        assert response.json()["error"]["code"] == "method_not_allowed"


class TestOpenApiBodyErrors:
    def test_operations_with_a_body_list_408_and_413(self, client: TestClient) -> None:
        """Every operation with a request body documents 408 (stalled) and 413 with the error
        body, the device ingest and the login among them; a GET that reads none lists no 408."""
        spec = client.get("/openapi.json").json()
        with_body = {
            (method, path)
            for path, operations in spec["paths"].items()
            for method, operation in operations.items()
            if "requestBody" in operation
        }
        assert {
            ("post", "/api/v1/pings"),
            ("post", "/osmand"),
            ("post", "/api/v1/auth/token"),
            ("post", "/api/v1/stands"),
            ("patch", "/api/v1/drivers/{driver_id}"),
        } <= with_body
        error_body = {"$ref": "#/components/schemas/ErrorBody"}
        for method, path in with_body:
            responses = spec["paths"][path][method]["responses"]
            for status in ("408", "413"):
                assert responses[status]["content"]["application/json"]["schema"] == error_body
            assert "parou de chegar" in responses["408"]["description"]
        assert "ErrorBody" in spec["components"]["schemas"]
        assert "408" not in spec["paths"]["/osmand"]["get"]["responses"]
        assert "408" not in spec["paths"]["/health"]["get"]["responses"]


class TestDocs:
    def test_swagger_ui_is_served_by_the_app(self, client) -> None:
        """The docs page loads Swagger UI from the app itself, never from a CDN."""
        page = client.get("/docs")
        assert page.status_code == 200
        assert "/docs/assets/swagger-ui-bundle.js" in page.text
        assert "cdn" not in page.text.lower()
        js = client.get("/docs/assets/swagger-ui-bundle.js")
        assert js.status_code == 200 and len(js.content) > 100_000
        assert client.get("/docs/assets/index.html").status_code == 404
