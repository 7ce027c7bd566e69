"""`remedy audit nfs` and `remedy checkpoint interval` (see remedy/cli.py)."""

from __future__ import annotations

import argparse
import json

from remedy.audit.cadence import CadenceError, mtbf_hours, parse_duration, save_duration_from_samples, young_daly
from remedy.audit.delta import diff_mountstats
from remedy.audit.mountstats import read_mountstats
from remedy.audit.rpc import MountAudit, audit_mount, worst_mount
from remedy.cli_args import http_url, non_negative_int, positive_float, positive_int
from remedy.domain.durations import DurationError, human_duration
from remedy.domain.times import parse_iso

# Verdicts that need a person (exit 1); "healthy" and "idle" do not.
FINDINGS = frozenset({"rpc-slot-starvation", "link-saturated", "slow-server"})


def duration(text: str) -> str:
    """A duration argument (18s, 133.5m, 56.2h), checked at parse time; kept as written (PromQL takes it as is)."""
    try:
        parse_duration(text)
    except DurationError as exc:  # argparse names the argument itself
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None
    return text


def register(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="audit checkpoint and storage I/O")
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="WHAT", required=True)
    nfs = audit_sub.add_parser("nfs", help="where NFS request time goes: RPC slot wait vs network+server")
    source = nfs.add_mutually_exclusive_group(required=True)
    source.add_argument("--mountstats", help="a /proc/self/mountstats snapshot (the later one)")
    source.add_argument("--prometheus", metavar="URL", type=http_url, help="read every node from Prometheus (node_exporter mountstats)")
    nfs.add_argument("--window", type=duration, help="PromQL rate window with --prometheus (default: config nfs.window)")
    nfs.add_argument("--at", help="with --prometheus: audit a past moment (ISO time or Unix seconds), e.g. a checkpoint save")
    nfs.add_argument("--before", help="an earlier snapshot of the same node: rates over the interval between them")
    nfs.add_argument("--interval-seconds", type=positive_float, help="seconds between the snapshots (default: from age:)")
    nfs.add_argument("--link-gbps", type=positive_float, help="storage link speed per node (default: config nfs.link_gbps)")
    nfs.add_argument("--slot-limit", type=positive_int, help="RPC slots per connection (default: config nfs.rpc_slot_limit)")
    nfs.add_argument("--node", default="", help="node name to put in the report")
    nfs.add_argument("--json", action="store_true", help="print machine-readable JSON")
    nfs.set_defaults(func=_audit_nfs)

    ckpt = sub.add_parser("checkpoint", help="checkpoint cadence (Young/Daly)")
    ckpt_sub = ckpt.add_subparsers(dest="checkpoint_command", metavar="WHAT", required=True)
    iv = ckpt_sub.add_parser("interval", help="optimal checkpoint interval and the cost of the current one")
    delta = iv.add_mutually_exclusive_group(required=True)
    delta.add_argument("--delta", type=duration, help="save duration δ, e.g. 18s")
    delta.add_argument("--spike-samples", type=positive_float, help="mean samples a save's write spike spans (N̄)")
    iv.add_argument("--sample-seconds", type=positive_float, help="sampling period for --spike-samples (default: config)")
    mtbf = iv.add_mutually_exclusive_group()
    mtbf.add_argument("--mtbf", type=duration, help="job mean time between failures, e.g. 56.2h (default: config nfs.mtbf_hours)")
    mtbf.add_argument("--failures", type=non_negative_int, help="failures seen in --observed-hours of training")
    iv.add_argument("--observed-hours", type=positive_float, help="training hours in which --failures were seen")
    iv.add_argument("--interval", type=duration, help="the current checkpoint interval, e.g. 133.5m")
    iv.add_argument("--json", action="store_true", help="print machine-readable JSON")
    iv.set_defaults(func=_checkpoint_interval)


def _settings(args: argparse.Namespace):
    from remedy.config import load_settings

    return load_settings(getattr(args, "config", None)).nfs


