"""The plan of a municipality as plain data, and its renderings: text table, JSON, HTML.

:func:`build_plan` assembles the figures (JSON-ready dict); :func:`render_table` and
:func:`render_html` present them in pt-BR. The HTML report carries an inline SVG chart (fleet
against the allowed range, accessible vehicles against the required) and the planner map.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from decimal import Decimal
from typing import Any

import geopandas as gpd
import pandas as pd

from enforcement.rulebook import Planning
from planning.rules import RULES_FLAG_HINT
from planning.sizing import accessible_required, allowed_fleet, gap
from planning.vehicles import count_accessible, vehicle_constraints

SERVICE_LABELS = {"taxi": "táxi", "fretamento": "fretamento assistencial"}
CENSUS_YEAR = 2022
"""The latest census in the bundled population tables."""


NO_AGE_RULE = "idade não verificada (nenhuma idade máxima configurada para o município)"
"""What a plan says of the vehicles' age when the municipality's rule gives no maximum."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.date | dt.datetime | pd.Timestamp):
        return value.isoformat()
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def rule_summary(rule: Planning, *, source: dict[str, Any] | None) -> dict[str, Any]:
    """Return a rule as plain data, with the rounding applied to its sizing written out."""
    if rule.inhabitants_per_taxi is not None:
        rounding = (
            f"frota_min = frota_max = floor(população / {rule.inhabitants_per_taxi}): "
            "proporção fixa; cada táxi tem os seus habitantes"
        )
    elif rule.has_sizing:
        parts = []
        if rule.inhabitants_per_taxi_max is not None:
            parts.append(f"frota_min = ceil(população / {rule.inhabitants_per_taxi_max})")
        if rule.inhabitants_per_taxi_min is not None:
            parts.append(f"frota_max = floor(população / {rule.inhabitants_per_taxi_min})")
        rounding = "; ".join(parts) + " (arredondamento a favor do cumprimento)"
    else:
        rounding = None
    return {
        "source": source,
        "population": rule.population,
        "inhabitants_per_taxi": rule.inhabitants_per_taxi,
        "inhabitants_per_taxi_min": rule.inhabitants_per_taxi_min,
        "inhabitants_per_taxi_max": rule.inhabitants_per_taxi_max,
        "rounding": rounding,
        "accessible_share_min": rule.accessible_share_min,
        "accessible_one_in": rule.accessible_one_in,
        "max_vehicle_age_years": rule.max_vehicle_age_years,
        "age_counted_from": rule.age_counted_from,
        "inspection_bands": [
            {
                "age_min_years": b.age_min_years,
                "age_max_years": b.age_max_years,
                "interval_days": b.interval_days,
                "provision": b.provision,
            }
            for b in rule.inspection_bands
        ],
        "note": rule.note,
    }


def provisions(rule: Planning) -> list[dict[str, str | None]]:
    """Return the provisions the rule applies, each with its verbatim excerpt."""
    found = [
        ("frota por habitantes", rule.provision, rule.excerpt),
        ("população de referência", rule.population_provision, rule.population_excerpt),
        ("frota acessível", rule.accessible_provision, rule.accessible_excerpt),
        ("idade máxima do veículo", rule.age_provision, rule.age_excerpt),
        ("contagem da idade", rule.age_basis_provision, rule.age_basis_excerpt),
        *(("vistoria periódica", b.provision, b.excerpt) for b in rule.inspection_bands),
    ]
    return [
        {"topic": topic, "provision": prov, "excerpt": text}
        for topic, prov, text in found
        if prov is not None or text is not None
    ]


def unknown_text(vehicles: dict[str, Any]) -> str:
    """Say (pt-BR) how many vehicles the registry gives no inspection date or year: unchecked."""
    parts = [f"sem data de vistoria no cadastro: {vehicles['unknown_inspection']}"]
    if vehicles["max_age_years"] is not None:
        parts.append(f"sem ano (idade não verificada): {vehicles['unknown_age']}")
    return "; ".join(parts)


