"""Live ingest of GPS fixes sent by a device: the file ingest's validation, per-row answers.

A batch is checked with the rules and reason codes of :func:`tracking.validate.validate_pings`
(``pontual import pings``), its good fixes are stored in one statement, and each row gets an
answer:

``accepted``
    Stored now.
``duplicate``
    Already stored with the same values (same vehicle and instant at the database's precision,
    the microsecond), or the same as an earlier row of the batch. Safe to resend: ingest is
    idempotent on (vehicle, microsecond).
``rejected``
    Not stored; ``reason`` is a validation code (``null_island``, ``naive_timestamp``…),
    ``too_old_timestamp`` (older than the live ingest's ``max_age_s``: devices cannot write
    history, files can), ``vehicle_not_allowed`` (a device may only send fixes of its own
    vehicle), ``before_device`` (dated before the device was registered: a buffer from
    before, perhaps of another car) or ``conflicting_duplicate`` (the vehicle and microsecond
    of a stored fix, or of an earlier row of the batch, with other values: the first one is
    kept). Rejected rows are kept in ``rejected_fixes`` with their reason and original cells
    (each cut to :data:`MAX_RAW_CHARS` characters).

Same instant
    Rows are compared at the database's precision, the microsecond, by their values (position,
    speed, heading, accuracy, meter, tariff, driver): equal, ``duplicate``; different,
    ``conflicting_duplicate`` (:func:`_merge_microseconds`), so ``"FREE"`` and ``"free"``, or
    ``-30.030`` and ``"-30.03"``, are one fix. A batch with a cell of no plain form is judged by
    :func:`tracking.validate.validate_pings`, which compares rows of the same nanosecond by their
    cells, as the file import does. A row whose key is already stored is compared with the
    stored fix the same way, in one query on those keys only.

Validation
    One rule set: :data:`tracking.validate.ROW_RULES`, the table of row checks (reasons, order,
    bounds, :data:`~tracking.validate.MAX_ID_CHARS`, the instants' window) that
    :func:`tracking.validate.validate_pings` applies. Small JSON batches whose cells all have a
    form with one reading (numbers, ISO 8601 with an offset, Unix seconds, plain ``meter`` and
    ``driver_id`` words) are read in plain Python into :class:`tracking.validate.RowFields` and
    judged by :func:`tracking.validate.row_codes` from that table (:func:`check_batch`; pandas
    costs ~20 ms a request, the record reader ~1.5 ms for 100 fixes: bench/README.md); a batch
    with any other cell goes through :func:`tracking.validate.validate_pings` itself. Only the
    reading of cells and the duplicate checks (which compare rows) have a second form here; a
    property test compares both paths on random batches.
Instant's origin
    A row may carry ``_ts_origin`` (set by the OsmAnd route, never read from a client's JSON):
    stored in ``fixes.ts_origin`` (``naive_utc``: a time without offset read as UTC;
    ``received``: no time sent, the receive time used).
Storage
    ``INSERT … SELECT … FROM unnest(…) ON CONFLICT (vehicle_id, ts) DO NOTHING RETURNING ts``
    writes the fixes and, in the same statement, queues the inserted ones in ``live_queue`` for
    the live detectors (:mod:`api.live_worker`), so a fix is detected on once it is committed and
    the request does not wait for the detectors. The day's partition of ``fixes`` is ensured
    first (once per process and day). The fixes not inserted are read back (one query, only
    when there are some) to tell ``duplicate`` from ``conflicting_duplicate``. Rejected rows go
    to ``rejected_fixes``.

Body
    A device's JSON body (``POST /api/v1/pings``, Traccar Client's at ``/osmand``) is read once,
    at the edge, by :func:`read_device_json`: strict UTF-8, no key twice in one object (JSON
    leaves its value undefined; Python and pydantic silently keep the last), no integer beyond
    Python's 4,300-digit conversion limit, no lone surrogate. Any of these is a 422 naming the
    problem, before anything is stored.

The caller commits; answers are sent only after the commit, so an acknowledged fix is durable.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlalchemy.engine import Connection

from api._errors import UnreadableBodyError
from db.tracking.store import H3_RESOLUTION, MAX_RAW_CHARS, copy_rejected, ensure_fix_partitions
from geo.h3 import latlng_to_cells
from tracking import frames as fr
from tracking.validate import (
    CORRUPT_CHARS,
    FUTURE_TOLERANCE_S,
    MAX_SPEED_KMH,
    METER_INDEX,
    REJECTION_REASONS,
    UNSEEN_CHARS,
    RowFields,
    Window,
    row_codes,
    speed_flags,
    stored_instant_groups,
    unix_seconds_ns,
    unknown_as_missing,
    validate_pings,
)

ACCEPTED = "accepted"
DUPLICATE = "duplicate"
REJECTED = "rejected"
VEHICLE_NOT_ALLOWED = "vehicle_not_allowed"
BEFORE_DEVICE = "before_device"
"""A fix dated before its device was registered (beyond the clock skew allowed): a tracker's
buffer from before, perhaps of another car it was in; never charged to this vehicle."""


def device_sources(device_id: int) -> tuple[str, str]:
    """Return the ``source`` of a device's fixes and rejected rows: its JSON's, its OsmAnd's."""
    return f"api:device:{device_id}", f"osmand:device:{device_id}"


