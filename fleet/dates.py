"""Registry dates: the one range every stored registry date must fall in, and how they are read.

Every date a person types into the registry — licence validity, a stand's retirement, supervisor
elections, homologations and terms, exclusions, vehicle statuses and document expiries, driver
assignments, the reference date of a fleet file — is checked by :func:`check_registry_date`
before it is stored, by the HTTP routes, the CLI commands and the loaders alike:

    :data:`REGISTRY_DATE_MIN` (1990-01-01) ≤ date ≤ today + :data:`REGISTRY_YEARS_AHEAD` year(s)

A date outside it is a typo (``0202-12-01`` for ``2022-12-01``), refused with
:class:`RegistryDateError` naming the field and the range (HTTP 422, CLI ``erro:``).

Rows stored before the check, or written by hand in SQL, can still hold any date PostgreSQL
takes (years 4713 BC to 5874897). Readers that turn registry dates into pandas values use
:func:`pandas_dates`, which clips them to :data:`PANDAS_DATE_MIN` … :data:`PANDAS_DATE_MAX`
(what a nanosecond ``Timestamp`` holds) so that a view never fails on one bad row; live
detection refuses to judge a vehicle with such a row instead (:func:`unreadable_date`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from fleet._errors import FleetError

REGISTRY_DATE_MIN = dt.date(1990, 1, 1)
"""Earliest registry date accepted."""
REGISTRY_YEARS_AHEAD = 1
"""Latest registry date accepted: today plus this many years."""
DOCUMENT_YEARS_AHEAD = 10
"""A document's validity (CNH, ICTP, alvará, vistoria) may lie this many years ahead: a CNH is
issued for years, an alvará to the end of a later year; every other date follows today + 1
year."""
DOCUMENT_VALIDITIES = frozenset(
    ("alvara_valid_until", "inspection_valid_until", "cnh_valid_until", "ictp_valid_until")
)
"""The fields that are a document's validity (:func:`check_document_validity`)."""
PANDAS_DATE_MIN = dt.date(1677, 9, 22)
"""Earliest date a nanosecond ``pandas.Timestamp`` holds (whole day, any time zone)."""
PANDAS_DATE_MAX = dt.date(2262, 4, 10)
"""Latest date a nanosecond ``pandas.Timestamp`` holds (whole day, any time zone)."""


QUERY_DATE_MIN = dt.date(1678, 1, 1)
"""Earliest date a query may name (a local day, whole, in pandas' range in any time zone)."""
QUERY_DATE_MAX = dt.date(2261, 12, 31)
"""Latest date a query may name."""


class RegistryDateError(FleetError):
    """A registry date outside :data:`REGISTRY_DATE_MIN` … today + :data:`REGISTRY_YEARS_AHEAD`."""


DATE_FORMS = "AAAA-MM-DD ou DD/MM/AAAA"
"""How a file may write a date, said to people (ISO 8601, or the dd/mm/aaaa of a pt-BR sheet)."""
_BR_DATE = re.compile(r"(\d{2})/(\d{2})/(\d{4})", re.ASCII)


def read_day(text: str) -> dt.date:
    """Read a file's date: ``AAAA-MM-DD`` (or an ISO instant, its date) or ``DD/MM/AAAA``.

    The second is how a pt-BR spreadsheet shows and saves a date (Excel, LibreOffice): a file
    re-saved from one is read as the person typed it. Anything else raises ``ValueError``.
    """
    text = text.strip()
    if (br := _BR_DATE.fullmatch(text)) is not None:
        day, month, year = (int(g) for g in br.groups())
        return dt.date(year, month, day)
    try:
        return dt.date.fromisoformat(text)
    except ValueError:  # "2024-03-015" stays an error: nothing after a date is dropped
        return dt.datetime.fromisoformat(text).date()


def registry_date_max(today: dt.date) -> dt.date:
    """Return the latest registry date accepted on ``today`` (Feb 29 → Feb 28 next year)."""
    year = today.year + REGISTRY_YEARS_AHEAD
    try:
        return today.replace(year=year)
    except ValueError:  # 29 February
        return dt.date(year, 2, 28)


def check_registry_date(value: dt.date, *, name: str, today: dt.date | None = None) -> dt.date:
    """Return ``value`` if it lies in the registry range, else raise :class:`RegistryDateError`.

    Parameters
    ----------
    value : datetime.date
        The date to store (a ``datetime`` is refused: registry dates are calendar days).
    name : str
        The field or option, named in the message (``valid_from``, ``--on``...).
    today : datetime.date, optional
        Reference for the upper bound; default the local date of the machine.

    Raises
    ------
    RegistryDateError
        If ``value`` is not a date or is outside the range.
    """
    latest = registry_date_max(today or dt.date.today())
    return _in_range(value, name=name, latest=latest, rule=f"hoje + {REGISTRY_YEARS_AHEAD} ano")