def _records(frame: pd.DataFrame | None, columns: list[str], top: int | None = None) -> list[Any]:
    if frame is None or len(frame) == 0:
        return []
    head = frame if top is None else frame.head(top)
    return [
        {c: _jsonable(v) for c, v in zip(columns, row, strict=True)}
        for row in head[columns].itertuples(index=False, name=None)
    ]


def build_plan(
    *,
    population: dict[str, Any],
    service: str = "taxi",
    rule: Planning | None,
    rule_source: dict[str, Any] | None = None,
    no_rule_message: str | None = None,
    fleet: pd.DataFrame | None = None,
    fleet_source: str | None = None,
    as_of: dt.date,
    areas: gpd.GeoDataFrame | None = None,
    candidates: gpd.GeoDataFrame | None = None,
    pickups_total: int | None = None,
    h3_resolution: int | None = None,
    walk_m: float | None = None,
    top_areas: int = 10,
    due_within_days: int = 30,
) -> dict[str, Any]:
    """Assemble the plan of a municipality.

    Parameters
    ----------
    population : dict
        As from :func:`planning.population.population_for`.
    service : str
        ``taxi`` or ``fretamento``.
    rule : Planning or None
        The planning rule; None when no rule is configured (``no_rule_message`` says so).
    rule_source : dict, optional
        Where the rule comes from (rulebook file and law, or the ``--rules`` file).
    no_rule_message : str, optional
        pt-BR message used when ``rule`` is None.
    fleet : pandas.DataFrame, optional
        The vehicles in operation (:func:`planning.vehicles.active_fleet`); None: not known.
    fleet_source : str, optional
        Where the fleet comes from (file name, or the registry).
    as_of : datetime.date
        Reference date (vehicle ages, inspection validity).
    areas, candidates : geopandas.GeoDataFrame, optional
        :func:`planning.demand.demand_vs_capacity` and :func:`planning.demand.candidate_sites`.
    pickups_total : int, optional
        Trips read (to report pickups without a valid position).
    h3_resolution, walk_m : optional
        Parameters of ``areas``, reported with them.
    top_areas : int
        How many of the areas most lacking stands to list.
    due_within_days : int
        Inspection seals expiring within this many days are listed as due.

    Returns
    -------
    dict
        JSON-ready; keys ``municipality``, ``municipality_name``, ``uf``, ``service``, ``year``,
        ``population``, ``population_source``, ``rule``, ``fleet_min``, ``fleet_max``,
        ``fleet_current``, ``fleet_gap``, ``accessible_min``, ``accessible_current``,
        ``accessible_gap``, ``provisions``, ``areas``, ``candidates``, ``vehicles``, ``notes``.
    """
    pop = int(population["population"])
    notes: list[str] = []
    fleet_min = fleet_max = None
    if rule is not None and rule.has_sizing:
        fleet_min, fleet_max = allowed_fleet(
            pop,
            inhabitants_per_taxi=rule.inhabitants_per_taxi,
            inhabitants_per_taxi_min=rule.inhabitants_per_taxi_min,
            inhabitants_per_taxi_max=rule.inhabitants_per_taxi_max,
        )
        if rule.population == "census" and population["kind"] != "census":
            notes.append(
                "a lei manda usar o censo demográfico mais recente: com a estimativa "
                f"{population['year']} os números são apenas referência; use a população do "
                f"censo de {CENSUS_YEAR}"
            )
    elif rule is not None:
        notes.append("a regra não dimensiona a frota por habitantes")
    fleet_current = None if fleet is None else len(fleet)
    accessible_current = None if fleet is None else count_accessible(fleet)
    if fleet is not None and accessible_current is None:
        notes.append("a frota informada não diz quais veículos são acessíveis")

    accessible_min = None
    accessible_basis = None
    if rule is not None and (rule.accessible_share_min or rule.accessible_one_in):
        basis_fleet = fleet_current if fleet_current is not None else fleet_max
        accessible_basis = (
            "frota atual"
            if fleet_current is not None
            else ("frota máxima permitida" if fleet_max is not None else None)
        )
        if basis_fleet is not None:
            accessible_min = accessible_required(
                basis_fleet, share_min=rule.accessible_share_min, one_in=rule.accessible_one_in
            )
        else:
            notes.append("acessíveis exigidos dependem da frota utilizada: informe a frota")

    constraints = None
    if fleet is not None:  # without a rule: the seals' dates, not the age (no maximum given)
        constraints = vehicle_constraints(
            fleet,
            as_of=as_of,
            max_age_years=rule.max_vehicle_age_years if rule else None,
            age_counted_from=rule.age_counted_from if rule else "manufacture",
            inspection_bands=rule.inspection_bands if rule else (),
            due_within_days=due_within_days,
        )
    vehicles: dict[str, Any] = {
        "as_of": as_of.isoformat(),
        "max_age_years": rule.max_vehicle_age_years if rule else None,
        "checked": 0 if constraints is None else len(constraints),
        "unknown_age": 0 if constraints is None else int(constraints["age_years"].isna().sum()),
        "unknown_inspection": 0
        if constraints is None
        else int(constraints["inspection_status"].eq("sem data").sum()),
        "over_age": [],
        "inspection": [],
    }
    if constraints is not None and len(constraints):
        cols = list(constraints.columns)
        vehicles["over_age"] = _records(constraints[constraints["over_age"]], cols)
        flagged = constraints["inspection_status"].isin(
            ["vencida", "a vencer", "além do intervalo"]
        )
        vehicles["inspection"] = _records(constraints[flagged], cols)

    area_cols = [c for c in (areas.columns if areas is not None else []) if c != "geometry"]
    cand_cols = [
        c for c in (candidates.columns if candidates is not None else []) if c != "geometry"
    ]
    area_block: dict[str, Any] = {
        "h3_resolution": h3_resolution,
        "walk_m": walk_m,
        "cells": 0 if areas is None else len(areas),
        "pickups": None if areas is None else int(areas["pickups"].sum()),
        "pickups_unlocated": (
            None
            if areas is None or pickups_total is None
            else int(pickups_total - areas["pickups"].sum())
        ),
        "cells_without_stand": (
            None if areas is None else int((areas["stands_nearby"] == 0).sum())
        ),
        "most_lacking": _records(areas, area_cols, top=top_areas),
    }
    out = {
        "municipality": population["municipality"],
        "municipality_name": population["name"],
        "uf": population["uf"],
        "service": service,
        "year": population["year"],
        "population": pop,
        "population_kind": population["kind"],
        "population_source": population["source"],
        "rule": None if rule is None else rule_summary(rule, source=rule_source),
        "rule_message": no_rule_message if rule is None else None,
        "fleet_min": fleet_min,
        "fleet_max": fleet_max,
        "fleet_current": fleet_current,
        "inhabitants_per_taxi": round(pop / fleet_current) if fleet_current else None,
        "fleet_source": fleet_source,
        "fleet_gap": (
            gap(fleet_current, minimum=fleet_min, maximum=fleet_max)
            if fleet_min is not None or fleet_max is not None
            else None
        ),
        "accessible_min": accessible_min,
        "accessible_basis": accessible_basis,
        "accessible_current": accessible_current,
        "accessible_gap": (
            _accessible_gap(
                accessible_current, accessible_min, fleet_known=fleet_current is not None
            )
            if accessible_min is not None
            else None
        ),
        "provisions": [] if rule is None else provisions(rule),
        "areas": area_block,
        "candidates": _records(candidates, cand_cols),
        "vehicles": vehicles,
        "notes": notes,
    }
    result: dict[str, Any] = _jsonable(out)
    return result


