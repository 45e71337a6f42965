"""Cell readers shared by the stands room's CSV files (suspensions, licences).

Every bad row is collected (file, row, column) and reported in one error of at most
:data:`MAX_ERRORS` lines: nothing is returned half-read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from fleet._errors import FleetFileError
from fleet.dates import DATE_FORMS, RegistryDateError, check_registry_date, read_day
from fleet.loaders import read_registry_csv

MAX_ERRORS = 20


def read_table(
    path: str | Path,
    *,
    what: str,
    columns: Sequence[str],
    aliases: Mapping[str, str],
    error: type[Exception],
) -> tuple[pd.DataFrame, str]:
    """Read a CSV as text (header names stripped, ``aliases`` applied) and its file name.

    As the fleet's files (:func:`fleet.loaders.read_registry_csv`): UTF-8 or Windows-1252,
    separated by ``,``, ``;`` or tab.

    Raises
    ------
    FileNotFoundError
        If the file does not exist (``what``: the file's kind, pt-BR).
    error
        If it cannot be read, or a header names a column outside ``columns``.
    """
    try:
        raw, name = read_registry_csv(path, what=what)
    except FleetFileError as exc:
        raise error(str(exc)) from None
    raw.columns = [aliases.get(c, c) for c in raw.columns]
    if unknown := [c for c in raw.columns if c not in columns]:
        msg = f"{name}: coluna desconhecida '{unknown[0]}'; esperado uma de {', '.join(columns)}"
        raise error(msg)
    return raw, name


def cell(raw: pd.DataFrame, i: int, column: str) -> str | None:
    """Return row ``i``'s stripped text in ``column``; None when empty or absent."""
    if column not in raw.columns:
        return None
    value = str(raw[column].iloc[i]).strip()
    return value or None


def day_cell(value: str | None, *, column: str, errors: list[str], where: str) -> dt.date | None:
    """Parse a registry date (:func:`fleet.dates.read_day`); a bad one is added to ``errors``."""
    if value is None:
        return None
    try:
        return check_registry_date(read_day(value), name=column)
    except ValueError:
        errors.append(f"{where}, coluna '{column}': era {value!r}; esperado data {DATE_FORMS}")
    except RegistryDateError as exc:
        errors.append(f"{where}, coluna '{column}': {exc}")
    return None


def errors_message(source: str, errors: list[str]) -> str:
    """Return the message naming a file's bad rows (the first :data:`MAX_ERRORS`, then a count)."""
    more = len(errors) - MAX_ERRORS
    shown = errors[:MAX_ERRORS] + ([f"… e mais {more} erros"] if more > 0 else [])
    return f"{source}: {len(errors)} erro(s); nada foi importado:\n" + "\n".join(shown)
