import json
from typing import Any

import pandas as pd
import pytest
import shapely
from factories import make_pings, offset_m

from enforcement.proposals import (
    confirmed_from_proposals,
    due_at,
    proposal_details,
    proposal_summary,
    propose,
    propose_all,
    reincidence_count,
    sanction,
    write_proposals_json,
)
from enforcement.rulebook import Rulebook, bundled_rulebooks
from tracking.detectors.findings import make_findings, with_details
from tracking.detectors.gps_anomaly import detect_gps_anomaly

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

    def test_illegal_stand_formation_proposes_the_accused_only(self) -> None:
        """A place's finding lists every vehicle that waited there; only those its ``accused``
        names (waits on several days, one with a boarding: art. 59 XIV's "finalidade") get a
        proposal, none when it names none."""
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"vehicles": ["A", "B", "C"], "accused": ["B"]},
            },
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "started_at": "2025-03-05T12:00:00Z",
                "details": {"vehicles": ["D", "E", "F"], "accused": []},
            },
        )
        props, uncovered = propose(f, {"taxi": book()}, timezone=TZ)
        assert [p["vehicle_id"] for p in props] == ["B"] and uncovered == {}

    def test_a_place_s_proposal_spans_the_vehicle_s_own_waits(self) -> None:
        """About one vehicle, a place's proposal runs from its own first wait to its own last,
        never another vehicle's arrival or departure (the auto states when it committed)."""
        stops = [
            {"vehicle_id": v, "started_at": f"2025-03-{a}:00Z", "ended_at": f"2025-03-{b}:00Z"}
            for v, a, b in (
                ("A", "04T12:00", "04T13:00"),
                ("B", "04T14:00", "04T15:00"),
                ("A", "05T12:00", "05T12:30"),
                ("C", "06T12:00", "06T18:00"),
            )
        ]
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "started_at": "2025-03-04T12:00:00Z",
                "ended_at": "2025-03-06T18:00:00Z",
                "details": {"vehicles": ["A", "B", "C"], "accused": ["A", "B"], "stops": stops},
            }
        )
        props, _ = propose(f, {"taxi": book()}, timezone=TZ)
        spans = {p["vehicle_id"]: (p["committed_at"], p["committed_until"]) for p in props}
        assert spans == {
            "A": ("2025-03-04T12:00:00Z", "2025-03-05T12:30:00Z"),
            "B": ("2025-03-04T14:00:00Z", "2025-03-04T15:00:00Z"),
        }

    def test_a_missing_stand_read_as_nan_is_no_stand(self) -> None:
        """Findings read back from the database with no stand (a float NaN column): the
        proposal's stand_id is None, not "nan" (the agent's queue showed "nan")."""
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"vehicles": ["A"]},
            }
        )
        f["stand_id"] = float("nan")
        props, _ = propose(f, {"taxi": book()}, timezone=TZ)
        assert [p["stand_id"] for p in props] == [None]

    def test_low_confidence_makes_no_proposal(self) -> None:
        """Findings under the rule's ``confidence_min`` are listed for review, not proposed."""
        f = findings(
            {
                "kind": "illegal_stand_formation",
                "vehicle_id": None,
                "confidence": 0.2,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"vehicles": ["A"]},
            }
        )
        done = propose_all(f, {"taxi": book(confidence_floor={"default": 0.1})}, timezone=TZ)
        assert done.proposals == [] and done.uncovered == {}
        assert [r["reason"] for r in done.for_review] == ["confiança 0,20 abaixo do piso 0,3"]

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


