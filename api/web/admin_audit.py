"""The audit log, searchable (``/admin/auditoria``): who changed or read what, and when.

Filters: actor (a person whatever the form the writer used: ``user:ana`` or a bare ``ana``,
:func:`api.audit.actor_forms`), action, entity (an entity's singular and plural codes are one
kind, :data:`ENTITY_ALIASES`), a period of local days (the municipality's zone), and a text
looked up in the entity id and in the details; newest first, :data:`PAGE_SIZE` a page.
Entries link to the console's page of their entity (a stand, a licence's stand, a user, the
devices). Details that name a person (a supervisor's name, a user's full name) make the page a
read of personal data: it is itself written to the log (``read_personal_data``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import shapely
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ValidationError
from shapely.errors import ShapelyError
from sqlalchemy import ColumnElement, Select, String, cast, func, or_, select
from sqlalchemy.orm import Session
from starlette.responses import Response

from api.audit import (
    READ_PERSONAL_DATA,
    actor_forms,
    actor_person,
    record_personal_data_access,
    user_actor,
)
from api.deps import SessionDep, SettingsDep
from api.schemas import QueryDate
from api.web import formats as fmt
from api.web.admin_base import AdminUser, pt_errors
from api.web.formats import ACTIONS, FIELD_LABELS, actor_label
from api.web.nav import ROLE_LABELS
from api.web.templating import render
from db.enforcement.models import STATUSES, AuditEntry

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
PERSONAL_DETAILS = ("person_name", "full_name")
"""Keys of an entry's details that name a person."""


@dataclass(frozen=True)
class AuditFilter:
    """A search of the audit log (empty fields: no filter)."""

    actor: str = ""
    action: str = ""
    entity: str = ""
    since: dt.date | None = None
    until: dt.date | None = None
    text: str = ""


def search_audit(
    *,
    session: Session,
    where: AuditFilter,
    timezone: str,
    limit: int = PAGE_SIZE,
    offset: int = 0,
) -> tuple[list[AuditEntry], int]:
    """Return the entries matching ``where`` (newest first) and how many match in all.

    ``since`` and ``until`` are inclusive local days in ``timezone``.
    """
    query: Select[Any] = select(AuditEntry)
    if where.actor:
        query = query.where(actor_matches(where.actor))
    if where.action:
        query = query.where(AuditEntry.action == where.action)
    if where.entity:
        query = query.where(AuditEntry.entity.in_(entity_codes(where.entity)))
    zone = ZoneInfo(timezone)
    if where.since is not None:
        start = dt.datetime.combine(where.since, dt.time(), tzinfo=zone)
        query = query.where(AuditEntry.at >= start)
    if where.until is not None:
        end = dt.datetime.combine(where.until + dt.timedelta(days=1), dt.time(), tzinfo=zone)
        query = query.where(AuditEntry.at < end)
    if where.text:
        like = "%" + where.text.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_") + "%"
        query = query.where(
            or_(
                AuditEntry.entity_id.ilike(like, escape="\\"),
                cast(AuditEntry.details, String).ilike(like, escape="\\"),
            )
        )
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(
        query.order_by(AuditEntry.entry_id.desc()).limit(limit).offset(offset)
    ).all()
    return list(rows), int(total)


def actor_matches(actor: str) -> ColumnElement[bool]:
    """Match the entries of ``actor``: a person in any form the log has them, else as written.

    ``user:ana``, ``ana`` and ``user:Ana`` are one person (:func:`api.audit.actor_person`):
    agents' proposal steps were logged with the bare username, and the log is append-only.
    """
    if actor_person(actor) is None:
        return AuditEntry.actor == actor
    return func.lower(AuditEntry.actor).in_(actor_forms(actor))


