"""The delivery of the decision on the defence: the periods that count from it, the final
decision that waits for it, and the migration that stores it."""

from __future__ import annotations

import datetime as dt
import json
from zoneinfo import ZoneInfo

import pandas as pd
import pytest
import shapely
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.pool import NullPool

from db.enforcement.models import ProposalFinding
from db.enforcement.workflow import (
    as_record,
    confirm,
    decide_defence,
    file_defence,
    finalize,
    generate_proposals,
    get_proposal,
    notify,
    notify_decision,
    proposal_history,
    store_findings,
    store_proposals,
)
from db.fleet.models import Municipality
from db.migrate import downgrade, upgrade
from enforcement._errors import ReviewDataError, TransitionError
from enforcement.documents import _deadlines
from enforcement.proposals import propose
from enforcement.rulebook import rulebooks_for
from tracking.detectors.findings import make_findings

POA, PVH = "4314902", "1100205"
SP, RO = "America/Sao_Paulo", "America/Porto_Velho"
DAY = dt.timedelta(days=1)
AT = dt.datetime(2025, 1, 3, 12, tzinfo=dt.UTC)
"""The auto; notified a day later, defended 5 days later, rejected on the 20th day (``DECIDED``)."""
DECIDED = AT + 20 * DAY
DELIVERED = DECIDED + 10 * DAY
"""The decision delivered to the accused 10 days after it was taken."""


def _barred(vehicle: str, reason: str, point: tuple[float, float]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": vehicle,
            "stand_id": None,
            "started_at": ["2025-01-02T12:00:00Z"],
            "ended_at": ["2025-01-02T12:00:00Z"],
            "confidence": 0.9,
            "details": [{"reason": reason}],
        }
    )
    return make_findings(frame, [shapely.Point(*point)])


@pytest.fixture
def fretamento_notified(db_session) -> str:
    """A Porto Alegre fretamento auto (art. 25, II), notified a day after ``AT``."""
    db_session.add(Municipality(code=POA, name="Porto Alegre", uf="RS", timezone=SP))
    db_session.flush()
    found = _barred("F-1", "alvara_expired", (-51.2, -30.0))
    store_findings(db_session, found)
    fleet = pd.DataFrame({"vehicle_id": ["F-1"], "service": ["fretamento"]})
    (record,), _ = propose(found, rulebooks_for(POA), timezone=SP, fleet=fleet)
    assert store_proposals(db_session, [record]) == 1
    return _notified(db_session, str(record["proposal_id"]))


@pytest.fixture
def porto_velho_notified(db_session) -> str:
    """A Porto Velho taxi auto (art. 1º), notified a day after ``AT``."""
    db_session.add(Municipality(code=PVH, name="Porto Velho", uf="RO", timezone=RO))
    db_session.flush()
    found = _barred("PVH-1", "revoked", (-63.9, -8.76))
    store_findings(db_session, found)
    assert generate_proposals(db_session, municipality=PVH, timezone=RO) == 1
    pid = db_session.execute(
        select(ProposalFinding.proposal_id).where(
            ProposalFinding.finding_id == found["finding_id"].iloc[0]
        )
    ).scalar_one()
    return _notified(db_session, pid)


@pytest.fixture
def fretamento(db_session, fretamento_notified) -> str:
    """The fretamento auto, its defence rejected on ``DECIDED``."""
    return _rejected(db_session, fretamento_notified)


@pytest.fixture
def porto_velho(db_session, porto_velho_notified) -> str:
    """The Porto Velho auto, its defence rejected on ``DECIDED``."""
    return _rejected(db_session, porto_velho_notified)


def _notified(session, pid: str) -> str:
    confirm(session, pid, agent_id="a", at=AT)
    notify(session, pid, actor="a", at=AT + DAY)
    return pid


def _rejected(session, pid: str) -> str:
    file_defence(session, pid, actor="d", at=AT + 5 * DAY)
    decide_defence(
        session, pid, agent_id="s", accepted=False, reason="sem prova do alegado", at=DECIDED
    )
    return pid


