"""GPS devices (``/admin/dispositivos``): list, add for a vehicle, revoke.

A new device's token is shown once, on :data:`TOKEN_PATH`, with what Traccar Client needs: the
server URL (the OsmAnd endpoint, ``/osmand``) and the device identifier (the token), and a QR
code of both. Traccar Client (9.x) scans a QR code from its settings screen: a URL
``http(s)://host/path?id=…`` sets the server URL to ``http(s)://host/path`` and the device
identifier to ``id`` (``ConfigurationService.applyUri`` in traccar/traccar-client). The QR code is
drawn here as an inline SVG by ``segno``; the token travels to that page in a short-lived
encrypted cookie and is never stored in clear (:mod:`api.web.admin_base`).
"""

from __future__ import annotations

from typing import Annotated, TypedDict
from urllib.parse import quote

import segno
from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse
from sqlalchemy import select, text
from starlette.exceptions import HTTPException
from starlette.responses import Response

from api import accounts
from api._errors import UserAdminError
from api.deps import SessionDep, SettingsDep
from api.ingest import device_sources
from api.web.admin_base import AdminUser, audit, forget_reveal, form_text, set_reveal, take_reveal
from api.web.auth import is_https
from api.web.templating import render
from db.accounts.models import Device
from db.fleet.models import Vehicle

router = APIRouter(include_in_schema=False)

TOKEN_PATH = "/admin/dispositivos/novo-token"
DEVICE_TOKEN = "device_token"
OSMAND_PATH = "/osmand"
NOTICES = {
    "revogado": "Dispositivo revogado: o token não envia mais posições.",
    "ja-revogado": "Esse dispositivo já estava revogado (talvez em outra aba); nada mudou.",
}


def server_url(request: Request) -> str:
    """Return the URL a tracker posts fixes to: this server's OsmAnd endpoint."""
    scheme = "https" if is_https(request) else request.url.scheme
    host = request.headers.get("host") or request.url.netloc
    return f"{scheme}://{host}{OSMAND_PATH}"


TRACKER_SETTINGS = {
    "interval": "15",
    "distance": "0",
    "angle": "0",
    "accuracy": "high",
    "stopDetection": "false",
    "buffer": "true",
}
"""Traccar Client settings the QR code sets besides the server and the id: a fix every 15 s,
also while parked (at a stand), kept while offline. The client's own defaults (a fix every
300 s or 75 m, none while stopped: its ``preferences.dart``) would leave a stand's queue and
a ride's path unseen."""


def traccar_link(*, url: str, token: str) -> str:
    """Return the configuration URL Traccar Client reads from a QR code.

    The server URL, the id (the token) and :data:`TRACKER_SETTINGS`: Traccar Client's
    ``ConfigurationService.applyUri`` reads each query parameter as its setting.
    """
    settings = "".join(f"&{k}={v}" for k, v in TRACKER_SETTINGS.items())
    return f"{url}?id={quote(token, safe='')}{settings}"


def qr_svg(payload: str, *, title: str) -> str:
    """Return an inline SVG QR code of ``payload`` (error correction M, 4 px modules)."""
    code = segno.make(payload, error="m", micro=False)
    svg: str = code.svg_inline(scale=4, border=4, title=title, svgclass="qr-code")
    return svg.replace("<svg ", '<svg role="img" ', 1)


REASON_NAMES = {
    "malformed_row": "linha malformada",
    "malformed_request": "requisição ilegível",
    "empty_vehicle_id": "sem prefixo",
    "missing_coordinates": "sem latitude ou longitude",
    "invalid_coordinates": "latitude ou longitude não é um número",
    "out_of_range_coordinates": "latitude ou longitude fora do globo",
    "null_island": "posição 0, 0 (aparelho sem posição)",
    "missing_timestamp": "sem data e hora",
    "unparseable_timestamp": "data e hora ilegíveis",
    "naive_timestamp": "data e hora sem fuso horário",
    "future_timestamp": "no futuro (relógio do aparelho adiantado)",
    "too_old_timestamp": "antiga demais para a ingestão ao vivo",
    "before_device": "anterior ao cadastro deste dispositivo",
    "unknown_meter": "taxímetro desconhecido",
    "unknown_tariff": "bandeira desconhecida",
    "invalid_speed": "velocidade inválida",
    "invalid_heading": "rumo inválido",
    "invalid_accuracy": "precisão inválida",
    "invalid_text": "texto corrompido ou longo demais",
    "duplicate": "repetida",
    "conflicting_duplicate": "mesmo instante já gravado com outros valores",
    "vehicle_not_allowed": "de outro veículo",
    "not_an_object": "linha que não é um objeto JSON",
    "unknown_field": "campo desconhecido",
}
"""Each reason a fix is rejected for, as the admin reads it (the code stays beside it)."""

