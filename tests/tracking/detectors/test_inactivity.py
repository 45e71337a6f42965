from __future__ import annotations

import datetime as dt
import json

import geopandas as gpd
import pandas as pd
import pytest
from day_kernel_checks import assert_day_pieces_give, concat_findings
from factories import make_pings, offset_m

from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.detect import DetectorInputs, run_detectors
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.inactivity import (
    activity_span,
    advance_inactivity,
    detect_inactivity,
    last_fixes,
    merge_activity_spans,
)
from tracking.trips import detect_trips

D = dt.date
AS_OF = D(2024, 4, 9)  # the data runs from 2024-01-01 to 2024-04-09: 100 local days


def fix(vehicle: str, day: str, meter: str | None = "free", hour: int = 15) -> dict:
    lat, lon = offset_m(10.0, 10.0)
    return {
        "vehicle_id": vehicle,
        "timestamp": f"{day}T{hour:02d}:00:00Z",
        "lat": lat,
        "lon": lon,
        "meter": meter,
    }


FEED = [
    fix("witness", str(D(2024, 1, 1) + dt.timedelta(days=k)), "occupied", hour=12)
    for k in range(100)
]
"""A vehicle outside the judged fleet carrying a passenger every day: the feed is live."""


def data(*extra: dict) -> pd.DataFrame:
    rows = [
        *FEED,
        fix("busy", "2024-01-01", "occupied"),
        fix("busy", "2024-04-05", "occupied"),
        fix("busy", "2024-04-09", "free"),
        fix("idle", "2024-01-20", "occupied"),
        fix("idle", "2024-04-01", "off"),  # driven out of service: private use
        fix("livre", "2024-01-20", "occupied"),
        fix("livre", "2024-04-01", "free"),  # Livre at its stand, no fare yet: operating
        fix("nometer", "2024-04-08", None),
        fix("nometer_old", "2024-01-15", None),
        *extra,
    ]
    return make_pings(rows)


def fleet(*vehicles: str, **status: object) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "vehicle_id": v,
                "status": status.get("status", "active"),
                "status_since": status.get("status_since"),
                "status_until": status.get("status_until"),
            }
            for v in vehicles
        ]
    )


def ids(found: pd.DataFrame) -> list[str]:
    return sorted(found["vehicle_id"])


