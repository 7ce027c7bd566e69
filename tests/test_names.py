"""remedy.domain.names: identifiers built from node, rack and alert values fit every system that stores them."""

from __future__ import annotations

import re

import pytest

from remedy.domain import names

EKS = "ip-10-0-1-2.ec2.internal"
FQDN = "gpu-17.rack-3.dc1.example.com"
ODD = "GPU_07 <b>\n..//x"


@pytest.mark.parametrize("node", ["gpu003", EKS, FQDN, ODD, "a" * 300, "-.-", ""])
def test_every_identifier_fits_its_rule(node):
    key = names.artifact_key("replace", node, "story")
    assert re.fullmatch(r"[a-z0-9-]+", key) and len(key) <= 200, key  # Prefect's artifact key validator
    obj = names.object_name("remedy", "gpu-reset", node, 17)
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", obj) and len(obj) <= 63, obj  # DNS-1123 label
    ev = names.event_name(node, "0123456789abcdef")
    assert re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", ev) and len(ev) <= 253 and ".." not in ev, ev
    label = names.label_value(node)
    assert label == "" or (re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", label) and len(label) <= 63)
    f = names.file_name(node)
    assert f and "/" not in f and not f.startswith(".") and len(f) <= 200
    run = names.run_name(f"replace {node} (XID 79)")
    assert "\n" not in run and run.isprintable() and len(run) <= 200


def test_names_that_fit_are_kept_so_existing_keys_do_not_move():
    assert names.artifact_key("replace", "gpu003", "story") == "replace-gpu003-story"
    assert names.object_name("remedy", "gpu-reset", "gpu003", 17) == "remedy-gpu-reset-gpu003-17"
    assert names.event_name("gpu003", "0123abcd") == "gpu003.0123abcd"
    assert names.event_name(EKS, "0123abcd") == f"{EKS}.0123abcd"  # a DNS name is a valid Event name as it is
    assert names.label_value("rack-3") == "rack-3" and names.tag(f"node:{EKS}") == f"node:{EKS}"


def test_names_changed_to_fit_do_not_collide():
    dotted, dashed = names.artifact_key("fix", "a.b"), names.artifact_key("fix", "a-b")
    assert dashed == "fix-a-b" and dotted.startswith("fix-a-b-") and dotted != dashed
    assert names.artifact_key("replace", EKS) == names.artifact_key("replace", EKS)  # stable across runs
    long_a, long_b = names.object_name("x" * 80 + "a"), names.object_name("x" * 80 + "b")
    assert long_a != long_b and len(long_a) == len(long_b) == 63
