"""`pontual dataset write`: a pings file as a partitioned Parquet dataset (engines.dataset)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.inputs import checked_municipality, require_file

app = typer.Typer(
    help=(
        "Conjuntos de pings particionados por dia e por grupo de veículos, que os workers do "
        "motor Dask leem sozinhos (write)."
    ),
    no_args_is_help=True,
)


@app.command("write")
def write(
    pings: Annotated[Path, typer.Option(help="Arquivo de pings (CSV, CSV.gz ou Parquet).")],
    out: Annotated[Path, typer.Option(help="Pasta do conjunto (nova ou vazia).")],
    buckets: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Grupos de veículos (padrão: um a cada 500 mil linhas).",
            show_default=False,
        ),
    ] = None,
    municipality: Annotated[
        str | None,
        typer.Option(
            help="Código IBGE do município (7 dígitos): o fuso dos dias locais.",
            callback=checked_municipality,
        ),
    ] = None,
    timezone: Annotated[
        str | None, typer.Option(help="Fuso horário dos dias locais (padrão: o do município).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Substitui um conjunto que já esteja em --out.")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Processos lendo e gravando ao mesmo tempo; padrão: os núcleos disponíveis.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Grava um arquivo de pings como conjunto Parquet particionado, com manifest.json."""
    import runtime

    jobs = jobs or runtime.available_cores()
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    require_file(pings, flag="--pings")
    tz = _timezone(timezone, municipality)
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("Lendo pings", total=None)
        from engines.dataset import write_dataset

        def step(label: str) -> None:
            bar.update(task, description=label)

        manifest = write_dataset(
            pings, out, timezone=tz, n_buckets=buckets, jobs=jobs, force=force, progress=step
        )
    files = manifest["files"]
    days = {f["day"] for f in files if f["day"] is not None}
    no_day = sum(f["rows"] for f in files if f["day"] is None)
    typer.echo(f"Fuso horário dos dias: {tz}.")
    typer.echo(
        f"{manifest['rows'] + manifest['malformed']['rows']} linhas de {pings.name}: "
        f"{len(days)} dia(s), {manifest['n_buckets']} grupo(s) de veículos, {len(files)} "
        f"arquivo(s); {no_day} sem data legível, {manifest['malformed']['rows']} malformada(s) "
        "(rejeitadas na análise)."
    )
    typer.echo(f"Conjunto em {out}/ (manifest.json).")


def _timezone(given: str | None, municipality: str | None) -> str:
    """Return ``--timezone``, else the municipality's zone, else the settings' default.

    Raises
    ------
    typer.BadParameter
        ``--timezone`` is not an IANA zone.
    """
    if given:
        from api.cli_analyze import check_timezone_option

        check_timezone_option(given)
        return given
    if municipality is not None:
        from api.cli_import import CENSUS
        from fleet.municipalities import find_municipality

        place = find_municipality(municipality, census=CENSUS)
        if place.timezone:
            return str(place.timezone)
    from api.settings import get_settings

    return get_settings().timezone
