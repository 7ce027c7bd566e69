"""`remedy probe` and `remedy health parse|suite` (see remedy/cli.py).

    remedy probe [--json] [--expect-gpus 8] [--expect-model NAME]     exit 0 pass, 1 fail, 2 cannot probe
    remedy health parse {dcgm-diag,nccl,nvidia-smi,ibstat,fio,stress} FILE... [--json] [--gpu-model M]
                        [--fabric F] [--expect-gpus N] [--counters DIR]
                        exit 0 pass/warn, 1 fail or incomplete (output cut short: says what is missing), 2 unreadable
    remedy health suite {quick,standard,extended} [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from remedy.cli_args import non_negative_float, positive_int
from remedy.domain.durations import human_duration
from remedy.errors import RemedyError
from remedy.textinput import read_input_file

PARSE_KINDS = {"dcgm-diag": "dcgm-diag", "nccl": "nccl", "nvidia-smi": "nvidia-smi", "ibstat": "ib",
               "fio": "fio", "stress": "stress"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="probe this node's GPUs through NVML and judge them")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--expect-gpus", type=positive_int, help="GPUs this node should have (default: health.gpus_per_node)")
    p.add_argument("--expect-model", help="GPU product name expected (default: health.gpu_model)")
    p.add_argument("--xid-wait", type=non_negative_float, help="seconds to listen for XID events (default: health.probe.xid_wait_seconds)")
    p.add_argument("--nvml", help="NVML backend: pynvml or fake:<health.json> (default $REMEDY_NVML, else pynvml)")
    p.set_defaults(func=_probe)

    h = sub.add_parser("health", help="health-check parsers and suites")
    hs = h.add_subparsers(dest="health_command", metavar="SUBCOMMAND")
    pp = hs.add_parser("parse", help="parse a check's tool output and show the verdict under the configured criteria")
    pp.add_argument("kind", choices=sorted(PARSE_KINDS), help="which tool printed the file")
    pp.add_argument("files", nargs="+", metavar="FILE", help="tool output ('-' for stdin); several nccl runs give a p95")
    pp.add_argument("--json", action="store_true", help="print the CheckResult as JSON")
    pp.add_argument("--gpu-model", help="GPU model for the NCCL criteria / nvidia-smi check (default: health.gpu_model)")
    pp.add_argument("--fabric", help="fabric for the NCCL criteria profile (default: health.fabric)")
    pp.add_argument("--expect-gpus", type=positive_int, help="nvidia-smi/stress: GPUs expected (default: health.gpus_per_node)")
    pp.add_argument("--counters", help="ibstat: sysfs-like directory of IB counters (<dev>/ports/<n>/counters/*)")
    pp.set_defaults(func=_parse)
    ps = hs.add_parser("suite", help="list the checks a validation level runs")
    ps.add_argument("level", choices=["quick", "standard", "extended"])
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(func=_suite)


def _settings(args: argparse.Namespace) -> Any:
    from remedy.config import load_settings
    from remedy.probe.nvml import ENV_VAR

    # REMEDY_NVML selects the NVML backend, it is not a config field; hide it from the REMEDY_* layer.
    saved = os.environ.pop(ENV_VAR, None)
    try:
        return load_settings(getattr(args, "config", None))
    finally:
        if saved is not None:
            os.environ[ENV_VAR] = saved


def _probe(args: argparse.Namespace) -> int:
    from remedy.probe import ExpectedNode, ProbeUnavailable, probe_node
    from remedy.probe.nvml import load

    settings = _settings(args)
    expected = ExpectedNode.from_settings(settings.health, gpu_count=args.expect_gpus, gpu_model=args.expect_model)
    try:
        report = probe_node(expected, load(args.nvml), settings.health.probe, xid_wait_seconds=args.xid_wait)
    except ProbeUnavailable as exc:
        if args.json:
            print(json.dumps({"verdict": "error", "error": str(exc)}))
        print(f"remedy: error: cannot probe: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(f"probe: {report.verdict.value.upper()}  driver {report.driver_version}, {len(report.gpus)} GPU(s)")
        for f in report.problems():
            print(f"  {f.verdict.value:4}  {f.subject}: {f.message or f.item}  [{f.threshold}]")
    return 1 if report.verdict.value == "fail" else 0


def _parse(args: argparse.Namespace) -> int:
    from remedy.health import ib, load, nccl, smi
    from remedy.health.suite import parse_check_output

    settings = _settings(args)
    h = settings.health
    texts = [read_input_file(f, f"{args.kind} output") for f in args.files]
    if args.counters and not Path(args.counters).is_dir():
        raise RemedyError(f"--counters {args.counters}: not a directory (expected <dev>/ports/<n>/counters/*)")
    kind = PARSE_KINDS[args.kind]
    if kind == "nccl":
        result = nccl.check_nccl(texts, h.nccl_criteria_for(args.gpu_model, args.fabric),
                                 require_all_sizes=h.nccl_require_all_sizes)
    elif len(texts) != 1:
        raise RemedyError(f"{args.kind}: give one file (several files are only meaningful for nccl)")
    elif kind == "ib":
        result = ib.check_ib(texts[0], h.ib, counters=args.counters, expected_ports=h.ib_ports_per_node)
    elif kind == "nvidia-smi":
        result = smi.check_nvidia_smi(texts[0], h, expect_gpus=args.expect_gpus, expect_model=args.gpu_model)
    elif kind == "stress":
        result = load.check_stress(texts[0], h.stress, h.probe, expect_gpus=args.expect_gpus or h.gpus_per_node)
    else:
        result = parse_check_output(kind, texts[0], h, gpu_model=args.gpu_model, fabric=args.fabric)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        # INCOMPLETE: the output lacks what a verdict needs (judged as a fail, exit 1); the lines say what is missing
        print(f"{result.check}: {result.status.upper()}")
        for r in result.reasons:
            print(f"  - {r}")
        for k, v in result.measurements.items():
            if not isinstance(v, (dict, list)):
                print(f"  {k}: {v}")
        if kind == "nccl":
            for size, m in result.measurements["sizes"].items():
                print(f"  {nccl.human_size(int(size)):>7}: p95 {m['p95_latency_us']:g} us, BusBW {m['busbw_gbps']:g} GB/s")
    return 1 if result.verdict.value == "fail" else 0


def _suite(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from remedy.health.suite import suite_for

    specs = suite_for(args.level, _settings(args).health)
    if args.json:
        print(json.dumps([asdict(s) for s in specs], indent=2))
    else:
        for s in specs:
            flags = " ".join(f for f, on in (("privileged", s.privileged), ("multi-node", s.multi_node)) if on)
            print(f"{s.id:18} check={s.check:11} timeout={human_duration(s.timeout_seconds):>7} {flags:20} {' '.join(s.command)}")
    return 0
