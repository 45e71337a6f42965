"""The fleet a plan counts, and the vehicle constraints of the law: age limit, inspection bands.

Ages are whole years: the reference year minus the year of manufacture (Pinto Bandeira, art. 10:
"contados do ano de fabricação") or of first registration (fretamento, art. 12, parágrafo único:
the year runs from 1 January to 31 December); without a first-registration date the year of
manufacture is used, and the row says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pandas as pd

from enforcement.rulebook import InspectionBand
from planning._errors import PlanningInputError

CONSTRAINT_COLUMNS = (
    "vehicle_id",
    "prefixo",
    "year",
    "age_years",
    "age_basis",
    "over_age",
    "inspection_interval_days",
    "inspection_provision",
    "inspection_valid_until",
    "inspection_status",
    "issues",
)
AGE_BASIS_LABELS = {
    "manufacture": "ano de fabricação",
    "first_registration": "ano do primeiro emplacamento",
}


def _require(frame: pd.DataFrame, columns: Sequence[str], *, what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"{what}: faltam as colunas {', '.join(missing)}"
        raise PlanningInputError(msg)


def _date(value: Any) -> dt.date | None:
    if value is None or (not isinstance(value, dt.date) and pd.isna(value)):
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return pd.Timestamp(value).date()


def active_fleet(
    fleet: pd.DataFrame, *, as_of: dt.date, municipality: str | None = None, service: str = "taxi"
) -> pd.DataFrame:
    """Return the vehicles in operation on a date.

    A vehicle counts when its ``status`` is ``active`` (or not given: listed in the fleet) and
    ``as_of`` falls within ``status_since``–``status_until`` (inclusive, open when missing); when
    ``municipality`` is given, rows of another municipality are left out (rows without one are
    kept); when the frame has a ``service`` column (default ``taxi``), only that service's rows.

    Parameters
    ----------
    fleet : pandas.DataFrame
        Fleet frame (``fleet.loaders.read_fleet``) with at least ``vehicle_id``.
    as_of : datetime.date
        Local date.
    municipality : str, optional
        IBGE code.
    service : str
        ``taxi`` or ``fretamento``.

    Returns
    -------
    pandas.DataFrame
        The rows in operation, in input order.

    Raises
    ------
    PlanningInputError
        If ``vehicle_id`` is missing.
    """
    _require(fleet, ("vehicle_id",), what="frota")
    n = len(fleet)
    keep = pd.Series(True, index=fleet.index)
    if "status" in fleet.columns:
        keep &= fleet["status"].isna() | (fleet["status"] == "active")
    for column, later in (("status_since", False), ("status_until", True)):
        if column in fleet.columns and n:
            dates = fleet[column].map(_date)
            ok = [d is None or (d >= as_of if later else d <= as_of) for d in dates]
            keep &= pd.Series(ok, index=fleet.index)
    if municipality is not None and "municipality" in fleet.columns:
        keep &= fleet["municipality"].isna() | (fleet["municipality"] == municipality)
    if "service" in fleet.columns:
        keep &= fleet["service"].fillna("taxi") == service
    return fleet[keep]


def count_accessible(fleet: pd.DataFrame) -> int | None:
    """Count accessible vehicles; None when the frame does not say for every row.

    A count of the few flagged among vehicles nobody knows about would read as the fleet's.
    """
    if "accessible" not in fleet.columns or len(fleet) == 0:
        return 0 if len(fleet) == 0 else None
    flags = fleet["accessible"]
    if flags.isna().any():
        return None
    return int((flags.fillna(False).astype(bool)).sum())


def _band_for(age: int, bands: Sequence[InspectionBand]) -> InspectionBand | None:
    return next((b for b in bands if b.age_min_years <= age <= b.age_max_years), None)


def vehicle_constraints(
    fleet: pd.DataFrame,
    *,
    as_of: dt.date,
    max_age_years: int | None = None,
    age_counted_from: str = "manufacture",
    inspection_bands: Sequence[InspectionBand] = (),
    due_within_days: int = 30,
) -> pd.DataFrame:
    """Check each vehicle's age and inspection against the law.

    Parameters
    ----------
    fleet : pandas.DataFrame
        Fleet frame with ``vehicle_id``; ``year`` (of manufacture), ``first_registered_on`` and
        ``inspection_valid_until`` are used when present.
    as_of : datetime.date
        Reference date; the age is ``as_of.year`` minus the base year.
    max_age_years : int, optional
        Oldest age allowed (inclusive): a vehicle older is ``over_age``.
    age_counted_from : {"manufacture", "first_registration"}
        Base year of the age.
    inspection_bands : sequence of InspectionBand
        Inspection interval by age band (whole years, inclusive).
    due_within_days : int
        An inspection seal expiring within this many days is reported as due.

    Returns
    -------
    pandas.DataFrame
        ``CONSTRAINT_COLUMNS``, one row per vehicle; ``issues`` lists pt-BR descriptions (empty
        when the vehicle complies). ``inspection_status``: ``vencida`` (the seal's
        ``inspection_valid_until`` passed: no band needed), ``a vencer``, ``além do intervalo``
        (seal valid longer than its band's interval), ``em dia`` or ``sem data``.

    Raises
    ------
    PlanningInputError
        If ``vehicle_id`` is missing or ``age_counted_from`` is unknown.
    """
    _require(fleet, ("vehicle_id",), what="frota")
    if age_counted_from not in AGE_BASIS_LABELS:
        msg = (
            f"'age_counted_from' era {age_counted_from!r}; "
            f"esperado um de {', '.join(AGE_BASIS_LABELS)}"
        )
        raise PlanningInputError(msg)
    rows: list[dict[str, Any]] = []
    n = len(fleet)

    def column(name: str) -> list[Any]:
        return fleet[name].tolist() if name in fleet.columns else [None] * n

    prefixos = column("prefixo")
    for vid, prefixo, year, first, valid in zip(
        fleet["vehicle_id"].tolist(),
        prefixos,
        column("year"),
        column("first_registered_on"),
        column("inspection_valid_until"),
        strict=True,
    ):
        year_i = None if year is None or pd.isna(year) else int(year)
        first_d = _date(first)
        if age_counted_from == "first_registration" and first_d is not None:
            base, basis = first_d.year, AGE_BASIS_LABELS["first_registration"]
        elif year_i is not None:
            base = year_i
            basis = AGE_BASIS_LABELS["manufacture"]
            if age_counted_from == "first_registration":
                basis += " (sem data do primeiro emplacamento)"
        else:
            base, basis = None, None
        age = as_of.year - base if base is not None else None
        issues: list[str] = []
        over = bool(max_age_years is not None and age is not None and age > max_age_years)
        if over:
            issues.append(f"idade {age} anos acima do máximo de {max_age_years}")
        band = _band_for(age, inspection_bands) if age is not None else None
        valid_d = _date(valid)
        # A seal past its date is expired whatever the bands; only the interval needs them.
        if valid_d is None:
            status = "sem data"
        elif valid_d < as_of:
            status = "vencida"
            issues.append(f"vistoria vencida em {valid_d:%d/%m/%Y}")
        elif (valid_d - as_of).days <= due_within_days:
            status = "a vencer"
            issues.append(f"vistoria vence em {(valid_d - as_of).days} dias ({valid_d:%d/%m/%Y})")
        elif band is not None and (valid_d - as_of).days > band.interval_days:
            status = "além do intervalo"
            issues.append(
                f"validade da vistoria ({valid_d:%d/%m/%Y}) além do intervalo de "
                f"{band.interval_days} dias da faixa ({band.provision})"
            )
        else:
            status = "em dia"
        rows.append(
            {
                "vehicle_id": str(vid),
                "prefixo": None if prefixo is None or pd.isna(prefixo) else str(prefixo),
                "year": year_i,
                "age_years": age,
                "age_basis": basis,
                "over_age": over,
                "inspection_interval_days": band.interval_days if band else None,
                "inspection_provision": band.provision if band else None,
                "inspection_valid_until": valid_d,
                "inspection_status": status,
                "issues": issues,
            }
        )
    out = pd.DataFrame(rows, columns=list(CONSTRAINT_COLUMNS))
    for name in ("year", "age_years", "inspection_interval_days"):
        out[name] = out[name].astype("Int64")
    out["over_age"] = out["over_age"].astype(bool)
    return out
