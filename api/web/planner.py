"""Pages of the Planejamento area (``/planejamento``): open to the roles of :data:`ROLES`.

- ``/planejamento``: a municipality's plan, the figures of ``pontual plan`` (one function
  composes both: :func:`planning.compose.compose_plan`), its chart, the planner map, the
  areas that most lack stands, the candidate sites and the vehicles to check; the
  municipality is chosen among those with a bundled planning rule or with registry data, or
  by IBGE code or name (bundled IBGE table);
- ``/planejamento/{municipality}/{table}.csv``: a table of that plan to download
  (:data:`TABLES`);
- ``/planejamento/{municipality}/mapa.json``: the layers of the planner map (GeoJSON), drawn
  by ``static/js/planejamento.js`` with the vendored Leaflet, over the maps' background
  (``static/js/mapa-base.js``).

Inputs, as ``pontual plan --from-db``: the bundled IBGE population and rulebook, the registry's
vehicles of the municipality active today; and for the demand side (the CLI's ``--trips``,
``--stands``, ``--findings``), from the database: the pickups of the municipality's vehicles over
the last ``dias`` days, its stands, and the ``illegal_stand_formation`` findings inside its
area (the bundled boundary, else within :data:`AREA_MARGIN_M` of its stands and pickups).
No personal data: vehicles are named by their prefixo.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

import geopandas as gpd
import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from markupsafe import Markup
from sqlalchemy import text
from starlette.responses import Response

from api.deps import SessionDep
from api.web import formats as fmt
from api.web.auth import WebSession, require_web_roles
from api.web.pages import error_page
from api.web.templating import render
from geo.calendar import local_today
from planning.report import rounding_sentence

router = APIRouter(include_in_schema=False)

ROLES = ("admin", "planner")
"""Who may open this area (as in the API's authorisation)."""
PlannerUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]

PLAN_TIMEZONE = "America/Sao_Paulo"
"""Zone of the plan's reference date (as ``pontual plan`` and the API)."""
DEFAULT_MUNICIPALITY = "4314902"
"""Porto Alegre: the plan shown when the registry names no municipality."""
DEMAND_DAYS = (7, 30, 90)
DEFAULT_DEMAND_DAYS = 30
FLEET_SOURCE = "cadastro (banco de dados)"
"""Said of the fleet, as ``pontual plan --from-db`` says it."""
AREA_MARGIN_M = 1000.0
"""Without a bundled boundary, findings this close to the stands and pickups count."""
SHOWN_AREAS = 10
"""Areas most lacking stands listed on the page (all in the CSV)."""
MAX_MATCHES = 20
HEAT = 6
"""Classes of the pickups' colour scale (``heat-1`` … ``heat-6`` in ``roles.css``)."""
SERVICE_LABELS = {"taxi": "táxi", "fretamento": "fretamento assistencial"}
YEAR_LABELS = {2022: "2022 (Censo)", 2024: "2024 (estimativa do IBGE)"}
TABLES = {
    "indicadores": "Indicadores do plano",
    "areas": "Demanda e pontos por célula H3",
    "candidatos": "Locais candidatos a novos pontos",
    "veiculos": "Veículos com pendência",
}
"""The plan's tables offered as CSV: name in the URL → title."""

# Query values are read as text and checked here (a pt-BR page, never the API's JSON 422).
Year = Annotated[str, Query(description="2022 (Censo) ou 2024 (estimativa)")]
Service = Annotated[str, Query(description="taxi ou fretamento")]
Days = Annotated[str, Query(description="Dias de embarques (demanda): 7, 30 ou 90")]


@dataclass(frozen=True)
class PlanOptions:
    """What the planner asked for."""

    municipality: str
    year: int
    service: str
    days: int

    def query(self) -> str:
        """Return the options as a query string for the plan's links (CSV, map)."""
        return f"ano={self.year}&servico={self.service}&dias={self.days}"


class PlanOptionError(ValueError):
    """A plan option out of its allowed values (pt-BR message naming it)."""


