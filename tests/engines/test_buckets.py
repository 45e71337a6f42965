"""The file engine (vehicle buckets spilled to disk) gives read_pings + analyze_pings' result."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from partition_scenario import (
    BOUNDARY,
    NOW,
    STANDS,
    assert_same,
    ragged_csv_lines,
    scenario_fleet,
)
from partition_scenario import contract_cells as _contract_rows
from partition_scenario import write_contract_csv as _write_csv

from engines import buckets
from engines.buckets import analyze_file, bucket_count
from engines.pipeline import AnalysisParams, analyze_pings
from tracking import ingest
from tracking._errors import InvalidParameterError, MissingColumnsError
from tracking.ingest import RawPings, read_pings
from tracking.parquet import EarlyRead


def _local(path: Path, **kw: Any) -> Any:
    pings, rejected = read_pings(path, now=NOW)
    return analyze_pings(pings, rejected, STANDS, **kw)  # cuts at as_of, counting the fixes


def _typed_parquet(tmp_path: Path, *, groups: int = 1) -> tuple[Path, int]:
    """The contract rows as a typed Parquet file of ``groups`` row groups; its path and rows."""
    cells = _contract_rows()
    typed = cells.assign(
        lat=pd.to_numeric(cells["lat"], errors="coerce"),
        lon=pd.to_numeric(cells["lon"], errors="coerce"),
    )
    path = tmp_path / "pings.parquet"
    typed.to_parquet(path, index=False, row_group_size=len(typed) // groups)
    return path, len(typed)


def _kw(tmp_path: Path) -> dict[str, Any]:
    return {"fleet": scenario_fleet(tmp_path), "boundary": BOUNDARY, "params": AnalysisParams()}


class TestAnalyzeFile:
    def test_csv_equals_local_engine(self, tmp_path: Path) -> None:
        """Many small buckets and chunks, malformed and duplicate rows: the local result."""
        path = _write_csv(tmp_path / "pings.csv", _contract_rows(), malformed_after=500)
        kw = _kw(tmp_path)
        local = _local(path, **kw)
        got, sample = analyze_file(path, STANDS, now=NOW, bucket_fixes=300, chunk_rows=257, **kw)
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)
        reasons = set(got.rejected["reason"])
        assert {"malformed_row", "duplicate", "conflicting_duplicate", "naive_timestamp"} <= reasons
        kinds = set(local.findings["kind"])
        assert {"queue_jump", "illegal_stand_formation", "unlicensed_stand_use"} <= kinds
        assert 0 < len(sample) <= len(local.pings)
        unlicensed = local.findings.loc[local.findings["kind"].eq("unlicensed_stand_use")]
        metres = [d["boarding_distance_m"] for d in unlicensed["details"]]
        assert 0.0 in metres and any(0 < m <= 30 for m in metres)  # inside, and at the edge
        drop_off = pd.Timestamp("2024-03-06T15:00:00Z")  # v5's meter on 600 m away: no finding
        assert not unlicensed["started_at"].eq(drop_off).any()
        assert local.visits["arrived_at"].eq(drop_off).any()

    def test_gzipped_csv(self, tmp_path: Path) -> None:
        """A .csv.gz (its row count estimated from the inflated text) gives the local result."""
        import gzip

        plain = _write_csv(tmp_path / "pings.csv", _contract_rows())
        path = tmp_path / "pings.csv.gz"
        path.write_bytes(gzip.compress(plain.read_bytes()))
        kw = _kw(tmp_path)
        local = _local(path, **kw)
        got, _ = analyze_file(path, STANDS, now=NOW, bucket_fixes=500, **kw)
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)

    def test_parquet_two_jobs_and_as_of(self, tmp_path: Path) -> None:
        """Typed Parquet, buckets in two forked processes, an earlier --as-of: the local result."""
        path, _ = _typed_parquet(tmp_path)
        kw = _kw(tmp_path) | {"as_of": dt.date(2024, 3, 5)}
        local = _local(path, **kw)
        got, _ = analyze_file(path, STANDS, now=NOW, bucket_fixes=400, jobs=2, **kw)
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)

    @pytest.mark.parametrize("early", [False, True], ids=["read", "early-read"])
    @pytest.mark.parametrize("jobs", [1, 2])
    def test_small_parquet_held_in_memory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, early: bool
    ) -> None:
        """A Parquet file under HELD_ROWS read whole in chunks of their own dictionaries, each
        bucket taken from memory (nothing spilled), rejected rows in several chunks: the local
        result, rows numbered as in one read. Read by a thread started before (``early``), the
        file is not read again."""

        def no_spill(*_: Any, **__: Any) -> None:
            raise AssertionError("spilled")

        def no_second_read(*_: Any, **__: Any) -> None:
            raise AssertionError("read again")

        monkeypatch.setattr(buckets, "spill", no_spill)
        path, n_rows = _typed_parquet(tmp_path, groups=5)
        kw = _kw(tmp_path)
        local = _local(path, **kw)
        ahead = EarlyRead(path, batch_rows=n_rows // 4) if early else None
        if early:
            monkeypatch.setattr(ingest, "record_batches", no_second_read)
        got, sample = analyze_file(
            path,
            STANDS,
            now=NOW,
            bucket_fixes=300,
            jobs=jobs,
            chunk_rows=n_rows // 4,
            early=ahead,
            **kw,
        )
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)
        assert got.rejected["row"].gt(n_rows // 2).any()  # rejected rows in a later chunk
        assert len(sample)

    def test_early_read_of_another_file_or_chunking_refused(self, tmp_path: Path) -> None:
        """An early read is only taken for its own file, read in the same chunks."""
        path, n_rows = _typed_parquet(tmp_path)
        other = tmp_path / "other.parquet"
        other.write_bytes(path.read_bytes())
        kw = _kw(tmp_path)
        for ahead, chunk_rows in [
            (EarlyRead(other, batch_rows=n_rows // 4), n_rows // 4),
            (EarlyRead(path, batch_rows=n_rows // 4), n_rows // 2),
        ]:
            with pytest.raises(InvalidParameterError, match="leitura antecipada"):
                analyze_file(path, STANDS, now=NOW, chunk_rows=chunk_rows, early=ahead, **kw)

    @pytest.mark.parametrize("jobs", [2, 3])
    def test_parquet_read_as_row_group_ranges(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
    ) -> None:
        """A Parquet file of many row groups read as ``jobs`` runs of them at once, rejected
        rows in several: the local result, rows numbered as in one read."""
        monkeypatch.setattr(ingest, "RANGE_MIN_ROWS", 0)
        monkeypatch.setattr(buckets, "HELD_ROWS", 0)  # spilled, not held in memory
        path, n_rows = _typed_parquet(tmp_path, groups=7)
        assert len(RawPings.open(path).ranges(jobs)) == jobs
        kw = _kw(tmp_path)
        local = _local(path, **kw)
        got, _ = analyze_file(path, STANDS, now=NOW, bucket_fixes=300, jobs=jobs, **kw)
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)
        assert got.rejected["row"].gt(n_rows // 2).any()  # rejected rows in a later range

    @pytest.mark.parametrize(
        ("rows", "jobs", "want"),
        [(3_200_000, 1, 7), (3_200_000, 2, 6), (1_400_000, 2, 4), (10_000_000, 2, 20), (1, 2, 1)],
    )
    def test_bucket_count_is_a_multiple_of_jobs(self, rows: int, jobs: int, want: int) -> None:
        """Buckets of 500k rows: rounded to a multiple of jobs, down while a quarter over."""
        assert bucket_count(rows, bucket_fixes=500_000, jobs=jobs) == want

    @pytest.mark.parametrize("jobs", [2, 3])
    def test_csv_read_as_byte_ranges(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
    ) -> None:
        """A CSV read as ``jobs`` byte ranges at once (any size allowed here), with malformed
        records in several ranges, empty lines, quoted cells and one broken over two lines (two
        malformed lines: a record is one line): the local result, rows numbered as in one
        read."""
        monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
        cells = _contract_rows()
        cells.loc[7, "driver_id"] = '"M\n58"'  # a quoted cell holding a line break
        cells.loc[900, "driver_id"] = '"M, ""58"""'
        path = tmp_path / "pings.csv"
        path.write_text("\n".join(ragged_csv_lines(cells)) + "\n", encoding="utf-8")
        assert len(RawPings.open(path).ranges(jobs)) == jobs
        kw = _kw(tmp_path)
        local = _local(path, **kw)
        got, _ = analyze_file(
            path, STANDS, now=NOW, bucket_fixes=300, chunk_rows=257, jobs=jobs, **kw
        )
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)
        assert (got.rejected["reason"] == "malformed_row").sum() == len(cells) // 400 + 3

    def test_header_only_file(self, tmp_path: Path) -> None:
        """No data rows: the empty result, not an error."""
        path = _write_csv(tmp_path / "empty.csv", _contract_rows().iloc[:0])
        local = _local(path)
        got, sample = analyze_file(path, STANDS, now=NOW)
        assert_same(got, local, positions=False)
        assert got.summary["pings_valid"] == 0 and sample.empty

    def test_missing_column_is_named(self, tmp_path: Path) -> None:
        """A file without 'lon' fails before anything is spilled, naming the column."""
        path = tmp_path / "bad.csv"
        path.write_text("vehicle_id,timestamp,lat\nv1,2024-03-04T12:00:00Z,-30\n", "utf-8")
        with pytest.raises(MissingColumnsError, match="lon"):
            analyze_file(path, STANDS)

    @pytest.mark.parametrize("bad", [{"jobs": 0}, {"bucket_fixes": 0}])
    def test_bad_sizes(self, tmp_path: Path, bad: dict[str, int]) -> None:
        """Zero jobs or zero rows per bucket is refused with the parameter's name."""
        path = _write_csv(tmp_path / "p.csv", _contract_rows().iloc[:5])
        with pytest.raises(ValueError, match=next(iter(bad))):
            analyze_file(path, STANDS, **bad)


