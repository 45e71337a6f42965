from __future__ import annotations

import datetime as dt
import json

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from factories import make_pings, make_track
from live_compare import assert_same_findings
from live_scenarios import (
    LIVE_LICENCES,
    LIVE_OPTIONS,
    N_DAYS,
    absence_batch,
    absence_rows,
    live_cover,
    local,
    local_day,
    trip,
)

from stands.visits import (
    flush_visits,
    tick_visits,
    unreleased_arrivals,
    update_visits,
)
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.habitual_absence import (
    detect_habitual_absence,
    habitually_absent,
    tick_habitual_absence,
    update_habitual_absence,
)

AS_OF = dt.date(2024, 3, 30)  # window of 30 days: 2024-03-01 … 2024-03-30
LICENCES = pd.DataFrame({"vehicle_id": ["A", "B"], "stand_id": ["S1", "S1"]})
STANDS = gpd.GeoDataFrame(
    {"stand_id": ["S1"]}, geometry=[shapely.box(-51.23, -30.03, -51.22, -30.02)], crs=4326
)


def _pings(vehicle: str, days: list[int]) -> list[dict[str, object]]:
    """Two fixes at 15:00Z and 15:10Z on each given day of March 2024."""
    t0 = pd.Timestamp("2024-03-01T15:00Z") - pd.Timestamp("2024-03-04T12:00Z")
    base = t0.total_seconds()
    points = [(base + (d - 1) * 86_400 + k * 600, 0.0, 0.0) for d in days for k in (0, 1)]
    return make_track(vehicle, points, meter="free")


def _visits(vehicle: str, days: list[int], *, stand: str = "S1", dwell_s: float = 900) -> list:
    return [(vehicle, stand, pd.Timestamp(f"2024-03-{d:02d}T16:00Z"), dwell_s, False) for d in days]


def _frame(rows: list) -> pd.DataFrame:
    arrived = pd.Series([r[2] for r in rows], dtype="datetime64[ns, UTC]")
    dwell = np.asarray([r[3] for r in rows], dtype=np.float64)
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in rows], dtype="str"),
            "stand_id": pd.Series([r[1] for r in rows], dtype="str"),
            "arrived_at": arrived,
            "departed_at": arrived + pd.to_timedelta(dwell, unit="s"),
            "dwell_s": dwell,
            "boarded": pd.Series([r[4] for r in rows], dtype="bool"),
        }
    )


def _detect(ping_rows: list[dict[str, object]], visit_rows: list, **kw: object) -> gpd.GeoDataFrame:
    kw.setdefault("as_of", AS_OF)
    return detect_habitual_absence(
        _frame(visit_rows),
        LICENCES,
        make_pings(ping_rows),
        **kw,  # type: ignore[arg-type]
    )


