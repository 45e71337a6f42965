"""Screenshots of the demo's maps for docs/, offline (no tiles), in headless Chromium.

Run after ``make demo`` (or ``pontual demo --tiles none --out DIR``)::

    .venv/bin/python scripts/demo_screenshots.py [--demo out/demo] [--docs docs]

Writes ``docs/demo-porto-{boardings,findings,enforcement,stands,planner,citizen}.png``
(1200 x 800). Chromium is Debian's (``PONTUAL_CHROMIUM``, default ``/usr/bin/chromium``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("PONTUAL_CHROMIUM", "/usr/bin/chromium"))


def _busiest_row(page: Any, layer: str, column: str) -> int:
    values = page.evaluate(f"PontualMaps.maps.map.layers[{layer!r}].spec.props[{column!r}]")
    return max(range(len(values)), key=lambda i: values[i] or 0)


def _click(page: Any, layer: str, row: int) -> None:
    point = page.evaluate(f"PontualMaps.pagePoint({layer!r}, {row})")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector(".leaflet-popup-content")


def _stand_popup(page: Any) -> None:
    _click(page, "stands", _busiest_row(page, "stands", "n_present"))


def _cell_popup(page: Any) -> None:
    for layer in ("stands", "coverage"):
        page.evaluate(f"void PontualMaps.maps.map.layers[{layer!r}].group.remove()")
    cells = page.evaluate("PontualMaps.maps.map.layers['cells'].spec")
    row = max(range(len(cells["props"]["pickups"])), key=lambda i: cells["props"]["pickups"][i])
    shape = cells["shapes"][row]["coordinates"][0]
    lon = sum(p[0] for p in shape) / len(shape)
    lat = sum(p[1] for p in shape) / len(shape)
    point = page.evaluate(
        "([lat, lon]) => { const m = PontualMaps.maps.map.map;"
        " const p = m.latLngToContainerPoint([lat, lon]);"
        " const b = m.getContainer().getBoundingClientRect();"
        " return {x: b.left + p.x, y: b.top + p.y}; }",
        [lat, lon],
    )
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector(".leaflet-popup-content")
    for layer in ("coverage", "stands"):
        page.evaluate(
            f"void PontualMaps.maps.map.layers[{layer!r}].group.addTo(PontualMaps.maps.map.map)"
        )


def _detour_popup(page: Any) -> None:
    page.evaluate("void PontualMaps.maps.map.layers['stands'].group.remove()")
    _click(page, "kind:longer_route", _busiest_row(page, "kind:longer_route", "confidence"))
    page.evaluate(
        "void PontualMaps.maps.map.layers['stands'].group.addTo(PontualMaps.maps.map.map)"
    )


SHOTS: dict[str, tuple[str, Callable[[Any], None] | None]] = {
    "boardings": ("porto_map.html", None),
    "findings": ("porto/map.html", None),
    "enforcement": ("porto/map.html", _detour_popup),
    "stands": ("mapa_pontos.html", _stand_popup),
    "planner": ("mapa_planejamento.html", _cell_popup),
    "citizen": ("mapa_cidadao.html", None),
}


def main() -> None:
    """Open each map offline, do its interaction, save the screenshot."""
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=Path("out/demo"))
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    args = parser.parse_args()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        for name, (page_path, interact) in SHOTS.items():
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            context.route(
                "**/*",
                lambda route: (
                    route.continue_() if route.request.url.startswith("file://") else route.abort()
                ),
            )
            page = context.new_page()
            page.goto((args.demo / page_path).resolve().as_uri())
            page.wait_for_function("window.PontualMaps && PontualMaps.ready")
            if interact is not None:
                interact(page)
                page.wait_for_timeout(600)  # the popup's fade-in and the map's pan
            out = args.docs / f"demo-porto-{name}.png"
            page.screenshot(path=str(out))
            print(f"{out}: {page.title()}")
            context.close()
        browser.close()


if __name__ == "__main__":
    main()
