"""prefect.yaml is rendered from remedy.deployments (the list the embedded stack serves), with triggers and
schedules intact; the work pool's base job template renders a flow-run Job with our image, service account,
resources and config mount, in the shape prefect-kubernetes requires."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from remedy.deployments import DEPLOYMENTS, DeploymentSpec, EventTrigger, Schedule
from remedy.production import (
    PREFECT_YAML,
    ROOT,
    WORK_POOL_TEMPLATE,
    Values,
    _prefect_default_template,
    base_job_template,
    check_object,
    prefect_yaml,
    render_flow_run_job,
)

# prefect-kubernetes validates these paths (its _get_base_job_manifest); parallelism/completions under the pod
# spec are its quirk, which the API server ignores.
PREFECT_REQUIRED = {"restartPolicy": "Never", "parallelism": 1, "completions": 1}


def test_committed_prefect_yaml_is_current():
    assert PREFECT_YAML.read_text() == prefect_yaml(Values()), "run `remedy deploy sync`"


def test_committed_work_pool_template_is_current():
    assert json.loads(WORK_POOL_TEMPLATE.read_text()) == base_job_template(Values()), "run `remedy deploy sync`"


def test_every_deployment_is_in_prefect_yaml_on_the_work_pool():
    from prefect.cli.deploy._models import PrefectYamlModel

    doc = yaml.safe_load(PREFECT_YAML.read_text())
    model = PrefectYamlModel.model_validate(doc)
    assert [d.name for d in model.deployments] == [s.name for s in DEPLOYMENTS]
    for dep, spec in zip(model.deployments, DEPLOYMENTS):
        path, _, function = dep.entrypoint.partition(":")
        assert (ROOT / path).exists() and function == spec.function
        assert dep.work_pool.name == "gpu-remedy"
        assert tuple(dep.tags) == spec.tags
    pull = doc["pull"][0]["prefect.deployments.steps.set_working_directory"]["directory"]
    assert pull == "/opt/gpu-remedy"


def _specs_with_everything():
    trig = EventTrigger(expect=("remedy.x",), match={"prefect.resource.id": "remedy.node.*"},
                        parameters={"node": "{{ event.payload.get('node', '') }}", "event_id": "{{ event.id }}"},
                        name="x-starts-y")
    return (DeploymentSpec("y", "flows.triage:triage", "d", parameters={"level": "quick"}, triggers=(trig,),
                           tags=("remedy", "spares")),
            DeploymentSpec("z", "flows.replace_node:replace_node", schedules=(Schedule(600.0),
                                                                            Schedule(cron="0 3 * * *"))))


def test_triggers_and_schedules_survive_prefects_own_parsing(monkeypatch):
    from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule
    from prefect.cli.deploy._triggers import _initialize_deployment_triggers
    from prefect.events import DeploymentEventTrigger
    from prefect.utilities.templating import apply_values

    specs = _specs_with_everything()
    doc = yaml.safe_load(prefect_yaml(Values(), specs))
    y, z = doc["deployments"]
    # prefect deploy templates the whole file with the environment first; event templates must survive it
    y = apply_values(y, {"HOME": "/root"}, remove_notset=False)
    (trigger,) = _initialize_deployment_triggers("y", copy.deepcopy(y["triggers"]))
    assert isinstance(trigger, DeploymentEventTrigger)
    want = DeploymentEventTrigger(name="x-starts-y", expect={"remedy.x"},
                                  match={"prefect.resource.id": "remedy.node.*"},
                                  parameters=dict(specs[0].triggers[0].parameters))
    got, exp = trigger.model_dump(exclude={"id"}), want.model_dump(exclude={"id"})
    assert got == exp
    assert y["parameters"] == {"level": "quick"} and y["tags"] == ["remedy", "spares"]
    scheds = [_schedule_config_to_deployment_schedule(s) for s in z["schedules"]]
    assert scheds[0]["schedule"].interval.total_seconds() == 600
    assert scheds[1]["schedule"].cron == "0 3 * * *" and scheds[1]["schedule"].timezone == "UTC"


def test_the_embedded_trigger_and_the_production_trigger_are_the_same():
    """Same DeploymentSpec → same automation whether `remedy up` serves it or `prefect deploy` reads the YAML."""
    from prefect.cli.deploy._triggers import _initialize_deployment_triggers

    from remedy.deployments import runner_deployment

    doc = yaml.safe_load(PREFECT_YAML.read_text())
    for spec, dep in zip(DEPLOYMENTS, doc["deployments"]):
        if not spec.triggers:
            continue
        embedded = runner_deployment(spec).triggers
        production = _initialize_deployment_triggers(spec.name, copy.deepcopy(dep["triggers"]))
        assert [t.model_dump(exclude={"id"}) for t in production] == [t.model_dump(exclude={"id"}) for t in embedded]


def test_template_keeps_every_variable_of_prefects_default():
    ours, default = base_job_template(Values()), _prefect_default_template()
    assert set(default["variables"]["properties"]) <= set(ours["variables"]["properties"])
    assert set(default["job_configuration"]) == set(ours["job_configuration"])


def test_flow_run_job_renders_with_the_configured_image_and_service_account():
    values = Values(image="registry.local/gpu-remedy:7", service_account="remedy-runner", config_map="cfg",
                    secret="sec", flow_memory_limit="3Gi")
    job = render_flow_run_job(base_job_template(values), job_variables={"name": "replace-node"},
                              env={"PREFECT_API_URL": "http://prefect-server.gpu-remedy.svc:4200/api"})
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["name"] == "prefect-job" and c["image"] == "registry.local/gpu-remedy:7"
    assert pod["serviceAccountName"] == "remedy-runner"
    assert job["metadata"]["namespace"] == "gpu-remedy" and job["metadata"]["generateName"] == "replace-node-"
    assert c["resources"] == {"limits": {"memory": "3Gi"}, "requests": {"cpu": "250m", "memory": "512Mi"}}
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["PREFECT_API_URL"].endswith("/api") and env["REMEDY_CONFIG"] == "/etc/gpu-remedy/config.yaml"
    assert [e["name"] for e in c["env"]][0] == "PREFECT_API_URL"  # worker variables first, ours after
    assert c["envFrom"] == [{"secretRef": {"name": "sec"}}]
    assert pod["volumes"] == [{"name": "config", "configMap": {"name": "cfg"}}]
    assert c["volumeMounts"][0]["mountPath"] == "/etc/gpu-remedy"
    assert {k: pod[k] for k in PREFECT_REQUIRED} == PREFECT_REQUIRED
    problems = check_object(job)
    assert problems == [f"Job ?: unknown field .spec.template.spec.{k}" for k in ("parallelism", "completions")]


def test_deployment_job_variables_override_the_pool_defaults():
    job = render_flow_run_job(base_job_template(Values()), job_variables={"image": "other:1", "memory_limit": "8Gi"})
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "other:1" and c["resources"]["limits"]["memory"] == "8Gi"


def test_job_cli_prints_the_manifest(capsys):
    from remedy.cli import main

    assert main(["deploy", "job", "replace-node", "--json", "--set", "image=r/x:2"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "r/x:2"
    assert main(["deploy", "job", "no-such-flow"]) == 2
    assert "no deployment named 'no-such-flow'" in capsys.readouterr().err
