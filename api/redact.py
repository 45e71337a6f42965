"""Secrets and a citizen's searched position out of the logs.

Masked: tokens, token-bearing parameters, bearer headers, web cookies, ``lat``/``lon``.

The web console's cookies are its session and its pre-session CSRF seed.

A device token travels in the URL of every OsmAnd request (``/osmand?id=<token>``: Traccar
Client puts it there) and a browser's WebSocket token in ``/api/v1/alerts/ws?token=…``; the
access log of uvicorn writes those URLs. :class:`RedactSecrets` is a :class:`logging.Filter`
that masks them in every record before it is formatted: the message, its arguments (the URL
of an access-log line), an exception's text and the stack. ``pontual serve`` puts it on every
handler (:func:`log_config`); :func:`install` puts it on uvicorn's loggers for an app run
some other way.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_PARAMS = (
    "id",
    "deviceid",
    "device_id",
    "token",
    "access_token",
    "password",
    "secret",
    "csrf_token",
    "pontual_sessao",
    "pontual_csrf",
)
"""Query, form or cookie parameters whose value is masked wherever a log line shows them
(``pontual_sessao`` and ``pontual_csrf`` are the web console's cookies)."""
PERSONAL_PARAMS = ("lat", "lon")
"""A citizen's searched position (``/acessivel/resultados?lat=…&lon=…``): personal data, never
written to a log with the client's address beside it."""

_PARAM_RE = re.compile(
    r"(?i)((?:^|[?&;\s])(?:" + "|".join(SECRET_PARAMS + PERSONAL_PARAMS) + r")=)[^&\s\"';]*"
)
_TOKEN_RE = re.compile(r"\b(?:pu_[A-Za-z0-9_-]{20,}|pd[0-9a-f]{32})\b")
_BEARER_RE = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
_PLAIN = (int, float, bool, type(None))
_LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn")


def redact(text: str) -> str:
    """Return ``text`` with tokens, token-bearing parameters and bearer credentials masked."""
    text = _PARAM_RE.sub(lambda m: m.group(1) + MASK, text)
    text = _TOKEN_RE.sub(MASK, text)
    return _BEARER_RE.sub(lambda m: m.group(1) + MASK, text)


def _redact_arg(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, str):
        return redact(value)
    shown = str(value)
    masked = redact(shown)
    return value if masked == shown else masked


class RedactSecrets(logging.Filter):
    """Mask secrets in a record's message, arguments, exception text and stack (never drops)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always keep it."""
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install() -> None:
    """Put the filter on uvicorn's loggers and on the root logger's handlers (idempotent)."""
    targets: list[logging.Filterer] = [logging.getLogger(n) for n in _LOGGERS]
    targets += logging.getLogger().handlers
    for target in targets:
        if not any(isinstance(f, RedactSecrets) for f in target.filters):
            target.addFilter(RedactSecrets())


def log_config(level: str = "info") -> dict[str, Any]:
    """Return uvicorn's logging configuration with the filter on every handler.

    The root logger gets uvicorn's default handler (warnings and errors of the libraries), so
    no record reaches a handler without the filter; the application's own loggers (``api``)
    speak at ``level``, as uvicorn's do (a stalled body, a client that left).
    """
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redact_secrets": {"()": "api.redact.RedactSecrets"}}
    for handler in config["handlers"].values():
        handler["filters"] = ["redact_secrets"]
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "api"):
        config["loggers"].setdefault(name, {})["level"] = level.upper()
    return config
