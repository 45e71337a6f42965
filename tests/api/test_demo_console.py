"""`pontual demo --console`: the simulated fleet's proposals and the demo logins, on PostGIS."""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from api.demo_console import (
    DEMO_ACCOUNTS,
    SIM_PREFIX,
    SYNTHETIC_DRIVER_PREFIX,
    ConsoleSeed,
    console_message,
    seed_console,
)

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def poa_engine(database_url: str) -> Iterator[Engine]:
    """A fresh database with Porto Alegre's municipalities and stands (what the demo loads)."""
    from factories import migrated_database

    from db.engine import make_engine
    from db.fleet.store import load_municipalities
    from db.stands.store import load_stands
    from fleet.loaders import PORTO_ALEGRE, read_municipalities
    from stands.loaders import read_stands_registry

    brazil = DATA / "brazil"
    with migrated_database(database_url, prefix="pontual_democonsole") as url:
        engine = make_engine(url)
        with engine.begin() as conn:
            load_municipalities(
                conn=conn,
                municipalities=read_municipalities(
                    brazil / "population/censo2022_populacao_municipios.csv",
                    boundaries_path=brazil / "boundaries/municipios_poa_pvh_pintobandeira.geojson",
                ),
            )
            stands = read_stands_registry(
                brazil / "taxi_stands/pontos_taxi_poa_2020-03-10.geojson",
                municipality=PORTO_ALEGRE,
                point_radius_m=30.0,
            )
            load_stands(conn=conn, stands=stands, retire_missing=True)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture(scope="module")
def runs(poa_engine: Engine) -> tuple[ConsoleSeed, ConsoleSeed]:
    """The seeding run twice on the same database."""
    first = seed_console(poa_engine, actor="test:demo")
    second = seed_console(poa_engine, actor="test:demo")
    return first, second


def _client(engine: Engine, **settings: Any) -> TestClient:
    from api.main import create_app
    from api.settings import Settings

    return TestClient(
        create_app(engine=engine, settings=Settings(live_worker=False, **settings)),
        follow_redirects=False,
    )


def _login(client: TestClient, username: str, password: str) -> Any:
    from web_helpers import csrf_from

    form = client.get("/entrar")
    return client.post(
        "/entrar",
        data={"username": username, "password": password, "csrf_token": csrf_from(form.text)},
    )


