"""docs/first-ten-minutes.md stays true: every `remedy` command it shows parses with today's CLI, the version it
prints is the installed one, and the one-line errors it quotes are what the CLI says (exit 2)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "first-ten-minutes.md"


def _commands() -> list[list[str]]:
    found = []
    for line in DOC.read_text().splitlines():
        m = re.match(r"^\$ (?:PYTHON=\S+ )?\.venv/bin/remedy (.*)$", line)
        if m:
            found.append(shlex.split(m.group(1).split("  #")[0].strip()))
    return found


def test_the_walk_shows_the_commands_an_evaluator_runs():
    firsts = {argv[0] for argv in _commands()}
    assert {"--version", "demo", "up", "down", "breaker", "sim", "deploy", "slack"} <= firsts, firsts


@pytest.mark.parametrize("argv", _commands(), ids=" ".join)
def test_every_command_in_the_walk_parses(argv):
    from remedy.cli import build_parser

    args = build_parser().parse_args(argv)  # a renamed command or flag exits 2 here
    assert args.version or args.command == argv[0]


def test_the_version_shown_is_the_installed_one():
    from remedy.cli import version

    assert f"$ .venv/bin/remedy --version\nremedy {version()}\n" in DOC.read_text()


@pytest.mark.parametrize("argv", [["demo", "--scenario", "nope"]])
def test_the_quoted_error_is_what_the_cli_says(argv, capsys):
    from remedy.cli import main

    assert main(argv) == 2
    said = capsys.readouterr().err.strip()
    assert f"$ .venv/bin/remedy {' '.join(argv)}\n{said}\n[exit 2]" in DOC.read_text(), said
