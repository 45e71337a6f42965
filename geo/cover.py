"""Exact ping → stand matching through an H3 cover of the stand polygons.

A :class:`StandCover` lists, for every H3 cell that touches a stand, the stands it touches and
whether the cell lies wholly inside each (*interior*) or crosses its edge (*boundary*). A ping
is indexed to its cell, the cell is looked up in the sorted cover (``np.searchsorted``); interior
entries are matches outright, boundary entries are settled by exact point-in-polygon
(``shapely.contains_xy``). The result equals ``shapely.contains_xy`` against every stand, ping
for ping: a ping **on** a stand's edge is *not* in the stand (shapely's ``contains``: the
boundary is excluded), and a ping with no valid coordinates is in no stand.

Exactness rests on two margins of :data:`MARGIN_DEG` (≈ 10 cm) in lon/lat: a cell enters the
cover if its polygon intersects the stand grown by the margin, and counts as interior only if
its polygon lies inside the stand shrunk by the margin. The margin absorbs the difference
between H3's own cell edges (gnomonic, great-circle arcs) and the straight lon/lat edges of the
cell polygons, which is below 1 mm at resolution 9 and finer; hence resolutions 7–15 only.
"""

from __future__ import annotations

from dataclasses import dataclass

import geopandas as gpd
import numpy as np
import pyproj
import shapely
from numpy.typing import ArrayLike, NDArray

from geo import h3 as gh3
from geo._errors import CoordinateArrayError, CRSError, InvalidResolutionError, StandCoverError
from geo.crs import WGS84, haversine_m, require_geographic

DEFAULT_RESOLUTION = 12
"""Default cover resolution (edge ≈ 10 m). Measured on 2M pings (``bench/README.md``): within
noise of the fastest for 30 m and 50–150 m stands with 15 % of pings inside, the fastest with
90 % inside, and builds 4–5× faster than resolution 13."""
MIN_COVER_RESOLUTION = 7
MARGIN_DEG = 1e-6
"""Safety margin in degrees (≈ 0.1 m) around cell/stand edges; see the module docstring."""

_EMPTY_I64: NDArray[np.int64] = np.empty(0, dtype=np.int64)
_FILTER_BITS = 20
GRID_STEP_DEG = 1 / 2048
"""Step of the coarse lat/lon grid that spares H3 indexing to pings far from every stand
(about 54 m of latitude)."""
_GRID_BITS = 22
"""A ping's cell is first looked up in a 2**20-slot presence table keyed by its finest digits,
so that only the few pings that may be in the cover pay for the binary search."""


@dataclass(frozen=True, eq=False)
class StandCover:
    """H3 cells touching stand polygons, as sorted arrays (CSR layout).

    Attributes
    ----------
    resolution : int
        H3 resolution of the cells.
    cells : numpy.ndarray
        ``uint64``, sorted, unique: every cell that intersects at least one stand.
    offsets : numpy.ndarray
        ``int64``, ``len(cells) + 1``: the entries of ``cells[i]`` are
        ``offsets[i]:offsets[i + 1]``.
    entry_stand : numpy.ndarray
        ``int64`` stand index (row position in the stands frame) per entry, ascending
        within a cell.
    entry_interior : numpy.ndarray
        ``bool`` per entry: the cell lies wholly inside that stand (``True``) or crosses its
        edge (``False``). One cell may be interior to one stand and boundary to another.
    geometries : numpy.ndarray
        Object array of the stand polygons (EPSG:4326, prepared), by stand index.
    stand_ids : numpy.ndarray
        Object array of ``stand_id`` by stand index.
    anchor_lat, anchor_lon : numpy.ndarray
        ``float64`` representative point of each stand: the centroid of its polygon in lon/lat
        (the original point for a buffered point stand), used to pick the nearest stand.
    presence : numpy.ndarray
        ``bool``, ``2**20`` slots: ``presence[cell_slot(c)]`` is True for every cover cell
        (a pre-filter; false positives are settled by the binary search).
    grid : numpy.ndarray
        ``bool``, ``2**22`` slots of a hashed lat/lon grid of step :data:`GRID_STEP_DEG`: True
        for every grid square touching a stand's bounds. Pings in unmarked squares cannot be in
        a stand and are not indexed (hash collisions only cost an unneeded H3 lookup).
    """

    resolution: int
    cells: NDArray[np.uint64]
    offsets: NDArray[np.int64]
    entry_stand: NDArray[np.int64]
    entry_interior: NDArray[np.bool_]
    geometries: NDArray[np.object_]
    stand_ids: NDArray[np.object_]
    anchor_lat: NDArray[np.float64]
    anchor_lon: NDArray[np.float64]
    presence: NDArray[np.bool_]
    grid: NDArray[np.bool_]

    @property
    def n_stands(self) -> int:
        """Number of stands covered."""
        return int(self.geometries.shape[0])


