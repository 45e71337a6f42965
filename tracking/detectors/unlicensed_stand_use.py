"""Boarding at a stand without its parking licence (Porto Alegre art. 59 XIII; exception art. 46).

Porto Alegre's decree makes it *gravíssima* to "embarcar usuários em ponto fixo para o qual o
prefixo não possua licença de estacionamento, salvo nas exceções previstas" (art. 59 XIII). The
exception is art. 46: a Táxi Acessível may use any ponto fixo "exclusivamente para o embarque ou
desembarque de pessoa com deficiência", and (sole paragraph) only "pelo período necessário ...,
não sendo permitido ao prefixo estacionar ou aguardar usuário no local".

Definitions (built on ``stands/visits.py``; each is shown in the evidence):

boarding
    A visit with ``boarded`` True and ``licensed`` False (``licensed`` <NA>, unknown, never
    accuses). The meter switch must have been seen: the fix before the boarding fix (the
    vehicle's previous fix) exists, is not ``occupied`` and is at most ``max_gap_s`` earlier.
    A trip that "starts" because tracking resumed with the passenger aboard (an occupied
    vehicle whose GPS came back at a red light next to a stand) says nothing about where the
    passenger boarded. A meter started too long after leaving the stand, or too far from it, is
    not a boarding at it (``boarding_grace_s`` and ``boarding_grace_m`` of
    :func:`stands.visits.detect_visits`: a drop-off at the stand followed by the meter coming on
    down the street is not a boarding there). Those metres accuse only after a stay in the
    stand (at least :data:`OUTSIDE_MIN_STAY_S`: the taxi waited there, the passenger got in,
    the meter came on down the kerb; a shorter stop is a red light or slow traffic, after
    which a hail 24 m past the stand was proposed as art. 59 XIII); a vehicle that only
    passed through, or stopped that briefly, needs the boarding fix
    within ``boarding_max_m`` (default 0: inside) of the stand and the fix before it in the
    visit (the meter came on in the stand: a taxi that took its passenger 15 m outside and
    drove through the stand switched it on between a fix outside and one inside, and three
    such were proposed as art. 59 XIII) — art. 59 XIII punishes
    boarding "em ponto fixo", and a booked pickup at the kerb just past a stand is lawful
    (art. 20 III). They always excuse (a boarding beside the own stand). The evidence shows the
    time from the last fix inside to the meter start (``boarding_lag_s``), the distance from
    the meter start to the stand (``boarding_distance_m``, 0 inside) and the thresholds.
in the stand
    Every finding (a boarding, an accessible or a suspended wait) needs the vehicle to have been
    in the stand: more than :data:`MIN_INSIDE_SHARE` of its fixes from the visit's first to its
    last fix inside lie inside (``n_fixes_inside`` of ``n_fixes_stay``), a fix that reports
    ``accuracy_m`` at least half of it inside the edge (``n_fixes_sure``,
    :data:`stands.visits.SURE_DEPTH_PER_ACCURACY`; a receiver drifting for minutes puts a taxi
    parked beside the stand in it, an error no share averages out). A taxi parked
    beside a small stand under GPS noise has a visit made of the fixes that scattered into it.
    Nor is a stay shorter than :data:`DRIFT_MAX_STAY_S` begun from a standstill beside the stand
    (its approach fix within the visits' ``exit_grace_m``, 30 m, reporting under 10 km/h:
    ``tracking.detectors._evidence.approach``, the rule ``queue_jump`` reads arrivals by): an
    independent check had one of ten cars parked 12 m beside a stand under 20 m of noise per
    axis proposed when three fixes in a row fell inside and its meter came on at the third.
overlapping stands
    One trip start may mark visits of several stands. If any of them is licensed for the
    vehicle or of unknown licence, the boarding may have been at the vehicle's own stand: no
    finding. Otherwise one finding, at the stand where the meter started inside (else the
    longest visit; ties by ``stand_id``), naming the others in ``details.other_stand_ids``;
    a stand the vehicle holds under suspension (below) comes first, its charge being the
    lesser.
fleet
    With ``fleet`` given: a vehicle absent from it, whose licences were not resolved to
    stand ids (``stands`` empty but ``stand_names`` given, as in Porto Alegre's open data), or
    with a licence for a stand the analysed stands lack (``unplaced_stands``,
    :func:`stands.licences.mark_unplaced_licences`: it may be the stand of the boarding under
    another id) has an unknown licence and is not accused. ``accessible`` True is a Táxi
    Acessível: its boardings are excused (art. 46); ``accessible`` unknown lowers the
    confidence.
own stand nearby (GPS drift)
    A boarding is the own stand's, not the foreign one's, when the vehicle's visit to a stand
    it may use (licensed, or of unknown licence, and not under suspension) was in progress at
    the boarding fix or ended at most ``boarding_grace_s`` before it, and the vehicle stayed
    less than :data:`DRIFT_MAX_STAY_S` (60 s, the visits' minimum dwell) in the foreign
    stand before the meter: a taxi that waited at its stand and whose boarding fix drifted into
    a neighbouring stand (two stands tens of metres apart) boarded at its own stand. No finding.
accessible wait
    A Táxi Acessível's visit to a stand it is not licensed for, waiting longer than
    ``accessible_max_wait_s`` — the whole dwell, or until the meter started when it boarded,
    counted from the first fix inside whose meter is not ``occupied`` (a passenger aboard, as
    in a jam through the stand, is no wait; ``details.wait_started_at`` when later than the
    arrival) — is a weaker finding of the same kind (``details.subtype =
    "accessible_wait"``), unless a visit of the vehicle to a licensed (or unknown) stand
    overlaps it. The default, 600 s,
    leaves time to board a wheelchair user.
times
    ``started_at`` is the arrival (first fix inside); ``ended_at`` the departure with the
    passenger — the later of the last fix inside and the boarding fix (PRODUCT.md: "a
    boarding's time is the departure from the stand with the passenger"). Geometry: the
    boarding fix (for a wait, the last fix inside).
confidence (boarding)
    ``0.95 - 0.25 [one fix inside] - 0.2 min(1, lag_s / 120) - 0.1 [accessibility unknown]
    - 0.15 [boarding fix speed-flagged]`` with ``lag_s`` the time from the last fix inside to
    the meter start (0 when it started inside), clipped to [0.05, 0.95].
confidence (accessible wait)
    ``0.4 + 0.3 min(1, (wait_s - accessible_max_wait_s) / (2 accessible_max_wait_s))``.
ended licence
    With ``licence_history`` (licence periods with ``licence_id`` and the exclusion
    ``reason``, if any), a finding whose vehicle held a licence at that stand that ended
    before the local day of the arrival carries ``details.licence_ended`` (the latest such
    licence: its id, dates and reason; POA art. 50, art. 45 § único II: using a stand after
    the prefixo's exclusion or the licence's cassação is boarding without the licence) and
    ``details.licence_end``: ``"excluded"`` when the registry records an exclusion the day
    after its end, else ``"ended"``. Without such a licence the keys are absent. A licence
    that starts later than the day (a renewal after a suspension) is not an ended one.
suspension (POA art. 45 § único)
    With ``suspensions`` (the registry's ``stand_suspensions``: per stand, a prefixo's or a
    driver's ``suspension``, the 20 days of § único I, or ``barred``, § único II a, open-ended
    allowed; inclusive local dates; a stand's closure, ``closed``, sanctions no one and is left
    out), a use of the stand during one is no lawful use, licence or
    not (``details.subtype = "suspended_use"``, ``details.suspension``: the registry row, and
    ``details.suspension_kind``, its kind, for the rulebook). A
    prefixo's row (``vehicle_id``) applies to every use of that vehicle; a driver's
    (``driver_id``) only when the fixes carry that driver: the boarding fix's ``driver_id`` for a
    boarding, the first and the last fix inside for a wait (no ``driver_id``: no finding). The
    day is the local day of the boarding fix; a wait must lie within the dates from arrival to
    the end of the wait (a boarding on the day after ``ends_on`` is lawful). Uses
    (``details.use``):

    - ``boarding``: a boarding as above (same meter-switch evidence) at a stand under
      suspension; where the vehicle has no licence there it stays a ``boarding`` finding and
      only gains ``details.suspension``;
    - ``wait``: "suspensão das atividades no ponto fixo" (I) and "impossibilidade de utilizar
      a área do ponto fixo" (II a) cover waiting in the queue: a visit without such a boarding
      whose wait (not while ``occupied``, as for the accessible wait) exceeds
      ``suspended_min_wait_s`` (default 300 s: a car passing through or
      dropping off is not waiting), unless a visit of the vehicle to a stand it may use
      overlaps it.

    A known Táxi Acessível is never accused under a suspension (the barring of § único II
    reaches "mesmo na hipótese do referida no art. 45, parágrafo único, da Lei nº 11.582, de
    2014", a text the platform does not hold: prefer a missed finding). Confidence: a
    suspended boarding as a boarding; a wait ``0.5 + 0.3 min(1, (wait_s -
    suspended_min_wait_s) / (2 suspended_min_wait_s))``.
Live
    :func:`advance_unlicensed_stand_use` takes the visits released by
    :func:`stands.visits.advance_visits` and holds a vehicle's overlapping visits until its
    next visit arrives after them; the findings are :func:`detect_unlicensed_stand_use`'s.
    The state is bounded by a vehicle's overlapping visits (its presence at overlapping
    stands without a break).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from geo.calendar import DEFAULT_TIMEZONE
from stands.licences import unknown_licences
from stands.suspensions import CLOSED, SUSPENSION_KINDS
from stands.visits import (
    DEFAULT_BOARDING_GRACE_M,
    DEFAULT_BOARDING_GRACE_S,
    DEFAULT_EXIT_GRACE_M,
    visit_records,
    visits_from_records,
)
from tracking.arrays import NS, iso_utc
from tracking.detectors._errors import DetectorInputError
from tracking.detectors._evidence import (
    approach,
    check_threshold,
    clip_confidence,
    fix_record,
    meter_at,
    metres_or_none,
    ping_rows,
    require_columns,
    sorted_positions,
    sorted_view,
    utc_ns,
)
from tracking.detectors._track_kernels import check_timezone, local_dates
from tracking.detectors.findings import empty_findings, make_findings

KIND = "unlicensed_stand_use"
_METER_LITERAL = {"free": "free", "occupied": "occupied", "off": "off"}
DEFAULT_ACCESSIBLE_MAX_WAIT_S = 600.0
DEFAULT_MAX_GAP_S = 300.0
DEFAULT_SUSPENDED_MIN_WAIT_S = 300.0
DEFAULT_BOARDING_MAX_M = 0.0
"""Largest distance from a boarding fix to a foreign stand that is boarding "em ponto fixo"."""
OUTSIDE_MIN_STAY_S = 180.0
"""Shortest stay in a stand before a meter started outside it accuses of boarding there: a red
light or slow traffic through the stand holds a taxi for a minute or two (a signal's cycle is
about two minutes at most), and a passenger may then hail it down the street (art. 20)."""
MIN_INSIDE_SHARE = 0.7
"""A visit is a stay in the stand when more than this share of the vehicle's fixes from its first
to its last fix inside lie inside. Under GPS noise a taxi parked beside a small stand (a booked
client, 12 m from the edge) has some fixes inside: at 20 m of noise per axis about a quarter, so
a short stay of a few fixes may have half of them inside by chance (an independent check had 5
of 240 such cars proposed at half, none at this share). A taxi standing in a 30 m stand, 18 m or
more inside its edge, has over 80 % of its fixes inside under the same noise, nearly all under
the usual 5 m."""
DRIFT_MAX_STAY_S = 60.0
"""Longest stay at a foreign stand before the meter of a boarding attributed to the own stand
(the visits' minimum dwell: a shorter run is a pass-through, not a stay)."""
SUSPENSION_COLUMNS = ("stand_id", "vehicle_id", "driver_id", "starts_on", "ends_on", "kind")
"""The registry's ``stand_suspensions`` columns the rule reads (optional: ``suspension_id``,
``reason``, ``process_ref``)."""
_VISIT_NEEDED = (
    "vehicle_id",
    "stand_id",
    "arrived_at",
    "departed_at",
    "dwell_s",
    "queue_position",
    "boarded",
    "licensed",
    "n_fixes",
    "n_fixes_sure",
    "first_ping",
    "last_ping",
    "boarded_at",
    "boarding_ping",
    "boarding_distance_m",
)


def _cell_tuple(value: Any) -> tuple[str, ...]:
    if value is None or isinstance(value, float) and np.isnan(value):
        return ()
    if isinstance(value, str):
        return tuple(s.strip() for s in value.split(";") if s.strip())
    if isinstance(value, Iterable):
        return tuple(str(s) for s in value if s is not None)
    return ()


def fleet_facts(fleet: pd.DataFrame | None) -> dict[str, dict[str, Any]]:
    """Per vehicle: ``accessible`` (True/False/None), ``stands`` (tuple) and ``licence_known``.

    ``licence_known`` is False for the vehicles of ``stands.licences.unknown_licences``.

    Parameters
    ----------
    fleet : pandas.DataFrame or None
        Fleet frame (``stands/frames.py``).

    Returns
    -------
    dict
        Keyed by vehicle_id; empty without a fleet.
    """
    if fleet is None:
        return {}
    require_columns(fleet, ("vehicle_id",), what="a frota")
    n = len(fleet)
    acc = fleet["accessible"].to_numpy(dtype=object) if "accessible" in fleet else [None] * n
    stands = fleet["stands"].to_numpy(dtype=object) if "stands" in fleet else [()] * n
    unknown = unknown_licences(fleet)
    out: dict[str, dict[str, Any]] = {}
    for vid, a, s in zip(fleet["vehicle_id"].astype("str"), acc, stands, strict=True):
        a_val = None if a is None or (not isinstance(a, bool | np.bool_) and pd.isna(a)) else a
        out[vid] = {
            "accessible": None if a_val is None else bool(a_val),
            "stands": _cell_tuple(s),
            "licence_known": vid not in unknown,
        }
    return out


def _fixes(
    positions: Iterable[int],
    ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    rows: NDArray[np.int64],
) -> list[dict[str, Any]]:
    seen: list[int] = []
    for p in positions:
        if p >= 0 and p not in seen:
            seen.append(p)
    seen.sort(key=lambda p: (int(ns[p]), p))
    return [fix_record(int(ns[p]), lat[p], lon[p], int(rows[p])) for p in seen]


def _check_visits(visits: pd.DataFrame) -> None:
    require_columns(visits, _VISIT_NEEDED, what="as visitas (stands.visits.detect_visits)")


def _text_or_none(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    text = str(value).strip()
    return text or None


_OPEN_END = 2**62


class _Suspensions:
    """The suspension rows by ``(stand, "v"|"d", vehicle or driver)``, with their evidence.

    A stand's closure (``kind`` ``closed``: no prefixo nor driver) is no sanction on anyone and
    is left out.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        require_columns(frame, SUSPENSION_COLUMNS, what="as suspensões de ponto")
        self.records: list[dict[str, Any]] = []
        self.spans: list[tuple[int, int]] = []  # inclusive day numbers
        self.by_key: dict[tuple[str, str, str], list[int]] = {}
        starts = pd.to_datetime(frame["starts_on"]).to_numpy(dtype="datetime64[D]")
        ends = pd.to_datetime(frame["ends_on"]).to_numpy(dtype="datetime64[D]")
        ids = frame["suspension_id"].tolist() if "suspension_id" in frame else [None] * len(frame)
        reasons = frame["reason"].tolist() if "reason" in frame else [None] * len(frame)
        refs = frame["process_ref"].tolist() if "process_ref" in frame else [None] * len(frame)
        for k, rec in enumerate(frame[list(SUSPENSION_COLUMNS)].to_dict("records")):
            stand = _text_or_none(rec["stand_id"])
            vehicle = _text_or_none(rec["vehicle_id"])
            driver = _text_or_none(rec["driver_id"])
            kind = _text_or_none(rec["kind"])
            if kind == CLOSED:
                continue
            if stand is None or (vehicle is None) == (driver is None) or np.isnat(starts[k]):
                msg = (
                    f"as suspensões de ponto, linha {k + 1}: esperado stand_id, starts_on e "
                    "exatamente um de vehicle_id ou driver_id"
                )
                raise DetectorInputError(msg)
            if kind not in SUSPENSION_KINDS:
                msg = (
                    f"as suspensões de ponto, linha {k + 1}, coluna 'kind': era {kind!r}; "
                    f"esperado um de {', '.join(SUSPENSION_KINDS)}"
                )
                raise DetectorInputError(msg)
            end = None if np.isnat(ends[k]) else ends[k]
            sid = ids[k]
            self.records.append(
                {
                    "suspension_id": None if sid is None or pd.isna(sid) else int(sid),
                    "kind": kind,
                    "scope": "vehicle" if vehicle is not None else "driver",
                    "stand_id": stand,
                    "vehicle_id": vehicle,
                    "driver_id": driver,
                    "starts_on": str(starts[k]),
                    "ends_on": None if end is None else str(end),
                    "reason": _text_or_none(reasons[k]),
                    "process_ref": _text_or_none(refs[k]),
                }
            )
            last = _OPEN_END if end is None else int(end.astype(np.int64))
            self.spans.append((int(starts[k].astype(np.int64)), last))
            key = (stand, "v", vehicle) if vehicle is not None else (stand, "d", str(driver))
            self.by_key.setdefault(key, []).append(len(self.records) - 1)

    def find(
        self,
        *,
        stand: str,
        vehicle: str,
        driver: str | None,
        first_day: np.datetime64,
        last_day: np.datetime64,
    ) -> int:
        """Return the row covering ``first_day..last_day`` (the prefixo's first), else -1."""
        keys = [(stand, "v", vehicle)] + ([] if driver is None else [(stand, "d", driver)])
        for key in keys:
            hits = [
                k
                for k in self.by_key.get(key, ())
                if self.spans[k][0] <= int(first_day.astype(np.int64))
                and int(last_day.astype(np.int64)) <= self.spans[k][1]
            ]
            if hits:
                return max(hits, key=lambda k: (self.spans[k][0], -k))
        return -1


def _drivers(pings: pd.DataFrame) -> NDArray[Any]:
    """Each fix's ``driver_id`` as text, None where absent."""
    if "driver_id" not in pings.columns:
        return np.full(len(pings), None, dtype=object)
    return np.asarray([_text_or_none(d) for d in pings["driver_id"].tolist()], dtype=object)


def _free_since(
    pings: pd.DataFrame, first: NDArray[np.int64], last: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Time (ns) of each visit's first fix from ``first`` to ``last`` not ``occupied``, else -1.

    A meter unknown (no column, or empty) is not occupied: only a seen passenger excuses.
    """
    if not len(first):
        return np.zeros(0, dtype=np.int64)
    order, _, ns = sorted_view(pings)
    if "meter" not in pings.columns:
        return ns[sorted_positions(order, first)]
    occupied = np.asarray(pings["meter"].eq("occupied").fillna(False), dtype=bool)
    if order is not None:
        occupied = occupied[order]
    free_count = np.cumsum(~occupied)
    sf, sl = sorted_positions(order, first), sorted_positions(order, last)
    before = np.where(sf > 0, free_count[np.maximum(sf - 1, 0)], 0)
    at = np.searchsorted(free_count, before + 1, side="left")
    ok = at <= sl
    return np.where(ok, ns[np.minimum(at, len(ns) - 1)], -1)


def _previous_fix(pings: pd.DataFrame, positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """Position (in ``pings``) of each fix's previous fix of the same vehicle, -1 if none."""
    order, codes, _ = sorted_view(pings)
    sp = sorted_positions(order, positions)
    prev = sp - 1
    ok = (prev >= 0) & (codes[np.maximum(prev, 0)] == codes[sp])
    prev_orig = prev if order is None else order[np.maximum(prev, 0)]
    return np.where(ok, prev_orig, -1)


def _boarding_finding(
    *,
    vehicle_id: str,
    stand_id: str,
    arrived_ns: int,
    departed_ns: int,
    boarded_ns: int,
    n_fixes: int,
    n_stay: int,
    queue_position: int,
    fixes: list[dict[str, Any]],
    accessible: bool | None,
    licensed_stands: list[str] | None,
    meter_before: Any,
    switch_gap_ns: int,
    other_stand_ids: list[str],
    boarding_flagged: bool,
    boarding_lon: float,
    boarding_lat: float,
    boarding_distance_m: float | None,
    max_gap_s: float,
    boarding_grace_s: float,
    boarding_grace_m: float,
    boarding_max_m: float = DEFAULT_BOARDING_MAX_M,
    suspension: dict[str, Any] | None = None,
    subtype: str = "boarding",
    licensed: bool | None = False,
    driver_id: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """One boarding finding and its point as ``(lon, lat)`` (the batch and live kernels).

    With ``suspension``, the registry row the boarding breaks (``subtype``
    ``suspended_use`` unless the licence is known to be missing: then a ``boarding``).
    """
    lag_s = max(0.0, (boarded_ns - departed_ns) / NS)
    conf = (
        0.95
        - 0.25 * (n_fixes == 1)
        - 0.2 * min(1.0, lag_s / 120.0)
        - 0.1 * (accessible is None)
        - 0.15 * boarding_flagged
    )
    details = {
        "subtype": subtype,
        "fixes": fixes,
        "arrived_at": iso_utc(arrived_ns),
        "departed_at": iso_utc(departed_ns),
        "boarded_at": iso_utc(boarded_ns),
        "dwell_s": float((departed_ns - arrived_ns) / NS),
        "boarding_lag_s": float(lag_s),
        "boarding_distance_m": metres_or_none(boarding_distance_m),
        "n_fixes_inside": int(n_fixes),
        "n_fixes_stay": int(n_stay),
        "queue_position": int(queue_position),
        "licensed": licensed,
        "licensed_stands": licensed_stands,
        "accessible": accessible,
        # canonical literal: keeping the column's own str would pin its memory
        "meter_before": _METER_LITERAL.get(meter_before, "unknown"),
        "meter_switch_gap_s": float(switch_gap_ns / NS),
        "other_stand_ids": other_stand_ids,
        "thresholds": {
            "max_gap_s": float(max_gap_s),
            "boarding_grace_s": float(boarding_grace_s),
            "boarding_grace_m": float(boarding_grace_m),
            "boarding_max_m": float(boarding_max_m),
            "min_inside_share": MIN_INSIDE_SHARE,
        },
    }
    if suspension is not None:
        details["use"] = "boarding"
        details["driver_id"] = driver_id
        details["suspension"] = suspension
        details["suspension_kind"] = suspension["kind"]
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": arrived_ns,
        "ended_at": max(departed_ns, boarded_ns),
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, (boarding_lon, boarding_lat)


def _wait_finding(
    *,
    vehicle_id: str,
    stand_id: str,
    arrived_ns: int,
    departed_ns: int,
    boarded_ns: int | None,
    n_fixes: int,
    n_stay: int,
    queue_position: int,
    fixes: list[dict[str, Any]],
    licensed_stands: list[str],
    last_lon: float,
    last_lat: float,
    accessible_max_wait_s: float,
    wait_from_ns: int | None = None,
) -> tuple[dict[str, Any], Any]:
    """One accessible-wait finding and its point as ``(lon, lat)`` (the batch and live kernels)."""
    end = departed_ns if boarded_ns is None else min(departed_ns, boarded_ns)
    since = arrived_ns if wait_from_ns is None else max(arrived_ns, wait_from_ns)
    wait_s = (end - since) / NS
    excess = (wait_s - accessible_max_wait_s) / max(2.0 * accessible_max_wait_s, 1.0)
    conf = 0.4 + 0.3 * min(1.0, excess)
    details = {
        "subtype": "accessible_wait",
        "fixes": fixes,
        "arrived_at": iso_utc(arrived_ns),
        "departed_at": iso_utc(departed_ns),
        "boarded_at": None if boarded_ns is None else iso_utc(boarded_ns),
        "dwell_s": float((departed_ns - arrived_ns) / NS),
        "wait_s": float(wait_s),
        "n_fixes_inside": int(n_fixes),
        "n_fixes_stay": int(n_stay),
        "queue_position": int(queue_position),
        "licensed": False,
        "licensed_stands": licensed_stands,
        "accessible": True,
        "thresholds": {
            "accessible_max_wait_s": float(accessible_max_wait_s),
            "min_inside_share": MIN_INSIDE_SHARE,
        },
    }
    if since > arrived_ns:  # arrived with the meter occupied: the wait began when it went off
        details["wait_started_at"] = iso_utc(since)
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": arrived_ns,
        "ended_at": end,
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, (last_lon, last_lat)


def _suspended_wait_finding(
    *,
    vehicle_id: str,
    stand_id: str,
    arrived_ns: int,
    departed_ns: int,
    wait_end_ns: int,
    n_fixes: int,
    n_stay: int,
    queue_position: int,
    fixes: list[dict[str, Any]],
    licensed: bool | None,
    licensed_stands: list[str] | None,
    accessible: bool | None,
    driver_id: str | None,
    suspension: dict[str, Any],
    last_lon: float,
    last_lat: float,
    suspended_min_wait_s: float,
    wait_from_ns: int | None = None,
) -> tuple[dict[str, Any], Any]:
    """One wait at a stand under suspension and its point (the last fix inside)."""
    since = arrived_ns if wait_from_ns is None else max(arrived_ns, wait_from_ns)
    wait_s = (wait_end_ns - since) / NS
    excess = (wait_s - suspended_min_wait_s) / max(2.0 * suspended_min_wait_s, 1.0)
    details = {
        "subtype": "suspended_use",
        "use": "wait",
        "fixes": fixes,
        "arrived_at": iso_utc(arrived_ns),
        "departed_at": iso_utc(departed_ns),
        "dwell_s": float((departed_ns - arrived_ns) / NS),
        "wait_s": float(wait_s),
        "n_fixes_inside": int(n_fixes),
        "n_fixes_stay": int(n_stay),
        "queue_position": int(queue_position),
        "licensed": licensed,
        "licensed_stands": licensed_stands,
        "accessible": accessible,
        "driver_id": driver_id,
        "suspension": suspension,
        "suspension_kind": suspension["kind"],
        "thresholds": {
            "suspended_min_wait_s": float(suspended_min_wait_s),
            "min_inside_share": MIN_INSIDE_SHARE,
        },
    }
    if since > arrived_ns:  # arrived with the meter occupied: the wait began when it went off
        details["wait_started_at"] = iso_utc(since)
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": arrived_ns,
        "ended_at": wait_end_ns,
        "confidence": clip_confidence(0.5 + 0.3 * min(1.0, excess)),
        "details": details,
    }
    return row, (last_lon, last_lat)


def detect_unlicensed_stand_use(
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    licence_history: pd.DataFrame | None = None,
    suspensions: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    accessible_max_wait_s: float = DEFAULT_ACCESSIBLE_MAX_WAIT_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    suspended_min_wait_s: float = DEFAULT_SUSPENDED_MIN_WAIT_S,
    boarding_max_m: float = DEFAULT_BOARDING_MAX_M,
) -> gpd.GeoDataFrame:
    """Find boardings at stands the vehicle has no parking licence for, and accessible waits.

    Serves Porto Alegre art. 59 XIII (gravíssima) with the art. 46 exception for Táxis
    Acessíveis (see the module docstring for every definition and the confidence).

    Parameters
    ----------
    visits : pandas.DataFrame
        From :func:`stands.visits.detect_visits` with its helper columns, computed with
        licences (``licensed`` <NA> never accuses).
    pings : pandas.DataFrame
        The pings the visits were built from (``first_ping``, ``last_ping`` and
        ``boarding_ping`` are positions in it): ``vehicle_id``, ``timestamp``, ``lat``,
        ``lon``, ``meter``, optional ``row``, ``speed_flag``.
    fleet : pandas.DataFrame, optional
        Fleet frame (``vehicle_id``, ``accessible``, ``stands``, ``stand_names``). Without it
        every vehicle is of unknown accessibility and the visits' ``licensed`` is trusted.
    licence_history : pandas.DataFrame, optional
        Licence periods (``stands/licences.py`` columns, optional ``licence_id`` and
        ``reason``, the exclusion's): a finding after the end of one says which (see "ended
        licence" in the module docstring).
    suspensions : pandas.DataFrame, optional
        Stand suspensions (:data:`SUSPENSION_COLUMNS`, optional ``suspension_id``, ``reason``,
        ``process_ref``; ``ends_on`` empty: open): uses during one are found (POA art. 45 §
        único; see "suspension" in the module docstring).
    timezone : str, default "America/Sao_Paulo"
        Zone of the licences' and suspensions' local dates.
    accessible_max_wait_s : float, default 600
        Longest stay of a Táxi Acessível at a stand it is not licensed for (art. 46 sole §).
    max_gap_s : float, default 300
        Longest silence between the fix before the boarding and the boarding fix for the meter
        switch to count as seen (the pipeline's trip gap).
    boarding_grace_s, boarding_grace_m : float, default 120 and 30
        The thresholds the visits' boardings were decided with
        (:func:`stands.visits.detect_visits`), shown in the evidence.
    suspended_min_wait_s : float, default 300
        Shortest wait at a stand under suspension that is a use of it (art. 45 § único: a
        vehicle passing through or dropping off is not using the stand).
    boarding_max_m : float, default 0
        Largest distance from the boarding fix to a stand the vehicle only passed through
        (stayed less than :data:`DRIFT_MAX_STAY_S`) for a finding (0: inside it); after a stay,
        ``boarding_grace_m``. ``boarding_grace_m`` always lets a boarding beside a stand the
        vehicle may use excuse.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``unlicensed_stand_use``.

    Raises
    ------
    DetectorInputError
        If visits or pings lack columns, or positions point outside the pings.
    DetectorThresholdError
        If a threshold is negative (``max_gap_s`` must be > 0).
    """
    check_timezone(timezone)
    check_threshold("accessible_max_wait_s", accessible_max_wait_s, unit="segundos")
    check_threshold("max_gap_s", max_gap_s, positive=True, unit="segundos")
    check_threshold("boarding_grace_s", boarding_grace_s, unit="segundos")
    check_threshold("boarding_grace_m", boarding_grace_m, unit="metros")
    check_threshold("suspended_min_wait_s", suspended_min_wait_s, unit="segundos")
    check_threshold("boarding_max_m", boarding_max_m, unit="metros")
    _check_visits(visits)
    table = _Suspensions(suspensions) if suspensions is not None and len(suspensions) else None
    require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
    facts = fleet_facts(fleet)
    if len(visits) == 0:
        return empty_findings()
    n = len(pings)
    first = visits["first_ping"].to_numpy(dtype=np.int64)
    last = visits["last_ping"].to_numpy(dtype=np.int64)
    bping = pd.to_numeric(visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64)
    if len(first) and (first.min() < 0 or max(first.max(), last.max(), bping.max()) >= n):
        msg = "as visitas apontam para pings inexistentes; passe os pings de onde vieram"
        raise DetectorInputError(msg)

    vehicle = visits["vehicle_id"].astype("str").to_numpy(dtype=object)
    stand = visits["stand_id"].astype("str").to_numpy(dtype=object)
    lic = visits["licensed"].astype("boolean")
    unlicensed = lic.eq(False).fillna(False).to_numpy(dtype=bool)
    boarded = visits["boarded"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    boarded &= bping >= 0
    if facts:
        fact = [facts.get(v) for v in vehicle]
        known = np.array([f is not None and f["licence_known"] for f in fact], dtype=bool)
        accessible = np.array([None if f is None else f["accessible"] for f in fact], dtype=object)
    else:
        known = np.ones(len(visits), dtype=bool)
        accessible = np.full(len(visits), None, dtype=object)
    is_acc = accessible == True  # noqa: E712 (object array of True/False/None)
    accusable = unlicensed & known  # licence known to be missing
    licensed_of = [None if pd.isna(x) else bool(x) for x in lic.tolist()]

    arrived = utc_ns(visits["arrived_at"], column="arrived_at", what="as visitas")
    departed = utc_ns(visits["departed_at"], column="departed_at", what="as visitas")
    boarded_ns = utc_ns(
        visits["boarded_at"], column="boarded_at", what="as visitas", allow_null=True
    )
    dwell_s = (departed - arrived) / NS
    distance_m = pd.to_numeric(visits["boarding_distance_m"]).to_numpy(dtype=np.float64)
    n_fixes = visits["n_fixes"].to_numpy(dtype=np.int64)
    n_sure = visits["n_fixes_sure"].to_numpy(dtype=np.int64)
    queue = visits["queue_position"].to_numpy(dtype=np.int64)

    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    lat = pings["lat"].to_numpy(dtype=np.float64)
    lon = pings["lon"].to_numpy(dtype=np.float64)
    rows = ping_rows(pings)
    flagged = (
        pings["speed_flag"].fillna(False).to_numpy(dtype=bool)
        if "speed_flag" in pings.columns
        else np.zeros(n, dtype=bool)
    )
    # The vehicle's fixes from the first to the last inside: most inside (surely, for their
    # reported accuracy), or it stood beside.
    order, _, _ = sorted_view(pings)
    first_sorted = sorted_positions(order, first)
    stay = sorted_positions(order, last) - first_sorted + 1
    stood = n_sure > MIN_INSIDE_SHARE * stay
    # A short stay begun from a standstill beside the stand: a car parked there whose GPS
    # scattered a few fixes in a row into the stand.
    beside = approach(visits, min_approach_m=DEFAULT_EXIT_GRACE_M)[1]
    stood &= ~(beside & (dwell_s < DRIFT_MAX_STAY_S))
    # The meter came on between the boarding fix and the one before it: within the visit only
    # when the boarding fix is not the visit's first (a taxi driving through, meter on).
    switched_within = sorted_positions(order, np.maximum(bping, 0)) > first_sorted
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    wait_end = np.where(boarded, np.minimum(departed, boarded_ns), departed)
    # A wait starts at the first fix inside whose meter is not occupied: a car with a
    # passenger aboard (stuck in a jam through the stand) is not waiting there.
    free_ns = _free_since(pings, first, last)
    wait_from = np.maximum(free_ns, arrived)
    wait_s = np.where(free_ns < 0, 0.0, np.maximum(wait_end - wait_from, 0) / NS)

    # --- suspensions: the registry row each boarding or wait breaks (-1: none) ----------------
    susp_board = np.full(len(visits), -1, dtype=np.int64)
    susp_wait = np.full(len(visits), -1, dtype=np.int64)
    driver = _drivers(pings)
    if table is not None:
        board_day = local_dates(np.where(boarded, boarded_ns, arrived), timezone)
        arrive_day = local_dates(arrived, timezone)
        wait_day = local_dates(wait_end, timezone)
        for i in np.flatnonzero(~is_acc).tolist():
            if boarded[i]:
                susp_board[i] = table.find(
                    stand=stand[i],
                    vehicle=vehicle[i],
                    driver=driver[bping[i]],
                    first_day=board_day[i],
                    last_day=board_day[i],
                )
            first_driver, last_driver = driver[first[i]], driver[last[i]]
            susp_wait[i] = table.find(
                stand=stand[i],
                vehicle=vehicle[i],
                driver=first_driver if first_driver == last_driver else None,
                first_day=arrive_day[i],
                last_day=wait_day[i],
            )
    suspended = susp_board >= 0
    found_keys: set[int] = set()

    # --- boardings -----------------------------------------------------------------------
    cand = np.flatnonzero(boarded)
    if len(cand):
        frame = pd.DataFrame(
            {
                "v": cand,
                "key": bping[cand],
                "ok": (accusable[cand] & ~is_acc[cand]) | suspended[cand],
                "inside": (boarded_ns[cand] <= departed[cand]),
                "dwell": dwell_s[cand],
                "stand": stand[cand],
                # a stand held under suspension first: its charge is the lesser one
                "lesser": ~accusable[cand],
                # a meter started beside the stand accuses only after a stay in it
                "near": stood[cand]
                & (
                    ((distance_m[cand] <= boarding_max_m) & switched_within[cand])
                    | (dwell_s[cand] >= OUTSIDE_MIN_STAY_S)
                ),
                "stood": stood[cand],
            }
        )
        all_ok = frame.groupby("key")["ok"].transform("all").to_numpy(dtype=bool)
        frame = frame.loc[all_ok]
        frame = frame.sort_values(
            ["key", "lesser", "near", "inside", "dwell", "stand"],
            ascending=[True, False, False, False, False, True],
        )
        # The stands of each boarding fix, in the order above (one in nearly every case).
        keys = frame["key"].to_numpy(dtype=np.int64)
        members = frame["stand"].to_numpy(dtype=object)
        cut = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1], [True])))
        others = {
            int(keys[a]): members[a:b].tolist()
            for a, b in zip(cut[:-1], cut[1:], strict=True)
            if len(keys)
        }
        chosen = frame.drop_duplicates("key")
        # art. 59 XIII: boarding "em ponto fixo"; a meter started beside a stand the vehicle
        # only passed through is not (a booked pickup at the kerb, art. 20 III)
        chosen = chosen.loc[(chosen["lesser"] & chosen["stood"]) | chosen["near"]]
        near_own = _near_own_stand(
            chosen["v"].to_numpy(dtype=np.int64),
            np.flatnonzero(~accusable & (susp_wait < 0)),
            vehicle,
            arrived,
            departed,
            boarded_ns,
            grace_ns=round(boarding_grace_s * NS),
            max_stay_ns=round(DRIFT_MAX_STAY_S * NS),
        )
        chosen = chosen.loc[~chosen["v"].isin(near_own)]
        if len(chosen):
            idx = chosen["v"].to_numpy(dtype=np.int64)
            bp = bping[idx]
            prev = _previous_fix(pings, bp)
            pp = np.maximum(prev, 0)
            meter_before = meter_at(pings, pp)
            switch_seen = (
                (prev >= 0)
                & (ns[bp] - ns[pp] <= round(max_gap_s * NS))
                & pd.Series(meter_before).isin(["free", "off"]).to_numpy(dtype=bool)
            )
            for k, i in enumerate(idx.tolist()):
                if not switch_seen[k]:
                    continue
                b, p = int(bp[k]), int(prev[k])
                found_keys.add(b)
                row_s = int(susp_board[i])
                fact_i = facts.get(vehicle[i])
                row, geom = _boarding_finding(
                    vehicle_id=vehicle[i],
                    stand_id=stand[i],
                    arrived_ns=int(arrived[i]),
                    departed_ns=int(departed[i]),
                    boarded_ns=int(boarded_ns[i]),
                    n_fixes=int(n_fixes[i]),
                    n_stay=int(stay[i]),
                    queue_position=int(queue[i]),
                    fixes=_fixes([int(first[i]), int(last[i]), p, b], ns, lat, lon, rows),
                    accessible=accessible[i],
                    licensed_stands=None if fact_i is None else list(fact_i["stands"]),
                    meter_before=meter_before[k],
                    switch_gap_ns=int(ns[b] - ns[p]),
                    other_stand_ids=[s for s in others[b] if s != stand[i]],
                    boarding_flagged=bool(flagged[b]),
                    boarding_lon=float(lon[b]),
                    boarding_lat=float(lat[b]),
                    boarding_distance_m=float(distance_m[i]),
                    max_gap_s=max_gap_s,
                    boarding_grace_s=boarding_grace_s,
                    boarding_grace_m=boarding_grace_m,
                    boarding_max_m=boarding_max_m,
                    suspension=None if row_s < 0 else dict(table.records[row_s]),  # type: ignore[union-attr]
                    subtype="boarding" if accusable[i] else "suspended_use",
                    licensed=False if accusable[i] else _licence_seen(licensed_of[i], fact_i),
                    driver_id=driver[b],
                )
                out.append(row)
                geoms.append(geom)

    # --- waits at a stand under suspension -----------------------------------------------
    held = (susp_wait >= 0) & (wait_s > suspended_min_wait_s) & stood
    held &= ~np.isin(bping, np.fromiter(found_keys, dtype=np.int64, count=len(found_keys)))
    susp_waits = np.flatnonzero(held)
    if len(susp_waits):
        excused = _overlapped(
            susp_waits, np.flatnonzero(~accusable & (susp_wait < 0)), vehicle, arrived, departed
        )
        for i in susp_waits.tolist():
            if i in excused:
                continue
            p = int(last[i])
            fact_i = facts.get(vehicle[i])
            row, geom = _suspended_wait_finding(
                vehicle_id=vehicle[i],
                stand_id=stand[i],
                arrived_ns=int(arrived[i]),
                departed_ns=int(departed[i]),
                wait_end_ns=int(wait_end[i]),
                n_fixes=int(n_fixes[i]),
                n_stay=int(stay[i]),
                queue_position=int(queue[i]),
                fixes=_fixes([int(first[i]), p], ns, lat, lon, rows),
                licensed=False if accusable[i] else _licence_seen(licensed_of[i], fact_i),
                licensed_stands=None if fact_i is None else list(fact_i["stands"]),
                accessible=accessible[i],
                driver_id=driver[first[i]],
                suspension=dict(table.records[int(susp_wait[i])]),  # type: ignore[union-attr]
                last_lon=float(lon[p]),
                last_lat=float(lat[p]),
                suspended_min_wait_s=suspended_min_wait_s,
                wait_from_ns=int(wait_from[i]),
            )
            out.append(row)
            geoms.append(geom)

    # --- accessible waits ----------------------------------------------------------------
    waits = np.flatnonzero(accusable & is_acc & stood & (wait_s > accessible_max_wait_s))
    if len(waits):
        # A visit of the same vehicle to a stand it may use (licensed or unknown) overlapping
        # the wait excuses it (overlapping stands).
        excused = _overlapped(waits, np.flatnonzero(~accusable), vehicle, arrived, departed)
        for i in waits.tolist():
            if i in excused:
                continue
            p = int(last[i])
            row, geom = _wait_finding(
                vehicle_id=vehicle[i],
                stand_id=stand[i],
                arrived_ns=int(arrived[i]),
                departed_ns=int(departed[i]),
                boarded_ns=int(boarded_ns[i]) if boarded[i] else None,
                n_fixes=int(n_fixes[i]),
                n_stay=int(stay[i]),
                queue_position=int(queue[i]),
                fixes=_fixes([int(first[i]), p, int(bping[i])], ns, lat, lon, rows),
                licensed_stands=list(facts[vehicle[i]]["stands"]),
                last_lon=float(lon[p]),
                last_lat=float(lat[p]),
                accessible_max_wait_s=accessible_max_wait_s,
                wait_from_ns=int(wait_from[i]),
            )
            out.append(row)
            geoms.append(geom)
    if not out:
        return empty_findings()
    if licence_history is not None:
        _add_ended_licences(out, licence_history, timezone)
    return make_findings(pd.DataFrame(out), geoms)


def _licence_seen(licensed: bool | None, fact: Mapping[str, Any] | None) -> bool | None:
    """Return the visit's licence as evidence: None where the fleet does not know it."""
    if fact is not None and not fact["licence_known"]:
        return None
    return licensed


def _overlapped(
    waits: NDArray[np.int64],
    lawful: NDArray[np.int64],
    vehicle: NDArray[Any],
    arrived: NDArray[np.int64],
    departed: NDArray[np.int64],
) -> set[int]:
    """Return the waits a ``lawful`` visit of the vehicle overlaps (it may have queued there)."""
    left = pd.DataFrame({"w": waits, "veh": vehicle[waits]})
    right = pd.DataFrame({"o": lawful, "veh": vehicle[lawful]})
    pairs = left.merge(right, on="veh")
    w, o = pairs["w"].to_numpy(dtype=np.int64), pairs["o"].to_numpy(dtype=np.int64)
    overlap = (arrived[o] <= departed[w]) & (departed[o] >= arrived[w])
    return set(w[overlap].tolist())


def _near_own_stand(
    boardings: NDArray[np.int64],
    lawful: NDArray[np.int64],
    vehicle: NDArray[Any],
    arrived: NDArray[np.int64],
    departed: NDArray[np.int64],
    boarded_ns: NDArray[np.int64],
    *,
    grace_ns: int,
    max_stay_ns: int,
) -> set[int]:
    """Return the boardings that follow a ``lawful`` visit of the vehicle (GPS drift).

    A lawful visit (a stand the vehicle may use) in progress at the boarding fix or left at
    most ``grace_ns`` before it, and a stay at the foreign stand before the meter, outside
    the lawful visit, shorter than ``max_stay_ns``: the taxi boarded at its own stand and the
    fix drifted into a neighbour, or it waited where its own stand and the neighbour overlap
    (two 30 m circles of points 26 m apart) and left through the neighbour.
    """
    if not len(boardings) or not len(lawful):
        return set()
    left = pd.DataFrame({"b": boardings, "veh": vehicle[boardings]})
    right = pd.DataFrame({"o": lawful, "veh": vehicle[lawful]})
    pairs = left.merge(right, on="veh")
    b, o = pairs["b"].to_numpy(dtype=np.int64), pairs["o"].to_numpy(dtype=np.int64)
    at = boarded_ns[b]
    until = np.minimum(at, departed[b])
    shared = np.minimum(departed[o], until) - np.maximum(arrived[o], arrived[b])
    alone = until - arrived[b] - np.maximum(shared, 0)
    near = (o != b) & (arrived[o] <= at) & (departed[o] >= at - grace_ns) & (alone < max_stay_ns)
    return set(b[near].tolist())


def _add_ended_licences(rows: list[dict[str, Any]], history: pd.DataFrame, timezone: str) -> None:
    """Name in each finding the vehicle's latest licence at the stand ended before the day."""
    if not len(history):
        return
    require_columns(
        history, ("vehicle_id", "stand_id", "valid_from", "valid_until"), what="as licenças"
    )
    days = local_dates(np.asarray([int(r["started_at"]) for r in rows], dtype=np.int64), timezone)
    until = pd.to_datetime(history["valid_until"]).to_numpy(dtype="datetime64[D]")
    since = pd.to_datetime(history["valid_from"]).to_numpy(dtype="datetime64[D]")
    vids = history["vehicle_id"].astype("str").to_numpy(dtype=object)
    sids = history["stand_id"].astype("str").to_numpy(dtype=object)
    ids = history["licence_id"].tolist() if "licence_id" in history else [None] * len(history)
    why = history["reason"].tolist() if "reason" in history else [None] * len(history)
    for row, day in zip(rows, days, strict=True):
        hit = np.flatnonzero(
            (vids == row["vehicle_id"])
            & (sids == row["stand_id"])
            & ~np.isnat(until)
            & (until < day)
        )
        if not len(hit):
            continue
        k = int(hit[np.argmax(until[hit])])
        reason = None if why[k] is None or pd.isna(why[k]) else str(why[k])
        lid = ids[k]
        row["details"]["licence_ended"] = {
            "licence_id": None if lid is None or pd.isna(lid) else int(lid),
            "valid_from": None if np.isnat(since[k]) else str(since[k]),
            "valid_until": str(until[k]),
            "reason": reason,
        }
        row["details"]["licence_end"] = "excluded" if reason is not None else "ended"


# ----------------------------------------------------------------------------- the kernel


def _end_ns(record: Mapping[str, Any]) -> int:
    """Return the later of a visit record's departure and boarding (the last fix read)."""
    visit = record["visit"]
    board = visit.get("boarded_at")
    return max(int(visit["departed_at"]), -1 if board is None else int(board))


def advance_unlicensed_stand_use(
    states: Mapping[str, Mapping[str, Any] | None],
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    pending: Mapping[str, int] | None = None,
    final: bool = False,
    fleet: pd.DataFrame | None = None,
    licence_history: pd.DataFrame | None = None,
    suspensions: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    accessible_max_wait_s: float = DEFAULT_ACCESSIBLE_MAX_WAIT_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    suspended_min_wait_s: float = DEFAULT_SUSPENDED_MIN_WAIT_S,
    boarding_max_m: float = DEFAULT_BOARDING_MAX_M,
) -> tuple[dict[str, dict[str, Any]], gpd.GeoDataFrame]:
    """Run :func:`detect_unlicensed_stand_use` on released visits once no other can matter.

    A finding rests on the visits of one vehicle that overlap (a boarding fix shared by
    overlapping stands, a wait excused by a visit to a stand the vehicle may use): a vehicle's
    visits form clusters of overlapping ``[arrived_at, max(departed_at, boarded_at)]``. A
    cluster is closed once the vehicle's next visit arrives after it (``pending``, from
    :func:`stands.visits.unreleased_arrivals`, is later than its end); the rule then runs on
    the closed clusters. A vehicle's state is its released visits in open clusters.

    Parameters
    ----------
    states : mapping
        ``vehicle_id → state`` (``{"visits": [...]}`` plain data); missing or None: nothing.
    visits, pings : pandas.DataFrame
        Visits released by one call of :func:`stands.visits.advance_visits` (computed with
        licences) and the fixes their positions refer to.
    pending : mapping of str to int, optional
        :func:`stands.visits.unreleased_arrivals` after that call; a vehicle absent from it
        has nothing pending.
    final : bool, default False
        End of the input: every cluster is closed.
    fleet, licence_history, suspensions, timezone, accessible_max_wait_s, max_gap_s, \
boarding_grace_s, boarding_grace_m, suspended_min_wait_s, boarding_max_m
        As in :func:`detect_unlicensed_stand_use`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame)
        The new state of every vehicle of ``states`` and ``visits`` (empty dicts dropped) and
        the findings of the closed clusters.
    """
    by_vehicle: dict[str, list[dict[str, Any]]] = {
        str(v): list((s or {}).get("visits", [])) for v, s in states.items()
    }
    for record in visit_records(visits, pings):
        by_vehicle.setdefault(str(record["visit"]["vehicle_id"]), []).append(record)
    closed: list[dict[str, Any]] = []
    out: dict[str, dict[str, Any]] = {}
    for vid, records in sorted(by_vehicle.items()):
        bound = None if final or pending is None else pending.get(vid)
        records.sort(key=lambda r: (int(r["visit"]["arrived_at"]), str(r["visit"]["stand_id"])))
        cluster: list[dict[str, Any]] = []
        reach = -1
        held: list[dict[str, Any]] = []
        for record in records:
            if int(record["visit"]["arrived_at"]) > reach:
                (held if bound is not None and bound <= reach else closed).extend(cluster)
                cluster, reach = [], -1
            cluster.append(record)
            # a boarding up to boarding_grace_s after a visit may be that visit's (drift)
            reach = max(reach, _end_ns(record) + round(boarding_grace_s * NS))
        (held if bound is not None and bound <= reach else closed).extend(cluster)
        if held:
            out[vid] = {"visits": held}
    frame, fixes = visits_from_records(closed)
    found = detect_unlicensed_stand_use(
        frame,
        fixes,
        fleet=fleet,
        licence_history=licence_history,
        suspensions=suspensions,
        timezone=timezone,
        accessible_max_wait_s=accessible_max_wait_s,
        max_gap_s=max_gap_s,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
        suspended_min_wait_s=suspended_min_wait_s,
        boarding_max_m=boarding_max_m,
    )
    return out, found
