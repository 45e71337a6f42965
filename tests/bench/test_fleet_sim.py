"""The independent fleet simulator (fleet/simulation.py) and its black-box evaluation.

The simulator's ground truth must be self-consistent (what it calls straight is straight, an
injected boarding happens inside the stand, barred days follow the fleet file), deterministic by
seed; and ``pontual analyze`` run on a small simulated fleet must accuse none of the look-alikes.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bench import bench_fleet_eval
from fleet import sim_registry
from fleet import simulation as fleet_sim

SEED, DAYS, PREFIXOS = 11, 6, 24


@pytest.fixture(scope="module")
def sim() -> fleet_sim.Sim:
    return fleet_sim.simulate(seed=SEED, days=DAYS, n_prefixos=PREFIXOS)


@pytest.fixture(scope="module")
def files(sim: fleet_sim.Sim, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return fleet_sim.write_files(sim, tmp_path_factory.mktemp("fleet") / "in", fmt="csv")


@pytest.fixture(scope="module")
def truth(files: dict[str, Path]) -> pd.DataFrame:
    return bench_fleet_eval.read_truth(files["truth"])


@pytest.fixture(scope="module")
def scored(files: dict[str, Path], truth: pd.DataFrame) -> dict[str, Any]:
    out = files["pings"].parent.parent / "out"
    meta = pd.read_json(files["meta"], typ="series")
    bench_fleet_eval.run_analyze(files, {"as_of": meta["as_of"]}, out, jobs=1)
    return bench_fleet_eval.score(bench_fleet_eval.read_findings(out / "findings.geojson"), truth)


def _sim_t(sim: fleet_sim.Sim, ts: pd.Timestamp) -> float:
    return ts.timestamp() - fleet_sim.epoch_utc_s(sim.day0)


def _haversine_m(lat1: Any, lon1: Any, lat2: Any, lon2: Any) -> Any:
    p1, p2 = np.radians(lat1), np.radians(lat2)
    a = (
        np.sin((p2 - p1) / 2) ** 2
        + np.cos(p1) * np.cos(p2) * np.sin(np.radians(lon2 - lon1) / 2) ** 2
    )
    return 2 * 6_371_000 * np.arcsin(np.sqrt(a))


class TestSimulate:
    def test_straight_trips_within_1_03(self, sim: fleet_sim.Sim) -> None:
        """Every trip that is not an injected detour, waypoint or ring road is ≤ 1.03× straight."""
        trips = fleet_sim.trips_frame(sim)
        plain = trips[~trips["kind"].isin(["detour", "waypoint", "ring"])]
        assert len(plain) > 500
        assert (plain["driven_m"] <= 1.03 * plain["straight_m"] + 1.0).all()

    def test_detours_clearly_longer(self, sim: fleet_sim.Sim) -> None:
        """Injected detours are ≥ 1.5× the straight line and at least 1 km longer."""
        trips = fleet_sim.trips_frame(sim)
        det = trips[trips["kind"] == "detour"]
        assert len(det) >= 1
        assert (det["driven_m"] >= 1.5 * det["straight_m"]).all()
        assert (det["driven_m"] - det["straight_m"] >= 1000).all()

    def test_unlicensed_boarding_starts_inside_the_stand(
        self, sim: fleet_sim.Sim, truth: pd.DataFrame
    ) -> None:
        """An injected unlicensed boarding's first occupied fix is inside the foreign stand."""
        pos = truth[
            (truth["kind"] == "unlicensed_stand_use")
            & (truth["lookalike"] == "boarded_without_licence")
        ]
        assert len(pos) >= 1
        stands = sim.world.stands.set_index("stand_id")
        pings = sim.pings
        assert pings is not None
        inside = []
        for row in pos.itertuples():
            t0 = _sim_t(sim, row.start)
            p = pings[
                (pings["vehicle_id"] == row.vehicle_id)
                & (pings["t"] >= t0)
                & (pings["meter"] == "occupied")
            ].iloc[0]
            v = next(v for v in sim.vehicles if v.vid == row.vehicle_id)
            tx, ty = v.track.position_at(float(p["t"]))
            true_d = math.dist((tx, ty), sim.world.xy[sim.world.ids.index(row.stand_id)])
            assert true_d <= fleet_sim.STAND_RADIUS_M - 6
            assert p["t"] <= _sim_t(sim, row.end)
            st = stands.loc[row.stand_id]
            inside.append(
                _haversine_m(p["lat"], p["lon"], st["lat"], st["lon"]) <= fleet_sim.STAND_RADIUS_M
            )
        assert np.mean(inside) >= 0.5

    def test_every_foreign_boarding_is_labelled(
        self, sim: fleet_sim.Sim, truth: pd.DataFrame
    ) -> None:
        """Each trip starting inside a stand other than the vehicle's own has its truth row."""
        own = {v.vid: v.stand_id for v in sim.vehicles}
        trips = fleet_sim.trips_frame(sim)
        foreign = trips[
            trips["pickup_stand_id"].notna()
            & (trips["pickup_stand_id"] != trips["vehicle_id"].map(own))
        ]
        rows = truth[
            (truth["kind"] == "unlicensed_stand_use")
            & truth["lookalike"].isin(
                ["boarded_without_licence", "accessible_pcd_boarding", "accessible_wait"]
            )
        ]
        assert len(foreign) >= 1
        for trip in foreign.itertuples():
            at = pd.Timestamp(trip.pickup_at)
            hit = rows[
                (rows["vehicle_id"] == trip.vehicle_id)
                & (rows["stand_id"] == trip.pickup_stand_id)
                & (rows["start"] <= at)
                & (rows["end"] >= at)
            ]
            assert len(hit) == 1, trip

    def test_barred_days_follow_the_fleet_file(
        self, sim: fleet_sim.Sim, files: dict[str, Path], truth: pd.DataFrame
    ) -> None:
        """Service days that the fleet file bars are exactly the barred positives."""
        fleet = pd.read_csv(files["fleet"], dtype=str, keep_default_na=False).set_index(
            "vehicle_id"
        )

        max_age = fleet_sim.MAX_INSPECTION_AGE_DAYS

        def barred(vid: str, day: pd.Timestamp) -> bool:
            f = fleet.loc[vid]
            d = day.date().isoformat()
            if (
                f["status"] != "active"
                and (not f["status_since"] or f["status_since"] <= d)
                and (not f["status_until"] or d <= f["status_until"])
            ):
                return True
            if d < f["alvara_first_issued_on"]:
                return True
            age = (day.date() - dt.date.fromisoformat(f["last_inspection_on"])).days
            return d > f["alvara_valid_until"] or d > f["inspection_valid_until"] or age > max_age

        trips = fleet_sim.trips_frame(sim)
        local = pd.to_datetime(trips["pickup_at"]).dt.tz_convert(fleet_sim.TIMEZONE).dt.normalize()
        expected = {
            (v, d.date()) for v, d in zip(trips["vehicle_id"], local, strict=True) if barred(v, d)
        }
        pos = truth[(truth["kind"] == "operating_while_barred") & (truth["label"] == "positive")]
        got = {
            (r.vehicle_id, r.start.tz_convert(fleet_sim.TIMEZONE).date()) for r in pos.itertuples()
        }
        assert expected
        assert got == expected

    def test_silences_after_an_occupied_fix_are_injected_gaps(
        self, sim: fleet_sim.Sim, truth: pd.DataFrame
    ) -> None:
        """A silence over 300 s after an occupied fix occurs only where a gap was injected."""
        pings = sim.pings
        assert pings is not None
        gaps = truth[(truth["kind"] == "tracking_gap") & (truth["label"] == "positive")]
        assert len(gaps) >= 1
        p = pings.sort_values(["vehicle_id", "t"])
        dt = p.groupby("vehicle_id")["t"].diff().shift(-1)
        silent = p[(dt > 300) & (p["meter"] == "occupied")]
        assert len(silent) == len(gaps)
        for row in silent.itertuples():
            hit = gaps[
                (gaps["vehicle_id"] == row.vehicle_id)
                & ((gaps["start"].map(lambda x: _sim_t(sim, x)) - row.t).abs() <= 60)
            ]
            assert len(hit) == 1

    def test_every_kind_has_positives_and_lookalikes(self, truth: pd.DataFrame) -> None:
        """The truth has at least one positive and one look-alike of every finding kind."""
        for kind in bench_fleet_eval.KINDS:
            sel = truth[truth["kind"] == kind]
            assert (sel["label"] == "positive").any(), kind
            assert (sel["label"] == "negative").any(), kind
            assert set(sel.loc[sel["label"] == "negative", "lookalike"]) <= set(
                fleet_sim.LOOKALIKES[kind]
            ), kind

    def test_every_synthetic_person_is_marked(
        self, sim: fleet_sim.Sim, files: dict[str, Path]
    ) -> None:
        """Drivers are fictitious and say so; the real loaders accept every registry file."""
        from fleet.drivers import read_driver_links, read_drivers
        from fleet.ids import id_form
        from fleet.loaders import read_fleet

        drivers = read_drivers(files["drivers"])
        links = read_driver_links(files["driver_links"])
        fleet = read_fleet(files["fleet"], municipality=fleet_sim.MUNICIPALITY)
        assert len(drivers) > len(fleet) and drivers["synthetic"].eq(True).all()
        assert drivers["driver_id"].str.match(r"^SINT-C\d{4}$").all()
        assert drivers["name"].str.match(r"^Condutor Fictício \d{4}$").all()
        assert drivers["cnh_number"].str.startswith("SINT").all()
        assert set(links["driver_id"]) <= set(drivers["driver_id"])
        assert set(fleet["vehicle_id"]) == set(links["vehicle_id"])
        assert (links["role"] == "titular").sum() == len(fleet)
        assert fleet["last_inspection_on"].notna().all() and fleet["year"].notna().all()
        assert sim.pings is not None
        on_fixes = set(sim.pings["driver_id"].dropna())
        assert sim.pings["driver_id"].notna().all()
        assert all(d.upper().startswith("SINT-C") for d in on_fixes)
        unknown = on_fixes - set(drivers["driver_id"]) - {sim_registry.UNREGISTERED_ID}
        forms = {id_form(d) for d in drivers["driver_id"]}  # ids the tracker writes its own way
        assert unknown and all(d.islower() and id_form(d) in forms for d in unknown)
        text = files["provenance"].read_text(encoding="utf-8")
        assert "NENHUMA PESSOA DESTES ARQUIVOS É REAL" in text and "drivers.csv" in text

    def test_driver_stints_are_the_fixes_drivers(
        self, sim: fleet_sim.Sim, truth: pd.DataFrame
    ) -> None:
        """Each driver truth row's interval is driven by the driver its note names, alone."""
        pings = sim.pings
        assert pings is not None
        rows = truth[truth["kind"] == "driver_not_allowed"]
        assert set(rows.loc[rows["label"] == "positive", "lookalike"]) == {
            "cnh_suspended", "ictp_suspended", "ictp_expired", "cnh_expired", "not_registered",
            "not_linked",
        }  # fmt: skip
        for row in rows.itertuples():
            did = str(row.note).split()[1]
            t0, t1 = _sim_t(sim, row.start), _sim_t(sim, row.end)
            mine = pings[(pings["vehicle_id"] == row.vehicle_id) & pings["t"].between(t0, t1 - 1)]
            assert len(mine) and set(mine["driver_id"]) == {did}, row

    def test_fairness_lookalikes_are_in_the_scenario(self, truth: pd.DataFrame) -> None:
        """The registry's edge cases occur with service, so the no-accusation test covers them."""
        neg = truth[truth["label"] == "negative"]
        drivers = set(neg.loc[neg["kind"] == "driver_not_allowed", "lookalike"])
        assert set(sim_registry.DRIVER_LOOKALIKES) <= drivers
        barred = set(neg.loc[neg["kind"] == "operating_while_barred", "lookalike"])
        assert set(sim_registry.VEHICLE_LOOKALIKES) <= barred

    def test_deterministic_by_seed(self) -> None:
        """The same seed gives the same fixes and truth; another seed gives other fixes."""
        a = fleet_sim.simulate(seed=5, days=4, n_prefixos=23)
        b = fleet_sim.simulate(seed=5, days=4, n_prefixos=23)
        c = fleet_sim.simulate(seed=6, days=4, n_prefixos=23)
        assert a.pings is not None and b.pings is not None and c.pings is not None
        pd.testing.assert_frame_equal(a.pings, b.pings)
        pd.testing.assert_frame_equal(fleet_sim.truth_frame(a), fleet_sim.truth_frame(b))
        assert len(a.pings) != len(c.pings) or not a.pings.equals(c.pings)

    def test_rejects_too_short_a_period(self) -> None:
        """Fewer than 4 days cannot hold every kind and is refused."""
        with pytest.raises(ValueError, match="days was 3"):
            fleet_sim.build_sim(seed=1, days=3, n_prefixos=30)