def actor_options(actors: list[str]) -> list[tuple[str, str]]:
    """Return the "Quem" filter's options: one per person (``user:<name>``), sorted by label.

    The spelling of a ``user:`` row is preferred to a bare name's (it is the account's).
    """
    chosen: dict[str, str] = {}
    for actor in actors:
        person = actor_person(actor)
        key = actor if person is None else person
        value = actor if person is None else user_actor(actor.removeprefix("user:"))
        if key not in chosen or (person is not None and actor.startswith("user:")):
            chosen[key] = value
    options = [(v, actor_label(v)) for v in chosen.values()]
    return sorted(options, key=lambda o: (fmt.plain(o[1]), o[0]))


def canonical_actor(actor: str) -> str:
    """Return the filter's value for a typed or linked actor (``ana`` is ``user:ana``)."""
    actor = actor.strip()
    person = actor_person(actor)
    return actor if person is None else user_actor(actor.removeprefix("user:"))


def distinct_values(*, session: Session, column: Any) -> list[str]:
    """Return the values a filter may take (sorted)."""
    return [str(v) for v in session.scalars(select(column).distinct().order_by(column)) if v]


def entity_link(entry: AuditEntry) -> str | None:
    """Return the console's page of an entry's entity, if it has one."""
    details = entry.details or {}
    stand = details.get("stand_id") if isinstance(details, dict) else None
    if entry.entity == "stand" and entry.entity_id:
        return f"/admin/pontos/{quote(entry.entity_id, safe='')}"
    if entry.entity in ("parking_licence", "licence_exclusion", "stand_supervisor") and stand:
        return f"/admin/pontos/{quote(str(stand), safe='')}"
    if entry.entity == "user" and entry.entity_id:
        return f"/admin/usuarios?{urlencode({'q': entry.entity_id})}"
    if entry.entity == "users" and entry.entity_id and fmt.digits(entry.entity_id):
        return f"/admin/usuarios/{entry.entity_id}"  # a read of one account: its user_id
    if entry.entity == "device":
        return "/admin/dispositivos"
    if entry.entity in ("fleet_file", "stands_file"):
        return "/admin/importacao"
    return None


ENTITIES = {
    "stand": "ponto",
    "stands_file": "arquivo de pontos",
    "parking_licence": "licença de ponto",
    "licence_exclusion": "exclusão de prefixo",
    "stand_supervisor": "supervisor de ponto",
    "stand_licensees": "licenciados do ponto",
    "stand_suspension": "suspensão de ponto",
    "allowed_places": "áreas de espera permitida",
    "user": "conta de usuário",
    "device": "aparelho",
    "drivers": "condutores",
    "driver_assignments": "vínculos de condutores",
    "driver_document_periods": "documentos de condutores",
    "vehicles": "veículos",
    "fleet_file": "arquivo da frota",
    "fixes": "posições GPS",
    "proposal": "proposta",
    "proposal_documents": "documentos de proposta",
    "audit_log": "registro de auditoria",
}
"""pt-BR names of the audited entities (a code without one is shown as written)."""

ENTITY_ALIASES = {
    "users": "user",
    "stand_supervisors": "stand_supervisor",
    "stand_suspensions": "stand_suspension",
}
"""Codes of the same kind of record: the plural is written by the reads of personal data (the
table), the singular by the changes. The filter shows and matches them as one."""


def entity_kind(entity: str) -> str:
    """Return the code an entity is filtered by (:data:`ENTITY_ALIASES`)."""
    return ENTITY_ALIASES.get(entity, entity)


def entity_codes(entity: str) -> list[str]:
    """Return every code written for the kind of ``entity``."""
    kind = entity_kind(entity)
    return [kind, *sorted(code for code, to in ENTITY_ALIASES.items() if to == kind)]


def entity_label(entity: str) -> str:
    """Return the pt-BR name of an entity code."""
    kind = entity_kind(entity)
    return ENTITIES.get(kind, kind)


AUDIT_ACTIONS = ACTIONS | {
    "disable": "desativação de conta",
    "retire": "desativação de ponto",
    "rename": "renomeação de conta",
}
"""pt-BR names of the audited actions, each distinct (a code without one is shown as written)."""


MAX_DETAIL_CHARS = 160
"""Longer texts in the details (a geometry's WKT) are cut on the page (the search sees all)."""

