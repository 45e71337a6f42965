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

from typing import Literal

import h3 as _h3
import numpy as np
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


def snap_to_cell_centres(
    lat: ArrayLike, lon: ArrayLike, *, resolution: int
) -> tuple[NDArray[np.uint64], NDArray[np.float64], NDArray[np.float64]]:
    """Replace positions by the centre of their H3 cell (coarsening before any use).

    Whatever is computed afterwards from the centres (distances, filters, counts) depends on
    the cells only: two positions in one cell give identical results.

    Parameters
    ----------
    lat, lon : array_like
        WGS84 degrees, same shape (finite, in range).
    resolution : int
        H3 resolution of the grid, 0–15.

    Returns
    -------
    tuple of numpy.ndarray
        ``(cells, lat, lon)``: the ``uint64`` cells and the latitudes and longitudes of their
        centres, flattened.

    Raises
    ------
    InvalidResolutionError
        If ``resolution`` is not in 0–15.
    CoordinateArrayError
        If a coordinate cannot be indexed (not finite or out of range).
    """
    cells = latlng_to_cells(lat, lon, resolution=resolution).ravel()
    if (cells == NULL_CELL).any():
        msg = "coordenada fora de [-90, 90] × [-180, 180] ou não finita: não há célula H3"
        raise CoordinateArrayError(msg)
    clat, clon = cells_to_latlng(cells)
    return cells, clat, clon