def _accessible_gap(current: int | None, minimum: int, *, fleet_known: bool) -> dict[str, Any]:
    """Return the accessible vehicles against the minimum.

    A known fleet that does not say which vehicles are accessible is told so: the fleet is not
    the unknown.
    """
    out = gap(current, minimum=minimum)
    if out["status"] == "unknown" and fleet_known:
        out["message"] = "acessíveis desconhecidos: a frota não diz quais veículos são acessíveis"
    return out


# ------------------------------------------------------------------------------- rendering


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}".replace(",", ".")
    return str(value)


def _tenths(value: float) -> str:
    """``920.8`` → ``"920,8"``; thousands with a dot."""
    return f"{value:,.1f}".replace(",", "_").replace(".", ",").replace("_", ".")


def _taxis(count: int) -> str:
    return f"{_fmt(count)} {'táxi' if count == 1 else 'táxis'}"


def _quotient(population: int, divisor: int) -> str:
    """Say ``population / divisor``: the whole number when exact, else cut to one decimal."""
    if population % divisor == 0:
        return f"exatamente {_fmt(population // divisor)}"
    return _tenths(math.floor(population * 10 / divisor) / 10)


def _bound(name: str, result: int | None, population: int | None, divisor: int, *, up: bool) -> str:
    """Say how one bound of the fleet comes from the population, in words."""
    way = "para cima" if up else "para baixo"
    most = "máximo" if up else "mínimo"
    per_taxi = f"{_fmt(divisor)} (o {most} de habitantes por táxi)"
    if population is None or result is None:
        return f"{name}: a população dividida por {per_taxi}, arredondada {way}."
    said = f"{name}: {_taxis(result)}, pois {_fmt(population)}"
    said += f" habitantes divididos por {per_taxi} dão {_quotient(population, divisor)}"
    return said + ("." if population % divisor == 0 else f", arredondado {way}.")


