"""Remediation safety, written once and Prefect-free: circuit breaker, capacity budget, in-place fix ladder.

The flows (replace_node, in-place fixes) and the policy simulator call the same functions; every decision is a
pure function of its inputs (`now` is passed in), so a replay of months of failures gives the same answers.
"""
