"""Subcommands of this area (see remedy/cli.py)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # filled in by the area's owner
    return None
