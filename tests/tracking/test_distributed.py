"""The Dask engine gives the local engine's result on a multi-vehicle, multi-day input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from factories import make_pings, make_track, offset_m
from live_compare import assert_same_findings

from fleet.loaders import read_fleet
from tracking.distributed import (
    DistributedEngineError,
    analyze_pings_distributed,
    dask_client,
    requeue,
    vehicle_partitions,
)
from tracking.pipeline import AnalysisParams, AnalysisResult, analyze_pings

DAY = 86_400
PLACE = (1000.0, 1000.0)  # an informal rank ~1.4 km from the stand
# Time 0 is 2024-03-04T12:00Z = 09:00 in São Paulo; local midnight is 15 h later.
MIDNIGHT = 15 * 3600


def _circle(north: float, east: float, radius_m: float) -> shapely.Polygon:
    lat, lon = offset_m(north, east)
    point = gpd.GeoSeries.from_xy([lon], [lat], crs=4326).to_crs(31982)
    return point.buffer(radius_m, 64).to_crs(4326).iloc[0]


STANDS = gpd.GeoDataFrame(
    {
        "stand_id": ["S1", "S2"],
        "name": ["Ponto 1", "Ponto 2"],
        "capacity": pd.array([2, 1], dtype="Int64"),
        "municipality": ["4314902", "4314902"],
    },
    geometry=[_circle(0, 0, 30), _circle(-2500, 0, 30)],
    crs=4326,
)
BOUNDARY = shapely.box(*offset_m(-3000, -3000)[::-1], *offset_m(3000, 3000)[::-1])


def _at_stand(vehicle: str, arrive: int, leave: int, *, board_at: int | None = None) -> list:
    """Approach from the south, wait free at S1 (a fix every 30 s), leave north."""
    points = [(arrive - 60, -300.0, 0.0), (arrive - 30, -150.0, 0.0)]
    points += [(t, 1.0, 0.0) for t in range(arrive, leave + 1, 30)]
    points += [(leave + 30, 150.0, 0.0), (leave + 60, 300.0, 0.0)]
    meters = [
        ("occupied" if board_at is not None and t >= board_at else "free") for t, *_ in points
    ]
    return make_track(vehicle, points, meter=meters)


def _wait(vehicle: str, t0: int, at: tuple[float, float], wait_s: int = 900) -> list:
    """Drive in, wait free at ``at`` with 3 m of jitter, drive off."""
    n, e = at
    points = [(t0 - 60, n + 600, e + 600)]
    points += [(t0 + k * 30, n + 3 * (k % 2), e) for k in range(wait_s // 30 + 1)]
    points.append((t0 + wait_s + 60, n - 600, e - 600))
    meters = ["occupied"] + ["free"] * (len(points) - 2) + ["occupied"]
    return make_track(vehicle, points, meter=meters)


def _midnight_trip(vehicle: str, day: int) -> list:
    """Board at S2 at 23:40 local, drive 6 km north until 00:25 (leaves the boundary)."""
    t0 = day * DAY + MIDNIGHT - 20 * 60
    points = [(t0 + 30 * k, -2500.0, 1.0) for k in range(6)]  # waiting free at S2
    meters: list[str | None] = ["free"] * 6
    for k in range(1, 181):  # 15 s steps, 45 min, ~50 m each
        points.append((t0 + 150 + 15 * k, -2500.0 + 50 * k, 0.0))
        meters.append("occupied")
    points += [(t0 + 150 + 15 * 181 + 30 * k, 6550.0, 0.0) for k in range(12)]  # parked
    meters += ["off"] * 12
    return make_track(vehicle, points, meter=meters)


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for d in range(4):
        t = d * DAY
        rows += _at_stand("v1", t, t + 1500)  # waits free the whole time
        rows += _at_stand("v2", t + 300, t + 600, board_at=t + 600)  # jumps v1
        rows += _at_stand("v5", t + 400, t + 700, board_at=t + 700)  # jumps v1, unlicensed
        rows += _wait(["A", "B", "C", "D"][d], t + 4 * 3600, PLACE)  # the informal rank
        rows += _midnight_trip("N", d)  # a trip across local midnight, every night
    rows += _wait("A", 3 * DAY + 6 * 3600, (PLACE[0] + 40, PLACE[1]))
    # A parked night across midnight, free, near the rank (a stop across midnight).
    rows += make_track(
        "P", [(MIDNIGHT - 3600 + 60 * k, PLACE[0] + 2, PLACE[1]) for k in range(121)], meter="free"
    )
    # A passenger picked up outside the municipality.
    rows += make_track(
        "N", [(2 * DAY + 7200 + 15 * k, 4500.0 - 50 * k, 0.0) for k in range(60)], meter="occupied"
    )
    # An impossible jump and a silence while in service.
    rows += make_track(
        "G",
        [(DAY + 15 * k, 500.0 + 30 * k, -500.0) for k in range(20)]
        + [(DAY + 300, 60_000.0, -500.0)]
        + [(DAY + 315 + 15 * k, 1100.0 + 30 * k, -500.0) for k in range(10)]
        + [(DAY + 2000 + 15 * k, 1500.0 + 30 * k, -500.0) for k in range(10)],
        meter="occupied",
    )
    return rows


def _fleet(tmp_path: Path) -> pd.DataFrame:
    path = tmp_path / "frota.csv"
    path.write_text(
        "vehicle_id,accessible,stands,status\n"
        "v1,false,S1,active\nv2,false,S1,active\nv5,false,S2,active\n"
        "L,false,S1,active\nN,false,S2,active\nA,false,,active\nG,false,,suspended\n",
        encoding="utf-8",
    )
    return read_fleet(path)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with dask_client(workers=2, processes=False) as c:
        yield c


def _assert_same(dist: AnalysisResult, local: AnalysisResult) -> None:
    assert_same_findings(dist.findings, local.findings)
    assert dist.findings["finding_id"].tolist() == local.findings["finding_id"].tolist()
    for name in ("visits", "trips", "stops", "occupancy"):
        pd.testing.assert_frame_equal(getattr(dist, name), getattr(local, name), obj=name)
    assert dist.summary == local.summary
    assert dist.skipped_detectors == local.skipped_detectors


class TestAnalyzePingsDistributed:
    def test_same_result_as_local_engine(self, client: Any, tmp_path: Path) -> None:
        """Findings (ids, content), visits, trips, stops, occupancy and summary equal local's."""
        pings = make_pings(_rows())
        fleet = _fleet(tmp_path)
        kw: dict[str, Any] = {"fleet": fleet, "boundary": BOUNDARY, "params": AnalysisParams()}
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=200, **kw
        )
        _assert_same(dist, local)
        kinds = set(local.findings["kind"])
        assert {"queue_jump", "illegal_stand_formation", "outside_municipality"} <= kinds
        assert {"unlicensed_stand_use", "gps_anomaly", "operating_while_barred"} <= kinds
        night = local.trips.loc[local.trips["trip_id"].str.match(r"N-\d{8}T0[23]")]
        local_days = night["started_at"].dt.tz_convert("America/Sao_Paulo").dt.day
        ended_days = night["ended_at"].dt.tz_convert("America/Sao_Paulo").dt.day
        assert len(night) == 4 and (local_days != ended_days).all()  # not cut at midnight
        queue = local.visits.loc[local.visits["stand_id"].eq("S1"), "queue_position"]
        assert queue.max() == 3  # positions span vehicles of different partitions

    def test_as_of_and_subset_of_kinds(self, client: Any, tmp_path: Path) -> None:
        """An earlier --as-of and a subset of kinds give the local result too."""
        pings = make_pings(_rows())
        pings = pings.loc[pings["timestamp"] < pd.Timestamp("2024-03-06T03:00Z")]
        pings = pings.reset_index(drop=True)
        kw: dict[str, Any] = {
            "fleet": _fleet(tmp_path),
            "kinds": ("queue_jump", "habitual_absence", "tracking_gap", "inactivity"),
        }
        import datetime as dt

        kw["as_of"] = dt.date(2024, 3, 5)
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=500, **kw
        )
        _assert_same(dist, local)

    def test_empty_pings(self, client: Any) -> None:
        """No pings: the empty result of the local engine."""
        empty = make_pings([])
        local = analyze_pings(empty, pd.DataFrame(), STANDS)
        dist = analyze_pings_distributed(empty, pd.DataFrame(), STANDS, client=client)
        _assert_same(dist, local)


