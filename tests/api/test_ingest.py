"""Tests of the device ingest's validation: the record reader answers as validate_pings does."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import ingest
from api.ingest import CheckedBatch, check_batch

NOW = pd.Timestamp("2026-11-30T12:00:00Z")
NOT_BEFORE = pd.Timestamp("2000-01-01T00:00:00Z")
"""Live ingest's oldest instant in the property tests (the instants drawn span 1960-2030)."""
DEVICE = "V1"
_FIELDS = ("lat", "lon", "speed_kmh", "heading_deg", "accuracy_m")


def _iso(moment: dt.datetime, *, sep: str, digits: int, offset_min: int | None) -> str:
    """ISO 8601 text of ``moment`` seen at ``offset_min`` (None: 'Z') with ``digits`` decimals."""
    shift = dt.timedelta(minutes=offset_min or 0)
    local = moment + shift
    text = local.strftime(f"%Y-%m-%d{sep}%H:%M:%S")
    if digits:
        text += "." + f"{local.microsecond:06d}{moment.microsecond % 1000:03d}"[:digits]
    if offset_min is None:
        return text + "Z"
    sign = "-" if offset_min < 0 else "+"
    hh, mm = divmod(abs(offset_min), 60)
    return f"{text}{sign}{hh:02d}:{mm:02d}"


moments = st.datetimes(min_value=dt.datetime(1960, 1, 1), max_value=dt.datetime(2030, 12, 31)).map(
    lambda d: d.replace(tzinfo=dt.UTC)
)
iso_texts = st.builds(
    _iso,
    moments,
    sep=st.sampled_from(["T", " "]),
    digits=st.sampled_from([0, 0, 3, 6, 9]),
    offset_min=st.one_of(st.none(), st.integers(-14 * 60, 14 * 60)),
)
# A few instants shared by many rows, so that duplicates and conflicts happen.
shared = st.sampled_from(
    ["2026-11-30T10:00:00Z", "2026-11-30T07:00:00-03:00", "2026-11-30T10:00:01+00:00"]
)
unix = st.one_of(
    st.floats(min_value=-1e3, max_value=2e9, allow_nan=False),
    st.floats(min_value=1.7e9, max_value=1.8e9, allow_nan=False),
    st.sampled_from([1.0e10, 8.99e9, 1_764_496_800.0]),
)
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.floats(min_value=-200, max_value=400),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 90.0, -90.0, 180.0, 360.0, 360.5]),
)
plain_numbers = st.one_of(
    st.none(),
    st.just(""),
    numbers,
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.from_regex(r"-?[0-9]{1,4}(\.[0-9]{1,6})?", fullmatch=True),
)
plain_timestamps = st.one_of(
    st.none(),
    st.just(""),
    iso_texts,
    shared,
    unix,
    unix.map(lambda s: f"{s:.3f}"),
    st.integers(0, 2_000_000_000).map(str),
)
plain_words = st.one_of(
    st.none(),
    st.just(""),
    st.sampled_from(["free", "occupied", "off", "FREE", "Occupied", "busy", "x_1"]),
)
plain_drivers = st.one_of(
    st.none(), st.just(""), st.sampled_from(["D1", "D2", "motorista 7", "D" * 64, "D" * 65])
)
plain_vehicles = st.one_of(st.none(), st.just(""), st.just(DEVICE), st.just("V2"))

odd = st.sampled_from(
    [" 1.5", "1e3", "nan", "abc", "1.", "+1", "٣", " ", "2024-02-30T00:00:00Z", "2024-01-01",
     "2024-01-01T00:00:00", "2024-01-01T25:00:00Z", "1e400", "FREE ", "José", " V1", 7.0,
     float("nan")]
)  # fmt: skip
# Not 9.3e9 to 1e10 Unix seconds: validate_pings overflows int64 there (RuntimeWarning, a wrong
# date); the fast check leaves them (>= 9e9) to it.


