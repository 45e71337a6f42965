"""`pontual serve`: the HTTP API (FastAPI on uvicorn) on the local PostGIS or ``DATABASE_URL``."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import threading
from typing import Annotated

import typer


def serve(
    host: Annotated[str, typer.Option(help="Endereço de escuta.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Porta TCP.", min=1, max=65535)] = 8000,
    workers: Annotated[
        int, typer.Option(help="Processos de trabalho (cada um com seu pool de conexões).", min=1)
    ] = 1,
    log_level: Annotated[str, typer.Option(help="Nível de log do uvicorn.")] = "info",
    access_log: Annotated[
        bool, typer.Option(help="Registrar cada requisição no log (uvicorn).")
    ] = True,
) -> None:
    """Serve a API HTTP (documentação em /docs); aplica as migrações antes de iniciar."""
    import uvicorn

    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import describe_url

    settings = get_settings()
    url = database_url(settings)  # starts the local cluster on demand, migrates to head
    typer.echo(f"Banco: {describe_url(url)}; API em http://{host}:{port} (docs em /docs)")
    if workers == 1:
        import gc

        from api.main import create_app

        app = create_app(database_url=url, settings=settings)
        gc.freeze()  # what the imports built needs no more collection passes
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=access_log,
        )
        return
    os.environ["DATABASE_URL"] = url  # the workers build their app from the environment
    serve_workers(host=host, port=port, workers=workers, log_level=log_level, access_log=access_log)


def serve_workers(
    *, host: str, port: int, workers: int, log_level: str, access_log: bool = True
) -> None:
    """Run ``workers`` uvicorn processes, each on its own ``SO_REUSEPORT`` socket.

    The kernel spreads new connections over the processes' sockets; with one shared socket
    (uvicorn's ``--workers``) the process that wins the ``accept`` race keeps every connection of
    a burst, and keep-alive clients then stay on it. A worker that dies is started again; SIGINT
    or SIGTERM stops them all; each worker dies with this process (``PR_SET_PDEATHSIG``).
    """
    ctx = multiprocessing.get_context("spawn")
    args = (host, port, log_level, access_log)
    procs = [ctx.Process(target=_worker, args=args, daemon=True) for _ in range(workers)]
    for proc in procs:
        proc.start()
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        while not stop.wait(0.5):
            for k, proc in enumerate(procs):
                if not proc.is_alive():
                    typer.echo(f"worker {proc.pid} saiu ({proc.exitcode}); reiniciando", err=True)
                    procs[k] = ctx.Process(target=_worker, args=args, daemon=True)
                    procs[k].start()
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()  # uvicorn shuts down gracefully on SIGTERM
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def _worker(host: str, port: int, log_level: str, access_log: bool) -> None:
    """One server process: its own listening socket on (host, port), shared by SO_REUSEPORT."""
    import ctypes

    import uvicorn

    with contextlib.suppress(OSError, AttributeError):  # Linux: die with the supervisor
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    config = uvicorn.Config(
        "api.main:app_from_environment",
        factory=True,
        log_level=log_level,
        access_log=access_log,
    )
    uvicorn.Server(config).run(sockets=[sock])
