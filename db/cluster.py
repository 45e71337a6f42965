"""The embedded PostGIS cluster: a private PostgreSQL server built from the system's binaries.

With no ``DATABASE_URL`` the platform runs its own server so a newcomer needs no configuration.

Layout under ``data_dir`` (the user's data directory, e.g. ``~/.local/share/pontual``)::

    data_dir/            mode 700, owned by the invoking user
      pgdata/            the cluster (PGDATA), mode 700, owned by the service user;
                         also the unix-socket directory; server log in pgdata/server.log
      db-password        password of the ``pontual`` superuser role, mode 600
      cluster.lock       serialises init/start/stop between concurrent commands

The server listens on ``127.0.0.1:<port>`` and on a unix socket in ``pgdata``; authentication is
scram-sha-256 for every connection (the password is generated at init), so other local users
cannot log in even though the port is on loopback.

Running as root. ``initdb`` and ``postgres`` refuse to run as root, so when the effective user is
root the binaries run as an unprivileged service user (the child process switches uid/gid before
exec, with no supplementary groups): the owner of an existing ``pgdata``, else the Debian
``postgres`` user, else a system user ``pontual`` created with ``useradd --system``. That user must
traverse the ancestors of ``data_dir`` (``/root`` is mode 700). The least intrusive fix is used: a
POSIX ACL entry granting *search only* (``x``) to that one user on each ancestor it cannot
traverse (what ``setfacl -m u:postgres:x /root`` does; listing and reading stay denied, and the
group's effective rights are unchanged). Only on a filesystem without ACL support does it fall back
to adding the search bit for others (``o+x``) on those directories. Nothing is ever made readable.

Library room: no settings import; the CLI passes ``data_dir``, ``port`` and ``bindir``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import re
import secrets
import shlex
import shutil
import socket
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from db._errors import (
    ClusterError,
    ClusterStartError,
    ClusterUserError,
    DatabaseUnreachableError,
    PortInUseError,
    PostgisNotFoundError,
    PostgresNotFoundError,
)
from db.engine import DRIVER, create_database, ensure_postgis, normalize_url, probe_server

DEFAULT_PORT = 54329
DATABASE = "pontual"
SUPERUSER = "pontual"
SERVICE_USER = "pontual"
HOST = "127.0.0.1"
DEBIAN_PACKAGE = "postgresql-{major}-postgis-3"
_DEFAULT_MAJOR = "15"
_REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres")
_PG_STATUS_NOT_RUNNING = 3
_MAX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux

BULK_LOAD_SETTINGS = {
    # A table created in the importing transaction (each new day of fixes) is written without
    # WAL and fsynced at commit: committed imports stay durable. Costs: no streaming
    # replication and no WAL archiving (point-in-time recovery) for the embedded cluster.
    "wal_level": "minimal",
    "max_wal_senders": "0",
    # The primary-key sort of a freshly loaded daily partition stays in memory.
    "maintenance_work_mem": "256MB",
}
"""Server settings of the embedded cluster for bulk loads of fixes (see bench/bench_copy.py)."""


@dataclass(frozen=True)
class ClusterStatus:
    """State of the embedded cluster, as plain data for the CLI."""

    pgdata: Path
    bindir: Path
    initialised: bool
    running: bool
    port: int | None  # the port it listens on when running, else the configured one
    server_version: str  # of the running server, else of the binaries
    postgis_version: str | None  # installed in the ``pontual`` database, if any
    postgis_available: str  # the version the binaries ship


def pgdata_path(data_dir: Path) -> Path:
    """Return the cluster directory (PGDATA) inside ``data_dir``.

    Parameters
    ----------
    data_dir : Path
        The platform's data directory.

    Returns
    -------
    Path
        ``data_dir / "pgdata"``.
    """
    return Path(data_dir) / "pgdata"


# --- binaries -------------------------------------------------------------------------------


def _missing_postgres(where: str) -> PostgresNotFoundError:
    package = DEBIAN_PACKAGE.format(major=_DEFAULT_MAJOR)
    msg = (
        f"PostgreSQL não encontrado ({where}). Instale o pacote Debian {package} "
        f"(sudo apt-get install {package}), aponte PONTUAL_PG_BINDIR para o diretório bin do "
        "PostgreSQL ou defina DATABASE_URL para usar um servidor já existente"
    )
    return PostgresNotFoundError(msg)


def _has_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in _REQUIRED_BINARIES)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name)) or (0,)


def find_bindir(*, pg_bindir: Path | None = None) -> Path:
    """Locate the PostgreSQL server binaries.

    Parameters
    ----------
    pg_bindir : Path, optional
        Explicit directory (``PONTUAL_PG_BINDIR``); used alone when given.

    Returns
    -------
    Path
        A directory holding ``initdb``, ``pg_ctl`` and ``postgres``: ``pg_bindir``, else the
        highest ``/usr/lib/postgresql/*/bin`` with ``initdb``, else ``pg_config --bindir``.

    Raises
    ------
    PostgresNotFoundError
        If no such directory is found; the message names the Debian package.
    """
    if pg_bindir is not None:
        bindir = Path(pg_bindir)
        if not _has_binaries(bindir):
            missing = [n for n in _REQUIRED_BINARIES if not os.access(bindir / n, os.X_OK)]
            raise _missing_postgres(f"faltam {', '.join(missing)} em {bindir}")
        return bindir
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    for bindir in candidates:
        if _has_binaries(bindir):
            return bindir
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if out and _has_binaries(Path(out)):
            return Path(out)
    raise _missing_postgres("nem em /usr/lib/postgresql/*/bin nem via pg_config")


