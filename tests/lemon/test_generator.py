"""Issue 14's acceptance bar on the planted fleet (200 nodes, 60 days, 8 lemons, 20 busy-but-healthy nodes, noisy
neighbours, a moved GPU, a re-created node): lemon precision and recall ≥ 0.95 over several seeds, while the old
rule (every incident the ledger did not ignore, by node name) fails on the same fleets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remedy.lemon.attribution import EVERY_INCIDENT as OLD
from remedy.lemon.attribution import NODE_ATTRIBUTABLE
from remedy.lemon.generator import generate_fleet, precision_recall
from remedy.lemon.scoring import score_fleet

SEEDS = range(10)


def flagged(fleet, rule=NODE_ATTRIBUTABLE) -> set[str]:
    return {v.node for v in score_fleet(fleet.histories, fleet.now, inventory=fleet.inventory, rule=rule) if v.candidate}


def test_precision_and_recall_at_least_0_95_over_seeds() -> None:
    hit = false_pos = missed = 0
    old_hit = old_flagged = 0
    for seed in SEEDS:
        fleet = generate_fleet(seed)
        new, old = flagged(fleet), flagged(fleet, OLD)
        p, r = precision_recall(new, fleet.lemons)
        po, ro = precision_recall(old, fleet.lemons)
        print(f"seed {seed}: node-attributable {p:.2f}/{r:.2f}, every incident {po:.2f}/{ro:.2f}; "
              f"false {sorted(new - fleet.lemons)} missed {sorted(fleet.lemons - new)}")
        hit, false_pos, missed = hit + len(new & fleet.lemons), false_pos + len(new - fleet.lemons), \
            missed + len(fleet.lemons - new)
        old_hit, old_flagged = old_hit + len(old & fleet.lemons), old_flagged + len(old)
        # The populations that fool a score are never taken for lemons.
        assert not new & (fleet.busy | fleet.neighbours | fleet.rack_event - fleet.lemons)
    precision, recall = hit / (hit + false_pos), hit / (hit + missed)
    print(f"pooled over {len(SEEDS)} seeds: precision {precision:.3f}, recall {recall:.3f}")
    assert precision >= 0.95 and recall >= 0.95
    # The fleet is a real test: scoring every incident flags the busy nodes and neighbours.
    assert old_hit / old_flagged < 0.5


def test_every_severity_and_the_moved_hardware_are_found() -> None:
    found = {"severe": 0, "moderate": 0, "mild": 0}
    planted = dict.fromkeys(found, 0)
    for seed in SEEDS:
        fleet = generate_fleet(seed)
        new = flagged(fleet)
        for node, sev in fleet.severity.items():
            found[sev] += node in new
            planted[sev] += 1
        (serial, (left, joined)), = fleet.moved.items()
        (old_name, new_name), = fleet.recreated.items()
        assert joined in new and new_name in new, (seed, joined, new_name)
        assert left not in new  # its lemon GPU left with its record
        assert old_name not in {h.node for h in fleet.histories if h.in_fleet}
    print(f"found / planted by severity: {found} / {planted}")
    assert all(found[s] >= 0.9 * planted[s] for s in found), (found, planted)


# count_failed_checks is shown on a hand-built history (tests/lemon/test_scoring.py): since the recurrence gap runs
# from the last pass and two cycles fire the signal, the planted lemons are found from their incidents alone.
@pytest.mark.parametrize("part", ["follow_gpus", "cause", "status"])
def test_each_rule_earns_its_place(part: str) -> None:
    """Switching one rule off loses precision or recall on the same fleets: the generator plants what each is for."""
    from remedy.lemon.attribution import why_not_counted

    if part in ("cause", "status"):
        rule = replace(NODE_ATTRIBUTABLE, attribute=lambda i: why_not_counted(replace(i, **{part: ""})))
    else:
        rule = replace(NODE_ATTRIBUTABLE, **{part: False})
    hit = total_flagged = total_lemons = 0
    for seed in SEEDS:
        fleet = generate_fleet(seed)
        got = flagged(fleet, rule)
        hit, total_flagged, total_lemons = hit + len(got & fleet.lemons), total_flagged + len(got), \
            total_lemons + len(fleet.lemons)
    assert min(hit / total_flagged, hit / total_lemons) < 0.95


def test_shape_and_determinism() -> None:
    a = generate_fleet(3)
    assert a == generate_fleet(3) and a != generate_fleet(4)
    assert len([h for h in a.histories if h.in_fleet]) == 200 and (a.now - a.start).days == 60
    assert len(a.lemons) == 8 and len(a.busy) == 20 and set(a.severity.values()) == {"severe", "moderate", "mild"}
    busy = [h for h in a.histories if h.node in a.busy]
    assert min(sum(i.signal == "xid" and i.xid in (13, 31, 43, 94) for i in h.incidents) for h in busy) >= 10
    assert all(i.gpu_serial for h in a.histories for i in h.incidents if i.gpu is not None)
    with pytest.raises(ValueError, match="must fit in 20 nodes"):
        generate_fleet(0, nodes=20)
