"""Review of infraction proposals in the database, with an append-only audit trail.

States (``enforcement.models.STATUSES``) and the steps between them::

    proposta ──confirm (agent: issues the auto de infração)──▶ confirmada ──notify──▶ notificada
       └──dismiss (reason)──▶ descartada            └──archive_lapsed──▶ arquivada
    notificada ──file_defence──▶ em_defesa ──decide_defence──▶ defesa_deferida | defesa_indeferida

Every step writes one audit entry (who, when, from, to, and the step's data); nothing is ever
deleted (the database refuses it). Reincidence and the sanction are computed again when the
agent confirms, from the infractions confirmed by then, so the auto carries the right incidence.
Deadlines get their due dates as the steps happen: the notification's from the auto (Pinto
Bandeira art. 36 § 1º archives an auto not notified in 30 days), the defence's from the
notification (suspensive where the law says so: the penalty is not enforceable until the
defence is decided or its period ends).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import geopandas as gpd
import pandas as pd
from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from db.upsert import hex_ewkb
from enforcement._errors import ProposalNotFoundError, TransitionError
from enforcement.models import AuditEntry, Finding, Proposal, ProposalFinding
from enforcement.proposals import (
    CONFIRMED_STATUSES,
    due_at,
    propose,
    reincidence_count,
    sanction,
)
from enforcement.rulebook import Rule, Rulebook, bundled_rulebooks, rulebooks_for
from fleet.dates import check_registry_instant
from fleet.loaders import UF_TIMEZONES
from tracking.detectors.findings import jsonable

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "confirm": ("proposta",),
    "dismiss": ("proposta",),
    "notify": ("confirmada",),
    "archive": ("confirmada",),
    "file_defence": ("notificada",),
    "decide_defence": ("em_defesa",),
}
"""Which states each step starts from."""

_AUTO_LOCK_KEY = 7_294_310_002  # pg_advisory_xact_lock key serialising auto numbers


def insert_findings(session: Session, records: Sequence[Mapping[str, Any]]) -> set[str]:
    """Insert finding records (findings-frame columns, shapely geometry) in one statement.

    Ids are deterministic: a finding stored before is left as it was. Returns the new ids.
    """
    if not records:
        return set()
    geoms = hex_ewkb([r.get("geometry") for r in records])
    rows = [
        {
            "finding_id": r["finding_id"],
            "kind": r["kind"],
            "vehicle_id": r["vehicle_id"],
            "stand_id": r["stand_id"],
            "started_at": pd.Timestamp(r["started_at"]).to_pydatetime(),
            "ended_at": pd.Timestamp(r["ended_at"]).to_pydatetime(),
            "confidence": float(r["confidence"]),
            "details": jsonable(r["details"] or {}),
            "geometry": func.ST_GeomFromEWKB(func.decode(g, "hex")) if g else None,
        }
        for r, g in zip(records, geoms, strict=True)
    ]
    done = session.execute(
        insert(Finding).values(rows).on_conflict_do_nothing().returning(Finding.finding_id)
    )
    return {str(f) for f in done.scalars()}


def store_findings(session: Session, findings: gpd.GeoDataFrame) -> int:
    """Insert a findings frame (see :func:`insert_findings`); return the number of new rows."""
    return len(insert_findings(session, findings.to_dict("records")))


def load_findings(session: Session, finding_ids: Iterable[str]) -> gpd.GeoDataFrame:
    """Read findings back as a findings frame (EPSG:4326)."""
    query = select(
        Finding.finding_id,
        Finding.kind,
        Finding.vehicle_id,
        Finding.stand_id,
        Finding.started_at,
        Finding.ended_at,
        Finding.confidence,
        Finding.details,
        Finding.geometry.label("geometry"),
    ).where(Finding.finding_id.in_(list(finding_ids)))
    frame = gpd.read_postgis(query, session.connection(), geom_col="geometry")
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def confirmed_history(session: Session, *, municipality: str) -> pd.DataFrame:
    """Return the confirmed infractions of a municipality (vehicle, rule key, committed_at)."""
    rows = session.execute(
        select(Proposal.vehicle_id, Proposal.rule_key, Proposal.committed_at).where(
            Proposal.municipality_code == municipality,
            Proposal.status.in_(CONFIRMED_STATUSES),
        )
    ).all()
    return pd.DataFrame(rows, columns=["vehicle_id", "rule_key", "committed_at"])


def _record_to_row(p: Mapping[str, Any]) -> dict[str, Any]:
    fine = p["fine"]
    document = {
        k: p[k]
        for k in (
            "stand_id",
            "law",
            "alinea",
            "gravity_note",
            "penalty_provision",
            "fine_note",
            "fine_payer",
            "suspension_days",
            "incidence",
            "note",
        )
    }
    return {
        "proposal_id": p["proposal_id"],
        "municipality_code": p["municipality"],
        "service": p["service"],
        "kind": p["kind"],
        "vehicle_id": p["vehicle_id"],
        "rule_key": p["rule_key"],
        "article": p["article"],
        "inciso": p["inciso"],
        "paragraph": p["paragraph"],
        "provision": p["provision"],
        "excerpt": p["excerpt"],
        "gravity": p["gravity"],
        "penalty": p["penalty"],
        "measure": p["measure"],
        "pontuacao": p["pontuacao"],
        "fine_amount": Decimal(str(fine["amount"])) if fine else None,
        "fine_unit": fine["unit"] if fine else None,
        "reincidence_count": p["reincidence_count"],
        "status": p["status"],
        "deadlines": p["deadlines"],
        "committed_at": pd.Timestamp(p["committed_at"]).to_pydatetime(),
        "committed_until": pd.Timestamp(p["committed_until"]).to_pydatetime(),
        "confidence": p["confidence"],
        "document": document,
    }


def store_proposals(session: Session, proposals: list[dict[str, Any]]) -> int:
    """Insert proposal records and their links to findings (already stored).

    A proposal stored before (same deterministic id) is left as it was: its review may have
    advanced. Returns the number of new proposals.
    """
    if not proposals:
        return 0
    new = session.execute(
        insert(Proposal)
        .values([_record_to_row(p) for p in proposals])
        .on_conflict_do_nothing()
        .returning(Proposal.proposal_id)
    ).scalars()
    fresh = set(new)
    links = [
        {"proposal_id": p["proposal_id"], "finding_id": f}
        for p in proposals
        if p["proposal_id"] in fresh
        for f in p["finding_ids"]
    ]
    if links:
        session.execute(insert(ProposalFinding).values(links).on_conflict_do_nothing())
    for pid in sorted(fresh):
        _audit(session, actor="sistema", action="create", proposal_id=pid, frm=None, to="proposta")
    return len(fresh)


def generate_proposals(
    session: Session, *, municipality: str, timezone: str, actor: str = "sistema"
) -> int:
    """Propose for the stored findings that no proposal of the municipality covers yet."""
    books = rulebooks_for(municipality)
    _ensure_municipality(session, next(iter(books.values())))
    covered = (
        select(ProposalFinding.finding_id)
        .join(Proposal)
        .where(Proposal.municipality_code == municipality)
    )
    ids = session.execute(
        select(Finding.finding_id).where(Finding.finding_id.not_in(covered))
    ).scalars()
    findings = load_findings(session, list(ids))
    if findings.empty:
        return 0
    records, _ = propose(
        findings,
        books,
        timezone=timezone,
        confirmed=confirmed_history(session, municipality=municipality),
    )
    return store_proposals(session, records)


def _ensure_municipality(session: Session, book: Rulebook) -> None:
    """Register the rulebook's municipality if the registry lacks it (proposals refer to it)."""
    from fleet.models import Municipality

    row = {
        "code": book.municipality,
        "name": book.municipality_name,
        "uf": book.uf,
        "timezone": UF_TIMEZONES.get(book.uf),
    }
    session.execute(insert(Municipality).values(row).on_conflict_do_nothing())


