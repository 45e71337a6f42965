from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import make_pings, make_track

from stands._errors import (
    LicenceFrameError,
    MissingColumnError,
    NaiveTimestampError,
    ThresholdError,
)
from stands.presence import (
    PRESENCE_COLUMNS,
    SUMMARY_COLUMNS,
    day_bounds_ns,
    operation_fixes,
    presence,
    presence_summary,
    suspended_days,
)

START, END = dt.date(2024, 3, 4), dt.date(2024, 3, 8)
LICENCES = pd.DataFrame({"vehicle_id": ["A", "B"], "stand_id": ["S1", "S2"]})


def _visits(rows: list[tuple[str, str, str, str, bool]]) -> pd.DataFrame:
    """Visits (vehicle, stand, arrived ISO, departed ISO, boarded)."""
    arrived = pd.to_datetime([r[2] for r in rows], utc=True)
    departed = pd.to_datetime([r[3] for r in rows], utc=True)
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in rows], dtype="str"),
            "stand_id": pd.Series([r[1] for r in rows], dtype="str"),
            "arrived_at": pd.Series(arrived, dtype="datetime64[ns, UTC]"),
            "departed_at": pd.Series(departed, dtype="datetime64[ns, UTC]"),
            "dwell_s": (departed - arrived).total_seconds().to_numpy(dtype=np.float64),
            "boarded": pd.Series([r[4] for r in rows], dtype="bool"),
            "first_row": pd.array(range(1, len(rows) + 1), dtype="Int64"),
            "last_row": pd.array(range(101, 101 + len(rows)), dtype="Int64"),
        }
    )


NO_VISITS = _visits([])


def _pings_on(vehicle: str, days: list[int], hour_utc: float = 15.0) -> pd.DataFrame:
    """Two fixes of ``vehicle`` on each day index after 2024-03-04, at ``hour_utc``."""
    t0 = (hour_utc - 12.0) * 3600  # factories' time zero is 12:00Z
    points = [(d * 86_400 + t0 + k * 60, 0.0, 0.0) for d in days for k in (0, 1)]
    return make_pings(make_track(vehicle, points, meter="free"))


def _row(table: pd.DataFrame, vehicle: str, stand: str, day: str) -> pd.Series:
    sel = (
        (table["vehicle_id"] == vehicle)
        & (table["stand_id"] == stand)
        & (table["date"] == pd.Timestamp(day))
    )
    assert sel.sum() == 1
    return table.loc[sel].iloc[0]


