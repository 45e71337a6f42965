from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from factories import make_pings, offset_m
from kernel_checks import assert_pieces_give_batch, geojson_bytes

from tracking.detectors._errors import BoundaryError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.kernel import advance, replay_in_pieces
from tracking.detectors.outside_municipality import (
    KERNEL,
    boundary_polygon,
    detect_outside_municipality,
)
from tracking.trips import detect_trips

DATA = Path(__file__).resolve().parents[3] / "data"
BOUNDARIES = DATA / "brazil" / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"


def square(half_m: float = 5000.0) -> shapely.Polygon:
    """A square of side 2 * half_m metres around the factories' origin, in lon/lat."""
    corners = [offset_m(n * half_m, e * half_m) for n, e in ((-1, -1), (-1, 1), (1, 1), (1, -1))]
    return shapely.Polygon([(lon, lat) for lat, lon in corners])


def ride(
    vehicle: str,
    start_s: int,
    north_m: float,
    east_m: float,
    *,
    step_east_m: float = -200.0,
    n: int = 10,
    before: str | None = "free",
    **extra: Any,
) -> list[dict]:
    """A fix with meter ``before``, then ``n`` occupied fixes every 30 s moving east-west."""
    rows = []
    for k in range(-1, n):
        lat, lon = offset_m(north_m, east_m + step_east_m * max(k, 0))
        meter = before if k < 0 else "occupied"
        row = {"vehicle_id": vehicle, "timestamp": start_s + 30 * (k + 1), "lat": lat, "lon": lon}
        row["meter"] = meter
        if k == 0:
            row.update(extra)
        rows.append(row)
    return rows


def detect(rows: list[dict], boundary: Any = None, **kw: Any) -> pd.DataFrame:
    pings = make_pings(rows)
    trips = detect_trips(pings, max_gap_s=300.0)
    return detect_outside_municipality(
        trips, square() if boundary is None else boundary, pings=pings, **kw
    )


