"""`pontual stands|licences|supervisors` through the console script, on the API tests' database."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from sqlalchemy import Engine, text

from stands.licences import read_licence_file

Run = Callable[..., CompletedProcess[str]]


@pytest.fixture
def pontual(run_pontual: Run, api_database_url: str, seeded: dict) -> Run:
    """Run ``pontual`` on the API tests' database (vehicles V1–V3 seeded)."""

    def run(*args: str) -> CompletedProcess[str]:
        return run_pontual(*args, DATABASE_URL=api_database_url)

    return run


def _ok(done: CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _error(done: CompletedProcess[str]) -> str:
    """The one ``erro:`` line of a refused command (exit 1, no traceback)."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("erro: "), done.stderr
    return lines[0]


class TestStandsCli:
    def test_create_edit_show_list_retire(self, pontual: Run, api_engine: Engine) -> None:
        """A point stand is created, edited, shown and listed, then retired; each step audited."""
        out = _ok(pontual(
            "stands", "create", "CLI-S1", "--lat", "-30.03", "--lon", "-51.23", "--radius-m", "30",
            "--kind", "fixo", "--capacity", "4", "--order-number", "7", "--name", "Ponto CLI",
            "--actor", "fiscal-1",
        ))  # fmt: skip
        assert "Ponto CLI-S1 criado." in out
        _ok(pontual("stands", "edit", "CLI-S1", "--capacity", "6", "--address", "Rua X, 1",
                    "--actor", "fiscal-2"))  # fmt: skip
        shown = json.loads(_ok(pontual("stands", "show", "CLI-S1", "--json")))
        assert (shown["capacity"], shown["order_number"], shown["radius_m"]) == (6, 7, 30.0)
        assert shown["address"] == "Rua X, 1" and shown["kind"] == "fixo"
        listed = json.loads(_ok(pontual("stands", "list", "--json")))
        assert "CLI-S1" in {s["stand_id"] for s in listed}
        out = _ok(pontual("stands", "retire", "CLI-S1", "--on", "2024-06-01", "--actor", "f"))
        assert "desativado a partir de 2024-06-01" in out
        listed = json.loads(_ok(pontual("stands", "list", "--json")))
        assert "CLI-S1" not in {s["stand_id"] for s in listed}
        with api_engine.connect() as conn:
            actions = conn.execute(
                text("SELECT actor, action FROM audit_log WHERE entity = 'stand' "
                     "AND entity_id = 'CLI-S1' ORDER BY entry_id")
            ).all()  # fmt: skip
        assert [tuple(a) for a in actions] == [
            ("fiscal-1", "create"), ("fiscal-2", "update"), ("f", "retire"),
        ]  # fmt: skip

    def test_retire_and_overdue_default_to_today(self, pontual: Run) -> None:
        """Without --on (retire) or --as-of (supervisors overdue), the day is today's."""
        _ok(pontual("stands", "create", "CLI-S2", "--lat", "-30.02", "--lon", "-51.24",
                    "--radius-m", "20", "--kind", "fixo", "--actor", "f"))  # fmt: skip
        out = _ok(pontual("stands", "retire", "CLI-S2", "--actor", "f"))
        assert "desativado a partir de" in out
        assert isinstance(json.loads(_ok(pontual("supervisors", "overdue", "--json"))), list)

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("stands", "edit", "NOPE", "--capacity", "1"), "ponto 'NOPE' não encontrado"),
            (("stands", "create", "CLI-BAD", "--geometry",
              '{"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}'),
             "polígono inválido"),
            (("stands", "create", "CLI-BAD", "--lat", "-30", "--lon", "-51"), "sem radius_m"),
            (("stands", "create", "CLI-BAD", "--geometry", "/nonexistent/area.geojson"),
             "não encontrado"),
        ],
    )  # fmt: skip
    def test_bad_input_one_error_line(self, pontual: Run, args: tuple, message: str) -> None:
        """Unknown stand or bad geometry: one `erro:` line naming the problem, exit 1."""
        assert message in _error(pontual(*args, "--actor", "f"))


