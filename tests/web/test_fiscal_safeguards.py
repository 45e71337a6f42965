"""Safeguards of the proposal page against a real ``pontual serve``: a dismissed proposal has no
auto; issuing, notifying and the final decision ask for confirmation in the browser; the final
decision under a rulebook without periods needs the date the period ended; a dismissal needs a
reason of a sentence; reversed queue dates are named.
"""

from __future__ import annotations

import datetime as dt
import html
import secrets
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, text
from web_fiscal import TIMEZONE, boarding_finding, store_and_propose
from web_helpers import WEB_USERS, save_screenshot

from api.web.auth import SESSION_COOKIE, csrf_token_for

AGENT = WEB_USERS["agent"]
START = dt.datetime(2026, 11, 12, 13, 0, tzinfo=dt.UTC)
NO_AUTO = "Proposta descartada: não há auto de infração."


def _post(client: httpx.Client, path: str, **form: str) -> httpx.Response:
    token = client.cookies.get(SESSION_COOKIE) or ""
    return client.post(path, data={"csrf_token": csrf_token_for(token), **form})


def _proposal(engine: Engine, *, subtype: str = "accessible_wait") -> tuple[str, str]:
    """A new Porto Alegre taxi proposal at S1 (art. 46 c/c 57 XI: the pontuação to choose);
    return its id and the vehicle."""
    vehicle = f"SG{secrets.token_hex(3).upper()}"
    finding = boarding_finding(vehicle_id=vehicle, stand_id="S1", started_at=START, subtype=subtype)
    return store_and_propose(engine, [finding])[finding["finding_id"]], vehicle


def _status(engine: Engine, proposal_id: str) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                text("SELECT status FROM proposals WHERE proposal_id = :p"), {"p": proposal_id}
            ).scalar_one()
        )


def _today() -> str:
    return dt.datetime.now(ZoneInfo(TIMEZONE)).date().isoformat()


def _yesterday() -> str:
    return (dt.date.fromisoformat(_today()) - dt.timedelta(days=1)).isoformat()


def _notified_days_ago(engine: Engine, proposal_id: str, days: int) -> None:
    """Move the auto's issue and notification ``days`` back: its period may have ended."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE proposals SET confirmed_at = confirmed_at - make_interval(days => :d), "
                "notified_at = notified_at - make_interval(days => :d) WHERE proposal_id = :p"
            ),
            {"d": days, "p": proposal_id},
        )


@pytest.fixture
def agent(web_client: Callable[..., httpx.Client]) -> httpx.Client:
    return web_client("agent")


class TestDismissedHasNoAuto:
    def test_the_auto_of_a_dismissed_proposal_is_refused(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Dismissed: the page offers no document and says why; the auto (HTML and PDF) and the
        notificação answer 409 with that sentence; a proposal not dismissed is a minuta."""
        proposal, _ = _proposal(web_engine)
        base = f"/fiscal/propostas/{proposal}"
        draft = agent.get(f"{base}/documentos/auto")
        assert draft.status_code == 200
        assert "MINUTA: proposta ainda não confirmada por agente" in draft.text
        reason = "Táxi Acessível aguardando usuário com deficiência (art. 46)."
        assert _post(agent, f"{base}/descartar", motivo=reason).status_code == 303
        page = html.unescape(agent.get(base).text)
        assert NO_AUTO in page
        assert "/documentos/" not in page
        for path in ("auto", "auto?formato=pdf", "notificacao", "notificacao?formato=pdf"):
            answer = agent.get(f"{base}/documentos/{path}")
            assert answer.status_code == 409, path
            assert answer.headers["content-type"].startswith("text/html"), path
            body = html.unescape(answer.text)
            assert NO_AUTO in body, path
            assert "Agente autuador" not in body and "Assinatura" not in body, path


