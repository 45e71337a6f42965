"""Prefixos that stopped operating too long (Porto Alegre art. 60 X; Pinto Bandeira art. 32 VIII).

Porto Alegre's decree makes it *absolutamente incompatível* to "deixar de operar por lapso
superior a 60 (sessenta) dias ou, tendo sido deferida a reserva da autorização, por prazo
superior ao concedido" (art. 60 X; the reserva is art. 15). Pinto Bandeira punishes not
presenting the vehicle after a reserva expired (art. 32 VIII). A vehicle that did not operate at
all is *inactive* here; one that operates but away from its stand is ``habitual_absence``.

Definitions (each is shown in the evidence):

last operation
    From trips (a frame with ``started_at``/``ended_at``): the end of the vehicle's last trip.
    From pings: the last ``occupied`` fix for a vehicle with meter data, or the last fix at all
    for a vehicle without (it says the device was on, a weaker sign, but never an accusation).
data window
    Local days (``timezone``) from the first fix/trip of the data (or ``data_since``) to
    ``as_of`` or the last fix/trip of the data, whichever is earlier: days after the data ends
    are not observed, so they never count. Data after ``as_of`` is ignored.
idle days
    ``window_last_day - last_operation_day``; for a vehicle never seen operating, the whole
    window (``window_last_day - window_first_day + 1``), a lower bound: a vehicle is reported
    as never seen only when the window alone is longer than ``max_idle_days`` — a short data
    window accuses no one.
excused days
    Idle days inside a status period that forbids operating — ``reserved`` (the reserva of
    art. 15) and also ``suspended``, ``out_of_operation``, ``revoked`` (not operating then is
    complying) — from ``status_since`` to ``status_until`` (inclusive; an open bound reaches
    the whole window) are not counted.
finding
    ``idle_days - excused_days > max_idle_days``: one per vehicle; ``started_at`` the last
    operation (or the window's first local midnight), ``ended_at`` the end of the window's last
    day (the next local midnight); geometry the last operation's fix (None if never seen).
confidence
    ``0.6 + 0.35 min(1, (counted_idle_days - max_idle_days) / max_idle_days)``, times 0.7 for
    a vehicle never seen (it may simply be missing from the feed) and 0.9 when the last
    operation is a plain fix; clipped to [0.05, 0.95].
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from geo.calendar import DEFAULT_TIMEZONE
from tracking.arrays import iso_utc
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._evidence import (
    NO_DAY_HIGH,
    NO_DAY_LOW,
    clip_confidence,
    day_iso,
    fix_record,
    local_day,
    local_days,
    ping_field,
    ping_ns,
    ping_rows,
    require_columns,
    utc_ns,
    zone,
)
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.operating_while_barred import BARRING_STATUSES, _fleet_registry

KIND = "inactivity"
DEFAULT_MAX_IDLE_DAYS = 60


def _local_midnight_ns(day: int, timezone: str) -> int:
    stamp = pd.Timestamp(day_iso(day)).tz_localize(zone(timezone))
    return int(stamp.tz_convert("UTC").as_unit("ns").value)


def _last_operations(
    activity: pd.DataFrame, *, end_ns: int
) -> tuple[dict[str, dict[str, Any]], int, int] | None:
    """Per vehicle its last operation (ns, lat, lon, row, source); and the data's time span."""
    if {"started_at", "ended_at"} <= set(activity.columns):
        require_columns(activity, ("vehicle_id",), what="as viagens")
        start = utc_ns(activity["started_at"], column="started_at", what="as viagens")
        stop = utc_ns(activity["ended_at"], column="ended_at", what="as viagens")
        keep = start < end_ns
        if not keep.any():
            return None
        stop = np.minimum(stop, end_ns - 1)
        frame = pd.DataFrame(
            {
                "vid": activity["vehicle_id"].astype("str").to_numpy(dtype=object)[keep],
                "ns": stop[keep],
                "lat": _col(activity, "dropoff_lat")[keep],
                "lon": _col(activity, "dropoff_lon")[keep],
                "row": np.full(int(keep.sum()), -1, dtype=np.int64),
                "op": np.ones(int(keep.sum()), dtype=bool),
                "known": np.ones(int(keep.sum()), dtype=bool),
            }
        )
        span = (int(start[keep].min()), int(stop[keep].max()))
        source = "trip"
    elif "timestamp" in activity.columns:
        require_columns(activity, ("vehicle_id", "lat", "lon"), what="os pings")
        ns = utc_ns(activity["timestamp"], column="timestamp", what="os pings")
        keep = ns < end_ns
        if not keep.any():
            return None
        meter = (
            activity["meter"].to_numpy(dtype=object)[keep]
            if "meter" in activity.columns
            else np.full(int(keep.sum()), None, dtype=object)
        )
        m = pd.Series(meter)
        frame = pd.DataFrame(
            {
                "vid": activity["vehicle_id"].astype("str").to_numpy(dtype=object)[keep],
                "ns": ns[keep],
                "lat": activity["lat"].to_numpy(dtype=np.float64)[keep],
                "lon": activity["lon"].to_numpy(dtype=np.float64)[keep],
                "row": ping_rows(activity)[keep],
                "op": m.eq("occupied").fillna(False).to_numpy(dtype=bool),
                "known": m.notna().to_numpy(dtype=bool),
            }
        )
        span = (int(ns[keep].min()), int(ns[keep].max()))
        source = "occupied_fix"
    else:
        msg = "atividade sem 'timestamp' (pings) nem 'started_at'/'ended_at' (viagens)"
        raise DetectorInputError(msg)
    has_meter = frame.groupby("vid", sort=False)["known"].transform("any").to_numpy(dtype=bool)
    # Operation: occupied fixes (or trips) for meter vehicles, any fix for the others.
    frame = frame.loc[frame["op"].to_numpy(dtype=bool) | ~has_meter]
    frame = frame.assign(
        src=np.where(frame["op"].to_numpy(dtype=bool), source, "fix"),
    )
    last = frame.sort_values(["vid", "ns"]).drop_duplicates("vid", keep="last")
    out = {
        str(r.vid): {
            "ns": int(r.ns),
            "lat": r.lat,
            "lon": r.lon,
            "row": int(r.row),
            "source": r.src,
        }
        for r in last.itertuples(index=False)
    }
    return out, span[0], span[1]


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return frame[name].to_numpy(dtype=np.float64)
    return np.full(len(frame), np.nan)


