"""`pontual serve`: the HTTP API (FastAPI on uvicorn) on the local PostGIS or ``DATABASE_URL``.

One instance per address: ``serve`` holds a lock file per host and port in the data directory
(``serve/<host>-<port>.lock``, released by the kernel whatever way the process ends) and
binds the port once without ``SO_REUSEPORT`` before anything else, so a second instance, or
any other program on the port, is refused with a message instead of sharing it silently.

With ``--workers N`` each worker listens on its own ``SO_REUSEPORT`` socket. A worker that
exits is started again after a delay that doubles with each exit soon after a start (0.5 s up
to 8 s); after :data:`MAX_QUICK_EXITS` such exits in a row (a port it cannot bind, a broken
installation) the supervisor stops every worker and exits 1 with the reason. Workers die with
the supervisor: Linux ``PR_SET_PDEATHSIG`` and, everywhere, a watchdog thread that notices the
parent is gone (within :data:`WATCHDOG_S`), asks uvicorn to stop and exits for good
:data:`HARD_EXIT_S` later.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

BIND_FAILED_EXIT = 3
"""Exit code of a worker that could not bind its socket."""
QUICK_EXIT_S = 10.0
"""A worker that exits sooner than this after its start counts as failing to start."""
MAX_QUICK_EXITS = 5
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0)
GRACEFUL_SHUTDOWN_S = 5
"""uvicorn's bound on open connections (SSE, WebSocket) at shutdown."""
WATCHDOG_S = 0.5
HARD_EXIT_S = 8.0


class ServeError(RuntimeError):
    """The server cannot start or keep running (pt-BR message for the operator)."""


def serve(
    host: Annotated[str, typer.Option(help="Endereço de escuta.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Porta TCP.", min=1, max=65535)] = 8000,
    workers: Annotated[
        int, typer.Option(help="Processos de trabalho (cada um com seu pool de conexões).", min=1)
    ] = 1,
    log_level: Annotated[str, typer.Option(help="Nível de log do uvicorn.")] = "info",
    access_log: Annotated[
        bool, typer.Option(help="Registrar cada requisição no log (uvicorn; tokens mascarados).")
    ] = True,
) -> None:
    """Serve a API HTTP (documentação em /docs) e o console web (/); aplica as migrações."""
    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import describe_url

    settings = get_settings()
    try:
        with instance_lock(settings.data_dir, host=host, port=port):
            if workers == 1:
                sock = listening_socket(host, port, reuse_port=False)
            else:
                check_port_free(host, port)
            url = database_url(settings)  # starts the local cluster on demand, migrates to head
            base = f"http://{host}:{port}"
            typer.echo(f"Banco: {describe_url(url)}; API em {base} (docs em /docs)")
            typer.echo(f"Console web: {base}/ (entre com uma conta de `pontual users`)")
            if workers == 1:
                _serve_one(sock, url=url, log_level=log_level, access_log=access_log)
                return
            os.environ["DATABASE_URL"] = url  # the workers build their app from the environment
            serve_workers(
                host=host, port=port, workers=workers, log_level=log_level, access_log=access_log
            )
    except ServeError as exc:
        typer.echo(f"Erro: {exc}", err=True)
        raise typer.Exit(1) from None


def _lock_path(data_dir: Path, host: str, port: int) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host)
    return data_dir / "serve" / f"{safe}-{port}.lock"


