"""Every engine of ``pontual analyze`` writes the same files, on a scenario with all eleven kinds.

The in-memory engine (:func:`engines.pipeline.analyze_pings`), the file engine (vehicle buckets)
with one and two jobs, the file engine cut into many small buckets, and Dask on a local cluster of
worker processes (given the file, and given a dataset of ``pontual dataset write``): every output
file byte for byte, ``map.html`` bar folium's random element ids.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
from all_kinds_scenario import contract_csv, roads, write_fleet
from partition_scenario import BOUNDARY, STANDS

from engines.pipeline import AnalysisParams, analyze_pings, cut_at_as_of
from fleet.loaders import read_fleet
from geo.roads import build_road_graph
from tracking.detectors.findings import KINDS as ALL_KINDS
from tracking.ingest import read_pings

OUTPUTS = {
    "findings.geojson",
    "stand_visits.csv",
    "trips.csv",
    "rejected.csv",
    "occupancy.csv",
    "proposals.json",
    "summary.json",
    "map.html",
}
NOT_IN_SCENARIO = {"driver_not_allowed": "sem cadastro de condutores (--drivers e --driver-links)"}
"""Kinds whose registry this scenario does not give (their detectors are skipped, with why)."""
KINDS = tuple(k for k in ALL_KINDS if k not in NOT_IN_SCENARIO)
FOLIUM_ID = re.compile(r"_[0-9a-f]{32}\b")


@dataclass(frozen=True)
class Inputs:
    pings: Path
    stands: Path
    fleet: Path
    boundary: Path
    roads: Path

    def args(self, out: Path) -> list[str]:
        """``pontual analyze`` arguments for these inputs, writing to ``out``."""
        return [
            "analyze",
            "--pings", str(self.pings),
            "--stands", str(self.stands),
            "--fleet", str(self.fleet),
            "--boundary", str(self.boundary),
            "--roads", str(self.roads),
            "--municipality", "4314902",
            "--timezone", "America/Sao_Paulo",
            "--tiles", "none",
            "--out", str(out),
        ]  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    folder = tmp_path_factory.mktemp("all_kinds")
    STANDS.to_file(folder / "stands.geojson", driver="GeoJSON")
    gpd.GeoDataFrame(geometry=[BOUNDARY], crs=4326).to_file(
        folder / "limite.geojson", driver="GeoJSON"
    )
    roads().to_file(folder / "ruas.geojson", driver="GeoJSON")
    return Inputs(
        pings=contract_csv(folder / "pings.csv"),
        stands=folder / "stands.geojson",
        fleet=write_fleet(folder / "frota.csv"),
        boundary=folder / "limite.geojson",
        roads=folder / "ruas.geojson",
    )


def _in_memory(path: Path, stands: Any, *, jobs: int, early: Any = None, **options: Any) -> Any:
    """What the CLI's file engine returns, computed by the in-memory engine instead (a CSV:
    no early read)."""
    assert early is None, "a Parquet file read early"
    del jobs
    params = options["params"]
    fixes, rejected = read_pings(path, max_speed_kmh=params.max_speed_kmh)
    result = analyze_pings(fixes, rejected, stands, **options)  # cuts at as_of, counting
    if options["as_of"] is not None:  # the map's fixes
        fixes = cut_at_as_of(fixes, as_of=options["as_of"], timezone=params.timezone)
    return result, fixes


@contextlib.contextmanager
def _cli_in_process(analyze_file: Callable[..., Any]) -> Iterator[Callable[[list[str]], str]]:
    """Run ``pontual ARGS`` in this process with ``analyze_file`` as the file engine.

    The process-wide settings of the command (allocators, the final ``os._exit``) are left out.
    """
    import api.cli as cli
    import engines.buckets
    import runtime

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engines.buckets, "analyze_file", analyze_file)
        mp.setattr(runtime, "keep_arrow_pages", lambda: False)
        mp.setattr(runtime, "keep_freed_heap", lambda: False)
        mp.setattr(cli, "_exit_at_once", lambda: None)

        def run(args: list[str]) -> str:
            out = io.StringIO()
            mp.setattr(sys, "argv", ["pontual", *args])
            with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
                cli.main()
            assert done.value.code in (0, None), out.getvalue()
            return out.getvalue()

        yield run


@pytest.fixture(scope="module")
def reference(inputs: Inputs, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The in-memory engine's output folder and report (the CLI's writers and report)."""
    out = tmp_path_factory.mktemp("memory")
    with _cli_in_process(_in_memory) as run:
        report = run(inputs.args(out))
    return out, report


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_file()}


