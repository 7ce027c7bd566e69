"""Lemon scoring: nodes that keep failing for reasons of their own, with evidence; retirement budget. No Prefect."""
