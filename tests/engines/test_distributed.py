"""The Dask engine gives the local engine's result on a multi-vehicle, multi-day input."""

from __future__ import annotations

import logging
import operator
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import pytest
from factories import make_pings, offset_m
from partition_scenario import (
    BOUNDARY,
    STANDS,
    RecordingClient,
    assert_same,
    scenario_fleet,
    scenario_pings,
)

from engines.distributed import (
    DistributedEngineError,
    TaskErrorFilter,
    _on_pieces,
    _pieces_by_group,
    analyze_pings_distributed,
    dask_client,
)
from engines.partitions import (
    _block_moves,
    _stack,
    _vehicle_order,
    group_stands,
    merge_plan_facts,
    plan_groups,
    requeue,
    route_cell_pairs,
    stand_links,
    vehicle_partitions,
)
from engines.pipeline import AnalysisParams, analyze_pings
from tracking import frames as fr


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with dask_client(workers=2, processes=False) as c:
        yield c


class TestAnalyzePingsDistributed:
    def test_same_result_as_local_engine(self, client: Any, tmp_path: Path) -> None:
        """Findings (ids, content), visits, trips, stops, occupancy and summary equal local's."""
        pings = scenario_pings()
        fleet = scenario_fleet(tmp_path)
        kw: dict[str, Any] = {"fleet": fleet, "boundary": BOUNDARY, "params": AnalysisParams()}
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=200, **kw
        )
        assert_same(dist, local)
        kinds = set(local.findings["kind"])
        assert {"queue_jump", "illegal_stand_formation", "outside_municipality"} <= kinds
        assert {"unlicensed_stand_use", "gps_anomaly", "operating_while_barred"} <= kinds
        night = local.trips.loc[local.trips["trip_id"].str.match(r"N-\d{8}T0[23]")]
        local_days = night["started_at"].dt.tz_convert("America/Sao_Paulo").dt.day
        ended_days = night["ended_at"].dt.tz_convert("America/Sao_Paulo").dt.day
        assert len(night) == 4 and (local_days != ended_days).all()  # not cut at midnight
        queue = local.visits.loc[local.visits["stand_id"].eq("S1"), "queue_position"]
        assert queue.max() == 3  # positions span vehicles of different partitions

    def test_as_of_and_subset_of_kinds(self, client: Any, tmp_path: Path) -> None:
        """An earlier --as-of and a subset of kinds give the local result too."""
        pings = scenario_pings()
        pings = pings.loc[pings["timestamp"] < pd.Timestamp("2024-03-06T03:00Z")]
        pings = pings.reset_index(drop=True)
        kw: dict[str, Any] = {
            "fleet": scenario_fleet(tmp_path),
            "kinds": ("queue_jump", "habitual_absence", "tracking_gap", "inactivity"),
        }
        import datetime as dt

        kw["as_of"] = dt.date(2024, 3, 5)
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=500, **kw
        )
        assert_same(dist, local)

    def test_fixes_after_as_of_are_left_out_and_counted(self, client: Any, tmp_path: Path) -> None:
        """Given every fix and an earlier --as-of, both engines cut the later fixes and count
        them alike (``pings_after_as_of``); the analysis is that of the fixes cut before."""
        import datetime as dt

        pings = scenario_pings()
        end = pd.Timestamp("2024-03-06T03:00Z")  # 5 March ends in São Paulo
        n_after = int((pings["timestamp"] >= end).sum())
        kw: dict[str, Any] = {
            "fleet": scenario_fleet(tmp_path),
            "boundary": BOUNDARY,
            "as_of": dt.date(2024, 3, 5),
        }
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=500, **kw
        )
        assert_same(dist, local)
        assert n_after > 0 and local.summary["pings_after_as_of"] == n_after
        assert local.summary["pings_valid"] == len(pings) - n_after
        before = pings.loc[pings["timestamp"] < end].reset_index(drop=True)
        cut_first = analyze_pings(before, pd.DataFrame(), STANDS, **kw)
        assert cut_first.summary["pings_after_as_of"] == 0
        pd.testing.assert_frame_equal(dist.visits, cut_first.visits)
        assert dist.findings["finding_id"].tolist() == cut_first.findings["finding_id"].tolist()
        counted = {k: v for k, v in dist.summary.items() if k != "pings_after_as_of"}
        assert counted == {k: v for k, v in cut_first.summary.items() if k != "pings_after_as_of"}

    def test_one_stand_per_group(self, client: Any, tmp_path: Path) -> None:
        """Many small groups (a stand, a cell pair each; small partitions): the local result."""
        pings = scenario_pings()
        kw: dict[str, Any] = {
            "fleet": scenario_fleet(tmp_path),
            "boundary": BOUNDARY,
            "params": AnalysisParams(),
        }
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=100, groups=1000, **kw
        )
        assert_same(dist, local)
        assert local.visits["stand_id"].nunique() >= 2

    @pytest.mark.parametrize("kinds", [(), ("flag2_misuse",), ("longer_route",)])
    def test_kinds_that_read_no_visit_fixes(
        self, client: Any, tmp_path: Path, kinds: tuple[str, ...]
    ) -> None:
        """No kind, or none that reads the visits' fixes (``--kinds nenhum``, ``flag2_misuse``,
        ``longer_route``): the stand groups get no evidence, and the local result."""
        pings = scenario_pings()
        kw: dict[str, Any] = {"fleet": scenario_fleet(tmp_path), "kinds": kinds}
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=200, **kw
        )
        assert_same(dist, local)
        assert len(local.visits) > 0

    def test_stand_suspensions_by_stand_group(self, client: Any, tmp_path: Path) -> None:
        """A prefixo's suspension and a driver's barring at S1, judged in stand groups on the
        workers with the fixes' ``driver_id``: the local result, both scopes found."""
        import datetime as dt

        pings = scenario_pings()
        pings["driver_id"] = pd.Series(
            np.where(pings["vehicle_id"].eq("v1"), "AUX1", None), dtype="str"
        )
        susp = pd.DataFrame(
            {
                "stand_id": ["S1", "S1"],
                "vehicle_id": ["v2", None],
                "driver_id": [None, "AUX1"],
                "starts_on": [dt.date(2024, 3, 1), dt.date(2024, 3, 1)],
                "ends_on": [dt.date(2024, 3, 31), None],
                "kind": ["suspension", "barred"],
            }
        )
        kw: dict[str, Any] = {
            "fleet": scenario_fleet(tmp_path),
            "params": AnalysisParams(),
            "stand_suspensions": susp,
        }
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=200, groups=1000, **kw
        )
        assert_same(dist, local)
        scopes = {
            d["suspension"]["scope"]
            for d in local.findings["details"]
            if d.get("subtype") == "suspended_use"
        }
        assert scopes == {"driver", "vehicle"}

    def test_allowed_places_on_the_workers(self, client: Any, tmp_path: Path) -> None:
        """An area where waiting is allowed, given over the illegal stand the scenario makes:
        no place found there, on the workers as locally."""
        import geopandas as gpd

        pings = scenario_pings()
        kw: dict[str, Any] = {"fleet": scenario_fleet(tmp_path), "params": AnalysisParams()}
        before = analyze_pings(pings, pd.DataFrame(), STANDS, **kw).findings
        [place] = before.loc[before["kind"].eq("illegal_stand_formation"), "geometry"]
        allowed = gpd.GeoDataFrame({"stand_id": ["E1"]}, geometry=[place], crs=4326)
        kw["allowed_places"] = allowed
        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=client, partition_fixes=200, **kw
        )
        assert_same(dist, local)
        kinds = set(local.findings["kind"])
        assert "illegal_stand_formation" not in kinds and "queue_jump" in kinds

    def test_client_receives_no_fixes(self, client: Any, tmp_path: Path) -> None:
        """The gathered stage sends the client findings and frames, never the evidence fixes."""
        pings = scenario_pings()
        kw: dict[str, Any] = {"fleet": scenario_fleet(tmp_path), "params": AnalysisParams()}
        received: list[Any] = []
        recording = RecordingClient(client, received)

        local = analyze_pings(pings, pd.DataFrame(), STANDS, **kw)
        dist = analyze_pings_distributed(
            pings, pd.DataFrame(), STANDS, client=recording, partition_fixes=300, **kw
        )
        assert_same(dist, local)

        def frames(value: Any) -> Iterator[pd.DataFrame]:
            if isinstance(value, pd.DataFrame):
                yield value
            elif isinstance(value, dict):
                assert "evidence" not in value
                for v in value.values():
                    yield from frames(v)
            elif isinstance(value, list | tuple):
                for v in value:
                    yield from frames(v)

        got = [f for r in received for f in frames(r)]
        assert got and not any(fr.TIMESTAMP in f.columns for f in got)

    def test_client_plans_from_a_few_numbers_per_partition(self, client: Any) -> None:
        """Ten times the vehicles and cell pairs in as many partitions: what the client receives
        besides frames (counts, statistics, the plan's sizes) stays the same size."""
        received: list[Any] = []
        recording = RecordingClient(client, received)

        def without_frames(value: Any) -> Any:
            if isinstance(value, pd.DataFrame):
                return None
            if isinstance(value, dict):
                return {k: without_frames(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [without_frames(v) for v in value]
            return value

        sizes, pairs = {}, {}
        for n in (20, 200):
            pings = _trips_between_cells(n)
            received.clear()
            dist = analyze_pings_distributed(
                pings, pd.DataFrame(), STANDS, client=recording, partition_fixes=len(pings) // 4
            )
            keys = route_cell_pairs(dist.trips, resolution=8)
            pairs[n] = len(set(keys.tolist()))
            sizes[n] = len(pickle.dumps(without_frames(received)))
        assert pairs[200] > 8 * pairs[20]  # the input's cell pairs grow with the vehicles
        assert sizes[200] < 1.05 * sizes[20], sizes

    def test_pieces_regrouped_by_worker(self, client: Any) -> None:
        """A group's pieces come from one task per worker holding splits, in the splits' order."""
        splits = [
            client.submit(lambda k: [f"{k}-{g}" for g in range(5)], k, pure=False)
            for k in range(12)
        ]
        pieces = _pieces_by_group(client, splits, n_groups=5)
        holders = {a for addresses in client.who_has(splits).values() for a in addresses}
        assert len(holders) == 2  # the splits are on both workers
        assert len(pieces) == 5 and all(len(p) == 2 for p in pieces)
        got = client.gather([client.submit(_on_pieces, list, p, pure=False) for p in pieces])
        assert got == [[f"{k}-{g}" for k in range(12)] for g in range(5)]

    def test_empty_pings(self, client: Any) -> None:
        """No pings: the empty result of the local engine."""
        empty = make_pings([])
        local = analyze_pings(empty, pd.DataFrame(), STANDS)
        dist = analyze_pings_distributed(empty, pd.DataFrame(), STANDS, client=client)
        assert_same(dist, local)


class TestPartitionFailure:
    def test_a_failing_task_is_a_named_error_with_its_cause(
        self, client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A task that raises on a worker stops the run with DistributedEngineError naming the
        worker's error (chained), not with a partial result."""
        import engines.partitions

        def broken(*args: Any, **kwargs: Any) -> Any:
            msg = "divisão quebrada"
            raise RuntimeError(msg)

        monkeypatch.setattr(engines.partitions, "split_by_stand", broken)
        with pytest.raises(DistributedEngineError) as failed:
            analyze_pings_distributed(
                scenario_pings(),
                pd.DataFrame(),
                STANDS,
                client=client,
                partition_fixes=500,
                fleet=scenario_fleet(tmp_path),
            )
        assert str(failed.value) == (
            "uma partição falhou no cluster Dask: RuntimeError('divisão quebrada')"
        )
        assert isinstance(failed.value.__cause__, RuntimeError)


class TestVehiclePartitions:
    def test_whole_vehicles_cover_every_row(self) -> None:
        """Ranges cut only between vehicles, cover all rows once, about the target size."""
        ids = pd.Series(["a"] * 5 + ["b"] * 2 + ["c"] * 7 + ["d"])
        assert vehicle_partitions(ids, partition_fixes=6) == [(0, 7), (7, 14), (14, 15)]
        assert vehicle_partitions(ids, partition_fixes=100) == [(0, 15)]
        assert vehicle_partitions(ids, partition_fixes=100, min_partitions=3) == [
            (0, 5),
            (5, 14),
            (14, 15),
        ]
        assert vehicle_partitions(ids.iloc[:0], partition_fixes=10) == []


class TestEvidenceInVehicleOrder:
    def test_blocks_stack_as_concat_and_take(self) -> None:
        """Pieces of disjoint vehicles (each sorted) stacked by vehicle blocks equal their
        concatenation taken in vehicle order, column types kept (text, instants, categories)."""
        t = pd.Timestamp("2024-03-04T12:00Z")

        def piece(vehicles: list[str], start: int) -> pd.DataFrame:
            n = len(vehicles)
            return pd.DataFrame(
                {
                    fr.VEHICLE_ID: pd.Series(vehicles, dtype="str"),
                    fr.TIMESTAMP: [t + pd.Timedelta(start + k, "s") for k in range(n)],
                    fr.LAT: [-30.0 - k / 1000 for k in range(n)],
                    fr.METER: pd.Categorical(
                        (["free", None, "off"] * n)[:n], categories=fr.METER_VALUES
                    ),
                    fr.ROW: range(start, start + n),
                    fr.SPEED_FLAG: [k % 2 == 0 for k in range(n)],
                }
            )

        empty = piece(["z"], 50).iloc[:0]
        pieces = [piece(["b", "b", "é", "é", "é"], 0), empty, piece(["a", "c", "c"], 100)]
        blocks = _vehicle_order(pieces)
        assert blocks == [(2, 0, 1), (0, 0, 2), (2, 1, 3), (0, 2, 5)]  # a b c é (UTF-8 bytes)
        whole = pd.concat(pieces, ignore_index=True)
        order = [5, 0, 1, 6, 7, 2, 3, 4]
        pd.testing.assert_frame_equal(
            _stack(pieces, blocks), whole.take(order).reset_index(drop=True)
        )
        assert _vehicle_order([pieces[2]]) is None  # already in order
        # a position in the concatenation moves to where its row is in the stack
        offsets = np.cumsum([0, *(len(p) for p in pieces)])[:-1]
        moved = _block_moves(blocks, offsets)(np.arange(len(whole)))
        assert moved.tolist() == np.argsort(order).tolist()


class TestRequeue:
    def test_positions_across_vehicles(self) -> None:
        """A visit arriving while two others are in progress at the stand is third."""
        t = pd.Timestamp("2024-03-04T12:00Z")
        visits = pd.DataFrame(
            {
                "vehicle_id": pd.Series(["b", "a", "c", "d"], dtype="str"),
                "stand_id": pd.Series(["S", "S", "S", "T"], dtype="str"),
                "arrived_at": [t, t, t + pd.Timedelta(60, "s"), t + pd.Timedelta(60, "s")],
                "departed_at": [t + pd.Timedelta(600, "s")] * 4,
                "queue_position": [1, 1, 1, 1],
            }
        )
        assert requeue(visits)["queue_position"].tolist() == [2, 1, 3, 1]


def _visit(vehicle: str, stand: str, a: str, d: str, board: int | None = None) -> dict[str, Any]:
    return {
        "vehicle_id": vehicle,
        "stand_id": stand,
        "arrived_at": pd.Timestamp(f"2024-03-04T{a}Z"),
        "departed_at": pd.Timestamp(f"2024-03-04T{d}Z"),
        "boarding_ping": board,
    }


class TestStandGroups:
    def test_links_overlapping_visits_and_shared_boardings(self) -> None:
        """One vehicle's visits that overlap (closed) or share a boarding fix link their stands."""
        visits = pd.DataFrame(
            [
                _visit("a", "S1", "10:00", "10:10"),
                _visit("a", "S2", "10:10", "10:20"),  # touches S1's visit at 10:10
                _visit("a", "S3", "10:30", "10:40", board=7),
                _visit("a", "S4", "10:41", "10:42", board=7),  # same boarding fix
                _visit("b", "S5", "10:00", "10:10"),
                _visit("c", "S6", "10:05", "10:06"),  # overlaps b's, another vehicle
                _visit("a", "S7", "11:00", "11:10"),
            ]
        )
        visits["boarding_ping"] = visits["boarding_ping"].astype("Int64")
        assert stand_links(visits) == [("S1", "S2"), ("S3", "S4")]

    def test_plan_facts_summed_in_a_tree_give_one_plan(self) -> None:
        """Plan facts summed by runs then together equal one sum; the plan groups them alike."""
        facts = [
            {
                "stand_visits": {"S1": 2, f"S{k + 2}": 1},
                "stand_links": [("S1", f"S{k + 2}")] if k % 2 else [],
                "route_pairs": {7: 1, 100 + k: 2},
                "vehicles": [f"v{k}"],
            }
            for k in range(5)
        ]
        tree = merge_plan_facts([merge_plan_facts(facts[:2]), merge_plan_facts(facts[2:])])
        assert tree == merge_plan_facts(facts)
        assert tree["stand_visits"]["S1"] == 10 and tree["route_pairs"][7] == 5
        assert tree["stand_links"] == [("S1", "S3"), ("S1", "S5")]
        plan = plan_groups([merge_plan_facts(facts[:2]), *facts[2:]], n_groups=3)
        assert plan == plan_groups(facts, n_groups=3)
        assert plan["stand_of"]["S3"] == plan["stand_of"]["S1"] == plan["stand_of"]["S5"]
        assert plan["n_stand_groups"] == 3 and plan["n_route_groups"] == 3
        assert plan["vehicles"] == {f"v{k}" for k in range(5)}

    def test_linked_stands_share_a_group(self) -> None:
        """Linked stands go to one group; the others spread over the groups by visits."""
        counts = {"S1": 5, "S2": 1, "S3": 4, "S4": 3, "S5": 2}
        groups = group_stands(counts, [("S2", "S5")], n_groups=3)
        assert groups["S2"] == groups["S5"]
        assert sorted(set(groups.values())) == [0, 1, 2]
        assert groups["S1"] != groups["S3"]
        one_each = group_stands(counts, [], n_groups=100)
        assert len(set(one_each.values())) == len(counts)


def _trips_between_cells(n_vehicles: int) -> pd.DataFrame:
    """One meter trip per vehicle between two random places up to 14 km apart, a fix a minute."""
    rng = np.random.default_rng(7)
    rows = []
    for v in range(n_vehicles):
        start = np.array(offset_m(*rng.uniform(-5000, 5000, 2)))
        end = np.array(offset_m(*rng.uniform(-5000, 5000, 2)))
        for i in range(14):
            lat, lon = start + (end - start) * min(max(i - 2, 0), 9) / 9
            meter = "occupied" if 2 <= i <= 11 else "free"
            rows.append((f"V{v:04d}", 60.0 * i, float(lat), float(lon), meter))
    return make_pings(rows)


class TestDaskClient:
    def test_unreachable_scheduler_is_a_named_error(self) -> None:
        """A scheduler nobody listens on gives DistributedEngineError naming the address."""
        with (
            pytest.raises(DistributedEngineError, match="tcp://127.0.0.1:9"),
            dask_client("tcp://127.0.0.1:9", connect_timeout_s=1),
        ):
            pass

    def test_bad_worker_count(self) -> None:
        """Zero workers is refused before any cluster starts."""
        with pytest.raises(ValueError, match="'workers' era 0"), dask_client(workers=0):
            pass

    def test_worker_processes_keep_freed_heap_after_a_restart(self) -> None:
        """Each worker process, also one restarted by its nanny, sets the allocator back
        (Dask starts them trimming at 64 KiB); thread workers leave the client's process alone."""

        def kept(dask_worker: Any) -> bool:
            return "pontual-keep-freed-heap" in dask_worker.plugins

        with dask_client(workers=1) as client:
            assert list(client.run(kept).values()) == [True]
            client.restart()
            assert list(client.run(kept).values()) == [True]
        with dask_client(workers=1, processes=False) as client:
            assert list(client.run(kept).values()) == [False]

    def test_no_message_kept(self) -> None:
        """Tasks on worker processes: the client, the local scheduler and the workers keep none
        of the messages they sent, nor the scheduler its transitions and events."""
        import distributed  # noqa: F401 (its settings' defaults)

        default = dask.config.get("distributed.admin.low-level-log-length")
        with dask_client(workers=2) as client:
            client.gather(client.map(operator.neg, range(60), pure=False))
            scheduler = client.cluster.scheduler
            streams = [
                client.scheduler_comm,
                *scheduler.stream_comms.values(),
                *scheduler.client_comms.values(),
            ]
            assert len(streams) == 4 and all(s.batch_count > 0 for s in streams)
            kept = [len(s.recent_message_log) for s in streams]
            kept.append(len(scheduler.transition_log))
            kept.extend(len(t.events) for t in scheduler._broker._topics.values())
            on_workers = client.run(
                lambda dask_worker: len(dask_worker.batched_stream.recent_message_log)
            )
        assert sum(kept) == 0 and sum(on_workers.values()) == 0, (kept, on_workers)
        assert dask.config.get("distributed.admin.low-level-log-length") == default  # set back


def _worker_record(
    level: int, msg: str, *args: Any, name: str = "distributed.worker"
) -> logging.LogRecord:
    return logging.getLogger(name).makeRecord(name, level, "worker.py", 1, msg, args, None)


def _fail() -> None:
    raise ValueError("falhou")


def _task_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compute Failed")]


class TestQuietTaskErrors:
    def test_filter_drops_only_compute_failed(self) -> None:
        """distributed's record of a failed task is dropped; its other records pass."""
        task_failed = _worker_record(
            logging.ERROR,
            "Compute Failed\nKey:       %s\nState:     %s\nTask:  %s\nException: %r\n"
            "Traceback: %r\n",
            "k",
            "executing",
            "<Task 'k'>",
            "ValueError('falhou')",
            '  File "x.py", line 1\n',
        )
        machine = "distributed.worker.state_machine"
        cancelled_at_close = _worker_record(
            logging.WARNING,
            "Async instruction for <Task cancelled name=\"execute('k')\"> ended with "
            "CancelledError",
            name=machine,
        )
        others = [
            _worker_record(logging.WARNING, "Unmanaged memory use is high. %s", "..."),
            _worker_record(logging.ERROR, "Exception during execution of task %r", "k"),
            _worker_record(logging.WARNING, "Compute Failed"),  # not the task's record
            _worker_record(logging.ERROR, "Compute Failed", name=machine),  # another logger's
            _worker_record(
                logging.WARNING, "Async instruction for x ended with OSError", name=machine
            ),
            _worker_record(
                logging.ERROR, "Unhandled exception in async instruction for x", name=machine
            ),
        ]
        kept = TaskErrorFilter()
        assert not kept.filter(task_failed) and not kept.filter(cancelled_at_close)
        assert all(kept.filter(r) for r in others)

    def test_thread_workers_of_a_local_cluster(
        self, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Thread workers: a task's error reaches the client and is not logged; a worker's
        warning is; the filter leaves the logger when the cluster closes."""
        monkeypatch.setattr(logging.getLogger("distributed"), "propagate", True)
        worker_log = logging.getLogger("distributed.worker")
        before = list(worker_log.filters)
        with dask_client(workers=2, processes=False) as client:
            with pytest.raises(ValueError, match="falhou"):
                client.submit(_fail, pure=False).result()
            client.run(lambda: worker_log.warning("aviso do worker"))
        assert _task_errors(caplog) == []
        assert "aviso do worker" in caplog.messages
        assert worker_log.filters == before

    def test_external_scheduler_workers_keep_their_logging(
        self, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """Workers of a scheduler given by address (the city's, here worker processes) still
        print a task's error, and get no filter."""
        from distributed import LocalCluster

        with (
            LocalCluster(n_workers=1, dashboard_address=":0") as cluster,
            dask_client(cluster.scheduler_address) as client,
        ):
            with pytest.raises(ValueError, match="falhou"):
                client.submit(_fail, pure=False).result()
            filters = client.run(
                lambda: [type(f).__name__ for f in logging.getLogger("distributed.worker").filters]
            )
        assert list(filters.values()) == [[]]
        assert "Compute Failed" in capfd.readouterr().err
