"""Reading ping files: CSV and Parquet, both timestamp notations, file errors, rejected.csv."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracking import frames as fr
from tracking import ingest
from tracking._errors import (
    EmptyFileError,
    InvalidParameterError,
    MalformedFileError,
    MissingColumnsError,
    ReservedColumnError,
    UnsupportedFormatError,
)
from tracking.ingest import RawPings, read_pings, write_rejected
from tracking.validate import validate_pings

NOW = pd.Timestamp("2024-03-04T12:00:00Z")
HEADER = "vehicle_id,timestamp,lat,lon,meter,tariff\n"


def _csv(tmp_path: Path, text: str, name: str = "pings.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestReadPingsCsv:
    def test_iso_with_offset(self, tmp_path: Path) -> None:
        """ISO 8601 timestamps with offsets are read as UTC; meter and tariff typed."""
        path = _csv(
            tmp_path,
            HEADER
            + "12,2024-03-04T09:00:00-03:00,-30.0277,-51.2287,occupied,1\n"
            + "12,2024-03-04T09:00:15-03:00,-30.0278,-51.2288,occupied,2\n",
        )
        pings, rejected = read_pings(path, now=NOW)
        assert rejected.empty
        assert pings["timestamp"].tolist() == [
            pd.Timestamp("2024-03-04T12:00:00Z"),
            pd.Timestamp("2024-03-04T12:00:15Z"),
        ]
        assert pings["tariff"].tolist() == [1, 2]
        assert pings["vehicle_id"].tolist() == ["12", "12"]

    def test_unix_seconds(self, tmp_path: Path) -> None:
        """Unix seconds (UTC) are read as instants; identifiers stay text ("007")."""
        path = _csv(tmp_path, HEADER + "007,1709553600,-30.0,-51.0,,\n")
        pings, rejected = read_pings(path, now=NOW)
        assert rejected.empty
        assert pings["timestamp"].iloc[0] == pd.Timestamp("2024-03-04T12:00:00Z")
        assert pings["vehicle_id"].iloc[0] == "007"

    def test_cells_are_not_guessed_as_na(self, tmp_path: Path) -> None:
        """A vehicle called "NA" is a vehicle; "NaN" coordinates are invalid, not missing."""
        path = _csv(tmp_path, HEADER + "NA,1709553600,-30,-51,,\nX,1709553600,NaN,-51,,\n")
        pings, rejected = read_pings(path, now=NOW)
        assert pings["vehicle_id"].tolist() == ["NA"]
        assert rejected[["row", "reason", "lat"]].to_dict("records") == [
            {"row": 2, "reason": "invalid_coordinates", "lat": "NaN"}
        ]

    def test_rows_are_data_rows_and_bad_records_do_not_stop_the_read(self, tmp_path: Path) -> None:
        """Rows are 1-based data rows; a record with a wrong field count is malformed_row."""
        text = (
            HEADER
            + "a,1709553600,-30,-51,free,\n"
            + "b,1709553600,-30\n"  # too few fields
            + "\n"  # blank lines are not data rows
            + "c,1709553600,-30,-51,free,,extra\n"  # too many fields
            + "d,1709553600,-30,-51,free,\n"
        )
        pings, rejected = read_pings(_csv(tmp_path, text), now=NOW)
        assert pings["row"].tolist() == [1, 4]
        assert rejected[["row", "reason", "vehicle_id", "lon", "tariff"]].to_dict("records") == [
            {"row": 2, "reason": "malformed_row", "vehicle_id": "b", "lon": "", "tariff": ""},
            {
                "row": 3,
                "reason": "malformed_row",
                "vehicle_id": "c",
                "lon": "-51",
                "tariff": ",extra",
            },
        ]

    def test_bom_blanks_in_header_and_gzip(self, tmp_path: Path) -> None:
        """A UTF-8 BOM and blanks around header names are tolerated; .csv.gz is read."""
        text = "\ufeff vehicle_id , timestamp ,lat,lon\nv,1709553600,-30,-51\n"
        path = tmp_path / "pings.csv.gz"
        path.write_bytes(gzip.compress(text.encode("utf-8")))
        pings, rejected = read_pings(path, now=NOW)
        assert rejected.empty and pings["vehicle_id"].tolist() == ["v"]

    def test_header_only_gives_empty_frames(self, tmp_path: Path) -> None:
        """A header without data rows is not an error: empty, typed frames."""
        pings, rejected = read_pings(_csv(tmp_path, HEADER), now=NOW)
        assert pings.empty and rejected.empty
        assert list(pings.columns) == list(fr.PING_COLUMNS)


class TestReadPingsParquet:
    def test_tz_aware_datetimes_and_numbers(self, tmp_path: Path) -> None:
        """Parquet with a tz-aware timestamp column and float coordinates."""
        path = tmp_path / "pings.parquet"
        pd.DataFrame(
            {
                "vehicle_id": ["a", "a"],
                "timestamp": pd.to_datetime(
                    ["2024-03-04T09:00:00", "2024-03-04T09:00:15"]
                ).tz_localize("America/Sao_Paulo"),
                "lat": [-30.0277, np.nan],
                "lon": [-51.2287, -51.0],
                "meter": ["occupied", "free"],
                "tariff": pd.array([1, None], dtype="Int64"),
            }
        ).to_parquet(path)
        pings, rejected = read_pings(path, now=NOW)
        assert pings["timestamp"].tolist() == [pd.Timestamp("2024-03-04T12:00:00Z")]
        assert pings["tariff"].tolist() == [1]
        assert rejected[["row", "reason", "lat", "timestamp"]].to_dict("records") == [
            {
                "row": 2,
                "reason": "missing_coordinates",
                "lat": "",
                "timestamp": "2024-03-04T09:00:15-03:00",
            }
        ]

    def test_unix_seconds_and_integer_ids(self, tmp_path: Path) -> None:
        """Integer Unix seconds and integer vehicle ids (with a null) read as text ids."""
        path = tmp_path / "pings.parquet"
        table = pa.table(
            {
                "vehicle_id": pa.array([20000589, None], type=pa.int64()),
                "timestamp": pa.array([1709553600, 1709553615], type=pa.int64()),
                "lat": [-30.0, -30.0],
                "lon": [-51.0, -51.0],
            }
        )
        pq.write_table(table, path)
        pings, rejected = read_pings(path, now=NOW)
        assert pings["vehicle_id"].tolist() == ["20000589"]
        assert pings["timestamp"].iloc[0] == pd.Timestamp("2024-03-04T12:00:00Z")
        assert rejected[["row", "reason", "timestamp"]].to_dict("records") == [
            {"row": 2, "reason": "empty_vehicle_id", "timestamp": "1709553615"}
        ]

    def test_naive_datetimes_rejected(self, tmp_path: Path) -> None:
        """A Parquet timestamp column without a time zone: rows rejected as naive."""
        path = tmp_path / "pings.parquet"
        pd.DataFrame(
            {
                "vehicle_id": ["a"],
                "timestamp": pd.to_datetime(["2024-03-04T09:00:00"]),
                "lat": [-30.0],
                "lon": [-51.0],
            }
        ).to_parquet(path)
        pings, rejected = read_pings(path, now=NOW)
        assert pings.empty
        assert rejected["reason"].tolist() == ["naive_timestamp"]


class TestReadPingsErrors:
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_missing_columns_named_in_portuguese(self, tmp_path: Path, suffix: str) -> None:
        """A file without lat and lon fails with a message naming both columns."""
        frame = pd.DataFrame({"vehicle_id": ["a"], "timestamp": ["1709553600"], "latitude": ["1"]})
        path = tmp_path / f"pings{suffix}"
        if suffix == ".csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path)
        with pytest.raises(MissingColumnsError, match=r"obrigatória\(s\) lat, lon \(colunas"):
            read_pings(path, now=NOW)

    def test_empty_file(self, tmp_path: Path) -> None:
        """A zero-byte CSV is an EmptyFileError, not a traceback from the parser."""
        with pytest.raises(EmptyFileError, match="arquivo vazio"):
            read_pings(_csv(tmp_path, ""), now=NOW)

    def test_empty_parquet_file(self, tmp_path: Path) -> None:
        """A zero-byte Parquet file is an EmptyFileError too."""
        path = tmp_path / "pings.parquet"
        path.write_bytes(b"")
        with pytest.raises(EmptyFileError, match="arquivo vazio"):
            read_pings(path, now=NOW)

    def test_unknown_extension(self, tmp_path: Path) -> None:
        """A .json file is refused with the list of supported extensions."""
        path = tmp_path / "pings.json"
        path.write_text("[]")
        with pytest.raises(UnsupportedFormatError, match=r"não suportado: pings\.json.*\.parquet"):
            read_pings(path, now=NOW)

    def test_reserved_column(self, tmp_path: Path) -> None:
        """An input column called "reason" would clash with rejected.csv: refused."""
        path = _csv(tmp_path, "vehicle_id,timestamp,lat,lon,reason\na,1709553600,-30,-51,x\n")
        with pytest.raises(ReservedColumnError, match="reason"):
            read_pings(path, now=NOW)

    @pytest.mark.parametrize(
        ("column", "values"),
        [("vehicle_id", [["a"], ["b"]]), ("vehicle_id", [{"a": 1}, None]), ("tags", [["x"], []])],
    )
    def test_parquet_nested_column(self, tmp_path: Path, column: str, values: list[Any]) -> None:
        """A column of lists or structs, of the contract or not, refuses the file by name."""
        table = {"vehicle_id": ["v1", "v2"], "timestamp": [1709553600, 1709553601]}
        table |= {"lat": [-30.0, -30.0], "lon": [-51.0, -51.0], column: values}
        path = tmp_path / "p.parquet"
        pq.write_table(pa.table(table), path)
        with pytest.raises(MalformedFileError, match=f"a coluna '{column}' é do tipo"):
            read_pings(path, now=NOW)

    def test_header_not_utf8(self, tmp_path: Path) -> None:
        """A header that is not UTF-8 makes a MalformedFileError (a record: TestBytesNotUtf8)."""
        path = tmp_path / "pings.csv"
        path.write_bytes(HEADER.replace("meter", "taxímetro").encode("latin-1"))
        with pytest.raises(MalformedFileError, match="não foi possível ler o cabeçalho"):
            read_pings(path, now=NOW)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A path that does not exist raises FileNotFoundError (shown by the CLI as erro:)."""
        with pytest.raises(FileNotFoundError, match="não encontrado"):
            read_pings(tmp_path / "nope.csv", now=NOW)

    def test_errors_are_value_errors_of_the_tracking_room(self) -> None:
        """The CLI prints errors of our rooms that subclass ValueError as 'erro: ...'."""
        for cls in (
            EmptyFileError,
            MalformedFileError,
            MissingColumnsError,
            UnsupportedFormatError,
        ):
            assert issubclass(cls, ValueError)
            assert cls.__module__.split(".")[0] == "tracking"


