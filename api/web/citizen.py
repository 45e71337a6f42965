"""The citizen's page (``/acessivel``): no login, nothing personal.

Free accessible taxis and taxi stands near a point: the browser's location (with the person's
consent), a point tapped on the map, or a stand picked from the list (no address search, which
would need an outside geocoder). The answers are those of the public API's handlers
(``api.routes.public``: :func:`api.routes.public.accessible_taxis`,
:func:`api.routes.public.stands_near`), called as functions, so the same privacy rules hold:
every position, the searched one included, is replaced by the centre of its cell of the public
grid before anything is computed; no plate, no vehicle id, distances rounded up to 100 m. The
page never echoes the searched coordinates (two points of one cell get the same page).
Requests count against the public API's rate limit, checked before anything else (a pt-BR 429
page or fragment when over, without a database query). A bad search (a number out of range, an
unknown stand, a NUL character) is the page or fragment with a pt-BR alert and 422.

- ``/acessivel``: the page; with ``ponto`` (a stand) or ``lat``/``lon`` it opens with the
  answer (works without scripts);
- ``/acessivel/resultados``: the answer alone (an HTML fragment), for ``static/js/acessivel.js``.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text
from starlette.responses import Response

from api._errors import RateLimitedError
from api.deps import SessionDep, SettingsDep, public_rate_limit
from api.web import formats as fmt
from api.web.templating import render

router = APIRouter(include_in_schema=False)

RADII_M = (500, 1000, 2000, 5000)
"""Search distances offered (those above ``public_max_radius_m`` are left out)."""
DEFAULT_RADIUS_M = 1000
ORIGINS = {
    "localizacao": "da sua localização",
    "mapa": "do local escolhido no mapa",
}
"""What the searched point was, as said in the answer (a stand: its name)."""
TITLE = "Táxi acessível perto de você"


class SearchError(ValueError):
    """A search parameter out of its allowed values (pt-BR message)."""


def radii(settings: Any) -> list[int]:
    """Return the search distances offered under the public API's maximum."""
    return [r for r in RADII_M if r <= settings.public_max_radius_m] or [
        int(settings.public_max_radius_m)
    ]


def stand_choices(session: Any) -> list[dict[str, Any]]:
    """Active stands with a location, by name: id, name and a point inside (public data)."""
    rows = session.execute(
        text(
            "SELECT stand_id, coalesce(name, stand_id) AS name, "
            "ST_Y(ST_PointOnSurface(geometry)) AS lat, ST_X(ST_PointOnSurface(geometry)) AS lon "
            "FROM stands WHERE retired_at IS NULL AND geometry IS NOT NULL "
            "ORDER BY lower(coalesce(name, stand_id)), stand_id"
        )
    ).all()
    return [
        {"stand_id": r.stand_id, "name": r.name, "lat": round(r.lat, 6), "lon": round(r.lon, 6)}
        for r in rows
    ]


def _no_nul(**params: str) -> None:
    """Raise :class:`SearchError` if a parameter has a NUL character (no database text has)."""
    for name, value in params.items():
        if "\x00" in value:
            msg = (
                f"'{name}' contém um caractere nulo (\\0); escolha um ponto da lista ou "
                "toque no mapa"
            )
            raise SearchError(msg)


def _number(value: str, *, name: str, low: float, high: float) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and low <= number <= high):
        msg = f"'{name}' era {value[:30]!r}; esperado um número entre {low:g} e {high:g}"
        raise SearchError(msg)
    return number


def search_point(
    session: Any, *, lat: str, lon: str, ponto: str, origem: str
) -> tuple[float, float, str] | None:
    """Return the point to search from and how to name it; None when nothing was asked."""
    if ponto:
        row = session.execute(
            text(
                "SELECT stand_id, coalesce(name, stand_id) AS name, "
                "ST_Y(ST_PointOnSurface(geometry)) AS lat, "
                "ST_X(ST_PointOnSurface(geometry)) AS lon FROM stands WHERE stand_id = :s "
                "AND retired_at IS NULL AND geometry IS NOT NULL"
            ),
            {"s": ponto[:100]},
        ).first()
        if row is None:
            msg = f"ponto {ponto[:30]!r} não encontrado entre os pontos ativos"
            raise SearchError(msg)
        return float(row.lat), float(row.lon), f"de {row.name} (ponto nº {row.stand_id})"
    if not lat and not lon:
        return None
    where = (
        _number(lat, name="lat", low=-90, high=90),
        _number(lon, name="lon", low=-180, high=180),
    )
    return where[0], where[1], ORIGINS.get(origem, ORIGINS["mapa"])


