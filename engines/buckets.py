"""``pontual analyze`` of a pings file larger than memory: vehicle buckets spilled to disk.

:func:`analyze_file` gives the result of :func:`tracking.ingest.read_pings` followed by
:func:`engines.pipeline.analyze_pings` (the same findings, visits, trips, stops, occupancy,
rejected rows and summary) without ever holding every fix:

1. *spill* — the file is read once in chunks (:class:`tracking.ingest.RawPings`); each row goes,
   as its raw cells, to the bucket of its vehicle (CRC-32 of the trimmed ``vehicle_id``), an
   Arrow IPC file in a temporary folder. The columns of few distinct cells
   (:data:`tracking.ingest.DICTIONARY_COLUMNS`) travel as Arrow dictionaries: the chunk's
   reordering moves indices, and each bucket gets its own dictionary when the chunk's would
   be repeated in every bucket (:func:`_own_dictionaries`). About ``bucket_fixes`` rows per
   bucket, the count a multiple of ``jobs`` (:func:`bucket_count`). With ``jobs`` > 1, a plain
   CSV or a Parquet file of several row groups is read as that many ranges at once
   (:func:`spill`). A Parquet file of at most :data:`engines.early.HELD_ROWS` rows is instead
   read whole into memory (by a thread started before the analysis's imports, from the CLI),
   each bucket's rows taken from it by the process that analyses the bucket (:class:`Held`):
   nothing written, read back or pickled.
2. *per bucket* — the bucket's rows, in file order, are validated
   (:func:`tracking.validate.validate_pings`: every rule is about one row or one vehicle's rows,
   so a bucket gives the verdicts the whole file would) and analysed with
   :func:`engines.partitions.vehicle_stage`; only its small frames, rejected rows, evidence
   fixes and a sample of fixes for the map (every file row 1 modulo k) are kept. With
   ``jobs`` > 1, buckets run in that many forked processes, the largest first.
3. *gather* — :func:`engines.partitions.gather`: queue positions across vehicles, occupancy
   and the cross-vehicle kinds.

The peak is about one bucket's work (times ``jobs``) plus the gathered evidence fixes, not the
file: see ``bench/bench_analyze.py``.
"""

from __future__ import annotations

import datetime as dt
import functools
import gzip
import math
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engines.early import HELD_ROWS, SPILL_CHUNK_ROWS
from engines.partitions import POSITIONS, gather, stage_context, vehicle_stage
from engines.pipeline import AnalysisParams, AnalysisResult, Progress, cut_at_as_of, no_progress
from geo.roads import RoadGraph
from runtime import forked_map
from tracking import frames as fr
from tracking.detectors.detect import Thresholds
from tracking.detectors.findings import KINDS
from tracking.ingest import RawPings
from tracking.parquet import EarlyRead
from tracking.validate import arrow_text, validate_pings

DEFAULT_BUCKET_FIXES = 500_000
"""Rows per bucket aimed at (a bucket's work takes a few hundred MB)."""

MAP_FIXES = 50_000
"""Fixes sampled for the map page."""

_MAP_COLUMNS = (fr.VEHICLE_ID, fr.TIMESTAMP, fr.LAT, fr.LON, fr.METER)
_CSV_SAMPLE_BYTES = 1 << 20


