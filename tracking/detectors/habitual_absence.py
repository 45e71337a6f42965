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

confidence
    ``0.5 + 0.3·(1 − share/min_presence_share) + 0.15·(1 − min_operating_days/days_operating)``,
    at most 0.95: it grows as the share falls below the threshold and with the number of
    operating days observed.

``details`` lists every operating day of the window with its presence flag, the first and last
sighting of the vehicle that day (the evidence that it operated) and the day's visits to the
stand. Geometry: the stand's polygon when ``stands`` is given, else None. ``started_at`` and
``ended_at``: local midnight starting the window and local midnight after ``as_of``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from stands.presence import (
    DATE,
    DEFAULT_MIN_PRESENCE_S,
    OPERATED,
    PRESENCE_S,
    PRESENT,
    VISITS,
    day_bounds_ns,
    presence,
    presence_summary,
)
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._track_kernels import (
    check_timezone,
    finding_record,
    findings_from_records,
    iso_utc,
    local_dates,
    utc_ns,
)

KIND = "habitual_absence"
DEFAULT_TIMEZONE = "America/Sao_Paulo"
DEFAULT_WINDOW_DAYS = 30
"""Local days observed, ending on ``as_of`` (POA art. 49; art. 28 § 2)."""
DEFAULT_MIN_OPERATING_DAYS = 10
"""Fewer operating days in the window: not enough evidence, no finding."""
DEFAULT_MIN_PRESENCE_SHARE = 0.2
"""Present on fewer than this share of the operating days: a finding."""
MAX_CONFIDENCE = 0.95


def detect_habitual_absence(
    visits: pd.DataFrame,
    licences: pd.DataFrame,
    pings_or_trips: pd.DataFrame | None,
    *,
    as_of: dt.date | None = None,
    stands: gpd.GeoDataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    window_days: int = DEFAULT_WINDOW_DAYS,
    min_operating_days: int = DEFAULT_MIN_OPERATING_DAYS,
    min_presence_share: float = DEFAULT_MIN_PRESENCE_SHARE,
    min_presence_s: float = DEFAULT_MIN_PRESENCE_S,
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
    last_day = as_of if as_of is not None else _last_day(visits, pings_or_trips, timezone)
    if last_day is None:
        return findings_from_records([])
    if isinstance(last_day, dt.datetime):
        last_day = last_day.date()
    first_day = last_day - dt.timedelta(days=window_days - 1)
    table = presence(
        visits,
        licences,
        pings_or_trips,
        start=first_day,
        end=last_day,
        timezone=timezone,
        min_presence_s=min_presence_s,
    )
    summary = presence_summary(table)
    with np.errstate(invalid="ignore"):
        hit = (summary["days_operating"] >= min_operating_days) & (
            summary["share"] < min_presence_share
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
    }
    shapes = (
        dict(zip(stands["stand_id"].astype("str"), stands.geometry, strict=True))
        if stands is not None
        else {}
    )
    table = table.loc[table[OPERATED]]
    days_of = dict(iter(table.groupby(["vehicle_id", "stand_id"], sort=False)))
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
    for day in days.sort_values(DATE).itertuples(index=False):
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
        fixes.extend(f for f in (first, last) if f is not None and f not in fixes)
    return out, fixes
