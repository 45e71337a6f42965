"""``--engine dask`` on a plain file: the Dask workers read its ranges and write the dataset.

The client computes the ranges (byte ranges of a CSV, runs of row groups of a Parquet file, the
whole of a CSV.gz) and the manifest; the workers spill the ranges and write the buckets. The
files written equal ``--engine local``'s, ``rejected.csv`` row numbers included, and the client
never reads a row (its readers are made to fail in the test process: the workers, spawned
processes, keep theirs).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from partition_scenario import (
    CONTRACT,
    STANDS,
    assert_same_outputs,
    contract_cells,
    ragged_csv_lines,
    scenario_fleet,
)

from engines.dataset import DatasetError, write_dataset
from engines.distributed import dask_client
from tracking import ingest
from tracking.ingest import RawPings

TZ = "America/Sao_Paulo"
STRAY = '"M sem aspa de fecho'
"""A cell opening a quote it never closes: its line alone is malformed."""


def _cells() -> pd.DataFrame:
    """The partition scenario's cells (duplicates, conflicting and bad rows, trips across local
    midnight) plus rows whose timestamp cannot be read."""
    cells = contract_cells()
    first = cells.iloc[5].to_dict()
    extra = [first | {"timestamp": ""}, first | {"timestamp": "ontem"}]
    return pd.concat([cells.iloc[:700], pd.DataFrame(extra), cells.iloc[700:]], ignore_index=True)


def _csv_text(cells: pd.DataFrame) -> str:
    """The cells as CSV with a malformed record every 400, blank lines, and a stray quote by
    the file's middle byte (the naive cut of two byte ranges)."""
    records = [",".join(rec) for rec in cells[CONTRACT].itertuples(index=False)]
    half = sum(len(r) + 1 for r in records) // 2
    at, seen = 0, 0
    while seen + len(records[at]) + 1 < half:
        seen += len(records[at]) + 1
        at += 1
    cells = cells.copy()
    cells.loc[at, "driver_id"] = STRAY
    return "\n".join(ragged_csv_lines(cells)) + "\n"


@pytest.fixture(scope="module")
def pings_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ranges") / "pings.csv"
    path.write_text(_csv_text(_cells()), encoding="utf-8")
    return path


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any file is cut into ranges (the client computes them: this process)."""
    monkeypatch.setattr(ingest, "RANGE_MIN_BYTES", 0)
    monkeypatch.setattr(ingest, "RANGE_MIN_ROWS", 0)


@contextlib.contextmanager
def _client_reads_no_row() -> Iterator[None]:
    """Make this process's readers of a pings file's rows fail (not the workers')."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("o cliente leu linhas do arquivo")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RawPings, "tables", refuse)
        mp.setattr(RawPings, "range_tables", refuse)
        mp.setattr(RawPings, "chunks", refuse)
        yield


def _run_cli(args: list[str]) -> str:
    """Run ``pontual ARGS`` in this process (its process-wide settings left out)."""
    import api.cli as cli
    import runtime

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "keep_arrow_pages", lambda: False)
        mp.setattr(runtime, "keep_freed_heap", lambda: False)
        mp.setattr(cli, "_exit_at_once", lambda: None)
        mp.setattr(sys, "argv", ["pontual", *args])
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            cli.main()
    assert done.value.code in (0, None), out.getvalue()
    return out.getvalue()


def _inputs(folder: Path) -> list[str]:
    STANDS.to_file(folder / "stands.geojson", driver="GeoJSON")
    scenario_fleet(folder)  # writes frota.csv
    return [
        "--stands", str(folder / "stands.geojson"), "--fleet", str(folder / "frota.csv"),
        "--tiles", "none", "--timezone", TZ,
    ]  # fmt: skip


def _dask_equals_local(pings: Path, tmp_path: Path) -> pd.DataFrame:
    """Run ``--engine local`` (one reader) and ``--engine dask --workers 2`` (the client never
    reading a row); assert the same files; return the rejected rows."""
    common = ["analyze", "--pings", str(pings), *_inputs(tmp_path)]
    local = _run_cli([*common, "--out", str(tmp_path / "local"), "--jobs", "1"])
    with _client_reads_no_row():
        dask = _run_cli(
            [*common, "--out", str(tmp_path / "dask"), "--engine", "dask", "--workers", "2"]
        )
    assert_same_outputs(tmp_path / "dask", tmp_path / "local")
    assert dask.splitlines()[:-1] == local.splitlines()[:-1]
    return pd.read_csv(tmp_path / "dask" / "rejected.csv", dtype=str, keep_default_na=False)


