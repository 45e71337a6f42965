"""Prefixos that stopped operating too long (Porto Alegre art. 60 X; Pinto Bandeira art. 32 VIII).

Porto Alegre's decree makes it *absolutamente incompatível* to "deixar de operar por lapso
superior a 60 (sessenta) dias ou, tendo sido deferida a reserva da autorização, por prazo
superior ao concedido" (art. 60 X; the reserva is art. 15). Pinto Bandeira punishes not
presenting the vehicle after a reserva expired (art. 32 VIII). A vehicle that did not operate at
all is *inactive* here; one that operates but away from its stand is ``habitual_absence``.

Definitions (each is shown in the evidence):

last operation
    The later of the vehicle's last ``occupied`` fix (from trips, a frame with
    ``started_at``/``ended_at``: the end of its last trip) and its last fix in service
    (``sightings``: meter ``free`` or unknown, :func:`tracking.frames.in_service`, the rule
    of the presence at a stand). Waiting or driving Livre for a passenger is operating, with or
    without a fare: an independent check had a taxi back from 59 days of holiday, three days
    Livre at its stand without a fare yet, and one whose meter stuck on Livre while it worked
    its stand daily, both proposed for cassação. Fixes without a meter say the vehicle was on
    the streets, not whether it carried anyone: no evidence of inactivity either, so a vehicle
    is idle only from its last such fix (a weaker sign than a fare, lower confidence) — also
    one whose tracker stopped sending the meter while it kept driving. Only ``off`` (out of
    service, private use) is not operating.
data window
    Local days (``timezone``) from the first fix/trip of the data (or ``data_since``) to
    ``as_of`` or the last fix/trip of the data, whichever is earlier: days after the data ends
    are not observed, so they never count. Data after ``as_of`` is ignored.
counted from
    Per vehicle, the latest of the window's first day, ``alvara_first_issued_on`` (the prefixo
    did not exist before: the 60 days cannot lapse before it) and the ``status_since`` of an
    ``active`` status (its return to operation: before it, another status held).
idle days
    ``window_last_day - last_operation_day``; for a vehicle never seen operating, every day
    from its counted-from day (``window_last_day - counted_from + 1``), a lower bound: a
    vehicle is reported as never seen only when that alone is longer than ``max_idle_days`` —
    a short data window accuses no one. A last operation before the counted-from day counts
    as on the day before it.
feed gaps
    A local day of the window (from the data's first day) on which the vehicles that operated
    (a trip starting or ending that day, from trips; an ``occupied`` fix, from pings) are fewer
    than ``min_feed_share`` (default a quarter) of those of the window's busiest day: the feed
    was down or partial (a tracking server's outage, a sample of the fleet), and its silence
    cannot show who did not operate. Such days are not counted as idle. Without it, a
    fleet-wide outage of two months would propose cassação for every vehicle silent through it.
    A feed without meter data has no operations to count: its days are all counted.
excused days
    Idle days on which operating was forbidden (not operating then is complying): a status
    period — ``reserved`` (the reserva of art. 15) and also ``suspended``,
    ``out_of_operation``, ``revoked`` — from ``status_since`` to ``status_until`` (inclusive;
    an open bound reaches the whole window); the days after ``alvara_valid_until`` or
    ``inspection_valid_until`` (art. 58 XII, III); a ``termo_recolhido_since``–``until``
    period. Days excused by several, or excused and a feed gap, are counted once.
finding
    ``idle_days - excused_days - feed_gap_days > max_idle_days``: one per vehicle;
    ``started_at`` the last operation (or the counted-from day's local midnight), ``ended_at``
    the end of the window's last day (the next local midnight); geometry the last operation's
    fix (None if never seen).
fixes under another id
    A fleet vehicle whose prefixo the data writes otherwise (an id of the activity or of
    ``off_fleet`` that the fleet lacks, of the same :func:`fleet.ids.id_form` — ``000123`` for
    ``123``) is not judged: its operations may be those.
confidence
    ``0.6 + 0.35 min(1, (counted_idle_days - max_idle_days) / max_idle_days)``, times 0.7 for
    a vehicle never seen (it may simply be missing from the feed) and 0.9 when the last
    operation is a plain fix; clipped to [0.05, 0.95].
    ``never_seen`` in the details says the vehicle has no operation in the data at all:
    rulebooks list such a finding for review (an absent feed proves no idleness).
silent
    The idle days counted as above up to the vehicle's last fix of any meter
    (``seen_idle_days``, ``last_fix_at``): the days on which it was seen not operating.
    ``silent`` when they are not more than ``max_idle_days``: the lapse is made of days after
    its tracker went quiet (a vehicle in the workshop, or a dead tracker on a vehicle still
    working), which prove no idleness either; rulebooks list such a finding for review.

Live: :data:`KERNEL` (:func:`advance_inactivity`) keeps one fleet-wide state: the data's first
fix and, per vehicle, its last fix, last in service and last ``occupied`` fix (at most four
a vehicle, whatever the stream's length) and the ``started_at`` of its last finding. Each local
day closed by a later fix is judged by :func:`detect_inactivity` over the pings standing for
the state, which gives what it gives over every fix so far.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from fleet.ids import id_form
from geo.calendar import DEFAULT_TIMEZONE
from tracking.arrays import iso_utc
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._evidence import (
    NO_DAY_HIGH,
    NO_DAY_LOW,
    clip_confidence,
    day_iso,
    fix_record,
    local_days,
    ping_rows,
    require_columns,
    utc_ns,
    zone,
)
from tracking.detectors.day_kernel import DayKernel
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.operating_while_barred import BARRING_STATUSES, _fleet_registry
from tracking.frames import OUT_OF_SERVICE, in_service

KIND = "inactivity"
DEFAULT_MAX_IDLE_DAYS = 60
DEFAULT_MIN_FEED_SHARE = 0.25
"""A day whose vehicles with activity are fewer than this share of the busiest day's is a feed
gap (module docstring)."""

_UTC = "datetime64[ns, UTC]"
Feed = tuple[tuple[int, int], ...]
"""``(local day, vehicles that operated that day)`` pairs, days as days since 1970-01-01, in
day order (the feed gaps of the module docstring)."""

ActivitySpan = tuple[int, int, Feed]
"""The data's first and last instant (UTC ns) and its :data:`Feed` (:func:`activity_span`)."""


