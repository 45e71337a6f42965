"""Map matching: lengths that do not depend on sampling, outliers, missing streets, errors."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from geo._errors import RoadGraphError
from geo.crs import haversine_m
from geo.matching import match_tracks
from geo.roads import build_road_graph, path_pieces_sum, read_libcity_roads, routes_between

LON0, LAT0 = -51.22, -30.03
DEG_PER_M = 1 / 111_195.0
SPACING_M = 200.0
N = 8  # an 8 × 8 grid of two-way streets, 200 m apart
NS = 1_000_000_000
ROADS_CSV = (
    Path(__file__).resolve().parents[2] / "data" / "porto" / "network" / "porto_roads_libcity.csv"
)


def _lonlat(north_m, east_m):
    north_m, east_m = np.asarray(north_m, dtype=float), np.asarray(east_m, dtype=float)
    return (
        LON0 + east_m * DEG_PER_M / np.cos(np.radians(LAT0)),
        LAT0 + north_m * DEG_PER_M,
    )


def _grid(skip=()):
    """Two-way grid streets; ``skip`` names blocks' edges to leave out as ((n0, e0), (n1, e1))."""
    lines, oneway = [], []
    for i in range(N):
        for j in range(N - 1):
            for a, b in (((i, j), (i, j + 1)), ((j, i), (j + 1, i))):
                if (a, b) in skip:
                    continue
                lon, lat = _lonlat(
                    [a[0] * SPACING_M, b[0] * SPACING_M], [a[1] * SPACING_M, b[1] * SPACING_M]
                )
                lines.append(shapely.LineString(np.column_stack((lon, lat))))
                oneway.append(False)
    return build_road_graph(gpd.GeoDataFrame({"oneway": oneway}, geometry=lines, crs=4326))


GRID = _grid()


def _drive(corners_m, *, step_s, speed_ms=8.0, noise_m=0.0, seed=0):
    """Fixes every ``step_s`` along the polyline ``corners_m`` [(north, east), ...]."""
    rng = np.random.default_rng(seed)
    pts = np.asarray(corners_m, dtype=float)
    seg = np.hypot(*np.diff(pts, axis=0).T)
    along = np.r_[0.0, np.cumsum(seg)]
    s = np.arange(0.0, along[-1], speed_ms * step_s)
    s = np.r_[s, along[-1]]
    north = np.interp(s, along, pts[:, 0]) + rng.normal(0, noise_m, len(s))
    east = np.interp(s, along, pts[:, 1]) + rng.normal(0, noise_m, len(s))
    lon, lat = _lonlat(north, east)
    ts = (s / speed_ms * NS).astype(np.int64)
    return np.asarray(lon), np.asarray(lat), ts, float(along[-1])


def _match(lon, lat, ts, **kw):
    return match_tracks(GRID, np.zeros(len(lon), dtype=np.int64), lon, lat, ts, **kw)


ZIGZAG = [(0, 0), (0, 400), (400, 400), (400, 800), (800, 800), (800, 1200), (1200, 1200)]


