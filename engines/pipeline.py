"""The one place that wires ingest, stand matching, visits, trips and stops (batch, in memory).

``pontual analyze`` and ``pontual demo`` call :func:`analyze_pings`; nothing here touches a
database or reads settings: thresholds come in as :class:`AnalysisParams`.
"""

from __future__ import annotations

import datetime as dt
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from fleet.ids import id_form
from geo.calendar import DEFAULT_TIMEZONE
from geo.cover import DEFAULT_RESOLUTION, build_stand_cover, match_stands
from geo.crs import haversine_m
from geo.roads import RoadGraph
from stands.licences import licence_frame_from_fleet, mark_unplaced_licences, unknown_licences
from stands.occupancy import OCCUPANCY_COLUMNS, occupancy
from stands.visits import (
    BOARDED_AT,
    DEFAULT_BOARDING_GRACE_M,
    DEFAULT_BOARDING_GRACE_S,
    DEFAULT_MIN_DWELL_S,
    detect_visits,
)
from tracking import frames as fr
from tracking.arrays import epoch_ns, iso_utc_many
from tracking.detectors.detect import DetectorInputs, Thresholds, run_detectors
from tracking.detectors.findings import (
    KINDS,
    empty_findings,
    feature_texts,
    with_details,
    write_feature_collection,
    write_findings_geojson,
)
from tracking.ingest import rejected_order, write_rejected
from tracking.stops import detect_stops
from tracking.trips import detect_trips
from tracking.validate import MAX_SPEED_KMH

Progress = Callable[[str], None]
"""Called with a pt-BR label as each stage of a run starts."""

OUTPUT_FILES = (
    "findings.geojson",
    "stand_visits.csv",
    "trips.csv",
    "rejected.csv",
    "occupancy.csv",
    "summary.json",
)


@dataclass(frozen=True, kw_only=True)
class AnalysisParams:
    """Thresholds of one analysis run; every value is echoed in ``summary.json``."""

    h3_resolution: int = DEFAULT_RESOLUTION
    max_speed_kmh: float = MAX_SPEED_KMH
    trip_max_gap_s: float = 300.0
    visit_exit_grace_s: float = 60.0
    visit_exit_grace_m: float = 30.0
    visit_near_exit_grace_s: float = 900.0
    visit_min_dwell_s: float = DEFAULT_MIN_DWELL_S
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M
    stop_max_diameter_m: float = 50.0
    stop_min_duration_s: float = 180.0
    occupancy_bucket: str = "15min"
    timezone: str = DEFAULT_TIMEZONE


@dataclass(kw_only=True)
class AnalysisResult:
    """Frames produced by :func:`analyze_pings` (plain data; written by :func:`write_outputs`)."""

    pings: pd.DataFrame
    rejected: pd.DataFrame
    stands: gpd.GeoDataFrame
    visits: pd.DataFrame
    trips: pd.DataFrame
    stops: pd.DataFrame
    occupancy: pd.DataFrame
    findings: gpd.GeoDataFrame = field(default_factory=empty_findings)
    skipped_detectors: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, tuple[Path, ...]] = field(default_factory=dict)
    """Output files an engine's workers wrote as parts, by file name (:func:`write_outputs`
    merges them): with ``findings.geojson`` (:func:`write_findings_part`), ``findings`` may
    hold only the details its readers need; with ``stand_visits.csv`` or ``trips.csv``
    (:func:`write_csv_part`), ``visits`` or ``trips`` is empty and ``summary`` counts the
    parts' rows."""
    written: tuple[str, ...] = ()
    """Output files an engine's workers already wrote in the output folder, merged from their
    parts (:func:`merge_part_file`): :func:`write_outputs` leaves them."""
    id_checks: dict[str, frozenset[str]] = field(default_factory=dict)
    """The ids of the valid fixes the registries lack (:func:`id_checks`)."""
    map_sample: tuple[gpd.GeoDataFrame, dict[str, int]] | None = None
    """The findings the map draws and the count of each kind's (:func:`maps.sample.merge_samples`),
    when an engine's workers sampled them; None: the map samples ``findings``."""


def no_progress(_: str) -> None:
    """Report nothing: the default :data:`Progress` of the engines."""
    return None


