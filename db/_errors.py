"""Named errors of the database room; messages are shown to users (pt-BR)."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The embedded PostGIS cluster cannot be set up, started or stopped."""


class PostgresNotFoundError(ClusterError):
    """The PostgreSQL server binaries (initdb, pg_ctl, postgres) cannot be found."""


class PostgisNotFoundError(ClusterError):
    """PostgreSQL is installed but the PostGIS extension is not."""


class PortInUseError(ClusterError):
    """The TCP port chosen for the embedded cluster is taken by another program."""


class ClusterStartError(ClusterError):
    """The server did not start; the message carries the relevant server-log line."""


class ClusterUserError(ClusterError):
    """No unprivileged OS user is available to own the cluster when running as root."""


class DatabaseUnreachableError(RuntimeError):
    """A configured database server does not answer (the message never shows the password)."""


class InvalidDatabaseUrlError(ValueError):
    """A database URL is not a PostgreSQL URL SQLAlchemy can parse."""
