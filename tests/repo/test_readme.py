"""The README as a new user reads it: set-up, first steps run verbatim, formats documented."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from fleet.vocabulary import VEHICLE_STATUSES
from tracking.detectors.findings import KINDS
from tracking.validate import REJECTION_REASONS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section (up to the next ``## ``)."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


FIRST_STEPS = _section(README, "Primeiros passos")


class TestSetUp:
    def test_two_commands_ci_runs(self) -> None:
        """The set-up runs `make demo` and `make test`; CI runs the same `make test`."""
        (block, activate) = _sh_blocks(_section(README, "Instalação"))
        commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
        assert commands == ["make demo", "make test"]
        assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        assert activate.strip() == "source .venv/bin/activate"

    def test_prerequisites_said(self) -> None:
        """The README and the Makefile say what a fresh Debian needs first."""
        setup = _section(README, "Instalação")
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        for tool in ("`make`", "`git`", "`sudo`"):
            assert tool in setup
        assert "apt-get install -y make git sudo" in setup
        assert "apt-get install -y make git sudo" in makefile

    def test_make_says_how_to_run_pontual(self) -> None:
        """`make demo` ends with the same activation the README gives."""
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        (step,) = re.findall(r"^NEXT_STEP := (.*)$", makefile, flags=re.MULTILINE)
        assert "source $(VENV)/bin/activate" in step and "$(VENV)/bin/pontual" in step
        demo = re.search(r"^demo: venv\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
        assert demo is not None and '@echo "$(NEXT_STEP)"' in demo.group(1)
        done = subprocess.run(
            ["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert "source .venv/bin/activate" in done.stdout

    def test_size_and_links(self) -> None:
        """The README is a guide (under ~12 KB); its links to docs pages and its images
        (the console's screenshots too) resolve."""
        assert len(README.encode("utf-8")) < 12_500
        targets = re.findall(r"\]\(((?:docs|bench|data)/[^)#]*)", README)
        assert any(t.startswith("docs/screenshots/") for t in targets)
        for target in targets:
            assert (ROOT / target).exists(), target
            if target.startswith("docs/screenshots/"):
                assert (ROOT / target).is_file(), target

    def test_console_gallery_shows_every_screenshot(self) -> None:
        """docs/console.md (linked from the README) shows every committed screenshot of the
        console, and only screenshots that exist."""
        assert "](docs/console.md)" in README
        gallery = (ROOT / "docs" / "console.md").read_text(encoding="utf-8")
        shown = set(re.findall(r"!\[[^\]]+\]\((screenshots/[^)]+\.png)\)", gallery))
        committed = {f"screenshots/{p.name}" for p in (ROOT / "docs" / "screenshots").glob("*.png")}
        assert shown and shown == committed, (shown - committed, committed - shown)


def _own_files(folder: Path) -> None:
    """The files of the README's "your own files" command, written in docs/formatos.md's format."""
    rows = [("T1", f"2024-03-30T09:{m:02d}:00-03:00", -30.0277, -51.2287, "free") for m in range(5)]
    rows += [
        ("T1", "2024-03-30T09:05:00-03:00", -30.0278, -51.2287, "occupied"),
        ("T1", "2024-03-30T09:10:00-03:00", -30.0200, -51.2200, "occupied"),
        ("T2", "2024-03-30T09:10:00", -30.0200, -51.2200, "free"),  # naive: rejected
    ]
    pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
        folder / "meus_pings.csv", index=False
    )
    stands = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [-51.2287, -30.0277]},
                "properties": {"stand_id": "P1", "name": "Praça", "radius_m": 40, "capacity": 3},
            }
        ],
    }
    (folder / "meus_pontos.geojson").write_text(json.dumps(stands), encoding="utf-8")
    (folder / "minha_frota.csv").write_text(
        "vehicle_id,plate,accessible,stands,status\nT1,ABC1D23,false,P1,active\n"
        "T2,XYZ9A87,true,,active\n",
        encoding="utf-8",
    )


@pytest.mark.slow
class TestFirstSteps:
    def test_commands_run_verbatim(self, tmp_path: Path) -> None:
        """The first steps' commands, as written, run on a clean copy of the bundled data."""
        blocks = _sh_blocks(FIRST_STEPS)
        assert len(blocks) == 2 and blocks[0].startswith("source .venv/bin/activate\n")
        shutil.copytree(ROOT / "data", tmp_path / "data")
        (tmp_path / ".venv").symlink_to(ROOT / ".venv")
        _own_files(tmp_path)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PONTUAL_", "VIRTUAL_ENV")) and k != "DATABASE_URL"
        }
        env["PATH"] = "/usr/bin:/bin"  # no venv on the PATH: the README's activation must do it
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(blocks)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        porto = tmp_path / "saida" / "porto"
        for name in ("findings.geojson", "stand_visits.csv", "trips.csv", "rejected.csv",
                     "occupancy.csv", "summary.json", "map.html"):  # fmt: skip
            assert (porto / name).is_file(), name
        assert "Fuso horário: Europe/Lisbon (--timezone)." in done.stdout
        assert "Limite municipal: porto_boundary.geojson (--boundary)." in done.stdout
        summary = json.loads((porto / "summary.json").read_text(encoding="utf-8"))
        assert summary["pings_valid"] == 101_383 and summary["boardings"] > 1000
        own = tmp_path / "saida" / "minha_cidade"
        assert (own / "proposals.json").is_file()
        rejected = pd.read_csv(own / "rejected.csv", dtype=str)
        assert rejected["reason"].tolist() == ["naive_timestamp"]

    def test_outputs_named_in_readme_exist_after_the_demo(self) -> None:
        """The demo's files the README names are the ones `pontual demo` writes."""
        from api.cli_demo import FOUR_MAPS

        for name in ("mapa_pontos.html", "porto/map.html", "mapa_planejamento.html",
                     "mapa_cidadao.html", "porto_map.html", "poa_stands_map.html"):  # fmt: skip
            assert f"`{name}`" in FIRST_STEPS, name
        assert len(FOUR_MAPS) == 4


class TestFormatsDocumented:
    FORMATS = (ROOT / "docs" / "formatos.md").read_text(encoding="utf-8")

    def test_every_rejection_reason(self) -> None:
        """Each reason a row can get in rejected.csv is explained."""
        missing = [r for r in REJECTION_REASONS if f"| `{r}` |" not in self.FORMATS]
        assert not missing

    def test_every_status_and_kind(self) -> None:
        """The fleet's statuses and the finding kinds are all named."""
        assert all(f"`{s}`" in self.FORMATS for s in VEHICLE_STATUSES)
        assert all(f"`{k}`" in self.FORMATS for k in KINDS)

    @pytest.mark.parametrize("heading", ["Posições GPS", "Pontos de táxi", "Frota",
                                         "Limite municipal"])  # fmt: skip
    def test_a_table_per_input(self, heading: str) -> None:
        """Pings, stands, fleet and boundary each have their section; the first three a table."""
        section = self.FORMATS[self.FORMATS.index(f"## {heading}") :]
        section = section[: section.find("\n## ", 1)]
        if heading != "Limite municipal":
            assert "| coluna |" in section or "| propriedade |" in section
