"""Validation of raw fixes: one reason per bad row, good rows kept, contract dtypes and order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from factories import make_raw_pings

from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError
from tracking.validate import (
    MAX_ID_CHARS,
    REJECTION_REASONS,
    ROW_RULES,
    displaced_fixes,
    empty_pings,
    empty_rejected,
    speed_flags,
    unix_seconds_ns,
    validate_ping_chunks,
    validate_pings,
)

NOW = pd.Timestamp("2024-03-04T12:00:00Z")
GOOD: dict[str, Any] = {
    "vehicle_id": "V1",
    "timestamp": "2024-03-04T09:00:00-03:00",
    "lat": "-30.0277",
    "lon": "-51.2287",
    "speed_kmh": "12.5",
    "heading_deg": "90",
    "accuracy_m": "5",
    "meter": "free",
    "tariff": "",
    "driver_id": "D7",
}


def _validate(rows: list[dict[str, Any]], **kwargs: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    return validate_pings(make_raw_pings(rows), now=kwargs.pop("now", NOW), **kwargs)


class TestValidatePings:
    @pytest.mark.parametrize(
        ("change", "reason"),
        [
            ({"vehicle_id": ""}, "empty_vehicle_id"),
            ({"vehicle_id": "   "}, "empty_vehicle_id"),
            ({"lat": ""}, "missing_coordinates"),
            ({"lon": " "}, "missing_coordinates"),
            ({"lat": "abc"}, "invalid_coordinates"),
            ({"lat": "NaN"}, "invalid_coordinates"),
            ({"lon": "inf"}, "invalid_coordinates"),
            ({"lat": "-30,03"}, "invalid_coordinates"),
            ({"lat": "91"}, "out_of_range_coordinates"),
            ({"lon": "-180.5"}, "out_of_range_coordinates"),
            ({"lat": "0", "lon": "0"}, "null_island"),
            ({"lat": "0.0", "lon": "-0.0"}, "null_island"),
            ({"timestamp": ""}, "missing_timestamp"),
            ({"timestamp": "ontem"}, "unparseable_timestamp"),
            ({"timestamp": "2024-02-30T10:00:00Z"}, "unparseable_timestamp"),
            ({"timestamp": "1709553600000"}, "unparseable_timestamp"),  # milliseconds
            ({"timestamp": "9300000000"}, "unparseable_timestamp"),  # ns beyond int64 (year 2264)
            ({"timestamp": "-5"}, "unparseable_timestamp"),
            ({"timestamp": "2024-03-04T09:00:00"}, "naive_timestamp"),
            ({"timestamp": "2024-03-04 09:00"}, "naive_timestamp"),
            ({"timestamp": "2024-03-04"}, "naive_timestamp"),
            ({"timestamp": "2024-03-04T12:05:01Z"}, "future_timestamp"),
            ({"timestamp": "1709554000"}, "future_timestamp"),  # 12:06:40Z
            ({"meter": "busy"}, "unknown_meter"),
            ({"meter": "livre"}, "unknown_meter"),
            ({"tariff": "3"}, "unknown_tariff"),
            ({"tariff": "1.5"}, "unknown_tariff"),
            ({"tariff": "B2"}, "unknown_tariff"),
            ({"speed_kmh": "-2"}, "invalid_speed"),
            ({"speed_kmh": "fast"}, "invalid_speed"),
            ({"heading_deg": "361"}, "invalid_heading"),
            ({"accuracy_m": "-3"}, "invalid_accuracy"),
        ],
    )
    def test_rejects_bad_row_with_reason(self, change: dict[str, str], reason: str) -> None:
        """A bad row is rejected with its reason; the good row beside it is kept."""
        pings, rejected = _validate([GOOD, {**GOOD, "vehicle_id": "V2", **change}])
        assert list(pings["vehicle_id"]) == ["V1"]
        assert rejected[["row", "reason"]].to_dict("records") == [{"row": 2, "reason": reason}]

    def test_minus_one_is_not_measured(self) -> None:
        """-1 for speed, heading or accuracy (the trackers' "not measured") is read as empty."""
        row = {**GOOD, "speed_kmh": "-1", "heading_deg": "-1", "accuracy_m": "-1"}
        pings, rejected = _validate([row])
        assert rejected.empty and len(pings) == 1
        assert pings[["speed_kmh", "heading_deg", "accuracy_m"]].isna().all(axis=None)

    def test_rule_table_is_in_the_order_of_the_reasons(self) -> None:
        """ROW_RULES holds every row-level reason once, in REJECTION_REASONS' order."""
        row_level = [
            r
            for r in REJECTION_REASONS
            if r not in ("malformed_row", "duplicate", "conflicting_duplicate")
        ]
        assert [reason for reason, _ in ROW_RULES] == row_level

    def test_first_reason_in_documented_order_wins(self) -> None:
        """Bad coordinates and a bad timestamp: the coordinates come first in REJECTION_REASONS."""
        _, rejected = _validate([{**GOOD, "lat": "x", "timestamp": "nope", "meter": "busy"}])
        assert rejected["reason"].tolist() == ["invalid_coordinates"]
        assert REJECTION_REASONS.index("invalid_coordinates") < REJECTION_REASONS.index(
            "unparseable_timestamp"
        )

    def test_rejected_keeps_original_text_of_every_column(self) -> None:
        """Rejected rows carry row, reason and each input cell exactly as written."""
        bad = {**GOOD, "lat": " 95.000 ", "extra": "x;y"}
        _, rejected = _validate([{**GOOD, "extra": ""}, bad])
        assert list(rejected.columns) == ["row", "reason", *bad.keys()]
        assert rejected.iloc[0].to_dict() == {"row": 2, "reason": "out_of_range_coordinates", **bad}
        assert all(str(rejected[c].dtype) == "str" for c in rejected.columns[1:])

    @pytest.mark.parametrize(
        ("timestamp", "expected"),
        [
            ("2024-03-04T09:00:00-03:00", "2024-03-04T12:00:00Z"),
            ("2024-03-04T09:00:00-0300", "2024-03-04T12:00:00Z"),
            ("2024-03-04T09:00:00-03", "2024-03-04T12:00:00Z"),
            ("2024-03-04T12:00:00Z", "2024-03-04T12:00:00Z"),
            ("20240304T120000Z", "2024-03-04T12:00:00Z"),  # ISO 8601's basic format
            ("20240304T090000-0300", "2024-03-04T12:00:00Z"),
            ("2024-03-04 12:00:00.250+00:00", "2024-03-04T12:00:00.250Z"),
            ("1709553600", "2024-03-04T12:00:00Z"),
            ("1709553600.5", "2024-03-04T12:00:00.5Z"),
        ],
    )
    def test_parses_offsets_and_unix_seconds_to_utc(self, timestamp: str, expected: str) -> None:
        """ISO 8601 with any offset and Unix seconds become the same UTC instant."""
        pings, rejected = _validate([{**GOOD, "timestamp": timestamp}])
        assert rejected.empty
        assert pings["timestamp"].iloc[0] == pd.Timestamp(expected)

    def test_mixed_timestamp_notations_in_one_column(self) -> None:
        """One file may mix offsets and Unix seconds; each row is parsed on its own."""
        rows = [
            {**GOOD, "timestamp": "2024-03-04T09:00:00-03:00"},
            {**GOOD, "timestamp": "1709553615"},
            {**GOOD, "timestamp": "2024-03-04T12:00:30+00:00"},
            {**GOOD, "timestamp": "2024-03-04T12:00:45"},
        ]
        pings, rejected = _validate(rows)
        assert pings["timestamp"].dt.second.tolist() == [0, 15, 30]
        assert rejected["reason"].tolist() == ["naive_timestamp"]

    def test_impossible_date_among_good_rows(self) -> None:
        """30 February among valid rows is unparseable, not rolled over to 1 March."""
        rows = [
            {**GOOD, "timestamp": "2024-03-04T09:00:00-03:00"},
            {**GOOD, "timestamp": "2024-02-30T09:00:15-03:00"},
            {**GOOD, "timestamp": " 2024-03-04T09:00:30-03:00 "},
            {**GOOD, "timestamp": "2024-03-04T09:00:45"},
        ]
        pings, rejected = _validate(rows)
        assert pings["row"].tolist() == [1, 3]
        assert rejected["reason"].tolist() == ["unparseable_timestamp", "naive_timestamp"]

    def test_future_tolerance(self) -> None:
        """A fix up to five minutes after now is clock skew and kept; later is rejected."""
        rows = [
            {**GOOD, "timestamp": "2024-03-04T12:04:59Z"},
            {**GOOD, "timestamp": "2024-03-04T12:05:00Z"},
            {**GOOD, "timestamp": "2024-03-04T12:05:00.001Z"},
        ]
        pings, rejected = _validate(rows)
        assert len(pings) == 2
        assert rejected["row"].tolist() == [3]

    def test_exact_duplicate_later_row_is_the_duplicate(self) -> None:
        """Of two identical rows the first is kept and the later one rejected as duplicate."""
        other = {**GOOD, "timestamp": "2024-03-04T09:00:15-03:00"}
        pings, rejected = _validate([GOOD, other, GOOD, GOOD])
        assert pings["row"].tolist() == [1, 2]
        assert rejected[["row", "reason"]].to_dict("records") == [
            {"row": 3, "reason": "duplicate"},
            {"row": 4, "reason": "duplicate"},
        ]

    def test_same_instant_other_values_is_conflicting_duplicate(self) -> None:
        """Same vehicle and instant (any notation) with other values: the later one conflicts."""
        rows = [
            {**GOOD, "lat": "-30.0300"},
            {**GOOD, "timestamp": "2024-03-04T12:00:00Z"},  # same instant, other text
            {**GOOD, "vehicle_id": "V2"},  # other vehicle: no conflict
            {**GOOD, "lat": "-30.0300"},  # identical to row 1
        ]
        pings, rejected = _validate(rows)
        assert pings["row"].tolist() == [1, 3]
        assert dict(zip(rejected["row"], rejected["reason"], strict=True)) == {
            2: "conflicting_duplicate",
            4: "duplicate",
        }

    def test_identical_bad_rows_keep_their_row_reason(self) -> None:
        """Duplicates are only looked for among rows that passed the row checks."""
        bad = {**GOOD, "lat": ""}
        _, rejected = _validate([bad, bad])
        assert rejected["reason"].tolist() == ["missing_coordinates"] * 2

    def test_no_row_is_lost(self) -> None:
        """Every input row ends up either in pings or in rejected, once."""
        rng = np.random.default_rng(3)
        choices = ["", "x", "-30.1", "-30.1", "-30.1", "95"]
        rows = [
            {**GOOD, "lat": rng.choice(choices), "timestamp": f"17095536{i % 40:02d}"}
            for i in range(200)
        ]
        pings, rejected = _validate(rows)
        assert sorted([*pings["row"], *rejected["row"]]) == list(range(1, 201))

    def test_output_contract_dtypes_and_order(self) -> None:
        """Pings have the contract's columns and dtypes, sorted by vehicle then time."""
        rows = [
            {**GOOD, "vehicle_id": "B", "timestamp": "1709553630"},
            {
                **GOOD,
                "vehicle_id": "A",
                "timestamp": "1709553645",
                "meter": "Occupied ",
                "tariff": "2",
            },
            {**GOOD, "vehicle_id": "B", "timestamp": "1709553600", "meter": "", "driver_id": ""},
            {**GOOD, "vehicle_id": "A", "timestamp": "1709553615", "speed_kmh": ""},
        ]
        pings, _ = _validate(rows)
        assert list(pings.columns) == list(fr.PING_COLUMNS)
        assert isinstance(pings.index, pd.RangeIndex)
        assert pings["row"].tolist() == [4, 2, 3, 1]
        dtypes = {c: str(t) for c, t in pings.dtypes.items()}
        assert dtypes == {
            "vehicle_id": "str",
            "timestamp": "datetime64[ns, UTC]",
            "lat": "float64",
            "lon": "float64",
            "speed_kmh": "float64",
            "heading_deg": "float64",
            "accuracy_m": "float64",
            "meter": "str",
            "tariff": "Int8",
            "driver_id": "str",
            "row": "int64",
            "speed_flag": "bool",
        }
        assert pings["meter"].iloc[1] == "occupied"
        assert pd.isna(pings["meter"].iloc[2]) and pd.isna(pings["driver_id"].iloc[2])
        assert pings["tariff"].iloc[1] == 2 and pd.isna(pings["tariff"].iloc[0])
        assert np.isnan(pings["speed_kmh"].iloc[0])

    def test_optional_columns_may_be_absent(self) -> None:
        """A file with only the required columns gives empty optional columns."""
        required = {k: GOOD[k] for k in fr.PING_REQUIRED}
        pings, rejected = _validate([required])
        assert rejected.empty
        assert pings["meter"].isna().all() and pings["tariff"].isna().all()
        assert list(pings.columns) == list(fr.PING_COLUMNS)

    def test_numeric_and_datetime_columns_as_from_parquet(self) -> None:
        """Numbers and tz-aware datetimes are accepted as they are; NaN means empty."""
        raw = pd.DataFrame(
            {
                "vehicle_id": pd.array([7, 7, 8], dtype="Int64"),
                "timestamp": pd.to_datetime(
                    ["2024-03-04T09:00:00-03:00", "2024-03-04T12:00:15Z", None], utc=True
                ),
                "lat": [-30.0, np.nan, -30.0],
                "lon": [-51.0, -51.0, -51.0],
                "row": [1, 2, 3],
            }
        )
        pings, rejected = validate_pings(raw, now=NOW)
        assert pings["vehicle_id"].tolist() == ["7"]
        assert dict(zip(rejected["row"], rejected["reason"], strict=True)) == {
            2: "missing_coordinates",
            3: "missing_timestamp",
        }
        assert rejected["timestamp"].tolist() == ["2024-03-04T12:00:15+00:00", ""]

    def test_naive_datetime_column_rejected(self) -> None:
        """A datetime column without a time zone: every row is naive_timestamp."""
        raw = pd.DataFrame(
            {
                "vehicle_id": ["a", "b"],
                "timestamp": pd.to_datetime(["2024-03-04 09:00", "2024-03-04 09:01"]),
                "lat": [-30.0, -30.0],
                "lon": [-51.0, -51.0],
                "row": [1, 2],
            }
        )
        pings, rejected = validate_pings(raw, now=NOW)
        assert pings.empty
        assert rejected["reason"].tolist() == ["naive_timestamp"] * 2

    def test_empty_input_gives_typed_empty_frames(self) -> None:
        """No rows: empty pings with the contract columns and an empty rejected frame."""
        pings, rejected = validate_pings(make_raw_pings([], columns=list(GOOD)), now=NOW)
        assert pings.empty and rejected.empty
        assert list(pings.columns) == list(fr.PING_COLUMNS)
        assert str(pings["timestamp"].dtype) == "datetime64[ns, UTC]"

    def test_missing_column_raises(self) -> None:
        """A raw frame without lat names the missing column."""
        raw = make_raw_pings([GOOD]).drop(columns=["lat"])
        with pytest.raises(MissingColumnsError, match="lat"):
            validate_pings(raw, now=NOW)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"now": pd.Timestamp("2024-03-04 12:00")}, "'now'.*sem fuso"),
            ({"max_speed_kmh": 0}, "'max_speed_kmh' era 0"),
            ({"future_tolerance_s": -1}, "'future_tolerance_s' era -1"),
        ],
    )
    def test_bad_parameters_raise(self, kwargs: dict[str, Any], match: str) -> None:
        """Naive now or non-positive thresholds raise a named error naming the argument."""
        kwargs.setdefault("now", NOW)
        with pytest.raises(InvalidParameterError, match=match):
            validate_pings(make_raw_pings([GOOD]), **kwargs)

    def test_impossible_speed_is_kept_and_flagged(self) -> None:
        """A fix 2 km away 10 s after the previous one is kept with speed_flag, not rejected."""
        rows = [
            {**GOOD, "timestamp": "1709553600", "lat": "-30.0000"},
            {**GOOD, "timestamp": "1709553610", "lat": "-30.0180"},  # 2.0 km in 10 s
            {**GOOD, "timestamp": "1709553670", "lat": "-30.0181"},  # 11 m in 60 s
            {**GOOD, "vehicle_id": "V2", "timestamp": "1709553611", "lat": "-31.0"},
        ]
        pings, rejected = _validate(rows)
        assert rejected.empty
        assert pings["speed_flag"].tolist() == [False, True, False, False]