def rounding_sentence(plan: dict[str, Any]) -> str | None:
    """Say in plain pt-BR how the rule's bounds round the fleet (the plan's own figures).

    The arithmetic of :func:`planning.sizing.allowed_fleet`, told with the population and the
    plan's ``fleet_min`` and ``fleet_max``: with a range of inhabitants per taxi, the minimum
    comes from the most inhabitants per taxi rounded up and the maximum from the fewest
    rounded down; a fixed proportion gives both, rounded down. None without a sizing rule.
    """
    rule = plan.get("rule") or {}
    if not rule.get("rounding"):
        return None
    population = plan.get("population")
    fixed = rule.get("inhabitants_per_taxi")
    if fixed is not None:
        head = f"Um táxi para cada {_fmt(fixed)} habitantes"
        fleet = plan.get("fleet_max")
        if population is None or fleet is None:
            return (
                f"{head}: a frota mínima e a máxima são a população dividida por "
                f"{_fmt(fixed)}, arredondada para baixo (cada táxi precisa dos seus "
                "habitantes)."
            )
        exact = population % fixed == 0
        return (
            f"{head}: {_fmt(population)} habitantes divididos por {_fmt(fixed)} "
            f"dão {_quotient(population, fixed)}"
            + ("" if exact else ", arredondado para baixo")
            + f"; a frota mínima e a máxima são {_taxis(fleet)} (cada "
            "táxi precisa dos seus habitantes)."
        )
    parts = []
    most = rule.get("inhabitants_per_taxi_max")
    if most is not None:
        parts.append(_bound("Frota mínima", plan.get("fleet_min"), population, most, up=True))
    fewest = rule.get("inhabitants_per_taxi_min")
    if fewest is not None:
        parts.append(_bound("Frota máxima", plan.get("fleet_max"), population, fewest, up=False))
    return " ".join([*parts, "Os arredondamentos favorecem o cumprimento da lei."])