DETAIL_LABELS = {
    # who, what, where
    "stand_id": "ponto", "stand_ids": "pontos", "vehicle_id": "prefixo",
    "driver_id": "condutor", "finding_id": "achado", "licence_id": "licença",
    "period_id": "período", "link_id": "vínculo", "user": "usuário", "decided_by": "usuário",
    "username": "usuário", "role": "papel", "person_name": "nome do supervisor",
    "full_name": "nome completo", "label": "descrição", "name": "nome", "address": "endereço",
    "capacity": "vagas", "order_number": "número de ordem", "kind": "tipo",
    "municipality": "município", "municipality_code": "município (código IBGE)",
    "radius_m": "raio (m)", "geometry": "área", "document": "documento", "status": "situação",
    # when, why
    "on": "data", "until": "até", "valid_from": "desde", "valid_until": "até",
    "starts_on": "início", "ends_on": "fim", "excluded_on": "excluído em",
    "elected_on": "eleito em", "homologated_on": "homologado em", "reason": "motivo",
    "ground": "fundamento", "minutes_ref": "ata", "process_ref": "processo",
    "licences_ended": "licenças encerradas",
    "licences_starting_later": "licenças que começariam depois",
    "terms_ended": "mandatos encerrados", "enabled": "reativado", "password": "senha",
    # changes
    "from": "de", "to": "para", "before": "antes", "after": "depois",
    # proposals
    "auto_number": "número do auto", "reincidence_count": "reincidências",
    "reincidence_autos": "autos anteriores", "exception_answer": "resposta à exceção",
    "pontuacao": "pontuação", "period_ended_on": "fim do prazo de defesa",
    "step_at": "realizado em",
    # imports
    "file": "arquivo", "sha256": "SHA-256", "options": "opções", "rows": "linhas",
    "imported": "linhas importadas", "rejected_rows": "linhas rejeitadas",
    "counts": "contagens", "created": "criados", "updated": "atualizados",
    "unchanged": "inalterados", "retired": "desativados",
    "periods_replaced": "períodos substituídos", "periods_created": "períodos criados",
    "as_of": "data do arquivo", "retire_missing": "desativar ausentes",
    "id_prefix": "prefixo dos stand_id",
    # reads of personal data
    "ids": "registros", "fields": "campos", "route": "página",
    # fix retention
    "keep_days": "dias mantidos", "cutoff": "corte", "dry_run": "simulação",
    "evidence_refs": "evidências citadas", "partitions_dropped": "partições apagadas",
    "partitions_trimmed": "partições aparadas", "rows_deleted": "posições apagadas",
    "rows_kept": "posições mantidas", "partitions_refused": "partições mantidas inteiras",
    "unreadable_evidence": "evidências ilegíveis",
    "via": "origem",
    # personal fields named in the reads of personal data (``fields``)
    "plate": "placa", "substituted_plate": "placa substituída",
    "holder_name": "nome do autorizatário", "holder_cpf": "CPF do autorizatário",
    "holder_phone": "telefone do autorizatário", "driver_name": "nome do condutor",
    "phone": "telefone",
}  # fmt: skip
"""pt-BR labels of the keys the audit writers put in the details (:mod:`db.stands.registry`,
:mod:`db.enforcement.workflow`, :mod:`db.fleet.store`, the console's pages...); others are
shown by the forms' label (:data:`api.web.formats.FIELD_LABELS`) or as written."""

STATE_WORDS = {"definitiva": "decisão definitiva"}
"""A proposal's state whose code alone is not its name on the console."""
PERIOD_AFTER = {"defesa_indeferida": "fim do prazo de recurso"}
"""The label of a final decision's stated period (``period_ended_on``) by the state it left:
after a rejected defence the period was the appeal's; otherwise the defence's
(:data:`DETAIL_LABELS`)."""

_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$")
_WKT = re.compile(
    r"^\s*(SRID=\d+;\s*)?(MULTI)?(POINT|LINESTRING|POLYGON)\b|^\s*GEOMETRYCOLLECTION\b", re.I
)
NAMED_LISTS = ("fields",)
"""Keys whose values are lists of field names: shown by their labels (:func:`detail_label`)."""