def _audit(
    session: Session,
    *,
    actor: str,
    action: str,
    proposal_id: str,
    frm: str | None,
    to: str,
    **data: Any,
) -> None:
    session.add(
        AuditEntry(
            actor=actor,
            action=action,
            entity="proposal",
            entity_id=proposal_id,
            details={"from": frm, "to": to, **jsonable(data)},
        )
    )


def get_proposal(session: Session, proposal_id: str, *, lock: bool = False) -> Proposal:
    """Return one proposal (row-locked for a review step when ``lock``)."""
    query = select(Proposal).where(Proposal.proposal_id == proposal_id)
    found = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if found is None:
        msg = f"proposta '{proposal_id}' não encontrada"
        raise ProposalNotFoundError(msg)
    return found


def rule_of(proposal: Proposal) -> tuple[Rulebook, Rule]:
    """Return the rulebook and rule a stored proposal was drawn from."""
    book = bundled_rulebooks().get((proposal.municipality_code, proposal.service))
    prefix = f"{proposal.municipality_code}:{proposal.service}:"
    rule = next(
        (r for r in (book.rules if book else ()) if prefix + r.key == proposal.rule_key), None
    )
    if book is None or rule is None:
        msg = (
            f"regra '{proposal.rule_key}' da proposta {proposal.proposal_id} "
            "não está mais no regulamento"
        )
        raise TransitionError(msg)
    return book, rule


