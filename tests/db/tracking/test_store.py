"""Storing pings in PostGIS: daily partitions, binary COPY, idempotent re-imports, rejected rows."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

import db.tracking.store
from db.tracking.store import (
    copy_fixes,
    copy_rejected,
    ensure_fix_partitions,
    index_closed_days,
    partition_name,
)
from geo.h3 import latlng_to_cells
from tracking._errors import InvalidParameterError, MissingColumnsError, PingFrameError


def make_pings(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Pings frame from dicts with at least vehicle_id, timestamp (ISO), lat, lon."""
    df = pd.DataFrame(rows)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    for col in ("speed_kmh", "heading_deg", "accuracy_m"):
        if col not in df:
            df[col] = np.nan
    if "row" not in df:
        df["row"] = np.arange(1, len(df) + 1)
    if "speed_flag" not in df:
        df["speed_flag"] = False
    return df


def _ping(vehicle_id: str, ts: str, **extra: Any) -> dict[str, Any]:
    return {"vehicle_id": vehicle_id, "timestamp": ts, "lat": -30.03, "lon": -51.22, **extra}


@pytest.fixture
def conn(db_session: Session) -> Connection:
    return db_session.connection()


def _count(conn: Connection, sql: str = "SELECT count(*) FROM fixes") -> int:
    return int(conn.execute(text(sql)).scalar_one())


def _partitions(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'fixes'::regclass"
        )
    )
    return {r[0] for r in rows}


class TestEnsureFixPartitions:
    def test_creates_one_partition_per_day(self, conn: Connection) -> None:
        """Three days inclusive give fixes_pYYYYMMDD for each, beside the DEFAULT partition."""
        created = ensure_fix_partitions(conn, dt.date(2024, 2, 28), dt.date(2024, 3, 1))
        assert created == ["fixes_p20240228", "fixes_p20240229", "fixes_p20240301"]
        assert _partitions(conn) >= {*created, "fixes_default"}

    def test_second_call_creates_nothing(self, conn: Connection) -> None:
        """Existing partitions are left alone."""
        ensure_fix_partitions(conn, dt.date(2024, 1, 1), dt.date(2024, 1, 2))
        assert ensure_fix_partitions(conn, dt.date(2024, 1, 1), dt.date(2024, 1, 2)) == []

    def test_partition_bounds_are_utc_days(self, conn: Connection) -> None:
        """A fix at 23:59:59 UTC lands in its UTC day, one at midnight in the next."""
        ensure_fix_partitions(conn, dt.date(2024, 1, 1), dt.date(2024, 1, 2))
        pings = make_pings([_ping("A", "2024-01-01T23:59:59Z"), _ping("A", "2024-01-02T00:00:00Z")])
        copy_fixes(conn, pings, source="t")
        rows = conn.execute(
            text("SELECT tableoid::regclass::text, ts FROM fixes ORDER BY ts")
        ).all()
        assert [r[0] for r in rows] == ["fixes_p20240101", "fixes_p20240102"]

    def test_moves_fixes_stranded_in_default(self, conn: Connection) -> None:
        """Fixes stored before their day's partition existed are moved into it, none lost."""
        conn.execute(
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, speed_flag, source) VALUES "
                "('A', '2023-05-05T10:00:00Z', -30, -51, "
                "ST_SetSRID(ST_MakePoint(-51, -30), 4326), false, 't')"
            )
        )
        assert _count(conn, "SELECT count(*) FROM fixes_default") == 1
        ensure_fix_partitions(conn, dt.date(2023, 5, 5), dt.date(2023, 5, 5))
        assert _count(conn, "SELECT count(*) FROM fixes_default") == 0
        assert _count(conn, "SELECT count(*) FROM fixes_p20230505") == 1

    def test_reversed_range_raises(self, conn: Connection) -> None:
        """An end before the start is refused."""
        with pytest.raises(InvalidParameterError, match="invertido"):
            ensure_fix_partitions(conn, dt.date(2024, 1, 2), dt.date(2024, 1, 1))

    def test_partition_name(self) -> None:
        """Names follow fixes_pYYYYMMDD."""
        assert partition_name(dt.date(2024, 7, 9)) == "fixes_p20240709"


