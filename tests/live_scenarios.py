"""Shared scenarios of the live == batch tests: detector level and live worker level.

Informal rank (``illegal_stand_formation``): :func:`fleet_month`, against :data:`RANK_STANDS`.
Habitual absence: :func:`absence_rows` over :data:`N_DAYS` days, against :data:`LIVE_STANDS`
with :data:`LIVE_LICENCES` and :data:`LIVE_OPTIONS`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import geopandas as gpd
import pandas as pd
import shapely
from factories import make_track, offset_m

from geo.cover import StandCover, build_stand_cover, match_stands
from stands.visits import detect_visits
from tracking.detectors.habitual_absence import detect_habitual_absence

DAY = 86_400.0
PLACE = (1000.0, 1000.0)  # (north_m, east_m) of the informal rank, ~1.4 km from the stand


def square(north: float, east: float, half_m: float) -> shapely.Polygon:
    corners = [(-1, -1), (-1, 1), (1, 1), (1, -1)]
    return shapely.Polygon(
        [offset_m(north + a * half_m, east + b * half_m)[::-1] for a, b in corners]
    )


RANK_STANDS = gpd.GeoDataFrame({"stand_id": ["S1"]}, geometry=[square(0, 0, 20)], crs=4326)


def wait(
    vehicle: str,
    t0: float,
    at: tuple[float, float],
    *,
    wait_s: float = 900.0,
    meter: str | None = "free",
    boards: bool = True,
) -> list[dict[str, Any]]:
    """Drive in, wait ``wait_s`` at ``at`` with 3 m of jitter (a fix every 30 s), drive off;
    with ``boards`` the meter is switched on at the place's last fix (a passenger boards)."""
    n, e = at
    points = [(t0 - 60, n + 600, e + 600)]
    points += [(t0 + k * 30, n + 3 * (k % 2), e) for k in range(int(wait_s // 30) + 1)]
    points.append((t0 + wait_s + 60, n - 600, e - 600))
    meters = ["occupied"] + [meter] * (len(points) - 2) + ["occupied"]
    if not boards:
        meters[-1] = meter
    elif meter == "free":
        meters[-2] = "occupied"
    return make_track(vehicle, points, meter=meters)


def fleet_month() -> list[dict[str, Any]]:
    """Four days, several vehicles: one informal rank, and the cases that accuse no one."""
    other = (5000.0, -3000.0)
    rows: list[dict[str, Any]] = []
    for d, v in enumerate(["A", "B", "C", "D"]):
        rows += wait(v, d * DAY, PLACE)  # the informal rank, a new vehicle each day
        rows += wait(v, d * DAY + 3 * 3600, (40.0, 0.0))  # jitter at the stand's edge
        rows += wait(v, d * DAY + 6 * 3600, (60.0, 0.0), wait_s=90.0)  # red light near the stand
        rows += wait(v, d * DAY + 7 * 3600, PLACE, wait_s=300.0)  # a stop, too short to wait
    rows += wait("A", 3 * DAY + 9 * 3600, PLACE, meter="occupied")  # waiting with a passenger
    rows += wait("E", 4 * 3600, other) + wait("E", DAY + 4 * 3600, other)  # one vehicle only
    rows += wait("F", 2 * DAY + 8 * 3600, (PLACE[0] + 40, PLACE[1]))  # joins the rank later
    return rows


DAY_S = 86_400
N_DAYS = 11
LIVE_STANDS = {"S1": (0.0, 0.0, 30.0), "S2": (2000.0, 0.0, 30.0), "S3": (2000.0, 20.0, 30.0)}
LIVE_LICENCES = pd.DataFrame(
    {
        "vehicle_id": ["absent", "present", "jitter", "idle", "rare", "night", "late"],
        "stand_id": ["S1", "S1", "S1", "S1", "S1", "S2", "S2"],
    }
)
LIVE_OPTIONS = {"window_days": 7, "min_operating_days": 2, "min_presence_share": 0.6}


def local(day: int, hour: float) -> int:
    """Seconds after the factories' BASE_TIME (Mon 2024-03-04 09:00 local) of a local time."""
    return int(day * DAY_S + (hour - 9.0) * 3600)


def stay(vehicle: str, t0: int, t1: int, at: tuple[float, float], step: int = 30) -> list:
    """Drive in from the south, stay at ``at`` (meter free) from t0 to t1, drive out north."""
    n0, e0 = at
    points = [(t0 - 60, n0 - 300.0, e0), (t0 - 30, n0 - 150.0, e0)]
    points += [(t, n0 + 1.0, e0) for t in range(t0, t1 + 1, step)]
    points += [(t1 + 30 * k, n0 + 150.0 * k, e0) for k in range(1, 7)]
    return make_track(vehicle, points, meter="free")


def trip(vehicle: str, t0: int) -> list:
    """Ten minutes with a passenger far from every stand (the vehicle operates)."""
    points = [(t0 + 60 * k, 5000.0 + 200.0 * k, 3000.0) for k in range(11)]
    return make_track(vehicle, points, meter="occupied")


def absence_rows() -> list:
    rows: list = []
    for d in range(N_DAYS):
        rows += trip("absent", local(d, 10))
        if d == 1:
            rows += stay("absent", local(d, 14), local(d, 14.25), (0.0, 0.0))
        rows += trip("present", local(d, 10.5))
        if d not in (3, 7):
            rows += stay("present", local(d, 15), local(d, 15.25), (0.0, 0.0))
        # waits 2 min at S1's edge; GPS puts two fixes (40 s) just outside: still one visit
        t0 = local(d, 16)
        points = [(t0 + 20 * k, 26.0 if k not in (2, 3) else 34.0, 0.0) for k in range(7)]
        points += [(t0 + 120 + 30 * k, 26.0 + 150.0 * k, 0.0) for k in range(1, 7)]
        rows += trip("jitter", local(d, 11)) + make_track("jitter", points, meter="free")
        if d in (2, 9):  # one operating day per window, never at the stand: too few days
            rows += trip("rare", local(d, 12))
        # parked at S2 across midnight, every night; operates by day
        rows += trip("night", local(d, 12.5))
        rows += stay("night", local(d, 23), local(d, 25), (2000.0, -10.0), step=60)
        # by day operates; at night waits 20 min in S2 ∩ S3 behind "night": its S2 visit is
        # released after "night" leaves, past midnight
        rows += trip("late", local(d, 13))
        if d == 0:
            rows += stay("late", local(d, 17), local(d, 17.25), (2000.0, 10.0))
        else:
            rows += stay("late", local(d, 23.33), local(d, 23.66), (2000.0, 10.0))
    return rows


def live_cover() -> tuple[gpd.GeoDataFrame, StandCover]:
    rows = []
    for stand, (north, east, radius) in LIVE_STANDS.items():
        lat, lon = offset_m(north, east)
        circle = gpd.GeoSeries.from_xy([lon], [lat], crs=4326).to_crs(31982).buffer(radius, 64)
        rows.append({"stand_id": stand, "geometry": circle.to_crs(4326).iloc[0]})
    stands = gpd.GeoDataFrame(rows, crs=4326)
    return stands, build_stand_cover(stands)


def local_day(ts: pd.Timestamp) -> dt.date:
    return ts.tz_convert("America/Sao_Paulo").date()


def absence_batch(pings: pd.DataFrame, as_of: dt.date) -> gpd.GeoDataFrame:
    stands, cover = live_cover()
    p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
    memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
    visits = detect_visits(pings, memberships, stands=stands, max_gap_s=300.0)
    return detect_habitual_absence(
        visits, LIVE_LICENCES, pings, as_of=as_of, stands=stands, **LIVE_OPTIONS
    )
