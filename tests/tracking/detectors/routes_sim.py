"""Simulated taxi trips on the real Porto road network: a labelled evaluation set for longer_route.

A second evaluation set for ``longer_route`` (POA art. 58 XIII: a passenger trip driven much
longer than needed), written independently of the detector and of ``detours.py``: the trips are
not real trips with an edited middle but whole trips simulated from the road network, driven
with modelled speeds and red lights, and observed through a modelled GPS receiver.

Network
    The bundled LibCity export of central Porto (``data/porto/network``, PROVENANCE §4): 11 095
    *directed* segments between 5 213 intersections (a two-way street is two segments, one per
    direction; a one-way street is one). The simulator routes on its own graph: one edge per
    segment, weighted by the segment's length in UTM (EPSG:32629) metres; a segment and its
    exact reverse are *twins* (the two directions of one street). Road classes are the
    ``highway`` of :func:`geo.roads.read_libcity_roads`.

Positions
    Pickups, drop-offs are uniform over the length of the network, motorways, trunks and their
    links excluded (nobody boards there); with ``place_pairs``, uniform over the streets within
    ``place_radius_m`` of two places of a pair drawn for the trip (many rides between the same
    districts, as a reference from past trips needs). A position on a two-way street may be
    left or reached in either direction (a taxi turns round at the kerb); on a one-way street
    only along it.

Legitimate routes (negatives, ``is_detour`` False)
    Trips whose shortest path is 1–15 km (log-uniform target length). The meter-on part is one of
    ``shortest`` (the shortest path), ``fastest`` (least travel time by the cruise speed of each
    road class plus the expected red-light delay of its intersections: main roads preferred; may
    be much longer than the shortest, and is not an infraction; but one longer than
    :data:`ALTERNATIVE_MAX_RATIO` × the shortest that saves under :data:`FASTEST_MIN_SAVING` of
    its time is not a route a driver could defend, and the trip is redrawn) or ``alternative``
    (the shortest path under randomly perturbed segment lengths, a driver's habit, kept only
    within :data:`ALTERNATIVE_MAX_RATIO` of the shortest).

Detours (positives, ``is_detour`` True; driven length / shortest ≥ :data:`MIN_DETOUR_RATIO`)
    ``waypoint``: through 1–2 intersections drawn 0.5–3 km (straight-line) from the legitimate
    route, visited in the order of their projection on it, each leg the shortest path.
    ``uturn``: at an intersection of the route (or at the drop-off itself) the driver goes on as
    straight as the streets allow, then turns round and drives back the same streets when they
    are two-way (else the shortest way back), and finishes the route.
    ``loop``: at an intersection of the route the driver circles 1–3 times a loop out to an
    intersection and back by other streets (around a block or several).
    A target ratio is drawn per positive from four bands (1.4–1.6, 1.6–2, 2–3, 3–4.5); the
    generator keeps the first candidate inside the band, else the one of ratio ≥ 1.4 nearest to
    it (short trips reach high ratios, long trips low ones).

Movement
    Each segment is driven at its class's cruise speed (:data:`CRUISE_KMH`) times a per-trip
    traffic factor (0.55–1.0) times a per-segment factor (0.85–1.15), at constant speed. At an
    intersection (3+ neighbours) the car waits at a red light (10–60 s) with a probability set
    by the class of the road it arrives on (:data:`RED_LIGHT_P`), once per junction (no other
    stop within the next :data:`RED_LIGHT_SPACING_M`: the nodes of a dual carriageway's crossing
    are one junction); a U-turn costs 5–15 s. There are no traffic queues longer than one red
    light. Timeline of a vehicle: a free approach of 0.3–1.5 km to the pickup; with probability
    0.5 a free wait there for the passenger (30–300 s); the meter goes on; 0–20 s of boarding
    (occupied, stopped); the trip; 10–60 s stopped at the drop-off (occupied, paying); the meter
    goes free; 0–30 s stopped; a free departure of 0.3–1.5 km. One vehicle per trip.

Observation
    A fix every ``sampling_s`` (per trip, uniform 5–30 s) times a uniform 0.8–1.2 jitter per
    interval; each fix is lost with probability 0.03, and a burst of 2–4 lost fixes starts with
    probability 0.01 (never more than 4 in a row). The error is Gaussian with horizontal RMS
    ``noise_m`` (per trip, uniform 5–20 m; ``noise_m / √2`` per axis), correlated in time as
    AR(1) with time constant ``noise_tau_s`` (uniform 0–60 s; 0 is white noise). A quarter of
    the trips have a rare multipath outlier: 1–3 fixes of the vehicle's track thrown 60–250 m in
    a random direction. Timestamps are whole seconds, UTC.

Outputs of :func:`simulate_trips`
    ``pings``: the contract's input columns ``vehicle_id``, ``timestamp`` (tz-aware UTC), ``lat``,
    ``lon``, ``meter`` (``free`` before the trip, ``occupied`` during, ``free`` after), so that
    :func:`tracking.trips.detect_trips` finds one meter trip per vehicle. ``labels``: one row per
    trip (:data:`LABEL_COLUMNS`). ``routes``: the driven and the shortest path of each trip's
    meter-on part as EPSG:4326 LineStrings (ground truth for checks and maps).

Everything is seeded (``numpy.random.default_rng(seed)``): the same seed gives the same frames.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import NDArray
from scipy.sparse import csr_array
from scipy.sparse.csgraph import dijkstra

from geo.crs import WGS84, utm_crs_for
from geo.roads import read_libcity_roads

ROOT = Path(__file__).resolve().parents[3]
NETWORK_CSV = ROOT / "data" / "porto" / "network" / "porto_roads_libcity.csv"

CRUISE_KMH = {
    "motorway": 80.0,
    "trunk": 65.0,
    "primary": 45.0,
    "secondary": 38.0,
    "tertiary": 32.0,
    "motorway_link": 50.0,
    "trunk_link": 40.0,
    "primary_link": 35.0,
    "secondary_link": 30.0,
    "tertiary_link": 28.0,
    "unclassified": 27.0,
    "residential": 24.0,
    "living_street": 12.0,
}
"""Cruise speed while moving, per road class (before traffic and red lights)."""

RED_LIGHT_P = {
    "motorway": 0.0,
    "trunk": 0.0,
    "motorway_link": 0.05,
    "trunk_link": 0.05,
    "primary": 0.3,
    "secondary": 0.25,
    "tertiary": 0.2,
    "primary_link": 0.2,
    "secondary_link": 0.2,
    "tertiary_link": 0.15,
    "unclassified": 0.08,
    "residential": 0.06,
    "living_street": 0.03,
}
"""Probability of a red light at an intersection, by the class of the road arriving there."""

NO_PICKUP_CLASSES = frozenset({"motorway", "trunk", "motorway_link", "trunk_link"})
RED_LIGHT_S = (10.0, 60.0)
RED_LIGHT_SPACING_M = 100.0
MEAN_RED_LIGHT_S = 35.0
TRIP_M = (1000.0, 15000.0)
WAYPOINT_OFFSET_M = (500.0, 3000.0)
MIN_DETOUR_RATIO = 1.4
ALTERNATIVE_MAX_RATIO = 1.15
FASTEST_MIN_SAVING = 0.10
RATIO_BANDS = ((1.4, 1.6), (1.6, 2.0), (2.0, 3.0), (3.0, 4.5))
SAMPLING_S = (5.0, 30.0)
NOISE_M = (5.0, 20.0)
NOISE_TAU_S = (0.0, 60.0)
OUTLIER_TRIP_P = 0.25
OUTLIER_M = (60.0, 250.0)
NEGATIVE_CASES = {"shortest": 0.4, "fastest": 0.3, "alternative": 0.3}
POSITIVE_CASES = {"waypoint": 0.5, "uturn": 0.25, "loop": 0.25}
BASE_TIME = pd.Timestamp("2024-03-04T00:00:00Z")

LABEL_COLUMNS = (
    "vehicle_id",
    "trip_key",
    "is_detour",
    "case",
    "n_waypoints",
    "laps",
    "true_ratio",
    "shortest_m",
    "legit_route_m",
    "true_driven_m",
    "excess_m",
    "shortest_time_s",
    "fastest_time_s",
    "route_time_s",
    "sampling_s",
    "noise_m",
    "noise_tau_s",
    "n_outliers",
    "pickup_wait_s",
    "meter_on",
    "meter_off",
    "pickup_lat",
    "pickup_lon",
    "dropoff_lat",
    "dropoff_lon",
)
"""Columns of the labels frame, one row per simulated trip (the meter-on part):

