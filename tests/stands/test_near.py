"""Presence near a stand that visits do not see: the queue beyond the polygon, a silent tracker."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from factories import circle_stands, make_pings, make_track

from stands._errors import MissingColumnError, ThresholdError
from stands.near import (
    MAX_BOARDED_SILENCE_S,
    MAX_SILENCE_S,
    advance_near_dwells,
    near_dwells,
    open_arrivals,
)

LICENCES = pd.DataFrame({"vehicle_id": ["A"], "stand_id": ["S1"]})
STANDS = circle_stands()


def _wait(t0: float, seconds: float, north_m: float, *, step: float = 15.0) -> list:
    """Fixes every ``step`` s at ``north_m`` metres north of the stand's centre."""
    return [(t0 + k * step, north_m, 0.0) for k in range(int(seconds // step) + 1)]


def _drive(t0: float, from_m: float, to_m: float, *, step: float = 15.0) -> list:
    """Fixes every ``step`` s at 10 m/s between two points north of the centre."""
    n = max(1, int(abs(to_m - from_m) / 150))
    return [(t0 + k * step, from_m + (to_m - from_m) * k / n, 0.0) for k in range(1, n + 1)]


def _dwells(points: list, **kw: object) -> pd.DataFrame:
    return near_dwells(make_pings(make_track("A", points, meter="free")), LICENCES, STANDS, **kw)  # type: ignore[arg-type]


class TestNearDwells:
    def test_queue_beyond_the_polygon_is_a_near_dwell(self) -> None:
        """40 min at 55 m from the centre (25 m beyond a 30 m stand): one dwell, 'perto', from
        the arrival there (t = 180 s) to the last fix there (2,700 s)."""
        points = _drive(0, 2000, 55) + _wait(300, 2400, 55) + _drive(2715, 55, 2000)
        found = _dwells(points)
        assert len(found) == 1
        row = found.iloc[0]
        assert (row["how"], row["stand_id"], row["dwell_s"]) == ("perto", "S1", 2520.0)
        assert not bool(row["boarded"])

    def test_a_wait_farther_than_reach_is_not_presence(self) -> None:
        """The same wait 120 m from the centre (90 m beyond): nothing."""
        points = _drive(0, 2000, 120) + _wait(300, 2400, 120) + _drive(2715, 120, 2000)
        assert _dwells(points).empty
        assert len(_dwells(points, reach_m=100.0)) == 1

    def test_passing_by_is_not_presence(self) -> None:
        """Driving past at 10 m/s: near for a fix or two, under a minute."""
        points = [(k * 15.0, -1000 + 150 * k, 0.0) for k in range(15)]
        assert _dwells(points).empty

    def test_wholly_inside_is_the_visits(self) -> None:
        """A wait inside the polygon is a visit (``stands/visits.py``), not a near dwell."""
        points = _drive(0, 2000, 10) + _wait(300, 2400, 10) + _drive(2715, 10, 2000)
        assert _dwells(points).empty

    def test_silence_near_the_stand_is_a_silent_dwell(self) -> None:
        """Ignition off: a fix 150 m before (t = 210 s), 41 min of silence, a fix 150 m after."""
        points = _drive(0, 2000, -150) + [(2700.0, 150.0, 0.0)] + _drive(2700, 150, 2000)
        found = _dwells(points)
        assert len(found) == 1
        assert found.iloc[0]["how"] == "silencio"
        assert found.iloc[0]["dwell_s"] == pytest.approx(2700.0 - 210.0)

    def test_far_or_long_silence_is_not_presence(self) -> None:
        """400 m away, or a silence of more than three hours (a night parked): nothing."""
        far = _drive(0, 2000, -400) + [(2700.0, 400.0, 0.0)] + _drive(2700, 400, 2000)
        assert _dwells(far).empty
        night = MAX_SILENCE_S + 600
        long = _drive(0, 2000, -150) + [(night, 150.0, 0.0)] + _drive(night, 150, 2000)
        assert _dwells(long).empty

    def test_a_long_wait_ended_by_a_boarding_is_presence(self) -> None:
        """A quiet stand: Livre at the stand (t = 210 s), four hours of silence, the next fix
        150 m away already Ocupado (the passenger boarded there): a silent dwell; ended Livre
        (a night parked), or longer than a shift, nothing."""
        wait = 4 * 3600.0
        before = _drive(0, 2000, -150)
        points = before + [(wait, 150.0, 0.0)] + _drive(wait, 150, 2000)
        meters = ["free"] * len(before) + ["occupied"] * (len(points) - len(before))
        track = make_pings(make_track("A", points, meter=meters))
        found = near_dwells(track, LICENCES, STANDS)
        assert len(found) == 1 and found.iloc[0]["how"] == "silencio"
        assert found.iloc[0]["dwell_s"] == pytest.approx(wait - 210.0)
        assert _dwells(points).empty  # all Livre: a night parked
        shift = MAX_BOARDED_SILENCE_S + 600
        late = before + [(shift, 150.0, 0.0)] + _drive(shift, 150, 2000)
        assert near_dwells(make_pings(make_track("A", late, meter=meters)), LICENCES, STANDS).empty

    def test_a_fix_away_breaks_the_chain(self) -> None:
        """Two 45 s waits at 55 m split by a fix 1 km away: neither lasts a minute."""
        points = _wait(0, 45, 55) + [(60.0, 1000.0, 0.0)] + _wait(75, 45, 55)
        assert _dwells(points).empty
        assert len(_dwells(points, min_presence_s=30.0)) == 2

    def test_each_licensed_stand_of_a_vehicle(self) -> None:
        """Licensed at S1 and at S2 (1 km north): a wait beyond each is a dwell at that one."""
        s2 = STANDS.assign(stand_id="S2").set_geometry(STANDS.translate(0, 0.009))
        stands = pd.concat([STANDS, s2], ignore_index=True)
        licences = pd.DataFrame({"vehicle_id": ["A", "A"], "stand_id": ["S1", "S2"]})
        north = 0.009 * 111_195  # S2's centre, metres north
        points = _wait(0, 600, 55) + _drive(600, 55, north + 55) + _wait(900, 600, north + 55)
        pings = make_pings(make_track("A", points, meter="free"))
        found = near_dwells(pings, licences, stands)
        assert found["stand_id"].tolist() == ["S1", "S2"]

    def test_only_the_licensed_stand_counts(self) -> None:
        """A vehicle without a licence at S1 has no dwell there."""
        points = _wait(0, 2400, 55)
        pings = make_pings(make_track("B", points, meter="free"))
        assert near_dwells(pings, LICENCES, STANDS).empty

    @pytest.mark.parametrize("cuts", [[1], [60], [100, 161], [30, 90, 150, 170]])
    def test_calls_give_the_dwells_of_one_call(self, cuts: list[int]) -> None:
        """Fed in pieces (cut inside a chain, inside a silence), the same dwells as at once."""
        points = (
            _drive(0, 2000, 55)
            + _wait(300, 1200, 55)
            + _drive(1515, 55, -150)
            + [(4000.0, 150.0, 0.0)]
            + _drive(4000, 150, 2000)
        )
        pings = make_pings(make_track("A", points, meter="free"))
        whole = near_dwells(pings, LICENCES, STANDS)
        assert list(whole["how"]) == ["perto", "silencio"]
        states: dict = {}
        parts = []
        bounds = [0, *cuts, len(pings)]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            states, found = advance_near_dwells(
                states, pings.iloc[lo:hi], licences=LICENCES, stands=STANDS
            )
            states = json.loads(json.dumps(states))
            parts.append(found)
        states, found = advance_near_dwells(
            states, pings.iloc[:0], licences=LICENCES, stands=STANDS, final=True
        )
        got = pd.concat([*parts, found], ignore_index=True)
        pd.testing.assert_frame_equal(got, whole)
        assert states["A"]["open"] == {}

    def test_open_chain_holds_its_start(self) -> None:
        """While waiting, the chain is open: its arrival is what the live kernel holds."""
        pings = make_pings(make_track("A", _wait(0, 600, 55), meter="free"))
        states, found = advance_near_dwells({}, pings, licences=LICENCES, stands=STANDS)
        assert found.empty
        start = int(pings["timestamp"].iloc[0].value)
        assert open_arrivals(states) == {"A": start}

    def test_bad_input_raises(self) -> None:
        pings = make_pings(make_track("A", _wait(0, 60, 55), meter="free"))
        with pytest.raises(ThresholdError, match="reach_m"):
            near_dwells(pings, LICENCES, STANDS, reach_m=-1.0)
        with pytest.raises(ThresholdError, match="silent_reach_m"):
            near_dwells(pings, LICENCES, STANDS, reach_m=100.0, silent_reach_m=50.0)
        with pytest.raises(MissingColumnError, match="lat"):
            advance_near_dwells(
                {}, pings.drop(columns="lat"), licences=LICENCES, stands=STANDS, final=True
            )

    def test_rows_point_to_the_fixes(self) -> None:
        """first_row and last_row are the source rows of the chain's ends."""
        pings = make_pings(make_track("A", _wait(0, 600, 55), meter="free"))
        pings["row"] = np.arange(10, 10 + len(pings))
        found = near_dwells(pings, LICENCES, STANDS)
        assert (found.iloc[0]["first_row"], found.iloc[0]["last_row"]) == (10, 10 + len(pings) - 1)
