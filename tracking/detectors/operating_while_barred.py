"""Service while the prefixo may not operate (status or expired documents).

The prefixo is suspended, Fora de Operação, revoked or reserved, or its alvará or vistoria
expired.

Rules served (the rulebook picks the article from ``details.reason``):

- ``suspended`` — Porto Alegre art. 60 V ("operar quando o prefixo se encontrar suspenso em
  decorrência de penalidade imposta"); Pinto Bandeira art. 26 IV.
- ``out_of_operation`` — Porto Alegre art. 59 V ("operar ... quando se encontrar fora de
  operação"; the measure is art. 37).
- ``revoked`` — operating without a delegation (Porto Alegre art. 60; Pinto Bandeira art. 25 IX).
- ``reserved`` — the reserva da autorização (Porto Alegre art. 15) is a pause: the alvará is
  handed in (§ 1 III), so operating during it is operating without authorisation.
- ``alvara_expired`` — Porto Alegre art. 58 XII ("operar com o alvará de tráfego vencido");
  Pinto Bandeira art. 31 XI (AT vencida).
- ``inspection_expired`` — Porto Alegre art. 58 III ("operar com o selo de vistoria vencido").
- ``termo_recolhido`` — the registry's ``termo_recolhido_since``–``termo_recolhido_until``
  (inclusive; empty until: open) covers the day: fretamento art. 25 IV ("operar com o Termo
  de Autorização recolhido").
- ``before_alvara`` — the day is before ``alvara_first_issued_on`` (the vehicle's first alvará,
  the start of its authorisation; never a renewal's date): Porto Velho art. 15 ("somente
  deverá ser iniciada após a emissão do alvará de tráfego"). The issue day itself is fine.
- ``vehicle_over_age`` — with ``max_vehicle_age_years`` set: the vehicle's age exceeds it.
  Pinto Bandeira art. 10 ("idade máxima de 05 (cinco) anos, contados do ano de fabricação";
  measures art. 44 XV and 45 VIII, "vida útil vencida"), fretamento art. 12 (15 years,
  "contada do ano do primeiro emplacamento", § único). Age rule (both texts count from a
  *year*): the age on a local day is ``year(day) - base year`` (``year`` of manufacture, or the
  year of ``first_registered_on`` with ``vehicle_age_counted_from="first_registration"``);
  a vehicle of base year Y with a 5-year limit may operate through 31 December Y+5 and is
  over age from 1 January Y+6 — the latest reading (a vehicle made on 31 December Y is
  exactly 5 years old at the end of Y+5). An unknown base year is not judged.
- ``substitution_expired`` — with ``max_substitution_days`` set: the vehicle is a provisional
  substitute (``substitution_since``) for more than that many days: fretamento art. 13
  ("cadastramento provisório, por 30 (trinta) dias"). The days are counted from the day after
  ``substitution_since``: with 30, ``since + 30`` is the last lawful day. A substitution within
  its days bars nothing. The substituted plate is personal data: it stays in the registry
  (the fleet API shows it to agents, audited), never in the finding, which alerts carry.
- ``inspection_overdue`` — with ``max_inspection_age_days`` set: more than that many days since
  ``last_inspection_on``: Pinto Bandeira art. 32 VII (365 days), Porto Alegre art. 57 XIV with
  art. 33 § 6º (the period is in Lei 11.582/2014, outside the texts: set it per run). The
  registry keeps only the *latest* inspection: a day before it cannot be judged (the earlier
  one is unknown) and is never barred; an inspection done late but on or before the day
  counts from its own date. With ``inspection_bands`` (fretamento art. 14 a–e: the interval
  by the vehicle's age, from the rulebook's ``[[planning.inspection_bands]]``), the limit is
  the interval of the vehicle's band instead. Age in whole years as for ``vehicle_over_age``
  (fretamento art. 12 § único: year of the day − year of the first registration). The
  interval used is the larger of the band of the age on the day and the band of the age on
  the day of the last inspection (the due date set when it was done: a vehicle entering a
  stricter band on 1 January is not overdue for an inspection done under the looser one); a
  band marked ``overlaps_previous`` (art. 14 c, "8 anos completos", where b reads "a 08
  anos") also takes the previous band's interval at its first year, the larger applying. An
  unknown age, or one outside every band, takes the largest interval (120 days in
  fretamento, the safe bound). The evidence names the band (provision, interval, ages).

The three thresholds default to None (the reason is off): the limits differ by law, so each
municipality's rulebook or ``--thresholds`` turns them on.

Definitions (each is shown in the evidence):

service
    A meter trip of ``tracking/trips.py``: a run of ``occupied`` fixes. A movement between two
    stops of a vehicle without meter data (``source == "stops"``) says that the vehicle moved,
    not that it operated: a car Fora de Operação may transit with the luminoso and taxímetro
    covered (Porto Alegre art. 38 II; to its new vistoria, art. 37 § 2º), a suspended one may be
    driven privately. It is service only with ``include_inferred_trips`` (off by default), at
    lower confidence. Trips shorter than ``min_trip_duration_s`` (meter blips), or driving
    less than a stop's extent (a meter on in a parked car), are not service
    (:func:`tracking.detectors._meter_trips.service_trips`).
barred day
    The local date (``timezone``) of the trip's start. A status bars the dates
    ``status_since``–``status_until`` (inclusive; an empty ``status_until`` is open); a document
    bars the dates after its ``*_valid_until`` (the validity day itself is fine; an empty one
    bars nothing). A status without ``status_since`` is known only as of the registry's
    snapshot, ``as_of`` (the run's ``--as-of``): it bars ``as_of``–``status_until``, with lower
    confidence, and no earlier day (the suspension may have begun the day before the
    snapshot); without ``as_of`` it bars no day.
finding
    One per (vehicle, local day) with service on a barred day: ``started_at`` the first barred
    trip's start, ``ended_at`` the last one's end. ``details.reason`` is the most serious reason
    (order of :data:`REASONS`), ``details.reasons`` all of them with their registry evidence.
    A per-day finding is what an agent writes one auto for; a per-reason finding would give two
    findings with the same start (and the same id).
confidence
    ``base * (0.7 + 0.3 * min(1, service_s / 1800)) * q``: ``base`` 0.95 when a meter trip is
    among the day's service, 0.6 with only stop-inferred trips; ``q`` is 0.7 when the main
    reason is a status whose ``status_since`` is unknown (the evidence names the snapshot day,
    ``status_known_since``), ``min(1, 0.8 + 0.2 * days_expired / 30)`` for an expired
    document (a day-old expiry may be paperwork in progress), the same with the days over the
    limit for ``substitution_expired`` and ``inspection_overdue``, else 1
    (``termo_recolhido``, ``before_alvara``, ``vehicle_over_age``: registry facts of the day).
    Clipped to [0.05, 0.95].

Live (:data:`KERNEL`): the rule runs on meter trips cut from the fixes (stop inference needs the
future), with no ``as_of``: a status period whose start the registry lacks bars no day live. A
vehicle keeps the fixes of its open day from the day's first trip while the fleet bars that day,
else only its open trip: at most one local day of fixes. A day's finding is emitted once a fix
of a later day (and no trip of that day still open) has arrived. Later fixes only extend a
finding (a trip's day is its start's; a trip once long enough stays so), so the kernel's
``open_detect`` is the rule itself: the live engine announces a barred day's finding from its
first trip long enough, the trip still running, and completes it as the day goes on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.calendar import DEFAULT_TIMEZONE
from tracking import frames as fr
from tracking.arrays import NS, iso_utc
from tracking.detectors._errors import DetectorThresholdError, FleetFrameError
from tracking.detectors._evidence import (
    NO_DAY_HIGH,
    NO_DAY_LOW,
    check_threshold,
    clip_confidence,
    day_array,
    day_iso,
    fix_record,
    local_days,
    ping_rows,
    require_columns,
    sorted_view,
    utc_ns,
    zone,
)
from tracking.detectors._meter_trips import meter_trips, open_trips, service_trips
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.kernel import TrackKernel

KIND = "operating_while_barred"
REASONS = (
    "revoked",
    "suspended",
    "out_of_operation",
    "reserved",
    "termo_recolhido",
    "before_alvara",
    "alvara_expired",
    "vehicle_over_age",
    "substitution_expired",
    "inspection_expired",
    "inspection_overdue",
)
AGE_BASES = ("manufacture", "first_registration")
"""What ``vehicle_age_counted_from`` may name: the year of manufacture (``year``) or of
``first_registered_on``."""
_DATE_COLUMNS = (
    ("status_since", "NO_DAY_LOW"),
    ("status_until", "NO_DAY_HIGH"),
    ("alvara_valid_until", "NO_DAY_HIGH"),
    ("inspection_valid_until", "NO_DAY_HIGH"),
    ("first_registered_on", "NO_DAY_HIGH"),
    ("last_inspection_on", "NO_DAY_HIGH"),
    ("alvara_first_issued_on", "NO_DAY_LOW"),
    ("substitution_since", "NO_DAY_HIGH"),
    ("termo_recolhido_since", "NO_DAY_HIGH"),
    ("termo_recolhido_until", "NO_DAY_HIGH"),
)
"""Registry dates read by the rule, with the day an empty cell stands for (one that bars
nothing)."""
BARRING_STATUSES = ("revoked", "suspended", "out_of_operation", "reserved")
KNOWN_STATUSES = ("active", *BARRING_STATUSES)
DEFAULT_MIN_TRIP_DURATION_S = 60.0
DEFAULT_MAX_GAP_S = 300.0
MAX_TRIPS_IN_DETAILS = 50
_STATUS_CODE = {s: i for i, s in enumerate(BARRING_STATUSES)}
_TRIP_COLUMNS = (
    "vehicle_id",
    "started_at",
    "ended_at",
    "pickup_lat",
    "pickup_lon",
    "dropoff_lat",
    "dropoff_lon",
)


def _registry(record: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """One fleet record as day numbers: status code (-1 none), bounds, dates, base year."""
    raw = record.get("status")
    status = None if raw is None or (not isinstance(raw, str) and pd.isna(raw)) else str(raw)
    status = None if status is None else status.strip().lower() or None
    if status is not None and status not in KNOWN_STATUSES:
        msg = f"'status' de {what} era {raw!r}; esperado um de {', '.join(KNOWN_STATUSES)}"
        raise FleetFrameError(msg)
    bounds = {"NO_DAY_LOW": NO_DAY_LOW, "NO_DAY_HIGH": NO_DAY_HIGH}
    days = {
        name: int(day_array([record.get(name)], column=name, what=what, missing=bounds[m])[0])
        for name, m in _DATE_COLUMNS
    }
    year = record.get("year")
    if year is None or (not isinstance(year, str) and pd.isna(year)):
        year_of_manufacture = None
    else:
        try:
            number = float(year) if isinstance(year, float | np.floating) else None
            if number is not None and not number.is_integer():
                raise ValueError
            year_of_manufacture = int(number) if number is not None else int(str(year).strip())
        except ValueError:
            msg = f"'year' de {what} era {year!r}; esperado um ano como 2019"
            raise FleetFrameError(msg) from None
    return {
        "status": status,
        "code": _STATUS_CODE.get(status or "", -1),
        **days,
        "year": year_of_manufacture,
    }


def _year_of_day(day: NDArray[np.int64]) -> NDArray[np.int64]:
    """Calendar year of day numbers (days since 1970-01-01)."""
    years = day.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64)
    return np.asarray(years + 1970, dtype=np.int64)


def _base_year(reg: Mapping[str, Any], counted_from: str) -> int | None:
    """Return the year a vehicle's age counts from (None when the registry lacks it)."""
    if counted_from == "manufacture":
        return None if reg["year"] is None else int(reg["year"])
    if reg["first_registered_on"] == NO_DAY_HIGH:
        return None
    return int(_year_of_day(np.array([reg["first_registered_on"]], dtype=np.int64))[0])


