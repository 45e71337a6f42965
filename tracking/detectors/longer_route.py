"""``longer_route``: a passenger trip driven much longer than the reference route.

Law: Porto Alegre, Decreto de 23/12/2019, art. 58 XIII (and XVI, per Decreto 21.100/2021), grave —
multa e devolução de valores, pontuação do condutor; Pinto Bandeira, Lei 169/2015, art. 25 III,
grave, "salvo com autorização do usuário". A finding is a proposal for human review: the passenger
may have asked for the route, and the network may lack a closure.

Definitions (each appears in the finding's ``details``):

trip
    A meter trip of :func:`tracking.trips.detect_trips` (``source == "meter"``; trips inferred from
    stops carry no passenger and are ignored). ``driven_m`` is the length along its fixes with
    GPS jumps filtered out (:func:`tracking.trips.trip_distances` at ``max_speed_kmh``, 150
    km/h: jump fixes and displaced stretches dropped, impossible steps skipped), so bad data
    can only shorten it;
    ``straight_m`` the straight line between its pickup and drop-off.
waypoints
    Stops of the trip (:func:`tracking.stops.stop_spans`: at least ``waypoint_min_stop_s`` within
    ``waypoint_diameter_m``, the fixes of a displaced stretch of GPS left out) that touch
    neither its first nor its last fix: places where the passenger had the taxi wait. The
    reference passes through them, in order (the passenger chose them: "salvo com autorização
    do usuário").
errand stops
    Shorter stops found the same way, of at least ``errand_min_stop_s`` (30 s): a passenger's
    errand (an ATM, a companion set down) or a red light, which nothing tells apart. A round
    trip is judged through them (see the guards); any other finding that the same test through
    them, in order, would not accuse (on the network: the shortest path through them and the
    excess over it and the fastest path; with peers: below) is listed for review only, its
    confidence times :data:`ERRAND_CONFIDENCE_FACTOR`, its stops in ``errand_stops`` and the
    reference through them in a note (a loop around a 45 s stop at its far corner, real Porto trip
    ``20000201-20130701T022615Z``, was proposed at 0.93).
on a road network (``method = "road_network"``)
    The trip's fixes are map-matched (:func:`geo.matching.match_tracks`: a hidden Markov model
    on the network, one-way streets honoured; a move the network cannot explain counts as the
    straight move, never as an invented loop). ``matched_m`` is the length of the matched path:
    unlike ``driven_m`` it does not shrink when fixes are sparse (30 s chords cut every
    corner). ``reference_m`` is the shortest path on ``roads`` from the matched pickup through
    the waypoints to the matched drop-off; ``ratio = matched_m / reference_m`` must reach
    ``min_ratio`` and the excess ``min_excess_m``, counted also from the fastest path where it
    is the longer (``fastest_route_m``, below: a road a driver may fairly take is no detour);
    ``excess_km`` is the matched length less the longer of the two. The match must be sound:
    at least ``MIN_MATCHED_SHARE`` of the fixes near a road and at most
    ``MAX_UNEXPLAINED_SHARE`` of the length in unexplained moves; pickup, drop-off and
    waypoints farther than ``max_snap_m`` from every road are outside the network.
fastest route (a longer road may be the right one)
    Drivers rightly prefer a faster, longer road (a ring road, a motorway). The fastest path
    through the same points (urban travel speeds per road class,
    :data:`geo.roads.DEFAULT_SPEEDS_KMH`) is computed, and the matched path's free-flow time
    too: ``time_ratio = matched_route_s / fastest_route_s`` must also reach ``min_time_ratio``
    — a route that is long but as fast as the fastest is a driver's fair choice. A trip that
    lasted at most ``FASTEST_TIME_FACTOR`` (1.0) times the fastest path's free-flow time cost
    the passenger no time and is never accused. The score the detector thresholds is then
    ``min(ratio, time_ratio)``.
reference from peer trips (``method = "peer_trips"``)
    Without a network (or for a trip outside it): past trips of *other* vehicles between the
    same H3 cells (resolution ``h3_resolution``) of pickup and drop-off, that ended before this
    one started, the ``max_peer_trips`` most recent, at least ``min_peer_trips``. Peers are
    compared by their *straight-line ratio* (``driven_m / straight_m`` of each peer, between its
    own ends), so that peers whose ends lie closer together in the same cells do not shorten
    the reference: ``reference_m = q × straight_m``, ``q`` the :data:`PEER_QUANTILE` (upper
    quartile) of the peers' straight-line ratios: the trip must be ``min_ratio`` times as long
    as all but the longest quarter of its peers drove. Cells of ~0.7 km² hold ends on either
    side of a river, a railway or a one-way street, so peers' routes between them can differ by
    2× (on the real Porto trips the median peer accused trips the road network judged fair:
    ``bench/README.md``); a route a quarter of the peers drove is a way between these places,
    not a detour. A trip driven within ``MIN_STRAIGHT_RATIO`` (1.2) times its own straight line
    is never accused. ``time_ratio`` is the trip's duration over the peers' median pace
    (seconds per metre of their own straight line) times ``straight_m``; below
    ``min_time_ratio`` the trip took no longer than its peers (a longer road that is faster, as
    on a network): no finding. "Past" makes the batch and live results the same. Waypoint
    trips have no peer reference (their route is the passenger's). A trip with errand stops
    that the same test, on the straight line from the pickup through them to the drop-off
    instead of ``straight_m``, would not accuse (the stops would explain the excess; a stop
    where the straight route passes adds nothing) is listed for review only: its confidence
    is lowered below 0.5, its stops are given as ``errand_stops`` and a note says so. Such
    detours are not dropped: a red light on a detour looks the same as an errand (on the
    simulated fleets, routes_sim and ``bench_fleet_eval``, about half the detours).
consensus (reference probably wrong)
    With a network, if at least ``min_peer_trips`` past peer trips of other vehicles exist and
    their median ``ratio`` also reaches ``min_ratio``, everyone drives longer than the network
    says between these places: a closure, works or a turn ban that the network lacks. No
    finding.
pattern
    ``"loop"``: the track comes back within ``loop_radius_m`` of a place it passed after driving
    at least ``min_excess_m`` (circling), read on the fixes outside displaced stretches of GPS
    (a jump out and back is no loop); ``"corridor"``: no such return — the detour follows a
    consistent alternative route, which is also what a closed road that the network lacks looks
    like, so ``reference_may_be_wrong`` is set and the confidence lowered.
guards (never accuse on bad data)
    No finding when ``reference_m < min_reference_m``, when the pickup or the drop-off fix is a GPS
    jump (its step to the neighbouring fix implies more than ``max_speed_kmh``), with fewer than 3
    fixes, or when two consecutive fixes lie more than :data:`HIDDEN_RIDE_GAP_S` apart, both
    reporting the vehicle standing (below ``MOVING_KMH``) at places more than
    ``waypoint_diameter_m`` apart: it drove unseen from one stop to another, where the meter may
    have gone free and on again (a drop-off, a new boarding: two rides back to back read as one ride
    with a loop, from a tracker reporting once a minute). From a tracker that reports no speeds and,
    along the trip, a fix less often than every :data:`HIDDEN_RIDE_GAP_S` (the median interval), a
    fix without a speed may have been standing: such a trip with a gap between places that far apart
    is not judged (at a fix a minute without speeds, two rides back to back of a simulated fleet
    were accused at confidence 0.81). With fixes more often, a gap is lost fixes, rarely a drop-off
    and a boarding both unseen. Nor for a round trip: the drop-off within :data:`ROUND_TRIP_M` of
    the pickup, and no waypoint farther than that from both (the ride asked for is unknown). A
    round trip with such a waypoint is judged through it and through every errand stop (in
    time order): the place where it turned back may be a shorter stop (a passenger set down
    in 70 s, real Porto trip ``20000112-20130701T002503Z``), which the reference must pass.

Confidence: ``0.6 + 0.35·min(1, (s − min_ratio)/(min_ratio − 1))`` where ``s`` is the score
(``min(ratio, time_ratio)``), times 0.85 for a ``corridor`` pattern, 0.85 for a peer reference,
:data:`ERRAND_CONFIDENCE_FACTOR` (0.5: below 0.5) when errand stops would explain it,
0.9 if GPS jumps were filtered out of the trip or the match had jumps or breaks, 0.9 if an end
was snapped farther than ``max_snap_m / 2``; clipped to [0.05, 0.95]. On the two evaluation
sets (``bench/README.md``) the precision of findings rises with the score (0.82 at 1.4–1.5, 0.97
and more above 1.5) and does not differ between loops and corridors: the factors only rank what
the evidence leaves less certain (a closure the network lacks, a reference from peers, GPS
jumps).

Live (:func:`advance_longer_route`, :data:`KERNEL`): the rule is :func:`detect_longer_route`,
run by :func:`tracking.detectors.kernel.advance` over each vehicle's kept fixes plus the new
ones, on the meter trips :func:`tracking.trips.detect_trips` finds in them (``max_gap_s``, as
``pontual analyze``'s ``trip_max_gap_s``). :func:`open_from` keeps, per vehicle, the fixes from
the start of its open meter run (its latest fix is occupied: a later fix may extend the trip),
or from its first trip that started after the latest fix of another vehicle's open run that a
fix of the newest instant could still extend (less than ``max_gap_s`` before it): until that
run ends, it could be a peer that ended before this trip started. The kept fixes are thus the
open run and at most ``max_gap_s`` of fixes before the newest fix. The trips that leave the kept
fixes are returned as :data:`PEER_COLUMNS` rows; the live engine stores them per pair of cells
and vehicle (the ``max_peer_trips`` latest, :func:`keep_peer_trips`: bounded by the fleet and
its cell pairs) and gives them back as ``peer_trips`` to later trips between the same cells.

Exact (tests cut inputs anywhere, fix by fix included): when the whole fleet's fixes arrive in
time order and are advanced together, every finding is the batch's to the byte. A trip is then
judged once closed, on all its fixes, with the same network match, reference and fastest path
(they depend on the trip's own fixes only), and with the peers the batch sees: every trip of
another vehicle that ended before it started is, by then, closed and stored, or in the fixes
kept. Not exact otherwise, and it cannot be without waiting without bound: the batch sees peers
from the live engine's future. A trip of another vehicle that ended before this one started but
whose fixes reach the server later (a device reporting late), or whose run is still open in the
kept fixes of another call (the live engine advances each call's vehicles only), is not among
the live peers; a run of another vehicle silent for more than ``max_gap_s`` is taken as ended,
which a late fix of it can contradict; a vehicle closing more than ``max_peer_trips`` trips
between the same cells while another's trip is open can push out a peer. Then the peer
reference and the consensus (hence the verdict) and the ``peer_trips`` evidence can differ from
the batch's; on a network, the match and the ratios cannot.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.crs import haversine_m
from geo.h3 import cells_to_strings, check_resolution, latlng_to_cells
from geo.matching import match_tracks
from geo.roads import (
    DEFAULT_MAX_SNAP_M,
    RoadGraph,
    path_line,
    path_pieces_sum,
    routes_between,
    shortest_path_lengths,
)
from tracking import frames as fr
from tracking.arrays import NS, in_track_order, iso_utc, vehicle_codes
from tracking.detectors._errors import DetectorThresholdError
from tracking.detectors._evidence import (
    MOVING_KMH,
    check_threshold,
    clip_confidence,
    last_at_or_before,
    require_columns,
    utc_ns,
)
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.kernel import State, TrackKernel, advance
from tracking.stops import stop_spans
from tracking.trips import assign_trip_ids, detect_trips, trip_distances
from tracking.validate import displaced_fixes

KIND = "longer_route"

DEFAULT_MIN_RATIO = 1.4
"""Driven length over the reference from which a trip is a longer route (POA art. 58 XIII)."""
DEFAULT_MIN_EXCESS_M = 1000.0
"""Smallest excess over the reference worth a proposal (a block or two is routine)."""
DEFAULT_MIN_REFERENCE_M = 500.0
"""Shorter references are not judged (ratios of short trips are noise)."""
DEFAULT_H3_RESOLUTION = 8
"""Resolution of the pickup/drop-off cells of the peer reference (cells of ~0.7 km²)."""
DEFAULT_MIN_PEER_TRIPS = 5
DEFAULT_MAX_PEER_TRIPS = 50
DEFAULT_WAYPOINT_MIN_STOP_S = 90.0
"""A wait this long inside a trip is a passenger's stop (longer than a red light)."""
DEFAULT_WAYPOINT_DIAMETER_M = 50.0
DEFAULT_ERRAND_MIN_STOP_S = 30.0
"""A shorter wait inside a trip, at least this long, may be a passenger's errand (an ATM, a
companion set down) as well as a red light: the route may be the passenger's."""
DEFAULT_LOOP_RADIUS_M = 75.0
DEFAULT_MAX_SPEED_KMH = 150.0
"""Implied speed of a GPS jump: such steps add nothing to ``driven_m`` (a 1 km spike in 15 s is
240 km/h) and such an end gives no reference."""
PEER_QUANTILE = 0.75
"""Without a network: the quantile of the peers' straight-line ratios that is the reference (a
route a quarter of the peers drove is no detour; the median accused real trips that the road
network judged fair)."""
DEFAULT_MIN_TIME_RATIO = 1.4
"""On a road network, the matched route's free-flow time over the fastest path's from which a
trip is a longer route: a longer road that is faster (a ring road, a motorway) is no detour.
With peers, the trip's duration over the one its peers' median pace gives."""
FASTEST_TIME_FACTOR = 1.0
"""A trip lasting at most this times the fastest path's free-flow time lost the passenger no
time (a faster road was taken): never accused."""
MIN_STRAIGHT_RATIO = 1.2
"""Without a network: a trip driven within this times the straight line between its own pickup
and drop-off is never accused, whatever its peers."""
SCREEN_FACTOR = 1.4
"""The matched length may exceed the length along the fixes by up to this factor (sparse fixes
cut corners): a trip shorter along its fixes than ``min_ratio / SCREEN_FACTOR`` times the
shortest path between its raw ends cannot be accused and is not matched."""
MIN_MATCHED_SHARE = 0.8
"""At least this share of a trip's fixes must lie within reach of a road for the match to count."""
HIDDEN_RIDE_GAP_S = 45.0
"""Two consecutive fixes of a trip farther apart than this, both standing at two places, may hide
a drop-off and a new boarding: two rides back to back read as one."""
ROUND_TRIP_M = 500.0
"""A trip whose drop-off lies closer than this to its pickup, without a waypoint farther than
this from both, went somewhere and came back: where the passenger asked to go is unknown (no one
hires a taxi to be set down a walk from where they boarded), so the shortest path between its
ends is no reference: never accused. With such a waypoint, the reference passes through it and
every errand stop."""
END_WINDOW_S = 120.0
"""An impossible step within this of a trip's first or last fix leaves its pickup or drop-off
unknown (the receiver's stale fixes of the last ride, a jump): the trip is not judged (real
Porto trip 20000051, 1 Jul 2013 09:43: three fixes 1.8 km from the stand it boarded at)."""
ERRAND_CONFIDENCE_FACTOR = 0.5
"""A finding whose shorter stops, taken as the passenger's errands, would explain its excess is
only listed for review: its confidence times this is below 0.5 (a red light on a detour looks
the same, so such detours are not dropped)."""
MAX_UNEXPLAINED_SHARE = 0.2
"""At most this share of the matched length may be straight moves the network could not explain
(breaks, jumps: missing streets, GPS excursions)."""
ROUTE_GUARDS = {
    "fastest_time_factor": FASTEST_TIME_FACTOR,
    "min_straight_line_ratio": MIN_STRAIGHT_RATIO,
    "peer_quantile": PEER_QUANTILE,
    "min_matched_share": MIN_MATCHED_SHARE,
    "max_unexplained_share": MAX_UNEXPLAINED_SHARE,
    "hidden_ride_gap_s": HIDDEN_RIDE_GAP_S,
    "round_trip_m": ROUND_TRIP_M,
}
"""The fixed guards, reported in each finding's ``thresholds``."""
DEFAULT_MAX_GAP_S = 300.0
"""Kernel only: a silence longer than this ends a trip (``detect_trips``' ``max_gap_s``, as
``pontual analyze``'s ``trip_max_gap_s``)."""
PEER_COLUMNS = (
    "trip_id",
    "vehicle_id",
    "started_ns",
    "ended_ns",
    "cells",
    "driven_m",
    "straight_m",
    "ratio",
)
"""A judged meter trip as a peer of later ones (:func:`advance_longer_route`'s closed trips,
:func:`detect_longer_route`'s ``peer_trips``): its id and vehicle, start and end (epoch ns),
``cells`` (``"<pickup cell>-<drop-off cell>"``, H3 in hexadecimal), ``driven_m``,
``straight_m`` and the network ``ratio`` (NaN when not matched, 0 when too short to be
accused)."""
PeerTrips = pd.DataFrame | Callable[[Sequence[str]], pd.DataFrame]
"""Past trips of the fleet (:data:`PEER_COLUMNS`), or a function giving those between the given
``cells``."""

