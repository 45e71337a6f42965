"""The fleet import preview (``/admin/importacao``) as the admin reads it, against a real
``pontual serve``: the spreadsheet's row numbers, every problem of a row, the status in
Portuguese, the size limit in MB and sentences without "(s)"."""

from __future__ import annotations

import html
import itertools
import os
import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, select, text
from web_helpers import csrf_from

from api.web.admin_imports import renumber
from api.web.formats import file_size
from db.engine import session_scope
from db.fleet.models import Vehicle

_ids = itertools.count(1)
_ROW = re.compile(r'<tr><th scope="row">(\d+)</th><td>([^<]*)</td><td>(.*?)</td></tr>', re.S)


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def _upload(admin: Any, name: str, content: str) -> tuple[str, str]:
    """Upload a fleet file; return its preview page (unescaped) and the preview's URL."""
    token = csrf_from(admin.get("/admin/importacao").text)
    upload = admin.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "frota"},
        files={"file": (name, content.encode(), "text/csv")},
    )
    assert upload.status_code == 303
    url = upload.headers["location"]
    return html.unescape(admin.get(url).text), url


def _rejected(page: str) -> dict[str, list[str]]:
    """Return each rejected row's number and its reasons, from the preview's table."""
    found = {}
    for row, _key, cell in _ROW.findall(page):
        items = re.findall(r"<li>(.*?)</li>", cell, re.S)
        found[row] = items or [cell.strip()]
    return found


def _vehicles(engine: Engine, ids: list[str]) -> set[str]:
    with session_scope(engine) as session:
        chosen = select(Vehicle.vehicle_id).where(Vehicle.vehicle_id.in_(ids))
        return set(session.scalars(chosen))


def test_preview_names_spreadsheet_rows_and_every_problem(
    web_client: Callable, web_engine: Engine
) -> None:
    """The 2nd data row is 'linha 3' (the header is row 1) in the table and in the reasons;
    a row with three bad values lists all three; 'ativo' and 'Fora de Operação' are read; a
    prefixo repeated with other values rejects both its rows (which is right, the file does
    not say)."""
    a, b, c = (_unique("PRV") for _ in range(3))
    content = (
        "vehicle_id,status,accessible,year\n"
        f"{a},ativo,sim,2019\n"
        f"{b},talvez,talvez,dois mil\n"
        f"{c},Fora de Operação,não,2020\n"
        f"{a},active,,\n"
    )
    admin = web_client("admin")
    page, url = _upload(admin, "frota_prevista.csv", content)
    rejected = _rejected(page)
    assert sorted(rejected) == ["2", "3", "5"]
    assert rejected["2"] == [
        f"frota_prevista.csv, linha 2, coluna vehicle_id: '{a}' se repete na linha 5 com outros "
        "valores; corrija uma das duas"
    ]
    assert rejected["3"] == [
        "frota_prevista.csv, linha 3, coluna status: 'talvez' não é uma situação conhecida; use "
        "ativo (active), suspenso (suspended), fora de operação (out_of_operation), reservado "
        "(reserved) ou cassado (revoked)",
        "frota_prevista.csv, linha 3, coluna accessible: 'talvez' não é sim nem não; use sim ou "
        "não (ou true/false, 1/0)",
        "frota_prevista.csv, linha 3, coluna year: 'dois mil' não é um ano; use o ano com 4 "
        "dígitos, de 1900 a 2100 (ex.: 2019)",
    ]
    assert rejected["5"] == [
        f"frota_prevista.csv, linha 5, coluna vehicle_id: '{a}' repete o veículo da linha 2 "
        "com outros valores"
    ]
    assert "a linha é a da planilha (o cabeçalho é a linha 1)" in page
    assert "<dt>Linhas válidas</dt><dd>1</dd>" in page
    assert "Importar grava a 1 linha válida e deixa de fora as 3 rejeitadas." in page
    assert "(s)" not in page

    token = csrf_from(page)
    done = admin.post(
        "/admin/importacao/confirmar", data={"csrf_token": token, "envio": url.split("=")[1]}
    )
    assert done.status_code == 303
    result = html.unescape(admin.get(url).text)
    said = "1 linha de frota_prevista.csv gravada. 3 linhas rejeitadas ficaram de fora."
    assert said in result
    assert _vehicles(web_engine, [a, b, c]) == {c}
    with session_scope(web_engine) as session:
        statuses = session.execute(
            text(
                "SELECT vehicle_id, status FROM vehicle_status_periods WHERE vehicle_id IN (:a, :c)"
            ),
            {"a": a, "c": c},
        ).all()
    assert statuses == [(c, "out_of_operation")]


def test_a_blank_line_keeps_the_rows_after_it_numbered_as_in_the_file(
    web_client: Callable,
) -> None:
    """Two blank lines between data rows are rows of the file (3 and 4, empty, said): the bad
    row after them is line 5, as the file and the audit should name it."""
    a, b = (_unique("BLK") for _ in range(2))
    content = f"vehicle_id,status\n{a},ativo\n\n\n{b},talvez\n\n"
    page, _ = _upload(web_client("admin"), "frota_brancos.csv", content)
    rejected = _rejected(page)
    assert sorted(rejected) == ["3", "4", "5"]
    assert rejected["5"][0].startswith("frota_brancos.csv, linha 5, coluna status: 'talvez'")
    assert rejected["3"] == [
        "frota_brancos.csv, linha 3, coluna vehicle_id: está vazia; cada linha precisa do "
        "prefixo do veículo"
    ]


