"""The console's import (``/admin/importacao``) at its edges, against a real ``pontual serve``:
a pt-BR Excel CSV of stands, a municipality the registry lacks, a GeoJSON nested too deep, and
columns that would be dropped (unknown, repeated) refused by name."""

from __future__ import annotations

import html
import itertools
import os
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine
from web_helpers import csrf_from

from db.engine import session_scope
from db.fleet.models import Municipality
from db.stands.models import Stand

POA = "4314902"
_ids = itertools.count(1)


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


@pytest.fixture
def poa(web_engine: Engine) -> str:
    """Porto Alegre in the registry (the stands of these files are placed there)."""
    with session_scope(web_engine) as session:
        if session.get(Municipality, POA) is None:
            session.add(Municipality(code=POA, name="Porto Alegre", uf="RS"))
    return POA


def _post(admin: Any, kind: str, name: str, content: bytes, **fields: str) -> Any:
    token = csrf_from(admin.get("/admin/importacao").text)
    data = {"csrf_token": token, "kind": kind, "radius_m": "30", "retire_missing": ""} | fields
    return admin.post(
        "/admin/importacao",
        data=data,
        files={"file": (name, content, "application/octet-stream")},
        headers={"Accept": "text/html"},
    )


def _preview(admin: Any, kind: str, name: str, content: bytes, **fields: str) -> tuple[str, str]:
    """Upload a file; return its preview page (unescaped) and the upload's id."""
    upload = _post(admin, kind, name, content, **fields)
    assert upload.status_code == 303, upload.text
    location = upload.headers["location"]
    return html.unescape(admin.get(location).text), location.split("envio=")[1]


class TestExcelStands:
    def test_semicolons_and_decimal_commas_import(
        self, web_client: Callable, web_engine: Engine, poa: str
    ) -> None:
        """A stands CSV as Excel in pt-BR saves it (';', '-30,03') previews and imports as the
        CLI's reader reads it, every row valid."""
        a, b = _unique("XLS"), _unique("XLS")
        content = (
            "stand_id;lat;lon;name;radius_m\n"
            f"{a};-30,03;-51,22;QA um;25,5\n"
            f"{b};-30,04;-51,23;QA dois;30\n"
        )
        admin = web_client("admin")
        page, envio = _preview(
            admin, "pontos", "pontos.csv", content.encode("cp1252"), municipality=poa
        )
        assert "valor não numérico" not in page
        assert "<dt>Linhas válidas</dt><dd>2</dd>" in page
        assert "<dt>Linhas rejeitadas</dt><dd>0</dd>" in page
        token = csrf_from(page)
        done = admin.post("/admin/importacao/confirmar", data={"csrf_token": token, "envio": envio})
        assert done.status_code == 303
        with session_scope(web_engine) as session:
            stand = session.get(Stand, a)
            assert stand is not None and stand.municipality_code == poa
            assert session.get(Stand, b) is not None


class TestMunicipality:
    @pytest.mark.parametrize(
        ("code", "said"),
        [
            ("1234567", "município '1234567' não cadastrado; use o código IBGE de 7 dígitos"),
            ("4314903", "município '4314903' não cadastrado"),
            ("abc", "'abc' não é um código IBGE; use os 7 dígitos do município"),
            ("123", "'123' não é um código IBGE"),
        ],
    )
    @pytest.mark.parametrize("kind", ["pontos", "frota"])
    def test_a_code_the_registry_lacks_is_a_form_error(
        self, web_client: Callable, code: str, said: str, kind: str
    ) -> None:
        """The form's municipality is checked as the API checks it: 422 on the form, in pt-BR,
        never a 500."""
        name = "pontos.csv" if kind == "pontos" else "frota.csv"
        content = (
            f"stand_id,lat,lon\n{_unique('MUN')},-30.03,-51.22\n"
            if kind == "pontos"
            else f"vehicle_id\n{_unique('MUN')}\n"
        )
        answer = _post(web_client("admin"), kind, name, content.encode(), municipality=code)
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith("text/html")
        assert said in html.unescape(answer.text)

    def test_a_code_of_the_file_the_registry_lacks_rejects_its_row(
        self, web_client: Callable, web_engine: Engine, poa: str
    ) -> None:
        """A stand whose own 'municipality' the registry lacks is a rejected row with the
        reason; the other row stays valid."""
        good, bad = _unique("MUNF"), _unique("MUNF")
        content = (
            "stand_id,lat,lon,municipality\n"
            f"{good},-30.03,-51.22,{poa}\n"
            f"{bad},-30.04,-51.23,1234567\n"
        )
        page, _ = _preview(web_client("admin"), "pontos", "pontos.csv", content.encode())
        assert "município '1234567' não cadastrado" in page
        assert "<dt>Linhas válidas</dt><dd>1</dd>" in page
        assert "<dt>Linhas rejeitadas</dt><dd>1</dd>" in page


