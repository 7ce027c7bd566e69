"""Issue 32 item 10: settings and scenario YAML load under size, depth, alias and number limits; every refusal is one
line and exit 2 through the real entry point (no traceback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from remedy.domain.yamlsafe import MAX_ALIASES, YamlLimitError, load_yaml
from remedy.goodput.scenarios import SCENARIO_DIR, ScenarioFileError, load_scenario_file

REPO = Path(__file__).resolve().parents[1]
SEED = (SCENARIO_DIR / "seed002-63.yaml").read_text()


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("REMEDY_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "remedy.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)


def one_line_exit_2(p: subprocess.CompletedProcess[str], expect: str) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], p.stderr


# --- the loader ----------------------------------------------------------------------------------------------

def test_limits_refuse_deep_nesting_aliases_and_size() -> None:
    with pytest.raises(YamlLimitError, match=r"^f: line 1: nested deeper than 32 levels"):
        load_yaml("a: " + "[" * 40 + "]" * 40, "f")
    with pytest.raises(YamlLimitError, match="nested deeper"):
        load_yaml("a: " + "[" * 20_000, "f")  # deep enough to exhaust the parser's own recursion
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    with pytest.raises(YamlLimitError, match="alias uses|once aliases are expanded"):
        load_yaml(laughs, "f")
    with pytest.raises(YamlLimitError, match="over the 100-byte limit"):
        load_yaml("a: " + "x" * 200, "f", max_bytes=100)
    with pytest.raises(YamlLimitError, match="^f: not valid YAML"):
        load_yaml(b"\x00\x01\x02 binary", "f")  # the reader refuses it before any parsing
    assert load_yaml("a: &x 1\nb: *x\n", "f") == {"a": 1, "b": 1}  # an alias or two is fine
    assert MAX_ALIASES >= 8


def test_numbers_finite_and_bounded_when_asked() -> None:
    assert load_yaml("a: .inf", "f") == {"a": float("inf")}  # settings: not asked
    for text, word in (("a: .inf", "not a finite number"), ("a: .nan", "not a finite number"),
                       ("a: {b: [1, 1e300]}", "a.b[1]: 1e+300 is out of range")):
        with pytest.raises(YamlLimitError, match=re.escape(word)):
            load_yaml(text, "f", max_abs_number=1e9)


# --- settings file through the CLI ---------------------------------------------------------------------------

def test_deeply_nested_config_is_one_line_exit_2(tmp_path) -> None:
    p = tmp_path / "deep.yaml"
    p.write_text("health: " + "{a: " * 500 + "1" + "}" * 500 + "\n")
    one_line_exit_2(cli("--config", str(p), "health", "suite", "quick"), "nested deeper than 32 levels")
    p.write_text("health:\n  gpus_per_node: [1\n")
    one_line_exit_2(cli("--config", str(p), "health", "suite", "quick"), "not valid YAML: line")


# --- scenario files ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit, expect", [
    (("days: 55", "days: 1e300"), "days: 1e+300 is out of range"),
    (("days: 55", "days: 5000"), "days: Input should be less than or equal to 3650"),
    (("days: 55", "days: .inf"), "days: inf is not a finite number"),
    (("job_mtbf_hours: 56.2", "job_mtbf_hours: .nan"), "job_mtbf_hours: nan is not a finite number"),
    (("training_nodes: 60", "training_nodes: 100000000000"), "training_nodes: 1e+11 is out of range"),
])
def test_scenario_file_numbers_are_range_checked(tmp_path, edit: tuple[str, str], expect: str) -> None:
    assert edit[0] in SEED
    p = tmp_path / "s.yaml"
    p.write_text(SEED.replace(edit[0], edit[1], 1))
    with pytest.raises(ScenarioFileError, match=re.escape(expect)):
        load_scenario_file(p)


def test_negative_share_is_refused_through_the_cli(tmp_path) -> None:
    text = (SCENARIO_DIR / "llama3-405b.yaml").read_text()  # its fault_mix lists shares as event counts
    first_share = next(line for line in text.splitlines() if "share:" in line and line.lstrip().startswith("- {"))
    value = first_share.split("share:", 1)[1].split(",", 1)[0].strip()
    p = tmp_path / "neg.yaml"
    p.write_text(text.replace(first_share, first_share.replace(f"share: {value}", "share: -5", 1), 1))
    one_line_exit_2(cli("simulate", "--scenario-file", str(p)), "share must be a number ≥ 0, got -5")
    p.write_text(SEED.replace("days: 55", "days: 1e300", 1))
    one_line_exit_2(cli("simulate", "--scenario-file", str(p)), "days: 1e+300 is out of range")


def test_shipped_scenarios_still_load() -> None:
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        assert load_scenario_file(path).days > 0
