import datetime as dt
import re

import pandas as pd
import pytest
import shapely
from sqlalchemy import delete, select, text
from sqlalchemy.exc import DBAPIError

from db.enforcement.models import AuditEntry, Finding, Proposal, ProposalFinding
from db.enforcement.workflow import (
    archive_lapsed,
    as_record,
    confirm,
    deadline_warnings,
    decide_defence,
    dismiss,
    file_defence,
    finalize,
    finding_ids_of,
    generate_proposals,
    generate_report,
    get_proposal,
    notify,
    notify_decision,
    proposal_history,
    refresh_findings,
    settle_provisional,
    store_findings,
)
from db.fleet.models import Municipality
from enforcement._errors import (
    DocumentError,
    ProposalNotFoundError,
    ReviewDataError,
    TransitionError,
)
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


class TestRefreshFindings:
    def test_a_file_replaces_the_evidence_of_an_unjudged_finding_only(self, session) -> None:
        """A finding stored live from its first days, then read from a later analysis with more
        (same id): the file's version replaces it while no proposal rests on it; once one
        does, the stored one is kept and said to differ."""
        first = _findings("2025-03-04T12:00:00Z", "2025-03-06T12:00:00Z")
        store_findings(session, first)
        later = first.copy()
        later["ended_at"] = later["ended_at"] + pd.Timedelta(days=1)
        later["details"] = [{"queue_position": 3}] * len(later)
        later["confidence"] = 0.95
        ids = set(first["finding_id"])
        assert refresh_findings(session, later) == (set(), ids, set())
        stored = session.execute(select(Finding.details, Finding.confidence)).all()
        assert {(d["queue_position"], c) for d, c in stored} == {(3, 0.95)}
        assert refresh_findings(session, later) == (set(), set(), set())  # the same again
        assert generate_proposals(session, municipality=PB, timezone=TZ) == 2
        assert refresh_findings(session, first) == (set(), set(), ids)
        stored = session.execute(select(Finding.details)).scalars().all()
        assert [d["queue_position"] for d in stored] == [3, 3]


class TestSettleProvisional:
    def test_a_provisional_finding_takes_its_later_versions(self, session) -> None:
        """A live finding announced before its day closed (details.provisional) takes each later
        version of the same id, the closing one last; a final one stored (by a batch) is never
        replaced by a provisional version."""
        early = _findings("2025-03-04T12:00:00Z")
        early = early.assign(details=[{"queue_position": 2, "provisional": True}])
        later = early.assign(
            ended_at=early["ended_at"] + pd.Timedelta(hours=2),
            details=[{"queue_position": 3, "provisional": True}],
        )
        final = later.assign(details=[{"queue_position": 4}])
        fid = early["finding_id"].iloc[0]
        assert settle_provisional(session, early.to_dict("records")) == set()  # not stored
        store_findings(session, early)
        assert settle_provisional(session, later.to_dict("records")) == {fid}
        assert settle_provisional(session, final.to_dict("records")) == {fid}
        assert settle_provisional(session, later.to_dict("records")) == set()  # final now
        stored = session.execute(select(Finding.details, Finding.ended_at)).one()
        assert stored.details == {"queue_position": 4}
        assert stored.ended_at == later["ended_at"].iloc[0].to_pydatetime()


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


