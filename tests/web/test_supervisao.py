"""Meus pontos (``/supervisao``) against a real ``pontual serve``: the queue changing live when a
taxi's device posts fixes, the 90-day supervisor status, the licensees' presence against the
habitual-absence rule, the audited contact list, and nothing of another supervisor's stand.

The module seeds its own stands (SV1 of its supervisor, SV2 of nobody here) far from S1, and
SV3, whose data is all of one past day (15/03/2024, as the demo's): the page of today says so
and links to that day; the intruders and the presence filtered by prefixo.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from api_factories import DEVICE_SINCE
from playwright.sync_api import expect
from sqlalchemy import Engine, text
from web_helpers import (
    WEB_PASSWORD,
    assert_accessible,
    horizontal_overflow_px,
    http_login,
    save_screenshot,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
TZ = ZoneInfo("America/Sao_Paulo")
SV1 = (-30.0500, -51.2000)  # centre of stand SV1 (lat, lon)
SV2 = (-30.0600, -51.2100)
ELSEWHERE = (-30.0900, -51.1500)
LICENSED = "SV-LIC"
HOLDER = "Joana Prefixo Teste"
OTHER_HOLDER = "Pessoa Alheia Teste"


def _square(lat: float, lon: float) -> Any:
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    return from_shape(MultiPolygon([Point(lon, lat).buffer(0.0004, cap_style="square")]), srid=4326)


def _insert_fixes(conn: Any, vehicle: str, at: tuple[float, float], times: list) -> None:
    for ts in times:
        conn.execute(
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, source) "
                "VALUES (:v, :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), 'free', false, 'test') "
                "ON CONFLICT DO NOTHING"
            ),
            {"v": vehicle, "ts": ts, "lat": at[0], "lon": at[1]},
        )


@pytest.fixture(scope="module")
def stands(web_engine: Engine) -> dict[str, str]:
    """SV1 (fixo, 2 spaces; its supervisor's term ended 100 days ago; SV-LIC licensed, present
    2 of the 12 days it operated) and SV2 (another stand, with its own licensee).

    Returns the usernames: ``supervisor`` (of SV1 only).
    """
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import PermitHolder, Vehicle
    from db.stands.models import ParkingLicence, Stand, StandSupervisor

    today = dt.datetime.now(TZ).date()
    username = f"sv_{os.getpid()}_{secrets.token_hex(2)}"
    with session_scope(web_engine) as session:
        session.add_all(
            [
                Stand(
                    stand_id="SV1", name="Ponto Supervisão Web", capacity=2, kind="fixo",
                    address="Rua do Teste, 1", geometry=_square(*SV1),
                ),
                Stand(
                    stand_id="SV2", name="Ponto Alheio", capacity=4, kind="fixo",
                    geometry=_square(*SV2),
                ),
            ]
        )  # fmt: skip
        mine = PermitHolder(name=HOLDER, cpf="98765432100", phone="51 98888-1111")
        other = PermitHolder(name=OTHER_HOLDER, cpf="98765432101", phone="51 97777-2222")
        session.add_all([mine, other])
        session.flush()
        session.add_all(
            [
                Vehicle(vehicle_id=LICENSED, prefixo=LICENSED, holder_id=mine.holder_id),
                Vehicle(vehicle_id="SV-OTHER", prefixo="SV-OTHER", holder_id=other.holder_id),
            ]
        )
        session.flush()
        session.add_all(
            [
                ParkingLicence(vehicle_id=LICENSED, stand_id="SV1"),
                ParkingLicence(vehicle_id="SV-OTHER", stand_id="SV2"),
                StandSupervisor(
                    stand_id="SV1", person_name="Carlos Supervisor Teste",
                    elected_on=today - dt.timedelta(days=400),
                    homologated_on=today - dt.timedelta(days=390),
                    until=today - dt.timedelta(days=100),
                ),
            ]
        )  # fmt: skip
        conn = session.connection()
        for back in range(1, 13):  # 12 operating days; at the stand on the first two
            noon = dt.datetime.combine(today - dt.timedelta(days=back), dt.time(12), tzinfo=TZ)
            where = SV1 if back <= 2 else ELSEWHERE
            _insert_fixes(conn, LICENSED, where, [noon + dt.timedelta(minutes=m) for m in range(6)])
        accounts.create_user(
            session=session,
            username=username,
            password=WEB_PASSWORD,
            role="supervisor",
            stand_ids=["SV1"],
        )
    return {"supervisor": username}


@pytest.fixture
def supervisor(web_server: Any, stands: dict[str, str]) -> Iterator[httpx.Client]:
    """An httpx client logged in as SV1's supervisor."""
    client = http_login(web_server.url, stands["supervisor"])
    yield client
    client.close()


