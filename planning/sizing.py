"""Fleet size allowed by a law's inhabitants-per-taxi rule, and the accessible vehicles required.

Rounding favours compliance: every bound is the whole number of taxis that keeps the law's ratio.

- A range of ``min``–``max`` inhabitants per taxi (Porto Velho, art. 5 § 4: 500–700):
  ``fleet_min = ceil(population / max)`` (fewer taxis would leave more than ``max`` inhabitants
  per taxi) and ``fleet_max = floor(population / min)`` (more would leave fewer than ``min``).
  Porto Velho, Censo 2022, 460,413 inhabitants: 657.7 → 658 and 920.8 → 920.
- One fixed proportion (Pinto Bandeira, art. 6: "um veículo para cada 600 habitantes"): each
  permit needs its full 600 inhabitants, so ``fleet_min = fleet_max = floor(population / 600)``
  (2,723 → 4 taxis, 680.75 inhabitants each; 5 would give 544.6, under the proportion).
- Accessible vehicles: ``ceil(share × fleet)`` (exact arithmetic, no float error), or
  ``ceil(fleet / n)`` for "one in every n" (at least one as soon as there is a vehicle).

A population too small for any whole fleet inside a range (e.g. 400 inhabitants with 500–700:
``ceil(400/700) = 1 > floor(400/500) = 0``) gives ``fleet_min > fleet_max``: no fleet complies.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

from planning._errors import PlanningError


def allowed_fleet(
    population: int,
    *,
    inhabitants_per_taxi: int | None = None,
    inhabitants_per_taxi_min: int | None = None,
    inhabitants_per_taxi_max: int | None = None,
) -> tuple[int | None, int | None]:
    """Return ``(fleet_min, fleet_max)`` allowed by an inhabitants-per-taxi rule.

    Parameters
    ----------
    population : int
        Inhabitants (>= 0).
    inhabitants_per_taxi : int, optional
        Fixed proportion: one taxi per this many inhabitants (floor for both bounds).
    inhabitants_per_taxi_min, inhabitants_per_taxi_max : int, optional
        Fewest and most inhabitants per taxi; each gives one bound, the other stays None.

    Returns
    -------
    tuple of (int or None, int or None)
        The bounds, None where the rule gives none.

    Raises
    ------
    PlanningError
        If the population is negative, a ratio is not > 0, or both forms are given.
    """
    if population < 0:
        msg = f"'population' era {population}; esperado um inteiro >= 0"
        raise PlanningError(msg)
    for name, value in (
        ("inhabitants_per_taxi", inhabitants_per_taxi),
        ("inhabitants_per_taxi_min", inhabitants_per_taxi_min),
        ("inhabitants_per_taxi_max", inhabitants_per_taxi_max),
    ):
        if value is not None and value <= 0:
            msg = f"'{name}' era {value}; esperado um inteiro > 0"
            raise PlanningError(msg)
    if inhabitants_per_taxi is not None:
        if inhabitants_per_taxi_min is not None or inhabitants_per_taxi_max is not None:
            msg = "dê 'inhabitants_per_taxi' ou a faixa _min/_max, não ambos"
            raise PlanningError(msg)
        fixed = population // inhabitants_per_taxi
        return fixed, fixed
    low = -(-population // inhabitants_per_taxi_max) if inhabitants_per_taxi_max else None
    high = population // inhabitants_per_taxi_min if inhabitants_per_taxi_min else None
    return low, high


def accessible_required(
    fleet: int, *, share_min: Decimal | float | str | None = None, one_in: int | None = None
) -> int | None:
    """Return the accessible vehicles a fleet must have, rounded up.

    Parameters
    ----------
    fleet : int
        Vehicles in the fleet (>= 0).
    share_min : Decimal, float or str, optional
        Minimum share, e.g. ``Decimal("0.02")`` for 2 %; taken at its decimal value.
    one_in : int, optional
        One accessible vehicle in every ``one_in`` used.

    Returns
    -------
    int or None
        ``ceil(share_min × fleet)`` or ``ceil(fleet / one_in)``; None when no rule is given.

    Raises
    ------
    PlanningError
        If the fleet is negative, both rules are given, or a rule is out of range.
    """
    if fleet < 0:
        msg = f"'fleet' era {fleet}; esperado um inteiro >= 0"
        raise PlanningError(msg)
    if share_min is not None and one_in is not None:
        msg = "dê 'share_min' ou 'one_in', não ambos"
        raise PlanningError(msg)
    if share_min is not None:
        share = Fraction(Decimal(str(share_min)))
        if not 0 < share <= 1:
            msg = f"'share_min' era {share_min}; esperado entre 0 (exclusive) e 1"
            raise PlanningError(msg)
        return math.ceil(share * fleet)
    if one_in is not None:
        if one_in <= 0:
            msg = f"'one_in' era {one_in}; esperado um inteiro > 0"
            raise PlanningError(msg)
        return -(-fleet // one_in)
    return None


def gap(current: int | None, *, minimum: int | None, maximum: int | None = None) -> dict[str, Any]:
    """Compare a count with its allowed bounds.

    Parameters
    ----------
    current : int or None
        The count (None: not known).
    minimum, maximum : int or None
        Inclusive bounds (None: no bound).

    Returns
    -------
    dict
        ``status`` (``unknown``, ``below``, ``within``, ``above``, ``infeasible``), ``missing``
        (how many to add to reach ``minimum``), ``excess`` (how many over ``maximum``) and a
        pt-BR ``message``.
    """
    if minimum is not None and maximum is not None and minimum > maximum:
        return {
            "status": "infeasible",
            "missing": None,
            "excess": None,
            "message": (
                f"nenhuma frota inteira atende à regra: o mínimo ({minimum}) passa do máximo "
                f"({maximum}) para esta população"
            ),
        }
    if current is None:
        return {
            "status": "unknown",
            "missing": None,
            "excess": None,
            "message": "frota atual desconhecida: informe --fleet ARQUIVO ou --from-db",
        }
    missing = max(0, minimum - current) if minimum is not None else 0
    excess = max(0, current - maximum) if maximum is not None else 0
    if missing:
        status, message = "below", f"faltam {missing} para o mínimo de {minimum}"
    elif excess:
        status, message = "above", f"{excess} acima do máximo de {maximum}"
    else:
        status, message = "within", "dentro do exigido"
    return {"status": status, "missing": missing, "excess": excess, "message": message}
