"""A pings CSV holds one record a line: a stray quote rejects its own line only; ``,``, ``;`` or
tab separate the fields."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracking import ingest
from tracking._errors import MissingColumnsError
from tracking.ingest import RawPings, read_pings, read_raw_pings

NOW = pd.Timestamp("2024-03-05T12:00:00Z")
HEADER = "vehicle_id,timestamp,lat,lon,meter,obs"
COLUMNS = HEADER.split(",")


def _line(k: int, *, vehicle: str = "T1", obs: str = "ok", sep: str = ",") -> str:
    return sep.join(
        [vehicle, f"2024-03-04T09:{k:02d}:00-03:00", f"-30.{k:04d}", "-51.2", "free", obs]
    )


def _write(tmp_path: Path, lines: list[str], *, eol: str = "\n", last_eol: bool = True) -> Path:
    path = tmp_path / "pings.csv"
    path.write_bytes((eol.join(lines) + (eol if last_eol else "")).encode())
    return path


def _arrow_fields(line: str, sep: str = ",") -> list[str] | None:
    """Arrow's reading of one line: its fields, or None if it leaves a quoted field open."""
    fields: list[str] = []
    cell, quoted, at_start, i = "", False, True, 0
    while i < len(line):
        c = line[i]
        if quoted and c == '"' and line[i + 1 : i + 2] == '"':
            cell, i = cell + '"', i + 2
            continue
        if quoted:
            quoted = c != '"'
            cell += c if quoted else ""
        elif c == sep:
            fields.append(cell)
            cell, at_start = "", True
        elif c == '"' and at_start:
            quoted, at_start = True, False
        else:
            cell, at_start = cell + c, False
        i += 1
    return None if quoted else [*fields, cell]


def _raw_rows(source: RawPings) -> pd.DataFrame:
    """The well-formed records of a whole read, ``row`` as data rows."""
    raw = pd.concat(list(source.chunks()), ignore_index=True)
    raw["row"] = source.data_rows(raw["row"].to_numpy(dtype=np.int64))
    return raw


