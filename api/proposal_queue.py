"""Read queries of the enforcement agent's proposal queue (the web console's ``/fiscal``).

Keyword-only functions over a session: a page of proposals under filters (kind, status, stand,
vehicle, period, confidence), the counts per status and per kind under the same filters, and
the proposals that cover given findings. Only the columns a list shows are read (never the
``document`` or ``deadlines`` JSON of a whole page); the filters and the order use the indexes
of migration 0011 (``ix_proposals_queue_order``, ``ix_proposals_kind_committed``,
``ix_proposals_stand_committed``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Any, cast

from sqlalchemy import ColumnElement, func, select, text
from sqlalchemy.orm import Session

from api.queries import prefixo_part
from db.enforcement.models import Proposal, ProposalFinding
from tracking.detectors.findings import FLAG_NAMES, findings_name

STAND_ID = Proposal.document["stand_id"].astext
"""The proposal's stand (``document->>'stand_id'``; indexed by ``ix_proposals_stand_committed``)."""


@dataclass(frozen=True)
class QueueFilters:
    """Filters of the queue; None leaves a filter out.

    ``since`` and ``until`` bound ``committed_at`` (``since <= committed_at < until``, UTC);
    ``min_confidence`` is in [0, 1]; ``vehicle_id`` matches any prefixo containing it (case,
    surrounding spaces and separators aside: :func:`api.queries.prefixo_part`).
    """

    kind: str | None = None
    status: str | None = None
    stand_id: str | None = None
    vehicle_id: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    min_confidence: float | None = None

    def without(self, name: str) -> QueueFilters:
        """Return the same filters with ``name`` left out (for that facet's counts)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values[name] = None
        return QueueFilters(**values)


@dataclass(frozen=True)
class QueueRow:
    """One proposal as the queue lists it."""

    proposal_id: str
    kind: str
    vehicle_id: str | None
    stand_id: str | None
    municipality_code: str
    provision: str
    gravity: str | None
    status: str
    committed_at: dt.datetime
    confidence: float
    reincidence_count: int
    auto_number: str | None


def _where(filters: QueueFilters) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if filters.kind is not None:
        where.append(Proposal.kind == filters.kind)
    if filters.status is not None:
        where.append(Proposal.status == filters.status)
    if filters.stand_id is not None:
        where.append(Proposal.document["stand_id"].astext == filters.stand_id)
    if filters.vehicle_id is not None:
        cond, params = prefixo_part("proposals.vehicle_id", filters.vehicle_id)
        where.append(cast(ColumnElement[bool], text(cond).bindparams(**params)))
    if filters.since is not None:
        where.append(Proposal.committed_at >= filters.since)
    if filters.until is not None:
        where.append(Proposal.committed_at < filters.until)
    if filters.min_confidence is not None:
        where.append(Proposal.confidence >= filters.min_confidence)
    return where


def queue_page(
    *, session: Session, filters: QueueFilters, limit: int = 50, offset: int = 0
) -> list[QueueRow]:
    """Return a page of the queue: newest infraction first (``committed_at``, then id)."""
    rows = session.execute(
        select(
            Proposal.proposal_id,
            Proposal.kind,
            Proposal.vehicle_id,
            STAND_ID.label("stand_id"),
            Proposal.municipality_code,
            Proposal.provision,
            Proposal.gravity,
            Proposal.status,
            Proposal.committed_at,
            Proposal.confidence,
            Proposal.reincidence_count,
            Proposal.auto_number,
        )
        .where(*_where(filters))
        .order_by(Proposal.committed_at.desc(), Proposal.proposal_id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return [QueueRow(**row._asdict()) for row in rows]


NAME_KEYS = ("pattern", "subtype", *sorted({flag for _, flag in FLAG_NAMES}))
"""The ``details`` keys a finding's name reads (``tracking.detectors.findings.finding_name``)."""


def queue_names(*, session: Session, rows: list[QueueRow]) -> dict[str, str]:
    """Return each listed proposal's pt-BR name, as its page names it.

    An accessible taxi's wait or a use under suspension is no "boarding" (:func:`findings_name`
    of its findings). One query for the page, reading only :data:`NAME_KEYS` of the findings'
    details.
    """
    if not rows:
        return {}
    picked = ", ".join(f"'{k}', f.details -> '{k}'" for k in NAME_KEYS)
    found: dict[str, list[dict[str, Any]]] = {}
    for proposal_id, details in session.execute(
        text(
            f"SELECT pf.proposal_id, jsonb_build_object({picked}) FROM proposal_findings pf "
            "JOIN findings f ON f.finding_id = pf.finding_id WHERE pf.proposal_id = ANY(:ids)"
        ),
        {"ids": [r.proposal_id for r in rows]},
    ).all():
        found.setdefault(str(proposal_id), []).append(dict(details))
    return {r.proposal_id: findings_name(r.kind, found.get(r.proposal_id, [])) for r in rows}


def queue_counts(*, session: Session, filters: QueueFilters) -> dict[str, dict[str, int]]:
    """Return the counts per status and per kind, each facet under the other filters.

    ``{"status": {status: n}, "kind": {kind: n}}``: the status counts ignore the status filter
    and the kind counts the kind filter (how many each choice would list).
    """
    out: dict[str, dict[str, int]] = {}
    for facet, column in (("status", Proposal.status), ("kind", Proposal.kind)):
        rows = session.execute(
            select(column, func.count())
            .where(*_where(filters.without(facet)))
            .group_by(column)
            .order_by(column)
        ).all()
        out[facet] = {str(value): int(n) for value, n in rows}
    return out


def queue_total(counts: dict[str, dict[str, int]], filters: QueueFilters) -> int:
    """Return how many proposals the filters select, from :func:`queue_counts`."""
    by_status = counts.get("status", {})
    if filters.status is not None:
        return by_status.get(filters.status, 0)
    return sum(by_status.values())


def proposals_of_findings(*, session: Session, finding_ids: list[str]) -> dict[str, list[Any]]:
    """Return, per finding id, the proposals resting on it: ``(proposal_id, status)`` pairs."""
    if not finding_ids:
        return {}
    rows = session.execute(
        select(ProposalFinding.finding_id, Proposal.proposal_id, Proposal.status)
        .join(Proposal, Proposal.proposal_id == ProposalFinding.proposal_id)
        .where(ProposalFinding.finding_id.in_(finding_ids))
        .order_by(ProposalFinding.finding_id, Proposal.proposal_id)
    ).all()
    out: dict[str, list[Any]] = {}
    for finding_id, proposal_id, status in rows:
        out.setdefault(finding_id, []).append((proposal_id, status))
    return out
