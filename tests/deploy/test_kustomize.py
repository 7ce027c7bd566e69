"""The kustomize tree (deployments/kustomize) renders offline with kubectl into exactly what `remedy deploy render`
renders (one set of templates), the production overlay turns dry-run off, and the committed tree is current."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from remedy.cli import main
from remedy.production import Values, production_config, render_manifests
from remedy.production.kustomize import KUSTOMIZE_DIR, kustomize_tree


def _kubectl():
    kubectl = shutil.which("kubectl")
    if not kubectl:
        if os.environ.get("CI"):
            pytest.fail("kubectl not found (apt-get install kubernetes-client)")
        pytest.skip("kubectl not found")
    return kubectl


def _kustomize(overlay: str) -> list[dict]:
    out = subprocess.run([_kubectl(), "kustomize", str(KUSTOMIZE_DIR / overlay)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _key(d: dict) -> tuple[str, str, str]:
    return d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]


def _by_key(docs: list[dict]) -> dict:
    return {_key(d): json.dumps(d, sort_keys=True) for d in docs}


def test_committed_tree_is_what_the_generator_writes():
    stale = [rel for rel, text in kustomize_tree().items() if (KUSTOMIZE_DIR / rel).read_text() != text]
    assert stale == [], f"run `remedy deploy sync`: stale {stale}"


def test_kubectl_kustomize_base_equals_remedy_deploy_render(tmp_path, capsys):
    kustomized = _by_key(_kustomize("base"))
    assert main(["deploy", "render", "--out", str(tmp_path)]) == 0
    rendered = [d for d in yaml.safe_load_all((tmp_path / "gpu-remedy.yaml").read_text()) if d]
    assert kustomized == _by_key(rendered)
    assert ("Job", "gpu-remedy", "gpu-remedy-register-deployments") in kustomized


def _config(docs: list[dict]):
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == Values().config_map)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(cm["data"]["config.yaml"])
        return production_config(path)[1]


def test_dry_run_overlay_changes_nothing_and_production_goes_live():
    base, dry, live = _kustomize("base"), _kustomize("overlays/dry-run"), _kustomize("overlays/production")
    assert _config(dry).dry_run is True and _config(base).dry_run is True
    assert _config(live).dry_run is False
    assert {_key(d) for d in live} == {_key(d) for d in base}  # the same objects, only the config differs
    for d in dry:
        assert d["metadata"]["annotations"]["gpu-remedy.io/mode"] == "dry-run"
    image = Values().image
    images = {c["image"] for d in live if d["kind"] in ("Deployment", "Job")
              for c in d["spec"]["template"]["spec"]["containers"] if c["image"].startswith(image.rsplit(":", 1)[0])}
    assert images == {image}


def test_registration_job_mounts_the_prefect_yaml_that_render_writes(tmp_path, capsys):
    """Declarative registration: the Job runs `prefect deploy --all` on the rendered prefect.yaml, in-cluster."""
    docs = render_manifests(Values(namespace="gpu-x", work_pool="pool-x"))
    job = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == "gpu-remedy-register-deployments")
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-remedy-prefect-yaml")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:4] == ["prefect", "--no-prompt", "deploy", "--all"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PREFECT_API_URL"] == "http://prefect-server.gpu-x.svc:4200/api"
    assert main(["deploy", "render", "--set", "namespace=gpu-x", "--set", "work_pool=pool-x", "--out",
                 str(tmp_path)]) == 0
    assert cm["data"]["prefect.yaml"] == (tmp_path / "prefect.yaml").read_text()
    names = [d["name"] for d in yaml.safe_load(cm["data"]["prefect.yaml"])["deployments"]]
    assert "triage" in names and "replace-node" in names