def test_stand_rows_are_numbered_as_the_spreadsheet_shows(
    web_client: Callable, web_engine: Engine, poa: str
) -> None:
    """A stands CSV's rows are the spreadsheet's (the header is row 1), as the fleet's: a
    blank line is row 3, refused, and the bad coordinate after it is row 4."""
    good, bad = _unique("ROW"), _unique("ROW")
    content = (
        f"stand_id,lat,lon,municipality\n{good},-30.03,-51.22,{poa}\n\n{bad},norte,-51.2,{poa}\n"
    )
    page, _ = _preview(web_client("admin"), "pontos", "pontos.csv", content.encode())
    assert "pontos.csv', linha 4: valor não numérico 'norte'" in page
    assert "stand_id ausente em 'pontos.csv': linha 3" in page
    assert "<dt>Linhas válidas</dt><dd>1</dd>" in page
    assert "<dt>Linhas rejeitadas</dt><dd>2</dd>" in page
    assert "a linha é a da planilha (o cabeçalho é a linha 1)" in page


def test_a_stand_far_from_its_municipality_is_a_rejected_row(
    web_client: Callable, web_engine: Engine
) -> None:
    """A municipality with its boundary stored: a stand with latitude and longitude swapped is
    a rejected row with the reason (as the one-stand form refuses it); the other row stays
    valid."""
    from sqlalchemy import text

    code = "4399997"
    with session_scope(web_engine) as session:
        if session.get(Municipality, code) is None:
            session.add(Municipality(code=code, name="Limite Teste", uf="RS"))
            session.flush()
            session.execute(
                text(
                    "UPDATE municipalities SET boundary = ST_Multi(ST_MakeEnvelope("
                    "-51.28, -30.08, -51.18, -29.98, 4326)) WHERE code = :c"
                ),
                {"c": code},
            )
    good, swapped = _unique("LIM"), _unique("LIM")
    content = f"stand_id,lat,lon\n{good},-30.03,-51.22\n{swapped},-51.22,-30.03\n"
    page, _ = _preview(web_client("admin"), "pontos", "pontos.csv", content.encode(),
                       municipality=code)  # fmt: skip
    assert f"{swapped} ({code})" in page and "latitude e longitude trocadas?" in page
    assert "<dt>Linhas válidas</dt><dd>1</dd>" in page
    assert "<dt>Linhas rejeitadas</dt><dd>1</dd>" in page


def test_a_geojson_nested_too_deep_is_refused_in_portuguese(web_client: Callable) -> None:
    """5,000 nested lists: the file is refused as "JSON aninhado demais", not a 500."""
    content = b'{"type":"FeatureCollection","features":' + b"[" * 5000 + b"]" * 5000 + b"}"
    page, _ = _preview(web_client("admin"), "pontos", "s.geojson", content, municipality="")
    assert "arquivo ilegível: GeoJSON inválido: JSON aninhado demais" in page


