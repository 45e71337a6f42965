"""Checks the day kernels' tests share: any cutting of the input gives the same findings.

A day kernel (``tracking.detectors.day_kernel``) judges closed local days; its findings over a
stream are those of its batch function called for each closed day. A test gives ``replay(cuts)``
(the input fed in pieces cut at those positions, states through JSON, then ``final``) and the
reference built from the batch function; fix by fix, one piece and random pieces must all give
the reference's bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import geopandas as gpd
import numpy as np
import pandas as pd
from kernel_checks import geojson_bytes

from tracking.detectors.findings import empty_findings


def concat_findings(frames: Sequence[gpd.GeoDataFrame]) -> gpd.GeoDataFrame:
    """Concatenate findings frames (typed empty frame when all are empty)."""
    kept = [f for f in frames if len(f)]
    if not kept:
        return empty_findings()
    return gpd.GeoDataFrame(pd.concat(kept, ignore_index=True), geometry="geometry", crs=4326)


def assert_day_pieces_give(
    replay: Callable[[list[int]], gpd.GeoDataFrame],
    n: int,
    reference: gpd.GeoDataFrame,
    *,
    seeds: int = 4,
    min_findings: int = 1,
    step: int = 1,
    max_cuts: int | None = None,
) -> None:
    """Assert every cutting of an input of ``n`` items gives the reference findings' bytes.

    The cuttings: after every ``step`` items (1: item by item), none, and ``seeds`` random ones
    (at most ``max_cuts`` cuts each, when given).
    """
    assert len(reference) >= min_findings, f"{len(reference)} findings in the reference"
    expected = geojson_bytes(reference)
    rng = np.random.default_rng(0)
    cuttings: list[list[int]] = [list(range(step, n, step)), []]
    cuttings += [
        sorted(rng.choice(np.arange(1, n), size=min(n - 1, k), replace=False).tolist())
        for k in rng.integers(1, max(2, min(n // 3, max_cuts or n)), size=seeds)
    ]
    for cuts in cuttings:
        assert geojson_bytes(replay(cuts)) == expected, f"cut at {cuts[:10]}…"
