"""The citizen map's taxi layer: counts per coarse area, 5-minute ages (no browser needed)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from map_factories import T0, make_pings, make_stands

from api.routes.public import AGE_STEP_MIN as API_AGE_STEP
from api.routes.public import TAXI_RESOLUTION as API_TAXI_RESOLUTION
from geo.h3 import snap_to_cell_centres
from maps.citizen import AGE_STEP_MIN, CELL_RESOLUTION, TAXI_RESOLUTION, citizen_map

FLEET = pd.DataFrame({"vehicle_id": ["ACC-1", "ACC-2", "ACC-3"], "accessible": [True] * 3})
AT = T0 + pd.Timedelta(minutes=60)


def _layers(pings: pd.DataFrame) -> dict[str, Any]:
    html = citizen_map(make_stands(), pings, FLEET, at=AT, tiles=None).get_root().render()
    spec = json.loads(
        html.split('type="application/json"')[1].split(">", 1)[1].split("</script>")[0]
    )
    return {layer["id"]: layer for layer in spec["layers"]}


def _area_centre(lat: float, lon: float) -> tuple[float, float]:
    _, flat, flon = snap_to_cell_centres([lat], [lon], resolution=CELL_RESOLUTION)
    _, alat, alon = snap_to_cell_centres(flat, flon, resolution=TAXI_RESOLUTION)
    return round(float(alat[0]), 6), round(float(alon[0]), 6)


def test_follows_the_public_api() -> None:
    """Areas and age steps are the public API's."""
    assert (TAXI_RESOLUTION, AGE_STEP_MIN) == (API_TAXI_RESOLUTION, API_AGE_STEP) == (8, 5)


def test_taxis_are_counted_per_area_with_bucketed_ages() -> None:
    """Two taxis ≈ 300 m apart in one area are one marker at the area's centre, counting 2;
    ages of 2 and 8 minutes show as "less than 5 minutes"; a lone one 8 min old as "5"."""
    a = (-30.02771, -51.22872)
    b = (a[0], a[1] + 0.003)  # ≈ 290 m east
    assert _area_centre(*a) == _area_centre(*b)
    far = (-30.0600, -51.1700)
    taxis = _layers(
        make_pings(
            [
                ("ACC-1", 58, *a, "free"),
                ("ACC-2", 52, *b, "free"),
                ("ACC-3", 52, *far, "free"),
            ]
        )
    )["taxis"]
    markers = dict(
        zip(zip(taxis["lat"], taxis["lon"], strict=True), range(taxis["n"]), strict=True)
    )
    assert set(markers) == {_area_centre(*a), _area_centre(*far)}
    here, there = markers[_area_centre(*a)], markers[_area_centre(*far)]
    assert taxis["props"]["titulo"][here] == "2 táxis acessíveis livres"
    assert taxis["props"]["age_min"][here] == "há menos de 5 min"
    assert taxis["props"]["age_min"][there] == "há cerca de 5 min"


def test_where_a_taxi_stops_in_its_area_does_not_change_the_map() -> None:
    """A taxi at one end of its area or the other: the same taxi layer."""
    a = (-30.02771, -51.22872)
    b = (a[0], a[1] + 0.003)
    first = _layers(make_pings([("ACC-1", 58, *a, "free")]))["taxis"]
    second = _layers(make_pings([("ACC-1", 57, *b, "free")]))["taxis"]
    assert first == second
