"""Early-warning detectors: warning-level findings with evidence, from time-series DataFrames. No I/O, no Prefect."""

from remedy.warn.findings import Finding, SeriesError
from remedy.warn.infiniband import detect_ib_downtime
from remedy.warn.peers import PEER_SIGNALS, detect_peer_outliers
from remedy.warn.remaps import detect_remap_acceleration
from remedy.warn.stragglers import detect_stragglers

__all__ = [
    "PEER_SIGNALS",
    "Finding",
    "SeriesError",
    "detect_ib_downtime",
    "detect_peer_outliers",
    "detect_remap_acceleration",
    "detect_stragglers",
]
