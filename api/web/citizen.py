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
  answer (works without scripts). The stand list is one city's (``municipio``), narrowed by
  ``busca`` (the stand's name or address, case and accents aside: the registry's public
  data, no geocoder); the answer's stands come :data:`PAGE_SIZE` a page (``pagina``), the
  links of a point naming its public cell, never the point; an answer cut at the public API's
  limit (:data:`api.routes.public.MAX_STANDS`) says it lists the nearest stands only;
- ``/acessivel/resultados``: the answer alone (an HTML fragment), for ``static/js/acessivel.js``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Request
from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.responses import Response

from api._errors import RateLimitedError
from api.deps import SettingsDep, public_query, public_rate_limit
from api.queries import SILENCE_LOOKBACK_DAYS, latest_fix_at
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
PAGE_SIZE = 20
"""Stands listed per page of an answer."""
NO_MUNICIPALITY = "nenhum"
"""The municipality choice of the stands the registry gives none."""


class SearchError(ValueError):
    """A search parameter out of its allowed values (pt-BR message)."""


def radii(settings: Any) -> list[int]:
    """Return the search distances offered under the public API's maximum."""
    return [r for r in RADII_M if r <= settings.public_max_radius_m] or [
        int(settings.public_max_radius_m)
    ]


def municipality_choices(session: Any) -> list[dict[str, Any]]:
    """Municipalities of the active stands, most stands first: value, label and count.

    Stands without a municipality in the registry form one choice, :data:`NO_MUNICIPALITY`.
    """
    rows = session.execute(
        text(
            "SELECT s.municipality_code AS code, m.name, m.uf, count(*) AS n FROM stands s "
            "LEFT JOIN municipalities m ON m.code = s.municipality_code "
            "WHERE s.retired_at IS NULL AND s.geometry IS NOT NULL "
            "GROUP BY s.municipality_code, m.name, m.uf ORDER BY n DESC, m.name, code"
        )
    ).all()
    out = []
    for r in rows:
        if r.code is None:
            label = "Sem município no cadastro"
        elif r.name:
            label = f"{r.name} ({r.uf})" if r.uf else str(r.name)
        else:
            label = f"Município {r.code}"
        out.append({"value": r.code or NO_MUNICIPALITY, "label": label, "count": int(r.n)})
    return out


def stand_choices(session: Any, *, municipality: str, search: str = "") -> list[dict[str, Any]]:
    """Active stands with a location of one municipality, by name (public data).

    Each has its id, name, address and a point inside; ``search`` keeps those whose name,
    address or number contains it, case and accents aside.
    """
    where = (
        "municipality_code IS NULL" if municipality == NO_MUNICIPALITY else "municipality_code = :m"
    )
    rows = session.execute(
        text(
            "SELECT stand_id, coalesce(name, stand_id) AS name, address, "
            "ST_Y(ST_PointOnSurface(geometry)) AS lat, ST_X(ST_PointOnSurface(geometry)) AS lon "
            f"FROM stands WHERE retired_at IS NULL AND geometry IS NOT NULL AND {where}"
        ),
        {"m": municipality},
    ).all()
    wanted = fmt.plain(search)
    rows = sorted(rows, key=lambda r: (fmt.plain(r.name), r.stand_id))  # "Câmara" before "Centro"
    return [
        {
            "stand_id": r.stand_id,
            "name": r.name,
            "address": r.address,
            "lat": round(r.lat, 6),
            "lon": round(r.lon, 6),
        }
        for r in rows
        if not wanted or wanted in fmt.plain(f"{r.name} {r.address or ''} {r.stand_id}")
    ]


def _municipality_of(session: Any, stand_id: str) -> str | None:
    """Return the choice (:func:`municipality_choices`) of a stand; None when unknown."""
    row = session.execute(
        text("SELECT municipality_code FROM stands WHERE stand_id = :s"), {"s": stand_id[:100]}
    ).first()
    if row is None:
        return None
    return str(row.municipality_code) if row.municipality_code else NO_MUNICIPALITY


def _chosen_municipality(
    session: Any, choices: list[dict[str, Any]], *, asked: str, ponto: str
) -> str:
    """Return the municipality asked, else the searched stand's, else the one with most stands."""
    values = [c["value"] for c in choices]
    if asked:
        if asked not in values:
            msg = f"A cidade {asked[:20]!r} não está no serviço: escolha uma cidade da lista."
            raise SearchError(msg)
        return asked
    of_stand = _municipality_of(session, ponto) if ponto else None
    if of_stand in values:
        return str(of_stand)
    return values[0] if values else NO_MUNICIPALITY


def _page_number(value: str) -> int:
    if not value.strip():
        return 1
    if not fmt.digits(value.strip()) or int(value) < 1:
        msg = (
            f"A página {value[:20]!r} não existe: use os botões Anterior e Próxima da lista de "
            "pontos."
        )
        raise SearchError(msg)
    return int(value)


