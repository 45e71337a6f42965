"""bench/bench_absence_lookalikes.py: the absence detectors on look-alikes built apart from them.

A few cases of the independent check, through the real CLI: the true cases are proposed under
their article; the look-alikes once proposed (a quiet stand whose tracker sleeps while parked, a
meter stuck on Livre, a taxi back from holiday without a fare yet) and a vacation are not.
Background vehicles are accused of nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_absence_lookalikes as bench  # noqa: E402

WORLDS = {
    "A": ["A01", "A17", "A10", "A10b", "A06b"],  # vacation; a night driver every other night
    "A2": ["A22", "A22b"],  # a silent dwell at a quiet stand is presence
    "B": ["B01", "B05", "B08", "B19"],  # waiting or driving Livre is operating
}
ACCUSED = {"A01": "art. 49", "A17": "art. 28, § 2º", "B01": "art. 60, X", "B05": "art. 60, X"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run each world once with its cases (world B with its background cruisers)."""
    out = tmp_path_factory.mktemp("absence")
    return {w: bench.run_world(w, cases, 7, out) for w, cases in WORLDS.items()}


@pytest.mark.parametrize("case", [n for names in WORLDS.values() for n in names])
def test_the_case_is_accused_as_it_should(runs: dict[str, dict[str, Any]], case: str) -> None:
    """Check the case's accusation (or none) and that it has no false accusation or miss."""
    run = runs[bench.CASES[case].world]
    assert "error" not in run, run["error"]
    for kind in bench.KINDS:
        want = [ACCUSED[case]] if case in ACCUSED and kind == bench.CASES[case].kind else []
        assert bench.accusations(run, case, kind) == want, (kind, bench.findings(run, case))
    assert bench.judge(case, run) == []


def test_the_background_is_accused_of_nothing(runs: dict[str, dict[str, Any]]) -> None:
    """Check that world B's fourteen background cruisers are accused of nothing."""
    run = runs["B"]
    assert "error" not in run, run["error"]
    background = [n for n in run["cases"] if bench.CASES[n].background]
    assert len(background) == 14
    assert [line for n in background for line in bench.judge(n, run)] == []