class TestStandSuspensions:
    def test_suspensions_give_the_local_result(self, tmp_path: Path) -> None:
        """A prefixo's suspension and a driver's barring at S1: the buckets keep the fixes'
        ``driver_id`` for the driver's finding and give the local engine's result."""
        cells = _contract_rows()
        cells.loc[cells["vehicle_id"].eq("v1"), "driver_id"] = "AUX1"
        path = _write_csv(tmp_path / "pings.csv", cells)
        susp = pd.DataFrame(
            {
                "stand_id": ["S1", "S1"],
                "vehicle_id": ["v2", None],
                "driver_id": [None, "AUX1"],
                "starts_on": [dt.date(2024, 3, 1), dt.date(2024, 3, 1)],
                "ends_on": [dt.date(2024, 3, 31), None],
                "kind": ["suspension", "barred"],
            }
        )
        kw = _kw(tmp_path) | {"stand_suspensions": susp}
        local = _local(path, **kw)
        got, _ = analyze_file(path, STANDS, now=NOW, bucket_fixes=300, chunk_rows=257, **kw)
        assert_same(got, local, positions=False)
        scopes = {
            (d["suspension"]["scope"], d["use"])
            for d in local.findings["details"]
            if d.get("subtype") == "suspended_use"
        }
        assert ("driver", "boarding") in scopes or ("driver", "wait") in scopes
        assert any(scope == "vehicle" for scope, _ in scopes)


