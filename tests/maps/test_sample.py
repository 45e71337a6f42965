"""The map's sample of the findings: bounded, fair to rare kinds, the same on any partitioning."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from maps import MAP_DETAILS
from maps._errors import MapInputError
from maps.sample import (
    MAP_MAX_FINDINGS,
    SAMPLE_ORDER,
    finding_ranks,
    kind_counts,
    kind_quotas,
    merge_samples,
    part_sample,
    sample_findings,
)

SIZES = {
    "gps_anomaly": 900,
    "unlicensed_stand_use": 250,
    "tracking_gap": 40,
    "operating_while_barred": 3,
}


def _findings(sizes: dict[str, int] = SIZES, *, seed: int = 0) -> gpd.GeoDataFrame:
    """Findings of ``sizes`` kinds at random places and times, in the engines' order."""
    rng = np.random.default_rng(seed)
    kinds = np.repeat(list(sizes), list(sizes.values()))
    n = len(kinds)
    start = pd.Timestamp("2026-11-02T00:00:00Z") + pd.to_timedelta(
        rng.integers(0, 30 * 86400, n), unit="s"
    )
    frame = gpd.GeoDataFrame(
        {
            "finding_id": [f"{k[:4]}-{i:05d}" for i, k in enumerate(kinds)],
            "kind": kinds,
            "vehicle_id": [f"V{v}" for v in rng.integers(0, 50, n)],
            "stand_id": [None] * n,
            "started_at": start,
            "ended_at": start + pd.Timedelta(minutes=5),
            "confidence": 0.9,
            "details": [{"gap_s": 900.0, "evidence": {"rows": [1, 2]}} for _ in range(n)],
        },
        geometry=gpd.points_from_xy(rng.uniform(-51.3, -51.1, n), rng.uniform(-30.1, -29.9, n)),
        crs=4326,
    )
    return frame.sort_values(SAMPLE_ORDER, ignore_index=True)


class TestFindingRanks:
    def test_pinned_values(self):
        """The rank is BLAKE2b-64 of the id, pinned: the same on every machine and release."""
        assert finding_ranks(["F-1", "F-2"]).tolist() == [
            0xA529453B90B04514,
            0xCE25F9A7DB31529B,
        ]


class TestKindQuotas:
    def test_all_when_they_fit(self):
        """Under the cap every kind keeps all its findings."""
        assert kind_quotas({"a": 3, "b": 5}, cap=10) == {"a": 3, "b": 5}

    def test_rare_kinds_whole_and_share_passed_on(self):
        """A kind under its equal share keeps all; the rest of its share goes to the others."""
        quotas = kind_quotas(SIZES, cap=100)
        assert quotas == {
            "gps_anomaly": 33,
            "operating_while_barred": 3,
            "tracking_gap": 32,
            "unlicensed_stand_use": 32,
        }
        assert sum(quotas.values()) == 100

    def test_ties_by_code(self):
        """Equal kinds split the remainder of the cap by code order, deterministically."""
        assert kind_quotas({"b": 10, "a": 10, "c": 10}, cap=10) == {"a": 3, "b": 3, "c": 4}

    @pytest.mark.parametrize("cap", [0, -5, 2.5, True])
    def test_bad_cap(self, cap):
        """A cap that is not a positive integer is refused with a named pt-BR error."""
        with pytest.raises(MapInputError, match="'cap'.*inteiro positivo"):
            kind_quotas({"a": 1}, cap=cap)


