"""Planejamento (``/planejamento``) against a real ``pontual serve``: the plan of a municipality
from the registry, the same figures as ``pontual plan --from-db --format json``, the CSV
downloads holding the figures of the page, the map's layers, the municipality selector.

The module seeds Porto Velho (1100205, a bundled rule and boundary): eight active vehicles
(two accessible), two stands, pickups of the last days and a place of recurring illegal stand
formation.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, text
from web_helpers import assert_accessible, save_screenshot

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PVH = "1100205"
TZ = ZoneInfo("America/Sao_Paulo")
STAND_A = (-8.7612, -63.9004)
STAND_B = (-8.7560, -63.9100)
FAR = (-8.7800, -63.8800)
_FIGURE = re.compile(r'<tr data-key="([\w.]+)"><th scope="row">[^<]*</th><td>([^<]*)</td>')
"""A row of the page's figures: its key and the value shown."""
PLACE = (-8.7700, -63.8900)


@pytest.fixture(scope="module")
def seeded_plan(web_engine: Engine) -> None:
    """Porto Velho's registry: vehicles, stands, pickups, findings (see the module doc)."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from db.enforcement.models import Finding
    from db.engine import session_scope
    from db.fleet.models import Vehicle, VehicleStatusPeriod
    from db.stands.models import Stand

    def square(lat: float, lon: float) -> Any:
        poly = Point(lon, lat).buffer(0.0003, cap_style="square")
        return from_shape(MultiPolygon([poly]), srid=4326)

    now = dt.datetime.now(dt.UTC)
    with session_scope(web_engine) as session:
        session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf, timezone) VALUES "
                "(:c, 'Porto Velho', 'RO', 'America/Porto_Velho') ON CONFLICT DO NOTHING"
            ),
            {"c": PVH},
        )
        vehicles = [
            Vehicle(
                vehicle_id=f"PL-{k:03d}", prefixo=f"PL-{k:03d}", municipality_code=PVH,
                year=2020, first_registered_on=dt.date(2020, 1, 1), accessible=k in (2, 3),
                inspection_valid_until=dt.date(2099, 1, 1),
            )
            for k in range(1, 9)
        ]  # fmt: skip
        session.add_all(vehicles)
        session.flush()
        session.add_all(
            VehicleStatusPeriod(
                vehicle_id=v.vehicle_id, status="active", valid_from=dt.date(2020, 1, 1)
            )
            for v in vehicles
        )
        session.add_all(
            [
                Stand(stand_id="PL1", name="Ponto Plano A", capacity=3, kind="fixo",
                      municipality_code=PVH, geometry=square(*STAND_A)),
                Stand(stand_id="PL2", name="Ponto Plano B", kind="fixo",
                      municipality_code=PVH, geometry=square(*STAND_B)),
            ]
        )  # fmt: skip
        conn = session.connection()
        pickups = [(STAND_A, 1, 3), (STAND_B, 2, 2), (FAR, 3, 4), (FAR, 4, 1)]
        for where, k, count in pickups:
            for n in range(count):
                t = now - dt.timedelta(days=1 + n, hours=k)
                for dt_s, meter in ((0, "free"), (30, "occupied"), (600, "occupied")):
                    conn.execute(
                        text(
                            "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, "
                            "speed_flag, source) VALUES (:v, :ts, :lat, :lon, "
                            "ST_Point(:lon, :lat, 4326), :m, false, 'test') ON CONFLICT DO NOTHING"
                        ),
                        {"v": f"PL-{k:03d}", "ts": t + dt.timedelta(seconds=dt_s),
                         "lat": where[0], "lon": where[1] + 0.0001 * n, "m": meter},
                    )  # fmt: skip
        for n in range(3):
            day = (now - dt.timedelta(days=2 + n)).astimezone(TZ).date()
            start = now - dt.timedelta(days=2 + n)
            session.add(
                Finding(
                    finding_id=f"PL-ISF-{n}", kind="illegal_stand_formation", vehicle_id=None,
                    stand_id=None, started_at=start, ended_at=start + dt.timedelta(minutes=30),
                    confidence=0.8,
                    details={"place_id": "PL-PLACE", "dates": [day.isoformat()],
                             "vehicles": ["PL-005", "PL-006"]},
                    geometry=from_shape(Point(PLACE[1], PLACE[0]).buffer(0.0002), srid=4326),
                )
            )  # fmt: skip


def _cli_plan(database_url: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    today = dt.datetime.now(TZ).date().isoformat()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PONTUAL_")}
    env |= {"DATABASE_URL": database_url, "PONTUAL_DATA_DIR": str(tmp_path)}
    pontual = Path(sys.executable).with_name("pontual")
    done = subprocess.run(
        [str(pontual), "plan", "--municipality", PVH, "--from-db", "--format", "json",
         "--as-of", today, *extra],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


def _csv_rows(data: bytes) -> list[dict[str, str]]:
    assert data.startswith(b"\xef\xbb\xbf")  # the BOM: spreadsheets read UTF-8
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig")), delimiter=";"))


COMPARED = (
    "municipality", "municipality_name", "uf", "service", "year", "population",
    "population_source", "fleet_min", "fleet_max", "fleet_current", "inhabitants_per_taxi",
    "fleet_source",
    "accessible_min", "accessible_basis", "accessible_current",
)  # fmt: skip


class TestExport:
    def test_planner_exports_the_plan(
        self, page: Any, login: Callable, seeded_plan: None, web_database_url: str,
        tmp_path: Path,
    ) -> None:  # fmt: skip
        """The planner downloads the figures' CSV: each row is on the page as shown there, and
        the figures are those of `pontual plan --from-db --format json` for Porto Velho."""
        login(page, "planner")
        page.goto(f"/planejamento?municipio={PVH}")
        assert page.locator("h1").inner_text() == "Planejamento — Porto Velho/RO"
        expect(page.locator("#mapa-planejamento")).to_have_attribute("data-ready", "true")
        cells = page.request.get(f"/planejamento/{PVH}/mapa.json").json()["layers"]["cells"]
        assert cells["features"]  # each cell: its hexagon and a dot at its centre, above
        drawn = page.locator("#mapa-planejamento path[stroke='#7f2704']")
        expect(drawn).to_have_count(2 * len(cells["features"]))
        with page.expect_download() as info:
            page.get_by_role("link", name="Indicadores do plano (CSV)").click()
        download = info.value
        assert download.suggested_filename == f"plano-{PVH}-taxi-2022-indicadores.csv"
        rows = _csv_rows(Path(download.path()).read_bytes())
        by_key = {r["campo"]: r["valor"] for r in rows}

        shown = {
            row.get_attribute("data-key"): row.locator("td").inner_text()
            for row in page.locator("#indicadores tr").all()
        }
        assert set(shown) == set(by_key)
        assert shown["population"].replace(".", "") == by_key["population"]
        assert shown["fleet_current"] == by_key["fleet_current"] == "8"
        assert by_key["inhabitants_per_taxi"] == str(round(int(by_key["population"]) / 8))
        assert shown["accessible_current"] == by_key["accessible_current"] == "2"
        assert shown["fleet_gap"] == by_key["fleet_gap"]
        for key, value in by_key.items():
            if value and key not in ("service",):
                assert shown[key].replace(".", "") == value.replace(".", ""), key

        cli = _cli_plan(web_database_url, tmp_path)
        for key in COMPARED:
            expected = "" if cli[key] is None else str(cli[key])
            assert by_key[key] == expected, key
        assert by_key["fleet_gap"] == cli["fleet_gap"]["message"]
        assert by_key["accessible_gap"] == cli["accessible_gap"]["message"]
        assert by_key["vehicles.checked"] == str(cli["vehicles"]["checked"])
        assert cli["vehicles"]["max_age_years"] is None  # Porto Velho's law sets no maximum
        assert by_key["vehicles.over_age"] == ""  # so no age was judged ("—" on the page)
        assert by_key["vehicles.checked"] == "8"
        assert by_key["fleet_min"] == "658" and by_key["accessible_min"] == "1"
        assert_accessible(page)
        save_screenshot(page, "web-planejamento.png")

    def test_demand_tables_match_the_page(self, web_client: Callable, seeded_plan: None) -> None:
        """Areas: every cell with pickups (10 pickups in 4 cells), the page's top rows first;
        candidates: the place seen on 3 days; vehicles: none to check (no age or inspection
        rule in Porto Velho's law), the header still there."""
        client = web_client("planner")
        html = client.get(f"/planejamento?municipio={PVH}").text
        areas = _csv_rows(client.get(f"/planejamento/{PVH}/areas.csv").content)
        assert sum(int(r["embarques"]) for r in areas) == 10
        assert len(areas) == 4
        assert "," in areas[0]["lat"] and float(areas[0]["lat"].replace(",", ".")) < 0
        assert f"<code>{areas[0]['celula_h3']}</code>" in html
        assert "10 embarques em 4 células H3" in html
        assert "um ponto sem capacidade no cadastro conta uma vaga" in html
        candidates = _csv_rows(client.get(f"/planejamento/{PVH}/candidatos.csv").content)
        assert [(r["local"], r["dias"], r["veiculos"]) for r in candidates] == [
            ("PL-PLACE", "3", "2")
        ]
        answer = client.get(f"/planejamento/{PVH}/veiculos.csv")
        assert answer.content.decode("utf-8-sig").startswith("prefixo;ano;idade_anos;")  # Excel
        assert _csv_rows(answer.content) == []

    def test_rounding_is_a_sentence(self, web_client: Callable) -> None:
        """The rounding line says, in words and with the plan's figures, how Porto Velho's
        500–700 inhabitants per taxi give 658 and 920 taxis (no "=", "ceil" or "floor")."""
        html = web_client("planner").get(f"/planejamento?municipio={PVH}").text
        line = re.search(r'<tr data-key="rule.rounding">.*?<td>([^<]*)</td>', html)
        assert line is not None
        said = line.group(1)
        assert said == (
            "Frota mínima: 658 táxis, pois 460.413 habitantes divididos por 700 (o máximo de "
            "habitantes por táxi) dão 657,7, arredondado para cima. Frota máxima: 920 táxis, "
            "pois 460.413 habitantes divididos por 500 (o mínimo de habitantes por táxi) dão "
            "920,8, arredondado para baixo. Os arredondamentos favorecem o cumprimento da lei."
        )
        for formula in ("=", "×", "ceil", "floor", "frota_min", "/"):
            assert formula not in said, formula
        figures = dict(re.findall(_FIGURE, html))
        assert figures["fleet_min"] == "658" and figures["fleet_max"] == "920"
        assert figures["population"] == "460.413"

    def test_map_layers(self, web_client: Callable, seeded_plan: None) -> None:
        """The map's GeoJSON: the boundary, the two stands and their coverage, 4 cells, the
        candidate; bounds around them all (no cell cut at the map's edge)."""
        data = web_client("planner").get(f"/planejamento/{PVH}/mapa.json").json()
        counts = {k: len(v["features"]) for k, v in data["layers"].items()}
        assert counts == {"boundary": 1, "coverage": 2, "cells": 4, "stands": 2, "candidates": 1}
        heat = {f["properties"]["heat"] for f in data["layers"]["cells"]["features"]}
        assert max(heat) == 6 and min(heat) >= 1
        (south, west), (north, east) = data["bounds"]
        assert south < STAND_A[0] < north and west < STAND_A[1] < east
        for cell in data["layers"]["cells"]["features"]:
            for lon, lat in cell["geometry"]["coordinates"][0]:
                assert south <= lat <= north and west <= lon <= east, cell["properties"]["cell"]


class TestChoice:
    def test_the_list_says_which_service_each_rule_is_for(self, web_client: Callable) -> None:
        """Porto Alegre's bundled planning rule is its fretamento's, not its taxis': the list
        says so (its taxi plan has no rule to show)."""
        page = web_client("planner").get("/planejamento").text
        assert "(4314902) — regra para fretamento assistencial</option>" in page
        assert "(1100205) — regra para táxi</option>" in page

    def test_search_by_name_without_accents(self, web_client: Callable) -> None:
        """ "porto velho" finds Porto Velho (1100205) and shows its plan."""
        response = web_client("planner").get("/planejamento", params={"busca": "porto velho"})
        assert response.status_code == 200
        assert "<h1>Planejamento — Porto Velho/RO</h1>" in response.text

    def test_a_found_name_leaves_the_list_in_charge(self, web_client: Callable) -> None:
        """After "pinto bandeira" is found, the search field is empty and the list shows it
        chosen, so a later choice in the list wins; a name not found keeps the list's choice."""
        client = web_client("planner")
        found = client.get("/planejamento", params={"busca": "pinto bandeira"}).text
        assert 'name="busca" type="search" value=""' in found
        assert '<option value="4314548" selected>' in found
        missed = client.get("/planejamento", params={"municipio": "4314548", "busca": "xyzzy"})
        assert missed.status_code == 422
        assert '<option value="4314548" selected>' in missed.text

    def test_one_exact_name_shows_its_plan_and_offers_the_others(
        self, web_client: Callable
    ) -> None:
        """ "porto" is Porto/PI's name: its plan, with links to the others containing it
        (Porto Alegre, Porto Velho…), which a planner typing "porto" may have meant."""
        page = web_client("planner").get("/planejamento", params={"busca": "porto"}).text
        assert "<h1>Planejamento — Porto/PI</h1>" in page
        also = page[page.index('id="tambem"') :].split("</p>")[0]
        assert "Também com “porto”" in also and "Porto Alegre/RS" in also
        assert "Porto Velho/RO" in also

    def test_several_exact_names_are_listed_and_counted(self, web_client: Callable) -> None:
        """ "bom jesus" lists the five of that name first and counts every name containing it
        (it said "5 municípios com 'bom jesus'" and hid Bom Jesus da Lapa)."""
        page = web_client("planner").get("/planejamento", params={"busca": "bom jesus"}).text
        assert "5 municípios chamados “Bom Jesus”; " in page and "com “bom jesus”" in page
        assert "Bom Jesus da Lapa/BA" in page
        assert 'role="status">' in page and "notice--error" not in page

    def test_a_choice_in_the_list_beside_a_listed_search_wins(self, web_client: Callable) -> None:
        """With a search's list shown, choosing in Município and pressing "Ver o plano" shows
        that plan (the search, unchanged, took precedence and listed again); a changed search
        searches."""
        client = web_client("planner")
        listed = client.get("/planejamento", params={"busca": "bom jesus"}).text
        assert '<input type="hidden" name="lista" value="bom jesus">' in listed
        params = {"busca": "bom jesus", "lista": "bom jesus", "municipio": "1100205"}
        chosen = client.get("/planejamento", params=params).text
        assert "<h1>Planejamento — Porto Velho/RO</h1>" in chosen
        assert 'name="busca" type="search" value=""' in chosen  # the next change is the list's
        params["busca"] = "pinto bandeira"
        searched = client.get("/planejamento", params=params).text
        assert "<h1>Planejamento — Pinto Bandeira/RS</h1>" in searched

    def test_ambiguous_name_lists_the_choices(self, web_client: Callable) -> None:
        """A name part shared by several municipalities lists links to each (accents
        ignored: "pinto" finds Pintópolis too)."""
        response = web_client("planner").get("/planejamento", params={"busca": "pinto"})
        assert "4 municípios com “pinto”: escolha um." in response.text
        assert "/planejamento?municipio=4314548&amp;" in response.text  # Pinto Bandeira
        assert "Pintópolis/MG (3150570)" in response.text

    @pytest.mark.parametrize(
        ("params", "message"),
        [
            ({"busca": "xyzzy"}, "Nenhum município do IBGE com “xyzzy”"),
            (
                {"ano": "2023"},
                "População: &#39;2023&#39; não é um ano da lista; escolha 2022 ou 2024",
            ),
            ({"dias": "abc"}, "Demanda: &#39;abc&#39; dias não está na lista; escolha 7, 30, 90"),
            ({"municipio": "1234567"}, "não encontrado entre os municípios do IBGE"),
            ({"municipio": "43145489"}, "Código IBGE &#39;43145489&#39; inválido"),  # not cut
            ({"municipio": "4314902abc"}, "Código IBGE &#39;4314902abc&#39; inválido"),
        ],
    )
    def test_bad_choices_are_said(
        self, web_client: Callable, params: dict[str, str], message: str
    ) -> None:
        """A bad name, year, window or code: 422 with a pt-BR message naming it, no plan."""
        response = web_client("planner").get("/planejamento", params=params)
        assert response.status_code == 422
        assert message in response.text
        assert 'role="alert"' in response.text and "Exportar (CSV)" not in response.text

    def test_a_bad_year_keeps_a_municipality_chosen(self, web_client: Callable) -> None:
        """After a bad year, the form stays on the municipality typed, or on the one shown by
        default; sent again, it does not jump to the list's first city."""
        for params in ({"municipio": "4314548", "ano": "2023"}, {"ano": "2023"}):
            response = web_client("planner").get("/planejamento", params=params)
            assert response.status_code == 422
            chosen = re.findall(r'<option value="(\d{7})"\s+selected>', response.text)
            assert len(chosen) == 1 and chosen[0] == params.get("municipio", chosen[0])

    def test_municipality_without_rule(self, web_client: Callable) -> None:
        """São Paulo has no bundled rule: the population and the message, no allowed fleet."""
        html = web_client("planner").get("/planejamento", params={"municipio": "3550308"}).text
        assert "Nenhuma regra de planejamento configurada para São Paulo" in html
        assert "<h1>Planejamento — São Paulo/SP</h1>" in html

    def test_unknown_table_is_404(self, web_client: Callable) -> None:
        """A table that does not exist: the 404 page naming the tables."""
        response = web_client("planner").get(f"/planejamento/{PVH}/nada.csv")
        assert response.status_code == 404
        assert "esperado uma de indicadores, areas, candidatos, veiculos" in response.text

    def test_agent_cannot_download(self, web_client: Callable) -> None:
        """An agent is refused the CSV and the map data (403 page)."""
        client = web_client("agent")
        assert client.get(f"/planejamento/{PVH}/indicadores.csv").status_code == 403
        assert client.get(f"/planejamento/{PVH}/mapa.json").status_code == 403

    @pytest.mark.browser
    def test_the_chart_stays_readable_on_a_phone(
        self, open_page: Callable, login: Callable, seeded_plan: None
    ) -> None:
        """At 390 px the chart keeps its labels at 9 px or more (they shrank to 6 px) and
        scrolls inside its box, not the page; the page passes axe."""
        phone = open_page(width=390, height=844, is_mobile=True, has_touch=True)
        login(phone, "planner")
        phone.goto(f"/planejamento?municipio={PVH}")
        drawn = phone.locator(".chart svg").bounding_box()
        assert drawn is not None and drawn["width"] >= 560
        assert drawn["width"] * 11 / 640 >= 9
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        assert_accessible(phone)

    @pytest.mark.browser
    def test_an_empty_map_says_why(self, page: Any, login: Callable) -> None:
        """A municipality without a bundled boundary nor registry data (São Paulo here): the
        map of Brazil says there is nothing to show, not a grey map without a word."""
        login(page, "planner")
        page.goto("/planejamento?municipio=3550308")
        page.wait_for_selector("#mapa-planejamento[data-ready='true']")
        assert "Nada a mostrar no mapa deste município" in page.inner_text("#mapa-estado")

    def test_plan_page_keyboard(self, page: Any, login: Callable) -> None:
        """The form is labelled and sent with the keyboard: choosing 2024 shows that year."""
        login(page, "planner")
        page.goto(f"/planejamento?municipio={PVH}")
        year = page.get_by_label("População", exact=True)
        year.focus()
        year.select_option("2024")
        page.keyboard.press("Tab")  # the demand window
        page.keyboard.press("Tab")  # the button
        assert page.evaluate("document.activeElement.textContent") == "Ver o plano"
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert "ano=2024" in page.url
        assert "população de 2024" in page.locator(".lead").inner_text()


def test_an_old_history_says_its_last_day_and_proposes_no_old_place(web_engine: Engine) -> None:
    """A fleet whose fixes and informal places are 200 days old (the demo's simulated week of
    2024): with no boarding in the window the plan names the fleet's last day with data, and
    places found before the window are no candidates under "últimos 30 dias"."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import Point
    from sqlalchemy.orm import Session

    from api.map_data import findings_frame
    from api.web.planner import PlanOptions, compute_plan
    from db.enforcement.models import Finding
    from db.fleet.models import Vehicle, VehicleStatusPeriod

    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=200)
    lat, lon = -29.10, -51.45  # Pinto Bandeira
    with web_engine.connect() as conn, Session(bind=conn) as session:
        transaction = conn.begin()
        try:
            session.execute(
                text(
                    "INSERT INTO municipalities (code, name, uf, timezone) VALUES "
                    "('4314548', 'Pinto Bandeira', 'RS', 'America/Sao_Paulo') "
                    "ON CONFLICT DO NOTHING"
                )
            )
            session.add(
                Vehicle(vehicle_id="PB-VELHO", prefixo="PB-VELHO", municipality_code="4314548")
            )
            session.flush()
            session.add(
                VehicleStatusPeriod(
                    vehicle_id="PB-VELHO", status="active", valid_from=dt.date(2020, 1, 1)
                )
            )
            for k in range(3):
                t = old + dt.timedelta(days=k)
                session.execute(
                    text(
                        "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, "
                        "source) VALUES ('PB-VELHO', :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), "
                        "'occupied', false, 'test')"
                    ),
                    {"ts": t, "lat": lat, "lon": lon},
                )
                session.add(
                    Finding(
                        finding_id=f"PB-VELHO-ISF-{k}", kind="illegal_stand_formation",
                        vehicle_id=None, stand_id=None, started_at=t,
                        ended_at=t + dt.timedelta(minutes=30), confidence=0.8,
                        details={"place_id": "PB-VELHO", "dates": [t.date().isoformat()],
                                 "vehicles": ["PB-VELHO"]},
                        geometry=from_shape(Point(lon, lat).buffer(0.0002), srid=4326),
                    )
                )  # fmt: skip
            session.flush()
            computed = compute_plan(session, PlanOptions("4314548", 2022, "taxi", 30))
            assert computed["latest_data_day"] == (old + dt.timedelta(days=2)).astimezone(TZ).date()
            assert computed["plan"]["candidates"] == []
            older = compute_plan(session, PlanOptions("4314548", 2022, "taxi", 365))
            assert older["latest_data_day"] is None and len(older["plan"]["candidates"]) == 1
            # The planner map of the API reads the same window (it listed every finding).
            now = dt.datetime.now(dt.UTC)
            kinds = ("illegal_stand_formation",)
            month = findings_frame(
                session, kinds=kinds, limit=5000, window=(now - dt.timedelta(days=30), now)
            )
            year = findings_frame(
                session, kinds=kinds, limit=5000, window=(now - dt.timedelta(days=365), now)
            )
            assert "PB-VELHO-ISF-0" not in set(month["finding_id"])
            assert "PB-VELHO-ISF-0" in set(year["finding_id"])
        finally:
            transaction.rollback()


def _poa_plan_without_rule(fleet: Any, today: dt.date) -> dict[str, Any]:
    """Porto Alegre's 2022 taxi plan of ``fleet``, without a rule (no age maximum)."""
    from planning.population import bundled_population_table, population_for
    from planning.report import build_plan

    return build_plan(
        population=population_for(bundled_population_table(), municipality="4314902", year=2022),
        service="taxi", rule=None, rule_source=None, no_rule_message="sem regra",
        fleet=fleet, fleet_source="cadastro", as_of=today,
    )  # fmt: skip


def test_without_an_age_rule_the_age_is_not_reported_as_checked() -> None:
    """Porto Alegre's taxi has no age maximum: the figures say "—", not "0 acima da idade
    máxima", and the vehicles CSV has no over-age column; an expired seal is still listed."""
    import pandas as pd

    from api.web.planner import figure_rows, table_csv

    today = dt.date.today()
    fleet = pd.DataFrame(
        {"vehicle_id": ["V1", "V2"], "year": pd.array([1990, 2024], dtype="Int64"),
         "inspection_valid_until": [today - dt.timedelta(days=3), today + dt.timedelta(days=300)]}
    )  # fmt: skip
    plan = _poa_plan_without_rule(fleet, today)
    (over,) = [r for r in figure_rows(plan) if r["key"] == "vehicles.over_age"]
    assert (over["value"], over["shown"]) == (None, "—")
    header, *rows = table_csv("veiculos", {"plan": plan}).splitlines()
    assert "acima_da_idade" not in header and len(rows) == 1 and rows[0].startswith("V1;")


def test_vehicles_without_an_inspection_date_are_counted_as_unchecked() -> None:
    """A registry without inspection dates is not "0 with an inspection due": the vehicles
    without one are counted, in the plan, the terminal's table and the HTML report."""
    import pandas as pd

    from planning.report import render_html, render_table

    today = dt.date.today()
    fleet = pd.DataFrame(
        {"vehicle_id": ["V1", "V2", "V3"], "year": pd.array([2020] * 3, dtype="Int64"),
         "inspection_valid_until": [today - dt.timedelta(days=3), None, None]}
    )  # fmt: skip
    plan = _poa_plan_without_rule(fleet, today)
    assert plan["vehicles"]["unknown_inspection"] == 2
    assert "vistoria vencida ou a vencer: 1; sem data de vistoria no cadastro: 2" in (
        render_table(plan)
    )
    assert "sem data de vistoria no cadastro: 2" in render_html(plan)
    expired = today - dt.timedelta(days=3)
    assert plan["vehicles"]["inspection"][0]["issues"] == [
        f"vistoria vencida em {expired:%d/%m/%Y}"
    ]


def test_landing_shows_the_registry_municipality(
    web_client: Callable, seeded_plan: None, web_engine: Engine
) -> None:
    """Without a choice, the plan is that of the municipality with most registry records."""
    with web_engine.connect() as conn:
        top = conn.execute(
            text(
                "SELECT code FROM (SELECT municipality_code AS code FROM stands "
                "WHERE retired_at IS NULL UNION ALL SELECT municipality_code FROM vehicles) r "
                "WHERE code IS NOT NULL GROUP BY code ORDER BY count(*) DESC, code LIMIT 1"
            )
        ).scalar_one()
    response = web_client("planner").get("/planejamento")
    assert response.status_code == 200
    assert f'<option value="{top}" selected>' in response.text


@pytest.mark.parametrize("top", [1, 2, 4, 7, 36, 100, 1234])
def test_heat_legend_matches_the_cells_colours(top: int) -> None:
    """Each pickup count 1…top is in exactly one legend range, the class heat_class gives it."""
    from api.web.planner import heat_class, heat_legend

    ranges = []
    for entry in heat_legend(top):
        parts = entry["label"].replace(".", "").split(" a ")
        ranges.append((entry["heat"], int(parts[0]), int(parts[-1])))
    for count in range(1, top + 1):
        classes = [k for k, lo, hi in ranges if lo <= count <= hi]
        assert classes == [heat_class(count, top)], count
    assert heat_class(top, top) == 6


def test_a_long_search_says_how_many_match_and_ranks_the_beginnings() -> None:
    """ "são" matches hundreds of names: the names that begin with it come first (not Águas de
    São Pedro), the count is all of them, not the 20 shown."""
    from api.web.planner import MAX_MATCHES, Found, find_municipalities, municipality_names

    found = find_municipalities("são")
    names = [municipality_names()[c][0] for c in found.codes]
    assert len(found.codes) == MAX_MATCHES < found.total
    assert all(n.startswith("São ") for n in names)
    assert find_municipalities("4314902") == Found(["4314902"], 1, 1)
    assert find_municipalities("nenhum lugar assim") == Found([], 0, 0)


@pytest.mark.parametrize(
    "typed", ["Porto Alegre/RS", "porto alegre - rs", "Porto Alegre/RS (4314902)", "4314902"]
)
def test_a_name_as_the_list_writes_it_is_found(typed: str) -> None:
    """ "Porto Alegre/RS", as the list shows it, or with its code, finds Porto Alegre alone."""
    from api.web.planner import find_municipalities

    assert find_municipalities(typed).codes == ["4314902"]


def test_exact_names_come_first_and_the_others_are_counted() -> None:
    """ "bom jesus": the five municipalities of that name first, then the others containing
    it (Bom Jesus da Lapa…), all counted; "bom jesus/pi" is Piauí's alone."""
    from api.web.planner import find_municipalities, municipality_names

    found = find_municipalities("bom jesus")
    names = [municipality_names()[c][0] for c in found.codes]
    assert found.exact == 5 and names[:5] == ["Bom Jesus"] * 5
    assert found.total > 15 and "Bom Jesus da Lapa" in names
    assert len(find_municipalities("bom jesus/pi").codes) == 1


def test_a_long_search_is_said_on_the_page(web_client: Callable) -> None:
    """The page gives the whole count and says only the first are listed."""
    response = web_client("planner").get("/planejamento", params={"busca": "são"})
    assert response.status_code == 200
    assert "municípios com “são”; os 20 primeiros abaixo" in response.text
