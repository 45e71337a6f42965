"""Datasets written from the fixes stored in PostGIS (engines.dataset.write_dataset_from_db)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd
import pyarrow.parquet as pq
import pytest
from factories import migrated_database
from partition_scenario import (
    BOUNDARY,
    NOW,
    STANDS,
    assert_same,
    scenario_fleet,
    scenario_pings,
)
from sqlalchemy import Engine, text

from db.engine import make_engine
from db.tracking.store import copy_fixes
from engines.buckets import analyze_file
from engines.dataset import (
    DatasetError,
    analyze_dataset,
    read_manifest,
    write_dataset,
    write_dataset_from_db,
)
from engines.distributed import dask_client
from engines.pipeline import AnalysisParams
from tracking.validate import validate_pings

TZ = "America/Sao_Paulo"
ZONE = ZoneInfo(TZ)
TODAY = dt.datetime.now(ZONE).date()


def _stored_pings() -> pd.DataFrame:
    """The scenario's valid fixes, plus a driver and a tariff on some rows."""
    valid, rejected = validate_pings(scenario_pings())
    assert rejected.empty
    valid = valid.copy()
    valid.loc[valid.index[::7], "driver_id"] = "D-1"
    valid.loc[valid.index[::11], "tariff"] = 1
    return valid


def _open_day_pings() -> pd.DataFrame:
    """Fixes of vehicle H yesterday (closed) and today (still open), local time."""
    stamps = [
        dt.datetime.combine(TODAY - dt.timedelta(days=1), dt.time(12), tzinfo=ZONE),
        dt.datetime.combine(TODAY, dt.time(0, 0, 1), tzinfo=ZONE),
    ]
    frame = pd.DataFrame(
        {
            "vehicle_id": ["H", "H"],
            "timestamp": pd.to_datetime(stamps, utc=True),
            "lat": [-30.03, -30.031],
            "lon": [-51.2, -51.2],
            "row": [1, 2],
        }
    )
    valid, _ = validate_pings(frame)
    return valid


@pytest.fixture(scope="module")
def db(database_url: str) -> Iterator[Engine]:
    """A database of this module's own holding the scenario's fixes (committed)."""
    with migrated_database(database_url) as url:
        engine = make_engine(url)
        with engine.begin() as conn:
            copy_fixes(conn, _stored_pings(), source="scenario.csv")
        try:
            yield engine
        finally:
            engine.dispose()


def _scenario_days() -> list[dt.date]:
    return sorted(set(scenario_pings()["timestamp"].dt.tz_convert(TZ).dt.date))


def _kw(tmp_path: Path) -> dict[str, Any]:
    return {"fleet": scenario_fleet(tmp_path), "boundary": BOUNDARY, "params": AnalysisParams()}


def _rows(root: Path, manifest: dict[str, Any]) -> pd.DataFrame:
    tables = [pq.read_table(root / f["path"]).to_pandas() for f in manifest["files"]]
    return pd.concat(tables, ignore_index=True).sort_values("row", ignore_index=True)


