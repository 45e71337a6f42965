"""Stand detectors against look-alikes built by hand: an independent check through the CLI.

Measures what ``pontual analyze`` finds and proposes for ``unlicensed_stand_use``,
``illegal_stand_formation`` and ``queue_jump`` on small scenarios written from how taxis and
streets behave, not from the detectors' code. The world: four 30 m stands in Porto Alegre's
centre (A and B 600 m apart; C and D with their edges 40 m apart), a fleet of ten licensees of
A, two of B, two each of C and D, and twenty unlicensed taxis (no stand); straight streets
driven at 20–40 km/h a leg, a red light of 60–90 s at half the corners, the last and first 30 m
of a stop at 8–15 km/h; the tracker sends a fix every 15 s (45 s in one variant) with the meter
(``free``/``occupied``), the true speed (±1 km/h) and Gaussian position noise of the case's
sigma per axis (5 m unless the case says otherwise; a ``drift`` case's noise wanders with a
correlation time of 180 s, and an ``_acc`` case's tracker reports ``accuracy_m``). Each case is
one pings file run through ``pontual analyze --municipality 4314902`` (Porto Alegre); the queue
cases also under 4314548 (Pinto Bandeira, whose rulebook proposes ``queue_jump``). Reported per
case: the findings of the kinds that case is about (``findings.geojson``) and the proposals
(``proposals.json``; findings listed for review in ``summary.json`` in parentheses); any other
stand kind found is shown too. Below the table, every finding of a "no" case and every missed
"yes" case, with vehicle, time, confidence and the proposal's article.

Cases (should be): a free taxi held 75 s by a red light inside B, hailed 24 m past its edge
(no); parked 20 m outside B 6 min for a booked client, noise 20 m (no); ten vehicles doing so
12 m and 20 m outside, noise 10/15/20 m, and 10 m outside under 10/20 m of drift (no); four
taxis in a fuel queue ~10 min on four days, each hailed once as it left (no); a daily 12-min
jam 70 m from A, eight taxis crawling at 1–3 m/s, half hailed in it (no); A's licensees
queueing 90–140 m past A at four evening events (legal call); a corner where four unlicensed
taxis wait 10–30 min and board on five days (yes); an unlicensed taxi waiting 8 min and
boarding in B, or dropping off in B and boarding there 3 min later, also at 45 s, and boarding
in B under 5/10 m of drift (yes); at A, a queue jump (yes), a booked pickup beside the queue
and the first taxi refusing a ride (no), first-come-first-served with 25 m noise (no); a 90 s
red light 80 m from A, a car wash, drop-offs at stands, street hails 40–80 m from a stand,
drive-throughs, a passenger carried through B with the meter read "free" at one or two fixes
there, licensees of two stands 40 m apart in their own (no).

Usage::

    .venv/bin/python bench/bench_stand_lookalikes.py [--cases NAME ...] [--out DIR] [--seed 7]
        [--jobs 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from _analyze_run import analyze_outputs, pontual
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
POA, PB = "4314902", "4314548"
TZ = timezone(timedelta(hours=-3))
ORIGIN = (-30.0305, -51.2250)  # stand A, in Porto Alegre's centre
M_PER_DEG = 111_320.0
R = 30.0  # stand radius, m
STANDS = {"A": (0.0, 0.0), "B": (0.0, 600.0), "C": (-50.0, -600.0), "D": (50.0, -600.0)}
KERB, LANE = -4.0, -1.0  # y offsets from a street's centre line (traffic runs east)
USU, ISF, QJ = "unlicensed_stand_use", "illegal_stand_formation", "queue_jump"
STAND_KINDS = (USU, ISF, QJ)
SHORT = {USU: "unlicensed", ISF: "formation", QJ: "queue_jump"}
# Evidence shown for an unexpected finding, where its details have it (docs/formatos.md).
DETAIL_KEYS = (
    "subtype",
    "dwell_s",
    "n_fixes_inside",
    "n_fixes_stay",
    "boarding_distance_m",
    "own_wait_s",
    "n_ahead",
    "vehicles",
    "accused",
    "n_days",
    "n_stops",
    "n_boardings",
    "nearest_stand_m",
)
# Weekdays from Monday 4 March 2024.
DAYS = [date(2024, 3, 4) + timedelta(days=k) for k in range(14) if (k % 7) < 5]

Point = tuple[float, float]
Knot = tuple[float, float, float, str]  # (s after local midnight, x, y, meter from then on)


class Corner(NamedTuple):
    """A street corner on a path: a red light there half the time."""

    x: float
    y: float


def hm(h: int, m: float = 0.0) -> float:
    return h * 3600 + m * 60


def u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


class Track:
    """One vehicle's true motion on one day, as knots joined by straight constant-speed legs."""

    def __init__(self, vehicle: str, day: date, xy: Point, meter: str = "free") -> None:
        self.vehicle, self.day = vehicle, day
        self.knots: list[Knot] = [(0.0, xy[0], xy[1], meter)]
        self.misreads: list[tuple[float, float]] = []  # [from, to): the tracker reads "free"

    @property
    def t(self) -> float:
        return self.knots[-1][0]

    @property
    def xy(self) -> Point:
        return self.knots[-1][1], self.knots[-1][2]

    @property
    def meter(self) -> str:
        return self.knots[-1][3]

    def go(self, to: Point, kmh: float) -> Track:
        t, x, y, m = self.knots[-1]
        self.knots.append((t + math.dist((x, y), to) / (kmh / 3.6), to[0], to[1], m))
        return self

    def stay(self, seconds: float) -> Track:
        t, x, y, m = self.knots[-1]
        self.knots.append((t + max(seconds, 0.0), x, y, m))
        return self

    def until(self, at: float) -> Track:
        return self.stay(at - self.t)

    def set_meter(self, meter: str) -> Track:
        t, x, y, _ = self.knots[-1]
        self.knots.append((t, x, y, meter))
        return self

    def shift_to(self, at: float) -> Track:
        """Move the whole track in time so that its last knot is at ``at``."""
        dt = at - self.t
        self.knots = [(t + dt, x, y, m) for t, x, y, m in self.knots]
        self.misreads = [(a + dt, b + dt) for a, b in self.misreads]
        return self


