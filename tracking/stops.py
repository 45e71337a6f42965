"""Stop detection: stationary episodes of a vehicle, from its fixes alone.

Definition (the same idea as MovingPandas' ``TrajectoryStopDetector``, made explicit for
irregular sampling):

stop
    A run of consecutive fixes of one vehicle whose extent stays within ``max_diameter_m`` and
    that lasts at least ``min_duration_s`` from its first to its last fix.
extent
    The diagonal of the axis-aligned bounding box of the fixes, in metres on a local
    equirectangular plane (:func:`tracking._geodesy.local_xy_m`, reference latitude = the
    vehicle's mean latitude; east–west scale error about ``tan(lat)·Δlat``, under 1 % for a
    vehicle staying within 1° of latitude of its mean). The diagonal is never smaller than the
    largest distance between two fixes of the set and at most √2 times it, so every pair of
    fixes of a stop is within ``max_diameter_m`` of each other. MovingPandas uses the diagonal of
    the minimum rotated rectangle, a bound of the same kind; both compare with a strict ``<``
    in MovingPandas and ``<=`` here.
time window
    A stop starts at the earliest fix from which the following fixes stay within the extent for
    at least ``min_duration_s`` (a time window, not a count of fixes, since sampling is
    irregular); it then grows fix by fix while the whole set stays within the extent, and ends at
    the last fix that keeps it so. The search resumes at the next fix. This is MovingPandas'
    sliding window; the stops found agree with it (see ``bench/bench_stops.py``).
gaps
    A silence longer than ``max_gap_s`` between two consecutive fixes breaks any stop: the fixes
    on each side can belong to different stops, never to the same one (the vehicle may have left
    and come back unobserved). ``max_gap_s=None`` disables this, as in MovingPandas. The default,
    600 s, lets a stop survive one missing report of a device that reports every 300 s (Traccar
    Client's default interval) while stationary.

The stop's position is the mean latitude/longitude of its fixes; its duration is
``ended_at - started_at`` (first and last fix: only what was observed).

Implementation: one pass of vectorised numpy over the sorted arrays of all vehicles, no
per-fix Python loop. Candidate runs are the runs of consecutive steps no longer than
``max_diameter_m`` (a stop cannot contain a longer step); the window test runs on a sparse table
of range minima/maxima built level by level; stops grow by doubling windows of segmented running
minima/maxima, for all candidate runs at once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError, PingFrameError
from tracking._geodesy import local_xy_m
from tracking.arrays import in_track_order, vehicle_codes

DEFAULT_MAX_GAP_S = 600.0
STOP_ID = "stop_id"
FIRST_PING = "first_ping"
LAST_PING = "last_ping"

_NS = 1_000_000_000
_EPS_S = 1e-6  # durations are compared to the microsecond


def detect_stops(
    pings: pd.DataFrame,
    *,
    max_diameter_m: float = 50.0,
    min_duration_s: float = 180.0,
    max_gap_s: float | None = DEFAULT_MAX_GAP_S,
) -> pd.DataFrame:
    """Detect the stops of every vehicle.

    Parameters
    ----------
    pings : pandas.DataFrame
        Valid fixes (:mod:`tracking.frames`): at least ``vehicle_id``, ``timestamp`` (tz-aware),
        ``lat``, ``lon``; one fix per (vehicle, timestamp). Sorted by (vehicle_id, timestamp)
        as the contract says; an unsorted frame is sorted (stably) on a copy.
    max_diameter_m : float, default 50.0
        Largest extent of a stop (see the module docstring).
    min_duration_s : float, default 180.0
        Shortest stop, from its first to its last fix.
    max_gap_s : float or None, default 600.0
        A silence longer than this between consecutive fixes breaks a stop; None: no limit.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`tracking.frames.STOP_COLUMNS` (``stop_id`` is
        ``"<vehicle_id>-<started_at as YYYYmmddTHHMMSSZ>"``), plus ``first_ping`` and
        ``last_ping``: positional indices into the sorted ``pings`` of the first and last fix.
        Sorted by (vehicle_id, started_at); a stop holds at least two fixes.

    Raises
    ------
    MissingColumnsError
        If a required column is missing.
    PingFrameError
        If timestamps are naive.
    InvalidParameterError
        If a threshold is out of range.
    """
    _check_thresholds(max_diameter_m, min_duration_s, max_gap_s)
    pings, codes, vehicles, ts_ns, _ = prepared_pings(pings)
    n = len(pings)
    if n < 2:
        return empty_stops()
    lat = pings[fr.LAT].to_numpy(dtype=np.float64)
    lon = pings[fr.LON].to_numpy(dtype=np.float64)
    first, last = stop_spans(
        codes,
        ts_ns,
        lat,
        lon,
        max_diameter_m=max_diameter_m,
        min_duration_s=min_duration_s,
        max_gap_s=max_gap_s,
    )
    return _stops_frame(vehicles, codes, ts_ns, lat, lon, first, last)


def stop_spans(
    codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    *,
    max_diameter_m: float,
    min_duration_s: float,
    max_gap_s: float | None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Find stops in sorted arrays; the numpy kernel of :func:`detect_stops`.

    Parameters
    ----------
    codes : numpy.ndarray
        Vehicle code of each fix (equal codes contiguous).
    ts_ns : numpy.ndarray
        Epoch nanoseconds, strictly increasing within a vehicle.
    lat, lon : numpy.ndarray
        Degrees.
    max_diameter_m, min_duration_s, max_gap_s
        As in :func:`detect_stops`.

    Returns
    -------
    tuple of numpy.ndarray
        Positions of the first and last fix of each stop, in order.
    """
    n = len(ts_ns)
    none = np.zeros(0, dtype=np.int64)
    if n < 2:
        return none, none
    x, y = local_xy_m(lat, lon, _group_mean(codes, lat))
    link = codes[1:] == codes[:-1]
    link &= np.hypot(np.diff(x), np.diff(y)) <= max_diameter_m
    if max_gap_s is not None:
        link &= np.diff(ts_ns) <= round(max_gap_s * _NS)

    # Candidate runs: maximal runs of linked fixes lasting at least min_duration_s.
    starts = np.flatnonzero(np.concatenate(([True], ~link)))
    ends = np.concatenate((starts[1:] - 1, [n - 1]))
    min_ns = round(min_duration_s * _NS)
    keep = (ends > starts) & (ts_ns[ends] - ts_ns[starts] >= min_ns)
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return none, none

    # Compact arrays over the candidate fixes only.
    lengths = ends - starts + 1
    run_of = np.repeat(np.arange(len(starts)), lengths)
    offset = np.cumsum(lengths) - lengths  # compact index of each run's first fix
    idx = np.arange(len(run_of)) - offset[run_of] + starts[run_of]  # positions in the input
    cx = x[idx] - x[starts][run_of]  # relative to the run's first fix: small numbers
    cy = y[idx] - y[starts][run_of]
    rel_s = (ts_ns[idx] - ts_ns[starts][run_of]).astype(np.float64) / _NS
    run_end = (offset + lengths - 1)[run_of]
    del x, y, link  # full-length arrays: free them before the window tables

    # First fix at least min_duration_s after each candidate fix, within its run.
    span_s = rel_s[offset + lengths - 1]
    base = np.cumsum(span_s + min_duration_s + 1.0) - (span_s + min_duration_s + 1.0)
    key = rel_s + base[run_of]
    del rel_s, run_of, base
    j_min = np.searchsorted(key, key + (min_duration_s - _EPS_S), side="left")
    np.maximum(j_min, np.arange(len(key)) + 1, out=j_min)
    ok = np.zeros(len(key), dtype=bool)
    del key
    pos = np.flatnonzero(j_min <= run_end)
    del run_end
    ok[pos] = _window_extent(cx, cy, pos, j_min[pos]) <= max_diameter_m

    first, last = _grow_stops(cx, cy, ok, offset, lengths, j_min, max_diameter_m)
    return idx[first], idx[last]


