"""Absence detectors against look-alikes built by hand: an independent check through the CLI.

Measures what ``pontual analyze`` finds and proposes for ``habitual_absence`` (a licensee
habitually absent from its stand, Porto Alegre decree art. 49; a Táxi Acessível, art. 28 § 2)
and ``inactivity`` (not operating for more than 60 days, art. 60 X) on scenarios written from
how taxis, trackers and the registry behave, not from the detectors' code (an earlier QA pass's
simulator and builders, made reproducible). Each case is one vehicle named after the case, in
one of three worlds; each world is one pings file run through ``pontual analyze --stands
data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson --stand-radius-m 30 --municipality
4314902 --tiles none --jobs 2`` (the real EPTC stands, points with a 30 m radius):

- ``A``: 22 April to 31 May 2024 (``--as-of`` 31 May: the detector's 30-day window is 2–31
  May), the ``habitual_absence`` cases, with ``--licences`` (periods of a stand licence) and
  ``--stand-suspensions`` (the airport stand 5 closed from 4 May); a fix every 30 s;
- ``A2``: the same days, more ``habitual_absence`` look-alikes, the licences in the fleet's
  ``stands`` column only;
- ``B``: 1 January to 31 March 2024 (``--as-of`` 31 March), the ``inactivity`` cases and
  fourteen background cruisers ``BG01``–``BG14`` (each with a day off a week, half of them off
  on New Year's day; they make the feed whose busiest day sets the feed-gap rule), status and
  alvará dates in the fleet; a fix every 60 s moving, 120 s parked.

A taxi's day: from home (3–7 km from its stand; 2–7 km from the centre or its stand in ``B``)
at 7:00–7:30 to work until 17:00 with a lunch break of 40–60 min (meter ``off``), then home,
meter ``off``. Working a stand: wait 15–60 min inside it (±12 m), board there (meter
``occupied`` from 0.5–1.5 min before leaving), drive 2–7 km, drop off, come back (a quarter of
the time via a street hail 0.5–2 km away). Cruising: drive 0.8–4 km, sometimes a 3–9 min
kerbside pause, take a passenger. Straight lines at 18–32 km/h, time stretched 1.3× for the
streets; Gaussian position noise of 5 m per axis; meter ``free``/``occupied``/``off``, empty
where the tracker has no meter. Each vehicle draws from its own generator, seeded by
``--seed`` and its name: a case gives the same tracks alone (``--cases``) or among the others.

Cases (expected, and why). ``habitual_absence``:

- A01 accuse: works daily at another stand (6), never at its own 60.
- A02 accuse: cruises all day, never at its stand 68.
- A17 accuse (art. 28, § 2º): an accessible taxi that cruises, never at its stand 16.
- A18 accuse: cruises, at its stand 60 on 2 of 26 working days.
- A03 not: the control, waits inside its stand 105 daily.
- A04 not: the stand is full, it queues 20–40 m beyond the polygon's edge and boards there:
  attending its stand.
- A06 not: night shift 20:00–04:00, its first 15 min at its stand 66 (dead at night), then the
  nightlife: present every night.
- A06b not: a night shift every other night (12x36), 20:00–04:00, at its stand 66 the first
  half hour of one shift in four, else cruising: 4 of 15 shifts (27 %). Counted by calendar
  day, each shift is two operating days and it was at 4 of 30 (13 %): a night driver would be
  accused where a day driver as often at the stand is not.
- A07 not: phone/app bookings city-wide, at its stand 48 two afternoons a week (9 of 26 days,
  above the 20 % the detector asks).
- A08 not: airport stand 5 closed by the flood from 4 May, the closure in
  ``--stand-suspensions``; the days it could not attend are not counted.
- A09 not: licence moved from stand 3 to 37 on 20 May (``--licences`` periods), attends each.
- A09b not: its first stand licence from 22 May; cruised before, attends since.
- A10 not: on vacation from 10 May, tracker silent: a vehicle that does not operate is not
  absent (that is inactivity, too short here).
- A10b not: on vacation from 10 May, the car used privately (meter ``off``, a trip to
  Gramado): private use is not operating.
- A10c not: a tracker without meter data, at its stand until 6 May, then vacation with the
  car used privately daily; the days it moved may be days off (review is fine, no proposal).
- A11 not: a phone tracker that sends only while moving, waiting at its stand 41.
- A11b not: tracker dead 8–25 May while it works its stand 41.
- A12 not: Centro's urban canyon (stand 51): waiting fixes scatter, 35 m per axis and 15 %
  of them 80–200 m away (``accuracy_m`` given).
- A13 not: weekdays at its stand 105, Saturdays and the holidays (1 and 30 May) cruising.
- A16 not: licensed at 24 (Iguatemi II, the same point as 102 Iguatemi), waits there daily.
- A20 not: a busy hospital stand (16): boards 20–50 s after arriving, no long waits.
- A21 not: a tracker sending every 300 s, waits at its stand 46.
- K35, K45, K35n not: queues 35–50 m (15 m noise in K35n) and 45–60 m beyond the edge of
  stand 52: still its stand's queue.
- A22 not: a quiet suburban stand (34): waits of 3.2–5 h, two fares a day, a phone tracker
  silent while stationary: a silent dwell at the stand is presence.
- A22b not: the same with an hourly heartbeat while parked.
- A05, K55 judgement: queueing 65–90 m (a 31-licensee stand, 13) or 55–70 m beyond the edge:
  how far a queue is still the stand is the agent's call.
- A07b judgement: bookings, at its stand one afternoon a week (4 of 26 days).
- A08R1–A08R3 judgement: the bus station (stand 1) closed by the flood from 4 May without a
  closure record; all three licensees absent together: the registry's gap, not theirs.
- A17b judgement: an accessible taxi carrying PcD passengers on phone bookings city-wide
  (boarding at hospital stands, art. 46), at its stand 16 on Wednesdays.

``inactivity``:

- B01 accuse: last ride 20 Jan, only private trips (meter ``off``) afterwards: 71 days.
- B05 accuse: last ride 30 Jan in the evening, private use after: 61 days.
- B03 not: summer vacation 6 Jan–1 Mar (56 days), tracker silent, back on 2 Mar.
- B03b not: at the beach since 6 Feb, private use, 55 days at ``--as-of``.
- B04 not: last ride 31 Jan in the evening: 60 days is not "superior a 60".
- B06 not (review is fine): tracker dead from 10 Jan 11:00 while the taxi keeps working.
- B07 not: meter feed lost on 15 Jan (empty meter), works its stand 60 daily.
- B08 not: meter stuck on Livre from 20 Jan, works its stand 68 daily with rides: driving and
  waiting Livre is operating.
- B09 not: reserva approved 10 Jan–30 Jun (art. 15), silent.
- B11 not: a new prefixo, first alvará 20 Feb, operating from 10 Mar.
- B12 not: part-time, Saturdays only.
- B19 not: vacation 30 Jan–28 Mar (59 days), back Livre at its stand 60 on 29–31 Mar (Easter)
  without a fare yet: waiting Livre is operating.
- BG01–BG14 not: the background cruisers.
- B02, B11b, B18 review (listed for review, never proposed): last ride 15 Jan then no fixes
  (truly stopped, but the GPS cannot prove it); a new prefixo (alvará 10 Jan) never seen; a
  fleet vehicle never seen.
- B10 judgement: Fora de Operação since 12 Jan, in the workshop 80 days, silent: not art. 60
  X, perhaps art. 38 I.
- B16 judgement: from 20 Jan every ride with the meter ``off`` (fixed-price app rides), 8 h a
  day on the streets.
- B20 judgement: the meter input wire cut on 20 Jan, every fix reads ``off``; it works its stand
  105 daily with rides: the data says private use.

Reported per case: its findings of the two kinds (``findings.geojson``: confidence and the key
details) and the proposal's article (``proposals.json``; "(review)" for a finding listed for
review in ``summary.json``, no accusation). Then precision and recall of each kind over the
clear cases (accuse, not, review; a proposal of a kind on a case not about it is a false
accusation too; judgement cases are reported, not counted), every false accusation and every
miss, and what the judgement cases got.

Usage::

    .venv/bin/python bench/bench_absence_lookalikes.py [--cases NAME ...] [--out DIR] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import cache, partial
from pathlib import Path
from typing import Any

from _analyze_run import analyze_outputs, pontual, write_csv

STANDS_FILE = Path("data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson")
ROOT = Path(__file__).resolve().parents[1]

POA = "4314902"
TZ = timezone(timedelta(hours=-3))  # Porto Alegre, no daylight saving time since 2019
M_PER_DEG = 111_320.0
RADIUS_M = 30
CITY = (-30.04, -51.18)  # the background's homes are 2–7 km from here
BOX = (-30.10, -29.995, -51.215, -51.14)  # the consolidated city, east of the Guaíba shore
GRAMADO = (-29.3786, -50.8733)
CAPAO = (-29.7458, -50.0142)  # Capão da Canoa, on the coast
ABSENCE, INACTIVITY = "habitual_absence", "inactivity"
KINDS = (ABSENCE, INACTIVITY)
ACCUSE, NOT, REVIEW, JUDGEMENT = "accuse", "not", "review only", "judgement"

LatLon = tuple[float, float]
Row = tuple[str, str, float, float, float, str, float | str]


@cache
def stands() -> dict[str, LatLon]:
    """Read the EPTC stands' points by code (those with a coordinate)."""
    fc = json.loads((ROOT / STANDS_FILE).read_text())
    return {
        str(f["properties"]["codigo"]): (f["properties"]["latitude"], f["properties"]["longitude"])
        for f in fc["features"]
        if f["properties"].get("latitude") is not None
    }


