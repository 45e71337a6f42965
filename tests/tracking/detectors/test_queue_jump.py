from __future__ import annotations

import json
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from factories import make_pings, make_track, offset_m
from kernel_checks import cover_stands, cuttings, geojson_bytes, replay_visits, stand_fleet
from live_compare import concat_live

from geo.cover import build_stand_cover, match_stands
from geo.crs import haversine_m
from stands.visits import detect_visits
from tracking.detectors._errors import DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, empty_findings, validate_findings
from tracking.detectors.queue_jump import advance_queue_jump, detect_queue_jump

STAND = (0.0, 0.0, 30.0)  # north_m, east_m, radius_m of stand "S1"


def visits_for(pings: pd.DataFrame) -> pd.DataFrame:
    lat, lon = offset_m(STAND[0], STAND[1])
    inside = np.flatnonzero(haversine_m(pings["lat"], pings["lon"], lat, lon) <= STAND[2])
    memberships = pd.DataFrame({"ping_index": inside.astype(np.int64), "stand_id": "S1"})
    return detect_visits(pings, memberships, stands=_stand_frame(), max_gap_s=300.0)


def at_stand(
    vehicle: str,
    arrive: int,
    leave: int,
    *,
    meter: str | None = "free",
    board_at: int | None = None,
) -> list[dict]:
    """Approach from the south, stay at the stand (a fix every 30 s), leave north."""
    points = [(arrive - 60, -300.0, 0.0), (arrive - 30, -150.0, 0.0)]
    points += [(t, 1.0, 0.0) for t in range(arrive, leave + 1, 30)]
    points += [(leave + 30, 150.0, 0.0), (leave + 60, 300.0, 0.0)]
    meters = [meter] * len(points)
    if board_at is not None:
        meters = [("occupied" if t >= board_at else meter) for t, _, _ in points]
    return make_track(vehicle, points, meter=meters)


def drop_off(vehicle: str, arrive: int, leave: int, *, meter_on_m: float) -> list[dict]:
    """Arrive occupied, the passenger leaves at the stand, wait free, leave north; the meter
    comes on 30 s after the last fix inside, ``meter_on_m`` metres north of the stand's centre."""
    points = [(arrive - 60, -300.0, 0.0), (arrive - 30, -150.0, 0.0)]
    points += [(t, 1.0, 0.0) for t in range(arrive, leave + 1, 30)]
    points += [(leave + 30, meter_on_m, 0.0), (leave + 60, meter_on_m + 150.0, 0.0)]
    meters = ["occupied"] * 3 + ["free"] * (len(points) - 5) + ["occupied"] * 2
    return make_track(vehicle, points, meter=meters)


def split_wait(away_from: int | None, away_s: int, *, from_away_at: int) -> list[dict]:
    """v1 at the stand from 0 s, its fixes 80 m away (noise beyond the exit grace) for
    ``away_s`` from ``away_from``, boarding at 1200 s; without ``away_from``, v1 arriving from
    away at ``from_away_at`` instead."""
    v1 = at_stand("v1", 0 if away_from is not None else from_away_at, 1200, board_at=1200)
    for row in v1:
        if away_from is not None and away_from <= row["timestamp"] < away_from + away_s:
            row["lat"], row["lon"] = offset_m(80.0, 0.0)
    return v1


def known(pings: pd.DataFrame) -> pd.DataFrame:
    """A fleet of every vehicle of ``pings``, none a Táxi Acessível."""
    ids = sorted(pings["vehicle_id"].unique())
    return pd.DataFrame({"vehicle_id": ids, "accessible": [False] * len(ids)})


def detect(rows: list[dict], **kw: object):
    pings = make_pings(rows)
    return detect_queue_jump(visits_for(pings), pings, **({"fleet": known(pings)} | kw))


