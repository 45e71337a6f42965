"""Registry readers for drivers and their links to prefixos (pure: no database).

Two CSV files (formats in docs/formatos.md):

- **drivers** — one row per driver and status period: ``driver_id`` (required), ``name``,
  ``cnh_number``, ``cnh_category``, ``cnh_valid_until``, ``ictp_valid_until`` (the driver's
  identity and current validities, equal on every row of the driver or blank on the later
  ones), and an optional CNH status period ``cnh_status`` (``regular``, ``suspensa``,
  ``cassada``), ``cnh_status_since``, ``cnh_status_until`` and ICTP (Registro de Condutor) one
  ``ictp_status``, ``ictp_status_since``, ``ictp_status_until``. Periods of the same document of
  a driver may not overlap.
- **driver links** — ``vehicle_id`` (or ``prefixo``), ``driver_id``, ``role`` (``titular`` or
  ``auxiliar``), ``valid_from`` (required), ``valid_until`` (empty: open); inclusive dates.

Every date is a registry date (:func:`fleet.dates.check_registry_date`), except that a document's
validity may lie up to :data:`fleet.dates.DOCUMENT_YEARS_AHEAD` years ahead. Errors name the file,
the row as a spreadsheet shows it (:func:`fleet.loaders.sheet_row`: the header
is row 1) and the column, in pt-BR.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from fleet._errors import FleetFileError
from fleet.dates import (
    DATE_FORMS,
    RegistryDateError,
    check_document_validity,
    check_registry_date,
    read_day,
)
from fleet.ids import check_registry_id, id_form, two_spellings
from fleet.loaders import FALSE_WORDS, TRUE_WORDS, out_of_range, read_registry_csv, sheet_row

DOCUMENT_STATUSES = ("regular", "suspensa", "cassada")
LINK_ROLES = ("titular", "auxiliar")
DRIVER_FILE_COLUMNS = (
    "driver_id", "name", "synthetic", "cnh_number", "cnh_category", "cnh_valid_until",
    "ictp_valid_until",
    "cnh_status", "cnh_status_since", "cnh_status_until",
    "ictp_status", "ictp_status_since", "ictp_status_until",
)  # fmt: skip
LINK_FILE_COLUMNS = ("vehicle_id", "driver_id", "role", "valid_from", "valid_until")
_IDENTITY = (
    "name",
    "synthetic",
    "cnh_number",
    "cnh_category",
    "cnh_valid_until",
    "ictp_valid_until",
)
_DATES = (
    "cnh_valid_until", "ictp_valid_until", "cnh_status_since", "cnh_status_until",
    "ictp_status_since", "ictp_status_until",
)  # fmt: skip
_VALIDITIES = ("cnh_valid_until", "ictp_valid_until")
CNH_CATEGORIES = ("A", "B", "C", "D", "E", "AB", "AC", "AD", "AE")
"""CNH categories accepted (``cnh_category``)."""


def _cell(raw: pd.DataFrame, i: int, column: str) -> str | None:
    if column not in raw.columns:
        return None
    value = str(raw[column].iloc[i]).strip()
    return value or None


def _date(value: str | None, *, source: str, row: int, column: str) -> dt.date | None:
    if value is None:
        return None
    try:
        day = read_day(value)
    except ValueError:
        msg = f"{source}, linha {row}, coluna {column}: era {value!r}; esperado data {DATE_FORMS}"
        raise FleetFileError(msg) from None
    try:
        if column in _VALIDITIES:
            return check_document_validity(day, name=column)
        return check_registry_date(day, name=column)
    except RegistryDateError as exc:
        msg = f"{source}, linha {row}, coluna {column}: {out_of_range(day, exc)}"
        raise FleetFileError(msg) from None


def check_cnh_category(value: str, *, name: str = "cnh_category") -> str:
    """Return a CNH category upper-cased if it is one of :data:`CNH_CATEGORIES`, else raise.

    Raises
    ------
    FleetFileError
        Naming ``name`` and the categories allowed.
    """
    category = value.strip().upper()
    if category not in CNH_CATEGORIES:
        msg = f"'{name}' era {value!r}; esperado uma de {', '.join(CNH_CATEGORIES)}"
        raise FleetFileError(msg)
    return category


def _require(raw: pd.DataFrame, columns: tuple[str, ...], *, source: str) -> None:
    missing = [c for c in columns if c not in raw.columns]
    if missing:
        msg = f"{source}: faltam as colunas {', '.join(missing)}"
        raise FleetFileError(msg)


def read_drivers(path: str | Path) -> pd.DataFrame:
    """Read a drivers file (one row per driver and status period).

    Parameters
    ----------
    path : str or pathlib.Path
        CSV file (columns :data:`DRIVER_FILE_COLUMNS`; only ``driver_id`` is required).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`DRIVER_FILE_COLUMNS`, one row per file row: text or None, dates as
        ``datetime.date`` or None, statuses lower-case; the identity columns filled on every
        row of a driver.

    Raises
    ------
    FleetFileError
        Naming the file, the data row and the column: a missing column or id, an unknown
        status or category, a bad or out-of-range date, a period ending before it starts,
        identity columns that differ between rows of a driver, overlapping periods, one id
        written two ways (:func:`fleet.ids.id_form`).
    FileNotFoundError
        If the file does not exist.
    """
    raw, source = read_registry_csv(path, what="condutores")
    _require(raw, ("driver_id",), source=source)
    unknown = [c for c in raw.columns if c not in DRIVER_FILE_COLUMNS]
    if unknown:
        msg = (
            f"{source}: coluna desconhecida '{unknown[0]}'; "
            f"esperado uma de {', '.join(DRIVER_FILE_COLUMNS)}"
        )
        raise FleetFileError(msg)
    rows: list[dict[str, object]] = []
    identity: dict[str, dict[str, object]] = {}
    spelled: dict[str, tuple[str, int]] = {}  # id_form -> the id as first written, its row
    periods: dict[tuple[str, str], list[tuple[dt.date | None, dt.date | None, int]]] = {}
    for i in range(len(raw)):
        row = sheet_row(i)
        rec: dict[str, object] = {c: _cell(raw, i, c) for c in DRIVER_FILE_COLUMNS}
        if rec["driver_id"] is None:
            msg = f"{source}, linha {row}, coluna driver_id: vazio"
            raise FleetFileError(msg)
        check_registry_id(rec["driver_id"], where=f"{source}, linha {row}, coluna driver_id:")
        first, first_row = spelled.setdefault(
            id_form(str(rec["driver_id"])), (str(rec["driver_id"]), row)
        )
        if first != rec["driver_id"]:
            spelled_twice = two_spellings(str(rec["driver_id"]), first, first_row)
            msg = f"{source}, linha {row}, coluna driver_id: {spelled_twice}"
            raise FleetFileError(msg)
        for c in _DATES:
            rec[c] = _date(rec[c], source=source, row=row, column=c)  # type: ignore[arg-type]
        flag = rec["synthetic"]
        if flag is not None:
            low = str(flag).lower()
            if low not in TRUE_WORDS | FALSE_WORDS:
                msg = (
                    f"{source}, linha {row}, coluna synthetic: era {flag!r}; "
                    "esperado sim ou não (ou true/false)"
                )
                raise FleetFileError(msg)
            rec["synthetic"] = low in TRUE_WORDS
        cat = rec["cnh_category"]
        if cat is not None:
            try:
                rec["cnh_category"] = check_cnh_category(str(cat))
            except FleetFileError:
                msg = (
                    f"{source}, linha {row}, coluna cnh_category: era {cat!r}; "
                    f"esperado uma de {', '.join(CNH_CATEGORIES)}"
                )
                raise FleetFileError(msg) from None
        did = str(rec["driver_id"])
        for doc in ("cnh", "ictp"):
            status, since, until = (rec[f"{doc}_status{s}"] for s in ("", "_since", "_until"))
            if status is None:
                if since is not None or until is not None:
                    msg = (
                        f"{source}, linha {row}, coluna {doc}_status: vazio, mas o período "
                        f"tem datas; esperado um de {', '.join(DOCUMENT_STATUSES)}"
                    )
                    raise FleetFileError(msg)
                continue
            rec[f"{doc}_status"] = status = str(status).lower()
            if status not in DOCUMENT_STATUSES:
                msg = (
                    f"{source}, linha {row}, coluna {doc}_status: era "
                    f"{raw[f'{doc}_status'].iloc[i]!r}; esperado um de "
                    f"{', '.join(DOCUMENT_STATUSES)}"
                )
                raise FleetFileError(msg)
            if since is not None and until is not None and until < since:  # type: ignore[operator]
                msg = (
                    f"{source}, linha {row}, coluna {doc}_status_until: {until} "
                    f"antes de {doc}_status_since ({since})"
                )
                raise FleetFileError(msg)
            for lo, hi, other in periods.get((did, doc), []):
                if _overlap(lo, hi, since, until):  # type: ignore[arg-type]
                    msg = (
                        f"{source}, linha {row}, coluna {doc}_status_since: o período se "
                        f"sobrepõe ao da linha {other} do condutor {did}"
                    )
                    raise FleetFileError(msg)
            periods.setdefault((did, doc), []).append((since, until, row))  # type: ignore[arg-type]
        known = identity.setdefault(did, {c: None for c in _IDENTITY} | {"row": row})
        for c in _IDENTITY:
            if rec[c] is None:
                continue
            if known[c] is None:
                known[c] = rec[c]
            elif known[c] != rec[c]:
                msg = (
                    f"{source}, linha {row}, coluna {c}: era {rec[c]!s}, diferente da linha "
                    f"{known['row']} do condutor {did} ({known[c]!s})"
                )
                raise FleetFileError(msg)
        rows.append(rec)
    for rec in rows:
        for c in _IDENTITY:
            rec[c] = identity[str(rec["driver_id"])][c]
    return pd.DataFrame(rows, columns=list(DRIVER_FILE_COLUMNS), dtype=object)


def _overlap(
    lo1: dt.date | None, hi1: dt.date | None, lo2: dt.date | None, hi2: dt.date | None
) -> bool:
    """Whether two inclusive periods (None: open end) share a day."""
    return (hi2 is None or lo1 is None or lo1 <= hi2) and (hi1 is None or lo2 is None or lo2 <= hi1)


def read_driver_links(path: str | Path) -> pd.DataFrame:
    """Read a driver ↔ prefixo links file.

    Parameters
    ----------
    path : str or pathlib.Path
        CSV file: ``vehicle_id`` (or ``prefixo``), ``driver_id``, ``role``, ``valid_from``,
        ``valid_until``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`LINK_FILE_COLUMNS`; dates as ``datetime.date`` (``valid_until`` None:
        open). The legal cap on auxiliares is not checked here (the database import refuses a
        third; the detector reports service by one beyond the cap).

    Raises
    ------
    FleetFileError
        Naming the file, the data row and the column: a missing column or value, an unknown
        role, a bad or out-of-range date, a link ending before it starts, the same driver
        linked twice to a prefixo on overlapping dates.
    FileNotFoundError
        If the file does not exist.
    """
    raw, source = read_registry_csv(path, what="vínculos de condutores")
    if "vehicle_id" not in raw.columns and "prefixo" in raw.columns:
        raw = raw.rename(columns={"prefixo": "vehicle_id"})
    _require(raw, ("vehicle_id", "driver_id", "role", "valid_from"), source=source)
    rows = []
    seen: dict[tuple[str, str], list[tuple[dt.date, dt.date | None, int]]] = {}
    for i in range(len(raw)):
        row = sheet_row(i)
        rec = {c: _cell(raw, i, c) for c in LINK_FILE_COLUMNS}
        for c in ("vehicle_id", "driver_id", "role", "valid_from"):
            if rec[c] is None:
                msg = f"{source}, linha {row}, coluna {c}: vazio"
                raise FleetFileError(msg)
        for c in ("vehicle_id", "driver_id"):
            check_registry_id(rec[c], where=f"{source}, linha {row}, coluna {c}:")
        role = str(rec["role"]).lower()
        if role not in LINK_ROLES:
            msg = (
                f"{source}, linha {row}, coluna role: era {rec['role']!r}; "
                f"esperado um de {', '.join(LINK_ROLES)}"
            )
            raise FleetFileError(msg)
        start = _date(rec["valid_from"], source=source, row=row, column="valid_from")
        end = _date(rec["valid_until"], source=source, row=row, column="valid_until")
        if start is None:  # checked non-empty above
            msg = f"{source}, linha {row}, coluna valid_from: vazio"
            raise FleetFileError(msg)
        if end is not None and end < start:
            msg = f"{source}, linha {row}, coluna valid_until: {end} antes de valid_from ({start})"
            raise FleetFileError(msg)
        key = (str(rec["vehicle_id"]), str(rec["driver_id"]))
        for lo, hi, other in seen.get(key, []):
            if _overlap(lo, hi, start, end):
                msg = (
                    f"{source}, linha {row}, coluna valid_from: o condutor {key[1]} já está "
                    f"vinculado ao prefixo {key[0]} nessas datas (linha {other})"
                )
                raise FleetFileError(msg)
        seen.setdefault(key, []).append((start, end, row))
        rows.append({**rec, "role": role, "valid_from": start, "valid_until": end})
    return pd.DataFrame(rows, columns=list(LINK_FILE_COLUMNS), dtype=object)
