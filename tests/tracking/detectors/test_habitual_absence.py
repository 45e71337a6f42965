from __future__ import annotations

import datetime as dt
import json

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from day_kernel_checks import assert_day_pieces_give, concat_findings
from factories import make_pings, make_track
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

from geo.cover import match_stands
from stands.visits import detect_visits
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.habitual_absence import (
    advance_habitual_absence,
    detect_habitual_absence,
    habitually_absent,
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
            "reach_m": 50.0,
            "silent_reach_m": 200.0,
            "min_silence_s": 300.0,
        }
        assert len(d["fixes"]) >= 24
        assert f["geometry"].equals(STANDS.geometry.iloc[0])
        json.dumps(d)

    def test_habitually_present_is_not_a_finding(self) -> None:
        """Present on 3 of 12 operating days (25 %) is above the 20 % threshold."""
        assert _detect(_pings("A", list(range(1, 13))), _visits("A", [2, 6, 9])).empty

    def test_a_night_shift_is_one_day_of_service(self) -> None:
        """A night driver (20:00-04:00) and a day driver (08:00-16:00) as often at the stand.

        15 shifts every other day, present on 4 (27 %): neither is absent. By calendar day the
        night driver operated 30 days and was present on 4 (13 %), and was accused. A car
        driven round the clock keeps its calendar days: present on 3 of 30, a finding.
        """
        t0 = pd.Timestamp("2024-03-04T12:00Z")

        def shifts(vehicle: str, starts_local_h: float, hours: float, days: list[int]) -> list:
            points = []
            for d in days:
                start = pd.Timestamp(f"2024-03-{d:02d}") + pd.Timedelta(hours=starts_local_h + 3)
                for k in range(int(hours * 2) + 1):
                    at = start.tz_localize("UTC") + pd.Timedelta(minutes=30 * k)
                    points.append(((at - t0).total_seconds(), 0.0, 0.0))
            return make_track(vehicle, points, meter="free")

        odd = list(range(1, 30, 2))
        present = [3, 9, 15, 21]
        night = [("A", "S1", pd.Timestamp(f"2024-03-{d:02d}T01:00Z") + pd.Timedelta(days=1),
                  1200, False) for d in present]  # fmt: skip
        day = [("B", "S1", pd.Timestamp(f"2024-03-{d:02d}T13:00Z"), 1200, False) for d in present]
        rows = shifts("A", 20, 8, odd) + shifts("B", 8, 8, odd)
        assert _detect(rows, night + day).empty
        rows = shifts("A", 0, 23.5, list(range(1, 31)))
        found = _detect(rows, _visits("A", [3, 9, 15]))
        assert found["details"].iloc[0]["days_operating"] == 30

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

    def test_accessible_taxi_is_flagged(self) -> None:
        """A Táxi Acessível's finding says so (POA art. 28 § 2); the same absence otherwise."""
        fleet = pd.DataFrame({"vehicle_id": ["A", "B"], "accessible": [True, False]})
        plain = _detect(_pings("A", list(range(1, 13))), _visits("A", [5]))
        found = _detect(_pings("A", list(range(1, 13))), _visits("A", [5]), fleet=fleet)
        assert found.iloc[0]["details"]["accessible"] is True
        rest = {k: v for k, v in found.iloc[0]["details"].items() if k != "accessible"}
        assert rest == plain.iloc[0]["details"]

    @pytest.mark.parametrize("accessible", [False, None])
    def test_not_accessible_or_unknown_leaves_the_finding_unchanged(
        self, accessible: bool | None
    ) -> None:
        """Not accessible or unknown: no ``accessible`` key, the finding as without a fleet."""
        fleet = pd.DataFrame(
            {"vehicle_id": ["A"], "accessible": pd.Series([accessible], dtype="object")}
        )
        days = list(range(1, 13))
        found = _detect(_pings("A", days), _visits("A", [5]), fleet=fleet)
        plain = _detect(_pings("A", days), _visits("A", [5]))
        assert "accessible" not in found.iloc[0]["details"]
        assert found.drop(columns="finding_id").equals(plain.drop(columns="finding_id"))
        assert found.iloc[0]["finding_id"] == plain.iloc[0]["finding_id"]

    def test_stands_without_id_raise(self) -> None:
        """A stands frame without stand_id cannot give the geometry."""
        with pytest.raises(DetectorInputError, match="stand_id"):
            _detect(_pings("A", [1]), [], stands=STANDS.drop(columns=["stand_id"]))


# --- live -------------------------------------------------------------------------------------


def _visits_of(pings: pd.DataFrame) -> pd.DataFrame:
    """The batch visits of the live scenario (its stands, its gap)."""
    stands, cover = live_cover()
    p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
    memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
    return detect_visits(pings, memberships, stands=stands, max_gap_s=300.0)