class TestSampleFindings:
    def test_default_cap(self):
        """The default cap is MAP_MAX_FINDINGS (chosen in bench/bench_maps.py)."""
        assert MAP_MAX_FINDINGS == 25_000
        found = _findings()
        assert sample_findings(found).equals(found)

    def test_under_the_cap_unchanged(self):
        """At or under the cap, every drawable finding, in the frame's own order."""
        found = _findings().iloc[::-1]
        assert sample_findings(found, cap=len(found)).equals(found)

    def test_rows_without_geometry_not_counted(self):
        """Findings without geometry are not drawn, nor counted against the cap."""
        found = _findings()
        found.loc[found.index[:5], "geometry"] = None
        found.loc[found.index[5:8], "geometry"] = shapely.Point()
        got = sample_findings(found, cap=len(found) - 8)
        assert len(got) == len(found) - 8 and got.geometry.notna().all()
        assert sum(kind_counts(found).values()) == len(found) - 8

    def test_over_the_cap_quotas(self):
        """Over the cap: exactly cap findings, each kind its quota, in the engines' order."""
        found = _findings()
        got = sample_findings(found, cap=100)
        assert len(got) == 100
        assert got["kind"].value_counts().to_dict() == {
            k: v for k, v in kind_quotas(SIZES, cap=100).items() if v
        }
        assert got.equals(got.sort_values(SAMPLE_ORDER))
        barred = set(found.loc[found["kind"] == "operating_while_barred", "finding_id"])
        assert barred <= set(got["finding_id"])

    def test_lowest_ranks_of_each_kind(self):
        """Of each kind, the findings of lowest rank (BLAKE2b of the id) are the ones kept."""
        found = _findings()
        got = sample_findings(found, cap=100)
        gaps = found.loc[found["kind"] == "gps_anomaly", "finding_id"].tolist()
        ranked = sorted(zip(finding_ranks(gaps).tolist(), gaps, strict=True))
        want = {fid for _, fid in ranked[:33]}
        assert set(got.loc[got["kind"] == "gps_anomaly", "finding_id"]) == want

    def test_order_of_the_input_does_not_matter(self):
        """Shuffled rows give the same sample, row for row."""
        found = _findings()
        shuffled = found.sample(frac=1.0, random_state=3)
        a, b = (sample_findings(f, cap=100) for f in (found, shuffled))
        assert a["finding_id"].tolist() == b["finding_id"].tolist()


class TestMergeSamples:
    @pytest.mark.parametrize("seed", [1, 2, 3])
    @pytest.mark.parametrize("cap", [5, 100, 1000, 5000])
    def test_parts_merged_equal_the_whole(self, seed, cap):
        """Findings cut in random parts, each sampled, merged (in a tree): the whole's sample."""
        found = _findings(seed=seed)
        rng = np.random.default_rng(seed)
        cuts = np.sort(rng.choice(np.arange(1, len(found)), size=9, replace=False))
        parts = np.split(rng.permutation(len(found)), cuts)
        samples = [part_sample(found.iloc[p], cap=cap) for p in parts]
        samples.append(part_sample(found.iloc[:0], cap=cap))  # a part without findings
        middle = [merge_samples(samples[k : k + 3], cap=cap, final=False) for k in (0, 3, 6, 9)]
        got, counts = merge_samples(middle, cap=cap, final=True)
        want = sample_findings(found, cap=cap)
        assert counts == kind_counts(found)
        assert got["finding_id"].tolist() == want["finding_id"].tolist()
        assert got["started_at"].tolist() == want["started_at"].tolist()
        assert sample_findings(got, cap=cap, counts=counts)["finding_id"].tolist() == (
            want["finding_id"].tolist()
        )

    def test_parts_keep_only_map_details(self):
        """A part sends only the details the map reads, and at most cap of each kind."""
        kept, counts = part_sample(_findings(), cap=10)
        assert counts == dict(sorted(SIZES.items()))
        assert kept["kind"].value_counts().max() == 10
        assert all(set(d) <= MAP_DETAILS for d in kept["details"])
        assert {"gap_s"} == set(kept["details"].iloc[0])

    def test_nothing_to_merge(self):
        """No part, or parts without findings: an empty, typed frame and no counts."""
        got, counts = merge_samples([], cap=10, final=True)
        assert len(got) == 0 and "finding_id" in got.columns and counts == {}
