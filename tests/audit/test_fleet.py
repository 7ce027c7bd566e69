from remedy.audit.fleet import audit_fleet, gc_paused

from .helpers import table13_pair


def test_fleet_audit_reports_bad_nodes_without_dropping_them():
    before, after = table13_pair("WRITE")
    audits, errors = audit_fleet([
        ("gpu074", before, after),
        ("gpu075", None, after),  # no earlier snapshot: since mount
        ("gpu076", before, after[: len(after) // 2]),  # truncated upload
        ("gpu077", None, "device proc mounted on /proc with fstype proc\n"),
    ])  # fmt: skip
    assert [(a.node, a.lifetime) for a in audits] == [("gpu074", False), ("gpu075", True)]
    assert audits[0].verdict.kind == "rpc-slot-starvation"
    assert set(errors) == {"gpu076", "gpu077"}
    assert "truncated" in errors["gpu076"] and "no NFS mounts found" in errors["gpu077"]


def test_gc_is_restored_after_the_batch():
    import gc

    assert gc.isenabled()
    try:
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.isenabled()
