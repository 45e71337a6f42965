"""Where each role lands after login, how the role is named, and the links of its nav bar.

A new page of a role adds its link to that role's tuple in :data:`NAV` (admins see every area
whose API they may use, as in the API's authorisation).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NavItem:
    """One link of the nav bar; it is marked current on its path and the paths below it."""

    label: str
    path: str

    def is_current(self, path: str) -> bool:
        """Tell whether ``path`` is this link's page or a page below it."""
        return path == self.path or path.startswith(self.path.rstrip("/") + "/")


ROLE_LABELS = {
    "admin": "Administrador(a)",
    "agent": "Fiscal",
    "supervisor": "Supervisor(a) de ponto",
    "planner": "Planejador(a)",
}
"""How each role is named to people (pt-BR)."""

LANDING = {
    "admin": "/admin",
    "agent": "/fiscal",
    "supervisor": "/supervisao",
    "planner": "/planejamento",
}
"""The page each role lands on after login."""

STAND_MAP = NavItem("Mapa dos pontos", "/api/v1/maps/stands")
"""The stand map (``api.routes.maps``): occupancy now, queue, intruders, licensees' presence."""
FINDINGS_MAP = NavItem("Mapa de achados", "/api/v1/maps/findings")
"""The enforcement map (``api.routes.maps``): the most recent findings by kind."""

NAV: dict[str, tuple[NavItem, ...]] = {
    "admin": (
        NavItem("Administração", "/admin"),
        NavItem("Fiscalização", "/fiscal"),
        NavItem("Supervisão", "/supervisao"),
        NavItem("Planejamento", "/planejamento"),
        STAND_MAP,
        FINDINGS_MAP,
    ),
    "agent": (NavItem("Fiscalização", "/fiscal"), FINDINGS_MAP),
    "supervisor": (NavItem("Meus pontos", "/supervisao"), STAND_MAP),
    "planner": (NavItem("Planejamento", "/planejamento"), STAND_MAP),
}
"""The nav bar of each role, in order. The maps are whole pages of their own (no nav bar)."""
