"""GPS anomalies: impossible jumps of a vehicle's reported position.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 59 VI (gravíssima: "desligar
ou por qualquer forma intervir no Sistema de Monitoramento em Tempo Real da Frota de Táxi") and
art. 58 IX (grave: tracking not fully available). The detector states the facts; whether a jump
is a receiver fault or interference is for a person (and the rulebook) to decide.

Definitions (each one appears in the finding's ``details``):

step
    From one fix of a vehicle to its next fix: ``distance_m`` (great circle), ``dt_s`` and
    ``implied_speed_kmh = distance_m / dt_s · 3.6``.
anomalous step
    A step whose implied speed exceeds ``max_speed_kmh`` **and** whose distance exceeds
    ``min_jump_m``. The speed test is :func:`tracking.validate.speed_flags` itself, the function
    that sets the pings' ``speed_flag`` at ingest (flag on the later fix of a step, from the
    previous kept fix of the vehicle), so with the same limit every anomalous step ends at a
    speed-flagged fix; the distance test keeps GPS jitter between fixes a second apart from
    accusing anyone. Each fix's ingest ``speed_flag`` is shown in the evidence. Where the fixes
    carry the receiver's ``accuracy_m``, both tests take the distance less the two fixes'
    accuracies (each at most :data:`MAX_ACCURACY_ALLOWANCE_M`): a move the receiver itself says
    its fixes may not resolve (the first fix out of a tunnel, 600 m off at an accuracy of 800
    m) is no failure of the tracking; the step shows ``accuracy_m`` of both fixes.
run
    A maximal run of consecutive anomalous steps of one vehicle, over fixes ``f0 … fm``. A run
    *returns* when it has at least two steps and the step ``f0 → fm`` is not anomalous
    (``A → B → A'``: ``B`` is a single outlier fix).
finding
    One per event, the runs of each vehicle taken in time order:

    - a run that returns is one finding, ``pattern = "outlier"``, its inner fixes in
      ``outlier_fixes``;
    - otherwise, when the vehicle's next run ends at most ``max_excursion_s`` after this run's
      ``f0`` and the step from this run's ``f0`` to that run's last fix is not anomalous, the
      track jumped away and came back: the two runs and the fixes between them are one finding,
      ``pattern = "outlier"``, every fix between the two ends being an outlier (a displaced
      stretch, e.g. multipath for a minute; in the Porto data most jumps come in such pairs),
      unless that next run pairs so with the run after it over a shorter time: then this run
      stays a jump and the shorter excursion is the outlier (stale fixes before a jump and a
      brief outlier later would otherwise name the true stretch between them wrong);
    - otherwise the run alone, ``pattern = "jump"``: the position moved impossibly and did not
      come back (or the data ends).

    ``steps`` lists the finding's steps with their ``anomalous`` flag; ``distance_m``,
    ``dt_s`` and ``implied_speed_kmh`` are those of the fastest anomalous step;
    ``return_step`` is the step ``f0 → fm`` of an outlier finding. ``lasted_s`` sums its steps'
    times but those longer than ``max_excursion_s``: a silence (the tracker sent nothing, a
    ``tracking_gap`` question), not a wrong position; the rulebooks' "persistent" reads it (a
    glitch fix before the tracker was switched off for the night lasted the glitch, not the
    night).
two tracks
    Fixes that alternate between two places, each stretch plausible on its own, are not one
    receiver failing: they are two receivers reporting under one vehicle (a cloned or
    misregistered tracker, or two feeds merged). A vehicle's events are grouped in time order
    into *chains*: an event joins the chain before it when it starts at most
    ``max_excursion_s`` after the chain's last fix and, labelling each fix by the parity of the
    anomalous steps since the chain's first fix, neither of the two tracks so labelled gets an
    anomalous step or a silence longer than :data:`MAX_TRACK_GAP_S`; otherwise it starts the
    next chain. A chain (or a single event) with at least :data:`MIN_TWO_TRACK_SWITCHES`
    anomalous steps and :data:`MIN_TWO_TRACK_FIXES` fixes on each track is one finding,
    ``pattern = "two_tracks"`` (``tracks``: each track's fixes, first and last fix; geometry
    the two tracks): the short outliers of a second receiver slower than the first (A B A A B
    …) as well as a strict alternation. Other chains keep their events. The rulebooks propose
    nothing for it (POA art. 58, IX is about the vehicle's tracking not working, which this
    does not show): it is listed for a person to find out whose the second receiver is.
evidence size
    ``steps`` and ``fixes`` list at most :data:`MAX_LISTED` entries each, the first and the
    last halves, ``n_steps`` and ``n_fixes`` counting all (``outlier_fixes`` likewise);
    an interleaved feed of hours would otherwise make one finding of thousands of steps.
confidence
    ``0.5 + 0.25·(1 − max_speed_kmh/peak_speed_kmh) + 0.2·(1 − min_jump_m/peak_distance_m)``
    over the finding's anomalous steps (peaks of speed and of distance), at most 0.95: it grows
    with how far past both thresholds the worst step is.

Geometry: the LineString through the finding's fixes; ``started_at``/``ended_at``: times of its
first and last fix.

Live (:data:`KERNEL`): the vehicle's fixes from the first one whose event a later fix can still
change are kept (:func:`open_from`): the last fix, or the open run, or a jump that may still
come back (plus the open run that may bring it back or undo its pairing), with the fixes after
it. The kept tail is bounded by one run of consecutive impossible steps plus twice
``max_excursion_s``, and it starts no later than the chain of the held event, or of the last
event while a later one may still join it (so two receivers keep their chain's fixes until it
ends: its finding comes then).
An event is emitted once it cannot change: when the step after it is plausible, no later run
can bring it back (the next run ended elsewhere, or ``max_excursion_s`` passed since its first
fix) and no later event can join its chain (``max_excursion_s`` passed since its last fix, or
a later event started the next chain).
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo.crs import haversine_m
from tracking.detectors._track_kernels import (
    NS,
    TrackArrays,
    check_positive,
    finding_record,
    findings_from_records,
    fix_evidence,
    fix_evidences,
    track_arrays,
)
from tracking.detectors.findings import LASTED_S
from tracking.detectors.kernel import TrackKernel
from tracking.validate import MAX_EXCURSION_S, MAX_SPEED_KMH, speed_flags

MAX_ACCURACY_ALLOWANCE_M = 1000.0
"""Most of a fix's reported ``accuracy_m`` taken off a step's distance: a receiver claiming
worse than this gives no position worth the name, and cannot excuse a jump of kilometres."""
KIND = "gps_anomaly"
"""Implied speed above which a step is impossible (km/h); POA art. 59 VI / 58 IX. Same default
as the ingest ``speed_flag``."""
DEFAULT_MIN_JUMP_M = 500.0
"""Shortest anomalous step (m), so that jitter between fixes close in time does not accuse."""
DEFAULT_MAX_EXCURSION_S = MAX_EXCURSION_S
"""Longest displaced stretch (jump away and back) reported as one outlier finding (s)."""
MAX_CONFIDENCE = 0.95
MIN_TWO_TRACK_SWITCHES = 6
"""Anomalous steps back and forth before a finding is read as two receivers (three round trips:
a multipath reflection that recurs once or twice stays an outlier)."""
MIN_TWO_TRACK_FIXES = 3
"""Fixes each of the two tracks needs."""
MAX_TRACK_GAP_S = 120.0
"""Longest silence within either of two tracks: a second receiver reports steadily, while a
failing receiver's wrong positions come minutes apart."""
MAX_LISTED = 40
"""Steps (and fixes) a finding's details list: the first and the last halves."""

