"""Documents of stored proposals name the driver their findings name, and the agent by name."""

import datetime as dt

import pandas as pd
import pytest
import shapely
from sqlalchemy import select

from api.routes.proposals import DOCUMENT_PERSONAL_FIELDS
from db.accounts.models import User
from db.enforcement.evidence import document_for
from db.enforcement.models import ProposalFinding
from db.enforcement.workflow import confirm, generate_proposals, store_findings
from db.fleet.models import Driver, Municipality
from enforcement.documents import IRREGULARITIES, NO_DRIVER, document_fields, render_html
from tracking.detectors.findings import make_findings

POA = "4314902"
TZ = "America/Sao_Paulo"
T0 = dt.datetime(2025, 3, 5, 15, 0, tzinfo=dt.UTC)


@pytest.fixture
def poa(db_session):
    db_session.add(Municipality(code=POA, name="Porto Alegre", uf="RS", timezone=TZ))
    db_session.flush()
    db_session.add(Driver(driver_id="D7", municipality_code=POA, name="Ana Exemplo Souza"))
    db_session.add(
        User(username="fiscal_ana", full_name="Bia Fiscal Exemplo", role="agent", password_hash="x")
    )
    db_session.flush()
    return db_session


def _proposal(session, kind: str, details: dict, vehicle: str = "POA-7") -> str:
    frame = make_findings(
        pd.DataFrame(
            {
                "kind": kind,
                "vehicle_id": vehicle,
                "stand_id": None,
                "started_at": ["2025-03-04T12:00:00Z"],
                "ended_at": ["2025-03-04T12:30:00Z"],
                "confidence": 0.9,
                "details": [details],
            }
        ),
        [shapely.Point(-51.2, -30.0)],
    )
    store_findings(session, frame)
    assert generate_proposals(session, municipality=POA, timezone=TZ) == 1
    return session.execute(
        select(ProposalFinding.proposal_id).where(
            ProposalFinding.finding_id == frame["finding_id"].iloc[0]
        )
    ).scalar_one()


def _rows(session, pid: str, kind: str = "auto") -> dict[str, str]:
    doc = document_for(session, pid)
    return {label: value for _, label, value in document_fields(doc, kind=kind)}  # type: ignore[arg-type]


class TestDocumentFor:
    def test_registered_driver_by_name_and_id(self, poa) -> None:
        """A driver_not_allowed finding's driver (details.driver_id) is named from the registry,
        with their id, on both documents; the name is a personal field the routes audit."""
        pid = _proposal(poa, "driver_not_allowed", {"reason": "ictp_suspended", "driver_id": "D7"})
        assert _rows(poa, pid)["Nome do operador (condutor)"] == "Ana Exemplo Souza (condutor D7)"
        notificacao = _rows(poa, pid, "notificacao")
        assert notificacao["Nome do infrator (condutor)"] == "Ana Exemplo Souza (condutor D7)"
        doc = document_for(poa, pid)
        assert doc["vehicle"]["driver_name"] == "Ana Exemplo Souza"
        assert "driver_name" in [f for f in DOCUMENT_PERSONAL_FIELDS if doc["vehicle"].get(f)]

    def test_unregistered_driver_by_id(self, poa) -> None:
        """An id the registry lacks: shown with "não cadastrado", no name invented."""
        pid = _proposal(poa, "driver_not_allowed", {"reason": "not_registered", "driver_id": "X9"})
        assert _rows(poa, pid)["Nome do operador (condutor)"] == "condutor X9 (não cadastrado)"
        assert document_for(poa, pid)["vehicle"]["driver_name"] is None

    def test_no_driver_in_the_findings(self, poa) -> None:
        """Findings that name no driver: "não identificado", as before."""
        pid = _proposal(poa, "operating_while_barred", {"reason": "reserved"})
        assert _rows(poa, pid)["Nome do operador (condutor)"] == NO_DRIVER

    def test_irregularity_in_pt_br(self, poa) -> None:
        """The irregularity of a driver_not_allowed auto reads in pt-BR, with the article."""
        pid = _proposal(poa, "driver_not_allowed", {"reason": "ictp_suspended", "driver_id": "D7"})
        value = _rows(poa, pid)["Irregularidade constatada"]
        assert value == f"{IRREGULARITIES['driver_not_allowed']}: ICTP suspensa (art. 60, IV)"
        doc = document_for(poa, pid)
        page = render_html(doc, kind="auto")
        for f in doc["findings"]:  # the ids name the kind: identifiers, not text
            page = page.replace(f["finding_id"], "")
        assert "driver_not_allowed" not in page

    @pytest.mark.parametrize(
        ("agent_id", "expected"),
        [("fiscal_ana", "Bia Fiscal Exemplo (fiscal_ana)"), ("F-0123", "F-0123")],
    )
    def test_agent_by_name_and_login(self, poa, agent_id: str, expected: str) -> None:
        """The confirming agent: the account's full name with the login; an id that names no
        account (a command line's matrícula) as given."""
        pid = _proposal(poa, "driver_not_allowed", {"reason": "ictp_suspended", "driver_id": "D7"})
        confirm(poa, pid, agent_id=agent_id, at=T0)
        assert _rows(poa, pid)["Agente autuador"] == expected
