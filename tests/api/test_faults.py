"""Fault tests of device ingest (``POST /api/v1/pings``) over loopback HTTP.

- The API server (``pontual serve``, a child process on a free 127.0.0.1 port) is killed with
  SIGKILL during sustained ingest and started again: every acknowledged fix is stored exactly
  once, and the clients' retries of unacknowledged batches create no duplicates. Two
  deterministic cases pin the moments a random kill may miss (a lock held by the test keeps the
  request inside its transaction): a request killed before its COMMIT stores nothing and its
  retry is accepted; a retry sent while the unanswered first attempt still runs stores nothing
  twice.
- PostgreSQL (a throw-away embedded cluster of the test's own, never the shared test cluster) is
  restarted (fast shutdown, then start) during ingest: clients get a 503 with a JSON body and
  ``Retry-After`` (or a connection error), never another 5xx; ``/ready`` goes 503 then 200; after
  the restart everything acknowledged is stored.
- A full disk: a day's partition in a tablespace on a 2 MB tmpfs, filled by ingest until
  PostgreSQL cannot extend the table's file (needs root to mount; skipped otherwise); and the
  same error (SQLSTATE 53100, ``disk_full``) raised by a trigger, which runs anywhere. A broken
  partition: detached by hand. The client gets a clear error and nothing is acknowledged that is
  not stored. Only the table's file system fills — never the WAL's, which would make PostgreSQL
  PANIC and take the shared test cluster down.

Each test is bounded (well under a minute on two shared cores). The long variants (more clients,
several kills or restarts over minutes) are marked ``slow`` and run only with
``PONTUAL_LONG_FAULTS=1``::

    PONTUAL_LONG_FAULTS=1 .venv/bin/pytest tests/api/test_faults.py -q -m slow

Assumption about the API: a batch is stored in one transaction (its answer comes after that
COMMIT), so a retried batch is answered all ``accepted`` (the failed attempt stored nothing) or
all ``duplicate`` (it was stored, the answer was lost).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_factories import DEVICE_SINCE, bearer
from factories import migrated_database
from sqlalchemy import Engine, text

PONTUAL = Path(sys.executable).with_name("pontual")
SERVE_START_S = 60.0
"""Bound on ``pontual serve`` becoming healthy (imports, migrations check)."""
DELIVERY_DEADLINE_S = 60.0
"""Bound on a client's retries of one batch after the faults are over."""
BATCH_SIZE = 50
LONG = os.environ.get("PONTUAL_LONG_FAULTS") == "1"
long_only = [
    pytest.mark.slow,
    pytest.mark.skipif(not LONG, reason="long variant: set PONTUAL_LONG_FAULTS=1"),
]
SHORT = {"clients": 3, "faults": 1, "warmup_batches": 8, "after_batches": 3}
LONG_RUN = {"clients": 6, "faults": 6, "warmup_batches": 40, "after_batches": 20}


# --- the server -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess:
    """``pontual serve`` in a child process on 127.0.0.1; its output goes to ``log_path``."""

    def __init__(
        self, *, database_url: str, data_dir: Path, log_path: Path, workers: int = 1
    ) -> None:
        self.workers = workers
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PONTUAL_") and k != "DATABASE_URL"
        }
        self.env = env | {"DATABASE_URL": database_url, "PONTUAL_DATA_DIR": str(data_dir)}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (on the same port each time) and wait until /health answers."""
        command = [str(PONTUAL), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--log-level", "warning", "--workers", str(self.workers)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + SERVE_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"pontual serve exited with {self.process.returncode}: {self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        pytest.fail(f"pontual serve not healthy after {SERVE_START_S} s: {self.log()}")

    def kill(self) -> None:
        """SIGKILL the server (no shutdown of any kind) and reap it."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the server if it runs (SIGTERM, then SIGKILL)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log(self) -> str:
        """Return the end of the server's output."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[list[ServeProcess]]:
    """Started servers are stopped at the end (append them to the list)."""
    servers: list[ServeProcess] = []
    yield servers
    for server in servers:
        server.stop()


def _serving(supervisor: Any, port: int) -> list[Any]:
    """The supervisor's children listening on ``port`` (the server workers)."""
    import psutil

    found = []
    for child in supervisor.children():
        with contextlib.suppress(psutil.Error):
            if any(
                c.laddr.port == port and c.status == psutil.CONN_LISTEN
                for c in child.net_connections("tcp")
            ):
                found.append(child)
    return found


