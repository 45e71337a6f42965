"""`pontual analyze`: the public file contract, processed in memory with no database."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api._errors import InputFileError
from api.inputs import (
    check_out_folder,
    checked_municipality,
    read_input,
    read_stands_file,
    require_file,
)
from fleet.ids import id_form
from maps.tiles import OSM_TILES

if TYPE_CHECKING:
    import pandas as pd


class Engine(StrEnum):
    """Where ``pontual analyze`` runs."""

    local = "local"
    dask = "dask"


class PingFormat(StrEnum):
    """Input formats of ``--pings``."""

    auto = "auto"
    contract = "contract"
    porto = "porto"


_STAGES = 7


def _is_porto(path: Path) -> bool:
    import pandas as pd

    if path.suffix.lower() not in (".csv", ".gz") or not path.is_file():
        return False
    header = read_input(path, lambda p: pd.read_csv(p, nrows=0).columns, flag="--pings")
    return "POLYLINE" in header and "TAXI_ID" in header


def analyze(
    pings: Annotated[
        Path,
        typer.Option(
            help=(
                "Arquivo de pings (CSV ou Parquet), ou pasta de um conjunto de pings "
                "(pontual dataset write)."
            )
        ),
    ],
    stands: Annotated[Path, typer.Option(help="Pontos de táxi (GeoJSON, GeoPackage ou CSV).")],
    out: Annotated[Path, typer.Option(help="Pasta de saída.")] = Path("out"),
    fleet: Annotated[Path | None, typer.Option(help="Frota (CSV) com licenças.")] = None,
    licences: Annotated[
        Path | None,
        typer.Option(
            help=(
                "Licenças de estacionamento com seus períodos (CSV; com --fleet): substituem "
                "a coluna de pontos da frota."
            )
        ),
    ] = None,
    drivers: Annotated[
        Path | None,
        typer.Option(help="Cadastro de condutores (CSV; com --driver-links)."),
    ] = None,
    driver_links: Annotated[
        Path | None,
        typer.Option(help="Vínculos condutor ↔ prefixo (CSV; com --drivers)."),
    ] = None,
    stand_suspensions: Annotated[
        Path | None,
        typer.Option(help="Suspensões de uso de ponto fixo (CSV; POA art. 45, parágrafo único)."),
    ] = None,
    allowed_places: Annotated[
        Path | None,
        typer.Option(
            help=(
                "Áreas onde esperar é permitido (o formato de --stands; ex.: estacionamento "
                "regulamentado): esperas nelas não são formação de ponto."
            )
        ),
    ] = None,
    municipality: Annotated[
        str | None,
        typer.Option(help="Código IBGE do município (7 dígitos).", callback=checked_municipality),
    ] = None,
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
    boundary: Annotated[
        Path | None,
        typer.Option(help="Limite municipal (GeoJSON); padrão: o do --municipality, se incluído."),
    ] = None,
    roads: Annotated[
        Path | None,
        typer.Option(help="Malha viária OSM (GeoJSON, GPKG, GeoParquet ou .osm)."),
    ] = None,
    thresholds: Annotated[
        Path | None, typer.Option(help="Limiares dos detectores (TOML: \\[tipo] nome = valor).")
    ] = None,
    tiles: Annotated[
        str,
        typer.Option(
            help="URL dos tiles do mapa base (padrão: OpenStreetMap); 'none' para mapa sem fundo.",
            show_default=False,
        ),
    ] = OSM_TILES,
    confirmed: Annotated[
        Path | None,
        typer.Option(
            help="proposals.json anterior: as infrações confirmadas contam para a reincidência."
        ),
    ] = None,
    engine: Annotated[
        Engine, typer.Option(help="Onde rodar: local (este processo) ou dask (cluster).")
    ] = Engine.local,
    scheduler: Annotated[
        str | None,
        typer.Option(help="Endereço do escalonador Dask (tcp://HOST:8786); sem ele, um local."),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Workers do cluster Dask local (sem --scheduler).")
    ] = 2,
    kinds: Annotated[
        str | None,
        typer.Option(
            "--kinds",
            help=(
                "Tipos de achado a detectar, separados por vírgula (padrão: todos); 'nenhum' "
                "para só visitas, viagens, paradas e ocupação."
            ),
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=(
                "Partições analisadas ao mesmo tempo (motor local), cada uma num processo; "
                "padrão: os núcleos disponíveis a este processo. As saídas são as mesmas para "
                "qualquer valor."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Analisa pings contra pontos e frota e grava os arquivos de saída do contrato."""
    import runtime

    check_out_folder(out)
    jobs = jobs or runtime.available_cores()
    runtime.keep_arrow_pages()  # read when Arrow loads: before the imports below
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with (
        runtime.cycle_collector_paused(),
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        ) as bar,
    ):
        # The bar shows before the heavy imports (pandas, geopandas, pyarrow): they are read
        # inside the first stage.
        task = bar.add_task("Lendo pontos e frota", total=_STAGES)
        early = None
        if engine is Engine.local and pings_format is not PingFormat.porto:
            from engines.early import start_early_read

            early = start_early_read(pings)  # a small Parquet file, read while the rest loads
        from engines.pipeline import AnalysisParams, analyze_pings, cut_at_as_of
        from fleet.drivers import read_driver_links, read_drivers
        from fleet.loaders import LICENCES_UNTOLD, read_fleet
        from stands.licences import mark_unplaced_licences, read_licence_file, with_licence_periods
        from tracking.ingest import read_pings
        from tracking.porto import read_porto_trips

        runtime.keep_freed_heap()

        books, no_rulebook = _rulebooks(municipality)
        dataset = _dataset_folder(pings)
        if dataset is None:
            require_file(pings, flag="--pings")
        if (drivers is None) != (driver_links is None):
            given, missing = (
                ("--drivers", "--driver-links") if drivers else ("--driver-links", "--drivers")
            )
            msg = (
                f"{given}: dê também {missing} (o cadastro de condutores e os vínculos vão juntos)"
            )
            raise InputFileError(msg)
        history = _confirmed(confirmed) if confirmed else None
        limits, floor = read_thresholds(thresholds) if thresholds else ({}, None)
        limits = law_thresholds(books, limits)
        place = _municipality(municipality)
        bundled_area = _bundled_boundary(municipality)
        porto = dataset is None and (
            pings_format is PingFormat.porto
            or (pings_format is PingFormat.auto and _is_porto(pings))
        )
        stand_frame = read_stands_file(stands, radius_m=stand_radius_m)
        tz, tz_source = _timezone(timezone, place=place, porto=porto, stands=stand_frame)
        defaults = AnalysisParams()
        params = AnalysisParams(
            timezone=tz,
            h3_resolution=h3_resolution or defaults.h3_resolution,
            trip_max_gap_s=trip_max_gap_s or defaults.trip_max_gap_s,
        )
        as_of_date = _parse_date(as_of) if as_of else None
        fleet_frame = None
        notes = [f"--stands: {n}" for n in stand_frame.attrs.get("notes", [])]
        if licences is not None and fleet is None:
            raise InputFileError("--licences: dê também --fleet (as licenças são da frota)")
        if fleet:
            fleet_frame = read_input(
                fleet, lambda p: read_fleet(p, municipality=municipality), flag="--fleet"
            )
            if licences is None and LICENCES_UNTOLD in fleet_frame.columns:
                notes.append(
                    "--fleet: sem a coluna stands (nem --licences), as licenças de ponto não são "
                    "conhecidas: ninguém é acusado de embarcar sem licença nem de ausência do ponto"
                )
            if licences is not None:
                fleet_frame, absent = with_licence_periods(
                    fleet_frame, read_input(licences, read_licence_file, flag="--licences")
                )
                if absent:
                    notes.append(
                        f"--licences: {len(absent)} prefixo(s) fora de --fleet ({_shown(absent)}); "
                        "suas licenças não são lidas"
                    )
            fleet_frame, unplaced = mark_unplaced_licences(fleet_frame, stand_frame["stand_id"])
            if unplaced:
                notes.append(_unplaced_note(unplaced, flag="--licences" if licences else "--fleet"))
        area = read_input(boundary, _read_boundary, flag="--boundary") if boundary else bundled_area
        registries: dict[str, Any] = {}
        if drivers is not None and driver_links is not None:
            registries = {
                "drivers": read_input(drivers, read_drivers, flag="--drivers"),
                "driver_links": read_input(driver_links, read_driver_links, flag="--driver-links"),
            }
        if stand_suspensions is not None:
            from stands.suspensions import read_stand_suspensions

            registries["stand_suspensions"] = read_input(
                stand_suspensions, read_stand_suspensions, flag="--stand-suspensions"
            )
        if allowed_places is not None:
            places = read_stands_file(
                allowed_places, radius_m=stand_radius_m, flag="--allowed-places"
            )
            notes += [f"--allowed-places: {n}" for n in places.attrs.get("notes", [])]
            registries["allowed_places"] = places
        graph = read_input(roads, _road_graph, flag="--roads") if roads else None

        def step(label: str) -> None:
            bar.update(task, advance=1, description=label)

        options: dict[str, Any] = {
            "fleet": fleet_frame,
            "boundary": area,
            "roads": graph,
            "as_of": as_of_date,
            "thresholds": limits or None,
            "params": params,
            "progress": step,
            "kinds": _parse_kinds(kinds),
        } | registries

        def detail(label: str) -> None:  # per-partition steps: the bar does not advance
            bar.update(task, description=label)

        if dataset is not None or (engine is Engine.dask and not porto):
            bar.update(task, advance=1, description="Lendo e validando pings")
            result, fixes = _analyze_dataset(
                dataset,
                pings,
                stand_frame,
                engine=engine,
                scheduler=scheduler,
                workers=workers,
                timezone=tz,
                jobs=jobs,
                out=out,
                books=books,
                options=options | {"progress": detail},
                proposals={"confirmed": history, "fleet": fleet_frame, "confidence_floor": floor},
            )
        elif engine is Engine.local and not porto:
            from engines.buckets import analyze_file

            bar.update(task, advance=1, description="Lendo e validando pings")
            result, fixes = analyze_file(
                pings, stand_frame, jobs=jobs, early=early, **options | {"progress": detail}
            )
        else:
            bar.update(task, advance=1, description="Lendo e validando pings")
            if porto:
                fixes, rejected, _ = read_porto_trips(pings, max_speed_kmh=params.max_speed_kmh)
            else:
                fixes, rejected = read_pings(pings, max_speed_kmh=params.max_speed_kmh)
            if engine is Engine.dask:
                from engines.distributed import analyze_pings_distributed, dask_client

                with dask_client(scheduler, workers=workers) as client:
                    result = analyze_pings_distributed(
                        fixes, rejected, stand_frame, client=client, **options
                    )
            else:
                result = analyze_pings(fixes, rejected, stand_frame, **options)
            if as_of_date is not None:  # the map's fixes (the engines cut and count their own)
                fixes = cut_at_as_of(fixes, as_of=as_of_date, timezone=tz)
        if as_of_date is not None and (note := _as_of_note(result.summary, as_of_date, tz)):
            notes.append(note)
        if note := _all_rejected_note(result.summary):
            notes.append(note)
        if area is None and place is not None:
            skipped = result.summary.get("detectors_skipped", {})
            if "outside_municipality" in skipped:
                skipped["outside_municipality"] = (
                    f"sem limite municipal: o de {place.name} ({place.code}) não vem incluído; "
                    "dê o arquivo com --boundary"
                )
        if place is not None and (
            note := _official_stands_note(result.findings, stand_frame, place.code)
        ):
            notes.append(note)
        notes += _id_notes(result.id_checks, vehicles=result.summary["vehicles"], fleet=fleet_frame)
        bar.update(task, description="Gravando arquivos")
        paths, n_proposals = write_results(
            result,
            fixes,
            out,
            stands=stand_frame,
            books=books,
            timezone=tz,
            history=history,
            fleet=fleet_frame,
            tiles=None if tiles.lower() == "none" else tiles,
            jobs=jobs,
            confidence_floor=floor,
        )
        bar.update(task, completed=_STAGES, description="Concluído")
    _report(
        result.summary,
        out=out,
        paths=paths,
        n_proposals=n_proposals,
        municipality=municipality,
        no_rulebook=no_rulebook,
        notes=notes,
        timezone=(tz, tz_source),
        boundary=_boundary_source(boundary, place, area),
        as_of=as_of_date,
    )


