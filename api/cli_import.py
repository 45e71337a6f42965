"""`pontual import ...`: loaders for the contract's file formats."""

import typer

app = typer.Typer(help="Importa arquivos (pings, porto, stands, fleet, municipalities).", no_args_is_help=True)
