"""Checks every kernel's tests share: any cutting of the input gives the batch findings."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from tracking.detectors.findings import write_findings_geojson
from tracking.detectors.kernel import TrackKernel, replay_in_pieces


def geojson_bytes(findings: gpd.GeoDataFrame) -> bytes:
    """Return ``findings.geojson`` of the findings, sorted by id (the contract file's bytes)."""
    ordered = findings.sort_values("finding_id", kind="stable").reset_index(drop=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "findings.geojson"
        write_findings_geojson(ordered, path)
        return path.read_bytes()


def assert_pieces_give_batch(
    kernel: TrackKernel,
    pings: pd.DataFrame,
    *,
    seeds: int = 4,
    min_findings: int = 1,
    **params: Any,
) -> gpd.GeoDataFrame:
    """Assert fix by fix, in random pieces and in one piece the findings are the batch's bytes.

    Returns the batch findings; at least ``min_findings`` of them, so the check cannot pass on
    an input where the rule never fires.
    """
    batch = kernel.detect(pings, **params)
    assert len(batch) >= min_findings, f"{kernel.kind}: {len(batch)} findings in the batch"
    expected = geojson_bytes(batch)
    n = len(pings)
    rng = np.random.default_rng(0)
    cuttings = [list(range(1, n)), []]
    cuttings += [
        sorted(rng.choice(np.arange(1, n), size=min(n - 1, k), replace=False).tolist())
        for k in rng.integers(1, max(2, n // 3), size=seeds)
    ]
    for cuts in cuttings:
        live = replay_in_pieces(kernel, pings, cuts, **params)
        assert geojson_bytes(live) == expected, f"{kernel.kind}: cut at {cuts[:10]}…"
    return batch
