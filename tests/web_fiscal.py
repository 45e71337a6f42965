"""Records of the Fiscalização pages' tests: findings made by hand, stored and proposed.

``seed_fiscal(engine)`` (called by ``tests/web/conftest.py``'s seed) stores the records the
rows of ``tests/web_pages.py`` open: a registered vehicle with a plate and a holder, and a
``longer_route`` finding of Porto Alegre turned into a proposal (art. 58, XIII: its exception
must be answered) — :data:`SEEDED_FINDING_ID` and :data:`SEEDED_PROPOSAL_ID`, the values of
``PATH_IDS``. The factories make other findings for the tests (``longer_route``, a boarding at
a stand, a tracking gap), each with the details its detector writes and the pages show, and
one the detector itself makes (two receivers under one prefix).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import shapely
from sqlalchemy import Engine

from tracking.detectors.findings import finding_id

POA = "4314902"
"""Porto Alegre (IBGE), the seeded stand's municipality."""
PB = "4314548"
"""Pinto Bandeira: a rulebook with notification and defence deadlines."""
TIMEZONE = "America/Sao_Paulo"
SEEDED_VEHICLE = "WEBF01"
SEEDED_PLATE = "IAB1C23"
SEEDED_HOLDER = "Titular de Teste"
SEEDED_START = dt.datetime(2026, 11, 20, 17, 0, tzinfo=dt.UTC)
SEEDED_FINDING_ID = "longer_route-5b3696e33e525427"
SEEDED_PROPOSAL_ID = "P-3322927dce7f4f37"
"""The seeded records (the rows of ``tests/web_pages.py`` open them; checked when seeded)."""
STAND_POINT = (-51.2287, -30.0277)
"""The centre of the seeded stand S1 (lon, lat)."""


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def longer_route_finding(
    *, vehicle_id: str, started_at: dt.datetime, confidence: float = 0.9
) -> dict[str, Any]:
    """A detour: driven 2.4 km (north, east, back south) where the road network says 0.84 km."""
    x0, y0 = STAND_POINT
    driven = [
        (x0, y0),
        (x0, y0 + 0.0030),
        (x0, y0 + 0.0055),
        (x0 + 0.0040, y0 + 0.0055),
        (x0 + 0.0087, y0 + 0.0055),
        (x0 + 0.0087, y0 + 0.0025),
        (x0 + 0.0087, y0),
    ]
    reference = [(x0, y0), (x0 + 0.0045, y0), (x0 + 0.0087, y0)]
    fixes = [
        {
            "timestamp": _iso(started_at + dt.timedelta(seconds=45 * i)),
            "lon": lon,
            "lat": lat,
            "row": None,
            "meter": "occupied",
        }
        for i, (lon, lat) in enumerate(driven)
    ]
    ended_at = started_at + dt.timedelta(seconds=45 * (len(driven) - 1))
    return {
        "finding_id": finding_id("longer_route", vehicle_id, None, started_at),
        "kind": "longer_route",
        "vehicle_id": vehicle_id,
        "stand_id": None,
        "started_at": started_at,
        "ended_at": ended_at,
        "confidence": confidence,
        "details": {
            "method": "road_network",
            "driven_m": 2_060.0,
            "reference_m": 840.0,
            "ratio": 2.452,
            "excess_km": 1.22,
            "duration_s": 270.0,
            "pattern": "loop",
            "reference_may_be_wrong": False,
            "n_fixes": len(fixes),
            "driven_line": [list(p) for p in driven],
            "matched_line": [list(p) for p in driven],
            "reference_line": [list(p) for p in reference],
            "fastest_route_line": [list(p) for p in reference],
            "fixes": fixes,
            "notes": ["trajeto em volta de quarteirão antes do destino"],
            "thresholds": {"min_ratio": 1.3, "min_excess_m": 500.0, "max_snap_m": 30.0},
        },
        "geometry": shapely.LineString(driven),
    }


def boarding_finding(
    *,
    vehicle_id: str,
    stand_id: str,
    started_at: dt.datetime,
    confidence: float = 0.8,
    subtype: str = "boarding",
    driver_id: str | None = None,
) -> dict[str, Any]:
    """A boarding at a stand without its licence (``unlicensed_stand_use``), two fixes."""
    x0, y0 = STAND_POINT
    ended_at = started_at + dt.timedelta(minutes=3)
    return {
        "finding_id": finding_id("unlicensed_stand_use", vehicle_id, stand_id, started_at),
        "kind": "unlicensed_stand_use",
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "confidence": confidence,
        "details": {
            "subtype": subtype,
            "dwell_s": 180.0,
            "boarding_distance_m": 12.0,
            "fixes": [
                {"timestamp": _iso(started_at), "lon": x0, "lat": y0, "meter": "free"},
                {"timestamp": _iso(ended_at), "lon": x0 + 0.0002, "lat": y0, "meter": "occupied"},
            ],
            "thresholds": {"boarding_grace_m": 50.0, "boarding_grace_s": 120.0},
            **({"driver_id": driver_id} if driver_id else {}),
        },
        "geometry": shapely.Point(x0, y0),
    }


