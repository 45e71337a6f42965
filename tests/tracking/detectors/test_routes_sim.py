"""routes_sim: the simulated longer_route set is what its labels say (not the detector)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyproj
import pytest
import shapely

from geo.roads import build_road_graph, read_libcity_roads, shortest_path_lengths, snap_to_roads
from tracking.trips import detect_trips
from tracking.validate import validate_pings

sys.path.append(str(Path(__file__).resolve().parent))
import routes_sim  # noqa: E402

SEED = 11


@pytest.fixture(scope="module")
def net():
    return routes_sim.load_network()


@pytest.fixture(scope="module")
def graph():
    return build_road_graph(read_libcity_roads(routes_sim.NETWORK_CSV))


@pytest.fixture(scope="module")
def sim(net):
    return routes_sim.simulate_trips(n_negative=8, n_positive=8, seed=SEED, network=net)


@pytest.fixture(scope="module")
def by_case(net):
    """Two trips of every case, each case forced in turn."""
    frames = []
    for i, case in enumerate(routes_sim.NEGATIVE_CASES):
        frames.append(
            routes_sim.simulate_trips(
                n_negative=2, n_positive=0, seed=100 + i, network=net, negative_cases={case: 1.0}
            )
        )
    for i, case in enumerate(routes_sim.POSITIVE_CASES):
        frames.append(
            routes_sim.simulate_trips(
                n_negative=0, n_positive=2, seed=200 + i, network=net, positive_cases={case: 1.0}
            )
        )
    return frames


def _to_utm(net, coords: np.ndarray) -> np.ndarray:
    t = pyproj.Transformer.from_crs(4326, net.crs, always_xy=True)
    x, y = t.transform(coords[:, 0], coords[:, 1])
    return np.column_stack((x, y))


def _utm_length(net, lines) -> np.ndarray:
    return np.array(
        [shapely.length(shapely.transform(g, lambda c: _to_utm(net, c))) for g in lines]
    )


class TestLabels:
    def test_columns_and_types(self, sim):
        """Pings have the contract's input columns in UTC; labels LABEL_COLUMNS, one per trip."""
        pings, labels, routes = sim
        assert list(pings.columns) == ["vehicle_id", "timestamp", "lat", "lon", "meter"]
        assert str(pings["timestamp"].dt.tz) == "UTC"
        assert list(labels.columns) == list(routes_sim.LABEL_COLUMNS)
        assert labels["vehicle_id"].is_unique
        assert set(pings["vehicle_id"]) == set(labels["vehicle_id"])
        assert labels["is_detour"].sum() == 8
        assert len(routes) == 2 * len(labels)

    def test_true_ratio_is_the_geometry(self, net, sim):
        """true_ratio = length of the driven path / length of the shortest path, both as drawn."""
        _, labels, routes = sim
        driven = routes.loc[routes["route"] == "driven"].set_index("vehicle_id").geometry
        shortest = routes.loc[routes["route"] == "shortest"].set_index("vehicle_id").geometry
        v = labels["vehicle_id"]
        driven_m = _utm_length(net, driven.loc[v])
        shortest_m = _utm_length(net, shortest.loc[v])
        np.testing.assert_allclose(driven_m, labels["true_driven_m"], rtol=1e-6)
        np.testing.assert_allclose(shortest_m, labels["shortest_m"], rtol=1e-6)
        np.testing.assert_allclose(driven_m / shortest_m, labels["true_ratio"], rtol=1e-6)

    def test_paths_run_on_the_roads_from_pickup_to_dropoff(self, graph, sim):
        """Every vertex of the drawn paths is on a road; they join the labelled pickup, drop-off."""
        _, labels, routes = sim
        coords = shapely.get_coordinates(routes.geometry.to_numpy())
        assert snap_to_roads(graph, coords, max_snap_m=5.0)["snap_m"].max() < 0.5
        first = shapely.get_coordinates(shapely.get_point(routes.geometry.to_numpy(), 0))
        last = shapely.get_coordinates(shapely.get_point(routes.geometry.to_numpy(), -1))
        ends = labels.set_index("vehicle_id").loc[routes["vehicle_id"]]
        np.testing.assert_allclose(first, ends[["pickup_lon", "pickup_lat"]], atol=1e-7)
        np.testing.assert_allclose(last, ends[["dropoff_lon", "dropoff_lat"]], atol=1e-7)

    def test_shortest_agrees_with_the_project_router(self, graph, sim):
        """The labelled shortest path is what geo.roads finds between the same points (±1 %)."""
        _, labels, _ = sim
        got = shortest_path_lengths(
            graph,
            labels[["pickup_lon", "pickup_lat"]].to_numpy(),
            labels[["dropoff_lon", "dropoff_lat"]].to_numpy(),
        )
        assert (got["status"] == "ok").all()
        np.testing.assert_allclose(got["length_m"], labels["shortest_m"], rtol=0.01, atol=5.0)

    def test_trip_lengths_in_range(self, sim):
        """Shortest paths are 1–15 km."""
        _, labels, _ = sim
        assert labels["shortest_m"].between(*routes_sim.TRIP_M).all()