PARTS = Path("partes")
"""Where, under ``--out``, the Dask workers write the output files as parts."""


def _dataset_folder(pings: Path) -> Path | None:
    """Return ``--pings`` if it is a dataset's folder, None if a file.

    Raises
    ------
    InputFileError
        A folder without a dataset manifest.
    """
    if not pings.is_dir():
        return None
    from engines.dataset import MANIFEST, is_dataset

    if not is_dataset(pings):
        msg = (
            f"--pings: {pings} é uma pasta sem {MANIFEST}; esperado um arquivo de pings ou "
            "um conjunto gravado com pontual dataset write"
        )
        raise InputFileError(msg)
    return pings


def _analyze_dataset(
    dataset: Path | None,
    pings: Path,
    stands: Any,
    *,
    engine: Engine,
    scheduler: str | None,
    workers: int,
    timezone: str,
    jobs: int,
    out: Path,
    books: dict[str, Any],
    options: dict[str, Any],
    proposals: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    """Analyse a dataset (a plain file with ``--engine dask``: a temporary one first).

    With Dask, the workers write the findings, visits, trips and occupancy as parts in
    ``out/partes`` (emptied first; on storage they see, as the dataset) and merge them into the
    files in ``out``, one task per file;
    with ``books``, they also make the proposals (``proposals``: the history, fleet and
    confidence floor of :func:`write_results`) and write them as parts. This process receives
    no finding: counts, and the map's sample merged on the workers.

    A plain file becomes a dataset in a temporary folder first, written by the Dask workers
    (byte ranges of a CSV, runs of row groups of a Parquet file; this process computes only the
    ranges and the manifest): with ``--scheduler``, the workers must see ``--pings`` and that
    folder (``TMPDIR`` on shared storage), or write the dataset with ``pontual dataset write``
    on shared storage and give its folder.
    """
    import shutil
    import tempfile

    from engines.dataset import analyze_dataset, write_dataset

    with contextlib.ExitStack() as stack:
        client, parts, spec = None, None, None
        if engine is Engine.dask:
            from engines.distributed import ProposalSpec, dask_client

            parts = (out / PARTS).resolve()
            shutil.rmtree(parts, ignore_errors=True)
            parts.mkdir(parents=True)
            if books:
                spec = ProposalSpec(rulebooks=books, timezone=timezone, **(proposals or {}))
            client = stack.enter_context(dask_client(scheduler, workers=workers))
        if dataset is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pontual-")))
            dataset = folder / "pings"
            write_dataset(
                pings,
                dataset,
                timezone=timezone,
                jobs=jobs,
                client=client,
                progress=options["progress"],
            )
        return analyze_dataset(
            dataset,
            stands,
            client=client,
            jobs=jobs,
            parts=parts,
            out=out.resolve() if parts is not None else None,
            propose=spec,
            send_findings=client is None,  # the map draws the workers' sample
            **options,
        )


def _report(
    s: dict[str, Any],
    *,
    out: Path,
    paths: list[Path],
    n_proposals: int | None,
    municipality: str | None,
    no_rulebook: str | None,
    notes: list[str],
    timezone: tuple[str, str],
    boundary: str,
    as_of: dt.date | None = None,
) -> None:
    """Print what the run found, for people: kinds by their pt-BR names (files keep codes)."""
    from tracking.detectors.findings import kind_name

    for note in notes:
        typer.echo(f"aviso: {note}")
    typer.echo(f"Fuso horário: {timezone[0]} ({timezone[1]}).")
    typer.echo(f"Limite municipal: {boundary}.")
    late = f", {s['pings_after_as_of']} depois de --as-of (fora da análise)" if as_of else ""
    typer.echo(
        f"{s['pings_valid']} pings válidos, {s['pings_rejected']} rejeitados{late}; "
        f"{s['visits']} visitas ({s['boardings']} com embarque), {s['trips']} viagens, "
        f"{s['stops']} paradas; {s['findings']} achados."
    )
    for kind, n in s["findings_by_kind"].items():
        typer.echo(f"  {kind_name(kind)}: {n}")
    for kind, why in s["detectors_skipped"].items():
        typer.echo(f"  {kind_name(kind)}: não verificado ({why})")
    if n_proposals is not None:
        typer.echo(f"{n_proposals} propostas de autuação ({municipality}).")
        for kind, n in s["findings_without_provision"].items():
            typer.echo(f"  {kind_name(kind)}: {n} achado(s) sem dispositivo no regulamento")
        for kind, n in s["findings_for_review"]["by_kind"].items():
            typer.echo(
                f"  {kind_name(kind)}: {n} achado(s) para revisão, sem proposta (summary.json)"
            )
    elif no_rulebook:
        typer.echo(f"aviso: {no_rulebook}; proposals.json não gerado.")
    typer.echo(f"Saídas em {out}/: " + ", ".join(p.name for p in paths))


def _as_of_note(summary: dict[str, Any], as_of: dt.date, timezone: str) -> str | None:
    """Warn when every valid fix is after ``--as-of``: nothing was analysed."""
    late = summary["pings_after_as_of"]
    if summary["pings_valid"] or not late:
        return None
    return (
        f"--as-of: todos os {late} pings válidos são de depois de {as_of.isoformat()} "
        f"(fim do dia em {timezone}); nada foi analisado: confira a data"
    )


def _all_rejected_note(summary: dict[str, Any]) -> str | None:
    """Warn when every row was rejected: nothing was analysed, most likely a wrong file."""
    n = summary["pings_rejected"]
    if summary["pings_valid"] or summary["pings_after_as_of"] or not n:
        return None
    reasons = sorted(summary["rejected_by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{reason} {count}" for reason, count in reasons[:3])
    rows = "a única linha foi rejeitada" if n == 1 else f"as {n} linhas foram rejeitadas"
    return (
        f"nenhum ping válido: {rows} ({shown}); nada foi analisado: confira o arquivo (os "
        "motivos de cada linha estão em rejected.csv)"
    )


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" e mais {len(ids) - 5}" if len(ids) > 5 else "")


NEAR_OFFICIAL_STAND_M = 50.0
"""An illegal stand within this distance of a bundled official stand missing from ``--stands``
is named in a warning."""


def _official_stands_note(findings: Any, stands: Any, municipality: str) -> str | None:
    """Warn when illegal stands lie at official stands (open data) that ``--stands`` lacks.

    A stands file with part of the city makes every official stand left out a place where taxis
    wait outside "every stand".
    """
    import geopandas as gpd

    from geo.crs import utm_crs_for_frame
    from stands.loaders import DEFAULT_POINT_RADIUS_M, official_stands

    places = findings.loc[findings["kind"].eq("illegal_stand_formation").to_numpy()]
    official = official_stands(municipality) if len(places) else None
    if official is None or official.empty:
        return None
    crs = utm_crs_for_frame(official)
    official = official[["stand_id", "geometry"]].to_crs(crs)
    given = gpd.GeoDataFrame(geometry=stands.geometry, crs=stands.crs).to_crs(crs)
    present = gpd.sjoin_nearest(official, given, max_distance=DEFAULT_POINT_RADIUS_M)
    missing = official.loc[~official.index.isin(present.index)]
    hull = gpd.GeoDataFrame(geometry=places.geometry, crs=places.crs).to_crs(crs)
    near = gpd.sjoin_nearest(hull, missing, max_distance=NEAR_OFFICIAL_STAND_M)
    if near.empty:
        return None
    ids = sorted(set(near["stand_id"].astype(str)), key=lambda s: (len(s), s))
    return (
        f"formação de ponto irregular: {near.index.nunique()} achado(s) a menos de "
        f"{NEAR_OFFICIAL_STAND_M:.0f} m de ponto(s) de táxi oficiais (dados abertos incluídos) "
        f"que não está(ão) em --stands ({_shown(ids)}): confira se --stands tem todos os pontos; "
        "a espera num ponto que falta no arquivo é lida como formação de ponto irregular"
    )


UNKNOWN_DRIVERS_SHARE = 0.5
"""Share of the fixes' driver ids absent from ``--drivers`` above which the run warns."""


def _id_notes(
    checks: dict[str, frozenset[str]], *, vehicles: int, fleet: pd.DataFrame | None
) -> list[str]:
    """Warn about the fixes' ids the registries lack (``engines.pipeline.id_checks``).

    Vehicles the fleet lacks are skipped by its rules, and the fleet's vehicles they may be
    written otherwise are not judged inactive. Most driver ids missing from the
    registry means the tracker and the registry likely code drivers differently: each such ride
    of a judged vehicle is a ``not_registered`` finding.
    """
    notes = []
    if absent := sorted(checks.get("off_fleet", ())):
        note = (
            f"--fleet: {len(absent)} de {vehicles} prefixo(s) das posições não estão na frota "
            f"({_shown(absent)}): as regras que leem a frota (licença de ponto, situação, "
            "documentos, táxi acessível na fila) não os julgam"
        )
        forms = {id_form(v) for v in absent}
        registered = [] if fleet is None else fleet["vehicle_id"].astype("str").tolist()
        if look := sorted(v for v in registered if id_form(v) in forms):
            note += (
                f"; {len(look)} prefixo(s) da frota aparece(m) escrito(s) de outro modo nas "
                f"posições ({_shown(look)}): a inatividade dele(s) não é julgada (confira o "
                "código no rastreador e na frota)"
            )
        notes.append(note)
    unknown = sorted(checks.get("unknown_drivers", ()))
    seen = len(unknown) + len(checks.get("known_drivers", ()))
    if len(unknown) >= 2 and len(unknown) > UNKNOWN_DRIVERS_SHARE * seen:
        notes.append(
            f"--drivers: {len(unknown)} de {seen} códigos de condutor das posições não estão "
            f"no cadastro ({_shown(unknown)}); confira se o rastreador e o cadastro usam o "
            "mesmo código: as corridas desses códigos são achados de condutor não cadastrado"
        )
    return notes


def _unplaced_note(unplaced: dict[str, tuple[str, ...]], *, flag: str) -> str:
    """Say which licences name stands the stands file lacks (``mark_unplaced_licences``)."""
    stands = sorted({s for ids in unplaced.values() for s in ids})
    shown = _shown([f"{v} → {'; '.join(ids)}" for v, ids in sorted(unplaced.items())])
    return (
        f"{flag}: {len(unplaced)} prefixo(s) com licença para {len(stands)} ponto(s) que não "
        f"está(ão) em --stands ({shown}); os embarques desses prefixos não são julgados "
        "como sem licença, nem a ausência desses pontos (a licença pode ser do ponto com "
        "outro código: confira os códigos dos dois arquivos)"
    )


def _municipality(code: str | None) -> Any:
    """Return the municipality of ``--municipality`` (checked by its callback), or None."""
    if code is None:
        return None
    from api.cli_import import CENSUS
    from fleet.municipalities import find_municipality

    return find_municipality(code, census=CENSUS)


def check_timezone_option(given: str) -> None:
    """Refuse a ``--timezone`` that is not an IANA zone (``typer.BadParameter``, pt-BR)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(given)
    except (ZoneInfoNotFoundError, ValueError):
        msg = f"{given!r} não é um fuso horário IANA (ex.: America/Sao_Paulo, Europe/Lisbon)"
        raise typer.BadParameter(msg, param_hint="'--timezone'") from None


def _timezone(given: str | None, *, place: Any, porto: bool, stands: Any) -> tuple[str, str]:
    """Return the zone of local days and where it comes from (said in the output).

    ``--timezone``, else the municipality's, else what the data say (Porto's formats: Lisbon;
    stands that name one IBGE municipality: its zone), else the settings' default.

    Raises
    ------
    typer.BadParameter
        ``--timezone`` is not an IANA zone.
    """
    if given:
        check_timezone_option(given)
        return given, "--timezone"
    if place is not None and place.timezone:
        return place.timezone, f"o de {place.name} ({place.code}), do --municipality"
    if porto or stands.attrs.get("format") == "porto":
        return "Europe/Lisbon", "dos dados: formato do Porto, Portugal"
    codes = stands["municipality"].dropna().unique() if len(stands) else []
    if len(codes) == 1:
        from fleet._errors import UnknownMunicipalityError

        with contextlib.suppress(UnknownMunicipalityError):
            found = _municipality(str(codes[0]))
            if found.timezone:
                return found.timezone, f"dos pontos: {found.name} ({found.code})"
    from api.settings import get_settings

    return get_settings().timezone, "padrão; informe outro com --timezone"


def _boundary_source(given: Path | None, place: Any, area: Any) -> str:
    if given is not None:
        return f"{given.name} (--boundary)"
    if area is not None and place is not None:
        return f"o de {place.name} ({place.code}), incluído no Pontual"
    return "nenhum (embarques fora do município não verificados; dê --boundary)"


def write_results(
    result: Any,
    fixes: pd.DataFrame,
    out: Path,
    *,
    stands: Any,
    books: dict[str, Any],
    timezone: str,
    history: pd.DataFrame | None = None,
    fleet: pd.DataFrame | None = None,
    tiles: str | None = None,
    jobs: int = 1,
    progress: Callable[[str], None] = lambda _: None,
    confidence_floor: dict[str, float] | None = None,
) -> tuple[list[Path], int | None]:
    """Write a run's contract files, ``proposals.json`` (with rulebooks) and the map page.

    With ``jobs`` > 1, ``findings.geojson`` and the map (about half the files' time) are written
    in a forked process beside the proposals and the other files. ``progress`` is called after
    the proposals and after the other files. Returns the paths written and the number of
    proposals (None without rulebooks). Findings a rule covers but that make no proposal (under
    the confidence floor, merged from ``confidence_floor``, or not repeated enough) are counted
    and listed in ``summary.json`` (``findings_for_review``). Proposals an engine's workers
    made (``result.parts["proposals.json"]``, the summary's entries already in
    ``result.summary``) are merged from their parts.
    """
    from enforcement.proposals import (
        PROPOSAL_ORDER,
        proposal_summary,
        propose_all,
        write_proposal_texts,
        write_proposals_json,
    )
    from engines.pipeline import merged_texts, write_findings, write_outputs
    from runtime import aside

    def findings_and_map() -> None:
        from maps.findings import findings_map  # folium: imported aside, with jobs > 1

        out.mkdir(parents=True, exist_ok=True)
        write_findings(result, out / "findings.geojson")
        found, counts = _map_findings(result)
        findings_map(
            stands, found, counts=counts, fixes=fixes, timezone=timezone, tiles=tiles
        ).save(str(out / "map.html"))

    with aside(findings_and_map, fork=jobs > 1) as written:
        proposals = None
        made = result.parts.get("proposals.json")
        if made is not None:
            n_proposals: int | None = int(result.summary["proposals"])
        elif books:
            done = propose_all(
                result.findings,
                books,
                timezone=timezone,
                confirmed=history,
                fleet=fleet,
                confidence_floor=confidence_floor,
            )
            proposals = done.proposals
            n_proposals = len(proposals)
            result.summary |= proposal_summary(proposals, done.uncovered, done.for_review)
        else:
            n_proposals = None
        progress("proposals done")
        paths = write_outputs(result, out, findings=False)
        if "proposals.json" in result.written:  # merged by the workers
            paths.append(out / "proposals.json")
        elif made is not None:
            texts = merged_texts(made, PROPOSAL_ORDER)
            write_proposal_texts(texts, out / "proposals.json")
            paths.append(out / "proposals.json")
        elif proposals is not None:
            write_proposals_json(proposals, out / "proposals.json")
            paths.append(out / "proposals.json")
        progress("other files done")
        written()
    return [*paths, out / "map.html"], n_proposals


def _map_findings(result: Any) -> tuple[Any, dict[str, int] | None]:
    """Return the findings the map draws from, and their counts when the workers sampled them.

    ``result.map_sample`` when an engine's workers made it; else every finding and None (the
    map samples them, :mod:`maps.sample`).
    """
    sample = getattr(result, "map_sample", None)
    if sample is not None:
        found, counts = sample
        return found, counts
    return result.findings, None


def _rulebooks(code: str | None) -> tuple[dict[str, Any], str | None]:
    """Return the municipality's rulebooks by service, or why there are none."""
    from enforcement._errors import UnknownMunicipalityError
    from enforcement.rulebook import rulebooks_for

    if code is None:
        return {}, None
    try:
        return dict(rulebooks_for(code)), None
    except UnknownMunicipalityError as exc:
        return {}, str(exc)