def _binary_version(bindir: Path) -> str:
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    # "postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)" -> "15.8 (Debian 15.8-0+deb12u1)"
    version = out.split(")", 1)[1].strip() if ")" in out else out
    if not version:
        raise _missing_postgres(f"{bindir / 'postgres'} não responde a --version")
    return version


def _major(version: str) -> str:
    match = re.match(r"\d+", version)
    return match.group(0) if match else _DEFAULT_MAJOR


def _sharedir(bindir: Path, major: str) -> Path | None:
    candidates: list[Path] = []
    pg_config = bindir / "pg_config"
    if os.access(pg_config, os.X_OK):
        out = subprocess.run(
            [str(pg_config), "--sharedir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if out:
            candidates.append(Path(out))
    prefix = bindir.parent
    candidates += [
        Path("/usr/share/postgresql") / major,  # Debian layout
        prefix / "share" / "postgresql",
        prefix / "share",
    ]
    for candidate in candidates:
        if (candidate / "extension" / "plpgsql.control").is_file():
            return candidate
    return None


def postgis_available(*, bindir: Path) -> str:
    """Return the PostGIS version the PostgreSQL at ``bindir`` can install.

    Parameters
    ----------
    bindir : Path
        PostgreSQL binaries directory.

    Returns
    -------
    str
        ``default_version`` of ``postgis.control``, e.g. ``"3.3.2"``.

    Raises
    ------
    PostgisNotFoundError
        If ``extension/postgis.control`` is not in the server's share directory.
    """
    major = _major(_binary_version(bindir))
    sharedir = _sharedir(bindir, major)
    control = sharedir / "extension" / "postgis.control" if sharedir else None
    if control is None or not control.is_file():
        package = DEBIAN_PACKAGE.format(major=major)
        where = control if control is not None else f"share de {bindir}"
        msg = (
            f"PostGIS não está instalado para o PostgreSQL {major} ({where} não existe). "
            f"Instale o pacote Debian {package} (sudo apt-get install {package}) "
            "ou defina DATABASE_URL para usar um servidor com PostGIS"
        )
        raise PostgisNotFoundError(msg)
    match = re.search(r"default_version\s*=\s*'([^']+)'", control.read_text(encoding="utf-8"))
    return match.group(1) if match else "?"


# --- the unprivileged service user -------------------------------------------------------------


def _service_user(pgdata: Path) -> pwd.struct_passwd | None:
    """Return the user the server runs as, or None to run as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    with contextlib.suppress(FileNotFoundError):
        owner = pgdata.stat().st_uid
        if owner != 0:
            with contextlib.suppress(KeyError):
                return pwd.getpwuid(owner)
    for name in ("postgres", SERVICE_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    nologin = next(
        (s for s in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false") if Path(s).exists()),
        "/bin/false",
    )
    command = ["useradd", "--system", "--user-group", "--no-create-home"]
    command += ["--home-dir", "/nonexistent", "--shell", nologin, SERVICE_USER]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        done = None
    if done is None or done.returncode != 0:
        detail = done.stderr.strip() if done is not None else "useradd não encontrado"
        msg = (
            "executando como root, o PostgreSQL precisa de um usuário sem privilégios; não há "
            f"usuário 'postgres' e não foi possível criar '{SERVICE_USER}' ({detail})"
        )
        raise ClusterUserError(msg)
    return pwd.getpwnam(SERVICE_USER)


_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = (
    0x01,
    0x02,
    0x04,
    0x08,
    0x10,
    0x20,
)
_ACL_UNDEFINED_ID = 0xFFFFFFFF
_ACL_EXECUTE = 0x01


def _can_traverse(path: Path, user: pwd.struct_passwd) -> bool:
    st = path.stat()
    if st.st_uid == user.pw_uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in os.getgrouplist(user.pw_name, user.pw_gid):
        return bool(st.st_mode & stat.S_IXGRP)
    if st.st_mode & stat.S_IXOTH:
        return True
    # A named ACL entry may already grant it (the mode's group bits show the mask then).
    with contextlib.suppress(OSError):
        raw = os.getxattr(path, _ACL_XATTR)
        entries = struct.iter_unpack("<HHI", raw[4:])
        return any(
            tag == _ACL_USER and ident == user.pw_uid and perm & _ACL_EXECUTE
            for tag, perm, ident in entries
        ) and bool(st.st_mode & stat.S_IXGRP)
    return False


def _grant_traverse_acl(path: Path, uid: int) -> None:
    mode = path.stat().st_mode
    try:
        raw = os.getxattr(path, _ACL_XATTR)
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
        raw = b""
    entries: dict[tuple[int, int], int] = {}
    if raw:
        for tag, perm, ident in struct.iter_unpack("<HHI", raw[4:]):
            entries[(tag, ident)] = perm
    else:
        entries[(_ACL_USER_OBJ, _ACL_UNDEFINED_ID)] = (mode >> 6) & 7
        entries[(_ACL_GROUP_OBJ, _ACL_UNDEFINED_ID)] = (mode >> 3) & 7
        entries[(_ACL_OTHER, _ACL_UNDEFINED_ID)] = mode & 7
    entries[(_ACL_USER, uid)] = entries.get((_ACL_USER, uid), 0) | _ACL_EXECUTE
    group_class = 0
    for (tag, _), perm in entries.items():
        if tag in (_ACL_GROUP_OBJ, _ACL_USER, _ACL_GROUP):
            group_class |= perm
    old_mask = entries.get((_ACL_MASK, _ACL_UNDEFINED_ID))
    # Without a mask the group bits were exact: the mask is their union, granting nothing new.
    mask = group_class if old_mask is None else old_mask | _ACL_EXECUTE
    entries[(_ACL_MASK, _ACL_UNDEFINED_ID)] = mask
    packed = struct.pack("<I", _ACL_VERSION) + b"".join(
        struct.pack("<HHI", tag, perm, ident) for (tag, ident), perm in sorted(entries.items())
    )
    os.setxattr(path, _ACL_XATTR, packed)


def _grant_traverse(path: Path, user: pwd.struct_passwd) -> None:
    """Let ``user`` traverse ``path`` and its ancestors (search only; see the module docstring)."""
    for directory in [path, *path.parents]:
        if _can_traverse(directory, user):
            continue
        try:
            _grant_traverse_acl(directory, user.pw_uid)
        except OSError as exc:
            if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            directory.chmod(directory.stat().st_mode & 0o7777 | stat.S_IXOTH)


def _prepare_data_dir(data_dir: Path, user: pwd.struct_passwd | None) -> None:
    if not data_dir.exists():
        data_dir.mkdir(parents=True, mode=0o700)
    if user is not None:
        _grant_traverse(data_dir.resolve(), user)


# --- running the binaries ----------------------------------------------------------------------


def _run(
    command: Sequence[str | Path],
    *,
    user: pwd.struct_passwd | None,
    timeout_s: float | None = 120,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    kwargs: dict[str, object] = {}
    if user is not None:
        env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name)
        kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [str(part) for part in command],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        timeout=timeout_s,
        **kwargs,
    )


def _password_file(data_dir: Path) -> Path:
    return Path(data_dir) / "db-password"


def _read_password(data_dir: Path) -> str:
    path = _password_file(data_dir)
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        msg = (
            f"o arquivo de senha do banco local ({path}) não existe; o cluster em "
            f"{pgdata_path(data_dir)} não foi criado pelo pontual ou a senha foi apagada"
        )
        raise ClusterError(msg) from None


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when the file existed with looser rights
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


@contextlib.contextmanager
def _cluster_lock(data_dir: Path) -> Iterator[None]:
    with (Path(data_dir) / "cluster.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _initdb_locale() -> list[str]:
    # C.UTF-8 gives Unicode-aware case folding; macOS and some others lack it.
    return ["--locale=C.UTF-8"] if sys.platform.startswith("linux") else ["--no-locale"]


def init_cluster(*, data_dir: Path, bindir: Path | None = None, durable: bool = True) -> bool:
    """Create the cluster under ``data_dir`` unless it exists.

    Parameters
    ----------
    data_dir : Path
        The platform's data directory; the cluster goes to ``data_dir/pgdata``.
    bindir : Path, optional
        PostgreSQL binaries; found with :func:`find_bindir` when omitted.
    durable : bool
        Sync files to disk at init (False for throw-away test clusters).

    Returns
    -------
    bool
        True if a cluster was created, False if it already existed.

    Raises
    ------
    PostgresNotFoundError, PostgisNotFoundError
        If the binaries or PostGIS are missing.
    ClusterError
        If ``initdb`` fails or ``pgdata`` holds something else.
    """
    data_dir = Path(data_dir)
    bindir = find_bindir(pg_bindir=bindir)
    postgis_available(bindir=bindir)
    pgdata = pgdata_path(data_dir)
    user = _service_user(pgdata)
    _prepare_data_dir(data_dir, user)
    if (pgdata / "PG_VERSION").is_file():
        return False
    if pgdata.exists() and any(pgdata.iterdir()):
        msg = f"{pgdata} existe, não está vazio e não é um cluster PostgreSQL; mova-o ou apague-o"
        raise ClusterError(msg)
    pgdata.mkdir(mode=0o700, exist_ok=True)
    password = secrets.token_urlsafe(24)
    _write_private(_password_file(data_dir), password)
    # initdb reads the password from a file the service user can read; removed right after.
    pwfile = data_dir / f".initdb-pw-{secrets.token_hex(4)}"
    _write_private(pwfile, password)
    if user is not None:
        os.chown(pgdata, user.pw_uid, user.pw_gid)
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    command: list[str | Path] = [bindir / "initdb", "-D", pgdata, "-U", SUPERUSER]
    command += [f"--pwfile={pwfile}", "-E", "UTF8", *_initdb_locale()]
    command += ["--auth-local=scram-sha-256", "--auth-host=scram-sha-256"]
    if not durable:
        command.append("--no-sync")
    try:
        done = _run(command, user=user)
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        shutil.rmtree(pgdata, ignore_errors=True)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        msg = f"initdb falhou em {pgdata}: {lines[-1] if lines else done.returncode}"
        raise ClusterError(msg)
    return True


def _running_port(pgdata: Path) -> int | None:
    # postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
    try:
        lines = (pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        return int(lines[3])
    except (OSError, IndexError, ValueError):
        return None


def _is_running(pgdata: Path, bindir: Path, user: pwd.struct_passwd | None) -> bool:
    if not (pgdata / "PG_VERSION").is_file():
        return False
    done = _run([bindir / "pg_ctl", "status", "-D", pgdata], user=user, timeout_s=30)
    if done.returncode == _PG_STATUS_NOT_RUNNING:
        return False
    if done.returncode != 0:  # e.g. 4: the service user cannot reach a pgdata that exists
        msg = f"pg_ctl status falhou em {pgdata}: {done.stderr.strip() or done.stdout.strip()}"
        raise ClusterError(msg)
    return True


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Like the server: ignore TIME_WAIT leftovers, conflict with any live bind or listener.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _check_socket_path(pgdata: Path, port: int) -> None:
    socket_path = pgdata / f".s.PGSQL.{port}"
    if len(os.fsencode(socket_path)) > _MAX_SOCKET_PATH:
        msg = (
            f"o caminho do socket do banco local ({socket_path}) passa de {_MAX_SOCKET_PATH} "
            "bytes, o limite do sistema; use um PONTUAL_DATA_DIR mais curto"
        )
        raise ClusterStartError(msg)


def _port_in_use(port: int) -> PortInUseError:
    msg = (
        f"a porta {port} em {HOST} já está em uso por outro programa; o banco local não pode "
        f"usá-la. Escolha outra porta com PONTUAL_DB_PORT (por exemplo PONTUAL_DB_PORT={port + 1})"
    )
    return PortInUseError(msg)


_LOG_PREFIX = re.compile(r"^\S+ \S+ \S+ \[\d+\] ")  # "2024-01-01 10:00:00.000 UTC [123] "
_ROUTINE_LOG = ("starting PostgreSQL", "listening on", "database system is shut down")


def _log_problem(log_text: str) -> str | None:
    """Return the relevant line(s) of a failed start: the first FATAL/PANIC and its cause."""
    lines = [_LOG_PREFIX.sub("", line.strip()) for line in log_text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith(("FATAL", "PANIC")):
            cause = lines[index - 1] if index else ""
            if cause.startswith(("LOG", "WARNING", "ERROR")) and not any(
                routine in cause for routine in _ROUTINE_LOG
            ):
                return f"{cause} / {line}"
            return line
    return lines[-1] if lines else None


def start_cluster(
    *,
    data_dir: Path,
    port: int = DEFAULT_PORT,
    bindir: Path | None = None,
    durable: bool = True,
    timeout_s: int = 60,
) -> int:
    """Start the initialised cluster under ``data_dir`` unless it is running.

    Parameters
    ----------
    data_dir : Path
        The platform's data directory.
    port : int
        TCP port on 127.0.0.1.
    bindir : Path, optional
        PostgreSQL binaries; found with :func:`find_bindir` when omitted.
    durable : bool
        Keep fsync on (False for throw-away test clusters: faster, unsafe on power loss).
    timeout_s : int
        Seconds to wait for the server to accept connections.

    Returns
    -------
    int
        The port the server listens on (the running one's if it was already up).

    Raises
    ------
    PortInUseError
        If another program holds ``port``.
    ClusterStartError
        If the server fails to start; the message quotes the server log.
    """
    data_dir = Path(data_dir)
    bindir = find_bindir(pg_bindir=bindir)
    pgdata = pgdata_path(data_dir)
    if not (pgdata / "PG_VERSION").is_file():
        msg = f"o banco local em {pgdata} não está inicializado; rode: pontual db start"
        raise ClusterError(msg)
    user = _service_user(pgdata)
    _prepare_data_dir(data_dir, user)
    if _is_running(pgdata, bindir, user):
        return _running_port(pgdata) or port
    if not _port_is_free(port):
        raise _port_in_use(port)
    _check_socket_path(pgdata, port)
    log = pgdata / "server.log"
    log_offset = log.stat().st_size if log.exists() else 0
    settings = {"listen_addresses": HOST, "unix_socket_directories": str(pgdata)}
    settings |= BULK_LOAD_SETTINGS
    if not durable:
        settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
    options = [f"-p {port}"] + [f"-c {key}={shlex.quote(v)}" for key, v in settings.items()]
    command: list[str | Path] = [bindir / "pg_ctl", "start", "-D", pgdata, "-l", log]
    command += ["-w", "-t", str(timeout_s), "-o", " ".join(options)]
    done = _run(command, user=user, timeout_s=timeout_s + 30)
    if done.returncode == 0:
        return port
    try:
        with log.open(encoding="utf-8", errors="replace") as handle:
            handle.seek(log_offset)
            log_text = handle.read()
    except OSError:
        log_text = ""
    if "Address already in use" in log_text or "could not bind" in log_text:
        raise _port_in_use(port)
    problem = _log_problem(log_text) or done.stderr.strip() or done.stdout.strip()
    msg = f"o PostgreSQL local não iniciou: {problem} (log completo em {log})"
    raise ClusterStartError(msg)


def stop_cluster(*, data_dir: Path, bindir: Path | None = None, timeout_s: int = 60) -> bool:
    """Stop the cluster under ``data_dir`` (fast shutdown: open sessions are rolled back).

    Parameters
    ----------
    data_dir : Path
        The platform's data directory.
    bindir : Path, optional
        PostgreSQL binaries; found with :func:`find_bindir` when omitted.
    timeout_s : int
        Seconds to wait for the shutdown.

    Returns
    -------
    bool
        True if it was running and stopped, False if it was not running.
    """
    data_dir = Path(data_dir)
    bindir = find_bindir(pg_bindir=bindir)
    pgdata = pgdata_path(data_dir)
    user = _service_user(pgdata)
    if not (pgdata / "PG_VERSION").is_file():
        return False
    _prepare_data_dir(data_dir, user)  # traversal rights may have been taken away since start
    if not _is_running(pgdata, bindir, user):
        return False
    command: list[str | Path] = [bindir / "pg_ctl", "stop", "-D", pgdata, "-m", "fast", "-w"]
    command += ["-t", str(timeout_s)]
    done = _run(command, user=user, timeout_s=timeout_s + 30)
    if done.returncode != 0:
        msg = f"não foi possível parar o PostgreSQL local: {done.stderr.strip() or done.stdout}"
        raise ClusterError(msg)
    return True


def cluster_url(*, data_dir: Path, port: int, database: str = DATABASE) -> str:
    """Return the SQLAlchemy URL of ``database`` on the embedded cluster.

    Parameters
    ----------
    data_dir : Path
        The platform's data directory (holds the generated password).
    port : int
        Port the cluster listens on.
    database : str
        Database name.

    Returns
    -------
    str
        ``postgresql+psycopg://pontual:<senha>@127.0.0.1:<port>/<database>``.
    """
    password = _read_password(Path(data_dir))  # token_urlsafe: no URL escaping needed
    return f"{DRIVER}://{SUPERUSER}:{password}@{HOST}:{port}/{database}"


def cluster_status(
    *, data_dir: Path, port: int = DEFAULT_PORT, bindir: Path | None = None
) -> ClusterStatus:
    """Describe the embedded cluster; works when it was never initialised.

    Parameters
    ----------
    data_dir : Path
        The platform's data directory.
    port : int
        Configured port, reported when the server is not running.
    bindir : Path, optional
        PostgreSQL binaries; found with :func:`find_bindir` when omitted.

    Returns
    -------
    ClusterStatus
        Plain data: initialised, running, port, versions, where the data lives.
    """
    data_dir = Path(data_dir)
    bindir = find_bindir(pg_bindir=bindir)
    available = postgis_available(bindir=bindir)
    pgdata = pgdata_path(data_dir)
    initialised = (pgdata / "PG_VERSION").is_file()
    running = False
    if initialised:
        user = _service_user(pgdata)
        _prepare_data_dir(data_dir, user)
        running = _is_running(pgdata, bindir, user)
    server_version = _binary_version(bindir)
    postgis_version = None
    if running:
        port = _running_port(pgdata) or port
        url = cluster_url(data_dir=data_dir, port=port, database="postgres")
        # The database may not exist yet or the password file be gone: keep the defaults.
        with contextlib.suppress(ClusterError, DatabaseUnreachableError):
            server_version = probe_server(url).server_version
            postgis_version = probe_server(
                cluster_url(data_dir=data_dir, port=port, database=DATABASE)
            ).postgis_version
    return ClusterStatus(
        pgdata=pgdata,
        bindir=bindir,
        initialised=initialised,
        running=running,
        port=port,
        server_version=server_version,
        postgis_version=postgis_version,
        postgis_available=available,
    )


def ensure_database(
    *,
    database_url: str | None = None,
    data_dir: Path | None = None,
    port: int = DEFAULT_PORT,
    bindir: Path | None = None,
    database: str = DATABASE,
    migrate: bool = True,
    durable: bool = True,
) -> str:
    """Make the platform's database ready and return its SQLAlchemy URL.

    With ``database_url`` that server is used: it must answer, PostGIS is created if missing.
    Without it the embedded cluster under ``data_dir`` is initialised if needed, started if
    stopped, and ``database`` is created with PostGIS. Then migrations run to head.

    Parameters
    ----------
    database_url : str, optional
        An external server (``DATABASE_URL``).
    data_dir : Path, optional
        The platform's data directory; required without ``database_url``.
    port : int
        Port of the embedded cluster.
    bindir : Path, optional
        PostgreSQL binaries of the embedded cluster.
    database : str
        Database of the embedded cluster.
    migrate : bool
        Run the Alembic migrations to head.
    durable : bool
        See :func:`start_cluster`.

    Returns
    -------
    str
        A ``postgresql+psycopg://`` URL.

    Raises
    ------
    DatabaseUnreachableError
        If ``database_url`` does not answer.
    ClusterError
        If the embedded cluster cannot be set up (missing binaries, PostGIS, port in use...).
    """
    if database_url:
        url = normalize_url(database_url)
        ensure_postgis(url)
        if migrate:
            _upgrade(url)
        return url
    if data_dir is None:
        msg = "data_dir is required when database_url is not given"
        raise ValueError(msg)
    data_dir = Path(data_dir)
    if not data_dir.exists():
        data_dir.mkdir(parents=True, mode=0o700)
    with _cluster_lock(data_dir):
        bindir = find_bindir(pg_bindir=bindir)
        if not (pgdata_path(data_dir) / "PG_VERSION").is_file():  # fail before creating anything
            if not _port_is_free(port):
                raise _port_in_use(port)
            _check_socket_path(pgdata_path(data_dir), port)
        init_cluster(data_dir=data_dir, bindir=bindir, durable=durable)
        running_port = start_cluster(data_dir=data_dir, port=port, bindir=bindir, durable=durable)
        url = cluster_url(data_dir=data_dir, port=running_port, database=database)
        create_database(url)
        if migrate:
            _upgrade(url)
    return url


_REVISION_RE = re.compile(r"^(down_)?revision\b[^=]*=\s*['\"]?([\w]+)", re.MULTILINE)


def bundled_head() -> str | None:
    """Return the newest bundled migration, read from the scripts without importing Alembic."""
    versions = Path(__file__).parent / "migrations" / "versions"
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in versions.glob("[0-9]*.py"):
        for down, rev in _REVISION_RE.findall(script.read_text(encoding="utf-8")):
            (parents if down else revisions).add(rev)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _upgrade(url: str) -> None:
    """Migrate to head; a database already at head costs one query (no Alembic import)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    head = bundled_head()
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        current = None  # never migrated
    finally:
        engine.dispose()
    if head is not None and current == head:
        return
    from db.migrate import upgrade  # owned by the migrations work; imported late

    upgrade(url)