def _device(web_engine: Engine, vehicle_id: str) -> str:
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    with session_scope(web_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))
        session.flush()
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    return token


def _post_fixes(url: str, token: str, at: tuple[float, float], ages_s: tuple[int, ...]) -> None:
    now = dt.datetime.now(dt.UTC)
    pings = [
        {
            "timestamp": (now - dt.timedelta(seconds=s)).isoformat(),
            "lat": at[0],
            "lon": at[1],
            "meter": "free",
        }
        for s in ages_s
    ]
    answer = httpx.post(
        f"{url}/api/v1/pings",
        json={"pings": pings},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert [r["status"] for r in answer.json()["results"]] == ["accepted"] * len(pings)


class TestLiveQueue:
    def test_queue_changes_when_a_taxi_arrives(
        self, open_page: Callable, login: Callable, web_server: Any, web_engine: Engine,
        stands: dict[str, str],
    ) -> None:  # fmt: skip
        """On a phone, the stand's page shows a taxi whose device posts fixes inside the stand,
        as an intruder, without reloading; the live region reads the new summary."""
        vehicle = f"SV-T{secrets.token_hex(2).upper()}"
        token = _device(web_engine, vehicle)
        phone = open_page(width=390, height=844, is_mobile=True, has_touch=True)
        login(phone, stands["supervisor"])
        phone.goto("/supervisao/pontos/SV1")
        assert phone.locator(".now__empty").inner_text() == "Nenhum veículo no ponto agora."
        phone.evaluate("window.__samePage = 'yes'")

        _post_fixes(web_server.url, token, SV1, (40, 20, 1))
        item = phone.locator(".queue__item", has_text=f"prefixo {vehicle}")
        item.wait_for(state="visible", timeout=30_000)
        assert phone.evaluate("window.__samePage") == "yes"  # no reload
        assert "1º" in item.inner_text()
        assert "Intruso: sem licença" in item.inner_text()
        assert "desde " in item.inner_text()
        summary = "1 veículo no ponto para 2 vagas; 1 intruso (sem licença)."
        assert phone.locator(".now__summary").inner_text() == summary
        expect(phone.locator("#agora-anuncio")).to_have_text(summary, timeout=10_000)
        assert horizontal_overflow_px(phone) == 0
        assert_accessible(phone)
        save_screenshot(phone, "web-supervisao-ponto-phone.png")

    def test_an_intruder_still_in_the_stand_has_no_departure(
        self, supervisor: httpx.Client, web_server: Any, web_engine: Engine
    ) -> None:
        """An unlicensed taxi in SV1 for four minutes up to now: the day's intruders list its
        visit as going on ("ainda no ponto"), not with its last fix as the departure."""
        vehicle = f"SV-I{secrets.token_hex(2).upper()}"
        _post_fixes(web_server.url, _device(web_engine, vehicle), SV1, (240, 180, 120, 60, 1))
        page = html.unescape(supervisor.get("/supervisao/pontos/SV1").text)
        row = page[page.index(f">{vehicle}</th>") :].split("</tr>")[0]
        assert 'data-label="Saída (horário de Brasília)">ainda no ponto</td>' in row

    def test_unplaced_licence_is_no_intruder(
        self, supervisor: httpx.Client, web_server: Any, web_engine: Engine
    ) -> None:
        """A taxi whose fleet import named a stand the registry could not place ('P01' for
        'SV1') is shown with its licence to be confirmed, never as an intruder."""
        from sqlalchemy import text

        vehicle = f"SV-U{secrets.token_hex(2).upper()}"
        token = _device(web_engine, vehicle)
        with web_engine.begin() as conn:
            conn.execute(
                text("UPDATE vehicles SET unplaced_stands = '{P01}' WHERE vehicle_id = :v"),
                {"v": vehicle},
            )
        _post_fixes(web_server.url, token, SV1, (40, 20, 1))
        panel = supervisor.get("/supervisao/pontos/SV1/agora").text
        item = panel.split(f"prefixo {vehicle}", 1)[0].rsplit("<li", 1)[1]
        item += panel.split(f"prefixo {vehicle}", 1)[1].split("</li>", 1)[0]
        assert "Licença a confirmar" in item
        assert "Intruso" not in item and "queue__item--intruder" not in item

    def test_a_silent_feed_is_said_not_shown_as_an_empty_stand(
        self, supervisor: httpx.Client, web_engine: Engine
    ) -> None:
        """The licensee's latest fix is from yesterday: the panel says since when no position
        came, instead of only "nobody at the stand"; a fix now removes the warning."""
        panel = supervisor.get("/supervisao/pontos/SV1/agora").text
        yesterday = (dt.datetime.now(TZ) - dt.timedelta(days=1)).strftime("%d/%m/%Y")
        said = f"Nenhuma posição dos prefixos licenciados neste ponto desde {yesterday} 12:05"
        assert 'id="sem-posicoes"' in panel and said in panel
        now = dt.datetime.now(dt.UTC)
        from sqlalchemy.orm import Session

        from api.queries import latest_fix_at

        with Session(web_engine) as session:  # the search stops at its bound
            ids = [LICENSED]
            assert latest_fix_at(session=session, vehicle_ids=ids, before=now) is not None
            bounded = now - dt.timedelta(hours=1)
            assert (
                latest_fix_at(session=session, vehicle_ids=ids, before=now, after=bounded) is None
            )
        with web_engine.begin() as conn:
            _insert_fixes(conn, LICENSED, ELSEWHERE, [now])
        try:
            assert 'id="sem-posicoes"' not in supervisor.get("/supervisao/pontos/SV1/agora").text
        finally:
            with web_engine.begin() as conn:
                conn.execute(
                    text("DELETE FROM fixes WHERE vehicle_id = :v AND ts = :ts"),
                    {"v": LICENSED, "ts": now},
                )

    def test_polling_pauses_while_hidden(
        self, page: Any, login: Callable, stands: dict[str, str]
    ) -> None:
        """The page asks for the fragment while visible, not while the tab is hidden."""
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if r.url.endswith("/agora") else None)
        login(page, stands["supervisor"])
        page.goto("/supervisao/pontos/SV1")
        expect(page.locator("#agora-estado")).to_contain_text(
            "Atualizado (situação às", timeout=15_000
        )
        assert asked
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        count = len(asked)
        assert "pausada" in page.locator("#agora-estado").inner_text()
        page.wait_for_timeout(7_000)  # longer than the refresh interval
        assert len(asked) == count
        with page.expect_request(lambda r: r.url.endswith("/agora"), timeout=3_000):
            page.evaluate(  # shown again: refreshed at once, before the interval
                "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
                "document.dispatchEvent(new Event('visibilitychange'))"
            )

    def test_refresh_button_is_keyboard_reachable(
        self, page: Any, login: Callable, stands: dict[str, str]
    ) -> None:
        """ "Atualizar agora" is a real button (shown by the script) that refreshes the panel."""
        login(page, stands["supervisor"])
        page.goto("/supervisao/pontos/SV1")
        button = page.get_by_role("button", name="Atualizar agora")
        button.focus()
        with page.expect_response(lambda r: r.url.endswith("/agora")) as answer:
            page.keyboard.press("Enter")
        assert answer.value.status == 200


