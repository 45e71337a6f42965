"""Batch analysis on a ``dask.distributed`` cluster: the same functions, partitioned by vehicle.

:func:`analyze_pings_distributed` gives the result of :func:`engines.pipeline.analyze_pings`
(same findings — ids and content —, visits, trips, stops and occupancy) with the stages of
:mod:`engines.partitions`: :func:`~engines.partitions.vehicle_stage` on the workers, one
partition of whole vehicles each (about ``partition_fixes`` fixes), then the gathered stage on
the workers too (:func:`gather_on_workers`), partitioned by each rule's natural key:

=====================================  =============================================
key                                    what runs there
=====================================  =============================================
stand group (linked stands together)   queue positions, occupancy, ``queue_jump``,
                                       ``unlicensed_stand_use``
pickup/drop-off cell-pair group        ``longer_route`` (peers: same cells)
partition (whole vehicles)             ``habitual_absence``, ``inactivity`` (with the
                                       run's activity span: two instants)
the run's waiting stops (one task)     ``illegal_stand_formation``
=====================================  =============================================

The partitions' results stay on their workers; each is cut into one piece per group there,
the pieces of the partitions a worker holds are regrouped there (one object per worker and
group: the scheduler tracks workers x groups pieces, not partitions x groups), and they move
worker to worker (Dask's transfers, not through the client) to one task per group, which runs
the function :func:`~engines.partitions.gather` runs on the whole. The groups are planned on
the workers (:func:`~engines.partitions.plan_facts` of each partition summed in a tree,
:func:`~engines.partitions.plan_groups`): the client receives a few numbers per partition and
the number of groups, and the findings, the visits, trips, stops and occupancy; with
``parts``, the workers write the findings, visits, trips and occupancy as parts and make the
proposals by vehicle group (:class:`ProposalSpec`), the client receives their counts, and with
``out`` the workers merge the parts into the output files.

Illegal stand formation is not cut by place cell: a place is a single-linkage group of H3 cells
of unbounded extent and its distances are measured in the UTM zone of the mean of every waiting
stop, so no halo makes a cell partition exact; its table is small (a few stops per vehicle and
day, without fixes), and one task clusters it.

The input is read and validated on the client (:func:`tracking.ingest.read_pings`, whose row
numbers and duplicate rule are file-wide), then the partitions are scattered to the workers.
"""

from __future__ import annotations

import datetime as dt
import logging
import operator
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from distributed import WorkerPlugin

from enforcement.proposals import (
    PROPOSAL_ORDER,
    accused_vehicles,
    proposal_counts,
    proposal_details,
    proposal_texts,
    propose_all,
    summary_of_counts,
    summed_counts,
    write_proposal_texts,
)
from engines import partitions as pt
from engines.partitions import stage_context, vehicle_partitions, vehicle_stage
from engines.pipeline import (
    PART_FAN_IN,
    REVIEW_ORDER,
    AnalysisParams,
    AnalysisResult,
    Progress,
    cut_at_as_of,
    merge_part_file,
    merge_parts,
    merge_ping_stats,
    merged_texts,
    no_progress,
    summary_item_text,
    write_csv_part,
    write_findings_part,
    write_part,
)
from geo.roads import RoadGraph
from maps import sample as map_sample
from maps.sample import MapSample, merge_samples, part_sample
from runtime import keep_freed_heap
from tracking import frames as fr
from tracking.detectors.detect import Thresholds, last_local_day
from tracking.detectors.findings import KINDS, with_details
from tracking.detectors.inactivity import ActivitySpan, merge_activity_spans
from tracking.stops import empty_stops
from tracking.trips import empty_trips

DEFAULT_PARTITION_FIXES = 1_000_000

DASK_CONFIG = {"distributed.admin.low-level-log-length": 0}
"""Dask settings of the clusters :func:`dask_client` makes (and of its client).

Dask keeps, for developers, the last messages of each stream (up to 1,000 batches of under a
MB each, the tasks' specifications and results' reports among them), the scheduler's last
transitions and events. In the client's process (its stream, and the local scheduler's streams
to the workers) that grew with the tasks: 20 MB over a run of 10 M fixes, 50 MB over 30 M.
None is kept; a task's error still reaches the client."""


class DistributedEngineError(RuntimeError):
    """The cluster could not be reached or a partition failed."""

    @classmethod
    def partition_failed(cls, exc: BaseException) -> DistributedEngineError:
        """Return the error of a partition's task that failed on the cluster, naming its cause."""
        return cls(f"uma partição falhou no cluster Dask: {exc!r}")


