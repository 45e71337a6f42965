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

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from tracking import frames as fr
from tracking.detectors._errors import DetectorInputError
from tracking.detectors.findings import empty_findings
from tracking.tails import State, after_seen, concat, next_states, tails_frame

__all__ = ["State", "TrackKernel", "advance", "open_findings", "replay_in_pieces"]


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
    open_detect : callable, optional
        ``open_detect(pings, **params) -> findings``: the findings of vehicles' open parts that
        later fixes never withdraw, nor move the start of: they can only extend them (their end,
        their evidence). Those may be announced before they close (:func:`open_findings`).
        ``detect`` itself when every finding of the rule only grows; None (default) when later
        fixes may withdraw any.
    """

    kind: str
    detect: Callable[..., gpd.GeoDataFrame]
    open_from: Callable[..., Mapping[str, int]]
    context_fixes: int = 0
    open_detect: Callable[..., gpd.GeoDataFrame] | None = None


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
    frame = concat([tails_frame(states), fresh])
    found = kernel.detect(frame, **params) if len(frame) else empty_findings()
    found = _not_returned(found, states)
    if final:
        return {}, found
    cut = kernel.open_from(frame, **params) if len(frame) else {}
    new_states = next_states(frame, states, cut, context=kernel.context_fixes)
    if len(found) and cut:
        start = pd.to_datetime(found["started_at"], utc=True).to_numpy(dtype="datetime64[ns]")
        limit = np.asarray(
            [cut.get(str(v), np.iinfo(np.int64).max) for v in found["vehicle_id"]],
            dtype=np.int64,
        )
        found = found[start.astype(np.int64) < limit].reset_index(drop=True)
    return new_states, found


def open_findings(
    kernel: TrackKernel, states: Mapping[str, State | None], **params: Any
) -> gpd.GeoDataFrame:
    """Return the findings of the vehicles' open parts so far (their kept fixes).

    :func:`advance` holds them back until no later fix can change them; those of the rule's
    ``open_detect`` are already certain to be found, under the same id (their start is fixed),
    and later fixes can only extend them.

    Raises
    ------
    ValueError
        If the rule has no ``open_detect``.
    """
    if kernel.open_detect is None:
        msg = f"{kernel.kind}: later fixes may withdraw an open finding"
        raise ValueError(msg)
    frame = tails_frame(states)
    found = kernel.open_detect(frame, **params) if len(frame) else empty_findings()
    return _not_returned(found, states)


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


# --- state as plain data (the generic part lives in tracking.tails) ----------------------


def _not_returned(found: gpd.GeoDataFrame, states: Mapping[str, State | None]) -> gpd.GeoDataFrame:
    """Drop the findings made from context fixes only: an earlier call returned them."""
    returned = {str(v): int(s["open"]) for v, s in states.items() if s and "open" in s}
    if not len(found) or not returned:
        return found
    start = pd.to_datetime(found["started_at"], utc=True).to_numpy(dtype="datetime64[ns]")
    floor = np.asarray([returned.get(str(v), -(2**63)) for v in found["vehicle_id"]])
    return found[start.astype(np.int64) >= floor].reset_index(drop=True)


def _after_seen(pings: pd.DataFrame, states: Mapping[str, State | None]) -> pd.DataFrame:
    return after_seen(pings, states, error=DetectorInputError)
