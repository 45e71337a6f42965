import datetime as dt

import pandas as pd
import pytest
import shapely
from sqlalchemy import delete, select, text
from sqlalchemy.exc import DBAPIError

from enforcement._errors import ProposalNotFoundError, TransitionError
from enforcement.models import AuditEntry, Proposal, ProposalFinding
from enforcement.workflow import (
    archive_lapsed,
    as_record,
    confirm,
    deadline_warnings,
    decide_defence,
    dismiss,
    file_defence,
    finding_ids_of,
    generate_proposals,
    get_proposal,
    notify,
    proposal_history,
    store_findings,
)
from fleet.models import Municipality
from tracking.detectors.findings import make_findings

PB = "4314548"
TZ = "America/Sao_Paulo"
T0 = dt.datetime(2025, 3, 4, 15, 0, tzinfo=dt.UTC)


def _findings(*starts: str, vehicle: str = "PB-01", kind: str = "queue_jump"):
    frame = pd.DataFrame(
        {
            "kind": kind,
            "vehicle_id": vehicle,
            "stand_id": "S1",
            "started_at": list(starts),
            "ended_at": list(starts),
            "confidence": 0.9,
            "details": [{"queue_position": 2}] * len(starts),
        }
    )
    return make_findings(frame, [shapely.Point(-51.45, -29.1)] * len(starts))


@pytest.fixture
def session(db_session):
    db_session.add(Municipality(code=PB, name="Pinto Bandeira", uf="RS", timezone=TZ))
    db_session.flush()
    return db_session


def _one(session, start: str, **kw) -> str:
    """Store one finding, propose, and return the proposal that rests on it."""
    findings = _findings(start, **kw)
    store_findings(session, findings)
    assert generate_proposals(session, municipality=PB, timezone=TZ) == 1
    return session.execute(
        select(ProposalFinding.proposal_id).where(
            ProposalFinding.finding_id == findings["finding_id"].iloc[0]
        )
    ).scalar_one()


class TestGenerateProposals:
    def test_stores_each_proposal_once(self, session) -> None:
        """Findings are proposed once; a second run proposes nothing new."""
        store_findings(session, _findings("2025-03-04T12:00:00Z", "2025-03-06T12:00:00Z"))
        assert generate_proposals(session, municipality=PB, timezone=TZ) == 2
        assert generate_proposals(session, municipality=PB, timezone=TZ) == 0
        p = session.execute(select(Proposal)).scalars().first()
        assert (p.provision, p.gravity, p.status) == ("art. 24, II", "média", "proposta")
        assert len(finding_ids_of(session, p.proposal_id)) == 1
        assert proposal_history(session, p.proposal_id)[0]["to"] == "proposta"