def _along(a: Point, b: Point, metres: float) -> Point:
    """The point ``metres`` from ``a`` toward ``b`` (past ``b`` when longer)."""
    d = math.dist(a, b) or 1.0
    return a[0] + (b[0] - a[0]) * metres / d, a[1] + (b[1] - a[1]) * metres / d


def drive(
    tr: Track,
    rng: np.random.Generator,
    path: list[Point],
    *,
    slow_start: bool = False,
    slow_end: bool = True,
) -> Track:
    """Drive along ``path`` at 20–40 km/h a leg, pulling out and in over 30 m at 8–15 km/h."""
    for k, p in enumerate(path):
        a, kmh = tr.xy, u(rng, 20, 40)
        length = math.dist(a, p)
        if length < 40:
            tr.go(p, u(rng, 8, 15))
            continue
        if k == 0 and slow_start:
            tr.go(_along(a, p, 30), u(rng, 8, 15))
        if k == len(path) - 1 and slow_end:
            tr.go(_along(p, a, 30), kmh).go(p, u(rng, 8, 15))
        else:
            tr.go(p, kmh)
        if isinstance(p, Corner) and rng.random() < 0.5:
            tr.stay(u(rng, 60, 90))  # red light
    return tr


def arrive(
    vehicle: str,
    day: date,
    at: float,
    rng: np.random.Generator,
    path: list[Point],
    meter: str = "free",
) -> Track:
    """A track driving ``path`` from its first point, reaching its last at ``at``."""
    return drive(Track(vehicle, day, path[0], meter), rng, path[1:]).shift_to(at)


def hail(tr: Track, rng: np.random.Generator) -> Track:
    """Pull in, the passenger gets in, the meter starts."""
    return tr.stay(u(rng, 8, 20)).set_meter("occupied").stay(u(rng, 5, 12))


def alight(tr: Track, rng: np.random.Generator) -> Track:
    """The passenger pays and gets out."""
    return tr.stay(u(rng, 5, 10)).set_meter("free").stay(u(rng, 20, 45))


def depart(tr: Track, rng: np.random.Generator, path: list[Point]) -> Track:
    """Pull out and drive ``path``; a passenger aboard is dropped at its end; then 200 m more."""
    drive(tr, rng, path, slow_start=True)
    if tr.meter == "occupied":
        alight(tr, rng)
    end = path[-1]
    before = path[-2] if len(path) > 1 else tr.knots[0][1:3]
    far = _along(end, (2 * end[0] - before[0], 2 * end[1] - before[1]), 200)
    return drive(tr, rng, [far], slow_start=True, slow_end=False)


def on(stand: str, dx: float, dy: float = KERB) -> Point:
    """A point ``dx`` m east of a stand's centre on its street (kerb by default)."""
    cx, cy = STANDS[stand]
    return cx + dx, cy + dy


def west_to(stand: str, to: Point) -> list[Point]:
    """From 700 m west of a stand, through the corner 300 m west of it, to ``to``."""
    cx, cy = STANDS[stand]
    return [(cx - 700, cy + LANE), Corner(cx - 300, cy + LANE), to]


def east_from(stand: str, rng: np.random.Generator, at: Point) -> list[Point]:
    """Out of a kerb at ``at`` and east, through the corner 300 m east of the stand."""
    cx, cy = STANDS[stand]
    return [(at[0] + 12, cy + LANE), Corner(cx + 300, cy + LANE), (cx + u(rng, 800, 1000), cy)]


def queue(
    rng: np.random.Generator,
    day: date,
    slots: list[Point],
    plan: list[tuple[str, float, float]],
    approach: Callable[[Point], list[Point]],
    leave: Callable[[Point], list[Point]],
) -> list[Track]:
    """Taxis in a line at ``slots`` (front first): each ``(vehicle, arrives, boards)`` takes the
    first free slot behind the others, moves up 8–25 s after one ahead leaves, boards at its time
    and leaves."""
    leaves = {v: b + u(rng, 5, 12) for v, _, b in plan}
    events = sorted([(a, 1, v) for v, a, _ in plan] + [(t, 0, v) for v, t in leaves.items()])
    line: list[str] = []
    moves: dict[str, list[tuple[float, int]]] = {v: [] for v, _, _ in plan}
    for t, arriving, v in events:
        if arriving:
            line.append(v)
            moves[v].append((t, len(line) - 1))
            continue
        k = line.index(v)
        line.remove(v)
        for w in line[k:]:
            moves[w].append((t + u(rng, 8, 25), line.index(w)))
    tracks = []
    for v, a, b in plan:
        (_, first), *later = moves[v]
        tr = arrive(v, day, a, rng, [*approach(slots[first]), slots[first]])
        for t, k in later:
            if t < b - 10:
                tr.until(t).go(slots[k], u(rng, 4, 8))
        tr.until(b).set_meter("occupied").until(leaves[v])
        tracks.append(depart(tr, rng, leave(tr.xy)))
    return tracks