def _ns(values: pd.Series) -> np.ndarray:
    return pd.to_datetime(values, utc=True).astype("datetime64[ns, UTC]").astype("int64").to_numpy()


def _replay(
    pings: pd.DataFrame,
    visits: pd.DataFrame,
    cuts: list[int],
    *,
    hold: bool = True,
    delay_s: float = 7200.0,
) -> gpd.GeoDataFrame:
    """The kernel fed the fixes in time order in pieces; a visit is released ``delay_s`` after
    it departed (a queue ahead of it), the days before each piece's last fix closed."""
    stands, _ = live_cover()
    order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
    ts = _ns(order["timestamp"])
    arrived, departed = _ns(visits["arrived_at"]), _ns(visits["departed_at"])
    given = np.zeros(len(visits), dtype=bool)
    vids = visits["vehicle_id"].astype("str").to_numpy()
    bounds = [0, *cuts, len(order)]
    states: dict = {}
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        now = int(ts[hi - 1])
        released = ~given & (departed + int(delay_s * 1e9) <= now)
        given |= released
        waiting = ~given & (arrived <= now)
        unreleased = {
            v: int(arrived[waiting & (vids == v)].min()) for v in set(vids[waiting].tolist())
        }
        states, found = advance_habitual_absence(
            states,
            order.iloc[lo:hi],
            visits.loc[released],
            licences=LIVE_LICENCES,
            as_of=local_day(pd.Timestamp(now, tz="UTC")) - dt.timedelta(days=1),
            unreleased=unreleased if hold else {},
            stands=stands,
            **LIVE_OPTIONS,
        )
        states = json.loads(json.dumps(states))
        parts.append(found)
    last = local_day(pd.Timestamp(max(int(ts.max()), int(departed.max())), tz="UTC"))
    _, found = advance_habitual_absence(
        states,
        order.iloc[:0],
        visits.loc[~given],
        licences=LIVE_LICENCES,
        as_of=last,
        final=True,
        stands=stands,
        **LIVE_OPTIONS,
    )
    return concat_findings([*parts, found])


def _reference(pings: pd.DataFrame) -> gpd.GeoDataFrame:
    """The batch as of each day of the data; a (vehicle, stand) once per window."""
    first = local_day(pings["timestamp"].min())
    last: dict[tuple[str, str], dt.date] = {}
    out = []
    for k in range(N_DAYS):
        day = first + dt.timedelta(days=k)
        found = absence_batch(pings, day)
        keep = []
        for v, s in zip(found["vehicle_id"], found["stand_id"], strict=True):
            before = last.get((v, s))
            keep.append(before is None or (day - before).days >= LIVE_OPTIONS["window_days"])
            if keep[-1]:
                last[(v, s)] = day
        out.append(found.loc[keep])
    return concat_findings(out)