class TestDetectQueueJump:
    def test_head_of_the_queue_drifting_outside_boards_first(self) -> None:
        """FIFO: the head's GPS drifts 15 m beyond the 30 m stand for 3 min, then it boards
        before the taxi behind: its visit is not split, so it jumped no one."""
        head = at_stand("v1", 0, 1200, board_at=1200)
        for row in head:  # fixes 300..480 s drift 45 m north of the centre
            t = row["timestamp"] - head[2]["timestamp"]
            if 300 <= t <= 480:
                row["lat"], row["lon"] = offset_m(45.0, 0.0)
        found = detect(head + at_stand("v2", 200, 1500, board_at=1500))
        assert found.empty

    def test_a_taxi_leaving_its_own_overlapping_queue_is_not_judged_here(self) -> None:
        """v2, licensed at S0 only, boards where S0 and S1 overlap while v1 waits in S1's
        queue: the same meter start marks its S0 visit, so it left S0's queue (an independent
        check had such taxis accused at the neighbour); without the S0 visit it is judged."""
        pings = make_pings(at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600))
        visits = visits_for(pings)
        visits["licensed"] = pd.array(visits["vehicle_id"] == "v1", dtype="boolean")
        own = visits.loc[visits["vehicle_id"] == "v2"].assign(stand_id="S0", licensed=True)
        fleet = known(pings)
        assert len(detect_queue_jump(visits, pings, fleet=fleet)) == 1
        both = pd.concat([visits, own], ignore_index=True)
        assert detect_queue_jump(both, pings, fleet=fleet).empty

    def test_leaving_ahead_of_waiting_vehicle_is_found(self) -> None:
        """v2 arrives after v1, boards while v1 still waits free: one finding for v2."""
        found = detect(at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600))
        assert len(found) == 1
        f = found.iloc[0]
        assert (f["kind"], f["vehicle_id"], f["stand_id"]) == ("queue_jump", "v2", "S1")
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:05:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-04T12:10:00Z")
        d = f["details"]
        assert d["n_ahead"] == 1 and d["ahead"][0]["vehicle_id"] == "v1"
        assert d["ahead"][0]["wait_s"] == 600.0
        assert d["ahead"][0]["queue_position"] == 1 and d["queue_position"] == 2
        assert d["ahead"][0]["fix_at_our_boarding"]["timestamp"] == "2024-03-04T12:10:00Z"
        assert d["thresholds"] == {
            "min_wait_ahead_s": 120.0,
            "tolerance_s": 60.0,
            "min_away_s": 900.0,
            "min_approach_m": 30.0,
            "boarding_grace_s": 120.0,
            "boarding_grace_m": 30.0,
        }
        assert d["boarding_lag_s"] == 0.0 and d["boarding_distance_m"] == 0.0
        assert d["own_wait_s"] == 300.0  # arrived 12:05, boarded 12:10
        json.dumps(d)
        assert 0.5 < f["confidence"] < 1.0
        validate_findings(found)

    @pytest.mark.parametrize(("licensed", "found"), [(False, 0), (True, 1), (pd.NA, 1)])
    def test_a_vehicle_without_the_stands_licence_holds_no_place(
        self, licensed: Any, found: int
    ) -> None:
        """The queue is the stand's licensees': passing an intruder waiting there (an
        unlicensed taxi, or a Táxi Acessível that may not wait at another stand, POA art. 46 §
        único) is no jump; a licence unknown is judged."""
        pings = make_pings(at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600))
        visits = visits_for(pings)
        visits["licensed"] = pd.array(
            [licensed if v == "v1" else True for v in visits["vehicle_id"]], dtype="boolean"
        )
        assert len(detect_queue_jump(visits, pings, fleet=known(pings))) == found

    def test_two_vehicles_passed_raise_confidence(self) -> None:
        """Passing two waiting vehicles is one finding naming both, with more confidence."""
        one = detect(at_stand("v1", 0, 1200) + at_stand("v3", 390, 600, board_at=600))
        assert len(one) == 1
        two = detect(
            at_stand("v1", 0, 1200)
            + at_stand("v2", 60, 1200)
            + at_stand("v3", 390, 600, board_at=600)
        )
        assert len(two) == 1
        assert [a["vehicle_id"] for a in two.iloc[0]["details"]["ahead"]] == ["v1", "v2"]
        assert two.iloc[0]["confidence"] > one.iloc[0]["confidence"]

    def test_drop_off_then_meter_on_600_m_away_is_not_a_jump(self) -> None:
        """Issue 18's pattern: a passenger dropped at the stand, the meter on again 600 m away
        30 s after leaving: no boarding at the stand, so no jump over the waiting v1."""
        rows = at_stand("v1", 0, 1200) + drop_off("v2", 300, 600, meter_on_m=630.0)
        assert detect(rows).empty

    def test_meter_on_at_the_edge_is_a_jump_with_its_distance(self) -> None:
        """The meter on 20 m outside the stand 30 s after leaving: a boarding there, a jump;
        the evidence gives the lag, the distance and their thresholds."""
        rows = at_stand("v1", 0, 1200) + drop_off("v2", 300, 600, meter_on_m=50.0)
        found = detect(rows)
        assert found["vehicle_id"].tolist() == ["v2"]
        d = found.iloc[0]["details"]
        assert d["boarding_lag_s"] == 30.0
        assert 19.0 < d["boarding_distance_m"] < 21.0
        assert d["thresholds"]["boarding_grace_m"] == 30.0

    def test_waiting_vehicle_boarding_later_counts(self) -> None:
        """The vehicle ahead boarding 120 s after us (its meter on after its fix 90 s after
        ours, beyond the tolerance) was still passed; at 90 s (after its fix 60 s after ours)
        the two boardings are not ordered."""
        found = detect(
            at_stand("v1", 0, 720, board_at=720) + at_stand("v2", 300, 600, board_at=600)
        )
        assert found["vehicle_id"].tolist() == ["v2"]
        assert found.iloc[0]["details"]["ahead"][0]["boarded_at"] == "2024-03-04T12:12:00Z"
        assert detect(
            at_stand("v1", 0, 690, board_at=690) + at_stand("v2", 300, 600, board_at=600)
        ).empty

    def test_arrivals_a_fix_apart_are_not_ordered(self) -> None:
        """Two taxis seen arriving 45 or 90 s apart (a fix every 30 s) are not in a known
        order: the later one arrived after its fix before, 60 s after the first; 120 s apart
        they are."""
        for apart in (45, 90):
            found = detect(at_stand("v1", 0, 1200) + at_stand("v2", apart, 600, board_at=600))
            assert found.empty
        later = detect(at_stand("v1", 0, 1200) + at_stand("v2", 120, 600, board_at=600))
        assert later["vehicle_id"].tolist() == ["v2"]

    @pytest.mark.parametrize(
        "rows",
        [
            at_stand("v1", 290, 1200) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 1200, meter="off") + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 1200, meter=None) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 480) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 450, board_at=450) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 630, board_at=630) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 500, 1200) + at_stand("v2", 540, 600, board_at=600),
        ],
        ids=[
            "arrived-within-tolerance",
            "ahead-meter-off",
            "ahead-meter-unknown",
            "ahead-left-before",
            "ahead-boarded-before",
            "ahead-boarded-at-once",
            "ahead-waited-too-little",
        ],
    )
    def test_no_jump_cases_are_not_found(self, rows: list[dict]) -> None:
        """Cases that would wrongly accuse the driver who boarded give no finding."""
        assert detect(rows).empty

    def test_min_wait_threshold_is_applied(self) -> None:
        """A vehicle ahead that waited 130 s is passed only under a threshold below that."""
        rows = at_stand("v1", 470, 1200) + at_stand("v2", 570, 600, board_at=600)
        assert detect(rows, min_wait_ahead_s=150.0).empty
        found = detect(rows)
        assert len(found) == 1
        assert found.iloc[0]["details"]["max_wait_ahead_s"] == 130.0

    def test_vehicle_away_is_not_waiting(self) -> None:
        """A vehicle that left the stand for 6 min (beyond the exit grace) was not in the queue."""
        rows = make_track(
            "v1",
            [(t, 1.0, 0.0) for t in range(0, 301, 30)]
            + [(t, 400.0, 0.0) for t in range(330, 691, 30)]
            + [(t, 1.0, 0.0) for t in range(720, 1201, 30)],
            meter="free",
        )
        assert detect(rows + at_stand("v2", 360, 600, board_at=600)).empty
        assert len(detect(at_stand("v1", 0, 1200) + at_stand("v2", 360, 600, board_at=600))) == 1

    @pytest.mark.parametrize(("off_at", "found"), [(600, 0), (630, 0), (690, 1)])
    def test_vehicle_switching_off_at_our_boarding_was_not_waiting(
        self, off_at: int, found: int
    ) -> None:
        """v1 waits free and switches its meter off (a break) around v2's boarding at 600 s:
        off at the boarding fix or at its next fix (30 s later, within tolerance_s) may have
        come first, so v1 was not waiting; off 90 s after, v1 was passed."""
        v1 = at_stand("v1", 0, 1200)
        for row in v1:
            if row["timestamp"] >= off_at:
                row["meter"] = "off"
        assert len(detect(v1 + at_stand("v2", 300, 600, board_at=600))) == found

    def test_gps_displaced_for_a_minute_keeps_the_head_of_the_queue(self) -> None:
        """The head's GPS jumps 3.6 km away for 90 s (multipath) and back while it waits; it
        then boards before the taxi that arrived during its wait: it jumped no one."""
        points = [(t, 1.0, 0.0) for t in range(0, 601, 30)]
        points = [(t, 3600.0 if 300 <= t < 390 else n, e) for t, n, e in points]
        meters = ["free"] * (len(points) - 1) + ["occupied"]
        head = make_track("v1", [*points, (630, 150.0, 0.0)], meter=[*meters, "occupied"])
        assert detect(head + at_stand("v2", 120, 1200)).empty

    @pytest.mark.parametrize(("away_from", "found"), [(300, 0), (None, 1)])
    def test_a_wait_split_by_gps_noise_is_not_a_new_arrival(
        self, away_from: int | None, found: int
    ) -> None:
        """v1 waits from 0 s; its fixes 80 m away for 2 min (noise beyond the exit grace) split
        its wait into two visits, the second arriving after v2 (200 s). v1 boarding first did
        not pass v2: it had not come from away. A v1 arriving at 450 s from away did."""
        v1 = split_wait(away_from, 120, from_away_at=450)
        rows = v1 + at_stand("v2", 200, 1500, board_at=1500)
        visits = visits_for(make_pings(rows))
        assert (visits["vehicle_id"] == "v1").sum() == (2 if away_from is not None else 1)
        assert len(detect(rows)) == found
        assert len(detect(rows, min_away_s=0.0)) == 1

    def test_the_boarding_that_ends_a_split_wait_is_not_a_new_arrival(self) -> None:
        """v1 waits from 0 s; noise puts it 80 m away for 75 s; back inside at 1005 s, the meter
        comes on at 1020 s. That trip start boards both pieces of its wait (the first within
        the boarding grace); the second piece did not come from away."""
        points = [(t, 1.0, 0.0) for t in range(0, 901, 30)]
        points += [(930, 80.0, 0.0), (960, 80.0, 0.0), (990, 80.0, 0.0), (1005, 1.0, 0.0)]
        points += [(1020, 1.0, 0.0), (1050, 150.0, 0.0), (1080, 300.0, 0.0)]
        v1 = make_track("v1", points, meter=["free"] * 35 + ["occupied"] * 3)
        rows = v1 + at_stand("v2", 300, 1500, board_at=1500)
        visits = visits_for(make_pings(rows))
        mine = visits[visits["vehicle_id"] == "v1"]
        assert mine["boarded"].tolist() == [True, True]
        assert detect(rows).empty
        assert detect(rows, min_away_s=0.0, min_approach_m=0.0).empty

    @pytest.mark.parametrize(("off_from", "off_to", "found"), [(200, 400, 0), (60, 150, 1)])
    def test_vehicle_back_from_a_break_waits_from_then(
        self, off_from: int, off_to: int, found: int
    ) -> None:
        """v1 at the stand from 0 s takes a break (meter off) at its place; v2 arrives at 300 s
        and boards at 600 s. Back (free) at 420 s, v1 rejoined the queue after v2: no jump.
        Back at 150 s, v1 was waiting before v2 arrived: v2 passed it."""
        v1 = at_stand("v1", 0, 1200)
        for row in v1:
            if off_from <= row["timestamp"] < off_to:
                row["meter"] = "off"
        found_ = detect(v1 + at_stand("v2", 300, 600, board_at=600))
        assert len(found_) == found
        if found:
            ahead = found_.iloc[0]["details"]["ahead"][0]
            assert ahead["waiting_since"] == "2024-03-04T12:02:30Z"  # 150 s: its first free fix
            assert ahead["wait_s"] == 450.0

    @pytest.mark.parametrize(("speed_kmh", "found"), [(None, 0), (1.0, 0), (30.0, 1)])
    def test_a_vehicle_already_waiting_beside_the_stand_was_not_seen_arriving(
        self, speed_kmh: float | None, found: int
    ) -> None:
        """v2 waits 15 m outside the stand's edge from 60 s (noise keeps its fixes there), its
        first fix inside at 300 s, after v1's arrival (200 s); it boards first. Its arrival was
        not seen (its fix before was beside the stand, stopped): not judged. That fix reporting
        30 km/h shows v2 driving in: judged."""
        v2 = make_track(
            "v2",
            [(0, -300.0, 0.0), (30, -150.0, 0.0)]
            + [(t, -45.0, 0.0) for t in range(60, 271, 30)]
            + [(t, 1.0, 0.0) for t in range(300, 601, 30)]
            + [(630, 150.0, 0.0), (660, 300.0, 0.0)],
            meter=["free"] * 20 + ["occupied"] * 3,
        )
        v2[9]["speed_kmh"] = speed_kmh  # the fix at 270 s, before the first inside
        rows = v2 + at_stand("v1", 200, 1500, board_at=1500)
        assert len(detect(rows)) == found
        assert len(detect(rows, min_approach_m=10.0)) == 1

    def test_accessible_vehicle_is_not_judged(self) -> None:
        """A Táxi Acessível chosen out of order is excused (priority of PcD); so is a vehicle
        not known to be none: absent from the fleet, of unknown accessibility, or no fleet."""
        rows = at_stand("acc", 300, 600, board_at=600) + at_stand("v1", 0, 1200)
        assert len(detect(rows)) == 1
        for accessible in (True, None):
            fleet = pd.DataFrame({"vehicle_id": ["acc", "v1"], "accessible": [accessible, False]})
            assert detect(rows, fleet=fleet).empty
        assert detect(rows, fleet=pd.DataFrame({"vehicle_id": ["v1"], "accessible": [False]})).empty
        assert detect(rows, fleet=None).empty

    def test_without_meter_nothing_is_found(self) -> None:
        """Pings without a meter column give an empty, typed frame."""
        rows = at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600)
        pings = make_pings(rows)
        visits = visits_for(pings)
        found = detect_queue_jump(visits, pings.drop(columns=["meter"]), fleet=known(pings))
        assert found.empty and list(found.columns) == list(FINDING_COLUMNS)

    def test_unsorted_pings_give_the_same_findings(self) -> None:
        """Visits built on shuffled pings point at the right fixes."""
        rows = at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600)
        pings = make_pings(rows).sample(frac=1.0, random_state=3).reset_index(drop=True)
        found = detect_queue_jump(visits_for(pings), pings, fleet=known(pings))
        assert found["vehicle_id"].tolist() == ["v2"]
        assert found.iloc[0]["details"]["ahead"][0]["fix_at_our_boarding"]["row"] is not None

    @pytest.mark.parametrize(("option", "value"), [("min_wait_ahead_s", -1.0), ("tolerance_s", -5)])
    def test_bad_thresholds_raise(self, option: str, value: float) -> None:
        """Negative thresholds are refused by name."""
        with pytest.raises(DetectorThresholdError, match=option):
            detect(at_stand("v1", 0, 1200), **{option: value})


