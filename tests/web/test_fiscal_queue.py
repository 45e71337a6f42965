"""The proposals queue (``/fiscal/propostas``): filters, counts, pages and keyboard triage.

Each test class stores its own proposals for vehicles of its own (a random prefix), so the
filters are checked against a known set whatever else the console's database holds.
"""

from __future__ import annotations

import datetime as dt
import html
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine
from web_fiscal import (
    boarding_finding,
    longer_route_finding,
    store_and_propose,
    tracking_gap_finding,
)

ROW_RE = re.compile(r'<tr data-href="[^"]+" data-status="([a-z_]+)" data-proposal-id="([^"]+)"')
BASE = dt.datetime(2026, 10, 5, 15, 0, tzinfo=dt.UTC)  # 12:00 in Porto Alegre


def _rows(html: str) -> list[str]:
    return [pid for _, pid in ROW_RE.findall(html)]


@pytest.fixture(scope="module")
def fleet(web_engine: Engine) -> Iterator[dict[str, Any]]:
    """Proposals of two vehicles: A has 3 boardings at S1 (60, 80, 95 %, on 5, 6 and 7 Oct),
    a detour and a tracking gap; B has 55 tracking gaps, one a day (a proposal each)."""
    a, b = (f"Q{x}{secrets.token_hex(2).upper()}" for x in "AB")
    boardings = [
        boarding_finding(
            vehicle_id=a,
            stand_id="S1",
            started_at=BASE + dt.timedelta(days=d),
            confidence=c,
        )
        for d, c in ((0, 0.6), (1, 0.8), (2, 0.95))
    ]
    others = [
        longer_route_finding(vehicle_id=a, started_at=BASE + dt.timedelta(days=3)),
        tracking_gap_finding(vehicle_id=a, started_at=BASE + dt.timedelta(days=4)),
    ]
    gaps = [
        tracking_gap_finding(vehicle_id=b, started_at=BASE - dt.timedelta(days=d))
        for d in range(55)
    ]
    made = store_and_propose(web_engine, [*boardings, *others, *gaps])
    yield {
        "a": a,
        "b": b,
        "boardings": [made[f["finding_id"]] for f in boardings],
        "detour": made[others[0]["finding_id"]],
        "gap": made[others[1]["finding_id"]],
        "gaps_b": {made[f["finding_id"]] for f in gaps},
    }


@pytest.fixture
def agent(web_client: Callable[..., httpx.Client]) -> httpx.Client:
    """The seeded agent's client."""
    return web_client("agent")


def test_a_use_under_suspension_is_named_so_in_the_queue(
    web_engine: Engine, agent: httpx.Client
) -> None:
    """A licensee's use of its stand under suspension is listed as such, as its page names it,
    not as "Embarque em ponto sem licença" (its kind's name); its link names its vehicle."""
    vehicle = f"QS{secrets.token_hex(2).upper()}"
    finding = boarding_finding(
        vehicle_id=vehicle, stand_id="S1", started_at=BASE, subtype="suspended_use"
    )
    finding["details"]["suspension_kind"] = "suspension"
    proposal = store_and_propose(web_engine, [finding])[finding["finding_id"]]
    page = html.unescape(agent.get("/fiscal/propostas", params={"veiculo": vehicle}).text)
    row = page[page.index(f'data-proposal-id="{proposal}"') :].split("</tr>")[0]
    assert "Uso de ponto durante suspensão" in row and "sem licença" not in row
    # a screen reader's list of links tells the rows apart: the vehicle and the time
    assert f'<span class="visually-hidden"> — veículo {vehicle}, ' in row