class TaskErrorFilter(logging.Filter):
    """Drop what a worker logs of a task's error, and of the tasks cut short as it closes.

    A worker logs "Compute Failed" (``distributed.worker``, ERROR, with the traceback) for each
    task that raises; the error also reaches the client, which reports it (``pontual analyze``:
    one pt-BR line) and closes the cluster, whose workers then log each running task they
    cancel ("Async instruction for … ended with CancelledError", ``distributed.worker.
    state_machine``, WARNING: only at closing). Every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Return False for those two records, True for any other."""
        text = record.msg if isinstance(record.msg, str) else ""
        if record.name == "distributed.worker" and record.levelno == logging.ERROR:
            return not text.startswith("Compute Failed")
        if record.name == "distributed.worker.state_machine" and record.levelno == logging.WARNING:
            return not (
                text.startswith("Async instruction for")
                and text.endswith("ended with CancelledError")
            )
        return True


_QUIET_LOGGERS = ("distributed.worker", "distributed.worker.state_machine")


class QuietTaskErrors(WorkerPlugin):
    """A :class:`TaskErrorFilter` on the worker's loggers of those records, while it runs.

    Registered on the clusters :func:`dask_client` makes (workers joining later get it too);
    removed when the worker closes. Thread workers share the client process's loggers: while
    they run, other workers in that process do not log a task's error either.
    """

    name = "pontual-quiet-task-errors"
    idempotent = True

    def __init__(self) -> None:
        self._filter = TaskErrorFilter()

    def setup(self, worker: Any) -> None:
        """Add the filter to this process's loggers of those records."""
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).addFilter(self._filter)

    def teardown(self, worker: Any) -> None:
        """Remove it."""
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).removeFilter(self._filter)


class KeepFreedHeap(WorkerPlugin):
    """:func:`runtime.keep_freed_heap` in each worker process of a local cluster.

    Workers joining later get it too (e.g. one its nanny restarts). Dask starts its worker
    processes with ``MALLOC_TRIM_THRESHOLD_=65536``: every array of the stages is then mapped,
    faulted in and unmapped again (the stages took 2-3x longer).
    """

    name = "pontual-keep-freed-heap"
    idempotent = True

    def setup(self, worker: Any) -> None:
        """Set the process's allocator thresholds back (glibc; a no-op elsewhere)."""
        keep_freed_heap()


@dataclass(frozen=True, kw_only=True)
class ProposalSpec:
    """What the workers need to make a run's proposals (:func:`~enforcement.proposals.propose_all`).

    Sent to every worker once (the fleet and the reincidence history are small tables).
    """

    rulebooks: Mapping[str, Any]
    timezone: str
    confirmed: pd.DataFrame | None = None
    fleet: pd.DataFrame | None = None
    confidence_floor: Mapping[str, float] | None = None


