"""The workflow's steps from the proposal page: what each form requires (pt-BR errors, nothing
changed), what each records (the audit log, with the web user as actor), the deadlines on
the inbox and the documents (their personal data audited).
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
from web_fiscal import (
    PB,
    SEEDED_PLATE,
    SEEDED_PROPOSAL_ID,
    boarding_finding,
    longer_route_finding,
    store_and_propose,
    tracking_gap_finding,
    two_tracks_finding,
)
from web_helpers import WEB_USERS

from api.web.auth import SESSION_COOKIE, csrf_token_for

AGENT = WEB_USERS["agent"]
START = dt.datetime(2026, 11, 10, 13, 0, tzinfo=dt.UTC)


def _vehicle(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(3).upper()}"


def _today() -> str:
    """Today in Porto Alegre, as a date field sends it (a step's date is required)."""
    return dt.datetime.now(ZoneInfo("America/Sao_Paulo")).date().isoformat()


def _post(client: httpx.Client, path: str, **form: str) -> httpx.Response:
    """POST a console form with the session's CSRF token (redirects not followed)."""
    token = client.cookies.get(SESSION_COOKIE) or ""
    return client.post(path, data={"csrf_token": csrf_token_for(token), **form})


def _state(engine: Engine, proposal_id: str) -> dict[str, Any]:
    """The proposal's row and its audit entries (action, actor, details), oldest first."""
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT status, auto_number, pontuacao, dismissed_reason, document "
                    "FROM proposals WHERE proposal_id = :p"
                ),
                {"p": proposal_id},
            )
            .mappings()
            .one()
        )
        audit = conn.execute(
            text(
                "SELECT action, actor, details FROM audit_log WHERE entity = 'proposal' "
                "AND entity_id = :p ORDER BY entry_id"
            ),
            {"p": proposal_id},
        ).all()
    return {**row, "audit": [(a.action, a.actor, a.details) for a in audit]}


def _boarding(engine: Engine, *, subtype: str = "boarding", driver_id: str | None = None) -> str:
    """A new proposal for a boarding at S1 (Porto Alegre art. 59, XIII, or art. 46)."""
    finding = boarding_finding(
        vehicle_id=_vehicle("AC"),
        stand_id="S1",
        started_at=START,
        subtype=subtype,
        driver_id=driver_id,
    )
    return str(store_and_propose(engine, [finding])[finding["finding_id"]])


@pytest.fixture
def agent(web_client: Callable[..., httpx.Client]) -> httpx.Client:
    """The seeded agent's client."""
    return web_client("agent")