def check_options(*, municipality: str, year: str, service: str, days: str) -> PlanOptions:
    """Return the options, or raise :class:`PlanOptionError` naming the bad one."""
    from planning.population import YEARS
    from planning.rules import SERVICES

    if year.strip() not in {str(y) for y in YEARS}:
        years = " ou ".join(map(str, YEARS))
        msg = f"População: {year[:20]!r} não é um ano da lista; escolha {years}"
        raise PlanOptionError(msg)
    if service not in SERVICES:
        msg = (
            f"Serviço: {service[:20]!r} não é um serviço da lista; escolha {' ou '.join(SERVICES)}"
        )
        raise PlanOptionError(msg)
    if days.strip() not in {str(d) for d in DEMAND_DAYS}:
        allowed = ", ".join(str(d) for d in DEMAND_DAYS)
        msg = f"Demanda: {days[:20]!r} dias não está na lista; escolha {allowed} dias"
        raise PlanOptionError(msg)
    return PlanOptions(municipality=municipality, year=int(year), service=service, days=int(days))


# --- municipalities ---------------------------------------------------------------------


def municipality_names() -> dict[str, tuple[str, str]]:
    """IBGE code → (name, UF), from the bundled IBGE table."""
    from planning.population import bundled_population_table

    table = bundled_population_table().drop_duplicates("municipality_code")
    return {
        str(c): (str(n), str(u))
        for c, n, u in zip(table["municipality_code"], table["name"], table["uf"], strict=True)
    }


@dataclass(frozen=True)
class Found:
    """The municipalities a search finds: their codes, ranked (the first ``most``)."""

    codes: list[str]
    total: int
    """How many names contain the search (or the one code)."""
    exact: int
    """How many of them are named exactly so (the first codes): "Bom Jesus" in five states."""


_UF_SUFFIX = re.compile(r"^(.*?)\s*[/-]\s*([A-Za-z]{2})$")
_CODE_IN = re.compile(r"(?<!\d)(\d{7})(?!\d)")


def find_municipalities(query: str, most: int | None = MAX_MATCHES) -> Found:
    """Find the municipalities ``query`` names.

    A 7-digit code (alone or in the text, as the list shows it: "Porto Alegre/RS (4314902)"),
    else a name, with or without "/UF". Accents and case are ignored. Exact names first, then
    names starting with the search, then the others containing it, each alphabetically, at most
    ``most`` (None: all).
    """
    names = municipality_names()
    wanted = query.strip()
    if code := _CODE_IN.search(wanted):
        return Found([code[1]], 1, 1) if code[1] in names else Found([], 0, 0)
    uf = None
    ufs = {state for _, state in names.values()}
    if (suffix := _UF_SUFFIX.match(wanted)) and suffix[2].upper() in ufs:
        wanted, uf = suffix[1], suffix[2].upper()
    needle = fmt.plain(wanted)
    if not needle:
        return Found([], 0, 0)
    partial = [
        c
        for c, (n, state) in names.items()
        if needle in fmt.plain(n) and (uf is None or state == uf)
    ]
    ranked = sorted(
        partial,
        key=lambda c: (
            fmt.plain(names[c][0]) != needle,
            not fmt.plain(names[c][0]).startswith(needle),
            fmt.plain(names[c][0]),
            names[c][1],
        ),
    )
    exact = sum(fmt.plain(names[c][0]) == needle for c in partial)
    return Found(ranked[:most], len(partial), exact)


ALSO_SHOWN = 8
"""Other municipalities a search names offered beside the exact one's plan, most populous
first ("porto": Porto Alegre and Porto Velho, not Porto Acre)."""


def most_populous(codes: list[str], n: int) -> list[str]:
    """Return the ``n`` most populous of ``codes`` (the bundled IBGE figures), in that order."""
    from planning.population import bundled_population_table

    table = bundled_population_table()
    people = dict(zip(table["municipality_code"], table["population"], strict=True))
    return sorted(codes, key=lambda c: -people.get(c, 0))[:n]


def municipalities_with_rules() -> dict[str, list[str]]:
    """Return the codes with a bundled planning rule and the services it is for.

    A rulebook with a ``[planning]`` table; its services are :data:`SERVICE_LABELS` keys.
    """
    from enforcement.rulebook import bundled_rulebooks

    found: dict[str, set[str]] = {}
    for (code, service), book in bundled_rulebooks().items():
        if book.planning:
            found.setdefault(code, set()).add(service)
    return {code: sorted(found[code]) for code in sorted(found)}