class TestConfirm:
    def test_confirm_issues_numbered_auto_and_sets_notification_due(self, session) -> None:
        """Confirmation numbers the auto, records the agent and the notification deadline."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        p = confirm(session, pid, agent_id="fiscal-7", at=T0)
        assert p.auto_number == f"AI-{PB}-2025-000001"
        assert p.status == "confirmada" and p.agent_id == "fiscal-7"
        assert p.deadlines["notification"]["due"].startswith("2025-04-03")
        (entry,) = [h for h in proposal_history(session, pid) if h["action"] == "confirm"]
        assert (entry["actor"], entry["from"], entry["to"]) == (
            "fiscal-7",
            "proposta",
            "confirmada",
        )

    @pytest.mark.parametrize(
        "at",
        [dt.datetime(1, 1, 1, tzinfo=dt.UTC), dt.datetime(9999, 12, 31, tzinfo=dt.UTC)],
    )
    def test_step_date_outside_the_registry_range_is_refused(self, session, at) -> None:
        """A review step dated in year 1 or 9999 is refused before anything is stored."""
        from fleet.dates import RegistryDateError

        pid = _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(RegistryDateError, match="'at' era"):
            confirm(session, pid, agent_id="fiscal-7", at=at)
        assert session.get(Proposal, pid).status == "proposta"

    def test_reincidence_counts_confirmed_only_and_inside_window(self, session) -> None:
        """A confirmed earlier infraction 300 days before makes a reincidence (fine R$ 507);
        one only proposed does not count."""
        _one(session, "2024-06-08T12:00:00Z")  # proposed, never confirmed
        first = _one(session, "2024-05-08T12:00:00Z")  # 300 days before 2025-03-04
        confirm(session, first, agent_id="a", at=T0)
        pid = _one(session, "2025-03-04T12:00:00Z")
        p = confirm(session, pid, agent_id="a", at=T0)
        assert p.reincidence_count == 1
        assert (p.fine_amount, p.fine_unit) == (507, "BRL")
        assert p.auto_number.endswith("000002")

    def test_reincidence_just_outside_window(self, session) -> None:
        """366 days before is outside Pinto Bandeira's 365-day window (art. 48)."""
        first = _one(session, "2024-03-03T12:00:00Z")
        confirm(session, first, agent_id="a", at=T0)
        p = confirm(session, _one(session, "2025-03-04T12:00:00Z"), agent_id="a", at=T0)
        assert p.reincidence_count == 0 and p.fine_amount is None

    def test_needs_an_agent(self, session) -> None:
        """Confirming without the agent's id is refused."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(TransitionError, match="agente"):
            confirm(session, pid, agent_id=" ")


class TestSteps:
    def test_full_path_to_decision(self, session) -> None:
        """proposta → confirmada → notificada → em_defesa → defesa_indeferida, each audited."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        confirm(session, pid, agent_id="a", at=T0)
        notify(session, pid, actor="a", at=T0 + dt.timedelta(days=10))
        p = get_proposal(session, pid)
        # 30 dias úteis from Fri 14 Mar 2025 (art. 53, CPC counting): Good Friday 18 Apr and
        # Tiradentes 21 Apr skipped
        assert p.deadlines["defence"]["due"].startswith("2025-04-29T23:59:59")
        assert as_record(p)["penalty_enforceable_from"].startswith("2025-04-29")
        file_defence(session, pid, actor="defensor", at=T0 + dt.timedelta(days=20))
        assert (
            as_record(get_proposal(session, pid))["penalty_enforceable_from"] is None
        )  # suspensive
        decide_defence(
            session,
            pid,
            agent_id="junta",
            accepted=False,
            reason="sem prova",
            at=T0 + dt.timedelta(days=40),
        )
        assert as_record(get_proposal(session, pid))["penalty_enforceable_from"].startswith(
            "2025-04-13"
        )
        steps = [(h["from"], h["to"]) for h in proposal_history(session, pid)]
        assert steps == [
            (None, "proposta"),
            ("proposta", "confirmada"),
            ("confirmada", "notificada"),
            ("notificada", "em_defesa"),
            ("em_defesa", "defesa_indeferida"),
        ]

    def test_dismiss_needs_reason_and_is_final(self, session) -> None:
        """Dismissal records the reason; a dismissed proposal cannot be confirmed."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(TransitionError, match="motivo"):
            dismiss(session, pid, agent_id="a", reason="")
        dismiss(session, pid, agent_id="a", reason="fila desfeita por ordem do fiscal")
        assert as_record(get_proposal(session, pid))["dismissed_reason"].startswith("fila")
        with pytest.raises(TransitionError, match="descartada"):
            confirm(session, pid, agent_id="a")

    def test_notification_after_30_days_is_refused_and_archived(self, session) -> None:
        """PB art. 36 § 1º: an auto not notified within 30 days is archived, not notified."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        confirm(session, pid, agent_id="a", at=T0)
        late = T0 + dt.timedelta(days=31)
        warnings = deadline_warnings(session, within_days=5, at=T0 + dt.timedelta(days=27))
        assert [(w["proposal_id"], w["deadline"], w["overdue"]) for w in warnings] == [
            (pid, "notification", False)
        ]
        with pytest.raises(TransitionError, match="prazo de notificação vencido"):
            notify(session, pid, actor="a", at=late)
        assert archive_lapsed(session, at=T0 + dt.timedelta(days=29)) == []
        assert archive_lapsed(session, at=late) == [pid]
        assert get_proposal(session, pid).status == "arquivada"

    def test_defence_out_of_time_is_refused(self, session) -> None:
        """A defence after its 30 business days (art. 53) is refused; on day 31 (calendar) it
        is still in time."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        confirm(session, pid, agent_id="a", at=T0)
        notify(session, pid, actor="a", at=T0)
        with session.begin_nested() as sp:
            file_defence(session, pid, actor="d", at=T0 + dt.timedelta(days=31))
            sp.rollback()
        with pytest.raises(TransitionError, match="fora do prazo"):
            file_defence(session, pid, actor="d", at=T0 + dt.timedelta(days=45))

    def test_unknown_proposal(self, session) -> None:
        """An unknown id is a named not-found error."""
        with pytest.raises(ProposalNotFoundError, match="não encontrada"):
            confirm(session, "P-nope", agent_id="a")


class TestNothingIsDeleted:
    @pytest.mark.parametrize("table", ["proposals", "findings", "proposal_findings"])
    def test_delete_is_refused(self, session, table) -> None:
        """The database refuses DELETE on findings, proposals and their links."""
        _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(DBAPIError, match="nunca são apagadas"), session.begin_nested():
            session.execute(text(f"DELETE FROM {table}"))

    def test_audit_is_append_only(self, session) -> None:
        """Audit entries cannot be deleted either."""
        _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(DBAPIError, match="só aceita inclusões"), session.begin_nested():
            session.execute(delete(AuditEntry))
