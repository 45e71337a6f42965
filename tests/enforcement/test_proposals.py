import json
from typing import Any

import pandas as pd
import pytest
import shapely

from enforcement.proposals import (
    confirmed_from_proposals,
    due_at,
    propose,
    reincidence_count,
    sanction,
    write_proposals_json,
)
from enforcement.rulebook import Rulebook, bundled_rulebooks
from tracking.detectors.findings import make_findings

TZ = "America/Sao_Paulo"


def book(**over: Any) -> Rulebook:
    """A small rulebook shaped like Pinto Bandeira's ladder (the excerpts are not checked here)."""
    data: dict[str, Any] = {
        "schema": 1,
        "municipality": "4314548",
        "municipality_name": "Pinto Bandeira",
        "uf": "RS",
        "service": "taxi",
        "law": "Lei 169/2015",
        "law_file": "pinto_bandeira_lei_169_2015.txt",
        "fine_unit": "BRL",
        "fine_payer": "permissionário",
        "reincidence": {"window_days": 365},
        "deadlines": {
            "notification": {"days": 30, "from": "auto", "provision": "art. 36, § 1º"},
            "defence": {"days": 30, "from": "notification", "provision": "art. 53"},
        },
        "gravities": {
            "média": {
                "fine": {"amount": 507, "unit": "BRL"},
                "fine_from_incidence": 2,
                "penalties": ["advertência", "advertência e multa", "suspensão"],
            },
            "grave": {"fine": {"amount": 100, "unit": "UFM"}, "fine_progression": "double"},
        },
        "rules": [
            {
                "kind": "queue_jump",
                "article": "24",
                "inciso": "II",
                "provision": "art. 24, II",
                "excerpt": "desobedecer a fila no ponto de táxi",
                "gravity": "média",
            },
            {
                "kind": "operating_while_barred",
                "when": {"reason": ["suspended", "revoked"]},
                "article": "26",
                "inciso": "IV",
                "provision": "art. 26, IV",
                "excerpt": "x",
                "gravity": "grave",
                "penalty": "multa",
                "penalty_reincidence": "cassação",
            },
            {
                "kind": "illegal_stand_formation",
                "article": "20",
                "inciso": "VII",
                "provision": "art. 20, VII",
                "excerpt": "y",
                "confidence_min": 0.3,
            },
        ],
    }
    data.update(over)
    return Rulebook.model_validate(data)


def findings(*rows: dict[str, Any]) -> Any:
    base = {"stand_id": None, "confidence": 0.8, "details": {}}
    frame = pd.DataFrame([{**base, **r} for r in rows])
    frame["ended_at"] = frame.get("ended_at", frame["started_at"])
    return make_findings(frame, [shapely.Point(-51.5, -29.1)] * len(frame))


