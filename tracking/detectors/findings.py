"""The findings frame: what every detector returns (the ``findings.geojson`` contract).

A findings frame is a GeoDataFrame in EPSG:4326 with the columns :data:`FINDING_COLUMNS`:
``finding_id`` str (deterministic, see :func:`finding_ids`), ``kind`` (one of :data:`KINDS`),
``vehicle_id`` str or None, ``stand_id`` str or None, ``started_at``/``ended_at``
datetime64[ns, UTC], ``confidence`` float64 in [0, 1], ``details`` dict (JSON-serialisable: the
fixes used — their timestamps, positions and source rows —, the distances and times measured, and
every threshold each was compared with), ``geometry`` (Point, LineString or Polygon; may be None).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import orjson
import pandas as pd
import shapely
import shapely.geometry

from tracking.arrays import epoch_ns, iso_utc_many

KINDS = (
    "unlicensed_stand_use",
    "habitual_absence",
    "illegal_stand_formation",
    "longer_route",
    "tracking_gap",
    "gps_anomaly",
    "operating_while_barred",
    "inactivity",
    "outside_municipality",
    "queue_jump",
    "flag2_misuse",
    "driver_not_allowed",
)
KIND_NAMES = {
    "unlicensed_stand_use": "Embarque em ponto sem licença",
    "habitual_absence": "Ausência habitual do ponto",
    "illegal_stand_formation": "Formação de ponto irregular",
    "longer_route": "Percurso mais longo",
    "tracking_gap": "Falha de rastreamento",
    "gps_anomaly": "Salto de GPS impossível",
    "operating_while_barred": "Operação irregular (situação/documentos)",
    "inactivity": "Inatividade",
    "outside_municipality": "Embarque fora do município",
    "queue_jump": "Desrespeito à fila",
    "flag2_misuse": "Bandeira 2 indevida",
    "driver_not_allowed": "Condutor não autorizado no prefixo",
}
"""pt-BR name of each kind, for people (outputs for people; files keep the codes)."""


PROVISIONAL = "provisional"
"""``details`` key (True) of a live finding announced before its day closed
(:func:`tracking.detectors.kernel.open_findings`): later versions replace it; never proposed."""
WITHDRAWN = "withdrawn"
"""``details`` key (True) of a provisional finding whose closed day did not confirm it (the
registry changed that day: a vistoria done, a suspension revised), or of a live tracking gap
that fixes arriving later fall inside (:data:`FILLED_AT`); never proposed."""
LASTED_S = "lasted_s"
"""``details`` key: how long the finding's condition lasted, where that is less than its span
(a ``gps_anomaly`` without the silences in it); a rulebook's ``min_duration_s`` reads it."""
FILLED_AT = "filled_at"
"""``details`` key of a withdrawn tracking gap: the earliest fix inside it, which arrived after
the gap was emitted (a tracker's offline buffer sent behind its live fix)."""

LIMIT_GATED_REASONS = {
    ("operating_while_barred", "vehicle_over_age"): "max_vehicle_age_years",
    ("operating_while_barred", "inspection_overdue"): "max_inspection_age_days",
    ("operating_while_barred", "substitution_expired"): "max_substitution_days",
    ("driver_not_allowed", "auxiliary_only"): "auxiliary_only_min_days",
    ("driver_not_allowed", "too_many_auxiliaries"): "max_auxiliaries",
}
"""Reasons judged only when their limit is given (by the rulebook's law limits or
``--thresholds``): ``(kind, details.reason) → the detector's keyword``; without it the reason
never occurs."""


PATTERN_NAMES = {
    ("gps_anomaly", "two_tracks"): "Dois rastreadores no mesmo prefixo",
}
"""pt-BR name of a finding whose ``details.pattern`` is not what its kind's name says."""
SUBTYPE_NAMES = {
    ("unlicensed_stand_use", "accessible_wait"): "Espera de táxi acessível em ponto sem licença",
    ("unlicensed_stand_use", "suspended_use"): "Uso de ponto durante suspensão",
}
"""pt-BR name of a finding whose ``details.subtype`` is not what its kind's name says (an
accessible taxi's wait is no boarding)."""
FLAG_NAMES = {
    ("tracking_gap", "still"): "Silêncio do rastreador com o veículo parado",
    ("tracking_gap", "after_ride"): "Silêncio do rastreador depois da corrida",
    ("flag2_misuse", "left_municipality"): "Bandeira 2 em corrida para fora do município",
}
"""pt-BR name of a finding whose ``details`` flag (true) says it is not what its kind's name
says: the sub-cases a rulebook lists for review, named so that an alert does not read as the
infraction."""