def stand(code: str) -> LatLon:
    """Return the point of stand ``code``."""
    return stands()[code]


# --- geometry and time -------------------------------------------------------------------------


def offset(p: LatLon, east: float, north: float) -> LatLon:
    """Return the point ``east`` and ``north`` metres from ``p``."""
    return p[0] + north / M_PER_DEG, p[1] + east / (M_PER_DEG * math.cos(math.radians(p[0])))


def dist(a: LatLon, b: LatLon) -> float:
    """Return the distance in metres between two nearby points."""
    north = (a[0] - b[0]) * M_PER_DEG
    east = (a[1] - b[1]) * M_PER_DEG * math.cos(math.radians(a[0]))
    return math.hypot(east, north)


def rand_point(rng: random.Random, near: LatLon, rmin: float, rmax: float) -> LatLon:
    """Draw a point ``rmin``–``rmax`` m from ``near``, inside the city's box."""
    for _ in range(100):
        r, a = rng.uniform(rmin, rmax), rng.uniform(0, 2 * math.pi)
        p = offset(near, r * math.cos(a), r * math.sin(a))
        if BOX[0] <= p[0] <= BOX[1] and BOX[2] <= p[1] <= BOX[3]:
            return p
    return (-30.04, -51.19)


def local(day: date, hh: int, mm: int = 0) -> datetime:
    """Return ``hh:mm`` of ``day``, Porto Alegre time."""
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=TZ)


def days(first: date, last: date) -> Iterator[date]:
    """Yield the days from ``first`` to ``last``, inclusive."""
    d = first
    while d <= last:
        yield d
        d += timedelta(days=1)


# --- the tracker -------------------------------------------------------------------------------


