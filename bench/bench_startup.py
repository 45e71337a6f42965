"""Benchmark: start-up of the ``pontual`` command line, each run its own process.

    .venv/bin/python bench/bench_startup.py               # 10 runs of each
    .venv/bin/python bench/bench_startup.py --repeat 20 --pontual OTHER_VENV/bin/pontual

Rows: the interpreter alone (``python -c pass``, with the venv's ``site``: the editable install's
import finder included), ``pontual --help``, ``pontual analyze --help`` (wall seconds from start to
exit, and the process's CPU seconds, user + system, from ``wait4``), and the analysis start:
seconds from starting ``pontual analyze`` on a terminal (a pty) to its first output, the progress
line (a two-fix input: the imports and the input checks, not the work). Best and median of
``--repeat`` runs; the load average (1 min) before and after, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd`` (output discarded); return its wall and CPU (user + system) seconds."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime


def first_output_s(cmd: list[str]) -> float:
    """Seconds from starting ``cmd`` on a pty to its first output; then stop it."""
    main_fd, child_fd = pty.openpty()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=child_fd, stdout=child_fd, stderr=child_fd)
    os.close(child_fd)
    try:
        ready, _, _ = select.select([main_fd], [], [], 120)
        seconds = time.perf_counter() - t if ready else float("nan")
    finally:
        proc.terminate()
        proc.wait()
        os.close(main_fd)
    return seconds


_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_BAR = re.compile(r"\s*[━╸╺].*$")


def stage_times(cmd: list[str]) -> list[tuple[str, float]]:
    """Run ``cmd`` on a pty; return each progress label (digits as ``N``) and its seconds.

    A label lasts from its first drawing to the next label's (the last one to the first line of
    the report); labels that differ only in their numbers (``partição 2/6``) are one stage.
    """
    main_fd, child_fd = pty.openpty()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=child_fd, stdout=child_fd, stderr=child_fd)
    os.close(child_fd)
    seen: list[tuple[str, float]] = []
    end: float | None = None
    pending = b""
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:  # the child closed the pty
            data = b""
        if not data:
            break
        *lines, pending = re.split(rb"[\r\n]", pending + data)
        for raw in lines:
            line = _ANSI.sub(b"", raw).decode("utf-8", "replace")
            if end is None and "━" not in line and line.strip() and seen:
                end = time.perf_counter() - t  # the report after the last stage
            label = re.sub(r"\d+", "N", _BAR.sub("", line).strip())
            if "━" in line and label and (not seen or seen[-1][0] != label):
                seen.append((label, time.perf_counter() - t))
    proc.wait()
    os.close(main_fd)
    end = end or time.perf_counter() - t
    stages: dict[str, float] = {}
    for (label, start), (_, stop) in zip(seen, [*seen[1:], ("", end)], strict=True):
        stages[label] = stages.get(label, 0.0) + stop - start
    return list(stages.items())


def write_input(folder: Path) -> list[str]:
    """A two-fix pings file and a one-stand GeoJSON; the ``analyze`` arguments that read them."""
    pings = folder / "pings.csv"
    pings.write_text(
        "vehicle_id,timestamp,lat,lon\n"
        "A,2024-03-04T09:00:00-03:00,-30.03,-51.22\n"
        "A,2024-03-04T09:00:15-03:00,-30.03,-51.22\n",
        encoding="utf-8",
    )
    stands = folder / "stands.geojson"
    feature = {
        "type": "Feature",
        "properties": {"stand_id": "S1", "radius_m": 30},
        "geometry": {"type": "Point", "coordinates": [-51.22, -30.03]},
    }
    stands.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    return [
        "--pings", str(pings), "--stands", str(stands), "--tiles", "none",
        "--out", str(folder / "out"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each (default 10)")
    parser.add_argument(
        "--pontual",
        default=str(Path(sys.executable).with_name("pontual")),
        help="the pontual script to time (default: this venv's)",
    )
    args = parser.parse_args()
    python = str(Path(args.pontual).with_name("python"))
    print(f"load before {os.getloadavg()[0]:.2f} (1 min); {args.repeat} runs each\n")
    print("| command | best wall s | median wall s | best CPU s | median CPU s |")
    print("|---|---:|---:|---:|---:|")
    for label, cmd in (
        ("`python -c pass`", [python, "-c", "pass"]),
        ("`pontual --help`", [args.pontual, "--help"]),
        ("`pontual analyze --help`", [args.pontual, "analyze", "--help"]),
    ):
        runs = [timed(cmd) for _ in range(args.repeat)]
        walls = [wall for wall, _ in runs]
        cpus = [cpu for _, cpu in runs]
        print(
            f"| {label} | {min(walls):.3f} | {statistics.median(walls):.3f} "
            f"| {min(cpus):.3f} | {statistics.median(cpus):.3f} |"
        )
    with tempfile.TemporaryDirectory(prefix="pontual-startup-") as tmp:
        cmd = [args.pontual, "analyze", *write_input(Path(tmp))]
        starts = [first_output_s(cmd) for _ in range(args.repeat)]
    print(
        f"| analysis start (first output on a pty) | {min(starts):.3f} "
        f"| {statistics.median(starts):.3f} | | |"
    )
    print(f"\nload after {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
