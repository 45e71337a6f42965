"""Habitual absence: a licensee that operates but seldom goes to its licensed stand.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 49: "O não comparecimento
regular e habitual do prefixo ao ponto fixo ensejará a cassação de sua licença de
estacionamento"; and art. 28 § 2 for accessible taxis: "O prefixo de Táxi Acessível vinculado a
ponto de estacionamento fixo deverá operar efetiva e habitualmente em tal local". The texts do not
quantify "regular e habitual", so every threshold is a parameter and appears in the evidence.

Definition: over a window of ``window_days`` local days ending on ``as_of``, the presence table
(:func:`stands.presence.presence`) gives, per (vehicle, licensed stand), the days the vehicle
operated and the days it was present at the stand. A finding when

- ``days_operating >= min_operating_days`` (fewer operating days: not enough evidence; a vehicle
  that did not operate is not absent — that is inactivity, another finding), and
- ``share = days_present / days_operating < min_presence_share``.

Days are days of service: the tail of a shift across local midnight (a night driver's 20:00 to
04:00) counts with the day it began, present if either part was
(:func:`stands.presence.continues_previous_day`; ``days[].continues_previous_day`` in the
evidence). Counted by calendar day, every night shift would be two operating days and one at
most present, and a night driver would be accused where a day driver at the same stand as often
is not.

Presence is a counted visit, or a near or silent dwell (``stands/near.py``: the queue beyond the
polygon, a tracker silent while parked at the stand) found in the fixes (``pings``; in a run of
partitions, ``near_dwells`` found by each); the day's evidence names it (``how``). Operation
is seen in the fixes (or trips), not in a fix with the meter ``off`` (private use); runs pass
each day's first and last such fix (``stands.presence.operation_fixes``), the live kernel keeps
them, and the supervisor's view reads them in SQL: a day driven free without a ride operates.
A vehicle with no meter value in the window is judged on the days it moved, which may be days
off: its finding carries ``details.unmetered`` and its confidence times
:data:`UNMETERED_CONFIDENCE_FACTOR` (below the proposal floor).

With ``suspensions`` (the registry's ``stand_suspensions``), the days on which the prefixo was
suspended from the stand (POA art. 45 § único: ordered away from it), or the stand was closed
(kind ``closed``, every licensee), are not days it could attend: they count neither as
operating nor as present (nor licensed), and a finding lists them (``details.days_suspended``,
``details.suspended_days``, ``details.suspensions``).

confidence
    ``0.5 + 0.3·(1 − share/min_presence_share) + 0.15·(1 − min_operating_days/days_operating)``,
    at most 0.95: it grows as the share falls below the threshold and with the number of
    operating days observed.

``details`` lists every operating day of the window with its presence flag, the first and last
sighting of the vehicle that day (the evidence that it operated) and the day's visits to the
stand. With a ``fleet`` whose ``accessible`` is True for the vehicle (a Táxi Acessível, art.
28 § 2: "sob pena de revogação da autorização"), ``details.accessible`` is True; the key is
absent for any other vehicle (not accessible, unknown, or no fleet given), so those findings are
unchanged. Geometry: the stand's polygon when ``stands`` is given, else None. ``started_at`` and
``ended_at``: local midnight starting the window and local midnight after ``as_of``.

Live: :data:`KERNEL` (:func:`advance_habitual_absence`) keeps, per vehicle, the first and last
fix of each local day and the released visits of the days a window still to be judged covers
(at most ``window_days`` days, plus the days held back by a visit not yet released), and
judges a vehicle's day with this detector once every visit it started before that day's end
has been released; a (vehicle, stand) finding is returned at most once per window.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from stands import near
from stands.near import (
    DEFAULT_MIN_SILENCE_S,
    DEFAULT_REACH_M,
    DEFAULT_SILENT_REACH_M,
    advance_near_dwells,
    open_arrivals,
)
from stands.presence import (
    CONTINUES,
    DATE,
    DEFAULT_MIN_PRESENCE_S,
    OPERATED,
    PRESENCE_S,
    PRESENT,
    VISITS,
    day_bounds_ns,
    operation_fixes,
    presence,
    presence_summary,
    suspended_days,
)
from tracking.arrays import iso_utc
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._evidence import local_days
from tracking.detectors._track_kernels import (
    check_timezone,
    finding_record,
    findings_from_records,
    local_dates,
    utc_ns,
)
from tracking.detectors.day_kernel import DayKernel
from tracking.detectors.unlicensed_stand_use import fleet_facts
from tracking.frames import in_service

KIND = "habitual_absence"
DEFAULT_WINDOW_DAYS = 30
"""Local days observed, ending on ``as_of`` (POA art. 49; art. 28 § 2)."""
DEFAULT_MIN_OPERATING_DAYS = 10
"""Fewer operating days in the window: not enough evidence, no finding."""
DEFAULT_MIN_PRESENCE_SHARE = 0.2
"""Present on fewer than this share of the operating days: a finding."""
MAX_CONFIDENCE = 0.95
UNMETERED_CONFIDENCE_FACTOR = 0.5
"""Without meter data a day the car moved counts as a day it operated, though it may have been
private use (a day off): such findings are kept below the proposal floor, for review."""


def detect_habitual_absence(
    visits: pd.DataFrame,
    licences: pd.DataFrame,
    pings_or_trips: pd.DataFrame | None,
    *,
    as_of: dt.date | None = None,
    stands: gpd.GeoDataFrame | None = None,
    fleet: pd.DataFrame | None = None,
    suspensions: pd.DataFrame | None = None,
    pings: pd.DataFrame | None = None,
    near_dwells: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    window_days: int = DEFAULT_WINDOW_DAYS,
    min_operating_days: int = DEFAULT_MIN_OPERATING_DAYS,
    min_presence_share: float = DEFAULT_MIN_PRESENCE_SHARE,
    min_presence_s: float = DEFAULT_MIN_PRESENCE_S,
    reach_m: float = DEFAULT_REACH_M,
    silent_reach_m: float = DEFAULT_SILENT_REACH_M,
    min_silence_s: float = DEFAULT_MIN_SILENCE_S,
) -> gpd.GeoDataFrame:
    """Find licensees that operate but are seldom present at their licensed stand.

    Parameters
    ----------
    visits : pandas.DataFrame
        Stand visits (``stands/visits.py``).
    licences : pandas.DataFrame
        Licence frame (``stands/licences.py``, e.g. ``licence_frame_from_fleet(fleet)``).
    pings_or_trips : pandas.DataFrame or None
        Pings or trips, the evidence of operation (see :func:`stands.presence.presence`).
    as_of : datetime.date, optional
        Last local day of the window (inclusive). Default: the last local day with data
        (the latest fix, trip end or visit departure).
    stands : geopandas.GeoDataFrame, optional
        Stands frame, for the findings' geometry.
    fleet : pandas.DataFrame, optional
        Fleet frame (``vehicle_id``, ``accessible``): a Táxi Acessível's finding carries
        ``details.accessible`` True (POA art. 28 § 2).
    suspensions : pandas.DataFrame, optional
        Stand suspensions (``stand_suspensions``: ``stand_id``, ``vehicle_id``, ``starts_on``,
        ``ends_on``, ...): a prefixo's suspended days at the stand are left out of the count.
    pings : pandas.DataFrame, optional
        The fixes in which near and silent dwells are found (``stands/near.py``), with
        ``stands``; default: ``pings_or_trips`` when they are fixes. An empty frame: none (the
        live kernel finds them as the fixes arrive).
    near_dwells : pandas.DataFrame, optional
        The dwells already found (:func:`stands.near.near_dwells`, by the vehicles'
        partitions): then ``pings`` is not read for them.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.
    window_days : int, default 30
        Days in the window (POA art. 49, art. 28 § 2: "regular e habitual").
    min_operating_days : int, default 10
        Fewest operating days for a finding.
    min_presence_share : float, default 0.2
        A finding when present on a smaller share of the operating days.
    min_presence_s : float, default 60
        Shortest visit that counts as presence, unless it boarded.
    reach_m, silent_reach_m, min_silence_s : float, default 50, 200, 300
        Presence near the stand and over a silence (``stands/near.py``).

    Returns
    -------
    geopandas.GeoDataFrame
        Findings of kind ``habitual_absence``, one per (vehicle, stand).

    Raises
    ------
    DetectorThresholdError
        If a threshold is out of range or the timezone is unknown.
    DetectorInputError
        If ``stands`` has no ``stand_id`` column.
    MissingColumnError, NaiveTimestampError, LicenceFrameError
        From :func:`stands.presence.presence`, for malformed inputs.
    """
    _check_options(
        stands=stands,
        timezone=timezone,
        window_days=window_days,
        min_operating_days=min_operating_days,
        min_presence_share=min_presence_share,
    )
    last_day = as_of if as_of is not None else _last_day(visits, pings_or_trips, timezone)
    if last_day is None:
        return findings_from_records([])
    if isinstance(last_day, dt.datetime):
        last_day = last_day.date()
    first_day = last_day - dt.timedelta(days=window_days - 1)
    seen = pings
    if seen is None and pings_or_trips is not None and "timestamp" in pings_or_trips.columns:
        seen = pings_or_trips
    if near_dwells is None and stands is not None and seen is not None:
        near_dwells = near.near_dwells(
            seen,
            licences,
            stands,
            reach_m=reach_m,
            silent_reach_m=silent_reach_m,
            min_silence_s=min_silence_s,
            min_presence_s=min_presence_s,
        )
    if near_dwells is not None and len(near_dwells):
        visits = pd.concat([visits, near_dwells], ignore_index=True) if len(visits) else near_dwells
    table = presence(
        visits,
        licences,
        pings_or_trips,
        start=first_day,
        end=last_day,
        timezone=timezone,
        min_presence_s=min_presence_s,
        suspensions=suspensions,
    )
    summary = presence_summary(table)
    hit = habitually_absent(
        summary, min_operating_days=min_operating_days, min_presence_share=min_presence_share
    )
    summary = summary.loc[hit]
    if summary.empty:
        return findings_from_records([])
    bounds = day_bounds_ns(
        np.asarray([np.datetime64(first_day, "D"), np.datetime64(last_day, "D")]), timezone
    )
    window = {"start": first_day.isoformat(), "end": last_day.isoformat(), "timezone": timezone}
    thresholds = {
        "window_days": int(window_days),
        "min_operating_days": int(min_operating_days),
        "min_presence_share": float(min_presence_share),
        "min_presence_s": float(min_presence_s),
        "reach_m": float(reach_m),
        "silent_reach_m": float(silent_reach_m),
        "min_silence_s": float(min_silence_s),
    }
    shapes = (
        dict(zip(stands["stand_id"].astype("str"), stands.geometry, strict=True))
        if stands is not None
        else {}
    )
    accessible = {v for v, f in fleet_facts(fleet).items() if f["accessible"] is True}
    unmetered = _unmetered(pings_or_trips, int(bounds[0]), int(bounds[2]))
    table = table.loc[table[OPERATED]]
    days_of = dict(iter(table.groupby(["vehicle_id", "stand_id"], sort=False)))
    away: dict[tuple[str, str], pd.DataFrame] = {}
    if suspensions is not None and len(suspensions):
        found = suspended_days(suspensions, start=first_day, end=last_day, licences=licences)
        away = {(str(v), str(s)): g for (v, s), g in found.groupby(["vehicle_id", "stand_id"])}
    records = []
    for vehicle_id, stand_id, share, operating, present, licensed in zip(
        summary["vehicle_id"].astype("str").tolist(),
        summary["stand_id"].astype("str").tolist(),
        summary["share"].to_numpy(dtype=np.float64).tolist(),
        summary["days_operating"].to_numpy(dtype=np.int64).tolist(),
        summary["days_present"].to_numpy(dtype=np.int64).tolist(),
        summary["days_licensed"].to_numpy(dtype=np.int64).tolist(),
        strict=True,
    ):
        days = days_of[(vehicle_id, stand_id)]
        conf = (
            0.5
            + 0.3 * (1.0 - share / min_presence_share)
            + 0.15 * (1.0 - min_operating_days / operating)
        )
        day_list, fixes = _day_evidence(days)
        details: dict[str, Any] = {
            "days_present": present,
            "days_operating": operating,
            "days_licensed": licensed,
            "share": round(share, 4),
            "window": window,
            "days": day_list,
            "fixes": fixes,
            "thresholds": thresholds,
        }
        if vehicle_id in accessible:  # art. 28 § 2: the Táxi Acessível's own rule
            details["accessible"] = True
        if vehicle_id in unmetered:  # operating days are days it moved: for review only
            details["unmetered"] = True
            conf *= UNMETERED_CONFIDENCE_FACTOR
        gone = away.get((vehicle_id, stand_id))
        if gone is not None:  # art. 45 § único: days it was ordered away, left out
            details["days_suspended"] = len(gone)
            details["suspended_days"] = [
                pd.Timestamp(d).date().isoformat() for d in gone[DATE].tolist()
            ]
            rows = []
            for rec in gone["suspension"].tolist():
                if rec not in rows:
                    rows.append(rec)
            details["suspensions"] = rows
        records.append(
            finding_record(
                kind=KIND,
                vehicle_id=vehicle_id,
                stand_id=stand_id,
                started_ns=int(bounds[0]),
                ended_ns=int(bounds[2]),
                confidence=min(MAX_CONFIDENCE, max(0.0, conf)),
                details=details,
                geometry=shapes.get(stand_id),
            )
        )
    return findings_from_records(records)


def habitually_absent(
    summary: pd.DataFrame,
    *,
    min_operating_days: int = DEFAULT_MIN_OPERATING_DAYS,
    min_presence_share: float = DEFAULT_MIN_PRESENCE_SHARE,
) -> pd.Series:
    """Tell which rows of a presence summary the rule finds habitually absent.

    Parameters
    ----------
    summary : pandas.DataFrame
        ``days_operating`` and ``share`` per (vehicle, stand), as from
        :func:`stands.presence.presence_summary`.
    min_operating_days : int, default 10
        Fewest operating days for a finding.
    min_presence_share : float, default 0.2
        A finding when present on a smaller share of the operating days.

    Returns
    -------
    pandas.Series
        Boolean, aligned with ``summary``: ``days_operating >= min_operating_days`` and
        ``share < min_presence_share`` (a row that never operated is False).
    """
    share = summary["share"].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        hit = (summary["days_operating"].to_numpy() >= min_operating_days) & (
            share < min_presence_share
        )
    return pd.Series(hit, index=summary.index, dtype="bool")


def _unmetered(pings_or_trips: pd.DataFrame | None, lo: int, hi: int) -> set[str]:
    """Vehicles whose operation in [lo, hi) ns is seen without a meter (movement only)."""
    if pings_or_trips is None or not len(pings_or_trips):
        return set()
    frame = pings_or_trips
    if "timestamp" not in frame.columns:  # trips: inferred from stops when the meter is unknown
        if "source" not in frame.columns:
            return set()
        at = utc_ns(frame["started_at"], name="started_at", what="as viagens")
        hit = (at >= lo) & (at < hi) & frame["source"].eq("stops").to_numpy(dtype=bool)
        return set(frame["vehicle_id"].astype("str").to_numpy(dtype=object)[hit].tolist())
    at = utc_ns(frame["timestamp"], name="timestamp", what="os pings")
    inside = (at >= lo) & (at < hi)
    if "meter" not in frame.columns:
        return set(frame["vehicle_id"].astype("str").to_numpy(dtype=object)[inside].tolist())
    inside &= in_service(frame["meter"])  # as presence: off is not operating
    vids = frame["vehicle_id"].astype("str").to_numpy(dtype=object)[inside]
    known = frame["meter"].notna().to_numpy(dtype=bool)[inside]
    return set(vids.tolist()) - set(vids[known].tolist())


def _check_options(
    *,
    stands: gpd.GeoDataFrame | None,
    timezone: str,
    window_days: int,
    min_operating_days: int,
    min_presence_share: float,
) -> None:
    check_timezone(timezone)
    _check_int(window_days=window_days, min_operating_days=min_operating_days)
    share_ok = isinstance(min_presence_share, int | float) and not isinstance(
        min_presence_share, bool
    )
    if not (share_ok and math.isfinite(min_presence_share) and 0 < min_presence_share <= 1):
        msg = f"'min_presence_share' era {min_presence_share!r}; esperado um número em (0, 1]"
        raise DetectorThresholdError(msg)
    if stands is not None and "stand_id" not in stands.columns:
        msg = "os pontos não têm a coluna 'stand_id'"
        raise DetectorInputError(msg)


def _check_int(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            msg = f"'{name}' era {value!r}; esperado um inteiro >= 1"
            raise DetectorThresholdError(msg)


def _last_day(
    visits: pd.DataFrame, pings_or_trips: pd.DataFrame | None, timezone: str
) -> dt.date | None:
    latest: list[int] = []
    sources = [(visits, "departed_at")]
    if pings_or_trips is not None:
        col = "timestamp" if "timestamp" in pings_or_trips.columns else "ended_at"
        sources.append((pings_or_trips, col))
    for frame, col in sources:
        if len(frame) and col in frame.columns:
            latest.append(int(utc_ns(frame[col], name=col, what="os dados").max()))
    if not latest:
        return None
    day = local_dates(np.asarray([max(latest)], dtype=np.int64), timezone)[0]
    return dt.date.fromisoformat(str(day))


def _seen(day: Any, prefix: str) -> dict[str, Any] | None:
    at = getattr(day, f"{prefix}_at")
    if at is pd.NaT or pd.isna(at):
        return None
    lat = getattr(day, f"{prefix}_lat")
    lon = getattr(day, f"{prefix}_lon")
    row = getattr(day, f"{prefix}_row")
    return {
        "timestamp": iso_utc(int(pd.Timestamp(at).value)),
        "lat": None if pd.isna(lat) else float(lat),
        "lon": None if pd.isna(lon) else float(lon),
        "row": None if pd.isna(row) else int(row),
        "source": str(getattr(day, f"{prefix}_source")),
    }


def _day_evidence(days: pd.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Operating days (presence, sightings, visits) and the fixes they rest on."""
    out: list[dict[str, Any]] = []
    fixes: list[dict[str, Any]] = []
    days = days.sort_values(DATE, ignore_index=True)
    for day, tail in zip(days.itertuples(index=False), days[CONTINUES].tolist(), strict=True):
        first, last = _seen(day, "first_seen"), _seen(day, "last_seen")
        out.append(
            {
                "date": pd.Timestamp(getattr(day, DATE)).date().isoformat(),
                "present": bool(getattr(day, PRESENT)),
                "presence_s": float(getattr(day, PRESENCE_S)),
                "first_seen": first,
                "last_seen": last,
                "visits": list(getattr(day, VISITS)),
            }
        )
        if tail:  # counted with the day before: one shift
            out[-1]["continues_previous_day"] = True
        fixes.extend(f for f in (first, last) if f is not None and f not in fixes)
    return out, fixes