def confirmed(*rows: tuple[str, str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["vehicle_id", "rule_key", "committed_at"])


KEY_QUEUE = "4314548:taxi:art.24::II:"


class TestSanction:
    @pytest.mark.parametrize(
        ("reincidence", "penalty", "fine"),
        [
            (0, "advertência", None),
            (1, "advertência e multa", 507.0),
            (2, "suspensão", 507.0),
            (5, "suspensão", 507.0),
        ],
    )
    def test_pinto_bandeira_ladder(
        self, reincidence: int, penalty: str, fine: float | None
    ) -> None:
        """Warning first, warning and fine from the 2nd incidence, suspension from the 3rd."""
        rb = book()
        s = sanction(rb, rb.rules[0], reincidence)
        assert s["penalty"] == penalty
        assert (s["fine"] or {}).get("amount") == fine
        assert s["incidence"] == reincidence + 1

    def test_fine_doubles_progressively(self) -> None:
        """Under ``double`` the fine is the base times 2 per reincidence."""
        rb = book()
        amounts = [sanction(rb, rb.rules[1], n)["fine"]["amount"] for n in range(4)]
        assert amounts == [100.0, 200.0, 400.0, 800.0]

    def test_rule_penalty_then_reincidence_penalty(self) -> None:
        """A rule's own penalties override the ladder: first and reincident."""
        rb = book()
        assert sanction(rb, rb.rules[1], 0)["penalty"] == "multa"
        assert sanction(rb, rb.rules[1], 1)["penalty"] == "cassação"

    def test_no_amount_stays_null(self) -> None:
        """A rule without amount in the text has a null fine, never a made-up one."""
        rb = book()
        s = sanction(rb, rb.rules[2], 0)
        assert s["fine"] is None and s["penalty"] is None


class TestFretamentoSanction:
    def rule(self, reason: str) -> Any:
        rb = bundled_rulebooks()[("4314902", "fretamento")]
        return rb, rb.rule_for("operating_while_barred", {"reason": reason})

    def test_suspension_doubles_once_on_reincidence(self) -> None:
        """Art. 19 § 3º: 10 days (grave), doubled on reincidence — 20, not 40 — and the fine
        doubles progressively (art. 21): 100, 200, 400 UFM."""
        rb, rule = self.rule("inspection_expired")
        got = [sanction(rb, rule, n) for n in range(3)]
        assert [g["suspension_days"] for g in got] == [10, 20, 20]
        assert [g["fine"]["amount"] for g in got] == [100.0, 200.0, 400.0]

    def test_no_suspension_when_the_penalty_is_only_a_fine(self) -> None:
        """Art. 25 II is gravíssima but its penalty is only multa: no suspension days."""
        rb, rule = self.rule("alvara_expired")
        assert sanction(rb, rule, 0)["suspension_days"] is None
        assert sanction(rb, rule, 1)["fine"] == {"amount": 300.0, "unit": "UFM"}


class TestReincidenceCount:
    @pytest.mark.parametrize(
        ("committed", "expected"),
        [
            ("2024-03-04T12:00:00Z", 1),  # 365 days before exactly: inside
            ("2024-03-04T11:59:59Z", 0),  # one second earlier: outside
            ("2025-03-04T11:59:59Z", 1),
            ("2025-03-04T12:00:00Z", 0),  # the same instant is not "before"
        ],
    )
    def test_window_edges(self, committed: str, expected: int) -> None:
        """Counts confirmed infractions in [at - window, at)."""
        at = pd.Timestamp("2025-03-04T12:00:00Z")
        hist = confirmed(("V1", KEY_QUEUE, committed))
        assert (
            reincidence_count(book(), key=KEY_QUEUE, vehicle_id="V1", at=at, confirmed=hist)
            == expected
        )

    def test_months_window(self) -> None:
        """A 24-month window counts by calendar months."""
        rb = book(reincidence={"window_months": 24})
        at = pd.Timestamp("2025-03-04T12:00:00Z")
        inside = confirmed(("V1", KEY_QUEUE, "2023-03-04T12:00:00Z"))
        outside = confirmed(("V1", KEY_QUEUE, "2023-03-04T11:00:00Z"))
        assert reincidence_count(rb, key=KEY_QUEUE, vehicle_id="V1", at=at, confirmed=inside) == 1
        assert reincidence_count(rb, key=KEY_QUEUE, vehicle_id="V1", at=at, confirmed=outside) == 0

    def test_other_vehicle_or_provision_does_not_count(self) -> None:
        """Only the same vehicle and the same provision count."""
        at = pd.Timestamp("2025-03-04T12:00:00Z")
        hist = confirmed(
            ("V2", KEY_QUEUE, "2025-01-01T00:00:00Z"),
            ("V1", "4314548:taxi:art.25::V:", "2025-01-01T00:00:00Z"),
        )
        assert reincidence_count(book(), key=KEY_QUEUE, vehicle_id="V1", at=at, confirmed=hist) == 0


class TestPropose:
    def test_one_proposal_per_vehicle_provision_and_local_day(self) -> None:
        """Two findings on one local day make one proposal; the next day another."""
        f = findings(
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-04T12:00:00Z"},
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-04T20:00:00Z"},
            # 02:00 UTC on the 5th is 23:00 of the 4th in Pinto Bandeira: same local day
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-05T02:00:00Z"},
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-05T12:00:00Z"},
        )
        props, uncovered = propose(f, {"taxi": book()}, timezone=TZ)
        assert [len(p["finding_ids"]) for p in props] == [3, 1]
        assert uncovered == {}
        p = props[0]
        assert (p["article"], p["inciso"], p["provision"]) == ("24", "II", "art. 24, II")
        assert p["status"] == "proposta" and p["reincidence_count"] == 0
        assert p["committed_at"] == "2025-03-04T12:00:00Z"
        assert p["deadlines"]["notification"]["days"] == 30

    def test_reincidence_from_confirmed_raises_the_penalty(self) -> None:
        """A confirmed infraction inside the window makes the next a reincidence with a fine."""
        f = findings(
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-04T12:00:00Z"}
        )
        hist = confirmed(("V1", KEY_QUEUE, "2024-06-01T00:00:00Z"))
        (p,), _ = propose(f, {"taxi": book()}, timezone=TZ, confirmed=hist)
        assert p["reincidence_count"] == 1
        assert p["fine"] == {"amount": 507.0, "unit": "BRL"}

    def test_sub_case_chooses_the_rule_and_uncovered_are_counted(self) -> None:
        """``when`` matches details; a finding no rule covers makes no proposal but is counted."""
        f = findings(
            {
                "kind": "operating_while_barred",
                "vehicle_id": "V1",
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"reason": "revoked"},
            },
            {
                "kind": "operating_while_barred",
                "vehicle_id": "V2",
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"reason": "alvara_expired"},
            },
            {"kind": "gps_anomaly", "vehicle_id": "V1", "started_at": "2025-03-04T12:00:00Z"},
        )
        props, uncovered = propose(f, {"taxi": book()}, timezone=TZ)
        assert [(p["vehicle_id"], p["provision"]) for p in props] == [("V1", "art. 26, IV")]
        assert uncovered == {"gps_anomaly": 1, "operating_while_barred": 1}

    def test_illegal_stand_formation_one_proposal_per_vehicle(self) -> None:
        """A place names no vehicle: each vehicle in its details gets a proposal."""
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"vehicles": ["A", "B"]},
            }
        )
        props, _ = propose(f, {"taxi": book()}, timezone=TZ)
        assert sorted(p["vehicle_id"] for p in props) == ["A", "B"]
        assert props[0]["finding_ids"] == props[1]["finding_ids"]

    def test_low_confidence_makes_no_proposal(self) -> None:
        """Findings under the rule's ``confidence_min`` are left as findings only."""
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "confidence": 0.2,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"vehicles": ["A"]},
            }
        )
        props, uncovered = propose(f, {"taxi": book()}, timezone=TZ)
        assert props == [] and list(uncovered) == [
            "illegal_stand_formation: confiança abaixo de 0.3"
        ]

    def test_fleet_service_picks_the_rulebook(self) -> None:
        """A vehicle of another service with no rulebook is reported, not judged by the taxi one."""
        f = findings(
            {"kind": "queue_jump", "vehicle_id": "B1", "started_at": "2025-03-04T12:00:00Z"}
        )
        fleet = pd.DataFrame({"vehicle_id": ["B1"], "service": ["fretamento"]})
        props, uncovered = propose(f, {"taxi": book()}, timezone=TZ, fleet=fleet)
        assert props == [] and uncovered == {"queue_jump: sem regulamento de fretamento": 1}

    def test_ids_are_deterministic(self) -> None:
        """The same findings give the same proposal ids."""
        f = findings(
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-04T12:00:00Z"}
        )
        a, _ = propose(f, {"taxi": book()}, timezone=TZ)
        b, _ = propose(f, {"taxi": book()}, timezone=TZ)
        assert a[0]["proposal_id"] == b[0]["proposal_id"]

    def test_empty_findings(self) -> None:
        """No findings, no proposals."""
        props, uncovered = propose(
            findings(
                {"kind": "queue_jump", "vehicle_id": "V", "started_at": "2025-01-01T00:00:00Z"}
            ).iloc[:0],
            {"taxi": book()},
            timezone=TZ,
        )
        assert props == [] and uncovered == {}