def municipalities_in_registry(session: Any) -> list[str]:
    """Codes of the registry's stands and vehicles, most records first."""
    rows = session.execute(
        text(
            "SELECT code, count(*) AS n FROM ("
            "  SELECT municipality_code AS code FROM stands WHERE retired_at IS NULL"
            "  UNION ALL SELECT municipality_code FROM vehicles"
            ") r WHERE code IS NOT NULL GROUP BY code ORDER BY n DESC, code"
        )
    ).all()
    return [str(r.code) for r in rows]


# --- the plan ---------------------------------------------------------------------------


def _today() -> dt.date:
    return local_today(PLAN_TIMEZONE)


def municipality_stands(session: Any, municipality: str) -> gpd.GeoDataFrame:
    """Return the municipality's active stands with a location (stands frame, EPSG:4326)."""
    from db.stands.queries import stands_frame

    stands = stands_frame(session=session, municipality=municipality)
    stands = stands[stands.geometry.notna()].drop(columns=["retired_at"])
    return stands.reset_index(drop=True)


def municipality_area(
    municipality: str, *, stands: gpd.GeoDataFrame, pickups: pd.DataFrame
) -> tuple[Any, str]:
    """Return the area findings are taken from: (shapely geometry or None, how chosen)."""
    from geo.crs import WGS84, utm_crs_for_frame
    from planning.io import bundled_boundary

    boundary = bundled_boundary(municipality)
    if boundary is not None:
        return boundary.geometry.union_all(), "limite municipal incluído (IBGE)"
    points = gpd.GeoSeries(
        gpd.points_from_xy(pickups["pickup_lon"], pickups["pickup_lat"]), crs=WGS84
    )
    shapes = pd.concat([stands.geometry, points], ignore_index=True)
    shapes = gpd.GeoSeries(shapes[shapes.notna()], crs=WGS84)
    if shapes.empty:
        return None, "sem limite incluído, pontos nem embarques"
    utm = utm_crs_for_frame(shapes)
    hull = shapes.to_crs(utm).union_all().convex_hull.buffer(AREA_MARGIN_M)
    area = gpd.GeoSeries([hull], crs=utm).to_crs(WGS84).iloc[0]
    return area, f"a até {fmt.integer(int(AREA_MARGIN_M))} m dos pontos e dos embarques"


def compute_plan(
    session: Any, options: PlanOptions, *, now: dt.datetime | None = None
) -> dict[str, Any]:
    """Compose the plan of ``options`` from the registry (see the module doc).

    Returns
    -------
    dict
        ``plan`` (as ``pontual plan --format json``), ``frames`` (``areas``, ``coverage``,
        ``candidates``, ``stands``), ``boundary`` (GeoDataFrame or None), ``area_note``,
        ``as_of``, ``since``, ``latest_data_day`` (with no boarding in the window, the fleet's
        latest local day with a fix, or None). Candidates come from the window's findings.

    Raises
    ------
    planning._errors.PlanningError
        Unknown municipality, or no population for the year.
    """
    from api.map_data import findings_frame, pickups_frame
    from api.web.supervisor import latest_fix_day
    from db.fleet.store import active_fleet_from_db
    from planning.compose import compose_plan
    from planning.io import bundled_boundary

    now = now or dt.datetime.now(dt.UTC)
    as_of = _today()
    since = now - dt.timedelta(days=options.days)
    m = options.municipality
    fleet = active_fleet_from_db(
        conn=session.connection(), municipality=m, as_of=as_of, service=options.service
    )
    if fleet is not None and not len(fleet):
        fleet = None
    stands = municipality_stands(session, m)
    pickups = pickups_frame(session, since=since, now=now, municipality=m)
    area, area_note = municipality_area(m, stands=stands, pickups=pickups)
    findings = findings_frame(
        session, kinds=("illegal_stand_formation",), limit=5000, window=(since, now)
    )
    if area is not None and len(findings):
        findings = findings[findings.geometry.notna() & findings.geometry.intersects(area)]
    else:
        findings = findings.iloc[:0]
    latest = None  # with no boarding in the window: the fleet's latest day with data, if any
    if not len(pickups) and fleet is not None:
        latest = latest_fix_day(
            session=session,
            vehicle_ids=[str(v) for v in fleet["vehicle_id"]],
            until=as_of,
            timezone=PLAN_TIMEZONE,
        )
    plan, frames = compose_plan(
        municipality=m,
        year=options.year,
        service=options.service,
        as_of=as_of,
        fleet=fleet,
        fleet_source=FLEET_SOURCE if fleet is not None else None,
        fleet_is_active=True,
        trips=pickups if len(pickups) else None,
        stands=stands if len(stands) else None,
        findings=findings if len(findings) else None,
        top_areas=SHOWN_AREAS,
    )
    return {
        "plan": plan,
        "frames": frames,
        "boundary": bundled_boundary(m),
        "area_note": area_note,
        "as_of": as_of,
        "since": since,
        "latest_data_day": latest,
    }


