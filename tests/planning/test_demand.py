"""Tests of planning.demand: pickups per H3 cell against stand spaces within walking distance."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from factories import offset_m

from geo import h3 as gh3
from geo._errors import InvalidResolutionError
from planning._errors import PlanningInputError
from planning.demand import candidate_sites, demand_vs_capacity, pickups_by_cell, stand_coverage
from tracking.detectors.findings import make_findings

RES = 9


def _centre() -> tuple[float, float]:
    """Centre of the res-9 cell holding the factories' origin."""
    lat0, lon0 = offset_m(0, 0)
    cell = gh3.latlng_to_cells(np.array([lat0]), np.array([lon0]), resolution=RES)
    lat, lon = gh3.cells_to_latlng(cell)
    return float(lat[0]), float(lon[0])


def _trips(points: list[tuple[float, float]]) -> pd.DataFrame:
    lat, lon = zip(*points, strict=True) if points else ((), ())
    return pd.DataFrame({"pickup_lat": list(lat), "pickup_lon": list(lon)})


def _stands(rows: list[tuple[str, float, float, float | None]]) -> gpd.GeoDataFrame:
    """Stands as small discs (3 m) at (id, lat, lon, capacity)."""
    geoms = [shapely.Point(lon, lat).buffer(0.00003) for _, lat, lon, _ in rows]
    return gpd.GeoDataFrame(
        {
            "stand_id": [r[0] for r in rows],
            "name": [f"Ponto {r[0]}" for r in rows],
            "capacity": pd.array([r[3] for r in rows], dtype="Int64"),
        },
        geometry=geoms,
        crs=4326,
    )


class TestPickupsByCell:
    def test_counts_and_skips_bad_rows(self) -> None:
        """Pickups are counted per cell; rows without a valid position are not."""
        centre = _centre()
        far = offset_m(2000, 0, origin=centre)
        trips = _trips([centre, centre, far, (float("nan"), 0.0)])
        got = pickups_by_cell(trips, resolution=RES)
        assert got["pickups"].tolist() == [2, 1]
        assert int(got["pickups"].sum()) == len(trips) - 1

    @pytest.mark.parametrize("resolution", [7, 10])
    def test_only_resolutions_8_and_9(self, resolution: int) -> None:
        """The planning grid is H3 resolution 8 or 9."""
        with pytest.raises(InvalidResolutionError, match="entre 8 e 9"):
            pickups_by_cell(_trips([_centre()]), resolution=resolution)

    def test_requires_pickup_columns(self) -> None:
        """trips without pickup_lat/pickup_lon are refused, naming the columns."""
        with pytest.raises(PlanningInputError, match="pickup_lat"):
            pickups_by_cell(pd.DataFrame({"x": [1]}), resolution=RES)


class TestDemandVsCapacity:
    def test_walking_distance_and_ranking(self) -> None:
        """A stand 387 m from the cell centre counts at 400 m, one at 417 m does not; the area
        with demand and no stand ranks first."""
        centre = _centre()
        near = offset_m(0, 390, origin=centre)
        beyond = offset_m(0, -420, origin=centre)
        lonely = offset_m(3000, 0, origin=centre)
        trips = _trips([centre] * 5 + [lonely] * 3)
        stands = _stands([("S1", *near, 3), ("S2", *beyond, 10)])
        got = demand_vs_capacity(trips, stands, resolution=RES, walk_m=400)
        assert got.crs.to_epsg() == 4326
        first, second = got.iloc[0], got.iloc[1]
        assert (first["pickups"], first["stands_nearby"], first["spaces"]) == (3, 0, 0)
        assert first["lack_score"] == pytest.approx(3.0)
        assert (second["pickups"], second["spaces"], second["stand_ids"]) == (5, 3, ("S1",))
        assert second["lack_score"] == pytest.approx(5 / 4)
        wider = demand_vs_capacity(trips, stands, resolution=RES, walk_m=450)
        row = wider[wider["pickups"] == 5].iloc[0]
        assert (row["spaces"], row["stand_ids"]) == (13, ("S1", "S2"))

    def test_unknown_capacity_counts_as_configured(self) -> None:
        """A stand without capacity counts as unknown_capacity_spaces (default 1)."""
        centre = _centre()
        trips = _trips([centre])
        stands = _stands([("S1", *centre, None)])
        assert demand_vs_capacity(trips, stands, resolution=RES)["spaces"].tolist() == [1]
        got = demand_vs_capacity(trips, stands, resolution=RES, unknown_capacity_spaces=2)
        assert got["spaces"].tolist() == [2]

    def test_no_stands_and_no_trips(self) -> None:
        """No stands: every area lacks them; no trips: an empty, typed frame."""
        empty = _stands([])
        got = demand_vs_capacity(_trips([_centre()]), empty, resolution=RES)
        assert got["spaces"].tolist() == [0] and got["stands_nearby"].tolist() == [0]
        none = demand_vs_capacity(_trips([]), _stands([("S1", *_centre(), 2)]), resolution=RES)
        assert len(none) == 0 and "lack_score" in none.columns

    def test_bad_walk(self) -> None:
        """A walking distance that is not > 0 is refused."""
        with pytest.raises(PlanningInputError, match="'walk_m' era 0"):
            demand_vs_capacity(_trips([]), _stands([]), walk_m=0)


