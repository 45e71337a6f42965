"""Queries on accounts, tokens and devices (keyword-only functions over a session).

Nothing here commits: the caller owns the transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import ColumnElement, CursorResult, Executable, delete, func, select, update
from sqlalchemy.orm import Session

from api._errors import UserAdminError, UserStandsError
from api.audit import user_actor
from api.security import (
    MIN_PASSWORD_LENGTH,
    hash_password,
    new_device_token,
    new_user_token,
    token_digest,
    verify_password,
)
from db.accounts.models import ROLES, AccessToken, Device, User, UserStand

SESSIONS_CHANNEL = "pontual_sessions"
"""NOTIFY channel of revoked sessions: ``user:<user_id>`` or ``token:<sha256 of the token>``.

Sent in the revoking transaction (delivered at its COMMIT): every server process closes the
alert streams (SSE, WebSocket) of that user or token at once.
"""


USERNAME = re.compile(r"[A-Za-z0-9._@-]{3,100}")
"""A login: no spaces or accents (typed the same on any keyboard, in any log).

Names are unique whatever their case and login ignores it (``Ana`` logs in as ``ana``): the
account keeps the spelling it was created with, which is the one written in the audit log.
"""


def _same_name(username: str) -> ColumnElement[bool]:
    """Match the account named ``username`` whatever its case (index ``lower(username)``).

    Valid names are ASCII, so ``lower`` here folds as the failed-login quota does
    (:func:`api.deps.account_key`: trimmed and case-folded): one name, one account, one quota.
    """
    return func.lower(User.username) == username.strip().lower()


def _dml(session: Session, statement: Executable) -> CursorResult:
    # Session.execute is typed as returning Result; an UPDATE/DELETE without RETURNING yields
    # a CursorResult, which carries the rowcount.
    return cast(CursorResult, session.execute(statement))


def _announce_revocation(session: Session, payload: str) -> None:
    session.execute(select(func.pg_notify(SESSIONS_CHANNEL, payload)))


@dataclass(frozen=True)
class Principal:
    """Who is calling: a logged-in user, with the stands a supervisor is scoped to."""

    user_id: int
    username: str
    role: str
    stand_ids: frozenset[str] = frozenset()
    password_temporary: bool = False
    """The console drew the password: the user sets their own before anything else."""

    @property
    def actor(self) -> str:
        """Name of the caller in the audit log (:func:`api.audit.user_actor`)."""
        return user_actor(self.username)


@dataclass(frozen=True)
class DevicePrincipal:
    """A GPS device: it may send fixes for its vehicle only."""

    device_id: int
    vehicle_id: str
    registered_at: dt.datetime | None = None
    """When the device was registered; it reported nothing of its vehicle before."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def check_role(role: str) -> str:
    """Return ``role`` if it is a known role, else raise :class:`UserAdminError`."""
    if role not in ROLES:
        msg = f"papel '{role}' desconhecido; esperado um de {', '.join(ROLES)}"
        raise UserAdminError(msg)
    return role


COMMON_PASSWORDS = frozenset({
    "12345678", "123456789", "1234567890", "123123123", "11223344", "12341234", "12344321",
    "87654321", "00000000", "11111111", "88888888", "abcd1234", "abc12345", "abcdef12",
    "1234abcd", "a1b2c3d4", "1q2w3e4r", "1qaz2wsx", "qwerty12", "qwerty123", "qwertyui",
    "qwerty1234", "asdf1234", "zaq12wsx", "password", "password1", "password123", "passw0rd",
    "iloveyou", "princess", "sunshine", "football", "baseball", "superman", "starwars",
    "trustno1", "welcome1", "letmein1", "admin123", "administrador", "root1234", "senha123",
    "senha1234", "senha12345", "senhasenha", "minhasenha", "mudar123", "mudar1234", "mudarsenha",
    "trocar123", "alterar123", "acesso123", "brasil123", "brasil2024", "flamengo", "corinthians",
    "palmeiras", "gremio123", "internacional", "santos123", "vasco123", "deus1234", "jesus123",
    "amor1234", "teamo123", "pontual1", "pontual123", "fiscal123", "taxi1234",
})  # fmt: skip
"""Passwords among the first tried by anyone guessing (international and pt-BR lists)."""

