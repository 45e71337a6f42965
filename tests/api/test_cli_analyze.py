"""`pontual analyze` through the installed console script: contract files, clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tracking import frames as fr

DATA = Path(__file__).resolve().parents[2] / "data"

STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-51.2287, -30.0277]},
            "properties": {"stand_id": "P1", "name": "Praça", "radius_m": 40, "capacity": 2},
        }
    ],
}


def _write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    rows = [
        # free at the stand for 4 min, meter on inside, then away
        *[("T1", f"2024-03-04T09:{m:02d}:00-03:00", -30.0277, -51.2287, "free") for m in range(5)],
        ("T1", "2024-03-04T09:05:00-03:00", -30.0278, -51.2287, "occupied"),
        ("T1", "2024-03-04T09:06:00-03:00", -30.0200, -51.2200, "occupied"),
        ("T1", "2024-03-04T09:07:00-03:00", -30.0150, -51.2150, "occupied"),
        ("", "2024-03-04T09:07:00-03:00", -30.0150, -51.2150, "occupied"),  # empty vehicle
        ("T2", "2024-03-04T09:07:00", -30.0150, -51.2150, "free"),  # naive timestamp
        ("T2", "2024-03-04T09:08:00-03:00", 0.0, 0.0, "free"),  # null island
        ("T2", "2024-03-04T09:09:00-03:00", -30.01, -51.21, "busy"),  # unknown meter
    ]
    pings = tmp_path / "pings.csv"
    pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
        pings, index=False
    )
    stands = tmp_path / "stands.geojson"
    stands.write_text(json.dumps(STANDS), encoding="utf-8")
    return pings, stands


class TestAnalyze:
    def test_writes_the_contract_files(self, run_pontual, tmp_path):
        """A small run writes the five contract files with one boarded visit and 4 rejected rows."""
        pings, stands = _write_inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        # the process leaves without the interpreter's teardown: its last line still comes out
        assert done.stdout.strip().splitlines()[-1].startswith(f"Saídas em {out}")
        visits = pd.read_csv(out / "stand_visits.csv", dtype=str)
        assert tuple(visits.columns) == fr.VISIT_COLUMNS
        assert visits[["vehicle_id", "stand_id", "boarded"]].values.tolist() == [
            ["T1", "P1", "True"]
        ]
        trips = pd.read_csv(out / "trips.csv", dtype=str)
        assert trips["pickup_stand_id"].tolist() == ["P1"]
        rejected = pd.read_csv(out / "rejected.csv", dtype=str, keep_default_na=False)
        assert rejected["row"].tolist() == ["9", "10", "11", "12"]
        assert rejected["reason"].tolist() == [
            "empty_vehicle_id",
            "naive_timestamp",
            "null_island",
            "unknown_meter",
        ]
        assert rejected.loc[3, "meter"] == "busy"  # original values kept
        summary = json.loads((out / "summary.json").read_text())
        assert summary["pings_valid"] == 8 and summary["boardings"] == 1

    def test_speed_beyond_the_physical_bound_is_rejected(self, run_pontual, tmp_path):
        """speed_kmh of 1e9 or 400.5 is ``invalid_speed`` in rejected.csv; 400 is kept."""
        _, stands = _write_inputs(tmp_path)
        pings = tmp_path / "speeds.csv"
        pings.write_text(
            "vehicle_id,timestamp,lat,lon,speed_kmh\n"
            "T1,2024-03-04T09:00:00-03:00,-30.0277,-51.2287,400\n"
            "T1,2024-03-04T09:01:00-03:00,-30.0277,-51.2287,400.5\n"
            "T1,2024-03-04T09:02:00-03:00,-30.0277,-51.2287,1e9\n",
            encoding="utf-8",
        )
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        rejected = pd.read_csv(out / "rejected.csv", dtype=str, keep_default_na=False)
        assert rejected[["row", "reason", "speed_kmh"]].values.tolist() == [
            ["2", "invalid_speed", "400.5"],
            ["3", "invalid_speed", "1e9"],
        ]
        assert json.loads((out / "summary.json").read_text())["pings_valid"] == 1

    def test_missing_column_is_one_clear_message(self, run_pontual, tmp_path):
        """A pings file without 'lat' fails naming the column, with no traceback."""
        pings, stands = _write_inputs(tmp_path)
        pd.read_csv(pings).drop(columns=["lat"]).to_csv(pings, index=False)
        done = run_pontual(
            "analyze",
            "--pings",
            str(pings),
            "--stands",
            str(stands),
            "--out",
            str(tmp_path / "out"),
        )
        assert done.returncode == 1
        assert "Traceback" not in done.stderr
        assert "lat" in done.stderr and done.stderr.startswith("erro: ")

    def test_missing_file(self, run_pontual, tmp_path):
        """A stands file that does not exist is a clear error."""
        pings, _ = _write_inputs(tmp_path)
        done = run_pontual(
            "analyze",
            "--pings",
            str(pings),
            "--stands",
            str(tmp_path / "nope.geojson"),
            "--out",
            str(tmp_path / "out"),
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "nope.geojson" in done.stderr

    def test_porto_format_detected(self, run_pontual, tmp_path):
        """The Porto ECML/PKDD CSV is recognised and replayed against point stands with a radius."""
        trips = tmp_path / "porto.csv"
        pd.read_csv(DATA / "porto/derived/trips_combined.csv", nrows=40).to_csv(trips, index=False)
        stands = pd.read_csv(DATA / "porto/derived/taxi_stands.csv")
        fc = {
            "type": "FeatureCollection",
            "features": [
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [r.Longitude, r.Latitude]},
                    "properties": {"stand_id": str(r.ID), "name": r.Descricao},
                }
                for r in stands.itertuples()
            ],
        }
        layer = tmp_path / "porto_stands.geojson"
        layer.write_text(json.dumps(fc), encoding="utf-8")
        out = tmp_path / "out"
        done = run_pontual(
            "analyze",
            "--pings",
            str(trips),
            "--stands",
            str(layer),
            "--stand-radius-m",
            "100",
            "--out",
            str(out),
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["trips"] >= 35
        assert summary["findings_by_kind"].get("tracking_gap", 0) == 0  # records, not gaps


class TestAnalyzeDetectors:
    def test_findings_and_map_written(self, run_pontual, tmp_path):
        """findings.geojson is a FeatureCollection with the contract's properties; map.html is
        self-contained (no CDN)."""
        pings, stands = _write_inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        fc = json.loads((out / "findings.geojson").read_text())
        assert fc["type"] == "FeatureCollection"
        for feature in fc["features"]:
            assert set(feature["properties"]) == {
                "finding_id",
                "kind",
                "vehicle_id",
                "stand_id",
                "started_at",
                "ended_at",
                "confidence",
                "details",
            }
        html = (out / "map.html").read_text(encoding="utf-8")
        assert "L.map(" in html and "cdn." not in html

    def test_outside_municipality_with_bundled_boundary(self, run_pontual, tmp_path):
        """--municipality 4314902 brings Porto Alegre's boundary: a pickup in Canoas is outside
        it."""
        rows = [
            ("X1", f"2024-03-04T09:{m:02d}:00-03:00", -29.91 + m * 0.001, -51.18, "occupied")
            for m in range(6)
        ]
        pings, stands = _write_inputs(tmp_path)
        pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
            pings, index=False
        )
        out = tmp_path / "out"
        done = run_pontual(
            "analyze",
            "--pings",
            str(pings),
            "--stands",
            str(stands),
            "--municipality",
            "4314902",
            "--out",
            str(out),
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["findings_by_kind"].get("outside_municipality") == 1
        assert "outside_municipality" not in summary["detectors_skipped"]

    def test_proposals_with_reincidence(self, run_pontual, tmp_path):
        """--municipality 4314548 writes proposals.json by Pinto Bandeira's law; an earlier
        confirmed infraction given with --confirmed makes the next one a reincidence, fined."""
        rows = [
            ("X1", f"2024-03-04T09:{m:02d}:00-03:00", -29.30 + m * 0.001, -51.70, meter)
            for m, meter in enumerate(["free"] + ["occupied"] * 6)
        ]
        pings, stands = _write_inputs(tmp_path)
        pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
            pings, index=False
        )
        args = ["analyze", "--pings", str(pings), "--stands", str(stands)]
        args += ["--municipality", "4314548"]
        done = run_pontual(*args, "--out", str(tmp_path / "a"))
        assert done.returncode == 0, done.stderr
        (first,) = json.loads((tmp_path / "a" / "proposals.json").read_text())
        required = {
            "proposal_id", "finding_ids", "kind", "vehicle_id", "municipality", "article",
            "inciso", "paragraph", "provision", "excerpt", "gravity", "penalty", "measure",
            "pontuacao", "fine", "reincidence_count", "status", "deadlines",
        }  # fmt: skip
        assert required <= set(first)
        assert (first["kind"], first["article"], first["inciso"]) == (
            "outside_municipality",
            "25",
            "X",
        )
        assert (first["gravity"], first["reincidence_count"], first["fine"]) == ("grave", 0, None)
        assert first["status"] == "proposta" and first["municipality"] == "4314548"
        summary = json.loads((tmp_path / "a" / "summary.json").read_text())
        assert summary["proposals"] == 1

        earlier = dict(first, status="confirmada", committed_at="2023-12-01T12:00:00Z")
        history = tmp_path / "anteriores.json"
        history.write_text(json.dumps([earlier]), encoding="utf-8")
        done = run_pontual(*args, "--confirmed", str(history), "--out", str(tmp_path / "b"))
        assert done.returncode == 0, done.stderr
        (second,) = json.loads((tmp_path / "b" / "proposals.json").read_text())
        assert second["reincidence_count"] == 1
        assert second["fine"] == {"amount": 1015.0, "unit": "BRL"}

    def test_law_limits_of_the_municipality(self, run_pontual, tmp_path):
        """With --municipality 4314548 a 2015 vehicle in service in 2024 is over Pinto Bandeira's
        5 years (art. 10) and proposed under it; --thresholds can raise the limit."""
        pings, stands = _write_inputs(tmp_path)
        fleet = tmp_path / "fleet.csv"
        fleet.write_text("vehicle_id,year\nT1,2015\n", encoding="utf-8")
        args = ["analyze", "--pings", str(pings), "--stands", str(stands), "--fleet", str(fleet)]
        args += ["--municipality", "4314548", "--kinds", "operating_while_barred"]
        done = run_pontual(*args, "--out", str(tmp_path / "a"))
        assert done.returncode == 0, done.stderr
        found = json.loads((tmp_path / "a" / "findings.geojson").read_text())["features"]
        assert [f["properties"]["details"]["reason"] for f in found] == ["vehicle_over_age"]
        (proposal,) = json.loads((tmp_path / "a" / "proposals.json").read_text())
        assert proposal["provision"] == "art. 10"
        assert proposal["measure"].startswith("apreensão da Autorização de Tráfego")
        limits = tmp_path / "limits.toml"
        limits.write_text("[operating_while_barred]\nmax_vehicle_age_years = 10\n", "utf-8")
        done = run_pontual(*args, "--thresholds", str(limits), "--out", str(tmp_path / "b"))
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / "b" / "findings.geojson").read_text())["features"] == []

    def test_municipality_without_rulebook(self, run_pontual, tmp_path):
        """A code without a rulebook still analyses, says so, and writes no proposals.json."""
        pings, stands = _write_inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands),
            "--municipality", "3550308", "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "nenhum regulamento configurado" in done.stdout
        assert not (out / "proposals.json").exists()

    def test_bad_thresholds_file(self, run_pontual, tmp_path):
        """A thresholds file naming an unknown threshold fails with one clear message."""
        pings, stands = _write_inputs(tmp_path)
        conf = tmp_path / "limiares.toml"
        conf.write_text("[tracking_gap]\nmax_gap = 600\n", encoding="utf-8")
        done = run_pontual(
            "analyze",
            "--pings",
            str(pings),
            "--stands",
            str(stands),
            "--thresholds",
            str(conf),
            "--out",
            str(tmp_path / "out"),
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "max_gap" in done.stderr


class TestAnalyzeKindsAndJobs:
    @pytest.mark.parametrize("name", ["pings.csv", "pings.parquet"])
    def test_bytes_that_are_not_utf8_reject_their_row(self, run_pontual, tmp_path, name):
        """A Latin-1 byte in a vehicle id (CSV, or a Parquet text column) rejects that row as
        ``invalid_text``; the other rows are analysed (no traceback, no refused file)."""
        _, stands = _write_inputs(tmp_path)
        ids = [b"T1", b"T\xe91", b"T1"]
        times = [f"2024-03-04T09:0{m}:00-03:00" for m in range(3)]
        pings = tmp_path / name
        if name.endswith(".csv"):
            lines = [b"vehicle_id,timestamp,lat,lon,meter"]
            for vehicle, at in zip(ids, times, strict=True):
                lines.append(vehicle + f",{at},-30.0277,-51.2287,free".encode())
            pings.write_bytes(b"\n".join(lines) + b"\n")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = {"vehicle_id": pa.array(ids, pa.binary()).view(pa.string())}
            table |= {"timestamp": times, "lat": [-30.0277] * 3, "lon": [-51.2287] * 3}
            pq.write_table(pa.table(table), pings)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out)
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        rejected = pd.read_csv(out / "rejected.csv", dtype=str)
        assert rejected[["row", "reason", "vehicle_id"]].values.tolist() == [
            ["2", "invalid_text", "T\ufffd1"]
        ]
        assert json.loads((out / "summary.json").read_text())["pings_valid"] == 2

    def test_a_licence_for_a_stand_the_stands_file_lacks(self, run_pontual, tmp_path):
        """The fleet names stand "P01", the stands file "P1": T1's boarding at P1 is not
        accused (its licence may be that stand's), and the run says why."""
        pings, stands = _write_inputs(tmp_path)
        fleet = tmp_path / "fleet.csv"
        out, licensed = {}, {}
        for licence in ("P1", "P01"):
            fleet.write_text(
                f"vehicle_id,plate,accessible,stands,status\nT1,A,false,{licence},active\n"
            )
            fleet_out = tmp_path / f"out-{licence}"
            out[licence] = run_pontual(
                "analyze", "--pings", str(pings), "--stands", str(stands), "--fleet", str(fleet),
                "--municipality", "4314902", "--out", str(fleet_out),
            )  # fmt: skip
            assert out[licence].returncode == 0, out[licence].stderr
            found = json.loads((fleet_out / "findings.geojson").read_text())["features"]
            kinds = [f["properties"]["kind"] for f in found]
            assert "unlicensed_stand_use" not in kinds, licence
            visits = pd.read_csv(fleet_out / "stand_visits.csv", dtype=str, keep_default_na=False)
            licensed[licence] = set(visits.loc[visits["vehicle_id"] == "T1", "licensed"])
        # at P1, T1 is licensed by "P1", and neither licensed nor an intruder by "P01"
        assert licensed == {"P1": {"True"}, "P01": {""}}
        assert "aviso: --fleet" not in out["P1"].stdout
        assert (
            "aviso: --fleet: 1 prefixo(s) com licença para 1 ponto(s) que não está(ão) em "
            "--stands (T1 → P01)"
        ) in out["P01"].stdout

    def test_vehicles_the_fleet_lacks_are_named(self, run_pontual, tmp_path):
        """The fleet codes the prefixo "T01", the fixes "T1": the run says the fleet's rules
        skip T1 (its only valid fixes' vehicle) and that T01 looks written otherwise, and
        nothing is said when the codes match."""
        pings, stands = _write_inputs(tmp_path)
        fleet = tmp_path / "fleet.csv"
        for code, expected in (("T01", True), ("T1", False)):
            fleet.write_text(f"vehicle_id,plate,accessible,stands,status\n{code},A,,P1,active\n")
            done = run_pontual(
                "analyze", "--pings", str(pings), "--stands", str(stands), "--fleet", str(fleet),
                "--out", str(tmp_path / f"out-{code}"),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            note = (
                "aviso: --fleet: 1 de 1 prefixo(s) das posições não estão na frota (T1): as regras "
                "que leem a frota (licença de ponto, situação, documentos, táxi acessível na "
                "fila) não os julgam; 1 prefixo(s) da frota aparece(m) escrito(s) de outro modo "
                "nas posições (T01): a inatividade dele(s) não é julgada"
            )
            assert (note in done.stdout) is expected, done.stdout

    def test_illegal_stand_at_an_official_stand_the_file_lacks(self, run_pontual, tmp_path):
        """Taxis wait at Porto Alegre's official stand 2 (bundled open data), which the stands
        file lacks: the illegal stand found there is named in a warning; with stand 2 in the
        file, nothing is found and nothing said."""
        lat, lon = -30.0576550117, -51.2225549119  # stand 2, SALDANHA MARINHO
        rows = [  # each waits 19 min, then boards a passenger there
            (
                v,
                f"2024-03-04T10:{m:02d}:00-03:00",
                lat + k * 1e-5,
                lon,
                "free" if m < 20 else "occupied",
            )
            for k, v in enumerate(("A1", "A2"))
            for m in range(0, 21)
        ]
        pings = tmp_path / "pings.csv"
        pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
            pings, index=False
        )
        limits = tmp_path / "limiares.toml"
        limits.write_text("[illegal_stand_formation]\nmin_vehicles = 2\nmin_days = 1\n")
        stand_2 = {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [lon, lat]},
            "properties": {"stand_id": "2", "radius_m": 30},
        }
        said = {}
        for name, features in (("sem", STANDS["features"]), ("com", [stand_2])):
            stands = tmp_path / f"stands-{name}.geojson"
            stands.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
            out = tmp_path / f"out-{name}"
            done = run_pontual(
                "analyze", "--pings", str(pings), "--stands", str(stands), "--out", str(out),
                "--municipality", "4314902", "--thresholds", str(limits),
                "--kinds", "illegal_stand_formation", "--tiles", "none",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            found = json.loads((out / "findings.geojson").read_text())["features"]
            said[name] = (len(found), done.stdout)
        note = (
            "aviso: formação de ponto irregular: 1 achado(s) a menos de 50 m de ponto(s) de "
            "táxi oficiais (dados abertos incluídos) que não está(ão) em --stands (2)"
        )
        assert said["sem"][0] == 1 and note in said["sem"][1]
        assert said["com"][0] == 0 and "aviso: formação" not in said["com"][1]

    def test_waiting_in_an_allowed_place_is_no_illegal_stand(self, run_pontual, tmp_path):
        """Two taxis wait, free, 19 min at a spot outside every stand and board there: an
        illegal stand; with the spot in --allowed-places (PB art. 20 VII: "áreas de
        estacionamento permitido"), nothing — in one process, in two, and from a dataset."""
        lat, lon = -30.0400, -51.2100
        rows = [  # each waits 19 min, then boards a passenger there
            (
                v,
                f"2024-03-04T10:{m:02d}:00-03:00",
                lat + k * 1e-5,
                lon,
                "free" if m < 20 else "occupied",
            )
            for k, v in enumerate(("A1", "A2"))
            for m in range(0, 21)
        ]
        pings = tmp_path / "pings.csv"
        pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
            pings, index=False
        )
        dataset = tmp_path / "conjunto"
        done = run_pontual("dataset", "write", "--pings", str(pings), "--out", str(dataset))
        assert done.returncode == 0, done.stderr
        stands = tmp_path / "stands.geojson"
        stands.write_text(json.dumps(STANDS), encoding="utf-8")
        limits = tmp_path / "limiares.toml"
        limits.write_text("[illegal_stand_formation]\nmin_vehicles = 2\nmin_days = 1\n")
        allowed = tmp_path / "permitidas.geojson"
        place = {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [lon, lat]},
            "properties": {"stand_id": "E1", "name": "Estacionamento", "radius_m": 20},
        }
        allowed.write_text(json.dumps({"type": "FeatureCollection", "features": [place]}))
        common = ["--stands", str(stands), "--thresholds", str(limits), "--tiles", "none"]
        found = {}
        for name, extra in (
            ("sem", ["--pings", str(pings)]),
            ("com", ["--pings", str(pings), "--allowed-places", str(allowed), "--jobs", "1"]),
            ("com-2", ["--pings", str(pings), "--allowed-places", str(allowed), "--jobs", "2"]),
            ("conjunto", ["--pings", str(dataset), "--allowed-places", str(allowed)]),
        ):
            out = tmp_path / f"out-{name}"
            done = run_pontual("analyze", *extra, *common, "--out", str(out))
            assert done.returncode == 0, done.stderr
            features = json.loads((out / "findings.geojson").read_text())["features"]
            found[name] = [f["properties"]["kind"] for f in features]
        assert found == {
            "sem": ["illegal_stand_formation"], "com": [], "com-2": [], "conjunto": []
        }  # fmt: skip

    def test_a_bad_allowed_places_file_is_named(self, run_pontual, tmp_path):
        """A points file without a radius names --allowed-places and --stand-radius-m."""
        pings, stands = _write_inputs(tmp_path)
        allowed = tmp_path / "permitidas.geojson"
        point = {"type": "Point", "coordinates": [-51.21, -30.04]}
        feature = {"type": "Feature", "geometry": point, "properties": {"stand_id": "E1"}}
        allowed.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands),
            "--allowed-places", str(allowed), "--out", str(tmp_path / "o"),
        )  # fmt: skip
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "--allowed-places" in done.stderr and "--stand-radius-m" in done.stderr

    def test_kinds_none_is_the_tracking_core(self, run_pontual, tmp_path):
        """--kinds nenhum: visits, trips, occupancy written; no detector runs or is skipped."""
        pings, stands = _write_inputs(tmp_path)
        out = tmp_path / "out"
        args = ["--pings", str(pings), "--stands", str(stands), "--out", str(out)]
        done = run_pontual("analyze", *args, "--kinds", "nenhum")
        assert done.returncode == 0, done.stderr
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert summary["visits"] == 1 and summary["findings"] == 0
        assert summary["detectors_skipped"] == {}
        assert json.loads((out / "findings.geojson").read_text(encoding="utf-8"))["features"] == []

    def test_unknown_kind_is_named(self, run_pontual, tmp_path):
        """An unknown kind is a usage error naming it and listing the known ones."""
        pings, stands = _write_inputs(tmp_path)
        args = ["--pings", str(pings), "--stands", str(stands), "--out", str(tmp_path / "o")]
        done = run_pontual("analyze", *args, "--kinds", "queue_jump,furar_sinal")
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "furar_sinal" in done.stderr and "tracking_gap" in done.stderr

    def test_two_jobs_write_the_same_files(self, run_pontual, tmp_path):
        """--jobs 2 (buckets in two processes, the map drawn in a third) and the default (the
        cores available) write the files --jobs 1 writes; the map's only differences are folium's
        random element ids."""
        pings, stands = _write_inputs(tmp_path)
        runs = {"1": ["--jobs", "1"], "2": ["--jobs", "2"], "default": []}
        for name, jobs in runs.items():
            args = ["--pings", str(pings), "--stands", str(stands), "--out", str(tmp_path / name)]
            done = run_pontual("analyze", *args, *jobs, "--tiles", "none")
            assert done.returncode == 0, done.stderr
        for other in ("2", "default"):
            for name in ("findings.geojson", "stand_visits.csv", "trips.csv", "rejected.csv"):
                assert (tmp_path / "1" / name).read_bytes() == (
                    tmp_path / other / name
                ).read_bytes()
        pages = [
            re.sub(r"_[0-9a-f]{32}\b", "_id", (tmp_path / name / "map.html").read_text())
            for name in runs
        ]
        assert pages[0] == pages[1] == pages[2] and "pontual_layers" in pages[0]


