"""ORM models of the legal layer: findings, proposals and their review, alerts, the audit log.

Findings are facts about the tracks and name vehicles and stands by id without foreign keys: a batch
analysis may accuse a vehicle that is not (yet) in the registry. Nothing here is ever deleted: the
database refuses DELETE on findings, proposals and their links, and any change to the audit log.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from geoalchemy2 import Geometry, WKBElement
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Numeric,
    SmallInteger,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, validates

import db.fleet.models  # noqa: F401  (the registry tables its foreign keys name)
from db.base import Base
from tracking.detectors.findings import KINDS as FINDING_KINDS
from tracking.detectors.findings import jsonable

FINE_UNITS = ("UFM", "BRL", "UPF")
STATUSES = (
    "proposta",
    "confirmada",
    "descartada",
    "notificada",
    "em_defesa",
    "defesa_deferida",
    "defesa_indeferida",
    "definitiva",
    "arquivada",
)
"""Review states of a proposal (``db.enforcement.workflow`` holds the allowed transitions)."""


class Finding(Base):
    """A fact found in the tracks over an interval, with its evidence in ``details``."""

    __tablename__ = "findings"

    finding_id: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text, index=True)
    vehicle_id: Mapped[str | None] = mapped_column(Text, index=True)
    stand_id: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    confidence: Mapped[float] = mapped_column(Float(53))
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    geometry: Mapped[WKBElement | None] = mapped_column(
        Geometry("GEOMETRY", srid=4326, spatial_index=True)
    )
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint(
            "kind IN (" + ", ".join(f"'{k}'" for k in FINDING_KINDS) + ")", name="kind"
        ),
        CheckConstraint("confidence BETWEEN 0 AND 1", name="confidence_range"),
        CheckConstraint("ended_at >= started_at", name="interval_order"),
    )


class Proposal(Base):
    """An infraction proposal drawn from findings by a municipality's rulebook, for human review."""

    __tablename__ = "proposals"

    proposal_id: Mapped[str] = mapped_column(Text, primary_key=True)
    municipality_code: Mapped[str] = mapped_column(String(7), ForeignKey("municipalities.code"))
    kind: Mapped[str] = mapped_column(Text)
    vehicle_id: Mapped[str | None] = mapped_column(Text, index=True)
    article: Mapped[str] = mapped_column(Text)
    inciso: Mapped[str | None] = mapped_column(Text)
    paragraph: Mapped[str | None] = mapped_column(Text)
    provision: Mapped[str] = mapped_column(Text)
    excerpt: Mapped[str] = mapped_column(Text)
    gravity: Mapped[str | None] = mapped_column(Text)
    penalty: Mapped[str | None] = mapped_column(Text)
    measure: Mapped[str | None] = mapped_column(Text)
    pontuacao: Mapped[str | None] = mapped_column(Text)
    fine_amount: Mapped[Decimal | None] = mapped_column(Numeric(14, 2))
    fine_unit: Mapped[str | None] = mapped_column(Text)
    reincidence_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'proposta'"), index=True)
    deadlines: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    service: Mapped[str] = mapped_column(Text, server_default=text("'taxi'"))
    rule_key: Mapped[str] = mapped_column(Text)
    committed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    committed_until: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    confidence: Mapped[float] = mapped_column(Float(53))
    document: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    auto_number: Mapped[str | None] = mapped_column(Text, unique=True)
    agent_id: Mapped[str | None] = mapped_column(Text)
    confirmed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    dismissed_reason: Mapped[str | None] = mapped_column(Text)
    notified_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    defence_filed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    decision_notified_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("fine_unit IN ('UFM', 'BRL', 'UPF')", name="fine_unit"),
        CheckConstraint(
            "(fine_amount IS NULL) = (fine_unit IS NULL)", name="fine_amount_with_unit"
        ),
        CheckConstraint("reincidence_count >= 0", name="reincidence_non_negative"),
        CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")", name="status"),
        CheckConstraint("committed_until >= committed_at", name="committed_order"),
        Index("ix_proposals_reincidence", "vehicle_id", "municipality_code", "rule_key"),
        # The agent's queue (api/proposal_queue.py): its order, its kind and stand filters, and
        # the counts per status and kind read from an index instead of the wide rows.
        Index("ix_proposals_queue_order", "committed_at", "proposal_id"),
        Index("ix_proposals_kind_committed", "kind", "committed_at"),
        Index("ix_proposals_stand_committed", text("(document ->> 'stand_id')"), "committed_at"),
        Index("ix_proposals_facets", "status", "kind", "committed_at", "confidence"),
    )


class ProposalFinding(Base):
    """Link of a proposal to the findings it rests on."""

    __tablename__ = "proposal_findings"

    proposal_id: Mapped[str] = mapped_column(
        Text, ForeignKey("proposals.proposal_id", ondelete="CASCADE"), primary_key=True
    )
    finding_id: Mapped[str] = mapped_column(
        Text, ForeignKey("findings.finding_id"), primary_key=True, index=True
    )


