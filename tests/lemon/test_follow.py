"""History follows the GPU: a lemon GPU moved into another node, a node re-created under a new name, a GPU known
by its UUID on one incident and its serial on another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from remedy.lemon.follow import follow_gpus, uuid_aliases
from remedy.lemon.records import IncidentRecord, NodeHistory, ValidationRecord
from remedy.lemon.scoring import RECURRENCE, REPEAT_XID, explain, score_fleet

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SERIAL = "1652922012345"  # the bad board
UUID = "GPU-2b3e1c4a-9f7d-4c1e-8a36-0f5e7d9c1b22"


def day(d: float) -> datetime:
    return NOW - timedelta(days=60 - d)


def quiet_fleet(n: int = 30) -> list[NodeHistory]:
    return [NodeHistory(f"ok{i:02d}", 40.0, (IncidentRecord(day(2 + i), "xid", (79, 48, 119)[i % 3], i % 8, f"ok{i}"),))
            for i in range(n)]


def failures(node_days: list[float], gpu: int, **ids) -> tuple[tuple[IncidentRecord, ...], tuple[ValidationRecord, ...]]:
    inc = tuple(IncidentRecord(day(d), "xid", 79, gpu, f"i{d:g}", **ids) for d in node_days)
    val = tuple(ValidationRecord(day(d + 0.5), True, "burn-in", f"v{d:g}") for d in node_days)
    return inc, val


def verdict(verdicts, node):
    return next(v for v in verdicts if v.node == node)


def test_moved_gpu_takes_its_record_to_the_node_it_joined() -> None:
    # GPU 3 of node-a fails four times, is moved into node-b (slot 6) on day 30 and fails twice more there.
    inc_a, val_a = failures([5, 11, 17, 23], 3, gpu_serial=SERIAL)
    inc_b, val_b = failures([36, 44], 6, gpu_serial=SERIAL)
    a = NodeHistory("node-a", 40.0, inc_a, val_a)
    b = NodeHistory("node-b", 40.0, inc_b, val_b)
    verdicts = score_fleet(quiet_fleet() + [a, b], NOW)
    vb = verdict(verdicts, "node-b")
    assert vb.candidate and vb.incidents_counted == 6 and verdict(verdicts, "node-a").incidents_counted == 0
    # The cycles it went through on node-a are still cycles: node-a's passing checks between its failures came along
    # (5→11→17→23), and 36→44 on node-b; 23→36 is none, as no check passed it on node-b before day 36.
    assert vb.signal(RECURRENCE).value == 4
    assert vb.signal(REPEAT_XID).value == 6 and f"XID 79 on GPU 6 (serial {SERIAL}) 6 time(s)" in vb.signal(REPEAT_XID).summary
    assert "(on node-a, before the GPU moved here)" in explain(vb)
    # By node name alone the record stays behind: node-b looks healthy, node-a looks like the lemon.
    from dataclasses import replace

    from remedy.lemon.attribution import NODE_ATTRIBUTABLE

    by_name = score_fleet(quiet_fleet() + [a, b], NOW, rule=replace(NODE_ATTRIBUTABLE, follow_gpus=False))
    assert not verdict(by_name, "node-b").candidate and verdict(by_name, "node-a").candidate


def test_inventory_says_where_the_gpu_is_before_it_fails_again() -> None:
    # Moved into node-b yesterday, no incident there yet: only the inventory (NVML / exporter labels) knows.
    inc_a, val_a = failures([5, 11, 17, 23, 29], 3, gpu_serial=SERIAL)
    a = NodeHistory("node-a", 40.0, inc_a, val_a)
    b = NodeHistory("node-b", 40.0)
    assert verdict(score_fleet(quiet_fleet() + [a, b], NOW), "node-a").candidate
    moved = score_fleet(quiet_fleet() + [a, b], NOW, inventory={SERIAL: "node-b"})
    assert verdict(moved, "node-b").candidate and verdict(moved, "node-a").incidents_counted == 0


def test_recreated_node_keeps_the_record_of_its_gpus() -> None:
    # node-c was deleted and came back as node-c2 with the same GPUs; the old name is gone from the fleet.
    inc_old, val_old = failures([5, 11, 17], 2, gpu_uuid=UUID)
    inc_new, val_new = failures([40, 47], 2, gpu_uuid=UUID)
    old = NodeHistory("node-c", 20.0, inc_old, val_old, in_fleet=False)
    new = NodeHistory("node-c2", 20.0, inc_new, val_new)
    verdicts = score_fleet(quiet_fleet() + [old, new], NOW)
    assert "node-c" not in {v.node for v in verdicts}  # gone nodes are not scored
    v = verdict(verdicts, "node-c2")
    assert v.candidate and v.incidents_counted == 5
    # Without its GPUs' record the new name starts clean.
    bare = score_fleet(quiet_fleet() + [NodeHistory("node-c2", 20.0, inc_new, val_new)], NOW)
    assert not verdict(bare, "node-c2").candidate


def test_uuid_and_serial_are_one_gpu() -> None:
    both = IncidentRecord(day(10), "xid", 48, 1, "x", gpu_serial=SERIAL, gpu_uuid=UUID)
    uuid_only = IncidentRecord(day(20), "xid", 48, 4, "y", gpu_uuid=UUID)
    serial_only = IncidentRecord(day(30), "xid", 48, 4, "z", gpu_serial=SERIAL)
    hs = [NodeHistory("n1", 10.0, (both,)), NodeHistory("n2", 10.0, (uuid_only, serial_only))]
    assert uuid_aliases(hs) == {UUID: SERIAL}
    out = {h.node: h for h in follow_gpus(hs)}
    assert [i.ref for i in out["n2"].incidents] == ["x", "y", "z"] and out["n1"].incidents == ()
    assert out["n2"].incidents[0].seen_on == "n1"


def test_incidents_without_a_gpu_identity_stay_with_the_node() -> None:
    plain = IncidentRecord(day(10), "node-not-ready", ref="p")
    by_index = IncidentRecord(day(11), "xid", 79, 3, "q")
    hs = [NodeHistory("n1", 10.0, (plain, by_index)), NodeHistory("n2", 10.0)]
    out = {h.node: h for h in follow_gpus(hs, {SERIAL: "n2"})}
    assert out["n1"].incidents == (plain, by_index) and out["n2"].incidents == ()
