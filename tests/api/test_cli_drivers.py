"""`pontual analyze --drivers --driver-links` and `pontual import drivers`: findings, proposals,
clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-51.2287, -30.0277]},
            "properties": {"stand_id": "P1", "radius_m": 40},
        }
    ],
}


def _inputs(tmp_path: Path) -> dict[str, Path]:
    rows = [("T1", "2024-03-04T09:00:00-03:00", -30.0500, -51.2000, "free", "X9")]
    rows += [
        ("T1", f"2024-03-04T09:{m:02d}:00-03:00", -30.05 + m * 0.001, -51.20, "occupied", "X9")
        for m in range(1, 8)
    ]
    rows += [("T1", "2024-03-04T09:09:00-03:00", -30.04, -51.20, "free", "X9")]
    cols = ["vehicle_id", "timestamp", "lat", "lon", "meter", "driver_id"]
    paths = {k: tmp_path / f"{k}.csv" for k in ("pings", "drivers", "links")}
    pd.DataFrame(rows, columns=cols).to_csv(paths["pings"], index=False)
    paths["drivers"].write_text("driver_id,name,synthetic\nD1,Condutor Fictício,true\n")
    paths["links"].write_text("vehicle_id,driver_id,role,valid_from\nT1,D1,titular,2024-01-01\n")
    paths["stands"] = tmp_path / "stands.geojson"
    paths["stands"].write_text(json.dumps(STANDS), encoding="utf-8")
    return paths


class TestAnalyzeWithDrivers:
    def test_unregistered_driver_gives_finding_and_proposal(self, run_pontual, tmp_path):
        """A ride by a driver absent from the registry is a finding and, in POA, art. 59, IV."""
        p = _inputs(tmp_path)
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(p["pings"]), "--stands", str(p["stands"]),
            "--drivers", str(p["drivers"]), "--driver-links", str(p["links"]),
            "--municipality", "4314902", "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        features = json.loads((out / "findings.geojson").read_text())["features"]
        mine = [
            f["properties"] for f in features if f["properties"]["kind"] == "driver_not_allowed"
        ]
        assert [(f["vehicle_id"], f["details"]["reason"]) for f in mine] == [
            ("T1", "not_registered")
        ]
        proposals = json.loads((out / "proposals.json").read_text())
        (prop,) = [x for x in proposals if x["kind"] == "driver_not_allowed"]
        assert (prop["article"], prop["inciso"], prop["gravity"]) == ("59", "IV", "gravíssima")

    @pytest.mark.parametrize("jobs", ["1", "2"])
    def test_most_codes_unknown_warns(self, run_pontual, tmp_path, jobs):
        """The fixes code drivers 'CNH…' and the registry 'D…': the run warns, naming them."""
        p = _inputs(tmp_path)
        pings = pd.read_csv(p["pings"])
        more = [pings.assign(vehicle_id=f"T{k}", driver_id=f"CNH{k}") for k in (2, 3)]
        pd.concat([pings, *more]).to_csv(p["pings"], index=False)
        args = ["--pings", str(p["pings"]), "--stands", str(p["stands"]), "--jobs", jobs]
        args += ["--drivers", str(p["drivers"]), "--driver-links", str(p["links"])]
        done = run_pontual("analyze", *args, "--out", str(tmp_path / "out"))
        assert done.returncode == 0, done.stderr
        assert (
            "aviso: --drivers: 3 de 3 códigos de condutor das posições não estão no cadastro "
            "(CNH2, CNH3, X9); confira se o rastreador e o cadastro usam o mesmo código"
        ) in done.stdout
        pings.assign(driver_id="d-01").to_csv(p["pings"], index=False)  # D1, written otherwise
        done = run_pontual("analyze", *args, "--out", str(tmp_path / "out2"))
        assert done.returncode == 0, done.stderr
        assert "aviso: --drivers" not in done.stdout

    def test_drivers_without_links_is_one_clear_message(self, run_pontual, tmp_path):
        """--drivers alone fails naming the missing option, with no traceback."""
        p = _inputs(tmp_path)
        done = run_pontual(
            "analyze", "--pings", str(p["pings"]), "--stands", str(p["stands"]),
            "--drivers", str(p["drivers"]), "--out", str(tmp_path / "o"),
        )  # fmt: skip
        assert done.returncode == 1
        assert "--drivers: dê também --driver-links" in done.stderr
        assert "Traceback" not in done.stderr

    def test_bad_links_file_names_option_row_and_column(self, run_pontual, tmp_path):
        """A bad role in the links file fails naming the flag, the file, the row and the column."""
        p = _inputs(tmp_path)
        p["links"].write_text("vehicle_id,driver_id,role,valid_from\nT1,D1,dono,2024-01-01\n")
        done = run_pontual(
            "analyze", "--pings", str(p["pings"]), "--stands", str(p["stands"]),
            "--drivers", str(p["drivers"]), "--driver-links", str(p["links"]),
            "--out", str(tmp_path / "o"),
        )  # fmt: skip
        assert done.returncode == 1
        assert "--driver-links: links.csv, linha 2, coluna role: era 'dono'" in done.stderr


class TestImportDrivers:
    def test_bad_file_is_refused_before_the_database(self, run_pontual, tmp_path):
        """`pontual import drivers` names the file's row and column (no database touched)."""
        bad = tmp_path / "c.csv"
        bad.write_text("driver_id,name,cnh_valid_until\nD1,x,2026/12/31\n")
        done = run_pontual(
            "import", "drivers", str(bad), "--actor", "t-1", DATABASE_URL="postgresql://nowhere/x"
        )
        assert done.returncode == 1
        assert "c.csv, linha 2, coluna cnh_valid_until: era '2026/12/31'" in done.stderr


