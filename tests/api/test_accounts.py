"""Tests of api.accounts: users, passwords, tokens, devices."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api import accounts
from api._errors import UserAdminError
from api.deps import account_key
from db.accounts.models import User

PASSWORD = "uma-senha-longa"


def _user(session: Session, role: str = "planner", name: str = "ana") -> User:
    return accounts.create_user(session=session, username=name, password=PASSWORD, role=role)


class TestCreateUser:
    def test_password_is_stored_hashed(self, db_session: Session) -> None:
        """The password is stored as an argon2id hash, never in clear."""
        user = _user(db_session)
        assert user.password_hash.startswith("$argon2id$")
        assert PASSWORD not in user.password_hash

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"role": "citizen"}, "papel 'citizen' desconhecido"),
            ({"password": "curta"}, "pelo menos 8"),
            ({"role": "supervisor"}, "supervisor precisa"),
            ({"role": "supervisor", "stand_ids": ["NOPE"]}, "pontos desconhecidos: NOPE"),
            ({"stand_ids": ["S1"]}, "apenas supervisores são vinculados a pontos"),
            ({"username": "ana souza"}, "nome de usuário 'ana souza' inválido"),
            ({"username": "José"}, "inválido: de 3 a 100 caracteres"),
            ({"username": "  "}, "inválido"),
        ],
    )
    def test_refuses_bad_input(self, db_session: Session, kwargs: dict, match: str) -> None:
        """Unknown role, short password, supervisor without known stands, stands for another
        role, a login with spaces or accents are refused."""
        args = {"username": "bia", "password": PASSWORD, "role": "planner"} | kwargs
        with pytest.raises(UserAdminError, match=match):
            accounts.create_user(session=db_session, **args)

    def test_name_taken(self, db_session: Session) -> None:
        """A second account with the same name is refused."""
        _user(db_session)
        with pytest.raises(UserAdminError, match="já existe"):
            _user(db_session)

    @pytest.mark.parametrize(
        ("first", "second"), [("demo_admin", "DEMO_ADMIN"), ("Tst_Case", "tst_case")]
    )
    def test_name_taken_in_another_case(self, db_session: Session, first: str, second: str) -> None:
        """A name that differs from an account's only in case is refused in pt-BR, naming the
        account that has it."""
        _user(db_session, name=first)
        with pytest.raises(
            UserAdminError, match=f"o nome '{second}' já é usado pela conta '{first}'"
        ):
            _user(db_session, name=second)

    def test_database_refuses_a_name_in_another_case(self, db_session: Session) -> None:
        """The unique index on lower(username) refuses a case variant written around the code."""
        _user(db_session, name="Rui")
        with pytest.raises(IntegrityError, match="uq_users_username_lower"):
            db_session.execute(
                text(
                    "INSERT INTO users (username, role, password_hash) "
                    "VALUES ('rUI', 'planner', 'x')"
                )
            )

    def test_get_user_ignores_case(self, db_session: Session) -> None:
        """An account is found by its name typed in any case."""
        user = _user(db_session, name="Carla")
        assert accounts.get_user(session=db_session, username="CARLA") is user


class TestAuthenticate:
    @pytest.mark.parametrize("typed", ["demo_admin", "DEMO_ADMIN", "Demo_Admin", " demo_admin "])
    def test_name_in_any_case(self, db_session: Session, typed: str) -> None:
        """The account is found whatever the case typed; its failed logins count under the
        same quota key (the limiter folds case the same way)."""
        user = _user(db_session, name="Demo_Admin")
        found = accounts.authenticate(session=db_session, username=typed, password=PASSWORD)
        assert found is user
        assert account_key(typed) == account_key(user.username)
        assert not accounts.authenticate(session=db_session, username=typed, password="x" * 9)

    def test_right_and_wrong_password(self, db_session: Session) -> None:
        """Only the right password of an active account authenticates."""
        _user(db_session)
        assert accounts.authenticate(session=db_session, username="ana", password=PASSWORD)
        assert not accounts.authenticate(session=db_session, username="ana", password="x" * 9)
        assert not accounts.authenticate(session=db_session, username="zé", password=PASSWORD)

    def test_disabled_account(self, db_session: Session) -> None:
        """A disabled account does not authenticate."""
        _user(db_session)
        accounts.disable_user(session=db_session, username="ana")
        assert not accounts.authenticate(session=db_session, username="ana", password=PASSWORD)

    def test_a_disabled_account_keeps_its_role_and_password(self, db_session: Session) -> None:
        """Nothing reactivates an account: its role and password are not changed."""
        _user(db_session)
        accounts.disable_user(session=db_session, username="ana")
        with pytest.raises(UserAdminError, match="está desativada"):
            accounts.set_password(session=db_session, username="ana", password="Outra-Senha-77")
        with pytest.raises(UserAdminError, match="está desativada"):
            accounts.set_role(session=db_session, username="ana", role="planner")


class TestKeepAnAdmin:
    def test_the_last_active_admin_keeps_the_role(self, db_session: Session) -> None:
        """The only active admin is neither demoted nor disabled; with a second admin, one
        may go (by ``pontual users``, which names no asker)."""
        db_session.query(User).filter(User.role == "admin").delete()
        _user(db_session, role="admin", name="chefe")
        with pytest.raises(UserAdminError, match="único administrador ativo"):
            accounts.set_role(session=db_session, username="chefe", role="agent")
        with pytest.raises(UserAdminError, match="único administrador ativo"):
            accounts.disable_user(session=db_session, username="chefe")
        _user(db_session, role="admin", name="vice")
        accounts.disable_user(session=db_session, username="chefe")
        with pytest.raises(UserAdminError, match="único administrador ativo"):
            accounts.set_role(session=db_session, username="vice", role="planner")

    def test_an_admin_does_not_lock_themselves_out(self, db_session: Session) -> None:
        """From the console (``by``), an admin changes neither their own role nor disables
        themselves, though other admins exist; another admin's request goes through."""
        _user(db_session, role="admin", name="chefe")
        _user(db_session, role="admin", name="vice")
        with pytest.raises(UserAdminError, match="sua própria conta"):
            accounts.set_role(session=db_session, username="chefe", role="agent", by="chefe")
        with pytest.raises(UserAdminError, match="sua própria conta"):
            accounts.disable_user(session=db_session, username="chefe", by="chefe")
        assert (
            accounts.set_role(session=db_session, username="chefe", role="agent", by="vice").role
            == "agent"
        )


