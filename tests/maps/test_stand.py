"""The stand map renders offline: occupancy colours, queue, intruders, presence chart."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from map_factories import (
    T0,
    click_row,
    make_stands,
    make_visits,
    only_tiles_failed,
    open_offline,
    overlay_labels,
)

from maps._errors import MapInputError
from maps.stand import CLASSES, occupancy_class, presence_codes, stand_map
from stands.occupancy import occupancy

pytestmark = pytest.mark.browser

COLOURS = {name: colour for name, colour, _ in CLASSES}


def _visits() -> pd.DataFrame:
    # At T0+30 min: stand 1 (capacity 3) has A, B (licensed) and X (intruder); stand 2
    # (capacity 2) has C; stand 3 (no capacity) has D.
    return make_visits(
        [
            ("A", "1", 0, 40, True),
            ("X", "1", 10, 35, False),
            ("B", "1", 20, 60, True),
            ("C", "2", 25, 50, True),
            ("D", "3", 29, 31, None),
            ("E", "2", 0, 5, True),
        ]
    )


def _presence() -> pd.DataFrame:
    days = pd.to_datetime(["2024-03-02", "2024-03-03", "2024-03-04"])
    rows = []
    for vehicle, present, operated in (
        ("A", (True, False, True), (True, True, True)),
        ("B", (False, False, True), (False, True, True)),
    ):
        for d, p, o in zip(days, present, operated, strict=True):
            rows.append(
                {"vehicle_id": vehicle, "stand_id": "1", "date": d, "operated": o, "present": p}
            )
    return pd.DataFrame(rows)


class TestOccupancyClass:
    @pytest.mark.parametrize(
        ("present", "capacity", "expected"),
        [
            (2, None, "unknown"),
            (0, None, "empty"),
            (1, 0.0, "unknown"),
            (0, 3.0, "empty"),
            (1, 3.0, "low"),
            (2, 3.0, "mid"),
            (3, 3.0, "full"),
            (4, 3.0, "over"),
        ],
    )
    def test_classes(self, present, capacity, expected):
        """Vehicles present against capacity fall in the documented class."""
        assert occupancy_class(present, capacity) == expected


class TestPresenceCodes:
    def test_codes_per_licensee(self):
        """One code a day: P present, A operated elsewhere, '.' idle; days as dd/mm."""
        days, codes = presence_codes(_presence())
        assert days == ["02/03", "03/03", "04/03"]
        assert codes == {"1": [["A", "PAP"], ["B", ".AP"]]}


class TestStandMap:
    def test_offline_colours_queue_and_chart(self, open_map, tmp_path):
        """No console error, only tiles fail; stands coloured by occupancy now; a click on a
        stand opens its popup with the queue, the intruder and the presence chart."""
        visits = _visits()
        at = T0 + pd.Timedelta(minutes=30)
        occ = occupancy(visits, make_stands(), bucket="15min")
        fmap = stand_map(make_stands(), visits, at=at, occupancy=occ, presence=_presence())
        page, errors, failed = open_offline(open_map, fmap, tmp_path / "stand.html")
        assert errors == []
        assert only_tiles_failed(failed)
        assert overlay_labels(page) == ["Pontos de táxi (3)"]
        spec = page.evaluate("PontualMaps.maps.map.layers.stands.spec.props")
        assert spec["n_present"] == [3, 1, 1]
        assert spec["intruders"] == [1, 0, 0]
        assert spec["colour"] == [COLOURS["full"], COLOURS["mid"], COLOURS["unknown"]]
        popup = click_row(page, "stands", 0)
        assert "Praça da Matriz" in popup
        assert "3 veículos — 100%" in popup
        lines = [line for line in popup.splitlines() if line.startswith(("1º", "2º", "3º"))]
        assert [line.split("\t")[1] for line in lines] == ["A", "X", "B"]
        assert "intruso (sem licença)" in lines[1]
        assert "Pico no período" in popup
        chart = page.locator(".leaflet-popup-content svg.pontual-chart")
        assert chart.locator("rect[fill='#1a9850']").count() == 3 + 1  # 3 present days + key
        assert "Presença dos licenciados por dia, de 02/03 a 04/03" in popup

    def test_a_planner_s_map_has_counts_only(self, open_map, tmp_path):
        """``identities=False`` (a planner): the same counts and colours, and no prefixo, no
        intruder, no licensees' chart anywhere in the page (planners size the fleet)."""
        at = T0 + pd.Timedelta(minutes=30)
        fmap = stand_map(
            make_stands(), _visits(), at=at, presence=_presence(), identities=False, tiles=None
        )
        page, errors, _ = open_offline(open_map, fmap, tmp_path / "stand.html")
        spec = page.evaluate("PontualMaps.maps.map.layers.stands.spec.props")
        sent = page.evaluate("JSON.stringify(PontualMaps.maps.map.layers.stands.spec)")
        assert not any(f'"{v}"' in sent for v in "ABCDEX"), sent
        assert spec["intruders"] == [None, None, None]
        assert spec["n_present"] == [3, 1, 1]
        assert spec["colour"] == [COLOURS["full"], COLOURS["mid"], COLOURS["unknown"]]
        assert spec["queue"] == [[], [], []] and spec["licensees"] == [[], [], []]
        popup = click_row(page, "stands", 0)
        assert "3 veículos — 100%" in popup
        assert "Intrusos" not in popup and "Nenhum veículo" not in popup
        assert page.locator(".leaflet-popup-content svg").count() == 0
        assert errors == []

    def test_default_instant_and_no_presence(self, open_map, tmp_path):
        """Without ``at`` the queue is the one at the last departure; no chart without presence."""
        page, errors, failed = open_offline(
            open_map, stand_map(make_stands(), _visits(), tiles=None), tmp_path / "stand.html"
        )
        spec = page.evaluate("PontualMaps.maps.map.layers.stands.spec.props")
        assert spec["n_present"] == [1, 0, 0]  # B departs last, at T0+60 min
        popup = click_row(page, "stands", 1)
        assert "Nenhum veículo no ponto" in popup
        assert page.locator(".leaflet-popup-content svg").count() == 0
        assert errors == [] and failed == []

    def test_rejects_naive_instant(self):
        """A naive ``at`` is refused with a clear message."""
        with pytest.raises(MapInputError, match="sem fuso"):
            stand_map(make_stands(), _visits(), at=dt.datetime(2024, 3, 4, 12, 30))

    def test_rejects_missing_columns(self):
        """Visits without ``departed_at`` are refused, naming the column."""
        with pytest.raises(MapInputError, match="departed_at"):
            stand_map(make_stands(), _visits().drop(columns="departed_at"))
