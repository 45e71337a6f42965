"""Password hashing (argon2id) and opaque random tokens stored as their SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()  # argon2id with the library's current defaults

USER_TOKEN_PREFIX = "pu_"
DEVICE_TOKEN_PREFIX = "pd"
MIN_PASSWORD_LENGTH = 8


def hash_password(password: str) -> str:
    """Return the argon2id hash of ``password`` (salted, with its parameters encoded)."""
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Tell whether ``password`` matches ``password_hash``; a malformed hash never matches."""
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def new_user_token() -> str:
    """Return a new user bearer token (256 random bits, URL-safe)."""
    return USER_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_device_token() -> str:
    """Return a new device token: ``pd`` and 32 lowercase hex digits (128 random bits).

    Only letters and digits, so it can be typed into a tracker app's "device identifier" field
    and sent as the OsmAnd ``id``.
    """
    return DEVICE_TOKEN_PREFIX + secrets.token_hex(16)


def token_digest(token: str) -> str:
    """Return the SHA-256 hex digest under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
