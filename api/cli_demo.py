"""`pontual demo`: the main job, on the embedded default.

Loads the bundled real data into the local PostGIS (IBGE municipalities, Porto Alegre's stands
and fleet, Porto's stands and trips as fixes), replays the Porto trips against the Porto stands in
memory (the ``pontual analyze`` pipeline), measures boarding recall against the trips' stand
labels, and writes maps, the contract files and a summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from maps.tiles import OSM_TILES

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
POA_STAND_RADIUS_M = 30.0
PORTO_STAND_RADIUS_M = 100.0
RECALL_RADII_M = (50.0, 100.0, 150.0)
TRACK_BREAK_S = 60.0  # map lines: Porto fixes come every 15 s


def _paths(data: Path) -> dict[str, Path]:
    paths = {
        "poa_stands": data / "brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson",
        "poa_fleet": data / "brazil/taxi_fleet/frota_taxi_poa_2020-03-12.csv",
        "boundaries": data / "brazil/boundaries/municipios_poa_pvh_pintobandeira.geojson",
        "census": data / "brazil/population/censo2022_populacao_municipios.csv",
        "estimate": data / "brazil/population/estimativa_populacao_municipios_2024.csv",
        "porto_stands": data / "porto/derived/taxi_stands.csv",
        "porto_trips": data / "porto/derived/trips_combined.csv",
        "porto_roads": data / "porto/network/porto_roads_libcity.csv",
        "porto_boundary": data / "porto/network/porto_boundary.geojson",
    }
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        msg = (
            f"dados da demonstração não encontrados: {', '.join(missing)}; "
            "rode a partir do repositório ou indique a pasta com --data"
        )
        raise FileNotFoundError(msg)
    return paths


def demo(
    out: Annotated[Path, typer.Option(help="Pasta de saída.")] = Path("out/demo"),
    data: Annotated[
        Path, typer.Option(help="Pasta dos dados reais incluídos.", show_default="data/ do Pontual")
    ] = DATA_DIR,
    tiles: Annotated[
        str,
        typer.Option(
            help="URL dos tiles do mapa base (padrão: OpenStreetMap); 'none' para mapa sem fundo.",
            show_default=False,
        ),
    ] = OSM_TILES,
    open_maps: Annotated[
        bool,
        typer.Option(
            "--open/--no-open",
            help="Abrir no navegador os quatro mapas (com --console: o console web).",
        ),
    ] = True,
    web_console: Annotated[
        bool,
        typer.Option(
            "--console",
            help="Depois: contas de demonstração (uma por papel), propostas de uma frota "
            "simulada e o console web no ar (pontual serve) até Ctrl+C.",
        ),
    ] = False,
    host: Annotated[str, typer.Option(help="Endereço do console web (--console).")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Porta do console web (--console).", min=1, max=65535)
    ] = 8000,
) -> None:
    """Carrega os dados reais no PostGIS local, reproduz as viagens do Porto e gera mapas.

    Com --console, deixa o console web no ar com uma entrada de demonstração por papel.
    """
    console = Console()
    paths = _paths(data)
    if web_console:
        _check_port(host, port)
    tile_url = None if tiles.lower() == "none" else tiles
    out.mkdir(parents=True, exist_ok=True)

    with console.status("Preparando o banco PostGIS local…"):
        from api.cli_db import database_url

        url = database_url()
    loaded = _load_registry(paths, url, console)
    replay = _replay_porto(paths, out, tile_url, console)
    poa_map = _poa_map(paths, out, tile_url)

    summary: dict[str, Any] = {"database": loaded, "porto_replay": replay}
    (out / "summary.json").write_text(
        json.dumps(summary, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8"
    )
    _print_tables(console, loaded, replay)
    maps = [Path(p) for p in replay["maps"].values()]
    for line in written_list(out, four=replay["maps"], boardings=Path(replay["map"]), poa=poa_map):
        typer.echo(line)
    for line in left_running(url):
        typer.echo(line)
    if web_console:
        _serve_console(url, host=host, port=port, console=console, open_page=open_maps)
        return
    from api.demo_maps import open_in_browser

    if open_maps:
        open_in_browser(maps)


def _check_port(host: str, port: int) -> None:
    """Fail before the long work when the console's address cannot be served."""
    from api.cli_serve import ServeError, listening_socket

    try:
        listening_socket(host, port, reuse_port=False).close()
    except ServeError as exc:
        typer.echo(f"Erro: {exc}", err=True)
        raise typer.Exit(1) from None


