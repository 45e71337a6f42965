"""bench/bench_live_replay.py at a tiny size: it runs end to end and reports every batch kind.

Equality of live and batch is not asserted here (the script's table is for reading); the batch
column must be the demo's simulated analysis, and each row's counts must add up.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from api.demo_console import simulated_analysis

pytestmark = pytest.mark.slow  # a simulation, a batch run and ~100 live requests (minutes)

ROOT = Path(__file__).resolve().parents[2]
SEED, DAYS, PREFIXOS = 7, 4, 23  # the simulator's smallest fleet and period; hour-long requests
COLUMNS = ("batch", "live", "same", "only_batch", "only_live")
DAY_KINDS = ("habitual_absence",)
JUDGED_BY_DAY = ("habitual_absence", "inactivity", "illegal_stand_formation")


def _table(md: str) -> dict[str, dict[str, int]]:
    """Rows of the report's kind table, by kind (the count columns)."""
    rows: dict[str, dict[str, int]] = {}
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| kind | batch | live |"))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(COLUMNS, map(int, cells[1:6]), strict=True))
    return rows


@pytest.fixture(scope="module")
def report(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("live_replay") / "report.md"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_live_replay.py"),
            *("--seed", str(SEED), "--days", str(DAYS), "--prefixos", str(PREFIXOS)),
            *("--request-min", "60", "--url", database_url, "--report", str(out)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return out.read_text(encoding="utf-8")


def test_a_row_per_batch_kind_with_the_demo_counts(report: str) -> None:
    """Each kind the demo's batch finds has a row whose batch count is the demo's (every
    simulated driver link is loaded: Porto Alegre sets no cap on auxiliares)."""
    result, _, _ = simulated_analysis(seed=SEED, days=DAYS, n_prefixos=PREFIXOS)
    expected = result.findings["kind"].value_counts()
    rows = _table(report)
    assert len(expected) >= 3
    assert "driver_not_allowed" in expected and rows["driver_not_allowed"]["same"] > 0
    for kind, n in expected.items():
        assert rows[str(kind)]["batch"] == n
    assert rows["**total**"]["batch"] == len(result.findings)


def test_rows_add_up(report: str) -> None:
    """Same + only-batch is the batch count and same + only-live the live count, per kind."""
    rows = _table(report)
    for kind, r in rows.items():
        assert r["same"] + r["only_batch"] == r["batch"], kind
        assert r["same"] + r["only_live"] == r["live"], kind
    assert "fixes/s in `process_fixes`" in report


def test_live_finds_nothing_the_batch_does_not(report: str) -> None:
    """Outside the day rules, every live finding is a batch finding (same id)."""
    rows = _table(report)
    for kind, r in rows.items():
        if kind not in (*DAY_KINDS, "**total**"):
            assert r["only_live"] == 0, kind
    assert rows["**total**"]["same"] > 0


def test_common_findings_are_equal_outside_the_day_rules(report: str) -> None:
    """Same id, same details and confidence, for every kind not judged at each closed day."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| kind | batch | live |"))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in (*JUDGED_BY_DAY, "**total**"):
            continue
        for cell in cells[6:8]:
            equal, common = cell.split("/")
            assert equal == common, (cells[0], cell)
