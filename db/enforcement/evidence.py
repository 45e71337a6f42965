"""Gather from the database what an auto de infração shows (``documents.Document``).

The vehicle and its holder come from the registry; the driver from the registry of drivers,
when the findings name one (``details.driver_id``: ``driver_not_allowed``, a stand used under a
driver's suspension); the agent's name from their account; the track from the stored fixes of
the vehicle over the infraction's interval (a few minutes either side); the stand from the
stands table; the place from the stand, else from the findings' geometry (:func:`place_of`); the
findings with their details and geometry from ``findings``, as evidence against the proposal's
vehicle (``documents.accused_evidence``: a place's waits or a queue jump keep that vehicle's
fixes only). Missing pieces
stay None: the documents say "não informado" (a driver: "não identificado", an id the registry
lacks: "não cadastrado") rather than invent. Names are personal data: the routes that deliver a
document audit them (``api.routes.proposals.DOCUMENT_PERSONAL_FIELDS``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import shapely
from geoalchemy2.shape import to_shape
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from db.accounts.models import User
from db.enforcement.workflow import as_record, finding_ids_of, get_proposal, load_findings, rule_of
from db.fleet.models import Driver, PermitHolder, Vehicle
from db.stands.models import Stand
from db.tracking.models import Fix
from enforcement.documents import (
    Document,
    DriverRef,
    accused_evidence,
    driver_ids,
    fix_vehicles,
)
from geo.calendar import DEFAULT_TIMEZONE, UF_TIMEZONES

TRACK_MARGIN = dt.timedelta(minutes=5)
"""Fixes kept either side of the infraction's interval, for context on the map."""
MAX_TRACK_FIXES = 5_000


def _ring(geom: Any) -> list[tuple[float, float]] | None:
    if geom is None or geom.is_empty:
        return None
    poly = max(getattr(geom, "geoms", [geom]), key=lambda g: g.area)
    return [(float(x), float(y)) for x, y in poly.exterior.coords]


def _lat_lon(x: float, y: float) -> str:
    return f"{y:.5f}, {x:.5f}"


def place_of(geometries: Iterable[Any]) -> str | None:
    """Return where the findings' geometries place an infraction, in pt-BR (None: nowhere).

    A point gives its ``lat, lon``; else an area (a place's waits) its centre, or a point on
    its surface when the centre falls outside; else a line (a tracking gap, a jump) its first
    and last positions.
    """
    geoms = [g for g in geometries if g is not None and not g.is_empty]
    points = [g for g in geoms if g.geom_type in ("Point", "MultiPoint")]
    if points:
        first = getattr(points[0], "geoms", [points[0]])[0]
        return _lat_lon(first.x, first.y)
    areas = [g for g in geoms if g.geom_type in ("Polygon", "MultiPolygon")]
    if areas:
        area = shapely.union_all(areas)
        centre = area.centroid if area.contains(area.centroid) else area.point_on_surface()
        return f"área em torno de {_lat_lon(centre.x, centre.y)}"
    lines = [c for g in geoms if "LineString" in g.geom_type for c in _line_ends(g)]
    if not lines:
        return None
    (x0, y0), (x1, y1) = lines[0], lines[-1]
    if (x0, y0) == (x1, y1):
        return _lat_lon(x0, y0)
    return f"trecho de {_lat_lon(x0, y0)} a {_lat_lon(x1, y1)}"


def _line_ends(line: Any) -> list[tuple[float, float]]:
    parts = getattr(line, "geoms", [line])
    first, last = parts[0].coords[0], parts[-1].coords[-1]
    return [(float(first[0]), float(first[1])), (float(last[0]), float(last[1]))]


def drivers_of(session: Session, ids: list[str]) -> list[DriverRef]:
    """Return each driver id with its name in the registry of drivers (None: not registered)."""
    if not ids:
        return []
    rows = session.execute(select(Driver.driver_id, Driver.name).where(Driver.driver_id.in_(ids)))
    names = {driver_id: name for driver_id, name in rows}
    return [{"driver_id": d, "name": names.get(d), "registered": d in names} for d in ids]


def agent_name(session: Session, agent_id: str | None) -> str | None:
    """Return the full name of the account ``agent_id`` names (None: no account, or no name).

    ``agent_id`` is the login (``demo_fiscal``, or ``user:demo_fiscal`` as the audit log
    writes it; case ignored, as at login); a command line's free text (a matrícula) usually
    names no account.
    """
    login = (agent_id or "").strip().removeprefix("user:")
    if not login:
        return None
    name = session.scalar(
        select(User.full_name).where(func.lower(User.username) == login.lower()).limit(1)
    )
    return (name.strip() or None) if name else None


