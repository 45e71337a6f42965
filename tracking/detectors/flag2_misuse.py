"""Bandeira 2 used when the municipal calendar does not allow it (Pinto Bandeira art. 25 V).

Pinto Bandeira's Lei 169/2015 forbids, as a *grave* infraction, to "usar bandeira 2 (dois)
indevidamente" (art. 25 V) and requires the meter to show "LIVRE", "OCUPADO", "BANDEIRA 1",
"BANDEIRA 2" according to the vehicle's condition (art. 20 IX); Porto Velho's law defines
Bandeira I and II as tariffs "que se distinguem em razão do horário e dos dias" (art. 2 y). None
of the texts fixes the hours: the calendar is data (:class:`Flag2Calendar`) that each
municipality sets. The default, :data:`DEFAULT_FLAG2_CALENDAR`, is the pattern common in
Brazilian cities (e.g. São Paulo): every night 20:00–06:00, Saturdays from 14:00, Sundays,
national holidays (and the nationwide *pontos facultativos*: Carnaval, Corpus Christi, Ash
Wednesday until 14:00) and the whole of December. Its hours err on the side of allowing
Bandeira 2; its holidays are the national ones only: a state or municipal holiday (e.g. 20
September in Rio Grande do Sul) is the municipality's to add (``holidays``), else a ride on it
may be listed. The rulebooks' notes send the agent to the municipal tariff decree before
confirming.

Definitions (each is shown in the evidence):

tariff-2 run
    A maximal run of consecutive fixes of one vehicle with ``meter == "occupied"`` and
    ``tariff == 2``, cut where the silence between two fixes exceeds ``max_gap_s`` (as trips are
    cut in ``tracking/trips.py``). A fix with an unknown tariff ends the run.
misuse segment
    A maximal run of consecutive fixes of a tariff-2 run whose local time (``timezone``) is not
    allowed by the calendar. Its duration is from its first to its last fix (only what was
    observed); segments shorter than ``min_duration_s`` are ignored, so the minutes around an
    hour boundary (meter clocks drift, sampling) never accuse. With ``carry_over`` (default) a
    segment that follows an allowed fix of the same run is excused: Bandeira 2 lawfully set
    before 06:00 may stay on until the ride ends. So is a run whose fix before (no silence
    between) is at an allowed instant: the ride began between the two fixes, perhaps before
    06:00 (a tracker reporting once a minute).
left_municipality
    With the municipal ``boundary``: whether a fix of the segment's tariff-2 run lies outside
    it (``n_fixes_outside`` says how many; ``left_at``, when the first did, and that fix is
    among the evidence's fixes). Tariff decrees commonly allow Bandeira 2 on a ride
    beyond the municipal limit at any hour, and the laws at hand say nothing of it, so such a
    finding is one the rulebooks list for review, never a proposal. Without a boundary these
    keys are absent.
confidence
    ``0.6 + 0.35 * min(1, (duration_s - min_duration_s) / (4 * max(min_duration_s, 60)))``,
    times ``1 - 0.5 * (share of the segment's fixes flagged for impossible speed)``, clipped to
    [0.05, 0.95]; halved when ``left_municipality``
    (:data:`tracking.detectors._evidence.REVIEW_CONFIDENCE_FACTOR`). Longer misuse is surer; a
    single fix never reaches the threshold.

Live (:data:`KERNEL`): a vehicle whose last fix is occupied with tariff 2 keeps the fixes of
that open tariff-2 run and the fix before it (:func:`open_from`; at most one meter cycle, cut
by any silence longer than ``max_gap_s``); its segments are emitted when the run ends (a fix
not occupied with tariff 2, or one after such a silence). Another vehicle keeps its last fix.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.calendar import ASH_WEDNESDAY_UNTIL, DEFAULT_TIMEZONE, ash_wednesdays, brazil_holidays
from tracking.arrays import NS, in_track_order, iso_utc, vehicle_codes
from tracking.detectors._errors import Flag2CalendarError
from tracking.detectors._evidence import (
    DAY_NS,
    REVIEW_CONFIDENCE_FACTOR,
    check_threshold,
    clip_confidence,
    fix_record,
    ping_rows,
    require_columns,
    utc_ns,
    zone,
)
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.kernel import TrackKernel
from tracking.detectors.outside_municipality import (
    boundary_polygon,
    outside_fixes,
    prepare_boundary,
)

KIND = "flag2_misuse"
DEFAULT_MIN_DURATION_S = 120.0
DEFAULT_MAX_GAP_S = 300.0
_MINUTES_PER_DAY = 1440
_HHMM = re.compile(r"^(\d{1,2}):(\d{2})$")


@dataclass(frozen=True, kw_only=True)
class Flag2Calendar:
    """When Bandeira 2 is allowed, in local time (plain data, set by each municipality).

    Attributes
    ----------
    windows : tuple of (int, str, str)
        ``(weekday, start, end)`` with weekday 0 = Monday … 6 = Sunday and ``"HH:MM"`` times
        (``"24:00"`` allowed as end). The window covers ``[start, end)``; when ``end <= start``
        it runs past midnight into the next weekday.
    whole_weekdays : tuple of int
        Weekdays allowed all day (e.g. ``(6,)`` for Sundays).
    whole_months : tuple of int
        Months (1–12) allowed all day (e.g. ``(12,)`` for December).
    holidays : tuple of datetime.date
        Dates allowed all day (municipal and state holidays).
    annual_holidays : tuple of str
        ``"MM-DD"`` days allowed all day every year (a state's data magna, a municipal holiday).
    national_holidays : bool
        Also allow Brazil's national holidays and nationwide pontos facultativos of every year
        (see :func:`brazil_holidays`), and Ash Wednesday until 14:00 (:func:`ash_wednesdays`).
    """

    windows: tuple[tuple[int, str, str], ...] = ()
    whole_weekdays: tuple[int, ...] = ()
    whole_months: tuple[int, ...] = ()
    holidays: tuple[dt.date, ...] = field(default_factory=tuple)
    annual_holidays: tuple[str, ...] = ()
    national_holidays: bool = True


DEFAULT_FLAG2_CALENDAR = Flag2Calendar(
    windows=(*((d, "20:00", "06:00") for d in range(7)), (5, "14:00", "24:00")),
    whole_weekdays=(6,),
    whole_months=(12,),
    holidays=(),
    national_holidays=True,
)
"""Every night 20:00–06:00, Saturday from 14:00, Sundays, December, national holidays."""


def _minute(text: str, *, allow_24: bool) -> int:
    match = _HHMM.match(text) if isinstance(text, str) else None
    hours, minutes = (int(match.group(1)), int(match.group(2))) if match else (-1, -1)
    value = hours * 60 + minutes
    if not match or minutes > 59 or value > (_MINUTES_PER_DAY if allow_24 else 1439):
        msg = f"horário da Bandeira 2 era {text!r}; esperado HH:MM entre 00:00 e 24:00"
        raise Flag2CalendarError(msg)
    return value


def _check_weekday(value: Any) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not 0 <= value <= 6:
        msg = f"dia da semana da Bandeira 2 era {value!r}; esperado 0 (segunda) a 6 (domingo)"
        raise Flag2CalendarError(msg)
    return int(value)


def week_mask(calendar: Flag2Calendar) -> NDArray[np.bool_]:
    """Return the allowed minutes of the week (``7 * 1440`` booleans, Monday 00:00 first).

    Parameters
    ----------
    calendar : Flag2Calendar
        The calendar (validated here).

    Returns
    -------
    numpy.ndarray of bool
        ``mask[weekday * 1440 + minute_of_day]`` (read-only; cached per calendar).

    Raises
    ------
    Flag2CalendarError
        If a weekday, time or month is out of range.
    """
    try:
        return _cached_mask(calendar)
    except TypeError:  # a calendar holding lists is not hashable: build it every time
        return _build_mask(calendar)


@functools.lru_cache(maxsize=32)
def _cached_mask(calendar: Flag2Calendar) -> NDArray[np.bool_]:
    return _build_mask(calendar)


def _build_mask(calendar: Flag2Calendar) -> NDArray[np.bool_]:
    mask = np.zeros(7 * _MINUTES_PER_DAY, dtype=bool)
    for window in calendar.windows:
        if not isinstance(window, tuple | list) or len(window) != 3:
            msg = f"janela da Bandeira 2 era {window!r}; esperado (dia_da_semana, 'HH:MM', 'HH:MM')"
            raise Flag2CalendarError(msg)
        day = _check_weekday(window[0])
        start = _minute(window[1], allow_24=False)
        end = _minute(window[2], allow_24=True)
        first = day * _MINUTES_PER_DAY + start
        length = end - start if end > start else end + _MINUTES_PER_DAY - start
        idx = (first + np.arange(length)) % mask.size
        mask[idx] = True
    for day in calendar.whole_weekdays:
        d = _check_weekday(day)
        mask[d * _MINUTES_PER_DAY : (d + 1) * _MINUTES_PER_DAY] = True
    for month in calendar.whole_months:
        if not isinstance(month, int) or isinstance(month, bool) or not 1 <= month <= 12:
            msg = f"mês da Bandeira 2 era {month!r}; esperado 1 a 12"
            raise Flag2CalendarError(msg)
    for date in calendar.holidays:
        if not isinstance(date, dt.date):
            msg = f"feriado da Bandeira 2 era {date!r}; esperado uma data (datetime.date)"
            raise Flag2CalendarError(msg)
    for annual in calendar.annual_holidays:
        _annual(annual, 2000)
    mask.flags.writeable = False
    return mask


def _annual(day: Any, year: int) -> dt.date:
    """Return an ``"MM-DD"`` annual holiday's date in ``year`` (29 Feb: 28 Feb if not leap)."""
    match = re.fullmatch(r"(\d{2})-(\d{2})", day) if isinstance(day, str) else None
    try:
        month, dom = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        dt.date(2000, month, dom)  # a leap year: every MM-DD of the calendar
    except ValueError:
        match = None
    if not match:
        msg = f"feriado anual da Bandeira 2 era {day!r}; esperado MM-DD (ex.: 09-20)"
        raise Flag2CalendarError(msg)
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return dt.date(year, month, 28 if (month, dom) == (2, 29) and not leap else dom)


def with_holidays(calendar: Flag2Calendar, holidays: tuple[str, ...] | list[str]) -> Flag2Calendar:
    """Return the calendar with more days allowed all day: ``AAAA-MM-DD`` once, ``MM-DD`` yearly.

    Raises
    ------
    Flag2CalendarError
        If a day is neither.
    """
    dated: list[dt.date] = []
    annual: list[str] = []
    for day in holidays:
        text = str(day).strip()
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            try:
                dated.append(dt.date.fromisoformat(text))
                continue
            except ValueError:
                pass
        _annual(text, 2000)
        annual.append(text)
    if not dated and not annual:
        return calendar
    return replace(
        calendar,
        holidays=(*calendar.holidays, *dated),
        annual_holidays=(*calendar.annual_holidays, *annual),
    )


@functools.lru_cache(maxsize=256)
def _holiday_days(calendar: Flag2Calendar, years: tuple[int, ...]) -> NDArray[np.int64]:
    """Day numbers of the calendar's holidays (and national ones of ``years``), sorted."""
    holidays = list(calendar.holidays)
    holidays += [_annual(d, y) for d in calendar.annual_holidays for y in years]
    if calendar.national_holidays:
        holidays += brazil_holidays(years)
    days = np.unique(np.array([(d - dt.date(1970, 1, 1)).days for d in holidays], dtype=np.int64))
    days.flags.writeable = False
    return days


def allowed_at(
    ns: NDArray[np.int64], *, calendar: Flag2Calendar, timezone: str
) -> NDArray[np.bool_]:
    """Whether Bandeira 2 is allowed at each UTC instant.

    Parameters
    ----------
    ns : numpy.ndarray of int64
        Epoch nanoseconds (UTC).
    calendar : Flag2Calendar
        Calendar.
    timezone : str
        IANA zone of the calendar's local times.

    Returns
    -------
    numpy.ndarray of bool
    """
    mask = week_mask(calendar)
    tz = zone(timezone)
    if len(ns) == 0:
        return np.zeros(0, dtype=bool)
    wall = pd.DatetimeIndex(ns.astype("datetime64[ns]"), tz="UTC").tz_convert(tz)
    wall_ns = wall.tz_localize(None).asi8
    day = np.floor_divide(wall_ns, DAY_NS)
    minute = (wall_ns - day * DAY_NS) // (60 * NS)
    weekday = (day + 3) % 7  # 1970-01-01 was a Thursday
    allowed = mask[weekday * _MINUTES_PER_DAY + minute]
    if calendar.whole_months:
        month = day.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64) % 12 + 1
        allowed |= np.isin(month, np.array(calendar.whole_months, dtype=np.int64))
    years = np.unique(day.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64))
    year_list = tuple(int(y) + 1970 for y in years)
    try:
        hol = _holiday_days(calendar, year_list)
    except TypeError:  # unhashable calendar
        hol = _holiday_days.__wrapped__(calendar, year_list)
    if len(hol):
        allowed |= np.isin(day, hol)
    if calendar.national_holidays:
        until = ASH_WEDNESDAY_UNTIL.hour * 60 + ASH_WEDNESDAY_UNTIL.minute
        allowed |= np.isin(day, _ash_days(year_list)) & (minute < until)
    return np.asarray(allowed, dtype=bool)


