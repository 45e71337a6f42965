"""The dated steps of the proposal page: the notificação is printed before it is delivered,
and the delivery, the defence, its decision and the final decision are recorded on the date
the agent gives (the periods count from it), refused with the workflow's pt-BR message when
before the earlier step or in the future.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import re
import secrets
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import expect
from pypdf import PdfReader
from sqlalchemy import Engine, text
from web_fiscal import PB, TIMEZONE, longer_route_finding, store_and_propose
from web_helpers import WEB_USERS, save_screenshot

from api.web.auth import SESSION_COOKIE, csrf_token_for

AGENT = WEB_USERS["agent"]
ZONE = ZoneInfo(TIMEZONE)
ANSWER = "O passageiro não autorizou o trajeto mais longo; reclamou na chegada."


def _post(client: httpx.Client, path: str, **form: str) -> httpx.Response:
    token = client.cookies.get(SESSION_COOKIE) or ""
    return client.post(path, data={"csrf_token": csrf_token_for(token), **form})


def _today() -> dt.date:
    return dt.datetime.now(ZONE).date()


def _row(engine: Engine, proposal_id: str) -> dict[str, Any]:
    """The proposal's dated columns, deadlines, document and audit entries."""
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT status, confirmed_at, notified_at, defence_filed_at, decided_at, "
                    "deadlines, document FROM proposals WHERE proposal_id = :p"
                ),
                {"p": proposal_id},
            )
            .mappings()
            .one()
        )
        audit = conn.execute(
            text(
                "SELECT action, actor FROM audit_log WHERE entity = 'proposal' "
                "AND entity_id = :p ORDER BY entry_id"
            ),
            {"p": proposal_id},
        ).all()
    return {**row, "audit": [tuple(a) for a in audit]}


def _pinto_bandeira(engine: Engine, *, days_ago: int | None = None) -> str:
    """A detour in Pinto Bandeira (notification and defence periods in the rulebook), its auto
    issued ``days_ago`` days ago at 10:00 local (``None``: left a proposal)."""
    from db.enforcement import workflow
    from db.engine import session_scope

    issued = dt.datetime.combine(
        _today() - dt.timedelta(days=days_ago or 0), dt.time(10), tzinfo=ZONE
    )
    finding = longer_route_finding(
        vehicle_id=f"DT{secrets.token_hex(3).upper()}",
        started_at=(issued - dt.timedelta(days=1)).astimezone(dt.UTC),
    )
    proposal = store_and_propose(engine, [finding], municipality=PB)[finding["finding_id"]]
    if days_ago is not None:
        with session_scope(engine) as session:
            workflow.confirm(
                session, proposal, agent_id="outro", at=issued, exception_answer=ANSWER
            )
    return str(proposal)


def _field_row(body: str, label: str) -> str:
    """The text of a document's field row (``<th>label</th><td>…</td>``)."""
    found = re.search(rf"<th scope=\"row\">{re.escape(label)}</th><td>(.*?)</td>", body)
    assert found is not None, label
    return html.unescape(found.group(1))


@pytest.fixture
def agent(web_client: Callable[..., httpx.Client]) -> httpx.Client:
    return web_client("agent")