class TestAnalyzeDaskEngine:
    def test_dask_engine_writes_the_local_files(self, run_pontual, tmp_path):
        """--engine dask (a local cluster, one worker process) writes the local engine's contract
        files, on 60 real Porto trips of many taxis."""
        trips = tmp_path / "porto.csv"
        pd.read_csv(DATA / "porto/derived/trips_combined.csv", nrows=300).to_csv(trips, index=False)
        stands = pd.read_csv(DATA / "porto/derived/taxi_stands.csv")
        fc = {
            "type": "FeatureCollection",
            "features": [
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [r.Longitude, r.Latitude]},
                    "properties": {"stand_id": str(r.ID), "name": r.Descricao},
                }
                for r in stands.itertuples()
            ],
        }
        layer = tmp_path / "porto_stands.geojson"
        layer.write_text(json.dumps(fc), encoding="utf-8")
        common = ["--pings", str(trips), "--stands", str(layer), "--stand-radius-m", "100"]
        common += ["--tiles", "none", "--timezone", "Europe/Lisbon"]
        local = run_pontual("analyze", *common, "--out", str(tmp_path / "local"))
        assert local.returncode == 0, local.stderr
        dask = run_pontual(
            "analyze",
            *common,
            "--out",
            str(tmp_path / "dask"),
            "--engine",
            "dask",
            "--workers",
            "1",
        )
        assert dask.returncode == 0, dask.stderr
        assert dask.stdout.splitlines()[:-1] == local.stdout.splitlines()[:-1]  # bar the out dir
        for name in ("findings.geojson", "stand_visits.csv", "trips.csv", "occupancy.csv"):
            a = (tmp_path / "local" / name).read_bytes()
            assert a == (tmp_path / "dask" / name).read_bytes(), name
        summary = json.loads((tmp_path / "dask" / "summary.json").read_text())
        assert summary["vehicles"] >= 30 and summary["visits"] > 0


