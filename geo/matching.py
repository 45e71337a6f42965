"""Map matching: the road path a GPS track drove, as a hidden Markov model on the road graph.

The model is Newson & Krumm's ("Hidden Markov map matching through noise and sparseness", ACM
GIS 2009), on :class:`geo.roads.RoadGraph`:

thinning
    A track's fixes are grouped into clusters: a fix within ``2·sigma_m`` of the mean of the
    current cluster joins it, else it starts a new one. One fix per cluster is kept, at the
    cluster's mean: a wait at a light or a stand adds no jitter, only its place.
candidates (hidden states)
    For each kept fix, the nearest point of each road piece within ``radius_m``, at most
    ``max_candidates`` of them (nearest first). A fix with no candidate is *unmatched* (off the
    network or a GPS outlier) and skipped.
emission
    Gaussian in the distance from the fix to the candidate, standard deviation ``sigma_m``.
transition
    ``route`` is the network distance from one candidate to the next (one-way streets honoured,
    a turn at any node allowed; a step back of at most ``sigma_m`` along the same piece is GPS
    jitter). Its log-likelihood is ``-|route - great_circle| / beta`` with ``beta = beta_m +
    beta_share · great_circle``: the longer the step, the more a route may bend. A route longer
    than ``max_speed_kmh`` allows in the time between the fixes (plus ``2·radius_m``) is
    impossible.
jumps (moves the network cannot explain)
    A route whose log-likelihood is below ``-jump_penalty``, or longer than both ``1.25 ·
    great_circle`` and what ``detour_speed_kmh`` allows in the time between the fixes (plus
    ``4·sigma_m``), is not believed: a street missing from the network, a one-way street driven
    against its direction, a turn the network forbids. The step is a *jump* at the fixed cost
    ``jump_penalty`` and counts as the straight move, never as a loop invented around the gap.
Viterbi and breaks
    The most likely sequence of candidates per track. When no transition is possible the track
    *breaks*: a new segment starts, and the gap counts as the great-circle distance between the
    two fixes (a lower bound of any drive, so a break can only shorten the matched length), or
    as nothing when that distance implies more than ``max_speed_kmh`` (a GPS jump).

``matched_m``, the length of the matched path, does not depend on the sampling rate the way a
length along the fixes does (chords of 30 s steps cut every corner). Every route is a shortest
path between consecutive candidates, so a matched length is a lower bound of what was driven
between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import ArrayLike, NDArray

from geo._errors import RoadGraphError
from geo.crs import WGS84
from geo.roads import RoadGraph

DEFAULT_SIGMA_M = 15.0
"""GPS noise (standard deviation of a fix around the road), metres."""
DEFAULT_RADIUS_M = 60.0
"""Roads farther than this from a fix are not its candidates."""
DEFAULT_MAX_CANDIDATES = 6
DEFAULT_BETA_M = 30.0
DEFAULT_BETA_SHARE = 0.25
DEFAULT_MAX_SPEED_KMH = 150.0
DEFAULT_JUMP_PENALTY = 6.0
"""Log-likelihood cost of a move the network cannot explain (counted as the straight move)."""
DEFAULT_DETOUR_SPEED_KMH = 50.0
"""A route between two fixes longer than 1.25 times the straight move is believed only if it
could be driven at this speed in the time between them (else a street is missing)."""
MAX_SEARCH_M = 20_000.0
"""Dijkstra's search radius never exceeds this (a gap of minutes between fixes)."""

_INF = np.inf


