"""Drive the Prefect UI as an operator does: a Prefect server with its UI and a cluster simulator of this process's
own, the flows in processes of their own (as a served flow runs), and headless Chromium (Debian's package, through
Playwright) pressing Resume, filling the approval form, reading state badges and artifacts.

Used by tests/ui/test_approval_ui.py (asserts on each step) and bench/ui_screenshots.py (screenshots of the same
pages for a reviewer)."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions"]
# For the tests: with no GPU, Chromium's GPU process draws WebGL in software (SwiftShader), and the run graph on a
# flow run's page (WebGL) redraws for as long as the page is open: 0.4 CPU-s per second there, 0.02 without
# SwiftShader (bench/ui_chromium_cpu.py). Without it the graph's box stays empty; no test reads the graph, and
# bench/ui_screenshots.py (CHROMIUM_ARGS) still draws it for a reviewer.
TEST_CHROMIUM_ARGS = [*CHROMIUM_ARGS, "--disable-software-rasterizer"]
APPROVER = "bob"  # the one name on approvals.approvers in this stack
UI_WAIT_MS = 30_000


# ---------------------------------------------------------------------------------------------------- the stack
@dataclass
class UiStack:
    """A Prefect server with its UI, a cluster simulator and a SQLite ledger, all this process's own."""

    ui: str
    api: str
    sim: object  # remedy.sim.server.SimServer
    home: Path
    flows: list[subprocess.Popen] = field(default_factory=list)
    sims: list = field(default_factory=list)  # more simulators, stopped with the stack
    _ledger: object = None

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.home / 'ledger.db'}"

    def env(self, **remedy: object) -> dict[str, str]:
        """The environment of a flow process: this stack's Prefect API, simulator and ledger; `remedy` are REMEDY_*
        settings without the prefix."""
        from tests.fixtures.prefect import clean_env

        values = {"DB_URL": self.db_url, "CLUSTER__MODE": "simulator", "CLUSTER__SIMULATOR_URL": self.sim.url,
                  "CLUSTER__API_RETRIES": "1", "DRAIN__GRACE_PERIOD_SECONDS": "30",
                  "APPROVALS__APPROVERS": json.dumps([APPROVER])} | {k: str(v) for k, v in remedy.items()}
        return clean_env(self.home) | {"PREFECT_API_URL": self.api, "PYTHONPATH": str(ROOT),
                                       "PREFECT_LOGGING_TO_API_BATCH_INTERVAL": "0.3"} | \
            {f"REMEDY_{k}": v for k, v in values.items()}

    def start_sim(self):
        """Another 16-node, 2-spare simulator (its own cluster), stopped with the stack."""
        sim = _sim()
        self.sims.append(sim)
        return sim

    def start_flow(self, code: str, name: str, **remedy: object) -> subprocess.Popen:
        """Run `code` (Python that calls flows) in a process of its own, as a served flow would run; its output goes
        to home/<name>.log."""
        with open(self.home / f"{name}.log", "w") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen([sys.executable, "-c", code], env=self.env(**remedy), cwd=ROOT, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.flows.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text(errors="replace")

    def runs(self, **flow_runs: object) -> list[dict]:
        """Flow runs through the API (a `flow_runs` filter, e.g. name={"any_": [...]}), newest first."""
        import httpx

        r = httpx.post(f"{self.api}/flow_runs/filter", json={"flow_runs": flow_runs, "sort": "EXPECTED_START_TIME_DESC"},
                       timeout=10)
        r.raise_for_status()
        return r.json()

    def run(self, run_id: str) -> dict:
        import httpx

        r = httpx.get(f"{self.api}/flow_runs/{run_id}", timeout=10)
        r.raise_for_status()
        return r.json()

    def ledger(self):
        """The ledger the stack's flows write (read it once a flow has started: the flow creates it)."""
        from remedy.ledger import Ledger

        if self._ledger is None:
            self._ledger = Ledger(self.db_url)
        return self._ledger


@contextlib.contextmanager
def ui_stack(home: Path, api: str | None = None) -> Iterator[UiStack]:
    """A Prefect server (API + UI) and a 16-node, 2-spare simulator; stop both (and any flow left) at the end.
    api: a running Prefect server's API URL to use (the UI tests share one: a server start is ~20 CPU-s) instead of
    starting one."""
    from tests.fixtures.prefect import prefect_server_process

    home.mkdir(parents=True, exist_ok=True)
    sim = _sim()
    stack = None
    try:
        with contextlib.nullcontext(api) if api else prefect_server_process(home / "prefect-server") as url:
            stack = UiStack(ui=url.removesuffix("/api"), api=url, sim=sim, home=home)
            yield stack
    finally:
        for proc in stack.flows if stack else []:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for other in stack.sims if stack else []:
            other.stop()
        sim.stop()


def _sim():
    from remedy.sim.cluster import build_cluster
    from remedy.sim.server import SimServer

    return SimServer(build_cluster(nodes=16, spares=2, time_scale=0.01)).start()


def wait_until(what: str, fn, timeout: float = 60.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


# -------------------------------------------------------------------------------------------------- the flows
_ADOPT_SPARES = ("from remedy import runtime; from remedy.platform.demo import _spares_validated_at_build; "
                 "_spares_validated_at_build(runtime); ")


def start_paused_replacement(stack: UiStack, node: str = "gpu003") -> tuple[subprocess.Popen, str]:
    """An XID 79 on `node` → replace-node, with the spare reserve at 2 of 2 spares: the gate asks a person whether
    to spend the reserve and the run pauses. Returns (the flow's process, the paused run's id)."""
    from remedy.sim.faults import inject

    inject(stack.sim.cluster, "xid", node, gpu=3, code=79)
    code = (_ADOPT_SPARES + "from flows.replace_node import replace_node; "
            f"s = replace_node(node={node!r}, cause='XID 79', xid=79, gpu=3, return_state=True); "
            "print('final state:', s.name, '-', s.message)")
    proc = stack.start_flow(code, f"replace-{node}", BREAKER__SPARE_RESERVE=2)
    run = wait_until(f"the replacement of {node} to pause", lambda: _paused(stack, proc, f"replace {node} (XID 79)"),
                     timeout=120)
    return proc, run["id"]


def _paused(stack: UiStack, proc: subprocess.Popen, name: str) -> dict | None:
    if proc.poll() is not None:
        raise RuntimeError(f"the flow process exited ({proc.returncode}) before pausing:\n{proc.args[-1]}")
    runs = stack.runs(name={"any_": [name]})
    return runs[0] if runs and runs[0]["state_type"] == "PAUSED" else None


class OutcomeRuns:
    """Three real runs that end short of a fix, on a simulator and ledger of their own (the stack's cluster may have
    spent a spare already), in one flow process started in the background: No spare (no spare validated yet), Held
    (a second XID within minutes trips the cluster breaker and nobody answers in time: the safe default), Escalated
    (an XID that needs the vendor). OUTCOME_RUNS names the state each should end in."""

    def __init__(self, stack: UiStack) -> None:
        from remedy.sim.faults import inject

        self.stack, self.name = stack, "needs-a-person"
        self.sim = stack.start_sim()
        inject(self.sim.cluster, "xid", "gpu011", gpu=0, code=79)
        inject(self.sim.cluster, "xid", "gpu005", gpu=1, code=79)
        code = ("from flows.replace_node import replace_node; from flows.escalate import escalate\n"
                "replace_node(node='gpu011', cause='XID 79', xid=79, gpu=0, return_state=True)\n"
                "replace_node(node='gpu005', cause='XID 79', xid=79, gpu=1, return_state=True)\n"
                "escalate(node='gpu012', reason='XID 58 (contact support)', quarantine=False, return_state=True)\n"
                "replace_node(node='gpu013', cause='thermal early warning', signal='early-warning', "
                "early_warning=True, return_state=True)\n")
        (stack.home / self.name).mkdir(exist_ok=True)
        self.proc = stack.start_flow(code, self.name, DB_URL=f"sqlite:///{stack.home / self.name / 'ledger.db'}",
                                     CLUSTER__SIMULATOR_URL=self.sim.url, BREAKER__SPARE_RESERVE=1,
                                     APPROVALS__TIMEOUT_SECONDS=1)

    def wait(self, timeout: float = 180) -> dict[str, str]:
        """{run name: run id} once the flows have finished."""
        if self.proc.wait(timeout) != 0:
            raise RuntimeError(f"the flows exited {self.proc.returncode}:\n{self.stack.log(self.name)[-3000:]}")
        return {r["name"]: r["id"] for r in self.stack.runs(name={"any_": list(OUTCOME_RUNS)})}

    def watched(self) -> str:
        """The run id of the warned swap that found no spare (after `wait`): green, the node left working."""
        (run,) = self.stack.runs(name={"any_": [WATCHED_RUN]})
        return run["id"]


# the runs OutcomeRuns starts, and the state each should end in
OUTCOME_RUNS = {"replace gpu011 (XID 79)": "No spare", "replace gpu005 (XID 79)": "Held",
                "escalate gpu012": "Escalated"}
# and a warned node with no spare to swap in: not a failure, nobody is needed, the run is green and says why
WATCHED_RUN = "replace gpu013 (thermal early warning)"


# -------------------------------------------------------------------------------------------------- the browser
def need_browser() -> None:
    """Skip (fail in CI) where Chromium or Playwright is missing."""
    import importlib.util

    import pytest

    missing = (f"Chromium not found at {CHROMIUM} (apt-get install chromium)" if not Path(CHROMIUM).exists() else
               "Python package playwright not installed" if importlib.util.find_spec("playwright") is None else None)
    if missing and os.environ.get("CI"):
        pytest.fail(f"{missing} (scripts/install.sh --test installs it)")
    if missing:
        pytest.skip(missing)


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000, args: list[str] = CHROMIUM_ARGS):
    """A headless Chromium page (Debian's chromium, no browser download); tests pass args=TEST_CHROMIUM_ARGS."""
    with chromium(args) as browser, new_page(browser, width, height) as page:
        yield page


@contextlib.contextmanager
def chromium(args: list[str] = CHROMIUM_ARGS):
    """Headless Chromium, for pages from new_page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def new_page(browser, width: int = 1400, height: int = 1000):
    """A fresh page (its own context), closed at the end: Playwright's client keeps an object for every request a
    page makes, and the Prefect UI polls, so a page kept across tests made each later step cost more CPU here."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.set_default_timeout(UI_WAIT_MS)
        yield page
    finally:
        context.close()


class Shots:
    """Numbered screenshots in one directory."""

    def __init__(self, out: Path | None) -> None:
        self.out = out
        self.taken: list[Path] = []
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)

    def __call__(self, page, name: str, *, full_page: bool = True) -> Path | None:
        if self.out is None:
            return None
        page.wait_for_timeout(300)  # let transitions settle
        path = self.out / f"{len(self.taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        self.taken.append(path)
        return path


