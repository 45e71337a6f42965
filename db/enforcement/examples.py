"""The document examples in ``docs/examples/``, written by the real review workflow.

A fictitious Pinto Bandeira taxi (prefixo 07, permit 007/2016) takes a longer route twice: in
August 2024 and in March 2025. The registry rows, the two ``longer_route`` findings and their
stand are stored; from there everything is the product's own code on a database:
``generate_proposals`` (Lei 169/2015, art. 25, III), ``confirm`` with the agent's answer to the
exception "salvo com autorização do usuário", ``notify`` (deadlines counted as the rulebook says:
the notification in 30 calendar days, art. 36 § 1º; the defence in 30 business days, art. 53),
the second auto counting the first as reincidence (art. 48: warning and fine of R$ 1.015,00,
art. 22), and ``document_for`` with the renderers. People, plate, permit and trip are invented;
the findings are built from a drawn track (lengths measured on it), not detected.

``pontual proposals examples --out docs/examples`` runs it on a scratch database and writes the
files; a test runs it and compares the output with the committed files byte for byte.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pandas as pd
import shapely
from geoalchemy2.shape import from_shape
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.enforcement.evidence import document_for
from db.enforcement.models import ProposalFinding
from db.enforcement.workflow import confirm, generate_proposals, notify, store_findings
from db.fleet.models import Municipality, PermitHolder, Vehicle
from db.stands.models import Stand
from enforcement.documents import DocumentKind, render_html, render_pdf
from geo.calendar import DEFAULT_TIMEZONE
from geo.crs import EARTH_RADIUS_M
from tracking.detectors.findings import make_findings

MUNICIPALITY = "4314548"
TIMEZONE = DEFAULT_TIMEZONE
VEHICLE = "07"
AGENT = "F-0123"
FILES = (
    "auto-de-infracao-exemplo.html",
    "auto-de-infracao-exemplo.pdf",
    "notificacao-de-penalidade-exemplo.html",
    "notificacao-de-penalidade-exemplo.pdf",
)
"""The files written, in ``docs/examples/``."""

REFERENCE = [
    (-51.45030, -29.09780),
    (-51.44890, -29.09690),
    (-51.44700, -29.09540),
    (-51.44420, -29.09330),
    (-51.44150, -29.09110),
]
"""Shortest route from the stand to the drop-off, ``(lon, lat)``."""
DRIVEN = [
    (-51.45030, -29.09780),
    (-51.45110, -29.09600),
    (-51.45180, -29.09330),
    (-51.45020, -29.09080),
    (-51.44760, -29.08930),
    (-51.44520, -29.08990),
    (-51.44610, -29.09230),
    (-51.44850, -29.09300),
    (-51.44700, -29.09540),
    (-51.44420, -29.09330),
    (-51.44150, -29.09110),
]
"""The route driven: a loop to the north before the drop-off."""
STAND = [
    (-51.45042, -29.09786),
    (-51.45018, -29.09786),
    (-51.45018, -29.09774),
    (-51.45042, -29.09774),
    (-51.45042, -29.09786),
]


def length_m(line: list[tuple[float, float]]) -> float:
    """Great-circle length of a ``(lon, lat)`` line, in metres."""
    total = 0.0
    for (x0, y0), (x1, y1) in zip(line, line[1:], strict=False):
        p0, p1 = math.radians(y0), math.radians(y1)
        a = (
            math.sin((p1 - p0) / 2) ** 2
            + math.cos(p0) * math.cos(p1) * math.sin(math.radians(x1 - x0) / 2) ** 2
        )
        total += 2 * EARTH_RADIUS_M * math.asin(math.sqrt(a))
    return total


def fixes_along(line: list[tuple[float, float]], spacing_m: float) -> list[tuple[float, float]]:
    """Positions every ~``spacing_m`` along a line (a 15 s GPS track at ~30 km/h)."""
    out = [line[0]]
    for a, b in zip(line, line[1:], strict=False):
        n = max(1, round(length_m([a, b]) / spacing_m))
        out += [
            (round(a[0] + (b[0] - a[0]) * k / n, 7), round(a[1] + (b[1] - a[1]) * k / n, 7))
            for k in range(1, n + 1)
        ]
    return out


def longer_route_finding(started: pd.Timestamp, *, trip_id: str) -> dict[str, Any]:
    """Return a ``longer_route`` finding row over the drawn track (findings-frame columns)."""
    track = fixes_along(DRIVEN, 125.0)
    driven_m, reference_m = length_m(track), length_m(REFERENCE)
    duration_s = 15.0 * (len(track) - 1)
    return {
        "kind": "longer_route",
        "vehicle_id": VEHICLE,
        "stand_id": "PB-01",
        "started_at": started,
        "ended_at": started + pd.Timedelta(seconds=duration_s),
        "confidence": 0.83,
        "details": {
            "trip_id": trip_id,
            "method": "road_network",
            "driven_m": round(driven_m, 1),
            "reference_m": round(reference_m, 1),
            "ratio": round(driven_m / reference_m, 4),
            "excess_km": round((driven_m - reference_m) / 1000, 3),
            "duration_s": duration_s,
            "pattern": "loop",
            "loop_m": 1480.0,
            "reference_may_be_wrong": False,
            "n_fixes": len(track),
            "driven_line": [list(p) for p in track],
            "reference_line": [list(p) for p in REFERENCE],
            "thresholds": {
                "min_ratio": 1.4,
                "min_excess_m": 1000.0,
                "min_reference_m": 500.0,
                "max_snap_m": 150.0,
                "loop_radius_m": 60.0,
            },
        },
    }


def _registry(session: Session) -> None:
    if session.get(Municipality, MUNICIPALITY) is None:
        session.add(
            Municipality(code=MUNICIPALITY, name="Pinto Bandeira", uf="RS", timezone=TIMEZONE)
        )
    holder = PermitHolder(municipality_code=MUNICIPALITY, name="Maria Exemplo Rossi")
    session.add(holder)
    session.flush()
    session.add_all(
        [
            Vehicle(
                vehicle_id=VEHICLE,
                prefixo="007/2016",
                municipality_code=MUNICIPALITY,
                holder_id=holder.holder_id,
                plate="EXE1M23",
                make="Chevrolet",
                model="Spin 1.8 (2022)",
            ),
            Stand(
                stand_id="PB-01",
                municipality_code=MUNICIPALITY,
                name="Ponto de Táxi nº 1 (Centro)",
                capacity=3,
                geometry=from_shape(shapely.MultiPolygon([shapely.Polygon(STAND)]), srid=4326),
            ),
        ]
    )
    session.flush()


def _proposal_of(session: Session, finding_id: str) -> str:
    return str(
        session.execute(
            select(ProposalFinding.proposal_id).where(ProposalFinding.finding_id == finding_id)
        ).scalar_one()
    )


def _utc(year: int, month: int, day: int, hour: int, minute: int) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC)


def run_examples(session: Session) -> str:
    """Store the example's registry and findings and review them; return the proposal to print.

    Use a database of its own (the session's transaction is the caller's): auto numbers are
    the first of their year.
    """
    _registry(session)
    rows = [
        longer_route_finding(pd.Timestamp("2024-08-12T19:20:00Z"), trip_id="07-20240812-162000"),
        longer_route_finding(pd.Timestamp("2025-03-15T00:40:05Z"), trip_id="07-20250314-214005"),
    ]
    found = make_findings(pd.DataFrame(rows), [shapely.Point(*DRIVEN[-1])] * len(rows))
    store_findings(session, found)
    assert generate_proposals(session, municipality=MUNICIPALITY, timezone=TIMEZONE) == 2
    earlier, later = (_proposal_of(session, str(f)) for f in found["finding_id"])

    confirm(
        session,
        earlier,
        agent_id=AGENT,
        at=_utc(2024, 8, 13, 13, 0),
        exception_answer="Usuário ouvido em 13/08/2024: não pediu nem autorizou o desvio.",
    )
    notify(session, earlier, actor=AGENT, at=_utc(2024, 8, 20, 14, 0))
    confirm(
        session,
        later,
        agent_id=AGENT,
        at=_utc(2025, 3, 17, 14, 5),
        exception_answer=(
            "Usuária ouvida em 17/03/2025 (termo anexo): não pediu nem autorizou o desvio; "
            "sem bloqueio de via registrado no trajeto direto."
        ),
    )
    notify(session, later, actor=AGENT, at=_utc(2025, 3, 24, 13, 30))
    session.flush()
    return later


def write_examples(session: Session, out: Path) -> list[Path]:
    """Run the example review (:func:`run_examples`) and write :data:`FILES` into ``out``."""
    proposal_id = run_examples(session)
    document = document_for(session, proposal_id)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in FILES:
        kind: DocumentKind = "auto" if name.startswith("auto") else "notificacao"
        path = out / name
        if name.endswith(".pdf"):
            path.write_bytes(render_pdf(document, kind=kind))
        else:
            path.write_text(render_html(document, kind=kind), encoding="utf-8")
        written.append(path)
    return written