class TestStandPage:
    def test_presence_against_the_rule(self, supervisor: httpx.Client) -> None:
        """SV-LIC was at the stand 2 of the 12 days it operated (17% < 20%, 12 >= 10 days):
        habitual absence; the thresholds are said."""
        html = supervisor.get("/supervisao/pontos/SV1").text
        assert "2 de 12 (17%)" in html
        assert "Ausência habitual: abaixo do limite (art. 49)" in html
        assert "operou em pelo menos 10 dias e esteve no ponto em menos de 20%" in html
        assert "<strong>1</strong> de 1 prefixo abaixo do limite" in html

    def test_the_enforcements_finding_is_shown_with_its_limits(
        self, supervisor: httpx.Client, web_engine: Engine
    ) -> None:
        """An art. 49 finding of SV-LIC at SV1, judged with other limits (a 7-day window),
        is told beside the page's own verdict; one at another stand, or whose window ended
        before the page's, is not."""
        today = dt.datetime.now(TZ).date()
        limits = {"window_days": 7, "min_operating_days": 3, "min_presence_share": 0.25}
        with web_engine.begin() as conn:
            for fid, stand, ends in (("sv-ha-1", "SV1", 4), ("sv-ha-2", "SV2", 4),
                                     ("sv-ha-3", "SV1", 40)):  # fmt: skip
                end = today - dt.timedelta(days=ends)
                window = {"start": (end - dt.timedelta(days=6)).isoformat(),
                          "end": end.isoformat(), "timezone": "America/Sao_Paulo"}  # fmt: skip
                conn.execute(
                    text(
                        "INSERT INTO findings (finding_id, kind, vehicle_id, stand_id, "
                        "started_at, ended_at, confidence, details) VALUES (:f, "
                        "'habitual_absence', :v, :s, :a, :a, 0.8, CAST(:d AS jsonb)) "
                        "ON CONFLICT DO NOTHING"
                    ),
                    {"f": fid, "v": LICENSED, "s": stand, "a": dt.datetime.now(dt.UTC),
                     "d": json.dumps({"window": window, "thresholds": limits})},
                )  # fmt: skip
        html = supervisor.get("/supervisao/pontos/SV1").text
        end = today - dt.timedelta(days=4)
        start = end - dt.timedelta(days=6)
        assert html.count("Achado da fiscalização") == 1
        assert (
            f"Achado da fiscalização: ausência habitual de {start:%d/%m/%Y} a {end:%d/%m/%Y} "
            "por outra regra que a desta tabela (janela de 7 dias, ao menos 3 em operação, "
            "presença em menos de 25%)"
        ) in html  # not read as a second verdict of the page's rule

    def test_presence_strip_says_how_each_day_counted(self, supervisor: httpx.Client) -> None:
        """Each day of the strip is labelled; the legend and the rule name the ways beside the
        stand that count as presence (a queue within 50 m, a silence within 200 m)."""
        html = supervisor.get("/supervisao/pontos/SV1").text
        assert html.count('strip__day--present" title=') == 2
        assert html.count(': no ponto"') == 2
        assert html.count('strip__day--absent" title=') == 10
        (away,) = re.findall(r'<span class="strip__away small">([^<]*)</span>', html)
        assert away.startswith("Operou fora do ponto em ") and away.count("/") == 10  # no mouse
        assert "esperar a até 50 m dele" in html and "posições antes e depois a até 200 m" in html
        assert "ao lado do ponto (fila a até 50 m)" in html

    def test_presence_over_an_earlier_period(self, supervisor: httpx.Client) -> None:
        """The window ends on the day asked (``ate``): ending 3 days ago, SV-LIC operated 10
        days and was never at the stand; a future day or a non-date is said, and today shown."""
        today = dt.datetime.now(TZ).date()
        earlier = (today - dt.timedelta(days=3)).isoformat()
        html = supervisor.get("/supervisao/pontos/SV1", params={"ate": earlier}).text
        assert "0 de 10 (0%)" in html and f'name="ate" type="date" value="{earlier}"' in html
        for bad, said in (
            ((today + dt.timedelta(days=1)).isoformat(), "fora do período aceito"),
            ("ontem", "não é uma data"),
        ):
            answer = supervisor.get("/supervisao/pontos/SV1", params={"ate": bad})
            assert answer.status_code == 422 and said in answer.text
            assert "2 de 12 (17%)" in answer.text

    def test_supervisor_status_overdue(self, supervisor: httpx.Client) -> None:
        """The term ended 100 days ago: the 90 days of art. 50, III ran out 10 days ago."""
        html = supervisor.get("/supervisao/pontos/SV1").text
        assert (
            "Sem supervisor(a) há 100 dias: o prazo de 90 dias (art. 50, III) venceu há 10" in html
        )
        listing = supervisor.get("/supervisao").text
        assert "venceu há 10 dias" in listing

    def test_stand_page_shows_no_personal_data(
        self, supervisor: httpx.Client, web_engine: Engine
    ) -> None:
        """The stand's page names prefixos only (no holder or supervisor name) and is not
        written to the audit log."""
        before = _audit_count(web_engine)
        html = supervisor.get("/supervisao/pontos/SV1").text
        assert LICENSED in html
        assert HOLDER not in html and "Carlos Supervisor" not in html
        assert _audit_count(web_engine) == before

    def test_contacts_are_audited(
        self, supervisor: httpx.Client, stands: dict[str, str], web_engine: Engine
    ) -> None:
        """The contact list names the holder with their phone, after an audit entry naming
        the user, the records, the fields and this page."""
        html = supervisor.get("/supervisao/pontos/SV1/contatos").text
        assert HOLDER in html and "51 98888-1111" in html and "Autorizatário(a)" in html
        with web_engine.connect() as conn:
            entry = conn.execute(
                text(
                    "SELECT actor, entity, details FROM audit_log "
                    "WHERE action = 'read_personal_data' "
                    "AND details->>'route' = '/supervisao/pontos/SV1/contatos' "
                    "ORDER BY entry_id DESC"
                )
            ).first()
        assert entry is not None
        assert entry.actor == f"user:{stands['supervisor']}"
        assert entry.entity == "stand_licensees"
        assert entry.details["ids"] == [LICENSED]
        assert entry.details["fields"] == ["name", "address", "phone"]


