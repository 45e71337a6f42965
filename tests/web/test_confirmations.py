"""Consequential console actions ask first, in Chromium (``api/web/static/js/confirmar.js``).

Each test clicks the action: a confirm dialog names what happens and to what; dismissed,
nothing changes (read back from the database); accepted, the action is done. Dismissing a
proposal, the defence and its decision (fiscal); ending a licence and retiring a stand; resetting
a password and disabling an account; revoking a device; an import that retires stands (admin).
Screenshots of the forms go to ``test-artifacts/`` (a native dialog is not in a screenshot).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, select, text
from web_fiscal import TIMEZONE, boarding_finding, store_and_propose
from web_helpers import csrf_from, save_screenshot

from api.web.auth import SESSION_COOKIE, csrf_token_for
from db.accounts.models import Device, User
from db.engine import session_scope
from db.fleet.models import Municipality, Vehicle
from db.stands.models import ParkingLicence, Stand

pytestmark = pytest.mark.browser

START = dt.datetime(2026, 11, 12, 13, 0, tzinfo=dt.UTC)
STAND_NAME = "PRAÇA DA CONFIRMAÇÃO"
TEST_MUNICIPALITY = "9990001"
"""A municipality of these tests only (an import retires the stands of its municipality)."""
_ids = itertools.count(1)


def _unique(prefix: str) -> str:
    """Return an id of these tests only (other files count with the same pid)."""
    return f"CF{prefix}-{os.getpid()}-{next(_ids)}"


class Dialogs:
    """Answer a page's confirm dialogs: dismissed unless :attr:`accept`; keep each question."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.asked: list[str] = []
        self.accept = False
        page.on("dialog", self._answer)

    def _answer(self, dialog: Any) -> None:
        self.asked.append(dialog.message)
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()

    def cancel(self, button: Any) -> str:
        """Click ``button``, dismiss its dialog; return the question (nothing was sent)."""
        self.accept = False
        question = self._click(button)
        self.page.wait_for_timeout(300)  # a form sent anyway would be on its way by now
        return question

    def confirm(self, button: Any) -> str:
        """Click ``button``, accept its dialog, wait for the next page; return the question."""
        self.accept = True
        with self.page.expect_navigation():
            return self._click(button)

    def _click(self, button: Any) -> str:
        before = len(self.asked)
        button.click()
        for _ in range(100):  # the dialog event may come just after the click returns
            if len(self.asked) > before:
                return self.asked[-1]
            self.page.wait_for_timeout(50)
        msg = f"no dialog after clicking {button}"
        raise AssertionError(msg)


def _post(client: httpx.Client, page: str, action: str, data: dict[str, str]) -> httpx.Response:
    return client.post(action, data={"csrf_token": csrf_from(client.get(page).text), **data})


def _scalar(engine: Engine, query: Any) -> Any:
    with session_scope(engine) as session:
        return session.scalar(query)


# --- fiscal --------------------------------------------------------------------------------------


def _proposal(engine: Engine) -> tuple[str, str]:
    """A new Porto Alegre proposal at S1 (the pontuação to choose); its id and vehicle."""
    vehicle = f"CF{secrets.token_hex(3).upper()}"
    finding = boarding_finding(
        vehicle_id=vehicle, stand_id="S1", started_at=START, subtype="accessible_wait"
    )
    return store_and_propose(engine, [finding])[finding["finding_id"]], vehicle


def _status(engine: Engine, proposal_id: str) -> str:
    query = text("SELECT status FROM proposals WHERE proposal_id = :p").bindparams(p=proposal_id)
    return str(_scalar(engine, query))


def _step(agent: httpx.Client, proposal_id: str, step: str, **form: str) -> None:
    token = csrf_token_for(agent.cookies.get(SESSION_COOKIE) or "")
    done = agent.post(f"/fiscal/propostas/{proposal_id}/{step}", data={"csrf_token": token, **form})
    assert done.status_code == 303, done.text[-500:]


def test_dismissing_a_proposal_asks_first(page: Any, login: Callable, web_engine: Engine) -> None:
    """'Descartar' names the proposal, its kind, prefixo, provision and the reason typed."""
    proposal, vehicle = _proposal(web_engine)
    login(page, "agent")
    dialogs = Dialogs(page)
    page.goto(f"/fiscal/propostas/{proposal}")
    page.locator("#motivo").fill("curto")  # under the reason's minimum: the server's error,
    page.get_by_role("button", name="Descartar", exact=True).click()  # never a question first
    expect(page.locator("#motivo-erro")).to_be_visible()
    assert dialogs.asked == [] and _status(web_engine, proposal) == "proposta"
    page.locator("#motivo").fill(" " * 20)  # spaces alone: the server's error too, no question
    page.get_by_role("button", name="Descartar", exact=True).click()
    expect(page.locator("#motivo-erro")).to_be_visible()
    assert dialogs.asked == [] and _status(web_engine, proposal) == "proposta"
    reason = "Táxi acessível aguardando passageiro com deficiência (art. 46)."
    page.locator("#motivo").fill(reason)
    save_screenshot(page, "web-confirmar-descarte.png", element=page.locator("#descartar"))
    button = page.get_by_role("button", name="Descartar", exact=True)
    question = dialogs.cancel(button)
    assert question.startswith(f"Descartar a proposta {proposal} (")
    assert f"prefixo {vehicle}, art. " in question
    assert f"com o motivo “{reason}”?" in question
    assert "Nenhum auto de infração será lavrado por ela" in question
    assert _status(web_engine, proposal) == "proposta"
    dialogs.confirm(button)
    assert _status(web_engine, proposal) == "descartada"


