"""Service driven by a driver the registry does not allow on that prefixo at that instant.

The fixes carry ``driver_id`` (the driver logged in on the tracker or taxímetro); the registry
holds the drivers (CNH and ICTP / Registro de Condutor validity and status history) and their
links to prefixos (role titular or auxiliar, inclusive dates). Fixes without ``driver_id`` say
nothing about who drove: they are never judged.

Reasons (``details.reasons``; ``details.reason`` is the first of :data:`REASONS` that holds, the
order being the most serious first; the rulebook picks the article from it):

- ``not_registered`` — the driver is not in the registry of drivers at all (Porto Alegre art. 59
  IV: "Entregar o veículo a pessoa não registrado na EPTC no cadastro de condutores de táxi";
  Porto Velho art. 7º; Pinto Bandeira art. 32 IV). An id that differs from a registered one
  only in how it is written (:func:`fleet.ids.id_form`: case, separators, leading zeros —
  ``D01`` and ``D1``, ``123.456.789-09`` and ``12345678909``) is a mismatch of the two systems'
  codes, not proof of an unregistered driver: it is not judged at all.
- ``cnh_revoked``, ``cnh_suspended`` — the CNH is cassada / suspensa that day (Porto Alegre art.
  60 IV; Pinto Bandeira art. 26 X, suspensa).
- ``ictp_revoked``, ``ictp_suspended`` — the ICTP (Registro de Condutor) is cassada / suspensa
  (Porto Alegre art. 60 IV, suspensão da ICTP; Pinto Bandeira art. 25 XI, Registro cassado).
- ``not_linked`` — a registered driver not linked to this prefixo that day, while someone is (a
  day on which the prefixo has no link at all is a day the registry does not cover: not judged)
  (Porto Alegre art. 58 VI; Porto Velho art. 43 § 1º; Pinto Bandeira art. 32 IV, "cadastrada em
  permissão de outro permissionário"; fretamento art. 3º § 1º).
- ``cnh_expired``, ``ictp_expired`` — the document's ``valid_until`` plus the law's grace
  (``cnh_grace_days``, ``ictp_grace_days``; 0 by default) is before that day (Porto Alegre art.
  57 V, ICTP vencida; its art. 5º § 2º extends the ICTP's validity by 30 days for the renewal;
  the CTB, which Porto Velho art. 9º X invokes, punishes a CNH expired over 30 days).
- ``too_many_auxiliaries`` — only with ``max_auxiliaries`` (the law's cap: the rulebook's
  ``[auxiliaries]``; Porto Alegre's decree sets none): the driver is linked as auxiliar, but the
  prefixo has more auxiliares linked that day than the cap and this one is beyond it (ranked by
  link start, then driver id): Porto Velho art. 43 § 1º ("confiar seu veículo a 02 (dois) outros
  motoristas"), Pinto Bandeira art. 14.
- ``auxiliary_only`` — only with ``auxiliary_only_min_days`` (N; the law fixes no period: the
  regulator's choice): N service days in a row of the prefixo driven only by auxiliares, the
  same titular linked on every calendar day from the first (Pinto Bandeira art. 32 III, "Deixar
  a prestação do serviço a cargo exclusivo de seu condutor auxiliar"). A service day is a local
  day with a service trip starting on it; it counts when every fix of the vehicle that day has
  a ``driver_id`` and each is a registered driver linked that day as auxiliar, not titular; any
  other service day ends the count; a day without service neither counts nor ends it. Each N
  counted days make one finding (``driver_id`` None, ``details.drivers`` the auxiliares, the
  days and the titular's links in the evidence) and the count starts anew; the first day of the
  fixes may be partial and is not judged. Confidence :data:`AUXILIARY_ONLY_CONFIDENCE`.

Definitions (each is shown in the evidence):

service
    A meter trip (``tracking.trips.detect_trips`` on the fixes, no stops) lasting at least
    ``min_trip_duration_s`` and driving at least a stop's extent
    (:func:`tracking.detectors._meter_trips.service_trips`). Its driver is the id on more
    than half of its fixes that carry one, and on at least :data:`MIN_DRIVER_FIXES` of them:
    one fix with another id (a badge read wrong, a glitch) names no one, and a trip whose ids
    split evenly names none. The driver is judged on the local days (``timezone``) of the
    trip's start and end: a reason counts only when it holds on both (a trip across midnight
    is not accused on the edge).
day rules
    Registry dates are inclusive local calendar days, as the registry keeps them: a link
    counts from its ``valid_from`` day (a driver registered during the day is fine all that
    day) to its ``valid_until`` day; a status period bars ``since``–``until`` (an empty
    ``since``: every day up to ``until``, at lower confidence); a document expires the day after
    its ``valid_until`` (a document renewed late, with a ``valid_until`` after the trip, is
    fine: the registry keeps the current validity only, so a trip before the renewal is not
    accused either).
judged vehicles
    Only prefixos with at least one link in ``driver_links``: for the others the registry says
    nothing about who may drive.
finding
    One per (vehicle, local day of the trip start, driver) with service under a reason:
    ``started_at`` the first such trip's first fix of that driver, ``ended_at`` the last one's
    (``auxiliary_only``: one per vehicle and block of counted days, see above).
confidence
    ``0.95 * (0.7 + 0.3 * min(1, service_s / 1800)) * q``: ``q`` 0.7 when the main reason is a
    status whose ``since`` is unknown, ``min(1, 0.8 + 0.2 * days_expired / 30)`` for an expired
    document, 0.6 for ``too_many_auxiliaries`` (Porto Velho art. 12 § 2º allows one more
    auxiliar in case of the autorizatário's incapacity), else 1. Clipped to [0.05, 0.95].

Live (:data:`KERNEL`): a vehicle keeps its fixes from the first trip of its open day (the day of
its open trip, else of its last fix); a day's finding is emitted once a later day has begun, and
announced before, from its first ended trip (:func:`detect_ended_trips`).
With ``auxiliary_only_min_days`` it keeps them from the first day of its open count (see
:func:`open_from`): those days' findings wait for the count to end or make its block.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from fleet.ids import id_form
from geo.calendar import DEFAULT_TIMEZONE
from tracking import frames as fr
from tracking.arrays import NS, iso_utc
from tracking.detectors._errors import DetectorThresholdError, FleetFrameError
from tracking.detectors._evidence import (
    NO_DAY_HIGH,
    NO_DAY_LOW,
    check_threshold,
    clip_confidence,
    day_iso,
    day_of,
    fix_record,
    local_days,
    require_columns,
    utc_ns,
    zone,
)
from tracking.detectors._meter_trips import meter_trips, open_trips, service_trips
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.kernel import TrackKernel

KIND = "driver_not_allowed"
REASONS = (
    "not_registered",
    "cnh_revoked",
    "cnh_suspended",
    "ictp_revoked",
    "ictp_suspended",
    "not_linked",
    "ictp_expired",
    "cnh_expired",
    "too_many_auxiliaries",
    "auxiliary_only",
)
DOCUMENTS = ("cnh", "ictp")
DOCUMENT_STATUSES = ("regular", "suspensa", "cassada")
"""Statuses of a driver's CNH or ICTP in the registry (``regular`` bars nothing)."""
LINK_ROLES = ("titular", "auxiliar")
"""Roles of a driver on a prefixo; the database's ``autorizatario_condutor`` reads as titular."""
DRIVER_COLUMNS = (
    "driver_id",
    "cnh_valid_until",
    "ictp_valid_until",
    "cnh_status",
    "cnh_status_since",
    "cnh_status_until",
    "ictp_status",
    "ictp_status_since",
    "ictp_status_until",
)
"""Columns of the ``drivers`` frame the kernel reads: one row per driver and status period
(``fleet.drivers.read_drivers``); missing columns count as empty."""
LINK_COLUMNS = ("vehicle_id", "driver_id", "role", "valid_from", "valid_until")
DEFAULT_MIN_TRIP_DURATION_S = 60.0
DEFAULT_MAX_GAP_S = 300.0
MIN_DRIVER_FIXES = 2
"""Fewest fixes of a trip carrying a driver's id for the trip to be theirs (with more than half
of its fixes that carry an id): an independent check had a titular's ride proposed under art.
58 VI because one fix in its middle carried an unlinked id."""
MAX_TRIPS_IN_DETAILS = 50
AUXILIARY_ONLY_CONFIDENCE = 0.6
"""Confidence of an ``auxiliary_only`` finding: the law fixes no period, and a leave of the
titular agreed with the órgão is not in the registry."""
_STATUS_REASON = {
    ("cnh", "cassada"): "cnh_revoked",
    ("cnh", "suspensa"): "cnh_suspended",
    ("ictp", "cassada"): "ictp_revoked",
    ("ictp", "suspensa"): "ictp_suspended",
}
_ROLE_ALIASES = {"titular": "titular", "autorizatario_condutor": "titular", "auxiliar": "auxiliar"}