class TestStepDates:
    def test_a_step_before_the_facts_is_refused(self, session) -> None:
        """An auto dated before the infraction, a notification before the auto, a defence
        before the notification: each refused (422), nothing stored; in order they pass."""

        pid = _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(ReviewDataError, match=r"anterior ao fim da infração \(04/03/2025"):
            confirm(session, pid, agent_id="a", at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
        with pytest.raises(ReviewDataError, match="anterior ao fim da infração"):
            dismiss(
                session, pid, agent_id="a", reason="engano na leitura", at=T0 - dt.timedelta(days=1)
            )
        assert get_proposal(session, pid).status == "proposta"
        confirm(session, pid, agent_id="a", at=T0)
        with pytest.raises(ReviewDataError, match="anterior à lavratura do auto"):
            notify(session, pid, actor="a", at=T0 - dt.timedelta(minutes=1))
        p = get_proposal(session, pid)
        assert p.status == "confirmada" and p.deadlines["notification"]["due"]
        notify(session, pid, actor="a", at=T0 + dt.timedelta(days=1))
        logged = [h for h in proposal_history(session, pid) if h["action"] == "notify"]
        assert logged[0]["step_at"] == (T0 + dt.timedelta(days=1)).isoformat()  # when taken
        with pytest.raises(ReviewDataError, match="anterior à entrega da notificação"):
            file_defence(session, pid, actor="d", at=T0)
        file_defence(session, pid, actor="d", at=T0 + dt.timedelta(days=2))
        assert get_proposal(session, pid).status == "em_defesa"

    def test_a_future_or_naive_date_is_refused(self, session) -> None:
        """A step not yet taken cannot be recorded, nor one without a time zone."""

        pid = _one(session, "2025-03-04T12:00:00Z")
        later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
        with pytest.raises(ReviewDataError, match="é futura"):
            confirm(session, pid, agent_id="a", at=later)
        with pytest.raises(ReviewDataError, match="fuso horário"):
            confirm(session, pid, agent_id="a", at=dt.datetime(2025, 3, 5, 12))
        assert get_proposal(session, pid).status == "proposta"


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
            reason="sem prova do alegado",
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
        # decided in another tab: the refusal names the states as people say them
        with pytest.raises(
            TransitionError, match="está 'defesa indeferida' .* situação 'em defesa'"
        ):
            decide_defence(
                session, pid, agent_id="junta", accepted=True, reason="prova apresentada",
                at=T0 + dt.timedelta(days=41),
            )  # fmt: skip

    def test_dismiss_needs_reason_and_is_final(self, session) -> None:
        """Dismissal records the reason; a dismissed proposal cannot be confirmed."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        for short in ("", "engano", "   não procede ", "aaaaaaaaaaaaaaaaaaaa", "12345678901234567"):
            with pytest.raises(ReviewDataError, match="motivo do descarte exige uma frase"):
                dismiss(session, pid, agent_id="a", reason=short)  # no audited reason
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


POA = "4314902"


@pytest.fixture
def poa(db_session):
    db_session.add(Municipality(code=POA, name="Porto Alegre", uf="RS", timezone=TZ))
    db_session.flush()
    return db_session


def _proposal(session, frame, municipality: str) -> str:
    store_findings(session, frame)
    assert generate_proposals(session, municipality=municipality, timezone=TZ) == 1
    return session.execute(
        select(ProposalFinding.proposal_id).where(
            ProposalFinding.finding_id == frame["finding_id"].iloc[0]
        )
    ).scalar_one()


def _route(start: str, vehicle: str = "PB-07"):
    frame = pd.DataFrame(
        {
            "kind": "longer_route",
            "vehicle_id": vehicle,
            "stand_id": None,
            "started_at": [start],
            "ended_at": [start],
            "confidence": 0.9,
            "details": [{"ratio": 1.9, "reference_may_be_wrong": False}],
        }
    )
    return make_findings(frame, [shapely.Point(-51.45, -29.1)])


class TestConfirmAnswersTheException:
    def test_longer_route_cannot_be_confirmed_without_the_answer(self, session) -> None:
        """PB art. 25 III: without the agent's answer to "salvo com autorização do usuário",
        the proposal stays a proposal."""
        pid = _proposal(session, _route("2025-03-04T12:00:00Z"), PB)
        with pytest.raises(TransitionError, match="salvo com autorização do usuário"):
            confirm(session, pid, agent_id="a", at=T0)
        with pytest.raises(TransitionError, match="--exception-answer"):
            confirm(session, pid, agent_id="a", at=T0, exception_answer="não")
        assert get_proposal(session, pid).status == "proposta"

    def test_answer_is_recorded_and_audited(self, session) -> None:
        """The answer, the question and who answered are kept on the proposal and audited."""
        pid = _proposal(session, _route("2025-03-04T12:00:00Z"), PB)
        answer = "Passageiro ouvido: não autorizou o trajeto."
        confirm(session, pid, agent_id="a", at=T0, exception_answer=answer)
        record = as_record(get_proposal(session, pid))
        assert record["exception"]["answer"] == answer
        assert record["exception"]["excerpt"] == "salvo com autorização do usuário"
        assert record["exception"]["answered_by"] == "a"
        (entry,) = [h for h in proposal_history(session, pid) if h["action"] == "confirm"]
        assert entry["exception_answer"] == answer

    def test_auto_stored_without_answer_is_not_printed(self, session) -> None:
        """An auto confirmed before answers were recorded cannot be printed: its exception is
        unresolved."""
        from db.enforcement.evidence import document_for
        from enforcement.documents import render_html

        pid = _proposal(session, _route("2025-03-04T12:00:00Z"), PB)
        p = get_proposal(session, pid)
        p.status, p.auto_number, p.confirmed_at = "confirmada", "AI-antigo-1", T0
        session.flush()
        document = document_for(session, pid)
        assert document["proposal"]["exception"]["answer"] is None
        with pytest.raises(DocumentError, match="exceção não resolvida"):
            render_html(document, kind="auto")

    def test_answer_for_a_rule_without_exception_is_refused(self, session) -> None:
        """Art. 24 II has no exception: an answer is a mistake, refused."""
        pid = _one(session, "2025-03-04T12:00:00Z")
        with pytest.raises(TransitionError, match="não tem exceção"):
            confirm(session, pid, agent_id="a", at=T0, exception_answer="usuário não autorizou")


class TestConfirmChoosesThePontuacao:
    def _barred(self, start: str):
        frame = pd.DataFrame(
            {
                "kind": "operating_while_barred",
                "vehicle_id": "POA-1",
                "stand_id": None,
                "started_at": [start],
                "ended_at": [start],
                "confidence": 0.9,
                "details": [{"reason": "reserved"}],
            }
        )
        return make_findings(frame, [shapely.Point(-51.2, -30.0)])

    def test_57_xi_needs_the_agents_choice(self, poa) -> None:
        """POA art. 57 XI c ("autorizatário ou condutor, conforme o caso"): the agent chooses."""
        pid = _proposal(poa, self._barred("2025-03-04T12:00:00Z"), POA)
        assert as_record(get_proposal(poa, pid))["pontuacao_choices"] == [
            "condutor",
            "autorizatário",
        ]
        with pytest.raises(TransitionError, match="esperado um de: condutor, autorizatário"):
            confirm(poa, pid, agent_id="a", at=T0)
        with pytest.raises(TransitionError, match="'ambos'"):
            confirm(poa, pid, agent_id="a", at=T0, pontuacao="ambos")
        p = confirm(poa, pid, agent_id="a", at=T0, pontuacao="autorizatário")
        assert p.pontuacao == "autorizatário"

    def test_a_fixed_pontuacao_cannot_be_changed(self, poa) -> None:
        """Where the text fixes the pontuação (art. 59 XIII), the agent cannot choose."""
        frame = pd.DataFrame(
            {
                "kind": "unlicensed_stand_use",
                "vehicle_id": "POA-1",
                "stand_id": "S1",
                "started_at": ["2025-03-04T12:00:00Z"],
                "ended_at": ["2025-03-04T12:00:00Z"],
                "confidence": 0.9,
                "details": [{"subtype": "boarding"}],
            }
        )
        pid = _proposal(poa, make_findings(frame, [shapely.Point(-51.2, -30.0)]), POA)
        with pytest.raises(TransitionError, match="fixada pelo texto legal"):
            confirm(
                poa,
                pid,
                agent_id="a",
                at=T0,
                pontuacao="condutor",
                exception_answer="táxi não acessível; usuário sem deficiência",
            )


class TestReincidenceNamesAndStatuses:
    def test_confirmed_auto_names_the_earlier_auto(self, session) -> None:
        """The second auto records the first one's number and date."""
        first = _one(session, "2024-08-12T12:00:00Z")
        confirm(session, first, agent_id="a", at=dt.datetime(2024, 8, 13, tzinfo=dt.UTC))
        pid = _one(session, "2025-03-04T12:00:00Z")
        confirm(session, pid, agent_id="a", at=T0)
        priors = as_record(get_proposal(session, pid))["reincidence_priors"]
        assert priors == [
            {
                "auto_number": f"AI-{PB}-2024-000001",
                "proposal_id": first,
                "committed_at": "2024-08-12T12:00:00Z",
                "status": "confirmada",
            }
        ]

    def _fretamento(self, poa, start: str) -> str:
        """Store a fretamento proposal (the registry has no service: the fleet frame says it)."""
        from db.enforcement.workflow import store_proposals
        from enforcement.proposals import propose
        from enforcement.rulebook import rulebooks_for

        frame = pd.DataFrame(
            {
                "kind": "operating_while_barred",
                "vehicle_id": "F-1",
                "stand_id": None,
                "started_at": [start],
                "ended_at": [start],
                "confidence": 0.9,
                "details": [{"reason": "alvara_expired"}],
            }
        )
        found = make_findings(frame, [shapely.Point(-51.2, -30.0)])
        store_findings(poa, found)
        fleet = pd.DataFrame({"vehicle_id": ["F-1"], "service": ["fretamento"]})
        (record,), _ = propose(found, rulebooks_for(POA), timezone=TZ, fleet=fleet)
        assert store_proposals(poa, [record]) == 1
        return str(record["proposal_id"])

    def test_fretamento_counts_only_final_decisions(self, poa) -> None:
        """Fretamento art. 19 § 5º: an auto notified, defended and rejected does not count
        until the decision is final (no appeal left); then the fine doubles (art. 21)."""
        first = self._fretamento(poa, "2024-05-02T12:00:00Z")
        at = dt.datetime(2024, 5, 3, 12, tzinfo=dt.UTC)
        confirm(poa, first, agent_id="a", at=at)
        notify(poa, first, actor="a", at=at + dt.timedelta(days=1))
        file_defence(poa, first, actor="d", at=at + dt.timedelta(days=5))
        decide_defence(
            poa,
            first,
            agent_id="s",
            accepted=False,
            reason="sem prova do alegado",
            at=at + dt.timedelta(days=20),
        )
        second = self._fretamento(poa, "2025-03-04T12:00:00Z")
        with poa.begin_nested() as sp:
            p = confirm(poa, second, agent_id="a", at=T0)
            assert p.reincidence_count == 0 and float(p.fine_amount) == 150.0
            sp.rollback()
        notify_decision(poa, first, actor="a", at=at + dt.timedelta(days=22))  # art. 33
        with pytest.raises(TransitionError, match="cabe recurso"):
            finalize(
                poa,
                first,
                agent_id="s",
                reason="sem recurso no prazo",
                at=at + dt.timedelta(days=30),
            )
        finalize(
            poa, first, agent_id="s", reason="sem recurso no prazo", at=at + dt.timedelta(days=40)
        )
        p = confirm(poa, second, agent_id="a", at=T0)
        assert p.reincidence_count == 1 and float(p.fine_amount) == 300.0
        assert as_record(p)["reincidence_priors"][0]["status"] == "definitiva"

    def test_finalize_waits_for_defence_and_appeal(self, poa) -> None:
        """Without a defence, the decision is final only after the defence period and the
        appeal period that follows it (fretamento art. 33: 15 days)."""
        pid = self._fretamento(poa, "2025-01-02T12:00:00Z")
        at = dt.datetime(2025, 1, 3, 12, tzinfo=dt.UTC)
        confirm(poa, pid, agent_id="a", at=at)
        notify(poa, pid, actor="a", at=at)
        with pytest.raises(TransitionError, match="cabe recurso, art. 33"):
            finalize(
                poa, pid, agent_id="s", reason="sem defesa no prazo", at=at + dt.timedelta(days=40)
            )
        p = finalize(
            poa, pid, agent_id="s", reason="sem defesa nem recurso", at=at + dt.timedelta(days=50)
        )
        assert p.status == "definitiva"
        assert [h["to"] for h in proposal_history(poa, pid)][-1] == "definitiva"


class TestGenerateReport:
    def test_a_prefixo_of_another_municipality_is_not_judged(self, session) -> None:
        """A Porto Alegre taxi's queue jump (art. 25 is Pinto Bandeira's) is not proposed when
        the agent generates Pinto Bandeira's proposals; a prefixo of Pinto Bandeira, or one the
        registry does not place, is."""
        from db.enforcement.workflow import count_of_other_municipalities, why_not_proposed
        from db.fleet.models import Vehicle

        session.add(Municipality(code="4314902", name="Porto Alegre", uf="RS", timezone=TZ))
        session.flush()
        session.add_all(
            [
                Vehicle(vehicle_id="POA-1", prefixo="POA-1", municipality_code="4314902"),
                Vehicle(vehicle_id="PB-02", prefixo="PB-02", municipality_code=PB),
            ]
        )
        session.flush()
        frames = [
            _findings("2025-03-04T12:00:00Z", vehicle=v) for v in ("POA-1", "PB-02", "NOVO-3")
        ]
        for frame in frames:
            store_findings(session, frame)
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 2
        assert sorted(p["vehicle_id"] for p in done.proposals) == ["NOVO-3", "PB-02"]
        assert count_of_other_municipalities(session, municipality=PB) == 1
        why = why_not_proposed(
            session, frames[0]["finding_id"].iloc[0], municipality=PB, timezone=TZ
        )
        assert why == (
            "o prefixo POA-1 é do cadastro de outro município (Porto Alegre/RS, 4314902): o "
            "regulamento escolhido não se aplica a ele"
        )
        why = why_not_proposed(  # Porto Alegre's decree has no queue rule: named so
            session, frames[0]["finding_id"].iloc[0], municipality="4314902", timezone=TZ
        )
        assert (
            why == "o regulamento de Porto Alegre/RS não tem dispositivo para este tipo de achado"
        )

    def test_low_confidence_findings_are_listed_for_review(self, session) -> None:
        """Live or stored findings under the floor make no proposal and are listed by id."""
        frame = _findings("2025-03-04T12:00:00Z")
        frame["confidence"] = 0.4
        store_findings(session, frame)
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 0 and done.proposals == []
        assert [r["finding_id"] for r in done.for_review] == list(frame["finding_id"])
        created, _ = generate_report(
            session, municipality=PB, timezone=TZ, confidence_floor={"queue_jump": 0.3}
        )
        assert created == 1

    def test_earlier_proposed_anomalies_count_for_repetition(self, poa) -> None:
        """POA 58 IX: a sixth anomaly counts the five already proposed within the hour."""

        def anomaly(start: str):
            frame = pd.DataFrame(
                {
                    "kind": "gps_anomaly",
                    "vehicle_id": "POA-9",
                    "stand_id": None,
                    "started_at": [start],
                    "ended_at": [start],
                    "confidence": 0.9,
                    "details": [{"pattern": "outlier"}],
                }
            )
            return make_findings(frame, [shapely.Point(-51.2, -30.0)])

        for minute in (10, 20, 30, 40, 50):  # 23:10 to 23:50 local
            store_findings(poa, anomaly(f"2025-03-05T02:{minute}:00Z"))
        assert generate_proposals(poa, municipality=POA, timezone=TZ) == 1
        store_findings(poa, anomaly("2025-03-05T03:05:00Z"))  # next local day, in the hour
        assert generate_proposals(poa, municipality=POA, timezone=TZ) == 1
        store_findings(poa, anomaly("2025-03-07T09:00:00Z"))  # alone: for review
        created, done = generate_report(poa, municipality=POA, timezone=TZ)
        assert created == 0 and len(done.for_review) == 1


class TestConfirmChecksTheLaw:
    def test_a_finding_judged_stricter_than_the_law_is_not_issued(self, poa) -> None:
        """POA art. 60 X: "mais de 60 dias". A proposal stored before the proposals' check of
        the law's limits, on a run judging 4 days, cannot become an auto; at 60 it can."""
        frame = make_findings(
            pd.DataFrame(
                {
                    "kind": "inactivity",
                    "vehicle_id": "POA-9",
                    "stand_id": None,
                    "started_at": ["2025-01-01T12:00:00Z"],
                    "ended_at": ["2025-03-04T03:00:00Z"],
                    "confidence": 0.9,
                    "details": [
                        {"never_seen": False, "silent": False, "thresholds": {"max_idle_days": 60}}
                    ],
                }
            ),
            [shapely.Point(-51.2, -30.0)],
        )
        pid = _proposal(poa, frame, POA)
        poa.execute(
            text(
                "UPDATE findings SET details = jsonb_set(details, "
                "'{thresholds,max_idle_days}', '4') WHERE finding_id = :f"
            ),
            {"f": frame["finding_id"].iloc[0]},
        )
        with pytest.raises(TransitionError, match=r"art\. 60, X: 60; na análise: 4\); descarte-a"):
            confirm(poa, pid, agent_id="a", at=T0)
        assert get_proposal(poa, pid).status == "proposta"
        poa.execute(
            text(
                "UPDATE findings SET details = jsonb_set(details, "
                "'{thresholds,max_idle_days}', '60') WHERE finding_id = :f"
            ),
            {"f": frame["finding_id"].iloc[0]},
        )
        assert confirm(poa, pid, agent_id="a", at=T0).status == "confirmada"


def _jump(start: str, end: str, vehicle: str = "PB-01"):
    frame = pd.DataFrame(
        {
            "kind": "queue_jump",
            "vehicle_id": vehicle,
            "stand_id": "S1",
            "started_at": [start],
            "ended_at": [end],
            "confidence": 0.9,
            "details": [{"queue_position": 2}],
        }
    )
    return make_findings(frame, [shapely.Point(-51.45, -29.1)])


class TestOneConductOneProposal:
    def test_overlapping_findings_of_a_run_make_one_proposal(self, session) -> None:
        """Two findings of one vehicle and rule whose periods overlap across local midnight
        (a sliding window's next day): one proposal resting on both, not one per day."""
        both = pd.concat(
            [
                _jump("2025-03-05T02:00:00Z", "2025-03-05T04:00:00Z"),  # 23:00 local, 4 Mar
                _jump("2025-03-05T03:30:00Z", "2025-03-05T05:00:00Z"),  # 00:30 local, 5 Mar
            ],
            ignore_index=True,
        )
        store_findings(session, both)
        assert generate_proposals(session, municipality=PB, timezone=TZ) == 1
        linked = session.execute(select(ProposalFinding.finding_id)).scalars().all()
        assert sorted(linked) == sorted(both["finding_id"])

    def test_a_finding_overlapping_a_judged_one_is_not_proposed_again(self, session) -> None:
        """Dismissed, the conduct does not come back under a later finding overlapping it: the
        later one is listed for review naming the earlier finding and proposal; a finding
        after it is proposed."""
        first = _jump("2025-03-05T02:00:00Z", "2025-03-05T04:00:00Z")
        pid = _proposal(session, first, PB)
        dismiss(
            session,
            pid,
            agent_id="a",
            reason="as esperas não formam fila",
            at=T0 + dt.timedelta(days=2),
        )
        again = _jump("2025-03-05T03:30:00Z", "2025-03-05T05:00:00Z")
        later = _jump("2025-03-06T03:30:00Z", "2025-03-06T05:00:00Z")
        store_findings(session, pd.concat([again, later], ignore_index=True))
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 1
        (item,) = done.for_review
        assert item["finding_id"] == again["finding_id"].iloc[0]
        assert item["reason"] == (
            f"período já julgado: sobrepõe-se ao achado {first['finding_id'].iloc[0]}, "
            f"da proposta {pid} (descartada)"
        )

    def test_a_stored_twin_of_a_decided_conduct_is_not_confirmed(self, session) -> None:
        """Two open proposals over one conduct (stored before that check): once the agent
        confirms one, the other cannot become a second auto; it names the first."""
        first = _jump("2025-03-05T02:00:00Z", "2025-03-05T04:00:00Z")
        twin = _jump("2025-03-05T03:30:00Z", "2025-03-05T05:00:00Z")
        pids = [_stored_apart(session, first, twin), _proposal(session, twin, PB)]
        _shift(session, first, dt.timedelta(0))
        assert confirm(session, pids[0], agent_id="a", at=T0 + dt.timedelta(days=2)).auto_number
        why = (
            f"período já julgado: sobrepõe-se ao achado {first['finding_id'].iloc[0]}, "
            f"da proposta {pids[0]} (confirmada); descarte-a"
        )
        with pytest.raises(TransitionError, match=re.escape(why)):
            confirm(session, pids[1], agent_id="a", at=T0 + dt.timedelta(days=2))
        assert get_proposal(session, pids[1]).status == "proposta"


def _stored_apart(session, frame, twin) -> str:
    """Propose ``frame`` 10 days away from ``twin``, so that ``twin`` is proposed on its own
    (as before the check of judged periods); :func:`_shift` by 0 puts it back."""
    pid = _proposal(session, frame, PB)
    _shift(session, frame, dt.timedelta(days=-10))
    return pid


def _shift(session, frame, by: dt.timedelta) -> None:
    fid = frame["finding_id"].iloc[0]
    session.execute(
        text("UPDATE findings SET started_at = :s, ended_at = :e WHERE finding_id = :f"),
        {
            "s": frame["started_at"].iloc[0].to_pydatetime() + by,
            "e": frame["ended_at"].iloc[0].to_pydatetime() + by,
            "f": fid,
        },
    )


def _overdue(start: str, last_inspection: str, vehicle: str = "PB-09"):
    """A day of service more than 365 days after the vehicle's last vistoria (PB art. 32 VII)."""
    reasons = [
        {
            "reason": "inspection_overdue",
            "last_inspection_on": last_inspection,
            "max_inspection_age_days": 365,
        }
    ]
    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": vehicle,
            "stand_id": None,
            "started_at": [start],
            "ended_at": [start],
            "confidence": 0.9,
            "details": [{"reason": "inspection_overdue", "reasons": reasons}],
        }
    )
    return make_findings(frame, [shapely.Point(-51.45, -29.1)])


