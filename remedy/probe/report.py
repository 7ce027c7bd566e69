"""What the node probe expects, finds and reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from remedy.errors import RemedyError
from remedy.health.result import CheckResult, Verdict, worst
from remedy.settings.health import HealthCheckSettings


class ProbeUnavailable(RemedyError):
    """The node cannot be probed at all (no driver, no GPU, no permission); the message names the cause."""


@dataclass(frozen=True)
class ExpectedNode:
    """What a healthy node of this pool looks like (None: reported, not judged)."""

    gpu_count: int = 8
    gpu_model: str | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    inforom_version: str | None = None
    gsp_firmware_version: str | None = None

    @classmethod
    def from_settings(cls, health: HealthCheckSettings, **overrides: Any) -> ExpectedNode:
        p = health.probe
        values: dict[str, Any] = dict(
            gpu_count=health.gpus_per_node,
            gpu_model=health.gpu_model,
            driver_version=p.driver_version,
            vbios_version=p.vbios_version,
            inforom_version=p.inforom_version,
            gsp_firmware_version=p.gsp_firmware_version,
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass
class Finding:
    subject: str  # "node" or "GPU 3"
    item: str  # what was checked: "gpu-count", "pcie-width", "remapped-rows", ...
    verdict: Verdict
    value: Any
    threshold: Any  # the rule it was judged by, e.g. ">= 16", "== 570.124.06", "not configured"
    message: str = ""


@dataclass
class ProbeReport:
    findings: list[Finding] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)  # raw readings per GPU
    driver_version: str = ""
    xids: list[dict[str, int]] = field(default_factory=list)  # [{"gpu": 3, "xid": 79}]

    @property
    def verdict(self) -> Verdict:
        return worst([f.verdict for f in self.findings])

    def add(self, subject: str, item: str, verdict: Verdict, value: Any, threshold: Any, message: str = "") -> None:
        self.findings.append(Finding(subject, item, verdict, value, threshold, message))

    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.verdict is not Verdict.PASS]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "driver_version": self.driver_version,
            "xids": self.xids,
            "findings": [{**asdict(f), "verdict": f.verdict.value} for f in self.findings],
            "gpus": self.gpus,
        }

    def to_check_result(self) -> CheckResult:
        """The probe as the `nvml-probe` health check."""
        reasons = [
            f"{'warning: ' if f.verdict is Verdict.WARN else ''}{f.subject}: {f.message or f.item}"
            for f in self.problems()
        ]
        return CheckResult(
            check="nvml-probe",
            verdict=self.verdict,
            measurements={"driver_version": self.driver_version, "gpus": self.gpus, "xids": self.xids},
            thresholds={f"{f.subject}/{f.item}": f.threshold for f in self.findings if f.threshold != "not configured"},
            reasons=reasons,
        )
