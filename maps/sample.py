"""The findings the enforcement map draws: all of them up to a cap, else a fixed sample.

Above :data:`MAP_MAX_FINDINGS` drawable findings (a geometry, not empty), the map draws a sample
that depends only on the findings, never on how a run was partitioned:

- **Quotas by kind.** The cap is shared equally among the kinds present; a kind with fewer
  findings than its share keeps them all and leaves the rest of its share to the others (water
  filling, kinds taken from the fewest findings up, ties by code). A rare kind
  (``operating_while_barred``) is drawn whole beside 300,000 ``gps_anomaly``.
- **Which ones.** Of each kind, the ``quota`` findings of lowest rank: the 64-bit BLAKE2b of the
  ``finding_id`` (UTF-8), ties by ``finding_id``. The rank of a finding is the same on every
  machine, run and partitioning (Python's ``hash`` is not).

Mergeable: a part keeps of each kind its ``cap`` lowest-ranked findings and counts them all
(:func:`part_sample`); the union of the parts' samples, with the counts summed, holds every
finding the whole run's sample picks, since no quota exceeds ``cap`` (:func:`merge_samples`).
The map says how many of how many findings of each kind it shows (:mod:`maps.findings`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from maps import MAP_DETAILS
from maps._errors import MapInputError
from tracking.detectors.findings import empty_findings, with_details

MAP_MAX_FINDINGS = 25_000
"""Findings the enforcement map draws at most. Measured in headless Chromium
(``bench/bench_maps.py``, ``bench/README.md``): 25k open in under 2 s and redraw the whole city
after a pan in about 0.3 s; 50k take 2.8 s and 0.5 s, 100k 4–6 s and about a second."""

MapSample = tuple[gpd.GeoDataFrame, dict[str, int]]
"""Sampled findings and the count of drawable findings of each kind they were drawn from."""

SAMPLE_ORDER = ["kind", "started_at", "finding_id"]
"""The order of a sample's rows (that of the engines' findings frames)."""


def drawable(findings: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """Return the findings the map can draw: with a geometry, not empty."""
    geoms = findings.geometry.to_numpy()
    return findings.loc[~pd.isna(geoms) & ~shapely.is_empty(geoms)]


def finding_ranks(finding_ids: Iterable[object]) -> NDArray[np.uint64]:
    """Return each ``finding_id``'s rank: the 64-bit BLAKE2b of its text (UTF-8), big-endian."""
    digests = b"".join(
        hashlib.blake2b(str(fid).encode(), digest_size=8).digest() for fid in finding_ids
    )
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def kind_counts(findings: gpd.GeoDataFrame) -> dict[str, int]:
    """Return the number of drawable findings of each kind (kinds in code order)."""
    counts = drawable(findings)["kind"].astype(str).value_counts()
    return {str(k): int(counts[k]) for k in sorted(counts.index)}


def kind_quotas(counts: Mapping[str, int], *, cap: int) -> dict[str, int]:
    """Return how many findings of each kind the map draws: all, when they fit in ``cap``.

    The cap is shared equally among the kinds; a kind under its share gives the rest of it to
    the others (kinds from the fewest findings up, ties by code). The quotas sum to
    ``min(cap, sum(counts))``.

    Raises
    ------
    MapInputError
        If ``cap`` is not positive.
    """
    _check_cap(cap)
    left = sorted(((int(n), str(k)) for k, n in counts.items() if n > 0))
    quotas = {str(k): 0 for k, n in counts.items() if n <= 0}
    room = cap
    for done, (n, kind) in enumerate(left):
        share = room // (len(left) - done)
        quotas[kind] = min(n, share)
        room -= quotas[kind]
    return {k: quotas[k] for k in sorted(quotas)}


def _check_cap(cap: int) -> None:
    if isinstance(cap, bool) or not isinstance(cap, int | np.integer) or cap <= 0:
        msg = f"'cap' (máximo de achados no mapa) foi {cap!r}; esperado um inteiro positivo"
        raise MapInputError(msg)