class TestConfirmedFromProposals:
    def test_only_confirmed_states_count(self) -> None:
        """Pending, dismissed and archived proposals are not infractions."""
        recs = [
            {
                "vehicle_id": "V",
                "rule_key": "k",
                "committed_at": "2025-01-01T00:00:00Z",
                "status": s,
            }
            for s in ("proposta", "confirmada", "descartada", "notificada", "arquivada")
        ]
        assert len(confirmed_from_proposals(recs)) == 2


class TestBundledProposals:
    @pytest.mark.parametrize("key", sorted(bundled_rulebooks()), ids="-".join)
    def test_every_rule_makes_a_proposal(self, key: tuple[str, str]) -> None:
        """Each bundled rule turns a matching finding into a proposal with its provision."""
        rb = bundled_rulebooks()[key]
        for rule in rb.rules:
            details = {k: (v if isinstance(v, str) else v[0]) for k, v in rule.when.items()}
            f = findings(
                {
                    "kind": rule.kind,
                    "vehicle_id": "V1",
                    "confidence": 0.99,
                    "started_at": "2025-03-04T12:00:00Z",
                    "details": details,
                }
            )
            fleet = pd.DataFrame({"vehicle_id": ["V1"], "service": [rb.service]})
            props, _ = propose(f, {rb.service: rb}, timezone=TZ, fleet=fleet)
            assert [p["provision"] for p in props] == [rule.provision]
            assert props[0]["excerpt"] == rule.excerpt


