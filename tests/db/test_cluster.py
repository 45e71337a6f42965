"""The embedded cluster, driven through the library functions on throw-away data directories."""

from __future__ import annotations

import os
import pwd
import re
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from db import cluster
from db._errors import ClusterError, PortInUseError, PostgisNotFoundError, PostgresNotFoundError
from db.cluster import (
    cluster_status,
    ensure_database,
    find_bindir,
    init_cluster,
    pgdata_path,
    postgis_available,
    start_cluster,
    stop_cluster,
)
from db.engine import parse_url, probe_server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fake_bindir(path: Path, *, version: str) -> Path:
    """A bindir whose binaries only answer ``--version``."""
    path.mkdir()
    for name in ("initdb", "pg_ctl", "postgres"):
        script = path / name
        script.write_text(f"#!/bin/sh\necho 'postgres (PostgreSQL) {version}'\n")
        script.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def initialised_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data directory with an initialised, stopped cluster (stopped again at the end)."""
    data_dir = tmp_path_factory.mktemp("cluster") / "data"
    init_cluster(data_dir=data_dir, durable=False)
    yield data_dir
    stop_cluster(data_dir=data_dir)


class TestFindBindir:
    def test_default_finds_the_server_binaries(self) -> None:
        """Without an explicit directory the system's initdb, pg_ctl and postgres are found."""
        bindir = find_bindir()
        for name in ("initdb", "pg_ctl", "postgres"):
            assert os.access(bindir / name, os.X_OK)

    def test_empty_dir_names_the_debian_package(self, tmp_path: Path) -> None:
        """An explicit directory without binaries is an error naming the package to install."""
        with pytest.raises(PostgresNotFoundError, match="postgresql-15-postgis-3"):
            find_bindir(pg_bindir=tmp_path)

    def test_names_the_missing_binary(self, tmp_path: Path) -> None:
        """The message lists which binaries are missing."""
        bindir = _fake_bindir(tmp_path / "bin", version="15.0")
        (bindir / "postgres").unlink()
        with pytest.raises(PostgresNotFoundError, match=r"faltam postgres em"):
            find_bindir(pg_bindir=bindir)


class TestPostgisAvailable:
    def test_reports_the_installed_version(self) -> None:
        """The system's PostGIS version is read from postgis.control."""
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", postgis_available(bindir=find_bindir()))

    def test_missing_postgis_names_the_package_for_that_major(self, tmp_path: Path) -> None:
        """A PostgreSQL without PostGIS asks for postgresql-<major>-postgis-3."""
        bindir = _fake_bindir(tmp_path / "bin", version="99.1")
        with pytest.raises(PostgisNotFoundError, match="postgresql-99-postgis-3"):
            postgis_available(bindir=bindir)


class TestClusterStatus:
    def test_never_initialised(self, tmp_path: Path) -> None:
        """A data directory with no cluster is reported as such, and nothing is created."""
        state = cluster_status(data_dir=tmp_path / "data", port=54999)
        assert (state.initialised, state.running, state.port) == (False, False, 54999)
        assert state.pgdata == tmp_path / "data" / "pgdata"
        assert state.server_version[0].isdigit()
        assert state.postgis_version is None
        assert not (tmp_path / "data").exists()

    def test_initialised_but_stopped(self, initialised_dir: Path) -> None:
        """An initialised cluster that is not running is reported as stopped."""
        stop_cluster(data_dir=initialised_dir)
        state = cluster_status(data_dir=initialised_dir)
        assert (state.initialised, state.running) == (True, False)