_TRIP_COLUMNS = (
    fr.VEHICLE_ID,
    "trip_id",
    "started_at",
    "ended_at",
    "pickup_lat",
    "pickup_lon",
    "dropoff_lat",
    "dropoff_lon",
    "distance_m",
)
NOTE_REVIEW = (
    "Cabe revisão humana: o passageiro pode ter pedido o trajeto (POA art. 58 XIII; "
    "PB art. 25 III, 'salvo com autorização do usuário')."
)
NOTE_ERRANDS = (
    "O veículo ficou parado ao menos {s:.0f} s em {n} ponto(s) no caminho, que podem ser "
    "pedidos do passageiro (caixa eletrônico, acompanhante deixado) ou semáforos. "
)
NOTE_ERRANDS_VIA = (
    "Passando por eles, a referência seria {km} km e o trajeto não seria mais longo: o achado "
    "fica só para revisão, sem proposta de autuação."
)
NOTE_ERRANDS_NO_ROUTE = (
    "A malha viária não dá uma rota passando por eles, e eles podem explicar o trajeto: o achado "
    "fica só para revisão, sem proposta de autuação."
)
NOTE_PEERS = "Referência por corridas semelhantes (sem malha viária). "
NOTE_CORRIDOR = (
    "O desvio segue um corredor alternativo contínuo, sem voltas: compatível com via "
    "interditada ou obra que a malha viária não registra. A referência pode estar errada; "
    "verificar antes de autuar."
)


@dataclass(frozen=True)
class _Params:
    min_ratio: float
    min_excess_m: float
    min_reference_m: float
    max_snap_m: float
    h3_resolution: int
    min_peer_trips: int
    max_peer_trips: int
    waypoint_min_stop_s: float
    waypoint_diameter_m: float
    errand_min_stop_s: float
    loop_radius_m: float
    max_speed_kmh: float
    min_time_ratio: float

    def thresholds(self) -> dict[str, Any]:
        return {
            "min_ratio": self.min_ratio,
            "min_excess_m": self.min_excess_m,
            "min_reference_m": self.min_reference_m,
            "max_snap_m": self.max_snap_m,
            "h3_resolution": self.h3_resolution,
            "min_peer_trips": self.min_peer_trips,
            "max_peer_trips": self.max_peer_trips,
            "waypoint_min_stop_s": self.waypoint_min_stop_s,
            "waypoint_diameter_m": self.waypoint_diameter_m,
            "errand_min_stop_s": self.errand_min_stop_s,
            "loop_radius_m": self.loop_radius_m,
            "max_speed_kmh": self.max_speed_kmh,
            "min_time_ratio": self.min_time_ratio,
        }


