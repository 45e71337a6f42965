"""End to end: the live engine, fed the simulated Porto Alegre fleet through PostGIS, vs the batch.

1. Simulates a small fleet with ``fleet/simulation.py`` (real stands, prefixos and boundary; the
   vehicles' ids carry ``SIM-``), writes its files and runs the batch pipeline on them with the
   calls of ``api.demo_console.simulated_analysis`` (``read_pings``, ``cut_at_as_of``,
   ``analyze_pings`` with the simulation's thresholds and timezone; as_of = the last day).
2. Creates a throw-away database ``pontual_live_replay_<hex>`` on the server of ``--url`` (else
   ``PONTUAL_DATABASE_URL``/``DATABASE_URL``, else the local cluster that ``pontual db start``
   manages), migrates it, and loads what the live engine reads with the real commands::

       pontual import municipalities --boundaries boundary.geojson
       pontual import stands stands.geojson --municipality 4314902 --stand-radius-m 30
       pontual import fleet fleet.csv --municipality 4314902 --as-of LAST_DAY
       pontual import drivers drivers.csv --municipality 4314902 --actor bench
       pontual import driver-links links.csv --actor bench

   (the simulation's fictitious drivers; the links beyond the registry's cap of auxiliares
   are left out as the demo leaves them: the findings of those drivers on those prefixos are
   not compared, live judging them unlinked where the batch finds them beyond the cap).

3. Replays the fixes in time order as requests of ``--request-min`` minutes of fleet time: each
   request's fixes are stored (``db.tracking.store.copy_fixes``, committed) and then given to
   ``engines.live.process_fixes`` (the batch's thresholds and timezone), committed.
4. Compares the live findings with the batch's, kind by kind: the counts, the ids found by both,
   by the batch only and live only, and for the common ids whether ``details`` and
   ``confidence`` are equal; prints a markdown table (with a few example ids of each
   difference), the live throughput and the wall times. The database is dropped at the end.

The live engine judges a local day when the first fix after it arrives: findings of the last
simulated day that only a day's end completes (``inactivity``, ``habitual_absence``, …) may be
missing live, since no later fix comes.

Usage::

    .venv/bin/python bench/bench_live_replay.py [--seed 7] [--days 12] [--prefixos 23]
        [--request-min 5] [--url URL] [--keep DIR] [--report FILE.md] [--strict]

``--prefixos`` is at least 23 (the simulator's special roles); ``--days`` at least 4.
``--strict`` exits 1 when the live findings differ from the batch's (else the exit is 0 once
the comparison is printed).
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet import simulation as fleet_sim  # noqa: E402

DEFAULT_DAYS = 12
DEFAULT_PREFIXOS = 23
DEFAULT_REQUEST_MIN = 5.0
EXAMPLES = 3
"""Example ids shown per kind and difference."""


@dataclass
class Batch:
    """The simulated inputs and the batch pipeline's result."""

    paths: dict[str, Path]
    meta: dict[str, Any]
    fixes: pd.DataFrame
    findings: pd.DataFrame
    thresholds: dict[str, dict[str, Any]]
    simulate_s: float
    analyze_s: float


@dataclass
class Replay:
    """What the live replay returned and how long it took."""

    requests: int
    fixes: int
    copy_s: float
    live_s: float
    import_s: float
    max_request_fixes: int


def simulate_and_analyze(*, seed: int, days: int, n_prefixos: int, root: Path) -> Batch:
    """Simulate the fleet into ``root`` and run the batch as ``simulated_analysis`` does."""
    from api.demo_console import analyze_simulation, write_simulation

    t0 = time.perf_counter()
    paths = write_simulation(root, seed=seed, days=days, n_prefixos=n_prefixos)
    simulate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result, fixes, meta, limits = analyze_simulation(paths)
    return Batch(
        paths=paths,
        meta=meta,
        fixes=fixes,
        findings=result.findings,
        thresholds=limits,
        simulate_s=simulate_s,
        analyze_s=time.perf_counter() - t0,
    )