def _audit_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM audit_log")).scalar_one())


class TestScope:
    @pytest.mark.parametrize("suffix", ["", "/agora", "/contatos"])
    def test_another_stand_is_refused(
        self, supervisor: httpx.Client, web_engine: Engine, suffix: str
    ) -> None:
        """Page, fragment and contacts of SV2: the 403 page, nothing of SV2 in it, no audit."""
        before = _audit_count(web_engine)
        response = supervisor.get(f"/supervisao/pontos/SV2{suffix}")
        assert response.status_code == 403
        assert "não está entre os seus pontos" in response.text
        assert "Ponto Alheio" not in response.text and OTHER_HOLDER not in response.text
        assert "SV-OTHER" not in response.text
        assert _audit_count(web_engine) == before

    def test_list_has_own_stands_only(self, supervisor: httpx.Client) -> None:
        """The supervisor's list is SV1 alone; no search box (that is the admin's)."""
        html = supervisor.get("/supervisao").text
        assert "Ponto SV1 — Ponto Supervisão Web" in html
        assert "SV2" not in html and "Ponto Matriz" not in html
        assert 'type="search"' not in html

    def test_admin_sees_any_stand_and_searches(self, web_client: Callable) -> None:
        """An admin opens SV2 and finds it by name; an unknown stand is the 404 page."""
        admin = web_client("admin")
        assert "Ponto Alheio" in admin.get("/supervisao/pontos/SV2").text
        found = admin.get("/supervisao", params={"q": "alheio"}).text
        assert "Ponto SV2 — Ponto Alheio" in found and "Ponto SV1 " not in found
        missing = admin.get("/supervisao/pontos/NAO-EXISTE")
        assert missing.status_code == 404
        assert "Ponto não encontrado" in missing.text


