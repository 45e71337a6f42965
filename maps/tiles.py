"""Tile source defaults (light: imported by the CLI at start-up, without folium)."""

OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
OSM_ATTRIBUTION = "&copy; colaboradores do OpenStreetMap"