class TestDetectHabitualAbsence:
    def test_operating_but_seldom_present_is_a_finding(self) -> None:
        """12 operating days, present on 1 (8 %): one finding with the days as evidence."""
        days = list(range(1, 13))
        found = _detect(_pings("A", days), _visits("A", [5]), stands=STANDS)
        assert len(found) == 1
        f = found.iloc[0]
        assert (f["kind"], f["vehicle_id"], f["stand_id"]) == ("habitual_absence", "A", "S1")
        assert f["started_at"] == pd.Timestamp("2024-03-01T03:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-31T03:00Z")
        d = f["details"]
        assert (d["days_operating"], d["days_present"], d["days_licensed"]) == (12, 1, 30)
        assert d["share"] == pytest.approx(1 / 12, abs=1e-4)
        assert d["window"] == {
            "start": "2024-03-01",
            "end": "2024-03-30",
            "timezone": "America/Sao_Paulo",
        }
        assert [x["date"] for x in d["days"]] == [f"2024-03-{k:02d}" for k in days]
        assert [x["present"] for x in d["days"]] == [k == 5 for k in days]
        assert d["days"][4]["visits"][0]["dwell_s"] == 900.0
        assert d["days"][0]["first_seen"]["timestamp"] == "2024-03-01T15:00:00Z"
        assert d["thresholds"] == {
            "window_days": 30,
            "min_operating_days": 10,
            "min_presence_share": 0.2,
            "min_presence_s": 60.0,
        }
        assert len(d["fixes"]) >= 24
        assert f["geometry"].equals(STANDS.geometry.iloc[0])
        json.dumps(d)

    def test_habitually_present_is_not_a_finding(self) -> None:
        """Present on 3 of 12 operating days (25 %) is above the 20 % threshold."""
        assert _detect(_pings("A", list(range(1, 13))), _visits("A", [2, 6, 9])).empty

    def test_not_operating_is_not_absence(self) -> None:
        """A vehicle that operated 5 days (below 10) and never came is inactivity, not absence."""
        assert _detect(_pings("A", [1, 2, 3, 4, 5]), []).empty

    def test_vehicle_without_any_data_is_not_absent(self) -> None:
        """B is licensed but never seen: no finding for B."""
        found = _detect(_pings("A", list(range(1, 13))), [])
        assert found["vehicle_id"].tolist() == ["A"]

    def test_visits_to_another_stand_are_not_presence(self) -> None:
        """Waiting at another stand every day does not make A present at S1."""
        days = list(range(1, 13))
        found = _detect(_pings("A", days), _visits("A", days, stand="S7"))
        assert len(found) == 1
        assert found.iloc[0]["details"]["days_present"] == 0

    def test_short_visits_are_not_presence(self) -> None:
        """Pass-throughs shorter than min_presence_s do not count, but are shown."""
        days = list(range(1, 13))
        found = _detect(_pings("A", days), _visits("A", days, dwell_s=30))
        d = found.iloc[0]["details"]
        assert d["days_present"] == 0
        assert d["days"][0]["visits"][0]["counted"] is False
        assert _detect(_pings("A", days), _visits("A", days, dwell_s=30), min_presence_s=20).empty

    def test_thresholds_are_configurable(self) -> None:
        """A stricter share flags 3 of 12; fewer operating days required flags 5 of 5."""
        days = list(range(1, 13))
        assert len(_detect(_pings("A", days), _visits("A", [2, 6, 9]), min_presence_share=0.3))
        assert len(_detect(_pings("A", [1, 2, 3, 4, 5]), [], min_operating_days=5)) == 1

    def test_window_ends_on_as_of(self) -> None:
        """Operating days before the window do not count."""
        days = list(range(1, 13))
        assert _detect(_pings("A", days), [], as_of=dt.date(2024, 4, 25)).empty

    def test_as_of_defaults_to_the_last_day_of_data(self) -> None:
        """Without as_of the window ends on the local day of the latest fix."""
        found = _detect(_pings("A", list(range(1, 13))), [], as_of=None)
        assert found.iloc[0]["details"]["window"]["end"] == "2024-03-12"

    def test_confidence_grows_as_presence_falls(self) -> None:
        """Never present gives more confidence than present once; never 1."""
        days = list(range(1, 13))
        never = _detect(_pings("A", days), []).iloc[0]["confidence"]
        once = _detect(_pings("A", days), _visits("A", [3])).iloc[0]["confidence"]
        assert 0.5 < once < never < 1.0

    def test_no_data_gives_typed_empty_frame(self) -> None:
        """No visits and no pings: no findings, with the contract's columns."""
        found = detect_habitual_absence(_frame([]), LICENCES, None)
        assert list(found.columns) == list(FINDING_COLUMNS)
        validate_findings(found)

    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("window_days", 0),
            ("min_operating_days", 2.5),
            ("min_presence_share", 0.0),
            ("min_presence_share", 1.5),
            ("timezone", "Nowhere/Land"),
        ],
    )
    def test_bad_threshold_raises(self, option: str, value: object) -> None:
        """Out-of-range options are refused, naming them."""
        match = "fuso" if option == "timezone" else option
        with pytest.raises(DetectorThresholdError, match=match):
            _detect(_pings("A", [1]), [], **{option: value})

    def test_stands_without_id_raise(self) -> None:
        """A stands frame without stand_id cannot give the geometry."""
        with pytest.raises(DetectorInputError, match="stand_id"):
            _detect(_pings("A", [1]), [], stands=STANDS.drop(columns=["stand_id"]))


