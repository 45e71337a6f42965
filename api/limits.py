"""The request body limits, size and time: no request fills the memory or holds a connection.

:class:`BodyLimitMiddleware` (pure ASGI, outside the app) answers 413 at once when
``Content-Length`` exceeds ``max_body_bytes`` — the body is never read — and counts the bytes of a
body sent without a length (chunked), failing the request with 413 as soon as they pass the
limit. :class:`BodyTimeoutMiddleware` fails a request with 408 (and closes the connection) when
the next chunk of its body does not arrive within ``body_read_timeout_s``: uvicorn has no such
timeout, so a client that sent part of a body and went quiet held a connection and a task for
as long as it liked. Only the wait for a chunk is timed: a slow but steady upload goes on, and
once the body is complete nothing is (event streams, long answers).

A form has the parser's limits too (a text field's size, the number of fields and of files):
:func:`form_limit` tells the error handlers such a refusal is a 413, like a body over the
limit, not a 400. Each refusal is the API's JSON error, or the console's pt-BR page for a
browser outside the API (``page``, :func:`api.web.pages.refusal_page`). Other limits are the
routes': the batch size (``ingest_max_batch``), text lengths (``tracking.validate.MAX_ID_CHARS``),
the fields' own bounds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException
from starlette.formparsers import MultiPartException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RefusalPage = Callable[[Scope, int], ASGIApp | None]
"""Return the page answering a refusal (status) of a request, or None for the JSON error."""

log = logging.getLogger(__name__)

_MESSAGE = "corpo da requisição com mais de {limit} bytes; limite do servidor: {limit} bytes"


def _too_large_body(limit: int) -> bytes:
    body = {
        "error": {
            "code": "payload_too_large",
            "message": _MESSAGE.format(limit=limit),
            "max_body_bytes": limit,
        }
    }
    return json.dumps(body, ensure_ascii=False).encode()


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_body_bytes`` with 413, without reading them.

    Parameters
    ----------
    app : ASGI application
        The application wrapped.
    max_body_bytes : int
        Largest body accepted, in bytes.
    page : callable, optional
        ``page(scope, 413)``: the answer to send instead of the JSON error (a browser's page),
        or None.
    """

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, page: RefusalPage | None = None
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count what arrives."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0  # the server refuses a malformed length itself
                if declared > limit:
                    page = self.page(scope, 413) if self.page is not None else None
                    if page is not None:
                        await page(scope, receive, send)
                    else:
                        await self._refuse(send)
                    return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413)  # mapped to the JSON error body (api.errors)
            return message

        await self.app(scope, counted, send)

    async def _refuse(self, send: Send) -> None:
        body = _too_large_body(self.max_body_bytes)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class BodyTimeoutMiddleware:
    """Fail a request with 408 when the next chunk of its body does not come in time.

    The 408 is raised (:class:`fastapi.HTTPException`) from ``receive`` to whoever reads the body
    — the error handlers answer it, JSON or the console's page — with one INFO line, and its
    answer carries ``Connection: close`` (the rest of the body is not waited for). Once the last
    chunk has arrived ``receive`` is passed through untimed.

    Parameters
    ----------
    app : ASGI application
        The application wrapped.
    read_timeout_s : float
        Longest wait for the next chunk of a body, in seconds.
    """

    def __init__(self, app: ASGIApp, *, read_timeout_s: float) -> None:
        self.app = app
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time each wait for a chunk of the body, until the body is complete."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        complete = stalled = False

        async def timed() -> Message:
            nonlocal complete, stalled
            if complete:
                return await receive()
            if stalled:  # the client is gone as far as the app is concerned
                return {"type": "http.disconnect"}
            try:
                async with asyncio.timeout(self.read_timeout_s):
                    message = await receive()
            except TimeoutError:
                stalled = True
                log.info(
                    "request body stalled: nothing for %g s on %s %s; answered 408",
                    self.read_timeout_s,
                    scope.get("method"),
                    scope.get("path"),
                )
                raise HTTPException(408) from None  # mapped to the JSON error (api.errors)
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def closing(message: Message) -> None:
            if stalled and message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, timed, closing)


_FORM_LIMITS = (
    (re.compile(r"maximum size of (\d+) ?KB", re.IGNORECASE), "um campo passa de {} KiB"),
    (re.compile(r"maximum number of fields is (\d+)", re.IGNORECASE), "mais de {} campos"),
    (re.compile(r"maximum number of files is (\d+)", re.IGNORECASE), "mais de {} arquivos"),
)
"""The form parser's limit errors (starlette's messages) and their pt-BR reasons."""


def form_limit(exc: BaseException) -> str | None:
    """Return the pt-BR reason when ``exc`` refuses a form over one of the parser's limits.

    Starlette answers those with a 400 raised while handling its ``MultiPartException``; a form
    that is malformed (no boundary, a part without a name) is no limit: None.
    """
    cause = exc.__context__
    if not isinstance(cause, MultiPartException):
        return None
    for pattern, reason in _FORM_LIMITS:
        if found := pattern.search(cause.message):
            return reason.format(found.group(1))
    return None
