"""Detours injected into real Porto trips: the labelled set of the ``longer_route`` tests and bench.

There is no labelled detour data for Porto (``data/porto/PROVENANCE.md`` §5: published work also
evaluates on synthetic outliers made from real trips). This generator makes them, documented:

pool
    The meter trips of ``data/porto/derived/trips_combined.csv`` (read with
    :func:`tracking.porto.read_porto_trips`, trips by :func:`tracking.trips.detect_trips` with
    ``max_gap_s=60``; each Porto record, ``trip_ref``, is its own trip) whose every fix lies
    inside the network's bounding box, with a shortest path between pickup and drop-off of at
    least ``min_reference_m`` (default 2 500 m: ``min_excess_m / (min_ratio - 1)`` of the
    detector's defaults, so that every detour of ratio ≥ 1.4 also adds ≥ 1 km — on shorter trips
    a 1.4 detour is below the materiality threshold by design) and at least 8 fixes.
negatives
    Pool trips as they are (their real fixes).
detour
    For a target ratio ``r`` (drawn uniformly in ``ratio_range``, default 1.4–2.0): keep the
    first quarter of the trip's fixes (head, up to fix ``a``) and the last quarter (tail, from fix
    ``b``); replace the middle by a path on the network ``a → X → b`` through a via-node ``X``
    whose network length ``a→X + X→b`` is within [m, 1.1·m] of the needed middle length
    ``m = r·S − head − tail`` (``S`` = shortest path pickup → drop-off), drawn at random among
    the nodes that fit. The path is resampled every 15 s at the trip's own mean speed (clipped
    to 15–45 km/h), with 4 m Gaussian GPS noise; the tail keeps its 15 s spacing, shifted in
    time. The label ``ratio`` is the *measured* one: the jump-filtered driven length of the
    generated fixes (:func:`tracking.trips.trip_distances`) over ``S`` — below the target, since
    15 s chords cut the path's corners.

Everything is seeded (``numpy.random.default_rng(seed)``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import NDArray
from scipy.sparse.csgraph import dijkstra

from geo.crs import WGS84, haversine_m
from geo.roads import (
    RoadGraph,
    build_road_graph,
    read_libcity_roads,
    shortest_path_lengths,
    snap_to_roads,
)
from tracking import frames as fr
from tracking.porto import read_porto_trips
from tracking.trips import assign_trip_ids, detect_trips, trip_distances

DATA = Path(__file__).resolve().parents[3] / "data" / "porto"
ROADS_CSV = DATA / "network" / "porto_roads_libcity.csv"
TRIPS_CSV = DATA / "derived" / "trips_combined.csv"
NETWORK_BBOX = (-8.689284, 41.139909, -8.555941, 41.185824)  # PROVENANCE.md §4
STEP_S = 15


def porto_graph() -> RoadGraph:
    """The Porto LibCity network as a road graph."""
    return build_road_graph(read_libcity_roads(ROADS_CSV))


def porto_pool(
    graph: RoadGraph, *, min_reference_m: float = 2500.0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pings and meter trips of the pool (see the module docstring), trips with ``shortest_m``."""
    pings, _, _ = read_porto_trips(TRIPS_CSV)
    trips = detect_trips(pings, max_gap_s=60)
    trip_of = assign_trip_ids(pings, trips)
    lon0, lat0, lon1, lat1 = NETWORK_BBOX
    inside = pings[fr.LON].between(lon0, lon1) & pings[fr.LAT].between(lat0, lat1)
    all_in = inside.groupby(trip_of).all()
    trips = trips.loc[trips["trip_id"].map(all_in).fillna(False).astype(bool).to_numpy()]
    trips = trips.loc[trips["n_fixes"].to_numpy() >= 8].reset_index(drop=True)
    ref = shortest_path_lengths(
        graph,
        trips[["pickup_lon", "pickup_lat"]].to_numpy(),
        trips[["dropoff_lon", "dropoff_lat"]].to_numpy(),
    )
    trips["shortest_m"] = ref["length_m"].to_numpy()
    trips = trips.loc[(trips["shortest_m"] >= min_reference_m).to_numpy()].reset_index(drop=True)
    keep = trip_of.isin(set(trips["trip_id"])).to_numpy()
    return pings.loc[keep].reset_index(drop=True), trips


def sample_trips(trips: pd.DataFrame, *, n: int, seed: int) -> pd.DataFrame:
    """``n`` pool trips drawn without replacement (all if fewer)."""
    rng = np.random.default_rng(seed)
    take = rng.choice(len(trips), size=min(n, len(trips)), replace=False)
    return trips.iloc[np.sort(take)].reset_index(drop=True)


def trip_pings(pings: pd.DataFrame, trips: pd.DataFrame) -> pd.DataFrame:
    """The fixes of ``trips`` (unmodified)."""
    trip_of = assign_trip_ids(pings, trips)
    return pings.loc[trip_of.notna().to_numpy()].reset_index(drop=True)


