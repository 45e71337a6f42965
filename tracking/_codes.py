"""Vehicle codes of a pings frame without making millions of Python strings (private).

``pd.factorize`` of a text column of millions of fixes takes most of a second each time; the
pipeline and the detectors need the codes many times. Arrow compares and dictionary-encodes
the column in C, and a frame in the contract's order (sorted by vehicle) needs no hashing at
all: its codes are the runs of equal ids.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray


def vehicle_codes(values: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.object_]]:
    """``pd.factorize(values.astype("str"), sort=True)`` as arrays, without Python strings.

    Text columns are dictionary-encoded by Arrow (several times faster on millions of fixes);
    other columns take pandas' path. Null ids get code -1, as in :func:`pandas.factorize`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(codes, uniques)``: int64 codes into ``uniques`` (str, sorted).
    """
    arr = pa.array(values, from_pandas=True) if len(values) else None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        codes, uniques = pd.factorize(values.astype("str"), sort=True)
        return codes.astype(np.int64), np.asarray(uniques, dtype=object)
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
