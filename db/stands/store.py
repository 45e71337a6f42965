"""Store stand registries: stands (:mod:`stands.loaders`), suspensions and allowed places."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
from shapely import MultiPolygon
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from db.upsert import ImportReport, audit_import, hex_ewkb, merge_staged, stage_rows
from fleet.loaders import sheet_row
from stands._errors import (
    DuplicateStandIdError,
    InvalidAttributeError,
    InvalidGeometryError,
    StandsError,
    StandSuspensionFileError,
)
from stands.frames import MUNICIPALITY, NAME, STAND_ID
from stands.loaders import REGISTRY_COLUMNS
from stands.suspensions import SUSPENSION_DAYS


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
    InvalidAttributeError
        If a stand's municipality is not in the registry (naming the first such code).
    InvalidGeometryError
        If a stand lies beyond :data:`BOUNDARY_REACH_M` of its municipality's stored boundary
        (a swapped latitude and longitude, another city's place): nothing is loaded.
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
    unknown = conn.execute(
        text(
            f"SELECT DISTINCT s.municipality_code FROM {stage} s "
            "WHERE s.municipality_code IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM municipalities m WHERE m.code = s.municipality_code) ORDER BY 1 LIMIT 1"
        )
    ).scalar()
    if unknown is not None:
        raise InvalidAttributeError(unregistered_municipality(unknown))
    away = conn.execute(
        text(
            f"SELECT s.stand_id, s.municipality_code FROM {stage} s "
            "JOIN municipalities m ON m.code = s.municipality_code "
            "WHERE m.boundary IS NOT NULL AND s.geometry IS NOT NULL AND NOT ST_DWithin("
            "m.boundary::geography, s.geometry::geography, :reach) ORDER BY 1 LIMIT 6"
        ),
        {"reach": BOUNDARY_REACH_M},
    ).all()
    if away:
        shown = ", ".join(f"{sid} ({mun})" for sid, mun in away[:5])
        more = " e outros" if len(away) > 5 else ""
        msg = f"pontos fora do seu município ({OUTSIDE_HINT}): {shown}{more}"
        raise InvalidGeometryError(msg)
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


BOUNDARY_REACH_M = 1000.0
"""How far outside its municipality's boundary a stand may lie (a stand at the border, a
boundary drawn coarsely) before it is refused as a typo."""


OUTSIDE_HINT = (
    f"a mais de {BOUNDARY_REACH_M / 1000:g} km do seu limite: confira a posição (latitude e "
    "longitude trocadas?) e o município"
)
"""Why a stand beyond :data:`BOUNDARY_REACH_M` of its municipality is refused (pt-BR)."""


def unregistered_municipality(code: str) -> str:
    """Say (pt-BR) that a municipality is not in the registry."""
    return (
        f"município {code!r} não cadastrado; "
        "use o código IBGE de 7 dígitos (pontual import municipalities)"
    )


_SUSPENSION_KEY = ("stand_id", "vehicle_id", "driver_id", "kind", "starts_on")
_SUSPENSION_VALUES = ("ends_on", "reason", "process_ref")


def load_stand_suspensions(
    *, conn: Connection, suspensions: pd.DataFrame, actor: str, source: str
) -> ImportReport:
    """Add the file's stand suspensions (a stored one with the same key: its end and text); audited.

    A suspension is identified by (stand, prefixo or driver, kind, ``starts_on``), a stand's
    closure (``kind`` ``closed``, neither prefixo nor driver) by (stand, kind, ``starts_on``).
    Every row naming a stand, prefixo or driver the registry lacks is reported at once, and
    nothing is written (the caller's transaction).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    suspensions : pandas.DataFrame
        As from :func:`stands.suspensions.read_stand_suspensions`.
    actor, source : str
        Who imports and the file's name (audit log).

    Returns
    -------
    ImportReport
        Created, updated and unchanged rows; ``notes`` name each ``suspension`` whose dates do
        not span the 20 days of art. 45 § único I (kept as the EPTC decided).

    Raises
    ------
    StandSuspensionFileError
        If a stand, prefixo or driver is not in the registry (every such row), or ``actor`` is
        empty.
    """
    if not actor or not actor.strip():
        msg = "'actor' vazio; informe quem faz a alteração (ex.: --actor matricula-123)"
        raise StandSuspensionFileError(msg)
    frame = suspensions.astype(object).where(suspensions.notna(), None)
    records = frame.to_dict("records")

    def known(table: str, column: str) -> set[str]:
        ids = sorted({str(r[column]) for r in records if r[column] is not None})
        sql = f"SELECT {column} FROM {table} WHERE {column} = ANY(:ids)"  # noqa: S608 (constants)
        return set(conn.execute(text(sql), {"ids": ids}).scalars())

    stands = known("stands", "stand_id")
    vehicles = known("vehicles", "vehicle_id")
    drivers = known("drivers", "driver_id")
    errors = []
    for i, rec in enumerate(records):
        for column, ids, what in (
            ("stand_id", stands, "não está no cadastro de pontos (pontual import stands)"),
            ("vehicle_id", vehicles, "não está na frota (pontual import fleet)"),
            ("driver_id", drivers, "não está no cadastro de condutores (pontual import drivers)"),
        ):
            if rec[column] is not None and rec[column] not in ids:
                errors.append(
                    f"{source}, linha {sheet_row(i)}, coluna '{column}': {rec[column]!r} {what}"
                )
    if errors:
        msg = f"{source}: {len(errors)} erro(s); nada foi importado:\n" + "\n".join(errors[:20])
        raise StandSuspensionFileError(msg)
    stored = conn.execute(
        text(
            "SELECT suspension_id, stand_id, vehicle_id, driver_id, kind, starts_on, ends_on, "
            "reason, process_ref FROM stand_suspensions WHERE stand_id = ANY(:ss)"
        ),
        {"ss": sorted(stands)},
    ).all()
    by_key = {tuple(row[1:6]): (row[0], tuple(row[6:])) for row in stored}
    created, updated, unchanged = [], [], 0
    notes = []
    for i, rec in enumerate(records):
        key = tuple(rec[c] for c in _SUSPENSION_KEY)
        values = tuple(rec[c] for c in _SUSPENSION_VALUES)
        row = {c: rec[c] for c in (*_SUSPENSION_KEY, *_SUSPENSION_VALUES)}
        if key not in by_key:
            created.append(row)
        elif by_key[key][1] != values:
            updated.append(row | {"suspension_id": by_key[key][0]})
        else:
            unchanged += 1
        days = rec.get("days")
        if rec["kind"] == "suspension" and days is not None and days != SUSPENSION_DAYS:
            notes.append(
                f"linha {sheet_row(i)}: suspensão de {days} dias (art. 45, parágrafo único, I, "
                f"fixa {SUSPENSION_DAYS} dias corridos); gravada como decidida"
            )
    if created:
        conn.execute(
            text(
                "INSERT INTO stand_suspensions (stand_id, vehicle_id, driver_id, kind, "
                "starts_on, ends_on, reason, process_ref) VALUES (:stand_id, :vehicle_id, "
                ":driver_id, :kind, :starts_on, :ends_on, :reason, :process_ref)"
            ),
            created,
        )
    if updated:
        conn.execute(
            text(
                "UPDATE stand_suspensions SET ends_on = :ends_on, reason = :reason, "
                "process_ref = :process_ref WHERE suspension_id = :suspension_id"
            ),
            updated,
        )
    details = {"created": len(created), "updated": len(updated), "unchanged": unchanged}
    audit_import(conn, actor=actor, entity="stand_suspensions", source=source, details=details)
    return ImportReport(
        created=len(created), updated=len(updated), unchanged=unchanged, notes=tuple(notes)
    )


def suspensions_frame(*, conn: Connection | Session, stand_ids: list[str]) -> pd.DataFrame:
    """Return the stored suspensions of the stands as the rule reads them (any date).

    Columns: ``suspension_id`` and
    :data:`tracking.detectors.unlicensed_stand_use.SUSPENSION_COLUMNS`, ``reason``,
    ``process_ref``; dates as ``datetime64``; ``vehicle_id`` and ``driver_id`` None where not
    given (always in a closure, ``kind`` ``closed``).
    """
    rows = conn.execute(
        text(
            "SELECT suspension_id, stand_id, vehicle_id, driver_id, starts_on, ends_on, kind, "
            "reason, process_ref FROM stand_suspensions WHERE stand_id = ANY(:ss) "
            "ORDER BY suspension_id"
        ),
        {"ss": stand_ids},
    ).all()
    columns = [
        "suspension_id", "stand_id", "vehicle_id", "driver_id", "starts_on", "ends_on", "kind",
        "reason", "process_ref",
    ]  # fmt: skip
    frame = pd.DataFrame([tuple(r) for r in rows], columns=columns, dtype=object)
    for col in ("starts_on", "ends_on"):
        frame[col] = pd.to_datetime(frame[col])
    return frame


def load_allowed_places(
    *, conn: Connection, places: gpd.GeoDataFrame, actor: str, source: str
) -> ImportReport:
    """Store the current list of allowed places (``db.stands.models.AllowedPlace``); audited.

    A place is identified by the file's ``stand_id``; stored places the file omits are retired,
    and one given again is un-retired (counted as updated).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    places : geopandas.GeoDataFrame
        A stands frame (``api.inputs.read_stands_file``), EPSG:4326; rows without a geometry
        are not stored.
    actor, source : str
        Who imports and the file's name (audit log).

    Raises
    ------
    StandsError
        If ``actor`` is empty, or the file has no place with a geometry.
    """
    if not actor or not actor.strip():
        msg = "'actor' vazio; informe quem faz a alteração (ex.: --actor matricula-123)"
        raise StandsError(msg)
    usable = places[places.geometry.notna() & ~places.geometry.is_empty]
    if usable.empty:
        msg = f"{source}: nenhuma área com geometria; nada foi importado"
        raise StandsError(msg)
    multi = [g if g.geom_type == "MultiPolygon" else MultiPolygon([g]) for g in usable.geometry]
    names = usable[NAME] if NAME in usable else pd.Series(None, index=usable.index)
    rows = zip(
        usable[STAND_ID].astype(str), names.astype(object).where(names.notna(), None),
        hex_ewkb(multi), [None] * len(usable), strict=True,
    )  # fmt: skip
    columns = ("place_id", "name", "geometry", "retired_at")
    stage = stage_rows(conn, like="allowed_places", columns=columns, rows=rows)
    report = merge_staged(
        conn,
        stage=stage,
        table="allowed_places",
        key=("place_id",),
        columns=columns[1:],
        touch={"updated_at": "now()"},
    )
    retired = conn.execute(
        text(
            "UPDATE allowed_places t SET retired_at = now(), updated_at = now() "
            f"WHERE t.retired_at IS NULL AND NOT EXISTS (SELECT 1 FROM {stage} s "
            "WHERE s.place_id = t.place_id)"
        )
    ).rowcount
    details = {
        "created": report.created, "updated": report.updated,
        "unchanged": report.unchanged, "retired": retired,
    }  # fmt: skip
    audit_import(conn, actor=actor, entity="allowed_places", source=source, details=details)
    return ImportReport(
        created=report.created,
        updated=report.updated,
        unchanged=report.unchanged,
        retired=retired,
        notes=tuple(places.attrs.get("notes", ())),
    )
