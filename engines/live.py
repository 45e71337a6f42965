"""Live detection on ingested fixes: detector states, findings, throttled alerts, NOTIFY.

:func:`process_fixes` runs after the accepted fixes of an ingest are committed. For each vehicle,
in time order, it feeds every fix to the live functions of ``tracking/detectors``
(none of them a per-fix implementation): each kind's batch function runs as a kernel over
the inputs its state kept and the new ones (``tracking.detectors.kernel``,
``tracking.detectors.day_kernel``), so a fix stream gives the batch's findings with the batch's
ids. ``outside_municipality`` judges a registered vehicle's pickups against its
municipality's boundary (``vehicles.municipality_code`` → ``municipalities.boundary``, read
once per process; one run per municipality); ``operating_while_barred`` judges registered
vehicles with the fleet frame of their registry records, each as of the local day of the
oldest fix its state keeps, else of its first new fix (the day of the next finding it can
complete); vehicles without either are not judged live.

State and several server processes
    Each (vehicle, detector) state is plain JSON in ``live_detector_states``, read and written
    in the caller's transaction while holding a transaction-level advisory lock per vehicle
    (``pg_advisory_xact_lock``), taken in a fixed order (sorted lock keys) so that two
    processes never deadlock. A process handling a vehicle's next batch waits for the commit of
    the previous one and then reads its state. Rebuilding states from each vehicle's last stored
    fixes was rejected: ``gps_anomaly``, ``flag2_misuse``, ``operating_while_barred`` and
    ``longer_route`` carry open runs, segments and days whose length has no bound a query could
    know, and a replay per batch costs more than one row read. ``longer_route`` is fleet-wide
    (peer trips of other vehicles): each vehicle keeps its kernel state (its open meter run, and
    trips held while another vehicle's open run may still end before them) in its own row, and
    its judged trips per pair of H3 cells in ``longer_route_peers:<cells>`` rows (``[trip_id,
    ended_ns, driven_m, ratio, straight_m, started_ns]`` each, the ``max_peer_trips`` latest),
    which the other vehicles read (never lock) as the ``peer_trips`` of their trips between the
    same cells (``tracking.detectors.longer_route``, "Live", says when this equals the batch).
Visit kinds (``queue_jump``, ``unlicensed_stand_use``)
    A vehicle's queue position depends on the other vehicles at the stand, so these kinds run
    on one fleet-wide visits kernel (:func:`stands.visits.advance_visits`: ``detect_visits``
    over each vehicle's kept fixes) advanced by each call's fixes. Its state is one row
    (``vehicle_id`` ``'*'``, detector ``visits``), beside ``unlicensed_stand_use``'s fleet row
    (per vehicle, its released visits that overlap one still to come) and one
    ``queue_jump:<stand_id>`` row per stand (the stand's queue), all read and written under
    one global advisory lock (``pg_advisory_xact_lock(72944, 0)``, another lock class than the
    vehicles'), taken *after* the call's vehicle locks and never before one: a process holding
    it asks for no other lock, so no cycle can form; calls carrying the visit kinds run one at
    a time. The stands are the ``stands`` table's active ones with a geometry, covered once
    per process and covered again when the table changes (row count, latest ``updated_at`` or
    ``retired_at``); no such stand: the visit kinds are skipped (no lock, no state). Licences
    come from ``parking_licences``, the fleet (``accessible``, licensed stands) from
    ``vehicles``; the visit thresholds are ``engines.pipeline.AnalysisParams``' defaults, as
    in ``pontual analyze``. The visits released by a call go to
    :func:`tracking.detectors.queue_jump.advance_queue_jump` and
    :func:`tracking.detectors.unlicensed_stand_use.advance_unlicensed_stand_use`: the batch
    functions run on the released visits, so live finds what ``pontual analyze`` finds. The
    watermark is the call's newest fix (at most the server's clock) less
    :data:`VISITS_WATERMARK_LAG_S`: a vehicle that stops reporting at a stand (a tracker asleep
    with the ignition off) counts as gone once silent for ``trip_max_gap_s`` behind it, as the
    batch splits a visit at such a silence, instead of holding back that stand's queue, and the
    alerts behind it, until it reports again. Fixes that come in time order give the batch's
    visits; a device sending an hour of buffered fixes at once may see a visit released
    earlier than the batch would.
Inactivity
    ``inactivity`` is a day kernel (``inactivity.KERNEL``) with one fleet-wide state (row
    ``'*'``/``inactivity``, under the same global lock) advanced by each call's fixes: the
    first fix of a new local day closes the days before it, judged by ``detect_inactivity``
    over every registered vehicle (``vehicles``, status of the local day of the call's last
    fix). Nothing ticks at midnight itself: a day is judged by the first fix after it.
Habitual absence
    ``habitual_absence`` is a day kernel (``habitual_absence.KERNEL``) fed by the visits
    tracker: the fixes the tracker took in the call are sightings of their local days and the
    visits it released (a visits frame) stays at their stands. Its state is per vehicle — one
    row each (detector ``habitual_absence``: the window's sightings and visits, the next day to
    judge, the emissions), read and written under the global lock for the vehicles a call
    touches (its fixes' and its released visits'), so a call never rewrites the fleet's 30 days
    of visits. After each call those vehicles' local days before its last fix's are judged by
    ``detect_habitual_absence`` (licences from ``parking_licences``), a vehicle's day once its
    visits begun before the midnight ending it are released (``unreleased_arrivals``): a day is
    judged by the vehicle's first fix (or released visit) after it. Each (vehicle, stand) is
    emitted at most once per window. Operation is told by fixes (any fix that day), as when
    ``detect_habitual_absence`` is given pings.
Illegal stand formation
    Stops are cut from each vehicle's runs (``illegal_stand_formation.advance_runs``): a run is
    a span of its fixes with no step longer than twice the stops' diameter and no silence
    longer than the stops' ``max_gap_s`` (one row per vehicle, detector
    ``illegal_stand_formation``). No stop spans a longer step or silence, so when a run closes
    its stops are final: its fixes are read back from ``fixes`` (where the ingest stored them),
    ``detect_stops`` finds its stops with ``pontual analyze``'s thresholds (the extent's
    reference latitude is the run's mean latitude, the batch's is the vehicle's over the whole
    input: a stop within ~0.1 % of the diameter could differ), and their waiting stops go to
    the day kernel ``illegal_stand_formation.KERNEL`` (fleet row ``'*'``, global lock), which
    judges the local days before the call's latest fix's with ``detect_illegal_stand_formation``
    over the waiting stops of the last :data:`STAND_FORMATION_WINDOW_DAYS` days (the batch
    counts its whole input). A stop is seen once the vehicle has moved on; one whose day was
    already judged counts from the next day judged.
Late fixes
    A fix not later than the last fix a detector saw for the vehicle is skipped by that detector
    (it is stored; the batch ``pontual analyze`` sees it): fixes of overlapping concurrent
    requests for one vehicle, and those a device sends after later ones (a phone's offline
    buffer sent behind its live fixes). A finding they alone would make is found only by
    ``pontual analyze``. One they fall inside of, a ``tracking_gap`` (the vehicle sent no fix
    then), is withdrawn (:func:`db.enforcement.workflow.withdraw_filled_gaps`:
    ``details.withdrawn``, ``details.filled_at``) and its alert announced again.
Findings of an open day
    A kernel with findings that only grow (``open_detect``: ``operating_while_barred``,
    ``driver_not_allowed``'s per-day ones) also gives, at each call, those of the vehicles'
    open parts so far (:func:`tracking.detectors.kernel.open_findings`), with
    ``details.provisional`` true: a barred day is alerted from its first trip long enough, a
    driver not allowed from the day's first ended trip (never throttled into another day's
    alert). Each later version of the same id replaces the stored provisional one (and its
    alert's payload and ``event_at``), the day's closing version last
    (:func:`db.enforcement.workflow.settle_provisional`); a provisional finding of a closed day
    without a closing version (the registry changed that day: a vistoria done, a suspension
    revised) is marked ``withdrawn`` (:func:`db.enforcement.workflow.withdraw_provisional`).
    Settled and withdrawn, its alert is announced again (:func:`_reannounce`: ``revision``
    incremented, ``NOTIFY pontual_alerts, 'revised:<alert_id>'``, each webhook that had it
    sent it again); the provisional versions between are not announced.
    Neither a provisional nor a withdrawn finding is proposed. A vehicle that never reports
    again leaves its finding provisional until ``pontual analyze`` of the stored fixes
    (``pontual proposals generate --findings``) replaces it.
Findings and alerts
    Findings are inserted with ``ON CONFLICT (finding_id) DO NOTHING`` (ids are deterministic:
    a finding already stored, e.g. by a batch run, gives no second alert). Each new finding
    creates one ``alerts`` row (``alert_id = "alert-" + finding_id``), a ``webhook_deliveries``
    row per active webhook whose filters match, and ``NOTIFY pontual_alerts, '<alert_id>'``,
    all in the caller's transaction: subscribers hear of an alert only once it is committed.
    An alert is not an accusation: stored live findings become proposals only through
    ``db.enforcement.workflow.generate_report`` (``pontual proposals generate``, ``POST
    /api/v1/proposals/generate``), under the rulebook's confidence floor and repetition rules,
    which list the others for review. A registered vehicle's finding whose rule asks for
    repetition (a ``gps_anomaly`` under POA art. 58, IX) is alerted only once the rulebook
    would propose it (:func:`db.enforcement.workflow.awaits_repetition`).
Throttling
    A recurring condition is stored as a finding but not re-alerted: when an alert with the same
    ``throttle_key`` (``kind|vehicle_id|stand_id``) has an ``event_at`` (the end of its
    finding) within ``throttle_s`` of the new finding's end, that alert's ``repeat_count`` is
    incremented and its ``last_repeat_at`` set, and nothing is announced. The window is measured
    in event time, so replays and live streams throttle alike; at most one alert per key and
    window. ``throttle_s = 0`` alerts every finding.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from db.enforcement.workflow import (
    awaits_repetition,
    insert_findings,
    settle_provisional,
    withdraw_filled_gaps,
    withdraw_provisional,
)
from db.fleet.store import driver_registry_frames
from db.stands.queries import allowed_places_frame, licence_frame, stands_frame
from db.stands.store import suspensions_frame
from enforcement.rulebook import bundled_rulebooks
from fleet.dates import PANDAS_DATE_MAX, PANDAS_DATE_MIN
from geo.calendar import DEFAULT_TIMEZONE
from geo.cover import StandCover, build_stand_cover
from geo.roads import RoadGraph
from stands.licences import UNPLACED, unknown_licences
from stands.visits import advance_visits, new_visits_state, unreleased_arrivals
from tracking import frames as fr
from tracking.detectors import (
    driver_not_allowed,
    flag2_misuse,
    gps_anomaly,
    habitual_absence,
    illegal_stand_formation,
    inactivity,
    longer_route,
    operating_while_barred,
    outside_municipality,
    tracking_gap,
)
from tracking.detectors.day_kernel import DayKernel
from tracking.detectors.findings import PROVISIONAL, jsonable
from tracking.detectors.illegal_stand_formation import (
    DEFAULT_MIN_FREE_SHARE,
    DEFAULT_MIN_WAIT_S,
)
from tracking.detectors.kernel import TrackKernel, advance, open_findings
from tracking.detectors.queue_jump import advance_queue_jump
from tracking.detectors.unlicensed_stand_use import advance_unlicensed_stand_use
from tracking.stops import DEFAULT_MAX_GAP_S as DEFAULT_STOP_MAX_GAP_S
from tracking.stops import detect_stops
from tracking.tails import tails_frame

CHANNEL = "pontual_alerts"
"""PostgreSQL NOTIFY channel; the payload is the alert id (:data:`REVISED` before it: again)."""
REVISED = "revised:"
"""Prefix of a NOTIFY payload that announces an alert again (settled or withdrawn)."""
LIVE_KINDS = (
    "tracking_gap",
    "gps_anomaly",
    "flag2_misuse",
    "operating_while_barred",
    "longer_route",
    "outside_municipality",
    "queue_jump",
    "unlicensed_stand_use",
    "inactivity",
    "habitual_absence",
    "illegal_stand_formation",
    "driver_not_allowed",
)
"""Finding kinds detected live: every kind of the contract."""
DEFAULT_THROTTLE_S = 900.0
VISITS_WATERMARK_LAG_S = 120.0
"""The visits' watermark trails the newest fix of a call (never past the server's clock) by
this much: a vehicle silent for ``trip_max_gap_s`` behind it has left its queue."""
PEERS_PREFIX = "longer_route_peers:"
_LOCK_CLASS = 72_943  # first key of pg_advisory_xact_lock(int, int): the live detector locks
_NS = 1_000_000_000

_KERNELS: dict[str, TrackKernel] = {
    "tracking_gap": tracking_gap.KERNEL,
    "gps_anomaly": gps_anomaly.KERNEL,
    "flag2_misuse": flag2_misuse.KERNEL,
    "operating_while_barred": operating_while_barred.KERNEL,
    "outside_municipality": outside_municipality.KERNEL,
    "driver_not_allowed": driver_not_allowed.KERNEL,
}
"""Kinds run as kernels (``tracking.detectors.kernel``): a state per vehicle, stored here."""
_DAY_KERNELS: dict[str, DayKernel] = {
    "inactivity": inactivity.KERNEL,
    "habitual_absence": habitual_absence.KERNEL,
    "illegal_stand_formation": illegal_stand_formation.KERNEL,
}
"""Fleet-wide kinds run as day kernels (``tracking.detectors.day_kernel``), below."""
_UPDATES: dict[str, Callable[..., tuple[Any, Any]]] = {
    "longer_route": longer_route.detect_longer_route,  # its thresholds; run as a kernel below
    "queue_jump": advance_queue_jump,
    "unlicensed_stand_use": advance_unlicensed_stand_use,
}
VISIT_KINDS = ("queue_jump", "unlicensed_stand_use")
"""Kinds judging the visits of the fleet-wide visits tracker (one state, one global lock)."""
_TRACKER_KINDS = (*VISIT_KINDS, "habitual_absence")
"""Kinds fed by the visits tracker (``habitual_absence`` takes its visits as sightings)."""
_FLEET_KINDS = (*_TRACKER_KINDS, "inactivity", "illegal_stand_formation")
"""Kinds with fleet-wide state, run after the per-vehicle kinds."""
STAND_FORMATION_WINDOW_DAYS = 30
"""Local days of waiting stops a live ``illegal_stand_formation`` day is judged over (the batch
counts its whole input)."""
FLEET_ROW = "*"
"""``vehicle_id`` of the fleet-wide state rows (``visits``, ``unlicensed_stand_use``,
``queue_jump:<stand_id>``)."""
_FLEET_LOCK_CLASS = 72_944  # pg_advisory_xact_lock(72944, 0): the fleet-wide visit states
_WIRED = {
    "vehicle",
    "roads",
    "peer_trips",
    "timezone",
    "boundary",
    "accessible",
    "unreleased",
    "facts",
    "pending",
    "final",
    "fleet",
    "licence_history",
    "as_of",
    "licences",
    "stands",
    "allowed_places",
    "boarding_grace_s",  # the visits' thresholds (AnalysisParams), echoed in the evidence
    "boarding_grace_m",
    "drivers",
    "driver_links",
    "suspensions",
}
_BOUNDARIES: dict[str, Any] = {}
"""Municipal boundaries (shapely, EPSG:4326) read by this process, by municipality code."""
_COVER: dict[str, Any] = {}
"""This process's active stands, their cover and the stands-table signature they came from."""