def _step(session: Session, proposal_id: str, action: str) -> Proposal:
    p = get_proposal(session, proposal_id, lock=True)
    if p.status not in TRANSITIONS[action]:
        allowed = ", ".join(TRANSITIONS[action])
        msg = f"a proposta {proposal_id} está '{p.status}'; '{action}' só a partir de: {allowed}"
        raise TransitionError(msg)
    return p


def _now(at: dt.datetime | None) -> dt.datetime:
    now = at or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        msg = "a data/hora do passo de revisão precisa de fuso horário"
        raise TransitionError(msg)
    if at is not None:  # a step's date is a registry date (fleet.dates' range)
        check_registry_instant(at, name="at")
    return now


def _set_due(p: Proposal, start: str, at: dt.datetime) -> None:
    book, _ = rule_of(p)
    timezone = UF_TIMEZONES.get(book.uf, "America/Sao_Paulo")
    deadlines = {k: dict(v) for k, v in (p.deadlines or {}).items()}
    for d in deadlines.values():
        if d.get("from") == start:
            counting = d.get("counting", "calendar_days")
            due = due_at(at, days=int(d["days"]), counting=counting, timezone=timezone)
            d["due"] = due.isoformat()
    p.deadlines = deadlines


def confirm(
    session: Session, proposal_id: str, *, agent_id: str, at: dt.datetime | None = None
) -> Proposal:
    """Confirm a proposal: the agent issues the auto de infração (numbered), sanction recomputed."""
    if not agent_id.strip():
        raise TransitionError("confirmar exige a identificação do agente")
    now = _now(at)
    p = _step(session, proposal_id, "confirm")
    book, rule = rule_of(p)
    count = reincidence_count(
        book,
        key=p.rule_key,
        vehicle_id=p.vehicle_id or "",
        at=pd.Timestamp(p.committed_at),
        confirmed=confirmed_history(session, municipality=p.municipality_code),
    )
    s = sanction(book, rule, count)
    p.reincidence_count = count
    p.penalty = s["penalty"]
    p.fine_amount = Decimal(str(s["fine"]["amount"])) if s["fine"] else None
    p.fine_unit = s["fine"]["unit"] if s["fine"] else None
    p.document = {
        **(p.document or {}),
        **{k: s[k] for k in ("incidence", "fine_note", "suspension_days")},
    }
    p.auto_number = _next_auto_number(session, p.municipality_code, now)
    p.agent_id = agent_id
    p.confirmed_at = now
    p.status = "confirmada"
    p.updated_at = now
    _set_due(p, "auto", now)
    _audit(
        session,
        actor=agent_id,
        action="confirm",
        proposal_id=proposal_id,
        frm="proposta",
        to="confirmada",
        auto_number=p.auto_number,
        reincidence_count=count,
    )
    return p


def _next_auto_number(session: Session, municipality: str, at: dt.datetime) -> str:
    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _AUTO_LOCK_KEY})
    prefix = f"AI-{municipality}-{at.year}-"
    last = session.execute(
        select(func.max(Proposal.auto_number)).where(Proposal.auto_number.like(prefix + "%"))
    ).scalar_one()
    n = int(last.rsplit("-", 1)[1]) + 1 if last else 1
    return f"{prefix}{n:06d}"


