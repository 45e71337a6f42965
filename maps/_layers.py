"""Canvas layers from frames: columnar data in the page, drawn and given popups by our own JS.

Folium makes one Python object and one JS statement per feature; at 50,000 findings that is a
page too slow to open. Here each layer is a compact spec (coordinate arrays and property
columns) that ``maps/assets/pontual/pontual-maps.js`` (inlined, no network) turns into
circleMarkers and shapes on one shared canvas renderer, with popups built on click, a layer
control, a legend and an optional time slider.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import folium
import geopandas as gpd
import numpy as np
import orjson
import pandas as pd
import shapely
from branca.element import MacroElement

from geo.crs import haversine_m
from maps._errors import MapInputError
from maps.offline import ASSETS_DIR, RawElement, page_of
from tracking.arrays import epoch_ns

COORD_DECIMALS = 6
"""Decimal places of coordinates in the page (≈ 0.1 m)."""


@lru_cache
def _pontual_inline() -> str:
    folder = ASSETS_DIR / "pontual"
    css = (folder / "pontual-maps.css").read_text(encoding="utf-8")
    js = (folder / "pontual-maps.js").read_text(encoding="utf-8")
    return f"<style>{css}</style>\n<script>{js}</script>"


class _Render(MacroElement):
    """Calls ``PontualMaps.render(map, spec)`` after the map is created (the spec as is)."""

    def __init__(self, spec: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._name = "PontualLayers"
        self.spec = spec

    # branca's MacroElement.render returns None but is unannotated; Element.render says str
    def render(self, **kwargs: Any) -> None:  # type: ignore[override]
        """Add the spec to the page's body and the call to its script."""
        figure, name = page_of(self), self.get_name()
        parent = self._parent
        assert parent is not None, "layers drawn before being added to a map"
        figure.html.add_child(
            RawElement(f'<script type="application/json" id="{name}">{self.spec}</script>'),
            name=name,
        )
        figure.script.add_child(
            RawElement(
                f"PontualMaps.render({parent.get_name()}, "
                f"JSON.parse(document.getElementById('{name}').textContent));"
            ),
            name=name,
        )


