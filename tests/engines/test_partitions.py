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
        made: list[dict[str, Any]] = []

        def spans(*args: Any, **kwargs: Any) -> dict[str, Any]:
            made.append(route_spans(*args, **kwargs))
            return made[-1]

        route_spans = pt.route_spans
        monkeypatch.setattr(pt, "route_spans", spans)
        monkeypatch.setattr(pt, "ROUTE_GROUPS_PER_JOB", 1000)
        shared, _ = analyze_file(path, STANDS, jobs=2, **kw)
        assert_same(shared, whole)
        [cut] = made
        groups = sorted(set(cut["group"].tolist()))
        assert len(groups) > 2
        ids = [i for g in groups for i in pt.route_piece(cut, g)["trips"]["trip_id"].tolist()]
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


def test_the_gathered_fixes_carry_what_the_cross_vehicle_rules_read() -> None:
    """``longer_route`` runs in the gathered stage on the fixes' evidence columns: a loop ride
    seen standing at two places 105 s apart (a drop-off and a new boarding may lie between)
    is judged there as on all the columns — not at all (it needs the reported speeds)."""
    import geopandas as gpd
    from factories import make_pings, make_track, offset_m
    from shapely import LineString

    from tracking.detectors.longer_route import detect_longer_route_in_fixes

    ticks = [k * 500.0 for k in range(5)]
    lines = [[offset_m(v, e)[::-1] for e in ticks] for v in (0.0, 1000.0)]
    lines += [[offset_m(n, v)[::-1] for n in (0.0, 500.0, 1000.0)] for v in ticks]
    graph = build_road_graph(
        gpd.GeoDataFrame(
            {"oneway": [False] * len(lines)}, geometry=[LineString(c) for c in lines], crs=4326
        )
    )
    corners = [(0, 0), (0, 1500), (1000, 1500), (1000, 2000), (0, 2000), (0, 1500), (0, 2000)]
    points = [corners[0]]
    for (n0, e0), (n1, e1) in zip(corners[:-1], corners[1:], strict=True):
        k = max(1, round(max(abs(n1 - n0), abs(e1 - e0)) / 100))
        points += [(n0 + (n1 - n0) * i / k, e0 + (e1 - e0) * i / k) for i in range(1, k + 1)]
    timed = [(15.0 * k, n, e) for k, (n, e) in enumerate(points)]
    del timed[21:27]  # 105 s unseen between the 21st and the 28th point
    rows = make_track("V", timed, meter="occupied")
    rows += make_track("V", [(timed[-1][0] + 15, *points[-1])], meter="free")
    rows[20]["speed_kmh"] = rows[21]["speed_kmh"] = 0.0
    pings = make_pings(rows)
    gathered = pt._evidence_frame(pings, np.ones(len(pings), dtype=bool))
    assert detect_longer_route_in_fixes(pings, roads=graph).empty
    assert detect_longer_route_in_fixes(gathered, roads=graph).empty
    without = detect_longer_route_in_fixes(pings.drop(columns="speed_kmh"), roads=graph)
    assert len(without) == 1  # the ride is a finding when the speeds are not read