def tracking_gap_finding(
    *, vehicle_id: str, started_at: dt.datetime, confidence: float = 0.7
) -> dict[str, Any]:
    """Twenty minutes without fixes while occupied, 6 km driven (``tracking_gap``)."""
    x0, y0 = STAND_POINT
    ended_at = started_at + dt.timedelta(minutes=20)
    return {
        "finding_id": finding_id("tracking_gap", vehicle_id, None, started_at),
        "kind": "tracking_gap",
        "vehicle_id": vehicle_id,
        "stand_id": None,
        "started_at": started_at,
        "ended_at": ended_at,
        "confidence": confidence,
        "details": {
            "gap_s": 1_200.0,
            "displacement_m": 6_000.0,
            "implied_speed_kmh": 18.0,
            "still": False,
            "after_ride": False,
            "fixes": [
                {"timestamp": _iso(started_at), "lon": x0, "lat": y0, "meter": "occupied"},
                {"timestamp": _iso(ended_at), "lon": x0 + 0.0623, "lat": y0, "meter": "occupied"},
            ],
            "thresholds": {"max_gap_s": 600.0, "parked_radius_m": 150.0},
        },
        "geometry": shapely.LineString([(x0, y0), (x0 + 0.0623, y0)]),
    }


def two_tracks_finding(*, vehicle_id: str, started_at: dt.datetime) -> dict[str, Any]:
    """Two receivers under one prefix: the ``gps_anomaly`` detector's own finding (``pattern =
    "two_tracks"``) of two tracks 3 km apart, each reporting every 30 s, 15 s out of step."""
    import pandas as pd

    from tracking.detectors.gps_anomaly import detect_gps_anomaly

    x0, y0 = STAND_POINT
    rows = []
    for i in range(40):  # 10 minutes
        east = 0.031 if i % 2 else 0.0  # the second receiver, 3 km east
        rows.append(
            {
                "vehicle_id": vehicle_id,
                "timestamp": pd.Timestamp(started_at) + pd.Timedelta(seconds=15 * i),
                "lon": x0 + east + 0.0003 * (i // 2),
                "lat": y0,
                "meter": "free",
            }
        )
    (record,) = detect_gps_anomaly(pd.DataFrame(rows)).to_dict("records")
    assert record["details"]["pattern"] == "two_tracks"
    return {
        **record,
        "started_at": record["started_at"].to_pydatetime(),
        "ended_at": record["ended_at"].to_pydatetime(),
    }


def store_and_propose(
    engine: Engine, findings: Sequence[dict[str, Any]], *, municipality: str = POA
) -> dict[str, str]:
    """Store findings and generate the municipality's proposals; return finding → proposal."""
    from sqlalchemy import select

    from db.enforcement import workflow
    from db.enforcement.models import Proposal, ProposalFinding
    from db.engine import session_scope

    ids = [f["finding_id"] for f in findings]
    with session_scope(engine) as session:
        workflow.insert_findings(session, list(findings))
        workflow.generate_proposals(
            session, municipality=municipality, timezone=TIMEZONE, actor="sistema"
        )
        rows = session.execute(
            select(ProposalFinding.finding_id, Proposal.proposal_id)
            .join(Proposal, Proposal.proposal_id == ProposalFinding.proposal_id)
            .where(ProposalFinding.finding_id.in_(ids), Proposal.municipality_code == municipality)
        ).all()
    return {fid: pid for fid, pid in rows}


def register_vehicle(
    engine: Engine, vehicle_id: str, *, plate: str | None = None, holder: str | None = None
) -> None:
    """Register a vehicle (with a plate and a holder when given)."""
    from db.engine import session_scope
    from db.fleet.models import PermitHolder, Vehicle

    with session_scope(engine) as session:
        holder_id = None
        if holder is not None:
            row = PermitHolder(name=holder)
            session.add(row)
            session.flush()
            holder_id = row.holder_id
        session.add(
            Vehicle(
                vehicle_id=vehicle_id,
                prefixo=vehicle_id,
                plate=plate,
                make="Chevrolet",
                model="Spin",
                holder_id=holder_id,
            )
        )


def seed_fiscal(engine: Engine) -> None:
    """Store the seeded vehicle, finding and proposal (see the module's doc).

    Raises
    ------
    AssertionError
        The ids differ from :data:`SEEDED_FINDING_ID` / :data:`SEEDED_PROPOSAL_ID` (the id
        scheme changed: update them and ``PATH_IDS``).
    """
    register_vehicle(engine, SEEDED_VEHICLE, plate=SEEDED_PLATE, holder=SEEDED_HOLDER)
    finding = longer_route_finding(vehicle_id=SEEDED_VEHICLE, started_at=SEEDED_START)
    made = store_and_propose(engine, [finding])
    got = (finding["finding_id"], made.get(finding["finding_id"]))
    if got != (SEEDED_FINDING_ID, SEEDED_PROPOSAL_ID):
        msg = f"seeded ids are {got}; update SEEDED_FINDING_ID/SEEDED_PROPOSAL_ID"
        raise AssertionError(msg)


def store_alert(engine: Engine, vehicle_id: str, *, minutes_ago: float) -> str:
    """Store a boarding finding at stand S1 and its alert, as the live detectors do; return the
    alert's id (not announced: the caller NOTIFYs when a stream should get it)."""
    import json
    import secrets

    from sqlalchemy import text

    from db.enforcement import workflow
    from db.engine import session_scope
    from engines.live import alert_payload

    started = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)
    finding = boarding_finding(vehicle_id=vehicle_id, stand_id="S1", started_at=started)
    alert_id = f"alert-{secrets.token_hex(8)}"
    with session_scope(engine) as session:
        workflow.insert_findings(session, [finding])
        session.execute(
            text(
                "INSERT INTO alerts (alert_id, finding_id, kind, vehicle_id, stand_id, "
                "throttle_key, payload, event_at) VALUES (:a, :f, :k, :v, 'S1', :t, "
                "CAST(:p AS jsonb), :e)"
            ),
            {
                "a": alert_id,
                "f": finding["finding_id"],
                "k": finding["kind"],
                "v": vehicle_id,
                "t": f"{finding['kind']}|{vehicle_id}|S1",
                "p": json.dumps(alert_payload(finding, alert_id=alert_id)),
                "e": finding["ended_at"],
            },
        )
    return alert_id