class TestMeterExemption:
    EXEMPTION = {
        "categories": ["aeroporto", "distrito"],
        "kinds": ["flag2_misuse"],
        "provision": "art. 44",
        "excerpt": "não se aplica aos casos de Táxis Aeroporto e Táxis Distritais",
    }
    FLAG2 = {
        "kind": "flag2_misuse",
        "article": "25",
        "inciso": "V",
        "provision": "art. 25, V",
        "excerpt": "z",
        "gravity": "média",
    }

    def exempt_book(self) -> Rulebook:
        base = book()
        return book(
            rules=[r.model_dump() for r in base.rules] + [self.FLAG2],
            meter_exemption=self.EXEMPTION,
        )

    def test_exempt_category_is_for_review_not_proposed(self) -> None:
        """Airport and district taxis' meter findings are listed for review with art. 44; a
        common taxi's are proposed, and an exempt taxi's other findings too."""
        f = findings(
            *[
                {"kind": kind, "vehicle_id": v, "started_at": "2025-03-04T12:00:00Z"}
                for v in ("A1", "D1", "C1", "N1")
                for kind in ("flag2_misuse", "queue_jump")
            ]
        )
        fleet = pd.DataFrame(
            {
                "vehicle_id": ["A1", "D1", "C1", "N1"],
                "service_category": ["aeroporto", "distrito", "comum", None],
            }
        )
        done = propose_all(f, {"taxi": self.exempt_book()}, timezone=TZ, fleet=fleet)
        proposed = sorted((p["vehicle_id"], p["kind"]) for p in done.proposals)
        assert proposed == [
            ("A1", "queue_jump"),
            ("C1", "flag2_misuse"),
            ("C1", "queue_jump"),
            ("D1", "queue_jump"),
            ("N1", "flag2_misuse"),
            ("N1", "queue_jump"),
        ]
        assert [(r["vehicle_id"], r["reason"]) for r in done.for_review] == [
            ("A1", "isento do taxímetro: art. 44 (categoria aeroporto)"),
            ("D1", "isento do taxímetro: art. 44 (categoria distrito)"),
        ]

    def test_porto_velho_exempts_airport_and_district_taxis(self) -> None:
        """Porto Velho's rulebook carries art. 44's exemption, and only there."""
        books = bundled_rulebooks()
        exemption = books[("1100205", "taxi")].meter_exemption
        assert exemption is not None
        assert set(exemption.categories) == {"aeroporto", "distrito"}
        assert "flag2_misuse" in exemption.kinds
        others = [b for k, b in books.items() if k != ("1100205", "taxi")]
        assert all(b.meter_exemption is None for b in others)

    def test_unknown_category_is_refused(self) -> None:
        """A category outside the registry's vocabulary is a rulebook error."""
        with pytest.raises(ValueError, match="executivo"):
            book(meter_exemption={**self.EXEMPTION, "categories": ["executivo"]})


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
            details = {k: (v if isinstance(v, str | bool) else v[0]) for k, v in rule.when.items()}
            f = findings(
                {
                    "kind": rule.kind,
                    "vehicle_id": "V1",
                    "confidence": 0.99,
                    "started_at": "2025-03-04T12:00:00Z",
                    "details": details,
                }
            )
            if rule.repetition is not None:  # repeated: the minimum within the window
                f = findings(
                    *[
                        {
                            "kind": rule.kind,
                            "vehicle_id": "V1",
                            "confidence": 0.99,
                            "started_at": f"2025-03-04T12:{i:02d}:00Z",
                            "details": details,
                        }
                        for i in range(rule.repetition.min_findings)
                    ]
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

    def test_pinto_bandeira_defence_skips_the_state_holiday(self) -> None:
        """PB art. 53 (30 dias úteis, CPC) from a notification on Fri 9 Aug 2024 would end on
        Fri 20 Sep, the RS state holiday: it ends on Mon 23 Sep, and a defence filed then is
        in time."""
        import datetime as dt

        from enforcement.proposals import deadline_due, deadlines

        defence = deadlines(bundled_rulebooks()[("4314548", "taxi")])["defence"]
        assert defence["holidays"] == ["09-20"]
        start = dt.datetime(2024, 8, 9, 15, 0, tzinfo=dt.UTC)
        assert deadline_due(start, defence, timezone=TZ).date() == dt.date(2024, 9, 23)
        national_only = due_at(start, days=30, counting="business_days", timezone=TZ)
        assert national_only.date() == dt.date(2024, 9, 20)

    def test_a_holiday_that_is_no_day_is_refused(self) -> None:
        """``holidays`` are days ``MM-DD``."""
        deadline = {"days": 30, "from": "notification", "provision": "art. 53"}
        with pytest.raises(ValueError, match="'20-09' is not a day MM-DD"):
            book(deadlines={"defence": {**deadline, "holidays": ["20-09"]}})


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


NESTED: dict[str, Any] = {
    "deadlines": {"defesa": {"days": 15, "due": None}, "recurso": {}},
    "reincidence_priors": [{"auto_number": "A-1", "n": [1, [2, {"x": []}]]}],
    "excerpt": 'Art. 58 — “ponto” ç\u00e3o \\ "aspas"',
    "fine": {"amount": 0.1, "unit": "UFM"},
}


@pytest.mark.parametrize(
    "records",
    [
        [],
        [NESTED],
        [NESTED, {"proposal_id": "P2"}, {}],
        [NESTED, {"big": 2**70}, {"proposal_id": "P3", "k": {1: [2]}}],
    ],
    ids=["empty", "nested", "several", "refused-by-orjson"],
)
def test_proposals_json_record_by_record(tmp_path, records):
    """Written record by record (each indented one level, orjson or, for the records it refuses,
    json), proposals.json is json.dumps of the whole list, at every nesting level."""
    path = tmp_path / "proposals.json"
    write_proposals_json(records, path)
    assert path.read_bytes() == (json.dumps(records, ensure_ascii=False, indent=2) + "\n").encode()


POA_TAXI = ("4314902", "taxi")
POA_FRETAMENTO = ("4314902", "fretamento")


def _anomaly(start: str, *, seconds: float = 30, fid: str | None = None) -> dict[str, Any]:
    begin = pd.Timestamp(start)
    row = {
        "kind": "gps_anomaly",
        "vehicle_id": "P1",
        "confidence": 0.9,
        "started_at": begin.isoformat(),
        "ended_at": (begin + pd.Timedelta(seconds=seconds)).isoformat(),
        "details": {"pattern": "outlier"},
    }
    if fid:
        row["finding_id"] = fid
    return row


class TestConfidenceFloor:
    def test_default_floor_is_half(self) -> None:
        """Under the bundled default (0.5) a 0.45 finding is for review; 0.5 is proposed."""
        rb = bundled_rulebooks()[("4314548", "taxi")]
        f = findings(
            {
                "kind": "queue_jump",
                "vehicle_id": "A",
                "confidence": 0.45,
                "started_at": "2025-03-04T12:00:00Z",
            },
            {
                "kind": "queue_jump",
                "vehicle_id": "B",
                "confidence": 0.5,
                "started_at": "2025-03-04T12:00:00Z",
            },
        )
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        assert [p["vehicle_id"] for p in done.proposals] == ["B"]
        (item,) = done.for_review
        assert (item["vehicle_id"], item["kind"], item["provision"]) == (
            "A",
            "queue_jump",
            "art. 24, II",
        )
        assert item["reason"] == "confiança 0,45 abaixo do piso 0,5"
        assert item["finding_id"] == f.loc[f["vehicle_id"] == "A", "finding_id"].item()

    def test_rulebook_sets_a_floor_per_kind(self) -> None:
        """A kind's own floor in the rulebook wins over its default."""
        rb = book(confidence_floor={"default": 0.5, "queue_jump": 0.9})
        f = findings(
            {
                "kind": "queue_jump",
                "vehicle_id": "A",
                "confidence": 0.85,
                "started_at": "2025-03-04T12:00:00Z",
            }
        )
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        assert done.proposals == [] and len(done.for_review) == 1

    def test_run_override_merges_over_the_rulebook(self) -> None:
        """``confidence_floor`` of the run (``--thresholds``) replaces the rulebook's per kind."""
        rb = book(confidence_floor={"default": 0.5, "queue_jump": 0.9})
        f = findings(
            {
                "kind": "queue_jump",
                "vehicle_id": "A",
                "confidence": 0.6,
                "started_at": "2025-03-04T12:00:00Z",
            }
        )
        lowered = propose_all(f, {"taxi": rb}, timezone=TZ, confidence_floor={"queue_jump": 0.55})
        assert len(lowered.proposals) == 1
        only_default = propose_all(f, {"taxi": rb}, timezone=TZ, confidence_floor={"default": 0.1})
        assert only_default.proposals == []  # the rulebook's queue_jump floor still applies

    def test_bad_floor_is_refused(self) -> None:
        """A floor outside [0, 1] or for an unknown kind is a named error."""
        with pytest.raises(ValueError, match=r"confidence_floor\.default"):
            book(confidence_floor={"default": 1.5})
        with pytest.raises(ValueError, match=r"confidence_floor\.speeding"):
            book(confidence_floor={"speeding": 0.5})

    def test_summary_counts_and_lists_for_review(self) -> None:
        """summary.json's ``findings_for_review`` counts by kind and lists the ids."""
        rb = bundled_rulebooks()[("4314548", "taxi")]
        f = findings(
            {
                "kind": "queue_jump",
                "vehicle_id": "A",
                "confidence": 0.3,
                "started_at": "2025-03-04T12:00:00Z",
            }
        )
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        summary = proposal_summary(done.proposals, done.uncovered, done.for_review)
        review = summary["findings_for_review"]
        assert review["count"] == 1 and review["by_kind"] == {"queue_jump": 1}
        assert [r["finding_id"] for r in review["findings"]] == list(f["finding_id"])
        assert summary["proposals"] == 0


def _gap(*, still: bool = False, after_ride: bool = False) -> dict[str, Any]:
    """A 10-min tracking gap of P1 with a passenger aboard, driven through unless ``still``."""
    return {
        "kind": "tracking_gap",
        "vehicle_id": "P1",
        "confidence": 0.8,
        "started_at": "2025-03-04T15:00:00Z",
        "ended_at": "2025-03-04T15:10:00Z",
        "details": {"gap_s": 600.0, "moved": True, "still": still, "after_ride": after_ride},
    }


def _anomalies(*minutes: int, day: str = "2025-03-04T12:00:00Z") -> list[dict[str, Any]]:
    """Anomalies of vehicle P1 starting ``minutes`` after ``day``."""
    start = pd.Timestamp(day)
    return [_anomaly((start + pd.Timedelta(minutes=m)).isoformat()) for m in minutes]


class TestRepetition:
    def test_a_single_multipath_outlier_is_never_a_proposal(self) -> None:
        """One GPS outlier (POA art. 58, IX) is listed for review, never proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        f = findings(_anomaly("2025-03-04T12:00:00Z"))
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        assert done.proposals == []
        (item,) = done.for_review
        assert item["kind"] == "gps_anomaly" and "não repetido nem persistente" in item["reason"]
        assert "1 achado do veículo em 1 h (mínimo 5)" in item["reason"]

    def test_a_lone_outlier_beside_a_tracking_gap_is_still_not_proposed(self) -> None:
        """A tracking gap and one GPS outlier of the same vehicle and day share the provision
        (art. 58, IX) but not the rule: the gap is proposed as a gap, the outlier is listed
        for review by its repetition rule, in either order of the findings."""
        rb = bundled_rulebooks()[POA_TAXI]
        gap = _gap()
        jump = _anomaly("2025-03-04T12:00:00Z", seconds=57)
        for rows in ((jump, gap), (gap, jump)):
            done = propose_all(findings(*rows), {"taxi": rb}, timezone=TZ)
            (p,) = done.proposals
            assert (p["kind"], p["provision"]) == ("tracking_gap", "art. 58, IX")
            assert "repetition" not in p
            (item,) = done.for_review
            assert item["kind"] == "gps_anomaly" and "não repetido" in item["reason"]

    def test_a_gap_the_car_stood_through_is_for_review(self) -> None:
        """A silence the car stood through (an underground drop-off) or one longer than a ride
        that ends without a passenger (the shift's end) shows no hidden ride: listed for review
        with the reason, never proposed; the same gap driven through is proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        gap, night = _gap(still=True), _gap(after_ride=True)
        for finding, reason in ((gap, "estacionamento subterrâneo"), (night, "fim do turno")):
            done = propose_all(findings(finding), {"taxi": rb}, timezone=TZ)
            assert done.proposals == []
            (item,) = done.for_review
            assert item["provision"] == "art. 58, IX"
            assert reason in item["reason"]
        (p,) = propose_all(findings(_gap()), {"taxi": rb}, timezone=TZ).proposals
        assert p["provision"] == "art. 58, IX"

    def test_bandeira_2_on_a_ride_out_of_pinto_bandeira_is_for_review(self) -> None:
        """A tariff decree commonly allows Bandeira 2 beyond the municipal limit: such a ride is
        listed for review with the reason; one within the town is proposed (art. 25, V); one
        judged without the boundary has no rule (no proposal)."""
        rb = bundled_rulebooks()[("4314548", "taxi")]

        def flag2(vehicle: str, **details: Any) -> dict[str, Any]:
            return {
                "kind": "flag2_misuse",
                "vehicle_id": vehicle,
                "confidence": 0.9,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"tariff": 2, **details},
            }

        done = propose_all(
            findings(
                flag2("OUT", left_municipality=True, n_fixes_outside=9),
                flag2("IN", left_municipality=False, n_fixes_outside=0),
                flag2("UNKNOWN"),
            ),
            {"taxi": rb},
            timezone=TZ,
        )
        assert [(p["vehicle_id"], p["provision"]) for p in done.proposals] == [("IN", "art. 25, V")]
        (item,) = done.for_review
        assert (item["vehicle_id"], item["provision"]) == ("OUT", "art. 25, V")
        assert "saiu do município" in item["reason"]
        assert done.uncovered == {"flag2_misuse": 1}

    def test_five_anomalies_within_an_hour_are_a_proposal(self) -> None:
        """Five anomalies of one vehicle within an hour show the tracking was not fully
        available."""
        rb = bundled_rulebooks()[POA_TAXI]
        f = findings(*_anomalies(0, 10, 25, 40, 60))
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        (p,) = done.proposals
        assert p["provision"] == "art. 58, IX" and len(p["finding_ids"]) == 5
        assert p["repetition"]["most_findings_in_window"] == 5
        assert done.for_review == []

    def test_a_working_receivers_errors_of_a_day_are_not(self) -> None:
        """A receiver that works errs too (about 0.2 anomalies per tracked hour on the real
        Porto trips): three anomalies in a day, or five 20 min apart (never five in one hour),
        are listed for review, not proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        for minutes in ((0, 180, 480), (0, 20, 40, 60, 80)):
            done = propose_all(findings(*_anomalies(*minutes)), {"taxi": rb}, timezone=TZ)
            assert done.proposals == [] and len(done.for_review) == len(minutes)

    def test_one_persistent_anomaly_is_a_proposal(self) -> None:
        """One anomaly lasting 10 minutes or more is persistent: proposed alone."""
        rb = bundled_rulebooks()[POA_TAXI]
        f = findings(_anomaly("2025-03-04T12:00:00Z", seconds=600))
        (p,) = propose_all(f, {"taxi": rb}, timezone=TZ).proposals
        assert p["repetition"]["longest_s"] == 600.0

    def test_glitch_fixes_before_a_night_off_are_not_persistent(self) -> None:
        """Two fixes with a coordinate read as 0 and then the tracker off for two hours: the
        outlier lasted its glitch (60 s, ``lasted_s``), not the night; for review, not
        proposed. The same glitch with the car reporting throughout is the same verdict."""
        rb = bundled_rulebooks()[POA_TAXI]
        lat, lon = offset_m(0.0, 0.0)
        base = pd.Timestamp("2025-03-04T12:00:00Z")
        for silence in (pd.Timedelta(hours=2), pd.Timedelta(seconds=30)):
            rows = [("P1", base, lat, lon), ("P1", base + pd.Timedelta(seconds=30), 0.0, lon)]
            rows += [("P1", base + pd.Timedelta(seconds=60), lat, 0.0)]
            rows += [("P1", base + pd.Timedelta(seconds=60) + silence, lat, lon)]
            found = detect_gps_anomaly(make_pings(rows))
            (details,) = found["details"]
            assert details["pattern"] == "outlier"
            assert details["lasted_s"] == (60.0 if silence.seconds > 300 else 90.0)
            done = propose_all(found, {"taxi": rb}, timezone=TZ)
            assert done.proposals == [] and len(done.for_review) == 1

    def test_earlier_findings_count_as_context(self) -> None:
        """Anomalies handled before (``context``) count towards the repetition, not proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        earlier = findings(*_anomalies(-40, -30, -20, -10))
        f = findings(_anomaly("2025-03-04T12:00:00Z"))
        (p,) = propose_all(f, {"taxi": rb}, timezone=TZ, context=earlier).proposals
        assert p["finding_ids"] == list(f["finding_id"])

    def test_low_confidence_anomalies_do_not_count(self) -> None:
        """Anomalies under the confidence floor neither propose nor count towards repetition."""
        rb = bundled_rulebooks()[POA_TAXI]
        rows = _anomalies(0, 10, 20, 30, 40)
        rows[0]["confidence"] = rows[1]["confidence"] = 0.3
        done = propose_all(findings(*rows), {"taxi": rb}, timezone=TZ)
        assert done.proposals == [] and len(done.for_review) == 5


class TestReviewCases:
    def test_two_receivers_are_listed_for_review_never_proposed(self) -> None:
        """POA: fixes read as two receivers under one prefix (``two_tracks``) are no failing
        tracker (art. 58, IX): each such finding is listed for review under art. 59, VI with
        the reason, however long or repeated, and none counts towards the outliers' repetition."""
        rb = bundled_rulebooks()[POA_TAXI]
        rows = [_anomaly(f"2025-03-04T1{i}:00:00Z", seconds=1800) for i in range(3)]
        for row in rows:
            row["details"] = {"pattern": "two_tracks"}
        outliers = [_anomaly("2025-03-04T16:00:00Z"), _anomaly("2025-03-04T17:00:00Z")]
        done = propose_all(findings(*rows, *outliers), {"taxi": rb}, timezone=TZ)
        assert done.proposals == [] and done.uncovered == {}
        provisions = sorted(r["provision"] for r in done.for_review)
        assert provisions == ["art. 58, IX"] * 2 + ["art. 59, VI"] * 3
        two = [r for r in done.for_review if r["provision"] == "art. 59, VI"]
        assert all("dois rastreadores sob o mesmo prefixo" in r["reason"] for r in two)
        assert all("só com prova de intervenção" in r["reason"] for r in two)

    def test_a_vehicle_never_seen_is_listed_for_review_not_proposed(self) -> None:
        """POA art. 60 X (cassação): a prefixo with no fix at all in the data may have a dead or
        unregistered tracker, and one whose tracker fell silent after its last operation
        (``silent``) as well; they are listed for review with the reason, while one seen idle
        through the lapse is proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        rows = [
            {
                "kind": "inactivity",
                "vehicle_id": vid,
                "confidence": 0.9,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"never_seen": never, "silent": silent},
            }
            for vid, never, silent in (
                ("V1", True, True),
                ("V2", False, False),
                ("V3", False, True),
            )
        ]
        done = propose_all(findings(*rows), {"taxi": rb}, timezone=TZ)
        assert [p["vehicle_id"] for p in done.proposals] == ["V2"]
        assert done.proposals[0]["provision"] == "art. 60, X"
        never, silent = sorted(done.for_review, key=lambda r: r["vehicle_id"])
        assert never["vehicle_id"] == "V1" and never["provision"] == "art. 60, X"
        assert "ausência de dados não prova" in never["reason"]
        assert (
            silent["vehicle_id"] == "V3" and "rastreador do prefixo silenciou" in silent["reason"]
        )

    def test_a_review_case_is_checked_like_a_rule(self) -> None:
        """A review case of an unknown kind, or of a kind left in [uncovered], is refused."""
        case = {"kind": "gps_anomaly", "provision": "art. 1", "reason": "motivo"}
        assert book(review=[case]).review_for("gps_anomaly", {}) is not None
        with pytest.raises(ValueError, match="speeding"):
            book(review=[case | {"kind": "speeding"}])
        with pytest.raises(ValueError, match=r"the kind is in \[uncovered\]"):
            book(review=[case], uncovered={"gps_anomaly": "sem texto"})


class TestReincidenceStatuses:
    def _history(self, key: str, status: str) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "vehicle_id": "V1",
                    "rule_key": key,
                    "committed_at": "2024-06-01T12:00:00Z",
                    "status": status,
                    "auto_number": "AI-4314902-2024-000031",
                    "proposal_id": "P-1",
                }
            ]
        )

    def test_fretamento_counts_only_final_decisions_taxi_every_issued_auto(self) -> None:
        """Fretamento art. 19 § 5º: only infractions with a final decision make a reincidence;
        Pinto Bandeira art. 48 asks for no final decision: every issued auto counts."""
        fret = bundled_rulebooks()[POA_FRETAMENTO]
        rule = fret.rule_for("operating_while_barred", {"reason": "inspection_expired"})
        assert rule is not None
        fret_key = f"4314902:fretamento:{rule.key}"
        taxi = bundled_rulebooks()[("4314548", "taxi")]
        taxi_key = "4314548:taxi:art.24::II:"
        at = pd.Timestamp("2025-03-04T12:00:00Z")
        counted = {
            status: (
                reincidence_count(
                    fret,
                    key=fret_key,
                    vehicle_id="V1",
                    at=at,
                    confirmed=self._history(fret_key, status),
                ),
                reincidence_count(
                    taxi,
                    key=taxi_key,
                    vehicle_id="V1",
                    at=at,
                    confirmed=self._history(taxi_key, status),
                ),
            )
            for status in (
                "confirmada",
                "notificada",
                "em_defesa",
                "defesa_indeferida",
                "definitiva",
            )
        }
        assert counted == {
            "confirmada": (0, 1),
            "notificada": (0, 1),
            "em_defesa": (0, 1),
            "defesa_indeferida": (0, 1),
            "definitiva": (1, 1),
        }

    def test_proposal_names_the_earlier_autos(self) -> None:
        """A reincidence lists the earlier autos (number and date) it counted."""
        rb = bundled_rulebooks()[("4314548", "taxi")]
        key = "4314548:taxi:art.24::II:"
        f = findings(
            {"kind": "queue_jump", "vehicle_id": "V1", "started_at": "2025-03-04T12:00:00Z"}
        )
        (p,), _ = propose(f, {"taxi": rb}, timezone=TZ, confirmed=self._history(key, "notificada"))
        assert p["reincidence_count"] == 1
        assert p["reincidence_priors"] == [
            {
                "auto_number": "AI-4314902-2024-000031",
                "proposal_id": "P-1",
                "committed_at": "2024-06-01T12:00:00Z",
                "status": "notificada",
            }
        ]

    def test_rulebook_refuses_final_decision_without_the_law_words(self) -> None:
        """``basis = "final_decision"`` must count only ``definitiva`` and quote the law."""
        with pytest.raises(ValueError, match="statuses_excerpt"):
            book(
                reincidence={
                    "window_days": 365,
                    "basis": "final_decision",
                    "statuses": ["definitiva"],
                }
            )
        with pytest.raises(ValueError, match="definitiva"):
            book(
                reincidence={
                    "window_days": 365,
                    "basis": "final_decision",
                    "statuses": ["confirmada"],
                    "statuses_excerpt": "x",
                }
            )

    def test_confirmed_from_proposals_keeps_status_and_auto(self) -> None:
        """An earlier proposals.json keeps each record's status and auto number."""
        recs = [
            {
                "vehicle_id": "V",
                "rule_key": "k",
                "committed_at": "2025-01-01T00:00:00Z",
                "status": "definitiva",
                "auto_number": "AI-1",
                "proposal_id": "P-9",
            }
        ]
        frame = confirmed_from_proposals(recs)
        assert frame[["status", "auto_number", "proposal_id"]].iloc[0].tolist() == [
            "definitiva",
            "AI-1",
            "P-9",
        ]


class TestConfirmedFileForFretamento:
    @pytest.mark.parametrize(("status", "expected"), [("notificada", 0), ("definitiva", 1)])
    def test_earlier_proposals_json_counts_final_decisions_only(
        self, status: str, expected: int
    ) -> None:
        """`pontual analyze --confirmed`: a fretamento infraction of an earlier proposals.json
        counts only once its decision is final (art. 19 § 5º)."""
        rb = bundled_rulebooks()[POA_FRETAMENTO]
        f = findings(
            {
                "kind": "operating_while_barred",
                "vehicle_id": "F1",
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"reason": "alvara_expired"},
            }
        )
        fleet = pd.DataFrame({"vehicle_id": ["F1"], "service": ["fretamento"]})
        (first,), _ = propose(
            findings(
                {
                    "kind": "operating_while_barred",
                    "vehicle_id": "F1",
                    "started_at": "2024-09-04T12:00:00Z",
                    "details": {"reason": "alvara_expired"},
                }
            ),
            {"fretamento": rb},
            timezone=TZ,
            fleet=fleet,
        )
        earlier = [{**first, "status": status, "auto_number": "AI-4314902-2024-000005"}]
        (p,), _ = propose(
            f,
            {"fretamento": rb},
            timezone=TZ,
            fleet=fleet,
            confirmed=confirmed_from_proposals(earlier),
        )
        assert p["reincidence_count"] == expected
        assert p["fine"]["amount"] == 150.0 * 2**expected


