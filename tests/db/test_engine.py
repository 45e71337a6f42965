"""Engines, sessions and server chores on the session's test database."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from db._errors import DatabaseUnreachableError, InvalidDatabaseUrlError
from db.engine import (
    connect,
    create_database,
    describe_url,
    drop_database,
    make_engine,
    normalize_url,
    parse_url,
    probe_server,
    session_scope,
)


class TestNormalizeUrl:
    @pytest.mark.parametrize(
        "url",
        [
            "postgresql://u:p@h:5433/d",
            "postgres://u:p@h:5433/d",
            "postgresql+psycopg2://u:p@h:5433/d",
            "postgresql+psycopg://u:p@h:5433/d",
        ],
    )
    def test_sets_the_psycopg3_driver(self, url: str) -> None:
        """Every PostgreSQL spelling becomes postgresql+psycopg with the password kept."""
        assert normalize_url(url) == "postgresql+psycopg://u:p@h:5433/d"

    @pytest.mark.parametrize("url", ["mysql://u:p@h/d", "sqlite:///x.db", "not a url"])
    def test_rejects_other_urls(self, url: str) -> None:
        """Non-PostgreSQL or unparsable URLs are a named error."""
        with pytest.raises(InvalidDatabaseUrlError, match="postgresql://"):
            normalize_url(url)

    def test_unparsable_url_is_not_echoed(self) -> None:
        """A URL that cannot be parsed is not repeated (it may hold a password)."""
        with pytest.raises(InvalidDatabaseUrlError) as caught:
            normalize_url("segredo-na-url")
        assert "segredo" not in str(caught.value)


class TestDescribeUrl:
    def test_hides_the_password(self) -> None:
        """Host, port and database, never the password."""
        assert describe_url("postgresql://u:s3cr3t@db.example:6543/pontual") == (
            "db.example:6543/pontual"
        )

    def test_default_port(self) -> None:
        """A URL without port shows PostgreSQL's default."""
        assert describe_url("postgresql://u@localhost/x") == "localhost:5432/x"


class TestMakeEngine:
    def test_uses_psycopg3(self, database_url: str) -> None:
        """The engine's dialect driver is psycopg (3) and it reaches PostGIS."""
        engine = make_engine(database_url.replace("postgresql+psycopg", "postgresql", 1))
        try:
            assert engine.dialect.driver == "psycopg"
            with engine.connect() as conn:
                assert conn.execute(text("SELECT postgis_lib_version()")).scalar()
        finally:
            engine.dispose()


class TestSessionScope:
    @pytest.fixture
    def table(self, db_engine: Engine) -> Iterator[str]:
        name = f"scope_probe_{secrets.token_hex(4)}"
        with db_engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {name} (n int)"))
        yield name
        with db_engine.begin() as conn:  # the session database is shared: leave it clean
            conn.execute(text(f"DROP TABLE {name}"))

    def test_commits_on_success(self, db_engine: Engine, table: str) -> None:
        """Work done in the block is committed."""
        with session_scope(db_engine) as session:
            session.execute(text(f"INSERT INTO {table} VALUES (1)"))
        with db_engine.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 1

    def test_rolls_back_on_error(self, db_engine: Engine, table: str) -> None:
        """An exception in the block rolls the work back and propagates."""
        with pytest.raises(KeyError), session_scope(db_engine) as session:
            session.execute(text(f"INSERT INTO {table} VALUES (1)"))
            raise KeyError("boom")
        with db_engine.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0


class TestConnect:
    def test_unreachable_names_host_and_port_not_password(self) -> None:
        """A refused connection is a DatabaseUnreachableError without the password."""
        with pytest.raises(DatabaseUnreachableError, match=r"127\.0\.0\.1:1/x") as caught:
            connect("postgresql://u:s3cr3t@127.0.0.1:1/x")
        assert "s3cr3t" not in str(caught.value)


class TestProbeServer:
    def test_reports_server_and_postgis(self, database_url: str) -> None:
        """The test database runs PostgreSQL with PostGIS installed."""
        info = probe_server(database_url)
        assert re.match(r"\d+(\.\d+)?", info.server_version)
        assert re.fullmatch(r"\d+\.\d+\.\d+", info.postgis_version or "")
        assert re.fullmatch(r"\d+\.\d+\.\d+", info.postgis_available or "")


class TestCreateDropDatabase:
    def test_create_then_drop(self, database_url: str) -> None:
        """A new database gets PostGIS; creating it again is a no-op; dropping removes it."""
        url = parse_url(database_url).set(database=f"pontual_tmp_{secrets.token_hex(4)}")
        url_text = url.render_as_string(hide_password=False)
        try:
            assert create_database(url_text) is True
            assert create_database(url_text) is False
            assert probe_server(url_text).postgis_version is not None
        finally:
            drop_database(url_text)
        with connect(database_url) as conn:
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (url.database,))
            assert row.fetchone() is None

    def test_url_without_database(self) -> None:
        """A URL with no database name is rejected."""
        with pytest.raises(InvalidDatabaseUrlError, match="sem nome de banco"):
            create_database("postgresql://u@127.0.0.1:1")
