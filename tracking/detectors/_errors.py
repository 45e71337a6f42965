"""Named errors of the detectors (messages in pt-BR: they reach users through the CLI).

Shared by every detector module; each helper appends its classes, none deletes another's.
"""

from __future__ import annotations


class DetectorError(ValueError):
    """Base of the errors raised by a detector about its inputs or options."""


class DetectorInputError(DetectorError):
    """An input frame without a required column, or breaking its contract (e.g. naive times)."""


class DetectorThresholdError(DetectorError):
    """A threshold or option outside its allowed range (negative, not finite, unknown zone)."""


class FleetFrameError(DetectorError):
    """A fleet frame with an unknown status or unreadable validity dates."""


class BoundaryError(DetectorError):
    """A municipal boundary that is not a (Multi)Polygon in a geographic CRS."""


class Flag2CalendarError(DetectorError):
    """A Bandeira 2 calendar with bad weekdays, hours, months or dates."""
