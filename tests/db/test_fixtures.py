"""The shared database fixtures of tests/conftest.py behave as the suite relies on."""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from db.migrate import current, head


class TestDatabaseUrl:
    def test_migrated_to_head(self, database_url: str) -> None:
        """The session database is at the newest migration."""
        assert current(database_url) == head()

    def test_is_a_throwaway_database(self, database_url: str) -> None:
        """The session works on its own pontual_test_* database."""
        assert database_url.rsplit("/", 1)[1].startswith("pontual_test_")


class TestDbSession:
    def test_commit_is_not_visible_outside(self, db_session: Session, db_engine: Engine) -> None:
        """A commit inside the test only releases a savepoint: other connections don't see it."""
        db_session.execute(text("CREATE TABLE fixture_probe (n int)"))
        db_session.execute(text("INSERT INTO fixture_probe VALUES (1)"))
        db_session.commit()
        assert db_session.execute(text("SELECT count(*) FROM fixture_probe")).scalar() == 1
        with db_engine.connect() as other:
            found = other.execute(text("SELECT to_regclass('fixture_probe')")).scalar()
        assert found is None

    def test_previous_test_was_rolled_back(self, db_session: Session) -> None:
        """Nothing of another test's work survives (the probe table does not exist)."""
        assert db_session.execute(text("SELECT to_regclass('fixture_probe')")).scalar() is None