@dataclass(frozen=True)
class TrackMatches:
    """Result of :func:`match_tracks`.

    ``tracks``: one row per track (in the order of first appearance): ``track``,
    ``matched_m`` (NaN when fewer than two fixes matched), ``n_fixes``, ``n_kept`` (after
    thinning), ``n_matched`` (kept fixes with a candidate), ``n_breaks``, ``n_jumps``,
    ``unexplained_m`` (the part of ``matched_m`` counted as straight moves across breaks and
    jumps), ``mean_snap_m`` (mean distance of the matched fixes to their chosen road),
    ``origin_piece``/``origin_fraction`` and ``destination_piece``/``destination_fraction``
    (the first and last matched positions; -1 and NaN when unmatched).

    ``fix_piece``/``fix_fraction`` give, per input fix, its chosen position (-1 / NaN when the
    fix was thinned out or unmatched) and ``fix_step_m`` the matched length from the previous
    chosen fix (0 at a track's first). ``paths`` (with ``with_paths``): per track, the pieces
    driven as ``(piece, from_fraction, to_fraction)`` along each piece's drawing direction.
    """

    tracks: pd.DataFrame
    fix_piece: NDArray[np.int64]
    fix_fraction: NDArray[np.float64]
    fix_step_m: NDArray[np.float64]
    paths: list[list[tuple[int, float, float]]] | None