def _blank(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and pd.isna(value)) or str(value) == ""


def _day(value: Any, *, column: str, what: str, missing: int) -> int:
    day = day_of(value, column=column, what=what)
    return missing if day is None else day


def driver_registry(drivers: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Return ``driver_id → {"cnh_valid_until", "ictp_valid_until", "periods"}`` (day numbers).

    ``periods`` maps ``cnh`` and ``ictp`` to their barring periods ``(status, since, until)``
    (``regular`` ones are left out). Validity dates missing on every row of a driver are
    unknown (never expired).

    Raises
    ------
    FleetFrameError
        If ``driver_id`` is missing or empty, or a status or date is invalid.
    """
    require_columns(drivers, ("driver_id",), what="os condutores")
    out: dict[str, dict[str, Any]] = {}
    for i, rec in enumerate(drivers.to_dict("records")):
        raw = rec.get("driver_id")
        if _blank(raw):
            msg = f"os condutores têm 'driver_id' vazio na linha {i + 1}"
            raise FleetFrameError(msg)
        did = str(raw)
        what = f"os condutores (driver_id {did})"
        entry = out.setdefault(
            did,
            {
                "cnh_valid_until": NO_DAY_HIGH,
                "ictp_valid_until": NO_DAY_HIGH,
                "periods": {d: [] for d in DOCUMENTS},
            },
        )
        for doc in DOCUMENTS:
            until = _day(
                rec.get(f"{doc}_valid_until"),
                column=f"{doc}_valid_until",
                what=what,
                missing=NO_DAY_HIGH,
            )
            if until != NO_DAY_HIGH:
                entry[f"{doc}_valid_until"] = until
            status = rec.get(f"{doc}_status")
            if _blank(status):
                continue
            status = str(status).strip().lower()
            if status not in DOCUMENT_STATUSES:
                msg = (
                    f"'{doc}_status' de {what} era {rec.get(f'{doc}_status')!r}; "
                    f"esperado um de {', '.join(DOCUMENT_STATUSES)}"
                )
                raise FleetFrameError(msg)
            if status == "regular":
                continue
            since = _day(
                rec.get(f"{doc}_status_since"),
                column=f"{doc}_status_since",
                what=what,
                missing=NO_DAY_LOW,
            )
            end = _day(
                rec.get(f"{doc}_status_until"),
                column=f"{doc}_status_until",
                what=what,
                missing=NO_DAY_HIGH,
            )
            entry["periods"][doc].append((status, since, end))
    return out


def link_registry(driver_links: pd.DataFrame) -> list[tuple[str, str, str, int, int]]:
    """Return the links as ``(vehicle_id, driver_id, role, from_day, until_day)``, sorted.

    Raises
    ------
    FleetFrameError
        If a column is missing, an id or ``valid_from`` empty, or a role or date invalid.
    """
    require_columns(
        driver_links, ("vehicle_id", "driver_id", "role", "valid_from"), what="os vínculos"
    )
    out = []
    for i, rec in enumerate(driver_links.to_dict("records")):
        for col in ("vehicle_id", "driver_id", "valid_from"):
            if _blank(rec.get(col)):
                msg = f"os vínculos têm '{col}' vazio na linha {i + 1}"
                raise FleetFrameError(msg)
        role = _ROLE_ALIASES.get(str(rec.get("role") or "").strip().lower())
        if role is None:
            msg = (
                f"'role' dos vínculos era {rec.get('role')!r} na linha {i + 1}; "
                f"esperado um de {', '.join(LINK_ROLES)}"
            )
            raise FleetFrameError(msg)
        what = f"os vínculos (linha {i + 1})"
        out.append(
            (
                str(rec["vehicle_id"]),
                str(rec["driver_id"]),
                role,
                _day(rec["valid_from"], column="valid_from", what=what, missing=NO_DAY_LOW),
                _day(rec.get("valid_until"), column="valid_until", what=what, missing=NO_DAY_HIGH),
            )
        )
    return sorted(out)


def _link_record(link: tuple[str, str, str, int, int]) -> dict[str, Any]:
    vehicle, driver, role, lo, hi = link
    return {
        "vehicle_id": vehicle,
        "driver_id": driver,
        "role": role,
        "valid_from": None if lo == NO_DAY_LOW else day_iso(lo),
        "valid_until": None if hi == NO_DAY_HIGH else day_iso(hi),
    }


def reasons_on(
    *,
    vehicle: str,
    driver: str,
    day: int,
    drivers: Mapping[str, Mapping[str, Any]],
    links: Mapping[str, list[tuple[str, str, str, int, int]]],
    max_auxiliaries: int | None,
    known_forms: Collection[str],
    grace_days: Mapping[str, int],
) -> dict[str, dict[str, Any]]:
    """Return the reasons that bar ``driver`` on ``vehicle`` on a local ``day``, with evidence.

    ``links`` maps a vehicle and a driver (keys ``"v:<id>"`` and ``"d:<id>"``) to their links;
    ``known_forms`` holds the :func:`id_form` of every registered driver (an unknown id of such
    a form is not judged); ``grace_days`` the days after each document's ``valid_until`` it
    still holds (by :data:`DOCUMENTS`).
    """
    out: dict[str, dict[str, Any]] = {}
    info = drivers.get(driver)
    if info is None:
        if id_form(driver) not in known_forms:
            out["not_registered"] = {"reason": "not_registered", "driver_id": driver}
        return out
    for doc in DOCUMENTS:
        for status, since, until in info["periods"][doc]:
            if since <= day <= until:
                reason = _STATUS_REASON[(doc, status)]
                out.setdefault(
                    reason,
                    {
                        "reason": reason,
                        "document": doc,
                        "status": status,
                        "status_since": None if since == NO_DAY_LOW else day_iso(since),
                        "status_until": None if until == NO_DAY_HIGH else day_iso(until),
                    },
                )
    today = [k for k in links.get(f"v:{vehicle}", []) if k[3] <= day <= k[4]]
    mine = [k for k in today if k[1] == driver]
    if today and not mine:  # no link at all that day: the registry does not cover the day
        elsewhere = [_link_record(k) for k in links.get(f"d:{driver}", []) if k[3] <= day <= k[4]]
        out["not_linked"] = {
            "reason": "not_linked",
            "links_of_vehicle": [_link_record(k) for k in today],
            "links_of_driver_elsewhere": elsewhere,
        }
    for doc in DOCUMENTS:
        until, grace = info[f"{doc}_valid_until"], grace_days.get(doc, 0)
        if day > until + grace:
            out[f"{doc}_expired"] = {
                "reason": f"{doc}_expired",
                "document": doc,
                f"{doc}_valid_until": day_iso(until),
                "days_expired": int(day - until),
            } | ({"grace_days": int(grace)} if grace else {})
    if mine and max_auxiliaries is not None and all(k[2] == "auxiliar" for k in mine):
        ranked: list[str] = []
        for k in sorted((k for k in today if k[2] == "auxiliar"), key=lambda k: (k[3], k[1])):
            if k[1] not in ranked:
                ranked.append(k[1])
        if len(ranked) > max_auxiliaries and ranked.index(driver) >= max_auxiliaries:
            out["too_many_auxiliaries"] = {
                "reason": "too_many_auxiliaries",
                "auxiliaries_linked": ranked,
                "max_auxiliaries": int(max_auxiliaries),
                "rank": ranked.index(driver) + 1,
            }
    return out


def _links_index(
    links: list[tuple[str, str, str, int, int]],
) -> dict[str, list[tuple[str, str, str, int, int]]]:
    index: dict[str, list[tuple[str, str, str, int, int]]] = {}
    for k in links:
        index.setdefault(f"v:{k[0]}", []).append(k)
        index.setdefault(f"d:{k[1]}", []).append(k)
    return index


def _driver_pieces(
    pings: pd.DataFrame, trips: pd.DataFrame, *, min_trip_duration_s: float
) -> list[dict[str, Any]]:
    """Each (trip, driver) of the meter trips: the driver's first and last fix in the trip."""
    if not len(trips) or fr.DRIVER_ID not in pings.columns:
        return []
    frame = pings.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable")
    vehicles = frame[fr.VEHICLE_ID].astype(str).to_numpy(dtype=object)
    ns = utc_ns(frame[fr.TIMESTAMP], column="timestamp", what="os pings")
    driver = frame[fr.DRIVER_ID].to_numpy(dtype=object)
    lat = frame[fr.LAT].to_numpy(dtype=np.float64)
    lon = frame[fr.LON].to_numpy(dtype=np.float64)
    rows = (
        pd.to_numeric(frame[fr.ROW]).fillna(-1).to_numpy(dtype=np.int64)
        if fr.ROW in frame.columns
        else np.full(len(frame), -1, dtype=np.int64)
    )
    bounds: dict[str, tuple[int, int]] = {}
    starts = np.flatnonzero(np.r_[True, vehicles[1:] != vehicles[:-1]])
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(frame)], strict=True):
        bounds[str(vehicles[lo])] = (lo, hi)
    t_start = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    t_end = utc_ns(trips["ended_at"], column="ended_at", what="as viagens")
    t_vehicle = trips[fr.VEHICLE_ID].astype(str).tolist()
    t_id = trips["trip_id"].astype(str).tolist() if "trip_id" in trips.columns else None
    service = service_trips(trips, min_duration_s=min_trip_duration_s)
    pieces = []
    for j, vid in enumerate(t_vehicle):
        if not service[j]:
            continue
        lo, hi = bounds[vid]
        a = lo + int(np.searchsorted(ns[lo:hi], t_start[j], side="left"))
        b = lo + int(np.searchsorted(ns[lo:hi], t_end[j], side="right"))
        seen: dict[str, list[int]] = {}
        for p in range(a, b):
            d = driver[p]
            if _blank(d) or not str(d).strip():
                continue
            seen.setdefault(str(d).strip(), []).append(p)
        named = sum(len(positions) for positions in seen.values())
        for did, positions in seen.items():
            if len(positions) < MIN_DRIVER_FIXES or 2 * len(positions) <= named:
                continue  # not the trip's driver: a stray id, or a trip split evenly
            first, last = positions[0], positions[-1]
            pieces.append(
                {
                    "vehicle_id": vid,
                    "driver_id": did,
                    "trip_id": None if t_id is None else t_id[j],
                    "trip_started_ns": int(t_start[j]),
                    "trip_ended_ns": int(t_end[j]),
                    "started_ns": int(ns[first]),
                    "ended_ns": int(ns[last]),
                    "n_fixes": len(positions),
                    "first": fix_record(int(ns[first]), lat[first], lon[first], int(rows[first])),
                    "last": fix_record(int(ns[last]), lat[last], lon[last], int(rows[last])),
                }
            )
    return pieces