class TestSpeedFlags:
    def test_flags_later_fix_of_fast_step_per_vehicle(self) -> None:
        """Only the later fix of a too-fast step of the same vehicle is flagged."""
        codes = np.array([0, 0, 0, 1, 1])
        ts = np.array([0, 10, 20, 21, 1000]) * 1_000_000_000
        lat = np.array([0.0, 0.001, 0.05, 10.0, 10.001])
        lon = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
        # 111 m / 10 s = 40 km/h; 5.4 km / 10 s = 1,950 km/h; vehicle change; 111 m / 979 s.
        assert speed_flags(codes, ts, lat, lon, max_speed_kmh=250.0).tolist() == [
            False,
            False,
            True,
            False,
            False,
        ]

    @pytest.mark.parametrize(("limit", "flagged"), [(39.0, True), (41.0, False)])
    def test_threshold_is_strict(self, limit: float, flagged: bool) -> None:
        """111.2 m in 10 s is 40.0 km/h: flagged above a 39 km/h limit, not under 41."""
        out = speed_flags(
            np.array([0, 0]),
            np.array([0, 10_000_000_000]),
            np.array([0.0, 0.001]),
            np.array([0.0, 0.0]),
            max_speed_kmh=limit,
        )
        assert out.tolist() == [False, flagged]


