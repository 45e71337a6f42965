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
    down the street is not a boarding there). The evidence shows the time from the last fix
    inside to the meter start (``boarding_lag_s``), the distance from the meter start to the
    stand (``boarding_distance_m``, 0 inside) and both thresholds.
overlapping stands
    One trip start may mark visits of several stands. If any of them is licensed for the
    vehicle or of unknown licence, the boarding may have been at the vehicle's own stand: no
    finding. Otherwise one finding, at the stand where the meter started inside (else the
    longest visit; ties by ``stand_id``), naming the others in ``details.other_stand_ids``.
fleet
    With ``fleet`` given: a vehicle absent from it, or whose licences were not resolved to
    stand ids (``stands`` empty but ``stand_names`` given, as in Porto Alegre's open data), has
    an unknown licence and is not accused. ``accessible`` True is a Táxi Acessível: its
    boardings are excused (art. 46); ``accessible`` unknown lowers the confidence.
accessible wait
    A Táxi Acessível's visit to a stand it is not licensed for, waiting longer than
    ``accessible_max_wait_s`` — the whole dwell, or until the meter started when it boarded —
    is a weaker finding of the same kind (``details.subtype = "accessible_wait"``), unless a
    visit of the vehicle to a licensed (or unknown) stand overlaps it. The default, 600 s,
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
from stands.visits import (
    DEFAULT_BOARDING_GRACE_M,
    DEFAULT_BOARDING_GRACE_S,
    visit_records,
    visits_from_records,
)
from tracking.arrays import NS, iso_utc
from tracking.detectors._errors import DetectorInputError
from tracking.detectors._evidence import (
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

    ``licence_known`` is False when the fleet names stands that were not resolved to ids
    (``stands`` empty, ``stand_names`` not).

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
    names = fleet["stand_names"].to_numpy(dtype=object) if "stand_names" in fleet else [()] * n
    out: dict[str, dict[str, Any]] = {}
    for vid, a, s, nm in zip(fleet["vehicle_id"].astype("str"), acc, stands, names, strict=True):
        a_val = None if a is None or (not isinstance(a, bool | np.bool_) and pd.isna(a)) else a
        st = _cell_tuple(s)
        out[vid] = {
            "accessible": None if a_val is None else bool(a_val),
            "stands": st,
            "licence_known": bool(st) or not _cell_tuple(nm),
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
) -> tuple[dict[str, Any], Any]:
    """One boarding finding and its point as ``(lon, lat)`` (the batch and live kernels)."""
    lag_s = max(0.0, (boarded_ns - departed_ns) / NS)
    conf = (
        0.95
        - 0.25 * (n_fixes == 1)
        - 0.2 * min(1.0, lag_s / 120.0)
        - 0.1 * (accessible is None)
        - 0.15 * boarding_flagged
    )
    details = {
        "subtype": "boarding",
        "fixes": fixes,
        "arrived_at": iso_utc(arrived_ns),
        "departed_at": iso_utc(departed_ns),
        "boarded_at": iso_utc(boarded_ns),
        "dwell_s": float((departed_ns - arrived_ns) / NS),
        "boarding_lag_s": float(lag_s),
        "boarding_distance_m": metres_or_none(boarding_distance_m),
        "n_fixes_inside": int(n_fixes),
        "queue_position": int(queue_position),
        "licensed": False,
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
        },
    }
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
    queue_position: int,
    fixes: list[dict[str, Any]],
    licensed_stands: list[str],
    last_lon: float,
    last_lat: float,
    accessible_max_wait_s: float,
) -> tuple[dict[str, Any], Any]:
    """One accessible-wait finding and its point as ``(lon, lat)`` (the batch and live kernels)."""
    end = departed_ns if boarded_ns is None else min(departed_ns, boarded_ns)
    wait_s = (end - arrived_ns) / NS
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
        "queue_position": int(queue_position),
        "licensed": False,
        "licensed_stands": licensed_stands,
        "accessible": True,
        "thresholds": {"accessible_max_wait_s": float(accessible_max_wait_s)},
    }
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


