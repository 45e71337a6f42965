"""Named errors of the HTTP API; each carries its HTTP status and a machine-readable code.

Messages are pt-BR: they reach users in the ``{"error": {"code", "message", ...}}`` body.
"""

from __future__ import annotations

from typing import Any

ROOMS = (
    "runtime", "geo", "fleet", "tracking", "stands", "enforcement", "maps", "planning", "db",
    "engines", "api",
)  # fmt: skip
"""The project's packages (``pyproject.toml``'s package list; the Makefile's ``ROOMS``)."""


def is_ours(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the project's code (its message is written for users)."""
    return type(exc).__module__.split(".")[0] in ROOMS


class ApiError(Exception):
    """Base of the errors a handler raises on purpose; mapped to a 4xx/503 in one place."""

    status_code = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details or {}
        self.headers = headers or {}


class NotAuthenticatedError(ApiError):
    """No credentials, or credentials that are wrong, expired or revoked (401)."""

    status_code = 401
    code = "not_authenticated"


class ForbiddenError(ApiError, PermissionError):
    """Authenticated, but the role (or the supervisor's stands) does not allow it (403)."""

    status_code = 403
    code = "forbidden"


class NotFoundError(ApiError, LookupError):
    """The named resource does not exist (404)."""

    status_code = 404
    code = "not_found"


class ConflictError(ApiError):
    """The request clashes with stored data, e.g. an id already taken (409)."""

    status_code = 409
    code = "conflict"


class InvalidRequestError(ApiError, ValueError):
    """A parameter is out of its allowed range or inconsistent (422)."""

    status_code = 422
    code = "invalid_request"


class UnreadableBodyError(InvalidRequestError):
    """A JSON body that cannot be read unambiguously (422); ``kind`` names why.

    ``json_invalid`` (not JSON, not UTF-8, a lone surrogate, nested too deep),
    ``json_duplicate_key`` (a key twice in one object), ``json_number_too_long`` (an integer
    beyond Python's digit limit). The body carries ``errors`` as a validation error does.
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(
            f"requisição inválida: {message}; nada foi gravado",
            details={"errors": [{"loc": ["body"], "msg": message, "type": kind}]},
        )
        self.kind = kind


class RateLimitedError(ApiError):
    """Too many requests from one client (429, with ``Retry-After``)."""

    status_code = 429
    code = "rate_limited"


class ServiceUnavailableError(ApiError):
    """The database cannot be reached or is not migrated (503)."""

    status_code = 503
    code = "database_unavailable"


class UserAdminError(ValueError):
    """A ``pontual users``/``pontual devices`` command cannot be carried out (CLI message)."""


class UserStandsError(UserAdminError):
    """A supervisor's stands are the problem: unknown, missing, or given to another role."""


class InputFileError(ValueError):
    """An input file of a command: missing, a folder, empty or unreadable (names the option)."""