class TestFilters:
    def test_vehicle_lists_its_proposals_newest_first(
        self, agent: httpx.Client, fleet: dict[str, Any]
    ) -> None:
        """veiculo=A, every state: its five proposals, the latest infraction first."""
        page = agent.get("/fiscal/propostas", params={"veiculo": fleet["a"], "situacao": ""})
        assert page.status_code == 200
        assert _rows(page.text) == [
            fleet["gap"],
            fleet["detour"],
            *reversed(fleet["boardings"]),
        ]
        assert "Propostas 1 a 5 de 5" in page.text
        typed = f" {fleet['a'].lower()} "  # as an agent types it
        again = agent.get("/fiscal/propostas", params={"veiculo": typed, "situacao": ""})
        assert _rows(again.text) == _rows(page.text)

    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            ({"tipo": "unlicensed_stand_use"}, [2, 1, 0]),
            ({"tipo": "unlicensed_stand_use", "confianca": "90"}, [2]),
            ({"confianca": "79,5"}, ["detour", 2, 1]),
            ({"ponto": "S1"}, [2, 1, 0]),
            ({"de": "2026-10-06", "ate": "2026-10-06"}, [1]),
            ({"de": "2026-10-07"}, ["gap", "detour", 2]),
            ({"ate": "2026-10-05"}, [0]),
            ({"tipo": "longer_route"}, ["detour"]),
            ({"situacao": "confirmada"}, []),
        ],
        ids=lambda v: str(v),
    )
    def test_each_filter_narrows_the_list(
        self,
        agent: httpx.Client,
        fleet: dict[str, Any],
        params: dict[str, str],
        expected: list[Any],
    ) -> None:
        """Kind, confidence (a percentage, comma or point), stand, local dates (both
        inclusive) and status, combined with the vehicle, give exactly the expected rows."""
        query = {"veiculo": fleet["a"], "situacao": "", **params}
        page = agent.get("/fiscal/propostas", params=query)
        assert page.status_code == 200
        want = [fleet[x] if isinstance(x, str) else fleet["boardings"][x] for x in expected]
        assert _rows(page.text) == want

    def test_default_is_the_proposals_to_review(
        self, agent: httpx.Client, fleet: dict[str, Any], web_engine: Engine
    ) -> None:
        """Without situacao the queue lists what awaits review (proposta): a dismissed one
        leaves it, and comes back with situacao=descartada."""
        from db.enforcement import workflow
        from db.engine import session_scope

        with session_scope(web_engine) as session:
            workflow.dismiss(session, fleet["detour"], agent_id="outro", reason="teste de filtro")
        default = _rows(agent.get("/fiscal/propostas", params={"veiculo": fleet["a"]}).text)
        assert fleet["detour"] not in default and len(default) == 4
        dismissed = agent.get(
            "/fiscal/propostas", params={"veiculo": fleet["a"], "situacao": "descartada"}
        )
        assert _rows(dismissed.text) == [fleet["detour"]]

    def test_counts_per_status_and_kind_under_the_other_filters(
        self, agent: httpx.Client, fleet: dict[str, Any]
    ) -> None:
        """The counts of vehicle B (55 tracking gaps, all to review): per status, per kind."""
        page = agent.get("/fiscal/propostas", params={"veiculo": fleet["b"]}).text
        assert ">Todas as situações: 55<" in page
        assert ">proposta: 55<" in page
        assert ">confirmada: 0<" in page
        assert ">Todos os tipos: 55<" in page
        assert ">Falha de rastreamento: 55<" in page
        assert "Embarque em ponto sem licença:" not in page

    @pytest.mark.parametrize(
        ("params", "field", "message"),
        [
            ({"confianca": "abc"}, "confianca", "Confiança mínima: um número de 0 a 100 (%)."),
            ({"confianca": "120"}, "confianca", "Confiança mínima: um número de 0 a 100 (%)."),
            ({"de": "2026-13-40"}, "de", "Data inicial inválida: '2026-13-40' não existe"),
            ({"de": "ontem"}, "de", "Data inicial inválida: 'ontem'; use o formato aaaa-mm-dd"),
            ({"de": "2026-09-30", "ate": "2026-09-01"}, "ate", "A data final é anterior"),
            ({"tipo": "multa"}, "tipo", "Tipo 'multa' desconhecido"),
            ({"situacao": "paga"}, "situacao", "Situação 'paga' desconhecida"),
        ],
    )
    def test_bad_filter_values_are_named_in_pt_br(
        self,
        agent: httpx.Client,
        fleet: dict[str, Any],
        params: dict[str, str],
        field: str,
        message: str,
    ) -> None:
        """A bad value: 422, the field marked invalid with its message; the other filters
        still apply (the vehicle's rows are listed)."""
        page = agent.get("/fiscal/propostas", params={"veiculo": fleet["b"], **params})
        assert page.status_code == 422
        assert f'aria-invalid="true" aria-describedby="{field}-erro"' in page.text
        assert message in html.unescape(page.text)
        assert set(_rows(page.text)) <= fleet["gaps_b"] and _rows(page.text)