class TestConfirm:
    def test_without_the_exception_answer_nothing_changes(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Art. 59, XIII has an exception: confirming without answering it (or with a few
        letters) is a 422 page naming the exception and its question in pt-BR, the field
        marked invalid; the proposal stays 'proposta', without auto number or audit entry."""
        proposal = _boarding(web_engine)
        before = _state(web_engine, proposal)
        for answer in ("", "não"):
            page = _post(agent, f"/fiscal/propostas/{proposal}/confirmar", resposta_excecao=answer)
            assert page.status_code == 422
            body = html.unescape(page.text)
            assert "Responda à exceção do art. 59, XIII (c/c art. 46)" in body
            assert "O embarque não se enquadra em exceção da legislação municipal" in body
            assert 'id="resposta_excecao-erro" class="field__error" role="alert"' in page.text
            assert 'aria-invalid="true"' in page.text
        assert _state(web_engine, proposal) == before
        assert before["status"] == "proposta" and before["auto_number"] is None

    def test_the_pontuacao_must_be_chosen_where_the_rule_leaves_it(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Art. 46 (c/c 57, XI): without a pontuação, or with one the rule does not offer,
        422 with the choices; 'condutor' where the fixes name no driver is refused (the auto
        printed points to "não identificado"); with the driver named, the auto is issued with
        it."""
        unnamed = _boarding(web_engine, subtype="accessible_wait")
        for chosen in ("", "ambos"):
            page = _post(agent, f"/fiscal/propostas/{unnamed}/confirmar", pontuacao=chosen)
            assert page.status_code == 422
            assert "Escolha sobre quem recai a pontuação: condutor ou autorizatário" in page.text
        page = _post(agent, f"/fiscal/propostas/{unnamed}/confirmar", pontuacao="condutor")
        assert page.status_code == 422
        assert "não identifica o condutor" in html.unescape(page.text)
        assert _state(web_engine, unnamed)["status"] == "proposta"
        proposal = _boarding(web_engine, subtype="accessible_wait", driver_id="C-0001")
        done = _post(agent, f"/fiscal/propostas/{proposal}/confirmar", pontuacao="condutor")
        assert done.status_code == 303
        assert done.headers["location"] == f"/fiscal/propostas/{proposal}?feito=confirmar"
        state = _state(web_engine, proposal)
        assert (state["status"], state["pontuacao"]) == ("confirmada", "condutor")
        action, actor, details = state["audit"][-1]
        assert (action, actor, details["pontuacao"]) == ("confirm", AGENT, "condutor")

    def test_in_the_browser_the_error_is_on_the_form_then_the_answer_is_on_the_auto(
        self, page: Any, login: Callable[..., Any], web_engine: Engine
    ) -> None:
        """Confirm without the answer: the error is announced on the form and the focus goes
        to the field; answered, the auto is issued and its page prints the agent's answer;
        the audit names the agent and the answer."""
        proposal = _boarding(web_engine)
        login(page, "agent")
        page.on("dialog", lambda dialog: dialog.accept())  # "Lavrar o auto …?"
        page.goto(f"/fiscal/propostas/{proposal}")
        page.get_by_role("button", name="Confirmar e lavrar o auto").click()
        form = page.locator("#confirmar")
        expect(form.get_by_role("alert")).to_contain_text("Responda à exceção do art. 59, XIII")
        field = page.locator("#resposta_excecao")
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(field).to_be_focused()
        answer = "Veículo comum, não é Táxi Acessível; embarcou passageiro sem deficiência."
        field.fill(answer)
        page.get_by_role("button", name="Confirmar e lavrar o auto").click()
        expect(page.get_by_role("status")).to_contain_text("auto de infração AI-4314902-")
        expect(page.locator(".summary")).to_contain_text("confirmada")
        page.get_by_role("link", name="Auto de Infração", exact=True).click()
        expect(page.locator(".document")).to_contain_text(f"Resposta do agente: {answer}")
        state = _state(web_engine, proposal)
        assert state["audit"][-1][:2] == ("confirm", AGENT)
        assert state["audit"][-1][2]["exception_answer"] == answer


class TestDismiss:
    def test_a_reason_is_required(self, agent: httpx.Client, web_engine: Engine) -> None:
        """Dismissing without a reason: 422, pt-BR, nothing changed; with one: 'descartada',
        the reason kept and audited with the agent as actor."""
        proposal = _boarding(web_engine)
        before = _state(web_engine, proposal)
        page = _post(agent, f"/fiscal/propostas/{proposal}/descartar", motivo="  ")
        assert page.status_code == 422
        assert "Motivo do descarte: escreva ao menos 15 caracteres." in page.text
        assert _state(web_engine, proposal) == before
        reason = "Táxi Acessível embarcando cadeirante (art. 46)."
        done = _post(agent, f"/fiscal/propostas/{proposal}/descartar", motivo=reason)
        assert done.status_code == 303
        state = _state(web_engine, proposal)
        assert (state["status"], state["dismissed_reason"]) == ("descartada", reason)
        action, actor, details = state["audit"][-1]
        assert (action, actor, details["reason"]) == ("dismiss", AGENT, reason)
        shown = agent.get(done.headers["location"]).text
        assert "Proposta descartada, com o motivo registrado." in shown
        assert "Nenhuma ação do procedimento cabe na situação atual" in shown
        late = _post(agent, f"/fiscal/propostas/{proposal}/confirmar")  # no answer: moot
        assert late.status_code == 409
        assert "só se pode confirmar uma proposta na situação 'proposta'" in html.unescape(
            late.text
        )
        assert _state(web_engine, proposal)["status"] == "descartada"

    def test_a_full_box_with_line_breaks_is_taken(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """2,000 characters typed with line breaks (the box's maxlength): the browser sends each
        break as CRLF, 2,028 characters, refused before; kept as typed, breaks as one."""
        proposal = _boarding(web_engine)
        line = "Táxi Acessível embarcando cadeirante, conforme o art. 46 do decreto."
        typed = "\n".join([line] * 40)[:2000]
        done = _post(
            agent, f"/fiscal/propostas/{proposal}/descartar", motivo=typed.replace("\n", "\r\n")
        )
        assert done.status_code == 303, done.text
        assert _state(web_engine, proposal)["dismissed_reason"] == typed


def _in_defence(agent: httpx.Client, web_engine: Engine) -> tuple[str, str]:
    """A detour in Pinto Bandeira confirmed, notified and defended today: its id and page."""
    finding = longer_route_finding(vehicle_id=_vehicle("PB"), started_at=START)
    proposal = store_and_propose(web_engine, [finding], municipality=PB)[finding["finding_id"]]
    base = f"/fiscal/propostas/{proposal}"
    answer = "O passageiro não autorizou o trajeto mais longo; reclamou na chegada."
    assert _post(agent, f"{base}/confirmar", resposta_excecao=answer).status_code == 303
    assert _post(agent, f"{base}/notificar", data_entrega=_today()).status_code == 303
    assert _post(agent, f"{base}/defesa", data_defesa=_today()).status_code == 303
    return proposal, base


def test_a_refused_decision_puts_the_focus_on_the_grounds(
    page: Any, login: Callable[..., Any], agent: httpx.Client, web_engine: Engine
) -> None:
    """The decision chosen, grounds of 3 characters: the server refuses them and the focus goes
    to the grounds, the field in error, not to the form's first field (the decision)."""
    proposal, base = _in_defence(agent, web_engine)
    login(page, "agent")
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(base)
    form = page.locator("#decidir")
    form.get_by_label("Indeferida (a penalidade se mantém)").check()
    form.get_by_label("Fundamentação").fill("abc")
    with page.expect_navigation():
        form.get_by_role("button", name="Registrar a decisão").click()
    field = page.locator("#fundamentacao_decisao")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    assert _state(web_engine, proposal)["status"] == "em_defesa"


class TestProcedure:
    def test_an_accepted_defence_cancels_the_auto(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Defence accepted: the auto cai. No notificação de penalidade is offered or printed
        (409 with the reason); the auto still opens, marked cancelled."""
        _, base = _in_defence(agent, web_engine)
        accepted = _post(
            agent,
            f"{base}/decidir",
            decisao="deferida",
            fundamentacao="O passageiro pediu o trajeto, como mostra o recibo.",
            data_decisao=_today(),
        )
        assert accepted.status_code == 303
        assert "Notificação de Penalidade" not in agent.get(base).text
        notice = agent.get(f"{base}/documentos/notificacao")
        assert notice.status_code == 409
        assert "o auto caiu, e não há penalidade a notificar" in notice.text
        assert f'<a href="{base}">Voltar à página anterior</a>' in notice.text
        for formato in ("html", "pdf"):
            auto = agent.get(f"{base}/documentos/auto", params={"formato": formato})
            assert auto.status_code == 200
        assert "AUTO CANCELADO: a defesa foi deferida" in agent.get(f"{base}/documentos/auto").text

    def test_pinto_bandeira_from_the_auto_to_the_final_decision(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """A detour in Pinto Bandeira (art. 25, III): a step out of order is a 409 page; then
        confirm (answering 'salvo com autorização do usuário'; the notificação is offered from
        then on), notify, defence, decision (its choice required), final decision; each step
        audited with the agent as actor."""
        finding = longer_route_finding(vehicle_id=_vehicle("PB"), started_at=START)
        proposal = store_and_propose(web_engine, [finding], municipality=PB)[finding["finding_id"]]
        base = f"/fiscal/propostas/{proposal}"

        early = _post(agent, f"{base}/notificar", data_entrega=_today())
        assert early.status_code == 409
        assert "só se pode notificar uma proposta na situação 'confirmada'" in html.unescape(
            early.text
        )

        answer = "O passageiro não autorizou o trajeto mais longo; reclamou na chegada."
        assert "Notificação de Penalidade" not in agent.get(base).text  # a minuta: no notice
        assert _post(agent, f"{base}/confirmar", resposta_excecao=answer).status_code == 303
        assert "Notificação de Penalidade" in agent.get(base).text  # printed before delivery
        undated = _post(agent, f"{base}/notificar")
        assert undated.status_code == 422  # the hint says it: the date is required
        assert "Data da entrega: informe a data em que o passo foi dado" in undated.text
        assert _post(agent, f"{base}/notificar", data_entrega=_today()).status_code == 303
        assert "Notificação de Penalidade" in agent.get(base).text
        assert _post(agent, f"{base}/defesa", data_defesa=_today()).status_code == 303
        missing = _post(
            agent, f"{base}/decidir", fundamentacao="Sem prova do alegado.", data_decisao=_today()
        )
        assert missing.status_code == 422
        assert "Escolha a decisão: defesa deferida ou indeferida." in missing.text
        decided = _post(
            agent,
            f"{base}/decidir",
            decisao="indeferida",
            fundamentacao="Sem prova do alegado.",
            data_decisao=_today(),
        )
        assert decided.status_code == 303
        final = _post(
            agent, f"{base}/finalizar", fundamentacao="Sem recurso cabível.", data_final=_today()
        )
        assert final.status_code == 303
        state = _state(web_engine, proposal)
        assert state["status"] == "definitiva"
        steps = [(a, actor) for a, actor, _ in state["audit"]]
        assert steps == [
            ("create", "sistema"),
            ("confirm", AGENT),
            ("notify", AGENT),
            ("file_defence", AGENT),
            ("decide_defence", AGENT),
            ("finalize", AGENT),
        ]
        notice = agent.get(f"{base}/documentos/notificacao")
        assert notice.status_code == 200
        assert "Notificação de Penalidade" in notice.text
        assert "Seguir itinerário mais extenso" in notice.text

    def test_deadlines_due_soon_and_missed_are_on_the_inbox(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Autos of Pinto Bandeira issued 27 and 32 days ago: their 30-day notification
        deadlines (art. 36, § 1º) are listed on the inbox, the missed one marked."""
        from db.enforcement import workflow
        from db.engine import session_scope

        now = dt.datetime.now(dt.UTC)
        autos = []
        for days in (27, 32):
            finding = longer_route_finding(
                vehicle_id=_vehicle("DL"), started_at=now - dt.timedelta(days=days + 1)
            )
            pid = store_and_propose(web_engine, [finding], municipality=PB)[finding["finding_id"]]
            with session_scope(web_engine) as session:
                done = workflow.confirm(
                    session,
                    pid,
                    agent_id="outro",
                    at=now - dt.timedelta(days=days),
                    exception_answer="O passageiro não autorizou o trajeto.",
                )
                autos.append(done.auto_number)
        inbox = agent.get("/fiscal").text
        rows = {
            number: row
            for row in re.findall(r"<tr>(.*?)</tr>", inbox, flags=re.DOTALL)
            for number in autos
            if number in row
        }
        assert set(rows) == set(autos)
        for row in rows.values():
            assert "Prazo de notificação (art. 36, § 1º); sob pena de arquivamento" in row
        assert "vencido" in rows[autos[1]] and "vencido" not in rows[autos[0]]


class TestDocuments:
    def test_the_auto_page_and_pdf_are_audited(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """The seeded proposal's auto (a draft): the page and the PDF show the plate; each
        delivery adds one audit entry (user, fields, route) before it leaves."""

        def reads() -> list[Any]:
            with web_engine.connect() as conn:
                return list(
                    conn.execute(
                        text(
                            "SELECT actor, details FROM audit_log WHERE action = "
                            "'read_personal_data' AND entity_id = :p ORDER BY entry_id"
                        ),
                        {"p": SEEDED_PROPOSAL_ID},
                    ).all()
                )

        before = len(reads())
        path = f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}/documentos/auto"
        page = agent.get(path)
        assert page.status_code == 200
        assert SEEDED_PLATE in page.text and "MINUTA" in page.text
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="evidence-map"' in page.text
        pdf = agent.get(path, params={"formato": "pdf"})
        assert pdf.status_code == 200
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf.headers["content-disposition"].startswith("attachment;")
        words = " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.content)).pages)
        assert SEEDED_PLATE in words and SEEDED_PROPOSAL_ID in words
        new = reads()[before:]
        assert [r.actor for r in new] == [f"user:{AGENT}"] * 2
        assert all(r.details["fields"] == ["plate", "holder_name"] for r in new)
        assert all(r.details["route"] == path for r in new)


class TestGenerate:
    def test_a_municipality_must_be_chosen(self, agent: httpx.Client, web_engine: Engine) -> None:
        """Generating without a municipality goes back to the finding with the pt-BR error on
        the field, and nothing is generated; with one, the finding's page lists its proposal."""
        from db.enforcement import workflow
        from db.engine import session_scope

        finding = tracking_gap_finding(vehicle_id=_vehicle("GE"), started_at=START)
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [finding])
        back = f"/fiscal/achados/{finding['finding_id']}"
        answer = _post(agent, "/fiscal/propostas/gerar", municipio="", volta=back)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"{back}?erro=municipio"
        page = agent.get(answer.headers["location"]).text
        assert "Escolha o município cujo regulamento deve ser aplicado." in page
        assert 'aria-invalid="true" aria-describedby="municipio-erro"' in page
        assert "Abrir a proposta" not in page
        done = _post(agent, "/fiscal/propostas/gerar", municipio="4314902", volta=back)
        assert done.headers["location"].startswith(f"{back}?geradas=")
        page = agent.get(done.headers["location"]).text
        assert re.search(r"\b(1 proposta nova gerada|[\d.]+ propostas novas geradas)\.", page)
        assert "Abrir a proposta P-" in page

    def test_from_a_finding_only_its_vehicle_is_proposed(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """An agent acting on one finding proposes it and its vehicle's other findings; another
        vehicle's finding stays without proposal, and the notice counts only the vehicle's;
        the finding's page draws the vehicle's stored track around it."""
        from api.proposal_queue import proposals_of_findings
        from db.enforcement import workflow
        from db.engine import session_scope

        own, other = _vehicle("OV"), _vehicle("OO")
        first = tracking_gap_finding(vehicle_id=own, started_at=START)
        second = tracking_gap_finding(vehicle_id=own, started_at=START + dt.timedelta(hours=3))
        elsewhere = tracking_gap_finding(vehicle_id=other, started_at=START)
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [first, second, elsewhere])
            for k in range(5):  # the vehicle's fixes during the silence's edges
                session.execute(
                    text(
                        "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, "
                        "source) VALUES (:v, :ts, -30.0277, :lon, "
                        "ST_Point(:lon, -30.0277, 4326), 'occupied', false, 'test-track')"
                    ),
                    {"v": own, "ts": START - dt.timedelta(minutes=k), "lon": -51.2287 - k / 1e3},
                )
        back = f"/fiscal/achados/{first['finding_id']}"
        page = agent.get(back).text
        assert f'name="achado" value="{first["finding_id"]}"' in page
        assert "Gerar propostas dos achados deste veículo" in page
        assert '"id":"track"' in html.unescape(page)  # the stored fixes: the recorded track
        done = _post(
            agent,
            "/fiscal/propostas/gerar",
            municipio="4314902",
            volta=back,
            achado=first["finding_id"],
        )
        page = agent.get(done.headers["location"]).text
        assert "1 proposta nova gerada." in page  # the vehicle's two silences of one day
        with session_scope(web_engine) as session:
            covered = proposals_of_findings(
                session=session,
                finding_ids=[first["finding_id"], second["finding_id"], elsewhere["finding_id"]],
            )
        assert set(covered) == {first["finding_id"], second["finding_id"]}

    def test_a_prefixo_of_another_municipality_is_left_out(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """A Porto Alegre prefixo's finding: its page proposes Porto Alegre's rulebook; chosen
        Pinto Bandeira's instead, no proposal rests on it, the notice counts it as of another
        municipality and the finding says why."""
        from sqlalchemy import text

        from db.enforcement import workflow
        from db.engine import session_scope

        vehicle = _vehicle("MU")
        finding = tracking_gap_finding(vehicle_id=vehicle, started_at=START)
        with session_scope(web_engine) as session:
            session.execute(
                text(
                    "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) "
                    "VALUES (:v, :v, '4314902')"
                ),
                {"v": vehicle},
            )
            workflow.insert_findings(session, [finding])
        back = f"/fiscal/achados/{finding['finding_id']}"
        page = agent.get(back).text
        assert '<option value="4314902" selected>' in page
        done = _post(agent, "/fiscal/propostas/gerar", municipio="4314548", volta=back)
        page = agent.get(done.headers["location"]).text
        assert "Abrir a proposta" not in page
        assert re.search(
            r"\b(1 achado de prefixo do cadastro de outro município não foi julgado"
            r"|[\d.]+ achados de prefixos do cadastro de outro município não foram julgados)"
            r" por este regulamento\.",
            page,
        )
        elsewhere = "é do cadastro de outro município (Porto Alegre/RS, 4314902)"
        assert f"o prefixo {vehicle} {elsewhere}" in page

    def test_a_finding_left_without_proposal_says_why(
        self, agent: httpx.Client, web_engine: Engine
    ) -> None:
        """Back on the page of a finding the rulebook does not propose, the agent reads why:
        two receivers under one prefix (POA: review only, art. 59 VI) or a confidence under the
        floor; a proposed finding shows its proposal instead."""
        from db.enforcement import workflow
        from db.engine import session_scope

        vehicle = _vehicle("WN")
        two = two_tracks_finding(vehicle_id=vehicle, started_at=START)
        later = START + dt.timedelta(hours=2)
        weak = tracking_gap_finding(vehicle_id=vehicle, started_at=later, confidence=0.3)
        proposed = tracking_gap_finding(
            vehicle_id=vehicle, started_at=later + dt.timedelta(hours=1)
        )
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [two, weak, proposed])
        said = {}
        for finding in (two, weak, proposed):
            back = f"/fiscal/achados/{finding['finding_id']}"
            done = _post(agent, "/fiscal/propostas/gerar", municipio="4314902", volta=back)
            assert "municipio=4314902" in done.headers["location"]
            page = html.unescape(agent.get(done.headers["location"]).text)
            found = re.search(r'id="sem-proposta">(.*?)</p>', page, flags=re.DOTALL)
            said[finding["kind"], finding["confidence"]] = found.group(1) if found else None
        two_said = said["gps_anomaly", two["confidence"]]
        assert two_said is not None and "dois rastreadores sob o mesmo prefixo" in two_said
        assert two_said.endswith("só com prova de intervenção (art. 59, VI)")
        assert said["tracking_gap", 0.3] is not None
        assert said["tracking_gap", 0.3].endswith("confiança 0,30 abaixo do piso 0,5 (art. 58, IX)")
        assert said["tracking_gap", 0.7] is None  # proposed: its page links the proposal
        page = agent.get(f"/fiscal/achados/{two['finding_id']}?municipio=4314902").text
        assert 'id="sem-proposta"' not in page  # only back from generating
        assert "<h1>Achado: Dois rastreadores no mesmo prefixo</h1>" in page
        assert "Salto de GPS impossível" not in page  # a two-tracks finding is not a jump

    def test_the_return_path_must_be_of_this_site(self, agent: httpx.Client) -> None:
        """A foreign ``volta`` is ignored: the queue is where the agent lands."""
        answer = _post(
            agent, "/fiscal/propostas/gerar", municipio="4314902", volta="https://evil.example/"
        )
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/fiscal/propostas?geradas=")
