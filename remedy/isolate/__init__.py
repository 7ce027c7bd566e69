"""Bisection fault isolation (adaptive group testing in rounds): code vs infrastructure, and which nodes. No Prefect."""

from remedy.isolate.search import Batch, BatchOutcome, FaultIsolation, IsolationResult, Release, Verdict, run_isolation

__all__ = ["Batch", "BatchOutcome", "FaultIsolation", "IsolationResult", "Release", "Verdict", "run_isolation"]
