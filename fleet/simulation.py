"""Independent fleet simulator: Porto Alegre taxis on the real stands, with labelled violations.

Written from the public file contract (docs: pings, stands, fleet; the finding kinds) and from the
laws (Porto Alegre's decree of 23 Dec 2019, Pinto Bandeira's Lei 169/2015), not from the
detectors' code: it is the *independent checker* of issue 18. The detectors are run as a black box
(``pontual analyze``) by ``bench/bench_fleet_eval.py``, which scores their findings against the
ground truth written here. ``pontual demo --console`` (``api.demo_console``) runs a short
simulation to fill the web console with proposals, said everywhere to be simulated.
Command line: ``python -m fleet.simulation --out DIR``.

World (real data of the repository)
    - stands: the 364 Porto Alegre stands with ``coord_quality == ok``
      (``data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson``), written as contract Points
      with ``radius_m`` = :data:`STAND_RADIUS_M` (the radius the project draws around POA's points);
    - prefixos: real prefixos of ``data/brazil/taxi_fleet/frota_taxi_poa_2020-03-12.csv`` with their
      real stand (the file's ``ponto`` matched to the stands' ``nome`` after upper-casing and
      collapsing spaces, as the fleet import does); ``--prefixos`` of them in groups of
      :data:`GROUP_SIZE` sharing a stand, so that queues form; no plates are written;
    - the municipal boundary of Porto Alegre (IBGE 1:250k,
      ``data/brazil/boundaries/municipios_poa_pvh_pintobandeira.geojson``).

Metric work in SIRGAS 2000 / UTM 22S (EPSG:31982). Times: local days in America/Sao_Paulo (UTC-3,
no daylight saving since 2019); the simulation starts on Monday :data:`START_DATE`.

Movement model (Porto Alegre has no road network in the repository)
    A route between two points is "straight-ish": a polyline through a few points displaced
    sideways from the straight line, whose length is at most :data:`STRAIGHT_MAX_RATIO` (1.025)
    times the straight line (every ordinary trip is thus within 1.03 of its pickup–drop-off
    line). Speeds 23–40 km/h on average, with red-light pauses of 10–45 s (never within 80 m of a
    stand's centre, so no one dwells at a stand by accident).

Shifts and meter (Livre = ``free``, Ocupado = ``occupied``, Desligado = ``off``)
    Each vehicle has a shift type (early 05:00–14:30, day 07:30–17:30, late 12:00–21:30, night
    18:00–02:00, ±30 min a day), one fixed weekday off and a few random days off. The device
    reports only during the shift (powered with the ignition): the shift starts and ends at home
    with the meter off for 1–3 min. Stand-mode days: drive (free) to the licensed stand, wait in
    FIFO queue at one of :data:`STAND_SLOTS` places within 12 m of the stand's centre (further
    vehicles wait at the *overflow* places 45–61 m from the centre, just outside the stand, and
    move in as places free up); passengers arrive at the stand as a Poisson process and board the
    first vehicle in the queue: the meter turns ``occupied`` while the vehicle is in its place
    (45–75 s of boarding), then the trip; drop-off anywhere (20–50 s paying, ``occupied``), meter
    ``free``; back to the stand, hailed on the way one time in five (hail points are at least
    100 m from every stand's centre). Lunch (meter off) at the group's restaurant, or resting in
    the queue place with the meter off (keeping the place). Roam-mode days: cruise and street
    hails only, never waiting at a stand. Tariff: Bandeira 2 when the default municipal calendar
    allows it at the pickup (20:00–06:00, Saturdays from 14:00, Sundays; Bandeira 1 on holidays
    and in December, which is never wrong), switched to 2 when a ride crosses 20:00 or Saturday
    14:00, kept until the drop-off when it crosses 06:00.

GPS
    A fix every 15 s (±3 s, whole seconds); position error an AR(1) process (correlation time
    90 s, as receivers wander) with a radial RMS of 5–15 m drawn per vehicle-day, plus 1.5 m
    white noise; 2 % of fixes missing at random and bursts of 2–8 missing fixes (never a silence
    over 200 s unless injected); about one single multipath outlier per three vehicle-days
    (50–250 m); ``accuracy_m`` reported; ``speed_kmh`` from the true motion (±1.5).

Violations (positives), each a rule of the law (docs' DOMAIN table):

- ``unlicensed_stand_use`` (POA art. 59 XIII): a taxi drives to a stand no simulated prefixo is
  licensed for, waits there free 10–480 s, and the meter turns occupied inside it; a Táxi
  Acessível waiting 20–30 min at such a stand (art. 46 sole §: no waiting; ``accessible_wait``);
- ``habitual_absence`` (art. 49): "roamers" that operate most days but go to their stand on
  about 3 % of them (share ≤ 0.1 of operating days);
- ``illegal_stand_formation`` (art. 59 XIV; PB art. 20 VII): places ≥ 400 m from every stand
  where 4 taxis wait free 15–35 min, three of them a day, on 8 days (scaled to the period);
- ``longer_route`` (art. 58 XIII; PB art. 25 III): detours of ratio 1.6–2.6 on 2–6 km trips
  (through a side point, or a full circle), half of them to busy places (airport, bus station);
- ``tracking_gap`` (art. 58 IX, 59 VI): the device off 8–15 min in the middle of an occupied
  trip while the taxi drives on;
- ``gps_anomaly``: fixes displaced 3–12 km for 30–150 s, then back on the track;
- ``operating_while_barred`` (arts. 60 V, 59 V, 58 XII, 58 III, 57 XIV): service on days the
  fleet file bars (``suspended`` and ``out_of_operation`` periods, alvará and vistoria expired,
  last vistoria over :data:`MAX_INSPECTION_AGE_DAYS` days old);
- ``driver_not_allowed`` (arts. 60 IV, 57 V, 59 IV, 58 VI): the synthetic registry's episodes
  (:mod:`fleet.sim_registry`: suspended CNH or ICTP, expired ICTP or CNH, a driver not
  registered, another prefixo's auxiliar);
- ``inactivity`` (art. 60 X): prefixos of the fleet never seen; one operating only on day one;
- ``outside_municipality`` (art. 19; PB art. 25 X): a ride to Canoas, Cachoeirinha or Viamão,
  then a new passenger picked up there ≥ 1 km outside the boundary;
- ``queue_jump`` (PB art. 24 II): the passenger boards the second taxi while the first has
  waited ≥ 5 min and stays at least 3 min more;
- ``flag2_misuse`` (PB art. 25 V): Bandeira 2 for a whole weekday daytime ride (09:00–15:00).

Registry (:mod:`fleet.sim_registry`, its own random stream: the fixes of a seed do not change)
    FICTITIOUS drivers (``SINT-C0001``, "Condutor Fictício 0001", ``synthetic`` = ``sim``), a
    titular and 0–2 auxiliares per prefixo handing the vehicle over at lunch, ``driver_id`` on
    every fix; vehicle documents (year, first registration, first alvará, last vistoria).
    Written as ``drivers.csv`` and ``driver_links.csv`` (docs/formatos.md) with a
    ``PROVENANCE.md`` saying that no person in them is real.

Look-alikes (negatives) are in :data:`LOOKALIKES`; some are injected (drop-off at a foreign
stand then a hail, a passenger's waypoint, a petrol-station meeting…), others are found in the
simulated tracks (every boarding at the own stand, every straight trip, every hail within 150 s
after passing within 60 m of a stand, every tariff-2 ride at an allowed hour…). The truth of
``operating_while_barred``, ``habitual_absence``, ``inactivity`` and ``flag2_misuse`` is derived
from what was driven; cases close to a documented threshold are labelled ``ambiguous`` and
counted neither way. The rates scale with days × vehicles; each kind has at least one positive.

Thresholds: the positives clearly exceed and the negatives clearly stay within the documented
defaults of each detector. Runs shorter than :data:`DEFAULT_DAYS` cannot reach ``inactivity``'s
60 days nor ``habitual_absence``'s 30-day window: :func:`scaled_thresholds` then gives the
``--thresholds`` TOML that scales those two kinds to the period; :func:`run_thresholds` adds the
simulation's ``max_inspection_age_days`` (Porto Alegre's rulebook leaves it to the run), and is
written as ``thresholds.toml``; the 64-day default run uses every other default.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray
from pyproj import Transformer
from scipy.signal import lfilter
from scipy.spatial import cKDTree

from fleet.sim_registry import (
    DRIVER_LOOKALIKES,
    MAX_INSPECTION_AGE_DAYS,
    VEHICLE_LOOKALIKES,
    Registry,
    build_registry,
    drivers_frame,
    links_frame,
    provenance_text,
)

REPO = Path(__file__).resolve().parents[1]
STANDS_FILE = REPO / "data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson"
FLEET_FILE = REPO / "data/brazil/taxi_fleet/frota_taxi_poa_2020-03-12.csv"
BOUNDARY_FILE = REPO / "data/brazil/boundaries/municipios_poa_pvh_pintobandeira.geojson"

MUNICIPALITY = "4314902"
TIMEZONE = "America/Sao_Paulo"
TZ = ZoneInfo(TIMEZONE)
START_DATE = dt.date(2024, 3, 4)  # a Monday, outside Carnaval and December
DEFAULT_DAYS = 64
DEFAULT_PREFIXOS = 50
GROUP_SIZE = 5
STAND_RADIUS_M = 30.0
STAND_SLOTS = 3
HAIL_CLEAR_M = 100.0  # street hails and calls at least this far from every stand's centre
STRAIGHT_MAX_RATIO = 1.025
FIX_INTERVAL_S = 15.0
GPS_NOISE_M = (5.0, 15.0)  # radial RMS error of a vehicle-day's fixes, drawn in this range
DAY_S = 86_400
SERVICE_DAY_START_S = 4 * 3600  # a service day runs 04:00–04:00 local (night shifts)

# Documented defaults of the detectors (their module docstrings), used to keep positives clearly
# above and negatives clearly below.
MAX_IDLE_DAYS = 60  # inactivity
HA_WINDOW_DAYS, HA_MIN_OPERATING_DAYS, HA_MIN_SHARE = 30, 10, 0.2  # habitual_absence

# Brazilian national holidays and pontos facultativos (Bandeira 2 is allowed on them).
HOLIDAYS = {
    dt.date(2024, 1, 1),
    dt.date(2024, 2, 12),
    dt.date(2024, 2, 13),
    dt.date(2024, 3, 29),
    dt.date(2024, 4, 21),
    dt.date(2024, 5, 1),
    dt.date(2024, 5, 30),
    dt.date(2024, 9, 7),
    dt.date(2024, 10, 12),
    dt.date(2024, 11, 2),
    dt.date(2024, 11, 15),
    dt.date(2024, 11, 20),
    dt.date(2024, 12, 25),
    dt.date(2025, 1, 1),
    dt.date(2025, 3, 3),
    dt.date(2025, 3, 4),
}

OFF, FREE, OCC = 0, 1, 2
METER_NAMES = {OFF: "off", FREE: "free", OCC: "occupied"}

# Look-alike types per kind (negatives); positives carry a subtype in ``lookalike`` too.
LOOKALIKES: dict[str, dict[str, str]] = {
    "unlicensed_stand_use": {
        "licensed_stand_boarding": "boarding at the vehicle's own licensed stand",
        "accessible_pcd_boarding": "Táxi Acessível boarding a PcD at a foreign stand without "
        "waiting (art. 46)",
        "dropoff_foreign_stand_then_hail": "passenger dropped inside a foreign stand, the meter "
        "switched on again by a street hail ≥ 450 m away 60–100 s later",
        "dropoff_foreign_stand": "passenger dropped inside a foreign stand, left empty",
        "boarding_after_passing_foreign_stand": "street hail (or boarding at the own stand) "
        "within 150 s after driving through a foreign stand",
    },
    "habitual_absence": {
        "regular_presence": "at the licensed stand on most operating days",
        "partial_presence": "at the stand on about half of the operating days",
        "short_absence": "away from the stand for a week, present otherwise",
        "not_operating": "not operating (silent, suspended, reserved) — not absence",
    },
    "illegal_stand_formation": {
        "shared_lunch_meter_off": "the drivers of a stand lunching at one restaurant, meter off",
        "queue_overflow": "free taxis waiting just outside their full stand",
        "petrol_station_meeting": "two free taxis meeting once at a petrol station",
        "one_vehicle_habit": "one free taxi waiting at the same place on several days",
    },
    "longer_route": {
        "straight_trip": "trip within 1.03 of the straight line",
        "direct_between_stands": "direct trip from the stand to another stand",
        "passenger_waypoint": "the passenger had the taxi wait at a stop on the way",
        "faster_ring_road": "a longer but faster road, ratio ≤ 1.25",
    },
    "tracking_gap": {
        "tunnel_short_gap": "silence of 100–200 s with a passenger aboard",
        "lunch_device_off": "device off during lunch, meter off",
        "overnight_off": "device off between shifts, meter off",
    },
    "gps_anomaly": {
        "single_multipath_outlier": "one fix 50–250 m off",
        "device_off_moved": "device off at lunch while driving 2–5 km, back on elsewhere",
    },
    "operating_while_barred": {
        "late_night_service_on_eve": "service until 23:30 local on the eve of a suspension "
        "(already the suspension's first day in UTC)",
        "private_drive_meter_off": "suspended prefixo driven with the meter off",
        "service_on_validity_day": "service on the document's last valid day, until late",
        "suspension_already_ended": "status 'suspended' whose period ended before the data",
        "suspended_not_operating": "suspended prefixo that does not operate",
        "reserved_not_operating": "prefixo in reserva that does not operate",
        **VEHICLE_LOOKALIKES,
    },
    "inactivity": {
        "operating_regularly": "operates most days",
        "reserved_not_operating": "silent during an approved reserva (art. 15)",
        "suspended_not_operating": "silent while suspended",
        "long_vacation": "a break of about half the idle limit",
    },
    "outside_municipality": {
        "dropoff_outside": "ride from Porto Alegre ending in another town (art. 19 allows it)",
        "pickup_near_boundary_inside": "pickup inside the city, 250–400 m from the boundary",
        "home_outside_commute": "driver living in another town, commuting with the meter off",
    },
    "queue_jump": {
        "fifo_head_boarding": "the first free vehicle of the queue boards",
        "two_passengers_together": "two passengers take the second and the first taxi within 15 s",
        "accessible_priority": "a PcD passenger takes the Táxi Acessível out of order (art. 28)",
        "ahead_resting_meter_off": "the vehicle ahead rests with the meter off (Desligado)",
        "hail_after_passing_stand": "street hail within 150 s after driving through a stand "
        "where taxis wait",
    },
    "flag2_misuse": {
        "tariff2_allowed_time": "Bandeira 2 at night, Saturday afternoon or Sunday",
        "carry_over_after_6": "Bandeira 2 set before 06:00 and kept until the drop-off",
        "early_switch_clock_drift": "Bandeira 2 switched 30–60 s before 20:00",
    },
    "driver_not_allowed": DRIVER_LOOKALIKES,
}

TRUTH_COLUMNS = [
    "kind",
    "label",
    "lookalike",
    "vehicle_id",
    "stand_id",
    "place_lat",
    "place_lon",
    "place_radius_m",
    "start",
    "end",
    "note",
]


# --------------------------------------------------------------------------- world


@dataclasses.dataclass
class World:
    """The real stands, prefixos and boundary, in metres (EPSG:31982)."""

    stands: pd.DataFrame  # stand_id, name, lat, lon, x, y, n_licensed
    tree: cKDTree
    boundary: Any  # shapely Polygon (UTM)
    boundary_wgs: dict[str, Any]  # GeoJSON feature
    fleet: pd.DataFrame  # prefixo, stand_id, model
    to_xy: Transformer
    to_ll: Transformer
    xy: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 2)))
    ids: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.xy = self.stands[["x", "y"]].to_numpy(dtype=float)
        self.ids = [str(s) for s in self.stands["stand_id"]]

    def inside_margin(self, x: float, y: float) -> float:
        """Signed distance to the boundary: positive inside, negative outside (m)."""
        p = shapely.Point(x, y)
        d = float(self.boundary.exterior.distance(p))
        return d if self.boundary.contains(p) else -d

    def near_stand(self, x: float, y: float, radius_m: float) -> list[int]:
        """Indices of stands whose centre is within ``radius_m``."""
        return list(self.tree.query_ball_point((x, y), radius_m))

    def nearest_stand_m(self, x: float, y: float) -> float:
        return float(self.tree.query((x, y))[0])


def normalize_name(name: str) -> str:
    """Upper-case and collapse whitespace (how POA's fleet file names its stands)."""
    return re.sub(r"\s+", " ", str(name).strip().upper())


def load_world() -> World:
    """Read the real stands, fleet and boundary of Porto Alegre."""
    to_xy = Transformer.from_crs(4326, 31982, always_xy=True)
    to_ll = Transformer.from_crs(31982, 4326, always_xy=True)
    raw = json.loads(STANDS_FILE.read_text(encoding="utf-8"))
    rows = []
    for f in raw["features"]:
        p = f["properties"]
        if p.get("coord_quality") != "ok" or f.get("geometry") is None:
            continue
        lon, lat = f["geometry"]["coordinates"]
        rows.append(
            {
                "stand_id": str(int(p["codigo"])),
                "name": str(p["nome"]).strip(),
                "lat": lat,
                "lon": lon,
                "key": normalize_name(p["nome"]),
            }
        )
    stands = pd.DataFrame(rows).sort_values("stand_id", key=lambda s: s.astype(int))
    stands = stands.reset_index(drop=True)
    x, y = to_xy.transform(stands["lon"].to_numpy(), stands["lat"].to_numpy())
    stands["x"], stands["y"] = x, y
    fleet_raw = pd.read_csv(FLEET_FILE, dtype=str)
    fleet_raw = fleet_raw[fleet_raw["ponto"].notna()].copy()
    fleet_raw["key"] = fleet_raw["ponto"].map(normalize_name)
    key_to_id = dict(zip(stands["key"], stands["stand_id"], strict=True))
    fleet_raw["stand_id"] = fleet_raw["key"].map(key_to_id)
    fleet = fleet_raw[fleet_raw["stand_id"].notna()][["prefixo", "stand_id", "modelo"]]
    fleet = fleet.rename(columns={"modelo": "model"}).reset_index(drop=True)
    stands["n_licensed"] = stands["stand_id"].map(fleet["stand_id"].value_counts()).fillna(0)
    gj = json.loads(BOUNDARY_FILE.read_text(encoding="utf-8"))
    feat = next(f for f in gj["features"] if f["properties"]["cod_ibge"] == MUNICIPALITY)
    poly = shapely.geometry.shape(feat["geometry"])
    poly_xy = shapely.transform(poly, lambda c: np.column_stack(to_xy.transform(c[:, 0], c[:, 1])))
    shapely.prepare(poly_xy)
    return World(
        stands=stands,
        tree=cKDTree(np.column_stack([x, y])),
        boundary=poly_xy,
        boundary_wgs=feat,
        fleet=fleet,
        to_xy=to_xy,
        to_ll=to_ll,
    )


# --------------------------------------------------------------------------- time


def local_dt(day0: dt.date, t: float) -> dt.datetime:
    """Local wall-clock datetime of simulation second ``t`` (0 = local midnight of ``day0``)."""
    base = dt.datetime.combine(day0, dt.time(0), tzinfo=TZ)
    return base + dt.timedelta(seconds=float(t))


def epoch_utc_s(day0: dt.date) -> int:
    """Unix seconds of the local midnight starting ``day0``."""
    return int(dt.datetime.combine(day0, dt.time(0), tzinfo=TZ).timestamp())


def flag2_allowed(when: dt.datetime) -> bool:
    """The default municipal calendar of Bandeira 2 (nights, Saturday afternoons, Sundays,
    holidays, December) — the documented default of ``flag2_misuse``."""
    d = when.date()
    if when.hour >= 20 or when.hour < 6:
        return True
    if when.weekday() == 6 or d in HOLIDAYS or when.month == 12:
        return True
    return when.weekday() == 5 and when.hour >= 14


def background_tariff(when: dt.datetime) -> int:
    """Tariff a law-abiding driver sets at a pickup: 2 only at night, Saturday afternoon, Sunday."""
    d = when.date()
    if d in HOLIDAYS or when.month == 12:
        return 2 if (when.hour >= 20 or when.hour < 6) else 1
    return 2 if flag2_allowed(when) else 1


# --------------------------------------------------------------------------- tracks

# A leg: (t0, t1, x0, y0, x1, y1, meter, tariff, device_on)
Leg = tuple[float, float, float, float, float, float, int, int, bool]


class Track:
    """One vehicle's true motion as legs of constant velocity (appended in time order)."""

    def __init__(self, vehicle_id: str) -> None:
        self.vehicle_id = vehicle_id
        self.legs: list[Leg] = []
        self.t = 0.0
        self.x = 0.0
        self.y = 0.0
        self.protect: list[tuple[float, float]] = []  # windows where no fix may be lost
        self.quiet: list[tuple[float, float]] = []  # windows kept free of noise injection

    def begin(self, t: float, x: float, y: float) -> None:
        self.t, self.x, self.y = float(t), float(x), float(y)

    def stay_until(self, t1: float, meter: int, tariff: int = 0, *, device: bool = True) -> None:
        if t1 > self.t:
            self.legs.append(
                (self.t, float(t1), self.x, self.y, self.x, self.y, meter, tariff, device)
            )
            self.t = float(t1)

    def stay(self, dt_s: float, meter: int, tariff: int = 0, *, device: bool = True) -> None:
        self.stay_until(self.t + dt_s, meter, tariff, device=device)

    def move_to(
        self, x: float, y: float, dt_s: float, meter: int, tariff: int = 0, *, device: bool = True
    ) -> None:
        t1 = self.t + max(dt_s, 1.0)
        self.legs.append((self.t, t1, self.x, self.y, float(x), float(y), meter, tariff, device))
        self.t, self.x, self.y = t1, float(x), float(y)

    def drive(
        self,
        pts: np.ndarray,
        meter: int,
        rng: np.random.Generator,
        world: World,
        *,
        tariff: int = 0,
        speed_mps: float | None = None,
        device: bool = True,
        pauses: bool = True,
    ) -> float:
        """Drive along ``pts`` (from the current position), with red-light pauses; return m."""
        v = float(speed_mps if speed_mps is not None else rng.uniform(6.5, 11.0))
        full = np.vstack([[self.x, self.y], np.asarray(pts, dtype=float).reshape(-1, 2)])
        seg = np.hypot(*np.diff(full, axis=0).T)
        keep = np.concatenate([[True], seg > 0.5])
        full = full[keep]
        if len(full) < 2:
            return 0.0
        cum = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(full, axis=0).T))])
        total = float(cum[-1])
        stops: list[float] = []
        if pauses:
            s = rng.uniform(500, 1300)
            while s < total - 60:
                stops.append(s)
                s += rng.uniform(500, 1300)
        marks = sorted([(float(c), False) for c in cum[1:]] + [(s, True) for s in stops])
        ms = np.array([m[0] for m in marks])
        mx = np.interp(ms, cum, full[:, 0])
        my = np.interp(ms, cum, full[:, 1])
        pause = np.array([m[1] for m in marks])
        clear = np.zeros(len(marks), dtype=bool)
        if pause.any():
            clear[pause] = world.tree.query(np.column_stack([mx[pause], my[pause]]))[0] > 80.0
        at = 0.0
        for k in range(len(marks)):
            s = float(ms[k])
            if s <= at and not pause[k]:
                continue
            if s > at:
                self.move_to(float(mx[k]), float(my[k]), (s - at) / v, meter, tariff, device=device)
                at = s
            if clear[k]:
                self.stay(rng.uniform(10, 45), meter, tariff, device=device)
        return total

    def position_at(self, t: float) -> tuple[float, float]:
        """True position at time ``t`` (inside the legs)."""
        for leg in reversed(self.legs):
            if leg[0] <= t <= leg[1]:
                f = 0.0 if leg[1] == leg[0] else (t - leg[0]) / (leg[1] - leg[0])
                return leg[2] + f * (leg[4] - leg[2]), leg[3] + f * (leg[5] - leg[3])
            if leg[1] < t:
                break
        return self.x, self.y

    def split_at(self, t: float, first: int) -> None:
        """Split the leg containing ``t`` (searching from index ``first``)."""
        for i in range(first, len(self.legs)):
            t0, t1, x0, y0, x1, y1, m, tr, dev = self.legs[i]
            if t0 < t < t1:
                f = (t - t0) / (t1 - t0)
                xm, ym = x0 + f * (x1 - x0), y0 + f * (y1 - y0)
                self.legs[i] = (t0, t, x0, y0, xm, ym, m, tr, dev)
                self.legs.insert(i + 1, (t, t1, xm, ym, x1, y1, m, tr, dev))
                return

    def set_tariff(self, first: int, t_from: float, tariff: int) -> None:
        """Set the tariff of occupied legs from ``t_from`` on (legs from index ``first``)."""
        self.split_at(t_from, first)
        for i in range(first, len(self.legs)):
            leg = self.legs[i]
            if leg[0] >= t_from and leg[6] == OCC:
                self.legs[i] = leg[:7] + (tariff, leg[8])

    def set_device(self, first: int, t0: float, t1: float, device: bool) -> None:
        """Switch the device on/off between ``t0`` and ``t1`` (legs from index ``first``)."""
        self.split_at(t0, first)
        self.split_at(t1, first)
        for i in range(first, len(self.legs)):
            leg = self.legs[i]
            if leg[0] >= t0 and leg[1] <= t1:
                self.legs[i] = leg[:8] + (device,)


