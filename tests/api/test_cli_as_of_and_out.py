"""`pontual analyze --as-of` counts the fixes it leaves out; `--out` is checked before any input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[2] / "data"
PORTO = DATA / "porto" / "derived"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-51.2287, -30.0277]},
            "properties": {"stand_id": "P1", "name": "Praça", "radius_m": 40},
        }
    ],
}


def _contract_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """Pings on 4 and 5 March 2024 (São Paulo time; one a minute after 4 March ends) and a stand."""
    rows = [
        *[("T1", f"2024-03-04T09:{m:02d}:00-03:00", -30.0277, -51.2287, "free") for m in range(5)],
        ("T1", "2024-03-04T23:59:00-03:00", -30.0277, -51.2287, "free"),
        ("T1", "2024-03-05T00:01:00-03:00", -30.0277, -51.2287, "free"),
        *[("T2", f"2024-03-05T10:{m:02d}:00-03:00", -30.0277, -51.2287, "free") for m in range(3)],
        ("T2", "2024-03-05T10:04:00", -30.0277, -51.2287, "free"),  # naive: rejected
    ]
    pings = tmp_path / "pings.csv"
    pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
        pings, index=False
    )
    stands = tmp_path / "stands.geojson"
    stands.write_text(json.dumps(STANDS), encoding="utf-8")
    return pings, stands


def _porto_args(out: Path) -> list[str]:
    return [
        "analyze",
        "--pings", str(PORTO / "trips_combined.csv"),
        "--stands", str(PORTO / "taxi_stands.csv"),
        "--stand-radius-m", "100",
        "--timezone", "Europe/Lisbon",
        "--kinds", "nenhum",
        "--tiles", "none",
        "--out", str(out),
    ]  # fmt: skip


def _summary(out: Path) -> dict[str, object]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


class TestAsOf:
    @pytest.mark.parametrize("jobs", ["1", "2"])
    def test_file_engine_counts_the_fixes_after_as_of(
        self, run_pontual, tmp_path: Path, jobs: str
    ) -> None:
        """A contract file: the 4 valid fixes after 4 March (local) are said and in summary.json."""
        pings, stands = _contract_inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out),
            "--timezone", "America/Sao_Paulo", "--as-of", "2024-03-04", "--jobs", jobs,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "6 pings válidos, 1 rejeitados, 4 depois de --as-of (fora da análise);" in (
            done.stdout
        )
        summary = _summary(out)
        assert (summary["pings_valid"], summary["pings_after_as_of"]) == (6, 4)
        assert summary["pings_rejected"] == 1
        assert "aviso:" not in done.stdout

    def test_without_as_of_nothing_is_left_out(self, run_pontual, tmp_path: Path) -> None:
        """No --as-of: every valid fix is analysed, the key says 0 and the line does not name it."""
        pings, stands = _contract_inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        assert "10 pings válidos, 1 rejeitados; " in done.stdout
        assert "--as-of" not in done.stdout
        assert _summary(out)["pings_after_as_of"] == 0

    def test_in_memory_engine_counts_them_on_the_porto_data(
        self, run_pontual, tmp_path: Path
    ) -> None:
        """The Porto file (in memory) with --as-of 2013-07-15: 61,818 analysed, 39,565 after."""
        out = tmp_path / "out"
        done = run_pontual(*_porto_args(out), "--as-of", "2013-07-15")
        assert done.returncode == 0, done.stderr
        assert (
            "61818 pings válidos, 0 rejeitados, 39565 depois de --as-of (fora da análise);"
            in done.stdout
        )
        summary = _summary(out)
        assert (summary["pings_valid"], summary["pings_after_as_of"]) == (61818, 39565)
        assert summary["pings_valid"] + summary["pings_after_as_of"] == 101_383

    @pytest.mark.parametrize("source", ["porto", "contract"])
    def test_every_fix_after_as_of_is_a_warning(
        self, run_pontual, tmp_path: Path, source: str
    ) -> None:
        """--as-of before every fix: an `aviso:` line says nothing was analysed; exit 0."""
        out = tmp_path / "out"
        if source == "porto":
            args, n, bad = _porto_args(out), 101_383, 0
        else:
            pings, stands = _contract_inputs(tmp_path)
            args = ["analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)]
            n, bad = 10, 1
        done = run_pontual(*args, "--as-of", "2000-01-01")
        assert done.returncode == 0, done.stderr
        assert f"aviso: --as-of: todos os {n} pings válidos são de depois de 2000-01-01" in (
            done.stdout
        )
        assert f"0 pings válidos, {bad} rejeitados, {n} depois de --as-of" in done.stdout
        assert (_summary(out)["pings_valid"], _summary(out)["pings_after_as_of"]) == (0, n)


def _assert_out_error(done, *, reason: str) -> None:
    """One pt-BR `erro: --out: …` line with ``reason``, exit status 1, no traceback."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("erro: --out: "), done.stderr
    assert reason in lines[0]
    assert "Traceback" not in done.stderr + done.stdout