def detect_unlicensed_stand_use(
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    licence_history: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    accessible_max_wait_s: float = DEFAULT_ACCESSIBLE_MAX_WAIT_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
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
    timezone : str, default "America/Sao_Paulo"
        Zone of the licences' local dates.
    accessible_max_wait_s : float, default 600
        Longest stay of a Táxi Acessível at a stand it is not licensed for (art. 46 sole §).
    max_gap_s : float, default 300
        Longest silence between the fix before the boarding and the boarding fix for the meter
        switch to count as seen (the pipeline's trip gap).
    boarding_grace_s, boarding_grace_m : float, default 120 and 30
        The thresholds the visits' boardings were decided with
        (:func:`stands.visits.detect_visits`), shown in the evidence.

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
    _check_visits(visits)
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

    arrived = utc_ns(visits["arrived_at"], column="arrived_at", what="as visitas")
    departed = utc_ns(visits["departed_at"], column="departed_at", what="as visitas")
    boarded_ns = utc_ns(
        visits["boarded_at"], column="boarded_at", what="as visitas", allow_null=True
    )
    dwell_s = (departed - arrived) / NS
    distance_m = pd.to_numeric(visits["boarding_distance_m"]).to_numpy(dtype=np.float64)
    n_fixes = visits["n_fixes"].to_numpy(dtype=np.int64)
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
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []

    # --- boardings -----------------------------------------------------------------------
    cand = np.flatnonzero(boarded)
    if len(cand):
        frame = pd.DataFrame(
            {
                "v": cand,
                "key": bping[cand],
                "ok": accusable[cand] & ~is_acc[cand],
                "inside": (boarded_ns[cand] <= departed[cand]),
                "dwell": dwell_s[cand],
                "stand": stand[cand],
            }
        )
        all_ok = frame.groupby("key")["ok"].transform("all").to_numpy(dtype=bool)
        frame = frame.loc[all_ok]
        frame = frame.sort_values(
            ["key", "inside", "dwell", "stand"], ascending=[True, False, False, True]
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
                row, geom = _boarding_finding(
                    vehicle_id=vehicle[i],
                    stand_id=stand[i],
                    arrived_ns=int(arrived[i]),
                    departed_ns=int(departed[i]),
                    boarded_ns=int(boarded_ns[i]),
                    n_fixes=int(n_fixes[i]),
                    queue_position=int(queue[i]),
                    fixes=_fixes([int(first[i]), int(last[i]), p, b], ns, lat, lon, rows),
                    accessible=accessible[i],
                    licensed_stands=list(facts[vehicle[i]]["stands"]) if facts else None,
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
                )
                out.append(row)
                geoms.append(geom)

    # --- accessible waits ----------------------------------------------------------------
    wait_end = np.where(boarded, np.minimum(departed, boarded_ns), departed)
    wait_s = (wait_end - arrived) / NS
    waits = np.flatnonzero(accusable & is_acc & (wait_s > accessible_max_wait_s))
    if len(waits):
        # A visit of the same vehicle to a stand it may use (licensed or unknown) overlapping
        # the wait excuses it (overlapping stands).
        lawful = np.flatnonzero(~accusable)
        left = pd.DataFrame({"w": waits, "veh": vehicle[waits]})
        right = pd.DataFrame({"o": lawful, "veh": vehicle[lawful]})
        pairs = left.merge(right, on="veh")
        w, o = pairs["w"].to_numpy(dtype=np.int64), pairs["o"].to_numpy(dtype=np.int64)
        overlap = (arrived[o] <= departed[w]) & (departed[o] >= arrived[w])
        excused = set(w[overlap].tolist())
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
                queue_position=int(queue[i]),
                fixes=_fixes([int(first[i]), p, int(bping[i])], ns, lat, lon, rows),
                licensed_stands=list(facts[vehicle[i]]["stands"]),
                last_lon=float(lon[p]),
                last_lat=float(lat[p]),
                accessible_max_wait_s=accessible_max_wait_s,
            )
            out.append(row)
            geoms.append(geom)
    if not out:
        return empty_findings()
    if licence_history is not None:
        _add_ended_licences(out, licence_history, timezone)
    return make_findings(pd.DataFrame(out), geoms)


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
    timezone: str = DEFAULT_TIMEZONE,
    accessible_max_wait_s: float = DEFAULT_ACCESSIBLE_MAX_WAIT_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
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
    fleet, licence_history, timezone, accessible_max_wait_s, max_gap_s, boarding_grace_s, \
boarding_grace_m
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
            reach = max(reach, _end_ns(record))
        (held if bound is not None and bound <= reach else closed).extend(cluster)
        if held:
            out[vid] = {"visits": held}
    frame, fixes = visits_from_records(closed)
    found = detect_unlicensed_stand_use(
        frame,
        fixes,
        fleet=fleet,
        licence_history=licence_history,
        timezone=timezone,
        accessible_max_wait_s=accessible_max_wait_s,
        max_gap_s=max_gap_s,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
    )
    return out, found
