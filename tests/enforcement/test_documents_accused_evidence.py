"""Documents: a multi-vehicle finding as evidence against one vehicle, negative durations,
whole-day windows, registry labels and limits."""

from __future__ import annotations

from typing import Any

from document_factories import sample_document
from factories import make_pings
from live_scenarios import DAY, PLACE, wait
from live_scenarios import RANK_STANDS as STANDS

from enforcement.documents import (
    EvidenceFinding,
    accused_evidence,
    document_fields,
    evidence_summary,
    fix_vehicles,
    render_html,
)
from tracking.detectors.illegal_stand_formation import detect_illegal_stand_formation
from tracking.stops import detect_stops

TZ = "America/Sao_Paulo"


def _finding(kind: str, details: dict[str, Any], **times: str) -> EvidenceFinding:
    return {
        "finding_id": f"{kind}-0",
        "kind": kind,
        "started_at": times.get("started_at", "2024-03-08T15:00:00+00:00"),
        "ended_at": times.get("ended_at", "2024-03-08T15:30:00+00:00"),
        "confidence": 0.8,
        "details": details,
    }


def _stand_formation() -> dict[str, Any]:
    """A, B and C wait free and board at one spot on three days each; on each day two of them
    wait at the same time, B's wait inside A's (the fixes of overlapping waits interleave)."""
    rows: list[dict[str, Any]] = []
    for d in (0, 1, 2):
        rows += wait("A", d * DAY, PLACE, wait_s=1500.0)
        rows += wait("B", d * DAY + 300, PLACE, wait_s=900.0)
        rows += wait("C", d * DAY + 7200, PLACE)
    pings = make_pings(rows)
    found = detect_illegal_stand_formation(detect_stops(pings), pings, STANDS)
    assert len(found) == 1
    return dict(found.iloc[0]["details"])


def _own_fixes(details: dict[str, Any], vehicle: str) -> list[str]:
    """The timestamps of a vehicle's fixes in the detector's input (the waits' own)."""
    return [
        f["timestamp"]
        for w in details["stops"]
        if w["vehicle_id"] == vehicle
        for f in details["fixes"]
        if w["started_at"] <= f["timestamp"] <= w["ended_at"]
    ]


class TestFixVehicles:
    def test_stand_formation_fixes_go_to_their_waits_vehicles(self) -> None:
        """Each fix of a place's waits goes to its own vehicle, also where two vehicles wait at
        once; every fix is told apart here."""
        details = _stand_formation()
        owners = fix_vehicles(details, vehicle_id=None)
        assert len(owners) == len(details["fixes"]) == 18  # first fix and boarding, 9 waits
        assert None not in owners
        for w in details["stops"]:  # each wait's first fix is its start
            i = next(k for k, f in enumerate(details["fixes"]) if f["timestamp"] == w["started_at"])
            assert owners[i] == w["vehicle_id"]
        assert sorted(owners) == ["A"] * 6 + ["B"] * 6 + ["C"] * 6

    def test_a_fix_stored_without_its_vehicle_is_given_to_no_one(self) -> None:
        """A place's fix stored without ``vehicle_id`` (before the detector named it): None."""
        w = {"started_at": "2024-03-08T15:00:00Z", "ended_at": "2024-03-08T15:20:00Z"}
        fix = {"lat": -30.0, "lon": -51.0, "timestamp": "2024-03-08T15:05:00Z", "row": 5}
        details = {
            "stops": [{**w, "vehicle_id": "A"}, {**w, "vehicle_id": "B"}],
            "fixes": [{**fix, "vehicle_id": "A"}, fix, {**fix, "vehicle_id": "B"}],
        }
        assert fix_vehicles(details, vehicle_id=None) == ["A", None, "B"]

    def test_queue_jump_fixes_of_the_vehicles_passed(self) -> None:
        """A queue jump's fixes: the accused's own, and the vehicle passed's at the boarding."""
        own = {"timestamp": "2024-03-08T15:00:00Z", "lat": -30.0, "lon": -51.0, "row": 1}
        board = {"timestamp": "2024-03-08T15:10:00Z", "lat": -30.0, "lon": -51.0, "row": 9}
        theirs = {"timestamp": "2024-03-08T15:10:00Z", "lat": -30.0, "lon": -51.0, "row": 4}
        details = {
            "fixes": [own, board, theirs],
            "ahead": [{"vehicle_id": "SIM-1394", "fix_at_our_boarding": theirs}],
        }
        assert fix_vehicles(details, vehicle_id="SIM-1617") == ["SIM-1617", "SIM-1617", "SIM-1394"]