def _confirmed(path: Path) -> pd.DataFrame:
    """Read the infractions counted for reincidence of an earlier ``proposals.json``.

    ``[]`` (no earlier proposals) is valid: no reincidence.
    """
    import json

    from enforcement.proposals import confirmed_from_proposals

    require_file(path, flag="--confirmed")
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(records, list):
            raise TypeError("esperado uma lista JSON de propostas")
        return confirmed_from_proposals(records)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError, AttributeError) as exc:
        msg = f"--confirmed: {path.name} não é um proposals.json válido ({exc})"
        raise InputFileError(msg) from None


def _bundled_boundary(code: str | None) -> Any:
    """Return the bundled boundary of an IBGE code (None if not bundled)."""
    import geopandas as gpd

    from api.cli_import import BOUNDARIES

    if code is None or not BOUNDARIES.is_file():
        return None
    bundled = gpd.read_file(BOUNDARIES).to_crs(4326)
    match = bundled.loc[bundled["cod_ibge"].astype(str) == code]
    if match.empty:
        return None
    return match.geometry.union_all()


def _read_boundary(path: Path) -> Any:
    """Return the union of the polygons of a boundary file, in EPSG:4326.

    Raises
    ------
    InputFileError
        The file holds no polygon (e.g. an empty FeatureCollection).
    """
    import geopandas as gpd

    frame = gpd.read_file(path)
    if frame.crs is not None:
        frame = frame.to_crs(4326)
    # A bare GeometryCollection (OSM exports, Porto's bundled boundary) holds the polygons.
    parts = frame.geometry.explode(index_parts=False).explode(index_parts=False)
    polygons = parts[parts.geom_type.isin(["Polygon", "MultiPolygon"])]
    if polygons.empty:
        msg = f"{path.name} não tem nenhum polígono de limite municipal"
        raise InputFileError(msg)
    return polygons.union_all()


