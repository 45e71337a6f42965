"""Real Porto trips replayed against the 63 real Porto stands: boardings against the labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.pipeline import analyze_pings
from stands.layers import read_porto_stands
from stands.porto_eval import boarding_recall
from tracking.porto import read_porto_trips

DATA = Path(__file__).resolve().parents[2] / "data" / "porto"


@pytest.fixture(scope="module")
def porto():
    return read_porto_trips(DATA / "derived" / "trips_combined.csv")


class TestBoardingRecall:
    # Geometric ceiling measured outside the project: about 73 %, 96 % and 97 %.
    @pytest.mark.parametrize(("radius_m", "ceiling"), [(50, 0.72), (100, 0.95), (150, 0.96)])
    def test_every_first_fix_inside_is_a_boarding(self, porto, radius_m, ceiling):
        """Every B trip whose first fix lies inside its labelled stand boards at that stand."""
        pings, rejected, labels = porto
        stands = read_porto_stands(DATA / "derived" / "taxi_stands.csv", radius_m=radius_m)
        result = analyze_pings(pings, rejected, stands, kinds=())
        r = boarding_recall(labels, pings, result.visits, result.trips, stands)
        assert r["labelled"] == 916
        assert r["detected_inside"] == r["first_fix_inside"]
        assert r["ceiling"] >= ceiling
        assert r["recall"] == pytest.approx(r["ceiling"])