class TestDueAt:
    def test_calendar_days_end_of_local_day(self) -> None:
        """30 calendar days after 4 Mar 2025 (22:00 local) end at 23:59:59 local on 3 Apr."""
        import datetime as dt

        start = dt.datetime(2025, 3, 5, 1, 0, tzinfo=dt.UTC)  # 4 Mar, 22:00 in São Paulo
        due = due_at(start, days=30, counting="calendar_days", timezone=TZ)
        assert due.isoformat() == "2025-04-03T23:59:59-03:00"

    def test_business_days_skip_weekends_and_holidays(self) -> None:
        """5 business days from Wed 16 Apr 2025 skip Good Friday, the weekend and Tiradentes."""
        import datetime as dt

        start = dt.datetime(2025, 4, 16, 15, 0, tzinfo=dt.UTC)
        due = due_at(start, days=5, counting="business_days", timezone=TZ)
        assert due.date() == dt.date(2025, 4, 25)


def test_proposals_json_text(tmp_path):
    """proposals.json is json.dumps(..., ensure_ascii=False, indent=2) and a line end, also for
    what the fast writer refuses (a key that is not text)."""
    path = tmp_path / "proposals.json"
    records: list[Any] = [
        {"proposal_id": "P1", "finding_ids": ["a", "b"], "fine": 1015.0, "nome": "infração"},
        {"proposal_id": "P2", "finding_ids": [], "details": {}, "points": 7, "x": None},
    ]
    write_proposals_json(records, path)
    assert (
        path.read_text(encoding="utf-8") == json.dumps(records, ensure_ascii=False, indent=2) + "\n"
    )
    records[1]["details"] = {3: "três"}
    write_proposals_json(records, path)
    assert json.loads(path.read_text(encoding="utf-8"))[1]["details"] == {"3": "três"}
