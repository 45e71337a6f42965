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
and renamed into place: a crash never leaves a half dataset under ``DIR``.

:func:`analyze_dataset` runs one task per bucket (a bucket holds whole vehicles, every day):
the task reads its files (checking their size and SHA-256), puts the rows in file order,
validates them and runs the vehicle stage (:func:`engines.buckets.analyze_bucket`); the
rejected rows keep the file's row numbers and the duplicate rule is the file's (a duplicate
is always of the same vehicle). Tasks run on a ``dask.distributed`` cluster (the workers read
the files: the folder must be on storage they share) or in forked processes. The caller reads
only the manifest and the malformed records. In forked processes it then gathers the tasks'
results (:func:`engines.buckets.finish`), as the file engine does; on a cluster the results
stay on the workers, the client receives the rejected rows and the map sample, and the gathered
stage runs on the workers by each rule's key (:func:`engines.distributed.gather_on_workers`).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from engines.buckets import (
    DEFAULT_BUCKET_FIXES,
    SPILL_CHUNK_ROWS,
    analyze_bucket,
    bucket_extras,
    estimate_rows,
    finish,
    map_step,
    merge_extras,
    read_spilled,
    spill,
    without_positions,
)
from engines.partitions import stage_context
from engines.pipeline import AnalysisParams, AnalysisResult, Progress, no_progress
from geo.roads import RoadGraph
from runtime import forked_map
from tracking import frames as fr
from tracking.detectors.detect import Thresholds
from tracking.detectors.findings import KINDS
from tracking.ingest import RawPings
from tracking.validate import timestamps_ns

