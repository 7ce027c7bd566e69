"""Run tags an operator filters on in the Prefect UI: node, rack, XID, lifecycle stage, dry-run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from remedy import runtime
from remedy.domain.run_tags import run_tags


def remediation_tags(node: str, *, stage: str, xid: int | None = None, dry_run: bool = False) -> list[str]:
    try:
        rack = runtime.cluster().get_node(node).topology.rack
    except Exception:  # an unknown or unreachable node still gets its run; tags are a convenience
        rack = None
    return run_tags(node, stage=stage, xid=xid, rack=rack, dry_run=dry_run)


@contextlib.contextmanager
def tagged(node: str, *, stage: str, xid: int | None = None, dry_run: bool = False) -> Iterator[None]:
    """Runs (and subflow runs) started inside carry the node/rack/XID/stage tags, and `dry-run` when nothing is to
    change (a planned run must not look like a live one in the runs list)."""
    from prefect import tags

    with tags(*remediation_tags(node, stage=stage, xid=xid, dry_run=dry_run)):
        yield


def tag_this_run(node: str, *, stage: str, xid: int | None = None, dry_run: bool = False) -> None:
    """Add node/rack/XID/stage (and `dry-run`) tags to the current flow run, however it was started (a deployment,
    the CLI, a parent flow): an operator filters runs by node or rack in the UI. Best effort.

    The run's tags as created come from the run context, not the API: a triage run the receiver created
    (remedy.platform.dispatcher) already carries them, and then this costs no round trip on the way to the cordon;
    otherwise one write. Prefer this to `tagged()` for a flow's own run: tags in a context reach every task run,
    and Prefect asks the server for a concurrency slot for each tagged task run."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return
    have = list(ctx.flow_run.tags or [])
    if set(run_tags(node, stage=stage, xid=xid, dry_run=dry_run)) <= set(have) \
            and any(t.startswith("rack:") for t in have):
        return  # tagged at creation (the rack lookup is a cluster read: skip it too)
    wanted = remediation_tags(node, stage=stage, xid=xid) + (["dry-run"] if dry_run else [])
    _add(ctx.flow_run.id, have, wanted, node)


def tag_this_run_with_nodes(nodes: list[str], *, stage: str, dry_run: bool = False) -> None:
    """The node and rack tags of several nodes on the current run, in one write: isolate-fault searches many nodes
    and is tagged with the ones its verdict holds, so filtering runs by a node finds the run that named it."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None or not nodes:
        return
    wanted: list[str] = []
    for node in nodes:
        wanted += [t for t in remediation_tags(node, stage=stage, dry_run=dry_run) if t not in wanted]
    _add(ctx.flow_run.id, list(ctx.flow_run.tags or []), wanted, ", ".join(nodes))


def _add(run_id, have: list[str], wanted: list[str], what: str) -> None:
    from prefect.client.orchestration import get_client

    if not [t for t in wanted if t not in have]:
        return
    try:
        with get_client(sync_client=True) as client:  # only this module writes a run's tags after its creation
            client.update_flow_run(run_id, tags=[*have, *(t for t in wanted if t not in have)])
    except Exception as exc:  # noqa: BLE001 - tags are a convenience; never fail a remediation for them
        import logging

        logging.getLogger(__name__).warning("could not tag run for %s: %s", what, exc)