def put_away(page) -> None:
    """Leave the Prefect UI while a test waits for flows: an open page polls the API and redraws (CPU in the
    browser and the server), and nobody is looking. The next step opens the page it needs."""
    page.goto("about:blank")


def open_run(page, stack: UiStack, run_id: str, state: str | None = None) -> None:
    """The run's page; with `state`, wait until its state badge says so (the UI polls the API)."""
    page.goto(f"{stack.ui}/runs/flow-run/{run_id}", wait_until="domcontentloaded")
    if state is None:
        badge(page).wait_for(timeout=UI_WAIT_MS)
    else:
        wait_badge(page, state)


def badge(page):
    """The run's state badge in the page header (the first on a run's page)."""
    return page.locator(".state-badge").first


def wait_badge(page, state: str, timeout_ms: int = UI_WAIT_MS) -> None:
    page.locator(".state-badge", has_text=state).first.wait_for(timeout=timeout_ms)


def open_resume_form(page):
    """Press Resume on the paused run's page; returns the form's dialog."""
    page.get_by_role("button", name="Resume").first.click()
    dialog = page.locator(".p-modal, [role=dialog]").filter(has_text="Resume Flow Run").first
    dialog.wait_for(timeout=UI_WAIT_MS)
    dialog.locator(".schema-form-property").first.wait_for(timeout=UI_WAIT_MS)
    return dialog


