"""Presence at a licensed stand that the visits do not see (POA art. 49).

A visit (``stands/visits.py``) is time inside the stand's polygon. Two ways a licensee waits at
its stand leave no such visit, and an accusation of *not* being there must count them:

near dwell (``how = "perto"``)
    The queue runs beyond the polygon (open data gives a point and a radius): consecutive fixes
    each within ``reach_m`` of the polygon, less than ``min_silence_s`` apart. ``reach_m`` is
    ``illegal_stand_formation``'s ``stand_buffer_m`` (50 m): what that rule counts as the
    stand, this one counts as presence.
silent dwell (``how = "silencio"``)
    A tracker that sleeps with the ignition off leaves no fix while the car is parked: two
    consecutive fixes at least ``min_silence_s`` and at most :data:`MAX_SILENCE_S` apart, both
    within ``silent_reach_m`` of the polygon (inside it too). Where the car was in between is
    unknown; it may have been at the stand, so the silence counts for the driver. A longer
    silence is a night parked, not a wait for passengers — unless the fix after it carries a
    passenger (``meter`` ``occupied``), up to :data:`MAX_BOARDED_SILENCE_S`: a quiet stand's
    wait of hours ended by a boarding there (an independent check had a licensee whose every
    wait lasted 3 to 5 hours accused of habitual absence).

A dwell is a maximal chain of a vehicle's consecutive fixes joined by such links (it may mix
both: ``how`` is ``silencio`` when any link is a silence), for each stand the vehicle is
licensed at. It is kept when it spans at least ``min_presence_s`` and is not wholly inside the
polygon (that time is the visits'). Dwells have the visits' columns (``boarded`` False) plus
``how``, so the presence table (:func:`stands.presence.presence`) counts them as visits.

:func:`advance_near_dwells` takes fixes call by call (the live engine) or all at once (batch,
``final``): a chain still growing at the last fix of a call is kept in the state and released
when it ends, so both give the same dwells.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd
import shapely

from stands._errors import MissingColumnError, ThresholdError
from tracking.arrays import epoch_ns

STAND_REACH_M = 50.0
"""Where a stand ends: within this of its polygon is the stand, for this presence and for
``illegal_stand_formation`` (its ``stand_buffer_m``): GPS scatter and the queue's tail."""
DEFAULT_REACH_M = STAND_REACH_M
"""Fixes this close to the polygon are at the stand."""
DEFAULT_SILENT_REACH_M = 200.0
"""A silence that begins and ends this close to the polygon may have been spent at the stand."""
DEFAULT_MIN_SILENCE_S = 300.0
"""Fixes at least this far apart are a silence (a tracker's cadence is far shorter)."""
MAX_SILENCE_S = 3 * 3600.0
"""A longer silence near the stand is the car parked for the night (or the day), not a wait."""
MAX_BOARDED_SILENCE_S = 8 * 3600.0
"""Longest silence near the stand that counts when it ends with a passenger aboard: a shift."""
HOW_NEAR = "perto"
HOW_SILENT = "silencio"
DWELL_COLUMNS = (
    "vehicle_id", "stand_id", "arrived_at", "departed_at", "dwell_s", "boarded", "first_row",
    "last_row", "how",
)  # fmt: skip
_UTC = pd.DatetimeTZDtype("ns", "UTC")
_M_PER_DEG = 111_320.0
"""Metres in a degree on each stand's local plane (of latitude; of longitude times the cosine
of the stand's latitude): within 0.5 % of the ellipsoid's in Brazil, at a few hundred metres."""