def _wait_for(what: str, predicate: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {timeout_s} s")


class TestServeWorkers:
    def test_connections_spread_dead_worker_restarts_all_die_with_supervisor(
        self, serve: list[ServeProcess], fresh_database_url: str, tmp_path: Path
    ) -> None:
        """--workers 2: each worker listens on its own SO_REUSEPORT socket and keep-alive
        connections land on both; a SIGKILLed worker is replaced; SIGKILL of the supervisor
        takes the workers down with it (no orphan keeps the port)."""
        import psutil

        server = ServeProcess(
            database_url=fresh_database_url,
            data_dir=tmp_path,
            log_path=tmp_path / "serve.log",
            workers=2,
        )
        serve.append(server)
        server.start()
        assert server.process is not None
        supervisor = psutil.Process(server.process.pid)
        workers = _wait_for("two listening workers", lambda: _serving(supervisor, server.port))
        assert len(workers) == 2
        clients = [httpx.Client(base_url=server.url) for _ in range(16)]
        try:
            for client in clients:
                assert client.get("/health").status_code == 200

            def served_by() -> list[int]:
                return [
                    sum(
                        c.laddr.port == server.port and c.status == psutil.CONN_ESTABLISHED
                        for c in w.net_connections("tcp")
                    )
                    for w in workers
                ]

            counts = served_by()
            assert sum(counts) == 16 and min(counts) > 0, counts
        finally:
            for client in clients:
                client.close()
        workers[0].kill()
        _wait_for(
            "a new worker",
            lambda: (
                len(_serving(supervisor, server.port)) == 2
                and workers[0].pid not in {w.pid for w in _serving(supervisor, server.port)}
            ),
        )
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
        survivors = _serving(supervisor, server.port)
        server.kill()
        _, alive = psutil.wait_procs(survivors, timeout=30)
        assert not alive, f"workers outlived the supervisor: {alive}"


# --- databases and devices -----------------------------------------------------------------


@pytest.fixture
def fresh_database_url(database_url: str) -> Iterator[str]:
    """A fresh migrated database on the test server for one test (dropped at the end)."""
    with migrated_database(database_url, prefix="pontual_faults") as url:
        yield url


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[tuple[Path, int, str]]:
    """A throw-away embedded cluster in ``tmp_path``: (data_dir, port, url of a migrated db)."""
    from db.cluster import ensure_database, stop_cluster

    data_dir = tmp_path / "pg"
    port = _free_port()
    try:
        url = ensure_database(data_dir=data_dir, port=port, durable=False)
        yield data_dir, port, url
    finally:
        stop_cluster(data_dir=data_dir)


@pytest.fixture
def engine_of() -> Iterator[Any]:
    """Make engines on demand (disposed at the end): ``engine_of(url)``."""
    from db.engine import make_engine

    engines: list[Engine] = []

    def make(url: str) -> Engine:
        engines.append(make_engine(url, connect_timeout_s=5))
        return engines[-1]

    yield make
    for engine in engines:
        engine.dispose()


def add_devices(engine: Engine, n: int) -> list[tuple[str, str]]:
    """Register ``n`` vehicles with a device each; return (vehicle_id, device token) pairs."""
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    out = []
    with session_scope(engine) as session:
        for _ in range(n):
            vehicle_id = f"FT{secrets.token_hex(4).upper()}"
            session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))
            session.flush()
            _, token = accounts.create_device(
                session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
            )
            out.append((vehicle_id, token))
    return out