def merge_activity_spans(spans: Collection[ActivitySpan | None]) -> ActivitySpan | None:
    """Return the span of several groups of vehicles (disjoint) from theirs.

    The earliest first, the latest last, the vehicles of each day summed.
    """
    found = [s for s in spans if s is not None]
    if not found:
        return None
    total: dict[int, int] = {}
    for _, _, feed in found:
        for day, n in feed:
            total[int(day)] = total.get(int(day), 0) + int(n)
    return min(s[0] for s in found), max(s[1] for s in found), tuple(sorted(total.items()))


def _feed(vids: np.ndarray, ns: np.ndarray, timezone: str) -> Feed:
    """Per local day, how many vehicles have an instant in it (``vids`` and ``ns`` aligned)."""
    if not len(ns):
        return ()
    pairs = pd.DataFrame({"v": vids, "d": local_days(ns, timezone)}).drop_duplicates()
    counts = pairs["d"].value_counts().sort_index()
    return tuple(zip(counts.index.astype(int).tolist(), counts.astype(int).tolist(), strict=True))


def _local_midnight_ns(day: int, timezone: str) -> int:
    stamp = pd.Timestamp(day_iso(day)).tz_localize(zone(timezone))
    return int(stamp.tz_convert("UTC").as_unit("ns").value)


def _last_operations(
    activity: pd.DataFrame, *, end_ns: int, timezone: str
) -> tuple[dict[str, dict[str, Any]], ActivitySpan] | None:
    """Per vehicle its last operation (ns, lat, lon, row, source); and the data's span."""
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
            }
        )
        vids = activity["vehicle_id"].astype("str").to_numpy(dtype=object)[keep]
        span = (
            int(start[keep].min()),
            int(stop[keep].max()),
            _feed(np.r_[vids, vids], np.r_[start[keep], stop[keep]], timezone),
        )
        source = "trip"
    elif "timestamp" in activity.columns:
        require_columns(activity, ("vehicle_id", "lat", "lon"), what="os pings")
        ns = utc_ns(activity["timestamp"], column="timestamp", what="os pings")
        keep = ns < end_ns
        if not keep.any():
            return None
        occupied = (
            activity["meter"].eq("occupied").fillna(False).to_numpy(dtype=bool) & keep
            if "meter" in activity.columns
            else np.zeros(len(activity), dtype=bool)
        )
        frame = pd.DataFrame(
            {
                "vid": activity["vehicle_id"].astype("str").to_numpy(dtype=object)[occupied],
                "ns": ns[occupied],
                "lat": activity["lat"].to_numpy(dtype=np.float64)[occupied],
                "lon": activity["lon"].to_numpy(dtype=np.float64)[occupied],
                "row": ping_rows(activity)[occupied],
            }
        )
        span = (
            int(ns[keep].min()),
            int(ns[keep].max()),
            _feed(frame["vid"].to_numpy(dtype=object), frame["ns"].to_numpy(), timezone),
        )
        source = "occupied_fix"
    else:
        msg = "atividade sem 'timestamp' (pings) nem 'started_at'/'ended_at' (viagens)"
        raise DetectorInputError(msg)
    last = frame.sort_values(["vid", "ns"]).drop_duplicates("vid", keep="last")
    columns = (last[c].tolist() for c in ("vid", "ns", "lat", "lon", "row"))
    out = {
        str(vid): {"ns": int(ns), "lat": lat, "lon": lon, "row": int(row), "source": source}
        for vid, ns, lat, lon, row in zip(*columns, strict=True)
    }
    return out, span


