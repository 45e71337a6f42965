"""Registry and tracker detectors against look-alikes built by hand: an independent check.

Measures what ``pontual analyze`` finds and proposes for ``habitual_absence``,
``operating_while_barred``, ``driver_not_allowed``, ``tracking_gap``, ``outside_municipality``
and ``inactivity`` on small scenarios written from how taxis, trackers and the registry behave,
not from the detectors' code (a QA pass's generator, made reproducible). Each case is one
vehicle, named after the case, in one of three worlds; each world is one pings file run through
``pontual analyze --municipality 4314902`` (Porto Alegre):

- ``stands``: 30 days from Monday 4 March 2024 (``--as-of`` 2 April; Good Friday, 29 March, a
  rest day for HA7 and HA11), eight real EPTC stands (points, 30 m radius), four licensees
  working from theirs every day, the ``habitual_absence`` cases; ``--licences`` and
  ``--stand-suspensions``;
- ``registry``: 21 days from 4 March (``--as-of`` 24 March), five licensees working from their
  stands (their licences passed with ``--licences``: the fleet file, as the QA pass wrote it,
  has no ``stands`` column), the ``operating_while_barred`` (suspension 10–19 March),
  ``driver_not_allowed`` (12 March), ``tracking_gap`` (14 March) and ``outside_municipality``
  (15 March) cases; status and alvará dates in the fleet, ``--drivers`` and
  ``--driver-links``, a ``driver_id`` on every fix; on other days these vehicles work
  afternoons away from stands;
- ``inactivity``: 75 days from 1 January (``--as-of`` 15 March, ``--kinds inactivity``, 60-day
  limit), four taxis driving every day and the ``inactivity`` cases.

Rides are straight lines at 30 km/h (40 in ``inactivity``) between random points of Porto
Alegre (inside its boundary, ``data/brazil/boundaries``, 500 m or more from any stand); the
tracker sends a fix every 15–30 s (100–140 s for HA16) with the meter (``free``,
``occupied``, ``off``; empty for unknown) and Gaussian noise of 5 m per axis (HA4 40 m, OM4
20 m). Each vehicle draws from its own generator, seeded by ``--seed`` and its name: a case
gives the same tracks alone (``--cases``) or among the others.

Cases (should be; "what" in ``CASES``): habitual_absence HA1 at its stand 5 of 30 days and
HA1B never there (yes); HA2–HA17 (no): away only during a stand suspension, tracker off, 40 m
noise, licence starting or ending mid-month, stand closed, weekends elsewhere or without data,
meter off most days, tracker asleep while parked at the stand, every other day (borderline),
a busy stand, a night shift, a sparse tracker, a queue overflowing 75 m. operating_while_barred
OB1, OB5, OB6, OB14 rides inside the suspension, OB8 out of operation, OB10 alvará expired
(yes); OB11 a ride across midnight into it (ambiguous); the rest (no): no passenger, before or
after it, meter glitches, a suspension without a start. driver_not_allowed DR1, DR2, DR7, DR9,
DR25 unlinked or unregistered drivers, DR13 ICTP expired, DR14 CNH suspended (yes); the rest
(no): links valid that day, ids written otherwise, a private trip, a 36 s ride, a badge glitch.
tracking_gap TG1 a 15-min silence over 6 km with a passenger (yes), TG2 a silence without
moving (review only), TG3–TG4 (no). outside_municipality OM1, OM6 pickups in Canoas (yes),
OM2–OM5 (no). inactivity IN1, IN4 60+ days without service (yes), IN2 tracker off (no; review
only is fine), IN3, IN5, IN6 (no).

Reported per case: its findings of those six kinds (``findings.geojson``) and proposals
(``proposals.json``; "(review)" for a finding listed for review in ``summary.json``). Below
the table, every false accusation (a finding of a "no" case, or of a kind other than the
case's, not only listed for review; a proposal of a "review" case; a finding of a background
vehicle) and every miss (a "yes" case not found, found for another reason or not proposed),
with vehicle, local time, confidence and article.

Usage::

    .venv/bin/python bench/bench_registry_lookalikes.py [--cases NAME ...] [--out DIR] [--seed 7]
        [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import shapely
import shapely.geometry
from _analyze_run import analyze_outputs, pontual, write_csv

ROOT = Path(__file__).resolve().parents[1]
BOUNDARIES = ROOT / "data" / "brazil" / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"
POA = "4314902"
TZ = timezone(timedelta(hours=-3))
M_LAT = 111_320.0
M_LON = M_LAT * math.cos(math.radians(30.03))
RADIUS = 30
# Real EPTC stands (their codes in the comments).
STANDS = {
    "S1": (-30.0297335854, -51.2218831698),  # 247 Annes Dias x Independência
    "S2": (-30.0470371724, -51.2137007741),  # 310 Azenha x Ipiranga
    "S3": (-30.0596250717, -51.2288276307),  # 65 Hospital Mãe de Deus
    "S4": (-30.0234448702, -51.1968555566),  # 315 Bordini x 24 de Outubro
    "S5": (-30.0402308680, -51.2259460121),  # 137 João Alfredo x República
    "S6": (-29.9970227185, -51.1961960469),  # 95 Lauro Müller x A. J. Renner
    "S7": (-30.0179052628, -51.1585408853),  # 25 Sapé x Francisco Trein
    "S8": (-30.0902069979, -51.2415953310),  # 169 Itapitocai x Icaraí
}
ABSENCE, BARRED, DRIVER = "habitual_absence", "operating_while_barred", "driver_not_allowed"
GAP, OUTSIDE, INACTIVITY = "tracking_gap", "outside_municipality", "inactivity"
KINDS = (ABSENCE, BARRED, DRIVER, GAP, OUTSIDE, INACTIVITY)

LatLon = tuple[float, float]
Row = tuple[str, datetime, float, float, str, str | None]


@cache
def boundary() -> Any:
    """Porto Alegre's boundary (the repository's copy), prepared."""
    fc = json.loads(BOUNDARIES.read_text())
    feature = next(f for f in fc["features"] if f["properties"]["cod_ibge"] == POA)
    geom = shapely.geometry.shape(feature["geometry"])
    shapely.prepare(geom)
    return geom


def inside(p: LatLon) -> bool:
    return bool(shapely.contains_xy(boundary(), p[1], p[0]))


def offset(p: LatLon, north: float, east: float) -> LatLon:
    return p[0] + north / M_LAT, p[1] + east / M_LON


def dist(a: LatLon, b: LatLon) -> float:
    return math.hypot((a[0] - b[0]) * M_LAT, (a[1] - b[1]) * M_LON)


def city_point(rng: np.random.Generator) -> LatLon:
    """A random point of Porto Alegre 500 m or more from every stand."""
    while True:
        p = (float(rng.uniform(-30.10, -30.00)), float(rng.uniform(-51.23, -51.12)))
        if all(dist(p, s) > 500 for s in STANDS.values()) and inside(p):
            return p


def day_at(d: date, hh: int, mm: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, hh, mm, tzinfo=TZ)


class Track:
    """One vehicle's tracker: a fix every few seconds while the vehicle drives and waits."""

    def __init__(
        self,
        vid: str,
        rng: np.random.Generator,
        noise: float = 5.0,
        driver: str | None = None,
        step_s: tuple[float, float] = (15.0, 30.0),
    ) -> None:
        self.vid, self.rng, self.noise, self.driver, self.step_s = vid, rng, noise, driver, step_s
        self.rows: list[Row] = []
        self.t = datetime.min.replace(tzinfo=TZ)
        self.pos: LatLon = (0.0, 0.0)
        self.home = city_point(rng)

    def start(self, t: datetime, pos: LatLon) -> None:
        self.t, self.pos = t, pos

    def fix(self, p: LatLon, meter: str) -> None:
        """Send a fix at ``p``; never less than 5 s after the previous one."""
        if self.rows and timedelta(0) <= self.rows[-1][1] - self.t < timedelta(seconds=60):
            self.t = self.rows[-1][1] + timedelta(seconds=5)
        n = self.rng.normal(0, self.noise, 2)
        q = offset(p, float(n[0]), float(n[1]))
        self.rows.append((self.vid, self.t, round(q[0], 6), round(q[1], 6), meter, self.driver))

    def step(self) -> timedelta:
        return timedelta(seconds=float(self.rng.uniform(*self.step_s)))

    def drive(self, to: LatLon, meter: str, kmh: float = 30.0) -> None:
        t0, p0 = self.t, self.pos
        dur = dist(p0, to) / (kmh / 3.6)
        end = t0 + timedelta(seconds=dur)
        self.fix(p0, meter)
        t = t0
        while (t := t + self.step()) < end:
            f = (t - t0).total_seconds() / dur
            self.t = t
            self.fix((p0[0] + f * (to[0] - p0[0]), p0[1] + f * (to[1] - p0[1])), meter)
        self.t, self.pos = end, to
        self.fix(to, meter)

    def wait(self, seconds: float, meter: str, at: LatLon | None = None) -> None:
        if at is not None:
            self.pos = at
        end = self.t + timedelta(seconds=seconds)
        while self.t < end:
            self.fix(self.pos, meter)
            self.t += self.step()
        self.t = end
        self.fix(self.pos, meter)

    def gap(self, seconds: float, to: LatLon | None = None) -> None:
        """The tracker is silent for ``seconds``; the vehicle is at ``to`` after them."""
        self.t += timedelta(seconds=seconds)
        if to is not None:
            self.pos = to


