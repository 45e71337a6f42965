"""The registry's closed vocabularies (no database needed: the file readers check them too)."""

from __future__ import annotations

VEHICLE_STATUSES = ("active", "suspended", "out_of_operation", "reserved", "revoked")
VEHICLE_STATUS_LABELS = {
    "active": "ativo",
    "suspended": "suspenso",
    "out_of_operation": "fora de operação",
    "reserved": "reservado",
    "revoked": "cassado",
}
"""A vehicle status as people write it (pt-BR), by code."""
VEHICLE_STATUS_ALIASES = {
    "ativo": "active", "ativa": "active",
    "suspenso": "suspended", "suspensa": "suspended",
    "fora_de_operacao": "out_of_operation",
    "reservado": "reserved", "reservada": "reserved",
    "cassado": "revoked", "cassada": "revoked", "revogado": "revoked", "revogada": "revoked",
}  # fmt: skip
"""pt-BR words a registry file may write for a status (lower case, no accents, ``_`` for
spaces), by word: the readers store the code."""
DRIVER_ROLES = ("autorizatario_condutor", "auxiliar")
POPULATION_KINDS = ("census", "estimate")
SERVICE_CATEGORIES = ("comum", "aeroporto", "distrito", "acessivel")
"""Service categories of a vehicle (``service_category``): Porto Velho's Táxis Aeroporto and
Táxis Distritais are exempt from the taxímetro (art. 44); ``acessivel`` is the Táxi Acessível."""
DRIVER_DOCUMENTS = ("cnh", "ictp")
"""A driver's documents with a status history: the CNH and the ICTP (Registro de Condutor)."""
DRIVER_DOCUMENT_STATUSES = ("regular", "suspensa", "cassada")