class TestEndToEnd:
    """``pontual analyze`` on a small simulated fleet (6 days, 24 prefixos): no finding may
    accuse a look-alike (the drop-off and drive-through boardings of issue 18 and the FIFO
    head whose GPS drifts outside a small stand among them)."""

    @pytest.mark.parametrize("kind", bench_fleet_eval.KINDS)
    def test_no_false_positive(self, scored: dict[str, Any], kind: str) -> None:
        """No finding of this kind hits a negative look-alike or an unlabelled case."""
        r = scored["kinds"][kind]
        fps = [(f["finding_id"], f["lookalike"]) for f in r["fp_list"]]
        assert not fps, f"{len(fps)} false positives: {fps[:5]}"

    def test_registry_reasons_found_exactly(self, scored: dict[str, Any]) -> None:
        """Every driver and vehicle-document reason of the scenario is found, none wrongly."""
        rows = {(r["kind"], r["reason"]): r for r in scored["by_reason"]}
        for reason in (
            "cnh_suspended", "ictp_suspended", "ictp_expired", "cnh_expired", "not_registered",
            "not_linked",
        ):  # fmt: skip
            r = rows[("driver_not_allowed", reason)]
            assert r["positives"] >= 1 and r["found"] == r["positives"], r
            assert r["tp"] >= 1 and r["fp"] == 0, r
        overdue = rows[("operating_while_barred", "inspection_overdue")]
        assert overdue["positives"] >= 1 and overdue["found"] == overdue["positives"]
        assert overdue["tp"] >= 1 and overdue["fp"] == 0

    def test_run_finds_injected_violations(self, scored: dict[str, Any]) -> None:
        """The run is not vacuous: most kinds find at least one injected violation."""
        found = [k for k, r in scored["kinds"].items() if r["found"] > 0]
        assert len(found) >= 8, found

    def test_cli_rejects_no_fix(self, files: dict[str, Path], scored: dict[str, Any]) -> None:
        """Every simulated fix is accepted by the validator (rejected.csv has no rows)."""
        out = files["pings"].parent.parent / "out"
        assert len(scored["matched"]) > 0
        assert len(pd.read_csv(out / "rejected.csv")) == 0


class TestStraightTripFleet:
    def test_no_longer_route_on_straight_trips(
        self, files: dict[str, Path], tmp_path: Path
    ) -> None:
        """A fleet of straight trips (issue 18's acceptance case) gets no longer_route finding."""
        r = bench_fleet_eval.run_straight_fleet(files["stands"], tmp_path, seed=SEED)
        assert r["trips"] >= 1000
        assert r["max_straight_ratio"] <= 1.03
        assert r["findings"] == 0, r["finding_ids"][:5]
