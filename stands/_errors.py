"""Named errors of the stands room (messages in pt-BR: they reach users through the CLI)."""

from __future__ import annotations


class StandsInputError(ValueError):
    """Base class of the stands room's input errors."""


class MissingColumnsError(StandsInputError):
    """A frame lacks columns its contract requires."""


class NaiveTimestampError(StandsInputError):
    """Timestamps without a timezone, or null timestamps, where tz-aware UTC instants are required."""


class ThresholdError(StandsInputError):
    """A threshold or option outside its allowed range (negative, not finite, bad bucket)."""


class MembershipError(StandsInputError):
    """Stand memberships that point at pings that do not exist, or have null stand ids."""


class LicenceFrameError(StandsInputError):
    """A licence frame with bad validity dates or mismatched query arrays."""