def _field(dialog, label: str):
    return dialog.locator(".schema-form-property").filter(
        has=dialog.page.locator(".schema-form-property__label", has_text=label)).first


def fill_form(dialog, *, decision: str | None = None, approver: str | None = None, reason: str | None = None):
    """Fill the fields as a person does: pick the decision and the approver from their lists, type the reason."""
    if decision is not None:
        _pick(dialog, "Decision", decision)
    if approver is not None:
        field = _field(dialog, "Approver")
        if field.locator(".p-select-button__control").count():  # approvals.approvers configured: a list
            _pick(dialog, "Approver", approver)
        else:
            field.locator("textarea, input").first.fill(approver)
    if reason is not None:
        _field(dialog, "Reason").locator("textarea, input").first.fill(reason)


def _open_list(dialog, label: str):
    page = dialog.page
    control = _field(dialog, label).locator(".p-select-button__control")
    control.click()
    options = page.get_by_role("listbox")
    if not options.is_visible():  # headless, the click focuses the select without opening its list
        control.press("ArrowDown")
    return options


def _pick(dialog, label: str, option: str) -> None:
    _open_list(dialog, label).get_by_role("option", name=option, exact=True).click()


def list_options(dialog, label: str) -> list[str]:
    """The entries a select field of the form offers (the list is closed again afterwards)."""
    options = _open_list(dialog, label)
    options.get_by_role("option").first.wait_for(timeout=UI_WAIT_MS)
    names = [o.strip() for o in options.get_by_role("option").all_inner_texts()]
    dialog.page.keyboard.press("Escape")
    return names


def submit(dialog) -> None:
    dialog.get_by_role("button", name="Submit").click()


# ------------------------------------------------------------------------------------------ tabs and pictures
def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def artifacts_tab(page) -> None:
    page.get_by_role("tab", name="Artifacts").or_(page.get_by_text("Artifacts", exact=True)).first.click()


def open_artifact(page, key: str, text: str) -> None:
    """From the run's Artifacts tab, open the artifact `key` and wait until it shows `text`."""
    page.get_by_text(key, exact=True).first.click()
    page.wait_for_url("**/artifacts/artifact/**", timeout=UI_WAIT_MS)
    page.get_by_text(text).first.wait_for(timeout=UI_WAIT_MS)


def details_tab(page) -> None:
    page.get_by_role("tab", name="Details").or_(page.get_by_text("Details", exact=True)).first.click()
    page.get_by_text("State Message").first.wait_for(timeout=UI_WAIT_MS)
