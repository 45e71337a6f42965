"""Benchmark: `pontual dataset write --from-db` (stored fixes → Parquet dataset), fixes/s and peak.

Runs against a real PostGIS: a throwaway database ``pontual_bench_<hex>`` is created on the server
of ``--url`` (else ``PONTUAL_DATABASE_URL``/``DATABASE_URL``, else the local cluster that
``pontual db start`` manages), migrated to head, loaded with ``-n`` synthetic fixes by
``copy_fixes`` (``bench_copy.synthetic_pings``: 3,000 taxis in Porto Alegre, one fix every 15 s,
every optional column filled), then exported by the ``pontual`` command in a child process,
``--repeat`` times (each into a new folder), and dropped at the end. With ``--file``, the same
fixes written as a CSV are also given to ``pontual dataset write --pings`` for comparison.

    .venv/bin/python bench/bench_dataset_db.py                 # 1,000,000 fixes
    .venv/bin/python bench/bench_dataset_db.py -n 200000 --repeat 1 --file

Columns: wall seconds of the command (its whole process: imports, the schema check of the
database, the export), fixes/s, the child's peak RSS (``VmHWM``), load average (1 min) before;
then the export alone, ``write_dataset_from_db`` called in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_copy import _server_url, synthetic_pings  # noqa: E402

from db.engine import create_database, drop_database, make_engine, parse_url  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.tracking.store import copy_fixes  # noqa: E402
from engines.dataset import write_dataset_from_db  # noqa: E402

PONTUAL = Path(sys.executable).with_name("pontual")
TZ = "America/Sao_Paulo"


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``pontual`` with ``args``; return wall seconds and its peak RSS in MB.

    The peak is the child's ``VmHWM`` read every 20 ms until it exits (``ru_maxrss`` would count
    this process's pages at the fork).
    """
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen([str(PONTUAL), *args], env=env, stdout=err, stderr=err)
        peak_kb = 0
        status = Path(f"/proc/{child.pid}/status")
        while child.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.02)
        wall = time.perf_counter() - start
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(err.read().decode())
    return wall, peak_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="fixes stored, then exported")
    parser.add_argument("--repeat", type=int, default=2, help="exports")
    parser.add_argument("--buckets", type=int, default=None, help="vehicle buckets")
    parser.add_argument("--file", action="store_true", help="also dataset write --pings on a CSV")
    parser.add_argument("--url", default=None, help="PostgreSQL server URL")
    args = parser.parse_args()

    server = parse_url(_server_url(args.url))
    url = server.set(database=f"pontual_bench_{secrets.token_hex(4)}").render_as_string(
        hide_password=False
    )
    create_database(url)
    engine = make_engine(url)
    rows: list[tuple[str, float, float, float]] = []
    try:
        upgrade(url)
        pings = synthetic_pings(args.n)
        t0 = time.perf_counter()
        with engine.begin() as conn:
            stored = copy_fixes(conn, pings, source="bench")
        print(f"stored {stored:,} fixes in {time.perf_counter() - t0:.1f} s")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PONTUAL_")}
        env["DATABASE_URL"] = url
        extra = ["--buckets", str(args.buckets)] if args.buckets else []
        with tempfile.TemporaryDirectory(prefix="bench_dataset_db_") as tmp:
            for k in range(args.repeat):
                load = os.getloadavg()[0]
                out = Path(tmp) / f"db{k}"
                cmd = ["dataset", "write", "--from-db", "--out", str(out), *extra]
                wall, peak = _run(cmd, env)
                rows.append(("dataset write --from-db", wall, peak, load))
            for k in range(args.repeat):  # the export alone: no imports, no schema check
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                write_dataset_from_db(
                    engine, Path(tmp) / f"in{k}", timezone=TZ, n_buckets=args.buckets
                )
                rows.append(
                    ("write_dataset_from_db (in process)", time.perf_counter() - t0, 0, load)
                )
            manifest = json.loads((Path(tmp) / "db0" / "manifest.json").read_text())
            assert manifest["rows"] == stored, (manifest["rows"], stored)
            shape = (
                f"{manifest['rows']:,} fixes, {len({f['day'] for f in manifest['files']})} "
                f"local days, {manifest['n_buckets']} buckets, {len(manifest['files'])} files"
            )
            if args.file:
                csv = Path(tmp) / "fixes.csv"
                pings.drop(columns=["row", "speed_flag"]).to_csv(csv, index=False)
                del pings
                load = os.getloadavg()[0]
                cmd = ["dataset", "write", "--pings", str(csv), "--out", str(Path(tmp) / "f")]
                wall, peak = _run([*cmd, *extra], env)
                rows.append(("dataset write --pings (CSV)", wall, peak, load))
    finally:
        engine.dispose()
        drop_database(url)
    print(f"{shape}; cores: {os.cpu_count()}")
    print(f"{'command':<36} {'wall s':>7} {'fixes/s':>10} {'peak MB':>8} {'load':>5}")
    for name, wall, peak, load in rows:
        mb = f"{peak:>8.0f}" if peak else " " * 8
        print(f"{name:<36} {wall:>7.2f} {stored / wall:>10,.0f} {mb} {load:>5.2f}")


if __name__ == "__main__":
    main()