_SEQUENCES = ("01234567890", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl", "zxcvbnm")
"""Runs of digits, letters and keyboard rows: a password inside one (either way) is a sequence."""


def password_problem(password: str, *, username: str | None = None) -> str | None:
    """Say why ``password`` is refused (pt-BR), or None when it is acceptable.

    Refused: shorter than :data:`MIN_PASSWORD_LENGTH`; equal to or containing the username
    (whatever its case); one character or a short block (up to 3 characters) repeated
    (``aaaaaaaa``, ``abababab``); a run of digits, letters or a keyboard row, either way
    (``12345678``, ``hgfedcba``, ``qwertyui``); one of :data:`COMMON_PASSWORDS`. Every path that
    sets a password (console, ``pontual users``, demo) checks here.
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"a senha precisa de pelo menos {MIN_PASSWORD_LENGTH} caracteres"
    folded = password.lower()
    name = (username or "").strip().lower()
    if name and name in folded:
        return "a senha não pode ser nem conter o nome de usuário"
    if any((password[:k] * len(password))[: len(password)] == password for k in (1, 2, 3)):
        return (
            "a senha não pode ser um caractere ou um trecho curto repetido "
            "(como aaaaaaaa ou abababab)"
        )
    if any(folded in run or folded in run[::-1] for run in _SEQUENCES):
        return "a senha não pode ser uma sequência simples (como 12345678, abcdefgh ou qwertyui)"
    if folded in COMMON_PASSWORDS:
        return "esta senha está entre as mais usadas e é das primeiras tentadas; escolha outra"
    return None


def check_password(password: str, *, username: str | None = None) -> str:
    """Return ``password`` if it is acceptable, else raise :class:`UserAdminError`.

    The rules are :func:`password_problem`'s; ``username``: the account's login.
    """
    problem = password_problem(password, username=username)
    if problem is not None:
        raise UserAdminError(problem)
    return password


def check_username(username: str) -> str:
    """Return ``username`` trimmed if it is a valid login (:data:`USERNAME`), else raise."""
    username = username.strip()
    if not USERNAME.fullmatch(username):
        msg = (
            f"nome de usuário {username!r} inválido: de 3 a 100 caracteres, só letras sem "
            "acento, números e . _ - @ (sem espaços)"
        )
        raise UserAdminError(msg)
    return username


def check_name_free(*, session: Session, username: str) -> str:
    """Return ``username`` if no account has it (in any case: ``Ana`` is ``ana``), else raise."""
    taken = session.scalar(select(User.username).where(_same_name(username)))
    if taken is not None:
        msg = (
            f"usuário '{username}' já existe"
            if taken == username
            else f"o nome '{username}' já é usado pela conta '{taken}' (nomes de usuário não "
            "distinguem maiúsculas de minúsculas); escolha outro nome"
        )
        raise UserAdminError(msg)
    return username


def check_stands(*, session: Session, role: str, stand_ids: Sequence[str]) -> list[str]:
    """Return the stands of a new account of ``role`` (sorted), else raise.

    A supervisor has at least one stand, all known; other roles have none.
    """
    if stand_ids and role != "supervisor":
        msg = "apenas supervisores são vinculados a pontos"
        raise UserAdminError(msg)
    if role == "supervisor" and not stand_ids:
        msg = "um supervisor precisa de pelo menos um ponto"
        raise UserAdminError(msg)
    return _known_stands(session, stand_ids)


def get_user(*, session: Session, username: str) -> User:
    """Return the user named ``username`` (whatever its case) or raise :class:`UserAdminError`."""
    user = session.scalar(select(User).where(_same_name(username)))
    if user is None:
        msg = f"usuário '{username}' não existe"
        raise UserAdminError(msg)
    return user


def _known_stands(session: Session, stand_ids: Iterable[str]) -> list[str]:
    """Return ``stand_ids`` sorted without repeats if all are known stands, else raise."""
    from db.stands.models import Stand

    wanted = sorted(set(stand_ids))
    known = set(session.scalars(select(Stand.stand_id).where(Stand.stand_id.in_(wanted))))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        msg = f"pontos desconhecidos: {', '.join(unknown)}"
        raise UserStandsError(msg)
    return wanted


def _set_stands(session: Session, user: User, stand_ids: Iterable[str]) -> None:
    wanted = _known_stands(session, stand_ids)
    session.execute(delete(UserStand).where(UserStand.user_id == user.user_id))
    session.add_all(UserStand(user_id=user.user_id, stand_id=s) for s in wanted)


def create_user(
    *,
    session: Session,
    username: str,
    password: str,
    role: str,
    full_name: str | None = None,
    stand_ids: Sequence[str] = (),
    temporary: bool = False,
) -> User:
    """Create an account; a supervisor is linked to ``stand_ids`` (at least one).

    ``temporary``: the password was drawn for the person, who must set their own at the next
    login (:attr:`Principal.password_temporary`).

    Raises
    ------
    UserAdminError
        Unknown role, invalid login, weak password (:func:`password_problem`), name taken (in
        any case: ``Ana`` is ``ana``), or a supervisor without known stands.
    """
    check_role(role)
    username = check_username(username)
    check_password(password, username=username)
    check_name_free(session=session, username=username)
    stand_ids = check_stands(session=session, role=role, stand_ids=stand_ids)
    user = User(
        username=username,
        full_name=full_name,
        role=role,
        password_hash=hash_password(password),
        password_temporary=temporary,
    )
    session.add(user)
    session.flush()
    session.add_all(UserStand(user_id=user.user_id, stand_id=s) for s in stand_ids)
    return user


def user_stands(*, session: Session, user_id: int) -> list[str]:
    """Return the stand ids a user is linked to, sorted."""
    return sorted(session.scalars(select(UserStand.stand_id).where(UserStand.user_id == user_id)))


_LOCKOUT = {
    "role": ("mudar o papel da sua própria conta", "mudar o papel desta conta"),
    "disable": ("desativar a sua própria conta", "desativar esta conta"),
}


def _keep_an_admin(session: Session, user: User, *, by: str | None, change: str) -> None:
    """Refuse taking ``user`` out of the admins when it is ``by`` or the last active admin.

    An admin does not lock themselves out from the console (another admin, or ``pontual
    users`` on the server, does it); nobody leaves the platform without an active admin.
    ``change``: ``role`` or ``disable`` (the words of the message).
    """
    own, this = _LOCKOUT[change]
    if by is not None and by == user.username:
        msg = f"você não pode {own}; peça a outro administrador"
        raise UserAdminError(msg)
    if user.role != "admin" or user.disabled_at is not None:
        return
    others = session.scalar(
        select(func.count())
        .select_from(User)
        .where(User.role == "admin", User.disabled_at.is_(None), User.user_id != user.user_id)
    )
    if not others:
        msg = (
            f"'{user.username}' é o único administrador ativo: crie ou promova outro antes de "
            f"{this}"
        )
        raise UserAdminError(msg)


def _active_user(session: Session, username: str) -> User:
    """Return the account ``username``, refused when disabled.

    Nothing reactivates an account, so its role and password no longer change.
    """
    user = get_user(session=session, username=username)
    if user.disabled_at is not None:
        msg = f"a conta '{user.username}' está desativada: papel e senha não mudam mais"
        raise UserAdminError(msg)
    return user


def set_role(
    *,
    session: Session,
    username: str,
    role: str,
    stand_ids: Sequence[str] | None = None,
    by: str | None = None,
) -> User:
    """Change a user's role (and a supervisor's stands); their tokens are revoked.

    ``by``: the admin asking (the console), who may not change their own role. The last active
    admin keeps the role. A disabled account is refused.
    """
    check_role(role)
    user = _active_user(session, username)
    if role != user.role:
        _keep_an_admin(session, user, by=by, change="role")
    if role == "supervisor":
        if stand_ids:
            _set_stands(session, user, stand_ids)
        elif not user_stands(session=session, user_id=user.user_id):
            msg = "um supervisor precisa de pelo menos um ponto"
            raise UserStandsError(msg)
    elif stand_ids:
        msg = "apenas supervisores são vinculados a pontos"
        raise UserStandsError(msg)
    else:
        _set_stands(session, user, [])
    user.role = role
    revoke_user_tokens(session=session, user_id=user.user_id)
    return user


def disable_user(*, session: Session, username: str, by: str | None = None) -> User:
    """Disable an account and revoke its tokens (the account and its audit trail remain).

    ``by``: the admin asking (the console), who may not disable themselves. The last active
    admin is not disabled.
    """
    user = get_user(session=session, username=username)
    _keep_an_admin(session, user, by=by, change="disable")
    if user.disabled_at is None:
        user.disabled_at = _now()
    revoke_user_tokens(session=session, user_id=user.user_id)
    return user


def set_password(
    *, session: Session, username: str, password: str, temporary: bool = False
) -> User:
    """Set a new password (:func:`check_password`); the user's tokens are revoked.

    ``temporary``: drawn for the person, who must set their own at the next login. A disabled
    account is refused.
    """
    user = _active_user(session, username)
    check_password(password, username=user.username)
    user.password_hash = hash_password(password)
    user.password_temporary = temporary
    revoke_user_tokens(session=session, user_id=user.user_id)
    return user


def authenticate(*, session: Session, username: str, password: str) -> User | None:
    """Return the active user whose password matches, else None (same cost either way).

    The name is found whatever its case and surrounding spaces (``ANA`` logs in as ``ana``),
    as the failed-login quota counts it.
    """
    user = session.scalar(select(User).where(_same_name(username)))
    if user is None:
        verify_password(_dummy_hash(), password)  # no timing hint that the name is unknown
        return None
    if not verify_password(user.password_hash, password) or user.disabled_at is not None:
        return None
    return user


def issue_token(
    *, session: Session, user: User, ttl_s: int, now: dt.datetime | None = None
) -> tuple[str, dt.datetime]:
    """Create a bearer token for ``user``; return it (shown once) and its expiry."""
    now = now or _now()
    token = new_user_token()
    expires_at = now + dt.timedelta(seconds=ttl_s)
    session.add(
        AccessToken(
            token_hash=token_digest(token),
            user_id=user.user_id,
            created_at=now,
            expires_at=expires_at,
        )
    )
    return token, expires_at


def principal_for_token(
    *, session: Session, token: str, now: dt.datetime | None = None
) -> Principal | None:
    """Return the caller owning a valid token (not expired, not revoked, account active)."""
    now = now or _now()
    row = session.execute(
        select(User.user_id, User.username, User.role, User.password_temporary)
        .join(AccessToken, AccessToken.user_id == User.user_id)
        .where(
            AccessToken.token_hash == token_digest(token),
            AccessToken.revoked_at.is_(None),
            AccessToken.expires_at > now,
            User.disabled_at.is_(None),
        )
    ).first()
    if row is None:
        return None
    stands: frozenset[str] = frozenset()
    if row.role == "supervisor":
        stands = frozenset(user_stands(session=session, user_id=row.user_id))
    return Principal(
        user_id=row.user_id,
        username=row.username,
        role=row.role,
        stand_ids=stands,
        password_temporary=row.password_temporary,
    )


def revoke_token(*, session: Session, token: str) -> bool:
    """Revoke one token and close its alert streams; return whether it was active."""
    digest = token_digest(token)
    result = _dml(
        session,
        update(AccessToken)
        .where(AccessToken.token_hash == digest, AccessToken.revoked_at.is_(None))
        .values(revoked_at=_now()),
    )
    _announce_revocation(session, f"token:{digest}")
    return bool(result.rowcount)


def revoke_user_tokens(*, session: Session, user_id: int) -> int:
    """Revoke every active token of a user and close their alert streams; return how many."""
    result = _dml(
        session,
        update(AccessToken)
        .where(AccessToken.user_id == user_id, AccessToken.revoked_at.is_(None))
        .values(revoked_at=_now()),
    )
    _announce_revocation(session, f"user:{user_id}")
    return int(result.rowcount)


def create_device(
    *,
    session: Session,
    vehicle_id: str,
    label: str | None = None,
    registered_at: dt.datetime | None = None,
) -> tuple[Device, str]:
    """Register a device of ``vehicle_id``; return it and its token (shown once, stored hashed).

    ``registered_at`` (default now) is the instant from which its fixes are this vehicle's:
    earlier ones are refused (``before_device``, :func:`api.ingest.check_batch`).
    """
    vehicle_id = vehicle_id.strip()
    if not vehicle_id:
        msg = "o vehicle_id do dispositivo não pode ser vazio"
        raise UserAdminError(msg)
    token = new_device_token()
    device = Device(
        vehicle_id=vehicle_id,
        token_hash=token_digest(token),
        label=label,
        **({} if registered_at is None else {"created_at": registered_at}),
    )
    session.add(device)
    session.flush()
    return device, token


def device_for_token(*, session: Session, token: str) -> DevicePrincipal | None:
    """Return the active device owning ``token``, else None."""
    row = session.execute(
        select(Device.device_id, Device.vehicle_id, Device.created_at).where(
            Device.token_hash == token_digest(token), Device.revoked_at.is_(None)
        )
    ).first()
    if row is None:
        return None
    return DevicePrincipal(
        device_id=row.device_id, vehicle_id=row.vehicle_id, registered_at=row.created_at
    )


def revoke_device(*, session: Session, device_id: int) -> Device:
    """Revoke a device's token; its fixes stay."""
    device = session.get(Device, device_id)
    if device is None:
        msg = f"dispositivo {device_id} não existe"
        raise UserAdminError(msg)
    if device.revoked_at is None:
        device.revoked_at = _now()
    return device


@functools.cache
def _dummy_hash() -> str:
    return hash_password("pontual-dummy-password")
