"""Benchmark: sustained HTTP ingest (POST /api/v1/pings, batches of 100 fixes) on loopback.

A throwaway database ``pontual_bench_http_<hex>`` is created on the server of ``--url`` (else
``DATABASE_URL``, else the local cluster ``pontual db start`` manages), migrated, and dropped at
the end. ``pontual serve`` serves the app on 127.0.0.1 (``--workers`` processes, each on its own
``SO_REUSEPORT`` socket); ``--clients`` concurrent asyncio clients, each a device of its own
vehicle, send batches of ``--batch`` fixes (one simulated second apart) back to back for
``--seconds``, each on one keep-alive connection with the requests written by hand (asyncio
streams: a lean load generator, since it shares the cores with the servers and PostgreSQL).
Reported: acknowledged fixes/s, latency p50/p99 per batch, and loss = acknowledged as accepted
minus stored (counted in the database at the end).

Under that load (issue #10 part 3), an observer reads the stand-occupancy endpoint of a stand
where the fleet drives (every 0.5 s, an agent's token) and holds an SSE alert stream open; every
5 s a probe vehicle sends an occupied fix 25 min old and then one 5 min old (a tracking gap), and
the time from that POST to the alert's arrival on the stream is measured. At the end the live
queue's backlog is reported, and how long the live detectors take to drain it.

``--live server`` (default) runs the live worker in each server process; ``--live process`` runs
the servers with ``PONTUAL_LIVE_WORKER=false`` and one ``python -m api.live_worker --nice 10``;
``--live idle`` the same worker under ``SCHED_IDLE`` (only the CPU the ingest leaves).

    .venv/bin/python bench/bench_http_ingest.py                 # 60 s, 8 clients, 2 workers
    .venv/bin/python bench/bench_http_ingest.py --seconds 10 --clients 4 --workers 1

The load generator runs on the same machine as the server and PostgreSQL: on 2 shared cores all
three compete for CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import text

DONE: list[tuple[float, int]] = []
"""(time answered, fixes) of every acknowledged batch: the throughput over time."""
STAND = ("BENCH1", -30.0295, -51.23)  # id, lat, lon: where the bench fleet drives
PROBE_EVERY_S = 5.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _database(url: str | None) -> tuple[str, str]:
    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import create_database, parse_url
    from db.migrate import upgrade

    base = url or database_url(get_settings())
    name = f"pontual_bench_http_{secrets.token_hex(4)}"
    bench_url = parse_url(base).set(database=name).render_as_string(hide_password=False)
    create_database(bench_url)
    upgrade(bench_url)
    return base, bench_url


def _devices(url: str, n: int, n_probes: int) -> tuple[list, list, str]:
    """Devices of the load, devices of registered probe vehicles, an agent's token; a stand."""
    from api import accounts
    from db.engine import make_engine, session_scope
    from db.fleet.models import Vehicle
    from db.stands.registry import create_stand

    engine = make_engine(url)
    out, probes = [], []
    with session_scope(engine) as session:
        for i in range(n):
            vehicle = f"B{i:03d}"
            _, token = accounts.create_device(session=session, vehicle_id=vehicle)
            out.append((vehicle, token))
        for i in range(n_probes):
            vehicle = f"PROBE{i:03d}"
            session.add(Vehicle(vehicle_id=vehicle, prefixo=vehicle))
            session.flush()
            _, token = accounts.create_device(session=session, vehicle_id=vehicle)
            probes.append((vehicle, token))
        stand_id, lat, lon = STAND
        create_stand(
            session=session,
            stand_id=stand_id,
            actor="bench",
            lat=lat,
            lon=lon,
            radius_m=60,
            capacity=4,
        )
        user = accounts.create_user(
            session=session, username="bench-agent", password="senha-do-bench-1", role="agent"
        )
        agent, _ = accounts.issue_token(session=session, user=user, ttl_s=3600)
    engine.dispose()
    return out, probes, agent