class TestPresence:
    def test_one_row_per_licence_and_day(self) -> None:
        """Every (vehicle, licensed stand, day) of the window has a row, typed as documented."""
        table = presence(NO_VISITS, LICENCES, None, start=START, end=END)
        assert list(table.columns) == list(PRESENCE_COLUMNS)
        assert len(table) == 2 * 5
        assert table["date"].dtype == "datetime64[ns]"
        assert not table["operated"].any() and not table["present"].any()
        assert table["visits"].map(len).eq(0).all()

    def test_pings_of_non_licensees_only(self) -> None:
        """Fixes of vehicles without a licence are ignored, not a crash."""
        table = presence(NO_VISITS, LICENCES, _pings_on("ZZ", [0, 2]), start=START, end=END)
        assert not table["operated"].any()

    def test_operated_from_pings_with_first_and_last_fix(self) -> None:
        """A day with fixes is operated; the first and last fix are its evidence."""
        table = presence(NO_VISITS, LICENCES, _pings_on("A", [0, 2]), start=START, end=END)
        ops = table.loc[table["vehicle_id"] == "A", "operated"].tolist()
        assert ops == [True, False, True, False, False]
        r = _row(table, "A", "S1", "2024-03-06")
        assert r["first_seen_at"] == pd.Timestamp("2024-03-06T15:00:00Z")
        assert r["last_seen_at"] == pd.Timestamp("2024-03-06T15:01:00Z")
        assert (r["first_seen_row"], r["last_seen_row"]) == (3, 4)
        assert r["first_seen_source"] == "ping"
        assert not r["present"]

    def test_local_day_boundaries(self) -> None:
        """A fix at 01:00Z is on the previous local day in São Paulo (22:00)."""
        pings = _pings_on("A", [1], hour_utc=1.0)  # 2024-03-05T01:00Z
        table = presence(NO_VISITS, LICENCES, pings, start=START, end=END)
        assert _row(table, "A", "S1", "2024-03-04")["operated"]
        assert not _row(table, "A", "S1", "2024-03-05")["operated"]
        utc = presence(NO_VISITS, LICENCES, pings, start=START, end=END, timezone="UTC")
        assert _row(utc, "A", "S1", "2024-03-05")["operated"]

    @pytest.mark.parametrize(
        ("dwell_min", "boarded", "present"),
        [(10, False, True), (1, False, True), (0.5, False, False), (0, True, True)],
    )
    def test_presence_needs_min_dwell_or_boarding(
        self, dwell_min: float, boarded: bool, present: bool
    ) -> None:
        """A visit counts with dwell >= 60 s, or when it boarded a passenger."""
        departed = pd.Timestamp("2024-03-05T15:00Z") + pd.Timedelta(minutes=dwell_min)
        visits = _visits([("A", "S1", "2024-03-05T15:00Z", departed.isoformat(), boarded)])
        table = presence(visits, LICENCES, _pings_on("A", [1]), start=START, end=END)
        r = _row(table, "A", "S1", "2024-03-05")
        assert bool(r["present"]) == present
        assert r["n_visits"] == 1
        assert r["visits"][0]["counted"] == present
        assert r["presence_s"] == (dwell_min * 60 if present else 0.0)

    def test_visit_to_another_stand_is_operation_not_presence(self) -> None:
        """At an unlicensed stand the vehicle operated, but was not present at its own."""
        visits = _visits([("A", "S9", "2024-03-05T15:00Z", "2024-03-05T15:30Z", False)])
        table = presence(visits, LICENCES, None, start=START, end=END)
        r = _row(table, "A", "S1", "2024-03-05")
        assert r["operated"] and not r["present"]
        assert r["first_seen_source"] == "visit_arrival"
        assert r["visits"] == []

    def test_visit_across_midnight_counts_on_both_days(self) -> None:
        """A visit from 23:30 to 00:30 local is presence on both local days."""
        visits = _visits([("B", "S2", "2024-03-05T02:30Z", "2024-03-05T03:30Z", False)])
        table = presence(visits, LICENCES, None, start=START, end=END)
        d1, d2 = _row(table, "B", "S2", "2024-03-04"), _row(table, "B", "S2", "2024-03-05")
        assert d1["present"] and d2["present"]
        assert (d1["presence_s"], d2["presence_s"]) == (1800.0, 1800.0)
        assert d1["visits"] == d2["visits"]
        assert d1["visits"][0] == {
            "arrived_at": "2024-03-05T02:30:00Z",
            "departed_at": "2024-03-05T03:30:00Z",
            "dwell_s": 3600.0,
            "boarded": False,
            "counted": True,
            "first_row": 1,
            "last_row": 101,
        }

    def test_licence_validity_limits_the_days(self) -> None:
        """Days outside the licence's validity have no row."""
        lic = LICENCES.assign(
            valid_from=[pd.Timestamp("2024-03-06"), pd.NaT],
            valid_until=[pd.NaT, pd.Timestamp("2024-03-04")],
        )
        table = presence(NO_VISITS, lic, None, start=START, end=END)
        assert table.loc[table["vehicle_id"] == "A", "date"].dt.day.tolist() == [6, 7, 8]
        assert table.loc[table["vehicle_id"] == "B", "date"].dt.day.tolist() == [4]

    def test_operated_from_trips(self) -> None:
        """Trips mark their start and end days as operated, with the pickup as evidence."""
        trips = pd.DataFrame(
            {
                "vehicle_id": ["A"],
                "started_at": pd.to_datetime(["2024-03-07T02:00Z"], utc=True),
                "ended_at": pd.to_datetime(["2024-03-07T04:00Z"], utc=True),
                "pickup_lat": [-30.0],
                "pickup_lon": [-51.0],
                "dropoff_lat": [-30.1],
                "dropoff_lon": [-51.1],
            }
        )
        table = presence(NO_VISITS, LICENCES, trips, start=START, end=END)
        assert _row(table, "A", "S1", "2024-03-06")["operated"]  # 23:00 local
        r = _row(table, "A", "S1", "2024-03-07")  # 01:00 local
        assert r["operated"] and r["first_seen_source"] == "trip_end"
        assert r["first_seen_lat"] == -30.1

    def test_order_of_pings_does_not_matter(self) -> None:
        """Unsorted pings give the same table."""
        pings = _pings_on("A", [0, 1, 3])
        a = presence(NO_VISITS, LICENCES, pings, start=START, end=END)
        b = presence(NO_VISITS, LICENCES, pings.iloc[::-1], start=START, end=END)
        pd.testing.assert_frame_equal(a, b)

    def test_start_after_end_raises(self) -> None:
        """An inverted window is refused."""
        with pytest.raises(ThresholdError, match="start"):
            presence(NO_VISITS, LICENCES, None, start=END, end=START)

    @pytest.mark.parametrize("value", [-1.0, math.inf])
    def test_bad_min_presence_raises(self, value: float) -> None:
        """min_presence_s must be finite and >= 0."""
        with pytest.raises(ThresholdError, match="min_presence_s"):
            presence(NO_VISITS, LICENCES, None, start=START, end=END, min_presence_s=value)

    def test_unknown_timezone_raises(self) -> None:
        """The zone must be an IANA name."""
        with pytest.raises(LicenceFrameError, match="fuso"):
            presence(NO_VISITS, LICENCES, None, start=START, end=END, timezone="Mars/Base")

    def test_naive_visits_raise(self) -> None:
        """Visits with naive instants are refused."""
        visits = _visits([("A", "S1", "2024-03-05T15:00Z", "2024-03-05T15:30Z", False)])
        visits["arrived_at"] = visits["arrived_at"].dt.tz_localize(None)
        with pytest.raises(NaiveTimestampError, match="arrived_at"):
            presence(visits, LICENCES, None, start=START, end=END)

    def test_visits_without_columns_raise(self) -> None:
        """Visits lacking dwell_s are refused."""
        visits = _visits([("A", "S1", "2024-03-05T15:00Z", "2024-03-05T15:30Z", False)])
        with pytest.raises(MissingColumnError, match="dwell_s"):
            presence(visits.drop(columns=["dwell_s"]), LICENCES, None, start=START, end=END)