class TestCopyFixes:
    def test_round_trips_every_column(self, conn: Connection) -> None:
        """Values come back as given; absent optional values are NULL; H3 cells match geo.h3."""
        pings = make_pings(
            [
                _ping(
                    "Táxi-ç1",
                    "2024-01-01T10:00:00Z",
                    speed_kmh=12.5,
                    heading_deg=90.0,
                    accuracy_m=4.0,
                    meter="occupied",
                    tariff=2,
                    driver_id="D-77",
                    speed_flag=True,
                ),
                _ping("B", "2024-01-01T10:00:05Z", meter=None, tariff=None, driver_id=None),
            ]
        )
        pings["tariff"] = pings["tariff"].astype("Int8")
        assert copy_fixes(conn, pings, source="file.csv") == 2
        rows = conn.execute(
            text(
                "SELECT vehicle_id, ts, lat, lon, ST_X(geom), ST_Y(geom), ST_SRID(geom), "
                "speed_kmh, heading_deg, accuracy_m, meter, tariff, driver_id, h3_r9, "
                "speed_flag, source FROM fixes ORDER BY ts"
            )
        ).all()
        cell9 = int(latlng_to_cells([-30.03], [-51.22], resolution=9)[0])
        assert rows[0] == (
            "Táxi-ç1",
            dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.UTC),
            -30.03,
            -51.22,
            -51.22,
            -30.03,
            4326,
            12.5,
            90.0,
            4.0,
            "occupied",
            2,
            "D-77",
            cell9,
            True,
            "file.csv",
        )
        assert rows[1][7:13] == (None, None, None, None, None, None)
        assert rows[1][14] is False

    def test_second_import_adds_nothing(self, conn: Connection) -> None:
        """Copying the same pings twice inserts them once; the second call returns 0."""
        pings = make_pings(
            [
                _ping(f"V{i % 7}", f"2024-03-0{1 + i % 3}T0{i % 10}:00:{i % 60:02d}Z")
                for i in range(300)
            ]
        )
        first = copy_fixes(conn, pings, source="a")
        assert first == len(pings.drop_duplicates(["vehicle_id", "timestamp"]))
        assert copy_fixes(conn, pings, source="a") == 0
        assert _count(conn) == first

    def test_partial_overlap_inserts_only_new(self, conn: Connection) -> None:
        """Of a batch half already stored, only the new half is inserted."""
        old = make_pings([_ping("A", f"2024-01-01T10:00:{s:02d}Z") for s in range(10)])
        copy_fixes(conn, old, source="a")
        new = make_pings([_ping("A", f"2024-01-01T10:00:{s:02d}Z") for s in range(5, 15)])
        assert copy_fixes(conn, new, source="b") == 5
        assert _count(conn) == 15
        sources = conn.execute(text("SELECT source, count(*) FROM fixes GROUP BY 1 ORDER BY 1"))
        assert sources.all() == [("a", 10), ("b", 5)]

    def test_race_falls_back_to_staging(
        self, conn: Connection, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If the pre-check misses a stored fix (a concurrent import), the conflict is absorbed."""
        copy_fixes(conn, make_pings([_ping("A", "2024-01-01T10:00:00Z")]), source="a")
        monkeypatch.setattr("db.tracking.store._any_stored", lambda *args: False)
        pings = make_pings([_ping("A", "2024-01-01T10:00:00Z"), _ping("A", "2024-01-01T10:00:15Z")])
        assert copy_fixes(conn, pings, source="b") == 1
        assert _count(conn) == 2

    def test_duplicate_in_batch_keeps_first(self, conn: Connection) -> None:
        """Two rows with the same (vehicle_id, timestamp) store the earlier row only."""
        pings = make_pings(
            [
                _ping("A", "2024-01-01T10:00:00Z", speed_kmh=1.0),
                _ping("A", "2024-01-01T10:00:00Z", speed_kmh=2.0),
            ]
        )
        assert copy_fixes(conn, pings, source="a") == 1
        assert conn.execute(text("SELECT speed_kmh FROM fixes")).scalar_one() == 1.0

    def test_creates_partitions_for_each_day(self, conn: Connection) -> None:
        """Fixes on two UTC days go to the two daily partitions, none to DEFAULT."""
        pings = make_pings([_ping("A", "2025-06-01T12:00:00Z"), _ping("A", "2025-06-02T12:00:00Z")])
        copy_fixes(conn, pings, source="a")
        assert {"fixes_p20250601", "fixes_p20250602"} <= _partitions(conn)
        assert _count(conn, "SELECT count(*) FROM fixes_default") == 0

    def test_many_rows_with_mixed_layouts(self, conn: Connection) -> None:
        """Thousands of rows with varying id lengths and NULL patterns all arrive intact."""
        rng = np.random.default_rng(3)
        n = 5000
        pings = pd.DataFrame(
            {
                "vehicle_id": [f"V{'x' * (i % 4)}{i % 50}" for i in range(n)],
                "timestamp": pd.to_datetime(1_700_000_000 + np.arange(n) * 7, unit="s", utc=True),
                "lat": rng.uniform(-30.1, -30.0, n),
                "lon": rng.uniform(-51.3, -51.1, n),
                "speed_kmh": np.where(rng.random(n) < 0.3, np.nan, rng.uniform(0, 90, n)),
                "heading_deg": np.nan,
                "accuracy_m": np.where(rng.random(n) < 0.5, np.nan, 5.0),
                "meter": rng.choice(np.array(["free", "occupied", "off", None], dtype=object), n),
                "driver_id": rng.choice(np.array(["D1", "D22", "", None], dtype=object), n),
                "speed_flag": rng.random(n) < 0.1,
            }
        )
        assert copy_fixes(conn, pings, source="mix") == n
        stored = pd.read_sql(
            text("SELECT vehicle_id, ts, lat, speed_kmh, meter, driver_id, speed_flag FROM fixes"),
            conn,
        ).sort_values("ts", ignore_index=True)
        assert stored["vehicle_id"].tolist() == pings["vehicle_id"].tolist()
        np.testing.assert_array_equal(stored["lat"].to_numpy(), pings["lat"].to_numpy())
        np.testing.assert_array_equal(
            stored["speed_kmh"].to_numpy(dtype=float), pings["speed_kmh"].to_numpy()
        )
        assert stored["meter"].tolist() == pings["meter"].tolist()
        assert stored["driver_id"].tolist() == pings["driver_id"].tolist()
        assert stored["speed_flag"].tolist() == pings["speed_flag"].tolist()

    def test_h3_cells_of_many_fixes(self, conn: Connection) -> None:
        """Stored h3_r9 of thousands of fixes equal geo.h3's indexing of each point."""
        rng = np.random.default_rng(5)
        n = 20_000
        pings = pd.DataFrame(
            {
                "vehicle_id": [f"V{i % 300}" for i in range(n)],
                "timestamp": pd.to_datetime(1_717_300_000 + np.arange(n), unit="s", utc=True),
                "lat": -30.03 + rng.normal(0, 0.03, n),
                "lon": -51.2 + rng.normal(0, 0.03, n),
            }
        )
        assert copy_fixes(conn, pings, source="h3") == n
        stored = pd.read_sql(text("SELECT lat, lon, h3_r9 FROM fixes"), conn)
        expected = latlng_to_cells(stored["lat"], stored["lon"], resolution=9).view(np.int64)
        np.testing.assert_array_equal(stored["h3_r9"].to_numpy(), expected)

    def test_empty_frame_inserts_nothing(self, conn: Connection) -> None:
        """No rows in, zero out, no error."""
        pings = make_pings([_ping("A", "2024-01-01T10:00:00Z")]).iloc[:0]
        assert copy_fixes(conn, pings, source="a") == 0

    def test_naive_timestamps_raise(self, conn: Connection) -> None:
        """Timestamps without a zone are refused."""
        pings = make_pings([_ping("A", "2024-01-01T10:00:00Z")])
        pings["timestamp"] = pings["timestamp"].dt.tz_localize(None)
        with pytest.raises(PingFrameError, match="sem fuso"):
            copy_fixes(conn, pings, source="a")

    def test_missing_column_raises(self, conn: Connection) -> None:
        """A frame without lon is refused, naming the column."""
        pings = make_pings([_ping("A", "2024-01-01T10:00:00Z")]).drop(columns="lon")
        with pytest.raises(MissingColumnsError, match="lon"):
            copy_fixes(conn, pings, source="a")

    @pytest.mark.parametrize(
        ("column", "value", "match"),
        [
            ("meter", "busy", "busy"),
            ("meter", "", "era ''"),
            ("tariff", 3, "tariff"),
            ("tariff", 1.5, "era 1.5"),
            ("tariff", "x", "não numérica"),
            ("lat", 91.0, "fora de"),
        ],
    )
    def test_bad_values_raise(self, conn: Connection, column: str, value: Any, match: str) -> None:
        """Unknown meter/tariff values and out-of-range coordinates are refused, nothing stored."""
        pings = make_pings([_ping("A", "2024-01-01T10:00:00Z", **{column: value})])
        with pytest.raises(PingFrameError, match=match):
            copy_fixes(conn, pings, source="a")
        assert _count(conn) == 0


def _constraints(conn: Connection, table: str) -> set[tuple[str, str]]:
    rows = conn.execute(
        text(
            "SELECT contype, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = CAST(:t AS regclass)"
        ),
        {"t": table},
    )
    return {(r[0], r[1]) for r in rows}


class TestCopyFixesNewDays:
    def test_new_day_partition_matches_a_declared_one(self, conn: Connection) -> None:
        """A day loaded into a new table ends attached, with the same constraints and key."""
        ensure_fix_partitions(conn, dt.date(2024, 4, 1), dt.date(2024, 4, 1))
        pings = make_pings([_ping("A", "2024-04-02T10:00:00Z"), _ping("B", "2024-04-02T11:00:00Z")])
        assert copy_fixes(conn, pings, source="a") == 2
        assert "fixes_p20240402" in _partitions(conn)
        assert _constraints(conn, "fixes_p20240402") == _constraints(conn, "fixes_p20240401")
        parent_index = conn.execute(
            text(
                "SELECT i.inhparent::regclass::text FROM pg_inherits i "
                "WHERE i.inhrelid = CAST('fixes_p20240402_pkey' AS regclass)"
            )
        ).scalar_one()
        assert parent_index == "pk_fixes"
        assert copy_fixes(conn, pings, source="a") == 0

    def test_rows_stored_in_key_order(self, conn: Connection) -> None:
        """Shuffled pings with mixed NULLs and id lengths are laid on disk by (vehicle_id, ts)."""
        rng = np.random.default_rng(7)
        n = 3000
        pings = pd.DataFrame(
            {
                "vehicle_id": [f"V{'x' * (i % 3)}{i % 40}" for i in range(n)],
                "timestamp": pd.to_datetime(1_717_200_000 + np.arange(n) * 5, unit="s", utc=True),
                "lat": rng.uniform(-30.1, -30.0, n),
                "lon": rng.uniform(-51.3, -51.1, n),
                "accuracy_m": np.where(rng.random(n) < 0.5, np.nan, 5.0),
                "meter": rng.choice(np.array(["free", "occupied", None], dtype=object), n),
            }
        ).sample(frac=1.0, random_state=1)
        assert copy_fixes(conn, pings, source="a") == n
        stored = conn.execute(
            text("SELECT vehicle_id, ts FROM fixes_p20240601 ORDER BY ctid")
        ).all()
        assert len(stored) == n
        assert stored == sorted(stored, key=lambda r: (r[0].encode(), r[1]))

    def test_existing_and_new_days_in_one_batch(self, conn: Connection) -> None:
        """Rows of a day already holding fixes and of a new day are both stored, once."""
        copy_fixes(conn, make_pings([_ping("A", "2024-05-01T10:00:00Z")]), source="a")
        pings = make_pings(
            [
                _ping("A", "2024-05-01T10:00:00Z"),  # already stored
                _ping("B", "2024-05-01T10:00:00Z"),
                _ping("A", "2024-05-02T10:00:00Z"),
            ]
        )
        assert copy_fixes(conn, pings, source="b") == 2
        rows = conn.execute(
            text("SELECT tableoid::regclass::text, vehicle_id, source FROM fixes ORDER BY ts, 2")
        ).all()
        assert rows == [
            ("fixes_p20240501", "A", "a"),
            ("fixes_p20240501", "B", "b"),
            ("fixes_p20240502", "A", "b"),
        ]

    def test_fixes_stranded_in_default_are_moved_not_duplicated(self, conn: Connection) -> None:
        """A new day with fixes already in DEFAULT gets its partition; stored fixes are skipped."""
        conn.execute(
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, speed_flag, source) VALUES "
                "('A', '2023-07-07T10:00:00Z', -30, -51, "
                "ST_SetSRID(ST_MakePoint(-51, -30), 4326), false, 'old')"
            )
        )
        pings = make_pings([_ping("A", "2023-07-07T10:00:00Z"), _ping("A", "2023-07-07T10:00:15Z")])
        assert copy_fixes(conn, pings, source="new") == 1
        assert _count(conn, "SELECT count(*) FROM fixes_default") == 0
        assert _count(conn, "SELECT count(*) FROM fixes_p20230707") == 2

    def test_encoding_error_reaches_the_caller(
        self, conn: Connection, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An error raised while encoding in the background thread is raised by copy_fixes."""

        def broken(*args: object, **kwargs: object) -> None:
            raise OverflowError("h3 quebrou")

        monkeypatch.setattr("db.tracking.store.latlng_to_cells", broken)
        with pytest.raises(OverflowError, match="h3 quebrou"):
            copy_fixes(conn, make_pings([_ping("A", "2024-01-01T10:00:00Z")]), source="a")


def _place_indexes(conn: Connection) -> dict[str, bool]:
    """Indexes on (h3_r9, ts) of fixes' partitions: name -> valid."""
    rows = conn.execute(
        text(
            "SELECT c.relname, i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'fixes_p%' "
            "AND pg_get_indexdef(c.oid) LIKE '%(h3_r9, ts)'"
        )
    )
    return {str(r[0]): bool(r[1]) for r in rows}


class TestPlaceIndex:
    """The place index (h3_r9, ts): built for closed days, off the write path (concurrently,
    outside any transaction: each test has a database of its own)."""

    def test_writes_do_not_build_it(self, conn: Connection) -> None:
        """A day loaded by COPY and a partition made ahead have their primary key only."""
        copy_fixes(conn, make_pings([_ping("A", "2024-04-02T10:00:00Z")]), source="a")
        ensure_fix_partitions(conn, dt.date(2024, 4, 3), dt.date(2024, 4, 3))
        assert _place_indexes(conn) == {}

    def test_closed_days_get_it_today_does_not(self, own_engine: Engine) -> None:
        """Every closed day lacking it gets one; today's partition stays without; idempotent."""
        today = dt.datetime.now(dt.UTC).date()
        now = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=5)
        with own_engine.begin() as conn:
            pings = [_ping("A", "2024-03-01T10:00:00Z"), _ping("B", "2024-03-02T10:00:00Z")]
            copy_fixes(conn, make_pings([*pings, _ping("A", now.isoformat())]), source="a")
        seen: list[str] = []
        built = index_closed_days(own_engine, before=today, progress=seen.append)
        assert built == ["fixes_p20240301_h3_r9_ts", "fixes_p20240302_h3_r9_ts"]
        assert seen == ["fixes_p20240301", "fixes_p20240302"]
        with own_engine.connect() as conn:
            assert _place_indexes(conn) == dict.fromkeys(built, True)
        assert index_closed_days(own_engine, before=today) == []

    def test_an_invalid_index_is_built_again(self, own_engine: Engine) -> None:
        """An index left invalid by a failed concurrent build is dropped and rebuilt valid."""
        with own_engine.begin() as conn:
            pings = [_ping("A", "2024-03-01T10:00:00Z"), _ping("B", "2024-03-01T10:00:00Z")]
            copy_fixes(conn, make_pings(pings), source="a")
        with (
            own_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
            pytest.raises(DBAPIError, match="could not create unique index"),
        ):  # two fixes share (h3_r9, ts): the unique build fails and leaves its index invalid
            conn.execute(
                text(
                    "CREATE UNIQUE INDEX CONCURRENTLY fixes_p20240301_h3_r9_ts "
                    "ON fixes_p20240301 (h3_r9, ts)"
                )
            )
        with own_engine.connect() as conn:
            assert _place_indexes(conn) == {"fixes_p20240301_h3_r9_ts": False}
        built = index_closed_days(own_engine, before=dt.date(2024, 3, 2))
        assert built == ["fixes_p20240301_h3_r9_ts"]
        with own_engine.connect() as conn:
            assert _place_indexes(conn) == {"fixes_p20240301_h3_r9_ts": True}
            definition = conn.execute(
                text("SELECT pg_get_indexdef('fixes_p20240301_h3_r9_ts'::regclass)")
            ).scalar_one()
        assert not definition.startswith("CREATE UNIQUE")

    def test_place_queries_use_it(self, own_engine: Engine) -> None:
        """A cell x time query on a closed day is an index scan of that day's index."""
        cell = int(latlng_to_cells([-30.03], [-51.22], resolution=9)[0])
        with own_engine.begin() as conn:
            pings = [_ping(f"V{i}", f"2024-03-01T10:{i:02d}:00Z") for i in range(50)]
            copy_fixes(conn, make_pings(pings), source="a")
        index_closed_days(own_engine, before=dt.date(2024, 3, 2))
        with own_engine.connect() as conn:
            conn.execute(text("SET enable_seqscan = off"))
            plan = "\n".join(
                conn.execute(
                    text(
                        "EXPLAIN SELECT vehicle_id FROM fixes WHERE h3_r9 = :c "
                        "AND ts >= '2024-03-01T10:00:00Z' AND ts < '2024-03-01T11:00:00Z'"
                    ),
                    {"c": cell},
                ).scalars()
            )
        assert "fixes_p20240301_h3_r9_ts" in plan