def kind_name(kind: str) -> str:
    """Return the pt-BR name of a finding kind (the code itself when unknown)."""
    return KIND_NAMES.get(kind, kind)


def kind_filter_name(kind: str) -> str:
    """Return a kind's pt-BR name as a filter offers it: with the other names its findings take.

    "Embarque em ponto sem licença (também: Espera de táxi acessível em ponto sem licença; Uso
    de ponto durante suspensão)": choosing it lists all three.
    """
    others = [
        name
        for names in (PATTERN_NAMES, SUBTYPE_NAMES, FLAG_NAMES)
        for (k, _), name in names.items()
        if k == kind
    ]
    return kind_name(kind) + (f" (também: {'; '.join(others)})" if others else "")


def finding_name(kind: str, details: Mapping[str, Any] | None) -> str:
    """Return the pt-BR name of one finding: its pattern's, subtype's, flag's or its kind's.

    :data:`PATTERN_NAMES` first, then :data:`SUBTYPE_NAMES`, :data:`FLAG_NAMES` and
    :func:`kind_name`.
    """
    details = details or {}
    flagged = (name for (k, flag), name in FLAG_NAMES.items() if k == kind and details.get(flag))
    pattern = PATTERN_NAMES.get((kind, str(details.get("pattern"))))
    subtype = SUBTYPE_NAMES.get((kind, str(details.get("subtype"))))
    return pattern or subtype or next(flagged, None) or kind_name(kind)


def findings_name(kind: str, details: Sequence[Mapping[str, Any] | None]) -> str:
    """Return the pt-BR name of findings of one kind taken together (a proposal's).

    Their :func:`finding_name` when they all share it, else the kind's.
    """
    names = {finding_name(kind, d) for d in details}
    return names.pop() if len(names) == 1 else kind_name(kind)


FINDING_COLUMNS = (
    "finding_id",
    "kind",
    "vehicle_id",
    "stand_id",
    "started_at",
    "ended_at",
    "confidence",
    "details",
    "geometry",
)
_UTC = pd.DatetimeTZDtype("ns", "UTC")
_ID_STAMP = "%Y%m%dT%H%M%S.%fZ"


class FindingsFrameError(ValueError):
    """A findings frame breaks the contract."""


def empty_findings() -> gpd.GeoDataFrame:
    """Return an empty, correctly typed findings frame (a new one each call)."""
    return _empty_findings().copy()


@functools.cache
def _empty_findings() -> gpd.GeoDataFrame:
    frame = pd.DataFrame(
        {
            "finding_id": pd.Series([], dtype=object),
            "kind": pd.Series([], dtype=object),
            "vehicle_id": pd.Series([], dtype=object),
            "stand_id": pd.Series([], dtype=object),
            "started_at": pd.Series([], dtype=_UTC),
            "ended_at": pd.Series([], dtype=_UTC),
            "confidence": pd.Series([], dtype="float64"),
            "details": pd.Series([], dtype=object),
        }
    )
    return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries([], crs=4326), crs=4326)


def finding_id(kind: str, vehicle_id: str | None, stand_id: str | None, started_at: Any) -> str:
    """Deterministic id: the same finding gets the same id in batch, live and distributed runs.

    Parameters
    ----------
    kind : str
        Finding kind.
    vehicle_id, stand_id : str or None
        Who and where (None when not applicable).
    started_at : timestamp-like
        Start of the finding's interval (tz-aware).
    """
    stamp = pd.Timestamp(started_at).tz_convert("UTC").strftime(_ID_STAMP)
    key = f"{kind}|{vehicle_id or ''}|{stand_id or ''}|{stamp}"
    return f"{kind}-{hashlib.sha1(key.encode()).hexdigest()[:16]}"


def _finding_ids(frame: pd.DataFrame) -> list[str]:
    """:func:`finding_id` of every row (the stamps formatted at once)."""
    started = frame["started_at"]
    if started.isna().any():  # let finding_id raise as it does on its own
        stamps = [pd.Timestamp(t).tz_convert("UTC").strftime(_ID_STAMP) for t in started]
    else:
        stamps = started.dt.tz_convert("UTC").dt.strftime(_ID_STAMP).tolist()
    out = []
    for kind, vehicle_id, stand_id, stamp in zip(
        frame["kind"], frame["vehicle_id"], frame["stand_id"], stamps, strict=True
    ):
        key = f"{kind}|{vehicle_id or ''}|{stand_id or ''}|{stamp}"
        out.append(f"{kind}-{hashlib.sha1(key.encode()).hexdigest()[:16]}")
    return out