class TestOneOmission:
    def test_days_of_service_after_one_missed_vistoria_make_one_proposal(self, session) -> None:
        """Three days of service with the same last vistoria, generated together, make one
        proposal (one missed vistoria, one infraction); days after it was proposed are listed
        for review naming it, whatever the agent decided; a later vistoria missed again is a
        new omission, proposed."""
        days = pd.concat(
            [_overdue(f"2025-05-0{d}T15:00:00Z", "2024-03-01") for d in (6, 7, 8)],
            ignore_index=True,
        )
        store_findings(session, days)
        assert generate_proposals(session, municipality=PB, timezone=TZ) == 1
        linked = session.execute(select(ProposalFinding.finding_id)).scalars().all()
        assert sorted(linked) == sorted(days["finding_id"])
        pid = session.execute(select(ProposalFinding.proposal_id)).scalars().first()
        at = T0 + dt.timedelta(days=70)
        dismiss(session, pid, agent_id="a", reason="vistoria feita fora do cadastro", at=at)
        later = _overdue("2025-06-02T15:00:00Z", "2024-03-01")
        again = _overdue("2026-06-02T15:00:00Z", "2025-05-20")
        store_findings(session, pd.concat([later, again], ignore_index=True))
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 1
        (item,) = done.for_review
        assert item["finding_id"] == later["finding_id"].iloc[0]
        assert item["reason"].startswith("omissão já julgada (last_inspection_on 2024-03-01)")
        assert f"da proposta {pid} (descartada)" in item["reason"]

    def test_a_stored_twin_of_a_dismissed_omission_is_not_confirmed(self, session) -> None:
        """Two open proposals over one missed vistoria (stored before that check): the one
        dismissed does not come back as the other's auto."""
        first, twin = (_overdue(f"2025-05-0{d}T15:00:00Z", "2024-03-01") for d in (6, 7))
        fid = first["finding_id"].iloc[0]
        pid = _proposal(session, first, PB)
        hide = "UPDATE findings SET details = jsonb_set(details, '{reasons,0,last_inspection_on}', "
        session.execute(text(hide + "'\"2024-01-01\"') WHERE finding_id = :f"), {"f": fid})
        other = _proposal(session, twin, PB)
        session.execute(text(hide + "'\"2024-03-01\"') WHERE finding_id = :f"), {"f": fid})
        at = T0 + dt.timedelta(days=70)
        dismiss(session, pid, agent_id="a", reason="vistoria feita fora do cadastro", at=at)
        with pytest.raises(TransitionError, match=r"omissão já julgada .* \(descartada\)"):
            confirm(session, other, agent_id="a", at=at)

    def test_an_expired_certificate_does_not_hide_the_missed_vistoria(self, session) -> None:
        """Days whose main reason is the expired certificate (review only in Pinto Bandeira)
        but which are also over 365 days since the last vistoria: one art. 32 VII proposal."""
        frame = pd.concat(
            [_overdue(f"2025-05-0{d}T15:00:00Z", "2024-03-01", vehicle="PB-10") for d in (6, 7)],
            ignore_index=True,
        )
        expired = {"reason": "inspection_expired", "inspection_valid_until": "2025-03-01"}
        frame["details"] = [
            {"reason": "inspection_expired", "reasons": [expired, *d["reasons"]]}
            for d in frame["details"]
        ]
        store_findings(session, frame)
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 1 and done.for_review == []
        (provision,) = session.execute(select(Proposal.provision)).scalars().all()
        assert provision == "art. 32, VII"

    def test_a_live_finding_not_settled_by_its_day_is_not_proposed(self, session) -> None:
        """A provisional finding (its day still open) and a withdrawn one are listed for
        review with the reason, never proposed."""
        provisional = _overdue("2025-05-06T15:00:00Z", "2024-03-01", vehicle="PB-11")
        provisional["details"] = [{**provisional["details"].iloc[0], "provisional": True}]
        withdrawn = _overdue("2025-05-06T15:00:00Z", "2024-03-01", vehicle="PB-12")
        withdrawn["details"] = [{**withdrawn["details"].iloc[0], "withdrawn": True}]
        store_findings(session, pd.concat([provisional, withdrawn], ignore_index=True))
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 0
        reasons = sorted(r["reason"].split(":")[0] for r in done.for_review)
        assert reasons == ["achado provisório", "achado retirado"]

    def test_an_expired_vistoria_is_not_proposed_in_pinto_bandeira(self, session) -> None:
        """Operating with the vistoria expired types no infraction of Lei 169/2015 by itself
        (art. 29 II is the missed date, art. 28 II's documents omit the vistoria): listed for
        review with both provisions, never proposed."""
        frame = _overdue("2025-05-06T15:00:00Z", "2024-03-01").assign(
            details=[{"reason": "inspection_expired", "reasons": []}]
        )
        store_findings(session, frame)
        created, done = generate_report(session, municipality=PB, timezone=TZ)
        assert created == 0
        (item,) = done.for_review
        assert item["provision"] == "art. 29, II; art. 28, II"
