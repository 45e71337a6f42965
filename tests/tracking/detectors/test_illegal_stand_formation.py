from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from day_kernel_checks import assert_day_pieces_give, concat_findings
from factories import make_pings, make_track, offset_m
from live_compare import assert_same_findings
from live_scenarios import DAY, PLACE, fleet_month, square, wait
from live_scenarios import RANK_STANDS as STANDS

from geo.crs import haversine_m
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.illegal_stand_formation import (
    advance_illegal_stand_formation,
    detect_illegal_stand_formation,
    link_resolution,
    waiting_stops,
)
from tracking.stops import detect_stops


def _detect(rows: list[dict[str, Any]], **kw: Any) -> gpd.GeoDataFrame:
    pings = make_pings(rows)
    return detect_illegal_stand_formation(detect_stops(pings), pings, STANDS, **kw)


def _three_days(at: tuple[float, float] = PLACE, **kw: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for d, v in enumerate(["A", "B", "C"]):
        rows += wait(v, d * DAY, at, **kw)
    return rows


def _split_wait(
    vehicle: str, t0: float, at: tuple[float, float], *, drift_m: float = 0.0
) -> list[dict[str, Any]]:
    """Drive in, wait 20 min free at ``at`` (a fix every 15 s) with one fix in 16 thrown 60 m
    off (GPS noise: it ends a stop), moving ``drift_m`` north every 4 min; board; drive off."""
    n, e = at
    points = [(t0 - 60, n + 600, e + 600)]
    for k in range(81):
        piece = k // 16
        off = 60.0 if k % 16 == 15 else 0.0
        points.append((t0 + 15 * k, n + piece * drift_m, e + off))
    points.append((t0 + 1260, n - 600, e - 600))
    meters = ["occupied"] + ["free"] * (len(points) - 3) + ["occupied"] * 2
    return make_track(vehicle, points, meter=meters)


class TestDetectIllegalStandFormation:
    def test_recurring_free_waiting_is_one_finding_per_place(self) -> None:
        """Three taxis waiting free 15 min on three days at one spot, each leaving with a
        passenger boarded there: one finding, explained."""
        found = _detect(_three_days())
        assert len(found) == 1
        f = found.iloc[0]
        assert f["kind"] == "illegal_stand_formation"
        assert f["vehicle_id"] is None and f["stand_id"] is None
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:00:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-06T12:15:00Z")
        d = f["details"]
        assert d["vehicles"] == ["A", "B", "C"]
        assert d["accused"] == []  # each waited there once: no purpose shown by any of them
        assert d["dates"] == ["2024-03-04", "2024-03-05", "2024-03-06"]
        assert (d["n_vehicles"], d["n_days"], d["n_stops"]) == (3, 3, 3)
        assert [s["vehicle_id"] for s in d["stops"]] == ["A", "B", "C"]
        assert all(s["duration_s"] == 900.0 and s["free_share"] == 0.968 for s in d["stops"])
        assert all(s["boarded"] for s in d["stops"]) and d["n_boardings"] == 3
        assert d["nearest_stand_m"] == pytest.approx(1386, abs=5)
        meters = [x["meter"] for x in d["fixes"]]
        assert meters == ["free", "occupied"] * 3  # the wait's first fix, the boarding
        assert d["thresholds"]["min_vehicles"] == 3 and d["thresholds"]["min_wait_s"] == 600.0
        stop = d["stops"][0]
        assert f["geometry"].contains(shapely.Point(stop["lon"], stop["lat"]))
        json.dumps(d)

    def test_accused_are_the_vehicles_that_keep_waiting_and_boarding_there(self) -> None:
        """A, B and C wait and board there on two days each; D waited once (a called ride), E
        on two days without taking anyone: the place is found with all five, and accuses A, B
        and C only (``min_vehicle_days``)."""
        rows: list[dict[str, Any]] = []
        for d, v in enumerate(["A", "B", "C"]):
            rows += wait(v, d * DAY, PLACE) + wait(v, (d + 3) * DAY, PLACE)
        rows += wait("D", 6 * DAY, PLACE)
        rows += wait("E", 0.5 * DAY, PLACE, boards=False) + wait(
            "E", 1.5 * DAY, PLACE, boards=False
        )
        (d,) = _detect(rows)["details"]
        assert (d["vehicles"], d["accused"]) == (["A", "B", "C", "D", "E"], ["A", "B", "C"])
        assert d["thresholds"]["min_vehicle_days"] == 2
        (d,) = _detect(rows, min_vehicle_days=1)["details"]
        assert d["accused"] == ["A", "B", "C", "D"]

    def test_a_night_shift_is_one_day_of_service(self) -> None:
        """N waits and boards there at 23:30 and 00:40 (local) of one night shift: one day of
        service, so N is in the evidence, not accused (by calendar day it was accused under art.
        59 XIV); the same waits on two nights accuse it."""
        rows: list[dict[str, Any]] = []
        for d, v in enumerate(["A", "B", "C"]):
            rows += wait(v, d * DAY, PLACE) + wait(v, (d + 3) * DAY, PLACE)
        night = DAY + 14.5 * 3600  # 02:30Z: 23:30 local
        rows_n = wait("N", night, PLACE) + wait("N", night + 70 * 60, PLACE)
        (d,) = _detect(rows + rows_n)["details"]
        assert "N" in d["vehicles"]
        assert d["accused"] == ["A", "B", "C"]
        rows_n = wait("N", night, PLACE) + wait("N", night + DAY + 70 * 60, PLACE)
        (d,) = _detect(rows + rows_n)["details"]
        assert d["accused"] == ["A", "B", "C", "N"]
        morning = 6 * DAY - 2 * 3600  # 10:00Z: 07:00 local; and 20:00 local, 13 h later
        rows_m = wait("M", morning, PLACE) + wait("M", morning + 13 * 3600, PLACE)
        (d,) = _detect(rows + rows_m)["details"]
        assert "M" in d["vehicles"] and d["accused"] == ["A", "B", "C"]  # one local date

    def test_one_boarding_in_days_of_waits_accuses_no_one(self) -> None:
        """Taxis waiting at a fuel pump on four days, each hailed once as it left (an
        independent check had them proposed under art. 59 XIV): the place is found, no one is
        accused; a boarding on a second day accuses."""
        rows: list[dict[str, Any]] = []
        for k, v in enumerate(["A", "B", "C", "D"]):
            for day in range(4):
                rows += wait(v, (4 * day + k) * DAY / 4, PLACE, boards=day == k)
        (d,) = _detect(rows)["details"]
        assert (d["vehicles"], d["accused"]) == (["A", "B", "C", "D"], [])
        rows += wait("A", 20 * DAY, PLACE)
        (d,) = _detect(rows)["details"]
        assert d["accused"] == ["A"]

    def test_a_wait_split_by_gps_noise_is_one_wait(self) -> None:
        """Each 20-min wait is cut by noisy fixes into stops of 4 min: joined, they are waits
        (one finding); taxis crawling 40 m every 4 min in traffic are not waiting."""
        rows = [r for d, v in enumerate("ABC") for r in _split_wait(v, d * DAY, PLACE)]
        pings = make_pings(rows)
        stops = detect_stops(pings)
        assert len(stops) == 15 and stops["duration_s"].max() < 600  # no stop long enough
        found = detect_illegal_stand_formation(stops, pings, STANDS)
        assert len(found) == 1
        d = found.iloc[0]["details"]
        joined = [(s["duration_s"], s["joined_stops"]) for s in d["stops"]]
        assert joined == [(1170.0, 5)] * 3  # to the last fix kept
        crawl = [r for d, v in enumerate("ABC") for r in _split_wait(v, d * DAY, PLACE, drift_m=40)]
        assert _detect(crawl).empty

    def test_waiting_found_vehicle_by_vehicle(self) -> None:
        """The waiting stops found for each vehicle apart (as the partitioned engines do) give
        the findings of all the stops at once; brief and occupied stops are not among them."""
        rows = (
            _three_days()
            + wait("D", 0, PLACE, wait_s=300.0)
            + wait("E", DAY, PLACE, meter="occupied")
        )
        pings = make_pings(rows)
        stops = detect_stops(pings)
        waiting = []
        for vehicle in sorted(pings["vehicle_id"].unique()):
            mine = pings.loc[pings["vehicle_id"] == vehicle].reset_index(drop=True)
            waiting += waiting_stops(stops.loc[stops["vehicle_id"] == vehicle], mine)
        assert [w["vehicle_id"] for w in waiting] == ["A", "B", "C"]
        whole = detect_illegal_stand_formation(stops, pings, STANDS)
        apart = detect_illegal_stand_formation(
            stops.iloc[:0], pings.iloc[:0], STANDS, waiting=waiting
        )
        assert_same_findings(apart, whole)
        assert len(whole) == 1

    def test_too_few_vehicles(self) -> None:
        """Two vehicles on three days are not a stand formation (min_vehicles 3)."""
        rows = wait("A", 0, PLACE) + wait("B", DAY, PLACE) + wait("A", 2 * DAY, PLACE)
        assert _detect(rows).empty
        assert len(_detect(rows, min_vehicles=2)) == 1

    def test_too_few_days(self) -> None:
        """Three vehicles on the same day are not recurrent (min_days 3)."""
        rows = wait("A", 0, PLACE) + wait("B", 3000, PLACE) + wait("C", 6000, PLACE)
        assert _detect(rows).empty
        assert len(_detect(rows, min_days=1)) == 1

    def test_days_are_local_days(self) -> None:
        """Stops on three UTC dates but two local dates (São Paulo) are two days."""
        # 23:30Z and 02:00Z next day are the same local evening (20:30 and 23:00 local).
        base = -12 * 3600 + 11.5 * 3600  # 2024-03-04T11:30Z + offsets below
        rows = (
            wait("A", base, PLACE)  # 11:30Z day 1 -> local day 1
            + wait("B", base + 12 * 3600, PLACE)  # 23:30Z day 1 -> local day 1
            + wait("C", base + 14.5 * 3600, PLACE)  # 02:00Z day 2 -> local day 1
            + wait("A", base + DAY + 12 * 3600, PLACE)  # 23:30Z day 2 -> local day 2
        )
        assert _detect(rows).empty
        found = _detect(rows, min_days=2)
        assert found.iloc[0]["details"]["dates"] == ["2024-03-04", "2024-03-05"]

    @pytest.mark.parametrize("at", [PLACE, (90.0, 0.0)])
    def test_brief_stops_do_not_count(self, at: tuple[float, float]) -> None:
        """Waits shorter than min_wait_s (a red light near a stand, a quick drop) do not count."""
        assert _detect(_three_days(at=at, wait_s=300)).empty
        assert len(_detect(_three_days(at=at, wait_s=300), min_wait_s=240)) == 1

    def test_occupied_waits_do_not_count(self) -> None:
        """Waiting with the meter occupied (a passenger aboard) is not waiting for one."""
        assert _detect(_three_days(meter="occupied")).empty

    @pytest.mark.parametrize("leaves", ["free", "off"])
    def test_waits_that_board_no_one_are_no_rank(self, leaves: str) -> None:
        """Free taxis queueing 15 min on three days (a fuel pump, an inspection line) and
        leaving with the meter free or off wait for no passenger (art. 59 XIV: "finalidade de
        formação de ponto"): nothing, unless the boarding share is not checked."""
        rows: list[dict[str, Any]] = []
        for d, v in enumerate(["A", "B", "C"]):
            track = wait(v, d * DAY, PLACE, boards=False)
            track[-1]["meter"] = leaves
            rows += track
        assert _detect(rows).empty
        found = _detect(rows, min_boarding_share=0.0)
        assert len(found) == 1 and found.iloc[0]["details"]["n_boardings"] == 0

    @pytest.mark.parametrize(
        ("boarded", "expected"), [(0, 0), (1, 1)], ids=["none-of-five", "one-of-five"]
    )
    def test_a_share_of_the_waits_must_end_with_a_boarding(
        self, boarded: int, expected: int
    ) -> None:
        """Five waits on five days: a meter switched on 850 m away is no boarding at the place;
        one boarding of five (20 %) meets a 20 % share, not the default 25 %."""
        rows: list[dict[str, Any]] = []
        for d, v in enumerate(["A", "B", "C", "A"]):
            track = wait(v, d * DAY, PLACE, boards=False)
            if d == 0:
                track[-1]["meter"] = "occupied"  # 600 m away: a hail elsewhere
            rows += track
        assert _detect(rows).empty
        rows += wait("B", 4 * DAY, PLACE, boards=bool(boarded))
        assert _detect(rows).empty
        found = _detect(rows, min_boarding_share=0.2)
        assert len(found) == expected
        if expected:
            assert found.iloc[0]["details"]["n_boardings"] == 1

    def test_unknown_meter_does_not_count(self) -> None:
        """Without meter data a stop is not known to be a free taxi waiting."""
        assert _detect(_three_days(meter=None)).empty

    def test_waiting_inside_a_stand_does_not_count(self) -> None:
        """Taxis waiting inside a real stand are not an illegal stand."""
        assert _detect(_three_days(at=(0.0, 0.0))).empty

    @pytest.mark.parametrize(
        ("offset", "expected"),
        [(40.0, 0), (65.0, 0), (90.0, 1)],
    )
    def test_jitter_at_a_stand_edge(self, offset: float, expected: int) -> None:
        """Stops within stand_buffer_m (50 m) of the stand's edge (20 m) do not count."""
        assert len(_detect(_three_days(at=(offset, 0.0)))) == expected

    def test_allowed_places_do_not_count(self) -> None:
        """A regulated parking area is an allowed place to wait."""
        allowed = gpd.GeoSeries([square(*PLACE, 30)], crs=4326)
        assert _detect(_three_days(), allowed_places=allowed).empty

    def test_nearby_stops_make_one_place_far_ones_do_not(self) -> None:
        """Stops 40 m apart join one place; 600 m apart they are separate places."""
        near = (
            wait("A", 0, PLACE)
            + wait("B", DAY, (PLACE[0] + 40, PLACE[1]))
            + wait("C", 2 * DAY, (PLACE[0], PLACE[1] + 40))
        )
        assert len(_detect(near)) == 1
        far = (
            wait("A", 0, PLACE)
            + wait("B", DAY, (PLACE[0] + 600, PLACE[1]))
            + wait("C", 2 * DAY, (PLACE[0], PLACE[1] + 600))
        )
        assert _detect(far).empty

    def test_two_places_starting_together_keep_distinct_ids(self) -> None:
        """Two places whose first stops start at the same instant are two findings."""
        other = (5000.0, -3000.0)
        rows = _three_days()
        for d, v in enumerate(["D", "E", "F"]):
            rows += wait(v, d * DAY, other)
        found = _detect(rows)
        assert len(found) == 2
        assert found["finding_id"].nunique() == 2
        assert found["started_at"].nunique() == 1

    def test_confidence_grows_with_vehicles_and_days(self) -> None:
        """More vehicles and days past the thresholds give more confidence, never 1."""
        base = _detect(_three_days()).iloc[0]["confidence"]
        rows = _three_days()
        for d, v in enumerate(["D", "E", "F"]):
            rows += wait(v, (d + 3) * DAY, PLACE)
        more = _detect(rows).iloc[0]["confidence"]
        assert 0.5 <= base < more < 1.0

    def test_area_is_a_polygon_around_the_stops(self) -> None:
        """The geometry covers every stop and stays within a few metres of them."""
        f = _detect(_three_days()).iloc[0]
        lat, lon = offset_m(*PLACE)
        c = f["geometry"].centroid
        assert haversine_m(c.y, c.x, lat, lon) < 15
        assert f["geometry"].geom_type == "Polygon"

    def test_no_stops_give_typed_empty_frame(self) -> None:
        """No stops, no findings, with the contract's columns."""
        pings = make_pings([])
        found = detect_illegal_stand_formation(detect_stops(pings), pings, STANDS)
        assert list(found.columns) == list(FINDING_COLUMNS)
        validate_findings(found)

    def test_no_stands_at_all(self) -> None:
        """With an empty stands layer every waiting place is outside stands."""
        pings = make_pings(_three_days())
        found = detect_illegal_stand_formation(detect_stops(pings), pings, STANDS.iloc[:0])
        assert len(found) == 1
        assert found.iloc[0]["details"]["nearest_stand_m"] is None

    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("min_vehicles", 0),
            ("min_days", 1.5),
            ("min_wait_s", -1),
            ("cluster_radius_m", 0),
            ("stand_buffer_m", float("nan")),
            ("min_free_share", 1.0),
        ],
    )
    def test_bad_threshold_raises(self, option: str, value: float) -> None:
        """Thresholds out of range are refused, naming the option."""
        pings = make_pings([])
        with pytest.raises(DetectorThresholdError, match=option):
            detect_illegal_stand_formation(detect_stops(pings), pings, STANDS, **{option: value})

    def test_projected_stands_raise(self) -> None:
        """Stands must be in a geographic CRS."""
        pings = make_pings(_three_days())
        with pytest.raises(DetectorInputError, match="CRS"):
            detect_illegal_stand_formation(detect_stops(pings), pings, STANDS.to_crs(31982))

    def test_stops_without_columns_raise(self) -> None:
        """Stops lacking duration_s are refused."""
        pings = make_pings(_three_days())
        stops = detect_stops(pings).drop(columns=["duration_s"])
        with pytest.raises(DetectorInputError, match="duration_s"):
            detect_illegal_stand_formation(stops, pings, STANDS)


