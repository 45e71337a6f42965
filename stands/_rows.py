"""Cell readers shared by the stands room's CSV files (suspensions, licences).

Every bad row is collected (file, row, column) and reported in one error of at most
:data:`MAX_ERRORS` lines: nothing is returned half-read.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from fleet.dates import RegistryDateError, check_registry_date

MAX_ERRORS = 20


def cell(raw: pd.DataFrame, i: int, column: str) -> str | None:
    """Return row ``i``'s stripped text in ``column``; None when empty or absent."""
    if column not in raw.columns:
        return None
    value = str(raw[column].iloc[i]).strip()
    return value or None


def day_cell(value: str | None, *, column: str, errors: list[str], where: str) -> dt.date | None:
    """Parse an ``AAAA-MM-DD`` registry date; a bad one is appended to ``errors``."""
    if value is None:
        return None
    try:
        return check_registry_date(dt.date.fromisoformat(value), name=column)
    except ValueError:
        errors.append(f"{where}, coluna '{column}': era {value!r}; esperado data AAAA-MM-DD")
    except RegistryDateError as exc:
        errors.append(f"{where}, coluna '{column}': {exc}")
    return None


def errors_message(source: str, errors: list[str]) -> str:
    """Return the message naming a file's bad rows (the first :data:`MAX_ERRORS`, then a count)."""
    more = len(errors) - MAX_ERRORS
    shown = errors[:MAX_ERRORS] + ([f"… e mais {more} erros"] if more > 0 else [])
    return f"{source}: {len(errors)} erro(s); nada foi importado:\n" + "\n".join(shown)
