"""Object validation with the real API server's field paths and words (422 Invalid, 400 for wrong JSON types)."""

from __future__ import annotations

import json
import re

from remedy.sim.store import bad_request, invalid

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _qualified_name(key: str) -> str | None:
    """Why `key` is not a valid label/taint key (None when it is)."""
    if not isinstance(key, str) or not key:
        return "name part must be non-empty"
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if len(name) > 63 or not _NAME_PART.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character")
    return None


def _label_value(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63 or not _NAME_PART.match(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def validate(kind: str, obj: dict) -> None:
    """Raise ApiError (422/400) when `obj` is not a valid `kind`."""
    if not isinstance(obj, dict):
        raise bad_request(f"the body of a {kind} must be a JSON object")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise bad_request(f"{kind}: metadata must be an object")
    name = meta.get("name", "")
    causes: list[tuple[str, str, str]] = []
    if not name:
        causes.append(("metadata.name", "FieldValueRequired", "Required value: name or generateName is required"))
    elif not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                       "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"))
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise bad_request(f"json: cannot unmarshal {type(values).__name__} into Go struct field "
                              f"ObjectMeta.metadata.{field} of type map[string]string")
        for k, v in values.items():
            if not isinstance(v, str):
                raise bad_request(f"json: cannot unmarshal {type(v).__name__} into Go struct field "
                                  f"ObjectMeta.metadata.{field} of type string ({k!r})")
            why = _qualified_name(k)
            if why:
                causes.append((f"metadata.{field}", "FieldValueInvalid", f'Invalid value: "{k}": {why}'))
            if field == "labels":
                why = _label_value(v)
                if why:
                    causes.append(("metadata.labels", "FieldValueInvalid", f'Invalid value: "{v}": {why}'))
    check = {"Node": _node, "Pod": _pod, "Job": _job, "PodDisruptionBudget": _pdb,
             "PriorityClass": _priority_class}.get(kind)
    if check:
        check(obj, causes)
    if causes:
        raise invalid(kind, name or meta.get("generateName", ""), causes)


def _node(obj: dict, causes: list) -> None:
    spec = obj.get("spec") or {}
    if "unschedulable" in spec and not isinstance(spec["unschedulable"], bool):
        raise bad_request("json: cannot unmarshal into Go struct field NodeSpec.spec.unschedulable of type bool")
    taints = spec.get("taints")
    if taints is None:
        return
    if not isinstance(taints, list):
        raise bad_request("json: cannot unmarshal into Go struct field NodeSpec.spec.taints of type []v1.Taint")
    seen = set()
    for i, t in enumerate(taints):
        # validateNodeTaints is called with the path "metadata" (pkg/apis/core/validation/validation.go,
        # ValidateNode): the real server names taint causes metadata.taints[i] (checked on v1.36.2)
        path = f"metadata.taints[{i}]"
        if not isinstance(t, dict):
            raise bad_request(f"json: cannot unmarshal into Go value of type v1.Taint ({path})")
        key, effect, value = t.get("key"), t.get("effect"), t.get("value") or ""  # JSON null is ""
        if not key:
            causes.append((f"{path}.key", "FieldValueRequired", "Required value"))
        else:
            why = _qualified_name(key)
            if why:
                causes.append((f"{path}.key", "FieldValueInvalid", f'Invalid value: "{key}": {why}'))
        if not effect:
            causes.append((f"{path}.effect", "FieldValueRequired", "Required value"))
        elif effect not in TAINT_EFFECTS:
            causes.append((f"{path}.effect", "FieldValueNotSupported",
                           f'Unsupported value: "{effect}": supported values: "NoSchedule", "PreferNoSchedule", '
                           '"NoExecute"'))
        if not isinstance(value, str):
            raise bad_request(f"json: cannot unmarshal into Go struct field Taint.{path}.value of type string")
        if value and _label_value(value):
            causes.append((f"{path}.value", "FieldValueInvalid", f'Invalid value: "{value}": {_label_value(value)}'))
        if (key, effect) in seen:
            taint = json.dumps({"Key": key, "Value": value, "Effect": effect, "TimeAdded": None},
                               separators=(",", ":"))  # the internal core.Taint, as field.Duplicate prints it
            causes.append((f"{path}", "FieldValueDuplicate",
                           f"Duplicate value: {taint}: taints must be unique by key and effect pair"))
        seen.add((key, effect))