def path_length(pts: np.ndarray) -> float:
    pts = np.asarray(pts, dtype=float)
    return float(np.hypot(*np.diff(pts, axis=0).T).sum()) if len(pts) > 1 else 0.0


def straight_route(
    a: np.ndarray, b: np.ndarray, rng: np.random.Generator, max_ratio: float = STRAIGHT_MAX_RATIO
) -> np.ndarray:
    """Polyline from ``a`` to ``b`` at most ``max_ratio`` times the straight line (incl. a, b)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = b - a
    length = float(np.hypot(*d))
    if length < 80:
        return np.vstack([a, b])
    n = max(1, int(length // 450))
    fr = np.sort(rng.uniform(0.08, 0.92, n))
    perp = np.array([-d[1], d[0]]) / length
    off = rng.normal(0.0, 1.0, n) * 0.04 * length / math.sqrt(n)
    for _ in range(30):
        pts = np.vstack([a, a + fr[:, None] * d + off[:, None] * perp, b])
        if path_length(pts) <= max_ratio * length:
            return pts
        off *= 0.7
    return np.vstack([a, b])


def corridor_route(
    a: np.ndarray, b: np.ndarray, ratio: float, side: int, rng: np.random.Generator
) -> np.ndarray:
    """A detour through a side point, total about ``ratio`` times the straight line."""
    d = b - a
    length = float(np.hypot(*d))
    perp = np.array([-d[1], d[0]]) / length
    h = 0.5 * length * math.sqrt(max(ratio**2 - 1.0, 0.0))
    w = a + 0.5 * d + side * h * perp
    first = straight_route(a, w, rng, 1.01)
    second = straight_route(w, b, rng, 1.01)
    return np.vstack([first, second[1:]])


def loop_route(a: np.ndarray, b: np.ndarray, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Straight to the middle, a full circle (circling), then on to ``b``."""
    d = b - a
    length = float(np.hypot(*d))
    m = a + rng.uniform(0.35, 0.65) * d
    r = (ratio - 1.0) * length / (2 * math.pi)
    c_ang = rng.uniform(0, 2 * math.pi)
    centre = m + r * np.array([math.cos(c_ang), math.sin(c_ang)])
    start = c_ang + math.pi
    sign = rng.choice([-1.0, 1.0])
    angs = start + sign * np.linspace(0, 2 * math.pi, 25)
    circle = centre + r * np.column_stack([np.cos(angs), np.sin(angs)])
    return np.vstack(
        [straight_route(a, m, rng, 1.01), circle[1:], straight_route(m, b, rng, 1.01)[1:]]
    )


# --------------------------------------------------------------------------- fleet and roles

SHIFTS = {  # local seconds from the service day's midnight
    "early": (5 * 3600, 14 * 3600 + 1800, 10 * 3600 + 1800),  # start, end, lunch
    "day": (7 * 3600 + 1800, 17 * 3600 + 1800, 12 * 3600),
    "late": (12 * 3600, 21 * 3600 + 1800, 15 * 3600 + 1800),
    "night": (18 * 3600, 26 * 3600, 22 * 3600 + 1800),
}
GROUP_SHIFTS = ["early", "day", "day", "late", "night"]

# Roles with their own behaviour (one vehicle each unless said); the others are "plain".
SPECIAL_ROLES = [
    "never_seen",
    "never_seen",
    "reserved_silent",
    "suspended_silent",
    "stopped_early",
    "long_vacation",
    "roamer",
    "roamer",
    "partial_presence",
    "short_absence",
    "barred_suspended",
    "barred_out_of_operation",
    "barred_alvara",
    "barred_inspection",
    "barred_compliant",
    "suspension_past",
    "accessible",
    "accessible",
    "home_outside",
]
SILENT_ROLES = {"never_seen", "reserved_silent", "suspended_silent"}
# Roles whose stand-mode days host injected episodes and ride changes.
EPISODE_ROLES = {
    "plain",
    "accessible",
    "home_outside",
    "partial_presence",
    "short_absence",
    "long_vacation",
    "suspension_past",
}

# Targets for a 50-prefixo, 64-day run (about 2,600 working vehicle-days); scaled by the
# number of working vehicle-days, at least one each.
TARGETS = {
    "unlicensed": 30,
    "accessible_pcd": 16,
    "accessible_wait": 4,
    "dest_foreign_hail": 30,
    "dest_foreign": 30,
    "detour": 60,
    "waypoint": 30,
    "ring": 30,
    "gap": 30,
    "tunnel": 40,
    "stretch": 30,
    "outside_then_pickup": 20,
    "dest_outside": 20,
    "near_boundary": 20,
    "flag2_day": 30,
    "flag2_carry": 20,
    "flag2_early": 20,
    "queue_jump": 40,
    "two_pax": 30,
    "accessible_priority": 10,
    "formation_places": 3,
    "petrol": 4,
    "habit": 2,
}
REFERENCE_VEHICLE_DAYS = 2600.0

TOWNS = {  # points of the neighbouring towns (pickups/drop-offs outside Porto Alegre)
    "Canoas": (-51.1836, -29.9178),
    "Cachoeirinha": (-51.0937, -29.9511),
    "Viamão": (-51.0233, -30.0811),
    "Alvorada": (-51.0700, -29.9800),
}