def _porto_sample(tmp_path: Path, *, n: int = 40) -> Path:
    """The first ``n`` real Porto trips (ECML/PKDD format), as the bundled file has them."""
    trips = tmp_path / "porto.csv"
    pd.read_csv(DATA / "porto/derived/trips_combined.csv", nrows=n).to_csv(trips, index=False)
    return trips


POA_STANDS = DATA / "brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson"
PORTO_STANDS = DATA / "porto/derived/taxi_stands.csv"


class TestFirstHour:
    def test_bundled_stand_files_as_they_are(self, run_pontual, tmp_path):
        """Porto's CSV and Porto Alegre's GeoJSON load as they are, with --stand-radius-m; the
        15 Porto Alegre stands without a usable coordinate are named as left out."""
        trips = _porto_sample(tmp_path)
        for stands, radius in ((PORTO_STANDS, "100"), (POA_STANDS, "30")):
            out = tmp_path / stands.stem
            done = run_pontual(
                "analyze", "--pings", str(trips), "--stands", str(stands),
                "--stand-radius-m", radius, "--kinds", "nenhum", "--out", str(out),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert (out / "stand_visits.csv").is_file()
        assert "2 ponto(s) sem coordenada no arquivo, fora da análise: 441, 468" in done.stdout
        assert "13 ponto(s) com coordenada provisória" in done.stdout

    @pytest.mark.parametrize("stands", [PORTO_STANDS, POA_STANDS], ids=["porto", "poa"])
    def test_missing_radius_names_the_flag(self, run_pontual, tmp_path, stands):
        """Points without a radius: the error names --stand-radius-m, never a Python name."""
        trips = _porto_sample(tmp_path, n=2)
        done = run_pontual(
            "analyze", "--pings", str(trips), "--stands", str(stands), "--out", str(tmp_path)
        )
        assert done.returncode == 1 and done.stderr.startswith("erro: --stands: ")
        assert "--stand-radius-m" in done.stderr
        assert "default_radius_m" not in done.stderr and "radius_m ou" not in done.stderr

    def test_unknown_municipality_fails_like_plan(self, run_pontual, tmp_path):
        """analyze --municipality 1234567 fails as plan does: the same pt-BR line, exit 1."""
        trips = _porto_sample(tmp_path, n=2)
        analyze = run_pontual(
            "analyze", "--pings", str(trips), "--stands", str(PORTO_STANDS),
            "--municipality", "1234567", "--out", str(tmp_path),
        )  # fmt: skip
        plan = run_pontual("plan", "--municipality", "1234567")
        assert analyze.returncode == plan.returncode == 1
        assert analyze.stderr == plan.stderr
        assert analyze.stderr.startswith("erro: município '1234567' não encontrado")
        assert not (tmp_path / "summary.json").exists()

    def test_timezone_from_the_data(self, run_pontual, tmp_path):
        """Porto's data give Europe/Lisbon, said in the output; no boundary is said too."""
        trips = _porto_sample(tmp_path)
        done = run_pontual(
            "analyze", "--pings", str(trips), "--stands", str(PORTO_STANDS),
            "--stand-radius-m", "100", "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Fuso horário: Europe/Lisbon (dos dados: formato do Porto, Portugal)." in (
            done.stdout
        )
        assert "Limite municipal: nenhum" in done.stdout

    def test_municipality_gives_zone_and_boundary(self, run_pontual, tmp_path):
        """--municipality 1100205 gives Porto Velho's zone and bundled boundary, both said; no
        'sem limite municipal (--boundary ou --municipality)'; kinds by their pt-BR names."""
        pings, stands = _write_inputs(tmp_path)
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands),
            "--municipality", "1100205", "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Fuso horário: America/Porto_Velho (o de Porto Velho (1100205)" in done.stdout
        assert "Limite municipal: o de Porto Velho (1100205), incluído no Pontual." in done.stdout
        assert "sem limite municipal" not in done.stdout
        assert "Inatividade: não verificado (sem frota (--fleet))" in done.stdout
        assert "inactivity" not in done.stdout  # codes stay in the files

    def test_municipality_without_bundled_boundary(self, run_pontual, tmp_path):
        """A real municipality whose boundary is not bundled says so, naming --boundary."""
        pings, stands = _write_inputs(tmp_path)
        done = run_pontual(
            "analyze", "--pings", str(pings), "--stands", str(stands),
            "--municipality", "3550308", "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "(--boundary ou --municipality)" not in done.stdout
        assert "o de São Paulo (3550308) não vem incluído; dê o arquivo com --boundary" in (
            done.stdout
        )
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert "São Paulo" in summary["detectors_skipped"]["outside_municipality"]

    def test_porto_boundary_collection(self, run_pontual, tmp_path):
        """Porto's bundled boundary (a GeometryCollection) is read as the municipal limit."""
        trips = _porto_sample(tmp_path)
        done = run_pontual(
            "analyze", "--pings", str(trips), "--stands", str(PORTO_STANDS),
            "--stand-radius-m", "100", "--boundary",
            str(DATA / "porto/network/porto_boundary.geojson"),
            "--kinds", "outside_municipality", "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Limite municipal: porto_boundary.geojson (--boundary)." in done.stdout