_NO_YEAR = np.iinfo(np.int64).max // 4


def _band_interval(
    age: NDArray[np.int64],
    known: NDArray[np.bool_],
    bands: tuple[dict[str, Any], ...],
    fallback: int,
) -> NDArray[np.int64]:
    """Interval in days of each age's band (``fallback`` when unknown or outside the bands)."""
    out = np.full(len(age), fallback, dtype=np.int64)
    for k, band in enumerate(bands):
        hit = known & (age >= band["age_min_years"]) & (age <= band["age_max_years"])
        out[hit] = band["interval_days"]
        if band["overlaps_previous"] and k > 0:
            edge = known & (age == band["age_min_years"])
            out[edge] = max(band["interval_days"], bands[k - 1]["interval_days"])
    return out


def inspection_limit_days(
    day: NDArray[np.int64],
    *,
    columns: Mapping[str, NDArray[np.int64]],
    max_inspection_age_days: int | None,
    inspection_bands: tuple[dict[str, Any], ...] | None,
) -> NDArray[np.int64] | None:
    """Most days since the last inspection on each day (None: ``inspection_overdue`` is off).

    Without bands, ``max_inspection_age_days``; with them, the larger of the bands' intervals
    at the age on the day and at the age on the last inspection's day (see the module
    docstring).
    """
    if not inspection_bands:
        if max_inspection_age_days is None:
            return None
        return np.full(len(day), max_inspection_age_days, dtype=np.int64)
    fallback = max(
        [b["interval_days"] for b in inspection_bands]
        + ([] if max_inspection_age_days is None else [max_inspection_age_days])
    )
    base = columns["base_year"]
    known = base != _NO_YEAR
    last = columns["last_inspection_on"]
    has_last = last != NO_DAY_HIGH
    age_day = _year_of_day(day) - np.where(known, base, 0)
    age_last = _year_of_day(np.where(has_last, last, day)) - np.where(known, base, 0)
    at_day = _band_interval(age_day, known, inspection_bands, fallback)
    at_last = _band_interval(age_last, known & has_last, inspection_bands, fallback)
    return np.maximum(at_day, at_last)