Thresholds = tuple[float, float, float]
Event = tuple[int, int, int]
"""A finding's fix span: ``(first, end of run 1, last)``."""


def detect_gps_anomaly(
    pings: pd.DataFrame,
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
    max_excursion_s: float = DEFAULT_MAX_EXCURSION_S,
) -> gpd.GeoDataFrame:
    """Find impossible jumps of reported positions (see the module docstring).

    Parameters
    ----------
    pings : pandas.DataFrame
        Validated fixes (``tracking/frames.py``): ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``; optional ``meter``, ``row``, ``speed_flag``. Sorted here if needed.
    max_speed_kmh : float, default 250
        Implied speed above which a step is impossible (POA art. 59 VI, art. 58 IX).
    min_jump_m : float, default 500
        A step must also be longer than this to be anomalous.
    max_excursion_s : float, default 300
        A jump away and a jump back within this time make one outlier finding.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings of kind ``gps_anomaly``.

    Raises
    ------
    DetectorInputError
        If the pings break their contract (missing columns, naive times, unknown meter).
    DetectorThresholdError
        If a threshold is not a finite number > 0.
    """
    check_positive(
        max_speed_kmh=max_speed_kmh, min_jump_m=min_jump_m, max_excursion_s=max_excursion_s
    )
    th = (max_speed_kmh, min_jump_m, max_excursion_s)
    track = track_arrays(pings)
    records = [
        _record(_take(track, np.arange(s, e + 1, dtype=np.int64)), th)
        for s, _, e in _chained(track, _events(track, th), th)
    ]
    return findings_from_records(records)


