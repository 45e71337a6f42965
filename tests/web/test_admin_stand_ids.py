"""The new-stand form (``/admin/pontos``): the registry's id rule and clean names.

A stand id goes in the stand page's URL: one with ``/ ? # %``, a blank or a control character
would make the stand unreachable, so the form refuses it (422, nothing stored), as the API does.
"""

from __future__ import annotations

import html
import itertools
import json
import os
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import Engine, func, select
from web_helpers import csrf_from

from db.engine import session_scope
from db.stands.models import Stand

_ids = itertools.count(1)


def _unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


def _create(client: httpx.Client, stand_id: str, name: str = "Praça XV") -> httpx.Response:
    token = csrf_from(client.get("/admin/pontos/novo").text)
    form = {"stand_id": stand_id, "name": name, "mode": "ponto"}
    form |= {"lat": "-30.02", "lon": "-51.22", "radius_m": "15", "csrf_token": token}
    return client.post("/admin/pontos", data=form)


def _stands_like(engine: Engine, part: str) -> int:
    with session_scope(engine) as session:
        return int(
            session.scalar(
                select(func.count()).select_from(Stand).where(Stand.stand_id.contains(part))
            )
            or 0
        )


@pytest.mark.parametrize("bad", ["a/b", "a?b", "a#b", "a%b", "a b", "a\tb", "a,b"])
def test_an_id_that_breaks_its_url_is_refused(
    web_client: Callable, web_engine: Engine, bad: str
) -> None:
    """422 with the rule in words; no stand stored."""
    marker = _unique("BADID")
    answer = _create(web_client("admin"), f"{marker}{bad}")
    assert answer.status_code == 422
    assert 'sem espaços nem os caracteres / ? # % , ; "' in html.unescape(answer.text)
    assert _stands_like(web_engine, marker) == 0


def test_surrounding_blanks_are_stripped(web_client: Callable, web_engine: Engine) -> None:
    """' ID ' is stored as 'ID' and its page opens; the name is stripped too."""
    admin = web_client("admin")
    stand_id = _unique("TRIM")
    answer = _create(admin, f"  {stand_id} ", name="  Praça XV  ")
    assert answer.status_code == 303, html.unescape(answer.text)[-600:]
    assert admin.get(answer.headers["location"]).status_code == 200
    with session_scope(web_engine) as session:
        stand = session.get(Stand, stand_id)
        assert stand is not None and stand.name == "Praça XV"


@pytest.mark.parametrize("name", ["Praça\u202eXV", "Praça\u2066XV", "Praça\nXV"])
def test_a_name_with_control_characters_is_refused(
    web_client: Callable, web_engine: Engine, name: str
) -> None:
    """A bidirectional override or a line break in the name: 422, no stand stored."""
    marker = _unique("BADNAME")
    answer = _create(web_client("admin"), marker, name=name)
    assert answer.status_code == 422
    assert "caractere" in html.unescape(answer.text)
    assert _stands_like(web_engine, marker) == 0


SQUARE = [
    [
        [-51.21, -30.03],
        [-51.2095, -30.03],
        [-51.2095, -30.0295],
        [-51.21, -30.0295],
        [-51.21, -30.03],
    ]
]


def _upload_stands(client: httpx.Client, stand_id: str, *, id_prefix: str = "") -> httpx.Response:
    feature = {
        "type": "Feature",
        "properties": {"stand_id": stand_id},
        "geometry": {"type": "Polygon", "coordinates": SQUARE},
    }
    doc = {"type": "FeatureCollection", "features": [feature]}
    token = csrf_from(client.get("/admin/importacao").text)
    return client.post(
        "/admin/importacao",
        data={"csrf_token": token, "kind": "pontos", "radius_m": "30", "id_prefix": id_prefix},
        files={"file": ("p.geojson", json.dumps(doc).encode(), "application/geo+json")},
    )


def test_the_import_preview_refuses_a_bad_id(web_client: Callable, web_engine: Engine) -> None:
    """A stands file whose stand_id holds a slash: the preview says why; nothing is stored."""
    admin = web_client("admin")
    marker = _unique("IMPBAD")
    upload = _upload_stands(admin, f"{marker}/1")
    assert upload.status_code == 303
    page = html.unescape(admin.get(upload.headers["location"]).text)
    assert "stand_id inválido" in page and "não é um identificador" in page
    assert _stands_like(web_engine, marker) == 0


def test_the_import_refuses_a_prefix_that_breaks_ids(web_client: Callable) -> None:
    """A prefix with a slash is refused on the form (422); one that makes the ids longer than
    the registry allows is refused by the preview."""
    admin = web_client("admin")
    slash = _upload_stands(admin, _unique("IMPPFX"), id_prefix="PT/")
    assert slash.status_code == 422
    assert "prefixo 'PT/' não é um identificador" in html.unescape(slash.text)
    long = _upload_stands(admin, _unique("IMPPFX") + "-" + "9" * 20, id_prefix="P" * 40)
    assert long.status_code == 303
    page = html.unescape(admin.get(long.headers["location"]).text)
    assert "stand_id com o prefixo" in page and "no máximo 64" in page
