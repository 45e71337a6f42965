"""Users and roles (``/admin/usuarios``): list, create, change role, disable, reset password.

Every change goes through :mod:`api.accounts` (the functions of ``pontual users``): a role,
password or account change revokes the user's tokens, which ends their web sessions and live
streams. Each change is written to the audit log (never the password). A temporary password is
shown once (:func:`api.web.admin_base.set_reveal`).
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException
from starlette.responses import Response

from api import accounts
from api._errors import UserAdminError, UserStandsError
from api.audit import record_personal_data_access
from api.deps import SessionDep, SettingsDep
from api.web.admin_base import (
    AdminUser,
    audit,
    forget_reveal,
    form_text,
    set_reveal,
    take_reveal,
)
from api.web.nav import ROLE_LABELS
from api.web.templating import render
from db.accounts.models import ROLES, User

router = APIRouter(include_in_schema=False)

TEMP_PASSWORD = "temp_password"
NOTICES = {
    "criado": "Usuário criado.",
    "papel": "Papel alterado; as sessões do usuário foram encerradas.",
    "sem_mudanca": "Papel e pontos iguais aos de antes: nada mudou, as sessões continuam.",
    "desativado": "Conta desativada; as sessões do usuário foram encerradas.",
    "senha": "Senha alterada; as sessões do usuário foram encerradas.",
}
_STAND_SPLIT = re.compile(r"[;,\s]+")


def stand_list(text: str | None) -> list[str]:
    """Return the stand ids of a field (separated by ``;``, ``,`` or spaces)."""
    return [s for s in _STAND_SPLIT.split(text or "") if s]


def temporary_password(username: str = "") -> str:
    """Return a new random password to hand over once (16 characters, ~96 bits).

    Drawn again in the rare case the rules refuse it (it contains ``username``).
    """
    while True:
        secret = secrets.token_urlsafe(12)
        if accounts.password_problem(secret, username=username) is None:
            return secret


def new_account_errors(
    *,
    session: Session,
    username: str,
    role: str,
    stand_ids: list[str],
    password: str | None,
    password_repeat: str | None,
) -> dict[str, str]:
    """Return the "Nova conta" form's errors by field (empty: the account can be created).

    The rules are :mod:`api.accounts`'s; ``password`` None: a temporary one is drawn.
    """
    errors: dict[str, str] = {}
    try:
        username = accounts.check_username(username)
        accounts.check_name_free(session=session, username=username)
    except UserAdminError as exc:
        errors["username"] = str(exc)
    try:
        accounts.check_role(role)
        accounts.check_stands(session=session, role=role, stand_ids=stand_ids)
    except UserAdminError as exc:
        errors["role" if role not in ROLES else "stands"] = str(exc)
    if password is not None:
        problem = accounts.password_problem(password, username=username)
        if problem is not None:
            errors["password"] = problem
        elif password != password_repeat:
            errors["password_repeat"] = "as duas senhas não são iguais"
    return errors


def _users_page(
    request: Request,
    *,
    web: AdminUser,
    session: SessionDep,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    notice: str | None = None,
    status_code: int = 200,
    q: str = "",
) -> Response:
    query = select(User).order_by(User.username)
    if q.strip():
        query = query.where(User.username.ilike(f"%{q.strip()}%"))
    users = session.scalars(query).all()
    rows = [
        {"user": u, "stands": accounts.user_stands(session=session, user_id=u.user_id)}
        for u in users
    ]
    named = [str(u.user_id) for u in users if u.full_name]
    if named:
        record_personal_data_access(
            session=session,
            actor=web.principal.actor,
            entity="users",
            ids=named,
            fields=("full_name",),
            route=request.url.path,
        )
        session.commit()  # audited before the names leave
    return render(
        request,
        "admin/usuarios.html",
        web=web,
        title="Usuários e papéis",
        status_code=status_code,
        rows=rows,
        roles=ROLES,
        role_labels=ROLE_LABELS,
        errors=errors or {},
        values=values or {"role": "agent", "password_mode": "temporary"},
        notice=notice,
        q=q,
    )


@router.get("/admin/usuarios", name="web_admin_users")
def users(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    aviso: str = "",
    q: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Accounts with their role, state and stands (search by name); a new account's form."""
    return _users_page(request, web=web, session=session, notice=NOTICES.get(aviso), q=q)