def detect_inactivity(
    activity: pd.DataFrame,
    fleet: pd.DataFrame,
    *,
    as_of: dt.date,
    max_idle_days: int = DEFAULT_MAX_IDLE_DAYS,
    data_since: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> gpd.GeoDataFrame:
    """Find fleet vehicles without operation for more than ``max_idle_days`` up to ``as_of``.

    Serves Porto Alegre art. 60 X (with the reserva of art. 15) and Pinto Bandeira art. 32 VIII;
    see the module docstring for the definitions and the confidence.

    Parameters
    ----------
    activity : pandas.DataFrame
        Trips (``vehicle_id``, ``started_at``, ``ended_at``, ``dropoff_lat``/``dropoff_lon``)
        or pings (``vehicle_id``, ``timestamp``, ``lat``, ``lon``, ``meter``, ``row``).
    fleet : pandas.DataFrame
        Fleet frame: ``vehicle_id``, ``status``, ``status_since``, ``status_until``. Only its
        vehicles are judged.
    as_of : datetime.date
        Last local day analysed (inclusive).
    max_idle_days : int, default 60
        Longest lawful idle period (art. 60 X: "lapso superior a 60 dias").
    data_since : datetime.date, optional
        First local day the data covers (default: the day of its first fix or trip). Give it
        when the feed started earlier than the first record in hand.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``inactivity``, one per inactive vehicle.

    Raises
    ------
    DetectorInputError
        If the activity frame is neither trips nor pings, or times are naive.
    DetectorThresholdError
        If ``max_idle_days`` is not a positive integer, ``as_of`` not a date or the zone unknown.
    FleetFrameError
        If a fleet status or date is invalid.
    """
    if (
        not isinstance(max_idle_days, int | np.integer)
        or isinstance(max_idle_days, bool)
        or max_idle_days < 1
    ):
        msg = f"'max_idle_days' foi {max_idle_days!r}; esperado um inteiro >= 1 (dias)"
        raise DetectorThresholdError(msg)
    if not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime):
        msg = f"'as_of' foi {as_of!r}; esperado uma data (datetime.date)"
        raise DetectorThresholdError(msg)
    zone(timezone)
    registry = _fleet_registry(fleet)
    as_of_day = (as_of - dt.date(1970, 1, 1)).days
    end_ns = _local_midnight_ns(as_of_day + 1, timezone)
    found = _last_operations(activity, end_ns=end_ns)
    if found is None or not registry:
        return empty_findings()
    last_op, span_first, span_last = found
    return _inactivity_findings(
        last_op,
        span_first,
        span_last,
        registry,
        as_of_day=as_of_day,
        max_idle_days=max_idle_days,
        data_since=data_since,
        timezone=timezone,
    )