def cut_at_as_of(pings: pd.DataFrame, *, as_of: dt.date, timezone: str) -> pd.DataFrame:
    """Keep the fixes up to the end of ``as_of`` (inclusive) in ``timezone``.

    The engines count the fixes left out (``summary.json``'s ``pings_after_as_of``).

    Parameters
    ----------
    pings : pandas.DataFrame
        Valid pings.
    as_of : datetime.date
        Last local day analysed.
    timezone : str
        IANA zone of the local day.
    """
    end = pd.Timestamp(as_of + dt.timedelta(days=1), tz=ZoneInfo(timezone)).tz_convert("UTC")
    keep = pings[fr.TIMESTAMP] < end
    return pings if keep.all() else pings.loc[keep].reset_index(drop=True)


def pickup_stands(trips: pd.DataFrame, visits: pd.DataFrame, stands: gpd.GeoDataFrame) -> pd.Series:
    """Return the stand each trip was boarded at (None if none), from the boarded visits.

    A trip start may mark visits of overlapping stands; the stand whose representative point is
    nearest the pickup fix wins.

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips (``TRIP_COLUMNS``).
    visits : pandas.DataFrame
        Visits from :func:`stands.visits.detect_visits` (with ``boarded_at``).
    stands : geopandas.GeoDataFrame
        The stands frame the visits refer to.
    """
    out = pd.Series([None] * len(trips), index=trips.index, dtype=object)
    boarded = visits.loc[visits["boarded"].fillna(False).astype(bool)]
    if trips.empty or boarded.empty:
        return out
    anchors = stands.geometry.representative_point()
    anchor = pd.DataFrame(
        {
            "stand_id": stands["stand_id"].to_numpy(),
            "a_lat": anchors.y.to_numpy(),
            "a_lon": anchors.x.to_numpy(),
        }
    )
    cand = boarded[["vehicle_id", "stand_id", BOARDED_AT]].merge(anchor, on="stand_id")
    keyed = trips[["vehicle_id", "started_at", "pickup_lat", "pickup_lon"]].reset_index()
    cand = cand.merge(
        keyed, left_on=["vehicle_id", BOARDED_AT], right_on=["vehicle_id", "started_at"]
    )
    if cand.empty:
        return out
    cand["d_m"] = haversine_m(
        cand["pickup_lat"].to_numpy(),
        cand["pickup_lon"].to_numpy(),
        cand["a_lat"].to_numpy(),
        cand["a_lon"].to_numpy(),
    )
    best = cand.sort_values(["index", "d_m", "stand_id"]).drop_duplicates("index")
    out.loc[best["index"].to_numpy()] = best["stand_id"].to_numpy()
    return out


def count_distinct(positions: NDArray[np.integer], n: int) -> int:
    """Count the distinct values among ``positions`` (each in ``[0, n)``).

    A mask, not ``np.unique``: numpy 2.4's unique of millions of distinct integers takes
    seconds (4.6 s for 3.4M), its sort-based variants a tenth of that, the mask far less.
    """
    seen = np.zeros(n, dtype=bool)
    seen[positions] = True
    return int(np.count_nonzero(seen))


