"""The OsmAnd HTTP protocol (Traccar Client and many trackers) at ``/osmand``, GET or POST.

Request shapes (those Traccar's own ``OsmAndProtocolDecoder`` reads and its tests send):

- **Query or form** (Traccar Client up to 8, OsmAnd, most trackers): ``POST <server URL>?id=…
  &timestamp=…&lat=…&lon=…&speed=…&bearing=…&altitude=…&accuracy=…&batt=…`` with an empty body,
  or the same by GET, or as an ``application/x-www-form-urlencoded`` body. ``id`` (or
  ``deviceid``) is the device token; ``location=lat,lon`` may replace ``lat``/``lon``.
- **JSON** (Traccar Client 9, ``Content-Type: application/json``): ``{"device_id": "<token>",
  "location": {"timestamp": "2025-06-15T13:45:12.862Z", "coords": {"latitude": …,
  "longitude": …, "accuracy": …, "speed": …, "heading": …, "altitude": …}, "is_moving": …,
  "battery": {…}, "activity": {…}, "extras": {…}, …}}``; ``location`` may also be a list of
  such objects (a batch). ``speed`` is in m/s and ``-1`` means unknown (another negative is an
  invalid speed, quarantined), as does a negative ``heading``.

The device is identified by its token (``id``, ``deviceid`` or ``device_id``), printed by
``pontual devices add``: a long random secret, so guessing another vehicle's id is not practical
(send it over HTTPS).

Units: query ``speed`` in knots (OsmAnd/Traccar), JSON ``speed`` in m/s, stored in km/h;
``bearing``/``heading`` in degrees; ``accuracy`` in metres, 0 meaning unknown (Traccar Client
sends 0 for GPS fixes). In both shapes a ``speed`` of ``-1``, a negative ``bearing``/``heading``
and a negative ``accuracy`` mean unknown, as Android reports them. ``altitude``, ``hdop``,
``batt`` and other extras are accepted and not stored. ``meter``, ``tariff`` and ``driver_id``
are Pontual's extras.

Time: ``timestamp`` in Unix seconds (milliseconds from 10¹¹ to 10¹⁴, read exactly), ISO 8601 with an
offset, or ``yyyy-MM-dd HH:mm:ss`` without one, which the protocol defines as UTC (stored with
``fixes.ts_origin = 'naive_utc'``). Without ``timestamp`` the fix is dated by its receive time,
as Traccar does (``ts_origin = 'received'``).

Answers: the device's queue must move on (Traccar Client resends its oldest unacknowledged fix
for ever on any non-2xx answer), so a fix that can never be accepted — invalid, too old, in the
future, malformed — is answered **200** and kept in ``rejected_fixes`` with its reason
(also in the ``X-Pontual-Rejected`` header). Only what resending can cure is an error: 401 for
an unknown or revoked token, 413 for a body over the limit (checked before it is read), 503
while the database is unavailable. A JSON body that is JSON but cannot be read unambiguously —
a key twice in one object, an integer beyond Python's 4,300-digit limit — is 422 with a pt-BR
message: its token cannot be trusted or read either, so the answer comes before any device
lookup and is the same whatever the token (no tracker sends such a body). A body that is not
JSON at all is a malformed fix of the device the query names (200, kept), and so is a request
giving one parameter two values (twice in the query or the form, or in both): every value is
kept with the quarantined request, none guessed. A stored (or already
stored) fix is 200 with an empty body; an instant already stored with other values is
``conflicting_duplicate`` (200, the stored fix kept, the new values in ``rejected_fixes``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qsl

import pandas as pd
from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from api import accounts
from api._errors import NotAuthenticatedError, UnreadableBodyError
from api.deps import repeated_values
from api.ingest import (
    ACCEPTED,
    REJECTED,
    TS_ORIGIN,
    RowResult,
    device_sources,
    raw_text,
    read_device_json,
)
from api.live_worker import wake_live_worker
from api.redact import SECRET_PARAMS, redact
from api.routes.pings import ingest_with_retry
from api.schemas import error_responses
from db.tracking.store import MAX_RAW_CHARS, copy_rejected

router = APIRouter(prefix="/osmand", tags=["ingestão"])

KNOTS_TO_KMH = 1.852
MPS_TO_KMH = 3.6
MS_THRESHOLD = 1e11
"""OsmAnd timestamps at or above this are milliseconds."""
MS_LIMIT = 1e14
"""Timestamps at or above this (microseconds, nanoseconds) are not milliseconds either: kept as
sent, refused by validation, so the quarantine shows what the tracker sent."""
REJECTED_HEADER = "X-Pontual-Rejected"
NAIVE_UTC = "naive_utc"
RECEIVED = "received"
MALFORMED = "malformed_request"
_NAIVE = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)")
_MILLIS = re.compile(r"\d{11,14}")

Param = Annotated[str | None, Query()]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and value.strip():
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _instant(value: Any, *, received: dt.datetime) -> tuple[Any, str | None]:
    """Return the timestamp cell to validate and its origin (module docstring, Time)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return received.isoformat(), RECEIVED
    if isinstance(value, str):
        text = value.strip()
        if _MILLIS.fullmatch(text) and int(text) >= MS_THRESHOLD:
            return f"{text[:-3]}.{text[-3:]}", None  # exact: the decimal point moves
        naive = _NAIVE.fullmatch(text)
        if naive:
            return f"{naive.group(1)}T{naive.group(2)}Z", NAIVE_UTC
        numeric = _number(text)
        if numeric is not None and MS_THRESHOLD <= numeric < MS_LIMIT:
            return numeric / 1000.0, None
        return text, None
    numeric = _number(value)
    if numeric is not None and MS_THRESHOLD <= numeric < MS_LIMIT:
        return numeric / 1000.0, None
    return value, None


