"""Names are data: every identifier built from a node, rack or alert value goes through here (issue 32, item 2).

Node names come from the outside world: EKS names its nodes `ip-10-0-1-2.ec2.internal`, bare metal uses FQDNs,
alerts carry whatever a label held. Each system that stores an identifier has its own rules, and a name that
breaks one of them fails the run *after* it acted (a Prefect artifact key with a dot is rejected: replace-node
replaced the node, then ended Failed and lost the spare). One function per kind of identifier:

| identifier | rule (who enforces it) |
|---|---|
| `artifact_key` | lowercase letters, digits, dashes (Prefect's ArtifactCreate validator) |
| `run_name` | printable, one line, bounded (Prefect shows it in lists) |
| `tag` | printable, one line, bounded; `node:<name>` keeps the name as it is, so runs filter by the real name |
| `event_name` | a DNS-1123 subdomain, at most 253 (Kubernetes object names) |
| `object_name` | a DNS-1123 label, at most 63 (Job names: the `job-name` label and pod hostnames derive from it) |
| `label_value` | at most 63, `[A-Za-z0-9._-]`, alphanumeric at both ends, or empty (Kubernetes label values) |
| `file_name` | `[A-Za-z0-9._-]`, no leading dot, no path separator, bounded |

A name changed to fit gets a short digest of the original, so two names that differ only in what was replaced
(`a.b` and `a-b`) never share an identifier; a name that already fits is kept as it is, so existing keys do not
move. Plain Python, no I/O.
"""

from __future__ import annotations

import hashlib
import re

_DIGEST = 6


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]


def _fit(original: str, cleaned: str, limit: int, sep: str = "-") -> str:
    """`cleaned`, with a digest of `original` appended when cleaning changed it or it had to be cut to `limit`."""
    if cleaned == original and len(cleaned) <= limit:
        return cleaned
    room = limit - _DIGEST - len(sep)
    head = cleaned[:room].rstrip("-._")
    return f"{head}{sep}{_digest(original)}" if head else _digest(original)


def _slug(text: str, allowed: str) -> str:
    return re.sub(rf"[^{allowed}]+", "-", text).strip("-._")


def artifact_key(*parts: object, limit: int = 200) -> str:
    """A Prefect artifact key from parts ("replace", node, "story"): each part lowercased to `[a-z0-9-]`."""
    out = []
    for part in parts:
        text = str(part)
        cleaned = _slug(text.lower(), "a-z0-9")
        out.append(_fit(text.lower(), cleaned, 63) if text else "")  # node names are lowercase anyway
    key = "-".join(p for p in out if p) or "artifact"
    return _fit(key, key, limit)


def run_name(text: str, limit: int = 200) -> str:
    """A flow run's name: one printable line (an alert label can carry newlines and control characters)."""
    one = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


def tag(text: str, limit: int = 200) -> str:
    """A Prefect tag (`node:<name>`, `rack:<name>`): printable, one line, bounded; dots and case are kept."""
    return run_name(text, limit)


def object_name(*parts: object) -> str:
    """A Kubernetes object name that must be a DNS-1123 label (a Job: its pods' hostnames and `job-name` label
    derive from it): `[a-z0-9-]`, alphanumeric at both ends, at most 63."""
    text = "-".join(str(p) for p in parts if str(p))
    cleaned = _slug(text.lower(), "a-z0-9")
    return _fit(text.lower(), cleaned, 63) or "remedy"


def event_name(*parts: object) -> str:
    """A Kubernetes Event's name (a DNS-1123 subdomain): `[a-z0-9.-]`, alphanumeric at both ends, at most 253."""
    text = ".".join(str(p) for p in parts if str(p))
    cleaned = re.sub(r"\.+", ".", _slug(text.lower(), "a-z0-9.").replace("-.", ".").replace(".-", "."))
    return _fit(text.lower(), cleaned, 253) or "remedy"


def label_value(text: str) -> str:
    """A Kubernetes label value: at most 63, `[A-Za-z0-9._-]`, alphanumeric at both ends (empty stays empty)."""
    if not text:
        return ""
    cleaned = _slug(text, "A-Za-z0-9._")
    return _fit(text, cleaned, 63)


def file_name(text: str, limit: int = 200) -> str:
    """A file name: `[A-Za-z0-9._-]`, no path separator, no leading dot (never hidden, never `..`)."""
    cleaned = _slug(text, "A-Za-z0-9._")
    return _fit(text, cleaned, limit) or _digest(text)