class TestCases:
    def test_place_pairs_gather_the_ends(self, net):
        """With place_pairs, every pickup and drop-off lies in one of the pairs' districts (of
        radius 400 m): within 800 m of several other trips' ends; and each pickup at least 0.7
        km from its drop-off (centres 1.5 km or more apart, less the two radii)."""
        _, labels, _ = routes_sim.simulate_trips(
            n_negative=24, n_positive=0, seed=SEED, network=net, place_pairs=2
        )
        geod = pyproj.Geod(ellps="WGS84")
        for end in ("pickup", "dropoff"):
            lat, lon = labels[f"{end}_lat"].to_numpy(), labels[f"{end}_lon"].to_numpy()
            a, b = np.meshgrid(np.arange(len(lat)), np.arange(len(lat)))
            d = geod.inv(lon[a.ravel()], lat[a.ravel()], lon[b.ravel()], lat[b.ravel()])[2]
            near = (d.reshape(len(lat), len(lat)) <= 800.0 + 50.0).sum(axis=1) - 1
            assert near.min() >= 3  # 24 trips over 2 districts of each end
        apart = geod.inv(
            labels["pickup_lon"], labels["pickup_lat"], labels["dropoff_lon"], labels["dropoff_lat"]
        )[2]
        assert np.min(apart) >= 1500.0 - 800.0 - 50.0

    def test_negatives_within_their_bound(self, by_case):
        """shortest is 1.0; alternative is over 1 and at most 1.15; fastest is the quickest."""
        labels = pd.concat([lab for _, lab, _ in by_case[:3]], ignore_index=True)
        assert set(labels["case"]) == set(routes_sim.NEGATIVE_CASES)
        assert not labels["is_detour"].any()
        r = labels.set_index("case")["true_ratio"]
        np.testing.assert_allclose(r.loc[["shortest"]], 1.0, rtol=1e-9)
        assert ((r.loc[["alternative"]] > 1.0) & (r.loc[["alternative"]] <= 1.15)).all()
        fast = labels.loc[labels["case"] == "fastest"]
        assert (fast["route_time_s"] <= fast["shortest_time_s"] + 1e-6).all()
        np.testing.assert_allclose(fast["route_time_s"], fast["fastest_time_s"], rtol=1e-9)
        saving = 1 - fast["route_time_s"] / fast["shortest_time_s"]
        assert ((fast["true_ratio"] <= 1.15) | (saving >= routes_sim.FASTEST_MIN_SAVING)).all()
        assert (labels["legit_route_m"] == labels["true_driven_m"]).all()

    def test_detours_at_least_min_ratio(self, by_case):
        """Every detour case is labelled as such and drives at least 1.4 × the shortest path."""
        labels = pd.concat([lab for _, lab, _ in by_case[3:]], ignore_index=True)
        assert set(labels["case"]) == set(routes_sim.POSITIVE_CASES)
        assert labels["is_detour"].all()
        assert (labels["true_ratio"] >= routes_sim.MIN_DETOUR_RATIO).all()
        assert (labels["legit_route_m"] == labels["shortest_m"]).all()
        wp = labels.loc[labels["case"] == "waypoint", "n_waypoints"]
        assert wp.between(1, 2).all()
        assert labels.loc[labels["case"] == "loop", "laps"].between(1, 3).all()

    def test_unknown_case_raises(self, net):
        """A case name the generator does not know is an error."""
        with pytest.raises(ValueError, match="detour"):
            routes_sim.simulate_trips(
                n_negative=0, n_positive=1, seed=1, network=net, positive_cases={"detour": 1.0}
            )


