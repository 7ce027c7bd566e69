"""The embedded stack's Prometheus: scrapes the simulator's NFS mountstats so the `nfs-audit` deployment works under
`remedy up` out of the box (it reads `nfs.prometheus_url`, which `remedy up` points here).

Debian's `prometheus` binary, on a loopback port chosen at run time (`--prometheus-port`), TSDB under
<workdir>/prometheus. It runs in its own session (a Ctrl-C on the terminal reaches `remedy up`, which stops it in
order) and is recorded in <workdir>/running.json, so `remedy down` stops it even after `remedy up` was killed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from remedy.domain.durations import human_duration
from remedy.errors import RemedyError

ROLE = "prometheus"  # its record in the workdir's running.json (remedy.platform.processes)
BINARY = "prometheus"  # Debian package `prometheus`
URL_ENV = "REMEDY_NFS__PROMETHEUS_URL"  # nfs.prometheus_url, which the stack points here
SCRAPE_INTERVAL = "5s"  # the audit's 5 min rate window holds 60 samples


class PrometheusNotInstalled(RemedyError):
    """No `prometheus` binary on PATH."""


@dataclass
class StackPrometheus:
    url: str
    pid: int
    workdir: Path
    proc: subprocess.Popen | None = None

    def stop(self) -> None:
        from remedy.platform import processes

        entry = processes.read_state(self.workdir).get(ROLE)
        if entry and entry.get("pid") == self.pid:
            processes.terminate(entry, group=True, grace=10.0)
            processes.forget(self.workdir, ROLE)
        if os.environ.get(URL_ENV) == self.url:  # the setting pointed here: no longer
            del os.environ[URL_ENV]
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def scrape_config(sim_url: str, interval: str = SCRAPE_INTERVAL) -> dict:
    """One job: the simulator's `/metrics/nfs`, whose series name their node in `instance` (so honor_labels)."""
    target = sim_url.removeprefix("http://").rstrip("/")
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{"job_name": "node", "metrics_path": "/metrics/nfs", "honor_labels": True,
                            "static_configs": [{"targets": [target]}]}],
    }


class PrometheusNotReady(RemedyError):
    """Prometheus started but did not answer /-/ready in time."""


def start_prometheus(workdir: Path, port: int, sim_url: str, timeout: float = 30.0,
                     interval: str = SCRAPE_INTERVAL) -> StackPrometheus:
    """Start Prometheus on 127.0.0.1:port (0 = a free port) scraping the simulator; wait until it is ready. On a
    loaded machine a Prometheus has been seen to stay silent past the timeout (CI, `remedy up` then stopped at once):
    on a port chosen at run time it is stopped and started once more, on another port."""
    try:
        return _start_prometheus(workdir, port, sim_url, timeout, interval)
    except PrometheusNotReady:
        if port:
            raise
        return _start_prometheus(workdir, 0, sim_url, timeout, interval)


def _start_prometheus(workdir: Path, port: int, sim_url: str, timeout: float, interval: str) -> StackPrometheus:
    from remedy.platform import processes
    from remedy.platform.prefect_server import free_port, port_in_use, port_taken_message

    binary = shutil.which(BINARY)
    if binary is None:
        raise PrometheusNotInstalled("no `prometheus` binary on PATH (Debian package prometheus)")
    if port and port_in_use(port):
        raise RemedyError(port_taken_message(port, "--prometheus-port"))
    port = port or free_port()
    work = Path(workdir) / "prometheus"
    work.mkdir(parents=True, exist_ok=True)
    (work / "prometheus.yml").write_text(yaml.safe_dump(scrape_config(sim_url, interval)))
    url = f"http://127.0.0.1:{port}"
    log = open(work / "log", "ab")
    proc = subprocess.Popen(
        [binary, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    log.close()
    processes.record(workdir, ROLE, proc.pid, url=url)
    started = StackPrometheus(url, proc.pid, Path(workdir), proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            processes.forget(workdir, ROLE)
            tail = (work / "log").read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise RemedyError(f"Prometheus on port {port} exited at start: {tail[0][:300]} (log: {work / 'log'})")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    started.stop()
    raise PrometheusNotReady(f"Prometheus on port {port} not ready within {human_duration(timeout)} "
                             f"(log: {work / 'log'})")