def _params(**kw: Any) -> _Params:
    if not (isinstance(kw["min_ratio"], int | float) and kw["min_ratio"] > 1):
        msg = f"'min_ratio' foi {kw['min_ratio']!r}; esperado um número > 1"
        raise DetectorThresholdError(msg)
    check_threshold("min_ratio", kw["min_ratio"], positive=True)
    if not (isinstance(kw["min_time_ratio"], int | float) and kw["min_time_ratio"] >= 1):
        msg = f"'min_time_ratio' foi {kw['min_time_ratio']!r}; esperado um número >= 1"
        raise DetectorThresholdError(msg)
    for name in ("min_excess_m", "min_reference_m"):
        check_threshold(name, kw[name], unit="metros")
    for name in ("max_snap_m", "waypoint_diameter_m", "loop_radius_m"):
        check_threshold(name, kw[name], positive=True, unit="metros")
    for name in ("waypoint_min_stop_s", "errand_min_stop_s"):
        check_threshold(name, kw[name], positive=True, unit="s")
    check_threshold("max_speed_kmh", kw["max_speed_kmh"], positive=True, unit="km/h")
    for name in ("min_peer_trips", "max_peer_trips"):
        value = kw[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            msg = f"'{name}' foi {value!r}; esperado um inteiro >= 1"
            raise DetectorThresholdError(msg)
    if kw["max_peer_trips"] < kw["min_peer_trips"]:
        msg = (
            f"'max_peer_trips' ({kw['max_peer_trips']}) menor que 'min_peer_trips' "
            f"({kw['min_peer_trips']})"
        )
        raise DetectorThresholdError(msg)
    try:
        check_resolution(kw["h3_resolution"])
    except ValueError as exc:
        raise DetectorThresholdError(str(exc)) from exc
    return _Params(**kw)


# ----------------------------------------------------------------------------------- batch


def detect_longer_route(
    trips: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    roads: RoadGraph | None = None,
    min_ratio: float = DEFAULT_MIN_RATIO,
    min_time_ratio: float = DEFAULT_MIN_TIME_RATIO,
    min_excess_m: float = DEFAULT_MIN_EXCESS_M,
    min_reference_m: float = DEFAULT_MIN_REFERENCE_M,
    max_snap_m: float = DEFAULT_MAX_SNAP_M,
    h3_resolution: int = DEFAULT_H3_RESOLUTION,
    min_peer_trips: int = DEFAULT_MIN_PEER_TRIPS,
    max_peer_trips: int = DEFAULT_MAX_PEER_TRIPS,
    waypoint_min_stop_s: float = DEFAULT_WAYPOINT_MIN_STOP_S,
    waypoint_diameter_m: float = DEFAULT_WAYPOINT_DIAMETER_M,
    errand_min_stop_s: float = DEFAULT_ERRAND_MIN_STOP_S,
    loop_radius_m: float = DEFAULT_LOOP_RADIUS_M,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
    peer_trips: PeerTrips | None = None,
) -> gpd.GeoDataFrame:
    """Find passenger trips driven much longer than the reference route (see the module doc).

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips of :func:`tracking.trips.detect_trips` (``TRIP_COLUMNS``; ``source``,
        ``n_dropped_fixes`` and ``n_skipped_steps`` used when present).
    pings : pandas.DataFrame
        The valid fixes the trips were detected on (evidence, waypoints, guards).
    roads : geo.roads.RoadGraph, optional
        Road network (:func:`geo.roads.build_road_graph`); without it, peer trips only.
    min_ratio : float, default 1.4
        Driven length over the reference from which a trip is a longer route (POA art. 58
        XIII / XVI; PB art. 25 III).
    min_time_ratio : float, default 1.4
        On a network, the matched route's free-flow time over the fastest path's from which
        a trip is a longer route (a faster road is no detour); with peers, its duration over
        the one the peers' pace gives.
    min_excess_m : float, default 1000.0
        Smallest excess (driven minus reference), metres.
    min_reference_m : float, default 500.0
        References shorter than this are not judged.
    max_snap_m : float, default 150.0
        Farther from every road than this is outside the network.
    h3_resolution : int, default 8
        Resolution of the cells that define peer trips.
    min_peer_trips, max_peer_trips : int, default 5 and 50
        Fewest past peer trips for a peer reference or a consensus, and how many of the most
        recent ones are used.
    waypoint_min_stop_s, waypoint_diameter_m : float, default 90.0 and 50.0
        A stop inside the trip at least this long within this extent is a waypoint.
    errand_min_stop_s : float, default 30.0
        A shorter stop inside the trip (same extent) at least this long may be a passenger's
        errand: a round trip with a waypoint is judged through all of them, and a detour they
        would explain is, with peers, only listed for review (confidence below 0.5).
    loop_radius_m : float, default 75.0
        Coming back within this distance of an earlier fix, after driving ``min_excess_m``, is
        a loop.
    max_speed_kmh : float, default 150.0
        Implied speed of a GPS jump: jumps are filtered out of ``driven_m``, and a pickup or
        drop-off that is one gives no finding.
    peer_trips : pandas.DataFrame or callable, optional
        Trips of the fleet judged before, not among ``trips`` (:data:`PEER_COLUMNS`), that may
        be peers of these; or a function taking a list of ``cells`` and returning those between
        them. Without it the peers are among ``trips`` only (a whole input, as in a batch).

    Returns
    -------
    geopandas.GeoDataFrame
        Findings (:mod:`tracking.detectors.findings`), one per accused trip; geometry is the
        driven LineString; ``stand_id`` None.

    Raises
    ------
    DetectorInputError
        If a required column is missing or timestamps are naive.
    DetectorThresholdError
        If a threshold is out of range.
    """
    p = _params(
        min_ratio=min_ratio,
        min_time_ratio=min_time_ratio,
        min_excess_m=min_excess_m,
        min_reference_m=min_reference_m,
        max_snap_m=max_snap_m,
        h3_resolution=h3_resolution,
        min_peer_trips=min_peer_trips,
        max_peer_trips=max_peer_trips,
        waypoint_min_stop_s=waypoint_min_stop_s,
        waypoint_diameter_m=waypoint_diameter_m,
        errand_min_stop_s=errand_min_stop_s,
        loop_radius_m=loop_radius_m,
        max_speed_kmh=max_speed_kmh,
    )
    return _judge(trips, pings, roads, p, peer_trips, with_peers=False)[0]


_DEFAULTS: dict[str, Any] = {
    name: q.default
    for name, q in inspect.signature(detect_longer_route).parameters.items()
    if q.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("roads", "peer_trips")
}
"""The thresholds of :func:`detect_longer_route` and their defaults."""


def _judge(
    trips: pd.DataFrame,
    pings: pd.DataFrame,
    roads: RoadGraph | None,
    p: _Params,
    peer_trips: PeerTrips | None,
    *,
    with_peers: bool,
) -> tuple[gpd.GeoDataFrame, pd.DataFrame]:
    """Run the rule: findings and (``with_peers``) every meter trip as a peer (PEER_COLUMNS)."""
    table, fixes = _batch_inputs(trips, pings)
    if not len(table["trip_id"]):
        return empty_findings(), _no_peer_trips()
    _redrive(table, fixes, p)
    evaluated = _evaluate(table, fixes, roads, p, extra=peer_trips, prune=True)
    found = _findings(evaluated, table, fixes, roads, p)
    return found, _as_peers(table, evaluated) if with_peers else _no_peer_trips()


def route_ratios(
    trips: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    roads: RoadGraph | None = None,
    max_snap_m: float = DEFAULT_MAX_SNAP_M,
    h3_resolution: int = DEFAULT_H3_RESOLUTION,
    min_peer_trips: int = DEFAULT_MIN_PEER_TRIPS,
    max_peer_trips: int = DEFAULT_MAX_PEER_TRIPS,
    waypoint_min_stop_s: float = DEFAULT_WAYPOINT_MIN_STOP_S,
    waypoint_diameter_m: float = DEFAULT_WAYPOINT_DIAMETER_M,
    errand_min_stop_s: float = DEFAULT_ERRAND_MIN_STOP_S,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
) -> pd.DataFrame:
    """Every meter trip's driven length against its reference, without thresholds (for ROC).

    Parameters
    ----------
    trips, pings, roads, max_snap_m, h3_resolution, min_peer_trips, max_peer_trips,
    waypoint_min_stop_s, waypoint_diameter_m, errand_min_stop_s, max_speed_kmh
        As in :func:`detect_longer_route`.

    Returns
    -------
    pandas.DataFrame
        One row per meter trip: ``trip_id``, ``vehicle_id``, ``method`` (``road_network``,
        ``peer_trips`` or None), ``driven_m`` (along the fixes), ``matched_m`` (the map-matched
        route), ``straight_m``, ``reference_m``, ``ratio`` (``matched_m`` or, with peers,
        ``driven_m`` over ``reference_m``), ``time_ratio`` (matched route's free-flow time
        over the fastest path's or, with peers, the duration over the peers' pace's),
        ``n_waypoints``, ``peer_count``, ``peer_median_ratio``,
        ``fastest_route_m``, ``fastest_route_s``, ``reasonable_route`` (True when the trip was
        as quick as the fastest path: never accused) and ``guarded_ratio`` (the score the
        detector thresholds: the smaller of ``ratio`` and ``time_ratio``, at most 1 on a
        reasonable route).
    """
    p = _params(
        min_ratio=DEFAULT_MIN_RATIO,
        min_time_ratio=DEFAULT_MIN_TIME_RATIO,
        min_excess_m=DEFAULT_MIN_EXCESS_M,
        min_reference_m=DEFAULT_MIN_REFERENCE_M,
        max_snap_m=max_snap_m,
        h3_resolution=h3_resolution,
        min_peer_trips=min_peer_trips,
        max_peer_trips=max_peer_trips,
        waypoint_min_stop_s=waypoint_min_stop_s,
        waypoint_diameter_m=waypoint_diameter_m,
        errand_min_stop_s=errand_min_stop_s,
        loop_radius_m=DEFAULT_LOOP_RADIUS_M,
        max_speed_kmh=max_speed_kmh,
    )
    table, fixes = _batch_inputs(trips, pings)
    _redrive(table, fixes, p)
    ev = _evaluate(table, fixes, roads, p, extra=None, prune=False)
    mr = ev["matched"]
    return pd.DataFrame(
        {
            "trip_id": table["trip_id"],
            "vehicle_id": table["vehicle_id"],
            "method": ev["method"],
            "driven_m": table["driven_m"],
            "matched_m": mr["matched_m"],
            "straight_m": ev["straight_m"],
            "reference_m": ev["reference_m"],
            "ratio": ev["ratio"],
            "time_ratio": ev["time_ratio"],
            "n_waypoints": ev["n_waypoints"],
            "peer_count": ev["peer_count"],
            "peer_median_ratio": ev["peer_ratio"],
            "fastest_route_m": mr["fastest_m"],
            "fastest_route_s": mr["fastest_s"],
            "reasonable_route": ev["quick"],
            "guarded_ratio": ev["score"],
        }
    )


def _batch_inputs(
    trips: pd.DataFrame, pings: pd.DataFrame
) -> tuple[dict[str, NDArray[Any]], dict[str, NDArray[Any]]]:
    """Trip table and trip fixes (sorted by trip, time) as arrays."""
    require_columns(trips, _TRIP_COLUMNS, what="viagens")
    require_columns(pings, (fr.VEHICLE_ID, fr.TIMESTAMP, fr.LAT, fr.LON), what="pings")
    if "source" in trips.columns:
        trips = trips.loc[(trips["source"].astype("str") == "meter").to_numpy()]
    trips = trips.reset_index(drop=True)
    started = utc_ns(trips["started_at"], column="started_at", what="viagens")
    ended = utc_ns(trips["ended_at"], column="ended_at", what="viagens")
    utc_ns(pings[fr.TIMESTAMP], column="timestamp", what="pings")
    n = len(trips)

    def helper(name: str) -> NDArray[np.int64]:
        if name in trips.columns:
            return pd.to_numeric(trips[name]).fillna(0).to_numpy(dtype=np.int64)
        return np.zeros(n, dtype=np.int64)

    table: dict[str, NDArray[Any]] = {
        "trip_id": trips["trip_id"].astype("str").to_numpy(dtype=object),
        "vehicle_id": trips[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object),
        "started_ns": started,
        "ended_ns": ended,
        "pickup_lat": trips["pickup_lat"].to_numpy(dtype=np.float64),
        "pickup_lon": trips["pickup_lon"].to_numpy(dtype=np.float64),
        "dropoff_lat": trips["dropoff_lat"].to_numpy(dtype=np.float64),
        "dropoff_lon": trips["dropoff_lon"].to_numpy(dtype=np.float64),
        "driven_m": trips["distance_m"].to_numpy(dtype=np.float64),
        "n_jumps": helper("n_dropped_fixes") + helper("n_skipped_steps"),
        "n_dropped": helper("n_dropped_fixes"),
        "n_skipped": helper("n_skipped_steps"),
    }
    if n == 0:
        empty: dict[str, NDArray[Any]] = {
            "trip": np.zeros(0, np.int64),
            "ts_ns": np.zeros(0, np.int64),
            "lat": np.zeros(0),
            "lon": np.zeros(0),
            "kmh": np.zeros(0),
            "row": np.zeros(0, np.int64),
        }
        return table, empty
    fast = _sorted_trip_fixes(table, pings)
    if fast is not None:
        return table, fast
    vehicles = set(table["vehicle_id"].tolist())
    scoped = pings.loc[pings[fr.VEHICLE_ID].astype("str").isin(vehicles).to_numpy()]
    trip_of = assign_trip_ids(scoped, trips)
    pos = pd.Series(np.arange(n), index=pd.Index(table["trip_id"]))
    inside = trip_of.notna().to_numpy()
    sel = scoped.loc[inside]
    trip_idx = pos.reindex(trip_of[inside].to_numpy()).to_numpy(dtype=np.int64)
    ts = utc_ns(sel[fr.TIMESTAMP], column="timestamp", what="pings")
    order = np.lexsort((ts, trip_idx))
    rows = (
        pd.to_numeric(sel[fr.ROW]).fillna(-1).to_numpy(dtype=np.int64)
        if fr.ROW in sel.columns
        else np.full(len(sel), -1, dtype=np.int64)
    )
    fixes = {
        "trip": trip_idx[order],
        "ts_ns": ts[order],
        "lat": sel[fr.LAT].to_numpy(dtype=np.float64)[order],
        "lon": sel[fr.LON].to_numpy(dtype=np.float64)[order],
        "kmh": _speeds(sel)[order],
        "row": rows[order],
    }
    return table, fixes


def _sorted_trip_fixes(
    table: dict[str, NDArray[Any]], pings: pd.DataFrame
) -> dict[str, NDArray[Any]] | None:
    """Trip fixes as :func:`_batch_inputs` makes them, for pings in the contract's order.

    The fixes of a trip are then one run of its vehicle's fixes: from its start up to its end
    and before the vehicle's next trip start (:func:`tracking.trips.assign_trip_ids`' rule),
    found by binary search instead of sorting every fix. None when the pings are not sorted
    by (vehicle, time) or an id is null.
    """
    codes, uniques = vehicle_codes(pings[fr.VEHICLE_ID])
    p_ts = utc_ns(pings[fr.TIMESTAMP], column="timestamp", what="pings")
    if len(codes) > 1 and (codes[0] < 0 or not in_track_order(codes, p_ts)):
        return None
    n = len(table["trip_id"])
    vehicle = table["vehicle_id"]
    t_code = pd.Index(uniques).get_indexer(pd.Index(vehicle)).astype(np.int64)
    known = t_code >= 0
    block_lo = np.searchsorted(codes, t_code, side="left").astype(np.int64)
    block_hi = np.searchsorted(codes, t_code, side="right").astype(np.int64) - 1
    start, end = table["started_ns"], table["ended_ns"]
    # The next trip start of the same vehicle (in start order; of equal starts the later trip
    # takes the fixes, as in assign_trip_ids' stable merge).
    by = np.lexsort((np.arange(n), start, t_code))
    next_start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    same = vehicle[by][1:] == vehicle[by][:-1]
    next_start[by[:-1][same]] = start[by[1:][same]]
    before = last_at_or_before(p_ts, block_lo, block_hi, start - 1)
    lo = np.where(before >= 0, before + 1, block_lo)
    hi = np.minimum(
        last_at_or_before(p_ts, block_lo, block_hi, end),
        last_at_or_before(p_ts, block_lo, block_hi, next_start - 1),
    )
    count = np.where(known & (hi >= lo), hi - lo + 1, 0)
    trip = np.repeat(np.arange(n, dtype=np.int64), count)
    pos = np.arange(len(trip), dtype=np.int64) + np.repeat(lo - (np.cumsum(count) - count), count)
    rows = (
        pd.to_numeric(pings[fr.ROW].take(pos)).fillna(-1).to_numpy(dtype=np.int64)
        if fr.ROW in pings.columns
        else np.full(len(pos), -1, dtype=np.int64)
    )
    return {
        "trip": trip,
        "ts_ns": p_ts[pos],
        "lat": pings[fr.LAT].to_numpy(dtype=np.float64)[pos],
        "lon": pings[fr.LON].to_numpy(dtype=np.float64)[pos],
        "kmh": _speeds(pings)[pos],
        "row": rows,
    }


def _two_stops(
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    kmh: NDArray[np.float64],
    at: NDArray[np.intp],
    apart_m: float,
) -> NDArray[np.bool_]:
    """Whether the vehicle moved, unseen, from one stop to another between fix ``at`` and the next.

    Both report standing (below ``MOVING_KMH``; NaN, no speed, is not standing) and they lie
    more than ``apart_m`` apart.
    """
    a, b = at, at + 1
    standing = (kmh[a] < MOVING_KMH) & (kmh[b] < MOVING_KMH)
    return standing & (haversine_m(lat[a], lon[a], lat[b], lon[b]) > apart_m)


def _speeds(pings: pd.DataFrame) -> NDArray[np.float64]:
    """Return the reported speeds (km/h), NaN where unknown."""
    if fr.SPEED_KMH not in pings.columns:
        return np.full(len(pings), np.nan)
    return pd.to_numeric(pings[fr.SPEED_KMH]).to_numpy(dtype=np.float64, na_value=np.nan)


def _redrive(table: dict[str, NDArray[Any]], fixes: dict[str, NDArray[Any]], p: _Params) -> None:
    """Driven length of each trip from its fixes, jumps filtered at ``max_speed_kmh`` (in place).

    The same measure as the live path (:func:`_close_run`); trips without fixes keep their
    ``distance_m``.
    """
    n = len(table["trip_id"])
    first = np.searchsorted(fixes["trip"], np.arange(n), side="left")
    last = np.searchsorted(fixes["trip"], np.arange(n), side="right") - 1
    has = last >= first
    if not has.any():
        return
    driven, dropped, skipped = trip_distances(
        fixes["ts_ns"],
        fixes["lat"],
        fixes["lon"],
        first[has],
        last[has],
        max_speed_kmh=p.max_speed_kmh,
    )
    table["driven_m"] = table["driven_m"].copy()
    table["driven_m"][has] = driven
    for key, value in (("n_dropped", dropped), ("n_skipped", skipped)):
        table[key] = table[key].copy()
        table[key][has] = value
    table["n_jumps"] = table["n_dropped"] + table["n_skipped"]


# -------------------------------------------------------------------------------- kernels


def _on_track(fixes: dict[str, NDArray[Any]], p: _Params) -> NDArray[np.int64]:
    """Positions of the fixes outside displaced stretches of GPS: what waypoints and matching read.

    :func:`tracking.validate.displaced_fixes` at ``max_speed_kmh``.
    """
    ts, lat, lon = fixes["ts_ns"], fixes["lat"], fixes["lon"]
    shown = ~displaced_fixes(fixes["trip"], ts, lat, lon, max_speed_kmh=p.max_speed_kmh)
    return np.flatnonzero(shown)


def _waypoints(
    fixes: dict[str, NDArray[Any]],
    kept: NDArray[np.int64],
    n_trips: int,
    p: _Params,
    *,
    min_stop_s: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Interior stops of at least ``min_stop_s``: (trip, first fix, last fix), in trip/time order.

    Found on the fixes ``kept`` (:func:`_on_track`): a displaced stretch does not split a stop.
    """
    trip = fixes["trip"]
    none = np.zeros(0, dtype=np.int64)
    if len(trip) < 3:
        return none, none, none
    ts, lat, lon = fixes["ts_ns"], fixes["lat"], fixes["lon"]
    first, last = stop_spans(
        trip[kept],
        ts[kept],
        lat[kept],
        lon[kept],
        max_diameter_m=p.waypoint_diameter_m,
        min_duration_s=min_stop_s,
        max_gap_s=None,
    )
    first, last = kept[first], kept[last]
    starts = np.searchsorted(trip, np.arange(n_trips), side="left")
    ends = np.searchsorted(trip, np.arange(n_trips), side="right") - 1
    t = trip[first]
    interior = (first > starts[t]) & (last < ends[t])
    return t[interior], first[interior], last[interior]


def _errand_stops(
    fixes: dict[str, NDArray[Any]],
    kept: NDArray[np.int64],
    n_trips: int,
    p: _Params,
    wanted: NDArray[np.bool_],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Interior stops of at least ``errand_min_stop_s`` of the ``wanted`` trips only."""
    mine = kept[wanted[fixes["trip"][kept]]] if wanted.any() else kept[:0]
    if not len(mine):
        none = np.zeros(0, dtype=np.int64)
        return none, none, none
    return _waypoints(fixes, mine, n_trips, p, min_stop_s=p.errand_min_stop_s)


def _legs(
    table: dict[str, NDArray[Any]],
    wp_trip: NDArray[np.int64],
    w_lat: NDArray[np.float64],
    w_lon: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Legs pickup → waypoints → drop-off: (trip of leg, origins, destinations as [lon, lat]).

    ``w_lat``, ``w_lon``: the waypoints' positions (:func:`_waypoint_points`).
    """
    n = len(table["trip_id"])
    # Points of each trip in order: pickup (key 0), waypoints (1..), drop-off (last).
    pt_trip = np.concatenate((np.arange(n), wp_trip, np.arange(n)))
    pt_key = np.concatenate((np.zeros(n), 1.0 + np.arange(len(wp_trip)), np.full(n, np.inf)))
    pt_lon = np.concatenate((table["pickup_lon"], w_lon, table["dropoff_lon"]))
    pt_lat = np.concatenate((table["pickup_lat"], w_lat, table["dropoff_lat"]))
    order = np.lexsort((pt_key, pt_trip))
    pt_trip, pt_lon, pt_lat = pt_trip[order], pt_lon[order], pt_lat[order]
    same = pt_trip[1:] == pt_trip[:-1]
    leg_trip = pt_trip[:-1][same]
    origins = np.column_stack((pt_lon[:-1][same], pt_lat[:-1][same]))
    dests = np.column_stack((pt_lon[1:][same], pt_lat[1:][same]))
    return leg_trip.astype(np.int64), origins, dests


def _waypoint_points(
    fixes: dict[str, NDArray[Any]], wp_first: NDArray[np.int64], wp_last: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each waypoint's position: the mean latitude and longitude of its fixes."""
    counts = wp_last - wp_first + 1
    which = np.repeat(np.arange(len(wp_first)), counts)
    pos = np.arange(len(which)) - (np.cumsum(counts) - counts)[which] + wp_first[which]
    w_lat = np.bincount(which, weights=fixes["lat"][pos], minlength=len(wp_first)) / counts
    w_lon = np.bincount(which, weights=fixes["lon"][pos], minlength=len(wp_first)) / counts
    return w_lat, w_lon


def _round_trips(
    table: dict[str, NDArray[Any]],
    wp_trip: NDArray[np.int64],
    w_lat: NDArray[np.float64],
    w_lon: NDArray[np.float64],
    straight: NDArray[np.float64],
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Round trips (ending within :data:`ROUND_TRIP_M` of the pickup), and which have a waypoint.

    A waypoint (at ``w_lat``, ``w_lon``) counts when farther than that from both ends: a stop
    by the pickup or the drop-off says not where the ride went. Returns ``(round, explained)``.
    """
    far = (
        haversine_m(table["pickup_lat"][wp_trip], table["pickup_lon"][wp_trip], w_lat, w_lon)
        > ROUND_TRIP_M
    ) & (
        haversine_m(table["dropoff_lat"][wp_trip], table["dropoff_lon"][wp_trip], w_lat, w_lon)
        > ROUND_TRIP_M
    )
    round_trip = straight < ROUND_TRIP_M
    explained = round_trip & (np.bincount(wp_trip[far], minlength=len(straight)) > 0)
    return round_trip, explained


def _via_straight_m(
    table: dict[str, NDArray[Any]],
    stop_trip: NDArray[np.int64],
    s_lat: NDArray[np.float64],
    s_lon: NDArray[np.float64],
    straight: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Straight line from each trip's pickup through its stops (in order) to its drop-off, m."""
    if not len(stop_trip):
        return straight
    leg_trip, origins, dests = _legs(table, stop_trip, s_lat, s_lon)
    legs = haversine_m(origins[:, 1], origins[:, 0], dests[:, 1], dests[:, 0])
    return np.asarray(
        np.bincount(leg_trip, weights=legs, minlength=len(straight)), dtype=np.float64
    )


def _merge_stops(
    *spans: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Merge stops (trip, first fix, last fix) of several sets, in trip/time order."""
    trip, first, last = (np.concatenate([s[k] for s in spans]) for k in range(3))
    order = np.lexsort((first, trip))
    return trip[order], first[order], last[order]


def _network_reference(
    graph: RoadGraph,
    leg_trip: NDArray[np.int64],
    origins: NDArray[np.float64],
    dests: NDArray[np.float64],
    n: int,
    bound: NDArray[np.float64] | None,
    p: _Params,
    *,
    weight: str = "length",
    with_geometry: bool = False,
) -> tuple[
    NDArray[np.float64],
    NDArray[np.bool_],
    NDArray[np.float64],
    list[list[Any]],
    NDArray[np.float64],
]:
    """Per trip: reference length (NaN if none), inside-network flag, max snap, leg lines, time."""
    res = shortest_path_lengths(
        graph,
        origins,
        dests,
        max_snap_m=p.max_snap_m,
        max_length_m=None if bound is None else bound[leg_trip],
        weight="time" if weight == "time" else "length",
        with_geometry=with_geometry,
    )
    status = res["status"].to_numpy(dtype=object)
    outside = np.isin(status, ["origin_outside", "destination_outside"])
    inside = np.bincount(leg_trip, weights=outside, minlength=n) == 0
    length = res["length_m"].to_numpy()
    total = np.bincount(leg_trip, weights=np.nan_to_num(length), minlength=n)
    missing = np.bincount(leg_trip, weights=~np.isfinite(length), minlength=n) > 0
    has_leg = np.bincount(leg_trip, minlength=n) > 0
    total[missing | ~has_leg] = np.nan
    duration = np.bincount(
        leg_trip, weights=np.nan_to_num(res["duration_s"].to_numpy()), minlength=n
    )
    duration[missing | ~has_leg] = np.nan
    inside &= has_leg
    snap = np.fmax(res["origin_snap_m"].to_numpy(), res["destination_snap_m"].to_numpy())
    max_snap = np.full(n, np.nan)
    np.fmax.at(max_snap, leg_trip, snap)
    lines: list[list[Any]] = [[] for _ in range(n)]
    if with_geometry:
        for t, geom in zip(leg_trip.tolist(), res["geometry"].tolist(), strict=True):
            lines[t].append(geom)
    return (
        np.asarray(total, dtype=np.float64),
        np.asarray(inside, dtype=bool),
        max_snap,
        lines,
        np.asarray(duration, dtype=np.float64),
    )


def _peer_stats(
    table: dict[str, NDArray[Any]],
    cells: tuple[NDArray[np.uint64], NDArray[np.uint64]],
    history: dict[str, NDArray[Any]],
    p: _Params,
) -> tuple[
    NDArray[np.int64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    list[list[str]],
]:
    """Per trip, of its past peer trips: count, reference straight-line ratio, pace, ratio; ids.

    The reference straight-line ratio is their :data:`PEER_QUANTILE`; pace and ratio are medians.

    Peers: same (pickup cell, drop-off cell), another vehicle, ended before this trip started;
    the ``max_peer_trips`` most recent. A peer's straight-line ratio is its ``driven_m`` over
    the straight line between its own pickup and drop-off, its pace its duration over that
    line (s/m; NaN for a peer stored without its start): comparing ratios, not lengths, makes
    peers whose ends lie closer together or farther apart in the same cells comparable.
    """
    n = len(table["trip_id"])
    count = np.zeros(n, dtype=np.int64)
    ref_straight = np.full(n, np.nan)
    med_pace = np.full(n, np.nan)
    med_ratio = np.full(n, np.nan)
    ids: list[list[str]] = [[] for _ in range(n)]
    if n == 0 or len(history["trip_id"]) == 0:
        return count, ref_straight, med_pace, med_ratio, ids
    # (origin, destination) pairs as codes: each cell coded, then the pair of codes
    o_code, _ = pd.factorize(np.concatenate((cells[0], history["o_cell"])))
    d_code, d_uniq = pd.factorize(np.concatenate((cells[1], history["d_cell"])))
    codes, uniq = pd.factorize(o_code.astype(np.int64) * len(d_uniq) + d_code)
    q_code, h_code = codes[:n], codes[n:]
    h_sizes = np.bincount(h_code, minlength=len(uniq))
    candidates = np.flatnonzero(h_sizes[q_code] >= p.min_peer_trips)
    if not len(candidates):
        return count, ref_straight, med_pace, med_ratio, ids
    order = np.lexsort((history["ended_ns"], h_code))
    h_sorted = h_code[order]
    with np.errstate(invalid="ignore", divide="ignore"):
        h_straight = history["driven_m"] / history["straight_m"]
        took_s = (history["ended_ns"] - history["started_ns"]) / NS
        h_pace = np.where(took_s > 0, took_s / history["straight_m"], np.nan)  # 0: start unknown
    for i in candidates.tolist():
        lo = np.searchsorted(h_sorted, q_code[i], side="left")
        hi = np.searchsorted(h_sorted, q_code[i], side="right")
        members = order[lo:hi]
        keep = (
            (history["ended_ns"][members] < table["started_ns"][i])
            & (history["vehicle_id"][members] != table["vehicle_id"][i])
            & np.isfinite(h_straight[members])
        )
        members = members[keep][-p.max_peer_trips :]
        if len(members) < p.min_peer_trips:
            continue
        count[i] = len(members)
        ref_straight[i] = float(np.quantile(h_straight[members], PEER_QUANTILE))
        paces = h_pace[members][np.isfinite(h_pace[members])]
        if len(paces):
            med_pace[i] = float(np.median(paces))
        ratios = history["ratio"][members]
        ratios = ratios[np.isfinite(ratios)]
        if len(ratios) >= p.min_peer_trips:
            med_ratio[i] = float(np.median(ratios))
        ids[i] = [str(t) for t in history["trip_id"][members].tolist()]
    return count, ref_straight, med_pace, med_ratio, ids


def _straight_m(table: dict[str, NDArray[Any]]) -> NDArray[np.float64]:
    """Straight line between each trip's pickup and drop-off, metres."""
    return np.asarray(
        haversine_m(
            table["pickup_lat"], table["pickup_lon"], table["dropoff_lat"], table["dropoff_lon"]
        ),
        dtype=np.float64,
    )


def _positions(piece: NDArray[np.int64], fraction: NDArray[np.float64]) -> pd.DataFrame:
    return pd.DataFrame({"piece": piece, "fraction": fraction, "snap_m": np.zeros(len(piece))})


def _matched_legs(
    mr: dict[str, Any],
    fixes: dict[str, NDArray[Any]],
    stops: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
    wanted: NDArray[np.bool_],
) -> tuple[tuple[NDArray[np.int64], pd.DataFrame, pd.DataFrame], NDArray[np.bool_]]:
    """Legs pickup → stops → drop-off between matched positions, for the ``wanted`` trips.

    Points of each trip: its first and last matched fixes (``mr["ends"]``), and at each stop
    the last matched fix up to its end (the fixes of a wait are thinned out: they lie within
    2·sigma of that one). Returns the legs (trip, from, to as positions) and, per trip,
    whether every stop had such a fix (a trip with a stop without one gets no legs).
    """
    trip, o_piece, o_frac, d_piece, d_frac = mr["ends"]
    fix_piece, fix_frac = mr["fix_piece"], mr["fix_frac"]
    n = len(wanted)
    s_trip, _, s_last = stops
    s_pos = np.full(len(s_trip), -1, dtype=np.int64)
    matched_fix = np.flatnonzero(fix_piece >= 0)
    if len(s_trip) and len(matched_fix):
        j = np.searchsorted(matched_fix, s_last, side="right") - 1
        cand = matched_fix[np.maximum(j, 0)]
        ok = (j >= 0) & (fixes["trip"][cand] == s_trip)
        s_pos = np.where(ok, cand, -1)
    ok_stops = np.bincount(s_trip[s_pos < 0], minlength=n) == 0
    found = s_pos >= 0
    pts_trip = np.concatenate((trip, s_trip[found], trip))
    key = np.concatenate(
        (np.zeros(len(trip)), 1.0 + np.arange(int(found.sum())), np.full(len(trip), np.inf))
    )
    pts_piece = np.concatenate((o_piece, fix_piece[s_pos[found]], d_piece))
    pts_frac = np.concatenate((o_frac, fix_frac[s_pos[found]], d_frac))
    keep = (wanted & ok_stops)[pts_trip]
    order = np.lexsort((key[keep], pts_trip[keep]))
    pts_trip, pts_piece, pts_frac = (a[keep][order] for a in (pts_trip, pts_piece, pts_frac))
    same = pts_trip[1:] == pts_trip[:-1]
    legs = (
        pts_trip[:-1][same],
        _positions(pts_piece[:-1][same], pts_frac[:-1][same]),
        _positions(pts_piece[1:][same], pts_frac[1:][same]),
    )
    return legs, ok_stops


def _matched_routes(
    graph: RoadGraph,
    table: dict[str, NDArray[Any]],
    fixes: dict[str, NDArray[Any]],
    kept: NDArray[np.int64],
    judge: NDArray[np.bool_],
    wp: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
    *,
    bounded: bool,
) -> dict[str, Any]:
    """Map-match the trips to ``judge`` and route between their matched positions.

    Only the fixes ``kept`` are matched (:func:`_on_track`): the match would drive to a
    displaced stretch and back. Per trip (NaN / -1 / False elsewhere): ``matched_m`` and
    ``matched_s`` (length and free-flow time of the matched path), the match's quality
    (``match_ok`` and its counts), ``reference_m`` (shortest path pickup → waypoints →
    drop-off between the matched positions), ``fastest_m``/``fastest_s`` (the fastest path
    through the same points), and the legs (``leg_trip``, ``leg_from``, ``leg_to`` as
    positions) for drawing the routes later. With ``bounded``, searches stop at the matched
    path's own length and time (``beyond``: the reference is longer or the fastest path
    slower, a ratio below 1).
    """
    n = len(table["trip_id"])
    out = _matched_routes_empty(n)
    sel = kept[judge[fixes["trip"][kept]]] if len(kept) else np.zeros(0, np.int64)
    if not len(sel):
        return out
    m = match_tracks(
        graph,
        fixes["trip"][sel],
        fixes["lon"][sel],
        fixes["lat"][sel],
        fixes["ts_ns"][sel],
        with_paths=True,
    )
    tr = m.tracks
    trip = tr["track"].to_numpy(dtype=np.int64)
    out["matched_m"][trip] = tr["matched_m"].to_numpy()
    out["unexplained_m"][trip] = tr["unexplained_m"].to_numpy()
    out["mean_snap_m"][trip] = tr["mean_snap_m"].to_numpy()
    out["n_used"][trip] = tr["n_kept"].to_numpy()
    out["n_matched"][trip] = tr["n_matched"].to_numpy()
    out["n_jumps"][trip] = tr["n_jumps"].to_numpy()
    out["n_breaks"][trip] = tr["n_breaks"].to_numpy()
    for t, path in zip(trip.tolist(), m.paths or [], strict=True):
        out["paths"][t] = path
        out["matched_s"][t] = path_pieces_sum(graph, path, weight="time")
    # Each fix's matched position, in the order of ``fixes``.
    fix_piece = np.full(len(fixes["trip"]), -1, dtype=np.int64)
    fix_frac = np.full(len(fixes["trip"]), np.nan)
    fix_piece[sel], fix_frac[sel] = m.fix_piece, m.fix_fraction
    ends = (
        trip,
        tr["origin_piece"].to_numpy(dtype=np.int64),
        tr["origin_fraction"].to_numpy(),
        tr["destination_piece"].to_numpy(dtype=np.int64),
        tr["destination_fraction"].to_numpy(),
    )
    out["ends"], out["fix_piece"], out["fix_frac"] = ends, fix_piece, fix_frac
    good = np.zeros(n, dtype=bool)
    good[trip] = (
        np.isfinite(tr["matched_m"].to_numpy())
        & (tr["n_matched"].to_numpy() >= MIN_MATCHED_SHARE * tr["n_kept"].to_numpy())
        & (
            tr["unexplained_m"].to_numpy()
            <= MAX_UNEXPLAINED_SHARE * np.nan_to_num(tr["matched_m"].to_numpy())
        )
    )
    (leg_trip, leg_from, leg_to), ok_wp = _matched_legs(out, fixes, wp, good & judge)
    good &= ok_wp & judge
    out["legs"] = (leg_trip, leg_from, leg_to)
    if not len(leg_trip):
        return out
    beyond = np.zeros(n, dtype=bool)
    for weight, length_key, time_key in (
        ("length", "reference_m", None),
        ("time", "fastest_m", "fastest_s"),
    ):
        # Pruning: a reference longer (a fastest path slower) than the matched path itself
        # means a ratio below 1, which accuses nobody: the search stops there.
        limit = out["matched_m" if weight == "length" else "matched_s"][leg_trip] + 1.0
        res = routes_between(
            graph,
            leg_from,
            leg_to,
            weight=weight,  # type: ignore[arg-type]
            max_length_m=limit if bounded and weight == "length" else None,
            max_duration_s=limit if bounded and weight == "time" else None,
        )
        beyond |= (
            np.bincount(
                leg_trip, weights=res["status"].str.startswith("beyond").to_numpy(), minlength=n
            )
            > 0
        )
        length = res["network_m"].to_numpy()
        missing = np.bincount(leg_trip, weights=~np.isfinite(length), minlength=n) > 0
        total = np.bincount(leg_trip, weights=np.nan_to_num(length), minlength=n)
        has = np.bincount(leg_trip, minlength=n) > 0
        out[length_key] = np.where(has & ~missing, total, np.nan)
        if time_key is not None:
            t_total = np.bincount(
                leg_trip, weights=np.nan_to_num(res["duration_s"].to_numpy()), minlength=n
            )
            out[time_key] = np.where(has & ~missing, t_total, np.nan)
    out["beyond"] = beyond
    out["match_ok"] = good & np.isfinite(out["reference_m"]) & np.isfinite(out["fastest_s"])
    return out


def _jump_near_an_end(
    lat: NDArray[np.float64], lon: NDArray[np.float64], ts: NDArray[np.int64], reach: float
) -> bool:
    """Whether a step faster than ``reach`` (m/s) lies within :data:`END_WINDOW_S` of an end."""
    dt_s = np.maximum(np.diff(ts).astype(np.float64) / NS, 1e-9)
    impossible = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]) > reach * dt_s
    window = round(END_WINDOW_S * NS)
    near = (ts[:-1] - ts[0] < window) | (ts[-1] - ts[1:] < window)
    return bool((impossible & near).any())


def _legs_total(routed: pd.DataFrame, leg_trip: NDArray[np.int64], n: int) -> NDArray[np.float64]:
    """Per trip, the length of its legs' paths (NaN when one has none, or it has no leg)."""
    length = routed["network_m"].to_numpy(dtype=np.float64)
    total = np.bincount(leg_trip, weights=np.nan_to_num(length), minlength=n).astype(np.float64)
    lost = np.bincount(leg_trip, weights=~np.isfinite(length), minlength=n) > 0
    total[lost | (np.bincount(leg_trip, minlength=n) == 0)] = np.nan
    return total


def _route_lines(
    graph: RoadGraph,
    legs: tuple[NDArray[np.int64], pd.DataFrame, Any],
    trips: NDArray[np.int64],
    n: int,
) -> tuple[list[list[Any]], list[list[Any]]]:
    """Per trip of ``trips``: the shortest and the fastest paths' lines, leg by leg."""
    ref_lines: list[list[Any]] = [[] for _ in range(n)]
    fast_lines: list[list[Any]] = [[] for _ in range(n)]
    leg_trip, leg_from, leg_to = legs
    sel = np.flatnonzero(np.isin(leg_trip, trips))
    if not len(sel):
        return ref_lines, fast_lines
    for weight, lines in (("length", ref_lines), ("time", fast_lines)):
        res = routes_between(
            graph,
            leg_from.iloc[sel],
            leg_to.iloc[sel],
            weight=weight,  # type: ignore[arg-type]
            with_geometry=True,
        )
        for t, geom in zip(leg_trip[sel].tolist(), res["geometry"].tolist(), strict=True):
            lines[t].append(geom)
    return ref_lines, fast_lines


def _evaluate(
    table: dict[str, NDArray[Any]],
    fixes: dict[str, NDArray[Any]],
    graph: RoadGraph | None,
    p: _Params,
    *,
    extra: PeerTrips | None,
    prune: bool,
) -> dict[str, Any]:
    """Compute references, peers and the accusation test of every trip of ``table``.

    The peers are among the trips of ``table`` and, when given, the ``extra`` past trips.
    """
    n = len(table["trip_id"])
    driven = table["driven_m"]
    straight = _straight_m(table)
    kept = _on_track(fixes, p)
    wp_trip, wp_first, wp_last = _waypoints(fixes, kept, n, p, min_stop_s=p.waypoint_min_stop_s)
    w_lat, w_lon = _waypoint_points(fixes, wp_first, wp_last)
    round_trip, explained = _round_trips(table, wp_trip, w_lat, w_lon, straight)
    # Shorter stops, which may be errands: a round trip that a waypoint explains is judged
    # through all of them (the place it turned back may be one); with peers, see below.
    if explained.any():
        keep_wp = ~explained[wp_trip]
        wp_trip, wp_first, wp_last = _merge_stops(
            (wp_trip[keep_wp], wp_first[keep_wp], wp_last[keep_wp]),
            _errand_stops(fixes, kept, n, p, explained),
        )
        w_lat, w_lon = _waypoint_points(fixes, wp_first, wp_last)
    n_wp = np.bincount(wp_trip, minlength=n).astype(np.int64)
    inside = np.zeros(n, dtype=bool)
    max_snap = np.full(n, np.nan)
    judge = np.zeros(n, dtype=bool)
    if graph is not None and n:
        # A first, cheap reference between the raw ends: trips whose fixes are not even
        # SCREEN_FACTOR / min_ratio times it long cannot be accused and are not matched.
        leg_trip, origins, dests = _legs(table, wp_trip, w_lat, w_lon)
        bound = np.maximum(driven * SCREEN_FACTOR / p.min_ratio, 1.0) if prune else None
        screen, inside, max_snap, _, _ = _network_reference(
            graph, leg_trip, origins, dests, n, bound, p
        )
        judge = inside & np.isfinite(screen) if prune else inside
        mr = _matched_routes(
            graph, table, fixes, kept, judge, (wp_trip, wp_first, wp_last), bounded=prune
        )
    else:
        mr = _matched_routes_empty(n)
    matched_ok = mr["match_ok"]
    with np.errstate(invalid="ignore", divide="ignore"):
        net_ratio = np.where(matched_ok, mr["matched_m"] / mr["reference_m"], np.nan)
        time_ratio = np.where(matched_ok, mr["matched_s"] / mr["fastest_s"], np.nan)
    if prune and graph is not None:
        # Not matched because too short to be accused: a ratio below min_ratio (0 keeps the
        # peers' medians right).
        net_ratio = np.where((inside & ~judge) | mr["beyond"], 0.0, net_ratio)
    o_cell = latlng_to_cells(table["pickup_lat"], table["pickup_lon"], resolution=p.h3_resolution)
    d_cell = latlng_to_cells(table["dropoff_lat"], table["dropoff_lon"], resolution=p.h3_resolution)
    own = {
        "trip_id": table["trip_id"],
        "vehicle_id": table["vehicle_id"],
        "started_ns": table["started_ns"],
        "ended_ns": table["ended_ns"],
        "o_cell": o_cell,
        "d_cell": d_cell,
        "driven_m": driven,
        "straight_m": straight,
        "ratio": net_ratio,
    }
    hist = own if extra is None else _with_peer_trips(own, table["started_ns"], extra)
    peer_count, peer_straight, peer_pace, peer_ratio, peer_ids = _peer_stats(
        table, (o_cell, d_cell), hist, p
    )
    use_peers = ~inside & (n_wp == 0) & np.isfinite(peer_straight)
    method = np.full(n, None, dtype=object)
    method[matched_ok] = "road_network"
    method[use_peers] = "peer_trips"
    peer_reference = peer_straight * straight
    reference = np.where(matched_ok, mr["reference_m"], np.where(use_peers, peer_reference, np.nan))
    measured = np.where(matched_ok, mr["matched_m"], driven)
    consensus = matched_ok & np.isfinite(peer_ratio) & (peer_ratio >= p.min_ratio)
    duration_s = (table["ended_ns"] - table["started_ns"]) / NS
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = measured / reference
        # With peers: the trip's duration over what its peers' pace gives for its straight line.
        time_ratio = np.where(use_peers, duration_s / (peer_pace * straight), time_ratio)
        timed = matched_ok | use_peers
        # The passenger lost no time: the trip was as quick as the fastest path in free flow.
        quick = matched_ok & (duration_s <= FASTEST_TIME_FACTOR * mr["fastest_s"])
        score = np.where(timed, np.fmin(ratio, time_ratio), ratio)
        candidate = (
            np.isfinite(reference)
            & (reference >= p.min_reference_m)
            & (ratio >= p.min_ratio)
            & (measured - reference >= p.min_excess_m)
            # The excess is also counted from the fastest path where it is the longer: a road a
            # driver may fairly take is no detour (real Porto trip 20000329, 1 Jul 2013 05:01).
            & (~matched_ok | (measured - np.fmax(reference, mr["fastest_m"]) >= p.min_excess_m))
            # The match can be longer than the fixes (a wrong street between two of them): the
            # fixes themselves must show the excess too, so the match never makes an accusation.
            & (driven >= p.min_ratio * reference)
            & (driven - reference >= p.min_excess_m)
            & (~timed | (time_ratio >= p.min_time_ratio))
            & (~use_peers | (driven >= MIN_STRAIGHT_RATIO * straight))
            & ~(round_trip & ~explained)
            & ~consensus
            & ~quick
        )
        # With peers, the trip's shorter stops (errands, or red lights) as the passenger's: the
        # same test on the straight line through them, at the peers' ratio and pace. Failing it,
        # the errands may explain the excess (a red light on the way adds nothing).
        er_trip, er_first, er_last = _errand_stops(fixes, kept, n, p, candidate & use_peers)
        via = _via_straight_m(table, er_trip, *_waypoint_points(fixes, er_first, er_last), straight)
        via_reference = peer_straight * via
        errands_explain = (
            candidate
            & use_peers
            & (np.bincount(er_trip, minlength=n) > 0)
            & ~(
                (driven / via_reference >= p.min_ratio)
                & (driven - via_reference >= p.min_excess_m)
                & (duration_s / (peer_pace * via) >= p.min_time_ratio)
                & (driven >= MIN_STRAIGHT_RATIO * via)
            )
        )
        # On the network too: a loop around a short stop may be the passenger's (a companion
        # set down at the far corner, 45 s: real Porto trip 20000201, 1 Jul 2013 02:26): the
        # shortest path through the stops, in order, must still show the excess.
        net = _errand_stops(fixes, kept, n, p, candidate & matched_ok)
        if graph is not None and len(net[0]):
            # Between the matched positions, as the reference: a stop snapped on its own to a
            # one-way street the wrong way made the route through it longer than the trip.
            (leg_trip, leg_from, leg_to), _ = _matched_legs(mr, fixes, net, candidate & matched_ok)
            # The shortest and the fastest paths through them: the excess is counted from the
            # longer, as without stops (real Porto trip 20000329, 1 Jul 2013 05:01: the ring road
            # to a 75 s stop past the drop-off and back, 10.3 km the fastest way).
            via_net, via_fast = (
                _legs_total(routes_between(graph, leg_from, leg_to, weight=w), leg_trip, n)
                for w in ("length", "time")
            )
            net_explain = (
                candidate
                & matched_ok
                & (np.bincount(net[0], minlength=n) > 0)
                & ~(  # no route through them on the network: they may explain it all the same
                    (measured / via_net >= p.min_ratio)
                    & (
                        measured - np.fmax(np.fmax(via_net, via_fast), mr["fastest_m"])
                        >= p.min_excess_m
                    )
                )
            )
            via_reference = np.where(net_explain, via_net, via_reference)
            errands_explain = errands_explain | net_explain
            order = np.argsort(np.concatenate((er_trip, net[0])), kind="stable")
            er_trip, er_first, er_last = (
                np.concatenate((a, b))[order]
                for a, b in zip((er_trip, er_first, er_last), net, strict=True)
            )
    return {
        "method": method,
        "reference_m": reference,
        "measured_m": measured,
        "ratio": ratio,
        "time_ratio": time_ratio,
        "score": np.where(quick, np.fmin(score, 1.0), score),
        "network_ratio": net_ratio,
        "straight_m": straight,
        "quick": quick,
        "matched": mr,
        "max_snap_m": max_snap,
        "candidate": candidate,
        "consensus": consensus,
        "n_waypoints": n_wp,
        "wp": (wp_trip, wp_first, wp_last),
        "errands": (er_trip, er_first, er_last),
        "errands_explain": errands_explain,
        "via_errands_reference_m": np.where(errands_explain, via_reference, np.nan),
        "peer_count": peer_count,
        "peer_straight": peer_straight,
        "peer_pace": peer_pace,
        "peer_ratio": peer_ratio,
        "peer_ids": peer_ids,
        "o_cell": o_cell,
        "d_cell": d_cell,
    }


def _matched_routes_empty(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        name: np.full(n, np.nan)
        for name in (
            "matched_m",
            "matched_s",
            "unexplained_m",
            "mean_snap_m",
            "reference_m",
            "fastest_m",
            "fastest_s",
        )
    }
    for name in ("n_used", "n_matched", "n_jumps", "n_breaks"):
        out[name] = np.zeros(n, dtype=np.int64)
    out["match_ok"] = np.zeros(n, dtype=bool)
    out["beyond"] = np.zeros(n, dtype=bool)
    out["paths"] = [[] for _ in range(n)]
    out["legs"] = (np.zeros(0, np.int64), _positions(np.zeros(0, np.int64), np.zeros(0)), None)
    return out


def _loop_m(lat: NDArray[np.float64], lon: NDArray[np.float64], radius_m: float) -> float:
    """Longest along-track distance between two fixes that are within ``radius_m`` of each other."""
    if len(lat) < 3:
        return 0.0
    step = np.concatenate(([0.0], haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])))
    along = np.cumsum(step)
    near = haversine_m(lat[:, None], lon[:, None], lat[None, :], lon[None, :]) <= radius_m
    gap = along[None, :] - along[:, None]
    span = np.where(near & (gap > 0), gap, 0.0)
    return float(span.max())


def _line_coords(lines: list[Any]) -> list[list[float]] | None:
    parts = [shapely.get_coordinates(g) for g in lines if g is not None]
    if not parts:
        return None
    coords = np.concatenate(parts)
    keep = np.ones(len(coords), dtype=bool)
    keep[1:] = np.any(np.diff(coords, axis=0) != 0, axis=1)
    return [[round(float(x), 7), round(float(y), 7)] for x, y in coords[keep]]


def _findings(
    ev: dict[str, Any],
    table: dict[str, NDArray[Any]],
    fixes: dict[str, NDArray[Any]],
    graph: RoadGraph | None,
    p: _Params,
) -> gpd.GeoDataFrame:
    cand = np.flatnonzero(ev["candidate"])
    if not len(cand):
        return empty_findings()
    n = len(table["trip_id"])
    mr = ev["matched"]
    if graph is not None:
        ref_lines, fast_lines = _route_lines(graph, mr["legs"], cand, n)
    else:
        ref_lines = fast_lines = [[] for _ in range(n)]
    trip = fixes["trip"]
    starts = np.searchsorted(trip, cand, side="left")
    ends = np.searchsorted(trip, cand, side="right")
    wp_trip, wp_first, wp_last = ev["wp"]
    er_trip, er_first, er_last = ev["errands"]
    reach = p.max_speed_kmh / 3.6
    rows: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for i, lo, hi in zip(cand.tolist(), starts.tolist(), ends.tolist(), strict=True):
        if hi - lo < 3:
            continue
        lat, lon, ts = fixes["lat"][lo:hi], fixes["lon"][lo:hi], fixes["ts_ns"][lo:hi]
        if _jump_near_an_end(lat, lon, ts, reach):
            continue  # pickup or drop-off may be a stale or displaced fix: wrong reference
        gaps = np.diff(ts)
        unseen = np.flatnonzero(gaps > round(HIDDEN_RIDE_GAP_S * NS))
        kmh = fixes["kmh"][lo:hi]
        if len(unseen) and np.median(gaps) > HIDDEN_RIDE_GAP_S * NS:
            kmh = np.where(np.isnan(kmh), 0.0, kmh)  # a sparse tracker without speeds
        if len(unseen) and _two_stops(lat, lon, kmh, unseen, p.waypoint_diameter_m).any():
            continue  # a drop-off and a new boarding may lie between two fixes
        method = str(ev["method"][i])
        network = method == "road_network"
        measured = float(ev["measured_m"][i])
        reference = float(ev["reference_m"][i])
        r = measured / reference
        time_ratio = float(ev["time_ratio"][i])
        # Read on the fixes on the track, as the driven length: a jump out and back is no loop.
        on = ~displaced_fixes(trip[lo:hi], ts, lat, lon, max_speed_kmh=p.max_speed_kmh)
        loop = _loop_m(lat[on], lon[on], p.loop_radius_m)
        pattern = "loop" if loop >= p.min_excess_m else "corridor"
        score = min(r, time_ratio) if math.isfinite(time_ratio) else r
        conf = 0.6 + 0.35 * min(1.0, (score - p.min_ratio) / (p.min_ratio - 1.0))
        if pattern == "corridor":
            conf *= 0.85
        if not network:
            conf *= 0.85
        errands_explain = bool(ev["errands_explain"][i])
        if errands_explain:
            conf *= ERRAND_CONFIDENCE_FACTOR
        if table["n_jumps"][i] > 0 or (network and mr["n_jumps"][i] + mr["n_breaks"][i] > 0):
            conf *= 0.9
        snap = float(ev["max_snap_m"][i])
        if math.isfinite(snap) and snap > p.max_snap_m / 2:
            conf *= 0.9
        w = np.flatnonzero(wp_trip == i)
        waypoints = [
            {
                "lat": float(np.mean(fixes["lat"][wp_first[k] : wp_last[k] + 1])),
                "lon": float(np.mean(fixes["lon"][wp_first[k] : wp_last[k] + 1])),
                "started_at": iso_utc(int(fixes["ts_ns"][wp_first[k]])),
                "ended_at": iso_utc(int(fixes["ts_ns"][wp_last[k]])),
                "duration_s": float(fixes["ts_ns"][wp_last[k]] - fixes["ts_ns"][wp_first[k]]) / NS,
            }
            for k in w.tolist()
        ]
        notes = [NOTE_REVIEW]
        if pattern == "corridor":
            notes.append(NOTE_CORRIDOR)
        if errands_explain:
            via_km = float(ev["via_errands_reference_m"][i]) / 1000.0
            notes.append(
                ("" if network else NOTE_PEERS)
                + NOTE_ERRANDS.format(s=p.errand_min_stop_s, n=int((er_trip == i).sum()))
                + (
                    NOTE_ERRANDS_VIA.format(km=f"{via_km:.1f}".replace(".", ","))
                    if math.isfinite(via_km)
                    else NOTE_ERRANDS_NO_ROUTE
                )
            )
        driven_line = [
            [round(float(x), 7), round(float(y), 7)] for x, y in zip(lon, lat, strict=True)
        ]
        fastest = float(mr["fastest_m"][i])
        fastest_s = float(mr["fastest_s"][i])
        straight = float(ev["straight_m"][i])
        details = {
            "trip_id": str(table["trip_id"][i]),
            "method": method,
            "driven_m": round(float(table["driven_m"][i]), 1),
            "matched_m": round(measured, 1) if network else None,
            "straight_m": round(straight, 1),
            "ratio_straight_line": round(float(table["driven_m"][i]) / straight, 4)
            if straight > 0
            else None,
            "reference_m": round(reference, 1),
            "ratio": round(r, 4),
            "excess_km": round((measured - max(reference, fastest if network else 0.0)) / 1000, 3),
            "fastest_route_m": round(fastest, 1) if network else None,
            "fastest_route_s": round(fastest_s, 1) if network else None,
            "matched_route_s": round(float(mr["matched_s"][i]), 1) if network else None,
            "time_ratio": round(time_ratio, 4) if math.isfinite(time_ratio) else None,
            "duration_s": float(table["ended_ns"][i] - table["started_ns"][i]) / NS,
            "match": (
                {
                    "n_fixes_used": int(mr["n_used"][i]),
                    "n_matched": int(mr["n_matched"][i]),
                    "n_jumps": int(mr["n_jumps"][i]),
                    "n_breaks": int(mr["n_breaks"][i]),
                    "unexplained_m": round(float(mr["unexplained_m"][i]), 1),
                    "mean_snap_m": round(float(mr["mean_snap_m"][i]), 1),
                }
                if network
                else None
            ),
            "max_snap_m": round(snap, 1) if math.isfinite(snap) else None,
            "waypoints": waypoints,
            "errand_stops": [
                {
                    "lat": float(np.mean(fixes["lat"][er_first[k] : er_last[k] + 1])),
                    "lon": float(np.mean(fixes["lon"][er_first[k] : er_last[k] + 1])),
                    "started_at": iso_utc(int(fixes["ts_ns"][er_first[k]])),
                    "ended_at": iso_utc(int(fixes["ts_ns"][er_last[k]])),
                    "duration_s": float(fixes["ts_ns"][er_last[k]] - fixes["ts_ns"][er_first[k]])
                    / NS,
                }
                for k in np.flatnonzero(er_trip == i).tolist()
            ]
            if errands_explain
            else [],
            "pattern": pattern,
            "loop_m": round(loop, 1),
            "reference_may_be_wrong": pattern == "corridor",
            "origin_cell": str(cells_to_strings([ev["o_cell"][i]])[0]),
            "destination_cell": str(cells_to_strings([ev["d_cell"][i]])[0]),
            "peer_trips": {
                "count": int(ev["peer_count"][i]),
                "reference_straight_line_ratio": (
                    round(float(ev["peer_straight"][i]), 4) if ev["peer_count"][i] else None
                ),
                "median_pace_s_per_km": (
                    round(float(ev["peer_pace"][i]) * 1000.0, 1) if ev["peer_count"][i] else None
                ),
                "median_ratio": (
                    round(float(ev["peer_ratio"][i]), 4)
                    if math.isfinite(ev["peer_ratio"][i])
                    else None
                ),
                "trip_ids": ev["peer_ids"][i],
            },
            "n_fixes": int(hi - lo),
            "n_dropped_fixes": int(table["n_dropped"][i]),
            "n_skipped_steps": int(table["n_skipped"][i]),
            "driven_line": driven_line,
            "matched_line": (
                _line_coords([path_line(graph, mr["paths"][i])])
                if network and graph is not None
                else None
            ),
            "reference_line": _line_coords(ref_lines[i]),
            "fastest_route_line": _line_coords(fast_lines[i]),
            "fixes": [
                {
                    "timestamp": iso_utc(int(t)),
                    "lat": float(a),
                    "lon": float(b),
                    "row": None if r_ < 0 else int(r_),
                }
                for t, a, b, r_ in zip(
                    ts.tolist(),
                    lat.tolist(),
                    lon.tolist(),
                    fixes["row"][lo:hi].tolist(),
                    strict=True,
                )
            ],
            "notes": notes,
            "thresholds": {**p.thresholds(), **ROUTE_GUARDS},
        }
        rows.append(
            {
                "kind": KIND,
                "vehicle_id": str(table["vehicle_id"][i]),
                "stand_id": None,
                "started_at": pd.Timestamp(int(table["started_ns"][i]), unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(int(table["ended_ns"][i]), unit="ns", tz="UTC"),
                "confidence": clip_confidence(conf),
                "details": details,
            }
        )
        geoms.append(shapely.linestrings(np.column_stack((lon, lat))))
    if not rows:
        return empty_findings()
    return make_findings(pd.DataFrame(rows), geoms)


def _no_peer_trips() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trip_id": pd.Series([], dtype=object),
            "vehicle_id": pd.Series([], dtype=object),
            "started_ns": pd.Series([], dtype=np.int64),
            "ended_ns": pd.Series([], dtype=np.int64),
            "cells": pd.Series([], dtype=object),
            "driven_m": pd.Series([], dtype=np.float64),
            "straight_m": pd.Series([], dtype=np.float64),
            "ratio": pd.Series([], dtype=np.float64),
        }
    )


