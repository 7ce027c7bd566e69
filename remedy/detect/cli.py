"""Subcommands of this area (see remedy/cli.py): `remedy xid explain`, `remedy signals parse`.

`remedy signals parse KIND FILE` shows what a file yields (signals, the verdict for each, and the count of
lines it could not read); it exits 1 when anything was unparsed so operators can script exporter checks.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from remedy.domain.durations import minutes as in_minutes
from remedy.domain.xid import NVLINK5_XIDS
from remedy.errors import RemedyError
from remedy.textinput import printable, read_input_file

PARSE_KINDS = ("dmesg", "dcgm", "alertmanager", "joblog")


def register(sub: argparse._SubParsersAction) -> None:
    xid = sub.add_parser("xid", help="NVIDIA XID catalog")
    xid_sub = xid.add_subparsers(dest="xid_command", metavar="SUBCOMMAND", required=True)
    explain = xid_sub.add_parser("explain", help="what an XID means and what gpu-remedy does about it")
    explain.add_argument("code", help="XID number, e.g. 79")
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.add_argument("--line", default="",
                         help="the kernel line (XID 144-150): decode its NVLink unit and subcode the way NVIDIA's "
                              "catalog does and say what gpu-remedy does about it")
    explain.set_defaults(func=_xid_explain)

    sig = sub.add_parser("signals", help="turn exporter/log output into signals")
    sig_sub = sig.add_subparsers(dest="signals_command", metavar="SUBCOMMAND", required=True)
    parse = sig_sub.add_parser("parse", help="show the signals and verdicts a file yields (exit 1 if lines were unparsed)")
    parse.add_argument("kind", choices=PARSE_KINDS, help="what the file is")
    parse.add_argument("file", help="path, or - for standard input")
    parse.add_argument("--json", action="store_true", help="machine-readable output")
    parse.add_argument("--node", help="node name when the input does not carry one (dmesg without prefix, job logs)")
    parse.add_argument("--year", type=_year, help="year for syslog time stamps that omit it (dmesg)")
    parse.add_argument(
        "--gpu-map", default="", help="PCI bus id → GPU index for dmesg, e.g. 0000:3b:00=3,0000:5e:00=4"
    )
    parse.set_defaults(func=_signals_parse)


def _xid_explain(args: argparse.Namespace) -> int:
    from remedy.domain.xid import explain, parse_xid

    try:
        info = explain(parse_xid(args.code))
    except ValueError as exc:
        raise RemedyError(str(exc)) from None
    info["triage"] = _triage_choice(info, getattr(args, "config", None))
    info["line"] = _line_reading(info["code"], getattr(args, "line", "") or "")
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(f"XID {info['code']}: {info['description']} ({info['name']})")
    print(f"  resolution:  {info['resolution']}" + (
        f" (NVIDIA catalog: {info['catalog_bucket']})" if info["catalog_bucket"] and info["catalog_bucket"] != info["resolution"] else ""))
    print(f"  path:        {info['path']} — {info['reason']}")
    print(f"  if it recurs: {info['recurrence_path']}")
    if info["triage"]:
        t = info["triage"]
        print(f"  triage:      {t['summary']}")
    if info["line"]:
        print(f"  this line:   {info['line']['path'] or info['path']} — {info['line']['explanation']}")
    elif info["code"] in NVLINK5_XIDS:
        print("  subcodes:    NVIDIA decodes each XID 144-150 line by its NVLink unit, subcode and error status, not by "
              "the word 'Fatal' in it: some need no recovery (gpu-remedy does not reset the GPU), some need a GPU "
              "reset, some wait for the XID 154 that follows. Pass the kernel line with --line to see which.")
    if info["investigatory"]:
        print(f"  investigate: {info['investigatory']}")
    confidence = {"seed-002": "field practice"}.get(info["confidence"], info["confidence"])
    print(f"  source:      {info['source']} (confidence: {confidence})")
    return 0


def _line_reading(code: int, line: str) -> dict[str, Any] | None:
    """What `--line` says for this XID: the path and the operator's sentence (None without a line)."""
    from remedy.detect.signals import explain_nvlink5

    if not line.strip():
        return None
    if code not in NVLINK5_XIDS:
        raise RemedyError(f"--line decodes XID 144-150 lines (NVLink5 subcodes); XID {code} has none")
    path, why = explain_nvlink5(printable(line, 2000), code)
    return {"path": path.value if path is not None else None, "explanation": why}


def _year(text: str) -> int:
    try:
        year = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a year") from None
    if not 1970 <= year <= 9999:
        raise argparse.ArgumentTypeError(f"a year is 1970..9999, got {year}")
    return year