def stored_fixes(engine: Engine, vehicle_ids: list[str]) -> Counter[tuple[str, dt.datetime]]:
    """Count the stored fixes per (vehicle_id, ts) of ``vehicle_ids``."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT vehicle_id, ts, count(*) FROM fixes WHERE vehicle_id = ANY(:v) "
                "GROUP BY vehicle_id, ts"
            ),
            {"v": vehicle_ids},
        )
        return Counter({(r[0], r[1].astimezone(dt.UTC)): int(r[2]) for r in rows})


# --- clients ---------------------------------------------------------------------------------


def fix(vehicle_id: str, ts: dt.datetime) -> dict[str, Any]:
    """One valid fix of ``vehicle_id`` at ``ts`` (Porto Alegre, meter free)."""
    return {
        "vehicle_id": vehicle_id,
        "timestamp": ts.isoformat(),
        "lat": -30.03 + (ts.microsecond % 997) * 1e-7,
        "lon": -51.23,
        "meter": "free",
        "speed_kmh": 0.0,
    }


@dataclass
class Batch:
    """A batch of fixes with unique (vehicle, ts) and what became of it."""

    keys: list[tuple[str, dt.datetime]]
    attempts: int = 0
    statuses: list[str] | None = None  # the acknowledged answer, per row

    def payload(self) -> dict[str, Any]:
        """Return the JSON body (the same rows at every attempt)."""
        return {"pings": [fix(v, ts) for v, ts in self.keys]}


@dataclass
class Sender:
    """A device sending batches one after another; retries each until it is acknowledged.

    Errors are recorded: ``transport`` (connection refused or dropped, timeout), ``unavailable``
    (503 answers: status, body, Retry-After) and ``unexpected`` (any other non-200 answer).
    """

    url: str
    vehicle_id: str
    token: str
    start: dt.datetime
    stop: threading.Event
    batches: list[Batch] = field(default_factory=list)
    transport: list[str] = field(default_factory=list)
    unavailable: list[tuple[int, Any, str | None]] = field(default_factory=list)
    unexpected: list[tuple[int, str]] = field(default_factory=list)
    gave_up: list[Batch] = field(default_factory=list)
    acked: int = 0

    def run(self) -> None:
        """Send until ``stop`` is set, then finish (deliver) the current batch."""
        with httpx.Client(headers=bearer(self.token), timeout=httpx.Timeout(15)) as http:
            n = 0
            while not self.stop.is_set():
                keys = [
                    (self.vehicle_id, self.start + dt.timedelta(milliseconds=10 * (n + i)))
                    for i in range(BATCH_SIZE)
                ]
                n += BATCH_SIZE
                batch = Batch(keys)
                self.batches.append(batch)
                self.deliver(http, batch)

    def deliver(self, http: httpx.Client, batch: Batch) -> None:
        """Post ``batch`` until it is acknowledged (200), or give up after the deadline."""
        deadline = None
        while True:
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + DELIVERY_DEADLINE_S
            if deadline is not None and time.monotonic() > deadline:
                self.gave_up.append(batch)
                return
            batch.attempts += 1
            try:
                response = http.post(self.url + "/api/v1/pings", json=batch.payload())
            except httpx.TransportError as exc:
                self.transport.append(type(exc).__name__)
                time.sleep(0.05)
                continue
            if response.status_code == 200:
                batch.statuses = [r["status"] for r in response.json()["results"]]
                self.acked += 1
                return
            if response.status_code == 503:
                self.unavailable.append(
                    (503, _json_or_text(response), response.headers.get("retry-after"))
                )
            else:
                self.unexpected.append((response.status_code, response.text[:500]))
            time.sleep(0.1)  # shorter than Retry-After: the test is bounded


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]


class Fleet:
    """Several senders in threads."""

    def __init__(self, url: str, devices: list[tuple[str, str]], start: dt.datetime) -> None:
        self.stop = threading.Event()
        self.senders = [Sender(url, v, t, start, self.stop) for v, t in devices]
        self.threads = [threading.Thread(target=s.run, daemon=True) for s in self.senders]

    def __enter__(self) -> Fleet:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=DELIVERY_DEADLINE_S + 20)

    def acked(self) -> int:
        """Return the number of acknowledged batches so far."""
        return sum(s.acked for s in self.senders)

    def wait_acked(self, n: int, *, timeout_s: float) -> None:
        """Wait until each sender has ``n`` more acknowledged batches than now."""
        targets = [s.acked + n for s in self.senders]
        deadline = time.monotonic() + timeout_s
        while any(s.acked < t for s, t in zip(self.senders, targets, strict=True)):
            if time.monotonic() > deadline:
                done = [s.acked for s in self.senders]
                pytest.fail(f"ingest stalled: acknowledged {done}, wanted {targets}")
            time.sleep(0.05)

    def check_delivered(self, engine: Engine) -> dict[str, int]:
        """Assert every batch was acknowledged and each acknowledged fix is stored exactly once.

        Returns figures: batches, fixes, retried batches, retried batches found stored.
        """
        assert all(not t.is_alive() for t in self.threads), "a client did not finish"
        for s in self.senders:
            assert not s.gave_up, f"{s.vehicle_id}: {len(s.gave_up)} batches never acknowledged"
            assert not s.unexpected, f"{s.vehicle_id}: unexpected answers {s.unexpected[:3]}"
        batches = [b for s in self.senders for b in s.batches]
        sent = [k for b in batches for k in b.keys]
        retried = [b for b in batches if b.attempts > 1]
        for b in batches:
            assert b.statuses is not None and len(b.statuses) == len(b.keys)
            if b.attempts == 1:
                assert set(b.statuses) == {"accepted"}, Counter(b.statuses)
            else:  # the failed attempt stored the whole batch, or nothing of it
                assert set(b.statuses) in ({"accepted"}, {"duplicate"}), Counter(b.statuses)
        stored = stored_fixes(engine, [s.vehicle_id for s in self.senders])
        assert max(stored.values(), default=1) == 1
        missing = set(sent) - set(stored)
        assert not missing, f"{len(missing)} acknowledged fixes lost, e.g. {sorted(missing)[:3]}"
        extra = set(stored) - set(sent)
        assert not extra, f"{len(extra)} fixes stored that were never sent"
        return {
            "batches": len(batches),
            "fixes": len(sent),
            "retried": len(retried),
            "retried_found_stored": sum(b.statuses == ["duplicate"] * len(b.keys) for b in retried),
        }

    def resend_all_retried(self, url: str) -> None:
        """Send every retried batch once more: all of it must come back ``duplicate``."""
        for s in self.senders:
            with httpx.Client(headers=bearer(s.token), timeout=15) as http:
                for batch in [b for b in s.batches if b.attempts > 1]:
                    response = http.post(url + "/api/v1/pings", json=batch.payload())
                    assert response.status_code == 200, response.text
                    body = response.json()
                    assert body["duplicates"] == len(batch.keys), body


def _ingest_start() -> dt.datetime:
    """Fixes start 3 hours ago, 10 ms apart per vehicle: unique, never in the future."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=3)


