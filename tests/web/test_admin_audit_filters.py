"""The audit log's filters and details as one person reads them (``/admin/auditoria``): one
"Quem" per person whatever form the writer used, distinct labels of actions and entities,
personal fields by their pt-BR names and geometries described instead of WKT.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from api.audit import actor_forms, actor_person, user_actor
from api.web.admin_audit import (
    AUDIT_ACTIONS,
    ENTITIES,
    ENTITY_ALIASES,
    actor_options,
    canonical_actor,
    detail_items,
    entity_codes,
    geometry_text,
)
from db.enforcement.models import AuditEntry
from db.engine import session_scope

SQUARE = (
    "POLYGON ((-51.2194 -30.03, -51.21 -30.03, -51.21 -30.02, -51.2194 -30.02, -51.2194 -30.03))"
)
TWO_TRIANGLES = (
    "MULTIPOLYGON (((-51.2194 -30.03, -51.21 -30.03, -51.21 -30.02, -51.2194 -30.03)), "
    "((-51.3 -30.1, -51.29 -30.1, -51.29 -30.09, -51.3 -30.1)))"
)


def _add(engine: Engine, *entries: dict[str, Any]) -> None:
    with session_scope(engine) as session:
        session.add_all(AuditEntry(**e) for e in entries)


def _options(page: str, select_id: str) -> list[tuple[str, str, bool]]:
    """Return the (value, label, selected) of a select's options."""
    block = re.search(rf'<select id="{select_id}".*?</select>', page, re.S)
    assert block is not None, select_id
    return [
        (html.unescape(v), html.unescape(label), bool(sel))
        for v, sel, label in re.findall(
            r'<option value="([^"]*)"( selected)?>([^<]*)</option>', block.group(0)
        )
    ]


def _details(page: str) -> str:
    """Return the text of the entries' detail lists (without the raw JSON)."""
    lists = re.findall(r'<ul class="audit-details">(.*?)</ul>\s*<details', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(lists)))


class TestActorPerson:
    @pytest.mark.parametrize(
        ("actor", "person"),
        [
            ("user:demo_fiscal", "demo_fiscal"),
            ("demo_fiscal", "demo_fiscal"),
            ("user:Demo_Fiscal", "demo_fiscal"),
            ("os:root", None),
            ("test:demo", None),
            ("sistema", None),
        ],
    )
    def test_forms_of_one_person(self, actor: str, person: str | None) -> None:
        """``user:x`` and a bare ``x`` name the same person (case ignored); a command line, a
        test or the platform itself are not people."""
        assert actor_person(actor) == person

    def test_forms(self) -> None:
        """A person is matched in both forms; anything else as written."""
        assert actor_forms("Demo_Fiscal") == ["demo_fiscal", "user:demo_fiscal"]
        assert actor_forms("os:Root") == ["os:Root"]
        assert user_actor("ana") == "user:ana"

    def test_one_option_per_person(self) -> None:
        """The "Quem" options merge a person's forms, the account's spelling first."""
        options = actor_options(["demo_fiscal", "os:root", "sistema", "user:demo_fiscal"])
        assert options == [
            ("user:demo_fiscal", "demo_fiscal"),
            ("os:root", "root (linha de comando)"),
            ("sistema", "sistema"),
        ]
        assert canonical_actor(" demo_fiscal ") == "user:demo_fiscal"
        assert canonical_actor("sistema") == "sistema"


class TestLabels:
    def test_actions_are_told_apart(self) -> None:
        """Every audited action has its own pt-BR name (an account's and a stand's
        deactivation differ)."""
        labels = list(AUDIT_ACTIONS.values())
        assert len(labels) == len(set(labels))
        assert AUDIT_ACTIONS["disable"] != AUDIT_ACTIONS["retire"]

    def test_entities_are_told_apart(self) -> None:
        """Every kind of entity has its own pt-BR name; a table's plural code is its kind."""
        labels = list(ENTITIES.values())
        assert len(labels) == len(set(labels))
        assert not set(ENTITY_ALIASES) & set(ENTITIES)
        assert entity_codes("users") == entity_codes("user") == ["user", "users"]


class TestGeometryText:
    @pytest.mark.parametrize(
        ("wkt", "text"),
        [
            (SQUARE, "polígono, 4 vértices"),
            (TWO_TRIANGLES, "multipolígono (2 partes), 6 vértices"),
            ("SRID=4326;" + SQUARE, "polígono, 4 vértices"),
            ("POINT (-51.2 -30.1)", "ponto (-30,100000, -51,200000)"),
            ("POLYGON de papel", None),
            ("Polígono da praça", None),
        ],
    )
    def test_short_description(self, wkt: str, text: str | None) -> None:
        """A WKT geometry is its kind and number of corners; other text is not one."""
        assert geometry_text(wkt) == text

    def test_details(self) -> None:
        """A changed area reads "alterada (antes …; depois …)", a new one its shape; the
        fields read are named in pt-BR."""
        items = {
            i.key: i.text
            for i in detail_items(
                {
                    "geometry": {"from": SQUARE, "to": TWO_TRIANGLES},
                    "fields": ["plate", "substituted_plate", "holder_name", "holder_cpf"],
                }
            )
        }
        assert items == {
            "geometry": "alterada (antes polígono, 4 vértices; depois multipolígono "
            "(2 partes), 6 vértices)",
            "fields": "placa, placa substituída, nome do autorizatário, CPF do autorizatário",
        }
        (created,) = detail_items({"geometry": SQUARE})
        assert (created.label, created.text) == ("área", "polígono, 4 vértices")

    def test_a_proposal_step_names_its_states_in_words(self) -> None:
        """A review step's states read "em defesa", "defesa indeferida", not their codes."""
        items = {
            i.key: i.text for i in detail_items({"from": "em_defesa", "to": "defesa_indeferida"})
        }
        assert items == {"from": "em defesa", "to": "defesa indeferida"}
        final = {i.key: i.text for i in detail_items({"from": "notificada", "to": "definitiva"})}
        assert final == {"from": "notificada", "to": "decisão definitiva"}

    def test_an_accounts_role_in_words(self) -> None:
        """A role change reads as the pages name the roles, not their codes."""
        (changed,) = detail_items({"role": {"from": "supervisor", "to": "agent"}})
        assert "Supervisor(a) de ponto" in changed.text and "Fiscal" in changed.text
        assert "supervisor;" not in changed.text and "agent" not in changed.text
        (created,) = detail_items({"role": "planner"})
        assert created.text == "Planejador(a)"


