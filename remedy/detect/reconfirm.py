"""Does the fault still hold? Asked just before anything destructive (drain for a replacement, reboot, retirement).

Healthy nodes get replaced for two reasons operators keep reporting: the fault was transient and gone by the time
automation acted, or the *monitor* failed and its silence or garbage looked like a GPU fault — a DCGM host engine
that disconnected ("Host engine connection invalid/disconnected"), NVML briefly reporting no GPUs while the driver
loads after a boot, an exporter that stopped. So before acting:

- the alert: still firing, or resolved since (Alertmanager's resolved notification, kept on the incident);
- an independent probe (NVML through a node Job) for faults a probe can see on the GPU;
- monitor signs in the evidence and the probe's own words.

Verdicts: CONFIRMED (act), CLEARED (the alert resolved and the probe sees nothing: end the incident as "cleared
before acting", with the evidence), MONITOR (the node is healthy; the monitor needs a person). Plain Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Recheck(StrEnum):
    CONFIRMED = "confirmed"
    CLEARED = "cleared"
    MONITOR = "monitor-failure"


# Faults an NVML probe sees on the GPU itself; for the rest (NotReady, InfiniBand, thermal, NVLink/PCIe rates) the
# probe is blind and the alert is the evidence.
PROBE_SEES = frozenset({"xid", "row-remap-failure", "row-remap-pending", "uncorrectable-remap"})

# Words a monitor uses when *it* failed, not the GPU: (text to find, lower-case) -> what it means to an operator.
MONITOR_SIGNS: dict[str, str] = {
    # DCGM's DCGM_ST_CONNECTION_NOT_VALID text (dcgm_structs.h errorString)
    "host engine connection invalid/disconnected": "the DCGM host engine disconnected",
    "unable to connect to host engine": "the DCGM host engine is not running",
    "dcgm_st_connection_not_valid": "the DCGM host engine disconnected",
    # dcgm-exporter / Prometheus: the target stopped, so its series vanished
    "exporter stopped": "the GPU exporter stopped",
    "up == 0": "the GPU exporter stopped",
    "target down": "the GPU exporter stopped",
}

# The probe could not see the GPUs at all because the driver had none yet (NVML error 28): after a boot this is the
# driver still loading. Probed again a moment later; GPUs present then = a monitor artefact, not a fault.
NO_GPUS_YET = "no nvidia gpu found by the driver"


@dataclass(frozen=True)
class ProbeLook:
    """What the independent probe said: passed, or failed with reasons (its own words)."""

    passed: bool
    reasons: tuple[str, ...] = ()

    @property
    def saw_no_gpus(self) -> bool:
        return any(NO_GPUS_YET in r.lower() for r in self.reasons)


@dataclass(frozen=True)
class Reconfirmation:
    verdict: Recheck
    why: str
    evidence: dict = field(default_factory=dict)

    @property
    def act(self) -> bool:
        return self.verdict is Recheck.CONFIRMED

    def to_dict(self) -> dict[str, Any]:
        """What a run's result shows of it (the re-check's evidence, as JSON)."""
        return {"verdict": self.verdict.value, "act": self.act, "why": self.why, "evidence": self.evidence}


def monitor_signs(texts: Sequence[str]) -> list[str]:
    """What in these texts says the monitor failed (deduplicated, in the operator's words)."""
    found: list[str] = []
    for t in texts:
        low = (t or "").lower()
        for needle, meaning in MONITOR_SIGNS.items():
            if needle in low and meaning not in found:
                found.append(meaning)
    return found


def reconfirm(signal: str, *, alert_cleared: bool, probe: ProbeLook | None, first_probe: ProbeLook | None = None,
              texts: Sequence[str] = ()) -> Reconfirmation:
    """The verdict, with the evidence that decided it.

    `probe` is None when no probe ran (the probe cannot see this kind of fault, or a dry-run). `first_probe` is an
    earlier probe that saw no GPUs at all, when the probe was repeated after a short wait."""
    signs = monitor_signs([*texts, *(probe.reasons if probe else ())])
    evidence: dict = {"alert": "resolved" if alert_cleared else "still firing",
                      "probe": None if probe is None else ("passed" if probe.passed else "failed"),
                      "probe_reasons": list(probe.reasons) if probe else []}
    if first_probe is not None and first_probe.saw_no_gpus and probe is not None and not probe.saw_no_gpus:
        signs.append("NVML reported no GPUs, then found them: the driver was still loading")
    if signs:
        evidence["monitor"] = signs
    if probe is not None and not probe.passed and not monitor_signs(probe.reasons):
        # an independent probe failing on the GPU is hardware evidence, whatever the monitor said
        return Reconfirmation(Recheck.CONFIRMED, f"the probe still fails: {'; '.join(probe.reasons)[:200]}", evidence)
    if signs and (probe is None or probe.passed):
        what = "; ".join(signs)
        return Reconfirmation(Recheck.MONITOR, f"{what} — not a GPU fault"
                              + ("; the probe finds the GPUs healthy" if probe else ""), evidence)
    if alert_cleared and (probe is None or probe.passed):
        return Reconfirmation(Recheck.CLEARED, "the alert resolved" + (" and the probe finds the GPUs healthy"
                                                                        if probe else ""), evidence)
    if probe is not None and probe.passed:
        return Reconfirmation(Recheck.CONFIRMED, "the alert still fires (the probe sees nothing: acting on the alert)",
                              evidence)
    return Reconfirmation(Recheck.CONFIRMED, "the alert still fires", evidence)