def _cells(o_cell: NDArray[np.uint64], d_cell: NDArray[np.uint64]) -> list[str]:
    """``"<pickup cell>-<drop-off cell>"`` of each trip (H3 in hexadecimal)."""
    return [f"{int(o):x}-{int(d):x}" for o, d in zip(o_cell, d_cell, strict=True)]


def _as_peers(table: dict[str, NDArray[Any]], ev: dict[str, Any]) -> pd.DataFrame:
    """Every trip of ``table`` as a peer of later trips (:data:`PEER_COLUMNS`)."""
    return pd.DataFrame(
        {
            "trip_id": table["trip_id"],
            "vehicle_id": table["vehicle_id"],
            "started_ns": np.asarray(table["started_ns"], dtype=np.int64),
            "ended_ns": np.asarray(table["ended_ns"], dtype=np.int64),
            "cells": np.asarray(_cells(ev["o_cell"], ev["d_cell"]), dtype=object),
            "driven_m": np.asarray(table["driven_m"], dtype=np.float64),
            "straight_m": np.asarray(ev["straight_m"], dtype=np.float64),
            "ratio": np.asarray(ev["network_ratio"], dtype=np.float64),
        }
    )


def _with_peer_trips(
    own: dict[str, NDArray[Any]], started_ns: NDArray[np.int64], extra: PeerTrips
) -> dict[str, NDArray[Any]]:
    """Return the trips judged now and the past ones of ``extra``, in (vehicle, start) order.

    The order is the one a batch over all of them gives its trips: peers that ended at the same
    instant are then taken in the same order.
    """
    wanted = sorted(set(_cells(own["o_cell"], own["d_cell"])))
    past = extra(wanted) if callable(extra) else extra
    past = past.loc[~past["trip_id"].astype(str).isin(set(own["trip_id"].tolist()))]
    past = past.loc[past["cells"].astype(str).isin(wanted)]
    pair = past["cells"].astype(str).str.split("-", n=1, expand=True)
    frame = pd.DataFrame(
        {
            "trip_id": np.concatenate((own["trip_id"], past["trip_id"].astype(str))),
            "vehicle_id": np.concatenate((own["vehicle_id"], past["vehicle_id"].astype(str))),
            "started_ns": np.concatenate((started_ns, past["started_ns"].to_numpy(np.int64))),
            "ended_ns": np.concatenate((own["ended_ns"], past["ended_ns"].to_numpy(np.int64))),
            "driven_m": np.concatenate((own["driven_m"], past["driven_m"].to_numpy(np.float64))),
            "straight_m": np.concatenate(
                (own["straight_m"], past["straight_m"].to_numpy(np.float64))
            ),
            "ratio": np.concatenate((own["ratio"], past["ratio"].to_numpy(np.float64))),
        }
    )
    o_past = np.asarray([int(c, 16) for c in pair[0]] if len(past) else [], dtype=np.uint64)
    d_past = np.asarray([int(c, 16) for c in pair[1]] if len(past) else [], dtype=np.uint64)
    frame["o_cell"] = np.concatenate((own["o_cell"], o_past))
    frame["d_cell"] = np.concatenate((own["d_cell"], d_past))
    frame = frame.sort_values(["vehicle_id", "started_ns"], kind="stable")
    out: dict[str, NDArray[Any]] = {c: frame[c].to_numpy() for c in frame.columns}
    out["trip_id"] = out["trip_id"].astype(object)
    out["vehicle_id"] = out["vehicle_id"].astype(object)
    return out