def test_stand_page_screenshot(page: Any, login: Callable, stands: dict[str, str]) -> None:
    """The stand's page on a desktop passes axe (screenshot for the README)."""
    login(page, stands["supervisor"])
    page.goto("/supervisao/pontos/SV1")
    assert_accessible(page)
    save_screenshot(page, "web-supervisao-ponto.png")


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("web-supervisao.png", "/supervisao"),
        ("web-supervisao-contatos.png", "/supervisao/pontos/SV1/contatos"),
    ],
)
def test_supervisor_pages_screenshots(
    page: Any, login: Callable, stands: dict[str, str], name: str, path: str
) -> None:
    """The supervisor's stands and a stand's contacts on a desktop pass axe (screenshots)."""
    login(page, stands["supervisor"])
    page.goto(path)
    assert page.locator("h1").count() == 1
    assert_accessible(page)
    save_screenshot(page, name)


class TestSupervisorStatus:
    """supervisor_statuses: the 90-day rule (stands.supervisors) said for each kind of stand."""

    TODAY = dt.date(2025, 6, 30)

    @pytest.fixture(scope="class")
    def statuses(self, web_engine: Engine) -> dict[str, Any]:
        """Stands in every situation of art. 50, III on 2025-06-30, and their statuses."""
        from sqlalchemy.orm import Session

        from api.routes.supervision import SupervisedStand
        from api.web.supervisor import supervisor_statuses
        from db.engine import session_scope
        from db.stands.models import Stand, StandSupervisor

        day = self.TODAY
        back = lambda n: day - dt.timedelta(days=n)  # noqa: E731
        kinds = {"ST-OK": "fixo", "ST-END": "fixo", "ST-LAPSE": "fixo", "ST-90": "fixo",
                 "ST-PEND": "fixo", "ST-LIVRE": "livre", "ST-NOKIND": None}  # fmt: skip
        terms = [
            ("ST-OK", back(40), back(10), None),
            ("ST-END", back(400), back(390), day + dt.timedelta(days=20)),
            ("ST-LAPSE", back(500), back(490), back(30)),
            ("ST-90", back(500), back(490), back(90)),
            ("ST-PEND", back(5), None, None),
        ]
        with session_scope(web_engine) as session:
            for k, (stand_id, kind) in enumerate(kinds.items()):
                session.add(Stand(stand_id=stand_id, name=stand_id, kind=kind,
                                  geometry=_square(-31.0 - k * 0.01, -52.0)))  # fmt: skip
            session.flush()
            for stand_id, elected, homologated, until in terms:
                session.add(
                    StandSupervisor(stand_id=stand_id, person_name="X", elected_on=elected,
                                    homologated_on=homologated, until=until)
                )  # fmt: skip
        stands = [
            SupervisedStand(stand_id=s, name=s, kind=k, capacity=None, address=None, licensees=0)
            for s, k in kinds.items()
        ]
        with Session(web_engine) as session:
            return supervisor_statuses(session=session, stands=stands, today=day)

    def test_in_office(self, statuses: dict[str, Any]) -> None:
        """A homologated supervisor in office: up to date, with the election and homologation
        dates; a term with an end says the days left."""
        ok = statuses["ST-OK"]
        assert (ok.tone, ok.days_left) == ("ok", None)
        assert ok.details == ("Eleição em 21/05/2025; homologação em 20/06/2025.",)
        end = statuses["ST-END"]
        assert end.tone == "ok"
        assert "Mandato até 20/07/2025 (20 dias)" in end.details[1]

    def test_counting_down(self, statuses: dict[str, Any]) -> None:
        """Term ended 30 days ago: 60 days left; exactly 90 days: 0 left, not yet overdue."""
        lapse = statuses["ST-LAPSE"]
        assert (lapse.tone, lapse.days_without, lapse.days_left) == ("warn", 30, 60)
        assert "restam 60 dias para eleger e homologar" in lapse.headline
        assert lapse.details[0] == "Último dia com supervisor(a) homologado(a): 31/05/2025."
        edge = statuses["ST-90"]
        assert (edge.tone, edge.days_without, edge.days_left) == ("warn", 90, 0)

    def test_pending_election_does_not_count(self, statuses: dict[str, Any]) -> None:
        """An election waiting for homologation: no supervisor recorded, the election said."""
        pending = statuses["ST-PEND"]
        assert pending.tone == "warn" and pending.days_left is None
        assert "não dá para contar o prazo de 90 dias" in pending.headline
        assert pending.details == (
            "Eleição de 25/06/2025 aguardando homologação da EPTC (art. 42, § 2º): só a "
            "homologação conta.",
        )

    def test_rule_is_for_pontos_fixos(self, statuses: dict[str, Any]) -> None:
        """A ponto livre and a stand of unknown kind: the rule does not apply, said so."""
        assert statuses["ST-LIVRE"].headline.startswith("Ponto livre: a regra dos 90 dias")
        assert statuses["ST-NOKIND"].headline.startswith("Tipo do ponto não informado")
        assert {statuses[s].tone for s in ("ST-LIVRE", "ST-NOKIND")} == {"info"}