class TestStandCoverage:
    def test_catchment_radius(self) -> None:
        """The catchment reaches walk_m beyond the stand and not much further."""
        centre = _centre()
        cover = stand_coverage(_stands([("S1", *centre, 2)]), walk_m=400)
        inside = shapely.Point(*reversed(offset_m(0, 395, origin=centre)))
        outside = shapely.Point(*reversed(offset_m(0, 415, origin=centre)))
        assert cover.geometry.iloc[0].contains(inside)
        assert not cover.geometry.iloc[0].contains(outside)


def _formation(
    place: str, lat: float, lon: float, dates: list[str], vehicles: list[str], minute: int = 0
) -> dict:
    return {
        "kind": "illegal_stand_formation",
        "vehicle_id": None,
        "stand_id": None,
        "started_at": pd.Timestamp(f"{dates[0]}T10:00Z") + pd.Timedelta(minutes=minute),
        "ended_at": pd.Timestamp(f"{dates[-1]}T11:00Z"),
        "confidence": 0.7,
        "details": {"place_id": place, "dates": dates, "vehicles": vehicles},
        "geom": shapely.Point(lon, lat).buffer(0.0002),
    }


class TestCandidateSites:
    def test_recurring_places_ranked(self) -> None:
        """Places with enough distinct days are candidates, merged across findings, ranked."""
        centre = _centre()
        other = offset_m(1500, 0, origin=centre)
        rows = [
            _formation("p1", *centre, ["2025-01-01", "2025-01-02"], ["A", "B"]),
            _formation("p1", *centre, ["2025-01-02", "2025-01-05"], ["C"]),
            _formation(
                "p2",
                *other,
                ["2025-01-01", "2025-01-02", "2025-01-03", "2025-01-04"],
                ["A"],
                minute=2,
            ),
            _formation("p3", *other, ["2025-01-01"], ["A", "B", "C"], minute=1),
        ]
        frame = pd.DataFrame(rows)
        findings = make_findings(frame.drop(columns="geom"), frame["geom"].tolist())
        areas = demand_vs_capacity(_trips([centre] * 4), _stands([]), resolution=RES)
        got = candidate_sites(findings, areas=areas, stands=_stands([("S1", *other, 2)]))
        assert got["place_id"].tolist() == ["p2", "p1"]
        assert got["n_days"].tolist() == [4, 3]
        p1 = got.iloc[1]
        assert (p1["n_findings"], p1["n_vehicles"], p1["pickups_in_cell"]) == (2, 3, 4)
        assert p1["nearest_stand_m"] == pytest.approx(1500, abs=10)
        assert got.iloc[0]["nearest_stand_m"] < 5

    def test_other_kinds_ignored(self) -> None:
        """Findings of other kinds give no candidate."""
        row = _formation("p1", *_centre(), ["2025-01-01", "2025-01-02", "2025-01-03"], ["A"])
        row["kind"] = "tracking_gap"
        row["vehicle_id"] = "A"
        frame = pd.DataFrame([row])
        findings = make_findings(frame.drop(columns="geom"), frame["geom"].tolist())
        assert len(candidate_sites(findings)) == 0
