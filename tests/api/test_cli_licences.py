"""`pontual analyze --licences`: parking licences with their periods (a licence moved between
stands is judged by the licence of each day, not by today's)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from stands._errors import LicenceFileError
from stands.licences import (
    PERIODS,
    licence_frame_from_fleet,
    mark_unplaced_licences,
    read_licence_file,
    unknown_licences,
    with_licence_periods,
)

P1 = (-30.0277, -51.2287)
P2 = (-30.0400, -51.2287)
STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [lon, lat]},
            "properties": {"stand_id": sid, "radius_m": 40},
        }
        for sid, (lat, lon) in (("P1", P1), ("P2", P2))
    ],
}


def _boarding_at_p1(day: str) -> list[tuple[str, str, float, float, str]]:
    """T1 comes from the south, waits 5 min at P1, the meter starts there, it leaves north."""
    lat, lon = P1
    rows = [("T1", f"{day}T08:58:00-03:00", lat - 0.004, lon, "free")]
    rows += [("T1", f"{day}T09:0{m}:00-03:00", lat, lon, "free") for m in range(5)]
    rows += [("T1", f"{day}T09:05:00-03:00", lat, lon, "occupied")]
    rows += [
        ("T1", f"{day}T09:0{m}:00-03:00", lat + 0.003 * (m - 5), lon, "occupied")
        for m in range(6, 9)
    ]
    rows += [("T1", f"{day}T09:09:00-03:00", lat + 0.012, lon, "free")]
    return rows


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    rows = [r for day in ("2024-03-04", "2024-03-05", "2024-03-08") for r in _boarding_at_p1(day)]
    paths = {
        "pings": tmp_path / "pings.csv",
        "stands": tmp_path / "stands.geojson",
        "fleet": tmp_path / "fleet.csv",
        "licences": tmp_path / "licencas.csv",
    }
    cols = ["vehicle_id", "timestamp", "lat", "lon", "meter"]
    pd.DataFrame(rows, columns=cols).to_csv(paths["pings"], index=False)
    paths["stands"].write_text(json.dumps(STANDS), encoding="utf-8")
    paths["fleet"].write_text("vehicle_id,stands,accessible\nT1,P2,false\n")
    # T1 held P1 until 5 March (inclusive), and P2 from the 6th on
    paths["licences"].write_text(
        "prefixo,stand_id,valid_from,valid_until\nT1,P1,,2024-03-05\nT1,P2,2024-03-06,\n"
    )
    return paths


def _analyze(run_pontual, p: dict[str, Path], out: Path, *extra: str):
    done = run_pontual(
        "analyze", "--pings", str(p["pings"]), "--stands", str(p["stands"]),
        "--fleet", str(p["fleet"]), "--municipality", "4314902", "--tiles", "none",
        "--out", str(out), *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def _unlicensed(out: Path) -> list[dict]:
    features = json.loads((out / "findings.geojson").read_text())["features"]
    return [f["properties"] for f in features if f["properties"]["kind"] == "unlicensed_stand_use"]


class TestAnalyzeWithLicences:
    def test_a_boarding_is_judged_by_the_licence_of_its_day(self, run_pontual, inputs, tmp_path):
        """Without the periods, the fleet's current licence (P2) makes every boarding at P1 an
        accusation; with them, only the one after the P1 licence ended, naming that licence."""
        _analyze(run_pontual, inputs, tmp_path / "today")
        assert [f["started_at"][:10] for f in _unlicensed(tmp_path / "today")] == [
            "2024-03-04", "2024-03-05", "2024-03-08",
        ]  # fmt: skip
        _analyze(run_pontual, inputs, tmp_path / "dated", "--licences", str(inputs["licences"]))
        (found,) = _unlicensed(tmp_path / "dated")
        assert found["started_at"][:10] == "2024-03-08"
        assert found["details"]["licence_end"] == "ended"
        assert found["details"]["licence_ended"]["valid_until"] == "2024-03-05"
        visits = pd.read_csv(tmp_path / "dated" / "stand_visits.csv")
        days = visits["arrived_at"].str[:10]
        assert visits.loc[days < "2024-03-06", "licensed"].tolist() == [True, True]
        assert visits.loc[days == "2024-03-08", "licensed"].tolist() == [False]
        proposals = json.loads((tmp_path / "dated" / "proposals.json").read_text())
        assert [p["vehicle_id"] for p in proposals if p["kind"] == "unlicensed_stand_use"] == ["T1"]

    def test_engines_agree(self, run_pontual, inputs, tmp_path):
        """The periods reach every engine: --jobs 2 and Dask (worker processes) write the same
        findings and visits as --jobs 1."""
        lic = ("--licences", str(inputs["licences"]))
        _analyze(run_pontual, inputs, tmp_path / "one", *lic, "--jobs", "1")
        _analyze(run_pontual, inputs, tmp_path / "two", *lic, "--jobs", "2")
        _analyze(run_pontual, inputs, tmp_path / "dask", *lic, "--engine", "dask", "--workers", "1")
        for name in ("findings.geojson", "stand_visits.csv"):
            one = (tmp_path / "one" / name).read_bytes()
            assert one == (tmp_path / "two" / name).read_bytes(), name
            assert one == (tmp_path / "dask" / name).read_bytes(), name
        assert len(_unlicensed(tmp_path / "one")) == 1

    def test_prefixo_outside_the_fleet_and_unknown_stand_are_said(
        self, run_pontual, inputs, tmp_path
    ):
        """A licence of a prefixo the fleet lacks, or at a stand --stands lacks, is named in an
        aviso; the latter makes the prefixo's licences unknown (no unlicensed accusation)."""
        inputs["licences"].write_text(
            "vehicle_id,stand_id,valid_from,valid_until\nT1,P9,,\nT7,P1,2024-01-01,\n"
        )
        done = _analyze(run_pontual, inputs, tmp_path / "o", "--licences", str(inputs["licences"]))
        assert "--licences: 1 prefixo(s) fora de --fleet (T7)" in done.stdout
        assert "--licences: 1 prefixo(s) com licença para 1 ponto(s)" in done.stdout
        assert _unlicensed(tmp_path / "o") == []

    def test_a_fleet_without_the_stands_column_accuses_no_boarding(
        self, run_pontual, inputs, tmp_path
    ):
        """A fleet file without the ``stands`` column does not say the licences: no boarding is
        unlicensed, and an aviso says so (a QA fleet of five taxis got 105 art. 59 XIII
        proposals for boardings at their own stands). An empty cell says "no licence"."""
        inputs["fleet"].write_text("vehicle_id,accessible\nT1,false\n")
        done = _analyze(run_pontual, inputs, tmp_path / "untold")
        assert "--fleet: sem a coluna stands (nem --licences)" in done.stdout
        assert _unlicensed(tmp_path / "untold") == []
        visits = pd.read_csv(tmp_path / "untold" / "stand_visits.csv")
        assert visits["licensed"].isna().all()
        inputs["fleet"].write_text("vehicle_id,stands,accessible\nT1,,false\n")
        done = _analyze(run_pontual, inputs, tmp_path / "none")
        assert "sem a coluna stands" not in done.stdout
        assert len(_unlicensed(tmp_path / "none")) == 3

    def test_bad_file_names_every_row(self, run_pontual, inputs, tmp_path):
        """Bad dates, an end before the start, overlapping periods and empty ids are each named;
        nothing is analysed."""
        inputs["licences"].write_text(
            "vehicle_id,stand_id,valid_from,valid_until\n"
            "T1,P1,2024-03-01,2024-02-01\n"
            "T1,P2,2024/03/01,\n"
            "T1,P1,2024-01-01,2024-03-10\n"
            "T1,P1,2024-03-05,\n"
            ",P1,,\n"
        )
        done = run_pontual(
            "analyze", "--pings", str(inputs["pings"]), "--stands", str(inputs["stands"]),
            "--fleet", str(inputs["fleet"]), "--licences", str(inputs["licences"]),
            "--out", str(tmp_path / "o"),
        )  # fmt: skip
        assert done.returncode == 1
        err = done.stderr
        assert "--licences: licencas.csv: 4 erro(s)" in err
        assert "linha 2, coluna 'valid_until': 2024-02-01 antes de valid_from" in err
        assert "linha 3, coluna 'valid_from': era '2024/03/01'" in err
        assert "linha 5: o período sobrepõe o da linha 4" in err
        assert "linha 6, coluna 'vehicle_id': vazio" in err
        assert "Traceback" not in err
        assert not (tmp_path / "o" / "findings.geojson").exists()

    def test_licences_need_the_fleet(self, run_pontual, inputs, tmp_path):
        done = run_pontual(
            "analyze", "--pings", str(inputs["pings"]), "--stands", str(inputs["stands"]),
            "--licences", str(inputs["licences"]), "--out", str(tmp_path / "o"),
        )  # fmt: skip
        assert done.returncode == 1
        assert "--licences: dê também --fleet" in done.stderr