def open_from(
    pings: pd.DataFrame,
    *,
    max_speed_kmh: float = MAX_SPEED_KMH,
    min_jump_m: float = DEFAULT_MIN_JUMP_M,
    max_excursion_s: float = DEFAULT_MAX_EXCURSION_S,
) -> dict[str, int]:
    """Each vehicle's first fix whose event a later fix can still change.

    That is the first fix of the vehicle's last event when its run is still open (it ends at
    the last fix) or when it is a lone jump whose return could still come in time; the first
    fix of the event before that one when it is a lone jump that the open run could still
    bring back; otherwise the last fix (a new run may start there). The chain of the event so
    held, or of the last event while a later event may still join it, is held whole.
    """
    th = (max_speed_kmh, min_jump_m, max_excursion_s)
    track = track_arrays(pings)
    if not len(track.ts_ns):
        return {}
    ends = np.flatnonzero(np.r_[track.codes[1:] != track.codes[:-1], True])
    out = {str(track.vehicles[track.codes[i]]): int(track.ts_ns[i]) for i in ends}
    by_vehicle: dict[int, list[Event]] = {}
    for event in _events(track, th):
        by_vehicle.setdefault(int(track.codes[event[0]]), []).append(event)
    for code, events in by_vehicle.items():
        last = int(ends[code])
        s, e1, e = events[-1]
        if e == last and len(events) > 1 and _open_run_may_change(track, events[-2], last, th):
            s = events[-2][0]  # the open run may still bring the jump before it back
        elif e != last and not _may_return(track, events[-1], last, th):
            s = last  # settled: a new run can only start at the last fix
        # A held event, or the last one while a later event may still follow it, is held
        # with the whole chain it belongs to (the chain decides its pattern).
        chains = _chains(track, events, th)
        starts = {ev[0]: c.events[0][0] for c in chains for ev in c.events}
        s = starts.get(s, s)
        if int(track.ts_ns[last] - track.ts_ns[e]) <= round(th[2] * NS):
            s = min(s, chains[-1].events[0][0])
        out[str(track.vehicles[code])] = int(track.ts_ns[s])
    return out


KERNEL = TrackKernel(KIND, detect_gps_anomaly, open_from)
"""The rule as a kernel: batch and live (``tracking.detectors.kernel.advance``)."""

# --- kernel ----------------------------------------------------------------------------------


def _events(track: TrackArrays, th: Thresholds) -> list[Event]:
    """Return the findings' fix spans in (vehicle, time) order: ``(first, end of run 1, last)``.

    Runs of consecutive anomalous steps (a step never joins two vehicles) taken in order; a
    run that does not return takes the vehicle's next run when they pair (module docstring).
    """
    steps = np.flatnonzero(_anomalous_steps(track, th))
    if not len(steps):
        return []
    new_run = np.ones(len(steps), dtype=bool)
    new_run[1:] = steps[1:] != steps[:-1] + 1
    first = steps[new_run]
    last = steps[np.append(np.flatnonzero(new_run)[1:] - 1, len(steps) - 1)] + 1
    events = []
    i, n_runs = 0, len(first)
    while i < n_runs:  # a loop over runs (events), not over fixes
        s, e = int(first[i]), int(last[i])
        span = (s, e, e)
        i += 1
        if _pairs_runs(track, first, last, i - 1, th) and not _closer_return(
            track, first, last, i - 1, th
        ):
            span = (s, e, int(last[i]))
            i += 1
        events.append(span)
    return events


def _pairs_runs(
    track: TrackArrays, first: NDArray[np.int64], last: NDArray[np.int64], i: int, th: Thresholds
) -> bool:
    """Whether run ``i``, a jump that does not return, pairs with run ``i + 1``."""
    if i + 1 >= len(first) or _returns(track, int(first[i]), int(last[i]), th):
        return False
    s, e2 = int(first[i]), int(last[i + 1])
    return bool(track.codes[e2] == track.codes[s]) and _pairs(track, s, e2, th)


