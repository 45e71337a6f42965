"""Evidence helpers: texts made at once equal the one-by-one helpers; a visit's approach."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracking.arrays import iso_utc, iso_utc_many
from tracking.detectors._evidence import approach, fix_record, fix_records


def test_iso_utc_many_equals_iso_utc():
    """Seconds floored, before and after 1970, at day and year boundaries."""
    rng = np.random.default_rng(3)
    edges = [0, -1, 1, 86_400 * 10**9 - 1, 1_704_067_199_999_999_999, -(10**9)]
    ns = np.concatenate([rng.integers(-(2**62), 2**62, 5_000), np.array(edges)])
    assert iso_utc_many(ns) == [iso_utc(int(x)) for x in ns]


def test_fix_records_equal_fix_record():
    """Unknown rows (negative) become None; coordinates plain floats."""
    rng = np.random.default_rng(4)
    ns = rng.integers(0, 2**62, 50)
    lat, lon = rng.normal(-30, 1, 50), rng.normal(-51, 1, 50)
    row = rng.integers(-3, 1000, 50)
    fixes = zip(ns.tolist(), lat, lon, row.tolist(), strict=True)
    expected = [fix_record(t, y, x, r) for t, y, x, r in fixes]
    assert fix_records(ns, lat, lon, row) == expected
    assert fix_records(ns[:0], lat[:0], lon[:0], row[:0]) == []


def test_approach_says_driving_in_beside_or_unknown():
    """The fix before the arrival: far or fast is driving in; near and slow, standing beside;
    a speed or a distance unknown (or no such column) tells neither."""
    visits = pd.DataFrame(
        {
            "approach_m": [80.0, 12.0, 12.0, 12.0, np.nan, 80.0],
            "approach_kmh": [0.0, 25.0, 2.0, np.nan, 0.0, np.nan],
        }
    )
    drove_in, beside = approach(visits, min_approach_m=30.0)
    assert drove_in.tolist() == [True, True, False, False, False, True]
    assert beside.tolist() == [False, False, True, False, False, False]
    drove_in, beside = approach(visits[[]], min_approach_m=30.0)
    assert not drove_in.any() and not beside.any()
