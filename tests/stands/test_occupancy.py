from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stands._errors import (
    DuplicateStandIdError,
    MissingColumnError,
    NaiveTimestampError,
    ThresholdError,
)
from stands.occupancy import (
    OCCUPANCY_COLUMNS,
    PRESENT_COLUMNS,
    empty_occupancy,
    occupancy,
    present_at,
)

T0 = pd.Timestamp("2024-03-01T12:00:00Z")


def _at(minutes: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


def _visits(rows: list[tuple[str, str, float, float, bool | None]]) -> pd.DataFrame:
    """Visits (vehicle, stand, arrived min, departed min, licensed) after T0."""
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r[0] for r in rows], dtype="str"),
            "stand_id": pd.Series([r[1] for r in rows], dtype="str"),
            "arrived_at": pd.Series([_at(r[2]) for r in rows], dtype="datetime64[ns, UTC]"),
            "departed_at": pd.Series([_at(r[3]) for r in rows], dtype="datetime64[ns, UTC]"),
            "queue_position": pd.Series(np.arange(1, len(rows) + 1), dtype="int64"),
            "licensed": pd.array([r[4] for r in rows], dtype="boolean"),
        }
    )


def _stands(capacities: dict[str, int | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stand_id": pd.Series(list(capacities), dtype="str"),
            "capacity": pd.array(list(capacities.values()), dtype="Int64"),
        }
    )


def _row(frame: pd.DataFrame, stand: str, minutes: float) -> pd.Series:
    hit = frame[(frame["stand_id"] == stand) & (frame["bucket_start"] == _at(minutes))]
    assert len(hit) == 1
    return hit.iloc[0]