# --- live -------------------------------------------------------------------------------------


def _run_live(pings: pd.DataFrame, *, hold: bool = True) -> list[tuple[dt.date, gpd.GeoDataFrame]]:
    """Fix by fix: visits, sightings, and a tick for the last whole local day after each fix."""
    stands, cover = live_cover()
    visits_state, state, out = None, None, []

    def tick(as_of: dt.date, unreleased: dict[str, int]) -> None:
        nonlocal state
        state, found = tick_habitual_absence(
            state,
            as_of=as_of,
            licences=LIVE_LICENCES,
            unreleased=unreleased if hold else {},
            stands=stands,
            **LIVE_OPTIONS,
        )
        if found is not None:
            out.append((as_of, found))

    for ping in pings.sort_values("timestamp", kind="stable").to_dict("records"):
        visits_state, released = update_visits(visits_state, ping, cover=cover, max_gap_s=300.0)
        visits_state, more = tick_visits(visits_state, now=ping["timestamp"], max_gap_s=300.0)
        state = update_habitual_absence(state, ping=ping, visits=released + more)
        yesterday = local_day(ping["timestamp"]) - dt.timedelta(days=1)
        tick(yesterday, unreleased_arrivals(visits_state))
    visits_state, released = flush_visits(visits_state)
    state = update_habitual_absence(state, visits=released)
    tick(local_day(pings["timestamp"].max()), {})
    json.dumps(state)  # plain data
    return out


class TestTickHabitualAbsence:
    def test_live_equals_batch(self) -> None:
        """Each emitted finding is the batch's for its day; every batch finding is covered."""
        pings = make_pings(absence_rows())
        live = _run_live(pings)
        first = local_day(pings["timestamp"].min())
        days = [first + dt.timedelta(days=k) for k in range(N_DAYS)]
        batch = {day: absence_batch(pings, day) for day in days}
        emitted = [(day, f) for day, found in live for f in found.to_dict("records")]
        assert [(d.isoformat(), f["vehicle_id"]) for d, f in emitted] == [
            ("2024-03-05", "absent"),  # days 0–1 operating, present on one: 50 % < 60 %
            ("2024-03-12", "absent"),  # the next window that does not overlap the first
        ]
        for day, found in live:
            assert_same_findings(
                found, batch[day].loc[batch[day]["finding_id"].isin(found["finding_id"])]
            )
        for day, found in batch.items():
            for f in found.to_dict("records"):
                assert any(
                    e["vehicle_id"] == f["vehicle_id"]
                    and e["stand_id"] == f["stand_id"]
                    and dt.timedelta(0) <= day - d < dt.timedelta(days=7)
                    for d, e in emitted
                ), (day, f["vehicle_id"])
        accused = {f["vehicle_id"] for found in batch.values() for f in found.to_dict("records")}
        assert accused == {"absent"}  # jitter, night, late, rare and idle are not absent

    def test_day_waits_for_visits_across_midnight(self) -> None:
        """Without waiting for the visits held past midnight, "late" would be accused."""
        pings = make_pings(absence_rows())
        wrong = {
            f["vehicle_id"]
            for _, found in _run_live(pings, hold=False)
            for f in found.to_dict("records")
        }
        assert "late" in wrong

    def test_days_are_judged_once_from_the_first_tick(self) -> None:
        """The first tick judges only its day; an earlier as_of later judges nothing again."""
        pings = make_pings(trip("absent", local(0, 10)) + trip("absent", local(1, 10)))
        options = {"licences": LIVE_LICENCES, "unreleased": {}, **LIVE_OPTIONS}
        state = None
        for ping in pings.to_dict("records"):
            state = update_habitual_absence(state, ping=ping)
        state, found = tick_habitual_absence(state, as_of=dt.date(2024, 3, 4), **options)
        assert found is None and state["next"]["absent"] == "2024-03-05"
        state, found = tick_habitual_absence(state, as_of=dt.date(2024, 3, 5), **options)
        assert found is not None and found["vehicle_id"].tolist() == ["absent"]
        assert found.iloc[0]["details"]["days_operating"] == 2
        state, found = tick_habitual_absence(state, as_of=dt.date(2024, 3, 5), **options)
        assert found is None and state["next"]["absent"] == "2024-03-06"

    def test_unreleased_visit_holds_the_day(self) -> None:
        """A vehicle whose visit arrived before midnight and is not released waits."""
        state, _ = tick_habitual_absence(
            None, as_of=dt.date(2024, 3, 4), licences=LIVE_LICENCES, unreleased={}, **LIVE_OPTIONS
        )
        midnight = pd.Timestamp("2024-03-06T03:00Z").value
        options = {"licences": LIVE_LICENCES, **LIVE_OPTIONS}
        held = {"late": midnight - 1, "night": midnight}
        state, _ = tick_habitual_absence(
            state, as_of=dt.date(2024, 3, 5), unreleased=held, **options
        )
        assert state["next"]["late"] == "2024-03-05"  # still to judge
        assert state["next"]["night"] == "2024-03-06"  # arrived at midnight: the next day's

    @pytest.mark.parametrize(
        ("kw", "match"),
        [
            ({"window_days": 0}, "window_days"),
            ({"min_presence_share": 1.5}, "min_presence_share"),
            ({"as_of": pd.Timestamp("2024-03-05")}, "as_of"),
        ],
    )
    def test_bad_options_raise(self, kw: dict, match: str) -> None:
        """Bad thresholds or an as_of that is not a date are refused by name."""
        options = {"as_of": AS_OF, **kw}
        with pytest.raises(DetectorThresholdError, match=match):
            tick_habitual_absence(None, licences=LICENCES, unreleased={}, **options)