class TestNotifyDecision:
    def test_fretamento_appeal_and_payment_count_from_the_delivery(
        self, db_session, fretamento
    ) -> None:
        """Fretamento art. 33 and art. 32, parágrafo único: 15 days from the delivery of the
        decision (17/02/2025), not from the decision (07/02/2025); audited, state kept."""
        deadlines = get_proposal(db_session, fretamento).deadlines
        assert deadlines["appeal"]["due"] is None and deadlines["payment"]["due"] is None
        p = notify_decision(db_session, fretamento, actor="fiscal-3", at=DELIVERED)
        assert p.status == "defesa_indeferida" and p.decision_notified_at == DELIVERED
        assert p.deadlines["appeal"]["due"] == "2025-02-17T23:59:59-03:00"
        assert p.deadlines["payment"]["due"] == "2025-02-17T23:59:59-03:00"
        entry = proposal_history(db_session, fretamento)[-1]
        assert (entry["action"], entry["actor"], entry["from"], entry["to"]) == (
            "notify_decision",
            "fiscal-3",
            "defesa_indeferida",
            "defesa_indeferida",
        )
        assert entry["step_at"] == DELIVERED.isoformat()
        assert as_record(p)["decision_notified_at"] == DELIVERED.isoformat()

    def test_porto_velho_appeal_from_the_delivery_payment_not_computed(
        self, db_session, porto_velho
    ) -> None:
        """Porto Velho art. 32: 30 days from the delivery (04/03/2025); art. 33's payment counts
        from the end of the appeal period or the appeal's rejection: no date is printed."""
        p = notify_decision(db_session, porto_velho, actor="a", at=DELIVERED)
        assert p.deadlines["appeal"]["due"] == "2025-03-04T23:59:59-04:00"
        assert p.deadlines["payment"]["due"] is None
        rows = dict(_deadlines(as_record(p), ZoneInfo(RO)))
        assert rows["Prazo de recurso"] == (
            "30 dias da notificação da decisão (art. 32): até 04/03/2025 23:59:59"
        )
        assert rows["Prazo de pagamento"].startswith(
            "30 dias do fim do prazo de recurso sem interposição, ou do indeferimento do "
            "recurso (art. 33): vencimento fixado quando o prazo começar"
        )

    def test_dated_after_the_decision_once_and_only_after_a_rejection(
        self, db_session, fretamento
    ) -> None:
        """A delivery dated before the decision is refused; a second one too."""
        with pytest.raises(ReviewDataError, match="anterior à decisão da defesa"):
            notify_decision(db_session, fretamento, actor="a", at=DECIDED - DAY)
        notify_decision(db_session, fretamento, actor="a", at=DELIVERED)
        with pytest.raises(TransitionError, match="já foi registrada"):
            notify_decision(db_session, fretamento, actor="a", at=DELIVERED + DAY)


class TestFinalizeWaitsForTheDelivery:
    @pytest.mark.parametrize(
        ("book", "open_until", "open_days"),
        [("fretamento", "17/02/2025", 14), ("porto_velho", "04/03/2025", 25)],
    )
    def test_not_final_before_the_delivery_nor_before_its_period_ends(
        self, request, db_session, book: str, open_until: str, open_days: int
    ) -> None:
        """Undelivered, the decision is not final even long after it; delivered, not until the
        appeal period from the delivery ends (``open_days`` after it, the period counted from the
        decision had ended: 07/02/2025 for fretamento, 22/02/2025 for Porto Velho)."""
        pid = request.getfixturevalue(book)
        with pytest.raises(TransitionError, match="notificação da decisão ao autuado, que não"):
            finalize(
                db_session, pid, agent_id="s", reason="sem recurso no prazo", at=DECIDED + 60 * DAY
            )
        notify_decision(db_session, pid, actor="a", at=DELIVERED)
        with pytest.raises(TransitionError, match=f"cabe recurso, art. 3[23] até {open_until}"):
            finalize(
                db_session,
                pid,
                agent_id="s",
                reason="sem recurso no prazo",
                at=DELIVERED + open_days * DAY,
            )
        p = finalize(
            db_session, pid, agent_id="s", reason="sem recurso no prazo", at=DELIVERED + 31 * DAY
        )
        assert p.status == "definitiva"


DEFENCE_END = AT + 31 * DAY
"""The defence period of the autos notified on ``AT + DAY`` (30 days, both laws) ends on 03/02."""


class TestWithoutDefence:
    def test_porto_velho_appeal_waits_for_the_penalty_delivery(
        self, db_session, porto_velho_notified
    ) -> None:
        """Porto Velho art. 25 and 32: without a defence the penalty is imposed after the
        procedure and the appeal counts from the receipt of its notification, not from the end
        of the defence period (before: final on 05/03/2025, the defence's end plus 30 days)."""
        pid = porto_velho_notified
        with pytest.raises(TransitionError, match="ainda está no prazo de defesa"):
            notify_decision(db_session, pid, actor="a", at=DEFENCE_END - 2 * DAY)
        with pytest.raises(TransitionError, match="notificação da decisão ao autuado, que não"):
            finalize(
                db_session,
                pid,
                agent_id="s",
                reason="sem defesa no prazo",
                at=DEFENCE_END + 60 * DAY,
            )
        delivered = DEFENCE_END + 20 * DAY  # 23/02/2025
        p = notify_decision(db_session, pid, actor="a", at=delivered)
        assert p.status == "notificada"
        assert p.deadlines["appeal"]["due"] == "2025-03-25T23:59:59-04:00"
        with pytest.raises(TransitionError, match="cabe recurso, art. 32 até 25/03/2025"):
            finalize(
                db_session,
                pid,
                agent_id="s",
                reason="sem recurso no prazo",
                at=delivered + 29 * DAY,
            )
        p = finalize(
            db_session, pid, agent_id="s", reason="sem recurso no prazo", at=delivered + 31 * DAY
        )
        assert p.status == "definitiva"

    def test_fretamento_appeal_from_the_defence_end(self, db_session, fretamento_notified) -> None:
        """Fretamento art. 33: "caso não apresentada, do término do prazo desta": final 15 days
        after the defence period (18/02/2025) with no delivery recorded; a delivery dates the
        payment (art. 32, parágrafo único) and leaves the appeal counted from the defence's end."""
        pid = fretamento_notified
        with pytest.raises(TransitionError, match="cabe recurso, art. 33 até 18/02/2025"):
            finalize(
                db_session,
                pid,
                agent_id="s",
                reason="sem defesa no prazo",
                at=DEFENCE_END + 14 * DAY,
            )
        p = notify_decision(db_session, pid, actor="a", at=DEFENCE_END + DAY)
        assert p.deadlines["appeal"]["due"] is None
        assert p.deadlines["payment"]["due"] == "2025-02-19T23:59:59-03:00"
        p = finalize(
            db_session, pid, agent_id="s", reason="sem recurso no prazo", at=DEFENCE_END + 16 * DAY
        )
        assert p.status == "definitiva"


