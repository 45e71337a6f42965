"""A pings file as a partitioned Parquet dataset that workers read themselves.

:func:`write_dataset` reads a pings file once, as the file engine does
(:func:`engines.buckets.spill`: the raw cells of each row, as read, to its vehicle's bucket —
CRC-32 of the trimmed ``vehicle_id``), and writes each bucket as Parquet files, one per local
day::

    DIR/manifest.json
    DIR/malformed.parquet                      CSV records with the wrong number of fields
    DIR/day=2024-03-04/bucket=3/part-0.parquet  raw cells + ``row`` (the file's data row)
    DIR/day=__HIVE_DEFAULT_PARTITION__/bucket=3/part-0.parquet   timestamp not readable

A row's day is the local day (``timezone``) of its timestamp as validation reads it; rows
whose timestamp cannot be read (missing, unparseable, without offset) go to the day-less
partition, so no row is lost (validation rejects them as it would in the file). The manifest
names the source (name, size, SHA-256), the time zone, the buckets, the columns and every file
(day, bucket, rows, first and last row, size, SHA-256). The folder is written beside ``DIR``
and renamed into place: a crash never leaves a half dataset under ``DIR``. The ranges of the
file and the buckets are read and written by forked processes, or (given a Dask client) by
tasks on the workers (:func:`cluster_map`): the caller then reads none of the rows.

:func:`write_dataset_from_db` writes the same layout from the fixes stored in PostGIS, closed
local day by closed day (``source.kind`` ``"database"``; ``row``: the ordinal in (local day,
``vehicle_id``, time) order), and appends the closed days a database dataset lacks (new files
first, the manifest last by rename).

:func:`analyze_dataset` runs one task per bucket (a bucket holds whole vehicles, every day):
the task reads its files (checking their size and SHA-256), puts the rows in file order,
validates them and runs the vehicle stage (:func:`engines.buckets.analyze_bucket`); the
rejected rows keep the file's row numbers and the duplicate rule is the file's (a duplicate
is always of the same vehicle). Tasks run on a ``dask.distributed`` cluster (the workers read
the files: the folder must be on storage they share) or in forked processes. The caller reads
only the manifest and the malformed records (a worker reads those on a cluster with ``out``).
In forked processes it then gathers the tasks' results (:func:`engines.buckets.finish`), as
the file engine does; on a cluster the results stay on the workers, the client receives the
rejected rows (with ``out``, their counts: the workers write ``rejected.csv``) and the map
sample, and the gathered stage runs on the workers by each rule's key
(:func:`engines.distributed.gather_on_workers`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engines.buckets import (
    DEFAULT_BUCKET_FIXES,
    Mapper,
    analyze_bucket,
    bucket_extras,
    estimate_rows,
    finish,
    map_step,
    merge_extras,
    read_spilled,
    spill,
    vehicle_buckets,
    without_positions,
)
from engines.early import SPILL_CHUNK_ROWS
from engines.partitions import stage_context
from engines.pipeline import (
    AnalysisParams,
    AnalysisResult,
    Progress,
    merge_part_file,
    no_progress,
    rejected_columns,
    rejected_counts,
    rejected_summary,
    write_rejected_part,
)
from geo.roads import RoadGraph
from runtime import forked_map
from tracking import frames as fr
from tracking.detectors.detect import Thresholds
from tracking.detectors.findings import KINDS
from tracking.ingest import RawPings, text_series
from tracking.validate import timestamps_ns

FORMAT = "pontual-pings-dataset"
VERSION = 1
MANIFEST = "manifest.json"
MALFORMED = "malformed.parquet"
NO_DAY = "__HIVE_DEFAULT_PARTITION__"
"""Partition value of the rows without a readable timestamp (Hive's name for a null)."""

DB_BUFFER_ROWS = 500_000
"""Fixes from the database waiting to be written at most (then a row group per bucket)."""
RECHECK_DAYS = 7
"""Last days of a database dataset an append counts again for fixes that came late."""
DB_BLOCK_BYTES = 1 << 20
"""Bytes of the database's CSV stream parsed at a time (the export of 6M fixes peaked at 0.81 GB
with 8 MiB blocks, 0.48 GB with 1 MiB, no slower)."""

_DAY_NS = 86_400_000_000_000
_HASH_BLOCK = 1 << 20


class DatasetError(ValueError):
    """A pings dataset is missing, incomplete, altered, or its folder cannot be written."""


def is_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder with a dataset manifest."""
    return path.is_dir() and (path / MANIFEST).is_file()


# ------------------------------------------------------------------------------------ write


def write_dataset(
    path: str | Path,
    out: str | Path,
    *,
    timezone: str,
    n_buckets: int | None = None,
    bucket_fixes: int = DEFAULT_BUCKET_FIXES,
    jobs: int = 1,
    chunk_rows: int = SPILL_CHUNK_ROWS,
    force: bool = False,
    client: Any = None,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Write a pings file as a dataset in ``out`` (see the module docstring).

    Parameters
    ----------
    path : str or pathlib.Path
        A pings file (CSV, CSV.gz or Parquet) in the public format.
    out : str or pathlib.Path
        The dataset's folder: absent or empty, or (with ``force``) a dataset to replace.
    timezone : str
        IANA zone of the local days.
    n_buckets : int, optional
        Vehicle buckets; default one per ``bucket_fixes`` rows.
    bucket_fixes : int, default 500,000
        Rows per bucket aimed at when ``n_buckets`` is not given.
    jobs : int, default 1
        Processes reading (a plain CSV as byte ranges) and writing buckets at once.
    chunk_rows : int, default 250,000
        Rows read at a time.
    force : bool, default False
        Replace an existing dataset in ``out``.
    client : distributed.Client, optional
        Read and write on this Dask cluster's workers instead of forked processes (``jobs``
        ignored): one task per range of the file (as many ranges as the workers have threads;
        a CSV.gz or a small file is one task), then one per bucket. This process computes the
        ranges and writes the manifest; it never holds the rows. The workers must see ``path``
        and the folder of ``out`` at the same paths.
    progress : callable
        Called with a pt-BR label at each step.

    Returns
    -------
    dict
        The manifest.

    Raises
    ------
    DatasetError
        ``out`` is a file, or a folder not empty (without ``force``, or not a dataset), or a
        size is not a positive integer, or (``client``) a worker does not see ``path`` or the
        folder of ``out``.
    UnsupportedFormatError, EmptyFileError, MalformedFileError, MissingColumnsError,
    ReservedColumnError, FileNotFoundError
        As :func:`tracking.ingest.read_pings`.
    """
    _check_sizes(n_buckets=n_buckets, bucket_fixes=bucket_fixes, jobs=jobs)
    target = Path(out)
    _check_target(target, force=force)
    source = RawPings.open(Path(path).absolute(), chunk_rows=chunk_rows)
    buckets = n_buckets or max(1, math.ceil(estimate_rows(source) / bucket_fixes))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        mapper: Mapper = functools.partial(forked_map, jobs=jobs)
        if client is not None:
            _check_workers_see(client, source.path, tmp)
            jobs = max(1, sum(client.nthreads().values()))
            mapper = cluster_map(client)
        progress(f"Lendo e separando os pings em {buckets} partição(ões) por veículo")
        (tmp / ".spill").mkdir()
        n_rows, spilled = spill(source, tmp / ".spill", buckets, jobs=jobs, mapper=mapper)
        # the bucket tasks need the malformed records' numbers, not their text
        numbers = dataclasses.replace(source, bad=[(n, "") for n, _ in source.bad or []])
        writer = functools.partial(
            _write_bucket, source=numbers, folder=tmp, timezone=timezone, spilled=spilled
        )
        files: list[dict[str, Any]] = []
        order = sorted(spilled)
        for done, written in enumerate(mapper(writer, order), start=1):
            progress(f"Gravando partição {done}/{len(order)}")
            files += written
        shutil.rmtree(tmp / ".spill")
        progress("Gravando o manifesto")
        bad = source.bad or []
        malformed = _write_malformed(tmp / MALFORMED, bad)
        manifest = _manifest(
            {
                "kind": "file",
                "name": source.path.name,
                "size_bytes": source.path.stat().st_size,
                "sha256": _sha256(source.path),
                "format": "csv" if source.is_csv else "parquet",
                "csv_columns": list(source.names),
                "csv_delimiter": source.delimiter,
                "integral_ids": sorted(source.integral_ids),
            },
            timezone=timezone,
            n_buckets=buckets,
            rows=n_rows,
            schema=pq.read_schema(tmp / files[0]["path"]),
            malformed=malformed,
            files=files,
        )
        _write_manifest(tmp, manifest)
        _swap(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def cluster_map(client: Any) -> Mapper:
    """Return a :data:`engines.buckets.Mapper` running each item as a task on ``client``'s cluster.

    Results come back in the items' order; a task's error is raised here as the worker raised
    it, and the tasks left are cancelled.
    """

    def run(func: Any, items: Sequence[Any]) -> Iterator[Any]:
        futures = client.map(func, list(items), pure=False)
        try:
            for future in futures:
                yield future.result()
        finally:
            client.cancel(futures)

    return run


def _check_workers_see(client: Any, source: Path, folder: Path) -> None:
    """Raise :class:`DatasetError` unless every worker sees the file and the folder."""
    seen = client.run(_sees, str(source), str(folder))
    blind = sorted(address for address, ok in seen.items() if not ok)
    if blind:
        msg = (
            f"o(s) worker(s) Dask {', '.join(blind)} não veem {source} ou a pasta temporária "
            f"{folder}: com --scheduler, --pings e TMPDIR devem estar em armazenamento "
            "compartilhado, no mesmo caminho em todas as máquinas"
        )
        raise DatasetError(msg)


def _sees(source: str, folder: str) -> bool:
    return os.path.isfile(source) and os.path.isdir(folder)


def write_dataset_from_db(
    engine: Any,
    out: str | Path,
    *,
    timezone: str,
    municipality: str | None = None,
    first_day: dt.date | None = None,
    last_day: dt.date | None = None,
    n_buckets: int | None = None,
    bucket_fixes: int = DEFAULT_BUCKET_FIXES,
    append: bool = False,
    recheck_days: int = RECHECK_DAYS,
    force: bool = False,
    today: dt.date | None = None,
    progress: Progress = no_progress,
) -> tuple[dict[str, Any], list[str]]:
    """Write the fixes stored in PostGIS as a dataset in ``out``, or append its new closed days.

    The fixes of each local day (``timezone``), from ``first_day`` to ``last_day`` inclusive,
    are streamed in ``(vehicle_id, ts)`` order (:func:`db.tracking.export.stream_fixes`) and
    written by vehicle bucket as they come: memory does not grow with the days. A row's number
    (``row``) is its ordinal in (local day, ``vehicle_id`` bytewise, ``ts``) order over the
    dataset's days, from 1; an append continues the numbering. The manifest's ``source`` says
    ``"kind": "database"``, the municipality, the days covered (``first_day``, ``last_day``) and
    the rows.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The database.
    out : str or pathlib.Path
        The dataset's folder: absent or empty, or (with ``force``) a dataset to replace, or
        (with ``append``) a dataset written from this database.
    timezone : str
        IANA zone of the local days.
    municipality : str, optional
        IBGE code: the fixes of vehicles registered in another municipality are left out
        (vehicles the registry lacks are kept: the unlicensed are judged on them).
    first_day : datetime.date, optional
        First local day; default the day of the earliest stored fix (with ``append``: the day
        after the dataset's last; giving it then is an error).
    last_day : datetime.date, optional
        Last local day; default and at most the last closed day (``today`` − 1): a day still
        being ingested is never written.
    n_buckets : int, optional
        Vehicle buckets; default one per ``bucket_fixes`` fixes (with ``append``: the dataset's).
    bucket_fixes : int, default 500,000
        Fixes per bucket aimed at when ``n_buckets`` is not given.
    append : bool, default False
        Add to the dataset in ``out`` only the closed days after its last: the new files first,
        then the manifest through a temporary file renamed over the old one (a crash leaves the
        old manifest valid and the new files unlisted). Absent or empty ``out``: written whole.
    recheck_days : int, default 7
        With ``append``: the dataset's last days whose stored fixes are counted again. A day
        whose count changed since it was written (fixes uploaded late, or removed) is written
        again, with every later day (the row numbers follow the days); the superseded files are
        deleted after the new manifest is in place. 0: no recount.
    force : bool, default False
        Replace an existing dataset in ``out``.
    today : datetime.date, optional
        The current local day (default: the clock's, in ``timezone``).
    progress : callable
        Called with a pt-BR label at each step.

    Returns
    -------
    manifest, span
        The manifest, and the first and last local day written now (ISO dates; empty when no
        closed day was lacking or changed).

    Raises
    ------
    DatasetError
        Bad days (``first_day`` after ``last_day``, ``last_day`` not closed), no stored fix in
        the days of a new dataset, ``out`` not writable as asked, or (``append``) ``out`` a
        dataset from a file or of another municipality, zone or bucket count.
    """
    from db.tracking.export import EXPORT_SCHEMA, fixes_by_day

    _check_sizes(n_buckets=n_buckets, bucket_fixes=bucket_fixes)
    if isinstance(recheck_days, bool) or not isinstance(recheck_days, int) or recheck_days < 0:
        msg = f"'recheck_days' era {recheck_days!r}; esperado um inteiro >= 0"
        raise DatasetError(msg)
    target = Path(out)
    zone = ZoneInfo(timezone)
    today = today or dt.datetime.now(zone).date()
    closed = today - dt.timedelta(days=1)
    if last_day is not None and last_day > closed:
        msg = (
            f"--to era {last_day.isoformat()}; o último dia fechado em {timezone} é "
            f"{closed.isoformat()} (um dia ainda aberto nunca é gravado pela metade)"
        )
        raise DatasetError(msg)
    last_day = last_day or closed
    old = _appendable(target, timezone=timezone, municipality=municipality) if append else None
    if old is None:
        _check_target(target, force=force)
    else:
        if first_day is not None:
            msg = "--from não vale com --append: o conjunto continua do dia seguinte ao seu último"
            raise DatasetError(msg)
        if n_buckets is not None and n_buckets != old["n_buckets"]:
            msg = (
                f"--buckets era {n_buckets}; o conjunto em {target} tem {old['n_buckets']} "
                "grupos de veículos (omita --buckets ou grave um conjunto novo)"
            )
            raise DatasetError(msg)
        old_last = dt.date.fromisoformat(old["source"]["last_day"])
        if last_day < old_last:
            return old, []
        first_day = max(
            dt.date.fromisoformat(old["source"]["first_day"]),
            old_last - dt.timedelta(days=recheck_days - 1),
        )
        if recheck_days == 0:
            first_day = old_last + dt.timedelta(days=1)
        if first_day > last_day:
            return old, []
    if first_day is not None and first_day > last_day:
        msg = f"--from ({first_day.isoformat()}) é depois de --to ({last_day.isoformat()})"
        raise DatasetError(msg)
    progress("Contando os pings gravados no banco, por dia")
    with engine.connect() as conn:
        per_day = fixes_by_day(
            conn,
            timezone=timezone,
            start=_day_start(first_day, zone) if first_day is not None else None,
            end=_day_start(last_day + dt.timedelta(days=1), zone),
            municipality=municipality,
        )
    superseded: list[dict[str, Any]] = []
    if old is not None and first_day is not None:
        first_day, superseded = _changed_days(old, per_day, first_day=first_day)
        per_day = {d: n for d, n in per_day.items() if d >= first_day}
        if not per_day and not superseded:
            return old, []
    n_fixes = sum(per_day.values())
    if old is None and n_fixes == 0:
        since = f"de {first_day.isoformat()} " if first_day is not None else ""
        where = f" (município {municipality})" if municipality else ""
        msg = f"nenhum ping gravado no banco {since}até {last_day.isoformat()}{where}"
        raise DatasetError(msg)
    if first_day is None:
        first_day = min(per_day)
    days = sorted(per_day)
    part = 0
    if old is not None:
        buckets = int(old["n_buckets"])
        row0 = int(old["rows"]) - sum(int(f["rows"]) for f in superseded)
        folder = target
        part = 1 + max(_part_number(f["path"]) for f in old["files"]) if superseded else 0
    else:
        buckets = n_buckets or max(1, math.ceil(n_fixes / bucket_fixes))
        row0 = 0
        target.parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    schema = EXPORT_SCHEMA.append(pa.field(fr.ROW, pa.int64()))
    try:
        files: list[dict[str, Any]] = []
        n_rows = row0
        for k, day in enumerate(days, start=1):
            done = f"{n_rows - row0}/{n_fixes}"
            progress(f"Gravando o dia {day.isoformat()} ({k}/{len(days)}; {done} pings)")
            written, n_rows = _write_db_day(
                engine,
                folder,
                day,
                zone=zone,
                municipality=municipality,
                n_buckets=buckets,
                row0=n_rows,
                schema=schema,
                part=part,
                buffer_rows=DB_BUFFER_ROWS,
                block_bytes=DB_BLOCK_BYTES,
            )
            files += written
        progress("Gravando o manifesto")
        if old is None:
            malformed = _write_malformed(folder / MALFORMED, [])
            first = first_day
        else:
            malformed = old["malformed"]
            gone = {f["path"] for f in superseded}
            files = [*(f for f in old["files"] if f["path"] not in gone), *files]
            first = dt.date.fromisoformat(old["source"]["first_day"])
        manifest = _manifest(
            {
                "kind": "database",
                "format": "parquet",
                "csv_columns": [],
                "integral_ids": [],
                "municipality": municipality,
                "first_day": first.isoformat(),
                "last_day": last_day.isoformat(),
                "rows": n_rows,
                "row_order": "local day, vehicle_id (bytewise), timestamp",
            },
            timezone=timezone,
            n_buckets=buckets,
            rows=n_rows,
            schema=schema,
            malformed=malformed,
            files=files,
        )
        _write_manifest(folder, manifest)
        if old is None:
            _swap(folder, target)
    except BaseException:
        if old is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    for entry in superseded:  # listed no more: the new manifest is in place
        (target / entry["path"]).unlink(missing_ok=True)
    return manifest, [first_day.isoformat(), last_day.isoformat()]


def _changed_days(
    old: dict[str, Any], stored: dict[dt.date, int], *, first_day: dt.date
) -> tuple[dt.date, list[dict[str, Any]]]:
    """Return the first day to write and the files of ``old`` that writing supersedes.

    ``stored`` counts the fixes in the database per local day from ``first_day`` on. The
    dataset's days from ``first_day`` whose rows differ from the stored count are written
    again from the earliest of them (later days too: the rows are numbered across the days);
    without one, writing starts the day after the dataset's last.
    """
    last = dt.date.fromisoformat(old["source"]["last_day"])
    rows: dict[dt.date, int] = {}
    for entry in old["files"]:
        day = dt.date.fromisoformat(entry["day"])
        if day >= first_day:
            rows[day] = rows.get(day, 0) + int(entry["rows"])
    checked = [first_day + dt.timedelta(days=k) for k in range((last - first_day).days + 1)]
    changed = [d for d in checked if stored.get(d, 0) != rows.get(d, 0)]
    if not changed:
        return last + dt.timedelta(days=1), []
    start = min(changed)
    return start, [f for f in old["files"] if dt.date.fromisoformat(f["day"]) >= start]


def _part_number(path: str) -> int:
    """Return the ``k`` of a file ``…/part-k.parquet``."""
    return int(Path(path).stem.removeprefix("part-"))


def _day_start(day: dt.date, zone: ZoneInfo) -> dt.datetime:
    """Return the UTC instant local ``day`` starts at."""
    return dt.datetime.combine(day, dt.time(), tzinfo=zone).astimezone(dt.UTC)


def _appendable(target: Path, *, timezone: str, municipality: str | None) -> dict[str, Any] | None:
    """Return the manifest of the database dataset ``target`` to append to (None: absent/empty).

    Raises
    ------
    DatasetError
        ``target`` is a file, a folder that is no dataset, a dataset from a file, or one of
        another municipality or zone.
    """
    if target.exists() and not target.is_dir():
        msg = f"a saída {target} é um arquivo; esperado uma pasta (nova, vazia ou um conjunto)"
        raise DatasetError(msg)
    if not target.is_dir() or not any(target.iterdir()):
        return None
    manifest = read_manifest(target)
    source = manifest["source"]
    if source.get("kind", "file") != "database":
        msg = (
            f"--append: o conjunto em {target} foi gravado de um arquivo ({source.get('name')}), "
            "não do banco; grave um conjunto novo com --from-db"
        )
        raise DatasetError(msg)
    if source.get("municipality") != municipality:
        had = source.get("municipality") or "(todos)"
        msg = (
            f"--append: o conjunto em {target} é do município {had}, não de "
            f"{municipality or '(todos)'}; use o mesmo --municipality ou um conjunto novo"
        )
        raise DatasetError(msg)
    if manifest["timezone"] != timezone:
        msg = (
            f"--append: os dias do conjunto em {target} são de {manifest['timezone']}, não de "
            f"{timezone}; use o mesmo fuso ou um conjunto novo"
        )
        raise DatasetError(msg)
    return manifest


def _write_db_day(
    engine: Any,
    folder: Path,
    day: dt.date,
    *,
    zone: ZoneInfo,
    municipality: str | None,
    n_buckets: int,
    row0: int,
    schema: pa.Schema,
    part: int,
    buffer_rows: int,
    block_bytes: int,
) -> tuple[list[dict[str, Any]], int]:
    """Stream one local day's fixes into a file per bucket; return the entries and last row.

    Rows wait in per-bucket buffers until ``buffer_rows`` wait in all, then each bucket's are
    written as one row group: memory stays bounded and row groups are not one block's share
    (writing on a thread while the next rows stream in did not pay on 2 cores).
    """
    from db.tracking.export import stream_fixes

    name = day.isoformat()
    writers: dict[int, pq.ParquetWriter] = {}
    waiting: dict[int, list[pa.Table]] = {}
    row = row0

    def write(buffers: dict[int, list[pa.Table]]) -> None:
        for b in sorted(buffers):
            if b not in writers:
                path = folder / _part_path(name, b, part=part)
                path.parent.mkdir(parents=True, exist_ok=True)
                writers[b] = pq.ParquetWriter(path, schema)
            writers[b].write_table(pa.concat_tables(buffers[b]), row_group_size=1 << 30)

    def flush() -> None:
        write(waiting)
        waiting.clear()

    try:
        with engine.connect() as conn:
            tables = stream_fixes(
                conn,
                start=_day_start(day, zone),
                end=_day_start(day + dt.timedelta(days=1), zone),
                municipality=municipality,
                block_bytes=block_bytes,
            )
            for block in tables:
                n = block.num_rows
                rows = pa.array(np.arange(row + 1, row + n + 1, dtype=np.int64))
                block = block.append_column(fr.ROW, rows)
                bucket = vehicle_buckets(
                    pc.utf8_trim_whitespace(block.column(fr.VEHICLE_ID)), n_buckets
                )
                order = np.argsort(bucket, kind="stable")  # rows stay in order within a bucket
                cut = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
                block = block.take(pa.array(order, type=pa.int64()))
                for b in np.flatnonzero(cut[1:] > cut[:-1]).tolist():
                    waiting.setdefault(b, []).append(block.slice(cut[b], cut[b + 1] - cut[b]))
                if row // buffer_rows != (row + n) // buffer_rows:
                    flush()
                row += n
            flush()
    finally:
        for writer in writers.values():
            writer.close()
    entries = [
        _file_entry(folder, _part_path(name, b, part=part), day=name, bucket=b)
        for b in sorted(writers)
    ]
    return entries, row


def _manifest(
    source: dict[str, Any],
    *,
    timezone: str,
    n_buckets: int,
    rows: int,
    schema: pa.Schema,
    malformed: dict[str, Any],
    files: list[dict[str, Any]],
) -> dict[str, Any]:
    """Return a manifest (files by bucket, then day; the day-less first)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "source": source,
        "timezone": timezone,
        "n_buckets": n_buckets,
        "rows": rows,
        "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
        "malformed": malformed,
        "files": sorted(files, key=lambda f: (f["bucket"], f["day"] or "")),
    }


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``folder``'s manifest through a temporary file renamed over it (atomic)."""
    tmp = folder / f".{MANIFEST}.tmp"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / MANIFEST)


def _part_path(day: str | None, bucket: int, *, part: int = 0) -> Path:
    """Relative path of a (local day, bucket) file; ``None``: the day-less partition.

    ``part`` > 0 names a day written again beside the files the manifest still lists.
    """
    return Path(f"day={day or NO_DAY}") / f"bucket={bucket}" / f"part-{part}.parquet"


def _file_entry(folder: Path, rel: Path, *, day: str | None, bucket: int) -> dict[str, Any]:
    """Return a written file's manifest entry (rows, first/last ``row``, size, SHA-256)."""
    meta = pq.ParquetFile(folder / rel)
    rows = meta.read(columns=[fr.ROW]).column(0).to_numpy() if meta.metadata.num_rows else []
    return {
        "path": rel.as_posix(),
        "day": day,
        "bucket": bucket,
        "rows": meta.metadata.num_rows,
        "first_row": int(np.min(rows)) if len(rows) else None,
        "last_row": int(np.max(rows)) if len(rows) else None,
        "size_bytes": (folder / rel).stat().st_size,
        "sha256": _sha256(folder / rel),
    }


def _check_sizes(**values: Any) -> None:
    """Raise :class:`DatasetError` unless each given value is None or a positive integer."""
    for name, value in values.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            msg = f"'{name}' era {value!r}; esperado um inteiro positivo"
            raise DatasetError(msg)


def _check_target(target: Path, *, force: bool) -> None:
    if target.exists() and not target.is_dir():
        msg = f"a saída {target} é um arquivo; esperado uma pasta (nova, vazia ou um conjunto)"
        raise DatasetError(msg)
    if not target.is_dir() or not any(target.iterdir()):
        return
    if not is_dataset(target):
        msg = (
            f"a pasta de saída {target} não está vazia e não é um conjunto de pings "
            "(sem manifest.json): escolha uma pasta nova ou vazia"
        )
        raise DatasetError(msg)
    if not force:
        msg = (
            f"a pasta de saída {target} já tem um conjunto de pings; use --force para substituí-lo"
        )
        raise DatasetError(msg)


def _swap(tmp: Path, target: Path) -> None:
    """Put the finished folder ``tmp`` at ``target`` by renames (the old one removed after)."""
    if not target.exists():
        os.replace(tmp, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.replace(target, old / "dataset")
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def _write_bucket(
    bucket: int,
    *,
    source: RawPings,
    folder: Path,
    timezone: str,
    spilled: dict[int, Any],
) -> list[dict[str, Any]]:
    """Write one spilled bucket as a Parquet file per local day; return their entries."""
    table = read_spilled(source, spilled[bucket])
    day = _local_days(source, table, timezone)
    order = np.argsort(day, kind="stable")  # rows stay in file order within a day
    day = day[order]
    table = table.take(pa.array(order, type=pa.int64()))
    starts = np.flatnonzero(np.r_[True, day[1:] != day[:-1]]) if len(day) else np.zeros(1, int)
    bounds = [*starts.tolist(), len(day)]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        code = int(day[lo]) if len(day) else None
        name = None if code is None or code == _NO_DAY_CODE else _day_text(code)
        rel = _part_path(name, bucket)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(lo, hi - lo), folder / rel)
        out.append(_file_entry(folder, rel, day=name, bucket=bucket))
    return out


_NO_DAY_CODE = np.iinfo(np.int64).max


def _local_days(source: RawPings, table: pa.Table, timezone: str) -> np.ndarray:
    """Local day of each row (days since 1970-01-01), :data:`_NO_DAY_CODE` if not readable."""
    if source.is_csv:
        cells = text_series(table.column(fr.TIMESTAMP))
    else:
        name = next(n for n in table.column_names if n.strip() == fr.TIMESTAMP)
        cells = source.frame(table.select([name, fr.ROW]))[fr.TIMESTAMP]
    ns, ok = timestamps_ns(cells)
    days = np.full(len(ns), _NO_DAY_CODE, dtype=np.int64)
    if ok.any():
        utc = pd.DatetimeIndex(ns[ok].view("datetime64[ns]")).tz_localize("UTC")
        local = utc.tz_convert(timezone).tz_localize(None).asi8
        days[ok] = local // _DAY_NS
    return days


def _day_text(code: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=code)).isoformat()


