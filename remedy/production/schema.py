"""Offline schema check of Kubernetes objects: the official client's models (generated from the API's OpenAPI)
catch wrong types and missing required fields; a round trip catches fields they do not know (typos)."""

from __future__ import annotations

from typing import Any


def check_object(doc: dict) -> list[str]:
    """Deserialize into the official client's model (types, required fields) and report fields it does not know."""
    from kubernetes import client

    api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    version = api_version.rpartition("/")[2]
    klass = f"{version.capitalize()}{kind}"
    name = f"{kind} {doc.get('metadata', {}).get('name', '?')}"
    if not hasattr(client.models, klass):
        return [f"{name}: unknown apiVersion/kind {api_version}/{kind}"]
    api = client.ApiClient()
    try:
        obj = api._ApiClient__deserialize(doc, klass)  # type: ignore[attr-defined]  # the client's own, private
    except (ValueError, TypeError) as exc:
        return [f"{name}: {str(exc).splitlines()[0]} ({' '.join(str(exc).split())[:200]})"]
    return [f"{name}: {p}" for p in _diff(doc, api.sanitize_for_serialization(obj), "")]


def _diff(original: Any, roundtrip: Any, path: str) -> list[str]:
    if isinstance(original, dict):
        if not isinstance(roundtrip, dict):
            return [f"{path or '.'}: expected an object"]
        out = []
        for k, v in original.items():
            if v is None:
                continue
            if k not in roundtrip:
                out.append(f"unknown field {path}.{k}".replace("..", "."))
            else:
                out += _diff(v, roundtrip[k], f"{path}.{k}")
        return out
    if isinstance(original, list):
        if not isinstance(roundtrip, list) or len(roundtrip) != len(original):
            return [f"{path}: list changed shape"]
        return [p for i, (a, b) in enumerate(zip(original, roundtrip)) for p in _diff(a, b, f"{path}[{i}]")]
    return [] if original == roundtrip else [f"{path}: {original!r} read back as {roundtrip!r}"]