def test_a_reason_keeps_its_lines(page: Any, login: Callable, web_engine: Engine) -> None:
    """A reason written in two paragraphs reads in two on the proposal's page (was one line)."""
    proposal, _ = _proposal(web_engine)
    login(page, "agent")
    page.goto(f"/fiscal/propostas/{proposal}")
    page.locator("#motivo").fill("Primeira linha do motivo do descarte.\nSegunda linha, à parte.")
    Dialogs(page).confirm(page.get_by_role("button", name="Descartar", exact=True))
    page.goto(f"/fiscal/propostas/{proposal}")
    shown = page.locator("dd.texto-livre").inner_text()
    assert shown == "Primeira linha do motivo do descarte.\nSegunda linha, à parte."


def test_the_defence_and_its_decision_ask_first(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine
) -> None:
    """'Registrar a defesa' and 'Registrar a decisão' name the auto and the prefixo; the
    decision's question names the decision chosen."""
    proposal, vehicle = _proposal(web_engine)
    agent = web_client("agent")
    _step(agent, proposal, "confirmar", pontuacao="autorizatário")
    today = dt.datetime.now(ZoneInfo(TIMEZONE)).date().isoformat()
    _step(agent, proposal, "notificar", data_entrega=today)
    auto = _scalar(
        web_engine,
        text("SELECT auto_number FROM proposals WHERE proposal_id = :p").bindparams(p=proposal),
    )
    login(page, "agent")
    dialogs = Dialogs(page)
    page.goto(f"/fiscal/propostas/{proposal}")
    defence = page.get_by_role("button", name="Registrar a defesa")
    question = dialogs.cancel(defence)
    assert question == (
        f"Registrar agora a defesa do auto {auto} (prefixo {vehicle})? O auto passa a aguardar "
        "a decisão da defesa; isso não se desfaz."
    )
    assert _status(web_engine, proposal) == "notificada"
    dialogs.confirm(defence)
    assert _status(web_engine, proposal) == "em_defesa"

    decision = page.locator("#decidir")
    decision.get_by_label("Indeferida (a penalidade se mantém)").check()
    decision.get_by_label("Fundamentação").fill("A defesa não trouxe prova da autorização.")
    save_screenshot(page, "web-confirmar-decisao-defesa.png", element=decision)
    button = decision.get_by_role("button", name="Registrar a decisão")
    question = dialogs.cancel(button)
    assert question == (
        f"Registrar a decisão da defesa do auto {auto} (prefixo {vehicle}): Indeferida (a "
        "penalidade se mantém)? Isso não se desfaz."
    )
    assert _status(web_engine, proposal) == "em_defesa"
    dialogs.confirm(button)
    assert _status(web_engine, proposal) == "defesa_indeferida"


# --- admin: stands -------------------------------------------------------------------------------


def _stand_with_licence(admin: httpx.Client, engine: Engine) -> tuple[str, str]:
    """A named stand with one open licence; its id and the licensed prefixo."""
    stand_id, vehicle = _unique("CONF"), _unique("PFX")
    with session_scope(engine) as session:
        session.add(Vehicle(vehicle_id=vehicle, prefixo=vehicle))
    form = {"stand_id": stand_id, "name": STAND_NAME, "capacity": "2", "mode": "ponto"}
    form |= {"lat": "-30.02", "lon": "-51.22", "radius_m": "15"}
    assert _post(admin, "/admin/pontos/novo", "/admin/pontos", form).status_code == 303
    page = f"/admin/pontos/{stand_id}"
    grant = {"vehicle_id": vehicle, "valid_from": "2024-01-01"}
    assert _post(admin, page, page + "/licencas", grant).status_code == 303
    return stand_id, vehicle