def analyze_pings(
    pings: pd.DataFrame,
    rejected: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    boundary: Any = None,
    roads: RoadGraph | None = None,
    as_of: dt.date | None = None,
    thresholds: Thresholds | None = None,
    kinds: tuple[str, ...] = KINDS,
    params: AnalysisParams = AnalysisParams(),
    progress: Progress = no_progress,
    drivers: pd.DataFrame | None = None,
    driver_links: pd.DataFrame | None = None,
    stand_suspensions: pd.DataFrame | None = None,
    allowed_places: gpd.GeoDataFrame | None = None,
) -> AnalysisResult:
    """Run matching, visits, trips, stops and occupancy over validated pings.

    Parameters
    ----------
    pings, rejected : pandas.DataFrame
        Output of :func:`tracking.ingest.read_pings` (or the Porto reader).
    stands : geopandas.GeoDataFrame
        Stands frame (``stands/frames.py``).
    fleet : pandas.DataFrame, optional
        Fleet frame; without it ``licensed`` is unknown and the fleet detectors are skipped.
    boundary : shapely geometry, optional
        Municipal boundary (EPSG:4326) for ``outside_municipality``.
    roads : geo.roads.RoadGraph, optional
        Road network for ``longer_route`` (without it: past trips between the same cells).
    as_of : datetime.date, optional
        Last local day analysed (default: the last day with fixes); later fixes are left out
        (:func:`cut_at_as_of`) and counted (``pings_after_as_of`` of the summary).
    thresholds : mapping, optional
        ``{kind: {parameter: value}}`` for the detectors (the municipality's configuration).
    kinds : tuple of str
        Finding kinds to detect.
    params : AnalysisParams
        Thresholds.
    progress : callable
        Called with a pt-BR stage label before each stage.
    drivers, driver_links : pandas.DataFrame, optional
        The registry of drivers and their links to prefixos (``fleet.drivers``); with both,
        ``driver_not_allowed`` runs.
    stand_suspensions : pandas.DataFrame, optional
        Stand suspensions (``stands.suspensions``) for ``unlicensed_stand_use``.
    allowed_places : geopandas.GeoDataFrame, optional
        Areas where waiting is allowed (a stands frame, ``stands/frames.py``): waiting there
        is not ``illegal_stand_formation``.
    """
    n_after_as_of = 0
    if as_of is not None:
        n_given = len(pings)
        pings = cut_at_as_of(pings, as_of=as_of, timezone=params.timezone)
        n_after_as_of = n_given - len(pings)
    if fleet is not None:
        fleet, _ = mark_unplaced_licences(fleet, stands["stand_id"])
    progress("Casando fixes com os pontos (H3 + ponto-em-polígono)")
    cover = build_stand_cover(stands, resolution=params.h3_resolution)
    ping_idx, stand_idx = match_stands(pings[fr.LAT].to_numpy(), pings[fr.LON].to_numpy(), cover)
    memberships = pd.DataFrame(
        {"ping_index": ping_idx, "stand_id": stands["stand_id"].to_numpy()[stand_idx]}
    )

    progress("Detectando visitas, fila e embarques")
    licences = licence_frame_from_fleet(fleet) if fleet is not None else None
    visits = detect_visits(
        pings,
        memberships,
        stands=stands,
        licences=licences,
        unknown_licences=unknown_licences(fleet) if fleet is not None else (),
        exit_grace_s=params.visit_exit_grace_s,
        exit_grace_m=params.visit_exit_grace_m,
        near_exit_grace_s=params.visit_near_exit_grace_s,
        min_dwell_s=params.visit_min_dwell_s,
        boarding_grace_s=params.boarding_grace_s,
        boarding_grace_m=params.boarding_grace_m,
        max_gap_s=params.trip_max_gap_s,
        timezone=params.timezone,
    )

    progress("Detectando paradas e viagens")
    stops = detect_stops(
        pings,
        max_diameter_m=params.stop_max_diameter_m,
        min_duration_s=params.stop_min_duration_s,
    )
    trips = detect_trips(
        pings, stops=stops, max_gap_s=params.trip_max_gap_s, max_speed_kmh=params.max_speed_kmh
    )
    trips["pickup_stand_id"] = pickup_stands(trips, visits, stands)

    progress("Calculando ocupação dos pontos")
    occ = occupancy(visits, stands, bucket=params.occupancy_bucket, include_idle=False)

    progress("Rodando os detectores de infrações")
    stats = ping_stats(pings, fleet=fleet, drivers=drivers, after_as_of=n_after_as_of)
    findings, skipped = run_detectors(
        DetectorInputs(
            pings=pings,
            visits=visits,
            trips=trips,
            stops=stops,
            stands=stands,
            fleet=fleet,
            licences=licences,
            boundary=boundary,
            roads=roads,
            as_of=as_of,
            timezone=params.timezone,
            boarding_grace_s=params.boarding_grace_s,
            boarding_grace_m=params.boarding_grace_m,
            drivers=drivers,
            driver_links=driver_links,
            stand_suspensions=stand_suspensions,
            allowed_places=allowed_places,
            off_fleet=stats["id_checks"].get("off_fleet", frozenset()),
        ),
        thresholds=thresholds,
        kinds=kinds,
    )

    result = AnalysisResult(
        pings=pings,
        rejected=rejected,
        stands=stands,
        visits=visits,
        trips=trips,
        stops=stops,
        occupancy=occ,
        findings=findings,
        skipped_detectors=skipped,
    )
    n_matched = count_distinct(ping_idx, len(pings))
    result.summary = summarize(result, params=params, n_matched=n_matched, stats=stats)
    result.id_checks = stats["id_checks"]
    return result


