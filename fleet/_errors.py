"""Named errors of the fleet (registry) room."""

from __future__ import annotations


class FleetError(ValueError):
    """Base class of the registry's input errors."""


class FleetFileError(FleetError):
    """A fleet, municipality or population file lacks a required column or has a bad value."""


class AuxiliaryDriverLimitError(FleetError):
    """A prefixo would have more than the legal number of auxiliary drivers at once."""


class UnknownMunicipalityError(FleetError):
    """An IBGE municipality code is not in the registry."""


class DriverRecordError(FleetError):
    """A driver's record cannot take the change (unknown driver or vehicle, overlapping period)."""


class UnknownRecordError(DriverRecordError):
    """The driver, status period, link or vehicle named is not in the registry."""
