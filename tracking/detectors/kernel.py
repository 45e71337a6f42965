"""One kernel per rule: a detector's batch function run on fixes that arrive in pieces.

A rule is written once, as its batch function ``detect_<kind>(pings, **params)`` over whole
vehicles. Its :class:`TrackKernel` adds one fact about the rule: from which fix of each vehicle
a later fix can still change the verdict (``open_from``: the start of the open trip, the last
fix before a possible gap, …). :func:`advance` runs the batch function over the kept fixes plus
the new ones, returns the findings that start before that point (no later fix can change them)
and keeps the fixes from that point on as the vehicle's state (plain data, stored by the live
engine). Batch is one call with ``final=True``; live is one call per batch of stored fixes.
Batch and live give the same findings by construction when ``open_from`` is right; each
detector's tests replay inputs cut into random pieces against one batch call
(:func:`replay_in_pieces`).

The state of a vehicle: ``{"seen": <ns of its latest fix>, "tail": {<column>: [values]}}``; a
fix not later than ``seen`` (a late or repeated one) is ignored, as the live engine always did.
A rule that reads fixes before its open point (``context_fixes``: the fix before a trip's
pickup) keeps them at the head of the tail and the open instant as ``"open"``: findings that
start before it were returned by an earlier call and are not returned again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from tracking import frames as fr
from tracking.detectors._errors import DetectorInputError
from tracking.detectors.findings import empty_findings

State = dict[str, Any]
"""A vehicle's state: JSON-serialisable plain data."""

_FLOATS = (fr.LAT, fr.LON, fr.SPEED_KMH, fr.HEADING_DEG, fr.ACCURACY_M)
_TEXTS = (fr.VEHICLE_ID, fr.METER, fr.DRIVER_ID, fr.TRIP_REF)
_CARRIED = (*fr.PING_COLUMNS, fr.TRIP_REF)


@dataclass(frozen=True)
class TrackKernel:
    """A rule over each vehicle's own fixes, in the shape :func:`advance` runs.

    Attributes
    ----------
    kind : str
        The finding kind.
    detect : callable
        ``detect(pings, **params) -> findings``: the rule's batch function (the one
        implementation). ``pings`` follow the pings contract (``tracking.frames``).
    open_from : callable
        ``open_from(pings, **params) -> {vehicle_id: ns}``: for each vehicle of ``pings`` (sorted
        by vehicle and time), the instant of its first fix that a later fix could still join to a
        finding, or change the verdict on. A vehicle left out is closed: nothing of it is kept.
        Findings that start at or after that instant are not returned yet.
    context_fixes : int, default 0
        Fixes of each vehicle before its ``open_from`` instant that the rule still reads (e.g.
        1: the fix before a trip's pickup); kept in the state as context only.
    """

    kind: str
    detect: Callable[..., gpd.GeoDataFrame]
    open_from: Callable[..., Mapping[str, int]]
    context_fixes: int = 0


