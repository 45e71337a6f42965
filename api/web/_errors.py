"""Named errors of the web console; each is answered with a pt-BR page or a redirect."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from api.web.auth import WebSession


class LoginRequiredError(PermissionError):
    """No valid session: the visitor is sent to the login (303), ``next_path`` kept."""

    def __init__(self, *, next_path: str | None, ended: bool) -> None:
        super().__init__("login necessário")
        self.next_path = next_path
        self.ended = ended


class WebForbiddenError(PermissionError):
    """A logged-in user whose role may not open the page (403 page)."""

    def __init__(self, *, web: WebSession, allowed: frozenset[str]) -> None:
        msg = f"o papel '{web.principal.role}' não tem acesso a esta página"
        super().__init__(msg)
        self.web = web
        self.allowed = allowed


class CsrfError(PermissionError):
    """A state-changing request without the session's CSRF token, or with a wrong one (403)."""

    def __init__(self, *, web: WebSession | None) -> None:
        super().__init__("token CSRF ausente ou inválido")
        self.web = web


class PasswordChangeRequiredError(PermissionError):
    """A session whose password the console drew: the user sets their own first (303)."""

    def __init__(self) -> None:
        super().__init__("troque a senha temporária")
