"""The stand map (supervisors, planners): stands coloured by occupancy against capacity.

Each stand is coloured by the vehicles present at the instant ``at`` against its capacity (the
queue of :func:`stands.occupancy.present_at`). Its popup lists the queue (position, vehicle,
wait, licensed or intruder), the period's peak and mean utilisation when an occupancy table is
given (:func:`stands.occupancy.occupancy`), and a small SVG chart of each licensee's presence
day by day (:func:`stands.presence.presence`: present, operated elsewhere, not operating).
The chart is drawn in the browser from a compact code per licensee when the popup opens.
"""

from __future__ import annotations

from typing import Any

import folium
import geopandas as gpd
import numpy as np
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from maps._errors import MapInputError
from maps._layers import bounds_of, check_columns, check_wgs84, layer_spec, render_layers
from maps.offline import base_map
from maps.tiles import OSM_ATTRIBUTION, OSM_TILES
from stands.occupancy import present_at

CLASSES = (
    ("unknown", "#9e9ac8", "Com veículos, capacidade desconhecida"),
    ("empty", "#e0f3f8", "Vazio"),
    ("low", "#a6d96a", "Até 50% da capacidade"),
    ("mid", "#fee08b", "De 50% a 99%"),
    ("full", "#fc8d59", "Lotado (100%)"),
    ("over", "#d73027", "Acima da capacidade"),
)
INTRUDER_OUTLINE = "#67001f"
PRESENCE_CODES = {"present": "P", "absent": "A", "idle": "."}
"""Codes of the presence chart: at the stand; operated, not at the stand; did not operate."""
VISIT_REQUIRED = ("vehicle_id", "stand_id", "arrived_at", "departed_at")
PRESENCE_REQUIRED = ("vehicle_id", "stand_id", "date", "operated", "present")


def occupancy_class(present: int, capacity: float | None) -> str:
    """Class name of :data:`CLASSES` for ``present`` vehicles at a stand of ``capacity``."""
    if present == 0:
        return "empty"
    if capacity is None or not np.isfinite(capacity) or capacity <= 0:
        return "unknown"
    share = present / capacity
    if share < 0.5:
        return "low"
    if share < 1:
        return "mid"
    return "full" if share == 1 else "over"


def _capacities(stands: gpd.GeoDataFrame) -> np.ndarray:
    if "capacity" not in stands.columns:
        return np.full(len(stands), np.nan)
    capacities: np.ndarray = pd.to_numeric(stands["capacity"], errors="coerce").to_numpy(
        dtype=float
    )
    return capacities


def _queues(present: pd.DataFrame) -> dict[str, list[list[Any]]]:
    queues: dict[str, list[list[Any]]] = {}
    columns = ("stand_id", "position", "vehicle_id", "waited_s", "licensed")
    for stand_id, position, vehicle_id, waited_s, licensed in zip(
        *(present[c] for c in columns), strict=True
    ):
        queues.setdefault(str(stand_id), []).append(
            [
                int(position),
                str(vehicle_id),
                round(float(waited_s)),
                None if pd.isna(licensed) else bool(licensed),
            ]
        )
    return queues


def _period_stats(occupancy: pd.DataFrame | None) -> pd.DataFrame:
    if occupancy is None or occupancy.empty:
        return pd.DataFrame(columns=["peak", "peak_util", "mean_util"])
    check_columns(occupancy, ("stand_id", "vehicles_present", "utilisation"), what="a ocupação")
    grouped = occupancy.groupby(occupancy["stand_id"].astype(str))
    return pd.DataFrame(
        {
            "peak": grouped["vehicles_present"].max(),
            "peak_util": grouped["utilisation"].max(),
            "mean_util": grouped["utilisation"].mean(),
        }
    )