REJECTED_DAYS = 7
"""Days of rejected fixes counted on the devices' list."""
SHOWN_REJECTED = 200
"""Rejected fixes a device's page lists, the latest first."""


def _rejected_counts(session: SessionDep, device_ids: list[int]) -> dict[int, int]:
    """Rejected fixes of each device over the last :data:`REJECTED_DAYS` days."""
    if not device_ids:
        return {}
    sources = {src: d for d in device_ids for src in device_sources(d)}
    rows = session.execute(
        text(
            "SELECT source, count(*) FROM rejected_fixes WHERE source = ANY(:s) "
            "AND received_at > now() - make_interval(days => :d) GROUP BY source"
        ),
        {"s": list(sources), "d": REJECTED_DAYS},
    ).all()
    out: dict[int, int] = {}
    for source, n in rows:
        out[sources[source]] = out.get(sources[source], 0) + int(n)
    return out


def _devices_page(
    request: Request,
    *,
    web: AdminUser,
    session: SessionDep,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    notice: str | None = None,
    status_code: int = 200,
    ask_outside_fleet: bool = False,
) -> Response:
    devices = session.scalars(select(Device).order_by(Device.device_id.desc())).all()
    return render(
        request,
        "admin/dispositivos.html",
        web=web,
        title="Dispositivos GPS",
        status_code=status_code,
        devices=devices,
        rejected=_rejected_counts(session, [d.device_id for d in devices]),
        rejected_days=REJECTED_DAYS,
        errors=errors or {},
        values=values or {},
        notice=notice,
        server_url=server_url(request),
        ask_outside_fleet=ask_outside_fleet,
    )


@router.get("/admin/dispositivos", name="web_admin_devices")
def devices(request: Request, web: AdminUser, session: SessionDep, aviso: str = "") -> Response:
    """Devices with their vehicle and state (never a token); the form of a new one."""
    return _devices_page(request, web=web, session=session, notice=NOTICES.get(aviso))


@router.post("/admin/dispositivos", name="web_admin_device_create")
def create_device(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    settings: SettingsDep,
    vehicle_id: Annotated[str, Form(max_length=64)] = "",
    label: Annotated[str, Form(max_length=200)] = "",
    fora_da_frota: Annotated[str, Form(max_length=8)] = "",
) -> Response:
    """Register a device of a vehicle; its token is shown once on the next page.

    A prefixo the fleet lacks (a typo would send every fix to a vehicle that does not exist)
    is registered only when the form says so (``fora_da_frota``: the vehicle is still to be
    imported); one the fleet holds written otherwise (``sim-1007`` for ``SIM-1007``) never.
    """
    from db.fleet.store import held_spelling

    wanted = vehicle_id.strip()
    if not wanted:
        return _devices_page(
            request,
            web=web,
            session=session,
            errors={"vehicle_id": "Informe o prefixo do veículo do dispositivo."},
            values={"vehicle_id": vehicle_id, "label": label},
            status_code=422,
        )
    held = held_spelling(session, "vehicles", wanted)
    if held is not None or (not fora_da_frota and session.get(Vehicle, wanted) is None):
        message = (
            f"O veículo {wanted} está no cadastro da frota como {held}: o mesmo prefixo escrito "
            "de outro modo. Envie de novo com a grafia do cadastro (já no campo)."
            if held is not None
            else f"O veículo {wanted} não está no cadastro da frota. Confira o prefixo; se o "
            "veículo ainda vai ser importado, marque a caixa abaixo e envie de novo."
        )
        return _devices_page(
            request,
            web=web,
            session=session,
            errors={"vehicle_id": message},
            values={"vehicle_id": held or vehicle_id, "label": label},
            status_code=422,
            ask_outside_fleet=held is None,  # a second spelling is never registered
        )
    try:
        device, token = accounts.create_device(
            session=session, vehicle_id=vehicle_id, label=form_text(label)
        )
    except UserAdminError as exc:
        session.rollback()
        values = {"vehicle_id": vehicle_id, "label": label}
        return _devices_page(
            request,
            web=web,
            session=session,
            errors={"vehicle_id": str(exc)},
            values=values,
            status_code=422,
        )
    audit(
        session,
        web=web,
        action="create",
        entity="device",
        entity_id=str(device.device_id),
        vehicle_id=device.vehicle_id,
        label=device.label,
    )
    session.commit()
    response = RedirectResponse(TOKEN_PATH, status_code=303)
    set_reveal(
        response,
        request,
        settings=settings,
        web=web,
        kind=DEVICE_TOKEN,
        subject=str(device.device_id),
        secret=token,
    )
    return response


