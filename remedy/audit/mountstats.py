"""Parse Linux `/proc/self/mountstats` (NFSv3 and NFSv4.x) into typed records.

The layout follows the kernel's printers: `nfs_show_stats` (fs/nfs/super.c) writes the `device …` line,
`opts:`, `age:`, `caps:`, `sec:`, `events:` (27 counters), `bytes:` (8); `rpc_clnt_show_stats`
(net/sunrpc/stats.c) writes `RPC iostats version:` / `p/v:`, one `xprt:` line per transport (several with
`nconnect`; formats from xs_tcp/xs_udp/xs_local_print_stats and xprt_rdma_print_stats) and the
`per-op statistics` lines `OP: ops trans timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]`
(the 9th field exists on kernels ≥ 5.3). Non-NFS mounts are skipped and counted. Anything cut short raises
`MountstatsError` naming the line.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from remedy.errors import RemedyError


class MountstatsError(RemedyError):
    """A mountstats file that cannot be read as the kernel writes it; the message names the line."""


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
_OP = re.compile(r"^([A-Z][A-Z0-9_]*|\d+):\s*(.*)$")


@dataclass(frozen=True, slots=True)
class OpStats:
    """Cumulative RPC statistics of one NFS operation (times in milliseconds, summed over all requests)."""

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
        raise MountstatsError(f"{where}: expected whole numbers, got {' '.join(values)!r}") from None


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
        raise MountstatsError(f"{where}: unknown transport {proto!r} (expected tcp, udp, rdma or local)")
    if len(values) not in XPRT_LENGTHS[proto]:
        want = " or ".join(str(n) for n in XPRT_LENGTHS[proto])
        raise MountstatsError(f"{where}: xprt {proto} has {len(values)} fields, expected {want} (truncated?)")
    named = dict(zip(XPRT_FIELDS[proto], _ints(values, where)))
    generic = {k: v for k, v in named.items() if k in Transport.__slots__}
    rdma = {k: v for k, v in named.items() if k not in Transport.__slots__}
    return Transport(protocol=proto, rdma=rdma, **generic)


def _parse_op(name: str, rest: str, where: str) -> OpStats:
    values = rest.split()
    if len(values) not in (8, 9):
        raise MountstatsError(f"{where}: {name} has {len(values)} counters, expected 8 or 9 (truncated?)")
    nums = _ints(values, where)
    return OpStats(name, *nums[:8], errors=nums[8] if len(nums) == 9 else None)


def _check_complete(m: NfsMount, where: str) -> None:
    missing = [n for n, ok in (("events:", m.events), ("bytes:", m.bytes), ("RPC iostats", m.rpc_version),
                                ("xprt:", m.transports), ("per-op statistics", m.ops)) if not ok]  # fmt: skip
    if missing:
        raise MountstatsError(f"{where}: mount {m.mountpoint} (line {m.line}) ends before {missing[0]} (truncated?)")
    expected = NFS3_OPS if m.nfs_version.startswith("3") else NFS4_FIRST_OPS
    absent = [op for op in expected if op not in m.ops]
    if absent:
        raise MountstatsError(
            f"{where}: mount {m.mountpoint} (line {m.line}) per-op statistics stop before {absent[0]} (truncated?)"
        )


def parse_mountstats(text: str, source: str = "<text>") -> Mountstats:
    """Parse the full text of a mountstats file. Raises MountstatsError on truncated or malformed input."""
    if text and not text.endswith("\n"):
        last = text.count("\n") + 1
        raise MountstatsError(f"{source}: line {last}: file ends mid-line (truncated?)")
    result = Mountstats(mounts=[], source=source)
    cur: NfsMount | None = None
    in_ops = False
    lineno = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        where = f"{source}: line {lineno}"
        if line.startswith("device "):
            if cur is not None:
                _check_complete(cur, where)
                result.mounts.append(cur)
                cur = None
            m = _DEVICE.match(line)
            if not m:
                raise MountstatsError(f"{where}: malformed device line: {line[:80]!r}")
            device, mountpoint, fstype, statvers = m.groups()
            if fstype not in ("nfs", "nfs4") or statvers is None:
                result.skipped += 1
                result.skipped_fstypes[fstype] += 1
                continue
            cur = NfsMount(device=device, mountpoint=mountpoint, fstype=fstype, statvers=statvers, line=lineno)
            in_ops = False
            continue
        if cur is None:
            continue  # detail of a skipped non-NFS mount (none are printed today, but be lenient)
        if in_ops:
            op = _OP.match(line)
            if not op:
                raise MountstatsError(f"{where}: expected 'OP: counters' in per-op statistics, got {line[:60]!r}")
            cur.ops[op.group(1)] = _parse_op(op.group(1), op.group(2), where)
            continue
        if line == "per-op statistics":
            in_ops = True
            continue
        rpc = _RPC.match(line)
        if rpc:
            cur.rpc_version = rpc.group(1)
            cur.program, cur.program_version = int(rpc.group(2)), int(rpc.group(3))
            continue
        key, sep, rest = line.partition(":")
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
                raise MountstatsError(
                    f"{where}: {key}: has {len(values)} counters, expected {len(names)} (truncated?)"
                )
            setattr(cur, key, dict(zip(names, _ints(values, where))))
        elif key == "xprt":
            cur.transports.append(parse_xprt(rest, where))
        else:
            cur.extra[key] = rest
    if cur is not None:
        _check_complete(cur, f"{source}: line {lineno}")
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