def _lowest(findings: gpd.GeoDataFrame, quotas: Mapping[str, int]) -> gpd.GeoDataFrame:
    """Return, of each kind, its ``quotas[kind]`` findings of lowest rank, in SAMPLE_ORDER."""
    if not len(findings):
        return findings
    order = pd.DataFrame(
        {
            "kind": findings["kind"].astype(str).to_numpy(),
            "rank": finding_ranks(findings["finding_id"].tolist()),
            "finding_id": findings["finding_id"].astype(str).to_numpy(),
        }
    ).sort_values(["kind", "rank", "finding_id"], kind="stable")
    nth = order.groupby("kind", sort=False).cumcount().to_numpy()
    limit = order["kind"].map(lambda k: quotas.get(k, 0)).to_numpy()
    chosen = np.sort(order.index.to_numpy()[nth < limit])
    picked = findings.iloc[chosen]
    return picked.sort_values(SAMPLE_ORDER, kind="stable")


def sample_findings(
    findings: gpd.GeoDataFrame,
    *,
    cap: int | None = None,
    counts: Mapping[str, int] | None = None,
) -> gpd.GeoDataFrame:
    """Return the findings the map draws (see the module docstring).

    Parameters
    ----------
    findings : geopandas.GeoDataFrame
        Findings frame; rows without geometry are left out (the map cannot draw them).
    cap : int, optional
        Findings drawn at most; default :data:`MAP_MAX_FINDINGS`.
    counts : mapping of str to int, optional
        Drawable findings of each kind ``findings`` were sampled from (a merged
        :func:`part_sample`); default: those of ``findings``.

    Returns
    -------
    geopandas.GeoDataFrame
        Every drawable finding, in the frame's order, when they fit in ``cap``; else each
        kind's quota (:func:`kind_quotas`) of lowest-ranked findings, in ``SAMPLE_ORDER``.
    """
    cap = MAP_MAX_FINDINGS if cap is None else cap
    _check_cap(cap)
    shown = drawable(findings)
    totals = kind_counts(shown) if counts is None else dict(counts)
    if sum(totals.values()) <= cap:
        return shown
    return _lowest(shown, kind_quotas(totals, cap=cap))


def part_sample(findings: gpd.GeoDataFrame, *, cap: int) -> MapSample:
    """Return a part's share of the map and its drawable findings' counts by kind.

    The share is, of each kind, its ``cap`` lowest-ranked drawable findings, with the
    ``details`` keys of :data:`maps.MAP_DETAILS` only.
    """
    _check_cap(cap)
    shown = drawable(findings)
    counts = kind_counts(shown)
    kept = _lowest(shown, dict.fromkeys(counts, cap))
    if "details" in kept.columns:
        kept = with_details(kept, MAP_DETAILS)
    return kept, counts


def merge_samples(samples: Sequence[MapSample], *, cap: int, final: bool) -> MapSample:
    """Merge parts' samples (:func:`part_sample`): counts summed, each kind's ``cap`` lowest.

    With ``final``, the findings are the whole run's map (:func:`sample_findings` of the
    union): the same as the sample of every part's findings together.
    """
    _check_cap(cap)
    counts: dict[str, int] = {}
    for _, part_counts in samples:
        for kind, n in part_counts.items():
            counts[kind] = counts.get(kind, 0) + int(n)
    counts = {k: counts[k] for k in sorted(counts)}
    frames = [f for f, _ in samples if len(f)]
    if not frames:
        return empty_findings(), counts
    union = gpd.GeoDataFrame(pd.concat(frames, ignore_index=True), geometry="geometry", crs=4326)
    if final:
        if sum(counts.values()) <= cap:
            return union.sort_values(SAMPLE_ORDER, kind="stable", ignore_index=True), counts
        return sample_findings(union, cap=cap, counts=counts).reset_index(drop=True), counts
    return _lowest(union, dict.fromkeys(counts, cap)).reset_index(drop=True), counts
