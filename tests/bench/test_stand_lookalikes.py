"""bench/bench_stand_lookalikes.py: the stand detectors on look-alikes built apart from them.

A few cases of the independent check, through the real CLI: each rule it shaped keeps its
look-alike from being proposed, and the true cases stay proposed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_stand_lookalikes as bench  # noqa: E402

POA = bench.POA


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    out = tmp_path_factory.mktemp("lookalikes")
    stands, fleet = bench.write_world(out)
    return out, stands, fleet


@pytest.mark.parametrize(
    ("case", "kind", "proposed"),
    [
        ("red_light_in_B_hail_past", bench.USU, 0),  # OUTSIDE_MIN_STAY_S
        ("ten_12m_outside_noise10", bench.USU, 0),  # MIN_INSIDE_SHARE
        ("ten_12m_outside_noise20", bench.USU, 0),  # a short stay begun standing beside
        ("ten_20m_outside_noise15", bench.USU, 0),  # the meter came on driving through
        ("meter_misread_in_B", bench.USU, 0),  # a meter blip is no trip start
        ("fuel_queue", bench.ISF, 0),  # MIN_BOARDING_DAYS
        ("boarding_in_B", bench.USU, 1),
        ("dropoff_then_board_in_B", bench.USU, 1),
        ("corner_stand", bench.ISF, 4),
    ],
)
def test_the_case_is_proposed_as_it_should(
    world: tuple[Path, Path, Path], case: str, kind: str, proposed: int
) -> None:
    out, stands, fleet = world
    run = bench.run_case(case, 7, out, stands, fleet)["runs"][POA]
    assert "error" not in run, run
    assert sum(p["kind"] == kind for p in run["proposals"]) == proposed


def test_a_drift_the_receiver_reports_accuses_no_one(world: tuple[Path, Path, Path]) -> None:
    """Ten cars parked 10 m beside B, their GPS wandering 20 m for minutes: on this seed two
    are proposed when the tracker does not report its accuracy, none when it does."""
    out, stands, fleet = world
    for case, proposed in (("ten_10m_outside_drift20", 2), ("ten_10m_outside_drift20_acc", 0)):
        run = bench.run_case(case, 13, out, stands, fleet)["runs"][POA]
        assert "error" not in run, run
        assert sum(p["kind"] == bench.USU for p in run["proposals"]) == proposed, case
