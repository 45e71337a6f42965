"""`pontual db ...` and `pontual --help` through the installed console script."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from db.cluster import stop_cluster

Run = Callable[..., subprocess.CompletedProcess[str]]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _assert_one_clear_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("erro: ")
    for needle in needles:
        assert needle in lines[0]


class TestHelp:
    def test_lists_the_commands(self, run_pontual: Run) -> None:
        """The top-level help lists every command group."""
        done = run_pontual("--help")
        assert done.returncode == 0
        for command in ("db", "import", "analyze", "demo"):
            assert f" {command} " in done.stdout

    def test_db_lists_its_commands(self, run_pontual: Run) -> None:
        """`pontual db --help` lists start, stop, status and upgrade."""
        done = run_pontual("db", "--help")
        assert done.returncode == 0
        for command in ("start", "stop", "status", "upgrade"):
            assert f" {command} " in done.stdout


class TestStatus:
    def test_never_initialised(self, run_pontual: Run, tmp_path: Path) -> None:
        """On a fresh machine status says the cluster is not initialised, and exits 0."""
        done = run_pontual("db", "status", PONTUAL_DATA_DIR=str(tmp_path / "data"))
        assert done.returncode == 0, done.stderr
        assert "não inicializado" in done.stdout
        assert "PostGIS: 3." in done.stdout
        assert str(tmp_path / "data" / "pgdata") in done.stdout


class TestLifecycle:
    @pytest.fixture
    def env(self, tmp_path: Path) -> Iterator[dict[str, str]]:
        data_dir = tmp_path / "data"
        yield {"PONTUAL_DATA_DIR": str(data_dir), "PONTUAL_DB_PORT": str(_free_port())}
        stop_cluster(data_dir=data_dir)  # whatever the test left running

    def test_start_status_stop(self, run_pontual: Run, env: dict[str, str]) -> None:
        """Cold start creates and migrates the database; status shows PostGIS; stop stops it."""
        port = env["PONTUAL_DB_PORT"]
        started = run_pontual("db", "start", **env)
        assert started.returncode == 0, started.stderr
        assert f"127.0.0.1:{port}" in started.stdout
        status = run_pontual("db", "status", **env)
        assert status.returncode == 0, status.stderr
        assert f"em execução em 127.0.0.1:{port}" in status.stdout
        assert "PostGIS: 3." in status.stdout and "(banco pontual)" in status.stdout
        assert "sem migrações" not in status.stdout
        stopped = run_pontual("db", "stop", **env)
        assert (stopped.returncode, stopped.stdout.strip()) == (0, "Banco local parado.")
        status = run_pontual("db", "status", **env)
        assert "parado" in status.stdout
        # a stopped cluster keeps its PostGIS and data: status says they are read when running
        assert "extensão ainda não criada" not in status.stdout
        assert "só são lidos com o servidor em execução (pontual db start)" in status.stdout
        assert "Esquema: não verificado (servidor parado)" in status.stdout


class TestClearErrors:
    @pytest.mark.parametrize("command", ["start", "status"])
    def test_unreachable_database_url(self, run_pontual: Run, command: str) -> None:
        """An external server that does not answer: host and port named, password hidden."""
        done = run_pontual(
            "db", command, DATABASE_URL="postgresql://pontual:s3cr3t@127.0.0.1:1/pontual"
        )
        _assert_one_clear_error(done, "127.0.0.1:1", "DATABASE_URL")
        assert "s3cr3t" not in done.stdout + done.stderr

    @pytest.mark.parametrize("command", ["start", "status", "stop"])
    def test_missing_binaries(self, run_pontual: Run, tmp_path: Path, command: str) -> None:
        """Without PostgreSQL binaries the message names the Debian package."""
        (tmp_path / "bin").mkdir()
        done = run_pontual(
            "db",
            command,
            PONTUAL_PG_BINDIR=str(tmp_path / "bin"),
            PONTUAL_DATA_DIR=str(tmp_path / "data"),
        )
        if command == "stop":  # nothing to stop on a never-initialised dir
            assert done.returncode == 0 and "não está inicializado" in done.stdout
            return
        _assert_one_clear_error(done, "postgresql-15-postgis-3", "PONTUAL_PG_BINDIR")

    def test_port_in_use(self, run_pontual: Run, tmp_path: Path) -> None:
        """A port held by another program: the port and PONTUAL_DB_PORT are named."""
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            port = holder.getsockname()[1]
            done = run_pontual(
                "db", "start", PONTUAL_DB_PORT=str(port), PONTUAL_DATA_DIR=str(tmp_path / "d")
            )
        _assert_one_clear_error(done, f"porta {port}", "PONTUAL_DB_PORT")