class Track:
    """One vehicle's tracker: a fix every ``mv_int`` s driving, every ``park_int`` s parked."""

    def __init__(
        self,
        vid: str,
        rng: random.Random,
        *,
        mv_int: float = 30.0,
        park_int: float = 30.0,
        noise: float = 5.0,
        accuracy: bool = False,
        motion_only: bool = False,
    ) -> None:
        self.vid, self.rng, self.noise = vid, rng, noise
        self.mv_int, self.park_int = mv_int, park_int
        self.accuracy = accuracy  # the fixes carry accuracy_m
        self.motion_only = motion_only  # a phone app: no fix while stationary
        self.meter_reads: str | None = None  # a broken meter input: every fix reads this
        self.dead: list[tuple[datetime, datetime]] = []  # [start, end): the tracker is dead
        self.rows: list[Row] = []
        self.t = local(date(2024, 1, 1), 0)
        self.pos: LatLon = CITY

    def fix(
        self,
        pos: LatLon,
        meter: str,
        speed: float,
        noise: float | None = None,
        accuracy: float | None = None,
    ) -> None:
        """Send a fix at ``pos`` now, with Gaussian noise (unless the tracker is dead)."""
        if any(a <= self.t < b for a, b in self.dead):
            return
        sd = self.noise if noise is None else noise
        p = offset(pos, self.rng.gauss(0, sd), self.rng.gauss(0, sd))
        acc: float | str = ""
        if self.accuracy:
            acc = accuracy if accuracy is not None else max(3.0, abs(self.rng.gauss(8, 3)))
            acc = round(acc, 1)
        self.rows.append(
            (
                self.vid,
                self.t.isoformat(timespec="seconds"),
                round(p[0], 6),
                round(p[1], 6),
                round(max(0.0, speed), 1),
                meter if self.meter_reads is None else self.meter_reads,
                acc,
            )
        )

    def drive(self, dest: LatLon, meter: str, kmh: float | None = None) -> None:
        """Drive to ``dest`` in a straight line, the time stretched 1.3× for the streets."""
        kmh = kmh or self.rng.uniform(18, 32)
        duration = dist(self.pos, dest) * 1.3 / (kmh / 3.6)
        n = max(1, int(duration // self.mv_int))
        a = self.pos
        for i in range(1, n + 1):
            self.t += timedelta(seconds=duration / n)
            f = i / n
            p = (a[0] + (dest[0] - a[0]) * f, a[1] + (dest[1] - a[1]) * f)
            self.fix(p, meter, kmh * self.rng.uniform(0.6, 1.3))
        self.pos = dest

    def wait(
        self,
        minutes: float,
        meter: str,
        at: LatLon | None = None,
        noise: float | None = None,
        outliers: float = 0.0,
        creep_to: LatLon | None = None,
        accuracy: float | None = None,
    ) -> None:
        """Stand still for ``minutes`` (at ``at``), or creep along a queue to ``creep_to``.

        ``outliers``: the share of fixes thrown 80–200 m off (accuracy 60–150 m).
        """
        if at is not None:
            self.pos = at
        start, total, elapsed = self.pos, minutes * 60.0, 0.0
        if self.motion_only:  # no fix; creeping in a queue stays under the distance filter
            self.t += timedelta(seconds=total)
            if creep_to is not None:
                self.pos = creep_to
            return
        while elapsed < total:
            step = min(self.park_int, total - elapsed)
            self.t += timedelta(seconds=step)
            elapsed += step
            p = start
            if creep_to is not None:
                f = elapsed / total
                p = (
                    start[0] + (creep_to[0] - start[0]) * f,
                    start[1] + (creep_to[1] - start[1]) * f,
                )
            sd, acc = noise, accuracy
            if outliers and self.rng.random() < outliers:
                sd, acc = self.rng.uniform(80, 200), self.rng.uniform(60, 150)
            self.fix(p, meter, 0.0, noise=sd, accuracy=acc)
        if creep_to is not None:
            self.pos = creep_to

    def skip_to(self, t: datetime, pos: LatLon) -> None:
        """Let time pass without fixes (ignition off) until ``t``; the car is then at ``pos``."""
        self.t, self.pos = t, pos


# --- a taxi's day ------------------------------------------------------------------------------

WaitFn = Callable[[Track], None]


def ride(tr: Track, meter: str = "occupied", back_to: LatLon | None = None) -> None:
    """Board, carry a passenger 2–7 km, drop off; then drive empty to ``back_to``, if given."""
    dest = rand_point(tr.rng, tr.pos, 2000, 7000)
    tr.wait(tr.rng.uniform(0.5, 1.5), meter)  # boarding
    tr.drive(dest, meter)
    tr.wait(tr.rng.uniform(0.5, 1.5), meter)  # paying, getting out
    if back_to is not None:
        tr.drive(back_to, "free")


def stand_day(
    tr: Track,
    day: date,
    at: LatLon,
    home: LatLon,
    start_h: int = 7,
    end_h: int = 17,
    wait_fn: WaitFn | None = None,
    ride_meter: str = "occupied",
) -> None:
    """Work from the stand at ``at``: wait, board there, ride, come back; lunch at noon."""
    rng = tr.rng
    tr.skip_to(local(day, start_h, rng.randint(0, 30)), home)
    tr.drive(at, "free")
    lunch_done = False
    while tr.t < local(day, end_h):
        if not lunch_done and tr.t >= local(day, 12):
            tr.drive(offset(at, 150, 120), "off")
            tr.wait(rng.uniform(40, 60), "off")
            tr.drive(at, "free")
            lunch_done = True
        if wait_fn is None:
            place = offset(at, rng.uniform(-12, 12), rng.uniform(-12, 12))
            tr.wait(rng.uniform(15, 60), "free", at=place)
        else:
            wait_fn(tr)
        ride(tr, ride_meter)
        if rng.random() < 0.25:  # a street hail on the way back
            tr.drive(rand_point(rng, tr.pos, 500, 2000), "free")
            ride(tr, ride_meter)
        tr.drive(at, "free")
    tr.drive(home, "off")


def cruise_day(
    tr: Track,
    day: date,
    home: LatLon,
    start_h: int = 7,
    end_h: int = 17,
    ride_meter: str = "occupied",
    base: LatLon | None = None,
) -> None:
    """Cruise, take hails and bookings all over the city (near ``base``); lunch at noon."""
    rng = tr.rng
    tr.skip_to(local(day, start_h, rng.randint(0, 30)), home)
    lunch_done = False
    while tr.t < local(day, end_h):
        if not lunch_done and tr.t >= local(day, 12):
            tr.wait(rng.uniform(40, 60), "off")
            lunch_done = True
        tr.drive(rand_point(rng, base or tr.pos, 800, 4000), "free")
        if rng.random() < 0.3:
            tr.wait(rng.uniform(3, 9), "free")  # a short kerbside pause, not a stand
        ride(tr, ride_meter)
    tr.drive(home, "off")


def queue_wait(
    at: LatLon, far: float, near: float, bearing_deg: float, noise: float | None = None
) -> WaitFn:
    """Queue on the kerb beyond a full stand: join ``far`` m from its point, creep to ``near``."""
    b = math.radians(bearing_deg)
    tail = offset(at, far * math.sin(b), far * math.cos(b))
    head = offset(at, near * math.sin(b), near * math.cos(b))

    def wait(tr: Track) -> None:
        tr.drive(tail, "free")
        tr.wait(tr.rng.uniform(20, 60), "free", at=tail, creep_to=head, noise=noise)

    return wait


def private_outing(tr: Track, day: date, home: LatLon, far: LatLon | None = None) -> None:
    """Go on a private outing from 10:00, meter off: near home, or around ``far`` (the beach)."""
    base = far or home
    tr.skip_to(local(day, 10, tr.rng.randint(0, 50)), base)
    if far is None:
        p = rand_point(tr.rng, base, 800, 4000)
    else:
        p = offset(far, tr.rng.uniform(-2000, 2000), tr.rng.uniform(-2000, 2000))
    tr.drive(p, "off")
    tr.wait(tr.rng.uniform(40, 120), "off")
    tr.drive(base, "off")


def not_sunday(d: date) -> bool:
    """Tell whether ``d`` is a working day of a six-day week."""
    return d.weekday() != 6


# --- worlds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldSpec:
    """One ``pontual analyze`` run: its days, its tracker and its registry files."""

    first: date
    as_of: date
    fleet_columns: tuple[str, ...]
    mv_int: float = 30.0
    park_int: float = 30.0
    home_ring: tuple[float, float] = (3000, 7000)  # homes this far from the stand (or CITY)
    accuracy_column: bool = True
    licences: bool = False
    suspensions: list[dict[str, str]] = field(default_factory=list)


FLEET = ("vehicle_id", "accessible", "stands", "status")
WORLDS = {
    "A": WorldSpec(
        date(2024, 4, 22),
        date(2024, 5, 31),
        FLEET,
        licences=True,
        suspensions=[
            {
                "stand_id": "5",
                "starts_on": "2024-05-04",
                "kind": "closed",
                "reason": "aeroporto fechado (enchente)",
            }
        ],
    ),
    "A2": WorldSpec(date(2024, 4, 22), date(2024, 5, 31), FLEET),
    "B": WorldSpec(
        date(2024, 1, 1),
        date(2024, 3, 31),
        (*FLEET, "status_since", "status_until", "alvara_first_issued_on"),
        mv_int=60,
        park_int=120,
        home_ring=(2000, 7000),
        accuracy_column=False,
    ),
}


class World:
    """The vehicles and registry rows of one world, written as ``pontual analyze``'s inputs."""

    def __init__(self, name: str, seed: int) -> None:
        self.name, self.seed, self.spec = name, seed, WORLDS[name]
        self.tracks: list[Track] = []
        self.fleet: list[dict[str, str]] = []
        self.licences: list[list[str]] = []

    @property
    def days(self) -> Iterator[date]:
        """Yield the days of the data."""
        return days(self.spec.first, self.spec.as_of)

    def track(self, vid: str, **kw: Any) -> Track:
        """Start the tracker of ``vid``, its generator seeded by the run's seed and ``vid``."""
        kw = {"mv_int": self.spec.mv_int, "park_int": self.spec.park_int} | kw
        tr = Track(vid, random.Random(f"{self.seed}/{vid}"), **kw)
        self.tracks.append(tr)
        return tr

    def home(self, tr: Track, near: LatLon = CITY) -> LatLon:
        """Draw the vehicle's home: within the world's ring around ``near`` (its stand)."""
        return rand_point(tr.rng, near, *self.spec.home_ring)

    def register(
        self,
        tr: Track,
        stand_id: str = "",
        accessible: bool = False,
        licences: list[tuple[str, str, str]] | None = None,
        **registry: str,
    ) -> None:
        """Add the vehicle to the fleet; its licences (stand, from, until) default to its stand."""
        row = {"vehicle_id": tr.vid, "accessible": "sim" if accessible else "não"}
        self.fleet.append(row | {"stands": stand_id, "status": "ativo"} | registry)
        for sid, since, until in licences or [(stand_id, "", "")]:
            self.licences.append([tr.vid, sid, since, until])

    def write(self, folder: Path) -> tuple[list[str], int]:
        """Write the inputs; return the options of ``pontual analyze`` and the number of fixes."""
        spec = self.spec
        rows = sorted((r for tr in self.tracks for r in tr.rows), key=lambda r: (r[0], r[1]))
        header = ["vehicle_id", "timestamp", "lat", "lon", "speed_kmh", "meter", "accuracy_m"]
        width = len(header) if spec.accuracy_column else len(header) - 1
        write_csv(folder / "pings.csv", header[:width], (r[:width] for r in rows))
        fleet = [[row.get(c, "") for c in spec.fleet_columns] for row in self.fleet]
        write_csv(folder / "fleet.csv", spec.fleet_columns, fleet)
        args = ["--pings", str(folder / "pings.csv"), "--stands", str(ROOT / STANDS_FILE)]
        args += ["--stand-radius-m", str(RADIUS_M), "--fleet", str(folder / "fleet.csv")]
        if spec.licences:
            header = ["vehicle_id", "stand_id", "valid_from", "valid_until"]
            write_csv(folder / "licences.csv", header, self.licences)
            args += ["--licences", str(folder / "licences.csv")]
        if spec.suspensions:
            header = ["stand_id", "vehicle_id", "driver_id", "starts_on", "ends_on", "kind"]
            header += ["reason"]
            rows_s = [[s.get(c, "") for c in header] for s in spec.suspensions]
            write_csv(folder / "suspensions.csv", header, rows_s)
            args += ["--stand-suspensions", str(folder / "suspensions.csv")]
        args += ["--municipality", POA, "--as-of", spec.as_of.isoformat()]
        return args, len(rows)


# --- cases: habitual_absence, world A ----------------------------------------------------------


def at_other_stand(w: World, vid: str) -> None:
    """A01: licensed at 60, works daily at stand 6 (Barra Shopping Sul)."""
    tr = w.track(vid)
    home = w.home(tr, stand("6"))
    for d in w.days:
        if not_sunday(d):
            stand_day(tr, d, stand("6"), home)
    w.register(tr, "60")


def cruiser(w: World, vid: str, stand_id: str, accessible: bool = False) -> None:
    """A02, A17: licensed at ``stand_id``, cruises every working day."""
    tr = w.track(vid)
    home = w.home(tr, stand(stand_id))
    for d in w.days:
        if not_sunday(d):
            cruise_day(tr, d, home)
    w.register(tr, stand_id, accessible=accessible)


def stand_worker(
    w: World,
    vid: str,
    stand_id: str,
    wait_fn: WaitFn | None = None,
    dead: tuple[tuple[datetime, datetime], ...] = (),
    **tracker: Any,
) -> None:
    """A03, A11, A11b, A12, A16, A20, A21: works its own stand daily.

    ``wait_fn``: how it waits there (default: inside the stand, ±12 m); ``dead``: when its
    tracker is dead; ``tracker``: the tracker's options (``Track``).
    """
    tr, at = w.track(vid, **tracker), stand(stand_id)
    tr.dead = list(dead)
    home = w.home(tr, at)
    for d in w.days:
        if not_sunday(d):
            stand_day(tr, d, at, home, wait_fn=wait_fn)
    w.register(tr, stand_id)


def kerb_queue(
    w: World,
    vid: str,
    stand_id: str,
    lo: float,
    hi: float,
    bearing: float,
    noise: float | None = None,
) -> None:
    """A04, A05, K*: works its stand, always queueing ``lo``–``hi`` m beyond its edge.

    The queue runs from the stand toward ``bearing`` (degrees from north); ``noise``: the
    position noise while queueing (default the tracker's).
    """
    at = stand(stand_id)
    wait = queue_wait(at, RADIUS_M + hi, RADIUS_M + lo, bearing, noise)
    stand_worker(w, vid, stand_id, wait_fn=wait)


def night_shift(
    w: World,
    vid: str,
    *,
    every: int = 1,
    at_stand_every: int = 1,
    wait_min: tuple[float, float] = (12, 20),
    spread_m: float = 10,
    sundays_off: bool = True,
) -> None:
    """A06, A06b: 20:00–04:00 every ``every`` nights, the first minutes at stand 66 on one
    shift in ``at_stand_every``, then the nightlife."""
    tr, at = w.track(vid), stand("66")
    home = w.home(tr, at)
    for k, d in enumerate(list(w.days)[::every]):
        if sundays_off and not not_sunday(d):
            continue
        tr.skip_to(local(d, 20, tr.rng.randint(0, 15)), home)
        if k % at_stand_every == 0:
            tr.drive(at, "free")
            place = offset(
                at, tr.rng.uniform(-spread_m, spread_m), tr.rng.uniform(-spread_m, spread_m)
            )
            tr.wait(tr.rng.uniform(*wait_min), "free", at=place)
        while tr.t < local(d + timedelta(days=1), 4):
            tr.drive(rand_point(tr.rng, (-30.04, -51.215), 300, 2500), "free")
            tr.wait(tr.rng.uniform(3, 10), "free")
            ride(tr)
        tr.drive(home, "off")
    w.register(tr, "66")


def bookings(w: World, vid: str, stand_weekdays: tuple[int, ...]) -> None:
    """A07, A07b: phone/app bookings near stand 48; its afternoons there on ``stand_weekdays``."""
    tr, at = w.track(vid), stand("48")
    home = w.home(tr, at)
    for d in w.days:
        if not not_sunday(d):
            continue
        if d.weekday() not in stand_weekdays:
            cruise_day(tr, d, home, base=at)
            continue
        cruise_day(tr, d, home, end_h=13, base=at)
        tr.skip_to(max(tr.t, local(d, 14)), tr.pos)
        tr.drive(at, "free")
        while tr.t < local(d, 18):
            place = offset(at, tr.rng.uniform(-10, 10), tr.rng.uniform(-10, 10))
            tr.wait(tr.rng.uniform(20, 45), "free", at=place)
            ride(tr, back_to=at)
        tr.drive(home, "off")
    w.register(tr, "48")


FLOOD = date(2024, 5, 4)  # the airport and the bus station closed


def stand_closed(w: World, vid: str, stand_id: str, day_off: int = 6) -> None:
    """A08, A08R*: at its stand until the flood closed it (``FLOOD``), cruising since."""
    tr, at = w.track(vid), stand(stand_id)
    home = w.home(tr, at)
    for d in w.days:
        if d.weekday() == day_off:
            continue
        if d < FLOOD:
            stand_day(tr, d, at, home)
        else:
            cruise_day(tr, d, home)
    w.register(tr, stand_id)


def transfer(w: World, vid: str) -> None:
    """A09: licence at stand 3 until 19 May, at 37 from 20 May; works each in its period."""
    moved = date(2024, 5, 20)
    tr = w.track(vid)
    home = w.home(tr, stand("37"))
    for d in w.days:
        if not_sunday(d):
            stand_day(tr, d, stand("3") if d < moved else stand("37"), home)
    w.register(tr, "37", licences=[("3", "", "2024-05-19"), ("37", "2024-05-20", "")])


def new_licence(w: World, vid: str) -> None:
    """A09b: its first stand licence (37) from 22 May; cruised before, works the stand since."""
    granted = date(2024, 5, 22)
    tr = w.track(vid)
    home = w.home(tr, stand("37"))
    for d in w.days:
        if not not_sunday(d):
            continue
        if d < granted:
            cruise_day(tr, d, home)
        else:
            stand_day(tr, d, stand("37"), home)
    w.register(tr, "37", licences=[("37", "2024-05-22", "")])


def vacation(w: World, vid: str, mode: str) -> None:
    """A10 (``silent``), A10b (``private``), A10c (``unmetered``): stand 19, then vacation.

    ``silent``: from 10 May no fix. ``private``: from 10 May private outings, meter off, with a
    trip to Gramado on 15–18 May. ``unmetered``: a tracker without meter data, the private use
    from 7 May.
    """
    tr, at = w.track(vid), stand("19")
    if mode == "unmetered":
        tr.meter_reads = ""
    home = w.home(tr, at)
    leaves = date(2024, 5, 7) if mode == "unmetered" else date(2024, 5, 10)
    there, back = date(2024, 5, 15), date(2024, 5, 18)
    for d in w.days:
        if d < leaves:
            if not_sunday(d):
                stand_day(tr, d, at, home)
        elif mode == "silent":
            continue
        elif d == there:
            tr.skip_to(local(d, 9), home)
            tr.drive(GRAMADO, "off", kmh=80)
            tr.wait(5, "off")
        elif d == back:
            tr.skip_to(local(d, 15), GRAMADO)
            tr.drive(home, "off", kmh=80)
            tr.wait(3, "off")
        elif there < d < back:  # a walk in the hills
            tr.skip_to(local(d, 11), GRAMADO)
            tr.drive(offset(GRAMADO, 2000, 1500), "off", kmh=25)
            tr.wait(90, "off")
            tr.drive(GRAMADO, "off", kmh=25)
        else:
            tr.skip_to(local(d, 10, tr.rng.randint(0, 50)), home)
            tr.drive(rand_point(tr.rng, home, 1000, 5000), "off")
            tr.wait(tr.rng.uniform(60, 150), "off")
            tr.drive(home, "off")
    w.register(tr, "19")


def canyon_wait(tr: Track) -> None:
    """Wait in stand 51 in Centro's urban canyon: 35 m noise, 15 % outliers, accuracy 25–50 m."""
    place = offset(stand("51"), tr.rng.uniform(-10, 10), tr.rng.uniform(-10, 10))
    tr.wait(
        tr.rng.uniform(15, 60),
        "free",
        at=place,
        noise=35,
        outliers=0.15,
        accuracy=tr.rng.uniform(25, 50),
    )


HOLIDAYS = {date(2024, 5, 1), date(2024, 5, 30)}  # Labour Day, Corpus Christi


def weekdays_at_stand(w: World, vid: str) -> None:
    """A13: weekdays at its stand 105; Saturdays and holidays cruising; Sundays off."""
    tr, at = w.track(vid), stand("105")
    home = w.home(tr, at)
    for d in w.days:
        if not not_sunday(d):
            continue
        if d.weekday() == 5 or d in HOLIDAYS:
            cruise_day(tr, d, home)
        else:
            stand_day(tr, d, at, home)
    w.register(tr, "105")


def rare_visitor(w: World, vid: str) -> None:
    """A18: cruises; at its stand 60 only on 8 and 22 May."""
    tr, at = w.track(vid), stand("60")
    home = w.home(tr, at)
    for d in w.days:
        if not not_sunday(d):
            continue
        if d in (date(2024, 5, 8), date(2024, 5, 22)):
            stand_day(tr, d, at, home)
        else:
            cruise_day(tr, d, home)
    w.register(tr, "60")


def quick_wait(tr: Track) -> None:
    """Wait 20–50 s in stand 16 (a busy hospital stand): the next passenger is there."""
    place = offset(stand("16"), tr.rng.uniform(-8, 8), tr.rng.uniform(-8, 8))
    tr.wait(tr.rng.uniform(0.3, 0.8), "free", at=place)


# --- cases: habitual_absence, world A2 ---------------------------------------------------------


HOSPITAL_STANDS = ("8", "55", "112", "46", "65")


def accessible_bookings(w: World, vid: str) -> None:
    """A17b: accessible taxi, PcD bookings city-wide (half at hospital stands); stand 16 Wed."""
    tr, at = w.track(vid), stand("16")
    home = w.home(tr, at)
    for d in w.days:
        if not not_sunday(d):
            continue
        if d.weekday() == 2:
            stand_day(tr, d, at, home)
            continue
        tr.skip_to(local(d, 7, tr.rng.randint(0, 30)), home)
        while tr.t < local(d, 17):
            if tr.rng.random() < 0.5:
                p = stand(tr.rng.choice(HOSPITAL_STANDS))
            else:
                p = rand_point(tr.rng, tr.pos, 1000, 5000)
            tr.drive(p, "free")
            tr.wait(tr.rng.uniform(3, 8), "free")  # a PcD passenger takes time to board
            ride(tr)
            tr.wait(tr.rng.uniform(10, 30), "off")  # helps them out, waits for the next call
        tr.drive(home, "off")
    w.register(tr, "16", accessible=True)


def quiet_stand(w: World, vid: str, **tracker: Any) -> None:
    """A22, A22b: stand 34, two waits of 3.2–5 h a day, each ending in a fare."""
    tr, at = w.track(vid, **tracker), stand("34")
    home = w.home(tr, at)
    for d in w.days:
        if not not_sunday(d):
            continue
        tr.skip_to(local(d, 7, tr.rng.randint(0, 30)), home)
        tr.drive(at, "free")
        for _ in range(2):
            place = offset(at, tr.rng.uniform(-10, 10), tr.rng.uniform(-10, 10))
            tr.wait(tr.rng.uniform(192, 300), "free", at=place)
            ride(tr, back_to=at)
        tr.drive(home, "off")
    w.register(tr, "34")


# --- cases: inactivity, world B ----------------------------------------------------------------


def background(w: World, vid: str, k: int) -> None:
    """BG*: cruises 8 h a day, off on weekday ``k % 7``; the odd ones off on New Year's day."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if d.weekday() == k % 7 or (d == date(2024, 1, 1) and k % 2):
            continue
        cruise_day(tr, d, home, start_h=7 + k % 3, end_h=15 + k % 3)
    w.register(tr)


def stopped(
    w: World,
    vid: str,
    last: date,
    private_weekdays: tuple[int, ...] = (),
    hours: tuple[int, int] = (7, 17),
) -> None:
    """B01, B02, B04, B05: cruises until ``last``; then private outings on ``private_weekdays``."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if d <= last:
            if not_sunday(d) or d == last:
                cruise_day(tr, d, home, *hours)
        elif d.weekday() in private_weekdays:
            private_outing(tr, d, home)
    w.register(tr)


def summer_vacation(w: World, vid: str) -> None:
    """B03: cruises; away 6 Jan–1 Mar (56 days), tracker silent; back on 2 Mar."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if (d <= date(2024, 1, 5) or d >= date(2024, 3, 2)) and not_sunday(d):
            cruise_day(tr, d, home)
    w.register(tr)


def at_the_beach(w: World, vid: str) -> None:
    """B03b: cruises until 5 Feb; 6 Feb to Capão da Canoa, private outings there since."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if d <= date(2024, 2, 5):
            if not_sunday(d):
                cruise_day(tr, d, home)
        elif d == date(2024, 2, 6):
            tr.skip_to(local(d, 8), home)
            tr.drive(CAPAO, "off", kmh=80)
            tr.wait(5, "off")
        elif d.weekday() in (2, 5):
            private_outing(tr, d, home, far=CAPAO)
    w.register(tr)


def tracker_dies(w: World, vid: str) -> None:
    """B06: cruises daily; the tracker dies on 10 Jan at 11:00."""
    tr = w.track(vid)
    tr.dead = [(local(date(2024, 1, 10), 11), local(date(2024, 4, 2), 0))]
    home = w.home(tr)
    for d in w.days:
        if not_sunday(d):
            cruise_day(tr, d, home)
    w.register(tr)


def meter_fault(
    w: World, vid: str, stand_id: str, since: date, reads: str | None, ride_meter: str
) -> None:
    """B07, B08, B20: works its stand daily; from ``since`` a meter fault.

    ``reads``: what every fix's meter reads from then on (``""`` lost, ``"off"`` a cut wire);
    ``ride_meter``: what the meter reads during rides from then on (``"free"``: stuck on Livre).
    """
    tr, at = w.track(vid), stand(stand_id)
    home = w.home(tr, at)
    for d in w.days:
        if d >= since:
            tr.meter_reads = reads
        if not_sunday(d):
            stand_day(tr, d, at, home, ride_meter=ride_meter if d >= since else "occupied")
    w.register(tr, stand_id)


def until_status(w: World, vid: str, last: date, **registry: str) -> None:
    """B09, B10: cruises until ``last``; silent since, under a status in the registry."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in days(w.spec.first, last):
        if not_sunday(d):
            cruise_day(tr, d, home)
    w.register(tr, **registry)


def new_prefixo(w: World, vid: str) -> None:
    """B11: first alvará 20 Feb, cruising from 10 Mar."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in days(date(2024, 3, 10), w.spec.as_of):
        if not_sunday(d):
            cruise_day(tr, d, home)
    w.register(tr, alvara_first_issued_on="2024-02-20")


def never_seen(w: World, vid: str, **registry: str) -> None:
    """B11b, B18: in the fleet, no fix at all."""
    w.register(w.track(vid), **registry)


def saturdays(w: World, vid: str) -> None:
    """B12: part-time, cruises on Saturdays 8:00–14:00."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if d.weekday() == 5:
            cruise_day(tr, d, home, start_h=8, end_h=14)
    w.register(tr)


def meter_off_rides(w: World, vid: str) -> None:
    """B16: cruises daily; from 20 Jan every ride with the meter off (fixed-price app rides)."""
    tr = w.track(vid)
    home = w.home(tr)
    for d in w.days:
        if not_sunday(d):
            cruise_day(tr, d, home, ride_meter="occupied" if d < date(2024, 1, 20) else "off")
    w.register(tr)


def back_from_vacation(w: World, vid: str) -> None:
    """B19: works stand 60 until 29 Jan; back on 29 Mar, 6 h a day Livre at it, no fare yet."""
    tr, at = w.track(vid), stand("60")
    home = w.home(tr, at)
    for d in w.days:
        if d <= date(2024, 1, 29):
            if not_sunday(d):
                stand_day(tr, d, at, home)
        elif d >= date(2024, 3, 29):
            tr.skip_to(local(d, 8), home)
            tr.drive(at, "free")
            tr.wait(60 * 6, "free", at=offset(at, 5, 5))
            tr.drive(home, "off")
    w.register(tr, "60")


# --- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One vehicle: what it represents and what the detector of its kind should say."""

    world: str
    kind: str
    should: str  # ACCUSE, NOT, REVIEW (listed for review, not proposed) or JUDGEMENT
    what: str
    build: Callable[[World, str], None]
    article: str = ""  # the provision an accusation must cite, when not the kind's usual one
    note: str = ""
    background: bool = False  # always in its world, whatever --cases selects

    @property
    def label(self) -> str:
        """Return the expected verdict as the table shows it."""
        extra = self.article or self.note
        return f"{self.should} ({extra})" if extra else self.should


def _absence(should: str, what: str, build: Callable[..., None], **kw: Any) -> Case:
    return Case("A", ABSENCE, should, what, build, **kw)


def _absence2(should: str, what: str, build: Callable[..., None], **kw: Any) -> Case:
    return Case("A2", ABSENCE, should, what, build, **kw)


def _inactivity(should: str, what: str, build: Callable[..., None], **kw: Any) -> Case:
    return Case("B", INACTIVITY, should, what, build, **kw)


CASES: dict[str, Case] = {
    # world A
    "A01": _absence(
        ACCUSE, "works daily at another stand (6), never at its own 60", at_other_stand
    ),
    "A02": _absence(
        ACCUSE, "cruises all day, never at its stand 68", partial(cruiser, stand_id="68")
    ),
    "A03": _absence(
        NOT, "control: waits inside its stand 105 daily", partial(stand_worker, stand_id="105")
    ),
    "A04": _absence(
        NOT,
        "stand full: queues 20–40 m beyond the polygon's edge, boards there",
        partial(kerb_queue, stand_id="60", lo=20, hi=40, bearing=80),
    ),
    "A05": _absence(
        JUDGEMENT,
        "long queue 65–90 m beyond the edge of a 31-licensee stand (13), boards there",
        partial(kerb_queue, stand_id="13", lo=65, hi=90, bearing=260),
    ),
    "A06": _absence(
        NOT, "night shift 20–04 h, 15 min at its (dead) stand 66 first, then cruising", night_shift
    ),
    "A06b": _absence(
        NOT,
        "night shift every other night 20–04 h, at its stand 66 on 1 shift in 4 (27 %)",
        partial(
            night_shift, every=2, at_stand_every=4, wait_min=(25, 35), spread_m=8, sundays_off=False
        ),
    ),
    "A07": _absence(
        NOT,
        "phone/app bookings city-wide; at its stand 48 two afternoons a week",
        partial(bookings, stand_weekdays=(1, 4)),
    ),
    "A07b": _absence(
        JUDGEMENT,
        "phone/app bookings city-wide; at its stand 48 one afternoon a week",
        partial(bookings, stand_weekdays=(2,)),
    ),
    "A08": _absence(
        NOT,
        "airport stand 5 closed from 05-04, closure in --stand-suspensions; works elsewhere",
        partial(stand_closed, stand_id="5"),
    ),
    **{
        f"A08R{k}": _absence(
            JUDGEMENT,
            "bus station (1) closed from 05-04, no closure record; its 3 licensees all away",
            partial(stand_closed, stand_id="1", day_off=(k + 3) % 7),
            note="registry not updated",
        )
        for k in (1, 2, 3)
    },
    "A09": _absence(NOT, "licence moved from stand 3 to 37 on 05-20, attends each", transfer),
    "A09b": _absence(NOT, "first stand licence (37) from 05-22; cruised before", new_licence),
    "A10": _absence(NOT, "vacation from 05-10, tracker silent", partial(vacation, mode="silent")),
    "A10b": _absence(
        NOT,
        "vacation from 05-10, car used privately, meter off (a trip to Gramado)",
        partial(vacation, mode="private"),
    ),
    "A10c": _absence(
        NOT,
        "no meter data; at its stand 19 until 05-06, then vacation, private use daily",
        partial(vacation, mode="unmetered"),
        note="review is fine",
    ),
    "A11": _absence(
        NOT,
        "phone tracker sending only while moving; waits at its stand 41",
        partial(stand_worker, stand_id="41", motion_only=True),
    ),
    "A11b": _absence(
        NOT,
        "tracker dead 05-08..25 while working its stand 41",
        partial(
            stand_worker,
            stand_id="41",
            dead=((local(date(2024, 5, 8), 0), local(date(2024, 5, 26), 0)),),
        ),
    ),
    "A12": _absence(
        NOT,
        "urban canyon (51): waiting fixes sd 35 m, 15 % at 80–200 m, accuracy_m",
        partial(stand_worker, stand_id="51", wait_fn=canyon_wait, accuracy=True),
    ),
    "A13": _absence(
        NOT, "weekdays at its stand 105; Saturdays and holidays cruising", weekdays_at_stand
    ),
    "A16": _absence(
        NOT,
        "licensed at 24 (same point as 102), waits there daily",
        partial(stand_worker, stand_id="24"),
    ),
    "A17": _absence(
        ACCUSE,
        "accessible taxi, cruises, never at its stand 16",
        partial(cruiser, stand_id="16", accessible=True),
        article="art. 28, § 2º",
    ),
    "A18": _absence(ACCUSE, "cruises; at its stand 60 only twice in the window", rare_visitor),
    "A20": _absence(
        NOT,
        "busy hospital stand 16: boards 20–50 s after arriving",
        partial(stand_worker, stand_id="16", wait_fn=quick_wait),
    ),
    "A21": _absence(
        NOT,
        "tracker every 300 s; waits at its stand 46",
        partial(stand_worker, stand_id="46", mv_int=300, park_int=300),
    ),
    # world A2
    "K35": _absence2(
        NOT,
        "queues 35–50 m beyond its stand's edge (52)",
        partial(kerb_queue, stand_id="52", bearing=100, lo=35, hi=50),
    ),
    "K45": _absence2(
        NOT,
        "queues 45–60 m beyond its stand's edge (52)",
        partial(kerb_queue, stand_id="52", bearing=100, lo=45, hi=60),
    ),
    "K55": _absence2(
        JUDGEMENT,
        "queues 55–70 m beyond its stand's edge (52)",
        partial(kerb_queue, stand_id="52", bearing=100, lo=55, hi=70),
    ),
    "K35n": _absence2(
        NOT,
        "queues 35–50 m beyond its stand's edge (52), GPS sd 15 m",
        partial(kerb_queue, stand_id="52", bearing=100, lo=35, hi=50, noise=15.0),
    ),
    "A17b": _absence2(
        JUDGEMENT,
        "accessible taxi, PcD bookings city-wide (hospital stands); its stand 16 on Wednesdays",
        accessible_bookings,
    ),
    "A22": _absence2(
        NOT,
        "quiet stand 34, waits 3.2–5 h, 2 fares a day, tracker silent while stationary",
        partial(quiet_stand, motion_only=True),
    ),
    "A22b": _absence2(
        NOT,
        "quiet stand 34, waits 3.2–5 h, 2 fares a day, hourly heartbeat while parked",
        partial(quiet_stand, park_int=3600),
    ),
    # world B
    **{
        f"BG{k:02d}": _inactivity(
            NOT, "background cruiser", partial(background, k=k), background=True
        )
        for k in range(1, 15)
    },
    "B01": _inactivity(
        ACCUSE,
        "last ride 01-20, then only private trips, meter off (71 days)",
        partial(stopped, last=date(2024, 1, 20), private_weekdays=(1, 4, 5)),
    ),
    "B02": _inactivity(
        REVIEW,
        "last ride 01-15, no fixes after (it stopped; the GPS cannot prove it)",
        partial(stopped, last=date(2024, 1, 15)),
    ),
    "B03": _inactivity(
        NOT, "summer vacation 01-06..03-01 (56 days), tracker silent", summer_vacation
    ),
    "B03b": _inactivity(
        NOT, "at the beach since 02-06, private use, meter off (55 days)", at_the_beach
    ),
    "B04": _inactivity(
        NOT,
        "last ride 01-31 evening, private use after: 60 days, not > 60",
        partial(stopped, last=date(2024, 1, 31), private_weekdays=(2, 6), hours=(9, 18)),
    ),
    "B05": _inactivity(
        ACCUSE,
        "last ride 01-30 evening, private use after: 61 days",
        partial(stopped, last=date(2024, 1, 30), private_weekdays=(2, 6), hours=(9, 18)),
    ),
    "B06": _inactivity(
        NOT,
        "tracker dead from 01-10 11h, the taxi keeps working",
        tracker_dies,
        note="review is fine",
    ),
    "B07": _inactivity(
        NOT,
        "meter feed lost 01-15 (empty), works its stand 60 daily",
        partial(
            meter_fault, stand_id="60", since=date(2024, 1, 15), reads="", ride_meter="occupied"
        ),
    ),
    "B08": _inactivity(
        NOT,
        "meter stuck on Livre from 01-20, works its stand 68 daily with rides",
        partial(meter_fault, stand_id="68", since=date(2024, 1, 20), reads=None, ride_meter="free"),
    ),
    "B09": _inactivity(
        NOT,
        "reserva approved 01-10..06-30 (art. 15), silent",
        partial(
            until_status,
            last=date(2024, 1, 9),
            status="reservado",
            status_since="2024-01-10",
            status_until="2024-06-30",
        ),
    ),
    "B10": _inactivity(
        JUDGEMENT,
        "Fora de Operação since 01-12, in the workshop 80 days, silent",
        partial(
            until_status,
            last=date(2024, 1, 11),
            status="fora de operação",
            status_since="2024-01-12",
        ),
        note="art. 38 I, not art. 60 X",
    ),
    "B11": _inactivity(NOT, "new prefixo: alvará 02-20, operating from 03-10", new_prefixo),
    "B11b": _inactivity(
        REVIEW,
        "new prefixo: alvará 01-10, no fixes at all",
        partial(never_seen, alvara_first_issued_on="2024-01-10"),
    ),
    "B12": _inactivity(NOT, "part-time: works Saturdays only", saturdays),
    "B16": _inactivity(
        JUDGEMENT, "from 01-20 every ride meter off (fixed-price app), 8 h a day", meter_off_rides
    ),
    "B18": _inactivity(REVIEW, "fleet vehicle with no fixes at all", never_seen),
    "B19": _inactivity(
        NOT,
        "vacation 01-30..03-28 (59 days); back Livre at its stand 60 03-29..31, no fare yet",
        back_from_vacation,
    ),
    "B20": _inactivity(
        JUDGEMENT,
        "meter wire cut 01-20: every fix reads off; works its stand 105 daily with rides",
        partial(
            meter_fault, stand_id="105", since=date(2024, 1, 20), reads="off", ride_meter="off"
        ),
    ),
}


# --- runs --------------------------------------------------------------------------------------


def run_world(name: str, cases: list[str], seed: int, out: Path) -> dict[str, Any]:
    """Build world ``name`` with ``cases`` (and its background), run ``pontual analyze`` on it.

    Returns the cases, the number of fixes, the build and analyze times and the outputs
    (``analyze_outputs``) or ``error``.
    """
    started = time.perf_counter()
    w = World(name, seed)
    names = [n for n, c in CASES.items() if c.world == name and (c.background or n in cases)]
    for n in names:
        CASES[n].build(w, n)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    args, n_fixes = w.write(folder)
    built = time.perf_counter()
    res = folder / "out"
    cmd = [str(pontual()), "analyze", *args, "--tiles", "none", "--jobs", "2", "--out", str(res)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    result: dict[str, Any] = {"name": name, "cases": names, "fixes": n_fixes}
    if proc.returncode:
        said = [ln.strip("│╭╮╰╯─ ") for ln in proc.stderr.splitlines()]  # drop the CLI's box
        result["error"] = f"exit {proc.returncode}: {([ln for ln in said if ln] or ['?'])[-1]}"
    else:
        outputs = analyze_outputs(res, KINDS)
        del outputs["summary"]
        result |= outputs
    done = time.perf_counter()
    return result | {"build_s": built - started, "analyze_s": done - built}


# --- verdicts ----------------------------------------------------------------------------------


def findings(run: dict[str, Any], vid: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Return the vehicle's findings (of ``kind``, or of both kinds)."""
    return [f for f in run["found"] if f["vehicle_id"] == vid and kind in (None, f["kind"])]


def proposals(run: dict[str, Any], f: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the proposals made of finding ``f``."""
    return [p for p in run["proposals"] if f["finding_id"] in p["finding_ids"]]


def in_review(run: dict[str, Any], f: dict[str, Any]) -> dict[str, Any] | None:
    """Return the summary's review entry of finding ``f``, if it is listed for review."""
    return next((r for r in run["review"] if r.get("finding_id") == f["finding_id"]), None)


def accusations(run: dict[str, Any], vid: str, kind: str) -> list[str]:
    """Return the provisions the vehicle is proposed under for ``kind`` (an accusation)."""
    return sorted({p["provision"] for f in findings(run, vid, kind) for p in proposals(run, f)})


def expected(name: str, kind: str) -> str:
    """Return what the case should get from ``kind``'s detector (``NOT`` for the other kind)."""
    c = CASES[name]
    return c.should if c.kind == kind else NOT


def usual_article(kind: str) -> str:
    """Return the provision a ``kind`` accusation cites in Porto Alegre."""
    return {ABSENCE: "art. 49", INACTIVITY: "art. 60, X"}[kind]


def _local(stamp: str) -> str:
    t = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(TZ)
    return t.strftime("%Y-%m-%d %H:%M")


def key_details(f: dict[str, Any]) -> str:
    """Return a finding's confidence and the details that carry it."""
    d = f.get("details") or {}
    if f["kind"] == ABSENCE:
        text = f"stand {f.get('stand_id')}, present {d.get('days_present')} of "
        text += f"{d.get('days_operating')} days operating"
        extra = [k for k in ("accessible", "unmetered") if d.get(k)]
        if d.get("days_suspended"):
            extra.append(f"{d['days_suspended']} days suspended")
    else:
        text = f"idle {d.get('idle_days')} d, counted {d.get('counted_idle_days')}"
        extra = [k.replace("_", " ") for k in ("never_seen", "silent") if d.get(k)][:1]
        extra += [f"{k.replace('_', ' ')} {d[k]}" for k in ("excused_days", "feed_gap_days")]
        extra = [e for e in extra if not e.endswith(" 0")]
    return f"{f['confidence']:.2f}: {text}" + (f", {', '.join(extra)}" if extra else "")


def describe(f: dict[str, Any], run: dict[str, Any]) -> str:
    """Return one line about a finding: kind, vehicle, span, details and what became of it."""
    props = proposals(run, f)
    review = in_review(run, f)
    if props:
        fate = "proposed " + "; ".join(sorted({p["provision"] for p in props}))
    elif review:
        fate = f"for review: {review.get('reason', '')}"
    else:
        fate = "not proposed"
    return (
        f"{f['kind']}, vehicle {f['vehicle_id']}, {_local(f['started_at'])} → "
        f"{_local(f['ended_at'])} (-03:00), {key_details(f)}; {fate}"
    )


def judge(name: str, run: dict[str, Any]) -> list[str]:
    """Return the case's false accusations and misses, one line each ("- FALSE …", "- MISSED …").

    A finding only listed for review accuses no one. Judgement cases give no line for their
    own kind.
    """
    c = CASES[name]
    label = f"`{name}` ({c.kind}, should be {c.label})"
    lines = []
    for kind in KINDS:
        should = expected(name, kind)
        if should == JUDGEMENT:
            continue
        mine = findings(run, name, kind)
        if should in (NOT, REVIEW):
            lines += [
                f"- FALSE ACCUSATION {label}: {describe(f, run)}" for f in mine if proposals(run, f)
            ]
        if should == REVIEW and not mine:
            lines.append(f"- MISSED {label}: no {kind} finding to review")
        if should != ACCUSE:
            continue
        article = c.article or usual_article(kind)
        if not mine:
            lines.append(f"- MISSED {label}: no {kind} finding")
        elif article not in accusations(run, name, kind):
            lines += [
                f"- MISSED {label}: found, not proposed under {article}: {describe(f, run)}"
                for f in mine
            ]
    return lines


def metrics(names: list[str], run_of: dict[str, dict[str, Any]], kind: str) -> dict[str, int]:
    """Count a kind's clear cases and outcomes over ``names`` (cases whose world ran).

    Positives: the kind's ``accuse`` cases (found when proposed under their article).
    Negatives: the kind's ``not`` and ``review`` cases (``own``) and every clear case of the
    other kind (``other``): any proposal of the kind on them is a false accusation.
    """
    m = {"positives": 0, "own": 0, "other": 0, "tp": 0, "fp": 0}
    for n in names:
        run = run_of[CASES[n].world]
        if "error" in run:
            continue
        should = expected(n, kind)
        accused = accusations(run, n, kind)
        if should == ACCUSE:
            m["positives"] += 1
            m["tp"] += (CASES[n].article or usual_article(kind)) in accused
        elif should in (NOT, REVIEW):
            m["own" if CASES[n].kind == kind else "other"] += 1
            m["fp"] += bool(accused)
    return m


# --- report ------------------------------------------------------------------------------------


def cells(name: str, run: dict[str, Any]) -> list[str]:
    """Return the table's findings cells (one per kind) and its proposed cell for a case."""
    row, proposed = [], []
    for kind in KINDS:
        mine = findings(run, name, kind)
        row.append("<br>".join(key_details(f) for f in mine) or "–")
        for f in mine:
            props = proposals(run, f)
            if props:
                proposed += sorted({p["provision"] for p in props})
            else:
                proposed.append("(review)" if in_review(run, f) else "(not proposed)")
    return [*row, ", ".join(proposed) or "–"]


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b} = {a / b:.2f}" if b else "–"


def main() -> None:
    """Build the worlds, run them one at a time, print the table and the verdicts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", metavar="NAME", choices=list(CASES), help="a subset")
    ap.add_argument("--out", type=Path, help="keep inputs and outputs here (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    chosen = set(a.cases or CASES)
    worlds = [wn for wn in WORLDS if any(CASES[n].world == wn for n in chosen)]
    started = time.perf_counter()
    run_of: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="absence-lookalikes-") as tmp:
        out = a.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for k, wn in enumerate(worlds, 1):  # one `pontual analyze` at a time
            r = run_of[wn] = run_world(wn, sorted(chosen), a.seed, out)
            print(
                f"[{k}/{len(worlds)}] world {wn}: {len(r['cases'])} vehicle(s), {r['fixes']} fixes,"
                f" built in {r['build_s']:.1f} s, analyzed in {r['analyze_s']:.1f} s,"
                f" {r.get('error', 'ok')}",
                file=sys.stderr,
                flush=True,
            )
    wall = time.perf_counter() - started
    names = [n for n in CASES if n in {m for r in run_of.values() for m in r["cases"]}]
    print(
        f"{len(names)} cases, seed {a.seed}, one `pontual analyze` per world "
        f"({', '.join(worlds)}), run one at a time\n"
    )
    print(
        "| case | represents | expected | habitual_absence (confidence: details) "
        "| inactivity (confidence: details) | proposed (article) |\n|---|---|---|---|---|---|"
    )
    lines: list[str] = []
    for kind in KINDS:
        group = [n for n in names if CASES[n].kind == kind]
        if group:
            print(f"| **{kind}** | | | | | |")
        shown_background = False
        for n in group:
            c, run = CASES[n], run_of[CASES[n].world]
            lines += judge(n, run) if "error" not in run else []
            if c.background:
                if shown_background:
                    continue
                shown_background = True
                print(_background_row(group, run))
                continue
            if "error" in run:
                print(f"| `{n}` | {c.what} | {c.label} | {run['error']} | – | – |")
                continue
            print(f"| `{n}` | {c.what} | {c.label} | {' | '.join(cells(n, run))} |")
    print(f"\nWall time {wall:.1f} s ({len(worlds)} worlds, built and analyzed one at a time).")
    print(
        "\nOver the clear cases (judgement cases not counted; the negatives include the other"
        " kind's clear cases):\n\n| kind | clear positives | clear negatives (own + other kind)"
        " | accused | precision | recall |\n|---|---|---|---|---|---|"
    )
    for kind in KINDS:
        m = metrics(names, run_of, kind)
        accused = m["tp"] + m["fp"]
        print(
            f"| {kind} | {m['positives']} | {m['own']} + {m['other']} | {accused} "
            f"| {_ratio(m['tp'], accused)} | {_ratio(m['tp'], m['positives'])} |"
        )
    false = [ln for ln in lines if ln.startswith("- FALSE")]
    missed = [ln for ln in lines if ln.startswith("- MISSED")]
    print(f"\nFalse accusations ({len(false)}):\n")
    print("\n".join(false) if false else "none")
    print(f"\nMisses ({len(missed)}):\n")
    print("\n".join(missed) if missed else "none")
    judged = []
    for n in names:
        c, run = CASES[n], run_of[CASES[n].world]
        if c.should == JUDGEMENT and "error" not in run:
            mine = findings(run, n, c.kind)
            what = "; ".join(describe(f, run) for f in mine) or "no finding"
            judged.append(f"- `{n}` ({c.kind}, {c.label}): {what}")
    if judged:
        print("\nJudgement cases (reported, not counted):\n")
        print("\n".join(judged))
    errors = [
        f"- world `{wn}`: RUN FAILED, {r['error']}" for wn, r in run_of.items() if "error" in r
    ]
    if errors:
        print("\n" + "\n".join(errors))
        sys.exit(1)


def _background_row(group: list[str], run: dict[str, Any]) -> str:
    """Return one table row for a world's background vehicles."""
    bg = [n for n in group if CASES[n].background]
    label = f"`{bg[0]}`–`{bg[-1]}`"
    what = f"{len(bg)} background cruisers, a day off a week"
    if "error" in run:
        return f"| {label} | {what} | not | {run['error']} | – | – |"
    cols: list[list[str]] = [[], [], []]
    for n in bg:
        for k, cell in enumerate(cells(n, run)):
            if cell != "–":
                cols[k].append(f"{n} {cell}")
    return f"| {label} | {what} | not | " + " | ".join("<br>".join(c) or "–" for c in cols) + " |"


if __name__ == "__main__":
    main()
