"""Every `remedy` command, given bad input, answers with one line on stderr and exit code 2: never a traceback, never
a silently absurd result. The commands are found by walking the argparse tree, so a new command is covered (and
must pass) the day it is added; each gets the generic bad inputs (an unknown flag, a non-number where a number goes,
a negative count), the bad inputs its argument kinds call for (a missing, binary or directory file; an unwritable
output; a malformed URL or duration), and the cases operators hit (docs/operations.md, issue 16)."""

from __future__ import annotations

import argparse
import os
import shutil
import threading
from pathlib import Path

import pytest

from remedy.cli import build_parser, main

BINARY = bytes(range(256)) * 64  # NULs, control bytes, invalid UTF-8


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*path, name))


PARSER = build_parser()
COMMANDS = dict(leaves(PARSER))

# Option dests by kind of value: what is bad input for them.
FILE_IN = {"file", "files", "values", "state", "mountstats", "before", "counters", "scenario_file"}
FILE_OUT = {"out", "plot"}
URLS = {"url", "prometheus", "alert_url", "prefect_url"}
DURATIONS = {"window", "delta", "mtbf", "checkpoint_every", "checkpoint_cost", "remediation", "restart_loading",
             "interval"}
NUMERIC_TYPES = {"positive_int", "non_negative_int", "positive_float", "non_negative_float", "fraction", "port_number",
                 "_year"}
# numeric options where a negative value means something (none yet); everything else must refuse one
NEGATIVE_OK: set[tuple[tuple[str, ...], str]] = set()

# Minimal valid arguments per command, so a case exercises the option it is about (not a missing required one).
POSITIONALS: dict[tuple[str, ...], list[str]] = {
    ("audit", "nfs"): ["--mountstats", "{good}"],
    ("checkpoint", "interval"): ["--delta", "18s"],
    ("goodput",): ["--gpus", "1024"],
    ("breaker", "status"): ["--db", "{ledger}"],
    ("sim", "inject"): ["xid", "79", "--node", "gpu042"],
    ("sim", "save"): ["out.json"],
    ("ledger", "history"): ["gpu042"],
    ("xid", "explain"): ["79"],
    ("signals", "parse"): ["dcgm", "{good}"],
    ("health", "parse"): ["nccl", "{good}"],
    ("health", "suite"): ["quick"],
    ("deploy", "job"): ["triage"],
    ("breaker", "open"): ["rack:rack-1", "--by", "alice", "--reason", "maintenance", "--db", "{ledger}"],
    ("breaker", "close"): ["rack:rack-1", "--by", "alice", "--db", "{ledger}"],
    ("lemon", "candidates"): ["--db", "{ledger}"],
    ("lemon", "clear"): ["gpu042", "--by", "alice", "--why", "PSU swapped", "--db", "{ledger}"],
}

# The cases an operator hit (issue 16), each with what its one line must say.
NAMED_CASES = [
    (["audit", "nfs", "--link-gbps", "-5"], "--link-gbps"),
    (["goodput", "--gpus", "-3"], "--gpus"),
    (["deploy", "render", "--values", "{malformed}"], "not valid YAML"),
    (["deploy", "render", "--out", "{unwritable}/x.yaml"], "{unwritable}"),
    (["signals", "parse", "dcgm", "{binary}"], "binary"),
    (["breaker", "open", "rack:rack-99", "--by", "al", "--reason", "r", "--db", "{ledger}"],
     "no rack named 'rack-99' in the fleet the ledger knows (racks: rack-1, rack-2)"),
    (["breaker", "open", "pdu:nope-7", "--by", "al", "--reason", "r", "--db", "{ledger}"], "nope-7"),
    (["breaker", "close", "rack:rack-99", "--by", "al", "--db", "{ledger}"], "rack-99"),
    (["breaker", "open", "galaxy:far", "--by", "al", "--reason", "r", "--db", "{ledger}"], "galaxy"),
    (["ledger", "history", "gpu042", "--db", "sqlite:///{tmp}/none.db"], "none.db"),
    (["audit", "nfs", "--prometheus", "http://127.0.0.1:9/", "--window", "5"], "'5'"),
    (["deploy", "render", "--set", "namespace=[unclosed"], "not valid YAML"),
    (["--config", "{malformed}", "breaker", "status"], "not valid YAML"),
    (["--config", "{binary}", "breaker", "status"], ""),
    (["--config", "{directory}", "breaker", "status"], "directory"),
    (["xid", "explain", "seventy-nine"], "seventy-nine"),
    (["lemon", "clear", "gpu-nope", "--by", "al", "--why", "w", "--db", "{ledger}"], "gpu-nope"),
    (["xid", "explain", "70000"], "70000"),
    (["demo", "--scenario", "no-such"], "no-such"),
    (["demo", "--time-scale", "0"], "--time-scale"),
    (["up", "--nodes", "0"], "--nodes"),
    (["sim", "inject", "xid", "79", "--node", "gpu042", "--gpu", "99", "--url", "http://127.0.0.1:9"], ""),
    (["simulate", "--days", "-1"], "--days"),
    (["checkpoint", "interval", "--failures", "-2"], "--failures"),
    (["health", "suite", "extreme"], "extreme"),
    (["signals", "parse", "dcgm", "{directory}"], "directory"),
    (["slack", "preview", "--kind", "nope"], "nope"),
    (["slack", "preview", "--html", "{unwritable}/x.html"], "{unwritable}"),
]


def _without_rivals(parser: argparse.ArgumentParser, base: list[str], action: argparse.Action) -> list[str]:
    """`base` minus any option that is mutually exclusive with `action` (and its value)."""
    rivals = {a.option_strings[-1] for g in parser._mutually_exclusive_groups if action in g._group_actions
              for a in g._group_actions if a is not action}
    out, skip = [], False
    for arg in base:
        if skip:
            skip = False
        elif arg in rivals:
            skip = True
        else:
            out.append(arg)
    return out