def match_tracks(
    graph: RoadGraph,
    track: ArrayLike,
    lon: ArrayLike,
    lat: ArrayLike,
    ts_ns: ArrayLike,
    *,
    sigma_m: float = DEFAULT_SIGMA_M,
    radius_m: float = DEFAULT_RADIUS_M,
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
    beta_m: float = DEFAULT_BETA_M,
    beta_share: float = DEFAULT_BETA_SHARE,
    max_speed_kmh: float = DEFAULT_MAX_SPEED_KMH,
    jump_penalty: float = DEFAULT_JUMP_PENALTY,
    detour_speed_kmh: float = DEFAULT_DETOUR_SPEED_KMH,
    with_paths: bool = False,
) -> TrackMatches:
    """Match GPS tracks to the road network (see the module docstring).

    Parameters
    ----------
    graph : RoadGraph
        The network (:func:`geo.roads.build_road_graph`).
    track : array_like of int
        Track of each fix; the fixes of a track are contiguous and in time order.
    lon, lat : array_like of float
        Positions in degrees (EPSG:4326).
    ts_ns : array_like of int
        Instants, nanoseconds since the epoch.
    sigma_m, radius_m, max_candidates, beta_m, beta_share, max_speed_kmh
        The model's parameters (module docstring).
    with_paths : bool, default False
        Also return each track's path as road pieces (for evidence and drawing).

    Returns
    -------
    TrackMatches

    Raises
    ------
    RoadGraphError
        If the arrays differ in length or hold non-finite values, a track is not contiguous or
        not in time order, or a parameter is out of range.
    """
    for name, value in (
        ("sigma_m", sigma_m),
        ("radius_m", radius_m),
        ("beta_m", beta_m),
        ("max_speed_kmh", max_speed_kmh),
        ("jump_penalty", jump_penalty),
        ("detour_speed_kmh", detour_speed_kmh),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            msg = f"'{name}' era {value!r}; esperado um número > 0"
            raise RoadGraphError(msg)
    if not (isinstance(beta_share, int | float) and 0 <= beta_share < math.inf):
        msg = f"'beta_share' era {beta_share!r}; esperado um número >= 0"
        raise RoadGraphError(msg)
    if (
        isinstance(max_candidates, bool)
        or not isinstance(max_candidates, int)
        or max_candidates < 1
    ):
        msg = f"'max_candidates' era {max_candidates!r}; esperado um inteiro >= 1"
        raise RoadGraphError(msg)
    trk = np.asarray(track, dtype=np.int64)
    x_lon = np.asarray(lon, dtype=np.float64)
    y_lat = np.asarray(lat, dtype=np.float64)
    t = np.asarray(ts_ns, dtype=np.int64)
    n = len(trk)
    if not (len(x_lon) == len(y_lat) == len(t) == n):
        msg = "'track', 'lon', 'lat' e 'ts_ns' devem ter o mesmo comprimento"
        raise RoadGraphError(msg)
    if n and not (np.isfinite(x_lon).all() and np.isfinite(y_lat).all()):
        msg = "posições não finitas em 'lon'/'lat'"
        raise RoadGraphError(msg)
    starts = np.flatnonzero(np.r_[True, trk[1:] != trk[:-1]]) if n else np.zeros(0, np.int64)
    if len(np.unique(trk[starts])) != len(starts):
        msg = "as posições de cada trajeto devem ser contíguas em 'track'"
        raise RoadGraphError(msg)
    ends = np.r_[starts[1:], n] if n else np.zeros(0, np.int64)
    if n > 1 and (np.diff(t)[trk[1:] == trk[:-1]] < 0).any():
        msg = "as posições de cada trajeto devem estar em ordem de tempo"
        raise RoadGraphError(msg)

    to_xy = pyproj.Transformer.from_crs(WGS84, graph.crs, always_xy=True)
    px, py = (np.asarray(a, dtype=np.float64) for a in to_xy.transform(x_lon, y_lat))
    kept, px, py = _thin(px, py, starts, ends, 2.0 * sigma_m)
    nx, ny = to_xy.transform(graph.node_lon, graph.node_lat)
    node_xy = np.column_stack((np.asarray(nx), np.asarray(ny)))
    cand = _candidates(graph, px, py, kept, radius_m, max_candidates)

    fix_piece = np.full(n, -1, dtype=np.int64)
    fix_fraction = np.full(n, np.nan)
    fix_step_m = np.full(n, np.nan)
    rows: list[dict[str, object]] = []
    paths: list[list[tuple[int, float, float]]] | None = [] if with_paths else None
    params = _Model(
        sigma_m,
        radius_m,
        beta_m,
        beta_share,
        max_speed_kmh / 3.6,
        jump_penalty,
        detour_speed_kmh / 3.6,
    )
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        row, chosen, path = _match_one(
            graph, node_xy, px, py, t, kept, cand, lo, hi, params, with_paths
        )
        row["track"] = int(trk[lo])
        rows.append(row)
        for fix, (piece, frac, step) in chosen.items():
            fix_piece[fix] = piece
            fix_fraction[fix] = frac
            fix_step_m[fix] = step
        if paths is not None:
            paths.append(path)
    columns = [
        "track",
        "matched_m",
        "n_fixes",
        "n_kept",
        "n_matched",
        "n_breaks",
        "n_jumps",
        "n_skipped",
        "unexplained_m",
        "mean_snap_m",
        "origin_piece",
        "origin_fraction",
        "destination_piece",
        "destination_fraction",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    for col in ("track", "n_fixes", "n_kept", "n_matched", "n_breaks", "n_jumps", "n_skipped"):
        frame[col] = frame[col].astype(np.int64)
    for col in ("origin_piece", "destination_piece"):
        frame[col] = frame[col].astype(np.int64)
    return TrackMatches(frame, fix_piece, fix_fraction, fix_step_m, paths)


@dataclass(frozen=True)
class _Model:
    sigma_m: float
    radius_m: float
    beta_m: float
    beta_share: float
    max_speed_ms: float
    jump_penalty: float
    detour_speed_ms: float


@dataclass(frozen=True)
class _Candidates:
    """Candidates of every kept fix: ``ptr[fix]:ptr[fix + 1]`` index the flat arrays."""

    ptr: NDArray[np.int64]
    piece: NDArray[np.int64]
    fraction: NDArray[np.float64]
    dist: NDArray[np.float64]


def _thin(
    px: NDArray[np.float64],
    py: NDArray[np.float64],
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    min_move_m: float,
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64]]:
    """Group each track's fixes into clusters of a wait; keep one fix per cluster.

    A fix joins the current cluster while it lies within ``min_move_m`` of the cluster's mean
    position; else it starts a new one. The first fix of each cluster is kept and placed at
    the cluster's mean (the jitter of a wait averages out). Returns (kept, x, y).
    """
    kept = np.zeros(len(px), dtype=bool)
    qx, qy = px.copy(), py.copy()
    xs, ys = px.tolist(), py.tolist()
    limit = min_move_m * min_move_m
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        head, sx, sy, n = lo, xs[lo], ys[lo], 1
        for i in range(lo + 1, hi + 1):
            cx, cy = sx / n, sy / n
            if i < hi:
                dx, dy = xs[i] - cx, ys[i] - cy
                if dx * dx + dy * dy < limit:
                    sx, sy, n = sx + xs[i], sy + ys[i], n + 1
                    continue
            kept[head], qx[head], qy[head] = True, cx, cy
            if i < hi:
                head, sx, sy, n = i, xs[i], ys[i], 1
    return kept, qx, qy


def _candidates(
    graph: RoadGraph,
    px: NDArray[np.float64],
    py: NDArray[np.float64],
    kept: NDArray[np.bool_],
    radius_m: float,
    max_candidates: int,
) -> _Candidates:
    n = len(px)
    idx = np.flatnonzero(kept)
    pts = shapely.points(px[idx], py[idx])
    if len(idx):
        inp, hit = graph.tree.query(pts, predicate="dwithin", distance=radius_m)
    else:
        inp = hit = np.zeros(0, dtype=np.int64)
    inp = inp.astype(np.int64)
    hit = hit.astype(np.int64)
    dist = shapely.distance(pts[inp], graph.piece_xy[hit]) if len(inp) else np.zeros(0)
    order = np.lexsort((hit, dist, inp))
    inp, hit, dist = inp[order], hit[order], dist[order]
    if len(inp):
        first = np.searchsorted(inp, inp, side="left")
        rank = np.arange(len(inp)) - first
        keep = rank < max_candidates
        inp, hit, dist = inp[keep], hit[keep], dist[keep]
    frac = (
        shapely.line_locate_point(graph.piece_xy[hit], pts[inp], normalized=True)
        if len(inp)
        else np.zeros(0)
    )
    fix = idx[inp]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(fix, minlength=n), out=ptr[1:])
    return _Candidates(ptr, hit, np.asarray(frac, dtype=np.float64), np.asarray(dist))


