"""The Fiscalização pages in Chromium and over HTTP: the live stream (no duplicates, replay
after a reconnection), the phone viewport, the map and its legend, and the screenshots.

Screenshots go to ``test-artifacts/``; with ``PONTUAL_UPDATE_SCREENSHOTS=1`` also to
``docs/screenshots/``.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, text
from web_fiscal import (
    SEEDED_FINDING_ID,
    SEEDED_PROPOSAL_ID,
    boarding_finding,
    store_alert,
    store_and_propose,
    two_tracks_finding,
)
from web_helpers import assert_accessible, horizontal_overflow_px, save_screenshot

from api.web.auth import SESSION_COOKIE

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
STREAM_WAIT_S = 20.0
"""How long a test waits for an event it expects on the stream."""


def _alert(engine: Engine, vehicle_id: str, *, minutes_ago: float) -> str:
    """Store a boarding finding and its alert (:func:`web_fiscal.store_alert`) and announce it
    with NOTIFY after the commit, like ``engines.live``: every open stream of the server gets
    it."""
    alert_id = store_alert(engine, vehicle_id, minutes_ago=minutes_ago)
    announce(engine, alert_id)
    return alert_id


def announce(engine: Engine, alert_id: str) -> None:
    """NOTIFY the alert again (as a throttled recurrence of it is announced)."""
    from engines.live import CHANNEL

    with engine.connect() as conn:
        conn.execute(text("SELECT pg_notify(:c, :a)"), {"c": CHANNEL, "a": alert_id})
        conn.commit()


class Stream:
    """Reads the console's alert stream in a thread: ``events`` gets (event, id, data)."""

    def __init__(self, client: httpx.Client, url: str, headers: dict[str, str]) -> None:
        self.events: queue.Queue[tuple[str, str | None, dict[str, Any]]] = queue.Queue()
        self.opened = threading.Event()
        self.seen: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._response: httpx.Response | None = None
        self._args = (client, url, headers)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client, url, headers = self._args
        try:
            with client.stream(
                "GET",
                url,
                headers={"Accept": "text/event-stream", **headers},
                timeout=httpx.Timeout(10, read=60),
            ) as response:
                self._response = response
                self._read(response)
        except (httpx.HTTPError, OSError):
            if not self._stop.is_set():
                raise

    def _read(self, response: httpx.Response) -> None:
        event, ident, data = "message", None, ""
        for line in response.iter_lines():
            self.opened.set()
            if self._stop.is_set():
                return
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("id: "):
                ident = line[4:]
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                self.events.put((event, ident, json.loads(data)))
                if event == "closed":
                    return
                event, ident, data = "message", None, ""

    def __enter__(self) -> Stream:
        self._thread.start()
        assert self.opened.wait(STREAM_WAIT_S), "the stream did not open"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._response is not None:
            self._response.close()
        self._thread.join(timeout=5)

    def ids_of(self, vehicle_id: str, *, until: str, timeout_s: float = STREAM_WAIT_S) -> list:
        """Alert ids of ``vehicle_id`` received until the alert ``until`` arrives."""
        out = []
        while True:
            event, ident, data = self.events.get(timeout=timeout_s)
            if event == "alert" and data.get("vehicle_id") == vehicle_id:
                out.append(ident)
                self.seen[str(ident)] = data
                if ident == until:
                    return out


@pytest.fixture
def agent_http(web_client: Callable[..., httpx.Client]) -> Iterator[httpx.Client]:
    """A logged-in agent's httpx client (its own session)."""
    yield web_client("agent")