class TestWrite:
    def test_layout_rows_and_manifest(self, db: Engine, tmp_path: Path) -> None:
        """Every stored fix once, in (local day, vehicle, time) order; the manifest says the db."""
        days = _scenario_days()
        out = tmp_path / "ds"
        manifest, span = write_dataset_from_db(
            db, out, timezone=TZ, n_buckets=3, last_day=days[-1], today=TODAY
        )
        assert manifest == read_manifest(out)
        source = manifest["source"]
        assert source["kind"] == "database" and "sha256" not in source
        assert (source["first_day"], source["last_day"]) == (days[0].isoformat(), span[1])
        stored = _stored_pings()
        assert manifest["rows"] == source["rows"] == len(stored)
        rows = _rows(out, manifest)
        assert rows["row"].tolist() == list(range(1, len(stored) + 1))
        local_day = rows["timestamp"].dt.tz_convert(TZ).dt.date
        order = pd.DataFrame({"d": local_day, "v": rows["vehicle_id"], "t": rows["timestamp"]})
        assert order.equals(order.sort_values(["d", "v", "t"], ignore_index=True))
        for entry in manifest["files"]:
            assert entry["path"] == f"day={entry['day']}/bucket={entry['bucket']}/part-0.parquet"
        assert {e["day"] for e in manifest["files"]} == {d.isoformat() for d in days}
        want = stored.sort_values(["vehicle_id", "timestamp"], ignore_index=True)
        got = rows.sort_values(["vehicle_id", "timestamp"], ignore_index=True)
        pd.testing.assert_series_equal(got["timestamp"], want["timestamp"], check_dtype=False)
        for col in ("lat", "lon"):
            assert got[col].tolist() == want[col].tolist()  # exact floats
        assert got["driver_id"].fillna("").tolist() == want["driver_id"].fillna("").tolist()
        assert got["tariff"].fillna(0).astype(int).tolist() == want["tariff"].fillna(0).tolist()

    def test_small_blocks_same_rows(
        self, db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Tiny stream blocks and buffers (rows cut across reads, many row groups): same rows."""
        import engines.dataset as ds

        last = _scenario_days()[-1]
        whole, _ = write_dataset_from_db(
            db, tmp_path / "a", timezone=TZ, n_buckets=3, last_day=last, today=TODAY
        )
        monkeypatch.setattr(ds, "DB_BLOCK_BYTES", 4096)
        monkeypatch.setattr(ds, "DB_BUFFER_ROWS", 50)
        small, _ = write_dataset_from_db(
            db, tmp_path / "b", timezone=TZ, n_buckets=3, last_day=last, today=TODAY
        )
        pd.testing.assert_frame_equal(_rows(tmp_path / "b", small), _rows(tmp_path / "a", whole))
        groups = [pq.ParquetFile(tmp_path / "b" / f["path"]).num_row_groups for f in small["files"]]
        assert max(groups) > 1

    def test_from_to_filters(self, db: Engine, tmp_path: Path) -> None:
        """--from/--to keep the local days between them, inclusive, numbered from 1."""
        days = _scenario_days()
        manifest, _ = write_dataset_from_db(
            db, tmp_path / "ds", timezone=TZ, first_day=days[1], last_day=days[2], today=TODAY
        )
        assert {e["day"] for e in manifest["files"]} == {days[1].isoformat(), days[2].isoformat()}
        rows = _rows(tmp_path / "ds", manifest)
        local = rows["timestamp"].dt.tz_convert(TZ).dt.date
        stored = _stored_pings()["timestamp"].dt.tz_convert(TZ).dt.date
        assert len(rows) == int(stored.between(days[1], days[2]).sum()) > 0
        assert set(local) == {days[1], days[2]} and rows["row"].iloc[0] == 1

    def test_open_day_and_append(self, database_url: str, tmp_path: Path) -> None:
        """Today's fixes are never written; append adds the days lacking, then nothing."""
        with migrated_database(database_url) as url:
            engine = make_engine(url)
            try:
                first = _stored_pings()
                old = first[
                    first["timestamp"] < pd.Timestamp(_scenario_days()[2].isoformat(), tz=TZ)
                ]
                with engine.begin() as conn:
                    copy_fixes(conn, old, source="a")
                out = tmp_path / "ds"
                last = _scenario_days()[1]
                m1, _ = write_dataset_from_db(
                    engine, out, timezone=TZ, append=True, last_day=last, today=TODAY
                )
                assert m1["source"]["last_day"] == last.isoformat()
                with engine.begin() as conn:
                    copy_fixes(conn, first, source="b")
                    copy_fixes(conn, _open_day_pings(), source="c")
                files_before = {e["path"]: e["sha256"] for e in m1["files"]}
                m2, span = write_dataset_from_db(engine, out, timezone=TZ, append=True, today=TODAY)
                yesterday = (TODAY - dt.timedelta(days=1)).isoformat()
                assert span == [_scenario_days()[2].isoformat(), yesterday]
                assert m2["source"]["last_day"] == yesterday
                assert m2["n_buckets"] == m1["n_buckets"]
                for entry in m2["files"]:
                    if entry["path"] in files_before:
                        assert entry["sha256"] == files_before[entry["path"]]
                rows = _rows(out, m2)
                assert rows["row"].tolist() == list(range(1, len(first) + 2))
                h = rows[rows["vehicle_id"] == "H"]["timestamp"].dt.tz_convert(TZ).dt.date
                assert h.tolist() == [TODAY - dt.timedelta(days=1)]  # today's fix not written
                assert m2["rows"] == len(first) + 1
                m3, span3 = write_dataset_from_db(
                    engine, out, timezone=TZ, append=True, today=TODAY
                )
                assert span3 == [] and m3 == m2 == read_manifest(out)
                whole, _ = write_dataset_from_db(
                    engine, tmp_path / "whole", timezone=TZ, today=TODAY, n_buckets=m2["n_buckets"]
                )
                assert _rows(tmp_path / "whole", whole).equals(rows)  # same numbering
            finally:
                engine.dispose()

    def test_late_fixes_rewrite_their_day(
        self,
        database_url: str,
        run_pontual: Any,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Fixes stored after their day was written: append rewrites from it, as a whole write."""
        import engines.dataset as ds

        days = _scenario_days()
        with migrated_database(database_url) as url:
            engine = make_engine(url)
            try:
                stored = _stored_pings()
                day = stored["timestamp"].dt.tz_convert(TZ).dt.date
                late = (day == days[1]) & (stored.index % 5 == 0)
                with engine.begin() as conn:
                    copy_fixes(conn, stored[~late], source="a")
                out = tmp_path / "ds"
                kw: dict[str, Any] = {"timezone": TZ, "append": True, "today": TODAY}
                m1, _ = write_dataset_from_db(engine, out, last_day=days[-1], **kw)
                with engine.begin() as conn:
                    copy_fixes(conn, stored[late], source="late")
                m0, span0 = write_dataset_from_db(engine, out, recheck_days=0, **kw)
                assert span0 == [] and m0 == m1  # no recount: the late fixes are not seen

                def boom(*_: Any, **__: Any) -> None:
                    raise OSError("disco cheio")

                monkeypatch.setattr(ds, "_write_manifest", boom)
                with pytest.raises(OSError, match="disco cheio"):
                    write_dataset_from_db(engine, out, last_day=days[-1], **kw)
                assert read_manifest(out) == m1  # crash: the old manifest and its files
                for entry in m1["files"]:
                    assert ds._sha256(out / entry["path"]) == entry["sha256"]
                monkeypatch.undo()

                done = run_pontual(
                    "dataset", "write", "--from-db", "--append", "--out", str(out),
                    "--to", days[-1].isoformat(), "--timezone", TZ, DATABASE_URL=str(url),
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                span = [days[1].isoformat(), days[-1].isoformat()]
                assert f"Regravados os dias {span[0]} a {span[1]}" in done.stdout
                m2 = read_manifest(out)
                assert m2["rows"] == len(stored)
                kept = [e for e in m1["files"] if e["day"] == days[0].isoformat()]
                assert kept and all(e in m2["files"] for e in kept)  # earlier days untouched
                for entry in m1["files"]:
                    if entry not in kept:
                        assert not (out / entry["path"]).exists()  # superseded: deleted
                assert all((out / e["path"]).exists() for e in m2["files"])
                whole, _ = write_dataset_from_db(
                    engine, tmp_path / "whole", timezone=TZ, today=TODAY, last_day=days[-1],
                    n_buckets=m2["n_buckets"],
                )  # fmt: skip
                pd.testing.assert_frame_equal(_rows(out, m2), _rows(tmp_path / "whole", whole))
                m3, span3 = write_dataset_from_db(engine, out, last_day=days[-1], **kw)
                assert span3 == [] and m3 == m2
            finally:
                engine.dispose()

    def test_crash_before_manifest_keeps_old(
        self, db: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An append that dies before its manifest leaves the old one valid and whole."""
        import engines.dataset as ds

        days = _scenario_days()
        out = tmp_path / "ds"
        m1, _ = write_dataset_from_db(db, out, timezone=TZ, last_day=days[1], today=TODAY)

        def boom(*_: Any, **__: Any) -> None:
            raise OSError("disco cheio")

        monkeypatch.setattr(ds, "_write_manifest", boom)
        with pytest.raises(OSError, match="disco cheio"):
            write_dataset_from_db(db, out, timezone=TZ, append=True, last_day=days[-1], today=TODAY)
        assert read_manifest(out) == m1
        assert (out / f"day={days[-1].isoformat()}").is_dir()  # new files there, not listed
        monkeypatch.undo()
        m2, _ = write_dataset_from_db(
            db, out, timezone=TZ, append=True, last_day=days[-1], today=TODAY
        )
        assert m2["rows"] == len(_stored_pings())

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"first_day": dt.date(2024, 3, 6), "last_day": dt.date(2024, 3, 5)}, "é depois de"),
            ({"last_day": TODAY}, "último dia fechado"),
            ({"first_day": dt.date(2020, 1, 1), "last_day": dt.date(2020, 1, 2)}, "nenhum ping"),
            ({"n_buckets": 0}, "inteiro positivo"),
        ],
    )
    def test_bad_arguments(
        self, db: Engine, tmp_path: Path, kwargs: dict[str, Any], message: str
    ) -> None:
        """Reversed days, an open --to, an empty range, a bad count: named pt-BR errors."""
        with pytest.raises(DatasetError, match=message):
            write_dataset_from_db(db, tmp_path / "ds", timezone=TZ, today=TODAY, **kwargs)
        assert not (tmp_path / "ds").exists()

    def test_append_refusals(self, db: Engine, tmp_path: Path) -> None:
        """Append refuses a file dataset, another municipality, zone or bucket count, --from."""
        days = _scenario_days()
        csv = _fixes_csv(tmp_path / "p.csv")
        write_dataset(csv, tmp_path / "file", timezone=TZ, n_buckets=2)
        with pytest.raises(DatasetError, match="gravado de um arquivo"):
            write_dataset_from_db(db, tmp_path / "file", timezone=TZ, append=True, today=TODAY)
        out = tmp_path / "ds"
        write_dataset_from_db(db, out, timezone=TZ, n_buckets=2, last_day=days[0], today=TODAY)
        cases = [
            ({"municipality": "4314902"}, "do município"),
            ({"timezone": "America/Manaus"}, "são de America/Sao_Paulo"),
            ({"n_buckets": 3}, "tem 2 grupos"),
            ({"first_day": days[2]}, "--from não vale com --append"),
        ]
        for kwargs, message in cases:
            call = {"timezone": TZ, "append": True, "today": TODAY} | kwargs
            with pytest.raises(DatasetError, match=message):
                write_dataset_from_db(db, out, **call)

    def test_municipality_filter(self, database_url: str, tmp_path: Path) -> None:
        """--municipality leaves out vehicles registered elsewhere, keeps the unregistered."""
        days = _scenario_days()
        with migrated_database(database_url) as url:
            engine = make_engine(url)
            try:
                with engine.begin() as conn:
                    copy_fixes(conn, _stored_pings(), source="a")
                    conn.execute(
                        text(
                            "INSERT INTO municipalities (code, name, uf) VALUES "
                            "('4314902', 'Porto Alegre', 'RS'), ('1100205', 'Porto Velho', 'RO')"
                        )
                    )
                    conn.execute(
                        text(
                            "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) VALUES "
                            "('v1', 'v1', '4314902'), ('v2', 'v2', '1100205')"
                        )
                    )
                manifest, _ = write_dataset_from_db(
                    engine,
                    tmp_path / "ds",
                    timezone=TZ,
                    municipality="4314902",
                    last_day=days[-1],
                    today=TODAY,
                )
            finally:
                engine.dispose()
        vehicles = set(_rows(tmp_path / "ds", manifest)["vehicle_id"])
        assert "v1" in vehicles and "v2" not in vehicles and "N" in vehicles
        assert manifest["source"]["municipality"] == "4314902"