class TestPortoAlegreTaxiReincidence:
    @pytest.mark.parametrize(
        ("status", "expected"), [("confirmada", 0), ("notificada", 0), ("definitiva", 1)]
    )
    def test_only_a_final_decision_aggravates(self, status: str, expected: int) -> None:
        """The decree says only 'Na reincidência': an earlier auto counts once its decision is
        final, never while the accused may still defend it (art. 58, XII: 'multa', then 'multa,
        cassação da autorização e descadastramento')."""
        rb = bundled_rulebooks()[POA_TAXI]
        row = {
            "kind": "operating_while_barred",
            "vehicle_id": "T1",
            "confidence": 0.9,
            "details": {"reason": "alvara_expired"},
        }
        (first,), _ = propose(
            findings({**row, "started_at": "2024-09-04T12:00:00Z"}), {"taxi": rb}, timezone=TZ
        )
        earlier = [{**first, "status": status, "auto_number": "AI-4314902-2024-000007"}]
        (p,), _ = propose(
            findings({**row, "started_at": "2025-03-04T12:00:00Z"}),
            {"taxi": rb},
            timezone=TZ,
            confirmed=confirmed_from_proposals(earlier),
        )
        assert p["reincidence_count"] == expected
        assert ("cassação" in p["penalty"]) == bool(expected)