def stand_day(
    tr: Track,
    d: date,
    stand: str,
    hh: int = 8,
    rides: int = 3,
    wait_s: float = 1800,
    silent_wait: bool = False,
    queue_offset: tuple[float, float] = (0.0, 0.0),
) -> None:
    """From home to the stand; ``rides`` times wait there and take a passenger across town."""
    tr.start(day_at(d, hh, int(tr.rng.integers(0, 20))), tr.home)
    sp = offset(STANDS[stand], *queue_offset)
    tr.drive(sp, "free")
    for _ in range(rides):
        if silent_wait:  # the tracker sleeps while parked
            tr.fix(sp, "free")
            tr.gap(wait_s)
            tr.fix(sp, "free")
        else:
            tr.wait(wait_s, "free", at=sp)
        tr.drive(city_point(tr.rng), "occupied")
        tr.wait(30, "free")
        tr.drive(sp, "free")
    tr.drive(tr.home, "off")


def away_day(tr: Track, d: date, hh: int = 8, rides: int = 3) -> None:
    """Street work, no stand: cruise, wait 5 min, take a passenger, ``rides`` times."""
    tr.start(day_at(d, hh, int(tr.rng.integers(0, 20))), tr.home)
    for _ in range(rides):
        tr.drive(city_point(tr.rng), "free")
        tr.wait(300, "free")
        tr.drive(city_point(tr.rng), "occupied")
        tr.wait(30, "free")
    tr.drive(tr.home, "off")


def private_day(tr: Track, d: date, hh: int = 10) -> None:
    """A private errand, meter off."""
    tr.start(day_at(d, hh, int(tr.rng.integers(0, 20))), tr.home)
    tr.drive(city_point(tr.rng), "off")
    tr.wait(600, "off")
    tr.drive(tr.home, "off")


def normal_days(tr: Track, days: Iterable[date], skip: Iterable[date] = ()) -> None:
    skipped = set(skip)
    for d in days:
        if d not in skipped:
            away_day(tr, d, hh=13, rides=2)


def ride_at(
    tr: Track, d: date, hh: int, mm: int, ride_min: float = 10, driver: str | None = None
) -> None:
    """A ride of ``ride_min`` minutes from a random point at ``hh:mm``, a minute's wait around."""
    if driver is not None:
        tr.driver = driver
    o = city_point(tr.rng)
    tr.start(day_at(d, hh, mm), o)
    tr.wait(60, "free")
    length, ang = ride_min * 60 * 30 / 3.6, float(tr.rng.uniform(0, 2 * math.pi))
    tr.drive(offset(o, length * math.sin(ang), length * math.cos(ang)), "occupied")
    tr.wait(60, "free")


def short_day(tr: Track, d: date, meter_ride: str = "occupied", meter_free: str = "free") -> None:
    """Cruise, one ride, home, at 40 km/h; empty meters: the tracker lost the meter."""
    tr.start(day_at(d, 10, int(tr.rng.integers(0, 30))), tr.home)
    tr.drive(city_point(tr.rng), meter_free, kmh=40)
    tr.drive(city_point(tr.rng), meter_ride, kmh=40)
    tr.drive(tr.home, "off" if meter_free else "", kmh=40)


def parked(tr: Track, d: date) -> None:
    """Parked at home all day, meter off: a heartbeat fix every 3 h."""
    for h in range(0, 24, 3):
        tr.start(day_at(d, h), tr.home)
        tr.fix(tr.home, "off")


# --- worlds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldSpec:
    start: date
    n_days: int
    as_of: str
    fleet_header: tuple[str, ...]
    background: Callable[[World], None]
    licences: bool = False
    suspensions: bool = False
    drivers: bool = False  # --drivers, --driver-links and a driver_id on the pings
    kinds: str = ""