DAY = 86_400


def _stand_frame() -> gpd.GeoDataFrame:
    lat, lon = offset_m(STAND[0], STAND[1])
    point = gpd.GeoSeries.from_xy([lon], [lat], crs=4326).to_crs(31982)
    circle = point.buffer(STAND[2], 64).to_crs(4326)
    return gpd.GeoDataFrame({"stand_id": ["S1"]}, geometry=circle, crs=4326)


def _stand_cover():
    return build_stand_cover(_stand_frame())


def _fleet_days() -> list[dict]:
    """Two days at one stand: jumps, and the cases that must not accuse."""
    rows: list[dict] = []
    for d in (0, DAY):
        rows += at_stand("v1", d, d + 1500)  # waits free the whole time
        rows += at_stand("v2", d + 300, d + 600, board_at=d + 600)  # jumps v1
        rows += at_stand("v5", d + 400, d + 700, board_at=d + 700)  # jumps v1 (and not v2)
    rows += at_stand("off", DAY + 2000, DAY + 3000, meter="off")  # parked, not waiting
    rows += at_stand("v3", DAY + 2290, DAY + 2500, board_at=DAY + 2500)  # passes "off": no
    rows += at_stand("acc", 300, 600, board_at=600)  # accessible: priority, excused
    # GPS jitter at the edge: v4 steps out for 40 s (< exit grace) while waiting
    jitter = make_track(
        "v4",
        [(DAY + 5000 + 30 * k, 1.0 if k != 5 else 45.0, 0.0) for k in range(30)],
        meter=["free"] * 30,
    )
    rows += jitter + at_stand("v6", DAY + 5290, DAY + 5500, board_at=DAY + 5500)
    rows += drop_off("v7", DAY + 800, DAY + 1010, meter_on_m=630.0)  # meter on 600 m away: no
    rows += drop_off("v8", DAY + 900, DAY + 1110, meter_on_m=50.0)  # on 20 m outside: jumps v1
    return rows