# --- SIGKILL of the server -------------------------------------------------------------------


class TestServerKilledDuringIngest:
    @pytest.mark.parametrize("run", [SHORT, pytest.param(LONG_RUN, marks=long_only)])
    def test_acknowledged_fixes_stored_exactly_once(
        self,
        run: dict[str, int],
        fresh_database_url: str,
        engine_of: Any,
        serve: list[ServeProcess],
        tmp_path: Path,
    ) -> None:
        """SIGKILL mid-stream, restart: every acknowledged fix stored once, retries add nothing."""
        engine = engine_of(fresh_database_url)
        devices = add_devices(engine, run["clients"])
        server = ServeProcess(
            database_url=fresh_database_url, data_dir=tmp_path, log_path=tmp_path / "serve.log"
        )
        serve.append(server)
        server.start()
        t0 = time.monotonic()
        with Fleet(server.url, devices, _ingest_start()) as fleet:
            fleet.wait_acked(run["warmup_batches"], timeout_s=60)
            for _ in range(run["faults"]):
                server.kill()
                time.sleep(0.5)  # clients meet a closed port
                server.start()
                fleet.wait_acked(run["after_batches"], timeout_s=60)
        figures = fleet.check_delivered(engine)
        assert figures["retried"] >= 1, "no batch was interrupted: the kill hit nothing"
        fleet.resend_all_retried(server.url)
        assert sum(stored_fixes(engine, [v for v, _ in devices]).values()) == figures["fixes"]
        print(f"kill x{run['faults']}: {figures}, {time.monotonic() - t0:.1f} s")  # noqa: T201


