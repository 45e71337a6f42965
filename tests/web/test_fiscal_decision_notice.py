"""The proposal page's "Notificação da decisão": where the law counts the appeal from the
delivery of the decision (Porto Velho art. 32), the agent records its date, and the final
decision waits for it and for the period that follows.
"""

from __future__ import annotations

import datetime as dt
import html
import re
import secrets
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pandas as pd
import pytest
import shapely
from sqlalchemy import Engine, text
from web_fiscal import store_and_propose

from api.web.auth import SESSION_COOKIE, csrf_token_for
from tracking.detectors.findings import make_findings

PVH = "1100205"
ZONE = ZoneInfo("America/Porto_Velho")


def _post(client: httpx.Client, path: str, **form: str) -> httpx.Response:
    token = client.cookies.get(SESSION_COOKIE) or ""
    return client.post(path, data={"csrf_token": csrf_token_for(token), **form})


def _ago(days: int) -> dt.date:
    return dt.datetime.now(ZONE).date() - dt.timedelta(days=days)


def _row(engine: Engine, proposal_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT status, decision_notified_at, deadlines FROM proposals "
                    "WHERE proposal_id = :p"
                ),
                {"p": proposal_id},
            )
            .mappings()
            .one()
        )
        actions = conn.execute(
            text(
                "SELECT action FROM audit_log WHERE entity = 'proposal' AND entity_id = :p "
                "ORDER BY entry_id"
            ),
            {"p": proposal_id},
        ).scalars()
        return {**row, "audit": list(actions)}


def _rejected_in_porto_velho(engine: Engine) -> str:
    """A Porto Velho auto (art. 1º) issued 60 days ago, notified 55, defended 50 and its
    defence rejected 45 days ago (at 10:00 local)."""
    return _porto_velho_auto(engine, notified=55, defended=50, rejected=45)


def _porto_velho_auto(
    engine: Engine, *, notified: int, defended: int | None = None, rejected: int | None = None
) -> str:
    """A Porto Velho auto issued 5 days before its notification, notified, defended and rejected
    so many days ago."""
    from db.enforcement import workflow
    from db.engine import session_scope

    def at(days: int) -> dt.datetime:
        return dt.datetime.combine(_ago(days), dt.time(10), tzinfo=ZONE)

    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": f"PV{secrets.token_hex(3).upper()}",
            "stand_id": None,
            "started_at": [at(notified + 6).astimezone(dt.UTC)],
            "ended_at": [at(notified + 6).astimezone(dt.UTC)],
            "confidence": 0.9,
            "details": [{"reason": "revoked"}],
        }
    )
    (finding,) = make_findings(frame, [shapely.Point(-63.9, -8.76)]).to_dict("records")
    proposal = store_and_propose(engine, [finding], municipality=PVH)[finding["finding_id"]]
    with session_scope(engine) as session:
        workflow.confirm(session, proposal, agent_id="outro", at=at(notified + 5))
        workflow.notify(session, proposal, actor="outro", at=at(notified))
        if defended is not None:
            workflow.file_defence(session, proposal, actor="outro", at=at(defended))
        if rejected is not None:
            workflow.decide_defence(
                session, proposal, agent_id="outro", accepted=False, reason="sem prova do alegado",
                at=at(rejected),
            )  # fmt: skip
    return str(proposal)


@pytest.fixture
def agent(web_client) -> httpx.Client:
    return web_client("agent")


