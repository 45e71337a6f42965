"""Registry operations on stands, parking licences, exclusions and supervisors (POA arts. 42–50).

Keyword-only commands and queries over a SQLAlchemy session. Commands validate their input,
write the change and one audit-log entry (``db.enforcement.models.AuditEntry``) and flush; the
caller commits. Bad input raises a named error of ``stands/_errors.py`` with a pt-BR message.

Dates of licences and supervisor terms are inclusive local calendar dates (the municipality's
zone), as everywhere in the registry. Every date a command stores is checked against the registry
range of :mod:`fleet.dates` (1990-01-01 to today + 1 year): ``fleet.dates.RegistryDateError``
otherwise.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import geopandas as gpd
import shapely
from geoalchemy2 import WKTElement
from shapely.geometry import MultiPolygon, Polygon, shape
from shapely.geometry.base import BaseGeometry
from sqlalchemy import Date, func, literal, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.enforcement.models import AuditEntry
from db.fleet.models import Driver, Municipality, Vehicle
from db.stands.models import (
    STAND_KINDS,
    LicenceExclusion,
    ParkingLicence,
    Stand,
    StandSupervisor,
    StandSuspension,
)
from db.stands.store import BOUNDARY_REACH_M, OUTSIDE_HINT
from fleet.dates import check_optional_registry_date, check_registry_date
from fleet.ids import display_text_problem, registry_id_problem
from geo.calendar import DEFAULT_TIMEZONE
from geo.crs import WGS84, buffer_points_m
from stands._errors import (
    InvalidAttributeError,
    InvalidGeometryError,
    InvalidRadiusError,
    LicenceOverlapError,
    StandExistsError,
    SupervisorError,
    UnknownDriverError,
    UnknownLicenceError,
    UnknownStandError,
    UnknownVehicleError,
    UnsupportedGeometryError,
)
from stands.layers import MAX_RADIUS_M, MIN_RADIUS_M, invalid_reason, radius_ok
from stands.suspensions import check_suspension

MIN_AREA_M2 = 1.0
"""Smallest stand area accepted (a polygon with less is degenerate: a point or a line)."""
_M_PER_DEG = 111_320.0

EXCLUSION_GROUNDS: Mapping[str, tuple[str, str]] = {
    "solicitacao": ("art. 50, I", "por solicitação do próprio autorizatário"),
    "penalidade": ("art. 50, II", "por decorrência de aplicação de penalidade, pela EPTC"),
    "sem_supervisor": (
        "art. 50, III",
        "por ausência de supervisor devidamente eleito, por prazo superior a 90 (noventa) dias",
    ),
}
"""Grounds of the exclusion of a prefixo from a ponto fixo: code → (provision, words of the law)."""

EDITABLE = ("name", "address", "capacity", "order_number", "kind", "municipality_code")
"""Stand attributes that :func:`edit_stand` can clear (set to null) through ``clear``."""

# Audit-log entities and actions.
STAND, LICENCE, EXCLUSION, SUPERVISOR, SUSPENSION = (
    "stand",
    "parking_licence",
    "licence_exclusion",
    "stand_supervisor",
    "stand_suspension",
)


# --- helpers ---------------------------------------------------------------------------------


def _require_actor(actor: str) -> None:
    if not actor or not actor.strip():
        msg = "'actor' vazio; informe quem faz a alteração (ex.: --actor matricula-123)"
        raise InvalidAttributeError(msg)


def _audit(
    session: Session, *, actor: str, action: str, entity: str, entity_id: str, **details: Any
) -> None:
    _require_actor(actor)
    session.add(
        AuditEntry(actor=actor, action=action, entity=entity, entity_id=entity_id, details=details)
    )


def _in_wgs84(geom: BaseGeometry) -> None:
    minx, miny, maxx, maxy = geom.bounds
    if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
        msg = (
            f"coordenadas fora de WGS84 (lon {minx:.6f}…{maxx:.6f}, lat {miny:.6f}…{maxy:.6f}); "
            "esperado lon em [-180, 180] e lat em [-90, 90], nessa ordem (GeoJSON: [lon, lat])"
        )
        raise InvalidGeometryError(msg)


def stand_area(
    *,
    area: Mapping[str, Any] | BaseGeometry | None = None,
    lat: float | None = None,
    lon: float | None = None,
    radius_m: float | None = None,
) -> tuple[MultiPolygon, float | None]:
    """Build a stand's area from a polygon, or from a point and a radius in metres.

    Parameters
    ----------
    area : mapping or shapely geometry, optional
        GeoJSON geometry (Polygon or MultiPolygon, EPSG:4326) or a shapely polygon.
    lat, lon : float, optional
        Centre of a circular stand (degrees, EPSG:4326); needs ``radius_m``.
    radius_m : float, optional
        Radius of the circle, in metres (``MIN_RADIUS_M`` <= radius_m <= ``MAX_RADIUS_M``),
        buffered in the local UTM CRS.

    Returns
    -------
    tuple of (shapely.MultiPolygon, float or None)
        The area in EPSG:4326 and the radius it was drawn with (None for a polygon).

    Raises
    ------
    InvalidGeometryError
        If both or neither of polygon and point are given, the polygon is invalid or empty, its
        area is below ``MIN_AREA_M2``, or coordinates are out of range.
    UnsupportedGeometryError
        If the GeoJSON geometry is not a Polygon/MultiPolygon.
    InvalidRadiusError
        If the point has no radius, or the radius is not in [``MIN_RADIUS_M``, ``MAX_RADIUS_M``].
    """
    has_point = lat is not None or lon is not None
    if (area is None) == (not has_point):
        msg = "informe a área do ponto como polígono OU como lat/lon com radius_m (um dos dois)"
        raise InvalidGeometryError(msg)
    if area is not None:
        if radius_m is not None:
            msg = "radius_m só vale para um ponto dado por lat/lon, não para um polígono"
            raise InvalidRadiusError(msg)
        try:
            geom = area if isinstance(area, BaseGeometry) else shape(area)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            msg = f"geometria GeoJSON inválida: {exc}"
            raise InvalidGeometryError(msg) from None
        if isinstance(geom, Polygon):
            geom = MultiPolygon([geom])
        if not isinstance(geom, MultiPolygon):
            msg = (
                f"geometria {geom.geom_type}; esperado Polygon ou MultiPolygon (ou lat/lon e raio)"
            )
            raise UnsupportedGeometryError(msg)
        geom = shapely.force_2d(geom)
        if geom.is_empty:
            msg = "polígono vazio"
            raise InvalidGeometryError(msg)
        if not geom.is_valid:
            msg = f"polígono inválido: {invalid_reason(geom)}; corrija a geometria"
            raise InvalidGeometryError(msg)
        _in_wgs84(geom)
        _check_area(geom)
        return geom, None
    if lat is None or lon is None:
        msg = "ponto incompleto: informe lat e lon"
        raise InvalidGeometryError(msg)
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        msg = (
            f"posição inválida lat={lat}, lon={lon}; esperado lat em [-90, 90], lon em [-180, 180]"
        )
        raise InvalidGeometryError(msg)
    if radius_m is None:
        msg = "ponto sem radius_m; informe o raio do ponto em metros"
        raise InvalidRadiusError(msg)
    if not radius_ok(radius_m):
        msg = (
            f"raio de {radius_m!r} m (radius_m) fora do intervalo aceito: de {MIN_RADIUS_M:g} a "
            f"{MAX_RADIUS_M:g} metros"
        )
        raise InvalidRadiusError(msg)
    point = gpd.GeoDataFrame(geometry=[shapely.Point(lon, lat)], crs=WGS84)
    circle = buffer_points_m(point, radius_m).geometry.iloc[0]
    area = MultiPolygon([circle])
    _check_area(area)
    return area, float(radius_m)


def _check_area(geom: MultiPolygon) -> None:
    """Refuse an area below :data:`MIN_AREA_M2` (approximate metres at its latitude)."""
    lat = geom.centroid.y if not geom.is_empty else 0.0
    area_m2 = geom.area * _M_PER_DEG**2 * math.cos(math.radians(lat))
    if geom.is_empty or not area_m2 >= MIN_AREA_M2:
        msg = (
            f"área do ponto de {area_m2:.3g} m²; esperado ao menos {MIN_AREA_M2:g} m² "
            "(um polígono que não seja um ponto ou uma linha)"
        )
        raise InvalidGeometryError(msg)


def _check_attributes(
    session: Session,
    *,
    kind: str | None,
    capacity: int | None,
    order_number: int | None,
    municipality_code: str | None,
    name: str | None = None,
) -> None:
    if name is not None and (problem := display_text_problem(name)) is not None:
        msg = f"'name' {problem}"
        raise InvalidAttributeError(msg)
    if kind is not None and kind not in STAND_KINDS:
        msg = f"'kind' era {kind!r}; esperado um de {', '.join(STAND_KINDS)}"
        raise InvalidAttributeError(msg)
    if capacity is not None and (isinstance(capacity, bool) or capacity < 0):
        msg = f"'capacity' era {capacity!r}; esperado um inteiro >= 0 (vagas)"
        raise InvalidAttributeError(msg)
    if order_number is not None and (isinstance(order_number, bool) or order_number < 1):
        msg = f"'order_number' era {order_number!r}; esperado um inteiro >= 1"
        raise InvalidAttributeError(msg)
    if municipality_code is not None and session.get(Municipality, municipality_code) is None:
        msg = (
            f"município {municipality_code!r} não cadastrado; "
            "use o código IBGE de 7 dígitos (pontual import municipalities)"
        )
        raise InvalidAttributeError(msg)


def _check_in_municipality(
    session: Session, wkt: str | None, municipality_code: str | None
) -> None:
    """Refuse a stand drawn far from its municipality (a swapped lat/lon, another city's place).

    Only where the municipality's boundary is stored; within :data:`BOUNDARY_REACH_M` of it.
    """
    if municipality_code is None or wkt is None:
        return
    near = session.execute(
        text(
            "SELECT ST_DWithin(boundary::geography, ST_GeomFromText(:wkt, 4326)::geography, "
            ":reach) FROM municipalities WHERE code = :code AND boundary IS NOT NULL"
        ),
        {"wkt": wkt, "reach": BOUNDARY_REACH_M, "code": municipality_code},
    ).scalar()
    if near is False:
        msg = f"o ponto fica fora do município {municipality_code} ({OUTSIDE_HINT})"
        raise InvalidGeometryError(msg)


def get_stand(*, session: Session, stand_id: str, active: bool = False) -> Stand:
    """Return a stand, or raise ``UnknownStandError`` (also when retired and ``active``).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_id : str
        The stand's id.
    active : bool, default False
        Refuse a retired stand.

    Returns
    -------
    db.stands.models.Stand
        The stand.

    Raises
    ------
    UnknownStandError
        If the stand does not exist (or is retired, with ``active``).
    """
    stand = session.get(Stand, stand_id)
    if stand is None:
        msg = f"ponto '{stand_id}' não encontrado"
        raise UnknownStandError(msg)
    if active and stand.retired_at is not None:
        msg = f"o ponto '{stand_id}' está desativado desde {stand.retired_at:%Y-%m-%d}"
        raise UnknownStandError(msg)
    return stand


def _vehicle(session: Session, vehicle_id: str) -> Vehicle:
    vehicle = session.get(Vehicle, vehicle_id)
    if vehicle is None:
        msg = f"prefixo '{vehicle_id}' não encontrado no cadastro da frota"
        raise UnknownVehicleError(msg)
    return vehicle


# --- stands ----------------------------------------------------------------------------------


def create_stand(
    *,
    session: Session,
    stand_id: str,
    actor: str,
    area: Mapping[str, Any] | BaseGeometry | None = None,
    lat: float | None = None,
    lon: float | None = None,
    radius_m: float | None = None,
    name: str | None = None,
    capacity: int | None = None,
    order_number: int | None = None,
    kind: str | None = None,
    address: str | None = None,
    municipality_code: str | None = None,
) -> Stand:
    """Create a stand from a polygon, or from a point with ``radius_m``.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        New id (non-empty, not yet used).
    actor : str
        Who makes the change (audit log).
    area, lat, lon, radius_m
        The stand's area; see :func:`stand_area`.
    name, address : str, optional
        Name and street address.
    capacity : int, optional
        Spaces (>= 0).
    order_number : int, optional
        Order number of the ponto (>= 1; PB art. 15).
    kind : {"fixo", "livre"}, optional
        Ponto fixo or livre.
    municipality_code : str, optional
        IBGE code of a registered municipality.

    Returns
    -------
    db.stands.models.Stand
        The new stand.

    Raises
    ------
    StandExistsError
        If ``stand_id`` is already used.
    InvalidAttributeError, InvalidGeometryError, InvalidRadiusError, UnsupportedGeometryError
        On bad attributes or geometry.
    """
    _require_actor(actor)
    stand_id = stand_id.strip() if stand_id else ""
    if not stand_id:
        msg = "'stand_id' vazio; informe o identificador do ponto"
        raise InvalidAttributeError(msg)
    if (problem := registry_id_problem(stand_id)) is not None:  # the id goes in URLs
        msg = f"'stand_id' {problem}"
        raise InvalidAttributeError(msg)
    if session.get(Stand, stand_id) is not None:
        msg = f"o ponto '{stand_id}' já existe (altere-o em vez de criá-lo de novo)"
        raise StandExistsError(msg)
    geom, radius = stand_area(area=area, lat=lat, lon=lon, radius_m=radius_m)
    _check_attributes(
        session,
        kind=kind,
        capacity=capacity,
        order_number=order_number,
        municipality_code=municipality_code,
        name=name,
    )
    _check_in_municipality(session, geom.wkt, municipality_code)
    stand = Stand(
        stand_id=stand_id,
        name=name,
        address=address,
        capacity=capacity,
        order_number=order_number,
        kind=kind,
        municipality_code=municipality_code,
        geometry=WKTElement(geom.wkt, srid=4326),
        radius_m=radius,
    )
    session.add(stand)
    _audit(
        session,
        actor=actor,
        action="create",
        entity=STAND,
        entity_id=stand_id,
        name=name,
        address=address,
        capacity=capacity,
        order_number=order_number,
        kind=kind,
        municipality_code=municipality_code,
        radius_m=radius,
        geometry=geom.wkt,
    )
    session.flush()
    return stand


def edit_stand(
    *,
    session: Session,
    stand_id: str,
    actor: str,
    area: Mapping[str, Any] | BaseGeometry | None = None,
    lat: float | None = None,
    lon: float | None = None,
    radius_m: float | None = None,
    name: str | None = None,
    capacity: int | None = None,
    order_number: int | None = None,
    kind: str | None = None,
    address: str | None = None,
    municipality_code: str | None = None,
    clear: Collection[str] = (),
) -> Stand:
    """Change a stand's attributes or area; None leaves a field unchanged.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        The stand to change.
    actor : str
        Who makes the change (audit log).
    area, lat, lon, radius_m
        A new area (:func:`stand_area`); none of them: the area is kept.
    name, capacity, order_number, kind, address, municipality_code
        New values, as in :func:`create_stand`.
    clear : collection of str
        Fields of :data:`EDITABLE` to set to null.

    Returns
    -------
    db.stands.models.Stand
        The changed stand.

    Raises
    ------
    UnknownStandError
        If the stand does not exist.
    InvalidAttributeError, InvalidGeometryError, InvalidRadiusError, UnsupportedGeometryError
        On bad values, a field both set and cleared, or nothing to change.
    """
    _require_actor(actor)
    stand = get_stand(session=session, stand_id=stand_id)
    values = {
        "name": name,
        "address": address,
        "capacity": capacity,
        "order_number": order_number,
        "kind": kind,
        "municipality_code": municipality_code,
    }
    unknown = sorted(set(clear) - set(EDITABLE))
    if unknown:
        msg = (
            f"campos a limpar desconhecidos: {', '.join(unknown)}; "
            f"permitidos: {', '.join(EDITABLE)}"
        )
        raise InvalidAttributeError(msg)
    both = sorted(f for f in clear if values[f] is not None)
    if both:
        msg = f"campo alterado e limpo ao mesmo tempo: {', '.join(both)}"
        raise InvalidAttributeError(msg)
    _check_attributes(
        session,
        kind=kind,
        capacity=capacity,
        order_number=order_number,
        municipality_code=municipality_code,
        name=name,
    )
    changes: dict[str, Any] = {}
    for field, value in values.items():
        new = None if field in clear else value
        if (field in clear or value is not None) and getattr(stand, field) != new:
            changes[field] = {"from": getattr(stand, field), "to": new}
            setattr(stand, field, new)
    if area is not None or lat is not None or lon is not None or radius_m is not None:
        geom, radius = stand_area(area=area, lat=lat, lon=lon, radius_m=radius_m)
        old = session.scalar(select(Stand.geometry.ST_AsText()).where(Stand.stand_id == stand_id))
        changes["geometry"] = {"from": old, "to": geom.wkt}
        if stand.radius_m != radius:
            changes["radius_m"] = {"from": stand.radius_m, "to": radius}
        stand.geometry = WKTElement(geom.wkt, srid=4326)  # type: ignore[assignment]
        stand.radius_m = radius
        stand.location_note = None
    if not changes:
        msg = f"nada a alterar no ponto '{stand_id}'"
        raise InvalidAttributeError(msg)
    if {"geometry", "municipality_code"} & set(changes):
        placed = (
            changes["geometry"]["to"]
            if "geometry" in changes
            else session.scalar(
                select(Stand.geometry.ST_AsText()).where(Stand.stand_id == stand_id)
            )
        )
        _check_in_municipality(session, placed, stand.municipality_code)
    stand.updated_at = dt.datetime.now(dt.UTC)
    _audit(session, actor=actor, action="update", entity=STAND, entity_id=stand_id, **changes)
    session.flush()
    return stand


def retire_stand(
    *,
    session: Session,
    stand_id: str,
    actor: str,
    on: dt.date,
    reason: str | None = None,
    timezone: str = DEFAULT_TIMEZONE,
) -> list[int]:
    """Retire a stand from local date ``on``; its licences valid then end the day before.

    History (visits, licences, supervisors) stays. Licences that start on or after ``on`` are
    left as they are (listed in the audit entry) for the registry to decide.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        An active stand.
    actor : str
        Who makes the change (audit log).
    on : datetime.date
        First local day without the stand.
    reason : str, optional
        Why, for the audit log.
    timezone : str, default "America/Sao_Paulo"
        Zone of ``on`` (``retired_at`` is its local midnight).

    Returns
    -------
    list of int
        Ids of the licences ended.

    Raises
    ------
    UnknownStandError
        If the stand does not exist or is already retired.
    """
    _require_actor(actor)
    check_registry_date(on, name="on")
    stand = get_stand(session=session, stand_id=stand_id, active=True)
    day_before = on - dt.timedelta(days=1)
    ended = session.scalars(
        select(ParkingLicence).where(
            ParkingLicence.stand_id == stand_id,
            or_(ParkingLicence.valid_until.is_(None), ParkingLicence.valid_until >= on),
            or_(ParkingLicence.valid_from.is_(None), ParkingLicence.valid_from < on),
        )
    ).all()
    future = session.scalars(
        select(ParkingLicence.licence_id).where(
            ParkingLicence.stand_id == stand_id, ParkingLicence.valid_from >= on
        )
    ).all()
    for licence in ended:
        licence.valid_until = day_before
    stand.retired_at = dt.datetime.combine(on, dt.time(), tzinfo=ZoneInfo(timezone))
    stand.updated_at = dt.datetime.now(dt.UTC)
    ids = sorted(lic.licence_id for lic in ended)
    _audit(
        session,
        actor=actor,
        action="retire",
        entity=STAND,
        entity_id=stand_id,
        on=on,
        reason=reason,
        licences_ended=ids,
        licences_starting_later=sorted(future),
    )
    session.flush()
    return ids


# --- parking licences ------------------------------------------------------------------------


def _overlapping(
    session: Session,
    *,
    stand_id: str,
    vehicle_id: str,
    valid_from: dt.date | None,
    valid_until: dt.date | None,
) -> ParkingLicence | None:
    """Return the first licence of the prefixo at the stand sharing a day with the period."""
    closed = literal("[]")
    stored = func.daterange(ParkingLicence.valid_from, ParkingLicence.valid_until, closed)
    wanted = func.daterange(literal(valid_from, Date), literal(valid_until, Date), closed)
    query = select(ParkingLicence).where(
        ParkingLicence.stand_id == stand_id,
        ParkingLicence.vehicle_id == vehicle_id,
        stored.op("&&")(wanted),
    )
    return session.scalars(query.order_by(ParkingLicence.valid_from.nulls_first()).limit(1)).first()


def _period(lic: ParkingLicence) -> str:
    start = lic.valid_from.isoformat() if lic.valid_from else "início desconhecido"
    end = lic.valid_until.isoformat() if lic.valid_until else "sem término"
    return f"{start} a {end}"


def grant_licence(
    *,
    session: Session,
    stand_id: str,
    vehicle_id: str,
    valid_from: dt.date,
    actor: str,
    valid_until: dt.date | None = None,
) -> ParkingLicence:
    """Grant a prefixo a parking licence at a stand over inclusive local dates.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        An active stand.
    vehicle_id : str
        The prefixo (vehicle id of the fleet registry).
    valid_from : datetime.date
        First day of the licence.
    actor : str
        Who makes the change (audit log).
    valid_until : datetime.date, optional
        Last day (inclusive); None: open-ended.

    Returns
    -------
    db.stands.models.ParkingLicence
        The new licence.

    Raises
    ------
    UnknownStandError, UnknownVehicleError
        If the stand (active) or the prefixo does not exist.
    InvalidAttributeError
        If ``valid_until`` is before ``valid_from``.
    LicenceOverlapError
        If the prefixo already holds a licence at the stand on one of these days (the
        database's exclusion constraint enforces it too).
    """
    _require_actor(actor)
    check_registry_date(valid_from, name="valid_from")
    check_optional_registry_date(valid_until, name="valid_until")
    get_stand(session=session, stand_id=stand_id, active=True)
    _vehicle(session, vehicle_id)
    if valid_until is not None and valid_until < valid_from:
        msg = f"fim da licença ({valid_until}) antes do início ({valid_from})"
        raise InvalidAttributeError(msg)
    clash = _overlapping(
        session,
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    if clash is not None:
        msg = (
            f"o prefixo {vehicle_id} já tem licença no ponto {stand_id} de {_period(clash)} "
            f"(licença {clash.licence_id}); encerre-a antes de conceder outra"
        )
        raise LicenceOverlapError(msg)
    licence = ParkingLicence(
        vehicle_id=vehicle_id, stand_id=stand_id, valid_from=valid_from, valid_until=valid_until
    )
    try:
        with session.begin_nested():
            session.add(licence)
            session.flush()
    except IntegrityError as exc:  # a concurrent grant won the race
        if "ex_parking_licences_overlap" not in str(exc.orig):
            raise
        msg = f"o prefixo {vehicle_id} já tem licença no ponto {stand_id} nesse período"
        raise LicenceOverlapError(msg) from None
    _audit(
        session,
        actor=actor,
        action="grant",
        entity=LICENCE,
        entity_id=str(licence.licence_id),
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    session.flush()
    return licence


def licence_on(*, session: Session, stand_id: str, vehicle_id: str, on: dt.date) -> ParkingLicence:
    """Return the prefixo's licence at the stand valid on local date ``on``.

    Raises
    ------
    UnknownLicenceError
        If there is none.
    """
    licence = session.scalars(
        select(ParkingLicence).where(
            ParkingLicence.stand_id == stand_id,
            ParkingLicence.vehicle_id == vehicle_id,
            or_(ParkingLicence.valid_from.is_(None), ParkingLicence.valid_from <= on),
            or_(ParkingLicence.valid_until.is_(None), ParkingLicence.valid_until >= on),
        )
    ).first()
    if licence is None:
        msg = f"o prefixo {vehicle_id} não tem licença no ponto {stand_id} válida em {on}"
        raise UnknownLicenceError(msg)
    return licence


def end_licence(
    *,
    session: Session,
    stand_id: str,
    vehicle_id: str,
    until: dt.date,
    actor: str,
    reason: str | None = None,
) -> ParkingLicence:
    """End the prefixo's licence valid on ``until``: ``until`` becomes its last day.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id, vehicle_id : str
        The stand and the prefixo.
    until : datetime.date
        Last day of the licence (inclusive).
    actor : str
        Who makes the change (audit log).
    reason : str, optional
        Why, for the audit log.

    Returns
    -------
    db.stands.models.ParkingLicence
        The licence, ended.

    Raises
    ------
    UnknownStandError, UnknownVehicleError
        If the stand or the prefixo does not exist.
    UnknownLicenceError
        If no licence of the prefixo at the stand is valid on ``until``.
    """
    _require_actor(actor)
    check_registry_date(until, name="until")
    get_stand(session=session, stand_id=stand_id)
    _vehicle(session, vehicle_id)
    licence = licence_on(session=session, stand_id=stand_id, vehicle_id=vehicle_id, on=until)
    previous = licence.valid_until
    licence.valid_until = until
    _audit(
        session,
        actor=actor,
        action="end",
        entity=LICENCE,
        entity_id=str(licence.licence_id),
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        valid_until={"from": previous, "to": until},
        reason=reason,
    )
    session.flush()
    return licence


def exclusion_reason(ground: str, note: str | None = None) -> str:
    """Return the stored reason of an exclusion: provision, the law's words, and a note.

    Parameters
    ----------
    ground : str
        A key of :data:`EXCLUSION_GROUNDS`.
    note : str, optional
        Free text (process number, request date...).

    Returns
    -------
    str
        E.g. ``"art. 50, I: por solicitação do próprio autorizatário — protocolo 123"``.

    Raises
    ------
    InvalidAttributeError
        If ``ground`` is unknown.
    """
    if ground not in EXCLUSION_GROUNDS:
        msg = f"motivo {ground!r} desconhecido; esperado um de {', '.join(EXCLUSION_GROUNDS)}"
        raise InvalidAttributeError(msg)
    provision, words = EXCLUSION_GROUNDS[ground]
    reason = f"{provision}: {words}"
    return f"{reason} — {note.strip()}" if note and note.strip() else reason


def exclude_prefixo(
    *,
    session: Session,
    stand_id: str,
    vehicle_id: str,
    on: dt.date,
    ground: str,
    actor: str,
    note: str | None = None,
) -> LicenceExclusion:
    """Exclude a prefixo from a ponto fixo from local date ``on`` (POA art. 50).

    The licence valid on ``on`` ends the day before, and the exclusion is recorded with its
    ground (art. 50 I, II or III, in the law's words) and an optional note.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id, vehicle_id : str
        The stand and the prefixo.
    on : datetime.date
        First day without the licence.
    ground : {"solicitacao", "penalidade", "sem_supervisor"}
        Art. 50 I, II or III.
    actor : str
        Who makes the change (audit log).
    note : str, optional
        Appended to the reason (process number...).

    Returns
    -------
    db.stands.models.LicenceExclusion
        The exclusion.

    Raises
    ------
    UnknownStandError, UnknownVehicleError
        If the stand or the prefixo does not exist.
    UnknownLicenceError
        If the prefixo has no licence at the stand valid on ``on``, or it starts that day.
    InvalidAttributeError
        If ``ground`` is unknown.
    """
    _require_actor(actor)
    check_registry_date(on, name="on")
    reason = exclusion_reason(ground, note)
    get_stand(session=session, stand_id=stand_id)
    _vehicle(session, vehicle_id)
    licence = licence_on(session=session, stand_id=stand_id, vehicle_id=vehicle_id, on=on)
    if licence.valid_from is not None and licence.valid_from >= on:
        msg = (
            f"a licença do prefixo {vehicle_id} no ponto {stand_id} começa em "
            f"{licence.valid_from}; a exclusão deve ser posterior ao início"
        )
        raise UnknownLicenceError(msg)
    licence.valid_until = on - dt.timedelta(days=1)
    exclusion = LicenceExclusion(
        vehicle_id=vehicle_id, stand_id=stand_id, excluded_on=on, reason=reason
    )
    session.add(exclusion)
    session.flush()
    _audit(
        session,
        actor=actor,
        action="exclude",
        entity=EXCLUSION,
        entity_id=str(exclusion.exclusion_id),
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        excluded_on=on,
        ground=ground,
        reason=reason,
        licence_id=licence.licence_id,
    )
    session.flush()
    return exclusion


# --- supervisors -----------------------------------------------------------------------------


def _supervisor(session: Session, supervisor_id: int) -> StandSupervisor:
    record = session.get(StandSupervisor, supervisor_id)
    if record is None:
        msg = f"registro de supervisor {supervisor_id} não encontrado"
        raise SupervisorError(msg)
    return record


def elect_supervisor(
    *,
    session: Session,
    stand_id: str,
    person_name: str,
    elected_on: dt.date,
    minutes_ref: str,
    actor: str,
) -> StandSupervisor:
    """Record the election of a supervisor de ponto fixo (POA art. 42), not yet homologated.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        An active stand that is not a ponto livre.
    person_name : str
        Full name of the elected supervisor (art. 42 I).
    elected_on : datetime.date
        Date of the election meeting.
    minutes_ref : str
        Reference of the ata of the meeting (art. 42 II): protocol or document number.
    actor : str
        Who records it (audit log).

    Returns
    -------
    db.stands.models.StandSupervisor
        The record (``homologated_on`` null until :func:`homologate_supervisor`).

    Raises
    ------
    UnknownStandError
        If the stand does not exist or is retired.
    SupervisorError
        If the stand is a ponto livre, or the name or the ata is empty.
    """
    _require_actor(actor)
    check_registry_date(elected_on, name="elected_on")
    stand = get_stand(session=session, stand_id=stand_id, active=True)
    if stand.kind == "livre":
        msg = f"o ponto '{stand_id}' é livre; supervisor é eleito em ponto fixo (art. 42)"
        raise SupervisorError(msg)
    if not person_name or not person_name.strip():
        msg = "nome do supervisor vazio (art. 42, I: nome completo)"
        raise SupervisorError(msg)
    if not minutes_ref or not minutes_ref.strip():
        msg = "referência da ata vazia (art. 42, II: ata da reunião da eleição)"
        raise SupervisorError(msg)
    record = StandSupervisor(
        stand_id=stand_id,
        person_name=person_name.strip(),
        elected_on=elected_on,
        minutes_ref=minutes_ref.strip(),
    )
    session.add(record)
    session.flush()
    _audit(
        session,
        actor=actor,
        action="elect",
        entity=SUPERVISOR,
        entity_id=str(record.supervisor_id),
        stand_id=stand_id,
        person_name=record.person_name,
        elected_on=elected_on,
        minutes_ref=record.minutes_ref,
    )
    session.flush()
    return record


def homologate_supervisor(
    *, session: Session, supervisor_id: int, on: dt.date, actor: str
) -> list[int]:
    """Homologate an election (POA art. 42 § 2º); the stand's previous supervisor leaves.

    Earlier supervisor records of the same stand still open on ``on`` end the day before.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    supervisor_id : int
        The election record.
    on : datetime.date
        Homologation date (publication), not before the election.
    actor : str
        Who records it (audit log).

    Returns
    -------
    list of int
        Ids of the records whose term ended.

    Raises
    ------
    SupervisorError
        If the record does not exist, is already homologated or ended, or ``on`` precedes
        the election.
    """
    _require_actor(actor)
    check_registry_date(on, name="on")
    record = _supervisor(session, supervisor_id)
    if record.homologated_on is not None:
        msg = f"supervisor {supervisor_id} já homologado em {record.homologated_on}"
        raise SupervisorError(msg)
    if record.until is not None:
        msg = f"o mandato do supervisor {supervisor_id} terminou em {record.until}"
        raise SupervisorError(msg)
    if on < record.elected_on:
        msg = f"homologação ({on}) antes da eleição ({record.elected_on})"
        raise SupervisorError(msg)
    previous = session.scalars(
        select(StandSupervisor).where(
            StandSupervisor.stand_id == record.stand_id,
            StandSupervisor.supervisor_id != supervisor_id,
            StandSupervisor.elected_on <= record.elected_on,
            or_(StandSupervisor.until.is_(None), StandSupervisor.until >= on),
        )
    ).all()
    ended = []
    for other in previous:
        start = other.homologated_on or other.elected_on
        other.until = max(on - dt.timedelta(days=1), start)
        ended.append(other.supervisor_id)
    record.homologated_on = on
    _audit(
        session,
        actor=actor,
        action="homologate",
        entity=SUPERVISOR,
        entity_id=str(supervisor_id),
        stand_id=record.stand_id,
        homologated_on=on,
        terms_ended=sorted(ended),
    )
    session.flush()
    return sorted(ended)


def end_supervisor_term(
    *,
    session: Session,
    supervisor_id: int,
    until: dt.date,
    actor: str,
    reason: str | None = None,
) -> StandSupervisor:
    """End a supervisor's term (resignation, removal): ``until`` is the last day.

    Raises
    ------
    SupervisorError
        If the record does not exist, already ended, or ``until`` precedes the election.
    """
    _require_actor(actor)
    check_registry_date(until, name="until")
    record = _supervisor(session, supervisor_id)
    if record.until is not None:
        msg = f"o mandato do supervisor {supervisor_id} já terminou em {record.until}"
        raise SupervisorError(msg)
    start = record.homologated_on or record.elected_on
    if until < start:
        msg = f"fim do mandato ({until}) antes do início ({start})"
        raise SupervisorError(msg)
    record.until = until
    _audit(
        session,
        actor=actor,
        action="end_term",
        entity=SUPERVISOR,
        entity_id=str(supervisor_id),
        stand_id=record.stand_id,
        until=until,
        reason=reason,
    )
    session.flush()
    return record


def list_supervisors(
    *, session: Session, stand_ids: Sequence[str] | None = None
) -> list[StandSupervisor]:
    """Return supervisor records (all terms, the history), by stand then election date."""
    query = select(StandSupervisor)
    if stand_ids is not None:
        query = query.where(StandSupervisor.stand_id.in_(list(stand_ids)))
    return list(
        session.scalars(
            query.order_by(
                StandSupervisor.stand_id, StandSupervisor.elected_on, StandSupervisor.supervisor_id
            )
        )
    )


# --- suspensions (POA art. 45 § único) -------------------------------------------------------


def create_suspension(
    *,
    session: Session,
    stand_id: str,
    starts_on: dt.date,
    kind: str,
    actor: str,
    vehicle_id: str | None = None,
    driver_id: str | None = None,
    ends_on: dt.date | None = None,
    reason: str | None = None,
    process_ref: str | None = None,
) -> StandSuspension:
    """Record a prefixo's or a driver's suspension from (or barring at) a stand, or its closure.

    The registry records what was decided: the dates are stored as given (a ``suspension`` is
    not forced to 20 days). A ``closed`` stand (the municipality's "interdição do ponto": road
    works, an event) names no prefixo nor driver: it is no sanction on anyone.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session (flushed, not committed).
    stand_id : str
        The stand (active or retired: a decision may name a stand retired since).
    starts_on, ends_on : datetime.date
        Inclusive local dates; ``ends_on`` None only for ``barred`` and ``closed``
        (open-ended).
    kind : str
        ``suspension`` (art. 45 § único I), ``barred`` (II a) or ``closed`` (the stand closed).
    actor : str
        Who records it (audit log).
    vehicle_id, driver_id : str, optional
        Exactly one: the suspended prefixo or driver; neither for ``closed``.
    reason, process_ref : str, optional
        Why, and the processo administrativo.

    Returns
    -------
    db.stands.models.StandSuspension
        The stored row.

    Raises
    ------
    UnknownStandError, UnknownVehicleError, UnknownDriverError
        If the stand, prefixo or driver is not in the registry.
    InvalidAttributeError
        If both or neither of prefixo and driver are given (any of them for ``closed``), the
        kind is unknown, the end is before the start, or a ``suspension`` has no end.
    """
    _require_actor(actor)
    check_registry_date(starts_on, name="starts_on")
    check_optional_registry_date(ends_on, name="ends_on")
    problems = check_suspension(
        vehicle_id=vehicle_id,
        driver_id=driver_id,
        starts_on=starts_on,
        ends_on=ends_on,
        kind=kind,
    )
    if problems:
        raise InvalidAttributeError("; ".join(problems))
    get_stand(session=session, stand_id=stand_id)
    if vehicle_id is not None:
        _vehicle(session, vehicle_id)
    if driver_id is not None and session.get(Driver, driver_id) is None:
        msg = f"condutor '{driver_id}' não encontrado no cadastro de condutores"
        raise UnknownDriverError(msg)
    row = StandSuspension(
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        driver_id=driver_id,
        starts_on=starts_on,
        ends_on=ends_on,
        kind=kind,
        reason=reason,
        process_ref=process_ref,
    )
    session.add(row)
    session.flush()
    _audit(
        session,
        actor=actor,
        action="create",
        entity=SUSPENSION,
        entity_id=str(row.suspension_id),
        stand_id=stand_id,
        vehicle_id=vehicle_id,
        driver_id=driver_id,
        starts_on=starts_on.isoformat(),
        ends_on=None if ends_on is None else ends_on.isoformat(),
        kind=kind,
        reason=reason,
        process_ref=process_ref,
    )
    session.flush()
    return row


def list_suspensions(*, session: Session, stand_id: str) -> list[StandSuspension]:
    """Return a stand's suspensions and closures (every date), by start then id."""
    get_stand(session=session, stand_id=stand_id)
    query = select(StandSuspension).where(StandSuspension.stand_id == stand_id)
    return list(
        session.scalars(query.order_by(StandSuspension.starts_on, StandSuspension.suspension_id))
    )