def _write_malformed(path: Path, bad: list[tuple[int | None, str]]) -> dict[str, Any]:
    """Keep the malformed CSV records as read (line as Arrow numbers it, text)."""
    table = pa.table(
        {
            "line": pa.array([n for n, _ in bad], type=pa.int64()),
            "text": pa.array([t for _, t in bad], type=pa.large_string()),
        }
    )
    pq.write_table(table, path)
    return {
        "path": MALFORMED,
        "rows": len(bad),
        "size_bytes": path.stat().st_size,
        "sha256": _sha256(path),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------- read


_FILE_KEYS = ("path", "day", "bucket", "rows", "first_row", "last_row", "size_bytes", "sha256")


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """Read and check a dataset's manifest, and that every file it names is there, whole.

    Files are checked by size here; their SHA-256 by whoever reads them.

    Raises
    ------
    DatasetError
        No manifest, not a manifest of this format or version, a file missing or of another
        size (the message names the file).
    """
    root = Path(folder)
    path = root / MANIFEST
    if not path.is_file():
        msg = (
            f"{root} não é um conjunto de pings: falta o {MANIFEST} "
            "(grave o conjunto com pontual dataset write)"
        )
        raise DatasetError(msg)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise TypeError("esperado um objeto JSON")
        kind, version = manifest.get("format"), manifest.get("version")
        if kind != FORMAT:
            raise TypeError(f"'format' era {kind!r}; esperado {FORMAT!r}")
        if version != VERSION:
            raise TypeError(f"versão {version!r} não suportada; esperado {VERSION}")
        entries = [*manifest["files"], manifest["malformed"]]
        for entry in manifest["files"]:
            missing = [k for k in _FILE_KEYS if k not in entry]
            if missing:
                raise KeyError(", ".join(missing))
        manifest["source"]["format"], manifest["timezone"], manifest["rows"]  # noqa: B018
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError) as exc:
        msg = f"{path}: manifesto inválido ({exc})"
        raise DatasetError(msg) from None
    for entry in entries:
        file = root / entry["path"]
        if not file.is_file():
            msg = f"{root}: falta o arquivo {entry['path']} do manifesto; grave o conjunto de novo"
            raise DatasetError(msg)
        size = file.stat().st_size
        if size != entry["size_bytes"]:
            msg = (
                f"{root}: o arquivo {entry['path']} tem {size} bytes e o manifesto diz "
                f"{entry['size_bytes']}: foi alterado; grave o conjunto de novo"
            )
            raise DatasetError(msg)
    return manifest