``trip_key`` (``vehicle_id#0``); ``is_detour``; ``case`` (shortest, fastest, alternative,
waypoint, uturn, loop); ``n_waypoints``, ``laps`` (of a loop); ``true_ratio`` =
``true_driven_m / shortest_m`` (network lengths); ``legit_route_m`` (the legitimate route: the
shortest path under a detour, the driven route otherwise); ``excess_m`` = driven − shortest;
``shortest_time_s``, ``fastest_time_s``, ``route_time_s`` (expected travel times of the routing
model); ``sampling_s``, ``noise_m`` (horizontal RMS), ``noise_tau_s``, ``n_outliers`` (multipath
fixes while occupied); ``pickup_wait_s`` (free, before the meter goes on); ``meter_on``,
``meter_off`` (UTC); true pickup and drop-off positions."""

_Step = tuple[int, float, float]  # segment, from fraction, to fraction (0 ≤ from ≤ to ≤ 1)
_Position = tuple[int, float]  # segment, fraction along its drawing direction


@dataclass(frozen=True, eq=False)
class SimNetwork:
    """The simulator's own directed graph of the road segments (plain arrays).

    ``seg_u``/``seg_v`` are each segment's start/end intersection, ``seg_len_m`` its length in
    ``crs`` metres, ``seg_twin`` the segment of the other direction of the same street (-1 on a
    one-way street), ``seg_coords`` its vertices in ``crs``, ``seg_cum_m`` the distance along it
    at each vertex. ``length`` and ``time`` are node × node CSR matrices (cheapest parallel
    segment), with ``length_seg``/``time_seg`` the segment of each stored entry;
    ``length_reverse`` is ``length`` transposed (distances *to* a node).
    """

    seg_u: NDArray[np.int64]
    seg_v: NDArray[np.int64]
    seg_len_m: NDArray[np.float64]
    seg_class: NDArray[np.object_]
    seg_kmh: NDArray[np.float64]
    seg_red_p: NDArray[np.float64]
    seg_time_s: NDArray[np.float64]
    seg_twin: NDArray[np.int64]
    seg_coords: list[NDArray[np.float64]]
    seg_cum_m: list[NDArray[np.float64]]
    pickup_segs: NDArray[np.int64]
    pickup_weights: NDArray[np.float64]
    node_xy: NDArray[np.float64]
    node_points: NDArray[np.object_]
    node_tree: shapely.STRtree
    node_degree: NDArray[np.int64]
    length: csr_array
    length_seg: NDArray[np.int64]
    length_reverse: csr_array
    time: csr_array
    time_seg: NDArray[np.int64]
    crs: pyproj.CRS

    @property
    def n_nodes(self) -> int:
        """Number of intersections."""
        return len(self.node_xy)


def load_network(path: str | Path = NETWORK_CSV) -> SimNetwork:
    """Read the LibCity road CSV into the simulator's graph.

    Parameters
    ----------
    path : str or pathlib.Path
        The LibCity CSV (default: the bundled Porto network).

    Returns
    -------
    SimNetwork
    """
    roads = read_libcity_roads(path)
    lonlat = [shapely.get_coordinates(g) for g in roads.geometry.to_numpy()]
    every = np.concatenate(lonlat)
    crs = utm_crs_for(float(every[:, 0].mean()), float(every[:, 1].mean()))
    to_xy = pyproj.Transformer.from_crs(WGS84, crs, always_xy=True)
    sizes = np.array([len(c) for c in lonlat])
    x, y = to_xy.transform(every[:, 0], every[:, 1])
    xy_all = np.column_stack((np.asarray(x), np.asarray(y)))
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    coords = [xy_all[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    cum = [np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(c, axis=0).T)))) for c in coords]
    seg_len = np.array([c[-1] for c in cum])

    keys_start = [tuple(np.rint(c[0] * 1e7).astype(np.int64)) for c in lonlat]
    keys_end = [tuple(np.rint(c[-1] * 1e7).astype(np.int64)) for c in lonlat]
    node_ids: dict[tuple[int, ...], int] = {}
    for k in (*keys_start, *keys_end):
        node_ids.setdefault(k, len(node_ids))
    seg_u = np.array([node_ids[k] for k in keys_start], dtype=np.int64)
    seg_v = np.array([node_ids[k] for k in keys_end], dtype=np.int64)
    node_xy = np.zeros((len(node_ids), 2))
    node_xy[seg_u] = [c[0] for c in coords]
    node_xy[seg_v] = [c[-1] for c in coords]

    shape_key = {np.rint(c * 1e7).astype(np.int64).tobytes(): i for i, c in enumerate(lonlat)}
    twin = np.array(
        [shape_key.get(np.rint(c[::-1] * 1e7).astype(np.int64).tobytes(), -1) for c in lonlat],
        dtype=np.int64,
    )
    classes = roads["highway"].to_numpy(dtype=object)
    kmh = np.array([CRUISE_KMH.get(c, 24.0) for c in classes])
    red_p = np.array([RED_LIGHT_P.get(c, 0.06) for c in classes])
    pairs = np.unique(np.sort(np.column_stack((seg_u, seg_v)), axis=1), axis=0)
    degree = np.bincount(pairs.ravel(), minlength=len(node_ids)).astype(np.int64)
    # Expected time: cruise time, plus the expected red light at the intersection reached.
    time_s = seg_len / (kmh / 3.6) + np.where(degree[seg_v] >= 3, red_p * MEAN_RED_LIGHT_S, 0.0)
    pickup = np.flatnonzero(~np.isin(classes, list(NO_PICKUP_CLASSES)) & (seg_len > 20.0))
    length, length_seg = _csr(seg_u, seg_v, seg_len, len(node_ids))
    time, time_seg = _csr(seg_u, seg_v, time_s, len(node_ids))
    return SimNetwork(
        seg_u=seg_u,
        seg_v=seg_v,
        seg_len_m=seg_len,
        seg_class=classes,
        seg_kmh=kmh,
        seg_red_p=red_p,
        seg_time_s=time_s,
        seg_twin=twin,
        seg_coords=coords,
        seg_cum_m=cum,
        pickup_segs=pickup,
        pickup_weights=seg_len[pickup] / seg_len[pickup].sum(),
        node_xy=node_xy,
        node_points=shapely.points(node_xy),
        node_tree=shapely.STRtree(shapely.points(node_xy)),
        node_degree=degree,
        length=length,
        length_seg=length_seg,
        length_reverse=csr_array(length.T),
        time=time,
        time_seg=time_seg,
        crs=crs,
    )


def _csr(
    u: NDArray[np.int64], v: NDArray[np.int64], w: NDArray[np.float64], n: int
) -> tuple[csr_array, NDArray[np.int64]]:
    """Node × node CSR of the cheapest segment per (u, v), and that segment per stored entry."""
    seg = np.arange(len(u), dtype=np.int64)
    order = np.lexsort((w, v, u))
    u, v, w, seg = u[order], v[order], w[order], seg[order]
    first = np.ones(len(u), dtype=bool)
    first[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
    u, v, w, seg = u[first], v[first], w[first], seg[first]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    matrix = csr_array((np.maximum(w, 1e-6), v.astype(np.int32), indptr), shape=(n, n))
    return matrix, seg


# --- routing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _End:
    """A way to leave (or reach) a position: the node, the cost to it, and the partial step."""

    node: int
    cost: float
    step: _Step | None


def _exits(net: SimNetwork, pos: _Position, weight: NDArray[np.float64]) -> list[_End]:
    seg, f = pos
    out = [_End(int(net.seg_v[seg]), (1.0 - f) * weight[seg], (seg, f, 1.0))]
    twin = int(net.seg_twin[seg])
    if twin >= 0:
        out.append(_End(int(net.seg_v[twin]), f * weight[twin], (twin, 1.0 - f, 1.0)))
    return out


def _entries(net: SimNetwork, pos: _Position, weight: NDArray[np.float64]) -> list[_End]:
    seg, f = pos
    out = [_End(int(net.seg_u[seg]), f * weight[seg], (seg, 0.0, f))]
    twin = int(net.seg_twin[seg])
    if twin >= 0:
        out.append(_End(int(net.seg_u[twin]), (1.0 - f) * weight[twin], (twin, 0.0, 1.0 - f)))
    return out


def _node_end(node: int) -> list[_End]:
    return [_End(node, 0.0, None)]


def _seg_between(matrix: csr_array, seg_of: NDArray[np.int64], a: int, b: int) -> int:
    start, stop = matrix.indptr[a], matrix.indptr[a + 1]
    k = start + int(np.searchsorted(matrix.indices[start:stop], b))
    return int(seg_of[k])


def _route(
    net: SimNetwork,
    sources: list[_End],
    targets: list[_End],
    *,
    matrix: csr_array,
    seg_of: NDArray[np.int64],
    weight: NDArray[np.float64],
) -> list[_Step] | None:
    """Least-cost steps from one of ``sources`` to one of ``targets`` (None if unreachable)."""
    best_cost = math.inf
    best: list[_Step] | None = None
    for s in sources:  # along one segment, when both ends are on it
        for t in targets:
            if s.step is not None and t.step is not None and s.step[0] == t.step[0]:
                seg, f0, f1 = s.step[0], s.step[1], t.step[2]
                if f1 >= f0 and (f1 - f0) * weight[seg] < best_cost:
                    best_cost = (f1 - f0) * weight[seg]
                    best = [(seg, f0, f1)]
    nodes = [s.node for s in sources]
    dist, pred = dijkstra(matrix, directed=True, indices=nodes, return_predecessors=True)
    for i, s in enumerate(sources):
        for t in targets:
            total = s.cost + dist[i, t.node] + t.cost
            if total < best_cost:
                best_cost = total
                path = [t.node]
                while path[-1] != s.node:
                    path.append(int(pred[i, path[-1]]))
                path.reverse()
                steps: list[_Step] = [] if s.step is None else [s.step]
                for a, b in zip(path[:-1], path[1:], strict=True):
                    steps.append((_seg_between(matrix, seg_of, a, b), 0.0, 1.0))
                if t.step is not None:
                    steps.append(t.step)
                best = steps
    return None if best is None else [st for st in best if st[2] > st[1]]


def _shortest(net: SimNetwork, sources: list[_End], targets: list[_End]) -> list[_Step] | None:
    return _route(
        net, sources, targets, matrix=net.length, seg_of=net.length_seg, weight=net.seg_len_m
    )


def _length(net: SimNetwork, steps: list[_Step]) -> float:
    return float(sum((f1 - f0) * net.seg_len_m[s] for s, f0, f1 in steps))


def _time(net: SimNetwork, steps: list[_Step]) -> float:
    return float(sum((f1 - f0) * net.seg_time_s[s] for s, f0, f1 in steps))


def _end_node(net: SimNetwork, steps: list[_Step]) -> int:
    return int(net.seg_v[steps[-1][0]])


def _coords(net: SimNetwork, steps: list[_Step]) -> NDArray[np.float64]:
    """Vertices (UTM) of a path, consecutive duplicates removed."""
    parts = [_sub_coords(net, s, f0, f1) for s, f0, f1 in steps]
    xy = np.concatenate(parts)
    keep = np.ones(len(xy), dtype=bool)
    keep[1:] = np.hypot(*np.diff(xy, axis=0).T) > 1e-9
    return xy[keep]


def _sub_coords(net: SimNetwork, seg: int, f0: float, f1: float) -> NDArray[np.float64]:
    c, cum = net.seg_coords[seg], net.seg_cum_m[seg]
    if f0 == 0.0 and f1 == 1.0:
        return c
    d0, d1 = f0 * cum[-1], f1 * cum[-1]
    inner = c[(cum > d0) & (cum < d1)]
    a = np.array([[np.interp(d0, cum, c[:, 0]), np.interp(d0, cum, c[:, 1])]])
    b = np.array([[np.interp(d1, cum, c[:, 0]), np.interp(d1, cum, c[:, 1])]])
    return np.concatenate((a, inner, b))


def _position_xy(net: SimNetwork, pos: _Position) -> NDArray[np.float64]:
    return np.asarray(_sub_coords(net, pos[0], pos[1], pos[1])[0], dtype=np.float64)


def _single_source(
    net: SimNetwork, sources: list[_End], *, reverse: bool = False
) -> NDArray[np.float64]:
    """Least length from the sources to every node (to them from every node if ``reverse``)."""
    matrix = net.length_reverse if reverse else net.length
    dist = dijkstra(matrix, directed=True, indices=[s.node for s in sources])
    dist = np.atleast_2d(dist) + np.array([[s.cost] for s in sources])
    return np.asarray(dist.min(axis=0), dtype=np.float64)


# --- trip choice ----------------------------------------------------------------------------


@dataclass
class _Trip:
    origin: _Position
    destination: _Position
    shortest: list[_Step]
    shortest_m: float


def _draw_position(net: SimNetwork, rng: np.random.Generator) -> _Position:
    seg = int(rng.choice(net.pickup_segs, p=net.pickup_weights))
    return seg, float(rng.uniform(0.05, 0.95))


def _draw_trip(net: SimNetwork, rng: np.random.Generator) -> _Trip:
    """An origin and a destination whose shortest path is near a log-uniform target length."""
    while True:
        target = math.exp(rng.uniform(math.log(TRIP_M[0]), math.log(TRIP_M[1])))
        for _ in range(10):
            origin = _draw_position(net, rng)
            dist = _single_source(net, _exits(net, origin, net.seg_len_m))
            reach = dist[net.seg_u[net.pickup_segs]]
            near = net.pickup_segs[(reach > 0.9 * target) & (reach < 1.1 * target)]
            if len(near) == 0:
                continue
            destination = (int(rng.choice(near)), float(rng.uniform(0.05, 0.95)))
            shortest = _shortest(
                net, _exits(net, origin, net.seg_len_m), _entries(net, destination, net.seg_len_m)
            )
            if shortest is None:
                continue
            length = _length(net, shortest)
            if TRIP_M[0] <= length <= TRIP_M[1]:
                return _Trip(origin, destination, shortest, length)


def _place_pairs(
    net: SimNetwork, n_pairs: int, radius_m: float, rng: np.random.Generator
) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """``n_pairs`` pairs of places 1.5–6 km apart: each the pickup segments whose midpoint lies
    within ``radius_m`` of a drawn position (a district where many rides start or end)."""
    mid = np.array([c[len(c) // 2] for c in net.seg_coords])[net.pickup_segs]
    pairs: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []
    while len(pairs) < n_pairs:
        a, b = (_position_xy(net, _draw_position(net, rng)) for _ in range(2))
        if not 1500.0 <= float(np.hypot(*(a - b))) <= 6000.0:
            continue
        near_a = net.pickup_segs[np.hypot(*(mid - a).T) <= radius_m]
        near_b = net.pickup_segs[np.hypot(*(mid - b).T) <= radius_m]
        if len(near_a) >= 5 and len(near_b) >= 5:
            pairs.append((near_a, near_b))
    return pairs


def _draw_trip_between(
    net: SimNetwork, pair: tuple[NDArray[np.int64], NDArray[np.int64]], rng: np.random.Generator
) -> _Trip | None:
    """An origin in the first place and a destination in the second (None: no path)."""
    origin = (int(rng.choice(pair[0])), float(rng.uniform(0.05, 0.95)))
    destination = (int(rng.choice(pair[1])), float(rng.uniform(0.05, 0.95)))
    shortest = _shortest(
        net, _exits(net, origin, net.seg_len_m), _entries(net, destination, net.seg_len_m)
    )
    if shortest is None:
        return None
    return _Trip(origin, destination, shortest, _length(net, shortest))


def _fastest(net: SimNetwork, trip: _Trip) -> list[_Step] | None:
    """The least-time path by :data:`SimNetwork.seg_time_s`."""
    return _route(
        net,
        _exits(net, trip.origin, net.seg_time_s),
        _entries(net, trip.destination, net.seg_time_s),
        matrix=net.time,
        seg_of=net.time_seg,
        weight=net.seg_time_s,
    )


def _legit_route(
    net: SimNetwork, trip: _Trip, case: str, rng: np.random.Generator
) -> list[_Step] | None:
    """The meter-on route of a negative case (None: this trip has no such route; redraw)."""
    if case == "shortest":
        return trip.shortest
    if case == "fastest":
        fastest = _fastest(net, trip)
        if fastest is None:
            return None
        longer = _length(net, fastest) / trip.shortest_m > ALTERNATIVE_MAX_RATIO
        saving = 1.0 - _time(net, fastest) / _time(net, trip.shortest)
        return None if longer and saving < FASTEST_MIN_SAVING else fastest
    for sigma in (0.15, 0.25, 0.35, 0.5, 0.7):  # alternative: perturbed lengths
        w = net.seg_len_m * rng.lognormal(0.0, sigma, len(net.seg_len_m))
        matrix, seg_of = _csr(net.seg_u, net.seg_v, w, net.n_nodes)
        steps = _route(
            net,
            _exits(net, trip.origin, w),
            _entries(net, trip.destination, w),
            matrix=matrix,
            seg_of=seg_of,
            weight=w,
        )
        if steps is None:
            continue
        ratio = _length(net, steps) / trip.shortest_m
        if 1.005 < ratio <= ALTERNATIVE_MAX_RATIO:
            return steps
    return None


def _cut_at_node(net: SimNetwork, steps: list[_Step], k: int) -> tuple[list[_Step], int]:
    """Steps up to the end of step ``k`` (a full segment ending at a node), and that node."""
    return steps[: k + 1], int(net.seg_v[steps[k][0]])


def _inner_nodes(net: SimNetwork, steps: list[_Step], lo: float, hi: float) -> list[int]:
    """Indices of steps ending at a node between fractions lo..hi of the path's length."""
    lengths = np.array([(f1 - f0) * net.seg_len_m[s] for s, f0, f1 in steps])
    at = np.cumsum(lengths) / lengths.sum()
    full = np.array([f1 == 1.0 for _, _, f1 in steps])
    return [int(i) for i in np.flatnonzero(full & (at >= lo) & (at <= hi))[:-1]]


