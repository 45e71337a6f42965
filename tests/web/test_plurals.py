"""Counts on the console's pages agree in number ("1 conta", "2 contas", "nenhuma proposta
nova gerada"), with pt-BR thousands ("1.234"), and no page says "conta(s)"."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import Engine
from web_fiscal import SEEDED_FINDING_ID, tracking_gap_finding
from web_helpers import WEB_PASSWORD
from web_pages import PAGES, role_for

from api.web import formats as fmt
from api.web.auth import SESSION_COOKIE, csrf_token_for

LAZY_PLURAL = re.compile(r"\w\((?:s|es|is|ões|ns)\)")
"""A noun with its plural ending in brackets: "proposta(s)", "condutor(es)", "exclusão(ões)"."""


def _post(client: httpx.Client, path: str, **form: str) -> httpx.Response:
    """POST a console form with the session's CSRF token (redirects not followed)."""
    token = client.cookies.get(SESSION_COOKIE) or ""
    return client.post(path, data={"csrf_token": csrf_token_for(token), **form})


def _status(page: str) -> str:
    """The text of the page's notice (role="status"), blanks folded."""
    found = re.search(r'role="status"[^>]*>(.*?)</', page, flags=re.DOTALL)
    assert found is not None, "no notice on the page"
    return " ".join(found.group(1).split())


def _caption(page: str) -> str:
    """The text of the page's first table caption, blanks folded."""
    found = re.search(r"<caption[^>]*>(.*?)</caption>", page, flags=re.DOTALL)
    assert found is not None, "no table caption on the page"
    return " ".join(found.group(1).split())


class TestPlural:
    @pytest.mark.parametrize(
        ("count", "expected"),
        [
            (0, "0 propostas novas"),
            (1, "1 proposta nova"),
            (2, "2 propostas novas"),
            (1000, "1.000 propostas novas"),
            (1234567, "1.234.567 propostas novas"),
        ],
    )
    def test_number_and_noun_agree(self, count: int, expected: str) -> None:
        """1 takes the singular, 0 and 2+ the plural; the number has pt-BR thousands."""
        assert fmt.plural(count, "proposta nova", "propostas novas") == expected

    @pytest.mark.parametrize(
        ("count", "expected"),
        [(0, "nenhuma proposta nova"), (1, "1 proposta nova"), (1000, "1.000 propostas novas")],
    )
    def test_zero_can_be_said_in_words(self, count: int, expected: str) -> None:
        """With ``none``, 0 is said by it ("nenhuma …"); other counts as without it."""
        said = fmt.plural(count, "proposta nova", "propostas novas", none="nenhuma proposta nova")
        assert said == expected


class TestGenerateNotice:
    def test_generating_says_how_many_in_words(
        self, web_client: Callable[..., httpx.Client], web_engine: Engine
    ) -> None:
        """After "Gerar propostas" the notice counts in words; generating again at once makes
        none: "Nenhuma proposta nova gerada."."""
        from db.enforcement import workflow
        from db.engine import session_scope

        agent = web_client("agent")
        vehicle = f"PL{secrets.token_hex(3).upper()}"
        started = dt.datetime(2026, 11, 12, 13, 0, tzinfo=dt.UTC)
        finding = tracking_gap_finding(vehicle_id=vehicle, started_at=started)
        with session_scope(web_engine) as session:
            workflow.insert_findings(session, [finding])
        back = f"/fiscal/achados/{finding['finding_id']}"
        first = _post(agent, "/fiscal/propostas/gerar", municipio="4314902", volta=back)
        said = _status(agent.get(first.headers["location"]).text)
        assert re.match(r"^(1 proposta nova gerada\.|[\d.]+ propostas novas geradas\.)", said)
        again = _post(agent, "/fiscal/propostas/gerar", municipio="4314902", volta=back)
        assert _status(agent.get(again.headers["location"]).text).startswith(
            "Nenhuma proposta nova gerada."
        )

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            (
                "geradas=1&revisao=1&fora=1",
                "1 proposta nova gerada. 1 achado ficou para revisão e não virou proposta. "
                "1 achado de prefixo do cadastro de outro município não foi julgado por este "
                "regulamento.",
            ),
            (
                "geradas=1234&revisao=2&fora=3",
                "1.234 propostas novas geradas. 2 achados ficaram para revisão e não viraram "
                "proposta. 3 achados de prefixos do cadastro de outro município não foram "
                "julgados por este regulamento.",
            ),
        ],
    )
    def test_the_notice_agrees_with_each_count(
        self, web_client: Callable[..., httpx.Client], query: str, expected: str
    ) -> None:
        """Back on the finding's page, each count of the notice takes singular or plural."""
        page = web_client("agent").get(f"/fiscal/achados/{SEEDED_FINDING_ID}?{query}").text
        assert _status(page) == expected