def _assert_parts(out: Path) -> None:
    """The Dask workers' parts hold each finding, visit and trip of the merged files once."""
    import pyarrow.parquet as pq

    parts = sorted((out / "partes" / "achados").glob("*.parquet"))
    ids = [i for p in parts for i in pq.read_table(p, columns=["finding_id"])[0].to_pylist()]
    features = json.loads((out / "findings.geojson").read_text())["features"]
    assert len(parts) > 1 and sorted(ids) == sorted(f["properties"]["finding_id"] for f in features)
    for folder, name in (("visitas", "stand_visits.csv"), ("viagens", "trips.csv")):
        lines = [
            line + b"\n"
            for p in sorted((out / "partes" / folder).glob("*.parquet"))
            for line in pq.read_table(p, columns=["text"])[0].to_pylist()
        ]
        rows = (out / name).read_bytes().splitlines(keepends=True)[1:]
        assert len(lines) > 1 and sorted(lines) == sorted(rows), name


def _assert_same_files(got: Path, want: Path) -> None:
    """Every output file of ``got`` equals ``want``'s, bytes for bytes (map bar folium ids)."""
    assert _files(got) == _files(want) == OUTPUTS
    for name in sorted(OUTPUTS - {"map.html"}):
        a, b = (got / name).read_bytes(), (want / name).read_bytes()
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            at = min(len(a), len(b)) if at is None else at
            lo = max(0, at - 80)
            pytest.fail(f"{name} differs at byte {at}: {a[lo : at + 80]!r} != {b[lo : at + 80]!r}")
    pages = [
        FOLIUM_ID.sub("_id", (d / "map.html").read_text(encoding="utf-8")) for d in (got, want)
    ]
    assert pages[0] == pages[1], "map.html"


def _report_lines(report: str) -> list[str]:
    """The report bar its last line (it names the output folder)."""
    lines = report.strip().splitlines()
    assert lines[-1].startswith("Saídas em ")
    return lines[:-1]


class TestScenario:
    def test_every_kind_occurs(self, inputs: Inputs) -> None:
        """Default thresholds, in memory: all eleven kinds, the four added from their vehicles."""
        fixes, rejected = read_pings(inputs.pings)
        result = analyze_pings(
            fixes,
            rejected,
            STANDS,
            fleet=read_fleet(inputs.fleet),
            boundary=BOUNDARY,
            roads=build_road_graph(roads()),
            params=AnalysisParams(),
        )
        found = result.findings
        assert set(found["kind"]) == set(KINDS) and len(KINDS) == 11
        assert result.skipped_detectors == NOT_IN_SCENARIO
        by_kind = found.groupby("kind")["vehicle_id"].agg(lambda v: sorted(set(v.dropna())))
        assert by_kind["habitual_absence"] == ["H"]
        assert by_kind["flag2_misuse"] == ["F"]
        assert by_kind["longer_route"] == ["R"]
        assert "I" in by_kind["inactivity"]
        route = found.loc[found["kind"].eq("longer_route"), "details"].iloc[0]
        assert route["method"] == "road_network" and route["pattern"] == "loop"
        assert sorted(rejected["reason"]) == sorted(
            [
                "duplicate",
                "conflicting_duplicate",
                "naive_timestamp",
                "empty_vehicle_id",
                "unknown_meter",
                "malformed_row",
            ]
        )

    def test_reference_run_writes_every_kind(self, reference: tuple[Path, str]) -> None:
        """The in-memory run of the command writes findings of every kind and their proposals."""
        out, report = reference
        findings = json.loads((out / "findings.geojson").read_text(encoding="utf-8"))
        assert {f["properties"]["kind"] for f in findings["features"]} == set(KINDS)
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert set(summary["findings_by_kind"]) == set(KINDS)
        assert summary["pings_rejected"] == 6
        proposals = json.loads((out / "proposals.json").read_text(encoding="utf-8"))
        assert proposals and {p["municipality"] for p in proposals} == {"4314902"}
        assert "Bandeira 2 indevida: 1" in report

    def test_every_measure_is_named_in_pt_br(self, reference: tuple[Path, str]) -> None:
        """The evidence of every kind (the console's and the documents' measures and thresholds)
        names each value in pt-BR: no detector's key or code word reaches the agent."""
        from enforcement.documents import evidence_summary

        out, _ = reference
        findings = json.loads((out / "findings.geojson").read_text(encoding="utf-8"))
        raw = set()
        for feature in findings["features"]:
            finding = feature["properties"]
            _, measures, thresholds = evidence_summary(finding, timezone="America/Sao_Paulo")
            raw |= {(finding["kind"], m) for m in measures + thresholds if "_" in m}
        assert not raw