class TestLegalCorrections:
    def test_pinto_bandeira_inactivity_is_not_proposed(self) -> None:
        """PB art. 32 VIII is a registry fact (vehicle not presented after the reserva), not GPS
        idleness: an inactivity finding makes no proposal, even under a reserva."""
        rb = bundled_rulebooks()[("4314548", "taxi")]
        assert "inactivity" in rb.uncovered and "art. 32, VIII" in rb.uncovered["inactivity"]
        f = findings(
            {
                "kind": "inactivity",
                "vehicle_id": "V1",
                "confidence": 0.9,
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"current_status": "reserved"},
            }
        )
        props, uncovered = propose(f, {"taxi": rb}, timezone=TZ)
        assert props == [] and uncovered == {"inactivity": 1}

    def test_porto_velho_art_9_citation_is_marked_uncertain(self) -> None:
        """PV art. 9's incisos are misnumbered in the available text: the proposal says the
        number must be checked in the official text."""
        rb = bundled_rulebooks()[("1100205", "taxi")]
        f = findings(
            {
                "kind": "operating_while_barred",
                "vehicle_id": "V1",
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"reason": "alvara_expired"},
            }
        )
        (p,), _ = propose(f, {"taxi": rb}, timezone=TZ)
        assert p["provision"] == "art. 9º, VIII"
        assert p["citation_uncertain"].startswith(
            "numeração do inciso a confirmar no texto oficial"
        )
        law = rb.law_text()
        assert "Art. 9º São deveres dos taxistas:\n\nV - " in law  # the list starts at V

    def test_rules_with_salvo_declare_an_exception(self) -> None:
        """Every bundled rule whose excerpt says "salvo …" declares it as an exception to be
        answered on confirming."""
        for rb in bundled_rulebooks().values():
            for rule in rb.rules:
                if "salvo" in rule.excerpt.lower():
                    assert rule.exception is not None, rule.provision
                    assert rule.exception.excerpt in rule.excerpt

    @pytest.mark.parametrize(
        "when", [{"reason": "reserved"}, {"subtype": "accessible_wait"}, {}], ids=str
    )
    def test_57_xi_rules_leave_the_pontuacao_to_the_agent(self, when: dict[str, str]) -> None:
        """POA art. 57 XI c ("autorizatário ou condutor, conforme o caso"): no pontuação fixed,
        the choices offered."""
        rb = bundled_rulebooks()[POA_TAXI]
        kind = {"reason": "operating_while_barred", "subtype": "unlicensed_stand_use"}
        rule = rb.rule_for(kind.get(next(iter(when), ""), "outside_municipality"), when)
        assert rule is not None and "57, XI" in rule.provision
        assert rule.pontuacao is None and rule.pontuacao_choices == ("condutor", "autorizatário")