def test_law_quotes_are_verbatim() -> None:
    """The articles quoted on the stand's page are word for word in the bundled decree."""
    from api.web.supervisor import ART_49, ART_50_III

    law = (ROOT / "enforcement" / "laws" / "porto_alegre_decreto_taxi_2019.txt").read_text(
        encoding="utf-8"
    )
    assert ART_49 in law and ART_50_III in law


# --- a stand whose data is all of one past day; the filter by prefixo ----------------------

SV3 = (-30.0400, -51.1900)
OLD_DAY = dt.date(2024, 3, 15)


@pytest.fixture(scope="module")
def old_stand(web_engine: Engine) -> dict[str, str]:
    """SV3 (fixo) with licensees SIM-4227 (at the stand 6 min at noon of 15/03/2024) and
    SIM-1421 (operating elsewhere that day) and intruder INT-9 (at the stand 12:30–12:40);
    the fixes in that day's own partition. Returns the username of SV3's supervisor."""
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle
    from db.stands.models import ParkingLicence, Stand
    from db.tracking.store import ensure_fix_partitions

    username = f"sv3_{os.getpid()}_{secrets.token_hex(2)}"
    noon = dt.datetime.combine(OLD_DAY, dt.time(12), tzinfo=TZ)
    with session_scope(web_engine) as session:
        session.add(
            Stand(stand_id="SV3", name="Ponto Dados Antigos", capacity=3, kind="fixo",
                  geometry=_square(*SV3))
        )  # fmt: skip
        for vehicle in ("SIM-4227", "SIM-1421", "INT-9"):
            session.add(Vehicle(vehicle_id=vehicle, prefixo=vehicle))
        session.flush()
        session.add_all(
            [ParkingLicence(vehicle_id=v, stand_id="SV3") for v in ("SIM-4227", "SIM-1421")]
        )
        conn = session.connection()
        ensure_fix_partitions(conn, OLD_DAY - dt.timedelta(days=1), OLD_DAY + dt.timedelta(days=1))
        minutes = [noon + dt.timedelta(minutes=m) for m in range(7)]
        _insert_fixes(conn, "SIM-4227", SV3, minutes)
        _insert_fixes(conn, "SIM-1421", ELSEWHERE, minutes)
        later = noon + dt.timedelta(minutes=30)
        _insert_fixes(conn, "INT-9", SV3, [later + dt.timedelta(minutes=m) for m in range(11)])
        accounts.create_user(
            session=session, username=username, password=WEB_PASSWORD, role="supervisor",
            stand_ids=["SV3"],
        )  # fmt: skip
    return {"supervisor": username}


