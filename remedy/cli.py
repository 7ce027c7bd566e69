"""`remedy` command line. Each feature area registers its own subcommands; this module only wires them.

A module in COMMAND_MODULES exposes `register(subparsers)`; each subcommand sets `func(args) -> int`.
Errors derived from RemedyError (and ConfigError) print one line and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# top-level command → the module that registers it (one module may register several)
COMMANDS = {
    "demo": "remedy.demo",
    "sim": "remedy.sim.cli",
    "ledger": "remedy.ledger.cli",
    "xid": "remedy.detect.cli",
    "signals": "remedy.detect.cli",
    "probe": "remedy.health.cli",
    "health": "remedy.health.cli",
    "audit": "remedy.audit.cli",
    "checkpoint": "remedy.audit.cli",
    "goodput": "remedy.goodput.cli",
    "simulate": "remedy.goodput.cli",
    "up": "remedy.stack",
    "receiver": "remedy.stack",
    "deploy": "remedy.production",
    "breaker": "remedy.safety.cli",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or only the module of `only` (start-up of one command stays cheap: no area imports
    another area's heavy dependencies just to build its parser)."""
    parser = argparse.ArgumentParser(prog="remedy", description="gpu-remedy: keep GPU training clusters productive.")
    parser.add_argument("--config", help="YAML config file (default $REMEDY_CONFIG, else built-in defaults)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[only]] if only in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    args = list(argv)
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "--config" and args:
            args.pop(0)
        elif flag in ("-h", "--help"):
            return None
    return args[0] if args else None


def main(argv: Sequence[str] | None = None) -> int:
    from remedy.config import ConfigError
    from remedy.errors import RemedyError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(argv))
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
