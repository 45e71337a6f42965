"""habitual_absence on look-alikes an audit found accused: the queue beyond the stand's polygon,
a tracker silent while parked at the stand, private use of the car, no meter data."""

from __future__ import annotations

import datetime as dt
import json

import geopandas as gpd
import pandas as pd
import pytest
from factories import circle_stands, make_pings, make_track

from geo.cover import build_stand_cover, match_stands
from stands.visits import detect_visits
from tracking.detectors.habitual_absence import (
    UNMETERED_CONFIDENCE_FACTOR,
    advance_habitual_absence,
    detect_habitual_absence,
)

STANDS = circle_stands()
LICENCES = pd.DataFrame({"vehicle_id": ["A"], "stand_id": ["S1"]})
DAYS = 30
DAY_S = 86_400.0
# factories' time zero is 2024-03-04 12:00Z (09:00 local): day k starts there
AS_OF = dt.date(2024, 4, 2)


def _day(k: int, *, wait_at: float | None, silent: bool = False, meter: str = "free") -> list:
    """One working day: 6 rides far away; with ``wait_at``, a 40-min wait that many metres north
    of the stand's centre first (``silent``: the tracker silent during it, fixes 150 m before
    and after)."""
    t = k * DAY_S
    rows: list = []
    if wait_at is not None:
        if silent:
            rows += [(t + 15 * j, -2000 + 150 * j, 0.0, meter) for j in range(13)]  # to -150 m
            t += 15 * 12 + 2400
            rows += [(t, 150.0, 0.0, meter)]
        else:
            rows += [(t + 15 * j, 2000 - 150 * j, 0.0, meter) for j in range(13)]  # to 50 m
            rows += [(t + 180 + 15 * j, wait_at, 0.0, meter) for j in range(1, 161)]
            t += 180 + 2400
    for ride in range(6):  # rides 3-5 km north, each 10 min
        base = t + 600 + ride * 1500
        flag = "occupied" if meter == "free" else meter
        rows += [(base + 15 * j, 3000 + 100 * j, 500.0, flag) for j in range(40)]
    return rows


def _pings(days: list[list]) -> pd.DataFrame:
    rows = [r for day in days for r in day]
    return make_pings(make_track("A", [r[:3] for r in rows], meter=[r[3] for r in rows]))


def _visits(pings: pd.DataFrame) -> pd.DataFrame:
    cover = build_stand_cover(STANDS)
    p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
    memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
    return detect_visits(pings, memberships, stands=STANDS, max_gap_s=300.0)


def _detect(pings: pd.DataFrame, **kw: object) -> gpd.GeoDataFrame:
    kw.setdefault("as_of", AS_OF)
    return detect_habitual_absence(
        _visits(pings),
        LICENCES,
        pings,
        stands=STANDS,
        **kw,  # type: ignore[arg-type]
    )


