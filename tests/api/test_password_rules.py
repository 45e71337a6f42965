"""Weak passwords are refused on every path that sets one (:func:`api.accounts.check_password`):
the account's creation, a new password, and ``pontual users``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from api import accounts
from api._errors import UserAdminError

PONTUAL = Path(sys.executable).with_name("pontual")

WEAK = [
    ("12345678", "sequência simples"),
    ("87654321", "sequência simples"),
    ("abcdefgh", "sequência simples"),
    ("QWERTYUI", "sequência simples"),
    ("aaaaaaaa", "caractere ou um trecho curto repetido"),
    ("abababab", "caractere ou um trecho curto repetido"),
    ("senha123", "mais usadas"),
    ("Mudar123", "mais usadas"),
    ("abcd1234", "mais usadas"),
    ("qwerty123", "mais usadas"),
    ("password1", "mais usadas"),
    ("curta", "pelo menos 8"),
]


class TestCreateUser:
    @pytest.mark.parametrize(("password", "match"), WEAK)
    def test_refuses_weak_passwords(self, db_session: Session, password: str, match: str) -> None:
        """A common password, a sequence or a repeated character is refused in pt-BR."""
        with pytest.raises(UserAdminError, match=match):
            accounts.create_user(
                session=db_session, username="passe_fraca", password=password, role="agent"
            )

    @pytest.mark.parametrize("password", ["passe_user2", "PASSE_USER2", "x-passe_user2-2026"])
    def test_refuses_the_username(self, db_session: Session, password: str) -> None:
        """A password equal to the username, or containing it in any case, is refused."""
        with pytest.raises(UserAdminError, match="não pode ser nem conter o nome de usuário"):
            accounts.create_user(
                session=db_session, username="passe_user2", password=password, role="agent"
            )

    @pytest.mark.parametrize("password", ["cavalo-azul-pula", "Tr3s-Pontos-Norte", "x7#kQ2!mZp"])
    def test_accepts_other_passwords(self, db_session: Session, password: str) -> None:
        """A password outside the rules is accepted and logs in."""
        accounts.create_user(
            session=db_session, username="passe_forte", password=password, role="agent"
        )
        user = accounts.authenticate(session=db_session, username="passe_forte", password=password)
        assert user is not None


class TestSetPassword:
    @pytest.mark.parametrize(
        ("password", "match"),
        [
            ("12345678", "sequência"),
            ("senha1234", "mais usadas"),
            ("Passe_Troca", "nome de usuário"),
        ],
    )
    def test_refuses_weak_passwords(self, db_session: Session, password: str, match: str) -> None:
        """A new password follows the same rules as the first one; the old one stays."""
        accounts.create_user(
            session=db_session, username="passe_troca", password="cavalo-azul-pula", role="agent"
        )
        with pytest.raises(UserAdminError, match=match):
            accounts.set_password(session=db_session, username="passe_troca", password=password)
        assert accounts.authenticate(
            session=db_session, username="passe_troca", password="cavalo-azul-pula"
        )