# ------------------------------------------------------------------------------------- live


@functools.lru_cache(maxsize=4096)
def _day_bounds(day: int, timezone: str) -> tuple[int, int]:
    """Local midnights (epoch ns) starting and ending day number ``day``, as presence cuts."""
    bounds = day_bounds_ns(np.array([day], dtype="datetime64[D]"), timezone)
    return int(bounds[0]), int(bounds[1])


def _day_numbers(ns: npt.NDArray[np.int64], timezone: str) -> list[int]:
    """Local day number of each instant, cut at the midnights of the presence table."""
    out = []
    for t, day in zip(ns.tolist(), local_days(ns, timezone).tolist(), strict=True):
        start, end = _day_bounds(day, timezone)
        while t < start:  # a midnight moved by a DST change
            day -= 1
            start, end = _day_bounds(day, timezone)
        while t >= end:
            day += 1
            start, end = _day_bounds(day, timezone)
        out.append(int(day))
    return out


def _day_iso(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


def _day_int(value: dt.date | str) -> int:
    date = dt.date.fromisoformat(value) if isinstance(value, str) else value
    return (date - dt.date(1970, 1, 1)).days


def _new_state() -> dict[str, Any]:
    return {"days": {}, "visits": [], "next": None, "emitted": {}, "near": None}


def _take_sightings(states: dict[str, dict[str, Any]], pings: pd.DataFrame, timezone: str) -> None:
    """Keep each vehicle's first and last fix of each local day (the presence table's).

    The fixes of the call are cut to their days' first and last operation fixes
    (:func:`stands.presence.operation_fixes`, as batch), merged with the days kept; a day is
    ``metered`` (its third item) when one of its fixes had the meter known.
    """
    utc_ns(pings["timestamp"], name="timestamp", what="os pings")  # the kernel's own error
    days_fixes = operation_fixes(pings, timezone=timezone)
    if not len(days_fixes):
        return
    ns = utc_ns(days_fixes["timestamp"], name="timestamp", what="os pings")
    for vid, t, la, lo, row, day, known in zip(
        days_fixes["vehicle_id"].tolist(),
        ns.tolist(),
        days_fixes["lat"].tolist(),
        days_fixes["lon"].tolist(),
        days_fixes["row"].tolist(),
        _day_numbers(ns, timezone),
        days_fixes["meter"].notna().tolist(),
        strict=True,
    ):
        st = states.setdefault(str(vid), _new_state())
        rec = [int(t), la, lo, int(row)]
        iso = _day_iso(day)
        seen = st["days"].get(iso)
        if seen is None:
            st["days"][iso] = [rec, rec, known]
        else:  # ties as the presence table: the first fix stays first, the last one last
            if t < seen[0][0]:
                seen[0] = rec
            if t >= seen[1][0]:
                seen[1] = rec
            if known and not (len(seen) > 2 and seen[2]):
                seen[2:] = [True]
        if st["next"] is None:
            st["next"] = iso


def _take_visits(states: dict[str, dict[str, Any]], visits: pd.DataFrame, timezone: str) -> None:
    """Keep released visits (plain data)."""
    if not len(visits):
        return
    arrived = utc_ns(visits["arrived_at"], name="arrived_at", what="as visitas")
    departed = utc_ns(visits["departed_at"], name="departed_at", what="as visitas")
    n = len(visits)
    boarded = (
        visits["boarded"].fillna(False).to_numpy(dtype=bool)
        if "boarded" in visits.columns
        else np.zeros(n, dtype=bool)
    )

    def rows(name: str) -> list[int | None]:
        if name not in visits.columns:
            return [None] * n
        values = pd.to_numeric(visits[name]).astype("Int64")
        return [None if pd.isna(v) else int(v) for v in values]

    days = _day_numbers(arrived, timezone)
    how = visits["how"].tolist() if "how" in visits.columns else [None] * n
    for vid, sid, a, d, dwell, b, r0, r1, day, h in zip(
        visits["vehicle_id"].astype("str").tolist(),
        visits["stand_id"].astype("str").tolist(),
        arrived.tolist(),
        departed.tolist(),
        visits["dwell_s"].to_numpy(dtype=np.float64).tolist(),
        boarded.tolist(),
        rows("first_row"),
        rows("last_row"),
        days,
        how,
        strict=True,
    ):
        st = states.setdefault(str(vid), _new_state())
        rec = [sid, int(a), int(d), float(dwell), bool(b), r0, r1]
        st["visits"].append(rec + ([str(h)] if isinstance(h, str) else []))
        if st["next"] is None:
            st["next"] = _day_iso(day)


def _sightings_frame(
    states: Mapping[str, Mapping[str, Any]], vehicles: list[str], lo: str, hi: str
) -> pd.DataFrame:
    """Build the pings frame: each vehicle's first and last fix of the local days lo..hi (ISO)."""
    recs = []
    for vid in vehicles:
        for day, (first, last, *known) in sorted(states[vid]["days"].items()):
            if lo <= day <= hi:
                meter = "free" if known and known[0] else None  # the day's meter was known
                recs += [(vid, *first, meter)]
                recs += [(vid, *last, meter)] if last[0] != first[0] else []
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in recs], dtype="str"),
            "timestamp": pd.Series(
                pd.to_datetime(np.array([r[1] for r in recs], dtype=np.int64), unit="ns", utc=True)
            ).astype(pd.DatetimeTZDtype("ns", "UTC")),
            "lat": np.array([np.nan if r[2] is None else r[2] for r in recs], dtype=np.float64),
            "lon": np.array([np.nan if r[3] is None else r[3] for r in recs], dtype=np.float64),
            "row": np.array([r[4] for r in recs], dtype=np.int64),
            "meter": pd.Series([r[5] for r in recs], dtype=object),
        }
    )


