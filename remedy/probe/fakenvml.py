"""A fake NVML library: the pynvml calls the node probe uses, answered from a `NodeHealth`.

No NVML mock exists and this machine has no GPU, so this is the one in-process fake the project keeps
(style note 6). It answers like the real library: same function names and signatures, same constants,
and it raises pynvml's own exception classes (`pynvml.NVMLError_GpuIsLost`, ...), so the probe cannot
tell it from the driver. Faults are injected through the health state:

- `fallen_off_bus`: queries of that GPU's handle raise NVMLError_GpuIsLost (mode "lost", as right after
  XID 79); with `lost_gpu_mode="gone"` (after a reboot) the GPU is not enumerated and the count drops.
- `pending_xids`: delivered as nvmlEventTypeXidCriticalError events by nvmlEventSetWait.
- `remap_pending` / `remap_failure` / remap counts, ECC counts, retired pages, PCIe gen/width,
  `nvlink_down` / `nvlink_errors`, `hw_slowdown` / `power_brake` (always), `thermal_throttle`
  (only with `under_load`, as on a real GPU), temperature and power.
- `init_error`: the NVML error value nvmlInit raises (12 = library not found, 9 = driver not loaded).
- `gpu_errors`: {GPU index: NVML error value} raised by every query of that GPU (16 = reset required).

State file (REMEDY_NVML=fake:<path>): a NodeHealth dict (`NodeHealth.to_dict()`), or
{"health": {...NodeHealth...}, "gpu_model": ..., "init_error": 12, ...} with the FakeNvmlState fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from remedy.errors import RemedyError
from remedy.sim.health import GpuHealth, NodeHealth


@dataclass
class FakeNvmlState:
    health: NodeHealth = field(default_factory=NodeHealth.healthy)
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    inforom_version: str = "G520.0200.00.05"
    gsp_firmware_version: str = "570.124.06"
    nvlinks_per_gpu: int = 18  # H100 SXM
    init_error: int | None = None  # NVML error value raised by nvmlInit
    lost_gpu_mode: str = "lost"  # "lost": handle raises GpuIsLost; "gone": not enumerated
    under_load: bool = False  # thermal throttling only shows under load
    ecc_enabled: bool = True
    gpu_errors: dict[int, int] = field(default_factory=dict)  # GPU index -> NVML error value its queries raise

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FakeNvmlState:
        if "health" not in data:  # a bare NodeHealth dict
            return cls(health=NodeHealth.from_dict(data))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RemedyError(f"fake NVML state: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        kwargs = dict(data)
        kwargs["health"] = NodeHealth.from_dict(data["health"])
        kwargs["gpu_errors"] = {int(k): int(v) for k, v in (data.get("gpu_errors") or {}).items()}  # JSON keys are strings
        return cls(**kwargs)


def from_file(path: str | Path) -> FakeNvml:
    p = Path(path)
    if not p.exists():
        raise RemedyError(f"fake NVML state file not found: {p}")
    try:
        data = json.loads(p.read_text())
        return FakeNvml(FakeNvmlState.from_dict(data))
    except (json.JSONDecodeError, TypeError) as exc:
        raise RemedyError(f"fake NVML state file {p}: not a NodeHealth JSON: {exc}") from None


def _err(value: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(value)  # pynvml maps the value to its NVMLError_* subclass


@dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeNvml:
    """Looks like the `pynvml` module. Unknown names fall through to pynvml's constants and errors."""

    def __init__(self, state: FakeNvmlState | NodeHealth | None = None) -> None:
        if isinstance(state, NodeHealth):
            state = FakeNvmlState(health=state)
        self.state = state or FakeNvmlState()
        self._initialised = False
        self._delivered: set[tuple[int, int]] = set()

    def __getattr__(self, name: str) -> Any:
        real = getattr(pynvml, name)  # AttributeError for names pynvml does not have either
        if callable(real) and not isinstance(real, type) and name.startswith("nvml"):
            def not_implemented(*_a: Any, **_k: Any) -> Any:
                raise _err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

            return not_implemented
        return real

    # -- library lifecycle -------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.state.init_error is not None:
            raise _err(self.state.init_error)
        self._initialised = True

    def nvmlShutdown(self) -> None:
        self._need_init()
        self._initialised = False

    def _need_init(self) -> None:
        if not self._initialised:
            raise _err(pynvml.NVML_ERROR_UNINITIALIZED)

    def _visible(self) -> list[GpuHealth]:
        gpus = self.state.health.gpus
        if self.state.lost_gpu_mode == "gone":
            return [g for g in gpus if not g.fallen_off_bus]
        return list(gpus)

    def _gpu(self, handle: Any) -> GpuHealth:
        self._need_init()
        if not isinstance(handle, FakeHandle):
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self._visible()[handle.index]
        if gpu.fallen_off_bus:
            raise _err(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.index in self.state.gpu_errors:
            raise _err(self.state.gpu_errors[gpu.index])
        return gpu

    # -- system ------------------------------------------------------------------------------
    def nvmlSystemGetDriverVersion(self) -> str:
        self._need_init()
        return self.state.health.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self._visible())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._need_init()
        if not 0 <= index < len(self._visible()):
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    # -- identity and firmware -----------------------------------------------------------------
    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        self._gpu(handle)
        index: int = handle.index
        return index

    def nvmlDeviceGetName(self, handle: Any) -> str:
        self._gpu(handle)
        return self.state.gpu_model

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self._gpu(handle).uuid or f"GPU-fake-{handle.index:04d}"

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        return f"165{self._gpu(handle).index:010d}"

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        self._gpu(handle)
        return self.state.health.vbios_version

    def nvmlDeviceGetInforomImageVersion(self, handle: Any) -> str:
        self._gpu(handle)
        return self.state.inforom_version

    def nvmlDeviceGetGspFirmwareVersion(self, handle: Any, version: Any = None) -> str:
        self._gpu(handle)
        return self.state.gsp_firmware_version

    # -- memory health ---------------------------------------------------------------------------
    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        self._gpu(handle)
        on = pynvml.NVML_FEATURE_ENABLED if self.state.ecc_enabled else pynvml.NVML_FEATURE_DISABLED
        return [on, on]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:
        g = self._gpu(handle)
        if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            return g.ecc_volatile_sbe
        if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return g.ecc_volatile_dbe
        raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        g = self._gpu(handle)
        return (g.correctable_remaps, g.uncorrectable_remaps, int(g.remap_pending), int(g.remap_failure))

    def nvmlDeviceGetRetiredPages(self, handle: Any, source: int) -> list[int]:
        g = self._gpu(handle)
        if source == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
            n = g.retired_pages_sbe
        elif source == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
            n = g.retired_pages_dbe
        else:
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return [0x1000 * (i + 1) for i in range(n)]

    # -- clocks, thermals, power ---------------------------------------------------------------
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        g = self._gpu(handle)
        mask = 0 if self.state.under_load else pynvml.nvmlClocksEventReasonGpuIdle
        if g.hw_slowdown:
            mask |= pynvml.nvmlClocksEventReasonHwSlowdown
        if g.power_brake:
            mask |= pynvml.nvmlClocksEventReasonHwSlowdown | pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown
        if g.thermal_throttle and self.state.under_load:
            mask |= pynvml.nvmlClocksEventReasonHwSlowdown | pynvml.nvmlClocksEventReasonHwThermalSlowdown
        return mask

    nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        g = self._gpu(handle)
        if self.state.under_load and g.thermal_throttle:
            return max(g.temperature_c, 90)
        return g.temperature_c

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu(handle).power_w * 1000  # milliwatts, like the real call

    # -- PCIe ------------------------------------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu(handle).pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu(handle).pcie_max_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu(handle).pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu(handle).pcie_max_width

    # -- NVLink ----------------------------------------------------------------------------------
    def _link(self, handle: Any, link: int) -> GpuHealth:
        g = self._gpu(handle)
        if self.state.nvlinks_per_gpu == 0:
            raise _err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < self.state.nvlinks_per_gpu:
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return g

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        g = self._link(handle, link)
        state: int = pynvml.NVML_FEATURE_DISABLED if link in g.nvlink_down else pynvml.NVML_FEATURE_ENABLED
        return state

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        g = self._link(handle, link)
        # The node health keeps one summed count; book it as replays on the first link.
        return g.nvlink_errors if (link == 0 and counter == pynvml.NVML_NVLINK_ERROR_DL_REPLAY) else 0

    # -- events ----------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> SimpleNamespace:
        self._need_init()
        return SimpleNamespace(handles=[], types=0, freed=False)

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        self._gpu(handle)
        event_set.handles.append(handle)
        event_set.types |= event_types

    def nvmlEventSetWait(self, event_set: Any, timeoutms: int) -> SimpleNamespace:
        """Next undelivered XID of a registered GPU; NVMLError_Timeout when none (without sleeping)."""
        self._need_init()
        if event_set.types & pynvml.nvmlEventTypeXidCriticalError:
            for h in event_set.handles:
                for xid in self._visible()[h.index].pending_xids:
                    if (h.index, xid) not in self._delivered:
                        self._delivered.add((h.index, xid))
                        return SimpleNamespace(device=h, eventType=pynvml.nvmlEventTypeXidCriticalError,
                                               eventData=xid, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
        raise _err(pynvml.NVML_ERROR_TIMEOUT)

    nvmlEventSetWait_v2 = nvmlEventSetWait

    def nvmlEventSetFree(self, event_set: Any) -> None:
        event_set.freed = True
