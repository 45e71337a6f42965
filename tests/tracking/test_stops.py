"""Stop detection: time windows on irregular sampling, extents, silences, the numpy kernel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from factories import ORIGIN, at, make_pings, make_track

from geo.crs import haversine_m
from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError, PingFrameError
from tracking._geodesy import local_xy_m
from tracking.porto import read_porto_trips
from tracking.stops import detect_stops, stop_spans

DATA = Path(__file__).resolve().parents[2] / "data" / "porto" / "derived" / "trips_combined.csv"


def _drive(
    t0: float, n: int, *, north0: float = 0.0, step_m: float = 150.0
) -> list[tuple[float, float, float]]:
    """``n`` fixes 15 s apart driving north ``step_m`` per fix (36 km/h for 150 m)."""
    return [(t0 + 15 * k, north0 + step_m * (k + 1), 0.0) for k in range(n)]


def _wait(
    times: list[float], *, north: float = 0.0, jitter_m: float = 8.0
) -> list[tuple[float, float, float]]:
    """Fixes at ``times`` around one place, alternating ``jitter_m`` east and west."""
    return [(t, north, jitter_m if k % 2 else -jitter_m) for k, t in enumerate(times)]


class TestDetectStops:
    def test_one_stop_between_drives(self) -> None:
        """Drive, wait 5 min with GPS jitter, drive: one stop spanning the waiting fixes."""
        points = [
            *_drive(0, 4, north0=-750),
            *_wait([60 + 15 * k for k in range(21)]),
            *_drive(375, 4),
        ]
        stops = detect_stops(make_pings(make_track("V1", points)))
        assert len(stops) == 1
        stop = stops.iloc[0]
        assert stop["started_at"] == at(60) and stop["ended_at"] == at(360)
        assert stop["duration_s"] == 300.0 and stop["n_fixes"] == 21
        assert stop["stop_id"] == "V1-20240304T120100Z"
        assert haversine_m(stop["lat"], stop["lon"], *ORIGIN) < 1.0  # mean of the waiting fixes

    def test_contract_columns_and_dtypes(self) -> None:
        """STOP_COLUMNS (plus first/last ping) with explicit dtypes, also when empty."""
        stops = detect_stops(make_pings(make_track("V1", _wait([0, 100, 200]))))
        empty = detect_stops(make_pings(make_track("V1", _drive(0, 5))))
        for frame in (stops, empty):
            assert list(frame.columns)[: len(fr.STOP_COLUMNS)] == list(fr.STOP_COLUMNS)
            assert str(frame["started_at"].dtype) == "datetime64[ns, UTC]"
            assert str(frame["vehicle_id"].dtype) == "str"
            assert str(frame["n_fixes"].dtype) == "int64"
        assert len(stops) == 1 and empty.empty

    @pytest.mark.parametrize(
        ("times", "expected_s"),
        [
            ([0, 179], None),  # too short
            ([0, 180], 180.0),  # exactly the minimum
            ([0, 5, 100, 110, 250], 250.0),  # irregular sampling
            ([0, 1, 2, 3, 4, 5], None),  # many fixes, little time
        ],
    )
    def test_time_window_not_fix_count(self, times: list[float], expected_s: float | None) -> None:
        """Duration counts from first to last fix, whatever the number of fixes between."""
        stops = detect_stops(make_pings(make_track("V1", _wait(times))))
        assert stops["duration_s"].tolist() == ([] if expected_s is None else [expected_s])

    def test_silence_longer_than_max_gap_breaks_a_stop(self) -> None:
        """120 s + silence of 700 s + 120 s at one place: a stop only without the gap rule."""
        times = [0, 60, 120, 820, 880, 940]
        pings = make_pings(make_track("V1", _wait(times)))
        assert detect_stops(pings, max_gap_s=600).empty
        assert detect_stops(pings, max_gap_s=700)["duration_s"].tolist() == [940.0]
        assert detect_stops(pings, max_gap_s=None)["duration_s"].tolist() == [940.0]

    def test_silence_splits_into_two_stops(self) -> None:
        """Each side of a long silence long enough on its own: two stops, none across it."""
        times = [0, 100, 200, 1000, 1100, 1200]
        stops = detect_stops(make_pings(make_track("V1", _wait(times))), max_gap_s=600)
        assert stops["started_at"].tolist() == [at(0), at(1000)]
        assert stops["ended_at"].tolist() == [at(200), at(1200)]

    def test_extent_is_bounded_by_max_diameter(self) -> None:
        """Creeping 3 m every 15 s for 10 min: stops never span more than 50 m."""
        points = [(15 * k, 3.0 * k, 0.0) for k in range(41)]  # 120 m in total
        pings = make_pings(make_track("V1", points))
        stops = detect_stops(pings, max_diameter_m=50, min_duration_s=180)
        assert stops["n_fixes"].tolist() == [17, 17]  # 48 m each; 51 m would not fit
        for _, stop in stops.iterrows():
            inside = pings.iloc[stop["first_ping"] : stop["last_ping"] + 1]
            span = haversine_m(inside["lat"].min(), 0.0, inside["lat"].max(), 0.0)
            assert span <= 50.0

    def test_jitter_wider_than_diameter_is_no_stop(self) -> None:
        """Fixes alternating 60 m apart are never within a 50 m extent."""
        pings = make_pings(make_track("V1", _wait([15 * k for k in range(30)], jitter_m=30.0)))
        assert detect_stops(pings).empty
        assert len(detect_stops(pings, max_diameter_m=61)) == 1

    def test_vehicles_are_independent(self) -> None:
        """Two vehicles waiting at the same place: one stop each, never one across them."""
        times = [0, 60, 120, 180, 240]
        rows = make_track("A", _wait(times[:2])) + make_track("B", _wait(times[2:]))
        assert detect_stops(make_pings(rows)).empty
        rows = make_track("A", _wait(times)) + make_track("B", _wait(times))
        stops = detect_stops(make_pings(rows))
        assert stops["vehicle_id"].tolist() == ["A", "B"]

    def test_unsorted_input_is_sorted(self) -> None:
        """A shuffled frame with any index gives the same stops as the sorted one."""
        points = [
            *_drive(0, 3, north0=-600),
            *_wait([45 + 15 * k for k in range(15)]),
            *_drive(300, 3),
        ]
        pings = make_pings(make_track("V1", points) + make_track("V0", _wait([0, 100, 200])))
        shuffled = pings.sample(frac=1.0, random_state=1)
        shuffled.index = shuffled.index * 10
        expected = detect_stops(pings)
        pd.testing.assert_frame_equal(detect_stops(shuffled), expected)
        assert expected["vehicle_id"].tolist() == ["V0", "V1"]

    def test_empty_and_single_fix(self) -> None:
        """No fixes or one fix: an empty, typed frame."""
        assert detect_stops(make_pings([])).empty
        assert detect_stops(make_pings(make_track("V1", [(0, 0, 0)]))).empty

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"max_diameter_m": 0}, "'max_diameter_m' era 0"),
            ({"min_duration_s": -1}, "'min_duration_s' era -1"),
            ({"max_gap_s": 0}, "'max_gap_s' era 0"),
        ],
    )
    def test_bad_thresholds(self, kwargs: dict[str, Any], match: str) -> None:
        """Out-of-range thresholds raise a named error naming the argument."""
        with pytest.raises(InvalidParameterError, match=match):
            detect_stops(make_pings([]), **kwargs)

    def test_frame_errors(self) -> None:
        """A frame without lon, or with naive timestamps, is refused."""
        pings = make_pings(make_track("V1", _wait([0, 100])))
        with pytest.raises(MissingColumnsError, match="lon"):
            detect_stops(pings.drop(columns=["lon"]))
        naive = pings.assign(timestamp=pings["timestamp"].dt.tz_localize(None))
        with pytest.raises(PingFrameError, match="fuso"):
            detect_stops(naive)

    def test_real_porto_stops_fit_their_diameter(self) -> None:
        """On real Porto tracks every stop's fixes are pairwise within 50 m (0.5 % tolerance)."""
        pings, _, _ = read_porto_trips(DATA, now=pd.Timestamp("2024-01-01T00:00:00Z"))
        stops = detect_stops(pings, max_diameter_m=50.0, min_duration_s=180.0)
        assert len(stops) > 100
        assert (stops["duration_s"] >= 180.0).all()
        for _, stop in stops.iterrows():
            inside = pings.iloc[stop["first_ping"] : stop["last_ping"] + 1]
            lat = inside["lat"].to_numpy()
            lon = inside["lon"].to_numpy()
            pairwise = haversine_m(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
            assert pairwise.max() <= 50.0 * 1.005
            assert (inside["vehicle_id"] == stop["vehicle_id"]).all()


def _reference(
    codes: np.ndarray,
    ts: np.ndarray,
    lat: np.ndarray,
    lon: np.ndarray,
    d: float,
    md: float,
    mg: float | None,
) -> list[tuple[int, int]]:
    """Fix-by-fix statement of the definition: from each fix, grow while the box fits."""
    lat0 = np.array([lat[codes == c].mean() for c in codes])
    x, y = local_xy_m(lat, lon, lat0)
    out: list[tuple[int, int]] = []
    i, n = 0, len(ts)
    while i < n:
        j = i
        box = (x[i], x[i], y[i], y[i])
        while (
            j + 1 < n and codes[j + 1] == codes[i] and (mg is None or ts[j + 1] - ts[j] <= mg * 1e9)
        ):
            grown = (
                min(box[0], x[j + 1]),
                max(box[1], x[j + 1]),
                min(box[2], y[j + 1]),
                max(box[3], y[j + 1]),
            )
            if np.hypot(grown[1] - grown[0], grown[3] - grown[2]) > d:
                break
            box = grown
            j += 1
        if j > i and ts[j] - ts[i] >= md * 1e9:
            out.append((i, j))
            i = j + 1
        else:
            i += 1
    return out


class TestStopSpans:
    @pytest.mark.parametrize("seed", range(40))
    def test_kernel_matches_fix_by_fix_definition(self, seed: int) -> None:
        """The vectorised kernel finds exactly the stops of a plain fix-by-fix loop."""
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 300))
        codes = np.sort(rng.integers(0, 3, n)).astype(np.int64)
        ts = (np.cumsum(rng.choice([1, 5, 15, 30, 60, 400], n)) * 1_000_000_000).astype(np.int64)
        slow = rng.random(n) < 0.7
        north = np.cumsum(np.where(slow, rng.normal(0, 5, n), rng.normal(0, 80, n)))
        east = np.cumsum(np.where(slow, rng.normal(0, 5, n), rng.normal(0, 80, n)))
        lat = -30.0 + north / 111_195.0
        lon = -51.0 + east / 96_300.0
        d = float(rng.choice([20.0, 50.0, 100.0]))
        md = float(rng.choice([0.0, 30.0, 180.0, 600.0]))
        mg = [None, 300.0, 100.0][int(rng.integers(3))]
        first, last = stop_spans(
            codes, ts, lat, lon, max_diameter_m=d, min_duration_s=md, max_gap_s=mg
        )
        assert list(zip(first.tolist(), last.tolist(), strict=True)) == _reference(
            codes, ts, lat, lon, d, md, mg
        )
