"""Run every detector a run has the inputs for, with per-municipality thresholds.

Each detector lives in ``tracking/detectors/<kind>.py``; this module only knows which frames each
needs and passes the thresholds through (``thresholds[kind]`` maps keyword → value and is checked
against the detector's keyword-only parameters, so a typo is an error, not a silent default).
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from geo.roads import RoadGraph
from stands.licences import ended_licences
from stands.presence import operation_fixes
from stands.visits import DEFAULT_BOARDING_GRACE_M, DEFAULT_BOARDING_GRACE_S
from tracking.detectors.driver_not_allowed import detect_driver_not_allowed
from tracking.detectors.findings import KINDS, empty_findings
from tracking.detectors.flag2_misuse import detect_flag2_misuse
from tracking.detectors.gps_anomaly import detect_gps_anomaly
from tracking.detectors.habitual_absence import detect_habitual_absence
from tracking.detectors.illegal_stand_formation import detect_illegal_stand_formation
from tracking.detectors.inactivity import ActivitySpan, detect_inactivity, last_fixes
from tracking.detectors.longer_route import detect_longer_route
from tracking.detectors.operating_while_barred import detect_operating_while_barred
from tracking.detectors.outside_municipality import detect_outside_municipality
from tracking.detectors.queue_jump import detect_queue_jump
from tracking.detectors.tracking_gap import detect_tracking_gap
from tracking.detectors.unlicensed_stand_use import detect_unlicensed_stand_use

Thresholds = Mapping[str, Mapping[str, Any]]


class ThresholdConfigError(ValueError):
    """A threshold configuration names an unknown kind or parameter."""


@dataclass(kw_only=True)
class DetectorInputs:
    """The frames of one run (plain data); optional ones disable the detectors that need them."""

    pings: pd.DataFrame
    visits: pd.DataFrame
    trips: pd.DataFrame
    stops: pd.DataFrame
    stands: gpd.GeoDataFrame
    fleet: pd.DataFrame | None = None
    licences: pd.DataFrame | None = None
    boundary: Any = None
    roads: RoadGraph | None = None
    as_of: dt.date | None = None
    timezone: str = DEFAULT_TIMEZONE
    waiting_stops: list[dict[str, Any]] | None = None
    """Illegal stand formation's waiting stops, found vehicle by vehicle (``stops`` unread)."""
    allowed_places: gpd.GeoDataFrame | None = None
    """Areas where waiting is allowed (a stands frame) for ``illegal_stand_formation``."""
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S
    """The time grace the visits' boardings were decided with (``stands.visits``)."""
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M
    """The distance grace the visits' boardings were decided with (``stands.visits``)."""
    drivers: pd.DataFrame | None = None
    """The registry of drivers (``fleet.drivers.read_drivers``); with ``driver_links``."""
    driver_links: pd.DataFrame | None = None
    """Links driver ↔ prefixo (``fleet.drivers.read_driver_links``); with ``drivers``."""
    stand_suspensions: pd.DataFrame | None = None
    """Stand suspensions (``stands.suspensions.read_stand_suspensions``) for
    ``unlicensed_stand_use`` and ``habitual_absence``."""
    activity_span: ActivitySpan | None = None
    """The whole run's activity span when ``trips`` and ``fleet`` are a group of its vehicles
    (``inactivity``'s ``data_span``: first and last instant, vehicles operating each day);
    None: the span of ``trips``."""
    off_fleet: frozenset[str] = frozenset()
    """The vehicle ids of the run's fixes that ``fleet`` lacks (``engines.pipeline.id_checks``);
    ``inactivity`` does not judge a fleet vehicle written as one of them otherwise."""
    near_dwells: pd.DataFrame | None = None
    """``habitual_absence``'s near and silent dwells (``habitual_absence.find_near_dwells``) when
    ``pings`` are not the run's; None: found in ``pings``."""
    sightings: pd.DataFrame | None = None
    """Each vehicle's last fix of unknown meter and last fix (``inactivity.last_fixes``)
    when ``pings`` are not the run's; None: taken from ``pings``."""
    operation: pd.DataFrame | None = None
    """``habitual_absence``'s days of operation: each licensee's first and last fix of each day
    not with the meter off (``stands.presence.operation_fixes``) when ``pings`` are not the
    run's; None: taken from ``pings``."""