class TestLicencesCli:
    def test_grant_overlap_exclude_list(self, pontual: Run, tmp_path: Path) -> None:
        """Grant, an overlapping grant refused, exclusion (art. 50) ends it; listed by date."""
        _ok(pontual("stands", "create", "CLI-L1", "--lat", "-30.04", "--lon", "-51.22",
                    "--radius-m", "25", "--kind", "fixo", "--actor", "f"))  # fmt: skip
        out = _ok(pontual("licences", "grant", "CLI-L1", "V2", "--from", "2024-01-01",
                          "--actor", "f"))  # fmt: skip
        assert "prefixo V2 no ponto CLI-L1" in out
        line = _error(pontual("licences", "grant", "CLI-L1", "V2", "--from", "2024-05-01",
                              "--actor", "f"))  # fmt: skip
        assert "já tem licença no ponto CLI-L1 de 2024-01-01 a sem término" in line
        assert "data" in _error(pontual("licences", "grant", "CLI-L1", "V3", "--from", "ontem",
                                        "--actor", "f"))  # fmt: skip
        out = _ok(pontual(
            "licences", "exclude", "CLI-L1", "V2", "--on", "2024-06-01", "--reason", "solicitacao",
            "--note", "protocolo 9", "--actor", "f",
        ))  # fmt: skip
        assert "art. 50, I: por solicitação do próprio autorizatário — protocolo 9" in out
        rows = json.loads(_ok(pontual("licences", "list", "--stand", "CLI-L1", "--json")))
        assert [(r["vehicle_id"], r["valid_until"]) for r in rows] == [("V2", "2024-05-31")]
        assert json.loads(_ok(pontual("licences", "list", "--stand", "CLI-L1", "--on",
                                      "2024-06-01", "--json"))) == []  # fmt: skip
        _ok(pontual("licences", "grant", "CLI-L1", "V3", "--from", "2024-01-01", "--actor", "f"))
        out = _ok(pontual("licences", "end", "CLI-L1", "V3", "--until", "2024-03-31",
                          "--actor", "f"))  # fmt: skip
        assert "encerrada em 2024-03-31" in out
        # --csv is pontual analyze --licences' format
        listed = tmp_path / "licencas.csv"
        listed.write_text(_ok(pontual("licences", "list", "--stand", "CLI-L1", "--csv")))
        assert read_licence_file(listed).values.tolist() == [
            ["V2", "CLI-L1", dt.date(2024, 1, 1), dt.date(2024, 5, 31)],
            ["V3", "CLI-L1", dt.date(2024, 1, 1), dt.date(2024, 3, 31)],
        ]


class TestSupervisorsCli:
    def test_elect_homologate_overdue(self, pontual: Run) -> None:
        """A supervisor whose term ended 91 days before --as-of makes the stand overdue,
        listing its prefixos; a newly homologated one clears it."""
        _ok(pontual("stands", "create", "CLI-F1", "--lat", "-30.05", "--lon", "-51.21",
                    "--radius-m", "25", "--kind", "fixo", "--actor", "f"))  # fmt: skip
        _ok(pontual("licences", "grant", "CLI-F1", "V1", "--from", "2023-01-01", "--actor", "f"))
        out = _ok(pontual(
            "supervisors", "elect", "CLI-F1", "--name", "Ana Souza", "--elected-on", "2023-01-10",
            "--ata", "ata 1/2023", "--actor", "f",
        ))  # fmt: skip
        (sid,) = [w for w in out.split() if w.isdigit()]
        _ok(pontual("supervisors", "homologate", sid, "--on", "2023-02-01", "--actor", "eptc"))
        _ok(pontual("supervisors", "end", sid, "--until", "2024-01-31", "--actor", "eptc"))
        rows = json.loads(_ok(pontual("supervisors", "overdue", "--as-of", "2024-05-01", "--json")))
        (row,) = [r for r in rows if r["stand_id"] == "CLI-F1"]
        assert (row["days_without"], row["overdue"], row["prefixos"]) == (91, True, ["V1"])
        assert row["last_supervised_on"] == "2024-01-31"
        text_out = _ok(pontual("supervisors", "overdue", "--as-of", "2024-05-01"))
        assert "CLI-F1" in text_out and "VENCIDO" in text_out and "V1" in text_out
        rows = json.loads(_ok(pontual("supervisors", "overdue", "--as-of", "2024-04-30", "--json")))
        assert "CLI-F1" not in {r["stand_id"] for r in rows}

        out = _ok(pontual(
            "supervisors", "elect", "CLI-F1", "--name", "Bia Lima", "--elected-on", "2024-04-20",
            "--ata", "ata 2/2024", "--actor", "f",
        ))  # fmt: skip
        (new,) = [w for w in out.split() if w.isdigit()]
        _ok(pontual("supervisors", "homologate", new, "--on", "2024-04-25", "--actor", "eptc"))
        rows = json.loads(_ok(pontual("supervisors", "overdue", "--as-of", "2024-05-01", "--json")))
        assert "CLI-F1" not in {r["stand_id"] for r in rows}
        history = json.loads(_ok(pontual("supervisors", "list", "--stand", "CLI-F1", "--json")))
        assert [(h["person_name"], h["until"]) for h in history] == [
            ("Ana Souza", "2024-01-31"), ("Bia Lima", None),
        ]  # fmt: skip
        assert "já homologado" in _error(
            pontual("supervisors", "homologate", new, "--on", "2024-04-26", "--actor", "eptc")
        )