def id_checks(
    pings: pd.DataFrame, *, fleet: pd.DataFrame | None, drivers: pd.DataFrame | None
) -> dict[str, frozenset[str]]:
    """Return the ids of ``pings`` the registries lack, for the run's warnings.

    ``off_fleet``: vehicles not in ``fleet``; ``unknown_drivers``: driver ids neither in
    ``drivers`` nor written otherwise than one of it (:func:`fleet.ids.id_form`);
    ``known_drivers``: those in it. Each grows with the registries' mismatches, not with the
    fixes; empty without the registry.
    """
    out: dict[str, frozenset[str]] = {}
    if fleet is not None:
        vehicles = set(pings[fr.VEHICLE_ID].dropna().astype("str").unique())
        out["off_fleet"] = frozenset(vehicles - set(fleet[fr.VEHICLE_ID].astype("str")))
    if drivers is not None and fr.DRIVER_ID in pings.columns:
        seen = {str(d).strip() for d in pings[fr.DRIVER_ID].dropna().unique()} - {""}
        registered = set(drivers[fr.DRIVER_ID].astype("str"))
        forms = {id_form(d) for d in registered}
        out["known_drivers"] = frozenset(seen & registered)
        out["unknown_drivers"] = frozenset(d for d in seen - registered if id_form(d) not in forms)
    return out


def ping_stats(
    pings: pd.DataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    drivers: pd.DataFrame | None = None,
    after_as_of: int = 0,
) -> dict[str, Any]:
    """Return the counts of a pings frame for ``summary.json`` (see :func:`merge_ping_stats`).

    ``after_as_of``: the valid fixes cut from it at ``--as-of`` (:func:`cut_at_as_of`).
    ``id_checks`` (:func:`id_checks`) is not in the summary.
    """
    return {
        "pings_valid": int(len(pings)),
        "pings_after_as_of": int(after_as_of),
        "pings_speed_flagged": int(pings[fr.SPEED_FLAG].sum()) if len(pings) else 0,
        "vehicles": int(pings[fr.VEHICLE_ID].nunique()),
        "first": pings[fr.TIMESTAMP].min() if len(pings) else None,
        "last": pings[fr.TIMESTAMP].max() if len(pings) else None,
        "id_checks": id_checks(pings, fleet=fleet, drivers=drivers),
    }


def merge_ping_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the :func:`ping_stats` of partitions holding disjoint vehicles, concatenated."""
    firsts = [p["first"] for p in parts if p["first"] is not None]
    lasts = [p["last"] for p in parts if p["last"] is not None]
    return {
        "pings_valid": sum(p["pings_valid"] for p in parts),
        "pings_after_as_of": sum(p["pings_after_as_of"] for p in parts),
        "pings_speed_flagged": sum(p["pings_speed_flagged"] for p in parts),
        "vehicles": sum(p["vehicles"] for p in parts),
        "first": min(firsts) if firsts else None,
        "last": max(lasts) if lasts else None,
        "id_checks": {
            key: frozenset().union(*(p["id_checks"].get(key, ()) for p in parts))
            for key in sorted({k for p in parts for k in p["id_checks"]})
        },
    }


def summarize(
    result: AnalysisResult,
    *,
    params: AnalysisParams,
    n_matched: int,
    stats: dict[str, Any] | None = None,
    counts: dict[str, int] | None = None,
    kinds: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Return the ``summary.json`` content of a run: counts, the thresholds used, time span.

    ``stats`` (:func:`ping_stats`) stands for ``result.pings`` when the engine never held them
    all; ``counts`` (:func:`row_counts`, summed) for the visits or trips its workers wrote;
    ``kinds`` (findings by kind, summed) for the findings its workers kept.
    """
    stats = stats if stats is not None else ping_stats(result.pings)
    if kinds is None:
        kinds = {str(k): int(v) for k, v in result.findings["kind"].value_counts().items()}
    counts = row_counts(result.visits, result.trips, result.stops) | (counts or {})
    first, last = stats["first"], stats["last"]
    span = [first.isoformat(), last.isoformat()] if first is not None else [None, None]
    return {
        "pings_valid": stats["pings_valid"],
        **rejected_summary(rejected_counts(result.rejected)),
        "pings_after_as_of": stats["pings_after_as_of"],
        "pings_speed_flagged": stats["pings_speed_flagged"],
        "pings_in_stands": n_matched,
        "vehicles": stats["vehicles"],
        "stands": int(len(result.stands)),
        **counts,
        "findings": sum(kinds.values()),
        "findings_by_kind": {k: kinds[k] for k in sorted(kinds)},
        "detectors_skipped": result.skipped_detectors,
        "time_span_utc": span,
        "parameters": asdict(params),
    }