class TestAnalyze:
    @pytest.fixture(scope="class")
    def dataset(self, db: Engine, tmp_path_factory: pytest.TempPathFactory) -> Path:
        out = tmp_path_factory.mktemp("dbds") / "ds"
        write_dataset_from_db(
            db, out, timezone=TZ, n_buckets=3, last_day=_scenario_days()[-1], today=TODAY
        )
        return out

    def test_equals_file_engine(self, dataset: Path, tmp_path: Path) -> None:
        """The db dataset analysed bucket by bucket equals a CSV of the same fixes."""
        kw = _kw(tmp_path)
        want, _ = analyze_file(_fixes_csv(tmp_path / "fixes.csv"), STANDS, now=NOW, **kw)
        got, _ = analyze_dataset(dataset, STANDS, now=NOW, jobs=2, **kw)
        assert_same(got, want, positions=False)
        assert not got.findings.empty and got.rejected.empty

    def test_dask_equals_local(self, dataset: Path, tmp_path: Path) -> None:
        """Dask workers (processes) on the db dataset: the local engine's result."""
        kw = _kw(tmp_path)
        local, _ = analyze_dataset(dataset, STANDS, now=NOW, **kw)
        with dask_client(workers=2, processes=True) as client:
            got, _ = analyze_dataset(dataset, STANDS, now=NOW, client=client, **kw)
        assert_same(got, local, positions=False)
        pd.testing.assert_frame_equal(got.rejected, local.rejected)