def _blanked(geoms: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Return a copy of the object array ``geoms`` with None (no geometry) where ``mask``."""
    out = geoms.copy()
    out[mask] = None
    return out


def check_wgs84(frame: gpd.GeoDataFrame, *, what: str) -> None:
    """Raise :class:`MapInputError` unless ``frame`` is in EPSG:4326."""
    if not isinstance(frame, gpd.GeoDataFrame) or frame.crs is None or frame.crs.to_epsg() != 4326:
        crs = getattr(frame, "crs", None)
        msg = f"{what} devem estar em EPSG:4326; recebido {crs}"
        raise MapInputError(msg)


def check_columns(frame: pd.DataFrame, columns: Sequence[str], *, what: str) -> None:
    """Raise :class:`MapInputError` naming the columns ``frame`` lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"{what} sem as colunas {', '.join(missing)}; esperado {', '.join(columns)}"
        raise MapInputError(msg)


def epoch_s(values: pd.Series) -> list[int | None]:
    """Tz-aware instants as Unix seconds (None for missing); naive input is refused."""
    if len(values) == 0:
        return []
    if not isinstance(values.dtype, pd.DatetimeTZDtype):
        msg = f"'{values.name}' é {values.dtype} sem fuso horário; esperados instantes com fuso"
        raise MapInputError(msg)
    ns = epoch_ns(values)
    seconds = ns // 1_000_000_000
    missing = values.isna().to_numpy()
    return [None if m else int(s) for s, m in zip(seconds.tolist(), missing.tolist(), strict=True)]


def column(values: Any) -> list[Any]:
    """Return a property column as JSON-ready values: NaN/NA become None, numpy scalars plain."""
    series = pd.Series(values)
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        return epoch_s(series)
    if series.dtype.kind == "f":
        arr = series.to_numpy(dtype=float)
        return [None if not np.isfinite(v) else round(float(v), 4) for v in arr.tolist()]
    out = series.astype(object).where(series.notna(), None).tolist()
    return [v.item() if isinstance(v, np.generic) else v for v in out]


def layer_spec(
    *,
    layer_id: str,
    label: str,
    geometry: gpd.GeoSeries,
    props: Mapping[str, Sequence[Any]],
    style: Mapping[str, Any],
    popup: Mapping[str, Any] | None = None,
    style_by: Mapping[str, str] | None = None,
    shape_style: Mapping[str, Any] | None = None,
    time: Mapping[str, Any] | None = None,
    show: bool = True,
    markers: bool = True,
    meta: Mapping[str, Any] | None = None,
    z: int = 0,
) -> dict[str, Any]:
    """Describe one layer for ``PontualMaps.render``.

    Parameters
    ----------
    layer_id
        Unique id of the layer in the page.
    label
        pt-BR name in the layer control (with the count, by convention).
    geometry
        One geometry per row (EPSG:4326). Points become circleMarkers; other geometries are
        drawn as shapes, and get a marker at a representative point when ``markers``.
    props
        Property columns, each as long as ``geometry`` (JSON-ready, see :func:`column`).
    style
        Leaflet path options shared by the rows (``radius`` for markers).
    popup
        ``{"type": "fields", "title": col, "fields": [[col, label, format], ...]}`` or the name
        of a JS popup renderer (``{"type": "stand"}``); None for no popup.
    style_by
        Leaflet option → property column giving it per row (e.g. ``{"fillColor": "colour"}``).
    shape_style
        Options overriding ``style`` for shapes (not markers).
    time
        ``{"start": col, "window_s": seconds or None}``: the row shows while
        ``t - window_s < start <= t`` on the time slider (None window: from ``start`` on).
    show
        Whether the layer starts visible.
    markers
        Whether non-point rows also get a marker (keeps small areas clickable at city zoom).
    meta
        Extra data for the JS popup renderer.
    z
        Drawing order: layers with a lower ``z`` are drawn first (below).
    """
    n = len(geometry)
    for name, values in props.items():
        if len(values) != n:
            msg = f"coluna '{name}' com {len(values)} valores para {n} geometrias"
            raise MapInputError(msg)
    geoms = np.asarray(geometry.to_numpy(), dtype=object)
    missing = pd.isna(geoms)
    valid = ~(missing | shapely.is_empty(_blanked(geoms, missing)))
    kinds = shapely.get_type_id(_blanked(geoms, ~valid))
    is_point = valid & (kinds == 0)
    lon = np.full(n, np.nan)
    lat = np.full(n, np.nan)
    if is_point.any():
        xy = shapely.get_coordinates(geoms[is_point])
        lon[is_point], lat[is_point] = xy[:, 0], xy[:, 1]
    shaped = valid & ~is_point
    shapes: list[Any] | None = None
    if shaped.any():
        rounded = shapely.set_precision(geoms[shaped], 10.0**-COORD_DECIMALS)
        shapes = [None] * n
        texts = shapely.to_geojson(rounded)
        for i, text in zip(np.flatnonzero(shaped).tolist(), texts, strict=True):
            shapes[i] = json.loads(text)
        if markers:
            rep = shapely.get_coordinates(shapely.point_on_surface(geoms[shaped]))
            lon[shaped], lat[shaped] = rep[:, 0], rep[:, 1]
    has_marker = np.isfinite(lon)
    spec: dict[str, Any] = {
        "id": layer_id,
        "label": label,
        "show": show,
        "n": n,
        "lon": None,
        "lat": None,
        "shapes": shapes,
        "props": {k: list(v) for k, v in props.items()},
        "style": dict(style),
        "style_by": dict(style_by or {}),
        "shape_style": dict(shape_style or {}),
        "popup": dict(popup) if popup else None,
        "time": dict(time) if time else None,
        "meta": dict(meta or {}),
        "z": z,
    }
    if has_marker.any():
        spec["lon"] = [
            round(float(x), COORD_DECIMALS) if ok else None
            for x, ok in zip(lon.tolist(), has_marker.tolist(), strict=True)
        ]
        spec["lat"] = [
            round(float(y), COORD_DECIMALS) if ok else None
            for y, ok in zip(lat.tolist(), has_marker.tolist(), strict=True)
        ]
    return spec


FRAME_REACH_M = 100_000.0
"""A map opens on the features within this distance of their median point (when any): stands of
another city in the registry (the demo's Porto beside Porto Alegre) stay on the map, off the
first view, instead of zooming the view out to a continent."""


def bounds_of(*frames: gpd.GeoDataFrame | gpd.GeoSeries | None) -> list[list[float]] | None:
    """[[south, west], [north, east]] of the first non-empty frame, or None.

    Only the frame's features within :data:`FRAME_REACH_M` of their median point are framed
    (all of them when none is).
    """
    for frame in frames:
        if frame is None or len(frame) == 0:
            continue
        geoms = frame.geometry if isinstance(frame, gpd.GeoDataFrame) else frame
        geoms = geoms[geoms.notna() & ~geoms.is_empty]
        if len(geoms):
            boxes = geoms.bounds.to_numpy(dtype=np.float64)
            x, y = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
            near = haversine_m(y, x, np.median(y), np.median(x)) <= FRAME_REACH_M
            if near.any():
                boxes = boxes[near]
            minx, miny = boxes[:, 0].min(), boxes[:, 1].min()
            maxx, maxy = boxes[:, 2].max(), boxes[:, 3].max()
            return [[float(miny), float(minx)], [float(maxy), float(maxx)]]
    return None


def render_layers(
    fmap: folium.Map,
    *,
    layers: Sequence[Mapping[str, Any]],
    timezone: str,
    bounds: list[list[float]] | None,
    legend: Mapping[str, Any] | None = None,
    slider: Mapping[str, Any] | None = None,
) -> folium.Map:
    """Inline the JS once and draw ``layers`` on ``fmap`` (see the module docstring)."""
    page_of(fmap).header.add_child(RawElement(_pontual_inline()), name="pontual_inline")
    spec = {
        "name": "map",
        "timezone": timezone,
        "layers": list(layers),
        "legend": dict(legend) if legend else None,
        "slider": dict(slider) if slider else None,
        "bounds": bounds,
    }
    # keys as text, as json.dumps makes them; NaN would be null (columns have None already)
    text = orjson.dumps(spec, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()
    fmap.add_child(_Render(text.replace("</", "<\\/")))
    return fmap