def test_instants_are_written_in_utc_to_the_second_as_pandas_formats_them() -> None:
    """_iso equals tz_convert("UTC").strftime in any zone, before 1970, below the second."""
    import numpy as np

    from enforcement.proposals import _iso

    rng = np.random.default_rng(7)
    ns = [*rng.integers(-(2**62), 2**62, 2000).tolist(), -1, 0, 999_999_999, -500_000_000]
    zones = ["UTC", "America/Sao_Paulo", "Asia/Kolkata", "Pacific/Chatham"]
    for k, value in enumerate(ns):
        ts = pd.Timestamp(value, tz="UTC").tz_convert(zones[k % len(zones)])
        assert _iso(ts) == ts.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    with pytest.raises(TypeError):
        _iso(pd.Timestamp("2024-03-04 09:00"))


class TestLongerRouteReference:
    @pytest.mark.parametrize("key", [POA_TAXI, ("4314548", "taxi")], ids="-".join)
    def test_a_detour_the_reference_may_explain_is_listed_for_review(
        self, key: tuple[str, str]
    ) -> None:
        """A detour along a consistent other road (``corridor``: what a closed road the network
        lacks looks like; ``reference_may_be_wrong``) is listed for review with the reason; a
        loop is proposed."""
        rb = bundled_rulebooks()[key]
        f = findings(
            {
                "kind": "longer_route",
                "vehicle_id": "V1",
                "started_at": "2025-03-04T12:00:00Z",
                "details": {"pattern": "corridor", "reference_may_be_wrong": True},
            },
            {
                "kind": "longer_route",
                "vehicle_id": "V2",
                "started_at": "2025-03-04T13:00:00Z",
                "details": {"pattern": "loop", "reference_may_be_wrong": False},
            },
        )
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        assert [p["vehicle_id"] for p in done.proposals] == ["V2"]
        (item,) = done.for_review
        assert item["vehicle_id"] == "V1" and "via bloqueada" in item["reason"]