def cli_hints(plan: dict[str, Any]) -> list[str]:
    """Return the ``pontual plan`` options that act on what the plan lacks (pt-BR).

    The plan's messages and notes say it in words (the console shows them); the command-line
    renderings (:func:`render_table`, :func:`render_html`) add these.
    """
    rule = plan["rule"]
    if rule is None:
        return [RULES_FLAG_HINT]
    if rule["population"] == "census" and plan["population_kind"] != "census":
        return [f"Com a população do censo: --year {CENSUS_YEAR}."]
    return []


def render_table(plan: dict[str, Any]) -> str:
    """Return the plan as pt-BR text for the terminal."""
    lines = [
        f"Planejamento — {plan['municipality_name']}/{plan['uf']} ({plan['municipality']}), "
        f"serviço de {SERVICE_LABELS.get(plan['service'], plan['service'])}",
        f"População ({plan['year']}): {_fmt(plan['population'])} — {plan['population_source']}",
    ]
    rule = plan["rule"]
    if rule is None:
        lines.append(plan["rule_message"] or "nenhuma regra configurada")
    else:
        source = rule["source"] or {}
        lines.append(f"Regra: {source.get('law') or source.get('file') or '—'}")
        rounding = rounding_sentence(plan)
        if rounding:
            lines.append(f"  {rounding}")
        lines += [
            f"Frota permitida: mínimo {_fmt(plan['fleet_min'])}, máximo {_fmt(plan['fleet_max'])}",
            f"Frota atual: {_fmt(plan['fleet_current'])}"
            + (f" ({plan['fleet_source']})" if plan["fleet_source"] else ""),
        ]
        if plan["fleet_gap"]:
            lines.append(f"  {plan['fleet_gap']['message']}")
        if plan["accessible_min"] is not None or rule["accessible_share_min"] is not None:
            lines.append(
                f"Acessíveis exigidos: {_fmt(plan['accessible_min'])}"
                + (f" (sobre a {plan['accessible_basis']})" if plan["accessible_basis"] else "")
                + f"; presentes: {_fmt(plan['accessible_current'])}"
            )
            if plan["accessible_gap"]:
                lines.append(f"  {plan['accessible_gap']['message']}")
    for p in plan["provisions"]:
        lines.append(f"  [{p['provision']}] {p['excerpt']}")
    areas = plan["areas"]
    if areas["cells"]:
        lines.append(
            f"Demanda: {_fmt(areas['pickups'])} embarques em {areas['cells']} células H3 "
            f"(res. {areas['h3_resolution']}); {areas['cells_without_stand']} sem ponto a "
            f"{areas['walk_m']:g} m"
        )
        lines.append("Áreas com maior falta de pontos (célula, embarques, vagas, índice):")
        for a in areas["most_lacking"]:
            lines.append(
                f"  {a['cell']}  {a['pickups']:>6}  {a['spaces']:>4}  {a['lack_score']:.1f}"
            )
    if plan["candidates"]:
        lines.append("Locais candidatos (formação irregular recorrente):")
        for c in plan["candidates"]:
            lines.append(
                f"  {c['lat']:.5f}, {c['lon']:.5f}: {c['n_days']} dias, {c['n_vehicles']} veículos"
            )
    v = plan["vehicles"]
    if v["checked"]:
        age = (
            f"acima da idade máxima: {len(v['over_age'])}"
            if v["max_age_years"] is not None
            else NO_AGE_RULE
        )
        lines.append(
            f"Veículos verificados: {v['checked']}; {age}; "
            f"vistoria vencida ou a vencer: {len(v['inspection'])}; {unknown_text(v)}"
        )
        for row in v["over_age"]:
            lines.append(f"  {row['vehicle_id']}: {'; '.join(row['issues'])}")
        for row in v["inspection"]:
            if not row["over_age"]:
                lines.append(f"  {row['vehicle_id']}: {'; '.join(row['issues'])}")
    for note in plan["notes"]:
        lines.append(f"Obs.: {note}")
    lines += cli_hints(plan)
    return "\n".join(lines) + "\n"


