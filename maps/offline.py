"""Folium maps that work offline: Leaflet is vendored and inlined, tiles are optional.

Every map of the platform is made by :func:`base_map`. Folium's CDN links are dropped and
the vendored Leaflet (``maps/assets``) is inlined, so an exported HTML file needs no network.
Tiles are the only remote resource; when they cannot load, the layers stay visible on a plain
background.
"""

from __future__ import annotations

import base64
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import folium
from branca.element import Element, Figure
from jinja2 import Template

from maps.tiles import OSM_ATTRIBUTION, OSM_TILES

ASSETS_DIR = Path(__file__).resolve().parent / "assets"


class RawElement(Element):
    """Text put in the page as is.

    ``folium.Element(text)`` compiles ``text`` as a Jinja template at every render: seconds for
    a page's megabytes of inlined script and data, and wrong for text holding ``{{`` or ``{%``.
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def render(self, **kwargs: Any) -> str:
        """Return the text."""
        return self.text


def page_of(element: Element) -> Figure:
    """Return the page (branca's root :class:`~branca.element.Figure`) that holds ``element``."""
    root = element.get_root()
    assert isinstance(root, Figure), "element is not in a page"
    return root


@lru_cache
def _leaflet_inline() -> str:
    leaflet = ASSETS_DIR / "leaflet"
    css = (leaflet / "leaflet.css").read_text(encoding="utf-8")

    def _data_uri(match: re.Match[str]) -> str:
        png = (leaflet / match.group(1)).read_bytes()
        return f"url(data:image/png;base64,{base64.b64encode(png).decode()})"

    css = re.sub(r"url\((images/[\w.-]+\.png)\)", _data_uri, css)
    js = (leaflet / "leaflet.js").read_text(encoding="utf-8")
    background = ".leaflet-container{background:#eef1f4;}"
    return f"<style>{css}{background}</style>\n<script>{js}</script>"


_PAGE = Template(
    "<!DOCTYPE html>\n"
    '<html lang="pt-BR">\n'
    "<head>\n"
    "{% if this.title %}<title>{{this.title}}</title>{% endif %}"
    # folium's viewport forbids zooming the page (WCAG 1.4.4): people on phones may zoom
    "    {{this.header.render(**kwargs)|replace(', maximum-scale=1.0, user-scalable=no', '')}}\n"
    "</head>\n"
    "<body>\n"
    "    {{this.html.render(**kwargs)}}\n"
    "</body>\n"
    "<script>\n"
    "    {{this.script.render(**kwargs)}}\n"
    "</script>\n"
    "</html>\n"
)
"""branca's page with its language, pt-BR (branca writes a bare ``<html>``), and a viewport
that lets the page be zoomed."""


def base_map(
    *,
    location: tuple[float, float],
    zoom_start: int = 13,
    tiles: str | None = OSM_TILES,
    attribution: str = OSM_ATTRIBUTION,
    title: str = "Mapa — Pontual",
) -> folium.Map:
    """Return a folium map with Leaflet inlined and no CDN reference.

    Parameters
    ----------
    location
        Initial centre as (lat, lon).
    zoom_start
        Initial zoom level.
    tiles
        URL template of the tile source, or None for no basemap.
    attribution
        Attribution shown for the tile source.
    title
        The page's ``<title>`` (pt-BR: what the map shows).
    """
    # zoomSnap 0.25: the data framed beside the legend need not drop a whole zoom level
    fmap = folium.Map(location=list(location), zoom_start=zoom_start, tiles=None, zoom_snap=0.25)
    page = page_of(fmap)
    page.title = title
    page._template = _PAGE
    fmap.default_js = []
    fmap.default_css = []
    page.header.add_child(RawElement(_leaflet_inline()), name="leaflet_inline")
    if tiles:
        folium.TileLayer(tiles=tiles, attr=attribution, name="Mapa base", control=False).add_to(
            fmap
        )
    return fmap
