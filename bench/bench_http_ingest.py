"""Benchmark: sustained HTTP ingest (POST /api/v1/pings, batches of 100 fixes) on loopback.

A throwaway database ``pontual_bench_http_<hex>`` is created on the server of ``--url`` (else
``DATABASE_URL``, else the local cluster ``pontual db start`` manages), migrated, and dropped at
the end. ``uvicorn`` serves the app on 127.0.0.1 (``--workers`` processes); ``--clients`` concurrent
asyncio clients (httpx), each a device of its own vehicle, send batches of ``--batch`` fixes one
second apart, back to back, for ``--seconds``. Reported: acknowledged fixes/s, latency p50/p99 per
batch, and loss = acknowledged as accepted minus stored (counted in the database at the end).

    .venv/bin/python bench/bench_http_ingest.py                 # 60 s, 8 clients, 2 workers
    .venv/bin/python bench/bench_http_ingest.py --seconds 10 --clients 4 --workers 1

The load generator runs on the same machine as the server and PostgreSQL: on 2 shared cores all
three compete for CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
from sqlalchemy import text


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


def _devices(url: str, n: int) -> list[tuple[str, str]]:
    from api import accounts
    from db.engine import make_engine, session_scope

    engine = make_engine(url)
    out = []
    with session_scope(engine) as session:
        for i in range(n):
            vehicle = f"B{i:03d}"
            _, token = accounts.create_device(session=session, vehicle_id=vehicle)
            out.append((vehicle, token))
    engine.dispose()
    return out


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
    headers = {"Authorization": f"Bearer {token}"}
    t = 0
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        while time.perf_counter() < deadline:
            pings = [
                {
                    "timestamp": (start + dt.timedelta(seconds=t + i)).isoformat(),
                    "lat": -30.03 + 0.0001 * ((t + i) % 100),
                    "lon": -51.23,
                    "speed_kmh": 20.0,
                    "meter": "free",
                }
                for i in range(batch)
            ]
            t += batch
            t0 = time.perf_counter()
            response = await client.post("/api/v1/pings", json={"pings": pings})
            lat.append(time.perf_counter() - t0)
            if response.status_code != 200:
                print("error", response.status_code, response.text[:200], file=sys.stderr)
                continue
            acked[0] += response.json()["accepted"]
    _ = seconds


async def _run(base: str, devices: list[tuple[str, str]], batch: int, seconds: int) -> tuple:
    latencies: list[float] = []
    acked = [0]
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    await asyncio.gather(
        *(
            _client(base, token, batch, deadline, start, latencies, acked, seconds)
            for _, token in devices
        )
    )
    return time.perf_counter() - t0, latencies, acked[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()

    from db.engine import drop_database, make_engine

    _, url = _database(args.url)
    port = _free_port()
    env = os.environ | {"DATABASE_URL": url}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "api.main:app_from_environment",
            "--factory",
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
        devices = _devices(url, args.clients)
        for _ in range(200):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        load_before = os.getloadavg()[0]
        wall, latencies, acked = asyncio.run(_run(base, devices, args.batch, args.seconds))
        load_after = os.getloadavg()[0]
        engine = make_engine(url)
        with engine.connect() as conn:
            stored = int(conn.execute(text("SELECT count(*) FROM fixes")).scalar_one())
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
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        drop_database(url)


if __name__ == "__main__":
    main()