def presence_codes(presence: pd.DataFrame) -> tuple[list[str], dict[str, list[list[str]]]]:
    """Day labels and, per stand, ``[vehicle_id, codes]`` with one code per day.

    Codes: ``P`` present at the stand, ``A`` operated but not at the stand, ``.`` did not
    operate, a space when the licence was not valid that day.
    """
    check_columns(presence, PRESENCE_REQUIRED, what="a tabela de presença")
    if presence.empty:
        return [], {}
    dates = pd.to_datetime(presence["date"])
    days = pd.date_range(dates.min(), dates.max(), freq="D")
    day_index = ((dates - days[0]) // pd.Timedelta(days=1)).to_numpy(dtype=np.int64)
    code = np.where(
        presence["present"].to_numpy(dtype=bool),
        PRESENCE_CODES["present"],
        np.where(
            presence["operated"].to_numpy(dtype=bool),
            PRESENCE_CODES["absent"],
            PRESENCE_CODES["idle"],
        ),
    )
    rows: dict[tuple[str, str], list[str]] = {}
    for stand, vehicle, d, c in zip(
        presence["stand_id"].astype(str),
        presence["vehicle_id"].astype(str),
        day_index.tolist(),
        code.tolist(),
        strict=True,
    ):
        rows.setdefault((stand, vehicle), [" "] * len(days))[d] = c
    out: dict[str, list[list[str]]] = {}
    for (stand, vehicle), codes in sorted(rows.items()):
        out.setdefault(stand, []).append([vehicle, "".join(codes)])
    return [d.strftime("%d/%m") for d in days], out


def stand_map(
    stands: gpd.GeoDataFrame,
    visits: pd.DataFrame,
    *,
    at: Any = None,
    occupancy: pd.DataFrame | None = None,
    presence: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
    title: str = "Pontos de táxi: ocupação e fila — Pontual",
    identities: bool = True,
) -> folium.Map:
    """Map stands coloured by the vehicles present at ``at`` against capacity.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (EPSG:4326): ``stand_id``, optional ``name`` and ``capacity``.
    visits : pandas.DataFrame
        Visits (``stands.visits.detect_visits`` or ``stand_visits.csv`` parsed): ``vehicle_id``,
        ``stand_id``, ``arrived_at``, ``departed_at`` (tz-aware), optional ``licensed`` and
        ``queue_position``.
    at : str or pandas.Timestamp, optional
        Tz-aware instant of the queue; default the last departure in ``visits``.
    occupancy : pandas.DataFrame, optional
        Occupancy table of the period (peak and mean utilisation in the popup).
    presence : pandas.DataFrame, optional
        Presence table of the period (the licensees' chart).
    timezone : str
        Zone of the times shown.
    tiles, attribution
        Tile source; None maps on a plain background.
    identities : bool, default True
        False: counts only (a planner's map): no queue of prefixos, no intruders, no
        licensees' chart (``presence`` is then ignored).

    Returns
    -------
    folium.Map
        Self-contained map (no CDN).

    Raises
    ------
    MapInputError
        If stands are not in EPSG:4326 or a frame lacks a column.
    """
    check_wgs84(stands, what="os pontos")
    check_columns(stands, ("stand_id", "geometry"), what="os pontos")
    check_columns(visits, VISIT_REQUIRED, what="as visitas")
    if at is None and len(visits):
        at = visits["departed_at"].max()
    if at is not None:
        try:
            at = pd.Timestamp(at)
        except (TypeError, ValueError) as exc:
            msg = f"'at' foi {at!r}; esperado um instante ISO 8601 com fuso"
            raise MapInputError(msg) from exc
        if at.tzinfo is None:
            msg = f"'at' foi {at!r} sem fuso horário; esperado um instante com fuso"
            raise MapInputError(msg)
    present = present_at(visits, at) if at is not None and len(visits) else None
    queues = _queues(present) if present is not None else {}
    stats = _period_stats(occupancy)
    if not identities:
        presence = None
    days, licensees = presence_codes(presence) if presence is not None else ([], {})

    ids = stands["stand_id"].astype(str).tolist()
    names = (
        stands["name"].astype(object).where(stands["name"].notna(), None).tolist()
        if "name" in stands.columns
        else [None] * len(ids)
    )
    capacity = _capacities(stands)
    n_present = [len(queues.get(s, [])) for s in ids]
    if not identities:
        queues = {}
    intruders = [sum(q[3] is False for q in queues.get(s, [])) for s in ids]
    classes = [
        occupancy_class(n, None if np.isnan(c) else float(c))
        for n, c in zip(n_present, capacity, strict=True)
    ]
    colours = dict((name, colour) for name, colour, _ in CLASSES)

    def stat(name: str) -> list[Any]:
        values = stats[name].reindex(ids) if name in stats else pd.Series([None] * len(ids))
        return [None if pd.isna(v) else round(float(v), 3) for v in values]

    props = {
        "stand_id": ids,
        "name": [n if n else s for n, s in zip(names, ids, strict=True)],
        "capacity": [None if np.isnan(c) else int(c) for c in capacity],
        "n_present": n_present,
        "intruders": intruders if identities else [None] * len(ids),
        "util": [
            None if np.isnan(c) or c <= 0 else round(n / c, 3)
            for n, c in zip(n_present, capacity, strict=True)
        ],
        "queue": [queues.get(s, []) for s in ids],
        "peak": stat("peak"),
        "peak_util": stat("peak_util"),
        "mean_util": stat("mean_util"),
        "licensees": [licensees.get(s, []) for s in ids],
        "colour": [colours[c] for c in classes],
        "outline": [INTRUDER_OUTLINE if k else "#333333" for k in intruders],
        "weight": [3 if k else 1 for k in intruders],
    }
    at_s = int(at.value // 1_000_000_000) if at is not None else None
    layer = layer_spec(
        layer_id="stands",
        label=f"Pontos de táxi ({len(stands)})",
        geometry=stands.geometry,
        props=props,
        style={"radius": 7, "fillOpacity": 0.9, "opacity": 1},
        shape_style={"fillOpacity": 0.5},
        style_by={"fillColor": "colour", "color": "outline", "weight": "weight"},
        popup={"type": "stand"},
        meta={"at": at_s, "days": days, "has_presence": presence is not None},
    )
    bounds = bounds_of(stands)
    centre = (
        ((bounds[0][0] + bounds[1][0]) / 2, (bounds[0][1] + bounds[1][1]) / 2)
        if bounds
        else (0.0, 0.0)
    )
    fmap = base_map(location=centre, tiles=tiles, attribution=attribution, title=title)
    used = [c for c in CLASSES if c[0] in set(classes)] or list(CLASSES)
    legend = {
        "title": "Ocupação agora × capacidade",
        "items": [[None, "Pontos de táxi (cor: veículos agora)", "stands"]]
        + [[colour, label, "stands", "dot"] for _, colour, label in used]
        + (
            [[INTRUDER_OUTLINE, "Contorno grosso: intrusos no ponto", "stands", "line"]]
            if identities
            else []
        ),
        "note": "Instante: "
        + (at.tz_convert(timezone).strftime("%d/%m/%Y %H:%M") if at is not None else "—"),
    }
    return render_layers(fmap, layers=[layer], timezone=timezone, bounds=bounds, legend=legend)