class TestWriteRejected:
    def test_columns_and_round_trip(self, tmp_path: Path) -> None:
        """rejected.csv starts with row, reason, then the original columns, cells unchanged."""
        path = _csv(
            tmp_path,
            "lon,lat,vehicle_id,timestamp,note\n"
            + "-51,-30,a,1709553600,ok\n"
            + '-51,,a,1709553615,"sem, lat"\n',
        )
        _, rejected = read_pings(path, now=NOW)
        out = tmp_path / "rejected.csv"
        write_rejected(rejected, out)
        back = pd.read_csv(out, dtype=str, keep_default_na=False)
        assert list(back.columns) == [
            "row",
            "reason",
            "lon",
            "lat",
            "vehicle_id",
            "timestamp",
            "note",
        ]
        assert back.to_dict("records") == [
            {
                "row": "2",
                "reason": "missing_coordinates",
                "lon": "-51",
                "lat": "",
                "vehicle_id": "a",
                "timestamp": "1709553615",
                "note": "sem, lat",
            }
        ]

    def test_requires_row_and_reason(self, tmp_path: Path) -> None:
        """A frame without the reason column is refused."""
        with pytest.raises(MissingColumnsError, match="reason"):
            write_rejected(pd.DataFrame({"row": [1]}), tmp_path / "r.csv")


