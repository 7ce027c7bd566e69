"""What the operator settled stays settled (issue 32, item 3): an incident whose run stood down for the operator's
change (a manual uncordon: the run recorded `respect_drift`) is closed as such when that run is gone, never handed
to a new run that would re-cordon and drain the node the operator just uncordoned."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from remedy.domain.model import IncidentStatus
from remedy.ledger import schema
from remedy.ledger.leases import LeasesMixin

RESPECT_DRIFT_KIND = "respect_drift"  # a run saw the operator's change on the live node and stood down
STOOD_DOWN_KIND = "close_stood_down"  # the watchdog closed such an incident its gone run left acting


class OperatorMixin(LeasesMixin):
    def stood_down_by_operator(self, incident_id: int) -> bool:
        """A run of this incident stood down for the operator's change (recorded `respect_drift`)."""
        a = schema.actions.c
        with self._read() as conn:
            return conn.execute(select(a.id).where(a.incident_id == incident_id, a.kind == RESPECT_DRIFT_KIND)
                                .limit(1)).first() is not None

    def close_stood_down(self, incident_id: int, gone_holder: str, *, reason: str, by: str,
                         at: datetime | None = None) -> bool:
        """acting under the gone `gone_holder`, which stood down for the operator → ignored (the operator's change
        stands). A compare-and-swap like the watchdog's other moves: False if the incident moved on meanwhile."""
        return self._release_stranded(incident_id, gone_holder, IncidentStatus.IGNORED, gone_holder, reason, by,
                                      STOOD_DOWN_KIND, at, None)
