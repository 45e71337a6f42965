"""What a log line keeps of a request: no secret, no citizen's position."""

from __future__ import annotations

import logging

from api.redact import RedactSecrets, redact


def test_a_citizens_searched_position_is_masked() -> None:
    """The public page's search by location: lat and lon masked, the rest of the line kept."""
    line = (
        '127.0.0.1:5 - "GET /acessivel/resultados?lat=-30.031234&lon=-51.221234&raio=1000 HTTP/1.1"'
    )
    assert (
        redact(line)
        == '127.0.0.1:5 - "GET /acessivel/resultados?lat=***&lon=***&raio=1000 HTTP/1.1"'
    )


def test_the_access_log_record_is_masked() -> None:
    """uvicorn's access record carries the path as an argument: masked there too."""
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/acessivel/resultados?origem=mapa&lat=-29.9&lon=-51.1", "1.1", 200),
        None,
    )  # fmt: skip
    assert RedactSecrets().filter(record)
    assert record.getMessage().endswith(
        '"GET /acessivel/resultados?origem=mapa&lat=***&lon=*** HTTP/1.1" 200'
    )