def generic_cases():
    for path, parser in COMMANDS.items():
        given = list(path) + POSITIONALS.get(path, [])
        yield path, [*given, "--no-such-flag"], "--no-such-flag"
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or isinstance(action, argparse._HelpAction):
                continue
            base = _without_rivals(parser, given, action)
            flag = action.option_strings[-1]
            numeric = action.type in (int, float) or getattr(action.type, "__name__", "") in NUMERIC_TYPES
            if numeric:
                yield path, [*base, flag, "lots"], flag
                if (path, action.dest) not in NEGATIVE_OK:
                    yield path, [*base, flag, "-5"], flag
            elif action.dest in FILE_IN:
                yield path, [*base, flag, "{tmp}/missing.file"], "missing.file"
                yield path, [*base, flag, "{binary}"], ""
                yield path, [*base, flag, "{directory}"], ""
            elif action.dest in FILE_OUT:
                yield path, [*base, flag, "{unwritable}/out"], ""
            elif action.dest in URLS:
                yield path, [*base, flag, "not a url"], ""
            elif action.dest in DURATIONS:
                yield path, [*base, flag, "soonish"], "soonish"
                yield path, [*base, flag, "-5h"], ""
        for action in parser._actions:  # positionals that name an input file
            if not action.option_strings and action.dest in FILE_IN:
                args = [a if a != "{good}" else "{binary}" for a in given]
                if args != given:
                    yield path, args, ""
                    yield path, [a if a != "{good}" else "{tmp}/missing.file" for a in given], "missing.file"


CASES = [pytest.param(argv, expect, id=" ".join(argv)) for _, argv, expect in generic_cases()]
CASES += [pytest.param(argv, expect, id="named: " + " ".join(argv)) for argv, expect in NAMED_CASES]


@pytest.fixture(scope="module")
def ledger_template(tmp_path_factory) -> Path:
    """A migrated ledger knowing four nodes on two racks, built once: an alembic upgrade per case was most of this
    file's CPU (~0.1 s x ~180 cases). Each case gets its own copy."""
    from remedy.domain.model import Node, Topology
    from remedy.ledger import Ledger

    path = tmp_path_factory.mktemp("ledger-template") / "ledger.db"
    led = Ledger(f"sqlite:///{path}")
    led.migrate()
    led.upsert_nodes([Node(name=f"gpu00{i}", topology=Topology(rack=f"rack-{1 + i // 2}", switch="leaf-1", pdu="pdu-1"))
                      for i in range(4)])
    led.close()
    return path


@pytest.fixture
def places(tmp_path, monkeypatch, ledger_template):
    for key in list(os.environ):
        if key.startswith("REMEDY_") or key == "PREFECT_API_URL":
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    binary = tmp_path / "binary.bin"
    binary.write_bytes(BINARY)
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("image: [unclosed\n  tag: {\n")
    good = tmp_path / "good.txt"
    good.write_text("")
    directory = tmp_path / "a-directory"
    directory.mkdir()
    unwritable = tmp_path / "not-a-dir"  # a file: nothing can be created under it, whoever runs the test
    unwritable.write_text("")
    ledger = tmp_path / "ledger.db"
    for part in ledger_template.parent.glob("ledger.db*"):  # the database and any WAL left beside it
        shutil.copyfile(part, tmp_path / part.name)
    from remedy import runtime

    runtime.reset()
    yield {"tmp": str(tmp_path), "binary": str(binary), "malformed": str(malformed), "good": str(good),
           "directory": str(directory), "unwritable": str(unwritable), "ledger": f"sqlite:///{ledger}"}
    runtime.reset()


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """main(argv) in this process (a case must finish in seconds: bad input is refused before anything starts)."""
    result: dict[str, object] = {}

    def target():
        try:
            result["rc"] = main(argv)
        except SystemExit as exc:
            result["rc"] = exc.code
        except BaseException as exc:  # noqa: BLE001 — the test reports it as the traceback an operator would see
            result["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), f"remedy {' '.join(argv)} still running after 60 s: bad input must stop it at once"
    out, err = capsys.readouterr()
    if "error" in result:
        raise AssertionError(f"remedy {' '.join(argv)} raised {result['error']!r} (a traceback for the operator)")
    return result["rc"], out, err


@pytest.mark.parametrize("argv, expect", CASES)
def test_bad_input_is_one_line_and_exit_2(argv, expect, places, capsys):
    argv = [a.format(**places) for a in argv]
    expect = expect.format(**places)
    rc, out, err = run(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, f"exit {rc}; stdout {out[-500:]!r}; stderr {err[-500:]!r}"
    assert len(lines) == 1, f"one line on stderr, got {len(lines)}:\n{err[-2000:]}"
    assert lines[0].startswith("remedy") and ": error: " in lines[0], lines[0]
    assert "Traceback" not in err and len(lines[0]) < 400, lines[0]
    assert expect in lines[0], f"{expect!r} not in {lines[0]!r}"
    assert "\\x" not in lines[0] and all(ch.isprintable() for ch in lines[0]), "raw bytes in the error line"


def test_every_command_is_covered():
    """The walk found every command remedy.cli registers, and each leaf has cases."""
    from remedy.cli import COMMANDS as TOP_LEVEL

    assert {path[0] for path in COMMANDS} == set(TOP_LEVEL)
    with_cases = {path for path in COMMANDS for p in CASES if list(p.values[0][: len(path)]) == list(path)}
    assert with_cases == set(COMMANDS)