def analyze_file(
    path: str | Path,
    stands: gpd.GeoDataFrame,
    *,
    fleet: pd.DataFrame | None = None,
    boundary: Any = None,
    roads: RoadGraph | None = None,
    as_of: dt.date | None = None,
    thresholds: Thresholds | None = None,
    kinds: tuple[str, ...] = KINDS,
    params: AnalysisParams | None = None,
    now: pd.Timestamp | None = None,
    bucket_fixes: int = DEFAULT_BUCKET_FIXES,
    jobs: int = 1,
    chunk_rows: int = SPILL_CHUNK_ROWS,
    progress: Progress = no_progress,
    drivers: pd.DataFrame | None = None,
    driver_links: pd.DataFrame | None = None,
    stand_suspensions: pd.DataFrame | None = None,
    allowed_places: gpd.GeoDataFrame | None = None,
    early: EarlyRead | None = None,
) -> tuple[AnalysisResult, pd.DataFrame]:
    """Read, validate and analyse a pings file bucket by bucket (see the module docstring).

    Parameters
    ----------
    path : str or pathlib.Path
        A pings file (CSV, CSV.gz or Parquet) in the public format.
    stands, fleet, boundary, roads, as_of, thresholds, kinds, params, progress
        As in :func:`engines.pipeline.analyze_pings`.
    now : pandas.Timestamp, optional
        Reference instant for future timestamps; defaults to the current time.
    bucket_fixes : int, default 500,000
        Rows per bucket aimed at.
    jobs : int, default 1
        Buckets analysed at once, each in its own process when more than one.
    chunk_rows : int, default 250,000
        Rows read at a time while spilling.
    drivers, driver_links, stand_suspensions : pandas.DataFrame, optional
        As in :func:`engines.pipeline.analyze_pings`.
    allowed_places : geopandas.GeoDataFrame, optional
        As in :func:`engines.pipeline.analyze_pings`.
    early : tracking.parquet.EarlyRead, optional
        This file being read already (:func:`engines.early.start_early_read`, with the same
        ``chunk_rows``): taken when the file is read whole.

    Returns
    -------
    result : AnalysisResult
        As :func:`engines.pipeline.analyze_pings` gives it, except ``pings`` (the evidence
        fixes of the cross-vehicle kinds, not every fix) and the positions into it
        (:data:`engines.partitions.POSITIONS`), which are dropped.
    sample : pandas.DataFrame
        About :data:`MAP_FIXES` fixes (those whose file row is 1 modulo k), for the map.

    Raises
    ------
    UnsupportedFormatError, EmptyFileError, MalformedFileError, MissingColumnsError,
    ReservedColumnError, InvalidParameterError, FileNotFoundError
        As :func:`tracking.ingest.read_pings`.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        msg = f"'jobs' era {jobs!r}; esperado um inteiro positivo"
        raise ValueError(msg)
    if isinstance(bucket_fixes, bool) or not isinstance(bucket_fixes, int) or bucket_fixes < 1:
        msg = f"'bucket_fixes' era {bucket_fixes!r}; esperado um inteiro positivo"
        raise ValueError(msg)
    params = params or AnalysisParams()
    source = RawPings.open(path, chunk_rows=chunk_rows)
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    context = stage_context(
        stands,
        fleet=fleet,
        boundary=boundary,
        roads=roads,
        as_of=as_of,
        thresholds=thresholds,
        kinds=kinds,
        params=params,
        drivers=drivers,
        driver_links=driver_links,
        stand_suspensions=stand_suspensions,
        allowed_places=allowed_places,
    )
    n_estimate = estimate_rows(source)
    n_buckets = bucket_count(n_estimate, bucket_fixes=bucket_fixes, jobs=jobs)
    with tempfile.TemporaryDirectory(prefix="pontual-buckets-") as tmp:
        progress(f"Lendo e separando os pings em {n_buckets} partição(ões) por veículo")
        held: Held | None = None
        buckets: list[Bucket] | list[int]
        if not source.is_csv and n_estimate <= HELD_ROWS:
            held = Held.read(source, n_buckets, early=early)
            n_rows, buckets = held.n_rows, held.present()
            sizes = [held.size(k) for k in buckets]
        else:
            n_rows, spilled = spill(source, Path(tmp), n_buckets, jobs=jobs)
            buckets = list(spilled.values())
            sizes = [sum(file.stat().st_size for file, _ in bucket) for bucket in buckets]
        progress(f"Validando e analisando partição 0/{len(buckets)}")
        job = _BucketJob(source=source, context=context, now=now, step=map_step(n_rows), held=held)
        order = largest_first(sizes) if jobs > 1 else list(range(len(buckets)))
        results: list[dict[str, Any]] = [{} for _ in buckets]
        taken = [buckets[k] for k in order]
        outs = forked_map(job, taken, jobs=jobs)
        for done, (k, out) in enumerate(zip(order, outs, strict=True), start=1):
            progress(f"Validando e analisando partição {done}/{len(buckets)}")
            results[k] = out
        del job, held
    return finish(results, source.malformed(), context, jobs=jobs, progress=progress)


def largest_first(sizes: Sequence[int]) -> list[int]:
    """Order the buckets by their sizes, largest first (ties in bucket order).

    The processes take the next bucket as they finish one: the small ones last even out
    their ends.
    """
    return sorted(range(len(sizes)), key=lambda k: -sizes[k])


def finish(
    results: list[dict[str, Any]],
    malformed: pd.DataFrame,
    context: dict[str, Any],
    *,
    jobs: int = 1,
    progress: Progress = no_progress,
) -> tuple[AnalysisResult, pd.DataFrame]:
    """Gather the buckets' results (:func:`analyze_bucket`): the result and the map's sample.

    ``malformed`` is the file's malformed records as rejected rows.
    """
    rejected, sample = merge_extras(malformed, [bucket_extras(r, pop=True) for r in results])
    result = gather(results, rejected, context, jobs=jobs, progress=progress)
    return without_positions(result), sample


def bucket_extras(result: dict[str, Any], *, pop: bool = False) -> dict[str, pd.DataFrame]:
    """Return a bucket's rejected rows and map sample (taken out of ``result`` with ``pop``)."""
    take = result.pop if pop else result.__getitem__
    return {"rejected": take("rejected"), "sample": take("sample")}


