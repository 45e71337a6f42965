"""`pontual proposals` through the console script, on the API tests' database."""

from __future__ import annotations

import datetime as dt
import getpass
import json
from zoneinfo import ZoneInfo

import pandas as pd

STANDS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-51.45, -29.1]},
            "properties": {"stand_id": "PB1", "radius_m": 40},
        }
    ],
}


def _analyze_outside_pinto_bandeira(run_pontual, tmp_path, vehicle: str) -> str:
    rows = [  # a ride hailed about 30 km from Pinto Bandeira
        (vehicle, f"2024-03-04T09:{m:02d}:00-03:00", -29.30 + m * 0.001, -51.70, meter)
        for m, meter in enumerate(["free"] + ["occupied"] * 6)
    ]
    pings, stands = tmp_path / "pings.csv", tmp_path / "stands.geojson"
    stands.write_text(json.dumps(STANDS), encoding="utf-8")
    pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
        pings, index=False
    )
    done = run_pontual(
        "analyze", "--pings", str(pings), "--stands", str(stands),
        "--municipality", "4314548", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(tmp_path / "o" / "findings.geojson")


BRT = "America/Sao_Paulo"


class TestProposalsCli:
    def test_generate_confirm_show(self, run_pontual, tmp_path, api_database_url) -> None:
        """findings.geojson → proposals in the database → confirmed by an agent, with history;
        a second confirmation fails with one clear message."""
        env = {"DATABASE_URL": api_database_url}
        findings = _analyze_outside_pinto_bandeira(run_pontual, tmp_path, "CLI-1")
        done = run_pontual(
            "proposals", "generate", "--municipality", "4314548", "--findings", findings, **env
        )
        assert done.returncode == 0, done.stderr
        assert "1 proposta(s) criada(s)" in done.stdout

        done = run_pontual("proposals", "list", "--municipality", "4314548", "--json", **env)
        (p,) = [r for r in json.loads(done.stdout) if r["vehicle_id"] == "CLI-1"]
        assert (p["provision"], p["status"]) == ("art. 25, X", "proposta")
        table = run_pontual("proposals", "list", "--municipality", "4314548", **env).stdout
        line = next(row for row in table.splitlines() if "CLI-1" in row)
        assert line.endswith("Embarque fora do município")  # the kind for people; JSON keeps codes
        local = dt.datetime.fromisoformat(p["committed_at"]).astimezone(
            ZoneInfo("America/Sao_Paulo")
        )
        assert f"{local:%d/%m/%Y %H:%M}" in line  # the law's hours are local (UTC misled)
        assert table.startswith("Cometida em: horário de Brasília.")
        assert p["kind"] == "outside_municipality"

        done = run_pontual("proposals", "confirm", p["proposal_id"], "--agent", "fiscal-9", **env)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith("erro:") and "--exception-answer" in done.stderr
        assert "que não tenha convênio com a DT/SOST" in done.stderr  # PB art. 25, X

        answer = "Origem em Porto (Portugal): município sem convênio com a DT/SOST."
        done = run_pontual(
            "proposals", "confirm", p["proposal_id"], "--agent", "fiscal-9",
            "--exception-answer", answer, **env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Auto de infração AI-4314548-" in done.stdout and "Notificar até" in done.stdout

        shown = json.loads(run_pontual("proposals", "show", p["proposal_id"], **env).stdout)
        assert [h["to"] for h in shown["history"]] == ["proposta", "confirmada"]
        assert shown["history"][0]["actor"] == f"os:{getpass.getuser()}"  # no --agent given
        assert shown["history"][1]["actor"] == "fiscal-9"

        pdf = tmp_path / "auto.pdf"
        done = run_pontual("proposals", "document", p["proposal_id"], "--out", str(pdf), **env)
        assert done.returncode == 0, done.stderr
        from pypdf import PdfReader

        text = " ".join(page.extract_text() for page in PdfReader(pdf).pages)
        assert "AUTO DE INFRAÇÃO" in text.upper() and shown["auto_number"] in text
        assert "art. 25" in text and "fiscal-9" in text
        assert "Resposta do agente: Origem em Porto (Portugal)" in " ".join(text.split())

        again = run_pontual("proposals", "confirm", p["proposal_id"], "--agent", "x", **env)
        assert again.returncode == 1
        assert again.stderr.startswith("erro:") and "Traceback" not in again.stderr

    def test_unknown_municipality(self, run_pontual, api_database_url) -> None:
        """A code without rulebook fails with one line listing the configured ones."""
        done = run_pontual(
            "proposals", "generate", "--municipality", "3550308", DATABASE_URL=api_database_url
        )
        assert done.returncode == 1
        assert "nenhum regulamento configurado" in done.stderr

    def test_generate_records_the_agent(self, run_pontual, tmp_path, api_database_url) -> None:
        """`generate --agent` names that agent on each new proposal's 'create' entry."""
        env = {"DATABASE_URL": api_database_url}
        findings = _analyze_outside_pinto_bandeira(run_pontual, tmp_path, "CLI-AG")
        done = run_pontual(
            "proposals", "generate", "--municipality", "4314548", "--findings", findings,
            "--agent", "fiscal-7", **env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = run_pontual("proposals", "list", "--municipality", "4314548", "--json", **env)
        (p,) = [r for r in json.loads(done.stdout) if r["vehicle_id"] == "CLI-AG"]
        shown = json.loads(run_pontual("proposals", "show", p["proposal_id"], **env).stdout)
        assert shown["history"][0]["action"] == "create"
        assert shown["history"][0]["actor"] == "fiscal-7"
