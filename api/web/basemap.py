"""The maps' background, one for every map of the console (``static/js/mapa-base.js``).

With ``PONTUAL_TILES_URL`` set (a ``{z}/{x}/{y}`` tile template), the maps draw those tiles and
the pages' CSP allows the tile server's origin in ``img-src``; otherwise they draw the offline
basemap of :mod:`maps.basemap` (municipal boundaries, the bundled road network where there is
one) from ``GET /mapa-base.geojson?bbox=…``: public (no personal data), the box widened to a
grid and its answer cached in the process.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import APIRouter, Query
from starlette.responses import Response

from api.errors import error_response
from api.settings import Settings
from maps.basemap import BasemapBoxError, basemap_json, parse_box, snap_box

router = APIRouter(include_in_schema=False)

BASEMAP_PATH = "/mapa-base.geojson"


@dataclass(frozen=True)
class BasemapConfig:
    """What a page tells ``mapa-base.js`` (a ``<meta>`` of ``base.html``) and its legend."""

    tiles_url: str
    attribution: str
    data_url: str = BASEMAP_PATH

    @property
    def origin(self) -> str | None:
        """The tile server's origin (``https://host[:port]``), None without tiles."""
        if not self.tiles_url:
            return None
        parts = urlsplit(self.tiles_url)
        return f"{parts.scheme}://{parts.netloc}"


def basemap_config(settings: Settings) -> BasemapConfig:
    """Return the maps' background of ``settings`` (tiles, or the offline basemap)."""
    return BasemapConfig(tiles_url=settings.tiles_url, attribution=settings.tiles_attribution)


@router.get(BASEMAP_PATH, name="web_basemap")
async def basemap(bbox: str = Query(default="", max_length=200)) -> Response:
    """Answer the offline basemap inside ``bbox`` (``lon_min,lat_min,lon_max,lat_max``)."""
    try:
        box = snap_box(parse_box(bbox))
    except BasemapBoxError as exc:
        return error_response(422, "invalid_request", str(exc))
    # the first call reads the bundled files (~2 s): off the event loop
    body = await asyncio.to_thread(basemap_json, box)
    return Response(body, media_type="application/geo+json")
