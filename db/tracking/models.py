"""ORM models of the tracking tables: stored GPS fixes, rejected input rows, daily pickups.

``fixes`` is partitioned by range of ``ts``, one partition a UTC day (``fixes_pYYYYMMDD``), with a
DEFAULT partition so a fix outside the prepared days is never lost; the partitions are created by
the migration and by :func:`db.tracking.store.ensure_fix_partitions`, the ORM maps the parent only.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from geoalchemy2 import Geometry, WKBElement
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    Identity,
    SmallInteger,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base

FIXES_TABLE = "fixes"
FIXES_DEFAULT_PARTITION = "fixes_default"


class Fix(Base):
    """One stored GPS fix; H3 cells are stored as signed 64-bit integers.

    Indexes, chosen by ``bench/bench_fix_indexes.py``: the primary key ``(vehicle_id, ts)``
    (``vehicle_id`` compared bytewise, collation "C") for a vehicle's track, and
    ``(h3_r9, ts)`` for a place over time, on each closed day's partition only (built off the
    write path by ``db.tracking.store.index_closed_days``; migration 0008). The daily partitions
    bound time-range scans; BRIN on ``ts`` and GiST on ``geom`` did not pay.
    """

    __tablename__ = FIXES_TABLE

    vehicle_id: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    ts: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    lat: Mapped[float] = mapped_column(Float(53))
    lon: Mapped[float] = mapped_column(Float(53))
    geom: Mapped[WKBElement] = mapped_column(Geometry("POINT", srid=4326, spatial_index=False))
    speed_kmh: Mapped[float | None] = mapped_column(Float(53))
    heading_deg: Mapped[float | None] = mapped_column(Float(53))
    accuracy_m: Mapped[float | None] = mapped_column(Float(53))
    meter: Mapped[str | None] = mapped_column(Text)
    tariff: Mapped[int | None] = mapped_column(SmallInteger)
    driver_id: Mapped[str | None] = mapped_column(Text)
    h3_r9: Mapped[int | None] = mapped_column(BigInteger)
    speed_flag: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(Text)
    ts_origin: Mapped[str | None] = mapped_column(Text)
    """How ``ts`` was obtained: NULL, sent with an offset (or Unix time); ``naive_utc``, an
    OsmAnd time without offset read as UTC; ``received``, none sent: the receive time."""

    __table_args__: Any = (
        CheckConstraint("meter IN ('free', 'occupied', 'off')", name="meter"),
        CheckConstraint("tariff IN (1, 2)", name="tariff"),
        CheckConstraint("lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180", name="lat_lon"),
        {"postgresql_partition_by": "RANGE (ts)"},
    )


class RejectedFix(Base):
    """An input row refused by validation, kept with its reason and original values."""

    __tablename__ = "rejected_fixes"

    rejected_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    source: Mapped[str] = mapped_column(Text, index=True)
    row: Mapped[int | None] = mapped_column(BigInteger, comment="1-based data row of the source")
    reason: Mapped[str] = mapped_column(Text)
    raw: Mapped[dict[str, Any]] = mapped_column(JSONB)
    received_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class Pickup(Base):
    """A ride's start on a closed UTC day, for the planner's demand (``db.tracking.pickups``).

    A fix with the meter ``occupied`` whose fix before (the vehicle's, within an hour) was not:
    kept per closed day so that the demand over months reads these, not every fix. Deleted with
    the fixes by retention.
    """

    __tablename__ = "pickups"

    vehicle_id: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    ts: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True, index=True)
    lat: Mapped[float] = mapped_column(Float(53))
    lon: Mapped[float] = mapped_column(Float(53))


class PickupDay(Base):
    """A closed UTC day whose pickups are in ``pickups``; a write into that day removes it."""

    __tablename__ = "pickup_days"

    day: Mapped[dt.date] = mapped_column(Date, primary_key=True, comment="UTC day")
    built_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