class TestStrayQuote:
    @pytest.mark.parametrize("eol", ["\n", "\r\n"])
    @pytest.mark.parametrize("chunk_rows", [1, 2, 1_000_000])
    @pytest.mark.parametrize(
        ("bad", "cells"),
        [
            (_line(2, obs='"Centro'), {"vehicle_id": "T1", "obs": '"Centro'}),
            (_line(2, obs='"Centro, bairro'), {"meter": "free", "obs": '"Centro, bairro'}),
            (_line(2, vehicle='"T1'), {"vehicle_id": '"T1', "lat": "-30.0002", "obs": "ok"}),
            (
                _line(2, vehicle='"T1"', obs='"a ""b'),
                {"vehicle_id": "T1", "obs": '"a ""b'},
            ),
        ],
    )
    def test_rejects_its_line_only(
        self, tmp_path: Path, eol: str, chunk_rows: int, bad: str, cells: dict[str, str]
    ) -> None:
        """A quote left open in line 2 makes it a malformed_row with its cells as written; the
        lines after it are read, each with its own row."""
        lines = [HEADER, _line(1), bad, _line(3), _line(4), _line(5, vehicle="T2")]
        path = _write(tmp_path, lines, eol=eol)
        pings, rejected = read_pings(path, now=NOW, chunk_rows=chunk_rows)
        assert pings["row"].tolist() == [1, 3, 4, 5]
        assert sorted(set(pings["vehicle_id"])) == ["T1", "T2"]
        assert rejected[["row", "reason"]].values.tolist() == [[2, "malformed_row"]]
        assert rejected.iloc[0][list(cells)].to_dict() == cells

    def test_the_last_line_without_line_end(self, tmp_path: Path) -> None:
        """An open quote in the file's last line, with no line end after it: that line."""
        path = _write(tmp_path, [HEADER, _line(1), _line(2, obs='"x')], last_eol=False)
        pings, rejected = read_pings(path, now=NOW)
        assert pings["row"].tolist() == [1]
        assert rejected[["row", "reason", "obs"]].values.tolist() == [[2, "malformed_row", '"x']]

    def test_megabytes_after_the_quote(self, tmp_path: Path) -> None:
        """30,000 lines (2 MB) after an open quote: read, not an Arrow error without a line."""
        lines = [HEADER, _line(0), _line(1, obs='"Centro')]
        lines += [_line(k % 60, vehicle=f"V{k // 60}") for k in range(30_000)]
        pings, rejected = read_pings(_write(tmp_path, lines), now=NOW)
        assert len(pings) == 30_001 and pings["row"].max() == 30_002
        assert rejected[["row", "reason"]].values.tolist() == [[2, "malformed_row"]]

    def test_a_line_break_in_a_quoted_cell_makes_two_lines(self, tmp_path: Path) -> None:
        """One record a line: a quoted cell holding a line break is two malformed lines."""
        lines = [HEADER, _line(1), _line(2, obs='"a'), 'b"', _line(4)]
        pings, rejected = read_pings(_write(tmp_path, lines), now=NOW)
        assert pings["row"].tolist() == [1, 4]
        assert rejected[["row", "reason"]].values.tolist() == [
            [2, "malformed_row"],
            [3, "malformed_row"],
        ]
        assert rejected["obs"].tolist() == ['"a', ""] and rejected["vehicle_id"][1] == 'b"'

    def test_quotes_closed_on_their_line_are_cells(self, tmp_path: Path) -> None:
        """Quoted fields closed on their line, escaped quotes and quotes inside an unquoted
        field read as Arrow reads them."""
        lines = [
            HEADER,
            '"T1","2024-03-04T09:01:00-03:00","-30.1","-51.2","free","a, ""b"""',
            _line(2, vehicle='T"2'),
            _line(3, vehicle='"T"3"'),
            _line(4, vehicle='""""'),
        ]
        raw = _raw_rows(RawPings.open(_write(tmp_path, lines)))
        assert raw[["vehicle_id", "obs"]].values.tolist() == [
            ["T1", 'a, "b"'],
            ['T"2', "ok"],
            ['T3"', "ok"],
            ['"', "ok"],
        ]

    def test_whole_file_reader(self, tmp_path: Path) -> None:
        """read_raw_pings (Arrow's threaded reader) applies the same rule."""
        lines = [HEADER, _line(1), _line(2, obs='"Centro'), _line(3), _line(4)]
        raw, malformed = read_raw_pings(_write(tmp_path, lines))
        assert raw["row"].tolist() == [1, 3, 4]
        assert malformed[["row", "reason", "obs"]].values.tolist() == [
            [2, "malformed_row", '"Centro']
        ]

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        lines=st.lists(
            st.lists(st.sampled_from(["a", "b", '"', '""', ",", " "]), max_size=12).map("".join),
            min_size=1,
            max_size=12,
        ),
        eol=st.sampled_from(["\n", "\r\n"]),
    )
    def test_every_line_is_its_own_record(self, lines: list[str], eol: str) -> None:
        """Any lines of cells, quotes and commas: each non-empty line is one record, malformed
        when Arrow's reading of it alone leaves a quote open or has other than 4 fields, else
        its cells."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = _write(Path(tmp), ["vehicle_id,timestamp,lat,lon", *lines], eol=eol)
            source = RawPings.open(path, chunk_rows=3)
            raw = _raw_rows(source)
            malformed = source.malformed()
        records = [line for line in lines if line]
        want = {k: _arrow_fields(line) for k, line in enumerate(records, start=1)}
        bad = sorted(k for k, cells in want.items() if cells is None or len(cells) != 4)
        assert malformed["row"].tolist() == bad
        assert raw["row"].tolist() == sorted(set(want) - set(bad))
        got = raw[["vehicle_id", "timestamp", "lat", "lon"]].values.tolist()
        assert got == [want[k] for k in raw["row"]]


class TestLineRecords:
    LINES = [_line(1), _line(2, obs='"Cen,tro'), _line(3, vehicle='"T"3'), '"', "", _line(5)]

    @pytest.mark.parametrize("size", [1, 2, 7, 64, 1 << 20])
    @pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
    def test_reads_of_any_size(self, size: int, eol: str) -> None:
        """Read a few bytes at a time: the same lines, each open one with a marker from its
        open quote on, which gives back the line."""
        data = eol.join(self.LINES).encode() + eol.encode()
        stream = ingest._LineRecords(io.BytesIO(data), delimiter=",", fields=6)  # type: ignore[arg-type]
        got = b""
        while chunk := stream.read(size):
            assert len(chunk) <= size
            got += chunk
        out = got.decode().split(eol)[:-1]
        assert len(out) == len(self.LINES)
        for line, read in zip(self.LINES, out, strict=True):
            assert stream.original(read) == line
            opened = _arrow_fields(line) is None
            assert (read != line) == opened
            if opened:
                assert _arrow_fields(read) is not None and len(_arrow_fields(read) or []) > 6


class TestByteRanges:
    @pytest.mark.parametrize("sep", [",", ";"])
    @pytest.mark.parametrize("parts", [2, 3])
    def test_ranges_read_as_the_whole_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sep: str, parts: int
    ) -> None:
        """Open quotes in each part of the file: cut at line ends, the ranges give the records
        and malformed lines (numbers and text) of one read."""
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        lines = [HEADER.replace(",", sep)]
        for k in range(900):
            obs = '"open' if k % 200 == 7 else ("x" + sep + "y" if k % 300 == 11 else "ok")
            lines.append(_line(k % 60, vehicle=f"V{k % 13}", obs=obs, sep=sep))
        path = _write(tmp_path, lines)
        whole = RawPings.open(path, chunk_rows=100)
        want = _raw_rows(whole)
        want_bad = whole.malformed()
        assert want_bad["row"].tolist() == [8, 12, 208, 312, 408, 608, 612, 808]

        source = RawPings.open(path, chunk_rows=100)
        ranges = source.ranges(parts)
        assert len(ranges) == parts
        read = []
        for start, stop in ranges:
            bad: list[tuple[int | None, str]] = []
            tables = list(source.range_tables(start, stop, bad))
            read.append((tables, bad))
        offsets = source.join_ranges([(sum(t.num_rows for t in ts), bad) for ts, bad in read])
        frames = []
        for (tables, _), offset in zip(read, offsets, strict=True):
            for table in tables:
                frame = source.frame(table)
                frames.append(frame.assign(row=frame["row"] + offset))
        got = pd.concat(frames, ignore_index=True)
        got["row"] = source.data_rows(got["row"].to_numpy(dtype=np.int64))
        pd.testing.assert_frame_equal(got.astype(str), want.astype(str))
        pd.testing.assert_frame_equal(source.malformed(), want_bad)


class TestSeparator:
    @pytest.mark.parametrize("sep", [";", "\t"])
    def test_semicolon_or_tab(self, tmp_path: Path, sep: str) -> None:
        """A file separated by ';' (Excel in pt-BR) or tab reads as the contract's; decimal
        commas are invalid coordinates, row by row; a malformed line keeps its cells."""
        lines = [HEADER.replace(",", sep), _line(1, sep=sep), _line(2, sep=sep)]
        lines.append(_line(3, sep=sep).replace("-30.0003", "-30,0003"))
        lines.append(_line(4, sep=sep) + sep + "extra")
        lines.append(_line(5, obs='"open' + sep + "x", sep=sep))
        pings, rejected = read_pings(_write(tmp_path, lines), now=NOW)
        assert pings["row"].tolist() == [1, 2]
        assert pings["lat"].tolist() == [-30.0001, -30.0002]
        assert rejected[["row", "reason", "lat", "obs"]].values.tolist() == [
            [3, "invalid_coordinates", "-30,0003", "ok"],
            [4, "malformed_row", "-30.0004", f"ok{sep}extra"],
            [5, "malformed_row", "-30.0005", f'"open{sep}x'],
        ]

    def test_a_missing_column_is_still_named(self, tmp_path: Path) -> None:
        """A ';' file without 'lon' names that column only."""
        path = _write(tmp_path, ["vehicle_id;timestamp;lat", "T1;2024-03-04T12:00:00Z;-30"])
        with pytest.raises(MissingColumnsError, match=r"obrigatória\(s\) lon \("):
            read_pings(path, now=NOW)