def _inactivity_findings(
    last_op: Mapping[str, Mapping[str, Any]],
    span_first: int,
    span_last: int,
    registry: Mapping[str, Mapping[str, Any]],
    *,
    as_of_day: int,
    max_idle_days: int,
    data_since: dt.date | None,
    timezone: str,
) -> gpd.GeoDataFrame:
    """Build the findings from each vehicle's last operation (kernel of batch and live).

    ``last_op`` maps vehicle ids to ``{ns, lat, lon, row, source}``; ``span_first`` and
    ``span_last`` are the first and last instant of the data before the end of ``as_of_day``.
    """
    first_day = int(local_days(np.array([span_first]), timezone)[0])
    if data_since is not None:
        first_day = (data_since - dt.date(1970, 1, 1)).days
    last_day = min(as_of_day, int(local_days(np.array([span_last]), timezone)[0]))
    if last_day < first_day:
        return empty_findings()

    vids = list(registry)
    op_day = np.full(len(vids), first_day - 1, dtype=np.int64)
    seen = np.zeros(len(vids), dtype=bool)
    op_ns = np.array([last_op[v]["ns"] if v in last_op else 0 for v in vids], dtype=np.int64)
    seen[:] = [v in last_op for v in vids]
    if seen.any():
        op_day[seen] = np.maximum(local_days(op_ns[seen], timezone), first_day - 1)
    idle = last_day - op_day
    # Excused days: the barring status period intersected with (op_day, last_day].
    code = np.array([registry[v]["code"] for v in vids], dtype=np.int64)
    since = np.array([registry[v]["status_since"] for v in vids], dtype=np.int64)
    until = np.array([registry[v]["status_until"] for v in vids], dtype=np.int64)
    lo = np.maximum(since, op_day + 1)
    hi = np.minimum(until, last_day)
    excused = np.where(code >= 0, np.maximum(hi - lo + 1, 0), 0)
    counted = idle - excused
    hits = np.flatnonzero(counted > max_idle_days)
    if not len(hits):
        return empty_findings()
    window_start_ns = _local_midnight_ns(first_day, timezone)
    window_end_ns = _local_midnight_ns(last_day + 1, timezone)
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for k in hits.tolist():
        vid = vids[k]
        reg = registry[vid]
        op = last_op.get(vid)
        excess = (counted[k] - max_idle_days) / max_idle_days
        conf = 0.6 + 0.35 * min(1.0, excess)
        conf *= 0.7 if op is None else (0.9 if op["source"] == "fix" else 1.0)
        status = None
        if code[k] >= 0:
            status = {
                "status": BARRING_STATUSES[code[k]],
                "status_since": None if since[k] == NO_DAY_LOW else day_iso(since[k]),
                "status_until": None if until[k] == NO_DAY_HIGH else day_iso(until[k]),
            }
        details = {
            "fixes": []
            if op is None or not np.isfinite(op["lat"])
            else [fix_record(op["ns"], op["lat"], op["lon"], op["row"])],
            "last_operation_at": None if op is None else iso_utc(op["ns"]),
            "last_operation_source": None if op is None else op["source"],
            "last_operation_local_date": None if op is None else day_iso(op_day[k]),
            "idle_days": int(idle[k]),
            "excused_days": int(excused[k]),
            "counted_idle_days": int(counted[k]),
            "excusing_status": status if excused[k] > 0 else None,
            "current_status": reg["status"],
            "window": {"first_day": day_iso(first_day), "last_day": day_iso(last_day)},
            "as_of": day_iso(as_of_day),
            "timezone": timezone,
            "thresholds": {"max_idle_days": int(max_idle_days)},
        }
        started = window_start_ns if op is None else op["ns"]
        out.append(
            {
                "kind": KIND,
                "vehicle_id": vid,
                "stand_id": None,
                "started_at": pd.Timestamp(started, unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(window_end_ns, unit="ns", tz="UTC"),
                "confidence": clip_confidence(conf),
                "details": details,
            }
        )
        geoms.append(
            None
            if op is None or not np.isfinite(op["lat"])
            else shapely.Point(op["lon"], op["lat"])
        )
    return make_findings(pd.DataFrame(out), geoms)


# ------------------------------------------------------------------------------------- live


def new_inactivity_state() -> dict[str, Any]:
    """Return the initial live state (plain data), one for the whole fleet.

    ``first_ns``/``last_ns``: the data's time span; ``day``: the local day of the latest fix;
    ``vehicles``: per vehicle ``known`` (a meter value was seen), ``op`` (its last ``occupied``
    fix) and ``fix`` (its last fix), each ``{ns, lat, lon, row}``; ``emitted``: per vehicle the
    ``started_at`` (ns) of the finding already emitted, so that each is emitted once.
    """
    return {"first_ns": None, "last_ns": None, "day": None, "vehicles": {}, "emitted": {}}


def _check_options(max_idle_days: int, timezone: str) -> None:
    if (
        not isinstance(max_idle_days, int | np.integer)
        or isinstance(max_idle_days, bool)
        or max_idle_days < 1
    ):
        msg = f"'max_idle_days' foi {max_idle_days!r}; esperado um inteiro >= 1 (dias)"
        raise DetectorThresholdError(msg)
    zone(timezone)


def tick_inactivity(
    state: dict[str, Any] | None,
    *,
    as_of: dt.date,
    fleet: pd.DataFrame,
    max_idle_days: int = DEFAULT_MAX_IDLE_DAYS,
    data_since: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], gpd.GeoDataFrame | None]:
    """Judge the fleet at the end of local day ``as_of``; emit the findings not emitted before.

    Call it once every fix up to the end of ``as_of`` is in the state (a clock at local
    midnight, with the feed's lateness allowed for); :func:`update_inactivity` calls it itself
    when a fix of a new local day arrives. A finding is the one :func:`detect_inactivity` gives
    over the fixes seen so far with the same ``as_of``; a vehicle's finding is emitted once (a
    later tick with the same last operation gives the same ``finding_id`` and is not
    re-emitted; a new idle period after the vehicle operated again is a new finding).

    Parameters
    ----------
    state : dict or None
        The fleet's live state.
    as_of : datetime.date
        Last local day judged (inclusive).
    fleet : pandas.DataFrame
        Fleet frame (``vehicle_id``, ``status``, ``status_since``, ``status_until``).
    max_idle_days, data_since, timezone
        As in :func:`detect_inactivity`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame or None)
        The new state and the new findings, or None.

    Raises
    ------
    DetectorThresholdError
        If a threshold is out of range or ``as_of`` is not a date.
    FleetFrameError
        If a fleet status or date is invalid.
    """
    _check_options(max_idle_days, timezone)
    if not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime):
        msg = f"'as_of' foi {as_of!r}; esperado uma data (datetime.date)"
        raise DetectorThresholdError(msg)
    st = new_inactivity_state() if state is None else dict(state)
    registry = _fleet_registry(fleet)
    if st["first_ns"] is None or not registry:
        return st, None
    as_of_day = (as_of - dt.date(1970, 1, 1)).days
    if int(local_days(np.array([st["first_ns"]]), timezone)[0]) > as_of_day:
        return st, None
    last_op: dict[str, dict[str, Any]] = {}
    for vid, v in st["vehicles"].items():
        rec = v["op"] if v["known"] else v["fix"]
        if rec is not None:
            source = "occupied_fix" if v["known"] else "fix"
            last_op[vid] = {**rec, "source": source}
    found = _inactivity_findings(
        last_op,
        int(st["first_ns"]),
        int(st["last_ns"]),
        registry,
        as_of_day=as_of_day,
        max_idle_days=max_idle_days,
        data_since=data_since,
        timezone=timezone,
    )
    started = found["started_at"].astype("int64").tolist() if len(found) else []
    new = [
        k
        for k, (vid, ns) in enumerate(zip(found["vehicle_id"].tolist(), started, strict=True))
        if st["emitted"].get(vid) != ns
    ]
    if not new:
        return st, None
    emitted = dict(st["emitted"])
    for k in new:
        emitted[str(found["vehicle_id"].iloc[k])] = int(started[k])
    st["emitted"] = emitted
    return st, found.iloc[new].reset_index(drop=True)


