"""One place that composes a plan from its inputs (used by ``pontual plan`` and the HTTP API)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd

from enforcement.rulebook import Planning
from fleet.dates import RegistryDateError, check_registry_date
from planning._errors import PlanningInputError
from planning.demand import (
    DEFAULT_MIN_DAYS,
    DEFAULT_RESOLUTION,
    DEFAULT_WALK_M,
    candidate_sites,
    demand_vs_capacity,
    stand_coverage,
)
from planning.population import bundled_population_table, population_for
from planning.report import build_plan
from planning.rules import bundled_planning_rule, no_rule_message, read_planning_rules
from planning.vehicles import active_fleet


def compose_plan(
    *,
    municipality: str,
    year: int = 2022,
    service: str = "taxi",
    as_of: dt.date,
    rules_path: str | Path | None = None,
    fleet: pd.DataFrame | None = None,
    fleet_source: str | None = None,
    fleet_is_active: bool = False,
    trips: pd.DataFrame | None = None,
    stands: gpd.GeoDataFrame | None = None,
    findings: gpd.GeoDataFrame | None = None,
    populations: pd.DataFrame | None = None,
    h3_resolution: int = DEFAULT_RESOLUTION,
    walk_m: float = DEFAULT_WALK_M,
    unknown_capacity_spaces: int = 1,
    min_days: int = DEFAULT_MIN_DAYS,
    top_areas: int = 10,
    due_within_days: int = 30,
) -> tuple[dict[str, Any], dict[str, gpd.GeoDataFrame | None]]:
    """Compose the plan of a municipality and the frames of its map.

    Parameters
    ----------
    municipality : str
        7-digit IBGE code.
    year : int
        2022 (Censo) or 2024 (estimate).
    service : str
        ``taxi`` or ``fretamento``.
    as_of : datetime.date
        Reference date (active status, vehicle ages, inspection validity).
    rules_path : str or pathlib.Path, optional
        TOML with a ``[planning]`` table; replaces the bundled rule.
    fleet : pandas.DataFrame, optional
        Fleet frame (``read_fleet``, or the registry's active vehicles).
    fleet_source : str, optional
        Where the fleet comes from, for the report.
    fleet_is_active : bool
        The fleet is already the active vehicles (the registry query); else they are selected.
    trips, stands, findings : optional
        ``trips.csv``, stands frame, findings frame for demand, coverage and candidate sites.
    populations : pandas.DataFrame, optional
        Population table; default the bundled IBGE files.
    h3_resolution, walk_m, unknown_capacity_spaces, min_days, top_areas, due_within_days
        See :mod:`planning.demand` and :func:`planning.report.build_plan`.

    Returns
    -------
    tuple
        The plan (JSON-ready dict) and the map frames: ``areas``, ``coverage``, ``candidates``,
        ``stands``.

    Raises
    ------
    UnknownMunicipalityError
        If the code is not an IBGE municipality.
    PlanningRulesError
        If the ``--rules`` file is invalid.
    PlanningInputError
        If ``as_of`` is outside the registry's range (:func:`fleet.dates.check_registry_date`).
    """
    try:  # the registry's range: a plan of 1900 counted today's fleet as active then
        check_registry_date(as_of, name="as_of")
    except RegistryDateError as exc:
        raise PlanningInputError(str(exc)) from None
    table = populations if populations is not None else bundled_population_table()
    population = population_for(table, municipality=municipality, year=year)
    if rules_path is not None:
        rule: Planning | None = read_planning_rules(rules_path)
        source: dict[str, Any] | None = {"file": Path(rules_path).name, "law": None}
        message = None
    else:
        rule, source = bundled_planning_rule(municipality, service=service)
        message = (
            no_rule_message(
                municipality,
                population["name"],
                service=service,
                law=source["law"] if source else None,
            )
            if rule is None
            else None
        )
    active = None
    if fleet is not None:
        active = (
            fleet
            if fleet_is_active
            else active_fleet(fleet, as_of=as_of, municipality=municipality, service=service)
        )
    areas = coverage = candidates = None
    if trips is not None:
        areas = demand_vs_capacity(
            trips,
            stands if stands is not None else _no_stands(),
            resolution=h3_resolution,
            walk_m=walk_m,
            unknown_capacity_spaces=unknown_capacity_spaces,
        )
    if stands is not None:
        coverage = stand_coverage(stands, walk_m=walk_m)
    if findings is not None:
        candidates = candidate_sites(
            findings, stands=stands, areas=areas, resolution=h3_resolution, min_days=min_days
        )
    plan = build_plan(
        population=population,
        service=service,
        rule=rule,
        rule_source=source,
        no_rule_message=message,
        fleet=active,
        fleet_source=fleet_source,
        as_of=as_of,
        areas=areas,
        candidates=candidates,
        pickups_total=None if trips is None else len(trips),
        h3_resolution=h3_resolution if trips is not None else None,
        walk_m=walk_m if trips is not None else None,
        top_areas=top_areas,
        due_within_days=due_within_days,
    )
    frames = {"areas": areas, "coverage": coverage, "candidates": candidates, "stands": stands}
    return plan, frames


def _no_stands() -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame({"stand_id": pd.Series([], dtype=object)}, geometry=[], crs=4326)
