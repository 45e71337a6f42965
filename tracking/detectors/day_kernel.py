"""Day kernels: fleet-wide rules judged by closed local day, run on inputs that arrive in pieces.

Some rules are not about one vehicle's fixes but about days or places of the whole fleet
(``inactivity``, ``habitual_absence``, ``illegal_stand_formation``); :class:`kernel.TrackKernel`
does not fit them. Their kernel has the same principle:

- the rule is the batch function ``detect_<kind>`` (the one implementation), run unchanged;
- the state is plain data (JSON): the batch function's own inputs that the future can still
  change, bounded (per vehicle its last operation; a window of day sightings and visits; the
  waiting stops of a window);
- ``advance(state, <new inputs>, *, final=False, **context_and_thresholds)`` adds the new inputs
  to the state and judges, with the batch function, each local day that closed (a later input
  arrived, or ``final``), returning only the findings of closed days, each emitted once.

Cutting the input differently gives the same findings by construction (each closed day is
judged on the same data); the tests replay inputs in random pieces against one piece and
against the batch function called for each closed day.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import geopandas as gpd


@dataclass(frozen=True)
class DayKernel:
    """A fleet-wide rule judged by closed local day.

    Attributes
    ----------
    kind : str
        The finding kind.
    detect : callable
        The rule's batch function (its keyword parameters are the live thresholds).
    advance : callable
        ``advance(state, <new inputs>, *, final=False, **params) -> (state, findings)``: the
        batch function run on the state plus the new inputs for each closed day.
    """

    kind: str
    detect: Callable[..., gpd.GeoDataFrame]
    advance: Callable[..., tuple[Any, gpd.GeoDataFrame]]