async def _sse(base: str, agent: str, arrived: dict[str, float], ready: asyncio.Event) -> None:
    """Hold the alert stream open; note when each probe vehicle's alert arrives."""
    headers = {"Authorization": f"Bearer {agent}"}
    timeout = httpx.Timeout(10, read=None)
    async with (
        httpx.AsyncClient(base_url=base, timeout=timeout) as client,
        client.stream(
            "GET", "/api/v1/alerts/stream", params={"kind": "tracking_gap"}, headers=headers
        ) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith(": conectado"):
                ready.set()
            elif line.startswith("data: "):
                event = json.loads(line[6:])
                arrived.setdefault(event["vehicle_id"], time.perf_counter())


async def _observer(
    base: str,
    agent: str,
    probes: list[tuple[str, str]],
    deadline: float,
    occupancy_ms: list[float],
    sent: dict[str, float],
) -> None:
    """Read the stand's occupancy every 0.5 s; start a probe's tracking gap every 5 s."""
    headers = {"Authorization": f"Bearer {agent}"}
    next_probe = time.perf_counter() + 1.0
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            response = await client.get(f"/api/v1/stands/{STAND[0]}/occupancy", headers=headers)
            if response.status_code == 200:
                occupancy_ms.append((time.perf_counter() - t0) * 1000)
            else:
                print("occupancy", response.status_code, response.text[:200], file=sys.stderr)
            if t0 >= next_probe and len(sent) < len(probes):
                vehicle, token = probes[len(sent)]
                now = dt.datetime.now(dt.UTC)
                for minutes_ago in (25, 5):
                    fix = {
                        "timestamp": (now - dt.timedelta(minutes=minutes_ago)).isoformat(),
                        "lat": -30.0277,
                        "lon": -51.2287,
                        "meter": "occupied",
                    }
                    t_send = time.perf_counter()
                    await client.post(
                        "/api/v1/pings",
                        json={"pings": [fix]},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                sent[vehicle] = t_send
                next_probe += PROBE_EVERY_S
            await asyncio.sleep(max(0.0, 0.5 - (time.perf_counter() - t0)))


async def _client(
    base: str,
    token: str,
    batch: int,
    deadline: float,
    start: dt.datetime,
    lat: list[float],
    acked: list[int],
    seconds: int,
) -> None:
    """One device: batches back to back on a keep-alive HTTP/1.1 connection.

    A lean client (asyncio streams, the request bytes built by hand) so that the load generator,
    which shares the machine's cores with the servers and PostgreSQL, costs little per request.
    """
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /api/v1/pings HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
    )
    t = 0
    try:
        while time.perf_counter() < deadline:
            body = json.dumps(
                {
                    "pings": [
                        {
                            "timestamp": (start + dt.timedelta(seconds=t + i)).isoformat(),
                            "lat": -30.03 + 0.0001 * ((t + i) % 100),
                            "lon": -51.23,
                            "speed_kmh": 20.0,
                            "meter": "free",
                        }
                        for i in range(batch)
                    ]
                }
            ).encode()
            t += batch
            t0 = time.perf_counter()
            writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            status, answer = await _response(reader)
            lat.append(time.perf_counter() - t0)
            if status != 200:
                print("error", status, answer[:200], file=sys.stderr)
                continue
            acked[0] += json.loads(answer)["accepted"]
            DONE.append((time.perf_counter(), batch))
    finally:
        writer.close()
    _ = seconds


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one HTTP/1.1 response with a Content-Length body: (status, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(line.split(":", 1)[1])
        for line in lines[1:]
        if line.lower().startswith("content-length")
    )
    return status, await reader.readexactly(length)


async def _run(
    base: str,
    devices: list[tuple[str, str]],
    batch: int,
    seconds: int,
    probes: list[tuple[str, str]],
    agent: str,
) -> tuple:
    latencies: list[float] = []
    acked = [0]
    occupancy_ms: list[float] = []
    sent: dict[str, float] = {}
    arrived: dict[str, float] = {}
    ready = asyncio.Event()
    sse = asyncio.create_task(_sse(base, agent, arrived, ready))
    await asyncio.wait_for(ready.wait(), timeout=30)
    # A fix per simulated second: up to 40,000 fixes/s in all stay in the past.
    start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds * 40_000 / len(devices))
    t0 = time.perf_counter()
    deadline = t0 + seconds
    await asyncio.gather(
        _observer(base, agent, probes, deadline, occupancy_ms, sent),
        *(
            _client(base, token, batch, deadline, start, latencies, acked, seconds)
            for _, token in devices
        ),
    )
    wall = time.perf_counter() - t0
    return wall, latencies, acked[0], occupancy_ms, sent, arrived, sse