def make_findings(rows: pd.DataFrame, geometry: Iterable[Any] | None = None) -> gpd.GeoDataFrame:
    """Build a validated, sorted findings frame (``finding_id`` is derived).

    ``rows`` holds ``kind, vehicle_id, stand_id, started_at, ended_at, confidence, details``;
    the instants tz-aware or as epoch nanoseconds.

    Parameters
    ----------
    rows : pandas.DataFrame
        One row per finding.
    geometry : iterable of shapely geometries, optional
        One per row (EPSG:4326); or one ``(lon, lat)`` tuple per row, for points made at once
        (a ``shapely.Point`` apiece costs ~3 µs: 0.2 s for the visit kinds' findings at 10M).
    """
    if rows.empty:
        return empty_findings()
    frame = pd.DataFrame(
        {
            "kind": rows["kind"],
            "vehicle_id": _objects_or_none(rows["vehicle_id"]),
            "stand_id": _objects_or_none(rows["stand_id"]),
            "started_at": pd.to_datetime(rows["started_at"], utc=True).astype(_UTC),
            "ended_at": pd.to_datetime(rows["ended_at"], utc=True).astype(_UTC),
            "confidence": rows["confidence"].astype("float64"),
            "details": rows["details"],
        }
    )
    ids = _finding_ids(frame)
    frame.insert(0, "finding_id", ids)
    shapes: Any = list(geometry) if geometry is not None else [None] * len(frame)
    if shapes and all(type(g) is tuple for g in shapes):
        shapes = shapely.points(np.asarray(shapes, dtype=np.float64))
    out = gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(shapes, index=frame.index), crs=4326)
    validate_findings(out)
    order = np.lexsort(
        (
            np.asarray(ids, dtype=object),
            frame["started_at"].array.asi8,
            frame["kind"].to_numpy(dtype=object),
        )
    )
    return out.take(order).reset_index(drop=True)


def _objects_or_none(col: pd.Series) -> pd.Series:
    return col.astype(object).where(col.notna(), None)


def validate_findings(findings: pd.DataFrame) -> None:
    """Raise :class:`FindingsFrameError` if ``findings`` breaks the contract."""
    missing = [c for c in FINDING_COLUMNS if c not in findings.columns]
    if missing:
        msg = f"achados sem a(s) coluna(s) {', '.join(missing)}"
        raise FindingsFrameError(msg)
    bad = set(findings["kind"]) - set(KINDS)
    if bad:
        msg = f"'kind' era {sorted(bad)[0]!r}; esperado um de {', '.join(KINDS)}"
        raise FindingsFrameError(msg)
    conf = findings["confidence"].to_numpy(dtype="float64")
    if len(conf) and (np.isnan(conf).any() or (conf < 0).any() or (conf > 1).any()):
        msg = "'confidence' deve estar entre 0 e 1"
        raise FindingsFrameError(msg)
    if findings["finding_id"].duplicated().any():
        dup = findings.loc[findings["finding_id"].duplicated(), "finding_id"].iloc[0]
        msg = f"finding_id repetido: {dup!r}"
        raise FindingsFrameError(msg)


def jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data (timestamps as ISO UTC, NaN as None, numpy unboxed)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, pd.Timestamp):
        return (
            value.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
            if value.tzinfo
            else value.isoformat()
        )
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    return value