def _read_only_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "somente-leitura"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


ROOT_WRITES = pytest.mark.skipif(AS_ROOT, reason="root writes in a folder of mode 555")


class TestAnalyzeOut:
    @pytest.mark.parametrize(
        ("case", "reason"),
        [
            ("file", "é um arquivo; esperado uma pasta"),
            ("under-file", "que é um arquivo; esperado uma pasta"),
            ("proc-new", "não foi possível criar a pasta /proc/x"),
            ("proc", "não é possível gravar na pasta /proc"),
            pytest.param("read-only", "sem permissão de escrita", marks=ROOT_WRITES),
        ],
    )
    def test_an_unusable_out_is_refused_before_the_inputs(
        self, run_pontual, tmp_path: Path, case: str, reason: str
    ) -> None:
        """An --out that cannot hold the files ends at once with one line (--pings, missing, is
        never read)."""
        taken = tmp_path / "arquivo.txt"
        taken.write_text("x", encoding="utf-8")
        out = {
            "file": taken,
            "under-file": taken / "saida",
            "proc-new": Path("/proc/x"),
            "proc": Path("/proc"),
        }.get(case) or _read_only_folder(tmp_path) / "saida"
        done = run_pontual(
            "analyze", "--pings", str(tmp_path / "faltando.csv"), "--stands",
            str(tmp_path / "faltando.geojson"), "--out", str(out),
        )  # fmt: skip
        _assert_out_error(done, reason=reason)
        assert taken.read_text(encoding="utf-8") == "x"

    def test_a_missing_out_is_created(self, run_pontual, tmp_path: Path) -> None:
        """A missing --out (and its parents) is made before the run, which then writes there."""
        pings, stands = _contract_inputs(tmp_path)
        out = tmp_path / "a" / "b"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        assert (out / "summary.json").is_file()


class TestPlanOut:
    @pytest.mark.parametrize(
        ("case", "reason"),
        [
            ("folder", "é uma pasta; esperado um arquivo"),
            ("under-file", "que é um arquivo; esperado uma pasta"),
            ("proc", "não foi possível criar a pasta /proc/x"),
            pytest.param("read-only", "sem permissão de escrita", marks=ROOT_WRITES),
            pytest.param("read-only-file", "não é possível gravar em", marks=ROOT_WRITES),
        ],
    )
    def test_an_unusable_out_is_refused_before_the_inputs(
        self, run_pontual, tmp_path: Path, case: str, reason: str
    ) -> None:
        """An --out that cannot be written ends at once with one line (--fleet, missing, is never
        read)."""
        taken = tmp_path / "arquivo.txt"
        taken.write_text("x", encoding="utf-8")
        if case == "read-only-file":
            taken.chmod(0o444)
        out = {
            "folder": tmp_path,
            "under-file": taken / "plano.html",
            "proc": Path("/proc/x/plano.html"),
            "read-only-file": taken,
        }.get(case) or _read_only_folder(tmp_path) / "plano.html"
        done = run_pontual(
            "plan", "--municipality", "4314902", "--fleet", str(tmp_path / "faltando.csv"),
            "--out", str(out),
        )  # fmt: skip
        _assert_out_error(done, reason=reason)
        assert taken.read_text(encoding="utf-8") == "x"

    def test_a_missing_folder_is_created(self, run_pontual, tmp_path: Path) -> None:
        """The folder of a new --out file is made, and the plan written there."""
        out = tmp_path / "a" / "plano.json"
        done = run_pontual(
            "plan", "--municipality", "4314548", "--format", "json", "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(out.read_text(encoding="utf-8"))["population"] > 0


def test_a_file_whose_every_row_is_rejected_says_so(run_pontual, tmp_path: Path) -> None:
    """Every row rejected (the naive timestamps of another system's export): a warning naming
    the commonest reasons, not only the counts line; the rows are in rejected.csv."""
    pings, stands = _contract_inputs(tmp_path)
    frame = pd.read_csv(pings)
    frame["timestamp"] = frame["timestamp"].str.slice(0, 19)  # the offsets cut off
    frame.loc[0, "lat"] = 95.0
    frame.to_csv(pings, index=False)
    out = tmp_path / "out"
    done = run_pontual(
        "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        f"aviso: nenhum ping válido: as {len(frame)} linhas foram rejeitadas (naive_timestamp "
        f"{len(frame) - 1}, out_of_range_coordinates 1); nada foi analisado"
    ) in done.stdout
    assert len(pd.read_csv(out / "rejected.csv")) == len(frame)