# ---------------------------------------------------------------------- live: one kernel


def _meter_trips(pings: pd.DataFrame, max_gap_s: float) -> pd.DataFrame:
    """Return the meter trips of ``pings`` as ``pontual analyze`` finds them (no stops needed)."""
    no_stops = pd.DataFrame({fr.VEHICLE_ID: [], "started_at": [], "ended_at": []})
    trips = detect_trips(pings, stops=no_stops, max_gap_s=max_gap_s)
    return trips.loc[(trips["source"].astype("str") == "meter").to_numpy()]


def _judge_fixes(
    pings: pd.DataFrame,
    *,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    roads: RoadGraph | None = None,
    peer_trips: PeerTrips | None = None,
    with_peers: bool = False,
    **thresholds: Any,
) -> tuple[gpd.GeoDataFrame, pd.DataFrame]:
    p = _params(**{**_DEFAULTS, **thresholds})
    check_threshold("max_gap_s", max_gap_s, positive=True, unit="s")
    return _judge(
        _meter_trips(pings, max_gap_s), pings, roads, p, peer_trips, with_peers=with_peers
    )


def detect_longer_route_in_fixes(pings: pd.DataFrame, **params: Any) -> gpd.GeoDataFrame:
    """:func:`detect_longer_route` on the meter trips of ``pings`` (``max_gap_s`` splits them).

    ``params``: ``max_gap_s`` (default :data:`DEFAULT_MAX_GAP_S`) and those of
    :func:`detect_longer_route`.
    """
    return _judge_fixes(pings, **params)[0]