class TestOccupancy:
    def test_counts_overflow_and_intruders(self) -> None:
        """Three vehicles together at a 2-space stand overflow it; the unlicensed one intrudes."""
        visits = _visits(
            [
                ("A", "S", 1, 20, True),
                ("B", "S", 2, 20, True),
                ("C", "S", 3, 10, False),
            ]
        )
        out = occupancy(visits, _stands({"S": 2}), bucket="15min")
        first, second = _row(out, "S", 0), _row(out, "S", 15)
        assert (first["vehicles_present"], first["intruders"]) == (3, 1)
        assert first["overflow"]
        assert first["utilisation"] == pytest.approx(1.5)
        assert (second["vehicles_present"], second["intruders"]) == (2, 0)
        assert not second["overflow"]
        assert second["utilisation"] == pytest.approx(1.0)

    def test_present_is_max_simultaneous_not_total(self) -> None:
        """Two vehicles in the same bucket one after the other count as one present."""
        visits = _visits([("A", "S", 1, 5, True), ("B", "S", 6, 10, False)])
        out = occupancy(visits, _stands({"S": 1}), bucket="15min")
        row = _row(out, "S", 0)
        assert (row["vehicles_present"], row["intruders"]) == (1, 1)
        assert not row["overflow"]

    def test_visit_spanning_buckets_counts_in_each(self) -> None:
        """A vehicle present across several buckets counts in each, including the bucket
        where its departure instant falls exactly on the bucket start (closed interval)."""
        visits = _visits([("A", "S", 5, 30, True)])
        out = occupancy(visits, _stands({"S": 1}), bucket="15min")
        assert list(out["vehicles_present"]) == [1, 1, 1]
        assert list(out["bucket_start"]) == [_at(0), _at(15), _at(30)]

    def test_departure_then_arrival_in_same_bucket(self) -> None:
        """A vehicle leaving before another arrives does not add to the maximum."""
        visits = _visits([("A", "S", 0, 16, True), ("B", "S", 17, 25, True)])
        out = occupancy(visits, _stands({"S": 1}), bucket="15min")
        assert _row(out, "S", 15)["vehicles_present"] == 1

    def test_intruders_na_without_licence_data(self) -> None:
        """Without licence data intruders is <NA>, not zero."""
        visits = _visits([("A", "S", 1, 5, None)])
        out = occupancy(visits, _stands({"S": 1}))
        assert out["intruders"].dtype == "Int64"
        assert out["intruders"].isna().all()

    def test_unknown_and_zero_capacity(self) -> None:
        """Unknown capacity gives null utilisation and no overflow; zero capacity overflows."""
        visits = _visits([("A", "S", 1, 5, True), ("B", "Z", 1, 5, True)])
        out = occupancy(visits, _stands({"S": None, "Z": 0}))
        unknown, zero = _row(out, "S", 0), _row(out, "Z", 0)
        assert pd.isna(unknown["capacity"]) and np.isnan(unknown["utilisation"])
        assert not unknown["overflow"]
        assert zero["capacity"] == 0 and np.isnan(zero["utilisation"])
        assert zero["overflow"]

    def test_dense_grid_includes_idle_stands_and_unknown_stands(self) -> None:
        """Every stand gets every bucket; a stand only seen in visits has unknown capacity."""
        visits = _visits([("A", "X", 1, 20, False)])
        out = occupancy(visits, _stands({"S": 3}), bucket="15min")
        assert list(out["stand_id"]) == ["S", "S", "X", "X"]
        assert list(out["vehicles_present"]) == [0, 0, 1, 1]
        assert list(out["capacity"].isna()) == [False, False, True, True]

    def test_without_idle_buckets(self) -> None:
        """include_idle=False keeps only buckets where someone was present."""
        visits = _visits([("A", "X", 1, 20, False), ("B", "S", 50, 52, True)])
        out = occupancy(visits, _stands({"S": 3, "T": 1}), bucket="15min", include_idle=False)
        rows = list(zip(out["stand_id"], out["bucket_start"], out["vehicles_present"], strict=True))
        assert rows == [("S", _at(45), 1), ("X", _at(0), 1), ("X", _at(15), 1)]
        assert list(out["intruders"]) == [0, 1, 1]

    def test_start_and_end_bound_the_grid(self) -> None:
        """Buckets run from the one containing start to the last starting before end."""
        visits = _visits([("A", "S", 1, 100, True)])
        out = occupancy(
            visits,
            _stands({"S": 1}),
            bucket="30min",
            start="2024-03-01T09:10:00-03:00",
            end=_at(60),
        )
        assert list(out["bucket_start"]) == [_at(0), _at(30)]
        assert list(out["vehicles_present"]) == [1, 1]

    def test_bucket_start_is_utc(self) -> None:
        """bucket_start is tz-aware UTC with ns resolution."""
        out = occupancy(_visits([("A", "S", 1, 5, True)]), _stands({"S": 1}))
        assert str(out["bucket_start"].dtype) == "datetime64[ns, UTC]"

    def test_columns_and_dtypes(self) -> None:
        """Output columns and dtypes match the empty frame."""
        out = occupancy(_visits([("A", "S", 1, 5, True)]), _stands({"S": 1}))
        assert tuple(out.columns) == OCCUPANCY_COLUMNS
        pd.testing.assert_series_equal(out.dtypes, empty_occupancy().dtypes)

    def test_empty_visits_give_empty_frame(self) -> None:
        """No visits and no bounds give an empty, correctly typed frame."""
        out = occupancy(_visits([]), _stands({"S": 1}))
        assert out.empty
        pd.testing.assert_series_equal(out.dtypes, empty_occupancy().dtypes)

    def test_empty_visits_with_bounds_give_zeros(self) -> None:
        """No visits with explicit bounds give a grid of zeros."""
        out = occupancy(_visits([]), _stands({"S": 1}), start=_at(0), end=_at(30))
        assert list(out["vehicles_present"]) == [0, 0]

    @pytest.mark.parametrize("bucket", ["0min", "-5min", "often"])
    def test_bad_bucket_raises(self, bucket: str) -> None:
        """A bucket that is not a positive interval is refused."""
        with pytest.raises(ThresholdError, match="bucket"):
            occupancy(_visits([("A", "S", 1, 5, True)]), _stands({"S": 1}), bucket=bucket)

    def test_naive_bound_raises(self) -> None:
        """A start without timezone is refused."""
        with pytest.raises(NaiveTimestampError, match="start"):
            occupancy(_visits([]), _stands({"S": 1}), start="2024-03-01 12:00")

    def test_end_before_start_raises(self) -> None:
        """An end not after the start is refused."""
        with pytest.raises(ThresholdError, match="posterior"):
            occupancy(_visits([]), _stands({"S": 1}), start=_at(30), end=_at(0))

    def test_missing_visit_column_raises(self) -> None:
        """Visits without departed_at are refused by name."""
        visits = _visits([("A", "S", 1, 5, True)]).drop(columns="departed_at")
        with pytest.raises(MissingColumnError, match="departed_at"):
            occupancy(visits, _stands({"S": 1}))

    def test_duplicate_stand_ids_raise(self) -> None:
        """Repeated stand ids in the stands frame are refused."""
        stands = pd.concat([_stands({"S": 1}), _stands({"S": 2})], ignore_index=True)
        with pytest.raises(DuplicateStandIdError, match="'S'"):
            occupancy(_visits([("A", "S", 1, 5, True)]), stands)