def make_detours(
    graph: RoadGraph,
    pings: pd.DataFrame,
    trips: pd.DataFrame,
    *,
    seed: int,
    ratio_range: tuple[float, float] = (1.4, 2.0),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Detoured copies of ``trips`` (pings frame, one vehicle per trip) and their labels.

    Returns
    -------
    pings : pandas.DataFrame
        Fixes of the detoured trips (``vehicle_id`` = original + ``"-d<k>"``, meter occupied).
    labels : pandas.DataFrame
        ``vehicle_id``, ``source_trip_id``, ``target_ratio``, ``ratio`` (measured), ``shortest_m``.
    """
    rng = np.random.default_rng(seed)
    trip_of = assign_trip_ids(pings, trips).to_numpy(dtype=object)
    to_xy = pyproj.Transformer.from_crs(WGS84, graph.crs, always_xy=True)
    to_ll = pyproj.Transformer.from_crs(graph.crs, WGS84, always_xy=True)
    reverse = graph.matrix.T.tocsr()
    frames = []
    labels = []
    for k, trip in enumerate(trips.itertuples(index=False)):
        sel = pings.loc[trip_of == trip.trip_id]
        ts = sel[fr.TIMESTAMP].to_numpy(dtype="datetime64[ns]").view(np.int64)
        lat = sel[fr.LAT].to_numpy()
        lon = sel[fr.LON].to_numpy()
        target = float(rng.uniform(*ratio_range))
        made = _detour(graph, reverse, ts, lat, lon, trip.shortest_m, target, rng, to_xy, to_ll)
        if made is None:
            continue
        n_ts, n_lat, n_lon = made
        driven, _, _ = trip_distances(
            n_ts, n_lat, n_lon, np.array([0]), np.array([len(n_ts) - 1]), max_speed_kmh=250.0
        )
        vehicle = f"{trip.vehicle_id}-d{k}"
        frames.append(
            pd.DataFrame(
                {
                    fr.VEHICLE_ID: vehicle,
                    fr.TIMESTAMP: pd.to_datetime(n_ts, utc=True),
                    fr.LAT: n_lat,
                    fr.LON: n_lon,
                    fr.METER: "occupied",
                    fr.ROW: int(sel[fr.ROW].iloc[0]),
                }
            )
        )
        labels.append(
            {
                "vehicle_id": vehicle,
                "source_trip_id": trip.trip_id,
                "target_ratio": target,
                "ratio": float(driven[0]) / float(trip.shortest_m),
                "shortest_m": float(trip.shortest_m),
            }
        )
    out = pd.concat(frames, ignore_index=True)
    out[fr.METER] = out[fr.METER].astype("str")
    out[fr.VEHICLE_ID] = out[fr.VEHICLE_ID].astype("str")
    return out.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], ignore_index=True), pd.DataFrame(labels)


def _chord_m(lat: NDArray[np.float64], lon: NDArray[np.float64]) -> float:
    return float(haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]).sum()) if len(lat) > 1 else 0.0


def _detour(
    graph: RoadGraph,
    reverse: object,
    ts: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    shortest_m: float,
    target: float,
    rng: np.random.Generator,
    to_xy: pyproj.Transformer,
    to_ll: pyproj.Transformer,
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]] | None:
    n = len(ts)
    ia, ib = n // 4, n - 1 - n // 4
    head_m = _chord_m(lat[: ia + 1], lon[: ia + 1])
    tail_m = _chord_m(lat[ib:], lon[ib:])
    need = target * shortest_m - head_m - tail_m
    if need <= 0:
        return None
    snaps = snap_to_roads(graph, np.array([[lon[ia], lat[ia]], [lon[ib], lat[ib]]]))
    if (snaps["piece"] < 0).any():
        return None
    a = int(graph.piece_v[int(snaps["piece"].iat[0])])
    b = int(graph.piece_u[int(snaps["piece"].iat[1])])
    d_from_a = dijkstra(graph.matrix, directed=True, indices=a)
    d_to_b = dijkstra(reverse, directed=True, indices=b)
    total = d_from_a + d_to_b
    fits = np.flatnonzero((total >= need) & (total <= 1.1 * need))
    if not len(fits):
        return None
    x = int(rng.choice(fits))
    via = np.array([graph.node_lon[x], graph.node_lat[x]])
    legs = shortest_path_lengths(
        graph,
        np.array([[lon[ia], lat[ia]], via]),
        np.array([via, [lon[ib], lat[ib]]]),
        with_geometry=True,
    )
    if legs["geometry"].isna().any():
        return None
    coords = np.concatenate([shapely.get_coordinates(g) for g in legs["geometry"]])
    x_m, y_m = to_xy.transform(coords[:, 0], coords[:, 1])
    path = shapely.linestrings(np.column_stack((x_m, y_m)))
    duration_s = (ts[-1] - ts[0]) / 1e9
    speed = float(np.clip(_chord_m(lat, lon) / max(duration_s, 1.0), 15 / 3.6, 45 / 3.6))
    along = np.arange(STEP_S * speed, path.length, STEP_S * speed)
    pts = shapely.get_coordinates(shapely.line_interpolate_point(path, along))
    pts = pts + rng.normal(0.0, 4.0, size=pts.shape)
    m_lon, m_lat = to_ll.transform(pts[:, 0], pts[:, 1])
    step_ns = STEP_S * 1_000_000_000
    m_ts = ts[ia] + step_ns * np.arange(1, len(pts) + 1)
    tail_ts = ts[ib:] - ts[ib] + m_ts[-1] + step_ns if len(pts) else ts[ib:]
    return (
        np.concatenate((ts[: ia + 1], m_ts, tail_ts)).astype(np.int64),
        np.concatenate((lat[: ia + 1], np.asarray(m_lat), lat[ib:])),
        np.concatenate((lon[: ia + 1], np.asarray(m_lon), lon[ib:])),
    )