def rejected_counts(rejected: pd.DataFrame) -> dict[str, int]:
    """Return the rejected rows' count by reason."""
    if not len(rejected):
        return {}
    return {str(k): int(v) for k, v in rejected[fr.REASON].value_counts().items()}


def rejected_summary(counts: dict[str, int]) -> dict[str, Any]:
    """Return the summary's ``pings_rejected`` and ``rejected_by_reason`` from counts by reason."""
    return {
        "pings_rejected": sum(counts.values()),
        "rejected_by_reason": {k: counts[k] for k in sorted(counts)},
    }


def row_counts(visits: pd.DataFrame, trips: pd.DataFrame, stops: pd.DataFrame) -> dict[str, int]:
    """Return the summary's counts of visits (and boardings), trips (and from stands), stops."""
    return {
        "visits": int(len(visits)),
        "boardings": int(visits["boarded"].fillna(False).astype(bool).sum()) if len(visits) else 0,
        "trips": int(len(trips)),
        "trips_from_stands": int(trips["pickup_stand_id"].notna().sum()) if len(trips) else 0,
        "stops": int(len(stops)),
    }


def _iso_utc(col: pd.Series) -> pd.Series:
    """``YYYY-MM-DDTHH:MM:SSZ`` of each instant (None where missing), formatted at once."""
    ns = epoch_ns(col)
    text = np.array(iso_utc_many(ns), dtype=object)
    text[col.isna().to_numpy()] = None
    return pd.Series(text, index=col.index, dtype=object)


def _fixed6(col: pd.Series) -> pd.Series:
    """``float_format="%.6f"`` of ``to_csv`` done at once (pandas formats value by value)."""
    text = ["" if v != v else f"{v:.6f}" for v in col.to_numpy(dtype=np.float64).tolist()]
    return pd.Series(text, index=col.index, dtype=object)


FINDINGS_ORDER = ["kind", "started_at", "finding_id"]
"""The order of ``findings.geojson`` (a finding's id is unique)."""

_PART_ROWS = 256  # rows a merge holds per part (a part's row group)


