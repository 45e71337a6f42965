"""Property-based fuzzing of the ping readers: no crash; each row accepted or rejected, with reason.

Contract CSV and Parquet (:func:`tracking.ingest.read_pings`) and the Porto ECML/PKDD CSV
(:func:`tracking.porto.read_porto_trips`). Bounded: a few dozen examples each, small files.
"""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracking._errors import (
    InvalidParameterError,
    MissingColumnsError,
    PingFileError,
    ReservedColumnError,
)
from tracking.ingest import read_pings
from tracking.porto import read_porto_trips

NOW = pd.Timestamp("2024-06-01T00:00:00Z")
OURS = (PingFileError, MissingColumnsError, ReservedColumnError, InvalidParameterError)
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r\n"),
    max_size=12,
)
"""Cells of one line: a record is a line (a quoted field spanning lines is refused)."""
_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
)
_CELL = st.one_of(
    _TEXT,
    _NUMBERS.map(str),
    st.sampled_from(["", " ", "NaN", "null", "-0", "1e309", "0x1A", "１２", "\u00a0"]),
)
_TIMESTAMP = st.one_of(
    _CELL,
    st.datetimes(
        min_value=pd.Timestamp("1969-01-01").to_pydatetime(),
        max_value=pd.Timestamp("2030-01-01").to_pydatetime(),
    ).flatmap(
        lambda d: st.sampled_from(
            [d.isoformat(), d.isoformat() + "Z", d.isoformat() + "-03:00", str(d.timestamp())]
        )
    ),
)
_LAT = st.one_of(_CELL, st.floats(-95, 95).map(str))
_LON = st.one_of(_CELL, st.floats(-185, 185).map(str))
_ROW = st.fixed_dictionaries(
    {
        "vehicle_id": st.one_of(_CELL, st.sampled_from(["A", "B", "C"])),
        "timestamp": _TIMESTAMP,
        "lat": _LAT,
        "lon": _LON,
    },
    optional={
        "meter": st.one_of(_CELL, st.sampled_from(["free", "occupied", "off", "FREE"])),
        "tariff": st.one_of(_CELL, st.sampled_from(["1", "2", "3", "1.0"])),
        "speed_kmh": _CELL,
        "heading_deg": _CELL,
        "accuracy_m": _CELL,
        "driver_id": _CELL,
    },
)


def _accounted(pings: pd.DataFrame, rejected: pd.DataFrame, n: int) -> None:
    """Every data row is either a valid ping or a rejected row with a reason, never both."""
    valid_rows = set(pd.to_numeric(pings["row"]).astype(int).tolist())
    rejected_rows = pd.to_numeric(rejected["row"]).astype(int).tolist()
    assert len(rejected_rows) == len(set(rejected_rows))
    assert valid_rows.isdisjoint(rejected_rows)
    assert valid_rows | set(rejected_rows) == set(range(1, n + 1))
    if len(rejected):
        assert rejected["reason"].astype(str).str.len().gt(0).all()


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r)) or ["vehicle_id"]
    for required in ("vehicle_id", "timestamp", "lat", "lon"):
        if required not in columns:
            columns.append(required)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)


