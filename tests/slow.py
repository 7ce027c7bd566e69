"""Tests that take over 20 s on the 2-core CI machine, each with why (issue 28's budget). tests/conftest.py marks
them `slow(reason)`; `pytest -m "not slow"` leaves them out, and the end of every run lists a test over 20 s that
is not here (docs/testing.md keeps the durations table).

Keys are node-id prefixes: a module, a test, or one parametrized case."""

from __future__ import annotations

BUDGET_SECONDS = 20.0

SLOW: dict[str, str] = {
    # measured: 61-80 s each on the CI machine before issue 28 (a real 10 s lease waited out), 136 s at load 13; a
    # flow process per case forked from a warm zygote since (tests/flows/takeover_helpers.py): 4-16 s at load 6
    # measured: 22-26 s in the CI runs of 2026-11-29 (load 6-10)
    "tests/flows/test_fix_in_place.py::test_a_restart_the_job_cannot_come_back_from_is_a_failed_rung_then_replace_first":
        "a restart that waits out its 3 s resume timeout, then replace-first on the simulator, then the failed "
        "node's reset, burn-in and return to the pool, all as flow runs",
    "tests/flows/test_takeover.py::test_replace_node_killed_at_each_step_is_taken_over":
        "a flow process of its own, killed mid-step; then a second run of the flow, through the watchdog and triage "
        "for half the cases (16 s at load 6 on PostgreSQL; the session's first case starts the Prefect harness)",
    "tests/flows/test_takeover.py::test_fix_in_place_killed_at_each_step_is_taken_over":
        "a flow process of its own, killed mid-rung; then a second run of fix-in-place through its ladder (11 s at "
        "load 6, twice that at CI's load)",
    "tests/flows/test_takeover.py::test_a_stopped_run_taken_over_meanwhile_is_refused_when_it_continues[postgresql]":
        "a flow process stopped mid-drain waits for a real 10 s lease to run out before a second run replaces the "
        "node (21 s at load 6)",
    "tests/flows/test_recovery_takeover.py::test_a_killed_background_repair_is_taken_over":
        "a triage process of its own (replace first, then the background repair), killed mid-reboot; the watchdog "
        "re-announces and a second triage run carries the repair through burn-in (13-18 s at load 6)",
    "tests/flows/test_cleared_keeps_operator_cordon.py::test_a_persons_cordon_before_a_cleared_recheck_stays":
        "a replace-node run on the simulator through its real re-check (a node Job probing the GPUs); 22 s at load",
    "tests/safety/test_private_files.py::test_the_prefect_server_gpu_remedy_starts_keeps_its_database_private":
        "starts the Prefect server `remedy up` starts (its own, to see the files it creates; 22 s on a quiet "
        "machine, 110 s at load)",
    # 44 s in the reviewer's run (issue 28)
    "tests/flows/test_replace_node.py::test_crash_and_rerun_gives_one_replacement":
        "kills a flow process of its own mid-replacement and runs it again",
    "tests/prefect_pg/test_prefect_on_postgres.py":
        "a `prefect server start` of its own on PostgreSQL (first start migrates the database, ~38 s), flows in "
        "processes of their own",
    "tests/integration/test_alert_to_cordon.py":
        "`remedy up`'s stack with real Prometheus and Alertmanager: alert rules must fire (1 s scrape/eval)",
    "tests/integration/test_up_nfs_audit.py":
        "`remedy up` in a process of its own with its Prometheus, until the NFS audit finds the node (37 s at load 8)",
    # issue 28: one module, so one Prefect server with its UI and one Chromium for all of them (tests/ui/conftest.py)
    "tests/ui/test_approval_ui.py":
        "a Prefect server with its UI, flows in processes of their own until a replacement pauses and then completes "
        "after the form's answer, `remedy demo` twice in a process (the rack storm until each question is answered: "
        "58-68 s; a replacement: 40-60 s), headless Chromium pressing Resume and reading the timeline",
    "tests/platform/test_stack_supervision.py::test_ctrl_c_under_a_pipe_that_closed_still_stops_everything":
        "`remedy up` in a process of its own until its banner, then Ctrl-C with its stdout closed (41-108 s at load 8)",
    "tests/platform/test_stack_supervision.py::test_up_starts_ledger_fresh_and_stops_in_one_line_when_its_prefect_server_dies":
        "`remedy up` in a process of its own with its Prefect server, which is then killed (75 s at load 8, "
        "195-233 s at load 15)",
    "tests/approvals/test_breaker_close.py":
        "a rack storm of five replace-node runs held by the breaker until `remedy breaker close` (202 s at load 22)",
    "tests/test_install_script.py::test_readme_install_works_with_the_system_python_from_a_fresh_clone":
        "scripts/install.sh from a fresh clone with /usr/bin/python3: a venv and the locked packages (50-130 s)",
    "tests/deploy/test_packaging.py::test_every_documented_deploy_step_runs_without_a_traceback":
        "each documented `remedy deploy` step as a CLI process (imports the adapter and Prefect's worker code)",
    "tests/flows/test_story_logs.py":
        "a replacement on the test Prefect server, its logs read back through the API",
    # issue 31: the real control plane's PodGC passes every 20 s (gc_controller.go gcCheckPeriod)
    "tests/sim/conformance/test_pods.py::test_pod_gc_takes_a_terminating_pod_on_an_out_of_service_node_at_its_next_pass[real]":
        "waits for the real kube-controller-manager's next PodGC pass (every 20 s)",
    "tests/sim/conformance/test_jobs.py::test_a_policy_that_ignores_disruption_keeps_evictions_off_the_count[real]":
        "three raw evictions in a row wait out the real Job controller's failure back-off (10 s + 20 s + 40 s)",
}
# issue 28 (CI time), measured in the servers tier on 3 workers beside the slow tier (load ~8, 2026-11-28); since the
# servers and slow tiers run as one pytest run (scripts/test.sh) this list decides `-m` selection and the budget
# check, not the schedule
SLOW.update({
    "tests/flows/test_demo.py":
        "`remedy demo` through the CLI's entry point in the test process, its simulator and flow runs on the test "
        "Prefect server (20-48 s each on a quiet machine; the XID 79 demo runs once for the two tests that read it)",
    "tests/platform/test_own_servers.py::test_demo_writes_to_its_own_server_reuses_it_and_down_leaves_no_process_of_ours":
        "two `remedy demo` processes with remedy's own Prefect server (started once, reused), then `remedy down` "
        "(60 s at load 8, 131 s before its server started from a migrated database)",
    "tests/platform/test_own_servers.py::test_down_stops_up_which_cancels_its_paused_runs_and_stops_its_server":
        "`remedy up` with its own Prefect server until a storm of two on a rack holds one run for a person, then "
        "`remedy down` (32 s at load 8; 97-148 s with the storm of five)",
    "tests/platform/test_own_servers.py::test_ctrl_c_on_up_cancels_its_paused_runs_and_stops_what_it_started":
        "`remedy up` with its own Prefect server until a storm of two on a rack holds one run for a person, then "
        "Ctrl-C (32-86 s at load 7-8)",
    "tests/platform/test_own_servers.py::test_down_after_a_killed_up_cancels_the_runs_it_left_and_stops_its_server":
        "`remedy up` with its own Prefect server until a storm of two on a rack holds one run for a person, killed, "
        "then `remedy down` (37-67 s at load 7-8)",
    "tests/platform/test_own_servers.py::test_a_real_prefect_server_start_on_4200_gets_nothing_from_the_demo":
        "a plain `prefect server start` of its own, then `remedy demo` as a CLI process (34-42 s at load 8; 42 "
        "when it was the first test to need the run's migrated Prefect database, tests/fixtures/stack.py)",
    "tests/flows/test_replace_node_real.py::test_xid79_replaced_on_a_real_control_plane":
        "replace-node through the test Prefect server on the real kube-apiserver + controller-manager, waiting for "
        "the real Job and taint controllers (128 s at load 8)",
    "tests/flows/test_rack_storm.py::test_rack_storm_trips_the_rack_breaker_and_one_signed_approval_resumes_the_held_work":
        "a rack storm of replace-node runs on the test Prefect server held by the breaker, then a signed approval "
        "resumes them (57 s at load 8)",
    "tests/flows/test_burn_in.py::test_extended_level_catches_thermal_throttle_and_isolates_a_slow_node_in_multi_node_nccl":
        "the shortest extended burn-in the settings allow (dcgmi diag -r 3, a 60 s stress run at the simulator's "
        "time scale) and a multi-node NCCL isolation round (40 s at load 8)",
    "tests/flows/test_isolate_fault.py::test_demo_nan_loss_names_the_planted_nodes":
        "`remedy demo` of the NaN-loss isolation as a CLI process: bisection rounds over 60 nodes (40 s at load 8)",
    "tests/flows/test_isolate_fault.py::test_two_bad_nodes_in_60_found":
        "bisection over 60 nodes with two bad ones, each round's smoke tests on the test Prefect server (24 s)",
    "tests/flows/test_replace_first_flow.py::test_a_takeover_of_the_incident_replays_the_off_path_fix_instead_of_rebooting_again":
        "triage then a second recover-node run taking the incident over, through burn-in, on the test Prefect "
        "server (36 s at load 8)",
    "tests/flows/test_replace_first_flow.py::test_the_job_gets_the_spare_before_the_failed_node_is_fixed":
        "triage's replace-first path and its background repair through burn-in on the test Prefect server (29 s)",
    "tests/flows/test_replace_first_flow.py::test_the_off_path_fix_learns_from_the_fleets_record":
        "a recover-node run through its reset rung and burn-in on the test Prefect server (25 s at load 8)",
    "tests/ledger/test_gate_window.py::test_bounded_board_decides_like_the_whole_history_through_storms_probes_and_closes[postgresql]":
        "two days of storms, probes and closes decided by the bounded board and by the whole history, on "
        "PostgreSQL: thousands of ledger round trips (27 s at load 8)",
    "tests/flows/test_operator_wins.py::test_an_uncordon_at_each_step_stands_the_run_down[after the spare claim]":
        "replace-node on the test Prefect server up to the spare claim, then stood down by the uncordon (21 s)",
    "tests/receiver/test_no_default_secrets.py::test_the_embedded_stack_generates_tokens_and_wires_the_simulator":
        "`remedy up`'s stack started in-process (simulator, receiver, ledger) against the test Prefect server, until "
        "an injected fault reaches it (23 s at load 8 with bytecode cached, 83 s without)",
    "tests/platform/test_prefect_server.py::test_the_server_remedy_up_starts_takes_concurrent_writes_without_a_single_503":
        "starts the Prefect server `remedy up` starts (its own, on SQLite) and writes to it from 16 threads (23-44 s)",
    "tests/flows/test_warning_swap.py::test_a_warned_node_is_swapped_at_a_checkpoint_it_asked_for_then_fixed_off_path":
        "triage asks the simulated job for a checkpoint, swaps the node at it, then fixes it off the critical path "
        "through burn-in on the test Prefect server (30 s at load 9)",
    "tests/flows/test_warning_swap.py::test_an_ecc_storm_xid_92_is_weighed_as_a_warning_and_swapped_at_a_checkpoint":
        "the same swap at a checkpoint for an XID 92 storm, with its off-path fix (26 s at load 9)",
    "tests/goodput/test_replace_first.py::test_replace_first_beats_auto_replace_and_sends_fewer_nodes_to_repair_on_the_same_seeds":
        "two policies simulated over the same seeds of seed 000's 1,000-GPU cluster (30 s at load 5)",
    "tests/adapters/test_archive.py::test_put_json_creates_bucket_and_reads_back":
        "starts moto in server mode, a process of its own, for a real S3 round trip (26 s at load 8; 2 s quiet)",
    "tests/flows/test_fencing.py::test_a_run_stopped_at_a_step_and_continued_after_a_takeover_changes_nothing[replace-drain-postgresql]":
        "the stopped-run case on a fresh PostgreSQL ledger: the flow process migrates it first (33 s at load 9)",
    "tests/flows/test_fencing.py::test_a_run_stopped_at_a_step_and_continued_after_a_takeover_changes_nothing[fix-reboot-postgresql]":
        "the stopped-run case on a fresh PostgreSQL ledger, through the reset and reboot rungs (26 s at load 9)",
    "tests/platform/test_dispatcher_slots.py::test_runs_that_are_working_hold_their_slots":
        "the dispatcher's slots held by real flow runs on the test Prefect server until they finish (29 s at load 9)",
    "tests/flows/test_warning_scan.py::test_thermal_and_infiniband_warnings_reach_alertmanager_and_the_receiver":
        "real Prometheus and Alertmanager evaluate the warning rules and deliver to the receiver (20 s at load 9)",
})


def slow_reason(nodeid: str) -> str | None:
    for prefix, reason in SLOW.items():
        if nodeid == prefix or nodeid.startswith(prefix + "::") or nodeid.startswith(prefix + "["):
            return reason
    return None
