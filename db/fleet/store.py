"""Registry writers: municipalities, IBGE population, the fleet, drivers and their links.

``load_*`` functions write the frames of :mod:`fleet.loaders` in bulk (staging table +
set-based merge) and report what changed. Dates in the registry are local calendar dates,
inclusive; a null start means "not known" (a registry snapshot), never "today".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from db.fleet.models import DriverAssignment
from db.upsert import ImportReport, audit_import, hex_ewkb, merge_staged, stage_rows
from enforcement.rulebook import AuxiliaryCap, auxiliary_cap
from fleet._errors import (
    AuxiliaryDriverLimitError,
    DriverRecordError,
    FleetFileError,
    UnknownMunicipalityError,
    UnknownRecordError,
)
from fleet.dates import (
    PANDAS_DATE_MAX,
    PANDAS_DATE_MIN,
    check_field_date,
    check_optional_registry_date,
    check_registry_date,
)
from fleet.ids import SPELLED_OTHERWISE, form_clashes
from fleet.loaders import LICENCES_UNTOLD, normalize_name, sheet_row
from fleet.vocabulary import DRIVER_DOCUMENT_STATUSES, DRIVER_DOCUMENTS, DRIVER_ROLES


def load_municipalities(*, conn: Connection, municipalities: gpd.GeoDataFrame) -> ImportReport:
    """Upsert municipalities (code, name, uf, timezone, boundary) in bulk.

    A boundary or timezone that the input leaves empty does not erase a stored one.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    municipalities : geopandas.GeoDataFrame
        As from :func:`read_municipalities`.

    Returns
    -------
    ImportReport
        Created / updated / unchanged counts.
    """
    rows = zip(
        municipalities["code"],
        municipalities["name"],
        municipalities["uf"],
        municipalities["timezone"],
        hex_ewkb(municipalities.geometry.to_numpy()),
        strict=True,
    )
    stage = stage_rows(
        conn,
        like="municipalities",
        columns=("code", "name", "uf", "timezone", "boundary"),
        rows=rows,
    )
    conn.execute(
        text(
            f"UPDATE {stage} AS s SET boundary = coalesce(s.boundary, m.boundary), "
            "timezone = coalesce(s.timezone, m.timezone) "
            "FROM municipalities m WHERE m.code = s.code"
        )
    )
    return merge_staged(
        conn,
        stage=stage,
        table="municipalities",
        key=("code",),
        columns=("name", "uf", "timezone", "boundary"),
    )


def load_populations(*, conn: Connection, populations: pd.DataFrame) -> ImportReport:
    """Upsert population figures keyed by (municipality, year, kind).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    populations : pandas.DataFrame
        As from :func:`read_populations`; every municipality must already be stored.

    Returns
    -------
    ImportReport
        Created / updated / unchanged counts.

    Raises
    ------
    UnknownMunicipalityError
        If a code is not in the registry.
    """
    cols = ("municipality_code", "year", "kind", "population", "source")
    rows = populations[list(cols)].astype(object).itertuples(index=False, name=None)
    stage = stage_rows(conn, like="municipal_populations", columns=cols, rows=rows)
    _check_known_municipalities(conn, stage, "municipality_code")
    return merge_staged(
        conn,
        stage=stage,
        table="municipal_populations",
        key=("municipality_code", "year", "kind"),
        columns=("population", "source"),
    )


def _check_known_municipalities(conn: Connection, stage: str, column: str) -> None:
    unknown = conn.execute(
        text(
            f"SELECT DISTINCT s.{column} FROM {stage} s WHERE s.{column} IS NOT NULL "
            f"AND NOT EXISTS (SELECT 1 FROM municipalities m WHERE m.code = s.{column}) "
            "ORDER BY 1 LIMIT 5"
        )
    ).scalars()
    found = list(unknown)
    if found:
        msg = (
            f"municípios não cadastrados: {', '.join(found)}; "
            "rode antes: pontual import municipalities"
        )
        raise UnknownMunicipalityError(msg)


# ------------------------------------------------------------------------------------ fleet


@dataclass(frozen=True)
class FleetImportReport:
    """What a fleet import changed."""

    vehicles: ImportReport
    statuses_created: int
    statuses_closed: int
    licences_created: int
    licences_ended: int
    licences_unchanged: int
    unmatched_stands: dict[str, tuple[str, ...]]
    """Each stand id or name that matched no stored stand: the prefixos licensed to it."""
    excluded: tuple[tuple[str, str, dt.date], ...] = ()
    """(prefixo, stand, excluded_on) of the licences the file names that were not granted: the
    prefixo was excluded from that stand (POA art. 50), which no file undoes."""

    def excluded_lines(self) -> list[str]:
        """Each licence refused for an exclusion, in pt-BR."""
        return [
            f"{v} no ponto {s}: excluído em {d:%d/%m/%Y} (art. 50); licença não criada"
            for v, s, d in self.excluded
        ]

    def unmatched_lines(self, most: int = 5) -> list[str]:
        """Each unmatched stand and its prefixos (the first ``most``), in pt-BR."""
        lines = []
        for stand, vids in self.unmatched_stands.items():
            shown = ", ".join(vids[:most]) + (
                f" e mais {len(vids) - most}" if len(vids) > most else ""
            )
            lines.append(f"{stand} (prefixo{'s' if len(vids) > 1 else ''} {shown})")
        return lines


def load_fleet(*, conn: Connection, fleet: pd.DataFrame, as_of: dt.date) -> FleetImportReport:
    """Upsert vehicles, their status and their parking licences from a fleet frame.

    Status: a vehicle without any stored period gets the file's (start unknown unless
    ``status_since``); one whose latest period has another status gets it closed the day before
    the new one starts (``status_since``, else ``as_of``). Licences: stands named for a vehicle and
    not currently licensed are added (start unknown on a vehicle's first import, else ``as_of``);
    current licences to stands the file no longer names end the day before ``as_of``. A file
    without the ``stands`` column (:data:`~fleet.loaders.LICENCES_UNTOLD`) leaves them as they are.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    fleet : pandas.DataFrame
        As from :func:`read_fleet`. ``stand_names`` are matched to the stands of the vehicle's
        municipality by :func:`normalize_name`.
    as_of : datetime.date
        Local date the file describes (the snapshot's date).

    Returns
    -------
    FleetImportReport
        Counts, and the stand ids/names that matched no stored stand with the prefixos licensed
        to each (those licences are skipped).

    Raises
    ------
    UnknownMunicipalityError
        If a vehicle's municipality is not in the registry.
    fleet.dates.RegistryDateError
        If ``as_of`` is outside the registry range.
    FleetFileError
        If a new prefixo is a stored one written otherwise (:func:`spelling_clash`).
    """
    check_registry_date(as_of, name="as_of")
    new_vehicles = _new_vehicle_ids(conn, fleet["vehicle_id"].tolist())
    if (clash := spelling_clash(conn, "vehicles", new_vehicles)) is not None:
        raise FleetFileError(clash)
    vehicles = _load_vehicles(conn, fleet)
    created, closed = _load_statuses(conn, fleet, as_of=as_of)
    lic_created, lic_ended, lic_same, unmatched, excluded = _load_licences(
        conn, fleet, as_of=as_of, new_vehicles=new_vehicles
    )
    return FleetImportReport(
        vehicles=vehicles,
        statuses_created=created,
        statuses_closed=closed,
        licences_created=lic_created,
        licences_ended=lic_ended,
        licences_unchanged=lic_same,
        unmatched_stands=unmatched,
        excluded=excluded,
    )


def _new_vehicle_ids(conn: Connection, ids: list[str]) -> set[str]:
    stored = conn.execute(
        text("SELECT vehicle_id FROM vehicles WHERE vehicle_id = ANY(:ids)"), {"ids": ids}
    ).scalars()
    return set(ids) - set(stored)


_SPELLING_QUERIES = {
    "vehicles": "SELECT vehicle_id FROM vehicles",
    "drivers": "SELECT driver_id FROM drivers",
}


def held_spelling(db: Connection | Session, table: str, one_id: str) -> str | None:
    """Return how ``table`` holds ``one_id`` written otherwise (``SIM-1007`` for ``sim-1007``).

    None when it holds ``one_id`` as written, or not at all (:func:`fleet.ids.form_clashes`).
    """
    stored = set(db.execute(text(_SPELLING_QUERIES[table])).scalars())
    return None if one_id in stored else form_clashes([one_id], stored).get(one_id)


def spelling_clash(db: Connection | Session, table: str, ids: Any) -> str | None:
    """Say (pt-BR) why an id of ``ids`` new to ``table`` cannot be added, or None when all can.

    One the registry already holds written otherwise (:func:`fleet.ids.form_clashes`: ``d1``
    for ``D1``, ``0123`` for ``123``) would be a second record of one driver or vehicle.
    """
    stored = set(db.execute(text(_SPELLING_QUERIES[table])).scalars())
    clashes = form_clashes((i for i in ids if i not in stored), stored)
    if not clashes:
        return None
    new, held = min(clashes.items())
    what = "veículo" if table == "vehicles" else "condutor"
    return (
        f"{what} {new!r}: o cadastro já tem {held!r}, {SPELLED_OTHERWISE}; use a grafia do cadastro"
    )


_VEHICLE_COLUMNS = (
    "prefixo", "municipality_code", "plate", "make", "model", "year", "fuel",
    "first_registered_on", "accessible", "alvara_valid_until", "inspection_valid_until",
    "last_inspection_on", "alvara_first_issued_on", "substitution_since", "substituted_plate",
    "termo_recolhido_since", "termo_recolhido_until", "service_category",
)  # fmt: skip


def _load_vehicles(conn: Connection, fleet: pd.DataFrame) -> ImportReport:
    frame = fleet.rename(columns={"municipality": "municipality_code"})
    for name in _VEHICLE_COLUMNS:  # a frame from before these columns: all unknown
        if name not in frame.columns:
            frame[name] = None
    cols = ("vehicle_id", *_VEHICLE_COLUMNS)
    rows = frame[list(cols)].astype(object).itertuples(index=False, name=None)
    stage = stage_rows(
        conn,
        like="vehicles",
        columns=cols,
        rows=rows,
    )
    _check_known_municipalities(conn, stage, "municipality_code")
    # Unknown accessibility (None) keeps what is stored; a new vehicle stays unknown.
    conn.execute(
        text(
            f"UPDATE {stage} AS s SET accessible = coalesce(s.accessible, v.accessible) "
            "FROM vehicles v WHERE v.vehicle_id = s.vehicle_id"
        )
    )
    return merge_staged(
        conn,
        stage=stage,
        table="vehicles",
        key=("vehicle_id",),
        columns=_VEHICLE_COLUMNS,
        touch={"updated_at": "now()"},
    )


def _load_statuses(conn: Connection, fleet: pd.DataFrame, *, as_of: dt.date) -> tuple[int, int]:
    given = fleet[fleet["status"].notna()]
    if given.empty:
        return 0, 0
    rows = (
        (r.vehicle_id, r.status, r.status_since, r.status_until)
        for r in given[["vehicle_id", "status", "status_since", "status_until"]].itertuples()
    )
    stage = stage_rows(
        conn,
        like="vehicle_status_periods",
        columns=("vehicle_id", "status", "valid_from", "valid_until"),
        rows=rows,
    )
    # Latest stored period of each staged vehicle.
    conn.execute(
        text(
            f"""CREATE TEMP TABLE _latest_status ON COMMIT DROP AS
            SELECT DISTINCT ON (p.vehicle_id) p.period_id, p.vehicle_id, p.status,
                   p.valid_from, p.valid_until
            FROM vehicle_status_periods p JOIN {stage} s USING (vehicle_id)
            ORDER BY p.vehicle_id, p.valid_from DESC NULLS LAST, p.period_id DESC"""
        )
    )
    # A changed status starts on status_since, else on as_of.
    conn.execute(
        text(
            f"UPDATE {stage} s SET valid_from = :as_of FROM _latest_status l "
            "WHERE l.vehicle_id = s.vehicle_id AND l.status <> s.status AND s.valid_from IS NULL"
        ),
        {"as_of": as_of},
    )
    closed = conn.execute(
        text(
            f"UPDATE vehicle_status_periods p SET valid_until = s.valid_from - 1 "
            f"FROM _latest_status l JOIN {stage} s USING (vehicle_id) "
            "WHERE p.period_id = l.period_id AND l.status <> s.status "
            "AND (p.valid_until IS NULL OR p.valid_until >= s.valid_from)"
        )
    ).rowcount
    created = conn.execute(
        text(
            f"INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
            f"SELECT s.vehicle_id, s.status, s.valid_from, s.valid_until FROM {stage} s "
            "LEFT JOIN _latest_status l USING (vehicle_id) "
            "WHERE l.vehicle_id IS NULL OR l.status <> s.status"
        )
    ).rowcount
    conn.execute(text("DROP TABLE _latest_status"))
    return created, closed


def _load_licences(
    conn: Connection, fleet: pd.DataFrame, *, as_of: dt.date, new_vehicles: set[str]
) -> tuple[int, int, int, dict[str, tuple[str, ...]], tuple[tuple[str, str, dt.date], ...]]:
    by_name = {
        (mun, name): sid
        for sid, mun, name in conn.execute(
            text("SELECT stand_id, municipality_code, name FROM stands WHERE name IS NOT NULL")
        ).all()
        for name in [normalize_name(name)]
    }
    known_ids = set(conn.execute(text("SELECT stand_id FROM stands")).scalars())
    pairs: list[tuple[str, str, dt.date | None]] = []
    unplaced: dict[str, list[str]] = {}
    if LICENCES_UNTOLD in fleet.columns:  # the file does not say these vehicles' licences
        fleet = fleet.loc[~fleet[LICENCES_UNTOLD].fillna(False).astype(bool)]
    for vid, mun, ids, names in fleet[
        ["vehicle_id", "municipality", "stands", "stand_names"]
    ].itertuples(index=False, name=None):
        start = None if vid in new_vehicles else as_of
        missed = unplaced.setdefault(vid, [])
        for sid in ids:
            if sid in known_ids:
                pairs.append((vid, sid, start))
            else:
                missed.append(sid)
        for name in names:
            found = by_name.get((mun, name))
            if found is None:
                missed.append(name)
            else:
                pairs.append((vid, found, start))
    # Each vehicle of the file: the stands of its licences this import could not place.
    conn.execute(
        text("UPDATE vehicles SET unplaced_stands = '{}' WHERE vehicle_id = ANY(:vids)"),
        {"vids": list(unplaced)},
    )
    missing = [{"v": v, "s": sorted(set(m))} for v, m in unplaced.items() if m]
    if missing:
        conn.execute(
            text("UPDATE vehicles SET unplaced_stands = :s WHERE vehicle_id = :v"), missing
        )
    unmatched: dict[str, set[str]] = {}
    for vid, missed in unplaced.items():
        for stand in missed:
            unmatched.setdefault(stand, set()).add(vid)
    stage = stage_rows(
        conn,
        like="parking_licences",
        columns=("vehicle_id", "stand_id", "valid_from"),
        rows=iter(sorted(set(pairs), key=lambda p: (p[0], p[1]))),
    )
    current = "(p.valid_until IS NULL OR p.valid_until >= :as_of)"
    vehicles = fleet["vehicle_id"].tolist()
    ended = conn.execute(
        text(
            f"UPDATE parking_licences p SET valid_until = :as_of - 1 "
            f"WHERE p.vehicle_id = ANY(:vids) AND {current} "
            "AND (p.valid_from IS NULL OR p.valid_from < :as_of) "
            f"AND NOT EXISTS (SELECT 1 FROM {stage} s "
            "WHERE s.vehicle_id = p.vehicle_id AND s.stand_id = p.stand_id)"
        ),
        {"as_of": as_of, "vids": vehicles},
    ).rowcount
    unchanged = conn.execute(
        text(
            f"DELETE FROM {stage} s USING parking_licences p "
            f"WHERE p.vehicle_id = s.vehicle_id AND p.stand_id = s.stand_id AND {current}"
        ),
        {"as_of": as_of},
    ).rowcount
    excluded = conn.execute(  # an exclusion (art. 50) is for good: a file does not undo it
        text(
            f"DELETE FROM {stage} s USING licence_exclusions e "
            "WHERE e.vehicle_id = s.vehicle_id AND e.stand_id = s.stand_id "
            "RETURNING s.vehicle_id, s.stand_id, e.excluded_on"
        )
    ).all()
    created = conn.execute(
        text(
            f"INSERT INTO parking_licences (vehicle_id, stand_id, valid_from) "
            f"SELECT vehicle_id, stand_id, valid_from FROM {stage}"
        )
    ).rowcount
    return (
        created,
        ended,
        unchanged,
        {s: tuple(sorted(unmatched[s])) for s in sorted(unmatched)},
        tuple(sorted({(str(v), str(s), d) for v, s, d in excluded})),
    )


# ---------------------------------------------------------------------------------- drivers


AuxiliaryCaps = tuple[AuxiliaryCap, str]
"""A prefixo's cap on auxiliares and the name of the municipality whose law fixes it."""


def auxiliary_caps(db: Connection | Session, vehicle_ids: Any) -> dict[str, AuxiliaryCaps]:
    """Return the cap on auxiliares of each prefixo whose municipality's law fixes one.

    Locks the prefixos' rows until the caller's transaction ends, so two links written at once
    to the same prefixo are checked one after the other. A prefixo of a municipality whose law
    sets no cap (Porto Alegre), or of none known, is absent: every link is held.
    """
    rows = db.execute(
        text(
            "SELECT vehicle_id, municipality_code FROM vehicles WHERE vehicle_id = ANY(:ids) "
            "ORDER BY vehicle_id FOR UPDATE"
        ),
        {"ids": sorted({str(v) for v in vehicle_ids})},
    ).all()
    return {v: cap for v, m in rows if (cap := auxiliary_cap(m)) is not None}


def _most_at_once(group: pd.DataFrame) -> tuple[int, dt.date | None]:
    """Return the most links of ``group`` valid on one day, and the first such day."""
    starts = pd.to_datetime(pd.Series(group["valid_from"])).to_numpy()
    ends = pd.to_datetime(pd.Series(group["valid_until"])).to_numpy()
    most, first = 0, None
    for start in np.unique(starts):
        n = int(((starts <= start) & (np.isnat(ends) | (ends >= start))).sum())
        if n > most:
            most, first = n, pd.Timestamp(start).date()
    return most, first


def check_link_limits(assignments: pd.DataFrame, *, caps: dict[str, AuxiliaryCaps]) -> None:
    """Raise if a prefixo has two titulares, or more auxiliares than its law allows, on a day.

    A prefixo has one autorizatário, the titular (the holder of its authorisation, who may
    drive it) at a time. Porto Velho art. 43 § 1º and Pinto Bandeira art. 14 allow two
    condutores auxiliares at once (the rulebooks' ``[auxiliaries]``); Porto Alegre's decree
    sets no cap.

    Parameters
    ----------
    assignments : pandas.DataFrame
        ``vehicle_id``, ``role``, ``valid_from`` (date), ``valid_until`` (date or None: open);
        both dates inclusive.
    caps : dict
        Prefixo → its law's cap and the municipality's name (:func:`auxiliary_caps`); a
        prefixo absent has no cap.

    Raises
    ------
    AuxiliaryDriverLimitError
        Naming the prefixo and the first date with too many auxiliaries.
    DriverRecordError
        Naming the prefixo and the first date with two titulares.
    FleetFileError
        If a role is unknown.
    """
    bad = ~assignments["role"].isin(DRIVER_ROLES)
    if bad.any():
        msg = (
            f"'role' era {assignments['role'][bad].iloc[0]!r}; "
            f"esperado um de {', '.join(DRIVER_ROLES)}"
        )
        raise FleetFileError(msg)
    titulares = assignments[assignments["role"] == "autorizatario_condutor"]
    for vid, group in titulares.groupby("vehicle_id", sort=True):
        most, day = _most_at_once(group)
        if most > 1:
            msg = (
                f"o prefixo {vid} teria {most} titulares em {day}; um prefixo tem um "
                "autorizatário por vez: encerre o vínculo do titular anterior (fim na véspera)"
            )
            raise DriverRecordError(msg)
    aux = assignments[assignments["role"] == "auxiliar"]
    for vid, group in aux.groupby("vehicle_id", sort=True):
        if (found := caps.get(str(vid))) is None:
            continue
        cap, where = found
        most, day = _most_at_once(group)
        if most > cap.max:
            msg = (
                f"o prefixo {vid} teria {most} condutores auxiliares em {day}; "
                f"o limite é {cap.max} ({cap.provision} da lei de {where})"
            )
            raise AuxiliaryDriverLimitError(msg)


def add_driver_assignment(
    *,
    session: Session,
    driver_id: str,
    vehicle_id: str,
    role: str,
    valid_from: dt.date,
    valid_until: dt.date | None = None,
) -> DriverAssignment:
    """Link a driver to a prefixo after checking the titular and auxiliary-driver limits.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Session in the caller's transaction (flushed, not committed).
    driver_id, vehicle_id : str
        Stored driver and vehicle.
    role : str
        ``autorizatario_condutor`` or ``auxiliar``.
    valid_from, valid_until : datetime.date
        Inclusive local dates; ``valid_until`` None means open.

    Returns
    -------
    DriverAssignment
        The new, flushed assignment.

    Raises
    ------
    AuxiliaryDriverLimitError
        If the prefixo would have more auxiliaries at once than its law allows.
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    check_registry_date(valid_from, name="valid_from")
    check_optional_registry_date(valid_until, name="valid_until")
    caps = auxiliary_caps(session, [vehicle_id])
    stored = session.execute(
        text(
            "SELECT vehicle_id, role, valid_from, valid_until FROM driver_assignments "
            "WHERE vehicle_id = :v"
        ),
        {"v": vehicle_id},
    ).all()
    frame = pd.DataFrame(
        [*map(tuple, stored), (vehicle_id, role, valid_from, valid_until)],
        columns=["vehicle_id", "role", "valid_from", "valid_until"],
    )
    check_link_limits(frame, caps=caps)
    assignment = DriverAssignment(
        driver_id=driver_id,
        vehicle_id=vehicle_id,
        role=role,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    session.add(assignment)
    session.flush()
    return assignment


_ACTIVE_SQL = """
SELECT v.vehicle_id, v.prefixo, v.year, v.first_registered_on, v.accessible,
       v.inspection_valid_until, v.alvara_valid_until, v.municipality_code AS municipality,
       'active' AS status
FROM vehicles v
WHERE v.municipality_code = :m
  AND EXISTS (SELECT 1 FROM vehicle_status_periods s WHERE s.vehicle_id = v.vehicle_id
              AND s.status = 'active'
              AND (s.valid_from IS NULL OR s.valid_from <= :d)
              AND (s.valid_until IS NULL OR s.valid_until >= :d))
ORDER BY v.vehicle_id
"""


REGISTRY_SERVICE = "taxi"
"""The service of the registry's vehicles: ``pontual import fleet`` reads taxi fleets (a
vehicle has no service of its own), so the registry knows no fretamento fleet."""


def active_fleet_from_db(
    *, conn: Connection, municipality: str, as_of: dt.date, service: str = REGISTRY_SERVICE
) -> pd.DataFrame | None:
    """Return the registry's vehicles of a municipality whose status is active on ``as_of``.

    None for a service the registry does not hold (:data:`REGISTRY_SERVICE`): its fleet is
    unknown, not the taxis.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection to the registry.
    municipality : str
        IBGE code.
    as_of : datetime.date
        Local date (status periods are inclusive).
    service : str, default "taxi"
        The plan's service.

    Returns
    -------
    pandas.DataFrame or None
        ``vehicle_id``, ``prefixo``, ``year`` (Int64), ``first_registered_on``, ``accessible``,
        ``inspection_valid_until``, ``alvara_valid_until``, ``municipality``, ``status``.
    """
    if service != REGISTRY_SERVICE:
        return None
    rows = conn.execute(text(_ACTIVE_SQL), {"m": municipality, "d": as_of}).mappings().all()
    columns = [
        "vehicle_id", "prefixo", "year", "first_registered_on", "accessible",
        "inspection_valid_until", "alvara_valid_until", "municipality", "status",
    ]  # fmt: skip
    frame = pd.DataFrame([dict(r) for r in rows], columns=columns)
    frame["year"] = frame["year"].astype("Int64")
    return frame


# ---------------------------------------------------------------------- drivers (files)


@dataclass(frozen=True)
class DriverImportReport:
    """What ``pontual import drivers`` changed."""

    drivers: ImportReport
    periods_replaced: int
    periods_created: int


@dataclass(frozen=True)
class DriverLinksImportReport:
    """What ``pontual import driver-links`` changed."""

    created: int
    updated: int
    unchanged: int


_DRIVER_COLUMNS = (
    "municipality_code", "name", "synthetic", "cnh_number", "cnh_category", "cnh_valid_until",
    "credential_valid_until",
)  # fmt: skip
_LINK_ROLE_STORED = {"titular": "autorizatario_condutor", "auxiliar": "auxiliar"}


def _audit_import(
    conn: Connection,
    *,
    actor: str,
    entity: str,
    source: str,
    details: dict[str, Any],
    action: str = "import",
) -> None:
    """Write one audit-log entry for a registry change (``audit_log`` is append-only)."""
    if not actor or not actor.strip():
        msg = "'actor' vazio; informe quem faz a alteração (ex.: --actor matricula-123)"
        raise FleetFileError(msg)
    audit_import(conn, actor=actor, entity=entity, source=source, details=details, action=action)


def load_drivers(
    *,
    conn: Connection,
    drivers: pd.DataFrame,
    actor: str,
    source: str,
    municipality: str | None = None,
) -> DriverImportReport:
    """Upsert drivers and replace their CNH / ICTP status history by the file's; audited.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    drivers : pandas.DataFrame
        As from :func:`fleet.drivers.read_drivers` (one row per driver and status period).
    actor : str
        Who imports (audit log).
    source : str
        The file's name (audit log).
    municipality : str, optional
        IBGE code of the drivers' municipality.

    Returns
    -------
    DriverImportReport
        Drivers created, updated and unchanged; periods replaced and created.

    Raises
    ------
    FleetFileError
        If a driver has no ``name`` (the registry keeps it), a new id is a stored one written
        otherwise (:func:`spelling_clash`), or ``actor`` is empty.
    UnknownMunicipalityError
        If ``municipality`` is not in the registry.
    """
    missing = drivers["name"].isna()
    if missing.any():
        row = sheet_row(int(np.flatnonzero(missing.to_numpy())[0]))
        msg = f"{source}, linha {row}, coluna name: vazio; o cadastro no banco exige o nome"
        raise FleetFileError(msg)
    first = drivers.drop_duplicates("driver_id", keep="first")
    if (clash := spelling_clash(conn, "drivers", first["driver_id"])) is not None:
        raise FleetFileError(f"{source}: {clash}")
    rows = [
        (
            r["driver_id"],
            municipality,
            r["name"],
            bool(r["synthetic"]) if r["synthetic"] is not None else False,
            r["cnh_number"],
            r["cnh_category"],
            r["cnh_valid_until"],
            r["ictp_valid_until"],
        )
        for r in first.to_dict("records")
    ]
    stage = stage_rows(conn, like="drivers", columns=("driver_id", *_DRIVER_COLUMNS), rows=rows)
    _check_known_municipalities(conn, stage, "municipality_code")
    report = merge_staged(
        conn, stage=stage, table="drivers", key=("driver_id",), columns=_DRIVER_COLUMNS
    )
    ids = first["driver_id"].tolist()
    replaced = conn.execute(
        text("DELETE FROM driver_document_periods WHERE driver_id = ANY(:ids)"), {"ids": ids}
    ).rowcount
    periods = [
        {"d": r["driver_id"], "doc": doc, "s": r[f"{doc}_status"], "f": r[f"{doc}_status_since"],
         "u": r[f"{doc}_status_until"]}
        for r in drivers.to_dict("records")
        for doc in DRIVER_DOCUMENTS
        if r[f"{doc}_status"] is not None
    ]  # fmt: skip
    if periods:
        conn.execute(
            text(
                "INSERT INTO driver_document_periods "
                "(driver_id, document, status, valid_from, valid_until) "
                "VALUES (:d, :doc, :s, :f, :u)"
            ),
            periods,
        )
    _audit_import(
        conn,
        actor=actor,
        entity="drivers",
        source=source,
        details={
            "created": report.created,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "periods_replaced": replaced,
            "periods_created": len(periods),
        },
    )
    return DriverImportReport(
        drivers=report, periods_replaced=replaced, periods_created=len(periods)
    )


def load_driver_links(
    *, conn: Connection, links: pd.DataFrame, actor: str, source: str
) -> DriverLinksImportReport:
    """Add the file's driver ↔ prefixo links (a stored one with the same start: its end); audited.

    A link is identified by (driver, prefixo, role, ``valid_from``). The auxiliary-driver cap
    is checked on the stored links plus the file's before anything is written.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection in the caller's transaction.
    links : pandas.DataFrame
        As from :func:`fleet.drivers.read_driver_links`.
    actor, source : str
        Who imports and the file's name (audit log).

    Returns
    -------
    DriverLinksImportReport
        Links created, updated (end changed) and unchanged.

    Raises
    ------
    FleetFileError
        If a driver or prefixo is not in the registry (the message names the file's row), or
        ``actor`` is empty.
    AuxiliaryDriverLimitError
        If a prefixo would have more auxiliaries at once than the legal maximum.
    """
    frame = links.copy()
    frame["role"] = frame["role"].map(_LINK_ROLE_STORED)
    known_drivers = set(
        conn.execute(
            text("SELECT driver_id FROM drivers WHERE driver_id = ANY(:ids)"),
            {"ids": sorted(set(frame["driver_id"]))},
        ).scalars()
    )
    known_vehicles = set(
        conn.execute(
            text("SELECT vehicle_id FROM vehicles WHERE vehicle_id = ANY(:ids)"),
            {"ids": sorted(set(frame["vehicle_id"]))},
        ).scalars()
    )
    for i, rec in enumerate(frame.to_dict("records")):
        if rec["driver_id"] not in known_drivers:
            msg = (
                f"{source}, linha {sheet_row(i)}, coluna driver_id: {rec['driver_id']!r} não "
                "está no cadastro de condutores; importe-o antes (pontual import drivers)"
            )
            raise FleetFileError(msg)
        if rec["vehicle_id"] not in known_vehicles:
            msg = (
                f"{source}, linha {sheet_row(i)}, coluna vehicle_id: {rec['vehicle_id']!r} não "
                "está na frota; importe-a antes (pontual import fleet)"
            )
            raise FleetFileError(msg)
    caps = auxiliary_caps(conn, known_vehicles)
    stored = conn.execute(
        text(
            "SELECT assignment_id, driver_id, vehicle_id, role, valid_from, valid_until "
            "FROM driver_assignments WHERE vehicle_id = ANY(:vs)"
        ),
        {"vs": sorted(known_vehicles)},
    ).all()
    by_key = {(d, v, r, f): (a, u) for a, d, v, r, f, u in stored}
    created: list[dict[str, Any]] = []
    updated: list[dict[str, Any]] = []
    unchanged = 0
    for link in ({str(k): v for k, v in r.items()} for r in frame.to_dict("records")):
        key = (link["driver_id"], link["vehicle_id"], link["role"], link["valid_from"])
        if key not in by_key:
            created.append(link)
        elif by_key[key][1] != link["valid_until"]:
            updated.append({"a": by_key[key][0], "u": link["valid_until"]})
            by_key[key] = (by_key[key][0], link["valid_until"])
        else:
            unchanged += 1
    after = pd.DataFrame(
        [(v, r, f, u) for (_, v, r, f), (_, u) in by_key.items()]
        + [(c["vehicle_id"], c["role"], c["valid_from"], c["valid_until"]) for c in created],
        columns=["vehicle_id", "role", "valid_from", "valid_until"],
    )
    check_link_limits(after, caps=caps)
    if updated:
        conn.execute(
            text("UPDATE driver_assignments SET valid_until = :u WHERE assignment_id = :a"),
            updated,
        )
    if created:
        conn.execute(
            text(
                "INSERT INTO driver_assignments (driver_id, vehicle_id, role, valid_from, "
                "valid_until) VALUES (:driver_id, :vehicle_id, :role, :valid_from, :valid_until)"
            ),
            created,
        )
    _audit_import(
        conn,
        actor=actor,
        entity="driver_assignments",
        source=source,
        details={"created": len(created), "updated": len(updated), "unchanged": unchanged},
    )
    return DriverLinksImportReport(created=len(created), updated=len(updated), unchanged=unchanged)


_DRIVERS_OF_VEHICLES_SQL = """
SELECT d.driver_id, d.cnh_valid_until, d.credential_valid_until
FROM drivers d WHERE d.driver_id = ANY(:ds)
"""


def driver_registry_frames(
    *, conn: Connection | Session, vehicle_ids: list[str], driver_ids: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the drivers and links frames ``driver_not_allowed`` reads, from the registry.

    Links: every link of the vehicles and of the drivers (any date). Drivers: the drivers named
    (the fixes' ``driver_id``) and those of the links, one row per status period (the
    :data:`tracking.detectors.driver_not_allowed.DRIVER_COLUMNS` layout); dates clipped to what
    pandas holds.
    """
    link_rows = conn.execute(
        text(
            "SELECT vehicle_id, driver_id, role, valid_from, valid_until FROM driver_assignments "
            "WHERE vehicle_id = ANY(:vs) OR driver_id = ANY(:ds) "
            "ORDER BY vehicle_id, driver_id, valid_from"
        ),
        {"vs": vehicle_ids, "ds": driver_ids},
    ).all()
    links = pd.DataFrame(
        [(v, d, r, _clip(f), _clip(u)) for v, d, r, f, u in link_rows],
        columns=["vehicle_id", "driver_id", "role", "valid_from", "valid_until"],
        dtype=object,
    )
    wanted = sorted({*driver_ids, *links["driver_id"]})
    people = conn.execute(text(_DRIVERS_OF_VEHICLES_SQL), {"ds": wanted}).all()
    periods = conn.execute(
        text(
            "SELECT driver_id, document, status, valid_from, valid_until "
            "FROM driver_document_periods WHERE driver_id = ANY(:ds) "
            "ORDER BY driver_id, document, valid_from NULLS FIRST"
        ),
        {"ds": wanted},
    ).all()
    rows: list[dict[str, Any]] = []
    for did, cnh, ictp in people:
        base = {"driver_id": did, "cnh_valid_until": _clip(cnh), "ictp_valid_until": _clip(ictp)}
        rows.append(dict(base))
        for d, doc, status, since, until in periods:
            if d == did:
                rows.append(
                    base
                    | {
                        f"{doc}_status": status,
                        f"{doc}_status_since": _clip(since),
                        f"{doc}_status_until": _clip(until),
                    }
                )
    columns = [
        "driver_id", "cnh_valid_until", "ictp_valid_until", "cnh_status", "cnh_status_since",
        "cnh_status_until", "ictp_status", "ictp_status_since", "ictp_status_until",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns, dtype=object), links


def _clip(day: dt.date | None) -> dt.date | None:
    """Clip a stored registry date to what pandas holds (``fleet.dates``)."""
    if day is None:
        return None
    return min(max(day, PANDAS_DATE_MIN), PANDAS_DATE_MAX)


# ------------------------------------------------------------------- drivers (one at a time)


def driver_record(*, session: Session, driver_id: str) -> dict[str, Any] | None:
    """Return a driver with their CNH / ICTP periods and links, or None if not registered."""
    row = (
        session.execute(
            text(
                "SELECT driver_id, municipality_code, name, synthetic, cnh_number, cnh_category, "
                "cnh_valid_until, credential_valid_until AS ictp_valid_until "
                "FROM drivers WHERE driver_id = :d"
            ),
            {"d": driver_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    periods = session.execute(
        text(
            "SELECT period_id, document, status, valid_from, valid_until "
            "FROM driver_document_periods "
            "WHERE driver_id = :d ORDER BY document, valid_from NULLS FIRST, period_id"
        ),
        {"d": driver_id},
    ).mappings()
    links = session.execute(
        text(
            "SELECT assignment_id AS link_id, vehicle_id, role, valid_from, valid_until "
            "FROM driver_assignments WHERE driver_id = :d ORDER BY valid_from, vehicle_id, "
            "assignment_id"
        ),
        {"d": driver_id},
    ).mappings()
    return dict(row) | {
        "periods": [dict(p) for p in periods],
        "links": [
            dict(k) | {"role": "titular" if k["role"] == "autorizatario_condutor" else k["role"]}
            for k in links
        ],
    }


def _require_driver(session: Session, driver_id: str) -> None:
    found = session.execute(
        text("SELECT 1 FROM drivers WHERE driver_id = :d"), {"d": driver_id}
    ).first()
    if found is None:
        msg = f"condutor '{driver_id}' não está no cadastro"
        raise UnknownRecordError(msg)


def _check_period(
    session: Session,
    *,
    driver_id: str,
    document: str,
    status: str,
    valid_from: dt.date | None,
    valid_until: dt.date | None,
    period_id: int | None = None,
) -> None:
    """Check a status period: vocabularies, dates, order, no overlap (but with itself)."""
    if document not in DRIVER_DOCUMENTS or status not in DRIVER_DOCUMENT_STATUSES:
        msg = (
            f"'document' era {document!r} e 'status' era {status!r}; esperado document um de "
            f"{', '.join(DRIVER_DOCUMENTS)} e status um de {', '.join(DRIVER_DOCUMENT_STATUSES)}"
        )
        raise DriverRecordError(msg)
    check_optional_registry_date(valid_from, name="valid_from")
    check_optional_registry_date(valid_until, name="valid_until")
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        msg = f"'valid_until' ({valid_until}) antes de 'valid_from' ({valid_from})"
        raise DriverRecordError(msg)
    clash = session.execute(
        text(
            "SELECT valid_from, valid_until FROM driver_document_periods WHERE driver_id = :d "
            "AND document = :doc AND daterange(valid_from, valid_until, '[]') && "
            "daterange(:f, :u, '[]') AND period_id IS DISTINCT FROM :p LIMIT 1"
        ),
        {"d": driver_id, "doc": document, "f": valid_from, "u": valid_until, "p": period_id},
    ).first()
    if clash is not None:
        msg = (
            f"o período se sobrepõe a outro de {document} do condutor '{driver_id}' "
            f"({clash[0] or '…'} a {clash[1] or '…'})"
        )
        raise DriverRecordError(msg)


def add_driver_period(
    *,
    session: Session,
    driver_id: str,
    document: str,
    status: str,
    valid_from: dt.date | None,
    valid_until: dt.date | None,
    actor: str,
) -> None:
    """Record a status period of a driver's CNH or ICTP (audited; flushed, not committed).

    Raises
    ------
    DriverRecordError
        If the driver is unknown, the document or status invalid, or the period overlaps one
        of the same document.
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    _require_driver(session, driver_id)
    _check_period(
        session,
        driver_id=driver_id,
        document=document,
        status=status,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    session.execute(
        text(
            "INSERT INTO driver_document_periods "
            "(driver_id, document, status, valid_from, valid_until) VALUES (:d, :doc, :s, :f, :u)"
        ),
        {"d": driver_id, "doc": document, "s": status, "f": valid_from, "u": valid_until},
    )
    _audit_import(
        session.connection(),
        actor=actor,
        entity="driver_document_periods",
        source=driver_id,
        details={"document": document, "status": status, "valid_from": valid_from,
                 "valid_until": valid_until},
        action="create",
    )  # fmt: skip


def add_driver_link(
    *,
    session: Session,
    driver_id: str,
    vehicle_id: str,
    role: str,
    valid_from: dt.date,
    valid_until: dt.date | None,
    actor: str,
) -> None:
    """Link a driver to a prefixo (``titular`` or ``auxiliar``; audited; flushed, not committed).

    Raises
    ------
    DriverRecordError
        If the driver or the vehicle is unknown, the role invalid, or the driver is already
        linked to the prefixo on some of these dates (the rule of the links file).
    AuxiliaryDriverLimitError
        If the prefixo would have more auxiliaries at once than its law allows.
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    _require_driver(session, driver_id)
    stored_role = _LINK_ROLE_STORED.get(role)
    if stored_role is None:
        msg = f"'role' era {role!r}; esperado um de titular, auxiliar"
        raise DriverRecordError(msg)
    found = session.execute(
        text("SELECT 1 FROM vehicles WHERE vehicle_id = :v"), {"v": vehicle_id}
    ).first()
    if found is None:
        msg = f"veículo '{vehicle_id}' não está na frota"
        raise DriverRecordError(msg)
    _check_link_overlap(
        session,
        driver_id=driver_id,
        vehicle_id=vehicle_id,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    add_driver_assignment(
        session=session,
        driver_id=driver_id,
        vehicle_id=vehicle_id,
        role=stored_role,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    _audit_import(
        session.connection(),
        actor=actor,
        entity="driver_assignments",
        source=driver_id,
        details={"vehicle_id": vehicle_id, "role": role, "valid_from": valid_from,
                 "valid_until": valid_until},
        action="create",
    )  # fmt: skip


def _check_link_overlap(
    session: Session,
    *,
    driver_id: str,
    vehicle_id: str,
    valid_from: dt.date,
    valid_until: dt.date | None,
    link_id: int | None = None,
) -> None:
    """Refuse a link that ends before it starts, or links a driver to a prefixo twice.

    Twice: a second link on some of the same dates (the rule of the links file).
    """
    if valid_until is not None and valid_until < valid_from:
        msg = f"'valid_until' ({valid_until}) antes de 'valid_from' ({valid_from})"
        raise DriverRecordError(msg)
    clash = session.execute(
        text(
            "SELECT valid_from, valid_until FROM driver_assignments WHERE driver_id = :d "
            "AND vehicle_id = :v AND daterange(valid_from, valid_until, '[]') && "
            "daterange(:f, :u, '[]') AND assignment_id IS DISTINCT FROM :a LIMIT 1"
        ),
        {"d": driver_id, "v": vehicle_id, "f": valid_from, "u": valid_until, "a": link_id},
    ).first()
    if clash is not None:
        msg = (
            f"o condutor '{driver_id}' já está vinculado ao prefixo {vehicle_id} nessas datas "
            f"({clash[0]} a {clash[1] or '…'})"
        )
        raise DriverRecordError(msg)


# ------------------------------------------------------------- drivers and vehicles (edits)

DRIVER_FIELDS = (
    "municipality_code", "name", "synthetic", "cnh_number", "cnh_category", "cnh_valid_until",
    "ictp_valid_until",
)  # fmt: skip
"""A driver's editable fields (``ictp_valid_until`` is stored as ``credential_valid_until``)."""
_DRIVER_STORED = {"ictp_valid_until": "credential_valid_until"}
VEHICLE_DOCUMENT_FIELDS = (
    "year", "first_registered_on", "alvara_valid_until", "inspection_valid_until",
    "last_inspection_on", "alvara_first_issued_on", "substitution_since", "substituted_plate",
    "termo_recolhido_since", "termo_recolhido_until", "service_category",
)  # fmt: skip
"""A vehicle's document fields editable one vehicle at a time (as the fleet file's columns)."""


def find_drivers(
    *,
    session: Session,
    query: str | None = None,
    municipality_code: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Return a page of drivers (by id) whose id, name or CNH number contains ``query``.

    Returns
    -------
    tuple
        The drivers (the fields of :data:`DRIVER_FIELDS` plus ``driver_id``) and the count of
        the filter.
    """
    where = ["TRUE"]
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if query:
        like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append("(driver_id ILIKE :q OR name ILIKE :q OR cnh_number ILIKE :q)")
        params["q"] = like
    if municipality_code is not None:
        where.append("municipality_code = :m")
        params["m"] = municipality_code
    clause = " AND ".join(where)
    rows = session.execute(
        text(
            "SELECT driver_id, municipality_code, name, synthetic, cnh_number, cnh_category, "
            "cnh_valid_until, credential_valid_until AS ictp_valid_until FROM drivers "
            f"WHERE {clause} ORDER BY driver_id LIMIT :limit OFFSET :offset"
        ),
        params,
    ).mappings()
    data = [dict(r) for r in rows]
    count = session.execute(text(f"SELECT count(*) FROM drivers WHERE {clause}"), params).scalar()
    return data, int(count or 0)


def _check_driver_values(session: Session, values: dict[str, Any]) -> dict[str, Any]:
    """Check a driver's fields (the drivers file's rules); return them normalized."""
    from fleet.dates import check_document_validity
    from fleet.drivers import check_cnh_category

    out = dict(values)
    if "name" in out and (out["name"] is None or not str(out["name"]).strip()):
        msg = "'name' vazio; o cadastro exige o nome do condutor"
        raise DriverRecordError(msg)
    if out.get("cnh_category") is not None:
        out["cnh_category"] = check_cnh_category(str(out["cnh_category"]))
    for column in ("cnh_valid_until", "ictp_valid_until"):
        if out.get(column) is not None:
            check_document_validity(out[column], name=column)
    code = out.get("municipality_code")
    if code is not None:
        found = session.execute(
            text("SELECT 1 FROM municipalities WHERE code = :c"), {"c": code}
        ).first()
        if found is None:
            msg = (
                f"'municipality_code' era {code!r}: município fora do cadastro; importe-o antes "
                "(pontual import municipalities)"
            )
            raise UnknownMunicipalityError(msg)
    return out


def create_driver(*, session: Session, driver_id: str, actor: str, **values: Any) -> None:
    """Register a driver (fields of :data:`DRIVER_FIELDS`; ``name`` required); audited.

    Raises
    ------
    DriverRecordError
        If the id is taken (or written otherwise: :func:`spelling_clash`), the name is empty,
        a field unknown or the CNH category invalid.
    UnknownMunicipalityError
        If ``municipality_code`` is not in the registry.
    fleet.dates.RegistryDateError
        If a validity is outside its range.
    """
    unknown = sorted(set(values) - set(DRIVER_FIELDS))
    if unknown:
        msg = f"campo desconhecido '{unknown[0]}'; esperado um de {', '.join(DRIVER_FIELDS)}"
        raise DriverRecordError(msg)
    if session.execute(
        text("SELECT 1 FROM drivers WHERE driver_id = :d"), {"d": driver_id}
    ).first():
        msg = f"condutor '{driver_id}' já está no cadastro"
        raise DriverRecordError(msg)
    if (clash := spelling_clash(session, "drivers", [driver_id])) is not None:
        raise DriverRecordError(clash)
    clean = _check_driver_values(session, {"name": None, **values})
    clean["synthetic"] = bool(clean.get("synthetic") or False)
    stored = {_DRIVER_STORED.get(k, k): v for k, v in clean.items()}
    columns = ", ".join(["driver_id", *stored])
    marks = ", ".join([":driver_id", *(f":{k}" for k in stored)])
    session.execute(
        text(f"INSERT INTO drivers ({columns}) VALUES ({marks})"),
        {"driver_id": driver_id, **stored},
    )
    _audit_import(
        session.connection(),
        actor=actor,
        entity="drivers",
        source=driver_id,
        details={"after": clean},
        action="create",
    )


def _changes(
    before: dict[str, Any], after: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the fields that change: their values before, and after."""
    changed = [k for k in after if before.get(k) != after[k]]
    return {k: before.get(k) for k in changed}, {k: after[k] for k in changed}


def update_driver(
    *, session: Session, driver_id: str, actor: str, reason: str | None = None, **changes: Any
) -> dict[str, Any]:
    """Change a driver's fields (:data:`DRIVER_FIELDS`); audited with before and after.

    Returns
    -------
    dict
        ``{"before": {...}, "after": {...}}`` of the fields that changed (empty: nothing did,
        nothing is written).

    Raises
    ------
    DriverRecordError
        If the driver is unknown, a field unknown, the name emptied or the category invalid.
    UnknownMunicipalityError, fleet.dates.RegistryDateError
        As :func:`create_driver`.
    """
    unknown = sorted(set(changes) - set(DRIVER_FIELDS))
    if unknown:
        msg = f"campo desconhecido '{unknown[0]}'; esperado um de {', '.join(DRIVER_FIELDS)}"
        raise DriverRecordError(msg)
    record = driver_record(session=session, driver_id=driver_id)
    if record is None:
        msg = f"condutor '{driver_id}' não está no cadastro"
        raise UnknownRecordError(msg)
    clean = _check_driver_values(session, changes)
    if "synthetic" in clean:
        clean["synthetic"] = bool(clean["synthetic"])
    before, after = _changes(record, clean)
    if not after:
        return {"before": {}, "after": {}}
    sets = ", ".join(f"{_DRIVER_STORED.get(k, k)} = :{k}" for k in after)
    session.execute(
        text(f"UPDATE drivers SET {sets} WHERE driver_id = :driver_id"),
        {"driver_id": driver_id, **after},
    )
    diff = {"before": before, "after": after}
    _audit_import(
        session.connection(),
        actor=actor,
        entity="drivers",
        source=driver_id,
        details=diff | {"reason": reason},
        action="update",
    )
    return diff


def update_driver_period(
    *,
    session: Session,
    driver_id: str,
    period_id: int,
    actor: str,
    reason: str | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """End or correct a CNH / ICTP status period (``status``, ``valid_from``, ``valid_until``).

    The period keeps its id and document; the audit log keeps its values before and after
    (nothing of the history is deleted). The rules are those of :func:`add_driver_period`.

    Returns
    -------
    dict
        ``{"before": {...}, "after": {...}}`` of the fields that changed.

    Raises
    ------
    DriverRecordError
        If the driver or the period (of that driver) is unknown, a field is not editable, or
        the period would break a rule (status, order, overlap).
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    allowed = ("status", "valid_from", "valid_until")
    unknown = sorted(set(changes) - set(allowed))
    if unknown:
        msg = f"campo não editável '{unknown[0]}'; esperado um de {', '.join(allowed)}"
        raise DriverRecordError(msg)
    _require_driver(session, driver_id)
    row = (
        session.execute(
            text(
                "SELECT document, status, valid_from, valid_until FROM driver_document_periods "
                "WHERE period_id = :p AND driver_id = :d"
            ),
            {"p": period_id, "d": driver_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        msg = f"período {period_id} não existe para o condutor '{driver_id}'"
        raise UnknownRecordError(msg)
    merged = dict(row) | changes
    _check_period(session, driver_id=driver_id, period_id=period_id, **merged)
    before, after = _changes(dict(row), changes)
    if not after:
        return {"before": {}, "after": {}}
    sets = ", ".join(f"{k} = :{k}" for k in after)
    session.execute(
        text(f"UPDATE driver_document_periods SET {sets} WHERE period_id = :period_id"),
        {"period_id": period_id, **after},
    )
    diff = {"before": before, "after": after}
    _audit_import(
        session.connection(),
        actor=actor,
        entity="driver_document_periods",
        source=driver_id,
        details={"period_id": period_id, "document": row["document"], **diff, "reason": reason},
        action="update",
    )
    return diff


def update_driver_link(
    *,
    session: Session,
    driver_id: str,
    link_id: int,
    actor: str,
    reason: str | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """End or correct a link to a prefixo (``role``, ``valid_from``, ``valid_until``); audited.

    The link keeps its id and prefixo (another prefixo is a new link); the audit log keeps its
    values before and after. The rules are those of :func:`add_driver_link`: dates in the
    registry range and in order, no second link of the driver to the prefixo on the same
    dates, no more auxiliares at once than the prefixo's law allows (:func:`auxiliary_caps`).

    Returns
    -------
    dict
        ``{"before": {...}, "after": {...}}`` of the fields that changed (``role`` as
        ``titular`` / ``auxiliar``).

    Raises
    ------
    DriverRecordError
        If the driver or the link (of that driver) is unknown, a field is not editable, the
        role invalid, the dates out of order or overlapping another link to the prefixo.
    AuxiliaryDriverLimitError
        If the prefixo would have more auxiliares at once than the law allows.
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    allowed = ("role", "valid_from", "valid_until")
    unknown = sorted(set(changes) - set(allowed))
    if unknown:
        msg = f"campo não editável '{unknown[0]}'; esperado um de {', '.join(allowed)}"
        raise DriverRecordError(msg)
    _require_driver(session, driver_id)
    row = (
        session.execute(
            text(
                "SELECT vehicle_id, role, valid_from, valid_until FROM driver_assignments "
                "WHERE assignment_id = :a AND driver_id = :d"
            ),
            {"a": link_id, "d": driver_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        msg = f"vínculo {link_id} não existe para o condutor '{driver_id}'"
        raise UnknownRecordError(msg)
    current = dict(row) | {"role": "titular" if row["role"] != "auxiliar" else "auxiliar"}
    merged = current | changes
    stored_role = _LINK_ROLE_STORED.get(merged["role"])
    if stored_role is None:
        msg = f"'role' era {merged['role']!r}; esperado um de titular, auxiliar"
        raise DriverRecordError(msg)
    if merged["valid_from"] is None:
        msg = "'valid_from' vazio; um vínculo tem data de início"
        raise DriverRecordError(msg)
    check_registry_date(merged["valid_from"], name="valid_from")
    check_optional_registry_date(merged["valid_until"], name="valid_until")
    _check_link_overlap(
        session,
        driver_id=driver_id,
        vehicle_id=row["vehicle_id"],
        valid_from=merged["valid_from"],
        valid_until=merged["valid_until"],
        link_id=link_id,
    )
    caps = auxiliary_caps(session, [row["vehicle_id"]])
    others = session.execute(
        text(
            "SELECT vehicle_id, role, valid_from, valid_until FROM driver_assignments "
            "WHERE vehicle_id = :v AND assignment_id <> :a"
        ),
        {"v": row["vehicle_id"], "a": link_id},
    ).all()
    check_link_limits(
        pd.DataFrame(
            [
                *map(tuple, others),
                (row["vehicle_id"], stored_role, merged["valid_from"], merged["valid_until"]),
            ],
            columns=["vehicle_id", "role", "valid_from", "valid_until"],
        ),
        caps=caps,
    )
    before, after = _changes(current, changes)
    if not after:
        return {"before": {}, "after": {}}
    stored = {k: (_LINK_ROLE_STORED[v] if k == "role" else v) for k, v in after.items()}
    sets = ", ".join(f"{k} = :{k}" for k in stored)
    session.execute(
        text(f"UPDATE driver_assignments SET {sets} WHERE assignment_id = :link_id"),
        {"link_id": link_id, **stored},
    )
    diff = {"before": before, "after": after}
    _audit_import(
        session.connection(),
        actor=actor,
        entity="driver_assignments",
        source=driver_id,
        details={"link_id": link_id, "vehicle_id": row["vehicle_id"], **diff, "reason": reason},
        action="update",
    )
    return diff


def update_vehicle_documents(
    *, session: Session, vehicle_id: str, actor: str, reason: str | None = None, **changes: Any
) -> dict[str, Any]:
    """Change a vehicle's document fields (:data:`VEHICLE_DOCUMENT_FIELDS`); audited.

    The fields are those of the fleet file, with its rules (:func:`fleet.loaders.
    check_vehicle_documents` on the stored values with the changes; dates in the registry
    range; the category one of :data:`fleet.vocabulary.SERVICE_CATEGORIES`). The audit log
    keeps the values before and after.

    Returns
    -------
    dict
        ``{"before": {...}, "after": {...}}`` of the fields that changed.

    Raises
    ------
    UnknownRecordError
        If the vehicle is unknown.
    FleetFileError
        If a field is not editable here or the values break a rule of the fleet file (naming
        the fields).
    fleet.dates.RegistryDateError
        If a date is outside the registry range.
    """
    from fleet.loaders import VEHICLE_YEAR_MAX, VEHICLE_YEAR_MIN, check_vehicle_documents
    from fleet.vocabulary import SERVICE_CATEGORIES

    unknown = sorted(set(changes) - set(VEHICLE_DOCUMENT_FIELDS))
    if unknown:
        msg = (
            f"campo não editável '{unknown[0]}'; esperado um de "
            f"{', '.join(VEHICLE_DOCUMENT_FIELDS)}"
        )
        raise FleetFileError(msg)
    columns = ", ".join(VEHICLE_DOCUMENT_FIELDS)
    row = (
        session.execute(
            text(f"SELECT {columns} FROM vehicles WHERE vehicle_id = :v"), {"v": vehicle_id}
        )
        .mappings()
        .first()
    )
    if row is None:
        msg = f"veículo '{vehicle_id}' não está na frota"
        raise UnknownRecordError(msg)
    for name, value in changes.items():
        if value is None:
            continue
        if name == "year":
            if not VEHICLE_YEAR_MIN <= int(value) <= VEHICLE_YEAR_MAX:
                msg = f"'year' era {value!r}; esperado um ano como 2019"
                raise FleetFileError(msg)
        elif name == "service_category":
            if value not in SERVICE_CATEGORIES:
                msg = (
                    f"'service_category' era {value!r}; esperado um de "
                    f"{', '.join(SERVICE_CATEGORIES)}"
                )
                raise FleetFileError(msg)
        elif name != "substituted_plate":
            check_field_date(value, name=name)
    check_vehicle_documents(dict(row) | changes)
    before, after = _changes(dict(row), changes)
    if not after:
        return {"before": {}, "after": {}}
    sets = ", ".join(f"{k} = :{k}" for k in after)
    session.execute(
        text(f"UPDATE vehicles SET {sets}, updated_at = now() WHERE vehicle_id = :vehicle_id"),
        {"vehicle_id": vehicle_id, **after},
    )
    diff = {"before": before, "after": after}
    _audit_import(
        session.connection(),
        actor=actor,
        entity="vehicles",
        source=vehicle_id,
        details=diff | {"reason": reason},
        action="update",
    )
    return diff
