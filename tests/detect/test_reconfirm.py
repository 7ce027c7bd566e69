"""The re-check before anything destructive (issue 14, item 5): a fault that no longer holds is not acted on, and a
monitor that failed is not mistaken for a GPU that failed.

Monitor texts are the tools' own words: DCGM's error string for DCGM_ST_CONNECTION_NOT_VALID is "Host engine
connection invalid/disconnected" (NVIDIA/DCGM dcgmlib/dcgm_errors / dcgm_structs errorString; also what `dcgmi`
prints, e.g. "Error: Unable to connect to host engine. Host engine connection invalid/disconnected." as users paste
it in NVIDIA/DCGM and NVIDIA/gpu-operator issues); NVML's error 28 reads "no NVIDIA GPU found by the driver" in
remedy.probe.nvml.INIT_CAUSES."""

from __future__ import annotations

from remedy.detect.reconfirm import ProbeLook, Recheck, monitor_signs, reconfirm

HOSTENGINE = "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."
NO_GPUS = "cannot probe: no NVIDIA GPU found by the driver"
GPU_LOST = "gpu 3: GPU is lost (NVML_ERROR_GPU_IS_LOST)"


def test_a_failing_probe_confirms_whatever_the_alert_says():
    for cleared in (False, True):
        r = reconfirm("xid", alert_cleared=cleared, probe=ProbeLook(False, (GPU_LOST,)))
        assert r.verdict is Recheck.CONFIRMED and r.act and "GPU is lost" in r.why


def test_alert_resolved_and_probe_healthy_is_cleared_with_the_evidence():
    r = reconfirm("row-remap-pending", alert_cleared=True, probe=ProbeLook(True))
    assert r.verdict is Recheck.CLEARED and not r.act
    assert r.evidence == {"alert": "resolved", "probe": "passed", "probe_reasons": []}


def test_alert_still_firing_is_acted_on_even_when_the_probe_is_blind_or_sees_nothing():
    assert reconfirm("ib-downtime", alert_cleared=False, probe=None).verdict is Recheck.CONFIRMED
    r = reconfirm("xid", alert_cleared=False, probe=ProbeLook(True))
    assert r.verdict is Recheck.CONFIRMED and "acting on the alert" in r.why


def test_a_probe_blind_fault_whose_alert_resolved_is_cleared():
    assert reconfirm("thermal-throttle", alert_cleared=True, probe=None).verdict is Recheck.CLEARED


def test_a_disconnected_dcgm_host_engine_is_a_monitor_failure_not_a_gpu_fault():
    r = reconfirm("xid", alert_cleared=False, probe=ProbeLook(True), texts=[HOSTENGINE])
    assert r.verdict is Recheck.MONITOR and not r.act
    assert r.evidence["monitor"] == ["the DCGM host engine disconnected", "the DCGM host engine is not running"]
    # ... unless the independent probe fails on the GPU itself: then it is hardware, whatever DCGM said
    assert reconfirm("xid", alert_cleared=False, probe=ProbeLook(False, (GPU_LOST,)),
                     texts=[HOSTENGINE]).verdict is Recheck.CONFIRMED


def test_no_gpus_then_all_gpus_is_the_driver_loading_not_a_fault():
    r = reconfirm("xid", alert_cleared=False, probe=ProbeLook(True), first_probe=ProbeLook(False, (NO_GPUS,)))
    assert r.verdict is Recheck.MONITOR and "driver was still loading" in r.why
    # still no GPU on the second look: the node really lost them
    r = reconfirm("xid", alert_cleared=False, probe=ProbeLook(False, (NO_GPUS,)),
                  first_probe=ProbeLook(False, (NO_GPUS,)))
    assert r.verdict is Recheck.CONFIRMED


def test_monitor_signs_are_found_case_insensitively_and_only_once():
    assert monitor_signs(["HOST ENGINE CONNECTION INVALID/DISCONNECTED", "dcgm_st_connection_not_valid"]) == [
        "the DCGM host engine disconnected"]
    assert monitor_signs(["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."]) == []
