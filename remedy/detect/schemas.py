"""pandera schemas for the tabular results of the detect parsers (one place that says what a column means).

Validation failures raise `pandera.errors.SchemaError`; the parsers build frames that satisfy these, so a
failure means a parser bug, not bad input (bad input is counted as unparsed lines instead).
"""

from __future__ import annotations

import pandera.pandas as pa

# Kernel log (dmesg / journal) XID and SXid events: one row per matched line.
KERNEL_EVENTS = pa.DataFrameSchema(
    {
        "line_no": pa.Column(int, pa.Check.ge(1), description="1-based line number in the input"),
        "node": pa.Column(str, nullable=True, description="hostname from a journal/syslog prefix, else the caller's node"),
        "at": pa.Column("datetime64[ns, UTC]", nullable=True, description="wall-clock time when the prefix carries one"),
        "uptime_seconds": pa.Column(float, nullable=True, description="dmesg [seconds.micro] stamp, if present"),
        "kind": pa.Column(str, pa.Check.isin(["xid", "sxid"]), description="GPU XID or NVSwitch SXid"),
        "bus_id": pa.Column(str, description="PCI bus id as printed, normalised to dddd:bb:dd[.f] lower case"),
        "gpu": pa.Column("Int64", pa.Check.ge(0), nullable=True, description="GPU index from the bus-id map, if given"),
        "code": pa.Column(int, pa.Check.in_range(1, 65535), description="XID or SXid number"),
        "pid": pa.Column("Int64", nullable=True, description="pid=… when the driver printed a number"),
        "process": pa.Column(str, nullable=True, description="name=… when printed"),
        "severity": pa.Column(str, nullable=True, description="SXid only: Fatal / Non-fatal as printed"),
        "message": pa.Column(str, description="the rest of the line after the code"),
    },
    strict=True,
    coerce=False,
)

# dcgm-exporter samples in long form: one row per (series, value).
DCGM_SAMPLES = pa.DataFrameSchema(
    {
        "hostname": pa.Column(str, nullable=True, description="Hostname label"),
        "gpu": pa.Column("Int64", pa.Check.ge(0), nullable=True, description="gpu label (index)"),
        "uuid": pa.Column(str, nullable=True, description="UUID label"),
        "model": pa.Column(str, nullable=True, description="modelName label"),
        "device": pa.Column(str, nullable=True, description="device label, e.g. nvidia0"),
        "metric": pa.Column(str, pa.Check.str_length(min_value=1), description="metric (field) name"),
        "value": pa.Column(float, nullable=True, description="sample value; DCGM blank sentinels are NaN"),
        "labels": pa.Column(object, description="every label of the series as a dict"),
    },
    strict=True,
    coerce=False,
)
