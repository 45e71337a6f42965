"""Benchmark: `pontual analyze` end to end on a synthetic Porto Alegre day, stage by stage.

Data (written to a temporary folder):

- **stands** — the real Porto Alegre stands with ``coord_quality == ok`` (364 of 379) as a
  GeoJSON of points (``stand_id`` = ``codigo``), buffered 30 m on load (``--stand-radius-m``);
- **fleet** — a contract fleet CSV: every simulated taxi with a parking licence at its home
  stand, 2 % suspended and 1 % revoked, some permits expired;
- **pings** — ``--n`` fixes (default 10M) of ``--vehicles`` taxis (default 3,375, Porto Alegre's
  fleet: ~19M fixes a day at one every 15 s), every 15 s from 06:00 local, in meter cycles: wait
  at a stand (free, 1–40 min, a queue place within ~8 m of the stand's centre), trip with a
  passenger (occupied, 5–25 min at 20–32 km/h, tariff 2 one time in ten), sometimes a stop (off,
  10–45 min), cruise back to a stand (free, 3–15 min); GPS noise 3–6 m, rare tracking gaps
  (10–30 min), 0.1 % fixes sent twice, 0.05 % broken (empty coordinates, naive timestamps,
  unknown meter). Rows in time order, as a fleet server exports them; ISO 8601 timestamps with
  the ``-03:00`` offset; all optional columns. Parquet (``--format parquet``) holds the same fixes
  typed (floats, tz-aware timestamps).

Then, each in its own fresh subprocess:

1. the real CLI, ``pontual analyze --pings … --stands … --fleet … --municipality 4314902
   --stand-radius-m 30 --out …`` (every detector whose inputs are there; the bundled Porto Alegre
   boundary) — the file engine (``engines/buckets.py``) with each ``--jobs`` of ``--jobs``, with
   ``--kinds nenhum`` (the tracking core alone) if ``--core``, and the Dask engine with each
   worker count of ``--dask`` (given the file: the client writes a temporary dataset first; with
   ``--dataset``, also ``pontual dataset write`` once and the Dask runs given its folder, the
   workers reading the buckets) — timed ``--repeat`` times, with the main process's peak RSS
   (with Dask: the client's, the local cluster's scheduler included)
   (``VmHWM`` of ``/proc/self/status``), then run once more for the peak of the process tree's
   summed PSS (sampling it slows the run down, so that run is not timed);
2. the in-memory engine (``read_pings`` + ``engines.pipeline.analyze_pings``, every fix held),
   in-process, stage by stage: reading + validation, stands/fleet/boundary, each
   stage of ``engines.pipeline.analyze_pings`` (marked by its progress labels), each detector,
   writing the output files and the map. The peak RSS of each stage is ``VmHWM`` after resetting
   it (``/proc/self/clear_refs``) at the stage's start.

**Shapes against the peer** (``--shapes city month``, instead of the runs above): for each shape,
the whole ``pontual analyze`` process with default flags (``--jobs`` = the cores available) and,
each in its own process, the peer: geopandas ``points_from_xy`` + ``sjoin(predicate="within")``
of the same fixes against the same stands buffered 30 m (its process timed whole, its step
alone); fixes/s and the ratio to the step. Then ``pontual analyze --help`` and the analysis
start (to the first progress line, on a pty). The *city* shape is the one above (``--n`` fixes of
``--vehicles`` taxis, one day, ``--format``); the *month* shape is ``--month-n`` (3.2M) fixes of
235 taxis over 64 days (15 % of days off, one shift a day from 06:00–14:00 ending with the meter
off), Parquet. ``--days`` gives the runs above a multi-day shape too.

Usage::

    .venv/bin/python bench/bench_analyze.py [--n 10000000] [--vehicles 3375] [--days 1]
        [--format csv|parquet] [--keep DIR] [--skip-cli] [--skip-stages]
        [--jobs 1 2] [--core] [--dask 1 2] [--dataset] [--repeat 3] [--timeline 2]
    .venv/bin/python bench/bench_analyze.py --keep DIR --dataset --dask 1 2 --dask-stages
    .venv/bin/python bench/bench_analyze.py --shapes city month [--month-n 3200000] [--repeat 2]

``--n 1000000`` runs in about a minute.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
POA_STANDS = ROOT / "data" / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
POA = "4314902"
STAND_RADIUS_M = 30.0
START_LOCAL = pd.Timestamp("2024-03-04T06:00:00", tz="America/Sao_Paulo")
STEP_S = 15
M_PER_DEG = 111_320.0
# Porto Alegre's urban area, for drop-offs (a few land outside the municipality, as in life).
LAT_RANGE = (-30.20, -29.96)
LON_RANGE = (-51.27, -51.08)

# --- synthetic data --------------------------------------------------------------------------


def write_stands(path: Path) -> pd.DataFrame:
    """Write the POA stands (coordinates ``ok``) as a contract GeoJSON of points; return them."""
    raw = json.loads(POA_STANDS.read_text(encoding="utf-8"))
    features = []
    rows = []
    for feat in raw["features"]:
        props = feat["properties"]
        if props.get("coord_quality") != "ok":
            continue
        lon, lat = feat["geometry"]["coordinates"][:2]
        stand_id = str(props["codigo"])
        features.append(
            {
                "type": "Feature",
                "properties": {
                    "stand_id": stand_id,
                    "name": props.get("nome"),
                    "municipality": POA,
                },
                "geometry": {"type": "Point", "coordinates": [lon, lat]},
            }
        )
        rows.append((stand_id, lat, lon))
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return pd.DataFrame(rows, columns=["stand_id", "lat", "lon"])


def write_fleet(
    path: Path, vehicles: np.ndarray, home: np.ndarray, rng: np.random.Generator
) -> None:
    """Write a contract fleet CSV: a licence at the home stand; a few barred or expired."""
    n = len(vehicles)
    status = np.where(rng.random(n) < 0.02, "suspended", "active").astype(object)
    status[rng.random(n) < 0.01] = "revoked"
    barred = status != "active"
    since = np.where(barred, "2024-02-20", "").astype(object)
    until = np.where(status == "suspended", "2024-03-20", "").astype(object)
    alvara = np.where(rng.random(n) < 0.01, "2024-01-31", "2025-12-31").astype(object)
    pd.DataFrame(
        {
            "vehicle_id": vehicles,
            "plate": [f"IZZ{i:04d}" for i in range(n)],
            "accessible": np.where(rng.random(n) < 0.05, "true", "false"),
            "stands": home,
            "status": status,
            "status_since": since,
            "status_until": until,
            "alvara_valid_until": alvara,
            "inspection_valid_until": "2025-06-30",
            "municipality": POA,
        }
    ).to_csv(path, index=False)


def simulate(
    n: int, stands: pd.DataFrame, *, n_vehicles: int, days: int = 1, seed: int = 11
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Return ``n`` fixes (typed Arrow table, time order), the vehicle ids and home stands.

    With ``days`` > 1 (the multi-day shape), each vehicle's fixes are spread over its working
    days (15 % of days off, drawn per vehicle), one shift a day starting 06:00–14:00 local.
    """
    rng = np.random.default_rng(seed)
    v_count = max(1, min(n_vehicles, n))
    per = -(-n // v_count)  # fixes per vehicle
    s_lat = stands["lat"].to_numpy()
    s_lon = stands["lon"].to_numpy()
    n_stands = len(stands)
    home = rng.integers(0, n_stands, v_count)

    # Meter cycles: wait at a stand, trip, optional stop, cruise back; durations in fixes.
    cycles = max(4, int(per / 100) + 4)
    shape = (v_count, cycles)
    wait = rng.integers(4, 161, shape) * (rng.random(shape) < 0.75)  # a quarter: street hail
    trip = rng.integers(20, 101, shape)
    stop = rng.integers(40, 181, shape) * (rng.random(shape) < 0.3)
    cruise = rng.integers(12, 61, shape)
    dur = np.stack([wait, trip, stop, cruise], axis=2).reshape(v_count, cycles * 4)
    short = per - dur.sum(axis=1)
    dur[:, -1] += np.maximum(short, 0)

    # Anchors: stand of each cycle (home 60 %), drop-off at a distance fitting the trip.
    stand_of = np.where(rng.random(shape) < 0.6, home[:, None], rng.integers(0, n_stands, shape))
    a_lat, a_lon = s_lat[stand_of], s_lon[stand_of]
    speed_ms = rng.uniform(5.5, 9.0, shape)
    reach_m = trip * STEP_S * speed_ms / 1.3
    angle = rng.uniform(0, 2 * np.pi, shape)
    d_lat = np.clip(a_lat + reach_m * np.sin(angle) / M_PER_DEG, *LAT_RANGE)
    d_lon = np.clip(
        a_lon + reach_m * np.cos(angle) / (M_PER_DEG * np.cos(np.radians(a_lat))), *LON_RANGE
    )
    next_lat = np.concatenate([a_lat[:, 1:], a_lat[:, -1:]], axis=1)
    next_lon = np.concatenate([a_lon[:, 1:], a_lon[:, -1:]], axis=1)
    # Queue place within ~8 m of the stand's centre, held during the wait.
    q_lat = a_lat + rng.normal(0, 5, shape) / M_PER_DEG
    q_lon = a_lon + rng.normal(0, 5, shape) / (M_PER_DEG * np.cos(np.radians(a_lat)))
    start_lat = np.stack([q_lat, q_lat, d_lat, d_lat], axis=2).reshape(v_count, -1)
    start_lon = np.stack([q_lon, q_lon, d_lon, d_lon], axis=2).reshape(v_count, -1)
    end_lat = np.stack([q_lat, d_lat, d_lat, next_lat], axis=2).reshape(v_count, -1)
    end_lon = np.stack([q_lon, d_lon, d_lon, next_lon], axis=2).reshape(v_count, -1)
    slot = np.tile(np.arange(4, dtype=np.int8), v_count * cycles)
    tariff2 = np.repeat(rng.random(v_count * cycles) < 0.1, 4)
    del wait, trip, stop, cruise, stand_of, a_lat, a_lon, d_lat, d_lon, next_lat, next_lon

    # Expand episodes to fixes: the first ``per`` fixes of each vehicle.
    flat = dur.reshape(-1)
    episode = np.repeat(np.arange(flat.size, dtype=np.int64), flat)
    first_fix = np.concatenate([[0], np.cumsum(dur.sum(axis=1))[:-1]])
    take = (first_fix[:, None] + np.arange(per)[None, :]).reshape(-1)[: v_count * per]
    episode = episode[take]
    del take
    ep_start = (np.cumsum(flat) - flat)[episode]  # in the flat sequence of all vehicles
    veh = np.repeat(np.arange(v_count), per)
    within = np.arange(episode.size, dtype=np.int64) - veh * per - (ep_start - first_fix[veh])
    frac = within / np.maximum(flat[episode], 1)
    lat = start_lat.reshape(-1)[episode] + (end_lat - start_lat).reshape(-1)[episode] * frac
    lon = start_lon.reshape(-1)[episode] + (end_lon - start_lon).reshape(-1)[episode] * frac
    kind = slot[episode]
    moving = (kind == 1) | (kind == 3)
    noise_m = np.where(moving, 6.0, 3.0)
    lat += rng.normal(0, 1, lat.size) * noise_m / M_PER_DEG
    lon += rng.normal(0, 1, lon.size) * noise_m / (M_PER_DEG * np.cos(np.radians(lat)))
    ep_len_m = np.hypot(
        (end_lat - start_lat).reshape(-1) * M_PER_DEG,
        (end_lon - start_lon).reshape(-1) * M_PER_DEG * np.cos(np.radians(-30.05)),
    )
    ep_speed = ep_len_m / np.maximum(flat, 1) / STEP_S * 3.6
    speed = np.where(
        moving, ep_speed[episode] + rng.normal(0, 3, lat.size), rng.uniform(0, 2, lat.size)
    )
    heading = (
        np.degrees(
            np.arctan2(
                (end_lon - start_lon).reshape(-1)[episode],
                (end_lat - start_lat).reshape(-1)[episode],
            )
        )
        % 360
    )
    meter_code = np.array([0, 1, 2, 0], dtype=np.int8)[kind]  # free, occupied, off, free
    tariff = np.where(kind == 1, np.where(tariff2[episode], 2, 1), 0).astype(np.int8)
    del start_lat, start_lon, end_lat, end_lon, frac, within, ep_start, kind, moving

    # Time: one fix every 15 s from each vehicle's start, with rare silences.
    step = np.full(lat.size, STEP_S, dtype=np.int64)
    gaps = rng.random(lat.size) < 0.0004
    step[gaps] = rng.integers(600, 1800, int(gaps.sum()))
    step[np.arange(v_count) * per] = 0
    t0 = START_LOCAL.tz_convert("UTC").value // 10**9 + rng.integers(0, STEP_S, v_count)
    secs = np.cumsum(step)
    secs -= np.repeat(secs[np.arange(v_count) * per], per)  # seconds since the vehicle's start
    shift = secs // (6 * 3600)  # two drivers, six-hour shifts
    if days > 1:
        secs, shift, shift_end = _spread_over_days(secs, veh, per, days=days, rng=rng)
        meter_code[shift_end] = 2  # the shift ends with the meter off
        tariff[shift_end] = 0
    secs += np.repeat(t0, per)
    driver = veh * 2 + (shift % 2)
    order = np.argsort(secs, kind="stable")[:n]
    vehicles = np.array([f"POA-{i:04d}" for i in range(v_count)], dtype=object)
    table = pa.table(
        {
            "vehicle_id": pc.take(pa.array(vehicles, pa.string()), pa.array(veh[order])),
            "timestamp": pa.array(secs[order] * 10**9, pa.timestamp("ns", tz="UTC")),
            "lat": np.round(lat[order], 6),
            "lon": np.round(lon[order], 6),
            "speed_kmh": np.round(np.clip(speed[order], 0, None), 1),
            "heading_deg": np.round(heading[order]).astype(np.int16) % 360,
            "accuracy_m": rng.integers(3, 16, n).astype(np.int16),
            "meter": pa.DictionaryArray.from_arrays(
                pa.array(meter_code[order]), pa.array(["free", "occupied", "off"])
            ),
            "tariff": pa.array(tariff[order], mask=tariff[order] == 0),
            "driver_id": pc.binary_join_element_wise(
                "M", pc.cast(pa.array(driver[order]), pa.string()), ""
            ),
        }
    )
    return table, vehicles, stands["stand_id"].to_numpy()[home]


def _spread_over_days(
    secs: np.ndarray, veh: np.ndarray, per: int, *, days: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut each vehicle's ``per`` fixes into one shift per working day.

    ``secs`` are seconds since the vehicle's first fix (``per`` a vehicle, in order). Returns
    the seconds since 06:00 local of the first day, the day (which driver drives), and a mask
    of each shift's last four fixes.
    """
    v_count = len(secs) // per
    works = rng.random((v_count, days)) >= 0.15
    works[:, 0] = True
    n_work = works.sum(axis=1)
    k = np.tile(np.arange(per, dtype=np.int64), v_count)
    rank = k * n_work[veh] // per  # the vehicle's working day of each fix, 0..n_work-1
    day = np.argsort(~works, axis=1, kind="stable")[veh, rank]
    first = np.ones(len(secs), dtype=bool)
    first[1:] = rank[1:] != rank[:-1]
    first[np.arange(v_count) * per] = True
    group = np.cumsum(first) - 1
    start_s = rng.integers(0, 8 * 3600, (v_count, days))  # after 06:00 local
    out = secs - secs[first][group] + day * 86_400 + start_s[veh, day]
    if ((np.diff(out) <= 0) & (veh[1:] == veh[:-1])).any():
        hours = per * STEP_S / 3600 / n_work.min()
        msg = (
            f"--n: ~{hours:.0f} h of fixes a working day: a vehicle's shifts would overlap "
            "(two tracks under one id); raise --days or lower --n"
        )
        raise SystemExit(msg)
    last = np.r_[first[1:], True]
    end = last.copy()
    for back in range(1, 4):
        end[:-back] |= last[back:] & (group[:-back] == group[back:])
    return out, day, end


def _iso_local(ts: pa.ChunkedArray) -> pa.Array:
    """Timestamps as ISO 8601 text with the ``-03:00`` offset (through the unique seconds)."""
    secs = np.asarray(pc.cast(ts, pa.int64()).to_numpy()) // 10**9
    uniq, inverse = np.unique(secs, return_inverse=True)
    text = (
        pd.to_datetime(uniq, unit="s", utc=True)
        .tz_convert("America/Sao_Paulo")
        .strftime("%Y-%m-%dT%H:%M:%S%z")
        .str.replace(r"(\d\d)$", r":\1", regex=True)
    )
    return pc.take(pa.array(np.asarray(text, dtype=object), pa.string()), pa.array(inverse))


def write_pings(table: pa.Table, path: Path, *, fmt: str, seed: int = 12) -> dict[str, int]:
    """Write the fixes with a few resent (duplicate) and broken rows; return their counts."""
    rng = np.random.default_rng(seed)
    n = table.num_rows
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=1_000_000)
        return {"resent": 0, "broken": 0}
    cols = {
        "vehicle_id": table.column("vehicle_id"),
        "timestamp": _iso_local(table.column("timestamp")),
        **{
            c: pc.cast(table.column(c), pa.string())
            for c in ("lat", "lon", "speed_kmh", "heading_deg", "accuracy_m")
        },
        "meter": pc.cast(table.column("meter"), pa.string()),
        "tariff": pc.fill_null(pc.cast(table.column("tariff"), pa.string()), ""),
        "driver_id": table.column("driver_id"),
    }
    text = pa.table(cols)
    # 0.1 % of fixes sent twice (the copy right after), 0.05 % broken in assorted ways.
    resent = np.flatnonzero(rng.random(n) < 0.001)
    idx = np.sort(np.concatenate([np.arange(n), resent]))[:n]
    text = text.take(pa.array(idx))
    broken = np.flatnonzero(rng.random(n) < 0.0005)
    kinds = rng.integers(0, 3, broken.size)
    for k, (col, value) in enumerate(
        (("lat", ""), ("timestamp", "2024-03-04 09:00:00"), ("meter", "busy"))
    ):
        rows = broken[kinds == k]
        values = np.asarray(text.column(col).to_numpy(zero_copy_only=False), dtype=object)
        values[rows] = value
        text = text.set_column(text.schema.get_field_index(col), col, pa.array(values, pa.string()))
    pcsv.write_csv(text, path)
    return {"resent": int(np.sum(idx[1:] == idx[:-1])), "broken": int(broken.size)}


# --- measurement -----------------------------------------------------------------------------


def _status_mb(key: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")


_CLI_WRAPPER = """
import atexit, json, sys, time
t0 = time.perf_counter()
def report():
    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]
    print(json.dumps({'seconds': time.perf_counter() - t0, 'peak_mb': int(hwm) / 1024}),
          file=sys.stderr)
atexit.register(report)
sys.argv = ['pontual', *sys.argv[1:]]
import api.cli
leave = api.cli._exit_at_once  # a successful analyze leaves without atexit: report first
api.cli._exit_at_once = lambda: (report(), leave())
api.cli.main()
"""


def run_cli(
    args: list[str], *, sample_tree: bool = False, command: tuple[str, ...] = ("analyze",)
) -> dict[str, Any]:
    """Run ``pontual analyze`` (or ``command``) in a subprocess; return its time, peaks, output.

    ``peak_mb`` is the main process's VmHWM. With ``sample_tree``, ``tree_peak_mb`` is the
    highest sum, sampled every 50 ms, of the proportional set sizes (PSS: shared pages split
    between the sharers, so forked workers are not counted twice) of the process and its
    children (``--jobs``, Dask workers). The sampling reads every process's ``smaps`` and costs
    the run a few seconds of a core at 10M fixes: the run's time is then not reported.
    """
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI_WRAPPER, *command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not done.wait(0.05):
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            total = 0
            for p in tree:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_full_info().pss
            peak[0] = max(peak[0], total)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_tree:
        sampler.start()
    stdout, stderr = proc.communicate()
    done.set()
    if sample_tree:
        sampler.join()
    report = json.loads(stderr.strip().splitlines()[-1])
    report["tree_peak_mb"] = peak[0] / 2**20
    report["returncode"] = proc.returncode
    report["stdout"] = stdout.strip()
    if proc.returncode != 0:
        report["stderr"] = stderr[-2000:]
    return report


def _moved(dask_worker: Any) -> dict[str, float]:
    """On a worker: bytes it fetched from other workers, bytes it served (to workers and the
    client), its peak RSS (MB)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        status = dict(line.split(":", 1) for line in fh)
    return {
        "in": sum(e["total"] for e in dask_worker.transfer_incoming_log),
        "out": dask_worker.transfer_outgoing_bytes_total,
        "unlogged": dask_worker.state.transfer_incoming_count_total
        - len(dask_worker.transfer_incoming_log),
        "peak_mb": int(status["VmHWM"].split()[0]) / 1024,
    }


def run_on_cluster(cli_args: list[str], *, workers: int) -> dict[str, Any]:
    """Run ``pontual analyze --scheduler`` on a local cluster this process starts (the engine's
    own :func:`engines.distributed.dask_client`); add what the workers moved and their peaks.

    ``in_mb``: bytes the workers fetched from each other (Dask's transfers, every one logged);
    ``client_mb``: bytes they served the client (served in all minus fetched by workers).
    ``peak_mb`` is then the CLI process alone (the scheduler runs here).
    """
    import engines.distributed
    from engines.distributed import dask_client

    # the workers' transfer logs kept whole, to count them (the engine keeps none)
    engines.distributed.DASK_CONFIG = engines.distributed.DASK_CONFIG | {
        "distributed.admin.low-level-log-length": 10_000_000
    }
    with dask_client(workers=workers) as client:
        address = client.scheduler_info()["address"]
        report = run_cli([*cli_args, "--engine", "dask", "--scheduler", address])
        moved = list(client.run(_moved).values())
    if any(m["unlogged"] for m in moved):
        raise SystemExit("a worker's transfer log lost entries: raise its length")
    report["in_mb"] = sum(m["in"] for m in moved) / 1e6
    report["client_mb"] = (sum(m["out"] for m in moved) - sum(m["in"] for m in moved)) / 1e6
    report["worker_peak_mb"] = max(m["peak_mb"] for m in moved)
    return report


def run_whole(cmd: list[str]) -> dict[str, Any]:
    """Run a command as its own process; return its wall time (start to exit) and output."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(proc.returncode)
    return {"seconds": seconds, "stdout": proc.stdout.strip(), "stderr": proc.stderr.strip()}


def run_peer(spec: dict[str, Any]) -> dict[str, Any]:
    """The peer, in this process: geopandas ``points_from_xy`` + ``sjoin`` of the same fixes.

    The stands are buffered by ``STAND_RADIUS_M`` in SIRGAS 2000 / UTM 22S as the CLI does;
    the fixes' coordinates are read from the pings file (not timed). Returns the step's time.
    """
    import geopandas as gpd

    stands = gpd.read_file(spec["stands"]).to_crs(31982)
    stands = gpd.GeoDataFrame(geometry=stands.buffer(STAND_RADIUS_M), crs=31982).to_crs(4326)
    path = Path(spec["pings"])
    if path.suffix == ".parquet":
        table = pq.read_table(path, columns=["lat", "lon"])
        lat, lon = table["lat"].to_numpy(), table["lon"].to_numpy()
    else:
        frame = pd.read_csv(path, usecols=["lat", "lon"])
        frame = frame.apply(pd.to_numeric, errors="coerce").dropna()
        lat, lon = frame["lat"].to_numpy(), frame["lon"].to_numpy()
    t = time.perf_counter()
    points = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    joined = gpd.sjoin(points, stands, predicate="within")
    return {"step_s": time.perf_counter() - t, "fixes": len(lat), "pairs": len(joined)}


_LABELS = {
    "Casando": "matching (H3 cover + point-in-polygon)",
    "Detectando visitas": "visits, queue, boardings",
    "Detectando paradas": "stops + trips (+ pickup stands)",
    "Calculando ocupação": "occupancy",
    "Rodando os detectores": "detectors",
}


def _short(label: str) -> str:
    for prefix, name in _LABELS.items():
        if label.startswith(prefix):
            return name
    return label


_PIPELINE_STEPS = (
    "build_stand_cover",
    "match_stands",
    "licence_frame_from_fleet",
    "detect_visits",
    "detect_stops",
    "detect_trips",
    "pickup_stands",
    "occupancy",
    "summarize",
)
"""Functions that ``engines.pipeline`` calls by name, timed as sub-rows of their stage."""


def _release() -> None:
    import ctypes
    import gc

    gc.collect()
    pa.default_memory_pool().release_unused()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def run_stages(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the CLI's steps in this process, stage by stage: seconds and peak RSS of each.

    A stage's peak is ``VmHWM`` after resetting it at the stage's start; sub-rows (the
    functions the pipeline calls, each detector) reset it too, and their peaks count towards
    their stage's. With ``trim``, after each stage and sub-row, the cyclic garbage collector runs
    and the allocators give freed memory back (a diagnostic: the CLI does neither), so
    ``RSS after`` is close to what stays alive.
    """
    import engines.pipeline as pipeline
    from api.cli_analyze import _bundled_boundary, _rulebooks
    from enforcement.proposals import proposal_summary, propose, write_proposals_json
    from engines.pipeline import AnalysisParams, analyze_pings, write_outputs
    from fleet.loaders import read_fleet
    from geo.calendar import DEFAULT_TIMEZONE
    from maps.findings import findings_map
    from stands.layers import read_stands
    from tracking.ingest import read_pings

    rows: list[dict[str, Any]] = []
    stage: dict[str, Any] = {}
    trim = bool(spec.get("trim"))

    def begin(name: str) -> None:
        row = {"stage": name, "level": 0, "t": time.perf_counter(), "floor": 0.0}
        rows.append(row)
        stage.clear()
        stage.update(row=row)
        _reset_peak()

    def end() -> None:
        if not stage:
            return
        row = stage.pop("row")
        row["seconds"] = time.perf_counter() - row.pop("t")
        row["peak_mb"] = max(_status_mb("VmHWM"), row.pop("floor"))
        if trim:
            _release()
        row["rss_after_mb"] = _status_mb("VmRSS")

    def sub_begin(name: str) -> dict[str, Any]:
        if stage:
            stage["row"]["floor"] = max(stage["row"]["floor"], _status_mb("VmHWM"))
        row = {"stage": name, "level": 1, "t": time.perf_counter()}
        rows.append(row)
        _reset_peak()
        return row

    def sub_end(row: dict[str, Any]) -> None:
        row["seconds"] = time.perf_counter() - row.pop("t")
        row["peak_mb"] = _status_mb("VmHWM")
        if trim:
            _release()
        row["rss_after_mb"] = _status_mb("VmRSS")
        if stage:
            stage["row"]["floor"] = max(stage["row"]["floor"], row["peak_mb"])

    def timed(name: str, func: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            row = sub_begin(name)
            try:
                return func(*args, **kwargs)
            finally:
                sub_end(row)

        return wrapper

    for name in _PIPELINE_STEPS:
        if hasattr(pipeline, name):
            setattr(pipeline, name, timed(name, getattr(pipeline, name)))
    detector: dict[str, Any] = {}
    original = pipeline.run_detectors

    def on_detector(kind: str) -> None:
        if detector:
            sub_end(detector.pop("row"))
        detector["row"] = sub_begin(f"detector: {kind}")

    def run_detectors(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("progress", on_detector)
        out = original(*args, **kwargs)
        if detector:
            sub_end(detector.pop("row"))
        return out

    pipeline.run_detectors = run_detectors

    params = AnalysisParams(timezone="America/Sao_Paulo")
    base = {"peak_mb": _status_mb("VmHWM"), "rss_after_mb": _status_mb("VmRSS")}
    rows.append({"stage": "(imports, before reading)", "level": 0, "seconds": 0.0, **base})
    begin("read + validate pings")
    pings, rejected = read_pings(spec["pings"], max_speed_kmh=params.max_speed_kmh)
    end()
    begin("stands, fleet, boundary")
    stands = read_stands(spec["stands"], default_radius_m=STAND_RADIUS_M)
    fleet = read_fleet(spec["fleet"], municipality=POA)
    boundary, timezone = _bundled_boundary(POA), DEFAULT_TIMEZONE  # POA's zone
    books, _ = _rulebooks(POA)
    end()

    def on_stage(label: str) -> None:
        end()
        begin(_short(label))

    result = analyze_pings(
        pings, rejected, stands, fleet=fleet, boundary=boundary, params=params, progress=on_stage
    )
    end()
    begin("proposals (rulebooks)")
    proposals, uncovered = propose(result.findings, books, timezone=timezone, fleet=fleet)
    result.summary |= proposal_summary(proposals, uncovered)
    end()
    begin("write outputs (CSV, GeoJSON, summary, proposals)")
    with tempfile.TemporaryDirectory() as out:
        write_outputs(result, Path(out))
        write_proposals_json(proposals, Path(out) / "proposals.json")
        end()
        begin("map.html")
        findings_map(stands, result.findings, fixes=pings, timezone=timezone, tiles=None).save(
            str(Path(out) / "map.html")
        )
        end()
    keys = ("pings_valid", "pings_rejected", "pings_in_stands", "visits", "boardings", "trips")
    summary = {k: result.summary.get(k) for k in (*keys, "stops")}
    summary["findings"] = int(len(result.findings))
    summary["pings_frame_mb"] = round(pings.memory_usage(deep=True).sum() / 2**20, 1)
    rows.append({"stage": "(summary)", "level": 0, "summary": summary})
    return rows


def run_file_timeline(spec: dict[str, Any]) -> list[tuple[str, float]]:
    """Run the CLI's steps with the file engine in this process; return when each began.

    The same calls as ``pontual analyze --jobs J`` (the cyclic collector paused, freed heap kept,
    the buckets and half the cross-vehicle kinds in forked processes, then
    :func:`api.cli_analyze.write_results`), marked by the engine's own progress labels.
    """
    import gc

    gc.disable()
    t0 = time.perf_counter()
    marks: list[tuple[str, float]] = []

    def mark(label: str) -> None:
        marks.append((label, time.perf_counter() - t0))

    from api.cli_analyze import _bundled_boundary, _rulebooks, write_results
    from engines.buckets import analyze_file
    from engines.pipeline import AnalysisParams
    from fleet.loaders import read_fleet
    from geo.calendar import DEFAULT_TIMEZONE
    from runtime import keep_freed_heap
    from stands.layers import read_stands

    keep_freed_heap()
    mark("imports done")
    jobs = int(spec["jobs"])
    books, _ = _rulebooks(POA)
    area, tz = _bundled_boundary(POA), DEFAULT_TIMEZONE  # POA's zone
    stands = read_stands(Path(spec["stands"]), default_radius_m=STAND_RADIUS_M)
    fleet = read_fleet(Path(spec["fleet"]), municipality=POA)
    mark("stands, fleet, boundary done")
    params = AnalysisParams(timezone=tz)
    result, fixes = analyze_file(
        Path(spec["pings"]),
        stands,
        fleet=fleet,
        boundary=area,
        params=params,
        jobs=jobs,
        progress=mark,
    )
    mark("analysis done")
    write_results(
        result,
        fixes,
        Path(spec["out"]),
        stands=stands,
        books=books,
        timezone=tz,
        fleet=fleet,
        jobs=jobs,
        progress=mark,
    )
    mark("findings.geojson and map done (forked beside)")
    return marks


def print_timeline(marks: list[tuple[str, float]], n: int) -> None:
    """Print the file engine's timeline: each mark, when, and the time since the last one."""
    buckets = [i for i, (label, _) in enumerate(marks) if label.startswith("Validando")]
    inner = set(buckets[1:-1])  # of the buckets' marks, the first and the last
    keep = [m for i, m in enumerate(marks) if i not in inner]
    print("| at (s) | mark (a progress label opens a step; '… done' closes one) | since last (s) |")
    print("|---:|---|---:|")
    before = 0.0
    for label, t in keep:
        print(f"| {t:.2f} | {label} | {t - before:.2f} |")
        before = t
    print(f"| **{before:.2f}** | **total** ({n / before / 1e6:.2f} M pings/s) | |")


def print_stages(rows: list[dict[str, Any]], n: int) -> None:
    """Print the stage rows as a markdown table (sub-rows indented), then the counts."""
    print("| stage | seconds | pings/s | peak RSS (MB) | RSS after (MB) |")
    print("|---|---:|---:|---:|---:|")
    total = 0.0
    peak = 0.0
    for r in rows:
        if r["stage"] == "(summary)":
            continue
        if r["stage"].startswith("("):
            print(f"| {r['stage']} | | | {r['peak_mb']:,.0f} | {r['rss_after_mb']:,.0f} |")
            continue
        name = ("&nbsp;&nbsp;↳ " if r["level"] else "") + r["stage"]
        if not r["level"]:
            total += r["seconds"]
            name = f"**{name}**"
        peak = max(peak, r["peak_mb"])
        rate = f"{n / r['seconds'] / 1e6:,.2f} M" if r["seconds"] > 0 else ""
        print(
            f"| {name} | {r['seconds']:.2f} | {rate} | {r['peak_mb']:,.0f} | "
            f"{r['rss_after_mb']:,.0f} |"
        )
    print(f"| **total** | **{total:.2f}** | **{n / total / 1e6:,.2f} M** | **{peak:,.0f}** | |")
    summary = next((r["summary"] for r in rows if "summary" in r), {})
    print("\n" + ", ".join(f"{k} {v:,}" for k, v in summary.items()))


def write_data(
    folder: Path, *, n: int, vehicles: int, days: int, fmt: str
) -> tuple[Path, Path, Path]:
    """Write (or reuse) the pings, stands and fleet of a shape; print what they are."""
    tag = f"{n}" if days == 1 else f"{n}_{vehicles}v_{days}d"
    stands_path, fleet_path = folder / "stands.geojson", folder / f"fleet_{tag}.csv"
    pings_path = folder / f"pings_{tag}.{fmt}"
    t = time.perf_counter()
    stands = write_stands(stands_path)
    if not (pings_path.is_file() and fleet_path.is_file()):
        table, ids, home = simulate(n, stands, n_vehicles=vehicles, days=days)
        extra = write_pings(table, pings_path, fmt=fmt)
        write_fleet(fleet_path, ids, home, np.random.default_rng(13))
        del table
    else:
        extra = {}
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}; data: {n:,} fixes of {vehicles:,} taxis over {days} day(s), "
        f"{len(stands)} stands; {pings_path.suffix[1:]} {pings_path.stat().st_size / 1e6:,.0f} MB "
        f"{extra} (written in {time.perf_counter() - t:.0f} s)\n"
    )
    return pings_path, stands_path, fleet_path


def print_dask_stages(common: list[str], *, folder: Path, workers: list[int]) -> None:
    """Print the seconds of each progress stage of a Dask run on the dataset, by worker count."""
    from bench_startup import stage_times  # this folder's: run as a script

    pontual = str(Path(sys.executable).with_name("pontual"))
    runs = {}
    for w in workers:
        cli = [pontual, "analyze", *common, "--out", str(folder / "out")]
        cli += ["--pings", str(folder / "dataset"), "--engine", "dask", "--workers", str(w)]
        runs[w] = dict(stage_times(cli))
    labels = list(dict.fromkeys(label for r in runs.values() for label in r))
    print(
        f"**Dask on the dataset, by stage** (seconds from each progress label to the next, one "
        f"run each on a pty; load {os.getloadavg()[0]:.1f}):\n\n"
        f"| stage | {' | '.join(f'{w} worker(s)' for w in workers)} |\n"
        f"|---|{'---:|' * len(workers)}"
    )
    for label in [*labels, "total"]:
        cells = [sum(r.values()) if label == "total" else r.get(label) for r in runs.values()]
        text = " | ".join("—" if c is None else f"{c:.1f}" for c in cells)
        print(f"| {label} | {text} |")
    print()


def run_shapes(args: argparse.Namespace, folder: Path) -> None:
    """Each shape: whole `pontual analyze` (default flags) and the geopandas peer, side by side.

    Each is its own process, timed from start to exit (imports included), ``--repeat`` times;
    the peer's ``points_from_xy`` + ``sjoin`` step is also timed alone (reading not counted).
    """
    pontual = str(Path(sys.executable).with_name("pontual"))
    rows = []
    for shape in args.shapes:
        if shape == "city":
            n, vehicles, days, fmt = args.n, args.vehicles, 1, args.format
        else:
            n, vehicles, days, fmt = args.month_n, 235, 64, "parquet"
        pings, stands, fleet = write_data(folder, n=n, vehicles=vehicles, days=days, fmt=fmt)
        cli = [
            pontual, "analyze", "--pings", str(pings), "--stands", str(stands),
            "--fleet", str(fleet), "--municipality", POA,
            "--stand-radius-m", str(STAND_RADIUS_M), "--tiles", "none",
            "--out", str(folder / f"out_{shape}"),
        ]  # fmt: skip
        peer = [
            sys.executable, __file__, "--peer-json",
            json.dumps({"pings": str(pings), "stands": str(stands)}),
        ]  # fmt: skip
        ours = [run_whole(cli) for _ in range(args.repeat)]
        theirs = [run_whole(peer) for _ in range(args.repeat)]
        steps = [json.loads(r["stdout"].splitlines()[-1])["step_s"] for r in theirs]
        rows.append((shape, n, vehicles, days, ours, theirs, steps))
        print(ours[-1]["stdout"] + "\n", flush=True)
    from bench_startup import first_output_s  # this folder's: run as a script

    start = [first_output_s(cli) for _ in range(args.repeat)]
    helps = [run_whole([pontual, "analyze", "--help"])["seconds"] for _ in range(args.repeat)]
    print(
        f"load after the runs {os.getloadavg()[0]:.1f} (1 min); {args.repeat} run(s) each, "
        "each its own process, seconds start to exit (imports included):\n"
    )
    print(
        "| shape | fixes | `pontual analyze` s | M fixes/s (best) | peer process s "
        "| peer `sjoin` step s | M fixes/s (step, best) | ratio ours / step |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape, n, vehicles, days, ours, theirs, steps in rows:
        best = min(r["seconds"] for r in ours)
        ours_s = " / ".join(f"{r['seconds']:.1f}" for r in ours)
        theirs_s = " / ".join(f"{r['seconds']:.1f}" for r in theirs)
        print(
            f"| {shape}: {vehicles:,} taxis × {days} day(s) | {n:,} | "
            f"{ours_s} | {n / best / 1e6:.2f} | {theirs_s} | "
            f"{' / '.join(f'{x:.1f}' for x in steps)} | {n / min(steps) / 1e6:.2f} | "
            f"{best / min(steps):.2f} |"
        )
    print(
        f"\n`pontual analyze --help`: {' / '.join(f'{x:.2f}' for x in helps)} s; "
        f"analysis start (to the first progress line, on a pty): "
        f"{' / '.join(f'{x:.2f}' for x in start)} s"
    )


def compile_project() -> None:
    """Compile the project's bytecode, as ``make venv`` does (the peer's libraries are compiled
    at install): a shell with ``PYTHONDONTWRITEBYTECODE`` would time the compiling of every
    module at each start of ours."""
    from api._errors import ROOMS

    for room in ROOMS:
        compileall.compile_dir(ROOT / room, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="fixes (default 10M)")
    parser.add_argument("--vehicles", type=int, default=3375)
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv")
    parser.add_argument("--keep", type=Path, help="write the data here and keep it")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument(
        "--jobs", type=int, nargs="*", default=[1, 2], help="--jobs values of the CLI runs"
    )
    parser.add_argument("--core", action="store_true", help="also run --kinds nenhum")
    parser.add_argument(
        "--dask", type=int, nargs="*", default=[], help="Dask worker counts to run (e.g. 1 2)"
    )
    parser.add_argument(
        "--dataset",
        action="store_true",
        help="write a dataset (pontual dataset write) and run the --dask counts on it "
        "(instead of on the plain file)",
    )
    parser.add_argument(
        "--moves-only",
        action="store_true",
        help="with --dataset and --dask: only the table of what moves (the dataset already "
        "written in --keep)",
    )
    parser.add_argument(
        "--dask-stages",
        action="store_true",
        help="with --dataset and --dask: one more run each on a pty, seconds of each progress "
        "stage by worker count (the dataset already written in --keep)",
    )
    parser.add_argument("--skip-stages", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each CLI configuration (default 3)"
    )
    parser.add_argument(
        "--trim", action="store_true", help="give freed memory back after each stage (diagnostic)"
    )
    parser.add_argument(
        "--timeline",
        type=int,
        nargs="*",
        default=[],
        help="--jobs values whose file-engine timeline to print (each in its own process)",
    )
    parser.add_argument(
        "--days", type=int, default=1, help="days the --n fixes span (default 1: the city day)"
    )
    parser.add_argument(
        "--shapes",
        nargs="*",
        choices=("city", "month"),
        default=[],
        help="instead of the runs above: each shape's whole `pontual analyze` (default flags) "
        "against the geopandas peer, side by side (city: --n fixes of --vehicles taxis, one day, "
        "--format; month: --month-n fixes of 235 taxis over 64 days, Parquet)",
    )
    parser.add_argument("--month-n", type=int, default=3_200_000)
    parser.add_argument("--stages-json", help=argparse.SUPPRESS)
    parser.add_argument("--timeline-json", help=argparse.SUPPRESS)
    parser.add_argument("--peer-json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer_json:  # the peer's own process
        print(json.dumps(run_peer(json.loads(args.peer_json))))
        return
    if args.stages_json:  # the child process of the stage breakdown
        print(json.dumps(run_stages(json.loads(args.stages_json))))
        return
    if args.timeline_json:  # the child process of a file-engine timeline
        print(json.dumps(run_file_timeline(json.loads(args.timeline_json))))
        return
    compile_project()

    tmp = tempfile.TemporaryDirectory()
    folder = args.keep or Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    if args.shapes:
        run_shapes(args, folder)
        tmp.cleanup()
        return
    pings_path, stands_path, fleet_path = write_data(
        folder, n=args.n, vehicles=args.vehicles, days=args.days, fmt=args.format
    )
    if not args.skip_cli:
        common = [
            "--pings",
            str(pings_path),
            "--stands",
            str(stands_path),
            "--fleet",
            str(fleet_path),
            "--municipality",
            POA,
            "--stand-radius-m",
            str(STAND_RADIUS_M),
            "--tiles",
            "none",
        ]
        runs = [(f"file engine, --jobs {j}", ["--jobs", str(j)]) for j in args.jobs]
        if args.core:
            runs.append(("file engine, --jobs 1, --kinds nenhum", ["--kinds", "nenhum"]))
        if not args.dataset:  # a plain file under Dask goes through a temporary dataset
            runs += [
                (f"Dask LocalCluster, {w} worker(s)", ["--engine", "dask", "--workers", str(w)])
                for w in args.dask
            ]
        dataset = folder / "dataset"
        if args.dataset and args.dask:
            runs.append(("`pontual dataset write`", ["--out", str(dataset), "--force"]))
            runs += [
                (
                    f"Dask LocalCluster, {w} worker(s), on the dataset",
                    ["--engine", "dask", "--workers", str(w), "--pings", str(dataset)],
                )
                for w in args.dask
            ]
        print(
            "**CLI end to end** (`pontual analyze`, own process, every detector unless said; "
            f"{args.repeat} timed run(s) each, then one sampling the tree's memory):\n"
        )
        print(
            "| run | seconds (each run) | M pings/s (best) | peak RSS main (MB) "
            "| peak PSS tree (MB) | exit |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        last = ""
        if args.dataset and args.dask_stages:
            print_dask_stages(common, folder=folder, workers=args.dask)
        quick = args.moves_only or args.dask_stages
        for label, extra_args in [] if quick else runs:
            command: tuple[str, ...] = ("analyze",)
            cli_args = [*common, "--out", str(folder / "out"), *extra_args]
            if "dataset write" in label:
                command = ("dataset", "write")
                cli_args = ["--pings", str(pings_path), "--municipality", POA, *extra_args]
            timed = [run_cli(cli_args, command=command) for _ in range(args.repeat)]
            report = run_cli(cli_args, sample_tree=True, command=command)
            seconds = [t["seconds"] for t in timed]
            print(
                f"| {label} | {' / '.join(f'{x:.1f}' for x in seconds)} | "
                f"{args.n / min(seconds) / 1e6:.2f} | {max(t['peak_mb'] for t in timed):,.0f} | "
                f"{report['tree_peak_mb']:,.0f} | "
                f"{max(t['returncode'] for t in [*timed, report])} |",
                flush=True,
            )
            last = report["stdout"] or report.get("stderr", "")
        print("\n" + last + "\n")
        if args.dataset and args.dask:
            print(
                "**Dask on the dataset, what moves** (one more run each on a local cluster that "
                "this script starts, `--scheduler`):\n\n"
                "| workers | seconds | worker → worker MB | workers → client MB "
                "| worker peak MB (largest) | client peak MB (CLI process alone) |\n"
                "|---:|---:|---:|---:|---:|---:|"
            )
            for w in args.dask:
                cli_args = [*common, "--out", str(folder / "out"), "--pings", str(dataset)]
                r = run_on_cluster(cli_args, workers=w)
                print(
                    f"| {w} | {r['seconds']:.1f} | {r['in_mb']:,.1f} | {r['client_mb']:,.1f} | "
                    f"{r['worker_peak_mb']:,.0f} | {r['peak_mb']:,.0f} |",
                    flush=True,
                )
            print()
    for jobs in args.timeline:
        spec = {
            "pings": str(pings_path),
            "stands": str(stands_path),
            "fleet": str(fleet_path),
            "out": str(folder / "out"),
            "jobs": jobs,
        }
        proc = subprocess.run(
            [sys.executable, __file__, "--timeline-json", json.dumps(spec)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            # as `pontual analyze` sets it before Arrow loads (api/cli_analyze.py)
            env={**os.environ, "PYTHONPATH": str(ROOT), "MIMALLOC_PURGE_DELAY": "-1"},
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(proc.returncode)
        print(f"**File engine timeline** (`--jobs {jobs}`, the CLI's calls in one process):\n")
        print_timeline([tuple(m) for m in json.loads(proc.stdout.strip().splitlines()[-1])], args.n)
        print()
    if not args.skip_stages:
        spec = {
            "pings": str(pings_path),
            "stands": str(stands_path),
            "fleet": str(fleet_path),
            "trim": args.trim,
        }
        proc = subprocess.run(
            [sys.executable, __file__, "--stages-json", json.dumps(spec)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(proc.returncode)
        print_stages(json.loads(proc.stdout.strip().splitlines()[-1]), args.n)
    tmp.cleanup()


if __name__ == "__main__":
    main()