Thresholds = Mapping[str, Mapping[str, Any]]


class LiveConfigError(ValueError):
    """A live threshold names an unknown kind or parameter."""


def live_params(kind: str, thresholds: Thresholds | None) -> dict[str, Any]:
    """Return the keyword arguments of ``kind``'s update function set by ``thresholds``.

    Parameters
    ----------
    kind : str
        One of :data:`LIVE_KINDS`.
    thresholds : mapping or None
        ``{kind: {parameter: value}}`` as for the batch detectors; parameters that only the
        batch detector takes (e.g. ``include_inferred_trips``) are left out.

    Raises
    ------
    LiveConfigError
        If ``kind`` is not live or a parameter is unknown to both its live and batch functions.
    """
    kernel = _KERNELS.get(kind) or _DAY_KERNELS.get(kind)
    fn = kernel.detect if kernel is not None else _UPDATES.get(kind)
    if fn is None:
        msg = f"tipo de achado {kind!r} não tem detecção ao vivo; esperado um de {LIVE_KINDS}"
        raise LiveConfigError(msg)
    from tracking.detectors.detect import threshold_names

    live = {
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _WIRED
    }
    batch = set(threshold_names(kind))
    out = {}
    for name, value in (thresholds or {}).get(kind, {}).items():
        if name in live:
            out[name] = value
        elif name not in batch:
            msg = f"limiar {name!r} não existe em {kind}; esperado um de {', '.join(sorted(live))}"
            raise LiveConfigError(msg)
    return out


def throttle_key(kind: str, vehicle_id: str | None, stand_id: str | None) -> str:
    """Return the key under which recurrences of a condition are throttled."""
    return f"{kind}|{vehicle_id or ''}|{stand_id or ''}"


def alert_matches(filters: Mapping[str, Any] | None, alert: Mapping[str, Any]) -> bool:
    """Tell whether an alert passes subscription or webhook filters.

    Parameters
    ----------
    filters : mapping or None
        Optional keys: ``kinds`` (list of kinds), ``bbox`` (``[min_lon, min_lat, max_lon,
        max_lat]``: the alert's geometry bounds must intersect it), ``stand_ids`` (list: the
        alert's ``stand_id`` must be one of them). Missing or empty keys do not filter.
    alert : mapping
        An alert payload (:func:`alert_payload`).
    """
    if not filters:
        return True
    kinds = filters.get("kinds")
    if kinds and alert.get("kind") not in kinds:
        return False
    stands = filters.get("stand_ids")
    if stands and alert.get("stand_id") not in stands:
        return False
    box = filters.get("bbox")
    if box:
        bounds = alert.get("bbox")
        if not bounds:
            return False
        min_lon, min_lat, max_lon, max_lat = box
        a0, a1, a2, a3 = bounds
        if a2 < min_lon or a0 > max_lon or a3 < min_lat or a1 > max_lat:
            return False
    return True


