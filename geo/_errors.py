"""Named errors of the geo room (messages in pt-BR: they reach users through the CLI)."""

from __future__ import annotations


class InvalidResolutionError(ValueError):
    """An H3 resolution outside the supported range."""


class CoordinateArrayError(ValueError):
    """Latitude/longitude arrays of different shapes or non-numeric."""


class CRSError(ValueError):
    """A frame without a CRS, or with a CRS of the wrong kind for the operation."""


class NotGeographicCRSError(CRSError):
    """The operation expects geographic coordinates (longitude/latitude in degrees)."""


class NotMetricCRSError(CRSError):
    """The operation expects a projected CRS in metres."""


class StandCoverError(ValueError):
    """Stands that cannot be covered by H3 cells (null, empty or non-polygonal geometry)."""


class RoadFileError(ValueError):
    """A road network file that cannot be read (unsupported format, unparseable content)."""


class RoadLayerError(ValueError):
    """A road layer without usable lines (empty, or geometries that are not lines)."""


class RoadGraphError(ValueError):
    """A road graph that cannot be built or queried (bad option, malformed positions)."""