class TestStartCluster:
    def test_not_initialised(self, tmp_path: Path) -> None:
        """Starting a directory without a cluster says so."""
        with pytest.raises(ClusterError, match="não está inicializado"):
            start_cluster(data_dir=tmp_path, port=_free_port())

    def test_start_status_stop(self, initialised_dir: Path) -> None:
        """Start → status shows running with the PostGIS version → stop → status stopped."""
        port = _free_port()
        assert start_cluster(data_dir=initialised_dir, port=port, durable=False) == port
        assert start_cluster(data_dir=initialised_dir, port=port + 1) == port  # already up
        ensure_database(data_dir=initialised_dir, port=port, migrate=False)
        state = cluster_status(data_dir=initialised_dir, port=port + 1)
        assert (state.running, state.port) == (True, port)
        assert state.postgis_version == state.postgis_available
        assert stop_cluster(data_dir=initialised_dir) is True
        assert cluster_status(data_dir=initialised_dir).running is False
        assert stop_cluster(data_dir=initialised_dir) is False

    def test_port_taken_is_read_from_the_server_log(
        self, initialised_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bind failure seen only by the server (a race) still gives the port message."""
        monkeypatch.setattr(cluster, "_port_is_free", lambda port: True)
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            with pytest.raises(PortInUseError, match=rf"porta {port}.*PONTUAL_DB_PORT"):
                start_cluster(data_dir=initialised_dir, port=port, durable=False)
        assert cluster_status(data_dir=initialised_dir).running is False


class TestEnsureDatabase:
    def test_needs_a_data_dir_without_url(self) -> None:
        """Without DATABASE_URL the data directory is required."""
        with pytest.raises(ValueError, match="data_dir"):
            ensure_database(database_url=None, data_dir=None)

    def test_port_taken_fails_before_initdb(self, tmp_path: Path) -> None:
        """A taken port is reported before any cluster is created."""
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            port = holder.getsockname()[1]
            with pytest.raises(PortInUseError, match=str(port)):
                ensure_database(data_dir=tmp_path / "data", port=port, migrate=False)
        assert not (pgdata_path(tmp_path / "data") / "PG_VERSION").exists()

    def test_socket_path_too_long(self, tmp_path: Path) -> None:
        """A data directory too deep for a unix socket is refused before initdb, naming the fix."""
        data_dir = tmp_path / ("x" * 100) / "data"
        with pytest.raises(ClusterError, match="PONTUAL_DATA_DIR mais curto"):
            ensure_database(data_dir=data_dir, port=_free_port(), migrate=False)
        assert not pgdata_path(data_dir).exists()

    def test_creates_database_with_postgis(self, initialised_dir: Path) -> None:
        """The returned psycopg URL points at the ``pontual`` database, which has PostGIS."""
        port = _free_port()
        try:
            url = ensure_database(data_dir=initialised_dir, port=port, migrate=False)
            parsed = parse_url(url)
            assert (parsed.drivername, parsed.host, parsed.port, parsed.database) == (
                "postgresql+psycopg",
                "127.0.0.1",
                port,
                "pontual",
            )
            assert probe_server(url).postgis_version is not None
            assert ensure_database(data_dir=initialised_dir, port=port, migrate=False) == url
        finally:
            stop_cluster(data_dir=initialised_dir)

    def test_external_url_unreachable(self) -> None:
        """An external server that does not answer is a clear error without the password."""
        from db._errors import DatabaseUnreachableError

        with pytest.raises(DatabaseUnreachableError, match=r"127\.0\.0\.1:1/") as caught:
            ensure_database(database_url="postgresql://u:s3cr3t@127.0.0.1:1/x")
        assert "s3cr3t" not in str(caught.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="the service user is only used under root")
class TestServiceUserUnderRoot:
    def test_pgdata_belongs_to_an_unprivileged_user(self, initialised_dir: Path) -> None:
        """Under root the cluster files are owned by a non-root user and private to it."""
        st = pgdata_path(initialised_dir).stat()
        assert st.st_uid != 0
        assert stat.S_IMODE(st.st_mode) == 0o700

    def test_rights_taken_away_are_restored(self, initialised_dir: Path) -> None:
        """A chmod 700 of the data dir (clearing the ACL mask) does not hide a running cluster."""
        port = _free_port()
        start_cluster(data_dir=initialised_dir, port=port, durable=False)
        try:
            initialised_dir.chmod(0o700)  # what pytest does to its own base directory
            assert cluster_status(data_dir=initialised_dir).running is True
            initialised_dir.chmod(0o700)
        finally:
            assert stop_cluster(data_dir=initialised_dir) is True

    def test_traverse_only_on_private_parents(self, tmp_path: Path) -> None:
        """The service user may pass through a 700 parent but still not list it."""
        user = pwd.getpwnam("postgres")
        parent = tmp_path / "private"
        inner = parent / "inner"
        inner.mkdir(parents=True)
        parent.chmod(0o700)
        cluster._grant_traverse(inner, user)

        def as_user(*command: str) -> int:
            done = subprocess.run(
                list(command),
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=[],
                capture_output=True,
                check=False,
            )
            return done.returncode

        assert as_user("ls", str(inner)) == 0
        assert as_user("ls", str(parent)) != 0
        assert not stat.S_IMODE(parent.stat().st_mode) & stat.S_IROTH


class TestBundledHead:
    def test_matches_alembic(self) -> None:
        """The head read from the scripts is Alembic's own head."""
        from db.cluster import bundled_head
        from db.migrate import head

        assert bundled_head() == head()