def alert_payload(finding: Mapping[str, Any], *, alert_id: str) -> dict[str, Any]:
    """Return the JSON announced for a finding (SSE, WebSocket, webhooks).

    Keys: ``alert_id``, ``finding_id``, ``kind``, ``vehicle_id``, ``stand_id``, ``started_at``,
    ``ended_at`` (ISO 8601 UTC), ``confidence``, ``point`` (``[lon, lat]`` of a representative
    point, or null), ``bbox`` (bounds of the geometry, or null), ``details``.
    """
    geom = finding.get("geometry")
    has_geom = geom is not None and not geom.is_empty
    point = shapely.point_on_surface(geom) if has_geom else None
    return {
        "alert_id": alert_id,
        "finding_id": finding["finding_id"],
        "kind": finding["kind"],
        "vehicle_id": finding["vehicle_id"],
        "stand_id": finding["stand_id"],
        "started_at": jsonable(pd.Timestamp(finding["started_at"])),
        "ended_at": jsonable(pd.Timestamp(finding["ended_at"])),
        "confidence": round(float(finding["confidence"]), 4),
        "point": None if point is None else [round(point.x, 6), round(point.y, 6)],
        "bbox": None if not has_geom else [round(float(b), 6) for b in shapely.bounds(geom)],
        "details": jsonable(finding["details"]),
    }


# --- detector calls ------------------------------------------------------------------------


def _records(found: Any) -> list[dict[str, Any]]:
    """Return the finding records of an update's output (a record, a frame, or None)."""
    if found is None:
        return []
    if isinstance(found, gpd.GeoDataFrame):
        return [dict(zip(found.columns, row, strict=True)) for row in found.itertuples(False)]
    return [dict(found)]


def _plain(value: Any) -> Any:
    """Make a state JSON-safe (numpy scalars to Python)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _peer_frame(rows: Iterable[Any]) -> pd.DataFrame:
    """Peer trips (``longer_route.PEER_COLUMNS``) of stored ``longer_route_peers:<cells>`` rows.

    Rows are ``(vehicle_id, detector, entries)``; entries stored before the start or the
    straight line was kept take the end as start (no pace known) and no straight line (never a
    peer).
    """

    def num(value: Any) -> float:
        return math.nan if value is None else float(value)

    records = [
        (
            str(e[0]),
            str(vehicle),
            int(e[5] if len(e) > 5 else e[1]),
            int(e[1]),
            str(detector)[len(PEERS_PREFIX) :],
            num(e[2]),
            num(e[4] if len(e) > 4 else None),
            num(e[3]),
        )
        for vehicle, detector, entries in rows
        for e in entries or []
    ]
    frame = pd.DataFrame(records, columns=list(longer_route.PEER_COLUMNS))
    return frame.astype({"started_ns": np.int64, "ended_ns": np.int64, "ratio": np.float64})


def _detect_longer_route(
    session: Session,
    pings: pd.DataFrame,
    states: Mapping[tuple[str, str], tuple[Any, int | None]],
    vehicles: Sequence[str],
    params: Mapping[str, Any],
    roads: RoadGraph | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the ``longer_route`` kernel with the fleet's stored peer trips; store what it closes."""
    mine = {v: _kernel_state(states.get((v, "longer_route"))) for v in vehicles}
    peers_sql = text(
        "SELECT vehicle_id, detector, state FROM live_detector_states "
        "WHERE detector = ANY(:ds) AND (CAST(:vs AS text[]) IS NULL OR vehicle_id = ANY(:vs))"
    )

    def stored(cells: Iterable[str], of: Sequence[str] | None = None) -> pd.DataFrame:
        keys = [PEERS_PREFIX + c for c in cells]
        return _peer_frame(session.execute(peers_sql, {"ds": keys, "vs": of}))

    after, res, closed = longer_route.advance_longer_route(
        mine, pings, roads=roads, peer_trips=stored, **params
    )
    saved = [
        {
            "v": v,
            "d": "longer_route",
            "s": st,
            "ts": pd.Timestamp(st["seen"], tz="UTC").to_pydatetime(),
        }
        for v, st in after.items()
        if st != mine.get(v)
    ]
    if len(closed):
        pairs = set(zip(closed["cells"], closed["vehicle_id"], strict=True))
        kept = longer_route.keep_peer_trips(
            stored({c for c, _ in pairs}, sorted({v for _, v in pairs})),
            closed,
            max_peer_trips=params.get("max_peer_trips", longer_route.DEFAULT_MAX_PEER_TRIPS),
        )
        for (cells, vehicle), part in kept.groupby(["cells", "vehicle_id"], sort=True):
            if (cells, vehicle) in pairs:
                entries = part[["trip_id", "ended_ns", "driven_m", "ratio", "straight_m"]]
                entries = entries.assign(started_ns=part["started_ns"])
                s = [_plain(list(row)) for row in entries.itertuples(index=False, name=None)]
                saved.append({"v": vehicle, "d": f"{PEERS_PREFIX}{cells}", "s": s, "ts": None})
    return _records(res), saved


def _kernel_state(stored: tuple[Any, int | None] | None) -> dict[str, Any] | None:
    """Return a vehicle's kernel state; a state of another shape keeps only its last instant."""
    if stored is None:
        return None
    state, last_ns = stored
    if isinstance(state, dict) and "tail" in state and "seen" in state:
        return state
    return None if last_ns is None else {"seen": last_ns, "tail": {}}


def _late_instants(
    fixes: Iterable[Mapping[str, Any]], states: Mapping[tuple[str, str], Any], kind: str
) -> dict[str, list[int]]:
    """Per vehicle, the instants (UTC ns) of the fixes not later than the last ``kind`` saw.

    Only these can fall inside a finding the kernel already emitted; fixes in time order (the
    usual request) give none, and no query.
    """
    late: dict[str, list[int]] = {}
    for f in fixes:
        vehicle, at = str(f[fr.VEHICLE_ID]), int(pd.Timestamp(f[fr.TIMESTAMP]).value)
        state = _kernel_state(states.get((vehicle, kind)))
        if state is not None and at <= int(state["seen"]):
            late.setdefault(vehicle, []).append(at)
    return late


def _lock_vehicles(session: Session, vehicle_ids: Sequence[str]) -> None:
    """Take each vehicle's advisory lock, in ascending key order (no deadlock between txns)."""
    session.execute(
        text(
            "SELECT pg_advisory_xact_lock(:c, k) FROM (SELECT DISTINCT hashtext(v) AS k "
            "FROM unnest(CAST(:vs AS text[])) AS v ORDER BY k) AS keys"
        ),
        {"c": _LOCK_CLASS, "vs": list(vehicle_ids)},
    ).all()


def _load_states(
    session: Session, vehicle_ids: Sequence[str], kinds: Iterable[str]
) -> dict[tuple[str, str], tuple[Any, int | None]]:
    rows = session.execute(
        text(
            "SELECT vehicle_id, detector, state, last_ts FROM live_detector_states "
            "WHERE vehicle_id = ANY(:vs) AND detector = ANY(:ds)"
        ),
        {"vs": list(vehicle_ids), "ds": list(kinds)},
    )
    return {
        (str(v), str(d)): (s, None if ts is None else int(pd.Timestamp(ts).value))
        for v, d, s, ts in rows
    }