def update_inactivity(
    state: dict[str, Any] | None,
    ping: Mapping[str, Any],
    *,
    fleet: pd.DataFrame,
    max_idle_days: int = DEFAULT_MAX_IDLE_DAYS,
    data_since: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], gpd.GeoDataFrame | None]:
    """Take one fix into the fleet's state; at a new local day, judge the day that ended.

    The first fix of a local day later than the state's runs :func:`tick_inactivity` with
    ``as_of`` the day before it, before the fix is taken in, so a finding equals
    :func:`detect_inactivity` over the pings seen so far with that ``as_of``. Fixes must come
    in time order across the whole fleet (a late fix of an earlier day is taken in, but the
    day it belongs to has already been judged).

    Parameters
    ----------
    state : dict or None
        From :func:`new_inactivity_state` or the previous call (None at first).
    ping : mapping
        ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``, ``meter``, optional ``row``.
    fleet, max_idle_days, data_since, timezone
        As in :func:`tick_inactivity`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame or None)
        The new state and the findings of the day judged, or None.

    Raises
    ------
    DetectorInputError
        If the fix's timestamp is naive.
    """
    _check_options(max_idle_days, timezone)
    st = new_inactivity_state() if state is None else dict(state)
    t = ping_ns(ping)
    today = local_day(t, timezone)
    found = None
    if st["day"] is not None and today > st["day"]:
        as_of = dt.date(1970, 1, 1) + dt.timedelta(days=today - 1)
        st, found = tick_inactivity(
            st,
            as_of=as_of,
            fleet=fleet,
            max_idle_days=max_idle_days,
            data_since=data_since,
            timezone=timezone,
        )
    st["day"] = today if st["day"] is None else max(st["day"], today)
    st["first_ns"] = t if st["first_ns"] is None else min(st["first_ns"], t)
    st["last_ns"] = t if st["last_ns"] is None else max(st["last_ns"], t)
    vid = str(ping_field(ping, "vehicle_id"))
    row = ping_field(ping, "row")
    lat, lon = ping_field(ping, "lat"), ping_field(ping, "lon")
    rec = {
        "ns": t,
        "lat": float("nan") if lat is None else float(lat),
        "lon": float("nan") if lon is None else float(lon),
        "row": -1 if row is None else int(row),
    }
    meter = ping_field(ping, "meter")
    prev = st["vehicles"].get(vid, {"known": False, "op": None, "fix": None})
    later = prev["fix"] is None or t >= prev["fix"]["ns"]
    op_later = prev["op"] is None or t >= prev["op"]["ns"]
    st["vehicles"] = {
        **st["vehicles"],
        vid: {
            "known": prev["known"] or meter is not None,
            "op": rec if meter == "occupied" and op_later else prev["op"],
            "fix": rec if later else prev["fix"],
        },
    }
    return st, found
