"""The offline basemap of the console's maps (maps.basemap): boxes, clipping, road classes."""

from __future__ import annotations

import json

import pytest
import shapely

from maps.basemap import (
    ALL_ROADS_MAX_DEG,
    ATTRIBUTION_IBGE,
    ATTRIBUTION_OSM,
    BasemapBoxError,
    basemap_features,
    basemap_json,
    bundled_basemap,
    parse_box,
    snap_box,
)

PORTO_CENTRE = (-8.62, 41.14, -8.60, 41.16)
POA_CENTRE = (-51.25, -30.05, -51.20, -30.00)


def _layers(collection: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for feature in collection["features"]:
        props = feature["properties"]
        key = props["layer"] if props["layer"] != "road" else f"road:{props['class']}"
        out.setdefault(key, []).append(feature)
    return out


class TestBox:
    def test_parse_reads_four_numbers(self) -> None:
        """'lon_min,lat_min,lon_max,lat_max' becomes four floats in that order."""
        assert parse_box("-51.25,-30.05,-51.2,-30") == (-51.25, -30.05, -51.2, -30.0)

    @pytest.mark.parametrize(
        ("text", "words"),
        [
            ("", "quatro números"),
            ("1,2,3", "quatro números"),
            ("a,b,c,d", "quatro números"),
            ("nan,1,2,3", "quatro números"),
            ("-51,-30,-52,-29", "mínimo antes do máximo"),
            ("-51,-95,-50,-29", "latitudes entre -90 e 90"),
            ("-181,-40,-50,-10", "longitudes entre -180 e 180"),
        ],
    )
    def test_parse_refuses_a_bad_box_in_portuguese(self, text: str, words: str) -> None:
        """A malformed, inverted, out-of-range or too wide box: BasemapBoxError naming bbox."""
        with pytest.raises(BasemapBoxError, match="bbox") as info:
            parse_box(text)
        assert words in str(info.value)

    def test_snap_widens_to_a_shared_grid(self) -> None:
        """The snapped box holds the asked one, and two nearby views snap to the same box."""
        step = 2.0**-9  # the grid of a box ~0.03° wide (in Porto Alegre)
        asked = (-26230.4 * step, -15381.4 * step, -26215.6 * step, -15371.6 * step)
        moved = tuple(v + 0.2 * step for v in asked)
        a = snap_box(asked)
        assert a == snap_box(moved)  # type: ignore[arg-type]
        assert a == (-26231 * step, -15382 * step, -26215 * step, -15371 * step)
        assert shapely.box(*a).covers(shapely.box(*asked))


class TestFeatures:
    def test_porto_centre_has_both_road_classes_clipped_to_the_box(self) -> None:
        """Central Porto: local and main roads of the bundled OSM network, inside the box,
        credited to OpenStreetMap, over the district's surface."""
        found = basemap_features(bundled_basemap(), PORTO_CENTRE)
        layers = _layers(found)
        assert {"road:local", "road:principal", "area"} <= set(layers)
        assert ATTRIBUTION_OSM in found["attribution"]
        box = shapely.box(*PORTO_CENTRE).buffer(1e-5)
        for feature in layers["road:local"] + layers["road:principal"]:
            geometry = shapely.from_geojson(json.dumps(feature["geometry"]))
            assert geometry.geom_type in ("LineString", "MultiLineString")
            assert box.covers(geometry)

    def test_a_wide_box_keeps_main_roads_only(self) -> None:
        """A box wider than ALL_ROADS_MAX_DEG over Porto has main roads and no local ones."""
        west, south = -8.70, 41.10
        wide = (west, south, west + 2 * ALL_ROADS_MAX_DEG, south + ALL_ROADS_MAX_DEG)
        layers = _layers(basemap_features(bundled_basemap(), wide))
        assert "road:principal" in layers and "road:local" not in layers

    def test_porto_alegre_has_its_ibge_boundary_and_no_roads(self) -> None:
        """Porto Alegre has no bundled network: its surface and boundary line only (IBGE)."""
        found = basemap_features(bundled_basemap(), (-51.3, -30.1, -51.1, -29.9))
        layers = _layers(found)
        assert set(layers) == {"area", "limit"}
        assert {f["properties"]["name"] for f in layers["limit"]} == {"Porto Alegre"}
        assert found["attribution"] == ATTRIBUTION_IBGE

    def test_a_world_view_gets_the_boundaries_alone(self) -> None:
        """The whole world (a map zoomed out): every bundled boundary, no road, small."""
        found = basemap_features(bundled_basemap(), (-180.0, -85.0, 180.0, 85.0))
        layers = _layers(found)
        assert set(layers) == {"area", "limit"}
        assert len(layers["area"]) == len(bundled_basemap().areas)
        assert len(json.dumps(found)) < 20_000

    def test_the_open_sea_is_empty(self) -> None:
        """A box far from every bundled file answers no feature and no attribution."""
        found = basemap_features(bundled_basemap(), (-30.0, -20.0, -29.9, -19.9))
        assert found["features"] == [] and found["attribution"] == ""

    def test_json_is_compact_and_rounded(self) -> None:
        """The cached JSON of a city-wide box stays small, coordinates at 5 decimals."""
        text = basemap_json(snap_box(PORTO_CENTRE))
        assert len(text) < 150_000
        coordinates = json.loads(text)["features"][-1]["geometry"]["coordinates"]
        first = coordinates[0][0] if isinstance(coordinates[0][0], list) else coordinates[0]
        assert all(len(repr(v).split(".")[1]) <= 5 for v in first)
