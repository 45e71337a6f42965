"""`pontual db ...`: the embedded PostGIS cluster (placeholder until the storage work lands)."""

import typer

app = typer.Typer(help="Banco de dados PostGIS local (start, stop, status, upgrade).", no_args_is_help=True)