def last_fixes(
    pings: pd.DataFrame, *, as_of: dt.date | None = None, timezone: str = DEFAULT_TIMEZONE
) -> pd.DataFrame:
    """Return each vehicle's last fix in service and last fix (to the end of ``as_of``).

    What :func:`detect_inactivity` takes as ``sightings`` beside trips, one row per vehicle:
    ``vehicle_id``; ``timestamp``, ``lat``, ``lon`` and ``row`` (the source data row, or -1)
    of its last fix whose meter is not ``off`` (NaT and NaN when none: such a fix says the
    vehicle was in service, Livre or perhaps with a passenger); ``last_fix_at``, its last fix
    of any meter (until when it was seen). The last fixes of several groups of vehicles are
    the rows of each group's.
    """
    end_ns = None
    if as_of is not None:
        zone(timezone)
        end_ns = _local_midnight_ns((as_of - dt.date(1970, 1, 1)).days + 1, timezone)
    return _last_fixes(pings, end_ns)


def _last_fixes(pings: pd.DataFrame, end_ns: int | None) -> pd.DataFrame:
    """Return :func:`last_fixes` of the fixes before ``end_ns`` (all when None)."""
    names = ("vehicle_id", "timestamp", "lat", "lon", "row", "last_fix_at")
    if not len(pings) or "timestamp" not in pings.columns:
        dtypes = ("object", _UTC, "float64", "float64", "int64", _UTC)
        return pd.DataFrame({n: pd.Series(dtype=t) for n, t in zip(names, dtypes, strict=True)})
    require_columns(pings, ("vehicle_id", "lat", "lon"), what="os pings")
    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    keep = np.ones(len(pings), dtype=bool) if end_ns is None else ns < end_ns
    serving = (
        in_service(pings["meter"]) if "meter" in pings.columns else np.ones(len(pings), dtype=bool)
    )
    frame = pd.DataFrame(
        {
            "vehicle_id": pings["vehicle_id"].astype("str").to_numpy(dtype=object)[keep],
            "ns": ns[keep],
            "lat": pings["lat"].to_numpy(dtype=np.float64)[keep],
            "lon": pings["lon"].to_numpy(dtype=np.float64)[keep],
            "row": ping_rows(pings)[keep],
            "serving": serving[keep],
        }
    ).sort_values(["vehicle_id", "ns"], kind="stable")
    seen = frame.drop_duplicates("vehicle_id", keep="last").set_index("vehicle_id")["ns"]
    last = frame.loc[frame["serving"]].drop_duplicates("vehicle_id", keep="last")
    last = last.set_index("vehicle_id").reindex(seen.index)
    stamp = last["ns"].to_numpy(dtype=np.float64)
    return pd.DataFrame(
        {
            "vehicle_id": seen.index.to_numpy(dtype=object),
            "timestamp": pd.to_datetime(stamp, unit="ns", utc=True),
            "lat": last["lat"].to_numpy(dtype=np.float64),
            "lon": last["lon"].to_numpy(dtype=np.float64),
            "row": last["row"].fillna(-1).to_numpy(dtype=np.int64),
            "last_fix_at": pd.to_datetime(seen.to_numpy(dtype=np.int64), unit="ns", utc=True),
        }
    )