def prepared_pings(
    pings: pd.DataFrame,
) -> tuple[pd.DataFrame, NDArray[np.int64], pd.Index, NDArray[np.int64], NDArray[np.intp] | None]:
    """Check the columns stops and trips need; sort by (vehicle, time) if needed.

    Parameters
    ----------
    pings : pandas.DataFrame
        Fixes with ``vehicle_id``, ``timestamp`` (tz-aware), ``lat``, ``lon``.

    Returns
    -------
    pings : pandas.DataFrame
        ``pings`` itself when already sorted with a RangeIndex from 0, else a sorted copy.
    codes : numpy.ndarray
        Vehicle code of each fix (position in ``vehicles``), non-decreasing.
    vehicles : pandas.Index
        Sorted distinct vehicle ids.
    ts_ns : numpy.ndarray
        Epoch nanoseconds of each fix.
    order : numpy.ndarray or None
        Positions in the input of the returned rows; None when returned as they were.

    Raises
    ------
    MissingColumnsError
        If a required column is missing.
    PingFrameError
        If ``timestamp`` is not a tz-aware datetime column.
    """
    missing = [c for c in fr.PING_REQUIRED if c not in pings.columns]
    if missing:
        msg = f"faltam coluna(s) obrigatória(s) nos pings: {', '.join(missing)}"
        raise MissingColumnsError(msg)
    if not isinstance(pings[fr.TIMESTAMP].dtype, pd.DatetimeTZDtype):
        msg = (
            f"'timestamp' dos pings é {pings[fr.TIMESTAMP].dtype}; "
            "esperado data/hora com fuso (UTC), como sai da validação"
        )
        raise PingFrameError(msg)
    codes, uniques = vehicle_codes(pings[fr.VEHICLE_ID])  # codes in sorted-id order
    ts = timestamps_ns(pings)
    vehicles = pd.Index(uniques, dtype="str")
    in_order = in_track_order(codes, ts)
    if in_order and isinstance(pings.index, pd.RangeIndex) and pings.index.start == 0:
        return pings, codes, vehicles, ts, None
    order = np.lexsort((ts, codes))
    out = pings.iloc[order].reset_index(drop=True)
    return out, codes[order], vehicles, ts[order], order


