"""Presence of each licensee at its licensed stand, day by day (supervisor's view; POA art. 49).

:func:`presence` gives one row per (vehicle, licensed stand, local day) of a window, for every
day on which the licence is valid (``stands/licences.py``):

operated
    The vehicle was seen that local day: a fix (pings; not one with the meter ``off``, out of
    service), a trip start or end (trips), or a stand visit's arrival or departure (any stand).
    "Days operating". A vehicle that did not operate on a day is not absent that day: not
    operating at all is inactivity, another finding.
present
    At least one *counted* visit to this stand overlaps the local day. A visit is counted when
    its ``dwell_s`` (the whole visit) is at least ``min_presence_s``, or when it ``boarded`` a
    passenger (a boarding visit is often a single fix, dwell 0). Default ``min_presence_s`` is
    60 s, the visits' own minimum dwell (``stands/visits.py``): a pass-through is not presence.
    A visit across local midnight counts on each day it overlaps. Visits may include the
    near and silent dwells of ``stands/near.py`` (a ``how`` column, kept in the evidence).
continues_previous_day
    The day's operation is the tail of the previous day's shift, across local midnight
    (:func:`continues_previous_day`): :func:`presence_summary` counts the two as one day of
    service, present if either part was.
n_visits, presence_s
    Visits to this stand overlapping the day (counted or not), and the seconds of that day
    covered by counted visits.
first_seen_*, last_seen_*
    The first and last sighting of the vehicle that day (``_at`` UTC, ``_lat``, ``_lon``,
    ``_row`` source row, ``_source``: ``ping``, ``trip_start``, ``trip_end``,
    ``visit_arrival``, ``visit_departure``): the evidence that it operated.
visits
    The day's visits to this stand, as evidence: a list of dicts ``arrived_at``,
    ``departed_at`` (ISO UTC), ``dwell_s``, ``boarded``, ``counted``, ``first_row``,
    ``last_row``.

Days are calendar days in ``timezone``; operation is observed only inside the window.
With ``suspensions`` (the registry's ``stand_suspensions``, POA art. 45 § único: a prefixo
ordered away from a stand; or the stand ``closed``, e.g. for works, for every licensee), a day
on which the prefixo's suspension at the stand is in force is not a day it could attend: its row
is left out (neither operating nor present), and :func:`suspended_days` lists those days as
evidence. A driver's suspension (``driver_id``) does not keep the prefixo away and leaves the
days in.
:func:`presence_summary` reduces the table per (vehicle, stand): ``days_licensed``,
``days_operating``, ``days_present`` and ``share = days_present / days_operating`` (NaN when the
vehicle never operated).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from stands._errors import MissingColumnError, NaiveTimestampError, ThresholdError
from stands.frames import STAND_ID
from stands.licences import VALID_FROM, VALID_UNTIL, VEHICLE_ID, check_timezone, validate_licences
from stands.suspensions import CLOSED
from tracking.arrays import epoch_ns, iso_utc_many
from tracking.frames import in_service

DEFAULT_MIN_PRESENCE_S = 60.0
DATE = "date"
OPERATED = "operated"
PRESENT = "present"
CONTINUES = "continues_previous_day"
N_VISITS = "n_visits"
PRESENCE_S = "presence_s"
VISITS = "visits"
SEEN_FIELDS = ("at", "lat", "lon", "row", "source")
FIRST_SEEN = tuple(f"first_seen_{f}" for f in SEEN_FIELDS)
LAST_SEEN = tuple(f"last_seen_{f}" for f in SEEN_FIELDS)
PRESENCE_COLUMNS = (
    VEHICLE_ID,
    STAND_ID,
    DATE,
    OPERATED,
    PRESENT,
    CONTINUES,
    N_VISITS,
    PRESENCE_S,
    *FIRST_SEEN,
    *LAST_SEEN,
    VISITS,
)
SUMMARY_COLUMNS = (VEHICLE_ID, STAND_ID, "days_licensed", "days_operating", "days_present", "share")
SHIFT_REST_S = 3 * 3600.0
"""Longest silence across local midnight that still leaves one shift running (s)."""
MAX_SHIFT_S = 24 * 3600.0
"""Longest span, first sighting to last, of a shift counted as one day of service (s)."""
SOURCES = ("ping", "trip_start", "trip_end", "visit_arrival", "visit_departure")
VISIT_REQUIRED = (VEHICLE_ID, STAND_ID, "arrived_at", "departed_at", "dwell_s")

_NS = 1_000_000_000
_UTC = pd.DatetimeTZDtype("ns", "UTC")


def presence(
    visits: pd.DataFrame,
    licences: pd.DataFrame,
    pings_or_trips: pd.DataFrame | None,
    *,
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
    min_presence_s: float = DEFAULT_MIN_PRESENCE_S,
    suspensions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Presence table: per (vehicle, licensed stand, local day), operated and present.

    Parameters
    ----------
    visits : pandas.DataFrame
        Stand visits (``stands/visits.py``): ``vehicle_id``, ``stand_id``, ``arrived_at``,
        ``departed_at`` (tz-aware), ``dwell_s``; optional ``boarded``, ``first_row``,
        ``last_row``.
    licences : pandas.DataFrame
        Licence frame (``stands/licences.py``, e.g. ``licence_frame_from_fleet(fleet)``).
    pings_or_trips : pandas.DataFrame or None
        Pings (a ``timestamp`` column; ``lat``, ``lon``, ``row`` used when present) or trips
        (``started_at``, ``ended_at``; ``pickup_lat``/``lon``, ``dropoff_lat``/``lon``,
        ``first_row`` when present). None: operation is seen through visits only.
    start, end : datetime.date
        First and last local day of the window (inclusive).
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.
    min_presence_s : float, default 60
        Shortest visit (dwell) that counts as presence, unless it boarded.
    suspensions : pandas.DataFrame, optional
        Stand suspensions (``stand_id``, ``vehicle_id``, ``starts_on``, ``ends_on``; see
        :func:`suspended_days`): the days a prefixo is suspended from its stand are left out.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`PRESENCE_COLUMNS` (``date`` naive ``datetime64[ns]`` local midnight),
        sorted by (vehicle_id, stand_id, date), RangeIndex.

    Raises
    ------
    MissingColumnError
        If visits or pings/trips lack required columns.
    NaiveTimestampError
        If instants are naive or null.
    ThresholdError
        If ``min_presence_s`` is negative or not finite, or ``start`` is after ``end``.
    LicenceFrameError
        If the licence frame or the timezone is invalid.
    """
    check_timezone(timezone)
    if not (isinstance(min_presence_s, int | float) and math.isfinite(min_presence_s)) or (
        min_presence_s < 0
    ):
        msg = f"'min_presence_s' foi {min_presence_s!r}; esperado um número finito >= 0 (segundos)"
        raise ThresholdError(msg)
    first_day, last_day = _as_day(start, "start"), _as_day(end, "end")
    if first_day > last_day:
        msg = f"'start' ({first_day}) é depois de 'end' ({last_day})"
        raise ThresholdError(msg)
    lic = validate_licences(licences, timezone=timezone)
    days = np.arange(
        np.datetime64(first_day, "D"), np.datetime64(last_day, "D") + 1, dtype="datetime64[D]"
    )
    n_days = len(days)
    bounds = day_bounds_ns(days, timezone)  # n_days + 1 instants

    # Grid: licence × day where the licence is valid.
    lic_from = lic[VALID_FROM].to_numpy(dtype="datetime64[D]")
    lic_until = lic[VALID_UNTIL].to_numpy(dtype="datetime64[D]")
    li = np.repeat(np.arange(len(lic)), n_days)
    di = np.tile(np.arange(n_days), len(lic))
    d = days[di]
    ok = (np.isnat(lic_from[li]) | (lic_from[li] <= d)) & (
        np.isnat(lic_until[li]) | (d <= lic_until[li])
    )
    if suspensions is not None and len(suspensions):
        away = suspended_days(suspensions, start=first_day, end=last_day, licences=lic)
        if len(away):
            grid = pd.MultiIndex.from_arrays(
                [
                    lic[VEHICLE_ID].astype("str").to_numpy(dtype=object)[li],
                    lic[STAND_ID].astype("str").to_numpy(dtype=object)[li],
                    d.astype("datetime64[ns]"),
                ]
            )
            gone = pd.MultiIndex.from_arrays([away[VEHICLE_ID], away[STAND_ID], away[DATE]])
            ok &= ~np.asarray(grid.isin(gone), dtype=bool)
    li, di = li[ok], di[ok]
    vehicles = pd.Index(sorted(set(lic[VEHICLE_ID].astype("str").tolist())), dtype=object)
    vcode = np.asarray(vehicles.get_indexer(pd.Index(lic[VEHICLE_ID].astype("str"))))[li]
    grid_key = vcode.astype(np.int64) * n_days + di

    seen = _sightings(visits, pings_or_trips, vehicles, bounds)
    seen_keys, first_i, last_i = seen["first_last"]
    pos = np.searchsorted(seen_keys, grid_key)
    pos_c = np.minimum(pos, max(len(seen_keys) - 1, 0))
    operated = (
        (seen_keys[pos_c] == grid_key) if len(seen_keys) else np.zeros(len(grid_key), dtype=bool)
    )

    out = pd.DataFrame(
        {
            VEHICLE_ID: pd.Series(lic[VEHICLE_ID].to_numpy(dtype=object)[li], dtype="str"),
            STAND_ID: pd.Series(lic[STAND_ID].to_numpy(dtype=object)[li], dtype="str"),
            DATE: pd.Series(days[di].astype("datetime64[ns]")),
            OPERATED: operated,
        }
    )
    for cols, idx in ((FIRST_SEEN, first_i), (LAST_SEEN, last_i)):
        take = np.where(operated, idx[pos_c] if len(idx) else 0, -1)
        for col, values in zip(cols, _seen_columns(seen, take), strict=True):
            out[col] = values

    per_day = _visit_days(visits, lic, bounds, min_presence_s)
    key = pd.MultiIndex.from_arrays([out[VEHICLE_ID], out[STAND_ID], di])
    agg = per_day.reindex(key)
    out[N_VISITS] = agg[N_VISITS].fillna(0).to_numpy(dtype=np.int64)
    out[PRESENCE_S] = agg[PRESENCE_S].fillna(0.0).to_numpy(dtype=np.float64)
    present = agg[PRESENT].astype("boolean").fillna(False).to_numpy(dtype=bool)
    out[PRESENT] = present
    out[OPERATED] = operated | present  # waiting at the stand all day is operating
    out[VISITS] = pd.Series(
        [v if isinstance(v, list) else [] for v in agg[VISITS].to_numpy(dtype=object)],
        dtype=object,
    )
    out = out.sort_values([VEHICLE_ID, STAND_ID, DATE], ignore_index=True)
    out[CONTINUES] = continues_previous_day(out)
    return out[list(PRESENCE_COLUMNS)]


