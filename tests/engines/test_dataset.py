"""Pings datasets (engines.dataset): written by day and vehicle bucket, read by the workers."""

from __future__ import annotations

import datetime as dt
import json
import logging
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from partition_scenario import (
    BOUNDARY,
    NOW,
    STANDS,
    RecordingClient,
    assert_same,
    assert_same_outputs,
    contract_cells,
    scenario_fleet,
    scenario_pings,
    write_contract_csv,
)

import engines.dataset as ds
from engines.buckets import analyze_file
from engines.dataset import DatasetError, analyze_dataset, read_manifest, write_dataset
from engines.distributed import dask_client
from engines.pipeline import AnalysisParams
from tracking.ingest import write_rejected

TZ = "America/Sao_Paulo"


def _cells() -> pd.DataFrame:
    """The bucket tests' cells, plus rows whose timestamp cannot be read (none, garbage)."""
    cells = contract_cells()
    first = cells.iloc[5].to_dict()
    extra = [first | {"timestamp": ""}, first | {"timestamp": "ontem"}]
    return pd.concat([cells.iloc[:700], pd.DataFrame(extra), cells.iloc[700:]], ignore_index=True)


@pytest.fixture(scope="module")
def pings_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dataset_pings")
    return write_contract_csv(folder / "pings.csv", _cells(), malformed_after=500)


def _kw(tmp_path: Path) -> dict[str, Any]:
    return {"fleet": scenario_fleet(tmp_path), "boundary": BOUNDARY, "params": AnalysisParams()}