class World:
    """The vehicles and registry files of one ``pontual analyze`` run."""

    def __init__(self, name: str, seed: int) -> None:
        self.name, self.spec, self.seed = name, WORLDS[name], seed
        self.days = [self.spec.start + timedelta(days=k) for k in range(self.spec.n_days)]
        self.tracks: list[Track] = []
        self.fleet: list[list[str]] = []
        self.licences: list[list[str]] = []
        self.suspensions: list[list[str]] = []
        self.drivers: list[list[str]] = []
        self.links: list[list[str]] = []

    def vehicle(
        self,
        vid: str,
        status: str = "ativo",
        since: str = "",
        until: str = "",
        alvara: str = "",
        **track: Any,
    ) -> Track:
        tr = Track(vid, np.random.default_rng([self.seed, zlib.crc32(vid.encode())]), **track)
        self.tracks.append(tr)
        row = [vid, "false", status, since, until, alvara]
        self.fleet.append(row[: len(self.spec.fleet_header)])
        return tr

    def licensee(self, vid: str, stand: str, since: str = "", until: str = "", **kw: Any) -> Track:
        self.licences.append([vid, stand, since, until])
        return self.vehicle(vid, **kw)

    def add_driver(
        self, did: str, ictp: str = "", cnh: str = "", since: str = "", until: str = ""
    ) -> None:
        self.drivers.append([did, f"Pessoa {did}", "true", ictp, cnh, since, until])

    def add_link(
        self, vid: str, did: str, role: str = "titular", since: str = "2024-01-01", until: str = ""
    ) -> None:
        self.links.append([vid, did, role, since, until])

    def write(self, folder: Path) -> tuple[list[str], int]:
        """Write the inputs; return the options of ``pontual analyze`` and the number of fixes."""
        spec = self.spec
        rows = sorted((r for tr in self.tracks for r in tr.rows), key=lambda r: (r[0], r[1]))
        header = ["vehicle_id", "timestamp", "lat", "lon", "meter"]
        header += ["driver_id"] if spec.drivers else []
        write_csv(
            folder / "pings.csv",
            header,
            (
                [v, t.isoformat(), lat, lon, m, d or ""][: len(header)]
                for v, t, lat, lon, m, d in rows
            ),
        )
        features = [
            {
                "type": "Feature",
                "properties": {"stand_id": k, "name": k, "radius_m": RADIUS, "municipality": POA},
                "geometry": {"type": "Point", "coordinates": [lon, lat]},
            }
            for k, (lat, lon) in STANDS.items()
        ]
        stands = folder / "stands.geojson"
        stands.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
        write_csv(folder / "fleet.csv", spec.fleet_header, self.fleet)
        args = ["--pings", str(folder / "pings.csv"), "--stands", str(stands)]
        args += ["--fleet", str(folder / "fleet.csv")]
        if spec.licences:
            header = ["vehicle_id", "stand_id", "valid_from", "valid_until"]
            write_csv(folder / "licences.csv", header, self.licences)
            args += ["--licences", str(folder / "licences.csv")]
        if spec.suspensions:
            header = ["stand_id", "vehicle_id", "driver_id", "starts_on", "ends_on", "kind"]
            header += ["reason", "process_ref"]
            write_csv(folder / "stand_susp.csv", header, self.suspensions)
            args += ["--stand-suspensions", str(folder / "stand_susp.csv")]
        if spec.drivers:
            header = ["driver_id", "name", "synthetic", "ictp_valid_until", "cnh_status"]
            header += ["cnh_status_since", "cnh_status_until"]
            write_csv(folder / "drivers.csv", header, self.drivers)
            header = ["vehicle_id", "driver_id", "role", "valid_from", "valid_until"]
            write_csv(folder / "driver_links.csv", header, self.links)
            args += ["--drivers", str(folder / "drivers.csv")]
            args += ["--driver-links", str(folder / "driver_links.csv")]
        args += ["--municipality", POA, "--as-of", spec.as_of]
        args += ["--kinds", spec.kinds] if spec.kinds else []
        return args, len(rows)


def stands_background(w: World) -> None:
    for k, stand in enumerate(["S2", "S3", "S4", "S6"], 1):
        tr = w.licensee(f"B{k}", stand)
        for d in w.days:
            stand_day(tr, d, stand)


def registry_background(w: World) -> None:
    for k, stand in enumerate(["S2", "S3", "S4", "S6", "S1"], 1):
        tr = w.licensee(f"B{k}", stand)
        for d in w.days:
            stand_day(tr, d, stand)
    w.add_driver("D900")  # registered, linked to no vehicle


def inactivity_background(w: World) -> None:
    for k in range(1, 5):
        tr = w.vehicle(f"B{k}")
        for d in w.days:
            short_day(tr, d)


FLEET = ("vehicle_id", "accessible", "status")
WORLDS = {
    "stands": WorldSpec(date(2024, 3, 4), 30, "2024-04-02", FLEET, stands_background, True, True),
    "registry": WorldSpec(
        date(2024, 3, 4),
        21,
        "2024-03-24",
        (*FLEET, "status_since", "status_until", "alvara_valid_until"),
        registry_background,
        licences=True,
        drivers=True,
    ),
    "inactivity": WorldSpec(
        date(2024, 1, 1),
        75,
        "2024-03-15",
        (*FLEET, "status_since", "status_until"),
        inactivity_background,
        kinds=INACTIVITY,
    ),
}


# --- cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    world: str
    kind: str
    should: str  # "yes", "no", "review" (listed for review, not proposed), "ambiguous"
    what: str
    build: Callable[[World], None]
    reason: str = ""  # the details.reason a "yes" should carry, where the QA pass said it
    note: str = ""

    @property
    def label(self) -> str:
        extra = self.reason or self.note
        return f"{self.should} ({extra})" if extra else self.should


CASES: dict[str, Case] = {}


def case(
    world: str, kind: str, should: str, what: str, reason: str = "", note: str = ""
) -> Callable[[Callable[[World], None]], Callable[[World], None]]:
    """Register a case: its vehicle is named after the function, upper-cased."""

    def register(build: Callable[[World], None]) -> Callable[[World], None]:
        CASES[build.__name__.upper()] = Case(world, kind, should, what, build, reason, note)
        return build

    return register


HOLIDAY = date(2024, 3, 29)


def rest_day(d: date) -> bool:
    return d.weekday() >= 5 or d == HOLIDAY


@case("stands", ABSENCE, "yes", "at its stand 5 of 30 days, street work the others")
def ha1(w: World) -> None:
    tr = w.licensee("HA1", "S1")
    for k, d in enumerate(w.days):
        if k % 6 == 0:
            stand_day(tr, d, "S1")
        else:
            away_day(tr, d)


