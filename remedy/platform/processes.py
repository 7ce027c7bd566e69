"""What `remedy up` and `remedy demo` leave running, recorded so `remedy down` can stop exactly that and nothing else.

Each workdir (var/stack for `remedy up`, var/demo for `remedy demo`) holds `running.json`: one record per process
remedy started there (the Prefect server, the `remedy up` process itself), with its pid and the kernel's start time
of that pid. A pid alone could by now name someone else's process (pids are reused); pid + start time cannot, so
`remedy down` never signals a process it did not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from remedy.errors import RemedyError

STATE_FILE = "running.json"
# The --workdir defaults of `remedy up` and `remedy demo`: where `remedy down` looks when not told.
DEFAULT_WORKDIRS = (Path("var/stack"), Path("var/demo"))


def state_path(workdir: Path) -> Path:
    return Path(workdir) / STATE_FILE


def read_state(workdir: Path) -> dict[str, dict[str, Any]]:
    path = state_path(workdir)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_state(workdir: Path, state: dict[str, dict[str, Any]]) -> None:
    path = state_path(workdir)
    if not state:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # the record holds the server's ownership nonce: readable by this user only
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh, indent=2)
    os.replace(tmp, path)


def record(workdir: Path, role: str, pid: int, **info: Any) -> dict[str, Any]:
    """Write (or replace) the record of `role` in workdir's state file."""
    entry = {"pid": pid, "start_time": start_time(pid), **info}
    state = read_state(workdir)
    state[role] = entry
    _write_state(workdir, state)
    return entry


def forget(workdir: Path, role: str) -> None:
    state = read_state(workdir)
    if state.pop(role, None) is not None:
        _write_state(workdir, state)


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None if there is no such process (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # field 2 (comm) may contain spaces and parentheses: the fields after it start after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of the whole line


def alive(entry: dict[str, Any]) -> bool:
    """Is the process of this record still the one remedy started, and running? A zombie (exited, not yet reaped
    by the `remedy up` that started it) is not: `remedy up` learns from this that its Prefect server died."""
    pid = entry.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    now = start_time(pid)
    if now is None or _zombie(pid):
        return False
    return entry.get("start_time") is None or now == entry["start_time"]


@contextlib.contextmanager
def recorded(workdir: Path, role: str, **info: Any) -> Iterator[dict[str, Any]]:
    """Record this process under `role` for as long as the block runs. One at a time per workdir and role."""
    existing = read_state(workdir).get(role)
    if existing and alive(existing) and existing["pid"] != os.getpid():
        raise RemedyError(f"{role} is already running for {workdir} (pid {existing['pid']}); "
                          "`remedy down` stops it, or pass another --workdir")
    entry = record(workdir, role, os.getpid(), **info)
    try:
        yield entry
    finally:
        current = read_state(workdir).get(role)
        if current and current.get("pid") == os.getpid():
            forget(workdir, role)


def terminate(entry: dict[str, Any], *, group: bool, grace: float = 20.0) -> bool:
    """SIGTERM the recorded process (its whole process group when it leads one it was started in), wait up to
    `grace` seconds, then SIGKILL. False when it was no longer running (nothing signalled)."""
    if not alive(entry):
        if isinstance(entry.get("pid"), int) and entry["pid"] > 0:
            _reap(entry["pid"])  # an exited child of ours: collect it, so no zombie stays
        return False
    pid = entry["pid"]
    kill = os.killpg if group else os.kill
    with contextlib.suppress(ProcessLookupError, PermissionError):
        kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(entry) or _zombie(pid):
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
        for _ in range(50):
            if not alive(entry) or _zombie(pid):
                break
            time.sleep(0.1)
    if group:  # children left in the group (the server's own workers) go with it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    _reap(pid)
    return True


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].startswith("Z")


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our child (the demo's or up's own server), so no zombie stays."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
