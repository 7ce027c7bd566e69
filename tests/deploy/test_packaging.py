"""What an operator checks before installing: the version (CLI, image label, values), the license, the changelog,
and that every `remedy deploy` step of docs/operations.md runs without a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _remedy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "remedy.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_remedy_version_prints_the_project_version():
    out = _remedy("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"remedy {VERSION}"


def test_image_and_values_carry_the_same_version():
    containerfile = (ROOT / "Containerfile").read_text()
    assert re.search(rf"^ARG VERSION={re.escape(VERSION)}$", containerfile, re.M)
    assert 'org.opencontainers.image.version="${VERSION}"' in containerfile
    from remedy.production import Values

    assert Values().image.endswith(f":{VERSION}")
    assert f"gpu-remedy:{VERSION}" in (ROOT / "deployments" / "k8s" / "values.yaml").read_text()


def test_license_is_the_apache_2_text_pyproject_names_and_changelog_lists_this_version():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]["text"] == "Apache-2.0"
    assert re.search(rf"^## {re.escape(VERSION)} ", (ROOT / "CHANGELOG.md").read_text(), re.M)


def _documented_deploy_steps() -> list[list[str]]:
    """Every `remedy … deploy …` command line in docs/operations.md, as argv after `remedy`."""
    steps = []
    for line in (ROOT / "docs" / "operations.md").read_text().splitlines():
        m = re.search(r"remedy ((?:--config \S+ )?deploy [^`#|]*)", line)
        # `deploy sync` rewrites the committed defaults (a developer's step, checked by the staleness tests)
        if m and m.group(1).split() not in steps and "sync" not in m.group(1).split():
            steps.append(m.group(1).split())
    return steps


def test_docs_name_the_deploy_steps():
    assert {s[s.index("deploy") + 1] for s in _documented_deploy_steps()} >= {"render", "rbac", "job", "checks"}


@pytest.mark.parametrize("argv", _documented_deploy_steps(), ids=" ".join)
def test_every_documented_deploy_step_runs_without_a_traceback(argv, tmp_path):
    """With the operator's files in place (prod.yaml, my-values.yaml as the docs describe them)."""
    (tmp_path / "prod.yaml").write_text("dry_run: true\ncluster:\n  mode: in-cluster\n")
    (tmp_path / "my-values.yaml").write_text("image: registry.example/gpu-remedy:" + VERSION + "\n")
    argv = [a.replace("out/", str(tmp_path / "out")) for a in argv]
    for i, a in enumerate(argv):
        if a in ("prod.yaml", "my-values.yaml"):
            argv[i] = str(tmp_path / a)
    out = subprocess.run([sys.executable, "-m", "remedy.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
