"""The request body limit: refused before it is read, so no request can fill the server's memory.

:class:`BodyLimitMiddleware` (pure ASGI, outermost) answers 413 at once when ``Content-Length``
exceeds ``max_body_bytes`` — the body is never read — and counts the bytes of a body sent without
a length (chunked), failing the request with 413 as soon as they pass the limit. Other limits are
the routes': the batch size (``ingest_max_batch``), text lengths
(``tracking.validate.MAX_ID_CHARS``), the fields' own bounds.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

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