def write_part(path: str | Path, keys: dict[str, Any], texts: Iterable[bytes]) -> None:
    """Write a part of an output file: its rows' texts in order, each beside its order key.

    ``keys`` maps column names to one value per row (text or integers); the texts go in the
    column ``text``. :func:`merged_texts` joins parts in the order of the keys.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {name: pa.array(values) for name, values in keys.items()}
    table = pa.table({**columns, "text": pa.array(texts, pa.binary())})
    pq.write_table(table, path, row_group_size=_PART_ROWS)


def merged_texts(parts: Sequence[Path], keys: Sequence[str]) -> Iterator[bytes]:
    """Yield the texts of ``parts`` (:func:`write_part`) in the order of ``keys``.

    Each part is in that order; rows of equal keys come in part order, then row order. A few
    hundred rows of each part are held at a time.
    """
    return (text for _, text in _merged_rows(parts, keys))


def _merged_rows(
    parts: Sequence[Path], keys: Sequence[str]
) -> Iterator[tuple[tuple[Any, ...], bytes]]:
    """Yield ``(key, text)`` of the rows of ``parts`` in the order of ``keys`` (stable)."""
    import heapq

    import pyarrow.parquet as pq

    def rows(part: Path) -> Iterator[tuple[tuple[Any, ...], bytes]]:
        for batch in pq.ParquetFile(part).iter_batches(batch_size=_PART_ROWS):
            order = zip(*(batch.column(k).to_pylist() for k in keys), strict=True)
            yield from zip(order, batch.column("text").to_pylist(), strict=True)

    return heapq.merge(*(rows(p) for p in parts), key=operator.itemgetter(0))


PART_FAN_IN = 32
"""Parts of one file the client merges at most (a row group of each held at once); an engine
with more merges them first on its workers (:func:`merge_parts`), so that what the client holds
does not grow with the run."""


def merge_parts(parts: Sequence[str | Path], path: str | Path) -> str:
    """Merge parts (:func:`write_part`) into one part at ``path``, then delete them.

    The keys are the parts' columns but ``text``; rows of equal keys keep the parts' order, so
    merging runs of consecutive parts, then the results, gives the order of one merge of all.
    Returns ``path`` as text.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = [Path(p) for p in parts]
    full = [p for p in paths if pq.ParquetFile(p).metadata.num_rows] or paths
    schema = pq.read_schema(full[0])  # an empty part's columns may be untyped (null)
    keys = [c for c in schema.names if c != "text"]

    def write(writer: Any, rows: list[tuple[tuple[Any, ...], bytes]]) -> None:
        columns = [list(c) for c in zip(*(key for key, _ in rows), strict=True)]
        arrays = [pa.array(v, schema.field(k).type) for k, v in zip(keys, columns, strict=True)]
        arrays.append(pa.array([text for _, text in rows], schema.field("text").type))
        writer.write_table(pa.Table.from_arrays(arrays, schema=schema))

    with pq.ParquetWriter(path, schema) as writer:
        rows: list[tuple[tuple[Any, ...], bytes]] = []
        for row in _merged_rows(paths, keys):
            rows.append(row)
            if len(rows) == _PART_ROWS:
                write(writer, rows)
                rows = []
        if rows:
            write(writer, rows)
    for part in paths:
        part.unlink()
    return str(path)


def write_findings_part(
    findings: gpd.GeoDataFrame, path: str | Path, *, keep: frozenset[str] | None = None
) -> gpd.GeoDataFrame:
    """Write a group's findings, every detail included, as a part of ``findings.geojson``.

    The part holds the Feature texts in :data:`FINDINGS_ORDER` (keys ``kind``, ``started_ns``,
    ``finding_id``). Returns the findings in that order, with only the ``keep`` keys of their
    ``details`` when given (:func:`~tracking.detectors.findings.with_details`).
    """
    frame = findings.sort_values(FINDINGS_ORDER, ignore_index=True)
    keys = {
        "kind": frame["kind"].tolist(),
        "started_ns": epoch_ns(frame["started_at"]),
        "finding_id": frame["finding_id"].tolist(),
    }
    write_part(path, keys, feature_texts(frame))
    return frame if keep is None else with_details(frame, keep)


def write_csv_part(
    name: str, frame: pd.DataFrame, path: str | Path, *, keys: Sequence[str]
) -> dict[str, int]:
    """Write rows of ``stand_visits.csv``, ``trips.csv`` or ``occupancy.csv`` as a part of it.

    ``frame`` holds the rows and the ``keys`` columns they are ordered by (the file's order:
    its rows sorted by them). Returns their :func:`row_counts` (none for ``occupancy.csv``).
    """
    frame = frame.sort_values(list(keys), kind="stable", ignore_index=True)
    table, options = _CSV_TABLES[name](frame)
    text = table.to_csv(index=False, header=False, **options) if len(table) else ""
    lines = text.encode("utf-8").split(b"\n")[:-1]
    if len(lines) != len(table):  # a line break inside a field (ids are validated: never)
        msg = f"{name}: um campo contém quebra de linha"
        raise ValueError(msg)
    write_part(path, {k: frame[k].tolist() for k in keys}, lines)
    if name == "trips.csv":
        return row_counts(_NO_ROWS, frame, _NO_ROWS)
    if name == "occupancy.csv":
        return {}
    return row_counts(frame, _NO_ROWS, _NO_ROWS)