def rows_of(
    vehicles: st.SearchStrategy[Any],
    timestamps: st.SearchStrategy[Any],
    numbers_: st.SearchStrategy[Any],
    words: st.SearchStrategy[Any],
    drivers: st.SearchStrategy[Any],
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Batches of JSON rows (as pydantic hands them over: str, float or None)."""
    near = st.one_of(st.floats(-30.1, -30.0), numbers_)
    row = st.fixed_dictionaries(
        {
            "vehicle_id": vehicles,
            "timestamp": st.one_of(shared, timestamps),
            "lat": near,
            "lon": st.one_of(st.floats(-51.3, -51.2), numbers_),
            "speed_kmh": numbers_,
            "heading_deg": numbers_,
            "accuracy_m": numbers_,
            "meter": words,
            "tariff": st.one_of(st.sampled_from([1.0, 2.0, "1", "2", 3.0, 0.5]), numbers_),
            "driver_id": drivers,
        }
    )
    # Rows repeated (exact duplicates) within a batch too.
    return st.lists(row, min_size=1, max_size=25).flatmap(
        lambda rs: st.lists(st.sampled_from(rs), min_size=len(rs), max_size=len(rs) + 5)
    )


plain_batches = rows_of(plain_vehicles, plain_timestamps, plain_numbers, plain_words, plain_drivers)
mixed_batches = rows_of(
    st.one_of(plain_vehicles, odd),
    st.one_of(plain_timestamps, odd),
    st.one_of(plain_numbers, odd),
    st.one_of(plain_words, odd),
    st.one_of(plain_drivers, odd),
)


def assert_same(fast: CheckedBatch, slow: CheckedBatch) -> None:
    """Both checks gave the same answers, fixes (values, order, flags) and rejected rows."""
    assert fast.n == slow.n
    assert fast.answers == slow.answers
    np.testing.assert_array_equal(fast.rows, slow.rows)
    assert fast.vehicle_id == slow.vehicle_id
    np.testing.assert_array_equal(fast.ts_ns, slow.ts_ns)
    for name in _FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    assert fast.meter == slow.meter
    assert fast.tariff == slow.tariff
    assert fast.driver_id == slow.driver_id
    np.testing.assert_array_equal(fast.speed_flag, slow.speed_flag)
    assert fast.ts_origin == slow.ts_origin
    assert sorted(fast.bad, key=lambda b: b[0]) == sorted(slow.bad, key=lambda b: b[0])


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestCheckBatch:
    @PROPERTY
    @given(rows=plain_batches)
    def test_plain_batches_take_the_fast_path_and_agree(self, rows: list[dict[str, Any]]) -> None:
        """Batches of plain cells are checked in Python, with validate_pings' exact answers."""
        fast = ingest._fast_check(rows, vehicle_id=DEVICE, now=NOW, not_before=NOT_BEFORE)
        assert_same(
            fast, ingest._slow_check(rows, vehicle_id=DEVICE, now=NOW, not_before=NOT_BEFORE)
        )

    @PROPERTY
    @given(rows=mixed_batches)
    def test_any_batch_agrees_with_validate_pings(self, rows: list[dict[str, Any]]) -> None:
        """With unusual cells mixed in, check_batch still answers as validate_pings does."""
        slow = ingest._slow_check(rows, vehicle_id=DEVICE, now=NOW, not_before=NOT_BEFORE)
        max_age_s = (NOW - NOT_BEFORE).total_seconds()
        batch = check_batch(rows, vehicle_id=DEVICE, now=NOW.to_pydatetime(), max_age_s=max_age_s)
        assert_same(batch, slow)

    @pytest.mark.parametrize(
        ("cell", "reason"),
        [
            ({"lat": None}, "missing_coordinates"),
            ({"lat": 0.0, "lon": 0.0}, "null_island"),
            ({"timestamp": "2026-11-30T12:10:00Z"}, "future_timestamp"),
            ({"timestamp": 1.0e10}, "unparseable_timestamp"),
            ({"timestamp": "9999-01-01T00:00:00Z"}, "unparseable_timestamp"),
            ({"timestamp": "2026-11-20T11:00:00Z"}, "too_old_timestamp"),
            ({"driver_id": "D" * 65}, "invalid_text"),
            ({"driver_id": "D\ufffd1"}, "invalid_text"),
            # characters no page shows: "D\u200b1" would look like the registry's D1
            ({"driver_id": "D\u200b1"}, "invalid_text"),
            ({"driver_id": "\u202eD1"}, "invalid_text"),
            ({"driver_id": "D1\nX"}, "invalid_text"),
            ({"meter": "busy"}, "unknown_meter"),
            ({"tariff": 3.0}, "unknown_tariff"),
            ({"heading_deg": 361.0}, "invalid_heading"),
            ({"vehicle_id": "V2"}, "vehicle_not_allowed"),
        ],
    )
    def test_rejects_with_the_file_ingest_reason(self, cell: dict[str, Any], reason: str) -> None:
        """A bad row is rejected with its reason; the good row beside it is kept."""
        good = {"timestamp": "2026-11-30T11:00:00Z", "lat": -30.03, "lon": -51.23}
        bad = good | {"timestamp": "2026-11-30T11:00:05Z"} | cell
        batch = check_batch(
            [good, bad], vehicle_id=DEVICE, now=NOW.to_pydatetime(), max_age_s=7 * 86_400.0
        )
        assert batch.answers == {2: ingest.RowResult(2, "rejected", reason)}
        assert batch.rows.tolist() == [1]
        assert [b[:2] for b in batch.bad] == [(2, reason)]


class TestOneRuleTable:
    @pytest.mark.parametrize(
        ("bound", "value", "cell", "reason"),
        [
            ("MAX_HEADING_DEG", 180.0, {"heading_deg": 200.0}, "invalid_heading"),
            ("MAX_ABS_LAT_DEG", 30.0, {"lat": -30.03}, "out_of_range_coordinates"),
            ("MAX_ID_CHARS", 4, {"driver_id": "D12345"}, "invalid_text"),
        ],
    )
    def test_a_bound_changed_in_the_table_changes_both_readers(
        self,
        monkeypatch: pytest.MonkeyPatch,
        bound: str,
        value: float,
        cell: dict[str, Any],
        reason: str,
    ) -> None:
        """The record reader and validate_pings judge by the one rule table of tracking.validate."""
        from tracking import validate

        rows = [{"timestamp": "2026-11-30T11:00:00Z", "lat": -30.03, "lon": -51.23} | cell]
        for module_value, expected in ((getattr(validate, bound), None), (value, reason)):
            monkeypatch.setattr(validate, bound, module_value)
            fast = ingest._fast_check(rows, vehicle_id=DEVICE, now=NOW, not_before=NOT_BEFORE)
            slow = ingest._slow_check(rows, vehicle_id=DEVICE, now=NOW, not_before=NOT_BEFORE)
            assert_same(fast, slow)
            assert [a.reason for a in fast.answers.values()] == ([expected] if expected else [])


class TestIngestBatch:
    def test_stores_what_the_file_ingest_stores_and_queues_it(self, db_session: Any) -> None:
        """Fixes stored by ingest_batch equal copy_fixes' (every column); they are queued."""
        from sqlalchemy import text

        from db.tracking.store import copy_fixes

        rows = [
            {"timestamp": "2026-11-30T10:00:00.123456Z", "lat": -30.03, "lon": -51.23},
            {"timestamp": 1_764_496_801.5, "lat": -30.0301, "lon": -51.2301, "speed_kmh": 12.5,
             "heading_deg": 90.0, "accuracy_m": 4.0, "meter": "Occupied", "tariff": "2",
             "driver_id": 'D "7"'},
            {"timestamp": "2026-11-30T07:00:03-03:00", "lat": -29.5, "lon": -51.2},  # far: flag
        ]  # fmt: skip
        conn = db_session.connection()
        results = ingest.ingest_batch(
            conn=conn, rows=rows, vehicle_id="HTTP1", source="t", now=NOW.to_pydatetime()
        )
        assert [r.status for r in results] == ["accepted"] * 3
        again = ingest.ingest_batch(
            conn=conn, rows=rows, vehicle_id="HTTP1", source="t", now=NOW.to_pydatetime()
        )
        assert [r.status for r in again] == ["duplicate"] * 3
        pings, _ = ingest.validate_pings(
            ingest.raw_frame(rows, default_vehicle_id="FILE1"), now=NOW
        )
        copy_fixes(conn, pings, source="t")
        columns = (
            "ts, lat, lon, ST_AsEWKT(geom), speed_kmh, heading_deg, accuracy_m, meter, tariff, "
            "driver_id, h3_r9, speed_flag"
        )

        def stored(vehicle: str) -> list[tuple[Any, ...]]:
            query = f"SELECT {columns} FROM fixes WHERE vehicle_id = :v ORDER BY ts"  # noqa: S608
            return [tuple(r) for r in conn.execute(text(query), {"v": vehicle})]

        assert stored("HTTP1") == stored("FILE1")
        assert [r[-1] for r in stored("HTTP1")] == [False, False, True]
        queued = conn.execute(
            text("SELECT count(*) FROM live_queue WHERE vehicle_id = 'HTTP1'")
        ).scalar_one()
        assert queued == 3