class TestPrincipalForToken:
    def test_valid_expired_and_revoked(self, db_session: Session) -> None:
        """A token works until it expires or is revoked."""
        user = _user(db_session)
        now = dt.datetime.now(dt.UTC)
        token, expires = accounts.issue_token(session=db_session, user=user, ttl_s=60, now=now)
        db_session.flush()
        found = accounts.principal_for_token(session=db_session, token=token, now=now)
        assert found is not None and found.role == "planner"
        later = expires + dt.timedelta(seconds=1)
        assert accounts.principal_for_token(session=db_session, token=token, now=later) is None
        assert accounts.revoke_token(session=db_session, token=token)
        assert accounts.principal_for_token(session=db_session, token=token, now=now) is None

    def test_password_change_revokes(self, db_session: Session) -> None:
        """Changing the password revokes the user's tokens."""
        user = _user(db_session)
        token, _ = accounts.issue_token(session=db_session, user=user, ttl_s=60)
        accounts.set_password(session=db_session, username="ana", password="outra-senha-9")
        assert accounts.principal_for_token(session=db_session, token=token) is None


class TestDeviceForToken:
    def test_device_token_round_trip(self, db_session: Session) -> None:
        """A device token names its vehicle until revoked; only its digest is stored."""
        device, token = accounts.create_device(session=db_session, vehicle_id="P-101")
        assert token not in device.token_hash
        found = accounts.device_for_token(session=db_session, token=token)
        assert found is not None and found.vehicle_id == "P-101"
        accounts.revoke_device(session=db_session, device_id=device.device_id)
        assert accounts.device_for_token(session=db_session, token=token) is None