def merge_extras(
    malformed: pd.DataFrame, extras: list[dict[str, pd.DataFrame]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the rejected rows in row order (``malformed`` ones too) and the map sample."""
    rejected = pd.concat(
        [malformed, *(e["rejected"] for e in extras)], ignore_index=True
    ).sort_values(fr.ROW, kind="stable", ignore_index=True)
    sample = pd.concat([e["sample"] for e in extras], ignore_index=True)
    return rejected, sample


def without_positions(result: AnalysisResult) -> AnalysisResult:
    """Drop the positions into a frame of every fix (none is kept by the partitioned engines)."""
    for name in ("visits", "trips", "stops"):
        frame = getattr(result, name)
        setattr(result, name, frame.drop(columns=[c for c in POSITIONS if c in frame.columns]))
    return result


def estimate_rows(source: RawPings) -> int:
    """Estimate the file's rows (only sizes the buckets).

    Exact for Parquet; for CSV, the file's size over the mean line length of its first MB (for
    .gz, of the text the first MB inflates to, and the size inflated alike).
    """
    if not source.is_csv:
        return int(pq.ParquetFile(source.path).metadata.num_rows)
    size = source.path.stat().st_size
    if source.path.name.lower().endswith(".gz"):
        with source.path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as fh:
            head = fh.read(_CSV_SAMPLE_BYTES)
            size = int(size * len(head) / max(1, raw.tell()))  # the inflation ratio
    else:
        with source.path.open("rb") as fh:
            head = fh.read(_CSV_SAMPLE_BYTES)
    lines = max(1, head.count(b"\n"))
    return max(1, int(size / max(1.0, len(head) / lines)))


def bucket_count(n_rows: int, *, bucket_fixes: int, jobs: int) -> int:
    """Buckets of about ``bucket_fixes`` rows, a multiple of ``jobs`` when more than one.

    ``jobs`` processes take the buckets in turn: 7 buckets on 2 would end with one process
    alone on the last. The multiple below is taken while its buckets hold at most a quarter
    more than ``bucket_fixes`` (fewer buckets, less work repeated per bucket), else the one
    above.
    """
    n = max(1, math.ceil(n_rows / bucket_fixes))
    if jobs == 1 or n == 1:
        return n
    down = n // jobs * jobs
    if down >= jobs and n_rows <= down * bucket_fixes * 1.25:
        return down
    return math.ceil(n / jobs) * jobs


def map_step(n_rows: int) -> int:
    """Take one fix in this many for the map (:data:`MAP_FIXES` of ``n_rows``)."""
    return max(1, math.ceil(n_rows / MAP_FIXES))


def _bucket_of(source: RawPings, table: pa.Table, n_buckets: int) -> np.ndarray:
    """Bucket of each row: CRC-32 of its ``vehicle_id`` as validation reads it (trimmed text)."""
    name = next(n for n in table.column_names if n.strip() == fr.VEHICLE_ID)
    typ = table.schema.field(name).type
    if pa.types.is_dictionary(typ) and (
        pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)
    ):  # each distinct cell once (a missing one reads as empty)
        column = table.column(name)
        arr = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        cells = pa.concat_arrays([arr.dictionary, pa.array([""], type=arr.dictionary.type)])
        lut = vehicle_buckets(pc.utf8_trim_whitespace(cells), n_buckets)
        index = pc.fill_null(arr.indices, len(cells) - 1).to_numpy(zero_copy_only=False)
        return lut[np.asarray(index, dtype=np.intp)]
    sub = table.select([name, fr.ROW])
    column = (
        pd.Series(pd.array(sub.column(0), dtype="str"))
        if source.is_csv
        else source.frame(sub)[fr.VEHICLE_ID]
    )
    return vehicle_buckets(arrow_text(column), n_buckets)


def vehicle_buckets(vehicle_ids: pa.Array | pa.ChunkedArray, n_buckets: int) -> np.ndarray:
    """Bucket of each trimmed ``vehicle_id``: CRC-32 of its UTF-8 bytes modulo ``n_buckets``."""
    if isinstance(vehicle_ids, pa.ChunkedArray):
        vehicle_ids = vehicle_ids.combine_chunks()
    encoded = pc.dictionary_encode(vehicle_ids)
    lut = np.fromiter(
        (zlib.crc32(v.encode("utf-8")) % n_buckets for v in encoded.dictionary.to_pylist()),
        dtype=np.int64,
        count=len(encoded.dictionary),
    )
    return lut[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.intp)]


Bucket = list[tuple[Path, int]]
"""A bucket's spilled files, in file order, each with what to add to its ``row`` (:func:`spill`)."""


Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], Iterator[Any]]
"""Runs a picklable function on each item and yields the results in order: forked processes
(``functools.partial(runtime.forked_map, jobs=N)``, the default) or the tasks of a Dask
cluster (:func:`engines.dataset.cluster_map`)."""


