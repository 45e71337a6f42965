"""Input files of the commands: one check and one error per bad file, naming the option.

A missing file, a folder, a 0-byte file, or a file its reader cannot parse ends the command
with one ``erro: <option>: …`` line (``api.cli.main``) and exit status 1, never a traceback.
Where an empty input means something (a TOML of thresholds with no table: the defaults), the
caller allows it.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from api._errors import InputFileError, is_ours

T = TypeVar("T")


def require_file(path: Path, *, flag: str, allow_empty: bool = False) -> Path:
    """Return ``path`` if it is a readable file (and not empty, unless ``allow_empty``).

    Raises
    ------
    InputFileError
        Missing, a folder, unreadable, or 0 bytes; the message names ``flag`` and the path.
    """
    if not path.exists():
        msg = f"{flag}: arquivo não encontrado: {path}"
        raise InputFileError(msg)
    if path.is_dir():
        msg = f"{flag}: {path} é uma pasta; esperado um arquivo"
        raise InputFileError(msg)
    try:
        with path.open("rb") as handle:
            first = handle.read(1)
    except OSError as exc:
        msg = f"{flag}: não foi possível abrir {path} ({exc.strerror or exc})"
        raise InputFileError(msg) from None
    if not first and not allow_empty:
        msg = f"{flag}: arquivo vazio (0 bytes): {path}"
        raise InputFileError(msg)
    return path


def read_input(path: Path, read: Callable[[Path], T], *, flag: str, allow_empty: bool = False) -> T:
    """Check ``path`` (:func:`require_file`) and read it with ``read``, naming ``flag`` on error.

    Our rooms' named errors keep their message, prefixed with the option; any other error of
    the reader (a parser's) becomes one line saying what could not be read.

    Raises
    ------
    InputFileError
        The file is bad or its reader failed.
    """
    require_file(path, flag=flag, allow_empty=allow_empty)
    try:
        return read(path)
    except InputFileError as exc:
        if str(exc).startswith(f"{flag}:"):
            raise
        msg = f"{flag}: {exc}"
        raise InputFileError(msg) from None
    except Exception as exc:
        if is_ours(exc):
            msg = f"{flag}: {exc}"
        else:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            msg = f"{flag}: não foi possível ler {path.name} ({detail})"
        raise InputFileError(msg) from None


RADIUS_FLAG = "--stand-radius-m"


def read_stands_file(path: Path, *, radius_m: float | None, flag: str = "--stands") -> Any:
    """Read a stands file of any recognised format, naming the CLI's options on error.

    Porto's CSV and Porto Alegre's GeoJSON (``stands.layers.stand_file_format``) are points
    without a radius: a missing radius names ``--stand-radius-m``. The frame's
    ``attrs["notes"]`` say which stands were left out (to be shown as warnings).

    Raises
    ------
    InputFileError
        The file is bad, or a radius is needed and ``radius_m`` is None or not a radius
        (``stands.layers.radius_ok``).
    """
    from stands._errors import MissingRadiusError
    from stands.layers import MAX_RADIUS_M, MIN_RADIUS_M, radius_ok, read_any_stands

    if radius_m is not None and not radius_ok(radius_m):
        msg = (
            f"{RADIUS_FLAG} era {radius_m!r}; esperado um número de metros de "
            f"{MIN_RADIUS_M:g} a {MAX_RADIUS_M:g} (ex.: 50)"
        )
        raise InputFileError(msg)

    def read(p: Path) -> Any:
        try:
            return read_any_stands(p, default_radius_m=radius_m)
        except MissingRadiusError as exc:
            text = str(exc).removesuffix("um raio padrão")
            msg = f"{flag}: {text}o raio em metros com {RADIUS_FLAG} (ex.: {RADIUS_FLAG} 50)"
            raise InputFileError(msg) from None

    return read_input(path, read, flag=flag)


def checked_municipality(value: str | None) -> str | None:
    """Check an IBGE code: the callback of every ``--municipality`` (one rule for all).

    Raises
    ------
    fleet._errors.UnknownMunicipalityError
        Not 7 digits, or not a municipality of the IBGE table (``erro:`` and exit status 1).
    """
    if value is None:
        return None
    from api.cli_import import CENSUS
    from fleet.municipalities import find_municipality

    return find_municipality(value, census=CENSUS).code


_OUT_REASONS = {
    errno.EACCES: "sem permissão de escrita",
    errno.EPERM: "sem permissão de escrita",
    errno.EROFS: "sistema de arquivos somente leitura",
    errno.ENOSPC: "disco cheio",
    errno.ENOENT: "o local não aceita arquivos nem pastas novos",
}


def out_reason(exc: OSError) -> str:
    """Return the pt-BR reason an output path cannot be written."""
    return _OUT_REASONS.get(exc.errno or 0) or str(exc.strerror or exc)


def check_out_folder(folder: Path, *, flag: str = "--out") -> None:
    """Create ``folder`` if missing and check that files can be written in it.

    Raises
    ------
    InputFileError
        ``folder`` is a file, lies under a file, cannot be created, or is not writable (the
        message names ``flag`` and the reason).
    """
    import tempfile

    if folder.exists() and not folder.is_dir():
        msg = f"{flag}: {folder} é um arquivo; esperado uma pasta"
        raise InputFileError(msg)
    if file := next((p for p in folder.parents if p.exists() and not p.is_dir()), None):
        msg = f"{flag}: {folder} fica dentro de {file}, que é um arquivo; esperado uma pasta"
        raise InputFileError(msg)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"{flag}: não foi possível criar a pasta {folder} ({out_reason(exc)})"
        raise InputFileError(msg) from None
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        msg = f"{flag}: não é possível gravar na pasta {folder} ({out_reason(exc)})"
        raise InputFileError(msg) from None


def check_out_file(path: Path, *, flag: str = "--out") -> None:
    """Check that ``path`` can be written as a file (its folder created if missing).

    Raises
    ------
    InputFileError
        ``path`` is a folder, an existing file not writable, or its folder cannot be created
        or written in (the message names ``flag`` and the reason).
    """
    if path.is_dir():
        msg = f"{flag}: {path} é uma pasta; esperado um arquivo"
        raise InputFileError(msg)
    if file := next((p for p in path.parents if p.exists() and not p.is_dir()), None):
        msg = f"{flag}: {path} fica dentro de {file}, que é um arquivo; esperado uma pasta"
        raise InputFileError(msg)
    check_out_folder(path.parent, flag=flag)
    if path.exists():
        try:
            with path.open("ab"):
                pass
        except OSError as exc:
            msg = f"{flag}: não é possível gravar em {path} ({out_reason(exc)})"
            raise InputFileError(msg) from None
