"""planning.io.read_trips: the trips.csv of ``pontual analyze``, checked where it is read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from planning._errors import PlanningInputError
from planning.io import read_trips

HEADER = "vehicle_id,trip_id,started_at,ended_at,pickup_lat,pickup_lon,pickup_stand_id\n"
ROW = "T1,T1-1,2024-03-04T12:05:00Z,2024-03-04T12:20:00-03:00,-30.0277,-51.2287,P1\n"


class TestReadTrips:
    def test_instants_are_read_as_utc(self, tmp_path: Path) -> None:
        path = tmp_path / "trips.csv"
        path.write_text(HEADER + ROW + "T2,T2-1,,,-30.0,-51.0,\n", encoding="utf-8")
        trips = read_trips(path)
        assert trips["started_at"].tolist()[0] == pd.Timestamp("2024-03-04T12:05:00Z")
        assert trips["ended_at"].tolist()[0] == pd.Timestamp("2024-03-04T15:20:00Z")
        assert trips["started_at"].isna().tolist() == [False, True]  # empty: unknown

    def test_a_cell_that_is_no_instant_names_its_line(self, tmp_path: Path) -> None:
        """A short record (its cells shifted left) is an error naming its line, not a
        traceback from the map that reads the column."""
        path = tmp_path / "trips.csv"
        path.write_text(HEADER + ROW + ROW + "-51.21,2500,P1\n", encoding="utf-8")
        with pytest.raises(PlanningInputError, match=r"linha 4: started_at 'P1' não é data"):
            read_trips(path)