class TestLinkResolution:
    @pytest.mark.parametrize(("radius_m", "resolution"), [(30, 12), (75, 11), (200, 10)])
    def test_resolution_for_radius(self, radius_m: float, resolution: int) -> None:
        """The typical link distance (2.7 edges) is nearest the radius."""
        assert link_resolution(radius_m) == resolution


@pytest.mark.slow
class TestDetectIllegalStandFormationOnPorto:
    DATA = Path(__file__).resolve().parents[3] / "data" / "porto" / "derived"

    def test_porto_passenger_trips_form_no_illegal_stand(self) -> None:
        """Porto fixes are all 'occupied' (passenger trips): of 276 stops, 56 last 10 min or
        more, none of them waiting for a passenger, so no place is reported."""
        from stands.layers import read_porto_stands
        from tracking.porto import read_porto_trips

        pings, _, _ = read_porto_trips(self.DATA / "trips_combined.csv")
        stands = read_porto_stands(self.DATA / "taxi_stands.csv", radius_m=100)
        stops = detect_stops(pings)
        assert (len(stops), int((stops["duration_s"] >= 600).sum())) == (276, 56)
        assert detect_illegal_stand_formation(stops, pings, stands).empty
        # Even if the meter had been free, no place gathers 3 taxis on 3 days in this sample.
        free = pings.assign(meter="free")
        assert detect_illegal_stand_formation(stops, free, stands, timezone="Europe/Lisbon").empty


