"""`pontual demo --console`: the web console on the demo's database, with a login per role.

After the demo has loaded Porto Alegre's real stands and fleet, :func:`seed_console`:

1. simulates a small Porto Alegre fleet on the real stands (:mod:`fleet.simulation`, the
   independent simulator of the detectors' evaluation; seeded, so every run is the same): the
   vehicles' MOVEMENTS ARE SIMULATED, their ids carry :data:`SIM_PREFIX` (``SIM-1421``) so no
   real prefixo is accused, and every page of the console says so (setting
   ``PONTUAL_SIMULATED_DATA``); its drivers are FICTITIOUS (:mod:`fleet.sim_registry`: ids
   ``SINT-C0001``, names "Condutor Fictício 0001", ``synthetic`` true in the registry);
2. reads the simulated files back with the readers of ``pontual analyze`` (fleet, drivers and
   driver links included) and runs the real pipeline (:func:`engines.pipeline.analyze_pings`,
   every detector);
3. stores the simulated fleet (``SIM-`` prefixos with their documents and licences), the
   synthetic drivers and their links (by the loaders of ``pontual import``) and the
   simulated fixes (the evidence maps of the proposals); runs those fixes through the live
   detection of ``pontual serve`` (:func:`live_alerts`), which stores the findings it completes
   and raises the agent's alerts; then stores the batch's findings (those the live path has
   not stored yet) and the proposals of Porto Alegre's rulebook, by the paths of ``pontual
   proposals generate``;
4. creates one account per role (:data:`DEMO_ACCOUNTS`), or resets its password, with a new
   random password each run; the supervisor is linked to stands where the simulated taxis queue.

Running it again changes nothing but the passwords: fixes, findings and proposals have
deterministic ids and are stored once, and fixes already stored are not detected again (no
new alert).
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import secrets
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

SIM_PREFIX = "SIM-"
"""Prefix of the simulated vehicles' ids: a real prefixo is never named in a simulated finding."""
SYNTHETIC_DRIVER_PREFIX = "SINT-C"
"""Prefix of the simulation's fictitious drivers' ids (:mod:`fleet.sim_registry`)."""
SIM_SEED = 7
SIM_DAYS = 7
SIM_PREFIXOS = 25
MESSAGE_WIDTH = 100
"""Columns of the message's wrapped paragraph."""
SUPERVISED_STANDS = 3
"""Stands given to the demo supervisor: the first of the simulated groups' stands."""


@dataclass(frozen=True)
class DemoAccount:
    """One demo login: its role, username and the page the role lands on."""

    role: str
    username: str
    landing: str
    full_name: str


DEMO_ACCOUNTS: tuple[DemoAccount, ...] = (
    DemoAccount("admin", "demo_admin", "/admin", "Administração (demonstração)"),
    DemoAccount("agent", "demo_fiscal", "/fiscal", "Fiscal (demonstração)"),
    DemoAccount("supervisor", "demo_supervisor", "/supervisao", "Supervisor (demonstração)"),
    DemoAccount("planner", "demo_planejamento", "/planejamento", "Planejamento (demonstração)"),
)


@dataclass
class ConsoleSeed:
    """What :func:`seed_console` stored and the logins it set (passwords in clear, once)."""

    passwords: dict[str, str]
    """Password of each demo username (new at each run)."""
    supervisor_stands: list[str]
    first_day: dt.date
    last_day: dt.date
    vehicles: int
    fixes_new: int
    findings: int
    findings_new: int
    proposals_new: int
    proposals_open: int
    """Proposals of the simulated vehicles waiting for the agent (status ``proposta``)."""
    findings_by_kind: dict[str, int] = field(default_factory=dict)
    alerts: int = 0
    """Alerts of the simulation's findings (the agent's inbox and ``/fiscal/alertas``)."""
    alerts_new: int = 0
    """Of them, raised by this run's live detection."""
    synthetic_drivers: int = 0
    """Fictitious drivers (``SINT-C…``) in the registry, all marked ``synthetic``."""
    driver_links: int = 0
    """Their links to the simulated prefixos stored in the registry."""


def _no_progress(_: str) -> None:
    return None


def write_simulation(
    root: Path, *, seed: int = SIM_SEED, days: int = SIM_DAYS, n_prefixos: int = SIM_PREFIXOS
) -> dict[str, Path]:
    """Simulate the fleet (vehicles ``SIM-…``) and write its files into ``root``."""
    from fleet import simulation

    sim = simulation.simulate(seed=seed, days=days, n_prefixos=n_prefixos)
    assert sim.pings is not None
    sim.pings["vehicle_id"] = SIM_PREFIX + sim.pings["vehicle_id"].astype(str)
    for vehicle in sim.vehicles:
        vehicle.vid = SIM_PREFIX + vehicle.vid
    return simulation.write_files(sim, root, fmt="csv")


