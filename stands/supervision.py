"""The supervisor de ponto's view, scoped to their own stands (POA arts. 43, 49).

Pure functions over frames. Each takes ``stand_ids``, the supervisor's stands, and returns
nothing about any other stand: rows of other stands are dropped *before* anything is computed,
so their vehicles, visits and licensees never reach the result.

- :func:`queue_now` — who is at each stand at an instant, in queue order, licensed or not;
- :func:`intruders` — visits by vehicles without a parking licence for the stand;
- :func:`licensee_presence` — each licensee's days present against days operating
  (``stands/presence.py``), without when or where they were seen away from the stand;
- :func:`licensee_contacts` — name, address and phone of the autorizatários and condutores
  auxiliares of the stand's prefixos (art. 43, parágrafo único: "a relação de nome, endereço e
  telefone dos autorizatários e condutores auxiliares vinculados ao ponto fixo").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from geo.calendar import DEFAULT_TIMEZONE
from stands._errors import MissingColumnError, StandScopeError
from stands.frames import STAND_ID
from stands.licences import (
    VALID_FROM,
    VALID_UNTIL,
    VEHICLE_ID,
    licence_status,
    validate_licences,
)
from stands.occupancy import present_at
from stands.presence import FIRST_SEEN, LAST_SEEN, presence

INTRUDER_COLUMNS = (
    STAND_ID,
    VEHICLE_ID,
    "arrived_at",
    "departed_at",
    "dwell_s",
    "boarded",
    "boarding_distance_m",
)
"""``boarding_distance_m``: from the meter's start to the stand, 0 inside (``stands/visits.py``:
a boarding counts up to its ``boarding_grace_m`` past the edge)."""
CONTACT_COLUMNS = (STAND_ID, VEHICLE_ID, "role", "name", "address", "phone")
"""One row per person linked to a licensed prefixo; ``role`` is ``autorizatario`` or
``auxiliar``."""
CONTACT_ROLES = ("autorizatario", "auxiliar")
# The day's first and last sightings, anywhere: a colleague's working hours and whereabouts,
# not the supervisor's. Art. 49 needs only whether the vehicle operated and its stand time.
_HIDDEN_PRESENCE = (*FIRST_SEEN, *LAST_SEEN)


def scope(stand_ids: Collection[str]) -> frozenset[str]:
    """Return the supervisor's stands as a set, refusing an empty scope.

    Parameters
    ----------
    stand_ids : collection of str
        The supervisor's stands.

    Returns
    -------
    frozenset of str
        The same ids.

    Raises
    ------
    StandScopeError
        If ``stand_ids`` is empty or a plain string (one id must be given as a list).
    """
    if isinstance(stand_ids, str):
        msg = f"'stand_ids' deve ser uma lista de pontos, não o texto {stand_ids!r}"
        raise StandScopeError(msg)
    ids = frozenset(str(s) for s in stand_ids)
    if not ids:
        msg = "supervisor sem pontos: nada a mostrar"
        raise StandScopeError(msg)
    return ids


def in_scope(frame: pd.DataFrame, stand_ids: Collection[str]) -> pd.DataFrame:
    """Return the rows of ``frame`` whose ``stand_id`` is one of the supervisor's stands.

    Parameters
    ----------
    frame : pandas.DataFrame
        Any frame with a ``stand_id`` column.
    stand_ids : collection of str
        The supervisor's stands.

    Returns
    -------
    pandas.DataFrame
        A copy of the matching rows, index reset.

    Raises
    ------
    MissingColumnError
        If ``frame`` has no ``stand_id``.
    StandScopeError
        If the scope is empty.
    """
    ids = scope(stand_ids)
    if STAND_ID not in frame.columns:
        msg = "o quadro não tem a coluna stand_id; não dá para limitar aos pontos do supervisor"
        raise MissingColumnError(msg)
    mask = frame[STAND_ID].astype("str").isin(ids).to_numpy(dtype=bool)
    return frame.loc[mask].reset_index(drop=True)


def queue_now(
    visits: pd.DataFrame,
    licences: pd.DataFrame | None,
    *,
    stand_ids: Collection[str],
    at: Any,
    timezone: str = DEFAULT_TIMEZONE,
    unknown_licences: Collection[str] = (),
) -> pd.DataFrame:
    """Who is at the supervisor's stands at ``at``, in queue order, and whether licensed.

    Parameters
    ----------
    visits : pandas.DataFrame
        Stand visits (``stands/visits.py``); a visit in progress has ``departed_at >= at``.
    licences : pandas.DataFrame or None
        Licence frame; None keeps the visits' own ``licensed`` (or <NA>).
    stand_ids : collection of str
        The supervisor's stands.
    at : str or pandas.Timestamp
        Tz-aware instant.
    timezone : str, default "America/Sao_Paulo"
        Zone of the licence dates.
    unknown_licences : collection of str, default ()
        Vehicles whose licences are not known (``stands.licences.licence_status``): <NA>, never
        an intruder, where the frame gives them no licence.

    Returns
    -------
    pandas.DataFrame
        ``stands.occupancy.PRESENT_COLUMNS``, sorted by (stand_id, position); ``licensed``
        on the local date of ``at``.
    """
    present = present_at(in_scope(visits, stand_ids), at)
    if licences is not None and len(present):
        present["licensed"] = licence_status(
            in_scope(licences, stand_ids),
            present[VEHICLE_ID].to_numpy(dtype=object),
            present[STAND_ID].to_numpy(dtype=object),
            pd.Timestamp(at),
            unknown=unknown_licences,
            timezone=timezone,
        )
    return present


def intruders(
    visits: pd.DataFrame,
    licences: pd.DataFrame,
    *,
    stand_ids: Collection[str],
    timezone: str = DEFAULT_TIMEZONE,
    unknown_licences: Collection[str] = (),
) -> pd.DataFrame:
    """Visits to the supervisor's stands by vehicles without a licence on the arrival date.

    A Táxi Acessível may use any ponto fixo only to board or drop a person with disability
    (POA art. 46): such visits are listed too, for the supervisor to judge. Vehicles of
    ``unknown_licences`` (see :func:`queue_now`) are never listed.

    Parameters
    ----------
    visits : pandas.DataFrame
        Stand visits (``stands/visits.py``).
    licences : pandas.DataFrame
        Licence frame.
    stand_ids : collection of str
        The supervisor's stands.
    timezone : str, default "America/Sao_Paulo"
        Zone of the licence dates.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`INTRUDER_COLUMNS`, sorted by (stand_id, arrived_at, vehicle_id).
    """
    mine = in_scope(visits, stand_ids)
    licensed = licence_status(
        in_scope(licences, stand_ids),
        mine[VEHICLE_ID].to_numpy(dtype=object),
        mine[STAND_ID].to_numpy(dtype=object),
        pd.DatetimeIndex(mine["arrived_at"]),
        unknown=unknown_licences,
        timezone=timezone,
    )
    out = mine.loc[~licensed.to_numpy(dtype=bool, na_value=True)].copy()
    if "boarded" not in out.columns:
        out["boarded"] = pd.array([pd.NA] * len(out), dtype="boolean")
    if "boarding_distance_m" not in out.columns:
        out["boarding_distance_m"] = np.nan
    out = out[list(INTRUDER_COLUMNS)].astype({STAND_ID: "str", VEHICLE_ID: "str"})
    out["boarded"] = out["boarded"].astype("boolean")
    return out.sort_values([STAND_ID, "arrived_at", VEHICLE_ID], kind="stable").reset_index(
        drop=True
    )


def licensee_presence(
    visits: pd.DataFrame,
    licences: pd.DataFrame,
    pings_or_trips: pd.DataFrame | None,
    *,
    stand_ids: Collection[str],
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
    min_presence_s: float = 60.0,
) -> pd.DataFrame:
    """Presence table of the licensees of the supervisor's stands (``stands/presence.py``).

    Only licences and visits of the supervisor's stands are used. ``pings_or_trips`` tell on
    which days each licensee operated (``operated``); when and where it was seen that day is
    dropped from the result (all the ``first_seen_*``/``last_seen_*`` columns, the instants
    too: they are a fellow driver's working hours). The visits to the stand stay.

    Parameters
    ----------
    visits, licences, pings_or_trips : pandas.DataFrame
        As for :func:`stands.presence.presence`.
    stand_ids : collection of str
        The supervisor's stands.
    start, end : datetime.date
        First and last local day (inclusive).
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.
    min_presence_s : float, default 60
        Shortest visit that counts as presence, unless it boarded.

    Returns
    -------
    pandas.DataFrame
        ``stands.presence.PRESENCE_COLUMNS`` without the hidden sighting columns.
    """
    lic = in_scope(licences, stand_ids)
    table = presence(
        in_scope(visits, stand_ids),
        lic,
        pings_or_trips,
        start=start,
        end=end,
        timezone=timezone,
        min_presence_s=min_presence_s,
    )
    return table.drop(columns=list(_HIDDEN_PRESENCE))


def licensee_contacts(
    licences: pd.DataFrame,
    people: pd.DataFrame,
    *,
    stand_ids: Collection[str],
    on: dt.date,
) -> pd.DataFrame:
    """Contact list of the people linked to the prefixos licensed at the supervisor's stands.

    Parameters
    ----------
    licences : pandas.DataFrame
        Licence frame.
    people : pandas.DataFrame
        One row per person and prefixo: ``vehicle_id``, ``role`` (``autorizatario`` or
        ``auxiliar``), ``name``, ``address``, ``phone`` — the autorizatário of each vehicle and
        its auxiliary drivers assigned on ``on``.
    stand_ids : collection of str
        The supervisor's stands.
    on : datetime.date
        Day of the list: licences valid that day.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`CONTACT_COLUMNS`, sorted by (stand_id, vehicle_id, role, name). A
        licensed prefixo without any person registered still has one row (nulls).

    Raises
    ------
    MissingColumnError
        If ``people`` lacks a column.
    """
    missing = [c for c in CONTACT_COLUMNS if c != STAND_ID and c not in people.columns]
    if missing:
        msg = f"o quadro de pessoas não tem as colunas {', '.join(missing)}"
        raise MissingColumnError(msg)
    lic = validate_licences(in_scope(licences, stand_ids))
    day = pd.Timestamp(on)
    valid = (lic[VALID_FROM].isna() | (lic[VALID_FROM] <= day)) & (
        lic[VALID_UNTIL].isna() | (lic[VALID_UNTIL] >= day)
    )
    pairs = lic.loc[valid, [STAND_ID, VEHICLE_ID]].drop_duplicates()
    who = people[[c for c in CONTACT_COLUMNS if c != STAND_ID]].astype({VEHICLE_ID: "str"})
    out = pairs.merge(who, on=VEHICLE_ID, how="left")
    rank = out["role"].map({r: i for i, r in enumerate(CONTACT_ROLES)}).fillna(len(CONTACT_ROLES))
    out = (
        out.assign(_r=rank.to_numpy(dtype=np.int64))
        .sort_values([STAND_ID, VEHICLE_ID, "_r", "name"], kind="stable", na_position="last")
        .drop(columns="_r")
        .reset_index(drop=True)
    )
    return out[list(CONTACT_COLUMNS)]