def write_rejected_part(rejected: pd.DataFrame, path: str | Path, *, columns: Sequence[str]) -> str:
    """Write rejected rows as a part of ``rejected.csv``, in row order; return ``path`` as text.

    ``columns``: the file's (:func:`rejected_columns`); a row's line is the one
    :func:`~tracking.ingest.write_rejected` writes for it in the whole file (every cell is
    text but ``row``: no column-wide formatting).
    """
    frame = rejected.reindex(columns=list(columns)).sort_values(
        fr.ROW, kind="stable", ignore_index=True
    )
    text = frame.to_csv(index=False, header=False, lineterminator="\n") if len(frame) else ""
    lines = text.encode("utf-8").split(b"\n")[:-1]
    if len(lines) != len(frame):  # a line break inside a cell: those rows one by one
        lines = [
            frame.iloc[[i]].to_csv(index=False, header=False, lineterminator="\n").encode()[:-1]
            for i in range(len(frame))
        ]
    write_part(path, {fr.ROW: frame[fr.ROW].tolist()}, lines)
    return str(path)


def rejected_columns(heads: Sequence[pd.DataFrame]) -> list[str]:
    """Return ``rejected.csv``'s columns for rejected frames joined in this order.

    ``heads``: the frames or their first rows (``frame.iloc[:0]``); the columns are those of
    their concatenation, ``row`` and ``reason`` first, as :func:`~tracking.ingest.write_rejected`
    writes them.
    """
    joined = pd.concat([h.iloc[:0] for h in heads]).columns if heads else pd.Index([])
    return rejected_order(str(c) for c in joined)


def _merge_part_files(
    name: str, parts: Sequence[Path], path: Path, *, columns: Sequence[str] | None = None
) -> None:
    """Write output file ``name`` from its parts, as :func:`write_outputs` writes it whole.

    A part's key columns are all its columns but ``text``, in order.
    """
    import pyarrow.parquet as pq

    if name == "findings.geojson":
        write_feature_collection(merged_texts(parts, _FINDINGS_KEYS), path)
        return
    keys = [c for c in pq.read_schema(parts[0]).names if c != "text"] if parts else []
    if name == "rejected.csv":
        header = pd.DataFrame(columns=list(columns or ())).to_csv(index=False, lineterminator="\n")
    else:
        header = pd.DataFrame(columns=_CSV_COLUMNS[name]).to_csv(index=False)
    with path.open("wb") as fh:
        fh.write(header.encode("utf-8"))
        for line in merged_texts(parts, keys):
            fh.write(line + b"\n")


def merge_part_file(
    name: str,
    parts: Sequence[str | Path],
    path: str | Path,
    *,
    columns: Sequence[str] | None = None,
) -> str:
    """Write output file ``name`` at ``path`` from its parts, as :func:`write_outputs` would.

    ``name``: ``findings.geojson``, ``stand_visits.csv``, ``trips.csv``, ``occupancy.csv`` or
    ``rejected.csv`` (its ``columns``: :func:`rejected_columns`; parts of
    :func:`write_rejected_part`). A few hundred rows of each part are held at a time. Returns
    ``path`` as text.
    """
    _merge_part_files(name, [Path(p) for p in parts], Path(path), columns=columns)
    return str(path)


_FINDINGS_KEYS = ("kind", "started_ns", "finding_id")


def merge_findings_parts(parts: Sequence[Path], path: Path) -> None:
    """Write ``findings.geojson`` from parts (:func:`write_findings_part`), a few rows at a time.

    Byte-identical to :func:`~tracking.detectors.findings.write_findings_geojson` of all the
    parts' findings in one frame.
    """
    _merge_part_files("findings.geojson", parts, path)


def write_findings(result: AnalysisResult, path: Path) -> None:
    """Write the run's ``findings.geojson``: its findings, or its workers' parts merged."""
    if "findings.geojson" in result.written:
        return
    if "findings.geojson" in result.parts:
        merge_findings_parts(result.parts["findings.geojson"], path)
    else:
        write_findings_geojson(result.findings, path)


