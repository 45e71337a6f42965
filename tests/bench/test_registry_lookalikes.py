"""bench/bench_registry_lookalikes.py: registry and tracker detectors on look-alikes built apart
from them, through the CLI.

The cases an independent check found proposed, beside true cases of the same kinds: the look-
alikes give no accusation (a finding only listed for review is none), the true ones are found
for their reason and proposed. Background vehicles are accused of nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_registry_lookalikes as bench  # noqa: E402

WORLDS = {
    # parked with the meter on; a badge glitch; with true cases of both kinds
    "registry": ["OB1", "OB15", "DR1", "DR19"],
    # a silent tracker, a meter that stopped reporting; idle and seen: found
    "inactivity": ["IN1", "IN2", "IN3"],
    "stands": ["HA1", "HA3"],
}


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_no_false_accusation_and_no_miss(world: str, tmp_path: Path) -> None:
    run = bench.run_world(world, WORLDS[world], 7, tmp_path)
    assert "error" not in run, run.get("error")
    lines = []
    for name in WORLDS[world]:
        mine = [f for f in run["found"] if f["vehicle_id"] == name]
        lines += bench.judge(name, bench.CASES[name], mine, run)
    background = [f for f in run["found"] if f["vehicle_id"] not in bench.CASES]
    lines += [bench.describe(f, run) for f in background if not bench._fate(f, run)[1]]
    assert lines == []