class TestDetectInactivity:
    def test_idle_vehicles_are_found(self) -> None:
        """Last in service 80 days ago (driven since with the meter off), or sent its last
        fix 85 days ago: found. One Livre 8 days ago, without a fare since January, operates
        (tracking.frames.in_service, as the presence at a stand)."""
        found = detect_inactivity(
            data(), fleet("busy", "idle", "livre", "nometer", "nometer_old"), as_of=AS_OF
        )
        assert ids(found) == ["idle", "nometer_old"]
        validate_findings(found)
        assert list(found.columns) == list(FINDING_COLUMNS)

    def test_evidence(self) -> None:
        """Evidence: the last operation's fix and time, the days counted and the threshold."""
        found = detect_inactivity(data(), fleet("idle"), as_of=AS_OF)
        f = found.iloc[0]
        d = f["details"]
        json.dumps(d)
        assert d["last_operation_at"] == "2024-01-20T15:00:00Z"
        assert d["last_operation_source"] == "occupied_fix" and d["never_seen"] is False
        assert d["idle_days"] == 80 and d["excused_days"] == 0 and d["counted_idle_days"] == 80
        assert d["window"] == {"first_day": "2024-01-01", "last_day": "2024-04-09"}
        assert d["thresholds"] == {"max_idle_days": 60, "min_feed_share": 0.25}
        assert d["feed_gap_days"] == 0
        assert d["fixes"][0]["row"] == len(FEED) + 4
        assert f["started_at"] == pd.Timestamp("2024-01-20T15:00:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-04-10T03:00:00Z")  # local midnight
        assert f["confidence"] == pytest.approx(0.6 + 0.35 * 20 / 60, abs=1e-4)
        assert f.geometry is not None

    def test_plain_fix_weighs_less(self) -> None:
        """Without meter data the last fix is the last operation, at 0.9 times the confidence."""
        f = detect_inactivity(data(), fleet("nometer_old"), as_of=AS_OF).iloc[0]
        assert f["details"]["last_operation_source"] == "fix"
        assert f["confidence"] == pytest.approx(0.9 * (0.6 + 0.35 * 25 / 60), abs=1e-4)

    @pytest.mark.parametrize(("day", "found"), [("2024-02-09", 0), ("2024-02-08", 1)])
    def test_more_than_max_idle_days(self, day: str, found: int) -> None:
        """Exactly 60 idle days is lawful; 61 is not (art. 60 X: 'superior a 60 dias')."""
        pings = data(fix("edge", day, "occupied"))
        assert len(detect_inactivity(pings, fleet("edge"), as_of=AS_OF)) == found

    def test_never_seen_vehicle_in_a_long_window(self) -> None:
        """A fleet vehicle absent from 100 days of data is inactive, at lower confidence."""
        f = detect_inactivity(data(), fleet("ghost"), as_of=AS_OF).iloc[0]
        assert f["details"]["last_operation_at"] is None and f["details"]["never_seen"]
        assert f["details"]["idle_days"] == 100
        assert f["details"]["fixes"] == [] and f.geometry is None
        assert f["started_at"] == pd.Timestamp("2024-01-01T03:00:00Z")
        assert f["confidence"] == pytest.approx(0.7 * (0.6 + 0.35 * 40 / 60), abs=1e-4)

    def test_a_prefixo_the_data_writes_otherwise_is_not_judged(self) -> None:
        """The fixes of fleet vehicle "123" come as "000123" (a tracker configured apart): not
        judged, though under its own id it never operated, whether the id is in the activity
        or, for a group of vehicles, in ``off_fleet``; a form no fleet id has is no excuse."""
        pings = data(fix("000123", "2024-01-01", "free"), fix("000123", "2024-04-08", "occupied"))
        registry = fleet("123", "ghost")
        assert ids(detect_inactivity(pings, registry, as_of=AS_OF)) == ["ghost"]
        assert ids(detect_inactivity(data(), registry, as_of=AS_OF)) == ["123", "ghost"]
        span = activity_span(pings, as_of=AS_OF, timezone="America/Sao_Paulo")
        group = {"as_of": AS_OF, "data_span": span}
        assert ids(detect_inactivity(pings.iloc[:0], registry, **group)) == ["123", "ghost"]
        off_fleet = frozenset({"000123", "busy", "idle", "nometer", "nometer_old", "G-1"})
        found = detect_inactivity(pings.iloc[:0], registry, off_fleet=off_fleet, **group)
        assert ids(found) == ["ghost"]
        _, live = advance_inactivity(None, pings, fleet=registry, final=True)
        assert ids(live) == ["ghost"]

    def test_groups_with_the_run_span_give_the_whole(self) -> None:
        """Vehicles judged by groups with the run's ``data_span``: the whole run's findings."""
        pings = data()
        whole = detect_inactivity(pings, fleet("idle", "nometer_old", "ghost"), as_of=AS_OF)
        span = activity_span(pings, as_of=AS_OF, timezone="America/Sao_Paulo")
        groups = [
            (pings.loc[pings["vehicle_id"].isin(["busy", "idle"])], fleet("idle")),
            (pings.loc[pings["vehicle_id"].eq("nometer_old")], fleet("nometer_old")),
            (pings.iloc[:0], fleet("ghost")),  # no fix at all: the run's window
        ]
        found = [detect_inactivity(p, f, as_of=AS_OF, data_span=span) for p, f in groups]
        assert [ids(f) for f in found] == [["idle"], ["nometer_old"], ["ghost"]]
        joined = concat_findings(found).sort_values("vehicle_id")
        assert joined["details"].tolist() == whole.sort_values("vehicle_id")["details"].tolist()
        alone = detect_inactivity(groups[1][0], fleet("nometer_old"), as_of=AS_OF)
        assert alone.empty  # its own span alone is one day

    def test_short_window_accuses_no_one(self) -> None:
        """With 30 days of data, an absent vehicle may have run before: nothing is found."""
        pings = make_pings([fix("busy", "2024-03-11"), fix("busy", "2024-04-09")])
        assert detect_inactivity(pings, fleet("ghost", "busy"), as_of=AS_OF).empty

    def test_data_since_widens_the_window(self) -> None:
        """A feed known to start earlier makes a short window long enough."""
        pings = make_pings([fix("busy", "2024-03-11"), fix("busy", "2024-04-09")])
        found = detect_inactivity(pings, fleet("ghost"), as_of=AS_OF, data_since=D(2024, 1, 1))
        assert ids(found) == ["ghost"]

    @pytest.mark.parametrize(
        ("status", "expected"),
        [
            ({"status": "reserved", "status_since": D(2024, 2, 1)}, []),
            (
                {
                    "status": "reserved",
                    "status_since": D(2024, 2, 1),
                    "status_until": D(2024, 2, 10),
                },
                ["idle"],
            ),
            ({"status": "suspended"}, []),
            ({"status": "active"}, ["idle"]),
        ],
        ids=["reserva-open", "reserva-10-days", "suspended", "active"],
    )
    def test_reserva_and_barring_statuses_excuse_their_days(
        self, status: dict, expected: list[str]
    ) -> None:
        """Days under reserva (or suspension) do not count; the rest still does."""
        found = detect_inactivity(data(), fleet("idle", **status), as_of=AS_OF)
        assert ids(found) == expected
        if expected and status["status"] == "reserved":
            d = found.iloc[0]["details"]
            assert d["excused_days"] == 10 and d["counted_idle_days"] == 70
            assert d["excusing_status"]["status_until"] == "2024-02-10"

    def test_data_after_as_of_is_ignored(self) -> None:
        """Operation after as_of does not excuse; the window ends at as_of."""
        pings = data(fix("idle", "2024-04-05", "occupied"))
        found = detect_inactivity(pings, fleet("idle"), as_of=D(2024, 4, 1))
        assert found.iloc[0]["details"]["idle_days"] == 72

    def test_days_after_the_data_are_not_counted(self) -> None:
        """An as_of later than the data counts idle days only up to the data's last day."""
        found = detect_inactivity(data(), fleet("idle"), as_of=D(2024, 6, 1))
        assert found.iloc[0]["details"]["window"]["last_day"] == "2024-04-09"
        assert found.iloc[0]["details"]["idle_days"] == 80

    def test_trips_as_activity(self) -> None:
        """Given trips, the last trip's end is the last operation."""
        rows = [fix("busy", "2024-01-01", "occupied"), fix("busy", "2024-04-09", "occupied")]
        rows += [
            fix("idle", "2024-01-20", "occupied"),
            fix("idle", "2024-01-20", "occupied", hour=16),
        ]
        trips = detect_trips(make_pings(rows))  # trips alone: their days are the feed
        found = detect_inactivity(
            trips, fleet("idle"), as_of=AS_OF, data_since=D(2024, 1, 1), min_feed_share=0
        )
        assert found.iloc[0]["details"]["last_operation_source"] == "trip"
        assert found.iloc[0]["details"]["last_operation_at"] == "2024-01-20T16:00:00Z"

    def test_empty_activity(self) -> None:
        """No data at all: no window, no finding."""
        assert detect_inactivity(data().iloc[:0], fleet("ghost"), as_of=AS_OF).empty

    @pytest.mark.parametrize(
        ("kw", "match"),
        [
            ({"max_idle_days": 0}, "max_idle_days"),
            ({"max_idle_days": 1.5}, "max_idle_days"),
            ({"as_of": pd.Timestamp("2024-04-09")}, "as_of"),
            ({"timezone": "Nowhere/City"}, "fuso"),
        ],
    )
    def test_bad_options_raise(self, kw: dict, match: str) -> None:
        """Bad thresholds, dates or zones are refused by name."""
        options = {"as_of": AS_OF, **kw}
        with pytest.raises(DetectorThresholdError, match=match):
            detect_inactivity(data(), fleet("idle"), **options)

    def test_activity_without_times_raises(self) -> None:
        """A frame that is neither pings nor trips is refused."""
        with pytest.raises(DetectorInputError, match="timestamp"):
            detect_inactivity(pd.DataFrame({"vehicle_id": ["a"]}), fleet("a"), as_of=AS_OF)