class TestVehiclePartitions:
    def test_whole_vehicles_cover_every_row(self) -> None:
        """Ranges cut only between vehicles, cover all rows once, about the target size."""
        ids = pd.Series(["a"] * 5 + ["b"] * 2 + ["c"] * 7 + ["d"])
        assert vehicle_partitions(ids, partition_fixes=6) == [(0, 7), (7, 14), (14, 15)]
        assert vehicle_partitions(ids, partition_fixes=100) == [(0, 15)]
        assert vehicle_partitions(ids, partition_fixes=100, min_partitions=3) == [
            (0, 5),
            (5, 14),
            (14, 15),
        ]
        assert vehicle_partitions(ids.iloc[:0], partition_fixes=10) == []


class TestRequeue:
    def test_positions_across_vehicles(self) -> None:
        """A visit arriving while two others are in progress at the stand is third."""
        t = pd.Timestamp("2024-03-04T12:00Z")
        visits = pd.DataFrame(
            {
                "vehicle_id": pd.Series(["b", "a", "c", "d"], dtype="str"),
                "stand_id": pd.Series(["S", "S", "S", "T"], dtype="str"),
                "arrived_at": [t, t, t + pd.Timedelta(60, "s"), t + pd.Timedelta(60, "s")],
                "departed_at": [t + pd.Timedelta(600, "s")] * 4,
                "queue_position": [1, 1, 1, 1],
            }
        )
        assert requeue(visits)["queue_position"].tolist() == [2, 1, 3, 1]


class TestDaskClient:
    def test_unreachable_scheduler_is_a_named_error(self) -> None:
        """A scheduler nobody listens on gives DistributedEngineError naming the address."""
        with (
            pytest.raises(DistributedEngineError, match="tcp://127.0.0.1:9"),
            dask_client("tcp://127.0.0.1:9", connect_timeout_s=1),
        ):
            pass

    def test_bad_worker_count(self) -> None:
        """Zero workers is refused before any cluster starts."""
        with pytest.raises(ValueError, match="'workers' era 0"), dask_client(workers=0):
            pass