class TestPresentAt:
    def test_queue_order_at_instant(self) -> None:
        """Vehicles present are listed per stand in arrival order, ties by vehicle_id."""
        visits = _visits(
            [
                ("C", "S", 2, 30, True),
                ("A", "S", 5, 30, False),
                ("B", "S", 2, 30, True),
                ("D", "T", 0, 30, True),
                ("E", "S", 0, 4, True),
            ]
        )
        out = present_at(visits, _at(10))
        assert tuple(out.columns) == PRESENT_COLUMNS
        assert list(out["stand_id"]) == ["S", "S", "S", "T"]
        assert list(out["vehicle_id"]) == ["B", "C", "A", "D"]
        assert list(out["position"]) == [1, 2, 3, 1]
        assert list(out["waited_s"]) == [480.0, 480.0, 300.0, 600.0]
        assert list(out["licensed"]) == [True, True, False, True]

    @pytest.mark.parametrize(
        ("minutes", "present"),
        [(1, True), (5, True), (0.99, False), (5.01, False)],
        ids=["arrival", "departure", "before", "after"],
    )
    def test_closed_interval(self, minutes: float, present: bool) -> None:
        """A visit is present from its arrival to its departure, both included."""
        out = present_at(_visits([("A", "S", 1, 5, True)]), _at(minutes))
        assert (len(out) == 1) is present

    def test_nobody_present_gives_typed_empty_frame(self) -> None:
        """An instant with nobody present gives an empty frame with the columns."""
        out = present_at(_visits([]), _at(0))
        assert out.empty
        assert tuple(out.columns) == PRESENT_COLUMNS
        assert str(out["arrived_at"].dtype) == "datetime64[ns, UTC]"

    def test_naive_instant_raises(self) -> None:
        """A naive instant is refused."""
        with pytest.raises(NaiveTimestampError, match="'at'"):
            present_at(_visits([]), "2024-03-01 12:00")


class TestOccupancyRandomised:
    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_matches_minute_by_minute_count(self, seed: int) -> None:
        """On whole-minute visits, the bucket maximum equals a minute-by-minute count."""
        rng = np.random.default_rng(seed)
        rows: list[tuple[str, str, float, float, bool | None]] = []
        for v in range(30):
            arrived = int(rng.integers(0, 120))
            departed = arrived + int(rng.integers(0, 40))
            stand = str(rng.choice(["S", "T"]))
            rows.append((f"V{v}", stand, arrived, departed, bool(rng.integers(0, 2))))
        visits = _visits(rows)
        out = occupancy(visits, _stands({"S": 3, "T": 5}), bucket="15min")
        sparse = occupancy(visits, _stands({"S": 3, "T": 5}), bucket="15min", include_idle=False)
        busy = out[out["vehicles_present"] > 0].reset_index(drop=True)
        pd.testing.assert_frame_equal(sparse, busy)
        for row in out.itertuples():
            minutes = (row.bucket_start - T0) / pd.Timedelta(minutes=1) + np.arange(15)
            present, intruders = 0, 0
            for m in minutes:
                here = [r for r in rows if r[1] == row.stand_id and r[2] <= m <= r[3]]
                present = max(present, len(here))
                intruders = max(intruders, sum(1 for r in here if r[4] is False))
            assert (row.vehicles_present, row.intruders) == (present, intruders)
