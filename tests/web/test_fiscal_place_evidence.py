"""A place's finding (several vehicles' waits) on the agent's pages: the finding page says whose
each position is; a proposal against one vehicle shows only its positions and its own period."""

from __future__ import annotations

import datetime as dt
import html
import re

import httpx
import pytest
import shapely
from sqlalchemy import Engine, text
from web_fiscal import POA, STAND_POINT, TIMEZONE

from tracking.detectors.findings import finding_id

T0 = dt.datetime(2026, 11, 16, 14, 0, tzinfo=dt.UTC)  # a Monday, 11:00 in Porto Alegre
WAITS = (("PLA", 0, 0), ("PLB", 0, 3), ("PLA", 1, 0), ("PLC", 2, 5))
"""(vehicle, day, hour after T0) of each 40-minute wait at the place."""


def _iso(at: dt.datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _place_finding() -> dict:
    x0, y0 = STAND_POINT
    x, y = x0 + 0.02, y0 + 0.02  # 2 km from the stand
    stops, fixes = [], []
    for vehicle, day, hour in WAITS:
        start = T0 + dt.timedelta(days=day, hours=hour)
        end = start + dt.timedelta(minutes=40)
        stops.append(
            {"vehicle_id": vehicle, "started_at": _iso(start), "ended_at": _iso(end)}
            | {"boarded": True, "lat": y, "lon": x, "duration_s": 2400.0}
        )
        for at, meter in ((start, "free"), (end, "occupied")):
            fixes.append({"timestamp": _iso(at), "lat": y, "lon": x, "row": None} | {
                "meter": meter, "vehicle_id": vehicle})  # fmt: skip
    started, ended = T0, T0 + dt.timedelta(days=2, hours=5, minutes=40)
    return {
        "finding_id": finding_id("illegal_stand_formation", None, None, started),
        "kind": "illegal_stand_formation",
        "vehicle_id": None,
        "stand_id": None,
        "started_at": started,
        "ended_at": ended,
        "confidence": 0.8,
        "details": {
            "vehicles": ["PLA", "PLB", "PLC"],
            "accused": ["PLA", "PLB"],
            "stops": stops,
            "fixes": fixes,
            "n_stops": len(stops),
        },
        "geometry": shapely.Point(x, y).buffer(0.0005),
    }


@pytest.fixture
def agent(web_client) -> httpx.Client:
    return web_client("agent")


def test_a_place_s_positions_are_told_apart(agent: httpx.Client, web_engine: Engine) -> None:
    """The finding page names the place's vehicles and those it accuses, and lists each
    position with its prefixo; the proposal against PLB lists
    only PLB's and is committed over PLB's own wait, not from PLA's arrival (the place's)."""
    from db.enforcement import workflow
    from db.engine import session_scope

    finding = _place_finding()
    with session_scope(web_engine) as session:
        workflow.insert_findings(session, [finding])
        workflow.generate_proposals(session, municipality=POA, timezone=TIMEZONE)
    with web_engine.connect() as conn:
        proposals = dict(
            conn.execute(
                text(
                    "SELECT p.vehicle_id, p.proposal_id FROM proposals p JOIN proposal_findings f "
                    "USING (proposal_id) WHERE f.finding_id = :f"
                ),
                {"f": finding["finding_id"]},
            ).all()
        )
    assert sorted(proposals) == ["PLA", "PLB"]

    page = html.unescape(agent.get(f"/fiscal/achados/{finding['finding_id']}").text)
    assert (
        '<dt>Veículos (prefixos)</dt><dd id="achado-veiculos">PLA, PLB, PLC; acusados (com '
        "proposta possível): PLA, PLB</dd>"
    ) in page  # not "Veículo (prefixo): não identificado"
    assert '<th scope="col">Prefixo</th>' in page
    owners = re.findall(r"<td>(PL[ABC])</td></tr>", page)
    assert owners == ["PLA", "PLA", "PLB", "PLB", "PLA", "PLA", "PLC", "PLC"]

    page = html.unescape(agent.get(f"/fiscal/propostas/{proposals['PLB']}").text)
    assert re.findall(r"<td>(PL[ABC])</td></tr>", page) == ["PLB", "PLB"]
    committed = re.search(r"<dt>Cometida</dt><dd>de (.*?) a (.*?) \(", page)
    assert committed is not None
    assert committed.groups() == ("16/11/2026 14:00:00", "16/11/2026 14:40:00")  # B's own wait
