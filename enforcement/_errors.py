"""Named errors of the legal layer (messages in pt-BR: they reach agents through CLI and API)."""

from __future__ import annotations


class EnforcementError(ValueError):
    """Base of the legal layer's errors."""


class RulebookError(EnforcementError):
    """A rulebook file that is not valid TOML or does not follow the schema."""


class UnknownMunicipalityError(EnforcementError):
    """A municipality code without a configured rulebook."""


class ProposalNotFoundError(EnforcementError, LookupError):
    """No proposal has the given id."""


class TransitionError(EnforcementError):
    """A review step not allowed from the proposal's current state, or missing its data."""


class ReviewDataError(TransitionError):
    """A review step missing what the agent must give, or given what does not apply.

    E.g. the answer to the rule's exception, or the pontuação where the text leaves it open.
    """


class DocumentError(EnforcementError):
    """Document data (auto de infração, notificação) missing a key or holding a bad value."""