class TestDetectOutsideMunicipality:
    def test_pickup_outside_is_found(self) -> None:
        """A pickup 1 km outside the boundary is one finding with its distance."""
        found = detect(ride("v1", 0, 0.0, 6000.0))
        validate_findings(found)
        assert list(found.columns) == list(FINDING_COLUMNS)
        f = found.iloc[0]
        assert (f["kind"], f["vehicle_id"], f["stand_id"]) == ("outside_municipality", "v1", None)
        d = f["details"]
        json.dumps(d)
        assert d["distance_to_boundary_m"] == pytest.approx(1000.0, rel=0.01)
        assert d["meter_switch_seen"] is True
        assert d["thresholds"] == {"boundary_tolerance_m": 200.0}
        assert d["crs"] == "EPSG:31982"
        assert [x["row"] for x in d["fixes"]] == [1, 2]
        assert f["confidence"] == pytest.approx(0.95)
        lat, lon = offset_m(0.0, 6000.0)
        assert (f.geometry.x, f.geometry.y) == pytest.approx((lon, lat))

    @pytest.mark.parametrize(
        ("east_m", "expected"),
        [(0.0, 0), (4900.0, 0), (5100.0, 0), (5300.0, 1)],
        ids=["centre", "inside-edge", "within-tolerance", "beyond-tolerance"],
    )
    def test_tolerance_absorbs_boundary_error(self, east_m: float, expected: int) -> None:
        """Pickups inside, or up to 200 m outside, accuse nobody."""
        assert len(detect(ride("v1", 0, 0.0, east_m))) == expected

    def test_tolerance_is_a_parameter(self) -> None:
        """With a 50 m tolerance a pickup 100 m outside is found, at low confidence."""
        found = detect(ride("v1", 0, 0.0, 5100.0), boundary_tolerance_m=50.0)
        assert len(found) == 1
        assert found.iloc[0]["confidence"] == pytest.approx(0.5 + 0.45 * 50 / 200, abs=1e-3)

    def test_dropoff_outside_is_lawful(self) -> None:
        """A ride started inside and ending in another municipality is allowed (art. 19)."""
        assert detect(ride("v1", 0, 0.0, 3000.0, step_east_m=500.0)).empty

    def test_tracking_resumed_with_passenger_halves_confidence(self) -> None:
        """A trip that 'starts' after a silence with the meter already occupied is uncertain."""
        rows = ride("v1", 0, 0.0, 0.0, n=3) + ride("v1", 3600, 0.0, 7000.0, before="occupied")
        found = detect(rows)
        assert len(found) == 1
        assert found.iloc[0]["details"]["meter_switch_seen"] is False
        assert found.iloc[0]["confidence"] == pytest.approx(0.95 * 0.5)

    @pytest.mark.parametrize(
        ("last_east_m", "silence_s", "meter_across", "expected"),
        [
            (4900.0, 360, "occupied", 0),
            (5150.0, 360, "occupied", 0),
            (5900.0, 360, "occupied", 0),
            (4900.0, 3600, "occupied", 1),
            (4900.0, 360, "free", 0),
            (4900.0, 360, "off", 0),
            (5900.0, 360, "free", 1),
        ],
        ids=[
            "continued",
            "last-fix-at-border",
            "last-fix-outside-ride-begun-inside",
            "long-silence",
            "meter-free-between",
            "meter-off-between",
            "meter-free-outside",
        ],
    )
    def test_ride_begun_inside_resumed_after_a_silence_outside_is_lawful(
        self, last_east_m: float, silence_s: int, meter_across: str, expected: int
    ) -> None:
        """A ride begun inside whose tracker falls silent at or past the border, the meter
        occupied on both sides, continues outside (art. 19): its part after the silence is no
        pickup. A long silence is still judged; a meter free or off across it from a fix
        inside leaves the boarding's place unknown (not judged); from a fix outside, judged."""
        rows = ride("v1", 0, 0.0, last_east_m - 900.0, step_east_m=100.0)
        resumed = ride("v1", 270 + silence_s, 0.0, 7000.0, step_east_m=100.0, before=None)
        if meter_across != "occupied":
            rows[-1]["meter"] = meter_across
        found = detect(rows + resumed[1:])
        assert len(found) == expected

    @pytest.mark.parametrize("cadence_s", [15, 30, 60])
    def test_hail_at_the_border_driving_outward_is_not_judged(self, cadence_s: int) -> None:
        """Free and still 5 m inside the city, then the first occupied fix already outside (the
        car drove outward before the next fix, 60 km/h): the passenger may have boarded in the
        city (art. 19). From a free fix outside, the same ride is found."""

        def hail(vehicle: str, east_m: float) -> list[dict]:
            rows = []
            for k in range(-3, 6):
                meter = "free" if k < 0 else "occupied"
                at_m = east_m + max(k + 1, 0) * cadence_s * 16.7
                lat, lon = offset_m(0.0, at_m)
                row = {"vehicle_id": vehicle, "timestamp": cadence_s * k, "lat": lat, "lon": lon}
                rows.append(row | {"meter": meter})
            return rows

        found = detect(hail("in", 4995.0) + hail("out", 5500.0))
        assert found["vehicle_id"].tolist() == ["out"]
        assert found.iloc[0]["details"]["meter_switch_seen"] is True

    def test_a_long_silence_from_a_free_fix_inside_leaves_the_boarding_unknown(self) -> None:
        """Free inside, then an hour's silence and occupied 2 km outside: where the ride began
        is not known: kept at half confidence, as a ride resumed aboard."""
        rows = ride("v1", 0, 0.0, 4900.0, n=2)
        rows[-1]["meter"] = "free"
        found = detect(rows + ride("v1", 3600, 0.0, 7000.0, before=None)[1:])
        assert found["details"].map(lambda d: d["meter_switch_seen"]).tolist() == [False]
        assert found.iloc[0]["confidence"] == pytest.approx(0.95 * 0.5)

    @pytest.mark.parametrize(
        ("blip", "pause_s", "expected"),
        [(["free"], 0, 0), (["off", "off"], 0, 0), (["free"] * 3, 0, 1), (["free"], 300, 1)],
        ids=["one-free-fix", "two-off-fixes", "three-free-fixes", "five-minutes-free"],
    )
    def test_meter_blip_in_a_ride_begun_inside_is_no_new_pickup(
        self, blip: list[str], pause_s: int, expected: int
    ) -> None:
        """A ride begun inside crosses into the next town; a meter read free or off for one or
        two fixes there does not start a ride outside. Three fixes, or five minutes free, is a
        passenger leaving and another boarding there: found."""
        rows = ride("v1", 0, 0.0, 4000.0, step_east_m=400.0, n=8)  # out of the city at 5000 m
        t, east = rows[-1]["timestamp"], 4000.0 + 400.0 * 7
        for k, meter in enumerate(blip):
            lat, lon = offset_m(0.0, east + 100.0 * (k + 1))
            at = t + 30 * (k + 1) + (pause_s if k == len(blip) - 1 else 0)
            rows.append(
                {"vehicle_id": "v1", "timestamp": at, "lat": lat, "lon": lon} | {"meter": meter}
            )
        after = ride("v1", rows[-1]["timestamp"], 0.0, east + 100.0 * (len(blip) + 1), before=None)
        rows += after[1:]
        found = detect(rows)
        assert len(found) == expected
        pings = make_pings(rows)
        batch = KERNEL.detect(pings, boundary=square())
        assert len(batch) == expected
        for cut in range(1, len(pings)):
            live = replay_in_pieces(KERNEL, pings, [cut], boundary=square())
            assert geojson_bytes(live) == geojson_bytes(batch)

    def test_a_silence_excuses_no_ride_begun_outside(self) -> None:
        """A silence after a pickup outside, or after a ride itself resumed aboard outside,
        excuses nothing: the pickup, and the second resumed part, are still found."""
        begun_outside = ride("v1", 0, 0.0, 6000.0, step_east_m=100.0)
        resumed = ride("v1", 660, 0.0, 7500.0, step_east_m=100.0, before=None)[1:]
        found = detect(begun_outside + resumed)
        assert [d["meter_switch_seen"] for d in found["details"]] == [True, False]
        aboard = ride("v1", 0, 0.0, 6000.0, step_east_m=100.0, before="occupied")
        assert len(detect(ride("v1", -3600, 0.0, 0.0, n=2) + aboard + resumed)) == 2

    @pytest.mark.parametrize("resumed", [False, True], ids=["meter-switch", "after-a-silence"])
    def test_pickup_thrown_outside_by_the_gps_is_not_judged(self, resumed: bool) -> None:
        """A ride begun 2 km inside whose pickup fix the receiver threw 4 km outside, the next
        fix back on the track, accuses nobody: at the meter switch, or as the first fix after
        an hour's silence (the step into it is then possible, the step out is not)."""
        rows = ride("v1", 0, 0.0, 3000.0, step_east_m=-100.0)
        if resumed:
            rows = ride("v1", -3600, 0.0, 0.0, n=2) + rows[1:]
        pickup = next(i for i, r in enumerate(rows) if r["timestamp"] == 30)
        assert detect(rows).empty  # inside
        rows[pickup]["lat"], rows[pickup]["lon"] = offset_m(0.0, 9000.0)
        assert detect(rows).empty
        for r in rows[pickup + 1 : pickup + 4]:  # a stretch of four fixes, back 2 min later
            r["lat"], r["lon"] = offset_m(0.0, 9000.0 - 100.0 * (r["timestamp"] - 30) / 30)
        assert detect(rows).empty

    def test_a_jump_later_in_the_ride_leaves_the_pickup_judged(self) -> None:
        """A fix thrown away 6 min into the ride says nothing of the pickup: still found."""
        rows = ride("v1", 0, 0.0, 6500.0, n=15)
        rows[13]["lat"], rows[13]["lon"] = offset_m(8000.0, 0.0)
        found = detect(rows)
        assert len(found) == 1 and found.iloc[0]["confidence"] == pytest.approx(0.95)

    def test_poor_accuracy_lowers_confidence(self) -> None:
        """A pickup with 800 m accuracy weighs less."""
        sharp = detect(ride("v1", 0, 0.0, 5600.0)).iloc[0]
        blurred = detect(ride("v1", 0, 0.0, 5600.0, accuracy_m=300.0)).iloc[0]
        assert blurred["details"]["pickup_accuracy_m"] == 300.0
        assert blurred["confidence"] < sharp["confidence"]

    def test_stop_inferred_trips_are_not_judged_by_default(self) -> None:
        """A vehicle without meter leaving a stop outside is no ride, unless asked."""
        stay = [(t, 0.0, 7000.0) for t in range(0, 301, 30)]
        move = [(330 + 30 * k, 0.0, 7000.0 - 300.0 * k) for k in range(1, 10)]
        stay2 = [(630 + t, 0.0, 4300.0) for t in range(0, 301, 30)]
        rows = []
        for t, n, e in stay + move + stay2:
            lat, lon = offset_m(n, e)
            rows.append({"vehicle_id": "v1", "timestamp": t, "lat": lat, "lon": lon})
        pings = make_pings(rows)
        trips = detect_trips(pings)
        assert (trips["source"] == "stops").all() and len(trips) == 1
        assert detect_outside_municipality(trips, square(), pings=pings).empty
        found = detect_outside_municipality(
            trips, square(), pings=pings, include_inferred_trips=True
        )
        assert found.iloc[0]["details"]["source"] == "stops"

    def test_without_pings_switch_is_unknown(self) -> None:
        """Without pings the meter switch is not checked (None) and confidence is not cut."""
        trips = detect_trips(make_pings(ride("v1", 0, 0.0, 6000.0)))
        f = detect_outside_municipality(trips, square()).iloc[0]
        assert f["details"]["meter_switch_seen"] is None
        assert f["details"]["fixes"][0]["row"] == 2

    def test_real_porto_alegre_boundary(self) -> None:
        """A ride hailed in Canoas is outside Porto Alegre; one from Praça da Matriz is not."""
        poa = gpd.read_file(BOUNDARIES)
        poa = poa.loc[poa["cod_ibge"].astype(str) == "4314902"]
        matriz = ride("v1", 0, 0.0, 0.0)
        canoas = ride("v2", 0, 0.0, 0.0)
        for r in canoas:
            r["lat"], r["lon"] = -29.9177, -51.1836
        canoas[1]["lat"] += 1e-4  # the meter starts while moving
        found = detect(matriz + canoas, poa)
        assert found["vehicle_id"].tolist() == ["v2"]
        assert found.iloc[0]["details"]["distance_to_boundary_m"] > 1000.0

    def test_a_position_no_taxi_of_the_city_serves_is_not_judged(self) -> None:
        """Latitude and longitude swapped (the Praça da Matriz ride read as -51.23, -30.03, in
        the South Atlantic): 2,000 km from Porto Alegre is a wrong coordinate, not a ride
        begun outside; Canoas, next door, still is."""
        poa = gpd.read_file(BOUNDARIES)
        poa = poa.loc[poa["cod_ibge"].astype(str) == "4314902"]
        swapped, canoas = ride("v1", 0, 0.0, 0.0), ride("v2", 0, 0.0, 0.0)
        east = [r["lon"] - swapped[0]["lon"] for r in swapped]  # the ride's steps, in degrees
        for r, step in zip(swapped, east, strict=True):
            r["lat"], r["lon"] = -51.2300, -30.0300 + step
        for r, step in zip(canoas, east, strict=True):
            r["lat"], r["lon"] = -29.9177, -51.1836 + step
        assert detect(swapped + canoas, poa)["vehicle_id"].tolist() == ["v2"]

    def test_projected_frame_is_reprojected(self) -> None:
        """A boundary frame in SIRGAS 2000 / UTM 22S gives the same finding."""
        frame = gpd.GeoDataFrame(geometry=[square()], crs=4326).to_crs(31982)
        a = detect(ride("v1", 0, 0.0, 6000.0))
        b = detect(ride("v1", 0, 0.0, 6000.0), frame)
        assert a["finding_id"].tolist() == b["finding_id"].tolist()
        assert b.iloc[0]["details"]["distance_to_boundary_m"] == pytest.approx(
            a.iloc[0]["details"]["distance_to_boundary_m"], abs=0.5
        )

    def test_bad_tolerance_raises(self) -> None:
        """A negative tolerance is refused by name."""
        with pytest.raises(DetectorThresholdError, match="boundary_tolerance_m"):
            detect(ride("v1", 0, 0.0, 0.0), boundary_tolerance_m=-1.0)


