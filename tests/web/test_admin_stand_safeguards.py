"""Safeguards of the stand page (``/admin/pontos/<id>``): a stand's name cannot be emptied; the
exclusion of a prefixo starts without a ground, needs one, and asks for confirmation.
"""

from __future__ import annotations

import html
import itertools
import os
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, func, select
from web_helpers import csrf_from

from db.engine import session_scope
from db.fleet.models import Vehicle
from db.stands.models import LicenceExclusion, Stand

NAME = "JOSÉ DO PATROCÍNIO X REPÚBLICA"
_ids = itertools.count(1)


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def _post(client: httpx.Client, page: str, action: str, data: dict[str, str]) -> httpx.Response:
    token = csrf_from(client.get(page).text)
    return client.post(action, data={"csrf_token": token, **data})


def _stand(client: httpx.Client) -> str:
    """Create a named circular stand; return its id."""
    stand_id = _unique("SAFE")
    made = _post(
        client,
        "/admin/pontos/novo",
        "/admin/pontos",
        {
            "stand_id": stand_id,
            "name": NAME,
            "capacity": "3",
            "mode": "ponto",
            "lat": "-30.02",
            "lon": "-51.22",
            "radius_m": "15",
        },
    )
    assert made.status_code == 303, html.unescape(made.text)[-600:]
    return stand_id


def _exclusions(engine: Engine, stand_id: str) -> int:
    with session_scope(engine) as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(LicenceExclusion)
                .where(LicenceExclusion.stand_id == stand_id)
            )
            or 0
        )


def test_an_empty_name_is_refused(web_client: Callable, web_engine: Engine) -> None:
    """Emptying 'Nome': 422, the message next to the field, the typed values kept, the stored
    name unchanged."""
    admin = web_client("admin")
    stand_id = _stand(admin)
    page = f"/admin/pontos/{stand_id}"
    form = {"name": "  ", "capacity": "7", "kind": "", "address": "Rua Nova, 1", "mode": "ponto"}
    form |= {"lat": "-30.02", "lon": "-51.22", "radius_m": "15", "vertices": ""}
    answer = _post(admin, page, page, form)
    assert answer.status_code == 422
    body = html.unescape(answer.text)
    error = f"o nome não pode ficar vazio; o atual é “{NAME}”"
    assert f'<p class="field-error" id="ponto-nome-erro">{error}</p>' in body
    assert 'name="capacity" type="text" value="7"' in body
    assert 'name="address" type="text" value="Rua Nova, 1"' in body
    with session_scope(web_engine) as session:
        stand = session.get(Stand, stand_id)
        assert stand is not None and (stand.name, stand.capacity) == (NAME, 3)


def test_an_exclusion_needs_its_ground(web_client: Callable, web_engine: Engine) -> None:
    """No ground chosen: 422 naming the field, nothing excluded; the page offers none chosen."""
    admin = web_client("admin")
    stand_id = _stand(admin)
    page = f"/admin/pontos/{stand_id}"
    shown = admin.get(page).text
    assert '<option value="" selected>Escolha o fundamento</option>' in shown
    assert 'value="solicitacao" selected' not in shown
    vehicle = _unique("PFX")
    answer = _post(
        admin, page, page + "/exclusoes", {"vehicle_id": vehicle, "on": "2024-07-01", "ground": ""}
    )
    assert answer.status_code == 422
    assert "escolha o fundamento da exclusão (art. 50, I a III)" in html.unescape(answer.text)
    assert f'value="{vehicle}"' in answer.text
    assert _exclusions(web_engine, stand_id) == 0


@pytest.mark.browser
def test_the_exclusion_asks_first(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine
) -> None:
    """'Excluir prefixo' opens a confirm dialog naming the prefixo, the stand and the date;
    dismissed, nothing is excluded; accepted, the exclusion is written."""
    admin = web_client("admin")
    stand_id = _stand(admin)
    vehicle = _unique("PFX")
    with session_scope(web_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle, prefixo=vehicle))
    stand_page = f"/admin/pontos/{stand_id}"
    granted = _post(
        admin,
        stand_page,
        stand_page + "/licencas",
        {"vehicle_id": vehicle, "valid_from": "2024-01-01"},
    )
    assert granted.status_code == 303
    asked: list[str] = []
    accept = {"now": False}

    def on_dialog(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept["now"] else dialog.dismiss()

    login(page, "admin")
    page.on("dialog", on_dialog)
    page.goto(f"/admin/pontos/{stand_id}")
    ground = page.get_by_label("Fundamento")
    expect(ground).to_have_value("")
    page.get_by_label("Prefixo (vehicle_id)").last.fill(vehicle)
    page.get_by_label("Primeiro dia sem a licença").fill("2024-07-01")
    ground.select_option("solicitacao")
    page.get_by_role("button", name="Excluir prefixo").click()
    for _ in range(100):  # the dialog event may come just after the click returns
        if asked:
            break
        page.wait_for_timeout(50)
    assert asked and asked[-1].startswith(
        f"Excluir o prefixo {vehicle} do ponto {stand_id} a partir de 01/07/2024 "
        "(fundamento: art. 50, I"
    ), asked
    page.wait_for_timeout(300)
    assert _exclusions(web_engine, stand_id) == 0
    accept["now"] = True
    with page.expect_navigation():
        page.get_by_role("button", name="Excluir prefixo").click()
    expect(page.get_by_text("Prefixo excluído do ponto (art. 50)")).to_be_visible()
    assert _exclusions(web_engine, stand_id) == 1
