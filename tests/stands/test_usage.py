"""The planner's stand figures: over capacity, unused, boardings per space."""

from __future__ import annotations

import pandas as pd
import pytest

from stands._errors import MissingColumnError, NaiveTimestampError, ThresholdError
from stands.occupancy import occupancy
from stands.usage import (
    BOARDING_COLUMNS,
    OVER_CAPACITY_COLUMNS,
    boardings_per_stand,
    over_capacity,
    unused_stands,
)

T0 = pd.Timestamp("2024-03-04T12:00:00Z")
START, END = T0, T0 + pd.Timedelta(hours=1)


def _visits(*rows: tuple[str, str, float, float, bool]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "vehicle_id": [r[0] for r in rows],
            "stand_id": [r[1] for r in rows],
            "arrived_at": pd.to_datetime([T0 + pd.Timedelta(minutes=r[2]) for r in rows], utc=True),
            "departed_at": pd.to_datetime(
                [T0 + pd.Timedelta(minutes=r[3]) for r in rows], utc=True
            ),
            "boarded": pd.array([r[4] for r in rows], dtype="boolean"),
        }
    ).astype({"vehicle_id": "str", "stand_id": "str"})


STANDS = pd.DataFrame(
    {
        "stand_id": ["FULL", "OK", "IDLE", "UNKNOWN"],
        "capacity": pd.array([1, 3, 2, pd.NA], dtype="Int64"),
    }
)
# FULL (1 space) has two vehicles from :00 to :20; OK has two of three spaces; UNKNOWN has three
# vehicles but no known capacity; IDLE is never visited.
VISITS = _visits(
    ("A", "FULL", 0, 20, True),
    ("B", "FULL", 5, 20, False),
    ("C", "OK", 0, 50, True),
    ("D", "OK", 10, 40, True),
    ("E", "UNKNOWN", 0, 10, False),
    ("F", "UNKNOWN", 0, 10, False),
    ("G", "UNKNOWN", 0, 10, True),
)


class TestOverCapacity:
    def test_overflow_stands_with_peak_and_share(self) -> None:
        """FULL is over capacity in 2 of 4 quarter-hours, peak 2 (one over) from 12:00 UTC."""
        occ = occupancy(VISITS, STANDS, bucket="15min", start=START, end=END)
        out = over_capacity(occ)
        assert list(out.columns) == list(OVER_CAPACITY_COLUMNS)
        (row,) = out.to_dict(orient="records")
        assert (row["stand_id"], row["capacity"], row["peak_present"], row["excess"]) == (
            "FULL", 1, 2, 1,
        )  # fmt: skip
        assert (row["buckets"], row["buckets_over"], row["share_over"]) == (4, 2, 0.5)
        assert row["first_over_at"] == T0 and row["peak_at"] == T0

    def test_min_share_filters(self) -> None:
        """A threshold on the share of buckets over capacity drops the occasional ones."""
        occ = occupancy(VISITS, STANDS, bucket="15min", start=START, end=END)
        assert over_capacity(occ, min_share=0.5).empty
        with pytest.raises(ThresholdError, match="min_share"):
            over_capacity(occ, min_share=1.0)

    def test_missing_columns(self) -> None:
        """An occupancy frame without its columns is refused."""
        with pytest.raises(MissingColumnError, match="overflow"):
            over_capacity(pd.DataFrame({"stand_id": [], "bucket_start": []}))


class TestUnusedStands:
    def test_stands_without_visits_in_period(self) -> None:
        """IDLE has no visit; in the last 5 minutes only OK is used."""
        assert unused_stands(STANDS, VISITS, start=START, end=END)["stand_id"].tolist() == ["IDLE"]
        late = unused_stands(STANDS, VISITS, start=T0 + pd.Timedelta(minutes=55), end=END)
        assert late["stand_id"].tolist() == ["FULL", "IDLE", "OK", "UNKNOWN"]

    def test_bounds_checked(self) -> None:
        """Naive or inverted bounds are refused."""
        with pytest.raises(NaiveTimestampError):
            unused_stands(STANDS, VISITS, start="2024-03-04 12:00", end=END)
        with pytest.raises(ThresholdError):
            unused_stands(STANDS, VISITS, start=END, end=START)


class TestBoardingsPerStand:
    def test_boardings_against_spaces(self) -> None:
        """Boardings per space: FULL 1/1, OK 2/3, IDLE 0/2, UNKNOWN without capacity last."""
        out = boardings_per_stand(STANDS, VISITS, start=START, end=END)
        assert list(out.columns) == list(BOARDING_COLUMNS)
        assert out["stand_id"].tolist() == ["FULL", "OK", "IDLE", "UNKNOWN"]
        assert out["boardings"].tolist() == [1, 2, 0, 1]
        assert out["visits"].tolist() == [2, 2, 0, 3]
        assert out["boardings_per_space"].iloc[:3].tolist() == pytest.approx([1.0, 2 / 3, 0.0])
        assert pd.isna(out["boardings_per_space"].iloc[3])

    def test_visits_need_boarded(self) -> None:
        """Visits without ``boarded`` are refused."""
        with pytest.raises(MissingColumnError, match="boarded"):
            boardings_per_stand(STANDS, VISITS.drop(columns="boarded"), start=START, end=END)