def barred_reasons(
    day: NDArray[np.int64],
    *,
    columns: Mapping[str, NDArray[np.int64]],
    max_vehicle_age_years: int | None = None,
    max_inspection_age_days: int | None = None,
    max_substitution_days: int | None = None,
    inspection_bands: tuple[dict[str, Any], ...] | None = None,
) -> NDArray[np.bool_]:
    """Which of :data:`REASONS` bar each local day (the kernel shared by batch and live).

    Parameters
    ----------
    day : numpy.ndarray of int64
        Local days (days since 1970-01-01).
    columns : mapping of str to numpy.ndarray of int64
        Per day, the registry as numbers: ``code`` (index into :data:`BARRING_STATUSES`, -1
        for none), ``base_year`` (the year the age counts from; very large when unknown) and
        every date of ``_DATE_COLUMNS`` (the empty ones as the day that bars nothing).
    max_vehicle_age_years, max_inspection_age_days, max_substitution_days : int, optional
        The limits of the module docstring; None turns the reason off.
    inspection_bands : tuple of dict, optional
        The age bands of the inspection interval (:func:`check_limits` normalises them).

    Returns
    -------
    numpy.ndarray of bool, shape (n, len(REASONS))
    """
    c = columns
    in_status = (c["status_since"] <= day) & (day <= c["status_until"])
    out = np.zeros((len(day), len(REASONS)), dtype=bool)
    for j, status in enumerate(BARRING_STATUSES):
        out[:, REASONS.index(status)] = in_status & (c["code"] == j)
    out[:, REASONS.index("alvara_expired")] = day > c["alvara_valid_until"]
    out[:, REASONS.index("inspection_expired")] = day > c["inspection_valid_until"]
    out[:, REASONS.index("termo_recolhido")] = (c["termo_recolhido_since"] <= day) & (
        day <= c["termo_recolhido_until"]
    )
    out[:, REASONS.index("before_alvara")] = day < c["alvara_first_issued_on"]
    if max_vehicle_age_years is not None:
        known = c["base_year"] != _NO_YEAR
        age = _year_of_day(day) - c["base_year"]
        out[:, REASONS.index("vehicle_over_age")] = known & (age > max_vehicle_age_years)
    if max_substitution_days is not None:
        since = c["substitution_since"]
        out[:, REASONS.index("substitution_expired")] = (since != NO_DAY_HIGH) & (
            day > since + max_substitution_days
        )
    limit = inspection_limit_days(
        day,
        columns=c,
        max_inspection_age_days=max_inspection_age_days,
        inspection_bands=inspection_bands,
    )
    if limit is not None:
        last = c["last_inspection_on"]
        out[:, REASONS.index("inspection_overdue")] = (last <= day) & (day - last > limit)
    return out


