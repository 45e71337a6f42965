"""The one module that talks to H3: vectorised indexing, polygon fill, cell geometry, grid disks.

Every other module goes through these functions; the resolution is always a parameter.
Cells are ``uint64`` H3 indexes; ``0`` (H3's null index, never a valid cell) marks a
coordinate that could not be indexed.

Indexing uses h3ronpy (Rust, vectorised over Arrow arrays). Measured on 2M points in Porto
Alegre's bounding box at resolution 12, one core, quiet machine (see ``bench/README.md``):
h3ronpy 2.8M points/s, polars-h3 1.8–2.1M/s, h3-py 4 in a Python loop 1.6M/s, ``np.vectorize``
over h3-py 1.75M/s. All give identical cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import h3 as _h3
import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from arro3.core import Array
from h3ronpy import ContainmentMode
from h3ronpy import grid_disk as _grid_disk
from h3ronpy.h3ronpyrs import vector as _vector
from numpy.typing import ArrayLike, NDArray

from geo._errors import CoordinateArrayError, InvalidResolutionError

MIN_RESOLUTION = 0
MAX_RESOLUTION = 15
NULL_CELL = np.uint64(0)

Containment = Literal["center", "full", "overlap"]
_CONTAINMENT_MODES = {
    "center": ContainmentMode.ContainsCentroid,
    "full": ContainmentMode.ContainsBoundary,
    "overlap": ContainmentMode.Covers,
}


def check_resolution(
    resolution: int, *, low: int = MIN_RESOLUTION, high: int = MAX_RESOLUTION
) -> int:
    """Return ``resolution`` as an int, or raise if it is not an integer in ``[low, high]``.

    Parameters
    ----------
    resolution : int
        H3 resolution to check.
    low, high : int
        Inclusive bounds accepted by the caller.

    Returns
    -------
    int
        The resolution.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not an integer within the bounds.
    """
    if isinstance(resolution, bool) or not isinstance(resolution, int | np.integer):
        msg = f"resolução H3 deve ser um inteiro entre {low} e {high}; recebido {resolution!r}"
        raise InvalidResolutionError(msg)
    if not low <= int(resolution) <= high:
        msg = f"resolução H3 era {int(resolution)}; esperado um inteiro entre {low} e {high}"
        raise InvalidResolutionError(msg)
    return int(resolution)


def _as_uint64(cells: ArrayLike) -> NDArray[np.uint64]:
    return np.ascontiguousarray(cells, dtype=np.uint64).ravel()


def _cell_array(cells: NDArray[np.uint64]) -> Array:
    return Array.from_numpy(cells)


def latlng_to_cells(lat: ArrayLike, lon: ArrayLike, *, resolution: int) -> NDArray[np.uint64]:
    """Index WGS84 coordinates to H3 cells, vectorised.

    Parameters
    ----------
    lat, lon : array_like
        Latitudes and longitudes in degrees (EPSG:4326), same shape.
    resolution : int
        H3 resolution, 0–15.

    Returns
    -------
    numpy.ndarray
        ``uint64`` cells with the shape of ``lat``. Coordinates that are not finite or lie
        outside [-90, 90] × [-180, 180] get ``0`` (no cell), which matches nothing.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 0–15.
    CoordinateArrayError
        If ``lat`` and ``lon`` differ in shape or are not numeric.
    """
    res = check_resolution(resolution)
    lat_a, lon_a = coordinate_arrays(lat, lon)
    shape = lat_a.shape
    lat_f, lon_f = lat_a.ravel(), lon_a.ravel()
    if lat_f.size == 0:
        return np.zeros(shape, dtype=np.uint64)
    valid = (
        np.isfinite(lat_f) & np.isfinite(lon_f) & (np.abs(lat_f) <= 90.0) & (np.abs(lon_f) <= 180.0)
    )
    if valid.all():
        return _index(lat_f, lon_f, res).reshape(shape)
    out = np.zeros(lat_f.size, dtype=np.uint64)
    if valid.any():
        out[valid] = _index(lat_f[valid], lon_f[valid], res)
    return out.reshape(shape)


def _index(lat: NDArray[np.float64], lon: NDArray[np.float64], res: int) -> NDArray[np.uint64]:
    cells = _vector.coordinates_to_cells(
        Array.from_numpy(np.ascontiguousarray(lat)),
        Array.from_numpy(np.ascontiguousarray(lon)),
        res,
        radians=False,
    )
    return np.asarray(cells.to_numpy(), dtype=np.uint64)


def coordinate_arrays(
    lat: ArrayLike, lon: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return ``lat`` and ``lon`` as float64 arrays of the same shape, or raise.

    Parameters
    ----------
    lat, lon : array_like
        Latitudes and longitudes in degrees.

    Returns
    -------
    tuple of numpy.ndarray
        The two float64 arrays.

    Raises
    ------
    CoordinateArrayError
        If they are not numeric or their shapes differ.
    """
    try:
        lat_a = np.asarray(lat, dtype=np.float64)
        lon_a = np.asarray(lon, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"lat/lon devem ser números (graus WGS84): {exc}"
        raise CoordinateArrayError(msg) from exc
    if lat_a.shape != lon_a.shape:
        msg = f"lat e lon devem ter o mesmo formato; lat tem {lat_a.shape}, lon tem {lon_a.shape}"
        raise CoordinateArrayError(msg)
    return lat_a, lon_a


def cells_to_latlng(cells: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the centres of cells as ``(lat, lon)`` arrays in degrees.

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells (valid ones).

    Returns
    -------
    tuple of numpy.ndarray
        Latitudes and longitudes of the cell centres.
    """
    arr = _as_uint64(cells)
    if arr.size == 0:
        return np.empty(0), np.empty(0)
    batch = pa.record_batch(_vector.cells_to_coordinates(_cell_array(arr), radians=False))
    lat = batch.column("lat").to_numpy().astype(np.float64)
    lon = batch.column("lng").to_numpy().astype(np.float64)
    return lat, lon


def cell_polygons(cells: ArrayLike) -> NDArray[np.object_]:
    """Return the boundary of each cell as a shapely Polygon in lon/lat degrees.

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells (valid ones).

    Returns
    -------
    numpy.ndarray
        Object array of shapely Polygons, in the order of ``cells``. Edges are straight lines
        in lon/lat between H3's vertices (H3's own edges are gnomonic; the two differ by less
        than a millimetre at resolutions 9 and finer).
    """
    arr = _as_uint64(cells)
    if arr.size == 0:
        return np.empty(0, dtype=object)
    wkb = pa.array(_vector.cells_to_wkb_polygons(_cell_array(arr), radians=False, link_cells=False))
    return np.asarray(shapely.from_wkb(wkb.to_numpy(zero_copy_only=False)), dtype=object)


def polygons_to_cells(
    geometries: ArrayLike, *, resolution: int, containment: Containment = "overlap"
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Fill polygons (lon/lat degrees) with H3 cells.

    Parameters
    ----------
    geometries : array_like
        Shapely Polygons/MultiPolygons in EPSG:4326.
    resolution : int
        H3 resolution, 0–15.
    containment : {"center", "full", "overlap"}
        Which cells belong to a polygon: those whose centre is inside (``center``), those fully
        inside (``full``), or every cell that intersects it (``overlap``, H3's *covers*).

    Returns
    -------
    tuple of numpy.ndarray
        ``(geometry_index, cell)`` pairs: ``int64`` position of the polygon in ``geometries``
        and its ``uint64`` cell, grouped by polygon.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 0–15.
    ValueError
        If ``containment`` is not one of the modes above.
    """
    res = check_resolution(resolution)
    if containment not in _CONTAINMENT_MODES:
        msg = f"'containment' era {containment!r}; esperado um de center, full, overlap"
        raise ValueError(msg)
    geoms = np.asarray(geometries, dtype=object).ravel()
    if geoms.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    wkb = Array.from_arrow(pa.array(shapely.to_wkb(geoms).tolist(), type=pa.binary()))
    lists = pa.array(
        _vector.wkb_to_cells(
            wkb, res, containment_mode=_CONTAINMENT_MODES[containment], compact=False, flatten=False
        )
    )
    return _explode_lists(lists)


def grid_disk(cells: ArrayLike, *, k: int) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Return every cell within ``k`` steps of each input cell.

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells (valid ones).
    k : int
        Grid distance, ``k >= 0``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(origin_index, cell)`` pairs: ``int64`` position of the origin in ``cells`` and a
        ``uint64`` cell of its disk (the origin included), grouped by origin.

    Raises
    ------
    ValueError
        If ``k`` is negative.
    """
    if k < 0:
        msg = f"'k' era {k}; esperado um inteiro >= 0"
        raise ValueError(msg)
    arr = _as_uint64(cells)
    if arr.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    return _explode_lists(pa.array(_grid_disk(arr, int(k), flatten=False)))


def _explode_lists(lists: pa.Array) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Turn an Arrow list array into (list position, value) pairs."""
    offsets = lists.offsets.to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    if lists.null_count:
        counts = np.where(lists.is_null().to_numpy(zero_copy_only=False), 0, counts)
    values = lists.flatten().to_numpy().astype(np.uint64)
    index = np.repeat(np.arange(len(lists), dtype=np.int64), counts)
    return index, values


def edge_length_m(resolution: int) -> float:
    """Return H3's average hexagon edge length at ``resolution``, in metres.

    Parameters
    ----------
    resolution : int
        H3 resolution, 0–15.

    Returns
    -------
    float
        Average edge length in metres.
    """
    return float(_h3.average_hexagon_edge_length(check_resolution(resolution), unit="m"))


def cells_to_strings(cells: ArrayLike) -> NDArray[np.str_]:
    """Return cells as H3's hexadecimal strings (e.g. ``8ca8a0642d2b1ff``).

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells.

    Returns
    -------
    numpy.ndarray
        Unicode string array.
    """
    arr = _as_uint64(cells)
    return np.asarray([format(int(c), "x") for c in arr.tolist()], dtype=np.str_)


_RES_SHIFT = 52
_RES_MASK = np.uint64(0xF << _RES_SHIFT)
_DIGIT_BITS = 3


def cells_to_parent(cells: ArrayLike, *, resolution: int) -> NDArray[np.uint64]:
    """Return the parent of each cell at a coarser (or the same) resolution, by bit operations.

    An H3 cell index holds its resolution in bits 52–55 and one 3-bit digit per resolution 1–15
    below its base cell, unused digits set to 7: the parent at resolution ``p`` is the index with
    the resolution set to ``p`` and digits ``p+1``–15 set to 7 (what ``h3.cell_to_parent``
    does). Note that the parent of a point's cell is not always the cell containing the point at
    the coarser resolution (children do not tile their parent exactly; about 6% of points differ
    between resolutions 12 and 9): for that use :func:`latlng_to_parent_cells`.

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells; ``0`` (no cell) stays ``0``.
    resolution : int
        Resolution of the parents, 0–15, not finer than any of the cells.

    Returns
    -------
    numpy.ndarray
        ``uint64`` parents, with the shape of ``cells``.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 0–15, or is finer than the resolution of a cell.
    """
    res = check_resolution(resolution)
    arr = np.asarray(cells, dtype=np.uint64)
    flat = arr.ravel()
    present = flat != NULL_CELL
    if present.any():
        coarsest = int(((flat[present] & _RES_MASK) >> np.uint64(_RES_SHIFT)).min())
        if coarsest < res:
            msg = (
                f"resolução pai {res} é mais fina que a resolução {coarsest} de uma célula; "
                f"esperado no máximo {coarsest}"
            )
            raise InvalidResolutionError(msg)
    unused = np.uint64((1 << ((MAX_RESOLUTION - res) * _DIGIT_BITS)) - 1)
    parent = (flat & ~_RES_MASK) | np.uint64(res << _RES_SHIFT) | unused
    if not present.all():
        parent[~present] = NULL_CELL
    return parent.reshape(arr.shape)


_DISK_MIN_RESOLUTION = 6  # edges of a few km at most: a cell is flat in a local frame
_DISK_MAX_ABS_LAT = 80.0
_DISK_SHRINK = 0.99  # margin for the sphere's curvature over a cell, far above it at res >= 6
_HEXAGON_WKB_BYTES = 1 + 4 + 4 + 4 + 7 * 16  # polygon, one closed ring of 6 vertices


@dataclass(frozen=True)
class CellDisks:
    """A disk inside each of some H3 cells, to test cheaply that a point lies in a cell.

    Coordinates are in a frame local to each cell: ``x = (lon - lon_c) * cos(lat_c)``,
    ``y = lat - lat_c`` in degrees around the cell centre ``(lat_c, lon_c)``. ``radius2`` is
    the squared radius of a disk the cell's hexagon contains (99% of its inscribed circle), or
    -1 where no disk is kept: pentagons, cells on two icosahedron faces, across the antimeridian
    or beyond 80° of latitude, and resolutions below 6.
    """

    cells: NDArray[np.uint64]  # sorted, unique
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    cos_lat: NDArray[np.float64]
    radius2: NDArray[np.float64]

    def merged(self, other: CellDisks) -> CellDisks:
        """Return the disks of both, sorted by cell (``other``'s cells must be new)."""
        order = np.argsort(np.concatenate([self.cells, other.cells]), kind="stable")
        return CellDisks(
            *(
                np.concatenate([getattr(self, f), getattr(other, f)])[order]
                for f in ("cells", "lat", "lon", "cos_lat", "radius2")
            )
        )


NO_DISKS = CellDisks(np.zeros(0, np.uint64), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
"""An empty :class:`CellDisks`."""


def _hexagon_vertices(
    cells: NDArray[np.uint64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Return the 6 boundary vertices (lat, lon, each of shape (n, 6)) and whether each is one."""
    wkb = pa.array(
        _vector.cells_to_wkb_polygons(_cell_array(cells), radians=False, link_cells=False)
    )
    if isinstance(wkb, pa.ChunkedArray):  # pragma: no cover - one chunk in practice
        wkb = wkb.combine_chunks()
    wkb = wkb.cast(pa.large_binary())
    offsets = np.frombuffer(wkb.buffers()[1], dtype=np.int64)[
        wkb.offset : wkb.offset + len(wkb) + 1
    ]
    data = np.frombuffer(wkb.buffers()[2], dtype=np.uint8)
    is_hexagon = np.diff(offsets) == _HEXAGON_WKB_BYTES
    lat = np.zeros((len(cells), 6))
    lon = np.zeros((len(cells), 6))
    if is_hexagon.any():
        pos = offsets[:-1][is_hexagon, None] + np.arange(_HEXAGON_WKB_BYTES, dtype=np.int64)
        raw = np.ascontiguousarray(data[pos])
        head = raw[:, 1:13].copy().view("<u4")  # geometry type, rings, points
        ok = (raw[:, 0] == 1) & (head == np.array([3, 1, 7], dtype="<u4")).all(axis=1)
        ring = raw[:, 13:].copy().view("<f8").reshape(-1, 7, 2)
        lon[is_hexagon] = ring[:, :6, 0]
        lat[is_hexagon] = ring[:, :6, 1]
        is_hexagon[is_hexagon] = ok  # little-endian polygon of one ring of 6 vertices
    return lat, lon, is_hexagon


def cell_disks(cells: ArrayLike) -> CellDisks:
    """Return a disk inside each cell (see :class:`CellDisks`), computed from its boundary.

    Parameters
    ----------
    cells : array_like
        ``uint64`` H3 cells (valid ones); duplicates are dropped.

    Returns
    -------
    CellDisks
        One entry per distinct cell, sorted by cell.
    """
    arr = np.unique(_as_uint64(cells))
    n = len(arr)
    if n == 0:
        return NO_DISKS
    clat, clon = cells_to_latlng(arr)
    vlat, vlon, usable = _hexagon_vertices(arr)
    cos_lat = np.cos(np.radians(clat))
    x = (vlon - clon[:, None]) * cos_lat[:, None]
    y = vlat - clat[:, None]
    x2, y2 = np.roll(x, -1, axis=1), np.roll(y, -1, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        edge_distance = np.abs(x * y2 - x2 * y) / np.hypot(x2 - x, y2 - y)
    radius = edge_distance.min(axis=1) * _DISK_SHRINK
    resolutions = ((arr & _RES_MASK) >> np.uint64(_RES_SHIFT)).astype(np.int64)
    usable &= resolutions >= _DISK_MIN_RESOLUTION
    usable &= np.abs(clat) <= _DISK_MAX_ABS_LAT
    usable &= (np.abs(vlon - clon[:, None]) < 90.0).all(axis=1)  # not across the antimeridian
    usable &= np.isfinite(radius) & (radius > 0)
    for i in np.flatnonzero(usable):  # one face only (a Python loop over distinct cells)
        if len(_h3.get_icosahedron_faces(_h3.int_to_str(int(arr[i])))) != 1:
            usable[i] = False
    radius2 = np.where(usable, radius * radius, -1.0)
    return CellDisks(arr, clat, clon, cos_lat, radius2)


def latlng_to_parent_cells(
    lat: ArrayLike,
    lon: ArrayLike,
    cells: ArrayLike,
    *,
    resolution: int,
    disks: CellDisks = NO_DISKS,
) -> tuple[NDArray[np.uint64], CellDisks]:
    """Return the cells at ``resolution`` containing points whose finer cells are known.

    The result equals ``latlng_to_cells(lat, lon, resolution=resolution)``, at a fraction of
    its cost: a point lying in a disk inside the parent of its cell (:func:`cells_to_parent`,
    :func:`cell_disks`) is in that parent; only the other points (near the parent's edges,
    about 20% at resolutions 12 → 9) are indexed again.

    Parameters
    ----------
    lat, lon : array_like
        Latitudes and longitudes in degrees (EPSG:4326), same shape.
    cells : array_like
        Their ``uint64`` cells at a resolution not coarser than ``resolution`` (as from
        :func:`latlng_to_cells`; ``0`` where a point has no cell).
    resolution : int
        Resolution of the cells wanted, 0–15.
    disks : CellDisks
        Disks of parents already computed (from an earlier call); reused, not recomputed.

    Returns
    -------
    tuple of numpy.ndarray and CellDisks
        The cells (shape of ``lat``) and ``disks`` with those of the new parents added, to pass
        to the next call over points of the same area.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 0–15 or finer than a cell's.
    CoordinateArrayError
        If ``lat``, ``lon`` and ``cells`` differ in shape or are not numeric.
    """
    lat_a, lon_a = coordinate_arrays(lat, lon)
    cells_a = np.asarray(cells, dtype=np.uint64)
    if cells_a.shape != lat_a.shape:
        msg = (
            f"cells e lat devem ter o mesmo formato; cells tem {cells_a.shape}, "
            f"lat tem {lat_a.shape}"
        )
        raise CoordinateArrayError(msg)
    shape = lat_a.shape
    lat_f, lon_f = lat_a.ravel(), lon_a.ravel()
    parents = cells_to_parent(cells_a.ravel(), resolution=resolution)
    if check_resolution(resolution) < _DISK_MIN_RESOLUTION or parents.size == 0:
        return latlng_to_cells(lat_f, lon_f, resolution=resolution).reshape(shape), disks
    codes, distinct = pd.factorize(parents)  # hashing: cheaper than sorting every point
    distinct = np.asarray(distinct, dtype=np.uint64)
    new = np.setdiff1d(distinct[distinct != NULL_CELL], disks.cells, assume_unique=True)
    if len(new) > parents.size // 4:  # scattered points: computing disks would cost more
        return latlng_to_cells(lat_f, lon_f, resolution=resolution).reshape(shape), disks
    if len(new):
        disks = disks.merged(cell_disks(new))
    if len(disks.cells) == 0:
        return latlng_to_cells(lat_f, lon_f, resolution=resolution).reshape(shape), disks
    at_distinct = np.minimum(np.searchsorted(disks.cells, distinct), len(disks.cells) - 1)
    at = at_distinct[codes]
    found = (disks.cells[at_distinct] == distinct)[codes]
    dx = (lon_f - disks.lon[at]) * disks.cos_lat[at]
    dy = lat_f - disks.lat[at]
    inside = found & (dx * dx + dy * dy < disks.radius2[at])
    out = parents
    if not inside.all():
        redo = ~inside
        out[redo] = latlng_to_cells(lat_f[redo], lon_f[redo], resolution=resolution)
    return out.reshape(shape), disks