_SHAPES = {
    "Point": "ponto",
    "MultiPoint": "pontos",
    "LineString": "linha",
    "MultiLineString": "linhas",
    "Polygon": "polígono",
    "MultiPolygon": "multipolígono",
    "GeometryCollection": "coleção de geometrias",
}


class Shape(str):
    """A geometry's short pt-BR description, standing for its WKT in the details shown."""

    __slots__ = ()


def fmt_coord(degrees: float) -> str:
    """Return a coordinate in degrees with 6 decimals and a decimal comma."""
    return f"{degrees:.6f}".replace(".", ",")


def geometry_text(wkt: str) -> Shape | None:
    """Return a short description of a WKT geometry, None when ``wkt`` is not one.

    ``polígono, 5 vértices``; ``multipolígono (2 partes), 12 vértices``; a point by its
    coordinates. Vertices: the distinct corners (a ring's closing point is not counted twice).
    """
    if not _WKT.match(wkt):
        return None
    try:
        geom = shapely.from_wkt(re.sub(r"^\s*SRID=\d+;", "", wkt))
    except (ShapelyError, ValueError):
        return None
    kind = _SHAPES.get(geom.geom_type, geom.geom_type)
    if geom.is_empty:
        return Shape(f"{kind} vazio")
    if geom.geom_type == "Point":
        return Shape(f"ponto ({fmt_coord(geom.y)}, {fmt_coord(geom.x)})")
    parts = shapely.get_parts(geom)
    rings = sum(len(shapely.get_rings(p)) for p in parts if p.geom_type == "Polygon")
    vertices = int(shapely.get_num_coordinates(geom)) - rings  # rings repeat their first corner
    where = f" ({len(parts)} partes)" if len(parts) > 1 else ""
    return Shape(f"{kind}{where}, {vertices} vértices")


class LocalTime(str):
    """An instant's local date and time (``dd/mm/aaaa hh:mm:ss``), standing for its ISO text."""

    __slots__ = ()


def _local_instants(value: Any, zone: ZoneInfo) -> Any:
    """Replace the ISO instants (with an offset) in ``value`` by their local time in ``zone``."""
    if isinstance(value, dict):
        return {k: _local_instants(v, zone) for k, v in value.items()}
    if isinstance(value, list):
        return [_local_instants(v, zone) for v in value]
    if isinstance(value, str) and _ISO_INSTANT.match(value):
        with contextlib.suppress(ValueError):
            at = dt.datetime.fromisoformat(value).astimezone(zone)
            return LocalTime(at.strftime("%d/%m/%Y %H:%M:%S"))
    return value


