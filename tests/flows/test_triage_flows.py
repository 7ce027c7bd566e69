"""Triage starts each remediation path's flow through a typed path → flow function (no flow looked up by a name
string); the explanation names the same flow (triage_policy.PATH_FLOWS). Plain Python: no Prefect server."""

from __future__ import annotations

import pytest

from flows.triage import remediation_flow
from remedy.domain.xid import RemediationPath
from remedy.receiver.triage_policy import PATH_FLOWS


@pytest.mark.parametrize("path", list(PATH_FLOWS))
def test_each_path_starts_the_flow_its_explanation_names(path: RemediationPath) -> None:
    fn = remediation_flow(path)
    entrypoint, _ = PATH_FLOWS[path]
    assert f"{fn.fn.__module__}:{fn.fn.__name__}" == entrypoint


@pytest.mark.parametrize("path", [p for p in RemediationPath if p not in PATH_FLOWS])
def test_a_path_without_a_flow_goes_to_a_person(path: RemediationPath) -> None:
    assert remediation_flow(path).name == "escalate"
