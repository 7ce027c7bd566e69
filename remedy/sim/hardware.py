"""Fixed facts of the simulated GPU board, shared by runners, faults and metrics (kept import-light)."""

from __future__ import annotations

PCI_BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")  # an HGX 8-GPU board's bus ids


def pci_bus_id(index: int) -> str:
    """NVML-style PCI bus id of GPU `index`, e.g. 00000000:18:00.0."""
    return f"00000000:{PCI_BUS[index % len(PCI_BUS)]}:00.0"
