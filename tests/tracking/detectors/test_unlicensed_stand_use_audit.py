"""unlicensed_stand_use on lawful tracks an audit found accused: GPS drift into a neighbouring
stand after waiting at the own one; a passenger aboard in a jam through a suspended stand."""

from __future__ import annotations

import json
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from factories import make_pings, make_track, offset_m
from kernel_checks import cuttings, geojson_bytes, replay_visits
from live_compare import concat_live

from geo.cover import build_stand_cover, match_stands
from stands.licences import licence_frame_from_fleet
from stands.visits import detect_visits, unreleased_arrivals
from tracking.detectors.findings import empty_findings
from tracking.detectors.unlicensed_stand_use import (
    advance_unlicensed_stand_use,
    detect_unlicensed_stand_use,
)

# (north_m, east_m, radius_m): A and B 72 m apart (like PUC and Hospital da PUC); P alone.
STANDS = {"A": (0.0, 0.0, 30.0), "B": (0.0, 72.0, 30.0), "P": (3000.0, 0.0, 30.0)}
FLEET = pd.DataFrame(
    {
        "vehicle_id": ["v1", "v2", "acc", "park"],
        "accessible": [False, False, True, False],
        "stands": [("A",), ("P",), ("A",), ("B",)],
        "stand_names": [(), (), (), ()],
    }
)


def _stands() -> gpd.GeoDataFrame:
    rows = []
    for stand, (north, east, radius) in STANDS.items():
        lat, lon = offset_m(north, east)
        circle = gpd.GeoSeries.from_xy([lon], [lat], crs=4326).to_crs(31982).buffer(radius, 64)
        rows.append({"stand_id": stand, "geometry": circle.to_crs(4326).iloc[0]})
    return gpd.GeoDataFrame(rows, crs=4326)


def _batch(pings: pd.DataFrame, **kw: Any) -> gpd.GeoDataFrame:
    cover = build_stand_cover(_stands())
    p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
    memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
    visits = detect_visits(
        pings,
        memberships,
        stands=_stands(),
        licences=licence_frame_from_fleet(FLEET),
        max_gap_s=300.0,
    )
    return detect_unlicensed_stand_use(visits, pings, fleet=FLEET, **kw)


def _live(pings: pd.DataFrame, cuts: list[int], **kw: Any) -> gpd.GeoDataFrame:
    states: dict[str, Any] = {}
    out: list[gpd.GeoDataFrame] = []

    def feed(visits: pd.DataFrame, fixes: pd.DataFrame, vstate: dict[str, Any] | None) -> None:
        nonlocal states
        states, found = advance_unlicensed_stand_use(
            states,
            visits,
            fixes,
            pending=unreleased_arrivals(vstate) if vstate is not None else {},
            final=vstate is None,
            fleet=FLEET,
            **kw,
        )
        states = json.loads(json.dumps(states))
        out.append(found)

    replay_visits(
        pings,
        cuts,
        cover=build_stand_cover(_stands()),
        stands=_stands(),
        licences=licence_frame_from_fleet(FLEET),
        max_gap_s=300.0,
        watermark=True,
        then=feed,
    )
    live = concat_live(out)
    return empty_findings() if live is None else live


def _same_live(pings: pd.DataFrame, batch: gpd.GeoDataFrame, **kw: Any) -> None:
    """Fix by fix and in random pieces, live gives the batch's bytes."""
    expected = geojson_bytes(batch)
    assert geojson_bytes(_live(pings, list(range(1, len(pings))), **kw)) == expected
    for cuts in cuttings(len(pings), seeds=2, one_by_one=False, max_pieces=20):
        assert geojson_bytes(_live(pings, cuts, **kw)) == expected, cuts[:10]


