from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
import shapely
from factories import make_pings, offset_m
from kernel_checks import assert_pieces_give_batch

from geo.calendar import brazil_holidays
from tracking.detectors._errors import (
    BoundaryError,
    DetectorThresholdError,
    Flag2CalendarError,
)
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.flag2_misuse import (
    DEFAULT_FLAG2_CALENDAR,
    KERNEL,
    Flag2Calendar,
    allowed_at,
    detect_flag2_misuse,
    week_mask,
)
from tracking.detectors.kernel import advance

# Porto Alegre is UTC-3 all year: local 09:00 is 12:00Z. 2024-03-04 is a Monday.


def drive(
    vehicle: str,
    start: str,
    minutes: float,
    *,
    tariff: int | None = 2,
    meter: str = "occupied",
    step_s: int = 30,
) -> list[dict]:
    t0 = pd.Timestamp(start)
    rows = []
    for k in range(int(minutes * 60 // step_s) + 1):
        lat, lon = offset_m(50.0 * k, 0.0)
        rows.append(
            {
                "vehicle_id": vehicle,
                "timestamp": t0 + pd.Timedelta(seconds=step_s * k),
                "lat": lat,
                "lon": lon,
                "meter": meter,
                "tariff": tariff,
            }
        )
    return rows


def detect(rows: list[dict], **kw: Any) -> pd.DataFrame:
    return detect_flag2_misuse(make_pings(rows), **kw)


class TestDetectFlag2Misuse:
    def test_weekday_morning_tariff2_is_found(self) -> None:
        """Bandeira 2 on a Monday at 09:00 for 10 min is one finding with its evidence."""
        found = detect(drive("v1", "2024-03-04T12:00:00Z", 10))
        validate_findings(found)
        assert list(found.columns) == list(FINDING_COLUMNS)
        f = found.iloc[0]
        assert (f["kind"], f["vehicle_id"], f["stand_id"]) == ("flag2_misuse", "v1", None)
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:00:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-04T12:10:00Z")
        d = f["details"]
        json.dumps(d)
        assert d["duration_s"] == 600.0 and d["n_fixes"] == 21
        assert d["local_start"] == "2024-03-04T09:00:00-03:00"
        assert [x["row"] for x in d["fixes"]] == [1, 21]
        assert d["thresholds"] == {"min_duration_s": 120.0, "max_gap_s": 300.0, "carry_over": True}
        assert f["confidence"] == pytest.approx(0.6 + 0.35 * 480 / 480)

    @pytest.mark.parametrize(
        "start",
        [
            "2024-03-05T00:00:00Z",  # Monday 21:00
            "2024-03-05T07:00:00Z",  # Tuesday 04:00
            "2024-03-09T18:00:00Z",  # Saturday 15:00
            "2024-03-10T13:00:00Z",  # Sunday 10:00
            "2024-05-01T13:00:00Z",  # Labour Day (Wednesday)
            "2024-03-29T13:00:00Z",  # Good Friday
            "2024-02-13T13:00:00Z",  # Carnaval Tuesday
            "2024-12-03T13:00:00Z",  # December
        ],
    )
    def test_allowed_times_are_not_found(self, start: str) -> None:
        """Nights, Saturday afternoons, Sundays, holidays and December allow Bandeira 2."""
        assert detect(drive("v1", start, 10)).empty

    def test_saturday_morning_is_not_allowed(self) -> None:
        """Saturday before 14:00 is an ordinary period."""
        assert len(detect(drive("v1", "2024-03-09T13:00:00Z", 10))) == 1

    def test_calendar_is_configurable(self) -> None:
        """A municipal holiday allows the day; a calendar without December accuses it."""
        rows = drive("v1", "2024-03-26T13:00:00Z", 10)
        assert len(detect(rows)) == 1
        local = Flag2Calendar(
            windows=DEFAULT_FLAG2_CALENDAR.windows, holidays=(dt.date(2024, 3, 26),)
        )
        assert detect(rows, calendar=local).empty
        december = drive("v1", "2024-12-03T13:00:00Z", 10)
        strict = Flag2Calendar(windows=DEFAULT_FLAG2_CALENDAR.windows, whole_weekdays=(6,))
        assert len(detect(december, calendar=strict)) == 1

    def test_holidays_threshold_adds_days_every_year_or_once(self) -> None:
        """``holidays``: ``MM-DD`` allows the day every year (20 September, Rio Grande do Sul's
        data magna), ``AAAA-MM-DD`` that day only; the evidence lists both; 29 Feb is the 28th
        in a common year."""
        farroupilha = drive("v1", "2024-09-20T13:00:00Z", 10) + drive(
            "v2", "2025-09-19T13:00:00Z", 10
        )
        assert len(detect(farroupilha)) == 2
        found = detect(farroupilha + drive("v3", "2025-03-26T13:00:00Z", 10), holidays=["09-20"])
        assert sorted(found["vehicle_id"]) == ["v2", "v3"]
        found = detect(farroupilha, holidays=["09-20", "2025-09-19"])
        assert found.empty
        (f,) = detect(drive("v1", "2025-02-28T13:00:00Z", 10), holidays=["03-01"])["details"]
        assert (f["calendar"]["annual_holidays"], f["calendar"]["holidays"]) == (["03-01"], [])
        assert detect(drive("v1", "2025-02-28T13:00:00Z", 10), holidays=["02-29"]).empty

    @pytest.mark.parametrize("bad", ["20/09", "13-01", "2024-02-30", "09-31", 920])
    def test_bad_holiday_is_refused(self, bad: Any) -> None:
        with pytest.raises(Flag2CalendarError, match="MM-DD"):
            detect(drive("v1", "2024-03-04T12:00:00Z", 1), holidays=[bad])

    @pytest.mark.parametrize(
        ("start", "expected"),
        [("2024-03-04T22:58:30Z", 0), ("2024-03-04T22:55:00Z", 1)],
        ids=["90s-before-20h", "5min-before-20h"],
    )
    def test_minutes_around_the_boundary_hour_do_not_accuse(
        self, start: str, expected: int
    ) -> None:
        """Switching to Bandeira 2 90 s before 20:00 is tolerated; 5 min before is not."""
        found = detect(drive("v1", start, 15))
        assert len(found) == expected
        if expected:
            assert found.iloc[0]["ended_at"] == pd.Timestamp("2024-03-04T22:59:30Z")

    def test_carry_over_past_morning_end(self) -> None:
        """A ride begun in Bandeira 2 at 05:50 may keep it past 06:00 unless carry-over is off."""
        rows = drive("v1", "2024-03-05T08:50:00Z", 30)
        assert detect(rows).empty
        found = detect(rows, carry_over=False)
        assert len(found) == 1
        assert found.iloc[0]["started_at"] == pd.Timestamp("2024-03-05T09:00:00Z")
        assert found.iloc[0]["details"]["tariff2_since"] == "2024-03-05T08:50:00Z"

    @pytest.mark.parametrize(("free_at", "found"), [("08:59:24", 0), ("09:00:10", 1)])
    def test_a_ride_begun_between_a_fix_before_06_and_one_after_may_carry_over(
        self, free_at: str, found: int
    ) -> None:
        """A fix a minute: free at 05:59:24, Bandeira 2 seen from 06:00:24. The ride began
        between the two, perhaps before 06:00: excused. Free still at 06:00:10: it began
        after 06:00."""
        rows = drive("v1", f"2024-03-05T{free_at}Z", 0, meter="free", tariff=None, step_s=60)
        rows += drive("v1", "2024-03-05T09:00:24Z", 20, step_s=60)
        assert len(detect(rows)) == found

    @pytest.mark.parametrize(
        "rows",
        [
            drive("v1", "2024-03-04T12:00:00Z", 10, tariff=1),
            drive("v1", "2024-03-04T12:00:00Z", 10, meter="free"),
            drive("v1", "2024-03-04T12:00:00Z", 1.5) + drive("v1", "2024-03-04T12:12:00Z", 1.5),
            drive("v1", "2024-03-04T12:00:00Z", 1.5)
            + drive("v1", "2024-03-04T12:02:00Z", 0, tariff=None)
            + drive("v1", "2024-03-04T12:02:30Z", 1.5),
        ],
        ids=["tariff-1", "meter-free", "split-by-silence", "split-by-unknown-tariff"],
    )
    def test_not_misuse(self, rows: list[dict]) -> None:
        """Tariff 1, a free meter, and short pieces split by silences or unknown tariff."""
        assert detect(rows).empty

    def test_silence_threshold_joins_pieces(self) -> None:
        """With a longer max_gap_s the two 90-s pieces form one 13.5-min segment."""
        rows = drive("v1", "2024-03-04T12:00:00Z", 1.5) + drive("v1", "2024-03-04T12:12:00Z", 1.5)
        found = detect(rows, max_gap_s=900.0)
        assert found.iloc[0]["details"]["duration_s"] == 810.0

    def test_speed_flagged_fixes_lower_confidence(self) -> None:
        """Fixes flagged for impossible speed weigh less."""
        rows = drive("v1", "2024-03-04T12:00:00Z", 10)
        clean = detect(rows).iloc[0]["confidence"]
        rows[5]["lat"] += 1.0  # one jump of ~110 km
        jumpy = detect(rows).iloc[0]
        assert jumpy["details"]["n_speed_flagged"] >= 1
        assert jumpy["confidence"] < clean

    def test_unsorted_pings_and_several_vehicles(self) -> None:
        """Shuffled pings of two vehicles give one finding each."""
        rows = drive("v1", "2024-03-04T12:00:00Z", 10) + drive("v2", "2024-03-04T12:05:00Z", 10)
        pings = make_pings(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)
        found = detect_flag2_misuse(pings)
        assert sorted(found["vehicle_id"]) == ["v1", "v2"]
        assert found["finding_id"].is_unique

    def test_without_tariff_nothing_is_found(self) -> None:
        """Pings without a tariff column give an empty, typed frame."""
        pings = make_pings(drive("v1", "2024-03-04T12:00:00Z", 10)).drop(columns=["tariff"])
        found = detect_flag2_misuse(pings)
        assert found.empty and list(found.columns) == list(FINDING_COLUMNS)

    @pytest.mark.parametrize(
        ("kw", "error", "match"),
        [
            ({"min_duration_s": -1.0}, DetectorThresholdError, "min_duration_s"),
            ({"max_gap_s": 0.0}, DetectorThresholdError, "max_gap_s"),
            ({"timezone": "Mars/Olympus"}, DetectorThresholdError, "fuso"),
            ({"calendar": "20-6"}, Flag2CalendarError, "Flag2Calendar"),
        ],
    )
    def test_bad_options_raise(self, kw: dict, error: type, match: str) -> None:
        """Bad thresholds, zone or calendar are refused by name."""
        with pytest.raises(error, match=match):
            detect(drive("v1", "2024-03-04T12:00:00Z", 1), **kw)


def _town(north_m: float) -> shapely.Polygon:
    """A municipality from 1 km south of the origin to ``north_m`` north of it (EPSG:4326)."""
    (s_lat, w_lon), (n_lat, e_lon) = offset_m(-1000.0, -1000.0), offset_m(north_m, 1000.0)
    return shapely.box(w_lon, s_lat, e_lon, n_lat)


class TestLeftMunicipality:
    """A ride with Bandeira 2 that leaves the municipality: a decree commonly allows it."""

    def test_ride_out_of_the_town_is_marked_and_its_confidence_halved(self) -> None:
        """10 min north at 50 m / 30 s: 1 km, the last 9 fixes beyond a limit 590 m north."""
        rows = drive("v1", "2024-03-04T12:00:00Z", 10)
        inside = detect(rows)
        out = detect(rows, boundary=_town(590.0))
        d = out.iloc[0]["details"]
        assert d["left_municipality"] is True and d["n_fixes_outside"] == 9
        assert d["left_at"] == "2024-03-04T12:06:00Z"  # 600 m north: the first fix outside
        assert [f["row"] for f in d["fixes"]] == [1, 13, 21]  # the segment's ends and it
        assert out.iloc[0]["confidence"] == pytest.approx(inside.iloc[0]["confidence"] * 0.5)
        assert "left_municipality" not in inside.iloc[0]["details"]

    def test_ride_within_the_town_is_not_marked(self) -> None:
        found = detect(drive("v1", "2024-03-04T12:00:00Z", 10), boundary=_town(5000.0))
        d = found.iloc[0]["details"]
        assert (d["left_municipality"], d["n_fixes_outside"]) == (False, 0)
        assert found.iloc[0]["confidence"] == pytest.approx(0.95)

    def test_the_whole_run_counts_not_only_the_segment(self) -> None:
        """Bandeira 2 from 19:57 to 20:10: the misuse (to 19:59:30, 250 m) is inside the town,
        the allowed rest of the ride leaves it; a 5-min ride at 09:00 stays inside."""
        rows = drive("v1", "2024-03-04T22:57:00Z", 13)
        rows += [r | {"vehicle_id": "v2"} for r in drive("v1", "2024-03-04T12:00:00Z", 5)]
        found = detect(rows, boundary=_town(590.0)).set_index("vehicle_id")
        assert found.loc["v1", "ended_at"] == pd.Timestamp("2024-03-04T22:59:30Z")
        assert found.loc["v1", "details"]["left_municipality"] is True
        left = found.loc["v1", "details"]["fixes"][-1]  # after the segment: the run went on
        assert left["timestamp"] == found.loc["v1", "details"]["left_at"] == "2024-03-04T23:03:00Z"
        assert found.loc["v2", "details"]["left_municipality"] is False

    def test_a_bad_boundary_is_refused(self) -> None:
        with pytest.raises(BoundaryError, match="Polygon"):
            detect(drive("v1", "2024-03-04T12:00:00Z", 10), boundary=shapely.Point(0, 0))

    def test_pieces_give_the_batch_findings_with_the_boundary(self) -> None:
        """Live, fix by fix or in pieces, the marks are the batch's."""
        rows = drive("v1", "2024-03-04T12:00:00Z", 10, step_s=60)
        rows += drive("v1", "2024-03-04T13:00:00Z", 25, step_s=60)
        batch = assert_pieces_give_batch(
            KERNEL, make_pings(rows), seeds=2, min_findings=2, boundary=_town(590.0)
        )
        assert batch["details"].map(lambda d: d["left_municipality"]).tolist() == [False, True]


class TestAshWednesday:
    """Ash Wednesday is a nationwide ponto facultativo until 14:00."""

    def test_morning_allowed_afternoon_not(self) -> None:
        assert len(detect(drive("v1", "2024-02-14T12:00:00Z", 10))) == 0  # 09:00
        assert len(detect(drive("v1", "2024-02-14T18:00:00Z", 10))) == 1  # 15:00
        assert len(detect(drive("v1", "2024-02-21T12:00:00Z", 10))) == 1  # a week later

    def test_only_with_the_national_days(self) -> None:
        own = Flag2Calendar(windows=((0, "20:00", "06:00"),), national_holidays=False)
        assert len(detect(drive("v1", "2024-02-14T12:00:00Z", 10), calendar=own)) == 1


class TestWeekMask:
    @pytest.mark.parametrize(
        ("calendar", "match"),
        [
            (Flag2Calendar(windows=((7, "20:00", "06:00"),)), "dia da semana"),
            (Flag2Calendar(windows=((0, "25:00", "06:00"),)), "HH:MM"),
            (Flag2Calendar(windows=((0, "20:00"),)), "janela"),  # type: ignore[arg-type]
            (Flag2Calendar(whole_months=(13,)), "mês"),
            (Flag2Calendar(holidays=("2024-01-01",)), "feriado"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_calendar_raises(self, calendar: Flag2Calendar, match: str) -> None:
        """Weekdays, times, months and dates out of range are refused."""
        with pytest.raises(Flag2CalendarError, match=match):
            week_mask(calendar)

    def test_window_wraps_past_midnight_and_sunday_into_monday(self) -> None:
        """Sunday 20:00–06:00 covers Monday 00:00–05:59, not 06:00."""
        mask = week_mask(Flag2Calendar(windows=((6, "20:00", "06:00"),)))
        assert mask[6 * 1440 + 20 * 60] and mask[6 * 1440 + 1439]
        assert mask[0] and mask[5 * 60 + 59] and not mask[6 * 60]
        assert mask.sum() == 10 * 60

    def test_calendar_of_lists_works(self) -> None:
        """A calendar written with lists (unhashable) gives the same mask as with tuples."""
        listed = Flag2Calendar(windows=[[0, "20:00", "06:00"]])  # type: ignore[arg-type]
        tupled = Flag2Calendar(windows=((0, "20:00", "06:00"),))
        assert (week_mask(listed) == week_mask(tupled)).all()
        ns = np.array([pd.Timestamp("2024-03-04T23:30:00Z").value], dtype=np.int64)
        assert allowed_at(ns, calendar=listed, timezone="America/Sao_Paulo").tolist() == [True]

    def test_default_calendar_counts(self) -> None:
        """Default: 10 h every night, Saturday 14:00–20:00 extra, all Sunday."""
        mask = week_mask(DEFAULT_FLAG2_CALENDAR)
        assert mask.sum() == 7 * 600 + 6 * 60 + (1440 - 600)


class TestAllowedAt:
    def test_matches_local_time(self) -> None:
        """Monday 19:59 local is not allowed; 20:00 is; the zone matters."""
        ns = pd.DatetimeIndex(["2024-03-04T22:59:00Z", "2024-03-04T23:00:00Z"]).as_unit("ns").asi8
        assert allowed_at(
            ns, calendar=DEFAULT_FLAG2_CALENDAR, timezone="America/Sao_Paulo"
        ).tolist() == [
            False,
            True,
        ]
        assert allowed_at(ns, calendar=DEFAULT_FLAG2_CALENDAR, timezone="UTC").tolist() == [
            True,
            True,
        ]

    def test_empty(self) -> None:
        """No instants, no answers."""
        out = allowed_at(
            np.array([], dtype=np.int64), calendar=DEFAULT_FLAG2_CALENDAR, timezone="UTC"
        )
        assert out.shape == (0,)


class TestBrazilHolidays:
    def test_movable_and_fixed_dates(self) -> None:
        """Easter-based dates of 2024 and 2025 and Consciência Negra from 2024."""
        days = set(brazil_holidays([2023, 2024, 2025]))
        for d in (
            "2024-02-12",
            "2024-02-13",
            "2024-03-29",
            "2024-05-30",
            "2025-04-18",
            "2025-06-19",
        ):
            assert dt.date.fromisoformat(d) in days
        assert dt.date(2024, 11, 20) in days and dt.date(2023, 11, 20) not in days
        assert dt.date(2024, 4, 21) in days and dt.date(2024, 4, 22) not in days


def _stream() -> pd.DataFrame:
    """Fixes a minute apart: misuse, misuse into 20:00, tariff 2 past 06:00, runs cut by a
    silence and by a fix without tariff, and a Saturday-morning run that ends with the input."""
    rows = drive("v1", "2024-03-04T12:00:00Z", 10, step_s=60)  # misuse
    rows += drive("v1", "2024-03-04T22:55:00Z", 15, step_s=60)  # misuse before 20:00, allowed
    rows += drive("v1", "2024-03-05T08:50:00Z", 30, step_s=60)  # carry-over past 06:00
    rows += drive("v1", "2024-03-05T12:00:00Z", 1.5, step_s=60)  # too short
    rows += drive("v1", "2024-03-05T12:12:00Z", 5, step_s=60)  # after a 10 min silence
    rows += drive("v2", "2024-03-04T12:00:00Z", 3, tariff=1, step_s=60)
    rows += drive("v2", "2024-03-04T12:03:30Z", 8, step_s=60)  # tariff 2 after tariff 1
    rows += drive("v2", "2024-03-04T12:12:00Z", 0, tariff=None)  # no tariff: ends the run
    rows += drive("v2", "2024-03-04T12:13:00Z", 4, step_s=60)  # a new run
    rows += drive("v2", "2024-03-09T13:00:00Z", 60, step_s=60)  # Saturday 10:00–11:00: ends
    return make_pings(rows)


def _feed(pings: pd.DataFrame, **kw: Any) -> tuple[list[list[str]], dict[str, Any]]:
    """Advance fix by fix: the finding ids each fix emits, and the last states."""
    states: dict[str, Any] = {}
    emitted = []
    for k in range(len(pings)):
        states, found = advance(KERNEL, states, pings.iloc[k : k + 1], **kw)
        emitted.append(found["finding_id"].tolist())
    return emitted, states


class TestFlag2MisuseKernel:
    @pytest.mark.parametrize("carry_over", [True, False])
    def test_pieces_give_the_batch_findings(self, carry_over: bool) -> None:
        """Fix by fix or in random pieces, the findings are the batch's, byte for byte."""
        batch = assert_pieces_give_batch(
            KERNEL,
            _stream(),
            seeds=2,
            min_findings=6 if carry_over else 7,
            carry_over=carry_over,
            timezone="America/Sao_Paulo",
        )
        assert batch["details"].map(lambda d: d["thresholds"]["carry_over"]).all() == carry_over

    def test_other_zone_and_calendar_are_passed_to_the_rule(self) -> None:
        """The zone and the calendar reach the rule: Lisbon's 13:00 on a strict calendar."""
        strict = Flag2Calendar(windows=((0, "20:00", "06:00"),), national_holidays=False)
        batch = assert_pieces_give_batch(
            KERNEL, _stream(), seeds=1, calendar=strict, timezone="Europe/Lisbon"
        )
        assert set(batch["details"].map(lambda d: d["timezone"])) == {"Europe/Lisbon"}

    def test_emitted_when_the_run_ends(self) -> None:
        """A segment that ends at 20:00 is emitted when its tariff-2 run ends, once."""
        rows = drive("v1", "2024-03-04T22:50:00Z", 20, step_s=60)
        rows += drive("v1", "2024-03-04T23:11:00Z", 2, meter="free", step_s=60)
        pings = make_pings(rows)
        emitted, states = _feed(pings)
        assert [k for k, e in enumerate(emitted) if e] == [21]  # the first free fix
        assert emitted[21] == detect_flag2_misuse(pings)["finding_id"].tolist()
        # Nothing open: the last fix is kept (the fix before a next run), with one before it.
        assert len(states["v1"]["tail"]["timestamp"]) == 2

    def test_open_run_is_kept_as_plain_data(self) -> None:
        """While tariff 2 is on, the run's fixes are the state, JSON and a new dict each call."""
        pings = make_pings(drive("v1", "2024-03-04T12:00:00Z", 5, step_s=60))
        state, found = advance(KERNEL, {}, pings.iloc[:3])
        assert len(found) == 0 and len(state["v1"]["tail"]["timestamp"]) == 3
        before = json.dumps(state)
        new_state, _ = advance(KERNEL, state, pings.iloc[3:])
        assert json.dumps(state) == before
        assert len(new_state["v1"]["tail"]["timestamp"]) == 6

    def test_late_fix_is_ignored(self) -> None:
        """A fix not later than the last one changes nothing."""
        pings = make_pings(drive("v1", "2024-03-04T12:00:00Z", 3))
        state, _ = advance(KERNEL, {}, pings.iloc[3:4])
        again, found = advance(KERNEL, state, pings.iloc[1:2])
        assert len(found) == 0
        assert again == state