def advance_near_dwells(
    states: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    *,
    licences: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    final: bool = False,
    reach_m: float = DEFAULT_REACH_M,
    silent_reach_m: float = DEFAULT_SILENT_REACH_M,
    min_silence_s: float = DEFAULT_MIN_SILENCE_S,
    min_presence_s: float = 60.0,
) -> tuple[dict[str, dict[str, Any]], pd.DataFrame]:
    """Take new fixes; return the states and the dwells that ended.

    Parameters
    ----------
    states : mapping
        ``vehicle_id → state`` from the previous call (missing or None: nothing seen yet); not
        modified. A state is plain data: ``last`` (the vehicle's last fix ``[ns, lat, lon,
        row]``) and ``open`` (per stand, the chain reaching that fix: ``[start_ns, start_row,
        silent, outside]``).
    pings : pandas.DataFrame
        New fixes: ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``, optional ``row``
        and ``meter``; a vehicle's fixes after its last one.
    licences : pandas.DataFrame
        ``vehicle_id``, ``stand_id``: the stands each vehicle is licensed at (any period).
    stands : geopandas.GeoDataFrame
        ``stand_id`` and polygons (EPSG:4326).
    final : bool, default False
        End of the input: the chains still growing end at their last fix.
    reach_m, silent_reach_m, min_silence_s, min_presence_s : float
        See the module.

    Returns
    -------
    tuple of (dict, pandas.DataFrame)
        The state of every vehicle of ``states`` or ``pings`` and the dwells that ended
        (:data:`DWELL_COLUMNS`), sorted by vehicle, stand and arrival.

    Raises
    ------
    MissingColumnError
        If a frame lacks a needed column.
    ThresholdError
        If a distance or duration is negative or not finite, or ``silent_reach_m < reach_m``.
    """
    _check(reach_m, silent_reach_m, min_silence_s, min_presence_s)
    for frame, cols, what in (
        (pings, ("vehicle_id", "timestamp", "lat", "lon"), "os pings"),
        (licences, ("vehicle_id", "stand_id"), "as licenças"),
        (stands, ("stand_id",), "os pontos"),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            msg = f"{what} não têm as colunas {', '.join(missing)}"
            raise MissingColumnError(msg)
    out: dict[str, dict[str, Any]] = {
        str(v): {"last": list(s["last"]), "open": {k: list(c) for k, c in s["open"].items()}}
        for v, s in states.items()
        if s
    }
    dwells: list[tuple[Any, ...]] = []
    fixes = _fixes(out, pings)
    if fixes is not None:
        dwells += _chains(
            out,
            fixes,
            licences,
            stands,
            final=final,
            reach_m=reach_m,
            silent_reach_m=silent_reach_m,
            min_silence_s=min_silence_s,
            min_presence_s=min_presence_s,
        )
    if final:  # chains of vehicles without new fixes end too
        for vid, st in out.items():
            end_ns, end_row = int(st["last"][0]), int(st["last"][3])
            for sid, (start_ns, start_row, silent, outside) in sorted(st["open"].items()):
                if outside and end_ns - start_ns >= min_presence_s * 1e9:
                    dwells.append((vid, sid, start_ns, end_ns, start_row, end_row, silent))
            st["open"] = {}
    return out, _dwell_frame(dwells)


def near_dwells(
    pings: pd.DataFrame,
    licences: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    reach_m: float = DEFAULT_REACH_M,
    silent_reach_m: float = DEFAULT_SILENT_REACH_M,
    min_silence_s: float = DEFAULT_MIN_SILENCE_S,
    min_presence_s: float = 60.0,
) -> pd.DataFrame:
    """Return the licensees' dwells in whole tracks (:func:`advance_near_dwells`, ``final``)."""
    _, dwells = advance_near_dwells(
        {},
        pings,
        licences=licences,
        stands=stands,
        final=True,
        reach_m=reach_m,
        silent_reach_m=silent_reach_m,
        min_silence_s=min_silence_s,
        min_presence_s=min_presence_s,
    )
    return dwells


def open_arrivals(states: Mapping[str, Mapping[str, Any] | None]) -> dict[str, int]:
    """Per vehicle, the start (ns) of its earliest chain still growing (not released)."""
    return {
        str(v): min(int(c[0]) for c in s["open"].values())
        for v, s in states.items()
        if s and s["open"]
    }


# --- private -------------------------------------------------------------------------------


def _check(*values: float) -> None:
    names = ("reach_m", "silent_reach_m", "min_silence_s", "min_presence_s")
    for name, value in zip(names, values, strict=True):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not (ok and np.isfinite(value) and value >= 0):
            msg = f"'{name}' era {value!r}; esperado um número finito >= 0"
            raise ThresholdError(msg)
    if values[1] < values[0]:
        msg = f"'silent_reach_m' ({values[1]}) menor que 'reach_m' ({values[0]})"
        raise ThresholdError(msg)


def _fixes(states: dict[str, dict[str, Any]], pings: pd.DataFrame) -> dict[str, Any] | None:
    """Sort the new fixes by vehicle and time, each vehicle's carried last fix first."""
    if not len(pings):
        return None
    codes, names = pd.factorize(pings["vehicle_id"], sort=False)
    uniques = np.asarray([str(v) for v in names], dtype=object)
    n = len(pings)
    fixes: dict[str, Any] = {
        "code": np.asarray(codes, dtype=np.int64),
        "ns": epoch_ns(pings["timestamp"]),
        "lat": pd.to_numeric(pings["lat"]).to_numpy(dtype=np.float64),
        "lon": pd.to_numeric(pings["lon"]).to_numpy(dtype=np.float64),
        "row": (
            pd.to_numeric(pings["row"]).fillna(-1).to_numpy(dtype=np.int64)
            if "row" in pings.columns
            else np.full(n, -1, dtype=np.int64)
        ),
        "carried": np.zeros(n, dtype=bool),
        "occupied": (
            pings["meter"].eq("occupied").fillna(False).to_numpy(dtype=bool)
            if "meter" in pings.columns
            else np.zeros(n, dtype=bool)
        ),
    }
    pos = {v: k for k, v in enumerate(uniques.tolist())}
    carried = [(pos[v], *s["last"]) for v, s in states.items() if v in pos]
    if carried:
        extra = {
            "code": np.array([c[0] for c in carried], dtype=np.int64),
            "ns": np.array([c[1] for c in carried], dtype=np.int64),
            "lat": np.array([c[2] for c in carried], dtype=np.float64),
            "lon": np.array([c[3] for c in carried], dtype=np.float64),
            "row": np.array([c[4] for c in carried], dtype=np.int64),
            "carried": np.ones(len(carried), dtype=bool),
            "occupied": np.zeros(len(carried), dtype=bool),  # only ever a silence's start
        }
        fixes = {k: np.concatenate([fixes[k], extra[k]]) for k in fixes}
    # by vehicle, then time; the carried fix first among equal instants
    dk, dt = np.diff(fixes["code"]), np.diff(fixes["ns"])
    if carried or not bool(np.all((dk > 0) | ((dk == 0) & (dt > 0)))):
        order = np.lexsort((~fixes["carried"], fixes["ns"], fixes["code"]))
        fixes = {k: v[order] for k, v in fixes.items()}
    fixes["uniques"] = uniques
    return fixes


def _chains(
    states: dict[str, dict[str, Any]],
    fixes: dict[str, Any],
    licences: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    final: bool,
    reach_m: float,
    silent_reach_m: float,
    min_silence_s: float,
    min_presence_s: float,
) -> list[tuple[Any, ...]]:
    """Find the chains in the fixes; update ``states`` (last fix, open chains) in place."""
    code, uniques = fixes["code"], fixes["uniques"]
    ns, lat, lon, row = fixes["ns"], fixes["lat"], fixes["lon"], fixes["row"]
    carried = fixes["carried"]
    last_of_vehicle = np.append(code[1:] != code[:-1], True)
    before: dict[str, tuple[list[Any], dict[str, list[Any]]]] = {}
    for i in np.flatnonzero(last_of_vehicle).tolist():  # the next call's carried fix
        v = str(uniques[code[i]])
        st = states.setdefault(v, {"last": None, "open": {}})
        before[v] = (st["last"], st["open"])
        st["last"] = [int(ns[i]), float(lat[i]), float(lon[i]), int(row[i])]
        st["open"] = {}

    dwells: list[tuple[Any, ...]] = []
    ended: set[tuple[str, str]] = set()  # open chains the new fixes continued

    def keep(v: str, sid: str, chain: list[Any], end_ns: int, end_row: int) -> None:
        start_ns, start_row, silent, outside = chain
        if outside and end_ns - int(start_ns) >= min_presence_s * 1e9:
            dwells.append((v, sid, int(start_ns), end_ns, int(start_row), end_row, bool(silent)))

    gi, gk, within, sids = _near_fixes(
        code, uniques, lat, lon, licences, stands, reach_m=reach_m, silent_reach_m=silent_reach_m
    )
    m = len(gi)
    if m > 1:
        step = ns[gi[1:]] - ns[gi[:-1]]
        gap = step >= min_silence_s * 1e9
        close = ~gap & (within[1:] <= reach_m) & (within[:-1] <= reach_m)
        boarded = fixes["occupied"][gi[1:]]
        quiet = (
            gap
            & ((step <= MAX_SILENCE_S * 1e9) | (boarded & (step <= MAX_BOARDED_SILENCE_S * 1e9)))
            & (within[1:] <= silent_reach_m)
            & (within[:-1] <= silent_reach_m)
        )
        same = (gk[1:] == gk[:-1]) & (gi[1:] == gi[:-1] + 1) & (code[gi[1:]] == code[gi[:-1]])
        link = same & (close | quiet)
        idx = np.arange(m - 1)
        chain_s = idx[link & np.append(True, ~link[:-1])]
        chain_e = idx[link & np.append(~link[1:], True)] + 1  # rows s..e of each chain
        n_silent = np.append(0, np.cumsum(link & ~close))
        n_out = np.append(0, np.cumsum(within > 0))
        for s, e in zip(chain_s.tolist(), chain_e.tolist(), strict=True):
            v, sid = str(uniques[code[gi[s]]]), str(sids[gk[s]])
            chain = [
                int(ns[gi[s]]),
                int(row[gi[s]]),
                bool(n_silent[e] > n_silent[s]),
                bool(n_out[e + 1] > n_out[s]),
            ]
            was = before[v][1].get(sid) if carried[gi[s]] else None
            if was is not None:  # the chain reaching the carried fix goes on
                chain = [was[0], was[1], chain[2] or bool(was[2]), chain[3] or bool(was[3])]
                ended.add((v, sid))
            end = gi[e]
            if last_of_vehicle[end] and not final:
                states[v]["open"][sid] = chain
            else:
                keep(v, sid, chain, int(ns[end]), int(row[end]))
    for v, (last, chains) in before.items():  # open chains not continued end at the carried fix
        for sid, chain in chains.items():
            if (v, sid) not in ended:
                keep(v, sid, chain, int(last[0]), int(last[3]))
    return dwells


def _near_fixes(
    code: npt.NDArray[np.int64],
    uniques: npt.NDArray[np.object_],
    lat: npt.NDArray[np.float64],
    lon: npt.NDArray[np.float64],
    licences: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    reach_m: float,
    silent_reach_m: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], Any]:
    """(fix, licensed stand) pairs within ``silent_reach_m``, by stand then fix; distances.

    Distances in metres on each stand's local plane (:func:`_local_frames`); one the rule
    need not tell apart from another (both inside, both within ``reach_m``...) may be a bound.
    """
    shapes = stands.loc[stands.geometry.notna() & ~stands.geometry.is_empty]
    sids = shapes["stand_id"].astype("str").to_numpy(dtype=object)
    geoms = shapes.geometry.to_numpy(dtype=object)
    pair_v = pd.Index(uniques).get_indexer(pd.Index(licences["vehicle_id"].astype("str")))
    pair_k = pd.Index(sids).get_indexer(pd.Index(licences["stand_id"].astype("str")))
    ok = (pair_v >= 0) & (pair_k >= 0)
    pairs = np.unique(np.stack([pair_v[ok], pair_k[ok]], axis=1), axis=0)  # by vehicle
    counts = np.bincount(pairs[:, 0], minlength=len(uniques)) if len(pairs) else None
    if counts is None:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), sids
    first = np.cumsum(counts) - counts  # each vehicle's first pair
    per_fix = counts[code]
    if counts.max() == 1:  # one stand each: no repeat
        gi = np.flatnonzero(per_fix)
        gk = pairs[first[code[gi]], 1]
    else:
        gi = np.repeat(np.arange(len(code)), per_fix)
        nth = np.arange(len(gi)) - np.repeat(np.cumsum(per_fix) - per_fix, per_fix)
        gk = pairs[first[code[gi]] + nth, 1]
    frame = _local_frames(geoms)
    cx, cy, kx = frame["cx"][gk], frame["cy"][gk], frame["kx"][gk]
    r_in, r_out = frame["r_in"][gk], frame["r_out"][gk]
    px = (lon[gi] - cx) * kx
    py = (lat[gi] - cy) * _M_PER_DEG
    box = r_out + silent_reach_m
    near = np.flatnonzero((np.abs(px) <= box) & (np.abs(py) <= box))
    gi, gk, px, py = gi[near], gk[near], px[near], py[near]
    d = np.hypot(px, py)
    # the distance to the polygon lies in [d - r_out, d - r_in] (at least 0): where both ends
    # fall on the same side of every threshold the rule reads, no exact distance is needed
    lo, hi = np.maximum(d - r_out[near], 0.0), np.maximum(d - r_in[near], 0.0)
    decided = (
        ((lo > 0) == (hi > 0)) & ((lo <= reach_m) == (hi <= reach_m))
        & ((lo <= silent_reach_m) == (hi <= silent_reach_m))
    )  # fmt: skip
    within = hi.copy()
    exact = np.flatnonzero(~decided)
    if len(exact):
        within[exact] = shapely.distance(
            shapely.points(px[exact], py[exact]), frame["local"][gk[exact]]
        )
    keep = np.flatnonzero(within <= silent_reach_m)
    gi, gk, within = gi[keep], gk[keep], within[keep]
    order = np.lexsort((gi, gk))
    return gi[order], gk[order], within[order], sids


