"""Gather from the database what an auto de infração shows (``documents.Document``).

The vehicle and its holder come from the registry; the track from the stored fixes of the
vehicle over the infraction's interval (a few minutes either side); the stand from the stands
table; the findings with their details and geometry from ``findings``. Missing pieces stay None:
the documents say "não informado" rather than invent.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import shapely
from geoalchemy2.shape import to_shape
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.enforcement.workflow import as_record, finding_ids_of, get_proposal, load_findings, rule_of
from db.fleet.models import PermitHolder, Vehicle
from db.stands.models import Stand
from db.tracking.models import Fix
from enforcement.documents import Document
from geo.calendar import DEFAULT_TIMEZONE, UF_TIMEZONES

TRACK_MARGIN = dt.timedelta(minutes=5)
"""Fixes kept either side of the infraction's interval, for context on the map."""
MAX_TRACK_FIXES = 5_000


def _ring(geom: Any) -> list[tuple[float, float]] | None:
    if geom is None or geom.is_empty:
        return None
    poly = max(getattr(geom, "geoms", [geom]), key=lambda g: g.area)
    return [(float(x), float(y)) for x, y in poly.exterior.coords]


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
    vehicle = session.get(Vehicle, p.vehicle_id) if p.vehicle_id else None
    holder = session.get(PermitHolder, vehicle.holder_id) if vehicle and vehicle.holder_id else None
    stand = session.get(Stand, record["stand_id"]) if record["stand_id"] else None

    track: list[tuple[float, float]] = []
    if p.vehicle_id:
        rows = session.execute(
            select(Fix.lon, Fix.lat)
            .where(
                Fix.vehicle_id == p.vehicle_id,
                Fix.ts >= p.committed_at - TRACK_MARGIN,
                Fix.ts <= p.committed_until + TRACK_MARGIN,
            )
            .order_by(Fix.ts)
            .limit(MAX_TRACK_FIXES)
        ).all()
        track = [(float(lon), float(lat)) for lon, lat in rows]

    geoms = [g for g in findings.geometry if g is not None and not g.is_empty]
    points = [g for g in geoms if g.geom_type == "Point"]
    areas = [g for g in geoms if g.geom_type in ("Polygon", "MultiPolygon")]
    stand_geom = (
        to_shape(stand.geometry) if stand is not None and stand.geometry is not None else None
    )
    if stand is not None:
        place = stand.name or stand.address or f"ponto {stand.stand_id}"
    elif points:
        place = f"{points[0].y:.5f}, {points[0].x:.5f}"
    else:
        place = None
    make_model = " ".join(x for x in (vehicle.make, vehicle.model) if x) if vehicle else ""
    return {
        "proposal": record,
        "vehicle": {
            "prefixo": p.vehicle_id or "",
            "plate": vehicle.plate if vehicle else None,
            "make_model": make_model or None,
            "permit_number": vehicle.prefixo if vehicle else p.vehicle_id,
            "holder_name": holder.name if holder else None,
            "driver_name": None,
        },
        "place": {"text": place, "municipality_name": book.municipality_name},
        "findings": [
            {
                "finding_id": f["finding_id"],
                "kind": f["kind"],
                "started_at": f["started_at"].isoformat(),
                "ended_at": f["ended_at"].isoformat(),
                "confidence": float(f["confidence"]),
                "details": f["details"] or {},
            }
            for f in findings.to_dict("records")
        ],
        "geometry": {
            "track": track,
            "stand": _ring(stand_geom),
            "point": (points[0].x, points[0].y) if points else None,
            "area": _ring(shapely.union_all(areas)) if areas else None,
        },
        "timezone": UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE),
    }