def _presence_prefixos(page: Any) -> list[str]:
    texts: list[str] = page.locator("table.presence tbody th").all_inner_texts()
    return texts


class TestLatestDay:
    def test_empty_day_links_to_the_latest_day_with_data(
        self, page: Any, login: Callable[..., Any], old_stand: dict[str, str]
    ) -> None:
        """Today has no fix: the page says so and links to 15/03/2024, where the intruder
        (local times, 12:30–12:40) and both licensees' presence are shown."""
        login(page, old_stand["supervisor"])
        page.goto("/supervisao/pontos/SV3")
        notice = page.locator("#sem-dados")
        expect(notice).to_contain_text("Sem dados neste dia")
        expect(notice).to_contain_text("Último dia com dados: 15/03/2024")
        assert page.locator("#intrusos-titulo").inner_text().startswith("Intrusos hoje")
        assert page.locator("table.presence").count() == 1  # licensed, but never seen lately
        assert "0 de 0" in page.locator("table.presence").inner_text()
        assert_accessible(page)
        save_screenshot(page, "web-supervisao-sem-dados.png")
        notice.get_by_role("link", name="ver 15/03/2024").click()
        page.wait_for_url("**/supervisao/pontos/SV3?ate=2024-03-15")
        assert page.locator("#sem-dados").count() == 0
        expect(page.locator("#intrusos-titulo")).to_have_text("Intrusos em 15/03/2024")
        row = page.locator("#intrusos-titulo + p + table tbody tr")
        assert row.count() == 1
        cells = row.first.inner_text()
        assert "INT-9" in cells and "12:30" in cells and "12:40" in cells  # not 15:30 (UTC)
        assert "horário de Brasília" in page.locator("#intrusos-titulo + p + table").inner_text()
        arrival = row.first.locator("td").first  # a phone's card names the zone too
        assert arrival.get_attribute("data-label") == "Chegada (horário de Brasília)"
        assert sorted(_presence_prefixos(page)) == ["SIM-1421", "SIM-4227"]
        presence = page.locator("table.presence").inner_text()
        assert "1 de 1 (100%)" in presence and "0 de 1 (0%)" in presence
        expect(page.locator("#presenca-titulo")).to_contain_text("até 15/03/2024")
        save_screenshot(page, "web-supervisao-ultimo-dia.png")

    def test_recent_stand_links_to_yesterday(self, supervisor: httpx.Client) -> None:
        """SV1's licensee was last seen yesterday: today's page links to yesterday."""
        yesterday = dt.datetime.now(TZ).date() - dt.timedelta(days=1)
        html = supervisor.get("/supervisao/pontos/SV1").text
        assert f"Último dia com dados: {yesterday:%d/%m/%Y}" in html
        assert f"?ate={yesterday.isoformat()}" in html
        on_day = supervisor.get("/supervisao/pontos/SV1", params={"ate": yesterday.isoformat()})
        assert "Sem dados neste dia" not in on_day.text

    def test_latest_fix_day_reads_partitions_and_default(self, web_engine: Engine) -> None:
        """The latest local day up to a day: from a daily partition, from the DEFAULT
        partition (a day without its own), or None."""
        from sqlalchemy.orm import Session

        from api.web.supervisor import latest_fix_day

        stray = dt.datetime(2023, 7, 1, 23, 30, tzinfo=dt.UTC)  # 20:30 local, 01/07/2023
        with web_engine.begin() as conn:
            _insert_fixes(conn, "INT-9", ELSEWHERE, [stray])
        with Session(web_engine) as session:

            def day(ids: list[str], until: dt.date) -> dt.date | None:
                return latest_fix_day(
                    session=session, vehicle_ids=ids, until=until, timezone="America/Sao_Paulo"
                )

            assert day(["SIM-4227", "SIM-1421"], dt.date(2026, 1, 1)) == OLD_DAY
            assert day(["INT-9"], dt.date(2024, 3, 14)) == dt.date(2023, 7, 1)
            assert day(["INT-9"], dt.date(2023, 6, 30)) is None
            assert day(["NINGUEM"], dt.date(2026, 1, 1)) is None
            assert day([], dt.date(2026, 1, 1)) is None


