"""The early-warning scan flow over real servers (issue 15, item 3: thermal and InfiniBand-downtime warnings reach
triage, not only remap acceleration): real node_exporter (infiniband collector over a sysfs tree laid out as the
kernel does: ports/<n>/state "4: ACTIVE") and a dcgm-exporter-format endpoint, scraped by a real Prometheus; the flow
reads them over the HTTP API and posts its findings to a real Alertmanager, whose webhook the receiver's own parser
reads. The job is the simulator's training Job: its nodes are the only peers, the idle spares are not."""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path

import httpx
import pytest

from remedy.detect.alertmanager import parse_alertmanager
from remedy.detect.signals import SignalKind
from tests.fixtures.http_stub import StubServer
from tests.fixtures.prefect import run_to_state
from tests.fixtures.prometheus import run_alertmanager, run_node_exporter, run_prometheus
from tests.flows.test_triage import fleet  # noqa: F401 - a fixture

pytestmark = [pytest.mark.prefect, pytest.mark.servers]


def _dcgm_page(temps: dict[str, float]) -> str:
    """DCGM_FI_DEV_GPU_TEMP per node and GPU in dcgm-exporter's text format."""
    lines = ["# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for node, t in sorted(temps.items()):
        for g in range(2):
            lines.append(f'DCGM_FI_DEV_GPU_TEMP{{gpu="{g}",UUID="GPU-{node}-{g}",Hostname="{node}"}} {t - 2 * g:g}')
    return "\n".join(lines) + "\n"


def _ib_sysfs(root: Path, devices: list[str]) -> Path:
    for dev in devices:
        port = root / "class" / "infiniband" / dev / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        (root / "class" / "infiniband" / dev / "board_id").write_text("MT_0000000838\n")
        (root / "class" / "infiniband" / dev / "fw_ver").write_text("28.39.1002\n")
        (port / "state").write_text("4: ACTIVE\n")
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
        (port / "link_layer").write_text("InfiniBand\n")
    return root


def _set_state(root: Path, dev: str, state: str) -> None:
    path = root / "class" / "infiniband" / dev / "ports" / "1" / "state"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state + "\n")
    tmp.replace(path)


def test_thermal_and_infiniband_warnings_reach_alertmanager_and_the_receiver(prefect_server, fleet, tmp_path,
                                                                             monkeypatch):
    from flows.warning_scan import warning_scan
    from remedy import runtime

    job_nodes = runtime.cluster().workload_nodes("training", "llm-pretrain")
    spares = sorted({n.name for n in runtime.cluster().list_gpu_nodes()} - set(job_nodes))
    assert len(job_nodes) >= 8 and spares
    hot, flappy = job_nodes[3], job_nodes[5]
    temps = {n: 76.0 + (i % 3) for i, n in enumerate(job_nodes)} | {n: 34.0 for n in spares}
    dcgm = StubServer(lambda: _dcgm_page(temps))
    sysfs = _ib_sysfs(tmp_path / "sys", ["mlx5_0", "mlx5_1"])
    try:
        with run_node_exporter(tmp_path / "proc", args=[f"--path.sysfs={sysfs}"], collectors=["infiniband"]) as ne, \
                run_alertmanager({"route": {"receiver": "hook", "group_wait": "0s", "group_interval": "1s",
                                            "group_by": ["Hostname", "gpu", "alertname"]},
                                  "receivers": [{"name": "hook", "webhook_configs": [{"url": dcgm.url + "/hook"}]}]},
                                 tmp_path) as am:
            prom_cfg = {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "dcgm", "honor_labels": True,
                     "static_configs": [{"targets": [dcgm.url.removeprefix("http://")]}]},
                    # node_exporter on `flappy`: instance is the node's name, as a real scrape config relabels it
                    {"job_name": "node", "static_configs": [{"targets": [ne.removeprefix("http://")]}],
                     "relabel_configs": [{"target_label": "instance", "replacement": f"{flappy}:9100"}]},
                ],
            }
            with run_prometheus(prom_cfg, tmp_path) as prom:
                for key, value in {"PROMETHEUS_URL": prom, "ALERTMANAGER_URL": am, "STEP_SECONDS": "1",
                                   "IB_STEP_SECONDS": "1", "WINDOW_MINUTES": "2",
                                   "PEER_QUERIES": json.dumps({"gpu_temperature_max_c":
                                                               "max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)"})}.items():
                    monkeypatch.setenv(f"REMEDY_LEMON__EARLY_WARNING__SCAN__{key}", value)
                runtime.reset()
                time.sleep(4)  # healthy history first
                temps[hot] = 101.0  # cooling failing: ~24 °C above the job's other nodes
                _set_state(sysfs, "mlx5_0", "1: DOWN")  # one port goes down for ~5 s: past half of NCCL's ~7 s
                time.sleep(5)
                _set_state(sysfs, "mlx5_0", "4: ACTIVE")
                time.sleep(4)

                state, out = run_to_state(warning_scan, dry_run=False)
                assert state.is_completed(), (state, out)
                found = {(f["node"], f["detector"], f["component"] if f["detector"] == "ib-downtime" else "")
                         for f in out["findings"]}
                assert found == {(hot, "peer-outlier", ""), (flappy, "ib-downtime", "mlx5_0/1")}, out
                assert not {f["node"] for f in out["findings"]} & set(spares)  # idle spares are not the job's peers
                assert out["posted"] == 2 and "stragglers not scanned" in " ".join(out["not_scanned"])

                # Alertmanager holds them and delivers them; the receiver's parser reads early warnings
                signals = []
                deadline = time.monotonic() + 20
                while len({s.node for s in signals}) < 2 and time.monotonic() < deadline:
                    try:
                        signals += parse_alertmanager(dcgm.posts.get(timeout=1)[1]).signals
                    except queue.Empty:
                        pass
                assert {(s.kind, s.node, s.labels["detector"]) for s in signals} == {
                    (SignalKind.EARLY_WARNING, hot, "peer-outlier"), (SignalKind.EARLY_WARNING, flappy, "ib-downtime")}

                # the next scan posts the same findings again: still two alerts, not four
                state, out = run_to_state(warning_scan, dry_run=False)
                assert out["posted"] == 2
                held = httpx.get(am + "/api/v2/alerts", params={"filter": "alertname=GpuEarlyWarning"}).json()
                assert sorted(a["labels"]["Hostname"] for a in held) == sorted([hot, flappy])
    finally:
        dcgm.close()