def _waypoint_band(net: SimNetwork, trip: _Trip) -> tuple[Any, NDArray[np.int64]]:
    """The route as a line, and the intersections 0.5–3 km (straight line) from it."""
    line = shapely.linestrings(_coords(net, trip.shortest))
    box = shapely.buffer(shapely.envelope(line), WAYPOINT_OFFSET_M[1])
    near = net.node_tree.query(box)
    off = shapely.distance(net.node_points[near], line)
    band = near[(off >= WAYPOINT_OFFSET_M[0]) & (off <= WAYPOINT_OFFSET_M[1])]
    return line, np.sort(band).astype(np.int64)


def _waypoint_detour(
    net: SimNetwork,
    trip: _Trip,
    n_waypoints: int,
    band: tuple[Any, NDArray[np.int64]],
    rng: np.random.Generator,
) -> list[_Step] | None:
    line, nodes = band
    if len(nodes) < n_waypoints:
        return None
    chosen = rng.choice(nodes, size=n_waypoints, replace=False)
    along = shapely.line_locate_point(line, net.node_points[chosen])
    chosen = chosen[np.argsort(along)]
    sources = _exits(net, trip.origin, net.seg_len_m)
    steps: list[_Step] = []
    for w in chosen:
        leg = _shortest(net, sources, _node_end(int(w)))
        if leg is None:
            return None
        steps += leg
        sources = _node_end(int(w))
    last = _shortest(net, sources, _entries(net, trip.destination, net.seg_len_m))
    return None if last is None else steps + last