def _triage_choice(info: dict[str, Any], config: str | None) -> dict[str, Any] | None:
    """What triage does with this XID, the way it decides it (remedy.remediate.choice, the catalog's prior odds,
    this config's durations): for an in-place fix, the choice with a spare ready and without one. None when the
    path is not an in-place fix (triage follows the path as it is)."""
    from remedy.config import load_settings
    from remedy.domain.xid import Resolution
    from remedy.remediate.choice import Durations, Situation, choose, odds_for

    settings = load_settings(config)
    if info["path"] not in ("reset-gpu", "reboot") or not settings.ladder.replace_first:
        return None
    resolution = Resolution(info["resolution"])
    durations = Durations(reload=settings.workload.reload_minutes)
    picks = {ready: choose(Situation(resolution=resolution, odds=odds_for(resolution, []), spare_ready=ready,
                                     durations=durations)) for ready in (True, False)}
    with_spare, without = picks[True], picks[False]

    def minutes(choice, option: str) -> str:
        return next(in_minutes(c.downtime_minutes) for c in choice.costs if c.option.value == option)

    fix = {"reboot": "reboots the node", "reset-gpu": "resets the GPU"}[info["path"]]
    if with_spare.option.value == "replace":
        summary = (f"with a validated spare ready it replaces first ({minutes(with_spare, 'replace')} expected job "
                   f"downtime vs {info['path']} {minutes(with_spare, info['path'])}), then {fix} off the critical "
                   f"path; with none ready, {without.option.value} in place")
    else:
        summary = f"{with_spare.option.value} in place, spare or not ({with_spare.reason})"
    return {"with_spare": with_spare.option.value, "without_spare": without.option.value, "summary": summary,
            "odds": "the catalog's prior; the fleet's recorded outcomes refine them"}


def _gpu_map(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        bus, sep, idx = item.rpartition("=")
        if not sep or not bus or not idx.isdigit():
            raise RemedyError(f"--gpu-map: expected BUS=INDEX, got {item!r}")
        out[bus] = int(idx)
    return out


def _signals_parse(args: argparse.Namespace) -> int:
    from remedy.config import load_settings
    from remedy.detect.signals import classify

    thresholds = load_settings(getattr(args, "config", None)).signals
    bus_to_gpu = _gpu_map(args.gpu_map)
    text = read_input_file(args.file, args.kind)
    summary: dict[str, Any]
    try:
        if args.kind == "dmesg":
            from remedy.detect.kernel_log import parse_kernel_log

            r = parse_kernel_log(text, node=args.node, bus_to_gpu=bus_to_gpu, year=args.year)
            signals, summary, bad = r.signals, r.summary(), r.unparsed
        elif args.kind == "dcgm":
            from remedy.detect.dcgm import parse_dcgm_metrics, signals_from_dcgm

            d = parse_dcgm_metrics(text)
            signals, summary, bad = signals_from_dcgm(d.samples, thresholds, node=args.node), d.summary(), d.unparsed
        elif args.kind == "alertmanager":
            from remedy.detect.alertmanager import parse_alertmanager

            b = parse_alertmanager(text, strict=False)
            signals, summary, bad = b.signals, b.summary(), len(b.problems)
        else:
            from remedy.detect.joblog import parse_job_log

            j = parse_job_log(text, node=args.node or "unknown")
            signals, summary, bad = j.signals, j.summary(), j.unparsed
    except ValueError as exc:
        raise RemedyError(f"{args.file}: {exc}") from None

    rows = [{"signal": s.to_dict(), "verdict": classify(s, thresholds).to_dict()} for s in signals]
    if args.json:
        print(json.dumps({"kind": args.kind, "file": args.file, "summary": summary, "signals": rows}, indent=2, default=str))
    else:
        print(f"{args.file} ({args.kind}): {len(signals)} signal(s); " + ", ".join(
            f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, str)) and k != "group_key"))
        for row in rows:
            s, v = row["signal"], row["verdict"]
            gpu = "" if s["gpu"] is None else f" gpu{s['gpu']}"
            xid = "" if s["xid"] is None else f" xid={s['xid']}"
            state = " (resolved)" if s["resolved"] else ""
            print(f"  {s['node']}{gpu} {s['kind']}{xid}{state} → {v['path']} [{v['severity']}, {v['rule']}] {v['explanation']}")
        for key in ("unparsed_samples", "problems"):
            for item in summary.get(key, []):
                where = f"line {item['line']}: {item['text']}" if isinstance(item, dict) else item
                print(f"  unparsed: {printable(str(where))}")
    return 1 if bad else 0
