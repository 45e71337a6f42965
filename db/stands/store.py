"""Store stand registries: upsert the frames of :mod:`stands.loaders` into ``stands``."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.upsert import ImportReport, hex_ewkb, merge_staged, stage_rows
from stands._errors import DuplicateStandIdError
from stands.frames import MUNICIPALITY, STAND_ID
from stands.loaders import REGISTRY_COLUMNS


def load_stands(
    *, conn: Connection, stands: gpd.GeoDataFrame, retire_missing: bool = True
) -> ImportReport:
    """Upsert stands; optionally retire stored stands of the same municipalities the file omits.

    A stand present again after being retired is un-retired (counted as updated).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    stands : geopandas.GeoDataFrame
        Registry frame from :func:`read_stands_registry` (EPSG:4326).
    retire_missing : bool
        Set ``retired_at`` on active stands of the file's municipalities (stands without a
        municipality form one group) that the file does not list.

    Returns
    -------
    ImportReport
        Created / updated / unchanged / retired counts; ``notes`` from the frame's ``attrs``.

    Raises
    ------
    DuplicateStandIdError
        If a stand_id is already stored for another municipality (two registries share ids:
        load one of them with ids prefixed).
    """
    cols = [c for c in REGISTRY_COLUMNS if c not in ("geometry", MUNICIPALITY)]
    frame = pd.DataFrame(stands[cols]).astype(object)
    hexes = hex_ewkb(stands.geometry.to_numpy())
    rows = (
        (*values, mun, g, None)
        for values, mun, g in zip(
            frame.itertuples(index=False, name=None), stands[MUNICIPALITY], hexes, strict=True
        )
    )
    db_cols = (*cols, "municipality_code", "geometry", "retired_at")
    stage = stage_rows(conn, like="stands", columns=db_cols, rows=rows)
    clash = conn.execute(
        text(
            f"SELECT s.stand_id, t.municipality_code FROM {stage} s JOIN stands t USING (stand_id) "
            "WHERE t.municipality_code IS DISTINCT FROM s.municipality_code LIMIT 5"
        )
    ).all()
    if clash:
        shown = ", ".join(f"{sid} (de {mun or 'sem município'})" for sid, mun in clash)
        msg = (
            f"stand_id já cadastrado para outro município: {shown}; "
            "importe um dos cadastros com prefixo nos ids (pontual import stands --id-prefix)"
        )
        raise DuplicateStandIdError(msg)
    report = merge_staged(
        conn,
        stage=stage,
        table="stands",
        key=(STAND_ID,),
        columns=tuple(c for c in db_cols if c != STAND_ID),
        touch={"updated_at": "now()"},
    )
    retired = 0
    if retire_missing:
        retired = conn.execute(
            text(
                "UPDATE stands t SET retired_at = now(), updated_at = now() "
                "WHERE t.retired_at IS NULL "
                f"AND EXISTS (SELECT 1 FROM {stage} m "
                "WHERE m.municipality_code IS NOT DISTINCT FROM t.municipality_code) "
                f"AND NOT EXISTS (SELECT 1 FROM {stage} s WHERE s.stand_id = t.stand_id)"
            )
        ).rowcount
    return ImportReport(
        created=report.created,
        updated=report.updated,
        unchanged=report.unchanged,
        retired=retired,
        notes=tuple(stands.attrs.get("notes", ())),
    )