_DETECTORS: dict[str, Callable[..., gpd.GeoDataFrame]] = {
    "unlicensed_stand_use": detect_unlicensed_stand_use,
    "habitual_absence": detect_habitual_absence,
    "illegal_stand_formation": detect_illegal_stand_formation,
    "longer_route": detect_longer_route,
    "tracking_gap": detect_tracking_gap,
    "gps_anomaly": detect_gps_anomaly,
    "operating_while_barred": detect_operating_while_barred,
    "inactivity": detect_inactivity,
    "outside_municipality": detect_outside_municipality,
    "queue_jump": detect_queue_jump,
    "flag2_misuse": detect_flag2_misuse,
    "driver_not_allowed": detect_driver_not_allowed,
}
# Inputs wired by this module, not thresholds a municipality sets.
_WIRED = {
    "fleet",
    "licence_history",
    "pings",
    "stands",
    "roads",
    "peer_trips",  # longer_route's past trips of the fleet (live)
    "as_of",
    "timezone",
    "waiting",
    "allowed_places",  # illegal_stand_formation: the run's areas where waiting is allowed
    "boarding_grace_s",  # the visits' thresholds (AnalysisParams), echoed in the evidence
    "boarding_grace_m",
    "drivers",
    "driver_links",
    "suspensions",
    "data_span",  # inactivity: the whole run's span when judging a group of vehicles
    "off_fleet",  # inactivity: the run's vehicle ids the fleet lacks
    "sightings",  # inactivity: the last fix of each vehicle without meter data
    "near_dwells",  # habitual_absence: found by the vehicles' partitions
    "boundary",  # flag2_misuse: the run's municipality, to tell a ride that left it
}


def threshold_names(kind: str) -> tuple[str, ...]:
    """Keyword-only parameters of a detector that a configuration may set."""
    params = inspect.signature(_DETECTORS[kind]).parameters.values()
    return tuple(
        p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _WIRED
    )


def check_thresholds(thresholds: Thresholds) -> None:
    """Raise :class:`ThresholdConfigError` for an unknown kind or parameter.

    Parameters
    ----------
    thresholds : mapping
        ``{kind: {parameter: value}}``.
    """
    for kind, values in thresholds.items():
        if kind not in _DETECTORS:
            msg = f"tipo de achado desconhecido {kind!r}; esperado um de {', '.join(KINDS)}"
            raise ThresholdConfigError(msg)
        allowed = threshold_names(kind)
        for name in values:
            if name not in allowed:
                msg = f"limiar {name!r} não existe em {kind}; esperado um de {', '.join(allowed)}"
                raise ThresholdConfigError(msg)


def last_local_day(pings: pd.DataFrame, timezone: str) -> dt.date | None:
    """Return the local date of the latest fix (a run's default ``as_of``), None without fixes."""
    if pings.empty:
        return None
    last: pd.Timestamp = pings["timestamp"].max().tz_convert(timezone)
    return last.date()