class _TokenPage(TypedDict, total=False):
    """The token page's context (only ``device`` and ``token``, None, once the token is gone)."""

    device: Device | None
    token: str | None
    url: str
    link: str
    known_vehicle: bool
    qr: str


@router.get(TOKEN_PATH, name="web_admin_device_token")
def new_token(
    request: Request, web: AdminUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """Show the new device's token once, with the server URL and QR code for Traccar Client."""
    token = take_reveal(request, settings=settings, web=web, kind=DEVICE_TOKEN, subject=None)
    device = accounts.device_for_token(session=session, token=token) if token else None
    context: _TokenPage = {"device": None, "token": None}
    if token is not None and device is not None:
        row = session.get(Device, device.device_id)
        known = session.get(Vehicle, device.vehicle_id) is not None
        url = server_url(request)
        link = traccar_link(url=url, token=token)
        context = {
            "device": row,
            "token": token,
            "url": url,
            "link": link,
            "known_vehicle": known,
            "qr": qr_svg(link, title="QR code de configuração do Traccar Client"),
        }
    response = render(
        request, "admin/dispositivo_token.html", web=web, title="Token do dispositivo", **context
    )
    forget_reveal(response, request)
    return response


@router.get("/admin/dispositivos/{device_id}/rejeitadas", name="web_admin_device_rejected")
def rejected(
    device_id: int, request: Request, web: AdminUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """Show a device's rejected fixes, the latest first: when, batch row, reason, cells.

    Every fix a device sends that is not stored is kept in ``rejected_fixes`` with what was
    sent; here the admin sees a tracker that sends only rejected fixes, and why.
    """
    device = session.get(Device, device_id)
    if device is None:
        raise HTTPException(404)
    sources = list(device_sources(device_id))
    by_reason = session.execute(
        text(
            "SELECT reason, count(*) AS n FROM rejected_fixes WHERE source = ANY(:s) "
            "GROUP BY reason ORDER BY n DESC, reason"
        ),
        {"s": sources},
    ).all()
    rows = session.execute(
        text(
            "SELECT received_at, source, row, reason, raw FROM rejected_fixes "
            "WHERE source = ANY(:s) ORDER BY received_at DESC, rejected_id DESC LIMIT :n"
        ),
        {"s": sources, "n": SHOWN_REJECTED},
    ).all()
    listed = [
        {
            "at": r.received_at,
            "via": "OsmAnd" if r.source.startswith("osmand:") else "API JSON",
            "row": r.row,
            "reason": r.reason,
            "reason_name": REASON_NAMES.get(r.reason, r.reason),
            "cells": [(k, v) for k, v in (r.raw or {}).items() if v not in ("", None)],
        }
        for r in rows
    ]
    return render(
        request,
        "admin/dispositivo_rejeitadas.html",
        web=web,
        title=f"Posições rejeitadas do dispositivo {device_id}",
        device=device,
        by_reason=[(r, REASON_NAMES.get(r, r), n) for r, n in by_reason],
        total=sum(int(n) for _, n in by_reason),
        rows=listed,
        shown=SHOWN_REJECTED,
        timezone=settings.timezone,
    )


@router.post("/admin/dispositivos/{device_id}/revogar", name="web_admin_device_revoke")
def revoke(device_id: int, web: AdminUser, session: SessionDep) -> Response:
    """Revoke a device's token (its fixes stay); one already revoked is said so, not audited."""
    found = session.get(Device, device_id)
    if found is None:
        raise HTTPException(404)
    if found.revoked_at is not None:  # a stale tab's second click
        return RedirectResponse("/admin/dispositivos?aviso=ja-revogado", status_code=303)
    device = accounts.revoke_device(session=session, device_id=device_id)
    audit(
        session,
        web=web,
        action="revoke",
        entity="device",
        entity_id=str(device.device_id),
        vehicle_id=device.vehicle_id,
    )
    session.commit()
    return RedirectResponse("/admin/dispositivos?aviso=revogado", status_code=303)