class TestBoundaryPolygon:
    @pytest.mark.parametrize(
        ("boundary", "match"),
        [
            (gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)]), "CRS"),
            (shapely.LineString([(0, 0), (1, 1)]), "LineString"),
            (shapely.box(500000, 6600000, 510000, 6610000), "EPSG:4326"),
            (shapely.Polygon(), "vazio"),
            ("POLYGON((0 0, 1 0, 1 1, 0 0))", "str"),
        ],
        ids=["no-crs", "line", "projected-coordinates", "empty", "text"],
    )
    def test_unusable_boundaries_raise(self, boundary: Any, match: str) -> None:
        """Boundaries that are not (Multi)Polygons in lon/lat are refused."""
        with pytest.raises(BoundaryError, match=match):
            boundary_polygon(boundary)

    def test_frame_rows_are_unioned_and_invalid_repaired(self) -> None:
        """Several rows become one polygon; a bow-tie is repaired into a valid one."""
        frame = gpd.GeoDataFrame(
            geometry=[shapely.box(0, 0, 1, 1), shapely.box(2, 0, 3, 1)], crs=4326
        )
        assert boundary_polygon(frame).geom_type == "MultiPolygon"
        bowtie = shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])
        fixed = boundary_polygon(bowtie)
        assert fixed.is_valid and fixed.area == pytest.approx(0.5)


