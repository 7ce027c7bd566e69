"""The story in the flow logs (issue 33): a replacement's run log says each side effect in one INFO line an operator
reads — cordoned, drained with the pods evicted and the grace period, the spare chosen and why, the job back at
full size — and no Python reprs. Read back through the Prefect API, as the UI shows them."""

from __future__ import annotations

import re

import pytest

from tests.fixtures.prefect import run_to_state
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect


def _logs(flow_run_id) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return [log.message for log in logs if log.level == 20]


def test_replacement_log_tells_each_side_effect_in_operator_words(prefect_server, remedy_on_sim):
    import time

    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    prevalidate_spares()
    inject(remedy_on_sim.cluster, "xid", "gpu003", gpu=3, code=79)
    state, out = run_to_state(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert out["status"] == "replaced", out
    spare = out["replacement"]
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(line.startswith("job ") for line in lines):
        time.sleep(1)  # logs reach the server in batches
        lines = _logs(state.state_details.flow_run_id)
    text = "\n".join(lines)
    assert re.search(r"^cordoned gpu003: ", text, re.M), text
    assert re.search(r"^drained gpu003: evicted \d+ pods? \(grace \d+ s\)", text, re.M), text
    assert re.search(rf"^chose {spare}: .*validated .* ago.* \(replaces gpu003\)$", text, re.M), text
    assert re.search(r"^job training/llm-pretrain back at 14/14", text, re.M), text
    # the quarantine, the spare's promotion and the lifecycle moves are side effects too: each says itself once
    for said in (r"tainted gpu003: \+remedy\.io/quarantine", r"gpu003: active → quarantined",
                 rf"untainted {spare}: -remedy\.io/spare", rf"labelled {spare}: remedy\.io/pool=active",
                 rf"{spare}: spare → active \(replaces gpu003\)", r"gpu003: quarantined → repair",
                 r"incident \d+: resolved \(replaced by " + spare + r"\)"):
        assert len(re.findall(rf"^{said}$", text, re.M)) == 1, (said, text)
    story = [line for line in lines if re.match(r"(cordoned|drained|chose|job|tainted|untainted|labelled|incident"
                                                r"|gpu\d+:) ", line)]
    for line in story:
        assert not re.search(r"[{}\[\]]|\w+\(|<\w+ object|datetime\.", line), line  # no Python reprs