@pytest.mark.parametrize("engine", ["memory", "file"])
def test_a_licence_for_a_stand_not_analysed_accuses_no_one(inputs: Inputs, engine: str) -> None:
    """H's licence written 'S01' for the stands' 'S1', given to the engines straight (not marked
    by the CLI): H is neither habitually absent from a stand it cannot be seen at, nor
    unlicensed at S1. The other licensees are judged."""
    from engines.buckets import analyze_file

    fleet = read_fleet(inputs.fleet)
    fleet.loc[fleet["vehicle_id"] == "H", "stands"] = pd.Series([("S01",)], dtype=object).iloc[0]
    options = {"fleet": fleet, "boundary": BOUNDARY, "roads": build_road_graph(roads())}
    if engine == "memory":
        fixes, rejected = read_pings(inputs.pings)
        result = analyze_pings(fixes, rejected, STANDS, params=AnalysisParams(), **options)
    else:
        result, _ = analyze_file(inputs.pings, STANDS, jobs=2, bucket_fixes=100, **options)
    found = result.findings
    mine = found[found["vehicle_id"].eq("H")]
    assert not mine["kind"].isin(["habitual_absence", "unlicensed_stand_use"]).any()
    assert found["kind"].eq("unlicensed_stand_use").any()  # the others still are


@pytest.mark.parametrize("engine", ["memory", "file", "dask"])
def test_prefixos_the_fixes_write_otherwise_are_not_accused(
    run_pontual: Any, inputs: Inputs, tmp_path: Path, engine: str
) -> None:
    """The trackers of F and v2 write "f" and "V02", ids the fleet lacks: F, never seen under
    its own id in 70 days, is not inactive, and "V02" (a Táxi Acessível for all the run knows)
    does not jump the queue. I is still inactive and v5 still jumps it."""
    text = inputs.pings.read_text(encoding="utf-8")
    pings = tmp_path / "pings.csv"
    pings.write_text(re.sub(r"(?m)^F,", "f,", re.sub(r"(?m)^v2,", "V02,", text)), "utf-8")
    if engine == "memory":
        fixes, rejected = read_pings(pings)
        options = {"boundary": BOUNDARY, "roads": build_road_graph(roads())}
        found = analyze_pings(
            fixes, rejected, STANDS, fleet=read_fleet(inputs.fleet), **options
        ).findings
    else:
        args = Inputs(pings, *astuple(inputs)[1:]).args(tmp_path / "out")
        more = ["--engine", "dask", "--workers", "2"] if engine == "dask" else ["--jobs", "2"]
        done = run_pontual(*args, *more, timeout_s=600)
        assert done.returncode == 0, done.stderr
        assert "da frota aparece(m) escrito(s) de outro modo nas posições (F, v2)" in done.stdout, (
            done.stdout
        )
        features = json.loads((tmp_path / "out" / "findings.geojson").read_text("utf-8"))
        found = pd.DataFrame([f["properties"] for f in features["features"]])
    by_kind = found.groupby("kind")["vehicle_id"].agg(lambda v: sorted(set(v.dropna())))
    assert by_kind["inactivity"] == ["I", "L"]  # v1 waits Livre at its stand: operating
    assert by_kind["queue_jump"] == ["v5"]
    assert by_kind["flag2_misuse"] == ["f"]  # the fixes' own rules still judge it


