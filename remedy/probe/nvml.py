"""Where the probe gets its NVML from: the real `pynvml`, or the fake library bound to a node-health file.

    REMEDY_NVML=pynvml                      (default) the real library, talks to the driver
    REMEDY_NVML=fake:/path/to/health.json   remedy.probe.fakenvml bound to that state

The probe never imports pynvml itself; tests and the simulator's probe Job pick the fake the same way
a node picks the real one, so the code under test is the code that runs on hardware.
"""

from __future__ import annotations

import os
from typing import Any

from remedy.errors import RemedyError

ENV_VAR = "REMEDY_NVML"


class NvmlBackendError(RemedyError):
    """REMEDY_NVML names a backend that does not exist or cannot be loaded."""


def load(backend: str | None = None) -> Any:
    """The NVML module to use: `pynvml` or `fake:<path>` (default: $REMEDY_NVML, else pynvml)."""
    backend = backend if backend is not None else os.environ.get(ENV_VAR, "pynvml")
    backend = backend.strip()
    if backend in ("", "pynvml"):
        import pynvml

        return pynvml
    if backend.startswith("fake:"):
        from remedy.probe import fakenvml

        path = backend[len("fake:") :]
        if not path:
            raise NvmlBackendError(f"{ENV_VAR}=fake: needs a path to a node-health JSON file (fake:/path/health.json)")
        return fakenvml.from_file(path)
    raise NvmlBackendError(f"{ENV_VAR}={backend!r}: unknown NVML backend (use 'pynvml' or 'fake:<path>')")


# Why NVML would not start, in the operator's words (NVML error value -> message).
INIT_CAUSES = {
    12: "NVML library not found: is the NVIDIA driver installed on this node?",
    9: "NVIDIA driver not loaded: is the nvidia kernel module loaded (lsmod | grep nvidia)?",
    4: "no permission to use NVML: run the probe privileged or with /dev/nvidia* mounted",
    18: "NVML library and kernel driver versions differ (driver updated without reboot): reboot the node",
    28: "no NVIDIA GPU found by the driver",
    999: "NVML failed with an unknown error: check dmesg for NVRM/Xid messages",
}


def init_cause(exc: Exception) -> str:
    value = getattr(exc, "value", None)
    cause = INIT_CAUSES.get(value) if isinstance(value, int) else None
    return cause or f"NVML could not start: {exc} (NVML error {value})"
