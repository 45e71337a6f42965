"""Batch analysis on a ``dask.distributed`` cluster: the same functions, partitioned by vehicle.

:func:`analyze_pings_distributed` gives the result of :func:`tracking.pipeline.analyze_pings`
(same findings — ids and content —, visits, trips, stops and occupancy) by running the same
functions in two stages:

per partition (on the workers)
    A partition is a run of whole vehicles (every fix of each, all days). On it: stand matching
    (:func:`geo.cover.match_stands`), :func:`stands.visits.detect_visits`,
    :func:`tracking.stops.detect_stops`, :func:`tracking.trips.detect_trips`,
    :func:`tracking.pipeline.pickup_stands`, and :func:`tracking.detect.run_detectors` with the
    kinds whose facts are one vehicle's (:data:`VEHICLE_KINDS`: gaps, GPS anomalies, Bandeira 2,
    operating while barred, outside the municipality). Each partition also returns its
    *evidence fixes*: the fixes inside its visits, stops and meter trips, with one fix of margin
    on each side (the previous fix of a boarding, the neighbours of a pickup or drop-off).
gathered (on the client, over small frames)
    The partitions' visits, trips, stops and evidence fixes are concatenated in vehicle order
    (so every frame is in the order the local engine gives). Queue positions are recomputed over
    all vehicles of each stand with the kernel of ``detect_visits``; then occupancy
    (:func:`stands.occupancy.occupancy`) and ``run_detectors`` with the kinds that compare
    vehicles or need every day at once (:data:`CROSS_KINDS`: queue_jump, unlicensed_stand_use —
    its evidence names the queue position —, illegal_stand_formation — stops of several vehicles
    on several days —, habitual_absence — presence over the days —, inactivity — the whole
    fleet —, longer_route — past trips of other vehicles between the same cells).

Why vehicle partitions and not vehicle × day: a trip, a stop, a visit, a silence or a GPS
excursion that crosses midnight belongs to two days, and every per-vehicle kernel (trip and stop
segmentation, visit hysteresis, gap and anomaly runs, Bandeira 2 runs) would need an overlap
window and a stitching rule of its own, each a new way to differ from the local engine. A
vehicle's whole history is small — a year at one fix per 15 s is 2.1 M fixes, about 150 MB —, so
a partition of whole vehicles fits a worker and is exact by construction; the parallelism comes
from the fleet (3,375 taxis in Porto Alegre). Partitions group consecutive vehicles to about
``partition_fixes`` fixes each.

The input is read and validated on the client (:func:`tracking.ingest.read_pings`, whose row
numbers and duplicate rule are file-wide), then the partitions are scattered to the workers.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import geopandas as gpd
import numpy as np
import numpy.typing as npt
import pandas as pd

from geo.cover import build_stand_cover, match_stands
from geo.roads import RoadGraph
from stands.licences import licence_frame_from_fleet
from stands.occupancy import occupancy
from stands.visits import _queue_positions
from stands.visits import detect_visits as detect_visits_
from tracking import frames as fr
from tracking.detect import DetectorInputs, Thresholds, run_detectors
from tracking.detectors.findings import KINDS, empty_findings
from tracking.pipeline import (
    AnalysisParams,
    AnalysisResult,
    Progress,
    count_distinct,
    pickup_stands,
    summarize,
)
from tracking.stops import detect_stops
from tracking.trips import detect_trips

VEHICLE_KINDS = (
    "tracking_gap",
    "gps_anomaly",
    "flag2_misuse",
    "operating_while_barred",
    "outside_municipality",
)
"""Kinds judged per vehicle, on the workers."""

CROSS_KINDS = tuple(k for k in KINDS if k not in VEHICLE_KINDS)
"""Kinds judged on the gathered frames (across vehicles or days)."""

DEFAULT_PARTITION_FIXES = 1_000_000
_POSITIONS = ("first_ping", "last_ping", "boarding_ping")


class DistributedEngineError(RuntimeError):
    """The cluster could not be reached or a partition failed."""


def _noop(_: str) -> None:
    return None


@contextmanager
def dask_client(
    scheduler: str | None = None,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    processes: bool = True,
    connect_timeout_s: float = 10.0,
) -> Iterator[Any]:
    """Yield a ``distributed.Client``: to ``scheduler``, else to a new ``LocalCluster``.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``).
    workers : int, default 2
        Workers of the local cluster (ignored with ``scheduler``).
    threads_per_worker : int, default 1
        Threads of each local worker.
    processes : bool, default True
        Local workers as processes (False: threads of this process).
    connect_timeout_s : float, default 10
        How long to try reaching ``scheduler``.

    Raises
    ------
    DistributedEngineError
        If ``scheduler`` cannot be reached.
    """
    from distributed import Client, LocalCluster

    if workers < 1:
        msg = f"'workers' era {workers}; esperado um inteiro >= 1"
        raise ValueError(msg)
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=f"{connect_timeout_s}s")
        except OSError as exc:
            msg = f"não foi possível conectar ao escalonador Dask {scheduler!r}: {exc}"
            raise DistributedEngineError(msg) from None
        try:
            yield client
        finally:
            client.close()
        return
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=processes,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def vehicle_partitions(
    vehicle_ids: pd.Series, *, partition_fixes: int, min_partitions: int = 1
) -> list[tuple[int, int]]:
    """Cut pings sorted by vehicle into ``[start, stop)`` row ranges of whole vehicles.

    Parameters
    ----------
    vehicle_ids : pandas.Series
        ``vehicle_id`` of the pings, each vehicle's rows contiguous.
    partition_fixes : int
        Target fixes per partition (a vehicle with more makes a partition alone).
    min_partitions : int, default 1
        Cut finer when needed to give at least this many (vehicles permitting).

    Returns
    -------
    list of tuple of int
        Row ranges covering every row once, in row order.
    """
    n = len(vehicle_ids)
    if n == 0:
        return []
    values = vehicle_ids.astype("str").to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    bounds = np.r_[starts, n]
    target = max(1, min(partition_fixes, math.ceil(n / max(1, min_partitions))))
    out: list[tuple[int, int]] = []
    begin = 0
    for stop in bounds[1:].tolist():
        if stop - begin >= target:
            out.append((begin, stop))
            begin = stop
    if begin < n:
        out.append((begin, n))
    return out


def _evidence_mask(
    part: pd.DataFrame, visits: pd.DataFrame, stops: pd.DataFrame, trips: pd.DataFrame
) -> npt.NDArray[np.bool_]:
    """Mark the fixes inside visits, stops and meter trips, and one neighbour on each side."""
    n = len(part)
    if n == 0:
        return np.zeros(0, dtype=bool)
    delta = np.zeros(n + 1, dtype=np.int64)
    if len(visits):
        first = visits["first_ping"].to_numpy(dtype=np.int64)
        last = visits["last_ping"].to_numpy(dtype=np.int64)
        board = pd.to_numeric(visits["boarding_ping"]).fillna(-1).to_numpy(dtype=np.int64)
        np.add.at(delta, first, 1)
        np.add.at(delta, np.maximum(last, board) + 1, -1)
    ts = pd.DatetimeIndex(part[fr.TIMESTAMP]).as_unit("ns").asi8
    vehicles = part[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, vehicles[1:] != vehicles[:-1]])
    block = pd.Series(starts, index=pd.Index(vehicles[starts]))
    ends = np.r_[starts[1:], n]
    block_end = pd.Series(ends, index=pd.Index(vehicles[starts]))
    spans = [stops]
    if len(trips):
        meter = trips["source"].astype("str") == "meter" if "source" in trips.columns else None
        spans.append(trips if meter is None else trips.loc[meter.to_numpy()])
    for frame in spans:
        if not len(frame):
            continue
        vid = frame[fr.VEHICLE_ID].astype("str")
        a = block.reindex(vid).to_numpy(dtype=np.int64)
        b = block_end.reindex(vid).to_numpy(dtype=np.int64)
        t0 = pd.DatetimeIndex(frame["started_at"]).as_unit("ns").asi8
        t1 = pd.DatetimeIndex(frame["ended_at"]).as_unit("ns").asi8
        lo = np.array([a[k] + np.searchsorted(ts[a[k] : b[k]], t0[k]) for k in range(len(a))])
        hi = np.array(
            [a[k] + np.searchsorted(ts[a[k] : b[k]], t1[k], side="right") for k in range(len(a))]
        )
        np.add.at(delta, lo.astype(np.int64), 1)
        np.add.at(delta, hi.astype(np.int64), -1)
    mask = np.cumsum(delta[:n]) > 0
    grown = mask.copy()
    same_prev = np.r_[False, vehicles[1:] == vehicles[:-1]]
    grown[:-1] |= mask[1:] & same_prev[1:]
    grown[1:] |= mask[:-1] & same_prev[1:]
    return grown


def _vehicle_stage(part: pd.DataFrame, context: dict[str, Any]) -> dict[str, Any]:
    """Run the local pipeline's functions on a partition of whole vehicles (on a worker)."""
    params: AnalysisParams = context["params"]
    stands: gpd.GeoDataFrame = context["stands"]
    part = part.reset_index(drop=True)
    cover = build_stand_cover(stands, resolution=params.h3_resolution)
    ping_idx, stand_idx = match_stands(part[fr.LAT].to_numpy(), part[fr.LON].to_numpy(), cover)
    memberships = pd.DataFrame(
        {"ping_index": ping_idx, "stand_id": stands["stand_id"].to_numpy()[stand_idx]}
    )
    visits = detect_visits_(
        part,
        memberships,
        licences=context["licences"],
        exit_grace_s=params.visit_exit_grace_s,
        min_dwell_s=params.visit_min_dwell_s,
        boarding_grace_s=params.boarding_grace_s,
        max_gap_s=params.trip_max_gap_s,
        timezone=params.timezone,
    )
    stops = detect_stops(
        part, max_diameter_m=params.stop_max_diameter_m, min_duration_s=params.stop_min_duration_s
    )
    trips = detect_trips(
        part, stops=stops, max_gap_s=params.trip_max_gap_s, max_speed_kmh=params.max_speed_kmh
    )
    trips["pickup_stand_id"] = pickup_stands(trips, visits, stands)
    kinds = tuple(k for k in context["kinds"] if k in VEHICLE_KINDS)
    findings, skipped = run_detectors(
        DetectorInputs(
            pings=part,
            visits=visits,
            trips=trips,
            stops=stops,
            stands=stands,
            fleet=context["fleet"],
            licences=context["licences"],
            boundary=context["boundary"],
            roads=context["roads"],
            as_of=context["as_of"],
            timezone=params.timezone,
        ),
        thresholds=context["thresholds"],
        kinds=kinds,
    )
    mask = _evidence_mask(part, visits, stops, trips)
    return {
        "visits": visits,
        "trips": trips,
        "stops": stops,
        "findings": findings,
        "skipped": skipped,
        "evidence": part.loc[mask].reset_index(drop=True),
        "evidence_pos": np.cumsum(mask) - 1,
        "n_matched": count_distinct(ping_idx, len(part)),
    }