def run_detectors(
    inputs: DetectorInputs,
    *,
    thresholds: Thresholds | None = None,
    kinds: tuple[str, ...] = KINDS,
    progress: Callable[[str], None] | None = None,
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run the detectors of ``kinds`` whose inputs are present.

    Parameters
    ----------
    inputs : DetectorInputs
        The run's frames.
    thresholds : mapping, optional
        ``{kind: {parameter: value}}`` overriding each detector's documented defaults.
    kinds : tuple of str
        Which kinds to run.
    progress : callable, optional
        Called with the kind before each detector.

    Returns
    -------
    findings : geopandas.GeoDataFrame
        All findings, sorted by kind and start.
    skipped : dict
        ``{kind: reason}`` (pt-BR) for the kinds not run for lack of input.
    """
    thresholds = thresholds or {}
    check_thresholds(thresholds)
    i = inputs
    as_of = i.as_of or last_local_day(i.pings, i.timezone)
    tz = {"timezone": i.timezone}
    boarding = {"boarding_grace_s": i.boarding_grace_s, "boarding_grace_m": i.boarding_grace_m}
    sightings = i.sightings
    if sightings is None and "inactivity" in kinds and as_of is not None:
        sightings = last_fixes(i.pings, as_of=as_of, timezone=i.timezone)
    operation = i.operation
    if operation is None and "habitual_absence" in kinds and i.licences is not None:
        operation = operation_fixes(i.pings, timezone=i.timezone)
    calls: dict[str, tuple[tuple[Any, ...], dict[str, Any]] | str] = {
        "unlicensed_stand_use": (
            (i.visits, i.pings),
            {
                "fleet": i.fleet,
                "suspensions": i.stand_suspensions,
                "licence_history": None if i.licences is None else ended_licences(i.licences),
            }
            | boarding
            | tz,
        ),
        "queue_jump": (
            ((i.visits, i.pings), {"fleet": i.fleet} | boarding)
            if i.fleet is not None
            and "accessible" in i.fleet
            and i.fleet["accessible"].eq(False).any()
            else "sem frota que diga quais prefixos não são táxis acessíveis (--fleet, coluna "
            "accessible)"
        ),
        "tracking_gap": ((i.pings,), {}),
        "gps_anomaly": ((i.pings,), {}),
        "flag2_misuse": ((i.pings,), tz | {"boundary": i.boundary}),
        "illegal_stand_formation": (
            (i.stops, i.pings, i.stands),
            tz | {"waiting": i.waiting_stops, "allowed_places": i.allowed_places},
        ),
        "longer_route": ((i.trips, i.pings), {"roads": i.roads}),
        "habitual_absence": (
            (
                (i.visits, i.licences, operation),
                {
                    "as_of": as_of,
                    "stands": i.stands,
                    "fleet": i.fleet,
                    "suspensions": i.stand_suspensions,
                    "pings": i.pings,
                    "near_dwells": i.near_dwells,
                }
                | tz,
            )
            if i.licences is not None and as_of is not None
            else "sem frota com licenças (--fleet)"
        ),
        "operating_while_barred": (  # the registry's day: the run's --as-of, never guessed
            ((i.trips, i.fleet), {"pings": i.pings, "as_of": i.as_of} | tz)
            if i.fleet is not None
            else "sem frota (--fleet)"
        ),
        "inactivity": (
            (
                (i.trips, i.fleet),
                {
                    "as_of": as_of,
                    "data_span": i.activity_span,
                    "off_fleet": i.off_fleet,
                    "sightings": sightings,
                }
                | tz,
            )
            if i.fleet is not None and as_of is not None
            else "sem frota (--fleet)"
        ),
        "driver_not_allowed": (
            ((i.pings,), {"drivers": i.drivers, "driver_links": i.driver_links} | tz)
            if i.drivers is not None and i.driver_links is not None
            else "sem cadastro de condutores (--drivers e --driver-links)"
        ),
        "outside_municipality": (
            ((i.trips, i.boundary), {"pings": i.pings})
            if i.boundary is not None
            else "sem limite municipal (--boundary ou --municipality)"
        ),
    }
    found = []
    skipped: dict[str, str] = {}
    for kind in kinds:
        call = calls[kind]
        if isinstance(call, str):
            skipped[kind] = call
            continue
        if progress is not None:
            progress(kind)
        args, kwargs = call
        found.append(_DETECTORS[kind](*args, **kwargs, **dict(thresholds.get(kind, {}))))
    frames = [f for f in found if len(f)]
    if not frames:
        return empty_findings(), skipped
    out = pd.concat(frames, ignore_index=True)
    out = gpd.GeoDataFrame(out, geometry="geometry", crs=4326)
    return out.sort_values(["kind", "started_at", "finding_id"]).reset_index(drop=True), skipped