@pytest.fixture
def killable(
    fresh_database_url: str, engine_of: Any, serve: list[ServeProcess], tmp_path: Path
) -> tuple[ServeProcess, Engine, tuple[str, str]]:
    """A started server on a fresh database, its engine and one device (vehicle_id, token)."""
    engine = engine_of(fresh_database_url)
    (device,) = add_devices(engine, 1)
    server = ServeProcess(
        database_url=fresh_database_url, data_dir=tmp_path, log_path=tmp_path / "serve.log"
    )
    serve.append(server)
    server.start()
    return server, engine, device


def ensure_day(engine: Engine, day: dt.date) -> None:
    """Create ``day``'s partition of ``fixes`` now (as the partition job does ahead of time)."""
    from db.tracking.store import ensure_fix_partitions

    with engine.begin() as conn:
        ensure_fix_partitions(conn, day, day)


class Blocker:
    """Holds ``LOCK TABLE fixes IN SHARE MODE``: ingest blocks on it before its COMMIT."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.database = engine.url.database
        self.conn = engine.connect()
        self.tx = self.conn.begin()
        self.conn.execute(text("LOCK TABLE fixes IN SHARE MODE"))

    def wait_blocked(self, n: int, *, timeout_s: float = 30) -> None:
        """Wait until ``n`` other sessions of the database wait for a lock."""
        deadline = time.monotonic() + timeout_s
        with self.engine.connect() as conn:
            while True:
                waiting = conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = :d "
                        "AND wait_event_type = 'Lock'"
                    ),
                    {"d": self.database},
                ).scalar_one()
                conn.rollback()  # pg_stat_activity is a snapshot taken once per transaction
                if waiting >= n:
                    return
                if time.monotonic() > deadline:
                    activity = conn.execute(
                        text(
                            "SELECT state, wait_event_type, wait_event, left(query, 80) "
                            "FROM pg_stat_activity WHERE datname = :d"
                        ),
                        {"d": self.database},
                    ).all()
                    pytest.fail(f"{waiting} of {n} requests blocked: {activity}")
                time.sleep(0.05)

    def release(self) -> None:
        """Let the blocked ingest go on."""
        if self.tx.is_active:
            self.tx.rollback()
        self.conn.close()


def post_in_thread(url: str, token: str, batch: Batch, *, timeout_s: float) -> dict[str, Any]:
    """Post ``batch`` in a thread; the dict gets ``response`` or ``error`` when it ends."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["response"] = httpx.post(
                url + "/api/v1/pings",
                json=batch.payload(),
                headers=bearer(token),
                timeout=timeout_s,
            )
        except httpx.TransportError as exc:
            out["error"] = exc

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def _day_batch(vehicle_id: str, day: dt.date, n: int = BATCH_SIZE) -> Batch:
    noon = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
    return Batch([(vehicle_id, noon + dt.timedelta(seconds=i)) for i in range(n)])


