"""What the Administração pages share: the role, the audit entry, form values, pt-BR errors.

- :data:`AdminUser`: the dependency of every ``/admin`` route (admin only; CSRF on POST).
- :func:`audit`: one entry of the append-only audit log for a change made from the console
  (account and device changes, imports: the registry's own commands write theirs).
- :func:`validate`: a strict request model of the JSON API (``api/routes/stands.py``) checked
  on a form's values; its errors as pt-BR messages by field (:func:`pt_errors`).
- :func:`form_number`, :func:`form_text`: a form's text to the typed value the model expects
  (a decimal comma is accepted); no rule of their own beyond "is it a number".
- One-time secrets (a device token, a temporary password): :func:`set_reveal` puts it in a
  short-lived encrypted cookie of the session, :func:`take_reveal` shows it once and deletes
  the cookie, so a reload never shows it again and nothing is stored in clear.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from cryptography.fernet import InvalidToken
from fastapi import Depends, Request
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session
from starlette.responses import Response

from api.crypto import fernet
from api.schemas import pt_message
from api.settings import Settings
from api.web.auth import WebSession, is_https, require_web_roles
from db.enforcement.models import AuditEntry

ROLES = ("admin",)
"""Who may open the Administração area (as in the API's authorisation)."""
AdminUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]

REVEAL_COOKIE = "pontual_revelar"
REVEAL_PATH = "/admin"
REVEAL_TTL_S = 300
"""How long a one-time secret waits for its page (seconds)."""

M = TypeVar("M", bound=BaseModel)


class FormValueError(ValueError):
    """A form value that is not of the type its field needs (a number, an integer)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class FormError(ValueError):
    """A form refused: the pt-BR messages by field (``""``: the form as a whole)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" if k else v for k, v in errors.items()))
        self.errors = errors


def audit(
    session: Session,
    *,
    web: WebSession,
    action: str,
    entity: str,
    entity_id: str | None,
    **details: Any,
) -> None:
    """Add an audit entry for a change by the logged-in user (the caller commits)."""
    session.add(
        AuditEntry(
            actor=web.principal.actor,
            action=action,
            entity=entity,
            entity_id=entity_id,
            details={**details, "via": "web"},
        )
    )


def form_text(value: str | None) -> str | None:
    """Return the trimmed text of a field, or None when it is blank."""
    if value is None:
        return None
    text = value.strip()
    return text or None


def form_number(value: str | None, *, field: str, integer: bool = False) -> float | int | None:
    """Return a field's number (``25``, ``25.5`` or ``25,5``), None when blank.

    Raises
    ------
    FormValueError
        If the text is not a number (or not an integer when ``integer``).
    """
    text = form_text(value)
    if text is None:
        return None
    if integer:
        try:
            return int(text)
        except ValueError:
            msg = f"era {text!r}; esperado um número inteiro (ex.: 4)"
            raise FormValueError(field, msg) from None
    try:
        return float(text.replace(",", "."))
    except ValueError:
        msg = f"era {text!r}; esperado um número (ex.: 25 ou 25,5)"
        raise FormValueError(field, msg) from None


def pt_errors(exc: ValidationError) -> dict[str, str]:
    """Return a model's validation errors as pt-BR messages by field (first error of each)."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc") or ()
        field = str(loc[0]) if loc else ""
        out.setdefault(field, pt_message(dict(err)))
    return out


def validate(model: type[M], values: dict[str, Any]) -> M:
    """Check a form's values with a strict request model of the API.

    Raises
    ------
    FormError
        With the pt-BR messages by field.
    """
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise FormError(pt_errors(exc)) from None


# --- one-time secrets --------------------------------------------------------------------------


def set_reveal(
    response: Response,
    request: Request,
    *,
    settings: Settings,
    web: WebSession,
    kind: str,
    subject: str,
    secret: str,
) -> None:
    """Give the browser a secret to show once on the next page (encrypted, HttpOnly, 5 min)."""
    payload = json.dumps({"k": kind, "s": subject, "v": secret, "d": web.token_digest})
    sealed = fernet(settings).encrypt(payload.encode()).decode()
    response.set_cookie(
        REVEAL_COOKIE,
        sealed,
        max_age=REVEAL_TTL_S,
        path=REVEAL_PATH,
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )


def take_reveal(
    request: Request, *, settings: Settings, web: WebSession, kind: str, subject: str | None
) -> str | None:
    """Return the secret waiting for this page (kind, subject, this session), else None.

    The caller deletes the cookie with :func:`forget_reveal` on its answer.
    """
    sealed = request.cookies.get(REVEAL_COOKIE)
    if not sealed:
        return None
    try:
        payload = json.loads(fernet(settings).decrypt(sealed.encode(), ttl=REVEAL_TTL_S))
    except (InvalidToken, ValueError):
        return None
    if (
        not isinstance(payload, dict)
        or payload.get("d") != web.token_digest
        or payload.get("k") != kind
        or (subject is not None and payload.get("s") != subject)
    ):
        return None
    secret = payload.get("v")
    return secret if isinstance(secret, str) else None


def forget_reveal(response: Response, request: Request) -> None:
    """Delete the one-time secret's cookie (it has been shown)."""
    response.delete_cookie(
        REVEAL_COOKIE, path=REVEAL_PATH, secure=is_https(request), httponly=True, samesite="strict"
    )
