"""Detection: turn exporter and log output into typed signals and decide a remediation path per signal.

    remedy.detect.signals  Signal, SignalKind, Verdict, Severity, classify(signal, thresholds, recurrences=1)
    remedy.detect.ib       InfiniBand: a port alert's outage (ib_port_of), cumulative downtime (seed 001)
    remedy.detect.parsers  parse_kernel_log, parse_dcgm_metrics + signals_from_dcgm, parse_alertmanager, parse_job_log
    remedy.domain.xid      the XID catalog: lookup(xid), explain(xid)
"""
