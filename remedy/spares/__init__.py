"""Spare pool choices, Prefect-free: which spare to promote, how big the pool should be, what to preempt."""