def timestamps_ns(pings: pd.DataFrame) -> NDArray[np.int64]:
    """Epoch nanoseconds (UTC) of the ``timestamp`` column.

    Parameters
    ----------
    pings : pandas.DataFrame
        With a tz-aware ``timestamp`` column.

    Returns
    -------
    numpy.ndarray
        int64 nanoseconds.
    """
    col = pings[fr.TIMESTAMP].dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    return np.asarray(col.to_numpy(dtype="datetime64[ns]").view(np.int64))


def empty_stops() -> pd.DataFrame:
    """Return an empty, correctly typed stops frame.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`tracking.frames.STOP_COLUMNS` plus ``first_ping``/``last_ping``.
    """
    none = np.zeros(0, dtype=np.int64)
    return _stops_frame(pd.Index([], dtype="str"), none, none, np.zeros(0), np.zeros(0), none, none)


# --- private -------------------------------------------------------------------------------


def _check_thresholds(
    max_diameter_m: float, min_duration_s: float, max_gap_s: float | None
) -> None:
    if not max_diameter_m > 0:
        msg = f"'max_diameter_m' era {max_diameter_m}; esperado um número positivo"
        raise InvalidParameterError(msg)
    if not min_duration_s >= 0:
        msg = f"'min_duration_s' era {min_duration_s}; esperado um número >= 0"
        raise InvalidParameterError(msg)
    if max_gap_s is not None and not max_gap_s > 0:
        msg = f"'max_gap_s' era {max_gap_s}; esperado um número positivo ou None"
        raise InvalidParameterError(msg)


def _group_mean(codes: NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.float64]:
    sums = np.bincount(codes, weights=values)
    counts = np.bincount(codes)
    return np.asarray((sums / np.maximum(counts, 1))[codes], dtype=np.float64)