class TestStandSuspensions:
    def test_analyze_with_suspensions_finds_use_at_own_stand(self, run_pontual, tmp_path):
        """A boarding at the prefixo's own stand during its suspension is a suspended_use."""
        p = _inputs(tmp_path)
        # T1 waits 5 min in P1 (its licensed stand), boards there and leaves north
        rows = [("T1", "2024-03-04T08:58:00-03:00", -30.0320, -51.2287, "free", "X9")]
        rows += [
            ("T1", f"2024-03-04T09:0{m}:00-03:00", -30.0277, -51.2287, "free", "X9")
            for m in range(5)
        ]
        rows += [("T1", "2024-03-04T09:05:00-03:00", -30.0277, -51.2287, "occupied", "X9")]
        rows += [
            ("T1", f"2024-03-04T09:0{m}:00-03:00", -30.0277 + 0.003 * (m - 5), -51.2287,
             "occupied", "X9")
            for m in range(6, 9)
        ]  # fmt: skip
        cols = ["vehicle_id", "timestamp", "lat", "lon", "meter", "driver_id"]
        pd.DataFrame(rows, columns=cols).to_csv(p["pings"], index=False)
        fleet = tmp_path / "fleet.csv"
        fleet.write_text("vehicle_id,stands\nT1,P1\n")
        susp = tmp_path / "suspensoes.csv"
        susp.write_text(
            "stand_id,vehicle_id,starts_on,ends_on,kind\nP1,T1,2024-03-01,2024-03-20,suspension\n"
        )
        out = tmp_path / "out"
        done = run_pontual(
            "analyze", "--pings", str(p["pings"]), "--stands", str(p["stands"]),
            "--fleet", str(fleet), "--stand-suspensions", str(susp),
            "--municipality", "4314902", "--out", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        features = json.loads((out / "findings.geojson").read_text())["features"]
        mine = [
            f["properties"]["details"]
            for f in features
            if f["properties"]["kind"] == "unlicensed_stand_use"
        ]
        assert [(d["subtype"], d["use"], d["suspension"]["kind"]) for d in mine] == [
            ("suspended_use", "boarding", "suspension")
        ]
        proposals = json.loads((out / "proposals.json").read_text())
        (prop,) = [x for x in proposals if x["kind"] == "unlicensed_stand_use"]
        assert (prop["article"], prop["paragraph"]) == ("45", "único")

    def test_bad_suspensions_file_names_every_row(self, run_pontual, tmp_path):
        """`pontual import stand-suspensions` refuses a bad file naming each row, no traceback."""
        bad = tmp_path / "s.csv"
        bad.write_text(
            "stand_id,vehicle_id,driver_id,starts_on,ends_on,kind\n"
            "P1,T1,D1,2024-03-01,2024-03-20,suspension\n"
            "P1,T1,,2024-03-01,,suspension\n"
        )
        done = run_pontual(
            "import", "stand-suspensions", str(bad), "--actor", "t-1",
            DATABASE_URL="postgresql://nowhere/x",
        )  # fmt: skip
        assert done.returncode == 1
        assert "s.csv, linha 2, coluna 'vehicle_id'/'driver_id'" in done.stderr
        assert "s.csv, linha 3, coluna 'ends_on': vazio" in done.stderr
        assert "Traceback" not in done.stderr
