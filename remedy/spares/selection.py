"""Which warm spare replaces a failed node, and why each other candidate was passed over.

Rules (seed 000, Crusoe AutoClusters): a spare must match the failed node's GPU model and instance type, be
validated recently (spares degrade and need regular cycling; a stale one is usable only if the caller validates
it on promotion), and not be a lemon. The spare with the fewest incidents in the lemon lookback window comes first
(the caller counts them, `SpareCandidate.incidents`): a node that has failed is far likelier than one that has not
to be a lemon not yet proven (seed 002: a few nodes failed again and again). Among equals, a spare fixed
in place recently (`spares.recently_fixed_days`) comes after every spare with a clean record: a lemon passes its fix
and the checks idle, then fails again under load. When the failure may be correlated (a rack/switch/PDU problem), prefer a
spare in a different rack, switch and PDU, or the replacement may die of the same cause. Ties break
deterministically: fresher validation first, then name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from remedy.domain.durations import hours
from remedy.domain.model import Node, NodeState
from remedy.safety.scopes import require_aware
from remedy.settings.safety import SpareSettings

DOMAINS = ("rack", "switch", "pdu")


@dataclass(frozen=True)
class SpareCandidate:
    """A node in the spare pool and when it last passed validation (None = never)."""

    node: Node
    validated_at: datetime | None = None
    fixed_at: datetime | None = None  # when a reset or reboot last cleared a fault on it (None = never)
    incidents: int = 0  # its incidents in the lemon lookback window (planned moves excluded)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class Rejection:
    name: str
    reason: str


@dataclass(frozen=True)
class SpareChoice:
    """The spare to promote. If `needs_validation`, run the validation before it takes work."""

    spare: SpareCandidate
    needs_validation: bool
    reasons: tuple[str, ...]
    ranked: tuple[str, ...]  # every usable candidate, best first
    rejected: tuple[Rejection, ...]

    @property
    def name(self) -> str:
        return self.spare.name

    def explain(self) -> str:
        lines = [f"chose {self.name}: " + "; ".join(self.reasons)]
        if len(self.ranked) > 1:
            lines.append("usable, in order: " + ", ".join(self.ranked))
        lines += [f"not {r.name}: {r.reason}" for r in self.rejected]
        return "\n".join(lines)


@dataclass(frozen=True)
class NoSpare:
    """No candidate may replace the failed node; `rejected` says why for each."""

    reason: str
    rejected: tuple[Rejection, ...]

    def explain(self) -> str:
        return "\n".join([f"no spare: {self.reason}"] + [f"not {r.name}: {r.reason}" for r in self.rejected])


def validated_for_work(validated_at: datetime | None, now: datetime, settings: SpareSettings) -> bool:
    """May this spare carry work as the selection sees it: validated within the freshness window, or (with
    validate-on-promote) validated at least once. The gate's spare reserve counts only these: a never-validated
    spare is no reserve to rely on."""
    if validated_at is None:
        return False
    require_aware(validated_at, "validation time")
    return settings.validate_on_promote or now - validated_at <= timedelta(hours=settings.validation_freshness_hours)


def _age(hours_old: float) -> str:
    return hours(hours_old)


NOT_VALIDATED = "needs validation:"


def _why_none(rejected: list[Rejection]) -> str:
    """Why no spare, in one clause: an empty pool, none validated, or what each was turned away for."""
    if not rejected:
        return "there is no ready spare in the pool"
    n = len(rejected)
    if all(r.reason.startswith(NOT_VALIDATED) for r in rejected):
        return f"none of the {n} ready spare(s) is validated (validate-on-promote is off)"
    counts = Counter(_kind(r.reason) for r in rejected)
    return f"none of the {n} ready spare(s) may take its place: " + \
        ", ".join(f"{v} {k}" for k, v in counts.most_common())


KINDS = (("needs validation", "not validated"), ("lemon", "a lemon candidate"), ("NotReady", "NotReady"),
         ("not a spare", "not a spare"), ("it has", "another GPU model"), ("instance type", "another instance type"),
         ("GPUs ≠", "another GPU count"), ("failed node itself", "the failed node"))


def _kind(reason: str) -> str:
    """A rejection's first reason, as a short kind ("not validated", "a lemon candidate" …) for the summary."""
    first = reason.split(";")[0]
    return next((kind for key, kind in KINDS if key in first), first.strip())


def _shared_domains(failed: Node, cand: Node) -> list[str]:
    out = []
    for d in DOMAINS:
        mine = getattr(failed.topology, d)
        if mine and getattr(cand.topology, d) == mine:
            out.append(f"{d} {mine}")
    return out