def _in_range(value: dt.date, *, name: str, latest: dt.date, rule: str) -> dt.date:
    """Return ``value`` if a date from :data:`REGISTRY_DATE_MIN` to ``latest``, else raise."""
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        msg = f"'{name}' era {value!r}; esperado uma data AAAA-MM-DD"
        raise RegistryDateError(msg)
    if not REGISTRY_DATE_MIN <= value <= latest:
        msg = (
            f"'{name}' era {value.isoformat()}; esperado uma data entre "
            f"{REGISTRY_DATE_MIN.isoformat()} e {latest.isoformat()} ({rule})"
        )
        raise RegistryDateError(msg)
    return value


def check_document_validity(value: dt.date, *, name: str, today: dt.date | None = None) -> dt.date:
    """Return a document's validity date if it lies in its range, else raise.

    The range is the registry's with the upper bound moved to today +
    :data:`DOCUMENT_YEARS_AHEAD` years. Used by the file readers and the API alike.

    Raises
    ------
    RegistryDateError
        Naming ``name`` and the range.
    """
    today = today or dt.date.today()
    latest = today.replace(year=today.year + DOCUMENT_YEARS_AHEAD, day=min(today.day, 28))
    rule = f"validade de documento: hoje + {DOCUMENT_YEARS_AHEAD} anos"
    return _in_range(value, name=name, latest=latest, rule=rule)


def check_field_date(value: dt.date, *, name: str, today: dt.date | None = None) -> dt.date:
    """Check a field's date by its kind: a document's validity or another registry date."""
    if name in DOCUMENT_VALIDITIES:
        return check_document_validity(value, name=name, today=today)
    return check_registry_date(value, name=name, today=today)


def check_optional_registry_date(
    value: dt.date | None, *, name: str, today: dt.date | None = None
) -> dt.date | None:
    """As :func:`check_registry_date`, letting None (an open end) through."""
    return None if value is None else check_registry_date(value, name=name, today=today)


def check_registry_instant(
    value: dt.datetime, *, name: str, today: dt.date | None = None
) -> dt.datetime:
    """Return a tz-aware instant whose UTC date lies in the registry range, else raise.

    Raises
    ------
    RegistryDateError
        If ``value`` is naive or its UTC date is outside the range of :func:`check_registry_date`.
    """
    if not isinstance(value, dt.datetime) or value.utcoffset() is None:
        msg = f"'{name}' era {value!r}; esperado um instante ISO 8601 com fuso (ex.: ...Z)"
        raise RegistryDateError(msg)
    try:
        day = value.astimezone(dt.UTC).date()
    except OverflowError:  # 0001-01-01 east of UTC, 9999-12-31 west of it: far out of range
        day = value.date()
    check_registry_date(day, name=name, today=today)
    return value


def check_query_date(value: dt.date, *, name: str) -> dt.date:
    """Return a date a query names (a day to look at) if readable, else raise.

    Looking is not storing: any day from :data:`QUERY_DATE_MIN` to :data:`QUERY_DATE_MAX`.

    Raises
    ------
    RegistryDateError
        If ``value`` is outside that range.
    """
    if not QUERY_DATE_MIN <= value <= QUERY_DATE_MAX:
        msg = (
            f"'{name}' era {value.isoformat()}; esperado uma data entre "
            f"{QUERY_DATE_MIN.isoformat()} e {QUERY_DATE_MAX.isoformat()}"
        )
        raise RegistryDateError(msg)
    return value


def unreadable_date(value: dt.date | dt.datetime | None) -> bool:
    """Tell whether a stored date lies outside what pandas holds (None is readable)."""
    if value is None:
        return False
    day = value.date() if isinstance(value, dt.datetime) else value
    return not PANDAS_DATE_MIN <= day <= PANDAS_DATE_MAX


def pandas_dates(values: Iterable[dt.date | dt.datetime | None]) -> pd.Series:
    """Return stored registry dates as naive ``datetime64[ns]`` midnights, NaT for None.

    Dates outside :data:`PANDAS_DATE_MIN` … :data:`PANDAS_DATE_MAX` are clipped to those bounds,
    which keeps every comparison with a readable date as it was (a licence "from 0202" still
    started before any fix). ``datetime`` values give their date.
    """
    days = [
        None
        if v is None or pd.isna(v)
        else min(
            max(v.date() if isinstance(v, dt.datetime) else v, PANDAS_DATE_MIN), PANDAS_DATE_MAX
        )
        for v in values
    ]
    out = np.array(
        [np.datetime64("NaT") if d is None else np.datetime64(d, "D") for d in days],
        dtype="datetime64[D]",
    )
    return pd.Series(out.astype("datetime64[ns]"), dtype="datetime64[ns]")


def pandas_instants(values: Iterable[dt.datetime | None]) -> pd.Series:
    """Return stored instants (tz-aware) as ``datetime64[ns, UTC]``, clipped as dates are."""
    low = dt.datetime.combine(PANDAS_DATE_MIN, dt.time(), tzinfo=dt.UTC)
    high = dt.datetime.combine(PANDAS_DATE_MAX, dt.time(), tzinfo=dt.UTC)
    clipped = [None if v is None or pd.isna(v) else min(max(v, low), high) for v in values]
    return pd.Series(pd.to_datetime(pd.Series(clipped, dtype="object"), utc=True)).astype(
        "datetime64[ns, UTC]"
    )