@functools.lru_cache(maxsize=64)
def _ash_days(years: tuple[int, ...]) -> NDArray[np.int64]:
    return np.array([(d - dt.date(1970, 1, 1)).days for d in ash_wednesdays(years)], np.int64)


def _calendar_summary(calendar: Flag2Calendar) -> dict[str, Any]:
    return {
        "windows": [[int(d), s, e] for d, s, e in calendar.windows],
        "whole_weekdays": [int(d) for d in calendar.whole_weekdays],
        "whole_months": [int(m) for m in calendar.whole_months],
        "holidays": [d.isoformat() for d in calendar.holidays],
        "annual_holidays": list(calendar.annual_holidays),
        "national_holidays": bool(calendar.national_holidays),
    }


def _local_iso(ns: int, timezone: str) -> str:
    return pd.Timestamp(int(ns), unit="ns", tz="UTC").tz_convert(zone(timezone)).isoformat()


def _finding_row(
    *,
    vehicle_id: str,
    first: dict[str, Any],
    last: dict[str, Any],
    run_start_ns: int,
    n_fixes: int,
    n_flagged: int,
    calendar: Flag2Calendar,
    timezone: str,
    min_duration_s: float,
    max_gap_s: float,
    carry_over: bool,
    n_outside: int | None,
    left_at: dict[str, Any] | None,
) -> tuple[dict[str, Any], Any]:
    """One finding (row dict, geometry) from the segment's ends.

    ``n_outside``: the run's fixes outside the municipal boundary (None: no boundary);
    ``left_at``: the first of them.
    """
    duration_s = (last["ns"] - first["ns"]) / NS
    scale = 4.0 * max(min_duration_s, 60.0)
    conf = 0.6 + 0.35 * min(1.0, (duration_s - min_duration_s) / scale)
    conf *= 1.0 - 0.5 * (n_flagged / n_fixes)
    if n_outside:
        conf *= REVIEW_CONFIDENCE_FACTOR
    ends = [first] if last["ns"] == first["ns"] else [first, last]
    if left_at is not None and all(left_at["ns"] != f["ns"] for f in ends):
        ends = sorted([*ends, left_at], key=lambda f: int(f["ns"]))
    fixes = [fix_record(f["ns"], f["lat"], f["lon"], f["row"]) for f in ends]
    details = {
        "fixes": fixes,
        "tariff": 2,
        "duration_s": float(duration_s),
        "n_fixes": int(n_fixes),
        "n_speed_flagged": int(n_flagged),
        "local_start": _local_iso(first["ns"], timezone),
        "local_end": _local_iso(last["ns"], timezone),
        "tariff2_since": iso_utc(run_start_ns),
        "timezone": timezone,
        "calendar": _calendar_summary(calendar),
        **(
            {}
            if n_outside is None
            else {
                "left_municipality": n_outside > 0,
                "n_fixes_outside": int(n_outside),
                "left_at": None if left_at is None else iso_utc(int(left_at["ns"])),
            }
        ),
        "thresholds": {
            "min_duration_s": float(min_duration_s),
            "max_gap_s": float(max_gap_s),
            "carry_over": bool(carry_over),
        },
    }
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": None,
        "started_at": pd.Timestamp(first["ns"], unit="ns", tz="UTC"),
        "ended_at": pd.Timestamp(last["ns"], unit="ns", tz="UTC"),
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, shapely.Point(first["lon"], first["lat"])