class TestPresenceBeyondTheVisits:
    def test_queue_beyond_the_polygon_is_presence(self) -> None:
        """Waits every day 55 m from the centre of a 30 m stand: never a visit, yet present."""
        pings = _pings([_day(k, wait_at=55.0) for k in range(DAYS)])
        assert _visits(pings).empty
        assert _detect(pings).empty

    def test_waiting_farther_away_is_still_absence(self) -> None:
        """The same day, waiting 150 m away: absent (the positive control)."""
        pings = _pings([_day(k, wait_at=150.0) for k in range(DAYS)])
        found = _detect(pings)
        assert len(found) == 1
        assert found.iloc[0]["details"]["days_present"] == 0

    def test_silent_tracker_parked_at_the_stand_is_presence(self) -> None:
        """Ignition off at the stand (40 min without a fix, 150 m either side): present."""
        pings = _pings([_day(k, wait_at=0.0, silent=True) for k in range(DAYS)])
        assert _detect(pings).empty
        days = _detect(pings, silent_reach_m=100.0).iloc[0]["details"]["days"]
        assert not any(d["present"] for d in days)  # beyond the silent reach: absent

    def test_evidence_says_how(self) -> None:
        """A day present only through a near dwell says so in the day's visits."""
        pings = _pings([_day(k, wait_at=55.0 if k == 3 else None) for k in range(DAYS)])
        found = _detect(pings)
        days = found.iloc[0]["details"]["days"]
        present = [d for d in days if d["present"]]
        assert len(present) == 1 and present[0]["visits"][0]["how"] == "perto"
        assert found.iloc[0]["details"]["thresholds"]["reach_m"] == 50.0
        json.dumps(found.iloc[0]["details"])

    def test_kernel_day_by_day_gives_the_batch(self) -> None:
        """The live kernel fed each day's fixes finds the dwells as they come: no finding for
        the queue, the finding for the far wait, as the batch."""
        for wait_at, expected in ((55.0, 0), (150.0, 1)):
            pings = _pings([_day(k, wait_at=wait_at) for k in range(DAYS)])
            states: dict = {}
            found = []
            t0 = pings["timestamp"].min().normalize() + pd.Timedelta(hours=3)
            for k in range(DAYS + 1):
                lo, hi = t0 + pd.Timedelta(days=k), t0 + pd.Timedelta(days=k + 1)
                piece = pings.loc[(pings["timestamp"] >= lo) & (pings["timestamp"] < hi)]
                states, res = advance_habitual_absence(
                    states,
                    piece,
                    _visits(pings).iloc[:0],
                    licences=LICENCES,
                    as_of=AS_OF if k == DAYS else (lo - pd.Timedelta(hours=3)).date(),
                    final=k == DAYS,
                    stands=STANDS,
                )
                states = json.loads(json.dumps(states))
                found.append(res)
            got = pd.concat(found, ignore_index=True)
            assert len(got) == expected
            if expected:
                batch = _detect(pings, as_of=got.iloc[0]["ended_at"].date() - dt.timedelta(days=1))
                assert got.iloc[0]["details"] == batch.iloc[0]["details"]


class TestOperation:
    def test_meter_off_is_not_operating(self) -> None:
        """At the stand 4 days, then 26 days driving with the meter off (private use): 4
        operating days, no finding; the same 26 days with the meter on are absence."""
        at_stand = [_day(k, wait_at=0.0) for k in range(4)]
        private = _pings(at_stand + [_day(k, wait_at=None, meter="off") for k in range(4, DAYS)])
        assert _detect(private).empty
        working = _pings(at_stand + [_day(k, wait_at=None) for k in range(4, DAYS)])
        assert len(_detect(working)) == 1

    def test_without_meter_data_the_finding_is_for_review(self) -> None:
        """Without any meter value, a day the car moved counts, but the finding stays below
        the proposal floor (0.5) and says why."""
        metered = _detect(_pings([_day(k, wait_at=None) for k in range(DAYS)])).iloc[0]
        pings = _pings([_day(k, wait_at=None) for k in range(DAYS)]).assign(meter=None)
        found = _detect(pings).iloc[0]
        assert found["details"]["unmetered"] is True
        assert "unmetered" not in metered["details"]
        assert found["confidence"] == pytest.approx(
            metered["confidence"] * UNMETERED_CONFIDENCE_FACTOR
        )
        assert found["confidence"] < 0.5


def test_days_cruising_free_without_a_ride_are_operating_days_in_batch() -> None:
    """A licensee who drives every day with the meter free, never at its stand and never with
    a passenger, operates (as the live kernel and the supervisor's view read it: a fix not
    ``off``): the run's detectors find it absent on every such day, though it has no trip."""
    from engines.pipeline import analyze_pings
    from tracking.detectors.detect import DetectorInputs, run_detectors

    rows = [
        (k * DAY_S + 60 * j, 3000.0 + 50 * j, 500.0, "free") for k in range(DAYS) for j in range(60)
    ]
    pings = _pings([rows])
    result = analyze_pings(pings, pd.DataFrame(), STANDS, kinds=())
    assert result.trips.empty
    inputs = DetectorInputs(
        pings=pings,
        visits=result.visits,
        trips=result.trips,
        stops=result.stops,
        stands=STANDS,
        licences=LICENCES.assign(valid_from=pd.NaT, valid_until=pd.NaT),
        as_of=AS_OF,
    )
    found, _ = run_detectors(inputs, kinds=("habitual_absence",))
    (details,) = found["details"]
    assert (details["days_operating"], details["days_present"]) == (DAYS, 0)