def test_a_csv_field_over_the_limit_is_refused_in_portuguese(web_client: Callable) -> None:
    """A fleet CSV whose second line is one 1,000,000-character field: refused naming the line
    and the limit in pt-BR, not the csv module's English."""
    content = b"vehicle_id,prefixo\n" + b"x" * 1_000_000 + b"\n"
    page, _ = _preview(web_client("admin"), "frota", "f.csv", content, municipality="")
    assert (
        "arquivo ilegível: f.csv, linha 2: um campo passa do limite de 131.072 caracteres" in page
    )
    assert "field limit" not in page


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (  # the quote would swallow QA-E2's row into QA-E1's model, both rows "valid"
            b'vehicle_id,plate,model,status\nQA-E1,QAA1A31,"Sedan,active\nQA-E2,QAA1A32,Hatch,'
            b"active\n",
            "q.csv, linha 2: CSV malformado (uma aspa sem fechar): um campo entre aspas não fecha "
            "na sua linha e junta as linhas 2 a 3",
        ),
        (  # the database refused the NUL: the generic "Formulário" page, no preview
            b"vehicle_id,plate\nQA-E3,AAA1A11\nQA-E4,QA\x00A20\n",
            "q.csv, linha 3: a linha contém o caractere nulo (\\0)",
        ),
        (  # one Latin-1 byte: read as Windows-1252, every accent of the file would change
            "vehicle_id,model\nQA-E5,Sedã\n".encode() + "QA-E6,Ônix\n".encode("cp1252"),
            "q.csv, linha 3: um caractere não está em UTF-8",
        ),
    ],
)
def test_a_fleet_csv_that_would_lose_rows_is_refused_naming_the_line(
    web_client: Callable, content: bytes, said: str
) -> None:
    """A file whose reading would store rows other than written is refused whole, naming the
    line, before anything is written."""
    page, _ = _preview(web_client("admin"), "frota", "q.csv", content, municipality="")
    assert f"arquivo ilegível: {said}" in page


class TestColumns:
    def test_unknown_fleet_columns_are_named(self, web_client: Callable) -> None:
        """'acessivel' and 'municipality_code' would be dropped: the file is refused, naming
        them and the names they are closest to."""
        content = (
            "vehicle_id,municipality_code,acessivel,placa_typo\n"
            f"{_unique('COL')},4314902,sim,ABC1234\n"
        )
        page, _ = _preview(web_client("admin"), "frota", "f.csv", content.encode())
        assert "Arquivo recusado" in page
        assert (
            "f.csv: colunas desconhecidas 'municipality_code' (quis dizer 'municipality'?), "
            "'acessivel' (quis dizer 'accessible'?), 'placa_typo'; corrija o nome ou remova "
            "a coluna (nenhuma é ignorada)"
        ) in page
        assert "<dt>Linhas válidas</dt><dd>0</dd>" in page

    @pytest.mark.parametrize(
        ("kind", "content", "said"),
        [
            ("frota", "vehicle_id,accessible,accessible\n{id},true,false\n", "'accessible'"),
            ("pontos", "stand_id,lat,lon,lat\n{id},-30.03,-51.22,-31\n", "'lat'"),
        ],
    )
    def test_a_repeated_header_is_refused(
        self, web_client: Callable, kind: str, content: str, said: str
    ) -> None:
        """A column named twice is refused by name (one of its values would be dropped)."""
        data = content.format(id=_unique("REP")).encode()
        page, _ = _preview(web_client("admin"), kind, "r.csv", data)
        assert (
            f"r.csv: coluna {said} repetida no cabeçalho; cada coluna deve aparecer uma vez" in page
        )
        assert "<dt>Linhas válidas</dt><dd>0</dd>" in page

    def test_a_key_given_twice_in_a_geojson_is_refused(self, web_client: Callable) -> None:
        """ "stand_id" twice in one feature: refused, as the device ingest refuses it."""
        content = (
            b'{"type":"FeatureCollection","features":[{"type":"Feature","properties":'
            b'{"stand_id":"QA-S9","stand_id":"QA-S8"},'
            b'"geometry":{"type":"Point","coordinates":[-51.22,-30.03]}}]}'
        )
        page, _ = _preview(web_client("admin"), "pontos", "d.geojson", content)
        assert "chave 'stand_id' repetida num mesmo objeto" in page

    def test_unknown_stands_csv_column_is_named(self, web_client: Callable) -> None:
        """A stands CSV with 'nome' for 'name' is refused, suggesting 'name'."""
        content = f"stand_id,lat,lon,nome\n{_unique('COL')},-30.03,-51.22,Ponto\n"
        page, _ = _preview(web_client("admin"), "pontos", "p.csv", content.encode())
        assert "p.csv: coluna desconhecida 'nome' (quis dizer 'name'?)" in page
