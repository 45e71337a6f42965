"""The cluster deployment of docs/analise.md, run as written: a scheduler and worker processes
started by Dask's own commands, the documented configuration file, ``pontual analyze
--scheduler`` on a dataset (loopback only)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_scenario import (
    STANDS,
    assert_same_outputs,
    contract_cells,
    scenario_fleet,
    write_contract_csv,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "analise.md"
TZ = "America/Sao_Paulo"


def _documented() -> tuple[dict[str, str], list[str], list[str], str]:
    """The scheduler's environment assignments and command line, a worker's command line and
    the configuration file, from the doc."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Deployment on a city's machines") :]
    lines = [line.strip() for line in section.splitlines()]
    line = next(line for line in lines if ".venv/bin/dask scheduler" in line)
    words = shlex.split(line)
    at = words.index(".venv/bin/dask")
    assigned = dict(word.split("=", 1) for word in words[:at])
    worker = next(line for line in lines if line.startswith(".venv/bin/dask worker"))
    config = re.search(r"<<'EOF'\n(.*?)\n\s*EOF\n", section, re.DOTALL)
    assert config is not None, "the deployment section lost its configuration file"
    yaml = "\n".join(line[2:] for line in config.group(1).splitlines())  # the block's indent
    return assigned, words[at:], shlex.split(worker), yaml + "\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """The documented scheduler and workers on 127.0.0.1; yields the scheduler's address."""
    assigned, scheduler, worker, yaml = _documented()
    config = tmp_path / "dask-config"
    config.mkdir()
    (config / "pontual.yaml").write_text(yaml, encoding="utf-8")
    # a LocalCluster's nanny earlier in this process put Dask's 65536 into os.environ, and a
    # variable already set outranks the file: start from a clean shell's environment
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    env["DASK_CONFIG"] = str(config)
    bin_dir = Path(sys.executable).parent
    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = [
        str(bin_dir / "dask"), *scheduler[1:], "--host", "127.0.0.1",
        "--port", address.rsplit(":", 1)[1], "--dashboard-address", "127.0.0.1:0",
    ]  # fmt: skip
    worker = [str(bin_dir / "dask"), *(address if "HOST" in a else a for a in worker[1:])]
    worker += ["--host", "127.0.0.1", "--local-directory", str(tmp_path / "workers")]
    procs = []
    for cmd, log, extra in (
        (scheduler, tmp_path / "scheduler.log", assigned),
        (worker, tmp_path / "workers.log", {}),
    ):
        with log.open("wb") as out:  # the child keeps its own descriptor
            procs.append(
                subprocess.Popen(
                    cmd, env=env | extra, cwd=tmp_path, start_new_session=True, stderr=out
                )
            )
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_the_documented_cluster_runs_an_analysis(
    cluster: str, run_pontual: Any, tmp_path: Path
) -> None:
    """Dask's commands and configuration file as docs/analise.md gives them, then
    ``pontual analyze --scheduler`` on a dataset: the local engine's files, byte for byte; the
    workers keep their freed heap (the file's setting reached them)."""
    from distributed import Client

    with Client(cluster, timeout=30) as client:
        trim = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        setting = "distributed.admin.low-level-log-length"  # by value: the workers import no test
        logs = client.run(lambda: __import__("dask").config.get(setting))
        scheduler_log = client.run_on_scheduler(lambda: __import__("dask").config.get(setting))
    assert len(trim) == 2 and set(trim.values()) == {"2147483647"}
    assert set(logs.values()) == {0} and scheduler_log == 0  # no message log kept

    pings = write_contract_csv(tmp_path / "pings.csv", contract_cells())
    STANDS.to_file(tmp_path / "stands.geojson", driver="GeoJSON")
    scenario_fleet(tmp_path)  # frota.csv
    common = [
        "--stands", str(tmp_path / "stands.geojson"), "--fleet", str(tmp_path / "frota.csv"),
        "--tiles", "none", "--municipality", "4314902",
    ]  # fmt: skip
    written = run_pontual(
        "dataset", "write", "--pings", str(pings), "--out", str(tmp_path / "ds"),
        "--buckets", "3", "--timezone", TZ,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    local = run_pontual("analyze", "--pings", str(pings), "--out", str(tmp_path / "local"), *common)
    assert local.returncode == 0, local.stderr
    dask = run_pontual(
        "analyze", "--pings", str(tmp_path / "ds"), "--out", str(tmp_path / "dask"), *common,
        "--engine", "dask", "--scheduler", cluster, timeout_s=600,
    )  # fmt: skip
    assert dask.returncode == 0, dask.stderr
    assert (tmp_path / "local" / "proposals.json").is_file()
    assert_same_outputs(tmp_path / "dask", tmp_path / "local")
    assert dask.stdout.splitlines()[:-1] == local.stdout.splitlines()[:-1]