def figure_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the plan's figures, each as on the page and in the CSV.

    Each row: ``key`` (as in the JSON; ``a.b`` inside a block), ``label``, ``value`` (raw, for
    the CSV) and ``shown`` (as on the page).
    """

    def gap_message(value: dict[str, Any] | None) -> str | None:
        if value is None:
            return None
        if value["status"] == "unknown" and plan["fleet_current"] is None:
            return "frota atual desconhecida: nenhum veículo ativo deste município no cadastro"
        return str(value["message"])

    areas, vehicles = plan["areas"], plan["vehicles"]
    rule = plan["rule"] or {}
    source = rule.get("source") or {}
    rows: list[tuple[str, str, Any]] = [
        ("municipality", "Código IBGE", plan["municipality"]),
        ("municipality_name", "Município", plan["municipality_name"]),
        ("uf", "UF", plan["uf"]),
        ("service", "Serviço", plan["service"]),
        ("year", "Ano da população", plan["year"]),
        ("population", "População", plan["population"]),
        ("population_source", "Fonte da população", plan["population_source"]),
        ("rule.law", "Regra de planejamento", source.get("law") or source.get("file")),
        ("rule.rounding", "Arredondamento", rounding_sentence(plan)),
        ("fleet_min", "Frota mínima", plan["fleet_min"]),
        ("fleet_max", "Frota máxima", plan["fleet_max"]),
        ("fleet_current", "Frota atual (ativa)", plan["fleet_current"]),
        ("inhabitants_per_taxi", "Habitantes por táxi (frota atual)", plan["inhabitants_per_taxi"]),
        ("fleet_source", "Origem da frota", plan["fleet_source"]),
        ("fleet_gap", "Situação da frota", gap_message(plan["fleet_gap"])),
        ("accessible_min", "Acessíveis exigidos", plan["accessible_min"]),
        ("accessible_basis", "Base do cálculo dos acessíveis", plan["accessible_basis"]),
        ("accessible_current", "Acessíveis presentes", plan["accessible_current"]),
        ("accessible_gap", "Situação dos acessíveis", gap_message(plan["accessible_gap"])),
        ("areas.pickups", "Embarques no período", areas["pickups"]),
        ("areas.cells", "Células H3 com embarques", areas["cells"]),
        ("areas.cells_without_stand", "Células sem ponto a pé", areas["cells_without_stand"]),
        ("candidates", "Locais candidatos", len(plan["candidates"])),
        ("vehicles.checked", "Veículos verificados", vehicles["checked"]),
        (
            "vehicles.over_age",
            "Acima da idade máxima",
            None if vehicles["max_age_years"] is None else len(vehicles["over_age"]),
        ),
        ("vehicles.inspection", "Vistoria vencida ou a vencer", len(vehicles["inspection"])),
    ]
    out = []
    for key, label, value in rows:
        if key == "service":
            shown = SERVICE_LABELS.get(str(value), str(value))
        elif isinstance(value, bool) or value is None:
            shown = fmt.NONE if value is None else str(value)
        elif isinstance(value, int) and key != "year":
            shown = fmt.integer(value)
        else:
            shown = str(value)
        out.append({"key": key, "label": label, "value": value, "shown": shown})
    return out


AREA_CSV = (
    ("cell", "celula_h3"),
    ("pickups", "embarques"),
    ("stands_nearby", "pontos_a_pe"),
    ("spaces", "vagas_a_pe"),
    ("lack_score", "embarques_por_vaga_mais_1"),
    ("lat", "lat"),
    ("lon", "lon"),
    ("stand_ids", "pontos"),
)
CANDIDATE_CSV = (
    ("place_id", "local"),
    ("lat", "lat"),
    ("lon", "lon"),
    ("n_findings", "achados"),
    ("n_days", "dias"),
    ("n_vehicles", "veiculos"),
    ("pickups_in_cell", "embarques_na_celula"),
    ("nearest_stand_m", "ponto_mais_proximo_m"),
    ("first_seen", "primeira_vez"),
    ("last_seen", "ultima_vez"),
)
VEHICLE_CSV = (
    ("vehicle_id", "prefixo"),
    ("year", "ano"),
    ("age_years", "idade_anos"),
    ("age_basis", "idade_contada_do"),
    ("over_age", "acima_da_idade"),
    ("inspection_valid_until", "vistoria_valida_ate"),
    ("inspection_interval_days", "intervalo_vistoria_dias"),
    ("inspection_status", "situacao_vistoria"),
    ("issues", "pendencias"),
)


def _csv_value(value: Any) -> Any:
    if value is None or (not isinstance(value, list | tuple) and pd.isna(value)):
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float):  # a decimal comma, as a pt-BR spreadsheet reads numbers
        return (f"{value:.6g}" if abs(value) < 1e6 else f"{value:.1f}").replace(".", ",")
    return value


def flagged_vehicles(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Vehicles over age or with an inspection to check, once each."""
    seen: dict[str, dict[str, Any]] = {}
    for row in [*plan["vehicles"]["over_age"], *plan["vehicles"]["inspection"]]:
        seen.setdefault(str(row["vehicle_id"]), row)
    return list(seen.values())


