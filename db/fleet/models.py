"""ORM models of the registry: municipalities, population, permit holders, vehicles, drivers.

The unit most rules attach to is the *prefixo*; its ``vehicle_id`` is the identifier the GPS fixes
carry (for Porto Alegre the prefixo itself).
"""

from __future__ import annotations

import datetime as dt

from geoalchemy2 import Geometry, WKBElement
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Identity,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, ExcludeConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base
from fleet.vocabulary import (  # noqa: F401  (re-exported)
    DRIVER_DOCUMENT_STATUSES,
    DRIVER_DOCUMENTS,
    DRIVER_ROLES,
    POPULATION_KINDS,
    SERVICE_CATEGORIES,
    VEHICLE_STATUSES,
)


def _in(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


class Municipality(Base):
    """A municipality (IBGE code) with its legal time zone and boundary."""

    __tablename__ = "municipalities"

    code: Mapped[str] = mapped_column(String(7), primary_key=True, comment="IBGE code, 7 digits")
    name: Mapped[str] = mapped_column(Text)
    uf: Mapped[str] = mapped_column(String(2))
    timezone: Mapped[str | None] = mapped_column(Text, comment="IANA zone; null when not known")
    boundary: Mapped[WKBElement | None] = mapped_column(
        Geometry("MULTIPOLYGON", srid=4326, spatial_index=True)
    )

    __table_args__ = (CheckConstraint("code ~ '^[0-9]{7}$'", name="code_digits"),)


class MunicipalPopulation(Base):
    """Population of a municipality in a year, from a census or an estimate."""

    __tablename__ = "municipal_populations"

    municipality_code: Mapped[str] = mapped_column(
        String(7), ForeignKey("municipalities.code", ondelete="CASCADE"), primary_key=True
    )
    year: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    population: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(_in("kind", POPULATION_KINDS), name="kind"),
        CheckConstraint("population >= 0", name="population_non_negative"),
    )


class PermitHolder(Base):
    """An autorizatário / permissionário: holds the delegation, pays the vehicle's fines."""

    __tablename__ = "permit_holders"

    holder_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    municipality_code: Mapped[str | None] = mapped_column(
        String(7), ForeignKey("municipalities.code")
    )
    name: Mapped[str] = mapped_column(Text)
    cpf: Mapped[str | None] = mapped_column(String(11), unique=True)
    phone: Mapped[str | None] = mapped_column(Text)
    email: Mapped[str | None] = mapped_column(Text)
    address: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (CheckConstraint("cpf ~ '^[0-9]{11}$'", name="cpf_digits"),)


class Vehicle(Base):
    """A prefixo and the vehicle operating it."""

    __tablename__ = "vehicles"

    vehicle_id: Mapped[str] = mapped_column(Text, primary_key=True)
    prefixo: Mapped[str] = mapped_column(Text)
    municipality_code: Mapped[str | None] = mapped_column(
        String(7), ForeignKey("municipalities.code")
    )
    holder_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("permit_holders.holder_id")
    )
    plate: Mapped[str | None] = mapped_column(Text)
    make: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    year: Mapped[int | None] = mapped_column(SmallInteger, comment="year of manufacture")
    fuel: Mapped[str | None] = mapped_column(Text)
    first_registered_on: Mapped[dt.date | None] = mapped_column(Date)
    accessible: Mapped[bool | None] = mapped_column(
        Boolean, server_default=text("false"), comment="null: unknown"
    )
    alvara_valid_until: Mapped[dt.date | None] = mapped_column(Date)
    inspection_valid_until: Mapped[dt.date | None] = mapped_column(Date)
    last_inspection_on: Mapped[dt.date | None] = mapped_column(Date, comment="latest vistoria done")
    alvara_first_issued_on: Mapped[dt.date | None] = mapped_column(
        Date, comment="first alvará de tráfego issued: start of the authorisation"
    )
    substitution_since: Mapped[dt.date | None] = mapped_column(
        Date, comment="provisional substitute since (inclusive)"
    )
    substituted_plate: Mapped[str | None] = mapped_column(
        Text, comment="plate of the vehicle it substitutes"
    )
    termo_recolhido_since: Mapped[dt.date | None] = mapped_column(
        Date, comment="Termo de Autorização recolhido from (inclusive)"
    )
    termo_recolhido_until: Mapped[dt.date | None] = mapped_column(
        Date, comment="inclusive; null: still recolhido"
    )
    service_category: Mapped[str | None] = mapped_column(
        Text, comment="comum, aeroporto, distrito, acessivel"
    )
    unplaced_stands: Mapped[list[str]] = mapped_column(
        ARRAY(Text),
        server_default=text("'{}'"),
        comment="stands the latest fleet import named for a licence but could not place",
    )
    updated_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        UniqueConstraint("municipality_code", "prefixo", name="uq_vehicles_municipality_prefixo"),
        CheckConstraint(_in("service_category", SERVICE_CATEGORIES), name="service_category"),
        CheckConstraint(
            "termo_recolhido_until IS NULL OR termo_recolhido_until >= termo_recolhido_since",
            name="termo_recolhido_order",
        ),
        CheckConstraint(
            "substituted_plate IS NULL OR substitution_since IS NOT NULL",
            name="substituted_plate_with_since",
        ),
    )