def _messy_rows(n: int, seed: int) -> list[str]:
    """CSV lines of ``n`` fixes with bad cells, duplicates of every kind, shuffled."""
    rng = np.random.default_rng(seed)
    cells = {
        "vehicle_id": ["V1", "V2", " V1", "", "V3"],
        "timestamp": [
            "1709553600",
            "1709553615",
            "2024-03-04T09:00:00-03:00",
            "2024-03-04T12:00:15Z",
            "2024-03-04T09:00:00",
            "ontem",
            "",
        ],
        "lat": ["-30.0277", "-30.02770", "-30.1", "", "95", "x"],
        "lon": ["-51.2287", "-51.2", "0"],
        "meter": ["free", "Free ", "occupied", "", "busy"],
        "note": ["", "a", "b,c"],
    }
    rows = [
        ",".join(
            f'"{v}"' if "," in v else v
            for v in (str(rng.choice(np.array(vals, dtype=object))) for vals in cells.values())
        )
        for _ in range(n)
    ]
    rows += [rows[i] for i in rng.integers(0, n, n // 4)]  # exact copies, anywhere
    order = rng.permutation(len(rows))
    lines = [rows[i] for i in order]
    lines.insert(len(lines) // 3, "V9,1709553600")  # malformed: too few fields
    lines.insert(len(lines) // 2, "")  # blank line
    return [",".join(cells), *lines]


class TestReadPingsChunked:
    TEXT = (
        HEADER
        + "a,1709553600,-30,-51,free,\n"  # 1 kept
        + "b,1709553600,-30\n"  # 2 malformed
        + "a,1709553615,-30,-51,free,\n"  # 3 kept
        + "\n"
        + "a,1709553600,-30,-51,free,\n"  # 4 duplicate of 1 (earlier chunk)
        + "a,1709553600,-30.0,-51,free,\n"  # 5 same values, other text: conflicting
        + "a,1709553600,-30.0,-51,free,\n"  # 6 duplicate of 5 (a conflicting row)
        + "a,1709553615,-31,-51,free,\n"  # 7 conflicting with 3
        + "c,1709553600,,-51,,\n"  # 8 missing coordinates
        + "c,1709553600,-30,-51,,,x\n"  # 9 malformed: too many fields
        + " a,1709553615,-30,-51,free,\n"  # 10 same key as 3 once stripped: conflicting
    )

    @pytest.mark.parametrize("chunk_rows", [1, 2, 3, 4, 100])
    def test_chunk_size_does_not_change_the_result(self, tmp_path: Path, chunk_rows: int) -> None:
        """Rows, reasons and pings are the same whatever the chunk size."""
        path = _csv(tmp_path, self.TEXT)
        pings, rejected = read_pings(path, now=NOW, chunk_rows=chunk_rows)
        assert pings["row"].tolist() == [1, 3]
        assert dict(zip(rejected["row"], rejected["reason"], strict=True)) == {
            2: "malformed_row",
            4: "duplicate",
            5: "conflicting_duplicate",
            6: "duplicate",
            7: "conflicting_duplicate",
            8: "missing_coordinates",
            9: "malformed_row",
            10: "conflicting_duplicate",
        }
        whole_pings, whole_rejected = read_pings(path, now=NOW, chunk_rows=10**6)
        pd.testing.assert_frame_equal(pings, whole_pings)
        pd.testing.assert_frame_equal(rejected, whole_rejected)

    def test_rejected_rows_keep_their_cells_across_chunks(self, tmp_path: Path) -> None:
        """A duplicate found in a later chunk keeps its own cells, as written."""
        _, rejected = read_pings(_csv(tmp_path, self.TEXT), now=NOW, chunk_rows=2)
        row5 = rejected.loc[rejected["row"] == 5].iloc[0]
        row10 = rejected.loc[rejected["row"] == 10].iloc[0]
        assert (row5["lat"], row10["vehicle_id"]) == ("-30.0", " a")

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_random_messy_file_same_as_one_chunk(self, tmp_path: Path, seed: int) -> None:
        """Shuffled bad rows and duplicates: chunks of 7 rows give the one-chunk result."""
        path = _csv(tmp_path, "\n".join(_messy_rows(300, seed)) + "\n")
        whole = read_pings(path, now=NOW, chunk_rows=10**6)
        assert set(whole[1]["reason"]) >= {"duplicate", "conflicting_duplicate", "malformed_row"}
        for got, expected in zip(read_pings(path, now=NOW, chunk_rows=7), whole, strict=True):
            pd.testing.assert_frame_equal(got, expected)

    def test_parquet_in_chunks(self, tmp_path: Path) -> None:
        """Parquet read 2 rows at a time: float ids are converted alike in every chunk."""
        path = tmp_path / "pings.parquet"
        table = pa.table(
            {
                "vehicle_id": pa.array([12.0, 12.0, None, 14.5, 12.0], type=pa.float64()),
                "timestamp": pa.array([1709553600, 1709553615, 1709553600, 1709553600, 1709553600]),
                "lat": [-30.0, -30.0, -30.0, -30.0, -30.0],
                "lon": [-51.0, -51.0, -51.0, -51.0, -51.0],
            }
        )
        pq.write_table(table, path, row_group_size=3)
        pings, rejected = read_pings(path, now=NOW, chunk_rows=2)
        assert pings["vehicle_id"].tolist() == ["12.0", "12.0", "14.5"]
        assert rejected[["row", "reason", "vehicle_id"]].to_dict("records") == [
            {"row": 3, "reason": "empty_vehicle_id", "vehicle_id": ""},
            {"row": 5, "reason": "duplicate", "vehicle_id": "12.0"},
        ]
        for got, expected in zip(
            (pings, rejected), read_pings(path, now=NOW, chunk_rows=10**6), strict=True
        ):
            pd.testing.assert_frame_equal(got, expected)

    def test_integral_float_ids_in_a_later_chunk(self, tmp_path: Path) -> None:
        """Ids 12.0 and 13.0 (an int column with a null) read as "12", "13" in every chunk."""
        path = tmp_path / "pings.parquet"
        pq.write_table(
            pa.table(
                {
                    "vehicle_id": pa.array([12.0, None, 13.0], type=pa.float64()),
                    "timestamp": pa.array([1709553600] * 3),
                    "lat": [-30.0] * 3,
                    "lon": [-51.0] * 3,
                }
            ),
            path,
        )
        pings, _ = read_pings(path, now=NOW, chunk_rows=1)
        assert pings["vehicle_id"].tolist() == ["12", "13"]

    def test_header_only_in_chunks(self, tmp_path: Path) -> None:
        """A header without data rows gives empty typed frames with a small chunk size too."""
        pings, rejected = read_pings(_csv(tmp_path, HEADER), now=NOW, chunk_rows=1)
        assert pings.empty and rejected.empty
        assert list(rejected.columns) == ["row", "reason", *HEADER.strip().split(",")]

    @pytest.mark.parametrize("chunk_rows", [0, -5, 2.5, True])
    def test_bad_chunk_rows(self, tmp_path: Path, chunk_rows: Any) -> None:
        """A chunk size that is not a positive integer is refused, naming the argument."""
        with pytest.raises(InvalidParameterError, match="'chunk_rows' era"):
            read_pings(_csv(tmp_path, HEADER), now=NOW, chunk_rows=chunk_rows)


class TestDictionaryColumns:
    """Ping columns read as dictionaries give the verdicts of the cells read as plain text."""

    @pytest.mark.parametrize(("seed", "chunk_rows"), [(0, 7), (1, 50), (2, 10**6)])
    def test_csv_same_as_the_text_reader(self, tmp_path: Path, seed: int, chunk_rows: int) -> None:
        """Odd cells in the dictionary columns (blanks, case, NUL), many distinct instants and
        malformed records: read_pings gives what validating the text cells gives."""
        rng = np.random.default_rng(seed)
        lines = _messy_rows(300, seed)
        extra = [f"{1709553600 + int(s)}" for s in rng.integers(0, 10**5, 200)]
        lines += [f"V{k % 37},{t},-30.0,-51.0,Off,n" for k, t in enumerate(extra)]
        lines += ["V\x00,1709553600,-30,-51,free,", "V4, 1709553601 ,-30,-51, OFF ,"]
        path = _csv(tmp_path, "\n".join(lines) + "\n")
        raw, malformed = ingest.read_csv_cells(path, required=fr.PING_REQUIRED)
        pings, rejected = validate_pings(raw, now=NOW)
        want = pd.concat([malformed, rejected], ignore_index=True).sort_values(
            fr.ROW, kind="stable", ignore_index=True
        )
        got_pings, got_rejected = read_pings(path, now=NOW, chunk_rows=chunk_rows)
        pd.testing.assert_frame_equal(got_pings, pings)
        pd.testing.assert_frame_equal(got_rejected, want)
        assert {"invalid_text", "duplicate", "malformed_row"} <= set(want[fr.REASON])

    def test_parquet_text_columns_with_nulls(self, tmp_path: Path) -> None:
        """Parquet text columns read from their dictionary pages: a null is an empty cell."""
        path = tmp_path / "pings.parquet"
        vehicles = ["a", None, " a", "b", "a", "a"]
        drivers = ["d1", "d1", None, "", "d\x00", "d1"]
        table = pa.table(
            {
                "vehicle_id": pa.array(vehicles, type=pa.string()),
                "timestamp": pa.array([1709553600 + k for k in (0, 1, 2, 3, 4, 0)]),
                "lat": [-30.0] * 6,
                "lon": [-51.0] * 6,
                "meter": pa.array(["free", "Free", None, "busy", "off", "free"]),
                "driver_id": pa.array(drivers, type=pa.large_string()),
            }
        )
        pq.write_table(table, path, row_group_size=4)
        source = RawPings.open(path, chunk_rows=3)
        assert all(
            pa.types.is_dictionary(t.schema.field(c).type)
            for t in source.tables()
            for c in ("vehicle_id", "meter", "driver_id")
        )
        raw, _ = ingest.read_raw_pings(path)
        want = validate_pings(raw, now=NOW)
        got = read_pings(path, now=NOW, chunk_rows=3)
        for g, w in zip(got, want, strict=True):
            pd.testing.assert_frame_equal(g, w)
        assert got[1][fr.REASON].tolist() == [
            "empty_vehicle_id",
            "unknown_meter",
            "invalid_text",
            "duplicate",
        ]


class TestBytesNotUtf8:
    """A byte that is not UTF-8 rejects its record only, never the whole file (Arrow alone
    refuses the file, and its invalid-row handler raises on a short record holding one)."""

    LINES = (
        b"T1,2024-03-04T08:00:00-03:00,-30.0277,-51.2287,free,",
        b"T\xe91,2024-03-04T08:01:00-03:00,-30.0277,-51.2287,free,",  # Latin-1 in the id
        b"T\xe91,2024-03-04T08:02:00-03:00,-30.0277",  # and a short record
        b"T1,2024-03-04T08:03:00-03:00,-30.0277,-51.2287,fr\xe9e,",  # in the meter
        b"T2,2024-03-04T08:04:00-03:00,-30.0277,-51.2287,free,",
        "Tê,2024-03-04T08:05:00-03:00,-30.0277,-51.2287,free,".encode(),  # UTF-8: kept
    )

    def _file(self, tmp_path: Path, name: str) -> Path:
        data = HEADER.encode() + b"\n".join(self.LINES) + b"\n"
        path = tmp_path / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        return path

    @pytest.mark.parametrize("name", ["p.csv", "p.csv.gz"])
    @pytest.mark.parametrize("chunk_rows", [1, 1000])
    def test_only_its_record_is_rejected(
        self, tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str, chunk_rows: int
    ) -> None:
        pings, rejected = read_pings(self._file(tmp_path, name), now=NOW, chunk_rows=chunk_rows)
        assert pings["vehicle_id"].tolist() == ["T1", "T2", "Tê"]
        assert rejected[[fr.ROW, fr.REASON]].values.tolist() == [
            [2, "invalid_text"],
            [3, "malformed_row"],
            [4, "unknown_meter"],
        ]
        assert rejected["vehicle_id"].tolist() == ["T\ufffd1"] * 2 + ["T1"]
        assert "Exception ignored" not in capfd.readouterr().err

    @pytest.mark.parametrize("name", ["p.csv", "p.csv.gz"])
    def test_the_cell_reader_reads_it_alike(self, tmp_path: Path, name: str) -> None:
        """read_csv_cells (Porto's trips, read_raw_pings) reads such bytes as read_pings does."""
        path = self._file(tmp_path, name)
        raw, malformed = ingest.read_csv_cells(path, required=fr.PING_REQUIRED)
        pings, rejected = validate_pings(raw, now=NOW)
        want = pd.concat([malformed, rejected], ignore_index=True).sort_values(
            fr.ROW, kind="stable", ignore_index=True
        )
        got_pings, got_rejected = read_pings(path, now=NOW)
        pd.testing.assert_frame_equal(pings, got_pings)
        pd.testing.assert_frame_equal(want, got_rejected)

    def test_byte_ranges_read_it_as_the_whole_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        source = RawPings.open(self._file(tmp_path, "p.csv"))
        ranges = source.ranges(2)
        assert len(ranges) == 2
        ids: list[str] = []
        bad: list[tuple[int | None, str]] = []
        for start, stop in ranges:
            for table in source.range_tables(start, stop, bad):
                ids += table.column("vehicle_id").to_pylist()
        assert ids == ["T1", "T\ufffd1", "T1", "T2", "Tê"]
        assert [text for _, text in bad] == ["T\ufffd1,2024-03-04T08:02:00-03:00,-30.0277"]

    @pytest.mark.parametrize("stored", ["binary", "string", "dictionary"])
    @pytest.mark.parametrize("chunk_rows", [1, 1000])
    def test_parquet_text_that_is_not_utf8(
        self, tmp_path: Path, stored: str, chunk_rows: int
    ) -> None:
        """Parquet text stored as binary (no UTF-8 annotation), or bytes that are not UTF-8 in
        a text column: read as in a CSV, only the row holding one is rejected. In a column
        Arrow wrote as a dictionary, Arrow's own decoder refuses them: the file is refused
        with a clear message."""
        ids = pa.array([b"T1", b"T\xe91", "Tê".encode()], pa.binary())
        if stored != "binary":
            ids = ids.view(pa.string())  # the bytes as they are, unchecked
        if stored == "dictionary":
            ids = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2]), ids)
        table = pa.table(
            {
                "vehicle_id": ids,
                "timestamp": [f"2024-03-04T08:0{m}:00-03:00" for m in range(3)],
                "lat": [-30.0277] * 3,
                "lon": [-51.2287] * 3,
            }
        )
        path = tmp_path / "p.parquet"
        pq.write_table(table, path)
        if stored == "dictionary":
            with pytest.raises(MalformedFileError, match="Parquet inválido .Invalid UTF8"):
                read_pings(path, now=NOW, chunk_rows=chunk_rows)
            return
        pings, rejected = read_pings(path, now=NOW, chunk_rows=chunk_rows)
        assert pings["vehicle_id"].tolist() == ["T1", "Tê"]
        assert rejected[[fr.ROW, fr.REASON, "vehicle_id"]].values.tolist() == [
            [2, "invalid_text", "T\ufffd1"]
        ]

    @pytest.mark.parametrize("size", [1, 2, 3, 64])
    def test_a_character_cut_between_reads_comes_out_whole(self, size: int) -> None:
        """UTF-8 split across reads is kept; a lone byte, and a character the file cuts
        short, are U+FFFD."""
        data = "ação,é\n".encode() + b"\xff" + "ü".encode() + b"\xc3"
        text = ingest._Utf8(io.BytesIO(data))
        got = b""
        while chunk := text.read(size):
            got += chunk
        assert got.decode() == "ação,é\n\ufffdü\ufffd"


class TestByteRanges:
    """RawPings.ranges: cuts of a plain CSV at line ends."""

    HEADER = "vehicle_id,timestamp,lat,lon,driver_id\n"

    def test_a_cut_falls_at_the_next_line_end_whatever_the_quotes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The middle of the file follows a quote left open 2,000 lines before: the cut comes
        at the next line end (a quoted field never spans lines), ranges of whole lines."""
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        row = "v1,2024-03-04T12:00:00Z,-30.0,-51.0,"
        body = [row + '"M1\n'] + [row + "M2\n"] * 4000
        path = tmp_path / "p.csv"
        path.write_text(self.HEADER + "".join(body), encoding="utf-8")
        data = path.read_bytes()
        ranges = RawPings.open(path).ranges(2)
        middle = len(self.HEADER) + (len(data) - len(self.HEADER)) // 2
        assert ranges == [
            (len(self.HEADER), data.index(b"\n", middle) + 1),
            (ranges[1][0], len(data)),
        ]
        assert ranges[0][1] == ranges[1][0]
        assert [line for a, b in ranges for line in data[a:b].decode().splitlines(True)] == body

    def test_parquet_ranges_are_runs_of_row_groups(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Row groups of 1000, 1000, 1000 and 200 rows: cut into runs of about equal rows; one
        group, or fewer rows than RANGE_MIN_ROWS, is read whole."""
        table = pa.table(
            {
                "vehicle_id": ["v1"] * 3200,
                "timestamp": ["t"] * 3200,
                "lat": [1.0] * 3200,
                "lon": [2.0] * 3200,
            }
        )
        path = tmp_path / "p.parquet"
        pq.write_table(table, path, row_group_size=1000)
        assert RawPings.open(path).ranges(2) == []  # under RANGE_MIN_ROWS
        monkeypatch.setattr(ingest, "RANGE_MIN_ROWS", 0)
        assert RawPings.open(path).ranges(2) == [(0, 2), (2, 4)]
        assert RawPings.open(path).ranges(4) == [(0, 1), (1, 2), (2, 4)]  # 2,400: nearer 2,000
        assert RawPings.open(path).ranges(8) == [(0, 1), (1, 2), (2, 3), (3, 4)]
        assert RawPings.open(path).ranges(1) == []
        one = tmp_path / "one.parquet"
        pq.write_table(table, one)
        assert RawPings.open(one).ranges(2) == []
        bad: list[tuple[int | None, str]] = []
        rows = [t.column("row").to_pylist() for t in RawPings.open(path).range_tables(2, 4, bad)]
        assert sum(rows, []) == list(range(1, 1201)) and bad == []

    def test_small_compressed_or_unsplittable_files_are_read_whole(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "p.csv"
        path.write_text(self.HEADER + "v1,2024-03-04T12:00:00Z,-30.0,-51.0,M1\n" * 50, "utf-8")
        assert RawPings.open(path).ranges(2) == []  # under RANGE_MIN_BYTES
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        assert len(RawPings.open(path).ranges(2)) == 2
        assert RawPings.open(path).ranges(1) == []
        gz = tmp_path / "p.csv.gz"
        gz.write_bytes(gzip.compress(path.read_bytes()))
        assert RawPings.open(gz).ranges(2) == []
        long = tmp_path / "q.csv"  # the second half in one line: no cut
        long.write_text(self.HEADER + "v1,t,1,2,M1\n" + "v1,t,1,2," + "x" * 200, "utf-8")
        assert RawPings.open(long).ranges(2) == [(len(self.HEADER), long.stat().st_size)]

    @pytest.mark.parametrize("block", [1, 7, 64])
    def test_cuts_do_not_depend_on_the_read_block(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
    ) -> None:
        """The file is scanned a block at a time: blocks smaller than a line give the cuts of
        one block, whole lines each."""
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        row = "v1,2024-03-04T12:00:00Z,-30.0,-51.0,"
        cells = ["M1", '"M', '"a ""b"" c"', 'x"y', '""""']
        body = [row + cells[k % len(cells)] + "\n" for k in range(40)]
        path = tmp_path / "p.csv"
        path.write_text(self.HEADER + "".join(body), encoding="utf-8")
        data = path.read_bytes()
        whole = {parts: RawPings.open(path).ranges(parts) for parts in (2, 3, 5)}
        monkeypatch.setattr(ingest, "_SCAN_BLOCK", block)
        for parts, want in whole.items():
            ranges = RawPings.open(path).ranges(parts)
            assert ranges == want and len(ranges) == parts
            lines = [line for a, b in ranges for line in data[a:b].decode().splitlines(True)]
            assert lines == body
