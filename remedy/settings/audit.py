"""NFS / checkpoint-I/O audit thresholds (issue 7). Composed into remedy.config.RemedySettings."""

from __future__ import annotations

from pydantic import BaseModel


class NfsAuditSettings(BaseModel):
    """NFS / checkpoint-I/O audit thresholds (issue 7)."""