class VehicleStatusPeriod(Base):
    """An administrative status of a vehicle over inclusive local dates; no two overlap."""

    __tablename__ = "vehicle_status_periods"

    period_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(
        Text, ForeignKey("vehicles.vehicle_id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: unknown")
    valid_until: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: open")
    reason: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(_in("status", VEHICLE_STATUSES), name="status"),
        CheckConstraint("valid_until IS NULL OR valid_until >= valid_from", name="period_order"),
        ExcludeConstraint(
            ("vehicle_id", "="),
            (func.daterange(text("valid_from"), text("valid_until"), text("'[]'")), "&&"),
            name="ex_vehicle_status_periods_overlap",
            using="gist",
        ),
    )


class Driver(Base):
    """A driver (condutor) with their municipal credential (ICTP / credencial / RC)."""

    __tablename__ = "drivers"

    driver_id: Mapped[str] = mapped_column(Text, primary_key=True, comment="municipal id")
    municipality_code: Mapped[str | None] = mapped_column(
        String(7), ForeignKey("municipalities.code")
    )
    name: Mapped[str] = mapped_column(Text)
    cpf: Mapped[str | None] = mapped_column(String(11))
    cnh_valid_until: Mapped[dt.date | None] = mapped_column(Date)
    credential_valid_until: Mapped[dt.date | None] = mapped_column(
        Date, comment="ICTP / Registro de Condutor, inclusive"
    )
    cnh_number: Mapped[str | None] = mapped_column(Text)
    cnh_category: Mapped[str | None] = mapped_column(Text)
    synthetic: Mapped[bool] = mapped_column(
        Boolean, server_default=text("false"), comment="demo data: not a real person"
    )


class DriverDocumentPeriod(Base):
    """A status of a driver's CNH or ICTP over inclusive local dates (no two of one overlap)."""

    __tablename__ = "driver_document_periods"

    period_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    driver_id: Mapped[str] = mapped_column(
        Text, ForeignKey("drivers.driver_id", ondelete="CASCADE"), index=True
    )
    document: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: unknown")
    valid_until: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive; null: open")

    __table_args__ = (
        CheckConstraint(_in("document", DRIVER_DOCUMENTS), name="document"),
        CheckConstraint(_in("status", DRIVER_DOCUMENT_STATUSES), name="status"),
        CheckConstraint("valid_until IS NULL OR valid_until >= valid_from", name="period_order"),
        ExcludeConstraint(
            ("driver_id", "="),
            ("document", "="),
            (func.daterange(text("valid_from"), text("valid_until"), text("'[]'")), "&&"),
            name="ex_driver_document_periods_overlap",
            using="gist",
        ),
    )


class DriverAssignment(Base):
    """A driver's link to a prefixo (autorizatário condutor or auxiliar) over inclusive dates."""

    __tablename__ = "driver_assignments"

    assignment_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    driver_id: Mapped[str] = mapped_column(Text, ForeignKey("drivers.driver_id"), index=True)
    vehicle_id: Mapped[str] = mapped_column(
        Text, ForeignKey("vehicles.vehicle_id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(Text)
    valid_from: Mapped[dt.date] = mapped_column(Date)
    valid_until: Mapped[dt.date | None] = mapped_column(Date, comment="inclusive")

    __table_args__ = (
        CheckConstraint(_in("role", DRIVER_ROLES), name="role"),
        CheckConstraint("valid_until IS NULL OR valid_until >= valid_from", name="period_order"),
    )