def _suspensions(rows: list[tuple[str, str | None, str | None, str, str | None]]) -> pd.DataFrame:
    """Stand suspensions (stand, vehicle, driver, starts_on, ends_on)."""
    return pd.DataFrame(
        {
            "stand_id": [r[0] for r in rows],
            "vehicle_id": pd.Series([r[1] for r in rows], dtype="object"),
            "driver_id": pd.Series([r[2] for r in rows], dtype="object"),
            "starts_on": pd.to_datetime([r[3] for r in rows]),
            "ends_on": pd.to_datetime([r[4] for r in rows]),
            "kind": ["suspension"] * len(rows),
        }
    )


class TestSuspendedDays:
    def test_a_prefixo_suspended_from_its_stand_has_no_days_there(self) -> None:
        """Days the prefixo is suspended from the stand (art. 45 § único) are left out: not
        operating, not present; other stands and other vehicles keep theirs."""
        susp = _suspensions([("S1", "A", None, "2024-03-05", "2024-03-06")])
        pings = _pings_on("A", [0, 1, 2, 3, 4])
        table = presence(NO_VISITS, LICENCES, pings, start=START, end=END, suspensions=susp)
        days_a = table.loc[table["vehicle_id"] == "A", "date"].dt.day.tolist()
        assert days_a == [4, 7, 8]
        assert len(table.loc[table["vehicle_id"] == "B"]) == 5
        summary = presence_summary(table).set_index("vehicle_id")
        assert summary.loc["A", "days_operating"] == 3

    def test_days_clipped_to_the_window_and_open_end(self) -> None:
        """An open suspension runs to the window's end; a driver's is ignored."""
        susp = _suspensions(
            [("S1", "A", None, "2024-03-01", None), ("S2", None, "D1", "2024-03-04", "2024-03-08")]
        )
        days = suspended_days(susp, start=START, end=END)
        assert days["date"].dt.day.tolist() == [4, 5, 6, 7, 8]
        assert set(days["vehicle_id"]) == {"A"}
        assert days["suspension"].iloc[0]["ends_on"] is None


class TestPresenceSummary:
    def test_days_present_operating_and_share(self) -> None:
        """Share is present days over operating days; never operating gives NaN."""
        visits = _visits([("A", "S1", "2024-03-04T15:00Z", "2024-03-04T15:30Z", False)])
        table = presence(visits, LICENCES, _pings_on("A", [0, 1, 2, 3]), start=START, end=END)
        summary = presence_summary(table)
        assert list(summary.columns) == list(SUMMARY_COLUMNS)
        a = summary.set_index("vehicle_id").loc["A"]
        assert (a["days_licensed"], a["days_operating"], a["days_present"]) == (5, 4, 1)
        assert a["share"] == 0.25
        assert math.isnan(summary.set_index("vehicle_id").loc["B", "share"])

    def test_missing_columns_raise(self) -> None:
        """A table without the presence flags is refused."""
        with pytest.raises(MissingColumnError, match="present"):
            presence_summary(pd.DataFrame({"vehicle_id": [], "stand_id": [], "date": []}))