def _stream() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Several vehicles over 100 days: busy, idle, unmetered, reserved, never seen."""
    extra = [
        fix("reserved", "2024-01-02", "occupied"),
        fix("reserved", "2024-04-02", "free"),
        fix("late", "2024-01-03", "occupied"),
        fix("late", "2024-03-20", "occupied"),  # idle again, but within 60 days
        fix("busy", "2024-02-10", "occupied", hour=2),  # 23:00 local the day before
        fix("idle", "2024-03-31", "occupied", hour=2),  # operated again (local 30 Mar)
    ]
    weekly = pd.date_range("2024-01-08", "2024-04-08", freq="7D")
    extra += [fix("busy", d.date().isoformat(), "off", hour=20) for d in weekly]  # private use
    pings = data(*extra)
    registry = pd.concat(
        [
            fleet("busy", "idle", "nometer", "nometer_old", "late", "ghost"),
            fleet("reserved", status="reserved", status_since="2024-02-01"),
        ],
        ignore_index=True,
    )
    return pings, registry


def _replay(
    pings: pd.DataFrame, registry: pd.DataFrame, cuts: list[int], **kw: object
) -> gpd.GeoDataFrame:
    """The kernel fed the fixes in time order, in pieces cut at ``cuts``, then closed."""
    order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
    bounds = [0, *cuts, len(order)]
    state: dict | None = None
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        state, found = advance_inactivity(state, order.iloc[lo:hi], fleet=registry, **kw)
        state = json.loads(json.dumps(state))
        parts.append(found)
    _, found = advance_inactivity(state, order.iloc[:0], fleet=registry, final=True, **kw)
    return concat_findings([*parts, found])


def _reference(pings: pd.DataFrame, registry: pd.DataFrame, **kw: object) -> gpd.GeoDataFrame:
    """The batch over all the fixes, as of each day a fix closes and the last day; once each."""
    days = sorted(set(pings["timestamp"].dt.tz_convert("America/Sao_Paulo").dt.date))
    judged = [d - dt.timedelta(days=1) for d in days[1:]] + [days[-1]]
    emitted: dict[str, object] = {}
    out = []
    for as_of in judged:
        found = detect_inactivity(pings, registry, as_of=as_of, **kw)
        new = [
            (v, s) != (v, emitted.get(v))
            for v, s in zip(found["vehicle_id"], found["started_at"], strict=True)
        ]
        emitted.update(zip(found["vehicle_id"], found["started_at"], strict=True))
        out.append(found.loc[new])
    return concat_findings(out)


class TestInactivityKernel:
    def test_pieces_give_the_batch_of_each_closed_day(self) -> None:
        """Fix by fix, in one piece or random pieces: the batch as of each closed day, once."""
        pings, registry = _stream()
        reference = _reference(pings, registry)
        assert set(reference["vehicle_id"]) == {"ghost", "nometer_old", "idle", "late", "nometer"}
        assert_day_pieces_give(
            lambda cuts: _replay(pings, registry, cuts), len(pings), reference, min_findings=5
        )

    def test_reserva_excuses_live_as_in_batch(self) -> None:
        """A reserva excuses live as in batch: 98 idle days, 29 counted (threshold passed)."""
        pings, registry = _stream()
        reference = _reference(pings, registry, max_idle_days=30)
        assert "reserved" not in set(reference["vehicle_id"])
        assert "busy" in set(reference["vehicle_id"])
        assert_day_pieces_give(
            lambda cuts: _replay(pings, registry, cuts, max_idle_days=30),
            len(pings),
            reference,
            seeds=2,
        )

    def test_never_operating_vehicle_waits_for_the_window(self) -> None:
        """A vehicle never seen is accused only once the data window alone exceeds the limit."""
        days = ("2024-01-01", "2024-02-01", "2024-03-01", "2024-03-05")
        pings = make_pings([fix("busy", d, "occupied") for d in days])
        state = None
        out = []
        for k in range(len(pings)):
            state, found = advance_inactivity(  # one vehicle's fixes: the feed not judged
                state, pings.iloc[k : k + 1], fleet=fleet("busy", "ghost"), min_feed_share=0
            )
            out.append(found)
        assert [len(f) for f in out] == [0, 0, 0, 1]
        assert out[3]["vehicle_id"].tolist() == ["ghost"]
        assert out[3]["details"].iloc[0]["as_of"] == "2024-03-04"

    def test_late_and_repeated_fixes_are_skipped(self) -> None:
        """A fix not later than its vehicle's latest changes nothing."""
        pings = make_pings([fix("a", "2024-01-01", "occupied"), fix("a", "2024-03-20")])
        state, _ = advance_inactivity(None, pings.iloc[1:], fleet=fleet("a"))
        again, found = advance_inactivity(state, pings, fleet=fleet("a"))
        assert again == state and len(found) == 0

    def test_state_stays_small(self) -> None:
        """At most four fixes per vehicle and one count per day are kept."""
        pings, registry = _stream()
        state, _ = advance_inactivity(None, pings, fleet=registry)
        for v in state["vehicles"].values():
            assert set(v) <= {"last", "in_service", "occupied", "day"}
        size = 300 * (len(state["vehicles"]) + 1) + 20 * len(state["feed"])
        assert len(json.dumps(state)) < size

    def test_bad_threshold_raises(self) -> None:
        """``max_idle_days`` must be a positive integer."""
        pings, registry = _stream()
        with pytest.raises(DetectorThresholdError, match="max_idle_days"):
            advance_inactivity(None, pings, fleet=registry, max_idle_days=0, final=True)


