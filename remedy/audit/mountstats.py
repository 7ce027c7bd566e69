"""Parse Linux `/proc/self/mountstats` (NFSv3 and NFSv4.x) into typed records.

The layout follows the kernel's printers: `nfs_show_stats` (fs/nfs/super.c) writes the `device …` line,
`opts:`, `age:`, `caps:`, `sec:`, `events:` (27 counters), `bytes:` (8); `rpc_clnt_show_stats`
(net/sunrpc/stats.c) writes `RPC iostats version:` / `p/v:`, one `xprt:` line per transport (several with
`nconnect`; formats from xs_tcp/xs_udp/xs_local_print_stats and xprt_rdma_print_stats) and the
`per-op statistics` lines `OP: ops trans timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]`
(the 9th field exists on kernels ≥ 5.3). Non-NFS mounts are skipped and counted. Anything cut short raises
`MountstatsError` naming the line. A per-op table with fewer ops than the version's full table is read as it
is (prometheus/procfs does too; its fixtures carry NFSv3 and NFSv4 mounts listing only a few ops): the ops it
does not list are named in `NfsMount.ops_absent`, so an audit can say what it could not see.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from remedy.errors import RemedyError
from remedy.textinput import as_text


class MountstatsError(RemedyError, ValueError):
    """A mountstats file that cannot be read as the kernel writes it; the message names the line (a ValueError too)."""


EVENT_FIELDS = (
    "inoderevalidates", "dentryrevalidates", "datainvalidates", "attrinvalidates", "vfsopen", "vfslookup",
    "vfsaccess", "vfsupdatepage", "vfsreadpage", "vfsreadpages", "vfswritepage", "vfswritepages",
    "vfsgetdents", "vfssetattr", "vfsflush", "vfsfsync", "vfslock", "vfsrelease", "congestionwait",
    "setattrtrunc", "extendwrite", "sillyrenames", "shortreads", "shortwrites", "delay", "pnfsreads",
    "pnfswrites",
)  # fmt: skip
BYTES_FIELDS = (
    "normalreadbytes", "normalwritebytes", "directreadbytes", "directwritebytes", "serverreadbytes",
    "serverwritebytes", "readpages", "writepages",
)  # fmt: skip
OP_FIELDS = ("ops", "trans", "timeouts", "bytes_sent", "bytes_recv", "queue_ms", "rtt_ms", "execute_ms")

# Generic transport counters every xprt line may carry, in kernel order per protocol. The first list per
# protocol is the current format (statvers 1.1); shorter known lengths are older kernels.
_GENERIC = ("sends", "recvs", "bad_xids", "req_u", "bklog_u", "max_slots", "sending_u", "pending_u")
XPRT_FIELDS: dict[str, tuple[str, ...]] = {
    "tcp": ("port", "bind_count", "connect_count", "connect_time", "idle_time") + _GENERIC,
    "udp": ("port", "bind_count") + _GENERIC,
    "local": ("bind_count", "connect_count", "connect_time", "idle_time") + _GENERIC,
    # rdma prints no max_slots/sending_u/pending_u; after bklog_u come 11 (+6 on kernels ≥ 4.13) RDMA counters.
    "rdma": ("port", "bind_count", "connect_count", "connect_time", "idle_time", "sends", "recvs", "bad_xids",
             "req_u", "bklog_u", "read_chunk_count", "write_chunk_count", "reply_chunk_count",
             "total_rdma_request", "total_rdma_reply", "pullup_copy_count", "fixup_copy_count",
             "hardway_register_count", "failed_marshal_count", "bad_reply_count", "nomsg_call_count",
             "mrs_recycled", "mrs_orphaned", "mrs_allocated", "local_inv_needed", "empty_sendctx_q",
             "reply_waits_for_send"),
}  # fmt: skip
XPRT_LENGTHS: dict[str, tuple[int, ...]] = {"tcp": (13, 10), "udp": (10, 7), "local": (12, 9), "rdma": (27, 21)}

NFS3_OPS = (
    "NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE", "CREATE", "MKDIR",
    "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK", "READDIR", "READDIRPLUS", "FSSTAT", "FSINFO",
    "PATHCONF", "COMMIT",
)  # fmt: skip
NFS4_FIRST_OPS = ("NULL", "READ", "WRITE", "COMMIT")  # every NFSv4 kernel prints these first

_DEVICE = re.compile(r"^device (\S+) mounted on (\S+) with fstype (\S+)(?: statvers=(\S+))?\s*$")
_RPC = re.compile(r"^RPC iostats version:\s*(\S+)\s+p/v:\s*(\d+)/(\d+)\s*\((\w+)\)\s*$")


class OpStats(NamedTuple):
    """Cumulative RPC statistics of one NFS operation (times in milliseconds, summed over all requests).

    A NamedTuple, not a dataclass: a 2,048-node audit builds ~800k of them (bench/nfs_audit.py).
    """

    op: str
    ops: int = 0
    trans: int = 0
    timeouts: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    queue_ms: int = 0  # task start → transmit: mostly waiting for an RPC slot
    rtt_ms: int = 0  # transmit → reply: network + server
    execute_ms: int = 0  # task start → done (≈ queue + rtt)
    errors: int | None = None  # kernels ≥ 5.3 only


@dataclass(frozen=True, slots=True)
class Transport:
    """One `xprt:` line. Fields the protocol or kernel does not print are None."""

    protocol: str
    port: int | None = None
    bind_count: int = 0
    connect_count: int | None = None
    connect_time: int | None = None
    idle_time: int | None = None
    sends: int = 0
    recvs: int = 0
    bad_xids: int = 0
    req_u: int = 0  # Σ requests in flight, sampled at each send
    bklog_u: int = 0  # Σ backlog queue length (requests waiting for a slot), sampled at each send
    max_slots: int | None = None  # high-water mark of slots in use
    sending_u: int | None = None
    pending_u: int | None = None
    rdma: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class NfsMount:
    device: str
    mountpoint: str
    fstype: str
    statvers: str
    line: int  # 1-based line of the `device` line
    opts: dict[str, str] = field(default_factory=dict)
    age_seconds: int | None = None
    caps: dict[str, str] = field(default_factory=dict)
    sec: dict[str, str] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    rpc_version: str = ""
    program: int | None = None
    program_version: int | None = None
    transports: list[Transport] = field(default_factory=list)
    ops: dict[str, OpStats] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)  # lines we keep but do not interpret (nfsv4:, fsc:…)
    ops_absent: tuple[str, ...] = ()  # ops of the version's table that this mount's per-op list leaves out

    @property
    def nfs_version(self) -> str:
        """'3', '4.0', '4.1', '4.2' from the mount options (fallback: the RPC program version)."""
        vers = self.opts.get("vers") or self.opts.get("nfsvers")
        if vers:
            return vers
        return str(self.program_version or ("4" if self.fstype == "nfs4" else "3"))

    @property
    def nconnect(self) -> int:
        return int(self.opts.get("nconnect", "1"))

    @property
    def key(self) -> tuple[str, str]:
        return (self.device, self.mountpoint)


@dataclass(slots=True)
class Mountstats:
    mounts: list[NfsMount]
    skipped: int = 0  # non-NFS mounts
    skipped_fstypes: Counter = field(default_factory=Counter)
    source: str = "<text>"

    def by_key(self) -> dict[tuple[str, str], NfsMount]:
        return {m.key: m for m in self.mounts}


def _ints(values: list[str], where: str) -> list[int]:
    try:
        return [int(v) for v in values]
    except ValueError:
        raise MountstatsError(f"{where}: expected whole numbers, got {' '.join(values)[:80]!r}") from None


def _kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        k, _, v = part.partition("=")
        out[k] = v
    return out


def parse_xprt(text: str, where: str) -> Transport:
    parts = text.split()
    if not parts:
        raise MountstatsError(f"{where}: empty xprt line")
    proto, values = parts[0], parts[1:]
    if proto not in XPRT_FIELDS:
        raise MountstatsError(f"{where}: unknown transport {proto[:40]!r} (expected tcp, udp, rdma or local)")
    if len(values) not in XPRT_LENGTHS[proto]:
        want = " or ".join(str(n) for n in XPRT_LENGTHS[proto])
        raise MountstatsError(f"{where}: xprt {proto} has {len(values)} fields, expected {want} (truncated?)")
    nums = _ints(values, where)
    if proto == "rdma":
        generic = dict(zip(XPRT_FIELDS[proto][:10], nums[:10]))
        return Transport(protocol=proto, rdma=dict(zip(XPRT_FIELDS[proto][10:], nums[10:])), **generic)
    return Transport(proto, **dict(zip(XPRT_FIELDS[proto], nums)))  # type: ignore[arg-type]  # counters by name


_ZERO9, _ZERO8 = " 0" * 9, " 0" * 8  # the kernel prints "%12s: %lu %lu …": most ops of a mount stay idle
_zero9: dict[str, OpStats] = {}  # op name → its shared all-zero record (9-field kernels)
_zero8: dict[str, OpStats] = {}  # … and for 8-field kernels (errors None)


def zero_op(name: str, with_errors: bool = True) -> OpStats:
    """The shared all-zero record of an op (idle ops are most of a file; sharing keeps parse and diff cheap)."""
    cache = _zero9 if with_errors else _zero8
    op = cache.get(name)
    if op is None:
        op = cache[name] = OpStats(name, 0, 0, 0, 0, 0, 0, 0, 0, 0 if with_errors else None)
    return op


def _parse_op(line: str, source: str, lineno: int) -> OpStats:
    name, sep, rest = line.partition(":")
    if rest == _ZERO9 or rest == _ZERO8:
        return zero_op(name, rest == _ZERO9)
    if not sep or not name or " " in name:
        raise MountstatsError(
            f"{source}: line {lineno}: expected 'OP: counters' in per-op statistics, got {line[:60]!r}"
        )
    values = rest.split()
    n = len(values)
    if n != 9 and n != 8:
        raise MountstatsError(f"{source}: line {lineno}: {name[:40]} has {n} counters, expected 8 or 9 (truncated?)")
    try:
        nums: list[int | None] = list(map(int, values))
    except ValueError:
        raise MountstatsError(f"{source}: line {lineno}: expected whole numbers, got {rest.strip()[:80]!r}") from None
    if n == 8:
        nums.append(None)
    return OpStats(name, *nums)  # type: ignore[arg-type]  # 8 ints, then errors (None before kernel 5.3)


def _check_complete(m: NfsMount, where: str) -> None:
    missing = [n for n, ok in (("events:", m.events), ("bytes:", m.bytes), ("RPC iostats", m.rpc_version),
                                ("xprt:", m.transports), ("per-op statistics", m.ops)) if not ok]  # fmt: skip
    if missing:
        raise MountstatsError(f"{where}: mount {m.mountpoint[:120]} (line {m.line}) ends before {missing[0]} (truncated?)")
    expected = NFS3_OPS if m.nfs_version.startswith("3") else NFS4_FIRST_OPS
    m.ops_absent = tuple(op for op in expected if op not in m.ops)


_OP_LINE = re.compile(r"^[ \t]*([^:\s]+):([^\n]*)\n", re.M)
_PER_OP = "per-op statistics\n"


def _parse_ops(section: str, source: str, first_line: int, into: dict[str, OpStats]) -> None:
    """The per-op lines of one mount. Matched in bulk (C speed); any stray line → the slow path names it."""
    pairs = _OP_LINE.findall(section)
    body = section.rstrip()
    if body and body.count("\n") + 1 != len(pairs):  # a line the pattern skipped (or blank lines inside): look
        for offset, raw in enumerate(section.splitlines()):
            line = raw.strip()
            if line and not _OP_LINE.match(line + "\n"):
                raise MountstatsError(
                    f"{source}: line {first_line + offset}: expected 'OP: counters' in per-op statistics, "
                    f"got {line[:60]!r}"
                )
    zeros9, zeros8, cache9, cache8 = _ZERO9, _ZERO8, _zero9, _zero8
    for name, rest in pairs:
        if rest == zeros9:
            into[name] = cache9[name] if name in cache9 else zero_op(name, True)
        elif rest == zeros8:
            into[name] = cache8[name] if name in cache8 else zero_op(name, False)
        else:
            values = rest.split()
            n = len(values)
            try:
                if n == 9:
                    into[name] = OpStats(name, *map(int, values))
                    continue
                if n == 8:
                    into[name] = OpStats(name, *map(int, values), None)  # type: ignore[call-arg]  # 8 values, then errors
                    continue
            except ValueError:
                pass
            # Rare: find the line for the message.
            lineno = first_line + section[: section.index(f"{name}:{rest}")].count("\n")
            _parse_op(f"{name}:{rest}", source, lineno)


def _parse_header(cur: NfsMount, line: str, source: str, lineno: int) -> None:
    key, sep, rest = line.partition(":")
    if key == "RPC iostats version":
        rpc = _RPC.match(line)
        if rpc:
            cur.rpc_version = rpc.group(1)
            cur.program, cur.program_version = int(rpc.group(2)), int(rpc.group(3))
            return
    where = f"{source}: line {lineno}"
    if not sep:
        raise MountstatsError(f"{where}: unexpected line {line[:60]!r}")
    rest = rest.strip()
    if key == "opts":
        cur.opts = _kv(rest)
    elif key == "age":
        cur.age_seconds = _ints([rest], where)[0]
    elif key == "caps":
        cur.caps = _kv(rest)
    elif key == "sec":
        cur.sec = _kv(rest)
    elif key in ("events", "bytes"):
        names = EVENT_FIELDS if key == "events" else BYTES_FIELDS
        values = rest.split()
        if len(values) != len(names):
            raise MountstatsError(f"{where}: {key}: has {len(values)} counters, expected {len(names)} (truncated?)")
        try:
            setattr(cur, key, dict(zip(names, map(int, values))))
        except ValueError:
            _ints(values, where)  # raises with the line
    elif key == "xprt":
        cur.transports.append(parse_xprt(rest, where))
    else:
        cur.extra[key] = rest


def _blocks(text: str):
    """(first line number, block text) per `device` line; text before the first one is its own block."""
    starts = [0]
    pos = -1
    while True:
        pos = text.find("\ndevice ", pos + 1)
        if pos < 0:
            break
        starts.append(pos + 1)
    starts.append(len(text))
    line = 1
    for a, b in zip(starts, starts[1:]):
        block = text[a:b]
        yield line, block
        line += block.count("\n")


def parse_mountstats(text: str | bytes, source: str = "<text>") -> Mountstats:
    """Parse the full text of a mountstats file. Raises MountstatsError on truncated or malformed input."""
    text = as_text(text, source, MountstatsError)
    if text and not text.endswith("\n"):
        last = text.count("\n") + 1
        raise MountstatsError(f"{source}: line {last}: file ends mid-line (truncated?)")
    result = Mountstats(mounts=[], source=source)
    for first, block in _blocks(text):
        if not block.startswith("device "):
            continue  # lines before the first mount (none in a kernel file)
        nl = block.find("\n")
        head_line = block[:nl].strip()
        m = _DEVICE.match(head_line)
        if not m:
            raise MountstatsError(f"{source}: line {first}: malformed device line: {head_line[:80]!r}")
        device, mountpoint, fstype, statvers = m.groups()
        if fstype not in ("nfs", "nfs4") or statvers is None:
            result.skipped += 1
            result.skipped_fstypes[fstype] += 1
            continue
        cur = NfsMount(device=device, mountpoint=mountpoint, fstype=fstype, statvers=statvers, line=first)
        cut = block.find(_PER_OP)
        header = block[nl + 1 : cut if cut >= 0 else len(block)]
        for offset, raw in enumerate(header.splitlines(), start=1):
            line = raw.strip()
            if line:
                _parse_header(cur, line, source, first + offset)
        last_line = first + block.count("\n") - 1
        if cut >= 0:
            ops_first = first + block.count("\n", 0, cut) + 1
            _parse_ops(block[cut + len(_PER_OP) :], source, ops_first, cur.ops)
        _check_complete(cur, f"{source}: line {last_line}")
        result.mounts.append(cur)
    return result


def read_mountstats(path: str | Path) -> Mountstats:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise MountstatsError(f"mountstats file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MountstatsError(f"cannot read {p}: {exc}") from None
    return parse_mountstats(text, source=str(p))