def _check_options(
    calendar: Flag2Calendar, min_duration_s: float, max_gap_s: float, timezone: str
) -> None:
    if not isinstance(calendar, Flag2Calendar):
        msg = f"'calendar' era {type(calendar).__name__}; esperado Flag2Calendar"
        raise Flag2CalendarError(msg)
    week_mask(calendar)
    check_threshold("min_duration_s", min_duration_s, unit="segundos")
    check_threshold("max_gap_s", max_gap_s, positive=True, unit="segundos")
    zone(timezone)


def detect_flag2_misuse(
    pings: pd.DataFrame,
    *,
    calendar: Flag2Calendar = DEFAULT_FLAG2_CALENDAR,
    holidays: tuple[str, ...] | list[str] = (),
    min_duration_s: float = DEFAULT_MIN_DURATION_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    carry_over: bool = True,
    timezone: str = DEFAULT_TIMEZONE,
    boundary: Any = None,
) -> gpd.GeoDataFrame:
    """Find trip segments charged with Bandeira 2 outside the allowed calendar.

    Serves Pinto Bandeira art. 25 V (grave: "usar bandeira 2 (dois) indevidamente"); see the
    module docstring for the definitions, the default calendar and the confidence.

    Parameters
    ----------
    pings : pandas.DataFrame
        Valid fixes (``tracking/frames.py``) with ``meter`` and ``tariff``; without them (or
        with no tariff-2 fix) nothing is found. Sorted by (vehicle_id, timestamp) as the
        contract says; sorted here otherwise.
    calendar : Flag2Calendar, default DEFAULT_FLAG2_CALENDAR
        When Bandeira 2 is allowed (local time). The laws at hand fix no hours: configure it.
    holidays : sequence of str, default ()
        More days allowed all day, added to the calendar's: ``AAAA-MM-DD`` (once) or ``MM-DD``
        (every year; a state or municipal holiday). Settable in a rulebook or ``--thresholds``.
    min_duration_s : float, default 120
        Shortest misuse segment reported (first to last fix).
    max_gap_s : float, default 300
        A silence longer than this ends a tariff-2 run (the pipeline's trip gap).
    carry_over : bool, default True
        Excuse Bandeira 2 kept past the end of an allowed period within the same run.
    timezone : str, default "America/Sao_Paulo"
        Zone of the calendar.
    boundary : shapely (Multi)Polygon in EPSG:4326, or GeoDataFrame/GeoSeries, optional
        The municipality: each finding then says whether its ride left it
        (``left_municipality``, module docstring).

    Returns
    -------
    geopandas.GeoDataFrame
        Findings (``tracking.detectors.findings``), kind ``flag2_misuse``, geometry the first
        fix of the segment.

    Raises
    ------
    DetectorInputError
        If pings lack ``vehicle_id``/``timestamp``/``lat``/``lon`` or have naive timestamps.
    DetectorThresholdError
        If a threshold is negative (``max_gap_s`` must be > 0) or the zone unknown.
    Flag2CalendarError
        If the calendar is malformed.
    BoundaryError
        If the boundary is not a usable (Multi)Polygon.
    """
    _check_options(calendar, min_duration_s, max_gap_s, timezone)
    polygon = None if boundary is None else boundary_polygon(boundary)
    calendar = with_holidays(calendar, holidays)
    require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
    ns0 = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    if len(pings) == 0 or "meter" not in pings.columns or "tariff" not in pings.columns:
        return empty_findings()
    codes, vehicles, ns, order, flag2, run_start = _tariff2_runs(pings, ns0, max_gap_s=max_gap_s)
    if not flag2.any():
        return empty_findings()
    n = len(ns)
    bad = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(flag2)
    bad[idx] = ~allowed_at(ns[idx], calendar=calendar, timezone=timezone)
    prev_bad = np.concatenate(([False], bad[:-1]))
    seg_start = bad & (run_start | ~prev_bad)
    next_start = np.concatenate((seg_start[1:] | run_start[1:] | ~bad[1:], [True]))
    seg_end = bad & next_start
    starts, ends = np.flatnonzero(seg_start), np.flatnonzero(seg_end)
    keep = ns[ends] - ns[starts] >= round(min_duration_s * NS)
    if carry_over:
        keep &= run_start[starts]
        # The ride began after the fix before the run: at an allowed instant, Bandeira 2 may
        # have been set lawfully.
        before = np.maximum(starts - 1, 0)
        seen = (
            (starts > 0)
            & (codes[before] == codes[starts])
            & (ns[starts] - ns[before] <= round(max_gap_s * NS))
        )
        seen[seen] = allowed_at(ns[before[seen]], calendar=calendar, timezone=timezone)
        keep &= ~seen
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return empty_findings()
    run_id = np.cumsum(run_start) - 1
    run_first = np.flatnonzero(run_start)
    lat = pings["lat"].to_numpy(dtype=np.float64)[order]
    lon = pings["lon"].to_numpy(dtype=np.float64)[order]
    rows = ping_rows(pings)[order]
    flagged = (
        pings["speed_flag"].fillna(False).to_numpy(dtype=bool)[order]
        if "speed_flag" in pings.columns
        else np.zeros(n, dtype=bool)
    )
    flagged_cum = np.concatenate(([0], np.cumsum(flagged)))
    outside = (
        None
        if polygon is None
        else _outside_per_run(polygon, flag2, run_id, run_id[starts], lat, lon)
    )

    def _fix(i: int) -> dict[str, Any]:
        return {"ns": int(ns[i]), "lat": lat[i], "lon": lon[i], "row": int(rows[i])}

    out, geoms = [], []
    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        row, geom = _finding_row(
            vehicle_id=str(vehicles[codes[s]]),
            first=_fix(s),
            last=_fix(e),
            run_start_ns=int(ns[run_first[run_id[s]]]),
            n_fixes=e - s + 1,
            n_flagged=int(flagged_cum[e + 1] - flagged_cum[s]),
            calendar=calendar,
            timezone=timezone,
            min_duration_s=min_duration_s,
            max_gap_s=max_gap_s,
            carry_over=carry_over,
            n_outside=None if outside is None else int(outside[0][k]),
            left_at=None if outside is None or outside[1][k] < 0 else _fix(int(outside[1][k])),
        )
        out.append(row)
        geoms.append(geom)
    return make_findings(pd.DataFrame(out), geoms)