def registry_row(vehicle: str, **columns: object) -> dict:
    return {"vehicle_id": vehicle, "status": "active", **columns}


class TestWhatTheVehicleCouldNotHaveDone:
    """Days on which the prefixo could not have been operating never count (art. 60 X)."""

    @pytest.mark.parametrize(
        ("issued", "expected"),
        [(D(2024, 4, 3), []), (D(2024, 2, 10), []), (D(2024, 2, 9), ["ghost"])],
    )
    def test_a_new_prefixo_counts_from_its_first_alvara(
        self, issued: dt.date, expected: list[str]
    ) -> None:
        """Never seen, first alvará 6 or 60 days before as_of: lawful; 61 days: found."""
        registry = pd.DataFrame([registry_row("ghost", alvara_first_issued_on=issued)])
        found = detect_inactivity(data(), registry, as_of=AS_OF)
        assert ids(found) == expected
        if expected:
            d = found.iloc[0]["details"]
            assert d["idle_days"] == 61
            assert d["counted_from"] == {"day": "2024-02-09", "because": "alvara_first_issued_on"}
            assert found.iloc[0]["started_at"] == pd.Timestamp("2024-02-09T03:00:00Z")

    def test_a_return_to_active_counts_from_its_day(self) -> None:
        """Active again since 20 days before as_of: the 80 idle days before do not count."""
        registry = pd.DataFrame([registry_row("idle", status_since=D(2024, 3, 20))])
        assert detect_inactivity(data(), registry, as_of=AS_OF).empty
        earlier = pd.DataFrame([registry_row("idle", status_since=D(2023, 12, 1))])
        d = detect_inactivity(data(), earlier, as_of=AS_OF).iloc[0]["details"]
        assert d["idle_days"] == 80 and d["counted_from"]["because"] == "window"

    @pytest.mark.parametrize(
        ("columns", "expected"),
        [
            ({"alvara_valid_until": D(2024, 1, 25)}, []),
            ({"inspection_valid_until": D(2024, 1, 25)}, []),
            ({"termo_recolhido_since": D(2024, 1, 25)}, []),
            ({"alvara_valid_until": D(2024, 3, 1)}, []),  # 39 days expired, 41 counted
            ({"alvara_valid_until": D(2024, 3, 25)}, ["idle"]),  # 15 days expired, 65 counted
            ({"alvara_valid_until": D(2024, 5, 1)}, ["idle"]),  # valid throughout
        ],
    )
    def test_expired_documents_excuse_their_days(self, columns: dict, expected: list[str]) -> None:
        """After the alvará or the vistoria expired, or the Termo was recolhido, not operating
        is complying (art. 58 XII, III): those days are excused."""
        registry = pd.DataFrame([registry_row("idle", **columns)])
        found = detect_inactivity(data(), registry, as_of=AS_OF)
        assert ids(found) == expected
        if columns.get("alvara_valid_until") == D(2024, 3, 25):
            d = found.iloc[0]["details"]
            assert d["excused_days"] == 15 and d["counted_idle_days"] == 65
            assert d["excusing_documents"] == [
                {"reason": "alvara_expired", "alvara_valid_until": "2024-03-25"}
            ]
            assert d["excusing_status"] is None

    def test_excusing_periods_are_counted_once(self) -> None:
        """A suspension (25 Mar-5 Apr) and an expired alvará (from 1 Apr) over the same days
        excuse 16 days, not 21: 64 of the 80 idle days count."""
        registry = pd.DataFrame(
            [
                registry_row(
                    "idle",
                    status="suspended",
                    status_since=D(2024, 3, 25),
                    status_until=D(2024, 4, 5),
                    alvara_valid_until=D(2024, 3, 31),
                )
            ]
        )
        d = detect_inactivity(data(), registry, as_of=AS_OF).iloc[0]["details"]
        assert d["excused_days"] == 16 and d["counted_idle_days"] == 64
        assert d["excusing_status"]["status"] == "suspended"
        assert [e["reason"] for e in d["excusing_documents"]] == ["alvara_expired"]


