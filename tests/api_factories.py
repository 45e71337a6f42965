"""Helpers of the HTTP API tests (import as ``from api_factories import bearer``)."""

from __future__ import annotations

ROLES = ("admin", "planner", "agent", "supervisor")
"""Roles of logged-in users."""

PASSWORD = "senha-de-teste-123"
"""Password of every seeded user."""


def bearer(token: str) -> dict[str, str]:
    """Return the Authorization header of a bearer token."""
    return {"Authorization": f"Bearer {token}"}


SECRET_KEY = "oGD3pDyBv0ofUQb3obqeq2DPmy1gxCFsbhOHGS9gBw8="
"""Fernet key of the test apps' webhook secrets (no key file in the user's data directory)."""
