"""A reboot that is over before the flow first looks: the new boot ID says it happened (no real-seconds wait).

wait_node_ready used to wait `down_grace_seconds` (120 s, real time) when it never saw the node NotReady, whatever
the cluster's clock: on the time-compressed simulator a reboot of 1.8 s that finished while Prefect was starting the
task cost the job 15 real seconds = 25 simulated minutes. The kubelet reports a new status.nodeInfo.bootID after
every boot (kubernetes-client/python docs/V1NodeSystemInfo.md: "boot_id: Boot ID reported by the node"; the
kubelet reads /proc/sys/kernel/random/boot_id), and the simulator now does the same.
"""

from __future__ import annotations

import time


def test_a_finished_reboot_is_seen_by_its_new_boot_id(remedy_on_sim):
    from remedy import runtime
    from tasks.fixes import wait_node_ready

    sim = remedy_on_sim
    before = runtime.cluster().get_node("gpu002").boot_id
    assert before
    sim.cluster.reboot_node("gpu002", 60.0)  # 0.6 s at time scale 0.01
    sim.cluster.settle(5, until=lambda: "gpu002" not in sim.cluster.rebooting)
    time.sleep(0.3)
    after = runtime.cluster().get_node("gpu002")
    assert after.ready and after.boot_id and after.boot_id != before

    t = time.monotonic()
    out = wait_node_ready.fn("gpu002", timeout_seconds=20, dry_run=False, boot_id_before=before)
    assert out.ready and out.new_boot and not out.saw_not_ready
    assert time.monotonic() - t < 3, out  # not the grace of 10 s (half the timeout)

    # without the boot ID it can only wait out the grace (the old behaviour, kept for clusters that do not report it)
    t = time.monotonic()
    out = wait_node_ready.fn("gpu002", timeout_seconds=4, dry_run=False)
    assert out.ready and not out.new_boot and time.monotonic() - t >= 2
