"""ORM models of the legal layer: findings, infraction proposals, and the append-only audit log.

Findings are facts about the tracks and name vehicles and stands by id without foreign keys: a batch
analysis may accuse a vehicle that is not (yet) in the registry.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from geoalchemy2 import Geometry, WKBElement
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Integer,
    Numeric,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base
from tracking.detectors.findings import KINDS as FINDING_KINDS

FINE_UNITS = ("UFM", "BRL", "UPF")


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
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    deadlines: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("fine_unit IN ('UFM', 'BRL', 'UPF')", name="fine_unit"),
        CheckConstraint(
            "(fine_amount IS NULL) = (fine_unit IS NULL)", name="fine_amount_with_unit"
        ),
        CheckConstraint("reincidence_count >= 0", name="reincidence_non_negative"),
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