class TestSpillDictionaries:
    def test_cells_come_back_as_written(self, tmp_path: Path) -> None:
        """Many distinct cells a chunk, many buckets: each bucket file gets its own smaller
        dictionaries, and the rows read back hold the file's cells, numbered as in it."""
        import numpy as np
        import pyarrow as pa

        from engines.buckets import read_spilled, spill
        from tracking import frames as fr
        from tracking.ingest import read_csv_cells

        rng = np.random.default_rng(3)
        lines = ["vehicle_id,timestamp,lat,lon,meter,driver_id"]
        for k in range(2000):
            vehicle = f"V{int(rng.integers(400))}"
            meter = ["free", "Off", "", " occupied"][k % 4]
            lines.append(f"{vehicle},{1709553600 + k},-30.{k},-51.0,{meter},D{k % 700}")
        lines.insert(900, "V1,1709553600")  # malformed
        path = tmp_path / "pings.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        source = RawPings.open(path, chunk_rows=97)
        (tmp_path / "spill").mkdir()
        n_rows, buckets = spill(source, tmp_path / "spill", 16, jobs=1)
        assert n_rows == 2000
        sizes = []
        for bucket in buckets.values():
            for file, _ in bucket:
                with pa.ipc.open_stream(file) as reader:
                    sizes += [len(b.column(1).dictionary) for b in reader]
        assert 0 < max(sizes) < 97 // 2  # each bucket's own instants, not the chunk's 97
        frames = [source.frame(read_spilled(source, b)) for b in buckets.values()]
        got = pd.concat(frames, ignore_index=True).sort_values(fr.ROW, ignore_index=True)
        want, malformed = read_csv_cells(path, required=fr.PING_REQUIRED)
        assert malformed[fr.ROW].tolist() == [900]
        pd.testing.assert_frame_equal(got.astype("str"), want.astype("str"))