def _match_one(
    graph: RoadGraph,
    node_xy: NDArray[np.float64],
    px: NDArray[np.float64],
    py: NDArray[np.float64],
    t: NDArray[np.int64],
    kept: NDArray[np.bool_],
    cand: _Candidates,
    lo: int,
    hi: int,
    m: _Model,
    with_paths: bool,
) -> tuple[dict[str, object], dict[int, tuple[int, float, float]], list[tuple[int, float, float]]]:
    """Match one track's fixes ``lo:hi``: its row, each matched fix's position, its path."""
    from scipy.sparse.csgraph import dijkstra

    fixes = np.arange(lo, hi)[kept[lo:hi]]
    n_kept = len(fixes)
    fixes = fixes[cand.ptr[fixes + 1] > cand.ptr[fixes]]
    row: dict[str, object] = {
        "matched_m": np.nan,
        "n_fixes": hi - lo,
        "n_kept": n_kept,
        "n_matched": len(fixes),
        "n_breaks": 0,
        "n_jumps": 0,
        "n_skipped": 0,
        "unexplained_m": 0.0,
        "mean_snap_m": np.nan,
        "origin_piece": -1,
        "origin_fraction": np.nan,
        "destination_piece": -1,
        "destination_fraction": np.nan,
    }
    if len(fixes) < 2:
        return row, {}, []
    c_lo, c_hi = cand.ptr[fixes], cand.ptr[fixes + 1]
    sizes = c_hi - c_lo
    flat = np.concatenate(
        [np.arange(a, b) for a, b in zip(c_lo.tolist(), c_hi.tolist(), strict=True)]
    )
    piece = cand.piece[flat]
    frac = cand.fraction[flat]
    length = graph.piece_length_m[piece]
    fwd = graph.piece_forward[piece]
    bwd = graph.piece_backward[piece]
    # Two exits and two entries per candidate (along / against the drawing direction).
    exit_node = np.stack((graph.piece_v[piece], graph.piece_u[piece]), axis=1)
    exit_cost = np.stack(
        (np.where(fwd, (1.0 - frac) * length, _INF), np.where(bwd, frac * length, _INF)), axis=1
    )
    entry_node = np.stack((graph.piece_u[piece], graph.piece_v[piece]), axis=1)
    entry_cost = np.stack(
        (np.where(fwd, frac * length, _INF), np.where(bwd, (1.0 - frac) * length, _INF)), axis=1
    )
    k = len(fixes)
    xy = np.column_stack((px[fixes], py[fixes]))
    tt = t[fixes]
    first = np.r_[0, np.cumsum(sizes)]
    # Steps to the next fix (gap 1) and over one fix (gap 2: skipping a lone outlier).
    gaps = [g for g in (1, 2) if k > g]
    moves = {g: _moves(xy, tt, g, m) for g in gaps}
    if 2 in moves:
        # Only a spike may be skipped: the fix lies well off the way between its neighbours.
        detour = moves[1]["gc"][:-1] + moves[1]["gc"][1:] - moves[2]["gc"]
        moves[2]["skippable"] = detour > 4.0 * m.sigma_m
    search = float(
        min(max(max(float(mv["search"].max()) for mv in moves.values()), 1.0), MAX_SEARCH_M)
    )
    owner = np.repeat(np.arange(k), sizes)  # fix (0..k-1) of each candidate
    src = np.unique(exit_node[owner < k - 1][np.isfinite(exit_cost[owner < k - 1])])
    dst = np.unique(entry_node[owner > 0][np.isfinite(entry_cost[owner > 0])])
    sub, local_of, local_nodes = _subgraph(graph, node_xy, np.union1d(src, dst), search)
    dist, pred = dijkstra(
        sub, directed=True, indices=local_of[src], limit=search, return_predecessors=True
    )
    row_of = np.full(graph.n_nodes, -1, dtype=np.int64)
    row_of[src] = np.arange(len(src))
    ends = _Ends(piece, frac, length, fwd, bwd, exit_node, exit_cost, entry_node, entry_cost)
    trans = {
        g: _transitions(g, moves[g], sizes, first, ends, dist, row_of, local_of, m) for g in gaps
    }
    emission = -0.5 * (cand.dist[flat] / m.sigma_m) ** 2

    # Viterbi with breaks: each fix's best candidates come from the fix before it, or from the
    # one before that (the fix between skipped as an outlier, at a cost).
    scores: list[NDArray[np.float64]] = [emission[first[0] : first[1]].copy()]
    back = np.full(len(flat), -1, dtype=np.int64)
    back_gap = np.zeros(len(flat), dtype=np.int64)
    segments: list[tuple[int, int]] = []
    seg_start = 0
    for s in range(1, k):
        nb = sizes[s]
        best = np.full(nb, -_INF)
        best_from = np.full(nb, -1, dtype=np.int64)
        best_gap = np.zeros(nb, dtype=np.int64)
        for g in gaps:
            p = s - g
            if p < seg_start:
                continue
            tg = trans[g]
            tr = tg["trans"][tg["ptr"][p] : tg["ptr"][p + 1]].reshape(sizes[p], nb)
            total = scores[p][:, None] + tr
            arg = np.argmax(total, axis=0)
            top = total[arg, np.arange(nb)]
            better = top > best
            best[better] = top[better]
            best_from[better] = first[p] + arg[better]
            best_gap[better] = g
        em = emission[first[s] : first[s + 1]]
        if np.isneginf(best).all():
            segments.append((seg_start, s))
            seg_start = s
            scores.append(em.copy())
            continue
        back[first[s] : first[s + 1]] = best_from
        back_gap[first[s] : first[s + 1]] = best_gap
        scores.append(best + em)
    segments.append((seg_start, k))

    # Backtrack each segment: the chosen candidates, fix by fix (-1: skipped as an outlier).
    chosen = np.full(k, -1, dtype=np.int64)
    via_gap = np.zeros(k, dtype=np.int64)  # gap of the move into each chosen fix (0: first)
    for s0, s1 in segments:
        c = first[s1 - 1] + int(np.argmax(scores[s1 - 1]))
        f = s1 - 1
        while True:
            chosen[f] = c
            if f == s0:
                break
            g = int(back_gap[c])
            via_gap[f] = g
            c = int(back[c])
            f -= g
    kept_fix = np.flatnonzero(chosen >= 0)
    # Moves between consecutive chosen fixes: along a route, or a break between segments.
    seg_first = {s0 for s0, _ in segments}
    step_len = np.zeros(len(kept_fix))
    is_jump = np.zeros(len(kept_fix), dtype=bool)
    is_break = np.zeros(len(kept_fix), dtype=bool)
    pair_of = np.full(len(kept_fix), -1, dtype=np.int64)
    for i in range(1, len(kept_fix)):
        f_to, f_from = int(kept_fix[i]), int(kept_fix[i - 1])
        if f_to in seg_first:
            gc = float(moves[1]["gc"][f_from])
            feasible = bool(moves[1]["feasible"][f_from])
            is_break[i] = True
            # A break over a step faster than max_speed_kmh is a GPS jump: it adds nothing.
            step_len[i] = gc if feasible else 0.0
            continue
        g = int(via_gap[f_to])
        tg = trans[g]
        k_pair = int(
            tg["ptr"][f_from]
            + (chosen[f_from] - first[f_from]) * sizes[f_to]
            + (chosen[f_to] - first[f_to])
        )
        pair_of[i] = k_pair
        if tg["explained"][k_pair]:
            step_len[i] = float(tg["route"][k_pair])
        else:
            is_jump[i] = True
            step_len[i] = float(moves[g]["gc"][f_from])
    chosen_c = chosen[kept_fix]
    row["n_jumps"] = int(is_jump.sum())
    row["n_skipped"] = int(k - len(kept_fix))
    row["unexplained_m"] = float(step_len[is_break | is_jump].sum())
    row["matched_m"] = float(step_len.sum())
    row["n_breaks"] = len(segments) - 1
    row["mean_snap_m"] = float(cand.dist[flat[chosen_c]].mean())
    row["origin_piece"] = int(piece[chosen_c[0]])
    row["origin_fraction"] = float(frac[chosen_c[0]])
    row["destination_piece"] = int(piece[chosen_c[-1]])
    row["destination_fraction"] = float(frac[chosen_c[-1]])
    positions = {
        int(fixes[f]): (int(piece[c]), float(frac[c]), float(d))
        for f, c, d in zip(kept_fix.tolist(), chosen_c.tolist(), step_len.tolist(), strict=True)
    }
    path: list[tuple[int, float, float]] = []
    if with_paths:
        for i in range(1, len(kept_fix)):
            if is_break[i] or is_jump[i]:
                continue
            g = int(via_gap[kept_fix[i]])
            path.extend(
                _step_pieces(
                    graph,
                    int(chosen_c[i - 1]),
                    int(chosen_c[i]),
                    int(trans[g]["slot"][pair_of[i]]),
                    ends,
                    pred,
                    row_of,
                    local_of,
                    local_nodes,
                )
            )
    return row, positions, path


