"""The enforcement map of a run: stands, and findings by kind, each kind in its own layer."""

from __future__ import annotations

import folium
import geopandas as gpd

from maps.offline import OSM_ATTRIBUTION, OSM_TILES, base_map

KIND_LABELS = {
    "unlicensed_stand_use": ("Embarque em ponto sem licença", "#d7301f"),
    "habitual_absence": ("Ausência habitual do ponto", "#807dba"),
    "illegal_stand_formation": ("Formação de ponto irregular", "#e6550d"),
    "longer_route": ("Percurso mais longo", "#3182bd"),
    "tracking_gap": ("Falha de rastreamento", "#636363"),
    "gps_anomaly": ("Salto de GPS impossível", "#969696"),
    "operating_while_barred": ("Operação irregular (situação/documentos)", "#a50f15"),
    "inactivity": ("Inatividade", "#74c476"),
    "outside_municipality": ("Embarque fora do município", "#fd8d3c"),
    "queue_jump": ("Desrespeito à fila", "#c51b8a"),
    "flag2_misuse": ("Bandeira 2 indevida", "#fec44f"),
}


def findings_map(
    stands: gpd.GeoDataFrame,
    findings: gpd.GeoDataFrame,
    *,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
) -> folium.Map:
    """Map stands and findings, one toggleable layer per finding kind.

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands frame (EPSG:4326).
    findings : geopandas.GeoDataFrame
        Findings frame (``tracking.detectors.findings``); rows without geometry are not drawn.
    tiles, attribution
        Tile source; None maps on a plain background.
    """
    drawn = findings.loc[findings.geometry.notna() & ~findings.geometry.is_empty]
    # Frame the stands (the city), not the GPS outliers that findings may point at.
    framing = stands.geometry if len(stands) else drawn.geometry
    minx, miny, maxx, maxy = framing.total_bounds if len(framing) else (0.0, 0.0, 0.0, 0.0)
    fmap = base_map(
        location=((miny + maxy) / 2, (minx + maxx) / 2), tiles=tiles, attribution=attribution
    )
    if len(stands):
        layer = folium.FeatureGroup(name=f"Pontos de táxi ({len(stands)})")
        folium.GeoJson(
            stands[["stand_id", "name", "geometry"]].to_json(),
            style_function=lambda _: {"color": "#333333", "weight": 1, "fillOpacity": 0.3},
            tooltip=folium.GeoJsonTooltip(["stand_id", "name"], aliases=["Ponto nº", "Nome"]),
        ).add_to(layer)
        layer.add_to(fmap)
    for kind, group in drawn.groupby("kind", sort=True):
        label, colour = KIND_LABELS.get(str(kind), (str(kind), "#000000"))
        frame = group[
            ["finding_id", "vehicle_id", "stand_id", "started_at", "confidence", "geometry"]
        ].copy()
        frame["started_at"] = frame["started_at"].dt.strftime("%Y-%m-%d %H:%M UTC")
        frame["confidence"] = frame["confidence"].round(2)
        frame["vehicle_id"] = frame["vehicle_id"].fillna("—")
        frame["stand_id"] = frame["stand_id"].fillna("—")
        layer = folium.FeatureGroup(name=f"{label} ({len(frame)})")
        folium.GeoJson(
            frame.to_json(),
            marker=folium.CircleMarker(radius=5, weight=1, fill=True),
            style_function=lambda _, c=colour: {
                "color": c,
                "fillColor": c,
                "weight": 3,
                "fillOpacity": 0.5,
                "opacity": 0.8,
            },
            popup=folium.GeoJsonPopup(
                ["finding_id", "vehicle_id", "stand_id", "started_at", "confidence"],
                aliases=["Achado", "Veículo", "Ponto", "Início", "Confiança"],
            ),
        ).add_to(layer)
        layer.add_to(fmap)
    folium.LayerControl(collapsed=False).add_to(fmap)
    if len(framing):
        fmap.fit_bounds([[miny, minx], [maxy, maxx]])
    return fmap
