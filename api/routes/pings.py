"""Device ingest: ``POST /api/v1/pings``, a JSON batch answered row by row."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictStr,
    TypeAdapter,
    ValidationError,
)
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from typing_extensions import TypedDict

from api._errors import InvalidRequestError
from api.accounts import DevicePrincipal
from api.deps import CurrentDevice, EngineDep, SettingsDep
from api.ingest import RowResult, device_sources, ingest_batch, read_device_json
from api.live_worker import live_lifespan, wake_live_worker
from api.schemas import error_responses
from tracking.validate import FUTURE_TOLERANCE_S

router = APIRouter(prefix="/api/v1/pings", tags=["ingestão"], lifespan=live_lifespan)
"""The live worker of the process (:mod:`api.live_worker`) starts with the app."""

Scalar = StrictStr | StrictFloat | StrictBool | None
"""A JSON scalar as sent: a boolean stays a boolean (an invalid number, rejected row by row),
never 1.0."""


class PingIn(BaseModel):
    """One GPS fix as in the pings contract; values are checked row by row, not here.

    A value of the wrong kind (``"lat": true``, ``NaN``, ``{}``, an over-long ``driver_id``...)
    makes that row ``rejected`` with its reason, and so do a row that is not an object
    (``not_an_object``) and one with a key not below (``unknown_field``); only a body that is
    not an object with a list ``pings`` and nothing else is 422.
    """

    model_config = ConfigDict(extra="forbid")

    vehicle_id: str | None = Field(None, description="Veículo; padrão: o do dispositivo")
    timestamp: Scalar = Field(None, description="ISO 8601 com fuso, ou segundos Unix (UTC)")
    lat: Scalar = Field(None, description="Latitude WGS84")
    lon: Scalar = Field(None, description="Longitude WGS84")
    speed_kmh: Scalar = None
    heading_deg: Scalar = None
    accuracy_m: Scalar = None
    meter: Scalar = Field(None, description="free | occupied | off")
    tariff: Scalar = Field(None, description="1 ou 2 (bandeira), com o taxímetro ocupado")
    driver_id: Scalar = None


class PingBatch(BaseModel):
    """A batch of fixes of the device's vehicle."""

    model_config = ConfigDict(extra="forbid")

    pings: list[PingIn]


PING_FIELDS = frozenset(PingIn.model_fields)
"""The keys a row may have."""


_BATCH = TypeAdapter(TypedDict("_PingRows", {"pings": list[Any]}))  # type: ignore[operator]
"""Reads a parsed body (:func:`api.ingest.read_device_json`): an object with a list ``pings``.
Each row is judged alone by :func:`api.ingest.check_batch`, whatever it holds (a row that is
not an object, or a value that is an object, is that row's rejection, not the batch's)."""


class PingResult(BaseModel):
    """What happened to one row (``row`` is its 1-based position in the batch)."""

    row: int
    status: Literal["accepted", "duplicate", "rejected"]
    reason: str | None = None


class PingBatchResult(BaseModel):
    """Counts and the per-row results, sent after the fixes are durably stored."""

    accepted: int
    duplicates: int
    rejected: int
    results: list[PingResult]


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Return a model's JSON schema with its ``$defs`` inlined (they resolve nowhere else)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)  # type: ignore[no-any-return]  # a dict schema inlines to a dict


RETRY_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock, serialization failure
MAX_ATTEMPTS = 3


