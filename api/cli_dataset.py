"""`pontual dataset write`: a pings file as a partitioned Parquet dataset (engines.dataset)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
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
    out: Annotated[Path, typer.Option(help="Pasta do conjunto (nova ou vazia).")],
    pings: Annotated[
        Path | None,
        typer.Option(help="Arquivo de pings (CSV, CSV.gz ou Parquet).", show_default=False),
    ] = None,
    from_db: Annotated[
        bool,
        typer.Option(
            "--from-db",
            help="Grava os pings guardados no banco (import pings, ingestão ao vivo), "
            "dia local fechado a dia local fechado, em vez de --pings.",
        ),
    ] = False,
    first_day: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Com --from-db: primeiro dia local (AAAA-MM-DD); padrão: o do ping mais antigo.",
            show_default=False,
        ),
    ] = None,
    last_day: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Com --from-db: último dia local (AAAA-MM-DD); padrão e no máximo: ontem no "
            "fuso (o último dia fechado).",
            show_default=False,
        ),
    ] = None,
    append: Annotated[
        bool,
        typer.Option(
            "--append",
            help="Com --from-db: acrescenta ao conjunto em --out os dias fechados que lhe "
            "faltam e regrava os recentes que mudaram no banco (o manifesto é trocado por "
            "último).",
        ),
    ] = False,
    recheck_days: Annotated[
        int,
        typer.Option(
            "--recheck-days",
            min=0,
            help="Com --append: os últimos dias do conjunto recontados no banco; um dia que "
            "ganhou pings depois de gravado (envio atrasado) é regravado, com os seguintes.",
        ),
    ] = 7,
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
    """Grava pings (de um arquivo ou do banco) como conjunto Parquet particionado."""
    import runtime

    jobs = jobs or runtime.available_cores()
    if from_db == (pings is not None):
        msg = "informe --pings ARQUIVO ou --from-db (um dos dois)"
        raise typer.BadParameter(msg, param_hint="--pings/--from-db")
    if not from_db:
        for flag, given in (("--from", first_day), ("--to", last_day), ("--append", append)):
            if given:
                msg = f"{flag} só vale com --from-db"
                raise typer.BadParameter(msg, param_hint=flag)
    tz = _timezone(timezone, municipality)
    if pings is None:
        _write_from_db(
            out,
            timezone=tz,
            municipality=municipality,
            first_day=_day(first_day, flag="--from"),
            last_day=_day(last_day, flag="--to"),
            buckets=buckets,
            append=append,
            recheck_days=recheck_days,
            force=force,
        )
        return
    require_file(pings, flag="--pings")
    from engines.dataset import write_dataset

    with _steps("Lendo pings") as step:
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


@contextlib.contextmanager
def _steps(first: str) -> Iterator[Callable[[str], None]]:
    """Show a progress line on stderr (terminals only); yield what relabels it."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(first, total=None)
        yield lambda label: bar.update(task, description=label)


def _day(text: str | None, *, flag: str) -> dt.date | None:
    """Parse a ``AAAA-MM-DD`` option.

    Raises
    ------
    typer.BadParameter
        Not a date in that form.
    """
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        msg = f"era {text!r}; esperado uma data AAAA-MM-DD (ex.: 2025-03-04)"
        raise typer.BadParameter(msg, param_hint=flag) from None


def _write_from_db(
    out: Path,
    *,
    timezone: str,
    municipality: str | None,
    first_day: dt.date | None,
    last_day: dt.date | None,
    buckets: int | None,
    append: bool,
    recheck_days: int,
    force: bool,
) -> None:
    """Run :func:`engines.dataset.write_dataset_from_db` with a progress bar; report."""
    from api.cli_db import database_url
    from db.engine import make_engine
    from engines.dataset import write_dataset_from_db

    engine = make_engine(database_url())
    try:
        with _steps("Lendo o banco") as step:
            before = None
            if append:
                from engines.dataset import is_dataset, read_manifest

                before = read_manifest(out) if is_dataset(out) else None
            manifest, days = write_dataset_from_db(
                engine,
                out,
                timezone=timezone,
                municipality=municipality,
                first_day=first_day,
                last_day=last_day,
                n_buckets=buckets,
                append=append,
                recheck_days=recheck_days,
                force=force,
                progress=step,
            )
    finally:
        engine.dispose()
    source = manifest["source"]
    typer.echo(f"Fuso horário dos dias: {timezone}.")
    where = f" do município {municipality}" if municipality else ""
    if not days:
        typer.echo(
            f"Nenhum dia fechado novo{where}: o conjunto já vai até {source['last_day']} "
            f"({manifest['rows']} pings)."
        )
    else:
        if before is not None and days[0] <= before["source"]["last_day"]:
            typer.echo(
                f"Regravados os dias {days[0]} a {before['source']['last_day']}: o banco tem "
                "pings que chegaram (ou saíram) depois de gravados."
            )
        added = manifest["rows"] - (before["rows"] if before is not None else 0)
        verb = "acrescentados" if before is not None else "gravados"
        typer.echo(
            f"{added} pings do banco{where} {verb}: dias {days[0]} a {days[-1]}; "
            f"o conjunto vai de {source['first_day']} a {source['last_day']}, "
            f"{manifest['rows']} pings, {manifest['n_buckets']} grupo(s) de veículos, "
            f"{len(manifest['files'])} arquivo(s)."
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
