"""Parking licences (licenças de estacionamento) in memory: who may park at which stand, when.

A licence frame has one row per (vehicle, stand) licence:

``vehicle_id`` str, ``stand_id`` str, ``valid_from`` and ``valid_until`` local calendar dates
(naive ``datetime64[ns]`` at midnight; both inclusive; NaT means unbounded on that side).
The dates are calendar days in the municipality's timezone, like the fleet's
``status_since``/``status_until`` (PRODUCT.md), so an instant is compared through its local date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import numpy.typing as npt
import pandas as pd

from fleet.loaders import LICENCES_UNTOLD as UNTOLD
from fleet.loaders import sheet_row
from geo.calendar import DEFAULT_TIMEZONE
from stands._errors import (
    LicenceFileError,
    LicenceFrameError,
    MissingColumnError,
    NaiveTimestampError,
)
from stands._rows import cell, day_cell, errors_message, read_table
from stands.frames import STAND_ID

VEHICLE_ID = "vehicle_id"
STANDS = "stands"
UNPLACED = "unplaced_stands"
"""Fleet column (tuple): the stand ids a vehicle's licences name that the analysed stands lack
(:func:`mark_unplaced_licences`). Such a vehicle's licences are not known: where it boards
without a licence, the licence may be one of those under another id."""
VALID_FROM = "valid_from"
VALID_UNTIL = "valid_until"
LICENCE_COLUMNS = (VEHICLE_ID, STAND_ID, VALID_FROM, VALID_UNTIL)
PERIODS = "licence_periods"
"""Fleet column (tuple of ``(stand_id, valid_from, valid_until)``, dates or None) set by
:func:`with_licence_periods`: the vehicle's licences with their periods, read instead of
``stands`` by :func:`licence_frame_from_fleet`."""
LICENCE_FILE_COLUMNS = (VEHICLE_ID, STAND_ID, VALID_FROM, VALID_UNTIL)
_FILE_ALIASES = {"prefixo": VEHICLE_ID}


def empty_licence_frame() -> pd.DataFrame:
    """Return an empty, correctly typed licence frame.

    Returns
    -------
    pandas.DataFrame
        Columns ``LICENCE_COLUMNS``, zero rows.
    """
    return pd.DataFrame(
        {
            VEHICLE_ID: pd.Series([], dtype="str"),
            STAND_ID: pd.Series([], dtype="str"),
            VALID_FROM: pd.Series([], dtype="datetime64[ns]"),
            VALID_UNTIL: pd.Series([], dtype="datetime64[ns]"),
        }
    )


def _stand_ids(value: Any) -> list[str]:
    """Stand ids of one fleet cell: tuple/list/array, ``;``-separated str, or null."""
    if value is None:
        return []
    if isinstance(value, str):
        parts: Iterable[Any] = value.split(";")
    elif isinstance(value, Iterable):
        parts = value
    elif pd.isna(value):
        return []
    else:
        parts = [value]
    ids = (
        str(p).strip()
        for p in parts
        if p is not None and not (isinstance(p, float) and np.isnan(p))
    )
    return [i for i in ids if i]


def licence_frame_from_fleet(fleet: pd.DataFrame) -> pd.DataFrame:
    """Explode the fleet's ``stands`` column into one licence row per (vehicle, stand).

    The fleet file carries no per-licence dates, so ``valid_from``/``valid_until`` are NaT
    (valid on every day), unless a licence file gave the vehicles their periods
    (:func:`with_licence_periods`). A vehicle's administrative status (suspended, revoked,
    ...) does not remove its licences here: barred operation is a finding of its own. The
    stands of a row's :data:`UNPLACED` (:func:`mark_unplaced_licences`) are left out: a
    licence for a stand the analysis does not have can be neither used nor missed there.

    Parameters
    ----------
    fleet : pandas.DataFrame
        Fleet frame (``stands/frames.py``): ``vehicle_id`` and ``stands`` (tuple of stand ids;
        a ``;``-separated string or null is accepted too).

    Returns
    -------
    pandas.DataFrame
        Licence frame with columns ``LICENCE_COLUMNS``, duplicates removed, sorted by
        (vehicle_id, stand_id).

    Raises
    ------
    MissingColumnError
        If ``vehicle_id`` or ``stands`` is missing.
    """
    missing = [c for c in (VEHICLE_ID, STANDS) if c not in fleet.columns]
    if missing:
        msg = f"a frota não tem as colunas {', '.join(missing)}; esperado vehicle_id e stands"
        raise MissingColumnError(msg)
    n = len(fleet)
    unplaced = fleet[UNPLACED].to_numpy(dtype=object) if UNPLACED in fleet else [()] * n
    periods = fleet[PERIODS].to_numpy(dtype=object) if PERIODS in fleet else [None] * n
    rows: list[tuple[str, str, Any, Any]] = []
    for vehicle, ids, elsewhere, dated in zip(
        fleet[VEHICLE_ID].to_numpy(), fleet[STANDS].to_numpy(), unplaced, periods, strict=True
    ):
        if vehicle is None or (isinstance(vehicle, float) and np.isnan(vehicle)):
            continue
        skip = set(_stand_ids(elsewhere))
        held = dated if dated is not None else [(s, None, None) for s in _stand_ids(ids)]
        rows += [(str(vehicle), str(s), lo, hi) for s, lo, hi in held if str(s) not in skip]
    if not rows:
        return empty_licence_frame()
    out = pd.DataFrame(rows, columns=list(LICENCE_COLUMNS))
    for col in (VALID_FROM, VALID_UNTIL):
        out[col] = pd.to_datetime(out[col]).astype("datetime64[ns]")
    out = out.astype({VEHICLE_ID: "str", STAND_ID: "str"}).drop_duplicates()
    return out.sort_values([VEHICLE_ID, STAND_ID, VALID_FROM], ignore_index=True)


def check_timezone(timezone: str) -> None:
    """Raise ``LicenceFrameError`` unless ``timezone`` is a known IANA zone name.

    Parameters
    ----------
    timezone : str
        IANA zone name, e.g. ``"America/Sao_Paulo"``.

    Raises
    ------
    LicenceFrameError
        If the zone is unknown.
    """
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        msg = (
            f"fuso horário desconhecido: {timezone!r}; esperado um nome IANA como America/Sao_Paulo"
        )
        raise LicenceFrameError(msg) from exc


def _local_dates(values: pd.Series, *, name: str, timezone: str) -> pd.Series:
    """Calendar dates (naive midnight, ns) of a date column; tz-aware values go to ``timezone``."""
    try:
        parsed = pd.to_datetime(values, errors="raise")
    except (ValueError, TypeError) as exc:
        msg = f"'{name}' tem valores que não são datas ({exc})"
        raise LicenceFrameError(msg) from exc
    if isinstance(parsed.dtype, pd.DatetimeTZDtype):
        parsed = parsed.dt.tz_convert(timezone).dt.tz_localize(None)
    return parsed.dt.normalize().dt.as_unit("ns")


def validate_licences(licences: pd.DataFrame, *, timezone: str = DEFAULT_TIMEZONE) -> pd.DataFrame:
    """Check a licence frame and return a typed copy.

    Parameters
    ----------
    licences : pandas.DataFrame
        ``vehicle_id``, ``stand_id`` required; ``valid_from``/``valid_until`` optional (dates,
        strings, or tz-aware instants converted to their date in ``timezone``).
    timezone : str, default "America/Sao_Paulo"
        Zone of tz-aware validity instants.

    Returns
    -------
    pandas.DataFrame
        Columns ``LICENCE_COLUMNS`` with the module's dtypes.

    Raises
    ------
    MissingColumnError
        If ``vehicle_id`` or ``stand_id`` is missing.
    LicenceFrameError
        If validity values are not dates, ids are null, ``valid_from`` > ``valid_until``, or
        the timezone is unknown.
    """
    check_timezone(timezone)
    missing = [c for c in (VEHICLE_ID, STAND_ID) if c not in licences.columns]
    if missing:
        msg = (
            f"o quadro de licenças não tem as colunas {', '.join(missing)}; "
            f"esperado {', '.join(LICENCE_COLUMNS)}"
        )
        raise MissingColumnError(msg)
    if licences[VEHICLE_ID].isna().any() or licences[STAND_ID].isna().any():
        msg = "o quadro de licenças tem vehicle_id ou stand_id nulo"
        raise LicenceFrameError(msg)
    n = len(licences)
    out = pd.DataFrame(
        {
            VEHICLE_ID: licences[VEHICLE_ID].astype("str").to_numpy(),
            STAND_ID: licences[STAND_ID].astype("str").to_numpy(),
        }
    ).astype("str")
    for col in (VALID_FROM, VALID_UNTIL):
        if col in licences.columns:
            out[col] = _local_dates(
                licences[col].reset_index(drop=True), name=col, timezone=timezone
            )
        else:
            out[col] = pd.Series(pd.NaT, index=range(n), dtype="datetime64[ns]")
    inverted = (
        out[VALID_FROM].notna() & out[VALID_UNTIL].notna() & (out[VALID_FROM] > out[VALID_UNTIL])
    )
    if inverted.any():
        first = out[inverted].iloc[0]
        msg = (
            f"licença de {first[VEHICLE_ID]} no ponto {first[STAND_ID]} com valid_from "
            f"({first[VALID_FROM].date()}) depois de valid_until ({first[VALID_UNTIL].date()})"
        )
        raise LicenceFrameError(msg)
    return out


def is_licensed(
    licences: pd.DataFrame,
    vehicle_id: Any,
    stand_id: Any,
    at: Any,
    *,
    timezone: str = DEFAULT_TIMEZONE,
) -> npt.NDArray[np.bool_]:
    """Whether each vehicle holds a parking licence for each stand on the local date of ``at``.

    Vectorised: the three query arguments are aligned array-likes of one length (a scalar is
    broadcast). A vehicle with no licence row for the stand is not licensed.

    Parameters
    ----------
    licences : pandas.DataFrame
        Licence frame (see the module docstring and ``validate_licences``).
    vehicle_id, stand_id : array-like of str or str
        The query pairs.
    at : array-like of tz-aware timestamps, or one tz-aware timestamp
        Instants; compared through their calendar date in ``timezone``, bounds inclusive.
    timezone : str, default "America/Sao_Paulo"
        Zone in which validity dates are calendar days.

    Returns
    -------
    numpy.ndarray of bool
        One value per query.

    Raises
    ------
    NaiveTimestampError
        If ``at`` has no timezone or holds null instants.
    LicenceFrameError
        If the query arrays differ in length, the licence frame is invalid, or the timezone
        is unknown.
    MissingColumnError
        If the licence frame lacks ``vehicle_id`` or ``stand_id``.
    """
    lic = validate_licences(licences, timezone=timezone)
    vehicles = np.atleast_1d(np.asarray(vehicle_id, dtype=object))
    stands = np.atleast_1d(np.asarray(stand_id, dtype=object))
    instants = pd.DatetimeIndex([at]) if np.ndim(at) == 0 else pd.DatetimeIndex(at)
    n = max(len(vehicles), len(stands), len(instants))
    if len(vehicles) == 1:
        vehicles = np.repeat(vehicles, n)
    if len(stands) == 1:
        stands = np.repeat(stands, n)
    if len(instants) == 1:
        instants = instants.repeat(n)
    if not len(vehicles) == len(stands) == len(instants):
        msg = (
            f"consultas de licença com tamanhos diferentes: vehicle_id {len(vehicles)}, "
            f"stand_id {len(stands)}, at {len(instants)}"
        )
        raise LicenceFrameError(msg)
    if instants.tz is None:
        msg = "'at' sem fuso horário; esperados instantes com fuso (UTC)"
        raise NaiveTimestampError(msg)
    if instants.hasnans:
        msg = "'at' tem instantes nulos"
        raise NaiveTimestampError(msg)
    result = np.zeros(n, dtype=bool)
    if n == 0 or lic.empty:
        return result
    dates = instants.tz_convert(timezone).tz_localize(None).normalize().as_unit("ns")
    queries = pd.DataFrame(
        {
            VEHICLE_ID: pd.array(vehicles.astype(str), dtype="str"),
            STAND_ID: pd.array(stands.astype(str), dtype="str"),
            "_date": dates,
            "_query": np.arange(n),
        }
    )
    pairs = queries.merge(lic, on=[VEHICLE_ID, STAND_ID], how="inner")
    valid = (pairs[VALID_FROM].isna() | (pairs[VALID_FROM] <= pairs["_date"])) & (
        pairs[VALID_UNTIL].isna() | (pairs["_date"] <= pairs[VALID_UNTIL])
    )
    result[pairs.loc[valid, "_query"].to_numpy()] = True
    return result


def unknown_licences(fleet: pd.DataFrame) -> frozenset[str]:
    """Return the vehicles whose licences the fleet does not tell.

    The fleet names their stands by names not resolved to ids (``stands`` empty,
    ``stand_names`` not), by ids the analysed stands lack (:data:`UNPLACED` not empty), or does
    not say them (:data:`UNTOLD`). Where such a vehicle holds no licence the frame knows,
    whether it is licensed is not known.
    """
    n = len(fleet)

    def cells(column: str) -> Iterable[Any]:
        return fleet[column].to_numpy(dtype=object) if column in fleet.columns else [None] * n

    vehicles = fleet[VEHICLE_ID].astype("str").to_numpy(dtype=object)
    rows = zip(
        vehicles, cells(STANDS), cells("stand_names"), cells(UNPLACED), cells(UNTOLD), strict=True
    )
    return frozenset(
        str(v)
        for v, stands, names, unplaced, untold in rows
        if (not _stand_ids(stands) and _stand_ids(names))
        or _stand_ids(unplaced)
        or (isinstance(untold, bool | np.bool_) and bool(untold))
    )


def licence_status(
    licences: pd.DataFrame,
    vehicle_id: Any,
    stand_id: Any,
    at: Any,
    *,
    unknown: Collection[str] = (),
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.arrays.BooleanArray:
    """:func:`is_licensed`, with <NA> where it is False for a vehicle of ``unknown``.

    ``unknown``: vehicles whose licences are not known (:func:`unknown_licences`, or the
    registry's ``vehicles.unplaced_stands``): not licensed by the frame is not unlicensed.
    """
    status = pd.array(is_licensed(licences, vehicle_id, stand_id, at, timezone=timezone))
    if unknown:
        vehicles = pd.Series(np.atleast_1d(np.asarray(vehicle_id, dtype=object)), dtype="str")
        untold = np.broadcast_to(vehicles.isin(unknown).to_numpy(), len(status))
        status[untold & ~status.to_numpy(dtype=bool)] = pd.NA
    return status


def mark_unplaced_licences(
    fleet: pd.DataFrame, stand_ids: Iterable[Any]
) -> tuple[pd.DataFrame, dict[str, tuple[str, ...]]]:
    """Mark the licences whose stand is not among ``stand_ids`` (column :data:`UNPLACED`).

    A fleet file and a stands file that name stands differently ("P01" and "P1") would
    otherwise turn every boarding at a vehicle's own stand into one without its licence.

    Returns
    -------
    tuple
        The fleet with :data:`UNPLACED` (a copy; the input is not modified) and, per vehicle
        with any, its unplaced stand ids.
    """
    known = {str(s) for s in stand_ids}
    cells = fleet[STANDS] if STANDS in fleet.columns else pd.Series([()] * len(fleet))
    unplaced = [tuple(s for s in _stand_ids(c) if s not in known) for c in cells.to_numpy()]
    out = fleet.copy()
    out[UNPLACED] = pd.Series(unplaced, index=fleet.index, dtype="object")
    vehicles = fleet[VEHICLE_ID].astype("str").tolist()
    return out, {v: u for v, u in zip(vehicles, unplaced, strict=True) if u}


def read_licence_file(path: str | Path) -> pd.DataFrame:
    """Read a parking-licence file: every licence a prefixo held, with its period.

    Parameters
    ----------
    path : str or pathlib.Path
        CSV with :data:`LICENCE_FILE_COLUMNS` (``prefixo`` is read as ``vehicle_id``):
        ``valid_from`` and ``valid_until`` are inclusive local dates ``AAAA-MM-DD``, empty when
        unknown (before the data) or open.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`LICENCE_FILE_COLUMNS`; ids as text, dates as ``datetime.date`` or None.

    Raises
    ------
    LicenceFileError
        Naming the file and every bad row and column (up to 20, then how many more): a missing
        or unknown column, an empty id, a bad or out-of-range date, an end before the start,
        two periods of one prefixo at one stand that overlap.
    FileNotFoundError
        If the file does not exist.
    """
    raw, source = read_table(
        path,
        what="licenças",
        columns=LICENCE_FILE_COLUMNS,
        aliases=_FILE_ALIASES,
        error=LicenceFileError,
    )
    if missing := [c for c in (VEHICLE_ID, STAND_ID) if c not in raw.columns]:
        msg = f"{source}: faltam as colunas {', '.join(missing)}"
        raise LicenceFileError(msg)
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    held: dict[tuple[str, str], list[tuple[dt.date, dt.date, int]]] = {}
    for i in range(len(raw)):
        where = f"{source}, linha {sheet_row(i)}"
        rec: dict[str, Any] = {c: cell(raw, i, c) for c in (VEHICLE_ID, STAND_ID)}
        for col in (VEHICLE_ID, STAND_ID):
            if rec[col] is None:
                errors.append(f"{where}, coluna '{col}': vazio")
        for col in (VALID_FROM, VALID_UNTIL):
            rec[col] = day_cell(cell(raw, i, col), column=col, errors=errors, where=where)
        lo, hi = rec[VALID_FROM], rec[VALID_UNTIL]
        if lo is not None and hi is not None and hi < lo:
            errors.append(f"{where}, coluna 'valid_until': {hi} antes de valid_from ({lo})")
        elif rec[VEHICLE_ID] is not None and rec[STAND_ID] is not None:
            span = (lo or dt.date.min, hi or dt.date.max, sheet_row(i))
            key = (rec[VEHICLE_ID], rec[STAND_ID])
            if clash := next(
                (o for o in held.get(key, []) if o[0] <= span[1] and span[0] <= o[1]), None
            ):
                errors.append(
                    f"{where}: o período sobrepõe o da linha {clash[2]} (mesmo prefixo e ponto)"
                )
            held.setdefault(key, []).append(span)
        rows.append(rec)
    if errors:
        raise LicenceFileError(errors_message(source, errors))
    return pd.DataFrame(rows, columns=list(LICENCE_FILE_COLUMNS), dtype=object)


def with_licence_periods(
    fleet: pd.DataFrame, licences: pd.DataFrame
) -> tuple[pd.DataFrame, list[str]]:
    """Give each fleet vehicle the licences of a licence file, with their periods.

    The file replaces the fleet's ``stands`` (and unresolved ``stand_names``): ``stands`` becomes
    every stand the vehicle held a licence for at any time, as in the registry, and
    :data:`PERIODS` their periods, which :func:`licence_frame_from_fleet` reads.

    Parameters
    ----------
    fleet : pandas.DataFrame
        Fleet frame (``vehicle_id``).
    licences : pandas.DataFrame
        :func:`read_licence_file`'s frame.

    Returns
    -------
    tuple
        The fleet (a copy) and the prefixos of the file that the fleet lacks, sorted (their
        licences are not read).
    """
    periods: dict[str, list[tuple[str, Any, Any]]] = {}
    for rec in licences.to_dict("records"):
        periods.setdefault(str(rec[VEHICLE_ID]), []).append(
            (str(rec[STAND_ID]), rec[VALID_FROM], rec[VALID_UNTIL])
        )
    vehicles = fleet[VEHICLE_ID].astype("str").tolist()
    out = fleet.copy()
    held = [tuple(periods.get(v, ())) for v in vehicles]
    out[STANDS] = pd.Series(
        [tuple(sorted({s for s, _, _ in h})) for h in held], index=fleet.index, dtype="object"
    )
    if "stand_names" in out.columns:
        out["stand_names"] = pd.Series([()] * len(out), index=fleet.index, dtype="object")
    out = out.drop(columns=[UNTOLD], errors="ignore")
    out[PERIODS] = pd.Series(held, index=fleet.index, dtype="object")
    return out, sorted(set(periods) - set(vehicles))


def ended_licences(licences: pd.DataFrame) -> pd.DataFrame | None:
    """Return the licences of a licence frame that ended (``valid_until`` given); None without any.

    ``unlicensed_stand_use`` names in a boarding's evidence the licence at that stand that had
    ended before the day.
    """
    ended = licences.loc[licences[VALID_UNTIL].notna()]
    return ended.reset_index(drop=True) if len(ended) else None
