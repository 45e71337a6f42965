"""Vehicle codes from Arrow: the same codes as pandas' sorted factorize; the track-order test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracking.arrays import in_track_order, vehicle_codes


def _expected(values: pd.Series) -> tuple[list[int], list[str]]:
    codes, uniques = pd.factorize(values.astype("str"), sort=True)
    return codes.tolist(), list(uniques)


class TestVehicleCodes:
    @pytest.mark.parametrize("dtype", ["str", object])
    @pytest.mark.parametrize("sort", [True, False])
    def test_equals_sorted_factorize(self, dtype, sort):
        """Sorted or not, text or object: codes and ids equal pd.factorize(sort=True)."""
        rng = np.random.default_rng(7)
        values = pd.Series(rng.choice(["b", "a", "ç", "Z", "10", "2", "é", "ab"], 500), dtype=dtype)
        if sort:
            values = values.sort_values(ignore_index=True)
        codes, uniques = vehicle_codes(values)
        assert (codes.tolist(), uniques.tolist()) == _expected(values)
        assert codes.dtype == np.int64

    def test_null_ids_get_minus_one(self):
        """A null id is code -1 and not among the ids, as in pandas."""
        values = pd.Series(["b", None, "a", "b"], dtype="str")
        codes, uniques = vehicle_codes(values)
        assert codes.tolist() == [1, -1, 0, 1] and uniques.tolist() == ["a", "b"]

    @pytest.mark.parametrize(
        "values",
        [pd.Series([3, 1, 2]), pd.Series([], dtype="str"), pd.Series(["x"], dtype="str")],
        ids=["integers", "empty", "one"],
    )
    def test_other_columns_take_pandas_path(self, values):
        """Non-text, empty and one-row columns give pandas' answer."""
        codes, uniques = vehicle_codes(values)
        assert (codes.tolist(), uniques.tolist()) == _expected(values)

    def test_kept_codes_follow_the_column(self):
        """A column asked again gives the kept codes (read-only); a changed frame gives its own."""
        frame = pd.DataFrame({"vehicle_id": pd.Series(["b", "a", "b"], dtype="str")})
        first = vehicle_codes(frame["vehicle_id"])
        assert vehicle_codes(frame["vehicle_id"])[0] is first[0]
        assert not first[0].flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            first[0][0] = 5
        frame.loc[0, "vehicle_id"] = "c"
        codes, uniques = vehicle_codes(frame["vehicle_id"])
        assert (codes.tolist(), uniques.tolist()) == ([2, 0, 1], ["a", "b", "c"])
        assert first[0].tolist() == [1, 0, 1]


class TestInTrackOrder:
    @pytest.mark.parametrize(
        ("codes", "ns", "expected"),
        [
            ([], [], True),
            ([0], [5], True),
            ([0, 0, 1, 1], [1, 2, 0, 3], True),  # time goes back only at a new vehicle
            ([0, 0, 0], [1, 1, 1], True),  # equal instants keep their order
            ([0, 0, 1], [2, 1, 3], False),  # back in time within a vehicle
            ([1, 0], [0, 1], False),  # vehicles out of order
            ([-1, -1, 0], [5, 6, 0], True),  # null ids (code -1) first, as factorize sorts
        ],
    )
    def test_order(self, codes, ns, expected):
        """True exactly when sorted by (code, instant), as the two-diff test said."""
        c, t = np.array(codes, dtype=np.int64), np.array(ns, dtype=np.int64)
        assert in_track_order(c, t) is expected
        dc, dt = np.diff(c), np.diff(t)
        assert bool(np.all((dc > 0) | ((dc == 0) & (dt >= 0)))) is expected