class TestAdminCounts:
    def test_accounts_and_drivers_are_counted_in_number(
        self, web_client: Callable[..., httpx.Client], web_engine: Engine
    ) -> None:
        """A search finding one account says "1 conta", two "2 contas"; likewise "1 condutor",
        "2 condutores"; a driver with no period says "0 períodos"."""
        from api import accounts
        from db.engine import session_scope
        from db.fleet.models import Driver

        mark = f"plural{secrets.token_hex(3)}"
        with session_scope(web_engine) as session:
            for suffix in ("a", "b"):
                accounts.create_user(
                    session=session,
                    username=f"{mark}_{suffix}",
                    password=WEB_PASSWORD,
                    role="planner",
                )
                session.add(Driver(driver_id=f"{mark}-{suffix}", name="Fictício", synthetic=True))
        admin = web_client("admin")
        one = admin.get("/admin/usuarios", params={"q": f"{mark}_a"}).text
        assert _caption(one) == f"1 conta com “{mark}_a”"
        two = admin.get("/admin/usuarios", params={"q": mark}).text
        assert _caption(two) == f"2 contas com “{mark}”"
        one = admin.get("/admin/condutores", params={"q": f"{mark}-a"}).text
        assert _caption(one) == f"1 condutor com “{mark}-a”"
        two = admin.get("/admin/condutores", params={"q": mark}).text
        assert _caption(two) == f"2 condutores com “{mark}”"
        driver = admin.get(f"/admin/condutores/{mark}-a").text
        assert _caption(driver) == "0 períodos (datas locais, inclusivas)"


def test_no_page_writes_a_plural_in_brackets(
    web_client: Callable[..., httpx.Client], anon_client: httpx.Client
) -> None:
    """Every GET page and fragment of the console, and the finding's page back from
    generating, writes no "proposta(s)", "condutor(es)" or "exclusão(ões)"."""

    def client(role: str | None) -> httpx.Client:
        return anon_client if role is None else web_client(role)

    urls = [
        (role_for(p), p.request_url()) for p in PAGES if p.method == "GET" and p.allowed is not None
    ]
    urls.append(("agent", f"/fiscal/achados/{SEEDED_FINDING_ID}?geradas=2&revisao=1&fora=3"))
    checked = 0
    for role, url in urls:
        response = client(role).get(url)
        if not response.headers.get("content-type", "").startswith("text/html"):
            continue
        checked += 1
        found = LAZY_PLURAL.findall(response.text)
        assert not found, (url, found)
        if "/documentos/" not in url:  # the legal documents state the zone exactly
            assert "America/" not in response.text, url  # pages name zones for people
    assert checked >= 15


def test_zones_are_named_for_people() -> None:
    """Pages name the zone, not its IANA code: Brasília's, else the offset."""
    from api.web.formats import zone_label

    assert zone_label("America/Sao_Paulo") == "horário de Brasília"
    assert zone_label("America/Porto_Velho") == "UTC−4"
    assert zone_label("America/Rio_Branco") == "UTC−5"
