"""ORM models of the stands tables: stands, supervisors, licences, suspensions, allowed places."""

from __future__ import annotations

import datetime as dt

from geoalchemy2 import Geometry, WKBElement
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ExcludeConstraint
from sqlalchemy.orm import Mapped, mapped_column

import db.fleet.models  # noqa: F401  (the registry tables its foreign keys name)
from db.base import Base

STAND_KINDS = ("fixo", "livre")


class Stand(Base):
    """A taxi stand (ponto): its area in EPSG:4326, or none when the source had no usable spot."""

    __tablename__ = "stands"

    stand_id: Mapped[str] = mapped_column(Text, primary_key=True)
    municipality_code: Mapped[str | None] = mapped_column(
        String(7), ForeignKey("municipalities.code"), index=True
    )
    name: Mapped[str | None] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(Text)
    phone: Mapped[str | None] = mapped_column(Text)
    order_number: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str | None] = mapped_column(Text, comment="fixo | livre; null when unknown")
    capacity: Mapped[int | None] = mapped_column(Integer, comment="spaces")
    geometry: Mapped[WKBElement | None] = mapped_column(
        Geometry("MULTIPOLYGON", srid=4326, spatial_index=True)
    )
    radius_m: Mapped[float | None] = mapped_column(
        Float, comment="radius the area was buffered with, when the source gave a point"
    )
    location_note: Mapped[str | None] = mapped_column(
        Text, comment="why the geometry is missing or approximate"
    )
    retired_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("kind IN ('fixo', 'livre')", name="kind"),
        CheckConstraint("capacity IS NULL OR capacity >= 0", name="capacity_non_negative"),
        CheckConstraint("radius_m IS NULL OR radius_m > 0", name="radius_positive"),
    )


class StandSupervisor(Base):
    """An elected supervisor de ponto (POA arts. 42–45), homologated by the regulator."""

    __tablename__ = "stand_supervisors"

    supervisor_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    stand_id: Mapped[str] = mapped_column(
        Text, ForeignKey("stands.stand_id", ondelete="CASCADE"), index=True
    )
    person_name: Mapped[str] = mapped_column(Text)
    elected_on: Mapped[dt.date] = mapped_column(Date)
    minutes_ref: Mapped[str | None] = mapped_column(Text, comment="ata of the election")
    homologated_on: Mapped[dt.date | None] = mapped_column(Date)
    until: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive")


class ParkingLicence(Base):
    """A licença de estacionamento: a prefixo may wait at a stand over inclusive local dates.

    A null ``valid_from`` means the start is not known (a registry snapshot); periods of one
    prefixo at one stand never overlap.
    """

    __tablename__ = "parking_licences"

    licence_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(
        Text, ForeignKey("vehicles.vehicle_id", ondelete="CASCADE"), index=True
    )
    stand_id: Mapped[str] = mapped_column(Text, ForeignKey("stands.stand_id"), index=True)
    valid_from: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: unknown")
    valid_until: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: open")

    __table_args__ = (
        CheckConstraint("valid_until IS NULL OR valid_until >= valid_from", name="period_order"),
        ExcludeConstraint(
            ("vehicle_id", "="),
            ("stand_id", "="),
            (func.daterange(text("valid_from"), text("valid_until"), text("'[]'")), "&&"),
            name="ex_parking_licences_overlap",
            using="gist",
        ),
    )


class LicenceExclusion(Base):
    """A prefixo excluded from a stand on a date, with the reason (POA art. 50)."""

    __tablename__ = "licence_exclusions"

    exclusion_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(
        Text, ForeignKey("vehicles.vehicle_id", ondelete="CASCADE"), index=True
    )
    stand_id: Mapped[str] = mapped_column(Text, ForeignKey("stands.stand_id"), index=True)
    excluded_on: Mapped[dt.date] = mapped_column(Date)
    reason: Mapped[str] = mapped_column(Text)


class StandSuspension(Base):
    """A prefixo or a driver kept from a stand, or the stand closed, over inclusive local dates.

    ``suspension``: the 20 days of "suspensão das atividades no ponto fixo" (POA art. 45 § único
    I), served by the prefixo or the condutor auxiliar; ``barred``: the auxiliar's
    "impossibilidade de utilizar a área do ponto fixo" (II a), open-ended allowed; ``closed``:
    the whole stand closed by the municipality ("interdição do ponto": road works, an event),
    no prefixo nor driver, open-ended allowed. The registry records what was decided: the dates
    are never derived from the kind.
    """

    __tablename__ = "stand_suspensions"

    suspension_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    stand_id: Mapped[str] = mapped_column(
        Text, ForeignKey("stands.stand_id", ondelete="CASCADE"), index=True
    )
    vehicle_id: Mapped[str | None] = mapped_column(
        Text, ForeignKey("vehicles.vehicle_id", ondelete="CASCADE"), index=True
    )
    driver_id: Mapped[str | None] = mapped_column(
        Text, ForeignKey("drivers.driver_id", ondelete="CASCADE"), index=True
    )
    starts_on: Mapped[dt.date] = mapped_column(Date, comment="inclusive")
    ends_on: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: open")
    kind: Mapped[str] = mapped_column(Text, comment="suspension | barred | closed")
    reason: Mapped[str | None] = mapped_column(Text)
    process_ref: Mapped[str | None] = mapped_column(Text, comment="processo administrativo")
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("kind IN ('suspension', 'barred', 'closed')", name="kind"),
        CheckConstraint(
            "CASE WHEN kind = 'closed' THEN vehicle_id IS NULL AND driver_id IS NULL "
            "ELSE (vehicle_id IS NULL) <> (driver_id IS NULL) END",
            name="one_subject",
        ),
        CheckConstraint("ends_on IS NULL OR ends_on >= starts_on", name="period_order"),
        CheckConstraint(
            "kind IN ('barred', 'closed') OR ends_on IS NOT NULL", name="suspension_ends"
        ),
    )


class AllowedPlace(Base):
    """An area outside the stands where a taxi may wait for a passenger.

    Regulated parking (PB art. 20 VII: "ou em áreas de estacionamento permitido") or a waiting
    area the regulator authorised: waiting there is not ``illegal_stand_formation``. The file
    imported is the current list: areas it omits are retired.
    """

    __tablename__ = "allowed_places"

    place_id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str | None] = mapped_column(Text)
    geometry: Mapped[WKBElement] = mapped_column(
        Geometry("MULTIPOLYGON", srid=4326, spatial_index=True), nullable=False
    )
    retired_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
