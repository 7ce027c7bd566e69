#!/usr/bin/env bash
# Lint and type-check exactly as CI does (.ci/run calls this before the tests); the rules live in
# pyproject.toml ([tool.ruff], [tool.mypy]), so a developer's global ruff config changes nothing here.
#   scripts/lint.sh            ruff over the repo, mypy over remedy/, tasks/, flows/, radon over flows/; exit 1 if any fails
# Needs the test venv (scripts/install.sh --test), which pins both tools. Both run even when the first fails,
# so one CI run shows every finding.
set -uo pipefail
cd "$(dirname "$0")/.."
VPY=${VPY:-.venv/bin/python}
rc=0
echo "lint: ruff $("$VPY" -m ruff --version | cut -d' ' -f2)"
"$VPY" -m ruff check --no-cache . || rc=1
echo "lint: mypy $("$VPY" -m mypy --version | cut -d' ' -f2)"
"$VPY" -m mypy || rc=1
echo "lint: radon $("$VPY" -m radon --version) (flow functions at most complexity 15)"
"$VPY" scripts/flow_complexity.py flows || rc=1
exit $rc