@dataclasses.dataclass
class Episode:
    kind: str
    day: int
    t: float
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Group:
    idx: int
    stand_idx: int
    stand_id: str
    centre: np.ndarray
    axis: np.ndarray
    slots: list[np.ndarray]
    overflow: list[np.ndarray]
    approach: np.ndarray
    lunch: np.ndarray
    members: list[Vehicle] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Vehicle:
    vid: str
    stand_id: str
    group: int
    role: str
    accessible: bool
    shift: str
    home: np.ndarray
    rng: np.random.Generator
    track: Track
    off_weekday: int
    status: str = "active"
    status_since: dt.date | None = None
    status_until: dt.date | None = None
    alvara_valid_until: dt.date | None = None
    inspection_valid_until: dt.date | None = None
    year: int | None = None  # documents (fleet.sim_registry)
    first_registered_on: dt.date | None = None
    alvara_first_issued_on: dt.date | None = None
    last_inspection_on: dt.date | None = None
    mode: dict[int, str] = dataclasses.field(default_factory=dict)  # day -> stand|roam|private
    episodes: dict[int, list[Episode]] = dataclasses.field(default_factory=dict)
    windows: dict[int, tuple[float, float, float]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Sim:
    """Everything a run produces, before writing."""

    world: World
    seed: int
    days: int
    day0: dt.date
    groups: list[Group]
    vehicles: list[Vehicle]
    truth: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    rides: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    presence: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    waits: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # formation stops
    pois: list[np.ndarray] = dataclasses.field(default_factory=list)
    foreign: list[int] = dataclasses.field(default_factory=list)  # usable foreign stands
    pings: pd.DataFrame | None = None
    gps_noise_m: tuple[float, float] = GPS_NOISE_M
    max_idle_days: int = MAX_IDLE_DAYS
    ha_window_days: int = HA_WINDOW_DAYS
    ha_min_operating_days: int = HA_MIN_OPERATING_DAYS
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    quota: dict[tuple[int, int], dict[str, int]] = dataclasses.field(default_factory=dict)
    places: list[tuple[str, str, np.ndarray]] = dataclasses.field(default_factory=list)
    overflow_waits: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    device_off_moves: list[tuple[str, float, float]] = dataclasses.field(default_factory=list)
    registry: Registry | None = None  # synthetic drivers and links (fleet.sim_registry)
    registry_cases: dict[str, Any] = dataclasses.field(default_factory=dict)

    def t_of(self, day: int, local_s: float) -> float:
        return day * DAY_S + local_s

    def local(self, t: float) -> dt.datetime:
        return local_dt(self.day0, t)

    def iso(self, t: float) -> str:
        return dt.datetime.fromtimestamp(epoch_utc_s(self.day0) + t, tz=dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )

    def day_of(self, t: float) -> int:
        return (self.local(t).date() - self.day0).days

    def add_truth(
        self,
        kind: str,
        label: str,
        lookalike: str,
        *,
        vehicle_id: str | None = None,
        stand_id: str | None = None,
        start: float,
        end: float,
        place: np.ndarray | None = None,
        place_radius_m: float | None = None,
        note: str = "",
    ) -> None:
        lat = lon = None
        if place is not None:
            lon, lat = self.world.to_ll.transform(float(place[0]), float(place[1]))
        self.truth.append(
            {
                "kind": kind,
                "label": label,
                "lookalike": lookalike,
                "vehicle_id": vehicle_id,
                "stand_id": stand_id,
                "place_lat": lat,
                "place_lon": lon,
                "place_radius_m": place_radius_m,
                "start": self.iso(start),
                "end": self.iso(end),
                "note": note,
            }
        )


def scaled_thresholds(days: int) -> dict[str, dict[str, float]]:
    """``--thresholds`` for a period too short for the 60-day and 30-day rules (else empty)."""
    out: dict[str, dict[str, float]] = {}
    if days < MAX_IDLE_DAYS + 4:
        out["inactivity"] = {"max_idle_days": max(2, days - 3)}
    if days < HA_WINDOW_DAYS + 4:
        out["habitual_absence"] = {"window_days": days, "min_operating_days": max(2, days // 2)}
    return out


def run_thresholds(days: int) -> dict[str, dict[str, float]]:
    """The run's ``--thresholds``: :func:`scaled_thresholds` and the simulation's vistoria period
    (``max_inspection_age_days``; Porto Alegre's rulebook leaves it to the run)."""
    return scaled_thresholds(days) | {
        "operating_while_barred": {"max_inspection_age_days": MAX_INSPECTION_AGE_DAYS}
    }


def _iso(day: dt.date | None) -> str:
    return "" if day is None else day.isoformat()


def _pick_groups(world: World, rng: np.random.Generator, n_groups: int) -> list[int]:
    """Stand indices of well-separated stands with many real licensees, inside the city."""
    st = world.stands
    dist_m = world.tree.query(np.column_stack([st["x"], st["y"]]), k=2)[0]
    assert isinstance(dist_m, np.ndarray)  # many points, k=2: an (n, 2) array
    nn = dist_m[:, 1]
    ok = (st["n_licensed"] >= 10) & (nn >= 150)
    margin = np.array([world.inside_margin(x, y) for x, y in zip(st["x"], st["y"], strict=True)])
    ok &= margin >= 1000
    cand = list(np.flatnonzero(ok.to_numpy()))
    rng.shuffle(cand)
    chosen: list[int] = []
    for i in cand:
        p = world.xy[i].copy()
        if all(np.hypot(*(p - world.xy[j])) >= 1500 for j in chosen):
            chosen.append(int(i))
        if len(chosen) == n_groups:
            break
    if len(chosen) < n_groups:
        msg = f"only {len(chosen)} separated stands for {n_groups} groups"
        raise ValueError(msg)
    return chosen


def _free_point(
    world: World,
    rng: np.random.Generator,
    near: np.ndarray,
    r_min: float,
    r_max: float,
    *,
    stand_clear_m: float = 100.0,
    margin_m: float = 400.0,
    tries: int = 200,
) -> np.ndarray | None:
    """A random point r_min–r_max m from ``near``, inside the city, clear of every stand."""
    for _ in range(tries):
        ang = rng.uniform(0, 2 * math.pi)
        r = rng.uniform(r_min, r_max)
        p = near + r * np.array([math.cos(ang), math.sin(ang)])
        if world.nearest_stand_m(*p) < stand_clear_m:
            continue
        if world.inside_margin(*p) < margin_m:
            continue
        return p
    return None


def build_sim(*, seed: int, days: int, n_prefixos: int) -> Sim:
    """Choose stands, prefixos, roles, homes, statuses and the day plans (no movement yet)."""
    if days < 4:
        msg = f"days was {days}; expected at least 4"
        raise ValueError(msg)
    if n_prefixos < len(SPECIAL_ROLES) + 4:
        msg = f"prefixos was {n_prefixos}; expected at least {len(SPECIAL_ROLES) + 4}"
        raise ValueError(msg)
    world = load_world()
    rng = np.random.default_rng(seed)
    n_groups = math.ceil(n_prefixos / GROUP_SIZE)
    stand_idx = _pick_groups(world, rng, n_groups)
    sim = Sim(world=world, seed=seed, days=days, day0=START_DATE, groups=[], vehicles=[])
    th = scaled_thresholds(days)
    sim.max_idle_days = int(th.get("inactivity", {}).get("max_idle_days", MAX_IDLE_DAYS))
    ha = th.get("habitual_absence", {})
    sim.ha_window_days = int(ha.get("window_days", HA_WINDOW_DAYS))
    sim.ha_min_operating_days = int(ha.get("min_operating_days", HA_MIN_OPERATING_DAYS))
    seeds = np.random.SeedSequence(seed).spawn(n_prefixos + 1)
    used: set[str] = set()
    n_left = n_prefixos
    for g_i, si in enumerate(stand_idx):
        centre = world.xy[si].copy()
        ang = rng.uniform(0, 2 * math.pi)
        axis = np.array([math.cos(ang), math.sin(ang)])
        perp = np.array([-axis[1], axis[0]])
        slots = [centre + axis * a + perp * 2.5 for a in (-12.0, 0.0, 12.0)]
        overflow = [centre + axis * a + perp * 2.5 for a in (45.0, 53.0, 61.0)]
        lunch = _free_point(world, rng, centre, 300, 700, stand_clear_m=120, margin_m=300)
        if lunch is None:
            lunch = centre + perp * 400
        g = Group(
            idx=g_i,
            stand_idx=si,
            stand_id=world.ids[si],
            centre=centre,
            axis=axis,
            slots=slots,
            overflow=overflow,
            approach=centre + axis * 85.0,
            lunch=lunch,
        )
        sim.groups.append(g)
        pool = world.fleet[
            (world.fleet["stand_id"] == g.stand_id) & ~world.fleet["prefixo"].isin(used)
        ]
        k = min(GROUP_SIZE, n_left)
        pick = pool.sample(n=k, random_state=int(rng.integers(2**31)))
        shifts = list(GROUP_SHIFTS)
        rng.shuffle(shifts)
        for j, (_, row) in enumerate(pick.iterrows()):
            vid = str(row["prefixo"])
            used.add(vid)
            vrng = np.random.default_rng(seeds[len(sim.vehicles)])
            home = _free_point(world, vrng, centre, 2500, 8000, margin_m=600)
            if home is None:
                home = centre + axis * 3000
            v = Vehicle(
                vid=vid,
                stand_id=g.stand_id,
                group=g_i,
                role="plain",
                accessible=False,
                shift=shifts[j % len(shifts)],
                home=home,
                rng=vrng,
                track=Track(vid),
                off_weekday=int(vrng.integers(7)),
            )
            g.members.append(v)
            sim.vehicles.append(v)
        n_left -= k
    _assign_roles(sim, rng)
    _plan_days(sim, rng)
    _schedule_episodes(sim, rng)
    return sim


def _assign_roles(sim: Sim, rng: np.random.Generator) -> None:
    vs = list(sim.vehicles)
    order = rng.permutation(len(vs))
    roles = list(SPECIAL_ROLES)
    if sim.days - 1 < sim.max_idle_days + 2:
        roles.remove("stopped_early")
    if sim.max_idle_days < 12:
        roles.remove("long_vacation")
    # accessible vehicles: prefer vans (SPIN, DOBLÒ), in distinct groups, not night shift
    taken: set[int] = set()
    vans = [
        i
        for i in order
        if any(
            m in str(sim.world.fleet.set_index("prefixo").at[vs[i].vid, "model"]).upper()
            for m in ("SPIN", "DOBL")
        )
    ]
    acc_groups: set[int] = set()
    for i in list(vans) + [i for i in order if i not in vans]:
        if len(acc_groups) == 2:
            break
        if vs[i].group in acc_groups or vs[i].shift == "night":
            continue
        vs[i].role, vs[i].accessible = "accessible", True
        acc_groups.add(vs[i].group)
        taken.add(int(i))
    roles.remove("accessible")
    roles.remove("accessible")
    d0, n = sim.day0, sim.days
    rest = [int(i) for i in order if int(i) not in taken]
    for role in roles:
        # day-shift roles for status work (the eve case needs a late finish)
        i = rest.pop(0)
        v = vs[i]
        v.role = role
        if role == "reserved_silent":
            v.status, v.status_since = "reserved", d0 - dt.timedelta(days=30)
            v.status_until = d0 + dt.timedelta(days=n + 60)
        elif role == "suspended_silent":
            v.status, v.status_since = "suspended", d0 - dt.timedelta(days=5)
            v.status_until = d0 + dt.timedelta(days=n + 30)
        elif role == "suspension_past":
            v.status, v.status_since = "suspended", d0 - dt.timedelta(days=40)
            v.status_until = d0 - dt.timedelta(days=10)
        elif role == "barred_suspended":
            a = n // 3
            v.status, v.status_since = "suspended", d0 + dt.timedelta(days=a)
            v.status_until = d0 + dt.timedelta(days=a + max(2, n // 8))
        elif role == "barred_out_of_operation":
            a = (2 * n) // 3
            v.status, v.status_since = "out_of_operation", d0 + dt.timedelta(days=a)
            v.status_until = d0 + dt.timedelta(days=min(n - 1, a + max(1, n // 10)))
        elif role == "barred_alvara":
            v.alvara_valid_until = d0 + dt.timedelta(days=max(1, n - 9))
        elif role == "barred_inspection":
            v.inspection_valid_until = d0 + dt.timedelta(days=max(1, n - 6))
        elif role == "barred_compliant":
            a = max(2, n // 2)
            v.status, v.status_since = "suspended", d0 + dt.timedelta(days=a)
            v.status_until = d0 + dt.timedelta(days=min(n - 2, a + max(1, n // 10)))
            v.shift = "late"
        elif role == "home_outside":
            town = np.array(sim.world.to_xy.transform(*TOWNS["Alvorada"]))
            for _ in range(200):
                p = town + v.rng.normal(0, 400, 2)
                if sim.world.inside_margin(*p) <= -1200:
                    v.home = p
                    break
    for v in vs:
        if v.role == "roamer" and v.shift == "night":
            v.shift = "day"
        if v.role in ("barred_alvara", "barred_compliant"):
            v.shift = "late"


def _plan_days(sim: Sim, rng: np.random.Generator) -> None:
    """Working days, mode (stand/roam), shift window and lunch of every vehicle."""
    n = sim.days
    for v in sim.vehicles:
        r = v.rng
        for d in range(n):
            date = sim.day0 + dt.timedelta(days=d)
            works = date.weekday() != v.off_weekday and r.random() > 0.04
            mode = "stand"
            if v.role in SILENT_ROLES:
                works = False
            elif v.role == "stopped_early":
                works = d == 0
            elif v.role == "long_vacation":
                length = min(35, sim.max_idle_days - 10)
                a = max(1, (n - length) // 3)
                works = works and not (a <= d < a + length)
            elif v.role == "roamer":
                mode = "stand" if r.random() < 0.03 else "roam"
            elif v.role == "partial_presence":
                mode = "stand" if r.random() < 0.5 else "roam"
            elif v.role == "short_absence":
                a = max(1, n - 12)
                if a <= d < a + min(7, max(1, n // 4)):
                    mode = "roam"
            elif v.role in ("barred_suspended", "barred_out_of_operation"):
                assert v.status_since is not None and v.status_until is not None
                if v.status_since <= date <= v.status_until:
                    works, mode = r.random() < 0.6, "roam"
                    if d == (v.status_since - sim.day0).days:
                        works = True
            elif v.role == "barred_compliant":
                assert v.status_since is not None and v.status_until is not None
                if v.status_since <= date <= v.status_until:
                    works = date == v.status_since + dt.timedelta(days=1)
                    mode = "private"
                elif date == v.status_since - dt.timedelta(days=1):
                    works = True
            if d == n - 1 and v.shift == "night":
                works = works and mode != "private"
            if not works:
                continue
            v.mode[d] = mode
            s, e, lunch = SHIFTS[v.shift]
            jitter = r.uniform(-1800, 1800)
            start, end = s + jitter, e + jitter + r.uniform(-900, 900)
            if d == n - 1:
                end = min(end, 23 * 3600 + 1800)  # the data ends with the last local day
            if v.role in ("barred_compliant", "barred_alvara"):
                end = min(end, 23 * 3600 + 2400)  # the eve/validity day ends before midnight
            v.windows[d] = (sim.t_of(d, start), sim.t_of(d, end), sim.t_of(d, lunch + jitter))


RIDE_MODS = {
    "dest_foreign_hail",
    "dest_foreign",
    "detour",
    "waypoint",
    "ring",
    "gap",
    "tunnel",
    "outside_then_pickup",
    "dest_outside",
}


def _counts(sim: Sim) -> dict[str, int]:
    vd = sum(len(v.windows) for v in sim.vehicles)
    f = vd / REFERENCE_VEHICLE_DAYS
    return {k: max(1, round(n * f)) for k, n in TARGETS.items()}


def _schedule_episodes(sim: Sim, rng: np.random.Generator) -> None:
    counts = _counts(sim)
    sim.counts = counts
    elig = [
        (v, d)
        for v in sim.vehicles
        if v.role in EPISODE_ROLES
        for d in sorted(v.windows)
        if v.mode[d] == "stand"
    ]
    load: dict[tuple[str, int], int] = {}

    def pick(pool: list[tuple[Vehicle, int]]) -> tuple[Vehicle, int] | None:
        pool = [(v, d) for v, d in pool if load.get((v.vid, d), 0) < 3]
        if not pool:
            return None
        v, d = pool[int(rng.integers(len(pool)))]
        load[(v.vid, d)] = load.get((v.vid, d), 0) + 1
        return v, d

    def add(v: Vehicle, d: int, kind: str, t: float, **params: Any) -> None:
        v.episodes.setdefault(d, []).append(Episode(kind, d, t, params))

    def any_time(v: Vehicle, d: int) -> float:
        s, e, _ = v.windows[d]
        return float(rng.uniform(s + 2700, max(s + 2800, e - 7200)))

    def weekday_ok(d: int) -> bool:
        date = sim.day0 + dt.timedelta(days=d)
        return date.weekday() < 5 and date not in HOLIDAYS and date.month != 12

    acc = [(v, d) for v, d in elig if v.accessible]
    plain = [(v, d) for v, d in elig if not v.accessible]
    simple = {
        "unlicensed": plain,
        "accessible_pcd": acc,
        "accessible_wait": acc,
        "dest_foreign_hail": elig,
        "dest_foreign": elig,
        "detour": elig,
        "waypoint": elig,
        "ring": elig,
        "gap": elig,
        "tunnel": elig,
        "outside_then_pickup": plain,
        "dest_outside": elig,
    }
    for kind, pool in simple.items():
        for _ in range(counts[kind]):
            got = pick(pool)
            if got:
                v, d = got
                add(v, d, kind, any_time(v, d))
    for _ in range(counts["near_boundary"]):
        got = pick(elig)
        if got:
            v, d = got
            add(v, d, "call", any_time(v, d), mod="near_boundary")
    day_pool = [
        (v, d)
        for v, d in plain
        if weekday_ok(d)
        and min(v.windows[d][1] - 3600, sim.t_of(d, 15 * 3600))
        > max(v.windows[d][0] + 1800, sim.t_of(d, 9 * 3600))
    ]
    for _ in range(counts["flag2_day"]):
        got = pick(day_pool)
        if got:  # a call, so that the ride happens in the day (Bandeira 2 all along)
            v, d = got
            s, e, _ = v.windows[d]
            lo, hi = max(s + 1800, sim.t_of(d, 9 * 3600)), min(e - 3600, sim.t_of(d, 15 * 3600))
            add(v, d, "call", float(rng.uniform(lo, hi)), mod="flag2_day")
    early = [
        (v, d)
        for v, d in elig
        if v.shift == "early" and v.windows[d][0] <= sim.t_of(d, 5 * 3600 + 1200)
    ]
    for _ in range(counts["flag2_carry"]):
        got = pick(early)
        if got:
            v, d = got
            add(
                v,
                d,
                "call",
                sim.t_of(d, rng.uniform(5 * 3600 + 1500, 5 * 3600 + 2100)),
                mod="flag2_carry",
            )
    late = [
        (v, d)
        for v, d in elig
        if v.windows[d][1] >= sim.t_of(d, 21 * 3600)
        and v.windows[d][0] <= sim.t_of(d, 18 * 3600 + 1800)
    ]
    for _ in range(counts["flag2_early"]):
        got = pick(late)
        if got:
            v, d = got
            add(
                v,
                d,
                "call",
                sim.t_of(d, rng.uniform(19 * 3600 + 900, 19 * 3600 + 1500)),
                mod="flag2_early",
            )
    # the eve of a suspension and a document's last valid day: service until late
    for v in sim.vehicles:
        last: dt.date | None = None
        if v.role == "barred_compliant" and v.status_since is not None:
            last = v.status_since - dt.timedelta(days=1)
        elif v.role == "barred_alvara":
            last = v.alvara_valid_until
        if last is not None:
            d = (last - sim.day0).days
            if d in v.windows:
                add(v, d, "call", sim.t_of(d, 22 * 3600 + 1500), mod="late_night")
    _schedule_formations(sim, rng, counts, elig, load)
    # queue quotas per (group, day)
    sim.quota = {}
    gdays = [(g.idx, d) for g in sim.groups for d in range(sim.days)]
    acc_groups = {v.group for v in sim.vehicles if v.accessible}
    for kind in ("queue_jump", "two_pax", "accessible_priority"):
        gd_pool = [gd for gd in gdays if kind != "accessible_priority" or gd[0] in acc_groups]
        # a little over the target: not every quota finds its occasion
        for _ in range(int(math.ceil(counts[kind] * 1.4))):
            gd = gd_pool[int(rng.integers(len(gd_pool)))]
            q = sim.quota.setdefault(gd, {})
            q[kind] = q.get(kind, 0) + 1


def _schedule_formations(
    sim: Sim,
    rng: np.random.Generator,
    counts: dict[str, int],
    elig: list[tuple[Vehicle, int]],
    load: dict[tuple[str, int], int],
) -> None:
    world = sim.world
    centres = np.array([g.centre for g in sim.groups])
    mid = centres.mean(axis=0)
    taken: list[np.ndarray] = [g.lunch for g in sim.groups]
    sim.places = []

    def new_place() -> np.ndarray:
        for _ in range(500):
            p = _free_point(world, rng, mid, 500, 6000, stand_clear_m=400, margin_m=800)
            if p is not None and all(np.hypot(*(p - q)) >= 1000 for q in taken):
                taken.append(p)
                return p
        msg = "no room for an informal place"
        raise ValueError(msg)

    by_vehicle: dict[str, list[int]] = {}
    vmap = {v.vid: v for v in sim.vehicles}
    for v, d in elig:
        if not v.accessible:
            by_vehicle.setdefault(v.vid, []).append(d)

    def occasions(vids: list[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for vid in vids:
            for d in by_vehicle[vid]:
                out.setdefault(d, []).append(vid)
        return out

    def time_in(v: Vehicle, d: int, base: float) -> float:
        s, e, _ = v.windows[d]
        return float(min(max(base + rng.uniform(0, 1200), s + 2400), e - 5400))

    vids = sorted(by_vehicle)
    n_days_pos = max(4, round(8 * sim.days / DEFAULT_DAYS))
    for _ in range(counts["formation_places"]):
        place = new_place()
        for _attempt in range(50):
            group_vids = list(rng.choice(vids, size=min(4, len(vids)), replace=False))
            occ = {d: vs for d, vs in occasions(group_vids).items() if len(vs) >= 3}
            if len(occ) >= min(n_days_pos, 4):
                break
        days_sel = sorted(rng.choice(sorted(occ), size=min(n_days_pos, len(occ)), replace=False))
        for d in days_sel:
            members = list(rng.choice(occ[d], size=3, replace=False))
            wins = [vmap[m].windows[d] for m in members]
            lo = max(w[0] for w in wins) + 2400
            hi = min(w[1] for w in wins) - 7200
            base = float(rng.uniform(lo, hi)) if hi > lo else lo
            for m in members:
                vmap[m].episodes.setdefault(int(d), []).append(
                    Episode(
                        "formation",
                        int(d),
                        time_in(vmap[m], int(d), base),
                        {"place": place, "label": "positive", "type": "informal_rank"},
                    )
                )
                load[(m, int(d))] = load.get((m, int(d)), 0) + 1
        sim.places.append(("positive", "informal_rank", place))
    for _ in range(counts["petrol"]):
        place = new_place()
        for _attempt in range(50):
            pair = list(rng.choice(vids, size=2, replace=False))
            occ = {d: vs for d, vs in occasions(pair).items() if len(vs) == 2}
            if occ:
                break
        d = int(rng.choice(sorted(occ)))
        wins = [vmap[m].windows[d] for m in pair]
        base = max(w[0] for w in wins) + 2400
        for m in pair:
            vmap[m].episodes.setdefault(d, []).append(
                Episode(
                    "formation",
                    d,
                    time_in(vmap[m], d, base),
                    {"place": place, "label": "negative", "type": "petrol_station_meeting"},
                )
            )
        sim.places.append(("negative", "petrol_station_meeting", place))
    for _ in range(counts["habit"]):
        place = new_place()
        vid = str(rng.choice(vids))
        ds = sorted(rng.choice(by_vehicle[vid], size=min(5, len(by_vehicle[vid])), replace=False))
        for d in ds:
            v = vmap[vid]
            v.episodes.setdefault(int(d), []).append(
                Episode(
                    "formation",
                    int(d),
                    time_in(v, int(d), v.windows[int(d)][0] + 3600),
                    {"place": place, "label": "negative", "type": "one_vehicle_habit"},
                )
            )
        sim.places.append(("negative", "one_vehicle_habit", place))


# --------------------------------------------------------------------------- one day of driving


@dataclasses.dataclass
class _VS:
    """A vehicle's state during one service day."""

    v: Vehicle
    start: float
    end: float
    lunch_at: float
    state: str = "drive"  # drive | queue | rest | done
    arrived: float = 0.0
    slot: int | None = None
    ov: int | None = None
    ov_since: float = 0.0
    slot_since: float = 0.0
    lunched: bool = False
    end_due: bool = False
    hold_until: float = 0.0
    pending: list[Episode] = dataclasses.field(default_factory=list)
    mods: list[Episode] = dataclasses.field(default_factory=list)


class _DayRunner:
    """Event-driven simulation of one group's stand (or of roaming vehicles) for a service day."""

    def __init__(self, sim: Sim, day: int, group: Group | None) -> None:
        self.sim, self.day, self.g = sim, day, group
        self.world = sim.world
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.queue: list[_VS] = []
        self.slots: list[_VS | None] = [None] * STAND_SLOTS
        self.ov: list[_VS | None] = [None] * 3
        self.hold_until = 0.0
        self.quota = dict(sim.quota.get((group.idx, day), {})) if group else {}

    @property
    def group(self) -> Group:
        """The stand's group: queue and stand decisions happen only on a group's day."""
        assert self.g is not None
        return self.g

    # ---------------------------------------------------------------- events
    def push(self, t: float, kind: str, data: Any = None) -> None:
        heapq.heappush(self.heap, (float(t), next(self.seq), kind, data))

    def run(self, members: list[Vehicle]) -> None:
        states = []
        for v in members:
            s, e, lunch = v.windows[self.day]
            vs = _VS(v=v, start=s, end=e, lunch_at=lunch)
            states.append(vs)
            self.start_shift(vs)
            if vs.state == "done":
                continue
            if self.g is None:
                self.roam(vs)
                continue
            self.drive_to(vs, self.g.approach, FREE)
            self.push(vs.v.track.t, "arrive", vs)
            self.push(e, "end", vs)
            self.push(lunch, "lunch", vs)
            for ep in v.episodes.get(self.day, []):
                self.push(ep.t, "episode", (vs, ep))
        if self.g is None or not states:
            return
        for t in self.passenger_times(states):
            self.push(t, "pax")
        while self.heap:
            t, _, kind, data = heapq.heappop(self.heap)
            getattr(self, "on_" + kind)(t, data)

    def passenger_times(self, states: list[_VS]) -> list[float]:
        r = self.g.members[0].rng if self.g else np.random.default_rng(0)
        lo, hi = min(s.start for s in states), max(s.end for s in states)
        prof = {
            4: 0.3,
            5: 0.3,
            6: 1.3,
            7: 1.3,
            8: 1.3,
            9: 1.0,
            10: 1.0,
            11: 1.0,
            12: 1.1,
            13: 1.1,
            14: 1.0,
            15: 1.0,
            16: 1.0,
            17: 1.3,
            18: 1.3,
            19: 1.3,
            20: 0.8,
            21: 0.8,
            22: 0.8,
            23: 0.8,
        }
        lam_max = 0.95 / 3600 * 1.3 * len(states)
        out: list[float] = []
        t = lo
        while True:
            t += r.exponential(1 / lam_max)
            if t >= hi:
                return out
            on = sum(1 for s in states if s.start <= t < s.end)
            h = int((t % DAY_S) // 3600) % 24
            lam = 0.95 / 3600 * prof.get(h, 0.4) * on
            if r.random() < lam / lam_max:
                out.append(t)

    def on_arrive(self, t: float, vs: _VS) -> None:
        if self.due(vs):
            self.cont(vs)
        else:
            self.join(vs, t)

    def on_end(self, t: float, vs: _VS) -> None:
        if vs.state in ("queue", "rest"):
            if t < vs.hold_until:
                self.push(vs.hold_until, "end", vs)
                return
            self.leave(vs, t)
            self.go_home(vs)
        elif vs.state != "done":
            vs.end_due = True

    def on_lunch(self, t: float, vs: _VS) -> None:
        if vs.state == "queue" and not vs.lunched:
            if t < vs.hold_until:
                self.push(vs.hold_until, "lunch", vs)
                return
            r = vs.v.rng
            if vs.slot is not None and r.random() < 0.35 and t + 3000 < vs.end:
                vs.v.track.stay_until(t, FREE)
                vs.state, vs.lunched = "rest", True
                self.push(t + r.uniform(1200, 2400), "rest_end", vs)
                return
            self.leave(vs, t)
            self.cont(vs)

    def on_rest_end(self, t: float, vs: _VS) -> None:
        if vs.state == "rest":
            vs.v.track.stay_until(t, OFF)
            vs.state = "queue"
            if self.due(vs):
                self.leave(vs, t + 5)
                self.cont(vs)

    def on_episode(self, t: float, data: tuple[_VS, Episode]) -> None:
        vs, ep = data
        if ep.kind in RIDE_MODS:
            vs.mods.append(ep)
            return
        vs.pending.append(ep)
        if vs.state == "queue":
            if t < vs.hold_until:
                return
            self.leave(vs, t)
            self.cont(vs)

    def on_pax(self, t: float, _: Any) -> None:
        if t < self.hold_until:
            return
        cands = [q for q in self.queue if q.slot is not None and q.state == "queue"]
        if not cands:
            return
        r = cands[0].v.rng
        head = cands[0]
        boarders: list[tuple[_VS, float, str]] = []
        if (
            self.quota.get("queue_jump", 0) > 0
            and len(cands) >= 2
            and not cands[1].v.accessible
            and t - head.slot_since >= 300
            and cands[1].slot_since - head.slot_since >= 60
            and head.end > t + 900
            and not head.pending
            and not self.due(head)
            and r.random() < 0.5
        ):
            self.quota["queue_jump"] -= 1
            boarders.append((cands[1], t, "queue_jump"))
            head.hold_until = t + 240
            self.hold_until = t + 180
        elif self.quota.get("two_pax", 0) > 0 and len(cands) >= 2 and r.random() < 0.5:
            self.quota["two_pax"] -= 1
            boarders += [(cands[1], t + 2, "two_passengers_together"), (head, t + 13, "")]
        elif self.quota.get("accessible_priority", 0) > 0 and any(
            c.v.accessible for c in cands[1:]
        ):
            self.quota["accessible_priority"] -= 1
            acc = next(c for c in cands[1:] if c.v.accessible)
            boarders.append((acc, t, "accessible_priority"))
        else:
            boarders.append((head, t, ""))
        for vs, tb, why in boarders:
            self.board_at_stand(vs, tb, why)

    # ---------------------------------------------------------------- queue
    def join(self, vs: _VS, t: float) -> None:
        tr = vs.v.track
        vs.state, vs.arrived = "queue", t
        free = [i for i, s in enumerate(self.slots) if s is None]
        if free:
            k = free[0]
            self.slots[k] = vs
            vs.slot, vs.slot_since = k, t
            self.drive_to(vs, self.group.slots[k], FREE, pauses=False)
        else:
            k = next(i for i, s in enumerate(self.ov) if s is None)
            self.ov[k] = vs
            vs.ov, vs.ov_since = k, t
            self.drive_to(vs, self.group.overflow[k], FREE, pauses=False)
        self.queue.append(vs)
        if self.due(vs):  # an episode arrived while driving in
            self.leave(vs, tr.t + 5)
            self.cont(vs)

    def leave(self, vs: _VS, t: float) -> None:
        """Leave the queue at ``t`` (waiting leg appended, the next overflow taxi moves in)."""
        tr = vs.v.track
        tr.stay_until(t, OFF if vs.state == "rest" else FREE)
        if vs in self.queue:
            self.queue.remove(vs)
        vs.state = "drive"
        if vs.ov is not None:
            self.note_overflow(vs, tr.t)
            self.ov[vs.ov] = None
            vs.ov = None
        if vs.slot is not None:
            k = vs.slot
            if tr.t - vs.slot_since >= 90:
                self.sim.presence.add((vs.v.vid, self.sim.day_of(vs.slot_since)))
                self.sim.presence.add((vs.v.vid, self.sim.day_of(tr.t)))
            self.slots[k] = None
            vs.slot = None
            waiting = [q for q in self.queue if q.ov is not None]
            if waiting:
                nxt = min(waiting, key=lambda q: q.arrived)
                t_move = max(tr.t + 8, nxt.v.track.t)
                nxt.v.track.stay_until(t_move, FREE)
                self.note_overflow(nxt, t_move)
                assert nxt.ov is not None  # one of the waiting overflow taxis
                self.ov[nxt.ov] = None
                nxt.ov = None
                self.slots[k] = nxt
                nxt.slot, nxt.slot_since = k, t_move
                self.drive_to(nxt, self.group.slots[k], FREE, pauses=False)

    def note_overflow(self, vs: _VS, t: float) -> None:
        if t - vs.ov_since >= 600:
            self.sim.overflow_waits.append(
                {
                    "vehicle_id": vs.v.vid,
                    "stand_id": self.group.stand_id,
                    "start": vs.ov_since,
                    "end": t,
                    "place": self.group.overflow[vs.ov or 0],
                }
            )

    def board_at_stand(self, vs: _VS, t: float, why: str) -> None:
        tr = vs.v.track
        t = max(t, tr.t + 1)
        ahead = [
            q for q in self.queue if q is not vs and q.arrived < vs.arrived and q.slot is not None
        ]
        behind = [q for q in self.queue if q is not vs]
        tr.stay_until(t, FREE)
        arrived_inside = vs.slot_since
        stand = self.group.stand_id
        sim = self.sim
        board_s = vs.v.rng.uniform(45, 75)
        t_dep = t + board_s
        if why == "queue_jump":
            sim.add_truth(
                "queue_jump",
                "positive",
                "passed_waiting_taxi",
                vehicle_id=vs.v.vid,
                stand_id=stand,
                start=arrived_inside,
                end=t_dep,
                note=f"ahead: {ahead[0].v.vid} waited {t - ahead[0].slot_since:.0f} s",
            )
        elif why in ("two_passengers_together", "accessible_priority"):
            sim.add_truth(
                "queue_jump",
                "negative",
                why,
                vehicle_id=vs.v.vid,
                stand_id=stand,
                start=arrived_inside,
                end=t_dep,
            )
        elif behind:
            sim.add_truth(
                "queue_jump",
                "negative",
                "fifo_head_boarding",
                vehicle_id=vs.v.vid,
                stand_id=stand,
                start=arrived_inside,
                end=t_dep,
            )
        if any(q.state == "rest" for q in ahead):
            sim.add_truth(
                "queue_jump",
                "negative",
                "ahead_resting_meter_off",
                vehicle_id=vs.v.vid,
                stand_id=stand,
                start=arrived_inside,
                end=t_dep,
            )
        self.leave_for_ride(vs, t)
        self.ride(
            vs,
            origin="stand",
            stand_idx=self.group.stand_idx,
            arrived=arrived_inside,
            board_s=board_s,
        )
        self.cont(vs)

    def leave_for_ride(self, vs: _VS, t: float) -> None:
        """Leave the queue with the passenger: the slot frees at the departure."""
        if vs in self.queue:
            self.queue.remove(vs)
        k = vs.slot
        vs.state = "drive"
        if k is not None:
            self.sim.presence.add((vs.v.vid, self.sim.day_of(t)))
            self.slots[k] = None
            vs.slot = None
            waiting = [q for q in self.queue if q.ov is not None]
            if waiting:
                nxt = min(waiting, key=lambda q: q.arrived)
                t_move = max(t + 80, nxt.v.track.t)
                nxt.v.track.stay_until(t_move, FREE)
                self.note_overflow(nxt, t_move)
                assert nxt.ov is not None  # one of the waiting overflow taxis
                self.ov[nxt.ov] = None
                nxt.ov = None
                self.slots[k] = nxt
                nxt.slot, nxt.slot_since = k, t_move
                self.drive_to(nxt, self.group.slots[k], FREE, pauses=False)

    def due(self, vs: _VS) -> bool:
        t = vs.v.track.t
        return (
            vs.end_due or t >= vs.end or bool(vs.pending) or (not vs.lunched and t >= vs.lunch_at)
        )

    # ---------------------------------------------------------------- movement
    def drive_to(
        self,
        vs: _VS,
        p: np.ndarray,
        meter: int,
        *,
        pauses: bool = True,
        speed_mps: float | None = None,
    ) -> float:
        tr, r = vs.v.track, vs.v.rng
        a = np.array([tr.x, tr.y])
        if np.hypot(*(p - a)) < 1.0:
            return 0.0
        if not pauses or np.hypot(*(p - a)) < 150:
            return tr.drive(
                np.vstack([p]), meter, r, self.world, pauses=False, speed_mps=speed_mps or 4.0
            )
        return tr.drive(straight_route(a, p, r)[1:], meter, r, self.world, speed_mps=speed_mps)

    def start_shift(self, vs: _VS) -> None:
        v, tr, r = vs.v, vs.v.track, vs.v.rng
        tr.begin(vs.start, *v.home)
        tr.stay(r.uniform(60, 180), OFF)
        if v.role == "home_outside":
            entry = self.entry_point(v.home)
            self.drive_to(vs, entry, OFF)
            self.sim.add_truth(
                "outside_municipality",
                "negative",
                "home_outside_commute",
                vehicle_id=v.vid,
                start=vs.start,
                end=tr.t,
            )
        if v.mode.get(self.day) == "private":
            # a suspended prefixo used privately: meter off all along
            for _ in range(3):
                p = _free_point(self.world, r, np.array([tr.x, tr.y]), 1500, 5000)
                if p is not None:
                    self.drive_to(vs, p, OFF)
                    tr.stay(r.uniform(600, 1800), OFF)
            self.sim.add_truth(
                "operating_while_barred",
                "negative",
                "private_drive_meter_off",
                vehicle_id=v.vid,
                start=self.sim.t_of(self.day, 0),
                end=self.sim.t_of(self.day + 1, 0),
            )
            self.go_home(vs)

    def entry_point(self, home: np.ndarray) -> NDArray[np.float64]:
        """A point 1 km inside the city on the way from ``home`` to the centre."""
        centre: NDArray[np.float64] = np.mean([g.centre for g in self.sim.groups], axis=0)
        for f in np.linspace(0.05, 0.9, 60):
            p: NDArray[np.float64] = home + f * (centre - home)
            if self.world.inside_margin(*p) >= 1000 and self.world.nearest_stand_m(*p) > 100:
                return p
        return centre

    def go_home(self, vs: _VS) -> None:
        v, tr, r = vs.v, vs.v.track, vs.v.rng
        t0 = tr.t
        self.drive_to(vs, v.home, OFF)
        tr.stay(r.uniform(60, 180), OFF)
        if v.role == "home_outside":
            self.sim.add_truth(
                "outside_municipality",
                "negative",
                "home_outside_commute",
                vehicle_id=v.vid,
                start=t0,
                end=tr.t,
            )
        vs.state = "done"
        self.sim.add_truth(
            "tracking_gap",
            "negative",
            "overnight_off",
            vehicle_id=v.vid,
            start=tr.t - 60,
            end=tr.t + 3600 * 6,
            note="device off until next shift",
        )

    def do_lunch(self, vs: _VS) -> None:
        v, tr, r = vs.v, vs.v.track, vs.v.rng
        vs.lunched = True
        spot: NDArray[np.float64] | None
        if self.g is not None:
            spot = self.g.lunch + r.normal(0, 6, 2)
        else:
            spot = _free_point(
                self.world, r, np.array([tr.x, tr.y]), 300, 1500, stand_clear_m=120, margin_m=300
            )
            if spot is None:
                spot = np.array([tr.x, tr.y])
        first = len(tr.legs)
        t_off0 = tr.t
        dist = float(np.hypot(spot[0] - tr.x, spot[1] - tr.y))
        moved_off = r.random() < 0.08 and dist >= 1500
        if moved_off:  # the meter is seen off before the device goes off
            tr.stay(r.uniform(60, 120), OFF)
            tr.protect.append((t_off0 - 30, tr.t))
            t_off0 = tr.t
        self.drive_to(vs, spot, OFF)
        t_at = tr.t
        tr.stay(r.uniform(1800, 3000), OFF)
        if moved_off:
            tr.set_device(first, t_off0 + 1, t_at + 600, False)
            self.sim.device_off_moves.append((v.vid, t_off0, t_at + 600))
            self.sim.add_truth(
                "gps_anomaly",
                "negative",
                "device_off_moved",
                vehicle_id=v.vid,
                start=t_off0,
                end=t_at + 600,
                note=f"{dist:.0f} m while off",
            )
            self.sim.add_truth(
                "tracking_gap",
                "negative",
                "lunch_device_off",
                vehicle_id=v.vid,
                start=t_off0,
                end=t_at + 600,
            )
        elif r.random() < 0.12:
            a, b = t_at + 120, tr.t - 120
            tr.set_device(first, a, b, False)
            self.sim.add_truth(
                "tracking_gap", "negative", "lunch_device_off", vehicle_id=v.vid, start=a, end=b
            )
        tr.stay(r.uniform(30, 90), FREE)

    # ---------------------------------------------------------------- decisions
    def cont(self, vs: _VS) -> None:
        """Decide what a free (or just freed) stand-mode vehicle does next."""
        tr, r = vs.v.track, vs.v.rng
        for _ in range(60):
            if vs.state == "done":
                return
            if vs.end_due or tr.t >= vs.end:
                self.go_home(vs)
                return
            if not vs.lunched and tr.t >= vs.lunch_at:
                self.do_lunch(vs)
                continue
            if vs.pending:
                ep = vs.pending.pop(0)
                self.run_episode(vs, ep)
                continue
            a = np.array([tr.x, tr.y])
            dest = self.group.approach
            if r.random() < 0.2 and np.hypot(*(dest - a)) > 1200:
                f = r.uniform(0.2, 0.8)
                hp = a + f * (dest - a) + r.normal(0, 120, 2)
                if (
                    self.world.nearest_stand_m(*hp) >= HAIL_CLEAR_M
                    and self.world.inside_margin(*hp) >= 300
                ):
                    self.drive_to(vs, hp, FREE)
                    self.ride(vs, origin="hail")
                    continue
            self.drive_to(vs, dest, FREE)
            vs.state = "drive"
            self.push(tr.t, "arrive", vs)
            return
        self.go_home(vs)

    def roam(self, vs: _VS) -> None:
        """A day of cruising and street hails, never waiting at a stand."""
        tr, r = vs.v.track, vs.v.rng
        for _ in range(200):
            if tr.t >= vs.end:
                break
            if not vs.lunched and tr.t >= vs.lunch_at:
                self.do_lunch(vs)
                continue
            a = np.array([tr.x, tr.y])
            target = _free_point(self.world, r, a, 1000, 3000, margin_m=500)
            if target is None:
                target = np.mean([g.centre for g in self.sim.groups], axis=0)
            if r.random() < 0.7:
                hp = a + r.uniform(0.3, 1.0) * (target - a)
                if (
                    self.world.nearest_stand_m(*hp) >= HAIL_CLEAR_M
                    and self.world.inside_margin(*hp) >= 300
                ):
                    self.drive_to(vs, hp, FREE)
                    tr.stay(r.uniform(5, 40), FREE)
                    self.ride(vs, origin="hail")
                    continue
            self.drive_to(vs, target, FREE)
        self.go_home(vs)

    # ---------------------------------------------------------------- places
    def foreign_stand(
        self, p: np.ndarray, r_min: float, r_max: float, r: np.random.Generator
    ) -> int | None:
        cand = [
            i
            for i in self.sim.foreign
            if r_min <= math.hypot(self.world.xy[i][0] - p[0], self.world.xy[i][1] - p[1]) <= r_max
        ]
        if not cand:
            cand = list(self.sim.foreign)
        return int(cand[int(r.integers(len(cand)))]) if cand else None

    def stand_xy(self, i: int) -> NDArray[np.float64]:
        xy: NDArray[np.float64] = self.world.xy[i].copy()
        return xy

    def destination(self, p0: np.ndarray, r: np.random.Generator) -> NDArray[np.float64]:
        """An ordinary drop-off: a popular place's drop-off bay, or an address in the city."""
        if r.random() < 0.3 and self.sim.pois:
            dest = self.sim.pois[int(r.integers(len(self.sim.pois)))] + r.normal(0, 6, 2)
            if np.hypot(*(dest - p0)) >= 700:
                return dest
        st = self.world.stands
        for _ in range(200):
            i = int(r.integers(len(st)))
            p: NDArray[np.float64] = self.world.xy[i].copy() + r.normal(0, 700, 2)
            d = float(np.hypot(*(p - p0)))
            if not 700 <= d <= 14000:
                continue
            if self.world.nearest_stand_m(*p) < 70 or self.world.inside_margin(*p) < 400:
                continue
            return p
        return self.dest_at(p0, 2000, r)

    def poi_at(
        self, p0: np.ndarray, d_min: float, d_max: float, r: np.random.Generator
    ) -> np.ndarray | None:
        """A busy place's drop-off bay ``d_min``–``d_max`` m away, if any."""
        ok = [q for q in self.sim.pois if d_min <= np.hypot(*(q - p0)) <= d_max]
        return ok[int(r.integers(len(ok)))] + r.normal(0, 6, 2) if ok else None

    def dest_at(self, p0: np.ndarray, dist_m: float, r: np.random.Generator) -> NDArray[np.float64]:
        """A drop-off about ``dist_m`` from ``p0``, inside the city, clear of the stands."""
        d = dist_m
        for k in range(300):
            ang = r.uniform(0, 2 * math.pi)
            p = p0 + d * np.array([math.cos(ang), math.sin(ang)])
            if self.world.nearest_stand_m(*p) >= 70 and self.world.inside_margin(*p) >= 400:
                return p
            if k % 30 == 29:
                d *= 0.85
        fallback: NDArray[np.float64] = p0 + np.array([300.0, 300.0])
        return fallback

    def town_point(self, r: np.random.Generator, *, min_out_m: float = 1200) -> np.ndarray:
        names = ["Canoas", "Cachoeirinha", "Viamão"]
        for _ in range(300):
            town = np.array(self.world.to_xy.transform(*TOWNS[names[int(r.integers(3))]]))
            p = town + r.normal(0, 500, 2)
            if self.world.inside_margin(*p) <= -min_out_m:
                return p
        msg = "no town point"
        raise ValueError(msg)

    def take_mod(self, vs: _VS) -> Episode | None:
        """The oldest ride change waiting for this vehicle's next passenger."""
        return vs.mods.pop(0) if vs.mods else None

    # ---------------------------------------------------------------- rides
    def ride(
        self,
        vs: _VS,
        *,
        origin: str,
        stand_idx: int | None = None,
        arrived: float | None = None,
        board_s: float | None = None,
        mod: Episode | None = None,
    ) -> dict[str, Any]:
        """A passenger trip from the current position (the boarding), with its ground truth."""
        v, tr, r, sim, w = vs.v, vs.v.track, vs.v.rng, self.sim, self.world
        if mod is None and self.g is not None:
            mod = self.take_mod(vs)
        kind = mod.kind if mod is not None else "normal"
        if kind == "call":
            kind = str(mod.params["mod"]) if mod is not None else "normal"
        p0 = np.array([tr.x, tr.y])
        t_pick = tr.t
        first = len(tr.legs)
        board = float(board_s if board_s is not None else r.uniform(30, 60))
        tr.stay(board, OCC)
        tr.protect.append((t_pick - 25, t_pick + board + 20))
        speed: float | None = None
        dest: np.ndarray | None = None
        gap_s = 0.0
        dest_kind = ""
        foreign_drop: int | None = None
        if kind in ("dest_foreign_hail", "dest_foreign"):
            foreign_drop = self.foreign_stand(p0, 1500, 7000, r)
            if foreign_drop is None:
                kind = "normal"
            else:
                dest = self.stand_xy(foreign_drop) + r.normal(0, 4, 2)
        if kind in ("dest_outside", "outside_then_pickup"):
            dest = self.town_point(r)
        elif kind == "gap":
            gap_s, speed = float(r.uniform(480, 900)), 7.0
            dest = self.dest_at(p0, (gap_s + r.uniform(420, 700)) * speed, r)
        elif kind == "tunnel":
            gap_s, speed = float(r.uniform(100, 200)), 7.5
            dest = self.dest_at(p0, (gap_s + r.uniform(300, 600)) * speed, r)
        elif kind in ("detour", "waypoint", "ring"):
            # half of them to a busy place (tourists to the airport, the bus station)
            if r.random() < 0.5 and self.sim.pois:
                dest = self.poi_at(p0, 2000, 9000, r)
                dest_kind = "" if dest is None else "busy place"
            if dest is None:
                dest = self.dest_at(p0, r.uniform(2000, 6000), r)
        elif kind == "flag2_day":
            dest = self.dest_at(p0, r.uniform(3000, 7000), r)
        elif kind in ("flag2_carry", "flag2_early"):
            target = sim.t_of(
                self.day, (6 * 3600 + 720) if kind == "flag2_carry" else (20 * 3600 + 360)
            )
            speed = 8.0
            need = max(target - (t_pick + board), 0.0) + r.uniform(120, 600)
            dest = self.dest_at(p0, max(1500.0, need * speed * 0.85), r)
        elif kind == "late_night":
            speed = 7.0
            dest = self.dest_at(p0, r.uniform(3500, 5000), r)
        if dest is None:
            dest = self.destination(p0, r)
        note = ""
        if kind == "detour":
            ratio = float(r.uniform(1.6, 2.6))
            path = None
            if r.random() < 0.5:
                for side in (1, -1):
                    cand = corridor_route(p0, dest, ratio, side, r)
                    if all(w.inside_margin(*q) > 0 for q in cand):
                        path, note = cand, "corridor"
                        break
            if path is None:
                path, note = loop_route(p0, dest, ratio, r), "loop"
            tr.drive(path[1:], OCC, r, w, speed_mps=speed)
        elif kind == "waypoint":
            ratio = float(r.uniform(1.6, 2.2))
            cand = corridor_route(p0, dest, ratio, 1 if r.random() < 0.5 else -1, r)
            wp = cand[np.argmax(np.hypot(*(cand - (p0 + dest) / 2).T))]
            tr.drive(straight_route(p0, wp, r)[1:], OCC, r, w)
            tr.stay(r.uniform(180, 420), OCC)
            tr.drive(straight_route(wp, dest, r)[1:], OCC, r, w)
        elif kind == "ring":
            ratio = float(r.uniform(1.15, 1.25))
            cand = corridor_route(p0, dest, ratio, 1 if r.random() < 0.5 else -1, r)
            tr.drive(cand[1:], OCC, r, w, speed_mps=r.uniform(14, 17), pauses=False)
        else:
            tr.drive(straight_route(p0, dest, r)[1:], OCC, r, w, speed_mps=speed)
        pay = float(r.uniform(20, 50))
        tr.stay(pay, OCC)
        t_drop = tr.t
        p1 = np.array([tr.x, tr.y])
        last = len(tr.legs)
        driven = sum(math.hypot(g[4] - g[2], g[5] - g[3]) for g in tr.legs[first:last])
        straight = float(np.hypot(*(p1 - p0)))
        tr.protect.append((t_drop - pay - 10, t_drop + 25))
        self.apply_tariff(tr, first, t_pick, t_drop, kind)
        if gap_s:
            t_off = t_pick + board + r.uniform(90, 150)
            t_on = min(t_off + gap_s, t_drop - 150)
            tr.set_device(first, t_off, t_on, False)
            tr.quiet.append((t_off - 90, t_on + 90))
            label = "positive" if kind == "gap" else "negative"
            sim.add_truth(
                "tracking_gap",
                label,
                "silent_in_service" if kind == "gap" else "tunnel_short_gap",
                vehicle_id=v.vid,
                start=t_off,
                end=t_on,
                note=f"silence {t_on - t_off:.0f} s, occupied",
            )
        tr.stay(r.uniform(5, 20), FREE)
        rec = {
            "vehicle_id": v.vid,
            "t_pick": t_pick,
            "t_drop": t_drop,
            "x0": p0[0],
            "y0": p0[1],
            "x1": p1[0],
            "y1": p1[1],
            "driven_m": driven,
            "straight_m": straight,
            "kind": kind,
            "origin": origin,
            "note": note,
            "dest_kind": dest_kind or "address",
        }
        sim.rides.append(rec)
        self.ride_truth(
            vs,
            rec,
            first,
            last,
            stand_idx=stand_idx,
            arrived=arrived,
            board=board,
            foreign_drop=foreign_drop,
            pay=pay,
        )
        # what follows the drop-off
        if kind == "dest_foreign_hail" and foreign_drop is not None:
            self.hail_after_foreign_drop(vs, foreign_drop, t_drop - pay)
        elif kind == "outside_then_pickup":
            self.pickup_outside(vs)
        return rec

    def apply_tariff(self, tr: Track, first: int, t_pick: float, t_drop: float, kind: str) -> None:
        sim, r = self.sim, np.random.default_rng(int(t_pick))
        if kind == "flag2_day":
            tr.set_tariff(first, t_pick, 2)
            return
        loc = sim.local(t_pick)
        base = background_tariff(loc)
        tr.set_tariff(first, t_pick, base)
        if base == 2:
            return  # kept until the drop-off (carry-over across 06:00)
        day_start = t_pick - (loc.hour * 3600 + loc.minute * 60 + loc.second)
        switches = [day_start + 20 * 3600]
        if loc.weekday() == 5 and loc.date() not in HOLIDAYS:
            switches.append(day_start + 14 * 3600)
        for s in sorted(switches):
            ts = s - r.uniform(30, 60) if kind == "flag2_early" else s + r.uniform(0, 60)
            if t_pick < ts < t_drop - 5:
                tr.set_tariff(first, ts, 2)
                return

    def ride_truth(
        self,
        vs: _VS,
        rec: dict[str, Any],
        first: int,
        last: int,
        *,
        stand_idx: int | None,
        arrived: float | None,
        board: float,
        foreign_drop: int | None,
        pay: float,
    ) -> None:
        v, sim, w = vs.v, self.sim, self.world
        t_pick, t_drop, kind = rec["t_pick"], rec["t_drop"], rec["kind"]
        near = w.near_stand(rec["x0"], rec["y0"], STAND_RADIUS_M - 6)
        rec["pickup_stand_id"] = w.ids[near[0]] if near else None
        end_board = t_pick + board
        # unlicensed_stand_use
        if near:
            sid = w.ids[near[0]]
            start = arrived if arrived is not None else t_pick
            if sid == v.stand_id:
                sim.add_truth(
                    "unlicensed_stand_use",
                    "negative",
                    "licensed_stand_boarding",
                    vehicle_id=v.vid,
                    stand_id=sid,
                    start=start,
                    end=end_board,
                )
            elif rec["origin"] == "foreign_pcd":
                sim.add_truth(
                    "unlicensed_stand_use",
                    "negative",
                    "accessible_pcd_boarding",
                    vehicle_id=v.vid,
                    stand_id=sid,
                    start=start,
                    end=end_board,
                    note=f"dwell {end_board - start:.0f} s",
                )
            elif rec["origin"] == "foreign":
                sim.add_truth(
                    "unlicensed_stand_use",
                    "positive",
                    "boarded_without_licence",
                    vehicle_id=v.vid,
                    stand_id=sid,
                    start=start,
                    end=end_board,
                    note=f"waited {t_pick - start:.0f} s",
                )
            elif rec["origin"] != "accessible_wait":
                msg = f"unplanned boarding inside stand {sid} by {v.vid} ({rec['origin']})"
                raise AssertionError(msg)
        if foreign_drop is not None and kind == "dest_foreign":
            sid = w.ids[foreign_drop]
            sim.add_truth(
                "unlicensed_stand_use",
                "negative",
                "dropoff_foreign_stand",
                vehicle_id=v.vid,
                stand_id=sid,
                start=t_drop - pay - 5,
                end=t_drop + 30,
            )
        # longer_route
        ratio = rec["driven_m"] / max(rec["straight_m"], 1.0)
        rec["ratio"] = ratio
        if kind == "detour":
            label, look = "positive", "detour_" + rec["note"]
        elif kind == "waypoint":
            label, look = "negative", "passenger_waypoint"
        elif kind == "ring":
            label, look = "negative", "faster_ring_road"
        else:
            at_stand_drop = bool(w.near_stand(rec["x1"], rec["y1"], STAND_RADIUS_M - 6))
            label = "negative"
            look = "direct_between_stands" if (near and at_stand_drop) else "straight_trip"
            if ratio > 1.03:
                msg = f"straight trip of ratio {ratio:.3f}"
                raise AssertionError(msg)
        sim.add_truth(
            "longer_route",
            label,
            look,
            vehicle_id=v.vid,
            start=t_pick,
            end=t_drop,
            note=f"ratio {ratio:.2f}, straight {rec['straight_m']:.0f} m, "
            f"driven {rec['driven_m']:.0f} m, to {rec['dest_kind']}",
        )
        # outside_municipality
        m0 = w.inside_margin(rec["x0"], rec["y0"])
        m1 = w.inside_margin(rec["x1"], rec["y1"])
        rec["pickup_margin_m"] = m0
        if m0 <= -1000:
            sim.add_truth(
                "outside_municipality",
                "positive",
                "pickup_outside",
                vehicle_id=v.vid,
                start=t_pick,
                end=t_drop,
                note=f"{-m0:.0f} m outside",
            )
        elif kind == "near_boundary":
            sim.add_truth(
                "outside_municipality",
                "negative",
                "pickup_near_boundary_inside",
                vehicle_id=v.vid,
                start=t_pick,
                end=t_drop,
                note=f"{m0:.0f} m inside",
            )
        elif m0 > 0 and m1 <= -500:
            sim.add_truth(
                "outside_municipality",
                "negative",
                "dropoff_outside",
                vehicle_id=v.vid,
                start=t_pick,
                end=t_drop,
            )
        # flag2_misuse, from the legs as driven
        self.flag2_truth(vs, rec, first, last)

    def flag2_truth(self, vs: _VS, rec: dict[str, Any], first: int, last: int) -> None:
        tr, sim = vs.v.track, self.sim
        legs = [g for g in tr.legs[first:] if g[6] == OCC and g[0] < rec["t_drop"]]
        if not any(g[7] == 2 for g in legs):
            return
        t0s = np.array([g[0] for g in legs])
        tariffs = np.array([g[7] for g in legs])
        ts = np.arange(rec["t_pick"], rec["t_drop"], 15.0)
        tar = tariffs[np.searchsorted(t0s, ts, side="right") - 1]
        allowed = np.array([flag2_allowed(sim.local(t)) for t in ts])
        misuse = np.zeros(len(ts), dtype=bool)
        carried = False
        run_ok = False
        for i in range(len(ts)):
            if tar[i] != 2:
                run_ok = False
                continue
            if allowed[i]:
                run_ok = True
            elif run_ok:
                carried = True
            else:
                misuse[i] = True
        mis_s = float(misuse.sum() * 15.0)
        v = vs.v.vid
        if mis_s >= 180:
            idx = np.flatnonzero(misuse)
            sim.add_truth(
                "flag2_misuse",
                "positive",
                "tariff2_forbidden_time",
                vehicle_id=v,
                start=ts[idx[0]],
                end=ts[idx[-1]] + 15,
                note=f"{mis_s:.0f} s",
            )
        elif mis_s <= 75 and rec["kind"] == "flag2_early":
            sim.add_truth(
                "flag2_misuse",
                "negative",
                "early_switch_clock_drift",
                vehicle_id=v,
                start=rec["t_pick"],
                end=rec["t_drop"],
                note=f"{mis_s:.0f} s early",
            )
        elif mis_s == 0 and carried:
            sim.add_truth(
                "flag2_misuse",
                "negative",
                "carry_over_after_6",
                vehicle_id=v,
                start=rec["t_pick"],
                end=rec["t_drop"],
            )
        elif mis_s == 0:
            sim.add_truth(
                "flag2_misuse",
                "negative",
                "tariff2_allowed_time",
                vehicle_id=v,
                start=rec["t_pick"],
                end=rec["t_drop"],
            )
        else:
            sim.add_truth(
                "flag2_misuse",
                "ambiguous",
                "short_misuse",
                vehicle_id=v,
                start=rec["t_pick"],
                end=rec["t_drop"],
                note=f"{mis_s:.0f} s",
            )

    def hail_after_foreign_drop(self, vs: _VS, fi: int, t_in: float) -> None:
        """Leave the foreign stand empty and get a street hail 450–700 m away 60–100 s later."""
        tr, r, w = vs.v.track, vs.v.rng, self.world
        p = np.array([tr.x, tr.y])
        for _ in range(100):
            ang = r.uniform(0, 2 * math.pi)
            hp = p + r.uniform(450, 700) * np.array([math.cos(ang), math.sin(ang)])
            if w.nearest_stand_m(*hp) >= HAIL_CLEAR_M and w.inside_margin(*hp) >= 300:
                break
        else:
            return
        t_left = tr.t
        dur = r.uniform(60, 100)
        tr.drive(
            np.vstack([hp]), FREE, r, w, speed_mps=float(np.hypot(*(hp - p))) / dur, pauses=False
        )
        self.sim.add_truth(
            "unlicensed_stand_use",
            "negative",
            "dropoff_foreign_stand_then_hail",
            vehicle_id=vs.v.vid,
            stand_id=w.ids[fi],
            start=t_in - 5,
            end=tr.t + 60,
            note=f"left {t_left:.0f}, hail {tr.t - t_left:.0f} s later "
            f"{np.hypot(*(hp - p)):.0f} m away",
        )
        self.ride(vs, origin="hail", mod=Episode("normal", self.day, tr.t))

    def pickup_outside(self, vs: _VS) -> None:
        """In the other town, take a new passenger there (art. 19: not allowed)."""
        tr, r, w = vs.v.track, vs.v.rng, self.world
        p = np.array([tr.x, tr.y])
        for _ in range(200):
            hp = p + r.normal(0, 500, 2)
            if w.inside_margin(*hp) <= -1000:
                break
        else:
            return
        self.drive_to(vs, hp, FREE)
        tr.stay(r.uniform(10, 60), FREE)
        self.ride(vs, origin="hail_outside", mod=Episode("normal", self.day, tr.t))

    # ---------------------------------------------------------------- episodes
    def run_episode(self, vs: _VS, ep: Episode) -> None:
        tr, r, sim, w = vs.v.track, vs.v.rng, self.sim, self.world
        k = ep.kind
        p = np.array([tr.x, tr.y])
        if k in ("unlicensed", "accessible_pcd", "accessible_wait"):
            fi = self.foreign_stand(p, 1500, 7000, r)
            if fi is None:
                return
            spot = self.stand_xy(fi) + r.normal(0, 4, 2)
            self.drive_to(vs, spot, FREE)
            t_arr = tr.t - 4
            if k == "unlicensed":
                wait = r.uniform(90, 480) if r.random() < 0.7 else r.uniform(10, 40)
                tr.stay(wait, FREE)
                tr.protect.append((t_arr - 20, tr.t))
                self.ride(
                    vs,
                    origin="foreign",
                    stand_idx=fi,
                    arrived=t_arr,
                    board_s=r.uniform(45, 75),
                    mod=Episode("normal", self.day, tr.t),
                )
            elif k == "accessible_pcd":
                tr.stay(r.uniform(20, 60), FREE)
                tr.protect.append((t_arr - 20, tr.t))
                self.ride(
                    vs,
                    origin="foreign_pcd",
                    stand_idx=fi,
                    arrived=t_arr,
                    board_s=r.uniform(90, 150),
                    mod=Episode("normal", self.day, tr.t),
                )
            else:
                wait = r.uniform(1200, 1800)
                tr.stay(wait, FREE)
                boards = r.random() < 0.5
                sim.add_truth(
                    "unlicensed_stand_use",
                    "positive",
                    "accessible_wait",
                    vehicle_id=vs.v.vid,
                    stand_id=w.ids[fi],
                    start=t_arr,
                    end=tr.t + (120 if boards else 0),
                    note=f"waited {wait:.0f} s (art. 46 sole §)",
                )
                if boards:
                    self.ride(
                        vs,
                        origin="accessible_wait",
                        stand_idx=fi,
                        arrived=t_arr,
                        board_s=r.uniform(90, 150),
                        mod=Episode("normal", self.day, tr.t),
                    )
        elif k == "formation":
            place = ep.params["place"]
            off = r.normal(0, 5, 2)
            off *= min(1.0, 12.0 / max(float(np.hypot(*off)), 1e-9))
            self.drive_to(vs, place + off, FREE)
            t0 = tr.t
            lo, hi = {
                "informal_rank": (900, 2100),
                "petrol_station_meeting": (900, 1200),
                "one_vehicle_habit": (900, 1500),
            }[ep.params["type"]]
            tr.stay(r.uniform(lo, hi), FREE)
            sim.waits.append(
                {
                    "type": ep.params["type"],
                    "label": ep.params["label"],
                    "place": place,
                    "vehicle_id": vs.v.vid,
                    "day": self.day,
                    "start": t0,
                    "end": tr.t,
                }
            )
            tr.quiet.append((t0 - 60, tr.t + 60))
            if r.random() < 0.5:
                self.ride(vs, origin="hail")
        elif k == "call":
            mod = str(ep.params["mod"])
            if mod == "near_boundary":
                hp = None
                for _ in range(400):
                    q = _free_point(w, r, p, 1500, 9000, margin_m=-1e9)
                    if q is not None and 250 <= w.inside_margin(*q) <= 400:
                        hp = q
                        break
                if hp is None:
                    return
            else:
                hp = _free_point(w, r, p, 1500, 4000, margin_m=500)
                if hp is None:
                    return
            self.drive_to(vs, hp, FREE)
            tr.stay(r.uniform(10, 60), FREE)
            self.ride(vs, origin="call", mod=ep)


# --------------------------------------------------------------------------- the run


def simulate(
    *,
    seed: int = 7,
    days: int = DEFAULT_DAYS,
    n_prefixos: int = DEFAULT_PREFIXOS,
    gps_noise_m: tuple[float, float] = GPS_NOISE_M,
) -> Sim:
    """Simulate the fleet: movement, ground truth and pings (deterministic for a seed).

    ``gps_noise_m`` bounds the radial RMS error drawn per vehicle-day (metres).
    """
    sim = build_sim(seed=seed, days=days, n_prefixos=n_prefixos)
    sim.gps_noise_m = gps_noise_m
    sim.pois = _pois(sim)
    sim.foreign = _foreign_stands(sim)
    for d in range(days):
        for g in sim.groups:
            members = [v for v in g.members if v.mode.get(d) == "stand"]
            _DayRunner(sim, d, g).run(members)
        others = [v for v in sim.vehicles if v.mode.get(d) in ("roam", "private")]
        _DayRunner(sim, d, None).run(others)
    sim.pings = _make_pings(sim)
    sim.registry = build_registry(sim)
    _post_truth(sim)
    return sim


def _pois(sim: Sim) -> list[np.ndarray]:
    """Drop-off bays of the busiest places (90–110 m from their stand, clear of every stand)."""
    st, w = sim.world.stands, sim.world
    rng = np.random.default_rng(sim.seed + 1)
    out = []
    for i in st.sort_values("n_licensed", ascending=False).index[:8]:
        c = w.xy[i].copy()
        for _ in range(100):
            ang = rng.uniform(0, 2 * math.pi)
            p = c + rng.uniform(90, 110) * np.array([math.cos(ang), math.sin(ang)])
            if w.nearest_stand_m(*p) >= 70 and w.inside_margin(*p) >= 300:
                out.append(p)
                break
    return out


def _foreign_stands(sim: Sim) -> list[int]:
    """Stands no simulated vehicle is licensed for, isolated, well inside the city."""
    st, w = sim.world.stands, sim.world
    homes = {g.stand_idx for g in sim.groups}
    dist_m = w.tree.query(np.column_stack([st["x"], st["y"]]), k=2)[0]
    assert isinstance(dist_m, np.ndarray)  # many points, k=2: an (n, 2) array
    nn = dist_m[:, 1]
    out = []
    for i in range(len(st)):
        if i in homes or nn[i] < 150:
            continue
        p = w.xy[i].copy()
        if w.inside_margin(*p) < 800:
            continue
        if any(np.hypot(*(p - g.centre)) < 400 for g in sim.groups):
            continue
        out.append(i)
    return out


def _mask_in(t: np.ndarray, windows: list[tuple[float, float]]) -> np.ndarray:
    """Whether each time lies in one of the windows."""
    out = np.zeros(len(t), dtype=bool)
    if not windows:
        return out
    w = np.array(sorted(windows))
    # merge overlapping windows
    merged = [list(w[0])]
    for a, b in w[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    m = np.array(merged)
    i = np.searchsorted(m[:, 0], t, side="right") - 1
    ok = i >= 0
    out[ok] = t[ok] <= m[i[ok], 1]
    return out


def _free_periods(track: Track) -> list[tuple[float, float]]:
    """Runs of legs driven free with the device on (for displaced-fix injection)."""
    out: list[tuple[float, float]] = []
    run: tuple[float, float] | None = None  # (start, end) of the current run
    moving = 0.0
    for g in track.legs:
        ok = g[6] == FREE and g[8]
        if ok and run is not None and abs(g[0] - run[1]) < 0.5:
            run = (run[0], g[1])
            moving += math.hypot(g[4] - g[2], g[5] - g[3])
        else:
            if run is not None and moving > 1500:
                out.append(run)
            run, moving = ((g[0], g[1]) if ok else None), 0.0
    if run is not None and moving > 1500:
        out.append(run)
    return out


def _make_pings(sim: Sim) -> pd.DataFrame:
    rng = np.random.default_rng(sim.seed + 2)
    # displaced stretches (gps_anomaly positives) on free drives, away from stands and rides
    cands: list[tuple[Vehicle, float, float, np.ndarray]] = []
    for v in sim.vehicles:
        guard = np.array(v.track.protect + v.track.quiet).reshape(-1, 2)
        for a, b in _free_periods(v.track):
            if b - a >= 420:
                cands.append((v, a, b, guard))
    stretches: dict[str, list[tuple[float, float, float, float]]] = {}
    n_left = sim.counts.get("stretch", 1)
    for i in rng.permutation(len(cands)):
        if n_left == 0:
            break
        v, a, b, guard = cands[int(i)]
        dur = rng.uniform(30, 150)
        ts = rng.uniform(a + 120, b - 120 - dur)
        if ((guard[:, 0] < ts + dur + 90) & (guard[:, 1] > ts - 90)).any():
            continue  # too close to a boarding, a drop-off or an injected event
        n_left -= 1
        ang, dist = rng.uniform(0, 2 * math.pi), rng.uniform(3000, 12000)
        stretches.setdefault(v.vid, []).append(
            (ts, ts + dur, dist * math.cos(ang), dist * math.sin(ang))
        )
        sim.add_truth(
            "gps_anomaly",
            "positive",
            "displaced_stretch",
            vehicle_id=v.vid,
            start=ts,
            end=ts + dur,
            note=f"{dist:.0f} m for {dur:.0f} s",
        )
    frames = []
    for v in sim.vehicles:
        if v.track.legs:
            frames.append(_vehicle_fixes(sim, v, stretches.get(v.vid, [])))
    df = pd.concat(frames, ignore_index=True)
    df = df.sort_values(["t", "vehicle_id"], kind="stable").reset_index(drop=True)
    base = np.datetime64(sim.day0.isoformat() + "T00:00:00", "s")
    local = base + df["t"].to_numpy().astype("timedelta64[s]")
    offset = _utc_offset(sim)
    df.insert(1, "timestamp", np.char.add(np.datetime_as_string(local, unit="s"), offset))
    return df


def _utc_offset(sim: Sim) -> str:
    first = local_dt(sim.day0, 0).utcoffset()
    last = local_dt(sim.day0, sim.days * DAY_S).utcoffset()
    if first != last or first is None:
        msg = "the simulated period crosses a change of UTC offset"
        raise ValueError(msg)
    minutes = int(first.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _vehicle_fixes(
    sim: Sim,
    v: Vehicle,
    stretches: list[tuple[float, float, float, float]],
    *,
    outlier_rate: float = 0.33,
) -> pd.DataFrame:
    r = np.random.default_rng([sim.seed, int(v.vid)])
    legs = np.array(v.track.legs, dtype=float)
    legs = legs[legs[:, 8] > 0]
    brk = np.flatnonzero(legs[1:, 0] - legs[:-1, 1] > 0.5) + 1
    starts, ends = np.r_[0, brk], np.r_[brk, len(legs)]
    times, blocks = [], []
    for b, (s, e) in enumerate(zip(starts, ends, strict=True)):
        t0, t1 = legs[s, 0], legs[e - 1, 1]
        n = int((t1 - t0) / 12) + 3
        tt = np.floor(t0 + r.uniform(0, 4) + np.r_[0, np.cumsum(r.uniform(12, 18, n - 1))])
        tt = tt[(tt >= t0) & (tt <= t1)]
        times.append(tt)
        blocks.append(np.full(len(tt), b))
    t = np.concatenate(times)
    blk = np.concatenate(blocks)
    i = np.clip(np.searchsorted(legs[:, 0], t, side="right") - 1, 0, len(legs) - 1)
    g = legs[i]
    span = np.maximum(g[:, 1] - g[:, 0], 1e-9)
    f = np.clip((t - g[:, 0]) / span, 0, 1)
    x = g[:, 2] + f * (g[:, 4] - g[:, 2])
    y = g[:, 3] + f * (g[:, 5] - g[:, 3])
    speed = np.hypot(g[:, 4] - g[:, 2], g[:, 5] - g[:, 3]) / span * 3.6
    meter = g[:, 6].astype(int)
    tariff = g[:, 7].astype(int)
    # GPS error: AR(1) per block plus white noise
    n = len(t)
    ex, ey, acc = np.empty(n), np.empty(n), np.empty(n)
    rho = math.exp(-FIX_INTERVAL_S / 90.0)
    edge = np.zeros(n, dtype=bool)
    for b in range(len(starts)):
        m = np.flatnonzero(blk == b)
        if not len(m):
            continue
        edge[m[:3]] = True
        edge[m[-3:]] = True
        radial = r.uniform(*sim.gps_noise_m)
        sa = radial / math.sqrt(2)
        for arr in (ex, ey):
            e0 = r.normal(0, sa)
            arr[m] = lfilter(
                [math.sqrt(1 - rho**2) * sa], [1, -rho], r.normal(0, 1, len(m)), zi=[rho * e0]
            )[0]
        acc[m] = np.round(radial * r.uniform(0.8, 1.2, len(m)), 1)
    x = x + ex + r.normal(0, 1.5, n)
    y = y + ey + r.normal(0, 1.5, n)
    protect = _mask_in(t, v.track.protect) | edge
    quiet = _mask_in(t, v.track.quiet) | protect
    drop = (r.random(n) < 0.02) & ~quiet
    n_days = len(starts)
    for _ in range(r.poisson(1.0 * n_days)):
        k = int(r.integers(n))
        ln = int(r.integers(2, 9))
        if k + ln < n and not quiet[k : k + ln].any() and blk[k] == blk[k + ln]:
            drop[k : k + ln] = True
    for ts, te, dx, dy in stretches:
        inside = (t >= ts) & (t <= te)
        x[inside] += dx
        y[inside] += dy
        drop[inside] = False
        quiet |= (t >= ts - 90) & (t <= te + 90)
    for _ in range(r.poisson(outlier_rate * n_days)):
        k = int(r.integers(1, n - 1))
        if quiet[k - 1 : k + 2].any() or drop[k] or blk[k - 1] != blk[k + 1]:
            continue
        ang, dist = r.uniform(0, 2 * math.pi), math.exp(r.uniform(math.log(50), math.log(250)))
        x[k] += dist * math.cos(ang)
        y[k] += dist * math.sin(ang)
        quiet[k] = True
        sim.add_truth(
            "gps_anomaly",
            "negative",
            "single_multipath_outlier",
            vehicle_id=v.vid,
            start=t[k] - 1,
            end=t[k] + 1,
            note=f"{dist:.0f} m",
        )
    keep = ~drop
    lon, lat = sim.world.to_ll.transform(x[keep], y[keep])
    mk = meter[keep]
    tar = pd.array(np.where(mk == OCC, tariff[keep], 0), dtype="Int64")
    tar[mk != OCC] = pd.NA
    return pd.DataFrame(
        {
            "vehicle_id": v.vid,
            "t": t[keep].astype(np.int64),
            "lat": np.round(lat, 6),
            "lon": np.round(lon, 6),
            "speed_kmh": np.round(np.maximum(speed[keep] + r.normal(0, 1.5, keep.sum()), 0), 1),
            "accuracy_m": acc[keep],
            "meter": pd.Categorical.from_codes(mk, pd.Index(["off", "free", "occupied"])),
            "tariff": tar,
        }
    )


# --------------------------------------------------------------------------- straight trips only


def straight_trip_fleet(
    *,
    seed: int = 3,
    n_vehicles: int = 30,
    trips_per_vehicle: int = 40,
    n_places: int = 20,
    waypoint_share: float = 0.0,
    address_share: float = 0.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Taxis that only drive passengers straight (≤ 1.025×) between a few busy places.

    The acceptance case of issue 18 for ``longer_route`` without a road network: every trip is
    within 1.03 of the straight line between its own pickup and drop-off, so none may be
    accused. The places are points of the city (100–250 m from a real stand, clear of every
    stand); each trip ends within about 60 m of its place, so many trips share their H3 cells
    and a trip's peers exist. Trips run 07:00–20:00 over consecutive days, one after the
    other (a short free drive between them); GPS as in :func:`simulate`, without multipath
    outliers (they lengthen the driven track). Returns the pings (contract columns plus ``t``)
    and the trips (true driven and straight lengths).
    """
    world = load_world()
    rng = np.random.default_rng(seed)
    places: list[np.ndarray] = []
    while len(places) < n_places:
        i = int(rng.integers(len(world.ids)))
        p = _free_point(world, rng, world.xy[i], 100, 250, margin_m=800)
        if p is not None and all(np.hypot(*(p - q)) >= 1000 for q in places):
            places.append(p)
    sim = Sim(world=world, seed=seed, days=1, day0=START_DATE, groups=[], vehicles=[])
    trips = []
    frames = []
    for k in range(n_vehicles):
        vid = str(9000 + k)
        r = np.random.default_rng([seed, k])
        tr = Track(vid)
        day = 0
        t = sim.t_of(day, 7 * 3600 + r.uniform(0, 7200))
        at = int(r.integers(n_places))
        tr.begin(t, *(places[at] + r.normal(0, 25, 2)))
        for _ in range(trips_per_vehicle):
            if tr.t > sim.t_of(day, 20 * 3600):
                tr.stay(60, OFF)
                day += 1
                tr.begin(sim.t_of(day, 7 * 3600 + r.uniform(0, 3600)), tr.x, tr.y)
            tr.stay(r.uniform(30, 90), FREE)
            p0 = np.array([tr.x, tr.y])
            t_pick = tr.t
            tr.stay(r.uniform(30, 60), OCC, 1)
            nxt = int(r.integers(n_places - 1))
            nxt += nxt >= at
            dest = places[nxt] + r.normal(0, 25, 2)
            if r.random() < address_share:  # an address of its own (no peers), then back
                q = _free_point(world, r, p0, 1500, 12000, margin_m=600)
                dest, nxt = (dest, nxt) if q is None else (q, at)
            kind = "straight"
            if r.random() < waypoint_share:  # the passenger has the taxi wait on the way
                kind = "waypoint"
                cand = corridor_route(p0, dest, r.uniform(1.6, 2.2), 1, r)
                wp = cand[np.argmax(np.hypot(*(cand - (p0 + dest) / 2).T))]
                tr.drive(straight_route(p0, wp, r)[1:], OCC, r, world, tariff=1)
                tr.stay(r.uniform(180, 420), OCC, 1)
                tr.drive(straight_route(wp, dest, r)[1:], OCC, r, world, tariff=1)
            else:
                tr.drive(straight_route(p0, dest, r)[1:], OCC, r, world, tariff=1)
            tr.stay(r.uniform(20, 40), OCC, 1)
            p1 = np.array([tr.x, tr.y])
            trips.append(
                {
                    "vehicle_id": vid,
                    "t_pick": t_pick,
                    "t_drop": tr.t,
                    "straight_m": float(np.hypot(*(p1 - p0))),
                    "kind": kind,
                }
            )
            tr.stay(r.uniform(10, 20), FREE)
            at = nxt
            if r.random() < 0.5:  # a short free drive to the next pickup nearby
                q = places[at] + r.normal(0, 25, 2)
                tr.drive(np.vstack([q]), FREE, r, world, pauses=False, speed_mps=5.0)
        tr.stay(60, OFF)
        v = Vehicle(
            vid=vid,
            stand_id="",
            group=-1,
            role="plain",
            accessible=False,
            shift="day",
            home=np.zeros(2),
            rng=r,
            track=tr,
            off_weekday=6,
        )
        frames.append(_vehicle_fixes(sim, v, [], outlier_rate=0.0))
        legs = np.array(tr.legs)
        for rec in trips[-trips_per_vehicle:]:
            m = (legs[:, 0] >= rec["t_pick"]) & (legs[:, 1] <= rec["t_drop"])
            rec["driven_m"] = float(
                np.hypot(legs[m, 4] - legs[m, 2], legs[m, 5] - legs[m, 3]).sum()
            )
    df = pd.concat(frames, ignore_index=True).sort_values(["t", "vehicle_id"], kind="stable")
    base = np.datetime64(sim.day0.isoformat() + "T00:00:00", "s")
    local = base + df["t"].to_numpy().astype("timedelta64[s]")
    df.insert(1, "timestamp", np.char.add(np.datetime_as_string(local, unit="s"), _utc_offset(sim)))
    out = pd.DataFrame(trips)
    out["pickup_at"] = [sim.iso(t) for t in out["t_pick"]]
    out["dropoff_at"] = [sim.iso(t) for t in out["t_drop"]]
    return df.reset_index(drop=True), out


# --------------------------------------------------------------------------- derived truth


def _post_truth(sim: Sim) -> None:
    """Truth that follows from the whole period: passing stands, barred days, presence,
    inactivity, informal places."""
    _passing_foreign_stands(sim)
    _barred_truth(sim)
    _presence_truth(sim)
    _inactivity_truth(sim)
    _place_truth(sim)


def _passing_foreign_stands(sim: Sim) -> None:
    w = sim.world
    rides = pd.DataFrame(sim.rides)
    if rides.empty:
        return
    vmap = {v.vid: v for v in sim.vehicles}
    queue_stands = {g.stand_id for g in sim.groups}
    for vid, rs in rides.groupby("vehicle_id"):
        v = vmap[str(vid)]
        legs = np.array(v.track.legs, dtype=float)
        for rec in rs.itertuples():
            t_pick = rec.t_pick
            assert isinstance(t_pick, float)  # a float column (Track.t)
            ts = np.arange(t_pick - 150, t_pick + 1, 2.0)
            i = np.clip(np.searchsorted(legs[:, 0], ts, side="right") - 1, 0, len(legs) - 1)
            g = legs[i]
            f = np.clip((ts - g[:, 0]) / np.maximum(g[:, 1] - g[:, 0], 1e-9), 0, 1)
            xy = np.column_stack(
                [g[:, 2] + f * (g[:, 4] - g[:, 2]), g[:, 3] + f * (g[:, 5] - g[:, 3])]
            )
            # a fix can fall inside a stand passed within 60 m (GPS error)
            hits = w.tree.query_ball_point(xy, STAND_RADIUS_M + 30)
            seen: dict[str, float] = {}
            for tt, h in zip(ts, hits, strict=True):
                for j in h:
                    sid = w.ids[j]
                    if sid != rec.pickup_stand_id and sid not in seen:
                        seen[sid] = float(tt)
            for sid, tt in seen.items():
                note = f"passed {t_pick - tt:.0f} s before the meter start"
                if sid != v.stand_id:
                    sim.add_truth(
                        "unlicensed_stand_use",
                        "negative",
                        "boarding_after_passing_foreign_stand",
                        vehicle_id=v.vid,
                        stand_id=sid,
                        start=tt,
                        end=t_pick + 60,
                        note=note,
                    )
                if sid in queue_stands:
                    sim.add_truth(
                        "queue_jump",
                        "negative",
                        "hail_after_passing_stand",
                        vehicle_id=v.vid,
                        stand_id=sid,
                        start=tt,
                        end=t_pick + 60,
                        note=note,
                    )


def _date(sim: Sim, d: int) -> dt.date:
    return sim.day0 + dt.timedelta(days=d)


def _barred_on(v: Vehicle, date: dt.date) -> list[str]:
    out = []
    if v.status in ("suspended", "out_of_operation", "reserved", "revoked") and (
        (v.status_since is None or v.status_since <= date)
        and (v.status_until is None or date <= v.status_until)
    ):
        out.append(v.status)
    if v.alvara_valid_until is not None and date > v.alvara_valid_until:
        out.append("alvara_expired")
    if v.inspection_valid_until is not None and date > v.inspection_valid_until:
        out.append("inspection_expired")
    if (
        v.last_inspection_on is not None
        and (date - v.last_inspection_on).days > MAX_INSPECTION_AGE_DAYS
    ):
        out.append("inspection_overdue")
    if v.alvara_first_issued_on is not None and date < v.alvara_first_issued_on:
        out.append("before_alvara")
    return out


def _barred_truth(sim: Sim) -> None:
    rides = pd.DataFrame(sim.rides)
    ride_days: dict[str, set[int]] = {}
    for rec in rides.itertuples():
        t_pick = rec.t_pick
        assert isinstance(t_pick, float)  # a float column (Track.t)
        ride_days.setdefault(str(rec.vehicle_id), set()).add(sim.day_of(t_pick))
    for v in sim.vehicles:
        days = ride_days.get(v.vid, set())
        for d in sorted(days):
            reasons = _barred_on(v, _date(sim, d))
            if reasons:
                sim.add_truth(
                    "operating_while_barred",
                    "positive",
                    "+".join(reasons),
                    vehicle_id=v.vid,
                    start=sim.t_of(d, 0),
                    end=sim.t_of(d + 1, 0),
                )
        last: dt.date | None = None
        if v.role == "barred_compliant" and v.status_since is not None:
            last, look = v.status_since - dt.timedelta(days=1), "late_night_service_on_eve"
        elif v.role == "barred_alvara":
            last, look = v.alvara_valid_until, "service_on_validity_day"
        if last is not None and (last - sim.day0).days in days:
            d = (last - sim.day0).days
            sim.add_truth(
                "operating_while_barred",
                "negative",
                look,
                vehicle_id=v.vid,
                start=sim.t_of(d, 0),
                end=sim.t_of(d + 1, 0),
            )
        _document_lookalikes(sim, v, days)
        whole = (sim.t_of(0, 0), sim.t_of(sim.days, 0))
        if v.role == "suspension_past":
            sim.add_truth(
                "operating_while_barred",
                "negative",
                "suspension_already_ended",
                vehicle_id=v.vid,
                start=whole[0],
                end=whole[1],
            )
        elif v.role == "suspended_silent":
            sim.add_truth(
                "operating_while_barred",
                "negative",
                "suspended_not_operating",
                vehicle_id=v.vid,
                start=whole[0],
                end=whole[1],
            )
        elif v.role == "reserved_silent":
            sim.add_truth(
                "operating_while_barred",
                "negative",
                "reserved_not_operating",
                vehicle_id=v.vid,
                start=whole[0],
                end=whole[1],
            )


def _document_lookalikes(sim: Sim, v: Vehicle, days: set[int]) -> None:
    """The vehicle-document look-alikes of ``operating_while_barred`` (fleet.sim_registry)."""
    cases = sim.registry_cases
    marks: list[tuple[int, str]] = []
    if cases.get("inspection_overdue") == v.vid and v.last_inspection_on is not None:
        last = v.last_inspection_on + dt.timedelta(days=MAX_INSPECTION_AGE_DAYS)
        marks.append(((last - sim.day0).days, "inspection_last_lawful_day"))
    if cases.get("inspection_renewed_late") == v.vid and v.last_inspection_on is not None:
        first = (v.last_inspection_on - sim.day0).days
        marks += [(d, "inspection_renewed_late") for d in sorted(days) if d >= first]
    if cases.get("alvara_issued_same_day") == v.vid and v.alvara_first_issued_on is not None:
        marks.append(((v.alvara_first_issued_on - sim.day0).days, "alvara_issued_same_day"))
    for d, look in marks:
        if d in days and not _barred_on(v, _date(sim, d)):
            sim.add_truth(
                "operating_while_barred",
                "negative",
                look,
                vehicle_id=v.vid,
                start=sim.t_of(d, 0),
                end=sim.t_of(d + 1, 0),
            )


def _operating_days(sim: Sim) -> dict[str, set[int]]:
    assert sim.pings is not None
    pairs = pd.DataFrame(
        {"v": sim.pings["vehicle_id"].astype(str), "d": sim.pings["t"].to_numpy() // DAY_S}
    ).drop_duplicates()
    out: dict[str, set[int]] = {}
    for vid, d in zip(pairs["v"], pairs["d"], strict=True):
        out.setdefault(str(vid), set()).add(int(d))
    return out


def _presence_truth(sim: Sim) -> None:
    """habitual_absence: share of operating days at the licensed stand, over the window."""
    op = _operating_days(sim)
    last = sim.days - 1
    window = set(range(max(0, last - sim.ha_window_days + 1), last + 1))
    start, end = sim.t_of(min(window), 0), sim.t_of(last + 1, 0)
    for v in sim.vehicles:
        days_op = op.get(v.vid, set()) & window
        present = {d for (vid, d) in sim.presence if vid == v.vid} & days_op
        n_op = len(days_op)
        share = len(present) / n_op if n_op else float("nan")
        note = f"operating {n_op} days, present {len(present)}, share {share:.2f}"
        if n_op >= sim.ha_min_operating_days + 2 and share <= HA_MIN_SHARE / 2:
            label, look = "positive", "absent_from_stand"
        elif n_op <= max(0, sim.ha_min_operating_days - 2) or n_op == 0:
            label, look = "negative", "not_operating"
        elif share >= 2 * HA_MIN_SHARE:
            label = "negative"
            look = {"partial_presence": "partial_presence", "short_absence": "short_absence"}.get(
                v.role, "regular_presence"
            )
        else:
            label, look = "ambiguous", "near_threshold"
        sim.add_truth(
            "habitual_absence",
            label,
            look,
            vehicle_id=v.vid,
            stand_id=v.stand_id,
            start=start,
            end=end,
            note=note,
        )


def _inactivity_truth(sim: Sim) -> None:
    rides = pd.DataFrame(sim.rides)
    last_op: dict[str, int] = {}
    worked_days: dict[str, set[int]] = {}
    for rec in rides.itertuples():
        t_drop = rec.t_drop
        assert isinstance(t_drop, float)  # a float column (Track.t)
        d = sim.day_of(t_drop)
        last_op[str(rec.vehicle_id)] = max(last_op.get(str(rec.vehicle_id), -1), d)
        worked_days.setdefault(str(rec.vehicle_id), set()).add(d)
    last = sim.days - 1
    m = sim.max_idle_days
    for v in sim.vehicles:
        lo = last_op.get(v.vid)
        idle_days = range(0, last + 1) if lo is None else range(lo + 1, last + 1)
        excused = sum(
            1
            for d in idle_days
            if any(
                r in ("suspended", "out_of_operation", "reserved", "revoked")
                for r in _barred_on(v, _date(sim, d))
            )
        )
        counted = len(idle_days) - excused
        # longest idle run inside the period (a break in the middle counts too)
        worked = sorted(worked_days.get(v.vid, set())) if lo is not None else []
        runs = [b - a - 1 for a, b in itertools.pairwise([-1, *worked, last + 1])]
        longest = max(runs) if runs else len(idle_days)
        note = f"idle {len(idle_days)} days to the end, excused {excused}, longest break {longest}"
        start = sim.t_of(0, 0) if lo is None else sim.t_of(lo + 1, 0)
        end = sim.t_of(last + 1, 0)
        margin = max(2, m // 12)
        if counted >= m + 2:
            label, look = "positive", "never_seen" if lo is None else "stopped_operating"
        elif excused and counted <= m - margin:
            label = "negative"
            look = "reserved_not_operating" if v.status == "reserved" else "suspended_not_operating"
        elif counted <= m - margin and longest <= m - margin:
            label = "negative"
            look = "long_vacation" if v.role == "long_vacation" else "operating_regularly"
        else:
            label, look = "ambiguous", "near_threshold"
        sim.add_truth("inactivity", label, look, vehicle_id=v.vid, start=start, end=end, note=note)


def _place_truth(sim: Sim) -> None:
    waits = pd.DataFrame(sim.waits)
    for label0, typ, place in sim.places:
        if waits.empty:
            continue
        sel = waits[[np.hypot(*(p - place)) < 1 for p in waits["place"]]]
        if sel.empty:
            continue
        n_v, n_d = sel["vehicle_id"].nunique(), sel["day"].nunique()
        note = f"{n_v} vehicles on {n_d} days, {len(sel)} waits"
        if label0 == "positive":
            label = (
                "positive"
                if n_v >= 4 and n_d >= 4
                else ("ambiguous" if n_v >= 3 and n_d >= 3 else "negative")
            )
        else:
            label = "negative"
        sim.add_truth(
            "illegal_stand_formation",
            label,
            typ,
            place=place,
            place_radius_m=150,
            start=float(sel["start"].min()),
            end=float(sel["end"].max()),
            note=note,
        )
    whole = (sim.t_of(0, 0), sim.t_of(sim.days, 0))
    for g in sim.groups:
        sim.add_truth(
            "illegal_stand_formation",
            "negative",
            "shared_lunch_meter_off",
            place=g.lunch,
            place_radius_m=150,
            start=whole[0],
            end=whole[1],
            stand_id=None,
            note=f"lunch place of stand {g.stand_id}'s drivers",
        )
    ov = pd.DataFrame(sim.overflow_waits)
    if not ov.empty:
        for sid, sel in ov.groupby("stand_id"):
            g = next(g for g in sim.groups if g.stand_id == sid)
            sim.add_truth(
                "illegal_stand_formation",
                "negative",
                "queue_overflow",
                place=np.mean(g.overflow, axis=0),
                place_radius_m=120,
                start=float(sel["start"].min()),
                end=float(sel["end"].max()),
                note=f"{sel['vehicle_id'].nunique()} vehicles, {len(sel)} waits "
                f"outside stand {sid}",
            )


# --------------------------------------------------------------------------- files


def write_files(sim: Sim, out_dir: Path, *, fmt: str = "csv") -> dict[str, Path]:
    """Write the contract inputs, the ground truth and the thresholds of the run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    assert sim.pings is not None
    paths: dict[str, Path] = {}
    pings = sim.pings.drop(columns=["t"])
    if fmt == "parquet":
        paths["pings"] = out_dir / "pings.parquet"
        pings.assign(meter=pings["meter"].astype(str)).to_parquet(paths["pings"], index=False)
    else:
        paths["pings"] = out_dir / "pings.csv"
        pings.to_csv(paths["pings"], index=False)
    st = sim.world.stands
    feats = [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [r.lon, r.lat]},
            "properties": {
                "stand_id": r.stand_id,
                "name": r.name,
                "radius_m": STAND_RADIUS_M,
                "municipality": MUNICIPALITY,
            },
        }
        for r in st.itertuples()
    ]
    paths["stands"] = out_dir / "stands.geojson"
    paths["stands"].write_text(
        json.dumps({"type": "FeatureCollection", "features": feats}, ensure_ascii=False),
        encoding="utf-8",
    )
    paths["boundary"] = out_dir / "boundary.geojson"
    paths["boundary"].write_text(
        json.dumps(
            {"type": "FeatureCollection", "features": [sim.world.boundary_wgs]}, ensure_ascii=False
        ),
        encoding="utf-8",
    )
    far = sim.day0 + dt.timedelta(days=sim.days + 365)
    rows = []
    for v in sim.vehicles:
        rows.append(
            {
                "vehicle_id": v.vid,
                "plate": "",
                "accessible": "true" if v.accessible else "false",
                "stands": v.stand_id,
                "status": v.status,
                "status_since": v.status_since.isoformat() if v.status_since else "",
                "status_until": v.status_until.isoformat() if v.status_until else "",
                "alvara_valid_until": (v.alvara_valid_until or far).isoformat(),
                "inspection_valid_until": (v.inspection_valid_until or far).isoformat(),
                "municipality": MUNICIPALITY,
                "year": "" if v.year is None else str(v.year),
                "first_registered_on": _iso(v.first_registered_on),
                "alvara_first_issued_on": _iso(v.alvara_first_issued_on),
                "last_inspection_on": _iso(v.last_inspection_on),
            }
        )
    paths["fleet"] = out_dir / "fleet.csv"
    pd.DataFrame(rows).to_csv(paths["fleet"], index=False)
    paths["truth"] = out_dir / "truth.csv"
    truth_frame(sim).to_csv(paths["truth"], index=False)
    paths["trips"] = out_dir / "truth_trips.csv"
    trips_frame(sim).to_csv(paths["trips"], index=False)
    if sim.registry is not None:
        paths["drivers"] = out_dir / "drivers.csv"
        drivers_frame(sim.registry).to_csv(paths["drivers"], index=False)
        paths["driver_links"] = out_dir / "driver_links.csv"
        links_frame(sim.registry).to_csv(paths["driver_links"], index=False)
        paths["provenance"] = out_dir / "PROVENANCE.md"
        paths["provenance"].write_text(provenance_text(seed=sim.seed), encoding="utf-8")
    th = run_thresholds(sim.days)
    if th:
        paths["thresholds"] = out_dir / "thresholds.toml"
        lines = []
        for kind, values in th.items():
            lines.append(f"[{kind}]")
            lines += [f"{k} = {val}" for k, val in values.items()]
        paths["thresholds"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    paths["meta"] = out_dir / "meta.json"
    paths["meta"].write_text(
        json.dumps(
            {
                "seed": sim.seed,
                "days": sim.days,
                "first_day": sim.day0.isoformat(),
                "as_of": (sim.day0 + dt.timedelta(days=sim.days - 1)).isoformat(),
                "prefixos": len(sim.vehicles),
                "pings": len(sim.pings),
                "rides": len(sim.rides),
                "timezone": TIMEZONE,
                "municipality": MUNICIPALITY,
                "thresholds": th,
                "synthetic_drivers": 0 if sim.registry is None else len(sim.registry.drivers),
                "stands": [g.stand_id for g in sim.groups],
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return paths


def truth_frame(sim: Sim) -> pd.DataFrame:
    return pd.DataFrame(sim.truth, columns=TRUTH_COLUMNS)


def trips_frame(sim: Sim) -> pd.DataFrame:
    r = pd.DataFrame(sim.rides)
    if r.empty:
        return r
    lon0, lat0 = sim.world.to_ll.transform(r["x0"].to_numpy(), r["y0"].to_numpy())
    lon1, lat1 = sim.world.to_ll.transform(r["x1"].to_numpy(), r["y1"].to_numpy())
    return pd.DataFrame(
        {
            "vehicle_id": r["vehicle_id"],
            "pickup_at": [sim.iso(t) for t in r["t_pick"]],
            "dropoff_at": [sim.iso(t) for t in r["t_drop"]],
            "pickup_lat": np.round(lat0, 6),
            "pickup_lon": np.round(lon0, 6),
            "dropoff_lat": np.round(lat1, 6),
            "dropoff_lon": np.round(lon1, 6),
            "driven_m": r["driven_m"].round(1),
            "straight_m": r["straight_m"].round(1),
            "ratio": r["ratio"].round(4),
            "kind": r["kind"],
            "origin": r["origin"],
            "pickup_stand_id": r["pickup_stand_id"],
        }
    )


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS)
    parser.add_argument("--prefixos", type=int, default=DEFAULT_PREFIXOS)
    parser.add_argument("--format", choices=["csv", "parquet"], default="parquet")
    parser.add_argument("--out", type=Path, required=True)
    a = parser.parse_args()
    sim = simulate(seed=a.seed, days=a.days, n_prefixos=a.prefixos)
    paths = write_files(sim, a.out, fmt=a.format)
    print(json.dumps({k: str(p) for k, p in paths.items()}, indent=2))


if __name__ == "__main__":
    main()