def _turn(net: SimNetwork, heading: float, seg: int) -> float:
    """Absolute heading change (radians) from ``heading`` into ``seg``."""
    d = net.seg_coords[seg][1] - net.seg_coords[seg][0]
    a = math.atan2(d[1], d[0]) - heading
    return abs((a + math.pi) % (2 * math.pi) - math.pi)


def _straight_on(net: SimNetwork, seg: int, distance_m: float, avoid: int | None) -> list[_Step]:
    """Segments continuing from the end of ``seg`` with the least heading change."""
    out: list[_Step] = []
    driven = 0.0
    visited: set[int] = set()
    first = True
    while driven < distance_m:
        node = int(net.seg_v[seg])
        c = net.seg_coords[seg]
        heading = math.atan2(*(c[-1] - c[-2])[::-1])
        start, stop = net.length.indptr[node], net.length.indptr[node + 1]
        nexts = [int(net.length_seg[k]) for k in range(start, stop)]
        nexts = [s for s in nexts if s != net.seg_twin[seg] and s not in visited]
        if first and avoid is not None:
            nexts = [s for s in nexts if s != avoid]
        first = False
        if not nexts:
            break
        turns = [_turn(net, heading, s) for s in nexts]
        seg = nexts[int(np.argmin(turns))]
        if min(turns) > math.radians(100):
            break
        visited.add(seg)
        out.append((seg, 0.0, 1.0))
        driven += net.seg_len_m[seg]
    return out


