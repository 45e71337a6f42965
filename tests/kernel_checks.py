"""Checks every kernel's tests share: any cutting of the input gives the batch findings."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from factories import make_pings, offset_m
from shapely import Polygon

from geo.cover import StandCover, build_stand_cover
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


def visits_csv(visits: pd.DataFrame) -> bytes:
    """Return ``stand_visits.csv`` of the visits in batch order (the contract file's columns)."""
    from tracking.frames import VISIT_COLUMNS

    ordered = visits.sort_values(["vehicle_id", "arrived_at", "stand_id"], kind="stable")
    return ordered.loc[:, list(VISIT_COLUMNS)].to_csv(index=False).encode()


def replay_visits(
    pings: pd.DataFrame,
    cuts: Sequence[int],
    *,
    cover: Any,
    watermark: bool = False,
    then: Callable[[pd.DataFrame, pd.DataFrame, dict[str, Any] | None], Any] | None = None,
    **params: Any,
) -> pd.DataFrame:
    """Feed ``pings`` in time order cut at ``cuts`` to ``advance_visits``; return all visits.

    States go through JSON between pieces; ``then(visits, fixes, state)`` sees what each call
    released (``state`` None after the final call). ``watermark``: each piece's last instant is
    passed as ``now``.
    """
    from stands.visits import advance_visits

    order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(order)), len(order)]
    state: dict[str, Any] | None = None
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        piece = order.iloc[lo:hi]
        now = piece["timestamp"].max() if watermark and len(piece) else None
        state, visits, fixes = advance_visits(state, piece, cover=cover, now=now, **params)
        state = json.loads(json.dumps(state))
        if then is not None:
            then(visits, fixes, state)
        parts.append(visits)
    _, visits, fixes = advance_visits(state, order.iloc[:0], cover=cover, final=True, **params)
    if then is not None:
        then(visits, fixes, None)
    parts.append(visits)
    return pd.concat(parts, ignore_index=True)


def cuttings(
    n: int, *, seeds: int = 4, one_by_one: bool = True, max_pieces: int | None = None
) -> list[list[int]]:
    """Fix by fix (optional), one piece and ``seeds`` random cuttings of ``n`` rows.

    A random cutting has up to ``max_pieces`` pieces (default ``n // 3``).
    """
    rng = np.random.default_rng(0)
    out: list[list[int]] = [list(range(1, n))] if one_by_one else []
    out.append([])
    most = max(2, (n // 3) if max_pieces is None else max_pieces)
    out += [
        sorted(rng.choice(np.arange(1, n), size=min(n - 1, k), replace=False).tolist())
        for k in rng.integers(1, most, size=seeds)
    ]
    return out


def square_stand(stand_id: str, north_m: float, east_m: float, half_m: float) -> dict:
    corners = [(-1, -1), (-1, 1), (1, 1), (1, -1)]
    shell = [offset_m(north_m + a * half_m, east_m + b * half_m)[::-1] for a, b in corners]
    return {"stand_id": stand_id, "geometry": Polygon(shell)}


def stand_fleet(seed: int) -> tuple[pd.DataFrame, StandCover]:
    """Five vehicles around two overlapping stands and a third: edge jitter, meters, silences.

    The jitter (18 m) puts many trip starts just outside a stand, on both sides of 30 m.
    """
    stands = gpd.GeoDataFrame(
        [
            square_stand("A", 0.0, 0.0, 20.0),
            square_stand("B", 0.0, 30.0, 20.0),  # overlaps A
            square_stand("C", 300.0, 0.0, 15.0),
        ],
        crs=4326,
    )
    rng = np.random.default_rng(seed)
    rows = []
    for v in range(5):
        t = float(rng.integers(0, 600))
        for _ in range(400):
            t += float(rng.choice([10, 20, 30, 45, 90, 700], p=[0.2, 0.3, 0.3, 0.1, 0.07, 0.03]))
            spot = rng.choice([0, 1, 2], p=[0.6, 0.25, 0.15])
            north = [0.0, 300.0, 150.0][spot] + float(rng.normal(0, 18))
            east = [15.0, 0.0, 200.0][spot] + float(rng.normal(0, 18))
            lat, lon = offset_m(north, east)
            meter = rng.choice(["free", "occupied", "off", None], p=[0.6, 0.25, 0.1, 0.05])
            rows.append((f"v{v}", t, lat, lon, meter))
    return make_pings(rows), build_stand_cover(stands)


def cover_stands(cover: StandCover) -> gpd.GeoDataFrame:
    """The stands frame a cover was built from."""
    return gpd.GeoDataFrame(
        {"stand_id": cover.stand_ids}, geometry=list(cover.geometries), crs=4326
    )
