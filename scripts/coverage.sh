#!/usr/bin/env bash
# Line coverage of remedy/, tasks/, flows/ over the tiers scripts/test.sh runs (issue 28: the suite may get faster,
# but no behaviour may lose its test: compare this before and after a change to the tests).
#
#   scripts/coverage.sh                      every tier, one after another (as long as the suite: not on a shared box)
#   scripts/coverage.sh tests/ledger         pytest arguments go to every tier (here: the ledger's tests only)
#   COVERAGE_TIERS="fast" scripts/coverage.sh            some tiers only (fast, servers, slow)
#   COVERAGE_SUBPROCESS=1 scripts/coverage.sh ...        also the Python processes the tests start (CLI, flow
#                                                        processes, `remedy up`): slower, and needs them to exit
#                                                        cleanly to save their data
#
# Tiers run one after another with pytest-xdist workers (pytest-cov merges the workers' data); the data is in
# .coverage, the report on stdout and in coverage.xml. Exit status: non-zero if a tier failed.
set -uo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE  # as scripts/test.sh: processes load bytecode instead of compiling every import

rc_file=$(mktemp --suffix=.coveragerc)
trap 'rm -f "$rc_file"' EXIT
{
  echo "[run]"
  echo "source = remedy, tasks, flows"
  echo "data_file = $PWD/.coverage"
  echo "parallel = true"
  echo "concurrency = thread"
  if [ "${COVERAGE_SUBPROCESS:-0}" = 1 ]; then
    echo "patch = subprocess"  # coverage >= 7.10 starts itself in each Python subprocess
  fi
  echo "[report]"
  echo "skip_empty = true"
  echo "precision = 1"
} >"$rc_file"
rm -f .coverage .coverage.*

declare -A expr=([fast]="not servers and not slow" [servers]="servers and not slow" [slow]="slow")
declare -A workers=([fast]=${REMEDY_TEST_WORKERS_FAST:-2} [servers]=${REMEDY_TEST_WORKERS_SERVERS:-3}
                    [slow]=${REMEDY_TEST_WORKERS_SLOW:-0})
declare -A dist=([fast]=load [servers]=loadfile [slow]=loadfile)
failed=0
for tier in ${COVERAGE_TIERS:-fast servers slow}; do
  [ -n "${expr[$tier]:-}" ] || { echo "coverage: unknown tier $tier (fast, servers, slow)" >&2; exit 2; }
  spread=()
  [ "${workers[$tier]}" -gt 0 ] && spread=(-n "${workers[$tier]}" --dist "${dist[$tier]}")
  echo "=== coverage, tier ${tier}: pytest -m \"${expr[$tier]}\" ${spread[*]}"
  .venv/bin/python -m pytest -q -m "${expr[$tier]}" "${spread[@]}" --cov --cov-config="$rc_file" --cov-append \
    --cov-report= "$@"
  rc=$?
  [ $rc = 0 ] || [ $rc = 5 ] || failed=1
done
.venv/bin/python -m coverage combine --append --rcfile="$rc_file" -q 2>/dev/null || true
echo "=== line coverage of remedy/, tasks/, flows/ (tiers: ${COVERAGE_TIERS:-fast servers slow})"
.venv/bin/python -m coverage report --rcfile="$rc_file" | tail -n "${COVERAGE_LINES:-25}"
.venv/bin/python -m coverage xml --rcfile="$rc_file" -q -o coverage.xml
exit $failed