def test_ending_a_licence_and_retiring_the_stand_ask_first(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine
) -> None:
    """'Encerrar' names the prefixo, the stand and the last day (dd/mm/aaaa; without a day,
    no question, the server's error); 'Desativar ponto' names the stand, the first day without
    it and the licences still open today."""
    stand_id, vehicle = _stand_with_licence(web_client("admin"), web_engine)
    login(page, "admin")
    dialogs = Dialogs(page)
    page.goto(f"/admin/pontos/{stand_id}")
    row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name=vehicle))
    end = row.get_by_role("button", name=f"Encerrar a licença de {vehicle}")
    row.get_by_label("Último dia").fill("")  # no date: the server's error, no question first
    asked = len(dialogs.asked)
    with page.expect_navigation():
        end.click()
    assert len(dialogs.asked) == asked
    row = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name=vehicle))
    end = row.get_by_role("button", name=f"Encerrar a licença de {vehicle}")
    row.get_by_label("Último dia").fill("2024-06-30")
    question = dialogs.cancel(end)
    assert question == (
        f"Encerrar a licença do prefixo {vehicle} no ponto {stand_id} ({STAND_NAME}), com último "
        "dia em 30/06/2024? Depois desse dia o prefixo não pode mais usar o ponto; para voltar, é "
        "preciso conceder uma nova licença."
    )
    licence = select(ParkingLicence.valid_until).where(ParkingLicence.stand_id == stand_id)
    assert _scalar(web_engine, licence) is None
    dialogs.confirm(end)
    assert _scalar(web_engine, licence) == dt.date(2024, 6, 30)

    retire = page.locator("#desativar-ponto").locator("..")
    retire.get_by_label("Primeiro dia sem o ponto").fill("2024-08-01")
    save_screenshot(page, "web-confirmar-desativar-ponto.png", element=retire)
    button = retire.get_by_role("button", name="Desativar ponto")
    question = dialogs.cancel(button)
    assert question == (
        f"Desativar o ponto {stand_id} ({STAND_NAME}) a partir de 01/08/2024? As licenças "
        "vigentes nesse dia (hoje, 0) terminam na véspera e o ponto deixa de estar ativo; isso "
        "não se desfaz pelo console."
    )
    retired = select(Stand.retired_at).where(Stand.stand_id == stand_id)
    assert _scalar(web_engine, retired) is None
    dialogs.confirm(button)
    assert _scalar(web_engine, retired) is not None
    expect(page.get_by_role("heading", name="Desativar o ponto")).to_have_count(0)


def test_retiring_counts_the_open_licences(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine
) -> None:
    """A stand with a licence open today: the question says one ends."""
    stand_id, _ = _stand_with_licence(web_client("admin"), web_engine)
    login(page, "admin")
    dialogs = Dialogs(page)
    page.goto(f"/admin/pontos/{stand_id}")
    question = dialogs.cancel(page.get_by_role("button", name="Desativar ponto"))
    assert "As licenças vigentes nesse dia (hoje, 1) terminam na véspera" in question
    assert _scalar(web_engine, select(Stand.retired_at).where(Stand.stand_id == stand_id)) is None


# --- admin: users and devices --------------------------------------------------------------------


def test_resetting_a_password_and_disabling_an_account_ask_first(
    page: Any, login: Callable, make_user: Callable, web_engine: Engine
) -> None:
    """Both name the account (username and role): the password and the account stay as they
    were when dismissed."""
    username = make_user("planner")
    account = select(User).where(User.username == username)
    with session_scope(web_engine) as session:
        user = session.scalars(account).one()
        user_id, old_hash = user.user_id, user.password_hash
    login(page, "admin")
    dialogs = Dialogs(page)
    page.goto(f"/admin/usuarios/{user_id}")
    reset = page.get_by_role("button", name="Redefinir senha")
    question = dialogs.cancel(reset)
    assert question == (
        f"Redefinir a senha de {username} (Planejador(a))? A senha atual deixa de valer e as "
        "sessões abertas terminam agora."
    )
    password = select(User.password_hash).where(User.user_id == user_id)
    assert _scalar(web_engine, password) == old_hash
    dialogs.confirm(reset)
    assert _scalar(web_engine, password) != old_hash
    expect(page.locator("#senha-valor")).to_be_visible()

    disable = page.get_by_role("button", name=f"Desativar {username}")
    save_screenshot(page, "web-confirmar-usuario.png", element=page.locator("main"))
    question = dialogs.cancel(disable)
    assert question == (
        f"Desativar a conta {username} (Planejador(a))? A pessoa não entra mais e as sessões "
        "abertas terminam agora; o console não reativa a conta."
    )
    disabled = select(User.disabled_at).where(User.user_id == user_id)
    assert _scalar(web_engine, disabled) is None
    dialogs.confirm(disable)
    assert _scalar(web_engine, disabled) is not None


