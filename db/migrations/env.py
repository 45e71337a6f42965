"""Alembic environment: run by :mod:`db.migrate`, which passes an open connection."""

from __future__ import annotations

from typing import TypedDict, Unpack

from alembic import context
from geoalchemy2 import alembic_helpers
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from db.migrate import include_object, target_metadata

config = context.config
metadata = target_metadata()


class _Target(TypedDict, total=False):
    """Where the migrations run: a database URL (offline, SQL printed) or an open connection."""

    url: str | None
    literal_binds: bool
    connection: Connection


def _configure(**kw: Unpack[_Target]) -> None:
    context.configure(
        target_metadata=metadata,
        include_object=include_object,
        process_revision_directives=alembic_helpers.writer,
        render_item=alembic_helpers.render_item,
        compare_type=True,
        **kw,
    )


def run_migrations_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(connection=conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