def open_from(
    pings: pd.DataFrame, *, max_gap_s: float = DEFAULT_MAX_GAP_S, **_: Any
) -> dict[str, int]:
    """Per vehicle, its first fix a later fix can change the verdict on (see the module doc).

    The start of its open meter run (its latest fix is occupied), or of its first trip that
    started after the latest fix of another vehicle's open run that a fix of the newest instant
    could still extend (within ``max_gap_s``): that run could still be a peer of the trip.
    """
    n = len(pings)
    if not n or fr.METER not in pings.columns:
        return {}
    vehicles = pings[fr.VEHICLE_ID].astype(str).to_numpy(dtype=object)
    ts = utc_ns(pings[fr.TIMESTAMP], column="timestamp", what="pings")
    first = np.r_[True, vehicles[1:] != vehicles[:-1]]
    new_segment = first | np.r_[False, np.diff(ts) > round(max_gap_s * NS)]
    if fr.TRIP_REF in pings.columns:  # as detect_trips: each trip record is its own trip
        ref = pings[fr.TRIP_REF].to_numpy(dtype=object)
        new_segment[1:] |= ref[1:] != ref[:-1]
    occupied = (pings[fr.METER] == "occupied").fillna(False).to_numpy(dtype=bool)
    starts = occupied & (new_segment | ~np.r_[False, occupied[:-1]])
    if not starts.any():
        return {}  # no meter trip: nothing open, nothing to hold
    run_start = ts[np.flatnonzero(starts)][np.maximum(np.cumsum(starts) - 1, 0)]
    lo = np.flatnonzero(first)
    hi = np.r_[lo[1:], n] - 1
    open_run = occupied[hi]
    never = np.iinfo(np.int64).max
    own = np.where(open_run, run_start[hi], never)
    # Open runs a fix of the newest instant could still extend: their latest fix.
    newest = int(ts.max())
    live_end = np.where(open_run & (newest - ts[hi] <= round(max_gap_s * NS)), ts[hi], never)
    order = np.argsort(live_end, kind="stable")
    h1 = live_end[order[0]]
    h2 = live_end[order[1]] if len(order) > 1 else never
    others = np.full(len(lo), h1, dtype=np.int64)
    others[order[0]] = h2
    vehicle_of = np.cumsum(first) - 1
    s = np.flatnonzero(starts)
    held = s[ts[s] > others[vehicle_of[s]]]
    hold = np.full(len(lo), never, dtype=np.int64)
    v_held, at = np.unique(vehicle_of[held], return_index=True)
    hold[v_held] = ts[held[at]]
    cut = np.minimum(own, hold)
    keep = np.flatnonzero(cut < never)
    return {str(vehicles[lo[k]]): int(cut[k]) for k in keep.tolist()}