def table_csv(name: str, computed: dict[str, Any]) -> str:
    """Return one of :data:`TABLES` as CSV text for a pt-BR spreadsheet.

    ';' between cells, a decimal comma, a header row, UTF-8: a comma-separated file opens as
    one column in Excel pt-BR.
    """
    plan = computed["plan"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=";", lineterminator="\r\n")
    if name == "indicadores":
        writer.writerow(["campo", "descricao", "valor"])
        for row in figure_rows(plan):
            writer.writerow([row["key"], row["label"], _csv_value(row["value"])])
        return buffer.getvalue()
    columns: tuple[tuple[str, str], ...]
    if name == "areas":
        frame = computed["frames"]["areas"]
        records = [] if frame is None else frame.drop(columns="geometry").to_dict("records")
        columns = AREA_CSV
    elif name == "candidatos":
        records, columns = plan["candidates"], CANDIDATE_CSV
    else:
        records, columns = flagged_vehicles(plan), VEHICLE_CSV
        if plan["vehicles"]["max_age_years"] is None:  # no maximum: the age was not judged
            columns = tuple(c for c in columns if c[0] != "over_age")
    writer.writerow([label for _, label in columns])
    for record in records:
        writer.writerow([_csv_value(record.get(key)) for key, _ in columns])
    return buffer.getvalue()


# --- the map ----------------------------------------------------------------------------


def heat_class(pickups: int, top: int) -> int:
    """Colour class 1…:data:`HEAT` of a cell's pickups (square-root scale of the maximum)."""
    if top <= 0 or pickups <= 0:
        return 0
    return min(HEAT, max(1, math.ceil(math.sqrt(pickups / top) * HEAT)))


def heat_legend(top: int) -> list[dict[str, Any]]:
    """Return the classes of :func:`heat_class` a cell can fall in, with their ranges."""
    out = []
    for k in range(1, HEAT + 1):
        lo = math.floor(top * ((k - 1) / HEAT) ** 2) + 1
        hi = math.floor(top * (k / HEAT) ** 2) if k < HEAT else top
        if lo <= hi:
            label = f"{fmt.integer(lo)}" if lo == hi else f"{fmt.integer(lo)} a {fmt.integer(hi)}"
            out.append({"heat": k, "label": label})
    return out


def _features(frame: gpd.GeoDataFrame | None, columns: list[str]) -> dict[str, Any]:
    import json

    if frame is None or len(frame) == 0:
        return {"type": "FeatureCollection", "features": []}
    data: dict[str, Any] = json.loads(frame[[*columns, "geometry"]].to_json(na="null"))
    return data


