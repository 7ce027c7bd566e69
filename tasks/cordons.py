"""Who holds a node's cordon, and keeping a person's (issue 32, item 3: the operator's cordon wins before, during
and after). A flow that puts a node back in service asks `cordon_holder` first: gpu-remedy lifts only its own
cordon (remedy.remediate.operator.may_uncordon, the one rule fix-in-place's release_node follows too); a cordon
a person set before gpu-remedy acted stays, recorded in the ledger and said on the Node as an Event."""

from __future__ import annotations

from prefect import task

from remedy import runtime
from remedy.domain import events
from remedy.remediate.operator import CordonOwner, cordon_owner
from remedy.remediate.results import NodeChange
from tasks.ledger import act
from tasks.retry import retrying
from tasks.story import say

RETRY = retrying(1, 2, 4)


@task(name="cordon_holder", task_run_name="cordon-holder-{node}", timeout_seconds=60, **RETRY)
def cordon_holder(node: str, dry_run: bool) -> CordonOwner:
    """Who holds the node's cordon now: nobody, gpu-remedy (its `remedy.io/cordoned-by` annotation) or a person
    (cordoned without it: `kubectl cordon`)."""
    from remedy.adapters.kubernetes import ANN_CORDONED_BY

    live = runtime.cluster(dry_run).get_node(node)
    return cordon_owner(live.unschedulable, live.annotations.get(ANN_CORDONED_BY))


def kept_cordon_why(node: str, because: str) -> str:
    return (f"{node} was cordoned by a person (no gpu-remedy annotation) before gpu-remedy acted; gpu-remedy is done "
            f"with it ({because}) and leaves the cordon for them to lift")


@task(name="keep_operator_cordon", task_run_name="keep-cordon-{node}", timeout_seconds=60, **RETRY)
def keep_operator_cordon(node: str, because: str, dry_run: bool, incident_id: int | None = None) -> NodeChange:
    """Record that the person's cordon stays (ledger action `keep_operator_cordon`) and say why on the Node."""
    why = kept_cordon_why(node, because)
    out = act("keep_operator_cordon", node, lambda: {"node": node, "changed": False, "detail": why,
                                                     "cordoned_by": CordonOwner.PERSON.value},
              incident_id=incident_id, dry_run=dry_run)
    runtime.cluster(dry_run).record_event(node, reason=events.KEPT_OPERATOR_CORDON, message=why)
    say("%s: %s", node, why)
    return NodeChange.from_record(out)