@router.post("/admin/usuarios", name="web_admin_user_create")
def create_user(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=200)] = "",
    full_name: Annotated[str, Form(max_length=200)] = "",
    role: Annotated[str, Form(max_length=40)] = "",
    stands: Annotated[str, Form(max_length=5000)] = "",
    password_mode: Annotated[str, Form(max_length=20)] = "temporary",
    password: Annotated[str, Form(max_length=1000)] = "",
    password_repeat: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    """Create an account (a password set here, or a temporary one shown once)."""
    values = {
        "username": username,
        "full_name": full_name,
        "role": role,
        "stands": stands,
        "password_mode": password_mode,
    }
    temporary = password_mode != "set"
    errors = new_account_errors(
        session=session,
        username=username,
        role=role,
        stand_ids=stand_list(stands),
        password=None if temporary else password,
        password_repeat=None if temporary else password_repeat,
    )
    if errors:
        return _users_page(
            request, web=web, session=session, errors=errors, values=values, status_code=422
        )
    secret = temporary_password(username.strip()) if temporary else password
    try:
        user = accounts.create_user(
            session=session,
            username=username,
            password=secret,
            role=role,
            full_name=form_text(full_name),
            stand_ids=stand_list(stands),
            temporary=temporary,
        )
    except UserAdminError as exc:  # a concurrent change (the fields were checked above)
        session.rollback()
        return _users_page(
            request,
            web=web,
            session=session,
            errors={"": str(exc)},
            values=values,
            status_code=422,
        )
    audit(
        session,
        web=web,
        action="create",
        entity="user",
        entity_id=user.username,
        role=user.role,
        stand_ids=stand_list(stands),
        password="temporária" if temporary else "definida pelo administrador",
    )
    session.commit()
    response = RedirectResponse(f"/admin/usuarios/{user.user_id}?aviso=criado", status_code=303)
    if temporary:
        set_reveal(
            response,
            request,
            settings=settings,
            web=web,
            kind=TEMP_PASSWORD,
            subject=str(user.user_id),
            secret=secret,
        )
    return response