def map_layers(computed: dict[str, Any]) -> dict[str, Any]:
    """Return the planner map's layers as GeoJSON, in drawing order, and the bounds."""
    frames = computed["frames"]
    areas = frames["areas"]
    cells = None
    if areas is not None and len(areas):
        top = int(areas["pickups"].max())
        cells = areas[["cell", "pickups", "spaces", "stands_nearby", "geometry"]].copy()
        cells["lack_score"] = areas["lack_score"].round(1)
        cells["heat"] = [heat_class(int(c), top) for c in cells["pickups"]]
    stands = frames["stands"]
    if stands is not None and len(stands):
        stands = stands[["stand_id", "name", "capacity", "geometry"]].copy()
        stands["capacity"] = pd.Series(
            [None if pd.isna(v) else int(v) for v in stands["capacity"]],
            index=stands.index,
            dtype="object",
        )
    layers = [
        ("boundary", computed["boundary"], []),
        ("coverage", frames["coverage"], ["stand_id"]),
        ("cells", cells, ["cell", "pickups", "spaces", "stands_nearby", "lack_score", "heat"]),
        ("stands", stands, ["stand_id", "name", "capacity"]),
        ("candidates", frames["candidates"], ["n_days", "n_vehicles", "nearest_stand_m"]),
    ]
    # Frame the stands, their coverage, the candidates and the pickups' cells (none cut at the
    # edge); else the boundary (a large municipality's boundary would shrink them to nothing).
    shown: list[gpd.GeoDataFrame] = []
    for keys in (("coverage", "stands", "candidates", "cells"), ("boundary",)):
        shown = [f for k, f, _ in layers if k in keys and f is not None and len(f)]
        if shown:
            break
    bounds = None
    if shown:
        b = pd.DataFrame([f.total_bounds for f in shown])
        bounds = [[b[1].min(), b[0].min()], [b[3].max(), b[2].max()]]
    return {
        "bounds": bounds,
        "layers": {key: _features(frame, cols) for key, frame, cols in layers},
    }


# --- routes -----------------------------------------------------------------------------


def _plan_error(request: Request, web: WebSession, message: str, status: int) -> Response:
    return error_page(
        request, web=web, status_code=status, title="Plano indisponível", message=message
    )


@router.get("/planejamento", name="web_planner_home")
def home(
    request: Request,
    web: PlannerUser,
    session: SessionDep,
    municipio: Annotated[str, Query(max_length=20)] = "",
    busca: str = "",
    lista: Annotated[str, Query(max_length=100)] = "",
    ano: Year = "2022",
    servico: Service = "taxi",
    dias: Days = str(DEFAULT_DEMAND_DAYS),
) -> Response:
    """Show a municipality's plan: figures, chart, map, areas, candidates, vehicles, CSV."""
    from planning._errors import PlanningError

    names = municipality_names()
    with_rules = municipalities_with_rules()
    in_registry = municipalities_in_registry(session)
    context: dict[str, Any] = {
        "names": names,
        "with_rules": {
            code: " e ".join(SERVICE_LABELS.get(s, s) for s in services)
            for code, services in with_rules.items()
        },
        "in_registry": [c for c in in_registry if c in names],
        "years": YEAR_LABELS,
        "services": SERVICE_LABELS,
        "demand_days": DEMAND_DAYS,
        "busca": busca,
        "matches": [],
        "found": None,
        "lista": "",
        "also": [],
        "error": None,
        "computed": None,
        "fmt": fmt,
        "tables": TABLES,
    }
    busca = busca[:100]
    chosen = municipio.strip() or (in_registry[0] if in_registry else DEFAULT_MUNICIPALITY)
    status = 200
    if lista.strip() and lista.strip() == busca.strip() and municipio.strip():
        busca = context["busca"] = ""  # the list's search unchanged: the list's choice wins
    if busca.strip():
        found = find_municipalities(busca, most=None)  # all: the list and the others
        shown = found.codes[:MAX_MATCHES]
        said = busca.strip()
        if found.total == 1 or found.exact == 1:
            chosen = found.codes[0]
            context["busca"] = ""  # found: the list shows it, a later choice in it wins
            context["also"] = most_populous(found.codes[1:], ALSO_SHOWN)
            context["also_total"] = found.total - 1
            context["also_search"] = said
        else:
            context["matches"] = shown
            context["lista"] = said
            named = (
                f"{found.exact} municípios chamados “{names[found.codes[0]][0]}”"
                if found.exact
                else ""
            )
            if not found.total:
                context["error"] = (
                    f"Nenhum município do IBGE com “{said}”: digite o código de 7 dígitos "
                    "ou parte do nome."
                )
                status = 422
            elif found.total == found.exact:
                context["found"] = f"{named}: escolha um."
            else:
                count = f"{fmt.integer(found.total)} municípios com “{said}”"
                context["found"] = f"{named + '; ' if named else ''}{count}" + (
                    ": escolha um."
                    if found.total == len(shown)
                    else f"; os {len(shown)} primeiros abaixo: escolha um ou digite mais do nome."
                )
            chosen = ""
    context["selected"] = chosen or municipio.strip()  # a failed search keeps the choice
    try:
        options = check_options(municipality=chosen, year=ano, service=servico, days=dias)
    except PlanOptionError as exc:
        context["error"], status = str(exc), 422
        options = PlanOptions(DEFAULT_MUNICIPALITY, 2022, "taxi", DEFAULT_DEMAND_DAYS)
        chosen = ""
    context["options"] = options
    if chosen:
        try:
            computed = compute_plan(session, options)
        except PlanningError as exc:
            context["error"], status = str(exc)[:1].upper() + str(exc)[1:], 422
        else:
            plan = computed["plan"]
            areas = computed["frames"]["areas"]
            top = int(areas["pickups"].max()) if areas is not None and len(areas) else 0
            context |= {
                "computed": computed,
                "plan": plan,
                "figures": figure_rows(plan),
                "chart": Markup(_chart(plan)),  # noqa: S704  (built from numbers only)
                "heat": heat_legend(top),
                "vehicles": flagged_vehicles(plan),
                "as_of": fmt.date(computed["as_of"]),
            }
    title = (
        f"Planejamento — {names[options.municipality][0]}"
        if context["computed"] is not None
        else "Planejamento"
    )
    return render(
        request,
        "planejamento/inicio.html",
        web=web,
        title=title,
        status_code=status,
        **context,
    )