class TestLiveStream:
    def test_an_alert_is_sent_once_with_its_view(
        self, agent_http: httpx.Client, web_engine: Engine
    ) -> None:
        """An alert announced while the stream is open arrives as ``event: alert`` with ``id:``
        its alert id and the inbox's view (pt-BR kind, link to the finding); announced again
        (a recurrence), it is not sent again."""
        vehicle = f"ST{secrets.token_hex(3).upper()}"
        with Stream(agent_http, "/fiscal/alertas", {}) as stream:
            first = _alert(web_engine, vehicle, minutes_ago=3)
            announce(web_engine, first)
            second = _alert(web_engine, vehicle, minutes_ago=2)
            assert stream.ids_of(vehicle, until=second) == [first, second]
        view = stream.seen[first]
        with web_engine.connect() as conn:
            finding = conn.execute(
                text("SELECT finding_id FROM alerts WHERE alert_id = :a"), {"a": first}
            ).scalar_one()
        assert view["kind_label"] == "Embarque em ponto sem licença"
        assert view["href"] == f"/fiscal/achados/{finding}"
        assert (view["vehicle_id"], view["stand_id"]) == (vehicle, "S1")

    def test_an_alert_of_two_receivers_is_named_so(self) -> None:
        """The inbox names a two-tracks alert by its pattern, not as an impossible jump."""
        from zoneinfo import ZoneInfo

        from api.web.agent import alert_view
        from engines.live import alert_payload

        finding = two_tracks_finding(
            vehicle_id="ST2T", started_at=dt.datetime(2026, 11, 21, 13, tzinfo=dt.UTC)
        )
        payload = json.loads(json.dumps(alert_payload(finding, alert_id="alert-2t")))
        view = alert_view(payload, ZoneInfo("America/Sao_Paulo"))
        assert view["kind_label"] == "Dois rastreadores no mesmo prefixo"

    def test_a_queue_jumps_fixes_in_time_order_with_the_vehicle_passed_said(self) -> None:
        """A queue jump lists the accused's fixes, then the passed vehicle's: the table reads
        them in time order, numbered so, and says which prefixo was ahead."""
        from zoneinfo import ZoneInfo

        from api.web.agent import fix_rows

        def fix(t: str) -> dict[str, object]:
            return {"timestamp": f"2026-12-01T12:{t}Z", "lat": -30.0, "lon": -51.0, "row": 1}

        theirs = fix("05:00")
        details = {
            "fixes": [fix("00:00"), fix("10:00"), theirs],
            "ahead": [{"vehicle_id": "B2", "fix_at_our_boarding": theirs}],
        }
        rows = fix_rows(details, ZoneInfo("America/Sao_Paulo"), vehicle_id="A1")
        assert [(r["n"], r["time"][-8:], r["vehicle"]) for r in rows] == [
            (1, "09:00:00", "A1"),
            (2, "09:05:00", "B2 (à frente na fila)"),
            (3, "09:10:00", "A1"),
        ]

    def test_a_place_alert_names_its_vehicles_and_its_span(self) -> None:
        """An illegal stand's alert (no vehicle of its own) names the vehicles of its evidence,
        and every alert shows its finding's start and end, not the end alone."""
        from zoneinfo import ZoneInfo

        from api.web.agent import alert_view

        place = {
            "alert_id": "alert-p", "finding_id": "p", "kind": "illegal_stand_formation",
            "vehicle_id": None, "stand_id": None, "confidence": 0.6,
            "started_at": "2026-12-01T12:00:00Z", "ended_at": "2026-12-03T14:30:00Z",
            "details": {"vehicles": ["A1", "B2", "C3", "D4", "E5", "F6"]},
        }  # fmt: skip
        zone = ZoneInfo("America/Sao_Paulo")
        view = alert_view(place, zone)
        assert view["who"] == "Veículos A1, B2, C3, D4 e mais 2"
        assert view["when"] == "01/12/2026 09:00:00 a 03/12/2026 11:30:00"
        one = {**place, "vehicle_id": "V9", "ended_at": "2026-12-01T12:05:00Z", "details": {}}
        assert (alert_view(one, zone)["who"], alert_view(one, zone)["when"]) == (
            "Veículo V9",
            "01/12/2026 09:00:00 a 09:05:00",
        )
        assert alert_view(one, zone)["unsettled"] is None
        assert alert_view({**one, "details": {"provisional": True}}, zone)["unsettled"] == (
            "provisório"
        )
        assert alert_view({**one, "details": {"withdrawn": True}}, zone)["unsettled"] == "retirado"

    def test_reconnection_replays_the_alerts_after_last_event_id_once(
        self, agent_http: httpx.Client, web_engine: Engine
    ) -> None:
        """A browser reconnecting with ``Last-Event-ID: A`` gets the alerts stored after A,
        each once, and not A itself."""
        vehicle = f"RC{secrets.token_hex(3).upper()}"
        first = _alert(web_engine, vehicle, minutes_ago=9)
        missed = [_alert(web_engine, vehicle, minutes_ago=m) for m in (8, 7)]
        with Stream(agent_http, "/fiscal/alertas", {"Last-Event-ID": first}) as stream:
            assert stream.ids_of(vehicle, until=missed[-1]) == missed

    def test_desde_replays_from_the_inbox_rendering(
        self, agent_http: httpx.Client, web_engine: Engine
    ) -> None:
        """The inbox's stream URL (``?desde=`` the newest alert listed) replays what came
        after the page was rendered: not the listed one, nor the alerts stored with it in one
        batch (one ``created_at``) that the inbox had no room for. Before, a batch of 29 alerts
        came back on every load as 9 "Novo", decided ones too."""
        vehicle = f"DS{secrets.token_hex(3).upper()}"
        listed = _alert(web_engine, vehicle, minutes_ago=6)
        with web_engine.begin() as conn:  # 24 more alerts of the same batch (one transaction)
            conn.execute(
                text(
                    "INSERT INTO alerts (alert_id, finding_id, kind, vehicle_id, stand_id, "
                    "throttle_key, payload, event_at, created_at) "
                    "SELECT a.alert_id || '-' || g, finding_id, kind, vehicle_id, stand_id, "
                    "throttle_key || '-' || g, "
                    "jsonb_set(payload, '{alert_id}', to_jsonb(a.alert_id || '-' || g)), "
                    "event_at, created_at FROM alerts a, generate_series(1, 24) g "
                    "WHERE a.alert_id = :a"
                ),
                {"a": listed},
            )
        inbox = agent_http.get("/fiscal").text
        url = inbox.split('data-stream="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
        later = _alert(web_engine, vehicle, minutes_ago=5)
        with Stream(agent_http, url, {}) as stream:
            assert stream.ids_of(vehicle, until=later) == [later]

    def test_logout_closes_the_stream(
        self, web_client: Callable[..., httpx.Client], make_user: Callable[..., str]
    ) -> None:
        """The console's stream ends with ``event: closed`` when its session logs out."""
        from api.web.auth import csrf_token_for

        client = web_client(make_user("agent"))
        token = client.cookies.get(SESSION_COOKIE)
        with Stream(client, "/fiscal/alertas", {}) as stream:
            out = client.post("/sair", data={"csrf_token": csrf_token_for(token or "")})
            assert out.status_code == 303
            while True:
                event, _, data = stream.events.get(timeout=STREAM_WAIT_S + 20)
                if event == "closed":
                    break
        assert "sessão encerrada" in data["reason"]

    def test_without_event_stream_accept_it_is_the_alerts_page(
        self, agent_http: httpx.Client
    ) -> None:
        """The same address asked by a browser for HTML is the paged list of alerts."""
        response = agent_http.get("/fiscal/alertas", headers={"Accept": "text/html"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "<h1>Alertas</h1>" in response.text


class TestInboxInChromium:
    def test_a_listed_alert_is_not_added_again_by_the_replay(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """The newest alert is listed by the server and replayed by the stream (``desde``):
        the page shows it once; one announced later is added once, on top, marked new."""
        vehicle = f"BR{secrets.token_hex(3).upper()}"
        listed = _alert(web_engine, vehicle, minutes_ago=4)
        login(page, "agent")
        expect(page.locator("#alertas")).to_have_attribute("data-live", "on", timeout=15_000)
        later = _alert(web_engine, vehicle, minutes_ago=2)
        fresh = page.locator(f'[data-alert-id="{later}"]')
        expect(fresh).to_have_count(1, timeout=STREAM_WAIT_S * 1000)
        expect(fresh).to_have_class("alert alert--new")
        assert page.locator(f'[data-alert-id="{listed}"]').count() == 1
        assert page.locator("#alertas > li").first.get_attribute("data-alert-id") == later
        assert_accessible(page)

    def test_sound_is_off_until_turned_on(self, page: Any, login: Callable) -> None:
        """The sound checkbox appears with JavaScript, unchecked; turned on, it is kept."""
        login(page, "agent")
        box = page.get_by_label("Tocar um som a cada alerta novo")
        expect(box).to_be_visible()
        expect(box).not_to_be_checked()
        box.check()
        page.reload()
        expect(page.get_by_label("Tocar um som a cada alerta novo")).to_be_checked()

    def test_inbox_without_javascript_is_a_plain_list(
        self, open_page: Callable, login: Callable, web_engine: Engine
    ) -> None:
        """With JavaScript off the inbox lists the alerts with their links, and no sound
        control (it would do nothing)."""
        vehicle = f"NJ{secrets.token_hex(3).upper()}"
        alert_id = _alert(web_engine, vehicle, minutes_ago=1)
        plain = open_page(java_script_enabled=False)
        login(plain, "agent")
        item = plain.locator(f'[data-alert-id="{alert_id}"]')
        expect(item).to_contain_text("Embarque em ponto sem licença")
        expect(item.get_by_role("link", name="Ver a evidência e gerar a proposta")).to_be_visible()
        expect(plain.get_by_label("Tocar um som a cada alerta novo")).to_be_hidden()


class TestEvidencePages:
    def test_proposal_page_draws_the_evidence_with_a_legend(
        self, page: Any, login: Callable
    ) -> None:
        """The seeded detour: the map draws the stand-free evidence (the driven, matched,
        reference and fastest lines, the numbered fixes) and the legend names each; the fixes'
        table gives their local times; the measures and thresholds are in pt-BR."""
        login(page, "agent")
        page.goto(f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}")
        legend = page.get_by_role("list", name="Legenda do mapa")
        for label in (
            "Trajeto da corrida (GPS)",
            "Trajeto ajustado à malha viária",
            "Rota de referência (mais curta)",
            "Rota mais rápida",
            "Posições da constatação (numeradas, com hora)",
        ):
            expect(legend).to_contain_text(label)
        expect(page.locator("#mapa path.leaflet-interactive")).to_have_count(4 + 7)
        fixes = page.locator("details.fixes table tbody tr")
        expect(fixes).to_have_count(7)
        expect(fixes.first).to_contain_text("20/11/2026 14:00:00")  # 17:00 UTC in Porto Alegre
        evidence = page.locator(".evidence").first
        expect(evidence).to_contain_text("razão percorrida/referência: 2,452")
        expect(evidence).to_contain_text("razão mínima: 1,3")
        expect(page.locator(".excerpt")).to_contain_text("seguir itinerário mais extenso")
        history = page.locator("#historico-titulo").locator("..").locator("tbody tr").first
        expect(history).to_contain_text("criação")  # the step in pt-BR, not its code
        expect(history).not_to_contain_text("create")

    def test_a_stand_finding_is_framed_at_the_stand(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """A boarding at S1 whose recorded track runs 4 km away: the map opens on the stand
        and its numbered fixes (the stand drawn wide), not on the whole track (a dot)."""
        vehicle = f"WEBZ{secrets.token_hex(2).upper()}"
        started = dt.datetime(2026, 11, 22, 13, 0, tzinfo=dt.UTC)
        with web_engine.begin() as conn:
            for k in range(21):  # from the stand eastwards, every 30 s
                lon, lat = -51.2287 + 0.002 * k, -30.0277
                conn.execute(
                    text(
                        "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, "
                        "source) VALUES (:v, :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), "
                        "'free', false, 'test-zoom')"
                    ),
                    {"v": vehicle, "ts": started + dt.timedelta(seconds=30 * k), "lat": lat,
                     "lon": lon},
                )  # fmt: skip
        finding = boarding_finding(vehicle_id=vehicle, stand_id="S1", started_at=started)
        proposal = store_and_propose(web_engine, [finding])[finding["finding_id"]]
        login(page, "agent")
        page.goto(f"/fiscal/propostas/{proposal}")
        stand = page.locator("#mapa path.leaflet-interactive").first
        expect(stand).to_be_attached()
        box = stand.bounding_box()
        assert box is not None and box["width"] > 60  # about 80 m wide: zoomed in
        expect(page.locator("#mapa .shape-ring")).to_have_count(0)  # drawn wide enough

    def test_a_stand_far_from_the_fixes_stays_marked(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """A Táxi Acessível's wait at S1 whose fixes reach 8 km away: the view holds them all,
        the stand a few pixels across, so a ring of fixed size marks it; the finding is named
        as a wait, not as a boarding."""
        vehicle = f"WEBR{secrets.token_hex(2).upper()}"
        started = dt.datetime(2026, 11, 23, 13, 0, tzinfo=dt.UTC)
        finding = boarding_finding(
            vehicle_id=vehicle, stand_id="S1", started_at=started, subtype="accessible_wait"
        )
        far = dict(finding["details"]["fixes"][-1])
        far["lon"] += 0.08  # about 8 km east
        finding["details"]["fixes"].append(far)
        store_and_propose(web_engine, [finding])
        login(page, "agent")
        page.goto(f"/fiscal/achados/{finding['finding_id']}")
        name = "Achado: Espera de táxi acessível em ponto sem licença"
        expect(page.get_by_role("heading", level=1)).to_have_text(name)
        ring = page.locator("#mapa .shape-ring")
        expect(ring).to_have_count(1)
        box = ring.bounding_box()
        assert box is not None and box["width"] >= 14
        save_screenshot(page, "web-fiscal-ponto-distante.png")

    def test_finding_page_lists_its_proposal(self, page: Any, login: Callable) -> None:
        """The seeded finding's page links to the proposal resting on it."""
        login(page, "agent")
        page.goto(f"/fiscal/achados/{SEEDED_FINDING_ID}")
        link = page.get_by_role("link", name=f"Abrir a proposta {SEEDED_PROPOSAL_ID}")
        expect(link).to_have_attribute("href", f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}")

    def test_generating_from_a_finding_says_why_it_stays_without_proposal(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """An agent on a finding of two receivers under one prefix chooses Porto Alegre and
        generates: the page says it stays for review and why (art. 59 VI only with an
        inspection's proof), and does not offer the same generation again (the reloaded
        finding does); the map shows both tracks; the page passes axe."""
        from db.enforcement import workflow
        from db.engine import session_scope

        started = dt.datetime(2026, 11, 21, 13, 0, tzinfo=dt.UTC)
        finding = two_tracks_finding(vehicle_id="WEBF2T", started_at=started)
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [finding])
        login(page, "agent")
        page.goto(f"/fiscal/achados/{finding['finding_id']}")
        heading = "Achado: Dois rastreadores no mesmo prefixo"
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        page.get_by_label("Município (regulamento)").select_option("4314902")
        page.get_by_role("button", name="Gerar propostas").click()
        why = page.locator("#sem-proposta")
        expect(why).to_contain_text("Sem proposta pelo regulamento de Porto Alegre:")
        expect(why).to_contain_text("dois rastreadores sob o mesmo prefixo")
        expect(why).to_contain_text("(art. 59, VI)")
        expect(page.get_by_role("status").first).to_contain_text("para revisão")
        expect(page.locator("#mapa .leaflet-interactive").first).to_be_attached()
        assert_accessible(page)
        save_screenshot(page, "web-fiscal-achado-sem-proposta.png")
        # generating again would say the same: not offered, only after reloading the finding
        expect(page.get_by_role("button", name="Gerar propostas")).to_have_count(0)
        page.get_by_role("link", name="recarregue o achado").click()
        expect(page.get_by_label("Município (regulamento)")).to_have_value("4314902")

    def test_a_finding_announced_before_its_day_closed_says_so(
        self, agent_http: httpx.Client, web_engine: Engine
    ) -> None:
        """A live finding marked provisional (its day goes on) says the day is in progress."""
        from db.enforcement import workflow
        from db.engine import session_scope

        started = dt.datetime(2026, 11, 22, 13, 0, tzinfo=dt.UTC)
        finding = two_tracks_finding(vehicle_id="WEBPRV", started_at=started)
        finding = {**finding, "details": {**finding["details"], "provisional": True}}
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [finding])
        page = agent_http.get(f"/fiscal/achados/{finding['finding_id']}").text
        assert "Achado provisório:" in page and "não gera proposta" in page
        assert "Gerar propostas" not in page  # nothing to generate from it

    def test_unknown_records_are_pt_br_404_pages(self, agent_http: httpx.Client) -> None:
        """An unknown proposal, finding or document: a 404 page in pt-BR."""
        for path, words in (
            ("/fiscal/propostas/P-nao-existe", "Proposta não encontrada"),
            ("/fiscal/achados/nada-0", "Achado não encontrado"),
            (f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}/documentos/multa", "Documento"),
            ("/fiscal/propostas/P-nao-existe/documentos/auto", "Proposta não encontrada"),
        ):
            response = agent_http.get(path)
            assert response.status_code == 404, path
            assert words in response.text, path


class TestAlertsPage:
    def test_the_agent_filters_the_alerts_by_vehicle_and_kind(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """The agent types a vehicle (or part of it, any case) and filters: only its alerts are
        listed, the filter kept in the form (a page past the end shows the last); a kind it has
        none of lists none; a kind that does not exist is refused on the field (422) while the
        other filters apply."""
        mine, other = (f"FA{secrets.token_hex(3).upper()}" for _ in range(2))
        kept = [_alert(web_engine, mine, minutes_ago=m) for m in (6, 5)]
        _alert(web_engine, other, minutes_ago=4)
        login(page, "agent")
        page.goto("/fiscal/alertas")
        page.get_by_label("Veículo (prefixo)").fill(mine)
        page.get_by_role("button", name="Filtrar").click()
        expect(page.locator("#alertas-resumo")).to_have_text("2 alertas com estes filtros.")
        listed = page.locator(".alerts > li").evaluate_all(
            "items => items.map(i => i.dataset.alertId)"
        )
        assert listed == kept[::-1]
        expect(page.get_by_label("Veículo (prefixo)")).to_have_value(mine)
        assert_accessible(page)
        page.get_by_label("Veículo (prefixo)").fill(mine[2:].lower())  # part of it, any case
        page.get_by_role("button", name="Filtrar").click()
        expect(page.locator("#alertas-resumo")).to_have_text("2 alertas com estes filtros.")
        page.goto("/fiscal/alertas?veiculo=%25")  # '%' is a character, not a wildcard
        expect(page.locator("#alertas-resumo")).to_have_text("Nenhum alerta com estes filtros.")
        page.goto(f"/fiscal/alertas?veiculo={mine}&pagina=9")  # past the end: the last page
        expect(page.locator(".alerts > li")).to_have_count(2)
        expect(page.get_by_text("Página 1 de 1")).to_be_visible()
        kind = page.get_by_label("Tipo de achado")
        expect(kind.locator('option[value="gps_anomaly"]')).to_have_text(
            "Salto de GPS impossível (também: Dois rastreadores no mesmo prefixo)"
        )  # what choosing it lists
        kind.select_option("gps_anomaly")
        page.get_by_role("button", name="Filtrar").click()
        expect(page.locator("#alertas-resumo")).to_have_text("Nenhum alerta com estes filtros.")
        response = page.goto(f"/fiscal/alertas?tipo=speeding&veiculo={mine}")
        assert response is not None and response.status == 422
        expect(page.get_by_label("Tipo de achado")).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#tipo-erro")).to_contain_text("Tipo 'speeding' desconhecido")
        expect(page.locator("#alertas-resumo")).to_have_text("2 alertas com estes filtros.")
        assert_accessible(page)


PHONE_PAGES = (
    "/fiscal",
    "/fiscal/alertas",
    "/fiscal/propostas?situacao=",
    f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}",
    f"/fiscal/achados/{SEEDED_FINDING_ID}",
    f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}/documentos/auto",
)


@pytest.mark.parametrize("path", PHONE_PAGES)
def test_pages_fit_a_phone(open_page: Callable, login: Callable, path: str) -> None:
    """At 390×844 every Fiscalização page has no sideways scroll and passes axe."""
    phone = open_page(width=390, height=844, is_mobile=True, has_touch=True)
    login(phone, "agent")
    phone.goto(path)
    assert horizontal_overflow_px(phone) == 0
    assert phone.locator("h1").count() == 1
    assert_accessible(phone)


def _queue_seed(engine: Engine) -> None:
    """A few proposals at the seeded stand, so the queue's screenshot has rows to show."""
    base = dt.datetime(2026, 11, 18, 12, 0, tzinfo=dt.UTC)
    store_and_propose(
        engine,
        [
            boarding_finding(
                vehicle_id=f"SC{n:02d}",
                stand_id="S1",
                started_at=base + dt.timedelta(hours=5 * n),
                confidence=0.6 + 0.05 * n,
            )
            for n in range(6)
        ],
    )


SHOTS = (
    ("web-fiscal-inbox.png", "/fiscal", (1280, 900)),
    ("web-fiscal-alertas.png", "/fiscal/alertas", (1280, 900)),
    ("web-fiscal-fila.png", "/fiscal/propostas", (1280, 900)),
    ("web-fiscal-proposta.png", f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}", (1280, 900)),
    ("web-fiscal-proposta-phone.png", f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}", (390, 844)),
    ("web-fiscal-achado.png", f"/fiscal/achados/{SEEDED_FINDING_ID}", (1280, 900)),
    (
        "web-fiscal-auto.png",
        f"/fiscal/propostas/{SEEDED_PROPOSAL_ID}/documentos/auto",
        (1280, 900),
    ),
)


@pytest.mark.parametrize(("name", "path", "size"), SHOTS, ids=[s[0] for s in SHOTS])
def test_screenshots(
    open_page: Callable,
    login: Callable,
    web_engine: Engine,
    name: str,
    path: str,
    size: tuple[int, int],
) -> None:
    """Screenshots of each Fiscalização page are written (desktop, and the proposal on a phone)."""
    if name == "web-fiscal-fila.png":
        _queue_seed(web_engine)
    shot = open_page(width=size[0], height=size[1])
    login(shot, "agent")
    shot.goto(path)
    if shot.locator("#mapa").count():
        expect(shot.locator("#mapa .leaflet-interactive").first).to_be_attached()
    save_screenshot(shot, name)


# --- the forms' limits, the 422 page's way back, a field sent twice -----------------------------


def _fresh_proposal(engine: Engine) -> str:
    """A proposal to review of a vehicle of its own (a tracking gap)."""
    from web_fiscal import tracking_gap_finding

    finding = tracking_gap_finding(
        vehicle_id=f"LIM{secrets.token_hex(3).upper()}",
        started_at=dt.datetime(2026, 9, 3, 15, tzinfo=dt.UTC),
    )
    return store_and_propose(engine, [finding])[finding["finding_id"]]


def _status_and_audit(engine: Engine, proposal_id: str) -> tuple[Any, ...]:
    with engine.connect() as conn:
        status = conn.execute(
            text("SELECT status, dismissed_reason FROM proposals WHERE proposal_id = :p"),
            {"p": proposal_id},
        ).one()
        audit = conn.execute(text("SELECT count(*) FROM audit_log")).scalar_one()
    return (*status, audit)


class TestFormLimits:
    def test_text_fields_carry_their_maxlength(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """The exception's answer and the dismissal's reason stop at 2,000 characters as typed
        (the browser keeps 2,000 of 2,500); the queue's text filters at 64."""
        proposal = _fresh_proposal(web_engine)
        login(page, "agent")
        page.goto(f"/fiscal/propostas/{proposal}")
        reason = page.locator("#motivo")
        expect(reason).to_have_attribute("maxlength", "2000")
        reason.fill("a" * 2500)
        assert len(reason.input_value()) == 2000
        page.goto("/fiscal/propostas")
        expect(page.get_by_label("Veículo (prefixo)")).to_have_attribute("maxlength", "64")
        expect(page.get_by_label("Ponto (código)")).to_have_attribute("maxlength", "64")

    def test_over_long_reason_is_the_page_with_the_way_back(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """In Chromium, a 5,000-character reason (maxlength removed) is the pt-BR 422 page
        naming 'Motivo' and its limit, with a link back to the proposal and none to the login;
        nothing stored. The link goes back to the form."""
        proposal = _fresh_proposal(web_engine)
        login(page, "agent")
        page.goto(f"/fiscal/propostas/{proposal}")
        page.eval_on_selector("#motivo", "e => e.removeAttribute('maxlength')")
        page.locator("#motivo").fill("a" * 5000)
        before = _status_and_audit(web_engine, proposal)
        page.on("dialog", lambda dialog: dialog.accept())  # "Descartar a proposta …?"
        with page.expect_navigation():
            page.get_by_role("button", name="Descartar", exact=True).click()
        assert page.title().startswith("Dados não aceitos")
        body = page.locator("main").inner_text()
        assert "Motivo: no máximo 2000 caracteres (foram enviados 5.000)." in body
        expect(page.get_by_role("link", name="Ir para a página de entrada")).to_have_count(0)
        nav = page.get_by_role("navigation", name="Navegação principal")
        expect(nav.get_by_role("link", name="Fiscalização")).to_be_visible()  # the console's menu
        expect(page.get_by_role("button", name="Sair")).to_be_visible()
        assert_accessible(page)
        assert _status_and_audit(web_engine, proposal) == before
        page.get_by_role("link", name="Voltar e corrigir").click()
        page.wait_for_url(f"**/fiscal/propostas/{proposal}")
        expect(page.locator("#motivo")).to_be_visible()

    def test_two_reasons_in_one_form_are_refused(
        self, page: Any, login: Callable, web_engine: Engine
    ) -> None:
        """A dismissal form given a second ``motivo`` field (as a tampered page would send):
        the 422 page naming 'Motivo', sent twice; the proposal still to review."""
        proposal = _fresh_proposal(web_engine)
        login(page, "agent")
        page.goto(f"/fiscal/propostas/{proposal}")
        page.locator("#motivo").fill("Motivo visível, longo o bastante.")
        page.eval_on_selector(
            "#descartar form",
            """form => {
                const extra = document.createElement('input');
                extra.type = 'hidden';
                extra.name = 'motivo';
                extra.value = 'Outro motivo, escondido no formulário.';
                form.appendChild(extra);
            }""",
        )
        before = _status_and_audit(web_engine, proposal)
        page.on("dialog", lambda dialog: dialog.accept())
        with page.expect_navigation():
            page.get_by_role("button", name="Descartar", exact=True).click()
        assert page.title().startswith("Dados não aceitos")
        body = page.locator("main").inner_text()
        assert "Motivo: enviado 2 vezes; este campo aceita um só valor." in body
        expect(page.get_by_role("link", name="Voltar à sua página inicial")).to_have_attribute(
            "href", "/fiscal"
        )
        assert _status_and_audit(web_engine, proposal) == before
        assert before[0] == "proposta"