class TestRequestInFlightAtKill:
    def test_uncommitted_batch_is_not_stored_and_its_retry_is_accepted(
        self, killable: tuple[ServeProcess, Engine, tuple[str, str]]
    ) -> None:
        """A batch whose request is killed before COMMIT is not stored; its retry stores it once."""
        server, engine, (vehicle_id, token) = killable
        day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
        ensure_day(engine, day)
        batch = _day_batch(vehicle_id, day)
        blocker = Blocker(engine)
        try:
            call = post_in_thread(server.url, token, batch, timeout_s=60)
            blocker.wait_blocked(1)  # the request is inside its transaction, before COMMIT
            server.kill()
        finally:
            blocker.release()
        call["thread"].join(10)
        assert "error" in call, call.get("response")
        assert sum(stored_fixes(engine, [vehicle_id]).values()) == 0
        server.start()
        response = httpx.post(
            server.url + "/api/v1/pings", json=batch.payload(), headers=bearer(token), timeout=30
        )
        assert response.status_code == 200, response.text
        assert response.json()["accepted"] == len(batch.keys)
        assert stored_fixes(engine, [vehicle_id]) == Counter(dict.fromkeys(batch.keys, 1))


class TestRetryOverlappingUnansweredAttempt:
    @pytest.mark.parametrize("new_day", [False, True], ids=["existing_partition", "new_day"])
    def test_concurrent_attempts_store_the_batch_once(
        self,
        new_day: bool,
        killable: tuple[ServeProcess, Engine, tuple[str, str]],
    ) -> None:
        """A client times out and retries while its first attempt still runs: stored once."""
        server, engine, (vehicle_id, token) = killable
        day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=2)
        if not new_day:
            ensure_day(engine, day)
        batch = _day_batch(vehicle_id, day)
        blocker = Blocker(engine)
        try:
            first = post_in_thread(server.url, token, batch, timeout_s=1)
            first["thread"].join(10)
            assert isinstance(first.get("error"), httpx.ReadTimeout)  # the answer was lost
            retry = post_in_thread(server.url, token, batch, timeout_s=60)
            blocker.wait_blocked(2)  # both attempts in their transactions
        finally:
            blocker.release()
        retry["thread"].join(60)
        response = retry["response"]
        assert response.status_code == 200, response.text
        statuses = {r["status"] for r in response.json()["results"]}
        assert statuses <= {"accepted", "duplicate"}, response.text
        assert stored_fixes(engine, [vehicle_id]) == Counter(dict.fromkeys(batch.keys, 1))
        again = httpx.post(
            server.url + "/api/v1/pings", json=batch.payload(), headers=bearer(token), timeout=30
        )
        assert again.status_code == 200, again.text
        assert again.json()["duplicates"] == len(batch.keys)


# --- PostgreSQL restart ----------------------------------------------------------------------


def assert_unavailable(response: httpx.Response) -> None:
    """Assert a 503 with Retry-After and a JSON error body (code and pt-BR message)."""
    assert response.status_code == 503, response.text
    assert response.headers.get("retry-after", "").isdigit(), response.headers
    error = response.json()["error"]
    assert error["code"] == "database_unavailable", error
    assert isinstance(error["message"], str) and error["message"], error


def wait_ready(url: str, *, timeout_s: float = 60) -> float:
    """Poll /ready until 200; return the seconds it took."""
    t0 = time.monotonic()
    while True:
        try:
            if httpx.get(url + "/ready", timeout=10).status_code == 200:
                return time.monotonic() - t0
        except httpx.TransportError:
            pass
        assert time.monotonic() - t0 < timeout_s, f"/ready not 200 after {timeout_s} s"
        time.sleep(0.1)


