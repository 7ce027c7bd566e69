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

    The run's tags as created come from the run context, not the API: a subflow started inside `tagged()` and a
    triage run the receiver created (remedy.receiver.dispatcher) already carry them, and then this costs no round
    trip on the way to the cordon."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return
    have = list(ctx.flow_run.tags or [])
    if set(run_tags(node, stage=stage, xid=xid, dry_run=dry_run)) <= set(have) \
            and any(t.startswith("rack:") for t in have):
        return  # tagged at creation (the rack lookup is a cluster read: skip it too)
    wanted = remediation_tags(node, stage=stage, xid=xid) + (["dry-run"] if dry_run else [])
    if not [t for t in wanted if t not in have]:
        return
    try:
        with get_client(sync_client=True) as client:
            have = client.read_flow_run(ctx.flow_run.id).tags or []  # the stored list: another writer may have added
            missing = [t for t in wanted if t not in have]
            if missing:
                client.update_flow_run(ctx.flow_run.id, tags=[*have, *missing])
    except Exception as exc:  # noqa: BLE001 - tags are a convenience; never fail a remediation for them
        import logging

        logging.getLogger(__name__).warning("could not tag run for %s: %s", node, exc)