def _save_states(session: Session, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    session.execute(
        text(
            "INSERT INTO live_detector_states (vehicle_id, detector, state, last_ts, updated_at) "
            "SELECT v, d, s, ts, now() FROM unnest(CAST(:v AS text[]), CAST(:d AS text[]), "
            "CAST(:s AS jsonb[]), CAST(:ts AS timestamptz[])) AS r(v, d, s, ts) "
            "ON CONFLICT (vehicle_id, detector) DO UPDATE "
            "SET state = EXCLUDED.state, last_ts = EXCLUDED.last_ts, updated_at = now()"
        ),
        {
            "v": [r["v"] for r in rows],
            "d": [r["d"] for r in rows],
            "s": [json.dumps(r["s"], separators=(",", ":")) for r in rows],
            "ts": [r["ts"] for r in rows],
        },
    )


def fleet_records(
    session: Session, vehicle_ids: Sequence[str], *, day: dt.date
) -> dict[str, dict[str, Any]]:
    """Fleet records (``operating_while_barred``'s ``vehicle``) of registered vehicles on ``day``.

    The status is the vehicle's status period covering ``day`` (none: not barred by status).
    """
    rows = session.execute(
        text(
            "SELECT v.vehicle_id, p.status, p.valid_from, p.valid_until, "
            "v.alvara_valid_until, v.inspection_valid_until, v.first_registered_on, "
            "v.last_inspection_on, v.alvara_first_issued_on, v.substitution_since, "
            "v.termo_recolhido_since, v.termo_recolhido_until, v.year "
            "FROM vehicles v "
            "LEFT JOIN LATERAL (SELECT status, valid_from, valid_until "
            "  FROM vehicle_status_periods p WHERE p.vehicle_id = v.vehicle_id "
            "  AND (p.valid_from IS NULL OR p.valid_from <= :day) "
            "  AND (p.valid_until IS NULL OR p.valid_until >= :day) "
            "  ORDER BY p.valid_from DESC NULLS LAST LIMIT 1) p ON true "
            "WHERE v.vehicle_id = ANY(:vs)"
        ),
        {"vs": list(vehicle_ids), "day": day},
    )
    return {
        str(v): dict(
            zip(
                _FLEET_RECORD_COLUMNS,
                (status, *map(_readable, dates), None if year is None else int(year)),
                strict=True,
            )
        )
        for v, status, *dates, year in rows
    }


_FLEET_RECORD_COLUMNS = (
    "status",
    "status_since",
    "status_until",
    "alvara_valid_until",
    "inspection_valid_until",
    "first_registered_on",
    "last_inspection_on",
    "alvara_first_issued_on",
    "substitution_since",
    "termo_recolhido_since",
    "termo_recolhido_until",
    "year",
)


def _readable(day: dt.date | None) -> dt.date | None:
    """Clip a stored registry date to what pandas holds (as ``fleet.dates.pandas_dates``)."""
    if day is None:
        return None
    return min(max(day, PANDAS_DATE_MIN), PANDAS_DATE_MAX)


_UNREADABLE_SQL = """
SELECT vehicle_id, 'licença ' || licence_id || ' no ponto ' || stand_id || ': valid_from '
       || coalesce(valid_from::text, '-') || ', valid_until ' || coalesce(valid_until::text, '-')
FROM parking_licences WHERE vehicle_id = ANY(:vs)
  AND (valid_from NOT BETWEEN :lo AND :hi OR valid_until NOT BETWEEN :lo AND :hi)
UNION ALL
SELECT vehicle_id, 'situação ' || period_id || ' (' || status || '): valid_from '
       || coalesce(valid_from::text, '-') || ', valid_until ' || coalesce(valid_until::text, '-')
FROM vehicle_status_periods WHERE vehicle_id = ANY(:vs)
  AND (valid_from NOT BETWEEN :lo AND :hi OR valid_until NOT BETWEEN :lo AND :hi)
UNION ALL
SELECT vehicle_id, 'veículo: alvara_valid_until ' || coalesce(alvara_valid_until::text, '-')
       || ', inspection_valid_until ' || coalesce(inspection_valid_until::text, '-')
       || ', first_registered_on ' || coalesce(first_registered_on::text, '-')
       || ', last_inspection_on ' || coalesce(last_inspection_on::text, '-')
       || ', alvara_first_issued_on ' || coalesce(alvara_first_issued_on::text, '-')
       || ', substitution_since ' || coalesce(substitution_since::text, '-')
       || ', termo_recolhido_since ' || coalesce(termo_recolhido_since::text, '-')
       || ', termo_recolhido_until ' || coalesce(termo_recolhido_until::text, '-')
FROM vehicles WHERE vehicle_id = ANY(:vs)
  AND (alvara_valid_until NOT BETWEEN :lo AND :hi OR inspection_valid_until NOT BETWEEN :lo AND :hi
       OR first_registered_on NOT BETWEEN :lo AND :hi
       OR last_inspection_on NOT BETWEEN :lo AND :hi
       OR alvara_first_issued_on NOT BETWEEN :lo AND :hi
       OR substitution_since NOT BETWEEN :lo AND :hi
       OR termo_recolhido_since NOT BETWEEN :lo AND :hi
       OR termo_recolhido_until NOT BETWEEN :lo AND :hi)
ORDER BY 1, 2
"""


def unreadable_registry_rows(
    session: Session | Connection, vehicle_ids: Sequence[str]
) -> dict[str, str]:
    """Return, per vehicle, its registry rows holding a date the detectors cannot read.

    Licences, status periods and document expiries with a date outside
    ``fleet.dates.PANDAS_DATE_MIN`` … ``PANDAS_DATE_MAX`` (e.g. ``0202-12-01``, stored before
    the registry checked its dates, or by hand): such a vehicle is not judged live until the row
    is corrected (a typo there could accuse it wrongly); the message names the rows.
    """
    if not vehicle_ids:
        return {}
    rows = session.execute(
        text(_UNREADABLE_SQL),
        {"vs": list(vehicle_ids), "lo": PANDAS_DATE_MIN, "hi": PANDAS_DATE_MAX},
    ).all()
    out: dict[str, list[str]] = {}
    for vehicle, what in rows:
        out.setdefault(str(vehicle), []).append(str(what))
    return {
        v: "cadastro com data fora do intervalo legível "
        f"({PANDAS_DATE_MIN.isoformat()} a {PANDAS_DATE_MAX.isoformat()}): " + "; ".join(items)
        for v, items in out.items()
    }


def vehicle_boundaries(session: Session, vehicle_ids: Sequence[str]) -> list[tuple[Any, list[str]]]:
    """Return the boundaries of the vehicles' municipalities, each with its vehicles (sorted).

    Vehicles not registered, without a municipality or whose municipality has no boundary are
    left out. Each boundary is read once per process (a boundary changed in the database takes
    effect on restart).
    """
    rows = session.execute(
        text(
            "SELECT v.vehicle_id, v.municipality_code FROM vehicles v "
            "JOIN municipalities m ON m.code = v.municipality_code "
            "WHERE v.vehicle_id = ANY(:vs) AND m.boundary IS NOT NULL ORDER BY 2, 1"
        ),
        {"vs": list(vehicle_ids)},
    ).all()
    missing = sorted({str(c) for _, c in rows if str(c) not in _BOUNDARIES})
    if missing:
        found = session.execute(
            text("SELECT code, ST_AsBinary(boundary) FROM municipalities WHERE code = ANY(:cs)"),
            {"cs": missing},
        )
        for code, wkb in found:
            _BOUNDARIES[str(code)] = shapely.from_wkb(bytes(wkb))
    by_code: dict[str, list[str]] = {}
    for vehicle, code in rows:
        by_code.setdefault(str(code), []).append(str(vehicle))
    return [(_BOUNDARIES[code], vs) for code, vs in by_code.items()]


def _registry_as_of_pending(
    session: Session,
    mine: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    *,
    timezone: str,
) -> pd.DataFrame:
    """Return the registered vehicles' fleet frame, each record as of its oldest pending day.

    The oldest pending fix is the first of the vehicle's kept tail, else its first fix later
    than its state: the day of the next finding it can complete.
    """
    ts = pd.to_datetime(pings[fr.TIMESTAMP], utc=True).astype("datetime64[ns, UTC]")
    by_vehicle = ts.groupby(pings[fr.VEHICLE_ID].astype(str)).agg(list)
    by_day: dict[dt.date, list[str]] = {}
    for vehicle, stamps in by_vehicle.items():
        state = mine.get(str(vehicle)) or {}
        kept = (state.get("tail") or {}).get(fr.TIMESTAMP) or []
        seen = state.get("seen", -(2**63))
        new = [t for t in stamps if t.value > seen]
        if not kept and not new:
            continue
        first = pd.Timestamp(kept[0], unit="ns", tz="UTC") if kept else min(new)
        by_day.setdefault(first.tz_convert(timezone).date(), []).append(str(vehicle))
    records: dict[str, dict[str, Any]] = {}
    for day, vehicles in sorted(by_day.items()):
        records |= fleet_records(session, vehicles, day=day)
    columns = ["vehicle_id", *_FLEET_RECORD_COLUMNS]
    rows = [{"vehicle_id": v, **records[v]} for v in sorted(records)]
    return pd.DataFrame(rows, columns=columns).astype({"vehicle_id": "str"})


def _driver_context(
    session: Session,
    mine: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    *,
    timezone: str,
) -> list[tuple[list[str], dict[str, Any]]]:
    """``driver_not_allowed``'s vehicles (those with a link) and the registry they need.

    Grouped by municipality, each with its taxi rulebook's limits (:func:`law_limits`, e.g. a
    regulator's ``auxiliary_only_min_days``).

    The drivers read are those of the vehicles' links and of the ``driver_id`` on the new fixes
    and on the kept ones.
    """
    ids: set[str] = set()
    if fr.DRIVER_ID in pings.columns:
        ids |= {str(d) for d in pings[fr.DRIVER_ID].dropna() if str(d).strip()}
    for state in mine.values():
        kept = ((state or {}).get("tail") or {}).get(fr.DRIVER_ID) or []
        ids |= {str(d) for d in kept if d is not None and str(d).strip()}
    drivers, links = driver_registry_frames(
        conn=session, vehicle_ids=sorted(mine), driver_ids=sorted(ids)
    )
    judged = sorted(set(links["vehicle_id"]) & set(mine))
    if not judged:
        return []
    context = {"drivers": drivers, "driver_links": links, "timezone": timezone}
    code_of = _municipality_of(session, judged)
    groups: dict[str, list[str]] = {}
    for vehicle in judged:
        groups.setdefault(code_of.get(vehicle) or "", []).append(vehicle)
    return [
        (vs, context | law_limits(code, "driver_not_allowed"))
        for code, vs in sorted(groups.items())
    ]


def _kernel_contexts(
    session: Session,
    kind: str,
    mine: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    *,
    timezone: str,
) -> list[tuple[list[str], dict[str, Any]]]:
    """Return the vehicles a kernel judges, by groups sharing the context read for them.

    ``outside_municipality``: each municipality's boundary with its vehicles;
    ``operating_while_barred``: the registered vehicles by municipality, with their registry
    (the fleet frame), the zone and the limits of the municipality's taxi rulebook
    (:func:`law_limits`); ``driver_not_allowed``: the vehicles with a driver link in the
    registry, with the drivers and links (whole histories: the kernel judges each day on its own
    dates) and the zone. Vehicles without them are not judged (no state). ``flag2_misuse``:
    every vehicle with the zone, and its municipality's boundary where it has one. Other kinds:
    every vehicle.
    """
    if kind == "outside_municipality":
        return [(vs, {"boundary": geom}) for geom, vs in vehicle_boundaries(session, list(mine))]
    if kind == "operating_while_barred":
        fleet = _registry_as_of_pending(session, mine, pings, timezone=timezone)
        vehicles = fleet["vehicle_id"].tolist()
        if not vehicles:
            return []
        code_of = _municipality_of(session, vehicles)
        groups: dict[str, list[str]] = {}
        for vehicle in vehicles:
            groups.setdefault(code_of.get(vehicle) or "", []).append(vehicle)
        return [
            (
                vs,
                {"fleet": fleet[fleet["vehicle_id"].isin(vs)].reset_index(drop=True)}
                | {"timezone": timezone}
                | law_limits(code, kind),
            )
            for code, vs in sorted(groups.items())
        ]
    if kind == "driver_not_allowed":
        return _driver_context(session, mine, pings, timezone=timezone)
    if kind == "flag2_misuse":  # a ride out of the municipality is told by its boundary
        bounded = vehicle_boundaries(session, list(mine))
        rest = set(mine).difference(*(vs for _, vs in bounded))
        out: list[tuple[list[str], dict[str, Any]]] = [
            (vs, {"timezone": timezone, "boundary": geom}) for geom, vs in bounded
        ]
        return out + ([(sorted(rest), {"timezone": timezone})] if rest else [])
    return [(list(mine), {})]


def law_limits(municipality: str, kind: str) -> dict[str, Any]:
    """Return the limits a municipality's taxi rulebook fixes for ``kind`` (none without one).

    The live engine runs each registered vehicle with its municipality's limits (e.g. Pinto
    Bandeira's 5-year vehicle age, art. 10); a process's ``thresholds`` override them.
    """
    book = bundled_rulebooks().get((municipality, "taxi"))
    return dict(book.thresholds().get(kind, {})) if book is not None else {}


def stand_cover(session: Session) -> StandCover | None:
    """Return the cover of the active stands with a geometry (None when there are none).

    Built once per process and rebuilt when the ``stands`` table changes (its row count, latest
    ``updated_at`` or latest ``retired_at`` differ from those it was built from).
    """
    return _active_stands(session)[1]


def _active_stands(session: Session) -> tuple[gpd.GeoDataFrame, StandCover | None]:
    """Return the active stands with a geometry and their cover (cached: see stand_cover)."""
    signature = tuple(
        session.execute(text("SELECT count(*), max(updated_at), max(retired_at) FROM stands")).one()
    )
    if _COVER.get("signature") != signature:
        from engines.pipeline import AnalysisParams

        stands = stands_frame(session=session)
        stands = stands[stands.geometry.notna() & ~stands.geometry.is_empty].reset_index(drop=True)
        cover = (
            build_stand_cover(stands, resolution=AnalysisParams().h3_resolution)
            if len(stands)
            else None
        )
        _COVER.update(signature=signature, stands=stands, cover=cover)
    return _COVER["stands"], _COVER["cover"]


def live_fleet(session: Session) -> pd.DataFrame:
    """Return the fleet frame of the registered vehicles (``fleet_facts``'s input).

    ``vehicle_id``, ``accessible``, ``stands`` (the stands of the vehicle's parking
    licences, sorted) and ``unplaced_stands`` (those its latest fleet import could not place:
    its licences are then not known).
    """
    rows = session.execute(
        text(
            "SELECT v.vehicle_id, v.accessible, COALESCE(array_agg(DISTINCT l.stand_id ORDER BY "
            "l.stand_id) FILTER (WHERE l.stand_id IS NOT NULL), '{}'), v.unplaced_stands "
            "FROM vehicles v LEFT JOIN parking_licences l ON l.vehicle_id = v.vehicle_id "
            "GROUP BY v.vehicle_id, v.accessible, v.unplaced_stands ORDER BY v.vehicle_id"
        )
    ).all()
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([str(r[0]) for r in rows], dtype="str"),
            "accessible": pd.Series([r[1] for r in rows], dtype="object"),
            "stands": pd.Series([tuple(r[2]) for r in rows], dtype="object"),
            "stand_names": pd.Series([() for _ in rows], dtype="object"),
            UNPLACED: pd.Series([tuple(r[3] or ()) for r in rows], dtype="object"),
        }
    )


