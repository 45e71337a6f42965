"""Porto ECML/PKDD reader: polyline expansion, validation of points, labels, the real sample."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tracking._errors import MissingColumnsError
from tracking.porto import read_porto_trips

DATA = Path(__file__).resolve().parents[2] / "data" / "porto" / "derived" / "trips_combined.csv"
NOW = pd.Timestamp("2024-03-04T12:00:00Z")
HEADER = (
    "TRIP_ID,CALL_TYPE,ORIGIN_CALL,ORIGIN_STAND,TAXI_ID,TIMESTAMP,DAY_TYPE,MISSING_DATA,POLYLINE\n"
)


def _porto(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "train.csv"
    path.write_text(HEADER + "".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


class TestReadPortoTrips:
    def test_expands_polyline_lon_first_every_15_s(self, tmp_path: Path) -> None:
        """[lon, lat] pairs become fixes 15 s apart from TIMESTAMP, all with meter occupied."""
        path = _porto(
            tmp_path,
            '"T1","B","","15.0","20000589","1372636858","A","False",'
            '"[[-8.618643,41.141412],[-8.618499,41.141376],[-8.620326,41.14251]]"',
        )
        pings, rejected, labels = read_porto_trips(path, now=NOW)
        assert rejected.empty
        assert pings["lat"].tolist() == [41.141412, 41.141376, 41.14251]
        assert pings["lon"].tolist() == [-8.618643, -8.618499, -8.620326]
        assert (pings["timestamp"].diff().dt.total_seconds().iloc[1:] == 15).all()
        assert pings["timestamp"].iloc[0] == pd.Timestamp(1372636858, unit="s", tz="UTC")
        assert set(pings["meter"]) == {"occupied"}
        assert pings["row"].tolist() == [1, 1, 1]
        assert labels.to_dict("records") == [
            {
                "trip_ref": "T1",
                "vehicle_id": "20000589",
                "call_type": "B",
                "origin_stand": "15",
                "started_at": pd.Timestamp(1372636858, unit="s", tz="UTC"),
                "n_points": 3,
            }
        ]

    def test_bad_points_rejected_with_trip_row_and_point_index(self, tmp_path: Path) -> None:
        """A bad point is rejected with the trip's CSV row and its index in the polyline."""
        path = _porto(
            tmp_path,
            'T1,C,,,7,1372636858,A,False,"[[-8.6,41.1]]"',
            'T2,C,,,8,1372636858,A,False,"[[-8.6,41.1],[-8.6,95.0],[0,0],[-8.6, 41.1]]"',
        )
        pings, rejected, _ = read_porto_trips(path, now=NOW)
        assert pings[["vehicle_id", "row"]].values.tolist() == [["7", 1], ["8", 2], ["8", 2]]
        assert rejected[["row", "point_index", "reason", "trip_ref", "lat"]].to_dict("records") == [
            {
                "row": 2,
                "point_index": "1",
                "reason": "out_of_range_coordinates",
                "trip_ref": "T2",
                "lat": "95.0",
            },
            {"row": 2, "point_index": "2", "reason": "null_island", "trip_ref": "T2", "lat": "0.0"},
        ]

    def test_whole_trip_rejections_and_empty_polylines(self, tmp_path: Path) -> None:
        """A malformed polyline or timestamp rejects the trip once; [] is a trip without fixes."""
        path = _porto(
            tmp_path,
            'T1,A,123,,7,1372636858,A,False,"[[-8.6,41.1],[-8.6]]"',
            'T2,A,,,7,yesterday,A,False,"[[-8.6,41.1]]"',
            "T3,C,,NA,7,1372636900,A,False,[]",
            'T4,C,,,7,1372637000,A,False,"[ [-8.59, 41.13] , [-8.5901, 41.1301] ]"',
        )
        pings, rejected, labels = read_porto_trips(path, now=NOW)
        assert rejected[["row", "reason", "point_index"]].to_dict("records") == [
            {"row": 1, "reason": "invalid_polyline", "point_index": ""},
            {"row": 2, "reason": "unparseable_timestamp", "point_index": ""},
        ]
        assert pings["row"].tolist() == [4, 4]
        assert labels["n_points"].tolist() == [0, 0, 0, 2]
        assert labels["origin_stand"].tolist() == [None, None, None, None]
        assert labels["started_at"].isna().tolist() == [False, True, False, False]

    def test_overlapping_trips_on_the_same_grid_conflict(self, tmp_path: Path) -> None:
        """Two trips of one taxi sharing instants: the later trip's fixes are conflicting."""
        path = _porto(
            tmp_path,
            'A1,C,,,7,1372636800,A,False,"[[-8.60,41.10],[-8.60,41.101],[-8.60,41.102]]"',
            'A2,C,,,7,1372636815,A,False,"[[-8.61,41.10],[-8.61,41.101]]"',
        )
        pings, rejected, _ = read_porto_trips(path, now=NOW)
        assert pings["timestamp"].dt.second.tolist() == [0, 15, 30]
        assert pings["lon"].tolist() == [-8.60, -8.60, -8.60]
        assert rejected[["row", "point_index", "reason"]].to_dict("records") == [
            {"row": 2, "point_index": "0", "reason": "conflicting_duplicate"},
            {"row": 2, "point_index": "1", "reason": "conflicting_duplicate"},
        ]

    def test_missing_column(self, tmp_path: Path) -> None:
        """A file without POLYLINE fails naming it."""
        path = tmp_path / "t.csv"
        path.write_text("TRIP_ID,CALL_TYPE,ORIGIN_STAND,TAXI_ID,TIMESTAMP\n1,A,,7,1\n")
        with pytest.raises(MissingColumnsError, match="POLYLINE"):
            read_porto_trips(path, now=NOW)


class TestReadPortoTripsRealData:
    @pytest.fixture(scope="class")
    def porto(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        return read_porto_trips(DATA, now=NOW)

    def test_counts(self, porto: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
        """2,104 trips and 101,383 points (PROVENANCE.md); every point valid, none lost."""
        pings, rejected, labels = porto
        assert len(labels) == 2104
        assert labels["n_points"].sum() == 101_383
        assert len(pings) + len(rejected) == 101_383
        assert labels["vehicle_id"].nunique() == 415
        assert labels["origin_stand"].notna().sum() == 917
        assert (labels["n_points"] == 0).sum() == 3

    def test_rejected_reasons(self, porto: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]) -> None:
        """No point is rejected: the two overlapping trip pairs never share an instant."""
        _, rejected, labels = porto
        assert rejected["reason"].value_counts().to_dict() == {}
        ends = labels["started_at"] + pd.to_timedelta((labels["n_points"] - 1) * 15, unit="s")
        frame = labels.assign(ended_at=ends).sort_values(["vehicle_id", "started_at"])
        previous_end = frame.groupby("vehicle_id")["ended_at"].shift()
        assert int((frame["started_at"] <= previous_end).sum()) == 2

    def test_jumps_are_flagged_not_dropped(
        self, porto: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]
    ) -> None:
        """Fixes implying more than 250 km/h from the previous one are kept with speed_flag."""
        pings, _, _ = porto
        assert int(pings["speed_flag"].sum()) == 147
        assert (pings["meter"] == "occupied").all()