NOT_AN_OBJECT = "not_an_object"
"""A batch row that is not a JSON object (``null``, a number, a list): refused alone."""
SENT = "sent"
"""Key of a ``not_an_object`` row's quarantined cells holding what was sent, as JSON text."""
CONFLICTING_DUPLICATE = "conflicting_duplicate"
UNKNOWN_FIELD = "unknown_field"
"""A row with a key the contract does not have (``"taximetro"``, ``"speed"``): refused whole,
never stored without the value its sender meant (a resend with the right name would then be a
``conflicting_duplicate``)."""
RAW_COLUMNS = (*fr.PING_REQUIRED, *fr.PING_OPTIONAL)
TS_ORIGIN = "_ts_origin"
"""Row key of how the instant was obtained (``naive_utc``, ``received``; absent: as sent)."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate (``\\ud800``): its pair is checked after parsing."""
_KEY_SHOWN = 100
"""Characters of a repeated key named in the 422 message."""


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Build a JSON object, refusing a key given twice (``object_pairs_hook``)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return obj


def read_device_json(body: bytes) -> Any:
    """Parse a device's JSON body once, strictly (module docstring, Body).

    Raises
    ------
    UnreadableBodyError
        422, its ``kind`` naming why: the body is not UTF-8 or not JSON, holds a lone
        surrogate or nests too deep (``json_invalid``), repeats a key in one object
        (``json_duplicate_key``), holds an integer of more digits than Python converts
        (``json_number_too_long``).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"corpo JSON não está em UTF-8 (byte inválido na posição {exc.start})"
        raise UnreadableBodyError(msg, kind="json_invalid") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        key = exc.key[:_KEY_SHOWN]
        msg = f"chave {key!r} repetida num mesmo objeto JSON; cada chave deve aparecer uma vez"
        raise UnreadableBodyError(msg, kind="json_duplicate_key") from None
    except json.JSONDecodeError as exc:
        msg = f"JSON inválido (linha {exc.lineno}, coluna {exc.colno})"
        raise UnreadableBodyError(msg, kind="json_invalid") from None
    except ValueError:  # int(): digits beyond sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        msg = f"número com mais de {limit} dígitos no JSON"
        raise UnreadableBodyError(msg, kind="json_number_too_long") from None
    except RecursionError:
        raise UnreadableBodyError("JSON aninhado demais", kind="json_invalid") from None
    if _SURROGATE_ESCAPE.search(body):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            msg = "caractere Unicode inválido no JSON (metade de um par substituto, \\udXXX)"
            raise UnreadableBodyError(msg, kind="json_invalid") from None
    return data


@dataclass(frozen=True)
class RowResult:
    """What happened to one row of a batch (``row`` is 1-based)."""

    row: int
    status: str
    reason: str | None = None


@dataclass(eq=False)
class CheckedBatch:
    """A validated batch: answers decided by validation, the fixes to store, rejected rows.

    The fix arrays are aligned and sorted by (vehicle, time); floats are NaN when empty.
    ``bad`` holds the rows to quarantine: (row, reason, original cells as text).
    ``raw_rows`` are the batch's rows as sent (the cells of a row found in conflict with a
    stored fix); ``device_vehicle`` the vehicle of a row without one.
    """

    n: int
    answers: dict[int, RowResult]
    rows: NDArray[np.int64]
    vehicle_id: list[str]
    ts_ns: NDArray[np.int64]
    lat: NDArray[np.float64]
    lon: NDArray[np.float64]
    speed_kmh: NDArray[np.float64]
    heading_deg: NDArray[np.float64]
    accuracy_m: NDArray[np.float64]
    meter: list[str | None]
    tariff: list[int | None]
    driver_id: list[str | None]
    speed_flag: NDArray[np.bool_]
    bad: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    ts_origin: list[str | None] = field(default_factory=list)
    raw_rows: Sequence[Mapping[str, Any]] = ()
    device_vehicle: str = ""


def _cell(value: Any) -> str:
    """Return a JSON value as the text a CSV cell would hold.

    Missing is empty; an object or a list is its JSON text, which no rule reads as a value.
    """
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "nan"
    return str(value)


def raw_text(value: Any) -> str:
    """Return a value as quarantined text: its cell text cut to :data:`MAX_RAW_CHARS`."""
    return _cell(value)[:MAX_RAW_CHARS]


def raw_frame(rows: Sequence[Mapping[str, Any]], *, default_vehicle_id: str) -> pd.DataFrame:
    """Build the raw (text cells) frame :func:`validate_pings` takes from JSON rows.

    A row without ``vehicle_id`` is for ``default_vehicle_id`` (the device's vehicle).
    """
    data: dict[str, pd.Series] = {fr.ROW: pd.Series(np.arange(1, len(rows) + 1, dtype=np.int64))}
    for column in RAW_COLUMNS:
        cells = [_cell(r.get(column)) for r in rows]
        if column == fr.VEHICLE_ID:
            cells = [c or default_vehicle_id for c in cells]
        data[column] = pd.Series(cells, dtype="str")
    return pd.DataFrame(data)


def _cells(row: Mapping[str, Any], vehicle_id: str) -> dict[str, str]:
    out = {c: _cell(row.get(c)) for c in RAW_COLUMNS}
    out[fr.VEHICLE_ID] = out[fr.VEHICLE_ID] or vehicle_id
    return out


MAX_UNKNOWN_KEPT = 20
"""Keys outside the contract an ``unknown_field`` row keeps in the quarantine; the others are
counted (:data:`MORE_KEYS`). Each key is a column of the quarantine's frame: a row of 100,000
keys (1.6 MB) held the server for half a minute."""
MORE_KEYS = "campos_a_mais"
"""Key of an ``unknown_field`` row's quarantined cells: how many unknown keys were not kept."""


def _all_cells(row: Mapping[str, Any]) -> dict[str, str]:
    """Return a row's keys with their cell text, as the quarantine keeps them.

    The contract's keys first (absent ones empty), then the first :data:`MAX_UNKNOWN_KEPT`
    others, and the count of the rest (:data:`MORE_KEYS`).
    """
    extra = [k for k in row if k not in RAW_COLUMNS]
    cells = {c: _cell(row.get(c)) for c in RAW_COLUMNS}
    cells |= {str(k): _cell(row[k]) for k in extra[:MAX_UNKNOWN_KEPT]}
    if len(extra) > MAX_UNKNOWN_KEPT:
        cells[MORE_KEYS] = str(len(extra) - MAX_UNKNOWN_KEPT)
    return cells


# --- validation: cells read here or by validate_pings, judged by tracking.validate.ROW_RULES ---


def _slow_check(
    rows: Sequence[Mapping[str, Any]],
    *,
    vehicle_id: str,
    now: pd.Timestamp,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    not_before: pd.Timestamp | None = None,
) -> CheckedBatch:
    """Check a batch with :func:`validate_pings` (any cell, the reference behaviour)."""
    answers: dict[int, RowResult] = {}
    raw = raw_frame(rows, default_vehicle_id=vehicle_id)
    foreign = raw[fr.VEHICLE_ID].str.strip().to_numpy() != vehicle_id
    refused = raw.loc[foreign].assign(**{fr.REASON: VEHICLE_NOT_ALLOWED})
    for row in refused[fr.ROW].tolist():
        answers[int(row)] = RowResult(int(row), REJECTED, VEHICLE_NOT_ALLOWED)
    mine = raw.loc[~foreign].reset_index(drop=True)
    pings, rejected = validate_pings(
        mine,
        now=now,
        max_speed_kmh=MAX_SPEED_KMH,
        future_tolerance_s=future_tolerance_s,
        not_before=not_before,
    )
    for row, reason in zip(rejected[fr.ROW].tolist(), rejected[fr.REASON].tolist(), strict=True):
        if reason == "duplicate":
            answers[int(row)] = RowResult(int(row), DUPLICATE)
        else:
            answers[int(row)] = RowResult(int(row), REJECTED, str(reason))
    bad_frame = pd.concat(
        [refused, rejected.loc[rejected[fr.REASON] != "duplicate"]], ignore_index=True
    )
    bad = [
        (int(r[fr.ROW]), str(r[fr.REASON]), {c: str(r[c]) for c in RAW_COLUMNS})
        for r in bad_frame.to_dict("records")
    ]

    def floats(name: str) -> NDArray[np.float64]:
        return pings[name].to_numpy(dtype=np.float64, na_value=np.nan)

    def texts(name: str) -> list[str | None]:
        return [None if pd.isna(v) else str(v) for v in pings[name].tolist()]

    kept_rows = pings[fr.ROW].to_numpy(dtype=np.int64)
    batch = CheckedBatch(
        n=len(rows),
        answers=answers,
        rows=kept_rows,
        vehicle_id=[str(v) for v in pings[fr.VEHICLE_ID].tolist()],
        ts_ns=np.asarray(pd.DatetimeIndex(pings[fr.TIMESTAMP]).as_unit("ns").asi8),
        lat=floats(fr.LAT),
        lon=floats(fr.LON),
        speed_kmh=floats(fr.SPEED_KMH),
        heading_deg=floats(fr.HEADING_DEG),
        accuracy_m=floats(fr.ACCURACY_M),
        meter=texts(fr.METER),
        tariff=[None if pd.isna(v) else int(v) for v in pings[fr.TARIFF].tolist()],
        driver_id=texts(fr.DRIVER_ID),
        speed_flag=pings[fr.SPEED_FLAG].to_numpy(dtype=bool),
        bad=bad,
        ts_origin=[rows[r - 1].get(TS_ORIGIN) for r in kept_rows.tolist()],
        raw_rows=rows,
        device_vehicle=vehicle_id,
    )
    return _merge_microseconds(batch)


class _UnusualCellError(Exception):
    """A cell outside the forms the fast check reads; the batch takes the reference path."""


_OK, _MISSING, _INVALID = 0, 1, 2
_NAN = float("nan")
_NUMBER = re.compile(r"-?\d{1,15}(?:\.\d{1,15})?", re.ASCII)
_UNIX = re.compile(r"-?\d{1,12}(?:\.\d{1,9})?", re.ASCII)
_NO_FLOOR = np.iinfo(np.int64).min
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})",
    re.ASCII,
)
_WORD = re.compile(r"[A-Za-z0-9_]+")
_PLAIN = re.compile(r"[!-~](?:[ -~]*[!-~])?")  # printable ASCII, no blank at either end
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NS = 1_000_000_000