def ended_licences(session: Session) -> pd.DataFrame:
    """Return the parking licences that ended, with the exclusion's reason when one follows.

    ``licence_id``, ``vehicle_id``, ``stand_id``, ``valid_from``, ``valid_until`` (naive
    dates) and ``reason`` (the ``licence_exclusions`` row of the day after the end, POA art.
    50; None when the registry records none): ``unlicensed_stand_use``'s ``licence_history``.
    """
    rows = session.execute(
        text(
            "SELECT l.licence_id, l.vehicle_id, l.stand_id, l.valid_from, l.valid_until, "
            "(SELECT e.reason FROM licence_exclusions e WHERE e.vehicle_id = l.vehicle_id "
            "AND e.stand_id = l.stand_id AND e.excluded_on = l.valid_until + 1 "
            "ORDER BY e.exclusion_id DESC LIMIT 1) FROM parking_licences l "
            "WHERE l.valid_until IS NOT NULL ORDER BY l.licence_id"
        )
    ).all()
    return pd.DataFrame(
        {
            "licence_id": pd.Series([r[0] for r in rows], dtype="int64"),
            "vehicle_id": pd.Series([str(r[1]) for r in rows], dtype="str"),
            "stand_id": pd.Series([str(r[2]) for r in rows], dtype="str"),
            "valid_from": pd.to_datetime(pd.Series([r[3] for r in rows], dtype="object")),
            "valid_until": pd.to_datetime(pd.Series([r[4] for r in rows], dtype="object")),
            "reason": pd.Series([r[5] for r in rows], dtype="object"),
        }
    )