class TestDatabaseRestartDuringIngest:
    @pytest.mark.parametrize("run", [SHORT, pytest.param(LONG_RUN, marks=long_only)])
    def test_clients_get_503_and_nothing_acknowledged_is_lost(
        self,
        run: dict[str, int],
        own_cluster: tuple[Path, int, str],
        engine_of: Any,
        serve: list[ServeProcess],
        tmp_path: Path,
    ) -> None:
        """Fast restart of PostgreSQL mid-stream: 503 + Retry-After meanwhile, then all stored."""
        from db.cluster import start_cluster, stop_cluster

        data_dir, port, url = own_cluster
        engine = engine_of(url)
        *devices, (probe_vehicle, probe_token) = add_devices(engine, run["clients"] + 1)
        server = ServeProcess(database_url=url, data_dir=tmp_path, log_path=tmp_path / "serve.log")
        serve.append(server)
        server.start()
        assert httpx.get(server.url + "/ready", timeout=10).status_code == 200
        yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
        probe = _day_batch(probe_vehicle, yesterday, n=1).payload()
        t0, recoveries = time.monotonic(), []
        with Fleet(server.url, devices, _ingest_start()) as fleet:
            fleet.wait_acked(run["warmup_batches"], timeout_s=60)
            for _ in range(run["faults"]):
                stop_cluster(data_dir=data_dir)  # fast: open transactions are rolled back
                assert_unavailable(httpx.get(server.url + "/ready", timeout=30))
                assert_unavailable(
                    httpx.post(
                        server.url + "/api/v1/pings",
                        json=probe,
                        headers=bearer(probe_token),
                        timeout=30,
                    )
                )
                time.sleep(1.0)  # the clients meet the outage
                start_cluster(data_dir=data_dir, port=port, durable=False)
                recoveries.append(wait_ready(server.url))
                fleet.wait_acked(run["after_batches"], timeout_s=60)
        figures = fleet.check_delivered(engine)
        answers = [a for s in fleet.senders for a in s.unavailable]
        transport = Counter(e for s in fleet.senders for e in s.transport)
        assert answers, "no client met the outage"
        for status, body, retry_after in answers:
            assert status == 503 and retry_after is not None
            assert body["error"]["code"] == "database_unavailable", body
        assert sum(stored_fixes(engine, [probe_vehicle]).values()) == 0
        print(  # noqa: T201
            f"pg restart x{run['faults']}: {figures}, 503 answers {len(answers)}, "
            f"transport errors {dict(transport)}, /ready back after "
            f"{[round(r, 1) for r in recoveries]} s, {time.monotonic() - t0:.1f} s"
        )


# --- broken partition ------------------------------------------------------------------------

DISK_FULL_TRIGGER = """
CREATE FUNCTION faults_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not extend file "%%": No space left on device', TG_TABLE_NAME
        USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
END $$;
CREATE TRIGGER disk_full BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION faults_disk_full();
"""
"""Makes ``{table}`` fail every write as PostgreSQL does when it cannot extend a file."""


def post(server: ServeProcess, token: str, batch: Batch) -> httpx.Response:
    """Post ``batch`` once."""
    return httpx.post(
        server.url + "/api/v1/pings", json=batch.payload(), headers=bearer(token), timeout=30
    )


