"""Receiver routes of this area (mounted by remedy.receiver.app); filled in by the area's owner."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
