"""Read stand registries: the contract's layers, Porto Alegre's and Porto's files.

Formats, recognised by their fields:

- the contract (GeoJSON/GeoPackage/CSV with ``stand_id``): :func:`stands.layers.read_stands`;
- Porto Alegre's open-data stands (GeoJSON Points with ``codigo``, ``nome``, ``coord_quality``):
  no radius in the file, so each usable point becomes a circle of ``DEFAULT_POINT_RADIUS_M``
  buffered in SIRGAS 2000 / UTM 22S (EPSG:31982); stands whose coordinate is null or not ``ok``
  are stored **without geometry** and listed in the report (fleet licences still name them);
- Porto's stands CSV (``ID, Descricao, Latitude, Longitude``), buffered in WGS 84 / UTM 29N
  (EPSG:32629) by :func:`stands.layers.read_porto_stands`.

The local UTM zone is picked by :func:`geo.crs.buffer_points_m` from the points' position.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from fleet.ids import registry_id_problem
from fleet.loaders import PORTO_ALEGRE
from geo.crs import WGS84, buffer_points_m
from stands._errors import (
    DuplicateStandIdError,
    InvalidAttributeError,
    MissingColumnError,
    StandsFormatError,
)
from stands.frames import CAPACITY, MUNICIPALITY, NAME, STAND_ID
from stands.layers import check_names, extinct_names, read_porto_stands, read_stands

DEFAULT_POINT_RADIUS_M = 30.0
OFFICIAL_STANDS = {
    PORTO_ALEGRE: Path(__file__).resolve().parents[1]
    / "data"
    / "brazil"
    / "taxi_stands"
    / "pontos_taxi_poa_2020-03-10.geojson"
}
"""The stands of a municipality published as open data and bundled (``data/``), by IBGE code."""
"""Radius (m) drawn around stands given as bare points without ``radius_m``."""

REGISTRY_COLUMNS = (
    STAND_ID, NAME, "address", "phone", "order_number", "kind", CAPACITY, MUNICIPALITY,
    "radius_m", "location_note", "geometry",
)  # fmt: skip
_NOTE_NULL = "coordenada ausente ou inválida no arquivo de origem"
_NOTE_PLACEHOLDER = "coordenada provisória (a mesma de outros pontos) no arquivo de origem"
_NOTE_EXTINCT = "ponto extinto segundo o nome no arquivo de origem"


def with_id_prefix(frame: gpd.GeoDataFrame, prefix: str) -> gpd.GeoDataFrame:
    """Prefix every ``stand_id`` (files whose ids collide with another city's: ``PT-``).

    Raises
    ------
    InvalidAttributeError
        A prefixed id the registry's id rule refuses (:func:`fleet.ids.registry_id_problem`:
        a character the URLs cannot hold, or too long), naming it.
    """
    if not prefix:
        return frame
    out = frame.copy()
    out[STAND_ID] = prefix + out[STAND_ID].astype(str)
    for stand_id in out[STAND_ID]:
        if (problem := registry_id_problem(stand_id)) is not None:
            msg = f"stand_id com o prefixo {prefix!r} ({stand_id[:80]!r}): {problem}"
            raise InvalidAttributeError(msg)
    return out


def read_stands_registry(
    path: str | Path,
    *,
    municipality: str | None = None,
    point_radius_m: float = DEFAULT_POINT_RADIUS_M,
) -> gpd.GeoDataFrame:
    """Read a stands file in any supported format into the registry frame.

    Parameters
    ----------
    path : str or pathlib.Path
        Contract layer, Porto Alegre's GeoJSON or Porto's CSV (see the module docstring).
    municipality : str, optional
        IBGE code for stands the file does not place (Porto Alegre's file: 4314902).
    point_radius_m : float
        Radius for point stands that carry none.

    Returns
    -------
    geopandas.GeoDataFrame
        ``REGISTRY_COLUMNS`` in EPSG:4326; ``geometry`` MultiPolygon or None (no usable
        location, explained in ``location_note``). ``attrs["notes"]`` lists, in pt-BR, what was
        stored differently from the file.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    StandsFormatError, MissingColumnError, DuplicateStandIdError
        On an unreadable file or bad content (the stands room's errors).
    """
    p = Path(path)
    if not p.is_file():
        msg = f"arquivo de pontos de táxi não encontrado: {p}"
        raise FileNotFoundError(msg)
    suffix = p.suffix.lower()
    if (
        suffix in (".geojson", ".json")
        and _geojson_has(p, "codigo")
        and not _geojson_has(p, STAND_ID)
    ):
        frame = read_poa_stands(p, radius_m=point_radius_m, municipality=municipality)
    elif suffix == ".csv" and _is_porto_csv(p):
        frame = _registry(read_porto_stands(p, radius_m=point_radius_m), radius_m=point_radius_m)
        frame[MUNICIPALITY] = municipality
    else:
        contract = read_stands(p, default_radius_m=point_radius_m)
        frame = _registry(contract, radius_m=_contract_radii(p, contract, point_radius_m))
        if municipality is not None:
            frame[MUNICIPALITY] = frame[MUNICIPALITY].where(
                frame[MUNICIPALITY].notna(), municipality
            )
    frame.attrs.setdefault("notes", [])
    return frame


def _first_properties(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        msg = f"'{path.name}' não é um GeoJSON válido: {exc}"
        raise StandsFormatError(msg) from exc
    features = doc.get("features") if isinstance(doc, dict) else None
    if not features:
        return {}
    props = features[0].get("properties") or {}
    return props if isinstance(props, dict) else {}


def _geojson_has(path: Path, key: str) -> bool:
    return key in _first_properties(path)


def _is_porto_csv(path: Path) -> bool:
    header = pd.read_csv(path, nrows=0, encoding="utf-8-sig").columns
    return {"ID", "Descricao", "Latitude", "Longitude"} <= {c.strip() for c in header}


def _contract_radii(path: Path, frame: gpd.GeoDataFrame, default: float) -> list[float | None]:
    """Radius of each contract stand given as a point (from the GeoJSON), else None."""
    if path.suffix.lower() not in (".geojson", ".json"):
        return [None] * len(frame)
    doc = json.loads(path.read_text(encoding="utf-8-sig"))
    by_id: dict[str, float | None] = {}
    for feat in doc.get("features", []):
        props = feat.get("properties") or {}
        geom = feat.get("geometry") or {}
        if geom.get("type") == "Point":
            r = props.get("radius_m")
            by_id[str(props.get(STAND_ID)).strip()] = float(r) if r not in (None, "") else default
    return [by_id.get(sid) for sid in frame[STAND_ID]]


def _registry(frame: gpd.GeoDataFrame, *, radius_m: Any) -> gpd.GeoDataFrame:
    out = gpd.GeoDataFrame(
        {
            STAND_ID: frame[STAND_ID].astype(object),
            NAME: frame[NAME].astype(object).where(frame[NAME].notna(), None),
            "address": None,
            "phone": None,
            "order_number": pd.array([pd.NA] * len(frame), dtype="Int64"),
            "kind": None,
            CAPACITY: frame[CAPACITY],
            MUNICIPALITY: frame[MUNICIPALITY]
            .astype(object)
            .where(frame[MUNICIPALITY].notna(), None),
            "radius_m": radius_m,
            "location_note": None,
        },
        geometry=_multi(frame.geometry.to_numpy()),
        crs=WGS84,
    )
    return out[list(REGISTRY_COLUMNS)]


def _multi(geoms: np.ndarray) -> list[Any]:
    return [
        None
        if g is None or shapely.is_missing(g)
        else (shapely.MultiPolygon([g]) if shapely.get_type_id(g) == 3 else g)
        for g in geoms
    ]


def read_poa_stands(
    path: str | Path,
    *,
    radius_m: float = DEFAULT_POINT_RADIUS_M,
    municipality: str | None = None,
) -> gpd.GeoDataFrame:
    """Read Porto Alegre's stands GeoJSON (DataPoa ``pontos_taxi``) into the registry frame.

    Parameters
    ----------
    path : str or pathlib.Path
        E.g. ``data/brazil/taxi_stands/pontos_taxi_poa_2020-03-10.geojson``.
    radius_m : float
        Radius of the circle drawn around each usable point, in metres (the file has none).
    municipality : str, optional
        IBGE code; defaults to Porto Alegre's 4314902.

    Returns
    -------
    geopandas.GeoDataFrame
        One row per feature: ``stand_id`` = ``codigo``, ``name`` = ``nome``, ``address`` from
        ``logradouro`` and ``numero``, ``phone`` = ``telefone``; geometry None where the point is
        null, ``coord_quality`` is not ``ok`` or the name says the stand is extinct ("Extinto:
        …", :func:`stands.layers.extinct_names`) (``location_note`` says why, ``attrs["notes"]``
        lists them).

    Raises
    ------
    MissingColumnError
        If ``codigo`` or ``nome`` is missing.
    DuplicateStandIdError
        If a ``codigo`` repeats.
    InvalidAttributeError
        If a ``nome`` holds a control character or a bidirectional override.
    """
    raw = gpd.read_file(path)
    name = Path(path).name
    missing = [c for c in ("codigo", "nome") if c not in raw.columns]
    if missing:
        msg = f"'{name}': faltam as propriedades {', '.join(missing)}"
        raise MissingColumnError(msg)
    ids = raw["codigo"].astype("Int64").astype(str).str.strip()
    dup = ids.duplicated()
    if dup.any():
        msg = f"'{name}': codigo repetido: {ids[dup].iloc[0]}"
        raise DuplicateStandIdError(msg)
    quality = (
        raw["coord_quality"].fillna("ok").astype(str)
        if "coord_quality" in raw.columns
        else pd.Series("ok", index=raw.index)
    )
    geoms = raw.geometry.to_numpy()
    null = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    extinct = ~null & extinct_names(raw["nome"].to_numpy(dtype=object))
    usable = ~null & (quality == "ok").to_numpy() & ~extinct
    polygons: list[Any] = [None] * len(raw)
    if usable.any():
        pts = gpd.GeoDataFrame(geometry=geoms[usable], crs=WGS84)
        buffered = buffer_points_m(pts, radius_m).geometry.to_numpy()
        for i, g in zip(np.flatnonzero(usable), _multi(buffered), strict=True):
            polygons[int(i)] = g
    notes_col = [
        _NOTE_NULL if is_null else _NOTE_EXTINCT if gone else None if ok else _NOTE_PLACEHOLDER
        for is_null, gone, ok in zip(null, extinct, usable, strict=True)
    ]

    def text_col(column: str) -> list[str | None]:
        if column not in raw.columns:
            return [None] * len(raw)
        values = (None if pd.isna(v) else str(v).strip() for v in raw[column])
        return [v if v else None for v in values]

    names = text_col("nome")
    check_names(names, ids=ids.tolist(), source=name, unit="feição")
    street, number = text_col("logradouro"), text_col("numero")
    address = [
        None if s is None else (s if n in (None, "0") else f"{s}, {n}")
        for s, n in zip(street, number, strict=True)
    ]
    frame = gpd.GeoDataFrame(
        {
            STAND_ID: ids.astype(object),
            NAME: names,
            "address": address,
            "phone": text_col("telefone"),
            "order_number": pd.array([pd.NA] * len(raw), dtype="Int64"),
            "kind": None,  # the file mixes pontos fixos and livres without saying which
            CAPACITY: pd.array([pd.NA] * len(raw), dtype="Int64"),
            MUNICIPALITY: municipality or PORTO_ALEGRE,
            "radius_m": np.where(usable, radius_m, np.nan),
            "location_note": notes_col,
        },
        geometry=polygons,
        crs=WGS84,
    )[list(REGISTRY_COLUMNS)]
    notes = []
    if null.any():
        notes.append(f"{int(null.sum())} pontos sem coordenada (sem geometria): " + _ids(ids, null))
    placeholder = ~null & ~usable & ~extinct
    if placeholder.any():
        notes.append(
            f"{int(placeholder.sum())} pontos com coordenada provisória (sem geometria): "
            + _ids(ids, placeholder)
        )
    if extinct.any():
        n = int(extinct.sum())
        plural = "pontos extintos" if n > 1 else "ponto extinto"
        notes.append(f"{n} {plural} (sem geometria): " + _ids(ids, extinct))
    frame.attrs["notes"] = notes
    return frame


def _ids(ids: pd.Series, mask: np.ndarray) -> str:
    return ", ".join(sorted(ids[mask].tolist(), key=lambda s: (len(s), s)))


def official_stands(municipality: str | None) -> gpd.GeoDataFrame | None:
    """Return the bundled open-data stands of ``municipality`` that have a usable location.

    None when none are bundled (:data:`OFFICIAL_STANDS`).
    """
    path = OFFICIAL_STANDS.get(municipality or "")
    if path is None or not path.is_file():
        return None
    frame = read_poa_stands(path, municipality=municipality)
    return frame.loc[frame.geometry.notna()].reset_index(drop=True)