def _text(value: Any) -> Any:
    """Return a JSON scalar as is; an object or a list as text (the ingest rejects it)."""
    if isinstance(value, dict | list):
        return json.dumps(value)[:200]
    return value


def osmand_row(params: Mapping[str, str], *, received: dt.datetime | None = None) -> dict[str, Any]:
    """Map OsmAnd query/form parameters to a pings-contract row (see the module docstring)."""
    received = received or dt.datetime.now(dt.UTC)
    lat, lon = params.get("lat"), params.get("lon")
    if (lat is None or lon is None) and "location" in params:
        lat, _, lon = params["location"].partition(",")
    timestamp, origin = _instant(params.get("timestamp"), received=received)
    speed: Any = params.get("speed")
    if (knots := _number(speed)) is not None:
        speed = None if knots == -1 else knots * KNOTS_TO_KMH
    heading: Any = params.get("bearing") or params.get("heading")
    if (degrees := _number(heading)) is not None and degrees < 0:
        heading = None
    accuracy: Any = params.get("accuracy")
    if (metres := _number(accuracy)) is not None and metres <= 0:
        accuracy = None
    return {
        "timestamp": timestamp,
        "lat": lat,
        "lon": lon,
        "speed_kmh": speed,
        "heading_deg": heading,
        "accuracy_m": accuracy,
        "meter": params.get("meter"),
        "tariff": params.get("tariff"),
        "driver_id": params.get("driver_id"),
        TS_ORIGIN: origin,
    }


def traccar_json_row(location: Any, *, received: dt.datetime | None = None) -> dict[str, Any]:
    """Map one ``location`` object of Traccar Client 9's JSON body to a pings-contract row."""
    received = received or dt.datetime.now(dt.UTC)
    loc: dict[str, Any] = location if isinstance(location, dict) else {}
    coords: dict[str, Any] = loc["coords"] if isinstance(loc.get("coords"), dict) else {}
    extras: dict[str, Any] = loc["extras"] if isinstance(loc.get("extras"), dict) else {}
    timestamp, origin = _instant(loc.get("timestamp"), received=received)
    speed = _number(coords.get("speed"))
    heading = _number(coords.get("heading"))
    accuracy = _number(coords.get("accuracy"))
    return {
        "timestamp": _text(timestamp),
        "lat": _text(coords.get("latitude")),
        "lon": _text(coords.get("longitude")),
        "speed_kmh": speed * MPS_TO_KMH if speed is not None and speed != -1 else None,
        "heading_deg": heading if heading is not None and heading >= 0 else None,
        "accuracy_m": accuracy if accuracy is not None and accuracy > 0 else None,
        "meter": _text(extras.get("meter")),
        "tariff": _text(extras.get("tariff")),
        "driver_id": _text(extras.get("driver_id")),
        TS_ORIGIN: origin,
    }


