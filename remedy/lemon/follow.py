"""History follows the GPU as well as the node name.

A lemon is a piece of hardware. When a bad GPU (or its whole tray) is moved into another node, or a node is
re-created under a new name with the same GPUs, its failures must go with it: otherwise the node it left looks bad
and the node it joined starts with a clean record. The GPU's own identity is its board serial (NVML
`nvmlDeviceGetSerial`) or, where no serial was recorded, its UUID (NVML / dcgm-exporter's `UUID` label); an
incident that carried both links the two.

Where a GPU is now comes from an inventory when the caller has one (NVML or exporter labels, identity → node);
otherwise from the newest incident that saw it (any incident, counted or not: an application XID still says where
the GPU is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from remedy.lemon.records import IncidentRecord, NodeHistory


def uuid_aliases(histories: Sequence[NodeHistory]) -> dict[str, str]:
    """UUID → serial, learnt from incidents that carried both."""
    return {i.gpu_uuid: i.gpu_serial for h in histories for i in h.incidents if i.gpu_uuid and i.gpu_serial}


def identity(i: IncidentRecord, aliases: Mapping[str, str]) -> str:
    """One key per physical GPU: its serial, else its UUID mapped to a serial where one is known."""
    return i.gpu_serial or aliases.get(i.gpu_uuid, i.gpu_uuid)


def gpu_homes(histories: Sequence[NodeHistory], aliases: Mapping[str, str]) -> dict[str, str]:
    """GPU identity → the node of the newest incident that saw it."""
    newest: dict[str, tuple] = {}
    for h in histories:
        for i in h.incidents:
            g = identity(i, aliases)
            if g and (g not in newest or i.time > newest[g][0]):
                newest[g] = (i.time, h.node)
    return {g: node for g, (_, node) in newest.items()}


def follow_gpus(histories: Sequence[NodeHistory], inventory: Mapping[str, str] | None = None) -> list[NodeHistory]:
    """Histories of the nodes in the fleet, with every incident of a GPU moved to the node that GPU is in now.

    A moved incident keeps the node it happened on in `seen_on`. The node's validations between the GPU's first and
    last failure there go along too (copied: they also validated the node's other GPUs), so a fail → pass → fail
    cycle the GPU went through on its old node is still a cycle. Nodes no longer in the fleet are dropped after
    their GPUs' records have left them.
    """
    aliases = uuid_aliases(histories)
    homes = gpu_homes(histories, aliases)
    for key, node in (inventory or {}).items():
        homes[aliases.get(key, key)] = node
    in_fleet = {h.node for h in histories if h.in_fleet}
    moved_in: dict[str, list[IncidentRecord]] = {}
    vals_in: dict[str, list] = {}
    kept: dict[str, list[IncidentRecord]] = {}
    for h in histories:
        stay: list[IncidentRecord] = []
        leaving: dict[str, list[IncidentRecord]] = {}
        for i in h.incidents:
            home = homes.get(identity(i, aliases))
            if home and home != h.node and home in in_fleet:
                leaving.setdefault(home, []).append(replace(i, seen_on=i.seen_on or h.node))
            else:
                stay.append(i)
        kept[h.node] = stay
        for home, recs in leaving.items():
            moved_in.setdefault(home, []).extend(recs)
            first, last = min(r.time for r in recs), max(r.time for r in recs)
            vals_in.setdefault(home, []).extend(v for v in h.validations if first <= v.time <= last)
    out = []
    for h in histories:
        if not h.in_fleet:
            continue
        incidents = sorted(kept[h.node] + moved_in.get(h.node, []), key=lambda i: i.time)
        validations = sorted(set(h.validations) | set(vals_in.get(h.node, [])), key=lambda v: v.time)
        out.append(replace(h, incidents=tuple(incidents), validations=tuple(validations)))
    return out
