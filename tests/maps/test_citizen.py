"""The citizen map renders offline and carries no personal data."""

from __future__ import annotations

import pandas as pd
import pytest
from map_factories import (
    T0,
    click_row,
    make_pings,
    make_stands,
    only_tiles_failed,
    open_offline,
    overlay_labels,
)

from api.routes.public import CELL_RESOLUTION as API_RESOLUTION
from api.routes.public import NEARBY_M as API_NEARBY_M
from api.settings import Settings
from geo.h3 import snap_to_cell_centres
from maps._errors import MapInputError
from maps.citizen import CELL_RESOLUTION, NEARBY_M, RECENT_S, TAXI_RESOLUTION, citizen_map

pytestmark = pytest.mark.browser

# Plates and ids that must never reach the page.
FLEET = pd.DataFrame(
    {
        "vehicle_id": ["ACC-101", "ACC-102", "ACC-103", "ACC-104", "STD-201"],
        "plate": ["IXA1A11", "IXB2B22", "IXC3C33", "IXD4D44", "IXE5E55"],
        "accessible": [True, True, True, True, False],
    }
)


def _pings() -> pd.DataFrame:
    return make_pings(
        [
            # inside stand 1 (Praça da Matriz), free, 2 min before "now"
            ("ACC-101", 58, -30.02771, -51.22872, "free"),
            # 300 m from stand 2, free; an older fix of the same taxi occupied
            ("ACC-102", 40, -30.0300, -51.2300, "occupied"),
            ("ACC-102", 59, -30.03271, -51.22003, "free"),
            # occupied now: not shown
            ("ACC-103", 59, -30.0350, -51.2100, "occupied"),
            # free but its latest fix is 30 min old: not shown
            ("ACC-104", 30, -30.0350, -51.2101, "free"),
            # free, not accessible: not shown
            ("STD-201", 60, -30.0350, -51.2100, "free"),
        ]
    )


class TestCitizenMap:
    def test_free_accessible_taxis_and_supply(self, open_map, tmp_path):
        """Two free accessible taxis, counted in their areas; stands 1 and 2 have supply, 3 none;
        no console error, only tiles fail; a click on a stand shows its supply."""
        html = tmp_path / "citizen.html"
        fmap = citizen_map(make_stands(), _pings(), FLEET, at=T0 + pd.Timedelta(minutes=60))
        page, errors, failed = open_offline(open_map, fmap, html)
        assert errors == []
        assert only_tiles_failed(failed)
        assert overlay_labels(page) == [
            "Pontos com táxi acessível livre por perto (2)",
            "Outros pontos de táxi (1)",
            "Táxis acessíveis livres agora (2)",
        ]
        taxis = page.evaluate("PontualMaps.maps.map.layers.taxis.spec")
        _, flat, flon = snap_to_cell_centres(
            [-30.02771, -30.03271], [-51.22872, -51.22003], resolution=CELL_RESOLUTION
        )
        _, lat, lon = snap_to_cell_centres(flat, flon, resolution=TAXI_RESOLUTION)
        centres = zip(lat.round(6).tolist(), lon.round(6).tolist(), strict=True)
        assert sorted(zip(taxis["lat"], taxis["lon"], strict=True)) == sorted(centres)
        popup = click_row(page, "stands_supply", 0)
        assert "Praça da Matriz" in popup
        assert "Táxis acessíveis livres no ponto\t1" in popup
        assert "Em até 500 m\t1" in popup

    def test_no_personal_data_in_page(self, tmp_path):
        """Neither vehicle ids nor plates nor exact positions appear anywhere in the HTML."""
        html = tmp_path / "citizen.html"
        citizen_map(make_stands(), _pings(), FLEET, tiles=None).save(str(html))
        text = html.read_text(encoding="utf-8")
        for secret in [*FLEET["vehicle_id"], *FLEET["plate"], "30.02771", "51.22872", "30.03271"]:
            assert secret not in text

    def test_taxis_in_one_cell_are_one_marker(self, open_map, tmp_path):
        """Two taxis in the same ~120 m cell (so the same area) show as one marker counting both."""
        pings = make_pings(
            [
                ("ACC-101", 59, -30.02771, -51.22872, "free"),
                ("ACC-102", 59, -30.02769, -51.22868, "free"),
            ]
        )
        fmap = citizen_map(make_stands(), pings, FLEET, tiles=None)
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "citizen.html")
        page.evaluate("PontualMaps.maps.map.layers.stands_supply.group.remove()")
        assert "2 táxis acessíveis livres" in click_row(page, "taxis", 0)
        assert errors == []

    def test_follows_the_public_api(self):
        """Grid, nearby radius and recency are the public API's."""
        assert CELL_RESOLUTION == API_RESOLUTION
        assert NEARBY_M == API_NEARBY_M
        assert Settings().public_recent_fix_s == RECENT_S

    def test_needs_the_meter(self):
        """Without the meter column nobody can be said to be free: refused."""
        with pytest.raises(MapInputError, match="meter"):
            citizen_map(make_stands(), _pings().drop(columns="meter"), FLEET)
