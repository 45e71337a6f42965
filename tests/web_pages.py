"""The console's pages and who may use them: one row per route (import ``PAGES``).

Read by ``tests/web/test_authorization.py`` (every route × anonymous and every role: allowed,
403 page, or 303 to the login; CSRF on every POST), ``tests/web/test_pages.py`` (every GET
page in Chromium: ``<title>``, ``<h1>``, axe-core) and ``tests/web/test_security.py`` (CSP,
``no-store``). A new route of ``api/web`` without a row fails
``test_every_web_route_has_a_row``.

A new page: add ``Page("GET", "/fiscal/propostas", REVIEWERS)`` in its area's block; a form:
``Page("POST", "/fiscal/propostas/{proposal_id}/confirmar", REVIEWERS, form={...})`` (the
tests add the CSRF token). Path parameters are filled from :data:`PATH_IDS` unless ``url`` is
given (a URL with the parameters and query to request). A fragment a page fetches, or a
download: ``document=False`` (in the authorisation matrix, not in the page checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ROLES = ("admin", "agent", "supervisor", "planner")
ANONYMOUS = "anonymous"
CALLERS = (ANONYMOUS, *ROLES)
ANYONE = frozenset(CALLERS)
ADMIN = frozenset({"admin"})
REVIEWERS = frozenset({"admin", "agent"})
SUPERVISORS = frozenset({"admin", "supervisor"})
PLANNERS = frozenset({"admin", "planner"})
USERS = frozenset(ROLES)

PATH_IDS = {
    "stand_id": "S1",
    "user_id": "1",
    "municipality": "1100205",
    "finding_id": "longer_route-5b3696e33e525427",  # tests/web_fiscal.py SEEDED_FINDING_ID
    "proposal_id": "P-3322927dce7f4f37",  # tests/web_fiscal.py SEEDED_PROPOSAL_ID
    "driver_id": "D1",  # tests/web/conftest.py: a synthetic driver
    "device_id": "1",  # tests/web/conftest.py: the seeded device
}
"""Values of path parameters in the requests of the tests (the seeded records)."""


@dataclass(frozen=True)
class Page:
    """A route of the console and who may use it.

    ``allowed`` is None for the session's own routes (``/``, ``/painel``, ``/entrar``,
    ``/sair``: their behaviour is tested in ``test_login.py``); :data:`ANYONE` for a public
    page. ``browse``: a GET page opened in Chromium by ``test_pages.py``. ``document``: a whole
    page (title, h1, the strict CSP: ``test_security.py``); False for an HTML fragment or a
    download (authorisation and ``no-store`` still checked).
    """

    method: str
    path: str
    allowed: frozenset[str] | None
    url: str | None = None
    form: dict[str, Any] = field(default_factory=dict)
    browse: bool = True
    document: bool = True

    def request_url(self) -> str:
        """Return the URL to request (``url``, else ``path`` with :data:`PATH_IDS`)."""
        if self.url is not None:
            return self.url
        return re.sub(r"\{(\w+)\}", lambda m: PATH_IDS[m.group(1)], self.path)

    @property
    def id(self) -> str:
        """Test id: ``GET /fiscal``."""
        return f"{self.method} {self.path}"


PAGES: tuple[Page, ...] = (
    # --- the session's own routes (tests/web/test_login.py) ---
    Page("GET", "/", None, browse=False),
    Page("GET", "/painel", None, browse=False),
    Page("GET", "/entrar", None, browse=False),  # browsed by test_pages (login page)
    Page("POST", "/entrar", None),
    Page("POST", "/sair", None),
    Page("GET", "/conta/senha", USERS),
    Page("POST", "/conta/senha", USERS, form={"current": ""}),  # refused: wrong password
    # --- admin ---
    Page("GET", "/admin", ADMIN),
    Page("GET", "/admin/usuarios", ADMIN),
    Page("POST", "/admin/usuarios", ADMIN, form={"username": ""}),  # refused: empty name
    Page("GET", "/admin/usuarios/{user_id}", ADMIN),
    # the account forms on a user that does not exist (404): nothing changes
    Page("POST", "/admin/usuarios/{user_id}/papel", ADMIN, url="/admin/usuarios/999999/papel"),
    Page(
        "POST",
        "/admin/usuarios/{user_id}/desativar",
        ADMIN,
        url="/admin/usuarios/999999/desativar",
    ),
    Page("POST", "/admin/usuarios/{user_id}/senha", ADMIN, url="/admin/usuarios/999999/senha"),
    Page("GET", "/admin/dispositivos", ADMIN),
    Page("POST", "/admin/dispositivos", ADMIN, form={"vehicle_id": ""}),  # refused: empty
    Page("GET", "/admin/dispositivos/novo-token", ADMIN),
    Page("GET", "/admin/dispositivos/{device_id}/rejeitadas", ADMIN),
    Page(
        "POST",
        "/admin/dispositivos/{device_id}/revogar",
        ADMIN,
        url="/admin/dispositivos/999999/revogar",
    ),
    Page("GET", "/admin/pontos", ADMIN),
    Page("GET", "/admin/pontos.geojson", ADMIN, document=False, browse=False),
    Page("GET", "/admin/pontos/novo", ADMIN),
    Page("POST", "/admin/pontos", ADMIN, form={"stand_id": ""}),  # refused: no id, no area
    Page("GET", "/admin/pontos/{stand_id}", ADMIN),
    Page("POST", "/admin/pontos/{stand_id}", ADMIN, form={"name": "Ponto Matriz"}),  # no change
    # the stand forms on a stand that does not exist (404): nothing changes
    Page(
        "POST",
        "/admin/pontos/{stand_id}/desativar",
        ADMIN,
        url="/admin/pontos/NAO-EXISTE/desativar",
    ),
    Page(
        "POST",
        "/admin/pontos/{stand_id}/licencas",
        ADMIN,
        url="/admin/pontos/NAO-EXISTE/licencas",
    ),
    Page(
        "POST",
        "/admin/pontos/{stand_id}/licencas/encerrar",
        ADMIN,
        url="/admin/pontos/NAO-EXISTE/licencas/encerrar",
    ),
    Page(
        "POST",
        "/admin/pontos/{stand_id}/exclusoes",
        ADMIN,
        url="/admin/pontos/NAO-EXISTE/exclusoes",
    ),
    Page("GET", "/admin/condutores", ADMIN),
    Page("POST", "/admin/condutores", ADMIN, form={"driver_id": ""}),  # refused: empty id
    Page("GET", "/admin/condutores/{driver_id}", ADMIN),
    Page("POST", "/admin/condutores/{driver_id}", ADMIN, form={"name": ""}),  # refused: no name
    Page(
        "POST",
        "/admin/condutores/{driver_id}/periodos",
        ADMIN,
        url="/admin/condutores/NAO-EXISTE/periodos",
    ),
    Page(
        "POST",
        "/admin/condutores/{driver_id}/periodos/{period_id}",
        ADMIN,
        url="/admin/condutores/D1/periodos/999999",
    ),
    Page(
        "POST",
        "/admin/condutores/{driver_id}/vinculos",
        ADMIN,
        url="/admin/condutores/NAO-EXISTE/vinculos",
    ),
    Page(
        "POST",
        "/admin/condutores/{driver_id}/vinculos/{link_id}",
        ADMIN,
        url="/admin/condutores/D1/vinculos/999999",
    ),
    Page("GET", "/admin/importacao", ADMIN),
    Page("POST", "/admin/importacao", ADMIN, form={"kind": "frota"}),  # refused: no file
    Page("POST", "/admin/importacao/confirmar", ADMIN, form={"envio": "nenhum"}),  # no upload
    Page("GET", "/admin/auditoria", ADMIN),
    # --- agent (fiscal) ---
    Page("GET", "/fiscal", REVIEWERS),
    Page("GET", "/fiscal/alertas", REVIEWERS),
    Page("GET", "/fiscal/achados/{finding_id}", REVIEWERS),
    Page("GET", "/fiscal/propostas", REVIEWERS),
    Page("GET", "/fiscal/propostas/{proposal_id}", REVIEWERS),
    Page(
        "GET",
        "/fiscal/propostas/{proposal_id}/documentos/{documento}",
        REVIEWERS,
        url=f"/fiscal/propostas/{PATH_IDS['proposal_id']}/documentos/auto",
    ),
    Page("POST", "/fiscal/propostas/gerar", REVIEWERS, form={"municipio": "4314902"}),
    # the seeded proposal is left as it is: each step is refused for what it lacks (422/409)
    Page("POST", "/fiscal/propostas/{proposal_id}/confirmar", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/descartar", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/notificar", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/defesa", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/decidir", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/notificar-decisao", REVIEWERS),
    Page("POST", "/fiscal/propostas/{proposal_id}/finalizar", REVIEWERS),
    # --- supervisor de ponto ---
    Page("GET", "/supervisao", SUPERVISORS),
    Page("GET", "/supervisao/pontos/{stand_id}", SUPERVISORS),
    Page("GET", "/supervisao/pontos/{stand_id}/agora", SUPERVISORS, document=False, browse=False),
    Page("GET", "/supervisao/pontos/{stand_id}/contatos", SUPERVISORS),
    # --- planner ---
    Page("GET", "/planejamento", PLANNERS),
    Page("GET", "/planejamento/{municipality}/mapa.json", PLANNERS, document=False, browse=False),
    Page(
        "GET",
        "/planejamento/{municipality}/{table}.csv",
        PLANNERS,
        url="/planejamento/1100205/indicadores.csv",
        document=False,
        browse=False,
    ),
    # --- citizen (no login) ---
    Page("GET", "/acessivel", ANYONE),
    Page(
        "GET",
        "/acessivel/resultados",
        ANYONE,
        url="/acessivel/resultados?ponto=S1",
        document=False,
        browse=False,
    ),
    # --- every map's background (public, nothing personal) ---
    Page(
        "GET",
        "/mapa-base.geojson",
        ANYONE,
        url="/mapa-base.geojson?bbox=-51.25,-30.05,-51.2,-30.0",
        document=False,
        browse=False,
    ),
)


def role_for(page: Page) -> str | None:
    """Return the caller to open ``page`` as: its area's own role, else admin, else anonymous."""
    allowed = page.allowed or frozenset()
    if ANONYMOUS in allowed:
        return None
    own = sorted(allowed - {"admin"})
    return own[0] if own else "admin"
