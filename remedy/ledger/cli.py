"""`remedy ledger migrate|history|incidents` (see remedy/cli.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from remedy.errors import RemedyError

if TYPE_CHECKING:  # keep `remedy --help` fast: SQLAlchemy is imported only when a ledger command runs
    from remedy.ledger import Ledger


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = sub.add_parser("ledger", help="the fleet ledger: schema, audit trail, incidents")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", metavar="WHAT", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        p = ledger_sub.add_parser(name, help=help_)
        p.add_argument("--db", help="database URL (default: db_url from the config)")
        return p

    mig = add("migrate", "create or upgrade the ledger schema (idempotent)")
    mig.set_defaults(func=_migrate)

    hist = add("history", "a node's audit trail: transitions, actions and validations, oldest first")
    hist.add_argument("node", help="node name")
    hist.add_argument("--json", action="store_true", help="print machine-readable JSON")
    hist.set_defaults(func=_history)

    inc = add("incidents", "incidents, oldest first")
    inc.add_argument("--open", action="store_true", help="only incidents not yet resolved or ignored")
    inc.add_argument("--node", help="only this node's incidents")
    inc.add_argument("--json", action="store_true", help="print machine-readable JSON")
    inc.set_defaults(func=_incidents)


def _url(args: argparse.Namespace) -> str:
    from remedy.ledger.locate import locate

    if getattr(args, "ledger_command", "") == "migrate" and not args.db:  # migrate creates: only where configured
        from remedy.config import load_settings

        return load_settings(getattr(args, "config", None)).db_url
    return locate(args.db, getattr(args, "config", None))[0]


@contextmanager
def _open(args: argparse.Namespace, *, must_exist: bool) -> Iterator[Ledger]:
    """Open the ledger; database errors become one-line RemedyErrors instead of tracebacks."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from remedy.ledger import Ledger

    url = _url(args)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise RemedyError(f"not a database URL: {url!r}") from None
    if must_exist and parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).exists():  # reading must not create an empty database file
            raise RemedyError(f"ledger database not found: {parsed.database} (run `remedy ledger migrate`)")
    try:
        ledger = Ledger(url)
    except ValueError as exc:
        raise RemedyError(str(exc)) from None
    try:
        if must_exist:
            ledger.require_migrated()
        yield ledger
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise RemedyError(f"ledger database {parsed.render_as_string(hide_password=True)}: {reason}") from None
    finally:
        ledger.close()


def _migrate(args: argparse.Namespace) -> int:
    with _open(args, must_exist=False) as ledger:
        before = ledger.schema_revision()
        ledger.migrate()
        after = ledger.schema_revision()
    print(f"ledger schema at {after}" + (" (already up to date)" if before == after else f" (was {before or 'empty'})"))
    return 0


def _history(args: argparse.Namespace) -> int:
    with _open(args, must_exist=True) as ledger:
        entries = ledger.history(args.node)
    if args.json:
        print(json.dumps({"node": args.node, "entries": [e.as_dict() for e in entries]}, indent=2))
        return 0
    rows = [(e.at.strftime("%Y-%m-%d %H:%M:%S"), e.kind, short_by(e.by), e.summary) for e in entries]
    _print_table(("TIME (UTC)", "KIND", "BY", "WHAT"), rows)
    return 0


def short_by(by: str | None) -> str:
    """Who, in a table cell: a person's name as recorded; automation as `gpu-remedy` and the first 8 characters of
    its flow run's id (the full "flow-run:<run name>:<uuid>" stays in --json and in the Prefect UI)."""
    by = by or ""
    if by.startswith("flow-run:"):
        run_id = by.rsplit(":", 1)[-1]
        return f"gpu-remedy run {run_id[:8]}" if run_id else "gpu-remedy"
    return by if len(by) <= 32 else by[:31] + "…"


def _incidents(args: argparse.Namespace) -> int:
    from remedy.domain.model import IncidentStatus

    status = [IncidentStatus.OPEN, IncidentStatus.ACTING, IncidentStatus.ESCALATED] if args.open else None
    with _open(args, must_exist=True) as ledger:
        found = ledger.incidents(status=status, node=args.node)
    if args.json:
        out = [
            {"id": i.id, "node": i.node, "gpu": i.gpu, "signal": i.signal, "xid": i.xid, "status": i.status.value,
             "severity": i.severity, "count": i.count, "first_seen": i.first_seen.isoformat(),
             "last_seen": i.last_seen.isoformat(), "flow_run_id": i.flow_run_id, "rack": i.rack,
             "switch": i.switch, "pdu": i.pdu, "detail": i.detail}
            for i in found
        ]
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        (str(i.id), i.node, "" if i.gpu is None else str(i.gpu), i.signal + (f" {i.xid}" if i.xid is not None else ""),
         i.severity, i.status.value, str(i.count), i.last_seen.strftime("%Y-%m-%d %H:%M:%S"))
        for i in found
    ]
    _print_table(("ID", "NODE", "GPU", "SIGNAL", "SEVERITY", "STATUS", "COUNT", "LAST SEEN (UTC)"), rows)
    return 0


def _print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    if not rows:
        print("(none)")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for line in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