def _window_extent(
    x: NDArray[np.float64], y: NDArray[np.float64], lo: NDArray[np.intp], hi: NDArray[np.intp]
) -> NDArray[np.float64]:
    """Bounding-box diagonal of ``x[lo:hi+1], y[lo:hi+1]`` for each query (a sparse table).

    Levels are built one at a time and each query is answered at its level, so memory stays at
    two levels whatever the window lengths.
    """
    out = np.zeros(len(lo), dtype=np.float64)
    if not len(lo):
        return out
    length = hi - lo + 1
    level_of = np.floor(np.log2(length)).astype(np.int64)
    tables = [x, x, y, y]  # min x, max x, min y, max y at the current level
    width = 1
    for level in range(int(level_of.max()) + 1):
        if level:
            half = width
            width *= 2
            tables = [
                np.minimum(tables[0][:-half], tables[0][half:]),
                np.maximum(tables[1][:-half], tables[1][half:]),
                np.minimum(tables[2][:-half], tables[2][half:]),
                np.maximum(tables[3][:-half], tables[3][half:]),
            ]
        q = np.flatnonzero(level_of == level)
        if not len(q):
            continue
        a = lo[q]
        b = hi[q] - width + 1
        w = np.maximum(tables[1][a], tables[1][b]) - np.minimum(tables[0][a], tables[0][b])
        h = np.maximum(tables[3][a], tables[3][b]) - np.minimum(tables[2][a], tables[2][b])
        out[q] = np.hypot(w, h)
    return out


