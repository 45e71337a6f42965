"""Fixes kept between pieces of an input: a tail per vehicle, stored as plain data.

The generic part of the kernels (``tracking.detectors.kernel``, ``stands.visits``): a rule run
on fixes that arrive in pieces keeps, per vehicle, the fixes a later fix can still join
(``tail``) and the instant of the latest fix seen (``seen``). These helpers drop fixes already
seen, turn tails back into a pings frame with the pings contract's dtypes, and cut the next
tails. State of a vehicle: ``{"seen": <ns of its latest fix>, "tail": {<column>: [values]}}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tracking import frames as fr

State = dict[str, Any]
"""A vehicle's state: JSON-serialisable plain data."""

_FLOATS = (fr.LAT, fr.LON, fr.SPEED_KMH, fr.HEADING_DEG, fr.ACCURACY_M)
_TEXTS = (fr.VEHICLE_ID, fr.METER, fr.DRIVER_ID, fr.TRIP_REF)
CARRIED = (*fr.PING_COLUMNS, fr.TRIP_REF)
"""The pings columns a tail keeps (when present)."""


def after_seen(
    pings: pd.DataFrame,
    states: Mapping[str, State | None],
    *,
    error: type[Exception] = ValueError,
) -> pd.DataFrame:
    """Return the fixes later than their vehicle's ``seen`` (checked: columns, tz-aware times)."""
    if not len(pings):
        return pings
    for col in fr.PING_REQUIRED:
        if col not in pings.columns:
            msg = f"os pings não têm a coluna '{col}'"
            raise error(msg)
    ts = pd.to_datetime(pings[fr.TIMESTAMP])
    if ts.dt.tz is None:
        msg = "'timestamp' dos pings sem fuso horário; esperado instante com fuso"
        raise error(msg)
    seen = np.asarray(
        [(states.get(str(v)) or {}).get("seen", -(2**63)) for v in pings[fr.VEHICLE_ID]],
        dtype=np.int64,
    )
    ns = ts.dt.tz_convert("UTC").to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return pings[ns > seen]


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate pings frames (typed once), sorted by (vehicle, time), RangeIndex."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return typed(pd.DataFrame({c: [] for c in fr.PING_REQUIRED}))
    cols = [c for c in CARRIED if any(c in f.columns for f in frames)]
    frame = typed(pd.concat([f.reindex(columns=cols) for f in frames], ignore_index=True))
    return frame.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable").reset_index(drop=True)


def typed(frame: pd.DataFrame) -> pd.DataFrame:
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


def tails_frame(states: Mapping[str, State | None]) -> pd.DataFrame:
    """Return the kept fixes of every state as one frame (columns as stored)."""
    tails = [t for _, st in sorted(states.items()) if st and (t := st.get("tail"))]
    tails = [t for t in tails if t.get(fr.TIMESTAMP)]
    if not tails:
        return pd.DataFrame()
    cols = [c for c in CARRIED if any(c in t for t in tails)]
    data: dict[str, list[Any]] = {c: [] for c in cols}
    for tail in tails:
        n = len(tail[fr.TIMESTAMP])
        for c in cols:
            data[c].extend(tail.get(c) or [None] * n)
    frame = pd.DataFrame(data)
    frame[fr.TIMESTAMP] = pd.to_datetime(np.asarray(data[fr.TIMESTAMP], dtype=np.int64), utc=True)
    return frame


def plain(value: Any) -> Any:
    """Return a cell as plain JSON data (NaN, NA and NaT to None; numpy scalars to Python)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def next_states(
    frame: pd.DataFrame,
    states: Mapping[str, State | None],
    cut: Mapping[str, int],
    *,
    context: int = 0,
) -> dict[str, State]:
    """Return the new states: per vehicle of ``frame`` its fixes from ``cut[vehicle]`` on.

    ``context`` fixes before that instant are kept too, and the instant as ``"open"``. A
    vehicle absent from ``cut`` keeps nothing; ``seen`` is its latest fix (or the older one).
    """
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
        col: [plain(v) for v in frame[col].tolist()] for col in frame.columns if col != fr.TIMESTAMP
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
