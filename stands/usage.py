"""The planner's view of stands: over capacity, unused, boardings against spaces.

Pure functions over the occupancy and visit frames (``stands/occupancy.py``,
``stands/visits.py``). Demand against capacity by area (H3 cells) is the planning room's;
these are the stand-side figures it can join on ``stand_id``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from stands._errors import MissingColumnError, ThresholdError
from stands.frames import CAPACITY, STAND_ID
from stands.occupancy import (
    BUCKET_START,
    OVERFLOW,
    VEHICLES_PRESENT,
    _instant_ns,
    _visit_arrays,
)

OVER_CAPACITY_COLUMNS = (
    STAND_ID,
    CAPACITY,
    "peak_present",
    "peak_at",
    "excess",
    "buckets",
    "buckets_over",
    "share_over",
    "first_over_at",
)
BOARDING_COLUMNS = (STAND_ID, CAPACITY, "visits", "boardings", "boardings_per_space")


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"o quadro de {what} não tem as colunas {', '.join(missing)}"
        raise MissingColumnError(msg)


def over_capacity(occupancy: pd.DataFrame, *, min_share: float = 0.0) -> pd.DataFrame:
    """Stands with more vehicles than spaces in at least one bucket.

    Parameters
    ----------
    occupancy : pandas.DataFrame
        Frame from :func:`stands.occupancy.occupancy` (best with ``include_idle=True``, so
        that ``share_over`` counts every bucket of the period).
    min_share : float, default 0
        Keep stands whose share of buckets over capacity exceeds this (0: any overflow).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`OVER_CAPACITY_COLUMNS`: ``peak_present`` (most vehicles at once),
        ``peak_at`` (start of the first bucket with that peak), ``excess`` (peak - capacity),
        ``buckets`` (buckets in the frame), ``buckets_over``, ``share_over`` and
        ``first_over_at``. Sorted by share over capacity, then excess (largest first). Stands
        of unknown capacity are never over it.

    Raises
    ------
    MissingColumnError
        If the occupancy frame lacks a column.
    ThresholdError
        If ``min_share`` is not in [0, 1).
    """
    _require(occupancy, (STAND_ID, BUCKET_START, VEHICLES_PRESENT, CAPACITY, OVERFLOW), "ocupação")
    if not 0.0 <= min_share < 1.0:
        msg = f"'min_share' era {min_share!r}; esperado um valor em [0, 1)"
        raise ThresholdError(msg)
    occ = occupancy.sort_values([STAND_ID, BUCKET_START], kind="stable")
    groups = occ.groupby(STAND_ID, sort=True)
    peak_idx = groups[VEHICLES_PRESENT].idxmax()
    over = occ[occ[OVERFLOW].astype(bool)]
    summary = pd.DataFrame(
        {
            CAPACITY: groups[CAPACITY].first().astype("Int64"),
            "peak_present": groups[VEHICLES_PRESENT].max().astype("int64"),
            "peak_at": occ.loc[peak_idx.to_numpy(), BUCKET_START].to_numpy(),
            "buckets": groups.size().astype("int64"),
        }
    )
    summary["buckets_over"] = (
        over.groupby(STAND_ID).size().reindex(summary.index, fill_value=0).astype("int64")
    )
    summary["first_over_at"] = over.groupby(STAND_ID)[BUCKET_START].min().reindex(summary.index)
    summary["share_over"] = summary["buckets_over"] / summary["buckets"]
    summary["excess"] = (summary["peak_present"] - summary[CAPACITY]).astype("Int64")
    summary = summary[(summary["buckets_over"] > 0) & (summary["share_over"] > min_share)]
    summary = summary.rename_axis(STAND_ID).reset_index()
    summary[STAND_ID] = summary[STAND_ID].astype("str")
    summary = summary.sort_values(
        ["share_over", "excess", STAND_ID], ascending=[False, False, True], kind="stable"
    )
    return summary.reset_index(drop=True)[list(OVER_CAPACITY_COLUMNS)]


def _overlapping_visits(visits: pd.DataFrame, start: Any, end: Any) -> pd.DataFrame:
    arrived, departed = _visit_arrays(visits)
    lo, hi = _instant_ns(start, name="start"), _instant_ns(end, name="end")
    if hi <= lo:
        msg = "'end' deve ser posterior a 'start'"
        raise ThresholdError(msg)
    return visits.loc[(arrived < hi) & (departed >= lo)]


def unused_stands(stands: pd.DataFrame, visits: pd.DataFrame, *, start: Any, end: Any) -> Any:
    """Stands with no visit in [start, end).

    Parameters
    ----------
    stands : pandas.DataFrame or geopandas.GeoDataFrame
        Stands (``stand_id``; other columns are kept).
    visits : pandas.DataFrame
        Stand visits.
    start, end : str or pandas.Timestamp
        Tz-aware bounds of the period.

    Returns
    -------
    pandas.DataFrame or geopandas.GeoDataFrame
        The rows of ``stands`` without a visit overlapping the period, sorted by stand_id.

    Raises
    ------
    MissingColumnError, NaiveTimestampError, ThresholdError
        On bad frames or bounds.
    """
    _require(stands, (STAND_ID,), "pontos")
    seen = set(_overlapping_visits(visits, start, end)[STAND_ID].astype("str"))
    mask = ~stands[STAND_ID].astype("str").isin(seen).to_numpy(dtype=bool)
    return stands.loc[mask].sort_values(STAND_ID, kind="stable").reset_index(drop=True)


def boardings_per_stand(
    stands: pd.DataFrame, visits: pd.DataFrame, *, start: Any, end: Any
) -> pd.DataFrame:
    """Visits and boardings (pickups at the stand) per stand in [start, end), per space.

    Parameters
    ----------
    stands : pandas.DataFrame
        Stands: ``stand_id``, optional ``capacity``.
    visits : pandas.DataFrame
        Stand visits with ``boarded``.
    start, end : str or pandas.Timestamp
        Tz-aware bounds; a visit counts when it overlaps the period.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`BOARDING_COLUMNS`, one row per stand of ``stands`` (zeros included);
        ``boardings_per_space`` is NaN when the capacity is unknown or 0. Sorted by
        boardings per space (largest first, unknown last), then stand_id.
    """
    _require(stands, (STAND_ID,), "pontos")
    _require(visits, (STAND_ID, "boarded"), "visitas")
    period = _overlapping_visits(visits, start, end)
    ids = pd.Index(stands[STAND_ID].astype("str"), name=STAND_ID)
    by_stand = period.assign(
        _b=period["boarded"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    ).groupby(period[STAND_ID].astype("str"))
    capacity = (
        pd.Series(pd.array(stands[CAPACITY].to_numpy(), dtype="Int64"), index=ids)
        if CAPACITY in stands.columns
        else pd.Series(pd.NA, index=ids, dtype="Int64")
    )
    out = pd.DataFrame(
        {
            CAPACITY: capacity,
            "visits": by_stand.size().reindex(ids, fill_value=0).astype("int64"),
            "boardings": by_stand["_b"].sum().reindex(ids, fill_value=0).astype("int64"),
        }
    )
    spaces = out[CAPACITY].astype("Float64").where(out[CAPACITY] > 0)
    out["boardings_per_space"] = (out["boardings"] / spaces).astype("float64")
    out = out.reset_index()
    out["_k"] = np.where(out["boardings_per_space"].isna(), -np.inf, out["boardings_per_space"])
    out = out.sort_values(["_k", STAND_ID], ascending=[False, True], kind="stable")
    return out.drop(columns="_k").reset_index(drop=True)[list(BOARDING_COLUMNS)]
