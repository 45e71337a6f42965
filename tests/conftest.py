"""Shared fixtures: a real PostGIS database for the suite, a rolled-back transaction per test.

Which server:
- ``PONTUAL_TEST_DATABASE_URL`` or ``DATABASE_URL`` if set (its user must be allowed to create
  databases);
- else the embedded cluster in ``$PONTUAL_TEST_DATA_DIR``, else ``$PONTUAL_DATA_DIR/test-cluster``,
  else ``<tmp>/pontual-test-cluster-<uid>``, on port ``$PONTUAL_TEST_DB_PORT`` (default 54339, apart
  from a user's cluster on 54329). It is created once and kept on disk; concurrent pytest sessions
  share it and the last one to finish stops it.

Each session creates a fresh database ``pontual_test_<random>`` with PostGIS, migrates it to head
once and drops it at the end. Missing PostgreSQL/PostGIS makes the database tests fail, never skip.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

# The repository root goes first on sys.path: with ``pythonpath = ["tests"]`` the test folders
# (tests/tracking, tests/stands, ...) would otherwise be found first as namespace packages named
# like the real ones (the editable install's finder comes after the path finder), and a test folder
# such as tests/tracking/detectors would hide the package tracking.detectors.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

TEST_DB_PORT = 54339
PONTUAL = Path(sys.executable).with_name("pontual")


def _test_cluster_dir() -> Path:
    if explicit := os.environ.get("PONTUAL_TEST_DATA_DIR"):
        return Path(explicit)
    if data_dir := os.environ.get("PONTUAL_DATA_DIR"):
        return Path(data_dir) / "test-cluster"
    return Path(tempfile.gettempdir()) / f"pontual-test-cluster-{os.getuid()}"


@contextmanager
def _test_cluster() -> Iterator[str]:
    """Run the shared test cluster; yield the URL of its maintenance database."""
    from db.cluster import cluster_url, init_cluster, start_cluster, stop_cluster

    root = _test_cluster_dir()
    root.mkdir(parents=True, mode=0o700, exist_ok=True)
    if root.stat().st_uid != os.getuid():
        msg = f"{root} belongs to another user; set PONTUAL_TEST_DATA_DIR"
        raise RuntimeError(msg)
    port = int(os.environ.get("PONTUAL_TEST_DB_PORT", TEST_DB_PORT))
    # "setup" serialises start/stop; a shared lock on "users" per live session tells the last one.
    with (root / "setup.lock").open("a") as setup, (root / "users.lock").open("a") as users:
        fcntl.flock(setup, fcntl.LOCK_EX)
        try:
            init_cluster(data_dir=root, durable=False)
            port = start_cluster(data_dir=root, port=port, durable=False)
            fcntl.flock(users, fcntl.LOCK_SH)
        finally:
            fcntl.flock(setup, fcntl.LOCK_UN)
        try:
            yield cluster_url(data_dir=root, port=port, database="postgres")
        finally:
            fcntl.flock(setup, fcntl.LOCK_EX)
            try:
                fcntl.flock(users, fcntl.LOCK_UN)
                try:
                    fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass  # another session still uses it
                else:
                    stop_cluster(data_dir=root)
                    fcntl.flock(users, fcntl.LOCK_UN)
            finally:
                fcntl.flock(setup, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """URL of a fresh, migrated PostGIS database for this session (dropped at the end)."""
    from factories import migrated_database

    external = os.environ.get("PONTUAL_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    with ExitStack() as stack:
        server_url = external or stack.enter_context(_test_cluster())
        yield stack.enter_context(migrated_database(server_url))


@pytest.fixture(scope="session")
def db_engine(database_url: str) -> Iterator[Engine]:
    """Engine on the session's test database."""
    from db.engine import make_engine

    engine = make_engine(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def own_engine(database_url: str) -> Iterator[Engine]:
    """Engine on a fresh migrated database of the test's own, for code that commits itself."""
    from factories import migrated_database

    from db.engine import make_engine

    with migrated_database(database_url) as url:
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def db_session(db_engine: Engine) -> Iterator[Session]:
    """Session inside an outer transaction rolled back after the test; commits become savepoints."""
    with db_engine.connect() as connection:
        transaction = connection.begin()
        session = Session(bind=connection, join_transaction_mode="create_savepoint")
        try:
            yield session
        finally:
            session.close()
            transaction.rollback()


@pytest.fixture
def empty_database_url(database_url: str) -> Iterator[str]:
    """A new database with nothing in it, on the suite's server (for migrations)."""
    import secrets

    from db.engine import create_database, drop_database, parse_url

    name = f"pontual_mig_{secrets.token_hex(4)}"
    url = parse_url(database_url).set(database=name).render_as_string(hide_password=False)
    create_database(url, postgis=False)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def run_pontual() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed ``pontual`` console script with a clean configuration.

    ``PONTUAL_*`` and ``DATABASE_URL`` from the outer environment are dropped; pass the wanted
    ones as keyword arguments: ``run_pontual("db", "status", PONTUAL_DATA_DIR=str(tmp_path))``.
    """

    def run(*args: str, timeout_s: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
        clean = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("PONTUAL_") and key != "DATABASE_URL"
        }
        return subprocess.run(
            [str(PONTUAL), *args],
            capture_output=True,
            text=True,
            env=clean | env,
            timeout=timeout_s,
            check=False,
        )

    return run


CHROMIUM = Path(os.environ.get("PONTUAL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian Chromium through Playwright, one for the whole session.

    One place only: two sync Playwright drivers cannot run at once in a thread, so the map
    tests and the web console tests share this one.
    """
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (Debian package 'chromium')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        yield browser
        browser.close()