def _describe_geometries(value: Any) -> Any:
    """Replace the WKT texts in ``value`` by their description (:func:`geometry_text`)."""
    if isinstance(value, dict):
        return {k: _describe_geometries(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_describe_geometries(v) for v in value]
    if isinstance(value, str):
        return geometry_text(value) or value
    return value


@dataclass(frozen=True)
class DetailItem:
    """One key of an entry's details as shown: its label, its text, or its sub-items."""

    key: str
    label: str
    text: str = ""
    children: tuple[DetailItem, ...] = ()


def detail_label(key: str) -> str:
    """Return the pt-BR label of a details key (the key itself when none is known)."""
    if key in DETAIL_LABELS:
        return DETAIL_LABELS[key]
    label = FIELD_LABELS.get(key)
    if label is None:
        return key
    return label[:1].lower() + label[1:]


def _shorten(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, str) and len(value) > MAX_DETAIL_CHARS:
        return f"{value[:MAX_DETAIL_CHARS]}… (+{len(value) - MAX_DETAIL_CHARS} caracteres)"
    return value


def value_text(value: Any) -> str:
    """Return a details value as plain pt-BR text.

    None is ``—``, booleans ``sim``/``não``, ISO days ``dd/mm/aaaa``, decimals with a comma,
    lists joined by ``", "``, a ``{"from", "to"}`` change as ``de … para …``, other objects as
    ``chave: valor`` pairs joined by ``"; "``.
    """
    if value is None:
        return fmt.NONE
    if isinstance(value, bool):
        return "sim" if value else "não"
    if isinstance(value, float):
        return str(value).replace(".", ",")
    if isinstance(value, str):
        if _ISO_DAY.match(value):
            with contextlib.suppress(ValueError):
                return fmt.date(dt.date.fromisoformat(value))
        return value
    if isinstance(value, list):
        return ", ".join(value_text(v) for v in value) if value else fmt.NONE
    if isinstance(value, dict):
        if set(value) == {"from", "to"}:
            if isinstance(value["from"], Shape) or isinstance(value["to"], Shape):
                before, after = value["from"], value["to"]
                if before is None:
                    return f"definida ({value_text(after)})"
                return f"alterada (antes {value_text(before)}; depois {value_text(after)})"
            return f"de {value_text(value['from'])} para {value_text(value['to'])}"
        if not value:
            return fmt.NONE
        return "; ".join(f"{detail_label(str(k))}: {value_text(v)}" for k, v in value.items())
    return str(value)


def _item(key: str, value: Any, *, label: str | None = None) -> DetailItem:
    label = label or detail_label(key)
    if isinstance(value, dict) and value and set(value) != {"from", "to"}:
        return DetailItem(key=key, label=label, children=tuple(_items(value)))
    if key in NAMED_LISTS and isinstance(value, list) and value:
        names = ", ".join(detail_label(v) if isinstance(v, str) else value_text(v) for v in value)
        return DetailItem(key=key, label=label, text=names)
    return DetailItem(key=key, label=label, text=value_text(value))


def _items(details: dict[Any, Any], labels: dict[str, str] | None = None) -> list[DetailItem]:
    """Return the labelled items of an object, in the order of their labels.

    ``labels``: labels of some keys here, in place of :func:`detail_label`'s.
    """
    labels = labels or {}
    items = [_item(str(k), v, label=labels.get(str(k))) for k, v in details.items()]
    return sorted(items, key=lambda i: (fmt.plain(i.label), i.key))


def detail_items(details: Any, *, timezone: str | None = None) -> list[DetailItem]:
    """Return an entry's details as labelled items (long texts cut; nothing left out).

    Known keys get their pt-BR label (:data:`DETAIL_LABELS`), others keep their name; nested
    objects become sub-items; items come in the order of their labels. A geometry (WKT) is
    described (``polígono, 5 vértices``), the field names of a read by their labels, an ISO
    instant (a step's ``step_at``) by its local date and time in ``timezone`` (when given). A
    final decision's stated period is named by the state it left (:data:`PERIOD_AFTER`).
    """
    shown = _describe_geometries(details or {})
    if timezone is not None:
        shown = _local_instants(shown, ZoneInfo(timezone))
    short = _shorten(shown)
    if not isinstance(short, dict):
        return [DetailItem(key="", label="valor", text=value_text(short))]
    period = PERIOD_AFTER.get(str(short.get("from")))
    for key in ("from", "to"):  # a proposal's step: its states in words
        if short.get(key) in STATUSES:
            short[key] = STATE_WORDS.get(short[key], short[key].replace("_", " "))
    role = short.get("role")  # an account's role in words, as the pages name it
    if isinstance(role, dict):
        short["role"] = {k: ROLE_LABELS.get(v, v) if isinstance(v, str) else v
                         for k, v in role.items()}  # fmt: skip
    elif isinstance(role, str):
        short["role"] = ROLE_LABELS.get(role, role)
    return _items(short, labels={"period_ended_on": period} if period else {})


def details_text(details: Any) -> str:
    """Return an entry's details as compact JSON (long texts cut): the raw data."""
    return json.dumps(_shorten(details or {}), ensure_ascii=False, sort_keys=True)


@router.get("/admin/auditoria", name="web_admin_audit")
def audit_log(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    ator: Annotated[str, Query(max_length=200)] = "",
    acao: Annotated[str, Query(max_length=100)] = "",
    entidade: Annotated[str, Query(max_length=100)] = "",
    de: Annotated[str, Query(max_length=40)] = "",
    ate: Annotated[str, Query(max_length=40)] = "",
    texto: Annotated[str, Query(max_length=200)] = "",
    pagina: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> Response:
    """Search the audit log (filters, pages, links to the entities)."""
    errors: dict[str, str] = {}
    days: dict[str, dt.date | None] = {"de": None, "ate": None}
    for key, value in (("de", de), ("ate", ate)):
        if value.strip():
            try:
                days[key] = _Day.model_validate({"day": value.strip()}).day
            except ValidationError as exc:
                errors[key] = pt_errors(exc).get("day", "data inválida")
    if days["de"] is not None and days["ate"] is not None and days["ate"] < days["de"]:
        errors["ate"] = "o último dia vem antes do primeiro"
    where = AuditFilter(
        actor=canonical_actor(ator) if ator.strip() else "",
        action=acao.strip(),
        entity=entity_kind(entidade.strip()),
        since=days["de"],
        until=days["ate"],
        text=texto.strip(),
    )
    rows: list[AuditEntry] = []
    total = 0
    if not errors:
        rows, total = search_audit(
            session=session,
            where=where,
            timezone=settings.timezone,
            offset=(pagina - 1) * PAGE_SIZE,
        )
        last = max(1, math.ceil(total / PAGE_SIZE))
        if pagina > last and total:  # a page past the end (an old link): the last one
            pagina = last
            rows, total = search_audit(
                session=session,
                where=where,
                timezone=settings.timezone,
                offset=(pagina - 1) * PAGE_SIZE,
            )
    personal = [
        str(r.entry_id)
        for r in rows
        if r.action != READ_PERSONAL_DATA
        and isinstance(r.details, dict)
        and any(k in r.details for k in PERSONAL_DETAILS)
    ]
    if personal:
        record_personal_data_access(
            session=session,
            actor=web.principal.actor,
            entity="audit_log",
            ids=personal,
            fields=PERSONAL_DETAILS,
            route=request.url.path,
        )
        session.commit()  # audited before the details leave
    query = {
        "ator": where.actor,
        "acao": where.action,
        "entidade": where.entity,
        "de": de.strip(),
        "ate": ate.strip(),
        "texto": where.text,
    }
    kept = {k: v for k, v in query.items() if v}
    pages = max(1, math.ceil(total / PAGE_SIZE))
    zone = ZoneInfo(settings.timezone)
    return render(
        request,
        "admin/auditoria.html",
        web=web,
        title="Registro de auditoria",
        status_code=422 if errors else 200,
        entries=[
            {
                "entry": r,
                "at": r.at.astimezone(zone),
                "link": entity_link(r),
                "details": details_text(r.details),
                "lines": detail_items(r.details, timezone=settings.timezone),
                "actor": actor_label(r.actor),
                "action": AUDIT_ACTIONS.get(r.action, r.action),
                "entity": entity_label(r.entity),
            }
            for r in rows
        ],
        total=total,
        page=pagina,
        pages=pages,
        query=query,
        page_url=lambda n: "/admin/auditoria?" + urlencode(kept | {"pagina": n}),
        actors=actor_options(distinct_values(session=session, column=AuditEntry.actor)),
        actions=[
            (v, AUDIT_ACTIONS.get(v, v))
            for v in distinct_values(session=session, column=AuditEntry.action)
        ],
        entities=sorted(
            {
                (entity_kind(v), entity_label(v))
                for v in distinct_values(session=session, column=AuditEntry.entity)
            },
            key=lambda o: (fmt.plain(o[1]), o[0]),
        ),
        errors=errors,
        timezone=settings.timezone,
    )


class _Day(BaseModel):
    """A day typed in a filter (``AAAA-MM-DD``, the range of a query)."""

    day: QueryDate
