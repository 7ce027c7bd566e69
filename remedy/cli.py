"""`remedy` command line. Each feature area registers its own subcommands; this module only wires them.

A module in COMMAND_MODULES exposes `register(subparsers)`; each subcommand sets `func(args) -> int`.

Exit codes, the same for every command (docs/operations.md): 0 ok; 1 a finding or a failed verdict (a check
that found a fault, a demo whose outcome was not the expected one); 2 bad input or usage. Bad input is one line
on stderr, never a traceback: argparse's errors, RemedyError, ConfigError and a file that cannot be read or
written all end here as `remedy …: error: …`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# top-level command → the module that registers it (one module may register several)
COMMANDS = {
    "demo": "remedy.platform.demo",
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
    "up": "remedy.platform.stack",
    "down": "remedy.platform.stack",
    "receiver": "remedy.platform.stack",
    "deploy": "remedy.production",
    "breaker": "remedy.safety.cli",
    "lemon": "remedy.lemon.cli",
    "slack": "remedy.approvals.messages",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


class RemedyArgumentParser(argparse.ArgumentParser):
    """A usage error is one line, with the command to ask for help (argparse's default prints the whole usage block
    first)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"remedy: error: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or only the module of `only` (start-up of one command stays cheap: no area imports
    another area's heavy dependencies just to build its parser). Subparsers inherit RemedyArgumentParser."""
    parser = RemedyArgumentParser(prog="remedy", description="gpu-remedy: keep GPU training clusters productive.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
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


def version() -> str:
    """The installed gpu-remedy's version (pyproject.toml's [project] version; the image carries it as a label)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gpu-remedy")
    except PackageNotFoundError:  # run from a source tree that was never installed
        import tomllib
        from pathlib import Path

        return tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]


def main(argv: Sequence[str] | None = None) -> int:
    from remedy.config import ConfigError
    from remedy.errors import RemedyError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:  # before any command module is imported: answers in a blink
        print(f"remedy {version()}")
        return 0
    parser = build_parser(_command_of(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0): a return code, like every other outcome
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from remedy.domain.filemodes import use_private_umask

    saved_umask = use_private_umask()  # ledger, Prefect home, reports: 0600/0700 (children inherit it)
    try:
        return int(args.func(args) or 0)
    except (RemedyError, ConfigError) as exc:
        print(f"remedy: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `remedy … | head`: the reader left; not an error of the command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second complaint when Python flushes
        return 0
    except OSError as exc:  # a file the operator named that cannot be read or written (--out, --values, …)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"remedy: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        os.umask(saved_umask)  # main() is also called in-process (tests, embedding): leave the caller's umask


def _one_line(text: str) -> str:
    return " ".join(text.split()) if "\n" in text else text


if __name__ == "__main__":
    sys.exit(main())
