"""`remedy` command line. Each feature area registers its own subcommands; this module only wires them.

A module in COMMAND_MODULES exposes `register(subparsers)`; each subcommand sets `func(args) -> int`.
Errors derived from RemedyError (and ConfigError) print one line and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = (
    "remedy.demo",  # remedy demo
    "remedy.sim.cli",  # remedy sim serve|inject|save|load
    "remedy.ledger.cli",  # remedy ledger migrate|history
    "remedy.detect.cli",  # remedy signals parse, remedy xid explain
    "remedy.health.cli",  # remedy health parse, remedy probe
    "remedy.audit.cli",  # remedy audit nfs, remedy checkpoint interval
    "remedy.goodput.cli",  # remedy goodput, remedy simulate
    "remedy.stack",  # remedy up, remedy receiver serve
    "remedy.production",  # remedy deploy render|job|rbac|sync
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="remedy", description="gpu-remedy: keep GPU training clusters productive.")
    parser.add_argument("--config", help="YAML config file (default $REMEDY_CONFIG, else built-in defaults)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from remedy.config import ConfigError
    from remedy.errors import RemedyError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (RemedyError, ConfigError) as exc:
        print(f"remedy: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