def _audit_nfs(args: argparse.Namespace) -> int:
    s = _settings(args)
    updates = {k: v for k, v in (("link_gbps", args.link_gbps), ("rpc_slot_limit", args.slot_limit)) if v is not None}
    if updates:
        s = s.model_validate({**s.model_dump(), **updates})
    if args.prometheus:
        audits, skipped = _from_prometheus(args, s), 0
    else:
        after = read_mountstats(args.mountstats)
        before = read_mountstats(args.before) if args.before else None
        if args.interval_seconds is not None and args.interval_seconds <= 0:
            raise CadenceError(f"--interval-seconds must be positive, got {args.interval_seconds:g}")
        audits = [audit_mount(d, s, node=args.node) for d in diff_mountstats(before, after, args.interval_seconds)]
        skipped = after.skipped
    finding = 1 if any(a.verdict.kind in FINDINGS for a in audits) else 0  # docs/operations.md: exit codes
    if args.json:
        print(json.dumps({"skipped_mounts": skipped, "mounts": [a.to_dict() for a in audits]}, indent=2))
        return finding
    if not audits:
        print("no node_mountstats_nfs_* series in Prometheus: is node_exporter's mountstats collector on?")
    for a in sorted(audits, key=lambda a: a is not worst_mount(audits)):
        print(_render(a))
    if skipped:
        print(f"({skipped} non-NFS mounts skipped)")
    return finding


def _from_prometheus(args: argparse.Namespace, s) -> list[MountAudit]:

    from remedy.audit.fleet import audits_from_prometheus
    from remedy.audit.prometheus import PrometheusSource

    window = args.window or s.window
    window_s = parse_duration(window)
    at = None
    if args.at:
        try:
            at = float(args.at) if args.at.replace(".", "", 1).isdigit() else parse_iso(args.at, what="--at")
        except ValueError:
            raise CadenceError(f"--at: not an ISO time or Unix seconds: {args.at!r}") from None
    src = PrometheusSource(args.prometheus)
    try:
        ops, transports = src.nfs_op_latency(window, at), src.nfs_transport(window, at)
    finally:
        src.close()
    return audits_from_prometheus(ops, transports, s, window_seconds=window_s)


def _render(a: MountAudit) -> str:
    span = f"since mount ({human_duration(a.interval_seconds)})" if a.lifetime else f"over {human_duration(a.interval_seconds)}"
    t = a.transport
    where = f"on {a.mountpoint} (NFSv{a.nfs_version}, {t.connections}×{t.protocol})" if a.mountpoint else f"({t.protocol})"
    lines = [
        f"{a.node + ' ' if a.node else ''}{a.device} {where} {span}",
        f"  {a.verdict.headline}",
        f"  link {a.bytes_per_s / 1e9:.3f} GB/s = {a.link_utilization:.2%} used; backlog {_num(t.avg_backlog)} waiting per send,"
        f" {_num(t.avg_in_flight)} in flight, slots high-water {t.max_slots_seen if t.max_slots_seen is not None else '-'}/{t.slot_limit}",
        f"  {'op':<12} {'req/s':>10} {'slot wait ms':>13} {'net+server ms':>14} {'total ms':>10} {'wait %':>7}",
    ]
    for o in sorted((o for o in a.ops if o.ops), key=lambda o: -(o.ops * (o.execute_ms or 0)))[:8]:
        lines.append(
            f"  {o.op:<12} {o.rate_per_s:>10.1f} {o.slot_wait_ms:>13.1f} {o.network_server_ms:>14.1f} "
            f"{o.execute_ms:>10.1f} {o.slot_wait_share:>7.1%}"
        )
    lines += [f"  remedy: {r}" for r in a.verdict.remedies]
    if a.wrapped:
        lines.append(f"  note: counters wrapped and were corrected: {', '.join(a.wrapped)}")
    return "\n".join(lines)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _checkpoint_interval(args: argparse.Namespace) -> int:
    s = _settings(args)
    if args.delta is not None:
        delta_s = parse_duration(args.delta, what="--delta")
    else:
        delta_s = save_duration_from_samples(args.spike_samples, args.sample_seconds or s.sample_seconds)
    if args.failures is not None:
        if args.observed_hours is None:
            raise CadenceError("--failures needs --observed-hours (training hours in which they were seen)")
        mtbf_s = mtbf_hours(args.failures, args.observed_hours) * 3600.0
    else:
        mtbf_s = parse_duration(args.mtbf, what="--mtbf") if args.mtbf else s.mtbf_hours * 3600.0
    plan = young_daly(delta_s, mtbf_s, parse_duration(args.interval, what="--interval") if args.interval else None)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print(plan.summary())
    return 0