class TestPages:
    def test_fifty_per_page_with_links(self, agent: httpx.Client, fleet: dict[str, Any]) -> None:
        """55 proposals: page 1 has 50 and a link to page 2, which has the other 5."""
        first = agent.get("/fiscal/propostas", params={"veiculo": fleet["b"]})
        rows1 = _rows(first.text)
        assert len(rows1) == 50 and "Página 1 de 2" in first.text
        link = re.search(r'<a href="([^"]+)" rel="next">', first.text)
        assert link is not None
        second = agent.get(link.group(1).replace("&amp;", "&"))
        rows2 = _rows(second.text)
        assert len(rows2) == 5 and "Propostas 51 a 55 de 55" in second.text
        assert set(rows1) | set(rows2) == fleet["gaps_b"]


class TestKeyboard:
    def test_j_k_arrows_enter_c_and_d(
        self, page: Any, login: Callable, fleet: dict[str, Any]
    ) -> None:
        """j and ↓ go down, k and ↑ up (the row marked, its link focused); Enter opens the
        proposal; c opens it at the confirmation form (focus in its first field) and d at
        the dismissal form; nothing is confirmed or dismissed."""
        login(page, "agent")
        queue = f"/fiscal/propostas?veiculo={fleet['a']}&tipo=unlicensed_stand_use"
        page.goto(queue)
        rows = page.locator("#fila tbody tr")
        expect(rows).to_have_count(3)

        def current() -> str | None:
            return page.evaluate("document.activeElement.closest('tr')?.dataset.proposalId")

        page.keyboard.press("j")
        assert current() == fleet["boardings"][2]
        expect(rows.nth(0)).to_have_class(re.compile("is-current"))
        page.keyboard.press("j")
        assert current() == fleet["boardings"][1]
        page.keyboard.press("k")
        assert current() == fleet["boardings"][2]
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        assert current() == fleet["boardings"][0]
        page.keyboard.press("ArrowUp")
        assert current() == fleet["boardings"][1]
        expect(page.locator("#fila-estado")).to_have_text("Proposta 2 de 3 selecionada.")

        page.keyboard.press("Enter")
        page.wait_for_url(f"**/fiscal/propostas/{fleet['boardings'][1]}")
        page.go_back()
        page.keyboard.press("j")
        page.keyboard.press("c")
        page.wait_for_url(f"**/fiscal/propostas/{fleet['boardings'][2]}#confirmar")
        assert page.evaluate("document.activeElement.id") == "resposta_excecao"
        page.go_back()
        page.keyboard.press("j")
        page.keyboard.press("d")
        page.wait_for_url(f"**/fiscal/propostas/{fleet['boardings'][2]}#descartar")
        assert page.evaluate("document.activeElement.id") == "motivo"
        page.goto(queue)
        expect(page.locator("#fila tbody tr[data-status=proposta]")).to_have_count(3)

    def test_keys_are_ignored_while_typing_in_a_filter(
        self, page: Any, login: Callable, fleet: dict[str, Any]
    ) -> None:
        """Typing j or c in the vehicle field types them; no row is selected."""
        login(page, "agent")
        page.goto(f"/fiscal/propostas?veiculo={fleet['a']}")
        field = page.get_by_label("Veículo (prefixo)")
        field.fill("")
        field.type("jc")
        expect(field).to_have_value("jc")
        expect(page.locator("#fila tr.is-current")).to_have_count(0)


def _unused_digits(engine: Engine) -> str:
    """Nine random digits none of whose searched parts is in a proposal's vehicle yet (the
    database is shared with the other modules' fleets)."""
    from sqlalchemy import text

    while True:
        digits = f"{secrets.randbelow(900_000_000) + 100_000_000}"
        with engine.connect() as conn:
            taken = conn.execute(
                text(
                    "SELECT 1 FROM proposals, regexp_replace(lower(vehicle_id), '[^[:alnum:]]', "
                    "'', 'g') AS v WHERE strpos(v, :a) > 0 OR strpos(v, :b) > 0"
                ),
                {"a": digits[:4], "b": digits[1:7]},
            ).first()
        if taken is None:
            return digits