def _end_day(ns: int) -> dt.date:
    return pd.Timestamp(ns, unit="ns", tz="UTC").tz_convert("America/Sao_Paulo").date()


def _replay(waiting: list[dict[str, Any]], cuts: list[int], **kw: Any) -> gpd.GeoDataFrame:
    """The kernel fed the waiting stops in end order, in pieces, each closing the days before
    its last stop's end day (states through JSON), then closed."""
    bounds = [0, *cuts, len(waiting)]
    state: dict[str, Any] | None = None
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        piece = waiting[lo:hi]
        through = _end_day(piece[-1]["end_ns"]) - dt.timedelta(days=1)
        state, found = advance_illegal_stand_formation(
            state, piece, stands=STANDS, through=through, **kw
        )
        state = json.loads(json.dumps(state))
        parts.append(found)
    _, found = advance_illegal_stand_formation(state, [], stands=STANDS, final=True, **kw)
    return concat_findings([*parts, found])


def _reference(
    stops: pd.DataFrame, pings: pd.DataFrame, window_days: int | None = None, **kw: Any
) -> gpd.GeoDataFrame:
    """The batch over the stops ended by each day (of its window), each place once."""
    ends = stops["ended_at"].dt.tz_convert("America/Sao_Paulo").dt.date
    out, seen = [], set()
    day = ends.min()
    while day <= ends.max():
        keep = ends <= day
        if window_days is not None:
            keep &= ends > day - dt.timedelta(days=window_days)
        found = detect_illegal_stand_formation(stops.loc[keep], pings, STANDS, **kw)
        out.append(found.loc[~found["finding_id"].isin(seen)])
        seen |= set(found["finding_id"])
        day += dt.timedelta(days=1)
    return concat_findings(out)


