"""Helpers of the HTTP API tests (import as ``from api_factories import bearer``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROLES = ("admin", "planner", "agent", "supervisor")
"""Roles of logged-in users."""

PASSWORD = "senha-de-teste-123"
"""Password of every seeded user."""


DEVICE_SINCE = datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC"))
"""Registration of the tests' devices: they send fixes dated days back (``before_device``)."""


def bearer(token: str) -> dict[str, str]:
    """Return the Authorization header of a bearer token."""
    return {"Authorization": f"Bearer {token}"}


SECRET_KEY = "oGD3pDyBv0ofUQb3obqeq2DPmy1gxCFsbhOHGS9gBw8="
"""Fernet key of the test apps' webhook secrets (no key file in the user's data directory)."""


class LiveServer:
    """``pontual serve`` (one process) on a free 127.0.0.1 port, for tests over real HTTP.

    Use as a context manager; ``url`` and ``pid`` are set once ``/health`` answers. ``env``
    adds settings (``PONTUAL_...``) to a clean environment.
    """

    def __init__(self, database_url: str, log_path: Path, **env: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        self.log_path = log_path
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LiveServer:
        import httpx

        pontual = Path(sys.executable).with_name("pontual")
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PONTUAL_") and k != "DATABASE_URL"
        }
        env = clean | {
            "DATABASE_URL": self.database_url,
            "PONTUAL_SECRET_KEY": SECRET_KEY,
            **self.env,
        }
        command = [str(pontual), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        with self.log_path.open("ab") as log:
            self.process = proc = subprocess.Popen(
                [*command, "--log-level", "warning"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                msg = f"pontual serve exited: {self.log_path.read_text()[-2000:]}"
                raise RuntimeError(msg)
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.__exit__()
        msg = "pontual serve did not become healthy"
        raise RuntimeError(msg)

    @property
    def pid(self) -> int:
        """Process id of the server."""
        assert self.process is not None
        return self.process.pid

    def __exit__(self, *exc: object) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def suspend_until_today(engine: Any, vehicle_id: str, zone: str = "America/Sao_Paulo") -> date:
    """Suspend a registered vehicle from five days ago to today (local); return today."""
    from sqlalchemy import text

    today = datetime.now(ZoneInfo(zone)).date()
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES (:v, 'suspended', :f, :u)"
            ),
            {"v": vehicle_id, "f": today - timedelta(days=5), "u": today},
        )
    return today
