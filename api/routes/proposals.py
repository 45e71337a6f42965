"""Infraction proposals and their review (enforcement agents and admins)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import func, select

from api._errors import ConflictError, InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, SettingsDep, require_roles
from api.schemas import StrictBody, error_responses
from db.enforcement import workflow
from db.enforcement.models import STATUSES, Proposal
from enforcement._errors import (
    DocumentError,
    ProposalNotFoundError,
    ReviewDataError,
    TransitionError,
)

router = APIRouter(prefix="/api/v1/proposals", tags=["propostas de autuação"])

Reviewer = Annotated[Principal, Depends(require_roles("agent", "admin"))]
DOCUMENT_PERSONAL_FIELDS = ("plate", "holder_name", "driver_name")
"""Personal fields a document may show (audited when present)."""
_ERRORS = error_responses(401, 403, 404, 409, 422, 503)


class ProposalPublic(BaseModel):
    """A proposal in the ``proposals.json`` shape, with its review fields."""

    model_config = {"extra": "allow"}

    proposal_id: str
    kind: str
    vehicle_id: str | None
    municipality: str
    provision: str
    excerpt: str
    status: str


class ProposalsPublic(BaseModel):
    """A page of proposals."""

    data: list[ProposalPublic]
    count: int


class ProposalDetail(ProposalPublic):
    """One proposal with its audit trail."""

    history: list[dict[str, Any]]


class GenerateRequest(StrictBody):
    """Propose for the stored findings no proposal of the municipality covers yet."""

    municipality: str = Field(pattern=r"^\d{7}$")
    timezone: str | None = None
    confidence_floor: dict[str, float] | None = Field(
        default=None,
        description="Piso de confiança por tipo de achado (ou 'default'), sobre o do regulamento.",
    )


class ForReview(BaseModel):
    """A finding a rule covers that makes no proposal, and why."""

    finding_id: str
    kind: str
    vehicle_id: str | None
    confidence: float
    provision: str
    reason: str


class Generated(BaseModel):
    """How many proposals were created, and the findings left for review."""

    created: int
    for_review: list[ForReview] = []


class ConfirmRequest(StrictBody):
    """What the agent gives on confirming (the auto de infração)."""

    at: dt.datetime | None = None
    exception_answer: str | None = Field(
        default=None,
        max_length=2000,
        description=(
            "Resposta à exceção do dispositivo (ex.: 'salvo com autorização do usuário'): por "
            "que ela não se aplica. Obrigatória quando a regra tem exceção."
        ),
    )
    pontuacao: str | None = Field(
        default=None,
        description="Pontuação escolhida onde o dispositivo a deixa ao caso (POA art. 57, XI).",
    )


class FinalizeRequest(StrictBody):
    """The grounds of the final decision (no administrative appeal left)."""

    reason: str = Field(min_length=workflow.MIN_GROUNDS_CHARS, max_length=2000)
    period_ended_on: dt.date | None = Field(
        default=None,
        description=(
            "Dia em que o prazo de defesa (ou de recurso) terminou, pela lei do município: "
            "obrigatório quando o regulamento não fixa o prazo (Porto Alegre, táxi)."
        ),
    )
    at: dt.datetime | None = None


class DismissRequest(StrictBody):
    """Why the proposal is dismissed."""

    reason: str = Field(min_length=workflow.MIN_GROUNDS_CHARS, max_length=2000)


class DecisionRequest(StrictBody):
    """The decision on a defence and its grounds."""

    accepted: bool
    reason: str = Field(min_length=workflow.MIN_GROUNDS_CHARS, max_length=2000)


class StepRequest(StrictBody):
    """When the step happened (default: now)."""

    at: dt.datetime | None = None


@contextmanager
def _domain_errors() -> Iterator[None]:
    try:
        yield
    except ProposalNotFoundError as exc:
        raise NotFoundError(str(exc)) from None
    except ReviewDataError as exc:
        raise InvalidRequestError(str(exc)) from None
    except (TransitionError, DocumentError) as exc:
        raise ConflictError(str(exc)) from None


def _detail(session: Any, proposal_id: str) -> ProposalDetail:
    with _domain_errors():
        p = workflow.get_proposal(session, proposal_id)
    record = workflow.as_record(p, workflow.finding_ids_of(session, proposal_id))
    return ProposalDetail(**record, history=workflow.proposal_history(session, proposal_id))


@router.get("", response_model=ProposalsPublic, responses=_ERRORS)
def list_proposals(
    session: SessionDep,
    _: Reviewer,
    # Literal of the run-time tuple: FastAPI checks it and lists it in OpenAPI.
    status: Annotated[Literal[STATUSES] | None, Query()] = None,  # type: ignore[valid-type]
    municipality: Annotated[str | None, Query(pattern=r"^\d{7}$")] = None,
    vehicle_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ProposalsPublic:
    """Lista propostas (filtros: situação, município, prefixo), as mais recentes primeiro."""
    where = []
    if status:
        where.append(Proposal.status == status)
    if municipality:
        where.append(Proposal.municipality_code == municipality)
    if vehicle_id:
        where.append(Proposal.vehicle_id == vehicle_id)
    count = session.execute(select(func.count()).select_from(Proposal).where(*where)).scalar_one()
    rows = session.execute(
        select(Proposal)
        .where(*where)
        .order_by(Proposal.committed_at.desc(), Proposal.proposal_id)
        .limit(limit)
        .offset(offset)
    ).scalars()
    data = [ProposalPublic(**workflow.as_record(p)) for p in rows]
    return ProposalsPublic(data=data, count=count)


@router.get("/deadlines", responses=_ERRORS)
def deadlines(
    session: SessionDep,
    _: Reviewer,
    within_days: Annotated[int, Query(ge=0, le=365)] = 5,
) -> list[dict[str, Any]]:
    """Prazos (notificação, defesa) que vencem em até `within_days` dias ou já venceram."""
    return workflow.deadline_warnings(session, within_days=within_days)


@router.post("/generate", response_model=Generated, responses=_ERRORS)
def generate(
    body: GenerateRequest, session: SessionDep, settings: SettingsDep, user: Reviewer
) -> Generated:
    """Gera propostas para os achados armazenados ainda sem proposta no município.

    Quem pediu fica registrado na auditoria de cada proposta criada. Achados abaixo do piso de
    confiança, ou que a regra só aceita repetidos, voltam em `for_review` e não viram proposta.
    """
    try:
        n, done = workflow.generate_report(
            session,
            municipality=body.municipality,
            timezone=body.timezone or settings.timezone,
            actor=user.username,
            confidence_floor=body.confidence_floor,
        )
    except ValueError as exc:  # a floor out of place, an unknown municipality
        raise InvalidRequestError(str(exc)) from None
    session.commit()
    return Generated(created=n, for_review=[ForReview(**r) for r in done.for_review])


@router.get("/{proposal_id}", response_model=ProposalDetail, responses=_ERRORS)
def get_one(proposal_id: str, session: SessionDep, _: Reviewer) -> ProposalDetail:
    """Uma proposta, com os achados e o histórico de revisão."""
    return _detail(session, proposal_id)


def _step(session: Any, proposal_id: str, run: Callable[[], Any]) -> ProposalDetail:
    with _domain_errors():
        run()
    session.commit()
    return _detail(session, proposal_id)


@router.post("/{proposal_id}/confirm", response_model=ProposalDetail, responses=_ERRORS)
def confirm(
    proposal_id: str, body: ConfirmRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Confirma a proposta: o agente lavra o auto de infração (numerado).

    Se o dispositivo tem exceção ("salvo com autorização do usuário"), `exception_answer` é
    obrigatório (422 sem ele); se deixa a pontuação ao caso, `pontuacao` também.
    """
    return _step(
        session,
        proposal_id,
        lambda: workflow.confirm(
            session,
            proposal_id,
            agent_id=user.username,
            at=body.at,
            exception_answer=body.exception_answer,
            pontuacao=body.pontuacao,
        ),
    )


