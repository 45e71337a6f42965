"""The OsmAnd HTTP protocol (Traccar Client and many trackers) at ``/osmand``, GET or POST.

Traccar Client sends ``POST <server URL>?id=…&timestamp=…&lat=…&lon=…&speed=…&bearing=…&altitude=…
&accuracy=…&batt=…`` with an empty body; others send the same by GET or as a form. The device is
identified by ``id``, which must be the device token printed by ``pontual devices add``: a long
random secret, so guessing another vehicle's id is not practical (send it over HTTPS).

Units: ``speed`` is in knots (OsmAnd/Traccar), stored in km/h; ``bearing`` is the heading in
degrees; ``accuracy`` in metres, 0 meaning unknown (Traccar Client sends 0 for GPS fixes);
``timestamp`` in Unix seconds (milliseconds when ≥ 10¹¹) or ISO 8601 with an offset.
``altitude``, ``hdop``, ``batt`` and other extras are accepted and not stored. ``meter``,
``tariff`` and ``driver_id`` are Pontual's extras.

Answers: 200 with an empty body when the fix is stored or was already stored; 401 for an unknown
or revoked id; 400 with the error body when the fix is rejected (the reason of the file ingest).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api import accounts
from api._errors import ApiError, NotAuthenticatedError
from api.ingest import ACCEPTED, REJECTED
from api.live_worker import wake_live_worker
from api.routes.pings import ingest_with_retry
from api.schemas import error_responses

router = APIRouter(prefix="/osmand", tags=["ingestão"])

KNOTS_TO_KMH = 1.852
MS_THRESHOLD = 1e11
"""OsmAnd timestamps at or above this are milliseconds."""

Param = Annotated[str | None, Query()]


class FixRejectedError(ApiError):
    """The OsmAnd fix fails validation (400, with the reason)."""

    status_code = 400
    code = "fix_rejected"


def _number(value: str | None) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def osmand_row(params: dict[str, str]) -> dict[str, Any]:
    """Map OsmAnd parameters to a pings-contract row (units converted, see the module doc)."""
    lat, lon = params.get("lat"), params.get("lon")
    if (lat is None or lon is None) and "location" in params:
        lat, _, lon = params["location"].partition(",")
    timestamp: Any = params.get("timestamp")
    numeric_ts = _number(timestamp)
    if numeric_ts is not None and numeric_ts >= MS_THRESHOLD:
        timestamp = numeric_ts / 1000.0
    speed = params.get("speed")
    knots = _number(speed)
    accuracy: Any = params.get("accuracy")
    if _number(accuracy) == 0:
        accuracy = None
    return {
        "timestamp": timestamp,
        "lat": lat,
        "lon": lon,
        "speed_kmh": knots * KNOTS_TO_KMH if knots is not None else speed,
        "heading_deg": params.get("bearing") or params.get("heading"),
        "accuracy_m": accuracy,
        "meter": params.get("meter"),
        "tariff": params.get("tariff"),
        "driver_id": params.get("driver_id"),
    }


def _store(request: Request, params: dict[str, str]) -> None:
    from sqlalchemy.orm import Session

    token = params.get("id") or params.get("deviceid") or ""
    with Session(request.app.state.engine) as session:
        device = accounts.device_for_token(session=session, token=token) if token else None
        if device is None:
            msg = "dispositivo desconhecido ou revogado: 'id' deve ser o token do dispositivo"
            raise NotAuthenticatedError(msg)
        (result,) = ingest_with_retry(
            session,
            rows=[osmand_row(params)],
            vehicle_id=device.vehicle_id,
            source=f"osmand:device:{device.device_id}",
        )
    if result.status == ACCEPTED:
        wake_live_worker(request.app)
    if result.status == REJECTED:
        msg = f"posição rejeitada: {result.reason}"
        raise FixRejectedError(msg, details={"reason": result.reason})


_DOC = {
    "responses": {200: {"description": "Posição gravada (ou já gravada); corpo vazio"}}
    | error_responses(400, 401, 422, 503),
    "response_class": Response,
}


@router.get("", **_DOC)  # type: ignore[arg-type]
@router.post("", **_DOC)  # type: ignore[arg-type]
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
    """Recebe uma posição no protocolo OsmAnd (Traccar Client): `id` é o token do dispositivo."""
    params = dict(request.query_params)
    if request.method == "POST" and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        params |= {k: v for k, v in form.items() if isinstance(v, str)}
    await run_in_threadpool(_store, request, params)
    return Response(status_code=200)