def _closer_return(
    track: TrackArrays, first: NDArray[np.int64], last: NDArray[np.int64], i: int, th: Thresholds
) -> bool:
    """Whether run ``i + 1`` pairs with run ``i + 2`` over a shorter time than run ``i`` with it.

    Stale fixes before a jump and a brief outlier later (``A A | B … B C | B``) pair both
    ways; the shorter excursion names the fewer fixes wrong (``C``, not the stretch ``B … B``).
    """
    if not _pairs_runs(track, first, last, i + 1, th):
        return False
    ts = track.ts_ns
    return bool(ts[last[i + 2]] - ts[first[i + 1]] < ts[last[i + 1]] - ts[first[i]])


class _Chain:
    """Events of one vehicle read together as two tracks, grown one event at a time.

    Fixes are labelled by the parity of the anomalous steps before them from the chain's first
    fix; each track keeps its last fix, and an event joins only if every step it adds to either
    track is plausible and no longer than :data:`MAX_TRACK_GAP_S`.
    """

    def __init__(self, track: TrackArrays, event: Event, th: Thresholds) -> None:
        self.events = [event]
        self.side = 0
        self.last = [-1, -1]
        self.n = [0, 0]
        self.switches = 0
        self.consistent = self._add(track, event[0], event[2], th, first=True)

    def join(self, track: TrackArrays, event: Event, th: Thresholds) -> bool:
        """Add ``event`` if it may follow this chain; tell whether it did."""
        end = self.events[-1][2]
        if not (self.consistent and track.codes[event[0]] == track.codes[end]):
            return False
        if int(track.ts_ns[event[0]] - track.ts_ns[end]) > round(th[2] * NS):
            return False
        if not self._add(track, end, event[2], th, first=False):
            return False
        self.events.append(event)
        return True

    def two_tracks(self) -> bool:
        """Whether the chain, read whole, is two receivers (module docstring)."""
        return self.switches >= MIN_TWO_TRACK_SWITCHES and min(self.n) >= MIN_TWO_TRACK_FIXES

    def _add(
        self, track: TrackArrays, start: int, end: int, th: Thresholds, *, first: bool
    ) -> bool:
        idx = np.arange(start, end + 1, dtype=np.int64)
        flips = _anomalous_steps(_take(track, idx), th)
        side = (self.side + np.r_[0, np.cumsum(flips)]) % 2
        skip = 0 if first else 1  # the chain's last fix is labelled already
        for t in (0, 1):
            members = idx[skip:][side[skip:] == t]
            seq = np.r_[[self.last[t]] if self.last[t] >= 0 else [], members].astype(np.int64)
            if not _one_track(track, seq, th):
                return False
            if members.size:
                self.last[t] = int(members[-1])
                self.n[t] += int(members.size)
        self.side = int(side[-1])
        self.switches += int(flips.sum())
        return True


def _one_track(track: TrackArrays, seq: NDArray[np.int64], th: Thresholds) -> bool:
    """Whether fixes ``seq`` (one vehicle, in time order) are a plausible track of their own."""
    if seq.size < 2:
        return True
    if int(np.diff(track.ts_ns[seq]).max()) > round(MAX_TRACK_GAP_S * NS):
        return False
    return not _anomalous_steps(_take(track, seq), th).any()


def _chains(track: TrackArrays, events: list[Event], th: Thresholds) -> list[_Chain]:
    """Group the events, in order, into chains (:class:`_Chain`).

    An event that cannot follow the current chain starts the next one, so the grouping of a
    prefix never changes.
    """
    chains: list[_Chain] = []
    for event in events:
        if not (chains and chains[-1].join(track, event, th)):
            chains.append(_Chain(track, event, th))
    return chains


def _chained(track: TrackArrays, events: list[Event], th: Thresholds) -> list[Event]:
    """Return the events with each chain that reads as two tracks made one event.

    Two receivers at different rates under one vehicle make a string of short outliers (the
    slower receiver's fixes between the faster one's); their chain, read whole, is two tracks
    (module docstring). A chain that does not read as two tracks keeps its events.
    """
    out: list[Event] = []
    for chain in _chains(track, events, th):
        if len(chain.events) > 1 and chain.two_tracks():
            s, e = chain.events[0][0], chain.events[-1][2]
            out.append((s, e, e))
        else:
            out.extend(chain.events)
    return out