def render_json(plan: dict[str, Any]) -> str:
    """Return the plan as indented JSON."""
    return json.dumps(plan, ensure_ascii=False, indent=2) + "\n"


_GREEN, _RED, _BLUE, _GREY = "#2e7d32", "#c62828", "#1565c0", "#9e9e9e"
_MUTED = "#595959"
"""Grey of the chart's secondary words (7:1 on white; the bars' grey is 2.7:1)."""


def _axis_end(value: float) -> int:
    """Return the round end of an axis: the first 1, 2, 2.5, 5 × 10^k above 1.1 × value."""
    target = max(value, 1) * 1.1
    power = 10.0 ** math.floor(math.log10(target))
    step = next(m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= target)
    return max(1, math.ceil(step * power))


def chart_svg(plan: dict[str, Any], *, width: int = 640) -> str:
    """Return an inline SVG: the fleet against its allowed range, accessible against required.

    Two panels, each with its own axis from 0 and its end value written: the accessible
    vehicles are a few dozen where the fleet is thousands, so one scale would hide them, and
    two scales on one axis would read as one. The SVG scales to its container's width.
    """
    lo, hi, cur = plan["fleet_min"], plan["fleet_max"], plan["fleet_current"]
    a_min, a_cur = plan["accessible_min"], plan["accessible_current"]
    left, right, panel_h = 100, 40, 70
    span = width - left - right
    height = panel_h * 2 + 10

    def axis(y: float, end: float) -> str:
        """Draw the panel's axis from 0 to ``end`` at height ``y``, both ends labelled."""
        return (
            f'<line class="axis" x1="{left}" y1="{y}" x2="{left + span}" y2="{y}" stroke="#555"/>'
            f'<line x1="{left}" y1="{y - 40}" x2="{left}" y2="{y + 4}" stroke="#333"/>'
            f'<line x1="{left + span}" y1="{y}" x2="{left + span}" y2="{y + 4}" stroke="#555"/>'
            f'<text x="{left}" y="{y + 16}" font-size="11" fill="{_MUTED}">0</text>'
            f'<text x="{left + span}" y="{y + 16}" font-size="11" fill="{_MUTED}" '
            f'text-anchor="end">{_fmt(end)}</text>'
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="plan-chart" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" '
        'aria-label="Frota e acessíveis, cada um na sua escala">',
        '<text x="8" y="30" font-size="13">Frota</text>',
        f'<text x="8" y="46" font-size="11" fill="{_MUTED}">veículos</text>',
    ]
    top = _axis_end(max(v for v in (lo, hi, cur, 1) if v is not None))

    def x(v: float) -> float:
        return left + span * v / top

    if lo is not None and hi is not None and lo <= hi:
        parts.append(
            f'<rect class="allowed" x="{x(lo):.1f}" y="14" width="{max(x(hi) - x(lo), 2):.1f}" '
            f'height="22" fill="{_GREEN}" fill-opacity="0.35" stroke="{_GREEN}">'
            f"<title>permitida: {_fmt(lo)}–{_fmt(hi)}</title></rect>"
            f'<text x="{x(lo):.1f}" y="48" font-size="11" fill="{_GREEN}">mín {_fmt(lo)}</text>'
            f'<text x="{x(hi):.1f}" y="10" font-size="11" fill="{_GREEN}" '
            f'text-anchor="end">máx {_fmt(hi)}</text>'
        )
    if cur is not None:
        ok = (lo is None or cur >= lo) and (hi is None or cur <= hi)
        colour = _BLUE if ok else _RED
        anchor = "end" if x(cur) > left + span * 0.8 else "start"
        shift = -4 if anchor == "end" else 4
        parts.append(
            f'<line class="current" x1="{x(cur):.1f}" y1="10" x2="{x(cur):.1f}" y2="40" '
            f'stroke="{colour}" stroke-width="3"><title>atual: {_fmt(cur)}</title></line>'
            f'<text x="{x(cur) + shift:.1f}" y="30" font-size="11" fill="{colour}" '
            f'text-anchor="{anchor}">atual {_fmt(cur)}</text>'
        )
    else:
        parts.append(
            f'<text x="{left + 6}" y="30" font-size="11" fill="{_MUTED}">'
            "frota atual desconhecida</text>"
        )
    parts.append(axis(52, top))
    y2 = panel_h + 10
    parts.append(
        f'<text x="8" y="{y2 + 16}" font-size="13">Acessíveis</text>'
        f'<text x="8" y="{y2 + 32}" font-size="11" fill="{_MUTED}">veículos</text>'
    )
    if a_min is not None or a_cur is not None:
        a_top = _axis_end(max(v for v in (a_min, a_cur, 1) if v is not None))

        def xa(v: float) -> float:
            return left + span * v / a_top

        if a_min is not None:
            parts.append(
                f'<rect class="required" x="{left}" y="{y2 + 4}" width="{xa(a_min) - left:.1f}" '
                f'height="12" fill="{_GREY}"><title>exigidos: {_fmt(a_min)}</title></rect>'
                f'<text x="{xa(a_min) + 4:.1f}" y="{y2 + 14}" font-size="11">'
                f"exigidos {_fmt(a_min)}</text>"
            )
        if a_cur is not None:
            ok = a_min is None or a_cur >= a_min
            parts.append(
                f'<rect class="present" x="{left}" y="{y2 + 20}" '
                f'width="{max(xa(a_cur) - left, 1):.1f}" height="12" '
                f'fill="{_BLUE if ok else _RED}"><title>presentes: {_fmt(a_cur)}</title></rect>'
                f'<text x="{xa(a_cur) + 4:.1f}" y="{y2 + 30}" font-size="11">'
                f"presentes {_fmt(a_cur)}</text>"
            )
        parts.append(axis(y2 + 42, a_top))
    else:
        parts.append(
            f'<text x="{left + 6}" y="{y2 + 16}" font-size="11" fill="{_MUTED}">'
            "sem regra ou sem frota</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    if not rows:
        return "<p class='empty'>nenhum</p>"
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell(r.get(key)))}</td>" for key, _ in columns)
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;
font-size:13px;text-align:left}blockquote{margin:4px 0 10px 12px;font-size:13px;color:#444}
.figures td:first-child{font-weight:600}.note{color:#6d4c41}
iframe{width:100%;height:560px;border:1px solid #ccc}#plan-chart{max-width:640px}
"""


def render_html(plan: dict[str, Any], *, map_html: str | None = None) -> str:
    """Return the HTML report: figures, the SVG chart, provisions, areas, vehicles and the map.

    Parameters
    ----------
    plan : dict
        As from :func:`build_plan`.
    map_html : str, optional
        A complete HTML document of the planner map (``maps.planner``), embedded in an iframe
        (``srcdoc``) so that it keeps its own offline Leaflet.
    """
    esc = html.escape
    title = f"Planejamento — {plan['municipality_name']}/{plan['uf']}"
    figures = [
        ("Município", f"{plan['municipality_name']}/{plan['uf']} ({plan['municipality']})"),
        ("Serviço", SERVICE_LABELS.get(plan["service"], plan["service"])),
        ("População", f"{_fmt(plan['population'])} ({plan['year']}; {plan['population_source']})"),
        ("Frota mínima", _fmt(plan["fleet_min"])),
        ("Frota máxima", _fmt(plan["fleet_max"])),
        ("Frota atual", _fmt(plan["fleet_current"])),
        ("Habitantes por táxi (frota atual)", _fmt(plan["inhabitants_per_taxi"])),
        ("Situação da frota", (plan["fleet_gap"] or {}).get("message") or "—"),
        ("Acessíveis exigidos", _fmt(plan["accessible_min"])),
        ("Acessíveis presentes", _fmt(plan["accessible_current"])),
        ("Situação dos acessíveis", (plan["accessible_gap"] or {}).get("message") or "—"),
    ]
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in figures)
    parts = [
        "<!DOCTYPE html><html lang='pt-BR'><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    if plan["rule"] is None:
        parts.append(f"<p class='note' id='no-rule'>{esc(plan['rule_message'] or '')}</p>")
    elif rounding := rounding_sentence(plan):
        parts.append(f"<p>Arredondamento: {esc(rounding)}</p>")
    parts += [f"<table class='figures'>{rows}</table>", "<h2>Frota e acessíveis</h2>"]
    parts.append(chart_svg(plan))
    if plan["provisions"]:
        parts.append("<h2>Dispositivos legais</h2>")
        for p in plan["provisions"]:
            parts.append(
                f"<p><b>{esc(p['topic'])}</b> — {esc(p['provision'] or '')}</p>"
                f"<blockquote>{esc(p['excerpt'] or '')}</blockquote>"
            )
    areas = plan["areas"]
    parts.append("<h2>Demanda e capacidade dos pontos</h2>")
    if areas["cells"]:
        parts.append(
            f"<p>{_fmt(areas['pickups'])} embarques em {areas['cells']} células H3 (resolução "
            f"{areas['h3_resolution']}); {areas['cells_without_stand']} sem ponto a "
            f"{areas['walk_m']:g} m a pé.</p>"
        )
        parts.append(
            _table(
                areas["most_lacking"],
                [
                    ("cell", "Célula H3"),
                    ("pickups", "Embarques"),
                    ("stands_nearby", "Pontos próximos"),
                    ("spaces", "Vagas"),
                    ("lack_score", "Embarques/(vagas+1)"),
                ],
            )
        )
    else:
        parts.append("<p class='empty'>sem viagens (--trips) ou pontos (--stands)</p>")
    parts.append("<h2>Locais candidatos</h2>")
    parts.append(
        _table(
            plan["candidates"],
            [
                ("lat", "Lat"),
                ("lon", "Lon"),
                ("n_days", "Dias"),
                ("n_vehicles", "Veículos"),
                ("pickups_in_cell", "Embarques na célula"),
                ("nearest_stand_m", "Ponto mais próximo (m)"),
            ],
        )
    )
    v = plan["vehicles"]
    vcols = [
        ("vehicle_id", "Veículo"),
        ("year", "Ano"),
        ("age_years", "Idade"),
        ("age_basis", "Contada do"),
        ("inspection_valid_until", "Vistoria válida até"),
        ("inspection_interval_days", "Intervalo (dias)"),
        ("issues", "Pendências"),
    ]
    parts.append("<h2>Veículos</h2>")
    parts.append(f"<p>{v['checked']} verificados em {esc(v['as_of'])}; {esc(unknown_text(v))}.</p>")
    if v["max_age_years"] is None:
        parts.append(f"<h3>Idade</h3><p>{esc(NO_AGE_RULE)}.</p>")
    else:
        parts.append("<h3>Acima da idade máxima</h3>" + _table(v["over_age"], vcols))
    parts.append("<h3>Vistoria vencida ou a vencer</h3>" + _table(v["inspection"], vcols))
    for note in plan["notes"]:
        parts.append(f"<p class='note'>Obs.: {esc(note)}</p>")
    parts += [f"<p class='note cli-hint'>{esc(hint)}</p>" for hint in cli_hints(plan)]
    if map_html is not None:
        parts.append("<h2>Mapa</h2>")
        parts.append(
            f"<iframe id='planner-map' title='Mapa do planejamento' "
            f'srcdoc="{esc(map_html, quote=True)}"></iframe>'
        )
    parts.append("</body></html>")
    return "\n".join(parts)
