"""Calendar facts of Brazil: the platform's default time zone, each state's zone, holidays.

One place for them: the settings (``api.settings``) read ``PONTUAL_TIMEZONE`` with
:data:`DEFAULT_TIMEZONE` as its default; library functions take ``timezone`` as a parameter and
default to this constant. Holidays serve the rules that count local days (Bandeira 2's calendar,
the business days of a proposal's deadlines).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

DEFAULT_TIMEZONE = "America/Sao_Paulo"
"""Brasília time, the legal time of most of Brazil: the zone when none is given or known."""

# Legal time zone of each UF (IANA). Amazonas is split (west: America/Eirunepe, UTC-5) and is
# left unknown; Pernambuco's Fernando de Noronha is the one exception handled by code.
UF_TIMEZONES = {
    "AC": "America/Rio_Branco", "AL": "America/Maceio", "AP": "America/Belem",
    "BA": "America/Bahia", "CE": "America/Fortaleza", "DF": "America/Sao_Paulo",
    "ES": "America/Sao_Paulo", "GO": "America/Sao_Paulo", "MA": "America/Fortaleza",
    "MG": "America/Sao_Paulo", "MS": "America/Campo_Grande", "MT": "America/Cuiaba",
    "PA": "America/Belem", "PB": "America/Fortaleza", "PE": "America/Recife",
    "PI": "America/Fortaleza", "PR": "America/Sao_Paulo", "RJ": "America/Sao_Paulo",
    "RN": "America/Fortaleza", "RO": "America/Porto_Velho", "RR": "America/Boa_Vista",
    "RS": "America/Sao_Paulo", "SC": "America/Sao_Paulo", "SE": "America/Maceio",
    "SP": "America/Sao_Paulo", "TO": "America/Araguaina",
}  # fmt: skip
TIMEZONE_EXCEPTIONS = {"2605459": "America/Noronha"}  # Fernando de Noronha (PE)


def local_today(zone: str = DEFAULT_TIMEZONE) -> dt.date:
    """Return today's date in ``zone``: the regulator's day, not the server's (often UTC)."""
    from zoneinfo import ZoneInfo

    return dt.datetime.now(ZoneInfo(zone)).date()


def brasilia_time(zone: str, at: dt.datetime) -> bool:
    """Tell whether ``at`` in ``zone`` is "horário de Brasília": a Brazilian zone at UTC-3."""
    return zone in UF_TIMEZONES.values() and at.utcoffset() == dt.timedelta(hours=-3)


ASH_WEDNESDAY_UNTIL = dt.time(14, 0)
"""Ash Wednesday is a nationwide *ponto facultativo* until 14:00 (the federal calendar)."""


def ash_wednesdays(years: Iterable[int]) -> list[dt.date]:
    """Ash Wednesday of each of ``years`` (a half day off: see :data:`ASH_WEDNESDAY_UNTIL`)."""
    return sorted({_easter(year) - dt.timedelta(days=46) for year in years})


def _easter(year: int) -> dt.date:
    """Gregorian Easter Sunday (anonymous Gregorian algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    ell = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * ell) // 451
    month = (h + ell - 7 * m + 114) // 31
    day = (h + ell - 7 * m + 114) % 31 + 1
    return dt.date(year, month, day)


def brazil_holidays(years: Iterable[int]) -> list[dt.date]:
    """Brazil's national holidays and nationwide pontos facultativos of ``years``.

    Fixed: 1 Jan, 21 Apr, 1 May, 7 Sep, 12 Oct, 2 Nov, 15 Nov, 20 Nov (from 2024, Lei
    14.759/2023), 25 Dec. Movable: Carnaval Monday and Tuesday, Good Friday, Corpus Christi.

    Parameters
    ----------
    years : iterable of int
        Calendar years.

    Returns
    -------
    list of datetime.date
        Sorted dates.
    """
    out: set[dt.date] = set()
    for year in years:
        for month, day in ((1, 1), (4, 21), (5, 1), (9, 7), (10, 12), (11, 2), (11, 15), (12, 25)):
            out.add(dt.date(year, month, day))
        if year >= 2024:
            out.add(dt.date(year, 11, 20))
        easter = _easter(year)
        for offset in (-48, -47, -2, 60):  # Carnaval Mon/Tue, Good Friday, Corpus Christi
            out.add(easter + dt.timedelta(days=offset))
    return sorted(out)
