import pytest

from remedy.audit.delta import diff_mountstats
from remedy.audit.frames import mounts_frame, ops_frame
from remedy.audit.mountstats import parse_mountstats
from remedy.audit.rpc import audit_mount

from .helpers import table13_pair


def _audits():
    out = []
    for node, kind in (("gpu074", "WRITE"), ("gpu119", "READ")):
        before, after = table13_pair(kind)
        out += [audit_mount(d, node=node) for d in diff_mountstats(parse_mountstats(before), parse_mountstats(after))]
    return out


def test_ops_frame_rows_and_types():
    df = ops_frame(_audits())
    write = df[(df.node == "gpu074") & (df.op == "WRITE")].iloc[0]
    assert round(write.slot_wait_ms) == 1495 and round(write.execute_ms) == 1621
    read = df[(df.node == "gpu119") & (df.op == "READ")].iloc[0]
    assert read.slot_wait_ms == pytest.approx(31.5)
    # ops with no requests keep null latencies rather than dividing by zero
    idle = df[(df.op == "NULL")]
    assert idle.slot_wait_ms.isna().all() and (idle.ops == 0).all()
    assert str(df.ops.dtype) == "int64" and len(df) == 2 * 64


def test_mounts_frame_one_row_per_mount():
    df = mounts_frame(_audits())
    assert df.verdict.tolist() == ["rpc-slot-starvation", "rpc-slot-starvation"]
    assert [f"{u:.1%}" for u in df.link_utilization] == ["1.4%", "10.4%"]
    assert df.slot_table_full.all()


def test_schema_rejects_impossible_values():
    import pandera.errors

    audits = _audits()
    df = ops_frame(audits)
    from remedy.audit.frames import schemas

    df.loc[0, "slot_wait_share"] = 1.5
    with pytest.raises(pandera.errors.SchemaError, match="slot_wait_share"):
        schemas()[0].validate(df)
