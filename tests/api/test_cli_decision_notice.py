"""`pontual proposals notify-decision`: the delivery of the decision, from the command line."""

from __future__ import annotations

import datetime as dt
import json
import secrets

import pandas as pd
import shapely

from tracking.detectors.findings import make_findings

PVH = "1100205"
DECIDED = dt.datetime(2025, 1, 23, 12, tzinfo=dt.UTC)


def _rejected_in_porto_velho(api_engine) -> str:
    """A Porto Velho auto (art. 1º) whose defence was rejected on ``DECIDED``."""
    from sqlalchemy import select

    from db.enforcement import workflow
    from db.enforcement.models import Proposal, ProposalFinding
    from db.engine import session_scope

    frame = pd.DataFrame(
        {
            "kind": "operating_while_barred",
            "vehicle_id": f"PV{secrets.token_hex(3).upper()}",
            "stand_id": None,
            "started_at": ["2025-01-02T12:00:00Z"],
            "ended_at": ["2025-01-02T12:00:00Z"],
            "confidence": 0.9,
            "details": [{"reason": "revoked"}],
        }
    )
    found = make_findings(frame, [shapely.Point(-63.9, -8.76)])
    day = dt.timedelta(days=1)
    with session_scope(api_engine) as session:
        workflow.store_findings(session, found)
        workflow.generate_proposals(session, municipality=PVH, timezone="America/Porto_Velho")
        pid = session.execute(
            select(Proposal.proposal_id)
            .join(ProposalFinding)
            .where(ProposalFinding.finding_id == found["finding_id"].iloc[0])
        ).scalar_one()
        workflow.confirm(session, pid, agent_id="a", at=DECIDED - 20 * day)
        workflow.notify(session, pid, actor="a", at=DECIDED - 19 * day)
        workflow.file_defence(session, pid, actor="d", at=DECIDED - 15 * day)
        workflow.decide_defence(
            session, pid, agent_id="s", accepted=False, reason="sem prova do alegado", at=DECIDED
        )
    return str(pid)


class TestNotifyDecisionCli:
    def test_records_the_delivery_and_the_appeal_counts_from_it(
        self, run_pontual, api_database_url, api_engine
    ) -> None:
        """Before the delivery, `finalize` is refused in pt-BR; `notify-decision --at` records
        it (audited) and says the appeal's due day (art. 32: 30 days); a second time is
        refused; `finalize` then waits for that day."""
        env = {"DATABASE_URL": api_database_url}
        pid = _rejected_in_porto_velho(api_engine)
        args = ("--agent", "fiscal-4", "--reason", "sem recurso no prazo")
        done = run_pontual("proposals", "finalize", pid, *args, "--at", "2025-12-01T12:00Z", **env)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "conta da notificação da decisão ao autuado, que não foi registrada" in done.stderr

        at = "2025-02-02T09:00:00-04:00"
        step = ("proposals", "notify-decision", pid, "--agent", "fiscal-4")
        done = run_pontual(*step, "--at", at, **env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            f"Notificação da decisão registrada na proposta {pid}. Recurso até 2025-03-04."
        )
        shown = json.loads(run_pontual("proposals", "show", pid, **env).stdout)
        last = shown["history"][-1]
        assert (last["action"], last["actor"], last["step_at"]) == (
            "notify_decision",
            "fiscal-4",
            at,
        )
        again = run_pontual(*step, **env)
        assert again.returncode == 1 and "já foi registrada (02/02/2025)" in again.stderr

        early = run_pontual("proposals", "finalize", pid, *args, "--at", "2025-03-01T12:00Z", **env)
        assert early.returncode == 1 and "cabe recurso, art. 32 até 04/03/2025" in early.stderr
        late = run_pontual("proposals", "finalize", pid, *args, "--at", "2025-03-05T12:00Z", **env)
        assert late.returncode == 0, late.stderr