def analyze_simulation(
    paths: dict[str, Path],
) -> tuple[Any, Any, dict[str, Any], dict[str, dict[str, Any]]]:
    """Run ``pontual analyze --municipality``'s pipeline on a simulation's files.

    The thresholds are the simulation's over the limits Porto Alegre's taxi rulebook fixes (as
    ``pontual analyze`` and the live engine take them). Returns the analysis result, the
    validated fixes, ``meta.json`` and the thresholds used.
    """
    import geopandas as gpd

    from api.cli_analyze import law_thresholds, read_thresholds
    from api.inputs import read_stands_file
    from enforcement.rulebook import rulebooks_for
    from engines.pipeline import AnalysisParams, analyze_pings, cut_at_as_of
    from fleet import simulation
    from fleet.loaders import read_fleet
    from tracking.ingest import read_pings

    meta: dict[str, Any] = json.loads(paths["meta"].read_text(encoding="utf-8"))
    as_of = dt.date.fromisoformat(meta["as_of"])
    limits = read_thresholds(paths["thresholds"])[0] if "thresholds" in paths else {}
    limits = law_thresholds(rulebooks_for(simulation.MUNICIPALITY), limits)
    stands = read_stands_file(paths["stands"], radius_m=None)
    fleet = read_fleet(paths["fleet"], municipality=simulation.MUNICIPALITY)
    registry = read_registry(paths)
    boundary = gpd.read_file(paths["boundary"]).to_crs(4326).geometry.union_all()
    params = AnalysisParams(timezone=simulation.TIMEZONE)
    fixes, rejected = read_pings(paths["pings"], max_speed_kmh=params.max_speed_kmh)
    fixes = cut_at_as_of(fixes, as_of=as_of, timezone=params.timezone)
    result = analyze_pings(
        fixes,
        rejected,
        stands,
        fleet=fleet,
        boundary=boundary,
        as_of=as_of,
        thresholds=limits or None,
        params=params,
        **registry,
    )
    return result, fixes, meta, {k: dict(v) for k, v in (limits or {}).items()}


def read_registry(paths: dict[str, Path]) -> dict[str, Any]:
    """Read the simulation's synthetic drivers and links (as ``--drivers``, ``--driver-links``)."""
    from fleet.drivers import read_driver_links, read_drivers

    if "drivers" not in paths or "driver_links" not in paths:
        return {}
    return {
        "drivers": read_drivers(paths["drivers"]),
        "driver_links": read_driver_links(paths["driver_links"]),
    }


def simulated_analysis(
    *, seed: int = SIM_SEED, days: int = SIM_DAYS, n_prefixos: int = SIM_PREFIXOS
) -> tuple[Any, Any, dict[str, Any]]:
    """Simulate the fleet and run ``pontual analyze``'s pipeline on its files.

    Returns the analysis result, the validated fixes and the simulation's ``meta.json``.
    """
    result, fixes, meta, _ = _simulate(seed=seed, days=days, n_prefixos=n_prefixos)
    return result, fixes, meta


def _simulate(
    *, seed: int, days: int, n_prefixos: int
) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """:func:`simulated_analysis`, plus the registry frames read (fleet, drivers, links)."""
    from fleet import simulation
    from fleet.loaders import read_fleet

    with tempfile.TemporaryDirectory(prefix="pontual_demo_sim_") as tmp:
        paths = write_simulation(Path(tmp), seed=seed, days=days, n_prefixos=n_prefixos)
        result, fixes, meta, _ = analyze_simulation(paths)
        registry = read_registry(paths) | {
            "fleet": read_fleet(paths["fleet"], municipality=simulation.MUNICIPALITY)
        }
    return result, fixes, meta, registry