def _server_url(cli_url: str | None) -> str:
    url = cli_url or os.environ.get("PONTUAL_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        return url
    from api.cli_db import database_url

    return database_url(migrate=False)


def _pontual(*args: str, url: str) -> None:
    """Run the ``pontual`` console script of this environment on the database ``url``."""
    exe = Path(sys.executable).with_name("pontual")
    env = {k: v for k, v in os.environ.items() if k not in ("PONTUAL_DATABASE_URL", "DATABASE_URL")}
    env["DATABASE_URL"] = url
    res = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        msg = f"pontual {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        raise RuntimeError(msg)


def load_registry(batch: Batch, *, url: str) -> None:
    """Load the boundary, the stands, the simulated fleet and its fictitious drivers and links
    by ``pontual import``."""
    p = batch.paths
    muni = fleet_sim.MUNICIPALITY
    _pontual("import", "municipalities", "--boundaries", str(p["boundary"]), url=url)
    radius = f"{fleet_sim.STAND_RADIUS_M:g}"
    _pontual(
        "import", "stands", str(p["stands"]), "--municipality", muni, "--stand-radius-m", radius,
        url=url,
    )  # fmt: skip
    _pontual(
        "import", "fleet", str(p["fleet"]), "--municipality", muni, "--as-of", batch.meta["as_of"],
        url=url,
    )  # fmt: skip
    _pontual(
        "import", "drivers", str(p["drivers"]), "--municipality", muni, "--actor", "bench",
        url=url,
    )  # fmt: skip
    _pontual("import", "driver-links", str(p["driver_links"]), "--actor", "bench", url=url)


def requests_of(fixes: pd.DataFrame, *, request_min: float) -> list[pd.DataFrame]:
    """Cut the fixes, in time order, into requests of ``request_min`` minutes of fleet time."""
    ordered = fixes.sort_values(["timestamp", "vehicle_id"], kind="stable")
    ts = ordered["timestamp"]
    span_ns = int(round(request_min * 60 * 1e9))
    slot = (ts - ts.iloc[0]).to_numpy().astype("int64") // span_ns
    return [part for _, part in ordered.groupby(slot, sort=True)]


def replay_live(
    batch: Batch, *, url: str, request_min: float, progress: bool = False
) -> tuple[list[dict[str, Any]], float, float, int, int]:
    """Store each request's fixes, then run ``process_fixes`` on them; commit each step.

    Returns the finding records returned, copy seconds, live seconds, requests, largest request.
    """
    from sqlalchemy.orm import Session

    from db.engine import make_engine
    from db.tracking.store import copy_fixes
    from engines.live import process_fixes

    engine = make_engine(url)
    records: list[dict[str, Any]] = []
    copy_s = live_s = 0.0
    parts = requests_of(batch.fixes, request_min=request_min)
    try:
        for i, part in enumerate(parts):
            t0 = time.perf_counter()
            with engine.begin() as conn:
                copy_fixes(conn, part, source="bench_live_replay")
            t1 = time.perf_counter()
            with Session(engine) as session:
                found = process_fixes(
                    session, part, thresholds=batch.thresholds, timezone=fleet_sim.TIMEZONE
                )
                session.commit()
            t2 = time.perf_counter()
            copy_s += t1 - t0
            live_s += t2 - t1
            records.extend(found)
            if progress and i % 200 == 0:
                print(
                    f"  request {i + 1}/{len(parts)}: {len(records)} findings, live {live_s:.0f} s",
                    file=sys.stderr,
                )
    finally:
        engine.dispose()
    biggest = max((len(p) for p in parts), default=0)
    return records, copy_s, live_s, len(parts), biggest


def _canonical(value: Any) -> str:
    from tracking.detectors.findings import jsonable

    return json.dumps(jsonable(value or {}), sort_keys=True, ensure_ascii=False)


def _first_by_id(records: Sequence[Mapping[Any, Any]]) -> tuple[dict[str, Mapping[Any, Any]], int]:
    """Keep each finding id's first record; also return how many later records repeated one."""
    out: dict[str, Mapping[str, Any]] = {}
    repeated = 0
    for r in records:
        fid = str(r["finding_id"])
        if fid in out:
            repeated += 1
        else:
            out[fid] = r
    return out, repeated


def compare(
    batch_records: Sequence[Mapping[Any, Any]], live_records: Sequence[Mapping[Any, Any]]
) -> dict[str, dict[str, Any]]:
    """Per kind: counts, same/only-batch/only-live ids, equal details and confidence."""
    from engines.live import LIVE_KINDS
    from tracking.detectors.findings import PROVISIONAL

    batch, _ = _first_by_id(batch_records)
    settled = [r for r in live_records if not (r.get("details") or {}).get(PROVISIONAL)]
    live, repeated = _first_by_id(settled)  # a day's provisional versions: its settled one
    kinds = list(LIVE_KINDS) + sorted(
        {str(r["kind"]) for r in (*batch.values(), *live.values())} - set(LIVE_KINDS)
    )
    out: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        b = {f for f, r in batch.items() if r["kind"] == kind}
        lv = {f for f, r in live.items() if r["kind"] == kind}
        common = sorted(b & lv)
        details_diff = [
            f for f in common if _canonical(batch[f]["details"]) != _canonical(live[f]["details"])
        ]
        conf_diff = [
            f
            for f in common
            if float(batch[f]["confidence"]) != float(live[f]["confidence"])  # exact: same kernel
        ]
        out[kind] = {
            "batch": len(b),
            "live": len(lv),
            "same": len(common),
            "only_batch": sorted(b - lv),
            "only_live": sorted(lv - b),
            "details_equal": len(common) - len(details_diff),
            "confidence_equal": len(common) - len(conf_diff),
            "details_diff": details_diff,
            "confidence_diff": conf_diff,
            "diff_keys": {
                f: _diff_keys(batch[f]["details"], live[f]["details"]) for f in details_diff
            },
        }
    out["_repeated"] = {"live": repeated}
    return out


def _diff_keys(a: Any, b: Any) -> list[str]:
    """Top-level ``details`` keys whose values differ (or that one side lacks)."""
    from tracking.detectors.findings import jsonable

    ja, jb = jsonable(a or {}), jsonable(b or {})
    if not isinstance(ja, dict) or not isinstance(jb, dict):
        return ["<details>"]
    return sorted(k for k in set(ja) | set(jb) if ja.get(k, "<absent>") != jb.get(k, "<absent>"))


def differs(table: Mapping[str, Mapping[str, Any]]) -> bool:
    """True when any kind's live findings differ from the batch's."""
    return any(
        r["only_batch"] or r["only_live"] or r["details_diff"] or r["confidence_diff"]
        for k, r in table.items()
        if not k.startswith("_")
    )


def markdown(
    table: Mapping[str, Mapping[str, Any]],
    *,
    batch: Batch,
    replay: Replay,
    command: str,
    wall_s: float,
) -> str:
    """The report: parameters, the table kind by kind, example differences, timings."""
    meta = batch.meta
    kinds = [k for k in table if not k.startswith("_")]
    lines = [
        "# Live replay vs batch on the simulated Porto Alegre fleet",
        "",
        f"Command: `{command}`",
        "",
        f"Simulation: seed {meta['seed']}, {meta['days']} days ({meta['first_day']} … "
        f"{meta['as_of']}), {meta['prefixos']} prefixos, {len(batch.fixes):,} fixes; "
        f"{replay.requests:,} requests of fleet time (largest {replay.max_request_fixes:,} fixes).",
        "",
        "| kind | batch | live | same id | only batch | only live | details = | confidence = |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    tot = dict.fromkeys(("batch", "live", "same", "only_batch", "only_live", "details", "conf"), 0)
    for kind in kinds:
        r = table[kind]
        row = {
            "batch": r["batch"],
            "live": r["live"],
            "same": r["same"],
            "only_batch": len(r["only_batch"]),
            "only_live": len(r["only_live"]),
            "details": r["details_equal"],
            "conf": r["confidence_equal"],
        }
        for k, v in row.items():
            tot[k] += v
        lines.append(
            f"| {kind} | {row['batch']} | {row['live']} | {row['same']} | {row['only_batch']} | "
            f"{row['only_live']} | {row['details']}/{row['same']} | {row['conf']}/{row['same']} |"
        )
    lines.append(
        f"| **total** | {tot['batch']} | {tot['live']} | {tot['same']} | {tot['only_batch']} | "
        f"{tot['only_live']} | {tot['details']}/{tot['same']} | {tot['conf']}/{tot['same']} |"
    )
    repeated = int(table.get("_repeated", {}).get("live", 0))
    lines += [
        "",
        f"Live records repeating an id already returned: {repeated}.",
        f"Verdict: {'DIFFERENT' if differs(table) else 'live = batch'}.",
    ]
    examples = []
    for kind in kinds:
        r = table[kind]
        for label, ids in (
            ("only batch", r["only_batch"]),
            ("only live", r["only_live"]),
            ("details differ", r["details_diff"]),
            ("confidence differs", r["confidence_diff"]),
        ):
            if not ids:
                continue
            shown = []
            for f in ids[:EXAMPLES]:
                keys = r["diff_keys"].get(f) if label == "details differ" else None
                shown.append(f"`{f}`" + (f" ({', '.join(keys)})" if keys else ""))
            more = f" and {len(ids) - EXAMPLES} more" if len(ids) > EXAMPLES else ""
            examples.append(f"- {kind}, {label}: {', '.join(shown)}{more}")
    if examples:
        lines += ["", "Examples of differences:", "", *examples]
    rate = replay.fixes / replay.live_s if replay.live_s > 0 else float("nan")
    lines += [
        "",
        "| step | seconds |",
        "|---|---:|",
        f"| simulate + write files | {batch.simulate_s:.1f} |",
        f"| batch (read + analyze_pings) | {batch.analyze_s:.1f} |",
        f"| database + pontual import (municipalities, stands, fleet) | {replay.import_s:.1f} |",
        f"| copy_fixes (all requests) | {replay.copy_s:.1f} |",
        f"| process_fixes (all requests) | {replay.live_s:.1f} |",
        f"| wall, whole script | {wall_s:.1f} |",
        "",
        f"Live throughput: {rate:,.0f} fixes/s in `process_fixes` "
        f"({replay.fixes:,} fixes, {replay.requests:,} requests, "
        f"{1000 * replay.live_s / max(replay.requests, 1):.0f} ms per request).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS)
    parser.add_argument("--prefixos", type=int, default=DEFAULT_PREFIXOS)
    parser.add_argument(
        "--request-min", type=float, default=DEFAULT_REQUEST_MIN, help="fleet minutes per request"
    )
    parser.add_argument("--url", default=None, help="PostgreSQL server URL")
    parser.add_argument("--keep", type=Path, help="folder for the simulated files (kept)")
    parser.add_argument("--report", type=Path, help="also write the markdown here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when live differs")
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    a = parser.parse_args(argv)
    if not a.request_min > 0:
        parser.error(f"--request-min was {a.request_min!r}; expected minutes > 0")

    from db.engine import create_database, drop_database, parse_url
    from db.migrate import upgrade

    wall0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="live_replay_") as tmp:
        root = a.keep or Path(tmp)
        batch = simulate_and_analyze(
            seed=a.seed, days=a.days, n_prefixos=a.prefixos, root=root / "in"
        )
        t0 = time.perf_counter()
        server = parse_url(_server_url(a.url))
        name = f"pontual_live_replay_{secrets.token_hex(4)}"
        url = server.set(database=name).render_as_string(hide_password=False)
        create_database(url)
        try:
            upgrade(url)
            load_registry(batch, url=url)
            import_s = time.perf_counter() - t0
            records, copy_s, live_s, n_req, biggest = replay_live(
                batch, url=url, request_min=a.request_min, progress=a.progress
            )
        finally:
            drop_database(url)
    replay = Replay(
        requests=n_req,
        fixes=len(batch.fixes),
        copy_s=copy_s,
        live_s=live_s,
        import_s=import_s,
        max_request_fixes=biggest,
    )
    table = compare(batch.findings.to_dict("records"), records)
    command = (
        f".venv/bin/python bench/bench_live_replay.py --seed {a.seed} --days {a.days} "
        f"--prefixos {a.prefixos} --request-min {a.request_min:g}"
    )
    md = markdown(
        table, batch=batch, replay=replay, command=command, wall_s=time.perf_counter() - wall0
    )
    print(md)
    if a.report:
        a.report.write_text(md, encoding="utf-8")
    return 1 if a.strict and differs(table) else 0


if __name__ == "__main__":
    sys.exit(main())
