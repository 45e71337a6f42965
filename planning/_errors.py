"""Named errors of the planning room."""

from __future__ import annotations


class PlanningError(ValueError):
    """Base class of the planning room's input errors."""


class UnknownMunicipalityError(PlanningError, LookupError):
    """An IBGE code that is malformed or not among IBGE's municipalities."""


class PlanningRulesError(PlanningError):
    """A ``--rules`` file that is not valid TOML or does not follow the ``[planning]`` schema."""


class PlanningInputError(PlanningError):
    """A trips, stands or fleet frame lacking a required column or holding a bad value."""