def _visits_frame(
    states: Mapping[str, Mapping[str, Any]], vehicles: list[str], since_ns: int
) -> pd.DataFrame:
    """Build the visits frame of the vehicles' released visits departed at or after since_ns."""
    recs = [(vid, *v) for vid in vehicles for v in states[vid]["visits"] if v[2] >= since_ns]

    def utc(k: int) -> pd.Series:
        ns = np.array([r[k] for r in recs], dtype=np.int64)
        return pd.Series(pd.to_datetime(ns, unit="ns", utc=True)).astype(
            pd.DatetimeTZDtype("ns", "UTC")
        )

    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in recs], dtype="str"),
            "stand_id": pd.Series([r[1] for r in recs], dtype="str"),
            "arrived_at": utc(2),
            "departed_at": utc(3),
            "dwell_s": np.array([r[4] for r in recs], dtype=np.float64),
            "boarded": np.array([r[5] for r in recs], dtype=bool),
            "first_row": pd.array([r[6] for r in recs], dtype="Int64"),
            "last_row": pd.array([r[7] for r in recs], dtype="Int64"),
            "how": pd.Series([r[8] if len(r) > 8 else None for r in recs], dtype=object),
        }
    )


def advance_habitual_absence(
    states: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    visits: pd.DataFrame,
    *,
    licences: pd.DataFrame,
    as_of: dt.date | None = None,
    final: bool = False,
    unreleased: Mapping[str, int] | None = None,
    stands: gpd.GeoDataFrame | None = None,
    fleet: pd.DataFrame | None = None,
    suspensions: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    window_days: int = DEFAULT_WINDOW_DAYS,
    min_operating_days: int = DEFAULT_MIN_OPERATING_DAYS,
    min_presence_share: float = DEFAULT_MIN_PRESENCE_SHARE,
    min_presence_s: float = DEFAULT_MIN_PRESENCE_S,
    reach_m: float = DEFAULT_REACH_M,
    silent_reach_m: float = DEFAULT_SILENT_REACH_M,
    min_silence_s: float = DEFAULT_MIN_SILENCE_S,
) -> tuple[dict[str, dict[str, Any]], gpd.GeoDataFrame]:
    """Take new sightings and released visits; judge each vehicle's closed local days.

    The kernel of :func:`detect_habitual_absence` (``tracking.detectors.day_kernel``). A
    vehicle's days, from the first one it was seen on, are judged in order up to ``as_of``
    (with ``final`` and no ``as_of``: the last day of the data), each once every visit of the
    vehicle that started before the midnight ending it has been given (its ``unreleased``
    arrival, if any, is at or after that midnight): a visit across midnight, or one whose
    queue position waits on another vehicle, holds the day back until a later call. A day is
    judged by :func:`detect_habitual_absence` over the kept sightings and visits with
    ``as_of`` that day, so a finding is the batch's for that day. A (vehicle, stand) finding is
    returned once per window: after one, that pair's next finding is returned only for a
    window that does not overlap it (``window_days`` later), so a persistent absence is not
    reported every day.

    Parameters
    ----------
    states : mapping
        ``vehicle_id → state`` from the previous call (missing or None: nothing seen yet); not
        modified.
    pings : pandas.DataFrame
        New fixes (sightings): ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``,
        optional ``row``. A vehicle's fixes must come after its closed days.
    visits : pandas.DataFrame
        Newly released visits (any stand; the visits contract: ``vehicle_id``, ``stand_id``,
        ``arrived_at``, ``departed_at``, ``dwell_s``, optional ``boarded``, ``first_row``,
        ``last_row``).
    licences : pandas.DataFrame
        Licence frame (``stands/licences.py``): the vehicles judged and their stands.
    as_of : datetime.date, optional
        The latest local day closed (every fix up to its end given).
    final : bool, default False
        End of the input: nothing is held back by ``unreleased``; without ``as_of``, the days
        are judged up to the last day of the vehicles' data.
    unreleased : mapping of str to int, optional
        Per vehicle the arrival (ns) of its earliest visit not released yet
        (:func:`stands.visits.unreleased_arrivals`).
    stands, fleet, suspensions, timezone, window_days, min_operating_days, \
min_presence_share, min_presence_s, reach_m, silent_reach_m, min_silence_s
        As in :func:`detect_habitual_absence`; with ``stands``, the near and silent dwells
        (``stands/near.py``) are found in ``pings`` as they arrive (``near`` in the state).

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame)
        The state of each vehicle of ``states``, ``pings`` or ``visits`` (plain data: ``days``,
        per local day its first and last fix ``[ns, lat, lon, row]``; ``visits``, ``[stand_id,
        arrived_ns, departed_ns, dwell_s, boarded, first_row, last_row]``; ``next``, the next
        day to judge; ``emitted``, per stand the last day of a finding returned) and the
        findings of the days judged.

    Raises
    ------
    DetectorThresholdError
        If a threshold is out of range, the timezone unknown or ``as_of`` not a date.
    DetectorInputError
        If the licences lack ``vehicle_id`` or ``stands`` lacks ``stand_id``.
    """
    _check_options(
        stands=stands,
        timezone=timezone,
        window_days=window_days,
        min_operating_days=min_operating_days,
        min_presence_share=min_presence_share,
    )
    if as_of is not None and (not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime)):
        msg = f"'as_of' era {as_of!r}; esperado uma data (datetime.date)"
        raise DetectorThresholdError(msg)
    if "vehicle_id" not in licences.columns:
        msg = "as licenças não têm a coluna 'vehicle_id'"
        raise DetectorInputError(msg)
    out: dict[str, dict[str, Any]] = {
        str(v): json.loads(json.dumps(s)) for v, s in states.items() if s
    }
    _take_sightings(out, pings, timezone)
    _take_visits(out, visits, timezone)
    held = {} if final else dict(unreleased or {})
    if stands is not None:  # near and silent dwells, found as the fixes arrive
        mine = pings["vehicle_id"].astype("str").isin(licences["vehicle_id"].astype("str"))
        near_states, dwells = advance_near_dwells(
            {v: st.get("near") for v, st in out.items()},
            pings.loc[mine.to_numpy(dtype=bool)],
            licences=licences,
            stands=stands,
            final=final,
            reach_m=reach_m,
            silent_reach_m=silent_reach_m,
            min_silence_s=min_silence_s,
            min_presence_s=min_presence_s,
        )
        for vid, st in near_states.items():
            out.setdefault(vid, _new_state())["near"] = st
        _take_visits(out, dwells, timezone)
        for vid, at in open_arrivals(near_states).items():  # a dwell still growing holds its days
            held[vid] = min(int(held.get(vid, at)), at)
    licensed = [str(v) for v in licences["vehicle_id"].tolist()]
    judged = set(licensed)
    if as_of is not None:
        last = _day_int(as_of)
    else:  # nothing closed yet, or the end of the data
        last = _last_data_day(out, timezone) if final else -(2**31)
    ends: dict[int, int] = {}
    due: dict[int, list[str]] = {}
    for vid in sorted(out):
        st = out[vid]
        if st["next"] is None:
            continue
        day = _day_int(st["next"])
        bound = held.get(vid)
        while day <= last:
            if day not in ends:
                ends[day] = _day_bounds(day, timezone)[1]
            if bound is not None and int(bound) < ends[day]:
                break
            due.setdefault(day, []).append(vid)
            day += 1
        st["next"] = _day_iso(day)
    frames = []
    for day in sorted(due):
        vids = [v for v in due[day] if v in judged]
        if not vids:
            continue
        lo = day - (window_days - 1)
        found = detect_habitual_absence(
            _visits_frame(out, vids, _day_bounds(lo, timezone)[0]),
            licences.loc[np.isin(np.array(licensed, dtype=object), vids)],
            _sightings_frame(out, vids, _day_iso(lo), _day_iso(day)),
            as_of=dt.date(1970, 1, 1) + dt.timedelta(days=day),
            stands=stands,
            fleet=fleet,
            suspensions=suspensions,
            pings=_sightings_frame(out, [], "", ""),  # the dwells are in the visits
            timezone=timezone,
            window_days=window_days,
            min_operating_days=min_operating_days,
            min_presence_share=min_presence_share,
            min_presence_s=min_presence_s,
            reach_m=reach_m,
            silent_reach_m=silent_reach_m,
            min_silence_s=min_silence_s,
        )
        keep = []
        for k, (vid, sid) in enumerate(
            zip(found["vehicle_id"].tolist(), found["stand_id"].tolist(), strict=True)
        ):
            before = out[vid]["emitted"].get(sid)
            if before is None or day - _day_int(before) >= window_days:
                keep.append(k)
                out[vid]["emitted"][sid] = _day_iso(day)
        if keep:
            frames.append(found.iloc[keep])
    for st in out.values():
        _prune(st, window_days, timezone)
    if not frames:
        return out, findings_from_records([])
    found = gpd.GeoDataFrame(pd.concat(frames, ignore_index=True), geometry="geometry", crs=4326)
    return out, found.sort_values(["kind", "started_at", "finding_id"]).reset_index(drop=True)


def _last_data_day(states: Mapping[str, Mapping[str, Any]], timezone: str) -> int:
    """Return the local day of the vehicles' latest sighting or visit departure."""
    latest = [day[1][0] for s in states.values() for day in s["days"].values()]
    latest += [v[2] for s in states.values() for v in s["visits"]]
    return _day_numbers(np.asarray([max(latest, default=0)], dtype=np.int64), timezone)[0]


def _prune(st: dict[str, Any], window_days: int, timezone: str) -> None:
    """Drop sightings, visits and emissions older than every window still to be judged."""
    if st["next"] is None:
        return
    oldest = _day_int(st["next"])
    floor = oldest - (window_days - 1)
    floor_iso = _day_iso(floor)
    floor_ns = _day_bounds(floor, timezone)[0]
    st["days"] = {d: v for d, v in st["days"].items() if d >= floor_iso}
    st["visits"] = [v for v in st["visits"] if v[2] >= floor_ns]
    st["emitted"] = {s: d for s, d in st["emitted"].items() if oldest - _day_int(d) < window_days}


KERNEL = DayKernel(KIND, detect_habitual_absence, advance_habitual_absence)
"""The rule as a day kernel (``tracking.detectors.day_kernel``)."""
