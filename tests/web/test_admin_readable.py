"""Administração pages read as plain pt-BR against a real ``pontual serve``: the audit entries'
details as a labelled list, the import's rejection reasons without Python lists, and the
stands listed in natural order ("9" before "10") across pages.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from web_helpers import csrf_from

from db.enforcement.models import AuditEntry
from db.engine import session_scope
from db.stands.registry import create_stand

_ROW_ID = re.compile(r'<th scope="row"><a href="/admin/pontos/[^"]*">([^<]+)</a></th>')


def _upload(client: Any, name: str, content: bytes, kind: str = "pontos") -> str:
    """Send a file to the import form; return the text of its preview page."""
    token = csrf_from(client.get("/admin/importacao").text)
    answer = client.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": kind, "radius_m": "30"},
        files={"file": (name, content, "application/octet-stream")},
    )
    assert answer.status_code == 303, answer.text[-500:]
    return html.unescape(client.get(answer.headers["location"]).text)


# --- the audit log -------------------------------------------------------------------------------


@pytest.mark.browser
def test_audit_details_are_a_pt_br_list(
    page: Any, login: Callable, web_engine: Engine, tmp_path: Path
) -> None:
    """An entry's details: known keys by their pt-BR label ("motivo", not "reason"), values as
    text (lists joined, a change as "de … para …", sub-items, sim/—), an unknown key by its
    name, and the raw JSON behind "dados brutos"."""
    mark = f"LEGIVEL-{os.getpid()}"
    details = {
        "reason": "troca de ponto",
        "vehicle_id": "PFX-77",
        "stand_id": mark,
        "status": "ativo",
        "licences_ended": ["11", "12"],
        "valid_until": {"from": None, "to": "2024-06-30"},
        "counts": {"created": 2, "unchanged": 0},
        "dry_run": True,
        "minutes_ref": None,
        "campo_novo_xyz": "fica visível",
    }
    with session_scope(web_engine) as session:
        session.add(
            AuditEntry(
                actor="user:web_admin",
                action="end",
                entity="parking_licence",
                entity_id=mark,
                details=details,
            )
        )
    login(page, "admin")
    page.goto(f"/admin/auditoria?texto={mark}")
    row = page.get_by_role("row").filter(has_text=mark)
    assert row.count() == 1
    shown = row.locator("ul.audit-details").inner_text()
    for line in (
        "motivo: troca de ponto",
        "prefixo: PFX-77",
        f"ponto: {mark}",
        "situação: ativo",
        "licenças encerradas: 11, 12",
        "até: de — para 30/06/2024",
        "criados: 2",
        "simulação: sim",
        "ata: —",
        "campo_novo_xyz: fica visível",
    ):
        assert line in shown, line
    for raw in ("reason", "vehicle_id", "licences_ended", "{", "true", "None"):
        assert raw not in shown, raw
    assert row.locator("ul.audit-details ul").inner_text().split("\n") == [
        "criados: 2",
        "inalterados: 0",
    ]
    raw_json = row.locator("details.audit-raw")
    assert not raw_json.locator("code").is_visible()
    raw_json.locator("summary", has_text="dados brutos").click()
    assert json.loads(raw_json.locator("code").inner_text()) == details
    page.screenshot(path=str(tmp_path / "auditoria.png"), full_page=True)
    print(f"screenshot: {tmp_path / 'auditoria.png'}")


# --- the import preview --------------------------------------------------------------------------


def test_import_rejections_have_no_python_lists(web_client: Callable) -> None:
    """A stands CSV without its columns names the columns present as text, and a feature
    whose capacity is a JSON list is rejected with the values joined, not as "['a', 'b']"."""
    admin = web_client("admin")
    missing = _upload(admin, "colunas.csv", b"foo,bar\n1,2\n")
    error = re.search(r"Arquivo recusado: ([^<]*)<", missing)
    assert error is not None
    assert "colunas presentes: foo, bar" in error.group(1)
    assert "['" not in error.group(1)

    square = [[[-51.21, -30.03], [-51.2095, -30.03], [-51.2095, -30.0295], [-51.21, -30.03]]]
    stand = f"LISTA-{os.getpid()}"
    doc = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"stand_id": stand, "capacity": ["a", "b"]},
                "geometry": {"type": "Polygon", "coordinates": square},
            },
            {
                "type": "Feature",
                "properties": {"stand_id": f"{stand}-BOM"},
                "geometry": {"type": "Polygon", "coordinates": square},
            },
        ],
    }
    listed = _upload(admin, "lista.geojson", json.dumps(doc).encode())
    reason = re.search(r'<th scope="row">1</th><td>[^<]*</td><td>([^<]*)</td>', listed)
    assert reason is not None
    assert f"'capacity' do ponto de táxi '{stand}'" in reason.group(1)
    assert "era a, b;" in reason.group(1)
    assert "['" not in reason.group(1) and "']" not in reason.group(1)


# --- the stands list -----------------------------------------------------------------------------


def test_stands_are_listed_in_natural_order_across_pages(
    web_client: Callable, web_engine: Engine
) -> None:
    """Stand ids sort by number where they are numbers: "…9" before "…10", "99" before "100";
    the order runs on over the pages (50 a page) and the search still filters."""
    base = f"77{os.getpid()}"
    numeric = [f"{base}9", f"{base}10"]  # "…10" < "…9" as text
    prefixed = [f"NAT{base}-{n}" for n in range(1, 56)]
    with session_scope(web_engine) as session:
        for k, stand_id in enumerate(numeric + prefixed):
            create_stand(
                session=session,
                stand_id=stand_id,
                actor="test",
                lat=-30.05 - 0.001 * k,
                lon=-51.25,
                radius_m=10.0,
            )
    admin = web_client("admin")
    first = admin.get("/admin/pontos", params={"q": base})
    assert first.status_code == 200
    assert "57 pontos" in first.text
    page_one = _ROW_ID.findall(first.text)
    assert page_one == numeric + prefixed[:48]
    second = _ROW_ID.findall(admin.get("/admin/pontos", params={"q": base, "pagina": 2}).text)
    assert second == prefixed[48:]
    only = _ROW_ID.findall(admin.get("/admin/pontos", params={"q": f"NAT{base}-1"}).text)
    assert only == [f"NAT{base}-{n}" for n in (1, *range(10, 20))]
