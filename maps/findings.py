"""The enforcement map: findings by kind, illegal-stand areas, detour evidence and a replay.

Each finding kind is its own canvas layer (a circleMarker per finding; areas and lines drawn as
shapes), toggled in the layer control. ``illegal_stand_formation`` areas are polygons. For
``longer_route`` the driven track and the reference route (``details.driven_line`` and
``details.reference_line``) are drawn in an evidence layer. A time slider replays the GPS fixes
(those of the last ``trail_s`` before the slider's instant) and the findings (from their start).
Popups are built on click from each finding's properties, so 25,000 findings open in 2 s.
Above :data:`~maps.sample.MAP_MAX_FINDINGS` findings the map draws a fixed sample of each kind
(:mod:`maps.sample`) and says so: each layer's label and legend entry give how many of how many
it shows, and a note says where every finding is (``findings.geojson``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import folium
import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from geo.calendar import DEFAULT_TIMEZONE
from maps._errors import MapInputError
from maps._layers import (
    bounds_of,
    check_columns,
    check_wgs84,
    column,
    epoch_s,
    layer_spec,
    render_layers,
)
from maps.offline import base_map
from maps.sample import kind_counts, sample_findings
from maps.tiles import OSM_ATTRIBUTION, OSM_TILES
from tracking.detectors.findings import KIND_NAMES, kind_name

_KIND_COLOURS = {
    "unlicensed_stand_use": "#d7301f",
    "habitual_absence": "#807dba",
    "illegal_stand_formation": "#e6550d",
    "longer_route": "#3182bd",
    "tracking_gap": "#636363",
    "gps_anomaly": "#969696",
    "operating_while_barred": "#a50f15",
    "inactivity": "#74c476",
    "outside_municipality": "#fd8d3c",
    "queue_jump": "#c51b8a",
    "flag2_misuse": "#fec44f",
    "driver_not_allowed": "#8c510a",
}
KIND_LABELS = {kind: (KIND_NAMES[kind], colour) for kind, colour in _KIND_COLOURS.items()}
"""pt-BR name and colour of each finding kind (``tracking.detectors.findings.KINDS``)."""
UNKNOWN_KIND_COLOUR = "#000000"
"""Colour of a kind without one (a kind added to the detectors but not here): its name stays
pt-BR (:func:`~tracking.detectors.findings.kind_name`)."""


def _kind_label(kind: str) -> tuple[str, str]:
    return KIND_LABELS.get(kind, (kind_name(kind), UNKNOWN_KIND_COLOUR))


METER_LABELS = {"free": "Livre", "occupied": "Ocupado", "off": "Desligado"}
METER_COLOURS = {"free": "#1a9850", "occupied": "#2c7fb8", "off": "#969696"}
DRIVEN_COLOUR = "#7b3294"
REFERENCE_COLOUR = "#2166ac"
FINDING_REQUIRED = ("finding_id", "kind", "started_at", "geometry")
FIX_REQUIRED = ("vehicle_id", "timestamp", "lat", "lon")

_FINDING_POPUP = {
    "type": "fields",
    "title": None,
    "fields": [
        ["finding_id", "Achado", "text"],
        ["vehicle_id", "Veículo", "text", "skip_null"],
        ["stand_id", "Ponto", "text", "skip_null"],
        ["t0", "Início", "time"],
        ["t1", "Fim", "time"],
        ["confidence", "Confiança", "pct"],
        ["resumo", "Medido", "text", "skip_null"],
    ],
}
HIDDEN_KINDS = ("gps_anomaly",)
"""Kinds whose layer starts off: GPS jumps draw long lines across the city (anomalies of the
device, not of the driver's conduct); the layer control turns them on."""


def _num(value: float, decimals: int = 0) -> str:
    text = f"{value:,.{decimals}f}"
    return text.replace(",", "\x00").replace(".", ",").replace("\x00", ".")


def _summary(kind: str, details: Any) -> str | None:
    """One pt-BR line of what was measured, with the threshold it was compared with."""
    if not isinstance(details, dict):
        return None
    limits = details.get("thresholds") or {}
    if kind == "longer_route" and details.get("driven_m") and details.get("reference_m"):
        ratio = _num(details.get("ratio", 0), 2)
        return (
            f"percorrido {_num(details['driven_m'] / 1000, 2)} km × referência "
            f"{_num(details['reference_m'] / 1000, 2)} km (razão {ratio})"
        )
    if kind == "illegal_stand_formation" and "n_vehicles" in details:
        return (
            f"{details['n_vehicles']} veículos, {details.get('n_days', '?')} dias, "
            f"{details.get('n_stops', '?')} paradas"
        )
    if kind == "gps_anomaly" and details.get("pattern") == "two_tracks":
        sizes = " e ".join(str(t.get("n_fixes", "?")) for t in details.get("tracks", []))
        return (
            f"posições alternando entre dois trajetos ({sizes} posições; "
            f"{details.get('n_anomalous_steps', '?')} trocas): dois rastreadores no mesmo prefixo"
        )
    if kind == "gps_anomaly" and "implied_speed_kmh" in details and "distance_m" in details:
        limit = limits.get("max_speed_kmh")
        return (
            f"salto de {_num(details['distance_m'] / 1000, 2)} km em "
            f"{_num(details.get('dt_s', 0))} s: {_num(details['implied_speed_kmh'])} km/h"
            + (f" (limite {_num(limit)} km/h)" if limit is not None else "")
        )
    if kind == "tracking_gap" and "gap_s" in details:
        limit = limits.get("max_gap_s")
        return f"sem posições por {_num(details['gap_s'] / 60, 1)} min" + (
            f" (limite {_num(limit / 60, 1)} min)" if limit is not None else ""
        )
    if kind == "outside_municipality" and details.get("distance_to_boundary_m") is not None:
        limit = limits.get("boundary_tolerance_m")
        return f"embarque a {_num(details['distance_to_boundary_m'])} m fora do limite" + (
            f" (tolerância {_num(limit)} m)" if limit is not None else ""
        )
    return None


def _text(values: pd.Series) -> list[Any]:
    return [
        None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
        for v in values.tolist()
    ]


STAND_COLOUR = "#bdbdbd"


def _stands_layer(stands: gpd.GeoDataFrame) -> dict[str, Any]:
    names = stands["name"] if "name" in stands.columns else stands["stand_id"]
    return layer_spec(
        layer_id="stands",
        label=f"Pontos de táxi ({len(stands)})",
        geometry=stands.geometry,
        props={"stand_id": _text(stands["stand_id"]), "name": _text(names)},
        style={"color": "#333333", "weight": 1, "fillColor": STAND_COLOUR, "fillOpacity": 0.5},
        shape_style={"fillOpacity": 0.3},
        popup={
            "type": "fields",
            "title": "name",
            "fields": [["stand_id", "Ponto nº", "text"]],
        },
        z=-2,
    )


def _shown_of(shown: int, total: int) -> str:
    """``"2.000 de 18.532"``: findings drawn of the kind's total (pt-BR thousands)."""
    return f"{shown:,} de {total:,}".replace(",", ".")


def _kind_layer(kind: str, group: gpd.GeoDataFrame, *, total: int) -> dict[str, Any]:
    label, colour = _kind_label(kind)
    details = group["details"] if "details" in group.columns else pd.Series([None] * len(group))
    ended = group["ended_at"] if "ended_at" in group.columns else group["started_at"]
    props = {
        "finding_id": _text(group["finding_id"]),
        "vehicle_id": _text(group.get("vehicle_id", pd.Series([None] * len(group)))),
        "stand_id": _text(group.get("stand_id", pd.Series([None] * len(group)))),
        "t0": epoch_s(group["started_at"]),
        "t1": epoch_s(ended),
        "confidence": column(group.get("confidence", pd.Series([np.nan] * len(group)))),
        "resumo": [_summary(kind, d) for d in details],
    }
    geometry = group.geometry
    if kind == "longer_route":
        # The trip is drawn by the evidence layer (driven vs reference); here its pickup.
        lines = shapely.get_type_id(geometry.to_numpy()) == 1
        firsts = shapely.get_point(geometry.to_numpy()[lines], 0)
        geometry = geometry.copy()
        geometry.loc[lines] = firsts
    return layer_spec(
        layer_id=f"kind:{kind}",
        label=f"{label} ({_shown_of(len(group), total) if total > len(group) else len(group)})",
        geometry=geometry,
        props=props,
        style={
            "color": colour,
            "fillColor": colour,
            "radius": 5,
            "weight": 1,
            "fillOpacity": 0.75,
            "opacity": 0.9,
        },
        shape_style={"weight": 2, "fillOpacity": 0.25},
        popup=_FINDING_POPUP | {"title_text": label},
        time={"start": "t0", "window_s": None},
        show=kind not in HIDDEN_KINDS,
    )


def _evidence_layer(routes: gpd.GeoDataFrame) -> dict[str, Any] | None:
    """Driven track and reference route of each ``longer_route`` finding, as two lines."""
    geoms: list[Any] = []
    props: dict[str, list[Any]] = {"finding_id": [], "linha": [], "colour": [], "dash": []}
    props |= {"vehicle_id": [], "t0": [], "km": []}
    starts = epoch_s(routes["started_at"])
    for fid, vehicle, t0, details in zip(
        routes["finding_id"],
        routes.get("vehicle_id", [None] * len(routes)),
        starts,
        routes["details"],
        strict=True,
    ):
        if not isinstance(details, dict):
            continue
        for key, what, colour, dash, metres in (
            ("driven_line", "Trajeto percorrido", DRIVEN_COLOUR, None, details.get("driven_m")),
            (
                "reference_line",
                "Rota de referência",
                REFERENCE_COLOUR,
                "6 4",
                details.get("reference_m"),
            ),
        ):
            coords = details.get(key)
            if not coords or len(coords) < 2:
                continue
            geoms.append(shapely.LineString(coords))
            props["finding_id"].append(str(fid))
            props["linha"].append(what)
            props["colour"].append(colour)
            props["dash"].append(dash)
            props["vehicle_id"].append(None if vehicle is None else str(vehicle))
            props["t0"].append(t0)
            props["km"].append(metres)
    if not geoms:
        return None
    n_routes = len(set(props["finding_id"]))
    return layer_spec(
        layer_id="detours",
        label=f"Evidência de desvio: trajeto × rota de referência ({n_routes})",
        geometry=gpd.GeoSeries(geoms, crs=4326),
        props=props,
        style={"weight": 3, "opacity": 0.85},
        style_by={"color": "colour", "dashArray": "dash"},
        markers=False,
        popup={
            "type": "fields",
            "title": "linha",
            "fields": [
                ["finding_id", "Achado", "text"],
                ["vehicle_id", "Veículo", "text"],
                ["km", "Extensão", "km"],
            ],
        },
        time={"start": "t0", "window_s": None},
        z=-1,
    )


def _in_order(fixes: pd.DataFrame) -> bool:
    """Whether ``fixes`` are already sorted by (vehicle_id, timestamp), without sorting them.

    Checked on Arrow's view of the ids (pandas' own checks take seconds on 10M fixes); False
    whenever unsure (null ids or instants, ids not text).
    """
    if len(fixes) < 2:
        return True
    stamps = fixes["timestamp"]
    if stamps.dtype.kind != "M" or stamps.isna().any():
        return False
    ids = pa.array(fixes["vehicle_id"], from_pandas=True)
    if ids.null_count or not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        return False
    head, tail = ids[:-1], ids[1:]
    if not pc.all(pc.less_equal(head, tail)).as_py():
        return False
    same = np.asarray(pc.equal(head, tail).to_numpy(zero_copy_only=False), dtype=bool)
    ns = pd.DatetimeIndex(stamps).asi8
    return bool(np.all(~same | (np.diff(ns) >= 0)))


def _fixes_layer(fixes: pd.DataFrame, *, trail_s: float, max_fixes: int) -> dict[str, Any]:
    check_columns(fixes, FIX_REQUIRED, what="as posições")
    total = len(fixes)
    step = int(np.ceil(total / max_fixes)) if total > max_fixes else 1
    if _in_order(fixes):  # the pings contract: take the sample, sort nothing
        frame = fixes.iloc[::step]
    else:
        frame = fixes.sort_values(["vehicle_id", "timestamp"], kind="stable").iloc[::step]
    meter = (
        frame["meter"].astype(object).where(frame["meter"].notna(), None)
        if "meter" in frame.columns
        else pd.Series([None] * len(frame), index=frame.index)
    )
    return layer_spec(
        layer_id="fixes",
        label="Posições GPS recentes",
        geometry=gpd.GeoSeries(
            gpd.points_from_xy(frame["lon"].to_numpy(), frame["lat"].to_numpy()), crs=4326
        ),
        props={
            "vehicle_id": _text(frame["vehicle_id"]),
            "t0": epoch_s(frame["timestamp"]),
            "taximetro": [METER_LABELS.get(m, "—") if m else "—" for m in meter],
            "colour": [METER_COLOURS.get(m, "#525252") if m else "#525252" for m in meter],
        },
        style={"radius": 3, "weight": 0, "fillOpacity": 0.9},
        style_by={"fillColor": "colour", "color": "colour"},
        popup={
            "type": "fields",
            "title": "vehicle_id",
            "fields": [["t0", "Instante", "time"], ["taximetro", "Taxímetro", "text"]],
        },
        time={"start": "t0", "window_s": trail_s},
        z=1,
        meta={"total": total, "shown": len(frame), "step": step},
    )


def _sample_note(shown: int, total: int, *, complete_in: str | None) -> str | None:
    """Return the legend's pt-BR note on a sampled map (None when every finding is drawn)."""
    if total <= shown:
        return None
    where = f"todos estão em {complete_in}" if complete_in else "os demais não estão no mapa"
    return (
        f"Achados: o mapa mostra {_shown_of(shown, total)}, uma amostra fixa de cada tipo "
        f"(quantos de cada tipo: na legenda e nas camadas); {where}."
    )


def findings_map(
    stands: gpd.GeoDataFrame,
    findings: gpd.GeoDataFrame,
    *,
    fixes: pd.DataFrame | None = None,
    timezone: str = DEFAULT_TIMEZONE,
    trail_s: float = 600.0,
    max_fixes: int = 50_000,
    max_findings: int | None = None,
    counts: Mapping[str, int] | None = None,
    complete_in: str | None = "findings.geojson",
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
    title: str = "Fiscalização: achados por tipo — Pontual",
) -> folium.Map:
    """Map stands and findings, one layer per kind, with detour evidence and a replay slider.

    GPS jumps (``gps_anomaly``) start hidden (:data:`HIDDEN_KINDS`); the legend has an entry
    for every layer (dimmed while it is off) and says how the replayed fixes were sampled.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (EPSG:4326): ``stand_id``, optional ``name``.
    findings : geopandas.GeoDataFrame
        Findings frame (``tracking.detectors.findings``, EPSG:4326); rows without geometry are
        not drawn. ``details`` (dicts) feed the evidence lines and the popup summary.
    fixes : pandas.DataFrame, optional
        GPS fixes (pings frame: ``vehicle_id``, ``timestamp`` tz-aware, ``lat``, ``lon``,
        optional ``meter``) replayed by the slider.
    timezone : str
        Zone of the times shown (popups, slider).
    trail_s : float
        A fix stays on the map this long after its instant while replaying.
    max_fixes : int
        At most this many fixes go into the page (every k-th fix beyond it).
    max_findings : int, optional
        At most this many findings are drawn (default
        :data:`~maps.sample.MAP_MAX_FINDINGS`); beyond it, a fixed sample of each kind
        (:func:`~maps.sample.sample_findings`), said on the page.
    counts : mapping of str to int, optional
        When ``findings`` is already a sample (:func:`~maps.sample.merge_samples`): the drawable
        findings of each kind it was drawn from.
    complete_in : str, optional
        Where every finding is, named in the note of a sampled map.
    tiles, attribution
        Tile source; None maps on a plain background.

    Returns
    -------
    folium.Map
        Self-contained map (no CDN).

    Raises
    ------
    MapInputError
        If a frame is not in EPSG:4326, lacks a column, or has naive times.
    """
    check_wgs84(stands, what="os pontos")
    check_wgs84(findings, what="os achados")
    check_columns(stands, ("stand_id", "geometry"), what="os pontos")
    check_columns(findings, FINDING_REQUIRED, what="os achados")
    if trail_s <= 0 or max_fixes <= 0:
        msg = f"trail_s ({trail_s}) e max_fixes ({max_fixes}) devem ser positivos"
        raise MapInputError(msg)
    totals = kind_counts(findings) if counts is None else dict(counts)
    drawn = sample_findings(findings, cap=max_findings, counts=totals)
    # Frame the stands (the city), not the GPS outliers that findings may point at.
    bounds = bounds_of(stands, drawn)
    centre = (
        ((bounds[0][0] + bounds[1][0]) / 2, (bounds[0][1] + bounds[1][1]) / 2)
        if bounds
        else (0.0, 0.0)
    )
    fmap = base_map(location=centre, tiles=tiles, attribution=attribution, title=title)
    layers: list[dict[str, Any]] = []
    if len(stands):
        layers.append(_stands_layer(stands))
    for kind, group in drawn.groupby("kind", sort=True):
        layers.append(_kind_layer(str(kind), group, total=totals.get(str(kind), len(group))))
    if "details" in drawn.columns:
        routes = drawn.loc[drawn["kind"] == "longer_route"]
        evidence = _evidence_layer(routes) if len(routes) else None
        if evidence is not None:
            layers.append(evidence)
    times = [t for t in epoch_s(drawn["started_at"]) if t is not None]
    times += [t for t in epoch_s(drawn.get("ended_at", drawn["started_at"])) if t is not None]
    if fixes is not None and len(fixes):
        fix_layer = _fixes_layer(fixes, trail_s=trail_s, max_fixes=max_fixes)
        layers.append(fix_layer)
        times += [t for t in fix_layer["props"]["t0"] if t is not None]
    slider = None
    if times:
        lo, hi = min(times), max(times)
        slider = {
            "title": "Replay: posições e achados até o instante",
            "min": lo,
            "max": hi,
            "step": max(1, (hi - lo) // 1000),
        }
    items: list[list[Any]] = []
    if len(stands):
        items.append([STAND_COLOUR, "Ponto de táxi", "stands"])
    shown = drawn["kind"].astype(str).value_counts()
    for kind in sorted(drawn["kind"].unique()):
        label, colour = _kind_label(str(kind))
        n, total = int(shown[str(kind)]), totals.get(str(kind), 0)
        of = f": {_shown_of(n, total)}" if total > n else ""
        off = " (camada desligada: ligue-a no controle)" if kind in HIDDEN_KINDS else ""
        items.append([colour, label + of + off, f"kind:{kind}", "dot"])
    if any(layer["id"] == "detours" for layer in layers):
        items += [
            [DRIVEN_COLOUR, "Percurso mais longo: trajeto percorrido", "detours", "line"],
            [REFERENCE_COLOUR, "Percurso mais longo: rota de referência", "detours", "dash"],
        ]
    notes = [_sample_note(len(drawn), sum(totals.values()), complete_in=complete_in)]
    fixes_spec = next((layer for layer in layers if layer["id"] == "fixes"), None)
    if fixes_spec is not None:
        items.append([None, "Posições GPS, pelo taxímetro", "fixes"])
        items += [[METER_COLOURS[m], METER_LABELS[m], "fixes", "dot"] for m in METER_COLOURS]
        items.append(["#525252", "taxímetro não informado", "fixes", "dot"])
        meta = fixes_spec["meta"]
        notes.append(
            f"Posições: as dos {trail_s / 60:.0f} min antes do instante escolhido no replay"
            + (
                f"; uma em cada {meta['step']} ({meta['shown']:,} de {meta['total']:,})".replace(
                    ",", "."
                )
                if meta["step"] > 1
                else ""
            )
            + "."
        )
    note = " ".join(n for n in notes if n) or None
    legend = {"title": "Achados por tipo", "items": items, "note": note}
    return render_layers(
        fmap,
        layers=layers,
        timezone=timezone,
        bounds=bounds,
        legend=legend if items else None,
        slider=slider,
    )