@dataclass(frozen=True)
class _Ends:
    """Per candidate: its piece and fraction, and its two exits and two entries (node, cost)."""

    piece: NDArray[np.int64]
    frac: NDArray[np.float64]
    length: NDArray[np.float64]
    fwd: NDArray[np.bool_]
    bwd: NDArray[np.bool_]
    exit_node: NDArray[np.int64]
    exit_cost: NDArray[np.float64]
    entry_node: NDArray[np.int64]
    entry_cost: NDArray[np.float64]


def _moves(
    xy: NDArray[np.float64], t: NDArray[np.int64], gap: int, m: _Model
) -> dict[str, NDArray[Any]]:
    """Straight moves from each fix to the ``gap``-th next: length, time, and route bounds."""
    gc = np.hypot(*(xy[gap:] - xy[:-gap]).T)
    dt_s = (t[gap:] - t[:-gap]) / 1e9
    limit = m.max_speed_ms * dt_s + 2.0 * m.radius_m
    # Routes longer than this are unexplained (a jump): Dijkstra need not look farther.
    believed = np.maximum(m.detour_speed_ms * dt_s, 1.25 * gc) + 4.0 * m.sigma_m
    explained_m = np.minimum(gc + m.jump_penalty * (m.beta_m + m.beta_share * gc), believed)
    return {
        "gc": gc,
        "dt_s": dt_s,
        "limit": limit,
        "believed": believed,
        "feasible": gc <= m.max_speed_ms * dt_s,
        "search": np.minimum(limit, explained_m),
    }