def spill(
    source: RawPings, folder: Path, n_buckets: int, *, jobs: int, mapper: Mapper | None = None
) -> tuple[int, dict[int, Bucket]]:
    """Write each row, as read, to its vehicle's bucket; return the rows and the buckets.

    Buckets are keyed by number (CRC-32 of the trimmed ``vehicle_id`` modulo ``n_buckets``),
    in ascending order; a bucket without rows is left out, bar bucket 0 (an empty file's
    schema). With ``jobs`` > 1, a plain CSV (byte ranges) or a Parquet file (runs of row
    groups) is read as that many ranges at once (:meth:`tracking.ingest.RawPings.ranges`), each
    range writing its own file of each bucket; else the file is read whole, by one task.
    ``mapper`` runs the reads (default: ``jobs`` forked processes); they only need to see
    ``source.path`` and ``folder``.
    Afterwards ``source`` knows its malformed records (:meth:`~tracking.ingest.RawPings.malformed`).
    """
    ranges = source.ranges(jobs) if jobs > 1 else []
    run = mapper or functools.partial(forked_map, jobs=jobs)
    task = SpillRange(source=source, ranges=ranges, folder=folder, n_buckets=n_buckets)
    spilled = list(run(task, range(max(1, len(ranges)))))
    if not ranges:
        [(n_rows, bad, files)] = spilled
        source.bad = bad  # a whole read numbers them in the file
        return n_rows, {b: [(files[b], 0)] for b in sorted(files)}
    offsets = source.join_ranges([(n, bad) for n, bad, _ in spilled])
    found = sorted({b for *_, files in spilled for b in files})
    buckets = {
        b: [
            (files[b], off) for (*_, files), off in zip(spilled, offsets, strict=True) if b in files
        ]
        for b in found
    }
    return sum(n for n, *_ in spilled), buckets


@dataclass(frozen=True, kw_only=True)
class SpillRange:
    """One task of :func:`spill`: range ``k`` of ``ranges`` (none: the whole file) to buckets.

    Plain data, picklable: a Dask worker runs it as well as a forked process.
    """

    source: RawPings
    ranges: list[tuple[int, int]]
    folder: Path
    n_buckets: int

    def __call__(self, k: int) -> tuple[int, list[tuple[int | None, str]], dict[int, Path]]:
        """Return the range's well-formed records, its malformed ones and its bucket files."""
        bad: list[tuple[int | None, str]] = []
        if self.ranges:
            tables = self.source.range_tables(*self.ranges[k], bad)
        else:
            tables = self.source.tables()
        n_rows, files = _spill_tables(self.source, tables, self.folder / str(k), self.n_buckets)
        return n_rows, (bad if self.ranges else self.source.bad or []), files