def _uturn_detour(
    net: SimNetwork, trip: _Trip, target: float, rng: np.random.Generator
) -> list[_Step] | None:
    steps = trip.shortest
    last = steps[-1]
    overshoot_m = max(200.0, (target - 1.0) * trip.shortest_m / 2.0)
    candidates = _inner_nodes(net, steps, 0.3, 1.0)
    at_dropoff = not candidates or rng.random() < 0.3
    if at_dropoff:  # drive past the destination, on along its street
        head = [*steps[:-1], (last[0], last[1], 1.0)]
        branch_seg, avoid = last[0], None
    else:
        k = int(rng.choice(candidates))
        head, _ = _cut_at_node(net, steps, k)
        branch_seg, avoid = steps[k][0], steps[k + 1][0]
    out = _straight_on(net, branch_seg, overshoot_m, avoid)
    if not out:
        return None
    back_twins = [int(net.seg_twin[s]) for s, _, _ in reversed(out)]
    if all(t >= 0 for t in back_twins):  # turn round and drive back the same streets
        back = [(t, 0.0, 1.0) for t in back_twins]
        rest = _shortest(
            net, _node_end(_end_node(net, back)), _entries(net, trip.destination, net.seg_len_m)
        )
        twin = int(net.seg_twin[last[0]]) if at_dropoff else -1
        if twin >= 0:  # back on the destination's own street: stop there
            rest = [(twin, 0.0, 1.0 - last[2])]
    else:
        back = []
        rest = _shortest(
            net, _node_end(_end_node(net, out)), _entries(net, trip.destination, net.seg_len_m)
        )
    if rest is None:
        return None
    return head + out + back + rest


