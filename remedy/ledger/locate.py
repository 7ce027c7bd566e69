"""Which ledger an operator's command reads: the one the running stack writes, found without guessing.

In order: `--db`; `REMEDY_DB_URL` or `db_url` in the config; the embedded stack's ledger (`remedy up`:
var/stack/ledger.db), then the demo's (`remedy demo`: var/demo/ledger.db), both relative to where they were started.
A read never creates an empty ledger: with none found the command says where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

from remedy.errors import RemedyError

# Where `remedy up` and `remedy demo` keep their ledgers (their --workdir defaults).
STACK_LEDGERS = (Path("var/stack/ledger.db"), Path("var/demo/ledger.db"))


class LedgerNotFound(RemedyError):
    """No ledger where an operator's command looked."""


def locate(explicit: str | None = None, config: str | None = None) -> tuple[str, str]:
    """(database URL, where it came from) for a command that reads the ledger."""
    if explicit:
        return explicit, "--db"
    from remedy.config import load_settings

    settings = load_settings(config)  # a broken config file is the error to report, before any ledger is looked for
    if os.environ.get("REMEDY_DB_URL") or _config_names_db(config):
        return settings.db_url, "configuration"
    for path in STACK_LEDGERS:
        if path.is_file():
            return f"sqlite:///{path}", f"{'remedy up' if 'stack' in str(path) else 'remedy demo'} ledger"
    looked = ", ".join(str(p) for p in STACK_LEDGERS)
    raise LedgerNotFound(f"no ledger found (looked in {looked}); start the stack with `remedy up`, or pass --db URL "
                         "or set REMEDY_DB_URL")


def _config_names_db(config: str | None) -> bool:
    """Whether the operator's config file sets db_url (the loaded settings cannot say: every field of a model
    rebuilt from environment overrides counts as set)."""
    import yaml

    path = config or os.environ.get("REMEDY_CONFIG")
    if not path or not Path(path).is_file():
        return False
    try:
        data = yaml.safe_load(Path(path).read_bytes().decode("utf-8", errors="replace")) or {}
    except yaml.YAMLError:
        return False  # load_settings reports the broken file with its reason
    return isinstance(data, dict) and "db_url" in data


def describe(url: str) -> str:
    """The URL without a password, for "read from …" lines."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def use(explicit: str | None = None, config: str | None = None, *, write: bool = False) -> str:
    """Point this process's runtime at the located ledger; returns the line saying where it read from.

    A write (opening a breaker) may create the ledger the operator named (`--db` or configuration); a read never
    does, and nothing creates one in a place the operator did not name."""
    from remedy import runtime

    url, source = locate(explicit, config)
    named = source in ("--db", "configuration")
    missing = url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file()
    if missing and not (write and named):
        raise LedgerNotFound(f"ledger {url} ({source}) does not exist; not creating an empty one")
    os.environ["REMEDY_DB_URL"] = url
    runtime.reset()
    return f"ledger: {describe(url)} ({source})"