def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    kept = [f for f in frames if len(f)]
    if not kept:
        return frames[0]
    return pd.concat(kept, ignore_index=True)


def _shift_positions(
    frame: pd.DataFrame,
    offsets: npt.NDArray[np.int64],
    maps: Sequence[npt.NDArray[np.int64]] = (),
    *,
    columns: tuple[str, ...] = _POSITIONS,
) -> pd.DataFrame:
    """Move each partition's (``_part``) positions by ``offsets``, through ``maps`` if given."""
    visits = frame
    out = visits.drop(columns="_part")
    part = visits["_part"].to_numpy(dtype=np.int64)
    for col in columns:
        values = pd.array(visits[col], dtype="Int64")
        missing = np.asarray(values.isna(), dtype=bool)
        raw = values.fillna(0).to_numpy(dtype=np.int64)
        moved = raw.copy()
        for k in np.unique(part).tolist():
            sel = part == k
            local = raw[sel] if not len(maps) else maps[k][raw[sel]]
            moved[sel] = offsets[k] + local
        shifted = pd.Series(pd.arrays.IntegerArray(moved, missing), index=out.index)
        out[col] = shifted.astype(visits[col].dtype)
    return out


def requeue(visits: pd.DataFrame) -> pd.DataFrame:
    """Recompute ``queue_position`` over every vehicle of each stand (the kernel of detect_visits).

    Parameters
    ----------
    visits : pandas.DataFrame
        Visits of all vehicles (``stands.visits`` frame).

    Returns
    -------
    pandas.DataFrame
        A copy with the fleet-wide queue positions.
    """
    out = visits.copy()
    if not len(out):
        return out
    stand = pd.factorize(out["stand_id"].astype("str"))[0].astype(np.int64)
    vehicle = pd.factorize(out["vehicle_id"].astype("str"), sort=True)[0].astype(np.int64)
    arrived = pd.DatetimeIndex(out["arrived_at"]).as_unit("ns").asi8
    departed = pd.DatetimeIndex(out["departed_at"]).as_unit("ns").asi8
    queue = _queue_positions(stand, vehicle, arrived, departed)
    out["queue_position"] = pd.Series(queue, index=out.index).astype(out["queue_position"].dtype)
    return out