def _open_run_may_change(track: TrackArrays, event: Event, last: int, th: Thresholds) -> bool:
    """Tell whether the open run ending at fix ``last`` may still change ``event``, the one before.

    A jump there pairs with the next run, unless that run pairs with the one after it over a
    shorter time (:func:`_closer_return`): the open run's end may bring the jump back or undo
    its pairing, within two ``max_excursion_s`` of its first fix. An outlier is settled.
    """
    s, e1, e = event
    if e == e1 and _returns(track, s, e, th):
        return False
    return int(track.ts_ns[last] - track.ts_ns[s]) <= 2 * round(th[2] * NS)


def _may_return(track: TrackArrays, event: Event, last: int, th: Thresholds) -> bool:
    """Tell whether a run after fix ``last`` could still pair with ``event`` (a lone jump)."""
    s, e1, e = event
    alone = e == e1 and not _returns(track, s, e1, th)
    return alone and int(track.ts_ns[last] - track.ts_ns[s]) < round(th[2] * NS)


def _anomalous_steps(track: TrackArrays, th: Thresholds) -> NDArray[np.bool_]:
    """Boolean per step ``k`` (fix ``k`` → ``k + 1``): too fast and longer than ``min_jump_m``."""
    max_speed_kmh, min_jump_m, _ = th
    n = len(track.ts_ns)
    out = np.zeros(max(n - 1, 0), dtype=bool)
    if n < 2:
        return out
    fast = np.flatnonzero(
        speed_flags(track.codes, track.ts_ns, track.lat, track.lon, max_speed_kmh=max_speed_kmh)[1:]
    )
    if len(fast):
        dist = haversine_m(
            track.lat[fast], track.lon[fast], track.lat[fast + 1], track.lon[fast + 1]
        )
        if track.accuracy_m is not None:
            acc = np.clip(np.nan_to_num(track.accuracy_m, nan=0.0), 0.0, MAX_ACCURACY_ALLOWANCE_M)
            dist = dist - acc[fast] - acc[fast + 1]
            dt_s = (track.ts_ns[fast + 1] - track.ts_ns[fast]) / NS
            dist = np.where(dist * 3.6 > max_speed_kmh * dt_s, dist, 0.0)  # now plausible
        out[fast[dist > min_jump_m]] = True
    return out


def _pair_anomalous(track: TrackArrays, i: int, j: int, th: Thresholds) -> bool:
    """Whether the step from fix ``i`` straight to fix ``j`` (same vehicle) is anomalous."""
    return bool(_anomalous_steps(_take(track, np.asarray([i, j], dtype=np.int64)), th)[0])


def _returns(track: TrackArrays, s: int, e: int, th: Thresholds) -> bool:
    """Tell whether fixes ``s … e`` return: two steps or more and ``s → e`` plausible."""
    return e - s >= 2 and not _pair_anomalous(track, s, e, th)


def _pairs(track: TrackArrays, s: int, e2: int, th: Thresholds) -> bool:
    """Tell whether a jump at ``s`` and a later run ending at ``e2`` are one excursion."""
    in_time = int(track.ts_ns[e2] - track.ts_ns[s]) <= round(th[2] * NS)
    return in_time and not _pair_anomalous(track, s, e2, th)


def _take(track: TrackArrays, idx: NDArray[np.int64]) -> TrackArrays:
    """Return the fixes ``idx`` (all of one vehicle) as a one-vehicle track."""
    return TrackArrays(
        vehicles=np.asarray([track.vehicles[track.codes[idx[0]]]], dtype=object),
        codes=np.zeros(len(idx), dtype=np.int64),
        ts_ns=track.ts_ns[idx],
        lat=track.lat[idx],
        lon=track.lon[idx],
        meter=track.meter[idx],
        row=track.row[idx],
        speed_flag=track.speed_flag[idx],
        accuracy_m=None if track.accuracy_m is None else track.accuracy_m[idx],
    )


def _step(track: TrackArrays, i: int, j: int) -> tuple[dict[str, Any], float, float]:
    dist = float(haversine_m(track.lat[i], track.lon[i], track.lat[j], track.lon[j]))
    dt_s = float(track.ts_ns[j] - track.ts_ns[i]) / NS
    speed = dist / dt_s * 3.6
    step: dict[str, Any] = {
        "from_row": None if track.row[i] < 0 else int(track.row[i]),
        "to_row": None if track.row[j] < 0 else int(track.row[j]),
        "distance_m": round(dist, 1),
        "dt_s": dt_s,
        "implied_speed_kmh": round(speed, 1),
    }
    if track.accuracy_m is not None and not np.isnan(track.accuracy_m[[i, j]]).all():
        step["accuracy_m"] = [
            None if np.isnan(a) else float(a) for a in track.accuracy_m[[i, j]].tolist()
        ]
    return step, dist, speed