def _fixes_csv(path: Path) -> Path:
    """Write the stored fixes as a contract CSV (UTC timestamps with Z, to the microsecond).

    In the db dataset's row order (local day, ``vehicle_id``, time), so that the row numbers the
    findings' evidence cites are the same; in another order only those numbers would differ.
    """
    stored = _stored_pings()
    stored = (
        stored.assign(_day=stored["timestamp"].dt.tz_convert(TZ).dt.date)
        .sort_values(["_day", "vehicle_id", "timestamp"], ignore_index=True)
        .drop(columns="_day")
    )
    stamps = stored["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    columns = [c for c in stored.columns if c not in ("row", "speed_flag")]
    stored[columns].assign(timestamp=stamps).to_csv(path, index=False)
    return path


def _inputs(folder: Path) -> list[str]:
    STANDS.to_file(folder / "stands.geojson", driver="GeoJSON")
    scenario_fleet(folder)
    return [
        "--stands", str(folder / "stands.geojson"), "--fleet", str(folder / "frota.csv"),
        "--tiles", "none", "--timezone", TZ,
    ]  # fmt: skip


class TestCommand:
    def test_db_dataset_analyze_equals_csv(
        self, run_pontual: Any, db: Engine, tmp_path: Path
    ) -> None:
        """``dataset write --from-db`` then ``analyze`` on it: the contract files of ``analyze``
        on a CSV of the same fixes, byte for byte."""
        url = db.url.render_as_string(hide_password=False)
        common = _inputs(tmp_path)
        csv = _fixes_csv(tmp_path / "fixes.csv")
        stored = _stored_pings()
        last = _scenario_days()[-1].isoformat()
        written = run_pontual(
            "dataset", "write", "--from-db", "--out", str(tmp_path / "ds"), "--to", last,
            "--timezone", TZ, DATABASE_URL=url,
        )  # fmt: skip
        assert written.returncode == 0, written.stderr
        assert f"{len(stored)} pings do banco gravados" in written.stdout
        by_db = run_pontual(
            "analyze", "--pings", str(tmp_path / "ds"), "--out", str(tmp_path / "a"), *common
        )
        assert by_db.returncode == 0, by_db.stderr
        by_csv = run_pontual("analyze", "--pings", str(csv), "--out", str(tmp_path / "b"), *common)
        assert by_csv.returncode == 0, by_csv.stderr
        names = ["findings.geojson", "stand_visits.csv", "trips.csv", "occupancy.csv"]
        names += ["rejected.csv", "summary.json"]
        for name in names:
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), (
                name
            )
        findings = json.loads((tmp_path / "a" / "findings.geojson").read_text())
        assert len(findings["features"]) > 5
        again = run_pontual(
            "dataset", "write", "--from-db", "--append", "--out", str(tmp_path / "ds"),
            "--to", last, "--timezone", TZ, DATABASE_URL=url,
        )  # fmt: skip
        assert again.returncode == 0 and "Nenhum dia fechado novo" in again.stdout

    def test_bad_input_without_traceback(
        self, run_pontual: Any, db: Engine, tmp_path: Path
    ) -> None:
        """No database, unknown municipality, --from after --to, --append on a file dataset."""
        url = db.url.render_as_string(hide_password=False)
        csv = _fixes_csv(tmp_path / "p.csv")
        assert (
            run_pontual(
                "dataset",
                "write",
                "--pings",
                str(csv),
                "--out",
                str(tmp_path / "f"),
                DATABASE_URL=url,
            ).returncode
            == 0
        )
        base = ["dataset", "write", "--from-db"]
        cases = [
            (
                [*base, "--out", str(tmp_path / "o")],
                {"DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/nada"},
                "erro:",
            ),
            ([*base, "--out", str(tmp_path / "o"), "--municipality", "9999999"], {}, "9999999"),
            (
                [*base, "--out", str(tmp_path / "o"), "--from", "2024-03-06", "--to", "2024-03-05"],
                {},
                "é depois de",
            ),
            ([*base, "--out", str(tmp_path / "o"), "--from", "06/03/2024"], {}, "AAAA-MM-DD"),
            ([*base, "--append", "--out", str(tmp_path / "f")], {}, "gravado de um arquivo"),
            (["dataset", "write", "--out", str(tmp_path / "o")], {}, "--from-db"),
        ]
        for args, env, message in cases:
            done = run_pontual(*args, **({"DATABASE_URL": url} | env))
            assert done.returncode != 0, args
            assert message in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr
        assert not (tmp_path / "o").exists()