def _local_frames(geoms: npt.NDArray[np.object_]) -> dict[str, Any]:
    """Each stand in a local plane (metres from its centroid): the polygon, its radii.

    ``r_out``: the farthest vertex; ``r_in``: the nearest edge when the centroid is inside
    (a disc of that radius is inside the polygon), else 0. One plane per stand, the same for
    every call, so live and batch measure alike.
    """
    centre = shapely.centroid(geoms)
    cx, cy = shapely.get_x(centre), shapely.get_y(centre)
    kx = _M_PER_DEG * np.cos(np.radians(cy))
    local = np.empty(len(geoms), dtype=object)
    r_in, r_out = np.zeros(len(geoms)), np.zeros(len(geoms))
    for j, g in enumerate(geoms):
        shift = np.array([cx[j], cy[j]])
        scale = np.array([kx[j], _M_PER_DEG])
        local[j] = shapely.transform(g, lambda xy, a=shift, b=scale: (xy - a) * b)
        xy = shapely.get_coordinates(local[j])
        r_out[j] = float(np.max(np.hypot(xy[:, 0], xy[:, 1]))) if len(xy) else 0.0
        if shapely.contains_xy(local[j], 0.0, 0.0):
            r_in[j] = float(shapely.distance(shapely.boundary(local[j]), shapely.Point(0, 0)))
    return {"cx": cx, "cy": cy, "kx": kx, "local": local, "r_in": r_in, "r_out": r_out}


def _dwell_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    rows = sorted(rows, key=lambda r: (r[0], r[1], r[2]))
    arrived = np.array([r[2] for r in rows], dtype=np.int64)
    departed = np.array([r[3] for r in rows], dtype=np.int64)

    def utc(values: npt.NDArray[np.int64]) -> pd.Series:
        return pd.Series(pd.to_datetime(values, unit="ns", utc=True)).astype(_UTC)

    def rows_of(k: int) -> pd.arrays.IntegerArray:
        values = np.array([r[k] for r in rows], dtype=np.int64)
        return pd.arrays.IntegerArray(np.maximum(values, 0), values < 0)

    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in rows], dtype="str"),
            "stand_id": pd.Series([r[1] for r in rows], dtype="str"),
            "arrived_at": utc(arrived),
            "departed_at": utc(departed),
            "dwell_s": (departed - arrived) / 1e9,
            "boarded": np.zeros(len(rows), dtype=bool),
            "first_row": rows_of(4),
            "last_row": rows_of(5),
            "how": pd.Series([HOW_SILENT if r[6] else HOW_NEAR for r in rows], dtype="str"),
        }
    )