def _displaced(north_m: list[float], step_s: float = 15.0, **kw: Any) -> list[int]:
    """Positions displaced_fixes flags on a track of one vehicle going north (metres)."""
    n = len(north_m)
    lat = np.array(north_m) / 111_195.0
    ts = (np.arange(n) * step_s * 1e9).astype(np.int64)
    found = displaced_fixes(np.zeros(n, np.int64), ts, lat, np.zeros(n), **kw)
    return np.flatnonzero(found).tolist()


class TestDisplacedFixes:
    def test_stretch_away_and_back(self) -> None:
        """Two fixes 4 km off, then the track again: those two, not the track."""
        assert _displaced([0, 100, 4100, 4200, 400, 500]) == [2, 3]

    def test_the_shorter_of_two_readings(self) -> None:
        """A long coherent run then a short excursion: the run is the track, the two fixes not."""
        track = [0.0, 100.0, 5000.0, *(5000.0 + 100 * k for k in range(1, 12)), 9000.0, 9100.0]
        track += [6200.0, 6300.0]
        assert _displaced(track) == [14, 15]

    def test_alternating_receivers_only_the_first(self) -> None:
        """A B A B …: only the first excursion qualifies (its start is reached possibly)."""
        assert _displaced([0, 5000, 30, 5030, 60, 5060, 90]) == [1]

    @pytest.mark.parametrize(("back_s", "flagged"), [(15 * 4, [2, 3, 4, 5]), (15 * 30, [])])
    def test_longest_excursion(self, back_s: float, flagged: list[int]) -> None:
        """Away longer than max_excursion_s: not an excursion, nothing flagged."""
        away = int(back_s // 15)
        track = [0.0, 100.0, *([5000.0] * away), 200.0, 300.0]
        assert _displaced(track, max_excursion_s=120.0) == flagged

    def test_no_return_no_stretch(self) -> None:
        """Two impossible steps that do not come back (the vehicle is elsewhere after)."""
        assert _displaced([0, 100, 5000, 5100, 12000, 12100]) == []


class TestEmptyFrames:
    def test_empty_pings_match_a_validated_frame(self) -> None:
        """empty_pings() has the columns and dtypes of validate_pings' output."""
        pings, _ = _validate([GOOD])
        empty = empty_pings()
        assert empty.empty
        assert empty.dtypes.astype(str).to_dict() == pings.dtypes.astype(str).to_dict()

    def test_empty_rejected_columns(self) -> None:
        """empty_rejected() lists row, reason then the given columns, reserved names once."""
        frame = empty_rejected(["vehicle_id", "row", "lat"])
        assert frame.empty
        assert list(frame.columns) == ["row", "reason", "vehicle_id", "lat"]
        assert str(frame["row"].dtype) == "int64" and str(frame["lat"].dtype) == "str"


class TestValidatePingChunks:
    ROWS: list[dict[str, Any]] = [
        GOOD,
        {**GOOD, "timestamp": "2024-03-04T09:00:15-03:00"},
        {**GOOD, "lat": "-30.02770"},  # same values as row 1, other text
        {**GOOD, "lat": ""},
        GOOD,  # duplicate of row 1
        {**GOOD, "vehicle_id": "V2", "meter": "Occupied", "tariff": "2"},
        {**GOOD, "timestamp": "2024-03-04T09:00:15-03:00", "speed_kmh": "80"},  # conflicts with 2
        {**GOOD, "lat": "-30.02770"},  # duplicate of row 3 (a conflicting row)
    ]

    @staticmethod
    def _source(
        raw: pd.DataFrame, size: int, calls: list[int]
    ) -> Callable[[], Iterator[pd.DataFrame]]:
        def chunks() -> Iterator[pd.DataFrame]:
            calls.append(1)
            for start in range(0, len(raw), size):
                yield raw.iloc[start : start + size].reset_index(drop=True)

        return chunks

    @pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
    def test_same_result_as_one_frame(self, size: int) -> None:
        """Any split into chunks gives what validate_pings gives on the whole frame."""
        raw = make_raw_pings(self.ROWS)
        expected = validate_pings(raw, now=NOW)
        got = validate_ping_chunks(self._source(raw, size, []), now=NOW)
        assert dict(zip(got[1]["row"], got[1]["reason"], strict=True)) == {
            3: "conflicting_duplicate",
            4: "missing_coordinates",
            5: "duplicate",
            7: "conflicting_duplicate",
            8: "duplicate",
        }
        for a, b in zip(got, expected, strict=True):
            pd.testing.assert_frame_equal(a, b)

    @pytest.mark.parametrize(
        ("later", "calls"),
        [
            ({**GOOD, "lat": "-30.5"}, 1),  # other value: conflicting without reading again
            (GOOD, 2),  # same values: the cells of row 1 are read again
        ],
    )
    def test_reads_again_only_to_compare_cells(self, later: dict[str, Any], calls: int) -> None:
        """The chunks are read a second time only when values tie with a kept fix's."""
        raw = make_raw_pings([GOOD, later])
        seen: list[int] = []
        _, rejected = validate_ping_chunks(self._source(raw, 1, seen), now=NOW)
        assert len(seen) == calls
        assert len(rejected) == 1

    def test_no_chunks(self) -> None:
        """A source with no chunk at all gives empty, typed frames."""
        pings, rejected = validate_ping_chunks(lambda: iter(()), now=NOW)
        assert pings.empty and rejected.empty
        assert list(pings.columns) == list(fr.PING_COLUMNS)

    def test_missing_column_in_a_chunk(self) -> None:
        """A chunk without lon raises, naming the column."""
        raw = make_raw_pings([GOOD]).drop(columns=["lon"])
        with pytest.raises(MissingColumnsError, match="lon"):
            validate_ping_chunks(lambda: iter((raw,)), now=NOW)


class TestTimestampCells:
    ODD = [
        "2024-03-04 09:00:00",  # naive
        "",
        "   ",
        "1709553600",  # Unix seconds
        "1709553600000",  # milliseconds: refused
        "garbage",
        "2024-03-04T09:00:00.250-03:00",  # fractional seconds, another length
        " 2024-03-04T09:00:00-03:00",  # blank before
        "2024-03-04T09:00:00+0000",
        "2024-03-04T12:00:00Z",
        "20240304T120000Z",  # basic format
        "20240304T120000",  # basic format, naive
        "2024-13-04T09:00:00-03:00",  # month 13, the common length
    ]

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_cell_by_cell(self, seed):
        """A column of one format with odd cells among them: each cell's instant and reason
        are those it gets alone (the cells of the common length are cast at once)."""
        rng = np.random.default_rng(seed)
        common = [f"2024-03-04T{h:02d}:{m:02d}:00-03:00" for h in range(6, 9) for m in range(60)]
        cells = np.array(common + self.ODD * 3, dtype=object)
        rng.shuffle(cells)
        rows = [GOOD | {"vehicle_id": f"V{k}", "timestamp": c} for k, c in enumerate(cells)]
        pings, rejected = _validate(rows)
        alone = [_validate([r]) for r in rows]
        kept = {p["vehicle_id"].iloc[0]: p["timestamp"].iloc[0] for p, _ in alone if len(p)}
        reasons = {r["vehicle_id"].iloc[0]: r[fr.REASON].iloc[0] for _, r in alone if len(r)}
        assert dict(zip(pings["vehicle_id"], pings["timestamp"], strict=True)) == kept
        assert dict(zip(rejected["vehicle_id"], rejected[fr.REASON], strict=True)) == reasons
        assert len(kept) > len(common) and len(reasons) > 10


def _random_micros(seed: int, n: int) -> list[int]:
    """Distinct epoch microseconds of 2020-2026, with any fraction of a second."""
    rng = np.random.default_rng(seed)
    start, span = 1_577_836_800 * 10**6, 6 * 365 * 86_400 * 10**6
    return sorted({int(v) for v in start + rng.integers(0, span, size=n)})


class TestInstantsAtTheEdge:
    @pytest.mark.parametrize(
        "timestamp",
        [
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "1600-01-01T00:00:00+00:00",
            "1677-09-20T00:00:00Z",
            "2262-04-12T00:00:00Z",
        ],
    )
    def test_beyond_pandas_range_is_unparseable(self, timestamp: str) -> None:
        """An ISO instant no nanosecond Timestamp holds is rejected, never an error."""
        pings, rejected = _validate([GOOD, {**GOOD, "vehicle_id": "V2", "timestamp": timestamp}])
        assert list(pings["vehicle_id"]) == ["V1"]
        assert rejected["reason"].tolist() == ["unparseable_timestamp"]

    def test_not_before_rejects_older_fixes(self) -> None:
        """``not_before`` makes earlier fixes ``too_old_timestamp``; without it they are kept."""
        old = {**GOOD, "vehicle_id": "V2", "timestamp": "2024-02-20T00:00:00Z"}
        pings, rejected = _validate([GOOD, old], not_before=pd.Timestamp("2024-02-26", tz="UTC"))
        assert list(pings["vehicle_id"]) == ["V1"]
        assert rejected["reason"].tolist() == ["too_old_timestamp"]
        assert len(_validate([GOOD, old])[0]) == 2

    @pytest.mark.parametrize("column", ["vehicle_id", "driver_id"])
    def test_identifiers_longer_than_the_limit_are_invalid_text(self, column: str) -> None:
        """65 characters is ``invalid_text``; 64 is kept."""
        long_ = {**GOOD, "timestamp": "2024-03-04T09:00:01-03:00", column: "X" * (MAX_ID_CHARS + 1)}
        edge = {**GOOD, "timestamp": "2024-03-04T09:00:02-03:00", column: "Y" * MAX_ID_CHARS}
        pings, rejected = _validate([long_, edge])
        assert rejected["reason"].tolist() == ["invalid_text"]
        assert len(pings) == 1

    @pytest.mark.parametrize("column", ["vehicle_id", "driver_id"])
    def test_identifiers_with_unseen_characters_are_invalid_text(self, column: str) -> None:
        """A zero-width space, a direction override, a newline, a tab: no page shows them, so
        "X\u200b1" would look like X1 and match nothing; accents are kept."""
        rows = [
            {**GOOD, "timestamp": f"2024-03-04T09:00:0{k}-03:00", column: value}
            for k, value in enumerate(["X\u200b1", "\u202eX1", "X1\nY", "X\t1", "Xê-1"], start=1)
        ]
        pings, rejected = _validate(rows)
        assert rejected["reason"].tolist() == ["invalid_text"] * 4
        assert pings[column].tolist() == ["Xê-1"]

    def test_unix_text_is_read_exactly(self) -> None:
        """Decimal Unix seconds give their exact nanoseconds, as ``unix_seconds_ns`` does."""
        micros = _random_micros(1, 2000)
        cells = [f"{us // 10**6}.{us % 10**6:06d}" for us in micros]
        cells += ["1700000000.010", "1700000000.123456789", "1700000000.1234567895", "1.7e9",
                  "+1700000000.5", "1700000000.", ".5", "00001700000000.25"]  # fmt: skip
        rows = [{**GOOD, "vehicle_id": f"V{k}", "timestamp": c} for k, c in enumerate(cells)]
        pings, rejected = _validate(rows, now=pd.Timestamp("2030-01-01", tz="UTC"))
        assert rejected.empty
        got = dict(zip(pings["vehicle_id"], pings["timestamp"].astype("int64"), strict=True))
        expected = {f"V{k}": unix_seconds_ns(c) for k, c in enumerate(cells)}
        assert got == expected
        assert [got[f"V{k}"] for k in range(len(micros))] == [us * 1000 for us in micros]
        assert expected[f"V{len(micros)}"] == 1_700_000_000_010_000_000
        assert expected[f"V{len(micros) + 2}"] == 1_700_000_000_123_456_790

    def test_unix_floats_round_to_the_microsecond(self) -> None:
        """A float column (Parquet) gives the nearest microsecond: ….010 stays ….010000."""
        micros = _random_micros(2, 2000)
        raw = make_raw_pings([{**GOOD, "vehicle_id": f"V{k}"} for k in range(len(micros))])
        raw["timestamp"] = np.array([us / 1e6 for us in micros], dtype=np.float64)
        pings, rejected = validate_pings(raw, now=pd.Timestamp("2030-01-01", tz="UTC"))
        assert rejected.empty
        got = dict(zip(pings["vehicle_id"], pings["timestamp"].astype("int64"), strict=True))
        assert [got[f"V{k}"] for k in range(len(micros))] == [us * 1000 for us in micros]
        assert all(unix_seconds_ns(us / 1e6) == us * 1000 for us in micros)


class TestCategoryColumns:
    """Columns read as dictionaries (``category`` of ``str``) are judged cell by cell as text."""

    ODD: dict[str, list[str]] = {
        "vehicle_id": ["V1", " V1", "V1 ", "", "   ", "V\x00", "X" * (MAX_ID_CHARS + 1), "V2"],
        "timestamp": [
            "2024-03-04T09:00:00-03:00",
            "2024-03-04T09:00:15-03:00",
            " 2024-03-04T09:00:30-03:00",
            "2024-03-04 09:00:00",
            "",
            "1709553600",
            "garbage",
        ],
        "speed_kmh": ["12.5", " 12.5", "12.5 ", "", "abc", "-1", "inf", "1e1"],
        "heading_deg": ["90", "361", "", " 0", "-0"],
        "accuracy_m": ["5", "-1", "", "5.0"],
        "meter": ["free", "FREE", " Occupied ", "off", "busy", ""],
        "tariff": ["", "1", " 2", "3", "1.0", "x"],
        "driver_id": ["D7", "", "D\x00", " D7", "D" * (MAX_ID_CHARS + 1)],
    }

    def _rows(self, n: int, seed: int) -> list[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        rows = [  # each cell odd one time in three
            GOOD
            | {
                c: values[int(rng.integers(len(values))) if rng.random() < 1 / 3 else 0]
                for c, values in self.ODD.items()
            }
            for _ in range(n)
        ]
        return rows + rows[: n // 4]  # duplicates, and same keys with other cells

    @staticmethod
    def _dictionary(text: pd.Series, kind: str) -> pd.Series:
        if kind == "category":
            return text.astype("category")
        chunks = [pa.array(part).dictionary_encode() for part in np.array_split(text.to_numpy(), 3)]
        return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array(chunks)))

    @pytest.mark.parametrize("kind", ["category", "arrow"])
    @pytest.mark.parametrize("seed", [0, 1])
    def test_same_result_as_text_columns(self, seed: int, kind: str) -> None:
        """Every odd cell (blanks, NUL, case, numbers with spaces, long ids), as a pandas
        category or an Arrow dictionary in chunks of their own dictionaries: the same valid
        fixes and the same rejected rows, reasons and cells as with ``str`` columns."""
        text = make_raw_pings(self._rows(400, seed))
        dictionary = text.copy()
        for c in self.ODD:
            dictionary[c] = self._dictionary(text[c], kind)
        want = validate_pings(text, now=NOW)
        got = validate_pings(dictionary, now=NOW)
        pd.testing.assert_frame_equal(got[0], want[0])
        pd.testing.assert_frame_equal(got[1], want[1])
        assert {"duplicate", "conflicting_duplicate", "invalid_text", "unknown_meter"} <= set(
            want[1][fr.REASON]
        )

    def test_missing_and_unused_categories(self) -> None:
        """A missing entry (pandas NaN, Arrow null) reads as an empty cell; unused values
        change nothing."""
        rows = [
            GOOD,
            GOOD | {"timestamp": "2024-03-04T09:00:15-03:00", "driver_id": ""},
            GOOD | {"timestamp": "2024-03-04T09:00:30-03:00", "vehicle_id": ""},
        ]
        text = make_raw_pings(rows)
        dictionary = text.copy()
        dictionary["driver_id"] = pd.Series(
            pd.Categorical(["D7", None, "D7"], categories=["unused", "D7", "D\x00"])
        )
        dictionary["meter"] = pd.Series(pd.Categorical(["free"] * 3, categories=["free"]))
        arrow = pa.DictionaryArray.from_arrays(  # a slice, "V1 " unused
            pa.array([0, 2, 2, None], pa.int8()), pa.array(["x", "V1 ", "V1"], pa.large_string())
        )
        dictionary["vehicle_id"] = pd.Series(pd.arrays.ArrowExtensionArray(arrow[1:]))
        want = validate_pings(text, now=NOW)
        got = validate_pings(dictionary, now=NOW)
        pd.testing.assert_frame_equal(got[0], want[0])
        pd.testing.assert_frame_equal(got[1], want[1])
        assert len(got[0]) == 2 and got[0]["driver_id"].isna().sum() == 1
        assert got[1][fr.REASON].tolist() == ["empty_vehicle_id"]