class TestLimitsTheLawFixes:
    @staticmethod
    def _idle(days: int, vehicle: str) -> dict[str, Any]:
        return {
            "kind": "inactivity",
            "vehicle_id": vehicle,
            "confidence": 0.9,
            "started_at": "2025-03-04T12:00:00Z",
            "details": {
                "never_seen": False,
                "silent": False,
                "thresholds": {"max_idle_days": days},
            },
        }

    def test_a_stricter_limit_than_the_law_is_never_proposed(self) -> None:
        """Art. 60, X (Porto Alegre) punishes 'mais de 60 dias' without operating: a finding
        judged by a shorter window (a short run's own limit) is listed for review, not proposed
        under it; one judged by the law's 60 days, or a longer window, is proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        f = findings(self._idle(4, "A"), self._idle(60, "B"), self._idle(90, "C"))
        done = propose_all(f, {"taxi": rb}, timezone=TZ)
        assert sorted(p["vehicle_id"] for p in done.proposals) == ["B", "C"]
        (item,) = done.for_review
        assert (item["vehicle_id"], item["provision"]) == ("A", "art. 60, X")
        assert item["reason"] == (
            "analisado com um limite abaixo do que a lei fixa (art. 60, X: 60; na análise: 4)"
        )

    def test_a_shorter_grace_than_the_law_is_never_proposed(self) -> None:
        """The ICTP's 30 days of grace (art. 5º, § 2º): a run that gave fewer is not proposed."""
        rb = bundled_rulebooks()[POA_TAXI]
        row = {
            "kind": "driver_not_allowed",
            "vehicle_id": "A",
            "confidence": 0.9,
            "started_at": "2025-03-04T12:00:00Z",
            "details": {"reason": "ictp_expired", "thresholds": {"ictp_grace_days": 10}},
        }
        done = propose_all(findings(row), {"taxi": rb}, timezone=TZ)
        assert done.proposals == []
        assert done.for_review[0]["reason"].endswith("(art. 5º, § 2º: 30; na análise: 10)")
        row["details"]["thresholds"]["ictp_grace_days"] = 30
        assert len(propose_all(findings(row), {"taxi": rb}, timezone=TZ).proposals) == 1