class TestAccusedEvidence:
    def test_stand_formation_keeps_the_accused_vehicles_fixes_and_waits(self) -> None:
        """Against B: only B's fixes and waits, its own first and last times among the
        measures, and a note that the other fixes are the finding's."""
        details = _stand_formation()
        finding = _finding("illegal_stand_formation", details)
        mine = accused_evidence(finding, vehicle_id="B")["details"]
        assert [f["timestamp"] for f in mine["fixes"]] == _own_fixes(details, "B")
        assert {w["vehicle_id"] for w in mine["stops"]} == {"B"}
        assert len(mine["fixes"]) == 6 and mine["vehicle_n_stops"] == 3
        _, measures, _ = evidence_summary(accused_evidence(finding, vehicle_id="B"), timezone=TZ)
        first = min(w["started_at"] for w in mine["stops"])
        assert "esperas deste veículo no local: 3" in measures
        assert any(
            m.startswith("início da primeira espera deste veículo: 04/03/2024") for m in measures
        )
        assert first.startswith("2024-03-04")
        (note,) = mine["notes"]
        assert "só as 6 do veículo B" in note and "as outras 12" in note
        assert details["fixes"] != mine["fixes"] and len(details["fixes"]) == 18  # not changed

    def test_queue_jump_drops_the_vehicle_ahead(self) -> None:
        """Against the vehicle that jumped: the fix of the vehicle passed is not listed."""
        own = {"timestamp": "2024-03-08T15:00:00Z", "lat": -30.0, "lon": -51.0, "row": 1}
        theirs = {"timestamp": "2024-03-08T15:10:00Z", "lat": -30.0, "lon": -51.0, "row": 4}
        details = {
            "fixes": [own, theirs],
            "ahead": [{"vehicle_id": "SIM-1394", "fix_at_our_boarding": theirs}],
        }
        mine = accused_evidence(_finding("queue_jump", details), vehicle_id="SIM-1617")
        assert mine["details"]["fixes"] == [own]

    def test_single_vehicle_findings_unchanged(self) -> None:
        """A finding about one vehicle is its own evidence, as it is."""
        finding = _finding("longer_route", {"fixes": [{"timestamp": "2024-03-08T15:00:00Z"}]})
        assert accused_evidence(finding, vehicle_id="07") is finding


class TestDuration:
    def test_negative_durations_keep_their_size(self) -> None:
        """-61 s reads "-1 min 01 s" (not "-1 h 58 min"); -3700 s "-1 h 01 min"; a meter on
        before leaving the stand says so, without a minus sign."""
        details = {"boarding_lag_s": -61.0, "own_wait_s": -3700.0, "wait_s": -5.0}
        _, measures, _ = evidence_summary(_finding("queue_jump", details), timezone=TZ)
        assert "taxímetro ligado antes da saída do ponto: 1 min 01 s" in measures
        assert "tempo no ponto até o embarque: -1 h 01 min" in measures
        assert "espera: -5 s" in measures


class TestWholeDayWindows:
    WEEK = {"started_at": "2024-03-04T03:00:00+00:00", "ended_at": "2024-03-11T03:00:00+00:00"}

    def test_field_shows_the_windows_last_day(self) -> None:
        """A window ending at local midnight (11/03 00:00) ends on 10/03 in the document."""
        doc = sample_document()
        doc["proposal"] = {
            **doc["proposal"],
            "committed_at": self.WEEK["started_at"],
            "committed_until": self.WEEK["ended_at"],
        }
        rows = {label: value for _, label, value in document_fields(doc, kind="auto")}
        assert rows["Data e hora"].startswith("de 04/03/2024 00:00:00 a 10/03/2024 23:59:59 (")
        assert "11/03/2024" not in render_html(doc, kind="auto").split("Evidência")[0]

    def test_evidence_heading_shows_the_windows_last_day(self) -> None:
        """The finding's heading ends on the window's last day too."""
        head, _, _ = evidence_summary(_finding("inactivity", {}, **self.WEEK), timezone=TZ)
        assert "04/03/2024 00:00:00 a 10/03/2024 23:59:59" in head

    def test_other_ends_unchanged(self) -> None:
        """An end at another time, or at midnight in another zone's day, is shown as it is."""
        head, _, _ = evidence_summary(
            _finding("inactivity", {}, ended_at="2024-03-11T03:00:01+00:00"), timezone=TZ
        )
        assert "11/03/2024 00:00:01" in head


class TestRegistryEvidence:
    def test_labels_in_pt_br(self) -> None:
        """Registry and pickup keys read in pt-BR, a year without a thousands separator."""
        reasons = [
            {
                "reason": "inspection_overdue",
                "last_inspection_on": "2023-03-07",
                "max_inspection_age_days": 365,
            }
        ]
        details = {"reason": "inspection_overdue", "reasons": reasons}
        _, measures, thresholds = evidence_summary(
            _finding("operating_while_barred", details), timezone=TZ
        )
        assert "última vistoria em: 07/03/2023" in measures
        assert not any("idade máxima da vistoria" in m for m in measures)  # a limit, not a measure
        assert "idade máxima da vistoria: 365 dias" in thresholds
        _, measures, _ = evidence_summary(
            _finding("outside_municipality", {"pickup_accuracy_m": 7.0}), timezone=TZ
        )
        assert measures == ["precisão informada da posição do embarque: 7 m"]
        over_age = [{"reason": "vehicle_over_age", "year": 2009, "counted_from": "manufacture"}]
        _, measures, _ = evidence_summary(
            _finding("operating_while_barred", {"reasons": over_age}), timezone=TZ
        )
        assert "ano de fabricação: 2009" in measures
        assert "idade contada a partir de: ano de fabricação" in measures

    def test_limits_of_other_reasons_not_shown(self) -> None:
        """An expired alvará shows no inspection-age or vehicle-age limit."""
        details = {
            "reason": "alvara_expired",
            "reasons": [{"reason": "alvara_expired", "alvara_valid_until": "2024-02-01"}],
            "thresholds": {
                "min_trip_duration_s": 60.0,
                "max_inspection_age_days": 365,
                "max_vehicle_age_years": 10,
                "vehicle_age_counted_from": "manufacture",
            },
        }
        _, _, thresholds = evidence_summary(
            _finding("operating_while_barred", details), timezone=TZ
        )
        assert thresholds == ["duração mínima da corrida: 1 min 00 s"]