class TestLicencePeriods:
    def test_periods_replace_the_fleet_stands(self, inputs):
        fleet = pd.DataFrame(
            {"vehicle_id": ["T1", "T2"], "stands": [("P2",), ("P1",)], "stand_names": [(), ("x",)]}
        )
        dated, absent = with_licence_periods(fleet, read_licence_file(inputs["licences"]))
        assert absent == []
        assert dated["stands"].tolist() == [("P1", "P2"), ()]
        assert dated["stand_names"].tolist() == [(), ()]
        assert fleet["stands"].tolist() == [("P2",), ("P1",)]  # the input is not modified
        frame = licence_frame_from_fleet(dated)
        assert frame.dtypes["valid_from"] == frame.dtypes["valid_until"] == "datetime64[ns]"
        days = frame.assign(
            **{c: frame[c].dt.strftime("%Y-%m-%d") for c in ("valid_from", "valid_until")}
        )
        assert days.fillna("-").values.tolist() == [
            ["T1", "P1", "-", "2024-03-05"],
            ["T1", "P2", "2024-03-06", "-"],
        ]
        assert unknown_licences(dated) == frozenset()

    def test_unplaced_stand_leaves_the_licences_unknown(self, inputs):
        fleet = pd.DataFrame({"vehicle_id": ["T1"], "stands": [()]})
        dated, _ = with_licence_periods(fleet, read_licence_file(inputs["licences"]))
        marked, unplaced = mark_unplaced_licences(dated, ["P1"])
        assert unplaced == {"T1": ("P2",)}
        assert licence_frame_from_fleet(marked)["stand_id"].tolist() == ["P1"]
        assert unknown_licences(marked) == frozenset({"T1"})
        assert PERIODS in marked

    def test_unknown_column_is_refused(self, tmp_path):
        bad = tmp_path / "l.csv"
        bad.write_text("vehicle_id,stand_id,desde\nT1,P1,2024-01-01\n")
        with pytest.raises(LicenceFileError, match="coluna desconhecida 'desde'"):
            read_licence_file(bad)