@contextlib.contextmanager
def instance_lock(data_dir: Path, *, host: str, port: int) -> Iterator[Path]:
    """Hold the lock of ``host:port`` in ``data_dir`` while the block runs.

    Raises
    ------
    ServeError
        If another ``pontual serve`` holds it (its pid is named).
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: the bind test alone guards the port
        yield _lock_path(data_dir, host, port)
        return
    path = _lock_path(data_dir, host, port)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            msg = (
                f"outra instância do pontual serve (pid {holder}) já atende em {host}:{port}; "
                "pare-a ou escolha outra --port"
            )
            raise ServeError(msg) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


def listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """Return a socket bound to ``(host, port)`` and listening.

    Raises
    ------
    ServeError
        If the address cannot be bound (in use by another program, not local, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        msg = (
            f"não foi possível abrir {host}:{port} ({exc.strerror or exc}); "
            "outro programa usa a porta? escolha outra com --port"
        )
        raise ServeError(msg) from None
    return sock


def check_port_free(host: str, port: int) -> None:
    """Bind ``(host, port)`` once without ``SO_REUSEPORT`` (nobody else may be listening).

    Raises
    ------
    ServeError
        If the port is taken or cannot be bound; also where ``SO_REUSEPORT`` is missing.
    """
    if not hasattr(socket, "SO_REUSEPORT"):
        msg = "--workers acima de 1 requer SO_REUSEPORT (Linux, BSD, macOS); use --workers 1"
        raise ServeError(msg)
    listening_socket(host, port, reuse_port=False).close()


def _uvicorn_options(log_level: str, access_log: bool) -> dict[str, Any]:
    from api.redact import log_config

    return {
        "log_level": log_level,
        "access_log": access_log,
        "log_config": log_config(log_level),
        "proxy_headers": False,  # the app trusts X-Forwarded-For per PONTUAL_TRUSTED_PROXIES
        "server_header": False,  # no "server: uvicorn": the software is nobody's business
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
    }


def _serve_one(sock: socket.socket, *, url: str, log_level: str, access_log: bool) -> None:
    import gc

    import uvicorn

    from api.main import create_app
    from api.settings import get_settings

    app = create_app(database_url=url, settings=get_settings())
    gc.freeze()  # what the imports built needs no more collection passes
    config = uvicorn.Config(app, **_uvicorn_options(log_level, access_log))
    uvicorn.Server(config).run(sockets=[sock])


def serve_workers(
    *, host: str, port: int, workers: int, log_level: str, access_log: bool = True
) -> None:
    """Run ``workers`` uvicorn processes, each on its own ``SO_REUSEPORT`` socket.

    The kernel spreads new connections over the processes' sockets; with one shared socket
    (uvicorn's ``--workers``) the process that wins the ``accept`` race keeps every connection of
    a burst, and keep-alive clients then stay on it. Restarts and giving up: see the module.
    SIGINT or SIGTERM stops them all.

    Raises
    ------
    ServeError
        When a worker keeps exiting right after its start (after stopping the others).
    """
    ctx = multiprocessing.get_context("spawn")
    args = (host, port, log_level, access_log, os.getpid())

    def start() -> Any:
        proc = ctx.Process(target=_worker, args=args, daemon=True)
        proc.start()
        return proc

    now = time.monotonic()
    procs: list[Any] = [start() for _ in range(workers)]
    started = [now] * workers
    quick_exits = [0] * workers
    restart_at: list[float | None] = [None] * workers
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        while not stop.wait(0.2):
            now = time.monotonic()
            for k, proc in enumerate(procs):
                if proc is None:
                    due = restart_at[k]
                    if due is not None and now >= due:
                        procs[k], started[k], restart_at[k] = start(), now, None
                    continue
                if proc.is_alive():
                    continue
                code = proc.exitcode
                quick_exits[k] = quick_exits[k] + 1 if now - started[k] < QUICK_EXIT_S else 1
                if quick_exits[k] >= MAX_QUICK_EXITS:
                    raise ServeError(_gave_up(host, port, code, quick_exits[k]))
                delay = RESTART_DELAYS_S[min(quick_exits[k], len(RESTART_DELAYS_S)) - 1]
                typer.echo(f"worker {proc.pid} saiu ({code}); reiniciando em {delay:g} s", err=True)
                procs[k], restart_at[k] = None, now + delay
    finally:
        alive = [p for p in procs if p is not None and p.is_alive()]
        for proc in alive:
            proc.terminate()  # uvicorn shuts down gracefully on SIGTERM
        for proc in alive:
            proc.join(timeout=GRACEFUL_SHUTDOWN_S + HARD_EXIT_S)
            if proc.is_alive():
                proc.kill()


def _gave_up(host: str, port: int, code: int | None, times: int) -> str:
    if code == BIND_FAILED_EXIT:
        return (
            f"um worker não conseguiu abrir {host}:{port} {times} vezes seguidas; "
            "outro programa usa a porta? servidor encerrado"
        )
    return (
        f"um worker saiu logo após iniciar {times} vezes seguidas (código {code}); "
        "veja o log acima; servidor encerrado"
    )


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` is no longer its parent (see the module).

    Linux: ``PR_SET_PDEATHSIG`` sends SIGTERM when the parent dies; the parent may already
    be gone when this runs (a worker started just before the supervisor was killed), hence
    the check of the parent right after. A daemon thread also watches the parent every
    :data:`WATCHDOG_S`: SIGTERM to itself (uvicorn stops gracefully), then ``os._exit``
    :data:`HARD_EXIT_S` later if still alive.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCHDOG_S)
        with contextlib.suppress(OSError):
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(HARD_EXIT_S)
        os._exit(1)

    threading.Thread(target=watch, name="pontual-parent-watchdog", daemon=True).start()


def _worker(host: str, port: int, log_level: str, access_log: bool, parent_pid: int) -> None:
    """One server process: its own listening socket on (host, port), shared by SO_REUSEPORT."""
    import uvicorn

    die_with_parent(parent_pid)
    try:
        sock = listening_socket(host, port, reuse_port=True)
    except ServeError as exc:
        print(f"Erro no worker {os.getpid()}: {exc}", file=sys.stderr, flush=True)
        sys.exit(BIND_FAILED_EXIT)
    config = uvicorn.Config(
        "api.main:app_from_environment", factory=True, **_uvicorn_options(log_level, access_log)
    )
    uvicorn.Server(config).run(sockets=[sock])
