"""A realistic sample document: a Pinto Bandeira ``longer_route`` auto de infração (fictitious).

Import from a test module as ``from document_factories import sample_document``. The people,
plate, permit and trip are invented; the rule, excerpt, fine and deadlines come from the bundled
Pinto Bandeira rulebook (Lei 169/2015, art. 25, III), the due dates from ``due_at`` with the
rulebook's counting. This is plain data for the renderers' unit tests; the committed examples
in ``docs/examples/`` are written by the real workflow (``pontual proposals examples``).
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pandas as pd

from db.enforcement.examples import DRIVEN as _DRIVEN
from db.enforcement.examples import REFERENCE as _REFERENCE
from db.enforcement.examples import STAND as _STAND
from db.enforcement.examples import fixes_along as _fixes
from db.enforcement.examples import length_m as _length_m
from enforcement.documents import Document
from enforcement.proposals import due_at, proposal_record
from enforcement.rulebook import bundled_rulebooks

TZ = "America/Sao_Paulo"
PINTO_BANDEIRA = "4314548"
STARTED = pd.Timestamp("2025-03-15T00:40:05Z")
"""Pickup: 14/03/2025 21:40:05 local (UTC−03:00): the local day differs from the UTC day."""


def sample_document(**over: Any) -> Document:
    """A notified longer_route proposal of Pinto Bandeira (2nd incidence: warning and fine).

    Keyword arguments replace top-level keys of the document.
    """
    book = bundled_rulebooks()[(PINTO_BANDEIRA, "taxi")]
    rule = book.rule_for("longer_route", {"reference_may_be_wrong": False})
    assert rule is not None
    track = _fixes(_DRIVEN, 125.0)
    driven_m, reference_m = _length_m(track), _length_m(_REFERENCE)
    duration_s = 15.0 * (len(track) - 1)
    ended = STARTED + pd.Timedelta(seconds=duration_s)
    finding: dict[str, Any] = {
        "finding_id": "F-6c1d0e2a9b7f4a31",
        "kind": "longer_route",
        "started_at": STARTED.isoformat(),
        "ended_at": ended.isoformat(),
        "confidence": 0.83,
        "details": {
            "trip_id": "07-20250315-004005",
            "method": "road_network",
            "driven_m": round(driven_m, 1),
            "reference_m": round(reference_m, 1),
            "ratio": round(driven_m / reference_m, 4),
            "excess_km": round((driven_m - reference_m) / 1000, 3),
            "duration_s": duration_s,
            "pattern": "loop",
            "loop_m": 1480.0,
            "n_fixes": len(track),
            "origin_cell": "88a9012345fffff",
            "driven_line": [list(p) for p in track],
            "reference_line": [list(p) for p in _REFERENCE],
            "notes": [
                "Proposta para revisão humana: o passageiro pode ter pedido o trajeto "
                "(PB art. 25 III, 'salvo com autorização do usuário')."
            ],
            "thresholds": {
                "min_ratio": 1.4,
                "min_excess_m": 1000.0,
                "min_reference_m": 500.0,
                "max_snap_m": 150.0,
                "loop_radius_m": 60.0,
                "max_speed_kmh": 150.0,
            },
        },
    }
    proposal = proposal_record(
        book,
        rule,
        proposal_id="P-3f9a51c0d2e84b17",
        finding_ids=[finding["finding_id"]],
        vehicle_id="07",
        stand_id="PB-01",
        started_at=STARTED,
        ended_at=ended,
        confidence=0.83,
        reincidence=1,
    )
    confirmed = dt.datetime(2025, 3, 17, 14, 5, tzinfo=dt.UTC)
    notified = dt.datetime(2025, 3, 24, 13, 30, tzinfo=dt.UTC)
    deadlines = copy.deepcopy(proposal["deadlines"])
    for d, start in ((deadlines["notification"], confirmed), (deadlines["defence"], notified)):
        d["due"] = due_at(start, days=d["days"], counting=d["counting"], timezone=TZ).isoformat()
    proposal |= {
        "status": "notificada",
        "auto_number": "AI-4314548-2025-000012",
        "agent_id": "F-0123",
        "confirmed_at": confirmed.isoformat(),
        "notified_at": notified.isoformat(),
        "deadlines": deadlines,
        "exception": {
            **proposal["exception"],
            "answer": "Usuária ouvida em 17/03/2025: não pediu nem autorizou o desvio.",
        },
        "reincidence_priors": [
            {
                "auto_number": "AI-4314548-2024-000031",
                "proposal_id": "P-0a1b2c3d4e5f6071",
                "committed_at": "2024-08-12T19:20:00Z",
                "status": "notificada",
            }
        ],
    }
    document: Document = {
        "proposal": proposal,
        "vehicle": {
            "prefixo": "07",
            "plate": "EXE1M23",
            "make_model": "Chevrolet Spin 1.8 (2022)",
            "permit_number": "007/2016",
            "holder_name": "Maria Exemplo Rossi",
            "driver_name": "Carlos Exemplo da Silva",
        },
        "place": {
            "text": "Corrida com embarque no Ponto de Táxi nº 1 (Centro) e desembarque em "
            "-29.09110, -51.44150",
            "municipality_name": "Pinto Bandeira",
        },
        "findings": [finding],  # type: ignore[list-item]
        "geometry": {"track": track, "stand": _STAND, "route": _REFERENCE},
        "timezone": TZ,
        "authority": "Prefeitura Municipal de Pinto Bandeira · Diretoria de Trânsito (DT/SOST)",
        "agent_name": "Agente Exemplo Bertolini",
    }
    document.update(over)  # type: ignore[typeddict-item]
    return document