def dismiss(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    reason: str,
    at: dt.datetime | None = None,
) -> Proposal:
    """Dismiss a proposal, with the agent's reason."""
    if not reason.strip() or not agent_id.strip():
        raise TransitionError("descartar exige o agente e o motivo")
    now = _now(at)
    p = _step(session, proposal_id, "dismiss")
    p.status, p.dismissed_reason, p.agent_id, p.updated_at = "descartada", reason, agent_id, now
    _audit(
        session,
        actor=agent_id,
        action="dismiss",
        proposal_id=proposal_id,
        frm="proposta",
        to="descartada",
        reason=reason,
    )
    return p


def notify(
    session: Session, proposal_id: str, *, actor: str, at: dt.datetime | None = None
) -> Proposal:
    """Record the notificação de penalidade's delivery; the defence period starts."""
    now = _now(at)
    p = _step(session, proposal_id, "notify")
    due = (p.deadlines or {}).get("notification", {}).get("due")
    if due and now > dt.datetime.fromisoformat(due):
        msg = (
            f"prazo de notificação vencido em {due[:10]} "
            f"({p.deadlines['notification']['provision']}): o auto deve ser arquivado"
        )
        raise TransitionError(msg)
    p.status, p.notified_at, p.updated_at = "notificada", now, now
    _set_due(p, "notification", now)
    _audit(
        session,
        actor=actor,
        action="notify",
        proposal_id=proposal_id,
        frm="confirmada",
        to="notificada",
    )
    return p


def file_defence(
    session: Session, proposal_id: str, *, actor: str, at: dt.datetime | None = None
) -> Proposal:
    """Record a defence filed within its period (suspensive where the law says so)."""
    now = _now(at)
    p = _step(session, proposal_id, "file_defence")
    due = (p.deadlines or {}).get("defence", {}).get("due")
    if due and now > dt.datetime.fromisoformat(due):
        msg = f"defesa fora do prazo (vencido em {due[:10]}, {p.deadlines['defence']['provision']})"
        raise TransitionError(msg)
    p.status, p.defence_filed_at, p.updated_at = "em_defesa", now, now
    _audit(
        session,
        actor=actor,
        action="file_defence",
        proposal_id=proposal_id,
        frm="notificada",
        to="em_defesa",
    )
    return p


def decide_defence(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    accepted: bool,
    reason: str,
    at: dt.datetime | None = None,
) -> Proposal:
    """Decide a defence: accepted (the auto falls) or rejected (the penalty stands)."""
    if not reason.strip():
        raise TransitionError("a decisão da defesa exige a fundamentação")
    now = _now(at)
    p = _step(session, proposal_id, "decide_defence")
    to = "defesa_deferida" if accepted else "defesa_indeferida"
    p.status, p.decided_at, p.updated_at = to, now, now
    _set_due(p, "decision", now)
    _audit(
        session,
        actor=agent_id,
        action="decide_defence",
        proposal_id=proposal_id,
        frm="em_defesa",
        to=to,
        reason=reason,
    )
    return p


def archive_lapsed(session: Session, *, at: dt.datetime | None = None) -> list[str]:
    """Archive confirmed autos whose notification period ran out (e.g. PB art. 36 § 1º)."""
    now = _now(at)
    candidates = session.execute(
        select(Proposal).where(Proposal.status == "confirmada").with_for_update(skip_locked=True)
    ).scalars()
    archived = []
    for p in candidates:
        n = (p.deadlines or {}).get("notification", {})
        if n.get("due") and n.get("on_lapse") and now > dt.datetime.fromisoformat(n["due"]):
            p.status, p.updated_at = "arquivada", now
            _audit(
                session,
                actor="sistema",
                action="archive",
                proposal_id=p.proposal_id,
                frm="confirmada",
                to="arquivada",
                reason=f"notificação não entregue até {n['due'][:10]} ({n['provision']})",
            )
            archived.append(p.proposal_id)
    return archived


