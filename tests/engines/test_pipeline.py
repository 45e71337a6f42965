"""The batch pipeline on hand-made tracks, and the contract files it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from factories import make_pings, offset_m

from engines.pipeline import (
    AnalysisParams,
    analyze_pings,
    count_distinct,
    merge_part_file,
    rejected_columns,
    summary_item_text,
    write_outputs,
    write_rejected_part,
    write_summary,
)
from tracking import frames as fr
from tracking.ingest import write_rejected


def _stand(stand_id: str, north_m: float, east_m: float, half_m: float = 15.0) -> dict:
    lat0, lon0 = offset_m(north_m - half_m, east_m - half_m)
    lat1, lon1 = offset_m(north_m + half_m, east_m + half_m)
    return {
        "stand_id": stand_id,
        "name": f"Ponto {stand_id}",
        "capacity": 1,
        "municipality": "4314902",
        "geometry": shapely.box(lon0, lat0, lon1, lat1),
    }


@pytest.fixture
def stands() -> gpd.GeoDataFrame:
    frame = gpd.GeoDataFrame([_stand("A", 0, 0), _stand("B", 2000, 0)], crs=4326)
    frame["capacity"] = frame["capacity"].astype("Int64")
    return frame


def _track(vehicle: str, t0: float, *, board_at_stand: bool) -> list[tuple]:
    """Wait 5 min free at stand A, then carry a passenger 2 km north (to stand B)."""
    rows = []
    meter = "occupied" if board_at_stand else "free"
    for k in range(11):  # 0..300 s at the stand, free; the meter comes on at the last fix
        at_stand = meter if k == 10 else "free"
        tariff = 1 if at_stand == "occupied" else None
        rows.append((vehicle, t0 + 30 * k, *offset_m(2, 1), at_stand, tariff))
    for k in range(1, 21):  # 100 m every 15 s
        rows.append(
            (
                vehicle,
                t0 + 300 + 15 * k,
                *offset_m(100 * k, 0),
                meter,
                1 if meter == "occupied" else None,
            )
        )
    if not board_at_stand:  # drives on free past stand B, boards 4 min later far from any stand
        for k in range(1, 17):
            rows.append((vehicle, t0 + 600 + 15 * k, *offset_m(2000 + 100 * k, 0), "free", None))
        for k in range(1, 6):
            rows.append((vehicle, t0 + 840 + 15 * k, *offset_m(3600 + 100 * k, 0), "occupied", 1))
    return rows


class TestAnalyzePings:
    def test_boarding_at_stand_gives_visit_trip_and_pickup_stand(self, stands):
        """A free wait then meter on inside stand A: one boarded visit, a trip picked up at A."""
        pings = make_pings(_track("V1", 0, board_at_stand=True))
        result = analyze_pings(pings, pd.DataFrame(), stands)
        visit = result.visits.set_index("stand_id").loc["A"]
        assert bool(visit["boarded"]) is True
        assert visit["queue_position"] == 1
        assert visit["dwell_s"] == pytest.approx(300.0)
        assert list(result.trips["pickup_stand_id"]) == ["A"]
        assert result.summary["boardings"] == 1

    def test_queue_and_no_boarding(self, stands):
        """A second vehicle arriving while the first waits is second in the queue and not boarded
        when its meter starts away from the stand."""
        rows = _track("V1", 0, board_at_stand=True) + _track("V2", 60, board_at_stand=False)
        result = analyze_pings(make_pings(rows), pd.DataFrame(), stands)
        a = result.visits.loc[result.visits["stand_id"].eq("A")].set_index("vehicle_id")
        assert a.loc["V2", "queue_position"] == 2
        assert not bool(a.loc["V2", "boarded"])
        v2_trips = result.trips.loc[result.trips["vehicle_id"].eq("V2")]
        assert v2_trips["pickup_stand_id"].isna().all()

    def test_licence_from_fleet(self, stands):
        """With a fleet, a visit at a stand the vehicle is not licensed for is unlicensed."""
        fleet = pd.DataFrame({"vehicle_id": ["V1"], "stands": [("B",)]})
        result = analyze_pings(
            make_pings(_track("V1", 0, board_at_stand=True)), pd.DataFrame(), stands, fleet=fleet
        )
        assert not bool(result.visits.set_index("stand_id").loc["A", "licensed"])

    def test_empty_pings(self, stands):
        """No pings gives empty, written outputs."""
        empty = make_pings([])
        result = analyze_pings(empty, pd.DataFrame(), stands)
        assert result.visits.empty and result.trips.empty
        assert result.summary["pings_valid"] == 0


class TestWriteOutputs:
    def test_contract_headers(self, stands, tmp_path):
        """Each contract file has exactly the contract's columns, times in ISO 8601 UTC."""
        pings = make_pings(_track("V1", 0, board_at_stand=True))
        rejected = pd.DataFrame(
            {
                "row": [7],
                "reason": ["null_island"],
                "vehicle_id": ["V9"],
                "timestamp": ["2024-03-04T12:00:00Z"],
                "lat": ["0"],
                "lon": ["0"],
            }
        )
        result = analyze_pings(pings, rejected, stands, params=AnalysisParams())
        write_outputs(result, tmp_path)
        visits = pd.read_csv(tmp_path / "stand_visits.csv", dtype=str)
        assert tuple(visits.columns) == fr.VISIT_COLUMNS
        assert visits["arrived_at"].str.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$").all()
        trips = pd.read_csv(tmp_path / "trips.csv", dtype=str)
        assert tuple(trips.columns) == fr.TRIP_COLUMNS
        rej = pd.read_csv(tmp_path / "rejected.csv", dtype=str)
        assert list(rej.columns[:2]) == ["row", "reason"] and rej.loc[0, "reason"] == "null_island"
        occ = pd.read_csv(tmp_path / "occupancy.csv")
        assert {"stand_id", "bucket_start", "vehicles_present", "capacity"} <= set(occ.columns)
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["pings_rejected"] == 1
        assert summary["parameters"]["h3_resolution"] == AnalysisParams().h3_resolution