def _q(main: Mapping[str, Any]) -> float:
    reason = main["reason"]
    if reason in _STATUS_REASON.values():
        return 0.7 if main["status_since"] is None else 1.0
    if reason.endswith("_expired"):
        return min(1.0, 0.8 + 0.2 * float(main["days_expired"]) / 30.0)
    if reason == "too_many_auxiliaries":
        return 0.6
    return 1.0


def detect_driver_not_allowed(
    pings: pd.DataFrame,
    *,
    drivers: pd.DataFrame,
    driver_links: pd.DataFrame,
    min_trip_duration_s: float = DEFAULT_MIN_TRIP_DURATION_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    max_auxiliaries: int | None = None,
    auxiliary_only_min_days: int | None = None,
    cnh_grace_days: int = 0,
    ictp_grace_days: int = 0,
    timezone: str = DEFAULT_TIMEZONE,
) -> gpd.GeoDataFrame:
    """Find meter service driven by a driver not allowed on the prefixo that day.

    Serves Porto Alegre arts. 57 V, 58 VI, 59 IV and 60 IV; Porto Velho arts. 7º and 43 § 1º;
    Pinto Bandeira arts. 25 XI, 26 X and 32 III–IV; the fretamento decree's art. 3º § 1º (see the
    module docstring for the reasons, the day rules and the confidence).

    Parameters
    ----------
    pings : pandas.DataFrame
        Fixes (pings contract) with ``meter`` and ``driver_id``; without ``driver_id`` nothing
        is judged.
    drivers : pandas.DataFrame
        The registry of drivers, one row per driver and status period (:data:`DRIVER_COLUMNS`;
        ``fleet.drivers.read_drivers``).
    driver_links : pandas.DataFrame
        Links driver ↔ prefixo (:data:`LINK_COLUMNS`; ``fleet.drivers.read_driver_links``).
    min_trip_duration_s : float, default 60
        Shorter meter trips (blips) are not service.
    max_gap_s : float, default 300
        The trips' gap (the pipeline's ``trip_max_gap_s``).
    max_auxiliaries : int or None, default None
        Auxiliares allowed at once, where the law caps them (Porto Velho art. 43 § 1º; Pinto
        Bandeira art. 14: the rulebooks' ``[auxiliaries]``). None: no cap, not judged.
    auxiliary_only_min_days : int or None, default None
        Service days in a row driven only by auxiliares that make an ``auxiliary_only`` finding
        (Pinto Bandeira art. 32 III; the law fixes no period: the regulator's choice). None:
        not judged.
    cnh_grace_days, ictp_grace_days : int, default 0
        Days after a CNH's / ICTP's ``valid_until`` on which it still holds, as the law extends
        it (Porto Alegre art. 5º § 2º: ICTP 30 days; the CTB's art. 162 V, which Porto Velho art.
        9º X invokes: CNH 30 days). The rulebooks set them (``[detector_thresholds]``).
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days and of the registry's dates.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``driver_not_allowed``, one per (vehicle, local day, driver); geometry
        the driver's first fix of the day's first such trip.

    Raises
    ------
    DetectorInputError
        If a required column is missing or times are naive.
    FleetFrameError
        If a registry id, status, role or date is invalid.
    DetectorThresholdError
        If a threshold is negative or the zone unknown.
    """
    check_threshold("min_trip_duration_s", min_trip_duration_s, unit="segundos")
    check_threshold("max_gap_s", max_gap_s, positive=True, unit="segundos")
    if max_auxiliaries is not None:
        check_threshold("max_auxiliaries", max_auxiliaries, unit="condutores")
    if auxiliary_only_min_days is not None:
        check_threshold(
            "auxiliary_only_min_days", auxiliary_only_min_days, positive=True, unit="dias"
        )
    for name, value in (("cnh_grace_days", cnh_grace_days), ("ictp_grace_days", ictp_grace_days)):
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 0:
            msg = f"'{name}' foi {value!r}; esperado um inteiro >= 0 (dias)"
            raise DetectorThresholdError(msg)
    grace = {"cnh": int(cnh_grace_days), "ictp": int(ictp_grace_days)}
    zone(timezone)
    require_columns(pings, fr.PING_REQUIRED, what="os pings")
    registry = driver_registry(drivers)
    links = link_registry(driver_links)
    judged = {k[0] for k in links}
    if not len(pings) or not judged or fr.DRIVER_ID not in pings.columns:
        return empty_findings()
    mine = pings[pings[fr.VEHICLE_ID].astype(str).isin(judged).to_numpy()]
    if not len(mine):
        return empty_findings()
    trips = meter_trips(mine, max_gap_s=max_gap_s)
    pieces = _driver_pieces(mine, trips, min_trip_duration_s=min_trip_duration_s)
    index = _links_index(links)
    known_forms = {id_form(d) for d in registry}
    thresholds = {
        "min_trip_duration_s": float(min_trip_duration_s),
        "max_gap_s": float(max_gap_s),
        "max_auxiliaries": None if max_auxiliaries is None else int(max_auxiliaries),
        "auxiliary_only_min_days": (
            None if auxiliary_only_min_days is None else int(auxiliary_only_min_days)
        ),
    } | {f"{doc}_grace_days": days for doc, days in grace.items() if days}
    out: list[dict[str, Any]] = []
    geoms: list[shapely.Point] = []
    if auxiliary_only_min_days is not None:
        days_of = _vehicle_days(
            mine, trips, min_trip_duration_s=min_trip_duration_s, timezone=timezone
        )
        out, geoms = _auxiliary_only_findings(
            days_of,
            drivers=registry,
            links=index,
            min_days=int(auxiliary_only_min_days),
            timezone=timezone,
            thresholds=thresholds,
        )
    if not pieces and not out:
        return empty_findings()
    start_day = local_days(np.array([p["trip_started_ns"] for p in pieces], np.int64), timezone)
    end_day = local_days(np.array([p["trip_ended_ns"] for p in pieces], np.int64), timezone)
    groups: dict[tuple[str, int, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for piece, d0, d1 in zip(pieces, start_day.tolist(), end_day.tolist(), strict=True):
        kw = {
            "vehicle": piece["vehicle_id"],
            "driver": piece["driver_id"],
            "drivers": registry,
            "links": index,
            "max_auxiliaries": max_auxiliaries,
            "known_forms": known_forms,
            "grace_days": grace,
        }
        found = reasons_on(day=d0, **kw)
        if found and d1 != d0:
            later = reasons_on(day=d1, **kw)
            found = {r: e for r, e in found.items() if r in later}
        if found:
            key = (piece["vehicle_id"], int(d0), piece["driver_id"])
            groups.setdefault(key, []).append((piece, found))
    if not groups and not out:
        return empty_findings()
    for (vid, day, did), members in sorted(groups.items()):
        members.sort(key=lambda m: m[0]["started_ns"])
        evidence: dict[str, dict[str, Any]] = {}
        for _, found in members:
            for reason, ev in found.items():
                evidence.setdefault(reason, ev)
        reasons = [evidence[r] for r in REASONS if r in evidence]
        service_s = sum(p["trip_ended_ns"] - p["trip_started_ns"] for p, _ in members) / NS
        conf = 0.95 * (0.7 + 0.3 * min(1.0, service_s / 1800.0)) * _q(reasons[0])
        shown = members[:MAX_TRIPS_IN_DETAILS]
        role = sorted(
            {k[2] for k in index.get(f"v:{vid}", []) if k[1] == did and k[3] <= day <= k[4]}
        )
        details = {
            "reason": reasons[0]["reason"],
            "reasons": reasons,
            "driver_id": did,
            "role": role[0] if len(role) == 1 else (role or None),
            "local_date": day_iso(day),
            "timezone": timezone,
            "n_trips": len(members),
            "service_s": float(service_s),
            "trips": [
                {
                    "trip_id": p["trip_id"],
                    "started_at": iso_utc(p["trip_started_ns"]),
                    "ended_at": iso_utc(p["trip_ended_ns"]),
                    "duration_s": (p["trip_ended_ns"] - p["trip_started_ns"]) / NS,
                    "driver_fixes": p["n_fixes"],
                }
                for p, _ in shown
            ],
            "fixes": [f for p, _ in shown for f in (p["first"], p["last"])],
            "thresholds": thresholds,
        }
        first = members[0][0]["first"]
        out.append(
            {
                "kind": KIND,
                "vehicle_id": vid,
                "stand_id": None,
                "started_at": pd.Timestamp(members[0][0]["started_ns"], unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(
                    max(p["ended_ns"] for p, _ in members), unit="ns", tz="UTC"
                ),
                "confidence": clip_confidence(conf),
                "details": details,
            }
        )
        geoms.append(shapely.Point(first["lon"], first["lat"]))
    return make_findings(pd.DataFrame(out), geoms)


# ------------------------------------------------------------------------ auxiliary_only


def _vehicle_days(
    mine: pd.DataFrame, trips: pd.DataFrame, *, min_trip_duration_s: float, timezone: str
) -> dict[str, dict[int, dict[str, Any]]]:
    """Per judged vehicle and local day: its drivers, unknown fixes and service trips.

    ``{vehicle: {day: {"drivers", "unknown", "first_ns", "last_ns", "trips": [(start, end,
    fix)]}}}``; ``unknown``: some fix of the day had no ``driver_id``; a trip belongs to its
    start's day.
    """
    frame = mine.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable")
    vehicles = frame[fr.VEHICLE_ID].astype(str).to_numpy(dtype=object)
    ns = utc_ns(frame[fr.TIMESTAMP], column="timestamp", what="os pings")
    days = local_days(ns, timezone)
    driver = frame[fr.DRIVER_ID].to_numpy(dtype=object)
    lat = frame[fr.LAT].to_numpy(dtype=np.float64)
    lon = frame[fr.LON].to_numpy(dtype=np.float64)
    rows = (
        pd.to_numeric(frame[fr.ROW]).fillna(-1).to_numpy(dtype=np.int64)
        if fr.ROW in frame.columns
        else np.full(len(frame), -1, dtype=np.int64)
    )
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for p in range(len(frame)):
        entry = out.setdefault(str(vehicles[p]), {}).setdefault(
            int(days[p]), {"drivers": set(), "unknown": False, "first_ns": int(ns[p]), "trips": []}
        )
        entry["last_ns"] = int(ns[p])
        d = driver[p]
        if _blank(d) or not str(d).strip():
            entry["unknown"] = True
        else:
            entry["drivers"].add(str(d).strip())
    if not len(trips):
        return out
    t_start = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    t_end = utc_ns(trips["ended_at"], column="ended_at", what="as viagens")
    t_day = local_days(t_start, timezone)
    first_at: dict[tuple[str, int], int] = {}
    for p in range(len(frame)):
        first_at.setdefault((str(vehicles[p]), int(ns[p])), p)
    for vid, s, e, day, service in zip(
        trips[fr.VEHICLE_ID].astype(str),
        t_start.tolist(),
        t_end.tolist(),
        t_day.tolist(),
        service_trips(trips, min_duration_s=min_trip_duration_s).tolist(),
        strict=True,
    ):
        if not service:
            continue
        p = first_at.get((vid, int(s)), -1)  # a trip starts on a fix (tracking.trips)
        if p < 0:
            continue
        fix = fix_record(int(ns[p]), lat[p], lon[p], int(rows[p]))
        out[vid][int(day)]["trips"].append((int(s), int(e), fix))
    return out


def _covers(spans: list[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether the union of inclusive day spans covers every day ``lo``–``hi``."""
    day = lo
    for a, b in sorted(spans):
        if a > day:
            break
        day = max(day, b + 1)
        if day > hi:
            return True
    return day > hi


def _auxiliary_runs(
    vehicle: str,
    days: Mapping[int, Mapping[str, Any]],
    *,
    drivers: Mapping[str, Any],
    links: Mapping[str, list[tuple[str, str, str, int, int]]],
    min_days: int,
    until_day: int | None = None,
) -> tuple[list[tuple[list[int], list[str]]], int | None]:
    """Return the blocks of ``min_days`` auxiliary-only service days and the open run's start.

    Service days (days with a service trip) in order; a day is auxiliary-only when every fix
    carried a ``driver_id`` and each is a registered driver linked that day as auxiliar (and
    not as titular). A run grows by such days while one titular's links cover every calendar
    day from its first day; any other service day ends it; a titular that does not cover the
    run from its start restarts it on that day. Each ``min_days`` days of a run make a block
    ``(days, titulars)``, and the run starts anew. The first day of the fixes may be partial
    (the input may start during it): it is not judged. Days from ``until_day`` on are left out.
    Returns the blocks and the first day of the run still open (None if none).
    """
    mine = links.get(f"v:{vehicle}", [])
    blocks: list[tuple[list[int], list[str]]] = []
    run: list[int] = []
    for day in sorted(days)[1:]:
        if until_day is not None and day >= until_day:
            break
        info = days[day]
        if not info["trips"]:
            continue
        today = [k for k in mine if k[3] <= day <= k[4]]
        titulars = {k[1] for k in today if k[2] == "titular"}
        aux = {k[1] for k in today if k[2] == "auxiliar"}
        ok = (
            bool(titulars)
            and not info["unknown"]
            and bool(info["drivers"])
            and all(d in drivers and d in aux and d not in titulars for d in info["drivers"])
        )
        if not ok:
            run = []
            continue
        start = run[0] if run else day

        def whole(t: str, lo: int, hi: int) -> bool:
            spans = [(k[3], k[4]) for k in mine if k[1] == t and k[2] == "titular"]
            return _covers(spans, lo, hi)

        if not any(whole(t, start, day) for t in titulars):
            run = []
        run.append(day)
        if len(run) == min_days:
            kept = sorted(t for t in titulars if whole(t, run[0], day))
            blocks.append((run, kept))
            run = []
    return blocks, (run[0] if run else None)


def _auxiliary_only_findings(
    days_of: Mapping[str, Mapping[int, Mapping[str, Any]]],
    *,
    drivers: Mapping[str, Any],
    links: Mapping[str, list[tuple[str, str, str, int, int]]],
    min_days: int,
    timezone: str,
    thresholds: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[shapely.Point]]:
    out, geoms = [], []
    for vid in sorted(days_of):
        days = days_of[vid]
        blocks, _ = _auxiliary_runs(vid, days, drivers=drivers, links=links, min_days=min_days)
        for block, titulars in blocks:
            first_day, last_day = block[0], block[-1]
            titular_links = [
                _link_record(k)
                for k in links.get(f"v:{vid}", [])
                if k[1] in titulars and k[2] == "titular" and k[3] <= last_day and k[4] >= first_day
            ]
            shown = [
                {
                    "local_date": day_iso(d),
                    "drivers": sorted(days[d]["drivers"]),
                    "n_trips": len(days[d]["trips"]),
                    "service_s": sum(e - s for s, e, _ in days[d]["trips"]) / NS,
                    "first_trip_fix": days[d]["trips"][0][2],
                }
                for d in block
            ]
            reason = {
                "reason": "auxiliary_only",
                "window_from": day_iso(first_day),
                "window_until": day_iso(last_day),
                "service_days": shown,
                "titular_links": titular_links,
                "auxiliary_only_min_days": int(min_days),
            }
            first_trip = days[first_day]["trips"][0]
            last_end = max(e for _, e, _ in days[last_day]["trips"])
            auxiliaries = sorted({d for day in block for d in days[day]["drivers"]})
            out.append(
                {
                    "kind": KIND,
                    "vehicle_id": vid,
                    "stand_id": None,
                    "started_at": pd.Timestamp(first_trip[0], unit="ns", tz="UTC"),
                    "ended_at": pd.Timestamp(last_end, unit="ns", tz="UTC"),
                    "confidence": clip_confidence(AUXILIARY_ONLY_CONFIDENCE),
                    "details": {
                        "reason": "auxiliary_only",
                        "reasons": [reason],
                        "driver_id": None,
                        "drivers": auxiliaries,
                        "role": "auxiliar",
                        "local_date": day_iso(first_day),
                        "timezone": timezone,
                        "n_trips": sum(len(days[d]["trips"]) for d in block),
                        "service_s": float(sum(x["service_s"] for x in shown)),
                        "trips": [],
                        "fixes": [x["first_trip_fix"] for x in shown],
                        "thresholds": dict(thresholds),
                    },
                }
            )
            geoms.append(shapely.Point(first_trip[2]["lon"], first_trip[2]["lat"]))
    return out, geoms


# --------------------------------------------------------------------------------- kernel


def open_from(
    pings: pd.DataFrame,
    *,
    driver_links: pd.DataFrame,
    drivers: pd.DataFrame | None = None,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    min_trip_duration_s: float = DEFAULT_MIN_TRIP_DURATION_S,
    auxiliary_only_min_days: int | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    **_: Any,
) -> dict[str, int]:
    """Each judged vehicle's first trip of its open day, else its open trip (nothing if none).

    The open day is the local day of the open trip's start, or of the last fix: a later trip
    starts on it or later, and may join that day's finding. Vehicles without links are never
    judged: nothing is kept. With ``auxiliary_only_min_days``, a vehicle also keeps every fix
    from the first day of its open auxiliary-only run (judged on the days before the open day),
    else of its open day, plus the day before (but a trip into it from the day before that): the
    tail's first day is partial for the count and never counted, so the day after it is counted
    whole, and the day before's own findings are whole, as the batch makes them. The per-day
    findings of those days wait for the run to end or make its block.
    """
    judged = {k[0] for k in link_registry(driver_links)}
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    out = _open_days(pings, trips, judged=judged, timezone=timezone)
    if auxiliary_only_min_days is None or drivers is None:
        return out
    mine = pings[pings[fr.VEHICLE_ID].astype(str).isin(judged).to_numpy()]
    if not len(mine) or fr.DRIVER_ID not in mine.columns:
        return out
    mine_trips = meter_trips(mine, max_gap_s=max_gap_s)
    days_of = _vehicle_days(
        mine, mine_trips, min_trip_duration_s=min_trip_duration_s, timezone=timezone
    )
    registry = driver_registry(drivers)
    index = _links_index(link_registry(driver_links))
    opened = open_trips(mine, mine_trips)
    spans: dict[str, list[tuple[int, int]]] = {}
    if len(mine_trips):
        t_start = utc_ns(mine_trips["started_at"], column="started_at", what="as viagens")
        t_end = utc_ns(mine_trips["ended_at"], column="ended_at", what="as viagens")
        for vid, a, b in zip(
            mine_trips[fr.VEHICLE_ID].astype(str), t_start.tolist(), t_end.tolist(), strict=True
        ):
            spans.setdefault(vid, []).append((int(a), int(b)))
    for vid, days in days_of.items():
        last_fix_day = max(days)
        o = opened.get(vid)
        open_day = last_fix_day
        if o is not None and o[1] is not None:
            open_day = min(open_day, int(local_days(np.array([o[1]], np.int64), timezone)[0]))
        _blocks, run_start = _auxiliary_runs(
            vid,
            days,
            drivers=registry,
            links=index,
            min_days=int(auxiliary_only_min_days),
            until_day=open_day,
        )
        keep_day = open_day if run_start is None else run_start
        before = [d for d in days if d < keep_day]
        if not before:  # the first day of the fixes: keep them all
            out[vid] = min(info["first_ns"] for info in days.values())
            continue
        # The day before is kept whole (its trips' findings judged as the batch judges them, not
        # from a trip cut off its day's first), but for a trip from the day before that.
        context = days[max(before)]
        cut = context["first_ns"]
        for start, end in spans.get(vid, []):
            if start < cut <= end:  # never split a trip
                cut = end + 1 if end < context["last_ns"] else start
        out[vid] = min(out.get(vid, cut), cut)
    return out


def _open_days(
    pings: pd.DataFrame, trips: pd.DataFrame, *, judged: set[str], timezone: str
) -> dict[str, int]:
    opened = {v: o for v, o in open_trips(pings, trips).items() if v in judged}
    if not opened:
        return {}
    starts = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    trip_day = local_days(starts, timezone)
    day_start: dict[tuple[str, int], int] = {}
    for vehicle, day, start in zip(
        trips[fr.VEHICLE_ID].astype("str"), trip_day.tolist(), starts.tolist(), strict=True
    ):
        day_start.setdefault((vehicle, int(day)), int(start))
    vehicles = list(opened)
    open_day = local_days(
        np.array(
            [opened[v][0] if opened[v][1] is None else opened[v][1] for v in vehicles],
            dtype=np.int64,
        ),
        timezone,
    )
    out: dict[str, int] = {}
    for vehicle, now in zip(vehicles, open_day.tolist(), strict=True):
        if (vehicle, now) in day_start:
            out[vehicle] = day_start[(vehicle, now)]
        elif (open_ns := opened[vehicle][1]) is not None:
            out[vehicle] = int(open_ns)
    return out


def detect_ended_trips(
    pings: pd.DataFrame,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    auxiliary_only_min_days: int | None = None,  # not passed on: a block may still be undone
    **params: Any,
) -> gpd.GeoDataFrame:
    """Find the per-day findings of the vehicles' ended trips: those later fixes only extend.

    A trip still running may yet cross midnight into a day the reason does not hold on, so it
    is left out; an ended trip stays in its day's finding, whose start is its first such trip's.
    An ``auxiliary_only`` block is not: a later fix of the day by the titular undoes it.
    """
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    running = {v: o[1] for v, o in open_trips(pings, trips).items() if o[1] is not None}
    if running:
        since = pings[fr.VEHICLE_ID].astype(str).map(running)
        ns = pings[fr.TIMESTAMP].to_numpy(dtype="datetime64[ns]").astype(np.int64)
        pings = pings[~(since.notna().to_numpy() & (ns >= since.fillna(0).to_numpy(np.int64)))]
    return detect_driver_not_allowed(pings, max_gap_s=max_gap_s, **params)


KERNEL = TrackKernel(KIND, detect_driver_not_allowed, open_from, open_detect=detect_ended_trips)
"""The rule as a kernel (``tracking.detectors.kernel.advance``)."""
