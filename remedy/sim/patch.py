"""The three PATCH flavours a Kubernetes API server accepts.

Strategic merge uses the merge keys Kubernetes' Go types declare (`patchMergeKey`); any list not listed
here is atomic and replaced whole — notably `spec.taints` and `spec.tolerations`, so clients merge taints
by key themselves under a resourceVersion precondition.
"""

from __future__ import annotations

from remedy.sim.store import bad_request, deep_copy

# field name -> merge key, for lists of maps (a subset of the core/v1 and batch/v1 patchMergeKey tags).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
# Lists of scalars with patchStrategy=merge (set semantics).
MERGE_SCALAR_LISTS = {"finalizers"}


def strategic_merge(original: dict, patch: dict) -> dict:
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    return _merge_map(deep_copy(original), patch)


def _merge_map(target: dict | None, patch: dict) -> dict | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: deep_copy(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise bad_request(f"unknown patch directive $patch: {directive!r}")
    if not isinstance(target, dict):
        target = {}
    deletes = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$deleteFromPrimitiveList/")}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # $setElementOrder/…, $retainKeys, $deleteFromPrimitiveList/… (handled below)
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(target.get(key), value)
            if merged is None:
                target.pop(key, None)
            else:
                target[key] = merged
        elif isinstance(value, list):
            target[key] = _merge_list(key, target.get(key), value)
        else:
            target[key] = value
    for key, values in deletes.items():
        if isinstance(target.get(key), list):
            target[key] = [v for v in target[key] if v not in values]
    return target


def _merge_list(key: str, current, patch: list) -> list:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [deep_copy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if key in MERGE_SCALAR_LISTS and isinstance(current, list):
        return list(current) + [v for v in patch if v not in current]
    merge_key = MERGE_KEYS.get(key)
    if merge_key is None or not isinstance(current, list) or not all(isinstance(p, dict) for p in patch):
        return deep_copy([p for p in patch if not (isinstance(p, dict) and "$patch" in p)])
    result = deep_copy(current)
    for item in patch:
        if merge_key not in item:
            raise bad_request(f"map in list {key!r} has no merge key {merge_key!r}")
        idx = next((i for i, r in enumerate(result) if isinstance(r, dict) and r.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(deep_copy({k: v for k, v in item.items() if v is not None}))
        else:
            result[idx] = _merge_map(result[idx], item)
    return result


def merge_patch(original, patch):
    """RFC 7386 JSON merge patch: maps merge, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return deep_copy(patch)
    target = deep_copy(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts: list[str], path: str):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise bad_request(f"json patch: path {path!r} does not exist")
    return cur


def _get(doc, path: str):
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise bad_request(f"json patch: path {path!r} does not exist")


def _remove(doc, path: str):
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise bad_request(f"json patch: cannot remove missing path {path!r}")


def _add(doc, path: str, value, replace: bool = False):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise bad_request(f"json patch: cannot replace missing path {path!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise bad_request(f"json patch: index out of range in path {path!r}")
    else:
        raise bad_request(f"json patch: path {path!r} does not exist")
    return doc


def json_patch(original, ops) -> dict:
    """RFC 6902: add, remove, replace, move, copy, test (a failed test is a 422, as the real server answers)."""
    from remedy.sim.store import ApiError

    if not isinstance(ops, list):
        raise bad_request("json patch must be a JSON array of operations")
    doc = deep_copy(original)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"json patch operation {n} needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"json patch operation {n} ({kind}) needs 'value'")
        if kind == "add":
            doc = _add(doc, path, deep_copy(op["value"]))
        elif kind == "replace":
            doc = _add(doc, path, deep_copy(op["value"]), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise bad_request(f"json patch operation {n} ({kind}) needs 'from'")
            value = _remove(doc, op["from"]) if kind == "move" else deep_copy(_get(doc, op["from"]))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                               f"testing value {path} failed")
        else:
            raise bad_request(f"json patch: unknown op {kind!r}")
    return doc
