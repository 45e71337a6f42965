"""`pontual serve`: the HTTP API (FastAPI on uvicorn) on the local PostGIS or ``DATABASE_URL``."""

from __future__ import annotations

import os
from typing import Annotated

import typer


def serve(
    host: Annotated[str, typer.Option(help="Endereço de escuta.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Porta TCP.", min=1, max=65535)] = 8000,
    workers: Annotated[
        int, typer.Option(help="Processos de trabalho (cada um com seu pool de conexões).", min=1)
    ] = 1,
    log_level: Annotated[str, typer.Option(help="Nível de log do uvicorn.")] = "info",
) -> None:
    """Serve a API HTTP (documentação em /docs); aplica as migrações antes de iniciar."""
    import uvicorn

    from api.cli_db import database_url
    from api.settings import get_settings
    from db.engine import describe_url

    settings = get_settings()
    url = database_url(settings)  # starts the local cluster on demand, migrates to head
    typer.echo(f"Banco: {describe_url(url)}; API em http://{host}:{port} (docs em /docs)")
    if workers == 1:
        from api.main import create_app

        uvicorn.run(
            create_app(database_url=url, settings=settings),
            host=host,
            port=port,
            log_level=log_level,
        )
        return
    os.environ["DATABASE_URL"] = url  # the workers build their app from the environment
    uvicorn.run(
        "api.main:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
    )
