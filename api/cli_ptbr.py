"""The command line's own words in pt-BR: help panels, usage line, type labels and errors.

Typer ships its strings in English. Those of ``typer.rich_utils`` are module constants read at
each call (panel titles, ``[default: …]``, ``[required]``, the error panel's title and hint):
they are set here. The rest is written as literals in the click copy that Typer vendors
(``typer._click``: "Usage:", "Show this message and exit.", "Missing option", "Invalid value
for", "No such option", …) and in the Pydantic messages of its value checks, so there is no
catalogue to translate: :func:`install` wraps the few places that print them (the usage line,
the help option, the type column of the help, the error panel) and :func:`translate` rewrites
an error message, known phrases one by one. ``tests/api/test_cli_ptbr.py`` renders every
command's help and the errors, so a Typer upgrade that moves a string fails there.
"""

from __future__ import annotations

import re
from typing import Any

HELP_OPTION_TEXT = "Mostra esta ajuda e sai."
USAGE_PREFIX = "Uso: "

_PANELS = {
    "DEPRECATED_STRING": "(obsoleto) ",
    "DEFAULT_STRING": "[padrão: {}]",
    "ENVVAR_STRING": "[variável de ambiente: {}]",
    "REQUIRED_LONG_STRING": "[obrigatório]",
    "ARGUMENTS_PANEL_TITLE": "Argumentos",
    "OPTIONS_PANEL_TITLE": "Opções",
    "COMMANDS_PANEL_TITLE": "Comandos",
    "ERRORS_PANEL_TITLE": "Erro",
    "ABORTED_TEXT": "Interrompido.",
    "RICH_HELP": "Veja [blue]'{command_path} {help_option}'[/] para ajuda.",
}
_USAGE_PIECES = {"[OPTIONS]": "[OPÇÕES]", "COMMAND [ARGS]...": "COMANDO [ARGS]..."}
_TYPES = {
    "str": "texto",
    "path": "caminho",
    "file": "arquivo",
    "dir": "pasta",
    "int": "inteiro",
    "int range": "inteiro",
    "float": "número",
    "float range": "número",
    "bool": "sim|não",
    "datetime": "data",
}
_TYPE_LABEL = re.compile(r"<([^<>|]+)>")

# Error phrases of typer._click and of Pydantic's checks, in the order they are tried.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"^Missing option (.+)\.$", r"Falta a opção obrigatória \1."),
        (r"^Missing argument (.+)\.$", r"Falta o argumento \1."),
        (r"^Missing parameter: (.+)$", r"Falta o parâmetro \1."),
        (r"^Missing command\.$", "Falta o comando."),
        (r"^No such command (.+?)\.", r"Comando desconhecido: \1."),
        (r"^No such option: (\S+)", r"Opção desconhecida: \1"),
        (r"\(Possible options: (.+)\)", r"(opções parecidas: \1)"),
        (r"Did you mean (.+)\?", r"Quis dizer \1?"),
        (r"^Option (.+) requires an argument\.$", r"A opção \1 precisa de um valor."),
        (r"^Option (.+) requires (\d+) arguments\.$", r"A opção \1 precisa de \2 valores."),
        (r"^Option (.+) does not take a value\.$", r"A opção \1 não aceita valor."),
        (
            r"^Got unexpected extra arguments? ?\(?s?\)? ?\((.*)\)$",
            r"Argumento(s) a mais, não esperado(s): \1",
        ),
        (r"^Invalid value for (.+?): ", r"Valor inválido para \1: "),
        (r"^Invalid value: ", "Valor inválido: "),
        (r"Value error, ", ""),
        (r"Choose from:", "Escolha entre:"),
        (r"(\S+) is not one of (.+)\.", r"\1 não é um de \2."),
        (
            r"Input should be a valid integer, unable to parse string as an integer",
            "esperado um número inteiro",
        ),
        (
            r"Input should be a valid integer, got a number with a fractional part",
            "esperado um número inteiro",
        ),
        (r"Input should be a valid integer", "esperado um número inteiro"),
        (
            r"Input should be a valid number, unable to parse string as a number",
            "esperado um número",
        ),
        (r"Input should be a valid number", "esperado um número"),
        (r"Input should be a valid boolean[^;]*", "esperado sim ou não (true/false)"),
        (r"Input should be greater than or equal to (\S+)", r"esperado um valor >= \1"),
        (r"Input should be greater than (\S+)", r"esperado um valor > \1"),
        (r"Input should be less than or equal to (\S+)", r"esperado um valor <= \1"),
        (r"Input should be less than (\S+)", r"esperado um valor < \1"),
        (r"Value (.+) is not a valid (\S+)\.", r"o valor \1 não é válido (\2)."),
        (r"(\S+) (.+) does not exist\.", r"\1 \2 não existe."),
        (r"^Could not open file (.+?): ", r"Não foi possível abrir o arquivo \1: "),
    )
)


def translate(message: str) -> str:
    """Return an error message of Typer/click/Pydantic in pt-BR (known phrases; ours as given)."""
    for pattern, replacement in _PHRASES:
        message = pattern.sub(replacement, message)
    return message


def type_label(label: str | None) -> str | None:
    """Return a help type label in pt-BR (``<path>`` → ``<caminho>``; choices as they are)."""
    if label is None:
        return None
    return _TYPE_LABEL.sub(lambda m: f"<{_TYPES.get(m.group(1), m.group(1))}>", label)


def install() -> None:
    """Put the pt-BR words in Typer's help and errors (idempotent)."""
    from typer import core, rich_utils
    from typer._click import core as click_core
    from typer._click import decorators

    if getattr(rich_utils, "_pontual_ptbr", False):
        return
    rich_utils._pontual_ptbr = True  # type: ignore[attr-defined]  # our once-only mark
    for name, text in _PANELS.items():
        setattr(rich_utils, name, text)
    rich_utils.OptionHighlighter.highlights.append(r"(?P<usage>Uso: )")

    def format_usage(self: Any, ctx: Any, formatter: Any) -> None:
        pieces = [_USAGE_PIECES.get(p, p) for p in self.collect_usage_pieces(ctx)]
        formatter.write_usage(ctx.command_path, " ".join(pieces), prefix=USAGE_PREFIX)

    # Patching the libraries' methods in place is the point here (pt-BR help).
    click_core.Command.format_usage = format_usage  # type: ignore[method-assign]

    make_help_option = decorators.help_option

    def help_option(param_decls: list[str]) -> Any:
        add = make_help_option(param_decls)

        def decorate(command: Any) -> Any:
            done = add(command)
            command.params[-1].help = HELP_OPTION_TEXT
            return done

        return decorate

    decorators.help_option = help_option

    option_type = core.TyperOption.display_type_rich
    argument_type = core.TyperArgument.display_type_rich

    def option_display_type(self: Any, ctx: Any) -> str | None:
        if self.is_bool_flag:
            return None  # a flag takes no value
        return type_label(option_type(self, ctx))

    def argument_display_type(self: Any, ctx: Any) -> str | None:
        return type_label(argument_type(self, ctx))

    # Patched in place as above (pt-BR type labels).
    core.TyperOption.display_type_rich = option_display_type  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = argument_display_type  # type: ignore[method-assign]

    format_error = rich_utils.rich_format_error

    def rich_format_error(self: Any) -> None:
        message = translate(self.format_message())
        self.format_message = lambda: message
        format_error(self)

    rich_utils.rich_format_error = rich_format_error