class TestObservation:
    def test_sampling_in_range(self, sim):
        """Intervals are 0.8–1.2 × the trip's sampling (±1 s rounding), or up to 5 of them."""
        pings, labels, _ = sim
        assert labels["sampling_s"].between(*routes_sim.SAMPLING_S).all()
        dt = pings.groupby("vehicle_id")["timestamp"].diff().dt.total_seconds()
        s = pings["vehicle_id"].map(labels.set_index("vehicle_id")["sampling_s"])
        ok = dt.isna() | ((dt >= 0.8 * s - 1) & (dt <= 5 * 1.2 * s + 1))
        assert ok.all()
        median = (
            dt.groupby(pings["vehicle_id"]).median() / labels.set_index("vehicle_id")["sampling_s"]
        )
        assert median.between(0.8, 1.25).all()

    def test_noise_in_range(self, net, sim):
        """Occupied fixes lie off the driven path by about the trip's noise (RMS over axes)."""
        pings, labels, routes = sim
        assert labels["noise_m"].between(*routes_sim.NOISE_M).all()
        driven = routes.loc[routes["route"] == "driven"].set_index("vehicle_id").geometry
        ratios = []
        for row in labels.itertuples():
            if row.n_outliers:
                continue
            fixes = pings.loc[
                (pings["vehicle_id"] == row.vehicle_id) & (pings["meter"] == "occupied")
            ]
            xy = _to_utm(net, fixes[["lon", "lat"]].to_numpy())
            line = shapely.transform(driven.loc[row.vehicle_id], lambda c: _to_utm(net, c))
            off = shapely.distance(shapely.points(xy), line)
            # Off-path distance is about one axis of the error: RMS noise_m / sqrt(2).
            ratios.append(np.sqrt(np.mean(off**2)) / (row.noise_m / np.sqrt(2)))
        assert len(ratios) >= 8
        assert 0.75 <= np.median(ratios) <= 1.25

    def test_one_meter_trip_per_vehicle(self, sim):
        """Meter free, then occupied, then free; detect_trips finds one meter trip per vehicle."""
        pings, labels, _ = sim
        pattern = pings.groupby("vehicle_id")["meter"].agg(
            lambda m: "".join(k[0] for k, _ in itertools.groupby(m))
        )
        assert pattern.isin(["fof", "of", "fo", "o"]).all()
        assert (pattern.str.count("o") == 1).all()
        valid, rejected = validate_pings(
            pings.assign(row=np.arange(1, len(pings) + 1)), now=pd.Timestamp("2030-01-01", tz="UTC")
        )
        assert rejected.empty
        trips = detect_trips(valid)
        assert trips["vehicle_id"].value_counts().eq(1).all()
        assert set(trips["vehicle_id"]) == set(labels["vehicle_id"])
        t = trips.set_index("vehicle_id").join(
            labels.set_index("vehicle_id")[["meter_on", "meter_off"]]
        )
        assert (t["started_at"] >= t["meter_on"]).all()
        assert (t["ended_at"] <= t["meter_off"]).all()


class TestDeterminism:
    def test_same_seed_same_frames(self, net):
        """The same seed gives identical frames; another seed gives other trips."""
        a = routes_sim.simulate_trips(n_negative=2, n_positive=2, seed=5, network=net)
        b = routes_sim.simulate_trips(n_negative=2, n_positive=2, seed=5, network=net)
        c = routes_sim.simulate_trips(n_negative=2, n_positive=2, seed=6, network=net)
        pd.testing.assert_frame_equal(a[0], b[0])
        pd.testing.assert_frame_equal(a[1], b[1])
        assert a[2].geometry.geom_equals_exact(b[2].geometry, 0).all()
        assert not np.allclose(a[1]["true_driven_m"], c[1]["true_driven_m"])