def _live(
    pings: pd.DataFrame,
    cuts: list[int],
    fleet: pd.DataFrame | None = None,
    *,
    watermark: bool = False,
) -> Any:
    """Queue jumps of the pings fed in pieces: visits kernel, then the queue_jump kernel."""
    stands: dict[str, Any] = {}
    out = []

    def judge(visits: pd.DataFrame, fixes: pd.DataFrame, _: object) -> None:
        after, found = advance_queue_jump(stands, visits, fixes, fleet=fleet)
        stands.update(json.loads(json.dumps(after)))  # plain data
        out.append(found)

    replay_visits(
        pings,
        cuts,
        cover=_stand_cover(),
        stands=_stand_frame(),
        max_gap_s=300.0,
        watermark=watermark,
        then=judge,
    )
    live = concat_live(out)
    return empty_findings() if live is None else live


def _sticky_meters(pings: pd.DataFrame, *, seed: int, change: float = 0.08) -> pd.Series:
    """A meter per fix that keeps its state and changes with probability ``change``."""
    rng = np.random.default_rng(seed)
    states, state, prev = [], "free", None
    for v in pings["vehicle_id"]:
        if v != prev or rng.random() < change:
            state = str(rng.choice(["free", "occupied", "off"], p=[0.7, 0.2, 0.1]))
        states.append(state)
        prev = v
    return pd.Series(states, index=pings.index, dtype="object")


