"""List paging (`limit` / `continue`) as the API server does it over etcd.

- The continue token is base64url (unpadded) JSON `{"v": "meta.k8s.io/v1", "rv": <list revision>, "start": <key
  after the last item>}`, the key being the object's storage key below the resource prefix ("ns/name", or "name"
  for cluster-scoped kinds) plus "\\x00" (staging/src/k8s.io/apiserver/pkg/storage/continue.go, `EncodeContinue`;
  etcd3/store.go appends the NUL to the last key returned). Items come in key order.
- A malformed token is a 400 "invalid continue token: continue key is not valid: ..." (`DecodeContinue`'s errors,
  wrapped by storage.ValidateListOptions); the token is unpadded base64url, and padding is malformed.
- A token whose revision was compacted is a 410 `Expired` whose Status carries a fresh token with rv -1 that would
  continue the list at the latest revision, inconsistently (etcd3/errors.go, `handleCompactedErrorForPaging`).
  etcd compacts every 5 minutes by default; here `ObjectStore.compact()` does it when a test says so. On a real
  v1.36 server the token is first served from the watch cache's snapshot at its revision (cacher.go
  ShouldDelegateContinue → shouldDelegateExactRV, ListFromCacheSnapshot): 200 after etcd's compaction until the
  cache learns it through `compact_rev_key` (within its 15 s poll, cacher/compactor.go), then 410; a compaction
  that skips that key (`etcdctl compact`) never makes a token expire while the cache holds its snapshot
  (`compact(recorded=False)`, tests/sim/conformance/test_paging.py).
- `remainingItemCount` is set only for a list without label or field selector (etcd3/store.go counts what is
  left under the key range; it cannot know how many of those a selector would keep).

Not modelled: a real server serves every continued page from the first page's snapshot (objects changed since do
not show); the simulator serves the current state from the token's key on (remedy/sim/README.md).
"""

from __future__ import annotations

import base64
import json

from remedy.sim.store import ApiError, bad_request

VERSION = "meta.k8s.io/v1"
# etcd3/errors.go `inconsistentContinue`, word for word: clients match on it
EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
           "list without the continue parameter, or use the continue token in this response to retrieve the "
           "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
           "that were created, modified, or deleted between the time the first chunk was returned and now may show "
           "up in the list.")


class ContinueExpired(ApiError):
    """410 Expired whose Status offers a token to continue inconsistently (ListMeta.continue)."""

    def __init__(self, token: str) -> None:
        super().__init__(410, "Expired", EXPIRED)
        self.token = token

    def status(self) -> dict:
        body = super().status()
        body["metadata"] = {"continue": self.token}
        return body


def storage_key(obj: dict) -> str:
    meta = obj["metadata"]
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta['name']}" if ns else meta["name"]


def encode(start_key: str, rv: int) -> str:
    raw = json.dumps({"v": VERSION, "rv": rv, "start": start_key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _raw_url_b64decode(token: str) -> bytes:
    """Go's base64.RawURLEncoding.DecodeString: the URL alphabet and no padding; an "=" or any other character is
    `illegal base64 data at input byte N` (encoding/base64 CorruptInputError), as is a lone trailing character.
    (Python's urlsafe_b64decode accepts padding and drops unknown characters: a real server does neither.)"""
    bad = next((i for i, ch in enumerate(token) if ch not in _B64URL), None)
    if bad is None and len(token) % 4 == 1:
        bad = len(token) - 1
    if bad is not None:
        raise ValueError(f"illegal base64 data at input byte {bad}")
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _invalid(why: str) -> ApiError:
    # storage.ValidateListOptions (staging/src/k8s.io/apiserver/pkg/storage/interfaces.go) wraps every
    # DecodeContinue error: NewBadRequest("invalid continue token: " + err)
    return bad_request(f"invalid continue token: {why}")


def decode(token: str) -> tuple[str, int]:
    """(start key, list revision) of a continue token; -1 = continue at the latest revision. continue.go
    DecodeContinue's checks in its order, with its words."""
    try:
        data = json.loads(_raw_url_b64decode(token))
    except ValueError as exc:  # bad base64, or not JSON (json.JSONDecodeError is a ValueError)
        raise _invalid(f"continue key is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise _invalid("continue key is not valid: json: cannot unmarshal into Go value of type "
                       "storage.continueToken")
    if data.get("v") != VERSION:
        raise _invalid(f"continue key is not valid: server does not recognize this encoded version "
                       f"{data.get('v') or ''}")
    rv, start = data.get("rv", 0), data.get("start", "")
    if not isinstance(rv, int) or isinstance(rv, bool) or not isinstance(start, str):
        raise _invalid("continue key is not valid: json: cannot unmarshal into Go struct field continueToken")
    if rv == 0:
        raise _invalid("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not start:
        raise _invalid("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
    # path.Clean guards against a start key that climbs out of the resource's key range ("../")
    key = start if start.startswith("/") else "/" + start
    if _clean(key) != key:
        raise _invalid(f"continue key is not valid: {start}")
    return start, rv


def _clean(path: str) -> str:
    """Go's path.Clean for a rooted path: no empty, "." or ".." elements, no trailing slash."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)


def page(items: list, key_of, matches, query: dict, current_rv: int, compacted_rv: int,
         selected: bool) -> tuple[list, str, int | None, int]:
    """(this page, continue token or "", remainingItemCount or None, the list's resourceVersion).

    As etcd3's GetList: items in key order from the token's start key, the selector applied on the way, and the
    page closed as soon as it is full and one more match exists — so a page costs its size plus a sort, not a pass
    of the selector over the whole collection."""
    import bisect

    keyed = sorted((key_of(e), e) for e in items) if items else []
    keys = [k for k, _ in keyed]
    rv, start = current_rv, 0
    if query.get("continue"):
        start_key, rv = decode(query["continue"])
        if query.get("resourceVersion") not in (None, "", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        if 0 < rv < compacted_rv:
            raise ContinueExpired(encode(start_key, -1))
        if rv < 0:
            rv = current_rv
        start = bisect.bisect_left(keys, start_key)
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise bad_request(f"limit must be an integer, got {query.get('limit')!r}") from None
    out: list = []
    last = start
    for i in range(start, len(keyed)):
        if not matches(keyed[i][1]):
            continue
        if limit > 0 and len(out) == limit:  # one more match exists: this page is full
            token = encode(keys[last] + "\x00", rv)
            return out, token, (None if selected else len(keyed) - last - 1), rv
        out.append(keyed[i][1])
        last = i
    return out, "", None, rv