def _road_graph(path: Path) -> Any:
    from geo.roads import build_road_graph, read_libcity_roads, read_roads

    if path.suffix.lower() == ".csv":  # the LibCity export bundled for Porto
        return build_road_graph(read_libcity_roads(path))
    return build_road_graph(read_roads(path))


def law_thresholds(
    books: dict[str, Any], given: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Merge ``--thresholds`` over the limits the taxi rulebook's law fixes for the detectors.

    The run's fleet is the taxi fleet (``proposals.json`` judges a vehicle without ``service``
    as taxi): the fretamento rulebook's limits are given with ``--thresholds``. Holidays
    (:data:`ADDED_LISTS`) given are added to the law's, never in place of them: a municipal
    holiday given does not take away the state's.
    """
    book = books.get("taxi")
    out = {kind: dict(values) for kind, values in (book.thresholds() if book else {}).items()}
    for kind, values in given.items():
        merged = out.get(kind, {}) | dict(values)
        for key in ADDED_LISTS.intersection(values):
            law = list(out.get(kind, {}).get(key, []))
            merged[key] = law + [v for v in values[key] if v not in law]
        out[kind] = merged
    return out


ADDED_LISTS = frozenset({"holidays"})
"""Threshold lists that ``--thresholds`` adds to the rulebook's (days a lawful tariff applies)."""