class TestMatchTracks:
    @pytest.mark.parametrize("step_s", [5, 15, 30])
    def test_length_does_not_depend_on_sampling(self, step_s):
        """A zigzag along grid streets measures its true length at 5, 15 or 30 s per fix."""
        lon, lat, ts, true_m = _drive(ZIGZAG, step_s=step_s, noise_m=8.0, seed=step_s)
        m = _match(lon, lat, ts)
        row = m.tracks.iloc[0]
        assert row["matched_m"] == pytest.approx(true_m, rel=0.04)
        assert row["n_breaks"] == 0 and row["n_jumps"] == 0

    def test_chords_of_sparse_fixes_cut_corners(self):
        """The same zigzag at 30 s: the length along the fixes is well below the truth."""
        lon, lat, _, true_m = _drive(ZIGZAG, step_s=30, speed_ms=12.0)
        chords = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]).sum()
        assert chords < 0.9 * true_m

    def test_waiting_adds_nothing(self):
        """Two minutes of jitter at a light add no length (fixes within 2·sigma are skipped)."""
        lon, lat, ts, true_m = _drive([(0, 0), (0, 600)], step_s=5)
        rng = np.random.default_rng(3)
        k = len(lon) // 2
        wait = 24
        lon = np.r_[lon[:k], lon[k] + rng.normal(0, 3e-5, wait), lon[k:]]
        lat = np.r_[lat[:k], lat[k] + rng.normal(0, 3e-5, wait), lat[k:]]
        ts = np.r_[ts[:k], ts[k] + 5 * NS * np.arange(1, wait + 1), ts[k:] + 5 * NS * (wait + 1)]
        m = _match(lon, lat, ts)
        assert m.tracks["matched_m"].iat[0] == pytest.approx(true_m, rel=0.03)

    def test_multipath_outlier_does_not_lengthen(self):
        """A single fix 2 km away (an impossible jump) adds nothing to the matched length."""
        lon, lat, ts, true_m = _drive([(0, 0), (0, 1200)], step_s=10)
        far_lon, far_lat = _lonlat(1400.0, 600.0)
        k = len(lon) // 2
        lon[k], lat[k] = far_lon, far_lat
        m = _match(lon, lat, ts)
        assert m.tracks["matched_m"].iat[0] <= true_m * 1.02

    def test_sideways_outlier_near_another_street_is_skipped(self):
        """A fix thrown 190 m sideways, 10 m from the parallel street (mid-block), is skipped:
        not counted as two straight jumps out and back."""
        lon, lat, ts, true_m = _drive([(0, 0), (0, 1200)], step_s=15, noise_m=3.0, seed=4)
        k = len(lon) // 2
        lon[k], lat[k] = (float(v) for v in _lonlat(190.0, k * 8.0 * 15.0 - 60.0))
        m = _match(lon, lat, ts)
        row = m.tracks.iloc[0]
        assert row["n_skipped"] == 1
        assert row["matched_m"] == pytest.approx(true_m, rel=0.03)
        assert m.fix_piece[k] == -1  # the outlier has no position

    def test_u_turn_tip_is_not_skipped(self):
        """Driving 300 m past a junction and back: the far fix is the route, not an outlier."""
        lon, lat, ts, true_m = _drive([(0, 0), (0, 700), (0, 400), (200, 400)], step_s=15)
        m = _match(lon, lat, ts)
        row = m.tracks.iloc[0]
        assert row["n_skipped"] == 0
        assert row["matched_m"] == pytest.approx(true_m, rel=0.1)

    def test_a_wait_in_noisy_fixes_adds_little(self):
        """Two minutes stopped with 10 m GPS noise, between two drives: under 30 m added."""
        rng = np.random.default_rng(8)
        a = _drive([(0, 0), (0, 400)], step_s=5)
        b = _drive([(0, 400), (0, 800)], step_s=5)
        wait = 24
        w_lon, w_lat = _lonlat(rng.normal(0, 7, wait), 400 + rng.normal(0, 7, wait))
        lon = np.r_[a[0], w_lon, b[0]]
        lat = np.r_[a[1], w_lat, b[1]]
        t_wait = a[2][-1] + 5 * NS * np.arange(1, wait + 1)
        ts = np.r_[a[2], t_wait, b[2] + t_wait[-1] + 5 * NS]
        m = _match(lon, lat, ts)
        assert m.tracks["matched_m"].iat[0] == pytest.approx(800.0, abs=30.0)

    def test_missing_street_is_a_jump_not_a_loop(self):
        """A street absent from the network counts as the straight move, never a loop around it."""
        graph = _grid(skip={((2, 2), (2, 3)), ((2, 3), (2, 4))})
        lon, lat, ts, true_m = _drive([(400, 0), (400, 1200)], step_s=15)
        m = match_tracks(graph, np.zeros(len(lon), dtype=np.int64), lon, lat, ts)
        row = m.tracks.iloc[0]
        assert row["n_jumps"] + row["n_skipped"] + row["n_breaks"] >= 1
        assert row["matched_m"] <= true_m * 1.05

    def test_loop_around_blocks_is_measured(self):
        """Circling a block twice before going on is in the matched length (a real detour)."""
        loop = [(0, 0), (0, 400), (200, 400), (200, 200), (0, 200), (0, 400)] * 1
        path = [*loop, (200, 400), (200, 200), (0, 200), (0, 400), (0, 1000)]
        lon, lat, ts, true_m = _drive(path, step_s=15, noise_m=5.0)
        m = _match(lon, lat, ts)
        assert m.tracks["matched_m"].iat[0] == pytest.approx(true_m, rel=0.08)

    def test_paths_sum_to_the_matched_length(self):
        """The pieces of the path returned add up to ``matched_m``."""
        lon, lat, ts, _ = _drive(ZIGZAG, step_s=15, noise_m=5.0, seed=1)
        m = _match(lon, lat, ts, with_paths=True)
        assert m.paths is not None
        total = path_pieces_sum(GRID, m.paths[0], weight="length")
        assert total == pytest.approx(m.tracks["matched_m"].iat[0], rel=1e-6)

    def test_several_tracks_and_positions(self):
        """Tracks are matched independently; every kept fix gets a position on its road."""
        a = _drive([(0, 0), (0, 800)], step_s=15)
        b = _drive([(800, 800), (0, 800)], step_s=15)
        lon = np.r_[a[0], b[0]]
        lat = np.r_[a[1], b[1]]
        ts = np.r_[a[2], b[2]]
        track = np.r_[np.zeros(len(a[0]), int), np.ones(len(b[0]), int)]
        m = match_tracks(GRID, track, lon, lat, ts)
        assert m.tracks["track"].tolist() == [0, 1]
        assert m.tracks["matched_m"].to_numpy() == pytest.approx([a[3], b[3]], rel=0.02)
        assert (m.fix_piece >= 0).all()
        origin = pd.DataFrame(
            {
                "piece": m.tracks["origin_piece"],
                "fraction": m.tracks["origin_fraction"],
                "snap_m": 0.0,
            }
        )
        dest = pd.DataFrame(
            {
                "piece": m.tracks["destination_piece"],
                "fraction": m.tracks["destination_fraction"],
                "snap_m": 0.0,
            }
        )
        ref = routes_between(GRID, origin, dest)
        assert ref["length_m"].to_numpy() == pytest.approx([800.0, 800.0], abs=20)

    def test_off_network_track(self):
        """A track far from every road has no matched length."""
        lon, lat, ts, _ = _drive([(5000, 5000), (5000, 5600)], step_s=15)
        m = _match(lon, lat, ts)
        assert np.isnan(m.tracks["matched_m"].iat[0])
        assert m.tracks["n_matched"].iat[0] == 0

    def test_real_porto_trip_matches_its_gps_length(self):
        """On the bundled Porto network a real 15 s track matches close to its GPS length."""
        graph = build_road_graph(read_libcity_roads(ROADS_CSV))
        lon = np.array([-8.6226, -8.6212, -8.6208, -8.6216, -8.6233, -8.6238, -8.6227])
        lat = np.array([41.1558, 41.1558, 41.1566, 41.1574, 41.1587, 41.1592, 41.1599])
        ts = np.arange(len(lon), dtype=np.int64) * 15 * NS
        m = match_tracks(graph, np.zeros(len(lon), dtype=np.int64), lon, lat, ts)
        gps = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]).sum()
        assert m.tracks["matched_m"].iat[0] == pytest.approx(gps, rel=0.25)


class TestMatchTracksErrors:
    def test_non_contiguous_tracks(self):
        """Tracks must be contiguous."""
        with pytest.raises(RoadGraphError, match="contíguas"):
            match_tracks(GRID, [0, 1, 0], [LON0] * 3, [LAT0] * 3, [0, 1, 2])

    def test_time_order(self):
        """Fixes of a track must be in time order."""
        with pytest.raises(RoadGraphError, match="ordem de tempo"):
            match_tracks(GRID, [0, 0], [LON0] * 2, [LAT0] * 2, [5, 1])

    @pytest.mark.parametrize(
        ("name", "value"), [("sigma_m", 0), ("radius_m", -1.0), ("max_candidates", 0)]
    )
    def test_bad_parameters(self, name, value):
        """Parameters out of range name themselves."""
        with pytest.raises(RoadGraphError, match=name):
            match_tracks(GRID, [0], [LON0], [LAT0], [0], **{name: value})

    def test_empty(self):
        """No fixes, no tracks."""
        m = match_tracks(GRID, [], [], [], [])
        assert m.tracks.empty and len(m.fix_piece) == 0
