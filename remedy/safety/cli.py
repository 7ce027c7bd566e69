"""`remedy breaker status|open|close`: see the breakers, pause automation in a scope by hand, re-close it.

`remedy breaker open cluster:cluster --by alice --reason "driver rollout"` pauses all automation: every
remediation is held (and asks a person) until someone closes it again.
"""

from __future__ import annotations

import argparse
import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from remedy.safety.procedure import BoardPorts
    from remedy.safety.scopes import BreakerTransition


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("breaker", help="circuit breakers: status, open (pause automation), close")
    bsub = p.add_subparsers(dest="breaker_command", metavar="ACTION", required=True)
    st = bsub.add_parser("status", help="scopes whose breaker is not closed")
    st.add_argument("--json", action="store_true")
    for q in (st,):
        q.add_argument("--db", help="ledger URL (default: the running stack's; see remedy/ledger/locate.py)")
    st.set_defaults(func=_status)
    op = bsub.add_parser("open", help="pause automation in a scope (kind:name, e.g. rack:rack-3, cluster:cluster)")
    op.add_argument("scope")
    op.add_argument("--by", required=True, help="who pauses it (recorded)")
    op.add_argument("--reason", required=True, help="why (recorded, shown on held runs)")
    op.add_argument("--db", help="ledger URL (default: the running stack's)")
    op.set_defaults(func=_open)
    cl = bsub.add_parser("close", help="re-close a scope's breaker after review")
    cl.add_argument("scope")
    cl.add_argument("--by", required=True, help="who closes it (recorded)")
    cl.add_argument("--db", help="ledger URL (default: the running stack's)")
    cl.set_defaults(func=_close)


def _status(args: argparse.Namespace) -> int:
    from remedy.ledger.locate import use
    from remedy.safety.procedure import load_board

    where = use(args.db, getattr(args, "config", None))
    rows = load_board(_ports()).describe()
    if args.json:
        print(json.dumps({"ledger": where, "not_closed": rows}, indent=2, default=str))
        return 1 if rows else 0
    print(where)
    if not rows:
        print("all breakers closed: automation acts")
    else:
        for r in rows:
            print("  ".join(f"{k}={v}" for k, v in r.items()))
    return 1 if rows else 0  # a breaker not closed holds automation back: a finding (docs/operations.md)


def _change(scope: str, fn, args: argparse.Namespace) -> int:
    from remedy.ledger.locate import use
    from remedy.safety.procedure import change_breaker

    where = use(args.db, getattr(args, "config", None), write=True)

    def checked(board, now):
        _check_scope_exists(board, scope)
        print(where)
        return fn(board, now)

    transitions = change_breaker(_ports(), checked)  # under the gate's lock, like every decision
    for t in transitions:
        print(f"{t.scope_kind}:{t.scope}: {t.from_state.value} → {t.to_state.value} ({t.reason})")
    if not transitions:
        print(f"{scope}: no change")
    return 0


class _PersonPorts:
    """The gate's ports for a person at a terminal: no flow run, so no fence (a person's change holds no incident)
    and nobody to ask; the ledger row and the printed line are the record."""

    def __init__(self) -> None:
        from remedy import runtime

        self.settings, self.ledger = runtime.settings(), runtime.ledger()

    def lock(self) -> AbstractContextManager[None]:
        from remedy.safety.lock import ledger_lock

        return ledger_lock(self.settings.db_url, self.ledger.engine)

    def fence(self, incident_id: int | None) -> None:
        return None

    def announce(self, transition: BreakerTransition) -> None:
        pass


def _ports() -> BoardPorts:
    return _PersonPorts()


def _check_scope_exists(board, scope: str) -> None:
    """A scope names a failure domain of the fleet the ledger knows (or one the board already tracks): opening
    `rack:rack-99` when there is no such rack would pause nothing and look like it did."""
    from remedy import runtime
    from remedy.ledger.actions import BREAKER_SCOPES
    from remedy.safety.board import BreakerError
    from remedy.safety.scopes import split_key

    try:
        kind, name = split_key(board.resolve(scope))
    except ValueError as exc:
        raise BreakerError(f"{exc}; kinds: {', '.join(BREAKER_SCOPES)}") from None
    key = f"{kind}:{name}"
    if kind == "cluster" or key in board.status:
        return
    known = sorted({getattr(n, kind) for n in runtime.ledger().nodes()} - {""})
    if name not in known:
        listed = ", ".join(known[:12]) + (" …" if len(known) > 12 else "") if known else "none: no nodes recorded yet"
        raise BreakerError(f"no {kind} named {name!r} in the fleet the ledger knows ({kind}s: {listed})")


def _open(args: argparse.Namespace) -> int:
    return _change(args.scope, lambda board, now: board.open(args.scope, args.by, args.reason, now), args)


def _close(args: argparse.Namespace) -> int:
    code = _change(args.scope, lambda board, now: board.approve_close(args.scope, args.by, now), args)
    from remedy.approvals.decide import answer_after_close
    from remedy.safety.procedure import load_board

    # the runs paused on this breaker get the answer (issue 33)
    answer_after_close(load_board(_ports()).resolve(args.scope), args.by)
    return code
