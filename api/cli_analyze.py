"""`pontual analyze`: the public file contract, processed in memory with no database."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from api.settings import get_settings


class PingFormat(StrEnum):
    """Input formats of ``--pings``."""

    auto = "auto"
    contract = "contract"
    porto = "porto"


MUNICIPALITY_TIMEZONES = {"1100205": "America/Porto_Velho"}
_STAGES = 7


def _is_porto(path: Path) -> bool:
    if path.suffix.lower() not in (".csv", ".gz") or not path.is_file():
        return False
    header = pd.read_csv(path, nrows=0).columns
    return "POLYLINE" in header and "TAXI_ID" in header


def analyze(
    pings: Annotated[Path, typer.Option(help="Arquivo de pings (CSV ou Parquet).")],
    stands: Annotated[Path, typer.Option(help="Pontos de táxi (GeoJSON, GeoPackage ou CSV).")],
    out: Annotated[Path, typer.Option(help="Pasta de saída.")] = Path("out"),
    fleet: Annotated[Path | None, typer.Option(help="Frota (CSV) com licenças.")] = None,
    municipality: Annotated[str | None, typer.Option(help="Código IBGE do município.")] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Último dia analisado (AAAA-MM-DD), inclusive.")
    ] = None,
    timezone: Annotated[str | None, typer.Option(help="Fuso horário dos dias locais.")] = None,
    pings_format: Annotated[
        PingFormat, typer.Option("--pings-format", help="Formato dos pings.")
    ] = PingFormat.auto,
    stand_radius_m: Annotated[
        float | None,
        typer.Option(help="Raio (m) para pontos dados como Point sem 'radius_m'."),
    ] = None,
    h3_resolution: Annotated[int | None, typer.Option(help="Resolução H3 da cobertura.")] = None,
    trip_max_gap_s: Annotated[
        float | None, typer.Option(help="Silêncio (s) que encerra uma viagem.")
    ] = None,
) -> None:
    """Analisa pings contra pontos e frota e grava os arquivos de saída do contrato."""
    from fleet.loaders import read_fleet
    from stands.layers import read_stands
    from tracking.ingest import read_pings
    from tracking.pipeline import AnalysisParams, analyze_pings, cut_at_as_of, write_outputs
    from tracking.porto import read_porto_trips

    tz = timezone or MUNICIPALITY_TIMEZONES.get(municipality or "", get_settings().timezone)
    porto = pings_format is PingFormat.porto or (
        pings_format is PingFormat.auto and _is_porto(pings)
    )
    defaults = AnalysisParams()
    params = AnalysisParams(
        timezone=tz,
        h3_resolution=h3_resolution or defaults.h3_resolution,
        trip_max_gap_s=trip_max_gap_s or defaults.trip_max_gap_s,
    )
    as_of_date = _parse_date(as_of) if as_of else None
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("Lendo e validando pings", total=_STAGES)
        if porto:
            valid, rejected, _ = read_porto_trips(pings, max_speed_kmh=params.max_speed_kmh)
        else:
            valid, rejected = read_pings(pings, max_speed_kmh=params.max_speed_kmh)
        if as_of_date is not None:
            valid = cut_at_as_of(valid, as_of=as_of_date, timezone=tz)
        bar.update(task, advance=1, description="Lendo pontos e frota")
        stand_frame = read_stands(stands, default_radius_m=stand_radius_m)
        fleet_frame = read_fleet(fleet, municipality=municipality) if fleet else None

        def step(label: str) -> None:
            bar.update(task, advance=1, description=label)

        result = analyze_pings(
            valid, rejected, stand_frame, fleet=fleet_frame, params=params, progress=step
        )
        bar.update(task, description="Gravando arquivos")
        paths = write_outputs(result, out)
        bar.update(task, completed=_STAGES, description="Concluído")
    s = result.summary
    typer.echo(
        f"{s['pings_valid']} pings válidos, {s['pings_rejected']} rejeitados; "
        f"{s['visits']} visitas ({s['boardings']} com embarque), {s['trips']} viagens, "
        f"{s['stops']} paradas."
    )
    typer.echo(f"Saídas em {out}/: " + ", ".join(p.name for p in paths))


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"'--as-of' era {text!r}; esperado AAAA-MM-DD") from None