def paginate(
    items: list[dict[str, Any]], *, page: int, link: Callable[[int], str]
) -> dict[str, Any]:
    """Cut a list into pages of :data:`PAGE_SIZE`: the page's items and what to say of it.

    A page past the last is the last. ``link(n)`` is the address of page ``n``.
    """
    total = len(items)
    last = max(1, math.ceil(total / PAGE_SIZE))
    page = min(page, last)
    first = (page - 1) * PAGE_SIZE
    shown = items[first : first + PAGE_SIZE]
    return {
        "shown": shown,
        "total": total,
        "page": page,
        "pages": last,
        "first": first + 1 if shown else 0,
        "last": first + len(shown),
        "previous": link(page - 1) if page > 1 else None,
        "next": link(page + 1) if page < last else None,
    }


def _no_nul(**params: str) -> None:
    """Raise :class:`SearchError` if a parameter has a NUL character (no database text has)."""
    for name, value in params.items():
        if "\x00" in value:
            msg = f"'{name}' contém um caractere nulo (\\0): retire-o e busque de novo"
            raise SearchError(msg)


def _number(value: str, *, name: str, low: float, high: float) -> float:
    """Read a coordinate as typed in Brazil too ("-30,03"); only ASCII digits ("٣٠" is not 30)."""
    text = value.strip()
    if "," in text and "." not in text:
        text = text.replace(",", ".", 1)
    try:
        number = float(text) if text.isascii() else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        problem = f"{name} {value[:30]!r} não é um número"
    elif not low <= number <= high:
        problem = f"{name} {value[:30]!r} fora de {low:g} a {high:g}"
    else:
        return number
    msg = (
        f"A posição recebida não é válida ({problem}): "
        "toque no mapa, use a sua localização ou escolha um ponto de táxi da lista."
    )
    raise SearchError(msg)


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
            msg = (
                f"O ponto de táxi {ponto[:30]!r} não existe ou não está mais ativo: escolha um "
                "ponto da lista."
            )
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
    silent, silent_since = False, None
    published = public.published_instant()
    if not taxis.taxis and not len(  # none free in the whole city either: since when?
        public.free_taxi_cells(session, recent_s=settings.public_recent_fix_s, now=published)[0]
    ):
        # What the public map shows, no more: free fixes, as of the published instant, the day
        # only (an occupied or off taxi, or the hour of one tracker's fix, is not told).
        latest = latest_fix_at(
            session=session,
            vehicle_ids=list(
                session.execute(text("SELECT vehicle_id FROM vehicles WHERE accessible")).scalars()
            ),
            before=published,
            after=published - dt.timedelta(days=SILENCE_LOOKBACK_DAYS),  # a public page: bounded
            free_only=True,
        )
        silent = True
        if latest is not None:
            silent_since = fmt.date(latest.astimezone(ZoneInfo(settings.timezone)).date())
    _, clat, clon = snap_to_cell_centres([lat], [lon], resolution=public.CELL_RESOLUTION)
    return {
        "origin": origin,
        "radius": radius_text(radius_m),
        "here": {"lat": round(float(clat[0]), 6), "lon": round(float(clon[0]), 6)},
        "n_taxis": taxis.taxis,
        "silent": silent,
        "silent_since": silent_since,
        "lookback_days": SILENCE_LOOKBACK_DAYS,
        "widest": radius_m >= max(radii(settings)),
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
        "stands_limit": stands.limit if stands.truncated else None,
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
        shown = ", ".join(radius_text(r) for r in allowed)
        msg = f"A distância {value[:20]!r} não é uma das opções: escolha uma de {shown}."
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


def _answer(
    session: Any,
    settings: Any,
    *,
    point: tuple[float, float, str],
    radius: int,
    page: int,
    link_params: dict[str, str],
) -> dict[str, Any]:
    """Return the answer near ``point``, its stands cut into pages (links to ``/acessivel``)."""
    result = nearby(session, settings, lat=point[0], lon=point[1], radius_m=radius, origin=point[2])
    if "ponto" not in link_params:  # a point: the centre of its cell, never the one asked
        link_params = link_params | {
            "lat": f"{result['here']['lat']:.6f}",
            "lon": f"{result['here']['lon']:.6f}",
        }
    base = link_params | {"raio": str(radius)}

    def link(n: int) -> str:
        return "/acessivel?" + urlencode(base | {"pagina": str(n)}) + "#resultados"

    result["stand_page"] = paginate(result["stands"], page=page, link=link)
    return result


def _link_params(*, ponto: str, origem: str, municipio: str, busca: str) -> dict[str, str]:
    params = {"ponto": ponto} if ponto else {"origem": origem if origem in ORIGINS else "mapa"}
    if municipio:
        params["municipio"] = municipio
    if busca.strip():
        params["busca"] = busca.strip()
    return params


@router.get("/acessivel", name="web_citizen_home")
async def home(
    request: Request,
    settings: SettingsDep,
    ponto: str = "",
    lat: str = "",
    lon: str = "",
    raio: str = "",
    origem: str = "",
    municipio: str = "",
    busca: str = "",
    pagina: str = "",
) -> Response:
    """Find free accessible taxis and stands near a point (public).

    The stand list is one municipality's (``municipio``: the one asked, else the searched
    stand's, else the one with most stands), narrowed by ``busca`` (name, address or number,
    case and accents aside); the answer's stands come :data:`PAGE_SIZE` a page (``pagina``).
    """
    typed, busca = busca, busca.replace("\x00", "")[:100]  # a NUL: refused, never echoed
    context: dict[str, Any] = {
        "radii": [(r, radius_text(r)) for r in radii(settings)],
        "chosen_stand": ponto,
        "busca": busca,
        "municipalities": [],
        "municipality": "",
        "municipality_label": "",
    }
    try:
        public_rate_limit(request)  # first: a refused search costs no query
    except RateLimitedError as exc:
        context |= {"stands": [], "radius": DEFAULT_RADIUS_M}
        return _limited(request, "acessivel/inicio.html", exc, **context)
    asked = {
        "ponto": ponto, "lat": lat, "lon": lon, "raio": raio, "origem": origem,
        "municipio": municipio, "busca": busca, "typed": typed, "pagina": pagina,
    }  # fmt: skip
    context |= await public_query(request, _home_answer, settings, asked, context)
    status = context.pop("status_code")
    return render(
        request,
        "acessivel/inicio.html",
        web=None,
        title=TITLE,
        status_code=status,
        home_path="/acessivel",
        **context,
    )


def _home_answer(
    session: Session, settings: Any, asked: dict[str, str], context: dict[str, Any]
) -> dict[str, Any]:
    """Answer the page's database part, within the public gate (``api.deps.public_query``)."""
    ponto, lat, lon, raio = asked["ponto"], asked["lat"], asked["lon"], asked["raio"]
    origem, municipio, busca, pagina = (
        asked["origem"], asked["municipio"], asked["busca"], asked["pagina"]
    )  # fmt: skip
    context = dict(context)
    error, result, status = None, None, 200
    choices = municipality_choices(session)
    context["municipalities"] = choices
    chosen = choices[0]["value"] if choices else NO_MUNICIPALITY
    try:
        _no_nul(
            ponto=ponto, lat=lat, lon=lon, raio=raio, origem=origem, municipio=municipio,
            busca=asked["typed"], pagina=pagina,
        )  # fmt: skip
        radius = _radius(raio, settings)
        page = _page_number(pagina)
        chosen = _chosen_municipality(session, choices, asked=municipio, ponto=ponto)
        point = search_point(session, lat=lat, lon=lon, ponto=ponto, origem=origem)
        if point is not None:
            result = _answer(
                session,
                settings,
                point=point,
                radius=radius,
                page=page,
                link_params=_link_params(
                    ponto=ponto, origem=origem, municipio=municipio, busca=busca
                ),
            )
    except SearchError as exc:
        error, status, radius = str(exc), 422, DEFAULT_RADIUS_M
    stands = stand_choices(session, municipality=chosen, search=busca)
    if len(stands) == 1 and busca.strip() and not ponto:
        context["chosen_stand"] = stands[0]["stand_id"]  # the one found, ready to search
    labels = {c["value"]: c["label"] for c in choices}
    context |= {
        "stands": stands,
        "municipality": chosen,
        "municipality_label": (
            "sem município no cadastro"
            if chosen == NO_MUNICIPALITY and chosen in labels
            else f"em {labels[chosen]}"
            if chosen in labels
            else ""
        ),
    }
    return context | {"error": error, "result": result, "radius": radius, "status_code": status}


@router.get("/acessivel/resultados", name="web_citizen_results")
async def results(
    request: Request,
    settings: SettingsDep,
    ponto: str = "",
    lat: str = "",
    lon: str = "",
    raio: str = "",
    origem: str = "",
    pagina: str = "",
) -> Response:
    """Answer a search alone (HTML fragment), for the page's script."""
    try:
        public_rate_limit(request)
    except RateLimitedError as exc:
        return _limited(request, "acessivel/_resultados.html", exc)
    asked = {"ponto": ponto, "lat": lat, "lon": lon, "raio": raio, "origem": origem,
             "pagina": pagina}  # fmt: skip
    error, result, status = await public_query(request, _results_answer, settings, asked)
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


def _results_answer(
    session: Session, settings: Any, asked: dict[str, str]
) -> tuple[str | None, dict[str, Any] | None, int]:
    """Answer the fragment's database part, within the public gate: (error, result, status)."""
    ponto, lat, lon, raio = asked["ponto"], asked["lat"], asked["lon"], asked["raio"]
    origem, pagina = asked["origem"], asked["pagina"]
    error, result, status = None, None, 200
    try:
        _no_nul(ponto=ponto, lat=lat, lon=lon, raio=raio, origem=origem, pagina=pagina)
        radius = _radius(raio, settings)
        page = _page_number(pagina)
        point = search_point(session, lat=lat, lon=lon, ponto=ponto, origem=origem)
        if point is None:
            msg = "informe 'lat' e 'lon', ou 'ponto'"
            raise SearchError(msg)
        result = _answer(
            session,
            settings,
            point=point,
            radius=radius,
            page=page,
            link_params=_link_params(ponto=ponto, origem=origem, municipio="", busca=""),
        )
    except SearchError as exc:
        error, status = str(exc), 422
    return error, result, status