@case("stands", ABSENCE, "yes", "never at its stand, street work every day")
def ha1b(w: World) -> None:
    tr = w.licensee("HA1B", "S1")
    for d in w.days:
        away_day(tr, d)


@case("stands", ABSENCE, "no", "away only during its 20-day stand suspension")
def ha2(w: World) -> None:
    tr = w.licensee("HA2", "S2")
    s0, s1 = date(2024, 3, 6), date(2024, 3, 25)
    w.suspensions.append(["S2", "HA2", "", str(s0), str(s1), "suspension", "desacato", "PA-1"])
    for d in w.days:
        if s0 <= d <= s1:
            away_day(tr, d)
        else:
            stand_day(tr, d, "S2")


@case("stands", ABSENCE, "no", "tracker off 22 days, at its stand the 8 with data")
def ha3(w: World) -> None:
    tr = w.licensee("HA3", "S3")
    for k, d in enumerate(w.days):
        if k < 4 or k >= 26:
            stand_day(tr, d, "S3")


@case("stands", ABSENCE, "no", "at its stand daily, queueing 20 m off, 40 m noise")
def ha4(w: World) -> None:
    tr = w.licensee("HA4", "S4", noise=40.0)
    for d in w.days:
        stand_day(tr, d, "S4", queue_offset=(20.0, 0.0))


@case("stands", ABSENCE, "no", "licence from 03-19, at the stand from then on")
def ha5(w: World) -> None:
    tr = w.licensee("HA5", "S5", since="2024-03-19")
    for d in w.days:
        if d >= date(2024, 3, 19):
            stand_day(tr, d, "S5")
        else:
            away_day(tr, d)


@case("stands", ABSENCE, "no", "stand closed 20 days, away only then")
def ha6(w: World) -> None:
    tr = w.licensee("HA6", "S6")
    c0, c1 = date(2024, 3, 4), date(2024, 3, 23)
    w.suspensions.append(["S6", "", "", str(c0), str(c1), "closed", "obras", ""])
    for d in w.days:
        if c0 <= d <= c1:
            away_day(tr, d)
        else:
            stand_day(tr, d, "S6")


@case("stands", ABSENCE, "no", "weekdays at its stand, weekends and holiday elsewhere")
def ha7(w: World) -> None:
    tr = w.licensee("HA7", "S7")
    for d in w.days:
        if rest_day(d):
            away_day(tr, d)
        else:
            stand_day(tr, d, "S7")


@case("stands", ABSENCE, "no", "at its stand 10 days, meter off (private use) the other 20")
def ha8(w: World) -> None:
    tr = w.licensee("HA8", "S8")
    for k, d in enumerate(w.days):
        if k % 3 == 0:
            stand_day(tr, d, "S8")
        else:
            private_day(tr, d)


@case(
    "stands", ABSENCE, "no", "tracker asleep while parked at its stand (fixes on arriving/leaving)"
)
def ha9(w: World) -> None:
    tr = w.licensee("HA9", "S1")
    for d in w.days:
        stand_day(tr, d, "S1", silent_wait=True)


@case("stands", ABSENCE, "no", "at its stand every other day", note="borderline")
def ha10(w: World) -> None:
    tr = w.licensee("HA10", "S5")
    for k, d in enumerate(w.days):
        if k % 2 == 0:
            stand_day(tr, d, "S5")
        else:
            away_day(tr, d)


@case("stands", ABSENCE, "no", "weekdays at its stand, no data weekends and holiday")
def ha11(w: World) -> None:
    tr = w.licensee("HA11", "S7")
    for d in w.days:
        if not rest_day(d):
            stand_day(tr, d, "S7")


@case("stands", ABSENCE, "no", "parked 4 h at its stand, tracker asleep, one ride a day")
def ha12(w: World) -> None:
    tr = w.licensee("HA12", "S8")
    for d in w.days:
        stand_day(tr, d, "S8", hh=7, rides=1, wait_s=4 * 3600, silent_wait=True)


@case("stands", ABSENCE, "no", "busy stand: 40 s waits, 8 rides a day")
def ha13(w: World) -> None:
    tr = w.licensee("HA13", "S3")
    for d in w.days:
        stand_day(tr, d, "S3", rides=8, wait_s=40)


@case("stands", ABSENCE, "no", "licence ends 03-15, street work afterwards")
def ha14(w: World) -> None:
    tr = w.licensee("HA14", "S1", until="2024-03-15")
    for d in w.days:
        if d <= date(2024, 3, 15):
            stand_day(tr, d, "S1")
        else:
            away_day(tr, d)


@case("stands", ABSENCE, "no", "night shift at its stand, 21:00 to about 01:30")
def ha15(w: World) -> None:
    tr = w.licensee("HA15", "S5")
    for d in w.days:
        stand_day(tr, d, "S5", hh=21, rides=3, wait_s=1500)


@case("stands", ABSENCE, "no", "sparse tracker (a fix every ~2 min), at its stand daily")
def ha16(w: World) -> None:
    tr = w.licensee("HA16", "S8", step_s=(100.0, 140.0))
    for d in w.days:
        stand_day(tr, d, "S8")


@case("stands", ABSENCE, "no", "queue overflow: waits 75 m from the stand point daily")
def ha17(w: World) -> None:
    tr = w.licensee("HA17", "S7")
    for d in w.days:
        stand_day(tr, d, "S7", queue_offset=(75.0, 0.0))


D10, D19 = "2024-03-10", "2024-03-19"
SUSPENDED = [date(2024, 3, 10) + timedelta(days=k) for k in range(10)]


def suspended(w: World, vid: str, also_skip: Iterable[date] = (), **kw: Any) -> Track:
    """A vehicle suspended 03-10..03-19 (unless ``kw`` says otherwise), working the other days."""
    tr = w.vehicle(vid, **({"status": "suspenso", "since": D10, "until": D19} | kw))
    normal_days(tr, w.days, [*SUSPENDED, *also_skip])
    return tr


@case("registry", BARRED, "yes", "suspended, a ride on 03-12 14:00")
def ob1(w: World) -> None:
    ride_at(suspended(w, "OB1"), date(2024, 3, 12), 14, 0)


@case("registry", BARRED, "no", "suspended, a trip meter off on 03-12")
def ob2(w: World) -> None:
    tr = suspended(w, "OB2")
    tr.start(day_at(date(2024, 3, 12), 9), tr.home)
    tr.drive(city_point(tr.rng), "off")
    tr.wait(300, "off")


