"""The ``pontual`` command line: composes the command groups of each room.

A command's module is imported when that command is asked for (``pontual analyze`` loads
``api.cli_analyze`` only): :class:`_LazyCommands` maps each name to where it lives, and the root
group (:class:`_LazyGroup`, given to Typer as its group class) reads its commands from it.
``pontual --help`` lists them all, so it loads them all.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer._click import Command, Context
from typer.core import TyperGroup, TyperOption

from api.cli_ptbr import install as _install_ptbr

_install_ptbr()

_COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("api.cli_analyze", "analyze"),
    "demo": ("api.cli_demo", "demo"),
    "serve": ("api.cli_serve", "serve"),
    "plan": ("api.cli_plan", "plan"),
    "rulebooks": ("api.cli_rulebooks", "rulebooks"),
    "db": ("api.cli_db", "app"),
    "import": ("api.cli_import", "app"),
    "dataset": ("api.cli_dataset", "app"),
    "maps": ("api.cli_maps", "app"),
    "users": ("api.cli_users", "app"),
    "devices": ("api.cli_users", "devices_app"),
    "proposals": ("api.cli_proposals", "app"),
    "stands": ("api.cli_stands", "stands_app"),
    "licences": ("api.cli_stands", "licences_app"),
    "supervisors": ("api.cli_stands", "supervisors_app"),
    "alerts": ("api.cli_alerts", "app"),
}
"""Each command of ``pontual``: the module and the attribute (a function, or a Typer group)."""


def _load(name: str) -> Command:
    """Build the command ``name`` as Typer would under the root: in a group of its own."""
    module_name, attribute = _COMMANDS[name]
    target = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


class _LazyCommands(MutableMapping[str, Command]):
    """The root's commands by name, each built on first access (the names need no import)."""

    def __init__(self) -> None:
        self._built: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if name not in _COMMANDS:
                raise KeyError(name)
            self._built[name] = _load(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        raise TypeError(f"the commands of pontual are those of _COMMANDS: not {name!r}")

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"the commands of pontual are those of _COMMANDS: not {name!r}")

    def __iter__(self) -> Iterator[str]:
        return iter(_COMMANDS)

    def __len__(self) -> int:
        return len(_COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in _COMMANDS


class _LazyGroup(TyperGroup):
    """The root group: its commands come from :data:`_COMMANDS`, loaded when asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        """Return the ``--help`` flag, ``False`` when not given (as a click flag is), not ``None``.

        Typer converts a ``None`` flag value through Pydantic, whose import (~0.1 s) would then
        be paid by ``pontual analyze --help``, where the root's own ``--help`` is not given.
        """
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


app = typer.Typer(
    name="pontual",
    help="Pontual: monitoramento de frota de táxi e gestão de pontos para órgãos reguladores.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=_LazyGroup,
)


@app.callback()
def _root() -> None:
    # A group needs a callback or a registered command: the commands are in _COMMANDS.
    pass


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
