"""Named errors of the tracking room (messages in pt-BR: they reach users through the CLI)."""

from __future__ import annotations


class PingFileError(ValueError):
    """A pings file that cannot be read as a whole (base of the file-level errors)."""


class UnsupportedFormatError(PingFileError):
    """A file whose extension is not one of the supported formats."""


class EmptyFileError(PingFileError):
    """A file with no content at all (not even a header)."""


class MalformedFileError(PingFileError):
    """A file that the CSV/Parquet/JSON reader cannot parse."""


class MissingColumnsError(ValueError):
    """A file or frame without one or more required columns."""


class ReservedColumnError(ValueError):
    """An input column named like a column the validation adds (``row``, ``reason``)."""


class InvalidParameterError(ValueError):
    """A threshold or option outside its allowed range (e.g. a naive ``now``)."""


class PingFrameError(ValueError):
    """A pings frame that breaks its contract (e.g. naive timestamps)."""


class PartitionStateError(RuntimeError):
    """A daily partition of ``fixes`` in a state ingest cannot fix safely (e.g. detached)."""
