"""Stands on the map (``/admin/pontos``): create, edit, retire; licences and exclusions.

A stand is drawn on the map (``admin-stands.js``: Leaflet + Geoman, polygon or circle) or typed:
the vertices (one ``latitude, longitude`` a line, or a GeoJSON geometry) or a centre and a radius.
Forms are checked with the strict models of the JSON API (:mod:`api.routes.stands`:
``StandCreate``, ``StandUpdate``, ``RetireRequest``, ``LicenceGrant``, ``LicenceEnd``,
``ExclusionRequest``) and written by :mod:`db.stands.registry`, as ``POST /api/v1/stands`` and
``pontual stands`` do: the same rules (geometry, radius and area bounds, registry dates), the same
pt-BR messages, one audit entry per change.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse
from shapely import wkb
from shapely.geometry import MultiPolygon, mapping
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException
from starlette.responses import Response

from api import queries
from api.deps import SessionDep, SettingsDep
from api.routes.stands import (
    ExclusionRequest,
    LicenceEnd,
    LicenceGrant,
    RetireRequest,
    StandCreate,
    StandUpdate,
)
from api.web.admin_base import AdminUser, FormError, FormValueError, form_number, form_text
from api.web.admin_base import validate as validate_form
from api.web.templating import render
from db.stands import registry
from db.stands.models import LicenceExclusion, ParkingLicence, Stand
from fleet._errors import FleetError
from geo.calendar import local_today
from stands._errors import (
    InvalidGeometryError,
    InvalidRadiusError,
    StandsError,
    UnsupportedGeometryError,
)

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
POLYGON, POINT = "poligono", "ponto"
NOTICES = {
    "criado": "Ponto criado.",
    "alterado": "Ponto alterado.",
    "desativado": "Ponto desativado; as licenças vigentes terminaram na véspera.",
    "licenca": "Licença concedida.",
    "encerrada": "Licença encerrada.",
    "exclusao": "Prefixo excluído do ponto (art. 50); a licença terminou na véspera.",
}
_GEOMETRY_ERRORS = (InvalidGeometryError, InvalidRadiusError, UnsupportedGeometryError)
KINDS = (("", "não informado"), ("fixo", "ponto fixo"), ("livre", "ponto livre"))


# --- the area typed in the form -------------------------------------------------------------


def parse_vertices(text: str | None) -> dict[str, Any]:
    """Return the polygon of a vertices field as a GeoJSON geometry (lon, lat order).

    The field holds one vertex a line, ``latitude, longitude`` (or ``latitude; longitude`` with
    decimal commas, or separated by spaces), or a GeoJSON Polygon/MultiPolygon. Blank: an empty
    polygon (the registry refuses it with its own message). The ring is closed if it is not.

    Raises
    ------
    FormValueError
        If a line is not two numbers, or the GeoJSON cannot be read.
    """
    body = (text or "").strip()
    if body.startswith("{"):
        try:
            geometry = json.loads(body)
        except json.JSONDecodeError as exc:
            msg = f"GeoJSON ilegível: {exc.msg} (linha {exc.lineno}, coluna {exc.colno})"
            raise FormValueError("vertices", msg) from None
        if not isinstance(geometry, dict):
            raise FormValueError("vertices", "o GeoJSON deve ser um objeto de geometria")
        return geometry
    ring: list[list[float]] = []
    for number, line in enumerate(body.splitlines(), start=1):
        raw = line.strip()
        if not raw:
            continue
        parts = (
            [p.replace(",", ".") for p in raw.split(";")]
            if ";" in raw
            else raw.replace(",", " ").split()
        )
        try:
            lat, lon = (float(p) for p in parts if p.strip())
        except ValueError:
            msg = f"linha {number}: {raw!r} não é 'latitude, longitude' (ex.: -30.0277, -51.2287)"
            raise FormValueError("vertices", msg) from None
        ring.append([lon, lat])
    if ring and ring[0] != ring[-1]:
        ring.append(list(ring[0]))
    return {"type": "Polygon", "coordinates": [ring] if ring else []}


def vertices_text(geometry: dict[str, Any] | None) -> str:
    """Return a stand's area as the vertices field shows it (a GeoJSON text if it has parts)."""
    if not geometry:
        return ""
    coords = geometry.get("coordinates") or []
    rings = coords[0] if geometry.get("type") == "MultiPolygon" and len(coords) == 1 else None
    if geometry.get("type") == "Polygon":
        rings = coords
    if rings is None or len(rings) != 1:
        return json.dumps(geometry)
    return "\n".join(f"{lat:.7f}, {lon:.7f}" for lon, lat in rings[0][:-1])