def _hard_reasons(failed: Node, cand: SpareCandidate, lemons: frozenset[str]) -> list[str]:
    n = cand.node
    why = []
    if n.name == failed.name:
        why.append("it is the failed node itself")
    if n.state is not NodeState.SPARE:
        why.append(f"it is {n.state.value if n.state else 'unmanaged'}, not a spare")
    if not n.ready:
        why.append("it is NotReady")
    if n.name in lemons:
        why.append("it is a lemon candidate")
    if n.gpu_model != failed.gpu_model:
        why.append(f"it has {n.gpu_model or 'no GPU model label'}, the failed node has {failed.gpu_model}")
    if n.instance_type and failed.instance_type and n.instance_type != failed.instance_type:
        why.append(f"instance type {n.instance_type} ≠ {failed.instance_type}")
    if n.gpu_count and failed.gpu_count and n.gpu_count != failed.gpu_count:
        why.append(f"{n.gpu_count} GPUs ≠ {failed.gpu_count}")
    return why


def select_spare(
    failed: Node,
    candidates: Sequence[SpareCandidate],
    now: datetime,
    settings: SpareSettings | None = None,
    correlated: bool = False,
    lemons: Iterable[str] = (),
    allow_validate_on_promote: bool | None = None,
) -> SpareChoice | NoSpare:
    """Pick the spare for `failed`; pure and deterministic (see module docstring for the rules)."""
    settings = settings or SpareSettings()
    require_aware(now, "spare selection time")
    if not failed.gpu_model:
        raise ValueError(f"failed node {failed.name} has no GPU model label: cannot match a spare to it")
    allow_stale = settings.validate_on_promote if allow_validate_on_promote is None else allow_validate_on_promote
    lemon_set = frozenset(lemons)
    fresh_for = timedelta(hours=settings.validation_freshness_hours)
    window = f"{settings.validation_freshness_hours:g}-h freshness window"
    recent_days = settings.recently_fixed_days
    recent_for = timedelta(days=recent_days) if recent_days > 0 else timedelta(-1)  # 0: never "recent"

    dupes = sorted(n for n, c in Counter(c.name for c in candidates).items() if c > 1)
    if dupes:
        raise ValueError(f"spare candidates listed twice: {', '.join(dupes)}")

    rejected: list[Rejection] = []
    usable: list[tuple[tuple, SpareCandidate, bool, list[str]]] = []
    for cand in candidates:
        why = _hard_reasons(failed, cand, lemon_set)
        if cand.validated_at is not None:
            require_aware(cand.validated_at, f"validation time of {cand.name}")
        age = None if cand.validated_at is None else max(now - cand.validated_at, timedelta(0))
        stale = age is None or age > fresh_for
        if stale and not why:
            seen = "never validated" if age is None else f"validated {_age(age.total_seconds() / 3600)} ago, outside the {window}"
            if not allow_stale:
                why.append(f"{NOT_VALIDATED} {seen} (validate-on-promote is off)")
        if why:
            rejected.append(Rejection(cand.name, "; ".join(why)))
            continue
        shared = _shared_domains(failed, cand.node) if correlated else []
        age_s = float("inf") if age is None else age.total_seconds()
        if cand.fixed_at is not None:
            require_aware(cand.fixed_at, f"fix time of {cand.name}")
        since_fix = None if cand.fixed_at is None else max(now - cand.fixed_at, timedelta(0))
        recent = since_fix is not None and since_fix <= recent_for
        key = (cand.incidents, recent, stale, len(shared), age_s, cand.name)
        notes = [f"{cand.node.gpu_model} like {failed.name}"]
        if cand.incidents:
            notes.append(f"{cand.incidents} incident(s) in the lemon lookback window: used after spares with fewer")
        if since_fix is not None and recent:
            notes.append(f"fixed in place {_age(since_fix.total_seconds() / 3600)} ago (within {_age(recent_days * 24)}): "
                         "used after the spares with a clean record")
        if age is None:
            notes.append("never validated: validate it on promotion")
        elif stale:
            notes.append(f"validated {_age(age.total_seconds() / 3600)} ago, outside the {window}: validate it on promotion")
        else:
            notes.append(f"validated {_age(age.total_seconds() / 3600)} ago (within the {window})")
        if correlated:
            if shared:
                notes.append(f"shares {', '.join(shared)} with the failure, which may be correlated (no better spare)")
            else:
                notes.append("in a different rack, switch and PDU than the failure, which may be correlated")
        usable.append((key, cand, stale, notes))

    if not usable:
        return NoSpare(_why_none(rejected), tuple(rejected))
    usable.sort(key=lambda u: u[0])
    _, best, stale, notes = usable[0]
    return SpareChoice(best, stale, tuple(notes), tuple(u[1].name for u in usable), tuple(rejected))
