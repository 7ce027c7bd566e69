"""gpu-remedy in production: Kubernetes manifests, the Prefect work pool and `prefect.yaml`, rendered from one set of
values and checked against the code they must match.

    remedy deploy render --values my-values.yaml --config prod.yaml --out out/   # everything an install needs
    remedy deploy job replace-node                                            # the Job a flow run would get
    remedy deploy checks --level extended                                     # the health-check Jobs, for review
    remedy deploy rbac                                                        # permissions the adapter uses
    remedy deploy sync                                                        # refresh the committed defaults

Three facts have one source each:
- the deployments (entrypoints, triggers, schedules, tags) come from `remedy.deployments.DEPLOYMENTS`, the list the
  embedded stack serves, so switching stack is configuration, not code;
- the RBAC the manifests grant must equal what `remedy/adapters/kubernetes.py` calls through the official client:
  `adapter_permissions()` parses the adapter with `ast` and `check_rbac()` compares; render refuses a mismatch;
- thresholds stay in the operator's gpu-remedy config (`RemedySettings`), shipped verbatim in a ConfigMap.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml
from pydantic import ValidationError

from remedy.cli_args import writable_dir
from remedy.errors import RemedyError
from remedy.production.rbac import (  # noqa: F401 — the package's public API
    Permission,
    adapter_permissions,
    check_rbac,
    client_calls,
    event_namespace,
    granted_permissions,
    permission_for,
)
from remedy.production.schema import check_object  # noqa: F401
from remedy.production.values import (  # noqa: F401
    ADAPTER_SOURCE,
    CODE_DIR,
    CONFIG_DIR,
    CONFIG_PATH,
    DEFAULT_VALUES,
    K8S_TEMPLATES,
    PREFECT_YAML,
    ROOT,
    WORK_POOL_TEMPLATE,
    Values,
    load_values,
    values_yaml,
)
from remedy.production.work_pool import (  # noqa: F401
    _prefect_default_template,
    base_job_template,
    prefect_yaml,
    render_flow_run_job,
)

DEFAULT_CONFIG = """\
# gpu-remedy configuration (remedy.config.RemedySettings; every key documented there). Dry-run first: set
# dry_run to false once the runs in the Prefect UI show the plans you expect (docs/operations.md).
dry_run: true
cluster:
  mode: in-cluster