def _loop_detour(
    net: SimNetwork, trip: _Trip, target: float, rng: np.random.Generator
) -> tuple[list[_Step], int] | None:
    steps = trip.shortest
    candidates = _inner_nodes(net, steps, 0.1, 0.9)
    if not candidates:
        return None
    k = int(rng.choice(candidates))
    head, node = _cut_at_node(net, steps, k)
    laps = int(rng.integers(1, 4))
    loop_m = max(300.0, (target - 1.0) * trip.shortest_m / laps)
    radius = loop_m / 5.0  # a loop out and back by other streets is ~4–6 radii long
    d = np.hypot(*(net.node_xy - net.node_xy[node]).T)
    ring = np.flatnonzero((d > 0.7 * radius) & (d < 1.3 * radius))
    if len(ring) == 0:
        return None
    far = int(rng.choice(ring))
    out = _shortest(net, _node_end(node), _node_end(far))
    if out is None:
        return None
    w = net.seg_len_m.copy()
    used = [s for s, _, _ in out]
    w[used] *= 20.0
    twins = net.seg_twin[used]
    w[twins[twins >= 0]] *= 20.0
    matrix, seg_of = _csr(net.seg_u, net.seg_v, w, net.n_nodes)
    back = _route(net, _node_end(far), _node_end(node), matrix=matrix, seg_of=seg_of, weight=w)
    if back is None:
        return None
    rest = steps[k + 1 :]
    return head + (out + back) * laps + rest, laps


def _detour(
    net: SimNetwork, trip: _Trip, case: str, rng: np.random.Generator
) -> tuple[list[_Step], int, int] | None:
    """A detour of ``case`` near a drawn target band: (steps, n_waypoints, laps), or None."""
    lo, hi = RATIO_BANDS[int(rng.integers(len(RATIO_BANDS)))]
    target = float(rng.uniform(lo, hi))
    best: tuple[list[_Step], int, int] | None = None
    best_gap = math.inf
    band = _waypoint_band(net, trip) if case == "waypoint" else None
    for _ in range(12):
        n_wp, laps = 0, 0
        if band is not None:
            n_wp = int(rng.integers(1, 3))
            steps = _waypoint_detour(net, trip, n_wp, band, rng)
        elif case == "uturn":
            steps = _uturn_detour(net, trip, target, rng)
        else:
            made = _loop_detour(net, trip, target, rng)
            steps, laps = (None, 0) if made is None else made
        if steps is None:
            continue
        ratio = _length(net, steps) / trip.shortest_m
        if ratio < MIN_DETOUR_RATIO:
            continue
        if lo <= ratio < hi:
            return steps, n_wp, laps
        gap = min(abs(ratio - lo), abs(ratio - hi))
        if gap < best_gap:
            best, best_gap = (steps, n_wp, laps), gap
    return best


# --- movement and observation ---------------------------------------------------------------


