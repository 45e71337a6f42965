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
    passenger boarded. A meter started too long after leaving the stand is not a boarding at it
    (``boarding_grace_s`` of :func:`stands.visits.detect_visits`).
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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from tracking.detectors._errors import DetectorInputError
from tracking.detectors._evidence import (
    NS,
    check_threshold,
    clip_confidence,
    fix_record,
    iso_utc,
    ping_rows,
    require_columns,
    sorted_positions,
    sorted_view,
    utc_ns,
)
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


def detect_unlicensed_stand_use(
    visits: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    accessible_max_wait_s: float = DEFAULT_ACCESSIBLE_MAX_WAIT_S,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
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
    accessible_max_wait_s : float, default 600
        Longest stay of a Táxi Acessível at a stand it is not licensed for (art. 46 sole §).
    max_gap_s : float, default 300
        Longest silence between the fix before the boarding and the boarding fix for the meter
        switch to count as seen (the pipeline's trip gap).

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
    check_threshold("accessible_max_wait_s", accessible_max_wait_s, unit="segundos")
    check_threshold("max_gap_s", max_gap_s, positive=True, unit="segundos")
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
    n_fixes = visits["n_fixes"].to_numpy(dtype=np.int64)
    queue = visits["queue_position"].to_numpy(dtype=np.int64)

    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    lat = pings["lat"].to_numpy(dtype=np.float64)
    lon = pings["lon"].to_numpy(dtype=np.float64)
    rows = ping_rows(pings)
    meter = (
        pings["meter"].to_numpy(dtype=object)
        if "meter" in pings.columns
        else np.full(n, None, dtype=object)
    )
    flagged = (
        pings["speed_flag"].fillna(False).to_numpy(dtype=bool)
        if "speed_flag" in pings.columns
        else np.zeros(n, dtype=bool)
    )
    thresholds = {
        "max_gap_s": float(max_gap_s),
        "accessible_max_wait_s": float(accessible_max_wait_s),
    }
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
        others = frame.groupby("key")["stand"].agg(list)
        chosen = frame.drop_duplicates("key")
        if len(chosen):
            idx = chosen["v"].to_numpy(dtype=np.int64)
            bp = bping[idx]
            prev = _previous_fix(pings, bp)
            pp = np.maximum(prev, 0)
            switch_seen = (
                (prev >= 0)
                & (ns[bp] - ns[pp] <= round(max_gap_s * NS))
                & pd.Series(meter[pp]).isin(["free", "off"]).to_numpy(dtype=bool)
            )
            for k, i in enumerate(idx.tolist()):
                if not switch_seen[k]:
                    continue
                b = int(bp[k])
                lag_s = max(0.0, (int(boarded_ns[i]) - int(departed[i])) / NS)
                acc_unknown = accessible[i] is None
                conf = (
                    0.95
                    - 0.25 * (n_fixes[i] == 1)
                    - 0.2 * min(1.0, lag_s / 120.0)
                    - 0.1 * acc_unknown
                    - 0.15 * bool(flagged[b])
                )
                fixes = _fixes([int(first[i]), int(last[i]), int(prev[k]), b], ns, lat, lon, rows)
                details = {
                    "subtype": "boarding",
                    "fixes": fixes,
                    "arrived_at": iso_utc(arrived[i]),
                    "departed_at": iso_utc(departed[i]),
                    "boarded_at": iso_utc(boarded_ns[i]),
                    "dwell_s": float(dwell_s[i]),
                    "boarding_lag_s": float(lag_s),
                    "n_fixes_inside": int(n_fixes[i]),
                    "queue_position": int(queue[i]),
                    "licensed": False,
                    "licensed_stands": list(facts[vehicle[i]]["stands"]) if facts else None,
                    "accessible": accessible[i],
                    # canonical literal: keeping the column's own str would pin its memory
                    "meter_before": _METER_LITERAL.get(meter[int(prev[k])], "unknown"),
                    "meter_switch_gap_s": float((ns[b] - ns[int(prev[k])]) / NS),
                    "other_stand_ids": [s for s in others[b] if s != stand[i]],
                    "thresholds": {"max_gap_s": thresholds["max_gap_s"]},
                }
                out.append(
                    {
                        "kind": KIND,
                        "vehicle_id": vehicle[i],
                        "stand_id": stand[i],
                        "started_at": pd.Timestamp(int(arrived[i]), unit="ns", tz="UTC"),
                        "ended_at": pd.Timestamp(
                            max(int(departed[i]), int(boarded_ns[i])), unit="ns", tz="UTC"
                        ),
                        "confidence": clip_confidence(conf),
                        "details": details,
                    }
                )
                geoms.append(shapely.Point(lon[b], lat[b]))

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
            excess = (wait_s[i] - accessible_max_wait_s) / max(2.0 * accessible_max_wait_s, 1.0)
            conf = 0.4 + 0.3 * min(1.0, excess)
            end = int(wait_end[i])
            fixes = _fixes([int(first[i]), int(last[i]), int(bping[i])], ns, lat, lon, rows)
            details = {
                "subtype": "accessible_wait",
                "fixes": fixes,
                "arrived_at": iso_utc(arrived[i]),
                "departed_at": iso_utc(departed[i]),
                "boarded_at": iso_utc(boarded_ns[i]) if boarded[i] else None,
                "dwell_s": float(dwell_s[i]),
                "wait_s": float(wait_s[i]),
                "n_fixes_inside": int(n_fixes[i]),
                "queue_position": int(queue[i]),
                "licensed": False,
                "licensed_stands": list(facts[vehicle[i]]["stands"]),
                "accessible": True,
                "thresholds": {"accessible_max_wait_s": thresholds["accessible_max_wait_s"]},
            }
            out.append(
                {
                    "kind": KIND,
                    "vehicle_id": vehicle[i],
                    "stand_id": stand[i],
                    "started_at": pd.Timestamp(int(arrived[i]), unit="ns", tz="UTC"),
                    "ended_at": pd.Timestamp(end, unit="ns", tz="UTC"),
                    "confidence": clip_confidence(conf),
                    "details": details,
                }
            )
            p = int(last[i])
            geoms.append(shapely.Point(lon[p], lat[p]))
    if not out:
        return empty_findings()
    return make_findings(pd.DataFrame(out), geoms)
