"""The tags an operator filters runs on in the Prefect UI: node, stage, rack, XID, dry-run. One format, used by the
flows (tasks.tags) and by the receiver when it creates a triage run already tagged (no API round trip later)."""

from __future__ import annotations

from remedy.domain.names import tag


def run_tags(node: str, *, stage: str, xid: int | None = None, rack: str | None = None,
             dry_run: bool = False) -> list[str]:
    out = [tag(f"node:{node}"), f"stage:{stage}"] + (["dry-run"] if dry_run else [])
    if rack:
        out.append(tag(f"rack:{rack}"))
    if xid is not None:
        out.append(f"xid:{xid}")
    return out