KERNEL = TrackKernel(KIND, detect_longer_route_in_fixes, open_from)
"""The rule as a kernel over the fleet's fixes (peers only among the fixes given and
``peer_trips``; :func:`advance_longer_route` also returns the trips it closes)."""


def advance_longer_route(
    states: Mapping[str, State | None],
    pings: pd.DataFrame,
    *,
    final: bool = False,
    **params: Any,
) -> tuple[dict[str, State], gpd.GeoDataFrame, pd.DataFrame]:
    """Advance the vehicles' states by new fixes (:func:`tracking.detectors.kernel.advance`).

    Parameters
    ----------
    states : mapping
        ``vehicle_id → state`` (kernel states; missing or None: nothing seen yet).
    pings : pandas.DataFrame
        New fixes (pings contract).
    final : bool, default False
        End of the input: every trip is judged, no state kept.
    **params
        ``max_gap_s``, ``roads``, ``peer_trips`` (the past trips of the fleet: a frame or a
        function of the ``cells``) and the thresholds of :func:`detect_longer_route`.

    Returns
    -------
    tuple
        ``(states, findings, closed)``: the new states, the findings no later fix can change,
        and the trips judged for the last time (:data:`PEER_COLUMNS`), to add to the fleet's
        peer trips (:func:`keep_peer_trips`).
    """
    judged: list[pd.DataFrame] = []

    def detect(frame: pd.DataFrame, **kw: Any) -> gpd.GeoDataFrame:
        found, peers = _judge_fixes(frame, with_peers=True, **kw)
        judged.append(peers)
        return found

    after, found = advance(
        TrackKernel(KIND, detect, open_from), states, pings, final=final, **params
    )
    trips = judged[0] if judged else _no_peer_trips()
    kept = np.asarray(
        [
            ((after.get(v) or {}).get("tail") or {}).get(fr.TIMESTAMP, [np.iinfo(np.int64).max])[0]
            for v in trips["vehicle_id"]
        ],
        dtype=np.int64,
    )
    closed = trips.loc[trips["started_ns"].to_numpy(dtype=np.int64) < kept]
    return after, found, closed.reset_index(drop=True)


def keep_peer_trips(
    stored: pd.DataFrame, closed: pd.DataFrame, *, max_peer_trips: int = DEFAULT_MAX_PEER_TRIPS
) -> pd.DataFrame:
    """Return the peer trips worth keeping: per ``cells`` and vehicle, the latest ones.

    Trips without a straight line (pickup = drop-off) are never peers and are dropped. The
    latest ``max_peer_trips`` of each vehicle hold every trip a later one can take among its
    ``max_peer_trips`` most recent peers.
    """
    frame = pd.concat([f for f in (stored, closed) if len(f)] or [_no_peer_trips()])
    frame = frame.drop_duplicates("trip_id", keep="last")
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.isfinite(
            frame["driven_m"].to_numpy(np.float64) / frame["straight_m"].to_numpy(np.float64)
        )
    frame = frame.loc[ok].sort_values(["cells", "vehicle_id", "ended_ns"], kind="stable")
    latest: pd.DataFrame = frame.groupby(["cells", "vehicle_id"], sort=False).tail(max_peer_trips)
    return latest.reset_index(drop=True)
