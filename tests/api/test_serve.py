"""``pontual serve`` as a real process on 127.0.0.1: its log, its workers, one instance per port.

- Tokens never reach the log: the access log and the WebSocket lines of a real server (one
  process and two workers) are read after OsmAnd, WebSocket and bad-token requests.
- Workers die with their supervisor (SIGKILL of the supervisor, an SSE stream open).
- A second instance on the same host and port exits 1 with a message (the lock of the data
  directory; with another data directory, the bind test).
- A worker that cannot bind is restarted with a growing delay, then the supervisor gives up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_factories import SECRET_KEY, bearer
from sqlalchemy import Engine, text
from websockets.sync.client import connect as ws_connect

PONTUAL = Path(sys.executable).with_name("pontual")
START_S = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(database_url: str, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PONTUAL_")}
    return env | {
        "DATABASE_URL": database_url,
        "PONTUAL_DATA_DIR": str(data_dir),
        "PONTUAL_SECRET_KEY": SECRET_KEY,
    }


class Serve:
    """``pontual serve`` in a child process; stdout and stderr go to ``log_path``."""

    def __init__(
        self, *, database_url: str, data_dir: Path, log_path: Path, port: int, workers: int = 1
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        command = [str(PONTUAL), "serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--workers", str(workers), "--log-level", "info"]
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                env=_env(database_url, data_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"serve exited {self.process.returncode}: {self.log()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        pytest.fail(f"serve not healthy: {self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def serves() -> Iterator[list[Serve]]:
    """Servers started by a test, stopped at its end (and their workers)."""
    started: list[Serve] = []
    yield started
    import psutil

    for server in started:
        try:
            children = psutil.Process(server.process.pid).children(recursive=True)
        except psutil.Error:
            children = []
        server.stop()
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()


def _listening_children(pid: int, port: int) -> list[Any]:
    import psutil

    found = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.Error):
                if any(
                    c.laddr.port == port and c.status == psutil.CONN_LISTEN
                    for c in child.net_connections("tcp")
                ):
                    found.append(child)
    return found


def _wait(what: str, predicate: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {timeout_s} s")


def _forget_fix(engine: Engine, ts: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM fixes WHERE vehicle_id = 'V1' AND ts = to_timestamp(:ts)"), {"ts": ts}
        )


class TestTokensNotLogged:
    @pytest.mark.parametrize("workers", [1, 2])
    def test_access_log_and_websocket_lines_are_redacted(
        self,
        serves: list[Serve],
        api_database_url: str,
        api_engine: Engine,
        seeded: dict,
        tmp_path: Path,
        workers: int,
        request: pytest.FixtureRequest,
    ) -> None:
        """OsmAnd ids, WebSocket tokens and a bearer in the query are masked in every line."""
        ts = int(time.time()) - 30
        request.addfinalizer(lambda: _forget_fix(api_engine, ts))  # V1 at S1 skews other counts
        server = Serve(
            database_url=api_database_url,
            data_dir=tmp_path,
            log_path=tmp_path / "serve.log",
            port=_free_port(),
            workers=workers,
        )
        serves.append(server)
        server.wait_healthy()
        device, agent = seeded["device_token"], seeded["tokens"]["agent"]
        bogus = "pd" + "0123456789abcdef" * 2
        fix = f"lat=-30.0277&lon=-51.2287&timestamp={ts}"
        assert httpx.get(f"{server.url}/osmand?id={device}&{fix}").status_code == 200
        assert httpx.post(f"{server.url}/osmand?{fix}&id={device}").status_code == 200
        assert httpx.get(f"{server.url}/osmand?deviceid={bogus}&{fix}").status_code == 401
        httpx.get(f"{server.url}/api/v1/auth/me?access_token={agent}", headers=bearer(agent))
        with ws_connect(f"ws://127.0.0.1:{server.port}/api/v1/alerts/ws?token={agent}") as ws:
            assert '"subscribed"' in ws.recv(timeout=10)
        server.stop()
        log = server.log()
        assert "/osmand?id=***" in log and "token=***" in log  # the lines are there, masked
        for secret in (device, agent, bogus, agent[3:]):
            assert secret not in log


class TestWorkers:
    def test_workers_die_with_the_supervisor(
        self, serves: list[Serve], api_database_url: str, seeded: dict, tmp_path: Path
    ) -> None:
        """SIGKILL of the supervisor of --workers 2, an SSE stream open: no worker survives."""
        import psutil

        server = Serve(
            database_url=api_database_url,
            data_dir=tmp_path,
            log_path=tmp_path / "serve.log",
            port=_free_port(),
            workers=2,
        )
        serves.append(server)
        server.wait_healthy()

        def two_workers() -> list[Any] | None:
            found = _listening_children(server.process.pid, server.port)
            return found if len(found) == 2 else None

        workers = _wait("two workers", two_workers)
        with httpx.stream(
            "GET",
            server.url + "/api/v1/alerts/stream",
            headers=bearer(seeded["tokens"]["agent"]),
            timeout=httpx.Timeout(5, read=60),
        ) as stream:
            assert stream.status_code == 200
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
            _, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, f"workers outlived the supervisor: {alive}"

    def test_a_worker_whose_parent_is_gone_exits(self) -> None:
        """A worker started after its supervisor died (the PR_SET_PDEATHSIG race) exits."""
        code = (
            "from api.cli_serve import die_with_parent; die_with_parent(2**22 + 7); "
            "import time; time.sleep(60)"
        )
        done = subprocess.run([sys.executable, "-c", code], timeout=30, check=False)
        assert done.returncode == 1

    def test_second_instance_is_refused(
        self, serves: list[Serve], api_database_url: str, tmp_path: Path
    ) -> None:
        """A second serve on the same port exits 1 naming the first (same data dir) or the
        taken port (another data dir); the first keeps serving alone."""
        port = _free_port()
        first = Serve(
            database_url=api_database_url,
            data_dir=tmp_path / "a",
            log_path=tmp_path / "a.log",
            port=port,
            workers=2,
        )
        serves.append(first)
        first.wait_healthy()
        for name, data_dir, message in (
            ("same", tmp_path / "a", f"pid {first.process.pid}) já atende em 127.0.0.1:{port}"),
            ("other", tmp_path / "b", f"não foi possível abrir 127.0.0.1:{port}"),
        ):
            second = Serve(
                database_url=api_database_url,
                data_dir=data_dir,
                log_path=tmp_path / f"{name}.log",
                port=port,
                workers=2,
            )
            serves.append(second)
            assert second.process.wait(timeout=60) == 1
            assert message in second.log()
            assert "Traceback" not in second.log()
        assert len(_listening_children(first.process.pid, port)) == 2
        health = httpx.get(first.url + "/health")
        assert health.status_code == 200
        assert "server" not in health.headers  # no "server: uvicorn"

    def test_worker_that_cannot_bind_gives_up(self, tmp_path: Path) -> None:
        """Workers that cannot bind are restarted after 0.5, 1, 2, 4 s, then the supervisor
        stops with a clear error (exit 1) instead of retrying forever."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            code = (
                "import sys; from api.cli_serve import ServeError, serve_workers\n"
                "try:\n"
                f"    serve_workers(host='127.0.0.1', port={port}, workers=1,"
                " log_level='warning')\n"
                "except ServeError as exc:\n"
                "    print('Erro:', exc, file=sys.stderr); sys.exit(1)\n"
            )
            done = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        assert done.returncode == 1
        delays = [
            line.rsplit("reiniciando em ", 1)[1]
            for line in done.stderr.splitlines()
            if "reiniciando em" in line
        ]
        assert delays == ["0.5 s", "1 s", "2 s", "4 s"]
        assert f"não conseguiu abrir 127.0.0.1:{port} 5 vezes seguidas" in done.stderr