class TestMergeRejectedParts:
    def test_parts_give_the_whole_file(self, tmp_path):
        """Parts of rejected frames merged: the bytes of ``write_rejected`` on their rows in row
        order, cells with line breaks, quotes and commas included; an empty part without the
        source's columns."""
        a = pd.DataFrame(
            {
                "row": [2, 9, 11],
                "reason": ["malformed_row"] * 3,
                "vehicle_id": ["V1", 'a "b"', "ç,ã"],
                "lat": ["1\n2", "", "x\r\ny"],
            }
        )
        b = pd.DataFrame({"row": [3, 10], "reason": ["duplicate", "null_island"]})
        b = b.assign(vehicle_id=["V2", "V3"], lat=["", "0"])
        empty = pd.DataFrame({"row": pd.Series([], dtype="int64"), "reason": []})
        frames = [a, empty, b]
        columns = rejected_columns(frames)
        parts = [tmp_path / f"part-{k}.parquet" for k in range(len(frames))]
        for frame, part in zip(frames, parts, strict=True):
            write_rejected_part(frame, part, columns=columns)
        merge_part_file("rejected.csv", parts, tmp_path / "got.csv", columns=columns)
        whole = pd.concat(frames, ignore_index=True).sort_values("row", ignore_index=True)
        write_rejected(whole, tmp_path / "want.csv")
        assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "want.csv").read_bytes()
        assert b'"1\n2"' in (tmp_path / "got.csv").read_bytes()


class TestWriteSummary:
    SUMMARY: ClassVar[dict[str, Any]] = {
        "pings_valid": 3,
        "findings_by_kind": {"gps_anomaly": 2},
        "findings_for_review": {"count": 0, "by_kind": {}, "findings": []},
        "parameters": {"timezone": "America/Sao_Paulo"},
    }
    ITEMS: ClassVar[list[dict[str, Any]]] = [
        {
            "finding_id": "a",
            "kind": "gps_anomaly",
            "confidence": 0.25,
            "reason": "confiança “baixa”",
        },
        {"finding_id": "b", "vehicle_id": None, "nested": {"x": [1, {}]}},
    ]

    @pytest.mark.parametrize("n_items", [0, 1, 2])
    def test_review_list_spliced_from_texts(self, tmp_path, n_items):
        """The review list given as item texts (from parts) makes the bytes of the list given."""
        items = self.ITEMS[:n_items]
        whole = self.SUMMARY | {"findings_for_review": {"count": n_items, "findings": items}}
        write_summary(whole, tmp_path / "a.json")
        write_summary(
            whole | {"findings_for_review": {"count": n_items, "findings": []}},
            tmp_path / "b.json",
            review=[summary_item_text(i) for i in items],
        )
        want = json.dumps(whole, ensure_ascii=False, indent=2) + "\n"
        assert (tmp_path / "a.json").read_text(encoding="utf-8") == want
        assert (tmp_path / "b.json").read_bytes() == want.encode("utf-8")


