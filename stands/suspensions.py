"""Stand suspensions file reader (pure: no database).

One row per decision of the EPTC keeping a prefixo or a driver from a stand (Porto Alegre
decree, art. 45 § único), or closing the whole stand: ``stand_id``, ``vehicle_id`` (or
``prefixo``) and ``driver_id``, ``starts_on`` and ``ends_on`` (inclusive local dates,
``AAAA-MM-DD``; ``ends_on`` empty only for ``barred`` and ``closed``), ``kind``
(``suspension``: the 20-day "suspensão das atividades no ponto fixo", I; ``barred``:
"impossibilidade de utilizar a área do ponto fixo", II a; ``closed``: "interdição do ponto",
the municipality closing the stand for road works or an event), optional ``reason`` and
``process_ref``. A ``suspension`` or ``barred`` row names exactly one of ``vehicle_id`` and
``driver_id``; a ``closed`` row names neither (it is no sanction on anyone: its licensees
cannot be present, POA decree art. 49). The registry records what was decided: a
``suspension`` whose dates do not span 20 days is kept as given (its length is reported, never
corrected). Every bad row is named (file, row, column) in one error; nothing is returned
half-read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from fleet.loaders import sheet_row
from stands._errors import StandSuspensionFileError
from stands._rows import cell, day_cell, errors_message, read_table

CLOSED = "closed"
"""Kind of a stand closed by the municipality ("interdição do ponto"): no vehicle nor driver."""
SUSPENSION_KINDS = ("suspension", "barred", CLOSED)
OPEN_ENDED_KINDS = ("barred", CLOSED)
"""Kinds whose ``ends_on`` may be empty (in force until further notice)."""
SUSPENSION_FILE_COLUMNS = (
    "stand_id", "vehicle_id", "driver_id", "starts_on", "ends_on", "kind", "reason",
    "process_ref",
)  # fmt: skip
SUSPENSION_DAYS = 20
"""Art. 45 § único I: "pelo prazo de 20 (vinte) dias corridos"."""
_ALIASES = {"prefixo": "vehicle_id"}


def check_suspension(
    *,
    vehicle_id: str | None,
    driver_id: str | None,
    starts_on: dt.date | None,
    ends_on: dt.date | None,
    kind: str | None,
) -> list[str]:
    """Return what is wrong with one suspension (pt-BR, one item per problem; empty: valid).

    The one rule of the file reader and of the API: ``kind`` one of :data:`SUSPENSION_KINDS`;
    a ``closed`` stand names neither ``vehicle_id`` nor ``driver_id``, any other kind exactly
    one; ``starts_on`` given; ``ends_on`` not before it; a ``suspension`` has an end (only
    ``barred`` and ``closed`` are open-ended).
    """
    problems = []
    if kind == CLOSED:
        given = (("vehicle_id", vehicle_id), ("driver_id", driver_id))
        if named := "/".join(f"'{c}'" for c, v in given if v is not None):
            problems.append(
                f"{named}: a interdição do ponto ('closed') vale para o ponto "
                "inteiro; deixe vehicle_id (prefixo) e driver_id vazios"
            )
    elif (vehicle_id is None) == (driver_id is None):
        problems.append(
            "'vehicle_id'/'driver_id': informe exatamente um (o prefixo suspenso ou o condutor)"
        )
    if kind not in SUSPENSION_KINDS:
        problems.append(f"'kind': era {kind!r}; esperado um de {', '.join(SUSPENSION_KINDS)}")
    if starts_on is None:
        problems.append("'starts_on': vazio; esperado data AAAA-MM-DD")
    if starts_on is not None and ends_on is not None and ends_on < starts_on:
        problems.append(f"'ends_on': {ends_on.isoformat()} antes de starts_on ({starts_on})")
    if kind == "suspension" and ends_on is None:
        open_ended = " e ".join(f"'{k}'" for k in OPEN_ENDED_KINDS)
        problems.append(f"'ends_on': vazio; só {open_ended} podem ficar em aberto")
    return problems


def read_stand_suspensions(path: str | Path) -> pd.DataFrame:
    """Read a stand-suspensions file.

    Parameters
    ----------
    path : str or pathlib.Path
        CSV (columns :data:`SUSPENSION_FILE_COLUMNS`; ``prefixo`` is read as ``vehicle_id``;
        a file of ``closed`` rows only may omit both subject columns).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`SUSPENSION_FILE_COLUMNS` plus ``days`` (the period's length, None when
        open), text or None, dates as ``datetime.date`` or None.

    Raises
    ------
    StandSuspensionFileError
        Naming the file and every bad row and column (up to 20, then how many more): a missing
        or unknown column, a bad or out-of-range date, an end before the start, both or neither
        of prefixo and driver, an unknown kind, a ``suspension`` without an end, a repeated
        row.
    FileNotFoundError
        If the file does not exist.
    """
    raw, source = read_table(
        path,
        what="suspensões de ponto",
        columns=SUSPENSION_FILE_COLUMNS,
        aliases=_ALIASES,
        error=StandSuspensionFileError,
    )
    missing = [c for c in ("stand_id", "starts_on", "kind") if c not in raw.columns]
    closures_only = (
        not missing and len(raw) > 0 and raw["kind"].str.strip().str.lower().eq(CLOSED).all()
    )
    no_subject = "vehicle_id" not in raw.columns and "driver_id" not in raw.columns
    if missing or (no_subject and not closures_only):
        need = missing or ["vehicle_id ou driver_id"]
        msg = f"{source}: faltam as colunas {', '.join(need)}"
        raise StandSuspensionFileError(msg)
    errors: list[str] = []
    rows: list[dict[str, object]] = []
    seen: dict[tuple[object, ...], int] = {}
    for i in range(len(raw)):
        where = f"{source}, linha {sheet_row(i)}"
        rec: dict[str, object] = {c: cell(raw, i, c) for c in SUSPENSION_FILE_COLUMNS}
        if rec["stand_id"] is None:
            errors.append(f"{where}, coluna 'stand_id': vazio")
        starts_raw, ends_raw = cell(raw, i, "starts_on"), cell(raw, i, "ends_on")
        starts = day_cell(starts_raw, column="starts_on", errors=errors, where=where)
        ends = day_cell(ends_raw, column="ends_on", errors=errors, where=where)
        kind = rec["kind"]
        rec["kind"] = kind = None if kind is None else str(kind).lower()
        for problem in check_suspension(
            vehicle_id=rec["vehicle_id"],  # type: ignore[arg-type]
            driver_id=rec["driver_id"],  # type: ignore[arg-type]
            starts_on=starts,
            ends_on=ends,
            kind=kind,
        ):
            unreadable = (
                (starts_raw is not None and starts is None, "'starts_on'"),
                (ends_raw is not None and ends is None, "'ends_on'"),
            )
            if not any(bad and problem.startswith(col) for bad, col in unreadable):
                errors.append(f"{where}, coluna {problem}")
        rec["starts_on"], rec["ends_on"] = starts, ends
        rec["days"] = None if starts is None or ends is None else (ends - starts).days + 1
        key = (rec["stand_id"], rec["vehicle_id"], rec["driver_id"], kind, starts)
        if key in seen:
            errors.append(f"{where}: repete a linha {seen[key]} (ponto, sujeito, tipo e início)")
        seen.setdefault(key, sheet_row(i))
        rows.append(rec)
    if errors:
        raise StandSuspensionFileError(errors_message(source, errors))
    return pd.DataFrame(rows, columns=[*SUSPENSION_FILE_COLUMNS, "days"], dtype=object)