class TestNotificationBeforeDelivery:
    def test_the_notification_is_offered_once_the_auto_is_issued(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """A proposal offers only the auto (a minuta); once the auto is issued, the notificação
        (page and PDF) too, before its delivery is recorded: it shows no delivery date and no
        defence due date (the period counts from the delivery), and leaves 'Recebido por /
        data' to be signed."""
        proposal = _pinto_bandeira(web_engine)
        base = f"/fiscal/propostas/{proposal}"
        assert "/documentos/notificacao" not in agent.get(base).text
        assert _post(agent, f"{base}/confirmar", resposta_excecao=ANSWER).status_code == 303
        page = agent.get(base).text
        assert f'href="{base}/documentos/notificacao"' in page
        assert f'href="{base}/documentos/notificacao?formato=pdf" download' in page
        assert _row(web_engine, proposal)["status"] == "confirmada"

        notice = agent.get(f"{base}/documentos/notificacao")
        assert notice.status_code == 200
        assert "<h1>Notificação de Penalidade</h1>" in notice.text
        assert "Recebido por / data" in notice.text
        assert not re.search(r"\d\d/\d\d/\d{4}", _field_row(notice.text, "Notificado em"))
        defence = _field_row(notice.text, "Prazo de defesa")
        assert "30 dias úteis da notificação (art. 53)" in defence
        assert "até" not in defence and not re.search(r"\d\d/\d\d/\d{4}", defence)

        pdf = agent.get(f"{base}/documentos/notificacao", params={"formato": "pdf"})
        assert pdf.status_code == 200
        assert pdf.headers["content-type"] == "application/pdf"
        words = " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.content)).pages)
        assert "Recebido por / data" in words
        assert "30 dias úteis da notificação (art. 53)" in words
        assert _row(web_engine, proposal)["status"] == "confirmada"  # reading changes nothing


class TestNotifyOnADate:
    def test_a_past_delivery_date_is_stored_and_starts_the_defence_period(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """The form offers the delivery date (today by default, not before the auto); a
        delivery 5 days ago is stored on that local date, and the defence period (30 dias
        úteis, art. 53) counts from it, not from the moment of the click."""
        from enforcement.proposals import due_at

        proposal = _pinto_bandeira(web_engine, days_ago=10)
        base = f"/fiscal/propostas/{proposal}"
        page = html.unescape(agent.get(base).text)
        issued = (_today() - dt.timedelta(days=10)).isoformat()
        assert '<label for="data_entrega">Data da entrega</label>' in page
        assert (
            f'name="data_entrega" type="date" data-confirm-as="dd/mm/aaaa" required min="{issued}" '
            f'max="{_today().isoformat()}" value="{_today().isoformat()}"'
        ) in page
        day = _today() - dt.timedelta(days=5)
        done = _post(agent, f"{base}/notificar", data_entrega=day.isoformat())
        assert done.status_code == 303
        row = _row(web_engine, proposal)
        assert row["status"] == "notificada"
        delivered = row["notified_at"].astimezone(ZONE)
        assert (delivered.date(), delivered.time()) == (day, dt.time(12))
        due = dt.datetime.fromisoformat(row["deadlines"]["defence"]["due"])
        counted = due_at(delivered, days=30, counting="business_days", timezone=TIMEZONE)
        assert due == counted
        clicked = due_at(
            dt.datetime.now(ZONE), days=30, counting="business_days", timezone=TIMEZONE
        )
        assert due < clicked
        assert row["audit"][-1] == ("notify", AGENT)
        shown = html.unescape(agent.get(done.headers["location"]).text)
        assert f"Notificação entregue em</dt><dd>{day:%d/%m/%Y}</dd>" in shown
        assert f"até {due.astimezone(ZONE):%d/%m/%Y}" in shown
        assert f"passo de {day:%d/%m/%Y}" in shown  # the history: recorded today, taken then
        notice = agent.get(f"{base}/documentos/notificacao").text
        assert _field_row(notice, "Notificado em") == f"{day:%d/%m/%Y}"  # no made-up noon

    def test_a_time_is_kept_as_given(self, agent: httpx.Client, web_engine: Engine) -> None:
        """With the optional time, the delivery is at that local time."""
        proposal = _pinto_bandeira(web_engine, days_ago=3)
        day = _today() - dt.timedelta(days=2)
        done = _post(
            agent,
            f"/fiscal/propostas/{proposal}/notificar",
            data_entrega=day.isoformat(),
            hora_entrega="09:15",
        )
        assert done.status_code == 303
        delivered = _row(web_engine, proposal)["notified_at"].astimezone(ZONE)
        assert (delivered.date(), delivered.time()) == (day, dt.time(9, 15))

    def test_today_on_the_day_of_the_auto_is_accepted(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Auto issued a moment ago, delivery dated today (the default): accepted at any hour
        of the day, dated neither before the auto nor in the future."""
        proposal = _pinto_bandeira(web_engine)
        base = f"/fiscal/propostas/{proposal}"
        assert _post(agent, f"{base}/confirmar", resposta_excecao=ANSWER).status_code == 303
        done = _post(agent, f"{base}/notificar", data_entrega=_today().isoformat())
        assert done.status_code == 303
        row = _row(web_engine, proposal)
        assert row["confirmed_at"] <= row["notified_at"] <= dt.datetime.now(dt.UTC)
        assert row["notified_at"].astimezone(ZONE).date() == _today()

    @pytest.mark.parametrize(
        ("typed", "message"),
        [
            ("before", "é anterior à lavratura do auto"),
            ("tomorrow", "é futura: registra-se um passo já dado"),
            ("31/02/2026", "Data da entrega inválida: '31/02/2026' não existe no calendário."),
            ("31-02-2026", "Data da entrega inválida: '31-02-2026'; use o formato dd/mm/aaaa."),
            ("1900-01-01", "Data da entrega fora do intervalo aceito (01/01/1900)"),
        ],
    )
    def test_a_date_out_of_order_is_refused_and_nothing_changes(
        self, agent: httpx.Client, web_engine: Engine, typed: str, message: str
    ) -> None:
        """A date before the auto, in the future, unreadable or out of range: 422 with the
        pt-BR message on the date field (marked invalid, the typed value kept); the proposal,
        its deadlines and its audit unchanged."""
        proposal = _pinto_bandeira(web_engine, days_ago=10)
        value = {
            "before": (_today() - dt.timedelta(days=11)).isoformat(),
            "tomorrow": (_today() + dt.timedelta(days=1)).isoformat(),
        }.get(typed, typed)
        before = _row(web_engine, proposal)
        page = _post(
            agent, f"/fiscal/propostas/{proposal}/notificar", data_entrega=value, hora_entrega=""
        )
        assert page.status_code == 422
        body = html.unescape(page.text)
        error = re.search(
            r'<p id="data_entrega-erro" class="field__error" role="alert">(.*?)</p>', body
        )
        assert error is not None and message in error.group(1)
        assert 'name="data_entrega" type="date" data-confirm-as="dd/mm/aaaa" required' in body
        assert re.search(
            rf'id="data_entrega" name="data_entrega" [^>]*value="{re.escape(value)}"'
            r'[^>]*aria-describedby="data_entrega-dica data_entrega-erro" aria-invalid="true"',
            body,
        )
        assert _row(web_engine, proposal) == before

    def test_a_late_delivery_date_is_refused_by_the_notification_period(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Auto issued 40 days ago: a delivery dated 35 days after it is past the 30-day
        notification period (art. 36, § 1º: 409, nothing changed); dated 20 days after it,
        within the period, it is recorded."""
        proposal = _pinto_bandeira(web_engine, days_ago=40)
        base = f"/fiscal/propostas/{proposal}"
        late = _post(
            agent, f"{base}/notificar", data_entrega=(_today() - dt.timedelta(days=5)).isoformat()
        )
        assert late.status_code == 409
        assert "Prazo de notificação vencido em" in html.unescape(late.text)
        assert _row(web_engine, proposal)["status"] == "confirmada"
        day = _today() - dt.timedelta(days=20)
        assert _post(agent, f"{base}/notificar", data_entrega=day.isoformat()).status_code == 303
        assert _row(web_engine, proposal)["notified_at"].astimezone(ZONE).date() == day


class TestLaterSteps:
    def test_defence_decision_and_final_decision_on_their_dates(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Each later step offers its date field and stores the date given; a defence dated
        before the delivery is refused on its field (422, nothing changed)."""
        proposal = _pinto_bandeira(web_engine, days_ago=60)
        base = f"/fiscal/propostas/{proposal}"

        def ago(days: int) -> str:
            return (_today() - dt.timedelta(days=days)).isoformat()

        assert _post(agent, f"{base}/notificar", data_entrega=ago(55)).status_code == 303
        page = html.unescape(agent.get(base).text)
        assert '<label for="data_defesa">Data do protocolo da defesa</label>' in page
        assert "não antes da entrega da notificação" in page
        early = _post(agent, f"{base}/defesa", data_defesa=ago(57))
        assert early.status_code == 422
        body = html.unescape(early.text)
        assert 'id="data_defesa-erro"' in body and "é anterior à entrega da notificação" in body
        assert _row(web_engine, proposal)["status"] == "notificada"
        assert _post(agent, f"{base}/defesa", data_defesa=ago(50)).status_code == 303
        assert 'for="data_decisao">Data da decisão</label>' in agent.get(base).text
        decided = _post(
            agent,
            f"{base}/decidir",
            decisao="indeferida",
            fundamentacao="Sem prova do alegado.",
            data_decisao=ago(45),
        )
        assert decided.status_code == 303
        assert 'for="data_final">Data da decisão definitiva</label>' in agent.get(base).text
        final = _post(
            agent, f"{base}/finalizar", fundamentacao="Sem recurso cabível.", data_final=ago(40)
        )
        assert final.status_code == 303
        row = _row(web_engine, proposal)
        assert row["status"] == "definitiva"
        got = [
            row[c].astimezone(ZONE).date().isoformat()
            for c in ("notified_at", "defence_filed_at", "decided_at")
        ]
        assert got == [ago(55), ago(50), ago(45)]
        final_at = dt.datetime.fromisoformat(row["document"]["final_at"]).astimezone(ZONE)
        assert final_at.date().isoformat() == ago(40)
        assert [a for a, _ in row["audit"]][-4:] == [
            "notify",
            "file_defence",
            "decide_defence",
            "finalize",
        ]


@pytest.mark.browser
def test_in_the_browser_the_delivery_date_is_typed_and_checked(
    page: Any, login: Callable[..., Any], web_engine: Engine
) -> None:
    """The notificação is offered before the delivery; a delivery date before the auto is
    refused on the field (focused, the typed date kept; screenshot); a past date is confirmed
    by name (dd/mm/aaaa) and recorded."""
    proposal = _pinto_bandeira(web_engine, days_ago=10)
    asked: list[str] = []

    def on_dialog(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    login(page, "agent")
    page.on("dialog", on_dialog)
    page.goto(f"/fiscal/propostas/{proposal}")
    expect(page.get_by_role("link", name="Notificação de Penalidade em PDF")).to_be_visible()
    form = page.locator("#notificar")
    field = form.get_by_label("Data da entrega")
    expect(field).to_have_value(_today().isoformat())
    early = (_today() - dt.timedelta(days=11)).isoformat()
    field.fill(early)
    with page.expect_navigation():  # before min: sent without asking, refused by the server
        form.get_by_role("button", name="Registrar a entrega da notificação").click()
    assert asked == []
    field = page.locator("#data_entrega")
    expect(page.locator("#data_entrega-erro")).to_contain_text("é anterior à lavratura do auto")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_value(early)
    expect(field).to_be_focused()
    save_screenshot(page, "web-fiscal-data-entrega.png", element=page.locator("#notificar"))
    day = _today() - dt.timedelta(days=4)
    field.fill(day.isoformat())
    with page.expect_navigation():
        page.locator("#notificar").get_by_role(
            "button", name="Registrar a entrega da notificação"
        ).click()
    assert len(asked) == 1 and f"feita em {day:%d/%m/%Y}?" in asked[0], asked
    expect(page.get_by_role("status")).to_contain_text("Entrega da notificação de penalidade")
    expect(page.locator(".summary")).to_contain_text(f"Notificação entregue em{day:%d/%m/%Y}")
    assert _row(web_engine, proposal)["notified_at"].astimezone(ZONE).date() == day
