"""Typed rows of the frames the routes read with ``frame.itertuples(index=False)``.

pandas types every column of a frame as any scalar, so each protocol names the columns a route
reads and what pandas yields for them: numbers as Python or NumPy scalars, instants as
``pd.Timestamp``, nullable columns as their value or ``pd.NA`` (``object``). A route casts the
``itertuples`` iterator to one of these once; nothing is converted at run time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, Protocol, SupportsFloat, SupportsInt

import pandas as pd


class PresentRow(Protocol):
    """A row of ``stands.occupancy.PRESENT_COLUMNS``: a vehicle at a stand now."""

    position: SupportsInt
    vehicle_id: object
    arrived_at: pd.Timestamp
    waited_s: SupportsFloat
    licensed: object


class IntruderRow(Protocol):
    """A row of ``stands.supervision.INTRUDER_COLUMNS``: an unlicensed vehicle's visit."""

    vehicle_id: object
    arrived_at: pd.Timestamp
    departed_at: pd.Timestamp
    dwell_s: SupportsFloat
    boarded: object
    boarding_distance_m: SupportsFloat


class PresenceRow(Protocol):
    """A row of ``stands.presence.PRESENCE_COLUMNS``: a licensee's local day at a stand."""

    vehicle_id: object
    date: dt.date
    operated: object
    present: object
    continues_previous_day: object
    n_visits: SupportsInt
    presence_s: SupportsFloat
    visits: Iterable[dict[str, Any]]


class PresenceSummaryRow(Protocol):
    """A row of ``stands.presence.SUMMARY_COLUMNS``: a licensee's days over a period."""

    vehicle_id: object
    days_licensed: SupportsInt
    days_operating: SupportsInt
    days_present: SupportsInt
    share: object