def _band_of(age: int | None, bands: tuple[dict[str, Any], ...]) -> dict[str, Any] | None:
    """Return the band an age falls in, as evidence (None: unknown age or outside all)."""
    if age is None:
        return None
    for k, band in enumerate(bands):
        if band["age_min_years"] <= age <= band["age_max_years"]:
            shown = {
                "provision": band["provision"],
                "age_min_years": band["age_min_years"],
                "age_max_years": band["age_max_years"],
                "interval_days": band["interval_days"],
            }
            if band["overlaps_previous"] and k > 0 and age == band["age_min_years"]:
                previous = bands[k - 1]
                shown["also_read_as"] = previous["provision"]
                shown["interval_days"] = max(band["interval_days"], previous["interval_days"])
            return shown
    return None


def _inspection_evidence(
    reg: Mapping[str, Any], day: int, limits: Mapping[str, Any]
) -> dict[str, Any]:
    """Registry evidence of ``inspection_overdue``: the last inspection and the limit's band."""
    last = reg["last_inspection_on"]
    columns = _columns([dict(reg)], counted_from=limits["vehicle_age_counted_from"])
    limit = inspection_limit_days(
        np.array([day], dtype=np.int64),
        columns=columns,
        max_inspection_age_days=limits["max_inspection_age_days"],
        inspection_bands=limits["inspection_bands"],
    )
    days = int(limit[0]) if limit is not None else 0  # on: the reason needs it
    item: dict[str, Any] = {
        "reason": "inspection_overdue",
        "last_inspection_on": day_iso(last),
        "days_since": int(day - last),
        "max_inspection_age_days": days,
        "days_over": int(day - last - days),
    }
    bands = limits["inspection_bands"]
    if bands:
        base = _base_year(reg, limits["vehicle_age_counted_from"])
        year = int(_year_of_day(np.array([day, last], dtype=np.int64))[0])
        last_year = int(_year_of_day(np.array([last], dtype=np.int64))[0])
        age_day = None if base is None else year - base
        age_last = None if base is None else last_year - base
        item["inspection_band"] = {
            "counted_from": limits["vehicle_age_counted_from"],
            "base_year": base,
            "age_years": age_day,
            "band": _band_of(age_day, bands),
            "age_years_at_last_inspection": age_last,
            "band_at_last_inspection": _band_of(age_last, bands),
            "unknown_age_interval_days": max(b["interval_days"] for b in bands),
        }
    return item


def _optional_day(value: int, *, empty: int) -> str | None:
    return None if value == empty else day_iso(value)