class TestWriteDataset:
    def test_layout_and_manifest(self, pings_csv: Path, tmp_path: Path) -> None:
        """Files by local day and bucket hold every row once; unreadable timestamps go day-less."""
        manifest = write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=3, jobs=2)
        assert manifest == read_manifest(tmp_path / "ds")
        assert manifest["format"] == "pontual-pings-dataset" and manifest["n_buckets"] == 3
        assert manifest["source"]["name"] == "pings.csv"
        assert manifest["source"]["size_bytes"] == pings_csv.stat().st_size
        rows = []
        for entry in manifest["files"]:
            path = tmp_path / "ds" / entry["path"]
            day = "__HIVE_DEFAULT_PARTITION__" if entry["day"] is None else entry["day"]
            assert entry["path"] == f"day={day}/bucket={entry['bucket']}/part-0.parquet"
            table = pq.ParquetFile(path).read()
            got = table.column("row").to_pylist()
            assert got == sorted(got) and len(got) == entry["rows"]
            assert (got[0], got[-1]) == (entry["first_row"], entry["last_row"])
            rows += got
        n_cells = len(_cells())
        assert manifest["malformed"]["rows"] == 1 and manifest["rows"] == n_cells
        assert sorted(rows) == [r for r in range(1, n_cells + 2) if r != 502]  # 502: malformed
        no_day = [e for e in manifest["files"] if e["day"] is None]
        stamps = pq.ParquetFile(tmp_path / "ds" / no_day[0]["path"]).read().column("timestamp")
        assert sorted(stamps.to_pylist()) == ["", "2024-03-04T12:00:00", "ontem"]
        days = {e["day"] for e in manifest["files"]} - {None}
        assert days == _local_days() and len(days) >= 3
        assert set(_vehicles_by_day(tmp_path / "ds", manifest, "2024-03-04")) & set(
            _vehicles_by_day(tmp_path / "ds", manifest, "2024-03-05")
        ), "a vehicle whose trip crosses midnight is in both days"

    def test_refuses_to_overwrite(self, pings_csv: Path, tmp_path: Path) -> None:
        """A dataset is replaced only with force; another non-empty folder never."""
        out = tmp_path / "ds"
        write_dataset(pings_csv, out, timezone=TZ)
        with pytest.raises(DatasetError, match="já tem um conjunto de pings; use --force"):
            write_dataset(pings_csv, out, timezone=TZ)
        first = read_manifest(out)
        again = write_dataset(pings_csv, out, timezone=TZ, n_buckets=2, force=True)
        assert again["n_buckets"] == 2 and first["n_buckets"] == 1
        other = tmp_path / "outra"
        other.mkdir()
        (other / "notas.txt").write_text("x", encoding="utf-8")
        with pytest.raises(DatasetError, match="não está vazia e não é um conjunto"):
            write_dataset(pings_csv, other, timezone=TZ, force=True)
        assert [p.name for p in other.iterdir()] == ["notas.txt"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "outra"]

    def test_interrupted_write_leaves_nothing(
        self, pings_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A failure before the manifest leaves no folder at ``out`` and no temporary one."""

        def fail(*args: Any, **kwargs: Any) -> None:
            raise OSError("disco cheio")

        monkeypatch.setattr(ds, "_write_malformed", fail)
        with pytest.raises(OSError, match="disco cheio"):
            write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=2)
        assert list(tmp_path.iterdir()) == []

    def test_bad_bucket_count(self, pings_csv: Path, tmp_path: Path) -> None:
        """A bucket count that is not a positive integer is named."""
        with pytest.raises(DatasetError, match="'n_buckets' era 0; esperado um inteiro positivo"):
            write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=0)


def _local_days() -> set[str]:
    """The scenario's local days in São Paulo."""
    stamps = scenario_pings()["timestamp"].dt.tz_convert(TZ)
    return {d.isoformat() for d in stamps.dt.date}


def _vehicles_by_day(root: Path, manifest: dict[str, Any], day: str) -> list[str]:
    out: list[str] = []
    for entry in manifest["files"]:
        if entry["day"] == day:
            out += pq.ParquetFile(root / entry["path"]).read().column("vehicle_id").to_pylist()
    return out


class TestAnalyzeDataset:
    def test_csv_equals_file_engine(self, pings_csv: Path, tmp_path: Path) -> None:
        """Buckets read back in forked processes: the file engine's result and rejected rows."""
        kw = _kw(tmp_path)
        want, want_sample = analyze_file(pings_csv, STANDS, now=NOW, **kw)
        write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=4, jobs=2)
        got, sample = analyze_dataset(tmp_path / "ds", STANDS, now=NOW, jobs=2, **kw)
        assert_same(got, want, positions=False)
        pd.testing.assert_frame_equal(got.rejected, want.rejected)
        reasons = set(got.rejected["reason"])
        assert {"malformed_row", "duplicate", "conflicting_duplicate"} <= reasons
        assert {"missing_timestamp", "unparseable_timestamp", "naive_timestamp"} <= reasons
        order = ["vehicle_id", "timestamp"]
        pd.testing.assert_frame_equal(
            sample.sort_values(order, ignore_index=True),
            want_sample.sort_values(order, ignore_index=True),
        )

    def test_semicolon_csv_equals_file_engine(self, pings_csv: Path, tmp_path: Path) -> None:
        """A ';' CSV (Excel in pt-BR): its malformed lines read back from the dataset split at
        ';', as the file engine reads them."""
        semi = tmp_path / "ponto_e_virgula.csv"
        semi.write_text(pings_csv.read_text(encoding="utf-8").replace(",", ";"), encoding="utf-8")
        kw = _kw(tmp_path)
        want, _ = analyze_file(semi, STANDS, now=NOW, **kw)
        write_dataset(semi, tmp_path / "ds", timezone=TZ, n_buckets=4, jobs=2)
        got, _ = analyze_dataset(tmp_path / "ds", STANDS, now=NOW, jobs=2, **kw)
        pd.testing.assert_frame_equal(got.rejected, want.rejected)
        malformed = got.rejected.loc[got.rejected["reason"] == "malformed_row"]
        assert len(malformed) and not malformed["vehicle_id"].str.contains(";").any()

    def test_parquet_as_of_and_map_sample(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Typed Parquet, an earlier --as-of, a sampled map: the file engine's result and sample."""
        import engines.buckets

        monkeypatch.setattr(engines.buckets, "MAP_FIXES", 100)
        cells = _cells()
        typed = cells.assign(lat=pd.to_numeric(cells["lat"], errors="coerce"))
        path = tmp_path / "pings.parquet"
        typed.to_parquet(path, index=False)
        kw = _kw(tmp_path) | {"as_of": dt.date(2024, 3, 5)}
        want, want_sample = analyze_file(path, STANDS, now=NOW, bucket_fixes=400, **kw)
        write_dataset(path, tmp_path / "ds", timezone=TZ, n_buckets=5)
        got, sample = analyze_dataset(tmp_path / "ds", STANDS, now=NOW, **kw)
        assert_same(got, want, positions=False)
        pd.testing.assert_frame_equal(got.rejected, want.rejected)
        order = ["vehicle_id", "timestamp"]
        assert 20 <= len(sample) <= 100  # sampled (and cut at --as-of)
        pd.testing.assert_frame_equal(
            sample.sort_values(order, ignore_index=True),
            want_sample.sort_values(order, ignore_index=True),
        )

    def test_header_only_file(self, tmp_path: Path) -> None:
        """No data rows: one empty file carries the columns; the empty result."""
        path = write_contract_csv(tmp_path / "empty.csv", _cells().iloc[:0])
        manifest = write_dataset(path, tmp_path / "ds", timezone=TZ)
        assert [(e["day"], e["rows"]) for e in manifest["files"]] == [(None, 0)]
        got, sample = analyze_dataset(tmp_path / "ds", STANDS, now=NOW)
        assert got.summary["pings_valid"] == 0 and got.rejected.empty and sample.empty


@pytest.fixture(scope="module")
def processes() -> Iterator[Any]:
    with dask_client(workers=2) as client:
        yield client


def _with_unreadable(cells: pd.DataFrame, n: int) -> pd.DataFrame:
    """The cells plus ``n`` rows of unreadable timestamps at the end (the rest keeps its rows)."""
    first = cells.iloc[5].to_dict()
    more = [first | {"timestamp": f"ontem {k}"} for k in range(n)]
    return pd.concat([cells, pd.DataFrame(more)], ignore_index=True)


class TestRejectedOnWorkers:
    def test_rejected_csv_as_the_file_engine_writes_it(
        self,
        processes: Any,
        pings_csv: Path,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With ``out``, the workers write ``rejected.csv`` (malformed records included): the
        bytes the file engine's rows give; the summary counts them; the result holds none; the
        local scheduler logs no error (releasing the buckets' results)."""
        monkeypatch.setattr(logging.getLogger("distributed"), "propagate", True)
        kw = _kw(tmp_path)
        want, _ = analyze_file(pings_csv, STANDS, now=NOW, **kw)
        write_rejected(want.rejected, tmp_path / "want.csv")
        write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=4, jobs=2)
        out = tmp_path / "out"
        out.mkdir()
        got, _ = analyze_dataset(
            tmp_path / "ds", STANDS, now=NOW, client=processes, parts=tmp_path / "p", out=out, **kw
        )
        assert "rejected.csv" in got.written and got.rejected.empty
        assert (out / "rejected.csv").read_bytes() == (tmp_path / "want.csv").read_bytes()
        reasons = set(want.rejected["reason"])
        assert {"malformed_row", "duplicate", "unparseable_timestamp"} <= reasons
        for key in ("pings_rejected", "rejected_by_reason"):
            assert got.summary[key] == want.summary[key]
        processes.submit(int, 1, pure=False).result()  # the cancel, the release handled
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert not errors, [r.getMessage() for r in errors]

    def test_client_receives_no_rejected_row(self, processes: Any, tmp_path: Path) -> None:
        """Ten times more rejected rows: the client receives the same bytes."""
        received: list[Any] = []
        sizes = {}
        for n in (40, 400):
            pings = write_contract_csv(
                tmp_path / f"p{n}.csv", _with_unreadable(_cells(), n), malformed_after=500
            )
            write_dataset(pings, tmp_path / f"ds{n}", timezone=TZ, n_buckets=4)
            (tmp_path / f"out{n}").mkdir()
            received.clear()
            got, _ = analyze_dataset(
                tmp_path / f"ds{n}",
                STANDS,
                now=NOW,
                client=RecordingClient(processes, received),
                parts=tmp_path / f"parts{n}",
                out=tmp_path / f"out{n}",
                **_kw(tmp_path),
            )
            assert got.summary["rejected_by_reason"]["unparseable_timestamp"] == n + 1
            sizes[n] = len(pickle.dumps(received))
        assert abs(sizes[400] - sizes[40]) < 1_000, sizes  # their rows: 50 kB more


class TestManifestCheck:
    @pytest.fixture
    def dataset(self, pings_csv: Path, tmp_path: Path) -> Path:
        write_dataset(pings_csv, tmp_path / "ds", timezone=TZ, n_buckets=2)
        return tmp_path / "ds"

    def test_missing_file(self, dataset: Path) -> None:
        """A file of the manifest deleted: named before any work."""
        entry = read_manifest(dataset)["files"][1]
        (dataset / entry["path"]).unlink()
        with pytest.raises(DatasetError, match=f"falta o arquivo {re.escape(entry['path'])}"):
            analyze_dataset(dataset, STANDS, now=NOW)

    def test_file_of_another_size(self, dataset: Path) -> None:
        """A file grown since it was written: named with both sizes."""
        entry = read_manifest(dataset)["files"][0]
        with (dataset / entry["path"]).open("ab") as fh:
            fh.write(b"\0")
        with pytest.raises(DatasetError, match=r"bytes e o manifesto diz \d+: foi alterado"):
            read_manifest(dataset)

    def test_altered_bytes(self, dataset: Path) -> None:
        """A file altered in place (same size): its SHA-256 does not match where it is read (a
        forked process, a Dask worker), and the error comes back as it was raised."""
        entry = read_manifest(dataset)["files"][-1]
        path = dataset / entry["path"]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(DatasetError, match="não confere com o manifesto \\(SHA-256\\)"):
            analyze_dataset(dataset, STANDS, now=NOW, jobs=2)
        with (
            dask_client(workers=1, processes=False) as client,
            pytest.raises(DatasetError, match=re.escape(entry["path"])),
        ):
            analyze_dataset(dataset, STANDS, now=NOW, client=client)

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"version": 99}, "versão 99 não suportada"),
            ({"format": "outro"}, "'format' era 'outro'"),
            ({"files": [{"path": "x"}]}, "manifesto inválido"),
        ],
    )
    def test_bad_manifest(self, dataset: Path, change: dict[str, Any], message: str) -> None:
        """A manifest of another format or version, or incomplete: a named error."""
        path = dataset / "manifest.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | change), encoding="utf-8")
        with pytest.raises(DatasetError, match=message):
            read_manifest(dataset)

    def test_no_manifest(self, tmp_path: Path) -> None:
        """A folder without manifest is not a dataset."""
        with pytest.raises(DatasetError, match="falta o manifest.json"):
            read_manifest(tmp_path)