def test_a_second_confirm_while_the_first_writes_is_refused(
    web_client: Callable, web_engine: Engine, web_server: Any
) -> None:
    """Two tabs confirming one preview: while one writes (its claim on the upload held), the
    other is told so (409) and writes nothing; once done, a confirm shows the result."""
    a = _unique("TAB")
    admin = web_client("admin")
    page, url = _upload(admin, "frota_abas.csv", f"vehicle_id,status\n{a},ativo\n")
    envio = url.split("=")[1]
    (folder,) = (web_server.log_path.parent / "web-imports").glob(f"*/{envio}")
    (folder / "gravando").mkdir()  # the first tab's write under way
    form = {"csrf_token": csrf_from(page), "envio": envio}
    second = admin.post("/admin/importacao/confirmar", data=form)
    assert second.status_code == 409
    assert "já está sendo gravada (em outra aba ou janela)" in html.unescape(second.text)
    assert _vehicles(web_engine, [a]) == set()
    (folder / "gravando").rmdir()
    assert admin.post("/admin/importacao/confirmar", data=form).status_code == 303
    assert _vehicles(web_engine, [a]) == {a}


def test_a_header_alone_is_said_to_have_nothing_to_import(web_client: Callable) -> None:
    """A file of its header only: the preview says there is nothing to import, no button."""
    page, _ = _upload(web_client("admin"), "frota_vazia.csv", "vehicle_id,status\n")
    assert "O arquivo não tem linhas de dados nem feições (só o cabeçalho, ou nada)" in page
    assert 'action="/admin/importacao/confirmar"' not in page


def test_preview_lists_the_first_rows_and_counts_them_all(web_client: Callable) -> None:
    """60 rows with two problems each: the first 50 are listed, the 60 rows and 120 problems
    counted, and the file is not refused whole."""
    good = _unique("PRV")
    lines = [f"{good},ativo,2019"]
    lines += [f"{_unique('PRV')},parado,19" for _ in range(60)]
    content = "vehicle_id,status,year\n" + "\n".join(lines) + "\n"
    page, _ = _upload(web_client("admin"), "muitos.csv", content)
    rejected = _rejected(page)
    assert len(rejected) == 50
    assert list(rejected)[:2] == ["3", "4"]
    assert all(len(reasons) == 2 for reasons in rejected.values())
    assert "<dt>Linhas rejeitadas</dt><dd>60</dd>" in page
    assert "(as primeiras 50 de 60, com 120 problemas ao todo)" in page
    assert "<dt>Linhas válidas</dt><dd>1</dd>" in page
    assert "Arquivo recusado" not in page


def test_size_limit_is_said_in_megabytes(web_client: Callable) -> None:
    """The form's hint says the limit in MB, never a count of bytes."""
    page = html.unescape(web_client("admin").get("/admin/importacao").text)
    assert "Tamanho máximo: 1,9 MB." in page  # the default 2 MiB body less 64 KiB of form
    assert " bytes." not in page


def test_file_size_words() -> None:
    """Sizes in MB (one decimal, rounded down), KB and bytes."""
    assert file_size(2 * 1024 * 1024 - 64 * 1024) == "1,9 MB"
    assert file_size(5 * 1024 * 1024) == "5,0 MB"
    assert file_size(340 * 1024 + 5) == "340 KB"
    assert file_size(512) == "512 bytes"
    assert file_size(1) == "1 byte"


def test_renumber_maps_spreadsheet_rows() -> None:
    """A part's 'linha 3' (its 2nd data row, as a spreadsheet shows it) made of file rows with
    index 4 and 9 is the file's spreadsheet row 11; other rows it names too."""
    message = "f.csv, linha 3, coluna vehicle_id: 'X' repete o veículo da linha 2"
    assert renumber(message, [4, 9], first=2) == (
        "f.csv, linha 11, coluna vehicle_id: 'X' repete o veículo da linha 6"
    )


def test_the_browser_refuses_a_file_over_the_limit_in_mb(page: Any, login: Callable) -> None:
    """Before sending, the page refuses a file over the limit and says both sizes in MB, as
    the server's hint does."""
    login(page, "admin")
    page.goto("/admin/importacao")
    limit = int(page.locator("#form-importacao").get_attribute("data-max-bytes") or 0)
    assert limit > 0
    page.set_input_files(
        '#form-importacao input[type="file"]',
        files=[{"name": "grande.csv", "mimeType": "text/csv", "buffer": b"x" * (limit + 1)}],
    )
    page.locator('#form-importacao button[type="submit"]').click()
    said = page.locator("#importacao-tamanho")
    said.wait_for(state="visible")
    text = said.inner_text()
    assert text.startswith("O arquivo tem ") and " MB; o limite é " in text, text
    assert "bytes" not in text