def _drain(url: str, sent: dict, arrived: dict, timeout_s: float = 600) -> tuple[int, float, int]:
    """Return the live queue's backlog at the end of the load, the seconds waited, what is left."""
    from db.engine import make_engine

    engine = make_engine(url)
    t0 = time.perf_counter()
    with engine.connect() as conn:
        backlog = int(conn.execute(text("SELECT count(*) FROM live_queue")).scalar_one())
        left = backlog
        while left and time.perf_counter() - t0 < timeout_s:
            time.sleep(0.2)
            left = int(conn.execute(text("SELECT count(*) FROM live_queue")).scalar_one())
            conn.rollback()
    engine.dispose()
    return backlog, time.perf_counter() - t0, left


async def _until_drained(
    url: str,
    base: str,
    devices: list,
    args: argparse.Namespace,
    probes: list,
    agent: str,
) -> tuple:
    """Run the load, then wait (stream still open) until the live queue is empty."""
    wall, latencies, acked, occupancy_ms, sent, arrived, sse = await _run(
        base, devices, args.batch, args.seconds, probes, agent
    )
    drained = await asyncio.to_thread(
        _drain, url, sent, arrived, timeout_s=0.0 if args.skip_drain else 600.0
    )
    await asyncio.sleep(1.0)  # the last alerts on their way
    sse.cancel()
    with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
        await sse
    return wall, latencies, acked, occupancy_ms, sent, arrived, drained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--live", choices=("server", "process", "idle"), default="server")
    parser.add_argument(
        "--skip-drain", action="store_true", help="report the backlog, do not wait for it"
    )
    args = parser.parse_args()

    from db.engine import drop_database, make_engine

    _, url = _database(args.url)
    port = _free_port()
    env = os.environ | {"DATABASE_URL": url}
    live = None
    if args.live in ("process", "idle"):
        env |= {"PONTUAL_LIVE_WORKER": "false"}
        priority = ["--nice", "10"] + (["--idle"] if args.live == "idle" else [])
        live = subprocess.Popen([sys.executable, "-m", "api.live_worker", *priority], env=env)
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("pontual")),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        n_probes = int(args.seconds // PROBE_EVERY_S)
        devices, probes, agent = _devices(url, args.clients, n_probes)
        for _ in range(200):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        load_before = os.getloadavg()[0]
        wall, latencies, acked, occupancy_ms, sent, arrived, sse = asyncio.run(
            _until_drained(url, base, devices, args, probes, agent)
        )
        load_after = os.getloadavg()[0]
        engine = make_engine(url)
        with engine.connect() as conn:
            stored = int(
                conn.execute(
                    text("SELECT count(*) FROM fixes WHERE vehicle_id LIKE 'B%'")
                ).scalar_one()
            )
        engine.dispose()
        lat_ms = np.array(latencies) * 1000
        print(
            f"{args.clients} clients x batches of {args.batch}, {args.workers} workers, "
            f"{wall:.1f} s (load {load_before:.2f} -> {load_after:.2f})"
        )
        print(f"batches {len(latencies)}, acknowledged {acked} fixes, stored {stored}")
        print(f"throughput {acked / wall:,.0f} fixes/s")
        print(
            f"latency per batch p50 {np.percentile(lat_ms, 50):.1f} ms, "
            f"p99 {np.percentile(lat_ms, 99):.1f} ms, max {lat_ms.max():.1f} ms"
        )
        print(f"loss (acknowledged - stored) {acked - stored}")
        if DONE:
            t0 = DONE[0][0]
            windows = np.bincount(
                [int((t - t0) // 10) for t, _ in DONE], weights=[n for _, n in DONE]
            )
            print("fixes/s per 10 s: " + ", ".join(f"{w / 10:,.0f}" for w in windows))
        occ = np.array(occupancy_ms)
        print(
            f"stand occupancy under load: {len(occ)} reads, p50 {np.percentile(occ, 50):.1f} ms, "
            f"p99 {np.percentile(occ, 99):.1f} ms"
        )
        backlog, drain_s, left = sse
        lags = sorted(arrived[v] - sent[v] for v in sent if v in arrived)
        drained = f"drained in {drain_s:.1f} s" if not left else "not waited for"
        print(
            f"live queue at the end of the load: {backlog} fixes, {drained}; "
            f"alerts on SSE {len(lags)}/{len(sent)}, POST -> SSE "
            + (f"p50 {np.percentile(lags, 50):.2f} s, max {max(lags):.2f} s" if lags else "-")
        )
    finally:
        if live is not None:
            live.send_signal(signal.SIGINT)
            try:
                live.wait(timeout=20)
            except subprocess.TimeoutExpired:  # deep in a large backlog batch
                live.kill()
                live.wait(timeout=10)
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        drop_database(url)


if __name__ == "__main__":
    main()