def _month() -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    pings = make_pings(fleet_month())
    stops = detect_stops(pings)
    waiting = sorted(waiting_stops(stops, pings), key=lambda w: (w["end_ns"], w["vehicle_id"]))
    return pings, stops, waiting


class TestStandFormationKernel:
    def test_pieces_give_the_batch_of_each_closed_day(self) -> None:
        """Stop by stop, in one piece or random pieces: the batch as of each day, once a place."""
        pings, stops, waiting = _month()
        reference = _reference(stops, pings)
        assert len(reference) == 1 and reference["details"].iloc[0]["n_days"] == 3
        assert reference["details"].iloc[0]["n_vehicles"] == 4  # F joined on the third day
        final = detect_illegal_stand_formation(stops, pings, STANDS)
        assert final["finding_id"].tolist() == reference["finding_id"].tolist()  # grew, same id
        assert final["details"].iloc[0]["n_vehicles"] == 5
        assert_day_pieces_give(lambda cuts: _replay(waiting, cuts), len(waiting), reference)

    def test_live_window_judges_each_day_over_its_last_days(self) -> None:
        """With a window, a day counts only its last days' stops, as the batch over them."""
        pings, stops, waiting = _month()
        kw: dict[str, Any] = {"min_vehicles": 2, "min_days": 2}
        reference = _reference(stops, pings, window_days=2, **kw)
        assert len(reference) >= 2  # the rank again, once its first stops left the window
        assert_day_pieces_give(
            lambda cuts: _replay(waiting, cuts, window_days=2, **kw), len(waiting), reference
        )

    def test_state_keeps_the_window_only(self) -> None:
        """Stops and ids older than the window leave the state (a bounded state)."""
        _, _, waiting = _month()
        last = _end_day(waiting[-1]["end_ns"])
        state, _ = advance_illegal_stand_formation(
            None, waiting, stands=STANDS, through=last, window_days=1
        )
        assert state["judged"] == (last - dt.date(1970, 1, 1)).days
        assert {_end_day(c["end_ns"]) for c in state["stops"]} == {last}
        assert all(d == state["judged"] for d in state["emitted"].values())

    def test_late_stop_counts_from_the_next_day(self) -> None:
        """A stop given after its day was judged is counted on the next day judged."""
        _, _, waiting = _month()
        day2 = _end_day(min(w["end_ns"] for w in waiting if w["vehicle_id"] == "C"))
        early = [
            w for w in waiting if w["vehicle_id"] in {"A", "B"} and _end_day(w["end_ns"]) <= day2
        ]
        state, found = advance_illegal_stand_formation(None, early, stands=STANDS, through=day2)
        assert len(found) == 0  # A and B: two vehicles
        late = [w for w in waiting if w["vehicle_id"] == "C"]
        state, found = advance_illegal_stand_formation(state, late, stands=STANDS, through=day2)
        assert len(found) == 0 and state["dirty"]  # a judged day is not judged again
        _, found = advance_illegal_stand_formation(
            state, [], stands=STANDS, through=day2 + dt.timedelta(days=1)
        )
        assert len(found) == 1 and found["details"].iloc[0]["vehicles"] == ["A", "B", "C"]

    def test_bad_threshold_raises(self) -> None:
        """Thresholds are checked as in batch, even with no stop."""
        with pytest.raises(DetectorThresholdError, match="min_vehicles"):
            advance_illegal_stand_formation(None, [], stands=STANDS, min_vehicles=0)
        with pytest.raises(DetectorThresholdError, match="window_days"):
            advance_illegal_stand_formation(None, [], stands=STANDS, window_days=0)


