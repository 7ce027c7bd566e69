#!/usr/bin/env bash
# Lint and type-check exactly as CI does (.ci/run calls this before the tests); the rules live in
# pyproject.toml ([tool.ruff], [tool.mypy]), so a developer's global ruff config changes nothing here.
#   scripts/lint.sh            ruff over the repo, mypy over remedy/, tasks/, flows/
# Needs the test venv (scripts/install.sh --test), which pins both tools.
set -euo pipefail
cd "$(dirname "$0")/.."
VPY=${VPY:-.venv/bin/python}
"$VPY" -m ruff check --no-cache .
"$VPY" -m mypy
