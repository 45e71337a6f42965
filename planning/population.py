"""IBGE population of a municipality: Censo 2022 (``pop_total``) or the 2024 estimate.

The bundled CSVs (``data/brazil/population``, provenance in ``data/brazil/PROVENANCE.md``) are
read directly, so planning needs no database; the registry holds the same figures after
``pontual import municipalities``.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from fleet.loaders import read_populations
from planning._errors import PlanningError, UnknownMunicipalityError

POPULATION_DIR = Path(__file__).resolve().parents[1] / "data" / "brazil" / "population"
CENSUS_PATH = POPULATION_DIR / "censo2022_populacao_municipios.csv"
ESTIMATE_PATH = POPULATION_DIR / "estimativa_populacao_municipios_2024.csv"
YEARS = (2022, 2024)
"""Years with a bundled figure: 2022 (census), 2024 (estimate)."""

POPULATION_COLUMNS = ("municipality_code", "name", "uf", "year", "kind", "population", "source")
_CODE = re.compile(r"^\d{7}$")


def read_population_table(
    census_path: str | Path = CENSUS_PATH, estimate_path: str | Path | None = ESTIMATE_PATH
) -> pd.DataFrame:
    """Read the IBGE population files with the municipalities' names.

    Parameters
    ----------
    census_path : str or pathlib.Path
        Censo 2022 CSV (``cod_ibge, uf, nome, pop_total``).
    estimate_path : str or pathlib.Path, optional
        2024 estimate CSV (``cod_ibge, pop_estimada_2024_07_01``).

    Returns
    -------
    pandas.DataFrame
        ``POPULATION_COLUMNS``, one row per municipality and year.
    """
    figures = read_populations(census_path, estimate_path)
    names = pd.read_csv(census_path, dtype=str, encoding="utf-8-sig")[["cod_ibge", "nome", "uf"]]
    names = names.rename(columns={"cod_ibge": "municipality_code", "nome": "name"})
    names["municipality_code"] = names["municipality_code"].str.strip()
    out = figures.merge(names, on="municipality_code", how="left")
    return out[list(POPULATION_COLUMNS)]


@cache
def bundled_population_table() -> pd.DataFrame:
    """Return the bundled IBGE figures (read once)."""
    return read_population_table()


def population_for(populations: pd.DataFrame, *, municipality: str, year: int) -> dict[str, Any]:
    """Return the population of a municipality in a year, with its name and source.

    Parameters
    ----------
    populations : pandas.DataFrame
        As from :func:`read_population_table`.
    municipality : str
        7-digit IBGE code.
    year : int
        2022 (Censo) or 2024 (estimate).

    Returns
    -------
    dict
        ``municipality``, ``name``, ``uf``, ``year``, ``kind`` (census/estimate), ``population``
        and ``source``.

    Raises
    ------
    UnknownMunicipalityError
        If the code is not 7 digits or not an IBGE municipality.
    PlanningError
        If no figure of ``year`` is available.
    """
    if not _CODE.match(str(municipality)):
        msg = f"código IBGE '{municipality}' inválido: esperado 7 dígitos (ex.: 1100205)"
        raise UnknownMunicipalityError(msg)
    rows = populations[populations["municipality_code"] == municipality]
    if rows.empty:
        msg = (
            f"município '{municipality}' não encontrado entre os municípios do IBGE; "
            "confira o código de 7 dígitos (ex.: 1100205 Porto Velho, 4314548 Pinto Bandeira)"
        )
        raise UnknownMunicipalityError(msg)
    row = rows[rows["year"] == year]
    if row.empty:
        have = ", ".join(str(y) for y in sorted(rows["year"].unique()))
        msg = f"'year' era {year}; população disponível para: {have}"
        raise PlanningError(msg)
    r = row.iloc[0]
    return {
        "municipality": municipality,
        "name": str(r["name"]),
        "uf": str(r["uf"]),
        "year": int(r["year"]),
        "kind": str(r["kind"]),
        "population": int(r["population"]),
        "source": str(r["source"]),
    }