def a_slots(n: int = 7) -> list[Point]:
    """Stand A's kerb, front (east end) first, a car every 7 m."""
    return [on("A", 20 - 7 * k) for k in range(n)]


def to_a(slot: Point) -> list[Point]:
    return west_to("A", (slot[0] - 12, LANE))


def from_a(rng: np.random.Generator) -> Callable[[Point], list[Point]]:
    return lambda at: east_from("A", rng, at)


# --- cases -------------------------------------------------------------------------------------


def red_light_in_b_hail_past(rng: np.random.Generator) -> list[Track]:
    tr = arrive("U01", DAYS[0], hm(9, 12), rng, west_to("B", on("B", 18, LANE)))
    tr.stay(75)  # red light, stop line inside B
    drive(tr, rng, [on("B", R + 24)], slow_start=True)  # hailed 24 m past B's edge
    hail(tr, rng)
    return [depart(tr, rng, east_from("B", rng, tr.xy))]


def booked_outside_b(
    rng: np.random.Generator, vehicle: str, day: date, at: float, gap: float, east: bool
) -> Track:
    """Parked ``gap`` m outside B's edge (east: having driven through it) 6 min for a booked
    client, who then gets in."""
    x = (R + gap) if east else -(R + gap)
    tr = arrive(vehicle, day, at, rng, west_to("B", on("B", x)))
    tr.stay(360)
    hail(tr, rng)
    return depart(tr, rng, east_from("B", rng, tr.xy))


def booked_20m_outside_b(rng: np.random.Generator) -> list[Track]:
    return [booked_outside_b(rng, "U02", DAYS[0], hm(10, 5), 20, True)]


