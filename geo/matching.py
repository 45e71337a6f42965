"""Map matching: the road path a GPS track drove, as a hidden Markov model on the road graph.

The model is Newson & Krumm's ("Hidden Markov map matching through noise and sparseness", ACM
GIS 2009), on :class:`geo.roads.RoadGraph`:

thinning
    A fix within ``2·sigma_m`` of the last kept fix of its track is skipped (waits at a light or
    a stand add jitter, not distance). The last fix of a track is always kept.
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
from scipy.sparse import csr_array
from scipy.sparse.csgraph import dijkstra

from geo._errors import RoadGraphError
from geo.crs import WGS84
from geo.roads import RoadGraph

DEFAULT_SIGMA_M = 10.0
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
    kept = _thin(px, py, starts, ends, 2.0 * sigma_m)
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
        "unexplained_m",
        "mean_snap_m",
        "origin_piece",
        "origin_fraction",
        "destination_piece",
        "destination_fraction",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    for col in ("track", "n_fixes", "n_kept", "n_matched", "n_breaks", "n_jumps"):
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
) -> NDArray[np.bool_]:
    """Keep a fix when it is ``min_move_m`` from the last kept one; the ends always."""
    kept = np.zeros(len(px), dtype=bool)
    xs, ys = px.tolist(), py.tolist()
    limit = min_move_m * min_move_m
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        kept[lo] = True
        lx, ly = xs[lo], ys[lo]
        for i in range(lo + 1, hi - 1):
            dx, dy = xs[i] - lx, ys[i] - ly
            if dx * dx + dy * dy >= limit:
                kept[i] = True
                lx, ly = xs[i], ys[i]
        kept[hi - 1] = True
    return kept


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
    gc = np.hypot(np.diff(px[fixes]), np.diff(py[fixes]))
    dt_s = np.diff(t[fixes]) / 1e9
    limit = m.max_speed_ms * dt_s + 2.0 * m.radius_m
    # Routes longer than this are unexplained (a jump): Dijkstra need not look farther.
    explained_m = np.minimum(
        gc + m.jump_penalty * (m.beta_m + m.beta_share * gc),
        np.maximum(m.detour_speed_ms * dt_s, 1.25 * gc) + 4.0 * m.sigma_m,
    )
    search = float(min(max(np.minimum(limit, explained_m).max(), 1.0), MAX_SEARCH_M))
    k = len(fixes)
    owner = np.repeat(np.arange(k), sizes)  # fix (0..k-1) of each candidate
    src = np.unique(exit_node[owner < k - 1][np.isfinite(exit_cost[owner < k - 1])])
    dst = np.unique(entry_node[owner > 0][np.isfinite(entry_cost[owner > 0])])
    sub, local_of, local_nodes = _subgraph(graph, node_xy, np.union1d(src, dst), search)
    dist, pred = dijkstra(
        sub, directed=True, indices=local_of[src], limit=search, return_predecessors=True
    )
    row_of = np.full(graph.n_nodes, -1, dtype=np.int64)
    row_of[src] = np.arange(len(src))

    # Transitions of every step at once: pairs (a, b) of consecutive fixes' candidates.
    first = np.r_[0, np.cumsum(sizes)]
    na, nb = sizes[:-1], sizes[1:]
    n_pairs = na * nb
    ps = np.repeat(np.arange(k - 1), n_pairs)
    off = np.arange(int(n_pairs.sum())) - np.repeat(np.cumsum(n_pairs) - n_pairs, n_pairs)
    pa = first[ps] + off // nb[ps]
    pb = first[ps + 1] + off % nb[ps]
    route = np.full(len(pa), _INF)
    slot = np.full(len(pa), -1, dtype=np.int64)  # 2*exit + entry of the best way, -1 direct
    for i in (0, 1):
        rows = row_of[exit_node[pa, i]]
        for j in (0, 1):
            via = exit_cost[pa, i] + entry_cost[pb, j]
            ok = np.isfinite(via) & (rows >= 0)
            d = np.full(len(pa), _INF)
            d[ok] = dist[rows[ok], local_of[entry_node[pb[ok], j]]] + via[ok]
            better = d < route
            route[better] = d[better]
            slot[better] = 2 * i + j
    same = piece[pa] == piece[pb]
    delta = (frac[pb] - frac[pa]) * length[pa]
    direct = np.where(
        same & ((fwd[pa] & (delta >= 0)) | (bwd[pa] & (delta <= 0))),
        np.abs(delta),
        np.where(same & (np.abs(delta) <= m.sigma_m), np.abs(delta), _INF),
    )
    better = direct <= route
    route[better] = direct[better]
    slot[better] = -1
    beta = m.beta_m + m.beta_share * gc[ps]
    trans = -np.abs(route - gc[ps]) / beta
    trans[~(route <= limit[ps])] = -_INF
    # A move the network cannot explain (a missing street, a one-way driven against): a jump
    # at a fixed cost, counted as the great circle, rather than an invented loop.
    feasible = gc <= m.max_speed_ms * dt_s
    explained = (trans >= -m.jump_penalty) & (
        route <= np.maximum(m.detour_speed_ms * dt_s, 1.25 * gc)[ps] + 4.0 * m.sigma_m
    )
    trans = np.where(explained, trans, np.where(feasible[ps], -m.jump_penalty, -_INF))
    emission = -0.5 * (cand.dist[flat] / m.sigma_m) ** 2

    # Viterbi with breaks.
    score = emission[first[0] : first[1]].copy()
    back = np.full(len(flat), -1, dtype=np.int64)
    seg_start = [0]
    end_scores = []  # Viterbi scores at the last fix of each segment
    ptr = np.r_[0, np.cumsum(sizes[:-1] * sizes[1:])]
    for s in range(k - 1):
        na, nb = sizes[s], sizes[s + 1]
        tr = trans[ptr[s] : ptr[s + 1]].reshape(na, nb)
        total = score[:, None] + tr
        best = np.argmax(total, axis=0)
        top = total[best, np.arange(nb)]
        if np.isneginf(top).all():
            seg_start.append(s + 1)
            end_scores.append(score)
            score = emission[first[s + 1] : first[s + 2]].copy()
            continue
        back[first[s + 1] : first[s + 2]] = first[s] + best
        score = top + emission[first[s + 1] : first[s + 2]]
    # Backtrack each segment.
    chosen = np.full(k, -1, dtype=np.int64)
    end_scores.append(score)
    seg_end = [*seg_start[1:], k]
    for s0, s1, final in zip(seg_start, seg_end, end_scores, strict=True):
        last = s1 - 1
        c = first[last] + int(np.argmax(final))
        chosen[last] = c
        for f in range(last, s0, -1):
            c = int(back[c])
            chosen[f - 1] = c
    # Lengths: routes within segments, great circle across breaks.
    step_pair = ptr[:-1] + (chosen[:-1] - first[:-2]) * sizes[1:] + (chosen[1:] - first[1:-1])
    broken = np.zeros(k - 1, dtype=bool)
    broken[[s - 1 for s in seg_start[1:]]] = True
    # A break over a step faster than max_speed_kmh is a GPS jump: it adds nothing.
    jumped = ~broken & ~explained[step_pair]
    step_len = np.where(broken, np.where(feasible, gc, 0.0), np.where(jumped, gc, route[step_pair]))
    row["n_jumps"] = int(jumped.sum())
    row["unexplained_m"] = float(step_len[broken | jumped].sum())
    row["matched_m"] = float(step_len.sum())
    row["n_breaks"] = len(seg_start) - 1
    row["mean_snap_m"] = float(cand.dist[flat[chosen]].mean())
    row["origin_piece"] = int(piece[chosen[0]])
    row["origin_fraction"] = float(frac[chosen[0]])
    row["destination_piece"] = int(piece[chosen[-1]])
    row["destination_fraction"] = float(frac[chosen[-1]])
    positions = {
        int(f): (int(piece[c]), float(frac[c]), float(d))
        for f, c, d in zip(fixes, chosen, np.r_[0.0, step_len], strict=True)
    }
    path: list[tuple[int, float, float]] = []
    if with_paths:
        for s in range(k - 1):
            if broken[s] or jumped[s]:
                continue
            path.extend(
                _step_pieces(
                    graph,
                    chosen[s],
                    chosen[s + 1],
                    int(slot[step_pair[s]]),
                    piece,
                    frac,
                    exit_node,
                    entry_node,
                    pred,
                    row_of,
                    local_of,
                    local_nodes,
                )
            )
    return row, positions, path


def _subgraph(
    graph: RoadGraph, node_xy: NDArray[np.float64], nodes: NDArray[np.int64], margin_m: float
) -> tuple[Any, NDArray[np.int64], NDArray[np.int64]]:
    """Restrict the graph to the nodes within ``margin_m`` of the bounding box of ``nodes``.

    A path of length at most ``margin_m`` from one of ``nodes`` stays inside (an edge is never
    shorter than the straight line between its ends), so bounded searches give the same
    distances on it. Returns (sub-matrix, local index of each node or -1, global node ids).
    """
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
    piece: NDArray[np.int64],
    frac: NDArray[np.float64],
    exit_node: NDArray[np.int64],
    entry_node: NDArray[np.int64],
    pred: NDArray[np.int32],
    row_of: NDArray[np.int64],
    local_of: NDArray[np.int64],
    local_nodes: NDArray[np.int64],
) -> list[tuple[int, float, float]]:
    """Pieces driven from candidate ``a`` to candidate ``b`` by the way ``slot``."""
    if slot < 0:
        return [(int(piece[a]), float(frac[a]), float(frac[b]))]
    i, j = divmod(slot, 2)
    src, dst = int(exit_node[a, i]), int(entry_node[b, j])
    steps = [(int(piece[a]), float(frac[a]), 1.0 if i == 0 else 0.0)]
    p = pred[row_of[src]]
    nodes = [int(local_of[dst])]
    while nodes[-1] != local_of[src]:
        nodes.append(int(p[nodes[-1]]))
    nodes = [int(local_nodes[v]) for v in reversed(nodes)]
    m = graph.matrix
    for x, y in zip(nodes[:-1], nodes[1:], strict=True):
        lo, hi = m.indptr[x], m.indptr[x + 1]
        e = lo + int(np.searchsorted(m.indices[lo:hi], y))
        forward = bool(graph.edge_forward[e])
        steps.append(
            (int(graph.edge_piece[e]), 0.0, 1.0)
            if forward
            else (int(graph.edge_piece[e]), 1.0, 0.0)
        )
    steps.append((int(piece[b]), 0.0 if j == 0 else 1.0, float(frac[b])))
    return steps