def nearby(
    session: Any, settings: Any, *, lat: float, lon: float, radius_m: int, origin: str
) -> dict[str, Any]:
    """Free accessible taxis and stands near a point: the public API's answers, for people."""
    from api.routes import public
    from geo.h3 import snap_to_cell_centres

    taxis = public.accessible_taxis(session, settings, lat, lon, float(radius_m))
    stands = public.stands_near(session, settings, lat, lon, float(radius_m))
    _, clat, clon = snap_to_cell_centres([lat], [lon], resolution=public.CELL_RESOLUTION)
    return {
        "origin": origin,
        "radius": radius_text(radius_m),
        "here": {"lat": round(float(clat[0]), 6), "lon": round(float(clon[0]), 6)},
        "n_taxis": taxis.taxis,
        "taxis": [
            {
                "index": t.index,
                "count": t.count,
                "distance": distance_text(t.distance_m),
                "seen": "nos últimos minutos"
                if t.last_seen_min < 1
                else f"há {fmt.plural(t.last_seen_min, 'minuto', 'minutos')} ou mais",
                "lat": t.position.lat,
                "lon": t.position.lon,
            }
            for t in taxis.data
        ],
        "stands": [
            {
                "stand_id": s.stand_id,
                "name": s.name or s.stand_id,
                "distance": distance_text(s.distance_m),
                "at_stand": s.accessible_free_at_stand,
                "nearby": s.accessible_free_nearby,
                "lat": s.position.lat,
                "lon": s.position.lon,
            }
            for s in stands.data
        ],
        "nearby_m": fmt.integer(int(public.NEARBY_M)),
        "cell_m": 120,
        "step_m": public.DISTANCE_STEP_M,
    }


def distance_text(metres: float) -> str:
    """Say a public distance: "menos de 100 m" (one cell), "cerca de 300 m", "cerca de 1,2 km"."""
    from api.routes.public import DISTANCE_STEP_M

    if metres < DISTANCE_STEP_M:
        return f"menos de {DISTANCE_STEP_M} m"
    if metres < 1000:
        return f"cerca de {int(metres)} m"
    return f"cerca de {fmt.decimal(metres / 1000, digits=1)} km"


def radius_text(metres: int) -> str:
    """Say a search distance: ``"500 m"``, ``"2 km"``."""
    return f"{metres // 1000} km" if metres % 1000 == 0 else f"{fmt.integer(metres)} m"


def _radius(value: str, settings: Any) -> int:
    allowed = radii(settings)
    if not value:
        return DEFAULT_RADIUS_M if DEFAULT_RADIUS_M in allowed else allowed[0]
    if value.strip() not in {str(r) for r in allowed}:
        msg = f"'raio' era {value[:20]!r}; esperado um de {', '.join(str(r) for r in allowed)}"
        raise SearchError(msg)
    return int(value)


def _limited(request: Request, template: str, exc: RateLimitedError, **context: Any) -> Response:
    retry = exc.headers.get("Retry-After", "60")
    return render(
        request,
        template,
        web=None,
        title=TITLE,
        status_code=429,
        headers={"Retry-After": retry},
        home_path="/acessivel",
        error=f"Muitas buscas deste endereço em pouco tempo. Tente de novo em {retry} s.",
        result=None,
        **context,
    )


@router.get("/acessivel", name="web_citizen_home")
def home(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    ponto: str = "",
    lat: str = "",
    lon: str = "",
    raio: str = "",
    origem: str = "",
) -> Response:
    """Find free accessible taxis and stands near a point (public)."""
    context: dict[str, Any] = {
        "radii": [(r, radius_text(r)) for r in radii(settings)],
        "chosen_stand": ponto,
    }
    try:
        public_rate_limit(request)  # first: a refused search costs no query
    except RateLimitedError as exc:
        context |= {"stands": [], "radius": DEFAULT_RADIUS_M}
        return _limited(request, "acessivel/inicio.html", exc, **context)
    context["stands"] = stand_choices(session)
    error, result, status = None, None, 200
    try:
        _no_nul(ponto=ponto, lat=lat, lon=lon, raio=raio, origem=origem)
        radius = _radius(raio, settings)
        point = search_point(session, lat=lat, lon=lon, ponto=ponto, origem=origem)
        if point is not None:
            result = nearby(
                session, settings, lat=point[0], lon=point[1], radius_m=radius, origin=point[2]
            )
    except SearchError as exc:
        error, status, radius = str(exc), 422, DEFAULT_RADIUS_M
    return render(
        request,
        "acessivel/inicio.html",
        web=None,
        title=TITLE,
        status_code=status,
        home_path="/acessivel",
        error=error,
        result=result,
        radius=radius,
        **context,
    )


@router.get("/acessivel/resultados", name="web_citizen_results")
def results(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    ponto: str = "",
    lat: str = "",
    lon: str = "",
    raio: str = "",
    origem: str = "",
) -> Response:
    """Answer a search alone (HTML fragment), for the page's script."""
    try:
        public_rate_limit(request)
    except RateLimitedError as exc:
        return _limited(request, "acessivel/_resultados.html", exc)
    error, result, status = None, None, 200
    try:
        _no_nul(ponto=ponto, lat=lat, lon=lon, raio=raio, origem=origem)
        radius = _radius(raio, settings)
        point = search_point(session, lat=lat, lon=lon, ponto=ponto, origem=origem)
        if point is None:
            msg = "informe 'lat' e 'lon', ou 'ponto'"
            raise SearchError(msg)
        result = nearby(
            session, settings, lat=point[0], lon=point[1], radius_m=radius, origin=point[2]
        )
    except SearchError as exc:
        error, status = str(exc), 422
    return render(
        request,
        "acessivel/_resultados.html",
        web=None,
        title=TITLE,
        status_code=status,
        home_path="/acessivel",
        error=error,
        result=result,
    )
