"""Tiny hand-made frames for the map tests, and a helper that opens a map offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import folium
import geopandas as gpd
import pandas as pd
import shapely

T0 = pd.Timestamp("2024-03-04T12:00:00Z")
STANDS = (
    ("1", "Praça da Matriz", 3, -51.2287, -30.0277),
    ("2", "Mercado Público", 2, -51.2200, -30.0300),
    ("3", "Rodoviária", None, -51.2100, -30.0350),
)
TILE_HOST = "tile.openstreetmap.org"


def make_stands() -> gpd.GeoDataFrame:
    """Three stands (circles of ~60 m), one without capacity."""
    return gpd.GeoDataFrame(
        {
            "stand_id": [s[0] for s in STANDS],
            "name": [s[1] for s in STANDS],
            "capacity": pd.array([s[2] for s in STANDS], dtype="Int64"),
        },
        geometry=[shapely.Point(s[3], s[4]).buffer(0.0006) for s in STANDS],
        crs=4326,
    )


def make_visits(rows: list[tuple[str, str, int, int, bool | None]]) -> pd.DataFrame:
    """Visits from (vehicle, stand, arrived min after T0, departed min after T0, licensed)."""
    return pd.DataFrame(
        {
            "vehicle_id": [r[0] for r in rows],
            "stand_id": [r[1] for r in rows],
            "arrived_at": pd.Series([T0 + pd.Timedelta(minutes=r[2]) for r in rows]),
            "departed_at": pd.Series([T0 + pd.Timedelta(minutes=r[3]) for r in rows]),
            "dwell_s": [60.0 * (r[3] - r[2]) for r in rows],
            "licensed": pd.array([r[4] for r in rows], dtype="boolean"),
        }
    )


def make_findings(rows: list[dict[str, Any]]) -> gpd.GeoDataFrame:
    """Findings frame from dicts with ``kind``, ``geometry`` and optional fields."""
    out = []
    for i, r in enumerate(rows):
        start = T0 + pd.Timedelta(minutes=r.get("minute", i))
        out.append(
            {
                "finding_id": r.get("finding_id", f"F{i:03d}"),
                "kind": r["kind"],
                "vehicle_id": r.get("vehicle_id", "V1"),
                "stand_id": r.get("stand_id"),
                "started_at": start,
                "ended_at": start + pd.Timedelta(minutes=5),
                "confidence": r.get("confidence", 0.8),
                "details": r.get("details", {}),
                "geometry": r["geometry"],
            }
        )
    frame = pd.DataFrame(out)
    frame["started_at"] = frame["started_at"].astype("datetime64[ns, UTC]")
    frame["ended_at"] = frame["ended_at"].astype("datetime64[ns, UTC]")
    return gpd.GeoDataFrame(frame, geometry="geometry", crs=4326)


def make_pings(rows: list[tuple[str, int, float, float, str]]) -> pd.DataFrame:
    """Pings from (vehicle, minute after T0, lat, lon, meter)."""
    return pd.DataFrame(
        {
            "vehicle_id": [r[0] for r in rows],
            "timestamp": pd.Series([T0 + pd.Timedelta(minutes=r[1]) for r in rows]).astype(
                "datetime64[ns, UTC]"
            ),
            "lat": [r[2] for r in rows],
            "lon": [r[3] for r in rows],
            "meter": [r[4] for r in rows],
        }
    )


def open_offline(open_map: Any, fmap: folium.Map, path: Path) -> tuple[Any, list[str], list[str]]:
    """Save ``fmap``, open it with the ``open_map`` fixture and wait for the layers."""
    fmap.save(str(path))
    page, errors, failed = open_map(path)
    page.wait_for_function("window.PontualMaps && PontualMaps.ready")
    return page, errors, failed


def overlay_labels(page: Any) -> list[str]:
    """Texts of the layer control's overlays, trimmed."""
    labels = page.locator(".leaflet-control-layers-overlays label").all_inner_texts()
    return [t.strip() for t in labels]


def click_row(page: Any, layer_id: str, row: int) -> str:
    """Click row ``row`` of a layer where it is drawn; return the popup's text."""
    point = page.evaluate(f"PontualMaps.pagePoint({layer_id!r}, {row})")
    page.mouse.click(point["x"], point["y"])
    return str(page.wait_for_selector(".leaflet-popup-content").inner_text())


def only_tiles_failed(failed: list[str]) -> bool:
    """Whether every failed request is a tile (and there was at least one tile request)."""
    return bool(failed) and all(TILE_HOST in url for url in failed)