def advance(
    kernel: TrackKernel,
    states: Mapping[str, State | None],
    pings: pd.DataFrame,
    *,
    final: bool = False,
    **params: Any,
) -> tuple[dict[str, State], gpd.GeoDataFrame]:
    """Run ``kernel`` on new fixes after the vehicles' states.

    Parameters
    ----------
    kernel : TrackKernel
        The rule.
    states : mapping
        ``vehicle_id → state`` from the previous call (missing or None: nothing seen yet).
    pings : pandas.DataFrame
        New fixes (pings contract), any vehicles, any order.
    final : bool, default False
        True at the end of the input (a batch run): every finding is returned, no state kept.
    **params
        The detector's keyword parameters (thresholds and context), passed to ``detect`` and
        ``open_from``.

    Returns
    -------
    tuple
        ``(states, findings)``: the new state of every vehicle of ``states`` or ``pings`` (new
        dicts; inputs not modified; empty when ``final``) and the findings no later fix can
        change.
    """
    fresh = _after_seen(pings, states)
    frame = _concat([_tails_frame(states), fresh])
    found = kernel.detect(frame, **params) if len(frame) else empty_findings()
    returned = {str(v): int(s["open"]) for v, s in states.items() if s and "open" in s}
    if len(found) and returned:  # found from context fixes: returned by an earlier call
        start = pd.to_datetime(found["started_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        floor = np.asarray([returned.get(str(v), -(2**63)) for v in found["vehicle_id"]])
        found = found[start.astype(np.int64) >= floor].reset_index(drop=True)
    if final:
        return {}, found
    cut = kernel.open_from(frame, **params) if len(frame) else {}
    new_states = _next_states(frame, states, cut, context=kernel.context_fixes)
    if len(found) and cut:
        start = pd.to_datetime(found["started_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        limit = np.asarray(
            [cut.get(str(v), np.iinfo(np.int64).max) for v in found["vehicle_id"]],
            dtype=np.int64,
        )
        found = found[start.astype(np.int64) < limit].reset_index(drop=True)
    return new_states, found


def replay_in_pieces(
    kernel: TrackKernel,
    pings: pd.DataFrame,
    cuts: Sequence[int],
    **params: Any,
) -> gpd.GeoDataFrame:
    """Return the findings of ``pings`` fed in time order as pieces cut at the given row positions.

    The pings are sorted by time (vehicles interleaved, as fixes arrive), cut at ``cuts``, each
    piece advanced after the states of the one before (as the live engine does, states
    round-tripped through JSON), then the end of the input closes what is open. Tests compare
    this with one batch call.
    """
    import json

    order = pings.sort_values([fr.TIMESTAMP, fr.VEHICLE_ID], kind="stable")
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(order)), len(order)]
    states: dict[str, State] = {}
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        states, found = advance(kernel, states, order.iloc[lo:hi], **params)
        states = json.loads(json.dumps(states))
        parts.append(found)
    _, found = advance(kernel, states, order.iloc[:0], final=True, **params)
    parts.append(found)
    frames = [p for p in parts if len(p)]
    if not frames:
        return empty_findings()
    return gpd.GeoDataFrame(pd.concat(frames, ignore_index=True), geometry="geometry", crs=4326)


# --- state as plain data --------------------------------------------------------------------


def _after_seen(pings: pd.DataFrame, states: Mapping[str, State | None]) -> pd.DataFrame:
    if not len(pings):
        return pings
    for col in fr.PING_REQUIRED:
        if col not in pings.columns:
            msg = f"os pings não têm a coluna '{col}'"
            raise DetectorInputError(msg)
    ts = pd.to_datetime(pings[fr.TIMESTAMP])
    if ts.dt.tz is None:
        msg = "'timestamp' dos pings sem fuso horário; esperado instante com fuso"
        raise DetectorInputError(msg)
    seen = np.asarray(
        [(states.get(str(v)) or {}).get("seen", -(2**63)) for v in pings[fr.VEHICLE_ID]],
        dtype=np.int64,
    )
    ns = ts.dt.tz_convert("UTC").to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return pings[ns > seen]


def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return _typed(pd.DataFrame({c: [] for c in fr.PING_REQUIRED}))
    cols = [c for c in _CARRIED if any(c in f.columns for f in frames)]
    frame = _typed(pd.concat([f.reindex(columns=cols) for f in frames], ignore_index=True))
    return frame.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable").reset_index(drop=True)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the frame with the pings contract's dtypes (after a round trip through plain data)."""
    out = frame.copy()
    out[fr.TIMESTAMP] = pd.to_datetime(out[fr.TIMESTAMP], utc=True).astype("datetime64[ns, UTC]")
    for col in _FLOATS:
        if col in out.columns:
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(np.float64)
    for col in _TEXTS:
        if col in out.columns:
            values = out[col].astype(object)
            out[col] = values.where(values.notna(), None)
    if fr.VEHICLE_ID in out.columns:
        out[fr.VEHICLE_ID] = out[fr.VEHICLE_ID].astype(str)
    if fr.TARIFF in out.columns:
        out[fr.TARIFF] = out[fr.TARIFF].astype("Int8")
    if fr.ROW in out.columns:
        out[fr.ROW] = pd.to_numeric(out[fr.ROW]).fillna(-1).astype(np.int64)
    if fr.SPEED_FLAG in out.columns:
        out[fr.SPEED_FLAG] = out[fr.SPEED_FLAG].fillna(False).astype(bool)
    return out


def _tails_frame(states: Mapping[str, State | None]) -> pd.DataFrame:
    """Return the kept fixes of every state as one frame (columns as stored)."""
    tails = [t for _, st in sorted(states.items()) if st and (t := st.get("tail"))]
    tails = [t for t in tails if t.get(fr.TIMESTAMP)]
    if not tails:
        return pd.DataFrame()
    cols = [c for c in _CARRIED if any(c in t for t in tails)]
    data: dict[str, list[Any]] = {c: [] for c in cols}
    for tail in tails:
        n = len(tail[fr.TIMESTAMP])
        for c in cols:
            data[c].extend(tail.get(c) or [None] * n)
    frame = pd.DataFrame(data)
    frame[fr.TIMESTAMP] = pd.to_datetime(np.asarray(data[fr.TIMESTAMP], dtype=np.int64), utc=True)
    return frame


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _next_states(
    frame: pd.DataFrame,
    states: Mapping[str, State | None],
    cut: Mapping[str, int],
    *,
    context: int = 0,
) -> dict[str, State]:
    out: dict[str, State] = {
        str(v): {"seen": s["seen"], "tail": {}} for v, s in states.items() if s
    }
    if not len(frame):
        return out
    ns = frame[fr.TIMESTAMP].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    vehicles = frame[fr.VEHICLE_ID].to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, vehicles[1:] != vehicles[:-1]])
    ends = np.r_[starts[1:], len(frame)]
    columns = {
        col: [_plain(v) for v in frame[col].tolist()]
        for col in frame.columns
        if col != fr.TIMESTAMP
    }
    stamps = ns.tolist()
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        vehicle = str(vehicles[lo])
        keep = lo + int(np.searchsorted(ns[lo:hi], cut[vehicle])) if vehicle in cut else hi
        opened = keep < hi and context > 0
        keep = max(lo, keep - context) if opened else keep
        tail: dict[str, list[Any]] = {}
        if keep < hi:
            tail = {col: values[keep:hi] for col, values in columns.items()}
            tail[fr.TIMESTAMP] = stamps[keep:hi]
        before = (states.get(vehicle) or {}).get("seen", stamps[hi - 1])
        out[vehicle] = {"seen": max(stamps[hi - 1], int(before)), "tail": tail}
        if opened:
            out[vehicle]["open"] = int(cut[vehicle])
    return out