def _containers(spec: dict, path: str, causes: list) -> None:
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append((f"{path}.containers", "FieldValueRequired", "Required value"))
        return
    for i, c in enumerate(containers):
        if not isinstance(c, dict) or not c.get("name"):
            causes.append((f"{path}.containers[{i}].name", "FieldValueRequired", "Required value"))
        elif not c.get("image"):
            causes.append((f"{path}.containers[{i}].image", "FieldValueRequired", "Required value"))
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        raise bad_request(f"json: cannot unmarshal into Go struct field {path}.tolerations of type []v1.Toleration")
    selector = spec.get("nodeSelector")
    if selector is not None and (not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values())):
        raise bad_request(f"json: cannot unmarshal into Go struct field {path}.nodeSelector of type map[string]string")


def _pod(obj: dict, causes: list) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        causes.append(("spec", "FieldValueRequired", "Required value"))
        return
    _containers(spec, "spec", causes)


def _job(obj: dict, causes: list) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        causes.append(("spec", "FieldValueRequired", "Required value"))
        return
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        v = spec.get(field)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            causes.append((f"spec.{field}", "FieldValueInvalid",
                           f"Invalid value: {v!r}: must be greater than or equal to 0"))
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        causes.append(("spec.template.spec", "FieldValueRequired", "Required value"))
        return
    tspec = template["spec"]
    _containers(tspec, "spec.template.spec", causes)
    restart = tspec.get("restartPolicy")
    if restart in (None, "", "Always"):
        causes.append(("spec.template.spec.restartPolicy", "FieldValueRequired",
                       'Required value: valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{restart}": supported values: "OnFailure", "Never"'))
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        causes.append(("spec.template.spec.restartPolicy", "FieldValueInvalid",
                       f'Invalid value: "{restart}": only "Never" is supported when podFailurePolicy is specified'))
    _pod_failure_policy(spec, causes)
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and spec.get("podFailurePolicy") is not None and replacement != "Failed":
        causes.append(("spec.podReplacementPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{replacement}": supported values: "Failed"'))


def _pod_failure_policy(spec: dict, causes: list) -> None:
    """pkg/apis/batch/validation/validation.go, validatePodFailurePolicyRule (the parts a Job here can get wrong)."""
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return
    for i, rule in enumerate((policy or {}).get("rules") or []):
        path = f"spec.podFailurePolicy.rules[{i}]"
        if rule.get("action") not in ("Count", "FailIndex", "FailJob", "Ignore"):
            causes.append((f"{path}.action", "FieldValueRequired" if not rule.get("action") else
                           "FieldValueNotSupported", 'Required value: valid values: ["Count" "FailIndex" "FailJob" '
                           '"Ignore"]' if not rule.get("action") else
                           f'Unsupported value: "{rule.get("action")}": supported values: "Count", "FailIndex", '
                           '"FailJob", "Ignore"'))
        if (rule.get("onExitCodes") is None) == (rule.get("onPodConditions") is None):
            causes.append((path, "FieldValueInvalid", "Invalid value: specifying one of OnExitCodes and "
                           "OnPodConditions is required"))


def _priority_class(obj: dict, causes: list) -> None:
    value = obj.get("value")
    if value is None:
        causes.append(("value", "FieldValueRequired", "Required value"))
    elif not isinstance(value, int) or isinstance(value, bool):
        raise bad_request("json: cannot unmarshal into Go struct field PriorityClass.value of type int32")
    elif value > 1_000_000_000 and not obj["metadata"].get("name", "").startswith("system-"):
        causes.append(("value", "FieldValueForbidden",
                       "Forbidden: maximum allowed value of a user defined priority is 1000000000"))
    if obj.get("preemptionPolicy") not in (None, "Never", "PreemptLowerPriority"):
        causes.append(("preemptionPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{obj.get("preemptionPolicy")}": supported values: "Never", '
                       '"PreemptLowerPriority"'))


def _pdb(obj: dict, causes: list) -> None:
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(("spec", "FieldValueInvalid", "minAvailable and maxUnavailable cannot be both set"))
