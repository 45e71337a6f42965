"""The registry's closed vocabularies (no database needed: the file readers check them too)."""

from __future__ import annotations

VEHICLE_STATUSES = ("active", "suspended", "out_of_operation", "reserved", "revoked")
DRIVER_ROLES = ("autorizatario_condutor", "auxiliar")
POPULATION_KINDS = ("census", "estimate")
MAX_AUXILIARY_DRIVERS = 2
"""Auxiliary drivers per prefixo at once (PV art. 43 §1; PB art. 14)."""
DRIVER_DOCUMENTS = ("cnh", "ictp")
"""A driver's documents with a status history: the CNH and the ICTP (Registro de Condutor)."""
DRIVER_DOCUMENT_STATUSES = ("regular", "suspensa", "cassada")
