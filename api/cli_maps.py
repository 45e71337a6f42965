"""`pontual maps stand|enforcement|citizen|planner --out FILE.html`: maps from the contract files.

Inputs are the files of ``pontual analyze`` (``--stands``, ``--findings findings.geojson``,
``--visits stand_visits.csv``, ``--trips trips.csv``, ``--fleet``, ``--pings``); each map reads
only what it needs. The HTML is self-contained (Leaflet and our JS inlined); only the tiles of
``--tiles`` come from the network, and ``--tiles none`` draws on a plain background.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.inputs import read_input, read_stands_file
from geo.calendar import DEFAULT_TIMEZONE
from maps.tiles import OSM_TILES

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(
    help="Mapas em HTML autocontido (funcionam sem rede): pontos, fiscalização, cidadão, "
    "planejamento.",
    no_args_is_help=True,
)


Out = Annotated[Path, typer.Option("--out", help="Arquivo HTML de saída.")]
Stands = Annotated[Path, typer.Option(help="Pontos de táxi (GeoJSON, GeoPackage ou CSV).")]
Tiles = Annotated[
    str,
    typer.Option(
        help="URL dos tiles do mapa base (padrão: OpenStreetMap); 'none' para mapa sem fundo.",
        show_default=False,
    ),
]
Timezone = Annotated[str, typer.Option(help="Fuso horário das horas mostradas.")]
StandRadius = Annotated[
    float | None, typer.Option(help="Raio (m) para pontos dados como Point sem 'radius_m'.")
]


def _tiles(value: str) -> str | None:
    return None if value.lower() == "none" else value


def _instant(value: str | None, name: str) -> pd.Timestamp | None:
    import pandas as pd

    if value is None:
        return None
    try:
        ts = pd.Timestamp(value)
    except ValueError:
        ts = None
    if ts is None or pd.isna(ts) or ts.tzinfo is None:
        typer.secho(
            f"erro: '{name}' era {value!r}; esperado um instante ISO 8601 com fuso "
            "(ex.: 2024-03-04T09:30:00-03:00)",
            err=True,
            fg=typer.colors.RED,
        )
        raise typer.Exit(2)
    return ts.tz_convert("UTC")


def _read_boundary(path: Path) -> Any:
    import geopandas as gpd

    frame = gpd.read_file(path)
    return frame.to_crs(4326) if frame.crs is not None else frame.set_crs(4326)


def _save(fmap: Any, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fmap.save(str(out))
    typer.echo(f"Mapa gravado em {out}")


def _read_stands(path: Path, radius_m: float | None) -> Any:
    frame = read_stands_file(path, radius_m=radius_m)
    for note in frame.attrs.get("notes", []):
        typer.echo(f"aviso: {note}", err=True)
    return frame


def _read_findings(path: Path) -> Any:
    from tracking.detectors.findings import read_findings_geojson

    return read_input(path, read_findings_geojson, flag="--findings")


def _read_fleet(path: Path) -> Any:
    from fleet.loaders import read_fleet

    return read_input(path, read_fleet, flag="--fleet")


def _read_trips(path: Path) -> Any:
    from planning.io import read_trips

    return read_input(path, read_trips, flag="--trips")


def read_visits_csv(path: Path) -> pd.DataFrame:
    """Read ``stand_visits.csv`` (``pontual analyze``) into a visits frame (UTC instants).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If a required column is missing or an instant has no offset.
    """
    import pandas as pd

    if not path.is_file():
        msg = f"arquivo de visitas não encontrado: {path}"
        raise FileNotFoundError(msg)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    required = ("vehicle_id", "stand_id", "arrived_at", "departed_at")
    missing = [c for c in required if c not in raw.columns]
    if missing:
        msg = f"{path.name}: faltam as colunas {', '.join(missing)}"
        raise ValueError(msg)
    out = pd.DataFrame({"vehicle_id": raw["vehicle_id"], "stand_id": raw["stand_id"]})
    for col in ("arrived_at", "departed_at"):
        try:
            out[col] = pd.to_datetime(raw[col], utc=False, format="ISO8601")
        except (ValueError, TypeError) as exc:
            msg = f"{path.name}: '{col}' com instante inválido ({exc})"
            raise ValueError(msg) from None
        if raw.empty:  # header only: no visits
            out[col] = pd.Series(pd.DatetimeIndex([], tz="UTC").as_unit("ns"))
            continue
        if not isinstance(out[col].dtype, pd.DatetimeTZDtype):
            msg = f"{path.name}: '{col}' sem fuso horário; esperado ISO 8601 com offset"
            raise ValueError(msg)
        out[col] = out[col].dt.tz_convert("UTC").dt.as_unit("ns")
    out["dwell_s"] = pd.to_numeric(raw.get("dwell_s", pd.Series(dtype=str)), errors="coerce")
    if "dwell_s" not in raw.columns:
        out["dwell_s"] = (out["departed_at"] - out["arrived_at"]).dt.total_seconds()
    if "queue_position" in raw.columns:
        out["queue_position"] = pd.to_numeric(raw["queue_position"], errors="coerce").astype(
            "Int64"
        )
    for col in ("boarded", "licensed"):
        if col in raw.columns:
            lowered = raw[col].str.strip().str.lower()
            out[col] = pd.array(
                [True if v == "true" else False if v == "false" else None for v in lowered],
                dtype="boolean",
            )
    return out


def busiest_instant(visits: pd.DataFrame) -> pd.Timestamp | None:
    """Return the arrival instant with the most visits in progress (None without visits)."""
    import pandas as pd

    if visits.empty:
        return None
    arrived = pd.DatetimeIndex(visits["arrived_at"]).as_unit("ns").asi8
    departed = pd.DatetimeIndex(visits["departed_at"]).as_unit("ns").asi8
    times = sorted(set(arrived.tolist()))
    starts = pd.Series(sorted(arrived.tolist()))
    ends = pd.Series(sorted(departed.tolist()))
    t = pd.Series(times)
    present = starts.searchsorted(t, side="right") - ends.searchsorted(t, side="left")
    return pd.Timestamp(int(t.iloc[int(present.argmax())]), tz="UTC")


@app.command("stand")
def stand(
    out: Out,
    stands: Stands,
    visits: Annotated[Path, typer.Option(help="stand_visits.csv do pontual analyze.")],
    fleet: Annotated[
        Path | None, typer.Option(help="Frota (CSV) com licenças: gráfico de presença.")
    ] = None,
    trips: Annotated[
        Path | None, typer.Option(help="trips.csv: dias em que cada veículo operou.")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(help="Instante da fila (ISO 8601 com fuso); padrão: a última saída."),
    ] = None,
    busiest: Annotated[
        bool, typer.Option("--busiest", help="Usar o instante de maior ocupação do período.")
    ] = False,
    bucket: Annotated[str, typer.Option(help="Intervalo da ocupação (ex.: 15min).")] = "15min",
    timezone: Timezone = DEFAULT_TIMEZONE,
    stand_radius_m: StandRadius = None,
    tiles: Tiles = OSM_TILES,
) -> None:
    """Mapa dos pontos: ocupação × capacidade, fila, intrusos e presença dos licenciados."""
    from maps.stand import stand_map
    from stands.occupancy import occupancy

    stand_frame = _read_stands(stands, stand_radius_m)
    visit_frame = read_input(visits, read_visits_csv, flag="--visits")
    fleet_frame = _read_fleet(fleet) if fleet else None
    trip_frame = _read_trips(trips) if trips else None
    when = _instant(at, "--at") or (busiest_instant(visit_frame) if busiest else None)
    occ = occupancy(visit_frame, stand_frame, bucket=bucket) if len(visit_frame) else None
    table = None
    if fleet_frame is not None:
        table = _presence(visit_frame, fleet_frame, trip_frame, timezone)
    fmap = stand_map(
        stand_frame,
        visit_frame,
        at=when,
        occupancy=occ,
        presence=table,
        timezone=timezone,
        tiles=_tiles(tiles),
    )
    _save(fmap, out)


def _presence(
    visits: pd.DataFrame, fleet: pd.DataFrame, trips: pd.DataFrame | None, timezone: str
) -> Any:
    from stands.licences import licence_frame_from_fleet
    from stands.presence import presence

    if visits.empty:
        return None
    licences = licence_frame_from_fleet(fleet)
    start: dt.date = visits["arrived_at"].min().tz_convert(timezone).date()
    end: dt.date = visits["departed_at"].max().tz_convert(timezone).date()
    return presence(visits, licences, trips, start=start, end=end, timezone=timezone)


@app.command("enforcement")
def enforcement(
    out: Out,
    stands: Stands,
    findings: Annotated[Path, typer.Option(help="findings.geojson do pontual analyze.")],
    pings: Annotated[
        Path | None, typer.Option(help="Pings (CSV ou Parquet) para o replay no tempo.")
    ] = None,
    max_fixes: Annotated[int, typer.Option(help="Máximo de posições no replay.")] = 50_000,
    timezone: Timezone = DEFAULT_TIMEZONE,
    stand_radius_m: StandRadius = None,
    tiles: Tiles = OSM_TILES,
) -> None:
    """Mapa de fiscalização: achados por tipo, áreas de ponto irregular, desvios e replay."""
    from maps.findings import findings_map

    stand_frame = _read_stands(stands, stand_radius_m)
    found = _read_findings(findings)
    fixes = _read_pings(pings) if pings else None
    fmap = findings_map(
        stand_frame,
        found,
        fixes=fixes,
        max_fixes=max_fixes,
        complete_in=findings.name,
        timezone=timezone,
        tiles=_tiles(tiles),
    )
    _save(fmap, out)


def _read_pings(path: Path) -> pd.DataFrame:
    from tracking.ingest import read_pings

    valid, _ = read_input(path, read_pings, flag="--pings")
    return valid


@app.command("citizen")
def citizen(
    out: Out,
    stands: Stands,
    pings: Annotated[Path, typer.Option(help="Pings (CSV ou Parquet) com 'meter'.")],
    fleet: Annotated[Path, typer.Option(help="Frota (CSV) com a coluna 'accessible'.")],
    at: Annotated[
        str | None,
        typer.Option(help="Instante 'agora' (ISO 8601 com fuso); padrão: a última posição."),
    ] = None,
    recent_s: Annotated[
        float, typer.Option(help="Idade máxima (s) da última posição de um táxi mostrado.")
    ] = 600.0,
    timezone: Timezone = DEFAULT_TIMEZONE,
    stand_radius_m: StandRadius = None,
    tiles: Tiles = OSM_TILES,
) -> None:
    """Mapa do cidadão: táxis acessíveis livres agora e pontos com oferta acessível."""
    from maps.citizen import citizen_map

    fmap = citizen_map(
        _read_stands(stands, stand_radius_m),
        _read_pings(pings),
        _read_fleet(fleet),
        at=_instant(at, "--at"),
        recent_s=recent_s,
        timezone=timezone,
        tiles=_tiles(tiles),
    )
    _save(fmap, out)


@app.command("planner")
def planner(
    out: Out,
    stands: Stands,
    trips: Annotated[Path, typer.Option(help="trips.csv do pontual analyze (embarques).")],
    findings: Annotated[
        Path | None, typer.Option(help="findings.geojson: locais candidatos a novos pontos.")
    ] = None,
    boundary: Annotated[
        Path | None, typer.Option(help="Limite municipal (GeoJSON), só para desenho.")
    ] = None,
    h3_resolution: Annotated[
        int, typer.Option("--h3-resolution", help="Resolução H3 das áreas: 8 ou 9.")
    ] = 9,
    walk_m: Annotated[float, typer.Option(help="Distância a pé até um ponto (m).")] = 400.0,
    min_days: Annotated[
        int, typer.Option(help="Dias distintos de formação irregular para um candidato.")
    ] = 3,
    stand_radius_m: StandRadius = None,
    tiles: Tiles = OSM_TILES,
) -> None:
    """Mapa do planejamento: demanda por célula H3, cobertura dos pontos e locais candidatos."""
    from maps.planner import planner_map
    from planning.demand import candidate_sites, demand_vs_capacity, stand_coverage

    stand_frame = _read_stands(stands, stand_radius_m)
    trip_frame = _read_trips(trips)
    found = _read_findings(findings) if findings else None
    area = read_input(boundary, _read_boundary, flag="--boundary") if boundary else None
    areas = demand_vs_capacity(trip_frame, stand_frame, resolution=h3_resolution, walk_m=walk_m)
    candidates = (
        candidate_sites(
            found,
            stands=stand_frame,
            areas=areas,
            resolution=h3_resolution,
            min_days=min_days,
        )
        if found is not None
        else None
    )
    fmap = planner_map(
        areas=areas,
        coverage=stand_coverage(stand_frame, walk_m=walk_m),
        candidates=candidates,
        stands=stand_frame,
        boundary=area,
        walk_m=walk_m,
        tiles=_tiles(tiles),
    )
    _save(fmap, out)