def _json_rows(body: bytes, *, received: dt.datetime) -> tuple[str, list[dict[str, Any]] | None]:
    """Return the token and the rows of a JSON body (None: the body is not Traccar's JSON).

    A body that is not JSON is malformed (the query's token may still name the device).

    Raises
    ------
    UnreadableBodyError
        422 for valid JSON that cannot be read unambiguously (:func:`api.ingest.read_device_json`:
        a key twice in one object, an integer beyond Python's digit limit): before any device
        lookup, as its token cannot be trusted either.
    """
    try:
        data = read_device_json(body)
    except UnreadableBodyError as exc:
        if exc.kind == "json_invalid":
            return "", None
        raise
    if not isinstance(data, dict):
        return "", None
    token = data.get("device_id")
    token = token if isinstance(token, str) else ""
    locations = data.get("location")
    if isinstance(locations, dict):
        locations = [locations]
    if not isinstance(locations, list) or not locations:
        return token, None
    return token, [traccar_json_row(loc, received=received) for loc in locations]


def _without_tokens(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return a quarantined request without device tokens.

    The token-bearing parameters (``id``, ``consulta.id``…) are dropped and tokens in other
    texts (a JSON body) masked (:func:`api.redact.redact`). The quarantine names the device by
    its source; a token kept there (the request's, or another device's given twice in one
    request) would be a credential for whoever reads it.
    """
    kept: dict[str, Any] = {}
    for key, value in raw.items():
        if key.rpartition(".")[2].lower() in SECRET_PARAMS:
            continue
        kept[key] = (
            [redact(str(v)) for v in value] if isinstance(value, list) else redact(str(value))
        )
    return kept


def _device(session: Session, token: str) -> accounts.DevicePrincipal:
    device = accounts.device_for_token(session=session, token=token) if token else None
    if device is None:
        msg = "dispositivo desconhecido ou revogado: 'id' deve ser o token do dispositivo"
        raise NotAuthenticatedError(msg)
    return device


def _store(
    request: Request, token: str, rows: list[dict[str, Any]] | None, raw: Mapping[str, Any]
) -> list[RowResult]:
    """Authenticate, then store the rows (or quarantine a malformed request); commit."""
    settings = request.app.state.settings
    with Session(request.app.state.engine) as session:
        device = _device(session, token)
        source = device_sources(device.device_id)[1]
        if rows is None:
            bad = {"row": [1], "reason": [MALFORMED]} | {
                raw_text(k): [raw_text(v)] for k, v in _without_tokens(raw).items()
            }
            copy_rejected(session.connection(), pd.DataFrame(bad), source=source)
            session.commit()
            return [RowResult(1, REJECTED, MALFORMED)]
        results: list[RowResult] = []
        step = settings.ingest_max_batch
        for start in range(0, len(rows), step):
            part = ingest_with_retry(
                session,
                rows=rows[start : start + step],
                vehicle_id=device.vehicle_id,
                source=source,
                registered_at=device.registered_at,
                max_age_s=settings.ingest_max_age_days * 86_400.0,
                future_tolerance_s=settings.ingest_future_tolerance_s,
            )
            results += [RowResult(r.row + start, r.status, r.reason) for r in part]
        return results


_DOC: dict[str, Any] = {
    "responses": {
        200: {
            "description": "Posição gravada, já gravada, ou rejeitada para sempre (motivo no "
            f"cabeçalho {REJECTED_HEADER} e em rejected_fixes); corpo vazio"
        }
    }
    | error_responses(401, 413, 422, 503),
    "response_class": Response,
}


_FORM_FIELDS = (
    "id", "deviceid", "timestamp", "lat", "lon", "location", "speed", "bearing", "heading",
    "altitude", "accuracy", "hdop", "batt", "meter", "tariff", "driver_id",
)  # fmt: skip
_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "description": "Opcional: os mesmos campos da consulta num formulário, ou o JSON do "
        "Traccar Client 9",
        "content": {
            "application/x-www-form-urlencoded": {
                "schema": {
                    "type": "object",
                    "properties": {name: {"type": "string"} for name in _FORM_FIELDS},
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "device_id": {"type": "string"},
                        "location": {
                            "oneOf": [
                                {"type": "object"},
                                {"type": "array", "items": {"type": "object"}},
                            ]
                        },
                    },
                }
            },
        },
    }
}
"""The POST's body as documented (read by hand in :func:`osmand`, not by FastAPI)."""


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_MAX_FORM_FIELDS = 1000
"""Most fields read from a body sent as a form without saying so (as Starlette's forms)."""


def _is_json(media: str, body: bytes) -> bool:
    """Say whether a POST's body is read as Traccar Client 9's JSON.

    Its media type says JSON (``application/json``, ``text/json``, ``…+json``, in any case), or
    says no form and the body opens as JSON does: a tracker that labels its JSON otherwise, or
    not at all, would otherwise lose the fix (read as a fix without coordinates).
    """
    if media in ("application/json", "text/json") or media.endswith("+json"):
        return True
    return media not in _FORM_TYPES and body.lstrip()[:1] in (b"{", b"[")


def _repeated(items: list[tuple[str, str]], place: str) -> dict[str, list[str]]:
    """Return the parameters sent more than once with different values (``place.name``: all)."""
    return {f"{place}.{k}": v for k, v in repeated_values(items).items() if len(set(v)) > 1}


@router.get("", **_DOC)
@router.post("", **_DOC, openapi_extra=_BODY)
@router.get("/", include_in_schema=False)  # a server URL typed with a final slash: no
@router.post("/", include_in_schema=False)  # redirect, which trackers do not follow on a POST
async def osmand(
    request: Request,
    id: Param = None,  # noqa: A002 - the protocol's name
    timestamp: Param = None,
    lat: Param = None,
    lon: Param = None,
    speed: Param = None,
    bearing: Param = None,
    altitude: Param = None,
    accuracy: Param = None,
    hdop: Param = None,
    meter: Param = None,
    tariff: Param = None,
) -> Response:
    """Recebe posições no protocolo OsmAnd (Traccar Client): consulta, formulário ou JSON.

    O token do dispositivo vai em `id` (ou `device_id` no JSON do Traccar Client 9). Posição
    que nunca poderá ser aceita responde 200 (a fila do aparelho segue) e fica em
    `rejected_fixes` com o motivo; 401 só para token desconhecido; 422, antes de conferir o
    token, para JSON ambíguo (chave repetida num objeto, número com mais de 4.300 dígitos).
    """
    received = dt.datetime.now(dt.UTC)
    query = request.query_params.multi_items()
    params = dict(query)
    token = params.get("id") or params.get("deviceid") or ""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    body = await request.body() if request.method == "POST" else b""
    rows: list[dict[str, Any]] | None
    raw: dict[str, Any] = params
    repeated = _repeated(query, "consulta")
    clash: list[str] = []
    unreadable: dict[str, str] = {}
    if _is_json(media, body):
        body_token, rows = _json_rows(body, received=received)
        token = body_token or token
        raw = {"body": body[:MAX_RAW_CHARS].decode("utf-8", "replace")}
    else:
        fields: list[tuple[str, str]] | None = None
        if media in _FORM_TYPES:
            fields = [(k, v) for k, v in (await request.form()).multi_items() if isinstance(v, str)]
        elif body.strip() and not query:
            # Traccar reads the body as a form whenever the query is empty, whatever its type.
            text = body.decode("utf-8", "replace")
            try:
                fields = parse_qsl(text, keep_blank_values=True, max_num_fields=_MAX_FORM_FIELDS)
            except ValueError:  # more fields than any fix has: kept as sent
                unreadable = {"body": text[:MAX_RAW_CHARS]}
        if fields is not None:
            form = dict(fields)
            repeated |= _repeated(fields, "formulario")
            clash = sorted(k for k, v in form.items() if k in params and params[k] != v)
            if clash or repeated:  # which value is the fix's? Quarantined with all, not guessed.
                raw = {f"consulta.{k}": v for k, v in params.items()}
                raw |= {f"formulario.{k}": v for k, v in form.items()}
            params |= form
            token = params.get("id") or params.get("deviceid") or ""
        raw |= repeated | unreadable
        malformed = clash or repeated or unreadable
        rows = None if malformed else [osmand_row(params, received=received)]
    results = await run_in_threadpool(_store, request, token, rows, raw)
    if any(r.status == ACCEPTED for r in results):
        wake_live_worker(request.app)
    rejected = sorted({str(r.reason) for r in results if r.status == REJECTED})
    headers = {REJECTED_HEADER: ",".join(rejected)} if rejected else None
    return Response(status_code=200, headers=headers)