_UNSEEN = re.compile(UNSEEN_CHARS)


def _corrupt(text: str) -> bool:
    """Whether ``text`` holds a corrupt or an unseen character (:mod:`tracking.validate`)."""
    return any(c in text for c in CORRUPT_CHARS) or _UNSEEN.search(text) is not None


def _number(value: Any) -> tuple[float, int]:
    """Read a numeric cell: (value, _OK) or (NaN, _MISSING / _INVALID)."""
    if value is None or value == "":
        return _NAN, _MISSING
    if type(value) is float:
        return (value, _OK) if math.isfinite(value) else (_NAN, _INVALID)
    if type(value) is str and _NUMBER.fullmatch(value):
        return float(value), _OK
    raise _UnusualCellError


def _iso_ns(m: re.Match[str]) -> int:
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    if not 1900 <= y <= 2200 or h > 23 or mi > 59 or s > 59:  # noqa: PLR2004
        raise _UnusualCellError
    try:
        day = dt.date(y, mo, d).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        raise _UnusualCellError from None
    frac = m.group(7)
    offset = m.group(8)
    offset_s = 0
    if offset != "Z":
        hh, mm = int(offset[1:3]), int(offset[-2:])
        if hh > 23 or mm > 59:  # noqa: PLR2004
            raise _UnusualCellError
        offset_s = (hh * 3600 + mm * 60) * (-1 if offset[0] == "-" else 1)
    seconds = day * 86_400 + h * 3600 + mi * 60 + s - offset_s
    return seconds * _NS + (int(frac.ljust(9, "0")) if frac else 0)