def _fleet_days() -> list[dict]:
    """Three vehicles over two days: pickups outside and inside, and the edge cases."""
    day = 86_400
    rows = (
        ride("a", 0, 0.0, 7000.0)  # outside, switch seen
        + ride("a", 900, 0.0, 0.0)  # inside
        + ride("a", day, 0.0, 5150.0)  # within the tolerance: nothing
        + ride("a", day + 1800, 0.0, 9000.0, before="off", accuracy_m=40.0)
        + ride("b", 60, 6000.0, 0.0, before="occupied")  # resumed aboard: half confidence
        + ride("b", 2000, 0.0, 8000.0, before=None)  # unknown meter before
        + ride("b", day + 60, 0.0, 6500.0, speed_kmh=10.0)
        + ride("c", 0, 0.0, 0.0)  # never outside
    )
    # b: a silence inside a trip splits it (the second part starts outside, no switch seen)
    lat, lon = offset_m(0.0, 7500.0)
    rows += [
        {"vehicle_id": "b", "timestamp": day + 5000, "lat": lat, "lon": lon, "meter": "occupied"},
        {"vehicle_id": "b", "timestamp": day + 5030, "lat": lat, "lon": lon, "meter": "occupied"},
        {"vehicle_id": "b", "timestamp": day + 6000, "lat": lat, "lon": lon, "meter": "occupied"},
        {"vehicle_id": "b", "timestamp": day + 6030, "lat": lat, "lon": lon, "meter": "free"},
    ]
    # a trip with no fix before it (the vehicle's first fix is occupied)
    first = ride("d", 0, 0.0, -8000.0)[1:]
    # a pickup the receiver threw outside: not judged
    thrown = ride("e", 0, 0.0, 3000.0, step_east_m=-100.0)
    thrown[1]["lat"], thrown[1]["lon"] = offset_m(0.0, 9000.0)
    # a short ride outside, then a fix thrown away 2 min after its pickup, the meter free: the
    # ride is judged on its own fixes (live emits it at its first free fix)
    short = ride("f", 0, 0.0, 6500.0, n=3)
    for j in range(3):
        lat, lon = offset_m(8000.0 if j == 1 else 0.0, 6000.0)
        short.append({"vehicle_id": "f", "timestamp": 120 + 30 * j, "lat": lat, "lon": lon})
        short[-1]["meter"] = "free"
    return rows + first + thrown + short