class TestReasonsAndDates:
    def test_a_dismissal_reason_is_a_sentence(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """A reason under 15 characters: 422 saying why, the typed text kept, nothing changed;
        dismissed, the page no longer asks the exception's answer to confirm."""
        proposal, _ = _proposal(web_engine, subtype="boarding")  # art. 59 XIII: "salvo…"
        exception = "A regra tem uma exceção: para confirmar"
        assert exception in html.unescape(agent.get(f"/fiscal/propostas/{proposal}").text)
        page = _post(agent, f"/fiscal/propostas/{proposal}/descartar", motivo="não procede")
        assert page.status_code == 422
        body = html.unescape(page.text)
        assert "Motivo do descarte: escreva ao menos 15 caracteres." in body
        assert "O descarte é uma decisão registrada na auditoria" in body
        assert ">não procede</textarea>" in body
        assert _status(web_engine, proposal) == "proposta"
        same = _post(agent, f"/fiscal/propostas/{proposal}/descartar", motivo="a" * 20)
        assert same.status_code == 422
        assert "escreva uma frase, com ao menos duas palavras" in html.unescape(same.text)
        done = _post(
            agent, f"/fiscal/propostas/{proposal}/descartar", motivo="Passageiro com deficiência."
        )
        assert done.status_code == 303 and _status(web_engine, proposal) == "descartada"
        shown = html.unescape(agent.get(f"/fiscal/propostas/{proposal}").text)
        assert exception not in shown  # nothing left to confirm

    def test_the_final_decision_needs_the_period_end_outside_the_rulebook(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Porto Alegre's taxi decree fixes no period: the page says it comes from the
        municipality's law; without the date, before the notification, today (the period runs
        to the day's end) or in the future: 422 on the date field, nothing changed; with
        yesterday's date: 'definitiva', audited."""
        proposal, _ = _proposal(web_engine)
        base = f"/fiscal/propostas/{proposal}"
        assert _post(agent, f"{base}/confirmar", pontuacao="autorizatário").status_code == 303
        assert _post(agent, f"{base}/notificar", data_entrega=_today()).status_code == 303
        waiting = html.unescape(agent.get(base).text)  # notified today: no day can end it yet
        assert 'id="finalizar-espera"' in waiting and 'name="fim_prazo"' not in waiting
        assert "O prazo conta da notificação (" in waiting
        stale = _post(  # a form sent from an older page: refused, and said where the form was
            agent, f"{base}/finalizar", fundamentacao="Sem defesa no prazo.", data_final=_today()
        )
        assert stale.status_code == 422
        assert 'id="fim_prazo-erro"' in stale.text and 'id="finalizar-espera"' in stale.text
        _notified_days_ago(web_engine, proposal, 5)
        shown = html.unescape(agent.get(base).text)
        assert "eles estão na lei do município, fora do texto do regulamento" in shown
        assert 'name="fim_prazo" type="date" required' in shown
        grounds = "Sem defesa no prazo da lei municipal."
        tomorrow = (dt.date.fromisoformat(_today()) + dt.timedelta(days=1)).isoformat()
        for date, message in (
            ("", "Informe a data em que o prazo terminou"),
            ("01/02/2026", "Data inválida: '01/02/2026'"),
            ("2026-01-02", "é anterior à notificação"),
            (tomorrow, "não é anterior ao dia do passo"),
            (_today(), "não é anterior ao dia do passo"),
        ):
            page = _post(
                agent,
                f"{base}/finalizar",
                fundamentacao=grounds,
                fim_prazo=date,
                data_final=_today(),
            )
            assert page.status_code == 422, date
            body = html.unescape(page.text)
            assert 'id="fim_prazo-erro"' in body and message in body, date
            assert f">{grounds}</textarea>" in body, date
            assert _status(web_engine, proposal) == "notificada"
        done = _post(
            agent,
            f"{base}/finalizar",
            fundamentacao=grounds,
            fim_prazo=_yesterday(),
            data_final=_today(),
        )
        assert done.status_code == 303
        assert _status(web_engine, proposal) == "definitiva"
        with web_engine.connect() as conn:
            details = conn.execute(
                text(
                    "SELECT details FROM audit_log WHERE entity = 'proposal' AND entity_id = :p "
                    "AND action = 'finalize'"
                ),
                {"p": proposal},
            ).scalar_one()
        assert details["period_ended_on"] == _yesterday()

    def test_the_calendar_s_last_day_is_named_not_a_crash(self, agent: httpx.Client) -> None:
        """'até 31/12/9999' (its next day is past the calendar): the filter's error, not a 500."""
        page = agent.get("/fiscal/propostas", params={"ate": "9999-12-31"})
        assert page.status_code == 422
        assert "Data final inválida: '9999-12-31'" in html.unescape(page.text)

    def test_reversed_queue_dates_are_named(self, agent: httpx.Client) -> None:
        """'desde' (the label's word) after 'até': the invalid-filters warning naming both."""
        page = agent.get("/fiscal/propostas", params={"desde": "2024-03-10", "ate": "2024-03-01"})
        assert page.status_code == 422
        body = html.unescape(page.text)
        assert "Há filtros com valores inválidos" in body
        assert "A data final é anterior à inicial: até 01/03/2024, desde 10/03/2024." in body
        assert 'name="de" type="date" value="2024-03-10"' in body


@pytest.mark.browser
def test_consequential_steps_ask_first(page: Any, login: Callable, web_engine: Engine) -> None:
    """Issuing the auto, recording the notification and the final decision each open a
    confirm dialog naming what happens; dismissed, nothing is sent; accepted, the step runs.
    The final decision's form asks for the date the period ended (screenshot)."""
    proposal, vehicle = _proposal(web_engine)
    asked: list[str] = []
    accept = {"now": False}

    def on_dialog(dialog: Any) -> None:
        asked.append(dialog.message)
        if accept["now"]:
            dialog.accept()
        else:
            dialog.dismiss()

    def ask(button: Any) -> str:
        """Click ``button``; return the question of the dialog it opened."""
        before = len(asked)
        button.click()
        for _ in range(100):  # the dialog event may come just after the click returns
            if len(asked) > before:
                return asked[-1]
            page.wait_for_timeout(50)
        raise AssertionError(f"no dialog after clicking {button}")

    login(page, "agent")
    page.on("dialog", on_dialog)
    page.goto(f"/fiscal/propostas/{proposal}")
    page.locator("input[name=pontuacao][value='autorizatário']").check()

    steps = (
        ("Confirmar e lavrar o auto", f"Lavrar o auto de infração contra o prefixo {vehicle}"),
        ("Registrar a entrega da notificação", "Registrar agora a entrega da notificação"),
    )
    for (button, question), (before, after) in zip(
        steps, (("proposta", "confirmada"), ("confirmada", "notificada")), strict=True
    ):
        accept["now"] = False
        assert question in ask(page.get_by_role("button", name=button))
        page.wait_for_timeout(300)
        assert _status(web_engine, proposal) == before
        accept["now"] = True
        with page.expect_navigation():
            ask(page.get_by_role("button", name=button))
        assert _status(web_engine, proposal) == after

    _notified_days_ago(web_engine, proposal, 5)  # the period may have ended
    page.reload()
    final = page.locator("#finalizar")
    expect(final).to_contain_text("estão na lei do município, fora do texto do regulamento")
    final.get_by_label("Fundamentação").fill("Sem defesa no prazo da lei municipal.")
    asked_before = len(asked)
    with page.expect_navigation():  # the period's end left empty: the server's error, and
        final.get_by_role("button", name="Registrar a decisão definitiva").click()
    assert len(asked) == asked_before  # no question before it (nothing to confirm yet)
    assert _status(web_engine, proposal) == "notificada"
    field = page.locator("#fim_prazo")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#fim_prazo-erro")).to_contain_text("Informe a data")
    expect(field).to_be_focused()
    save_screenshot(
        page,
        "web-fiscal-decisao-definitiva.png",
        element=page.locator("#acoes-titulo").locator(".."),
    )
    field.fill(_yesterday())
    final = page.locator("#finalizar")
    expect(final.get_by_label("Fundamentação")).to_have_value(  # kept through the error
        "Sem defesa no prazo da lei municipal."
    )
    accept["now"] = False
    question = ask(final.get_by_role("button", name="Registrar a decisão definitiva"))
    assert question.startswith("Registrar a decisão definitiva do auto AI-4314902-"), question
    page.wait_for_timeout(300)
    assert _status(web_engine, proposal) == "notificada"
    accept["now"] = True
    with page.expect_navigation():
        ask(final.get_by_role("button", name="Registrar a decisão definitiva"))
    expect(page.get_by_role("status")).to_contain_text("Decisão definitiva registrada.")
    day = dt.date.fromisoformat(_yesterday()).strftime("%d/%m/%Y")
    expect(page.locator(".summary")).to_contain_text(f"Fim do prazo (lei municipal){day}")
    expect(page.locator("#historico-titulo").locator("..")).to_contain_text(
        f"prazo encerrado em {day}"
    )
    assert _status(web_engine, proposal) == "definitiva"


@pytest.mark.browser
def test_the_auto_is_not_asked_for_without_the_pontuacao_choice(
    page: Any, login: Callable, web_engine: Engine
) -> None:
    """The pontuação's choice left empty: no "isso não se desfaz" dialog (the server would
    refuse after it: an agent saw the irreversible question, said yes, and got a 422); the
    server's message names the choice, nothing changed."""
    proposal, _ = _proposal(web_engine)
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    login(page, "agent")
    page.goto(f"/fiscal/propostas/{proposal}")
    with page.expect_navigation():
        page.get_by_role("button", name="Confirmar e lavrar o auto").click()
    expect(page.locator("body")).to_contain_text("Escolha sobre quem recai a pontuação")
    assert asked == []
    with web_engine.connect() as conn:
        status = conn.execute(
            text("SELECT status FROM proposals WHERE proposal_id = :p"), {"p": proposal}
        ).scalar_one()
    assert status == "proposta"


@pytest.mark.browser
def test_a_pasted_reason_over_the_limit_is_said(
    page: Any, login: Callable, web_engine: Engine
) -> None:
    """A dismissal reason pasted over the field's 2,000 characters is cut by the browser; the
    field says so (before, the text was cut without a word)."""
    proposal, _ = _proposal(web_engine)
    login(page, "agent")
    page.goto(f"/fiscal/propostas/{proposal}")
    field = page.locator("#motivo")
    field.evaluate(
        """(el) => {
            const data = new DataTransfer();
            data.setData("text", "a".repeat(5000));
            el.focus();
            el.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true}));
        }"""
    )
    said = page.locator("#motivo-limite")
    expect(said).to_contain_text("passa do limite de 2.000 caracteres")
    expect(said).to_contain_text("(2.000 de 5.000)")
    assert "motivo-limite" in (field.get_attribute("aria-describedby") or "")