class TestEnginesWriteTheSameFiles:
    @pytest.mark.parametrize("jobs", ["1", "2"])
    def test_file_engine(
        self,
        run_pontual: Any,
        inputs: Inputs,
        reference: tuple[Path, str],
        tmp_path: Path,
        jobs: str,
    ) -> None:
        """``pontual analyze --jobs N`` (the file engine) writes the in-memory engine's files."""
        done = run_pontual(*inputs.args(tmp_path), "--jobs", jobs)
        assert done.returncode == 0, done.stderr
        _assert_same_files(tmp_path, reference[0])
        assert _report_lines(done.stdout) == _report_lines(reference[1])

    def test_file_engine_in_small_buckets(
        self, inputs: Inputs, reference: tuple[Path, str], tmp_path: Path
    ) -> None:
        """The file engine cut into buckets of about 100 rows, two at a time: the same files."""
        from engines.buckets import analyze_file

        said: list[str] = []

        def small(path: Path, stands: Any, *, progress: Any, **options: Any) -> Any:
            def heard(label: str) -> None:
                said.append(label)
                progress(label)

            return analyze_file(path, stands, bucket_fixes=100, progress=heard, **options)

        with _cli_in_process(small) as run:
            report = run([*inputs.args(tmp_path), "--jobs", "2"])
        buckets = [int(m[1]) for s in said if (m := re.search(r"em (\d+) partiç", s))]
        assert buckets and buckets[0] >= 10
        _assert_same_files(tmp_path, reference[0])
        assert _report_lines(report) == _report_lines(reference[1])

    def test_dask_engine(
        self, run_pontual: Any, inputs: Inputs, reference: tuple[Path, str], tmp_path: Path
    ) -> None:
        """``--engine dask`` on a local cluster of two worker processes: the same files."""
        done = run_pontual(
            *inputs.args(tmp_path), "--engine", "dask", "--workers", "2", timeout_s=600
        )
        assert done.returncode == 0, done.stderr
        _assert_same_files(tmp_path, reference[0])
        _assert_parts(tmp_path)
        assert _report_lines(done.stdout) == _report_lines(reference[1])

    def test_dask_engine_in_small_groups(
        self, inputs: Inputs, reference: tuple[Path, str], tmp_path: Path
    ) -> None:
        """Dask on two worker processes, a stand and a cell pair per group, the parts merged on
        the workers two at a time before the client merges them: the same files."""
        import functools

        import engines.distributed

        small = functools.partial(engines.distributed.gather_on_workers, groups=1000)
        calls: list[int] = []

        def recorded(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return small(*args, **kwargs)

        with (
            _cli_in_process(_in_memory) as run,
            pytest.MonkeyPatch.context() as mp,
        ):
            mp.setattr(engines.distributed, "gather_on_workers", recorded)
            mp.setattr(engines.distributed, "PART_FAN_IN", 2)  # parts merged on the workers
            report = run([*inputs.args(tmp_path), "--engine", "dask", "--workers", "2"])
        assert calls == [1]
        _assert_same_files(tmp_path, reference[0])
        _assert_parts(tmp_path)
        left = list((tmp_path / "partes" / "achados").glob("*.parquet"))
        assert 1 < len(left) <= 2 and all(p.name.startswith("fusao-") for p in left)
        assert _report_lines(report) == _report_lines(reference[1])

    def test_dask_map_from_the_workers_sample(self, inputs: Inputs, tmp_path: Path) -> None:
        """Under a map cap below the run's findings, the Dask client draws only the workers'
        merged sample, and ``map.html`` equals the in-memory engine's (a fixed sample, said)."""
        import api.cli_analyze
        import maps.sample
        from tracking.detectors.findings import read_findings_geojson

        cap = 12
        received: list[tuple[Any, Any]] = []
        original = api.cli_analyze._map_findings

        def recorded(result: Any) -> Any:
            received.append(original(result))
            return received[-1]

        with pytest.MonkeyPatch.context() as mp, _cli_in_process(_in_memory) as run:
            mp.setattr(maps.sample, "MAP_MAX_FINDINGS", cap)
            mp.setattr(api.cli_analyze, "_map_findings", recorded)
            for engine in ("local", "dask"):
                args = [*inputs.args(tmp_path / engine), "--engine", engine, "--jobs", "1"]
                run([*args, "--workers", "2"] if engine == "dask" else args)
        (_, local_counts), (dask_found, dask_counts) = received
        found = read_findings_geojson(tmp_path / "local" / "findings.geojson")
        assert local_counts is None and len(found) > cap
        assert dask_counts == maps.sample.kind_counts(found) and len(dask_found) == cap
        want = maps.sample.sample_findings(found, cap=cap)
        assert dask_found["finding_id"].tolist() == want["finding_id"].tolist()
        pages = [
            FOLIUM_ID.sub("_id", (tmp_path / e / "map.html").read_text(encoding="utf-8"))
            for e in ("local", "dask")
        ]
        assert pages[0] == pages[1]
        drawable = sum(dask_counts.values())  # findings with a geometry
        assert f"o mapa mostra {cap} de {drawable}, uma amostra fixa" in pages[0]

    def test_dask_engine_on_a_dataset(
        self, run_pontual: Any, inputs: Inputs, reference: tuple[Path, str], tmp_path: Path
    ) -> None:
        """``pontual dataset write`` in four buckets, then ``--engine dask`` on its folder (the
        workers read the buckets): the same files."""
        dataset = tmp_path / "conjunto"
        written = run_pontual(
            "dataset", "write", "--pings", str(inputs.pings), "--out", str(dataset),
            "--buckets", "4", "--municipality", "4314902",
        )  # fmt: skip
        assert written.returncode == 0, written.stderr
        args = inputs.args(tmp_path / "out")
        args[args.index("--pings") + 1] = str(dataset)
        done = run_pontual(*args, "--engine", "dask", "--workers", "2", timeout_s=600)
        assert done.returncode == 0, done.stderr
        _assert_same_files(tmp_path / "out", reference[0])
        assert _report_lines(done.stdout) == _report_lines(reference[1])


AS_OF = "2024-03-06"
"""A day before the scenario's last two: their fixes are left out and counted."""


@pytest.fixture(scope="module")
def as_of_reference(inputs: Inputs, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The in-memory engine's output folder and report with ``--as-of`` :data:`AS_OF`."""
    out = tmp_path_factory.mktemp("memory_as_of")
    with _cli_in_process(_in_memory) as run:
        report = run([*inputs.args(out), "--as-of", AS_OF])
    return out, report


class TestEnginesCountTheFixesAfterAsOf:
    def test_reference_counts_them(self, inputs: Inputs, as_of_reference: tuple[Path, str]) -> None:
        """In memory, the valid fixes after --as-of's day (São Paulo) are said and counted."""
        fixes, _ = read_pings(inputs.pings)
        end = pd.Timestamp("2024-03-07", tz="America/Sao_Paulo")
        n_after = int((fixes["timestamp"] >= end).sum())
        summary = json.loads((as_of_reference[0] / "summary.json").read_text(encoding="utf-8"))
        assert n_after > 0 and summary["pings_after_as_of"] == n_after
        assert summary["pings_valid"] == len(fixes) - n_after
        assert f", {n_after} depois de --as-of (fora da análise);" in as_of_reference[1]

    @pytest.mark.parametrize(
        "engine",
        [["--jobs", "1"], ["--jobs", "2"], ["--engine", "dask", "--workers", "2"]],
        ids=["file-1", "file-2", "dask"],
    )
    def test_every_engine_writes_the_same_files(
        self,
        run_pontual: Any,
        inputs: Inputs,
        as_of_reference: tuple[Path, str],
        tmp_path: Path,
        engine: list[str],
    ) -> None:
        """The file engine (one or two jobs) and Dask with --as-of: the in-memory files, bytes
        for bytes (the count of fixes after --as-of in summary.json), and its report."""
        done = run_pontual(*inputs.args(tmp_path), "--as-of", AS_OF, *engine, timeout_s=600)
        assert done.returncode == 0, done.stderr
        _assert_same_files(tmp_path, as_of_reference[0])
        assert _report_lines(done.stdout) == _report_lines(as_of_reference[1])


def test_the_client_reads_only_the_declared_details(
    inputs: Inputs, reference: tuple[Path, str]
) -> None:
    """The map, and each bundled rulebook's proposals, made from findings of every kind with
    only ``maps.MAP_DETAILS`` / ``proposal_details`` kept: the same as with every detail (what
    a Dask client receives)."""
    from enforcement.proposals import proposal_details, propose_all
    from enforcement.rulebook import bundled_rulebooks
    from maps import MAP_DETAILS
    from maps.findings import findings_map
    from tracking.detectors.findings import read_findings_geojson, with_details

    found = read_findings_geojson(reference[0] / "findings.geojson")
    stands = gpd.read_file(inputs.stands)
    pages = [
        FOLIUM_ID.sub("_id", findings_map(stands, f, tiles=None).get_root().render())
        for f in (found, with_details(found, MAP_DETAILS))
    ]
    assert pages[0] == pages[1]
    books: dict[str, dict[str, Any]] = {}
    for (municipality, service), book in bundled_rulebooks().items():
        books.setdefault(municipality, {})[service] = book
    made = 0
    for by_service in books.values():
        keep = proposal_details(by_service)
        a, b = (
            propose_all(f, by_service, timezone="America/Sao_Paulo")
            for f in (found, with_details(found, keep))
        )
        assert a == b
        made += len(a.proposals)
    assert made > 0


@pytest.fixture(scope="module")
def history(reference: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An earlier ``proposals.json``: the reference's proposals, issued 30 days before and final
    (Porto Alegre's taxis count only final decisions for reincidence)."""
    import datetime as dt

    records = json.loads((reference[0] / "proposals.json").read_text(encoding="utf-8"))
    for k, r in enumerate(records):
        at = dt.datetime.fromisoformat(r["committed_at"]) - dt.timedelta(days=30)
        r |= {"committed_at": at.isoformat(), "status": "definitiva", "auto_number": f"A-{k}"}
    path = tmp_path_factory.mktemp("history") / "anteriores.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


class TestDaskProposals:
    FLOOR = (
        "[confidence_floor]\ndefault = 0.5\noperating_while_barred = 0.99\n"
        "unlicensed_stand_use = 0.9\n"
    )

    def test_history_and_review_by_vehicle_groups(
        self, inputs: Inputs, history: Path, tmp_path: Path
    ) -> None:
        """Proposals made by the Dask workers in one group per vehicle, with reincidence
        (``--confirmed``) and findings for review (confidence floor, repetition): the same
        ``proposals.json`` and ``summary.json`` as in memory; an illegal stand's vehicles fall
        in several groups."""
        import functools

        import pyarrow.parquet as pq

        import engines.distributed
        from engines.distributed import vehicle_group

        floor = tmp_path / "limiares.toml"
        floor.write_text(self.FLOOR, encoding="utf-8")
        extra = ["--confirmed", str(history), "--thresholds", str(floor)]
        small = functools.partial(engines.distributed.gather_on_workers, groups=1000)
        with _cli_in_process(_in_memory) as run, pytest.MonkeyPatch.context() as mp:
            want = run([*inputs.args(tmp_path / "local"), *extra])
            mp.setattr(engines.distributed, "gather_on_workers", small)
            got = run([*inputs.args(tmp_path / "dask"), *extra, "--engine", "dask"])
        _assert_same_files(tmp_path / "dask", tmp_path / "local")
        assert _report_lines(got) == _report_lines(want)

        proposals = json.loads((tmp_path / "local" / "proposals.json").read_text())
        assert any(p["reincidence_count"] > 0 for p in proposals)
        summary = json.loads((tmp_path / "local" / "summary.json").read_text())
        reasons = {r["reason"].split(" ")[0] for r in summary["findings_for_review"]["findings"]}
        assert {"confiança", "não"} <= reasons
        parts = sorted((tmp_path / "dask" / "partes" / "propostas").glob("*.parquet"))
        made = [pq.read_metadata(p).num_rows for p in parts]
        assert len(parts) > 2 and sum(made) == len(proposals) and sum(m > 0 for m in made) > 1
        review = sorted((tmp_path / "dask" / "partes" / "revisao").glob("*.parquet"))
        assert sum(pq.read_metadata(p).num_rows for p in review) == len(
            summary["findings_for_review"]["findings"]
        )
        places = json.loads((tmp_path / "local" / "findings.geojson").read_text())["features"]
        vehicles = [
            f["properties"]["details"]["vehicles"]
            for f in places
            if f["properties"]["kind"] == "illegal_stand_formation"
        ]
        assert any(len({vehicle_group(v, len(parts)) for v in vs}) > 1 for vs in vehicles)

    def test_services_and_no_findings_on_the_client(self, inputs: Inputs, tmp_path: Path) -> None:
        """Fleet services with their rulebooks (and one without), on a dataset: the workers'
        proposals equal ``propose_all`` over the local engine's findings, and the client
        receives no finding (its findings frame is empty, the summary's counts are the same)."""
        import pyarrow.parquet as pq

        from enforcement.proposals import (
            PROPOSAL_ORDER,
            proposal_summary,
            propose_all,
            write_proposal_texts,
            write_proposals_json,
        )
        from enforcement.rulebook import rulebooks_for
        from engines.dataset import analyze_dataset, write_dataset
        from engines.distributed import ProposalSpec, dask_client
        from engines.pipeline import REVIEW_ORDER, merged_texts, write_summary

        tz = "America/Sao_Paulo"
        fleet = read_fleet(inputs.fleet)
        service = {"G": "fretamento", "F": "fretamento", "R": "escolar"}
        fleet["service"] = [service.get(v, "taxi") for v in fleet["vehicle_id"]]
        books = rulebooks_for("4314902")
        options: dict[str, Any] = {
            "fleet": fleet,
            "boundary": BOUNDARY,
            "roads": build_road_graph(roads()),
            "params": AnalysisParams(timezone=tz),
        }
        dataset = tmp_path / "conjunto"
        write_dataset(inputs.pings, dataset, timezone=tz, n_buckets=3)
        local, _ = analyze_dataset(dataset, STANDS, **options)
        done = propose_all(local.findings, books, timezone=tz, fleet=fleet)
        want = local.summary | proposal_summary(done.proposals, done.uncovered, done.for_review)
        assert {p["service"] for p in done.proposals} == {"taxi", "fretamento"}
        assert "longer_route: sem regulamento de escolar" in done.uncovered

        spec = ProposalSpec(rulebooks=books, timezone=tz, fleet=fleet)
        with dask_client(workers=2) as client:
            result, _ = analyze_dataset(
                dataset,
                STANDS,
                client=client,
                parts=tmp_path / "partes",
                propose=spec,
                send_findings=False,
                **options,
            )
        assert result.findings.empty and not local.findings.empty
        merged = {name: tmp_path / name for name in ("want.json", "got.json", "a", "b")}
        write_proposals_json(done.proposals, merged["want.json"])
        texts = merged_texts(result.parts["proposals.json"], PROPOSAL_ORDER)
        write_proposal_texts(texts, merged["got.json"])
        assert merged["got.json"].read_bytes() == merged["want.json"].read_bytes()
        write_summary(want, merged["a"])
        review = merged_texts(result.parts["summary.json"], REVIEW_ORDER)
        write_summary(result.summary, merged["b"], review=review)
        assert merged["b"].read_bytes() == merged["a"].read_bytes()
        found = sum(pq.read_metadata(p).num_rows for p in result.parts["findings.geojson"])
        assert found == len(local.findings) == result.summary["findings"]