def _plain(value: Any) -> Any:
    """JSON encoder hook: the values :func:`jsonable` converts that JSON lacks (else TypeError)."""
    if isinstance(value, pd.Timestamp | np.floating):
        return jsonable(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


# numpy values as JSON has them (NaN and infinities as null, as jsonable makes NaN); instants
# through _plain (ISO UTC, as jsonable writes them). Anything orjson refuses (a key that is not
# text, an integer beyond 64 bits) takes the jsonable path.
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_PASSTHROUGH_DATETIME


def _utc_texts(col: pd.Series) -> list[Any]:
    """``jsonable`` of each instant of a column (at once when tz-aware and complete)."""
    if isinstance(col.dtype, pd.DatetimeTZDtype) and not col.isna().any():
        return list(iso_utc_many(epoch_ns(col)))
    return [jsonable(v) for v in col]


def _geometries(geoms: gpd.GeoSeries) -> list[Any]:
    """``__geo_interface__`` of each geometry (None for a missing or empty one)."""
    values = np.asarray(geoms.array, dtype=object)
    out: list[Any] = [None] * len(values)
    type_id = shapely.get_type_id(values)
    empty = shapely.is_empty(values)
    points = np.flatnonzero((type_id == 0) & ~empty & ~shapely.has_z(values))
    xy = shapely.get_coordinates(values[points]).tolist()
    for k, (x, y) in zip(points.tolist(), xy, strict=True):
        out[k] = {"type": "Point", "coordinates": (x, y)}
    for k in np.flatnonzero((type_id > 0) & ~empty).tolist():
        out[k] = values[k].__geo_interface__
    for k in np.flatnonzero((type_id == 0) & ~empty & shapely.has_z(values)).tolist():
        out[k] = values[k].__geo_interface__
    return out


def with_details(findings: gpd.GeoDataFrame, keys: frozenset[str]) -> gpd.GeoDataFrame:
    """Return ``findings`` with only ``keys`` kept in each ``details``."""
    out = findings.copy(deep=False)
    out["details"] = [
        {k: v for k, v in d.items() if k in keys} if isinstance(d, dict) else d
        for d in findings["details"].tolist()
    ]
    return out


def feature_texts(findings: gpd.GeoDataFrame) -> Iterator[bytes]:
    """Yield each finding as the GeoJSON Feature text ``findings.geojson`` has, in frame order.

    The frame is validated at the call, before the first text.
    """
    validate_findings(findings)
    columns = zip(
        _geometries(findings.geometry),
        findings["finding_id"].tolist(),
        findings["kind"].tolist(),
        findings["vehicle_id"].tolist(),
        findings["stand_id"].tolist(),
        _utc_texts(findings["started_at"]),
        _utc_texts(findings["ended_at"]),
        findings["confidence"].astype("float64").tolist(),
        findings["details"].tolist(),
        strict=True,
    )
    return _feature_texts(columns)


def _feature_texts(columns: Iterator[tuple[Any, ...]]) -> Iterator[bytes]:
    for geom, fid, kind, vehicle, stand, start, end, conf, details in columns:
        feature: dict[str, Any] = {
            "type": "Feature",
            "geometry": geom,
            "properties": {
                "finding_id": fid,
                "kind": kind,
                "vehicle_id": vehicle,
                "stand_id": stand,
                "started_at": start,
                "ended_at": end,
                "confidence": conf,
                "details": details,
            },
        }
        try:
            text = orjson.dumps(feature, default=_plain, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError included
            feature["properties"]["details"] = jsonable(details)
            text = json.dumps(feature, ensure_ascii=False, separators=(",", ":")).encode()
        yield text


def write_feature_collection(features: Iterable[bytes], path: Path) -> None:
    """Write a FeatureCollection of Feature texts (:func:`feature_texts`) as they come."""
    with path.open("wb") as fh:
        fh.write(b'{"type":"FeatureCollection","features":[')
        for k, text in enumerate(features):
            fh.write(b"," + text if k else text)
        fh.write(b"]}")


def write_findings_geojson(findings: gpd.GeoDataFrame, path: Path) -> None:
    """Write ``findings.geojson``: a FeatureCollection with the contract's properties.

    Parameters
    ----------
    findings : geopandas.GeoDataFrame
        A findings frame.
    path : pathlib.Path
        Destination file.
    """
    write_feature_collection(feature_texts(findings), path)


def read_findings_geojson(path: Path) -> gpd.GeoDataFrame:
    """Read a ``findings.geojson`` back into a validated findings frame.

    Raises
    ------
    FindingsFrameError
        The file is not a FeatureCollection of findings (the message names what is missing).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        features = data["features"]
        rows = [{**f["properties"], "geometry": f.get("geometry")} for f in features]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        msg = f"{path.name}: não é um findings.geojson (FeatureCollection de achados): {exc!r}"
        raise FindingsFrameError(msg) from None
    if not rows:
        return empty_findings()
    frame = pd.DataFrame(rows)
    missing = [c for c in FINDING_COLUMNS if c not in frame.columns]
    if missing:
        msg = f"{path.name}: faltam as propriedades {', '.join(missing)}"
        raise FindingsFrameError(msg)
    geometry = [shapely.geometry.shape(g) if g else None for g in frame["geometry"]]
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True).astype(_UTC)
    frame["confidence"] = frame["confidence"].astype("float64")
    frame["vehicle_id"] = (
        frame["vehicle_id"].astype(object).where(frame["vehicle_id"].notna(), None)
    )
    frame["stand_id"] = frame["stand_id"].astype(object).where(frame["stand_id"].notna(), None)
    out = gpd.GeoDataFrame(
        frame.drop(columns="geometry"), geometry=gpd.GeoSeries(geometry, crs=4326), crs=4326
    )[list(FINDING_COLUMNS)]
    validate_findings(out)
    return out
