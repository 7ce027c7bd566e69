"""Checkpoint-I/O audit (seed 002 §4.2): where NFS request time goes, and how often to checkpoint.

    mountstats.py  parse /proc/self/mountstats (NFSv3/v4.x; tcp, udp, rdma, local; nconnect)
    delta.py       two snapshots → wrap-aware counter deltas over the interval
    rpc.py         per op: slot wait vs network+server; transport saturation; link use; verdict + remedies
    fleet.py       many nodes at once (audit_fleet) and verdicts from Prometheus frames
    prometheus.py  the same quantities from node_exporter's mountstats collector via the HTTP API
    frames.py      pandas views validated by pandera
    phases.py      save / load / training phases from cluster I/O (seed 002 §4.2.1)
    cadence.py     δ from write-spike length, MTBF, Young/Daly T_opt = √(2δM) and the current interval's cost
    synth.py       write mountstats text in the kernel's layout (simulator, bench, tests)
    cli.py         `remedy audit nfs`, `remedy checkpoint interval`

No Prefect import here: flows/nfs_audit.py and tasks/audit.py wire it to Prometheus, S3 and Slack.
"""