class TestCopyFixesConcurrent:
    def test_two_imports_of_a_new_day(self, db_engine: Engine) -> None:
        """Two transactions importing overlapping pings of a new day store each fix once."""
        first = make_pings([_ping("A", f"2037-03-04T10:00:{s:02d}Z") for s in range(0, 40)])
        second = make_pings([_ping("A", f"2037-03-04T10:00:{s:02d}Z") for s in range(20, 60)])
        results: dict[str, int] = {}
        try:
            with db_engine.begin() as one:
                results["one"] = copy_fixes(one, first, source="one")

                def run_two() -> None:
                    with db_engine.begin() as two:
                        results["two"] = copy_fixes(two, second, source="two")

                worker = threading.Thread(target=run_two)
                worker.start()
                worker.join(timeout=1.0)
                assert worker.is_alive()  # waits for the first import's partition lock
            worker.join(timeout=60)
            assert results == {"one": 40, "two": 20}
            with db_engine.connect() as conn:
                assert _count(conn, "SELECT count(*) FROM fixes_p20370304") == 60
        finally:
            with db_engine.begin() as conn:
                conn.execute(text("DROP TABLE IF EXISTS fixes_p20370304"))


class TestCopyFixesReimport:
    def test_only_missing_fixes_are_copied(
        self, conn: Connection, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Re-importing a batch with extra fixes copies just those, directly, across vehicles."""
        base = [
            _ping(v, f"2024-08-0{d}T1{h}:00:00Z")
            for v in ("Táxi-ç1", "B", "b", "C")
            for d in (1, 2)
            for h in range(3)
        ]
        copy_fixes(conn, make_pings(base), source="a")
        copied: list[tuple[int, bool]] = []
        real = db.tracking.store._copy_existing

        def spy(conn: Connection, enc: Any, positions: Any, payload: Any, *, direct: bool) -> int:
            copied.append((len(positions), direct))
            return real(conn, enc, positions, payload, direct=direct)

        monkeypatch.setattr("db.tracking.store._copy_existing", spy)
        extra = [_ping("B", "2024-08-01T15:00:00Z"), _ping("D", "2024-08-02T10:00:00Z")]
        assert copy_fixes(conn, make_pings(base + extra), source="b") == 2
        assert copied == [(2, True)]
        assert _count(conn) == len(base) + 2
        rows = conn.execute(text("SELECT vehicle_id, ts FROM fixes WHERE source = 'b'")).all()
        assert sorted(r[0] for r in rows) == ["B", "D"]

    def test_other_vehicles_fixes_do_not_count(self, conn: Connection) -> None:
        """A stored fix of another vehicle at the same instant does not block a new one."""
        copy_fixes(conn, make_pings([_ping("A", "2024-08-05T10:00:00Z")]), source="a")
        pings = make_pings(
            [_ping("A", "2024-08-05T10:00:00Z"), _ping("AB", "2024-08-05T10:00:00Z")]
        )
        assert copy_fixes(conn, pings, source="b") == 1

    def test_wide_span_uses_conflict_path(
        self, conn: Connection, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When the composite keys would not fit in int64, ON CONFLICT still skips stored fixes."""
        stored = [_ping("A", "2024-09-01T10:00:00Z"), _ping("A", "2024-09-03T10:00:00Z")]
        assert copy_fixes(conn, make_pings(stored), source="a") == 2
        monkeypatch.setattr("db.tracking.store._keys_fit", lambda *args: False)
        more = make_pings([*stored, _ping("A", "2024-09-01T11:00:00Z")])
        assert copy_fixes(conn, more, source="b") == 1
        assert copy_fixes(conn, more, source="c") == 0
        assert _count(conn) == 3


class TestCopyRejected:
    def test_stores_reason_row_and_raw_values(self, conn: Connection) -> None:
        """Each rejected row is kept with its row number, reason and original cells as JSON."""
        rejected = pd.DataFrame(
            {
                "row": [3, 8],
                "reason": ["invalid_lat", "duplicate"],
                "vehicle_id": ["A", "B"],
                "lat": ["abc", "-30.0"],
                "timestamp": ["2024-01-01T10:00:00Z", None],
            }
        )
        assert copy_rejected(conn, rejected, source="f.csv") == 2
        rows = conn.execute(
            text("SELECT source, row, reason, raw FROM rejected_fixes ORDER BY row")
        ).all()
        assert rows[0] == (
            "f.csv",
            3,
            "invalid_lat",
            {"vehicle_id": "A", "lat": "abc", "timestamp": "2024-01-01T10:00:00Z"},
        )
        assert rows[1][3]["timestamp"] is None

    def test_reimport_adds_nothing(self, conn: Connection) -> None:
        """The same rejected rows from the same source are stored once."""
        rejected = pd.DataFrame({"row": [3], "reason": ["invalid_lat"], "lat": ["abc"]})
        assert copy_rejected(conn, rejected, source="f.csv") == 1
        assert copy_rejected(conn, rejected, source="f.csv") == 0
        assert copy_rejected(conn, rejected, source="g.csv") == 1

    def test_missing_reason_raises(self, conn: Connection) -> None:
        """A frame without a reason column is refused."""
        with pytest.raises(MissingColumnsError, match="reason"):
            copy_rejected(conn, pd.DataFrame({"row": [1]}), source="f")


class TestExactInstants:
    def test_fractional_unix_seconds_round_trip_through_a_file(
        self, conn: Connection, tmp_path: Any
    ) -> None:
        """1,000 random fractional Unix seconds in a CSV are stored to the exact microsecond."""
        from tracking.ingest import read_pings

        rng = np.random.default_rng(7)
        micros = sorted(
            {int(v) for v in 1_704_067_200 * 10**6 + rng.integers(0, 86_400 * 10**6, 1000)}
        )
        lines = [f"US,{us // 10**6}.{us % 10**6:06d},-30.03,-51.22" for us in micros]
        path = tmp_path / "micros.csv"
        path.write_text("vehicle_id,timestamp,lat,lon\n" + "\n".join(lines) + "\n")
        pings, rejected = read_pings(path, now=pd.Timestamp("2030-01-01", tz="UTC"))
        assert rejected.empty
        assert copy_fixes(conn, pings, source="micros.csv") == len(micros)
        stored = conn.execute(
            text(
                "SELECT (extract(epoch FROM ts) * 1000000)::int8 FROM fixes "
                "WHERE vehicle_id = 'US' ORDER BY ts"
            )
        ).scalars()
        assert list(stored) == micros
