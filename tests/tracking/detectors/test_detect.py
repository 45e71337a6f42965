"""Running the detectors of a run: thresholds checked, kinds skipped for lack of input."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from factories import make_pings, offset_m

from engines.pipeline import analyze_pings
from tracking.detectors.detect import (
    DetectorInputs,
    ThresholdConfigError,
    check_thresholds,
    run_detectors,
    threshold_names,
)


def _stands():
    import geopandas as gpd
    import shapely

    lat0, lon0 = offset_m(-20, -20)
    lat1, lon1 = offset_m(20, 20)
    return gpd.GeoDataFrame(
        {
            "stand_id": ["A"],
            "name": ["A"],
            "capacity": pd.array([2], dtype="Int64"),
            "municipality": ["4314902"],
            "geometry": [shapely.box(lon0, lat0, lon1, lat1)],
        },
        crs=4326,
    )


def _gap_track():
    """Occupied, then 20 min of silence while 3 km away, still occupied."""
    rows = [("V1", 15 * k, *offset_m(100 * k, 0), "occupied", 1) for k in range(5)]
    rows += [("V1", 1260 + 15 * k, *offset_m(3000 + 100 * k, 0), "occupied", 1) for k in range(5)]
    return make_pings(rows)


class TestCheckThresholds:
    def test_unknown_kind(self):
        """A kind that does not exist is refused, naming the allowed kinds."""
        with pytest.raises(ThresholdConfigError, match="tipo de achado desconhecido 'speeding'"):
            check_thresholds({"speeding": {}})

    def test_unknown_parameter(self):
        """A misspelt threshold is refused, naming the detector's real thresholds."""
        with pytest.raises(ThresholdConfigError, match="max_gap_s"):
            check_thresholds({"tracking_gap": {"max_gap": 10}})

    def test_wired_inputs_are_not_thresholds(self):
        """Frames and the time zone are wired by the run, not set by a municipality."""
        assert "timezone" not in threshold_names("flag2_misuse")
        assert "max_gap_s" in threshold_names("tracking_gap")


class TestRunDetectors:
    def test_threshold_reaches_the_detector(self):
        """Raising tracking_gap's max_gap_s above the silence removes the finding."""
        pings = _gap_track()
        result = analyze_pings(pings, pd.DataFrame(), _stands(), kinds=())
        inputs = DetectorInputs(
            pings=pings,
            visits=result.visits,
            trips=result.trips,
            stops=result.stops,
            stands=_stands(),
        )
        found, _ = run_detectors(inputs, kinds=("tracking_gap",))
        assert list(found["kind"]) == ["tracking_gap"]
        found, _ = run_detectors(
            inputs, kinds=("tracking_gap",), thresholds={"tracking_gap": {"max_gap_s": 3600}}
        )
        assert found.empty

    def test_skipped_without_fleet_or_boundary(self):
        """Fleet and boundary detectors are reported as skipped, with the reason."""
        pings = _gap_track()
        result = analyze_pings(pings, pd.DataFrame(), _stands(), kinds=())
        inputs = DetectorInputs(
            pings=pings,
            visits=result.visits,
            trips=result.trips,
            stops=result.stops,
            stands=_stands(),
        )
        _, skipped = run_detectors(inputs)
        assert set(skipped) == {
            "habitual_absence",
            "operating_while_barred",
            "inactivity",
            "outside_municipality",
            "driver_not_allowed",
            "queue_jump",
        }
        assert "fleet" in skipped["inactivity"]
        assert "--drivers e --driver-links" in skipped["driver_not_allowed"]
        # queue_jump needs a fleet that tells which vehicles are not Táxis Acessíveis
        assert "táxis acessíveis" in skipped["queue_jump"]
        for accessible, judged in ((None, False), (True, False), (False, True)):
            fleet = pd.DataFrame({"vehicle_id": ["v1"], "accessible": [accessible]})
            _, skipped = run_detectors(replace(inputs, fleet=fleet), kinds=("queue_jump",))
            assert ("queue_jump" not in skipped) is judged
