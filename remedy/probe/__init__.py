"""Node probe: read GPUs through NVML (real pynvml or the fake library) and judge them."""

from remedy.probe.probe import probe_node
from remedy.probe.report import ExpectedNode, Finding, ProbeReport, ProbeUnavailable

__all__ = ["ExpectedNode", "Finding", "ProbeReport", "ProbeUnavailable", "probe_node"]