def _last_local_day(pings: pd.DataFrame, timezone: str) -> dt.date | None:
    if pings.empty:
        return None
    last: pd.Timestamp = pings[fr.TIMESTAMP].max().tz_convert(timezone)
    return last.date()


def _contiguous(pings: pd.DataFrame) -> pd.DataFrame:
    """Pings with each vehicle's rows together (the contract's order; sorted here otherwise)."""
    vid = pings[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object)
    starts = np.r_[True, vid[1:] != vid[:-1]] if len(vid) else np.array([], dtype=bool)
    if int(starts.sum()) == pd.unique(vid).size:
        return pings
    return pings.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable", ignore_index=True)


def analyze_pings_distributed(
    pings: pd.DataFrame,
    rejected: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    client: Any,
    fleet: pd.DataFrame | None = None,
    boundary: Any = None,
    roads: RoadGraph | None = None,
    as_of: dt.date | None = None,
    thresholds: Thresholds | None = None,
    kinds: tuple[str, ...] = KINDS,
    params: AnalysisParams | None = None,
    partition_fixes: int = DEFAULT_PARTITION_FIXES,
    progress: Progress = _noop,
) -> AnalysisResult:
    """Run :func:`tracking.pipeline.analyze_pings` on a Dask cluster (see the module docstring).

    Parameters
    ----------
    pings, rejected, stands, fleet, boundary, roads, as_of, thresholds, kinds, params, progress
        As in :func:`tracking.pipeline.analyze_pings`.
    client : distributed.Client
        Client of the cluster (:func:`dask_client`).
    partition_fixes : int, default 1,000,000
        Target fixes per partition; at least two partitions per worker are made when the fleet
        allows.

    Returns
    -------
    AnalysisResult
        Equal to the local engine's.

    Raises
    ------
    DistributedEngineError
        If a partition fails on the cluster (the worker's error is chained).
    """
    params = params or AnalysisParams()
    pings = _contiguous(pings)
    tz = params.timezone
    as_of = as_of or _last_local_day(pings, tz)
    licences = licence_frame_from_fleet(fleet) if fleet is not None else None
    n_workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    ranges = vehicle_partitions(
        pings[fr.VEHICLE_ID], partition_fixes=partition_fixes, min_partitions=2 * n_workers
    )
    if not ranges:
        ranges = [(0, 0)]
    progress(f"Distribuindo {len(ranges)} partições por veículo em {n_workers} worker(s)")
    context = {
        "params": params,
        "stands": stands,
        "fleet": fleet,
        "licences": licences,
        "boundary": boundary,
        "roads": roads,
        "as_of": as_of,
        "thresholds": thresholds,
        "kinds": kinds,
    }
    [ctx] = client.scatter([context], broadcast=True)
    parts = client.scatter([pings.iloc[a:b] for a, b in ranges])
    futures = client.map(_vehicle_stage, parts, context=ctx, pure=False)
    try:
        results: list[dict[str, Any]] = client.gather(futures)
    except Exception as exc:
        msg = f"uma partição falhou no cluster Dask: {exc!r}"
        raise DistributedEngineError(msg) from exc

    progress("Juntando visitas, viagens e paradas; fila dos pontos")
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    tagged = [r["visits"].assign(_part=k) for k, r in enumerate(results)]
    all_visits = _concat(tagged)
    visits = requeue(_shift_positions(all_visits, starts))
    ends = ("first_ping", "last_ping")
    trips = _shift_positions(
        _concat([r["trips"].assign(_part=k) for k, r in enumerate(results)]), starts, columns=ends
    )
    stops = _shift_positions(
        _concat([r["stops"].assign(_part=k) for k, r in enumerate(results)]), starts, columns=ends
    )
    evidence = _concat([r["evidence"] for r in results])
    sizes = np.array([len(r["evidence"]) for r in results], dtype=np.int64)
    ev_offsets = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    ev_visits = requeue(
        _shift_positions(all_visits, ev_offsets, [r["evidence_pos"] for r in results])
    )

    progress("Calculando ocupação dos pontos")
    occ = occupancy(visits, stands, bucket=params.occupancy_bucket, include_idle=False)

    progress("Rodando os detectores entre veículos e dias")
    cross, skipped_cross = run_detectors(
        DetectorInputs(
            pings=evidence,
            visits=ev_visits,
            trips=trips.drop(columns=list(ends)),
            stops=stops.drop(columns=list(ends)),
            stands=stands,
            fleet=fleet,
            licences=licences,
            boundary=boundary,
            roads=roads,
            as_of=as_of,
            timezone=tz,
        ),
        thresholds=thresholds,
        kinds=tuple(k for k in kinds if k in CROSS_KINDS),
    )
    found = [f for f in [*(r["findings"] for r in results), cross] if len(f)]
    if found:
        findings = gpd.GeoDataFrame(
            pd.concat(found, ignore_index=True), geometry="geometry", crs=4326
        )
        findings = findings.sort_values(["kind", "started_at", "finding_id"]).reset_index(drop=True)
    else:
        findings = empty_findings()
    skipped_all = results[0]["skipped"] | skipped_cross
    skipped = {k: skipped_all[k] for k in kinds if k in skipped_all}

    result = AnalysisResult(
        pings=pings,
        rejected=rejected,
        stands=stands,
        visits=visits,
        trips=trips,
        stops=stops,
        occupancy=occ,
        findings=findings,
        skipped_detectors=skipped,
    )
    n_matched = sum(r["n_matched"] for r in results)
    result.summary = summarize(result, params=params, n_matched=n_matched)
    return result