# --- the page, on a real server ------------------------------------------------------------------


def test_one_person_whatever_the_actor_form(
    web_client: Callable[..., Any], web_engine: Engine
) -> None:
    """An agent's proposal step (actor ``x``) and their read of personal data (``user:x``)
    are one "Quem" option; choosing it, or an old link with the bare name, shows both."""
    name = f"fisc_{os.getpid()}"
    mark = f"QUEM-{os.getpid()}"
    _add(
        web_engine,
        {
            "actor": name,
            "action": "confirm",
            "entity": "proposal",
            "entity_id": mark,
            "details": {"from": "proposta", "to": "confirmada"},
        },
        {
            "actor": user_actor(name),
            "action": "read_personal_data",
            "entity": "vehicles",
            "entity_id": mark,
            "details": {"ids": [mark], "fields": ["plate"], "route": "/api/v1/vehicles"},
        },
    )
    admin = web_client("admin")
    page = admin.get("/admin/auditoria").text
    mine = [o for o in _options(page, "filtro-ator") if o[1] == name]
    assert mine == [(user_actor(name), name, False)]
    for ator in (user_actor(name), name, name.upper()):
        found = admin.get("/admin/auditoria", params={"ator": ator, "texto": mark})
        assert found.status_code == 200
        assert "<caption>2 registros</caption>" in found.text, ator
    linked = admin.get("/admin/auditoria", params={"ator": name}).text
    assert (user_actor(name), name, True) in _options(linked, "filtro-ator")


def test_actions_and_entities_have_distinct_labels(
    web_client: Callable[..., Any], web_engine: Engine
) -> None:
    """ "Ação" tells an account's deactivation from a stand's; "Entidade" lists accounts once,
    and choosing it finds their changes and the reads of their names."""
    mark = f"ROTULO-{os.getpid()}"
    _add(
        web_engine,
        {"actor": "user:web_admin", "action": "disable", "entity": "user", "entity_id": mark},
        {"actor": "user:web_admin", "action": "retire", "entity": "stand", "entity_id": mark},
        {
            "actor": "user:web_admin",
            "action": "read_personal_data",
            "entity": "users",
            "entity_id": None,
            "details": {"ids": [mark], "fields": ["full_name"], "route": "/admin/usuarios"},
        },
    )
    admin = web_client("admin")
    page = admin.get("/admin/auditoria").text
    actions = [label for _, label, _ in _options(page, "filtro-acao")]
    assert len(actions) == len(set(actions))
    assert {"desativação de conta", "desativação de ponto"} <= set(actions)
    entities = _options(page, "filtro-entidade")
    labels = [label for _, label, _ in entities]
    assert len(labels) == len(set(labels))
    assert ("user", "conta de usuário", False) in entities
    assert "usuários" not in labels
    for entidade in ("user", "users"):
        found = admin.get("/admin/auditoria", params={"entidade": entidade, "texto": mark})
        assert "<caption>2 registros</caption>" in found.text, entidade
        assert ("user", "conta de usuário", True) in _options(found.text, "filtro-entidade")
    shown = admin.get("/admin/auditoria", params={"texto": mark}).text
    assert "desativação de conta" in shown and "desativação de ponto" in shown


def test_details_name_fields_and_describe_areas(
    web_client: Callable[..., Any], web_engine: Engine
) -> None:
    """The fields of a read are named in pt-BR and a stand's new area is described (shape and
    corners), not printed as WKT; the raw data keep the codes."""
    mark = f"AREA-{os.getpid()}"
    _add(
        web_engine,
        {
            "actor": "user:web_admin",
            "action": "read_personal_data",
            "entity": "vehicles",
            "entity_id": mark,
            "details": {
                "ids": [mark],
                "fields": ["plate", "substituted_plate", "holder_name", "holder_cpf"],
                "route": "/api/v1/vehicles",
            },
        },
        {
            "actor": "user:web_admin",
            "action": "update",
            "entity": "stand",
            "entity_id": mark,
            "details": {"geometry": {"from": SQUARE, "to": TWO_TRIANGLES}},
        },
    )
    page = web_client("admin").get("/admin/auditoria", params={"texto": mark}).text
    assert "<caption>2 registros</caption>" in page
    shown = _details(page)
    assert "campos: placa, placa substituída, nome do autorizatário, CPF do autorizatário" in shown
    assert (
        "área: alterada (antes polígono, 4 vértices; depois multipolígono (2 partes), 6 vértices)"
    ) in shown
    for raw in ("POLYGON", "holder_cpf", "substituted_plate"):
        assert raw not in shown, raw
    assert "holder_cpf" in page and "MULTIPOLYGON" in page  # the raw data
