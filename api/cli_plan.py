"""`pontual plan`: fleet size per inhabitants, accessible share, stand capacity, vehicle limits.

Works without a database on the bundled data (IBGE population, rulebooks); ``--fleet`` or
``--from-db`` gives the current fleet, ``--trips``/``--stands``/``--findings`` the demand side.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo

import typer

from api.inputs import check_out_file, checked_municipality, read_input, read_stands_file
from geo.calendar import DEFAULT_TIMEZONE
from maps.tiles import OSM_TILES

if TYPE_CHECKING:
    import pandas as pd


class PlanFormat(StrEnum):
    """Output formats of ``pontual plan``."""

    table = "table"
    json = "json"
    html = "html"


class Service(StrEnum):
    """Services with planning rules."""

    taxi = "taxi"
    fretamento = "fretamento"


def plan(
    municipality: Annotated[
        str,
        typer.Option(help="Código IBGE do município (7 dígitos).", callback=checked_municipality),
    ],
    year: Annotated[
        int, typer.Option(help="População: 2022 (Censo) ou 2024 (estimativa do IBGE).")
    ] = 2022,
    service: Annotated[Service, typer.Option(help="Serviço: taxi ou fretamento.")] = Service.taxi,
    output_format: Annotated[
        PlanFormat, typer.Option("--format", help="Saída: table, json ou html.")
    ] = PlanFormat.table,
    out: Annotated[Path | None, typer.Option(help="Arquivo de saída (padrão: a tela).")] = None,
    rules: Annotated[
        Path | None, typer.Option(help="Regra de planejamento (TOML com a tabela \\[planning]).")
    ] = None,
    fleet: Annotated[Path | None, typer.Option(help="Frota (CSV do contrato).")] = None,
    from_db: Annotated[
        bool, typer.Option("--from-db", help="Frota ativa do cadastro (banco de dados).")
    ] = False,
    trips: Annotated[
        Path | None, typer.Option(help="trips.csv do pontual analyze (embarques).")
    ] = None,
    stands: Annotated[
        Path | None, typer.Option(help="Pontos de táxi (GeoJSON, GeoPackage ou CSV).")
    ] = None,
    findings: Annotated[
        Path | None, typer.Option(help="findings.geojson (formação irregular de ponto).")
    ] = None,
    h3_resolution: Annotated[
        int, typer.Option("--h3-resolution", help="Resolução H3 das áreas: 8 ou 9.")
    ] = 9,
    walk_m: Annotated[
        float, typer.Option("--walk-m", help="Distância a pé até um ponto (m).")
    ] = 400.0,
    unknown_capacity: Annotated[
        int, typer.Option(help="Vagas contadas para um ponto sem 'capacity'.")
    ] = 1,
    stand_radius_m: Annotated[
        float | None, typer.Option(help="Raio (m) de pontos dados como Point sem 'radius_m'.")
    ] = None,
    min_days: Annotated[
        int, typer.Option(help="Dias distintos de formação irregular para um local candidato.")
    ] = 3,
    top: Annotated[int, typer.Option(help="Quantas áreas com falta de pontos listar.")] = 10,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Data de referência (AAAA-MM-DD); padrão hoje.")
    ] = None,
    due_within_days: Annotated[
        int, typer.Option(help="Vistoria que vence em até N dias é listada.")
    ] = 30,
    tiles: Annotated[
        str,
        typer.Option(
            help="URL dos tiles do mapa base (padrão: OpenStreetMap); 'none' para mapa sem fundo.",
            show_default=False,
        ),
    ] = OSM_TILES,
) -> None:
    """Planejamento: frota permitida pela população, acessíveis, pontos contra demanda, veículos."""
    from fleet.loaders import read_fleet
    from planning.compose import compose_plan
    from planning.report import render_html, render_json, render_table
    from tracking.detectors.findings import read_findings_geojson

    if fleet is not None and from_db:
        typer.secho("erro: use --fleet ou --from-db, não ambos", err=True, fg=typer.colors.RED)
        raise typer.Exit(2)
    reference = _as_of(as_of)
    if out is not None:
        check_out_file(out)
    fleet_frame = None
    fleet_source = None
    if rules is not None:
        from planning.rules import read_planning_rules

        read_input(rules, read_planning_rules, flag="--rules")
    if fleet is not None:
        fleet_frame = read_input(
            fleet, lambda p: read_fleet(p, municipality=municipality), flag="--fleet"
        )
        fleet_source = fleet.name
    elif from_db:
        fleet_frame = _registry_fleet(municipality, reference, service.value)
        fleet_source = "cadastro (banco de dados)" if fleet_frame is not None else None
    trip_frame = _read_trips(trips)
    stand_frame = None
    if stands:
        stand_frame = read_stands_file(stands, radius_m=stand_radius_m)
        for note in stand_frame.attrs.get("notes", []):
            typer.echo(f"aviso: {note}", err=True)
    found = read_input(findings, read_findings_geojson, flag="--findings") if findings else None
    plan_data, frames = compose_plan(
        municipality=municipality,
        year=year,
        service=service.value,
        as_of=reference,
        rules_path=rules,
        fleet=fleet_frame,
        fleet_source=fleet_source,
        fleet_is_active=from_db,
        trips=trip_frame,
        stands=stand_frame,
        findings=found,
        h3_resolution=h3_resolution,
        walk_m=walk_m,
        unknown_capacity_spaces=unknown_capacity,
        min_days=min_days,
        top_areas=top,
        due_within_days=due_within_days,
    )
    if output_format is PlanFormat.json:
        text = render_json(plan_data)
    elif output_format is PlanFormat.html:
        from maps.planner import planner_map
        from planning.io import bundled_boundary

        fmap = planner_map(
            areas=frames["areas"],
            coverage=frames["coverage"],
            candidates=frames["candidates"],
            stands=frames["stands"],
            boundary=bundled_boundary(municipality),
            walk_m=walk_m,
            tiles=None if tiles.lower() == "none" else tiles,
        )
        text = render_html(plan_data, map_html=fmap.get_root().render())
    else:
        text = render_table(plan_data)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        typer.echo(f"Plano gravado em {out}")


def _as_of(value: str | None) -> dt.date:
    if value is None:
        return dt.datetime.now(ZoneInfo(DEFAULT_TIMEZONE)).date()
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        typer.secho(
            f"erro: '--as-of' era {value!r}; esperado AAAA-MM-DD", err=True, fg=typer.colors.RED
        )
        raise typer.Exit(2) from None


def _read_trips(path: Path | None) -> pd.DataFrame | None:
    if path is None:
        return None
    from planning.io import read_trips

    return read_input(path, read_trips, flag="--trips")


def _registry_fleet(municipality: str, as_of: dt.date, service: str) -> pd.DataFrame | None:
    from api.cli_db import database_url
    from db.engine import make_engine
    from db.fleet.store import active_fleet_from_db

    engine = make_engine(database_url())
    try:
        with engine.connect() as conn:
            return active_fleet_from_db(
                conn=conn, municipality=municipality, as_of=as_of, service=service
            )
    finally:
        engine.dispose()