class TestUnmeteredVehicleOnTheStreets:
    """Fixes without a meter are no evidence of inactivity (art. 60 X needs it shown)."""

    def rows(self) -> list[dict]:
        rows = [fix("busy", "2024-01-01", "occupied"), fix("busy", "2024-04-09", "occupied")]
        for day in pd.date_range("2024-01-01", "2024-04-09", freq="D"):
            for k in range(4):  # drives 300 m a minute, never stopping: no stop, no trip
                lat, lon = offset_m(300.0 * k, 0.0)
                stamp = day + pd.Timedelta(hours=15, minutes=k)
                rows.append(
                    {
                        "vehicle_id": "moving",
                        "timestamp": stamp.isoformat() + "Z",
                        "lat": lat,
                        "lon": lon,
                        "meter": None,
                    }
                )
        return rows

    def test_trips_with_the_last_fixes_of_unmetered_vehicles(self) -> None:
        """Given trips, a vehicle without meter data is idle only from its last fix."""
        pings = make_pings(self.rows())
        trips = detect_trips(pings)
        assert "moving" not in set(trips["vehicle_id"])
        seen = last_fixes(pings, as_of=AS_OF)
        assert seen.dropna(subset=["timestamp"])["vehicle_id"].tolist() == ["busy", "moving"]
        registry = fleet("busy", "moving")
        judge = {"as_of": AS_OF, "min_feed_share": 0}  # trips alone: the feed not judged
        assert detect_inactivity(trips, registry, sightings=seen, **judge).empty
        early = last_fixes(pings, as_of=D(2024, 1, 3))
        f = detect_inactivity(trips, registry, sightings=early, **judge).iloc[0]
        assert f["details"]["last_operation_source"] == "fix"
        assert f["details"]["last_operation_at"] == "2024-01-03T15:03:00Z"

    def test_each_vehicle_gives_its_last_fix_in_service_and_its_last_fix(self) -> None:
        """A vehicle's last fix whose meter is not off: free, occupied or unknown (its tracker
        may stop sending the meter while it keeps working); one only off has none."""
        rows = self.rows() + [
            fix("mixed", "2024-02-01", None),
            fix("mixed", "2024-02-02", "free"),
            fix("mixed", "2024-02-03", None),
            fix("mixed", "2024-02-04", "off"),
            fix("private", "2024-02-05", "off"),
        ]
        seen = last_fixes(make_pings(rows), as_of=AS_OF).set_index("vehicle_id")
        assert seen.index.tolist() == ["busy", "mixed", "moving", "private"]
        assert seen.loc["busy", "timestamp"] == pd.Timestamp("2024-04-09T15:00:00Z")
        assert pd.isna(seen.loc["private", "timestamp"])
        assert seen.loc["mixed", "timestamp"] == pd.Timestamp("2024-02-03T15:00:00Z")
        assert seen.loc["mixed", "last_fix_at"] == pd.Timestamp("2024-02-04T15:00:00Z")
        assert seen.loc["moving", "timestamp"] == pd.Timestamp("2024-04-09T15:03:00Z")

    def test_run_detectors_gives_them(self) -> None:
        """A run (trips and pings) does not accuse a vehicle seen moving without a meter."""
        pings = make_pings(self.rows())
        inputs = DetectorInputs(
            pings=pings,
            visits=pd.DataFrame(),
            trips=detect_trips(pings),
            stops=pd.DataFrame(),
            stands=gpd.GeoDataFrame(),
            fleet=fleet("busy", "moving", "ghost"),
            as_of=AS_OF,
        )
        found, _ = run_detectors(  # busy's two days of rides alone: the feed not judged
            inputs, kinds=("inactivity",), thresholds={"inactivity": {"min_feed_share": 0}}
        )
        assert ids(found) == ["ghost"]