class TestUpdateHabitualAbsence:
    def test_keeps_first_and_last_fix_perlocal_day(self) -> None:
        """Fixes of one local day (UTC straddles two dates) keep only the first and the last."""
        rows = make_track("A", [(local(0, h), 0.0, 0.0) for h in (0.5, 10, 20, 23.9)])
        rows += make_track("A", [(local(1, 0.1), 0.0, 0.0)])
        state = None
        for ping in make_pings(rows).to_dict("records"):
            state = update_habitual_absence(state, ping=ping)
        days = state["days"]["A"]
        assert sorted(days) == ["2024-03-04", "2024-03-05"]
        first, last = days["2024-03-04"]
        assert (first[3], last[3]) == (1, 4)
        assert days["2024-03-05"][0] == days["2024-03-05"][1]

    def test_naive_timestamp_raises(self) -> None:
        """A fix without a zone is refused."""
        ping = {
            "vehicle_id": "A",
            "timestamp": pd.Timestamp("2024-03-05 10:00"),
            "lat": 0,
            "lon": 0,
        }
        with pytest.raises(DetectorInputError, match="timestamp"):
            update_habitual_absence(None, ping=ping)


class TestHabituallyAbsent:
    def test_rule_on_a_summary(self) -> None:
        """Absent: enough operating days and a share under the threshold; a vehicle that never
        operated (share NaN) or operated too few days is not."""
        summary = pd.DataFrame(
            {
                "days_operating": [20, 20, 9, 0, 10],
                "share": [0.1, 0.2, 0.0, np.nan, 0.19],
            },
            index=[5, 6, 7, 8, 9],
        )
        hit = habitually_absent(summary)
        assert hit.tolist() == [True, False, False, False, True]
        assert hit.index.tolist() == [5, 6, 7, 8, 9]
        assert habitually_absent(summary, min_operating_days=21).sum() == 0
