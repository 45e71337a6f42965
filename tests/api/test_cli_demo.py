"""`pontual demo`: what it writes, in one list, and what it leaves running."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from api.cli_demo import FOUR_MAPS, left_running, written_list
from tracking import frames as fr
from tracking.detectors.findings import KINDS


class TestWrittenList:
    def test_one_numbered_list_four_maps_first(self, tmp_path: Path) -> None:
        """Every file once, numbered; the four users' maps are 1 to 4 and say whose they are."""
        four = {label: tmp_path / f"{i}.html" for i, label in enumerate(FOUR_MAPS)}
        lines = written_list(
            tmp_path, four=four, boardings=tmp_path / "b.html", poa=tmp_path / "p.html"
        )
        assert "os mapas 1 a 4 são os quatro mapas dos usuários" in lines[0]
        numbered = [line.strip() for line in lines[1:] if line.strip()[:2].rstrip(".").isdigit()]
        assert [n.split(".")[0] for n in numbered] == [str(i) for i in range(1, 9)]
        paths = [n.split(" ", 1)[1] for n in numbered]
        assert len(set(paths)) == len(paths)  # no file listed twice
        assert "supervisor de ponto" in lines[2] and "cidadão" in lines[8]


class TestLeftRunning:
    @pytest.fixture
    def local(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
        from api.settings import get_settings

        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.delenv("PONTUAL_DATABASE_URL", raising=False)
        monkeypatch.setenv("PONTUAL_DATA_DIR", str(tmp_path))
        get_settings.cache_clear()
        yield
        get_settings.cache_clear()

    def test_local_cluster_named_with_how_to_stop(self, local: None, tmp_path: Path) -> None:
        """The embedded PostGIS is said to stay running, where, and how to stop it."""
        lines = left_running("postgresql+psycopg://pontual:x@127.0.0.1:54329/pontual")
        text = "\n".join(lines)
        assert "Fica em execução: o banco PostGIS local em 127.0.0.1:54329/pontual" in text
        assert str(tmp_path / "pgdata") in text and "x@" not in text
        assert "Para pará-lo: pontual db stop" in text


@pytest.mark.slow
class TestDemoRun:
    def test_demo_on_a_fresh_database(self, run_pontual, database_url: str, tmp_path: Path):
        """The demo runs end to end; each file it lists exists; it says what it leaves running."""
        from factories import migrated_database

        out = tmp_path / "demo"
        with migrated_database(database_url, prefix="pontual_demo") as url:
            done = run_pontual(
                "demo", "--no-open", "--tiles", "none", "--out", str(out),
                DATABASE_URL=url, timeout_s=600,
            )  # fmt: skip
        assert done.returncode == 0, done.stderr
        listed = [
            line.split(". ", 1)[1].rstrip("/")
            for line in done.stdout.splitlines()
            if line.strip()[:2].rstrip(".").isdigit() and ". " in line
        ]
        assert len(listed) == 8 and all(Path(p).exists() for p in listed)
        assert sum(p.endswith(".html") for p in listed) == 6
        assert "Banco: o servidor de DATABASE_URL" in done.stdout
        assert "Salto de GPS impossível" in done.stdout and "gps_anomaly" not in done.stdout
        _assert_well_formed(out, [Path(p) for p in listed if p.endswith(".html")])


def _assert_well_formed(out: Path, pages: list[Path]) -> None:
    """The demo's summary, Porto contract files and map pages hold what they say they do."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    loaded = summary["database"]
    assert loaded["municipalities"] == 5570 and loaded["vehicles"] == 3677  # IBGE, POA's fleet
    assert loaded["fixes"] == loaded["fixes_new_this_run"] > 0  # a fresh database
    replay = summary["porto_replay"]
    run = replay["summary"]
    recall = replay["recall_by_radius_m"]
    assert set(recall) == {"50", "100", "150"}
    assert all(0 < r["recall"] <= r["ceiling"] <= 1 for r in recall.values())
    porto = out / "porto"
    findings = json.loads((porto / "findings.geojson").read_text(encoding="utf-8"))
    assert findings["type"] == "FeatureCollection"
    kinds = Counter(f["properties"]["kind"] for f in findings["features"])
    assert set(kinds) <= set(KINDS) and kinds == run["findings_by_kind"]
    assert sum(kinds.values()) == run["findings"] > 0
    visits = pd.read_csv(porto / "stand_visits.csv")
    assert tuple(visits.columns) == fr.VISIT_COLUMNS and len(visits) == run["visits"] > 0
    trips = pd.read_csv(porto / "trips.csv")
    assert tuple(trips.columns) == fr.TRIP_COLUMNS and len(trips) == run["trips"] > 0
    assert trips["trip_id"].is_unique
    assert json.loads((porto / "summary.json").read_text(encoding="utf-8")) == run
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert text.rstrip().endswith("</html>") and text.count("L.map(") == 1, page.name
