"""The admin's account forms and the audit log against a real ``pontual serve``: weak passwords
refused on the field that has them, each error marked on its own field (``aria-invalid``, an
inline message linked by ``aria-describedby``), and a final decision's audit entry read as
the agent stated it (the appeal's or the defence's period; the step's local time)."""

from __future__ import annotations

import html
import itertools
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from db.accounts.models import User
from db.enforcement.models import AuditEntry
from db.engine import session_scope

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """Return a login no other test of the session uses."""
    return f"{prefix}_{os.getpid()}_{next(_ids)}"


def post_form(client: Any, page_url: str, action: str, data: dict[str, str]) -> Any:
    """Post a console form with the CSRF token of the page it is on."""
    page = client.get(page_url).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    return client.post(action, data={"csrf_token": token.group(1), **data})


def field(page: str, input_id: str) -> tuple[dict[str, str], str | None]:
    """Return the attributes of the input or select ``input_id`` and its inline error's text."""
    tag = re.search(rf'<(?:input|select) id="{input_id}"[^>]*>', page)
    assert tag is not None, input_id
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', tag.group(0)))
    error = re.search(rf'<p class="field-error" id="{input_id}-erro">([^<]*)</p>', page)
    return attrs, html.unescape(error.group(1)) if error else None


def assert_marked(page: str, input_id: str, message: str) -> None:
    """The field is invalid and described by its inline error, which says ``message``."""
    attrs, error = field(page, input_id)
    assert attrs.get("aria-invalid") == "true", attrs
    assert f"{input_id}-erro" in attrs.get("aria-describedby", "").split()
    assert error is not None and message in error, error


def accounts_named(engine: Engine, username: str) -> int:
    with session_scope(engine) as session:
        query = select(func.count()).where(func.lower(User.username) == username.lower())
        return int(session.scalar(query) or 0)


# --- weak passwords ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("12345678", "sequência simples"),
        ("senha123", "mais usadas"),
        ("mudar123", "mais usadas"),
        (None, "não pode ser nem conter o nome de usuário"),  # the username itself
    ],
)
def test_new_account_refuses_a_weak_password(
    web_client: Callable[..., Any], web_engine: Engine, password: str | None, message: str
) -> None:
    """ "Definir a senha agora" with a common password, a sequence or the username is refused
    on the password field; no account is created."""
    admin = web_client("admin")
    username = unique("pwtest")
    secret = password or username
    form = {"username": username, "role": "agent", "password_mode": "set"}
    answer = post_form(
        admin,
        "/admin/usuarios",
        "/admin/usuarios",
        form | {"password": secret, "password_repeat": secret},
    )
    assert answer.status_code == 422
    assert_marked(answer.text, "novo-senha", message)
    assert field(answer.text, "novo-username")[0].get("aria-invalid") is None
    assert accounts_named(web_engine, username) == 0


def test_reset_refuses_a_weak_password(
    web_client: Callable[..., Any], make_user: Callable[..., str], web_engine: Engine
) -> None:
    """A password typed on an account's page follows the same rules, shown on its field."""
    admin = web_client("admin")
    username = make_user("agent")
    with session_scope(web_engine) as session:
        user_id = session.scalar(select(User.user_id).where(User.username == username))
    page_url = f"/admin/usuarios/{user_id}"
    form = {"password_mode": "set", "password": "abcd1234", "password_repeat": "abcd1234"}
    answer = post_form(admin, page_url, page_url + "/senha", form)
    assert answer.status_code == 422
    assert_marked(answer.text, "senha", "mais usadas")


def test_a_temporary_password_is_still_drawn(
    web_client: Callable[..., Any], web_engine: Engine
) -> None:
    """The default (a temporary password) creates the account as before."""
    admin = web_client("admin")
    username = unique("pwtemp")
    answer = post_form(
        admin, "/admin/usuarios", "/admin/usuarios", {"username": username, "role": "agent"}
    )
    assert answer.status_code == 303, answer.text
    assert accounts_named(web_engine, username) == 1


# --- errors on their fields ----------------------------------------------------------------------


def test_a_taken_name_is_marked_on_the_username_field(web_client: Callable[..., Any]) -> None:
    """A name already used is shown under "Usuário (login)", which is marked invalid; the
    summary at the top still lists it."""
    admin = web_client("admin")
    form = {"username": "WEB_ADMIN", "role": "agent"}
    answer = post_form(admin, "/admin/usuarios", "/admin/usuarios", form)
    assert answer.status_code == 422
    assert_marked(answer.text, "novo-username", "já é usado pela conta 'web_admin'")
    summary = re.search(r'id="erros-nova-conta".*?</div>', answer.text, re.S)
    assert summary is not None and "Usuário</span>" in summary.group(0)
    assert field(answer.text, "novo-username")[0]["value"] == "WEB_ADMIN"


def test_every_error_is_on_its_field(web_client: Callable[..., Any]) -> None:
    """An invalid login, a supervisor without stands and a mismatched repeat are each marked
    on their own field at once; the other fields are not."""
    admin = web_client("admin")
    form = {
        "username": "ana souza",
        "role": "supervisor",
        "stands": "",
        "password_mode": "set",
        "password": "cavalo-azul-pula",
        "password_repeat": "cavalo-azul-pulo",
    }
    answer = post_form(admin, "/admin/usuarios", "/admin/usuarios", form)
    assert answer.status_code == 422
    page = answer.text
    assert_marked(page, "novo-username", "inválido")
    assert_marked(page, "novo-pontos", "um supervisor precisa de pelo menos um ponto")
    assert_marked(page, "novo-senha-2", "as duas senhas não são iguais")
    for quiet in ("novo-nome", "novo-papel", "novo-senha"):
        assert field(page, quiet)[0].get("aria-invalid") is None, quiet


# --- the audit log -------------------------------------------------------------------------------


def _details(page: str) -> str:
    """Return the text of the entries' detail lists (without the raw JSON)."""
    lists = re.findall(r'<ul class="audit-details">(.*?)</ul>\s*<details', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(lists)))


def test_final_decision_names_its_period_and_local_time(
    web_client: Callable[..., Any], web_engine: Engine
) -> None:
    """After a rejected defence the stated date is the appeal period's end; otherwise the
    defence's. The step's time is Brasília's, in dd/mm/aaaa hh:mm:ss, not ISO UTC."""
    mark = f"P-QAE{os.getpid()}"
    step = {"to": "definitiva", "reason": "prazo encerrado sem recurso"}
    with session_scope(web_engine) as session:
        for suffix, frm, at in (
            ("A", "defesa_indeferida", "2026-12-06T05:19:39.221091+00:00"),
            ("B", "notificada", "2026-12-07T10:00:00-03:00"),
        ):
            session.add(
                AuditEntry(
                    actor="web_agent",
                    action="finalize",
                    entity="proposal",
                    entity_id=mark + suffix,
                    details=step | {"from": frm, "step_at": at, "period_ended_on": "2026-12-05"},
                )
            )
    admin = web_client("admin")
    appeal = _details(admin.get("/admin/auditoria", params={"texto": mark + "A"}).text)
    assert "fim do prazo de recurso: 05/12/2026" in appeal
    assert "prazo de defesa" not in appeal
    assert "realizado em: 06/12/2026 02:19:39" in appeal
    assert "2026-12-06T" not in appeal
    defence = _details(admin.get("/admin/auditoria", params={"texto": mark + "B"}).text)
    assert "fim do prazo de defesa: 05/12/2026" in defence
    assert "realizado em: 07/12/2026 10:00:00" in defence
