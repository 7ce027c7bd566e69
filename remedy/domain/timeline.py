"""A remediation's timeline: detected, cordoned, drained, spare ready, job resumed — seconds since detection."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from remedy.domain.times import parse_iso


def _parse(ts: str | None) -> datetime:
    return parse_iso(ts, what="detected_at") if ts else datetime.now(UTC)


@dataclass
class Timeline:
    detected_at: datetime
    marks: list[tuple[str, datetime]] = field(default_factory=list)

    @classmethod
    def starting(cls, detected_at: str | None = None) -> Timeline:
        t = cls(_parse(detected_at))
        t.marks.append(("detected", t.detected_at))
        return t

    def mark(self, step: str, at: datetime | None = None) -> None:
        self.marks.append((step, at or datetime.now(UTC)))

    def seconds(self, step: str) -> float | None:
        for name, at in self.marks:
            if name == step:
                return (at - self.detected_at).total_seconds()
        return None

    def rows(self) -> list[dict]:
        return [
            {"step": name, "at": at.isoformat(timespec="milliseconds"),
             "since_detection_s": round((at - self.detected_at).total_seconds(), 2)}
            for name, at in self.marks
        ]
