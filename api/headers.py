"""Security headers on every answer, and ``Cache-Control: no-store`` on what is not public.

- ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
  no-referrer`` on every answer;
- ``Content-Security-Policy``: :data:`API_CSP` (nothing may load, no framing) on JSON and
  files; :data:`HTML_CSP` on HTML pages (maps, docs), which inline their scripts and styles
  (folium, Swagger UI's start-up) and draw OpenStreetMap tiles: scripts and styles from the
  page itself only, no framing, no plugin, no form to elsewhere. The web console's pages
  (``api/web``) send their own, stricter :data:`WEB_CSP` (no inline script or style at all);
  an answer that already has a CSP keeps it;
- ``Cache-Control: no-store`` on every answer except the public paths of :data:`PUBLIC_PATHS`
  (no login there, nothing personal): a personal or authenticated answer is never kept by a
  browser or a proxy. The web console's static files (``/static/``) are public and carry
  their own ``Cache-Control``.

A pure ASGI middleware (it only adds headers to ``http.response.start``), so event streams
are not buffered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
HTML_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob: https:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
WEB_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
"""CSP of the web console's pages: only files of this server, nothing inline, no framing.

A page that draws tiles from a configured tile server adds that host to ``img-src`` with
:func:`web_csp`.
"""


def web_csp(*, img_src: tuple[str, ...] = ()) -> str:
    """Return :data:`WEB_CSP` with the origins of ``img_src`` (e.g. a tile server) allowed."""
    if not img_src:
        return WEB_CSP
    return WEB_CSP.replace("img-src 'self' data:;", f"img-src 'self' data: {' '.join(img_src)};")


PUBLIC_PATHS = (
    "/api/v1/public/",
    "/api/v1/maps/citizen",
    "/health",
    "/ready",
    "/docs",
    "/openapi.json",
    "/static/",
)
"""Path prefixes answered to anyone without personal data: cacheable."""

_ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)


def is_public(path: str) -> bool:
    """Tell whether ``path`` is answered to anyone with nothing personal (cacheable)."""
    return path.startswith(PUBLIC_PATHS)


class SecurityHeaders:
    """ASGI middleware adding the headers of the module doc to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers when the answer starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        public = is_public(scope.get("path", ""))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not (k.lower() == b"cache-control" and not public)
                ]
                names = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in _ALWAYS if k not in names]
                if b"content-security-policy" not in names:
                    ctype = dict((k.lower(), v) for k, v in headers).get(b"content-type", b"")
                    csp = HTML_CSP if ctype.startswith(b"text/html") else API_CSP
                    headers.append((b"content-security-policy", csp.encode()))
                if not public:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
