"""Batch analysis on a ``dask.distributed`` cluster: the same functions, partitioned by vehicle.

:func:`analyze_pings_distributed` gives the result of :func:`engines.pipeline.analyze_pings`
(same findings — ids and content —, visits, trips, stops and occupancy) with the two stages of
:mod:`engines.partitions`: :func:`~engines.partitions.vehicle_stage` on the workers, one
partition of whole vehicles each, then :func:`~engines.partitions.gather` on the client.
Partitions group consecutive vehicles to about ``partition_fixes`` fixes each.

The input is read and validated on the client (:func:`tracking.ingest.read_pings`, whose row
numbers and duplicate rule are file-wide), then the partitions are scattered to the workers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from engines.partitions import gather, stage_context, vehicle_partitions, vehicle_stage
from engines.pipeline import AnalysisParams, AnalysisResult, Progress, no_progress
from geo.roads import RoadGraph
from tracking import frames as fr
from tracking.detectors.detect import Thresholds, last_local_day
from tracking.detectors.findings import KINDS

DEFAULT_PARTITION_FIXES = 1_000_000


class DistributedEngineError(RuntimeError):
    """The cluster could not be reached or a partition failed."""


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
    progress: Progress = no_progress,
    drivers: pd.DataFrame | None = None,
    driver_links: pd.DataFrame | None = None,
    stand_suspensions: pd.DataFrame | None = None,
) -> AnalysisResult:
    """Run :func:`engines.pipeline.analyze_pings` on a Dask cluster (see the module docstring).

    Parameters
    ----------
    pings, rejected, stands, fleet, boundary, roads, as_of, thresholds, kinds, params, progress
        As in :func:`engines.pipeline.analyze_pings`.
    drivers, driver_links, stand_suspensions
        As in :func:`engines.pipeline.analyze_pings`.
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
    as_of = as_of or last_local_day(pings, tz)
    n_workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    ranges = vehicle_partitions(
        pings[fr.VEHICLE_ID], partition_fixes=partition_fixes, min_partitions=2 * n_workers
    )
    if not ranges:
        ranges = [(0, 0)]
    progress(f"Distribuindo {len(ranges)} partições por veículo em {n_workers} worker(s)")
    context = stage_context(
        stands,
        fleet=fleet,
        boundary=boundary,
        roads=roads,
        as_of=as_of,
        thresholds=thresholds,
        kinds=kinds,
        params=params,
        drivers=drivers,
        driver_links=driver_links,
        stand_suspensions=stand_suspensions,
    )
    [ctx] = client.scatter([context], broadcast=True)
    parts = client.scatter([pings.iloc[a:b] for a, b in ranges])
    futures = client.map(vehicle_stage, parts, context=ctx, pure=False)
    try:
        results: list[dict[str, Any]] = client.gather(futures)
    except Exception as exc:
        msg = f"uma partição falhou no cluster Dask: {exc!r}"
        raise DistributedEngineError(msg) from exc

    return gather(results, rejected, context, pings=pings, progress=progress)
