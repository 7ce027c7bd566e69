"""`remedy lemon candidates|clear`: the lemon candidates the last review left, and a person's "this one is no lemon".

A candidate is never handed out as a spare (remedy.spares.lemons). When a person has looked at one and found it
sound (or fixed what made it fail), `remedy lemon clear NODE --by alice --why "PSU swapped"` records that; the next
replacement may pick it again. A later review that flags it again makes it a candidate again.
"""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lemon", help="lemon candidates: list them, clear one a person found sound")
    lsub = p.add_subparsers(dest="lemon_command", metavar="ACTION", required=True)
    ls = lsub.add_parser("candidates", help="nodes the lemon review flagged (kept out of the spare pool); exit 1 if any")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--db", help="ledger URL (default: the running stack's; see remedy/ledger/locate.py)")
    ls.set_defaults(func=_candidates)
    cl = lsub.add_parser("clear", help="a person found this candidate sound: it may be a spare again")
    cl.add_argument("node")
    cl.add_argument("--by", required=True, help="who decided (recorded)")
    cl.add_argument("--why", required=True, help="why it is no lemon (recorded)")
    cl.add_argument("--db", help="ledger URL (default: the running stack's)")
    cl.set_defaults(func=_clear)


def _candidates(args: argparse.Namespace) -> int:
    from remedy import runtime
    from remedy.ledger.locate import use
    from remedy.spares.lemons import lemon_candidates

    where = use(args.db, getattr(args, "config", None))
    found = lemon_candidates(runtime.ledger())
    if args.json:
        print(json.dumps({"ledger": where, "candidates": found}, indent=2, default=str))
        return 1 if found else 0
    print(where)
    if not found:
        print("no lemon candidates")
    for node, detail in found.items():
        print(f"{node}: {detail.get('decision', '')} {detail.get('reason', '')}".rstrip())
    return 1 if found else 0  # a node held out of the pool is a finding (docs/operations.md)


def _clear(args: argparse.Namespace) -> int:
    from remedy import runtime
    from remedy.errors import RemedyError
    from remedy.ledger.locate import use
    from remedy.spares.lemons import clear_candidate

    where = use(args.db, getattr(args, "config", None), write=True)
    led = runtime.ledger()
    led.get_node(args.node)  # an unknown node is one line naming it (NodeNotFound), exit 2
    print(where)
    if not clear_candidate(led, args.node, by=args.by, why=args.why):
        raise RemedyError(f"{args.node} is not a lemon candidate: nothing to clear (see `remedy lemon candidates`)")
    print(f"{args.node}: no longer a lemon candidate ({args.why}, by {args.by}); it may be a spare again")
    return 0
