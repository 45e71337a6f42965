"""The findings frame: what every detector returns (the ``findings.geojson`` contract).

A findings frame is a GeoDataFrame in EPSG:4326 with the columns :data:`FINDING_COLUMNS`:
``finding_id`` str (deterministic, see :func:`finding_ids`), ``kind`` (one of :data:`KINDS`),
``vehicle_id`` str or None, ``stand_id`` str or None, ``started_at``/``ended_at``
datetime64[ns, UTC], ``confidence`` float64 in [0, 1], ``details`` dict (JSON-serialisable: the
fixes used — their timestamps, positions and source rows —, the distances and times measured, and
every threshold each was compared with), ``geometry`` (Point, LineString or Polygon; may be None).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
import shapely.geometry

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
)
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


class FindingsFrameError(ValueError):
    """A findings frame breaks the contract."""


def empty_findings() -> gpd.GeoDataFrame:
    """Return an empty, correctly typed findings frame."""
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
    stamp = pd.Timestamp(started_at).tz_convert("UTC").strftime("%Y%m%dT%H%M%S.%fZ")
    key = f"{kind}|{vehicle_id or ''}|{stand_id or ''}|{stamp}"
    return f"{kind}-{hashlib.sha1(key.encode()).hexdigest()[:16]}"


def make_findings(rows: pd.DataFrame, geometry: Iterable[Any] | None = None) -> gpd.GeoDataFrame:
    """Build a validated, sorted findings frame (``finding_id`` is derived).

    ``rows`` holds ``kind, vehicle_id, stand_id, started_at, ended_at, confidence, details``.

    Parameters
    ----------
    rows : pandas.DataFrame
        One row per finding.
    geometry : iterable of shapely geometries, optional
        One per row (EPSG:4326).
    """
    if rows.empty:
        return empty_findings()
    frame = rows.copy()
    frame["vehicle_id"] = (
        frame["vehicle_id"].astype(object).where(frame["vehicle_id"].notna(), None)
    )
    frame["stand_id"] = frame["stand_id"].astype(object).where(frame["stand_id"].notna(), None)
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True).astype(_UTC)
    frame["ended_at"] = pd.to_datetime(frame["ended_at"], utc=True).astype(_UTC)
    frame["confidence"] = frame["confidence"].astype("float64")
    frame["finding_id"] = [
        finding_id(k, v, sid, t)
        for k, v, sid, t in zip(
            frame["kind"], frame["vehicle_id"], frame["stand_id"], frame["started_at"], strict=True
        )
    ]
    geo = gpd.GeoSeries(
        list(geometry) if geometry is not None else [None] * len(frame), index=frame.index, crs=4326
    )
    out = gpd.GeoDataFrame(frame, geometry=geo, crs=4326)[list(FINDING_COLUMNS)]
    validate_findings(out)
    return out.sort_values(["kind", "started_at", "finding_id"]).reset_index(drop=True)


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


def write_findings_geojson(findings: gpd.GeoDataFrame, path: Path) -> None:
    """Write ``findings.geojson``: a FeatureCollection with the contract's properties.

    Parameters
    ----------
    findings : geopandas.GeoDataFrame
        A findings frame.
    path : pathlib.Path
        Destination file.
    """
    validate_findings(findings)
    features = []
    for row in findings.itertuples(index=False):
        geom = row.geometry
        features.append(
            {
                "type": "Feature",
                "geometry": None if geom is None or geom.is_empty else geom.__geo_interface__,
                "properties": {
                    "finding_id": row.finding_id,
                    "kind": row.kind,
                    "vehicle_id": row.vehicle_id,
                    "stand_id": row.stand_id,
                    "started_at": jsonable(row.started_at),
                    "ended_at": jsonable(row.ended_at),
                    "confidence": float(row.confidence),
                    "details": jsonable(row.details),
                },
            }
        )
    path.write_text(
        json.dumps({"type": "FeatureCollection", "features": features}, ensure_ascii=False),
        encoding="utf-8",
    )


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