def _boardings_one_fix_at_a_time(track, first, last, end, lat, lon):  # type: ignore[no-untyped-def]
    """The rule of :func:`_boardings` read fix by fix (the oracle of the test below)."""
    from geo.crs import haversine_m
    from tracking.detectors import illegal_stand_formation as isf
    from tracking.detectors._track_kernels import METER_FREE, METER_OCCUPIED, NS

    out = np.full(len(first), -1, dtype=np.int64)
    n, free = len(track.ts_ns), track.meter == METER_FREE
    limit = round(isf.BOARDING_WITHIN_S * NS)
    for k in range(len(first)):
        a, b = int(first[k]), int(last[k])
        at = np.flatnonzero(free[a : b + 1])
        if not len(at):
            continue
        j, near = a + int(at[-1]) + 1, int(end[k])
        while j < n and track.codes[j] == track.codes[a] and free[j]:
            if haversine_m(lat[k], lon[k], track.lat[j], track.lon[j]) <= isf.BOARDING_WITHIN_M:
                near = max(near, int(track.ts_ns[j]))
            elif track.ts_ns[j] - near > limit:
                break
            j += 1
        if j >= n or track.codes[j] != track.codes[a] or track.meter[j] != METER_OCCUPIED:
            continue
        steps = [
            float(haversine_m(track.lat[i], track.lon[i], track.lat[i + 1], track.lon[i + 1]))
            for i in range(a + int(at[-1]), j - 1)
        ]
        if (
            track.ts_ns[j] - near <= limit
            and float(haversine_m(lat[k], lon[k], track.lat[j], track.lon[j]))
            <= isf.BOARDING_WITHIN_M
            and not any(s > isf.JOIN_STEP_M for s in steps)
        ):
            out[k] = j
    return out