def ingest_with_retry(
    session: Session,
    *,
    rows: list[dict[str, Any]],
    vehicle_id: str,
    source: str,
    max_age_s: float | None = None,
    future_tolerance_s: float = FUTURE_TOLERANCE_S,
    fields: Collection[str] | None = None,
    registered_at: dt.datetime | None = None,
) -> list[RowResult]:
    """Run :func:`ingest_batch` and commit, retrying when concurrent batches deadlock.

    Concurrent first batches of a new day race to create its partition; PostgreSQL then aborts
    one transaction (deadlock detected), which is safe to run again. ``max_age_s`` and
    ``future_tolerance_s`` are the live ingest's window, ``fields`` the keys a row may have,
    ``registered_at`` the device's registration (:func:`api.ingest.check_batch`).
    """
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            results = ingest_batch(
                conn=session.connection(),
                rows=rows,
                vehicle_id=vehicle_id,
                source=source,
                max_age_s=max_age_s,
                future_tolerance_s=future_tolerance_s,
                fields=fields,
                registered_at=registered_at,
            )
            session.commit()
            return results
        except OperationalError as exc:
            session.rollback()
            code = getattr(exc.orig, "sqlstate", None)
            if code not in RETRY_SQLSTATES or attempt == MAX_ATTEMPTS:
                raise
    raise AssertionError  # pragma: no cover - the loop returns or raises


@router.post(
    "",
    response_model=PingBatchResult,
    responses=error_responses(401, 413, 422, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline_schema(PingBatch)}},
        }
    },
)
async def post_pings(
    request: Request,
    device: CurrentDevice,
    engine: EngineDep,
    settings: SettingsDep,
) -> Response:
    """Recebe um lote de posições do dispositivo; responde linha a linha após gravar (COMMIT).

    Cada linha: `accepted` (gravada), `duplicate` (já gravada com os mesmos valores: mesmo
    veículo e instante, ao microssegundo) ou `rejected` com o motivo (as mesmas regras da
    importação de arquivos, mais `too_old_timestamp`, posição mais antiga que o limite da
    ingestão ao vivo, `vehicle_not_allowed`: o dispositivo só envia posições do próprio veículo,
    `before_device`: posição anterior ao cadastro do dispositivo (memória de outro carro, talvez),
    e `conflicting_duplicate`: instante já gravado, ou repetido no lote, com outros valores; a
    primeira posição fica e a outra vai para `rejected_fixes`). Reenviar um lote é seguro. O
    corpo é um `PingBatch`; 413 acima do tamanho máximo do corpo; 422 (nada gravado) se não for
    JSON em UTF-8 ou repetir uma chave num mesmo objeto (`{"lat": 1, "lat": 2}`).
    """
    data = read_device_json(await request.body())  # 422: not JSON, a key twice...
    try:
        rows = _BATCH.validate_python(data)["pings"]
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None
    if extra := sorted(set(data) - {"pings"}):  # "pngs": nothing is read, nothing stored
        errors = [
            {"type": "extra_forbidden", "loc": ("body", k[:100]), "msg": "campo não permitido"}
            for k in extra[:10]
        ]
        raise RequestValidationError(errors)
    if len(rows) > settings.ingest_max_batch:
        msg = f"lote com {len(rows)} posições; máximo {settings.ingest_max_batch}"
        raise InvalidRequestError(msg, code="batch_too_large")
    results = await run_in_threadpool(_ingest, engine, rows, device, settings)
    counts = {"accepted": 0, "duplicate": 0, "rejected": 0}
    for r in results:
        counts[r.status] += 1
    if counts["accepted"]:
        wake_live_worker(request.app)  # the new fixes are in the live queue
    body = {
        "accepted": counts["accepted"],
        "duplicates": counts["duplicate"],
        "rejected": counts["rejected"],
        "results": [{"row": r.row, "status": r.status, "reason": r.reason} for r in results],
    }
    # The body is PingBatchResult's; built here, it skips a second validation of every row.
    return Response(json.dumps(body, ensure_ascii=False), media_type="application/json")


def _ingest(
    engine: Engine, rows: list[dict[str, Any]], device: DevicePrincipal, settings: Any
) -> list[RowResult]:
    """Store a batch in its own session (one thread-pool hop for the whole request)."""
    with Session(engine, expire_on_commit=False) as session:
        return ingest_with_retry(
            session,
            rows=rows,
            vehicle_id=device.vehicle_id,
            source=device_sources(device.device_id)[0],
            registered_at=device.registered_at,
            max_age_s=settings.ingest_max_age_days * 86_400.0,
            future_tolerance_s=settings.ingest_future_tolerance_s,
            fields=PING_FIELDS,
        )