def _transitions(
    gap: int,
    mv: dict[str, NDArray[Any]],
    sizes: NDArray[np.int64],
    first: NDArray[np.int64],
    e: _Ends,
    dist: NDArray[np.float64],
    row_of: NDArray[np.int64],
    local_of: NDArray[np.int64],
    m: _Model,
) -> dict[str, NDArray[Any]]:
    """Every pair (a, b) of candidates of fixes ``s`` and ``s + gap``: route and log-likelihood.

    Pairs of step ``s`` are ``ptr[s]:ptr[s + 1]``, ``a`` major. A move the network cannot
    explain (a missing street, a one-way street driven against): a jump at the fixed cost
    ``jump_penalty``, counted as the great circle, rather than an invented loop. Over a skipped
    fix (``gap`` 2: a spike, off the way between its neighbours by more than ``4·sigma_m``)
    only explained routes are allowed, at the cost ``jump_penalty``.
    """
    n_steps = len(sizes) - gap
    na, nb = sizes[:n_steps], sizes[gap:]
    n_pairs = na * nb
    ps = np.repeat(np.arange(n_steps), n_pairs)
    off = np.arange(int(n_pairs.sum())) - np.repeat(np.cumsum(n_pairs) - n_pairs, n_pairs)
    pa = first[ps] + off // nb[ps]
    pb = first[ps + gap] + off % nb[ps]
    route = np.full(len(pa), _INF)
    slot = np.full(len(pa), -1, dtype=np.int64)  # 2*exit + entry of the best way, -1 direct
    for i in (0, 1):
        rows = row_of[e.exit_node[pa, i]]
        for j in (0, 1):
            via = e.exit_cost[pa, i] + e.entry_cost[pb, j]
            ok = np.isfinite(via) & (rows >= 0)
            d = np.full(len(pa), _INF)
            d[ok] = dist[rows[ok], local_of[e.entry_node[pb[ok], j]]] + via[ok]
            better = d < route
            route[better] = d[better]
            slot[better] = 2 * i + j
    same = e.piece[pa] == e.piece[pb]
    delta = (e.frac[pb] - e.frac[pa]) * e.length[pa]
    direct = np.where(
        same & ((e.fwd[pa] & (delta >= 0)) | (e.bwd[pa] & (delta <= 0))),
        np.abs(delta),
        np.where(same & (np.abs(delta) <= m.sigma_m), np.abs(delta), _INF),
    )
    better = direct <= route
    route[better] = direct[better]
    slot[better] = -1
    gc = mv["gc"][ps]
    trans = -np.abs(route - gc) / (m.beta_m + m.beta_share * gc)
    trans[~(route <= mv["limit"][ps])] = -_INF
    explained = (trans >= -m.jump_penalty) & (route <= mv["believed"][ps])
    if gap == 1:
        trans = np.where(explained, trans, np.where(mv["feasible"][ps], -m.jump_penalty, -_INF))
    else:
        ok = explained & mv["skippable"][ps]
        trans = np.where(ok, trans - m.jump_penalty, -_INF)
    return {
        "route": route,
        "slot": slot,
        "trans": trans,
        "explained": explained,
        "ptr": np.r_[0, np.cumsum(n_pairs)],
    }


