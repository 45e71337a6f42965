from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from factories import at, make_pings, make_track
from kernel_checks import (
    cover_stands,
    cuttings,
    replay_visits,
    square_stand,
    stand_fleet,
    visits_csv,
)
from shapely import Polygon

from geo.cover import StandCover, build_stand_cover, match_stands
from stands._errors import (
    LicenceFrameError,
    MembershipError,
    MissingColumnError,
    NaiveTimestampError,
    PingFrameError,
    ThresholdError,
)
from stands.visits import (
    VISIT_FRAME_COLUMNS,
    advance_visits,
    detect_visits,
    empty_visits,
    unreleased_arrivals,
    visit_records,
    visits_from_records,
)
from tracking.frames import VISIT_COLUMNS

T0 = pd.Timestamp("2024-03-01T12:00:00Z")

# A fix: (seconds after T0, stands it is inside as "S" / "S,T" / "", meter or None).
Fix = tuple[float, str, str | None]


def _track(tracks: dict[str, list[Fix]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pings (sorted by vehicle, time) and memberships from hand-made tracks."""
    rows = [(v, t, stands, meter) for v, fixes in tracks.items() for t, stands, meter in fixes]
    frame = pd.DataFrame(rows, columns=["vehicle_id", "t", "stands", "meter"])
    frame = frame.sort_values(["vehicle_id", "t"], kind="stable", ignore_index=True)
    pings = pd.DataFrame(
        {
            "vehicle_id": frame["vehicle_id"].astype("str"),
            "timestamp": (T0 + pd.to_timedelta(frame["t"], unit="s")).astype("datetime64[ns, UTC]"),
            "lat": -30.03,
            "lon": -51.22,
            "meter": frame["meter"].astype(object),
            "row": np.arange(1, len(frame) + 1, dtype=np.int64),
        }
    )
    pairs = [(i, s) for i, stands in enumerate(frame["stands"]) for s in stands.split(",") if s]
    memberships = pd.DataFrame(
        {
            "ping_index": pd.Series([p for p, _ in pairs], dtype="int64"),
            "stand_id": pd.Series([s for _, s in pairs], dtype="str"),
        }
    )
    return pings, memberships


def _spot_stands() -> gpd.GeoDataFrame:
    """Stands S and T as polygons around the one spot of every ``_track`` fix.

    Whichever stands a fix is said to be in, it lies inside both polygons (0 m from them):
    with these geometries only the time of a trip start is judged.
    """
    square = Polygon(
        [(-51.2201, -30.0301), (-51.2201, -30.0299), (-51.2199, -30.0299), (-51.2199, -30.0301)]
    )
    return gpd.GeoDataFrame({"stand_id": ["S", "T"]}, geometry=[square, square], crs=4326)


def _steady(t_from: float, t_to: float, stands: str, meter: str | None = "free") -> list[Fix]:
    """Fixes every 15 s from t_from to t_to inclusive, all in the same place."""
    return [(float(t), stands, meter) for t in np.arange(t_from, t_to + 1, 15)]


def _at(seconds: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(seconds=seconds)


class TestDetectVisits:
    def test_jitter_bounce_within_grace_keeps_one_visit(self) -> None:
        """One fix outside between inside fixes (within exit_grace_s) does not split the visit."""
        fixes = [*_steady(0, 60, "S"), (75, "", "free"), *_steady(90, 180, "S")]
        visits = detect_visits(*_track({"A": fixes}))
        assert len(visits) == 1
        assert visits.loc[0, "arrived_at"] == _at(0)
        assert visits.loc[0, "departed_at"] == _at(180)
        assert visits.loc[0, "dwell_s"] == 180.0
        assert visits.loc[0, "n_fixes"] == 12

    @pytest.mark.parametrize(
        ("back_at", "n_visits"),
        [(165, 1), (180, 2), (400, 2)],
        ids=["excursion-equal-to-grace", "excursion-past-grace", "long-exit"],
    )
    def test_exit_longer_than_grace_splits(self, back_at: float, n_visits: int) -> None:
        """An excursion (first fix outside to first fix back) longer than the grace splits."""
        outside = [(float(t), "", "free") for t in np.arange(105, back_at, 15)]
        fixes = [*_steady(0, 90, "S"), *outside, *_steady(back_at, back_at + 120, "S")]
        visits = detect_visits(*_track({"A": fixes}), exit_grace_s=60)
        assert len(visits) == n_visits
        assert visits["departed_at"].iloc[-1] == _at(back_at + 120)

    def test_silence_longer_than_max_gap_splits(self) -> None:
        """A silence longer than max_gap_s between inside fixes ends the visit."""
        fixes = [*_steady(0, 90, "S"), *_steady(800, 890, "S")]
        visits = detect_visits(*_track({"A": fixes}), max_gap_s=600)
        assert list(visits["arrived_at"]) == [_at(0), _at(800)]
        assert list(visits["departed_at"]) == [_at(90), _at(890)]

    def test_silence_inside_short_excursion_splits(self) -> None:
        """A silence before a short excursion still ends the visit."""
        fixes = [*_steady(0, 90, "S"), (800, "", "free"), *_steady(810, 900, "S")]
        visits = detect_visits(*_track({"A": fixes}), max_gap_s=600, exit_grace_s=60)
        assert len(visits) == 2

    def test_min_dwell_drops_pass_through(self) -> None:
        """A short run of free fixes inside a stand is a pass-through, not a visit."""
        fixes = [(0, "", "free"), *_steady(15, 45, "S"), (60, "", "free")]
        visits = detect_visits(*_track({"A": fixes}), min_dwell_s=60)
        assert visits.empty

    def test_min_dwell_keeps_single_fix_boarding(self) -> None:
        """A visit shorter than the minimum dwell where the trip starts is kept."""
        fixes = [(0, "S", "free"), (15, "S", "occupied"), *_steady(30, 300, "", "occupied")]
        visits = detect_visits(*_track({"A": fixes}), min_dwell_s=60)
        assert len(visits) == 1
        assert visits.loc[0, "dwell_s"] == 15.0
        assert bool(visits.loc[0, "boarded"])
        assert visits.loc[0, "boarded_at"] == _at(15)

    def test_boarded_inside_the_stand(self) -> None:
        """The meter switching free to occupied inside the stand marks the visit boarded."""
        fixes = [*_steady(0, 120, "S"), *_steady(135, 165, "S", "occupied")]
        fixes += _steady(180, 300, "", "occupied")
        visits = detect_visits(*_track({"A": fixes}))
        assert bool(visits.loc[0, "boarded"])
        assert visits.loc[0, "boarded_at"] == _at(135)
        assert visits.loc[0, "boarding_ping"] == 9
        assert visits.loc[0, "boarding_row"] == 10
        assert visits.loc[0, "boarding_lag_s"] == -30.0

    @pytest.mark.parametrize(
        ("start_s", "boarded"),
        [(15, True), (120, True), (135, False), (300, False)],
        ids=["just-after", "at-grace", "past-grace", "long-after"],
    )
    def test_boarded_on_leaving_within_grace(self, start_s: float, boarded: bool) -> None:
        """A trip start at most boarding_grace_s after the last inside fix is a boarding."""
        leave = 120
        free_out = [(leave + float(t), "", "free") for t in np.arange(15, start_s, 15)]
        fixes = [*_steady(0, leave, "S"), *free_out, (leave + start_s, "", "occupied")]
        fixes.append((leave + start_s + 15, "", "occupied"))
        visits = detect_visits(*_track({"A": fixes}), stands=_spot_stands(), boarding_grace_s=120)
        assert len(visits) == 1
        assert bool(visits.loc[0, "boarded"]) is boarded
        if boarded:
            assert visits.loc[0, "boarding_lag_s"] == start_s
            assert visits.loc[0, "boarding_distance_m"] == 0.0
        else:
            assert pd.isna(visits.loc[0, "boarded_at"])

    def test_arriving_occupied_is_not_a_boarding(self) -> None:
        """A trip that started before the arrival does not mark the visit boarded."""
        fixes = [(0, "", "occupied"), *_steady(15, 120, "S", "occupied")]
        visits = detect_visits(*_track({"A": fixes}))
        assert len(visits) == 1
        assert not visits.loc[0, "boarded"]

    def test_occupied_after_a_silence_is_no_boarding(self) -> None:
        """Occupied fixes after a silence longer than max_gap_s start a new trip, but where its
        meter came on is unknown: no boarding at the stand where tracking resumed."""
        fixes = [*_steady(0, 60, "", "occupied"), *_steady(1000, 1120, "S", "occupied")]
        visits = detect_visits(*_track({"A": fixes}), max_gap_s=600)
        assert len(visits) == 1 and not visits.loc[0, "boarded"]

    @pytest.mark.parametrize(("before", "boarded"), [("S", True), ("", False)])
    def test_the_fix_before_the_trip_start_must_be_at_the_stand(
        self, before: str, boarded: bool
    ) -> None:
        """A fix every 60 s: the meter seen on at a fix inside the stand came on since the fix
        before; with that fix elsewhere (a hail in the street, the stand driven through), it
        is no boarding there."""
        fixes = [*_steady(0, 120, ""), (180, before, "free"), (240, "S", "occupied")]
        fixes += [(300, "S", "occupied"), *_steady(360, 600, "", "occupied")]
        visits = detect_visits(*_track({"A": fixes}), min_dwell_s=0)
        assert visits["boarded"].tolist() == [boarded]

    def test_unknown_meter_never_boards(self) -> None:
        """A vehicle whose meter is unknown (None) never boards."""
        fixes = [*_steady(0, 120, "S", None), *_steady(135, 300, "", None)]
        visits = detect_visits(*_track({"A": fixes}))
        assert len(visits) == 1
        assert not visits.loc[0, "boarded"]

    def test_pings_without_meter_column_never_board(self) -> None:
        """Pings without a meter column give visits that are never boarded."""
        pings, memberships = _track({"A": _steady(0, 120, "S", "occupied")})
        visits = detect_visits(pings.drop(columns="meter"), memberships)
        assert len(visits) == 1
        assert not visits.loc[0, "boarded"]

    def test_queue_positions_with_tie(self) -> None:
        """Queue position counts visits in progress at arrival; ties go by vehicle_id."""
        tracks = {
            "C": _steady(60, 390, "S"),
            "A": _steady(0, 300, "S"),
            "D": _steady(345, 495, "S"),
            "B": _steady(60, 390, "S"),
        }
        visits = detect_visits(*_track(tracks))
        positions = dict(zip(visits["vehicle_id"], visits["queue_position"], strict=True))
        assert positions == {"A": 1, "B": 2, "C": 3, "D": 3}

    def test_queue_counts_vehicle_departing_at_arrival_instant(self) -> None:
        """A vehicle whose last inside fix is at the arrival instant is still ahead (closed)."""
        tracks = {"A": _steady(0, 300, "S"), "B": _steady(300, 420, "S")}
        visits = detect_visits(*_track(tracks))
        assert list(visits["queue_position"]) == [1, 2]

    def test_queue_is_per_stand(self) -> None:
        """Vehicles at another stand do not count in the queue."""
        tracks = {"A": _steady(0, 300, "S"), "B": _steady(60, 300, "T")}
        visits = detect_visits(*_track(tracks))
        assert list(visits["queue_position"]) == [1, 1]

    @pytest.mark.parametrize(
        ("holder", "expected"),
        [("A", True), ("Z", False)],
        ids=["licensed", "not-licensed"],
    )
    def test_licensed(self, holder: str, expected: bool) -> None:
        """Licensed tells whether the vehicle holds a licence for the stand."""
        licences = pd.DataFrame({"vehicle_id": [holder], "stand_id": ["S"]})
        visits = detect_visits(*_track({"A": _steady(0, 120, "S")}), licences=licences)
        assert visits["licensed"].dtype == "boolean"
        assert bool(visits.loc[0, "licensed"]) is expected

    def test_licensed_is_na_where_the_licences_are_unknown(self) -> None:
        """A vehicle whose fleet row names a stand not analysed ('P01'): <NA> at S, not False;
        at S, a licence the data gives still says True; another vehicle is False."""
        licences = pd.DataFrame({"vehicle_id": ["B"], "stand_id": ["S"]})
        tracks = {v: _steady(0, 120, "S") for v in ("A", "B", "C")}
        visits = detect_visits(*_track(tracks), licences=licences, unknown_licences={"A", "B"})
        assert visits["licensed"].tolist() == [pd.NA, True, False]

    def test_licensed_is_na_without_licence_data(self) -> None:
        """Without licence data, licensed is <NA>."""
        visits = detect_visits(*_track({"A": _steady(0, 120, "S")}))
        assert visits["licensed"].dtype == "boolean"
        assert visits["licensed"].isna().all()

    @pytest.mark.parametrize(
        ("valid_until", "expected"),
        [("2024-03-01", True), ("2024-02-29", False)],
        ids=["valid-on-local-date", "expired-the-day-before"],
    )
    def test_licensed_uses_local_arrival_date(self, valid_until: str, expected: bool) -> None:
        """Validity dates compare with the arrival's local date (01:00 UTC is the day before)."""
        licences = pd.DataFrame(
            {"vehicle_id": ["A"], "stand_id": ["S"], "valid_until": [valid_until]}
        )
        late = 13 * 3600  # 2024-03-02T01:00Z = 2024-03-01 22:00 in São Paulo
        visits = detect_visits(
            *_track({"A": _steady(late, late + 120, "S")}),
            licences=licences,
            timezone="America/Sao_Paulo",
        )
        assert bool(visits.loc[0, "licensed"]) is expected

    def test_overlapping_stands_give_one_visit_each(self) -> None:
        """Fixes inside two overlapping stands give one visit per stand, same times."""
        fixes = [*_steady(0, 30, "S"), *_steady(45, 120, "S,T"), *_steady(135, 180, "T")]
        visits = detect_visits(*_track({"A": fixes}))
        assert list(visits["stand_id"]) == ["S", "T"]
        assert list(visits["arrived_at"]) == [_at(0), _at(45)]
        assert list(visits["departed_at"]) == [_at(120), _at(180)]

    def test_vehicles_are_not_merged(self) -> None:
        """Two vehicles at the same stand make two visits even if their fixes interleave."""
        tracks = {"A": _steady(0, 120, "S"), "B": _steady(0, 120, "S")}
        visits = detect_visits(*_track(tracks))
        assert list(visits["vehicle_id"]) == ["A", "B"]
        assert list(visits["n_fixes"]) == [9, 9]

    def test_unsorted_pings_give_the_same_visits(self) -> None:
        """Pings out of (vehicle, time) order are handled; ping indices refer to positions."""
        tracks = {"A": [*_steady(0, 120, "S"), *_steady(135, 200, "", "occupied")]}
        tracks["B"] = _steady(30, 200, "S")
        pings, memberships = _track(tracks)
        expected = detect_visits(pings, memberships, stands=_spot_stands())
        perm = np.random.default_rng(7).permutation(len(pings))
        shuffled = pings.iloc[perm].reset_index(drop=True)
        new_index = np.argsort(perm)
        moved = memberships.assign(ping_index=new_index[memberships["ping_index"].to_numpy()])
        got = detect_visits(shuffled, moved, stands=_spot_stands())
        positions = ("first_ping", "last_ping", "boarding_ping")
        cols = [c for c in VISIT_FRAME_COLUMNS if c not in positions]
        pd.testing.assert_frame_equal(got[cols], expected[cols])
        for col in positions:
            moved_positions = new_index[expected[col].dropna().to_numpy(dtype=np.int64)]
            assert list(got[col].dropna()) == list(moved_positions)
        assert got["boarded"].any()

    def test_duplicate_memberships_are_ignored(self) -> None:
        """The same (ping, stand) pair twice counts once."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        visits = detect_visits(pings, pd.concat([memberships, memberships], ignore_index=True))
        assert list(visits["n_fixes"]) == [9]

    def test_source_rows_are_reported(self) -> None:
        """first_row/last_row name the source-file rows of the first and last inside fixes."""
        fixes = [(0, "", "free"), *_steady(15, 135, "S"), (150, "", "free")]
        visits = detect_visits(*_track({"A": fixes}))
        assert (visits.loc[0, "first_row"], visits.loc[0, "last_row"]) == (2, 10)
        assert (visits.loc[0, "first_ping"], visits.loc[0, "last_ping"]) == (1, 9)

    @pytest.mark.parametrize("with_pings", [True, False], ids=["no-memberships", "no-pings"])
    def test_empty_inputs_give_typed_empty_frame(self, with_pings: bool) -> None:
        """No memberships (or no pings at all) give an empty, correctly typed frame."""
        pings, memberships = _track({"A": _steady(0, 120, "")})
        if not with_pings:
            pings = pings.iloc[:0]
        visits = detect_visits(pings, memberships)
        assert visits.empty
        assert tuple(visits.columns[: len(VISIT_COLUMNS)]) == VISIT_COLUMNS
        pd.testing.assert_series_equal(visits.dtypes, empty_visits().dtypes)
        assert str(visits["arrived_at"].dtype) == "datetime64[ns, UTC]"
        assert visits["boarded"].dtype == bool

    def test_output_dtypes(self) -> None:
        """Non-empty output has the same dtypes as the empty frame."""
        visits = detect_visits(*_track({"A": _steady(0, 120, "S")}))
        pd.testing.assert_series_equal(visits.dtypes, empty_visits().dtypes)

    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("exit_grace_s", -1.0),
            ("min_dwell_s", float("nan")),
            ("boarding_grace_s", float("inf")),
            ("max_gap_s", 0.0),
        ],
    )
    def test_bad_threshold_raises(self, option: str, value: float) -> None:
        """Negative, infinite or NaN thresholds (and a zero max_gap_s) are refused by name."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        with pytest.raises(ThresholdError, match=option):
            detect_visits(pings, memberships, **{option: value})

    def test_naive_timestamps_raise(self) -> None:
        """Naive ping timestamps are refused."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        pings["timestamp"] = pings["timestamp"].dt.tz_localize(None)
        with pytest.raises(NaiveTimestampError, match="sem fuso"):
            detect_visits(pings, memberships)

    @pytest.mark.parametrize(
        ("frame", "column"),
        [("pings", "timestamp"), ("pings", "vehicle_id"), ("memberships", "stand_id")],
    )
    def test_missing_column_raises(self, frame: str, column: str) -> None:
        """A missing required column is named in the error."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        if frame == "pings":
            pings = pings.drop(columns=column)
        else:
            memberships = memberships.drop(columns=column)
        with pytest.raises(MissingColumnError, match=column):
            detect_visits(pings, memberships)

    @pytest.mark.parametrize("index", [-1, 9])
    def test_membership_out_of_range_raises(self, index: int) -> None:
        """A ping_index outside the pings is refused."""
        pings, _ = _track({"A": _steady(0, 120, "S")})
        memberships = pd.DataFrame({"ping_index": [0, index], "stand_id": ["S", "S"]})
        with pytest.raises(MembershipError, match="fora do intervalo"):
            detect_visits(pings, memberships)

    def test_float_ping_index_raises(self) -> None:
        """A non-integer ping_index is refused."""
        pings, _ = _track({"A": _steady(0, 120, "S")})
        memberships = pd.DataFrame({"ping_index": [0.0], "stand_id": ["S"]})
        with pytest.raises(MembershipError, match="inteiros"):
            detect_visits(pings, memberships)

    def test_unknown_meter_value_raises(self) -> None:
        """A meter value outside free/occupied/off is refused with the allowed values."""
        pings, memberships = _track({"A": _steady(0, 120, "S", "busy")})
        with pytest.raises(PingFrameError, match="'busy'.*free, occupied, off"):
            detect_visits(pings, memberships)

    def test_unknown_timezone_raises(self) -> None:
        """An unknown timezone name is refused."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        with pytest.raises(LicenceFrameError, match="fuso horário desconhecido"):
            detect_visits(pings, memberships, timezone="Mars/Olympus")


def _square(half_m: float = 20.0) -> gpd.GeoDataFrame:
    """Stand S: a square of side 2 * half_m centred on the factories' origin (north 0, east 0)."""
    return gpd.GeoDataFrame([square_stand("S", 0.0, 0.0, half_m)], crs=4326)


def _both(
    points: list[tuple[float, float, float]],
    meters: list[str | None],
    *,
    trip_refs: list[str] | None = None,
    boarding_grace_m: float = 30.0,
) -> tuple[pd.DataFrame, list[dict]]:
    """One vehicle's track against stand S: the batch visits, and the visits released live."""
    stands = _square()
    cover = build_stand_cover(stands)
    pings = make_pings(make_track("A", points, meter=meters))
    if trip_refs is not None:
        pings["trip_ref"] = pd.Series(trip_refs, dtype="str")
    p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
    memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
    options = {"boarding_grace_s": 120.0, "boarding_grace_m": boarding_grace_m}
    batch = detect_visits(pings, memberships, stands=stands, max_gap_s=300.0, **options)
    live = replay_visits(
        pings, list(range(1, len(pings))), cover=cover, stands=stands, max_gap_s=300.0, **options
    )
    assert visits_csv(live) == visits_csv(batch)  # fix by fix: the batch's visits
    assert live["boarding_distance_m"].equals(batch["boarding_distance_m"])
    return batch, live.to_dict("records")


def _approach(t0: float = 0.0) -> list[tuple[float, float, float]]:
    """Driving in from 300 m south: the fixes before the stand."""
    return [(t0, -300.0, 0.0), (t0 + 15, -150.0, 0.0)]


class TestBoardingWhereTheMeterComesOn:
    """Issue 18: a boarding needs the meter to come on inside the stand or close to its edge."""

    def test_drop_off_then_meter_on_600_m_away_is_not_a_boarding(self) -> None:
        """Arrive occupied, drop the passenger at the stand, meter on 600 m away 60 s later: not
        boarded (the old rule, time alone, called it a boarding)."""
        points = [*_approach(), *[(30 + 15 * k, -10.0 + 5 * k, 0.0) for k in range(5)]]
        points += [(105, 150.0, 0.0), (120, 300.0, 0.0), (135, 450.0, 0.0), (150, 620.0, 0.0)]
        points += [(165, 700.0, 0.0)]
        meters = ["occupied"] * 3 + ["free"] * 7 + ["occupied"] * 2
        batch, live = _both(points, meters)
        assert len(batch) == 1 and batch.loc[0, "dwell_s"] == 60.0
        assert not bool(batch.loc[0, "boarded"])
        assert [v["boarded"] for v in live] == [False]
        loose, _ = _both(points, meters, boarding_grace_m=1e6)
        assert bool(loose.loc[0, "boarded"])  # the time rule alone would accuse
        assert loose.loc[0, "boarding_lag_s"] == 60.0
        # 600 m on the sphere of the factories, 598 m in UTM on the ellipsoid
        assert loose.loc[0, "boarding_distance_m"] == pytest.approx(600.0, rel=0.01)

    @pytest.mark.parametrize(("n_free", "boarded"), [(1, False), (2, False), (3, True)])
    def test_a_meter_blip_in_the_stand_is_no_boarding(self, n_free: int, boarded: bool) -> None:
        """A taxi with a passenger crawls through the stand; one or two fixes inside read
        'free' between 'occupied' ones (the meter read wrong): no boarding, in the batch and
        fix by fix live (an independent check had it accused under art. 59 XIII). Three fixes
        'free' are a stop: the passenger left and another boarded there."""
        points = [*_approach(), *[(30 + 15 * k, -10.0 + 5 * k, 0.0) for k in range(5)]]
        points += [(105, 150.0, 0.0), (120, 300.0, 0.0)]
        meters = ["occupied"] * 3 + ["free"] * n_free + ["occupied"] * (6 - n_free)
        batch, live = _both(points, meters)
        assert [bool(b) for b in batch["boarded"]] == [boarded]
        assert [v["boarded"] for v in live] == [boarded]

    def test_porto_records_drop_off_then_new_record_600_m_away(self) -> None:
        """Trip records (all fixes occupied): a record ending at the stand and the next starting
        600 m away within 2 min is not a boarding at the stand."""
        points = [*_approach(), *[(30 + 15 * k, -10.0 + 5 * k, 0.0) for k in range(5)]]
        points += [(150, 620.0, 0.0), (165, 700.0, 0.0)]
        refs = ["r1"] * 7 + ["r2"] * 2
        batch, _ = _both(points, ["occupied"] * 9, trip_refs=refs)
        assert len(batch) == 1 and not bool(batch.loc[0, "boarded"])
        loose, _ = _both(points, ["occupied"] * 9, trip_refs=refs, boarding_grace_m=1e6)
        assert bool(loose.loc[0, "boarded"])  # the time rule alone would accuse

    @pytest.mark.parametrize("out_m", [10.0, 25.0], ids=["10m", "25m"])
    def test_gps_jitter_at_the_edge_is_a_boarding(self, out_m: float) -> None:
        """An inside fix, then the trip start 10-25 m outside the polygon: boarded, both ways."""
        points = [*_approach(), *[(30 + 15 * k, 0.0, 0.0) for k in range(6)]]
        points += [(120, 20.0 + out_m, 0.0), (135, 200.0, 0.0), (150, 400.0, 0.0)]
        meters = ["occupied"] * 2 + ["free"] * 6 + ["occupied"] * 3
        batch, live = _both(points, meters)
        assert len(batch) == 1 and bool(batch.loc[0, "boarded"])
        assert batch.loc[0, "boarding_distance_m"] == pytest.approx(out_m, abs=0.5)
        assert batch.loc[0, "boarding_lag_s"] == 15.0
        assert [v["boarded"] for v in live] == [True]
        assert live[0]["boarding_distance_m"] == batch.loc[0, "boarding_distance_m"]

    def test_meter_on_while_pulling_out_is_a_boarding(self) -> None:
        """The first occupied fix just outside the stand (5 m), within the grace: boarded."""
        points = [*_approach(), *[(30 + 15 * k, 0.0, 0.0) for k in range(6)]]
        points += [(120, 25.0, 0.0), (135, 150.0, 0.0)]
        meters = ["occupied"] * 2 + ["free"] * 6 + ["occupied"] * 2
        batch, live = _both(points, meters)
        assert bool(batch.loc[0, "boarded"])
        assert batch.loc[0, "boarded_at"] == at(120)
        assert 4.0 < batch.loc[0, "boarding_distance_m"] < 6.0
        assert [v["boarded"] for v in live] == [True]

    def test_meter_on_inside_is_at_zero_metres(self) -> None:
        """The meter coming on inside the stand is a boarding at distance 0."""
        points = [*_approach(), *[(30 + 15 * k, 0.0, 0.0) for k in range(6)], (120, 200.0, 0.0)]
        meters = ["occupied"] * 2 + ["free"] * 4 + ["occupied"] * 3
        batch, live = _both(points, meters)
        assert bool(batch.loc[0, "boarded"])
        assert batch.loc[0, "boarding_distance_m"] == 0.0
        assert live[0]["boarding_distance_m"] == 0.0

    def test_meter_on_40_m_away_within_grace_is_not_a_boarding(self) -> None:
        """The trip starting 40 m from the edge 30 s after leaving: not boarded, both ways."""
        points = [*_approach(), *[(30 + 15 * k, 0.0, 0.0) for k in range(6)]]
        points += [(120, 35.0, 0.0), (135, 60.0, 0.0), (150, 300.0, 0.0)]
        meters = ["occupied"] * 2 + ["free"] * 7 + ["occupied"] * 2
        batch, live = _both(points, meters)
        assert len(batch) == 1 and not bool(batch.loc[0, "boarded"])
        assert pd.isna(batch.loc[0, "boarding_distance_m"])
        assert [v["boarded"] for v in live] == [False]
        assert pd.isna(live[0]["boarding_distance_m"])

    def test_a_later_trip_start_near_the_stand_does_not_rescue_a_far_one(self) -> None:
        """The first trip start after arrival decides: far away, the visit is not boarded even
        if the meter cycles again near the stand within the grace."""
        points = [*_approach(), *[(30 + 15 * k, 0.0, 0.0) for k in range(6)]]
        points += [(120, 80.0, 0.0), (135, 50.0, 0.0), (150, 25.0, 0.0)]
        meters = ["occupied"] * 2 + ["free"] * 6 + ["occupied", "free", "occupied"]
        batch, live = _both(points, meters)
        assert not batch["boarded"].any()
        assert not any(v["boarded"] for v in live)

    @pytest.mark.parametrize(
        ("start", "boarded"),
        [((0.0, 0.0), True), ((35.0, 0.0), True), ((620.0, 0.0), False)],
        ids=["inside", "15m-outside", "600m-away"],
    )
    def test_porto_trip_records_board_where_the_record_starts(
        self, start: tuple[float, float], boarded: bool
    ) -> None:
        """Trip records: a record ending inside the stand, the next starting 15 s later inside or
        15 m outside (boarded), or 600 m away (not)."""
        points = [*_approach(), *[(30 + 15 * k, -10.0 + 5 * k, 0.0) for k in range(5)]]
        points += [(105, *start), (120, 700.0, 0.0)]
        refs = ["r1"] * 7 + ["r2"] * 2
        batch, _ = _both(points, ["occupied"] * 9, trip_refs=refs)
        assert len(batch) == 1
        assert bool(batch.loc[0, "boarded"]) is boarded
        if boarded:
            assert batch.loc[0, "boarded_at"] == at(105)

    def test_without_geometries_only_trip_starts_inside_count(self) -> None:
        """Without the stands' geometries a trip start outside the stand is not a boarding."""
        fixes = [*_steady(0, 120, "S"), (135, "", "occupied"), (150, "", "occupied")]
        assert not detect_visits(*_track({"A": fixes}))["boarded"].any()
        fixes = [*_steady(0, 120, "S"), (135, "S", "occupied"), (150, "", "occupied")]
        assert detect_visits(*_track({"A": fixes}))["boarded"].all()

    def test_bad_boarding_grace_m_raises(self) -> None:
        """A negative boarding_grace_m is refused, naming it and its unit."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        with pytest.raises(ThresholdError, match="boarding_grace_m.*metros"):
            detect_visits(pings, memberships, boarding_grace_m=-1.0)

    def test_stand_missing_from_the_geometries_raises(self) -> None:
        """A stand of the memberships absent from ``stands`` is refused by its id."""
        pings, memberships = _track({"A": _steady(0, 120, "S")})
        stands = _spot_stands().iloc[1:]
        with pytest.raises(MembershipError, match="'S'"):
            detect_visits(pings, memberships, stands=stands)


def _drift(
    out_m: float, drift_s: float
) -> tuple[list[tuple[float, float, float]], list[str | None]]:
    """A taxi waiting at S (20 m half-side): 10 min inside, then ``drift_s`` with its GPS
    ``out_m`` from the centre, then 5 min inside again, then away (one fix every 15 s)."""
    points = [*_approach()]
    t = 30.0
    for north, duration in ((0.0, 600.0), (out_m, drift_s), (0.0, 300.0)):
        for _ in range(int(duration // 15)):
            points.append((t, north, 0.0))
            t += 15.0
    points += [(t, 300.0, 0.0), (t + 15, 600.0, 0.0)]
    return points, ["free"] * len(points)


class TestNearExcursions:
    """A waiting taxi whose GPS drifts just outside a small stand has not left it."""

    @pytest.mark.parametrize(
        ("out_m", "drift_s", "n_visits"),
        [(35.0, 180.0, 1), (45.0, 600.0, 1), (80.0, 180.0, 2), (35.0, 1200.0, 2)],
        ids=["near-3min", "near-10min", "far-3min", "near-20min"],
    )
    def test_drift_within_exit_grace_m_keeps_the_visit(
        self, out_m: float, drift_s: float, n_visits: int
    ) -> None:
        """Drifting 15-25 m beyond the edge for up to 15 min keeps one visit; farther (60 m
        beyond) or longer splits it; batch and live agree."""
        points, meters = _drift(out_m, drift_s)
        batch, live = _both(points, meters)
        assert len(batch) == n_visits
        assert len(live) == n_visits
        assert sorted(v["arrived_at"] for v in live) == sorted(batch["arrived_at"])
        if n_visits == 1:
            assert batch.loc[0, "dwell_s"] == pytest.approx(600 + drift_s + 300 - 15)

    def test_without_geometries_time_alone_splits(self) -> None:
        """Without the stands' geometries the distance is unknown: the old rule (time alone)."""
        points, meters = _drift(35.0, 180.0)
        pings = make_pings(make_track("A", points, meter=meters))
        cover = build_stand_cover(_square())
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        assert len(detect_visits(pings, memberships, max_gap_s=300.0)) == 2


def _displaced(
    out_m: float, away_s: float, *, back_m_per_fix: float | None = None
) -> tuple[list[tuple[float, float, float]], list[str | None]]:
    """A taxi waiting at S: 10 min inside, then its GPS ``out_m`` north for ``away_s`` (one fix
    every 15 s), then back (in one step, or driving back ``back_m_per_fix`` per fix), 5 min
    inside, then away."""
    points = [*_approach()]
    t = 30.0
    for _ in range(40):
        points.append((t, 0.0, 0.0))
        t += 15.0
    for _ in range(int(away_s // 15)):
        points.append((t, out_m, 0.0))
        t += 15.0
    north = out_m
    while back_m_per_fix is not None and north > back_m_per_fix:
        north -= back_m_per_fix
        points.append((t, north, 0.0))
        t += 15.0
    for _ in range(20):
        points.append((t, 0.0, 0.0))
        t += 15.0
    points += [(t, 300.0, 0.0), (t + 15, 600.0, 0.0)]
    return points, ["free"] * len(points)


class TestApproach:
    """The fix before each arrival: where the vehicle was seen coming from."""

    def test_distance_and_speed_of_the_fix_before_the_arrival(self) -> None:
        """Driving in (the fix before at 150 m from the centre, 130 m from the edge), then
        after a silence (unknown), then from 45 m (25 m from the edge); batch and live agree."""
        points = [*_approach()] + [(t, 0.0, 0.0) for t in range(30, 301, 15)]
        points += [(1000.0 + t, 0.0, 0.0) for t in range(0, 301, 15)]  # after 685 s of silence
        points += [(1400.0, 300.0, 0.0), (1460.0, 300.0, 0.0), (1475.0, 45.0, 0.0)]
        points += [(1490.0 + t, 0.0, 0.0) for t in range(0, 301, 15)]
        batch, live = _both(points, ["free"] * len(points))
        assert len(batch) == 3
        assert batch["approach_m"].round(0).tolist()[0] == 130.0
        assert np.isnan(batch["approach_m"].iloc[1])
        assert batch["approach_m"].iloc[2] == pytest.approx(25.0, abs=0.5)
        assert batch["approach_kmh"].isna().all()  # the fixes report no speed
        by_arrival = sorted(live, key=lambda v: v["arrived_at"])
        for got, want in zip(by_arrival, batch["approach_m"].tolist(), strict=True):
            assert got["approach_m"] == pytest.approx(want, nan_ok=True)

    def test_speed_is_read_when_reported(self) -> None:
        """The reported speed of the fix before the arrival is the visit's ``approach_kmh``."""
        rows = make_track("A", [*_approach(), *[(t, 0.0, 0.0) for t in range(30, 301, 15)]])
        rows[1]["speed_kmh"] = 32.0
        pings = make_pings(rows)
        cover = build_stand_cover(_square())
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        visits = detect_visits(pings, memberships, stands=_square(), max_gap_s=300.0)
        assert visits["approach_kmh"].tolist() == [32.0]


class TestDisplacedStretches:
    """GPS displaced kilometres away for a minute (multipath) is not a departure."""

    @pytest.mark.parametrize(
        ("out_m", "away_s", "back_m_per_fix", "n_visits"),
        [
            (3600.0, 90.0, None, 1),
            (3600.0, 600.0, None, 1),
            (3600.0, 1200.0, None, 2),
            (2000.0, 90.0, 225.0, 2),
            (600.0, 90.0, None, 2),
        ],
        ids=["3.6km-90s", "3.6km-10min", "3.6km-20min", "driven-back", "600m-possible"],
    )
    def test_impossible_steps_out_and_back_keep_the_visit(
        self, out_m: float, away_s: float, back_m_per_fix: float | None, n_visits: int
    ) -> None:
        """Out and back by impossible steps within 15 min: one visit; longer, a step back that
        can be driven (54 km/h), or steps that can be driven (40 m/s) split it; batch and live
        agree."""
        points, meters = _displaced(out_m, away_s, back_m_per_fix=back_m_per_fix)
        batch, live = _both(points, meters)
        assert len(batch) == n_visits
        assert len(live) == n_visits
        if n_visits == 1:
            assert batch.loc[0, "dwell_s"] == pytest.approx(600 + away_s + 300 - 15)


class TestDetectVisitsRandomised:
    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_queue_positions_match_brute_force(self, seed: int) -> None:
        """Queue positions equal a direct count of visits in progress at each arrival."""
        rng = np.random.default_rng(seed)
        tracks: dict[str, list[Fix]] = {}
        for v in range(8):
            t, fixes = float(rng.integers(0, 20) * 15), []
            for _ in range(4):
                stay = float(rng.integers(0, 30) * 15)
                fixes += _steady(t, t + stay, str(rng.choice(["S", "T"])))
                fixes += _steady(t + stay + 15, t + stay + 150, "")
                t += stay + 165
            tracks[f"V{v}"] = fixes
        visits = detect_visits(*_track(tracks), min_dwell_s=0)
        assert len(visits) > 8
        for i, row in visits.iterrows():
            ahead = visits[
                (visits.index != i)
                & (visits["stand_id"] == row["stand_id"])
                & (
                    (visits["arrived_at"] < row["arrived_at"])
                    | (
                        (visits["arrived_at"] == row["arrived_at"])
                        & (visits["vehicle_id"] < row["vehicle_id"])
                    )
                )
                & (visits["departed_at"] >= row["arrived_at"])
            ]
            assert row["queue_position"] == 1 + len(ahead)


@pytest.mark.slow
class TestDetectVisitsOnPorto:
    DATA = Path(__file__).resolve().parents[2] / "data" / "porto" / "derived"

    def test_stand_hails_board_at_their_labelled_stand(self) -> None:
        """Real Porto trips hailed at a stand (CALL_TYPE B) board at the stand they are labelled
        with: on 917 such trips, >= 94% found (measured 879; the rest start > 100 m away)."""
        from geo.cover import build_stand_cover, match_stands
        from stands.layers import read_porto_stands
        from tracking.porto import read_porto_trips

        pings, _, labels = read_porto_trips(self.DATA / "trips_combined.csv")
        stands = read_porto_stands(self.DATA / "taxi_stands.csv", radius_m=100)
        ping, stand = match_stands(
            pings["lat"].to_numpy(), pings["lon"].to_numpy(), build_stand_cover(stands)
        )
        memberships = pd.DataFrame(
            {"ping_index": ping, "stand_id": stands["stand_id"].to_numpy()[stand]}
        )
        # Porto has only occupied fixes: a 60 s silence (4 periods) separates two trips.
        visits = detect_visits(pings, memberships, stands=stands, max_gap_s=60)
        boarded = visits[visits["boarded"]]
        found = boarded.groupby(["vehicle_id", "boarded_at"])["stand_id"].agg(set)
        hailed = labels[(labels["call_type"] == "B") & labels["origin_stand"].notna()]
        keys = list(zip(hailed["vehicle_id"], hailed["started_at"], strict=True))
        at_stand = [found.get(k, set()) for k in keys]
        right = sum(s in got for s, got in zip(hailed["origin_stand"], at_stand, strict=True))
        anywhere = sum(bool(got) for got in at_stand)
        assert len(hailed) > 900
        assert right / len(hailed) >= 0.94
        assert right / anywhere >= 0.95


def _random_fleet(seed: int) -> tuple[pd.DataFrame, StandCover]:
    return stand_fleet(seed)


def _cover_stands(cover: StandCover) -> gpd.GeoDataFrame:
    return cover_stands(cover)


class TestVisitsKernel:
    @pytest.mark.parametrize(("seed", "watermark"), [(1, False), (2, True)])
    def test_pieces_give_the_batch_visits(self, seed: int, watermark: bool) -> None:
        """In one piece and random pieces over the fleet, the visits are the batch's, queue
        included (five vehicles, overlapping stands, edge jitter, meters, silences)."""
        pings, cover = _random_fleet(seed)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        stands = _cover_stands(cover)
        batch = detect_visits(pings, memberships, stands=stands, max_gap_s=300.0)
        assert len(batch) > 50 and batch["boarded"].any() and (batch["queue_position"] > 1).any()
        outside = batch["boarding_distance_m"] > 0
        assert outside.any() and (batch["boarding_distance_m"] == 0).any()
        # Trip starts turned down for their distance alone: the rule is exercised both ways.
        loose = detect_visits(
            pings, memberships, stands=stands, max_gap_s=300.0, boarding_grace_m=1e6
        )
        assert loose["boarded"].sum() > batch["boarded"].sum()
        expected = visits_csv(batch)
        for cuts in cuttings(len(pings), seeds=2, one_by_one=False, max_pieces=40):
            live = replay_visits(
                pings, cuts, cover=cover, stands=stands, max_gap_s=300.0, watermark=watermark
            )
            assert visits_csv(live) == expected, cuts[:10]
            ordered = live.sort_values(["vehicle_id", "arrived_at", "stand_id"], kind="stable")
            assert (
                ordered["boarding_distance_m"]
                .reset_index(drop=True)
                .equals(batch["boarding_distance_m"])
            )

    def test_visits_are_released_before_the_end(self) -> None:
        """With a watermark, most visits come out as the stream goes, each once."""
        pings, cover = _random_fleet(4)
        stands = _cover_stands(cover)
        early: list[int] = []

        def count(visits: pd.DataFrame, fixes: pd.DataFrame, state: object) -> None:
            if state is not None:
                early.append(len(visits))

        live = replay_visits(
            pings,
            list(range(1, len(pings), 25)),
            cover=cover,
            stands=stands,
            max_gap_s=300.0,
            watermark=True,
            then=count,
        )
        assert sum(early) > 0.9 * len(live)
        keys = live[["vehicle_id", "stand_id", "arrived_at"]]
        assert not keys.duplicated().any()

    def test_every_visit_arrived_before_the_bound_is_released(self) -> None:
        """After each piece, a vehicle's visits that arrived before its bound are released."""
        pings, cover = _random_fleet(5)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        stands = _cover_stands(cover)
        batch = detect_visits(pings, memberships, stands=stands, max_gap_s=300.0)
        expected = {(r.vehicle_id, r.stand_id, r.arrived_at.value) for r in batch.itertuples()}
        order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
        released: set[tuple[str, str, int]] = set()
        checked, bounded = [0], [0]

        def check(visits: pd.DataFrame, fixes: pd.DataFrame, state: dict | None) -> None:
            released.update(
                (r.vehicle_id, r.stand_id, r.arrived_at.value) for r in visits.itertuples()
            )
            if state is None:
                return
            bound = unreleased_arrivals(state)
            now = max(int(s["seen"]) for s in state["vehicles"].values())
            bounded[0] += len(bound)
            for vid, sid, arrived in expected:
                if arrived <= now and arrived < bound.get(vid, now + 1):
                    assert (vid, sid, arrived) in released
                    checked[0] += 1
            assert all(b <= now for b in bound.values())

        replay_visits(
            order,
            list(range(1, len(pings), 40)),
            cover=cover,
            stands=stands,
            max_gap_s=300.0,
            then=check,
        )
        assert released == expected
        assert bounded[0] > 50 and checked[0] > 1000
        assert unreleased_arrivals(None) == {}

    def test_records_round_trip(self) -> None:
        """Visits as plain records come back with the same rows and fixes at their positions."""
        pings, cover = _random_fleet(6)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        batch = detect_visits(pings, memberships, stands=_cover_stands(cover), max_gap_s=300.0)
        records = json.loads(json.dumps(visit_records(batch, pings)))
        visits, fixes = visits_from_records(records)
        assert visits_csv(visits) == visits_csv(batch)
        for col in ("first_ping", "last_ping"):
            here = fixes["timestamp"].to_numpy()[visits[col].to_numpy()]
            there = pings["timestamp"].to_numpy()[batch[col].to_numpy()]
            assert (here == there).all()
        assert visits["boarding_ping"].notna().equals(batch["boarding_ping"].notna())

    def test_late_fixes_change_nothing(self) -> None:
        """A call with only fixes not later than their vehicles' latest keeps the state."""
        pings, cover = _random_fleet(7)
        stands = _cover_stands(cover)
        order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
        options = {"cover": cover, "stands": stands, "max_gap_s": 300.0}
        state, visits, _ = advance_visits(None, order.iloc[:600], **options)
        assert len(visits) > 10 and state["stands"]
        for late in (order.iloc[:50], order.iloc[:0]):
            again, more, _ = advance_visits(state, late, **options)
            assert len(more) == 0
            assert again == state
