"""ORM models of the accounts: user accounts and their roles, access tokens, GPS devices.

Secrets are never stored: passwords as argon2 hashes, bearer tokens (users and devices) as their
SHA-256 digest (the tokens are 128+ random bits, so a fast digest is enough and lookups are one
index probe).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

import db.stands.models  # noqa: F401  (the stands table its foreign keys name)
from db.base import Base

ROLES = ("admin", "planner", "agent", "supervisor")
"""Roles of logged-in users; the citizen (public) role has no account."""


class User(Base):
    """A person who logs in: admin, planner, enforcement agent or supervisor de ponto.

    ``username`` is unique whatever its case (``Ana`` is ``ana``); it keeps the case it was
    created with.
    """

    __tablename__ = "users"

    user_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    username: Mapped[str] = mapped_column(Text, unique=True)
    full_name: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    password_hash: Mapped[str] = mapped_column(Text, comment="argon2id")
    password_temporary: Mapped[bool] = mapped_column(
        Boolean,
        server_default=false(),
        comment="drawn by the console: the user must set their own at the next login",
    )
    disabled_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    __table_args__ = (
        CheckConstraint("role IN (" + ", ".join(f"'{r}'" for r in ROLES) + ")", name="role"),
        # one account per name whatever its case (login ignores case; migration 0020)
        Index("uq_users_username_lower", text("lower(username)"), unique=True),
    )


class UserStand(Base):
    """A stand a supervisor user may see (their scope)."""

    __tablename__ = "user_stands"

    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.user_id", ondelete="CASCADE"), primary_key=True
    )
    stand_id: Mapped[str] = mapped_column(
        Text, ForeignKey("stands.stand_id", ondelete="CASCADE"), primary_key=True, index=True
    )


class AccessToken(Base):
    """An opaque bearer token of a user, stored as its SHA-256 digest; expires, revocable."""

    __tablename__ = "access_tokens"

    token_hash: Mapped[str] = mapped_column(Text, primary_key=True, comment="sha256 hex")
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.user_id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class Device(Base):
    """A GPS device (tracker or phone) of one vehicle, with its own secret token.

    The vehicle is named by id without a foreign key, as fixes are: a device may be set up
    before the vehicle is in the registry.
    """

    __tablename__ = "devices"

    device_id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    vehicle_id: Mapped[str] = mapped_column(Text, index=True)
    token_hash: Mapped[str] = mapped_column(Text, unique=True, comment="sha256 hex")
    label: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