class TestDetailsAClientKeeps:
    def test_proposals_read_only_the_declared_details(self) -> None:
        """Findings cut to ``proposal_details`` (all a Dask client keeps of them) are proposed
        as the whole ones: a limit stricter than the law's (``thresholds``) is still listed for
        review, and a place's proposal still spans the vehicle's own waits (``stops``)."""
        stops = [
            {"vehicle_id": v, "started_at": f"2025-03-{a}:00Z", "ended_at": f"2025-03-{b}:00Z"}
            for v, a, b in (("A", "04T12:00", "04T13:00"), ("B", "06T14:00", "06T15:00"))
        ]
        place = {
            "kind": "illegal_stand_formation",
            "vehicle_id": None,
            "confidence": 0.9,
            "started_at": "2025-03-04T12:00:00Z",
            "ended_at": "2025-03-06T15:00:00Z",
            "details": {"vehicles": ["A", "B"], "accused": ["A", "B"], "stops": stops},
        }
        idle = TestLimitsTheLawFixes._idle
        f = findings(idle(4, "C"), idle(60, "D"), place)
        books = {"taxi": bundled_rulebooks()[POA_TAXI]}
        whole = propose_all(f, books, timezone=TZ)
        assert [r["vehicle_id"] for r in whole.for_review] == ["C"]
        assert {p["vehicle_id"]: p["committed_until"] for p in whole.proposals}["A"] == (
            "2025-03-04T13:00:00Z"
        )
        assert propose_all(with_details(f, proposal_details(books)), books, timezone=TZ) == whole