def test_the_decision_delivery_is_recorded_and_the_final_decision_waits_for_its_period(
    agent: httpx.Client, web_engine: Engine
) -> None:
    """The page offers the delivery's date (not before the decision); the final decision is
    refused (409) before the delivery is recorded and while the 30 days from it run; a date
    before the decision is refused on its field (422); the delivery recorded 40 days ago, the
    appeal is due 10 days ago and the decision becomes final; the form is then gone."""
    proposal = _rejected_in_porto_velho(web_engine)
    base = f"/fiscal/propostas/{proposal}"
    page = html.unescape(agent.get(base).text)
    assert (
        '<label for="data_notificacao_decisao">Data da entrega da notificação da decisão</label>'
        in page
    )
    assert f"não antes da decisão da defesa ({_ago(45):%d/%m/%Y})" in page
    assert "conta da notificação da decisão ao autuado, ainda não registrada" in page

    undelivered = _post(
        agent,
        f"{base}/finalizar",
        fundamentacao="Sem recurso cabível.",
        data_final=_ago(0).isoformat(),
    )
    assert undelivered.status_code == 409
    assert "que não foi registrada" in html.unescape(undelivered.text)

    early = _post(agent, f"{base}/notificar-decisao", data_notificacao_decisao=_ago(46).isoformat())
    assert early.status_code == 422
    error = re.search(
        r'<p id="data_notificacao_decisao-erro" class="field__error" role="alert">(.*?)</p>',
        html.unescape(early.text),
    )
    assert error is not None and "é anterior à decisão da defesa" in error.group(1)
    assert _row(web_engine, proposal)["decision_notified_at"] is None

    done = _post(agent, f"{base}/notificar-decisao", data_notificacao_decisao=_ago(40).isoformat())
    assert done.status_code == 303 and done.headers["location"].endswith("feito=notificar-decisao")
    row = _row(web_engine, proposal)
    assert row["status"] == "defesa_indeferida"
    assert row["decision_notified_at"].astimezone(ZONE).date() == _ago(40)
    assert row["deadlines"]["appeal"]["due"].startswith(_ago(10).isoformat())
    assert row["audit"][-1] == "notify_decision"
    page = html.unescape(agent.get(base).text)
    assert 'action="/fiscal/propostas/' + proposal + '/notificar-decisao"' not in page
    assert f"<dt>Decisão notificada em</dt><dd>{_ago(40):%d/%m/%Y}</dd>" in page

    still_open = _post(
        agent,
        f"{base}/finalizar",
        fundamentacao="Sem recurso cabível.",
        data_final=_ago(15).isoformat(),
    )
    assert still_open.status_code == 409
    assert f"cabe recurso, art. 32 até {_ago(10):%d/%m/%Y}" in html.unescape(still_open.text)
    final = _post(
        agent,
        f"{base}/finalizar",
        fundamentacao="Sem recurso no prazo.",
        data_final=_ago(5).isoformat(),
    )
    assert final.status_code == 303
    assert _row(web_engine, proposal)["status"] == "definitiva"


def test_without_a_defence_the_penalty_delivery_is_offered_after_the_defence_period(
    agent: httpx.Client, web_engine: Engine
) -> None:
    """Porto Velho art. 25 and 32: an auto notified 10 days ago (defence open) offers no
    delivery and its final decision waits for it; one notified 90 days ago, without a defence,
    offers it: delivered during the defence period it is refused, delivered 40 days ago the
    30-day appeal has ended and the decision is final."""
    recent = _porto_velho_auto(web_engine, notified=10)
    page = html.unescape(agent.get(f"/fiscal/propostas/{recent}").text)
    assert f'action="/fiscal/propostas/{recent}/notificar-decisao"' not in page
    assert "conta da notificação da decisão ao autuado, ainda não registrada" in page

    proposal = _porto_velho_auto(web_engine, notified=90)
    base = f"/fiscal/propostas/{proposal}"
    page = html.unescape(agent.get(base).text)
    assert f'action="{base}/notificar-decisao"' in page
    early = _post(
        agent,
        f"{base}/finalizar",
        fundamentacao="Sem defesa no prazo.",
        data_final=_ago(0).isoformat(),
    )
    assert early.status_code == 409
    assert "que não foi registrada" in html.unescape(early.text)
    inside = _post(
        agent, f"{base}/notificar-decisao", data_notificacao_decisao=_ago(65).isoformat()
    )
    assert inside.status_code == 409
    assert "ainda está no prazo de defesa" in html.unescape(inside.text)
    done = _post(agent, f"{base}/notificar-decisao", data_notificacao_decisao=_ago(40).isoformat())
    assert done.status_code == 303
    row = _row(web_engine, proposal)
    assert row["status"] == "notificada"
    assert row["deadlines"]["appeal"]["due"].startswith(_ago(10).isoformat())
    final = _post(
        agent,
        f"{base}/finalizar",
        fundamentacao="Sem recurso no prazo.",
        data_final=_ago(1).isoformat(),
    )
    assert final.status_code == 303
    assert _row(web_engine, proposal)["status"] == "definitiva"