def _user_or_404(session: SessionDep, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise HTTPException(404)
    return user


def _user_page(
    request: Request,
    *,
    web: AdminUser,
    session: SessionDep,
    user: User,
    temp_password: str | None = None,
    errors: dict[str, str] | None = None,
    notice: str | None = None,
    status_code: int = 200,
    posted: dict[str, str] | None = None,
) -> Response:
    if user.full_name:
        record_personal_data_access(
            session=session,
            actor=web.principal.actor,
            entity="users",
            ids=[str(user.user_id)],
            fields=("full_name",),
            route=request.url.path,
        )
        session.commit()
    return render(
        request,
        "admin/usuario.html",
        web=web,
        title=f"Usuário {user.username}",
        status_code=status_code,
        account=user,
        stands=accounts.user_stands(session=session, user_id=user.user_id),
        roles=ROLES,
        role_labels=ROLE_LABELS,
        temp_password=temp_password,
        errors=errors or {},
        notice=notice,
        posted=posted or {},
        timezone=request.app.state.settings.timezone,
    )


@router.get("/admin/usuarios/{user_id}", name="web_admin_user")
def user_page(
    request: Request,
    user_id: int,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    aviso: str = "",
) -> Response:
    """One account: its role and stands, disable, reset the password (temporary one once)."""
    user = _user_or_404(session, user_id)
    secret = take_reveal(
        request, settings=settings, web=web, kind=TEMP_PASSWORD, subject=str(user.user_id)
    )
    response = _user_page(
        request,
        web=web,
        session=session,
        user=user,
        temp_password=secret,
        notice=NOTICES.get(aviso),
    )
    if secret is not None:
        forget_reveal(response, request)
    return response


def _refused(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    user_id: int,
    *,
    field: str,
    error: UserAdminError,
    posted: dict[str, str] | None = None,
) -> Response:
    """Undo the change and show the user's page again with ``error`` on ``field`` (422).

    What was typed (``posted``) stays in its fields.
    """
    session.rollback()
    user = _user_or_404(session, user_id)
    errors = {field: str(error)}
    return _user_page(
        request,
        web=web,
        session=session,
        user=user,
        errors=errors,
        status_code=422,
        posted=posted,
    )


def _done(user: User, notice: str) -> RedirectResponse:
    return RedirectResponse(f"/admin/usuarios/{user.user_id}?aviso={notice}", status_code=303)


@router.post("/admin/usuarios/{user_id}/papel", name="web_admin_user_role")
def change_role(
    request: Request,
    user_id: int,
    web: AdminUser,
    session: SessionDep,
    role: Annotated[str, Form(max_length=40)] = "",
    stands: Annotated[str, Form(max_length=5000)] = "",
) -> Response:
    """Change the role (and a supervisor's stands); the user's sessions end.

    The stands field as sent is the supervisor's stands: emptied, it is refused (a supervisor
    needs one), not read as "keep them"; for another role it is ignored (a supervisor made
    agent leaves the stands). Nothing changed: nothing done, no session ended.
    """
    user = _user_or_404(session, user_id)
    before = (user.role, accounts.user_stands(session=session, user_id=user.user_id))
    posted = {"role": role, "stands": stands}
    # A role without stands takes none: the field the form still shows goes with the old role.
    wanted = stand_list(stands) if role == "supervisor" else []
    if role == before[0] and sorted(set(wanted)) == sorted(before[1]):
        return _done(user, "sem_mudanca")
    try:
        if role == "supervisor" and not wanted:
            msg = "um(a) supervisor(a) precisa de pelo menos um ponto: informe os pontos"
            raise UserStandsError(msg)
        accounts.set_role(
            session=session,
            username=user.username,
            role=role,
            stand_ids=wanted,
            by=web.principal.username,
        )
    except UserAdminError as exc:
        field = "stands" if isinstance(exc, UserStandsError) else "role"
        return _refused(request, web, session, user_id, field=field, error=exc, posted=posted)
    audit(
        session,
        web=web,
        action="set_role",
        entity="user",
        entity_id=user.username,
        role={"from": before[0], "to": role},
        stand_ids={
            "from": before[1],
            "to": accounts.user_stands(session=session, user_id=user.user_id),
        },
    )
    session.commit()
    return _done(user, "papel")


@router.post("/admin/usuarios/{user_id}/desativar", name="web_admin_user_disable")
def disable(request: Request, user_id: int, web: AdminUser, session: SessionDep) -> Response:
    """Disable the account; its sessions end (the account and its history remain)."""
    user = _user_or_404(session, user_id)
    try:
        accounts.disable_user(session=session, username=user.username, by=web.principal.username)
    except UserAdminError as exc:
        return _refused(request, web, session, user_id, field="disable", error=exc)
    audit(session, web=web, action="disable", entity="user", entity_id=user.username)
    session.commit()
    return _done(user, "desativado")


@router.post("/admin/usuarios/{user_id}/senha", name="web_admin_user_password")
def reset_password(
    request: Request,
    user_id: int,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    password_mode: Annotated[str, Form(max_length=20)] = "temporary",
    password: Annotated[str, Form(max_length=1000)] = "",
    password_repeat: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    """Set a new password (typed here, or a temporary one shown once); the sessions end."""
    user = _user_or_404(session, user_id)
    temporary = password_mode != "set"
    if not temporary and password != password_repeat:
        errors = {"password_repeat": "as duas senhas não são iguais"}
        return _user_page(
            request, web=web, session=session, user=user, errors=errors, status_code=422
        )
    secret = temporary_password(user.username) if temporary else password
    try:
        accounts.set_password(
            session=session, username=user.username, password=secret, temporary=temporary
        )
    except UserAdminError as exc:
        return _refused(request, web, session, user_id, field="password", error=exc)
    audit(
        session,
        web=web,
        action="set_password",
        entity="user",
        entity_id=user.username,
        password="temporária" if temporary else "definida pelo administrador",
    )
    session.commit()
    response = _done(user, "senha")
    if temporary:
        set_reveal(
            response,
            request,
            settings=settings,
            web=web,
            kind=TEMP_PASSWORD,
            subject=str(user.user_id),
            secret=secret,
        )
    return response