def build_stand_cover(
    stands: gpd.GeoDataFrame, *, resolution: int = DEFAULT_RESOLUTION
) -> StandCover:
    """Cover stand polygons with H3 cells, classifying each (cell, stand) as interior or boundary.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (``stands/frames.py``): EPSG:4326, one valid Polygon/MultiPolygon per row,
        a ``stand_id`` column (optional here: row positions are used without it). Stand index
        ``i`` in the cover and in the matches is row position ``i``.
    resolution : int
        H3 resolution, 7–15 (default :data:`DEFAULT_RESOLUTION`).

    Returns
    -------
    StandCover
        The cover; an empty frame gives an empty cover.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 7–15.
    NotGeographicCRSError
        If the frame's CRS is missing or projected.
    CRSError
        If the CRS is geographic but not EPSG:4326.
    StandCoverError
        If a geometry is null, empty, invalid or not a Polygon/MultiPolygon.
    """
    res = gh3.check_resolution(resolution, low=MIN_COVER_RESOLUTION)
    geoms = _checked_geometries(stands)
    n = geoms.shape[0]
    if "stand_id" in stands.columns:
        ids = np.asarray(stands["stand_id"].to_numpy(), dtype=object)
    else:
        ids = np.arange(n).astype(object)
    if n == 0:
        return StandCover(
            resolution=res,
            cells=np.empty(0, dtype=np.uint64),
            offsets=np.zeros(1, dtype=np.int64),
            entry_stand=_EMPTY_I64,
            entry_interior=np.empty(0, dtype=bool),
            geometries=geoms,
            stand_ids=ids,
            anchor_lat=np.empty(0),
            anchor_lon=np.empty(0),
            presence=np.zeros(1 << _FILTER_BITS, dtype=bool),
            grid=np.zeros(1 << _GRID_BITS, dtype=bool),
        )

    outer = shapely.buffer(geoms, MARGIN_DEG)
    inner = shapely.buffer(geoms, -MARGIN_DEG)
    shapely.prepare(outer)
    shapely.prepare(inner)

    # Candidates: H3's "covers" fill of the grown polygon, plus one ring for safety; then the
    # exact test on the cell polygons decides.
    fill_stand, fill_cell = gh3.polygons_to_cells(outer, resolution=res, containment="overlap")
    origin, ring_cell = gh3.grid_disk(fill_cell, k=1)
    cand_stand, cand_cell = _unique_pairs(fill_stand[origin], ring_cell)
    ucells, inverse = np.unique(cand_cell, return_inverse=True)
    polys = gh3.cell_polygons(ucells)[inverse]
    touches = shapely.intersects(outer[cand_stand], polys)
    interior = shapely.contains(inner[cand_stand], polys) & ~shapely.is_empty(inner[cand_stand])

    stand_e = cand_stand[touches]
    cell_e = cand_cell[touches]
    interior_e = interior[touches]
    order = np.lexsort((stand_e, cell_e))
    stand_e, cell_e, interior_e = stand_e[order], cell_e[order], interior_e[order]
    cells, starts = np.unique(cell_e, return_index=True)
    offsets = np.append(starts, cell_e.shape[0]).astype(np.int64)

    shapely.prepare(geoms)
    centroids = shapely.centroid(geoms)
    presence = np.zeros(1 << _FILTER_BITS, dtype=bool)
    presence[_cell_slots(cells, res)] = True
    return StandCover(
        resolution=res,
        cells=cells.astype(np.uint64),
        offsets=offsets,
        entry_stand=stand_e,
        entry_interior=interior_e.astype(bool),
        geometries=geoms,
        stand_ids=ids,
        anchor_lat=shapely.get_y(centroids).astype(np.float64),
        anchor_lon=shapely.get_x(centroids).astype(np.float64),
        presence=presence,
        grid=_grid_of(shapely.bounds(outer)),
    )


