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

# Each tier runs on pytest-xdist workers (each worker starts its own session servers: Prefect, PostgreSQL, the
# control plane, on free ports). The fast tier is CPU-bound: one worker per core. The servers tier mostly waits
# (Prefect flow runs, real servers: load about 1 with one worker), so it gets more workers, whole files each (module
# fixtures start once), and the slow tier runs beside it, its output kept in a file and shown after.
# One worker each (REMEDY_TEST_WORKERS_*=0) took: fast 648 s, servers 2,414 s, slow 1,004 s (2026-11-28, quiet);
# the slow tier stays on one process: with two more workers beside servers, load reached 15 and waits timed out.
fast_workers=${REMEDY_TEST_WORKERS_FAST:-2}
servers_workers=${REMEDY_TEST_WORKERS_SERVERS:-3}
slow_workers=${REMEDY_TEST_WORKERS_SLOW:-0}
failed=0
report=()
if [ $lint_ok = 1 ]; then report+=("$(printf '%-8s %5d s  %s' lint "$lint_secs" passed)")
else report+=("$(printf '%-8s %5d s  %s' lint "$lint_secs" FAILED)"); failed=1; fi
t_all=$(date +%s)

verdict() {  # pytest's exit code -> the tier's line; a tier with nothing in it is not a failure
  case $1 in
    0) echo passed ;;
    5) echo "no tests" ;;
    *) echo "FAILED (pytest exit $1)" ;;
  esac
}

tier() {  # name, marker expression, workers, xdist distribution, extra pytest arguments...
  local name=$1 expr=$2 workers=$3 dist=$4
  shift 4
  local spread=()
  [ "$workers" -gt 0 ] && spread=(-n "$workers" --dist "$dist")
  echo "=== tier ${name}: pytest -m \"${expr}\" ${spread[*]} (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  .venv/bin/python -m pytest -q -m "${expr}" "${spread[@]}" "$@"
}

t0=$(date +%s)
tier fast "not servers and not slow" "$fast_workers" load "$@"
rc=$?
report+=("$(printf '%-8s %5d s  %s' fast "$(( $(date +%s) - t0 ))" "$(verdict $rc)")")
[ $rc = 0 ] || [ $rc = 5 ] || failed=1

slow_log=$(mktemp)
t_slow=$(date +%s)
( tier slow "slow" "$slow_workers" load "$@" >"$slow_log" 2>&1; echo $? >"$slow_log.rc"; echo $(( $(date +%s) - t_slow )) >"$slow_log.secs" ) &
slow_pid=$!
t0=$(date +%s)
tier servers "servers and not slow" "$servers_workers" loadfile "$@"
rc=$?
report+=("$(printf '%-8s %5d s  %s' servers "$(( $(date +%s) - t0 ))" "$(verdict $rc)")")
[ $rc = 0 ] || [ $rc = 5 ] || failed=1

wait $slow_pid
cat "$slow_log"
rc=$(cat "$slow_log.rc")
report+=("$(printf '%-8s %5d s  %s' slow "$(cat "$slow_log.secs")" "$(verdict "$rc") (beside servers)")")
[ "$rc" = 0 ] || [ "$rc" = 5 ] || failed=1
rm -f "$slow_log" "$slow_log.rc" "$slow_log.secs"

echo "=== tier times (budget: 20 min in all on the 2-core CI machine; docs/testing.md)"
printf '%s\n' "${report[@]}"
printf '%-8s %5d s  load average now %s\n' "all" "$(( $(date +%s) - t_all ))" "$(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
