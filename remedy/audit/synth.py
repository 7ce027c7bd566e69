"""Write mountstats text in the kernel's layout: for the simulator, the benchmark and tests.

Only the fields gpu-remedy reads are given meaningful values; the rest are plausible constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from remedy.audit.mountstats import NFS3_OPS

NFS4_OPS = (
    "NULL", "READ", "WRITE", "COMMIT", "OPEN", "OPEN_CONFIRM", "OPEN_NOATTR", "OPEN_DOWNGRADE", "CLOSE",
    "SETATTR", "FSINFO", "RENEW", "SETCLIENTID", "SETCLIENTID_CONFIRM", "LOCK", "LOCKT", "LOCKU", "ACCESS",
    "GETATTR", "LOOKUP", "LOOKUP_ROOT", "REMOVE", "RENAME", "LINK", "SYMLINK", "CREATE", "PATHCONF", "STATFS",
    "READLINK", "READDIR", "SERVER_CAPS", "DELEGRETURN", "GETACL", "SETACL", "FS_LOCATIONS", "RELEASE_LOCKOWNER",
    "SECINFO", "FSID_PRESENT", "EXCHANGE_ID", "CREATE_SESSION", "DESTROY_SESSION", "SEQUENCE", "GET_LEASE_TIME",
    "RECLAIM_COMPLETE", "LAYOUTGET", "GETDEVICEINFO", "LAYOUTCOMMIT", "LAYOUTRETURN", "SECINFO_NO_NAME",
    "TEST_STATEID", "FREE_STATEID", "GETDEVICELIST", "BIND_CONN_TO_SESSION", "DESTROY_CLIENTID", "SEEK",
    "ALLOCATE", "DEALLOCATE", "LAYOUTSTATS", "CLONE", "COPY", "OFFLOAD_CANCEL", "LOOKUPP", "LAYOUTERROR",
    "COPY_NOTIFY",
)  # fmt: skip


@dataclass
class OpCounters:
    ops: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    queue_ms: int = 0
    rtt_ms: int = 0
    execute_ms: int = 0
    timeouts: int = 0
    errors: int = 0

    def line(self, name: str, with_errors: bool = True) -> str:
        vals = [self.ops, self.ops, self.timeouts, self.bytes_sent, self.bytes_recv, self.queue_ms, self.rtt_ms,
                self.execute_ms] + ([self.errors] if with_errors else [])  # fmt: skip
        return f"\t{name:>12}: " + " ".join(str(v) for v in vals)


@dataclass
class XprtCounters:
    protocol: str = "tcp"
    port: int = 700
    sends: int = 0
    req_u: int = 0
    bklog_u: int = 0
    max_slots: int = 0
    pending_u: int = 0

    def line(self) -> str:
        if self.protocol == "tcp":
            vals = [self.port, 1, 1, 0, 0, self.sends, self.sends, 0, self.req_u, self.bklog_u, self.max_slots,
                    0, self.pending_u]  # fmt: skip
        elif self.protocol == "udp":
            vals = [self.port, 1, self.sends, self.sends, 0, self.req_u, self.bklog_u, self.max_slots, 0,
                    self.pending_u]  # fmt: skip
        elif self.protocol == "rdma":
            vals = [0, 1, 1, 0, 0, self.sends, self.sends, 0, self.req_u, self.bklog_u] + [0] * 17
        else:
            vals = [1, 1, 0, 0, self.sends, self.sends, 0, self.req_u, self.bklog_u, self.max_slots, 0, self.pending_u]
        return f"\txprt:\t{self.protocol} " + " ".join(str(v) for v in vals)


@dataclass
class MountSpec:
    device: str
    mountpoint: str
    vers: str = "4.1"
    age: int = 3600
    proto: str = "tcp"
    ops: Mapping[str, OpCounters] = field(default_factory=dict)
    xprts: list[XprtCounters] = field(default_factory=lambda: [XprtCounters()])
    read_bytes: int = 0
    write_bytes: int = 0


def render_mount(spec: MountSpec) -> str:
    v3 = spec.vers.startswith("3")
    fstype = "nfs" if v3 else "nfs4"
    nconnect = f",nconnect={len(spec.xprts)}" if len(spec.xprts) > 1 else ""
    lines = [
        f"device {spec.device} mounted on {spec.mountpoint} with fstype {fstype} statvers=1.1",
        f"\topts:\trw,vers={spec.vers},rsize=1048576,wsize=1048576,namlen=255,acregmin=3,acregmax=60,acdirmin=30,"
        f"acdirmax=60,hard,proto={spec.proto}{nconnect},timeo=600,retrans=2,sec=sys,local_lock=none",
        f"\tage:\t{spec.age}",
        "\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255",
    ]
    if not v3:
        lines.append("\tnfsv4:\tbm0=0xfdffbfff,bm1=0xf9be3e,bm2=0x68800,acl=0x3,sessions,pnfs=not configured,lease_time=90,lease_expired=0")
    lines += [
        "\tsec:\tflavor=1,pseudoflavor=1",
        "\tevents:\t" + " ".join(["1"] * 27),
        f"\tbytes:\t{spec.read_bytes} {spec.write_bytes} 0 0 {spec.read_bytes} {spec.write_bytes} "
        f"{spec.read_bytes // 4096} {spec.write_bytes // 4096}",
        f"\tRPC iostats version: 1.1  p/v: 100003/{3 if v3 else 4} (nfs)",
    ]
    lines += [x.line() for x in spec.xprts]
    lines.append("\tper-op statistics")
    for name in NFS3_OPS if v3 else NFS4_OPS:
        lines.append(spec.ops.get(name, OpCounters()).line(name))
    return "\n".join(lines) + "\n\n"


def render_mountstats(specs: Iterable[MountSpec], other_mounts: Iterable[tuple[str, str, str]] = ()) -> str:
    """Non-NFS mounts (device, mountpoint, fstype) come first, as in a real file."""
    head = "".join(f"device {d} mounted on {m} with fstype {t}\n" for d, m, t in other_mounts)
    return head + "".join(render_mount(s) for s in specs)
