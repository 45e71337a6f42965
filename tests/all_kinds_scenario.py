"""The partition scenario grown so that every finding kind of the contract occurs at least once.

:mod:`partition_scenario` (four days, many vehicles) plus what it lacks, each far from its stands,
its informal rank and one another:

- ``H``, licensed at S1, carries passengers on twelve days before the scenario and never goes to
  its stand (``habitual_absence``: 30-day window, at least 10 operating days, share 0 < 0.2);
- ``I``, in the fleet, carries one passenger 70 days before the scenario and never again; the data
  then span more than 60 days (``inactivity``, and for the fleet vehicles never seen carrying one);
- ``F`` rides on tariff 2 for ten minutes on a Tuesday at 10:00 local (``flag2_misuse``);
- ``R`` circles a block of a small street grid mid-trip, 5 km driven for 2 km (``longer_route``,
  with :func:`roads` as the network);
- ``W1``–``W3``, outside the fleet, each carry a passenger every day from I's ride to the end
  (a 420 m ride far south): the feed shows operations on every day of the window
  (``inactivity`` does not count a day with too few vehicles operating).

Default thresholds throughout: the kinds occur as a run with no ``--thresholds`` finds them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import shapely
from factories import make_track, offset_m
from partition_scenario import DAY, scenario_rows

# Time 0 is Monday 2024-03-04 09:00 in São Paulo (see partition_scenario).
HOUR = 3600
GRID_NORTH_M = (-2000.0, -1500.0, -1000.0)
GRID_EAST_M = (-2800.0, -2300.0, -1800.0, -1300.0, -800.0)
DETOUR = [
    (-2000.0, -2800.0),
    (-2000.0, -2300.0),
    (-1000.0, -2300.0),  # up a block side, across, down, back: 3 km of loop
    (-1000.0, -1800.0),
    (-2000.0, -1800.0),
    (-2000.0, -2300.0),
    (-2000.0, -800.0),
]
FLEET_CSV = (
    "vehicle_id,accessible,stands,status,status_since\n"
    "v1,false,S1,active,\nv2,false,S1,active,\nv5,false,S2,active,\n"
    "L,false,S1,active,\nN,false,S2,active,\nA,false,,active,\nG,false,,suspended,2024-03-04\n"
    "H,false,S1,active,\nI,false,,active,\nF,false,,active,\nR,false,,active,\n"
)


def _ride(
    vehicle: str,
    t0: int,
    points: list[tuple[float, float]],
    *,
    step_s: int = 15,
    tariff: int | None = None,
) -> list[dict[str, Any]]:
    """Occupied fixes every ``step_s`` at ``points`` (north, east), then one free fix."""
    track = make_track(
        vehicle,
        [(t0 + step_s * k, n, e) for k, (n, e) in enumerate(points)],
        meter="occupied",
    )
    for row in track:
        row["tariff"] = tariff
    n, e = points[-1]
    return track + make_track(vehicle, [(t0 + step_s * len(points), n, e)], meter="free")


def _along(
    corners: list[tuple[float, float]], *, step_m: float = 100.0
) -> list[tuple[float, float]]:
    """(north, east) points every ``step_m`` along a polyline of (north, east) corners."""
    points = [corners[0]]
    for (n0, e0), (n1, e1) in zip(corners[:-1], corners[1:], strict=True):
        k = max(1, round(math.hypot(n1 - n0, e1 - e0) / step_m))
        points += [(n0 + (n1 - n0) * i / k, e0 + (e1 - e0) * i / k) for i in range(1, k + 1)]
    return points


def all_kinds_rows() -> list[dict[str, Any]]:
    """The partition scenario's rows and the vehicles above."""
    rows = scenario_rows()
    for d in range(-12, 0):  # 14:00 local, a 420 m ride north-east of the rank
        rows += _ride("H", d * DAY + 5 * HOUR, [(2000.0 + 60 * k, 2000.0) for k in range(8)])
    rows += _ride("I", -70 * DAY + HOUR, [(2000.0 + 60 * k, -2000.0) for k in range(8)])
    flag2 = [(-1000.0, 1500.0 + 20 * k) for k in range(41)]  # 10 min, 10:00 on a Tuesday
    rows += _ride("F", DAY + HOUR, flag2, tariff=2)
    rows += _ride("R", 2 * DAY + 5 * HOUR, _along(DETOUR))  # 100 m every 15 s: 24 km/h
    for k, name in enumerate(("W1", "W2", "W3")):  # far south, a ride a day
        for d in range(-70, 5):
            rows += _ride(
                name, d * DAY + 3 * HOUR, [(-4000.0 + 60 * j, 800.0 * k) for j in range(8)]
            )
    return rows


def roads() -> gpd.GeoDataFrame:
    """Two-way streets every 500 m over 1 km x 2 km of the municipality's south-west."""
    lines = [[offset_m(n, e)[::-1] for e in GRID_EAST_M] for n in GRID_NORTH_M]
    lines += [[offset_m(n, e)[::-1] for n in GRID_NORTH_M] for e in GRID_EAST_M]
    return gpd.GeoDataFrame(
        {"oneway": [False] * len(lines)},
        geometry=[shapely.LineString(c) for c in lines],
        crs=4326,
    )


def write_fleet(path: Path) -> Path:
    """Write the scenario's fleet CSV (the partition scenario's and H, I, F, R) to ``path``."""
    path.write_text(FLEET_CSV, encoding="utf-8")
    return path


def contract_csv(path: Path) -> Path:
    """Write the scenario as a contract pings CSV, rows interleaved by time, with bad rows.

    Times are ISO 8601 UTC; six bad rows (an exact and a conflicting duplicate, a naive time, an
    empty vehicle, an unknown meter, a row of too many fields) go to ``rejected.csv``.
    """
    from factories import at

    records = all_kinds_rows()
    frame = pd.DataFrame(
        {
            "vehicle_id": [r["vehicle_id"] for r in records],
            "timestamp": [at(r["timestamp"]).strftime("%Y-%m-%dT%H:%M:%SZ") for r in records],
            "lat": [repr(r["lat"]) for r in records],
            "lon": [repr(r["lon"]) for r in records],
            "meter": [r.get("meter") or "" for r in records],
            "tariff": ["" if r.get("tariff") is None else str(r["tariff"]) for r in records],
        }
    )
    frame = frame.sample(frac=1.0, random_state=11).sort_values("timestamp", kind="stable")
    lines = [",".join(frame.columns)]
    lines += [",".join(cells) for cells in frame.itertuples(index=False)]
    first = lines[40].split(",")
    bad = [
        first,  # the same fix again
        [*first[:2], "-30.0001", *first[3:]],  # the same vehicle and time, elsewhere
        [first[0], first[1].rstrip("Z"), *first[2:]],
        ["", *first[1:]],
        [*first[:4], "busy", ""],
        [*first, "7"],
    ]
    for k, cells in enumerate(bad):
        lines.insert(500 + 700 * k, ",".join(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