def seed_console(
    engine: Engine,
    *,
    actor: str | None = None,
    seed: int = SIM_SEED,
    days: int = SIM_DAYS,
    n_prefixos: int = SIM_PREFIXOS,
    progress: Callable[[str], None] = _no_progress,
) -> ConsoleSeed:
    """Store the simulated fleet's fixes, findings and proposals; set the demo accounts.

    Porto Alegre's stands must be in the database (``pontual demo`` loads them). ``actor``
    names who ran it in the audit log (default ``os:<user of the system>``).

    Raises
    ------
    api._errors.UserAdminError
        A supervisor stand is missing from the database (Porto Alegre's stands not loaded).
    """
    from db.enforcement.workflow import generate_report, store_findings
    from db.fleet.store import load_driver_links, load_drivers, load_fleet
    from db.tracking.store import copy_fixes
    from fleet.simulation import MUNICIPALITY, TIMEZONE

    who = actor or f"os:{getpass.getuser()}"
    progress("Simulando a frota e rodando os detectores (dados simulados)…")
    result, fixes, meta, registry = _simulate(seed=seed, days=days, n_prefixos=n_prefixos)
    progress("Gravando frota simulada, condutores fictícios, fixes, achados e propostas…")
    source = f"simulação (pontual demo --console, {seed})"
    with engine.begin() as conn:
        load_fleet(conn=conn, fleet=registry["fleet"], as_of=dt.date.fromisoformat(meta["as_of"]))
        load_drivers(
            conn=conn,
            drivers=registry["drivers"],
            actor=who,
            source=f"condutores fictícios da {source}",
            municipality=MUNICIPALITY,
        )
        load_driver_links(
            conn=conn,
            links=registry["driver_links"],
            actor=who,
            source=f"vínculos fictícios da {source}",
        )
        fixes_new = copy_fixes(conn, fixes, source=source)
        live: list[dict[str, Any]] = []
        if fixes_new:  # a new run's fixes only: a repeat run has nothing new to detect
            progress("Passando as posições pela detecção ao vivo (alertas da fiscalização)…")
            live = live_alerts(conn, fixes)
    with Session(engine) as session:
        findings_new = sum(1 for f in live if f["new"]) + store_findings(session, result.findings)
        proposals_new, _ = generate_report(
            session, municipality=MUNICIPALITY, timezone=TIMEZONE, actor=who
        )
        stands = [str(s) for s in meta["stands"][:SUPERVISED_STANDS]]
        passwords = set_demo_accounts(session, actor=who, supervisor_stands=stands)
        session.commit()
        open_count = _open_proposals(session)
        alert_count = _alerts_of(session, [str(f) for f in result.findings["finding_id"]])
    counts = result.findings["kind"].value_counts()
    return ConsoleSeed(
        passwords=passwords,
        supervisor_stands=stands,
        first_day=dt.date.fromisoformat(meta["first_day"]),
        last_day=dt.date.fromisoformat(meta["as_of"]),
        vehicles=int(meta["prefixos"]),
        fixes_new=fixes_new,
        findings=len(result.findings),
        findings_new=findings_new,
        proposals_new=proposals_new,
        proposals_open=open_count,
        findings_by_kind={str(k): int(n) for k, n in counts.items()},
        alerts=alert_count,
        alerts_new=sum(1 for f in live if f["alert_id"]),
        synthetic_drivers=int(registry["drivers"]["driver_id"].nunique()),
        driver_links=len(registry["driver_links"]),
    )


def live_alerts(conn: Connection, fixes: Any) -> list[dict[str, Any]]:
    """Run the simulated fixes through the live detection of ``pontual serve``; return its records.

    Alerts come only from the live path (:func:`api.alerts.detect_on_ingest`, as the ingest's
    worker runs it): it stores the findings the fixes complete and alerts the new ones. A
    finding the batch stored first would give no alert (its id is already stored), so this
    runs before the batch's findings are stored; the batch then adds the rest, without alerts
    (its thresholds scaled to the simulated week are the batch's only; live, a day is closed by
    the next day's first fix). Call it in the transaction that stored the fleet, the drivers
    and the fixes (the live detectors read them).
    """
    from api.alerts import detect_on_ingest
    from api.settings import get_settings
    from fleet.simulation import TIMEZONE

    settings = get_settings().model_copy(update={"timezone": TIMEZONE})
    return detect_on_ingest(conn, fixes, settings=settings)


def _open_proposals(session: Session) -> int:
    from db.enforcement.models import Proposal

    query = select(func.count()).where(
        Proposal.status == "proposta", Proposal.vehicle_id.startswith(SIM_PREFIX)
    )
    return int(session.scalar(query) or 0)


def _alerts_of(session: Session, finding_ids: list[str]) -> int:
    from db.enforcement.models import Alert

    query = select(func.count()).where(Alert.finding_id.in_(finding_ids))
    return int(session.scalar(query) or 0)


