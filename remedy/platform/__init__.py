"""The embedded platform: what `remedy up` and `remedy demo` run around the product, not the product itself.

- prefect_server: Prefect's API app behind the 503 replay (`python -m remedy.platform.prefect_server`), and
  `use_server` (the named server or remedy's own, proved by a nonce);
- dispatcher: the warm dispatcher that runs deployment runs in this process, and the direct incident → triage run sink;
- stack: `remedy up` / `down` / `receiver` (receiver + dispatcher + server + simulator, supervised);
- prometheus: the stack's own Prometheus for the nfs-audit deployment;
- processes: `<workdir>/running.json`, what up/demo left running;
- demo: `remedy demo`.

Flows, tasks and the domain never import this package (they run the same under a Kubernetes work pool).
"""
