"""Documents of stored proposals: the place of an area or a line, and a place's waits as
evidence against one of its vehicles."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import shapely
from factories import make_pings
from live_scenarios import DAY, PLACE, wait
from live_scenarios import RANK_STANDS as STANDS
from sqlalchemy import select

from db.enforcement.evidence import document_for, place_of
from db.enforcement.models import Proposal, ProposalFinding
from db.enforcement.workflow import generate_proposals, store_findings
from db.fleet.models import Municipality
from enforcement.documents import document_fields, fix_vehicles
from tracking.detectors.findings import make_findings
from tracking.detectors.illegal_stand_formation import detect_illegal_stand_formation
from tracking.stops import detect_stops

POA = "4314902"
TZ = "America/Sao_Paulo"


@pytest.fixture
def poa(db_session):
    db_session.add(Municipality(code=POA, name="Porto Alegre", uf="RS", timezone=TZ))
    db_session.flush()
    return db_session


def _place(session, proposal_id: str) -> str:
    rows = document_fields(document_for(session, proposal_id), kind="auto")
    return {label: value for _, label, value in rows}["Local"]


def _proposals(session, frame) -> list[Proposal]:
    store_findings(session, frame)
    generate_proposals(session, municipality=POA, timezone=TZ)
    ids = set(frame["finding_id"])
    pids = session.scalars(
        select(ProposalFinding.proposal_id).where(ProposalFinding.finding_id.in_(ids))
    ).all()
    return list(session.scalars(select(Proposal).where(Proposal.proposal_id.in_(pids))))


def _stand_formation() -> Any:
    """A, B and C wait free and board at one spot on three days, B while A waits."""
    rows: list[dict[str, Any]] = []
    for d in (0, 1, 2):
        rows += wait("A", d * DAY, PLACE, wait_s=1500.0)
        rows += wait("B", d * DAY + 300, PLACE, wait_s=900.0)
        rows += wait("C", d * DAY + 7200, PLACE)
    pings = make_pings(rows)
    return detect_illegal_stand_formation(detect_stops(pings), pings, STANDS)


class TestPlaceOf:
    def test_area_gives_its_centre(self) -> None:
        """A polygon (a place's waits) reads as the area around its centre, lat then lon."""
        area = shapely.Point(-51.226, -30.0122).buffer(0.001)
        assert place_of([area]) == "área em torno de -30.01220, -51.22600"

    def test_line_gives_its_ends(self) -> None:
        """A line (a tracking gap) reads as the stretch from its first to its last position."""
        line = shapely.LineString([(-51.2, -30.0), (-51.21, -30.01), (-51.3, -30.1)])
        assert place_of([line]) == "trecho de -30.00000, -51.20000 a -30.10000, -51.30000"

    def test_point_first_and_nothing(self) -> None:
        """A point wins over an area; no geometry gives no place."""
        area = shapely.Point(-51.226, -30.0122).buffer(0.001)
        assert place_of([area, shapely.Point(-51.2, -30.0)]) == "-30.00000, -51.20000"
        assert place_of([None, shapely.Point()]) is None


class TestDocumentFor:
    def test_stand_formation_auto_states_a_place_and_the_accused_fixes(self, poa) -> None:
        """An auto against one vehicle of a place's waits: the place is the area's centre (not
        "não informado"), and its evidence lists that vehicle's fixes only."""
        frame = _stand_formation()
        assert len(frame) == 1
        details = frame["details"].iloc[0]
        proposals = {p.vehicle_id: p for p in _proposals(poa, frame)}
        assert set(proposals) == {"A", "B", "C"}
        for vehicle, p in proposals.items():
            assert _place(poa, p.proposal_id).startswith("área em torno de -30.01")
            (finding,) = document_for(poa, p.proposal_id)["findings"]
            own = finding["details"]["fixes"]
            owners = dict(
                zip(
                    [f["row"] for f in details["fixes"]],
                    fix_vehicles(details, vehicle_id=None),
                    strict=True,
                )
            )
            assert len(own) == 6 and {owners[f["row"]] for f in own} == {vehicle}
            assert finding["details"]["vehicle_n_stops"] == 3

    def test_a_ride_begun_outside_is_not_placed_in_the_municipality(self, poa) -> None:
        """POA art. 19: the auto of a pickup beyond the limit says "fora de Porto Alegre"."""
        frame = make_findings(
            pd.DataFrame(
                {
                    "kind": "outside_municipality",
                    "vehicle_id": "POA-8",
                    "stand_id": None,
                    "started_at": ["2025-03-04T12:00:00Z"],
                    "ended_at": ["2025-03-04T12:20:00Z"],
                    "confidence": 0.9,
                    "details": [{"distance_outside_m": 5773.0}],
                }
            ),
            [shapely.Point(-51.18144, -29.91222)],
        )
        (p,) = _proposals(poa, frame)
        rows = document_fields(document_for(poa, p.proposal_id), kind="auto")
        assert {label: value for _, label, value in rows}["Município"] == "fora de Porto Alegre"

    def test_tracking_gap_auto_states_the_stretch(self, poa) -> None:
        """A tracking gap's line gives the auto its first and last positions as the place."""
        frame = make_findings(
            pd.DataFrame(
                {
                    "kind": "tracking_gap",
                    "vehicle_id": "POA-7",
                    "stand_id": None,
                    "started_at": ["2025-03-04T12:00:00Z"],
                    "ended_at": ["2025-03-04T12:40:00Z"],
                    "confidence": 0.9,
                    "details": [{"gap_s": 2400.0, "still": False, "after_ride": False}],
                }
            ),
            [shapely.LineString([(-51.2, -30.0), (-51.25, -30.04)])],
        )
        (p,) = _proposals(poa, frame)
        assert _place(poa, p.proposal_id) == (
            "trecho de -30.00000, -51.20000 a -30.04000, -51.25000"
        )
