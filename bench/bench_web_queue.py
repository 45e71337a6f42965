"""Benchmark: the agent's proposal queue (``/fiscal/propostas``) over 50,000 proposals.

A throwaway database ``pontual_bench_queue_<hex>`` is created on the server of ``--url`` (else
``DATABASE_URL``, else the local cluster ``pontual db start`` manages), migrated, seeded with
``--proposals`` proposals, and dropped at the end. The proposals are drawn from the bundled
rulebooks' rules (their provisions and verbatim excerpts, so rows have their real width) for
3,677 vehicles and 379 stands over a year, in the review states an office would hold (most
still ``proposta``). Two figures per filter, each the median and the worst of ``--repeat``
runs after one warm-up:

- **query**: :func:`api.web.agent.queue_context`, what the page computes (the counts per
  status and per kind, the page of 50 rows) on one session;
- **page**: ``GET /fiscal/propostas?...`` through the whole app in-process (FastAPI's
  ``TestClient``: the session cookie's lookup, the queries, the template), server time
  without the network.

``--without-indexes`` drops the indexes of migration 0011 first (to see what they buy).

    .venv/bin/python bench/bench_web_queue.py
    .venv/bin/python bench/bench_web_queue.py --proposals 50000 --repeat 9 --without-indexes
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUEUE_INDEXES = (
    "ix_proposals_queue_order",
    "ix_proposals_kind_committed",
    "ix_proposals_stand_committed",
    "ix_proposals_facets",
)
N_VEHICLES = 3_677
N_STANDS = 379
STATUS_WEIGHTS = {
    "proposta": 0.55,
    "confirmada": 0.12,
    "descartada": 0.15,
    "notificada": 0.06,
    "em_defesa": 0.02,
    "defesa_deferida": 0.01,
    "defesa_indeferida": 0.02,
    "definitiva": 0.05,
    "arquivada": 0.02,
}
USERNAME = "bench_fiscal"
PASSWORD = "senha-do-bench-123"  # noqa: S105 (a throwaway database)


def _database(url: str | None) -> tuple[str, str]:
    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import create_database, parse_url
    from db.migrate import upgrade

    base = url or database_url(get_settings())
    name = f"pontual_bench_queue_{secrets.token_hex(4)}"
    bench_url = parse_url(base).set(database=name).render_as_string(hide_password=False)
    create_database(bench_url)
    upgrade(bench_url)
    return base, bench_url


def _rules() -> list[tuple[str, Any, Any]]:
    """Every (municipality, rulebook, rule) of the bundled taxi rulebooks."""
    from enforcement.rulebook import bundled_rulebooks

    return [
        (code, book, rule)
        for (code, service), book in sorted(bundled_rulebooks().items())
        if service == "taxi"
        for rule in book.rules
    ]


def _seed(engine: Any, n: int, rng: random.Random) -> dict[str, Any]:
    """Insert ``n`` proposals (and their municipalities, one agent); return sample values."""
    from sqlalchemy import insert, text

    from api import accounts
    from db.enforcement.models import Proposal
    from db.engine import session_scope
    from db.fleet.models import Municipality
    from fleet.loaders import UF_TIMEZONES

    rules = _rules()
    statuses, weights = zip(*STATUS_WEIGHTS.items(), strict=True)
    end = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    rows = []
    autos = 0
    for i in range(n):
        code, book, rule = rules[rng.randrange(len(rules))]
        status = rng.choices(statuses, weights)[0]
        at = end - dt.timedelta(seconds=rng.randrange(365 * 86_400))
        stand = f"S{rng.randrange(1, N_STANDS + 1):03d}" if rng.random() < 0.6 else None
        confirmed = status not in ("proposta", "descartada")
        autos += confirmed
        rows.append(
            {
                "proposal_id": f"P{i:07d}{secrets.token_hex(6)}",
                "municipality_code": code,
                "service": "taxi",
                "kind": rule.kind,
                "vehicle_id": f"V{rng.randrange(1, N_VEHICLES + 1):04d}",
                "rule_key": f"{code}:taxi:{rule.key}",
                "article": rule.article,
                "inciso": rule.inciso,
                "paragraph": rule.paragraph,
                "provision": rule.provision,
                "excerpt": rule.excerpt,
                "gravity": rule.gravity,
                "penalty": rule.penalty,
                "measure": rule.measure,
                "pontuacao": rule.pontuacao,
                "reincidence_count": rng.choice((0, 0, 0, 0, 1)),
                "status": status,
                "deadlines": {},
                "committed_at": at,
                "committed_until": at + dt.timedelta(minutes=rng.randrange(1, 40)),
                "confidence": round(rng.uniform(0.5, 1.0), 4),
                "auto_number": f"AI-{code}-{at.year}-{autos:06d}" if confirmed else None,
                "agent_id": USERNAME if status != "proposta" else None,
                "document": {
                    "stand_id": stand,
                    "law": book.law,
                    "note": rule.note,
                    "fine_note": rule.fine_note,
                    "exception": None,
                    "pontuacao_choices": list(rule.pontuacao_choices),
                    "reincidence_priors": [],
                },
            }
        )
    books = {c: b for c, b, _ in rules}
    municipalities = [
        {"code": c, "name": b.municipality_name, "uf": b.uf, "timezone": UF_TIMEZONES.get(b.uf)}
        for c, b in books.items()
    ]
    with session_scope(engine) as session:
        session.execute(insert(Municipality).values(municipalities))
        for start in range(0, len(rows), 5_000):
            session.execute(insert(Proposal), rows[start : start + 5_000])
        accounts.create_user(session=session, username=USERNAME, password=PASSWORD, role="agent")
    with engine.connect() as conn:  # a settled table, as autovacuum leaves it
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(
            text("VACUUM ANALYZE proposals")
        )
    sample = rows[n // 2]
    return {
        "vehicle": sample["vehicle_id"],
        "stand": next(r["document"]["stand_id"] for r in rows if r["document"]["stand_id"]),
        "month_from": (end - dt.timedelta(days=60)).date().isoformat(),
        "month_to": (end - dt.timedelta(days=31)).date().isoformat(),
        "quarter_from": (end - dt.timedelta(days=120)).date().isoformat(),
        "quarter_to": (end - dt.timedelta(days=30)).date().isoformat(),
    }


def _scenarios(s: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    return [
        ("to review (default: proposta), page 1", {}),
        ("every state, page 1", {"situacao": ""}),
        ("every state, page 500 (offset 24,950)", {"situacao": "", "pagina": "500"}),
        ("kind longer_route", {"situacao": "", "tipo": "longer_route"}),
        ("stand", {"situacao": "", "ponto": s["stand"]}),
        ("vehicle", {"situacao": "", "veiculo": s["vehicle"]}),
        ("one month", {"situacao": "", "de": s["month_from"], "ate": s["month_to"]}),
        ("confidence ≥ 90 %", {"situacao": "", "confianca": "90"}),
        (
            "proposta + unlicensed_stand_use + 3 months + ≥ 70 %",
            {
                "tipo": "unlicensed_stand_use",
                "de": s["quarter_from"],
                "ate": s["quarter_to"],
                "confianca": "70",
            },
        ),
        ("stand + kind", {"situacao": "", "ponto": s["stand"], "tipo": "unlicensed_stand_use"}),
    ]


def _timed(run: Any, repeat: int) -> tuple[float, float]:
    run()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    """Seed, time every filter, print a Markdown table, drop the database."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server URL (default: DATABASE_URL, local)")
    parser.add_argument("--proposals", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--without-indexes", action="store_true")
    args = parser.parse_args()

    from fastapi.testclient import TestClient
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from api.main import create_app
    from api.settings import Settings
    from api.web.agent import queue_context
    from db.engine import drop_database, make_engine

    _, url = _database(args.url)
    engine = make_engine(url)
    try:
        t0 = time.perf_counter()
        sample = _seed(engine, args.proposals, random.Random(args.seed))
        print(f"seeded {args.proposals:,} proposals in {time.perf_counter() - t0:.1f} s")
        if args.without_indexes:
            with engine.begin() as conn:
                for name in QUEUE_INDEXES:
                    conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
        app = create_app(engine=engine, settings=Settings(login_rate_limit_per_min=10_000))
        client = TestClient(app, base_url="http://127.0.0.1")
        form = client.get("/entrar").text
        token = form.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        login = client.post(
            "/entrar",
            data={"username": USERNAME, "password": PASSWORD, "csrf_token": token},
            follow_redirects=False,
        )
        assert login.status_code == 303, login.text
        zone = ZoneInfo("America/Sao_Paulo")
        print(
            f"\n{args.proposals:,} proposals; indexes of 0011: "
            f"{'dropped' if args.without_indexes else 'present'}; median / worst of "
            f"{args.repeat} runs, ms\n"
        )
        print("| filter | rows | query (median / worst) | page (median / worst) |")
        print("|---|---:|---:|---:|")
        results = []
        for name, params in _scenarios(sample):
            full = {k: params.get(k) for k in (*params, "pagina")}
            with Session(engine) as session:
                q = _timed(lambda s=session, p=full: queue_context(s, p, zone), args.repeat)
                total = queue_context(session, full, zone)["total"]

            def page(p: dict[str, str] = params) -> None:
                response = client.get("/fiscal/propostas", params=p)
                assert response.status_code == 200, response.status_code

            g = _timed(page, args.repeat)
            results.append({"filter": name, "rows": total, "query_ms": q, "page_ms": g})
            print(f"| {name} | {total:,} | {q[0]:.0f} / {q[1]:.0f} | {g[0]:.0f} / {g[1]:.0f} |")
        client.close()
        print("\n" + json.dumps(results))
    finally:
        engine.dispose()
        drop_database(url)


if __name__ == "__main__":
    main()
