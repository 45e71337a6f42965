"""Schema migrations (Alembic), configured in code so they run from an installed package.

The migration scripts live in ``db/migrations/versions``; the product never calls ``create_all``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from geoalchemy2 import alembic_helpers
from sqlalchemy import MetaData, create_engine
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import NullPool

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
MODEL_MODULES = (
    "db.fleet.models",
    "db.stands.models",
    "db.tracking.models",
    "db.enforcement.models",
    "db.accounts.models",
)
_PARTITION_CHILD = re.compile(r"^fixes_(p\d{8}|default)$")


def target_metadata() -> MetaData:
    """Import every room's models and return the shared metadata."""
    for name in MODEL_MODULES:
        importlib.import_module(name)
    from db.base import Base

    return Base.metadata


def include_object(
    obj: Any, name: str | None, obj_type: str, reflected: bool, compare_to: Any
) -> bool:
    """Tell Alembic's autogenerate which database objects are ours.

    PostGIS's own tables and the daily partitions of ``fixes`` (created at run time, not by
    migrations) are left out.
    """
    if obj_type == "table" and name is not None and _PARTITION_CHILD.match(name):
        return False
    if (
        obj_type == "index"
        and reflected
        and obj.table is not None
        and _PARTITION_CHILD.match(obj.table.name)
    ):
        return False
    keep = alembic_helpers.include_object(  # type: ignore[no-untyped-call]
        obj, name, obj_type, reflected, compare_to
    )
    return bool(keep)


def alembic_config(connection: Connection | None = None) -> Config:
    """Return an Alembic configuration pointing at the bundled migrations.

    Parameters
    ----------
    connection : Connection, optional
        Open connection the migration environment uses instead of opening its own.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _run(url: str | URL, fn: Any, *args: Any, **kwargs: Any) -> Any:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            return fn(alembic_config(conn), *args, **kwargs)
    finally:
        engine.dispose()


def upgrade(url: str | URL, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision`` (default: newest), in one transaction."""
    _run(url, command.upgrade, revision)


def downgrade(url: str | URL, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision`` (``"base"`` removes everything)."""
    _run(url, command.downgrade, revision)


def current(url: str | URL) -> str | None:
    """Return the database's revision, or None when it was never migrated."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            rev = MigrationContext.configure(conn).get_current_revision()
            return None if rev is None else str(rev)
    finally:
        engine.dispose()


def head() -> str:
    """Return the newest revision of the bundled migrations."""
    from alembic.script import ScriptDirectory

    rev = ScriptDirectory.from_config(alembic_config()).get_current_head()
    return str(rev)


def revision(url: str | URL, message: str, *, autogenerate: bool = True) -> None:
    """Write a new migration script comparing the models with the database at ``url`` (dev tool)."""
    _run(url, command.revision, message=message, autogenerate=autogenerate)