def test_migration_0021_adds_and_drops_the_column(empty_database_url: str) -> None:
    """0021 adds proposals.decision_notified_at (nullable, with time zone); down to 0020 it is
    gone, up again it is back."""
    url = empty_database_url

    def columns() -> dict[str, dict]:
        engine = create_engine(url, poolclass=NullPool)
        try:
            return {c["name"]: c for c in inspect(engine).get_columns("proposals")}
        finally:
            engine.dispose()

    upgrade(url, "0020")
    assert "decision_notified_at" not in columns()
    upgrade(url, "0021")
    column = columns()["decision_notified_at"]
    assert column["nullable"] and column["type"].timezone
    downgrade(url, "0020")
    assert "decision_notified_at" not in columns()
    upgrade(url, "0021")
    assert "decision_notified_at" in columns()


def test_migrations_0021_0022_restart_the_open_proposals_deadlines(empty_database_url: str) -> None:
    """Stored before 0021, an open fretamento or Porto Velho proposal counted its appeal (and
    payment) from the decision: they now count from the delivery (Porto Velho's payment from
    the appeal's end), due dates cleared; a final one and another rulebook's are left alone;
    the downgrade puts the old starts back."""
    url = empty_database_url
    upgrade(url, "0020")
    engine = create_engine(url, poolclass=NullPool)
    old = {
        "appeal": {"days": 15, "from": "decision", "due": "2025-02-07T23:59:59-03:00"},
        "payment": {"days": 15, "from": "decision", "due": "2025-02-07T23:59:59-03:00"},
    }
    rows = [
        ("P-fret", "4314902", "fretamento", "defesa_indeferida"),
        ("P-fret-final", "4314902", "fretamento", "definitiva"),
        ("P-pvh", "1100205", "taxi", "notificada"),
        ("P-poa", "4314902", "taxi", "defesa_indeferida"),
    ]

    def deadlines() -> dict[str, dict]:
        with engine.connect() as conn:
            got = conn.execute(text("SELECT proposal_id, deadlines FROM proposals")).all()
        return {pid: d for pid, d in got}

    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO municipalities (code, name, uf) VALUES "
                    "('4314902', 'Porto Alegre', 'RS'), ('1100205', 'Porto Velho', 'RO')"
                )
            )
            for pid, code, service, status in rows:
                conn.execute(
                    text(
                        "INSERT INTO proposals (proposal_id, municipality_code, kind, article, "
                        "provision, excerpt, status, deadlines, service, rule_key, committed_at, "
                        "committed_until, confidence) VALUES (:pid, :code, 'k', '1', 'art. 1', "
                        "'x', :status, CAST(:d AS jsonb), :service, 'k', now(), now(), 0.9)"
                    ),
                    {"pid": pid, "code": code, "status": status, "service": service,
                     "d": json.dumps(old)},
                )  # fmt: skip
        upgrade(url, "0021")
        got = deadlines()
        assert got["P-fret"]["appeal"] == {"days": 15, "from": "decision_notification", "due": None}
        assert got["P-fret"]["payment"]["from"] == "decision_notification"
        assert got["P-pvh"]["appeal"]["from"] == "decision_notification"
        assert got["P-pvh"]["payment"] == {"days": 15, "from": "appeal_end", "due": None}
        assert got["P-fret-final"] == old and got["P-poa"] == old
        upgrade(url, "0022")  # fretamento art. 33: without a defence, from its period's end
        got = deadlines()
        assert got["P-fret"]["appeal"]["without_defence_from"] == "defence_end"
        assert "without_defence_from" not in got["P-pvh"]["appeal"]
        assert got["P-fret-final"] == old and got["P-poa"] == old
        downgrade(url, "0021")
        assert "without_defence_from" not in deadlines()["P-fret"]["appeal"]
        downgrade(url, "0020")
        back = deadlines()
        assert back["P-fret"]["appeal"]["from"] == back["P-pvh"]["payment"]["from"] == "decision"
    finally:
        engine.dispose()