def _visits_table(visits: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``stand_visits.csv``'s columns as written, and ``to_csv``'s options."""
    table = visits.loc[:, list(fr.VISIT_COLUMNS)].copy()
    for col in ("arrived_at", "departed_at"):
        table[col] = _iso_utc(table[col])
    return table, {}


def _trips_table(trips: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``trips.csv``'s columns as written, and ``to_csv``'s options."""
    table = trips.loc[:, list(fr.TRIP_COLUMNS)].copy()
    for col in ("started_at", "ended_at"):
        table[col] = _iso_utc(table[col])
    for col in table.columns[[isinstance(d, np.dtype) and d.kind == "f" for d in table.dtypes]]:
        table[col] = _fixed6(table[col])
    return table, {"float_format": "%.6f"}


def _occupancy_table(occ: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``occupancy.csv``'s columns as written, and ``to_csv``'s options."""
    table = occ.copy()
    table["bucket_start"] = _iso_utc(table["bucket_start"])
    return table, {}


_CSV_TABLES = {
    "stand_visits.csv": _visits_table,
    "trips.csv": _trips_table,
    "occupancy.csv": _occupancy_table,
}
_CSV_COLUMNS = {
    "stand_visits.csv": list(fr.VISIT_COLUMNS),
    "trips.csv": list(fr.TRIP_COLUMNS),
    "occupancy.csv": list(OCCUPANCY_COLUMNS),
}
_NO_ROWS = pd.DataFrame()


def write_outputs(result: AnalysisResult, out_dir: Path, *, findings: bool = True) -> list[Path]:
    """Write the contract files of a run into ``out_dir`` and return their paths.

    Parameters
    ----------
    result : AnalysisResult
        From :func:`analyze_pings`.
    out_dir : pathlib.Path
        Created if missing.
    findings : bool, default True
        False leaves ``findings.geojson`` (still among the paths returned) to the caller:
        :func:`write_findings`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if findings:
        write_findings(result, out_dir / "findings.geojson")
    for name, frame in (("stand_visits.csv", result.visits), ("trips.csv", result.trips)):
        if name in result.written:
            continue
        if name in result.parts:
            _merge_part_files(name, result.parts[name], out_dir / name)
        else:
            table, options = _CSV_TABLES[name](frame)
            table.to_csv(out_dir / name, index=False, **options)

    if "rejected.csv" not in result.written:
        write_rejected(result.rejected, out_dir / "rejected.csv")

    if "occupancy.csv" in result.written:
        pass
    elif "occupancy.csv" in result.parts:
        _merge_part_files("occupancy.csv", result.parts["occupancy.csv"], out_dir / "occupancy.csv")
    else:
        table, _ = _occupancy_table(result.occupancy)
        table.to_csv(out_dir / "occupancy.csv", index=False)

    review = result.parts.get("summary.json")
    write_summary(
        result.summary,
        out_dir / "summary.json",
        review=None if review is None else merged_texts(review, REVIEW_ORDER),
    )
    return [out_dir / name for name in OUTPUT_FILES]


REVIEW_ORDER = ("finding_id", "vehicle_id")
"""The order of ``summary.json``'s ``findings_for_review.findings`` (a part's keys)."""

_SPLICED = "\x00partes\x00"  # marks the review list merged from parts (a NUL: no real value)


def write_summary(
    summary: dict[str, Any], path: Path, *, review: Iterable[bytes] | None = None
) -> None:
    """Write ``summary.json``: ``json.dumps(summary, ensure_ascii=False, indent=2)`` and a line end.

    With ``review``, the ``findings_for_review.findings`` list is those texts in order (each
    item as :func:`summary_item_text` writes it), spliced in at its place: the same bytes as
    the list given in ``summary``.
    """
    if review is None:
        text = json.dumps(summary, ensure_ascii=False, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")
        return
    marked = summary | {
        "findings_for_review": summary["findings_for_review"] | {"findings": _SPLICED}
    }
    head, tail = (json.dumps(marked, ensure_ascii=False, indent=2) + "\n").split(
        json.dumps(_SPLICED)
    )
    line = head[head.rfind("\n") + 1 :]
    pad = b" " * (len(line) - len(line.lstrip(" ")))
    with path.open("wb") as fh:
        fh.write(head.encode("utf-8"))
        first = True
        for item in review:
            fh.write(b"[\n" if first else b",\n")
            fh.write(b"\n".join(pad + b"  " + row for row in item.split(b"\n")))
            first = False
        fh.write(b"[]" if first else b"\n" + pad + b"]")
        fh.write(tail.encode("utf-8"))


def summary_item_text(item: Any) -> bytes:
    """Return an item of a ``summary.json`` list as :func:`write_summary` splices it."""
    return json.dumps(item, ensure_ascii=False, indent=2).encode("utf-8")