def _outside_per_run(
    polygon: Any,
    flag2: NDArray[np.bool_],
    run_id: NDArray[np.int64],
    runs: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Count the fixes of each of ``runs`` (tariff-2 runs) outside ``polygon``; find the first.

    The position is -1 for a run with none.
    """
    at = np.flatnonzero(flag2 & np.isin(run_id, runs))
    beyond = at[
        outside_fixes(prepare_boundary(polygon, boundary_tolerance_m=0.0), lat[at], lon[at])
    ]
    counts = np.bincount(run_id[beyond], minlength=int(runs.max()) + 1)
    first = np.full(len(counts), -1, dtype=np.int64)
    seen, where = np.unique(run_id[beyond], return_index=True)  # ``beyond`` is in time order
    first[seen] = beyond[where]
    return counts[runs], first[runs]


def open_from(
    pings: pd.DataFrame, *, max_gap_s: float = DEFAULT_MAX_GAP_S, **_: Any
) -> dict[str, int]:
    """Each vehicle's open tariff-2 run (its first fix), else its last fix.

    A later fix can extend the run's last misuse segment, or (without ``carry_over``) start a
    new one in it, named after the run's first fix; the fix before a run is read too
    (``context_fixes``), so a vehicle whose last fix is not tariff 2 keeps that fix: its next
    tariff-2 fix starts a run after it.
    """
    if len(pings) == 0 or "meter" not in pings.columns or "tariff" not in pings.columns:
        return {}
    ns0 = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    codes, vehicles, ns, _order, flag2, run_start = _tariff2_runs(pings, ns0, max_gap_s=max_gap_s)
    last = np.flatnonzero(np.r_[codes[1:] != codes[:-1], True])
    first = np.flatnonzero(run_start)
    opened = last.copy()
    if len(first):
        starts = first[np.maximum(np.searchsorted(first, last, side="right") - 1, 0)]
        opened = np.where(flag2[last], starts, last)
    return {str(vehicles[codes[i]]): int(ns[r]) for i, r in zip(last, opened, strict=True)}


KERNEL = TrackKernel(KIND, detect_flag2_misuse, open_from, context_fixes=1)
"""The rule as a kernel: batch and live (``tracking.detectors.kernel.advance``)."""


def _tariff2_runs(
    pings: pd.DataFrame, ns0: NDArray[np.int64], *, max_gap_s: float
) -> tuple[
    NDArray[np.int64],
    NDArray[np.object_],
    NDArray[np.int64],
    NDArray[np.int64] | slice,
    NDArray[np.bool_],
    NDArray[np.bool_],
]:
    """Return ``(codes, vehicles, ns, order, flag2, run_start)`` in (vehicle, time) order.

    ``order`` takes the pings' rows to that order; ``flag2`` marks occupied tariff-2 fixes and
    ``run_start`` the first fix of each tariff-2 run (module docstring).
    """
    codes, vehicles = vehicle_codes(pings["vehicle_id"])
    ns = ns0
    order: NDArray[np.int64] | slice = slice(None)  # the contract's order: nothing to sort
    if not in_track_order(codes, ns0):
        order = np.lexsort((ns0, codes))
        ns, codes = ns0[order], codes[order]
    occupied = pings["meter"].eq("occupied").fillna(False).to_numpy(dtype=bool)
    flag2 = occupied[order] & (pd.to_numeric(pings["tariff"]).fillna(0).to_numpy()[order] == 2)
    new_seg = np.ones(len(ns), dtype=bool)
    new_seg[1:] = (codes[1:] != codes[:-1]) | (np.diff(ns) > round(max_gap_s * NS))
    prev_flag2 = np.concatenate(([False], flag2[:-1]))
    run_start = flag2 & (new_seg | ~prev_flag2)
    return codes, vehicles, ns, order, flag2, run_start