class TestPlainFileOnTheWorkers:
    def test_csv_byte_ranges(self, pings_csv: Path, tmp_path: Path, small_ranges: None) -> None:
        """A CSV cut into two byte ranges at the line end after its middle, by a line with a
        stray quote: the local engine's files, rows numbered and duplicates judged across the
        ranges, the stray line alone malformed."""
        text = pings_csv.read_bytes()
        start = text.index(b"\n") + 1
        middle = start + (len(text) - start) // 2
        cell = text.index(STRAY.encode())
        end = text.index(b"\n", middle) + 1
        assert abs(cell - middle) < 200 and b'"' not in text[cell + 1 : text.index(b"\n", cell)]
        source = RawPings.open(pings_csv)
        [(a, b), (c, d)] = source.ranges(2)
        assert (a, d) == (start, len(text)) and b == c == end
        bad: list[tuple[int | None, str]] = []
        n_first = sum(t.num_rows for t in source.range_tables(a, b, bad)) + len(bad)
        rejected = _dask_equals_local(pings_csv, tmp_path)
        rows = rejected.assign(row=rejected["row"].astype(int)).groupby("reason")["row"]
        by_reason = rows.apply(list).to_dict()
        malformed = by_reason["malformed_row"]
        assert min(malformed) <= n_first < max(malformed)  # in both ranges
        assert by_reason["duplicate"][0] > n_first  # its first is row 4, in the first range
        assert by_reason["missing_timestamp"] and by_reason["unparseable_timestamp"]
        assert by_reason["conflicting_duplicate"] and by_reason["naive_timestamp"]

    def test_parquet_row_groups(self, tmp_path: Path, small_ranges: None) -> None:
        """A Parquet file of seven row groups read as two runs of them: the same files."""
        cells = _cells()
        typed = cells.assign(
            lat=pd.to_numeric(cells["lat"], errors="coerce"),
            lon=pd.to_numeric(cells["lon"], errors="coerce"),
        )
        path = tmp_path / "pings.parquet"
        typed.to_parquet(path, index=False, row_group_size=len(typed) // 7)
        assert len(RawPings.open(path).ranges(2)) == 2
        rejected = _dask_equals_local(path, tmp_path)
        assert "duplicate" in set(rejected["reason"])

    def test_csv_gz_in_one_task(self, pings_csv: Path, tmp_path: Path) -> None:
        """A CSV.gz cannot be cut: one worker reads it whole; the same files."""
        path = tmp_path / "pings.csv.gz"
        path.write_bytes(gzip.compress(pings_csv.read_bytes()))
        assert RawPings.open(path).ranges(2) == []
        rejected = _dask_equals_local(path, tmp_path)
        assert "malformed_row" in set(rejected["reason"])


class TestWriteDatasetOnACluster:
    def test_same_dataset_as_forked_processes(
        self, pings_csv: Path, tmp_path: Path, small_ranges: None
    ) -> None:
        """The workers write the files the forked processes write (same SHA-256 each), the
        client reading no row."""
        forked = write_dataset(pings_csv, tmp_path / "forked", timezone=TZ, n_buckets=3, jobs=2)
        with dask_client(workers=2) as client, _client_reads_no_row():
            dask = write_dataset(
                pings_csv, tmp_path / "dask", timezone=TZ, n_buckets=3, client=client
            )
        assert dask == forked
        assert dask["malformed"]["rows"] > 1 and len(dask["files"]) > 3

    def test_workers_that_do_not_see_the_file(self, pings_csv: Path, tmp_path: Path) -> None:
        """A worker that cannot see the file's path: a named error, nothing left behind."""
        import engines.dataset as ds

        with dask_client(workers=1, processes=False) as client, pytest.MonkeyPatch.context() as mp:
            mp.setattr(ds, "_sees", lambda source, folder: False)
            with pytest.raises(DatasetError, match="TMPDIR devem estar em armazenamento"):
                write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, client=client)
        assert list(tmp_path.iterdir()) == []