def _read_checked(root: Path, entry: dict[str, Any]) -> pa.Table:
    """Read one file of the manifest, checking its SHA-256 and rows."""
    data = (root / entry["path"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        msg = (
            f"{root}: o arquivo {entry['path']} não confere com o manifesto (SHA-256): "
            "foi alterado; grave o conjunto de novo"
        )
        raise DatasetError(msg)
    table = pq.ParquetFile(pa.BufferReader(data)).read()
    if table.num_rows != entry["rows"]:
        msg = (
            f"{root}: o arquivo {entry['path']} tem {table.num_rows} linhas e o manifesto diz "
            f"{entry['rows']}: foi alterado; grave o conjunto de novo"
        )
        raise DatasetError(msg)
    return table


def _raw_source(
    manifest: dict[str, Any], root: Path, bad: list[tuple[int | None, str]]
) -> RawPings:
    """Return the source's reader, as far as turning its tables into raw frames goes."""
    source = manifest["source"]
    return RawPings(
        root / MANIFEST,
        1,
        names=list(source["csv_columns"]) if source["format"] == "csv" else [],
        integral_ids=set(source["integral_ids"]),
        bad=bad,
        delimiter=source.get("csv_delimiter", ","),
    )


def read_bucket(
    folder: str | Path, files: Sequence[dict[str, Any]], manifest: dict[str, Any]
) -> pd.DataFrame:
    """Return a bucket's raw rows (every day), in file order, as the file's reader gives them.

    ``manifest`` needs only its ``source`` and ``columns``.

    Raises
    ------
    DatasetError
        A file differs from the manifest (SHA-256, rows, columns).
    """
    root = Path(folder)
    names = [c["name"] for c in manifest["columns"]]
    tables = []
    for entry in files:
        table = _read_checked(root, entry)
        if table.column_names != names:
            msg = f"{root}: as colunas de {entry['path']} não são as do manifesto"
            raise DatasetError(msg)
        tables.append(table)
    table = pa.concat_tables(tables, promote_options="none")
    del tables
    rows = table.column(fr.ROW).to_numpy()
    if len(rows) > 1 and not bool(np.all(rows[1:] > rows[:-1])):
        table = table.take(pa.array(np.argsort(rows, kind="stable"), type=pa.int64()))
    return _raw_source(manifest, root, []).frame(table)


def bucket_task(
    files: Sequence[dict[str, Any]],
    *,
    folder: str,
    manifest: dict[str, Any],
    context: dict[str, Any],
    now: pd.Timestamp,
    step: int,
) -> dict[str, Any]:
    """Read, validate and analyse one bucket (:func:`engines.buckets.analyze_bucket`)."""
    raw = read_bucket(folder, files, manifest)
    return analyze_bucket(raw, context=context, now=now, step=step)


def malformed_rows(folder: str | Path, manifest: dict[str, Any]) -> pd.DataFrame:
    """Return the source's malformed records as rejected rows (``malformed_row``), in order."""
    root = Path(folder)
    table = _read_checked(root, manifest["malformed"])
    lines = table.column("line").to_pylist()
    texts = table.column("text").to_pylist()
    return _raw_source(manifest, root, list(zip(lines, texts, strict=True))).malformed()


def analyze_dataset(
    folder: str | Path,
    stands: gpd.GeoDataFrame,
    *,
    client: Any = None,
    fleet: pd.DataFrame | None = None,
    boundary: Any = None,
    roads: RoadGraph | None = None,
    as_of: dt.date | None = None,
    thresholds: Thresholds | None = None,
    kinds: tuple[str, ...] = KINDS,
    params: AnalysisParams | None = None,
    now: pd.Timestamp | None = None,
    jobs: int = 1,
    progress: Progress = no_progress,
    drivers: pd.DataFrame | None = None,
    driver_links: pd.DataFrame | None = None,
    stand_suspensions: pd.DataFrame | None = None,
    allowed_places: gpd.GeoDataFrame | None = None,
    parts: Path | None = None,
    out: Path | None = None,
    keep: frozenset[str] | None = None,
    propose: Any = None,
    send_findings: bool = True,
) -> tuple[AnalysisResult, pd.DataFrame]:
    """Analyse a dataset bucket by bucket (see the module docstring).

    Parameters
    ----------
    folder : str or pathlib.Path
        The dataset (:func:`write_dataset`); with ``client``, on storage the workers see.
    stands, fleet, boundary, roads, as_of, thresholds, kinds, params, progress
        As in :func:`engines.pipeline.analyze_pings`.
    client : distributed.Client, optional
        Run the buckets on this Dask cluster; else in ``jobs`` forked processes.
    now : pandas.Timestamp, optional
        Reference instant for future timestamps; defaults to the current time.
    jobs : int, default 1
        Buckets at once without ``client``; the gathered stage's processes in any case.
    drivers, driver_links, stand_suspensions : pandas.DataFrame, optional
        As in :func:`engines.buckets.analyze_file`.
    allowed_places : geopandas.GeoDataFrame, optional
        As in :func:`engines.buckets.analyze_file`.
    parts : pathlib.Path, optional
        With ``client``: an empty folder the workers see, where they write the findings, visits
        and trips as parts of the output files (see
        :func:`engines.distributed.gather_on_workers`).
    out : pathlib.Path, optional
        With ``parts``: the output folder (the workers see it), where the workers merge the
        parts into the contract files (the result's ``written``), ``rejected.csv`` included:
        the result's ``rejected`` is then empty (its columns only) and its summary counts them.
    keep : frozenset of str, optional
        With ``parts``: the findings' ``details`` keys the client receives (all without it).
    propose : engines.distributed.ProposalSpec, optional
        With ``parts``: the proposals made on the workers, as parts.
    send_findings : bool, default True
        With ``parts``: False, the client receives no finding (the result's are empty).

    Returns
    -------
    result, sample
        As :func:`engines.buckets.analyze_file` returns them for the source file.

    Raises
    ------
    DatasetError
        The dataset is missing, incomplete or altered.
    DistributedEngineError
        A bucket failed on the cluster for another reason (the worker's error is chained).
    """
    root = Path(folder).resolve()
    manifest = read_manifest(root)
    params = params or AnalysisParams()
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
    groups: dict[int, list[dict[str, Any]]] = {}
    for entry in manifest["files"]:
        groups.setdefault(int(entry["bucket"]), []).append(entry)
    buckets = [groups[b] for b in sorted(groups)]
    step = map_step(int(manifest["rows"]))
    spec = {k: manifest[k] for k in ("source", "columns")}  # what a task needs of it
    task = functools.partial(bucket_task, folder=str(root), manifest=spec, now=now, step=step)
    if client is not None:
        return _on_cluster(
            client,
            task,
            buckets,
            context,
            malformed=functools.partial(malformed_rows, str(root), manifest),
            parts=parts,
            out=out,
            keep=keep,
            propose=propose,
            send_findings=send_findings,
            progress=progress,
        )
    malformed = malformed_rows(root, manifest)
    results = []
    run = functools.partial(task, context=context)
    progress(f"Validando e analisando partição 0/{len(buckets)}")
    for done, bucket in enumerate(forked_map(run, buckets, jobs=jobs), start=1):
        progress(f"Validando e analisando partição {done}/{len(buckets)}")
        results.append(bucket)
    return finish(results, malformed, context, jobs=jobs, progress=progress)


def _on_cluster(
    client: Any,
    task: Any,
    buckets: list[list[dict[str, Any]]],
    context: dict[str, Any],
    *,
    malformed: Callable[[], pd.DataFrame],
    parts: Path | None,
    out: Path | None,
    keep: frozenset[str] | None,
    propose: Any,
    send_findings: bool,
    progress: Progress,
) -> tuple[AnalysisResult, pd.DataFrame]:
    """Run ``task`` on each bucket on the cluster, then the gathered stage on the workers.

    The buckets' results stay on the workers (:func:`engines.distributed.gather_on_workers`);
    the client receives their rejected rows and map samples only. With ``out``, the workers
    write ``rejected.csv`` too (:func:`_rejected_parts`): the client receives the rejected
    rows' counts by reason, and the result's ``rejected`` is empty.
    """
    from distributed import as_completed

    from engines.distributed import DistributedEngineError, gather_on_workers

    n_workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    progress(f"Distribuindo {len(buckets)} partições por veículo em {n_workers} worker(s)")
    [ctx] = client.scatter([context], broadcast=True)
    futures = client.map(task, buckets, context=ctx, pure=False)
    pending = None
    try:
        for done, future in enumerate(as_completed(futures), start=1):  # type: ignore[no-untyped-call]
            if future.status == "error":
                future.result()  # the worker's error, raised here
            progress(f"Validando e analisando partição {done}/{len(buckets)}")
        if out is None:
            extras = client.gather(client.map(bucket_extras, futures, pure=False))
            rejected, sample = merge_extras(malformed(), extras)
        else:
            folder = (parts or out) / "rejeitados"
            rejected, sample, pending = _rejected_parts(client, futures, malformed, folder=folder)
    except DatasetError:
        client.cancel(futures)
        raise
    except Exception as exc:
        client.cancel(futures)
        raise DistributedEngineError.partition_failed(exc) from exc
    try:
        result = gather_on_workers(
            client,
            futures,
            rejected,
            context,
            parts=parts,
            out=out,
            keep=keep,
            propose=propose,
            send_findings=send_findings,
            progress=progress,
        )
        if pending is not None and out is not None:
            result.summary |= rejected_summary(
                _merge_rejected(client, pending, out / "rejected.csv")
            )
            result.written = (*result.written, "rejected.csv")
    finally:
        client.cancel(futures)
    return without_positions(result), sample


@dataclasses.dataclass(frozen=True, kw_only=True)
class _RejectedParts:
    """The parts of ``rejected.csv`` being written on the workers (:func:`_rejected_parts`)."""

    written: list[Any]
    """The futures of the tasks writing them (each returns its part's path)."""
    columns: list[str]
    counts: dict[str, int]
    """The rejected rows by reason."""


def _rejected_parts(
    client: Any, futures: list[Any], malformed: Callable[[], pd.DataFrame], *, folder: Path
) -> tuple[pd.DataFrame, pd.DataFrame, _RejectedParts]:
    """Have the workers write the buckets' rejected rows as parts of ``rejected.csv``.

    ``malformed`` (run on a worker) gives the source's malformed records: the first part. Each
    bucket's rows become a part in ``folder`` where they are
    (:func:`engines.pipeline.write_rejected_part`). The client receives each bucket's columns,
    counts by reason and map sample, no row. Returns the result's (empty) rejected frame, the
    map sample and the parts (:func:`_merge_rejected` merges them).
    """
    from engines.distributed import summed_by_key

    held = [client.submit(malformed, pure=False), *futures]
    facts = client.gather(client.map(_rejected_facts, held, pure=False))
    heads = [head for head, _, _ in facts]
    columns = rejected_columns(heads)
    written = [
        client.submit(
            _rejected_part,
            done,
            str(folder / f"particao-{k:05d}.parquet"),
            columns=columns,
            pure=False,
        )
        for k, done in enumerate(held)
    ]
    sample = pd.concat([s for _, _, s in facts[1:]], ignore_index=True)
    counts = summed_by_key([c for _, c, _ in facts])
    pending = _RejectedParts(written=written, columns=columns, counts=counts)
    return pd.concat(heads, ignore_index=True)[columns], sample, pending


def _merge_rejected(client: Any, pending: _RejectedParts, path: Path) -> dict[str, int]:
    """Merge the parts of ``rejected.csv`` into ``path`` on a worker; return the counts by reason.

    The merge is given the parts' paths once written, not their futures: a task that depends
    on the buckets' results through them would be left released behind the merge, which Dask's
    cancelling of those results then trips on.
    """
    from engines.distributed import DistributedEngineError, narrowed_parts

    try:
        paths = [Path(p) for p in client.gather(pending.written)]
        done = client.submit(
            merge_part_file,
            "rejected.csv",
            narrowed_parts(client, paths),
            str(path),
            columns=pending.columns,
            pure=False,
        )
        client.gather(done)
    except Exception as exc:
        raise DistributedEngineError.partition_failed(exc) from exc
    return pending.counts


def _rejected_facts(
    done: pd.DataFrame | dict[str, Any],
) -> tuple[pd.DataFrame, dict[str, int], pd.DataFrame | None]:
    """Return a bucket's (or the malformed records') rejected columns, counts and sample."""
    if isinstance(done, pd.DataFrame):
        return done.iloc[:0], rejected_counts(done), None
    return done["rejected"].iloc[:0], rejected_counts(done["rejected"]), done["sample"]


def _rejected_part(done: pd.DataFrame | dict[str, Any], path: str, *, columns: list[str]) -> str:
    """Write a bucket's rejected rows (or the malformed records) as a part; return ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rejected = done if isinstance(done, pd.DataFrame) else done["rejected"]
    return write_rejected_part(rejected, path, columns=columns)