def deadline_warnings(
    session: Session, *, within_days: int = 5, at: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """Open deadlines due within ``within_days`` (or already missed), soonest first."""
    now = _now(at)
    horizon = now + dt.timedelta(days=within_days)
    state_deadline = {"confirmada": "notification", "notificada": "defence"}
    rows = session.execute(select(Proposal).where(Proposal.status.in_(state_deadline))).scalars()
    out = []
    for p in rows:
        name = state_deadline[p.status]
        d = (p.deadlines or {}).get(name, {})
        if not d.get("due"):
            continue
        due = dt.datetime.fromisoformat(d["due"])
        if due <= horizon:
            out.append(
                {
                    "proposal_id": p.proposal_id,
                    "auto_number": p.auto_number,
                    "status": p.status,
                    "deadline": name,
                    "due": d["due"],
                    "overdue": due < now,
                    "provision": d.get("provision"),
                    "on_lapse": d.get("on_lapse"),
                }
            )
    return sorted(out, key=lambda w: w["due"])


def proposal_history(session: Session, proposal_id: str) -> list[dict[str, Any]]:
    """Return the audit entries of one proposal, oldest first."""
    rows = session.execute(
        select(AuditEntry)
        .where(AuditEntry.entity == "proposal", AuditEntry.entity_id == proposal_id)
        .order_by(AuditEntry.entry_id)
    ).scalars()
    return [
        {"at": r.at.isoformat(), "actor": r.actor, "action": r.action, **r.details} for r in rows
    ]


def as_record(p: Proposal, finding_ids: list[str] | None = None) -> dict[str, Any]:
    """Return a stored proposal in the ``proposals.json`` shape, with its review fields."""
    doc = p.document or {}
    return {
        "proposal_id": p.proposal_id,
        "finding_ids": finding_ids or [],
        "kind": p.kind,
        "vehicle_id": p.vehicle_id,
        "stand_id": doc.get("stand_id"),
        "municipality": p.municipality_code,
        "service": p.service,
        "law": doc.get("law"),
        "rule_key": p.rule_key,
        "article": p.article,
        "inciso": p.inciso,
        "paragraph": p.paragraph,
        "alinea": doc.get("alinea"),
        "provision": p.provision,
        "excerpt": p.excerpt,
        "gravity": p.gravity,
        "gravity_note": doc.get("gravity_note"),
        "penalty": p.penalty,
        "penalty_provision": doc.get("penalty_provision"),
        "measure": p.measure,
        "pontuacao": p.pontuacao,
        "fine": {"amount": float(p.fine_amount), "unit": p.fine_unit} if p.fine_amount else None,
        "fine_note": doc.get("fine_note"),
        "fine_payer": doc.get("fine_payer"),
        "suspension_days": doc.get("suspension_days"),
        "reincidence_count": p.reincidence_count,
        "incidence": doc.get("incidence"),
        "status": p.status,
        "deadlines": p.deadlines,
        "committed_at": p.committed_at.isoformat(),
        "committed_until": p.committed_until.isoformat(),
        "confidence": p.confidence,
        "note": doc.get("note"),
        "auto_number": p.auto_number,
        "agent_id": p.agent_id,
        "confirmed_at": p.confirmed_at.isoformat() if p.confirmed_at else None,
        "dismissed_reason": p.dismissed_reason,
        "notified_at": p.notified_at.isoformat() if p.notified_at else None,
        "penalty_enforceable_from": enforceable_from(p),
    }


def enforceable_from(p: Proposal) -> str | None:
    """When the penalty may be enforced, or None while it may not (yet, or ever).

    A notified penalty is enforceable once its defence period ends without a defence; a
    suspensive defence (e.g. Pinto Bandeira art. 53 § 1º) holds it until the defence is
    decided, and a rejected defence releases it at the decision. Without a defence period in
    the rulebook, from the notification.
    """
    defence = (p.deadlines or {}).get("defence") or {}
    if p.status == "defesa_indeferida" and p.decided_at is not None:
        return p.decided_at.isoformat()
    if p.status == "em_defesa" and defence.get("suspensive") is False and p.notified_at:
        return p.notified_at.isoformat()
    if p.status == "notificada" and p.notified_at is not None:
        return defence.get("due") or p.notified_at.isoformat()
    return None


def finding_ids_of(session: Session, proposal_id: str) -> list[str]:
    """Return the ids of the findings a proposal rests on."""
    return list(
        session.execute(
            select(ProposalFinding.finding_id)
            .where(ProposalFinding.proposal_id == proposal_id)
            .order_by(ProposalFinding.finding_id)
        ).scalars()
    )
