"""A remediation result as the run's final Prefect state (remedy.domain.outcome decides how it looks).

Not a task: flows return `final_state(result)`; parents read a sub-flow's result with `run_subflow`, which never
raises for a held or escalated child (its typed result is what the parent needs).
"""

from __future__ import annotations

from typing import Any

from prefect.states import Cancelled, Completed, Failed, State

from remedy.domain.outcome import Outcome, RunLook, node_event, one_line, outcome_of


def final_state(result: dict[str, Any], *, node: str | None = None) -> State:
    """Completed for a fault dealt with; Failed ("Held", "Escalated", "No spare" …) or Cancelled ("Stopped by
    operator") otherwise, with a one-line message; the result dict is the state's data either way.

    With `node`, a run that stopped short also leaves a Warning Event on the Node saying why (once: a child
    flow's note is not repeated by its parent)."""
    note = node_event(result) if node else None
    if node and note and not result.get("noted_on_node"):
        from remedy import runtime
        from tasks.cluster import note_on_node

        dry_run = result.get("dry_run")
        note_on_node(node, *note, dry_run=runtime.settings().dry_run if dry_run is None else bool(dry_run))
        result = result | {"noted_on_node": True}
    o = outcome_of(result)
    message = one_line(result)
    if o is None or o.look is RunLook.DONE:
        named = o is not None and o in (Outcome.PLANNED, Outcome.DUPLICATE, Outcome.IGNORED, Outcome.CLEARED,
                                        Outcome.RETURNED_TO_SPARES, Outcome.WATCHED)
        if named and o is not None:
            return Completed(message=message, data=result, name=o.label)
        return Completed(message=message, data=result)
    if o.look is RunLook.STOOD_DOWN:
        return Cancelled(message=message, data=result, name=o.label)
    return Failed(message=message, data=result, name=o.label)


def run_subflow(flow_fn, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a remediation flow as a sub-flow and return its result dict whatever its final state."""
    state = flow_fn(*args, return_state=True, **kwargs)
    result = state.result(raise_on_failure=False)
    if isinstance(result, BaseException):  # the child crashed: say so in the same shape
        return {"status": "escalated", "escalated": True, "why": f"{flow_fn.name} failed: {result}"[:300]}
    return result if isinstance(result, dict) else {"status": str(result)}
