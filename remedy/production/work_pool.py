"""The Kubernetes work pool (base job template, and the Job it renders for a flow run) and `prefect.yaml`, both
from the same definitions the embedded stack serves (`remedy.deployments.DEPLOYMENTS`)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from remedy.production.values import CODE_DIR, CONFIG_DIR, CONFIG_PATH, GENERATED, PREFECT_VERSION, Values


def _prefect_default_template() -> dict:
    """Prefect's own default Kubernetes base job template (bundled with prefect; no prefect-kubernetes needed)."""
    import importlib.util

    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        raise ImportError("prefect is not installed")
    path = Path(spec.origin).parent / "server/api/collections_data/views/aggregate-worker-metadata.json"
    template: dict = json.loads(path.read_text())["prefect-kubernetes"]["kubernetes"]["default_base_job_configuration"]
    return template


def base_job_template(values: Values) -> dict:
    """Prefect's default template + our image, service account, resources, config mount and secrets."""
    t = copy.deepcopy(_prefect_default_template())
    props = t["variables"]["properties"]
    defaults = {"image": values.image, "service_account_name": values.service_account, "namespace": values.namespace,
                "image_pull_policy": values.image_pull_policy, "finished_job_ttl": values.finished_job_ttl,
                "cpu_request": values.flow_cpu_request, "memory_request": values.flow_memory_request,
                "memory_limit": values.flow_memory_limit}
    for key, value in defaults.items():
        props[key]["default"] = value
    props["config_map"] = {"title": "gpu-remedy config", "type": "string", "default": values.config_map,
                           "description": f"ConfigMap with config.yaml, mounted at {CONFIG_DIR} (REMEDY_CONFIG)."}
    props["secret"] = {"title": "gpu-remedy secrets", "type": "string", "default": values.secret,
                       "description": "Secret loaded as environment (REMEDY_DB_URL, tokens)."}
    pod = t["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # A literal env list: the worker prepends its own variables (PREFECT_API_URL, flow-run id) to it.
    container["env"] = [{"name": "REMEDY_CONFIG", "value": CONFIG_PATH}, {"name": "PYTHONPATH", "value": CODE_DIR}]
    container["envFrom"] = [{"secretRef": {"name": "{{ secret }}"}}]
    container["volumeMounts"] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    container["securityContext"] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": False}
    pod["volumes"] = [{"name": "config", "configMap": {"name": "{{ config_map }}"}}]
    pod["securityContext"] = {"runAsNonRoot": True, "runAsUser": 10001}
    return t


def render_flow_run_job(template: dict, job_variables: dict | None = None, env: dict | None = None) -> dict:
    """The Job manifest the Kubernetes worker would create for a flow run (Prefect's own templating, then the
    worker's env merge): a preview for operators and the check that the template renders."""
    from prefect.utilities.templating import apply_values

    variables = {k: v["default"] for k, v in template["variables"]["properties"].items() if "default" in v}
    variables.update(job_variables or {})
    variables.setdefault("env", {})
    variables["env"] = {**variables["env"], **(env or {})}
    config = apply_values(copy.deepcopy(template["job_configuration"]), variables, remove_notset=True)
    manifest = config["job_manifest"]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": k, "value": str(v)} for k, v in config.get("env", {}).items()] + container["env"]
    out: dict = manifest
    return out


# ---------------------------------------------------------------------- prefect.yaml
def _file_entrypoint(entrypoint: str) -> str:
    module, _, function = entrypoint.partition(":")
    return f"{module.replace('.', '/')}.py:{function}"


def prefect_yaml(values: Values, specs: tuple | None = None) -> str:
    """Every deployment of remedy.deployments on the Kubernetes work pool, triggers and schedules intact."""
    from remedy.deployments import DEPLOYMENTS

    deployments = []
    for spec in DEPLOYMENTS if specs is None else specs:
        d: dict[str, Any] = {"name": spec.name, "entrypoint": _file_entrypoint(spec.entrypoint),
                             "description": spec.description or None, "tags": list(spec.tags),
                             "parameters": dict(spec.parameters), "work_pool": "__WORK_POOL__"}
        d["schedules"] = [({"interval": s.interval_seconds} if s.interval_seconds else {"cron": s.cron, "timezone": "UTC"})
                          | {"active": True} for s in spec.schedules]
        d["triggers"] = [{"type": "event", "name": t.name or f"{spec.name}__automation_{i}", "enabled": True,
                          "posture": "Reactive", "threshold": 1, "within": 0, "expect": list(t.expect),
                          "match": dict(t.match), "parameters": dict(t.parameters)}
                         for i, t in enumerate(spec.triggers, start=1)]
        deployments.append({k: v for k, v in d.items() if v is not None and v != [] or k == "parameters"})
    head = {"name": "gpu-remedy", "prefect-version": PREFECT_VERSION, "build": None, "push": None,
            "pull": [{"prefect.deployments.steps.set_working_directory": {"directory": CODE_DIR}}],
            "definitions": {"work_pools": {"kubernetes": "__POOL_DEF__"}}}
    pool = {"name": values.work_pool, "work_queue_name": "default", "job_variables": {}}
    text = yaml.safe_dump(head, sort_keys=False) + yaml.safe_dump({"deployments": deployments}, sort_keys=False, width=120)
    pool_text = yaml.safe_dump(pool, sort_keys=False).strip().replace("\n", "\n      ")
    text = text.replace("kubernetes: __POOL_DEF__", f"kubernetes: &kubernetes\n      {pool_text}")
    return GENERATED + text.replace("work_pool: __WORK_POOL__", "work_pool: *kubernetes")