def _spill_tables(
    source: RawPings, tables: Iterator[pa.Table], folder: Path, n_buckets: int
) -> tuple[int, dict[int, Path]]:
    """Write each table's rows to their vehicle's bucket file in ``folder``."""
    folder.mkdir()
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    sinks: dict[int, Any] = {}
    paths: dict[int, Path] = {}
    schema: pa.Schema | None = None
    n_rows = 0
    try:
        for table in tables:
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                table = table.cast(schema)
            n_rows += table.num_rows
            bucket = (
                _bucket_of(source, table, n_buckets) if table.num_rows else np.zeros(0, np.int64)
            )
            order, bounds = _by_bucket(bucket, n_buckets)
            table = table.take(pa.array(order, type=pa.int64()))  # one take, then slices
            own = _own_dictionaries(table, bucket[order], bounds)
            for b in range(n_buckets):
                lo, hi = int(bounds[b]), int(bounds[b + 1])
                if hi == lo and (b != 0 or b in writers):
                    continue  # bucket 0 always exists: it carries an empty file's schema
                if b not in writers:
                    paths[b] = folder / f"bucket-{b:05d}.arrow"
                    sinks[b] = paths[b].open("wb")
                    writers[b] = pa.ipc.new_stream(sinks[b], schema)
                part = table.slice(lo, hi - lo)
                for i, arrays in own.items():
                    if hi > lo:
                        part = part.set_column(i, schema.field(i), arrays[b])
                writers[b].write_table(part)
            del table, own
    finally:
        for b, writer in writers.items():
            writer.close()
            sinks[b].close()
    return n_rows, paths