def test_a_dry_run_posts_nothing_and_a_dead_prometheus_is_one_clear_line(prefect_server, fleet, monkeypatch):
    from flows.warning_scan import warning_scan
    from remedy import runtime
    from tests.fixtures.prometheus import free_port

    monkeypatch.setenv("REMEDY_LEMON__EARLY_WARNING__SCAN__PROMETHEUS_URL", f"http://127.0.0.1:{free_port()}")
    runtime.reset()
    state, _ = run_to_state(warning_scan, dry_run=True)
    assert state.is_failed()
    assert "the early-warning scan reads dcgm-exporter and node_exporter through Prometheus; set " \
        "lemon.early_warning.scan.prometheus_url" in state.message, state.message
    assert "Traceback" not in state.message


def test_without_alertmanager_the_findings_reach_the_receiver_once(prefect_server, fleet, tmp_path, monkeypatch):
    """`remedy up` runs no Alertmanager, so it points the scan at its own receiver (lemon.early_warning.scan.
    receiver_url): the findings go there as one webhook group with the receiver's token; the receiver opens one
    early-warning incident per finding, and the next scan's re-post of the same finding is the same incident."""
    from flows.warning_scan import warning_scan
    from remedy import runtime
    from remedy.receiver.server import ReceiverServer, build_receiver

    job_nodes = runtime.cluster().workload_nodes("training", "llm-pretrain")
    hot = job_nodes[2]
    temps = {n: 70.0 + (i % 3) for i, n in enumerate(job_nodes)}
    dcgm = StubServer(lambda: _dcgm_page(temps))
    monkeypatch.setenv("REMEDY_RECEIVER__TOKEN", "t" * 32)
    runtime.reset()
    receiver = ReceiverServer(build_receiver(runtime.settings(), runtime.ledger(), api_url=None)).start()
    try:
        prom_cfg = {"global": {"scrape_interval": "1s"},
                    "scrape_configs": [{"job_name": "dcgm", "honor_labels": True,
                                        "static_configs": [{"targets": [dcgm.url.removeprefix("http://")]}]}]}
        with run_prometheus(prom_cfg, tmp_path) as prom:
            for key, value in {"PROMETHEUS_URL": prom, "RECEIVER_URL": receiver.alerts_url, "STEP_SECONDS": "1",
                               "WINDOW_MINUTES": "2",
                               "PEER_QUERIES": json.dumps({"gpu_temperature_max_c":
                                                           "max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)"})}.items():
                monkeypatch.setenv(f"REMEDY_LEMON__EARLY_WARNING__SCAN__{key}", value)
            runtime.reset()
            time.sleep(4)
            temps[hot] = 98.0
            time.sleep(4)
            for _ in range(2):  # the second scan re-posts the same finding
                state, out = run_to_state(warning_scan, dry_run=False)
                assert state.is_completed() and out["posted"] == 1, (state, out)
            warned = [i for i in runtime.ledger().incidents(node=hot) if i.signal == "early-warning"]
            assert len(warned) == 1 and warned[0].evidence["labels"]["detector"] == "peer-outlier", warned
            assert warned[0].count == 2  # the re-post, de-duplicated by the receiver
    finally:
        receiver.stop()
        dcgm.close()


def test_a_dead_or_refusing_receiver_is_one_clear_line(prefect_server, fleet, monkeypatch):
    """The post to the receiver (no Alertmanager): nothing listening is a transient error the task retries, with
    the address in its line; a receiver that refuses the token is not retried and says what the receiver said."""
    from remedy import runtime
    from remedy.errors import RemedyError
    from remedy.receiver.server import ReceiverServer, build_receiver
    from tasks.warnings import AlertmanagerUnavailable, post_warnings_to_receiver
    from tests.fixtures.prometheus import free_port

    finding = [{"labels": {"alertname": "GpuEarlyWarning", "Hostname": "gpu003", "detector": "peer-outlier"},
                "annotations": {"summary": "gpu003 runs hot"}}]
    dead = f"http://127.0.0.1:{free_port()}/v1/alerts"
    with pytest.raises(AlertmanagerUnavailable, match=f"the receiver at {dead} did not answer"):
        post_warnings_to_receiver.fn(dead, finding, 1)

    monkeypatch.setenv("REMEDY_RECEIVER__TOKEN", "t" * 32)
    runtime.reset()
    receiver = ReceiverServer(build_receiver(runtime.settings(), runtime.ledger(), api_url=None)).start()
    try:
        monkeypatch.setenv("REMEDY_RECEIVER__TOKEN", "w" * 32)  # the scan holds another token than the receiver
        runtime.reset()
        with pytest.raises(RemedyError, match=r"refused the warnings: HTTP 401") as refused:
            post_warnings_to_receiver.fn(receiver.alerts_url, finding, 1)
        assert not isinstance(refused.value, AlertmanagerUnavailable)  # a wrong token is not retried
        assert "\n" not in str(refused.value)
    finally:
        receiver.stop()
    assert not [i for i in runtime.ledger().incidents(node="gpu003") if i.signal == "early-warning"]
