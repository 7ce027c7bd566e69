#!/usr/bin/env bash
# The README's test command after the install: lint (ruff + mypy), then every test, tier by tier so each tier's
# time is printed and watched (docs/testing.md). The tiers are complementary marker expressions (tests/tiers.py
# marks each test from what it uses), so together they run every collected test exactly once; non-zero if lint or
# any test fails. Extra arguments go to every pytest run (e.g. `scripts/test.sh -x`).
set -uo pipefail
cd "$(dirname "$0")/.."

echo "=== lint: ruff + mypy (scripts/lint.sh)"
t0=$(date +%s)
lint_ok=1
bash scripts/lint.sh || lint_ok=0
lint_secs=$(( $(date +%s) - t0 ))

TIERS=(
  "fast|not servers and not slow"
  "servers|servers and not slow"
  "slow|slow"
)
failed=0
report=()
if [ $lint_ok = 1 ]; then report+=("$(printf '%-8s %5d s  %s' lint "$lint_secs" passed)")
else report+=("$(printf '%-8s %5d s  %s' lint "$lint_secs" FAILED)"); failed=1; fi
t_all=$(date +%s)
for tier in "${TIERS[@]}"; do
  name=${tier%%|*}
  expr=${tier#*|}
  echo "=== tier ${name}: pytest -m \"${expr}\" (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  t0=$(date +%s)
  .venv/bin/python -m pytest -q -m "${expr}" "$@"
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  case $rc in
    0) verdict=passed ;;
    5) verdict="no tests"; rc=0 ;;  # a tier with nothing in it is not a failure
    *) verdict="FAILED (pytest exit $rc)"; failed=1 ;;
  esac
  report+=("$(printf '%-8s %5d s  %s' "$name" "$secs" "$verdict")")
done
echo "=== tier times (budget: 20 min in all on the 2-core CI machine; docs/testing.md)"
printf '%s\n' "${report[@]}"
printf '%-8s %5d s  load average now %s\n' "all" "$(( $(date +%s) - t_all ))" "$(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