@pytest.mark.parametrize("seed", range(6))
def test_boardings_read_in_blocks_match_the_rule_fix_by_fix(seed: int) -> None:
    """Random tracks of a few vehicles (free runs of up to 400 fixes that wander near and far,
    meters switched at random): each wait's boarding is the one the rule finds fix by fix."""
    from tracking.detectors import illegal_stand_formation as isf
    from tracking.detectors._track_kernels import TrackArrays

    rng = np.random.default_rng(seed)
    n = 3000
    codes = np.sort(rng.integers(0, 4, n))
    ts = np.zeros(n, dtype=np.int64)
    for c in range(4):
        mine = codes == c
        ts[mine] = np.cumsum(rng.integers(5, 40, mine.sum())) * 1_000_000_000
    step = rng.normal(0, 0.0001, (n, 2)) * rng.choice([1, 12], (n, 1), p=[0.95, 0.05])
    lat, lon = -30.03 + np.cumsum(step[:, 0]), -51.23 + np.cumsum(step[:, 1])
    lengths = np.where(rng.random(n) < 0.1, rng.integers(1, 400, n), rng.integers(1, 12, n))
    kinds = rng.choice([1, 2, 3], n, p=[0.6, 0.3, 0.1])  # free, occupied, off
    meter = np.repeat(kinds, lengths)[:n].astype(np.int8)
    track = TrackArrays(
        vehicles=np.array(["A", "B", "C", "D"], dtype=object), codes=codes, ts_ns=ts,
        lat=lat, lon=lon, meter=meter, row=np.arange(n), speed_flag=np.zeros(n, dtype=bool),
    )  # fmt: skip
    first = np.sort(rng.integers(0, n - 1, 200))
    last = np.minimum(first + rng.integers(0, 30, 200), n - 1)
    end = ts[last] + rng.integers(0, 60, 200) * 1_000_000_000
    near = rng.normal(0, 0.0005, (200, 2))  # the wait's place: near its last fix, or not
    args = (track, first, last, end, lat[last] + near[:, 0], lon[last] + near[:, 1])
    expected = _boardings_one_fix_at_a_time(*args)
    assert (expected >= 0).sum() >= 10  # the draw has boardings to find
    assert isf._boardings(*args).tolist() == expected.tolist()