def _by_bucket(bucket: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the rows ordered by bucket (file order within one) and each bucket's bounds."""
    small = bucket.astype(np.int16) if n_buckets < 2**15 else bucket  # sorts by radix
    order = np.argsort(small, kind="stable")
    return order, np.r_[0, np.cumsum(np.bincount(bucket, minlength=n_buckets))]


def _own_dictionaries(
    table: pa.Table, bucket: np.ndarray, bounds: np.ndarray
) -> dict[int, dict[int, pa.DictionaryArray]]:
    """Each bucket's own dictionary of the large dictionary columns of a chunk sorted by bucket.

    A bucket's slice shares its chunk's dictionary: kept whole while the buckets' copies hold
    no more values than the chunk has rows (few distinct cells, few buckets), else each bucket
    gets the values its rows use (``{column: {bucket: array}}``; ``bucket`` sorted, ``bounds``
    its buckets' row ranges).
    """
    present = np.flatnonzero(np.diff(bounds))
    out: dict[int, dict[int, pa.DictionaryArray]] = {}
    for i, field in enumerate(table.schema):
        column = table.column(i)
        if not pa.types.is_dictionary(field.type) or column.num_chunks != 1:
            continue
        arr = column.chunk(0)
        size = len(arr.dictionary)
        if size * len(present) <= len(arr):
            continue
        valid = np.asarray(arr.indices.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        index = pc.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        # (bucket, value) pairs numbered as first met: a bucket's are a run after the last's
        codes, pairs = pd.factorize(bucket.astype(np.int64) * size + index)
        values = arr.dictionary.take(pa.array(pairs % size, type=pa.int64()))
        starts = [*codes[bounds[present]].tolist(), len(pairs)]
        out[i] = {}
        for k, b in enumerate(present.tolist()):
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            local = pa.array(
                codes[lo:hi] - starts[k], type=field.type.index_type, mask=~valid[lo:hi]
            )
            run = values.slice(starts[k], starts[k + 1] - starts[k])
            out[i][b] = pa.DictionaryArray.from_arrays(local, run)
    return out


@dataclass(frozen=True, kw_only=True)
class Held:
    """A Parquet file read whole: its chunks as read, each with its rows ordered by bucket.

    Forked processes inherit it and take their buckets' rows (:meth:`rows`), as
    :func:`read_spilled` gives a spilled bucket's. ``order[i]``: chunk ``i``'s row positions by
    bucket (file order within one); ``bounds[i][k]:bounds[i][k + 1]``: bucket ``k``'s of them.
    """

    tables: list[pa.Table]
    order: list[np.ndarray]
    bounds: list[np.ndarray]

    @classmethod
    def read(cls, source: RawPings, n_buckets: int, *, early: EarlyRead | None = None) -> Held:
        """Read ``source`` (Parquet) whole, or take ``early``'s read of it.

        Afterwards ``source`` knows its (no) malformed records.
        """
        tables = list(source.tables(early=early))
        order, bounds = [], []
        for table in tables:
            bucket = (
                _bucket_of(source, table, n_buckets) if table.num_rows else np.zeros(0, np.int64)
            )
            rows, ends = _by_bucket(bucket, n_buckets)
            order.append(rows)
            bounds.append(ends)
        source.bad = []
        return cls(tables=tables, order=order, bounds=bounds)

    @property
    def n_rows(self) -> int:
        """Rows of the file."""
        return sum(t.num_rows for t in self.tables)

    def size(self, k: int) -> int:
        """Rows of bucket ``k``."""
        return sum(int(b[k + 1] - b[k]) for b in self.bounds)

    def present(self) -> list[int]:
        """Return the buckets with rows, ascending; bucket 0 always (an empty file's schema)."""
        n_buckets = len(self.bounds[0]) - 1
        return [k for k in range(n_buckets) if k == 0 or self.size(k)]

    def rows(self, k: int) -> pa.Table:
        """Bucket ``k``'s rows, in file order."""
        return pa.concat_tables(
            [
                t.take(pa.array(o[b[k] : b[k + 1]], type=pa.int64()))
                for t, o, b in zip(self.tables, self.order, self.bounds, strict=True)
            ]
        )


@dataclass(frozen=True, kw_only=True)
class _BucketJob:
    """What each bucket's run needs (plain data; inherited by forked processes)."""

    source: RawPings
    context: dict[str, Any]
    now: pd.Timestamp
    step: int
    held: Held | None = None

    def __call__(self, bucket: Bucket | int) -> dict[str, Any]:
        if isinstance(bucket, int) and self.held is not None:
            table = self.held.rows(bucket)
        elif isinstance(bucket, list):
            table = read_spilled(self.source, bucket)
        else:
            msg = f"partição {bucket!r} sem arquivo lido em memória"
            raise TypeError(msg)
        raw = self.source.frame(table)
        return analyze_bucket(raw, context=self.context, now=self.now, step=self.step)


def read_spilled(source: RawPings, bucket: Bucket) -> pa.Table:
    """Read a spilled bucket (deleting its files), ``row`` made the file's data row."""
    tables = []
    for file, offset in bucket:
        with pa.ipc.open_stream(file) as reader:
            tables.append(reader.read_all())
        file.unlink()
        if offset:  # a range's ordinals made the file's
            tables[-1] = _add_to_rows(tables[-1], offset)
    table = pa.concat_tables(tables)
    del tables
    at = table.schema.get_field_index(fr.ROW)
    ordinals = table.column(at).to_numpy()
    return table.set_column(at, fr.ROW, pa.array(source.data_rows(ordinals)))


def _add_to_rows(table: pa.Table, offset: int) -> pa.Table:
    at = table.schema.get_field_index(fr.ROW)
    return table.set_column(at, fr.ROW, pa.array(table.column(at).to_numpy() + offset))


def analyze_bucket(
    raw: pd.DataFrame, *, context: dict[str, Any], now: pd.Timestamp, step: int
) -> dict[str, Any]:
    """Validate a bucket's raw rows (in file order) and run the vehicle stage on them.

    Returns :func:`engines.partitions.vehicle_stage`'s dict, its ``stats`` counting the valid
    fixes after ``--as-of`` (left out), plus ``rejected`` (the bucket's rejected rows) and
    ``sample`` (its fixes of the map's sample, :func:`map_sample`).
    """
    params: AnalysisParams = context["params"]
    pings, rejected = validate_pings(raw, now=now, max_speed_kmh=params.max_speed_kmh)
    del raw
    as_of = context["as_of"]
    n_valid = len(pings)
    if as_of is not None:
        pings = cut_at_as_of(pings, as_of=as_of, timezone=params.timezone)
    out = vehicle_stage(pings, context)
    out["stats"]["pings_after_as_of"] = n_valid - len(pings)
    out["rejected"] = rejected
    out["sample"] = map_sample(pings, step)
    return out


def map_sample(pings: pd.DataFrame, step: int) -> pd.DataFrame:
    """Return the fixes whose file row is 1 modulo ``step`` (the same however the file is cut)."""
    cols = [c for c in _MAP_COLUMNS if c in pings.columns]
    if step == 1 or fr.ROW not in pings.columns:
        return pings.iloc[::step][cols].reset_index(drop=True)
    keep = (pings[fr.ROW].to_numpy(dtype=np.int64) - 1) % step == 0
    sample: pd.DataFrame = pings.loc[keep, cols]
    return sample.reset_index(drop=True)
