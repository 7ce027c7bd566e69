"""Run the ledger's alembic migrations in-process (no alembic.ini on disk)."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from remedy.ledger.engine import write_transaction
from remedy.ledger.schema import VERSION_TABLE

MIGRATIONS = Path(__file__).parent / "migrations"
# Alembic keeps the running migration context in a module global, so two threads of one process must not migrate
# at once; across processes the database itself serialises them (env.py).
_IN_PROCESS = threading.Lock()


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade(engine: Engine) -> None:
    """`alembic upgrade head`; a no-op when already at head. Safe if two processes run it at once."""
    cfg = alembic_config()
    with _IN_PROCESS, write_transaction(engine) as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