def _geometry_values(
    *, mode: str, vertices: str, lat: str, lon: str, radius_m: str
) -> dict[str, Any]:
    if mode == POINT:
        return {
            "lat": form_number(lat, field="lat"),
            "lon": form_number(lon, field="lon"),
            "radius_m": form_number(radius_m, field="radius_m"),
        }
    return {"geometry": parse_vertices(vertices)}


def _attribute_values(
    *, name: str, capacity: str, kind: str, address: str, municipality_code: str = ""
) -> dict[str, Any]:
    return {
        "name": form_text(name),
        "capacity": form_number(capacity, field="capacity", integer=True),
        "kind": form_text(kind),
        "address": form_text(address),
        "municipality_code": form_text(municipality_code),
    }


def registry_errors(exc: Exception) -> dict[str, str]:
    """Return a registry refusal as a form error (on the area's fields when it is about it)."""
    return {"geometry" if isinstance(exc, _GEOMETRY_ERRORS) else "": str(exc)}


def _today(settings: Any) -> dt.date:
    return local_today(settings.timezone)


# --- pages ------------------------------------------------------------------------------------

_DIGITS = re.compile(r"([0-9]+)")


def natural_key(stand_id: str) -> tuple[tuple[tuple[int, int | str], ...], str]:
    """Return the sort key of a stand id: numbers by value, text as text ("9" before "10").

    The id is cut in runs of ASCII digits and of other characters; a digit run compares by its
    value and sorts before text at the same place ("PT-9" < "PT-10" < "PT-A"). The id itself
    breaks ties ("007" and "7"), so the order is total.
    """
    parts = _DIGITS.split(stand_id)  # digit runs at the odd places
    runs = tuple((0, int(part)) if k % 2 else (1, part) for k, part in enumerate(parts) if part)
    return runs, stand_id