def _subgraph(
    graph: RoadGraph, node_xy: NDArray[np.float64], nodes: NDArray[np.int64], margin_m: float
) -> tuple[Any, NDArray[np.int64], NDArray[np.int64]]:
    """Restrict the graph to the nodes within ``margin_m`` of the bounding box of ``nodes``.

    A path of length at most ``margin_m`` from one of ``nodes`` stays inside (an edge is never
    shorter than the straight line between its ends), so bounded searches give the same
    distances on it. Returns (sub-matrix, local index of each node or -1, global node ids).
    """
    from scipy.sparse import csr_array

    xy = node_xy[nodes]
    lo = xy.min(axis=0) - margin_m
    hi = xy.max(axis=0) + margin_m
    inside = np.all((node_xy >= lo) & (node_xy <= hi), axis=1)
    local_nodes = np.flatnonzero(inside)
    local_of = np.full(graph.n_nodes, -1, dtype=np.int64)
    local_of[local_nodes] = np.arange(len(local_nodes))
    # The rows of the local nodes, keeping the entries whose column is local too.
    m = graph.matrix
    starts, ends = m.indptr[local_nodes], m.indptr[local_nodes + 1]
    counts = ends - starts
    entry = np.arange(int(counts.sum())) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
    col = local_of[m.indices[entry]]
    keep = col >= 0
    row = np.repeat(np.arange(len(local_nodes)), counts)[keep]
    indptr = np.zeros(len(local_nodes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=len(local_nodes)), out=indptr[1:])
    sub = csr_array(
        (m.data[entry[keep]], col[keep].astype(np.int32), indptr),
        shape=(len(local_nodes), len(local_nodes)),
    )
    return sub, local_of, local_nodes