@case("registry", BARRED, "no", "suspended, driving meter free on 03-13, no passenger")
def ob3(w: World) -> None:
    tr = suspended(w, "OB3")
    tr.start(day_at(date(2024, 3, 13), 9), tr.home)
    for _ in range(3):
        tr.drive(city_point(tr.rng), "free")
    tr.drive(tr.home, "off")


@case("registry", BARRED, "no", "a ride at 00:10 the day after the suspension")
def ob4(w: World) -> None:
    ride_at(suspended(w, "OB4", [date(2024, 3, 20)]), date(2024, 3, 20), 0, 10)


@case("registry", BARRED, "yes", "a ride at 23:35 on its last day")
def ob5(w: World) -> None:
    ride_at(suspended(w, "OB5"), date(2024, 3, 19), 23, 35)


@case("registry", BARRED, "yes", "a ride at 00:05 on its first day")
def ob6(w: World) -> None:
    ride_at(suspended(w, "OB6"), date(2024, 3, 10), 0, 5)


@case("registry", BARRED, "no", "a ride at 23:35 the day before, over by 23:47")
def ob7(w: World) -> None:
    ride_at(suspended(w, "OB7", [date(2024, 3, 9)]), date(2024, 3, 9), 23, 35)


@case("registry", BARRED, "yes", "out of operation, a ride on 03-12", reason="out_of_operation")
def ob8(w: World) -> None:
    ride_at(suspended(w, "OB8", status="fora de operação"), date(2024, 3, 12), 14, 0)


@case("registry", BARRED, "no", "alvará valid until 03-15, a ride at 23:30 that day")
def ob9(w: World) -> None:
    tr = w.vehicle("OB9", alvara="2024-03-15")
    normal_days(tr, w.days[:11])
    ride_at(tr, date(2024, 3, 15), 23, 30)


@case(
    "registry", BARRED, "yes", "alvará valid until 03-15, a ride on 03-16", reason="alvara_expired"
)
def ob10(w: World) -> None:
    tr = w.vehicle("OB10", alvara="2024-03-15")
    normal_days(tr, w.days[:11])
    ride_at(tr, date(2024, 3, 16), 10, 0)


@case(
    "registry",
    BARRED,
    "ambiguous",
    "a 20-min ride from 23:49 the day before into the suspension",
    note="not accusing is fine",
)
def ob11(w: World) -> None:
    ride_at(suspended(w, "OB11", [date(2024, 3, 9)]), date(2024, 3, 9), 23, 48, ride_min=20)


@case("registry", BARRED, "no", "suspension without a start date, a ride on 03-12")
def ob12(w: World) -> None:
    ride_at(suspended(w, "OB12", since=""), date(2024, 3, 12), 14, 0)


@case("registry", BARRED, "no", "to the workshop meter off, a 40 s 'occupied' glitch")
def ob13(w: World) -> None:
    tr = suspended(w, "OB13")
    tr.start(day_at(date(2024, 3, 12), 9), tr.home)
    shop = city_point(tr.rng)
    mid = ((tr.home[0] + shop[0]) / 2, (tr.home[1] + shop[1]) / 2)
    tr.drive(mid, "off")
    tr.drive(offset(mid, 330, 0), "occupied")
    tr.drive(shop, "off")
    tr.wait(300, "off")


@case("registry", BARRED, "yes", "a 20-min ride from 23:49 on its last day into the next")
def ob14(w: World) -> None:
    tr = suspended(w, "OB14", [date(2024, 3, 20)])
    ride_at(tr, date(2024, 3, 19), 23, 49, ride_min=20)


@case("registry", BARRED, "no", "parked at home, meter 'occupied' 10 min, no movement")
def ob15(w: World) -> None:
    tr = suspended(w, "OB15")
    tr.start(day_at(date(2024, 3, 12), 9), tr.home)
    tr.wait(60, "off")
    tr.wait(600, "occupied")
    tr.wait(60, "off")


DAY = date(2024, 3, 12)  # driver_not_allowed's day


def titular_car(w: World, vid: str, titular: str, link: bool = True, ping_id: str = "") -> Track:
    """A vehicle its titular drives every afternoon but on ``DAY``."""
    w.add_driver(titular)
    if link:
        w.add_link(vid, titular)
    tr = w.vehicle(vid, driver=ping_id or titular)
    normal_days(tr, w.days, [DAY])
    return tr


def own_car(w: World, vid: str, did: str, ictp: str = "", cnh: str = "", **kw: str) -> None:
    """Its titular's documents are ``ictp``/``cnh``; a ride at 10:00 on ``DAY``."""
    w.add_driver(did, ictp, cnh, **kw)
    w.add_link(vid, did)
    tr = w.vehicle(vid, driver=did)
    normal_days(tr, w.days, [DAY])
    ride_at(tr, DAY, 10, 0)


@case("registry", DRIVER, "yes", "a ride by D900, registered but not linked")
def dr1(w: World) -> None:
    ride_at(titular_car(w, "DR1", "D101"), DAY, 10, 0, driver="D900")


@case("registry", DRIVER, "yes", "a ride by X999, not registered")
def dr2(w: World) -> None:
    ride_at(titular_car(w, "DR2", "D102"), DAY, 10, 0, driver="X999")


@case("registry", DRIVER, "no", "a ride by its titular")
def dr3(w: World) -> None:
    ride_at(titular_car(w, "DR3", "D103"), DAY, 10, 0, driver="D103")


@case("registry", DRIVER, "no", "rides at 00:20 and 10:00 by an auxiliary linked from that day")
def dr4(w: World) -> None:
    tr = titular_car(w, "DR4", "D104")
    w.add_driver("D204")
    w.add_link("DR4", "D204", "auxiliar", "2024-03-12")
    ride_at(tr, DAY, 0, 20, driver="D204")
    ride_at(tr, DAY, 10, 0, driver="D204")


@case("registry", DRIVER, "no", "its titular's id in lower case on the pings")
def dr5(w: World) -> None:
    ride_at(titular_car(w, "DR5", "D105"), DAY, 10, 0, driver="d105")


@case("registry", DRIVER, "no", "its titular's id with a trailing space on the pings")
def dr6(w: World) -> None:
    ride_at(titular_car(w, "DR6", "D106"), DAY, 10, 0, driver="D106 ")


@case("registry", DRIVER, "yes", "a ride by an auxiliary whose link ended the day before")
def dr7(w: World) -> None:
    tr = titular_car(w, "DR7", "D107")
    w.add_driver("D207")
    w.add_link("DR7", "D207", "auxiliar", "2024-01-01", "2024-03-11")
    ride_at(tr, DAY, 10, 0, driver="D207")