def _detect_visit_kinds(
    session: Session,
    pings: pd.DataFrame,
    fixes: list[dict[str, Any]],
    kinds: Sequence[str],
    params: Mapping[str, Mapping[str, Any]],
    *,
    timezone: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Advance the fleet's visits kernel by the fixes, then its kinds; findings, state rows.

    ``habitual_absence`` (:func:`_detect_absence`) takes the fixes the visits kernel took and
    the visits it released in the call.
    """
    stands, cover = _active_stands(session)
    if cover is None:
        return [], []
    from engines.pipeline import AnalysisParams

    a = AnalysisParams()
    _fleet_lock(session)
    names = ["visits", *(["unlicensed_stand_use"] if "unlicensed_stand_use" in kinds else [])]
    stored: dict[str, Any] = dict(
        session.execute(
            text(
                "SELECT detector, state FROM live_detector_states "
                "WHERE vehicle_id = :v AND detector = ANY(:ds)"
            ),
            {"v": FLEET_ROW, "ds": names},
        ).all()
    )
    before = _visits_state(stored.get("visits"))
    seen = {v: int(s["seen"]) for v, s in before["vehicles"].items()}
    new = [
        f
        for f in fixes
        if int(pd.Timestamp(f[fr.TIMESTAMP]).value) > seen.get(str(f[fr.VEHICLE_ID]), -(2**63))
    ]
    if not new:
        return [], []  # late fixes only: stored, seen by the batch only
    licences = licence_frame(session=session).drop(columns="licence_id")
    fleet = live_fleet(session)
    newest = min(pd.Timestamp(pings[fr.TIMESTAMP].max()), pd.Timestamp.now(tz="UTC"))
    visits_state, visits, visit_fixes = advance_visits(
        before,
        pings,
        now=newest - pd.Timedelta(seconds=VISITS_WATERMARK_LAG_S),
        cover=cover,
        stands=stands,
        licences=licences,
        unknown_licences=unknown_licences(fleet),
        exit_grace_s=a.visit_exit_grace_s,
        exit_grace_m=a.visit_exit_grace_m,
        near_exit_grace_s=a.visit_near_exit_grace_s,
        min_dwell_s=a.visit_min_dwell_s,
        boarding_grace_s=a.boarding_grace_s,
        boarding_grace_m=a.boarding_grace_m,
        max_gap_s=a.trip_max_gap_s,
        timezone=timezone,
    )
    boarding: dict[str, Any] = {
        "boarding_grace_s": a.boarding_grace_s,
        "boarding_grace_m": a.boarding_grace_m,
    }
    found: list[dict[str, Any]] = []
    last = pd.Timestamp(max(int(pd.Timestamp(f[fr.TIMESTAMP]).value) for f in new), tz="UTC")
    ts = last.to_pydatetime()
    saved = [{"v": FLEET_ROW, "d": "visits", "s": _plain(visits_state), "ts": ts}]
    if "habitual_absence" in kinds:
        res, rows_ = _detect_absence(
            session,
            new,
            _released_visits(visits),
            as_of=last.tz_convert(timezone).date() - dt.timedelta(days=1),
            licences=licences,
            unreleased=unreleased_arrivals(visits_state),
            stands=stands,
            fleet=fleet,
            suspensions=suspensions_frame(
                conn=session, stand_ids=sorted(stands["stand_id"].astype(str))
            ),
            params=params["habitual_absence"],
            timezone=timezone,
        )
        found += res
        saved += rows_
    if "queue_jump" in kinds and len(visits):
        sids = sorted({str(s) for s in visits["stand_id"]})
        rows = session.execute(
            text(
                "SELECT detector, state FROM live_detector_states "
                "WHERE vehicle_id = :v AND detector = ANY(:ds)"
            ),
            {"v": FLEET_ROW, "ds": [f"queue_jump:{sid}" for sid in sids]},
        ).all()
        queues = {str(d).removeprefix("queue_jump:"): q for d, q in rows if _records_state(q)}
        queues, res = advance_queue_jump(
            queues, visits, visit_fixes, fleet=fleet, **boarding, **params["queue_jump"]
        )
        found.extend(_records(res))
        saved += [
            {"v": FLEET_ROW, "d": f"queue_jump:{sid}", "s": _plain(st), "ts": ts}
            for sid, st in queues.items()
        ]
    if "unlicensed_stand_use" in kinds:
        held = stored.get("unlicensed_stand_use") or {}
        held = {v: st for v, st in held.items() if _records_state(st)}
        held, res = advance_unlicensed_stand_use(
            held,
            visits,
            visit_fixes,
            pending=unreleased_arrivals(visits_state),
            fleet=fleet,
            licence_history=ended_licences(session),
            suspensions=suspensions_frame(
                conn=session, stand_ids=sorted(stands["stand_id"].astype(str))
            ),
            timezone=timezone,
            **boarding,
            **params["unlicensed_stand_use"],
        )
        found.extend(_records(res))
        saved.append({"v": FLEET_ROW, "d": "unlicensed_stand_use", "s": _plain(held), "ts": ts})
    return found, saved


def _visits_state(stored: Any) -> dict[str, Any]:
    """Return the stored visits kernel state (a state of the per-fix tracker it replaced: anew)."""
    if (
        isinstance(stored, dict)
        and isinstance(stored.get("vehicles"), dict)
        and all(isinstance(s, dict) and "seen" in s for s in stored["vehicles"].values())
        and all(isinstance(k, list) for k in stored.get("stands", {}).values())
    ):
        return stored
    return new_visits_state()


def _records_state(state: Any) -> bool:
    """Whether a stored visit-kind state holds visit records (older shapes are dropped)."""
    return isinstance(state, dict) and all(
        isinstance(r, dict) and "visit" in r for r in state.get("visits", [None])
    )


def _released_visits(visits: pd.DataFrame) -> list[dict[str, Any]]:
    """Return the released visits as ``update_habitual_absence`` takes them (plain dicts)."""
    return [
        {
            "vehicle_id": str(v["vehicle_id"]),
            "stand_id": str(v["stand_id"]),
            "arrived_ns": int(v["arrived_at"].value),
            "departed_ns": int(v["departed_at"].value),
            "dwell_s": float(v["dwell_s"]),
            "boarded": bool(v["boarded"]),
            "first": {"row": None if pd.isna(v["first_row"]) else int(v["first_row"])},
            "last": {"row": None if pd.isna(v["last_row"]) else int(v["last_row"])},
        }
        for v in visits.to_dict("records")
    ]


def _detect_absence(
    session: Session,
    fixes: list[dict[str, Any]],
    visits: list[dict[str, Any]],
    *,
    as_of: dt.date,
    licences: pd.DataFrame,
    unreleased: Mapping[str, int],
    stands: gpd.GeoDataFrame,
    fleet: pd.DataFrame,
    suspensions: pd.DataFrame | None = None,
    params: Mapping[str, Any],
    timezone: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Advance the habitual_absence kernel of the vehicles of the fixes and released visits.

    One state row per vehicle (detector ``habitual_absence``), read and written for the
    vehicles a call touches only; the days before ``as_of`` + 1 are closed.
    """
    vehicles = sorted(
        {str(f[fr.VEHICLE_ID]) for f in fixes} | {str(v["vehicle_id"]) for v in visits}
    )
    rows = session.execute(
        text(
            "SELECT vehicle_id, state FROM live_detector_states "
            "WHERE detector = 'habitual_absence' AND vehicle_id = ANY(:vs)"
        ),
        {"vs": vehicles},
    )
    states = {str(v): _absence_state(str(v), s) for v, s in rows}
    pings = pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series([str(f[fr.VEHICLE_ID]) for f in fixes], dtype="str"),
            fr.TIMESTAMP: pd.to_datetime([f[fr.TIMESTAMP] for f in fixes], utc=True),
            fr.LAT: np.array([f.get(fr.LAT) for f in fixes], dtype=np.float64),
            fr.LON: np.array([f.get(fr.LON) for f in fixes], dtype=np.float64),
            fr.ROW: pd.array([f.get(fr.ROW) for f in fixes], dtype="Int64"),
            fr.METER: pd.Series([f.get(fr.METER) for f in fixes], dtype="object"),
        }
    )
    after, res = _DAY_KERNELS["habitual_absence"].advance(
        states,
        pings,
        _released_frame(visits),
        licences=licences,
        as_of=as_of,
        unreleased=unreleased,
        stands=stands,
        fleet=fleet,
        suspensions=suspensions,
        timezone=timezone,
        **params,
    )
    last = pd.Timestamp(pings[fr.TIMESTAMP].max()).to_pydatetime() if len(pings) else None
    saved = [
        {"v": v, "d": "habitual_absence", "s": _plain(st), "ts": last}
        for v, st in after.items()
        if st != states.get(v)
    ]
    return _records(res), saved


def _absence_state(vehicle: str, stored: Any) -> dict[str, Any] | None:
    """Return a vehicle's habitual_absence state; an older (fleet-keyed) part is converted."""
    if not isinstance(stored, dict):
        return None
    if isinstance(stored.get("visits"), dict):  # {key: {vehicle: value}}
        return {
            "days": stored["days"].get(vehicle, {}),
            "visits": stored["visits"].get(vehicle, []),
            "next": stored["next"].get(vehicle),
            "emitted": stored["emitted"].get(vehicle, {}),
        }
    return stored


def _released_frame(visits: list[dict[str, Any]]) -> pd.DataFrame:
    """Return the visits the tracker released as a visits frame (the columns presence reads)."""

    def utc(key: str) -> pd.Series:
        ns = np.array([int(v[key]) for v in visits], dtype=np.int64)
        return pd.Series(pd.to_datetime(ns, unit="ns", utc=True))

    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([str(v["vehicle_id"]) for v in visits], dtype="str"),
            "stand_id": pd.Series([str(v["stand_id"]) for v in visits], dtype="str"),
            "arrived_at": utc("arrived_ns"),
            "departed_at": utc("departed_ns"),
            "dwell_s": np.array([float(v["dwell_s"]) for v in visits], dtype=np.float64),
            "boarded": np.array([bool(v["boarded"]) for v in visits], dtype=bool),
            "first_row": pd.array([(v.get("first") or {}).get("row") for v in visits], "Int64"),
            "last_row": pd.array([(v.get("last") or {}).get("row") for v in visits], "Int64"),
        }
    )


def _fleet_lock(session: Session) -> None:
    """Take the fleet-wide states' lock (after the vehicle locks; see the module docstring)."""
    session.execute(text("SELECT pg_advisory_xact_lock(:c, 0)"), {"c": _FLEET_LOCK_CLASS})