@pytest.fixture(scope="module")
def prefixes(web_engine: Engine) -> dict[str, Any]:
    """One tracking gap each of ``SIM-<9 digits>``, ``P%<hex>`` and ``U_<hex>`` (their
    proposals), and a detour of the SIM vehicle."""
    digits = _unused_digits(web_engine)
    tag = secrets.token_hex(3).upper()
    names = {"sim": f"SIM-{digits}", "pct": f"P%{tag}", "und": f"U_{tag}"}
    gaps = {
        key: tracking_gap_finding(vehicle_id=name, started_at=BASE + dt.timedelta(days=20))
        for key, name in names.items()
    }
    detour = longer_route_finding(vehicle_id=names["sim"], started_at=BASE + dt.timedelta(days=21))
    made = store_and_propose(web_engine, [*gaps.values(), detour])
    return {
        "digits": digits,
        "tag": tag,
        **names,
        **{f"{key}_gap": made[f["finding_id"]] for key, f in gaps.items()},
        "sim_detour": made[detour["finding_id"]],
    }


class TestVehiclePart:
    def _listed(self, agent: httpx.Client, veiculo: str, **params: str) -> list[str]:
        page = agent.get("/fiscal/propostas", params={"veiculo": veiculo, "situacao": "", **params})
        assert page.status_code == 200
        return _rows(page.text)

    def test_part_of_the_prefixo_finds_it(
        self, agent: httpx.Client, prefixes: dict[str, Any]
    ) -> None:
        """The digits of SIM-<digits> alone, or a part typed in lower case between spaces, find
        its two proposals (newest first), and no other vehicle's."""
        want = [prefixes["sim_detour"], prefixes["sim_gap"]]
        assert self._listed(agent, prefixes["digits"]) == want
        assert self._listed(agent, f"  sim-{prefixes['digits'][:4]} ") == want
        assert self._listed(agent, prefixes["digits"][1:7]) == want
        assert self._listed(agent, f"sim{prefixes['digits']}") == want  # separators aside
        assert self._listed(agent, f"SIM {prefixes['digits']}") == want

    def test_like_wildcards_are_plain_characters(
        self, agent: httpx.Client, prefixes: dict[str, Any]
    ) -> None:
        """'%' finds only the prefixo with a '%' in it (not every proposal), '_' the one with
        an '_' (not any character), and 'P%' + tag exactly that vehicle, as 'P_' + tag does
        (separators aside)."""
        assert self._listed(agent, "%") == [prefixes["pct_gap"]]
        underscore = self._listed(agent, "_")
        assert prefixes["und_gap"] in underscore
        assert prefixes["sim_gap"] not in underscore and prefixes["pct_gap"] not in underscore
        assert self._listed(agent, f"p%{prefixes['tag'].lower()}") == [prefixes["pct_gap"]]
        assert self._listed(agent, f"P_{prefixes['tag']}") == [prefixes["pct_gap"]]  # P%: aside

    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            ({"tipo": "tracking_gap"}, ["sim_gap"]),
            ({"tipo": "longer_route"}, ["sim_detour"]),
            ({"situacao": "confirmada"}, []),
            ({"de": "2026-10-26"}, ["sim_detour"]),
            ({"ate": "2026-10-25"}, ["sim_gap"]),
        ],
        ids=lambda v: str(v),
    )
    def test_other_filters_still_combine(
        self,
        agent: httpx.Client,
        prefixes: dict[str, Any],
        params: dict[str, str],
        expected: list[str],
    ) -> None:
        """A part of the prefixo with a kind, a state or a date: only what meets them all."""
        listed = self._listed(agent, prefixes["digits"], **params)
        assert listed == [prefixes[key] for key in expected]

    def test_counts_follow_the_part(self, agent: httpx.Client, prefixes: dict[str, Any]) -> None:
        """The facets count the proposals of the part typed: 2 in all, 1 detour."""
        page = agent.get(
            "/fiscal/propostas", params={"veiculo": prefixes["digits"], "situacao": ""}
        ).text
        assert ">Todas as situações: 2<" in page
        assert ">Percurso mais longo: 1<" in page
        assert ">Falha de rastreamento: 1<" in page