class TestBrokenPartition:
    def test_full_disk_is_a_clear_503_and_nothing_is_acknowledged(
        self, killable: tuple[ServeProcess, Engine, tuple[str, str]]
    ) -> None:
        """A day's partition that cannot grow: 503 naming the full disk; the retry stores all."""
        from db.tracking.store import partition_name

        server, engine, (vehicle_id, token) = killable
        broken_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=3)
        healthy_day = broken_day - dt.timedelta(days=1)
        for day in (broken_day, healthy_day):
            ensure_day(engine, day)
        with engine.begin() as conn:
            conn.exec_driver_sql(DISK_FULL_TRIGGER.format(table=partition_name(broken_day)))
        broken = _day_batch(vehicle_id, broken_day)
        both = Batch(_day_batch(vehicle_id, healthy_day).keys + broken.keys[:5])
        for batch in (broken, both):
            response = post(server, token, batch)
            assert response.status_code == 503, response.text
            assert response.headers.get("retry-after", "").isdigit()
            error = response.json()["error"]
            assert error["code"] == "database_disk_full", error
            assert "espaço em disco" in error["message"], error
        assert sum(stored_fixes(engine, [vehicle_id]).values()) == 0  # one transaction per batch
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TRIGGER disk_full ON {partition_name(broken_day)}")
        for batch in (both, broken):
            response = post(server, token, batch)
            assert response.status_code == 200, response.text
            assert {r["status"] for r in response.json()["results"]} <= {"accepted", "duplicate"}
        everything = set(both.keys) | set(broken.keys)
        assert stored_fixes(engine, [vehicle_id]) == Counter(dict.fromkeys(everything, 1))

    def test_real_full_disk_on_a_small_tablespace(
        self, killable: tuple[ServeProcess, Engine, tuple[str, str]], tmp_path: Path
    ) -> None:
        """A day's partition on a 2 MB tmpfs tablespace, filled by ingest: the batch that finds
        the disk full gets 503 ``database_disk_full``; every acknowledged fix is stored once and
        nothing unacknowledged is (needs root to mount the tmpfs: skipped otherwise)."""
        import tempfile

        from db.tracking.store import _day_bounds, partition_name

        server, engine, (vehicle_id, token) = killable
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        # Not under tmp_path: the server's user must reach it (pytest's folders are 0700).
        small = Path(tempfile.mkdtemp(prefix="pontual-faults-ts-"))
        small.chmod(0o755)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode != 0:
            pytest.skip(f"no tmpfs here: {mounted.stderr.strip()}")
        day = dt.datetime.now(dt.UTC).date() - dt.timedelta(
            days=6
        )  # inside the live window (7 days)
        name = partition_name(day)
        try:
            with engine.connect() as conn:
                data_dir = Path(conn.exec_driver_sql("SHOW data_directory").scalar_one())
            owner = data_dir.stat()
            os.chown(small, owner.st_uid, owner.st_gid)
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(f"CREATE TABLESPACE faults_small LOCATION '{small}'")
            lo, hi = _day_bounds(day)
            with engine.begin() as conn:
                conn.exec_driver_sql(
                    f"CREATE TABLE {name} PARTITION OF fixes "
                    f"FOR VALUES FROM ('{lo}') TO ('{hi}') TABLESPACE faults_small"
                )
            acked: set[tuple[str, dt.datetime]] = set()
            full = None
            noon = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
            for k in range(2_000):  # 2 MB holds ~10,000 fixes: it fills well before
                batch = Batch(
                    [(vehicle_id, noon + dt.timedelta(seconds=k * 100 + i)) for i in range(100)]
                )
                response = post(server, token, batch)
                if response.status_code != 200:
                    full = response
                    break
                statuses = [r["status"] for r in response.json()["results"]]
                assert statuses == ["accepted"] * 100, statuses
                acked |= set(batch.keys)
            assert full is not None, "the 2 MB tablespace never filled"
            assert full.status_code == 503, full.text
            assert full.json()["error"]["code"] == "database_disk_full", full.text
            assert full.headers.get("retry-after", "").isdigit()
            assert acked, "the disk was full before the first batch"
            assert stored_fixes(engine, [vehicle_id]) == Counter(dict.fromkeys(acked, 1))
        finally:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("DROP TABLESPACE IF EXISTS faults_small")
            subprocess.run(["umount", str(small)], check=False)
            small.rmdir()

    def test_detached_partition_is_stored_or_a_clear_error(
        self, killable: tuple[ServeProcess, Engine, tuple[str, str]]
    ) -> None:
        """Fixes of a day whose partition was detached: stored (readable), or a clear non-500."""
        from db.tracking.store import partition_name

        server, engine, (vehicle_id, token) = killable
        day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=5)
        ensure_day(engine, day)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"ALTER TABLE fixes DETACH PARTITION {partition_name(day)}")
        batch = _day_batch(vehicle_id, day)
        response = post(server, token, batch)
        stored = stored_fixes(engine, [vehicle_id])
        if response.status_code == 200:  # e.g. into the DEFAULT partition
            assert stored == Counter(dict.fromkeys(batch.keys, 1))
        else:
            assert not stored, "rows stored but not acknowledged"
            assert response.status_code == 503 or 400 <= response.status_code < 500, response.text
            assert response.json()["error"]["code"] != "internal_error"
            assert partition_name(day) in response.json()["error"]["message"]