def _daily(vehicles: list[str], first: str, last: str, meter: str = "occupied") -> list[dict]:
    """A fix of each vehicle on each day from ``first`` to ``last``."""
    days = pd.date_range(first, last, freq="D")
    return [fix(v, d.date().isoformat(), meter) for d in days for v in vehicles]


class TestSilentTracker:
    """An independent check had two vehicles proposed for cassação (art. 60 X) from missing
    data: one whose tracker stopped sending the meter while it kept driving, one whose tracker
    fell silent after its last ride while the rest of the fleet kept reporting."""

    @staticmethod
    def rows() -> list[dict]:
        days = [str(D(2024, 1, 1) + dt.timedelta(days=k)) for k in range(100)]
        rows = list(FEED)
        for vehicle in ("nometer_later", "silent", "parked"):
            rows += [fix(vehicle, day, "occupied") for day in days[:10]]
        rows += [fix("nometer_later", day, None) for day in days[10:]]
        rows += [fix("parked", day, "off") for day in days[10:]]  # seen every day, meter off
        return rows

    def test_a_meter_that_stops_reporting_is_no_idleness(self) -> None:
        """Driving every day with the meter's cell empty: no finding, from pings or trips."""
        pings = make_pings(self.rows())
        registry = fleet("nometer_later", "silent", "parked")
        assert "nometer_later" not in ids(detect_inactivity(pings, registry, as_of=AS_OF))
        trips = detect_trips(pings)
        seen = last_fixes(pings, as_of=AS_OF)
        found = detect_inactivity(trips, registry, as_of=AS_OF, sightings=seen)
        assert "nometer_later" not in ids(found)

    def test_a_tracker_silent_after_the_last_ride_is_marked(self) -> None:
        """Silent for 90 days after its last ride: found, ``silent`` (review, not proposal);
        seen every day with the meter off: found, not silent."""
        pings = make_pings(self.rows())
        registry = fleet("nometer_later", "silent", "parked")
        found = detect_inactivity(pings, registry, as_of=AS_OF).set_index("vehicle_id")
        assert sorted(found.index) == ["parked", "silent"]
        silent, parked = found.loc["silent", "details"], found.loc["parked", "details"]
        assert silent["silent"] is True and silent["seen_idle_days"] == 0
        assert silent["last_fix_at"] == "2024-01-10T15:00:00Z"
        assert parked["silent"] is False and parked["seen_idle_days"] == 90
        assert parked["counted_idle_days"] == 90
        state, live = advance_inactivity(None, pings, fleet=registry, final=True)
        live = live.set_index("vehicle_id")
        assert live.loc["silent", "details"]["silent"] is True
        assert live.loc["parked", "details"]["silent"] is False