def ten_outside_b(rng: np.random.Generator, gap: float) -> list[Track]:
    """Ten vehicles, two a day on five days, alternately east and west of B."""
    tracks = []
    for k in range(10):
        at = hm(9) + (k % 2) * hm(4) + u(rng, 0, hm(3))
        tracks.append(booked_outside_b(rng, f"U{k + 1:02d}", DAYS[k // 2], at, gap, k % 2 == 0))
    return tracks


def fuel_queue(rng: np.random.Generator) -> list[Track]:
    """A fuel station on the street 300 m north of A (no stand): a 40 m line to the pump."""
    taxis = ["U11", "U12", "U13", "U14"]
    hailed_day = dict(zip(taxis, rng.permutation(4).tolist(), strict=True))
    tracks = []
    for d in range(4):
        at = hm(14)
        for v in [taxis[i] for i in rng.permutation(4)]:
            at += u(rng, 60, 210)
            tr = arrive(
                v, DAYS[d], at, rng, [(-200, 299), Corner(300, 299), (450, 299), (460, 312)]
            )
            wait = u(rng, 8 * 60, 12 * 60)
            for _ in range(5):  # creep along the line, then the pump
                tr.stay((wait - 210) / 5).go((tr.xy[0] + 8, 312), u(rng, 4, 8))
            tr.stay(u(rng, 180, 240))
            drive(tr, rng, [(515, 299)], slow_start=True, slow_end=False)
            if d == hailed_day[v]:  # a passenger waves at the exit
                drive(tr, rng, [(515 + u(rng, 20, 40), 296)])
                hail(tr, rng)
            tracks.append(depart(tr, rng, [Corner(700, 299), (1200 + u(rng, 0, 200), 299)]))
    return tracks


def crawl(tr: Track, rng: np.random.Generator, to: Point, minutes: float, hail: bool) -> None:
    """Stop and go at 1–3 m/s to ``to`` in about ``minutes``; hailed at a stop mid-way."""
    start, total = tr.xy, math.dist(tr.xy, to)
    n = int(rng.integers(14, 20))
    marks = np.sort(rng.uniform(0, total, n - 1)).tolist() + [total]
    speeds = rng.uniform(1, 3, n)
    moving = sum((b - a) / s for a, b, s in zip([0.0, *marks[:-1]], marks, speeds, strict=True))
    stops = rng.dirichlet(np.ones(n)) * max(minutes * 60 - moving, 10.0 * n)
    at_hail = int(rng.integers(2, n - 3)) if hail else -1
    for k in range(n):
        tr.go(_along(start, to, marks[k]), float(speeds[k]) * 3.6)
        if k == at_hail:
            half = max(float(stops[k]), 25.0) / 2
            tr.stay(half).set_meter("occupied").stay(half)
        else:
            tr.stay(float(stops[k]))


def daily_jam_70m_from_a(rng: np.random.Generator) -> list[Track]:
    """A jam northbound on the street 100 m east of A, its head at the corner 70 m from A's
    edge; eight taxis crawl 12 min through it every day, four of them hailed in it."""
    tracks = []
    for day in DAYS[:5]:
        hailed = set(rng.choice(8, 4, replace=False).tolist())
        at = hm(18)
        for i in range(8):
            at += u(rng, 60, 120)
            tr = arrive(
                f"U{i + 1:02d}", day, at, rng, [(101, -1100), Corner(101, -600), (101, -420)]
            )
            crawl(tr, rng, (101, -10), 12, i in hailed)
            depart(tr, rng, [(115, -1), Corner(300, -1), (900 + u(rng, 0, 200), -1)])
            tracks.append(tr)
    return tracks


def event_queue_past_a(rng: np.random.Generator) -> list[Track]:
    """Evening games on four days: A's ten licensees line up 90–140 m east of A's edge (A itself
    behind the event's barriers) from 21:15 and take the crowd from 22:00 in turn."""
    slots = [on("A", R + 140 - 5.5 * k) for k in range(10)]
    tracks = []
    for day in [date(2024, 3, 6), date(2024, 3, 10), date(2024, 3, 13), date(2024, 3, 17)]:
        arrive_at, board_at = hm(21, 15), hm(22)
        plan = []
        for k in rng.permutation(10).tolist():
            arrive_at += u(rng, 60, 300)
            board_at = max(board_at + u(rng, 30, 150), arrive_at + 120)
            plan.append((f"A{k + 1:02d}", arrive_at, board_at))
        tracks += queue(rng, day, slots, plan, to_a, from_a(rng))
    return tracks


def corner_stand(rng: np.random.Generator) -> list[Track]:
    """A corner 300 m east and north of A (no stand): four unlicensed taxis wait 10–30 min and
    take passengers there, every morning of a week."""
    slots = [(312.0 + 7 * k, 296.0) for k in range(4)]

    def approach(slot: Point) -> list[Point]:
        return [(301, -300), Corner(301, 0), (301, 297), (slot[0] - 8, 299)]

    def leave(at: Point) -> list[Point]:
        return [(at[0] + 12, 299), Corner(700, 299), (1200 + u(rng, 0, 200), 299)]

    tracks = []
    for day in DAYS[:5]:
        plan, at = [], hm(9)
        for k in rng.permutation(4).tolist():
            at += u(rng, 180, 720)
            plan.append((f"U{15 + k:02d}", at, at + u(rng, 600, 1800)))
        tracks += queue(rng, day, slots, plan, approach, leave)
    return tracks


def boarding_in_b(rng: np.random.Generator) -> list[Track]:
    tr = arrive("U03", DAYS[0], hm(11, 3), rng, west_to("B", on("B", -5)))
    tr.stay(8 * 60 - 20)
    hail(tr, rng)
    return [depart(tr, rng, east_from("B", rng, tr.xy))]


def dropoff_then_board_in_b(rng: np.random.Generator) -> list[Track]:
    tr = arrive("U04", DAYS[0], hm(15, 20), rng, west_to("B", on("B", 0)), meter="occupied")
    tr.stay(u(rng, 5, 10)).set_meter("free")
    tr.stay(180).set_meter("occupied").stay(u(rng, 5, 12))
    return [depart(tr, rng, east_from("B", rng, tr.xy))]


def queue_at_a(rng: np.random.Generator, variant: str) -> list[Track]:
    """A01–A03 line up in A at 10:00, 10:02 and 10:04 (±30 s), then:

    - ``jump``: A04 arrives last (10:06:30), joins the back and boards at 10:07:40 while the
      others wait; they board in order from 10:12;
    - ``booked``: A04, called by the dispatcher to a client waiting at A, stops beside the line
      for 30–45 s and leaves with them; the line boards in order from 10:12;
    - ``refused``: at 10:08 the first taxi refuses a short ride, the second takes it; the first
      boards at 10:14, the third at 10:19.
    """
    j = partial(u, rng, 0, 30)
    arrivals = [hm(10) + j(), hm(10, 2) + j(), hm(10, 4) + j()]
    if variant == "refused":
        boards = [hm(10, 14) + j(), hm(10, 8.6), hm(10, 19) + j()]
    else:
        boards = [hm(10, 12) + j(), hm(10, 16) + j(), hm(10, 21) + j()]
    plan = [(f"A0{k + 1}", a, b) for k, (a, b) in enumerate(zip(arrivals, boards, strict=True))]
    if variant == "jump":
        plan.append(("A04", hm(10, 6.5), hm(10, 7.67)))
    tracks = queue(rng, DAYS[1], a_slots(), plan, to_a, from_a(rng))
    if variant == "booked":
        tr = arrive("A04", DAYS[1], hm(10, 6.5), rng, west_to("A", on("A", 8, LANE)))
        tr.stay(u(rng, 20, 30)).set_meter("occupied").stay(u(rng, 8, 15))
        tracks.append(depart(tr, rng, east_from("A", rng, tr.xy)))
    return tracks


def fifo_queue(rng: np.random.Generator) -> list[Track]:
    """Two mornings: six licensees of A arrive 1–4 min apart, passengers come 1–4 min apart
    from 10:05 and take the first taxi in line."""
    tracks = []
    for day in DAYS[2:4]:
        plan, at, passenger, last = [], hm(10), hm(10, 5), 0.0
        for k in rng.permutation(10)[:6].tolist():
            at += u(rng, 60, 240)
            passenger += u(rng, 60, 240)
            last = max(passenger, at + 45, last + 40)
            plan.append((f"A{k + 1:02d}", at, last))
        tracks += queue(rng, day, a_slots(), plan, to_a, from_a(rng))
    return tracks


def red_light_80m_from_a(rng: np.random.Generator) -> list[Track]:
    tr = arrive("U05", DAYS[0], hm(12, 30), rng, west_to("A", on("A", -(R + 80), LANE)))
    tr.stay(90)  # pedestrian light 80 m before A's edge, then through A and on
    return [drive(tr, rng, [Corner(300, LANE), (1000, LANE)], slow_start=True, slow_end=False)]


def car_wash(rng: np.random.Generator) -> list[Track]:
    """A car wash on the street 300 m north of A, 400 m west of it (no stand): four taxis, four
    days, 28–35 min each (the bay, then the drying area 10 m on), meter free, no passenger."""
    tracks = []
    for day in DAYS[:4]:
        at = hm(8, 30)
        for k in rng.permutation(4).tolist():
            at += u(rng, 300, 900)
            tr = arrive(f"U{11 + k:02d}", day, at, rng, [(200, 301), (-390, 301), (-400, 315)])
            stay = u(rng, 28 * 60, 35 * 60)
            tr.stay(stay * 0.6).go((-410, 315), 5).stay(stay * 0.4)
            tracks.append(depart(tr, rng, [(-420, 301), Corner(-700, 301), (-1100, 301)]))
    return tracks


def dropoff_at_stand(rng: np.random.Generator) -> list[Track]:
    tracks = []
    for v, stand, at in [
        ("U06", "A", hm(13, 10)),
        ("U07", "B", hm(13, 40)),
        ("U08", "A", hm(16, 5)),
    ]:
        tr = arrive(v, DAYS[0], at, rng, west_to(stand, on(stand, u(rng, -15, 15))), "occupied")
        alight(tr, rng)
        tracks.append(depart(tr, rng, east_from(stand, rng, tr.xy)))
    return tracks


def street_hails(rng: np.random.Generator) -> list[Track]:
    """Six taxis hailed 40, 48, …, 80 m from A's or B's edge, before or after driving through."""
    tracks = []
    for k, gap in enumerate(range(40, 81, 8)):
        stand, after = "AB"[k % 2], k % 3 != 0
        at = hm(9) + k * hm(1, 10) + u(rng, 0, 1200)
        tr = arrive(
            f"U{k + 1:02d}",
            DAYS[0],
            at,
            rng,
            west_to(stand, on(stand, (R + gap) * (1 if after else -1))),
        )
        hail(tr, rng)
        tracks.append(depart(tr, rng, east_from(stand, rng, tr.xy)))
    return tracks


def drive_throughs(rng: np.random.Generator) -> list[Track]:
    """Eight passes through A or B without stopping: free at 20–40 km/h, free cruising at 8–12
    km/h through the stand looking for a fare, or with a passenger; and B01 (B's) through A."""
    kinds = ("fast", "slow", "fast", "occupied")
    passes = [(f"U0{1 + k % 4}", "AB"[k % 2], kinds[k // 2]) for k in range(8)]
    tracks = []
    for k, (v, stand, how) in enumerate([*passes, ("B01", "A", "slow")]):
        cx, cy = STANDS[stand]
        tr = Track(v, DAYS[1], (cx - 700, cy + LANE), "occupied" if how == "occupied" else "free")
        drive(tr, rng, [Corner(cx - 300, cy + LANE), on(stand, -R - 40, LANE)], slow_end=False)
        if how == "slow":
            tr.go(on(stand, R + 40, LANE), u(rng, 8, 12))
        end = [Corner(cx + 300, cy + LANE), on(stand, u(rng, 800, 1000), LANE)]
        drive(tr, rng, end, slow_end=how == "occupied")
        if how == "occupied":
            alight(tr, rng)
            drive(tr, rng, [on(stand, 1200, LANE)], slow_start=True, slow_end=False)
        tracks.append(tr.shift_to(hm(8 if k < 4 else 14) + (k % 4) * hm(1) + u(rng, 0, 1800)))
    return tracks


def meter_misread_in_b(rng: np.random.Generator, dt: float = 15.0) -> list[Track]:
    """Eight taxis with a passenger crawl through B in a jam (8–12 km/h); the tracker reads the
    meter "free" at one fix there (two for half of them: a loose cable), "occupied" before and
    after; the passenger alights 800–1000 m on."""
    tracks = []
    for k in range(8):
        cx, cy = STANDS["B"]
        tr = Track(f"U{k + 1:02d}", DAYS[2], (cx - 700, cy + LANE), "occupied")
        drive(tr, rng, [Corner(cx - 300, cy + LANE), on("B", -R - 40, LANE)], slow_end=False)
        into = tr.t
        tr.go(on("B", R + 40, LANE), u(rng, 8, 12))
        mid, n = (into + tr.t) / 2, 1 + k % 2
        tr.misreads.append((mid - n * dt / 2, mid + n * dt / 2))  # exactly n fixes
        drive(tr, rng, [Corner(cx + 300, cy + LANE), on("B", u(rng, 800, 1000), LANE)])
        alight(tr, rng)
        drive(tr, rng, [on("B", 1200, LANE)], slow_start=True, slow_end=False)
        tracks.append(tr.shift_to(hm(9) + k * hm(1) + u(rng, 0, 1800)))
    return tracks


def two_stands_40m_apart(rng: np.random.Generator) -> list[Track]:
    """C and D on one street, edges 40 m apart: their licensees wait 5–15 min and board in their
    own; D's drive through C to get there, C's through D to leave."""

    def to(slot: Point) -> list[Point]:
        return west_to("C", (slot[0] - 12, STANDS["C"][1] + LANE))

    def leave(at: Point) -> list[Point]:
        return east_from("D", rng, at)

    plans = {
        "C": [("C01", hm(10), hm(10, 9)), ("C02", hm(10, 3), hm(10, 15))],
        "D": [("D01", hm(10, 1), hm(10, 11)), ("D02", hm(10, 4), hm(10, 18))],
    }
    tracks = []
    for stand, plan in plans.items():
        tracks += queue(rng, DAYS[0], [on(stand, 20 - 7 * k) for k in range(3)], plan, to, leave)
    return tracks


@dataclass(frozen=True)
class Case:
    should: str  # "no", "yes", "legal call"
    kinds: tuple[str, ...]  # the kinds the case is about (the expected one first for "yes")
    build: Callable[[np.random.Generator], list[Track]]
    sigma: float = 5.0  # GPS noise per axis, m
    dt: float = 15.0  # seconds between fixes
    drift_s: float = 0.0  # the noise's correlation time (0: independent fixes)
    accuracy: bool = False  # the tracker reports ``accuracy_m``
    municipalities: tuple[str, ...] = (POA,)


BOTH = (POA, PB)
CASES: dict[str, Case] = {
    "red_light_in_B_hail_past": Case("no", (USU,), red_light_in_b_hail_past),
    "booked_20m_outside_B": Case("no", (USU,), booked_20m_outside_b, sigma=20),
    **{
        f"ten_{gap}m_outside_noise{s}": Case(
            "no", (USU, ISF), partial(ten_outside_b, gap=gap), sigma=s
        )
        for gap in (12, 20)
        for s in (10, 15, 20)
    },
    **{
        f"ten_10m_outside_drift{s}{acc}": Case(
            "no", (USU, ISF), partial(ten_outside_b, gap=10), sigma=s, drift_s=180, accuracy=a
        )
        for s in (10, 20)
        for a, acc in ((False, ""), (True, "_acc"))
    },
    "fuel_queue": Case("no", (ISF,), fuel_queue),
    "daily_jam_70m_from_A": Case("no", (ISF, USU), daily_jam_70m_from_a, sigma=10),
    "event_queue_past_A": Case("legal call", (ISF, USU), event_queue_past_a, sigma=10),
    "corner_stand": Case("yes", (ISF,), corner_stand),
    "boarding_in_B": Case("yes", (USU,), boarding_in_b),
    "dropoff_then_board_in_B": Case("yes", (USU,), dropoff_then_board_in_b),
    **{
        f"boarding_in_B_drift{s}{acc}": Case(
            "yes", (USU,), boarding_in_b, sigma=s, drift_s=180, accuracy=a
        )
        for s in (5, 10)
        for a, acc in ((False, ""), (True, "_acc"))
    },
    "dropoff_then_board_in_B_45s": Case("yes", (USU,), dropoff_then_board_in_b, dt=45),
    "queue_jump": Case("yes", (QJ,), partial(queue_at_a, variant="jump"), municipalities=BOTH),
    "booked_pickup_from_queue": Case(
        "no", (QJ, USU), partial(queue_at_a, variant="booked"), municipalities=BOTH
    ),
    "first_refuses_ride": Case(
        "no", (QJ,), partial(queue_at_a, variant="refused"), municipalities=BOTH
    ),
    "fifo_queue_noise25": Case("no", (QJ,), fifo_queue, sigma=25, municipalities=BOTH),
    "red_light_80m_from_A": Case("no", (USU, ISF), red_light_80m_from_a),
    "car_wash": Case("no", (ISF,), car_wash),
    "dropoff_at_stand": Case("no", (USU,), dropoff_at_stand),
    "street_hails_40_80m": Case("no", (USU,), street_hails),
    "drive_throughs": Case("no", (USU,), drive_throughs, sigma=10),
    "meter_misread_in_B": Case("no", (USU, QJ), meter_misread_in_b, sigma=10),
    "two_stands_40m_apart": Case("no", (USU,), two_stands_40m_apart, sigma=10),
}


# --- files -------------------------------------------------------------------------------------


def latlon(x: float, y: float) -> tuple[float, float]:
    lat = ORIGIN[0] + y / M_PER_DEG
    return lat, ORIGIN[1] + x / (M_PER_DEG * math.cos(math.radians(ORIGIN[0])))


def noise(rng: np.random.Generator, sigma: float, t: NDArray[np.float64], drift_s: float) -> Any:
    """Position error per axis at times ``t``: independent, or a Gauss-Markov drift of
    correlation time ``drift_s`` (a receiver under multipath wanders for minutes)."""
    if drift_s <= 0:
        return rng.normal(0, sigma, len(t))
    e = np.empty(len(t))
    e[0] = rng.normal(0, sigma)
    for j in range(1, len(t)):
        rho = math.exp(-(t[j] - t[j - 1]) / drift_s)
        e[j] = rho * e[j - 1] + math.sqrt(1 - rho * rho) * rng.normal(0, sigma)
    return e


def fixes(tracks: list[Track], rng: np.random.Generator, case: Case) -> list[list[str]]:
    """The tracker's rows: a fix every ``dt`` s from a random phase, the case's noise; with
    ``accuracy``, the receiver's estimate of its error (68 % radius, about 1.5 sigma, off by
    a factor of up to about 1.6 either way)."""
    sigma, dt = case.sigma, case.dt
    rows: list[tuple[str, date, int, list[str]]] = []
    for tr in tracks:
        k = np.array([kn[:3] for kn in tr.knots])
        times, xs, ys = k[:, 0], k[:, 1], k[:, 2]
        t = np.round(np.arange(times[0] + u(rng, 0, dt), times[-1], dt))
        i = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2)
        span = times[i + 1] - times[i]
        f = np.where(span > 0, (t - times[i]) / np.where(span > 0, span, 1.0), 0.0)
        dx, dy = xs[i + 1] - xs[i], ys[i + 1] - ys[i]
        x = xs[i] + f * dx + noise(rng, sigma, t, case.drift_s)
        y = ys[i] + f * dy + noise(rng, sigma, t, case.drift_s)
        kmh = np.where(span > 0, np.hypot(dx, dy) / np.where(span > 0, span, 1.0) * 3.6, 0.0)
        kmh = np.maximum(kmh + rng.normal(0, 1, len(t)), 0.0)
        # its own stream: a case and its variant with ``accuracy_m`` share every position
        own = np.random.default_rng([zlib.crc32(tr.vehicle.encode()), tr.day.toordinal(), len(t)])
        acc = 1.5 * sigma * np.exp(own.normal(0, 0.3, len(t)))
        midnight = datetime.combine(tr.day, datetime.min.time(), TZ)
        for j in range(len(t)):
            lat, lon = latlon(float(x[j]), float(y[j]))
            stamp = (midnight + timedelta(seconds=int(t[j]))).isoformat()
            meter = tr.knots[int(i[j])][3]
            if any(a <= t[j] < b for a, b in tr.misreads):
                meter = "free"
            cells = [tr.vehicle, stamp, f"{lat:.6f}", f"{lon:.6f}", meter, f"{kmh[j]:.1f}"]
            if case.accuracy:
                cells.append(f"{acc[j]:.1f}")
            rows.append((tr.vehicle, tr.day, int(t[j]), cells))
    rows.sort(key=lambda r: r[:3])
    for a, b in zip(rows, rows[1:], strict=False):
        if a[:3] == b[:3]:
            raise ValueError(f"two fixes of {a[0]} at {a[3][1]}: overlapping tracks")
    return [r[3] for r in rows]


def write_world(folder: Path) -> tuple[Path, Path]:
    """Write the stands (30 m circles as 48-gons) and the fleet; return their paths."""
    features = []
    for sid, (cx, cy) in STANDS.items():
        ring = [
            latlon(cx + R * math.cos(a), cy + R * math.sin(a))
            for a in np.linspace(0, 2 * math.pi, 49)[:-1]
        ]
        coords = [[round(lon, 7), round(lat, 7)] for lat, lon in [*ring, ring[0]]]
        features.append(
            {
                "type": "Feature",
                "properties": {"stand_id": sid, "name": f"Ponto {sid}", "capacity": 7},
                "geometry": {"type": "Polygon", "coordinates": [coords]},
            }
        )
    stands = folder / "stands.geojson"
    stands.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    licences = {f"A{k:02d}": "A" for k in range(1, 11)}
    licences |= {f"{s}0{k}": s for s in "BCD" for k in (1, 2)}
    licences |= {f"U{k:02d}": "" for k in range(1, 21)}
    fleet = folder / "fleet.csv"
    with fleet.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["vehicle_id", "accessible", "status", "stands"])
        w.writerows([v, "false", "ativo", s] for v, s in licences.items())
    return stands, fleet


# --- runs --------------------------------------------------------------------------------------


def read_outputs(res: Path) -> dict[str, Any]:
    """The stand findings, the proposals and the review list of one run."""
    out = analyze_outputs(res, STAND_KINDS)
    ids = {f["finding_id"] for f in out["found"]}
    review = [r for r in out["review"] if r.get("finding_id") in ids]
    unruled = out.pop("summary").get("findings_without_provision", {})
    return out | {"review": review, "unruled": unruled}


def run_case(name: str, seed: int, out: Path, stands: Path, fleet: Path) -> dict[str, Any]:
    """Write the case's pings, run ``pontual analyze`` under each municipality, read the outputs."""
    case, started = CASES[name], time.perf_counter()
    # A variant (another fix interval) replays its case's tracks.
    key = name.removesuffix("_45s").removesuffix("_acc")
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    pings = folder / "pings.csv"
    with pings.open("w", newline="") as fh:
        w = csv.writer(fh)
        header = ["vehicle_id", "timestamp", "lat", "lon", "meter", "speed_kmh"]
        w.writerow(header + ["accuracy_m"] if case.accuracy else header)
        w.writerows(fixes(case.build(rng), rng, case))
    runs = {}
    for m in case.municipalities:
        res = folder / f"out-{m}"
        cmd = [str(pontual()), "analyze", "--pings", str(pings), "--stands", str(stands)]
        cmd += ["--fleet", str(fleet), "--municipality", m, "--out", str(res)]
        cmd += ["--jobs", "1", "--tiles", "none"]  # the pool runs the cases in parallel
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            runs[m] = {"error": f"exit {proc.returncode}: {tail}"}
        else:
            runs[m] = read_outputs(res)
    return {"name": name, "runs": runs, "seconds": time.perf_counter() - started}


# --- report ------------------------------------------------------------------------------------


def shown(case: Case, run: dict[str, Any]) -> list[str]:
    """The case's kinds, then any other stand kind found."""
    other = [
        k for k in STAND_KINDS if k not in case.kinds and any(f["kind"] == k for f in run["found"])
    ]
    return [*case.kinds, *other]


def cells(case: Case, run: dict[str, Any]) -> tuple[str, str]:
    if "error" in run:
        return run["error"], "–"
    found, proposed = [], []
    for k in shown(case, run):
        n_review = sum(1 for r in run["review"] if _kind_of(run, r["finding_id"]) == k)
        found.append(f"{SHORT[k]} {sum(f['kind'] == k for f in run['found'])}")
        n_unruled = int(run["unruled"].get(k, 0))
        aside = [f"{n_review} for review"] if n_review else []
        aside += [f"{n_unruled} without provision"] if n_unruled else []
        extra = f" ({', '.join(aside)})" if aside else ""
        proposed.append(f"{SHORT[k]} {sum(p['kind'] == k for p in run['proposals'])}{extra}")
    return ", ".join(found), ", ".join(proposed)


def _kind_of(run: dict[str, Any], finding_id: str) -> str:
    return next((f["kind"] for f in run["found"] if f["finding_id"] == finding_id), "")


def _local(stamp: str) -> str:
    return (
        datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        .astimezone(TZ)
        .strftime("%Y-%m-%d %H:%M:%S")
    )


def notes(name: str, municipality: str, case: Case, run: dict[str, Any]) -> list[str]:
    """Each relevant finding of a case that should give none; a "yes" case's miss."""
    label = f"`{name}` ({municipality})"
    if "error" in run:
        return [f"- {label}: RUN FAILED, {run['error']}"]
    relevant = [f for f in run["found"] if f["kind"] in case.kinds]
    if case.should == "yes":
        kind = case.kinds[0]
        hits = [f for f in relevant if f["kind"] == kind]
        if not hits:
            return [f"- {label}: MISSED, no {kind} finding"]
        if not any(p["kind"] == kind for p in run["proposals"]):
            why = " (no provision in this rulebook)" if run["unruled"].get(kind) else ""
            return [f"- {label}: {len(hits)} {kind} finding(s), none proposed{why}"]
        return []
    lines = []
    for f in relevant:
        props = [p for p in run["proposals"] if f["finding_id"] in p["finding_ids"]]
        review = [r for r in run["review"] if r["finding_id"] == f["finding_id"]]
        if props:
            fate = "; ".join(
                f"proposed {p['provision']} to {p['vehicle_id']} at {p['confidence']}"
                for p in props
            )
        elif review:
            fate = f"for review: {review[0].get('reason', '')}"
        elif run["unruled"].get(f["kind"]):
            fate = "not proposed (the run counts this kind without provision)"
        else:
            fate = "not proposed"
        who = f["vehicle_id"] or "place"
        measured = ", ".join(
            f"{k} {f['details'][k]}" for k in DETAIL_KEYS if k in (f.get("details") or {})
        )
        lines.append(
            f"- {label}: {f['kind']}, vehicle {who}, {_local(f['started_at'])} → "
            f"{_local(f['ended_at'])} (-03:00), confidence {round(f['confidence'], 4)}, "
            f"stand {f.get('stand_id') or '–'} ({measured}); {fate}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", metavar="NAME", choices=list(CASES), help="a subset")
    ap.add_argument("--out", type=Path, help="keep inputs and outputs here (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once")
    a = ap.parse_args()
    names = a.cases or list(CASES)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stand-lookalikes-") as tmp:
        out = a.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        stands, fleet = write_world(out)
        results: dict[str, dict[str, Any]] = {}
        with ProcessPoolExecutor(max_workers=a.jobs) as pool:
            futures = [pool.submit(run_case, n, a.seed, out, stands, fleet) for n in names]
            for done in as_completed(futures):
                r = done.result()
                results[r["name"]] = r
                errors = [m for m, run in r["runs"].items() if "error" in run]
                status = f"error under {', '.join(errors)}" if errors else "ok"
                print(
                    f"[{len(results)}/{len(names)}] {r['name']}: {r['seconds']:.1f} s, {status}",
                    file=sys.stderr,
                    flush=True,
                )
    wall = time.perf_counter() - started
    print(f"{len(names)} cases, seed {a.seed}, `pontual analyze` per case and municipality\n")
    print("| case | should be | findings | proposed |\n|---|---|---|---|")
    details = []
    for n in names:
        case = CASES[n]
        for m, run in results[n]["runs"].items():
            label = f"`{n}`" + (f" ({m})" if len(case.municipalities) > 1 else "")
            should = f"yes ({SHORT[case.kinds[0]]})" if case.should == "yes" else case.should
            found, proposed = cells(case, run)
            print(f"| {label} | {should} | {found} | {proposed} |")
            details += notes(n, m, case, run)
    print(f"\nWall time {wall:.1f} s, {a.jobs} jobs.")
    if details:
        print("\nFindings of the cases that should give none (or are a legal call), and misses:\n")
        print("\n".join(details))
    if any("error" in run for r in results.values() for run in r["runs"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