class TestHabitualAbsenceKernel:
    def test_pieces_give_the_batch_of_each_closed_day(self) -> None:
        """In fine, random or one piece: the batch as of each day, a pair once per window."""
        pings = make_pings(absence_rows())
        visits = _visits_of(pings)
        reference = _reference(pings)
        assert [
            (f["details"]["window"]["end"], f["vehicle_id"]) for f in reference.to_dict("records")
        ] == [
            ("2024-03-05", "absent"),  # days 0–1 operating, present on one: 50 % < 60 %
            ("2024-03-12", "absent"),  # the next window that does not overlap the first
        ]
        assert_day_pieces_give(
            lambda cuts: _replay(pings, visits, cuts),
            len(pings),
            reference,
            step=40,
            seeds=3,
            max_cuts=60,
        )

    def test_every_daily_batch_finding_is_covered(self) -> None:
        """Each day's batch finding was emitted for that pair within the window before."""
        pings = make_pings(absence_rows())
        emitted = _replay(pings, _visits_of(pings), [500, 1500])
        first = local_day(pings["timestamp"].min())
        accused = set()
        for k in range(N_DAYS):
            day = first + dt.timedelta(days=k)
            for f in absence_batch(pings, day).to_dict("records"):
                accused.add(f["vehicle_id"])
                assert any(
                    e["vehicle_id"] == f["vehicle_id"]
                    and e["stand_id"] == f["stand_id"]
                    and 0 <= (day - dt.date.fromisoformat(e["details"]["window"]["end"])).days < 7
                    for e in emitted.to_dict("records")
                ), (day, f["vehicle_id"])
        assert accused == {"absent"}  # jitter, night, late, rare and idle are not absent

    def test_kernel_flags_the_accessible_taxi(self) -> None:
        """Live: the kernel given the fleet flags a Táxi Acessível's finding as the batch does."""
        pings = make_pings(absence_rows())
        visits = _visits_of(pings)
        stands, _ = live_cover()
        fleet = pd.DataFrame({"vehicle_id": ["absent"], "accessible": [True]})
        last = local_day(pings["timestamp"].max())
        _, found = advance_habitual_absence(
            {},
            pings,
            visits,
            licences=LIVE_LICENCES,
            as_of=last,
            final=True,
            stands=stands,
            fleet=fleet,
            **LIVE_OPTIONS,
        )
        assert len(found) > 0
        assert all(d.get("accessible") is True for d in found["details"])

    def test_day_waits_for_visits_not_released(self) -> None:
        """Without waiting for the visits released past midnight, "late" would be accused."""
        pings = make_pings(absence_rows())
        visits = _visits_of(pings)
        cuts = list(range(50, len(pings), 50))
        assert "late" not in set(_replay(pings, visits, cuts)["vehicle_id"])
        assert "late" in set(_replay(pings, visits, cuts, hold=False)["vehicle_id"])

    def test_days_are_judged_once_from_the_first_sighting(self) -> None:
        """A vehicle's days are judged from its first one, each once."""
        pings = make_pings(trip("absent", local(0, 10)) + trip("absent", local(1, 10)))
        none = _visits_of(pings.iloc[:0])
        options = {"licences": LIVE_LICENCES, **LIVE_OPTIONS}
        states, found = advance_habitual_absence({}, pings, none, as_of=None, **options)
        assert len(found) == 0 and states["absent"]["next"] == "2024-03-04"
        states, found = advance_habitual_absence(
            states, pings.iloc[:0], none, as_of=dt.date(2024, 3, 5), **options
        )
        assert found["vehicle_id"].tolist() == ["absent"]
        assert found.iloc[0]["details"]["days_operating"] == 2
        states, found = advance_habitual_absence(
            states, pings.iloc[:0], none, as_of=dt.date(2024, 3, 5), **options
        )
        assert len(found) == 0 and states["absent"]["next"] == "2024-03-06"

    def test_unreleased_visit_holds_the_day(self) -> None:
        """A vehicle whose visit arrived before midnight and is not released waits."""
        rows = trip("late", local(0, 10)) + trip("night", local(0, 10))
        pings = make_pings(rows)
        none = _visits_of(pings.iloc[:0])
        midnight = pd.Timestamp("2024-03-05T03:00Z").value
        held = {"late": midnight - 1, "night": midnight}
        states, _ = advance_habitual_absence(
            {},
            pings,
            none,
            licences=LIVE_LICENCES,
            as_of=dt.date(2024, 3, 4),
            unreleased=held,
            **LIVE_OPTIONS,
        )
        assert states["late"]["next"] == "2024-03-04"  # still to judge
        assert states["night"]["next"] == "2024-03-05"  # arrived at midnight: the next day's

    def test_state_keeps_the_window_only(self) -> None:
        """Sightings and visits older than the window still to judge leave the state."""
        pings = make_pings(absence_rows())
        states, _ = advance_habitual_absence(
            {},
            pings,
            _visits_of(pings),
            licences=LIVE_LICENCES,
            as_of=dt.date(2024, 3, 14),
            stands=live_cover()[0],
            **LIVE_OPTIONS,
        )
        for state in states.values():
            assert min(state["days"]) >= "2024-03-09"  # next 03-15, window of 7 days
            assert state["next"] == "2024-03-15"
        json.dumps(states)

    def test_naive_timestamp_raises(self) -> None:
        """A fix without a zone is refused."""
        pings = pd.DataFrame(
            {
                "vehicle_id": ["A"],
                "timestamp": [pd.Timestamp("2024-03-05 10:00")],
                "lat": [0.0],
                "lon": [0.0],
            }
        )
        with pytest.raises(DetectorInputError, match="timestamp"):
            advance_habitual_absence({}, pings, _frame([]), licences=LICENCES)

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
        empty = make_pings(_pings("A", [1])).iloc[:0]
        with pytest.raises(DetectorThresholdError, match=match):
            advance_habitual_absence({}, empty, _frame([]), licences=LICENCES, **options)


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


def _stand_suspension(vehicle: str, starts_on: str, ends_on: str | None) -> pd.DataFrame:
    """A prefixo's suspension at S1 (POA art. 45 § único I), as the registry gives it."""
    return pd.DataFrame(
        {
            "suspension_id": [7],
            "stand_id": ["S1"],
            "vehicle_id": pd.Series([vehicle], dtype="object"),
            "driver_id": pd.Series([None], dtype="object"),
            "starts_on": pd.to_datetime([starts_on]),
            "ends_on": pd.to_datetime([ends_on]),
            "kind": ["suspension"],
            "reason": ["art. 45, parágrafo único, I"],
            "process_ref": ["PROC-1"],
        }
    )