def _record(group: TrackArrays, th: Thresholds) -> dict[str, Any]:
    """Build the finding of one event: fixes ``f0 … fm`` of one vehicle."""
    max_speed_kmh, min_jump_m, max_excursion_s = th
    m = len(group.ts_ns) - 1
    anomalous = _anomalous_steps(group, th)
    steps = np.arange(m)
    dists = haversine_m(group.lat[:-1], group.lon[:-1], group.lat[1:], group.lon[1:])
    step_s = np.diff(group.ts_ns) / NS
    speeds = dists / step_s * 3.6
    counted = steps[anomalous] if anomalous.any() else steps
    top = int(counted[np.argmax(speeds[counted])])
    peak, peak_speed = _step(group, top, top + 1)[0], float(speeds[top])
    peak_dist = float(dists[counted].max())
    tracks = _two_tracks(group, anomalous, th)
    returns = tracks is None and _returns(group, 0, m, th)
    conf = 0.5 + 0.25 * (1.0 - max_speed_kmh / peak_speed) + 0.2 * (1.0 - min_jump_m / peak_dist)
    listed_steps = []
    for k in _listed(m):
        step = _step(group, k, k + 1)[0]
        step["anomalous"] = bool(anomalous[k])
        listed_steps.append(step)
    details: dict[str, Any] = {
        "pattern": "two_tracks" if tracks is not None else "outlier" if returns else "jump",
        "outlier_fixes": _fixes(group, np.arange(1, m)) if returns else [],
        "distance_m": peak["distance_m"],
        "dt_s": peak["dt_s"],
        "implied_speed_kmh": peak["implied_speed_kmh"],
        "n_steps": m,
        "n_anomalous_steps": int(anomalous.sum()),
        "steps": listed_steps,
        "return_step": _step(group, 0, m)[0] if returns else None,
        "n_fixes": m + 1,
        "fixes": _fixes(group, np.arange(m + 1)),
        LASTED_S: round(float(step_s[step_s <= max_excursion_s].sum()), 1),
        "thresholds": {
            "max_speed_kmh": float(max_speed_kmh),
            "min_jump_m": float(min_jump_m),
            "max_excursion_s": float(max_excursion_s),
        },
    }
    if tracks is None:
        geometry: shapely.Geometry = shapely.LineString(np.column_stack([group.lon, group.lat]))
    else:
        details["tracks"] = [
            {"n_fixes": int(t.size), "first": fix_evidence(group, int(t[0])),
             "last": fix_evidence(group, int(t[-1]))}
            for t in tracks
        ]  # fmt: skip
        geometry = shapely.MultiLineString(
            [np.column_stack([group.lon[t], group.lat[t]]) for t in tracks]
        )
    return finding_record(
        kind=KIND,
        vehicle_id=str(group.vehicles[0]),
        stand_id=None,
        started_ns=int(group.ts_ns[0]),
        ended_ns=int(group.ts_ns[m]),
        confidence=float(min(MAX_CONFIDENCE, max(0.0, conf))),
        details=details,
        geometry=geometry,
    )


def _listed(n: int) -> NDArray[np.int64]:
    """Return the positions ``0 … n-1`` a finding lists (all, or :data:`MAX_LISTED` halves)."""
    if n <= MAX_LISTED:
        return np.arange(n, dtype=np.int64)
    half = MAX_LISTED // 2
    return np.concatenate([np.arange(half), np.arange(n - half, n)]).astype(np.int64)


def _fixes(group: TrackArrays, positions: NDArray[np.int64]) -> list[dict[str, Any]]:
    """Return the evidence of the fixes at ``positions`` that a finding lists (:func:`_listed`)."""
    return fix_evidences(group, positions[_listed(positions.size)])


def _two_tracks(
    group: TrackArrays, anomalous: NDArray[np.bool_], th: Thresholds
) -> list[NDArray[np.int64]] | None:
    """Return the event's fixes as two tracks (module docstring, *two tracks*), or None."""
    m = len(group.ts_ns) - 1
    chain = _Chain(group, (0, m, m), th)
    if not (chain.consistent and chain.two_tracks()):
        return None
    side = np.r_[0, np.cumsum(anomalous)] % 2
    return [np.flatnonzero(side == 0), np.flatnonzero(side == 1)]