@case("registry", DRIVER, "no", "a ride at 23:35 by an auxiliary linked until that day")
def dr8(w: World) -> None:
    tr = titular_car(w, "DR8", "D108")
    w.add_driver("D208")
    w.add_link("DR8", "D208", "auxiliar", "2024-01-01", "2024-03-12")
    ride_at(tr, DAY, 23, 35, driver="D208")


@case("registry", DRIVER, "yes", "a ride at 23:35 by an auxiliary linked from the next day")
def dr9(w: World) -> None:
    tr = titular_car(w, "DR9", "D109")
    w.add_driver("D209")
    w.add_link("DR9", "D209", "auxiliar", "2024-03-13")
    ride_at(tr, DAY, 23, 35, driver="D209")


@case("registry", DRIVER, "no", "D900 (not linked) on a private trip, meter off")
def dr10(w: World) -> None:
    tr = titular_car(w, "DR10", "D110")
    tr.driver = "D900"
    tr.start(day_at(DAY, 9), tr.home)
    tr.drive(city_point(tr.rng), "off")
    tr.wait(600, "off")
    tr.drive(tr.home, "off")


@case("registry", DRIVER, "no", "a vehicle with no link at all, driven by D900")
def dr11(w: World) -> None:
    normal_days(w.vehicle("DR11", driver="D900"), w.days)


@case("registry", DRIVER, "no", "its titular's ICTP expired 02-25")
def dr12(w: World) -> None:
    own_car(w, "DR12", "D112", ictp="2024-02-25")
    w.add_driver("D112b")  # registered, never on the pings


@case("registry", DRIVER, "yes", "its titular's ICTP expired 01-31", reason="ictp_expired")
def dr13(w: World) -> None:
    own_car(w, "DR13", "D113", ictp="2024-01-31")


@case("registry", DRIVER, "yes", "its titular's CNH suspended 03-10..03-20", reason="cnh_suspended")
def dr14(w: World) -> None:
    own_car(w, "DR14", "D114", cnh="suspensa", since="2024-03-10", until="2024-03-20")


@case("registry", DRIVER, "no", "D900 drives a 36 s ride")
def dr16(w: World) -> None:
    tr = titular_car(w, "DR16", "D116")
    ride_at(tr, DAY, 10, 0, ride_min=0.6, driver="D900")


@case("registry", DRIVER, "no", "its titular's link renewed: ends 03-11, a new one from 03-12")
def dr17(w: World) -> None:
    tr = titular_car(w, "DR17", "D117", link=False)
    w.add_link("DR17", "D117", "titular", "2024-01-01", "2024-03-11")
    w.add_link("DR17", "D117", "titular", "2024-03-12")
    ride_at(tr, DAY, 10, 0, driver="D117")


