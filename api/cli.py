"""The ``pontual`` command line: composes the command groups of each room."""

from __future__ import annotations

import sys

import typer

from api.cli_ptbr import install as _install_ptbr

_install_ptbr()

app = typer.Typer(
    name="pontual",
    help="Pontual: monitoramento de frota de táxi e gestão de pontos para órgãos reguladores.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register() -> None:
    from api import (
        cli_alerts,
        cli_analyze,
        cli_dataset,
        cli_db,
        cli_demo,
        cli_import,
        cli_maps,
        cli_plan,
        cli_proposals,
        cli_rulebooks,
        cli_serve,
        cli_stands,
        cli_users,
    )

    app.add_typer(cli_db.app, name="db")
    app.add_typer(cli_import.app, name="import")
    app.command("analyze")(cli_analyze.analyze)
    app.add_typer(cli_dataset.app, name="dataset")
    app.command("demo")(cli_demo.demo)
    app.add_typer(cli_maps.app, name="maps")
    app.command("serve")(cli_serve.serve)
    app.add_typer(cli_users.app, name="users")
    app.add_typer(cli_users.devices_app, name="devices")
    app.add_typer(cli_proposals.app, name="proposals")
    app.command("plan")(cli_plan.plan)
    app.command("rulebooks")(cli_rulebooks.rulebooks)
    app.add_typer(cli_stands.stands_app, name="stands")
    app.add_typer(cli_stands.licences_app, name="licences")
    app.add_typer(cli_stands.supervisors_app, name="supervisors")
    app.add_typer(cli_alerts.app, name="alerts")


_register()


_EXIT_AT_ONCE = ("analyze",)
"""Commands whose process leaves without the interpreter's teardown once they succeed."""


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except SystemExit as exc:
        if exc.code in (0, None) and sys.argv[1:2] and sys.argv[1] in _EXIT_AT_ONCE:
            _exit_at_once()
        raise
    except (ValueError, RuntimeError, OSError) as exc:
        # Our rooms raise named errors (their ``_errors.py``) with pt-BR messages;
        # a missing file is the user's too. Anything else is a bug: let it surface.
        if not (_is_ours(exc) or isinstance(exc, FileNotFoundError)):
            raise
        typer.secho(f"erro: {exc}", err=True, fg=typer.colors.RED)
        sys.exit(1)


def _exit_at_once() -> None:
    """Leave now (:func:`runtime.exit_now`): the command's files are written and closed."""
    import runtime

    runtime.exit_now(0)


_ROOMS = (
    "runtime", "geo", "fleet", "tracking", "stands", "enforcement", "maps", "planning", "db",
    "engines", "api",
)  # fmt: skip


def _is_ours(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in _ROOMS