def _detect_inactivity(
    session: Session,
    pings: pd.DataFrame,
    params: Mapping[str, Any],
    *,
    timezone: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Advance the fleet's inactivity kernel by the fixes; findings, state rows."""
    ids = [str(v) for v in session.execute(text("SELECT vehicle_id FROM vehicles")).scalars()]
    if not ids:
        return [], []
    _fleet_lock(session)
    stored = session.execute(
        text(
            "SELECT state FROM live_detector_states "
            "WHERE vehicle_id = :v AND detector = 'inactivity'"
        ),
        {"v": FLEET_ROW},
    ).scalar_one_or_none()
    state = stored if isinstance(stored, dict) and "first" in stored else None  # old shape: anew
    last = pd.Timestamp(pings[fr.TIMESTAMP].max())
    records = fleet_records(session, ids, day=last.tz_convert(timezone).date())
    fleet = pd.DataFrame(  # status and documents: days barred by them are excused
        [{"vehicle_id": v, **r} for v, r in records.items()],
        columns=["vehicle_id", *_FLEET_RECORD_COLUMNS],
    )
    after, res = _DAY_KERNELS["inactivity"].advance(
        state, pings, fleet=fleet, timezone=timezone, **params
    )
    if after == state:
        return _records(res), []
    ts = last.to_pydatetime()
    return _records(res), [{"v": FLEET_ROW, "d": "inactivity", "s": _plain(after), "ts": ts}]


def _detect_stand_formation(
    session: Session,
    pings: pd.DataFrame,
    states: Mapping[tuple[str, str], tuple[Any, int | None]],
    params: Mapping[str, Any],
    *,
    timezone: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Advance the vehicles' runs and the fleet's informal-rank kernel by the fixes.

    Each vehicle keeps its open run (:func:`illegal_stand_formation.advance_runs`, steps up to
    twice the stops' diameter: a run never splits a stop the batch would find); when a run
    closes, its stored fixes are read back from ``fixes``, :func:`tracking.stops.detect_stops`
    finds its stops (thresholds of ``pontual analyze``; the extent's reference latitude is the
    run's mean, not the whole input's as in batch) and their waiting stops go to the kernel,
    which judges the local days before the call's latest fix's over the waiting stops of the
    last :data:`STAND_FORMATION_WINDOW_DAYS` days, away from the stands and the allowed places
    (``allowed_places``) stored then.
    """
    from engines.pipeline import AnalysisParams

    a = AnalysisParams()
    kind = illegal_stand_formation.KIND
    vehicles = sorted(set(pings[fr.VEHICLE_ID].astype("str")))
    runs = {v: _stored_run(states.get((v, kind))) for v in vehicles}
    after, closed = illegal_stand_formation.advance_runs(
        runs, pings, max_step_m=2 * a.stop_max_diameter_m, max_gap_s=DEFAULT_STOP_MAX_GAP_S
    )
    saved = [{"v": v, "d": kind, "s": r, "ts": _utc(r["last_ns"])} for v, r in after.items()]
    min_wait_s = float(params.get("min_wait_s", DEFAULT_MIN_WAIT_S))
    waiting: list[dict[str, Any]] = []
    for vehicle, first_ns, last_ns in closed:
        if (last_ns - first_ns) / _NS < min_wait_s:
            continue  # no waiting stop in it
        # the run, and the fix that closed it (a boarding that ends a wait may be that fix)
        after_ns = last_ns + round(illegal_stand_formation.BOARDING_WITHIN_S * _NS)
        fixes = _stored_fixes(session, vehicle, first_ns, after_ns)
        n_run = int((fixes[fr.TIMESTAMP] <= pd.Timestamp(last_ns, unit="ns", tz="UTC")).sum())
        run = fixes.iloc[:n_run]
        stops = detect_stops(
            run, max_diameter_m=a.stop_max_diameter_m, min_duration_s=a.stop_min_duration_s
        )
        waiting += illegal_stand_formation.waiting_stops(
            stops,
            fixes.iloc[: n_run + 1],
            min_wait_s=min_wait_s,
            min_free_share=float(params.get("min_free_share", DEFAULT_MIN_FREE_SHARE)),
        )
    last = pd.Timestamp(pings[fr.TIMESTAMP].max())
    through = last.tz_convert(timezone).date() - dt.timedelta(days=1)
    query = (
        "SELECT {} FROM live_detector_states "
        "WHERE vehicle_id = :v AND detector = 'illegal_stand_formation'"
    )
    judged = session.execute(
        text(query.format("(state->>'judged')::int")), {"v": FLEET_ROW}
    ).scalar_one_or_none()
    if not waiting and judged is not None and judged >= (through - dt.date(1970, 1, 1)).days:
        return [], saved  # nothing new, no day to close: the (large) fleet row is not read
    stands, _ = _active_stands(session)
    _fleet_lock(session)
    state = session.execute(text(query.format("state")), {"v": FLEET_ROW}).scalar_one_or_none()
    if not (isinstance(state, dict) and "judged" in state):
        state = None  # an older shape: judged anew
    new, res = _DAY_KERNELS[kind].advance(
        state,
        waiting,
        stands=stands,
        allowed_places=allowed_places_frame(session=session),
        through=through,
        window_days=STAND_FORMATION_WINDOW_DAYS,
        timezone=timezone,
        **params,
    )
    if new != state:
        saved.append({"v": FLEET_ROW, "d": kind, "s": _plain(new), "ts": last.to_pydatetime()})
    return _records(res), saved


def _utc(ns: int) -> dt.datetime:
    return pd.Timestamp(ns, unit="ns", tz="UTC").to_pydatetime()


def _stored_run(stored: tuple[Any, int | None] | None) -> dict[str, Any] | None:
    """Return a vehicle's stored open run (None when there is none)."""
    run = None if stored is None else stored[0]
    return run if isinstance(run, dict) and "last_ns" in run else None


def _stored_fixes(session: Session, vehicle: str, first_ns: int, last_ns: int) -> pd.DataFrame:
    """Read the vehicle's stored fixes from ``first_ns`` to ``last_ns`` (a closed run)."""
    rows = session.execute(
        text(
            "SELECT ts, lat, lon, meter, speed_flag FROM fixes WHERE vehicle_id = :v "
            "AND ts BETWEEN :a AND :b ORDER BY ts"
        ),
        {
            "v": vehicle,
            "a": pd.Timestamp(first_ns, unit="ns", tz="UTC").to_pydatetime(),
            "b": pd.Timestamp(last_ns, unit="ns", tz="UTC").to_pydatetime(),
        },
    ).all()
    return pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series([vehicle] * len(rows), dtype="str"),
            fr.TIMESTAMP: pd.to_datetime([r[0] for r in rows], utc=True),
            fr.LAT: np.array([r[1] for r in rows], dtype=np.float64),
            fr.LON: np.array([r[2] for r in rows], dtype=np.float64),
            fr.METER: pd.Series([r[3] for r in rows], dtype="object"),
            fr.SPEED_FLAG: np.array([bool(r[4]) for r in rows], dtype=bool),
        }
    )


def _ping_dicts(pings: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [c for c in fr.PING_COLUMNS if c in pings.columns]
    frame = pings[cols].sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable")
    frame = frame.astype(object).where(frame.notna(), None)
    return [dict(zip(cols, row, strict=True)) for row in frame.itertuples(False, None)]


def detect_live(
    session: Session,
    pings: pd.DataFrame,
    *,
    thresholds: Thresholds | None = None,
    kinds: Sequence[str] = LIVE_KINDS,
    roads: RoadGraph | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> list[dict[str, Any]]:
    """Advance the stored live states by ``pings``; return the finding records they complete.

    Takes the vehicles' locks and writes their states in the session's transaction (the caller
    commits). See :func:`process_fixes` for the parameters.
    """
    params = {kind: live_params(kind, thresholds) for kind in kinds}
    if pings.empty or not kinds:
        return []
    fixes = _ping_dicts(pings)
    vehicles = sorted({str(f[fr.VEHICLE_ID]) for f in fixes})
    _lock_vehicles(session, vehicles)
    states = _load_states(session, vehicles, kinds)
    if "tracking_gap" in kinds and (late := _late_instants(fixes, states, "tracking_gap")):
        _reannounce(session, withdraw_filled_gaps(session, late))  # a silence they disprove
    found: list[dict[str, Any]] = []
    saved: list[dict[str, Any]] = []
    for kind in kinds:
        if kind not in _KERNELS:
            continue
        mine = {v: _kernel_state(states.get((v, kind))) for v in vehicles}
        for group, context in _kernel_contexts(session, kind, mine, pings, timezone=timezone):
            part = pings[pings[fr.VEHICLE_ID].astype(str).isin(group)]
            before = {v: mine[v] for v in group}
            after, res = advance(_KERNELS[kind], before, part, **(context | params[kind]))
            found.extend(_records(res))
            if _KERNELS[kind].open_detect is not None:
                closed = _closed_before(before, after)
                _reannounce(
                    session, withdraw_provisional(session, kind, closed, set(res["finding_id"]))
                )
                found.extend(_open_findings(session, kind, after, params[kind], timezone=timezone))
            saved.extend(
                {
                    "v": v,
                    "d": kind,
                    "s": st,
                    "ts": pd.Timestamp(st["seen"], unit="ns", tz="UTC").to_pydatetime(),
                }
                for v, st in after.items()
                if st != before.get(v)
            )
    if "longer_route" in kinds:
        more, rows = _detect_longer_route(
            session, pings, states, vehicles, params["longer_route"], roads
        )
        found.extend(more)
        saved.extend(rows)
    tracker_kinds = [k for k in kinds if k in _TRACKER_KINDS]
    if tracker_kinds:
        more, rows = _detect_visit_kinds(
            session, pings, fixes, tracker_kinds, params, timezone=timezone
        )
        found.extend(more)
        saved.extend(rows)
    if "illegal_stand_formation" in kinds:
        more, rows = _detect_stand_formation(
            session, pings, states, params["illegal_stand_formation"], timezone=timezone
        )
        found.extend(more)
        saved.extend(rows)
    if "inactivity" in kinds:
        more, rows = _detect_inactivity(session, pings, params["inactivity"], timezone=timezone)
        found.extend(more)
        saved.extend(rows)
    _save_states(session, saved)
    return found


def _closed_before(
    before: Mapping[str, Mapping[str, Any] | None], after: Mapping[str, Mapping[str, Any]]
) -> dict[str, int]:
    """Per vehicle whose kept fixes moved on, the instant before which its findings closed."""
    out = {}
    for vehicle, state in after.items():
        was = ((before.get(vehicle) or {}).get("tail") or {}).get(fr.TIMESTAMP) or []
        now = (state.get("tail") or {}).get(fr.TIMESTAMP) or []
        bound = int(now[0]) if now else int(state["seen"]) + 1
        if was and int(was[0]) < bound:
            out[vehicle] = bound
    return out


def _open_findings(
    session: Session,
    kind: str,
    states: Mapping[str, dict[str, Any]],
    params: dict[str, Any],
    *,
    timezone: str,
) -> list[dict[str, Any]]:
    """Return a kernel's growing findings on the vehicles' open parts, as provisional.

    Judged with the context read for the kept fixes (the registry as of the open day), as the
    finding that closes the day will be; :func:`store_findings` replaces each with its later
    versions until the day closes.
    """
    kept = {v: st for v, st in states.items() if (st.get("tail") or {}).get(fr.TIMESTAMP)}
    if not kept:
        return []
    out: list[dict[str, Any]] = []
    contexts = _kernel_contexts(session, kind, kept, tails_frame(kept), timezone=timezone)
    for group, context in contexts:
        found = open_findings(_KERNELS[kind], {v: kept[v] for v in group}, **(context | params))
        out.extend({**r, "details": {**r["details"], PROVISIONAL: True}} for r in _records(found))
    return out


# --- findings → alerts ---------------------------------------------------------------------


def _active_webhooks(session: Session) -> list[tuple[int, dict[str, Any]]]:
    rows = session.execute(text("SELECT webhook_id, filters FROM webhooks WHERE active"))
    return [(int(w), dict(f or {})) for w, f in rows]


def _alert(
    session: Session,
    record: Mapping[str, Any],
    *,
    throttle_s: float,
    webhooks: list[tuple[int, dict[str, Any]]],
) -> str | None:
    """Create the alert of a new finding, or fold it into a recent one; return the alert id."""
    key = throttle_key(record["kind"], record["vehicle_id"], record["stand_id"])
    ended = pd.Timestamp(record["ended_at"]).to_pydatetime()
    if throttle_s > 0:
        window = dt.timedelta(seconds=throttle_s)
        recent = session.execute(
            text(
                "SELECT alert_id FROM alerts WHERE throttle_key = :k "
                "AND event_at BETWEEN :lo AND :hi ORDER BY event_at DESC LIMIT 1 FOR UPDATE"
            ),
            {"k": key, "lo": ended - window, "hi": ended + window},
        ).scalar_one_or_none()
        if recent is not None:
            session.execute(
                text(
                    "UPDATE alerts SET repeat_count = repeat_count + 1, "
                    "last_repeat_at = GREATEST(last_repeat_at, :t) WHERE alert_id = :a"
                ),
                {"t": ended, "a": recent},
            )
            return None
    alert_id = f"alert-{record['finding_id']}"
    payload = alert_payload(record, alert_id=alert_id)
    geom = record.get("geometry")
    session.execute(
        text(
            "INSERT INTO alerts (alert_id, finding_id, kind, vehicle_id, stand_id, throttle_key, "
            "payload, geometry, event_at) VALUES (:a, :f, :kind, :v, :s, :k, :p, "
            "ST_GeomFromEWKT(:g), :e) ON CONFLICT (alert_id) DO NOTHING"
        ).bindparams(bindparam("p", type_=JSONB)),
        {
            "a": alert_id,
            "f": record["finding_id"],
            "kind": record["kind"],
            "v": record["vehicle_id"],
            "s": record["stand_id"],
            "k": key,
            "p": payload,
            "g": None if geom is None or geom.is_empty else f"SRID=4326;{geom.wkt}",
            "e": ended,
        },
    )
    targets = [{"w": w, "a": alert_id} for w, f in webhooks if alert_matches(f, payload)]
    if targets:
        session.execute(
            text(
                "INSERT INTO webhook_deliveries (webhook_id, alert_id) VALUES (:w, :a) "
                "ON CONFLICT DO NOTHING"
            ),
            targets,
        )
    session.execute(text("SELECT pg_notify(:c, :a)"), {"c": CHANNEL, "a": alert_id})
    return alert_id


def store_findings(
    session: Session,
    records: list[dict[str, Any]],
    *,
    throttle_s: float = DEFAULT_THROTTLE_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> list[dict[str, Any]]:
    """Insert finding records and alert the new ones (throttled), in the session's transaction.

    A registered vehicle's finding whose rule, in its municipality's rulebook, asks for
    repetition (POA art. 58, IX: a ``gps_anomaly``) is alerted only once the rulebook would
    propose it: a working receiver's lone GPS errors are stored, not announced.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        The caller commits.
    records : list of dict
        Finding records (findings-frame columns).
    throttle_s : float, default 900
        Throttle window (see the module docstring); 0 alerts every new finding.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days the rulebook groups findings by.

    Returns
    -------
    list of dict
        The records, each with ``new`` (inserted now) and ``alert_id`` (None when the finding
        was already stored, throttled or awaits its rule's repetition).
    """
    settled = settle_provisional(session, records)
    new = insert_findings(session, records)
    _settle_alerts(session, [r for r in records if r["finding_id"] in settled])
    webhooks = _active_webhooks(session) if new else []
    repeated_kinds = _repeated_kinds()
    repeated = [r for r in records if r["finding_id"] in new and r["kind"] in repeated_kinds]
    code_of = _municipalities_with_rulebooks(session, repeated)
    out = []
    for r in sorted(records, key=lambda r: (pd.Timestamp(r["ended_at"]), r["finding_id"])):
        is_new = r["finding_id"] in new
        code = code_of.get(str(r["vehicle_id"])) if r["kind"] in repeated_kinds else None
        waits = (
            is_new
            and code is not None
            and awaits_repetition(session, r, municipality=code, timezone=timezone)
        )
        alert_id = (
            _alert(session, r, throttle_s=0 if _provisional(r) else throttle_s, webhooks=webhooks)
            if is_new and not waits
            else None
        )
        out.append({**r, "new": is_new, "alert_id": alert_id})
    return out


def _provisional(record: Mapping[str, Any]) -> bool:
    """Whether a record is provisional: its own alert, never folded into the day before's.

    A ride across midnight would bring the next day's first finding within the throttle window.
    """
    return bool((record.get("details") or {}).get(PROVISIONAL))


def _settle_alerts(session: Session, records: list[dict[str, Any]]) -> None:
    """Give the alert of each provisional finding replaced now the finding's new extent.

    A settled one (the closing version, provisional no more) is announced again.
    """
    if not records:
        return
    session.execute(
        text(
            "UPDATE alerts SET payload = :p, event_at = :e WHERE alert_id = :a AND finding_id = :f"
        ).bindparams(bindparam("p", type_=JSONB)),
        [
            {
                "a": f"alert-{r['finding_id']}",
                "f": r["finding_id"],
                "p": alert_payload(r, alert_id=f"alert-{r['finding_id']}"),
                "e": pd.Timestamp(r["ended_at"]).to_pydatetime(),
            }
            for r in records
        ],
    )
    _reannounce(session, {r["finding_id"] for r in records if not _provisional(r)})


def _reannounce(session: Session, finding_ids: Collection[str]) -> None:
    """Announce the alerts of these findings again, settled or withdrawn.

    Their ``revision`` goes up by one, each webhook delivery of them is due again (the payload
    is read when sent) and the streams hear ``NOTIFY`` with :data:`REVISED` before the id.
    """
    if not finding_ids:
        return
    alert_ids = (
        session.execute(
            text(
                "UPDATE alerts SET revision = revision + 1 WHERE finding_id = ANY(:f) "
                "RETURNING alert_id"
            ),
            {"f": sorted(finding_ids)},
        )
        .scalars()
        .all()
    )
    if not alert_ids:
        return
    session.execute(
        text(
            "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, "
            "next_attempt_at = now(), last_error = NULL, delivered_at = NULL "
            "WHERE alert_id = ANY(:a)"
        ),
        {"a": sorted(alert_ids)},
    )
    session.execute(
        text("SELECT pg_notify(:c, :r || a) FROM unnest(CAST(:a AS text[])) AS a"),
        {"c": CHANNEL, "r": REVISED, "a": sorted(alert_ids)},
    )


@cache
def _repeated_kinds() -> frozenset[str]:
    """Return the kinds some bundled rule proposes only when repeated (their alerts wait)."""
    return frozenset(r.kind for b in bundled_rulebooks().values() for r in b.rules if r.repetition)


def _municipalities_with_rulebooks(
    session: Session, records: list[dict[str, Any]]
) -> dict[str, str]:
    """Map the records' registered vehicles to their municipality, when it has a rulebook."""
    with_books = {m for m, _ in bundled_rulebooks()}
    code_of = _municipality_of(session, sorted({str(r["vehicle_id"]) for r in records}))
    return {v: c for v, c in code_of.items() if c in with_books}


def _municipality_of(session: Session, vehicles: Sequence[str]) -> dict[str, str]:
    """Map the registered ``vehicles`` to their municipality code (those without one left out)."""
    if not vehicles:
        return {}
    rows = session.execute(
        text("SELECT vehicle_id, municipality_code FROM vehicles WHERE vehicle_id = ANY(:vs)"),
        {"vs": list(vehicles)},
    ).all()
    return {str(v): str(c) for v, c in rows if c is not None}


def process_fixes(
    session: Session,
    pings: pd.DataFrame,
    *,
    thresholds: Thresholds | None = None,
    kinds: Sequence[str] = LIVE_KINDS,
    throttle_s: float = DEFAULT_THROTTLE_S,
    roads: RoadGraph | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> list[dict[str, Any]]:
    """Run the live detectors on fixes already stored, store their findings, alert the new ones.

    Call it after the fixes' COMMIT, then commit the session: states, findings, alerts, webhook
    deliveries and the NOTIFY are one transaction (module docstring).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Session on the database (psycopg 3); the caller commits or rolls back.
    pings : pandas.DataFrame
        The accepted fixes (pings-frame columns, tz-aware ``timestamp``), any order.
    thresholds : mapping, optional
        ``{kind: {parameter: value}}`` as for ``pontual analyze`` (``tracking.detectors.detect``).
    kinds : sequence of str, default LIVE_KINDS
        Which live detectors to run.
    throttle_s : float, default 900
        Throttle window in seconds (0: none).
    roads : geo.roads.RoadGraph, optional
        Road network for ``longer_route`` (peer trips only without it).
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days (``flag2_misuse`` calendar, ``operating_while_barred`` days).

    Returns
    -------
    list of dict
        The finding records these fixes completed, each with ``new`` and ``alert_id``.

    Raises
    ------
    LiveConfigError
        If a threshold names an unknown kind or parameter.
    """
    found = detect_live(
        session, pings, thresholds=thresholds, kinds=kinds, roads=roads, timezone=timezone
    )
    return store_findings(session, found, throttle_s=throttle_s, timezone=timezone)
