"""Goodput: the analytic model (seed 000) and a discrete-event fleet simulator to compare remediation policies.

Public API:
- `remedy.goodput.model`: `goodput(...)`, `goodput_renewal(...)`, `mtbf_hours_for_gpus(gpus)`,
  `optimal_checkpoint_interval_minutes(cost_min, mtbf_h)` (Young/Daly from `remedy.audit.cadence`),
  `published_percent(g)`; durations are read by `remedy.domain.durations.parse_duration` (a bare number is
  minutes with `default_unit="m"`).
- `remedy.goodput.compare`: `simulate(scenario, policy, days=, seed=, settings=)`, `simulate_grid(...)`,
  `pooled_goodput(results)`, `make_policy(name, settings)`, `POLICY_NAMES`.
- `remedy.goodput.scenarios`: `Scenario`, `SCENARIOS`, `scenario(name, **overrides)`, `FAULT_MIX`.
- `remedy.goodput.sim.FleetSim(scenario, policy, seed=, check_invariants=).run() -> SimResult`.
CLI: `remedy goodput`, `remedy simulate` (remedy/goodput/cli.py). Benchmark: bench/policies.py.
"""