def _grid_keys(lat: NDArray[np.float64], lon: NDArray[np.float64]) -> NDArray[np.intp]:
    """Hashed slot of the coarse grid square of each point (NaN maps to some slot: harmless)."""
    with np.errstate(invalid="ignore"):
        iy = np.floor(lat / GRID_STEP_DEG).astype(np.int64).view(np.uint64)
        ix = np.floor(lon / GRID_STEP_DEG).astype(np.int64).view(np.uint64)
    mixed = (iy * np.uint64(0x9E3779B97F4A7C15)) ^ (ix * np.uint64(0xC2B2AE3D27D4EB4F))
    return (mixed >> np.uint64(64 - _GRID_BITS)).astype(np.intp)


def _grid_of(bounds: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Mark every grid square that a stand's bounding box (minx, miny, maxx, maxy) touches."""
    grid = np.zeros(1 << _GRID_BITS, dtype=bool)
    lo = np.floor(bounds[:, [1, 0]] / GRID_STEP_DEG).astype(np.int64)
    hi = np.floor(bounds[:, [3, 2]] / GRID_STEP_DEG).astype(np.int64)
    for (y0, x0), (y1, x1) in zip(lo, hi, strict=True):
        iy, ix = np.meshgrid(np.arange(y0, y1 + 1), np.arange(x0, x1 + 1), indexing="ij")
        centre_lat = (iy.ravel() + 0.5) * GRID_STEP_DEG
        centre_lon = (ix.ravel() + 0.5) * GRID_STEP_DEG
        grid[_grid_keys(centre_lat, centre_lon)] = True
    return grid


def _unique_pairs(
    stand: NDArray[np.int64], cell: NDArray[np.uint64]
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Distinct (stand, cell) pairs, sorted by stand then cell."""
    order = np.lexsort((cell, stand))
    stand, cell = stand[order], cell[order]
    first = np.ones(stand.size, dtype=bool)
    first[1:] = (stand[1:] != stand[:-1]) | (cell[1:] != cell[:-1])
    return stand[first], cell[first]


def _cell_slots(cells: NDArray[np.uint64], resolution: int) -> NDArray[np.intp]:
    """Slot of each cell in the presence table: its finest digits (unused digits shifted out)."""
    shift = np.uint64(3 * (gh3.MAX_RESOLUTION - resolution))
    return ((cells >> shift) & np.uint64((1 << _FILTER_BITS) - 1)).astype(np.intp)


def _checked_geometries(stands: gpd.GeoDataFrame) -> NDArray[np.object_]:
    require_geographic(stands, what="pontos de táxi")
    if not pyproj.CRS(stands.crs).equals(WGS84):
        msg = (
            f"CRS dos pontos de táxi era {stands.crs.to_string()}; esperado EPSG:4326 "
            "(converta com to_crs(4326))"
        )
        raise CRSError(msg)
    geoms = np.asarray(stands.geometry.values, dtype=object)
    ids = stands["stand_id"].to_numpy() if "stand_id" in stands.columns else np.arange(len(geoms))
    bad_kind = ~np.isin(shapely.get_type_id(geoms), (3, 6))  # Polygon, MultiPolygon; None is -1
    problems = [
        ("sem geometria", shapely.is_missing(geoms)),
        ("geometria vazia", ~shapely.is_missing(geoms) & shapely.is_empty(geoms)),
        ("geometria não poligonal", bad_kind & ~shapely.is_missing(geoms)),
        ("polígono inválido", ~bad_kind & ~shapely.is_valid(geoms)),
    ]
    for label, mask in problems:
        if mask.any():
            where = np.flatnonzero(mask)
            shown = ", ".join(repr(ids[i]) for i in where[:5])
            more = f" e mais {where.size - 5}" if where.size > 5 else ""
            msg = f"{label} em {where.size} ponto(s) de táxi (stand_id {shown}{more})"
            raise StandCoverError(msg)
    return geoms


def match_stands(
    lat: ArrayLike,
    lon: ArrayLike,
    cover: StandCover,
    *,
    cells: ArrayLike | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Return every (ping, stand) pair where the stand's polygon contains the ping.

    Parameters
    ----------
    lat, lon : array_like
        1-D ping coordinates in degrees (EPSG:4326).
    cover : StandCover
        From :func:`build_stand_cover`.
    cells : array_like, optional
        The pings' H3 cells at ``cover.resolution`` if already computed (skips indexing).

    Returns
    -------
    tuple of numpy.ndarray
        ``(ping_index, stand_index)``, both ``int64``, sorted by ping then stand; one pair per
        containing stand (stands may overlap). Equal to ``shapely.contains_xy`` against each
        stand: pings on an edge and pings with invalid coordinates match nothing.

    Raises
    ------
    CoordinateArrayError
        If ``lat``/``lon`` (or ``cells``) are not 1-D arrays of the same length.
    InvalidResolutionError
        If ``cells`` are not at ``cover.resolution``.
    """
    lat_a, lon_a = gh3.coordinate_arrays(lat, lon)
    if lat_a.ndim != 1:
        msg = f"lat/lon devem ser vetores 1-D; formato recebido {lat_a.shape}"
        raise CoordinateArrayError(msg)
    if lat_a.size == 0 or cover.cells.size == 0:
        return _EMPTY_I64, _EMPTY_I64
    candidates: NDArray[np.intp] | None = None
    if cells is None:
        # Only pings in grid squares near a stand are indexed.
        near = np.flatnonzero(cover.grid[_grid_keys(lat_a, lon_a)])
        ping_cells = np.zeros(lat_a.shape, dtype=np.uint64)
        ping_cells[near] = gh3.latlng_to_cells(
            lat_a[near], lon_a[near], resolution=cover.resolution
        )
    else:
        ping_cells = np.asarray(cells, dtype=np.uint64)
        if ping_cells.shape != lat_a.shape:
            msg = f"'cells' tem formato {ping_cells.shape}; esperado {lat_a.shape} (um por ping)"
            raise CoordinateArrayError(msg)
        res = (ping_cells[ping_cells != 0] >> np.uint64(52)) & np.uint64(0xF)
        if res.size and (res.min() != cover.resolution or res.max() != cover.resolution):
            msg = (
                f"'cells' estão na resolução {int(res.min())}–{int(res.max())}; "
                f"a cobertura usa a resolução {cover.resolution}"
            )
            raise InvalidResolutionError(msg)

    maybe = np.flatnonzero(cover.presence[_cell_slots(ping_cells, cover.resolution)])
    pos = np.searchsorted(cover.cells, ping_cells[maybe])
    np.minimum(pos, cover.cells.size - 1, out=pos)
    found = cover.cells[pos] == ping_cells[maybe]
    hits = maybe[found] if candidates is None else candidates[maybe[found]]
    if hits.size == 0:
        return _EMPTY_I64, _EMPTY_I64
    hit_pos = pos[found]
    start = cover.offsets[hit_pos]
    count = cover.offsets[hit_pos + 1] - start
    total = int(count.sum())
    ping = np.repeat(hits.astype(np.int64), count)
    # entry = start of its cell + rank within the cell
    entry = np.arange(total, dtype=np.int64) + np.repeat(start - (np.cumsum(count) - count), count)
    stand = cover.entry_stand[entry]
    keep = cover.entry_interior[entry]
    edge = np.flatnonzero(~keep)
    if edge.size:
        p = ping[edge]
        keep[edge] = shapely.contains_xy(cover.geometries[stand[edge]], lon_a[p], lat_a[p])
    return ping[keep], stand[keep]


def nearest_containing_stand(
    lat: ArrayLike,
    lon: ArrayLike,
    cover: StandCover,
    *,
    pairs: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
) -> NDArray[np.int64]:
    """Assign each ping to one containing stand: the one whose anchor point is nearest.

    Parameters
    ----------
    lat, lon : array_like
        1-D ping coordinates in degrees (EPSG:4326).
    cover : StandCover
        From :func:`build_stand_cover`.
    pairs : tuple of numpy.ndarray, optional
        The result of :func:`match_stands` for these pings, if already computed.

    Returns
    -------
    numpy.ndarray
        ``int64`` stand index per ping, ``-1`` where no stand contains the ping. Among
        overlapping stands the nearest anchor (``cover.anchor_lat/lon``, haversine) wins; on an
        exact tie of distances, the lowest stand index (earliest row of the stands frame).
    """
    lat_a, lon_a = gh3.coordinate_arrays(lat, lon)
    ping, stand = match_stands(lat_a, lon_a, cover) if pairs is None else pairs
    out = np.full(lat_a.shape[0] if lat_a.ndim else 0, -1, dtype=np.int64)
    if ping.size == 0:
        return out
    multi = np.flatnonzero(np.diff(ping) == 0)
    if multi.size == 0:  # each ping in at most one stand: no distances needed
        out[ping] = stand
        return out
    dist = haversine_m(lat_a[ping], lon_a[ping], cover.anchor_lat[stand], cover.anchor_lon[stand])
    order = np.lexsort((stand, dist, ping))
    first = np.ones(order.size, dtype=bool)
    first[1:] = ping[order][1:] != ping[order][:-1]
    chosen = order[first]
    out[ping[chosen]] = stand[chosen]
    return out