def vehicle_group(vehicle_id: str, n_groups: int) -> int:
    """Return the proposal group of a vehicle: CRC-32 of its id modulo ``n_groups`` (stable)."""
    return zlib.crc32(vehicle_id.encode("utf-8")) % n_groups


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

    The local cluster's workers do not log a task's error (:class:`QuietTaskErrors`): it reaches
    the client. A scheduler's workers are left as they are.

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
    if workers < 1:
        msg = f"'workers' era {workers}; esperado um inteiro >= 1"
        raise ValueError(msg)
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(DASK_CONFIG):  # read as each stream, scheduler and worker starts
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
                # the scheduler's HTTP server starts anyway: a free port, not 8787 (another
                # cluster on the machine would make it warn)
                dashboard_address=":0",
            ) as cluster,
            Client(cluster) as client,
        ):
            # a task's error reaches the client, which reports it: no worker traceback before
            client.register_plugin(QuietTaskErrors())
            if processes:
                client.register_plugin(KeepFreedHeap())
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
    allowed_places: gpd.GeoDataFrame | None = None,
    groups: int | None = None,
) -> AnalysisResult:
    """Run :func:`engines.pipeline.analyze_pings` on a Dask cluster (see the module docstring).

    Parameters
    ----------
    pings, rejected, stands, fleet, boundary, roads, as_of, thresholds, kinds, params, progress
        As in :func:`engines.pipeline.analyze_pings`.
    drivers, driver_links, stand_suspensions, allowed_places
        As in :func:`engines.pipeline.analyze_pings`.
    client : distributed.Client
        Client of the cluster (:func:`dask_client`).
    partition_fixes : int, default 1,000,000
        Target fixes per partition; at least two partitions per worker are made when the fleet
        allows.
    groups : int, optional
        Groups of each key of the gathered stage (:func:`gather_on_workers`).

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
    tz = params.timezone
    n_after_as_of = 0
    if as_of is not None:
        n_given = len(pings)
        pings = cut_at_as_of(pings, as_of=as_of, timezone=tz)
        n_after_as_of = n_given - len(pings)
    pings = _contiguous(pings)
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
        allowed_places=allowed_places,
    )
    [ctx] = client.scatter([context], broadcast=True)
    parts = client.scatter([pings.iloc[a:b] for a, b in ranges])
    futures = client.map(vehicle_stage, parts, context=ctx, pure=False)
    if n_after_as_of:  # counted once, by the first partition
        futures[0] = client.submit(_after_as_of, futures[0], n_after_as_of, pure=False)
    return gather_on_workers(
        client, futures, rejected, context, pings=pings, groups=groups, progress=progress
    )


def _after_as_of(result: dict[str, Any], n: int) -> dict[str, Any]:
    """Return a partition's result (:func:`~engines.partitions.vehicle_stage`) counting ``n``.

    ``n``: the run's fixes cut at ``--as-of`` (``summary.json``'s ``pings_after_as_of``).
    """
    return result | {"stats": result["stats"] | {"pings_after_as_of": n}}


def gather_on_workers(
    client: Any,
    futures: Sequence[Any],
    rejected: pd.DataFrame,
    context: dict[str, Any],
    *,
    pings: pd.DataFrame | None = None,
    groups: int | None = None,
    parts: str | Path | None = None,
    out: str | Path | None = None,
    keep: frozenset[str] | None = None,
    propose: ProposalSpec | None = None,
    send_findings: bool = True,
    progress: Progress = no_progress,
) -> AnalysisResult:
    """Run :func:`engines.partitions.gather`'s stage on the workers, by each rule's key.

    The partitions' results stay on the workers that made them. Each is cut by stand group
    (:func:`~engines.partitions.split_by_stand`: visits and the evidence fixes they point to)
    and by pickup/drop-off cell-pair group (:func:`~engines.partitions.split_by_route`), and
    the pieces move worker to worker to one task per group
    (:func:`~engines.partitions.stand_group`, :func:`~engines.partitions.route_group`). The
    vehicle kinds run on each partition (:func:`~engines.partitions.vehicle_group`, with the
    run's activity span), the place kinds in one task on the partitions' waiting stops. The
    client receives the findings, the visits, trips, stops and occupancy, and small facts.

    Parameters
    ----------
    client : distributed.Client
        Client of the cluster.
    futures : sequence of distributed.Future
        One per partition: :func:`~engines.partitions.vehicle_stage`'s result, in pings order.
    rejected, context
        As in :func:`~engines.partitions.gather`.
    pings : pandas.DataFrame, optional
        Every valid fix, when the client holds them (kept in the result; else an empty frame).
    groups : int, optional
        Groups of each key (default: two per worker); many small groups exercise the grouping.
    parts : str or pathlib.Path, optional
        A folder the workers see, where they write the output files as parts (the result's
        ``parts``): each task its findings, evidence included, in ``achados/``
        (:func:`~engines.pipeline.write_findings_part`), each stand group its visits in
        ``visitas/`` and each partition its trips in ``viagens/``
        (:func:`~engines.pipeline.write_csv_part`; the client receives their counts), and
        each stand group its occupancy in ``ocupacao/``. A file's parts are merged on the
        workers :data:`~engines.pipeline.PART_FAN_IN` at a time until that many are left.
    out : str or pathlib.Path, optional
        With ``parts``: a folder the workers see, where one task per file merges its parts
        into ``findings.geojson``, ``stand_visits.csv``, ``trips.csv``, ``occupancy.csv`` and
        (with ``propose``) ``proposals.json``, the files written concurrently (the result's
        ``written``; its ``parts`` keep the review list of ``summary.json``, which the client
        writes).
    keep : frozenset of str, optional
        With ``parts``: the ``details`` keys of the findings the client receives (what the
        proposals and the map read; all without it).
    propose : ProposalSpec, optional
        With ``parts``: make the run's proposals on the workers. Each task that writes
        findings also cuts them (the details the rulebooks read) by vehicle group
        (:func:`vehicle_group`; an ``illegal_stand_formation`` finding goes to the group of
        each of its ``details.vehicles``); the pieces move to one task per group, which runs
        :func:`~enforcement.proposals.propose_all` for the group's vehicles and writes its
        proposals in ``propostas/`` and its findings for review in ``revisao/``. The client
        receives their counts: the result's ``summary`` has the proposal entries, and its
        ``parts`` ``proposals.json`` and ``summary.json`` (the review list).
    send_findings : bool, default True
        With ``parts``: False leaves the result's findings empty (the summary counts them
        from the tasks): the client then receives no finding.
    progress : callable
        Called with a pt-BR stage label before each stage.

    Returns
    -------
    AnalysisResult
        Equal to :func:`~engines.partitions.gather`'s.

    Raises
    ------
    DistributedEngineError
        If a task fails on the cluster (the worker's error is chained).
    ValueError
        ``propose`` or ``send_findings=False`` without ``parts``.
    """
    if parts is None and (propose is not None or not send_findings or out is not None):
        msg = "'propose', 'out' e 'send_findings=False' pedem 'parts' (a pasta das partes)"
        raise ValueError(msg)
    try:
        return _gather_on_workers(
            client,
            futures,
            rejected,
            context,
            pings=pings,
            groups=groups,
            parts=Path(parts) if parts is not None else None,
            out=Path(out) if out is not None else None,
            keep=keep,
            propose=propose,
            send_findings=send_findings,
            progress=progress,
        )
    except Exception as exc:
        raise DistributedEngineError.partition_failed(exc) from exc


def _gather_on_workers(
    client: Any,
    futures: Sequence[Any],
    rejected: pd.DataFrame,
    context: dict[str, Any],
    *,
    pings: pd.DataFrame | None,
    groups: int | None,
    parts: Path | None,
    out: Path | None,
    keep: frozenset[str] | None,
    propose: ProposalSpec | None,
    send_findings: bool,
    progress: Progress,
) -> AnalysisResult:
    params: AnalysisParams = context["params"]
    written: dict[str, list[Path]] = {
        "findings.geojson": [],
        "stand_visits.csv": [],
        "occupancy.csv": [],
    }
    map_cap, map_samples = map_sample.MAP_MAX_FINDINGS, []  # read now: tests lower it
    held: list[Any] = []  # the findings tasks' results, holding what the proposals read
    detail_keys = proposal_details(propose.rulebooks) if propose is not None else None

    def findings_part(future: Any, name: str, *, visits: bool = False) -> Any:
        """Return the task's result with its findings (and visits) written as parts there."""
        map_samples.append(client.submit(_map_sample, future, cap=map_cap, pure=False))
        if parts is None:
            return future
        written["findings.geojson"].append(parts / "achados" / f"{name}.parquet")
        path = str(written["findings.geojson"][-1])
        visits_path = None
        if visits:
            written["stand_visits.csv"].append(parts / "visitas" / f"{name}.parquet")
            written["occupancy.csv"].append(parts / "ocupacao" / f"{name}.parquet")
            visits_path = str(written["stand_visits.csv"][-1])
        done = client.submit(
            _with_parts,
            future,
            path,
            keep if send_findings else frozenset(),
            visits_path,
            str(written["occupancy.csv"][-1]) if visits else None,
            send=send_findings,
            hold=detail_keys,
            pure=False,
        )
        if detail_keys is None:
            return done
        held.append(done)
        return client.submit(operator.getitem, done, 0, pure=False)

    kinds = set(context["kinds"])
    resolution = pt.route_resolution(context)
    n_workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    n_groups = max(1, groups if groups is not None else 2 * n_workers)
    # the plan of the groups is made and kept on the workers: the client receives its sizes
    plan = _plan_on_workers(client, futures, resolution=resolution, n_groups=n_groups)
    facts: list[dict[str, Any]] = client.gather(
        [
            findings_part(f, f"particao-{k:05d}")
            for k, f in enumerate(
                client.map(
                    pt.part_facts,
                    futures,
                    as_of=context["as_of"],
                    timezone=params.timezone,
                )
            )
        ]
    )
    stats = merge_ping_stats([f["stats"] for f in facts])
    as_of = pt.run_as_of(context, stats)
    context = pt.with_run_ids(context, stats)
    spans = [f["activity_span"] for f in facts]
    if as_of is not None and context["as_of"] is None:  # the spans need the run's last day
        spans = client.gather(
            client.map(pt.part_activity_span, futures, as_of=as_of, timezone=params.timezone)
        )
    sizes = np.array([f["n_pings"] for f in facts], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64).tolist()
    [ctx] = client.scatter([context], broadcast=True)
    n_stand_groups, n_route_groups = client.gather(client.submit(pt.plan_sizes, plan, pure=False))

    progress("Juntando visitas por ponto nos workers; fila dos pontos")
    stand_of = client.submit(operator.getitem, plan, "stand_of", pure=False)
    splits = [
        client.submit(
            pt.split_by_stand,
            fut,
            piece=k,
            offset=offsets[k],
            stand_group=stand_of,
            n_groups=n_stand_groups,
            pure=False,
        )
        for k, fut in enumerate(futures)
    ]
    route_splits = []
    if resolution is not None:
        pair_group = client.submit(operator.getitem, plan, "pair_group", pure=False)
        route_splits = [
            client.submit(
                pt.split_by_route,
                fut,
                resolution=resolution,
                pair_group=pair_group,
                n_groups=n_route_groups,
                pure=False,
            )
            for fut in futures
        ]
    licence_known = any(f["licence_known"] for f in facts)
    stand_pieces = _pieces_by_group(client, splits, n_groups=n_stand_groups)
    stand_tasks = [
        findings_part(
            client.submit(
                _on_pieces,
                pt.stand_group,
                stand_pieces[g],
                ctx,
                as_of=as_of,
                licence_known=licence_known,
            ),
            f"pontos-{g:05d}",
            visits=True,
        )
        for g in range(n_stand_groups)
    ]

    progress("Rodando os detectores entre veículos e dias nos workers")
    cross = []
    if resolution is not None:
        route_pieces = _pieces_by_group(client, route_splits, n_groups=n_route_groups)
        cross += [
            findings_part(
                client.submit(_on_pieces, pt.route_group, route_pieces[g], ctx, as_of=as_of),
                f"rotas-{g:05d}",
            )
            for g in range(n_route_groups)
        ]
    if pt.PLACE_KINDS[0] in kinds:
        waiting = [client.submit(operator.getitem, fut, "waiting") for fut in futures]
        cross.append(
            findings_part(client.submit(pt.place_group, waiting, ctx, as_of=as_of), "locais")
        )
    if kinds & set(pt.VEHICLE_GROUP_KINDS):
        span = merge_activity_spans(spans)
        seen = client.submit(operator.getitem, plan, "vehicles", pure=False)
        cross += [
            findings_part(
                client.submit(
                    _vehicle_group,
                    fut,
                    ctx,
                    seen=seen if k == 0 else None,
                    as_of=as_of,
                    activity_span=span,
                    pure=False,
                ),
                f"veiculos-{k:05d}",
            )
            for k, fut in enumerate(futures)
        ]
    if parts is None:
        outputs = [
            client.submit(pt.part_outputs, fut, offset=offsets[k]) for k, fut in enumerate(futures)
        ]
    else:
        written["trips.csv"] = [
            parts / "viagens" / f"particao-{k:05d}.parquet" for k in range(len(futures))
        ]
        outputs = [
            client.submit(_trips_part, fut, str(path), pure=False)
            for fut, path in zip(futures, written["trips.csv"], strict=True)
        ]

    proposal_tasks: list[Any] = []
    if propose is not None and parts is not None:
        progress("Fazendo as propostas de autuação por veículo nos workers")
        n_vehicles = sum(f["n_vehicles"] for f in facts)
        n_pieces = max(1, min(n_groups, n_vehicles))
        [spec_f] = client.scatter([propose], broadcast=True, hash=False)
        splits = [
            client.submit(_vehicle_pieces, done, n_groups=n_pieces, pure=False) for done in held
        ]
        for name, folder in (("proposals.json", "propostas"), ("summary.json", "revisao")):
            written[name] = [parts / folder / f"grupo-{g:05d}.parquet" for g in range(n_pieces)]
        vehicle_pieces = _pieces_by_group(client, splits, n_groups=n_pieces)
        proposal_tasks = [
            client.submit(
                _on_pieces,
                _propose_group,
                vehicle_pieces[g],
                spec_f,
                group=g,
                n_groups=n_pieces,
                proposals_path=str(written["proposals.json"][g]),
                review_path=str(written["summary.json"][g]),
                pure=False,
            )
            for g in range(n_pieces)
        ]

    progress("Recebendo achados, visitas, viagens e paradas")
    stand_results: list[dict[str, Any]] = client.gather(stand_tasks)
    cross_results: list[tuple[Any, ...]] = client.gather(cross)
    frames: list[dict[str, Any]] = client.gather(outputs)
    proposed: list[dict[str, dict[str, int]]] = client.gather(proposal_tasks)
    progress("Juntando os resultados dos grupos")
    visits, occ = pt.join_stand_groups(stand_results)
    row_counts: dict[str, int] | None = None
    kind_counts: dict[str, int] | None = None
    if parts is not None:
        kind_counts = summed_by_key(
            [
                *(f["kinds"] for f in facts),
                *(r["kinds"] for r in stand_results),
                *(c[2] for c in cross_results),
            ]
        )
    if parts is None:
        trips = pt.by_vehicle_frames([f["trips"] for f in frames])
        stops = pt.by_vehicle_frames([f["stops"] for f in frames])
    else:
        trips, stops = empty_trips(), empty_stops()
        row_counts = summed_by_key([*(r["counts"] for r in stand_results), *frames])
    result = pt.finish(
        facts,
        rejected=rejected,
        context=context,
        pings=pings if pings is not None else pd.DataFrame(),
        visits=visits,
        trips=trips,
        stops=stops,
        occ=occ,
        found=[
            *(f["findings"] for f in facts),
            *(r["findings"] for r in stand_results),
            *(c[0] for c in cross_results),
        ],
        skipped=[*(r["skipped"] for r in stand_results), *(c[1] for c in cross_results)],
        counts=row_counts,
        kinds=kind_counts,
    )
    if proposal_tasks:
        result.summary |= summary_of_counts(summed_counts(proposed), [])
    if parts is not None:
        progress("Juntando as partes nos arquivos de saída, nos workers")
        narrowed = {name: narrowed_parts(client, paths) for name, paths in written.items()}
        if out is not None:
            files = {name: p for name, p in narrowed.items() if name in _MERGED_ON_WORKERS}
            done = [
                client.submit(_write_file, name, p, str(out / name), pure=False)
                for name, p in files.items()
            ]
            client.gather(done)
            result.written = tuple(files)
        result.parts = {name: tuple(map(Path, client.gather(p))) for name, p in narrowed.items()}
    result.map_sample = _gather_map_sample(client, map_samples, cap=map_cap)
    return result


_MERGED_ON_WORKERS = (
    "findings.geojson",
    "stand_visits.csv",
    "trips.csv",
    "occupancy.csv",
    "proposals.json",
)
"""The files the workers merge from their parts with ``out`` (the client writes the others)."""


def narrowed_parts(client: Any, paths: Sequence[Path]) -> list[Any]:
    """Merge a file's parts on the workers until :data:`~engines.pipeline.PART_FAN_IN` are left.

    Runs of that many consecutive parts become one (``fusao-L-K.parquet`` beside them). Returns
    the paths left (text) or the futures of the merges that make them: nothing waits here.
    """
    items: list[Any] = [str(p) for p in paths]
    level = 0
    while len(items) > PART_FAN_IN:
        folder = paths[0].parent
        items = [
            client.submit(
                merge_parts,
                items[k : k + PART_FAN_IN],
                str(folder / f"fusao-{level}-{n:05d}.parquet"),
                pure=False,
            )
            for n, k in enumerate(range(0, len(items), PART_FAN_IN))
        ]
        level += 1
    return items


def _write_file(name: str, parts: Sequence[str], path: str) -> str:
    """Write output file ``name`` at ``path`` from its parts, on a worker; return ``path``."""
    if name == "proposals.json":
        write_proposal_texts(merged_texts(list(map(Path, parts)), PROPOSAL_ORDER), Path(path))
        return path
    return merge_part_file(name, parts, path)


def _pieces_by_group(client: Any, splits: Sequence[Any], *, n_groups: int) -> list[list[Any]]:
    """Return, for each group, the futures of its pieces of ``splits``: one per worker.

    Each split is a list of one piece per group. Once they are done, one task on each worker
    holding some of them regroups theirs there (:func:`_local_pieces`), and a group's task
    fetches one object from each worker: the scheduler tracks workers x groups pieces, not
    splits x groups (about ten kB of the scheduler's and the client's memory each).
    """
    from distributed import wait

    wait(splits)
    for split in splits:
        if split.status == "error":
            split.result()  # the worker's error, raised here
    where = client.who_has(splits)
    on: dict[str, list[int]] = {}
    for k, split in enumerate(splits):
        holders = sorted(where.get(split.key) or [""])
        on.setdefault(holders[0], []).append(k)
    local = [
        client.submit(
            _local_pieces,
            [splits[k] for k in ks],
            order=ks,
            n_groups=n_groups,
            workers=[address] if address else None,
            allow_other_workers=bool(address),
            pure=False,
        )
        for address, ks in sorted(on.items())
    ]
    return [
        [client.submit(operator.getitem, pieces, g, pure=False) for pieces in local]
        for g in range(n_groups)
    ]


def _local_pieces(
    splits: Sequence[Sequence[Any]], *, order: Sequence[int], n_groups: int
) -> list[list[tuple[int, Any]]]:
    """Regroup splits held by one worker: for each group, its ``(split index, piece)`` pairs."""
    return [
        [(k, split[g]) for k, split in zip(order, splits, strict=True)] for g in range(n_groups)
    ]


def _on_pieces(
    func: Any, pieces: Sequence[Sequence[tuple[int, Any]]], *args: Any, **kwargs: Any
) -> Any:
    """Run ``func`` on a group's pieces (:func:`_local_pieces`) in the splits' order."""
    ordered = sorted((pair for local in pieces for pair in local), key=operator.itemgetter(0))
    return func([piece for _, piece in ordered], *args, **kwargs)


def _map_sample(result: Any, *, cap: int) -> MapSample:
    """Return a task's share of the map (:func:`maps.sample.part_sample`), where it ran."""
    found = result[0] if isinstance(result, tuple) else result["findings"]
    return part_sample(found, cap=cap)


def _gather_map_sample(client: Any, samples: list[Any], *, cap: int) -> MapSample:
    """Merge the tasks' map samples on the workers, eight at a time; receive the run's only."""
    while len(samples) > 8:
        samples = [
            client.submit(merge_samples, samples[k : k + 8], cap=cap, final=False, pure=False)
            for k in range(0, len(samples), 8)
        ]
    done = client.submit(merge_samples, samples, cap=cap, final=True, pure=False)
    return client.gather(done)  # type: ignore[no-any-return]


def _with_parts(
    result: Any,
    path: str,
    keep: frozenset[str] | None,
    visits_path: str | None = None,
    occupancy_path: str | None = None,
    *,
    send: bool = True,
    hold: frozenset[str] | None = None,
) -> Any:
    """Write a task's findings (and visits, occupancy) as parts; return the result without them.

    ``result`` is a dict with ``findings`` (and ``visits``, left empty, its counts put in
    ``counts``; and ``occupancy``, left empty) or a ``(findings, skipped)`` pair, returned as
    ``(findings, skipped, kinds)``;
    ``kinds`` (also a key of the dict) counts the findings by kind. The findings come back with
    the ``keep`` keys of their details (none without ``send``). With ``hold``: returns
    ``(result, held)``, ``held`` the findings with the ``hold`` keys of their details and no
    geometry (what :func:`_vehicle_pieces` cuts for the proposals).
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    found = result[0] if isinstance(result, tuple) else result["findings"]
    frame = write_findings_part(found, path)
    kinds = {str(k): int(v) for k, v in frame["kind"].value_counts().items()}
    back = frame if keep is None else with_details(frame, keep)
    if not send:
        back = back.iloc[:0]
    if isinstance(result, tuple):
        out: Any = (back, result[1], kinds)
    else:
        out = result | {"findings": back, "kinds": kinds}
        if visits_path is not None:
            visits = result["visits"]
            Path(visits_path).parent.mkdir(parents=True, exist_ok=True)
            keys = (fr.VEHICLE_ID, "_piece", "_row")
            out["counts"] = write_csv_part("stand_visits.csv", visits, visits_path, keys=keys)
            out["visits"] = visits.iloc[:0]
        if occupancy_path is not None:  # one stand's rows in one group: by stand, in order
            occ = result["occupancy"]
            Path(occupancy_path).parent.mkdir(parents=True, exist_ok=True)
            write_csv_part("occupancy.csv", occ, occupancy_path, keys=("stand_id",))
            out["occupancy"] = occ.iloc[:0]
    if hold is None:
        return out
    return out, pd.DataFrame(with_details(frame, hold).drop(columns="geometry"))


def _vehicle_pieces(done: tuple[Any, pd.DataFrame], *, n_groups: int) -> list[pd.DataFrame]:
    """Cut a task's held findings (:func:`_with_parts`) by :func:`vehicle_group`.

    A finding goes to the group of each vehicle it accuses (``accused_vehicles``: its own, or
    an ``illegal_stand_formation`` place's), once per group.
    """
    held = done[1]
    rows: list[list[int]] = [[] for _ in range(n_groups)]
    ids = held[fr.VEHICLE_ID].tolist()
    for i, (vid, details) in enumerate(zip(ids, held["details"].tolist(), strict=True)):
        vehicles = accused_vehicles({"vehicle_id": vid, "details": details})
        for g in sorted({vehicle_group(v, n_groups) for v in vehicles}):
            rows[g].append(i)
    return [held.iloc[r] for r in rows]


def _propose_group(
    pieces: Sequence[pd.DataFrame],
    spec: ProposalSpec,
    *,
    group: int,
    n_groups: int,
    proposals_path: str,
    review_path: str,
) -> dict[str, dict[str, int]]:
    """Make the proposals of one vehicle group; write them and its review items as parts.

    The parts hold the records' texts as ``proposals.json`` and ``summary.json`` have them,
    in :data:`~enforcement.proposals.PROPOSAL_ORDER` and
    :data:`~engines.pipeline.REVIEW_ORDER`. Returns their
    :func:`~enforcement.proposals.proposal_counts`.
    """
    found = pd.concat(pieces, ignore_index=True)
    done = propose_all(
        found,
        spec.rulebooks,
        timezone=spec.timezone,
        confirmed=spec.confirmed,
        fleet=spec.fleet,
        confidence_floor=spec.confidence_floor,
        vehicles=lambda v: vehicle_group(v, n_groups) == group,
    )
    for path in (proposals_path, review_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    keys = {k: [p[k] for p in done.proposals] for k in PROPOSAL_ORDER}
    write_part(proposals_path, keys, proposal_texts(done.proposals))
    review = {k: [r[k] for r in done.for_review] for k in REVIEW_ORDER}
    write_part(review_path, review, map(summary_item_text, done.for_review))
    return proposal_counts(done.proposals, done.uncovered, done.for_review)


def _trips_part(result: dict[str, Any], path: str) -> dict[str, int]:
    """Write a partition's trips as a part of ``trips.csv``; return its trips' and stops' counts."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    counts = write_csv_part("trips.csv", result["trips"], path, keys=(fr.VEHICLE_ID,))
    return counts | {"stops": len(result["stops"])}


def summed_by_key(counts: Sequence[dict[str, int]]) -> dict[str, int]:
    """Add counts by key (the tasks' counts of kinds, rows or rejected rows)."""
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + int(v)
    return total


def _vehicle_group(
    result: dict[str, Any],
    context: dict[str, Any],
    *,
    seen: set[str] | None,
    as_of: dt.date | None,
    activity_span: ActivitySpan | None,
) -> tuple[gpd.GeoDataFrame, dict[str, str]]:
    """Run :func:`~engines.partitions.vehicle_group` on a partition with its rows of the fleet.

    ``seen``: the run's vehicles, given to the first partition only: the fleet's vehicles
    without fixes are judged there.
    """
    fleet: pd.DataFrame | None = context["fleet"]
    if fleet is not None:
        ids = fleet[fr.VEHICLE_ID].astype("str")
        mine = ids.isin(result["vehicles"])
        if seen is not None:
            mine |= ~ids.isin(seen)
        fleet = fleet.loc[mine.to_numpy()]
    return pt.vehicle_group(result, context, fleet=fleet, as_of=as_of, activity_span=activity_span)


PLAN_FAN_IN = 8
"""Partitions' plan facts a task sums at most (:func:`~engines.partitions.merge_plan_facts`)."""


def _plan_on_workers(
    client: Any, futures: Sequence[Any], *, resolution: int | None, n_groups: int
) -> Any:
    """Return the future of the groups' plan (:func:`~engines.partitions.plan_groups`).

    Each partition's plan facts are made where it is, summed on the workers in a tree of
    :data:`PLAN_FAN_IN` at a time, and planned by one task: nothing of them reaches the client.
    """
    facts = client.map(pt.plan_facts, futures, resolution=resolution, pure=False)
    while len(facts) > PLAN_FAN_IN:
        facts = [
            client.submit(pt.merge_plan_facts, facts[k : k + PLAN_FAN_IN], pure=False)
            for k in range(0, len(facts), PLAN_FAN_IN)
        ]
    return client.submit(pt.plan_groups, facts, n_groups=n_groups, pure=False)
