"""What the look-alike benchmarks share: the `pontual` command, its CSV inputs, a run's outputs."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def pontual() -> Path:
    """The ``pontual`` command beside this Python, else the repo's virtual environment's."""
    here = Path(sys.executable).with_name("pontual")
    return here if here.exists() else ROOT / ".venv" / "bin" / "pontual"


def write_csv(path: Path, header: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
    """Write a CSV input of a run: the header, then the rows."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def analyze_outputs(res: Path, kinds: Collection[str]) -> dict[str, Any]:
    """The findings and proposals of ``kinds`` in the ``pontual analyze`` output ``res``.

    ``found`` holds the findings' properties, ``proposals`` the proposals, ``review`` the
    summary's findings listed for review (of every kind) and ``summary`` the whole summary.
    """
    geo = json.loads((res / "findings.geojson").read_text())
    found = [f["properties"] for f in geo["features"] if f["properties"]["kind"] in kinds]
    path = res / "proposals.json"
    proposals = json.loads(path.read_text()) if path.exists() else []
    summary = json.loads((res / "summary.json").read_text())
    return {
        "found": found,
        "proposals": [p for p in proposals if p["kind"] in kinds],
        "review": summary.get("findings_for_review", {}).get("findings", []),
        "summary": summary,
    }
