"""The command line in pt-BR: every command's help at 80 columns, Typer's own words, errors."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from api.cli import app
from api.cli_ptbr import translate, type_label

ENGLISH = (
    "Usage",
    "Options",
    "Commands",
    "Arguments",
    "Show this message",
    "[default",
    "[required]",
    "env var",
    "<bool>",
    "<str>",
    "<path>",
    "<int>",
    "<int range",
    "<float>",
    "Try '",
    "Error",
)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group of ``pontual``, as argument paths."""
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = [()]
    pending: list[tuple[tuple[str, ...], object]] = [((), root)]
    while pending:
        path, group = pending.pop()
        ctx = typer.Context(group)  # type: ignore[arg-type]
        for name in group.list_commands(ctx):  # type: ignore[attr-defined]
            command = group.get_command(ctx, name)  # type: ignore[attr-defined]
            paths.append((*path, name))
            if hasattr(command, "list_commands"):
                pending.append(((*path, name), command))
    return sorted(paths)


PATHS = _command_paths()


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


class TestHelp:
    def test_every_command_is_listed(self) -> None:
        """The walk finds the groups and their commands (analyze, db status, stands list…)."""
        assert {("analyze",), ("db", "status"), ("stands", "list"), ("demo",)} <= set(PATHS)
        assert len(PATHS) > 40

    @pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "pontual")
    def test_fits_80_columns_in_ptbr(self, path: tuple[str, ...]) -> None:
        """Each help fits 80 columns, nothing cut with '…', no English of Typer's own."""
        text = _help(path)
        too_long = [line for line in text.splitlines() if len(line) > 80]
        assert not too_long, "\n".join(too_long)
        assert "…" not in text, text
        english = [word for word in ENGLISH if word in text]
        assert not english, f"{english}\n{text}"
        assert "Uso: pontual" in text and "Mostra esta ajuda" in text

    def test_panels_and_types(self) -> None:
        """Options, defaults and types are named in pt-BR; a flag shows no type."""
        text = _help(("analyze",))
        assert "Opções" in text and "[obrigatório]" in text and "<caminho>" in text
        assert "[padrão: out]" in text
        demo = _help(("demo",))
        line = next(row for row in demo.splitlines() if "--open" in row)
        assert "<" not in line


class TestErrors:
    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            (["analyze"], "Falta a opção obrigatória '--pings'."),
            (["analyze", "--pings", "p", "--stands", "s", "--jobs", "0"], "esperado um valor >= 1"),
            (
                ["analyze", "--pings", "p", "--stands", "s", "--jobs", "a"],
                "esperado um número inteiro",
            ),
            (["analyze", "--pings", "p", "--stands", "s", "--engine", "z"], "'z' não é um de"),
            (["analyze", "--bogus"], "Opção desconhecida: --bogus"),
            (["analyze", "--pings"], "A opção '--pings' precisa de um valor."),
            (["nocmd"], "Comando desconhecido: 'nocmd'."),
            (["stands", "show"], "Falta o argumento"),
            (["demo", "extra"], "Argumento(s) a mais, não esperado(s): extra"),
        ],
    )
    def test_usage_errors_in_ptbr(self, args: list[str], expected: str) -> None:
        """Typer's usage errors come out in pt-BR: usage line, hint, panel title and message."""
        result = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
        assert result.exit_code == 2
        text = " ".join(result.output.split())
        assert expected in text, text
        assert "Erro" in text
        assert not [w for w in ("Usage", "Invalid", "Missing", "No such", "Try") if w in text]

    def test_usage_line_and_hint(self) -> None:
        """An error with its command says how to use it and where the help is, in pt-BR."""
        result = CliRunner().invoke(app, ["analyze"], env={"COLUMNS": "100"})
        assert "Uso: pontual analyze [OPÇÕES]" in result.output
        assert "Veja 'pontual analyze --help' para ajuda." in result.output

    def test_translate_leaves_our_messages(self) -> None:
        """Our own pt-BR messages pass through unchanged; Pydantic's are rewritten."""
        ours = "'--as-of' era 'x'; esperado AAAA-MM-DD"
        assert translate(ours) == ours
        assert translate("Invalid value for '--x': Input should be greater than 0") == (
            "Valor inválido para '--x': esperado um valor > 0"
        )

    def test_type_labels(self) -> None:
        """Known type labels are translated; choices stay as they are."""
        assert type_label("<path>") == "<caminho>"
        assert type_label("<int range>") == "<inteiro>"
        assert type_label("<local|dask>") == "<local|dask>"