@router.get("/admin/pontos", name="web_admin_stands")
def stands(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    q: Annotated[str, Query(max_length=200)] = "",
    desativados: bool = False,
    pagina: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    """Stands on a map and in a table of :data:`PAGE_SIZE` a page, in natural id order.

    Search by id or name; retired ones on request. A page past the last shows the last.
    """
    today = _today(settings)
    query = select(Stand)
    if not desativados:
        query = query.where(Stand.retired_at.is_(None))
    if q.strip():
        like = f"%{q.strip()}%"
        query = query.where(or_(Stand.stand_id.ilike(like), Stand.name.ilike(like)))
    ids = sorted(session.scalars(query.with_only_columns(Stand.stand_id)), key=natural_key)
    total = len(ids)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    pagina = min(pagina, pages)  # a page past the end (an old link): the last one
    shown = ids[(pagina - 1) * PAGE_SIZE : pagina * PAGE_SIZE]
    found = {s.stand_id: s for s in session.scalars(select(Stand).where(Stand.stand_id.in_(shown)))}
    rows = [found[i] for i in shown if i in found]
    counts = dict(
        session.execute(
            select(ParkingLicence.stand_id, func.count())
            .where(
                ParkingLicence.stand_id.in_([s.stand_id for s in rows]),
                or_(ParkingLicence.valid_from.is_(None), ParkingLicence.valid_from <= today),
                or_(ParkingLicence.valid_until.is_(None), ParkingLicence.valid_until >= today),
            )
            .group_by(ParkingLicence.stand_id)
        ).all()
    )
    return render(
        request,
        "admin/pontos.html",
        web=web,
        title="Pontos de táxi",
        stands=rows,
        licences=counts,
        total=total,
        page=pagina,
        pages=pages,
        q=q,
        include_retired=desativados,
    )


@router.get("/admin/pontos.geojson", name="web_admin_stands_geojson")
def stands_geojson(web: AdminUser, session: SessionDep) -> Response:
    """Active stands as GeoJSON for the console's maps (as ``GET /api/v1/stands``)."""
    features, count = queries.stand_features(session=session, limit=5000)
    return JSONResponse({"type": "FeatureCollection", "features": features, "count": count})


def _new_page(
    request: Request,
    *,
    web: AdminUser,
    values: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    return render(
        request,
        "admin/ponto_novo.html",
        web=web,
        title="Novo ponto de táxi",
        status_code=status_code,
        values=values or {"mode": POLYGON},
        errors=errors or {},
        kinds=KINDS,
    )


@router.get("/admin/pontos/novo", name="web_admin_stand_new")
def new_stand(request: Request, web: AdminUser) -> Response:
    """Draw a new stand on the map (or type its vertices, or its centre and radius)."""
    return _new_page(request, web=web)


@router.post("/admin/pontos", name="web_admin_stand_create")
def create_stand(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    stand_id: Annotated[str, Form(max_length=200)] = "",
    name: Annotated[str, Form(max_length=400)] = "",
    capacity: Annotated[str, Form(max_length=40)] = "",
    kind: Annotated[str, Form(max_length=40)] = "",
    address: Annotated[str, Form(max_length=1000)] = "",
    municipality_code: Annotated[str, Form(max_length=40)] = "",
    mode: Annotated[str, Form(max_length=20)] = POLYGON,
    vertices: Annotated[str, Form(max_length=200_000)] = "",
    lat: Annotated[str, Form(max_length=60)] = "",
    lon: Annotated[str, Form(max_length=60)] = "",
    radius_m: Annotated[str, Form(max_length=60)] = "",
) -> Response:
    """Create a stand (``StandCreate`` then ``registry.create_stand``), or show why not."""
    form = {
        "stand_id": stand_id,
        "name": name,
        "capacity": capacity,
        "kind": kind,
        "address": address,
        "municipality_code": municipality_code,
        "mode": mode,
        "vertices": vertices,
        "lat": lat,
        "lon": lon,
        "radius_m": radius_m,
    }
    try:
        values = {
            "stand_id": stand_id.strip(),
            **_attribute_values(
                name=name,
                capacity=capacity,
                kind=kind,
                address=address,
                municipality_code=municipality_code,
            ),
            **_geometry_values(mode=mode, vertices=vertices, lat=lat, lon=lon, radius_m=radius_m),
        }
        body = validate_form(StandCreate, values)
        if not body.name:  # a stand people look for by its name (the citizen's page)
            raise FormValueError("name", "informe o nome do ponto")
        registry.create_stand(
            session=session,
            stand_id=body.stand_id,
            actor=web.principal.actor,
            area=body.geometry,
            lat=body.lat,
            lon=body.lon,
            radius_m=body.radius_m,
            name=body.name,
            capacity=body.capacity,
            order_number=body.order_number,
            kind=body.kind,
            address=body.address,
            municipality_code=body.municipality_code,
        )
    except FormValueError as exc:
        errors = {exc.field: exc.message}
    except FormError as exc:
        errors = exc.errors
    except (StandsError, FleetError) as exc:
        errors = registry_errors(exc)
    else:
        session.commit()
        target = f"/admin/pontos/{quote(body.stand_id, safe='')}?aviso=criado"
        return RedirectResponse(target, status_code=303)
    session.rollback()
    return _new_page(request, web=web, values=form, errors=errors, status_code=422)


def _stand_or_404(session: Session, stand_id: str) -> Stand:
    stand = session.get(Stand, stand_id)
    if stand is None:
        raise HTTPException(404)
    return stand


def _stand_geometry(session: Session, stand: Stand) -> dict[str, Any] | None:
    if stand.geometry is None:
        return None
    shape = wkb.loads(bytes(stand.geometry.data))
    return dict(mapping(shape if isinstance(shape, MultiPolygon) else MultiPolygon([shape])))


def _stand_form(session: Session, stand: Stand) -> dict[str, str]:
    """Return the edit form's values of a stored stand."""
    geometry = _stand_geometry(session, stand)
    centre = ("", "")
    if stand.radius_m is not None and stand.geometry is not None:
        point = wkb.loads(bytes(stand.geometry.data)).centroid
        centre = (f"{point.y:.7f}", f"{point.x:.7f}")
    return {
        "name": stand.name or "",
        "capacity": "" if stand.capacity is None else str(stand.capacity),
        "kind": stand.kind or "",
        "address": stand.address or "",
        "mode": POINT if stand.radius_m is not None else POLYGON,
        "vertices": vertices_text(geometry),
        "lat": centre[0],
        "lon": centre[1],
        "radius_m": "" if stand.radius_m is None else f"{stand.radius_m:g}",
    }


def _stand_page(
    request: Request,
    *,
    web: AdminUser,
    session: Session,
    settings: Any,
    stand: Stand,
    form: dict[str, str] | None = None,
    errors: dict[str, dict[str, str]] | None = None,
    posted: dict[str, dict[str, str]] | None = None,
    notice: str | None = None,
    status_code: int = 200,
) -> Response:
    licences = session.scalars(
        select(ParkingLicence)
        .where(ParkingLicence.stand_id == stand.stand_id)
        .order_by(ParkingLicence.vehicle_id, ParkingLicence.valid_from.nulls_first())
    ).all()
    exclusions = session.scalars(
        select(LicenceExclusion)
        .where(LicenceExclusion.stand_id == stand.stand_id)
        .order_by(LicenceExclusion.excluded_on.desc(), LicenceExclusion.exclusion_id.desc())
    ).all()
    today = _today(settings)
    geometry = _stand_geometry(session, stand)
    return render(
        request,
        "admin/ponto.html",
        web=web,
        title=f"Ponto {stand.stand_id}",
        status_code=status_code,
        stand=stand,
        geometry_json=json.dumps(geometry) if geometry else "",
        form=form or _stand_form(session, stand),
        errors=errors or {},
        posted=posted or {},
        licences=licences,
        exclusions=exclusions,
        today=today.isoformat(),
        kinds=KINDS,
        grounds=registry.EXCLUSION_GROUNDS,
        notice=notice,
    )


@router.get("/admin/pontos/{stand_id}", name="web_admin_stand")
def stand_page(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    aviso: str = "",
) -> Response:
    """One stand: its area on the map (editable), attributes, retirement, licences, exclusions."""
    stand = _stand_or_404(session, stand_id)
    return _stand_page(
        request,
        web=web,
        session=session,
        settings=settings,
        stand=stand,
        notice=NOTICES.get(aviso),
    )


def _done(stand_id: str, notice: str) -> RedirectResponse:
    return RedirectResponse(
        f"/admin/pontos/{quote(stand_id, safe='')}?aviso={notice}", status_code=303
    )


def _refused(
    request: Request,
    *,
    web: AdminUser,
    session: Session,
    settings: Any,
    stand_id: str,
    form_name: str,
    errors: dict[str, str],
    posted: dict[str, str],
) -> Response:
    session.rollback()
    stand = _stand_or_404(session, stand_id)
    form = posted if form_name == "editar" else None
    return _stand_page(
        request,
        web=web,
        session=session,
        settings=settings,
        stand=stand,
        form=form,
        errors={form_name: errors},
        posted={form_name: posted},
        status_code=422,
    )


def _attempt(write: Any) -> dict[str, str] | None:
    """Run a form's validation and write; return its errors, or None when it was written."""
    try:
        write()
    except FormValueError as exc:
        return {exc.field: exc.message}
    except FormError as exc:
        return exc.errors
    except (StandsError, FleetError) as exc:
        return registry_errors(exc)
    return None


@router.post("/admin/pontos/{stand_id}", name="web_admin_stand_update")
def update_stand(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    name: Annotated[str, Form(max_length=400)] = "",
    capacity: Annotated[str, Form(max_length=40)] = "",
    kind: Annotated[str, Form(max_length=40)] = "",
    address: Annotated[str, Form(max_length=1000)] = "",
    mode: Annotated[str, Form(max_length=20)] = POLYGON,
    vertices: Annotated[str, Form(max_length=200_000)] = "",
    lat: Annotated[str, Form(max_length=60)] = "",
    lon: Annotated[str, Form(max_length=60)] = "",
    radius_m: Annotated[str, Form(max_length=60)] = "",
) -> Response:
    """Change a stand (``StandUpdate`` then ``registry.edit_stand``): what differs is written."""
    stand = _stand_or_404(session, stand_id)
    stored = _stand_form(session, stand)
    posted = {
        "name": name,
        "capacity": capacity,
        "kind": kind,
        "address": address,
        "mode": mode,
        "vertices": vertices,
        "lat": lat,
        "lon": lon,
        "radius_m": radius_m,
    }

    def write() -> None:
        if stand.name and not name.strip():  # the registry would store no name (NULL)
            msg = f"o nome não pode ficar vazio; o atual é “{stand.name}”"
            raise FormValueError("name", msg)
        attrs = _attribute_values(name=name, capacity=capacity, kind=kind, address=address)
        attrs.pop("municipality_code")
        changed = {k: v for k, v in attrs.items() if (v or "") != (getattr(stand, k) or "")}
        clear = [k for k, v in changed.items() if v is None]
        values = {k: v for k, v in changed.items() if v is not None}
        area_fields = ("vertices",) if mode == POLYGON else ("lat", "lon", "radius_m")
        if mode != stored["mode"] or any(posted[f].strip() != stored[f] for f in area_fields):
            values |= _geometry_values(
                mode=mode, vertices=vertices, lat=lat, lon=lon, radius_m=radius_m
            )
        body = validate_form(StandUpdate, values)
        fields = body.model_dump(exclude_unset=True)
        registry.edit_stand(
            session=session,
            stand_id=stand_id,
            actor=web.principal.actor,
            area=fields.pop("geometry", None),
            lat=fields.pop("lat", None),
            lon=fields.pop("lon", None),
            radius_m=fields.pop("radius_m", None),
            clear=clear,
            **fields,
        )

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return _done(stand_id, "alterado")
    return _refused(
        request,
        web=web,
        session=session,
        settings=settings,
        stand_id=stand_id,
        form_name="editar",
        errors=errors,
        posted=posted,
    )


@router.post("/admin/pontos/{stand_id}/desativar", name="web_admin_stand_retire")
def retire_stand(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    on: Annotated[str, Form(max_length=40)] = "",
    reason: Annotated[str, Form(max_length=4000)] = "",
) -> Response:
    """Retire the stand from a date (``RetireRequest`` then ``registry.retire_stand``)."""
    _stand_or_404(session, stand_id)

    def write() -> None:
        body = validate_form(RetireRequest, {"on": form_text(on), "reason": form_text(reason)})
        registry.retire_stand(
            session=session,
            stand_id=stand_id,
            actor=web.principal.actor,
            on=body.on or _today(settings),
            reason=body.reason,
            timezone=settings.timezone,
        )

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return _done(stand_id, "desativado")
    return _refused(
        request,
        web=web,
        session=session,
        settings=settings,
        stand_id=stand_id,
        form_name="desativar",
        errors=errors,
        posted={"on": on, "reason": reason},
    )


@router.post("/admin/pontos/{stand_id}/licencas", name="web_admin_licence_grant")
def grant_licence(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    vehicle_id: Annotated[str, Form(max_length=200)] = "",
    valid_from: Annotated[str, Form(max_length=40)] = "",
    valid_until: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Grant a prefixo a parking licence here (``LicenceGrant`` then ``registry.grant_licence``)."""
    _stand_or_404(session, stand_id)
    values = {
        "vehicle_id": vehicle_id.strip(),
        "valid_from": form_text(valid_from),
        "valid_until": form_text(valid_until),
    }

    def write() -> None:
        body = validate_form(LicenceGrant, values)
        registry.grant_licence(
            session=session,
            stand_id=stand_id,
            vehicle_id=body.vehicle_id,
            valid_from=body.valid_from,
            valid_until=body.valid_until,
            actor=web.principal.actor,
        )

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return _done(stand_id, "licenca")
    return _refused(
        request,
        web=web,
        session=session,
        settings=settings,
        stand_id=stand_id,
        form_name="licenca",
        errors=errors,
        posted={"vehicle_id": vehicle_id, "valid_from": valid_from, "valid_until": valid_until},
    )


@router.post("/admin/pontos/{stand_id}/licencas/encerrar", name="web_admin_licence_end")
def end_licence(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    vehicle_id: Annotated[str, Form(max_length=200)] = "",
    until: Annotated[str, Form(max_length=40)] = "",
    reason: Annotated[str, Form(max_length=4000)] = "",
) -> Response:
    """End the prefixo's licence valid on a date (``LicenceEnd`` then ``registry.end_licence``)."""
    _stand_or_404(session, stand_id)

    def write() -> None:
        body = validate_form(LicenceEnd, {"until": form_text(until), "reason": form_text(reason)})
        registry.end_licence(
            session=session,
            stand_id=stand_id,
            vehicle_id=vehicle_id.strip(),
            until=body.until,
            reason=body.reason,
            actor=web.principal.actor,
        )

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return _done(stand_id, "encerrada")
    return _refused(
        request,
        web=web,
        session=session,
        settings=settings,
        stand_id=stand_id,
        form_name=f"encerrar:{vehicle_id.strip()}",
        errors=errors,
        posted={"vehicle_id": vehicle_id, "until": until, "reason": reason},
    )


@router.post("/admin/pontos/{stand_id}/exclusoes", name="web_admin_exclusion")
def exclude(
    request: Request,
    stand_id: str,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    vehicle_id: Annotated[str, Form(max_length=200)] = "",
    on: Annotated[str, Form(max_length=40)] = "",
    ground: Annotated[str, Form(max_length=40)] = "",
    note: Annotated[str, Form(max_length=4000)] = "",
) -> Response:
    """Exclude a prefixo from this ponto fixo (POA art. 50), with its ground and a note."""
    _stand_or_404(session, stand_id)
    values = {
        "vehicle_id": vehicle_id.strip(),
        "on": form_text(on),
        "ground": form_text(ground),
        "note": form_text(note),
    }

    def write() -> None:
        if values["ground"] is None:  # no default: the ground is the admin's choice
            raise FormValueError("ground", "escolha o fundamento da exclusão (art. 50, I a III)")
        body = validate_form(ExclusionRequest, values)
        registry.exclude_prefixo(
            session=session,
            stand_id=stand_id,
            vehicle_id=body.vehicle_id,
            on=body.on,
            ground=body.ground,
            note=body.note,
            actor=web.principal.actor,
        )

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return _done(stand_id, "exclusao")
    return _refused(
        request,
        web=web,
        session=session,
        settings=settings,
        stand_id=stand_id,
        form_name="exclusao",
        errors=errors,
        posted={"vehicle_id": vehicle_id, "on": on, "ground": ground, "note": note},
    )