def _drift(stay_at_b_s: int, *, drift_m: float = 68.0) -> list[dict]:
    """v1 waits 600 s at its stand A; its next fixes are ``drift_m`` east (inside B) for
    ``stay_at_b_s``, the meter coming on there; then it drives north."""
    points = [(-120 + 30 * k, -400.0 + 100 * k, 0.0) for k in range(4)]
    points += [(t, 2.0 * (t % 60 == 0), 3.0 * (t % 90 == 0)) for t in range(0, 601, 15)]
    t_b = [615 + 15 * k for k in range(stay_at_b_s // 15 + 1)]
    points += [(t, 1.0, drift_m + (k % 2)) for k, t in enumerate(t_b)]
    meters = ["free"] * len(points)
    meters[-1] = "occupied"  # passenger aboard at the last fix at B
    points += [(t_b[-1] + 15 * k, 30.0 + 150.0 * k, drift_m - 10) for k in range(1, 6)]
    meters += ["occupied"] * 5
    return make_track("v1", points, meter=meters)


class TestBoardingAfterTheOwnStand:
    def test_drift_into_the_neighbouring_stand_is_not_found(self) -> None:
        """A licensed taxi waits 10 min at A; GPS drift of 68 m puts the boarding fix inside B
        (72 m away) 30 s later: the boarding is A's, no finding, batch and live."""
        pings = make_pings(_drift(30))
        assert _batch(pings).empty
        _same_live(pings, _batch(pings))

    def test_live_awaits_the_boarding_after_the_own_visit(self) -> None:
        """A vehicle parked at B holds B's queue, so v1's A visit is released long before its
        B visit: live keeps the A visit for the boarding that follows it, as the batch."""
        parked = [(t, 3.0, 80.0) for t in range(-600, 1801, 30)]
        parked += [(1800 + 30 * k, -150.0 * k, 80.0) for k in range(1, 7)]
        pings = make_pings(_drift(30) + make_track("park", parked, meter="off"))
        batch = _batch(pings)
        assert batch.empty
        _same_live(pings, batch)

    def test_a_stay_at_the_neighbouring_stand_is_still_found(self) -> None:
        """The same taxi staying 90 s at B before the meter (a wait there, not a drift) is
        found at B, batch and live."""
        pings = make_pings(_drift(90))
        found = _batch(pings)
        assert found[["vehicle_id", "stand_id"]].values.tolist() == [["v1", "B"]]
        assert found.iloc[0]["details"]["subtype"] == "boarding"
        _same_live(pings, found)

    def test_boarding_long_after_the_own_stand_is_still_found(self) -> None:
        """Leaving A, driving around 5 min, then a 30-s stay at B and a boarding there: found."""
        rows = _drift(30)
        late = [dict(r) for r in rows]
        for r in late:
            if r["timestamp"] >= 615:
                r["timestamp"] += 300
        pings = make_pings(late)
        assert len(_batch(pings)) == 1


def _through_p(meter: str, *, crawl_s: int = 420, vehicle: str = "v1") -> list[dict]:
    """A car crawling ``crawl_s`` through stand P (a jam, 56 m), meter ``meter``, then on."""
    points = [(-180 + 30 * k, 3000.0 - 400 + 100 * k, 0.0) for k in range(4)]
    n = crawl_s // 30
    points += [(30 * k, 3000.0 - 28 + 56 * k / n, 0.0) for k in range(n + 1)]
    points += [(crawl_s + 30 * k, 3028.0 + 150 * k, 0.0) for k in range(1, 5)]
    return make_track(vehicle, points, meter=meter)


def _suspension(stand: str, vehicle: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "suspension_id": [1],
            "stand_id": [stand],
            "vehicle_id": pd.Series([vehicle], dtype="object"),
            "driver_id": pd.Series([None], dtype="object"),
            "starts_on": pd.to_datetime(["2024-03-01"]),
            "ends_on": pd.to_datetime(["2024-03-20"]),
            "kind": ["suspension"],
        }
    )


class TestOccupiedIsNotWaiting:
    def test_passenger_aboard_in_a_jam_through_a_suspended_stand_is_not_found(self) -> None:
        """v2, suspended from its stand P, crawls 7 min through it with a passenger aboard:
        not a wait at P (art. 45 § único I), no finding; the same crawl free is one."""
        susp = _suspension("P", "v2")
        occupied = make_pings(_through_p("occupied", vehicle="v2"))
        assert _batch(occupied, suspensions=susp).empty
        _same_live(occupied, _batch(occupied, suspensions=susp), suspensions=susp)
        free = make_pings(_through_p("free", vehicle="v2"))
        found = _batch(free, suspensions=susp)
        assert len(found) == 1
        assert found.iloc[0]["details"]["use"] == "wait"
        assert found.iloc[0]["details"]["wait_s"] == 420.0

    def test_wait_starts_when_the_meter_goes_off(self) -> None:
        """Arriving occupied at the suspended stand, the passenger paying 3 min, then 4 min
        free: the wait is the 4 min (under 300 s: no finding); 6 min free is one, timed from
        the meter going off."""
        susp = _suspension("P", "v2")
        for free_s, expected in ((240, 0), (360, 1)):
            crawl = 180 + free_s
            meters = ["occupied"] * 4 + [
                "occupied" if 30 * k < 180 else "free" for k in range(crawl // 30 + 1)
            ]
            meters += ["free"] * 4
            rows = _through_p("free", crawl_s=crawl, vehicle="v2")
            for r, m in zip(rows, meters, strict=True):
                r["meter"] = m
            found = _batch(make_pings(rows), suspensions=susp)
            assert len(found) == expected
            if expected:
                d = found.iloc[0]["details"]
                assert d["wait_s"] == float(free_s)
                assert d["wait_started_at"] > d["arrived_at"]

    def test_accessible_taxi_with_passenger_in_a_jam_is_not_waiting(self) -> None:
        """A Táxi Acessível crawling 15 min through a foreign stand with a passenger aboard is
        not waiting there (art. 46 sole §): no accessible_wait finding; free, it is one."""
        occupied = make_pings(_through_p("occupied", crawl_s=900, vehicle="acc"))
        assert _batch(occupied).empty
        free = make_pings(_through_p("free", crawl_s=900, vehicle="acc"))
        found = _batch(free)
        assert found["details"].map(lambda d: d["subtype"]).tolist() == ["accessible_wait"]
        assert np.isclose(found.iloc[0]["details"]["wait_s"], 900.0)


def _past_b(stay_s: int) -> list[dict]:
    """v2 (licensed at P) drives east through B (centre 72 m east), staying ``stay_s`` inside;
    the meter comes on 20 m past B's far edge, 30 s after the last fix inside."""
    points = [(-60, 0.0, -200.0), (-30, 0.0, -100.0)]
    points += [(15 * k, 0.0, 60.0 + (k % 2)) for k in range(stay_s // 15 + 1)]
    last_in = 15 * (stay_s // 15)
    points += [(last_in + 30, 0.0, 72.0 + 30.0 + 20.0), (last_in + 60, 0.0, 300.0)]
    meters = ["free"] * (len(points) - 2) + ["occupied"] * 2
    return make_track("v2", points, meter=meters)


class TestMeterOnPastAStand:
    def test_a_pass_through_then_a_pickup_at_the_kerb_is_not_found(self) -> None:
        """Passing through B and starting the meter 20 m past its edge (a booked pickup at the
        kerb, art. 20 III) is no boarding "em ponto fixo" (art. 59 XIII): no finding."""
        pings = make_pings(_past_b(15))
        assert _batch(pings).empty
        _same_live(pings, _batch(pings))

    def test_a_stay_then_the_meter_past_the_edge_is_found(self) -> None:
        """Waiting 5 min in B, then the meter on 20 m past its edge: the passenger got in at
        B; found, at the distance it was."""
        pings = make_pings(_past_b(300))
        found = _batch(pings)
        assert found[["vehicle_id", "stand_id"]].values.tolist() == [["v2", "B"]]
        assert 0 < found.iloc[0]["details"]["boarding_distance_m"] <= 30
        _same_live(pings, found)