FORMAT = "pontual-pings-dataset"
VERSION = 1
MANIFEST = "manifest.json"
MALFORMED = "malformed.parquet"
NO_DAY = "__HIVE_DEFAULT_PARTITION__"
"""Partition value of the rows without a readable timestamp (Hive's name for a null)."""

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
        size is not a positive integer.
    UnsupportedFormatError, EmptyFileError, MalformedFileError, MissingColumnsError,
    ReservedColumnError, FileNotFoundError
        As :func:`tracking.ingest.read_pings`.
    """
    for name, value in (("n_buckets", n_buckets), ("bucket_fixes", bucket_fixes), ("jobs", jobs)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            msg = f"'{name}' era {value!r}; esperado um inteiro positivo"
            raise DatasetError(msg)
        if value is not None and value < 1:
            msg = f"'{name}' era {value!r}; esperado um inteiro positivo"
            raise DatasetError(msg)
    target = Path(out)
    _check_target(target, force=force)
    source = RawPings.open(path, chunk_rows=chunk_rows)
    buckets = n_buckets or max(1, math.ceil(estimate_rows(source) / bucket_fixes))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        progress(f"Lendo e separando os pings em {buckets} partição(ões) por veículo")
        (tmp / ".spill").mkdir()
        n_rows, spilled = spill(source, tmp / ".spill", buckets, jobs=jobs)
        writer = functools.partial(
            _write_bucket, source=source, folder=tmp, timezone=timezone, spilled=spilled
        )
        files: list[dict[str, Any]] = []
        order = sorted(spilled)
        for done, written in enumerate(forked_map(writer, order, jobs=jobs), start=1):
            progress(f"Gravando partição {done}/{len(order)}")
            files += written
        shutil.rmtree(tmp / ".spill")
        progress("Gravando o manifesto")
        bad = source.bad or []
        malformed = _write_malformed(tmp / MALFORMED, bad)
        schema = pq.read_schema(tmp / files[0]["path"])
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "source": {
                "name": source.path.name,
                "size_bytes": source.path.stat().st_size,
                "sha256": _sha256(source.path),
                "format": "csv" if source.is_csv else "parquet",
                "csv_columns": list(source.names),
                "integral_ids": sorted(source.integral_ids),
            },
            "timezone": timezone,
            "n_buckets": buckets,
            "rows": n_rows,
            "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
            "malformed": malformed,
            "files": sorted(files, key=lambda f: (f["bucket"], f["day"] or "")),
        }
        (tmp / MANIFEST).write_text(
            json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        _swap(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


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
        name = NO_DAY if code is None or code == _NO_DAY_CODE else _day_text(code)
        rel = Path(f"day={name}") / f"bucket={bucket}" / "part-0.parquet"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        part = table.slice(lo, hi - lo)
        pq.write_table(part, folder / rel)
        rows = part.column(fr.ROW).to_numpy()
        out.append(
            {
                "path": rel.as_posix(),
                "day": None if name == NO_DAY else name,
                "bucket": bucket,
                "rows": part.num_rows,
                "first_row": int(rows.min()) if len(rows) else None,
                "last_row": int(rows.max()) if len(rows) else None,
                "size_bytes": (folder / rel).stat().st_size,
                "sha256": _sha256(folder / rel),
            }
        )
    return out


_NO_DAY_CODE = np.iinfo(np.int64).max


def _local_days(source: RawPings, table: pa.Table, timezone: str) -> np.ndarray:
    """Local day of each row (days since 1970-01-01), :data:`_NO_DAY_CODE` if not readable."""
    if source.is_csv:
        cells = pd.Series(pd.array(table.column(fr.TIMESTAMP), dtype="str"))
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
    parts: Path | None = None,
    keep: frozenset[str] | None = None,
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
    parts : pathlib.Path, optional
        With ``client``: an empty folder the workers see, where they write the findings, visits
        and trips as parts of the output files (see
        :func:`engines.distributed.gather_on_workers`).
    keep : frozenset of str, optional
        With ``parts``: the findings' ``details`` keys the client receives (all without it).

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
    )
    groups: dict[int, list[dict[str, Any]]] = {}
    for entry in manifest["files"]:
        groups.setdefault(int(entry["bucket"]), []).append(entry)
    buckets = [groups[b] for b in sorted(groups)]
    step = map_step(int(manifest["rows"]))
    spec = {k: manifest[k] for k in ("source", "columns")}  # what a task needs of it
    task = functools.partial(bucket_task, folder=str(root), manifest=spec, now=now, step=step)
    malformed = malformed_rows(root, manifest)
    if client is not None:
        return _on_cluster(
            client,
            task,
            buckets,
            context,
            malformed=malformed,
            parts=parts,
            keep=keep,
            progress=progress,
        )
    results = []
    run = functools.partial(task, context=context)
    for done, out in enumerate(forked_map(run, buckets, jobs=jobs), start=1):
        progress(f"Validando e analisando partição {done}/{len(buckets)}")
        results.append(out)
    return finish(results, malformed, context, jobs=jobs, progress=progress)


def _on_cluster(
    client: Any,
    task: Any,
    buckets: list[list[dict[str, Any]]],
    context: dict[str, Any],
    *,
    malformed: pd.DataFrame,
    parts: Path | None,
    keep: frozenset[str] | None,
    progress: Progress,
) -> tuple[AnalysisResult, pd.DataFrame]:
    """Run ``task`` on each bucket on the cluster, then the gathered stage on the workers.

    The buckets' results stay on the workers (:func:`engines.distributed.gather_on_workers`);
    the client receives their rejected rows and map samples only.
    """
    from distributed import as_completed

    from engines.distributed import DistributedEngineError, gather_on_workers

    n_workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    progress(f"Distribuindo {len(buckets)} partições por veículo em {n_workers} worker(s)")
    [ctx] = client.scatter([context], broadcast=True)
    futures = client.map(task, buckets, context=ctx, pure=False)
    try:
        for done, future in enumerate(as_completed(futures), start=1):  # type: ignore[no-untyped-call]
            if future.status == "error":
                future.result()  # the worker's error, raised here
            progress(f"Validando e analisando partição {done}/{len(buckets)}")
        extras = client.gather(client.map(bucket_extras, futures, pure=False))
    except DatasetError:
        client.cancel(futures)
        raise
    except Exception as exc:
        client.cancel(futures)
        msg = f"uma partição falhou no cluster Dask: {exc!r}"
        raise DistributedEngineError(msg) from exc
    rejected, sample = merge_extras(malformed, extras)
    try:
        result = gather_on_workers(
            client, futures, rejected, context, parts=parts, keep=keep, progress=progress
        )
    finally:
        client.cancel(futures)
    return without_positions(result), sample