def _serve_console(url: str, *, host: str, port: int, console: Console, open_page: bool) -> None:
    """Seed the demo accounts and the simulated proposals, print the logins, run the server."""
    import os
    import threading
    import webbrowser

    from api.cli_serve import serve
    from api.demo_console import console_message, seed_console
    from api.demo_maps import has_display
    from api.settings import get_settings
    from db.engine import make_engine

    engine = make_engine(url)
    try:
        with console.status("Preparando o console web…") as status:
            done = seed_console(engine, progress=status.update)
    finally:
        engine.dispose()
    base = f"http://{host}:{port}"
    local = not get_settings().database_url
    for line in console_message(base_url=base, done=done, local_database=local):
        typer.echo(line)
    os.environ["PONTUAL_SIMULATED_DATA"] = "1"  # every page says the movements are simulated
    get_settings.cache_clear()
    if open_page and has_display():
        threading.Timer(2.0, webbrowser.open, args=(f"{base}/entrar",)).start()
    serve(host=host, port=port, workers=1, log_level="info", access_log=False)


FOUR_MAPS = {
    "pontos (supervisor)": "supervisor de ponto: quem está no ponto agora, a fila, intrusos",
    "fiscalização": "fiscalização: achados por tipo, evidência dos desvios, replay",
    "planejamento": "planejamento: embarques por célula H3 contra a cobertura dos pontos",
    "cidadão": "cidadão: táxis acessíveis livres perto (ilustrativo no Porto)",
}


def written_list(out: Path, *, four: dict[str, Any], boardings: Path, poa: Path) -> list[str]:
    """Say, in one numbered list, every file the demo wrote and what it is."""
    entries = [(Path(four[label]), FOUR_MAPS[label]) for label in FOUR_MAPS]
    entries += [
        (boardings, "Porto: pontos coloridos pelos embarques, com as viagens (demonstração)"),
        (poa, "Porto Alegre: pontos coloridos pelos prefixos licenciados (demonstração)"),
        (
            out / "porto",
            "saídas do pontual analyze no Porto (findings.geojson, trips.csv e os outros "
            "arquivos de docs/formatos.md)",
        ),
        (out / "summary.json", "resumo da demonstração (banco, recall, achados)"),
    ]
    lines = [f"\nArquivos gravados em {out}/ (os mapas 1 a 4 são os quatro mapas dos usuários):"]
    for i, (path, what) in enumerate(entries, start=1):
        lines.append(f"  {i}. {path}{'/' if path.suffix == '' else ''}")
        lines.append(f"     {what}")
    return lines


def left_running(url: str) -> list[str]:
    """Say what the demo leaves running and how to stop it."""
    from api.settings import get_settings
    from db.cluster import pgdata_path
    from db.engine import describe_url

    settings = get_settings()
    if settings.database_url:
        return [
            f"\nBanco: o servidor de DATABASE_URL ({describe_url(url)}), não gerenciado pelo "
            "Pontual: nada ficou em execução por conta da demonstração."
        ]
    return [
        f"\nFica em execução: o banco PostGIS local em {describe_url(url)} "
        f"(dados em {pgdata_path(settings.data_dir)}).",
        "Para pará-lo: pontual db stop  (sem o venv ativado: .venv/bin/pontual db stop).",
        "Os comandos que precisam do banco o iniciam de novo quando preciso.",
    ]


def _load_registry(paths: dict[str, Path], url: str, console: Console) -> dict[str, int]:
    from sqlalchemy import text

    from api.cli_import import file_as_of
    from db.engine import make_engine
    from db.fleet.store import load_fleet, load_municipalities, load_populations
    from db.stands.store import load_stands
    from db.tracking.store import copy_fixes, copy_rejected
    from fleet.loaders import PORTO_ALEGRE, read_fleet, read_municipalities, read_populations
    from stands.loaders import read_stands_registry
    from tracking.porto import read_porto_trips

    engine = make_engine(url)
    try:
        with console.status("Importando municípios e população (IBGE)…"), engine.begin() as conn:
            load_municipalities(
                conn=conn,
                municipalities=read_municipalities(
                    paths["census"], boundaries_path=paths["boundaries"]
                ),
            )
            load_populations(
                conn=conn, populations=read_populations(paths["census"], paths["estimate"])
            )
        with console.status("Importando pontos e frota de Porto Alegre…"), engine.begin() as conn:
            poa = read_stands_registry(
                paths["poa_stands"], municipality=PORTO_ALEGRE, point_radius_m=POA_STAND_RADIUS_M
            )
            load_stands(conn=conn, stands=poa, retire_missing=True)
            fleet = read_fleet(paths["poa_fleet"], municipality=PORTO_ALEGRE)
            load_fleet(conn=conn, fleet=fleet, as_of=file_as_of(None, paths["poa_fleet"]))
        with console.status("Importando pontos e viagens do Porto…"), engine.begin() as conn:
            porto = read_stands_registry(paths["porto_stands"], point_radius_m=PORTO_STAND_RADIUS_M)
            porto["stand_id"] = "PT-" + porto["stand_id"].astype(str)
            load_stands(conn=conn, stands=porto, retire_missing=False)
            pings, rejected, _ = read_porto_trips(paths["porto_trips"])
            new_fixes = copy_fixes(conn, pings, source=paths["porto_trips"].name)
            copy_rejected(conn, rejected, source=paths["porto_trips"].name)
        with engine.connect() as conn:
            counts = {
                name: int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
                for name, table in (
                    ("municipalities", "municipalities"),
                    ("stands", "stands"),
                    ("vehicles", "vehicles"),
                    ("parking_licences", "parking_licences"),
                    ("fixes", "fixes"),
                    ("rejected_fixes", "rejected_fixes"),
                )
            }
    finally:
        engine.dispose()
    counts["fixes_new_this_run"] = new_fixes
    return counts