SUSPENDED_COLUMNS = (VEHICLE_ID, STAND_ID, DATE, "suspension")


def suspended_days(
    suspensions: pd.DataFrame,
    *,
    start: dt.date,
    end: dt.date,
    licences: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """List the local days of ``start..end`` on which a prefixo is kept away from a stand.

    Parameters
    ----------
    suspensions : pandas.DataFrame
        Stand suspensions (``stands/suspensions.py``): ``stand_id``, ``vehicle_id``,
        ``starts_on``, ``ends_on`` (inclusive local dates; empty: open); optional ``kind``,
        ``suspension_id``, ``reason``, ``process_ref``. A row of kind ``closed`` without
        ``vehicle_id`` (the stand closed, e.g. for works) keeps away every prefixo
        ``licences`` gives at the stand; other rows without ``vehicle_id`` (a driver's) are
        ignored: they do not keep the prefixo away.
    start, end : datetime.date
        First and last local day (inclusive).
    licences : pandas.DataFrame, optional
        ``vehicle_id``, ``stand_id``: the licensees a closed stand keeps away.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`SUSPENDED_COLUMNS`, one row per (vehicle, stand, day) (the latest
        starting suspension of a day), ``suspension`` the registry row as a dict (evidence).

    Raises
    ------
    MissingColumnError
        If a needed column is missing.
    """
    _require(suspensions, (STAND_ID, VEHICLE_ID, "starts_on", "ends_on"), "as suspensões")
    first_day, last_day = _as_day(start, "start"), _as_day(end, "end")
    lo, hi = np.datetime64(first_day, "D"), np.datetime64(last_day, "D")
    starts = pd.to_datetime(suspensions["starts_on"]).to_numpy(dtype="datetime64[D]")
    ends = pd.to_datetime(suspensions["ends_on"]).to_numpy(dtype="datetime64[D]")
    licensees: dict[str, list[str]] = {}
    if licences is not None:
        for v, s_ in zip(
            licences[VEHICLE_ID].astype("str"), licences[STAND_ID].astype("str"), strict=True
        ):
            if v not in licensees.setdefault(s_, []):
                licensees[s_].append(v)
    recs: list[tuple[str, str, np.datetime64, np.datetime64, dict[str, Any]]] = []
    for k, row in enumerate(suspensions.to_dict("records")):
        vehicle, stand = _text(row.get(VEHICLE_ID)), _text(row.get(STAND_ID))
        closed = _text(row.get("kind")) == CLOSED and _text(row.get("driver_id")) is None
        if stand is None or np.isnat(starts[k]) or (vehicle is None and not closed):
            continue
        a = max(starts[k], lo)
        b = hi if np.isnat(ends[k]) else min(ends[k], hi)
        if a > b:
            continue
        evidence = {
            "suspension_id": _int_or_none(row.get("suspension_id")),
            "kind": _text(row.get("kind")),
            "stand_id": stand,
            "vehicle_id": vehicle,
            "starts_on": str(starts[k]),
            "ends_on": None if np.isnat(ends[k]) else str(ends[k]),
            "reason": _text(row.get("reason")),
            "process_ref": _text(row.get("process_ref")),
        }
        for v in [vehicle] if vehicle is not None else sorted(licensees.get(stand, [])):
            recs.append((v, stand, a, b, evidence))
    rows = [
        (v, s_, day, ev)
        for v, s_, a, b, ev in sorted(recs, key=lambda r: r[2])
        for day in np.arange(a, b + 1, dtype="datetime64[D]")
    ]
    out = pd.DataFrame(
        {
            VEHICLE_ID: pd.Series([r[0] for r in rows], dtype=object),
            STAND_ID: pd.Series([r[1] for r in rows], dtype=object),
            DATE: pd.Series(np.array([r[2] for r in rows], dtype="datetime64[ns]")),
            "suspension": pd.Series([r[3] for r in rows], dtype=object),
        }
    )
    out = out.drop_duplicates([VEHICLE_ID, STAND_ID, DATE], keep="last")
    return out.sort_values([VEHICLE_ID, STAND_ID, DATE], ignore_index=True)


def presence_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Reduce a presence table per (vehicle, stand).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`presence`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`SUMMARY_COLUMNS`: ``days_licensed`` (rows), ``days_operating``,
        ``days_present``, ``share`` (``days_present / days_operating``, NaN when 0), sorted by
        (vehicle_id, stand_id).

    Raises
    ------
    MissingColumnError
        If the table lacks a column of the presence table's key or flags.
    """
    need = (VEHICLE_ID, STAND_ID, DATE, OPERATED, PRESENT, CONTINUES)
    missing = [c for c in need if c not in table.columns]
    if missing:
        msg = f"a tabela de presença não tem as colunas {', '.join(missing)}"
        raise MissingColumnError(msg)
    table = table.sort_values([VEHICLE_ID, STAND_ID, DATE], ignore_index=True)
    tail = table[CONTINUES].to_numpy(dtype=bool)
    previous_present = np.r_[False, table[PRESENT].to_numpy(dtype=bool)[:-1]]
    present = table[PRESENT].to_numpy(dtype=bool) & ~(tail & previous_present)
    table = table.assign(
        **{OPERATED: table[OPERATED].to_numpy(dtype=bool) & ~tail, PRESENT: present}
    )
    grouped = table.groupby([VEHICLE_ID, STAND_ID], sort=True, observed=True)
    out = pd.DataFrame(
        {
            "days_licensed": grouped[DATE].size().astype(np.int64),
            "days_operating": grouped[OPERATED].sum().astype(np.int64),
            "days_present": grouped[PRESENT].sum().astype(np.int64),
        }
    ).reset_index()
    operating = out["days_operating"].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["share"] = np.where(
            operating > 0, out["days_present"].to_numpy(dtype=np.float64) / operating, np.nan
        )
    out[VEHICLE_ID] = out[VEHICLE_ID].astype("str")
    out[STAND_ID] = out[STAND_ID].astype("str")
    return out[list(SUMMARY_COLUMNS)]


def continues_previous_day(table: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Flag the rows of a presence table (sorted by vehicle, stand, date) ending a night shift.

    Such a row is the tail of the previous day's shift: one day of service with it.
    A shift across local midnight (a night driver's 20:00 to 04:00) is one day of service, not
    two: the day continues the previous one when both operated, the silence across midnight
    (last sighting to first) is at most :data:`SHIFT_REST_S` and the two days' operation spans
    at most :data:`MAX_SHIFT_S` (so a car driven round the clock by two drivers keeps its
    days). A day that continues one which itself continued is a day of its own.
    """
    n = len(table)
    if n < 2:
        return np.zeros(n, dtype=bool)
    same = (
        table[VEHICLE_ID].to_numpy(dtype=object)[1:]
        == table[VEHICLE_ID].to_numpy(dtype=object)[:-1]
    ) & (table[STAND_ID].to_numpy(dtype=object)[1:] == table[STAND_ID].to_numpy(dtype=object)[:-1])
    days = table[DATE].to_numpy(dtype="datetime64[D]")
    operated = table[OPERATED].to_numpy(dtype=bool)
    first = _seen_ns(table[FIRST_SEEN[0]])
    last = _seen_ns(table[LAST_SEEN[0]])
    rest = (first[1:] - last[:-1]).astype(np.float64) / _NS
    span = (last[1:] - first[:-1]).astype(np.float64) / _NS
    cont = (
        same
        & (days[1:] - days[:-1] == np.timedelta64(1, "D"))
        & operated[1:]
        & operated[:-1]
        & (rest >= 0)
        & (rest <= SHIFT_REST_S)
        & (span <= MAX_SHIFT_S)
    )
    out: npt.NDArray[np.bool_] = np.r_[False, cont]
    for i in np.flatnonzero(out):  # a tail is not the head of another tail
        if out[i - 1]:
            out[i] = False
    return out


def _seen_ns(col: pd.Series) -> npt.NDArray[np.int64]:
    """Return a sighting column's instants as epoch ns (none: far from any other)."""
    at = pd.to_datetime(col, utc=True)
    ns = at.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return np.where(at.isna().to_numpy(), np.iinfo(np.int64).min // 4, ns)


OPERATION_COLUMNS = (VEHICLE_ID, "timestamp", "lat", "lon", "row", "meter")
_UTC_EMPTY = pd.Series(dtype=pd.DatetimeTZDtype("ns", "UTC"))


def operation_fixes(pings: pd.DataFrame, *, timezone: str = DEFAULT_TIMEZONE) -> pd.DataFrame:
    """Each vehicle's first and last fix of each local day that are operation (meter not off).

    All that :func:`presence` reads of the pings, as a pings-like frame a few rows per vehicle
    and day: the same table comes from it as from the whole pings. ``meter`` is ``"free"``
    when a fix of that vehicle and day had the meter known, else None (movement only). Ties
    in time: the first such fix stays first, the last one last.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`OPERATION_COLUMNS` (``row`` -1 where unknown); vehicles in their order
        of appearance, each by day and time.
    """
    check_timezone(timezone)
    if len(pings.columns) or len(pings):  # a header-only file's empty frame has no columns
        _require(pings, (VEHICLE_ID, "timestamp"), "os pings")
    else:
        pings = pd.DataFrame({VEHICLE_ID: pd.Series(dtype="str"), "timestamp": _UTC_EMPTY})
    # positions of the fixes that are operation (no copy of the frame: a bucket's is large)
    at = (
        np.flatnonzero(in_service(pings["meter"]))
        if "meter" in pings.columns
        else np.arange(len(pings))
    )
    n = len(at)
    ns = _utc_ns(pings["timestamp"], name="timestamp", what="os pings")[at]
    if n:
        span = pd.DatetimeIndex(ns[[ns.argmin(), ns.argmax()]], tz="UTC").tz_convert(timezone)
        days = np.arange(
            np.datetime64(span[0].date(), "D") - 1,
            np.datetime64(span[1].date(), "D") + 2,
            dtype="datetime64[D]",
        )
        day = np.searchsorted(day_bounds_ns(days, timezone), ns, side="right") - 1
    else:
        day = np.zeros(0, dtype=np.int64)
    codes, uniques = pd.factorize(pings[VEHICLE_ID].astype("str").iloc[at], sort=False)
    key = codes.astype(np.int64) * (int(day.max(initial=0)) + 1) + day
    step, tick = np.diff(key), np.diff(ns)
    if bool(np.all((step > 0) | ((step == 0) & (tick >= 0)))):  # a run's tracks come sorted
        order = np.arange(n)
    else:  # stable: equal instants keep their input order
        order = np.lexsort((ns, key))
        key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if n else np.zeros(0, np.int64)
    first = order[starts]
    last = order[np.r_[starts[1:], n] - 1] if n else first
    metered = (
        pings["meter"].notna().to_numpy(dtype=bool)[at]
        if "meter" in pings.columns
        else np.zeros(n, dtype=bool)
    )
    known = np.logical_or.reduceat(metered[order], starts) if n else np.zeros(0, dtype=bool)
    both = ns[last] != ns[first]
    group = np.arange(len(starts))
    take = np.concatenate((first, last[both]))
    sequence = np.concatenate((2 * group, 2 * group[both] + 1))
    pick = np.argsort(sequence, kind="stable")
    take, known = take[pick], np.concatenate((known, known[both]))[pick]
    return pd.DataFrame(
        {
            VEHICLE_ID: pd.Series(np.asarray(uniques, dtype=object)[codes[take]], dtype="str"),
            "timestamp": pd.Series(pd.to_datetime(ns[take], unit="ns", utc=True)).astype(
                pd.DatetimeTZDtype("ns", "UTC")
            ),
            "lat": _float_col(pings, "lat", len(pings))[at[take]],
            "lon": _float_col(pings, "lon", len(pings))[at[take]],
            "row": _int_col(pings, "row", len(pings))[at[take]],
            "meter": pd.Series(["free" if k else None for k in known.tolist()], dtype=object),
        }
    )


def day_bounds_ns(days: npt.NDArray[np.datetime64], timezone: str) -> npt.NDArray[np.int64]:
    """UTC epoch ns of the local midnights starting each day, plus the end of the last day.

    A midnight skipped by a DST change starts the day at the first instant after it; a repeated
    one at its later occurrence.
    """
    edges = np.append(days, days[-1] + 1) if len(days) else days
    idx = pd.DatetimeIndex(edges.astype("datetime64[ns]")).tz_localize(
        timezone, ambiguous=np.zeros(len(edges), dtype=bool), nonexistent="shift_forward"
    )
    return np.asarray(idx.tz_convert("UTC").as_unit("ns").asi8, dtype=np.int64)


# --- private -------------------------------------------------------------------------------


def _as_day(value: Any, name: str) -> dt.date:
    if isinstance(value, pd.Timestamp):
        value = value.date()
    if isinstance(value, dt.datetime):
        value = value.date()
    if not isinstance(value, dt.date):
        msg = f"'{name}' foi {value!r}; esperado uma data (datetime.date)"
        raise ThresholdError(msg)
    return value


def _text(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    text = str(value).strip()
    return text or None


def _int_or_none(value: Any) -> int | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return int(value)


def _utc_ns(col: pd.Series, *, name: str, what: str) -> npt.NDArray[np.int64]:
    if not isinstance(col.dtype, pd.DatetimeTZDtype):
        msg = f"'{name}' de {what} é {col.dtype} sem fuso horário; esperados instantes com fuso"
        raise NaiveTimestampError(msg)
    if col.isna().any():
        msg = f"'{name}' de {what} tem {int(col.isna().sum())} instantes nulos"
        raise NaiveTimestampError(msg)
    return epoch_ns(col)


def _require(frame: pd.DataFrame, cols: tuple[str, ...], what: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        msg = f"{what} não têm as colunas {', '.join(missing)}; esperado {', '.join(cols)}"
        raise MissingColumnError(msg)


def _float_col(frame: pd.DataFrame, name: str, n: int) -> npt.NDArray[np.float64]:
    if name in frame.columns:
        return np.asarray(frame[name].to_numpy(dtype=np.float64, na_value=np.nan))
    return np.full(n, np.nan)


def _int_col(frame: pd.DataFrame, name: str, n: int) -> npt.NDArray[np.int64]:
    if name in frame.columns:
        return np.asarray(pd.to_numeric(frame[name]).fillna(-1).to_numpy(dtype=np.int64))
    return np.full(n, -1, dtype=np.int64)


def _vehicle_codes(col: pd.Series, vehicles: pd.Index) -> npt.NDArray[np.int64]:
    """Index of each vehicle id in ``vehicles`` (-1 if absent), hashing each distinct id once."""
    codes, uniques = pd.factorize(col.astype("str"), sort=False)
    lookup = np.asarray(vehicles.get_indexer(pd.Index(uniques)), dtype=np.int64)
    return np.where(codes >= 0, lookup[np.maximum(codes, 0)], -1)


def _sightings(
    visits: pd.DataFrame,
    pings_or_trips: pd.DataFrame | None,
    vehicles: pd.Index,
    bounds: npt.NDArray[np.int64],
) -> dict[str, Any]:
    """Every sighting of a licensed vehicle in the window, and the first/last per (vehicle, day)."""
    parts: list[tuple[Any, ...]] = []
    lo, hi = int(bounds[0]), int(bounds[-1])

    def add(
        vehicle_col: pd.Series,
        ts: npt.NDArray[np.int64],
        lat: npt.NDArray[np.float64],
        lon: npt.NDArray[np.float64],
        row: npt.NDArray[np.int64],
        source: str,
    ) -> None:
        keep = np.flatnonzero((ts >= lo) & (ts < hi))
        if not len(keep):
            return
        v = _vehicle_codes(vehicle_col.iloc[keep], vehicles)
        mine = v >= 0
        if not mine.any():
            return
        keep = keep[mine]
        parts.append((v[mine], ts[keep], lat[keep], lon[keep], row[keep], SOURCES.index(source)))

    if pings_or_trips is not None and len(pings_or_trips):
        frame = pings_or_trips
        n = len(frame)
        if "timestamp" in frame.columns:
            _require(frame, (VEHICLE_ID, "timestamp"), "os pings")
            if "meter" in frame.columns:  # meter off: out of service (private use), not operating
                frame = frame.loc[in_service(frame["meter"])]
                n = len(frame)
            ts = _utc_ns(frame["timestamp"], name="timestamp", what="os pings")
            add(
                frame[VEHICLE_ID],
                ts,
                _float_col(frame, "lat", n),
                _float_col(frame, "lon", n),
                _int_col(frame, "row", n),
                "ping",
            )
        else:
            _require(frame, (VEHICLE_ID, "started_at", "ended_at"), "as viagens")
            row = _int_col(frame, "first_row", n)
            for col, prefix, source in (
                ("started_at", "pickup", "trip_start"),
                ("ended_at", "dropoff", "trip_end"),
            ):
                ts = _utc_ns(frame[col], name=col, what="as viagens")
                add(
                    frame[VEHICLE_ID],
                    ts,
                    _float_col(frame, f"{prefix}_lat", n),
                    _float_col(frame, f"{prefix}_lon", n),
                    row if source == "trip_start" else np.full(n, -1, dtype=np.int64),
                    source,
                )
    if len(visits):
        _require(visits, VISIT_REQUIRED, "as visitas")
        n = len(visits)
        nan = np.full(n, np.nan)
        for col, row_col, source in (
            ("arrived_at", "first_row", "visit_arrival"),
            ("departed_at", "last_row", "visit_departure"),
        ):
            ts = _utc_ns(visits[col], name=col, what="as visitas")
            add(visits[VEHICLE_ID], ts, nan, nan, _int_col(visits, row_col, n), source)

    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        arrays: dict[str, Any] = {
            "ts": empty,
            "lat": np.zeros(0),
            "lon": np.zeros(0),
            "row": empty,
            "source": empty,
        }
        arrays["first_last"] = (empty, empty, empty)
        return arrays
    v = np.concatenate([p[0] for p in parts])
    ts = np.concatenate([p[1] for p in parts])
    lat = np.concatenate([p[2] for p in parts])
    lon = np.concatenate([p[3] for p in parts])
    row = np.concatenate([p[4] for p in parts])
    source_code = np.concatenate([np.full(len(p[0]), p[5], dtype=np.int64) for p in parts])
    day = np.searchsorted(bounds, ts, side="right") - 1
    key = v * np.int64(len(bounds) - 1) + day
    # First/last per key within each part (pings come sorted: no sort), then across parts.
    cand: list[npt.NDArray[np.int64]] = []
    offset = 0
    for p in parts:
        m = len(p[0])
        k, t = key[offset : offset + m], ts[offset : offset + m]
        dk = np.diff(k)
        if bool(np.all((dk > 0) | ((dk == 0) & (np.diff(t) >= 0)))):
            order = np.arange(m)
        else:
            order = np.lexsort((t, k))
        ks = k[order]
        starts = np.flatnonzero(np.append(True, ks[1:] != ks[:-1]))
        ends = np.append(starts[1:] - 1, m - 1)
        cand.append(offset + order[starts])
        cand.append(offset + order[ends])
        offset += m
    c = np.unique(np.concatenate(cand))
    order = c[np.lexsort((ts[c], key[c]))]
    ks = key[order]
    starts = np.flatnonzero(np.append(True, ks[1:] != ks[:-1]))
    ends = np.append(starts[1:] - 1, len(ks) - 1)
    return {
        "ts": ts,
        "lat": lat,
        "lon": lon,
        "row": row,
        "source": source_code,
        "first_last": (ks[starts], order[starts], order[ends]),
    }


def _seen_columns(seen: dict[str, Any], take: npt.NDArray[np.int64]) -> list[Any]:
    """Columns (at, lat, lon, row, source) of the sightings ``take`` (-1: none)."""
    none = take < 0
    t = np.maximum(take, 0)
    n = len(take)
    if len(seen["ts"]) == 0:
        return [
            pd.Series(pd.NaT, index=range(n), dtype=_UTC),
            np.full(n, np.nan),
            np.full(n, np.nan),
            pd.array([pd.NA] * n, dtype="Int64"),
            pd.Series([None] * n, dtype="str"),
        ]
    at = pd.Series(np.where(none, 0, seen["ts"][t]).view("datetime64[ns]")).dt.tz_localize("UTC")
    at = at.mask(pd.Series(none))
    row = seen["row"][t]
    row_na = none | (row < 0)
    return [
        at.astype(_UTC),
        np.where(none, np.nan, seen["lat"][t]),
        np.where(none, np.nan, seen["lon"][t]),
        pd.arrays.IntegerArray(np.where(row_na, 0, row), row_na),
        pd.Series(
            np.where(none, None, np.asarray(SOURCES, dtype=object)[seen["source"][t]]),
            dtype="str",
        ),
    ]


def _visit_days(
    visits: pd.DataFrame,
    lic: pd.DataFrame,
    bounds: npt.NDArray[np.int64],
    min_presence_s: float,
) -> pd.DataFrame:
    """Per (vehicle, stand, day index): n_visits, presence_s, present, visits (evidence)."""
    index_names = [VEHICLE_ID, STAND_ID, "_day"]
    empty = pd.DataFrame(
        {N_VISITS: [], PRESENCE_S: [], PRESENT: [], VISITS: []},
        index=pd.MultiIndex.from_arrays([[], [], []], names=index_names),
    )
    if not len(visits):
        return empty
    _require(visits, VISIT_REQUIRED, "as visitas")
    arrived = _utc_ns(visits["arrived_at"], name="arrived_at", what="as visitas")
    departed = _utc_ns(visits["departed_at"], name="departed_at", what="as visitas")
    licensed_pairs = pd.MultiIndex.from_arrays(
        [lic[VEHICLE_ID].astype("str"), lic[STAND_ID].astype("str")]
    )
    pairs = pd.MultiIndex.from_arrays(
        [visits[VEHICLE_ID].astype("str"), visits[STAND_ID].astype("str")]
    )
    lo, hi = int(bounds[0]), int(bounds[-1])
    keep = np.flatnonzero(pairs.isin(licensed_pairs) & (departed >= lo) & (arrived < hi))
    if not len(keep):
        return empty
    arrived, departed = arrived[keep], departed[keep]
    n_days = len(bounds) - 1
    day_a = np.clip(np.searchsorted(bounds, arrived, side="right") - 1, 0, n_days - 1)
    day_b = np.clip(np.searchsorted(bounds, departed, side="right") - 1, 0, n_days - 1)
    span = day_b - day_a + 1
    rep = np.repeat(np.arange(len(keep)), span)
    day_of = day_a[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(span) - span, span))
    overlap_s = (
        np.minimum(departed[rep], bounds[day_of + 1]) - np.maximum(arrived[rep], bounds[day_of])
    ).clip(min=0) / _NS
    sub = visits.iloc[keep]
    dwell = sub["dwell_s"].to_numpy(dtype=np.float64)
    boarded = (
        sub["boarded"].fillna(False).to_numpy(dtype=bool)
        if "boarded" in sub.columns
        else np.zeros(len(keep), dtype=bool)
    )
    counted = (dwell >= min_presence_s) | boarded
    first_row = _int_col(sub, "first_row", len(keep))
    last_row = _int_col(sub, "last_row", len(keep))
    how = sub["how"].to_numpy(dtype=object) if "how" in sub.columns else np.full(len(keep), None)
    evidence = [
        {
            "arrived_at": a,
            "departed_at": d,
            "dwell_s": w,
            "boarded": b,
            "counted": c,
            "first_row": None if r0 < 0 else r0,
            "last_row": None if r1 < 0 else r1,
        }
        | ({"how": h} if isinstance(h, str) else {})
        for a, d, w, b, c, r0, r1, h in zip(
            iso_utc_many(arrived),
            iso_utc_many(departed),
            dwell.tolist(),
            boarded.tolist(),
            counted.tolist(),
            first_row.tolist(),
            last_row.tolist(),
            how.tolist(),
            strict=True,
        )
    ]
    exploded = pd.DataFrame(
        {
            VEHICLE_ID: sub[VEHICLE_ID].astype("str").to_numpy(dtype=object)[rep],
            STAND_ID: sub[STAND_ID].astype("str").to_numpy(dtype=object)[rep],
            "_day": day_of,
            "_arrived": arrived[rep],
            PRESENCE_S: np.where(counted[rep], overlap_s, 0.0),
            PRESENT: counted[rep],
            "_visit": rep,
        }
    ).sort_values([VEHICLE_ID, STAND_ID, "_day", "_arrived"], kind="stable")
    grouped = exploded.groupby(index_names, sort=True)
    out = pd.DataFrame(
        {
            N_VISITS: grouped.size(),
            PRESENCE_S: grouped[PRESENCE_S].sum(),
            PRESENT: grouped[PRESENT].any(),
            VISITS: grouped["_visit"].agg(lambda s: [evidence[i] for i in s]),
        }
    )
    return out