def _add_sightings(
    last_op: dict[str, dict[str, Any]], sightings: pd.DataFrame, *, end_ns: int
) -> dict[str, int]:
    """Take each vehicle's last fix in service as its last operation when later.

    Return until when each vehicle was seen (its ``last_fix_at``, else that fix).
    """
    if not len(sightings):
        return {}
    require_columns(sightings, ("vehicle_id", "timestamp", "lat", "lon"), what="os avistamentos")
    ns = utc_ns(sightings["timestamp"], column="timestamp", what="os avistamentos", allow_null=True)
    seen_ns = ns
    if "last_fix_at" in sightings.columns:
        seen_ns = utc_ns(sightings["last_fix_at"], column="last_fix_at", what="os avistamentos")
    rows = (
        pd.to_numeric(sightings["row"]).fillna(-1).to_numpy(dtype=np.int64)
        if "row" in sightings.columns
        else np.full(len(sightings), -1, dtype=np.int64)
    )
    vids = sightings["vehicle_id"].astype("str").tolist()
    lats = sightings["lat"].to_numpy(dtype=np.float64)
    lons = sightings["lon"].to_numpy(dtype=np.float64)
    seen: dict[str, int] = {}
    for k, vid in enumerate(vids):
        if seen_ns[k] < end_ns:
            seen[vid] = max(int(seen_ns[k]), seen.get(vid, int(seen_ns[k])))
        if ns[k] == NO_DAY_LOW or ns[k] >= end_ns:
            continue
        if vid in last_op and last_op[vid]["ns"] >= ns[k]:
            continue
        last_op[vid] = {
            "ns": int(ns[k]),
            "lat": float(lats[k]),
            "lon": float(lons[k]),
            "row": int(rows[k]),
            "source": "fix",
        }
    return seen


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
    min_feed_share: float = DEFAULT_MIN_FEED_SHARE,
    data_since: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    data_span: ActivitySpan | None = None,
    off_fleet: Collection[str] = (),
    sightings: pd.DataFrame | None = None,
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
        Fleet frame: ``vehicle_id``, ``status``, ``status_since``, ``status_until``, and when
        present ``alvara_first_issued_on``, ``alvara_valid_until``, ``inspection_valid_until``,
        ``termo_recolhido_since``, ``termo_recolhido_until`` (module docstring). Only its
        vehicles are judged.
    as_of : datetime.date
        Last local day analysed (inclusive).
    max_idle_days : int, default 60
        Longest lawful idle period (art. 60 X: "lapso superior a 60 dias").
    min_feed_share : float, default 0.25
        A day whose vehicles with activity are fewer than this share of the busiest day's is a
        feed gap, not counted as idle (module docstring); 0 counts every day.
    data_since : datetime.date, optional
        First local day the data covers (default: the day of its first fix or trip). Give it
        when the feed started earlier than the first record in hand.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.
    data_span : tuple, optional
        First and last instant (UTC epoch nanoseconds) of the whole data before the end of
        ``as_of`` and its feed, as :func:`activity_span` gives it, when ``activity`` and
        ``fleet`` are one group of the fleet's vehicles (an engine judging vehicles by groups):
        the window and the feed gaps are then the fleet's, not the group's. Default: those of
        ``activity``.
    off_fleet : collection of str, optional
        The vehicle ids of the whole data that the fleet lacks (``engines.pipeline.id_checks``),
        when ``activity`` is a group of it or trips (vehicles without trips): a fleet vehicle
        written as one of them (or of ``activity``'s) otherwise is not judged.
    sightings : pandas.DataFrame, optional
        With trips as ``activity``: each vehicle's last fix in service, which counts as
        its last operation when later than its last trip, and its last fix (:func:`last_fixes`
        of the run's pings). Without it a vehicle is judged by its trips alone, and seen until
        its last trip. With pings, taken from them.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``inactivity``, one per inactive vehicle.

    Raises
    ------
    DetectorInputError
        If the activity frame is neither trips nor pings, or times are naive.
    DetectorThresholdError
        If ``max_idle_days`` is not a positive integer, ``min_feed_share`` not in [0, 1],
        ``as_of`` not a date or the zone unknown.
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
    if (
        not isinstance(min_feed_share, int | float | np.integer | np.floating)
        or isinstance(min_feed_share, bool)
        or not 0 <= min_feed_share <= 1
    ):
        msg = f"'min_feed_share' foi {min_feed_share!r}; esperado um número entre 0 e 1"
        raise DetectorThresholdError(msg)
    if not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime):
        msg = f"'as_of' foi {as_of!r}; esperado uma data (datetime.date)"
        raise DetectorThresholdError(msg)
    zone(timezone)
    registry = _fleet_registry(fleet)
    seen: set[str] = set()
    if "vehicle_id" in activity.columns:
        seen = set(activity["vehicle_id"].dropna().astype("str").unique())
    off = set(off_fleet) | (seen - set(registry))
    if off:
        elsewhere = {id_form(v) for v in off}
        registry = {v: r for v, r in registry.items() if id_form(v) not in elsewhere}
    as_of_day = (as_of - dt.date(1970, 1, 1)).days
    end_ns = _local_midnight_ns(as_of_day + 1, timezone)
    found = _last_operations(activity, end_ns=end_ns, timezone=timezone)
    if data_span is not None:  # a group of the fleet: the fleet's window
        last_op = found[0] if found is not None else {}
        span = data_span
    elif found is None:
        return empty_findings()
    else:
        last_op, span = found
    if sightings is None and "timestamp" in activity.columns:
        sightings = _last_fixes(activity, end_ns)
    last_seen = {} if sightings is None else _add_sightings(last_op, sightings, end_ns=end_ns)
    if not registry:
        return empty_findings()
    return _inactivity_findings(
        last_op,
        last_seen,
        span,
        registry,
        as_of_day=as_of_day,
        max_idle_days=max_idle_days,
        min_feed_share=float(min_feed_share),
        data_since=data_since,
        timezone=timezone,
    )


def activity_span(activity: pd.DataFrame, *, as_of: dt.date, timezone: str) -> ActivitySpan | None:
    """Return the span of ``activity`` up to ``as_of`` (:data:`ActivitySpan`), or None.

    What :func:`detect_inactivity` takes as the data's span (``data_span``); that of several
    groups of vehicles is :func:`merge_activity_spans` of theirs.
    """
    zone(timezone)
    as_of_day = (as_of - dt.date(1970, 1, 1)).days
    end_ns = _local_midnight_ns(as_of_day + 1, timezone)
    found = _last_operations(activity, end_ns=end_ns, timezone=timezone)
    return None if found is None else found[1]


def _inactivity_findings(
    last_op: Mapping[str, Mapping[str, Any]],
    last_seen: Mapping[str, int],
    span: ActivitySpan,
    registry: Mapping[str, Mapping[str, Any]],
    *,
    as_of_day: int,
    max_idle_days: int,
    min_feed_share: float,
    data_since: dt.date | None,
    timezone: str,
) -> gpd.GeoDataFrame:
    """Build the findings from each vehicle's last operation (kernel of batch and live).

    ``last_op`` maps vehicle ids to ``{ns, lat, lon, row, source}``, ``last_seen`` to their
    last fix (UTC ns; a vehicle absent: seen until its last operation); ``span`` is the data's
    before the end of ``as_of_day`` (:data:`ActivitySpan`).
    """
    span_first, span_last, feed = span
    data_first_day = int(local_days(np.array([span_first]), timezone)[0])
    first_day = data_first_day
    if data_since is not None:
        first_day = (data_since - dt.date(1970, 1, 1)).days
    last_day = min(as_of_day, int(local_days(np.array([span_last]), timezone)[0]))
    if last_day < first_day:
        return empty_findings()

    vids = list(registry)
    reg = {name: np.array([registry[v][name] for v in vids], dtype=np.int64) for name in _DAYS}
    code = np.array([registry[v]["code"] for v in vids], dtype=np.int64)
    active = np.array([registry[v]["status"] == "active" for v in vids], dtype=bool)
    issued = reg["alvara_first_issued_on"]
    back = np.where(active & (reg["status_since"] != NO_DAY_LOW), reg["status_since"], NO_DAY_LOW)
    counted_from = np.maximum(first_day, np.maximum(issued, back))
    op_day = counted_from - 1
    seen = np.zeros(len(vids), dtype=bool)
    op_ns = np.array([last_op[v]["ns"] if v in last_op else 0 for v in vids], dtype=np.int64)
    seen[:] = [v in last_op for v in vids]
    if seen.any():
        op_day[seen] = np.maximum(local_days(op_ns[seen], timezone), op_day[seen])
    idle = last_day - op_day
    # Excused days: the days that bar operating, intersected with (op_day, last_day].
    periods = _excusing_periods(reg, code)
    excused = _covered_days(list(periods.values()), lo=op_day + 1, hi=last_day)
    gaps = _feed_gaps(feed, lo=data_first_day, hi=last_day, share=min_feed_share)
    gap_days = _gap_days(gaps, list(periods.values()), lo=op_day + 1)
    counted = idle - excused - gap_days
    hits = np.flatnonzero(counted > max_idle_days)
    if not len(hits):
        return empty_findings()
    # The same count up to the vehicle's last fix: the days it was seen not operating.
    seen_ns = np.array([last_seen.get(v, NO_DAY_LOW) for v in vids], dtype=np.int64)
    seen_day = np.full(len(vids), NO_DAY_LOW, dtype=np.int64)
    known = seen_ns != NO_DAY_LOW
    if known.any():
        seen_day[known] = local_days(seen_ns[known], timezone)
    seen_day = np.minimum(np.maximum(seen_day, op_day), last_day)
    seen_idle = (
        seen_day
        - op_day
        - _covered_days(list(periods.values()), lo=op_day + 1, hi=seen_day)
        - _gap_days(gaps, list(periods.values()), lo=op_day + 1, hi=seen_day)
    )
    window_end_ns = _local_midnight_ns(last_day + 1, timezone)
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for k in hits.tolist():
        vid = vids[k]
        op = last_op.get(vid)
        excess = (counted[k] - max_idle_days) / max_idle_days
        conf = 0.6 + 0.35 * min(1.0, excess)
        conf *= 0.7 if op is None else (0.9 if op["source"] == "fix" else 1.0)
        lo, hi = int(op_day[k]) + 1, last_day
        status = None
        if code[k] >= 0 and _overlaps(periods["status"], k, lo, hi):
            since, until = int(reg["status_since"][k]), int(reg["status_until"][k])
            status = {
                "status": BARRING_STATUSES[code[k]],
                "status_since": None if since == NO_DAY_LOW else day_iso(since),
                "status_until": None if until == NO_DAY_HIGH else day_iso(until),
            }
        documents: list[dict[str, str | None]] = [
            {"reason": reason, column: day_iso(int(reg[column][k]))}
            for reason, column in _DOCUMENTS
            if _overlaps(periods[reason], k, lo, hi)
        ]
        if _overlaps(periods["termo_recolhido"], k, lo, hi):
            until = int(reg["termo_recolhido_until"][k])
            documents.append(
                {
                    "reason": "termo_recolhido",
                    "termo_recolhido_since": day_iso(int(reg["termo_recolhido_since"][k])),
                    "termo_recolhido_until": None if until == NO_DAY_HIGH else day_iso(until),
                }
            )
        start = int(counted_from[k])
        because = "window"
        if start > first_day:
            because = "alvara_first_issued_on" if start == issued[k] else "active_since"
        details = {
            "fixes": []
            if op is None or not np.isfinite(op["lat"])
            else [fix_record(op["ns"], op["lat"], op["lon"], op["row"])],
            "never_seen": op is None,
            "last_fix_at": iso_utc(int(seen_ns[k])) if known[k] else None,
            "seen_idle_days": int(seen_idle[k]),
            "silent": bool(seen_idle[k] <= max_idle_days),
            "last_operation_at": None if op is None else iso_utc(op["ns"]),
            "last_operation_source": None if op is None else op["source"],
            "last_operation_local_date": None if op is None else day_iso(op_day[k]),
            "idle_days": int(idle[k]),
            "excused_days": int(excused[k]),
            "feed_gap_days": int(gap_days[k]),
            "counted_idle_days": int(counted[k]),
            "excusing_status": status if excused[k] > 0 else None,
            "excusing_documents": documents if excused[k] > 0 else [],
            "current_status": registry[vid]["status"],
            "window": {"first_day": day_iso(first_day), "last_day": day_iso(last_day)},
            "counted_from": {"day": day_iso(start), "because": because},
            "as_of": day_iso(as_of_day),
            "timezone": timezone,
            "thresholds": {
                "max_idle_days": int(max_idle_days),
                "min_feed_share": float(min_feed_share),
            },
        }
        started = _local_midnight_ns(start, timezone) if op is None else op["ns"]
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


_DAYS = (
    "status_since",
    "status_until",
    "alvara_first_issued_on",
    "alvara_valid_until",
    "inspection_valid_until",
    "termo_recolhido_since",
    "termo_recolhido_until",
)
"""Registry dates the rule reads (``operating_while_barred``'s registry record)."""
_DOCUMENTS = (
    ("alvara_expired", "alvara_valid_until"),
    ("inspection_expired", "inspection_valid_until"),
)


def _excusing_periods(
    reg: Mapping[str, np.ndarray], code: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per vehicle, the days (first, last; inclusive) each barring reason covers.

    An empty period is (``NO_DAY_HIGH``, ``NO_DAY_LOW``).
    """
    none = (np.full(len(code), NO_DAY_HIGH), np.full(len(code), NO_DAY_LOW))
    out = {
        "status": (
            np.where(code >= 0, reg["status_since"], none[0]),
            np.where(code >= 0, reg["status_until"], none[1]),
        ),
        "termo_recolhido": (reg["termo_recolhido_since"], reg["termo_recolhido_until"]),
    }
    for reason, column in _DOCUMENTS:
        valid = reg[column]  # empty: NO_DAY_HIGH, never expired
        out[reason] = (
            np.where(valid != NO_DAY_HIGH, valid + 1, none[0]),
            np.where(valid != NO_DAY_HIGH, NO_DAY_HIGH, none[1]),
        )
    return out


def _feed_gaps(feed: Collection[tuple[int, int]], *, lo: int, hi: int, share: float) -> np.ndarray:
    """Return the days of ``lo``–``hi`` (inclusive) with too few vehicles with activity.

    Fewer than ``share`` of the busiest day's (none when no day has any).
    """
    days = np.arange(lo, hi + 1, dtype=np.int64)
    if not len(days):
        return days
    counts = dict(feed)
    n = np.array([counts.get(int(d), 0) for d in days], dtype=np.float64)
    gaps: np.ndarray = days[n < share * n.max()]
    return gaps


def _gap_days(
    gaps: np.ndarray,
    periods: list[tuple[np.ndarray, np.ndarray]],
    *,
    lo: np.ndarray,
    hi: np.ndarray | None = None,
) -> np.ndarray:
    """Per vehicle, how many ``gaps`` days from ``lo`` (to ``hi``) no excusing period covers."""
    if not len(gaps):
        return np.zeros(len(lo), dtype=np.int64)
    d = gaps[None, :]
    open_ = d >= lo[:, None]
    if hi is not None:
        open_ &= d <= hi[:, None]
    for first, last in periods:
        open_ &= ~((d >= first[:, None]) & (d <= last[:, None]))
    counts: np.ndarray = open_.sum(axis=1).astype(np.int64)
    return counts


def _covered_days(
    periods: list[tuple[np.ndarray, np.ndarray]], *, lo: np.ndarray, hi: int | np.ndarray
) -> np.ndarray:
    """Per vehicle, how many days of ``lo``–``hi`` (inclusive) the union of periods covers."""
    first = np.stack([np.maximum(a, lo) for a, _ in periods], axis=1)
    last = np.stack([np.minimum(b, hi) for _, b in periods], axis=1)
    empty = last < first
    first[empty], last[empty] = NO_DAY_HIGH, NO_DAY_HIGH - 1
    order = np.argsort(first, axis=1, kind="stable")
    first = np.take_along_axis(first, order, axis=1)
    last = np.take_along_axis(last, order, axis=1)
    total = np.zeros(len(lo), dtype=np.int64)
    reach = lo - 1  # last day counted so far
    for j in range(first.shape[1]):
        start = np.maximum(first[:, j], reach + 1)
        total += np.maximum(last[:, j] - start + 1, 0)
        reach = np.maximum(reach, last[:, j])
    return total


def _overlaps(period: tuple[np.ndarray, np.ndarray], k: int, lo: int, hi: int) -> bool:
    return max(int(period[0][k]), lo) <= min(int(period[1][k]), hi)


# ------------------------------------------------------------------------------------- live


def _state_pings(state: Mapping[str, Any]) -> pd.DataFrame:
    """Return the pings standing for the state (all that :func:`_last_operations` reads).

    The data's first fix; per vehicle its last fix, last fix in service and last ``occupied``
    fix (``unmetered``: a state stored before free fixes counted, its last of unknown meter).
    """
    recs: list[tuple[str, list[Any]]] = []
    if state.get("first") is not None:
        recs.append((str(state["first"][0]), state["first"][1]))
    for vid, v in sorted(state.get("vehicles", {}).items()):
        kept = []
        for key in ("occupied", "in_service", "unmetered", "last"):
            if v.get(key) is not None and v[key] not in kept:
                kept.append(v[key])
        recs += [(vid, r) for r in sorted(kept, key=lambda r: r[0])]
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([v for v, _ in recs], dtype="str"),
            "timestamp": pd.to_datetime(
                np.asarray([r[0] for _, r in recs], dtype=np.int64), unit="ns", utc=True
            ),
            "lat": np.asarray([np.nan if r[1] is None else r[1] for _, r in recs], dtype=float),
            "lon": np.asarray([np.nan if r[2] is None else r[2] for _, r in recs], dtype=float),
            "row": np.asarray([r[3] for _, r in recs], dtype=np.int64),
            "meter": pd.Series([r[4] for _, r in recs], dtype="object"),
        }
    )


def _fresh_fixes(state: Mapping[str, Any], pings: pd.DataFrame) -> pd.DataFrame:
    """Return the new fixes in time order, per vehicle only those later than all seen before."""
    require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
    ns = utc_ns(pings["timestamp"], column="timestamp", what="os pings")
    frame = pd.DataFrame(
        {
            "vid": pings["vehicle_id"].astype("str").to_numpy(dtype=object),
            "ns": ns,
            "lat": pings["lat"].to_numpy(dtype=np.float64),
            "lon": pings["lon"].to_numpy(dtype=np.float64),
            "row": ping_rows(pings),
            "meter": (
                pings["meter"].astype(object).where(pings["meter"].notna(), None).to_numpy()
                if "meter" in pings.columns
                else np.full(len(pings), None, dtype=object)
            ),
        }
    ).sort_values(["vid", "ns"], kind="stable")
    vehicles = state.get("vehicles", {})
    before = np.asarray(
        [vehicles[v]["last"][0] if v in vehicles else -(2**63) for v in frame["vid"]],
        dtype=np.int64,
    )
    prev = frame.groupby("vid", sort=False)["ns"].shift(1).fillna(-(2**63)).astype(np.int64)
    keep = (frame["ns"].to_numpy() > before) & (frame["ns"].to_numpy() > prev.to_numpy())
    return frame.loc[keep].sort_values(["ns", "vid"], kind="stable").reset_index(drop=True)


def _fold(state: dict[str, Any], fixes: pd.DataFrame, *, day: int) -> None:
    """Take fixes of local ``day`` (later than each vehicle's fixes so far) into the state."""
    vehicles = dict(state["vehicles"])
    feed = dict(state.get("feed") or {})
    columns = [fixes[c].tolist() for c in ("vid", "ns", "lat", "lon", "row", "meter")]
    for vid, ns, lat, lon, row, meter in zip(*columns, strict=True):
        rec = [
            int(ns),
            None if math.isnan(lat) else float(lat),
            None if math.isnan(lon) else float(lon),
            int(row),
            meter,
        ]
        if state["first"] is None or rec[0] < state["first"][1][0]:
            state["first"] = [str(vid), rec]
        v = dict(vehicles.get(str(vid), {"last": None, "in_service": None, "occupied": None}))
        if meter == "occupied" and v.get("day") != day:
            feed[str(day)] = feed.get(str(day), 0) + 1
            v["day"] = day
        v["last"] = rec
        if meter != OUT_OF_SERVICE:
            v["in_service"] = rec
        if meter == "occupied":
            v["occupied"] = rec
        vehicles[str(vid)] = v
    state["vehicles"] = vehicles
    state["feed"] = feed


def advance_inactivity(
    state: Mapping[str, Any] | None,
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame,
    final: bool = False,
    max_idle_days: int = DEFAULT_MAX_IDLE_DAYS,
    min_feed_share: float = DEFAULT_MIN_FEED_SHARE,
    data_since: dt.date | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], gpd.GeoDataFrame]:
    """Take new fixes into the fleet's state; judge each local day they close.

    The kernel of :func:`detect_inactivity` (``tracking.detectors.day_kernel``). Fixes are
    taken in time order; the first fix of a local day later than the state's closes the days
    before it: :func:`detect_inactivity` judges the fleet over the state with ``as_of`` the day
    before that fix (as it would over every fix so far). ``final`` judges the day of the
    latest fix too. A vehicle's finding is returned once (a later day with the same last
    operation gives the same ``finding_id``); a new idle period after it operated again is a
    new finding. A fix not later than its vehicle's latest is skipped.

    Parameters
    ----------
    state : mapping or None
        From the previous call (None at first); not modified.
    pings : pandas.DataFrame
        New fixes: ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``, optional
        ``meter`` and ``row``.
    fleet : pandas.DataFrame
        Fleet frame, as in :func:`detect_inactivity`.
    final : bool, default False
        End of the input: judge the latest fix's day as well.
    max_idle_days, min_feed_share, data_since, timezone
        As in :func:`detect_inactivity`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame)
        The new state (plain data: ``day``, the latest fix's local day; ``first``, the data's
        first fix; per vehicle its last fix, last in service and last ``occupied`` fix, each
        ``[ns, lat, lon, row, meter]`` and ``day``, the local day of its last ``occupied`` fix;
        ``feed``, per local day the vehicles with an ``occupied`` fix that day; ``emitted``, per
        vehicle the ``started_at`` ns of its last finding) and the findings of the closed days.
    """
    st: dict[str, Any] = {"day": None, "first": None, "vehicles": {}, "feed": {}, "emitted": {}}
    st.update(dict(state or {}))
    fresh = _fresh_fixes(st, pings) if len(pings) else pd.DataFrame()
    days = local_days(
        fresh["ns"].to_numpy(dtype=np.int64) if len(fresh) else np.zeros(0, np.int64), timezone
    )
    frames: list[gpd.GeoDataFrame] = []

    def judge(as_of_day: int) -> None:
        as_of = dt.date(1970, 1, 1) + dt.timedelta(days=as_of_day)
        pings = _state_pings(st)
        span = activity_span(pings, as_of=as_of, timezone=timezone)
        feed = tuple((int(d), int(n)) for d, n in st["feed"].items() if int(d) <= as_of_day)
        found = detect_inactivity(
            pings,
            fleet,
            as_of=as_of,
            max_idle_days=max_idle_days,
            min_feed_share=min_feed_share,
            data_since=data_since,
            timezone=timezone,
            data_span=None if span is None else (span[0], span[1], tuple(sorted(feed))),
        )
        started = found["started_at"].astype("int64").tolist() if len(found) else []
        vids = found["vehicle_id"].astype("str").tolist() if len(found) else []
        new = [
            k
            for k, (v, ns) in enumerate(zip(vids, started, strict=True))
            if st["emitted"].get(v) != ns
        ]
        if new:
            st["emitted"] = {**st["emitted"], **{vids[k]: int(started[k]) for k in new}}
            frames.append(found.iloc[new])

    if len(fresh):
        starts = np.flatnonzero(np.r_[True, days[1:] != days[:-1]])
        ends = np.r_[starts[1:], len(fresh)]
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            today = int(days[lo])
            if st["day"] is not None and today > st["day"]:
                judge(today - 1)
            _fold(st, fresh.iloc[lo:hi], day=today)
            st["day"] = today if st["day"] is None else max(int(st["day"]), today)
    if final and st["day"] is not None:
        judge(int(st["day"]))
    if not frames:
        return st, empty_findings()
    out = pd.concat(frames, ignore_index=True)
    return st, gpd.GeoDataFrame(out, geometry="geometry", crs=4326)


KERNEL = DayKernel(KIND, detect_inactivity, advance_inactivity)
"""The rule as a day kernel (``tracking.detectors.day_kernel``)."""
