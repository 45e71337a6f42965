"""engines.partitions: the gathered stage by groups of each rule's key gives the whole's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from all_kinds_scenario import contract_csv, roads, write_fleet
from partition_scenario import BOUNDARY, NOW, STANDS, assert_same

import runtime
from engines import partitions as pt
from engines.buckets import analyze_file
from engines.pipeline import AnalysisParams
from fleet.loaders import read_fleet
from geo.roads import build_road_graph


class TestGather:
    @pytest.mark.skipif(not runtime.can_fork(), reason="fork pool: Linux only")
    def test_cell_pair_groups_over_processes_give_the_whole(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two jobs, each cell pair a group (more groups than processes): one job's result."""
        path = contract_csv(tmp_path / "pings.csv")
        kw: dict[str, Any] = {
            "fleet": read_fleet(write_fleet(tmp_path / "frota.csv")),
            "boundary": BOUNDARY,
            "roads": build_road_graph(roads()),
            "params": AnalysisParams(),
            "now": NOW,
        }
        whole, _ = analyze_file(path, STANDS, jobs=1, **kw)
        groups: list[list[dict[str, Any]]] = []

        def split(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
            pieces = split_by_route(*args, **kwargs)
            groups.append(pieces)
            return pieces

        split_by_route = pt.split_by_route
        monkeypatch.setattr(pt, "split_by_route", split)
        monkeypatch.setattr(pt, "ROUTE_GROUPS_PER_JOB", 1000)
        shared, _ = analyze_file(path, STANDS, jobs=2, **kw)
        assert_same(shared, whole)
        assert len(groups) == 1 and len(groups[0]) > 2
        ids = [i for piece in groups[0] for i in piece["trips"]["trip_id"].tolist()]
        meter = whole.trips.loc[whole.trips["source"].eq("meter"), "trip_id"]
        assert sorted(ids) == sorted(meter.tolist())  # each meter trip in one group
        kinds = set(whole.findings["kind"])
        assert {"longer_route", "queue_jump", "unlicensed_stand_use"} <= kinds


class TestGrownSpans:
    def test_the_mask_of_the_spans_and_their_neighbours(self) -> None:
        """Positions of ``[lo, hi)`` spans and one fix of the same vehicle on each side, once."""
        rng = np.random.default_rng(3)
        codes = np.repeat(np.arange(40, dtype=np.int64), rng.integers(1, 12, 40))
        n = len(codes)
        for _ in range(50):
            lo = np.sort(rng.integers(0, n, 30))
            hi = np.minimum(lo + rng.integers(0, 4, 30), n)  # empty, at vehicles' ends, touching
            want = np.flatnonzero(pt._grown(pt._span_mask(n, lo, hi - 1), codes))
            np.testing.assert_array_equal(pt._grown_spans(codes, lo, hi), want)