"""


def production_config(config: str | Path | None = None):
    """(text, settings) of the gpu-remedy config shipped in the ConfigMap, validated from the file alone (this
    machine's REMEDY_* variables must not leak into what the cluster gets). Default: in-cluster and dry-run."""
    from remedy.config import ClusterMode, ConfigError, RemedySettings, _first_error

    if config is None:
        text = DEFAULT_CONFIG
    else:
        p = Path(config)
        if not p.exists():
            raise RemedyError(f"config file not found: {p}")
        text = p.read_text()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{config}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{config}: top level must be a mapping of sections")
    try:
        settings = RemedySettings(**data)
    except ValidationError as exc:
        raise ConfigError(_first_error(exc)) from None
    if settings.cluster.mode is not ClusterMode.IN_CLUSTER:
        raise RemedyError(f"config: cluster.mode must be in-cluster for production (got {settings.cluster.mode.value})")
    return text, settings


def render_manifests(values: Values, config: str | Path | None = None) -> list[dict]:
    """Every Kubernetes object of an install, in apply order; refuses RBAC that differs from the adapter's calls."""
    import jinja2

    text, settings = production_config(config)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(K8S_TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=True)
    env.filters["json"] = lambda v: json.dumps(v)
    env.filters["indent_block"] = lambda v, n: ("\n" + " " * n).join(str(v).rstrip("\n").split("\n"))
    ctx = {"v": values, "settings": settings, "config_text": text, "config_path": CONFIG_PATH, "config_dir": CONFIG_DIR,
           "events_namespace": event_namespace(), "code_dir": CODE_DIR,
           "base_job_template": json.dumps(base_job_template(values), indent=2)}
    docs: list[dict] = []
    for name in sorted(p.name for p in K8S_TEMPLATES.glob("*.yaml.j2")):
        rendered = env.get_template(name).render(**ctx)
        try:
            docs += [d for d in yaml.safe_load_all(rendered) if d]
        except yaml.YAMLError as exc:
            raise RemedyError(f"{name}: rendered YAML is invalid: {exc}") from None
    problems = check_rbac(docs, values.service_account)
    if problems:
        raise RemedyError("RBAC does not match remedy/adapters/kubernetes.py: " + "; ".join(problems))
    return docs


EXAMPLE_NODE, EXAMPLE_GROUP = "NODE", ("NODE-A", "NODE-B")


def health_check_jobs(config: str | Path | None = None, level: str = "extended") -> list[dict]:
    """The Jobs a burn-in at `level` creates, for review before an install: each check's image, command, GPU
    request, node affinity and tolerations exactly as the flows render them (templates/node-job.yaml.j2), on an
    example node NODE (the multi-node sweep on the group NODE-A, NODE-B). Not applied: the flows create them."""
    from remedy.adapters.kubernetes import render_node_job
    from remedy.health import suite_for
    from remedy.health.jobs import check_job

    _, settings = production_config(config)
    jobs = []
    for spec in suite_for(level, settings.health):
        nodes = list(EXAMPLE_GROUP) if spec.multi_node else [EXAMPLE_NODE]
        name = f"{spec.id}-{'group' if spec.multi_node else 'node'}"
        jobs.append(render_node_job(check_job(spec, name=name, nodes=nodes, settings=settings.health), settings))
    return jobs


def alertmanager_snippet(values: Values) -> str:
    url = f"http://gpu-remedy-receiver.{values.namespace}.svc:{values.receiver_port}/v1/alerts/alertmanager"
    return (K8S_TEMPLATES.parent / "alertmanager-receiver.yaml").read_text().replace("{{ receiver_url }}", url)


def dump_all(docs: list[dict]) -> str:
    return "".join("---\n" + yaml.safe_dump(d, sort_keys=False, width=120) for d in docs)


# ---------------------------------------------------------------------- CLI
def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="production: render Kubernetes manifests, work pool and prefect.yaml")
    dsub = p.add_subparsers(dest="deploy_command", metavar="SUBCOMMAND")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--values", help="values YAML (deployments/k8s/values.yaml documents every key)")
        q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one value")
        q.add_argument("--json", action="store_true", help="machine-readable output")

    r = dsub.add_parser("render", help="render manifests (+ alertmanager snippet, work pool, prefect.yaml with --out)")
    common(r)
    r.add_argument("--out", type=writable_dir, help="write files into this directory instead of printing the manifests")
    r.set_defaults(func=_render)
    j = dsub.add_parser("job", help="the Kubernetes Job a flow run of DEPLOYMENT gets from the work pool")
    common(j)
    j.add_argument("deployment")
    j.set_defaults(func=_job)
    c = dsub.add_parser("checks", help="the health-check Jobs a burn-in creates (images, GPUs, affinity), for review")
    c.add_argument("--level", default="extended", choices=["quick", "standard", "extended"])
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_checks)
    b = dsub.add_parser("rbac", help="permissions the Kubernetes adapter uses, derived from its code")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_rbac)
    s = dsub.add_parser("sync", help="rewrite deployments/prefect.yaml and the work-pool template (default values)")
    s.set_defaults(func=_sync)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _render(args: argparse.Namespace) -> int:
    values = load_values(args.values, args.set)
    docs = render_manifests(values, args.config or os.environ.get("REMEDY_CONFIG"))
    if not args.out:
        print(json.dumps(docs, indent=2) if args.json else dump_all(docs), end="")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = args.config or os.environ.get("REMEDY_CONFIG")
    files = {"gpu-remedy.yaml": dump_all(docs), "alertmanager-receiver.yaml": alertmanager_snippet(values),
             "base-job-template.json": json.dumps(base_job_template(values), indent=2) + "\n",
             "prefect.yaml": prefect_yaml(values),
             # for review, not for kubectl apply: the flows create these Jobs on the nodes they validate
             "health-check-jobs.yaml": dump_all(health_check_jobs(config))}
    for name, text in files.items():
        (out / name).write_text(text)
    summary = {"out": str(out), "files": sorted(files), "objects": [f"{d['kind']}/{d['metadata']['name']}" for d in docs]}
    print(json.dumps(summary) if args.json else "\n".join(str(out / f) for f in sorted(files)))
    return 0


def _job(args: argparse.Namespace) -> int:
    from remedy.deployments import by_name

    spec = by_name(args.deployment)
    values = load_values(args.values, args.set)
    manifest = render_flow_run_job(base_job_template(values), env={"PREFECT_API_URL": _api_url(values)},
                                   job_variables={"name": spec.name})
    print(json.dumps(manifest, indent=2) if args.json else yaml.safe_dump(manifest, sort_keys=False), end="")
    return 0


def _checks(args: argparse.Namespace) -> int:
    jobs = health_check_jobs(args.config or os.environ.get("REMEDY_CONFIG"), args.level)
    print(json.dumps(jobs, indent=2) if args.json else dump_all(jobs), end="")
    return 0


def _api_url(values: Values) -> str:
    return f"http://prefect-server.{values.namespace}.svc:{values.prefect_port}/api"


def _rbac(args: argparse.Namespace) -> int:
    calls = client_calls()
    rows = sorted((permission_for(c, m), f"self.{c}.{m}", lines) for (c, m), lines in calls.items())
    if args.json:
        print(json.dumps([{"api_group": p.api_group, "resource": p.resource, "verb": p.verb, "call": call,
                           "lines": lines} for p, call, lines in rows]))
    else:
        for p, call, lines in rows:
            print(f"{p.resource + ('.' + p.api_group if p.api_group else ''):<22}{p.verb:<8}{call} "
                  f"(line {', '.join(map(str, lines))})")
    return 0


def _sync(args: argparse.Namespace) -> int:
    values = Values()
    DEFAULT_VALUES.write_text(values_yaml())
    PREFECT_YAML.write_text(prefect_yaml(values))
    WORK_POOL_TEMPLATE.parent.mkdir(parents=True, exist_ok=True)
    WORK_POOL_TEMPLATE.write_text(json.dumps(base_job_template(values), indent=2) + "\n")
    print(f"{DEFAULT_VALUES}\n{PREFECT_YAML}\n{WORK_POOL_TEMPLATE}")
    return 0


if __name__ == "__main__":
    from remedy.cli import main

    sys.exit(main(["deploy", *sys.argv[1:]]))