def _timestamp(value: Any) -> tuple[int | None, int]:
    """Read a timestamp cell: (ns, _OK), (None, _MISSING) or (None, _INVALID).

    Unix seconds go through :func:`tracking.validate.unix_seconds_ns` as the file ingest reads
    them: text exactly, a JSON float as its shortest decimal (``repr``, the text the reference
    path is given).
    """
    if value is None or value == "":
        return None, _MISSING
    if type(value) is float:
        if not math.isfinite(value):
            raise _UnusualCellError
        text = repr(value)
    elif type(value) is str:
        m = _ISO.fullmatch(value)
        if m:
            return _iso_ns(m), _OK
        if not _UNIX.fullmatch(value):
            raise _UnusualCellError
        text = value
    else:
        raise _UnusualCellError
    ns = unix_seconds_ns(text)
    return (None, _INVALID) if ns is None else (ns, _OK)


def _word(value: Any) -> str:
    if value is None or value == "":
        return ""
    if type(value) is str and _WORD.fullmatch(value):
        return value.lower()
    raise _UnusualCellError


def _plain(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if type(value) is str and _PLAIN.fullmatch(value):
        return value
    raise _UnusualCellError


def _fast_check(
    rows: Sequence[Mapping[str, Any]],
    *,
    vehicle_id: str,
    now: pd.Timestamp,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    not_before: pd.Timestamp | None = None,
) -> CheckedBatch:
    """Check a batch whose cells all have plain forms; raise _UnusualCellError otherwise.

    The cells are read in Python into :class:`tracking.validate.RowFields` and judged by
    :func:`tracking.validate.row_codes` (the file ingest's rule table); only the duplicate
    checks, which compare rows, are done here. Every cell of every row is read (a rejected
    row's too): one unusual cell anywhere sends the whole batch to :func:`validate_pings`,
    whose column-wide parsing it could affect.
    """
    if not _PLAIN.fullmatch(vehicle_id):
        raise _UnusualCellError
    n = len(rows)
    read: list[tuple[Any, ...]] = []
    for r in rows:
        v = r.get(fr.VEHICLE_ID)
        other = not (v is None or v == "" or v == vehicle_id)
        if other and (type(v) is not str or v.strip() == vehicle_id):
            raise _UnusualCellError
        ns, ts_state = _timestamp(r.get(fr.TIMESTAMP))
        read.append(
            (
                other,
                *_number(r.get(fr.LAT)),
                *_number(r.get(fr.LON)),
                *_number(r.get(fr.TARIFF)),
                *_number(r.get(fr.SPEED_KMH)),
                *_number(r.get(fr.HEADING_DEG)),
                *_number(r.get(fr.ACCURACY_M)),
                ns or 0,
                ts_state,
                _word(r.get(fr.METER)),
                _plain(r.get(fr.DRIVER_ID)),
            )
        )
    cols = list(zip(*read, strict=True)) if read else [()] * 17
    foreign: tuple[bool, ...] = cols[0]
    ts_ns: tuple[int, ...] = cols[13]
    meters: tuple[str, ...] = cols[15]
    drivers: tuple[str | None, ...] = cols[16]

    def number(at: int) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
        """Values, missing and invalid masks of the number read at ``at`` in each tuple."""
        states = np.array(cols[at + 1], dtype=np.int8)
        return np.array(cols[at], dtype=np.float64), states == _MISSING, states == _INVALID

    lat, lat_missing, lat_invalid = number(1)
    lon, lon_missing, lon_invalid = number(3)
    tariff, _, tariff_invalid = number(5)
    speed, _, speed_invalid = number(7)
    heading, _, heading_invalid = number(9)
    accuracy, _, accuracy_invalid = number(11)
    speed, heading, accuracy = (unknown_as_missing(a) for a in (speed, heading, accuracy))
    ts_states = np.array(cols[14], dtype=np.int8)
    fields = RowFields(
        vehicle_chars=np.full(n, len(vehicle_id), dtype=np.int64),
        driver_chars=np.array([len(d) if d else 0 for d in drivers], dtype=np.int64),
        text_corrupt=np.array(
            [_corrupt(vehicle_id) or (d is not None and _corrupt(d)) for d in drivers], dtype=bool
        ),
        lat=lat,
        lat_missing=lat_missing,
        lat_invalid=lat_invalid,
        lon=lon,
        lon_missing=lon_missing,
        lon_invalid=lon_invalid,
        ts_ns=np.array(ts_ns, dtype=np.int64),
        ts_missing=ts_states == _MISSING,
        ts_unparseable=ts_states == _INVALID,
        ts_naive=np.zeros(n, dtype=bool),  # an ISO time without offset is not a plain cell
        meter_code=np.array([METER_INDEX.get(m, -1) for m in meters], dtype=np.int8),
        tariff=tariff,
        tariff_invalid=tariff_invalid,
        speed=speed,
        speed_invalid=speed_invalid,
        heading=heading,
        heading_invalid=heading_invalid,
        accuracy=accuracy,
        accuracy_invalid=accuracy_invalid,
    )
    floor_ns = _NO_FLOOR if not_before is None else not_before.value
    limit_ns = now.value + int(round(future_tolerance_s * 1e9))
    codes = row_codes(fields, Window(limit_ns=limit_ns, floor_ns=floor_ns)).tolist()

    answers: dict[int, RowResult] = {}
    bad: list[tuple[int, str, dict[str, str]]] = []
    kept: list[tuple[int, int]] = []  # (instant, index)
    groups: dict[int, list[tuple[Any, ...]]] = {}  # instant -> values of its rows (if met twice)
    first: dict[int, int] = {}  # instant -> index of its kept row
    numbers = (lat, lon, speed, heading, accuracy, tariff)

    def values(i: int) -> tuple[Any, ...]:
        """Return a row's values as stored: one fix written otherwise is the same fix."""
        read = (float(a[i]) for a in numbers)
        meter = int(fields.meter_code[i])
        return (*(None if math.isnan(x) else x for x in read), meter, drivers[i])

    for i, r in enumerate(rows):
        row = i + 1
        t = ts_ns[i]
        if foreign[i]:
            why = VEHICLE_NOT_ALLOWED
        elif codes[i]:
            why = REJECTION_REASONS[codes[i] - 1]
        else:
            if t not in first:
                first[t] = i
                kept.append((t, i))
                continue
            group = groups.get(t)
            if group is None:
                group = groups[t] = [values(first[t])]
            if (mine := values(i)) in group:
                answers[row] = RowResult(row, DUPLICATE)
                continue
            group.append(mine)
            why = CONFLICTING_DUPLICATE
        answers[row] = RowResult(row, REJECTED, why)
        bad.append((row, why, _cells(r, vehicle_id)))
    kept.sort(key=lambda k: k[0])
    at = np.array([k[1] for k in kept], dtype=np.intp)
    ts = np.array([k[0] for k in kept], dtype=np.int64)
    lat, lon = fields.lat[at], fields.lon[at]
    idx = at.tolist()
    batch = CheckedBatch(
        n=n,
        answers=answers,
        rows=at.astype(np.int64) + 1,
        vehicle_id=[vehicle_id] * len(idx),
        ts_ns=ts,
        lat=lat,
        lon=lon,
        speed_kmh=fields.speed[at],
        heading_deg=fields.heading[at],
        accuracy_m=fields.accuracy[at],
        meter=[meters[i] or None for i in idx],
        tariff=[None if math.isnan(t) else int(t) for t in fields.tariff[at].tolist()],
        driver_id=[drivers[i] for i in idx],
        speed_flag=speed_flags(
            np.zeros(len(idx), dtype=np.int32), ts, lat, lon, max_speed_kmh=MAX_SPEED_KMH
        ),
        bad=bad,
        ts_origin=[rows[i].get(TS_ORIGIN) for i in idx],
        raw_rows=rows,
        device_vehicle=vehicle_id,
    )
    return _merge_microseconds(batch)


def _values(batch: CheckedBatch, i: int) -> tuple[Any, ...]:
    """Return the stored values of kept fix ``i`` but its instant (NaN as None, as stored)."""
    numbers = (batch.lat, batch.lon, batch.speed_kmh, batch.heading_deg, batch.accuracy_m)
    floats = tuple(None if math.isnan(v) else v for v in (float(a[i]) for a in numbers))
    return (*floats, batch.meter[i], batch.tariff[i], batch.driver_id[i])


def _merge_microseconds(batch: CheckedBatch) -> CheckedBatch:
    """Keep one fix per (vehicle, microsecond), the database's key (module docstring).

    Fixes of one microsecond (different nanoseconds; the groups of
    :func:`tracking.validate.stored_instant_groups`, as the file import's) are judged against
    the earliest row: the same values, ``duplicate``; other values, ``conflicting_duplicate``
    (quarantined).
    """
    rows = np.asarray(batch.rows, dtype=np.int64)
    groups = stored_instant_groups(batch.vehicle_id, batch.ts_ns, rows)
    if not groups:
        return batch
    keep = np.ones(len(batch.ts_ns), dtype=bool)
    answers = dict(batch.answers)
    bad = list(batch.bad)
    for group in groups:
        first = int(group[0])
        for i in group[1:].tolist():
            keep[i] = False
            row = int(batch.rows[i])
            if _values(batch, i) == _values(batch, first):
                answers[row] = RowResult(row, DUPLICATE)
            else:
                answers[row] = RowResult(row, REJECTED, CONFLICTING_DUPLICATE)
                cells = _cells(batch.raw_rows[row - 1], batch.device_vehicle)
                bad.append((row, CONFLICTING_DUPLICATE, cells))
    return _subset(batch, keep, answers=answers, bad=bad)


def _refuse_before(batch: CheckedBatch, floor_ns: int) -> CheckedBatch:
    """Refuse the kept fixes earlier than ``floor_ns`` as :data:`BEFORE_DEVICE`."""
    early = batch.ts_ns < floor_ns
    if not early.any():
        return batch
    answers = dict(batch.answers)
    bad = list(batch.bad)
    for row in batch.rows[early].tolist():
        answers[row] = RowResult(row, REJECTED, BEFORE_DEVICE)
        bad.append((row, BEFORE_DEVICE, _cells(batch.raw_rows[row - 1], batch.device_vehicle)))
    return _subset(batch, ~early, answers=answers, bad=bad)


def _subset(
    batch: CheckedBatch,
    keep: NDArray[np.bool_],
    *,
    answers: dict[int, RowResult],
    bad: list[tuple[int, str, dict[str, str]]],
) -> CheckedBatch:
    """Return the batch with only the fixes in ``keep`` (speed flags judged again)."""
    at = np.flatnonzero(keep)
    idx = at.tolist()
    vehicles = [batch.vehicle_id[i] for i in idx]
    ts, lat, lon = batch.ts_ns[at], batch.lat[at], batch.lon[at]
    codes = np.unique(np.array(vehicles, dtype=object), return_inverse=True)[1]
    return CheckedBatch(
        n=batch.n,
        answers=answers,
        rows=batch.rows[at],
        vehicle_id=vehicles,
        ts_ns=ts,
        lat=lat,
        lon=lon,
        speed_kmh=batch.speed_kmh[at],
        heading_deg=batch.heading_deg[at],
        accuracy_m=batch.accuracy_m[at],
        meter=[batch.meter[i] for i in idx],
        tariff=[batch.tariff[i] for i in idx],
        driver_id=[batch.driver_id[i] for i in idx],
        speed_flag=speed_flags(codes.astype(np.int32), ts, lat, lon, max_speed_kmh=MAX_SPEED_KMH),
        bad=bad,
        ts_origin=[batch.ts_origin[i] for i in idx] if batch.ts_origin else [],
        raw_rows=batch.raw_rows,
        device_vehicle=batch.device_vehicle,
    )


def check_batch(
    rows: Sequence[Mapping[str, Any]],
    *,
    vehicle_id: str,
    now: dt.datetime | None = None,
    max_age_s: float | None = None,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    fields: Collection[str] | None = None,
    registered_at: dt.datetime | None = None,
) -> CheckedBatch:
    """Validate a device's batch with the file ingest's rules, plus the device's own.

    The device's own: ``vehicle_not_allowed``, and ``before_device`` (:data:`BEFORE_DEVICE`).

    Parameters
    ----------
    rows : sequence of mappings
        JSON rows with the pings contract's fields (``vehicle_id`` optional: the device's); a
        row that is not an object is rejected alone (``not_an_object``).
    vehicle_id : str
        The only vehicle the sender may report.
    now : datetime.datetime, optional
        Reference for ``future_timestamp`` and ``too_old_timestamp`` (tz-aware); default the
        current time.
    max_age_s : float, optional
        Fixes older than ``now - max_age_s`` are ``too_old_timestamp``; None: any age.
    future_tolerance_s : float, default FUTURE_TOLERANCE_S
        Fixes later than ``now + future_tolerance_s`` are ``future_timestamp``.
    fields : collection of str, optional
        The keys a row may have; a row with another is ``unknown_field``, every key kept in
        the quarantine. None: any (rows the caller built).
    registered_at : datetime.datetime, optional
        When the sending device was registered: fixes earlier than it by more than
        ``future_tolerance_s`` (the clock skew allowed) are ``before_device``. None: no bound.

    Returns
    -------
    CheckedBatch
        What :func:`tracking.validate.validate_pings` decides for the rows of ``vehicle_id``:
        by the same rule table, read in plain Python when every cell has a plain form (module
        docstring).
    """
    now_ts = pd.Timestamp(time.time_ns(), tz="UTC") if now is None else pd.Timestamp(now)
    now_ts = now_ts.tz_convert("UTC").as_unit("ns")
    not_before = None if max_age_s is None else now_ts - pd.Timedelta(seconds=max_age_s)
    odd = {i + 1: NOT_AN_OBJECT for i, r in enumerate(rows) if not isinstance(r, Mapping)}
    if fields is not None:
        known = frozenset(fields)
        odd |= {
            i + 1: UNKNOWN_FIELD
            for i, r in enumerate(rows)
            if isinstance(r, Mapping) and not known.issuperset(r)
        }
    raw = rows
    if odd:  # checked as empty rows (no fix), then answered for what they are
        rows = [{} if i + 1 in odd else r for i, r in enumerate(rows)]
    try:
        batch = _fast_check(
            rows,
            vehicle_id=vehicle_id,
            now=now_ts,
            future_tolerance_s=future_tolerance_s,
            not_before=not_before,
        )
    except _UnusualCellError:
        batch = _slow_check(
            rows,
            vehicle_id=vehicle_id,
            now=now_ts,
            future_tolerance_s=future_tolerance_s,
            not_before=not_before,
        )
    if registered_at is not None:
        skew_ns = int(round(future_tolerance_s * 1e9))
        batch = _refuse_before(batch, pd.Timestamp(registered_at).value - skew_ns)
    for row, reason in odd.items():
        batch.answers[row] = RowResult(row, REJECTED, reason)
    if odd:
        empty = dict.fromkeys(RAW_COLUMNS, "")
        batch.bad = [b for b in batch.bad if b[0] not in odd]
        batch.bad += [
            (
                row,
                reason,
                empty | {SENT: json.dumps(raw[row - 1], ensure_ascii=False, separators=(",", ":"))}
                if reason == NOT_AN_OBJECT
                else _all_cells(raw[row - 1]),
            )
            for row, reason in odd.items()
        ]
    return batch


# --- storage -------------------------------------------------------------------------------------

_QUEUED = (
    "vehicle_id, ts, lat, lon, speed_kmh, heading_deg, accuracy_m, meter, tariff, driver_id, "
    "speed_flag"
)
_INSERT = f"""
WITH ins AS (
  INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, speed_kmh, heading_deg, accuracy_m, meter,
                     tariff, driver_id, h3_r9, speed_flag, source, ts_origin)
  SELECT u.v, timestamptz 'epoch' + u.ts * interval '1 microsecond', u.lat, u.lon,
         ST_SetSRID(ST_MakePoint(u.lon, u.lat), 4326), u.speed,
         u.heading, u.accuracy, u.meter, u.tariff, u.driver, u.h9, u.flag, %(source)s, u.origin
  FROM unnest(%(v)s::text[], %(ts)s::int8[], %(lat)s::float8[], %(lon)s::float8[],
              %(speed)s::float8[], %(heading)s::float8[], %(accuracy)s::float8[],
              %(meter)s::text[], %(tariff)s::int2[], %(driver)s::text[], %(h9)s::int8[],
              %(flag)s::bool[], %(origin)s::text[])
       AS u(v, ts, lat, lon, speed, heading, accuracy, meter, tariff, driver, h9, flag, origin)
  ON CONFLICT (vehicle_id, ts) DO NOTHING
  RETURNING {_QUEUED}
), queued AS (
  INSERT INTO live_queue ({_QUEUED}) SELECT {_QUEUED} FROM ins
)
SELECT vehicle_id, (extract(epoch FROM ts) * 1000000)::int8 FROM ins
"""  # noqa: S608 - constant column lists
_STORED = """
SELECT f.vehicle_id, (extract(epoch FROM f.ts) * 1000000)::int8, f.lat, f.lon, f.speed_kmh,
       f.heading_deg, f.accuracy_m, f.meter, f.tariff, f.driver_id
FROM unnest(%(v)s::text[], %(ts)s::int8[]) AS k(v, ts)
JOIN fixes f ON f.vehicle_id = k.v AND f.ts = timestamptz 'epoch' + k.ts * interval '1 microsecond'
WHERE f.ts BETWEEN %(lo)s AND %(hi)s
"""
"""The stored fixes of the keys a batch found taken (the bounds prune the day partitions)."""
_known_days: dict[str, set[dt.date]] = {}
"""UTC days whose partition of ``fixes`` was seen committed, per database (this process)."""


def _ensure_days(conn: Connection, days: set[dt.date]) -> None:
    """Create the missing daily partitions; remember the days found already there."""
    key = conn.engine.url.render_as_string(hide_password=True)
    known = _known_days.setdefault(key, set())
    for day in sorted(days - known):
        if not ensure_fix_partitions(conn, day, day):
            known.add(day)  # existed before this transaction: committed
        # created now: remembered after a later batch finds it, once this one has committed


def _numbers(values: list[Any]) -> str:
    """Return an array literal of numbers or None (NaN is None), for ``%s::<type>[]``."""
    return "{" + ",".join("NULL" if v is None or v != v else repr(v) for v in values) + "}"


def _texts(values: Sequence[str | None]) -> str:
    """Return an array literal of texts or None, for ``%s::text[]``."""
    quoted = (
        "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for v in values
    )
    return "{" + ",".join(quoted) + "}"


def store_batch(conn: Connection, batch: CheckedBatch, *, source: str) -> list[RowResult]:
    """Store a checked batch (fixes, live queue, rejected rows); return one answer per row.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3) inside the caller's transaction; nothing is committed here.
    batch : CheckedBatch
        From :func:`check_batch`.
    source : str
        Stored with each fix and rejected row (e.g. ``api:device:7``).

    Returns
    -------
    list of RowResult
        ``accepted`` or ``duplicate`` (already stored) for the fixes, validation's answers for
        the other rows, in row order.
    """
    answers = dict(batch.answers)
    if len(batch.rows):
        ts_us = batch.ts_ns // 1000
        _ensure_days(
            conn,
            {
                dt.date(1970, 1, 1) + dt.timedelta(days=int(d))
                for d in np.unique(ts_us // 86_400_000_000)
            },
        )
        h9 = latlng_to_cells(batch.lat, batch.lon, resolution=H3_RESOLUTION).view(np.int64)
        # Array literals: far cheaper to build than psycopg's per-element list adaptation.
        params = {
            "source": source,
            "v": _texts(batch.vehicle_id),
            "ts": _numbers(ts_us.tolist()),
            "lat": _numbers(batch.lat.tolist()),
            "lon": _numbers(batch.lon.tolist()),
            "speed": _numbers(batch.speed_kmh.tolist()),
            "heading": _numbers(batch.heading_deg.tolist()),
            "accuracy": _numbers(batch.accuracy_m.tolist()),
            "meter": _texts(batch.meter),
            "tariff": _numbers(batch.tariff),
            "driver": _texts(batch.driver_id),
            "h9": _numbers([c or None for c in h9.tolist()]),
            "flag": "{" + ",".join("t" if f else "f" for f in batch.speed_flag.tolist()) + "}",
            "origin": _texts(batch.ts_origin or [None] * len(batch.rows)),
        }
        dbapi = conn.connection.driver_connection
        if dbapi is None:  # pragma: no cover - a live connection always has one
            msg = "conexão sem driver psycopg ativo"
            raise RuntimeError(msg)
        with dbapi.cursor() as cur:
            inserted = set(cur.execute(_INSERT, params))
            taken = [
                i
                for i, (v, us) in enumerate(zip(batch.vehicle_id, ts_us.tolist(), strict=True))
                if (v, us) not in inserted
            ]
            stored = _stored_values(cur, batch, ts_us, taken) if taken else {}
        bad_rows = list(batch.bad)
        for row in batch.rows.tolist():
            answers[row] = RowResult(row, ACCEPTED)
        for i in taken:
            row = int(batch.rows[i])
            other = stored.get((batch.vehicle_id[i], int(ts_us[i])))
            if other is None or other == _values(batch, i):
                answers[row] = RowResult(row, DUPLICATE)
            else:  # the stored fix is kept; these values go to the quarantine
                answers[row] = RowResult(row, REJECTED, CONFLICTING_DUPLICATE)
                cells = _cells(batch.raw_rows[row - 1], batch.device_vehicle)
                bad_rows.append((row, CONFLICTING_DUPLICATE, cells))
    else:
        bad_rows = batch.bad
    shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}  # rows of the same keys together
    for row, reason, cells in bad_rows:
        record = {fr.ROW: row, fr.REASON: reason, **{c: raw_text(v) for c, v in cells.items()}}
        shapes.setdefault(tuple(cells), []).append(record)
    for records in shapes.values():
        copy_rejected(conn, pd.DataFrame(records), source=source)
    return [answers[i] for i in range(1, batch.n + 1)]


def _stored_values(
    cur: Any, batch: CheckedBatch, ts_us: NDArray[np.int64], taken: list[int]
) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Return the stored values (as :func:`_values` gives them) of the fixes ``taken`` hit."""
    us = [int(ts_us[i]) for i in taken]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    params = {
        "v": _texts([batch.vehicle_id[i] for i in taken]),
        "ts": _numbers(us),
        "lo": epoch + dt.timedelta(microseconds=min(us)),
        "hi": epoch + dt.timedelta(microseconds=max(us)),
    }
    return {(str(r[0]), int(r[1])): tuple(r[2:]) for r in cur.execute(_STORED, params)}


def ingest_batch(
    *,
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    vehicle_id: str,
    source: str,
    now: dt.datetime | None = None,
    max_age_s: float | None = None,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    fields: Collection[str] | None = None,
    registered_at: dt.datetime | None = None,
) -> list[RowResult]:
    """Validate and store a device's batch; return one result per row, in row order.

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection (psycopg 3) inside the caller's transaction; nothing is committed here.
    rows : sequence of mappings
        JSON rows with the pings contract's fields (``vehicle_id`` optional: the device's).
    vehicle_id : str
        The only vehicle the sender may report.
    source : str
        Stored with each fix and rejected row (e.g. ``api:device:7``).
    now : datetime.datetime, optional
        Reference for ``future_timestamp`` (tz-aware); default the current time.
    max_age_s, future_tolerance_s, fields, registered_at
        As in :func:`check_batch`.

    Returns
    -------
    list of RowResult
        ``accepted``, ``duplicate`` or ``rejected`` with a reason, one per row.
    """
    if not rows:
        return []
    batch = check_batch(
        rows,
        vehicle_id=vehicle_id,
        now=now,
        max_age_s=max_age_s,
        future_tolerance_s=future_tolerance_s,
        fields=fields,
        registered_at=registered_at,
    )
    return store_batch(conn, batch, source=source)