def read_thresholds(
    path: Path, *, flag: str = "--thresholds"
) -> tuple[dict[str, dict[str, Any]], dict[str, float] | None]:
    """Read a thresholds TOML: the detectors' tables and the ``[confidence_floor]`` table.

    An empty file (or one without tables) is valid: the defaults. ``[confidence_floor]``
    (``default`` and finding kinds, values in [0, 1]) is merged over the rulebook's floors.

    Raises
    ------
    InputFileError
        Missing, a folder, not TOML, or a table or value out of place (named).
    """
    import tomllib

    from enforcement.rulebook import check_confidence_floor
    from tracking.detectors.detect import check_thresholds

    require_file(path, flag=flag, allow_empty=True)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        msg = f"{flag}: {path.name}: TOML inválido ({exc})"
        raise InputFileError(msg) from None
    if not all(isinstance(v, dict) for v in data.values()):
        msg = f"{flag}: {path.name}: esperado uma tabela [tipo] por tipo de achado"
        raise InputFileError(msg)
    floor = data.pop("confidence_floor", None)
    try:
        if floor is not None:
            check_confidence_floor(floor, where="confidence_floor")
        check_thresholds(data)
    except ValueError as exc:
        msg = f"{flag}: {path.name}: {exc}"
        raise InputFileError(msg) from None
    return data, floor


def _parse_kinds(text: str | None) -> tuple[str, ...]:
    from tracking.detectors.findings import KINDS

    if text is None:
        return KINDS
    if text.strip().lower() in ("nenhum", "none", ""):
        return ()
    asked = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in asked if k not in KINDS]
    if unknown:
        msg = f"tipo(s) desconhecido(s): {', '.join(unknown)}; conhecidos: {', '.join(KINDS)}"
        raise typer.BadParameter(msg, param_hint="'--kinds'")
    return tuple(k for k in KINDS if k in asked)


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"'--as-of' era {text!r}; esperado AAAA-MM-DD") from None