class TestSeedConsole:
    def test_first_run_stores_findings_and_proposals(
        self, runs: tuple[ConsoleSeed, ConsoleSeed]
    ) -> None:
        """The detectors found several kinds in the simulation; the agent's queue is not empty."""
        first, _ = runs
        assert first.findings_new == first.findings > 0
        assert len(first.findings_by_kind) >= 3
        assert first.fixes_new > 10_000
        assert first.proposals_new == first.proposals_open > 0

    def test_second_run_is_idempotent(
        self, runs: tuple[ConsoleSeed, ConsoleSeed], poa_engine: Engine
    ) -> None:
        """A second run stores nothing new, keeps the queue and gives new passwords."""
        from db.accounts.models import User
        from db.enforcement.models import Finding, Proposal

        first, second = runs
        assert (second.fixes_new, second.findings_new, second.proposals_new) == (0, 0, 0)
        assert second.findings == first.findings
        assert second.proposals_open == first.proposals_open
        assert all(second.passwords[u] != first.passwords[u] for u in first.passwords)
        with poa_engine.connect() as conn:
            findings = conn.scalar(select(func.count()).select_from(Finding))
            proposals = conn.scalar(select(func.count()).select_from(Proposal))
            users = conn.scalar(select(func.count()).select_from(User))
        assert findings == first.findings
        assert proposals == first.proposals_open
        assert users == len(DEMO_ACCOUNTS)

    def test_only_simulated_vehicles_are_named(self, runs: Any, poa_engine: Engine) -> None:
        """Every finding and proposal names a SIM- vehicle (or none): no real prefixo."""
        from db.enforcement.models import Finding, Proposal

        with poa_engine.connect() as conn:
            ids = set(conn.scalars(select(Finding.vehicle_id))) | set(
                conn.scalars(select(Proposal.vehicle_id))
            )
        ids.discard(None)
        assert ids and all(str(v).startswith(SIM_PREFIX) for v in ids)

    def test_synthetic_drivers_stored_and_marked(self, runs: Any, poa_engine: Engine) -> None:
        """The fictitious drivers and their links are in the registry, every one synthetic."""
        from db.fleet.models import Driver, DriverAssignment

        first, second = runs
        assert first.synthetic_drivers > 0 and first.driver_links > first.synthetic_drivers // 2
        assert (second.synthetic_drivers, second.driver_links) == (
            first.synthetic_drivers,
            first.driver_links,
        )
        assert first.findings_by_kind.get("driver_not_allowed", 0) > 0
        with poa_engine.connect() as conn:
            drivers = conn.execute(select(Driver.driver_id, Driver.name, Driver.synthetic)).all()
            links = conn.scalars(select(DriverAssignment.vehicle_id)).all()
        assert len(drivers) == first.synthetic_drivers
        for did, name, synthetic in drivers:
            assert synthetic is True and did.startswith(SYNTHETIC_DRIVER_PREFIX), did
            assert name.startswith("Condutor Fictício "), name
        assert len(links) == first.driver_links
        assert all(v.startswith(SIM_PREFIX) for v in links)

    def test_changes_are_audited_without_password(self, runs: Any, poa_engine: Engine) -> None:
        """Each account's creation, then its reset, is in the audit log; no password in it."""
        from db.enforcement.models import AuditEntry

        first, second = runs
        with poa_engine.connect() as conn:
            rows = conn.execute(
                select(AuditEntry.entity_id, AuditEntry.action, AuditEntry.details).where(
                    AuditEntry.entity == "user", AuditEntry.actor == "test:demo"
                )
            ).all()
        for account in DEMO_ACCOUNTS:
            actions = [a for u, a, _ in rows if u == account.username]
            assert actions == ["create", "set_password"]
        text = repr([d for *_, d in rows])
        assert not any(p in text for p in [*first.passwords.values(), *second.passwords.values()])

    def test_each_account_logs_in_on_its_page(self, runs: Any, poa_engine: Engine) -> None:
        """The new password opens each account's landing page; the previous one is refused."""
        first, second = runs
        with _client(poa_engine) as client:
            for account in DEMO_ACCOUNTS:
                old = _login(client, account.username, first.passwords[account.username])
                assert old.status_code != 303
                new = _login(client, account.username, second.passwords[account.username])
                assert new.status_code == 303
                assert new.headers["location"] == account.landing
                assert client.get(account.landing).status_code == 200
                client.cookies.clear()

    def test_agent_queue_and_supervisor_stands(self, runs: Any, poa_engine: Engine) -> None:
        """The agent's queue lists SIM- proposals; the supervisor sees their stands; banner."""
        _, second = runs
        with _client(poa_engine, simulated_data=True) as client:
            _login(client, "demo_fiscal", second.passwords["demo_fiscal"])
            queue = client.get("/fiscal/propostas")
            assert queue.status_code == 200
            assert SIM_PREFIX in queue.text and "Dados simulados" in queue.text
            client.cookies.clear()
            _login(client, "demo_supervisor", second.passwords["demo_supervisor"])
            page = client.get("/supervisao")
            assert page.status_code == 200 and "Dados simulados" in page.text
            for stand_id in second.supervisor_stands:
                assert f"/supervisao/pontos/{stand_id}" in page.text
        with _client(poa_engine) as client:
            assert "Dados simulados" not in client.get("/entrar").text

    def test_live_detection_raises_the_alerts(self, runs: Any, poa_engine: Engine) -> None:
        """The simulated fixes went through the live detection: alerts of several kinds, each
        of a stored finding, of a SIM- vehicle or none; the second run raises none."""
        from db.enforcement.models import Alert, Finding

        first, second = runs
        assert first.alerts_new == first.alerts > 10
        assert (second.alerts_new, second.alerts) == (0, first.alerts)
        with poa_engine.connect() as conn:
            rows = conn.execute(
                select(Alert.kind, Alert.vehicle_id, Finding.kind).join(
                    Finding, Finding.finding_id == Alert.finding_id
                )
            ).all()
        assert len(rows) == first.alerts
        assert len({kind for kind, *_ in rows}) >= 3
        for kind, vehicle, finding_kind in rows:
            assert kind == finding_kind
            assert vehicle is None or vehicle.startswith(SIM_PREFIX), vehicle

    def test_agent_sees_the_alerts(self, runs: Any, poa_engine: Engine) -> None:
        """The agent's inbox and alerts page list the simulated alerts, each linking to its
        evidence, which opens."""
        _, second = runs
        with _client(poa_engine, simulated_data=True) as client:
            _login(client, "demo_fiscal", second.passwords["demo_fiscal"])
            page = client.get("/fiscal/alertas")
            assert page.status_code == 200
            assert f"{second.alerts} {'alerta' if second.alerts == 1 else 'alertas'}." in page.text
            items = re.findall(r'<li class="alert" data-alert-id="([^"]+)"', page.text)
            assert items and all(i.startswith("alert-") for i in items)
            assert "Veículo SIM-" in page.text
            evidence = re.search(r'<a href="(/fiscal/achados/[^"]+)">Ver a evidência', page.text)
            assert evidence is not None
            assert client.get(evidence.group(1)).status_code == 200
            inbox = client.get("/fiscal")
            assert inbox.status_code == 200 and 'class="alert" data-alert-id="alert-' in inbox.text

    def test_a_limit_outside_the_law_is_named_in_words(self, runs: Any, poa_engine: Engine) -> None:
        """The simulation's overdue inspections are judged by a period the Porto Alegre decree
        does not fix: the proposal page says so in words, with no command-line option."""
        from db.enforcement.models import Proposal

        _, second = runs
        with poa_engine.connect() as conn:
            proposal_id = conn.scalars(
                select(Proposal.proposal_id).where(
                    Proposal.provision.startswith("art. 57, XIV"),
                    Proposal.vehicle_id.startswith(SIM_PREFIX),
                )
            ).first()
        assert proposal_id is not None
        with _client(poa_engine, simulated_data=True) as client:
            _login(client, "demo_fiscal", second.passwords["demo_fiscal"])
            page = client.get(f"/fiscal/propostas/{proposal_id}")
        assert page.status_code == 200
        text = html.unescape(page.text)
        assert "o regulamento não fixa o prazo máximo desde a última vistoria" in text
        assert (
            "Limite fora do regulamento: o texto não fixa este limite (idade máxima da "
            "vistoria)." in " ".join(re.sub(r"<[^>]+>", "", text).split())
        )
        assert "--thresholds" not in text and "max_inspection_age_days" not in text


