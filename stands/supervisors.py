"""The 90-day rule: a ponto fixo without a supervisor loses its prefixos (POA art. 50, III).

Porto Alegre's decree, art. 50: "A exclusão de prefixos do ponto fixo será efetuada: [...] III -
por ausência de supervisor devidamente eleito, por prazo superior a 90 (noventa) dias." An
election is *devidamente* made when the regulator homologates it (art. 42 § 2º), so a day counts
as supervised when a homologated supervisor is in office: from ``homologated_on`` to ``until``
(inclusive; null: still in office). An election waiting for homologation does not count; it is
shown as ``pending_elected_on``.

:func:`supervisor_lapses` gives one row per active ponto fixo without a supervisor on ``as_of``:

stand_id
    The stand.
last_supervised_on
    Last day a homologated supervisor was in office (NaT: none recorded up to ``as_of``).
days_without
    ``as_of - last_supervised_on`` in days (<NA> when none recorded): the days without a
    supervisor up to and including ``as_of``.
overdue
    ``days_without > max_days`` (False when none recorded: the gap's start is unknown).
pending_elected_on
    Election date of the latest election not yet homologated (NaT: none).
prefixos
    Tuple of the vehicle ids licensed at the stand on ``as_of``: what the stand would lose.
provision
    ``"art. 50, III"``.

Pontos livres and stands of unknown kind are left out: the rule is about pontos fixos.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from stands._errors import MissingColumnError, ThresholdError
from stands.frames import STAND_ID
from stands.licences import VALID_FROM, VALID_UNTIL, VEHICLE_ID, validate_licences

MAX_DAYS_WITHOUT_SUPERVISOR = 90
"""POA art. 50, III: "por prazo superior a 90 (noventa) dias"."""
PROVISION = "art. 50, III"
LAPSE_COLUMNS = (
    STAND_ID,
    "last_supervised_on",
    "days_without",
    "overdue",
    "pending_elected_on",
    "prefixos",
    "provision",
)
SUPERVISOR_COLUMNS = (STAND_ID, "elected_on", "homologated_on", "until")


def _dates(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_datetime(frame[column]).dt.normalize().astype("datetime64[ns]")


def _dates_of(by_stand: pd.Series, ids: pd.Series) -> pd.Series:
    values = by_stand.astype("datetime64[ns]").reindex(ids.to_numpy()).to_numpy()
    return pd.Series(values, index=ids.index, dtype="datetime64[ns]")


def supervisor_lapses(
    stands: pd.DataFrame,
    supervisors: pd.DataFrame,
    licences: pd.DataFrame,
    *,
    as_of: dt.date,
    max_days: int = MAX_DAYS_WITHOUT_SUPERVISOR,
    only_overdue: bool = True,
    include_unrecorded: bool = False,
) -> pd.DataFrame:
    """Pontos fixos without a homologated supervisor on ``as_of`` (see the module docstring).

    Parameters
    ----------
    stands : pandas.DataFrame
        ``stand_id``, ``kind``; optional ``retired_at`` (tz-aware; stands retired on or before
        ``as_of`` are left out).
    supervisors : pandas.DataFrame
        Supervisor records: ``stand_id``, ``elected_on``, ``homologated_on``, ``until`` (dates;
        null homologation: pending; null until: in office).
    licences : pandas.DataFrame
        Licence frame (``stands/licences.py``).
    as_of : datetime.date
        Day of the check.
    max_days : int, default 90
        Days without a supervisor allowed (art. 50, III).
    only_overdue : bool, default True
        Keep only stands over ``max_days``; False: every unsupervised ponto fixo.
    include_unrecorded : bool, default False
        Also list pontos fixos that never had a homologated supervisor recorded (their
        ``overdue`` is False: the start of the gap is unknown).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`LAPSE_COLUMNS`, sorted by days without (most first, unrecorded last),
        then stand_id.

    Raises
    ------
    MissingColumnError
        If a frame lacks a required column.
    ThresholdError
        If ``max_days`` is negative.
    """
    if max_days < 0:
        msg = f"'max_days' era {max_days}; esperado um número de dias >= 0"
        raise ThresholdError(msg)
    for frame, cols, what in (
        (stands, (STAND_ID, "kind"), "pontos"),
        (supervisors, SUPERVISOR_COLUMNS, "supervisores"),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            msg = f"o quadro de {what} não tem as colunas {', '.join(missing)}"
            raise MissingColumnError(msg)
    day = pd.Timestamp(as_of)
    fixo = stands[stands["kind"].astype("object") == "fixo"]
    if "retired_at" in fixo.columns:
        retired = pd.to_datetime(fixo["retired_at"], utc=True)
        fixo = fixo[retired.isna() | (retired.dt.tz_convert(None).dt.normalize() > day)]
    ids = pd.Index(fixo[STAND_ID].astype("str").unique(), name=STAND_ID)

    sup = pd.DataFrame(
        {
            STAND_ID: supervisors[STAND_ID].astype("str").to_numpy(),
            "elected_on": _dates(supervisors, "elected_on").to_numpy(),
            "homologated_on": _dates(supervisors, "homologated_on").to_numpy(),
            "until": _dates(supervisors, "until").to_numpy(),
        }
    )
    sup = sup[sup[STAND_ID].isin(ids)]
    served = sup[sup["homologated_on"].notna() & (sup["homologated_on"] <= day)]
    in_office = served["until"].isna() | (served["until"] >= day)
    covered = set(served.loc[in_office, STAND_ID])
    last = served[~in_office].groupby(STAND_ID)["until"].max()
    pending = (
        sup[sup["homologated_on"].isna() & sup["until"].isna() & (sup["elected_on"] <= day)]
        .groupby(STAND_ID)["elected_on"]
        .max()
    )

    lic = validate_licences(licences)
    valid = (lic[VALID_FROM].isna() | (lic[VALID_FROM] <= day)) & (
        lic[VALID_UNTIL].isna() | (lic[VALID_UNTIL] >= day)
    )
    prefixos: dict[str, tuple[str, ...]] = {
        str(stand): tuple(sorted(set(group)))
        for stand, group in lic.loc[valid, [STAND_ID, VEHICLE_ID]].groupby(STAND_ID)[VEHICLE_ID]
    }

    out = pd.DataFrame({STAND_ID: pd.Series([s for s in ids if s not in covered], dtype="str")})
    out["last_supervised_on"] = _dates_of(last, out[STAND_ID])
    days = (day - out["last_supervised_on"]).dt.days
    out["days_without"] = pd.array(days, dtype="Int64")
    out["overdue"] = (out["days_without"] > max_days).fillna(False).astype("bool")
    out["pending_elected_on"] = _dates_of(pending, out[STAND_ID])
    out["prefixos"] = pd.Series(
        [prefixos.get(s, ()) for s in out[STAND_ID]], index=out.index, dtype="object"
    )
    out["provision"] = pd.Series(PROVISION, index=out.index, dtype="str")
    keep = out["days_without"].notna() if not include_unrecorded else pd.Series(True, out.index)
    if only_overdue:
        keep &= out["overdue"] | (out["days_without"].isna() & include_unrecorded)
    out = out[keep.to_numpy(dtype=bool)]
    order = out.assign(_d=out["days_without"].fillna(-1)).sort_values(
        ["_d", STAND_ID], ascending=[False, True], kind="stable"
    )
    return order.drop(columns="_d").reset_index(drop=True)[list(LAPSE_COLUMNS)]