class TestCountDistinct:
    @pytest.mark.parametrize(
        ("positions", "n", "expected"),
        [([], 0, 0), ([], 5, 0), ([3, 1, 3, 0], 4, 3), (list(range(10)) * 2, 10, 10)],
    )
    def test_counts_distinct_positions(self, positions, n, expected):
        """Repeated positions count once; none gives zero."""
        assert count_distinct(np.asarray(positions, dtype=np.int64), n) == expected


def _some_findings(n: int) -> gpd.GeoDataFrame:
    from tracking.detectors.findings import make_findings

    rng = np.random.default_rng(3)
    t0 = pd.Timestamp("2024-03-04T09:00:00Z").value
    started = t0 + rng.integers(0, 5, n) * 60_000_000_000  # many equal instants
    rows = pd.DataFrame(
        {
            "kind": rng.choice(["queue_jump", "tracking_gap", "flag2_misuse"], n),
            "vehicle_id": [f"V{k}" for k in range(n)],
            "stand_id": [None if k % 3 else f"S{k}" for k in range(n)],
            "started_at": started,
            "ended_at": started + 60_000_000_000,
            "confidence": 0.9,
            "details": [
                {"fixes": [{"row": k, "lat": -30.0}], "ahead": [f"V{k}"], "n": k}
                if k % 5
                else {1: "a key that is not text: the json path", "fixes": []}
                for k in range(n)
            ],
        }
    )
    return make_findings(rows, [(-51.2 + k * 1e-4, -30.0) for k in range(n)])


def test_findings_parts_merge_to_the_same_file(tmp_path: Path) -> None:
    """Findings written as parts in any split and merged: write_findings_geojson's bytes;
    the frames returned keep the details asked for only."""
    from engines.pipeline import merge_findings_parts, write_findings_part
    from tracking.detectors.findings import write_findings_geojson

    found = _some_findings(700)
    write_findings_geojson(found, tmp_path / "whole.geojson")
    part_of = np.random.default_rng(5).integers(0, 4, len(found))
    parts, light = [], []
    for k in range(5):  # part 4 is empty
        parts.append(tmp_path / f"p{k}.parquet")
        shuffled = found[part_of == k].sample(frac=1, random_state=k)
        light.append(write_findings_part(shuffled, parts[-1], keep=frozenset({"n", 1})))
    merge_findings_parts(parts, tmp_path / "merged.geojson")
    assert (tmp_path / "merged.geojson").read_bytes() == (tmp_path / "whole.geojson").read_bytes()
    back = pd.concat(light).sort_values("finding_id")
    assert back["finding_id"].tolist() == sorted(found["finding_id"])
    assert all(set(d) in ({"n"}, {1}) for d in back["details"])


def test_no_findings_merge_to_an_empty_collection(tmp_path: Path) -> None:
    """No parts, or empty ones: an empty FeatureCollection, as with no findings."""
    from engines.pipeline import merge_findings_parts, write_findings_part
    from tracking.detectors.findings import empty_findings

    write_findings_part(empty_findings(), tmp_path / "p.parquet")
    merge_findings_parts([tmp_path / "p.parquet"], tmp_path / "a.geojson")
    merge_findings_parts([], tmp_path / "b.geojson")
    want = b'{"type":"FeatureCollection","features":[]}'
    assert (tmp_path / "a.geojson").read_bytes() == (tmp_path / "b.geojson").read_bytes() == want


def test_parts_merged_in_runs_then_merged_equal_one_merge(tmp_path: Path) -> None:
    """Parts merged two and three at a time (ties across parts included), then merged: the
    rows of one merge of every part, in order; the merged inputs are deleted."""
    from engines.pipeline import merge_parts, merged_texts, write_part

    rng = np.random.default_rng(7)
    parts = []
    for k in range(7):
        size = 0 if k == 0 else int(rng.integers(1, 600))  # an empty part first: untyped keys
        keys = np.sort(rng.integers(0, 20, size=size))  # ties everywhere
        texts = [f"{k}:{i}:{key}".encode() for i, key in enumerate(keys)]
        parts.append(tmp_path / f"p{k}.parquet")
        write_part(parts[-1], {"kind": ["a"] * size, "n": keys.tolist()}, texts)
    want = list(merged_texts(parts, ["kind", "n"]))
    runs = [parts[0:2], parts[2:5], parts[5:7]]
    merged = [Path(merge_parts(r, tmp_path / f"m{j}.parquet")) for j, r in enumerate(runs)]
    assert not any(p.exists() for p in parts)
    assert list(merged_texts(merged, ["kind", "n"])) == want and len(want) > 600
    [last] = [Path(merge_parts(merged, tmp_path / "all.parquet"))]
    assert list(merged_texts([last], ["kind", "n"])) == want
