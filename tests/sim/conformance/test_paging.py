"""Conformance: list paging with `limit` / `continue`, which the adapter uses for every list.

Sources: Kubernetes v1.36.2, staging/src/k8s.io/apiserver/pkg/storage/continue.go (token format, DecodeContinue's
errors), staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go (GetList: key order, NUL-suffixed start key,
remainingItemCount only without a selector) and etcd3/errors.go (a compacted token is 410 Expired with a token to
continue inconsistently)."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from tests.sim.conformance.wire import raw, strict, wait_for


def _token(value: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


def _names(items) -> list[str]:
    return [i.metadata.name for i in items]


def test_pages_cover_the_list_once_in_key_order_at_one_revision(sim, api_client):
    """etcd3/store.go GetList: items in key order; `continue` encodes (meta.k8s.io/v1, the first page's revision,
    the last key + NUL); every page reports the first page's resourceVersion; remainingItemCount counts the rest
    of an unfiltered list; the last page has no token."""
    _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=5")
    first = strict(api_client, "V1NodeList", body)
    token = _token(first.metadata._continue)
    assert token == {"v": "meta.k8s.io/v1", "rv": int(first.metadata.resource_version),
                     "start": first.items[-1].metadata.name + "\x00"}
    total = 5 + first.metadata.remaining_item_count
    names, cont = _names(first.items), first.metadata._continue
    while cont:
        _, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=5&continue={cont}")
        page = strict(api_client, "V1NodeList", body)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += _names(page.items)
        cont = page.metadata._continue
    assert len(names) == total == len(set(names)) and names == sorted(names)


def test_a_selected_list_has_no_remaining_item_count(sim, api_client):
    """etcd3/store.go: `getResp.Count counts in objects that do not match the pred ... Only set remainingItemCount
    if the predicate is empty` — a label or field selector leaves it out."""
    _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=3&labelSelector=nvidia.com%2Fgpu.present%3Dtrue")
    page = strict(api_client, "V1NodeList", body)
    assert len(page.items) == 3 and page.metadata._continue and page.metadata.remaining_item_count is None


def _raw(payload: bytes) -> str:
    """A token as EncodeContinue writes it: base64.RawURLEncoding, no padding."""
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


@pytest.mark.parametrize("token, why", [
    ("not*base64", "continue key is not valid: illegal base64 data at input byte 3"),
    # padding is malformed for RawURLEncoding: the real lane found the simulator accepting it
    (base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":5,"start":"a"}').decode(),
     "continue key is not valid: illegal base64 data at input byte 55"),
    (_raw(b"[1, 2"), "continue key is not valid: "),
    (_raw(b'{"v":"meta.k8s.io/v2","rv":5,"start":"a"}'),
     "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2"),
    (_raw(b'{"v":"meta.k8s.io/v1","rv":0,"start":"a"}'),
     "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (_raw(b'{"v":"meta.k8s.io/v1","rv":5,"start":""}'),
     "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"),
    (_raw(b'{"v":"meta.k8s.io/v1","rv":5,"start":"../secrets"}'), "continue key is not valid: ../secrets"),
])
def test_a_malformed_token_is_400(sim, api_client, token, why):
    """continue.go DecodeContinue: bad base64 (RawURLEncoding: padding is bad too) or JSON, an unknown version,
    rv 0, an empty start key or one that path.Clean changes are `continue key is not valid: ...`;
    storage.ValidateListOptions (staging/src/k8s.io/apiserver/pkg/storage/interfaces.go) answers each as 400
    BadRequest `invalid continue token: ...`."""
    code, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=3&continue={token}")
    status = strict(api_client, "V1Status", body)
    assert code == 400 and status.reason == "BadRequest"
    assert status.message.startswith(f"invalid continue token: {why}"), status.message


def test_a_continue_with_a_resource_version_is_400(sim, api_client):
    """storage/interfaces.go ValidateListOptions: a continue token carries its own revision, so resourceVersion
    (other than "0") beside it is refused."""
    first = strict(api_client, "V1NodeList", raw(sim, "GET", "/api/v1/nodes?limit=3")[2])
    code, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=3&continue={first.metadata._continue}"
                                    f"&resourceVersion={first.metadata.resource_version}")
    status = strict(api_client, "V1Status", body)
    assert code == 400 and status.message == "specifying resource version is not allowed when using continue"


def test_the_query_is_read_as_go_reads_it(sim, api_client):
    """The API server reads parameters from Go's url.Values (net/url parseQuery): a pair with a bad %-escape or a
    `;` is dropped, not an error — so `continue=%%%` is no continue at all (the real lane answered 200 with the
    first page where the simulator said 400) — and a repeated parameter is its first value
    (staging/src/k8s.io/apimachinery/pkg/runtime/conversion.go, Convert_Slice_string_To_string)."""
    code, _, body = raw(sim, "GET", "/api/v1/nodes?limit=3&continue=%%%")
    page = strict(api_client, "V1NodeList", body)
    assert code == 200 and _names(page.items) == ["gpu001", "gpu002", "gpu003"]
    _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=2&limit=5&labelSelector=x;y")
    page = strict(api_client, "V1NodeList", body)
    assert len(page.items) == 2 and page.metadata._continue  # limit 2, and no selector: every node is a candidate
    assert page.metadata.remaining_item_count == 14


def _etcd(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def compact(sim, recorded: bool) -> None:
    """etcd compacted up to now. `recorded`: the API server's way (etcd3/compact.go Compact: the revision put under
    `compact_rev_key`, then etcd's Compact), which its watch cache learns; else behind its back, as `etcdctl
    compact` does. On the real lane through etcd's v3 HTTP gateway (ETCD_URL in the control plane's env)."""
    if not hasattr(sim, "kubelet"):
        sim.cluster.store.compact(recorded=recorded)
        return
    url = sim.env["ETCD_URL"]
    rev = int(_etcd(url, "/v3/kv/range", {"key": _b64("compact_rev_key")})["header"]["revision"])
    if recorded:
        rev = int(_etcd(url, "/v3/kv/put", {"key": _b64("compact_rev_key"), "value": _b64(str(rev))})["header"][
            "revision"])
    _etcd(url, "/v3/kv/compaction", {"revision": rev, "physical": True})


def test_a_compaction_the_api_server_is_not_told_of_leaves_continue_tokens_working(sim, api_client):
    """cacher/cacher.go (ShouldDelegateContinue → shouldDelegateExactRV) with ListFromCacheSnapshot (beta, on since
    1.34): a continue token is served from the watch cache's snapshot at its revision while the cache holds one;
    the cache drops snapshots only below the compaction revision it learns from `compact_rev_key`
    (cacher/compactor.go compactIfNeeded; etcd3/compact.go runWatchLoop). So after `etcdctl compact` the next page
    is still a 200 at the first page's revision — what the real lane saw where the simulator answered 410."""
    _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=5")
    first = strict(api_client, "V1NodeList", body)
    raw(sim, "PATCH", "/api/v1/nodes/gpu010", {"metadata": {"labels": {"remedy.io/paging": "moved-on"}}},
        "application/merge-patch+json")
    compact(sim, recorded=False)
    code, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=100&continue={first.metadata._continue}")
    rest = strict(api_client, "V1NodeList", body)
    assert code == 200, body
    assert _names(first.items) + _names(rest.items) == sorted(_names(first.items) + _names(rest.items))
    assert len(first.items) + len(rest.items) == 16 and not rest.metadata._continue


def test_a_token_from_a_compacted_revision_is_410_expired_with_an_inconsistent_token(sim, api_client):
    """etcd3/errors.go handleCompactedErrorForPaging: 410, reason Expired, the `inconsistentContinue` message, and
    ListMeta.continue = the same start key at rv -1, which continues the list at the latest revision. On a real
    server this comes once the watch cache has learned the compaction (it polls every 15 s,
    cacher/compactor.go compactorPollPeriod) and delegates the token to etcd; until then the page is served from
    the cache (the test above). The simulator's compact() is that moment."""
    _, _, body = raw(sim, "GET", "/api/v1/nodes?limit=5")
    first = strict(api_client, "V1NodeList", body)
    raw(sim, "PATCH", "/api/v1/nodes/gpu010", {"metadata": {"labels": {"remedy.io/paging": "moved-on"}}},
        "application/merge-patch+json")
    compact(sim, recorded=True)
    # one poll of the cache's compactor (15 s) on a real server; at once in the simulator
    wait_for(lambda: raw(sim, "GET", f"/api/v1/nodes?limit=5&continue={first.metadata._continue}")[0] == 410,
             timeout=20, every=0.25)
    code, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=5&continue={first.metadata._continue}")
    status = strict(api_client, "V1Status", body)
    assert code == 410 and status.reason == "Expired" and status.code == 410
    assert status.message.startswith("The provided continue parameter is too old to display a consistent list")
    offered = _token(status.metadata._continue)
    assert offered == {**_token(first.metadata._continue), "rv": -1}
    code, _, body = raw(sim, "GET", f"/api/v1/nodes?limit=100&continue={status.metadata._continue}")
    rest = strict(api_client, "V1NodeList", body)
    assert code == 200 and _names(first.items) + _names(rest.items) == sorted(_names(first.items) + _names(rest.items))
    assert int(rest.metadata.resource_version) > int(first.metadata.resource_version)