def _write_inputs(folder: Path) -> list[str]:
    STANDS.to_file(folder / "stands.geojson", driver="GeoJSON")
    fleet = folder / "frota.csv"
    scenario_fleet(folder)  # writes frota.csv
    assert fleet.is_file()
    return ["--stands", str(folder / "stands.geojson"), "--fleet", str(fleet), "--tiles", "none"]


class TestCommand:
    def test_dask_on_dataset_writes_the_local_files(
        self, run_pontual: Any, pings_csv: Path, tmp_path: Path
    ) -> None:
        """``dataset write`` then ``analyze --engine dask`` (worker processes) on its folder:
        ``--engine local``'s files on the CSV, ``rejected.csv`` row numbers included."""
        common = _write_inputs(tmp_path)
        local = run_pontual(
            "analyze", "--pings", str(pings_csv), "--out", str(tmp_path / "local"), *common
        )
        assert local.returncode == 0, local.stderr
        written = run_pontual(
            "dataset", "write", "--pings", str(pings_csv), "--out", str(tmp_path / "ds"),
            "--buckets", "3", "--timezone", TZ,
        )  # fmt: skip
        assert written.returncode == 0, written.stderr
        assert f"{len(_local_days())} dia(s), 3 grupo(s) de veículos" in written.stdout
        assert "3 sem data legível, 1 malformada(s)" in written.stdout
        dask = run_pontual(
            "analyze", "--pings", str(tmp_path / "ds"), "--out", str(tmp_path / "dask"), *common,
            "--engine", "dask", "--workers", "2", timeout_s=600,
        )  # fmt: skip
        assert dask.returncode == 0, dask.stderr
        assert_same_outputs(tmp_path / "dask", tmp_path / "local")
        assert dask.stdout.splitlines()[:-1] == local.stdout.splitlines()[:-1]
        rejected = pd.read_csv(tmp_path / "dask" / "rejected.csv", dtype=str)
        assert "502" in set(rejected["row"]) and len(rejected) == 9

    def test_errors_are_named_without_traceback(
        self, run_pontual: Any, pings_csv: Path, tmp_path: Path
    ) -> None:
        """An altered dataset, a folder without manifest, a non-empty --out: pt-BR, exit 1."""
        common = _write_inputs(tmp_path)
        ds_dir = tmp_path / "ds"
        assert run_pontual(*_write_args(pings_csv, ds_dir)).returncode == 0
        again = run_pontual(*_write_args(pings_csv, ds_dir))
        assert again.returncode == 1 and "use --force" in again.stderr
        entry = json.loads((ds_dir / "manifest.json").read_text())["files"][0]
        (ds_dir / entry["path"]).unlink()
        for pings, message in [(ds_dir, "falta o arquivo"), (tmp_path, "é uma pasta sem")]:
            done = run_pontual(
                "analyze", "--pings", str(pings), "--out", str(tmp_path / "o"), *common
            )
            assert done.returncode == 1 and message in done.stderr, done.stderr
            assert "Traceback" not in done.stderr

    def test_altered_file_on_dask_workers_is_one_line(
        self, run_pontual: Any, pings_csv: Path, tmp_path: Path
    ) -> None:
        """A file altered in place fails its bucket's task on a worker process of the local
        cluster: the pt-BR line and exit 1, no worker's "Compute Failed" record nor traceback,
        nor the cancelling of the other bucket's task as the cluster closes."""
        common = _write_inputs(tmp_path)
        ds_dir = tmp_path / "ds"
        assert run_pontual(*_write_args(pings_csv, ds_dir), "--buckets", "2").returncode == 0
        entry = json.loads((ds_dir / "manifest.json").read_text())["files"][-1]
        path = ds_dir / entry["path"]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size: the client's check passes, the worker's not
        path.write_bytes(bytes(data))
        done = run_pontual(
            "analyze", "--pings", str(ds_dir), "--out", str(tmp_path / "o"), *common,
            "--engine", "dask", "--workers", "2", timeout_s=600,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("erro:")]
        assert errors == [
            f"erro: {ds_dir}: o arquivo {entry['path']} não confere com o manifesto (SHA-256): "
            "foi alterado; grave o conjunto de novo"
        ], done.stderr
        assert "Compute Failed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "CancelledError" not in done.stderr, done.stderr  # the other bucket's, at closing


def _write_args(pings: Path, out: Path) -> list[str]:
    return ["dataset", "write", "--pings", str(pings), "--out", str(out)]
