"""Compare live findings with batch findings (the batch == live tests of the detectors)."""

from __future__ import annotations

from collections.abc import Iterable

import geopandas as gpd
import pandas as pd

_CONTENT = ("kind", "vehicle_id", "stand_id", "started_at", "ended_at", "confidence", "details")


def concat_live(frames: Iterable[gpd.GeoDataFrame | None]) -> gpd.GeoDataFrame | None:
    """Concatenate the non-empty live outputs (None when there are none)."""
    kept = [f for f in frames if f is not None and len(f)]
    if not kept:
        return None
    return gpd.GeoDataFrame(pd.concat(kept, ignore_index=True), geometry="geometry", crs=4326)


def assert_same_findings(live: gpd.GeoDataFrame | None, batch: gpd.GeoDataFrame) -> None:
    """Live and batch give the same findings: ids, every content column and the geometry."""
    assert live is not None, "live emitted nothing"
    a = live.sort_values("finding_id").reset_index(drop=True)
    b = batch.sort_values("finding_id").reset_index(drop=True)
    assert a["finding_id"].tolist() == b["finding_id"].tolist()
    assert a["finding_id"].is_unique
    for column in _CONTENT:
        assert a[column].tolist() == b[column].tolist(), column
    same = [
        (x is None and y is None) or (x is not None and y is not None and x.equals(y))
        for x, y in zip(a.geometry, b.geometry, strict=True)
    ]
    assert all(same)
