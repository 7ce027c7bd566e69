"""Alembic environment for the ledger, configured in code (`remedy.ledger.migrate.upgrade`); no alembic.ini needed.

Run in-process with a connection in `config.attributes["connection"]`, or by the `alembic` CLI with
`-x url=...` / `sqlalchemy.url` for writing new revisions.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

from remedy.ledger.schema import VERSION_TABLE, metadata

# Any constant works; it only has to be the same in every process migrating this database.
_PG_MIGRATE_LOCK = 0x72656D6564794C47  # "remedyLG"


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things in place
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Two processes starting at once (receiver + a flow run) must not both create the tables.
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("ledger migrations: pass -x url=<database url> or set sqlalchemy.url")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("ledger migrations run online only (Ledger.migrate or `remedy ledger migrate`)")
run_migrations_online()
