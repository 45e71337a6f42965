"""Where a municipality's planning rule comes from: its bundled rulebook, or a ``--rules`` file.

The rule is the ``[planning]`` table of ``enforcement/rulebooks/<IBGE>-<service>.toml`` (schema
:class:`enforcement.rulebook.Planning`, excerpts checked against the law). Any other municipality
gives its rule in a TOML file with the same ``[planning]`` table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from enforcement.rulebook import RULEBOOK_DIR, Planning, bundled_rulebooks
from planning._errors import PlanningRulesError

SERVICES = ("taxi", "fretamento")


def bundled_planning_rule(
    municipality: str, *, service: str = "taxi"
) -> tuple[Planning | None, dict[str, Any] | None]:
    """Return the bundled planning rule of a municipality and service, and where it comes from.

    Parameters
    ----------
    municipality : str
        7-digit IBGE code.
    service : str
        ``taxi`` or ``fretamento``.

    Returns
    -------
    tuple
        ``(rule, source)``: the ``[planning]`` table and ``{"file", "law"}``; ``(None, source)``
        when the rulebook has no planning table, ``(None, None)`` when there is no rulebook.
    """
    book = bundled_rulebooks().get((municipality, service))
    if book is None:
        return None, None
    source = {
        "file": f"enforcement/rulebooks/{municipality}-{service}.toml",
        "law": book.law,
    }
    return book.planning, source


def read_planning_rules(path: str | Path) -> Planning:
    """Read a ``[planning]`` table from a TOML file (``pontual plan --rules FILE``).

    Parameters
    ----------
    path : str or pathlib.Path
        TOML file with a ``[planning]`` table (see ``enforcement/rulebooks/1100205-taxi.toml``).

    Returns
    -------
    Planning
        The validated rule.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    PlanningRulesError
        If the TOML is invalid, has no ``[planning]`` table, or a field breaks the schema.
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de regras não encontrado: {p}"
        raise FileNotFoundError(msg)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        msg = f"{p.name}: TOML inválido ({exc})"
        raise PlanningRulesError(msg) from None
    if not isinstance(data.get("planning"), dict):
        msg = (
            f"{p.name}: falta a tabela [planning] (ex.: inhabitants_per_taxi_min = 500, "
            f"inhabitants_per_taxi_max = 700; modelo em {RULEBOOK_DIR.name}/1100205-taxi.toml)"
        )
        raise PlanningRulesError(msg)
    try:
        return Planning.model_validate(data["planning"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in ("planning", *first["loc"]))
        msg = f"{p.name}: {where}: {first['msg']}"
        raise PlanningRulesError(msg) from None


RULES_FLAG_HINT = (
    "Informe a regra da lei municipal com --rules ARQUIVO.toml (tabela [planning], ex.: "
    "inhabitants_per_taxi_min = 500 e inhabitants_per_taxi_max = 700)."
)
"""How ``pontual plan`` is given a rule: its own renderings add it, never the plan's message."""


def no_rule_message(municipality: str, name: str, *, service: str, law: str | None = None) -> str:
    """Return the pt-BR message for a municipality without a configured planning rule.

    It says what is missing in words any reader of the plan (the console's planners too)
    understands; the command-line way to give it is :data:`RULES_FLAG_HINT`.
    """
    what = "táxi" if service == "taxi" else "fretamento"
    why = (
        f"o texto incluído ({law}) não fixa o tamanho da frota nem a parcela acessível; "
        if law
        else ""
    )
    return (
        f"nenhuma regra de planejamento configurada para {name} ({municipality}), serviço de "
        f"{what}: {why}a população é informada, mas não há frota permitida a calcular. Para "
        "calculá-la, o administrador do sistema configura a regra da lei municipal (habitantes "
        "por táxi e parcela de veículos acessíveis)."
    )
