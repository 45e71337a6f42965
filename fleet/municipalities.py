"""IBGE municipality codes: one rule for every command (7 digits, a municipality of the census).

A code is checked against the IBGE census table (``cod_ibge, uf, nome``: the bundled
``data/brazil/population/censo2022_populacao_municipios.csv`` holds all 5,570). Each
municipality's time zone follows its state (``fleet.loaders.UF_TIMEZONES``), with the
exceptions the loader knows (Fernando de Noronha); states with more than one zone and no rule
here (Amazonas) give None.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fleet._errors import UnknownMunicipalityError
from geo.calendar import TIMEZONE_EXCEPTIONS, UF_TIMEZONES

_CODE = re.compile(r"^\d{7}$")
__all__ = ["Municipality", "find_municipality"]


@dataclass(frozen=True)
class Municipality:
    """A municipality of the IBGE table."""

    code: str
    name: str
    uf: str
    timezone: str | None


@lru_cache(maxsize=4)
def _table(census: Path) -> dict[str, tuple[str, str]]:
    with census.open(encoding="utf-8-sig", newline="") as fh:
        return {
            row["cod_ibge"].strip(): (row["nome"].strip(), row["uf"].strip().upper())
            for row in csv.DictReader(fh)
        }


def municipality_timezone(code: str, uf: str) -> str | None:
    """Time zone of a municipality: its state's, or a known exception; None when unknown."""
    return TIMEZONE_EXCEPTIONS.get(code) or UF_TIMEZONES.get(uf.upper())


def find_municipality(code: str, *, census: str | Path) -> Municipality:
    """Return the municipality of an IBGE code.

    Parameters
    ----------
    code : str
        7-digit IBGE code (e.g. ``4314902``, Porto Alegre).
    census : str or pathlib.Path
        CSV with ``cod_ibge``, ``uf`` and ``nome``.

    Raises
    ------
    UnknownMunicipalityError
        The code is not 7 digits, or no municipality of the table has it.
    """
    text = str(code).strip()
    if not _CODE.match(text):
        msg = f"código IBGE '{code}' inválido: esperado 7 dígitos (ex.: 1100205)"
        raise UnknownMunicipalityError(msg)
    found = _table(Path(census).resolve()).get(text)
    if found is None:
        msg = (
            f"município '{text}' não encontrado entre os municípios do IBGE; "
            "confira o código de 7 dígitos (ex.: 1100205 Porto Velho, 4314548 Pinto Bandeira)"
        )
        raise UnknownMunicipalityError(msg)
    name, uf = found
    return Municipality(code=text, name=name, uf=uf, timezone=municipality_timezone(text, uf))