@router.post("/{proposal_id}/finalize", response_model=ProposalDetail, responses=_ERRORS)
def finalize(
    proposal_id: str, body: FinalizeRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Registra a decisão definitiva, sem recurso administrativo cabível."""
    return _step(
        session,
        proposal_id,
        lambda: workflow.finalize(
            session,
            proposal_id,
            agent_id=user.username,
            reason=body.reason,
            period_ended_on=body.period_ended_on,
            at=body.at,
        ),
    )


@router.post("/{proposal_id}/dismiss", response_model=ProposalDetail, responses=_ERRORS)
def dismiss(
    proposal_id: str, body: DismissRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Descarta a proposta, com o motivo."""
    return _step(
        session,
        proposal_id,
        lambda: workflow.dismiss(session, proposal_id, agent_id=user.username, reason=body.reason),
    )


@router.post("/{proposal_id}/notify", response_model=ProposalDetail, responses=_ERRORS)
def notify(
    proposal_id: str, body: StepRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Registra a entrega da notificação de penalidade; começa o prazo de defesa."""
    return _step(
        session,
        proposal_id,
        lambda: workflow.notify(session, proposal_id, actor=user.username, at=body.at),
    )


@router.post("/{proposal_id}/defence", response_model=ProposalDetail, responses=_ERRORS)
def defence(
    proposal_id: str, body: StepRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Registra a defesa apresentada no prazo (efeito suspensivo quando a lei o dá)."""
    return _step(
        session,
        proposal_id,
        lambda: workflow.file_defence(session, proposal_id, actor=user.username, at=body.at),
    )


@router.post("/{proposal_id}/decision", response_model=ProposalDetail, responses=_ERRORS)
def decision(
    proposal_id: str, body: DecisionRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Decide a defesa: deferida (o auto cai) ou indeferida (a penalidade se mantém)."""
    return _step(
        session,
        proposal_id,
        lambda: workflow.decide_defence(
            session,
            proposal_id,
            agent_id=user.username,
            accepted=body.accepted,
            reason=body.reason,
        ),
    )


@router.post(
    "/{proposal_id}/decision-notification", response_model=ProposalDetail, responses=_ERRORS
)
def decision_notification(
    proposal_id: str, body: StepRequest, session: SessionDep, user: Reviewer
) -> ProposalDetail:
    """Registra a entrega da decisão (a penalidade aplicada, com ou sem defesa) ao autuado.

    Onde a lei conta o recurso dela: fretamento de Porto Alegre, art. 33; Porto Velho, art. 32.
    """
    return _step(
        session,
        proposal_id,
        lambda: workflow.notify_decision(session, proposal_id, actor=user.username, at=body.at),
    )


@router.get(
    "/{proposal_id}/documents/{kind}",
    responses={
        **_ERRORS,
        200: {"content": {"application/pdf": {}, "text/html": {}}, "description": "Documento"},
    },
    response_class=Response,
)
def document(
    proposal_id: str,
    kind: Literal["auto", "notificacao"],
    request: Request,
    session: SessionDep,
    user: Reviewer,
    format: Annotated[Literal["pdf", "html"], Query()] = "pdf",  # noqa: A002
) -> Response:
    """Auto de infração ou notificação de penalidade, em PDF ou HTML, com o mapa da prova.

    Traz a placa e o nome do titular (dados pessoais): cada documento entregue fica no registro
    de auditoria.
    """
    from db.enforcement.evidence import document_for
    from enforcement.documents import document_fields, render_html, render_pdf

    with _domain_errors():
        doc = document_for(session, proposal_id)
        document_fields(doc, kind=kind)  # refused before any delivery is audited
    fields = [f for f in DOCUMENT_PERSONAL_FIELDS if doc["vehicle"].get(f)]
    if fields:
        record_personal_data_access(
            session=session,
            actor=user.actor,
            entity="proposal_documents",
            ids=[proposal_id],
            fields=fields,
            route=request.url.path,
        )
        session.commit()  # audited before the document leaves
    if format == "pdf":
        name = f"{kind}-{proposal_id}.pdf"
        return Response(
            render_pdf(doc, kind=kind),
            media_type="application/pdf",
            headers={"Content-Disposition": f'inline; filename="{name}"'},
        )
    return Response(render_html(doc, kind=kind), media_type="text/html; charset=utf-8")
