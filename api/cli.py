"""The ``pontual`` command line: composes the command groups of each room.

A command's module is imported when that command is asked for (``pontual analyze`` loads
``api.cli_analyze`` only, not the database or map commands): :data:`_COMMANDS` says where each
lives and the root group (:class:`_LazyGroup`) builds a command on first use. The root's help
lists the commands from their summaries there, so ``pontual --help`` loads none of them
(``tests/api/test_cli_imports.py`` checks the summaries against the commands).
"""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, NamedTuple

import typer
from typer._click import Command, Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup, TyperOption

from api._errors import is_ours
from api.cli_ptbr import install as _install_ptbr

_install_ptbr()


class _Entry(NamedTuple):
    module: str
    attribute: str  # a command function, or a Typer group
    summary: str  # the first paragraph of its help, as the root's help lists it


_COMMANDS: dict[str, _Entry] = {
    "analyze": _Entry(
        "api.cli_analyze",
        "analyze",
        "Analisa pings contra pontos e frota e grava os arquivos de saída do contrato.",
    ),
    "demo": _Entry(
        "api.cli_demo",
        "demo",
        "Carrega os dados reais no PostGIS local, reproduz as viagens do Porto e gera mapas.",
    ),
    "serve": _Entry(
        "api.cli_serve",
        "serve",
        "Serve a API HTTP (documentação em /docs) e o console web (/); aplica as migrações.",
    ),
    "plan": _Entry(
        "api.cli_plan",
        "plan",
        "Planejamento: frota permitida pela população, acessíveis, pontos contra demanda, "
        "veículos.",
    ),
    "rulebooks": _Entry(
        "api.cli_rulebooks",
        "rulebooks",
        "Mostra, por regulamento, o dispositivo, a gravidade e a multa de cada tipo de achado.",
    ),
    "db": _Entry(
        "api.cli_db",
        "app",
        "Banco de dados PostGIS (start, stop, status, upgrade, partitions, retention). Sem "
        "DATABASE_URL, o pontual gerencia um servidor PostGIS local no diretório de dados do "
        "usuário.",
    ),
    "import": _Entry(
        "api.cli_import",
        "app",
        "Importa arquivos para o banco (municipalities, stands, fleet, drivers, driver-links, "
        "stand-suspensions, allowed-places, pings, porto).",
    ),
    "dataset": _Entry(
        "api.cli_dataset",
        "app",
        "Conjuntos de pings particionados por dia e por grupo de veículos, que os workers do "
        "motor Dask leem sozinhos (write).",
    ),
    "maps": _Entry(
        "api.cli_maps",
        "app",
        "Mapas em HTML autocontido (funcionam sem rede): pontos, fiscalização, cidadão, "
        "planejamento.",
    ),
    "users": _Entry(
        "api.cli_users",
        "app",
        "Contas de usuário e papéis (admin, planner, agent, supervisor).",
    ),
    "devices": _Entry(
        "api.cli_users",
        "devices_app",
        "Dispositivos GPS: cada um com seu token, só envia posições do seu veículo.",
    ),
    "proposals": _Entry(
        "api.cli_proposals",
        "app",
        "Propostas de autuação: gerar a partir dos achados, revisar (confirmar, descartar, "
        "notificar, defesa, decisão, notificação da decisão, decisão definitiva), prazos. Cada "
        "passo fica no registro de auditoria.",
    ),
    "stands": _Entry(
        "api.cli_stands",
        "stands_app",
        "Pontos de táxi: criar, alterar, desativar, listar, detalhar.",
    ),
    "licences": _Entry(
        "api.cli_stands",
        "licences_app",
        "Licenças de estacionamento (prefixo × ponto): conceder, encerrar, excluir (art. 50), "
        "listar.",
    ),
    "supervisors": _Entry(
        "api.cli_stands",
        "supervisors_app",
        "Supervisores de ponto fixo: eleição (art. 42), homologação, fim do mandato, histórico "
        "e pontos sem supervisor há mais de 90 dias (art. 50, III).",
    ),
    "alerts": _Entry(
        "api.cli_alerts",
        "app",
        "Alertas ao vivo: veículos cuja detecção falhou (posições retidas, nunca descartadas) e "
        "nova tentativa.",
    ),
}
"""Each command of ``pontual``, in the order of its help."""


def _help_flag_false(option: TyperOption | None) -> TyperOption | None:
    """Make an absent ``--help`` ``False`` (as a click flag is), not ``None``.

    Typer converts a ``None`` flag value through Pydantic: its import (~0.1 s) would be paid
    by ``pontual analyze --help``, where the root's own ``--help`` is not given.
    """
    if option is not None and option.default is None:
        option.default = False
    return option


class _Group(TyperGroup):
    """A group of ``pontual`` (the root and each command group)."""

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        """Return the ``--help`` flag, ``False`` when absent (:func:`_help_flag_false`)."""
        return _help_flag_false(super().get_help_option(ctx))


class _Command(TyperCommand):
    """A command of ``pontual`` directly under the root (``analyze``, ``demo``…)."""

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        """Return the ``--help`` flag, ``False`` when absent (:func:`_help_flag_false`)."""
        return _help_flag_false(super().get_help_option(ctx))


def _load(name: str) -> Command:
    """Build the command ``name`` as Typer would under the root: in a group of its own."""
    entry = _COMMANDS[name]
    target = getattr(importlib.import_module(entry.module), entry.attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, cls=_Group)
    else:
        holder.command(name, cls=_Command)(target)
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


class _LazyGroup(_Group):
    """The root group: its commands come from :data:`_COMMANDS`, built when asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """Write the root's help, listing the commands by their summaries (none is built)."""
        listing = copy.copy(self)
        listing.commands = {
            name: TyperCommand(name=name, short_help=entry.summary)
            for name, entry in _COMMANDS.items()
        }
        super(_LazyGroup, listing).format_help(ctx, formatter)


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
        if not (is_ours(exc) or isinstance(exc, FileNotFoundError)):
            raise
        typer.secho(f"erro: {exc}", err=True, fg=typer.colors.RED)
        sys.exit(1)


def _exit_at_once() -> None:
    """Leave now (:func:`runtime.exit_now`): the command's files are written and closed."""
    import runtime

    runtime.exit_now(0)