class TestStandSuspension:
    # A works all 30 days; at S1 on 4 of the 10 days outside its suspension (8-27 Mar).
    DAYS = list(range(1, 31))
    PRESENT = [1, 2, 3, 29]

    def test_suspended_days_are_left_out(self) -> None:
        """Suspended from S1 on 20 days, present on 4 of the other 10 (40 %): no finding;
        without the suspension the 4 of 30 days (13 %) were one."""
        rows = (_pings("A", self.DAYS), _visits("A", self.PRESENT))
        assert len(_detect(*rows)) == 1
        susp = _stand_suspension("A", "2024-03-08", "2024-03-27")
        assert _detect(*rows, suspensions=susp).empty

    def test_evidence_names_the_suspended_days(self) -> None:
        """Still absent outside the suspension: the finding counts only the other days and
        lists the days left out with the registry row."""
        rows = (_pings("A", self.DAYS), _visits("A", [1]))
        susp = _stand_suspension("A", "2024-03-08", "2024-03-27")
        f = _detect(*rows, suspensions=susp).iloc[0]
        d = f["details"]
        assert (d["days_operating"], d["days_present"], d["days_licensed"]) == (10, 1, 10)
        assert d["days_suspended"] == 20
        assert d["suspended_days"][0] == "2024-03-08" and d["suspended_days"][-1] == "2024-03-27"
        assert d["suspensions"][0]["process_ref"] == "PROC-1"
        assert all(not ("2024-03-08" <= x["date"] <= "2024-03-27") for x in d["days"])
        json.dumps(d)

    def test_closed_stand_leaves_out_every_licensee(self) -> None:
        """S1 closed for works (no prefixo named, kind 'closed') on 20 days: neither licensee
        is accused for them; each finding before lists the closure as evidence."""
        rows = (_pings("A", self.DAYS) + _pings("B", self.DAYS), _visits("A", self.PRESENT))
        assert len(_detect(*rows)) == 2
        closed = _stand_suspension("A", "2024-03-08", "2024-03-27").assign(
            vehicle_id=None, kind="closed"
        )
        assert _detect(*rows, suspensions=closed)["vehicle_id"].tolist() == ["B"]
        found = _detect(_pings("A", self.DAYS), _visits("A", [1]), suspensions=closed).iloc[0]
        assert found["details"]["days_suspended"] == 20
        assert found["details"]["suspensions"][0]["kind"] == "closed"
        assert found["details"]["suspensions"][0]["vehicle_id"] is None
        driver = closed.assign(driver_id="D1")  # a driver's row is never a closure
        assert len(_detect(*rows, suspensions=driver)) == 2

    def test_driver_or_other_stand_suspension_leaves_the_days_in(self) -> None:
        """A driver's suspension, or the prefixo's at another stand, does not excuse."""
        rows = (_pings("A", self.DAYS), _visits("A", self.PRESENT))
        other = _stand_suspension("A", "2024-03-08", "2024-03-27").assign(stand_id="S9")
        driver = _stand_suspension("A", "2024-03-08", "2024-03-27").assign(
            vehicle_id=None, driver_id="D1"
        )
        assert len(_detect(*rows, suspensions=other)) == 1
        assert len(_detect(*rows, suspensions=driver)) == 1

    def test_kernel_leaves_out_the_suspended_days(self) -> None:
        """The live kernel, day by day, gives the batch's answer: no finding."""
        susp = _stand_suspension("A", "2024-03-08", "2024-03-27")
        pings = make_pings(_pings("A", self.DAYS))
        visits = _frame(_visits("A", self.PRESENT))
        kw = {"licences": LICENCES, "stands": STANDS}
        states: dict = {}
        found = []
        for day in self.DAYS:
            lo = pd.Timestamp(f"2024-03-{day:02d}T03:00Z")
            hi = lo + pd.Timedelta(days=1)
            piece = pings.loc[(pings["timestamp"] >= lo) & (pings["timestamp"] < hi)]
            given = visits.loc[(visits["arrived_at"] >= lo) & (visits["arrived_at"] < hi)]
            states, res = advance_habitual_absence(
                states,
                piece,
                given,
                as_of=dt.date(2024, 3, day),
                suspensions=susp,
                **kw,  # type: ignore[arg-type]
            )
            states = json.loads(json.dumps(states))
            found.append(res)
        assert sum(len(f) for f in found) == 0
        states, res = advance_habitual_absence(
            {},
            pings,
            visits,
            as_of=dt.date(2024, 3, 30),
            **kw,  # type: ignore[arg-type]
        )
        assert len(res) >= 1  # without the suspension the kernel finds it
