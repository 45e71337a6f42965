"""Errors of the maps package."""

from __future__ import annotations


class MapInputError(ValueError):
    """A frame given to a map breaks its contract (columns, CRS, naive times)."""