def _drive(
    net: SimNetwork, steps: list[_Step], t0: float, traffic: float, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Vertices (UTM) and times of driving ``steps`` from ``t0`` (red lights, U-turns too)."""
    xy: list[NDArray[np.float64]] = []
    ts: list[NDArray[np.float64]] = []
    t = t0
    since_stop_m = math.inf
    for i, (seg, f0, f1) in enumerate(steps):
        c = _sub_coords(net, seg, f0, f1)
        d = np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(c, axis=0).T))))
        speed = net.seg_kmh[seg] / 3.6 * traffic * rng.uniform(0.85, 1.15)
        xy.append(c)
        ts.append(t + d / speed)
        t = ts[-1][-1]
        since_stop_m += d[-1]
        if i + 1 < len(steps) and f1 == 1.0:
            node = int(net.seg_v[seg])
            wait = 0.0
            if steps[i + 1][0] == net.seg_twin[seg]:
                wait = rng.uniform(5.0, 15.0)
            elif (
                net.node_degree[node] >= 3
                and since_stop_m >= RED_LIGHT_SPACING_M
                and rng.random() < net.seg_red_p[seg]
            ):
                wait = rng.uniform(*RED_LIGHT_S)
            if wait > 0:
                t += wait
                since_stop_m = 0.0
                xy.append(c[-1:])
                ts.append(np.array([t]))
    return np.concatenate(xy), np.concatenate(ts)


def _sample_times(t_end: float, sampling_s: float, rng: np.random.Generator) -> NDArray[np.float64]:
    n = int(t_end / (0.8 * sampling_s)) + 2
    gaps = sampling_s * rng.uniform(0.8, 1.2, n)
    t = np.concatenate(([0.0], np.cumsum(gaps)))
    t = np.unique(np.rint(t[t <= t_end]))
    keep = rng.random(len(t)) >= 0.03
    i = 0
    while i < len(t):  # bursts of 2–4 lost fixes
        if rng.random() < 0.01:
            keep[i : i + int(rng.integers(2, 5))] = False
            i += 5
        i += 1
    run = 0
    for j in range(len(t)):  # never more than 4 lost in a row
        run = 0 if keep[j] else run + 1
        if run > 4:
            keep[j], run = True, 0
    keep[0] = keep[-1] = True
    return t[keep]


def _noise(
    t: NDArray[np.float64], sigma_m: float, tau_s: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """AR(1) Gaussian noise per axis: standard deviation ``sigma_m``, time constant ``tau_s``."""
    e = rng.normal(0.0, sigma_m, (len(t), 2))
    if tau_s <= 0 or len(t) < 2:
        return e
    rho = np.exp(-np.diff(t) / tau_s)
    out = np.empty_like(e)
    out[0] = e[0]
    for i in range(1, len(t)):
        r = rho[i - 1]
        out[i] = r * out[i - 1] + math.sqrt(1.0 - r * r) * e[i]
    return out


def _approach(net: SimNetwork, origin: _Position, rng: np.random.Generator) -> list[_Step]:
    dist = _single_source(net, _entries(net, origin, net.seg_len_m), reverse=True)
    ring = np.flatnonzero((dist > 300.0) & (dist < 1500.0))
    if len(ring) == 0:
        return []
    start = int(rng.choice(ring))
    return _shortest(net, _node_end(start), _entries(net, origin, net.seg_len_m)) or []


def _departure(net: SimNetwork, destination: _Position, rng: np.random.Generator) -> list[_Step]:
    dist = _single_source(net, _exits(net, destination, net.seg_len_m))
    ring = np.flatnonzero((dist > 300.0) & (dist < 1500.0))
    if len(ring) == 0:
        return []
    end = int(rng.choice(ring))
    return _shortest(net, _exits(net, destination, net.seg_len_m), _node_end(end)) or []


def _timeline(
    net: SimNetwork,
    trip: _Trip,
    route: list[_Step],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, float, float]:
    """Track of a vehicle: vertices, times, meter-on and meter-off times, pickup wait."""
    traffic = float(rng.uniform(0.55, 1.0))
    pickup = _position_xy(net, trip.origin)
    dropoff = _position_xy(net, trip.destination)
    xy: list[NDArray[np.float64]] = []
    ts: list[NDArray[np.float64]] = []
    t = 0.0
    approach = _approach(net, trip.origin, rng)
    if approach:
        a_xy, a_t = _drive(net, approach, t, traffic, rng)
        xy.append(a_xy)
        ts.append(a_t)
        t = a_t[-1]
    else:
        xy.append(pickup[None, :])
        ts.append(np.array([t]))
    wait = float(rng.uniform(30.0, 300.0)) if rng.random() < 0.5 else 0.0
    t += wait
    meter_on = t
    t += float(rng.uniform(0.0, 20.0))
    r_xy, r_t = _drive(net, route, t, traffic, rng)
    xy += [pickup[None, :], r_xy]
    ts += [np.array([meter_on]), r_t]
    t = r_t[-1] + float(rng.uniform(10.0, 60.0))
    meter_off = t
    t += float(rng.uniform(0.0, 30.0))
    xy.append(dropoff[None, :])
    ts.append(np.array([t]))
    departure = _departure(net, trip.destination, rng)
    if departure:
        d_xy, d_t = _drive(net, departure, t, traffic, rng)
        xy.append(d_xy)
        ts.append(d_t)
    return np.concatenate(xy), np.concatenate(ts), meter_on, meter_off, wait


def _mix(given: Mapping[str, float] | None, default: dict[str, float]) -> dict[str, float]:
    if given is None:
        return default
    unknown = sorted(set(given) - set(default))
    if unknown or not math.isclose(sum(given.values()), 1.0):
        msg = f"cases {dict(given)!r}: expected shares of {sorted(default)} summing to 1"
        raise ValueError(msg)
    return dict(given)


def simulate_trips(
    *,
    n_negative: int,
    n_positive: int,
    seed: int,
    network: SimNetwork | None = None,
    negative_cases: Mapping[str, float] | None = None,
    positive_cases: Mapping[str, float] | None = None,
    place_pairs: int | None = None,
    place_radius_m: float = 400.0,
) -> tuple[pd.DataFrame, pd.DataFrame, gpd.GeoDataFrame]:
    """Simulate labelled taxi trips on the Porto network (see the module docstring).

    Parameters
    ----------
    n_negative, n_positive : int
        Trips on a legitimate route and detours (one vehicle each).
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    network : SimNetwork, optional
        The graph (:func:`load_network`); loaded from the bundled CSV when not given.
    negative_cases, positive_cases : mapping of str to float, optional
        Share of each case (default :data:`NEGATIVE_CASES`, :data:`POSITIVE_CASES`); e.g.
        ``{"loop": 1.0}`` for loops only.
    place_pairs : int, optional
        Instead of trips of a drawn length anywhere, trips between ``place_pairs`` pairs of
        places (districts of radius ``place_radius_m``, 1.5–6 km apart), each trip's pair drawn
        at random: many rides between the same places, as peers for a reference without a map.

    Returns
    -------
    pings : pandas.DataFrame
        ``vehicle_id``, ``timestamp`` (UTC), ``lat``, ``lon``, ``meter``, sorted by vehicle and
        time.
    labels : pandas.DataFrame
        :data:`LABEL_COLUMNS`, one row per trip.
    routes : geopandas.GeoDataFrame
        ``vehicle_id``, ``route`` (``driven`` or ``shortest``) and the meter-on path as an
        EPSG:4326 LineString.

    Raises
    ------
    ValueError
        If a case is unknown or the shares do not sum to 1.
    """
    neg_mix = _mix(negative_cases, NEGATIVE_CASES)
    pos_mix = _mix(positive_cases, POSITIVE_CASES)
    net = load_network() if network is None else network
    rng = np.random.default_rng(seed)
    to_ll = pyproj.Transformer.from_crs(net.crs, WGS84, always_xy=True)
    cases = [
        *rng.choice(list(neg_mix), size=n_negative, p=list(neg_mix.values())),
        *rng.choice(list(pos_mix), size=n_positive, p=list(pos_mix.values())),
    ]
    ping_parts: list[pd.DataFrame] = []
    labels: list[dict[str, Any]] = []
    routes: list[dict[str, Any]] = []
    pairs = None if place_pairs is None else _place_pairs(net, place_pairs, place_radius_m, rng)
    for i, case in enumerate(cases):
        positive = i >= n_negative
        while True:
            if pairs is None:
                trip = _draw_trip(net, rng)
            else:
                drawn = _draw_trip_between(net, pairs[int(rng.integers(len(pairs)))], rng)
                if drawn is None or drawn.shortest_m < TRIP_M[0]:
                    continue
                trip = drawn
            n_wp, laps = 0, 0
            if positive:
                made = _detour(net, trip, str(case), rng)
                if made is None:
                    continue
                route, n_wp, laps = made
            else:
                legit = _legit_route(net, trip, str(case), rng)
                if legit is None:
                    continue
                route = legit
            break
        vehicle = f"sim-{i:05d}"
        xy, t, meter_on, meter_off, wait = _timeline(net, trip, route, rng)
        sampling_s = float(rng.uniform(*SAMPLING_S))
        noise_m = float(rng.uniform(*NOISE_M))
        tau_s = float(rng.uniform(*NOISE_TAU_S))
        ts = _sample_times(float(t[-1]), sampling_s, rng)
        px = np.interp(ts, t, xy[:, 0])
        py = np.interp(ts, t, xy[:, 1])
        err = _noise(ts, noise_m / math.sqrt(2.0), tau_s, rng)
        jump = np.zeros(0, dtype=np.int64)
        if rng.random() < OUTLIER_TRIP_P:
            n_out = int(rng.integers(1, 4))
            jump = rng.choice(len(ts), size=min(n_out, len(ts)), replace=False)
            angle = rng.uniform(0, 2 * math.pi, len(jump))
            size = rng.uniform(*OUTLIER_M, len(jump))
            err[jump] += np.column_stack((size * np.cos(angle), size * np.sin(angle)))
        lon, lat = to_ll.transform(px + err[:, 0], py + err[:, 1])
        start = BASE_TIME + pd.Timedelta(seconds=int(rng.integers(0, 28 * 86400)))
        on = (ts >= meter_on) & (ts <= meter_off)
        meter = np.where(on, "occupied", "free")
        ping_parts.append(
            pd.DataFrame(
                {
                    "vehicle_id": vehicle,
                    "timestamp": start + pd.to_timedelta(ts, unit="s"),
                    "lat": np.asarray(lat),
                    "lon": np.asarray(lon),
                    "meter": meter,
                }
            )
        )
        driven_m = _length(net, route)
        pick_ll = to_ll.transform(*_position_xy(net, trip.origin))
        drop_ll = to_ll.transform(*_position_xy(net, trip.destination))
        fastest = _fastest(net, trip)
        labels.append(
            {
                "vehicle_id": vehicle,
                "trip_key": f"{vehicle}#0",
                "is_detour": positive,
                "case": str(case),
                "n_waypoints": n_wp,
                "laps": laps,
                "true_ratio": driven_m / trip.shortest_m,
                "shortest_m": trip.shortest_m,
                "legit_route_m": trip.shortest_m if positive else driven_m,
                "true_driven_m": driven_m,
                "excess_m": driven_m - trip.shortest_m,
                "shortest_time_s": _time(net, trip.shortest),
                "fastest_time_s": _time(net, fastest) if fastest else math.nan,
                "route_time_s": _time(net, route),
                "sampling_s": sampling_s,
                "noise_m": noise_m,
                "noise_tau_s": tau_s,
                "n_outliers": int(on[jump].sum()),
                "pickup_wait_s": wait,
                "meter_on": start + pd.Timedelta(seconds=meter_on),
                "meter_off": start + pd.Timedelta(seconds=meter_off),
                "pickup_lat": pick_ll[1],
                "pickup_lon": pick_ll[0],
                "dropoff_lat": drop_ll[1],
                "dropoff_lon": drop_ll[0],
            }
        )
        for name, steps in (("driven", route), ("shortest", trip.shortest)):
            c = _coords(net, steps)
            lo, la = to_ll.transform(c[:, 0], c[:, 1])
            routes.append(
                {
                    "vehicle_id": vehicle,
                    "route": name,
                    "geometry": shapely.linestrings(np.column_stack((lo, la))),
                }
            )
    pings = (
        pd.concat(ping_parts, ignore_index=True)
        if ping_parts
        else pd.DataFrame(
            {
                "vehicle_id": pd.Series(dtype="str"),
                "timestamp": pd.Series(dtype="datetime64[ns, UTC]"),
                "lat": pd.Series(dtype="float64"),
                "lon": pd.Series(dtype="float64"),
                "meter": pd.Series(dtype="str"),
            }
        )
    )
    label_frame = pd.DataFrame(labels, columns=list(LABEL_COLUMNS))
    route_frame = gpd.GeoDataFrame(
        pd.DataFrame(routes, columns=["vehicle_id", "route", "geometry"]),
        geometry="geometry",
        crs=WGS84,
    )
    return pings, label_frame, route_frame