class TestPrefixoFilter:
    def test_part_of_a_prefixo_any_case(
        self, page: Any, login: Callable[..., Any], old_stand: dict[str, str]
    ) -> None:
        """ "4227" keeps SIM-4227 alone in the presence and says the intruder left out;
        "int" (lower case) keeps the intruder INT-9 and no licensee."""
        login(page, old_stand["supervisor"])
        page.goto("/supervisao/pontos/SV3?ate=2024-03-15")
        page.get_by_label("Prefixo (ou parte dele)").fill("4227")
        page.get_by_role("button", name="Ver", exact=True).click()
        page.wait_for_url("**prefixo=4227*")
        assert _presence_prefixos(page) == ["SIM-4227"]
        assert "SIM-1421" not in page.locator("main").inner_text()
        expect(page.locator("#intrusos-titulo + p + p")).to_have_text(
            "Nenhum intruso com “4227” neste dia (1 no total)."
        )
        assert page.get_by_label("Dia", exact=True).input_value() == "2024-03-15"
        assert_accessible(page)
        save_screenshot(page, "web-supervisao-prefixo.png")
        page.get_by_label("Prefixo (ou parte dele)").fill("int")
        page.get_by_role("button", name="Ver", exact=True).click()
        page.wait_for_url("**prefixo=int*")
        assert "INT-9" in page.locator("#intrusos-titulo + p + table").inner_text()
        assert page.locator("table.presence").count() == 0
        expect(page.locator("#presenca-titulo ~ p").last).to_contain_text(
            "Nenhum prefixo licenciado com “int”"
        )
        page.get_by_role("link", name="Mostrar todos").click()
        assert sorted(_presence_prefixos(page)) == ["SIM-1421", "SIM-4227"]


@pytest.mark.parametrize(
    ("visits", "code"),
    [
        ([{"counted": True}, {"counted": True, "how": "perto"}], "present"),
        ([{"counted": False}, {"counted": True, "how": "perto"}], "near"),
        ([{"counted": True, "how": "silencio"}, {"counted": True, "how": "perto"}], "near"),
        ([{"counted": True, "how": "silencio"}, {"counted": False}], "silent"),
    ],
)
def test_how_a_present_day_counted(visits: list[dict[str, Any]], code: str) -> None:
    """A visit inside the stand is "no ponto"; otherwise a queue beside it before a silence."""
    from api.web.supervisor import _DAY_LABELS, _how_present

    assert _how_present(visits) == code
    assert _DAY_LABELS[code].startswith("no ponto")


@pytest.mark.parametrize(
    ("wanted", "found"),
    [("4227", True), ("sim4227", True), ("SIM 4227", True), ("sim-4227", True), ("4228", False)],
)
def test_a_prefixo_is_found_however_its_separator_is_typed(wanted: str, found: bool) -> None:
    """A supervisor types "sim4227" or "SIM 4227" for SIM-4227."""
    from api.web.supervisor import matches_prefixo

    assert matches_prefixo("SIM-4227", wanted) is found


def test_a_long_stand_id_is_not_echoed_whole(supervisor: httpx.Client) -> None:
    """A 5,000-character stand id in the path: the 403 page names it cut to 40 characters."""
    response = supervisor.get("/supervisao/pontos/" + "9" * 5000)
    assert response.status_code == 403
    assert "“" + "9" * 39 + "…”" in response.text and "9" * 41 not in response.text


def test_an_own_stand_id_with_a_blank_is_refused_as_typed(supervisor: httpx.Client) -> None:
    """The id "SV1 " is not the supervisor's SV1: the 403 page quotes it as typed; "SV1\\0" is
    refused at the edge (a NUL, never echoed)."""
    response = supervisor.get("/supervisao/pontos/SV1%20")
    assert response.status_code == 403
    assert "O ponto “SV1 ” não está entre os seus pontos" in response.text
    response = supervisor.get("/supervisao/pontos/SV1%00")
    assert response.status_code == 422 and "caractere nulo" in response.text
    assert "\x00" not in response.text


def test_a_boarding_says_where_the_meter_came_on() -> None:
    """In the stand, or past its edge (a hail down the street after a red light reads so)."""
    from api.web.supervisor import boarded_text

    assert boarded_text(True, 0.0) == "sim, no ponto"
    assert boarded_text(True, 20.4) == "sim, taxímetro ligado a 20 m do ponto, já fora dele"
    assert boarded_text(False, None) == "não"
    assert boarded_text(None, None) == "não se sabe"
