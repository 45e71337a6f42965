"""Array helpers over fixes shared by the rooms above tracking: vehicle codes, instants, text.

Vehicle codes of a pings frame without making millions of Python strings:

``pd.factorize`` of a text column of millions of fixes takes most of a second each time; the
pipeline and the detectors need the codes many times. Arrow compares and dictionary-encodes
the column in C, and a frame in the contract's order (sorted by vehicle) needs no hashing at
all: its codes are the runs of equal ids. The codes of the last few Arrow columns are kept (an
Arrow array never changes), so the stages and detectors that read one frame compute them once.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

NS = 1_000_000_000
_KEPT = 2
_kept: list[tuple[pa.ChunkedArray, tuple[NDArray[np.int64], NDArray[np.object_]]]] = []


def vehicle_codes(values: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.object_]]:
    """``pd.factorize(values.astype("str"), sort=True)`` as arrays, without Python strings.

    Text columns are dictionary-encoded by Arrow (several times faster on millions of fixes);
    other columns take pandas' path. Null ids get code -1, as in :func:`pandas.factorize`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(codes, uniques)``: int64 codes into ``uniques`` (str, sorted); read-only when the
        column is Arrow text (they are kept for the next call on it).
    """
    source = getattr(values.array, "_pa_array", None)
    if isinstance(source, pa.ChunkedArray) and len(values):
        for kept, known in _kept:
            if kept is source:
                return known
        made = _text_codes(source)
        if made is not None:
            for array in made:
                array.flags.writeable = False
            _kept.insert(0, (source, made))
            del _kept[_KEPT:]
            return made
    arr = pa.array(values, from_pandas=True) if len(values) else None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        codes, uniques = pd.factorize(values.astype("str"), sort=True)
        return codes.astype(np.int64), np.asarray(uniques, dtype=object)
    result = _text_codes(arr)
    assert result is not None
    return result


def epoch_ns(values: pd.Series | pd.Index) -> NDArray[np.int64]:
    """Epoch nanoseconds of instants (NaT as the smallest int64).

    A read-only view when they are nanoseconds already (``as_unit("ns")`` copies even then:
    66 MB for the 8.3M evidence fixes of a 10M run).
    """
    index = pd.DatetimeIndex(values)
    if index.unit != "ns":
        index = index.as_unit("ns")
    view = index.asi8.view()
    view.flags.writeable = False
    return view


def in_track_order(codes: NDArray[np.integer], ns: NDArray[np.int64]) -> bool:
    """Whether fixes are in (vehicle code, instant) order, as the pings contract sorts them."""
    if len(codes) < 2:
        return True
    if not bool(np.all(codes[1:] >= codes[:-1])):
        return False
    back = np.flatnonzero(ns[1:] < ns[:-1])  # time may only go back where the vehicle changes
    return bool(np.all(codes[back + 1] > codes[back]))


def iso_utc(ns: int) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of an epoch-nanosecond instant (seconds floored)."""
    return _iso_second(int(ns) // NS)


@functools.lru_cache(maxsize=1 << 16)
def _iso_second(second: int) -> str:
    # Evidence repeats instants (the vehicles passed in a queue, both ends of a visit).
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def iso_utc_many(ns: NDArray[np.int64]) -> list[str]:
    """:func:`iso_utc` of each instant, computed at once."""
    seconds = (np.asarray(ns, dtype=np.int64) // NS).astype("datetime64[s]")
    return [f"{text}Z" for text in np.datetime_as_string(seconds, unit="s").tolist()]


def _text_codes(
    arr: pa.Array | pa.ChunkedArray,
) -> tuple[NDArray[np.int64], NDArray[np.object_]] | None:
    """:func:`vehicle_codes` of Arrow text (None for another type)."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return None
    if arr.null_count == 0 and len(arr) > 1:
        head, tail = arr[:-1], arr[1:]
        if pc.all(pc.less_equal(head, tail)).as_py():  # sorted (the pings contract): runs
            change = np.asarray(pc.not_equal(head, tail).to_numpy(zero_copy_only=False), bool)
            codes = np.concatenate(([0], np.cumsum(change, dtype=np.int64)))
            starts = np.flatnonzero(np.concatenate(([True], change)))
            first = arr.take(pa.array(starts)).to_numpy(zero_copy_only=False)
            return codes, np.asarray(first, dtype=object)
    encoded = pc.dictionary_encode(arr)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.unify_dictionaries()
        dictionary = encoded.chunk(0).dictionary  # len(values) > 0: at least one chunk
        indices = pa.chunked_array([c.indices for c in encoded.chunks], type=pa.int32())
    else:
        dictionary, indices = encoded.dictionary, encoded.indices
    found = np.asarray(dictionary.to_numpy(zero_copy_only=False), dtype=object)
    order = np.argsort(found, kind="stable")
    rank = np.empty(len(found) + 1, dtype=np.int64)
    rank[order] = np.arange(len(found), dtype=np.int64)
    rank[-1] = -1  # null ids
    raw = np.asarray(pc.fill_null(indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return rank[raw], found[order]
