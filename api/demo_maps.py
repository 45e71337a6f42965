"""The four maps of ``pontual demo`` (stand, enforcement, planner, citizen) and opening them.

Porto's open data has no parking licences, no stand capacities and no accessibility flag, and
its fixes are all taken with a passenger aboard. So the stand map shows queues and occupancy
without licences, and the citizen map is illustrative: one Porto taxi in ten is marked accessible
and a taxi counts as free from its drop-off (the end of a trip) on; the map says so in its legend.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CITIZEN_NOTE = (
    "Demonstração: 1 em cada 10 táxis do Porto marcado como acessível (ilustrativo); "
    "livre a partir do desembarque."
)


def demo_maps(result: Any, out: Path, *, timezone: str, tiles: str | None) -> dict[str, Path]:
    """Write the four maps of the replay into ``out``; return their paths by pt-BR label.

    Parameters
    ----------
    result : engines.pipeline.AnalysisResult
        The Porto replay.
    out : pathlib.Path
        Output folder (exists).
    timezone : str
        Zone of the times shown.
    tiles : str or None
        Tile source.
    """
    from api.cli_maps import busiest_instant
    from maps.citizen import citizen_map
    from maps.planner import planner_map
    from maps.stand import stand_map
    from planning.demand import candidate_sites, demand_vs_capacity, stand_coverage

    paths = {
        "pontos (supervisor)": out / "mapa_pontos.html",
        "fiscalização": out / "porto" / "map.html",
        "planejamento": out / "mapa_planejamento.html",
        "cidadão": out / "mapa_cidadao.html",
    }
    stand_map(
        result.stands,
        result.visits,
        at=busiest_instant(result.visits),
        occupancy=result.occupancy,
        timezone=timezone,
        tiles=tiles,
    ).save(str(paths["pontos (supervisor)"]))
    walk_m = 400.0
    areas = demand_vs_capacity(result.trips, result.stands, walk_m=walk_m)
    planner_map(
        areas=areas,
        coverage=stand_coverage(result.stands, walk_m=walk_m),
        candidates=candidate_sites(result.findings, stands=result.stands, areas=areas),
        stands=result.stands,
        walk_m=walk_m,
        tiles=tiles,
    ).save(str(paths["planejamento"]))
    pings, fleet, at = illustrative_citizen_inputs(result.pings, result.trips)
    citizen_map(
        result.stands, pings, fleet, at=at, note=CITIZEN_NOTE, timezone=timezone, tiles=tiles
    ).save(str(paths["cidadão"]))
    return paths


def illustrative_citizen_inputs(
    pings: pd.DataFrame, trips: pd.DataFrame, *, recent_s: float = 600.0
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Timestamp | None]:
    """Return illustrative citizen inputs for Porto.

    The fixes plus a ``free`` fix at each drop-off, a fleet with 1 taxi in 10 accessible, and
    the instant with the most such taxis freed within ``recent_s``.
    """
    vehicles = sorted(pings["vehicle_id"].astype(str).unique())
    accessible = set(vehicles[::10])
    fleet = pd.DataFrame(
        {"vehicle_id": vehicles, "accessible": [v in accessible for v in vehicles]}
    )
    free = pd.DataFrame(
        {
            "vehicle_id": trips["vehicle_id"].astype(str),
            "timestamp": trips["ended_at"],
            "lat": trips["dropoff_lat"],
            "lon": trips["dropoff_lon"],
            "meter": "free",
        }
    )
    fixes = pd.concat(
        [pings[["vehicle_id", "timestamp", "lat", "lon", "meter"]], free], ignore_index=True
    ).sort_values("timestamp", kind="stable", ignore_index=True)
    ends = np.sort(
        pd.DatetimeIndex(free.loc[free["vehicle_id"].isin(accessible), "timestamp"])
        .as_unit("ns")
        .asi8
    )
    if not len(ends):
        return fixes, fleet, None
    within = np.arange(len(ends)) - np.searchsorted(ends, ends - int(recent_s * 1e9), "right")
    return fixes, fleet, pd.Timestamp(int(ends[int(within.argmax())]), tz="UTC")


def has_display() -> bool:
    """Whether a browser window can be shown (a desktop session, macOS or Windows)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_in_browser(paths: list[Any]) -> None:
    """Open each map in the default browser when there is a display; never fail headless."""
    if not has_display():
        return
    for path in paths:
        try:
            webbrowser.open(Path(path).resolve().as_uri())
        except webbrowser.Error:
            return