def _grow_stops(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    ok: NDArray[np.bool_],
    run_first: NDArray[np.int64],
    run_len: NDArray[np.int64],
    j_min: NDArray[np.int64],
    max_diameter_m: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Greedy stops in every run at once: earliest qualifying anchor, grown while it fits."""
    m = len(ok)
    # next_ok[p]: the first qualifying anchor at or after p (m if none).
    positions = np.where(ok, np.arange(m), m)
    next_ok = np.minimum.accumulate(positions[::-1])[::-1]
    next_ok = np.concatenate((next_ok, [m]))
    run_last = run_first + run_len - 1

    firsts: list[NDArray[np.int64]] = []
    lasts: list[NDArray[np.int64]] = []
    anchor = next_ok[run_first]
    limit = run_last
    active = anchor <= limit
    anchor, limit = anchor[active], limit[active]
    while len(anchor):
        reach = _reach(x, y, anchor, j_min[anchor], limit, max_diameter_m)
        firsts.append(anchor)
        lasts.append(reach)
        anchor = next_ok[np.minimum(reach + 1, m)]
        active = anchor <= limit
        anchor, limit = anchor[active], limit[active]
    if not firsts:
        none = np.zeros(0, dtype=np.int64)
        return none, none
    first = np.concatenate(firsts)
    last = np.concatenate(lasts)
    order = np.argsort(first, kind="stable")
    return first[order], last[order]


def _reach(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    anchor: NDArray[np.int64],
    known: NDArray[np.int64],
    limit: NDArray[np.int64],
    max_diameter_m: float,
) -> NDArray[np.int64]:
    """Last index ``j <= limit`` such that ``anchor..j`` fits, for each anchor (``known`` fits).

    Windows of doubling length are scanned with segmented running minima/maxima: the running
    maximum of ``value + segment·big`` restarts at each segment because every later segment
    starts above everything before it.
    """
    reach = np.asarray(known, dtype=np.int64).copy()
    todo = np.flatnonzero(reach < limit)
    width = 32
    while len(todo):
        a = anchor[todo]
        lo = reach[todo] + 1
        hi = np.minimum(limit[todo], lo + width - 1)
        lens = hi - lo + 1
        seg = np.repeat(np.arange(len(todo)), lens)
        first = np.cumsum(lens) - lens
        pts = np.arange(len(seg)) - first[seg] + lo[seg]
        # The box of anchor..reach (known to fit) seeds each segment's running box.
        (bx_min, bx_max), (by_min, by_max) = _box(x, y, a, reach[todo])
        x_min, x_max = _segmented_running_box(x[pts], seg, bx_min, bx_max)
        y_min, y_max = _segmented_running_box(y[pts], seg, by_min, by_max)
        fits = np.hypot(x_max - x_min, y_max - y_min) <= max_diameter_m
        # First misfit of each segment (or none).
        bad = np.flatnonzero(~fits)
        first_bad = np.full(len(todo), -1, dtype=np.int64)
        if len(bad):
            seg_bad = seg[bad]
            head = np.concatenate(([True], seg_bad[1:] != seg_bad[:-1]))
            first_bad[seg_bad[head]] = pts[bad[head]]
        stopped = first_bad >= 0
        reach[todo[stopped]] = first_bad[stopped] - 1
        reach[todo[~stopped]] = hi[~stopped]
        todo = todo[~stopped & (hi < limit[todo])]
        width *= 2
    return reach


def _segmented_running_box(
    v: NDArray[np.float64],
    seg: NDArray[np.int64],
    seed_min: NDArray[np.float64],
    seed_max: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return running min and max of ``v``, restarting at each segment and seeded per segment."""
    big = 2.0 * float(np.abs(v).max()) + 1.0
    shift = seg * big  # each segment starts above everything before it
    run_max = np.maximum.accumulate(v + shift) - shift
    run_min = shift - np.maximum.accumulate(shift - v)
    return np.minimum(run_min, seed_min[seg]), np.maximum(run_max, seed_max[seg])


def _box(
    x: NDArray[np.float64], y: NDArray[np.float64], lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[tuple[NDArray[np.float64], NDArray[np.float64]], tuple[NDArray[np.float64], ...]]:
    """Bounding box of ``lo..hi`` for each pair, via reduceat over the concatenated ranges."""
    lens = hi - lo + 1
    seg_first = np.cumsum(lens) - lens
    seg = np.repeat(np.arange(len(lo)), lens)
    pts = np.arange(len(seg)) - seg_first[seg] + lo[seg]
    xs, ys = x[pts], y[pts]
    return (
        (np.minimum.reduceat(xs, seg_first), np.maximum.reduceat(xs, seg_first)),
        (np.minimum.reduceat(ys, seg_first), np.maximum.reduceat(ys, seg_first)),
    )


def _stops_frame(
    vehicles: pd.Index,
    codes: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    first: NDArray[np.int64],
    last: NDArray[np.int64],
) -> pd.DataFrame:
    n_fixes = last - first + 1
    if len(first):
        seg = np.repeat(np.arange(len(first)), n_fixes)
        pts = np.arange(len(seg)) - (np.cumsum(n_fixes) - n_fixes)[seg] + first[seg]
        mean_lat = np.bincount(seg, weights=lat[pts]) / n_fixes
        mean_lon = np.bincount(seg, weights=lon[pts]) / n_fixes
    else:
        mean_lat = mean_lon = np.zeros(0)
    vehicle = pd.Series(vehicles.take(codes[first]), dtype="str")
    started = pd.Series(ts_ns[first].view("datetime64[ns]")).dt.tz_localize("UTC")
    ended = pd.Series(ts_ns[last].view("datetime64[ns]")).dt.tz_localize("UTC")
    stop_id = vehicle + "-" + started.dt.strftime("%Y%m%dT%H%M%SZ").astype("str")
    return pd.DataFrame(
        {
            fr.VEHICLE_ID: vehicle,
            STOP_ID: stop_id.astype("str"),
            "started_at": started,
            "ended_at": ended,
            "duration_s": (ts_ns[last] - ts_ns[first]).astype(np.float64) / _NS,
            fr.LAT: mean_lat.astype(np.float64),
            fr.LON: mean_lon.astype(np.float64),
            "n_fixes": n_fixes.astype(np.int64),
            FIRST_PING: first.astype(np.int64),
            LAST_PING: last.astype(np.int64),
        }
    )
