"""The heavy tier's pytest-xdist schedule (scripts/test.sh: `--dist loadfile`): whole files per worker, except that
every test on the real control plane is one work unit, run by ONE worker.

Why: each worker that runs a real-lane test starts its own kube-apiserver, etcd and controller-manager for the rest
of its session (tests/fixtures/real_k8s.py), and an idle one still costs ~0.07 of a core (measured: 4.3 CPU-s a
minute). Spread over four workers by file, the lane started four control planes: ~235 CPU-s of the tier's ~2,000.

The controller collects nothing and sees node ids only, so each worker writes the ids of its real-lane tests (the
`real_k8s` marker tests/tiers.py sets from the fixtures a test uses) to a directory the controller made; the
scheduler reads them when it splits the collection into work units.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

LANE_DIR_ENV = "REMEDY_TEST_LANE_DIR"  # set by the controller; its workers inherit it
REAL_LANE = "real control plane lane"  # the work unit's name


def configure(config) -> None:
    """In the xdist controller of a `--dist loadfile` run: the directory the workers write the lane's ids to."""
    if getattr(config, "workerinput", None) is not None or config.getoption("dist", "no") != "loadfile":
        return
    lane_dir = tempfile.mkdtemp(prefix="remedy-lane-")
    os.environ[LANE_DIR_ENV] = lane_dir
    config._remedy_lane_dir = lane_dir


def unconfigure(config) -> None:
    lane_dir = getattr(config, "_remedy_lane_dir", None)
    if lane_dir:
        shutil.rmtree(lane_dir, ignore_errors=True)
        os.environ.pop(LANE_DIR_ENV, None)


def note_collection(config, items) -> None:
    """In a worker: write the node ids of the real-lane tests it collected (all workers collect the same)."""
    workerinput = getattr(config, "workerinput", None)
    lane_dir = os.environ.get(LANE_DIR_ENV)
    if workerinput is None or not lane_dir:
        return
    ids = [item.nodeid for item in items if item.get_closest_marker("real_k8s")]
    final = Path(lane_dir) / f"{workerinput['workerid']}.txt"
    tmp = final.with_suffix(".tmp")
    tmp.write_text("".join(f"{nodeid}\n" for nodeid in ids))
    tmp.rename(final)  # the scheduler never reads half a list


class RealLaneOnOneWorker(LoadFileScheduling):
    """`--dist loadfile`, with the real-lane tests as one work unit. The collection puts them first
    (tests/conftest.py), so with `--no-loadscope-reorder` the first worker takes the lane while the others take
    files, longest first."""

    _lane: frozenset[str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._lane is None:
            self._lane = _read_lane()
        return REAL_LANE if nodeid in self._lane else super()._split_scope(nodeid)


def _read_lane() -> frozenset[str]:
    lane_dir = os.environ.get(LANE_DIR_ENV)
    lists = sorted(Path(lane_dir).glob("*.txt")) if lane_dir else []
    # every worker reports before the schedule is made; without a list the schedule is plain loadfile
    return frozenset(lists[0].read_text().split("\n")) - {""} if lists else frozenset()
