"""Run tags an operator filters on in the Prefect UI: node, rack, XID, lifecycle stage, dry-run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from remedy import runtime


def remediation_tags(node: str, *, stage: str, xid: int | None = None, dry_run: bool = False) -> list[str]:
    out = [f"node:{node}", f"stage:{stage}"] + (["dry-run"] if dry_run else [])
    try:
        rack = runtime.cluster().get_node(node).topology.rack
        if rack:
            out.append(f"rack:{rack}")
    except Exception:  # an unknown or unreachable node still gets its run; tags are a convenience
        pass
    if xid is not None:
        out.append(f"xid:{xid}")
    return out


@contextlib.contextmanager
def tagged(node: str, *, stage: str, xid: int | None = None, dry_run: bool = False) -> Iterator[None]:
    """Runs (and subflow runs) started inside carry the node/rack/XID/stage tags, and `dry-run` when nothing is to
    change (a planned run must not look like a live one in the runs list)."""
    from prefect import tags

    with tags(*remediation_tags(node, stage=stage, xid=xid, dry_run=dry_run)):
        yield
