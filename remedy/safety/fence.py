"""The incident's fence at the cluster: a run that lost its incident cannot change a node, whatever the timing.

The ledger's lease fence (remedy.ledger.base.LedgerBase._fenced) guards ledger writes; a run frozen between its
ledger write and its cluster call (a SIGSTOP, a paused VM) could still wake after a takeover and reboot a node the
new run had fixed. So every destructive call made for an incident is also fenced by the API server:

- The Node carries the annotation `remedy.io/fence` = `incident-<id>/<run>`: the run acting on it for the incident.
- A fenced Node write (cordon, uncordon, taint, label, spare promotion) reads the Node, and unless the fence is
  already this run's, asks the ledger whether the run still holds the incident (`NodeFence.confirm`, the same check
  every acting ledger write makes). It then writes its change *and* its fence in one PATCH carrying the
  resourceVersion it read: the kube-apiserver refuses it with 409 Conflict if the Node changed in between
  (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, Store.Update: `newResourceVersion !=
  existingResourceVersion` → NewConflict; judged on etcd's current object, not a cache: storage/etcd3/store.go
  GuaranteedUpdate re-reads live data before returning an error found on cached data). On a 409 the adapter reads
  again and decides again, so a takeover's fence written meanwhile sends it to the ledger, which refuses.
- A run writes its fence on the incident's node when it claims the incident (tasks.leases.hold_incident_node) and
  before every fenced call, so a takeover's fence lands before any of the new run's own changes. A stale run's
  write is therefore either refused, or ordered before everything the new run does on that node — the same as a
  step finished just before the takeover, which the takeover already replays.
- Calls that are not a Node write (evictions, the reset/reboot Job, a pod restart) are checked on the Node right
  before, in the same task (`KubernetesCluster.fence_node`): the fence read fresh from the API server, and if it is
  not this run's, the ledger asked and the fence written with the resourceVersion precondition. Residual window:
  from that check to the call itself (one request), and for a Job, until its pod runs the reset or reboot on the
  node (seconds) — the API server cannot make a pod's command conditional on an annotation. A takeover in that
  window finds the Job already created and its action row running; the reset/reboot is idempotent and the new run
  verifies the node before returning it to service.

A refusal is one log line and a Kubernetes Event on the Node (reason `RemedyStoodDown`): "stood down: another run
holds this incident now". Writes with no incident (the operator's CLI, the spare cycle, burn-in) carry no fence,
nor do read-only Jobs (the reconfirm's NVML probe, health checks: they change nothing on the node). Calls for an
incident on other nodes' work — preempting a workload for a spare (tasks/preemption.py), fault isolation's batch
taints and labels (tasks/isolation.py) — check the fence on the incident's own node first: a takeover's claim
fences that node, not the others. Fault isolation for no incident (a person's, fleet-wide) is not fenced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from remedy.ledger.errors import LeaseLost

ANN_FENCE = "remedy.io/fence"
STOOD_DOWN = "stood down: another run holds this incident now"


@dataclass(frozen=True)
class NodeFence:
    """Who acts on a node for an incident, and how to ask the ledger whether it still may."""

    incident_id: int
    run: str
    # raises LeaseLost unless `run` still holds the incident (remedy.ledger.incidents.check_fence); no-op in tests
    # that play a bare API client
    confirm: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)

    @property
    def token(self) -> str:
        return f"incident-{self.incident_id}/{self.run}"


class FenceLost(LeaseLost):
    """A fenced cluster call refused: another run holds the incident now. The run stops here."""


def stood_down_line(node: str, fence: NodeFence, what: str, holder: str) -> str:
    """The one line the log and the Event say."""
    held = f" (the node's fence names {holder})" if holder else ""
    return (f"{STOOD_DOWN}: {what} on {node} for incident {fence.incident_id} not done by run {fence.run}{held}; "
            "it stops here")