class AuditEntry(Base):
    """One line of the append-only audit log; the database refuses UPDATE, DELETE and TRUNCATE."""

    __tablename__ = "audit_log"

    entry_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    entity: Mapped[str] = mapped_column(Text)
    entity_id: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))

    @validates("details")
    def _jsonable_details(self, _key: str, value: Any) -> Any:
        """Make the details JSON at any depth: dates and instants as ISO text, Decimal as float."""
        return audit_json(value)


def audit_json(value: Any) -> Any:
    """Return ``value`` with dates, instants, Decimals, sets and tuples made JSON, recursively."""
    if isinstance(value, dict):
        return {str(k): audit_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [audit_json(v) for v in items]
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return jsonable(value)


class Alert(Base):
    """A live finding announced to enforcement; ``throttle_key`` groups recurrences."""

    __tablename__ = "alerts"

    alert_id: Mapped[str] = mapped_column(Text, primary_key=True)
    finding_id: Mapped[str] = mapped_column(Text, ForeignKey("findings.finding_id"), index=True)
    kind: Mapped[str] = mapped_column(Text)
    vehicle_id: Mapped[str | None] = mapped_column(Text)
    stand_id: Mapped[str | None] = mapped_column(Text)
    throttle_key: Mapped[str] = mapped_column(Text, index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    geometry: Mapped[WKBElement | None] = mapped_column(
        Geometry("GEOMETRY", srid=4326, spatial_index=False)
    )
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), index=True
    )
    event_at: Mapped[dt.datetime | None] = mapped_column(
        DateTime(timezone=True), comment="end of the alerted finding (event time)"
    )
    repeat_count: Mapped[int] = mapped_column(
        Integer, server_default=text("0"), comment="throttled recurrences folded into this alert"
    )
    last_repeat_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revision: Mapped[int] = mapped_column(
        Integer,
        server_default=text("0"),
        comment="announcements after the first (settled or withdrawn)",
    )


class LiveDetectorState(Base):
    """Live detector state of one vehicle (plain JSON data), read and written under its lock.

    ``detector`` is a finding kind, or ``longer_route_peers:<cells>`` for the vehicle's closed
    trips between two H3 cells (the peer references other vehicles' live trips read).
    """

    __tablename__ = "live_detector_states"

    vehicle_id: Mapped[str] = mapped_column(Text, primary_key=True)
    detector: Mapped[str] = mapped_column(Text, primary_key=True, index=True)
    state: Mapped[Any] = mapped_column(JSONB)
    last_ts: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class LiveQueueEntry(Base):
    """A fix stored by the HTTP ingest and not yet seen by the live detectors.

    Written in the fix's own transaction (``api.ingest``), claimed and deleted by a live worker
    (``api.live_worker``) once the detectors ran: a committed fix is detected on exactly once.
    """

    __tablename__ = "live_queue"

    queue_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(Text)
    ts: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    lat: Mapped[float] = mapped_column(Float(53))
    lon: Mapped[float] = mapped_column(Float(53))
    speed_kmh: Mapped[float | None] = mapped_column(Float(53))
    heading_deg: Mapped[float | None] = mapped_column(Float(53))
    accuracy_m: Mapped[float | None] = mapped_column(Float(53))
    meter: Mapped[str | None] = mapped_column(Text)
    tariff: Mapped[int | None] = mapped_column(SmallInteger)
    driver_id: Mapped[str | None] = mapped_column(Text)
    speed_flag: Mapped[bool] = mapped_column(Boolean)
    queued_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (Index("ix_live_queue_vehicle_id_ts", "vehicle_id", "ts"),)


class LiveDeadLetter(Base):
    """A vehicle whose live detection failed: the error, the fixes' range, the retry schedule.

    Written by the live worker (``api.live_worker``) when the detectors raise on a vehicle's
    claimed fixes, or its registry holds a date they cannot read. The fixes stay in
    ``live_queue``, held (the vehicle is not claimed) until ``next_retry_at``; the row is
    resolved (``resolved_at``) by the first claim of the vehicle that succeeds. At most one open
    row per vehicle. Listed by ``pontual alerts failed``, retried now by ``pontual alerts retry``.
    """

    __tablename__ = "live_dead_letters"

    dead_letter_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(Text)
    error: Mapped[str] = mapped_column(Text)
    first_ts: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    last_ts: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    n_fixes: Mapped[int] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    failed_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    last_failed_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    next_retry_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    resolved_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index(
            "ux_live_dead_letters_open",
            "vehicle_id",
            unique=True,
            postgresql_where=text("resolved_at IS NULL"),
        ),
    )


class Webhook(Base):
    """A configured receiver of alerts: HMAC-signed POSTs, with optional filters."""

    __tablename__ = "webhooks"

    webhook_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    filters: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    active: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class WebhookDelivery(Base):
    """Delivery state of one alert to one webhook: at most one successful POST per pair."""

    __tablename__ = "webhook_deliveries"

    webhook_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("webhooks.webhook_id"), primary_key=True
    )
    alert_id: Mapped[str] = mapped_column(Text, ForeignKey("alerts.alert_id"), primary_key=True)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    next_attempt_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="status"),
    )