class TestQueueJumpKernel:
    def test_pieces_give_the_batch_bytes(self) -> None:
        """Fix by fix, in one piece and in random pieces, the findings are the batch's bytes.

        The input holds the fairness cases: a drop-off with the meter on 600 m away, jitter at
        the edge while waiting, a meter on 20 m outside, a parked (off) vehicle, an accessible
        one.
        """
        pings = make_pings(_fleet_days())
        ids = sorted(pings["vehicle_id"].unique())
        fleet = pd.DataFrame({"vehicle_id": ids, "accessible": [v == "acc" for v in ids]})
        cover = _stand_cover()
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        visits = detect_visits(pings, memberships, stands=_stand_frame(), max_gap_s=300.0)
        batch = detect_queue_jump(visits, pings, fleet=fleet)
        assert sorted(batch["vehicle_id"]) == ["v2", "v2", "v5", "v5", "v6", "v8"]
        expected = geojson_bytes(batch)
        for cuts in cuttings(len(pings), seeds=3, max_pieces=40):
            assert geojson_bytes(_live(pings, cuts, fleet)) == expected, cuts[:10]
        # A vehicle the fleet lacks may be a Táxi Acessível written otherwise: not judged.
        lacking = fleet[~fleet["vehicle_id"].isin(["v5", "v8"])]
        assert sorted(detect_queue_jump(visits, pings, fleet=lacking)["vehicle_id"]) == [
            "v2",
            "v2",
            "v6",
        ]
        assert detect_queue_jump(visits, pings).empty  # no fleet: none known not accessible

    @pytest.mark.parametrize("rules", ["off", "on"])
    def test_overlapping_stands_in_pieces(self, rules: str) -> None:
        """Five vehicles at two overlapping stands (edge jitter, silences; meters that hold for
        a while): random pieces with a watermark give the batch's bytes, with and without the
        rules of a seen arrival."""
        pings, cover = stand_fleet(6)
        pings["meter"] = _sticky_meters(pings, seed=6)
        stands = cover_stands(cover)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        visits = detect_visits(pings, memberships, stands=stands, max_gap_s=300.0)
        fleet = known(pings)
        off = {"min_away_s": 0.0, "min_approach_m": 0.0}
        options = off if rules == "off" else {}
        batch = detect_queue_jump(visits, pings, fleet=fleet, **options)
        every = detect_queue_jump(visits, pings, fleet=fleet, **off)
        assert set(every["stand_id"]) == {"A", "B"}
        assert rules == "off" or len(batch) < len(every)
        queues: dict[str, Any] = {}
        out = []

        def judge(visits: pd.DataFrame, fixes: pd.DataFrame, _: object) -> None:
            after, found = advance_queue_jump(queues, visits, fixes, fleet=fleet, **options)
            queues.update(json.loads(json.dumps(after)))
            out.append(found)

        for cuts in cuttings(len(pings), seeds=1, one_by_one=False, max_pieces=30)[1:]:
            queues.clear()
            out.clear()
            replay_visits(
                pings, cuts, cover=cover, stands=stands, max_gap_s=300.0, watermark=True, then=judge
            )
            live = concat_live(out)
            assert geojson_bytes(empty_findings() if live is None else live) == geojson_bytes(batch)

    def test_a_split_wait_in_pieces(self) -> None:
        """v1's wait is split by noise (80 m away at 300-450 s); v3 arrives and boards between
        its pieces (the stand's queue moves on), v4 waits from 360 s; v1 boards first at
        1200 s. Live keeps v1's previous visit (``min_away_s``) as the batch reads it: no
        jump. The same v1 arriving from away at 480 s passed v4, batch and live."""
        for away_from, n in ((300, 0), (None, 1)):
            v1 = split_wait(away_from, 180, from_away_at=480)
            rows = v1 + at_stand("v3", 330, 390, board_at=390)
            pings = make_pings(rows + at_stand("v4", 360, 1500, board_at=1500))
            fleet = known(pings)
            batch = detect_queue_jump(visits_for(pings), pings, fleet=fleet)
            assert len(batch) == n
            assert len(detect_queue_jump(visits_for(pings), pings, fleet=fleet, min_away_s=0)) == 1
            for cuts in cuttings(len(pings), seeds=2, max_pieces=20):
                live = _live(pings, cuts, fleet, watermark=True)
                assert geojson_bytes(live) == geojson_bytes(batch), cuts

    def test_finding_is_emitted_when_the_boarding_visit_is_released(self) -> None:
        """Emitted once, as soon as the visits it rests on are final (v1's, ahead, last)."""
        away = make_track("v1", [(1290 + 30 * k, 450.0 + 150 * k, 0.0) for k in range(6)])
        rows = at_stand("v1", 0, 1200) + away + at_stand("v2", 300, 600, board_at=600)
        pings = make_pings(rows)
        fleet = known(pings)
        order = pings.sort_values("timestamp", kind="stable")
        emitted_at: list[Any] = []
        stands: dict[str, Any] = {}
        calls: list[int] = []

        def judge(visits: pd.DataFrame, fixes: pd.DataFrame, state: object) -> None:
            after, found = advance_queue_jump(stands, visits, fixes, fleet=fleet)
            stands.update(after)
            at = len(calls)  # the call after fix number ``at`` (fix by fix)
            calls.append(at)
            if len(found):
                emitted_at.append(order["timestamp"].iloc[at] if at < len(order) else "end")

        replay_visits(
            pings,
            list(range(1, len(pings))),
            cover=_stand_cover(),
            stands=_stand_frame(),
            max_gap_s=300.0,
            watermark=True,
            then=judge,
        )
        # v1 left at 12:20:00 (its next fixes far away); its visit is final once a fix of it
        # comes more than the boarding grace (120 s) later: the one at 12:22:00 says so
        assert emitted_at == [pd.Timestamp("2024-03-04T12:22:00Z")]