class TestDayBoundsNs:
    def test_local_midnights_in_utc(self) -> None:
        """São Paulo days start at 03:00Z; one more bound closes the last day."""
        days = np.arange(np.datetime64("2024-03-04"), np.datetime64("2024-03-06"))
        bounds = pd.to_datetime(day_bounds_ns(days, "America/Sao_Paulo"), utc=True)
        assert list(bounds) == [
            pd.Timestamp("2024-03-04T03:00Z"),
            pd.Timestamp("2024-03-05T03:00Z"),
            pd.Timestamp("2024-03-06T03:00Z"),
        ]

    def test_midnight_skipped_by_daylight_saving(self) -> None:
        """On 2018-11-04 Brazil's clocks jumped from 00:00 to 01:00: the day starts at 01:00."""
        days = np.arange(np.datetime64("2018-11-03"), np.datetime64("2018-11-05"))
        bounds = pd.to_datetime(day_bounds_ns(days, "America/Sao_Paulo"), utc=True)
        assert list(bounds) == [
            pd.Timestamp("2018-11-03T03:00Z"),
            pd.Timestamp("2018-11-04T03:00Z"),  # 01:00 summer time
            pd.Timestamp("2018-11-05T02:00Z"),
        ]


@pytest.mark.slow
class TestPresenceOnPorto:
    DATA = Path(__file__).resolve().parents[2] / "data" / "porto" / "derived"

    def test_taxis_hailed_at_a_stand_are_present_there(self) -> None:
        """Licensing each Porto taxi at the stands it was hailed at (CALL_TYPE B labels), the
        taxi is present there on the local day of each such trip (boarding visits count whatever
        their dwell): measured 461 of 477 licences (96.6 %) on 2013-07-01; the rest start more
        than 100 m from the stand's point."""
        from geo.cover import build_stand_cover, match_stands
        from stands.layers import read_porto_stands
        from stands.visits import detect_visits
        from tracking.porto import read_porto_trips

        pings, _, labels = read_porto_trips(self.DATA / "trips_combined.csv")
        stands = read_porto_stands(self.DATA / "taxi_stands.csv", radius_m=100)
        ping, stand = match_stands(
            pings["lat"].to_numpy(), pings["lon"].to_numpy(), build_stand_cover(stands)
        )
        memberships = pd.DataFrame(
            {"ping_index": ping, "stand_id": stands["stand_id"].to_numpy()[stand]}
        )
        visits = detect_visits(pings, memberships, max_gap_s=60)
        hailed = labels[(labels["call_type"] == "B") & labels["origin_stand"].notna()]
        day = dt.date(2013, 7, 1)
        local = hailed["started_at"].dt.tz_convert("Europe/Lisbon").dt.date
        hailed = hailed[local == day]
        lic = hailed[["vehicle_id", "origin_stand"]].drop_duplicates()
        lic = lic.rename(columns={"origin_stand": "stand_id"})
        table = presence(visits, lic, pings, start=day, end=day, timezone="Europe/Lisbon")
        assert len(table) == len(lic) == 477
        assert table["operated"].all()
        assert table["present"].sum() == 461


class TestOperationFixes:
    @pytest.mark.parametrize("timezone", ["America/Sao_Paulo", "Europe/Lisbon"])
    def test_presence_from_the_days_first_and_last_fixes_is_the_same(self, timezone: str) -> None:
        """The presence table from each vehicle-day's first and last operation fixes equals the
        one from every fix: meters off, unknown and known, ties in time, a DST change."""
        rng = np.random.default_rng(5)
        n = 4000
        start = pd.Timestamp("2024-03-28T00:00Z")  # Lisbon moves its clocks on 31 March
        ts = start + pd.to_timedelta(np.sort(rng.integers(0, 9 * 86_400, n)) // 60 * 60, "s")
        pings = pd.DataFrame(
            {
                "vehicle_id": rng.choice(["A", "B", "C"], n),
                "timestamp": pd.Series(ts).astype(pd.DatetimeTZDtype("ns", "UTC")),
                "lat": rng.normal(-30, 0.01, n),
                "lon": rng.normal(-51, 0.01, n),
                "row": np.arange(n) + 2,
                "meter": rng.choice(np.array(["free", "occupied", "off", None], object), n),
            }
        )
        pings.loc[pings["vehicle_id"] == "C", "meter"] = None  # C: no meter at all
        licences = pd.DataFrame({"vehicle_id": ["A", "B", "C"], "stand_id": ["S1", "S1", "S2"]})
        window = {"start": dt.date(2024, 3, 28), "end": dt.date(2024, 4, 5), "timezone": timezone}
        days = operation_fixes(pings, timezone=timezone)
        assert len(days) <= 2 * 3 * 10 and not days["meter"].eq("off").any()
        assert set(days.loc[days["vehicle_id"] == "C", "meter"]) == {None}
        whole = presence(_visits([]), licences, pings, **window)
        pd.testing.assert_frame_equal(presence(_visits([]), licences, days, **window), whole)

    def test_empty_and_header_only(self) -> None:
        """No fixes, or a frame without columns: no rows, the contract's columns."""
        for frame in (pd.DataFrame(), make_pings([])):
            assert operation_fixes(frame).columns.tolist() == [
                "vehicle_id", "timestamp", "lat", "lon", "row", "meter"
            ]  # fmt: skip