class TestConsoleMessage:
    def test_url_four_logins_and_how_to_stop(self) -> None:
        """The message names the URL, each login with its password and page, and Ctrl+C."""
        done = ConsoleSeed(
            passwords={a.username: f"senha-{a.role}-xyz" for a in DEMO_ACCOUNTS},
            supervisor_stands=["2", "276"],
            first_day=dt.date(2024, 3, 4),
            last_day=dt.date(2024, 3, 10),
            vehicles=25,
            fixes_new=1,
            findings=30,
            findings_new=30,
            proposals_new=12,
            proposals_open=12,
            synthetic_drivers=40,
            driver_links=55,
            alerts=9,
            alerts_new=9,
        )
        text = "\n".join(console_message(base_url="http://127.0.0.1:8000", done=done))
        assert "http://127.0.0.1:8000/entrar" in text
        for account in DEMO_ACCOUNTS:
            line = next(x for x in text.splitlines() if f"usuário {account.username} " in x)
            assert f"senha senha-{account.role}-xyz" in line
            assert f"http://127.0.0.1:8000{account.landing}" in line
        flat = " ".join(text.split())  # the paragraph on the simulation is wrapped
        assert "DADOS SIMULADOS" in flat and "04/03/2024 a 10/03/2024" in flat
        assert "pontos 2, 276" in flat and "12 proposta(s) na fila" in flat
        assert "9 alerta(s) da detecção ao vivo" in flat
        assert "alertas: http://127.0.0.1:8000/fiscal/alertas" in flat
        assert "Ctrl+C" in flat and "PostGIS local continua em execução" in flat
        assert (
            "CONDUTORES FICTÍCIOS: os 40 condutores da simulação" in flat and "55 vínculos" in flat
        )
        assert "não são pessoas reais" in flat


class TestPortTaken:
    def test_refused_before_the_demo_work(self, tmp_path: Path) -> None:
        """`demo --console` on a port in use says so and exits 1 before loading anything."""
        import socket

        from typer.testing import CliRunner

        from api.cli import app

        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            args = ["demo", "--console", "--no-open", "--port", str(port)]
            result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "demo")])
        assert result.exit_code == 1
        assert f"não foi possível abrir 127.0.0.1:{port}" in result.output
        assert not (tmp_path / "demo").exists()  # nothing written: no demo work done