def _replay_porto(
    paths: dict[str, Path], out: Path, tiles: str | None, console: Console
) -> dict[str, Any]:
    import geopandas as gpd

    from engines.pipeline import AnalysisParams, analyze_pings, write_outputs
    from geo.roads import build_road_graph, read_libcity_roads
    from maps.findings import findings_map
    from maps.overview import stands_trips_map
    from stands.layers import read_porto_stands
    from stands.porto_eval import boarding_recall
    from tracking.detectors.findings import KINDS
    from tracking.porto import read_porto_trips

    params = AnalysisParams(timezone="Europe/Lisbon")
    with console.status("Reproduzindo as viagens do Porto contra os 63 pontos…"):
        pings, rejected, labels = read_porto_trips(paths["porto_trips"])
        graph = build_road_graph(read_libcity_roads(paths["porto_roads"]))
        boundary = gpd.read_file(paths["porto_boundary"]).geometry.union_all()
        recall = {}
        for radius in RECALL_RADII_M:
            stands = read_porto_stands(paths["porto_stands"], radius_m=radius)
            full = radius == PORTO_STAND_RADIUS_M  # detectors on the main run only
            result = analyze_pings(
                pings,
                rejected,
                stands,
                boundary=boundary if full else None,
                roads=graph if full else None,
                kinds=KINDS if full else (),
                params=params,
            )
            recall[f"{radius:.0f}"] = boarding_recall(
                labels, pings, result.visits, result.trips, stands
            )
            if full:
                main = result
        write_outputs(main, out / "porto")

    boarded = main.visits.loc[main.visits["boarded"].fillna(False).astype(bool)]
    per_stand = main.trips["pickup_stand_id"].dropna().value_counts()
    names = main.stands.set_index("stand_id")["name"]
    tracks = _tracks(main.pings)
    fmap = stands_trips_map(
        main.stands,
        values=per_stand,
        value_label="Embarques",
        tracks=gpd.GeoDataFrame(tracks, crs=4326),
        title="Porto: embarques por ponto e viagens — Pontual",
        note=(
            f"{len(tracks):,} trechos de viagens reais do Porto (2013); pontos de raio "
            f"{PORTO_STAND_RADIUS_M:.0f} m."
        ).replace(",", "."),
        tiles=tiles,
    )
    map_path = out / "porto_map.html"
    fmap.save(str(map_path))
    findings_map(
        main.stands, main.findings, fixes=main.pings, timezone=params.timezone, tiles=tiles
    ).save(str(out / "porto" / "map.html"))
    from api.demo_maps import demo_maps

    four = demo_maps(main, out, timezone=params.timezone, tiles=tiles)
    return {
        "stand_radius_m": PORTO_STAND_RADIUS_M,
        "summary": main.summary,
        "boarded_visits": int(len(boarded)),
        "boardings_per_stand": [
            {"stand_id": sid, "name": str(names.get(sid, "")), "boardings": int(n)}
            for sid, n in per_stand.items()
        ],
        "recall_by_radius_m": recall,
        "findings_by_kind": main.summary["findings_by_kind"],
        "findings_map": str(out / "porto" / "map.html"),
        "map": str(map_path),
        "maps": {label: str(path) for label, path in four.items()},
    }