def with_stored_meters(session: Session, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give the findings' evidence fixes without a ``meter`` the one their stored fix has.

    The stand kinds name a boarding's fixes (free, then occupied) without the meter: the
    agent reads it from the vehicle's fix of that instant, when retention has kept it. Each
    record: ``vehicle_id`` and ``details`` (changed in place, and returned).
    """
    wanted: list[tuple[str, dt.datetime, dict[str, Any]]] = []
    for r in records:
        details = r.get("details") or {}
        owners = fix_vehicles(details, vehicle_id=r.get("vehicle_id"))
        for fix, owner in zip(details.get("fixes") or [], owners, strict=True):
            if (
                isinstance(fix, dict)
                and fix.get("meter") is None
                and owner
                and fix.get("timestamp")
            ):
                try:
                    at = dt.datetime.fromisoformat(str(fix["timestamp"]))
                except ValueError:
                    continue
                wanted.append((owner, at, fix))
    if not wanted:
        return records
    rows = session.execute(
        text(
            "SELECT f.vehicle_id, f.ts, f.meter "
            "FROM unnest(CAST(:v AS text[]), CAST(:t AS timestamptz[])) AS k(v, t) "
            "JOIN fixes f ON f.vehicle_id = k.v AND f.ts = k.t WHERE f.meter IS NOT NULL"
        ),
        {"v": [w[0] for w in wanted], "t": [w[1] for w in wanted]},
    ).all()
    meters = {(str(v), ts): str(m) for v, ts, m in rows}
    for owner, at, fix in wanted:
        if (meter := meters.get((owner, at))) is not None:
            fix["meter"] = meter
    return records


def stored_track(
    session: Session, vehicle_id: str | None, start: dt.datetime, end: dt.datetime
) -> list[tuple[float, float]]:
    """Return the vehicle's stored fixes ``(lon, lat)`` in time order, from ``start`` to ``end``.

    With :data:`TRACK_MARGIN` either side and at most :data:`MAX_TRACK_FIXES` (the first ones);
    empty without a vehicle.
    """
    if not vehicle_id:
        return []
    rows = session.execute(
        select(Fix.lon, Fix.lat)
        .where(
            Fix.vehicle_id == vehicle_id,
            Fix.ts >= start - TRACK_MARGIN,
            Fix.ts <= end + TRACK_MARGIN,
        )
        .order_by(Fix.ts)
        .limit(MAX_TRACK_FIXES)
    ).all()
    return [(float(lon), float(lat)) for lon, lat in rows]


def document_for(session: Session, proposal_id: str) -> Document:
    """Assemble the document data of a stored proposal."""
    p = get_proposal(session, proposal_id)
    book, rule = rule_of(p)
    record = as_record(p, finding_ids_of(session, proposal_id))
    if record["exception"] is None and rule.exception is not None:
        # stored before exceptions were recorded: open, so an issued auto is refused
        record["exception"] = {
            "provision": rule.exception.provision,
            "excerpt": rule.exception.excerpt,
            "question": rule.exception.question,
            "answer": None,
        }
    if not record["pontuacao_choices"] and rule.pontuacao_choices:
        record["pontuacao_choices"] = list(rule.pontuacao_choices)
    record["citation_uncertain"] = record["citation_uncertain"] or rule.citation_uncertain
    findings = load_findings(session, record["finding_ids"])
    with_stored_meters(
        session, [{"vehicle_id": p.vehicle_id, "details": d} for d in findings["details"] if d]
    )
    vehicle = session.get(Vehicle, p.vehicle_id) if p.vehicle_id else None
    holder = session.get(PermitHolder, vehicle.holder_id) if vehicle and vehicle.holder_id else None
    stand = session.get(Stand, record["stand_id"]) if record["stand_id"] else None

    track = stored_track(session, p.vehicle_id, p.committed_at, p.committed_until)
    geoms = [g for g in findings.geometry if g is not None and not g.is_empty]
    points = [g for g in geoms if g.geom_type == "Point"]
    areas = [g for g in geoms if g.geom_type in ("Polygon", "MultiPolygon")]
    stand_geom = (
        to_shape(stand.geometry) if stand is not None and stand.geometry is not None else None
    )
    place: str | None
    if stand is not None:
        place = stand.name or stand.address or f"ponto {stand.stand_id}"
    else:
        place = place_of(geoms)
    make_model = " ".join(x for x in (vehicle.make, vehicle.model) if x) if vehicle else ""
    drivers = drivers_of(session, driver_ids(findings["details"]))
    driver_name = "; ".join(n for d in drivers if (n := (d["name"] or "").strip())) or None
    return {
        "proposal": record,
        "vehicle": {
            "prefixo": p.vehicle_id or "",
            "plate": vehicle.plate if vehicle else None,
            "make_model": make_model or None,
            "permit_number": vehicle.prefixo if vehicle else p.vehicle_id,
            "holder_name": holder.name if holder else None,
            "driver_name": driver_name,
            "drivers": drivers,
        },
        "place": {
            "text": place,
            "municipality_name": book.municipality_name,
            # a ride begun beyond the limit (POA art. 19): its place is not in the municipality
            "outside": bool(len(findings)) and set(findings["kind"]) == {"outside_municipality"},
        },
        "findings": [
            accused_evidence(
                {
                    "finding_id": f["finding_id"],
                    "kind": f["kind"],
                    "started_at": f["started_at"].isoformat(),
                    "ended_at": f["ended_at"].isoformat(),
                    "confidence": float(f["confidence"]),
                    "details": f["details"] or {},
                },
                vehicle_id=p.vehicle_id,
            )
            for f in findings.to_dict("records")
        ],
        "geometry": {
            "track": track,
            "stand": _ring(stand_geom),
            "point": (points[0].x, points[0].y) if points else None,
            "area": _ring(shapely.union_all(areas)) if areas else None,
        },
        "timezone": UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE),
        "agent_name": agent_name(session, p.agent_id),
    }
