"""The final decision where the rulebook fixes no defence period (Porto Alegre's taxi decree:
"prazos não previstos", they are in Lei 11.582/2014): the agent states the date the period
ended, checked against the notification and today, and kept in the audit and the record.
"""

import datetime as dt

import pandas as pd
import pytest
import shapely
from sqlalchemy import select

from db.enforcement.models import ProposalFinding
from db.enforcement.workflow import (
    confirm,
    decide_defence,
    file_defence,
    finalize,
    generate_proposals,
    get_proposal,
    needs_period_end,
    notify,
    proposal_history,
    store_findings,
)
from db.fleet.models import Municipality
from enforcement._errors import ReviewDataError, TransitionError
from tracking.detectors.findings import make_findings

POA = "4314902"
TZ = "America/Sao_Paulo"
AT = dt.datetime(2025, 3, 5, 15, 0, tzinfo=dt.UTC)  # 12:00 in Porto Alegre


@pytest.fixture
def poa(db_session):
    db_session.add(Municipality(code=POA, name="Porto Alegre", uf="RS", timezone=TZ))
    db_session.flush()
    return db_session


def _taxi_auto(session, vehicle: str = "POA-F1") -> str:
    """A confirmed Porto Alegre taxi auto (art. 57 XI c, the pontuação chosen)."""
    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": vehicle,
            "stand_id": None,
            "started_at": ["2025-03-04T12:00:00Z"],
            "ended_at": ["2025-03-04T12:00:00Z"],
            "confidence": 0.9,
            "details": [{"reason": "reserved"}],
        }
    )
    found = make_findings(frame, [shapely.Point(-51.2, -30.0)])
    store_findings(session, found)
    assert generate_proposals(session, municipality=POA, timezone=TZ) == 1
    pid = session.execute(
        select(ProposalFinding.proposal_id).where(
            ProposalFinding.finding_id == found["finding_id"].iloc[0]
        )
    ).scalar_one()
    confirm(session, pid, agent_id="a", at=AT, pontuacao="autorizatário")
    return str(pid)


def test_without_a_rulebook_period_the_end_date_is_required(poa) -> None:
    """POA taxi: 15 s after the notification, no date: refused, the proposal unchanged."""
    pid = _taxi_auto(poa)
    notify(poa, pid, actor="a", at=AT)
    assert needs_period_end(get_proposal(poa, pid))
    with pytest.raises(ReviewDataError, match="informe a data em que o prazo terminou"):
        finalize(
            poa, pid, agent_id="s", reason="sem defesa no prazo", at=AT + dt.timedelta(seconds=15)
        )
    assert get_proposal(poa, pid).status == "notificada"


@pytest.mark.parametrize(
    ("ended", "message"),
    [
        (dt.date(2025, 3, 4), r"anterior à notificação \(05/03/2025\)"),
        (dt.date(2025, 4, 11), "não é anterior ao dia do passo"),
        (dt.date(2025, 4, 10), r"não é anterior ao dia do passo \(10/04/2025\)"),
    ],
)
def test_the_end_date_is_between_the_notification_and_today(poa, ended, message) -> None:
    """Before the notification's local day, or on or after the step's day (a period ending
    that day runs to its end): refused."""
    pid = _taxi_auto(poa)
    notify(poa, pid, actor="a", at=AT)
    with pytest.raises(ReviewDataError, match=message):
        finalize(
            poa,
            pid,
            agent_id="s",
            reason="sem defesa no prazo",
            period_ended_on=ended,
            at=AT + dt.timedelta(days=36),
        )
    assert get_proposal(poa, pid).status == "notificada"


def test_the_stated_date_is_audited_and_kept(poa) -> None:
    """A date in range: 'definitiva', the date in the audit entry and the document."""
    pid = _taxi_auto(poa)
    notify(poa, pid, actor="a", at=AT)
    p = finalize(
        poa,
        pid,
        agent_id="s",
        reason="Sem defesa no prazo da Lei 11.582/2014.",
        period_ended_on=dt.date(2025, 4, 4),
        at=AT + dt.timedelta(days=36),
    )
    assert p.status == "definitiva"
    assert p.document["final_period_ended_on"] == "2025-04-04"
    entry = proposal_history(poa, pid)[-1]
    assert (entry["action"], entry["period_ended_on"]) == ("finalize", "2025-04-04")


def test_after_a_rejected_defence_the_date_counts_from_the_decision(poa) -> None:
    """From 'defesa_indeferida': not before the decision's day."""
    pid = _taxi_auto(poa)
    notify(poa, pid, actor="a", at=AT)
    file_defence(poa, pid, actor="d", at=AT + dt.timedelta(days=2))
    decide_defence(
        poa,
        pid,
        agent_id="s",
        accepted=False,
        reason="sem prova do alegado",
        at=AT + dt.timedelta(days=10),
    )
    with pytest.raises(ReviewDataError, match=r"anterior à decisão da defesa \(15/03/2025\)"):
        finalize(
            poa,
            pid,
            agent_id="s",
            reason="sem recurso no prazo",
            period_ended_on=dt.date(2025, 3, 10),
            at=AT + dt.timedelta(days=30),
        )
    p = finalize(
        poa,
        pid,
        agent_id="s",
        reason="sem recurso no prazo",
        period_ended_on=dt.date(2025, 3, 31),
        at=AT + dt.timedelta(days=30),
    )
    assert p.status == "definitiva"


def test_with_a_rulebook_period_the_check_is_the_rulebooks(poa) -> None:
    """Fretamento (art. 32/33): the rulebook's periods decide; no date is stated."""
    from enforcement.proposals import propose
    from enforcement.rulebook import rulebooks_for

    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": "F-9",
            "stand_id": None,
            "started_at": ["2025-01-02T12:00:00Z"],
            "ended_at": ["2025-01-02T12:00:00Z"],
            "confidence": 0.9,
            "details": [{"reason": "alvara_expired"}],
        }
    )
    found = make_findings(frame, [shapely.Point(-51.2, -30.0)])
    store_findings(poa, found)
    fleet = pd.DataFrame({"vehicle_id": ["F-9"], "service": ["fretamento"]})
    (record,), _ = propose(found, rulebooks_for(POA), timezone=TZ, fleet=fleet)
    from db.enforcement.workflow import store_proposals

    assert store_proposals(poa, [record]) == 1
    pid = str(record["proposal_id"])
    at = dt.datetime(2025, 1, 3, 12, tzinfo=dt.UTC)
    confirm(poa, pid, agent_id="a", at=at)
    notify(poa, pid, actor="a", at=at)
    assert not needs_period_end(get_proposal(poa, pid))
    with pytest.raises(TransitionError, match="cabe recurso"):
        finalize(
            poa, pid, agent_id="s", reason="sem defesa no prazo", at=at + dt.timedelta(days=40)
        )
    with pytest.raises(ReviewDataError, match="o regulamento fixa o prazo de defesa"):
        finalize(
            poa,
            pid,
            agent_id="s",
            reason="sem defesa no prazo",
            period_ended_on=dt.date(2025, 2, 1),
            at=at + dt.timedelta(days=50),
        )
    p = finalize(
        poa, pid, agent_id="s", reason="sem defesa no prazo", at=at + dt.timedelta(days=50)
    )
    assert p.status == "definitiva" and "final_period_ended_on" not in p.document
