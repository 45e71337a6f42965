"""Boarding recall on the Porto ECML/PKDD labels: trips hailed at a stand (CALL_TYPE B).

The geometric ceiling: a labelled trip can only be detected as boarding at its stand when its
first fix lies inside that stand's polygon. Among those, every one must be detected; the recall
against all labelled trips is reported for each radius.
"""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from stands.visits import BOARDED_AT
from tracking import frames as fr


def boarding_recall(
    labels: pd.DataFrame,
    pings: pd.DataFrame,
    visits: pd.DataFrame,
    trips: pd.DataFrame,
    stands: gpd.GeoDataFrame,
) -> dict[str, float | int]:
    """Compare detected boardings with the stand labels of the Porto trips.

    Parameters
    ----------
    labels : pandas.DataFrame
        From :func:`tracking.porto.read_porto_trips`.
    pings, visits, trips : pandas.DataFrame
        The validated pings and the frames of :func:`engines.pipeline.analyze_pings`.
    stands : geopandas.GeoDataFrame
        The stands frame used for the run (``stand_id`` as the labels' ``origin_stand``).

    Returns
    -------
    dict
        ``labelled`` (B trips with a stand and a valid first fix), ``first_fix_inside`` (of those,
        first fix inside the labelled stand's polygon), ``detected_inside`` (of those, a boarded
        visit at the labelled stand at the trip's start), ``detected`` (all labelled trips with
        such a visit), ``pickup_stand_match`` (trips whose ``pickup_stand_id`` is the label),
        ``recall`` = detected / labelled, ``ceiling`` = first_fix_inside / labelled.
    """
    lab = labels.loc[labels["call_type"].eq("B") & labels["origin_stand"].notna()]
    first = pings.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP]).drop_duplicates(
        [fr.VEHICLE_ID, fr.TIMESTAMP]
    )[[fr.VEHICLE_ID, fr.TIMESTAMP, fr.LAT, fr.LON]]
    lab = lab.merge(
        first,
        left_on=["vehicle_id", "started_at"],
        right_on=[fr.VEHICLE_ID, fr.TIMESTAMP],
        how="inner",
    )
    geom = stands.set_index("stand_id").geometry
    known = lab["origin_stand"].isin(geom.index)
    polys = geom.reindex(lab["origin_stand"]).to_numpy()
    inside = np.zeros(len(lab), dtype=bool)
    inside[known.to_numpy()] = shapely.contains_xy(
        polys[known.to_numpy()],
        lab.loc[known, fr.LON].to_numpy(),
        lab.loc[known, fr.LAT].to_numpy(),
    )
    boarded = visits.loc[
        visits["boarded"].fillna(False).astype(bool), ["vehicle_id", "stand_id", BOARDED_AT]
    ]
    hit = lab.merge(
        boarded,
        left_on=["vehicle_id", "origin_stand", "started_at"],
        right_on=["vehicle_id", "stand_id", BOARDED_AT],
        how="left",
        indicator=True,
    ).drop_duplicates(["vehicle_id", "started_at", "origin_stand"])
    detected = hit["_merge"].eq("both").to_numpy()
    picked = lab.merge(
        trips[["vehicle_id", "started_at", "pickup_stand_id"]],
        on=["vehicle_id", "started_at"],
        how="left",
    )
    n = len(lab)
    return {
        "labelled": n,
        "first_fix_inside": int(inside.sum()),
        "detected_inside": int((detected & inside).sum()),
        "detected": int(detected.sum()),
        "pickup_stand_match": int(picked["pickup_stand_id"].eq(picked["origin_stand"]).sum()),
        "recall": float(detected.sum() / n) if n else 0.0,
        "ceiling": float(inside.sum() / n) if n else 0.0,
    }