def _step_pieces(
    graph: RoadGraph,
    a: int,
    b: int,
    slot: int,
    e: _Ends,
    pred: NDArray[np.int32],
    row_of: NDArray[np.int64],
    local_of: NDArray[np.int64],
    local_nodes: NDArray[np.int64],
) -> list[tuple[int, float, float]]:
    """Pieces driven from candidate ``a`` to candidate ``b`` by the way ``slot``."""
    piece, frac = e.piece, e.frac
    if slot < 0:
        return [(int(piece[a]), float(frac[a]), float(frac[b]))]
    i, j = divmod(slot, 2)
    src, dst = int(e.exit_node[a, i]), int(e.entry_node[b, j])
    steps = [(int(piece[a]), float(frac[a]), 1.0 if i == 0 else 0.0)]
    p = pred[row_of[src]]
    nodes = [int(local_of[dst])]
    while nodes[-1] != local_of[src]:
        nodes.append(int(p[nodes[-1]]))
    nodes = [int(local_nodes[v]) for v in reversed(nodes)]
    m = graph.matrix
    for x, y in zip(nodes[:-1], nodes[1:], strict=True):
        lo, hi = m.indptr[x], m.indptr[x + 1]
        edge = lo + int(np.searchsorted(m.indices[lo:hi], y))
        forward = bool(graph.edge_forward[edge])
        steps.append(
            (int(graph.edge_piece[edge]), 0.0, 1.0)
            if forward
            else (int(graph.edge_piece[edge]), 1.0, 0.0)
        )
    steps.append((int(piece[b]), 0.0 if j == 0 else 1.0, float(frac[b])))
    return steps