def _chart(plan: dict[str, Any]) -> str:
    from planning.report import chart_svg

    return chart_svg(plan)


def _options_or_error(
    request: Request, web: WebSession, municipality: str, ano: str, servico: str, dias: str
) -> PlanOptions | Response:
    if municipality not in municipality_names():
        return _plan_error(
            request, web, f"Município '{municipality}' não está na tabela do IBGE.", 404
        )
    try:
        return check_options(municipality=municipality, year=ano, service=servico, days=dias)
    except PlanOptionError as exc:
        return _plan_error(request, web, str(exc), 422)


@router.get("/planejamento/{municipality}/mapa.json", name="web_planner_map")
def plan_map(
    request: Request,
    municipality: str,
    web: PlannerUser,
    session: SessionDep,
    ano: Year = "2022",
    servico: Service = "taxi",
    dias: Days = str(DEFAULT_DEMAND_DAYS),
) -> Response:
    """Answer the planner map's layers (GeoJSON) for the page's script."""
    from planning._errors import PlanningError

    options = _options_or_error(request, web, municipality, ano, servico, dias)
    if isinstance(options, Response):
        return options
    try:
        computed = compute_plan(session, options)
    except PlanningError as exc:
        return _plan_error(request, web, str(exc), 422)
    return JSONResponse(map_layers(computed))


@router.get("/planejamento/{municipality}/{table}.csv", name="web_planner_csv")
def plan_csv(
    request: Request,
    municipality: str,
    table: str,
    web: PlannerUser,
    session: SessionDep,
    ano: Year = "2022",
    servico: Service = "taxi",
    dias: Days = str(DEFAULT_DEMAND_DAYS),
) -> Response:
    """Answer a table of the plan as a CSV download (:data:`TABLES`)."""
    from planning._errors import PlanningError

    if table not in TABLES:
        return _plan_error(
            request,
            web,
            f"Tabela '{table}' não existe; esperado uma de {', '.join(TABLES)}.",
            404,
        )
    options = _options_or_error(request, web, municipality, ano, servico, dias)
    if isinstance(options, Response):
        return options
    try:
        computed = compute_plan(session, options)
    except PlanningError as exc:
        return _plan_error(request, web, str(exc), 422)
    body = "\ufeff" + table_csv(table, computed)  # the BOM lets spreadsheets read UTF-8
    name = f"plano-{municipality}-{options.service}-{options.year}-{table}.csv"
    return Response(
        body.encode("utf-8"),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