def _reason_evidence(
    reasons: list[str],
    reg: Mapping[str, Any],
    day: int,
    limits: Mapping[str, Any],
    *,
    as_of_day: int | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Registry evidence of each reason and the evidence factor ``q`` of the main one."""
    out: list[dict[str, Any]] = []
    for reason in reasons:
        if reason in BARRING_STATUSES:
            item: dict[str, Any] = {
                "reason": reason,
                "status": reg["status"],
                "status_since": _optional_day(reg["status_since"], empty=NO_DAY_LOW),
                "status_until": _optional_day(reg["status_until"], empty=NO_DAY_HIGH),
            }
            if item["status_since"] is None and as_of_day is not None:
                item["status_known_since"] = day_iso(as_of_day)  # the registry's snapshot
        elif reason in ("alvara_expired", "inspection_expired"):
            column = (
                "alvara_valid_until" if reason == "alvara_expired" else "inspection_valid_until"
            )
            item = {
                "reason": reason,
                column: day_iso(reg[column]),
                "days_expired": int(day - reg[column]),
            }
        elif reason == "termo_recolhido":
            item = {
                "reason": reason,
                "termo_recolhido_since": day_iso(reg["termo_recolhido_since"]),
                "termo_recolhido_until": _optional_day(
                    reg["termo_recolhido_until"], empty=NO_DAY_HIGH
                ),
            }
        elif reason == "before_alvara":
            item = {
                "reason": reason,
                "alvara_first_issued_on": day_iso(reg["alvara_first_issued_on"]),
                "days_before": int(reg["alvara_first_issued_on"] - day),
            }
        elif reason == "vehicle_over_age":
            counted_from = limits["vehicle_age_counted_from"]
            base = _base_year(reg, counted_from) or 0  # known: the reason needs it
            item = {
                "reason": reason,
                "counted_from": counted_from,
                "year": reg["year"],
                "first_registered_on": _optional_day(reg["first_registered_on"], empty=NO_DAY_HIGH),
                "base_year": base,
                "age_years": int(_year_of_day(np.array([day], dtype=np.int64))[0]) - base,
                "max_vehicle_age_years": int(limits["max_vehicle_age_years"]),
            }
        elif reason == "substitution_expired":
            since = reg["substitution_since"]
            item = {
                "reason": reason,
                "substitution_since": day_iso(since),
                "days_since": int(day - since),
                "max_substitution_days": int(limits["max_substitution_days"]),
                "days_over": int(day - since - limits["max_substitution_days"]),
            }
        else:  # inspection_overdue
            item = _inspection_evidence(reg, day, limits)
        out.append(item)
    main = out[0]
    if main["reason"] in BARRING_STATUSES:
        q = 0.7 if main["status_since"] is None else 1.0
    elif "days_expired" in main:
        q = min(1.0, 0.8 + 0.2 * main["days_expired"] / 30.0)
    elif "days_over" in main:
        q = min(1.0, 0.8 + 0.2 * main["days_over"] / 30.0)
    else:
        q = 1.0
    return out, q


def _finding_row(
    *,
    vehicle_id: str,
    day: int,
    reasons: list[str],
    reg: Mapping[str, Any],
    trips: list[dict[str, Any]],
    timezone: str,
    min_trip_duration_s: float,
    limits: Mapping[str, Any],
    as_of_day: int | None = None,
) -> tuple[dict[str, Any], Any]:
    """One finding from a vehicle-day's barred trips (in start order)."""
    evidence, q = _reason_evidence(reasons, reg, day, limits, as_of_day=as_of_day)
    service_s = sum(t["ended_ns"] - t["started_ns"] for t in trips) / NS
    base = 0.95 if any(t["source"] == "meter" for t in trips) else 0.6
    conf = base * (0.7 + 0.3 * min(1.0, service_s / 1800.0)) * q
    shown = trips[:MAX_TRIPS_IN_DETAILS]
    fixes = [f for t in shown for f in (t["pickup"], t["dropoff"])]
    details = {
        "reason": reasons[0],
        "reasons": evidence,
        "local_date": day_iso(day),
        "timezone": timezone,
        "n_trips": len(trips),
        "service_s": float(service_s),
        "trips": [
            {
                "trip_id": t["trip_id"],
                "started_at": iso_utc(t["started_ns"]),
                "ended_at": iso_utc(t["ended_ns"]),
                "duration_s": (t["ended_ns"] - t["started_ns"]) / NS,
                "source": t["source"],
            }
            for t in shown
        ],
        "fixes": fixes,
        "thresholds": {"min_trip_duration_s": float(min_trip_duration_s)}
        | {k: v for k, v in limits.items() if _limit_is_set(k, limits)},
    }
    first = trips[0]["pickup"]
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": None,
        "started_at": pd.Timestamp(trips[0]["started_ns"], unit="ns", tz="UTC"),
        "ended_at": pd.Timestamp(max(t["ended_ns"] for t in trips), unit="ns", tz="UTC"),
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, shapely.Point(first["lon"], first["lat"])


def _limit_is_set(name: str, limits: Mapping[str, Any]) -> bool:
    """Whether a limit is on (shown in the evidence); the age basis only with the age limit."""
    if name == "vehicle_age_counted_from":
        return limits["max_vehicle_age_years"] is not None
    if name == "inspection_bands":  # the band used is in the reason's evidence
        return False
    return limits[name] is not None


def check_limits(
    *,
    max_vehicle_age_years: int | None,
    vehicle_age_counted_from: str,
    max_inspection_age_days: int | None,
    max_substitution_days: int | None,
    inspection_bands: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Check the registry limits and return them as a mapping (the evidence's thresholds).

    ``inspection_bands`` come back as a tuple of dicts sorted by age (``age_min_years``,
    ``age_max_years``, ``interval_days``, ``provision``, ``overlaps_previous``), or None.

    Raises
    ------
    DetectorThresholdError
        A limit is negative or not a whole number, the age basis is unknown, or a band is
        malformed or overlaps another.
    """
    limits: dict[str, Any] = {
        "max_vehicle_age_years": max_vehicle_age_years,
        "vehicle_age_counted_from": vehicle_age_counted_from,
        "max_inspection_age_days": max_inspection_age_days,
        "max_substitution_days": max_substitution_days,
        "inspection_bands": _check_bands(inspection_bands),
    }
    for name in ("max_vehicle_age_years", "max_inspection_age_days", "max_substitution_days"):
        value = limits[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            msg = f"'{name}' era {value!r}; esperado um número inteiro não negativo ou vazio"
            raise DetectorThresholdError(msg)
        limits[name] = int(value)
    if vehicle_age_counted_from not in AGE_BASES:
        msg = (
            f"'vehicle_age_counted_from' era {vehicle_age_counted_from!r}; "
            f"esperado um de {', '.join(AGE_BASES)}"
        )
        raise DetectorThresholdError(msg)
    return limits


def _whole(value: Any, *, name: str, positive: bool = False) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or value < (1 if positive else 0)
    ):
        least = "positivo" if positive else "não negativo"
        msg = f"'inspection_bands': '{name}' era {value!r}; esperado um número inteiro {least}"
        raise DetectorThresholdError(msg)
    return int(value)


def _check_bands(
    bands: Sequence[Mapping[str, Any]] | None,
) -> tuple[dict[str, Any], ...] | None:
    """Return the inspection bands checked and sorted by age (None when not given)."""
    if bands is None or len(bands) == 0:
        return None
    out: list[dict[str, Any]] = []
    for band in bands:
        if not isinstance(band, Mapping):
            msg = f"'inspection_bands': esperado uma tabela por faixa, era {band!r}"
            raise DetectorThresholdError(msg)
        low = _whole(band.get("age_min_years"), name="age_min_years")
        high = _whole(band.get("age_max_years"), name="age_max_years")
        if high < low:
            msg = f"'inspection_bands': age_max_years {high} < age_min_years {low}"
            raise DetectorThresholdError(msg)
        provision = band.get("provision")
        out.append(
            {
                "age_min_years": low,
                "age_max_years": high,
                "interval_days": _whole(
                    band.get("interval_days"), name="interval_days", positive=True
                ),
                "provision": None if provision is None else str(provision),
                "overlaps_previous": bool(band.get("overlaps_previous", False)),
            }
        )
    out.sort(key=lambda b: b["age_min_years"])
    for before, after in zip(out, out[1:], strict=False):
        if after["age_min_years"] <= before["age_max_years"]:
            msg = "'inspection_bands': faixas de idade sobrepostas"
            raise DetectorThresholdError(msg)
    return tuple(out)


def _columns(
    regs: list[dict[str, Any]], *, counted_from: str, as_of_day: int | None = None
) -> dict[str, NDArray[np.int64]]:
    """Return the registry records as the number columns :func:`barred_reasons` reads.

    A status without ``status_since`` starts at ``as_of_day`` (the registry's snapshot; None:
    never, it bars nothing).
    """
    out = {
        name: np.array([r[name] for r in regs], dtype=np.int64)
        for name in ("code", *(n for n, _ in _DATE_COLUMNS))
    }
    unknown = out["status_since"] == NO_DAY_LOW
    out["status_since"][unknown] = NO_DAY_HIGH if as_of_day is None else as_of_day
    base = [_base_year(r, counted_from) for r in regs]
    out["base_year"] = np.array([_NO_YEAR if b is None else b for b in base], dtype=np.int64)
    return out


def _fleet_registry(fleet: pd.DataFrame) -> dict[str, dict[str, Any]]:
    require_columns(fleet, ("vehicle_id",), what="a frota")
    records = fleet.to_dict("records")
    out: dict[str, dict[str, Any]] = {}
    for i, rec in enumerate(records):
        vid = rec.get("vehicle_id")
        if vid is None or (not isinstance(vid, str) and pd.isna(vid)):
            msg = f"a frota tem 'vehicle_id' vazio na linha {i + 1}"
            raise FleetFrameError(msg)
        out[str(vid)] = _registry(
            {str(k): v for k, v in rec.items()}, what=f"a frota (vehicle_id {vid})"
        )
    return out


def detect_operating_while_barred(
    trips: pd.DataFrame,
    fleet: pd.DataFrame,
    *,
    pings: pd.DataFrame | None = None,
    min_trip_duration_s: float = DEFAULT_MIN_TRIP_DURATION_S,
    include_inferred_trips: bool = False,
    max_vehicle_age_years: int | None = None,
    vehicle_age_counted_from: str = "manufacture",
    max_inspection_age_days: int | None = None,
    max_substitution_days: int | None = None,
    inspection_bands: Sequence[Mapping[str, Any]] | None = None,
    as_of: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> gpd.GeoDataFrame:
    """Find service on local days when the vehicle's status or documents bar it.

    Serves Porto Alegre art. 60 V, 59 V, 58 III, 58 XII and art. 15 (reserva), Pinto Bandeira
    art. 26 IV and 31 XI (see the module docstring for the definitions and the confidence).

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips from :func:`tracking.trips.detect_trips` (``TRIP_COLUMNS``; the helper columns
        ``source``, ``first_row`` and ``last_ping`` are used when present).
    fleet : pandas.DataFrame
        Fleet (``stands/frames.py``): ``vehicle_id``, ``status``, ``status_since``,
        ``status_until``, ``alvara_valid_until``, ``inspection_valid_until``, and for the
        other reasons ``year``, ``first_registered_on``, ``last_inspection_on``,
        ``alvara_first_issued_on``, ``substitution_since``,
        ``termo_recolhido_since``, ``termo_recolhido_until`` (dates; missing columns count as
        empty). Vehicles absent from the fleet are not judged here.
    pings : pandas.DataFrame, optional
        The pings the trips came from, sorted as their contract says, to name the drop-off
        fix's source row (through ``last_ping``); without them that row is null.
    min_trip_duration_s : float, default 60
        Shorter trips are not service.
    include_inferred_trips : bool, default False
        Count trips inferred from stops (vehicles without meter data) as service, at lower
        confidence. Off: moving is not operating (module docstring, "service").
    max_vehicle_age_years : int, optional
        Oldest lawful age in calendar years (``vehicle_over_age``): 5 in Pinto Bandeira
        (art. 10), 15 in fretamento (art. 12). None (default): not judged.
    vehicle_age_counted_from : {"manufacture", "first_registration"}, default "manufacture"
        The year the age counts from: ``year`` of manufacture (Pinto Bandeira art. 10) or the
        year of ``first_registered_on`` (fretamento art. 12, parágrafo único).
    max_inspection_age_days : int, optional
        Most days since ``last_inspection_on`` (``inspection_overdue``): 365 in Pinto Bandeira
        (art. 32 VII). None (default): not judged.
    max_substitution_days : int, optional
        Most days a provisional substitute may operate (``substitution_expired``): 30 in
        fretamento (art. 13). None (default): not judged.
    inspection_bands : sequence of mapping, optional
        Inspection interval by age band (``age_min_years``, ``age_max_years`` inclusive,
        ``interval_days``, ``provision``, ``overlaps_previous``): fretamento art. 14 a–e, from
        the rulebook (:meth:`enforcement.rulebook.Rulebook.thresholds`). With them the limit
        of ``inspection_overdue`` is the band's interval (module docstring).
    as_of : datetime.date, optional
        The local day the fleet's registry describes (the run's ``--as-of``): a status without
        ``status_since`` bars from it on. None: such a status bars no day.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days and of the fleet's dates.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``operating_while_barred``, one per (vehicle, local day); geometry the
        pickup fix of the day's first barred trip.

    Raises
    ------
    DetectorInputError
        If a required column is missing or times are naive.
    FleetFrameError
        If a fleet status or date is invalid.
    DetectorThresholdError
        If ``min_trip_duration_s`` is negative, ``as_of`` not a date or the zone unknown.
    """
    check_threshold("min_trip_duration_s", min_trip_duration_s, unit="segundos")
    limits = check_limits(
        max_vehicle_age_years=max_vehicle_age_years,
        vehicle_age_counted_from=vehicle_age_counted_from,
        max_inspection_age_days=max_inspection_age_days,
        max_substitution_days=max_substitution_days,
        inspection_bands=inspection_bands,
    )
    zone(timezone)
    if as_of is not None and (not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime)):
        msg = f"'as_of' foi {as_of!r}; esperado uma data (datetime.date) ou vazio"
        raise DetectorThresholdError(msg)
    require_columns(trips, _TRIP_COLUMNS, what="as viagens")
    registry = _fleet_registry(fleet)
    start = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    end = utc_ns(trips["ended_at"], column="ended_at", what="as viagens")
    if len(trips) == 0 or not registry:
        return empty_findings()
    vehicle = trips["vehicle_id"].astype("str").to_numpy(dtype=object)
    source = (
        trips["source"].astype("str").to_numpy(dtype=object)
        if "source" in trips.columns
        else np.full(len(trips), "meter", dtype=object)
    )
    ids = list(registry)
    code = pd.Index(ids).get_indexer(pd.Index(vehicle))
    keep = (code >= 0) & service_trips(trips, min_duration_s=min_trip_duration_s)
    if not include_inferred_trips:
        keep &= source != "stops"
    sel = np.flatnonzero(keep)
    if not len(sel):
        return empty_findings()
    as_of_day = None if as_of is None else (as_of - dt.date(1970, 1, 1)).days
    regs = _columns(
        [registry[v] for v in ids], counted_from=vehicle_age_counted_from, as_of_day=as_of_day
    )
    day = local_days(start[sel], timezone)
    mask = barred_reasons(
        day,
        columns={name: values[code[sel]] for name, values in regs.items()},
        max_vehicle_age_years=max_vehicle_age_years,
        max_inspection_age_days=max_inspection_age_days,
        max_substitution_days=max_substitution_days,
        inspection_bands=limits["inspection_bands"],
    )
    hit = mask.any(axis=1)
    sel, day, mask = sel[hit], day[hit], mask[hit]
    if not len(sel):
        return empty_findings()
    order = np.lexsort((start[sel], day, code[sel]))
    sel, day, mask = sel[order], day[order], mask[order]

    first_row = (
        pd.to_numeric(trips["first_row"]).fillna(-1).to_numpy(dtype=np.int64)
        if "first_row" in trips.columns
        else np.full(len(trips), -1, dtype=np.int64)
    )
    last_row = np.full(len(trips), -1, dtype=np.int64)
    if pings is not None and "last_ping" in trips.columns:
        # ``last_ping`` is a position in the sorted pings (detect_trips sorts a copy).
        rows = ping_rows(pings)
        ping_order = sorted_view(pings)[0] if len(pings) else None
        pos = pd.to_numeric(trips["last_ping"]).fillna(-1).to_numpy(dtype=np.int64)
        ok = (pos >= 0) & (pos < len(rows))
        last_row[ok] = rows[pos[ok] if ping_order is None else ping_order[pos[ok]]]
    trip_id = (
        trips["trip_id"].astype("str").to_numpy(dtype=object)
        if "trip_id" in trips.columns
        else np.full(len(trips), None, dtype=object)
    )
    p_lat = trips["pickup_lat"].to_numpy(dtype=np.float64)
    p_lon = trips["pickup_lon"].to_numpy(dtype=np.float64)
    d_lat = trips["dropoff_lat"].to_numpy(dtype=np.float64)
    d_lon = trips["dropoff_lon"].to_numpy(dtype=np.float64)

    group = np.ones(len(sel), dtype=bool)
    group[1:] = (code[sel][1:] != code[sel][:-1]) | (day[1:] != day[:-1])
    bounds = np.append(np.flatnonzero(group), len(sel))
    out, geoms = [], []
    for g0, g1 in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        members = sel[g0:g1].tolist()
        day_trips = [
            {
                "trip_id": trip_id[k],
                "started_ns": int(start[k]),
                "ended_ns": int(end[k]),
                "source": str(source[k]),
                "pickup": fix_record(start[k], p_lat[k], p_lon[k], int(first_row[k])),
                "dropoff": fix_record(end[k], d_lat[k], d_lon[k], int(last_row[k])),
            }
            for k in members
        ]
        vid = str(vehicle[members[0]])
        row, geom = _finding_row(
            vehicle_id=vid,
            day=int(day[g0]),
            reasons=[r for r, on in zip(REASONS, mask[g0], strict=True) if on],
            reg=registry[vid],
            trips=day_trips,
            timezone=timezone,
            min_trip_duration_s=min_trip_duration_s,
            limits=limits,
            as_of_day=as_of_day,
        )
        out.append(row)
        geoms.append(geom)
    return make_findings(pd.DataFrame(out), geoms)


# --------------------------------------------------------------------------------- kernel


def detect_in_fixes(
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame,
    min_trip_duration_s: float = DEFAULT_MIN_TRIP_DURATION_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    max_vehicle_age_years: int | None = None,
    vehicle_age_counted_from: str = "manufacture",
    max_inspection_age_days: int | None = None,
    max_substitution_days: int | None = None,
    inspection_bands: Sequence[Mapping[str, Any]] | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> gpd.GeoDataFrame:
    """Return :func:`detect_operating_while_barred` on the meter trips of ``pings``."""
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    return detect_operating_while_barred(
        trips,
        fleet,
        pings=pings,
        min_trip_duration_s=min_trip_duration_s,
        max_vehicle_age_years=max_vehicle_age_years,
        vehicle_age_counted_from=vehicle_age_counted_from,
        max_inspection_age_days=max_inspection_age_days,
        max_substitution_days=max_substitution_days,
        inspection_bands=inspection_bands,
        timezone=timezone,
    )


def open_from(
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    max_vehicle_age_years: int | None = None,
    vehicle_age_counted_from: str = "manufacture",
    max_inspection_age_days: int | None = None,
    max_substitution_days: int | None = None,
    inspection_bands: Sequence[Mapping[str, Any]] | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    **_: Any,
) -> dict[str, int]:
    """Each vehicle's open day (from its first trip) when the fleet may bar it, else its open trip.

    The open day is the local day of the open trip's start, or of the last fix between trips: a
    later trip may still join its finding. It is kept when ``fleet`` bars it, and also when it is
    later than the vehicle's first fix's day (the live engine reads each vehicle's registry as
    of that day: a later day's status is not known yet). Vehicles absent from ``fleet`` are
    never judged: nothing is kept.
    """
    registry = _fleet_registry(fleet)
    limits = check_limits(
        max_vehicle_age_years=max_vehicle_age_years,
        vehicle_age_counted_from=vehicle_age_counted_from,
        max_inspection_age_days=max_inspection_age_days,
        max_substitution_days=max_substitution_days,
        inspection_bands=inspection_bands,
    )
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    opened = open_trips(pings, trips)
    first = pings.groupby(fr.VEHICLE_ID, sort=False)[fr.TIMESTAMP].min()
    first_day = dict(
        zip(
            map(str, first.index),
            local_days(first.to_numpy(dtype="datetime64[ns]").astype(np.int64), timezone).tolist(),
            strict=True,
        )
    )
    starts = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    trip_day = local_days(starts, timezone)
    day_start: dict[tuple[str, int], int] = {}  # (vehicle, local day) → its first trip's start
    for vehicle, day, start in zip(
        trips[fr.VEHICLE_ID].astype("str"), trip_day.tolist(), starts.tolist(), strict=True
    ):
        day_start.setdefault((vehicle, int(day)), int(start))
    judged = [v for v in opened if v in registry]
    open_day = local_days(
        np.array(
            [opened[v][0] if opened[v][1] is None else opened[v][1] for v in judged],
            dtype=np.int64,
        ),
        timezone,
    )
    out: dict[str, int] = {}
    for vehicle, now in zip(judged, open_day.tolist(), strict=True):
        open_ns = opened[vehicle][1]
        if (vehicle, now) in day_start and (
            now > first_day[vehicle] or _bars(registry[vehicle], now, limits)
        ):
            out[vehicle] = day_start[(vehicle, now)]
        elif open_ns is not None:
            out[vehicle] = open_ns
    return out


def _bars(reg: Mapping[str, Any], day: int, limits: Mapping[str, Any]) -> bool:
    """Whether the registry record bars the local day."""
    columns = _columns([dict(reg)], counted_from=limits["vehicle_age_counted_from"])
    return bool(
        barred_reasons(
            np.array([day], dtype=np.int64),
            columns=columns,
            max_vehicle_age_years=limits["max_vehicle_age_years"],
            max_inspection_age_days=limits["max_inspection_age_days"],
            max_substitution_days=limits["max_substitution_days"],
            inspection_bands=limits["inspection_bands"],
        ).any()
    )


KERNEL = TrackKernel(KIND, detect_in_fixes, open_from, open_detect=detect_in_fixes)
"""The rule as a kernel (``tracking.detectors.kernel.advance``)."""
