"""A multi-vehicle, multi-day scenario that exercises every cross-vehicle step.

Shared by the tests of the engines that split the fleet into partitions of whole vehicles
(Dask, the file engine): queues across partitions, an informal rank formed by four vehicles on
four days, trips across local midnight, a pickup outside the boundary, an impossible jump.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import shapely
from factories import make_pings, make_track, offset_m

from engines.pipeline import AnalysisResult
from fleet.loaders import read_fleet

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


def _leave_then_meter_on(vehicle: str, t0: int, *, meter_on_north_m: float) -> list:
    """Wait free at S1 for 5 min, leave north; the meter comes on 30 s after the last fix in,
    ``meter_on_north_m`` north of the stand's centre (its edge is 30 m north)."""
    points = [(t0 - 60, -300.0, 0.0), (t0 - 30, -150.0, 0.0)]
    points += [(t0 + 30 * k, 1.0, 0.0) for k in range(11)]
    points += [(t0 + 330, meter_on_north_m, 0.0), (t0 + 360, meter_on_north_m + 150.0, 0.0)]
    return make_track(vehicle, points, meter=["free"] * 13 + ["occupied"] * 2)


def _wait(vehicle: str, t0: int, at: tuple[float, float], wait_s: int = 900) -> list:
    """Drive in, wait free at ``at`` with 3 m of jitter, board a passenger there, drive off."""
    n, e = at
    points = [(t0 - 60, n + 600, e + 600)]
    points += [(t0 + k * 30, n + 3 * (k % 2), e) for k in range(wait_s // 30 + 1)]
    points += [(t0 + wait_s + 30, n, e), (t0 + wait_s + 90, n - 600, e - 600)]
    meters = ["occupied"] + ["free"] * (len(points) - 3) + ["occupied"] * 2
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


def scenario_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for d in range(4):
        t = d * DAY
        rows += _at_stand("v1", t, t + 1500)  # waits free the whole time
        rows += _at_stand("v2", t + 300, t + 600, board_at=t + 600)  # jumps v1
        rows += _at_stand("v5", t + 400, t + 700, board_at=t + 700)  # jumps v1, unlicensed
        rows += _wait(["A", "B", "C", "D"][d], t + 4 * 3600, PLACE)  # the informal rank
        rows += _midnight_trip("N", d)  # a trip across local midnight, every night
    rows += _wait("A", 3 * DAY + 6 * 3600, (PLACE[0] + 40, PLACE[1]))
    # v5 (licensed at S2) at S1: the meter on 20 m beyond the edge (a boarding there, found) and
    # 600 m beyond it (a drop-off: nothing).
    rows += _leave_then_meter_on("v5", 2 * DAY + 2 * 3600, meter_on_north_m=50.0)
    rows += _leave_then_meter_on("v5", 2 * DAY + 3 * 3600, meter_on_north_m=630.0)
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


def scenario_fleet(tmp_path: Path) -> pd.DataFrame:
    path = tmp_path / "frota.csv"
    path.write_text(
        "vehicle_id,accessible,stands,status,status_since\n"
        "v1,false,S1,active,\nv2,false,S1,active,\nv5,false,S2,active,\n"
        "L,false,S1,active,\nN,false,S2,active,\nA,false,,active,\nG,false,,suspended,2024-03-04\n",
        encoding="utf-8",
    )
    return read_fleet(path)


def scenario_pings() -> pd.DataFrame:
    """The scenario's pings (the contract frame)."""
    return make_pings(scenario_rows())


class RecordingClient:
    """A Dask client that keeps what each ``gather`` returned in ``received``."""

    def __init__(self, client: Any, received: list[Any]) -> None:
        self._client, self._received = client, received

    def gather(self, futures: Any) -> Any:
        out = self._client.gather(futures)
        self._received.append(out)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def assert_same(got: AnalysisResult, local: AnalysisResult, *, positions: bool = True) -> None:
    """Findings (ids, content), frames and summary of ``got`` equal the local engine's."""
    from live_compare import assert_same_findings

    assert_same_findings(got.findings, local.findings)
    assert got.findings["finding_id"].tolist() == local.findings["finding_id"].tolist()
    for name in ("visits", "trips", "stops", "occupancy"):
        want = getattr(local, name)
        if not positions:
            want = want.drop(columns=[c for c in POSITIONS if c in want.columns])
        pd.testing.assert_frame_equal(getattr(got, name), want, obj=name)
    assert got.summary == local.summary
    assert got.skipped_detectors == local.skipped_detectors


POSITIONS = ("first_ping", "last_ping", "boarding_ping")


NOW = pd.Timestamp("2025-01-01T00:00Z")
CONTRACT = ["vehicle_id", "timestamp", "lat", "lon", "speed_kmh", "meter", "tariff", "driver_id"]


def contract_cells() -> pd.DataFrame:
    """The scenario as contract cells (text), shuffled across vehicles, plus bad rows."""
    pings = scenario_pings()
    cells = pd.DataFrame(
        {
            "vehicle_id": pings["vehicle_id"].astype(str),
            "timestamp": pings["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "lat": pings["lat"].map(repr),
            "lon": pings["lon"].map(repr),
            "speed_kmh": "",
            "meter": pings["meter"].fillna("").astype(str),
            "tariff": "",
            "driver_id": "",
        }
    )
    cells = cells.sample(frac=1.0, random_state=7).reset_index(drop=True)  # by time, interleaved
    first = cells.iloc[3].to_dict()
    extra = [
        first,  # an exact duplicate of an early row, far from it (another chunk)
        first | {"lat": "-30.0001"},  # a conflicting duplicate
        first | {"lat": ""},  # missing coordinates
        first | {"timestamp": "2024-03-04T12:00:00"},  # naive
        first | {"vehicle_id": "  "},  # empty vehicle
        first | {"meter": "broken"},
    ]
    return pd.concat([cells, pd.DataFrame(extra)], ignore_index=True)


def ragged_csv_lines(cells: pd.DataFrame) -> list[str]:
    """The cells as CSV lines (header first), a record with too many fields after every 400th
    (from the 14th) and an empty line after every 700th (from the 6th)."""
    lines = [",".join(CONTRACT)]
    for k, rec in enumerate(cells[CONTRACT].itertuples(index=False)):
        lines.append(",".join(rec))
        if k % 400 == 13:
            lines.append("v9,2024-03-04T12:00:00Z,-30.0,1,2,3,4,5,6,7,8")  # too many fields
        if k % 700 == 5:
            lines.append("")
    return lines


FOLIUM_ID = re.compile(r"_[0-9a-f]{32}\b")
"""folium's random element ids, different in every ``map.html``."""


def assert_same_outputs(got: Path, want: Path) -> None:
    """Every output file of ``want`` equal in ``got``, byte for byte (``map.html`` bar folium's
    random ids); ``got`` has no other file."""
    names = sorted(p.name for p in want.iterdir())
    assert sorted(p.name for p in got.iterdir() if p.is_file()) == names and "rejected.csv" in names
    for name in names:
        a, b = (got / name).read_bytes(), (want / name).read_bytes()
        if name == "map.html":
            a, b = (FOLIUM_ID.sub("_id", x.decode("utf-8")).encode("utf-8") for x in (a, b))
        assert a == b, name


def write_contract_csv(
    path: Path, cells: pd.DataFrame, *, malformed_after: int | None = None
) -> Path:
    """Write contract cells as a CSV; a record with too many fields after ``malformed_after``."""
    lines = [",".join(CONTRACT)]
    for k, rec in enumerate(cells[CONTRACT].itertuples(index=False)):
        lines.append(",".join(rec))
        if malformed_after is not None and k == malformed_after:
            lines.append("v9,2024-03-04T12:00:00Z,-30.0,-51.0,1,2,3,4,5,6,7")  # too many fields
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