def set_demo_accounts(
    session: Session, *, actor: str, supervisor_stands: list[str]
) -> dict[str, str]:
    """Create each demo account, or reset its password (and role, stands, active state).

    Goes through :mod:`api.accounts` (argon2; a reset revokes the account's sessions) and
    writes each change to the audit log, never the password. Returns the new passwords by
    username. The caller commits.
    """
    from api import accounts
    from db.accounts.models import User
    from db.enforcement.models import AuditEntry

    passwords: dict[str, str] = {}
    for account in DEMO_ACCOUNTS:
        password = secrets.token_urlsafe(12)
        stands = supervisor_stands if account.role == "supervisor" else []
        user = session.scalar(select(User).where(User.username == account.username))
        details: dict[str, Any] = {"password": "aleatória (demonstração)", "via": "demo"}
        if user is None:
            accounts.create_user(
                session=session,
                username=account.username,
                password=password,
                role=account.role,
                full_name=account.full_name,
                stand_ids=stands,
            )
            action = "create"
            details |= {"role": account.role, "stand_ids": stands}
        else:
            before = (user.role, accounts.user_stands(session=session, user_id=user.user_id))
            if before != (account.role, sorted(stands)):
                accounts.set_role(
                    session=session,
                    username=account.username,
                    role=account.role,
                    stand_ids=stands or None,
                )
                details |= {"role": account.role, "stand_ids": stands}
            if user.disabled_at is not None:
                user.disabled_at = None
                details["enabled"] = True
            accounts.set_password(session=session, username=account.username, password=password)
            action = "set_password"
        session.add(
            AuditEntry(
                actor=actor,
                action=action,
                entity="user",
                entity_id=account.username,
                details=details,
            )
        )
        passwords[account.username] = password
    return passwords


def console_message(*, base_url: str, done: ConsoleSeed, local_database: bool = True) -> list[str]:
    """Say where the console is, the four logins and where each lands, and how to stop.

    ``local_database``: the database is the embedded PostGIS (it keeps running after Ctrl+C),
    not one of ``DATABASE_URL``.
    """
    from api.web.nav import ROLE_LABELS

    first, last = done.first_day.strftime("%d/%m/%Y"), done.last_day.strftime("%d/%m/%Y")
    simulated = (
        f"DADOS SIMULADOS: os deslocamentos dos {done.vehicles} veículos {SIM_PREFIX}… de "
        f"{first} a {last} são simulados (fleet/simulation.py, semente fixa) sobre os pontos "
        "reais de Porto Alegre; os achados vêm dos detectores reais (pipeline do pontual "
        "analyze) e as propostas, do regulamento de Porto Alegre. Nenhum prefixo real é acusado. "
        f"{done.findings} achado(s) da simulação ({done.findings_new} novos nesta execução); "
        f"{done.proposals_open} proposta(s) na fila da fiscalização "
        f"({done.proposals_new} nova(s) nesta execução); {done.alerts} alerta(s) da detecção "
        f"ao vivo, que recebeu as posições simuladas ({done.alerts_new} novo(s) nesta execução)."
    )
    if done.synthetic_drivers:
        simulated += (
            f" CONDUTORES FICTÍCIOS: os {done.synthetic_drivers} condutores da simulação "
            f'({SYNTHETIC_DRIVER_PREFIX}…, "Condutor Fictício …") e seus '
            f"{done.driver_links} vínculos, gravados no cadastro marcados como sintéticos, "
            "não são pessoas reais."
        )
    lines = [
        "",
        f"Console web da demonstração: {base_url}/ (página de entrada: {base_url}/entrar)",
        "",
        *textwrap.wrap(simulated, width=MESSAGE_WIDTH),
        "",
        "Entradas de demonstração (senhas novas a cada execução, mostradas só agora):",
    ]
    width = max(len(ROLE_LABELS[a.role]) for a in DEMO_ACCOUNTS)
    for account in DEMO_ACCOUNTS:
        lands = f"{base_url}{account.landing}"
        if account.role == "agent":
            lands += (
                f"  (alertas: {base_url}/fiscal/alertas; "
                f"fila de propostas: {base_url}/fiscal/propostas)"
            )
        elif account.role == "supervisor":
            lands += f"  (pontos {', '.join(done.supervisor_stands)})"
        lines.append(
            f"  {ROLE_LABELS[account.role]:<{width}}  usuário {account.username:<17}  "
            f"senha {done.passwords[account.username]}  →  {lands}"
        )
    database = (
        "O banco PostGIS local continua em execução depois (pontual db stop para pará-lo)."
        if local_database
        else "O banco é o de DATABASE_URL, não gerenciado pelo Pontual."
    )
    lines += ["", f"Para parar o servidor: Ctrl+C. {database}", ""]
    return lines