@case("registry", DRIVER, "no", "a titular's ride, one fix mid-ride carrying D900")
def dr19(w: World) -> None:
    tr = titular_car(w, "DR19", "D119")
    ride_at(tr, DAY, 10, 0, driver="D119")
    ride = [k for k, r in enumerate(tr.rows) if r[1].date() == DAY and r[4] == "occupied"]
    k = ride[len(ride) // 2]
    tr.rows[k] = (*tr.rows[k][:5], "D900")


@case("registry", DRIVER, "no", "registry D0120, pings D120")
def dr20(w: World) -> None:
    ride_at(titular_car(w, "DR20", "D0120", ping_id="D120"), DAY, 10, 0, driver="D120")


@case("registry", DRIVER, "no", "registry CPF with punctuation, pings digits only")
def dr21(w: World) -> None:
    tr = titular_car(w, "DR21", "123.456.789-09", ping_id="12345678909")
    ride_at(tr, DAY, 10, 0, driver="12345678909")


@case("registry", DRIVER, "no", "auxiliary linked until 03-12, a ride 23:54 to about 00:14")
def dr22(w: World) -> None:
    tr = titular_car(w, "DR22", "D122")
    w.add_driver("D222")
    w.add_link("DR22", "D222", "auxiliar", "2024-01-01", "2024-03-12")
    ride_at(tr, DAY, 23, 54, ride_min=20, driver="D222")


@case("registry", DRIVER, "yes", "handover: the titular rides at 9:00, D900 (not linked) at 15:00")
def dr25(w: World) -> None:
    tr = titular_car(w, "DR25", "D125")
    ride_at(tr, DAY, 9, 0, driver="D125")
    ride_at(tr, DAY, 15, 0, driver="D900")


GAP_DAY = date(2024, 3, 14)


def gap_car(w: World, vid: str) -> tuple[Track, LatLon]:
    """A vehicle working every afternoon but ``GAP_DAY``, on which it starts at 10:00 from a
    random point after a minute's wait."""
    tr = w.vehicle(vid)
    normal_days(tr, w.days, [GAP_DAY])
    o = city_point(tr.rng)
    tr.start(day_at(GAP_DAY, 10), o)
    tr.wait(60, "free")
    return tr, o


@case("registry", GAP, "yes", "15 min silent mid-ride, 6 km driven meanwhile")
def tg1(w: World) -> None:
    tr, o = gap_car(w, "TG1")
    tr.drive(offset(o, 1000, 0), "occupied")
    tr.gap(900, offset(o, 7000, 0))
    tr.drive(offset(o, 8000, 0), "occupied")
    tr.wait(60, "free")


@case("registry", GAP, "review", "12 min silent at the ride's end, not moving")
def tg2(w: World) -> None:
    tr, o = gap_car(w, "TG2")
    g = offset(o, 2000, 0)
    tr.drive(g, "occupied")
    tr.gap(720)
    tr.fix(g, "occupied")
    tr.t += timedelta(seconds=20)
    tr.wait(60, "free")
    tr.drive(offset(g, 0, 1000), "free")


@case("registry", GAP, "no", "2 min silent mid-ride")
def tg3(w: World) -> None:
    tr, o = gap_car(w, "TG3")
    tr.drive(offset(o, 2000, 0), "occupied")
    tr.gap(120, offset(o, 3000, 0))
    tr.drive(offset(o, 5000, 0), "occupied")
    tr.wait(60, "free")


@case("registry", GAP, "no", "30 min silent after the ride, meter free")
def tg4(w: World) -> None:
    tr, o = gap_car(w, "TG4")
    tr.drive(offset(o, 2000, 0), "occupied")
    tr.wait(60, "free")
    tr.gap(1800, offset(o, 6000, 0))
    tr.drive(offset(o, 7000, 0), "free")


OUT_DAY = date(2024, 3, 15)
# On the northern limit with Canoas (lon -51.17, the limit near lat -29.9676).
IN_POA, IN_CANOAS, BORDER = (-29.985, -51.17), (-29.945, -51.17), (-29.9676, -51.17)


def outside_car(w: World, vid: str, at: LatLon, **kw: Any) -> Track:
    """A vehicle working every afternoon but ``OUT_DAY``, on which it starts at ``at`` at 10:00."""
    if not inside(IN_POA) or inside(IN_CANOAS):
        raise RuntimeError("the boundary moved: IN_POA/IN_CANOAS are no longer on its two sides")
    tr = w.vehicle(vid, **kw)
    normal_days(tr, w.days, [OUT_DAY])
    tr.start(day_at(OUT_DAY, 10), at)
    return tr


@case("registry", OUTSIDE, "yes", "waits in Canoas, takes a passenger there into Porto Alegre")
def om1(w: World) -> None:
    tr = outside_car(w, "OM1", offset(IN_CANOAS, 0, -1500))
    tr.drive(IN_CANOAS, "free")
    tr.wait(60, "free")
    tr.drive(IN_POA, "occupied")
    tr.drive(offset(IN_POA, -3000, 0), "occupied")
    tr.wait(60, "free")


def to_canoas_and_back(tr: Track, back_meter: str) -> None:
    tr.wait(60, "free")
    tr.drive(IN_POA, "occupied")
    tr.drive(IN_CANOAS, "occupied")
    tr.wait(60, "free")
    tr.drive(IN_POA, back_meter)
    tr.drive(offset(IN_POA, -3000, 0), back_meter)


@case("registry", OUTSIDE, "no", "a ride to Canoas, back empty, meter free")
def om2(w: World) -> None:
    to_canoas_and_back(outside_car(w, "OM2", offset(IN_POA, -3000, 0)), "free")


@case("registry", OUTSIDE, "no", "a ride to Canoas, back empty, meter off")
def om3(w: World) -> None:
    to_canoas_and_back(outside_car(w, "OM3", offset(IN_POA, -3000, 0)), "off")


@case("registry", OUTSIDE, "no", "a ride along the limit, 20 m noise")
def om4(w: World) -> None:
    line = boundary().exterior
    s0 = float(line.project(shapely.geometry.Point(BORDER[1], BORDER[0])))
    pts = [line.interpolate(s0 + k * 0.0005) for k in range(60)]
    tr = outside_car(w, "OM4", offset(IN_POA, -2000, 0), noise=20.0)
    tr.wait(60, "free")
    for p in pts:
        tr.drive((float(p.y), float(p.x)), "occupied")
    tr.drive(offset(IN_POA, -2000, 0), "occupied")
    tr.wait(60, "free")


@case("registry", OUTSIDE, "no", "hailed 60 m inside the limit, meter on just across it")
def om5(w: World) -> None:
    tr = outside_car(w, "OM5", offset(BORDER, -1500, 0))
    tr.drive(offset(BORDER, -60, 0), "free")
    tr.drive(offset(BORDER, 1500, 0), "occupied")
    tr.wait(60, "free")


@case("registry", OUTSIDE, "yes", "drops off in Canoas, picks up a new passenger there")
def om6(w: World) -> None:
    tr = outside_car(w, "OM6", offset(IN_POA, -3000, 0))
    tr.wait(60, "free")
    tr.drive(IN_POA, "occupied")
    tr.drive(IN_CANOAS, "occupied")
    tr.wait(120, "free")
    tr.drive(offset(IN_CANOAS, 500, 0), "free")
    tr.wait(120, "free")
    tr.drive(IN_POA, "occupied")
    tr.drive(offset(IN_POA, -3000, 0), "occupied")
    tr.wait(60, "free")


def first_ten_then(
    w: World, vid: str, then: Callable[[Track, date], None], back: bool = False, **kw: str
) -> None:
    """In service the first 10 days (and from the 70th when ``back``), ``then`` the others."""
    tr = w.vehicle(vid, **kw)
    for k, d in enumerate(w.days):
        if k < 10 or (back and k >= 69):
            short_day(tr, d)
        else:
            then(tr, d)


def no_data(tr: Track, d: date) -> None:
    """The tracker sends nothing."""


def meter_lost(tr: Track, d: date) -> None:
    short_day(tr, d, "", "")


@case("inactivity", INACTIVITY, "yes", "10 days of service, then parked 65 days (heartbeats)")
def in1(w: World) -> None:
    first_ten_then(w, "IN1", parked)


@case(
    "inactivity",
    INACTIVITY,
    "no",
    "10 days of service, then no data (tracker off)",
    note="review only is fine",
)
def in2(w: World) -> None:
    first_ten_then(w, "IN2", no_data)


@case("inactivity", INACTIVITY, "no", "drives daily, the meter missing after day 10")
def in3(w: World) -> None:
    first_ten_then(w, "IN3", meter_lost)


@case("inactivity", INACTIVITY, "yes", "10 days of service, then private trips, meter off")
def in4(w: World) -> None:
    first_ten_then(w, "IN4", private_day)


@case("inactivity", INACTIVITY, "no", "parked while 'reservado' 01-11..03-15")
def in5(w: World) -> None:
    first_ten_then(w, "IN5", parked, status="reservado", since="2024-01-11", until="2024-03-15")


@case("inactivity", INACTIVITY, "no", "parked 59 days, back in service on day 70")
def in6(w: World) -> None:
    first_ten_then(w, "IN6", parked, back=True)


# --- runs --------------------------------------------------------------------------------------


def read_outputs(res: Path) -> dict[str, Any]:
    """The findings of the six kinds, their proposals and the ids listed for review."""
    out = analyze_outputs(res, KINDS)
    del out["summary"]
    return out | {"review": sorted({r["finding_id"] for r in out["review"]})}


def run_world(name: str, cases: list[str], seed: int, out: Path) -> dict[str, Any]:
    """Build a world with ``cases``, run ``pontual analyze`` on it, read the outputs."""
    started = time.perf_counter()
    w = World(name, seed)
    w.spec.background(w)
    for c in cases:
        CASES[c].build(w)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    args, n_fixes = w.write(folder)
    res = folder / "out"
    cmd = [str(pontual()), "analyze", *args, "--out", str(res)]
    cmd += ["--jobs", "1", "--tiles", "none"]  # the pool runs the worlds in parallel
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    result: dict[str, Any] = {"name": name, "fixes": n_fixes}
    if proc.returncode:
        said = [ln.strip("│╭╮╰╯─ ") for ln in proc.stderr.splitlines()]  # drop the CLI's box
        result["error"] = f"exit {proc.returncode}: {([ln for ln in said if ln] or ['?'])[-1]}"
    else:
        result |= read_outputs(res)
    result["seconds"] = time.perf_counter() - started
    return result


# --- report ------------------------------------------------------------------------------------


def _local(stamp: str) -> str:
    t = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(TZ)
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _reason(f: dict[str, Any]) -> str:
    return str((f.get("details") or {}).get("reason") or "")


def _fate(f: dict[str, Any], run: dict[str, Any]) -> tuple[str, bool]:
    """The finding's article (or why none) and whether it is only listed for review."""
    props = [p for p in run["proposals"] if f["finding_id"] in p["finding_ids"]]
    if props:
        return "proposed " + "; ".join(sorted({p["provision"] for p in props})), False
    if f["finding_id"] in run["review"]:
        return "(review), not proposed", True
    return "not proposed", False


def describe(f: dict[str, Any], run: dict[str, Any]) -> str:
    reason = f", reason {_reason(f)}" if _reason(f) else ""
    return (
        f"{f['kind']}, vehicle {f['vehicle_id']}, {_local(f['started_at'])} → "
        f"{_local(f['ended_at'])} (-03:00), confidence {round(f['confidence'], 4)}{reason}; "
        f"{_fate(f, run)[0]}"
    )


def cells(c: Case, mine: list[dict[str, Any]], run: dict[str, Any]) -> tuple[str, str]:
    """The found and proposed cells of a case's row."""
    kinds = [c.kind, *sorted({f["kind"] for f in mine} - {c.kind})]
    found, proposed = [], []
    for k in kinds:
        fs = [f for f in mine if f["kind"] == k]
        if not fs:
            continue
        conf = sorted(round(f["confidence"], 2) for f in fs)
        span = f"{conf[0]}" if conf[0] == conf[-1] else f"{conf[0]}–{conf[-1]}"
        reasons = sorted({_reason(f) for f in fs} - {""})
        why = f", {'/'.join(reasons)}" if reasons else ""
        found.append(f"{k}{f' ×{len(fs)}' if len(fs) > 1 else ''} ({span}{why})")
        ids = {f["finding_id"] for f in fs}
        arts: dict[str, int] = {}
        for p in run["proposals"]:
            if ids & set(p["finding_ids"]):
                arts[p["provision"]] = arts.get(p["provision"], 0) + 1
        items = [f"{a}{f' ×{n}' if n > 1 else ''}" for a, n in sorted(arts.items())]
        proposed_ids = {i for p in run["proposals"] for i in p["finding_ids"]}
        n_review = len((ids & set(run["review"])) - proposed_ids)
        n_idle = len(ids - proposed_ids - set(run["review"]))
        items += [f"(review{f' ×{n_review}' if n_review > 1 else ''})"] if n_review else []
        items += [f"(not proposed{f' ×{n_idle}' if n_idle > 1 else ''})"] if n_idle else []
        proposed.append(", ".join(items))
    return "; ".join(found) or "–", "; ".join(proposed) or "–"


def judge(name: str, c: Case, mine: list[dict[str, Any]], run: dict[str, Any]) -> list[str]:
    """A case's false accusations and misses, one line each."""
    label = f"`{name}` ({c.kind}, should be {c.label})"
    lines = []
    for f in mine:
        fate, review_only = _fate(f, run)
        if c.should == "review" and f["kind"] == c.kind:
            wrong = fate.startswith("proposed")
        else:
            wrong = (c.should == "no" or f["kind"] != c.kind) and not review_only
        if wrong:
            lines.append(f"- FALSE ACCUSATION {label}: {describe(f, run)}")
    own = [f for f in mine if f["kind"] == c.kind]
    if c.should == "review" and not own:
        lines.append(f"- MISSED {label}: no {c.kind} finding to review")
    if c.should != "yes":
        return lines
    if not own:
        lines.append(f"- MISSED {label}: no {c.kind} finding, vehicle {name}")
    elif c.reason and not any(_reason(f) == c.reason for f in own):
        lines += [f"- MISSED {label}: found for another reason: {describe(f, run)}" for f in own]
    elif not any(_fate(f, run)[0].startswith("proposed") for f in own):
        lines += [f"- MISSED {label}: found, not proposed: {describe(f, run)}" for f in own]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", metavar="NAME", choices=list(CASES), help="a subset")
    ap.add_argument("--out", type=Path, help="keep inputs and outputs here (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2, help="worlds run at once")
    a = ap.parse_args()
    names = [n for n in CASES if n in set(a.cases or CASES)]
    by_world = {wn: [n for n in names if CASES[n].world == wn] for wn in WORLDS}
    by_world = {wn: ns for wn, ns in by_world.items() if ns}
    started = time.perf_counter()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="registry-lookalikes-") as tmp:
        out = a.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        with ProcessPoolExecutor(max_workers=a.jobs) as pool:
            futures = [pool.submit(run_world, wn, ns, a.seed, out) for wn, ns in by_world.items()]
            for done in as_completed(futures):
                r = done.result()
                runs[r["name"]] = r
                status = r.get("error", "ok")
                print(
                    f"[{len(runs)}/{len(by_world)}] {r['name']}: {len(by_world[r['name']])} cases,"
                    f" {r['fixes']} fixes, {r['seconds']:.1f} s, {status}",
                    file=sys.stderr,
                    flush=True,
                )
    wall = time.perf_counter() - started
    print(f"{len(names)} cases, seed {a.seed}, one `pontual analyze` per world\n")
    print("| case | should be | found (kind, confidence) | proposed (article) |\n|---|---|---|---|")
    lines: list[str] = []
    for kind in KINDS:
        group = [n for n in names if CASES[n].kind == kind]
        if group:
            print(f"| **{kind}** | | | |")
        for n in group:
            c, run = CASES[n], runs[CASES[n].world]
            if "error" in run:
                print(f"| `{n}` {c.what} | {c.label} | {run['error']} | – |")
                continue
            mine = [f for f in run["found"] if f["vehicle_id"] == n]
            found, proposed = cells(c, mine, run)
            print(f"| `{n}` {c.what} | {c.label} | {found} | {proposed} |")
            lines += judge(n, c, mine, run)
    for wn, run in runs.items():
        if "error" in run:
            lines.append(f"- world `{wn}`: RUN FAILED, {run['error']}")
            continue
        for f in run["found"]:
            if f["vehicle_id"] not in CASES and not _fate(f, run)[1]:
                lines.append(f"- FALSE ACCUSATION background vehicle ({wn}): {describe(f, run)}")
    print(f"\nWall time {wall:.1f} s, {a.jobs} jobs.")
    n_false = sum(line.startswith("- FALSE") for line in lines)
    n_missed = sum(line.startswith("- MISSED") for line in lines)
    print(f"\n{n_false} false accusation(s), {n_missed} miss line(s).")
    if lines:
        print("\nFalse accusations and misses:\n")
        print("\n".join(lines))
    if any("error" in run for run in runs.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