class TestOutsideMunicipalityKernel:
    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, over vehicles and days, the findings are the batch's."""
        pings = make_pings(_fleet_days())
        batch = assert_pieces_give_batch(KERNEL, pings, min_findings=9, boundary=square())
        assert len(batch) == 9 and "e" not in set(batch["vehicle_id"])

    def test_kernel_is_the_batch_function_on_meter_trips(self) -> None:
        """The kernel's rule is detect_outside_municipality over the pipeline's trips."""
        pings = make_pings(_fleet_days())
        batch = detect_outside_municipality(
            detect_trips(pings, max_gap_s=300.0), square(), pings=pings
        )
        assert geojson_bytes(KERNEL.detect(pings, boundary=square())) == geojson_bytes(batch)

    def test_finding_is_emitted_when_the_trip_ends(self) -> None:
        """Nothing while the passenger is aboard; the first free fix emits the trip's finding."""
        pings = make_pings(ride("a", 0, 0.0, 7000.0) + ride("a", 900, 0.0, 0.0))
        states: dict[str, Any] = {}
        emitted = []
        for k in range(len(pings)):
            states, found = advance(KERNEL, states, pings.iloc[k : k + 1], boundary=square())
            emitted.append(len(found))
            json.dumps(states)  # plain data
        assert emitted.index(1) == 11  # the free fix before the second ride
        assert sum(emitted) == 1
        assert len(advance(KERNEL, states, pings.iloc[:0], final=True, boundary=square())[1]) == 0

    def test_state_keeps_the_open_trip_and_the_fix_before_it(self) -> None:
        """Aboard, the state holds the trip from the pickup and the fixes before (up to three: a
        meter blip); between trips, the last fix and three before it."""
        pings = make_pings(ride("a", 0, 0.0, 7000.0) + ride("a", 900, 0.0, 0.0))
        states, _ = advance(KERNEL, {}, pings.iloc[:6], boundary=square())
        assert states["a"]["tail"]["meter"] == ["free", *["occupied"] * 5]
        assert states["a"]["open"] == states["a"]["tail"]["timestamp"][1]
        states, _ = advance(KERNEL, states, pings.iloc[6:12], boundary=square())
        assert states["a"]["tail"]["meter"] == ["occupied", "occupied", "occupied", "free"]

    def test_trip_resumed_after_a_silence_keeps_its_fix_before(self) -> None:
        """A trip split by a silence, cut at the silence: its second part names the fix before
        it and the first part is not found twice."""
        lat, lon = offset_m(0.0, 7500.0)
        rows = [
            {"vehicle_id": "b", "timestamp": t, "lat": lat, "lon": lon, "meter": m}
            for t, m in ((0, "free"), (30, "occupied"), (1000, "occupied"), (1030, "free"))
        ]
        pings = make_pings(rows)
        batch = KERNEL.detect(pings, boundary=square())
        assert len(batch) == 2
        assert batch.iloc[1]["details"]["fixes"][0]["timestamp"] == "2024-03-04T12:00:30Z"
        for cut in range(1, len(pings)):
            live = replay_in_pieces(KERNEL, pings, [cut], boundary=square())
            assert geojson_bytes(live) == geojson_bytes(batch)

    def test_ride_continued_after_a_silence_live_as_in_batch(self) -> None:
        """Cut anywhere, a ride begun inside and resumed outside after a silence accuses no one
        live either; one begun outside is found as in batch."""
        inside = ride("a", 0, 0.0, 4500.0, step_east_m=100.0)  # out of the city 400 m
        outside = ride("b", 0, 0.0, 6000.0, step_east_m=100.0)
        rows = inside + ride("a", 660, 0.0, 7500.0, step_east_m=100.0, before=None)[1:]
        rows += outside + ride("b", 660, 0.0, 7500.0, step_east_m=100.0, before=None)[1:]
        rows += [{**r, "meter": "free", "timestamp": r["timestamp"] + 300} for r in rows[-1:]]
        pings = make_pings(rows)
        batch = KERNEL.detect(pings, boundary=square())
        assert batch["vehicle_id"].tolist() == ["b", "b"]
        for cut in range(1, len(pings)):
            live = replay_in_pieces(KERNEL, pings, [cut], boundary=square())
            assert geojson_bytes(live) == geojson_bytes(batch)
        assert_pieces_give_batch(KERNEL, pings, min_findings=1, boundary=square())

    def test_late_fix_is_ignored(self) -> None:
        """A fix not later than the last one seen leaves the state as it was."""
        pings = make_pings(ride("a", 0, 0.0, 7000.0))
        state, _ = advance(KERNEL, {}, pings.iloc[3:4], boundary=square())
        again, found = advance(KERNEL, state, pings.iloc[2:3], boundary=square())
        assert len(found) == 0 and again == state