def _tracks(pings: Any) -> Any:
    """One LineString per vehicle run of 15 s fixes (the Porto trips), for the map."""
    import numpy as np
    import pandas as pd
    import shapely

    ts = pings["timestamp"].astype("int64").to_numpy() // 1_000_000_000
    veh = pings["vehicle_id"].to_numpy()
    new = np.ones(len(pings), dtype=bool)
    new[1:] = (veh[1:] != veh[:-1]) | (np.diff(ts) > TRACK_BREAK_S)
    run = np.cumsum(new) - 1
    sizes = np.bincount(run)
    keep = sizes[run] >= 2
    coords = np.column_stack([pings["lon"].to_numpy(), pings["lat"].to_numpy()])[keep]
    _, dense = np.unique(run[keep], return_inverse=True)
    lines = shapely.linestrings(coords, indices=dense)
    firsts = np.flatnonzero(new & keep)
    return pd.DataFrame(
        {
            "vehicle_id": veh[firsts],
            "trip_id": [f"{v}-{t}" for v, t in zip(veh[firsts], ts[firsts], strict=True)],
            "geometry": lines,  # one per run, in run order (= order of firsts)
        }
    )


def _poa_map(paths: dict[str, Path], out: Path, tiles: str | None) -> Path:
    from fleet.loaders import PORTO_ALEGRE, normalize_name, read_fleet
    from maps.overview import stands_trips_map
    from stands.loaders import read_stands_registry

    stands = read_stands_registry(
        paths["poa_stands"], municipality=PORTO_ALEGRE, point_radius_m=POA_STAND_RADIUS_M
    )
    note = unplaced_note(stands)
    stands = stands.loc[stands.geometry.notna()].reset_index(drop=True)
    fleet = read_fleet(paths["poa_fleet"], municipality=PORTO_ALEGRE)
    licensed = fleet["stand_names"].explode().dropna().value_counts()
    by_name = stands["name"].map(normalize_name)
    counts = by_name.map(licensed).fillna(0).astype(int)
    counts.index = stands["stand_id"]
    fmap = stands_trips_map(
        stands,
        values=counts,
        value_label="Prefixos licenciados",
        title="Porto Alegre: pontos de táxi e prefixos licenciados — Pontual",
        note=note,
        tiles=tiles,
    )
    path = out / "poa_stands_map.html"
    fmap.save(str(path))
    return path


def unplaced_note(stands: Any) -> str | None:
    """Say how many stands of a registry frame cannot be drawn, and why (``location_note``)."""
    missing = stands.loc[stands.geometry.isna()]
    if missing.empty:
        return None
    parts = []
    for why, group in missing.groupby("location_note", sort=True):
        ids = sorted(group["stand_id"].astype(str), key=lambda s: (len(s), s))
        parts.append(f"{len(ids)}: {why} ({', '.join(ids)})")
    return (
        f"{len(missing)} dos {len(stands)} pontos do arquivo não aparecem no mapa: "
        + "; ".join(parts)
        + "."
    )


def _print_tables(console: Console, loaded: dict[str, int], replay: dict[str, Any]) -> None:
    table = Table(title="Banco PostGIS local")
    table.add_column("item")
    table.add_column("total", justify="right")
    for label, key in (
        ("municípios", "municipalities"),
        ("pontos de táxi", "stands"),
        ("veículos (prefixos)", "vehicles"),
        ("licenças de estacionamento", "parking_licences"),
        ("fixes GPS gravados", "fixes"),
        ("  novos nesta execução", "fixes_new_this_run"),
        ("linhas rejeitadas (quarentena)", "rejected_fixes"),
    ):
        table.add_row(label, f"{loaded[key]:,}".replace(",", "."))
    console.print(table)

    top = Table(title="Porto: embarques por ponto (raio 100 m, 10 maiores)")
    top.add_column("ponto")
    top.add_column("nome")
    top.add_column("embarques", justify="right")
    for row in replay["boardings_per_stand"][:10]:
        top.add_row(row["stand_id"], row["name"], str(row["boardings"]))
    console.print(top)

    rec = Table(title="Porto: embarques detectados × rótulos ORIGIN_STAND (viagens tipo B)")
    for col in ("raio", "rotuladas", "1º fix no ponto", "detectadas", "recall"):
        rec.add_column(col, justify="right")
    for radius, r in replay["recall_by_radius_m"].items():
        rec.add_row(
            f"{radius} m",
            str(r["labelled"]),
            str(r["first_fix_inside"]),
            str(r["detected"]),
            f"{r['recall']:.1%}".replace(".", ","),
        )
    console.print(rec)

    found = Table(title="Porto: achados por tipo (malha OSM do centro, limite do distrito)")
    found.add_column("tipo")
    found.add_column("achados", justify="right")
    from tracking.detectors.findings import kind_name

    for kind, n in replay["findings_by_kind"].items():
        found.add_row(kind_name(kind), str(n))
    console.print(found)
