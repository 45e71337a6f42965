"""Named errors of the stands room (messages in pt-BR: they reach users through the CLI)."""

from __future__ import annotations


class StandsError(ValueError):
    """Base of the errors about a stands layer or frame."""


class StandsFormatError(StandsError):
    """A stands file that cannot be read: unknown extension, bad JSON, not a FeatureCollection."""


class MissingColumnError(StandsError):
    """A required column or property is absent."""


class MissingStandIdError(StandsError):
    """A stand without ``stand_id``."""


class DuplicateStandIdError(StandsError):
    """Two stands with the same ``stand_id``."""


class NullGeometryError(StandsError):
    """A stand without geometry (null or empty)."""


class UnsupportedGeometryError(StandsError):
    """A stand geometry that is neither Polygon/MultiPolygon nor Point."""


class MissingRadiusError(StandsError):
    """A Point stand without ``radius_m`` and no default radius."""


class InvalidRadiusError(StandsError):
    """A ``radius_m`` that is not a finite number > 0."""


class InvalidGeometryError(StandsError):
    """An invalid polygon (self-intersection, ...) that was not repaired."""


class InvalidAttributeError(StandsError):
    """A bad ``capacity`` or ``municipality`` value."""


class StandsCRSError(StandsError):
    """A stands layer without a CRS, or a frame not in EPSG:4326."""


class StandGeometryRepairedWarning(UserWarning):
    """Invalid polygons were repaired with ``make_valid`` (``read_stands(..., repair=True)``)."""


# Visits, licences and occupancy (stands/visits.py, stands/licences.py, stands/occupancy.py).
class NaiveTimestampError(StandsError):
    """Timestamps without a timezone, or null, where tz-aware UTC instants are required."""


class ThresholdError(StandsError):
    """A threshold or option outside its allowed range (negative, not finite, bad bucket)."""


class MembershipError(StandsError):
    """Stand memberships that point at pings that do not exist, or have null stand ids."""


class LicenceFrameError(StandsError):
    """A licence frame with bad validity dates, an unknown timezone, or mismatched queries."""


class PingFrameError(StandsError):
    """Pings that break their frame contract (null vehicle ids, unknown meter values)."""


# Registry operations (db/stands/registry.py) and the supervisor's view (stands/supervision.py).
class UnknownStandError(StandsError):
    """A stand id that is not in the registry (or is retired where an active stand is needed)."""


class StandExistsError(StandsError):
    """A stand id that is already in the registry."""


class UnknownVehicleError(StandsError):
    """A prefixo (vehicle id) that is not in the fleet registry."""


class LicenceOverlapError(StandsError):
    """A parking licence whose period overlaps another of the same prefixo at the same stand."""


class UnknownLicenceError(StandsError):
    """No parking licence matches (id, or prefixo × stand valid on the date)."""


class SupervisorError(StandsError):
    """A supervisor record that does not exist or cannot take the change (dates out of order)."""


class StandScopeError(StandsError):
    """A supervisor asked about a stand outside their own stands."""


class LicenceFileError(StandsError):
    """A parking-licence file with bad rows (every bad row is named)."""


class StandSuspensionFileError(StandsError):
    """A stand-suspensions file with bad rows (every bad row is named)."""


class UnknownDriverError(StandsError):
    """A driver id that is not in the drivers registry."""