class TestFeedGaps:
    """Days the feed was down or partial are not days a vehicle did not operate (art. 60 X)."""

    def test_a_fleet_wide_outage_is_not_idleness(self) -> None:
        """Three taxis ride on 2 Jan; the feed is silent until 20 Mar, when one reports: the
        two others are not accused (77 gap days of their 78); judging every day would."""
        pings = make_pings(
            [fix(v, "2024-01-02", "occupied") for v in ("a", "b", "c")]
            + [fix("a", "2024-03-20", "occupied")]
        )
        registry = fleet("a", "b", "c")
        assert detect_inactivity(pings, registry, as_of=D(2024, 3, 20)).empty
        unjudged = detect_inactivity(pings, registry, as_of=D(2024, 3, 20), min_feed_share=0)
        assert ids(unjudged) == ["b", "c"]

    def test_a_vehicle_silent_while_the_feed_is_live_is_idle(self) -> None:
        """After the outage, a and c report every day for 70 days and b does not: b is found,
        its 77 gap days shown and not counted (148 idle, 71 counted)."""
        rows = [fix(v, "2024-01-02", "occupied") for v in ("a", "b", "c")]
        rows += _daily(["a", "c"], "2024-03-20", "2024-05-29")
        found = detect_inactivity(make_pings(rows), fleet("a", "b", "c"), as_of=D(2024, 5, 29))
        assert ids(found) == ["b"]
        d = found.iloc[0]["details"]
        assert (d["idle_days"], d["feed_gap_days"], d["counted_idle_days"]) == (148, 77, 71)

    @pytest.mark.parametrize(("reporting", "accused"), [(1, 0), (6, 14)])
    def test_a_partial_feed(self, reporting: int, accused: int) -> None:
        """Twenty taxis report for 10 days, then only ``reporting`` of them for 90: with one
        (a sample of the fleet, 5 % of the busiest day) the others are not accused; with six
        (30 %, at least a quarter) the feed is live and the 14 silent ones are."""
        fleet_ids = [f"v{k:02d}" for k in range(20)]
        rows = _daily(fleet_ids, "2024-01-01", "2024-01-10")
        rows += _daily(fleet_ids[:reporting], "2024-01-11", "2024-04-09")
        found = detect_inactivity(make_pings(rows), fleet(*fleet_ids), as_of=AS_OF)
        assert len(found) == accused

    def test_live_gives_the_batch_across_an_outage(self) -> None:
        """The kernel counts the feed day by day as the batch does."""
        rows = [fix(v, "2024-01-02", "occupied") for v in ("a", "b", "c")]
        rows += _daily(["a", "c"], "2024-03-20", "2024-05-29")
        pings, registry = make_pings(rows), fleet("a", "b", "c")
        reference = _reference(pings, registry)
        assert set(reference["vehicle_id"]) == {"b"}
        assert_day_pieces_give(
            lambda cuts: _replay(pings, registry, cuts), len(pings), reference, seeds=2
        )

    def test_groups_of_vehicles_give_the_fleet_s_span(self) -> None:
        """The spans of disjoint groups merged are the span of all (an engine's groups)."""
        pings = data()
        whole = activity_span(pings, as_of=AS_OF, timezone="America/Sao_Paulo")
        parts = [
            activity_span(g, as_of=AS_OF, timezone="America/Sao_Paulo")
            for _, g in pings.groupby(pings["vehicle_id"].isin(["busy", "idle"]))
        ]
        assert merge_activity_spans(parts) == whole

    def test_bad_share_raises(self) -> None:
        with pytest.raises(DetectorThresholdError, match="min_feed_share"):
            detect_inactivity(data(), fleet("idle"), as_of=AS_OF, min_feed_share=1.5)