def test_revoking_a_device_asks_first(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine
) -> None:
    """'Revogar' names the device, its description and the vehicle."""
    vehicle = _unique("GPSC")
    admin = web_client("admin")
    form = {"vehicle_id": vehicle, "label": "Celular do turno da noite", "fora_da_frota": "1"}
    assert _post(admin, "/admin/dispositivos", "/admin/dispositivos", form).status_code == 303
    device_id = _scalar(web_engine, select(Device.device_id).where(Device.vehicle_id == vehicle))
    login(page, "admin")
    dialogs = Dialogs(page)
    page.goto("/admin/dispositivos")
    button = page.get_by_role("button", name=f"Revogar o dispositivo {device_id} ({vehicle})")
    question = dialogs.cancel(button)
    assert question == (
        f"Revogar o dispositivo {device_id} (Celular do turno da noite) do veículo {vehicle}? O "
        "token deixa de valer e as posições enviadas com ele passam a ser recusadas; para "
        "voltar, registre um novo dispositivo."
    )
    revoked = select(Device.revoked_at).where(Device.device_id == device_id)
    assert _scalar(web_engine, revoked) is None
    dialogs.confirm(button)
    assert _scalar(web_engine, revoked) is not None


# --- admin: imports ------------------------------------------------------------------------------


def _stands_file(folder: Path, stand_ids: list[str]) -> Path:
    features = [
        {
            "type": "Feature",
            "properties": {"stand_id": stand_id},
            "geometry": {"type": "Point", "coordinates": [-51.2 - k / 1000, -30.0]},
        }
        for k, stand_id in enumerate(stand_ids)
    ]
    path = folder / "pontos_teste.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}), "utf-8")
    return path


def test_an_import_that_retires_stands_asks_first(
    page: Any, login: Callable, web_client: Callable, web_engine: Engine, tmp_path: Path
) -> None:
    """Importing stands with 'Desativar os pontos … que não estão no arquivo' (unticked until
    the admin ticks it) says and asks, naming the file and how many stands it retires."""
    with session_scope(web_engine) as session:
        if session.get(Municipality, TEST_MUNICIPALITY) is None:
            session.add(Municipality(code=TEST_MUNICIPALITY, name="Município de Teste", uf="RS"))
    kept, dropped = _unique("IMPC"), _unique("IMPC")
    try:
        _import_retiring(page, login, web_client, web_engine, tmp_path, kept, dropped)
    finally:  # no active stand left in the test municipality (the planner lists registry ones)
        with session_scope(web_engine) as session:
            for stand_id in (kept, dropped):
                stand = session.get(Stand, stand_id)
                if stand is not None and stand.retired_at is None:
                    stand.retired_at = dt.datetime.now(dt.UTC)


def _import_retiring(
    page: Any,
    login: Callable,
    web_client: Callable,
    web_engine: Engine,
    tmp_path: Path,
    kept: str,
    dropped: str,
) -> None:
    admin = web_client("admin")
    first = _stands_file(tmp_path, [kept, dropped])
    upload = admin.post(
        "/admin/importacao",
        data={
            "csrf_token": csrf_from(admin.get("/admin/importacao").text),
            "kind": "pontos",
            "radius_m": "30",
            "municipality": TEST_MUNICIPALITY,
        },
        files={"file": (first.name, first.read_bytes(), "application/geo+json")},
    )
    envio = upload.headers["location"].split("envio=")[1]
    done = _post(admin, "/admin/importacao", "/admin/importacao/confirmar", {"envio": envio})
    assert done.status_code == 303

    login(page, "admin")
    dialogs = Dialogs(page)
    page.goto("/admin/importacao")
    page.get_by_label("O que importar").select_option("pontos")
    page.locator("#importacao-arquivo").set_input_files(str(_stands_file(tmp_path, [kept])))
    page.get_by_label("Município (código IBGE) das linhas que não o informam").fill(
        TEST_MUNICIPALITY
    )
    retire = page.get_by_label("Desativar os pontos do mesmo município")
    expect(retire).not_to_be_checked()  # a one-stand file must not retire the city's by default
    retire.check()
    page.get_by_role("button", name="Enviar e ver a prévia").click()
    page.wait_for_url("**/admin/importacao?envio=*")
    expect(page.locator("form.confirm p")).to_contain_text(
        "e desativa 1 ponto do município que não está no arquivo"
    )
    save_screenshot(page, "web-confirmar-importacao.png")
    button = page.get_by_role("button", name="Importar")
    question = dialogs.cancel(button)
    assert question == (
        "Importar pontos_teste.geojson e desativar 1 ponto do município que não está no "
        "arquivo? Ele deixa de estar ativo até que uma nova importação o traga de volta."
    )
    retired = select(Stand.retired_at).where(Stand.stand_id == dropped)
    assert _scalar(web_engine, retired) is None
    dialogs.confirm(button)
    expect(page.get_by_text("Importação concluída")).to_be_visible()
    assert _scalar(web_engine, retired) is not None
    assert _scalar(web_engine, select(Stand.retired_at).where(Stand.stand_id == kept)) is None
