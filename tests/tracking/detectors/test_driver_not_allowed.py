from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pandas as pd
import pytest
from factories import make_pings, offset_m
from kernel_checks import assert_pieces_give_batch

from tracking.detectors._errors import FleetFrameError
from tracking.detectors.driver_not_allowed import (
    KERNEL,
    REASONS,
    detect_driver_not_allowed,
)
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.kernel import advance, open_findings

D = dt.date


def ride(
    vehicle: str, start: str, driver: str | None, *, minutes: float = 10, step_s: int = 30
) -> list[dict[str, Any]]:
    """A free fix, an occupied ride of ``minutes`` driven by ``driver``, a free fix."""
    t0 = pd.Timestamp(start)
    n = int(minutes * 60 // step_s)
    rows = []
    for k in range(-1, n + 2):
        lat, lon = offset_m(100.0 * k, 0.0)
        rows.append(
            {
                "vehicle_id": vehicle,
                "timestamp": t0 + pd.Timedelta(seconds=step_s * k),
                "lat": lat,
                "lon": lon,
                "meter": "occupied" if 0 <= k <= n else "free",
                "driver_id": driver,
            }
        )
    return rows


def drivers(*rows: dict[str, Any]) -> pd.DataFrame:
    base = {"cnh_valid_until": D(2030, 1, 1), "ictp_valid_until": D(2030, 1, 1)}
    return pd.DataFrame([base | r for r in rows])


def links(*rows: tuple[Any, ...]) -> pd.DataFrame:
    return pd.DataFrame(
        list(rows), columns=["vehicle_id", "driver_id", "role", "valid_from", "valid_until"]
    )


REGISTRY = {
    "drivers": drivers({"driver_id": "d1"}, {"driver_id": "d2"}, {"driver_id": "d9"}),
    "driver_links": links(
        ("v1", "d1", "titular", D(2020, 1, 1), None),
        ("v1", "d2", "auxiliar", D(2020, 1, 1), None),
        ("v2", "d9", "titular", D(2020, 1, 1), None),
    ),
}


def detect(rows: list[dict[str, Any]], **kw: Any) -> pd.DataFrame:
    return detect_driver_not_allowed(make_pings(rows), **(REGISTRY | kw))


class TestDetectDriverNotAllowed:
    def test_linked_drivers_give_nothing(self) -> None:
        """The titular and a linked auxiliar with valid documents are allowed."""
        rows = ride("v1", "2024-03-05T15:00:00Z", "d1") + ride("v1", "2024-03-05T18:00:00Z", "d2")
        assert detect(rows).empty

    def test_unknown_driver_is_not_registered(self) -> None:
        """A driver id absent from the registry of drivers is ``not_registered``."""
        found = detect(ride("v1", "2024-03-05T15:00:00Z", "x7"))
        assert len(found) == 1
        validate_findings(found)
        details = found.iloc[0]["details"]
        assert details["reason"] == "not_registered" and details["driver_id"] == "x7"
        assert details["fixes"][0]["timestamp"] == "2024-03-05T15:00:00Z"
        assert list(found.columns[: len(FINDING_COLUMNS)]) == list(FINDING_COLUMNS)

    @pytest.mark.parametrize("written", ["D1", "D01", "d-1", " d 001 "])
    def test_registered_id_written_otherwise_is_not_judged(self, written: str) -> None:
        """'D01' for the registry's 'd1' is the two systems' codes, not an unregistered driver."""
        assert detect(ride("v1", "2024-03-05T15:00:00Z", written)).empty

    def test_cpf_with_and_without_punctuation(self) -> None:
        """A CPF written with its dots and dash in the registry and bare on the tracker."""
        registry = {
            "drivers": drivers({"driver_id": "023.456.789-09"}),
            "driver_links": links(("v1", "023.456.789-09", "titular", D(2020, 1, 1), None)),
        }
        for written in ("02345678909", "2345678909"):
            assert detect(ride("v1", "2024-03-05T15:00:00Z", written), **registry).empty
        found = detect(ride("v1", "2024-03-05T15:00:00Z", "02345678900"), **registry)
        assert found.iloc[0]["details"]["reason"] == "not_registered"

    @pytest.mark.parametrize("written", ["d10", "d3", "e1", "d1a", "1"])
    def test_other_ids_stay_unregistered(self, written: str) -> None:
        """Only case, separators and leading zeros are set aside: 'd10' is not 'd1'."""
        found = detect(ride("v1", "2024-03-05T15:00:00Z", written))
        assert found.iloc[0]["details"]["reason"] == "not_registered"

    def test_driver_of_another_prefixo_is_not_linked(self) -> None:
        """A registered driver linked only to another prefixo: ``not_linked``, with that link."""
        found = detect(ride("v1", "2024-03-05T15:00:00Z", "d9"))
        reason = found.iloc[0]["details"]["reasons"][0]
        assert reason["reason"] == "not_linked"
        assert [k["vehicle_id"] for k in reason["links_of_driver_elsewhere"]] == ["v2"]

    @pytest.mark.parametrize(("stray", "found"), [(1, 0), (2, 0), (21, 1)])
    def test_a_stray_id_in_the_titulars_ride_is_not_judged(self, stray: int, found: int) -> None:
        """d1 drives a 10-minute ride; ``stray`` of its 21 occupied fixes carry d9, a driver of
        another prefixo (a badge read wrong). An independent check had one such fix proposed
        under art. 58 VI. The trip is its majority driver's; d9 on all of it is found."""
        rows = ride("v1", "2024-03-05T15:00:00Z", "d1")
        middle = 1 + 10 - stray // 2
        for row in rows[middle : middle + stray]:
            row["driver_id"] = "d9"
        found_rows = detect(rows)
        assert len(found_rows) == found
        if found:
            assert found_rows.iloc[0]["details"]["reason"] == "not_linked"

    def test_no_driver_id_is_not_judged(self) -> None:
        """Fixes without driver_id say nothing about who drove: no finding."""
        assert detect(ride("v1", "2024-03-05T15:00:00Z", None)).empty
        pings = make_pings(ride("v1", "2024-03-05T15:00:00Z", None)).drop(columns="driver_id")
        assert detect_driver_not_allowed(pings, **REGISTRY).empty

    def test_vehicle_without_links_is_not_judged(self) -> None:
        """A prefixo with no link in the registry is not judged (the registry says nothing)."""
        assert detect(ride("v3", "2024-03-05T15:00:00Z", "x7")).empty

    def test_free_driving_is_not_service(self) -> None:
        """Without a meter trip (free fixes only) nothing is judged."""
        rows = [r | {"meter": "free"} for r in ride("v1", "2024-03-05T15:00:00Z", "x7")]
        assert detect(rows).empty

    def test_day_without_any_link_is_not_covered(self) -> None:
        """Before the prefixo's first link the registry says nothing: no ``not_linked``."""
        registry = links(("v1", "d5", "titular", D(2024, 3, 6), None))
        kw = {
            "drivers": drivers({"driver_id": "d5"}, {"driver_id": "d6"}),
            "driver_links": registry,
        }
        assert detect(ride("v1", "2024-03-05T15:00:00Z", "d6"), **kw).empty
        found = detect(ride("v1", "2024-03-06T15:00:00Z", "d6"), **kw)
        assert found.iloc[0]["details"]["reason"] == "not_linked"
        unknown = detect(ride("v1", "2024-03-05T15:00:00Z", "x7"), **kw)
        assert unknown.iloc[0]["details"]["reason"] == "not_registered"

    @pytest.mark.parametrize(
        ("start", "expected"),
        [
            ("2024-03-05T03:30:00Z", 1),  # 00:30 of 5 March in Porto Alegre: before the link
            ("2024-03-06T03:30:00Z", 0),  # 00:30 of 6 March: the link's first day, all of it
            ("2024-03-06T23:00:00Z", 0),
        ],
    )
    def test_link_counts_from_its_valid_from_day(self, start: str, expected: int) -> None:
        """Registered the same day is fine all that local day; the day before is not."""
        registry = links(
            ("v1", "d1", "titular", D(2020, 1, 1), None),
            ("v1", "d5", "auxiliar", D(2024, 3, 6), None),
        )
        found = detect(
            ride("v1", start, "d5"),
            drivers=drivers({"driver_id": "d1"}, {"driver_id": "d5"}),
            driver_links=registry,
        )
        assert len(found) == expected

    def test_link_ends_after_its_valid_until_day(self) -> None:
        """The link's last day is inclusive; the day after the driver is not linked."""
        registry = links(
            ("v1", "d1", "titular", D(2020, 1, 1), None),
            ("v1", "d5", "auxiliar", D(2024, 1, 1), D(2024, 3, 5)),
        )
        kw = {
            "drivers": drivers({"driver_id": "d1"}, {"driver_id": "d5"}),
            "driver_links": registry,
        }
        assert detect(ride("v1", "2024-03-05T20:00:00Z", "d5"), **kw).empty
        found = detect(ride("v1", "2024-03-06T20:00:00Z", "d5"), **kw)
        assert found.iloc[0]["details"]["reason"] == "not_linked"

    @pytest.mark.parametrize(
        ("document", "status", "reason"),
        [
            ("cnh", "suspensa", "cnh_suspended"),
            ("cnh", "cassada", "cnh_revoked"),
            ("ictp", "suspensa", "ictp_suspended"),
            ("ictp", "cassada", "ictp_revoked"),
        ],
    )
    def test_status_period_bars_its_days(self, document: str, status: str, reason: str) -> None:
        """A suspended or revoked CNH/ICTP bars its inclusive local dates, not the day after."""
        person = {
            "driver_id": "d1",
            f"{document}_status": status,
            f"{document}_status_since": D(2024, 3, 1),
            f"{document}_status_until": D(2024, 3, 5),
        }
        kw = {"drivers": drivers(person)}
        found = detect(ride("v1", "2024-03-05T20:00:00Z", "d1"), **kw)
        assert found.iloc[0]["details"]["reason"] == reason
        assert found.iloc[0]["confidence"] > 0.5
        assert detect(ride("v1", "2024-03-06T20:00:00Z", "d1"), **kw).empty

    def test_regular_status_bars_nothing(self) -> None:
        """A ``regular`` period is the normal state."""
        person = {"driver_id": "d1", "cnh_status": "regular", "cnh_status_since": D(2024, 1, 1)}
        assert detect(ride("v1", "2024-03-05T20:00:00Z", "d1"), drivers=drivers(person)).empty

    def test_status_without_start_weighs_less(self) -> None:
        """A period without ``since`` bars every day up to ``until`` at lower confidence."""
        known = {"driver_id": "d1", "ictp_status": "suspensa", "ictp_status_since": D(2024, 3, 1)}
        unknown = {"driver_id": "d1", "ictp_status": "suspensa"}
        rows = ride("v1", "2024-03-05T20:00:00Z", "d1")
        a = detect(rows, drivers=drivers(known)).iloc[0]["confidence"]
        b = detect(rows, drivers=drivers(unknown)).iloc[0]["confidence"]
        assert b < a

    @pytest.mark.parametrize(
        ("valid_until", "expected"),
        [(D(2024, 3, 4), 1), (D(2024, 3, 5), 0), (D(2025, 3, 5), 0)],
    )
    def test_expired_ictp(self, valid_until: dt.date, expected: int) -> None:
        """Expired the day after ``valid_until``; renewed late but valid that day is fine."""
        person = {"driver_id": "d1", "ictp_valid_until": valid_until}
        found = detect(ride("v1", "2024-03-05T20:00:00Z", "d1"), drivers=drivers(person))
        assert len(found) == expected
        if expected:
            assert found.iloc[0]["details"]["reasons"][0] == {
                "reason": "ictp_expired",
                "document": "ictp",
                "ictp_valid_until": "2024-03-04",
                "days_expired": 1,
            }

    @pytest.mark.parametrize(("valid_until", "expected"), [(D(2024, 2, 4), 0), (D(2024, 2, 3), 1)])
    def test_the_law_extends_a_document(self, valid_until: dt.date, expected: int) -> None:
        """A grace (POA art. 5º § 2º: the ICTP holds 30 days past its validity) moves the
        expiry: the 30th day after is fine, the 31st is not; the evidence shows the grace."""
        person = {"driver_id": "d1"} | dict.fromkeys(
            ("ictp_valid_until", "cnh_valid_until"), valid_until
        )
        rows = ride("v1", "2024-03-05T20:00:00Z", "d1")
        found = detect(rows, drivers=drivers(person), ictp_grace_days=30, cnh_grace_days=30)
        assert len(found) == expected
        assert len(detect(rows, drivers=drivers(person), ictp_grace_days=30)) == 1  # the CNH's
        if expected:
            details = found.iloc[0]["details"]
            assert details["reasons"][0] == {
                "reason": "ictp_expired",
                "document": "ictp",
                "ictp_valid_until": "2024-02-03",
                "days_expired": 31,
                "grace_days": 30,
            }
            assert details["thresholds"]["ictp_grace_days"] == 30

    @pytest.mark.parametrize("grace", [-1, 2.5, True, "30"])
    def test_a_grace_is_whole_days(self, grace: Any) -> None:
        with pytest.raises(ValueError, match="ictp_grace_days"):
            detect(ride("v1", "2024-03-05T20:00:00Z", "d1"), ictp_grace_days=grace)

    def test_expired_cnh_with_other_reasons_in_order(self) -> None:
        """All reasons are listed, the most serious first."""
        person = {
            "driver_id": "d9",
            "cnh_valid_until": D(2024, 1, 1),
            "ictp_valid_until": D(2024, 1, 1),
            "cnh_status": "cassada",
            "cnh_status_since": D(2024, 2, 1),
        }
        found = detect(ride("v1", "2024-03-05T20:00:00Z", "d9"), drivers=drivers(person))
        reasons = [r["reason"] for r in found.iloc[0]["details"]["reasons"]]
        assert reasons == ["cnh_revoked", "not_linked", "ictp_expired", "cnh_expired"]
        assert reasons == [r for r in REASONS if r in reasons]

    def test_third_auxiliary_beyond_the_cap(self) -> None:
        """With three auxiliares linked, the latest-linked one driving is beyond a cap of two;
        without a cap (Porto Alegre's decree sets none, the default) no one is."""
        registry = links(
            ("v1", "a1", "auxiliar", D(2024, 1, 1), None),
            ("v1", "a2", "auxiliar", D(2024, 2, 1), None),
            ("v1", "a3", "auxiliar", D(2024, 3, 1), None),
        )
        people = drivers({"driver_id": "a1"}, {"driver_id": "a2"}, {"driver_id": "a3"})
        kw = {"drivers": people, "driver_links": registry}
        rows = ride("v1", "2024-03-05T15:00:00Z", "a1") + ride("v1", "2024-03-05T18:00:00Z", "a3")
        found = detect(rows, max_auxiliaries=2, **kw)
        assert found["details"].map(lambda d: d["driver_id"]).tolist() == ["a3"]
        details = found.iloc[0]["details"]
        assert details["reason"] == "too_many_auxiliaries"
        assert details["reasons"][0]["auxiliaries_linked"] == ["a1", "a2", "a3"]
        assert detect(rows, **kw).empty
        assert detect(rows, max_auxiliaries=3, **kw).empty

    def test_one_finding_per_vehicle_day_driver(self) -> None:
        """Two rides of one driver on one day: one finding; another day or driver: another."""
        rows = (
            ride("v1", "2024-03-05T15:00:00Z", "x7")
            + ride("v1", "2024-03-05T18:00:00Z", "x7")
            + ride("v1", "2024-03-05T20:00:00Z", "x8")
            + ride("v1", "2024-03-06T15:00:00Z", "x7")
        )
        found = detect(rows)
        keys = sorted((d["local_date"], d["driver_id"], d["n_trips"]) for d in found["details"])
        assert keys == [("2024-03-05", "x7", 2), ("2024-03-05", "x8", 1), ("2024-03-06", "x7", 1)]
        assert found["finding_id"].is_unique

    def test_ride_across_midnight_needs_the_reason_on_both_days(self) -> None:
        """A link starting the next day spares a ride from 23:55 that ends after midnight."""
        registry = links(
            ("v1", "d1", "titular", D(2020, 1, 1), None),
            ("v1", "d5", "auxiliar", D(2024, 3, 6), None),
        )
        kw = {
            "drivers": drivers({"driver_id": "d1"}, {"driver_id": "d5"}),
            "driver_links": registry,
        }
        assert len(detect(ride("v1", "2024-03-06T02:00:00Z", "d5"), **kw)) == 1  # 23:00 of 5 March
        # 23:55 of 5 March to 00:15 of 6 March in Porto Alegre
        assert detect(ride("v1", "2024-03-06T02:55:00Z", "d5", minutes=20), **kw).empty

    def test_roles_of_the_database_are_read(self) -> None:
        """The stored role ``autorizatario_condutor`` reads as titular."""
        registry = links(("v1", "d1", "autorizatario_condutor", D(2020, 1, 1), None))
        found = detect(ride("v1", "2024-03-05T15:00:00Z", "d1"), driver_links=registry)
        assert found.empty

    def test_bad_registry_is_named(self) -> None:
        """A bad role or status raises FleetFrameError naming the field and the values."""
        bad_role = links(("v1", "d1", "motorista", D(2020, 1, 1), None))
        with pytest.raises(FleetFrameError, match="'role'.*titular, auxiliar"):
            detect(ride("v1", "2024-03-05T15:00:00Z", "d1"), driver_links=bad_role)
        bad = drivers({"driver_id": "d1", "cnh_status": "vencida"})
        with pytest.raises(FleetFrameError, match="'cnh_status'.*regular, suspensa, cassada"):
            detect(ride("v1", "2024-03-05T15:00:00Z", "d1"), drivers=bad)


def _stream() -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for day in ("2024-03-04", "2024-03-05", "2024-03-06"):
        rows += ride("v1", f"{day}T13:00:00Z", "x7")
        rows += ride("v1", f"{day}T16:00:00Z", "d1")
        rows += ride("v1", f"{day}T19:00:00Z", "d9", minutes=5)
        rows += ride("v2", f"{day}T14:00:00Z", "d1", step_s=45)
        rows += ride("v3", f"{day}T14:00:00Z", "x7")  # not judged: no links
    rows += ride("v1", "2024-03-07T02:55:00Z", "x7", minutes=20)  # across midnight
    return make_pings(rows)


MIDNIGHT = "2024-03-07T02:50:00Z"  # 23:50 local: v2's ride by d5, linked from the 7th


def _midnights(*, aux: bool) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`_stream` (v1's ride by x7 across midnight into the 7th), v2's ride by d5 into the
    day d5's link begins; with ``aux``, two days of auxiliares undone by the titular's ride
    later the second day, then two more (a block)."""
    params: dict[str, Any] = {
        "drivers": drivers(*({"driver_id": d} for d in ("d1", "d2", "d3", "d5", "d9"))),
        "driver_links": links(
            ("v1", "d1", "titular", D(2020, 1, 1), None),
            ("v1", "d2", "auxiliar", D(2020, 1, 1), None),
            ("v1", "d3", "auxiliar", D(2020, 1, 1), None),
            ("v2", "d9", "titular", D(2020, 1, 1), None),
            ("v2", "d5", "auxiliar", D(2024, 3, 7), None),
        ),
    }
    rows = _stream().to_dict("records") + ride("v2", MIDNIGHT, "d5", minutes=20)
    if aux:
        params["auxiliary_only_min_days"] = 2
        rows += days_of({"2024-03-08": "d2", "2024-03-09": "d3"})
        rows += ride("v1", "2024-03-09T20:00:00Z", "d1")
        rows += days_of({"2024-03-10": "d2", "2024-03-11": "d3", "2024-03-12": "d1"})
    return make_pings(rows), params


class TestKernel:
    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, over vehicles and days, the findings are the batch's."""
        batch = assert_pieces_give_batch(KERNEL, _stream(), min_findings=8, **REGISTRY)
        assert {d["local_date"] for d in batch["details"]} >= {"2024-03-04", "2024-03-06"}

    def test_day_is_emitted_once_a_later_day_begins(self) -> None:
        """Nothing is emitted during the day; the next day's first trip emits it."""
        pings = make_pings(
            ride("v1", "2024-03-05T15:00:00Z", "x7") + ride("v1", "2024-03-06T15:00:00Z", "d1")
        )
        states: dict[str, Any] = {}
        emitted = []
        for k in range(len(pings)):
            states, found = advance(KERNEL, states, pings.iloc[k : k + 1], **REGISTRY)
            emitted.append(len(found))
            states = json.loads(json.dumps(states))
        first_next = int((pings["timestamp"] >= pd.Timestamp("2024-03-06T03:00:00Z")).argmax())
        assert sum(emitted) == 1 and emitted.index(1) == first_next

    @pytest.mark.parametrize("aux", [False, True])
    def test_open_findings_only_grow(self, aux: bool) -> None:
        """Two fixes a call, a day's finding is announced from its first ended trip, under its final
        id and start, never one the day's close withdraws: not a ride still running (across
        midnight into a day a new link allows), nor an auxiliary_only block (a later ride of
        the titular that day undoes it); it ends no later than the final one."""
        pings, params = _midnights(aux=aux)
        batch = KERNEL.detect(pings, **params)
        final = {f.finding_id: f for f in batch.itertuples()}
        assert pd.Timestamp(MIDNIGHT) not in set(batch["started_at"])  # allowed on the 7th
        order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
        states: dict[str, Any] = {}
        announced: dict[str, int] = {}
        for k in range(0, len(order), 2):
            states, closed = advance(KERNEL, states, order.iloc[k : k + 2], **params)
            for f in open_findings(KERNEL, states, **params).itertuples():
                assert f.finding_id in final, (f.started_at, f.details["local_date"])
                assert f.started_at == final[f.finding_id].started_at
                assert f.ended_at <= final[f.finding_id].ended_at
                announced.setdefault(f.finding_id, k)
            for f in closed.itertuples():
                if f.details["reason"] != "auxiliary_only":
                    assert f.finding_id in announced  # announced before its day closed
            states = json.loads(json.dumps(states))
        per_day = {
            f.finding_id for f in batch.itertuples() if f.details["reason"] != "auxiliary_only"
        }
        assert set(announced) == per_day and len(per_day) >= 8
        if aux:
            assert [d["reason"] for d in batch["details"]].count("auxiliary_only") == 1


AUX = {
    "drivers": drivers(*({"driver_id": d} for d in ("d1", "d2", "d3", "d4", "d9"))),
    "driver_links": links(
        ("v1", "d1", "titular", D(2020, 1, 1), None),
        ("v1", "d2", "auxiliar", D(2020, 1, 1), None),
        ("v1", "d3", "auxiliar", D(2020, 1, 1), None),
        ("v2", "d9", "titular", D(2020, 1, 1), None),
    ),
    "auxiliary_only_min_days": 3,
}


def days_of(who: dict[str, str | None]) -> list[dict[str, Any]]:
    """One ride a day of v1 at 15:00 UTC (12:00 local), by each day's driver."""
    rows: list[dict[str, Any]] = []
    for day, driver in who.items():
        rows += ride("v1", f"{day}T15:00:00Z", driver)
    return rows


WEEK = {  # the first day of the fixes is never judged (it may be partial)
    "2024-03-03": "d1",
    "2024-03-04": "d2",
    "2024-03-05": "d3",
    "2024-03-06": "d2",
}


def aux_only(rows: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    found = detect_driver_not_allowed(make_pings(rows), **(AUX | kw))
    return [d for d in found["details"] if d["reason"] == "auxiliary_only"]


class TestAuxiliaryOnly:
    def test_three_days_of_auxiliares_only(self) -> None:
        """Three service days driven only by auxiliares, titular linked: one finding with days."""
        found = detect_driver_not_allowed(make_pings(days_of(WEEK)), **AUX)
        assert len(found) == 1
        validate_findings(found)
        details = found.iloc[0]["details"]
        assert details["reason"] == "auxiliary_only" and details["drivers"] == ["d2", "d3"]
        reason = details["reasons"][0]
        assert (reason["window_from"], reason["window_until"]) == ("2024-03-04", "2024-03-06")
        assert [d["drivers"] for d in reason["service_days"]] == [["d2"], ["d3"], ["d2"]]
        assert [k["driver_id"] for k in reason["titular_links"]] == ["d1"]
        assert found.iloc[0]["started_at"] == pd.Timestamp("2024-03-04T15:00:00Z")
        assert found.iloc[0]["confidence"] == pytest.approx(0.6)

    def test_off_unless_the_rulebook_sets_the_days(self) -> None:
        """Without auxiliary_only_min_days the rule is not judged."""
        assert aux_only(days_of(WEEK), auxiliary_only_min_days=None) == []

    def test_titular_drove_one_day(self) -> None:
        """The titular driving one service day of the window breaks it."""
        rows = days_of(WEEK | {"2024-03-05": "d1"})
        assert aux_only(rows) == []
        rows = days_of(WEEK) + ride("v1", "2024-03-05T20:00:00Z", "d1")
        assert aux_only(rows) == []

    def test_a_day_with_an_unknown_driver_breaks_the_window(self) -> None:
        """A fix without driver_id on a service day: who drove is unknown, no finding."""
        rows = days_of(WEEK)
        rows[len(rows) // 2]["driver_id"] = None
        assert aux_only(rows) == []
        assert aux_only(days_of(WEEK | {"2024-03-05": None})) == []

    def test_titular_link_started_mid_window(self) -> None:
        """A titular whose link began inside the window does not answer for the days before."""
        changed = links(
            ("v1", "d4", "titular", D(2020, 1, 1), D(2024, 3, 4)),
            ("v1", "d1", "titular", D(2024, 3, 5), None),
            ("v1", "d2", "auxiliar", D(2020, 1, 1), None),
            ("v1", "d3", "auxiliar", D(2020, 1, 1), None),
        )
        assert aux_only(days_of(WEEK), driver_links=changed) == []
        later = WEEK | {"2024-03-07": "d3"}
        found = aux_only(days_of(later), driver_links=changed, auxiliary_only_min_days=2)
        assert [(r["reasons"][0]["window_from"]) for r in found] == ["2024-03-05"]

    def test_days_without_service_do_not_break_the_window(self) -> None:
        """A day the vehicle did not serve is neutral; blocks of N service days repeat."""
        week = {"2024-03-03": "d1", "2024-03-04": "d2", "2024-03-06": "d3", "2024-03-08": "d2"}
        week |= {"2024-03-09": "d2", "2024-03-10": "d3", "2024-03-11": "d3"}
        found = aux_only(days_of(week))
        assert [r["reasons"][0]["window_until"] for r in found] == ["2024-03-08", "2024-03-11"]

    def test_auxiliar_registered_the_same_day_counts(self) -> None:
        """An auxiliar linked from the day of service is an auxiliar all that day."""
        same_day = links(
            ("v1", "d1", "titular", D(2020, 1, 1), None),
            ("v1", "d2", "auxiliar", D(2024, 3, 4), None),
            ("v1", "d3", "auxiliar", D(2020, 1, 1), None),
        )
        assert len(aux_only(days_of(WEEK), driver_links=same_day)) == 1

    def test_a_driver_of_another_prefixo_is_no_auxiliar(self) -> None:
        """A day driven by someone not linked is not_linked, never auxiliary_only."""
        found = detect_driver_not_allowed(make_pings(days_of(WEEK | {"2024-03-05": "d9"})), **AUX)
        assert [d["reason"] for d in found["details"]] == ["not_linked"]

    def test_a_ride_into_the_kept_day_is_not_found_twice(self) -> None:
        """A ride across midnight joins its day's finding; the day after, kept whole for the
        count, does not make it a second finding from that ride alone."""
        pings, params = _midnights(aux=True)
        batch = assert_pieces_give_batch(KERNEL, pings, **params)
        assert [d["local_date"] for d in batch["details"]].count("2024-03-06") == 3

    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, blocks and per-day findings are the batch's."""
        rows: list[dict[str, Any]] = []
        who = ["d1", "d2", "d3", "d2", "d9", "d3", "d2", "d2", "d3", "d1", "d2", "d3"]
        for k, driver in enumerate(who):
            day = pd.Timestamp("2024-03-03") + pd.Timedelta(days=k)
            rows += ride("v1", f"{day.date()}T15:00:00Z", driver, minutes=4, step_s=60)
        rows += ride("v1", "2024-03-12T02:50:00Z", "d3", minutes=20, step_s=120)  # midnight
        rows += ride("v2", "2024-03-06T14:00:00Z", "x7", minutes=3, step_s=60)
        batch = assert_pieces_give_batch(
            KERNEL,
            make_pings(rows),
            seeds=2,
            min_findings=4,
            **(AUX | {"auxiliary_only_min_days": 2}),
        )
        reasons = sorted(d["reason"] for d in batch["details"])
        assert reasons.count("auxiliary_only") >= 2 and "not_linked" in reasons
