"""Vehicle codes from Arrow: the same codes as pandas' sorted factorize."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracking._codes import vehicle_codes


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
