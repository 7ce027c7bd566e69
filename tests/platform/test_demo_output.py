"""What `remedy demo` prints (its runs are tested end to end in tests/flows/test_demo.py): conclusions on stdout,
progress on stderr; a dry run's timeline says what would happen."""

from __future__ import annotations

from remedy.platform.demo import _print_outcome


def _outcome(**extra):
    return {"summary": "s", "status": "x", "node": "gpu023", "job": {"ready": 60, "desired": 60}, "incidents": [],
            "actions": [], "breaker_transitions": [], "approvals": [], "prefect_ui": "http://127.0.0.1:1",
            "prefect_server": "remedy's own", "time_scale": 0.05, "dry_run": False} | extra


def test_the_isolation_verdict_and_the_burn_in_findings_go_to_stdout(capsys):
    verdict = "Infrastructure: the divergence follows gpu023. They stay quarantined"
    _print_outcome(_outcome(status="infrastructure", verdict_text=verdict))
    _print_outcome(_outcome(status="burned-in", why="nvml-probe: GPU 4: row remap pending", pool="7 spares keep …",
                            diversity=["all 3 spares are in rack r2"]))
    out, err = capsys.readouterr()
    assert verdict in out and "why: nvml-probe: GPU 4: row remap pending" in out and "7 spares keep" in out
    assert "spare pool: all 3 spares are in rack r2" in out
    assert err == ""


def test_a_dry_run_timeline_says_would_and_the_time_scale_is_printed(capsys):
    timeline = [{"step": s, "since_detection_s": i} for i, s in enumerate(["detected", "cordoned", "drained"])]
    _print_outcome(_outcome(dry_run=True, status="planned", timeline=timeline, replacement="gpu048"))
    out = capsys.readouterr().out
    assert "DRY RUN: nothing was changed" in out and "(would use gpu048)" in out
    assert "would cordon" in out and "would drain" in out and "\ncordoned" not in out
    assert "time scale 0.05" in out and "`remedy down` stops it" in out


def test_counts_read_as_words(capsys):
    _print_outcome(_outcome(incidents=[{}], actions=[{}] * 19))
    assert "ledger: 1 incident, 19 actions" in capsys.readouterr().out


def test_the_local_user_is_the_approver_when_none_is_configured(monkeypatch):
    """`remedy demo` / `remedy up` on a laptop: whoever runs it answers its approvals, and the banner says so."""
    import getpass

    from remedy import runtime
    from remedy.approvals.model import APPROVERS_ENV, approvers_note
    from remedy.platform.demo import use_default_approver

    monkeypatch.delenv(APPROVERS_ENV, raising=False)
    monkeypatch.delenv("REMEDY_CONFIG", raising=False)
    runtime.reset()
    try:
        approvers, defaulted = use_default_approver(runtime)
        assert (approvers, defaulted) == ([getpass.getuser()], True)
        assert runtime.settings().approvals.approvers == [getpass.getuser()]
        assert approvers_note(approvers, defaulted).startswith(f"{getpass.getuser()} (the local user")
        monkeypatch.setenv(APPROVERS_ENV, '["alice", "bob"]')
        runtime.reset()
        assert use_default_approver(runtime) == (["alice", "bob"], False)
    finally:
        monkeypatch.delenv(APPROVERS_ENV, raising=False)
        runtime.reset()
