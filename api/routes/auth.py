"""Login (OAuth2 password form → opaque bearer token), who am I, logout."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.security import OAuth2PasswordRequestForm
from pydantic import BaseModel

from api import accounts
from api._errors import ForbiddenError, NotAuthenticatedError
from api.deps import (
    PASSWORD_TEMPORARY,
    BearerToken,
    CurrentUser,
    SessionDep,
    SettingsDep,
    login_attempt,
    login_rate_limit,
    login_succeeded,
)
from api.schemas import error_responses

router = APIRouter(prefix="/api/v1/auth", tags=["autenticação"])


class Token(BaseModel):
    """A bearer token and when it expires."""

    access_token: str
    token_type: str = "bearer"
    expires_at: dt.datetime


class Me(BaseModel):
    """The logged-in user."""

    username: str
    role: str
    stand_ids: list[str]


@router.post(
    "/token",
    response_model=Token,
    responses=error_responses(401, 403, 422, 429, 503),
    dependencies=[Depends(login_rate_limit)],
)
def login(
    request: Request,
    form: Annotated[OAuth2PasswordRequestForm, Depends()],
    session: SessionDep,
    settings: SettingsDep,
) -> Token:
    """Troca usuário e senha por um token de acesso (expira após `token_ttl_s`).

    429 com `Retry-After` após `login_rate_limit_per_min` tentativas por minuto do mesmo
    endereço, ou após `login_failures_per_account` senhas erradas para o mesmo usuário em
    `login_failure_window_s` (de qualquer endereço; até a senha certa é recusada até o fim
    da janela).
    """
    key = login_attempt(request, form.username)
    user = accounts.authenticate(session=session, username=form.username, password=form.password)
    if user is None:
        raise NotAuthenticatedError(
            "usuário ou senha incorretos, ou conta desativada",
            code="invalid_credentials",
            headers={"WWW-Authenticate": "Bearer"},
        )
    login_succeeded(request, key)
    if user.password_temporary:
        raise ForbiddenError(PASSWORD_TEMPORARY, code="password_change_required")
    token, expires_at = accounts.issue_token(session=session, user=user, ttl_s=settings.token_ttl_s)
    session.commit()
    return Token(access_token=token, expires_at=expires_at)


@router.get("/me", response_model=Me, responses=error_responses(401, 503))
def me(user: CurrentUser) -> Me:
    """Quem está autenticado, com o papel e (supervisor) os pontos."""
    return Me(username=user.username, role=user.role, stand_ids=sorted(user.stand_ids))


@router.post("/logout", status_code=204, responses=error_responses(401, 503))
def logout(user: CurrentUser, session: SessionDep, token: BearerToken) -> Response:
    """Revoga o token usado nesta requisição."""
    if token:
        accounts.revoke_token(session=session, token=token)
        session.commit()
    return Response(status_code=204)