class TestReadPingsFuzz:
    @FUZZ
    @given(rows=st.lists(_ROW, min_size=1, max_size=25))
    def test_csv_rows_are_accepted_or_rejected(self, rows: list[dict[str, str]]) -> None:
        """Any cells in a contract CSV: no crash, each row valid or rejected with a reason."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pings.csv"
            _write_csv(path, rows)
            pings, rejected = read_pings(path, now=NOW)
        _accounted(pings, rejected, len(rows))

    @FUZZ
    @given(rows=st.lists(_ROW, min_size=1, max_size=25), chunk=st.integers(1, 7))
    def test_csv_result_does_not_depend_on_chunks(
        self, rows: list[dict[str, str]], chunk: int
    ) -> None:
        """Reading in chunks of any size gives the same pings and rejections."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pings.csv"
            _write_csv(path, rows)
            whole = read_pings(path, now=NOW)
            parts = read_pings(path, now=NOW, chunk_rows=chunk)
        pd.testing.assert_frame_equal(whole[0], parts[0])
        pd.testing.assert_frame_equal(whole[1], parts[1])

    @FUZZ
    @given(
        text=st.one_of(
            st.text(max_size=300),
            st.text(max_size=300).map(lambda body: "vehicle_id,timestamp,lat,lon\n" + body),
        )
    )
    def test_arbitrary_text_is_a_named_error_or_accounted(self, text: str) -> None:
        """Any text as a .csv (after the contract's header, or not): a named error (pt-BR) or
        every row accounted for."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pings.csv"
            path.write_text(text, encoding="utf-8")
            try:
                pings, rejected = read_pings(path, now=NOW)
            except OURS as exc:
                assert str(exc)
                return
        n = len(pings) + len(rejected)
        _accounted(pings, rejected, n)  # rows 1..n, each once, a ping or a reasoned rejection
        assert n <= max(len(text.splitlines()) - 1, 0)  # a data row takes a line at least

    @FUZZ
    @given(
        n=st.integers(1, 20),
        data=st.data(),
    )
    def test_parquet_typed_columns(self, n: int, data: Any) -> None:
        """Parquet with numeric, text, null and datetime columns of any values: accounted for."""
        floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
        lat = data.draw(st.lists(st.one_of(st.none(), floats), min_size=n, max_size=n))
        lon = data.draw(st.lists(st.one_of(st.none(), floats), min_size=n, max_size=n))
        kind = data.draw(st.sampled_from(["text", "unix", "aware", "naive"]))
        if kind == "text":
            ts: Any = pa.array(data.draw(st.lists(_TIMESTAMP, min_size=n, max_size=n)))
        elif kind == "unix":
            values = data.draw(st.lists(st.one_of(st.none(), floats), min_size=n, max_size=n))
            ts = pa.array(values, type=pa.float64())
        else:
            stamps = data.draw(
                st.lists(
                    st.integers(0, 2_000_000_000).map(lambda s: s * 1_000_000),
                    min_size=n,
                    max_size=n,
                )
            )
            ts = pa.array(stamps, type=pa.timestamp("us", tz="UTC" if kind == "aware" else None))
        ids = data.draw(
            st.one_of(
                st.lists(st.one_of(st.none(), _TEXT), min_size=n, max_size=n).map(pa.array),
                st.lists(st.integers(-5, 5), min_size=n, max_size=n).map(pa.array),
            )
        )
        meter = pa.array(
            data.draw(
                st.lists(
                    st.one_of(st.none(), st.sampled_from(["free", "occupied", "off", "x"])),
                    min_size=n,
                    max_size=n,
                )
            ),
            type=pa.string(),
        )
        table = pa.table(
            {
                "vehicle_id": ids,
                "timestamp": ts,
                "lat": pa.array(lat, type=pa.float64()),
                "lon": pa.array(lon, type=pa.float64()),
                "meter": meter,
            }
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pings.parquet"
            pq.write_table(table, path)
            pings, rejected = read_pings(path, now=NOW)
        _accounted(pings, rejected, n)
        if len(pings):
            assert pings["lat"].between(-90, 90).all()
            assert all(math.isfinite(v) for v in pings["lon"])


_POLYLINE = st.one_of(
    st.lists(
        st.tuples(
            st.one_of(st.floats(-9, -8), st.just(math.nan)),
            st.one_of(st.floats(41, 42), st.just(math.inf)),
        ),
        max_size=6,
    ).map(lambda pts: "[" + ",".join(f"[{a},{b}]" for a, b in pts) + "]"),
    _CELL,
    st.sampled_from(["[]", "[[", "[[1]]", '[["a","b"]]', "[[1,2,3]]", "{}", "null"]),
)


class TestReadPortoFuzz:
    @FUZZ
    @given(
        trips=st.lists(
            st.fixed_dictionaries(
                {
                    "TRIP_ID": st.one_of(_CELL, st.integers(0, 10**18).map(str)),
                    "CALL_TYPE": st.one_of(_CELL, st.sampled_from(["A", "B", "C"])),
                    "ORIGIN_CALL": _CELL,
                    "ORIGIN_STAND": st.one_of(_CELL, st.integers(1, 63).map(str)),
                    "TAXI_ID": st.one_of(_CELL, st.integers(20000000, 20000010).map(str)),
                    "TIMESTAMP": st.one_of(_CELL, st.integers(1372636800, 1404171525).map(str)),
                    "DAY_TYPE": st.sampled_from(["A", "B", "C", ""]),
                    "MISSING_DATA": st.sampled_from(["False", "True", "", "x"]),
                    "POLYLINE": _POLYLINE,
                }
            ),
            min_size=1,
            max_size=10,
        )
    )
    def test_porto_rows_do_not_crash(self, trips: list[dict[str, str]]) -> None:
        """Any Porto trip records: pings and rejected rows (with a reason), or a named error."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "porto.csv"
            with path.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(trips[0]), quoting=csv.QUOTE_ALL)
                writer.writeheader()
                writer.writerows(trips)
            try:
                pings, rejected, labels = read_porto_trips(path, now=NOW)
            except OURS as exc:
                assert str(exc)
                return
        _porto_accounted(pings, rejected, labels, len(trips))
        if len(pings):
            assert pings["lat"].between(-90, 90).all()


def _porto_accounted(
    pings: pd.DataFrame, rejected: pd.DataFrame, labels: pd.DataFrame, n: int
) -> None:
    """One label per trip; each point of a trip a ping or a rejection naming its index; a trip
    that cannot be read is one rejection (no point index) and no point."""
    assert len(labels) == n
    assert rejected["reason"].astype(str).str.len().gt(0).all()
    whole = rejected["point_index"].astype(str).eq("")
    trip_rows = pd.to_numeric(rejected.loc[whole, "row"]).astype(int)
    assert trip_rows.is_unique and trip_rows.between(1, n).all()
    assert set(rejected.loc[whole, "reason"]) <= {"unparseable_timestamp", "invalid_polyline"}
    points = pd.DataFrame(
        {
            "row": pd.to_numeric(rejected.loc[~whole, "row"]).astype(int),
            "k": pd.to_numeric(rejected.loc[~whole, "point_index"]).astype(int),
        }
    )
    assert not points.duplicated().any()
    n_points = pd.Series(labels["n_points"].to_numpy(), index=range(1, n + 1))
    assert points["k"].lt(points["row"].map(n_points)).all() and points["k"].ge(0).all()
    per_row = (
        pings["row"].astype(int).value_counts().add(points["row"].value_counts(), fill_value=0)
    )
    assert per_row.reindex(n_points.index, fill_value=0).astype(int).tolist() == n_points.tolist()
    assert n_points.loc[trip_rows].eq(0).all()
    if len(pings):
        assert pings["trip_ref"].notna().all()
